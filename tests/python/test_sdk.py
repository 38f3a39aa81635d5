"""Queen's Python client (queen-mq 2.6.0) against the real queen-edge worker (bare workerd via scripts/serve).

Plain asyncio (pytest is not in the venv): every `t_*` coroutine is one check, run in order on its own queue
names; the script prints one line per check and exits 1 if any failed. Needs QUEEN_URL (the launcher
tests/python/launch.mjs sets it):

    node tests/python/launch.mjs --var DEFAULT_SUBSCRIPTION_MODE:all -- .venv/bin/python tests/python/test_sdk.py

Optional: QE_ONLY=name1,name2 runs only those checks (a name that is no check is an error, exit 2).
"""

import asyncio
import os
import sys
import time
import traceback
import uuid
from datetime import datetime, timezone

import httpx

from queen import Queen

BASE = os.environ.get("QUEEN_URL")
RUN = uuid.uuid4().hex[:8]  # queue names are unique per run, so a reused persist dir does not interfere
WIRE = []  # (method, path, status) of every request the SDK sent, for diagnosis and route assertions


class RecordingTransport(httpx.AsyncBaseTransport):
    """httpx transport that records what the SDK sends (and what the worker answered)."""

    def __init__(self):
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request):
        response = await self._inner.handle_async_request(request)
        WIRE.append((request.method, request.url.raw_path.decode(), response.status_code))
        return response

    async def aclose(self):
        await self._inner.aclose()


def qn(name):
    return f"py-{name}-{RUN}"


# The worker's SHARDS when the tier runs sharded (QE_SHARDS, passed on by the launcher's harness).
SHARDS = int(os.environ.get("QE_SHARDS") or "1")


def shard_of(name, shards=SHARDS):
    """The shard a queue lives on (docs/decisions.md "Shards"): FNV-1a 64 of its UTF-8 name, modulo SHARDS."""
    h = 0xCBF29CE484222325
    for b in name.encode():
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h % shards


def qn_on_shard_of(other, name):
    """A queue name from `name` on the same shard as queue `other` (a transaction must stay on one shard)."""
    return next(qn(f"{name}{i}") for i in range(10_000) if shard_of(qn(f"{name}{i}")) == shard_of(other))


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def payloads(msgs):
    return [m.get("data") for m in msgs]


async def pop_all(queen, queue, group=None, partition=None, want=None, seconds=10.0, batch=50):
    """Pops (wait=false) until `want` messages came back or `seconds` passed; returns them (still leased)."""
    out = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        b = queen.queue(queue)
        if group:
            b = b.group(group)
        if partition:
            b = b.partition(partition)
        msgs = await b.batch(batch).wait(False).pop()
        out.extend(msgs)
        if want is not None and len(out) >= want:
            break
        if not msgs:
            if want is None:
                break
            await asyncio.sleep(0.1)
    return out


# ---------------------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------------------


async def t_push_single_batch_partition_txid(queen):
    q = qn("push")
    await queen.queue(q).create()
    r1 = await queen.queue(q).push({"data": {"n": 1}})
    check(isinstance(r1, list) and len(r1) == 1 and r1[0]["status"] == "queued", f"single push answer {r1}")
    r2 = await queen.queue(q).push([{"data": {"n": i}} for i in range(2, 12)])
    check(len(r2) == 10 and all(r["status"] == "queued" for r in r2), f"batch push answer {r2}")
    tid = f"tx-{RUN}-a"
    r3 = await queen.queue(q).partition("p-a").push([{"data": {"n": 100}, "transactionId": tid}])
    check(r3[0]["status"] == "queued", f"partition push answer {r3}")
    # Same transactionId again in the same partition: duplicate, not stored twice.
    r4 = await queen.queue(q).partition("p-a").push([{"data": {"n": 101}, "transactionId": tid}])
    check(r4[0]["status"] == "duplicate", f"duplicate push answer {r4}")
    # payload key and null payloads pass through
    r5 = await queen.queue(q).partition("p-b").push([{"payload": "plain"}, {"data": None}])
    check([r["status"] for r in r5] == ["queued", "queued"], f"payload/null push {r5}")

    # A queue-wide pop serves any partition; sort what came back by partition.
    everything = await pop_all(queen, q, want=14)
    by_part = {}
    for m in everything:
        by_part.setdefault(m["partition"], []).append(m)
    check(sorted(by_part) == ["Default", "p-a", "p-b"], f"partitions {sorted(by_part)}")
    default, pa, pb = by_part["Default"], by_part["p-a"], by_part["p-b"]
    check([m["data"]["n"] for m in default] == list(range(1, 12)), f"Default partition gave {payloads(default)}")
    check(len(pa) == 1 and pa[0]["data"] == {"n": 100} and pa[0]["transactionId"] == tid,
          f"partition p-a gave {pa}")
    check(payloads(pb) == ["plain", None], f"partition p-b gave {payloads(pb)}")
    check(len({m["partitionId"] for m in everything}) == 3, "partitionIds not distinct per partition")
    res = await queen.ack(default + pa + pb, True)
    check(res.get("success") is True, f"batch ack {res}")
    check(await pop_all(queen, q) == [], "messages came back after ack")


async def t_consume_success(queen):
    q = qn("consume-ok")
    await queen.queue(q).create()
    await queen.queue(q).push([{"data": {"i": i}} for i in range(30)])
    seen = []

    async def handler(msgs):
        batch = msgs if isinstance(msgs, list) else [msgs]
        seen.extend(m["data"]["i"] for m in batch)

    start = len(WIRE)
    await (queen.queue(q).group("workers").timeout_millis(1000).idle_millis(2500).limit(30).consume(handler))
    check(sorted(seen) == list(range(30)), f"consumed {sorted(seen)}")
    check(seen == list(range(30)), f"consume order {seen}")
    acks = [w for w in WIRE[start:] if w[1].startswith("/api/v1/ack")]
    check(acks and all(w[2] == 200 for w in acks), f"acks {acks}")
    check(any(w[1] == "/api/v1/ack/batch" for w in acks), f"consume did not use /ack/batch: {acks}")
    # Nothing left for the group; a second group still sees all of it.
    check(await pop_all(queen, q, group="workers") == [], "acked messages came back to the group")
    other = await pop_all(queen, q, group="auditors", want=30)
    check(len(other) == 30, f"second group got {len(other)}")


async def t_consume_raise_dlq_replay(queen):
    q = qn("dlq")
    await queen.queue(q).config({"retryLimit": 1, "retryDelay": 100, "leaseTime": 30}).create()
    tid = f"poison-{RUN}"
    await queen.queue(q).push([{"data": {"kind": "poison"}, "transactionId": tid}])
    calls = []
    stop = asyncio.Event()

    async def failing(msgs):
        batch = msgs if isinstance(msgs, list) else [msgs]
        calls.extend(m["transactionId"] for m in batch)
        raise RuntimeError("handler refuses")

    async def watch_dlq():
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            d = await queen.queue(q).dlq().get()
            if d.get("messages"):
                stop.set()
                return d
            await asyncio.sleep(0.2)
        stop.set()
        return None

    watcher = asyncio.create_task(watch_dlq())
    await queen.queue(q).timeout_millis(500).idle_millis(15000).consume(failing, signal=stop)
    dlq = await watcher
    check(dlq is not None, f"message never reached the DLQ (handler calls: {len(calls)})")
    check(calls == [tid, tid], f"retryLimit 1 means 2 deliveries, got {calls}")
    check(dlq.get("total") == 1 and len(dlq["messages"]) == 1, f"dlq listing {dlq}")
    row = dlq["messages"][0]
    check(row["transactionId"] == tid and row["data"] == {"kind": "poison"}, f"dlq row {row}")
    check("handler refuses" in (row.get("errorMessage") or ""), f"dlq errorMessage {row.get('errorMessage')}")
    check(await pop_all(queen, q) == [], "a dead-lettered message was still delivered")

    replay = await queen.admin.retry_message(row["partitionId"], row["transactionId"])
    check(isinstance(replay, dict) and not replay.get("error"), f"retry_message answer {replay}")
    after = await queen.queue(q).dlq().get()
    check(after.get("total", 0) == 0 and not after.get("messages"), f"DLQ row kept after replay {after}")

    got = []

    async def ok(msgs):
        got.extend(msgs if isinstance(msgs, list) else [msgs])

    await queen.queue(q).timeout_millis(500).idle_millis(2000).limit(1).consume(ok)
    check(len(got) == 1 and got[0]["data"] == {"kind": "poison"}, f"replay consumed {got}")
    check(replay.get("transactionId") == f"dlq:{row['id']}", f"replay answer {replay} for DLQ row id {row['id']}")
    check(got[0]["transactionId"] == f"dlq:{row['id']}", f"replayed transactionId {got[0]['transactionId']}")
    # A second retry of the same (now gone) DLQ row: 404 raises in the SDK, or an idempotent answer.
    try:
        again = await queen.admin.retry_message(row["partitionId"], row["transactionId"])
        check(isinstance(again, dict), f"second retry answer {again}")
    except httpx.HTTPStatusError as e:
        check(e.response.status_code == 404, f"second retry status {e.response.status_code}")
    check(await pop_all(queen, q) == [], "the replay came back after its ack")


async def t_consume_each_fail_then_succeed(queen):
    """.each(): one handler call and one single /ack per message; a raise nacks (failed) and the retry succeeds."""
    q = qn("each")
    await queen.queue(q).config({"retryLimit": 3, "retryDelay": 100}).create()
    await queen.queue(q).push([{"data": {"i": i}} for i in range(3)])
    calls = []

    async def flaky(msg):
        check(isinstance(msg, dict), f".each() handler got {type(msg)}")
        calls.append(msg["data"]["i"])
        if msg["data"]["i"] == 1 and calls.count(1) == 1:
            raise RuntimeError("first try fails")

    start = len(WIRE)
    await queen.queue(q).group("each").each().timeout_millis(500).idle_millis(2000).consume(flaky)
    check(calls == [0, 1, 1, 2], f"handler calls {calls}")
    acks = [w for w in WIRE[start:] if w[1].startswith("/api/v1/ack")]
    check(acks and all(w[1] == "/api/v1/ack" and w[2] == 200 for w in acks), f"acks {acks}")
    check(await pop_all(queen, q, group="each") == [], "messages left for the group")


async def t_ack_true_false_retry(queen):
    q = qn("ack")
    await queen.queue(q).config({"retryLimit": 5, "retryDelay": 100}).create()
    # Three partitions, one message each, so each ack acts on its own lane.
    for p in ("a", "b", "c", "d"):
        await queen.queue(q).partition(p).push([{"data": {"p": p}}])
    msgs = {}
    for p in ("a", "b", "c", "d"):
        got = await pop_all(queen, q, partition=p, want=1, seconds=3)
        check(len(got) == 1, f"pop partition {p} gave {got}")
        msgs[p] = got[0]
    r_ok = await queen.ack(msgs["a"], True)
    check(r_ok.get("success") is True, f"ack True {r_ok}")
    r_fail = await queen.ack(msgs["b"], False, {"error": "nope"})
    check(r_fail.get("success") is True, f"ack False {r_fail}")
    r_retry = await queen.ack(msgs["c"], "retry")
    check(r_retry.get("success") is True, f"ack 'retry' {r_retry}")
    r_dlq = await queen.ack(msgs["d"], "dlq", {"error": "sent to dlq by hand"})
    check(r_dlq.get("success") is True and r_dlq.get("dlq") is True, f"ack 'dlq' {r_dlq}")
    d = await queen.queue(q).dlq().get()
    check([m["transactionId"] for m in d.get("messages", [])] == [msgs["d"]["transactionId"]], f"dlq after 'dlq' ack {d}")
    check(await pop_all(queen, q, partition="d", seconds=1) == [], "dead-lettered message came back")
    # Acking the completed message again is harmless; acking with its (released) lease is refused or a no-op.
    check(await pop_all(queen, q, partition="a", seconds=1) == [], "completed message came back")
    c2 = await pop_all(queen, q, partition="c", want=1, seconds=3)
    check(len(c2) == 1 and c2[0]["transactionId"] == msgs["c"]["transactionId"], f"retry redelivery {c2}")
    check(c2[0].get("retryCount", 0) == 0, f"'retry' charged the budget: {c2[0].get('retryCount')}")
    await asyncio.sleep(0.3)  # retryDelay
    b2 = await pop_all(queen, q, partition="b", want=1, seconds=3)
    check(len(b2) == 1 and b2[0]["transactionId"] == msgs["b"]["transactionId"], f"failed redelivery {b2}")
    check(b2[0].get("retryCount", 1) == 1, f"failed did not charge the budget: {b2[0].get('retryCount')}")
    res = await queen.ack(b2 + c2, True)
    check(res.get("success") is True, f"final acks {res}")
    # A stale lease: acking the first delivery of b (its lease was released by the nack) must not succeed
    # silently as a different delivery... it is already committed, so either success (no-op) or refused.
    stale = await queen.ack(msgs["b"], True)
    check(isinstance(stale, dict) and "success" in stale, f"stale ack answer {stale}")
    check(await pop_all(queen, q) == [], "messages left after all acks")


async def t_renew(queen):
    q = qn("renew")
    await queen.queue(q).config({"leaseTime": 4}).create()
    await queen.queue(q).push([{"data": "keep"}])
    got = await pop_all(queen, q, want=1, seconds=3)
    popped_at = time.monotonic()  # the lease started before this
    check(len(got) == 1, f"pop {got}")
    msg = got[0]
    r = await queen.renew(msg)
    check(r.get("success") is True and r.get("newExpiresAt"), f"renew {r}")
    exp = datetime.fromisoformat(r["newExpiresAt"].replace("Z", "+00:00"))
    left = (exp - datetime.now(timezone.utc)).total_seconds()
    check(left > 10, f"renewed lease expires in {left:.1f} s (leaseTime 4)")
    r_list = await queen.renew([msg, msg])
    check(isinstance(r_list, list) and len(r_list) == 1 and r_list[0]["success"], f"renew list {r_list}")
    await asyncio.sleep(max(0.0, popped_at + 4.5 - time.monotonic()))  # past the original 4 s lease
    check(await pop_all(queen, q, seconds=1) == [], "message redelivered while its renewed lease was live")
    ack = await queen.ack(msg, True)
    check(ack.get("success") is True, f"ack after renew {ack}")
    gone = await queen.renew(msg)
    check(gone.get("success") is False, f"renew of a released lease answered {gone}")


async def t_seek(queen):
    q = qn("seek")
    g = "seekers"
    await queen.queue(q).create()
    await queen.queue(q).push([{"data": {"i": i}} for i in range(5)])
    first = await pop_all(queen, q, group=g, want=5)
    check([m["data"]["i"] for m in first] == list(range(5)), f"first read {payloads(first)}")
    await queen.ack(first, True, {"group": g})
    check(await pop_all(queen, q, group=g) == [], "group not drained")
    res = await queen.admin.seek_consumer_group(g, q, {"timestamp": "2000-01-01T00:00:00Z"})
    check(isinstance(res, dict) and res.get("success") is True, f"seek back answer {res}")
    again = await pop_all(queen, q, group=g, want=5)
    check([m["data"]["i"] for m in again] == list(range(5)), f"after seek back {payloads(again)}")
    res = await queen.admin.seek_consumer_group(g, q, {"toEnd": True})
    check(res.get("success") is True and res.get("seekToEnd") is True, f"seek to end answer {res}")
    check(await pop_all(queen, q, group=g) == [], "messages delivered after seek to end")
    # The seek released the live lease: acking the old delivery does not resurrect anything.
    await queen.queue(q).push([{"data": {"i": 5}}])
    tail = await pop_all(queen, q, group=g, want=1, seconds=3)
    check(payloads(tail) == [{"i": 5}], f"after seek to end + push {payloads(tail)}")
    await queen.ack(tail, True, {"group": g})


async def t_transaction(queen):
    # Transactions across shards are refused (two-phase commit is not built): dst shares src's shard.
    src = qn("tx-src")
    dst = qn_on_shard_of(src, "tx-dst")
    await queen.queue(src).create()
    await queen.queue(dst).create()
    await queen.queue(src).push([{"data": {"order": 1}}])
    got = await pop_all(queen, src, want=1, seconds=3)
    check(len(got) == 1, f"pop src {got}")
    out_tid = f"tx-out-{RUN}"
    result = await (
        queen.transaction()
        .ack(got[0])
        .queue(dst)
        .push([{"data": {"shipped": 1}, "transactionId": out_tid}, {"data": {"shipped": 2}}])
        .commit()
    )
    check(bool(result) and result.get("success") is True, f"transaction answer {dict(result)}")
    results = result.get("results") or []
    check(len(results) == 3, f"one result per ack and per pushed item, got {results}")
    check(await pop_all(queen, src, seconds=1) == [], "acked-in-transaction message came back")
    out = await pop_all(queen, dst, want=2)
    check(payloads(out) == [{"shipped": 1}, {"shipped": 2}], f"transaction pushes {payloads(out)}")
    check(out[0]["transactionId"] == out_tid, f"pushed transactionId {out[0]['transactionId']}")
    await queen.ack(out, True)
    # A transaction acking with a stale lease fails as a whole: its push must not land.
    try:
        bad = await (
            queen.transaction()
            .ack(got[0])
            .queue(dst)
            .push([{"data": {"shipped": "never"}}])
            .commit()
        )
        landed = bad.get("success") is True
    except Exception:  # the SDK raises on success:false
        landed = False
    leftover = await pop_all(queen, dst, seconds=1)
    check(not landed or leftover == [], f"stale-lease transaction: success={landed}, pushed {payloads(leftover)}")
    check(leftover == [], f"a failed transaction's push landed: {payloads(leftover)}")
    if SHARDS > 1:
        # Across shards: two-phase commit. The ack and the push land together...
        far = next(qn(f"tx-far{i}") for i in range(10_000) if shard_of(qn(f"tx-far{i}")) != shard_of(src))
        await queen.queue(src).push([{"data": {"order": 2}}])
        got2 = await pop_all(queen, src, want=1, seconds=3)
        across = await queen.transaction().ack(got2[0]).queue(far).push([{"data": {"far": 1}}]).commit()
        check(bool(across) and across.get("success") is True, f"cross-shard transaction answer {dict(across)}")
        check(len(across.get("results") or []) == 2, f"cross-shard results {across.get('results')}")
        check(await pop_all(queen, src, seconds=1) == [], "acked-in-cross-shard-transaction message came back")
        far_out = await pop_all(queen, far, want=1)
        check(payloads(far_out) == [{"far": 1}], f"cross-shard transaction push {payloads(far_out)}")
        await queen.ack(far_out, True)
        # ...and one whose ack names a lease that is gone applies nothing.
        try:
            bad = await queen.transaction().ack(got2[0]).queue(far).push([{"data": {"far": "never"}}]).commit()
            landed = bad.get("success") is True
        except Exception:  # noqa: BLE001 - the SDK raises on success:false
            landed = False
        check(not landed, "a cross-shard transaction with a stale lease succeeded")
        check(await pop_all(queen, far, seconds=1) == [], "a failed cross-shard transaction's push landed")


async def t_delete_queue(queen):
    q = qn("del")
    await queen.queue(q).create()
    await queen.queue(q).push([{"data": 1}])
    res = await queen.queue(q).delete()
    check(isinstance(res, dict) and not res.get("error"), f"delete answer {res}")
    check(await pop_all(queen, q) == [], "deleted queue still delivered")
    res = await queen.queue(q).delete()  # missing queue: still 2xx
    check(isinstance(res, dict), f"second delete answer {res}")


CHECKS = [
    t_push_single_batch_partition_txid,
    t_consume_success,
    t_consume_raise_dlq_replay,
    t_consume_each_fail_then_succeed,
    t_ack_true_false_retry,
    t_renew,
    t_seek,
    t_transaction,
    t_delete_queue,
]


async def main():
    if not BASE:
        print("QUEEN_URL is not set (run through tests/python/launch.mjs)", file=sys.stderr)
        return 2
    only = [s for s in os.environ.get("QE_ONLY", "").split(",") if s]
    names = [f.__name__[2:] for f in CHECKS]
    unknown = [s for s in only if s not in names]
    if unknown or (os.environ.get("QE_ONLY", "").strip() and not only):
        # A selection that runs nothing must not pass.
        print(f"QE_ONLY names no check ({', '.join(unknown) or 'empty'}); the checks are: {', '.join(names)}",
              file=sys.stderr)
        return 2
    queen = Queen(url=BASE, timeout_millis=15000, retry_attempts=1, transport=RecordingTransport())
    failed = []
    t_all = time.monotonic()
    try:
        for fn in CHECKS:
            name = fn.__name__[2:]
            if only and name not in only:
                continue
            t0 = time.monotonic()
            start = len(WIRE)
            try:
                await asyncio.wait_for(fn(queen), timeout=60)
                print(f"ok    {name} ({time.monotonic() - t0:.1f} s, {len(WIRE) - start} requests)", flush=True)
            except BaseException as e:  # noqa: BLE001 - report every failure, keep going
                if isinstance(e, (KeyboardInterrupt, SystemExit)):
                    raise
                failed.append(name)
                print(f"FAIL  {name} ({time.monotonic() - t0:.1f} s): {type(e).__name__}: {e}", flush=True)
                traceback.print_exc()
                print("  last requests of this check:")
                for w in WIRE[start:][-15:]:
                    print(f"    {w[0]} {w[1]} -> {w[2]}")
    finally:
        await queen.close()
    total = len([f for f in CHECKS if not only or f.__name__[2:] in only])
    print(f"python sdk (queen-mq 2.6.0): {total - len(failed)} passed, {len(failed)} failed "
          f"in {time.monotonic() - t_all:.1f} s; {len(WIRE)} requests")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

// Durability of the Broker Durable Object in real workerd: concurrent HTTP clients push and ack a few
// thousand messages, the whole process group of the listening Worker (workerd and its guard under scripts/serve,
// or wrangler and its workerd children with QE_WORKER_RUNTIME=wrangler) is killed with SIGKILL in the middle of
// the load, and a new one on the same state dir must show that
//   - every push answered 201/queued is there (acked, or delivered again),
//   - nothing whose ack was answered success is delivered again,
//   - everything not acked comes back (after its lease, which the queue keeps short),
//   - nothing else appears (no phantoms, no duplicates),
//   - the dedup keys survived (pushing a confirmed transactionId again answers `duplicate`).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { startWorker, tempPersistDir, getJson, isRunning } from './harness.mjs';

const QUEUE = 'durable';
const PARTITIONS = 8;
const LEASE_S = 4;
const PUSHERS = 12;
const CONSUMERS = 4;
const KILL_AFTER_CONFIRMED = Number(process.env.QE_DUR_KILL_AFTER || 2500);
const MAX_PUSHES = KILL_AFTER_CONFIRMED * 2; // the load would run on past the kill point

const state = tempPersistDir();
after(() => state.cleanup());

const post = (url, body) => fetch(url, {
  method: 'POST',
  headers: { 'Content-Type': 'application/json' },
  body: JSON.stringify(body),
  signal: AbortSignal.timeout(30_000),
});

/** Process group id of the process listening on `port` (scripts/serve's or wrangler's group, with workerd). */
function listenerGroup(port) {
  const out = execFileSync('ss', ['-Hltnp', `sport = :${port}`], { encoding: 'utf8' });
  const m = out.match(/pid=(\d+)/);
  if (!m) throw new Error(`no process listens on ${port}: ${out}`);
  return processGroup(Number(m[1]));
}

function processGroup(pid) {
  // /proc/PID/stat: "pid (comm) state ppid pgrp ..."; comm may contain spaces, so split after the last ')'.
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
}

/** Live (not zombie) pids, with their command names, in process group `pgid`. */
function groupMembers(pgid) {
  const members = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[2]) === pgid && fields[0] !== 'Z' && fields[0] !== 'X') {
        members.push(`${d}:${readFileSync(`/proc/${d}/comm`, 'utf8').trim()}`);
      }
    } catch { /* exited meanwhile */ }
  }
  return members;
}

test('SIGKILL of workerd mid-load loses no confirmed push and redelivers no confirmed ack', { timeout: 180_000 }, async () => {
  const confirmedPush = new Map(); // txid -> payload
  const uncertainPush = new Set(); // pushes whose answer never came (in flight at the kill)
  const confirmedAck = new Set();
  const uncertainAck = new Set();
  const deliveredBefore = new Set();
  let stopLoad = false;
  let pushedCount = 0;
  let killInfo = null;

  let w = await startWorker({ persistTo: state.dir });
  const pgid = listenerGroup(new URL(w.url).port);
  const membersBefore = groupMembers(pgid);
  assert.ok(membersBefore.some((m) => m.endsWith(':workerd')), `no workerd in group ${pgid}: ${membersBefore}`);

  const conf = await getJson(`${w.url}/api/v1/configure`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ queue: QUEUE, options: { leaseTime: LEASE_S, retryLimit: 3 } }),
  });
  assert.equal(conf.status, 200, JSON.stringify(conf.body));

  let killed;
  const killedPromise = new Promise((resolve) => { killed = resolve; });
  const maybeKill = () => {
    if (killInfo || confirmedPush.size < KILL_AFTER_CONFIRMED) return;
    killInfo = { at: Date.now(), confirmedPushes: confirmedPush.size, confirmedAcks: confirmedAck.size };
    process.kill(-pgid, 'SIGKILL');
    stopLoad = true;
    killed();
  };

  const t0 = Date.now();
  const pusher = async (id) => {
    let n = 0;
    while (!stopLoad && pushedCount < MAX_PUSHES) {
      const size = 1 + ((id * 7 + n) % 20);
      pushedCount += size;
      const partition = `p${(id + n) % PARTITIONS}`;
      const items = [];
      for (let k = 0; k < size; k++) {
        const tx = `d-${id}-${n}-${k}`;
        items.push({ queue: QUEUE, partition, transactionId: tx, payload: { tx, partition } });
      }
      n++;
      let res;
      try {
        res = await post(`${w.url}/api/v1/push`, { items });
      } catch {
        for (const it of items) uncertainPush.add(it.transactionId);
        continue;
      }
      const body = await res.json().catch(() => null);
      if (res.status === 201 && Array.isArray(body) && body.length === items.length) {
        body.forEach((r, i) => {
          if (r.status === 'queued') confirmedPush.set(items[i].transactionId, items[i].payload);
          else uncertainPush.add(items[i].transactionId);
        });
      } else {
        for (const it of items) uncertainPush.add(it.transactionId);
      }
      maybeKill();
    }
  };
  const consumer = async () => {
    while (!stopLoad) {
      let res;
      try {
        res = await fetch(`${w.url}/api/v1/pop/queue/${QUEUE}?batch=25&wait=true&timeout=200`,
          { signal: AbortSignal.timeout(30_000) });
      } catch { return; }
      if (res.status === 204) continue;
      const body = await res.json().catch(() => null);
      if (!body || !Array.isArray(body.messages)) return;
      const txids = body.messages.map((m) => m.transactionId);
      txids.forEach((t) => deliveredBefore.add(t));
      const acknowledgments = body.messages.map((m) => ({
        transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'completed',
      }));
      let ack;
      try {
        ack = await post(`${w.url}/api/v1/ack/batch`, { acknowledgments, consumerGroup: null });
      } catch {
        txids.forEach((t) => uncertainAck.add(t));
        return;
      }
      const results = await ack.json().catch(() => null);
      if (ack.status === 200 && Array.isArray(results)) {
        results.forEach((r, i) => (r.success ? confirmedAck : uncertainAck).add(txids[i]));
      } else {
        txids.forEach((t) => uncertainAck.add(t));
      }
    }
  };

  // Pops and never acks: what it holds at the kill is leased, un-acked, and must come back after the restart.
  const hoarded = new Set();
  const hoarder = async () => {
    while (!stopLoad) {
      await new Promise((r) => setTimeout(r, 150));
      try {
        const res = await fetch(`${w.url}/api/v1/pop/queue/${QUEUE}?batch=5&wait=false`,
          { signal: AbortSignal.timeout(30_000) });
        if (res.status !== 200) continue;
        const body = await res.json();
        body.messages.forEach((m) => hoarded.add(m.transactionId));
      } catch { return; }
    }
  };

  const load = Promise.all([
    hoarder(),
    ...Array.from({ length: PUSHERS }, (_, i) => pusher(i)),
    ...Array.from({ length: CONSUMERS }, () => consumer()),
  ]);
  await Promise.race([killedPromise, load]);
  assert.ok(killInfo, `the load finished (${confirmedPush.size} pushes) before the kill point`);
  await load;
  // scripts/serve notices workerd's death on its own (its guard reaps the server) and exits with its status;
  // give it time to, so that stop()'s SIGTERM cannot beat it on a loaded machine.
  for (let i = 0; i < 100 && isRunning(w.pid); i++) await new Promise((r) => setTimeout(r, 100));
  const exit = await w.stop();
  const loadMs = killInfo.at - t0;
  // wrangler leads the group it listens from and dies with it; scripts/serve runs workerd under a guard in a
  // session of its own (scripts/guard.sh), and exits with workerd's status, 137 (killed by SIGKILL).
  assert.ok(exit.signal === 'SIGKILL' || exit.code === 137, `exit of the Worker's leader ${JSON.stringify(exit)}`);
  let left = groupMembers(pgid);
  for (let i = 0; i < 50 && left.length; i++) {
    await new Promise((r) => setTimeout(r, 100));
    left = groupMembers(pgid);
  }
  assert.deepEqual(left, [], `processes survived the SIGKILL: ${left}`);
  console.log(`# killed after ${loadMs} ms: ${confirmedPush.size} pushes confirmed (${uncertainPush.size} in flight), `
    + `${confirmedAck.size} acks confirmed (${uncertainAck.size} in flight), ${deliveredBefore.size} delivered`);
  assert.ok(confirmedAck.size > 0, 'no ack completed before the kill: the load did not mix pushes and acks');

  // Same persist dir, new workerd.
  w = await startWorker({ persistTo: state.dir });
  try {
    const drained = [];
    const deadline = Date.now() + 60_000;
    let quietSince = Date.now();
    while (Date.now() < deadline && Date.now() - quietSince < (LEASE_S + 3) * 1000) {
      const pop = await getJson(`${w.url}/api/v1/pop/queue/${QUEUE}?batch=200&wait=true&timeout=1000`);
      if (pop.status === 204) continue;
      assert.equal(pop.status, 200, JSON.stringify(pop.body));
      const msgs = pop.body.messages;
      quietSince = Date.now();
      for (const m of msgs) {
        drained.push(m.transactionId);
        const want = confirmedPush.get(m.transactionId);
        if (want) assert.deepEqual(m.data, want, `payload of ${m.transactionId}`);
      }
      const ack = await getJson(`${w.url}/api/v1/ack/batch`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({
          acknowledgments: msgs.map((m) => ({
            transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'completed',
          })),
        }),
      });
      assert.equal(ack.status, 200);
      assert.ok(ack.body.every((r) => r.success), JSON.stringify(ack.body.filter((r) => !r.success)));
    }
    const drainedSet = new Set(drained);
    assert.equal(drainedSet.size, drained.length, 'a message was delivered twice after the restart');

    const redeliveredAcked = drained.filter((t) => confirmedAck.has(t));
    assert.deepEqual(redeliveredAcked.slice(0, 10), [],
      `${redeliveredAcked.length} messages whose ack was confirmed came back`);

    const lost = [...confirmedPush.keys()].filter(
      (t) => !drainedSet.has(t) && !confirmedAck.has(t) && !uncertainAck.has(t));
    assert.deepEqual(lost.slice(0, 10), [], `${lost.length} confirmed pushes neither acked nor delivered again`);

    const phantoms = drained.filter((t) => !confirmedPush.has(t) && !uncertainPush.has(t));
    assert.deepEqual(phantoms.slice(0, 10), [], `${phantoms.length} messages nobody pushed`);

    const hoardedBack = [...hoarded].filter((t) => drainedSet.has(t) || confirmedAck.has(t)).length;
    assert.equal(hoardedBack, hoarded.size, 'messages leased (never acked) before the kill did not come back');

    const unackedBefore = [...confirmedPush.keys()].filter((t) => !confirmedAck.has(t) && !uncertainAck.has(t));
    const inflightLanded = drained.filter((t) => uncertainPush.has(t)).length;
    console.log(`# after restart: ${drained.length} delivered (${unackedBefore.length} confirmed-unacked expected, `
      + `${inflightLanded} of ${uncertainPush.size} in-flight pushes had landed; `
      + `${hoarded.size} leased-never-acked before the kill all came back)`);

    // Dedup keys survived: a confirmed transactionId pushed again is a duplicate.
    const sample = [...confirmedPush.entries()].filter((_, i) => i % 97 === 0).slice(0, 30);
    const again = await getJson(`${w.url}/api/v1/push`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({
        items: sample.map(([tx, p]) => ({ queue: QUEUE, partition: p.partition, transactionId: tx, payload: p })),
      }),
    });
    assert.equal(again.status, 201, JSON.stringify(again.body));
    const notDup = again.body.filter((r) => r.status !== 'duplicate');
    assert.deepEqual(notDup, [], 'confirmed transactionIds were accepted again after the restart');
    const empty = await fetch(`${w.url}/api/v1/pop/queue/${QUEUE}?batch=10&wait=false`);
    assert.equal(empty.status, 204, 'something left after the drain and the duplicate pushes');
  } finally {
    await w.stop();
  }
});

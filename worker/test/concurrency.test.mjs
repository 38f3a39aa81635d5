// Concurrent consumers against the Broker Durable Object in real workerd: 8 consumers of group "A" and 3 of
// group "B" long-poll one queue with 4 partitions while 4 producers push into it (one per partition, in order).
// Some consumers claim two partitions per pop, one nacks with `retry` now and then, one sometimes sleeps past
// its lease (its late ack must be refused). Checked from client-side timings:
//   - no (partition, offset) is held by two live leases of one group at once: a lease is certainly live from
//     the pop's answer until min(its ack was sent, pop sent + leaseTime), and those windows never overlap;
//   - every pop mints its own lease id;
//   - a committed message (completed ack answered success) is never delivered to that group again;
//   - each group commits every message exactly once; both groups see every message;
//   - order holds per partition: each delivery is a consecutive offset run starting right after the lane's
//     committed cursor, offsets equal the producers' sequence numbers, and commits advance in order.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { startWorker, tempPersistDir, getJson, sleep } from './harness.mjs';

const QUEUE = 'conc';
const PARTITIONS = 4;
const PER_PARTITION = 120;
const LEASE_S = 2;
const LEASE_MS = LEASE_S * 1000;
const GROUPS = { A: 8, B: 3 };

const state = tempPersistDir();
after(() => state.cleanup());

const now = () => performance.now();

test('8+3 consumers of two groups over 4 partitions: no double lease, all seen by both groups, order per partition', { timeout: 170_000 }, async () => {
  const w = await startWorker({ persistTo: state.dir });
  try {
    const conf = await getJson(`${w.url}/api/v1/configure`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ queue: QUEUE, options: { leaseTime: LEASE_S, retryLimit: 50, retryDelay: 20 } }),
    });
    assert.equal(conf.status, 200, JSON.stringify(conf.body));

    const total = PARTITIONS * PER_PARTITION;
    const pops = []; // every non-empty pop: {group, consumer, leaseId, popStart, popEnd, ackStart, ackEnd, kind, msgs, results}
    const committed = { A: new Map(), B: new Map() }; // "partition/offset" -> pop record that committed it
    const errors = [];
    let done = false;

    const producer = async (p) => {
      const partition = `part-${p}`;
      for (let seq = 0; seq < PER_PARTITION;) {
        const size = 1 + ((seq + p) % 7);
        const items = [];
        for (let k = 0; k < size && seq < PER_PARTITION; k++, seq++) {
          items.push({ queue: QUEUE, partition, transactionId: `c-${p}-${seq}`, payload: { p: partition, seq } });
        }
        const res = await getJson(`${w.url}/api/v1/push`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify({ items }),
        });
        if (res.status !== 201 || !res.body.every((r) => r.status === 'queued')) {
          errors.push(`push ${partition}: ${res.status} ${JSON.stringify(res.body)}`);
          return;
        }
        await sleep(5 + ((seq * 13) % 20));
      }
    };

    const consumer = async (group, idx) => {
      const name = `${group}${idx}`;
      const multi = idx % 2 === 1; // odd consumers claim up to 2 partitions per pop
      const nacker = group === 'A' && idx === 3;
      const sleeper = group === 'A' && idx === 7;
      let n = 0;
      while (!done) {
        const qs = `consumerGroup=${group}&subscriptionMode=all&batch=${3 + (idx % 5)}&wait=true&timeout=400`
          + (multi ? '&partitions=2' : '');
        const popStart = now();
        const res = await fetch(`${w.url}/api/v1/pop/queue/${QUEUE}?${qs}`, { signal: AbortSignal.timeout(30_000) });
        const popEnd = now();
        if (res.status === 204) { await res.arrayBuffer(); continue; }
        const body = await res.json();
        if (res.status !== 200 || !Array.isArray(body.messages)) {
          errors.push(`pop ${name}: ${res.status} ${JSON.stringify(body)}`);
          return;
        }
        if (body.messages.length === 0) continue;
        n++;
        // From their first pop on, so every run has both (the checks below must not loop over nothing).
        const kind = nacker && n % 4 === 1 ? 'retry' : sleeper && n % 3 === 1 ? 'late' : 'completed';
        const rec = {
          group, consumer: name, leaseId: body.leaseId, popStart, popEnd, kind,
          msgs: body.messages.map((m) => ({
            partition: m.partition, offset: m.offset, seq: m.data?.seq, p: m.data?.p,
            leaseId: m.leaseId, transactionId: m.transactionId, partitionId: m.partitionId,
          })),
        };
        pops.push(rec);
        await sleep(kind === 'late' ? LEASE_MS + 600 : (idx * 7 + n) % 15);
        rec.ackStart = now();
        const ack = await getJson(`${w.url}/api/v1/ack/batch`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify({
            consumerGroup: group,
            acknowledgments: rec.msgs.map((m) => ({
              transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId,
              status: kind === 'retry' ? 'retry' : 'completed', error: null,
            })),
          }),
        });
        rec.ackEnd = now();
        if (ack.status !== 200 || !Array.isArray(ack.body) || ack.body.length !== rec.msgs.length) {
          errors.push(`ack ${name}: ${ack.status} ${JSON.stringify(ack.body)}`);
          return;
        }
        rec.results = ack.body;
        if (kind !== 'retry') {
          ack.body.forEach((r, i) => {
            if (!r.success) return;
            const key = `${rec.msgs[i].partition}/${rec.msgs[i].offset}`;
            if (committed[group].has(key)) errors.push(`${group} committed ${key} twice (${name})`);
            else committed[group].set(key, rec);
          });
        }
        if (committed.A.size === total && committed.B.size === total) done = true;
      }
    };

    const deadline = setTimeout(() => { done = true; }, 120_000);
    const t0 = now();
    await Promise.all([
      ...Object.entries(GROUPS).flatMap(([g, count]) => Array.from({ length: count }, (_, i) => consumer(g, i))),
      ...Array.from({ length: PARTITIONS }, (_, p) => producer(p)),
    ]);
    clearTimeout(deadline);
    const elapsed = now() - t0;
    assert.deepEqual(errors, []);

    const late = pops.filter((r) => r.kind === 'late');
    const lateRefused = late.filter((r) => r.results.every((x) => !x.success)).length;
    const retries = pops.filter((r) => r.kind === 'retry').length;
    console.log(`# ${pops.length} pops in ${(elapsed / 1000).toFixed(1)} s; A committed ${committed.A.size}, `
      + `B ${committed.B.size} of ${total}; ${retries} retry nacks; ${late.length} late acks, ${lateRefused} refused; `
      + `${pops.filter((r) => new Set(r.msgs.map((m) => m.partition)).size > 1).length} multi-partition pops`);

    // Both groups committed every message exactly once.
    for (const g of Object.keys(GROUPS)) {
      const missing = [];
      for (let p = 0; p < PARTITIONS; p++) {
        for (let o = 0; o < PER_PARTITION; o++) if (!committed[g].has(`part-${p}/${o}`)) missing.push(`part-${p}/${o}`);
      }
      assert.deepEqual(missing.slice(0, 10), [], `group ${g} never committed ${missing.length} messages`);
    }

    // Late acks (lease outlived by > 0.6 s) must be refused: a dead lease fences.
    assert.ok(late.length > 0, 'the sleeper acked late at least once');
    assert.ok(retries > 0, 'the nacker nacked with retry at least once');
    for (const r of late) {
      assert.ok(r.results.every((x) => !x.success && x.error),
        `${r.consumer} acked after its lease expired and was accepted: ${JSON.stringify(r.results)}`);
    }

    // Every pop has its own lease id, shared by all its messages.
    const leaseIds = new Set();
    for (const r of pops) {
      assert.ok(r.leaseId, `pop without leaseId by ${r.consumer}`);
      assert.ok(!leaseIds.has(r.leaseId), `lease id ${r.leaseId} minted twice`);
      leaseIds.add(r.leaseId);
      assert.ok(r.msgs.every((m) => m.leaseId === r.leaseId), 'messages of one pop carry different leases');
    }

    // Per message: offsets equal the producer's sequence; per pop and partition: a consecutive run.
    for (const r of pops) {
      const byPart = new Map();
      for (const m of r.msgs) {
        assert.equal(m.p, m.partition, 'payload partition mismatch');
        assert.equal(m.offset, m.seq, `${m.partition}: offset ${m.offset} carries seq ${m.seq}`);
        if (!byPart.has(m.partition)) byPart.set(m.partition, []);
        byPart.get(m.partition).push(m.offset);
      }
      for (const [part, offs] of byPart) {
        for (let i = 1; i < offs.length; i++) {
          assert.equal(offs[i], offs[i - 1] + 1, `${r.consumer} got ${part} offsets ${offs} (not consecutive)`);
        }
      }
    }

    // No (partition, offset) in two certainly-live leases of one group.
    const windows = new Map(); // group|partition|offset -> [{from, to, rec}]
    for (const r of pops) {
      const from = r.popEnd;
      const to = Math.min(r.ackStart ?? Infinity, r.popStart + LEASE_MS);
      for (const m of r.msgs) {
        const key = `${r.group}|${m.partition}|${m.offset}`;
        if (!windows.has(key)) windows.set(key, []);
        windows.get(key).push({ from, to, rec: r });
      }
    }
    let overlaps = 0;
    const overlapSamples = [];
    for (const [key, list] of windows) {
      list.sort((a, b) => a.from - b.from);
      for (let i = 1; i < list.length; i++) {
        for (let j = 0; j < i; j++) {
          if (list[i].from < list[j].to) {
            overlaps++;
            if (overlapSamples.length < 5) {
              overlapSamples.push(`${key}: ${list[j].rec.consumer} [${list[j].from.toFixed(0)}, ${list[j].to.toFixed(0)}] `
                + `and ${list[i].rec.consumer} [${list[i].from.toFixed(0)}, ${list[i].to.toFixed(0)}]`);
            }
          }
        }
      }
    }
    assert.equal(overlaps, 0, `double leases:\n${overlapSamples.join('\n')}`);

    // A committed message is never delivered to its group again (pops sent after the commit answered).
    for (const r of pops) {
      for (const m of r.msgs) {
        const c = committed[r.group].get(`${m.partition}/${m.offset}`);
        if (c && c !== r) {
          assert.ok(r.popStart < c.ackEnd,
            `${r.group}: ${m.partition}/${m.offset} delivered to ${r.consumer} after ${c.consumer}'s commit`);
        }
      }
    }

    // Order per (group, partition): every delivery starts right after the lane's committed cursor at the time
    // the pop was served. That cursor lies between the highest offset committed by acks answered before the
    // pop was sent and the highest committed by acks sent before the pop was answered.
    const commits = new Map(); // group|partition -> [{top, ackStart, ackEnd}]
    for (const r of pops) {
      if (r.kind === 'retry' || !r.results) continue;
      const tops = new Map();
      r.results.forEach((x, i) => {
        if (x.success) tops.set(r.msgs[i].partition, Math.max(tops.get(r.msgs[i].partition) ?? -1, r.msgs[i].offset));
      });
      for (const [part, top] of tops) {
        const key = `${r.group}|${part}`;
        if (!commits.has(key)) commits.set(key, []);
        commits.get(key).push({ top, ackStart: r.ackStart, ackEnd: r.ackEnd });
      }
    }
    let orderChecked = 0;
    for (const r of pops) {
      const firsts = new Map();
      for (const m of r.msgs) if (!firsts.has(m.partition)) firsts.set(m.partition, m.offset);
      for (const [part, first] of firsts) {
        const list = commits.get(`${r.group}|${part}`) ?? [];
        const lo = Math.max(-1, ...list.filter((c) => c.ackEnd < r.popStart).map((c) => c.top));
        const hi = Math.max(-1, ...list.filter((c) => c.ackStart < r.popEnd).map((c) => c.top));
        assert.ok(first - 1 >= lo && first - 1 <= hi,
          `${r.group} ${part}: ${r.consumer} got a run from ${first}, but the cursor was in [${lo}, ${hi}]`);
        orderChecked++;
      }
    }
    assert.ok(orderChecked >= pops.length);
  } finally {
    await w.stop();
  }
});

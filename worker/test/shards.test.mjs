// One broker over several Durable Objects (SHARDS, docs/decisions.md "Shards") in real workerd: queues land
// on the shard FNV-1a of their name picks, ids route back to their shard, pushes and batch acks spanning
// shards are split and merged in request order, listings and the dead-letter listing fan out with correct
// paging, discovery pops find queues on any shard through the catalog, a
// transaction across shards commits on every shard (worker/test/twophase.test.mjs tests its failures and
// crashes), and a changed SHARDS over existing data is refused.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { startWorker, tempPersistDir, getJson, post, sleep } from './harness.mjs';
import { placementFor } from './placement.mjs';

const SHARDS = 4;
const state = tempPersistDir();
after(() => state.cleanup());

const { shardOf, onDistinctShards } = placementFor(SHARDS);

test('queues spread over the shards; ids route back; split pushes and acks keep request order', async () => {
  const w = await startWorker({ persistTo: state.dir, vars: { SHARDS: String(SHARDS) } });
  try {
    const queues = Array.from({ length: 12 }, (_, i) => `spread-${i}`);
    assert.ok(new Set(queues.map((q) => shardOf(q))).size >= 3, 'the names cover several shards');
    const items = queues.flatMap((q) => [1, 2].map((n) => ({ queue: q, payload: { q, n }, transactionId: `${q}-${n}` })));
    const push = await getJson(`${w.url}/api/v1/push`, post({ items }));
    assert.equal(push.status, 201, JSON.stringify(push.body));
    assert.deepEqual(push.body.map((r) => [r.index, r.queueName, r.transactionId, r.status]),
      items.map((it, i) => [i, it.queue, it.transactionId, 'queued']));
    for (const r of push.body) {
      // Partition ids of shard k are k+1, k+1+SHARDS, ...; message ids end in the shard's four hex digits.
      assert.equal((Number(r.partitionId) - 1) % SHARDS, shardOf(r.queueName), JSON.stringify(r));
      assert.equal(parseInt(r.messageId.slice(-4), 16), shardOf(r.queueName), JSON.stringify(r));
    }

    // Pop every queue, then ack everything in one batch spanning the shards.
    const popped = [];
    for (const q of queues) {
      const pop = await getJson(`${w.url}/api/v1/pop/queue/${q}?batch=10&wait=false`);
      assert.equal(pop.status, 200, `${q}: ${JSON.stringify(pop.body)}`);
      assert.deepEqual(pop.body.messages.map((m) => m.data.n), [1, 2]);
      assert.equal(parseInt(pop.body.leaseId.slice(-4), 16), shardOf(q), 'the lease id names its shard');
      popped.push(...pop.body.messages);
    }
    // A lease from each shard renews through the entry Worker.
    for (const m of popped.filter((m, i, all) => all.findIndex((x) => x.leaseId === m.leaseId) === i).slice(0, 4)) {
      const ext = await getJson(`${w.url}/api/v1/lease/${m.leaseId}/extend`, post({ seconds: 60 }));
      assert.equal(ext.body.renewed, 1, JSON.stringify(ext.body));
    }
    const acks = popped.map((m) => ({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'completed' }));
    const ack = await getJson(`${w.url}/api/v1/ack/batch`, post({ acknowledgments: acks }));
    assert.equal(ack.status, 200, JSON.stringify(ack.body));
    assert.deepEqual(ack.body.map((r) => [r.index, r.transactionId, r.success]),
      acks.map((a, i) => [i, a.transactionId, true]));
    for (const q of queues) {
      assert.equal((await getJson(`${w.url}/api/v1/pop/queue/${q}?wait=false`)).status, 204, `${q} is drained`);
    }

    // A malformed item refuses the whole split push: nothing lands on any shard.
    const bad = await getJson(`${w.url}/api/v1/push`, post({
      items: [{ queue: queues[0], payload: 1 }, { queue: queues[1], payload: 2, traceId: 'not-a-uuid' }],
    }));
    assert.equal(bad.status, 400, JSON.stringify(bad.body));
    assert.equal((await getJson(`${w.url}/api/v1/pop/queue/${queues[0]}?wait=false`)).status, 204);

    // Listings merge every shard.
    const listed = await getJson(`${w.url}/api/v1/resources/queues`);
    assert.deepEqual(listed.body.queues.map((q) => q.name).filter((n) => n.startsWith('spread-')),
      [...queues].sort());
    const overview = await getJson(`${w.url}/api/v1/resources/overview`);
    assert.equal(overview.body.queues, listed.body.queues.length);
    assert.equal(overview.body.namespaces, new Set(listed.body.queues.map((q) => q.namespace)).size);
    const status = await getJson(`${w.url}/api/v1/status`);
    assert.equal(status.body.messages.pushed, items.length);
    const prom = await (await fetch(`${w.url}/metrics/prometheus`)).text();
    for (let k = 0; k < SHARDS; k++) assert.match(prom, new RegExp(`\\{shard="${k}"`), `shard ${k} series`);
  } finally {
    await w.stop();
  }
});

test('the dead-letter listing pages across shards; replay and retry by id reach the right shard', async () => {
  const w = await startWorker({ persistTo: state.dir, vars: { SHARDS: String(SHARDS) } });
  try {
    const queues = onDistinctShards('dead-', SHARDS);
    for (const q of queues) {
      assert.equal((await getJson(`${w.url}/api/v1/configure`, post({ queue: q, options: { retryLimit: 0 } }))).status, 200);
    }
    // Three dead letters per queue, failed one queue after the other, so the newest-first order interleaves
    // shards only by time.
    for (let round = 0; round < 3; round++) {
      for (const q of queues) {
        await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: q, payload: { q, round } }] }));
        const pop = await getJson(`${w.url}/api/v1/pop/queue/${q}?wait=false`);
        const m = pop.body.messages[0];
        const nack = await getJson(`${w.url}/api/v1/ack`, post({
          transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'failed', error: 'boom-across-shards',
        }));
        assert.equal(nack.body[0].dlq, true, JSON.stringify(nack.body));
        await sleep(5); // distinct failedAt values
      }
    }
    const all = await getJson(`${w.url}/api/v1/dlq?limit=100`);
    assert.equal(all.status, 200, JSON.stringify(all.body));
    const mine = all.body.messages.filter((d) => queues.includes(d.queue));
    assert.equal(mine.length, 3 * SHARDS);
    const failed = all.body.messages.map((d) => d.failedAt);
    assert.deepEqual(failed, [...failed].sort().reverse(), 'newest first across shards');
    // Pages cut from the merged order: offset 2, limit 5, then the next page.
    const p1 = await getJson(`${w.url}/api/v1/dlq?limit=5&offset=2`);
    const p2 = await getJson(`${w.url}/api/v1/dlq?limit=5&offset=7`);
    assert.deepEqual(p1.body.messages.map((d) => d.id), all.body.messages.slice(2, 7).map((d) => d.id));
    assert.deepEqual(p2.body.messages.map((d) => d.id), all.body.messages.slice(7, 12).map((d) => d.id));
    assert.deepEqual([p1.body.total, p1.body.pagination], [5, { limit: 5, offset: 2 }]);
    // Past the rows each shard answers (10,000), the merged page cannot be cut right: refused, not answered
    // wrong; a page that ends at them is served.
    const deep = await getJson(`${w.url}/api/v1/dlq?limit=5&offset=9996`);
    assert.equal(deep.status, 400, JSON.stringify(deep.body));
    assert.match(deep.body.error, /offset \+ limit is 10001: a listing across shards .*\?queue=/);
    assert.equal((await getJson(`${w.url}/api/v1/dlq?limit=5&offset=9995`)).status, 200);
    // One queue's listing goes to its shard alone.
    const one = await getJson(`${w.url}/api/v1/dlq?queue=${queues[1]}`);
    assert.deepEqual(one.body.messages.map((d) => d.data.round), [2, 1, 0]);

    // Replay by dead-letter id, retry by partition id: each on its own shard.
    const first = mine.find((d) => d.queue === queues[2]);
    const replay = await getJson(`${w.url}/api/v1/dlq/${first.id}/replay`, post({}));
    assert.equal(replay.status, 200, JSON.stringify(replay.body));
    const back = await getJson(`${w.url}/api/v1/pop/queue/${queues[2]}?wait=false`);
    assert.deepEqual(back.body.messages.map((m) => m.data), [first.data]);
    const other = mine.find((d) => d.queue === queues[3]);
    const retry = await getJson(`${w.url}/api/v1/messages/${other.partitionId}/${other.transactionId}/retry`, post({}));
    assert.equal(retry.status, 200, JSON.stringify(retry.body));
    const msg = await getJson(`${w.url}/api/v1/messages/${other.partitionId}/${other.transactionId}`);
    assert.equal(msg.status, 200, JSON.stringify(msg.body));
    assert.equal(msg.body.queue, queues[3]);

    // Bulk dead-letter work: a filter naming a queue goes to its shard; without one every shard counts its own.
    const perQueue = [];
    for (const q of queues) {
      const dry = await getJson(`${w.url}/api/v1/dlq/replay`, post({ queue: q, errorContains: 'boom-across-shards', dryRun: true }));
      assert.equal(dry.status, 200, JSON.stringify(dry.body));
      perQueue.push(dry.body.count);
    }
    assert.equal(perQueue[0], 3, 'queue 0 keeps its three dead letters');
    assert.ok(perQueue.every((c) => c >= 2), `each queue's own shard answers for it: ${perQueue}`);
    const everywhere = await getJson(`${w.url}/api/v1/dlq/replay`, post({ errorContains: 'boom-across-shards', dryRun: true }));
    assert.equal(everywhere.status, 200, JSON.stringify(everywhere.body));
    assert.equal(everywhere.body.count, perQueue.reduce((a, b) => a + b, 0), 'counts summed over the shards');
    const limited = await getJson(`${w.url}/api/v1/dlq/replay`, post({ errorContains: 'boom-across-shards', limit: 2 }));
    assert.equal(limited.status, 400, 'a limit without a queue cannot be kept across shards');
    assert.match(limited.body.error, /name a queue/);
    const replayed = await getJson(`${w.url}/api/v1/dlq/replay`, post({ queue: queues[0] }));
    assert.equal(replayed.status, 200, JSON.stringify(replayed.body));
    assert.equal(replayed.body.replayed, 3);
    const popped = await getJson(`${w.url}/api/v1/pop/queue/${queues[0]}?wait=false&batch=10`);
    assert.deepEqual(popped.body.messages.map((m) => m.data.round), [0, 1, 2]);
  } finally {
    await w.stop();
  }
});

test('traces of messages on every shard read back: by message on its shard, by name and as names across shards', async () => {
  const w = await startWorker({ persistTo: state.dir, vars: { SHARDS: String(SHARDS) } });
  try {
    const queues = onDistinctShards('traced-', SHARDS);
    const messages = [];
    for (const [i, q] of queues.entries()) {
      await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: q, payload: { i } }] }));
      const m = (await getJson(`${w.url}/api/v1/pop/queue/${q}?wait=false`)).body.messages[0];
      const traced = await getJson(`${w.url}/api/v1/traces`, post({
        transactionId: m.transactionId, partitionId: m.partitionId, traceNames: ['checkout-x', `only-${i}`], data: { i },
      }));
      assert.equal(traced.status, 201, JSON.stringify(traced.body));
      messages.push(m);
      await sleep(5); // distinct createdAt values
    }
    for (const [i, m] of messages.entries()) {
      const own = await getJson(`${w.url}/api/v1/traces/${m.partitionId}/${m.transactionId}`);
      assert.equal(own.status, 200, JSON.stringify(own.body));
      assert.deepEqual(own.body.traces.map((t) => t.data), [{ i }], `the trace of the message on shard ${shardOf(queues[i])}`);
    }
    const byName = await getJson(`${w.url}/api/v1/traces/by-name/checkout-x`);
    assert.deepEqual(byName.body.traces.map((t) => t.data.i), [0, 1, 2, 3].slice(0, SHARDS), 'every shard, oldest first');
    assert.deepEqual(byName.body.traces.map((t) => t.queueName), queues);
    const page = await getJson(`${w.url}/api/v1/traces/by-name/checkout-x?limit=2&offset=1`);
    assert.deepEqual([page.body.traces.map((t) => t.data.i), page.body.pagination], [[1, 2], { limit: 2, offset: 1 }]);
    const names = await getJson(`${w.url}/api/v1/traces/names?limit=2`);
    assert.equal(names.status, 200, JSON.stringify(names.body));
    const checkout = names.body.traceNames.find((n) => n.traceName === 'checkout-x');
    assert.deepEqual([checkout.traceCount, checkout.messageCount], [SHARDS, SHARDS], 'counts added over the shards');
    assert.equal(names.body.total, SHARDS + 1, 'distinct names over the shards');
    // Most recently seen first; the newest trace carries both names, which then go by name.
    assert.deepEqual(names.body.traceNames.map((n) => n.traceName), ['checkout-x', `only-${SHARDS - 1}`]);
    assert.deepEqual(names.body.pagination, { limit: 2, offset: 0 });
  } finally {
    await w.stop();
  }
});

test('a listing across shards that cannot read a payload says so instead of leaving that shard out', async () => {
  const w = await startWorker({ persistTo: state.dir, vars: { SHARDS: String(SHARDS) } });
  try {
    const [plain, odd] = onDistinctShards('odd-payload-', 2);
    await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: plain, payload: { n: 1 } }] }));
    // Valid JSON the broker keeps byte for byte, which a JSON tree (the merge) cannot hold.
    const raw = await fetch(`${w.url}/api/v1/push`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: `{"items": [{"queue": "${odd}", "payload": {"x": 1E400}}]}`,
    });
    assert.equal(raw.status, 201, await raw.text());
    const all = await getJson(`${w.url}/api/v1/messages`);
    assert.equal(all.status, 500, JSON.stringify(all.body));
    assert.match(all.body.error, new RegExp(`^shard ${shardOf(odd)}'s answer cannot be merged .*\\?queue=`));
    const one = await fetch(`${w.url}/api/v1/messages?queue=${odd}`);
    assert.equal(one.status, 200);
    assert.match(await one.text(), /"data":\{"x": 1E400\}/, 'one queue\'s listing, from its shard alone, has it as pushed');
  } finally {
    await w.stop();
  }
});

test('discovery pops find queues on any shard through the catalog', async () => {
  const w = await startWorker({ persistTo: state.dir, vars: { SHARDS: String(SHARDS) } });
  const ackAll = (reply) => getJson(`${w.url}/api/v1/ack/batch`, post({
    acknowledgments: reply.body.messages.map((m) => ({
      transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'completed',
    })),
  }));
  try {
    // Queues of namespace `disco` on two different shards (the catalog learns them from configure).
    const [a, b] = onDistinctShards('disco.job', 2);
    for (const q of [a, b]) {
      assert.equal((await getJson(`${w.url}/api/v1/configure`, post({ queue: q, namespace: 'disco', task: 'job' }))).status, 200);
    }
    for (const q of [b, a]) {
      await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: q, payload: `on-${q}` }] }));
      const found = await getJson(`${w.url}/api/v1/pop?namespace=disco&task=job&wait=false`);
      assert.equal(found.status, 200, JSON.stringify(found.body));
      assert.deepEqual([found.body.queue, found.body.messages.map((m) => m.data)], [q, [`on-${q}`]]);
      await ackAll(found);
    }
    // One message on each shard: two discovery pops get both.
    await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: a, payload: 'both-a' }, { queue: b, payload: 'both-b' }] }));
    const got = [];
    for (let i = 0; i < 2; i++) {
      const r = await getJson(`${w.url}/api/v1/pop?namespace=disco&wait=false`);
      assert.equal(r.status, 200, JSON.stringify(r.body));
      got.push(...r.body.messages.map((m) => m.data));
    }
    assert.deepEqual(got.sort(), ['both-a', 'both-b']);
    assert.equal((await getJson(`${w.url}/api/v1/pop?namespace=disco&wait=false`)).status, 204);
    // Discovery does not long-poll (wire contract §1.3), sharded or not: an empty one answers at once.
    // (A fan-out to four objects: the bound leaves room for a loaded machine, far below the 30 s it would park.)
    const t0 = Date.now();
    assert.equal((await getJson(`${w.url}/api/v1/pop?namespace=disco&wait=true&timeout=30000`)).status, 204);
    assert.ok(Date.now() - t0 < 15000, `answered without parking (${Date.now() - t0} ms)`);

    // A queue created by a push (its namespace and task from its name) is found too.
    const [c] = onDistinctShards('pushed.made.', 1);
    await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: c, payload: 'made' }] }));
    const made = await getJson(`${w.url}/api/v1/pop?namespace=pushed&task=made&wait=false`);
    assert.deepEqual(made.body.messages?.map((m) => m.data), ['made'], JSON.stringify(made.body));
    // A label nobody holds: 204 without asking any shard; neither given: the shard's 400.
    assert.equal((await getJson(`${w.url}/api/v1/pop?namespace=nobody&wait=false`)).status, 204);
    assert.equal((await getJson(`${w.url}/api/v1/pop?wait=false`)).status, 400);
  } finally {
    await w.stop();
  }
});

test('a transaction across shards commits on both (two-phase commit); one on a single shard commits', async () => {
  const w = await startWorker({ persistTo: state.dir, vars: { SHARDS: String(SHARDS) } });
  try {
    const [src, dst] = onDistinctShards('tx-', 2);
    await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: src, payload: 'in' }] }));
    const pop = await getJson(`${w.url}/api/v1/pop/queue/${src}?wait=false`);
    const m = pop.body.messages[0];
    const across = await getJson(`${w.url}/api/v1/transaction`, post({
      operations: [
        { type: 'ack', transactionId: m.transactionId, partitionId: m.partitionId, status: 'completed' },
        { type: 'push', items: [{ queue: dst, payload: 'out' }] },
      ],
      requiredLeases: [m.leaseId],
    }));
    assert.equal(across.status, 200, JSON.stringify(across.body));
    assert.equal(across.body.success, true, JSON.stringify(across.body));
    const landed = await getJson(`${w.url}/api/v1/pop/queue/${dst}?wait=false`);
    assert.deepEqual(landed.body.messages.map((x) => x.data), ['out'], 'the push landed');
    // The ack happened too: the lease is released.
    const again = await getJson(`${w.url}/api/v1/ack`, post({
      transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'completed',
    }));
    assert.equal(again.body[0].success, false, JSON.stringify(again.body));

    // Same shard: the ordinary single commit.
    const sibling = Array.from({ length: 200 }, (_, i) => `tx-same-${i}`).find((q) => shardOf(q) === shardOf(src));
    await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: src, payload: 'in-2' }] }));
    const m2 = (await getJson(`${w.url}/api/v1/pop/queue/${src}?wait=false`)).body.messages[0];
    const one = await getJson(`${w.url}/api/v1/transaction`, post({
      operations: [
        { type: 'ack', transactionId: m2.transactionId, partitionId: m2.partitionId, status: 'completed' },
        { type: 'push', items: [{ queue: sibling, payload: 'out-2' }] },
      ],
      requiredLeases: [m2.leaseId],
    }));
    assert.equal(one.status, 200, JSON.stringify(one.body));
    assert.equal(one.body.success, true);
    const out = await getJson(`${w.url}/api/v1/pop/queue/${sibling}?wait=false`);
    assert.deepEqual(out.body.messages.map((x) => x.data), ['out-2']);
  } finally {
    await w.stop();
  }
});

test('a spanning push one shard refuses: its items come back failed, the others are stored', async () => {
  const fresh = tempPersistDir();
  // The quota is per object: fill one shard's queue until that shard refuses.
  const w = await startWorker({ persistTo: fresh.dir, vars: { SHARDS: String(SHARDS), MAX_STORED_BYTES: String(64 * 1024) } });
  try {
    const [full, other] = onDistinctShards('quota-', 2);
    const big = () => randomBytes(12 * 1024).toString('base64'); // incompressible
    let refused = null;
    for (let i = 0; i < 50 && !refused; i++) {
      const res = await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: full, payload: big() }] }));
      if (res.status !== 201) refused = res;
    }
    assert.equal(refused?.status, 507, 'one shard filled up');
    const span = await getJson(`${w.url}/api/v1/push`, post({
      items: [{ queue: full, payload: big(), transactionId: 'span-a' }, { queue: other, payload: 'b', transactionId: 'span-b' }],
    }));
    assert.equal(span.status, 201, JSON.stringify(span.body));
    assert.deepEqual(span.body.map((r) => [r.index, r.transactionId, r.status]),
      [[0, 'span-a', 'failed'], [1, 'span-b', 'queued']]);
    assert.match(span.body[0].error, new RegExp(`shard ${shardOf(full)}: .*full`));
    const got = await getJson(`${w.url}/api/v1/pop/queue/${other}?wait=false`);
    assert.deepEqual(got.body.messages.map((m) => m.data), ['b']);
    // Every part refused: the shard's own answer.
    const both = await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: full, payload: big() }] }));
    assert.equal(both.status, 507);
  } finally {
    await w.stop();
    fresh.cleanup();
  }
});

test('a key written twice routes by its last value, as the broker reads it: the message is where pops find it', async () => {
  const fresh = tempPersistDir();
  const w = await startWorker({ persistTo: fresh.dir, vars: { SHARDS: String(SHARDS) } });
  try {
    const [first, last] = onDistinctShards('twice-', 2);
    const raw = `{"items":[{"queue":"${first}","payload":{"n":1},"transactionId":"twice-1","queue":"${last}"}]}`;
    const push = await getJson(`${w.url}/api/v1/push`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: raw });
    assert.equal(push.status, 201, JSON.stringify(push.body));
    assert.equal(push.body[0].queueName, last);
    assert.equal((Number(push.body[0].partitionId) - 1) % SHARDS, shardOf(last), 'stored on the shard of the queue it names');
    const txn = await getJson(`${w.url}/api/v1/transaction`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: `{"operations":[{"type":"push","items":[{"queue":"${first}","queue":"${last}","payload":2,"transactionId":"twice-2"}]}]}` });
    assert.equal(txn.status, 200, JSON.stringify(txn.body));
    const got = await getJson(`${w.url}/api/v1/pop/queue/${last}?batch=10&wait=false`);
    assert.equal(got.status, 200, JSON.stringify(got.body));
    assert.deepEqual(got.body.messages.map((m) => m.transactionId), ['twice-1', 'twice-2']);
    assert.equal((await getJson(`${w.url}/api/v1/resources/queues/${first}`)).status, 404, `nothing was stored as ${first}`);
  } finally {
    await w.stop();
    fresh.cleanup();
  }
});

test('a spanning push one shard refuses, whose other part the broker reads but a JSON tree cannot', async () => {
  const fresh = tempPersistDir();
  const w = await startWorker({ persistTo: fresh.dir, vars: { SHARDS: String(SHARDS), QUEEN_TEST_ROUTES: 'true' } });
  const refuse = (shard, method) => getJson(`${w.url}/__test/refuse?object=default&shard=${shard}`, { method });
  try {
    const [up, down] = onDistinctShards('deep-', 2);
    // A payload nested past serde_json's tree depth (128): the broker keeps payloads as text and takes it.
    const deep = '['.repeat(200) + ']'.repeat(200);
    const raw = `{"items":[{"queue":"${up}","payload":${deep},"transactionId":"deep-a"},` +
      `{"queue":"${down}","payload":"b","transactionId":"deep-b"}]}`;
    assert.equal((await refuse(shardOf(down), 'POST')).body.refusing, true, 'the test fault is on');
    const span = await getJson(`${w.url}/api/v1/push`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: raw });
    // The part that was applied is answered as applied; the refused part's items as failed.
    assert.equal(span.status, 201, JSON.stringify(span.body));
    assert.deepEqual(span.body.map((r) => [r.index, r.transactionId, r.status]),
      [[0, 'deep-a', 'queued'], [1, 'deep-b', 'failed']]);
    assert.equal(span.body[1].queueName, down);
    const got = await getJson(`${w.url}/api/v1/pop/queue/${up}?wait=false`);
    assert.equal(got.status, 200, JSON.stringify(got.body));
    assert.equal(got.body.messages[0].transactionId, 'deep-a');
  } finally {
    await w.stop();
    fresh.cleanup();
  }
});

test('a write sent to every shard that one shard refuses: the error says where it was applied', async () => {
  const fresh = tempPersistDir();
  const w = await startWorker({ persistTo: fresh.dir, vars: { SHARDS: String(SHARDS), QUEEN_TEST_ROUTES: 'true' } });
  const refuse = (shard, method) => getJson(`${w.url}/__test/refuse?object=default&shard=${shard}`, { method });
  try {
    // A group reading a queue on each shard.
    const queues = onDistinctShards('cg-', SHARDS);
    for (const q of queues) {
      await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: q, payload: q }] }));
      const pop = await getJson(`${w.url}/api/v1/pop/queue/${q}?consumerGroup=cg&subscriptionMode=all&wait=false&autoAck=true`);
      assert.equal(pop.status, 200, `${q}: ${JSON.stringify(pop.body)}`);
    }
    const down = 2;
    assert.equal((await refuse(down, 'POST')).body.refusing, true, 'the test fault is on');
    const expected = new RegExp(`^applied on 3 of 4 shards \\(0, 1, 3\\), failed on shard ${down}; ` +
      `shard ${down} \\(503\\): broker unavailable: refused by /__test/refuse$`);

    const sub = await getJson(`${w.url}/api/v1/consumer-groups/cg/subscription`,
      post({ subscriptionTimestamp: new Date().toISOString() }));
    assert.equal(sub.status, 503, JSON.stringify(sub.body));
    assert.match(sub.body.error, expected);
    assert.deepEqual([sub.body.appliedShards, sub.body.failedShards], [[0, 1, 3], [down]]);

    const del = await getJson(`${w.url}/api/v1/consumer-groups/cg`, { method: 'DELETE' });
    assert.equal(del.status, 503, JSON.stringify(del.body));
    assert.match(del.body.error, expected);
    // The three shards that applied it no longer know the group on their queues; the refusing one does.
    await refuse(down, 'DELETE');
    const left = await getJson(`${w.url}/api/v1/consumer-groups/cg`);
    assert.equal(left.status, 200, JSON.stringify(left.body));
    const named = queues.filter((q) => JSON.stringify(left.body).includes(`"${q}"`));
    assert.deepEqual(named, queues.filter((q) => shardOf(q) === down), JSON.stringify(left.body));
    // Idempotent: sent again, it completes on every shard.
    const again = await getJson(`${w.url}/api/v1/consumer-groups/cg`, { method: 'DELETE' });
    assert.equal(again.status, 200, JSON.stringify(again.body));
    // Refused by every shard (a bad body): nothing applied, so each shard's own answer as it is.
    const bad = await getJson(`${w.url}/api/v1/consumer-groups/cg/subscription`, post({}));
    assert.deepEqual([bad.status, bad.body], [400, { error: 'subscriptionTimestamp is required' }]);
    // A read sent to every shard still answers the refusing shard's own error.
    await refuse(down, 'POST');
    const read = await getJson(`${w.url}/api/v1/consumer-groups`);
    assert.equal(read.status, 503);
    assert.equal(read.body.error, 'broker unavailable: refused by /__test/refuse');
  } finally {
    await w.stop();
    fresh.cleanup();
  }
});

test('a changed SHARDS over existing data is refused on every shard until it is set back', async () => {
  const fresh = tempPersistDir();
  try {
    let w = await startWorker({ persistTo: fresh.dir, vars: { SHARDS: '1' } });
    await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: 'kept', payload: 'before' }] }));
    await w.stop();

    w = await startWorker({ persistTo: fresh.dir, vars: { SHARDS: String(SHARDS) }, readyStatus: 503 });
    const health = await getJson(`${w.url}/health`);
    assert.equal(health.status, 503);
    assert.match(health.body.error, /SHARDS is 4 but this broker's data was written with SHARDS=1.*RESHARD_FROM=1.*system\/reshard/);
    // A queue on another shard (whose object is new and empty) is refused too.
    const elsewhere = Array.from({ length: 50 }, (_, i) => `new-${i}`).find((q) => shardOf(q) !== 0);
    const push = await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: elsewhere, payload: 'x' }] }));
    assert.equal(push.status, 503, JSON.stringify(push.body));
    assert.match(push.body.error, /migration/);
    await w.stop();

    w = await startWorker({ persistTo: fresh.dir, vars: { SHARDS: '1' } });
    const pop = await getJson(`${w.url}/api/v1/pop/queue/kept?wait=false`);
    assert.deepEqual(pop.body.messages.map((m) => m.data), ['before']);
    assert.equal((await getJson(`${w.url}/api/v1/pop/queue/${elsewhere}?wait=false`)).status, 204, 'nothing landed');
    await w.stop();
  } finally {
    fresh.cleanup();
  }
});

test('an invalid SHARDS is refused with the reason', async () => {
  const fresh = tempPersistDir();
  const w = await startWorker({ persistTo: fresh.dir, vars: { SHARDS: '0' }, readyStatus: 503 });
  try {
    const push = await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: 'q', payload: 1 }] }));
    assert.equal(push.status, 503);
    assert.match(push.body.error, /SHARDS must be an integer from 1 to 256, got '0'/);
  } finally {
    await w.stop();
    fresh.cleanup();
  }
});

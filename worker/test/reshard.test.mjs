// The shard migration (POST /api/v1/system/reshard, docs/decisions.md "Resharding") in real workerd: data
// written with SHARDS=1 moves to 4 shards and then to 2, and every message, consumer-group cursor and dead
// letter is there once, with ids that route to the new shards, and reads, pops, acks and DLQ replays work; a
// migration stopped between a queue's import and its drop, with workerd killed, ends with every message once
// when it is run again (and so does one killed at an arbitrary moment); leases in flight hold the migration
// back; and a changed SHARDS without the migration is still refused.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startWorker, tempPersistDir, getJson, workerdUnder, post, sleep } from './harness.mjs';
import { placementFor } from './placement.mjs';

const QUEUES = Array.from({ length: 8 }, (_, i) => `rs-${i}`);
const PER_QUEUE = 12;

// Every call names the shard count (the test moves between counts).
const { shardOf } = placementFor(1);

/** Pops `queue` for `group` (queue mode when null) until it is empty, acknowledging everything; the transaction ids seen. */
async function drain(url, queue, group) {
  const seen = [];
  for (;;) {
    const groupParam = group ? `consumerGroup=${group}&subscriptionMode=all&` : '';
    const pop = await getJson(`${url}/api/v1/pop/queue/${queue}?${groupParam}batch=100&wait=false`);
    if (pop.status === 204) return seen;
    assert.equal(pop.status, 200, JSON.stringify(pop.body));
    const acks = pop.body.messages.map((m) => ({ transactionId: m.transactionId, partitionId: m.partitionId,
      status: 'completed', leaseId: pop.body.leaseId }));
    seen.push(...pop.body.messages.map((m) => m.transactionId));
    const ack = await getJson(`${url}/api/v1/ack/batch`, post({ acknowledgments: acks, consumerGroup: group }));
    assert.equal(ack.status, 200, JSON.stringify(ack.body));
    assert.ok(ack.body.every((a) => a.success), JSON.stringify(ack.body));
  }
}

/**
 * Writes the test data with the broker at `url`: PER_QUEUE messages in two partitions for each queue;
 * group `cursor` consumes partition `a` of rs-0 (half its messages); two queues each file one message to
 * the dead-letter queue. Returns what a fresh group must find, and the cursor's share.
 */
async function seed(url) {
  const sent = {};
  for (const q of QUEUES) {
    const items = Array.from({ length: PER_QUEUE }, (_, i) => ({ queue: q, partition: i % 2 ? 'b' : 'a',
      payload: { q, i }, transactionId: `${q}-${i}` }));
    const push = await getJson(`${url}/api/v1/push`, post({ items }));
    assert.equal(push.status, 201, JSON.stringify(push.body));
    sent[q] = items.map((it) => it.transactionId).sort();
  }
  const pop = await getJson(`${url}/api/v1/pop/queue/rs-0/partition/a?consumerGroup=cursor&subscriptionMode=all&batch=100&wait=false`);
  const consumed = pop.body.messages.map((m) => m.transactionId);
  assert.equal(consumed.length, PER_QUEUE / 2);
  const acks = pop.body.messages.map((m) => ({ transactionId: m.transactionId, partitionId: m.partitionId,
    status: 'completed', leaseId: pop.body.leaseId }));
  const acked = await getJson(`${url}/api/v1/ack/batch`, post({ acknowledgments: acks, consumerGroup: 'cursor' }));
  assert.ok(acked.status === 200 && acked.body.every((a) => a.success), JSON.stringify(acked.body));
  for (const q of ['rs-1', 'rs-2']) {
    const one = await getJson(`${url}/api/v1/pop/queue/${q}?batch=1&wait=false`);
    const m = one.body.messages[0];
    const ack = await getJson(`${url}/api/v1/ack`, post({ transactionId: m.transactionId, partitionId: m.partitionId,
      status: 'dlq', error: 'bad', leaseId: one.body.leaseId }));
    assert.equal(ack.body[0].dlq, true, JSON.stringify(ack.body));
  }
  return { sent, consumed };
}

/** Checks the broker at `url` (running `count` shards) holds `data` once, with ids that route, and works. */
async function verify(url, count, data, round) {
  const { sent, consumed } = data;
  for (const q of QUEUES) {
    const got = (await drain(url, q, `fresh-${round}`)).sort();
    assert.deepEqual(got, sent[q], `${q}: every message once`);
    const parts = await getJson(`${url}/api/v1/resources/partitions?queue=${q}`);
    assert.equal(parts.status, 200, JSON.stringify(parts.body));
    assert.equal(parts.body.partitions.length, q === 'rs-3' && round !== 'four' && round !== 'resumed' ? 3 : 2, q);
    for (const p of parts.body.partitions) {
      assert.equal((Number(p.id ?? p.partitionId) - 1) % count, shardOf(q, count), `${q} partition ${JSON.stringify(p)}`);
    }
  }
  // The cursor: group `cursor` gets only what it had not acknowledged.
  // (After the first check it has consumed everything: then nothing comes again.)
  const rest = await drain(url, 'rs-0', 'cursor');
  assert.equal(rest.length, data.cursorDrained ? 0 : PER_QUEUE / 2, JSON.stringify(rest));
  data.cursorDrained = true;
  assert.ok(consumed.every((tx) => !rest.includes(tx)), 'acknowledged messages are not delivered again');
  // Dead letters: both there, with ids that route to their queue's shard.
  const dlq = await getJson(`${url}/api/v1/dlq?limit=100`);
  assert.equal(dlq.status, 200, JSON.stringify(dlq.body));
  assert.deepEqual(dlq.body.messages.map((m) => m.queue).sort(), ['rs-1', 'rs-2']);
  for (const m of dlq.body.messages) {
    if (count > 1) assert.equal(parseInt(m.id.slice(-4), 16) % count, shardOf(m.queue, count), JSON.stringify(m));
    const byQueue = await getJson(`${url}/api/v1/dlq?queue=${m.queue}`);
    assert.deepEqual(byQueue.body.messages.map((r) => r.id), [m.id]);
  }
  // New traffic: a push and its pop and ack on a moved queue.
  const push = await getJson(`${url}/api/v1/push`, post({ items: [{ queue: 'rs-3', payload: round, transactionId: `new-${round}` }] }));
  assert.equal(push.status, 201, JSON.stringify(push.body));
  assert.equal((Number(push.body[0].partitionId) - 1) % count, shardOf('rs-3', count));
  assert.deepEqual(await drain(url, 'rs-3', `fresh-${round}`), [`new-${round}`]);
  sent['rs-3'] = [...sent['rs-3'], `new-${round}`].sort();
}

/** Calls the migration until it answers done; returns the answers. */
async function migrate(url, body = {}) {
  const answers = [];
  for (let i = 0; i < 50; i++) {
    const r = await getJson(`${url}/api/v1/system/reshard`, post(body));
    assert.equal(r.status, 200, JSON.stringify(r.body));
    answers.push(r.body);
    if (r.body.done) return answers;
  }
  throw new Error(`not done after 50 calls: ${JSON.stringify(answers.at(-1))}`);
}

test('SHARDS=1 data moves to 4 shards, then to 2: every message, cursor and dead letter once', { timeout: 300_000 }, async () => {
  const state = tempPersistDir();
  try {
    let w = await startWorker({ persistTo: state.dir, vars: { SHARDS: '1' } });
    const data = await seed(w.url);
    await w.stop();

    // Without the migration, a changed SHARDS is refused; the route wants RESHARD_FROM.
    w = await startWorker({ persistTo: state.dir, vars: { SHARDS: '4' }, readyStatus: 503 });
    const refused = await getJson(`${w.url}/api/v1/pop/queue/rs-0?wait=false`);
    assert.equal(refused.status, 503);
    assert.match(refused.body.error, /written with SHARDS=1.*RESHARD_FROM=1/);
    const noFrom = await getJson(`${w.url}/api/v1/system/reshard`, post({}));
    assert.equal(noFrom.status, 409);
    assert.match(noFrom.body.error, /RESHARD_FROM is not set/);
    await w.stop();

    w = await startWorker({ persistTo: state.dir, vars: { SHARDS: '4', RESHARD_FROM: '1' }, readyStatus: 503 });
    const before = await getJson(`${w.url}/api/v1/system/reshard`);
    assert.deepEqual([before.status, before.body.moved, before.body.total, before.body.done], [200, 0, QUEUES.length, false]);
    const bad = await getJson(`${w.url}/api/v1/system/reshard`, post({ maxQueues: 0 }));
    assert.equal(bad.status, 400);
    const step = await getJson(`${w.url}/api/v1/system/reshard`, post({ maxQueues: 3 }));
    assert.deepEqual([step.status, step.body.moved, step.body.total, step.body.done], [200, 3, QUEUES.length, false],
      JSON.stringify(step.body));
    // Mid-migration: requests are refused with a 503 that names the migration, and progress shows.
    const during = await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: 'rs-0', payload: 'x' }] }));
    assert.equal(during.status, 503, JSON.stringify(during.body));
    assert.match(during.body.error, /migration/);
    const progress = await getJson(`${w.url}/api/v1/system/reshard`);
    assert.deepEqual([progress.body.moved, progress.body.total], [3, QUEUES.length]);
    const answers = await migrate(w.url);
    assert.equal(answers.at(-1).moved, QUEUES.length, JSON.stringify(answers));
    assert.equal((await getJson(`${w.url}/health`)).status, 200);
    await verify(w.url, 4, data, 'four');
    // Done: calling again changes nothing, and still says what the migration moved.
    const again = await getJson(`${w.url}/api/v1/system/reshard`, post({}));
    assert.deepEqual([again.status, again.body.done], [200, true]);
    assert.deepEqual([again.body.moved, again.body.total, again.body.phase], [QUEUES.length, QUEUES.length, 'done'],
      JSON.stringify(again.body));
    const report = await getJson(`${w.url}/api/v1/system/reshard`);
    assert.deepEqual([report.body.moved, report.body.done, report.body.plan], [QUEUES.length, true, answers.at(-1).plan]);
    await w.stop();

    w = await startWorker({ persistTo: state.dir, vars: { SHARDS: '2', RESHARD_FROM: '4' }, readyStatus: 503 });
    await migrate(w.url, { maxQueues: 5 });
    await verify(w.url, 2, data, 'two');
    await w.stop();

    // Back on SHARDS=2 without RESHARD_FROM: it simply runs.
    w = await startWorker({ persistTo: state.dir, vars: { SHARDS: '2' } });
    const listed = await getJson(`${w.url}/api/v1/resources/queues`);
    assert.deepEqual(listed.body.queues.map((q) => q.name).filter((n) => n.startsWith('rs-')).sort(), QUEUES);
    await w.stop();
  } finally {
    state.cleanup();
  }
});

test('a migration killed between a queue\'s import and its drop ends with every message once', { timeout: 300_000 }, async () => {
  const state = tempPersistDir();
  try {
    let w = await startWorker({ persistTo: state.dir, vars: { SHARDS: '1' } });
    const data = await seed(w.url);
    await w.stop();

    const vars = { SHARDS: '4', RESHARD_FROM: '1', QUEEN_TEST_ROUTES: 'true' };
    w = await startWorker({ persistTo: state.dir, vars, readyStatus: 503 });
    // The first queue that leaves shard 0 is imported into its new shard, and then the process dies
    // before it is dropped from the old one.
    const stopped = await getJson(`${w.url}/api/v1/system/reshard`, post({ stopAfter: 'import' }));
    assert.equal(stopped.status, 500, JSON.stringify(stopped.body));
    assert.match(stopped.body.error, /stopped after importing/);
    process.kill(workerdUnder(w.pid), 'SIGKILL');
    await w.stop();

    w = await startWorker({ persistTo: state.dir, vars, readyStatus: 503 });
    // Killed again at an arbitrary moment of a run.
    const run = getJson(`${w.url}/api/v1/system/reshard`, post({ maxQueues: 1 })).catch((e) => e);
    await sleep(40);
    process.kill(workerdUnder(w.pid), 'SIGKILL');
    await run;
    await w.stop();

    w = await startWorker({ persistTo: state.dir, vars, readyStatus: 503 });
    const answers = await migrate(w.url);
    assert.equal(answers.at(-1).total, QUEUES.length, JSON.stringify(answers));
    await verify(w.url, 4, data, 'resumed');
    await w.stop();
  } finally {
    state.cleanup();
  }
});

test('leases in flight hold the migration back until they expire; nothing moves meanwhile', { timeout: 120_000 }, async () => {
  const state = tempPersistDir();
  try {
    let w = await startWorker({ persistTo: state.dir, vars: { SHARDS: '1' } });
    // The lease must outlive the Worker's stop and restart below and the first reshard call (about 0.3 s
    // unloaded, several seconds on a saturated machine).
    const LEASE_S = 15;
    const conf = await getJson(`${w.url}/api/v1/configure`, post({ queue: 'leased', options: { leaseTime: LEASE_S } }));
    assert.equal(conf.status, 200, JSON.stringify(conf.body));
    await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: 'leased', payload: 1, transactionId: 'l-1' }] }));
    const pop = await getJson(`${w.url}/api/v1/pop/queue/leased?wait=false`);
    // Taken once the pop answered: the lease, which started before, has surely expired LEASE_S after it.
    const poppedAt = Date.now();
    assert.equal(pop.status, 200);
    await w.stop();

    w = await startWorker({ persistTo: state.dir, vars: { SHARDS: '2', RESHARD_FROM: '1' }, readyStatus: 503 });
    const held = await getJson(`${w.url}/api/v1/system/reshard`, post({}));
    assert.equal(held.status, 409, JSON.stringify(held.body));
    assert.match(held.body.error, /1 leases are in flight/);
    assert.equal(held.body.moved, 0);
    await sleep(Math.max(0, poppedAt + LEASE_S * 1000 + 500 - Date.now()));
    await migrate(w.url);
    // The expired lease's message is delivered again, once.
    assert.deepEqual(await drain(w.url, 'leased', null), ['l-1']);
    await w.stop();
  } finally {
    state.cleanup();
  }
});

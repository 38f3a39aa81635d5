// Issue 16 through the Worker and its Durable Object in real workerd, over real HTTP: the per-queue
// options reclaimLimit (crash-loop quarantine), retryBackoff and deliveryLog, GET /api/v1/deliveries,
// and the bulk dead-letter routes POST /api/v1/dlq/replay and /api/v1/dlq/delete, with a restart on the
// same state in between (options, quarantine and delivery records are stored).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startWorker, tempPersistDir, getJson, sleep } from './harness.mjs';

const state = tempPersistDir();
after(() => state.cleanup());

const post = (body) => ({
  method: 'POST',
  headers: { 'Content-Type': 'application/json' },
  body: JSON.stringify(body),
});

async function push(url, queue, items) {
  const r = await getJson(`${url}/api/v1/push`, post({
    items: items.map(([transactionId, partition]) => ({ queue, partition, transactionId, payload: { transactionId } })),
  }));
  assert.equal(r.status, 201, JSON.stringify(r.body));
}

async function pop(url, queue, batch) {
  const r = await getJson(`${url}/api/v1/pop/queue/${queue}?batch=${batch}&wait=false`);
  return r.status === 204 ? [] : r.body.messages;
}

test('reclaimLimit quarantines, then dead-letters; the delivery log and options survive a restart', async () => {
  let w = await startWorker({ persistTo: state.dir });
  try {
    const configured = await getJson(`${w.url}/api/v1/configure`, post({
      queue: 'crashy',
      options: { leaseTime: 1, reclaimLimit: 1, deliveryLog: 'failures', retryBackoff: { baseMs: 30000, factor: 2, maxMs: 60000 } },
    }));
    assert.equal(configured.status, 200, JSON.stringify(configured.body));
    assert.equal(configured.body.options.reclaimLimit, 1);
    assert.deepEqual(configured.body.options.retryBackoff, { baseMs: 30000, factor: 2, maxMs: 60000 });

    const bad = await getJson(`${w.url}/api/v1/configure`, post({ queue: 'x', options: { retryBackoff: { baseMs: 10, factor: 0 } } }));
    assert.equal(bad.status, 400);
    assert.match(bad.body.error, /factor/);

    await push(w.url, 'crashy', [['c0', 'Default'], ['c1', 'Default'], ['c2', 'Default']]);
    assert.equal((await pop(w.url, 'crashy', 3)).length, 3);
    await sleep(1100); // the consumer "crashed": its lease runs out
    const alone = await pop(w.url, 'crashy', 3);
    assert.deepEqual(alone.map((m) => m.transactionId), ['c0'], 'the head alone');
  } finally {
    await w.stop();
  }

  w = await startWorker({ persistTo: state.dir });
  try {
    const view = await getJson(`${w.url}/api/v1/resources/queues/crashy`);
    assert.equal(view.body.options.deliveryLog, 'failures', 'options are stored');
    await sleep(1100); // the head alone outlives its lease again
    const rest = await pop(w.url, 'crashy', 3);
    assert.deepEqual(rest.map((m) => m.transactionId), ['c1', 'c2'], 'whole spans again');
    const dlq = await getJson(`${w.url}/api/v1/dlq?queue=crashy`);
    assert.equal(dlq.body.messages.length, 1);
    assert.equal(dlq.body.messages[0].transactionId, 'c0');
    assert.match(dlq.body.messages[0].errorMessage, /expired 1 times/);

    // A failed delivery is held for baseMs, shown on the lane (30 s: read well within it on a loaded machine).
    const ack = await getJson(`${w.url}/api/v1/ack`, post({
      transactionId: 'c1', partitionId: rest[0].partitionId, leaseId: rest[0].leaseId, status: 'failed', error: 'boom',
    }));
    assert.equal(ack.status, 200, JSON.stringify(ack.body));
    const lane = (await getJson(`${w.url}/api/v1/resources/queues/crashy`)).body.partitions[0].lanes[0];
    assert.ok(lane.holdUntil, JSON.stringify(lane));

    const log = await getJson(`${w.url}/api/v1/deliveries?queue=crashy`);
    assert.equal(log.status, 200, JSON.stringify(log.body));
    assert.deepEqual(log.body.deliveries.map((d) => d.outcome), ['failed', 'expired', 'expired']);
    assert.deepEqual([log.body.deliveries[1].fromOffset, log.body.deliveries[1].toOffset], [0, 0]);
    assert.deepEqual([log.body.deliveries[2].fromOffset, log.body.deliveries[2].toOffset], [0, 2]);
    const byTx = await getJson(`${w.url}/api/v1/deliveries?queue=crashy&transactionId=c2`);
    assert.equal(byTx.body.total, 2, 'c2 was in the failed span and the first expired one');
    const badLimit = await getJson(`${w.url}/api/v1/deliveries?limit=0`);
    assert.equal(badLimit.status, 400);
  } finally {
    await w.stop();
  }
});

test('bulk dead-letter replay and delete by filter, in chunks, with a dry run first', async () => {
  const fresh = tempPersistDir();
  const w = await startWorker({ persistTo: fresh.dir });
  try {
    const rows = 130;
    await push(w.url, 'bulk', Array.from({ length: rows }, (_, i) => [`b${i}`, i % 2 ? 'odd' : 'even']));
    for (let i = 0; i < rows; i++) {
      const [m] = await pop(w.url, 'bulk', 1);
      const r = await getJson(`${w.url}/api/v1/ack`, post({
        transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'dlq',
        error: m.partition === 'odd' ? 'odd failure' : 'even failure',
      }));
      assert.equal(r.body[0]?.dlq ?? r.body.dlq, true, JSON.stringify(r.body));
    }

    const dry = await getJson(`${w.url}/api/v1/dlq/replay`, post({ queue: 'bulk', errorContains: 'even', dryRun: true }));
    assert.equal(dry.status, 200, JSON.stringify(dry.body));
    assert.equal(dry.body.count, rows / 2);
    assert.equal(dry.body.sample.length, 10);
    assert.ok(dry.body.sample.every((d) => d.partition === 'even'));

    // A push sent while the replay runs is answered too (the replay goes in chunks, one command each).
    const [replay, pushed] = await Promise.all([
      getJson(`${w.url}/api/v1/dlq/replay`, post({ queue: 'bulk', partition: 'even' })),
      getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: 'side', payload: 1 }] })),
    ]);
    assert.equal(pushed.status, 201);
    assert.equal(replay.status, 200, JSON.stringify(replay.body));
    assert.deepEqual(replay.body, { dryRun: false, selected: rows / 2, replayed: rows / 2, queued: rows / 2, duplicates: 0, chunks: 1 });
    const back = await getJson(`${w.url}/api/v1/pop/queue/bulk/partition/even?batch=1000&wait=false`);
    assert.equal(back.body.messages.length, rows / 2);
    assert.ok(back.body.messages.every((m) => m.transactionId.startsWith('dlq:')));

    const again = await getJson(`${w.url}/api/v1/dlq/replay`, post({ queue: 'bulk', partition: 'even' }));
    assert.equal(again.body.replayed, 0, 'replayed rows are gone: a second replay adds nothing');

    const del = await getJson(`${w.url}/api/v1/dlq/delete`, post({ queue: 'bulk', consumerGroup: '__QUEUE_MODE__', limit: 60 }));
    assert.deepEqual(del.body, { dryRun: false, selected: 60, deleted: 60, chunks: 1 });
    const left = await getJson(`${w.url}/api/v1/dlq?queue=bulk&limit=1000`);
    assert.equal(left.body.messages.length, rows / 2 - 60);

    const badBody = await getJson(`${w.url}/api/v1/dlq/delete`, post({ from: 'not a time' }));
    assert.equal(badBody.status, 400);
    assert.match(badBody.body.error, /from/);
  } finally {
    await w.stop();
    fresh.cleanup();
  }
});

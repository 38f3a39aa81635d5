// Storage the previous build wrote (format 1: every segment in `queen_kv`) under this build: a backlog pushed,
// rewritten into the previous build's layout (`/__test/store/downgrade`), served again by a restarted workerd,
// which opens it as format 3 (segments written from then on go to `queen_seg` and `queen_blob`, the old ones stay where they
// are); more is pushed, and the whole backlog is popped and acked, in order, each message once, byte for byte.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startWorker, tempPersistDir, getJson, post } from './harness.mjs';

const state = tempPersistDir();
after(() => state.cleanup());

const VARS = { QUEEN_TEST_ROUTES: 'true', SHARDS: '1' };
const QUEUE = 'upgrade';
const PARTITIONS = ['p0', 'p1', 'p2'];
const payload = (partition, i) => ({ partition, i, pad: 'x'.repeat(200 + (i % 7)) });

async function pushRange(url, from, to) {
  for (let start = from; start < to; start += 50) {
    for (const partition of PARTITIONS) {
      const items = [];
      for (let i = start; i < Math.min(start + 50, to); i++) {
        items.push({ queue: QUEUE, partition, transactionId: `${partition}-${i}`, payload: payload(partition, i) });
      }
      const res = await getJson(`${url}/api/v1/push`, post({ items }));
      assert.equal(res.status, 201, JSON.stringify(res.body));
    }
  }
}

test('a backlog the previous build stored is popped and acked after the upgrade, with what is pushed since', async (t) => {
  let w = await startWorker({ persistTo: state.dir, vars: VARS });
  try {
    await pushRange(w.url, 0, 300);
    const before = await getJson(`${w.url}/__test/store/layout?object=default`);
    assert.equal(before.status, 200, JSON.stringify(before.body));
    assert.deepEqual([before.body.format, before.body.kvSegmentRows], [3, 0], JSON.stringify(before.body));
    assert.ok(before.body.blobRows > 0, `long segments go to queen_blob: ${JSON.stringify(before.body)}`);
    assert.ok(before.body.segRows > 0, JSON.stringify(before.body));
    const down = await getJson(`${w.url}/__test/store/downgrade?object=default`, { method: 'POST' });
    assert.equal(down.status, 200, JSON.stringify(down.body));
    assert.equal(down.body.moved, before.body.segRows);
    const old = await getJson(`${w.url}/__test/store/layout?object=default`);
    t.diagnostic(`as the previous build would have left it: ${JSON.stringify(old.body)}`);
    assert.deepEqual([old.body.format, old.body.hasSegTable, old.body.kvSegmentRows], [1, false, down.body.moved]);
  } finally {
    await w.stop();
  }

  w = await startWorker({ persistTo: state.dir, vars: VARS });
  try {
    // The first request (the start's `/health`) opened the broker: format 3, the old segments where they were.
    const old = await getJson(`${w.url}/__test/store/layout?object=default`);
    t.diagnostic(`opened by this build: ${JSON.stringify(old.body)}`);
    assert.deepEqual([old.body.format, old.body.hasSegTable, old.body.segRows], [3, true, 0]);
    assert.ok(old.body.kvSegmentRows > 0);
    // More is pushed to the same partitions.
    await pushRange(w.url, 300, 400);
    const mixed = await getJson(`${w.url}/__test/store/layout?object=default`);
    t.diagnostic(`after the upgrade and more pushes: ${JSON.stringify(mixed.body)}`);
    assert.equal(mixed.body.format, 3);
    assert.equal(mixed.body.kvSegmentRows, old.body.kvSegmentRows, 'the old segments stay in queen_kv');
    assert.ok(mixed.body.segRows > 0, 'new segments go to queen_seg');
    assert.ok(mixed.body.blobRows > 0, 'new long segments go to queen_blob');

    const seen = new Map(PARTITIONS.map((p) => [p, []]));
    for (let round = 0; round < 100; round++) {
      const pop = await getJson(`${w.url}/api/v1/pop/queue/${QUEUE}?batch=70&wait=false`);
      if (pop.status === 204) break;
      assert.equal(pop.status, 200, JSON.stringify(pop.body));
      for (const m of pop.body.messages) {
        assert.deepEqual(m.data, payload(m.data.partition, m.data.i));
        seen.get(m.data.partition).push(m.data.i);
      }
      const acknowledgments = pop.body.messages.map((m) => ({
        transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'completed',
      }));
      const ack = await getJson(`${w.url}/api/v1/ack/batch`, post({ acknowledgments }));
      assert.equal(ack.status, 200, JSON.stringify(ack.body));
      assert.ok(ack.body.every((r) => r.success), JSON.stringify(ack.body));
    }
    for (const [partition, got] of seen) {
      assert.deepEqual(got, Array.from({ length: 400 }, (_, i) => i), `${partition}: every message once, in order`);
    }
    const empty = await getJson(`${w.url}/api/v1/pop/queue/${QUEUE}?batch=10&wait=false`);
    assert.equal(empty.status, 204);

    // The queue deleted: its segments go from every table (the long ones' `queen_blob` rows too), the previous
    // build's from `queen_kv`.
    const deleted = await getJson(`${w.url}/api/v1/resources/queues/${QUEUE}`, { method: 'DELETE' });
    assert.ok(deleted.status < 300, JSON.stringify(deleted.body));
    const gone = await getJson(`${w.url}/__test/store/layout?object=default`);
    t.diagnostic(`after the queue is deleted: ${JSON.stringify(gone.body)}`);
    assert.deepEqual([gone.body.format, gone.body.kvSegmentRows, gone.body.segRows, gone.body.blobRows], [3, 0, 0, 0],
      JSON.stringify(gone.body));
  } finally {
    await w.stop();
  }
});

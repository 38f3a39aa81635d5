// Retention and eviction run from the Durable Object's alarm: a queue with maxWaitTimeSeconds loses its
// unconsumed messages once they are old enough, without any request asking for it.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startWorker, tempPersistDir, getJson, post } from './harness.mjs';

const state = tempPersistDir();
after(() => state.cleanup());

test('the alarm evicts expired messages', async () => {
  const w = await startWorker({ persistTo: state.dir, vars: { MAINTENANCE_INTERVAL_MS: '500' } });
  try {
    const cfg = await getJson(`${w.url}/api/v1/configure`, post({ queue: 'evict', options: { maxWaitTimeSeconds: 1 } }));
    assert.equal(cfg.status, 200, JSON.stringify(cfg.body));
    const keep = await getJson(`${w.url}/api/v1/configure`, post({ queue: 'keep', options: {} }));
    assert.equal(keep.status, 200);
    const push = await getJson(`${w.url}/api/v1/push`, post({
      items: [1, 2, 3].map((n) => ({ queue: 'evict', payload: { n } })).concat([{ queue: 'keep', payload: { n: 4 } }]),
    }));
    assert.equal(push.status, 201, JSON.stringify(push.body));
    const deadline = Date.now() + 20_000;
    let messages = null;
    let partition = null;
    while (Date.now() < deadline) {
      const q = await getJson(`${w.url}/api/v1/resources/queues/evict`);
      // Read strictly: a missing field must fail, not count as zero messages.
      assert.equal(q.body.partitions?.length, 1, JSON.stringify(q.body));
      partition = q.body.partitions[0];
      messages = partition.stats.total;
      assert.equal(typeof messages, 'number', JSON.stringify(partition));
      if (messages === 0) break;
      await new Promise((r) => setTimeout(r, 300));
    }
    assert.equal(messages, 0, 'evicted by the alarm within 20 s');
    assert.equal(partition.nextOffset, 3, 'the three messages were stored before they were evicted');
    const kept = await getJson(`${w.url}/api/v1/pop/queue/keep?batch=10&wait=false`);
    assert.equal(kept.status, 200, 'a queue without eviction keeps its messages');
    assert.equal(kept.body.messages.length, 1);
  } finally {
    await w.stop();
  }
});

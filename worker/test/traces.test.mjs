// Traces through real workerd: a consumer of the JS client (js/client.js, Queen's queen-mq API over
// HTTP) calls `msg.trace(...)`; the events are read back per message, by name and as names, and are
// still there after a restart of workerd. The measured counters (/metrics) survive the restart too.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startWorker, tempPersistDir, getJson } from './harness.mjs';
import { QueenClient } from '../../js/client.js';
import { HttpTransport } from '../../js/http.js';

const state = tempPersistDir();
after(() => state.cleanup());

test('msg.trace from the client is stored, read back and kept across a restart', async () => {
  let w = await startWorker({ persistTo: state.dir });
  let pid;
  try {
    const queen = new QueenClient(new HttpTransport(w.url));
    await queen.queue('orders').push([
      { data: { id: 1 }, transactionId: 'order-tx-1' },
      { data: { id: 2 }, transactionId: 'order-tx-2' },
    ]);
    const seen = [];
    await queen.queue('orders').group('billing').subscriptionMode('all').batch(10).limit(2).each()
      .consume(async (msg) => {
        pid = msg.partitionId;
        const a = await msg.trace({ traceName: `order-${msg.data.id}`, data: { step: 'start' } });
        const b = await msg.trace({ traceNames: ['billing', `order-${msg.data.id}`], eventType: 'done', data: { ok: true } });
        seen.push([a.success, b.success]);
      });
    assert.deepEqual(seen, [[true, true], [true, true]]);

    const traces = await queen.admin.getTracesForMessage(pid, 'order-tx-1');
    assert.deepEqual(traces.traces.map((t) => [t.eventType, t.data, t.traceNames, t.consumerGroup]), [
      ['info', { step: 'start' }, ['order-1'], 'billing'],
      ['done', { ok: true }, ['billing', 'order-1'], 'billing'],
    ]);
  } finally {
    await w.stop();
  }

  w = await startWorker({ persistTo: state.dir });
  try {
    const byName = await getJson(`${w.url}/api/v1/traces/by-name/billing?limit=10`);
    assert.equal(byName.status, 200);
    assert.deepEqual(byName.body.traces.map((t) => [t.transactionId, t.queueName, t.eventType]), [
      ['order-tx-1', 'orders', 'done'],
      ['order-tx-2', 'orders', 'done'],
    ]);
    const names = await getJson(`${w.url}/api/v1/traces/names`);
    assert.equal(names.body.total, 3);
    assert.deepEqual(names.body.traceNames.map((n) => n.traceName).sort(), ['billing', 'order-1', 'order-2']);
    const one = await getJson(`${w.url}/api/v1/traces/${pid}/order-tx-2`);
    assert.equal(one.body.traces.length, 2);
    // The counters are stored: the restart keeps what was pushed, delivered and acknowledged.
    const metrics = await getJson(`${w.url}/metrics`);
    assert.deepEqual(
      [metrics.body.broker.pushed, metrics.body.broker.popped, metrics.body.broker.acked],
      [2, 2, 2],
      JSON.stringify(metrics.body),
    );
    const missing = await getJson(`${w.url}/api/v1/traces`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ transactionId: 'nope', partitionId: pid, data: {} }),
    });
    assert.deepEqual([missing.status, missing.body], [404, { error: 'Message not found' }]);
  } finally {
    await w.stop();
  }
});

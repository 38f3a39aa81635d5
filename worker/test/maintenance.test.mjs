// Maintenance mode through real workerd (wire-contract §1.11): with push maintenance on, pushes are
// answered `buffered` and stored; the switch and the buffer survive a restart of workerd; turned off,
// the buffer drains into the queue in order, each message once (the client's retried requests
// included). Pop maintenance answers every pop empty until it is turned off.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startWorker, tempPersistDir, getJson, post } from './harness.mjs';

const state = tempPersistDir();
after(() => state.cleanup());

test('buffered pushes survive a restart and drain in order, each once', async () => {
  let w = await startWorker({ persistTo: state.dir });
  try {
    const on = await getJson(`${w.url}/api/v1/system/maintenance`, post({ enabled: true }));
    assert.equal(on.status, 200, JSON.stringify(on.body));
    assert.equal(on.body.maintenanceMode, true);
    const bad = await getJson(`${w.url}/api/v1/system/maintenance`, post({ enabled: 'yes' }));
    assert.deepEqual([bad.status, bad.body], [400, { error: 'enabled (boolean) is required' }]);
    // 50 messages in 5 requests; requests 2 and 4 are sent twice, as a client retrying would.
    for (const r of [0, 1, 2, 2, 3, 4, 4]) {
      const items = Array.from({ length: 10 }, (_, i) => ({
        queue: 'mm', payload: { n: r * 10 + i }, transactionId: `tx-${r * 10 + i}`,
      }));
      const push = await getJson(`${w.url}/api/v1/push`, post({ items }));
      assert.equal(push.status, 201, JSON.stringify(push.body));
      assert.deepEqual(push.body.map((x) => x.status), Array(10).fill('buffered'));
      assert.deepEqual(push.body.map((x) => x.transactionId), items.map((x) => x.transactionId));
    }
    const none = await fetch(`${w.url}/api/v1/pop/queue/mm?batch=100`);
    assert.equal(none.status, 204, 'nothing is delivered while pushes are buffered');
  } finally {
    await w.stop();
  }

  w = await startWorker({ persistTo: state.dir });
  try {
    const status = await getJson(`${w.url}/api/v1/system/maintenance`);
    assert.equal(status.status, 200);
    assert.equal(status.body.maintenanceMode, true, 'the switch survived the restart');
    assert.equal(status.body.bufferedMessages, 70, 'and so did the buffer');
    const off = await getJson(`${w.url}/api/v1/system/maintenance`, post({ enabled: false }));
    assert.equal(off.status, 200, JSON.stringify(off.body));
    assert.deepEqual([off.body.maintenanceMode, off.body.bufferedMessages], [false, 0]);
    const pop = await getJson(`${w.url}/api/v1/pop/queue/mm?batch=1000&autoAck=true`);
    assert.equal(pop.status, 200);
    assert.deepEqual(pop.body.messages.map((m) => m.data.n), Array.from({ length: 50 }, (_, i) => i),
      'every buffered message, in order, once');
    const after = await fetch(`${w.url}/api/v1/pop/queue/mm?batch=1000&autoAck=true`);
    assert.equal(after.status, 204, 'nothing twice');
  } finally {
    await w.stop();
  }
});

test('pop maintenance answers every pop empty until it is turned off', async () => {
  const fresh = tempPersistDir();
  const w = await startWorker({ persistTo: fresh.dir });
  try {
    const push = await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: 'pm', payload: 1 }] }));
    assert.equal(push.status, 201);
    const on = await getJson(`${w.url}/api/v1/system/maintenance/pop`, post({ enabled: true }));
    assert.deepEqual([on.status, on.body.popMaintenanceMode], [200, true]);
    assert.equal((await fetch(`${w.url}/api/v1/pop/queue/pm?batch=10`)).status, 204);
    // A long-poll parks while pops are paused and is answered once they resume.
    const parked = getJson(`${w.url}/api/v1/pop/queue/pm?batch=10&wait=true&timeout=20000`);
    await new Promise((r) => setTimeout(r, 500));
    const off = await getJson(`${w.url}/api/v1/system/maintenance/pop`, post({ enabled: false }));
    assert.deepEqual([off.status, off.body.popMaintenanceMode], [200, false]);
    const answer = await parked;
    assert.equal(answer.status, 200);
    assert.deepEqual(answer.body.messages.map((m) => m.data), [1]);
  } finally {
    await w.stop();
    fresh.cleanup();
  }
});

// Over real HTTP against the Durable Object in workerd: a parked long-poll is woken by a push and by a
// nack (retry), the retryDelay hold is honoured, subscription modes decide where a new group starts, and an
// empty long-poll waits its timeout and answers 204; a long-poll whose client went claims nothing.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { startWorker, tempPersistDir, getJson, post, sleep } from './harness.mjs';

const state = tempPersistDir();
let w;
before(async () => { w = await startWorker({ persistTo: state.dir, vars: { QUEEN_TEST_ROUTES: 'true' } }); });
after(async () => { await w?.stop(); state.cleanup(); });

test('a parked long-poll wakes on a push', async () => {
  const started = Date.now();
  const parked = getJson(`${w.url}/api/v1/pop/queue/lp-push?wait=true&timeout=20000`);
  await sleep(800);
  const push = await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: 'lp-push', payload: { n: 1 } }] }));
  assert.equal(push.status, 201);
  const got = await parked;
  const waited = Date.now() - started;
  assert.equal(got.status, 200, JSON.stringify(got.body));
  assert.deepEqual(got.body.messages.map((m) => m.data), [{ n: 1 }]);
  assert.ok(waited >= 700 && waited < 10_000, `answered at the push, not at the timeout (${waited} ms)`);
});

test('a parked long-poll wakes on a retry nack; a failed nack waits for retryDelay', async () => {
  await getJson(`${w.url}/api/v1/configure`, post({ queue: 'lp-nack', options: { retryDelay: 1500, retryLimit: 3 } }));
  await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: 'lp-nack', payload: 'x', transactionId: 't1' }] }));
  const first = await getJson(`${w.url}/api/v1/pop/queue/lp-nack?wait=false`);
  assert.equal(first.status, 200);
  const m = first.body.messages[0];
  const parked = getJson(`${w.url}/api/v1/pop/queue/lp-nack?wait=true&timeout=20000`);
  await sleep(500);
  const t0 = Date.now();
  const nack = await getJson(`${w.url}/api/v1/ack`, post({ transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'retry' }));
  assert.equal(nack.status, 200);
  assert.equal(nack.body[0].success, true);
  const again = await parked;
  assert.equal(again.status, 200);
  assert.ok(Date.now() - t0 < 5_000, 'woken by the release');
  assert.equal(again.body.messages[0].transactionId, 't1');

  const m2 = again.body.messages[0];
  const parked2 = getJson(`${w.url}/api/v1/pop/queue/lp-nack?wait=true&timeout=20000`);
  await sleep(300);
  const t1 = Date.now();
  const failed = await getJson(`${w.url}/api/v1/ack`, post({ transactionId: m2.transactionId, partitionId: m2.partitionId, leaseId: m2.leaseId, status: 'failed', error: 'boom' }));
  assert.equal(failed.body[0].success, true);
  const third = await parked2;
  const held = Date.now() - t1;
  assert.equal(third.status, 200);
  assert.equal(third.body.messages[0].retryCount, 1);
  assert.ok(held >= 1_300, `held for retryDelay before redelivery (${held} ms)`);
});

test('an empty long-poll waits its timeout and answers 204', async () => {
  const t0 = Date.now();
  const r = await fetch(`${w.url}/api/v1/pop/queue/lp-empty?wait=true&timeout=1500`);
  assert.equal(r.status, 204);
  assert.equal((await r.text()).length, 0);
  assert.ok(Date.now() - t0 >= 1_400, 'really waited');
});

test('subscription modes: new skips history, all reads it, the first pop decides', async () => {
  await getJson(`${w.url}/api/v1/push`, post({ items: [1, 2, 3].map((n) => ({ queue: 'subs', payload: n })) }));
  await sleep(20);
  const fresh = await fetch(`${w.url}/api/v1/pop/queue/subs?consumerGroup=fresh&subscriptionMode=new&batch=10`);
  assert.equal(fresh.status, 204);
  const all = await getJson(`${w.url}/api/v1/pop/queue/subs?consumerGroup=everything&subscriptionMode=all&batch=10`);
  assert.deepEqual(all.body.messages.map((m) => m.data), [1, 2, 3]);
  const later = await fetch(`${w.url}/api/v1/pop/queue/subs?consumerGroup=fresh&subscriptionMode=all&batch=10`);
  assert.equal(later.status, 204, 'a later mode changes nothing');
  await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: 'subs', payload: 4 }] }));
  const next = await getJson(`${w.url}/api/v1/pop/queue/subs?consumerGroup=fresh&batch=10`);
  assert.deepEqual(next.body.messages.map((m) => m.data), [4]);
});

test('a long-poll whose client went claims nothing: what a later push brings goes to the next pop', async () => {
  for (const autoAck of [true, false]) {
    const q = `lp-gone-${autoAck}`;
    await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: q, payload: 'seed' }] }));
    assert.equal((await getJson(`${w.url}/api/v1/pop/queue/${q}?autoAck=true&wait=false`)).status, 200);
    // The entry's test route aborts the forwarded request after 300 ms, as workerd does when a client
    // disconnects (enable_request_signal).
    const target = `/api/v1/pop/queue/${q}?batch=10&wait=true&timeout=5000&autoAck=${autoAck}`;
    const gone = await getJson(`${w.url}/__test/abandon?object=default&after=300&target=${encodeURIComponent(target)}`);
    assert.deepEqual(gone.body, { abandoned: true }, JSON.stringify(gone.body));
    const push = await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: q, payload: 'after-abort' }] }));
    assert.equal(push.status, 201);
    await sleep(200);
    const next = await getJson(`${w.url}/api/v1/pop/queue/${q}?batch=10&wait=false`);
    assert.equal(next.status, 200, `autoAck=${autoAck}: the pop of the client that went took the message`);
    assert.deepEqual(next.body.messages.map((m) => m.data), ['after-abort']);
  }
});

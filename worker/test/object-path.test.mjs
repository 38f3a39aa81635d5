// The Broker object's request path (worker/shim.js `durableObjectClass`, `BrokerObject::serve` and
// worker/src/run_now.rs): a request that needs no wait is answered within the call that started it, one that
// must wait (a parked long-poll, the first request that opens the engine) through a Promise that resumes it.
// Over real HTTP against workerd: parked long-polls woken by pushes answered on the direct path, a long-poll's
// own timer (registered during the first, synchronous poll) still firing, and the answers' status, headers
// and bodies as the Rust-built responses had them.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { startWorker, tempPersistDir, getJson, post, sleep } from './harness.mjs';

const state = tempPersistDir();
let w;
before(async () => { w = await startWorker({ persistTo: state.dir }); });
after(async () => { await w?.stop(); state.cleanup(); });

test('parked long-polls wake one by one on pushes while other requests are answered directly', async () => {
  const parked = [1, 2, 3].map(() => getJson(`${w.url}/api/v1/pop/queue/op-wake?wait=true&timeout=20000`));
  await sleep(500);
  const answered = [];
  parked.forEach((p, i) => p.then(() => answered.push(i)));
  for (let n = 1; n <= 3; n++) {
    // Traffic on another queue in between: pushes and pops that need no wait.
    for (let k = 0; k < 5; k++) {
      // A partition each: a pop leases its partition until the ack.
      const item = { queue: 'op-busy', partition: `p${n}-${k}`, payload: k };
      assert.equal((await getJson(`${w.url}/api/v1/push`, post({ items: [item] }))).status, 201);
      assert.equal((await getJson(`${w.url}/api/v1/pop/queue/op-busy?wait=false`)).status, 200);
    }
    const before = answered.length;
    assert.equal(before, n - 1, `${before} long-polls answered before push ${n}`);
    // A partition each: the long-poll answered before keeps its partition leased (it never acks).
    const push = await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: 'op-wake', partition: `w${n}`, payload: { n } }] }));
    assert.equal(push.status, 201);
    for (let i = 0; answered.length === before && i < 100; i++) await sleep(50);
    assert.equal(answered.length, n, `push ${n} woke one long-poll`);
  }
  const got = await Promise.all(parked);
  assert.deepEqual(got.map((r) => r.status), [200, 200, 200]);
  assert.deepEqual(got.map((r) => r.body.messages[0].data.n).sort(), [1, 2, 3]);
});

test('a parked long-poll with nothing to wake it answers 204 at its timeout, not before, not never', async () => {
  const t0 = Date.now();
  // Without the waker handoff of run_now.rs the timer's wake is lost and this never answers: fail instead.
  const empty = fetch(`${w.url}/api/v1/pop/queue/op-empty?wait=true&timeout=1200`, { signal: AbortSignal.timeout(15_000) });
  // Direct-path requests meanwhile must not disturb its timer.
  for (let k = 0; k < 10; k++) await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: 'op-other', payload: k }] }));
  const r = await empty;
  assert.equal(r.status, 204);
  assert.equal((await r.text()).length, 0);
  const waited = Date.now() - t0;
  assert.ok(waited >= 1_100 && waited < 10_000, `waited ${waited} ms for a 1200 ms timeout`);
});

test('answers keep their status, headers and body', async () => {
  const push = await fetch(`${w.url}/api/v1/push`, post({ items: [{ queue: 'op-h', payload: { a: 'é' } }] }));
  assert.equal(push.status, 201);
  assert.equal(push.headers.get('content-type'), 'application/json');
  assert.equal(push.headers.get('access-control-allow-origin'), '*');
  assert.match(push.headers.get('access-control-allow-headers'), /X-Queen-Broker/);
  const pop = await fetch(`${w.url}/api/v1/pop/queue/op-h?wait=false`);
  assert.deepEqual((await pop.json()).messages[0].data, { a: 'é' }, 'non-ASCII bytes pass through');

  const none = await fetch(`${w.url}/api/v1/pop/queue/op-h?wait=false`);
  assert.equal(none.status, 204);
  assert.equal(none.headers.get('access-control-allow-origin'), '*');
  assert.equal(none.headers.get('content-type'), null);

  // An answer with headers of its own: its content type, and the CORS headers beside it.
  const prom = await fetch(`${w.url}/metrics/prometheus`);
  assert.equal(prom.status, 200);
  assert.match(prom.headers.get('content-type'), /^text\/plain/);
  assert.equal(prom.headers.get('access-control-allow-origin'), '*');
  assert.match(await prom.text(), /queen/);

  const bad = await fetch(`${w.url}/api/v1/push`, post({ items: 'nope' }));
  assert.equal(bad.status, 400);
  assert.equal(bad.headers.get('content-type'), 'application/json');
  assert.ok((await bad.json()).error);

  const empty = await fetch(`${w.url}/api/v1/push`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '' });
  assert.equal(empty.status, 400, 'an empty body is read as empty, not skipped');

  const preflight = await fetch(`${w.url}/api/v1/push`, { method: 'OPTIONS' });
  assert.equal(preflight.status, 204);
  assert.equal(preflight.headers.get('access-control-allow-methods'), 'GET, POST, PUT, DELETE, OPTIONS');
});

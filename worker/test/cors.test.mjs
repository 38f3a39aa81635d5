// Who adds the contract's CORS headers (§0.1) to the broker's answers (CORS_HEADERS, worker/src/config.rs):
// scripts/serve's default, "socket", has workerd's socket inject them into every response (and the Broker
// object's fast path leave them out); "worker", Cloudflare's case, has the Worker add them. Over real HTTP
// against both settings side by side: every kind of answer (the object's fast path with and without JSON,
// an answer with headers of its own, an error, the entry Worker's preflight, health, the page) carries each
// CORS header exactly once, with the contract's value, under either setting. Fails if the socket stops
// injecting them (the object's answers would lack them) or if both added them (values would be doubled).
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { startWorker, tempPersistDir, post } from './harness.mjs';

/** queen_edge::http::CORS_HEADERS (src/http/mod.rs), which scripts/serve's socket injects too. */
const CORS = {
  'access-control-allow-origin': '*',
  'access-control-allow-methods': 'GET, POST, PUT, DELETE, OPTIONS',
  'access-control-allow-headers': 'Content-Type, Authorization, X-Queen-Broker',
  'access-control-max-age': '86400',
};

const servers = {};
const dirs = [];
before(async () => {
  for (const setting of ['socket', 'worker']) {
    const dir = tempPersistDir();
    dirs.push(dir);
    // `socket` is scripts/serve's default: started without the variable, as a self-hosted user runs it.
    const vars = setting === 'worker' ? { CORS_HEADERS: 'worker' } : {};
    servers[setting] = await startWorker({ persistTo: dir.dir, vars });
  }
});
after(async () => {
  for (const w of Object.values(servers)) await w.stop();
  for (const dir of dirs) dir.cleanup();
});

/** Each kind of answer: its name, and the request that gets it from the broker at `url`. */
const ANSWERS = [
  ['push (201, JSON, the object fast path)', (url) => fetch(`${url}/api/v1/push`, post({ items: [{ queue: 'cors', payload: 1 }] })), 201],
  ['pop (200, JSON)', (url) => fetch(`${url}/api/v1/pop/queue/cors?wait=false`), 200],
  ['empty pop (204, no body)', (url) => fetch(`${url}/api/v1/pop/queue/cors-empty?wait=false`), 204],
  ['metrics (200, a content type of its own)', (url) => fetch(`${url}/metrics/prometheus`), 200],
  ['bad push (400, JSON error)', (url) => fetch(`${url}/api/v1/push`, post({ items: 'nope' })), 400],
  ['preflight (204, the entry Worker)', (url) => fetch(`${url}/api/v1/push`, { method: 'OPTIONS' }), 204],
  ['health (200)', (url) => fetch(`${url}/health`), 200],
];

for (const [name, send, status] of ANSWERS) {
  test(`${name}: each CORS header once, with the contract's value, whoever adds it`, async () => {
    for (const [setting, w] of Object.entries(servers)) {
      const res = await send(w.url);
      await res.arrayBuffer();
      assert.equal(res.status, status, `${setting}: status`);
      for (const [header, value] of Object.entries(CORS)) {
        // A header sent twice reads as both values joined by ", ".
        assert.equal(res.headers.get(header), value, `${setting}: ${header}`);
      }
    }
  });
}

test('the page carries them from the socket, and not from the Worker, which adds them to API answers only', async () => {
  const fromSocket = await fetch(`${servers.socket.url}/`);
  await fromSocket.text();
  assert.equal(fromSocket.status, 200);
  assert.equal(fromSocket.headers.get('access-control-allow-origin'), '*');
  const fromWorker = await fetch(`${servers.worker.url}/`);
  await fromWorker.text();
  assert.equal(fromWorker.status, 200);
  assert.equal(fromWorker.headers.get('access-control-allow-origin'), null);
});

test('a CORS_HEADERS that is neither worker nor socket stops the broker, naming it', async () => {
  const dir = tempPersistDir();
  const w = await startWorker({ persistTo: dir.dir, vars: { CORS_HEADERS: 'sockets' }, readyStatus: 503 });
  try {
    const res = await fetch(`${w.url}/api/v1/resources/queues`);
    assert.equal(res.status, 503);
    const body = await res.json();
    assert.match(body.error, /CORS_HEADERS/);
    assert.match(body.error, /sockets/);
  } finally {
    await w.stop();
    dir.cleanup();
  }
});

// The entry Worker's refusals in real workerd (docs/decisions.md, "Abuse: objects are not woken for nothing" and
// "The entry Worker's hot path (session 7)"): with BROKER_SELECTABLE on, a request the precheck refuses (no or a
// wrong token, a role too low, a declared body over MAX_BODY_BYTES, an unknown route, a bad broker name) is
// answered by the entry Worker with the broker's status, JSON error and CORS headers, and no Durable Object is
// created for the broker it names: no SQLite file appears in the state directory. An accepted request for a new
// broker does create one (the check can see a woken object). With SHARDS 1 and no JWT, these requests take the
// entry's JS hot path (worker/entry.js).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { startWorker, tempPersistDir, getJson } from './harness.mjs';

const state = tempPersistDir();
after(() => state.cleanup());

/** The SQLite files under `dir` (workerd keeps one per Durable Object that used its storage). */
function objectFiles(dir) {
  return readdirSync(dir, { recursive: true }).filter((f) => String(f).endsWith('.sqlite')).sort();
}

test('requests the entry Worker refuses never create or wake a Durable Object', async () => {
  const w = await startWorker({
    persistTo: state.dir,
    vars: { BROKER_SELECTABLE: 'true', API_TOKEN: 'admin-secret', API_TOKEN_READ_ONLY: 'ro-secret', MAX_BODY_BYTES: '1024' },
  });
  try {
    // startWorker waited for /health, which opened the default broker's object.
    const before = objectFiles(state.dir);
    const admin = { Authorization: 'Bearer admin-secret' };
    const push = (items) => JSON.stringify({ items });
    const refusals = [
      [401, /Authentication required/, '/api/v1/resources/queues', { headers: { 'X-Queen-Broker': 'probe-anon' } }],
      [401, /Invalid token/, '/api/v1/resources/queues?broker=probe-wrong', { headers: { Authorization: 'Bearer nope' } }],
      [403, /Insufficient permissions/, '/api/v1/push?broker=probe-readonly', {
        method: 'POST', headers: { Authorization: 'Bearer ro-secret', 'Content-Type': 'application/json' },
        body: push([{ queue: 'q', payload: 1 }]),
      }],
      [413, /too large/, '/api/v1/push', {
        method: 'POST', headers: { ...admin, 'X-Queen-Broker': 'probe-big', 'Content-Type': 'application/json' },
        body: push([{ queue: 'q', payload: 'x'.repeat(4096) }]),
      }],
      [404, /no_such_route/, '/api/v1/no-such-route?broker=probe-route', { headers: admin }],
      // Outside /api/v1 but under /api: the broker's JSON 404 too, not the page's (contract D18).
      [404, /no_such_route/, '/api/v2/whatever?broker=probe-v2', { headers: admin }],
      [404, /no_such_route/, '/api/push?broker=probe-api', { headers: admin }],
      [400, /broker name must be/, '/api/v1/resources/queues', { headers: { ...admin, 'X-Queen-Broker': 'bad/name' } }],
      [400, /broker name must be/, `/api/v1/resources/queues?broker=${'x'.repeat(65)}`, { headers: admin }],
    ];
    for (const [status, error, path, init] of refusals) {
      const res = await getJson(`${w.url}${path}`, init);
      assert.equal(res.status, status, `${path}: ${JSON.stringify(res.body)}`);
      assert.match(res.body.error ?? '', error, `${path}: ${JSON.stringify(res.body)}`);
      assert.equal(res.headers.get('access-control-allow-origin'), '*', path);
      assert.match(res.headers.get('content-type') ?? '', /application\/json/, path);
    }
    assert.deepEqual(objectFiles(state.dir), before, 'a refused request created a Durable Object');

    // The same broker, asked properly, is created: the file count above would have seen it.
    const ok = await getJson(`${w.url}/api/v1/resources/queues`, { headers: { ...admin, 'X-Queen-Broker': 'probe-anon' } });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.ok(objectFiles(state.dir).length > before.length, 'an accepted request for a new broker creates its object');
  } finally {
    await w.stop();
  }
});

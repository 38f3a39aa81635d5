// A Durable Object whose SQLite runs out of space (SQLITE_FULL), in real workerd: what the earlier commits of
// the same turn become, and whether an answered push is lost (docs/decisions.md, "A full disk in the Durable
// Object (session 10) — audit2"). The database is capped through workerd's test-only
// `sql.setMaxPageCountForTest` (the `experimental` compatibility flag, added by `scripts/serve --compat-flag`),
// through the routes of worker/src/selftest_full.rs.
//
// What workerd does: a statement that fails with SQLITE_FULL is undone alone; the commits before it in the same
// turn (the object's implicit transaction) stay and commit, and their answers go out. (When SQLite instead rolls
// the whole transaction back, workerd latches a critical error and breaks the object's output gate, so no
// answer of that turn leaves the object and the next request gets a fresh object opened from storage.)
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startWorker, tempPersistDir, getJson, post, workerdUnder } from './harness.mjs';

const state = tempPersistDir();
after(() => state.cleanup());

const OPTIONS = { persistTo: state.dir, vars: { QUEEN_TEST_ROUTES: 'true' }, extraArgs: ['--compat-flag', 'experimental'] };

test('a commit that fails with SQLITE_FULL takes none of the turn\'s earlier commits with it, across a SIGKILL', async (t) => {
  let w = await startWorker(OPTIONS);
  try {
    for (const shape of ['one', 'many', 'spill']) {
      const r = await getJson(`${w.url}/__test/full/turn?object=full-${shape}&shape=${shape}`, { method: 'POST' });
      t.diagnostic(`${shape}: ${r.status} ${JSON.stringify(r.body)}`);
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.match(r.body.second_error ?? 'no error', /SQLITE_FULL/);
    }
    process.kill(workerdUnder(w.pid), 'SIGKILL');
  } finally {
    await w.stop();
  }
  w = await startWorker(OPTIONS);
  try {
    for (const shape of ['one', 'many', 'spill']) {
      const r = await getJson(`${w.url}/__test/full/turn?object=full-${shape}`);
      assert.equal(r.status, 200, JSON.stringify(r.body));
      const keys = r.body.keys.map((k) => k.split(':')[0]);
      assert.ok(keys.includes('full/a'), `${shape}: the commit before the failing one is gone: ${keys}`);
      assert.ok(!keys.includes('full/b'), `${shape}: the failing commit left its value: ${keys}`);
      if (shape === 'spill') assert.equal(keys.filter((k) => k.startsWith('full/spill/')).length, 60);
    }
  } finally {
    await w.stop();
  }
});

test('concurrent pushes into a full database: every push answered queued is there after a SIGKILL', { timeout: 180_000 }, async (t) => {
  let w = await startWorker(OPTIONS);
  const confirmed = new Set();
  const refused = [];
  try {
    const conf = await getJson(`${w.url}/api/v1/configure`, post({ queue: 'full', options: { leaseTime: 30 } }));
    assert.equal(conf.status, 200, JSON.stringify(conf.body));
    // Room for some pushes of 8 KiB payloads, not for all of them.
    const cap = await getJson(`${w.url}/__test/full/cap?object=default&spare=${512 * 1024}`, { method: 'POST' });
    assert.equal(cap.status, 200, JSON.stringify(cap.body));
    const payload = 'x'.repeat(8 * 1024);
    let next = 0;
    const pusher = async () => {
      for (let round = 0; round < 40; round += 1) {
        const items = [0, 1].map(() => {
          next += 1;
          return { queue: 'full', partition: `p${next % 4}`, transactionId: `t${next}`, payload: { n: next, payload } };
        });
        const res = await fetch(`${w.url}/api/v1/push`, { ...post({ items }), signal: AbortSignal.timeout(30_000) });
        const body = await res.json().catch(() => null);
        if (res.status === 201 && Array.isArray(body)) {
          body.forEach((r, i) => { if (r.status === 'queued') confirmed.add(items[i].transactionId); });
        } else {
          refused.push(res.status);
        }
      }
    };
    await Promise.all(Array.from({ length: 8 }, pusher));
    t.diagnostic(`${confirmed.size} pushes confirmed, ${refused.length} refused (${[...new Set(refused)]})`);
    assert.ok(confirmed.size > 0, 'some pushes fit');
    assert.ok(refused.length > 0, 'the cap refused some pushes');
    assert.ok(refused.every((s) => s === 507), `a full database answers 507: ${refused}`);
    process.kill(workerdUnder(w.pid), 'SIGKILL');
  } finally {
    await w.stop();
  }
  w = await startWorker(OPTIONS);
  try {
    const seen = new Set();
    for (;;) {
      const res = await fetch(`${w.url}/api/v1/pop/queue/full?batch=100&wait=false&autoAck=true`);
      if (res.status === 204) break;
      assert.equal(res.status, 200);
      const body = await res.json();
      for (const m of body.messages) seen.add(m.transactionId);
    }
    const lost = [...confirmed].filter((tx) => !seen.has(tx));
    assert.deepEqual(lost, [], 'pushes answered queued are missing');
    const phantoms = [...seen].filter((tx) => !confirmed.has(tx));
    assert.deepEqual(phantoms, [], 'pushes answered 507 are there after all');
    t.diagnostic(`${seen.size} messages after the restart (${confirmed.size} confirmed)`);
  } finally {
    await w.stop();
  }
});

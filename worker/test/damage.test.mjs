// A broker whose Durable Object storage lost a segment in the middle of a partition's run past its index
// pages (storage damage: `/__test/store/delete`) refuses to open, naming the missing key and the stored
// one after it, instead of serving the partition cut short (whose later messages would be lost and their
// offsets taken by the next push): `/health` answers 503, every other route 503 with that `error`.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { startWorker, tempPersistDir, getJson, post } from './harness.mjs';

const state = tempPersistDir();
after(() => state.cleanup());

// Maintenance (which writes the index pages) not before an hour: the segments stay past the pages.
const VARS = { QUEEN_TEST_ROUTES: 'true', SHARDS: '1', MAINTENANCE_INTERVAL_MS: '3600000' };
const segmentKey = (pid, first) => `s/${pid.toString(16).padStart(16, '0')}/${first.toString(16).padStart(16, '0')}`;

test('a segment missing before a stored one stops the open with a 503 naming both keys', async (t) => {
  let w = await startWorker({ persistTo: state.dir, vars: VARS });
  try {
    // One message a push: segment n of the queue's one partition (id 1) starts at offset n, in no page.
    for (let i = 0; i < 3; i++) {
      const res = await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: 'damaged', payload: { i } }] }));
      assert.equal(res.status, 201, JSON.stringify(res.body));
    }
    const del = await getJson(
      `${w.url}/__test/store/delete?object=default&key=${encodeURIComponent(segmentKey(1, 1))}`, { method: 'POST' });
    assert.equal(del.status, 200, JSON.stringify(del.body));
  } finally {
    await w.stop();
  }

  // Ready means /health answers 503 (the open refused the store). A build that missed the damage answers 200
  // and never becomes ready: the harness's ready timeout (four minutes: a loaded machine, or wrangler dev,
  // can take over a minute to start) says so.
  w = await startWorker({ persistTo: state.dir, vars: VARS, readyStatus: 503 });
  try {
    const pop = await getJson(`${w.url}/api/v1/pop/queue/damaged?batch=10&wait=false`);
    t.diagnostic(`pop after the damage: ${pop.status} ${JSON.stringify(pop.body)}`);
    assert.equal(pop.status, 503, JSON.stringify(pop.body));
    for (const part of ['storage is damaged', segmentKey(1, 1), segmentKey(1, 2)]) {
      assert.ok(pop.body.error.includes(part), `${part} in ${pop.body.error}`);
    }
  } finally {
    await w.stop();
  }
});

/** The Durable Object SQLite files under `dir` that hold the broker's tables. */
function brokerDatabases(dir) {
  const files = readdirSync(dir, { recursive: true }).filter((f) => String(f).endsWith('.sqlite'));
  return files.map((f) => join(dir, String(f))).filter((file) => {
    const db = new DatabaseSync(file, { readOnly: true });
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all().map((t) => t.name);
    db.close();
    return tables.includes('queen_kv');
  });
}

// A stored cell of the wrong type (what a damaged or hand-edited file holds) stops the open with a 503 that
// names the table, instead of reading it as something else (an empty value, chunk 0): worker/src/sql_rows.rs
// reads each cell as the type its reader expects, and worker/src/do_store.rs refuses any other.
for (const { what, sql, error, pad = 0 } of [
  { what: 'a segment value stored as text', sql: "UPDATE queen_seg SET value = 'not a blob', blob = NULL",
    error: 'queen_seg row has unexpected column types' },
  { what: 'a chunk number stored as text', sql: "UPDATE queen_kv SET chunk = 'x' || chunk",
    error: 'queen_kv row has unexpected column types' },
  { what: 'a record value stored as a number', sql: 'UPDATE queen_kv SET value = 42',
    error: 'is not a blob' },
  // Long segments (1 KB or more) are `queen_blob` rows: a missing one is named, not read as an empty value.
  { what: 'a long segment whose queen_blob row is missing', sql: 'DELETE FROM queen_blob', pad: 2000,
    error: 'queen_blob row missing' },
]) {
  test(`${what} stops the open with a 503 naming it`, async (t) => {
    const dir = tempPersistDir();
    try {
      let w = await startWorker({ persistTo: dir.dir, vars: VARS });
      try {
        for (let i = 0; i < 3; i++) {
          const res = await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: 'typed', payload: { i, pad: 'x'.repeat(pad) } }] }));
          assert.equal(res.status, 201, JSON.stringify(res.body));
        }
      } finally {
        await w.stop();
      }
      const databases = brokerDatabases(dir.dir);
      assert.ok(databases.length > 0, `no broker database under ${dir.dir}`);
      let changed = 0;
      for (const file of databases) {
        const db = new DatabaseSync(file);
        changed += Number(db.prepare(sql).run().changes);
        db.close();
      }
      assert.ok(changed > 0, `${sql} changed no row`);

      w = await startWorker({ persistTo: dir.dir, vars: VARS, readyStatus: 503 });
      try {
        const pop = await getJson(`${w.url}/api/v1/pop/queue/typed?batch=10&wait=false`);
        t.diagnostic(`pop after the edit: ${pop.status} ${JSON.stringify(pop.body)}`);
        assert.equal(pop.status, 503, JSON.stringify(pop.body));
        assert.ok(pop.body.error.includes(error), `${error} in ${pop.body.error}`);
      } finally {
        await w.stop();
      }
    } finally {
      dir.cleanup();
    }
  });
}

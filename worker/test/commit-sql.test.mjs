// The Durable Object commit's SQL (worker/src/do_store.rs) where a review looked for faults, in real workerd
// through the checks of worker/src/selftest_commit.rs: stale chunks when a value shrinks, rows written against
// SQLite's own count, failed statements inside the implicit transaction (across a SIGKILL of workerd), and
// storage of a newer format left untouched.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startWorker, tempPersistDir, getJson, workerdUnder } from './harness.mjs';

const state = tempPersistDir();
after(() => state.cleanup());

const TEST_VARS = { QUEEN_TEST_ROUTES: 'true' };

test('the commit SQL keeps values whole, counts its rows and refuses newer storage untouched', async (t) => {
  const w = await startWorker({ persistTo: state.dir, vars: TEST_VARS });
  try {
    const shrink = await getJson(`${w.url}/__test/commit/shrink?object=shrink`);
    t.diagnostic(`shrink: ${JSON.stringify(shrink.body)}`);
    assert.equal(shrink.status, 200, JSON.stringify(shrink.body.failures ?? shrink.body));
    assert.equal(shrink.body.steps.length, 12);

    const rows = await getJson(`${w.url}/__test/commit/rows-written?object=rows-written`);
    t.diagnostic(`rows written: ${JSON.stringify(rows.body)}`);
    assert.equal(rows.status, 200, JSON.stringify(rows.body.failures ?? rows.body));
    // The same puts through the previous build's SQL (format 1: every record in `queen_kv`): as many rows, but
    // for a segment that moves between the tables (1 MiB or more, and back), which writes one row more: the
    // delete of its row in the table it leaves.
    const previous = await getJson(`${w.url}/__test/commit/rows-written-previous?object=rows-written-previous`);
    t.diagnostic(`rows written by the previous build's SQL: ${JSON.stringify(previous.body)}`);
    assert.equal(previous.status, 200, JSON.stringify(previous.body));
    const moves = new Set(['grow a segment to three chunks', 'shrink a three-chunk segment to one']);
    assert.equal(previous.body.cases.length, 10);
    for (const { case: name, total_changes: old } of previous.body.cases) {
      const now = rows.body.cases.find((c) => c.case === name).rows_written;
      const want = old + (moves.has(name) ? 1 : 0);
      assert.equal(now, want, `${name}: this build writes ${now} rows, the previous build ${old}`);
    }
    // A push (a new segment, its index entry, the partition record) writes three rows; a segment's delete one.
    const push = rows.body.cases.find((c) => c.case === 'push: a segment, its index entry, the partition');
    assert.equal(push.rows_written, 3, JSON.stringify(push));
    assert.equal(rows.body.cases.find((c) => c.case === 'delete a segment').rows_written, 1);
    // A long segment (format 3) is two rows: its `queen_blob` row and its `queen_seg` row. Written again, the new
    // `queen_blob` row, the `queen_seg` row updated, the old `queen_blob` row deleted; deleted, both rows.
    const long = (name) => rows.body.cases.find((c) => c.case === name).rows_written;
    assert.deepEqual([long('put a long segment'), long('update a long segment'), long('delete a long segment')], [2, 3, 2]);

    // Storage opened by an earlier build of this change (ea7b0ea) holds a trigger of the same name whose body
    // fires for every chunk 0: opening it must put this build's trigger in force. And storage this build opened,
    // then opened and written by ea7b0ea, must read back whole.
    const stale = await getJson(`${w.url}/__test/commit/stale-trigger?object=stale-trigger`);
    t.diagnostic(`stale trigger: ${JSON.stringify(stale.body)}`);
    const earlier = await getJson(`${w.url}/__test/commit/earlier-build?object=earlier-build`);
    t.diagnostic(`earlier build: ${JSON.stringify(earlier.body)}`);
    assert.equal(earlier.status, 200, JSON.stringify(earlier.body));
    assert.equal(stale.status, 200, JSON.stringify(stale.body));

    const newer = await getJson(`${w.url}/__test/commit/newer-format?object=newer-format`);
    t.diagnostic(`newer format: ${JSON.stringify(newer.body)}`);
    assert.equal(newer.body.refused, true, JSON.stringify(newer.body));
    assert.deepEqual(newer.body.schema_after, newer.body.schema_before,
      'opening storage of a newer format must not change its schema');
    assert.equal(newer.status, 200);
  } finally {
    await w.stop();
  }
});

test('failed commits inside one turn take none of its successful commits with them, across a SIGKILL', async (t) => {
  let w = await startWorker({ persistTo: state.dir, vars: TEST_VARS });
  try {
    const write = await getJson(`${w.url}/__test/commit/turn?object=turn`, { method: 'POST' });
    t.diagnostic(`turn: ${JSON.stringify(write.body)}`);
    assert.equal(write.status, 200, JSON.stringify(write.body));
    assert.equal(write.body.commit_errors.length, 2);
    for (const e of write.body.commit_errors) assert.match(e ?? 'no error', /NOT NULL constraint failed/);
    // The answer has left the object: the turn's writes are committed. Kill workerd without warning.
    process.kill(workerdUnder(w.pid), 'SIGKILL');
  } finally {
    await w.stop();
  }
  w = await startWorker({ persistTo: state.dir, vars: TEST_VARS });
  try {
    const check = await getJson(`${w.url}/__test/commit/turn?object=turn`);
    t.diagnostic(`after SIGKILL: ${JSON.stringify(check.body)}`);
    assert.equal(check.status, 200, JSON.stringify(check.body));
    assert.deepEqual(check.body.keys, [`turn/a:${2 * 1024 * 1024 + 1}`, 'turn/c:21']);
  } finally {
    await w.stop();
  }
});

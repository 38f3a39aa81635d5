// The storage conformance suite on DoStore inside workerd (bare workerd via scripts/serve), plus durability
// across a restart of workerd on the same persisted state.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startWorker, tempPersistDir, getJson } from './harness.mjs';

const state = tempPersistDir();
after(() => state.cleanup());

const TEST_VARS = { QUEEN_TEST_ROUTES: 'true' };

test('DoStore passes the storage conformance suite in workerd and keeps data across a restart', async (t) => {
  // First life: run the suite, then write the durability record set.
  let w = await startWorker({ persistTo: state.dir, vars: TEST_VARS });
  try {
    const conf = await getJson(`${w.url}/__test/store/conformance?object=conformance`);
    t.diagnostic(`conformance (1st run): ${JSON.stringify(conf.body)}`);
    assert.equal(conf.status, 200, `conformance failed: ${JSON.stringify(conf.body)}`);
    assert.equal(conf.body.ok, true);
    assert.deepEqual(conf.body.passed, [
      'empty_scan', 'ordered_prefix_scan', 'mixed_commit', 'binary_and_empty_values',
      'large_values', 'many_records', 'delete_missing', 'get_keys', 'segment_shaped_keys', 'first_keys', 'survives_reopen', 'clear',
    ]);
    assert.ok(conf.body.stats.rows_written >= 2000, 'rows written are counted');

    const atomic = await getJson(`${w.url}/__test/store/atomicity?object=atomicity`);
    t.diagnostic(`atomicity: ${JSON.stringify(atomic.body)}`);
    assert.equal(atomic.status, 200, `a failed commit left a trace: ${JSON.stringify(atomic.body)}`);
    // Both failed at their last row (a NULL value breaks queen_kv's NOT NULL): the put-only commit's one
    // upsert statement, and the upsert that follows the delete of the other commit in one transaction.
    assert.equal(atomic.body.commit_errors.length, 2);
    for (const e of atomic.body.commit_errors) assert.match(e ?? '', /NOT NULL constraint failed: queen_kv\.value/);

    // Storage the previous build wrote (format 1) opens as format 2 and reads and writes right.
    const previous = await getJson(`${w.url}/__test/store/previous-build?object=previous-build`);
    t.diagnostic(`previous build: ${JSON.stringify(previous.body)}`);
    assert.equal(previous.status, 200, JSON.stringify(previous.body));
    assert.equal(previous.body.checked.length, 3);

    // Storage format 2 wrote (segments in `queen_seg`, values inline) opens as this build's format; long
    // segments written since go to `queen_blob` and leave no row behind when written again or deleted.
    const format2 = await getJson(`${w.url}/__test/store/format2?object=format2`);
    t.diagnostic(`format 2: ${JSON.stringify(format2.body)}`);
    assert.equal(format2.status, 200, JSON.stringify(format2.body));
    assert.equal(format2.body.checked.length, 3);

    // An upgrade whose last statement fails leaves format 1 storage as it was (one transaction).
    const failed = await getJson(`${w.url}/__test/store/upgrade-fails?object=upgrade-fails`);
    t.diagnostic(`failed upgrade: ${JSON.stringify(failed.body)}`);
    assert.equal(failed.status, 200, JSON.stringify(failed.body));
    assert.equal(failed.body.ok, true, JSON.stringify(failed.body));
    assert.match(failed.body.refused, /CHECK constraint failed/);

    const write = await getJson(`${w.url}/__test/store/durability?object=durability`, { method: 'POST' });
    assert.equal(write.status, 200, JSON.stringify(write.body));
    assert.equal(write.body.ok, true);
    // 1 small + 3 chunks of the 2 MiB+ value + 1 empty value.
    assert.equal(write.body.rows_written, 5, `rows written: ${JSON.stringify(write.body)}`);
  } finally {
    await w.stop();
  }

  // Second life on the same --persist-to folder: the committed records are still there, byte for byte.
  w = await startWorker({ persistTo: state.dir, vars: TEST_VARS });
  try {
    const check = await getJson(`${w.url}/__test/store/durability?object=durability`);
    t.diagnostic(`durability after restart: ${JSON.stringify(check.body)}`);
    assert.equal(check.status, 200, JSON.stringify(check.body));
    assert.equal(check.body.ok, true);
    assert.deepEqual(check.body.keys, ['durable/a', 'durable/big', 'durable/empty']);

    const conf = await getJson(`${w.url}/__test/store/conformance?object=conformance`);
    assert.equal(conf.status, 200, `conformance (2nd run) failed: ${JSON.stringify(conf.body)}`);
    assert.equal(conf.body.passed.length, 12);
  } finally {
    await w.stop();
  }
});

test('without QUEEN_TEST_ROUTES the test routes do not exist; health, CORS, API and assets answer', async () => {
  const fresh = tempPersistDir();
  const w = await startWorker({ persistTo: fresh.dir });
  try {
    const t404 = await getJson(`${w.url}/__test/store/conformance`);
    assert.equal(t404.status, 404);

    const health = await getJson(`${w.url}/health`);
    assert.equal(health.status, 200);
    assert.equal(health.body.status, 'healthy');
    assert.equal(health.body.database, 'connected');

    const pre = await fetch(`${w.url}/api/v1/push`, { method: 'OPTIONS' });
    assert.equal(pre.status, 204);
    assert.equal(pre.headers.get('access-control-allow-origin'), '*');
    assert.match(pre.headers.get('access-control-allow-headers') ?? '', /X-Queen-Broker/);
    // Answered by the entry Worker even for a broker name that would be refused (no DO is woken).
    const preOther = await fetch(`${w.url}/api/v1/push?broker=${'x'.repeat(80)}`, { method: 'OPTIONS' });
    assert.equal(preOther.status, 204);

    const api = await getJson(`${w.url}/api/v1/resources/queues`);
    assert.equal(api.status, 200, JSON.stringify(api.body));
    assert.equal(api.headers.get('access-control-allow-origin'), '*');
    assert.match(api.headers.get('content-type') ?? '', /application\/json/);

    const page = await fetch(`${w.url}/`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type') ?? '', /text\/html/);
    await page.text();
  } finally {
    await w.stop();
    fresh.cleanup();
  }
});

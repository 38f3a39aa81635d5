// An idle, empty broker lets its maintenance alarm lapse (issue 15.7): an object that was only probed,
// or whose queues were all deleted, must not wake every interval forever. A queue arms it again.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startWorker, tempPersistDir, getJson } from './harness.mjs';

const state = tempPersistDir();
let w;
after(async () => {
  if (w) await w.stop();
  state.cleanup();
});

const alarm = async () => (await getJson(`${w.url}/__test/alarm?object=default`)).body.scheduled;
const settle = () => new Promise((r) => setTimeout(r, 1200));

test('an empty broker schedules no alarm; a queue arms it; deleting the last queue lets it lapse', async () => {
  w = await startWorker({
    persistTo: state.dir,
    vars: { QUEEN_TEST_ROUTES: 'true', MAINTENANCE_INTERVAL_MS: '300' },
  });
  assert.equal((await getJson(`${w.url}/api/v1/resources/queues`)).status, 200, 'the object is open');
  assert.equal(await alarm(), false, 'an empty broker needs no maintenance');

  const push = await getJson(`${w.url}/api/v1/push`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ items: [{ queue: 'q', payload: 1 }] }),
  });
  assert.equal(push.status, 201);
  assert.equal(await alarm(), true, 'a queue arms the alarm');
  await settle();
  assert.equal(await alarm(), true, 'it keeps running while there are queues');

  assert.ok((await getJson(`${w.url}/api/v1/resources/queues/q`, { method: 'DELETE' })).status < 300);
  await settle();
  assert.equal(await alarm(), false, 'with no queue left, the next alarm does not schedule another');
});

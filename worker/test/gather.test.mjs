// Gathering on Durable Objects (src/engine/group.rs, "Gathering"): concurrent requests share one commit of the
// object, each answered only after the commit that holds its changes, so every answered push survives a SIGKILL
// of workerd that follows its answer.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startWorker, tempPersistDir, getJson, post, workerdUnder } from './harness.mjs';

const state = tempPersistDir();
after(() => state.cleanup());

const ROUNDS = 4;
const CONCURRENT = 16;

const commits = async (url) => (await getJson(`${url}/api/v1/status`)).body.storage.commits;

test('concurrent requests share Durable Object commits, and every answered push survives a SIGKILL', async (t) => {
  let w = await startWorker({ persistTo: state.dir });
  const sent = [];
  try {
    // Opens the object and its queue.
    assert.equal((await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: 'gather', payload: { n: -1 } }] }))).status, 201);
    const before = await commits(w.url);
    for (let round = 0; round < ROUNDS; round++) {
      const batch = Array.from({ length: CONCURRENT }, (_, k) => round * CONCURRENT + k);
      const answers = await Promise.all(batch.map((n) =>
        getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: 'gather', partition: `p${n % 4}`, payload: { n } }] }))));
      for (const [k, a] of answers.entries()) assert.equal(a.status, 201, `push ${batch[k]}: ${JSON.stringify(a.body)}`);
      sent.push(...batch);
    }
    const made = (await commits(w.url)) - before;
    t.diagnostic(`${sent.length} concurrent pushes in ${made} commits`);
    assert.ok(made < sent.length, `${sent.length} concurrent pushes made ${made} commits: none shared`);
    // Every push above was answered: its commit is done. Kill workerd without warning.
    process.kill(workerdUnder(w.pid), 'SIGKILL');
  } finally {
    await w.stop();
  }
  w = await startWorker({ persistTo: state.dir });
  try {
    const found = [];
    for (;;) {
      const pop = await getJson(`${w.url}/api/v1/pop/queue/gather?batch=1000&wait=false&consumerGroup=check&subscriptionMode=all`);
      if (pop.status === 204) break;
      assert.equal(pop.status, 200, JSON.stringify(pop.body));
      found.push(...pop.body.messages.map((m) => m.data.n));
    }
    assert.deepEqual(found.filter((n) => n >= 0).sort((a, b) => a - b), sent);
  } finally {
    await w.stop();
  }
});

// Gathering on Durable Objects (src/engine/group.rs, "Gathering"), under COMMIT_SHARING (worker/src/config.rs):
// with "on", concurrent requests share one commit of the object, each answered only after the commit that holds
// its changes, so every answered push survives a SIGKILL of workerd that follows its answer; with "off" every
// request commits alone; with "auto" each object probes both (worker/src/auto_sharing.rs: its second and third
// epochs share) and keeps the faster; any other value stops the broker with a 503 naming the variable.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startWorker, tempPersistDir, getJson, post, workerdUnder } from './harness.mjs';

const state = tempPersistDir();
after(() => state.cleanup());

const ROUNDS = 4;
const CONCURRENT = 16;

const commits = async (url) => (await getJson(`${url}/api/v1/status`)).body.storage.commits;

/**
 * Pushes `rounds` rounds of CONCURRENT concurrent one-message pushes numbered from `first`; returns the numbers
 * sent and the commits made.
 */
async function pushConcurrently(url, rounds, first = 0) {
  // Opens the object and its queue.
  assert.equal((await getJson(`${url}/api/v1/push`, post({ items: [{ queue: 'gather', payload: { n: -1 } }] }))).status, 201);
  const before = await commits(url);
  const sent = [];
  for (let round = 0; round < rounds; round++) {
    const batch = Array.from({ length: CONCURRENT }, (_, k) => first + round * CONCURRENT + k);
    const answers = await Promise.all(batch.map((n) =>
      getJson(`${url}/api/v1/push`, post({ items: [{ queue: 'gather', partition: `p${n % 4}`, payload: { n } }] }))));
    for (const [k, a] of answers.entries()) assert.equal(a.status, 201, `push ${batch[k]}: ${JSON.stringify(a.body)}`);
    sent.push(...batch);
  }
  return { sent, made: (await commits(url)) - before };
}

/** Pops every message of the queue `gather` (consumer group `check`); returns their numbers, sorted. */
async function allPushed(url) {
  const found = [];
  for (;;) {
    const pop = await getJson(`${url}/api/v1/pop/queue/gather?batch=1000&wait=false&consumerGroup=check&subscriptionMode=all`);
    if (pop.status === 204) break;
    assert.equal(pop.status, 200, JSON.stringify(pop.body));
    found.push(...pop.body.messages.map((m) => m.data.n));
  }
  return found.filter((n) => n >= 0).sort((a, b) => a - b);
}

test('with COMMIT_SHARING on, concurrent requests share Durable Object commits, and every answered push survives a SIGKILL', async (t) => {
  let w = await startWorker({ persistTo: state.dir, vars: { COMMIT_SHARING: 'on' } });
  let sent;
  try {
    const pushed = await pushConcurrently(w.url, ROUNDS);
    sent = pushed.sent;
    t.diagnostic(`${sent.length} concurrent pushes in ${pushed.made} commits`);
    assert.ok(pushed.made < sent.length, `${sent.length} concurrent pushes made ${pushed.made} commits: none shared`);
    // Every push above was answered: its commit is done. Kill workerd without warning.
    process.kill(workerdUnder(w.pid), 'SIGKILL');
  } finally {
    await w.stop();
  }
  w = await startWorker({ persistTo: state.dir, vars: { COMMIT_SHARING: 'on' } });
  try {
    assert.deepEqual(await allPushed(w.url), sent);
  } finally {
    await w.stop();
  }
});

test('with COMMIT_SHARING auto, the probe shares commits, and every answered push survives a SIGKILL', async (t) => {
  const fresh = tempPersistDir();
  let w = await startWorker({ persistTo: fresh.dir, vars: { COMMIT_SHARING: 'auto' } });
  const sent = [];
  try {
    // The probe's first epoch commits alone, its second and third share (worker/src/auto_sharing.rs): push
    // until a round shares, which it must within a few epochs' answers.
    const MAX_ROUNDS = 60;
    let shared = false;
    let rounds = 0;
    while (!shared && rounds < MAX_ROUNDS) {
      const pushed = await pushConcurrently(w.url, 1, rounds * CONCURRENT);
      sent.push(...pushed.sent);
      shared = pushed.made < pushed.sent.length;
      rounds++;
    }
    t.diagnostic(`rounds of ${CONCURRENT} concurrent pushes until one shared commits: ${rounds}`);
    assert.ok(shared, `${rounds} rounds of ${CONCURRENT} concurrent pushes, none shared a commit`);
    process.kill(workerdUnder(w.pid), 'SIGKILL');
  } finally {
    await w.stop();
  }
  w = await startWorker({ persistTo: fresh.dir, vars: { COMMIT_SHARING: 'auto' } });
  try {
    assert.deepEqual(await allPushed(w.url), sent);
  } finally {
    await w.stop();
    fresh.cleanup();
  }
});

test('with COMMIT_SHARING off, every request commits alone', async (t) => {
  const fresh = tempPersistDir();
  const w = await startWorker({ persistTo: fresh.dir, vars: { COMMIT_SHARING: 'off' } });
  try {
    const { sent, made } = await pushConcurrently(w.url, 2);
    t.diagnostic(`${sent.length} concurrent pushes in ${made} commits`);
    assert.equal(made, sent.length, `${sent.length} concurrent pushes made ${made} commits: some were shared`);
  } finally {
    await w.stop();
    fresh.cleanup();
  }
});

test('a COMMIT_SHARING other than off, on or auto stops the broker with a 503 that says why', async () => {
  const fresh = tempPersistDir();
  const w = await startWorker({ persistTo: fresh.dir, vars: { COMMIT_SHARING: 'yes' }, readyStatus: 503 });
  try {
    const push = await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue: 'q', payload: 1 }] }));
    assert.equal(push.status, 503);
    assert.match(push.body.error, /COMMIT_SHARING is "yes"; it takes "off", "on" or "auto"/);
  } finally {
    await w.stop();
    fresh.cleanup();
  }
});

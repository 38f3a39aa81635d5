// Transactions across shards (SHARDS=4) in real workerd: two-phase commit (docs/protocol.md §3.9.1).
// - a transaction whose acks and pushes live on three shards commits on all of them, results in request order;
// - one with a bad part (an ack whose lease is gone) applies nothing, and releases the lease it pinned;
// - killed between prepare and commit (a test-only fault point stops the coordinator there, then workerd is
//   SIGKILLed and restarted on the same state), it ends all or nothing: aborted, its ack's lease pinned
//   until then and released after, its push never visible;
// - killed after the decision, it ends committed on every shard.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startWorker, tempPersistDir, getJson, post, sleep, workerdUnder, isRunning } from './harness.mjs';
import { placementFor } from './placement.mjs';

const SHARDS = 4;
const TIMEOUT_MS = 800;
// The lease of a message a test waits to see expire (or not): short, since the test sleeps past it (counted
// from the pop); only the one transaction request right after the pop has to run within it.
const LEASE_S = 2;
// The lease of a message whose expiry a test never waits for: nothing the test does races it.
const LONG_LEASE_S = 15;

const { onDistinctShards } = placementFor(SHARDS);

const vars = (extra = {}) => ({ SHARDS: String(SHARDS), TXN_TIMEOUT_MS: String(TIMEOUT_MS), ...extra });

/** Pushes one message to `queue` (lease `leaseS` seconds) and pops it: the leased message. */
async function leased(w, queue, payload, leaseS = LEASE_S) {
  const cfg = await getJson(`${w.url}/api/v1/configure`, post({ queue, options: { leaseTime: leaseS } }));
  assert.equal(cfg.status, 200, JSON.stringify(cfg.body));
  const push = await getJson(`${w.url}/api/v1/push`, post({ items: [{ queue, payload }] }));
  assert.equal(push.status, 201, JSON.stringify(push.body));
  const pop = await getJson(`${w.url}/api/v1/pop/queue/${queue}?wait=false`);
  assert.equal(pop.status, 200, JSON.stringify(pop.body));
  return pop.body.messages[0];
}

const ackOp = (m) => ({ type: 'ack', transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'completed' });
const ackNow = (w, m) => getJson(`${w.url}/api/v1/ack`, post({
  transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'completed',
}));
const popData = async (w, queue) => {
  const r = await getJson(`${w.url}/api/v1/pop/queue/${queue}?wait=false&batch=10`);
  return r.status === 204 ? [] : r.body.messages.map((x) => x.data);
};

/** Sleeps until `LEASE_S` (plus 300 ms) after `poppedAt`, taken once the pop answered: past that lease's expiry. */
const sleepPastLease = (poppedAt) => sleep(Math.max(0, poppedAt + LEASE_S * 1000 + 300 - Date.now()));

/** Polls `check` (an async predicate) every 200 ms for up to `ms`; true when it held. */
async function eventually(check, ms = 30_000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await sleep(200);
  }
  return false;
}

/**
 * SIGKILLs workerd and waits until it is gone. workerd runs in a session of its own under scripts/serve's guard
 * (scripts/guard.sh), so a signal to scripts/serve's process group does not reach it: the guard would end it
 * with SIGTERM after scripts/serve had exited, and the next worker could open the same state before it ended.
 * `stop()` returns once the guard has reaped it.
 */
async function kill(w) {
  let workerd;
  try {
    workerd = workerdUnder(w.pid);
    process.kill(workerd, 'SIGKILL');
  } finally {
    await w.stop();
  }
  assert.ok(!isRunning(workerd), `workerd ${workerd} still runs after the kill`);
}

test('a transaction over three shards commits on all of them, results in request order', async () => {
  const state = tempPersistDir();
  const w = await startWorker({ persistTo: state.dir, vars: vars() });
  try {
    const [a, b, c] = onDistinctShards('tp-ok-', 3);
    const m = await leased(w, a, 'in');
    const poppedAt = Date.now();
    const tx = await getJson(`${w.url}/api/v1/transaction`, post({
      operations: [
        ackOp(m),
        { type: 'push', items: [{ queue: b, payload: 'b1' }, { queue: c, payload: 'c1' }, { queue: b, payload: 'b2' }] },
      ],
      requiredLeases: [m.leaseId],
    }));
    assert.equal(tx.status, 200, JSON.stringify(tx.body));
    assert.equal(tx.body.success, true, JSON.stringify(tx.body));
    assert.deepEqual(tx.body.results.map((r) => [r.index, r.type, r.queueName ?? null]),
      [[0, 'ack', null], [1, 'push', b], [2, 'push', c], [3, 'push', b]]);
    assert.equal(tx.body.results[0].success, true);
    assert.deepEqual(await popData(w, b), ['b1', 'b2']);
    assert.deepEqual(await popData(w, c), ['c1']);
    // The ack applied: its lease is released, and the message does not come back after the lease time.
    assert.equal((await ackNow(w, m)).body[0].success, false);
    await sleepPastLease(poppedAt);
    assert.deepEqual(await popData(w, a), []);
  } finally {
    await w.stop();
    state.cleanup();
  }
});

test('a transaction with a bad part applies nothing and releases the lease it pinned', async () => {
  const state = tempPersistDir();
  const w = await startWorker({ persistTo: state.dir, vars: vars() });
  try {
    const [a, b, c] = onDistinctShards('tp-bad-', 3);
    const good = await leased(w, a, 'good', LONG_LEASE_S);
    const gone = await leased(w, c, 'gone', LONG_LEASE_S);
    assert.equal((await ackNow(w, gone)).body[0].success, true, 'its lease is gone once acked');
    const tx = await getJson(`${w.url}/api/v1/transaction`, post({
      operations: [ackOp(good), { type: 'push', items: [{ queue: b, payload: 'never' }] }, ackOp(gone)],
    }));
    assert.equal(tx.status, 200, JSON.stringify(tx.body));
    assert.equal(tx.body.success, false, JSON.stringify(tx.body));
    assert.match(tx.body.error, /Invalid or expired lease/);
    assert.deepEqual(await popData(w, b), [], 'the push did not land');
    // The good ack did not happen, and its lease is not left pinned: acking with it now works.
    assert.equal((await ackNow(w, good)).body[0].success, true);
  } finally {
    await w.stop();
    state.cleanup();
  }
});

test('killed between prepare and commit: aborted after restart, nothing applied, the pinned lease released', { timeout: 120_000 }, async () => {
  const state = tempPersistDir();
  const [a, b] = onDistinctShards('tp-kill-p-', 2);
  let w = await startWorker({
    persistTo: state.dir,
    // A long timeout before the kill (nothing recovers while the test looks at the prepared state), the
    // short one after the restart.
    vars: vars({ QUEEN_TEST_ROUTES: 'true', QUEEN_TEST_TXN_FAULT: 'after-prepare', TXN_TIMEOUT_MS: '60000' }),
  });
  let m;
  try {
    m = await leased(w, a, 'in');
    const poppedAt = Date.now();
    const tx = await getJson(`${w.url}/api/v1/transaction`, post({
      operations: [ackOp(m), { type: 'push', items: [{ queue: b, payload: 'out' }] }],
    }));
    assert.equal(tx.status, 500, JSON.stringify(tx.body));
    assert.match(tx.body.error, /stopped after the prepares/);
    // Prepared: the ack's lease is pinned (it outlives its lease time), the push is not visible.
    await sleepPastLease(poppedAt);
    assert.deepEqual(await popData(w, a), [], 'a pinned lease does not expire');
    assert.match((await ackNow(w, m)).body[0].error ?? '', /held by a prepared transaction/, 'nobody else acts on a pinned lease');
    assert.deepEqual(await popData(w, b), []);
  } finally {
    await kill(w);
  }
  w = await startWorker({ persistTo: state.dir, vars: vars() });
  try {
    // Presumed abort: the message comes back (its lease released and expired), the push never lands.
    let back = [];
    assert.ok(await eventually(async () => (back = await popData(w, a)).length > 0), 'the acked message never came back');
    assert.deepEqual(back, ['in']);
    assert.deepEqual(await popData(w, b), [], 'the aborted push landed');
  } finally {
    await w.stop();
    state.cleanup();
  }
});

test('killed after the decision: committed on every shard after restart', { timeout: 120_000 }, async () => {
  const state = tempPersistDir();
  const [a, b] = onDistinctShards('tp-kill-d-', 2);
  let w = await startWorker({
    persistTo: state.dir,
    vars: vars({ QUEEN_TEST_ROUTES: 'true', QUEEN_TEST_TXN_FAULT: 'after-decision', TXN_TIMEOUT_MS: '60000' }),
  });
  let m;
  let poppedAt;
  try {
    m = await leased(w, a, 'in');
    poppedAt = Date.now();
    const tx = await getJson(`${w.url}/api/v1/transaction`, post({
      operations: [ackOp(m), { type: 'push', items: [{ queue: b, payload: 'out' }] }],
    }));
    assert.equal(tx.status, 500, JSON.stringify(tx.body));
    assert.match(tx.body.error, /stopped after the decision/);
  } finally {
    await kill(w);
  }
  w = await startWorker({ persistTo: state.dir, vars: vars() });
  try {
    let out = [];
    assert.ok(await eventually(async () => (out = await popData(w, b)).length > 0), 'the committed push never landed');
    assert.deepEqual(out, ['out']);
    // The ack committed too: the lease is released and the message is never delivered again.
    // (While prepared, an ack with the lease is refused as pinned; once committed, the lease is gone.)
    assert.ok(await eventually(async () => /Invalid or expired lease/.test((await ackNow(w, m)).body[0].error ?? '')),
      'the ack was not applied');
    // Had the commit released the lease without applying the ack, the message would be back once its lease
    // time (counted from the pop) has passed.
    await sleepPastLease(poppedAt);
    assert.deepEqual(await popData(w, a), [], 'the acked message came back');
  } finally {
    await w.stop();
    state.cleanup();
  }
});


// The Queen API end to end through the Worker and the Broker Durable Object in real workerd: push, pop, ack,
// bearer-token auth, and messages surviving a restart of workerd on the same state.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startWorker, tempPersistDir, getJson } from './harness.mjs';

const state = tempPersistDir();
after(() => state.cleanup());

const json = (body) => ({
  method: 'POST',
  headers: { 'Content-Type': 'application/json' },
  body: JSON.stringify(body),
});

test('push, restart, pop, ack through the Durable Object', async () => {
  let w = await startWorker({ persistTo: state.dir });
  try {
    const push = await getJson(`${w.url}/api/v1/push`, json({
      items: [
        { queue: 'e2e', payload: { n: 1 }, transactionId: 'tx-1' },
        { queue: 'e2e', payload: { n: 2 }, transactionId: 'tx-2' },
      ],
    }));
    assert.ok(push.status === 200 || push.status === 201, `push: ${push.status} ${JSON.stringify(push.body)}`);
  } finally {
    await w.stop();
  }

  w = await startWorker({ persistTo: state.dir });
  try {
    const pop = await getJson(`${w.url}/api/v1/pop/queue/e2e?batch=10&wait=false`);
    assert.equal(pop.status, 200, `pop: ${JSON.stringify(pop.body)}`);
    const messages = pop.body.messages;
    assert.deepEqual(messages.map((m) => m.data), [{ n: 1 }, { n: 2 }]);

    const ack = await getJson(`${w.url}/api/v1/ack/batch`, json({
      acknowledgments: messages.map((m) => ({
        transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'completed',
      })),
    }));
    assert.equal(ack.status, 200, `ack: ${JSON.stringify(ack.body)}`);
    assert.ok(ack.body.every((r) => r.success), JSON.stringify(ack.body));

    const empty = await fetch(`${w.url}/api/v1/pop/queue/e2e?batch=10&wait=false`);
    assert.equal(empty.status, 204);
  } finally {
    await w.stop();
  }
});

test('API_TOKEN protects the API but not /health', async () => {
  const fresh = tempPersistDir();
  // Deployed, API_TOKEN is a secret; a plain var reaches the Worker the same way (env.API_TOKEN).
  const w = await startWorker({ persistTo: fresh.dir, vars: { API_TOKEN: 's3cret-test-token' } });
  try {
    const anon = await getJson(`${w.url}/api/v1/resources/queues`);
    assert.equal(anon.status, 401);
    assert.equal(anon.body.error, 'Authentication required');

    const wrong = await getJson(`${w.url}/api/v1/resources/queues`, { headers: { Authorization: 'Bearer nope' } });
    assert.equal(wrong.status, 401);

    const ok = await getJson(`${w.url}/api/v1/resources/queues`, {
      headers: { Authorization: 'Bearer s3cret-test-token' },
    });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));

    const health = await getJson(`${w.url}/health`);
    assert.equal(health.status, 200);
  } finally {
    await w.stop();
    fresh.cleanup();
  }
});

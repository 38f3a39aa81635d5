// The consumer-group, depth and status views through the Worker and the Broker Durable Object in real
// workerd, and /metrics/prometheus behind the read-only token when auth is on (docs/decisions.md,
// "Consumer-group, depth and status views").
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startWorker, tempPersistDir, getJson } from './harness.mjs';

const state = tempPersistDir();
after(() => state.cleanup());

const READ = 'views-read-token';
const ADMIN = 'views-admin-token';
const auth = (token, init = {}) => ({ ...init, headers: { ...(init.headers || {}), Authorization: `Bearer ${token}` } });
const post = (token, body) => auth(token, {
  method: 'POST',
  headers: { 'Content-Type': 'application/json' },
  body: JSON.stringify(body),
});

test('consumer groups, depth, status views and prometheus auth over real HTTP', async () => {
  const w = await startWorker({ persistTo: state.dir, vars: { API_TOKEN: ADMIN, API_TOKEN_READ_ONLY: READ } });
  try {
    const push = await getJson(`${w.url}/api/v1/push`, post(ADMIN, {
      items: [
        { queue: 'views', partition: 'a', payload: 1, transactionId: 't1' },
        { queue: 'views', partition: 'a', payload: 2, transactionId: 't2' },
        { queue: 'views', partition: 'b', payload: 3, transactionId: 't3' },
      ],
    }));
    assert.equal(push.status, 201, JSON.stringify(push.body));

    const pop = await getJson(
      `${w.url}/api/v1/pop/queue/views/partition/a?consumerGroup=g&subscriptionMode=all&batch=1&wait=false`,
      auth(ADMIN));
    assert.equal(pop.status, 200, JSON.stringify(pop.body));
    const m = pop.body.messages[0];
    const ack = await getJson(`${w.url}/api/v1/ack`, post(ADMIN, {
      transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId,
      status: 'completed', consumerGroup: 'g',
    }));
    assert.equal(ack.body[0].success, true, JSON.stringify(ack.body));

    const groups = await getJson(`${w.url}/api/v1/consumer-groups`, auth(READ));
    assert.equal(groups.status, 200, JSON.stringify(groups.body));
    const g = groups.body.find((x) => x.name === 'g');
    assert.ok(g, JSON.stringify(groups.body));
    assert.equal(g.queueName, 'views');
    assert.equal(g.members, 2);
    assert.equal(g.partitionsWithLag, 2);
    assert.equal(g.totalLag, 2, 'a has one message after the cursor, b one');
    assert.equal(g.state, 'Stable');
    assert.equal(g.subscriptionMode, 'all');

    const detail = await getJson(`${w.url}/api/v1/consumer-groups/g`, auth(READ));
    assert.deepEqual(detail.body.views.partitions.map((p) => [p.partition, p.offsetLag, p.committedOffset]),
      [['a', 1, 0], ['b', 1, -1]]);

    const lagging = await getJson(`${w.url}/api/v1/consumer-groups/lagging?minLagSeconds=3600`, auth(READ));
    assert.deepEqual([lagging.status, lagging.body], [200, []]);

    const depth = await getJson(`${w.url}/api/v1/resources/queues/views/depth?group=g`, auth(READ));
    assert.deepEqual(depth.body, {
      queue: 'views', group: 'g', pending: 2, partitionsPending: 2, conflation: false, effectivePending: 2,
      partitions: [{ partition: 'a', pending: 1 }, { partition: 'b', pending: 1 }],
    });

    const parts = await getJson(`${w.url}/api/v1/resources/partitions?queue=views`, auth(READ));
    assert.deepEqual(parts.body.partitions.map((p) => [p.name, p.messages.total]), [['a', 2], ['b', 1]]);

    const sq = await getJson(`${w.url}/api/v1/status/queues`, auth(READ));
    assert.equal(sq.body.queues[0].name, 'views');
    assert.equal(sq.body.queues[0].messages.total, 3);
    const detailQ = await getJson(`${w.url}/api/v1/status/queues/views`, auth(READ));
    assert.equal(detailQ.body.totals.messages.total, 3);
    const msgs = await getJson(`${w.url}/api/v1/status/queues/views/messages`, auth(READ));
    assert.deepEqual(msgs.body.map((x) => x.transactionId).sort(), ['t1', 't2', 't3']);
    const analytics = await getJson(`${w.url}/api/v1/status/analytics`, auth(READ));
    assert.equal(analytics.body.dataPoints.reduce((n, p) => n + p.messages, 0), 3);
    const buffers = await getJson(`${w.url}/api/v1/status/buffers`, auth(READ));
    assert.equal(buffers.body.dbHealthy, true);

    // Prometheus names queues: a token is needed when auth is on; /metrics and /health stay public.
    const open = await fetch(`${w.url}/metrics/prometheus`);
    assert.equal(open.status, 401, await open.text());
    const scraped = await fetch(`${w.url}/metrics/prometheus`, auth(READ));
    assert.equal(scraped.status, 200);
    // With SHARDS > 1 every series carries a `shard` label: the pushes are summed over the shards.
    const pushed = [...(await scraped.text()).matchAll(
      /^queen_cluster_push_messages_total\{(?:shard="\d+",)?scope="cluster"\} (\d+)$/gm)];
    assert.ok(pushed.length >= 1, 'the push counter is exported');
    assert.equal(pushed.reduce((n, m) => n + Number(m[1]), 0), 3);
    assert.equal((await fetch(`${w.url}/metrics`)).status, 200);
    assert.equal((await getJson(`${w.url}/api/v1/consumer-groups`)).status, 401);
  } finally {
    await w.stop();
  }
});

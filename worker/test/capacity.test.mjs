// Capacity in real workerd (issue 12): a Durable Object holds a backlog well past its 128 MB of memory,
// survives SIGKILL and opens again from its index to serve a pop; and the storage quota refuses pushes
// with 507 while pops and queue deletion go on.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { startWorker, tempPersistDir, getJson, workerdUnder } from './harness.mjs';

const states = [];
const workers = [];
after(async () => {
  // A failed assertion must not leave a workerd running (node would wait for it).
  for (const w of workers) await w.stop();
  states.forEach((s) => s.cleanup());
});

/** POSTs `count` copies of `chunk` with chunked encoding (no Content-Length); resolves to {status, body}. */
function chunkedPost(url, chunk, count, authorization) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: authorization },
    });
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode, body: JSON.parse(text) }));
    });
    // Writing the rest may fail once the server has answered and closed: the answer is what counts.
    req.on('error', (e) => setTimeout(() => reject(e), 2000));
    let sent = 0;
    const more = () => {
      while (sent < count) {
        sent += 1;
        if (!req.write(chunk)) return req.once('drain', more);
      }
      req.end();
    };
    more();
  });
}

async function start(options) {
  const w = await startWorker(options);
  workers.push(w);
  return w;
}

const post = (url, body) => getJson(url, {
  method: 'POST',
  headers: { 'Content-Type': 'application/json' },
  body: JSON.stringify(body),
});

/** Items of `size`-byte random payloads (base64 of random bytes: deflate cannot shrink them much). */
function items(queue, n, size, base) {
  return Array.from({ length: n }, (_, i) => ({
    queue,
    partition: `p${(base + i) % 4}`,
    transactionId: `tx-${base + i}`,
    payload: { seq: base + i, blob: randomBytes(Math.ceil(size * 0.75)).toString('base64') },
  }));
}

test('a backlog well past 128 MB survives SIGKILL and the reopened broker serves a pop', async () => {
  const state = tempPersistDir();
  states.push(state);
  let w = await start({ persistTo: state.dir });
  const PAYLOAD = 64 * 1024;
  const PER_PUSH = 32; // 2 MiB a request
  const TARGET = 200 * 1024 * 1024; // payload; base64 of random bytes deflates to about 3/4
  let pushed = 0;
  const t0 = Date.now();
  // Four pushers in parallel until the broker stores the target.
  const pusher = async () => {
    while (pushed * PAYLOAD < TARGET) {
      const base = pushed;
      pushed += PER_PUSH;
      const res = await post(`${w.url}/api/v1/push`, { items: items('big', PER_PUSH, PAYLOAD, base) });
      assert.equal(res.status, 201, JSON.stringify(res.body).slice(0, 300));
    }
  };
  await Promise.all([pusher(), pusher(), pusher(), pusher()]);
  const status = await getJson(`${w.url}/api/v1/status`);
  const stored = status.body.storage.storedBytes;
  console.log(`# pushed ${pushed} messages (${(pushed * PAYLOAD / 1e6).toFixed(0)} MB of payload) in ${Date.now() - t0} ms; `
    + `stored ${(stored / 1e6).toFixed(0)} MB; cache ${JSON.stringify(status.body.storage.cache)}`);
  assert.ok(stored > 128 * 1024 * 1024, `stored ${stored} bytes, not past 128 MB`);
  assert.ok(status.body.storage.cache.bytes <= status.body.storage.cache.budgetBytes + 4 * 1024 * 1024,
    'the segment cache stays near its budget');

  // SIGKILL workerd itself (scripts/serve runs it under a guard in a session of its own, and a killed
  // scripts/serve has the guard stop it cleanly), then open again on the same state.
  process.kill(workerdUnder(w.pid), 'SIGKILL');
  await w.stop();
  await new Promise((r) => setTimeout(r, 500));
  const t1 = Date.now();
  w = await start({ persistTo: state.dir });
  const popped = await getJson(`${w.url}/api/v1/pop/queue/big/partition/p0?batch=3&consumerGroup=late&subscriptionMode=all`);
  console.log(`# reopened and popped in ${Date.now() - t1} ms (process start included)`);
  assert.equal(popped.status, 200, JSON.stringify(popped.body).slice(0, 300));
  assert.deepEqual(popped.body.messages.map((m) => m.data.seq), [0, 4, 8]);
  const after = await getJson(`${w.url}/api/v1/status`);
  assert.ok(after.body.storage.cache.bytes < 16 * 1024 * 1024,
    `the reopened broker did not load the backlog: cache ${JSON.stringify(after.body.storage.cache)}`);
  // Dedup survived: an old transaction id is a duplicate.
  const dup = await post(`${w.url}/api/v1/push`, { items: [{ queue: 'big', partition: 'p1', transactionId: 'tx-5', payload: 1 }] });
  assert.equal(dup.body[0].status, 'duplicate');
  await w.stop();
});

test('the quota refuses pushes with 507 and keeps pops, acks and deletion working', async () => {
  const state = tempPersistDir();
  states.push(state);
  const w = await start({ persistTo: state.dir, vars: { MAX_STORED_BYTES: String(256 * 1024) } });
  // Each push puts one message in each of the 4 partitions; how many fit depends on how segments are stored
  // when pushed (JSON text, compressed later by maintenance), so the test counts them.
  let refused = null;
  let accepted = 0;
  for (let i = 0; i < 100 && !refused; i++) {
    const res = await post(`${w.url}/api/v1/push`, { items: items('full', 4, 16 * 1024, i * 4) });
    if (res.status !== 201) refused = res;
    else accepted++;
  }
  assert.ok(accepted >= 1, 'some pushes fit before the quota');
  assert.ok(refused, 'a push past the quota is refused');
  assert.equal(refused.status, 507);
  assert.match(refused.body.error, /full/);
  assert.match(refused.body.error, /MAX_STORED_BYTES/);
  const status = await getJson(`${w.url}/api/v1/status`);
  assert.equal(status.body.storage.maxStoredBytes, 256 * 1024);
  assert.ok(status.body.storage.storedBytes <= 256 * 1024);

  const pop = await getJson(`${w.url}/api/v1/pop/queue/full?batch=4`);
  assert.equal(pop.status, 200);
  assert.equal(pop.body.messages.length, Math.min(accepted, 4), `one partition holds one message per accepted push (${accepted})`);
  const ack = await post(`${w.url}/api/v1/ack/batch`, {
    acknowledgments: pop.body.messages.map((m) => ({
      transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'completed',
    })),
  });
  assert.equal(ack.status, 200, JSON.stringify(ack.body));
  const del = await getJson(`${w.url}/api/v1/resources/queues/full`, { method: 'DELETE' });
  assert.ok(del.status < 300, `delete: ${del.status} ${JSON.stringify(del.body)}`);
  const again = await post(`${w.url}/api/v1/push`, { items: items('full', 1, 1024, 0) });
  assert.equal(again.status, 201, 'after deleting, pushes fit again');
  await w.stop();
});

test('the entry Worker refuses an oversized Content-Length and a missing token before the object', async () => {
  const state = tempPersistDir();
  states.push(state);
  const w = await start({ persistTo: state.dir, vars: { MAX_BODY_BYTES: '1024', API_TOKEN: 'secret' } });
  const anon = await post(`${w.url}/api/v1/push`, { items: [{ queue: 'q', payload: 1 }] });
  assert.equal(anon.status, 401);
  assert.equal(anon.body.error, 'Authentication required');
  const big = await getJson(`${w.url}/api/v1/push`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: 'Bearer secret' },
    body: JSON.stringify({ items: [{ queue: 'q', payload: 'x'.repeat(4096) }] }),
  });
  assert.equal(big.status, 413);
  assert.match(big.body.error, /too large/);
  // No Content-Length (a streamed, chunked body): the object stops reading at the limit. Node's http (not
  // fetch), so the answer is read even if the server closes the connection on the unread rest of the body.
  const streamed = await chunkedPost(`${w.url}/api/v1/push`, 'x'.repeat(512), 64, 'Bearer secret');
  assert.equal(streamed.status, 413, JSON.stringify(streamed.body));
  assert.match(streamed.body.error, /more than 1024 bytes/);
  await w.stop();
});

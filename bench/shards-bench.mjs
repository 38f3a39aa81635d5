// The load generator behind scripts/bench-shards (read that script's header first). For SHARDS = 1, 2 and 4:
// starts queen-edge on bare workerd (scripts/serve through worker/test/harness.mjs, state on tmpfs when there
// is one), pushes 100-message batches to 16 queues from 8 connections for a fixed time (one queue per request,
// then requests whose items span all 16 queues and are split by shard), forwards popped messages in
// transactions to a queue on another shard, pops+acks what is left, and times the fan-out routes. Writes a
// markdown section to --out and prints progress.
//
//   node bench/shards-bench.mjs [--quick] [--out FILE]
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { startWorker, workerdUnder } from '../worker/test/harness.mjs';
import { cpuNs, requester } from './load.mjs';
import { placementFor } from '../worker/test/placement.mjs';

const argv = process.argv.slice(2);
const QUICK = argv.includes('--quick');
const OUT = argv.includes('--out') ? argv[argv.indexOf('--out') + 1] : null;
const SECONDS = Number(process.env.QE_BENCH_SECONDS || (QUICK ? 1.5 : 4));
const SHARD_COUNTS = [1, 2, 4];
const CONNECTIONS = 8;
const QUEUES = 16;
const BATCH = 100;
const PAYLOAD = 64;
const FANOUT_REQUESTS = QUICK ? 20 : 50;
const FANOUT_ROUTES = ['/api/v1/resources/queues', '/api/v1/status', '/api/v1/dlq?limit=100', '/metrics/prometheus'];

const request = requester(CONNECTIONS);

const payload = 'x'.repeat(PAYLOAD - 2);
const queue = (i) => `bench-${i}`;
let seq = 0;

/** Runs `step` from CONNECTIONS loops for `seconds`; returns {messages, seconds, cpuUs}. */
async function timed(pid, seconds, step) {
  const cpu0 = cpuNs(pid);
  const t0 = performance.now();
  const until = t0 + seconds * 1000;
  let messages = 0;
  await Promise.all(Array.from({ length: CONNECTIONS }, async (_, c) => {
    for (let n = 0; performance.now() < until; n++) {
      const got = await step(c, n);
      if (got === null) return;
      messages += got;
    }
  }));
  const elapsed = (performance.now() - t0) / 1000;
  return { messages, seconds: elapsed, cpuUs: (cpuNs(pid) - cpu0) / 1000 };
}

async function pushOneQueue(port, c, n) {
  const q = queue((c * 7 + n) % QUEUES);
  const items = Array.from({ length: BATCH }, () => ({ queue: q, payload, transactionId: `t${seq++}` }));
  const res = await request(port, 'POST', '/api/v1/push', JSON.stringify({ items }));
  if (res.status !== 201) throw new Error(`push ${res.status}: ${res.body.slice(0, 200)}`);
  return BATCH;
}

async function pushSpanning(port) {
  const items = Array.from({ length: BATCH }, (_, i) => ({ queue: queue(i % QUEUES), payload, transactionId: `t${seq++}` }));
  const res = await request(port, 'POST', '/api/v1/push', JSON.stringify({ items }));
  if (res.status !== 201) throw new Error(`spanning push ${res.status}: ${res.body.slice(0, 200)}`);
  return BATCH;
}

async function popAck(port, c, n) {
  const q = queue((c * 5 + n) % QUEUES);
  const pop = await request(port, 'GET', `/api/v1/pop/queue/${q}?batch=${BATCH}&wait=false`);
  if (pop.status === 204) return 0;
  if (pop.status !== 200) throw new Error(`pop ${pop.status}: ${pop.body.slice(0, 200)}`);
  const messages = JSON.parse(pop.body).messages;
  const acknowledgments = messages.map((m) => ({
    transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'completed',
  }));
  const ack = await request(port, 'POST', '/api/v1/ack/batch', JSON.stringify({ acknowledgments }));
  if (ack.status !== 200) throw new Error(`ack ${ack.status}: ${ack.body.slice(0, 200)}`);
  return messages.length;
}

/** Where `forward` sends what it reads from `queue`: a queue on another shard when there are several. */
function forwardQueue(queue, shards) {
  const { shardOf } = placementFor(shards);
  for (let k = 0; ; k++) {
    const name = `fwd-${queue}-${k}`;
    if (shards === 1 || shardOf(name) !== shardOf(queue)) return name;
  }
}

/** Pops up to BATCH from one queue and forwards them in one transaction: each acked, each pushed to the queue
 * `forwardQueue` names (so with several shards the transaction spans two and runs the two-phase commit). */
async function forward(port, c, n, destinations) {
  const q = queue((c * 3 + n) % QUEUES);
  const pop = await request(port, 'GET', `/api/v1/pop/queue/${q}?batch=${BATCH}&wait=false`);
  if (pop.status === 204) return 0;
  if (pop.status !== 200) throw new Error(`pop ${pop.status}: ${pop.body.slice(0, 200)}`);
  const messages = JSON.parse(pop.body).messages;
  const operations = [
    ...messages.map((m) => ({ type: 'ack', transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'completed' })),
    { type: 'push', items: messages.map((m) => ({ queue: destinations.get(q), payload: m.data })) },
  ];
  const res = await request(port, 'POST', '/api/v1/transaction', JSON.stringify({ operations }));
  if (res.status !== 200 || !JSON.parse(res.body).success) throw new Error(`transaction ${res.status}: ${res.body.slice(0, 200)}`);
  return messages.length;
}

async function fanoutMs(port, route) {
  const times = [];
  for (let i = 0; i < FANOUT_REQUESTS; i++) {
    const t0 = performance.now();
    const res = await request(port, 'GET', route);
    if (res.status !== 200) throw new Error(`${route} ${res.status}: ${res.body.slice(0, 200)}`);
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return { mean: times.reduce((a, b) => a + b, 0) / times.length, p50: times[Math.floor(times.length / 2)] };
}

const load = () => os.loadavg()[0].toFixed(1);
const started = new Date().toISOString().slice(0, 16) + 'Z';
const loadStart = load();
const rows = [];
const fanRows = [];
for (const shards of SHARD_COUNTS) {
  const base = existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir();
  const state = mkdtempSync(join(base, 'queen-edge-shards-bench-'));
  const w = await startWorker({ persistTo: state, vars: { SHARDS: String(shards) }, runtime: 'workerd' });
  try {
    const port = Number(new URL(w.url).port);
    const pid = workerdUnder(w.pid);
    await pushOneQueue(port, 0, 0); // warm-up: every shard's object opened
    await pushSpanning(port);
    const rate = (r) => Math.round(r.messages / r.seconds);
    const per = (r) => (r.messages ? Math.round(r.cpuUs / r.messages) : 0);
    const push = await timed(pid, SECONDS, (c, n) => pushOneQueue(port, c, n));
    process.stderr.write(`[shards-bench] SHARDS=${shards} push one queue/request: ${rate(push)} msg/s\n`);
    const span = await timed(pid, SECONDS, () => pushSpanning(port));
    process.stderr.write(`[shards-bench] SHARDS=${shards} push spanning ${QUEUES} queues: ${rate(span)} msg/s\n`);
    const destinations = new Map(Array.from({ length: QUEUES }, (_, i) => [queue(i), forwardQueue(queue(i), shards)]));
    const fwd = await timed(pid, SECONDS, (c, n) => forward(port, c, n, destinations));
    process.stderr.write(`[shards-bench] SHARDS=${shards} forward in transactions: ${rate(fwd)} msg/s\n`);
    const drain = await timed(pid, SECONDS * 2, (c, n) => popAck(port, c, n));
    process.stderr.write(`[shards-bench] SHARDS=${shards} pop+ack: ${rate(drain)} msg/s\n`);
    rows.push(`| ${shards} | ${rate(push)} | ${per(push)} | ${rate(span)} | ${per(span)} | ${rate(fwd)} | ${per(fwd)} | ${rate(drain)} | ${per(drain)} |`);
    const fan = [];
    for (const route of FANOUT_ROUTES) fan.push(await fanoutMs(port, route));
    fanRows.push(`| ${shards} | ${fan.map((f) => `${f.mean.toFixed(1)} / ${f.p50.toFixed(1)}`).join(' | ')} |`);
    process.stderr.write(`[shards-bench] SHARDS=${shards} fan-out ms: ${fan.map((f) => f.mean.toFixed(1)).join(', ')}\n`);
  } finally {
    await w.stop();
    rmSync(state, { recursive: true, force: true });
  }
}

const section = `<!-- shards:begin -->
## Shards: 1, 2 and 4 Durable Objects on local workerd

Written by \`scripts/bench-shards${QUICK ? ' --quick' : ''}\`, measured ${started} (load average ${loadStart} at the start, ${load()} at the end, on ${os.cpus().length} cores shared with other work${QUICK ? '; a quick run' : ''}). queen-edge on bare workerd (\`scripts/serve --var SHARDS:N\`), Durable Object state on tmpfs, ${CONNECTIONS} keep-alive connections, ${QUEUES} queues, ${BATCH}-message requests of ${PAYLOAD}-byte payloads, ${SECONDS} s per push row and at most ${SECONDS * 2} s of pop+ack (pop ${BATCH} from one queue, ack them in one \`/ack/batch\`). "one queue" pushes name one queue per request (forwarded unchanged to its shard); "spanning" pushes spread each request's items over all ${QUEUES} queues, so with more than one shard the entry Worker validates, splits and merges them. "forward in a transaction" pops ${BATCH} from one of the queues and, in one \`/api/v1/transaction\`, acks them and pushes one message for each to a queue of its own, for ${SECONDS} s; with more than one shard that queue lives on another shard than the one popped, so every transaction runs the two-phase commit (its coordinator object, a prepare and a commit on each of the two shards). CPU = the whole workerd process (entry Worker, every object, SQLite) per message.

| SHARDS | push, one queue (msg/s) | CPU us/msg | push, spanning (msg/s) | CPU us/msg | forward in a transaction (msg/s) | CPU us/msg | pop+ack (msg/s) | CPU us/msg |
|---|---|---|---|---|---|---|---|---|
${rows.join('\n')}

Fan-out routes, one request at a time (${FANOUT_REQUESTS} each, after the runs above; mean / median ms):

| SHARDS | ${FANOUT_ROUTES.map((r) => `\`${r}\``).join(' | ')} |
|---|${FANOUT_ROUTES.map(() => '---').join('|')}|
${fanRows.join('\n')}

What this can and cannot show: local workerd runs the entry Worker and every object of the process on the same
${os.cpus().length} shared cores, so more shards cannot add CPU here, and the machine's other load moves the
figures from run to run. The table shows what sharding costs: with one shard the entry Worker streams each
request to the object unchanged; with more it reads the body, scans the routing fields (payloads are skipped,
not parsed) and sends it on (compare the CPU per message of the one-queue rows), splits and merges requests
that span shards (the spanning rows: one subrequest per shard touched), runs the two-phase commit for a
transaction over two shards (the forward rows: a coordinator object, then a prepare and a commit on each shard)
and asks every shard for a listing (the fan-out rows). It cannot show the scale-out. On Cloudflare each Durable Object is its own single thread (about
1,000 requests/s each by Cloudflare's guidance) and entry Worker isolates scale out on their own, so
queue-scoped traffic spread over N shards gets up to N such threads, while a request that spans shards costs
one subrequest per shard it touches and a fan-out route one per shard.
<!-- shards:end -->`;

if (OUT) writeFileSync(OUT, section + '\n');
console.log(section);

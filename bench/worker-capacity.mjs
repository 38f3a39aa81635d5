// The workerd half of scripts/bench-capacity (read that script's header first): fills one queen-edge
// broker on bare workerd (scripts/serve, Durable Object SQLite on the disk) through HTTP pushes until its
// stored bytes reach each target, then kills workerd with SIGKILL, starts it again on the same state and
// measures what a restart costs: the time until /health answers (workerd's start plus the object's open, an
// index scan only: /health is served by the object), against the same for an empty broker; the
// workerd process's resident memory after the open (VmRSS, the whole process: runtime, isolate, wasm
// memory, SQLite page cache) against the same process with an empty broker, and a 100-message pop whose
// segments are not cached and one whose are. Prints a markdown table to stdout, progress to stderr.
//
//   node bench/worker-capacity.mjs 0.1 1 5     (targets in GB of stored segment bytes)
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { startWorker, tempPersistDir, workerdUnder } from '../worker/test/harness.mjs';

const targets = process.argv.slice(2).map(Number).filter((x) => x > 0);
if (targets.length === 0) targets.push(0.1);
const PARTITIONS = 10;
const PUSH_BATCH = 200;
const CONNECTIONS = 4;
const QUEUE = 'backlog';

const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS });
function request(base, method, path, body) {
  const url = new URL(path, base);
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const headers = data ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } : {};
    const req = http.request({ host: url.hostname, port: url.port, method, path: url.pathname + url.search, agent, headers }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        if (res.statusCode >= 300) return reject(new Error(`${method} ${path}: ${res.statusCode} ${text.slice(0, 300)}`));
        resolve(text ? JSON.parse(text) : null);
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(data);
  });
}

/** A ~3 KB event whose `blob` is random base64, so DEFLATE keeps most of it (the fill is then quick). */
function payload(i) {
  return { type: 'order.created', orderId: `ord-${String(i).padStart(10, '0')}`, blob: randomBytes(2200).toString('base64') };
}

function rssMb(pid) {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith('VmRSS:'));
  return Number(line.split(/\s+/)[1]) / 1024;
}
function dirBytes(dir) {
  let total = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    total += e.isDirectory() ? dirBytes(p) : statSync(p).size;
  }
  return total;
}
const log = (...a) => process.stderr.write(`${a.join(' ')}\n`);

const state = tempPersistDir();
let pushed = 0;
const rows = [];
try {
  // The empty broker's process, for the baseline: same build, one request so the object is open.
  {
    const s0 = performance.now();
    const w = await startWorker({ persistTo: state.dir });
    rows.baselineStartMs = performance.now() - s0;
    await request(w.url, 'GET', '/api/v1/status');
    rows.baseline = rssMb(workerdUnder(w.pid));
    await w.stop();
    rmSync(state.dir, { recursive: true, force: true });
  }
  for (const target of targets) {
    const goal = target * 1e9;
    let w = await startWorker({ persistTo: state.dir });
    let stored = (await request(w.url, 'GET', '/api/v1/status')).storage.storedBytes;
    const t0 = Date.now();
    let lastLog = 0;
    while (stored < goal) {
      // CONNECTIONS pushes in flight, then check the broker's own count of stored bytes.
      await Promise.all(Array.from({ length: CONNECTIONS }, () => {
        const base = pushed;
        pushed += PUSH_BATCH;
        const items = Array.from({ length: PUSH_BATCH }, (_, k) => ({
          queue: QUEUE,
          partition: `p${(base + k) % PARTITIONS}`,
          transactionId: `tx-${base + k}`,
          payload: payload(base + k),
        }));
        return request(w.url, 'POST', '/api/v1/push', { items });
      }));
      stored = (await request(w.url, 'GET', '/api/v1/status')).storage.storedBytes;
      if (Date.now() - lastLog > 10_000) {
        lastLog = Date.now();
        log(`  ${(stored / 1e9).toFixed(2)} / ${target} GB, ${pushed} messages, ${((Date.now() - t0) / 1000).toFixed(0)} s`);
      }
    }
    const fillSeconds = (Date.now() - t0) / 1000;
    // SIGKILL to workerd itself (scripts/serve runs it in a session of its own): no clean shutdown; the
    // restart opens from what SQLite holds.
    process.kill(workerdUnder(w.pid), 'SIGKILL');
    await w.stop();
    // scripts/serve waits for /health, which the object answers: the start includes the open.
    const o0 = performance.now();
    w = await startWorker({ persistTo: state.dir });
    const startMs = performance.now() - o0;
    const status = await request(w.url, 'GET', '/api/v1/status');
    const pid = workerdUnder(w.pid);
    const rss = rssMb(pid);
    // The first pop after the open also runs code the isolate has not run yet; the second pops another
    // partition, whose segments are not cached either.
    const popCold = async (partition) => {
      const c0 = performance.now();
      const reply = await request(w.url, 'GET', `/api/v1/pop/queue/${QUEUE}/partition/${partition}?batch=100&wait=false&consumerGroup=cold-${target}&subscriptionMode=all`);
      return [performance.now() - c0, reply?.messages?.length ?? 0];
    };
    const [firstMs, firstN] = await popCold('p0');
    const [coldMs, coldN] = await popCold('p1');
    const hot = `hot-${target}`;
    await request(w.url, 'POST', '/api/v1/push', { items: Array.from({ length: 100 }, (_, k) => ({ queue: QUEUE, partition: hot, payload: payload(k) })) });
    const h0 = performance.now();
    const warm = await request(w.url, 'GET', `/api/v1/pop/queue/${QUEUE}/partition/${hot}?batch=100&wait=false&consumerGroup=warm-${target}&subscriptionMode=all`);
    const warmMs = performance.now() - h0;
    const rssAfter = rssMb(pid);
    rows.push({
      target, stored: status.storage.storedBytes, disk: dirBytes(state.dir), messages: pushed, fillSeconds,
      startMs, rss, rssAfter, firstMs, firstN, coldMs, coldN, warmMs, warmN: warm?.messages?.length ?? 0,
    });
    log(`  ${target} GB: restart ${startMs.toFixed(0)} ms, RSS ${rss.toFixed(0)} MB`);
    await w.stop();
  }
} finally {
  state.cleanup();
}

const f = (x, d = 0) => x.toFixed(d);
console.log(`Empty broker: start until /health answers ${f(rows.baselineStartMs)} ms; workerd RSS after one request ${f(rows.baseline)} MB.\n`);
console.log('| stored (SQLite files) | messages | fill | restart after SIGKILL until /health answers (workerd start + object open) | workerd RSS after open | RSS above empty | first pop 100 | pop 100, not cached | pop 100, cached | RSS after the pops |');
console.log('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
for (const r of rows) {
  console.log(`| ${f(r.stored / 1e9, 2)} GB (${f(r.disk / 1e9, 2)} GB) | ${r.messages} | ${f(r.fillSeconds)} s | ${f(r.startMs)} ms | ${f(r.rss)} MB | ${f(r.rss - rows.baseline)} MB | ${f(r.firstMs, 1)} ms (${r.firstN} msgs) | ${f(r.coldMs, 1)} ms (${r.coldN} msgs) | ${f(r.warmMs, 1)} ms (${r.warmN} msgs) | ${f(r.rssAfter)} MB |`);
}

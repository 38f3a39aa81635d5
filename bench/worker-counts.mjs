// Push, pop and ack one request at a time (one connection), each kind accounted apart: workerd CPU per request
// (`/proc` schedstat of the workerd process read before and after each request, so a pop and the ack that
// follows it are told apart) and the store's commits (queen-edge) and rows written per request
// (`/api/v1/status` `storage`, which both answer; read in a separate pass so that its own requests are not in
// the CPU figures). The counts do not move with the machine's load; the CPU does. Each build and the naive queue
// (bench/naive-do) on its own workerd, state on tmpfs (or the disk, `--state disk`: each commit then reaches the
// file system, and with one connection every request commits alone), 10 partitions, 64 B payloads, `--passes`
// alternating passes (median per build). Prints only; not part of scripts/test.
//
//   node bench/worker-counts.mjs --build NAME=DIR [--build NAME=DIR]... [--var NAME:VAR=VALUE]... [--no-naive] [--batch 1]
//                                [--requests 300] [--passes 5] [--state tmpfs|disk]
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { startWorker, workerdUnder } from '../worker/test/harness.mjs';
import { buildsFromArgs, cpuNs, requester } from './load.mjs';
import { startNaive } from './naive-do/start.mjs';

const argv = process.argv.slice(2);
const opt = (name, fallback) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : fallback);
const BATCH = Number(opt('--batch', 1));
const REQUESTS = Number(opt('--requests', 300));
const PASSES = Number(opt('--passes', 5));
const NAIVE = !argv.includes('--no-naive');
const STATE = opt('--state', 'tmpfs');
if (!['tmpfs', 'disk'].includes(STATE)) throw new Error(`--state is tmpfs or disk, got ${STATE}`);
const request = requester(1);
const payload = (n) => ({ n, pad: 'x'.repeat(Math.max(0, 64 - JSON.stringify({ n, pad: '' }).length)) });

async function storage(b) {
  const res = await request(b.port, 'GET', '/api/v1/status');
  if (res.status !== 200) throw new Error(`${b.name} status ${res.status}: ${res.body.slice(0, 200)}`);
  return JSON.parse(res.body).storage;
}

/** Runs `send` (one request) and adds its workerd CPU (us) to `acc.cpu`, or its counters' change to `acc`. */
async function accounted(b, acc, counting, send) {
  if (counting) {
    const before = await storage(b);
    await send();
    const after = await storage(b);
    for (const [k, v] of Object.entries(after)) if (typeof v === 'number' && typeof before[k] === 'number') acc[k] = (acc[k] ?? 0) + v - before[k];
  } else {
    const c0 = cpuNs(b.pid);
    await send();
    acc.cpu = (acc.cpu ?? 0) + (cpuNs(b.pid) - c0) / 1000;
  }
  acc.requests = (acc.requests ?? 0) + 1;
}

/** One pass: `REQUESTS` pushes, then `REQUESTS` pop-and-ack pairs, on queue `queue`. */
async function pass(b, queue, counting) {
  const acc = { push: {}, pop: {}, ack: {} };
  for (let r = 0; r < REQUESTS; r++) {
    const items = Array.from({ length: BATCH }, (_, k) => ({ queue, partition: `p${r % 10}`, transactionId: `${queue}-${r}-${k}`, payload: payload(r) }));
    await accounted(b, acc.push, counting, async () => {
      const res = await request(b.port, 'POST', '/api/v1/push', JSON.stringify({ items }));
      if (res.status !== 201) throw new Error(`${b.name} push ${res.status}: ${res.body.slice(0, 200)}`);
    });
  }
  for (let r = 0; r < REQUESTS; r++) {
    let acknowledgments;
    await accounted(b, acc.pop, counting, async () => {
      const res = await request(b.port, 'GET', `/api/v1/pop/queue/${queue}?batch=${BATCH}&wait=false`);
      if (res.status !== 200) throw new Error(`${b.name} pop ${res.status}: ${res.body.slice(0, 200)}`);
      acknowledgments = JSON.parse(res.body).messages.map((m) => ({
        transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'completed',
      }));
    });
    await accounted(b, acc.ack, counting, async () => {
      const res = await request(b.port, 'POST', '/api/v1/ack/batch', JSON.stringify({ acknowledgments }));
      if (res.status !== 200) throw new Error(`${b.name} ack ${res.status}: ${res.body.slice(0, 200)}`);
    });
  }
  return acc;
}

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const root = mkdtempSync(join(STATE === 'tmpfs' ? '/dev/shm' : os.tmpdir(), 'queen-edge-counts-'));
const load0 = os.loadavg()[0];
const brokers = [];
try {
  for (const build of buildsFromArgs(argv)) {
    const w = await startWorker({ persistTo: join(root, build.name), vars: build.vars, runtime: 'workerd', extraArgs: ['--build-dir', build.dir] });
    brokers.push({ name: build.name, port: Number(new URL(w.url).port), pid: workerdUnder(w.pid), stop: w.stop });
  }
  if (NAIVE) brokers.push(await startNaive(join(root, 'naive'), request, 'naive'));
  const cpu = new Map(brokers.map((b) => [b.name, { push: [], pop: [], ack: [] }]));
  for (const b of brokers) await pass(b, 'warm', false);
  for (let p = 0; p < PASSES; p++) {
    for (const b of p % 2 ? [...brokers].reverse() : brokers) {
      const acc = await pass(b, `q${p}`, false);
      for (const op of ['push', 'pop', 'ack']) cpu.get(b.name)[op].push(acc[op].cpu / acc[op].requests);
    }
  }
  console.log(`batch ${BATCH}, 64 B, 1 connection, ${REQUESTS} requests of each kind per pass, ${PASSES} passes, state on ${STATE}; `
    + `load average ${load0.toFixed(1)} -> ${os.loadavg()[0].toFixed(1)}`);
  console.log('| broker | op | workerd CPU us/request, median (min to max) | commits | rows written |');
  console.log('|---|---|---:|---:|---:|');
  for (const b of brokers) {
    const counts = await pass(b, 'counted', true);
    for (const op of ['push', 'pop', 'ack']) {
      const xs = cpu.get(b.name)[op];
      const c = counts[op];
      const f = (k) => (c[k] !== undefined ? (c[k] / c.requests).toFixed(2) : '');
      console.log(`| ${b.name} | ${op} | ${median(xs).toFixed(0)} (${Math.min(...xs).toFixed(0)} to ${Math.max(...xs).toFixed(0)}) `
        + `| ${f('commits')} | ${f('rowsWritten')} |`);
    }
  }
} finally {
  for (const b of brokers) await b.stop();
  request.close();
  rmSync(root, { recursive: true, force: true });
}

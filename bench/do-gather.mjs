// How many requests one Durable Object commit carries, and what a request waits: for each build (served by
// scripts/serve --build-dir, state on tmpfs or with `--state disk` in the temp dir), in alternating rounds, 1-message pushes and then pop+acks of
// them (pop batch 1, one /ack/batch each) with C connections for --seconds; prints per build and connection
// count the medians over the rounds of requests per commit (`/api/v1/status` storage.commits before and
// after), msg/s, workerd CPU per message and the p50 and p99 latency of a request as the client sees it.
// Prints only; not part of scripts/test.
//
//   node bench/do-gather.mjs --build NAME=DIR [--build NAME=DIR]... [--var NAME:VAR=VALUE]... [--rounds 3] [--seconds 2]
//                            [--connections 1,8] [--payload 64] [--state tmpfs|disk]
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { startWorker, workerdUnder } from '../worker/test/harness.mjs';
import { buildsFromArgs, cpuNs, requester } from './load.mjs';

const argv = process.argv.slice(2);
const opt = (name, fallback) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : fallback);
const BUILDS = buildsFromArgs(argv);
const ROUNDS = Number(opt('--rounds', 3));
const SECONDS = Number(opt('--seconds', 2));
const CONNECTIONS = opt('--connections', '1,8').split(',').map(Number);
const PAYLOAD = Number(opt('--payload', 64));
const STATE = opt('--state', 'tmpfs');
if (!['tmpfs', 'disk'].includes(STATE)) throw new Error(`--state is tmpfs or disk, got ${STATE}`);
const PARTITIONS = 10;
const request = requester(Math.max(...CONNECTIONS));

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const quantile = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};

async function commits(b) {
  const res = await request(b.port, 'GET', '/api/v1/status');
  return JSON.parse(res.body).storage.commits;
}

/** Runs `step(client)` (returns messages done, or 0 for nothing) on `connections` clients for SECONDS. */
async function run(b, connections, step) {
  const latencies = [];
  let requests = 0;
  let messages = 0;
  const c0 = await commits(b);
  const cpu0 = cpuNs(b.pid);
  const t0 = performance.now();
  const deadline = t0 + SECONDS * 1000;
  await Promise.all(Array.from({ length: connections }, async (_, client) => {
    while (performance.now() < deadline) {
      const done = await step(client, (ms) => { latencies.push(ms); requests++; });
      if (done === null) return;
      messages += done;
    }
  }));
  const elapsed = (performance.now() - t0) / 1000;
  const cpu = cpuNs(b.pid) - cpu0;
  const c1 = await commits(b);
  return {
    perCommit: requests / Math.max(1, c1 - c0 - 0),
    msgsPerSec: messages / elapsed,
    cpuUsPerMsg: cpu / 1000 / Math.max(1, messages),
    p50: quantile(latencies, 0.5),
    p99: quantile(latencies, 0.99),
  };
}

async function timed(note, method, path, body) {
  const t = performance.now();
  const res = await request(this.port, method, path, body);
  note(performance.now() - t);
  return res;
}

async function pushes(b, queue, connections) {
  let n = 0;
  const payload = 'x'.repeat(Math.max(0, PAYLOAD - 16));
  return run(b, connections, async (client, note) => {
    const i = n++;
    const items = [{ queue, partition: `p${i % PARTITIONS}`, transactionId: `${queue}-${i}`, payload: { n: i, pad: payload } }];
    const res = await timed.call(b, note, 'POST', '/api/v1/push', JSON.stringify({ items }));
    if (res.status !== 201) throw new Error(`${b.name} push ${res.status}: ${res.body.slice(0, 200)}`);
    return 1;
  });
}

async function popAcks(b, queue, connections) {
  return run(b, connections, async (client, note) => {
    const pop = await timed.call(b, note, 'GET', `/api/v1/pop/queue/${queue}?batch=1&wait=false`);
    if (pop.status === 204) return null;
    if (pop.status !== 200) throw new Error(`${b.name} pop ${pop.status}: ${pop.body.slice(0, 200)}`);
    const acknowledgments = JSON.parse(pop.body).messages.map((m) => ({
      transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'completed',
    }));
    const ack = await timed.call(b, note, 'POST', '/api/v1/ack/batch', JSON.stringify({ acknowledgments }));
    if (ack.status !== 200) throw new Error(`${b.name} ack ${ack.status}: ${ack.body.slice(0, 200)}`);
    return acknowledgments.length;
  });
}

const stateRoot = mkdtempSync(join(STATE === 'tmpfs' ? '/dev/shm' : os.tmpdir(), 'queen-edge-gather-'));
const brokers = [];
const results = new Map();
const load0 = os.loadavg()[0];
try {
  for (const build of BUILDS) {
    const w = await startWorker({ persistTo: join(stateRoot, build.name), vars: build.vars, runtime: 'workerd', extraArgs: ['--build-dir', build.dir] });
    brokers.push({ name: build.name, port: Number(new URL(w.url).port), pid: workerdUnder(w.pid), stop: w.stop });
  }
  for (const b of brokers) { // warm-up
    await pushes(b, 'warm', 8);
    await popAcks(b, 'warm', 8);
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (const connections of CONNECTIONS) {
      const order = brokers.map((_, i) => brokers[(i + round) % brokers.length]);
      for (const b of order) {
        const queue = `r${round}-c${connections}`;
        const p = await pushes(b, queue, connections);
        const pa = await popAcks(b, queue, connections);
        for (const [op, r] of [['push', p], ['pop+ack', pa]]) {
          const key = `${b.name}|${connections}|${op}`;
          if (!results.has(key)) results.set(key, []);
          results.get(key).push(r);
          console.log(`[gather] round ${round + 1} c=${connections} ${b.name.padEnd(8)} ${op.padEnd(7)} ${r.perCommit.toFixed(2)} req/commit `
            + `${r.msgsPerSec.toFixed(0)} msg/s ${r.cpuUsPerMsg.toFixed(1)} us/msg p50 ${r.p50.toFixed(2)} ms p99 ${r.p99.toFixed(2)} ms`);
        }
      }
    }
  }
  console.log(`\nload average ${load0.toFixed(2)} -> ${os.loadavg()[0].toFixed(2)}; medians of ${ROUNDS} rounds of ${SECONDS} s, ${PAYLOAD} B`);
  console.log('| build | connections | op | requests/commit | msg/s | CPU us/msg | p50 ms | p99 ms |');
  console.log('|---|---:|---|---:|---:|---:|---:|---:|');
  for (const [key, rs] of results) {
    const [name, connections, op] = key.split('|');
    const m = (f) => median(rs.map(f));
    console.log(`| ${name} | ${connections} | ${op} | ${m((r) => r.perCommit).toFixed(2)} | ${m((r) => r.msgsPerSec).toFixed(0)} `
      + `| ${m((r) => r.cpuUsPerMsg).toFixed(1)} | ${m((r) => r.p50).toFixed(2)} | ${m((r) => r.p99).toFixed(2)} |`);
  }
} finally {
  request.close();
  for (const b of brokers) await b.stop();
  rmSync(stateRoot, { recursive: true, force: true });
}

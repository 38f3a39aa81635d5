// What a Broker object's open costs on bare workerd with many partitions, build against build: fills one
// queue with one message in each of P partitions (per --partitions value), then, round by round and build by
// build in turn, starts scripts/serve on that state and takes the workerd process's CPU time (all threads,
// /proc schedstat) and the wall time when /health first answers (the object answers it, so its open is
// inside; the harness polls /health every 100 ms, so the wall time is coarse), and the same for an empty
// state; the open's cost is the difference. Prints the medians per build and P, and the median of the first
// build's figure minus this one's in the same round, as a markdown table to stdout, progress to stderr.
// Prints only; not part of scripts/test.
//
//   node bench/worker-open.mjs --build a=DIR --build b=DIR [--partitions 1000,5000] [--rounds 5]
import http from 'node:http';
import { mkdirSync, rmSync } from 'node:fs';
import { startWorker, tempPersistDir, workerdUnder } from '../worker/test/harness.mjs';
import { buildsFromArgs, cpuNs } from './load.mjs';

const argv = process.argv.slice(2);
const opt = (name, fallback) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : fallback);
const PARTITIONS = opt('--partitions', '1000,5000').split(',').map(Number);
const ROUNDS = Number(opt('--rounds', 5));
const builds = buildsFromArgs(argv);
const PUSH_ITEMS = 500;
const log = (...a) => process.stderr.write(`${a.join(' ')}\n`);

function post(base, path, body) {
  const url = new URL(path, base);
  const data = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, method: 'POST', path: url.pathname,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => (res.statusCode >= 300
        ? reject(new Error(`${path}: ${res.statusCode} ${Buffer.concat(chunks).toString().slice(0, 300)}`))
        : resolve()));
    });
    req.on('error', reject);
    req.end(data);
  });
}

/** Starts `build` on `dir`; returns the workerd CPU (ms) and the wall time (ms) until /health answered. */
async function start(build, dir) {
  const t0 = performance.now();
  const w = await startWorker({ persistTo: dir, vars: build.vars, extraArgs: ['--build-dir', build.dir] });
  const wallMs = performance.now() - t0;
  const cpuMs = cpuNs(workerdUnder(w.pid)) / 1e6;
  await w.stop();
  return { cpuMs, wallMs };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const empty = tempPersistDir();
const rows = [];
try {
  for (const p of PARTITIONS) {
    const state = tempPersistDir();
    try {
      const w = await startWorker({ persistTo: state.dir, extraArgs: ['--build-dir', builds[0].dir] });
      for (let at = 0; at < p; at += PUSH_ITEMS) {
        const items = Array.from({ length: Math.min(PUSH_ITEMS, p - at) }, (_, k) => ({
          queue: 'open', partition: `p${at + k}`, payload: { n: at + k },
        }));
        await post(w.url, '/api/v1/push', { items });
      }
      await w.stop();
      log(`P=${p}: filled`);
      const runs = Object.fromEntries(builds.map((b) => [b.name, { open: [], wall: [], emptyCpu: [] }]));
      for (let round = 0; round < ROUNDS; round++) {
        const order = round % 2 === 0 ? builds : [...builds].reverse();
        for (const b of order) {
          rmSync(empty.dir, { recursive: true, force: true });
          mkdirSync(empty.dir);
          const base = await start(b, empty.dir);
          const full = await start(b, state.dir);
          runs[b.name].open.push(full.cpuMs - base.cpuMs);
          runs[b.name].wall.push(full.wallMs - base.wallMs);
          runs[b.name].emptyCpu.push(base.cpuMs);
          log(`P=${p} round ${round} ${b.name}: open CPU ${(full.cpuMs - base.cpuMs).toFixed(1)} ms, wall ${(full.wallMs - base.wallMs).toFixed(0)} ms`);
        }
      }
      for (const b of builds) {
        const r = runs[b.name];
        const paired = r.open.map((x, i) => runs[builds[0].name].open[i] - x);
        rows.push(`| ${p} | ${b.name} | ${median(r.open).toFixed(1)} | ${median(paired).toFixed(1)} | ${median(r.wall).toFixed(0)} | ${median(r.emptyCpu).toFixed(0)} | ${r.open.map((x) => x.toFixed(0)).join(' ')} |`);
      }
    } finally {
      state.cleanup();
    }
  }
} finally {
  empty.cleanup();
}
console.log(`| partitions | build | open CPU ms (median, full - empty) | ${builds[0].name} minus this, same round (median) | wall ms (median, full - empty) | empty start CPU ms | open CPU ms per round |`);
console.log('|---|---|---|---|---|---|---|');
for (const r of rows) console.log(r);

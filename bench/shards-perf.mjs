// `perf` on workerd while the entry Worker splits pushes over shards (the "spanning" row of scripts/bench-shards):
// SHARDS=N (default 2), 8 connections, 100-message pushes whose items span 16 queues, for --seconds after a
// warm-up. Writes `perf script` text to --out/NAME.txt for bench/worker-perf-split.py and prints the workerd CPU
// per message of the recorded stretch. Prints only; not part of scripts/test. Needs root (perf).
//
//   node bench/shards-perf.mjs --build NAME=DIR [--shards 2] [--seconds 4] [--warm 2] [--op spanning|one] [--no-perf] [--out DIR]
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join, resolve } from 'node:path';
import { startWorker, workerdUnder } from '../worker/test/harness.mjs';
import { buildsFromArgs, cpuNs, requester, perfScriptWhile } from './load.mjs';

const argv = process.argv.slice(2);
const opt = (name, fallback) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : fallback);
const BUILDS = buildsFromArgs(argv);
const SHARDS = Number(opt('--shards', 2));
const SECONDS = Number(opt('--seconds', 4));
const WARM = Number(opt('--warm', 2));
const OP = opt('--op', 'spanning');
const PERF = !argv.includes('--no-perf');
const OUT = resolve(opt('--out', mkdtempSync(join(os.tmpdir(), 'queen-edge-shards-perf-'))));
mkdirSync(OUT, { recursive: true });
const QUEUES = 16;
const BATCH = 100;
const request = requester(8);
const payload = 'x'.repeat(62);
let seq = 0;

async function push(port, c, n) {
  const items = Array.from({ length: BATCH }, (_, i) => ({
    queue: `bench-${OP === 'spanning' ? i % QUEUES : (c * 7 + n) % QUEUES}`,
    payload,
    transactionId: `t${seq++}`,
  }));
  const res = await request(port, 'POST', '/api/v1/push', JSON.stringify({ items }));
  if (res.status !== 201) throw new Error(`push ${res.status}: ${res.body.slice(0, 200)}`);
  return BATCH;
}

async function run(port, seconds) {
  const until = performance.now() + seconds * 1000;
  let messages = 0;
  await Promise.all(Array.from({ length: 8 }, async (_, c) => {
    for (let n = 0; performance.now() < until; n++) {
      const got = await push(port, c, n);
      messages += got;
    }
  }));
  return messages;
}

for (const build of BUILDS) {
  const state = mkdtempSync(join('/dev/shm', 'queen-edge-shards-perf-'));
  const w = await startWorker({ persistTo: state, vars: { SHARDS: String(SHARDS), ...build.vars }, runtime: 'workerd',
    extraArgs: ['--build-dir', build.dir, ...(PERF ? ['--v8-flag', '--perf-basic-prof'] : [])] });
  try {
    const port = Number(new URL(w.url).port);
    const pid = workerdUnder(w.pid);
    await run(port, WARM);
    const cpu0 = cpuNs(pid);
    const t0 = performance.now();
    const messages = PERF ? (await perfScriptWhile(pid, OUT, build.name, () => run(port, SECONDS))).result : await run(port, SECONDS);
    const elapsed = (performance.now() - t0) / 1000;
    const us = (cpuNs(pid) - cpu0) / 1000 / messages;
    console.log(`${build.name}: ${Math.round(messages / elapsed)} msg/s, ${us.toFixed(1)} workerd CPU us/msg -> ${join(OUT, build.name + '.txt')}`);
  } finally {
    await w.stop();
    rmSync(state, { recursive: true, force: true });
  }
}
request.close();

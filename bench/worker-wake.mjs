// The first request to a Broker object that wakes on stored data, build against build, on bare workerd:
// fills one queue of broker `wake` (BROKER_SELECTABLE) with one message in each of P partitions (per
// --partitions value), then, round by round and build by build in turn, starts scripts/serve on that state
// (its /health wakes the default broker, so the isolate is up and the code compiled), wakes an empty broker
// (`/health` with `x-queen-broker: empty`: what any object's first request costs) and then broker `wake`,
// taking for each the client's wall time to the answer and the workerd process's CPU (all threads,
// /proc schedstat) over the request. The open's cost is wake minus empty; a second request to `wake` shows
// the warm latency. Prints medians per build and P, and the first build's figure minus this one's in the
// same round (median, rounds this build won), as a markdown table to stdout, progress to stderr.
// With --profile DIR it also takes, per build and P, one V8 CPU profile (scripts/serve --inspector) of the
// wake request, writes it to DIR (DevTools opens it) and prints the functions with the most samples, self
// and inclusive. Prints only; not part of scripts/test.
//
//   node bench/worker-wake.mjs --build a=DIR --build b=DIR [--partitions 5000,20000] [--rounds 7]
//     [--profile DIR] [--profile-only]
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { freePort, startWorker, tempPersistDir, workerdUnder } from '../worker/test/harness.mjs';
import { buildsFromArgs, cpuNs, inspector, requester } from './load.mjs';

const argv = process.argv.slice(2);
const opt = (name, fallback) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : fallback);
const PARTITIONS = opt('--partitions', '5000,20000').split(',').map(Number);
const ROUNDS = Number(opt('--rounds', 7));
const PROFILE_DIR = opt('--profile', null);
const PROFILE_ONLY = argv.includes('--profile-only');
const builds = buildsFromArgs(argv);
const PUSH_ITEMS = 500;
const SELECTABLE = { BROKER_SELECTABLE: 'true' };
const log = (...a) => process.stderr.write(`${a.join(' ')}\n`);
const request = requester(1);

/** One request with `x-queen-broker: broker`; resolves to its status and body. */
function call(port, broker, method, path, body) {
  const joiner = path.includes('?') ? '&' : '?';
  return request(port, method, `${path}${joiner}broker=${broker}`, body);
}

async function fill(p, dir) {
  const w = await startWorker({ persistTo: dir, vars: SELECTABLE, extraArgs: ['--build-dir', builds[0].dir] });
  const port = Number(new URL(w.url).port);
  for (let at = 0; at < p; at += PUSH_ITEMS) {
    const items = Array.from({ length: Math.min(PUSH_ITEMS, p - at) }, (_, k) => ({
      queue: 'wake', partition: `p${at + k}`, payload: { n: at + k },
    }));
    const r = await call(port, 'wake', 'POST', '/api/v1/push', JSON.stringify({ items }));
    if (r.status !== 201) throw new Error(`push ${r.status} ${r.body.slice(0, 300)}`);
  }
  await w.stop();
}

/** Wall ms and workerd CPU ms of one request to `broker`. */
async function timed(port, pid, broker) {
  const cpu0 = cpuNs(pid);
  const t0 = performance.now();
  const r = await call(port, broker, 'GET', '/health');
  const wallMs = performance.now() - t0;
  const cpuMs = (cpuNs(pid) - cpu0) / 1e6;
  if (r.status !== 200) throw new Error(`/health of ${broker}: ${r.status} ${r.body.slice(0, 300)}`);
  return { wallMs, cpuMs };
}

async function round(build, dir) {
  const w = await startWorker({ persistTo: dir, vars: { ...SELECTABLE, ...build.vars }, extraArgs: ['--build-dir', build.dir] });
  try {
    const port = Number(new URL(w.url).port);
    const pid = workerdUnder(w.pid);
    const empty = await timed(port, pid, 'empty');
    const wake = await timed(port, pid, 'wake');
    const warm = await timed(port, pid, 'wake');
    return { open: wake.cpuMs - empty.cpuMs, wall: wake.wallMs - empty.wallMs, wakeWall: wake.wallMs, warmWall: warm.wallMs };
  } finally {
    await w.stop();
  }
}

// ---------------------------------------------------------------- profile
/** Samples by function: self (leaf) and inclusive (anywhere on the stack, once a sample). */
function analyse(profile) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const name = (id) => byId.get(id).callFrame.functionName || '(anonymous)';
  const self = new Map();
  const inclusive = new Map();
  let busy = 0;
  for (const id of profile.samples) {
    const leaf = name(id);
    if (leaf === '(idle)') continue;
    busy++;
    self.set(leaf, (self.get(leaf) ?? 0) + 1);
    const seen = new Set();
    for (let cur = id; cur != null; cur = parent.get(cur)) seen.add(name(cur));
    for (const n of seen) inclusive.set(n, (inclusive.get(n) ?? 0) + 1);
  }
  return { busy, self, inclusive };
}

async function profileWake(build, dir, p) {
  const inspectPort = await freePort();
  const w = await startWorker({ persistTo: dir, vars: { ...SELECTABLE, ...build.vars },
    extraArgs: ['--build-dir', build.dir, '--inspector', `127.0.0.1:${inspectPort}`] });
  try {
    const port = Number(new URL(w.url).port);
    const pid = workerdUnder(w.pid);
    try { for (const t of readdirSync(`/proc/${pid}/task`)) execFileSync('renice', ['-n', '-10', '-p', t], { stdio: 'ignore' }); } catch { /* not root */ }
    await timed(port, pid, 'empty');
    const ins = await inspector(`127.0.0.1:${inspectPort}`);
    await ins.send('Profiler.enable');
    await ins.send('Profiler.setSamplingInterval', { interval: 50 });
    await ins.send('Profiler.start');
    const wake = await timed(port, pid, 'wake');
    const { profile } = await ins.send('Profiler.stop');
    ins.close();
    mkdirSync(PROFILE_DIR, { recursive: true });
    const file = join(PROFILE_DIR, `wake-${build.name}-${p}.cpuprofile`);
    writeFileSync(file, JSON.stringify(profile));
    const { busy, self, inclusive } = analyse(profile);
    const top = (m, n) => [...m].sort((a, b) => b[1] - a[1]).slice(0, n)
      .map(([f, c]) => `| ${(100 * c / busy).toFixed(1)} % | ${c} | \`${f.slice(0, 140)}\` |`).join('\n');
    console.log(`\n### ${build.name}, P = ${p}: wake ${wake.wallMs.toFixed(0)} ms wall, ${wake.cpuMs.toFixed(0)} ms workerd CPU, ${busy} busy samples of 50 us (${file})\n`);
    console.log('Self:\n\n| share | samples | function |\n|---|---|---|');
    console.log(top(self, 30));
    console.log('\nInclusive:\n\n| share | samples | function |\n|---|---|---|');
    console.log(top(inclusive, 60));
  } finally {
    await w.stop();
  }
}

// ---------------------------------------------------------------- main
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const rows = [];
const load0 = os.loadavg()[0];
const start = new Date().toISOString();
for (const p of PARTITIONS) {
  const state = tempPersistDir();
  try {
    await fill(p, state.dir);
    log(`P=${p}: filled`);
    if (PROFILE_DIR) for (const b of builds) await profileWake(b, state.dir, p);
    if (PROFILE_ONLY) continue;
    const runs = Object.fromEntries(builds.map((b) => [b.name, []]));
    for (let r = 0; r < ROUNDS; r++) {
      const order = r % 2 === 0 ? builds : [...builds].reverse();
      for (const b of order) {
        const x = await round(b, state.dir);
        runs[b.name].push(x);
        log(`P=${p} round ${r} ${b.name}: open CPU ${x.open.toFixed(1)} ms, wake wall ${x.wakeWall.toFixed(1)} ms, warm ${x.warmWall.toFixed(1)} ms`);
      }
    }
    const first = runs[builds[0].name];
    for (const b of builds) {
      const mine = runs[b.name];
      const cpuLess = mine.map((x, i) => first[i].open - x.open);
      const wallLess = mine.map((x, i) => first[i].wakeWall - x.wakeWall);
      const won = cpuLess.filter((d) => d > 0).length;
      rows.push(`| ${p} | ${b.name} | ${median(mine.map((x) => x.open)).toFixed(1)} | ${median(cpuLess).toFixed(1)}, ${won} of ${ROUNDS} | ${median(mine.map((x) => x.wakeWall)).toFixed(1)} | ${median(wallLess).toFixed(1)} | ${median(mine.map((x) => x.wall)).toFixed(1)} | ${median(mine.map((x) => x.warmWall)).toFixed(1)} |`);
    }
  } finally {
    state.cleanup();
  }
}
request.close();
if (!PROFILE_ONLY) {
  console.log(`\n${start} to ${new Date().toISOString()}, load ${load0.toFixed(1)} -> ${os.loadavg()[0].toFixed(1)}, ${ROUNDS} rounds\n`);
  console.log(`| partitions | build | open CPU ms (wake - empty, median) | ${builds[0].name} minus this, same round (median, rounds won) | wake wall ms (median) | ${builds[0].name} minus this, wall | wall wake - empty | warm wall ms |`);
  console.log('|---|---|---|---|---|---|---|---|');
  for (const r of rows) console.log(r);
}

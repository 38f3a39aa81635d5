// Before/after on one machine: two or more builds of the Worker (each served by scripts/serve --build-dir) and the
// naive Durable Object queue of bench/naive-do/, all on tmpfs (or `--state disk`), measured in alternating rounds so that the load
// of a shared machine falls on each alike. Per round and batch size, each broker in turn (the order rotates
// every round) pushes for --seconds with 8 connections to 10 partitions (64-byte payloads), then pops and
// acks what it stored (/ack/batch). Prints, per broker, batch and operation, the median over the rounds of the
// workerd CPU per message (all of workerd's threads, /proc schedstat) and of msg/s, and for each build the Durable
// Object commits per 100 messages (`/api/v1/status` storage.commits: how much commits were shared), and each build's msg/s
// over the naive queue's and over the first build's, paired by round (median of the per-round ratios, rounds ahead). Prints only; not part of
// scripts/test.
//
//   node bench/worker-ab.mjs --build NAME=DIR [--build NAME=DIR]... [--no-naive] [--rounds 3] [--seconds 2]
//                            [--batches 1,10,100] [--payload 64] [--state tmpfs|disk]
//                            [--var NAME:VAR=VALUE]... [--v8-flag NAME:FLAG]... [--touch-mb 2048]
//   DIR: a worker/build directory (scripts/build-worker's output, copied aside for the "before" build).
//   --var: a Worker variable for build NAME only, e.g. one DIR under three names with COMMIT_SHARING off, on, auto.
//   Without it a build runs with scripts/serve's own pick of COMMIT_SHARING: off on tmpfs state, on with --state disk.
//   --v8-flag: a V8 flag for build NAME's workerd only (e.g. NAME:--perf-basic-prof, what bench/worker-perf.mjs sets).
//   --touch-mb: MiB of free memory touched before each round's batch size (bench/load.mjs, touchFreeMemory; 0: none).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { startWorker, workerdUnder } from '../worker/test/harness.mjs';
import { buildsFromArgs, loadDriver, median, pairedRatio, requester, roundOrder, touchFreeMemory, withStorage } from './load.mjs';
import { startNaive } from './naive-do/start.mjs';

const argv = process.argv.slice(2);
const opt = (name, fallback) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : fallback);
const BUILDS = buildsFromArgs(argv, { v8Flags: true });
const NAIVE = !argv.includes('--no-naive');
const ROUNDS = Number(opt('--rounds', 3));
const SECONDS = Number(opt('--seconds', 2));
const BATCHES = opt('--batches', '1,10,100').split(',').map(Number);
const PAYLOAD = Number(opt('--payload', 64));
const TOUCH_MB = Number(opt('--touch-mb', 2048));
// Where the SQLite files live: tmpfs (/dev/shm, the default: the brokers' own cost) or the disk (the temp dir,
// as scripts/bench-worker's disk rows: each commit's writes and syncs reach the file system).
const STATE = opt('--state', 'tmpfs');
if (!['tmpfs', 'disk'].includes(STATE)) throw new Error(`--state is tmpfs or disk, got ${STATE}`);
const CONNECTIONS = 8;
const PARTITIONS = 10;
const request = requester(CONNECTIONS);

async function startBuild(build, stateDir) {
  const w = await startWorker({ persistTo: stateDir, vars: build.vars, runtime: 'workerd', extraArgs: ['--build-dir', build.dir, ...build.v8Flags.flatMap((f) => ['--v8-flag', f])] });
  return { name: build.name, port: Number(new URL(w.url).port), pid: workerdUnder(w.pid), stop: w.stop, logs: w.logs, commits: true };
}

const { push, popAck } = loadDriver({ request, connections: CONNECTIONS, partitions: PARTITIONS, payloadBytes: PAYLOAD });

// Every thread of every workerd and of this client at QE_AB_NICE (default -10; needs root; 0 to skip), so that
// other work on the machine preempts the measured processes less. Called again after the warm-up (workerd
// starts threads as it goes).
const NICE = Number(process.env.QE_AB_NICE ?? -10);
function renice(pids) {
  if (NICE === 0) return;
  try {
    for (const pid of pids) {
      for (const t of readdirSync(`/proc/${pid}/task`)) execFileSync('renice', ['-n', String(NICE), '-p', t], { stdio: 'ignore' });
    }
  } catch { console.log('[ab] could not renice (not root?): measured processes share the CPU at normal priority'); }
}

const stateRoot = mkdtempSync(join(STATE === 'tmpfs' ? '/dev/shm' : os.tmpdir(), 'queen-edge-ab-'));
const brokers = [];
const results = new Map(); // `${broker}|${batch}|${op}` -> [{cpuUsPerMsg, msgsPerSec}]
const load0 = os.loadavg()[0];
try {
  for (const build of BUILDS) brokers.push(await startBuild(build, join(stateRoot, build.name)));
  if (NAIVE) brokers.push(await startNaive(join(stateRoot, 'naive'), request, 'naive'));
  renice([process.pid, ...brokers.map((b) => b.pid)]);
  for (const b of brokers) { // warm-up, not counted
    for (const batch of BATCHES) {
      const p = await push(b, `warm-${batch}`, batch, 1);
      await popAck(b, `warm-${batch}`, batch, p.messages, 1);
    }
  }
  renice([process.pid, ...brokers.map((b) => b.pid)]);
  for (let round = 0; round < ROUNDS; round++) {
    for (const batch of BATCHES) {
      touchFreeMemory(TOUCH_MB);
      for (const b of roundOrder(brokers, round)) {
        const queue = `r${round}-b${batch}`;
        const p = await withStorage(request, b, () => push(b, queue, batch, SECONDS));
        const pa = await withStorage(request, b, () => popAck(b, queue, batch, p.messages, SECONDS));
        for (const [op, r] of [['push', p], ['pop+ack', pa]]) {
          const key = `${b.name}|${batch}|${op}`;
          if (!results.has(key)) results.set(key, []);
          results.get(key).push(r);
        }
        const per100 = (r) => (r.commitsPer100 === null ? '' : ` ${r.commitsPer100.toFixed(1)} commits/100 msg`);
        console.log(`[ab] round ${round + 1} batch ${String(batch).padStart(3)} ${b.name.padEnd(10)} push ${p.cpuUsPerMsg.toFixed(1)} us/msg `
          + `${p.msgsPerSec.toFixed(0)} msg/s, pop+ack ${pa.cpuUsPerMsg.toFixed(1)} us/msg ${pa.msgsPerSec.toFixed(0)} msg/s  (load ${os.loadavg()[0].toFixed(1)})`
          + `${per100(p)}${per100(pa)}`);
      }
    }
  }
} catch (e) {
  // What each build's workerd printed, to tell a broker's failure from the client's (the naive queue's
  // workerd prints to this process's own output).
  for (const b of brokers) if (b.logs) console.error(`[ab] ${b.name} (port ${b.port}) workerd output, last 4 KB:\n${b.logs().slice(-4096)}`);
  throw e;
} finally {
  for (const b of brokers) await b.stop();
  request.close();
  rmSync(stateRoot, { recursive: true, force: true });
}
console.log(`\nmedian of ${ROUNDS} rounds, ${SECONDS} s each, ${PAYLOAD} B, ${CONNECTIONS} connections, state on ${STATE}, nice ${NICE}; `
  + `load average ${load0.toFixed(1)} at the start, ${os.loadavg()[0].toFixed(1)} at the end`);
console.log('| batch | op | ' + brokers.map((b) => `${b.name} CPU us/msg | ${b.name} msg/s`).join(' | ') + ' |');
console.log('|---:|---|' + brokers.map(() => '---:|---:').join('|') + '|');
for (const batch of BATCHES) {
  for (const op of ['push', 'pop+ack']) {
    const cells = brokers.map((b) => {
      const rs = results.get(`${b.name}|${batch}|${op}`) ?? [];
      return `${median(rs.map((r) => r.cpuUsPerMsg)).toFixed(1)} | ${median(rs.map((r) => r.msgsPerSec)).toFixed(0)}`;
    });
    console.log(`| ${batch} | ${op} | ${cells.join(' | ')} |`);
  }
}
const builds = brokers.filter((b) => b.commits);
console.log(`\nDurable Object commits per 100 messages, median of ${ROUNDS} rounds`);
console.log('| batch | op | ' + builds.map((b) => b.name).join(' | ') + ' |');
console.log('|---:|---|' + builds.map(() => '---:').join('|') + '|');
for (const batch of BATCHES) {
  for (const op of ['push', 'pop+ack']) {
    const cells = builds.map((b) => median((results.get(`${b.name}|${batch}|${op}`) ?? []).map((r) => r.commitsPer100)).toFixed(1));
    console.log(`| ${batch} | ${op} | ${cells.join(' | ')} |`);
  }
}
// Paired by round: each build's msg/s over the naive queue's and over the first build's of the same round (every
// broker runs in every round), as the median of the per-round ratios and the rounds it was ahead: the reading
// that a drift of the machine's load between rounds moves least.
const naive = brokers.find((b) => !b.commits);
const pairs = [...(naive ? builds.map((b) => [b, naive]) : []), ...builds.slice(1).map((b) => [b, builds[0]])];
if (pairs.length) {
  const rates = (b, batch, op) => (results.get(`${b.name}|${batch}|${op}`) ?? []).map((r) => r.msgsPerSec);
  console.log(`
msg/s paired by round: the median of the ${ROUNDS} per-round ratios (rounds ahead)`);
  console.log('| batch | op | ' + pairs.map(([a, b]) => `${a.name} / ${b.name}`).join(' | ') + ' |');
  console.log('|---:|---|' + pairs.map(() => '---:').join('|') + '|');
  for (const batch of BATCHES) {
    for (const op of ['push', 'pop+ack']) {
      const cells = pairs.map(([a, b]) => {
        const r = pairedRatio(rates(a, batch, op), rates(b, batch, op));
        return `${r.ratio.toFixed(2)}x (${r.ahead}/${r.rounds})`;
      });
      console.log(`| ${batch} | ${op} | ${cells.join(' | ')} |`);
    }
  }
}

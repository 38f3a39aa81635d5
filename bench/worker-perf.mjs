// `perf` on workerd at the benchmark's load, for queen-edge's Worker builds and the naive Durable Object queue
// in the same sitting, split by component with bench/worker-perf-split.py. Each broker runs on its own workerd
// with V8's perf map (`--perf-basic-prof`), state on tmpfs (or `--state disk`); after a warm-up (1 s of push
// then pop+ack), the load of bench/worker-ab.mjs (8 connections, 10 partitions): push for --seconds, then pop+ack of what it
// stored for --seconds. `perf record -g` samples the workerd process during the operation named by --op
// (`pop+ack` or `push`), and the workerd CPU per message of that same stretch is what the split spreads. The
// `perf script` texts stay in --out (default a fresh /tmp directory) for `worker-perf-split.py --dump`.
// Each broker is measured once, one after the other, not in paired rounds: the split's last lines compare
// the brokers at one pace (workerd's per-request layers, the same work for each; a pop+ack line says its
// empty pops, requests without a message). For msg/s or CPU ratios use bench/worker-ab.mjs.
// Prints only; not part of scripts/test. Needs root (perf, renice).
//
//   node bench/worker-perf.mjs --build NAME=DIR [--build NAME=DIR]... [--var NAME:VAR=VALUE]... [--no-naive] [--op pop+ack]
//                              [--batch 100] [--payload 64] [--seconds 4] [--warm 1] [--state tmpfs|disk]
//                              [--out DIR] [--touch-mb 2048] [--connections 8]
//
// `--warm` is the seconds of each warm-up phase (V8 compiles the wasm's hot functions with TurboFan during the
// first seconds of load: bench/worker-perf-split.py's JIT row). `--touch-mb`: MiB of free memory touched before each
// broker's measurement (bench/load.mjs, touchFreeMemory; 0: none).
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join, resolve } from 'node:path';
import { ROOT, startWorker, workerdUnder } from '../worker/test/harness.mjs';
import { buildsFromArgs, loadDriver, perfScriptWhile, requester, touchFreeMemory } from './load.mjs';
import { startNaive } from './naive-do/start.mjs';

const argv = process.argv.slice(2);
const opt = (name, fallback) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : fallback);
const BUILDS = buildsFromArgs(argv);
const NAIVE = !argv.includes('--no-naive');
const OP = opt('--op', 'pop+ack');
if (!['pop+ack', 'push'].includes(OP)) throw new Error(`--op is pop+ack or push, got ${OP}`);
const BATCH = Number(opt('--batch', 100));
const PAYLOAD = Number(opt('--payload', 64));
// Where the SQLite files live: tmpfs (/dev/shm, the default: the brokers' own cost) or the disk (the temp dir,
// as scripts/bench-worker's disk rows: each commit's writes and syncs reach the file system).
const STATE = opt('--state', 'tmpfs');
if (!['tmpfs', 'disk'].includes(STATE)) throw new Error(`--state is tmpfs or disk, got ${STATE}`);
const SECONDS = Number(opt('--seconds', 4));
const WARM = Number(opt('--warm', 1));
const TOUCH_MB = Number(opt('--touch-mb', 2048));
const OUT = resolve(opt('--out', mkdtempSync(join(os.tmpdir(), 'queen-edge-perf-'))));
const PERF_FLAGS = ['--v8-flag', '--perf-basic-prof'];
mkdirSync(OUT, { recursive: true });

const request = requester(8);
// `--connections 1` sends one request at a time: no request waits for another, so a difference in workerd's
// per-request layers between the brokers is work one of them does, not the pace of the load.
const CONNECTIONS = Number(opt('--connections', 8));
const { push, popAck } = loadDriver({ request, connections: CONNECTIONS, partitions: 10, payloadBytes: PAYLOAD });

function renice(pid) {
  for (const t of readdirSync(`/proc/${pid}/task`)) execFileSync('renice', ['-n', '-10', '-p', t], { stdio: 'ignore' });
}

const stateRoot = mkdtempSync(join(STATE === 'tmpfs' ? '/dev/shm' : os.tmpdir(), 'queen-edge-perf-'));
const load0 = os.loadavg()[0];
const runs = [];
try {
  const brokers = [];
  for (const build of BUILDS) {
    const w = await startWorker({ persistTo: join(stateRoot, build.name), vars: build.vars, runtime: 'workerd', extraArgs: ['--build-dir', build.dir, ...PERF_FLAGS] });
    brokers.push({ name: build.name, port: Number(new URL(w.url).port), pid: workerdUnder(w.pid), stop: w.stop });
  }
  if (NAIVE) brokers.push(await startNaive(join(stateRoot, 'naive'), request, 'naive', ['--perf-basic-prof']));
  try {
    for (const b of brokers) {
      const p = await push(b, 'warm', BATCH, WARM);
      await popAck(b, 'warm', BATCH, p.messages, WARM);
      renice(b.pid);
    }
    for (const b of brokers) {
      touchFreeMemory(TOUCH_MB);
      let recorded;
      if (OP === 'push') {
        recorded = await perfScriptWhile(b.pid, OUT, b.name, () => push(b, 'q', BATCH, SECONDS));
      } else {
        const p = await push(b, 'q', BATCH, SECONDS);
        recorded = await perfScriptWhile(b.pid, OUT, b.name, () => popAck(b, 'q', BATCH, p.messages, SECONDS));
      }
      const { result: r, text } = recorded;
      runs.push({ name: b.name, text, ...r });
      console.log(`[perf] ${b.name} ${OP} batch ${BATCH} ${PAYLOAD} B: ${r.cpuUsPerMsg.toFixed(1)} us/msg, `
        + `${r.msgsPerSec.toFixed(0)} msg/s${r.empty === undefined ? '' : `, ${r.empty} empty pops`} (load ${os.loadavg()[0].toFixed(1)})`);
    }
  } finally {
    for (const b of brokers) await b.stop();
  }
} finally {
  request.close();
  rmSync(stateRoot, { recursive: true, force: true });
}
console.log(`\n${OP}, batch ${BATCH}, ${PAYLOAD} B, ${SECONDS} s, state on ${STATE}; load average ${load0.toFixed(1)} at the start, `
  + `${os.loadavg()[0].toFixed(1)} at the end; perf texts in ${OUT}`);
console.log(execFileSync('python3', [join(ROOT, 'bench', 'worker-perf-split.py'), ...runs.map((r) => `${r.text}=${r.cpuUsPerMsg}`)]).toString());

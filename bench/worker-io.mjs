// What a push costs the file system, for queen-edge's Worker builds and the naive Durable Object queue side by
// side: each broker on its own workerd (state on the disk, or tmpfs with `--state tmpfs`), after a 1 s warm-up
// the push load of bench/worker-ab.mjs (8 connections, 10 partitions) for --seconds while `strace -f -y` records
// the workerd process's `pwrite64` and `fsync` calls (with their wall time, `-T`). Prints per broker and per
// request: the bytes and writes to the SQLite WAL and to the database file (the checkpoint's copies), the
// fsyncs and their mean wall time, and msg/s and workerd CPU per message of that stretch (strace slows every
// traced call, so those two are only for reading the counts; bench/worker-ab.mjs measures speed). Prints
// only; not part of scripts/test. Needs strace (and root to trace another process).
//
//   node bench/worker-io.mjs --build NAME=DIR [--build NAME=DIR]... [--var NAME:VAR=VALUE]... [--no-naive] [--batch 100] [--payload 64]
//                            [--seconds 3] [--state disk|tmpfs]
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { startWorker, workerdUnder } from '../worker/test/harness.mjs';
import { buildsFromArgs, loadDriver, requester } from './load.mjs';
import { startNaive } from './naive-do/start.mjs';

const argv = process.argv.slice(2);
const opt = (name, fallback) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : fallback);
const BUILDS = buildsFromArgs(argv);
const NAIVE = !argv.includes('--no-naive');
const BATCH = Number(opt('--batch', 100));
const PAYLOAD = Number(opt('--payload', 64));
const SECONDS = Number(opt('--seconds', 3));
const STATE = opt('--state', 'disk');
if (!['tmpfs', 'disk'].includes(STATE)) throw new Error(`--state is tmpfs or disk, got ${STATE}`);
const request = requester(8);
const { push } = loadDriver({ request, connections: 8, partitions: 10, payloadBytes: PAYLOAD });

/** Per file kind (`wal`, `db`), from strace's text: pwrite count and bytes, fsync count and wall seconds. */
function tally(text) {
  const out = {};
  const kind = (path) => (path.includes('metadata') ? 'metadata' : path.endsWith('-wal') ? 'wal' : path.endsWith('.sqlite') ? 'db' : 'other');
  const at = (k) => (out[k] ??= { writes: 0, bytes: 0, fsyncs: 0, fsyncSeconds: 0 });
  for (const line of text.split('\n')) {
    let m = line.match(/pwrite64\(\d+<([^>]+)>, .*\) = (\d+) <([\d.]+)>/);
    if (m) {
      const t = at(kind(m[1]));
      t.writes += 1;
      t.bytes += Number(m[2]);
      continue;
    }
    m = line.match(/fsync\(\d+<([^>]+)>\) = 0 <([\d.]+)>/);
    if (m) {
      const t = at(kind(m[1]));
      t.fsyncs += 1;
      t.fsyncSeconds += Number(m[2]);
    }
  }
  return out;
}

const stateRoot = mkdtempSync(join(STATE === 'tmpfs' ? '/dev/shm' : os.tmpdir(), 'queen-edge-io-'));
const load0 = os.loadavg()[0];
const brokers = [];
try {
  for (const build of BUILDS) {
    const w = await startWorker({ persistTo: join(stateRoot, build.name), vars: build.vars, runtime: 'workerd', extraArgs: ['--build-dir', build.dir] });
    brokers.push({ name: build.name, port: Number(new URL(w.url).port), pid: workerdUnder(w.pid), stop: w.stop });
  }
  if (NAIVE) brokers.push(await startNaive(join(stateRoot, 'naive'), request, 'naive'));
  for (const b of brokers) await push(b, 'warm', BATCH, 1);
  for (const b of brokers) {
    const log = join(stateRoot, `${b.name}.strace`);
    const strace = spawn('strace', ['-f', '-y', '-T', '-s', '0', '-e', 'trace=pwrite64,fsync', '-p', String(b.pid), '-o', log], { stdio: 'ignore' });
    const exited = new Promise((r) => strace.on('exit', r));
    await new Promise((r) => setTimeout(r, 500)); // strace attaches
    const r = await push(b, 'q', BATCH, SECONDS);
    strace.kill('SIGINT');
    await exited;
    const requests = r.messages / BATCH;
    const t = tally(readFileSync(log, 'utf8'));
    const per = (k, f) => (t[k]?.[f] ?? 0) / requests;
    const fsyncs = Object.values(t).reduce((s, x) => s + x.fsyncs, 0);
    const fsyncSeconds = Object.values(t).reduce((s, x) => s + x.fsyncSeconds, 0);
    console.log(`${b.name}: ${requests} requests of ${BATCH} x ${PAYLOAD} B (${r.msgsPerSec.toFixed(0)} msg/s, ${r.cpuUsPerMsg.toFixed(1)} us/msg under strace); `
      + `per request: WAL ${per('wal', 'writes').toFixed(1)} writes ${(per('wal', 'bytes') / 1024).toFixed(1)} KiB, `
      + `database ${per('db', 'writes').toFixed(1)} writes ${(per('db', 'bytes') / 1024).toFixed(1)} KiB, `
      + `fsync ${(fsyncs / requests).toFixed(2)} (mean ${fsyncs ? (fsyncSeconds / fsyncs * 1000).toFixed(2) : '-'} ms wall each)`);
  }
} finally {
  for (const b of brokers) await b.stop();
  request.close();
  rmSync(stateRoot, { recursive: true, force: true });
}
console.log(`\nstate on ${STATE}; load average ${load0.toFixed(1)} at the start, ${os.loadavg()[0].toFixed(1)} at the end`);

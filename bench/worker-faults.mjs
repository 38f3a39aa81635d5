// Where a push run's memory grows: the page faults of workerd per pushed message and, for each mapping that
// reads like a wasm memory, its growth per message and the faults taken in it, beside the segment cache's own
// count (`/api/v1/status` `storage.cache`), for queen-edge's Worker builds and the naive Durable Object queue.
// The load of bench/worker-perf.mjs (8 connections, 10 partitions; a warm-up of push then pop+ack for --warm
// seconds; then push for --seconds), state on tmpfs. A page touched for the first time costs a fault (the
// kernel clears it): wasm memory is never given back, so a run whose broker keeps growing its heap (the
// segment cache filling up to its budget) pays a fault per 4 KB it adds, and a run on memory that grew
// before pays none. Counts, not times: they do not move with the machine's load. Prints only; not part of
// scripts/test. Needs root for `perf`.
//
//   node bench/worker-faults.mjs --build NAME=DIR [--build NAME=DIR]... [--var NAME:VAR=VALUE]... [--no-naive]
//                                [--batch 10] [--payload 64] [--seconds 4] [--warm 3] [--pregrow S]
//
// `--pregrow S`: before the measured push, S seconds of batch-100 pushes to a queue that is then deleted (its
// cached segments are freed, the memory they grew stays), so the measured push reuses grown memory: its
// faults and CPU against a run without show what the growth costs.
//
// A mapping "reads like a wasm memory" when it is read-write and directly followed by an inaccessible
// reservation of 3 GB or more (V8's wasm memories, and some of V8's own heap reservations: the naive queue,
// which has no wasm, shows the latter). `perf record -e page-faults -d` gives each fault's address, so each
// such mapping's faults are counted, not guessed.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { startWorker, workerdUnder } from '../worker/test/harness.mjs';
import { buildsFromArgs, loadDriver, requester, whilePerfRecords } from './load.mjs';
import { startNaive } from './naive-do/start.mjs';

const argv = process.argv.slice(2);
const opt = (name, fallback) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : fallback);
const BUILDS = buildsFromArgs(argv);
const NAIVE = !argv.includes('--no-naive');
const BATCH = Number(opt('--batch', 10));
const PAYLOAD = Number(opt('--payload', 64));
const SECONDS = Number(opt('--seconds', 4));
const WARM = Number(opt('--warm', 3));
const PREGROW = Number(opt('--pregrow', 0));

const request = requester(8);
const { push, popAck } = loadDriver({ request, connections: 8, partitions: 10, payloadBytes: PAYLOAD });

/** The mappings of `pid` that read like wasm memories: `{ start, end }` (BigInt) of the accessible part. */
function wasmLike(pid) {
  const maps = readFileSync(`/proc/${pid}/maps`, 'utf8').trim().split('\n').map((line) => {
    const [range, perm] = line.split(' ');
    const [s, e] = range.split('-').map((x) => BigInt(`0x${x}`));
    return { s, e, perm };
  });
  const out = [];
  for (let i = 1; i < maps.length; i++) {
    const [prev, m] = [maps[i - 1], maps[i]];
    if (m.perm === '---p' && m.e - m.s >= 3n << 30n && prev.e === m.s && prev.perm.startsWith('rw')) {
      out.push({ start: prev.s, end: prev.e });
    }
  }
  return out;
}

async function cache(b) {
  const res = await request(b.port, 'GET', '/api/v1/status');
  return res.status === 200 ? JSON.parse(res.body).storage?.cache ?? null : null;
}

/** Runs `fn` while `perf` records every page fault of `pid` with its address; resolves to `[result, addresses]`. */
async function faultsDuring(pid, dir, fn) {
  const data = join(dir, `${pid}.data`);
  const result = await whilePerfRecords(pid, ['-e', 'page-faults', '-c', '1', '-d'], data, fn);
  const text = execFileSync('perf', ['script', '-F', 'addr', '-i', data], { maxBuffer: 1 << 30, stdio: ['ignore', 'pipe', 'ignore'] }).toString();
  return [result, text.split('\n').filter(Boolean).map((a) => BigInt(`0x${a.trim()}`))];
}

const stateRoot = mkdtempSync(join('/dev/shm', 'queen-edge-faults-'));
const perfDir = mkdtempSync(join(os.tmpdir(), 'queen-edge-faults-'));
const load0 = os.loadavg()[0];
try {
  const brokers = [];
  for (const build of BUILDS) {
    const w = await startWorker({ persistTo: join(stateRoot, build.name), vars: build.vars, runtime: 'workerd', extraArgs: ['--build-dir', build.dir] });
    brokers.push({ name: build.name, port: Number(new URL(w.url).port), pid: workerdUnder(w.pid), stop: w.stop });
  }
  if (NAIVE) brokers.push(await startNaive(join(stateRoot, 'naive'), request, 'naive'));
  try {
    for (const b of brokers) {
      const p = await push(b, 'warm', BATCH, WARM);
      await popAck(b, 'warm', BATCH, p.messages, WARM);
      if (PREGROW > 0 && b.name !== 'naive') {
        await push(b, 'pregrow', 100, PREGROW);
        const del = await request(b.port, 'DELETE', '/api/v1/resources/queues/pregrow');
        if (del.status >= 300) throw new Error(`${b.name} delete ${del.status}: ${del.body.slice(0, 200)}`);
      }
      const c0 = await cache(b);
      const before = wasmLike(b.pid);
      const [r, addresses] = await faultsDuring(b.pid, perfDir, () => push(b, 'q', BATCH, SECONDS));
      const after = wasmLike(b.pid);
      const c1 = await cache(b);
      const n = r.messages;
      const per = (x) => (Number(x) / n).toFixed(3);
      const memories = after.map((m) => {
        const was = before.find((x) => x.start === m.start);
        const grew = m.end - m.start - (was ? was.end - was.start : 0n);
        const faults = addresses.filter((a) => a >= m.start && a < m.end).length;
        return `0x${m.start.toString(16)}: +${per(grew)} B/msg (${(m.end - m.start) >> 10n} kB), ${per(faults)} faults/msg`;
      });
      console.log(`${b.name} push batch ${BATCH} ${PAYLOAD} B${PREGROW > 0 && b.name !== 'naive' ? ` (pregrown ${PREGROW} s)` : ''}: `
        + `${n} msgs, ${r.cpuUsPerMsg.toFixed(1)} us/msg; page faults ${per(addresses.length)}/msg`
        + (c1 ? `; cache weight +${per(c1.bytes - c0.bytes)} B/msg (${c1.bytes} B, ${c1.segments} segments, budget ${c1.budgetBytes})` : ''));
      for (const m of memories) console.log(`  wasm-like mapping ${m}`);
    }
  } finally {
    for (const b of brokers) await b.stop();
  }
} finally {
  request.close();
  rmSync(stateRoot, { recursive: true, force: true });
  rmSync(perfDir, { recursive: true, force: true });
}
console.log(`load average ${load0.toFixed(1)} at the start, ${os.loadavg()[0].toFixed(1)} at the end`);

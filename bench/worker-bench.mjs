// The load generator behind scripts/bench-worker (read that script's header first). Starts queen-edge on bare
// workerd through scripts/serve and the naive Durable Object queue (bench/naive-do/naive.js) on the same
// workerd binary, then for each payload size and batch size, interleaving the two brokers: push for a fixed
// time, then pop+ack the messages that push stored. Writes a markdown section to --out and prints progress.
//
//   node bench/worker-bench.mjs [--quick] [--out FILE]
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { ROOT, startWorker, workerdUnder } from '../worker/test/harness.mjs';
import { cpuNs, requester } from './load.mjs';
import { startNaive } from './naive-do/start.mjs';

const argv = process.argv.slice(2);
const QUICK = argv.includes('--quick');
const OUT = argv.includes('--out') ? argv[argv.indexOf('--out') + 1] : null;
const SECONDS = Number(process.env.QE_BENCH_SECONDS || (QUICK ? 1.5 : 4));
const CONNECTIONS = 8;
const PARTITIONS = 10;
const BATCHES = [1, 10, 100];
const PAYLOADS = [64, 1024];
// Where the Durable Objects' SQLite files live: the disk (the temp dir) and, when present, tmpfs (/dev/shm),
// which takes the disk's fsync out and leaves the brokers' own cost. QE_BENCH_STORAGE=disk or tmpfs for one.
const STORAGE = (process.env.QE_BENCH_STORAGE || 'disk,tmpfs').split(',')
  .filter((s) => s === 'disk' || (s === 'tmpfs' && existsSync('/dev/shm')));

// ---------------------------------------------------------------- HTTP client (keep-alive, one socket per worker)
const request = requester(CONNECTIONS);

// ---------------------------------------------------------------- CPU of a process (all threads, ns)
// ---------------------------------------------------------------- the two brokers
async function startQueenEdge(stateDir) {
  const w = await startWorker({ persistTo: stateDir, runtime: 'workerd' });
  return { name: 'queen-edge', port: Number(new URL(w.url).port), pid: workerdUnder(w.pid), stop: w.stop };
}

/** The broker's storage counters (`GET /api/v1/status`): rows written, and Durable Object commits (queen-edge
 * only; the naive queue commits once per request). */
async function storageCounters(b) {
  const r = await request(b.port, 'GET', '/api/v1/status');
  return JSON.parse(r.body).storage;
}

// ---------------------------------------------------------------- runs
/** A JSON payload whose serialized form is exactly `size` bytes. */
function payload(size, n) {
  const base = JSON.stringify({ n, pad: '' }).length;
  return { n, pad: 'x'.repeat(Math.max(0, size - base)) };
}

const pct = (xs, p) => {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

async function measure(b, fn) {
  const s0 = await storageCounters(b);
  const cpu0 = cpuNs(b.pid);
  const t0 = performance.now();
  const r = await fn();
  const elapsed = (performance.now() - t0) / 1000;
  const cpu = cpuNs(b.pid) - cpu0;
  const s1 = await storageCounters(b);
  const m = Math.max(1, r.messages);
  return {
    ...r, elapsed, msgsPerSec: r.messages / elapsed, cpuUsPerMsg: cpu / 1000 / m,
    rowsPerMsg: (s1.rowsWritten - s0.rowsWritten) / m, cpuShare: cpu / 1e9 / elapsed,
    commitsPer100: s0.commits === undefined ? null : (100 * (s1.commits - s0.commits)) / m,
  };
}

const per100 = (r) => (r.commitsPer100 === null ? '' : `  commits ${r.commitsPer100.toFixed(2)}/100 msg`);

async function pushRun(b, queue, batch, size, seconds = SECONDS) {
  return measure(b, async () => {
    let n = 0;
    let reqNo = 0;
    let messages = 0;
    let failed = 0;
    const lat = [];
    const deadline = performance.now() + seconds * 1000;
    await Promise.all(Array.from({ length: CONNECTIONS }, async () => {
      while (performance.now() < deadline) {
        const partition = `p${reqNo++ % PARTITIONS}`;
        const items = [];
        for (let k = 0; k < batch; k++) {
          const i = n++;
          items.push({ queue, partition, transactionId: `${queue}-${i}`, payload: payload(size, i) });
        }
        const t = performance.now();
        const res = await request(b.port, 'POST', '/api/v1/push', JSON.stringify({ items }));
        lat.push(performance.now() - t);
        if (res.status === 201) messages += batch;
        else if (failed++ < 3) console.error(`[bench] ${b.name} push ${res.status}: ${res.body.slice(0, 200)}`);
      }
    }));
    return { messages, failed, p50: pct(lat, 50), p99: pct(lat, 99) };
  });
}

async function popAckRun(b, queue, batch, available, seconds = SECONDS) {
  return measure(b, async () => {
    let messages = 0;
    let empty = 0;
    let failed = 0;
    const lat = [];
    const deadline = performance.now() + seconds * 1000;
    await Promise.all(Array.from({ length: CONNECTIONS }, async () => {
      while (performance.now() < deadline && messages < available) {
        let t = performance.now();
        const pop = await request(b.port, 'GET', `/api/v1/pop/queue/${queue}?batch=${batch}&wait=false`);
        lat.push(performance.now() - t);
        if (pop.status === 204) {
          empty++;
          await new Promise((r) => setTimeout(r, 1));
          continue;
        }
        if (pop.status !== 200) {
          if (failed++ < 3) console.error(`[bench] ${b.name} pop ${pop.status}: ${pop.body.slice(0, 200)}`);
          continue;
        }
        const acknowledgments = JSON.parse(pop.body).messages.map((m) => ({
          transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'completed',
        }));
        t = performance.now();
        const ack = await request(b.port, 'POST', '/api/v1/ack/batch', JSON.stringify({ acknowledgments }));
        lat.push(performance.now() - t);
        if (ack.status !== 200) {
          if (failed++ < 3) console.error(`[bench] ${b.name} ack ${ack.status}: ${ack.body.slice(0, 200)}`);
          continue;
        }
        messages += JSON.parse(ack.body).filter((r) => r.success).length;
      }
    }));
    return { messages, failed, empty, drained: messages >= available, p50: pct(lat, 50), p99: pct(lat, 99) };
  });
}

/** Before the rows: `WARMUP_SECONDS` of push then pop+ack per batch size on a queue of its own, not counted,
 * so that the rows measure a warmed-up process (V8's JIT and its background compilation of the wasm, which
 * otherwise lands on the first rows, SQLite's cache). */
const WARMUP_SECONDS = Number(process.env.QE_BENCH_WARMUP_SECONDS || 1);
async function warmUp(b) {
  for (const batch of BATCHES) {
    const push = await pushRun(b, `warmup-${batch}`, batch, 64, WARMUP_SECONDS);
    await popAckRun(b, `warmup-${batch}`, batch, push.messages, WARMUP_SECONDS);
  }
}

// ---------------------------------------------------------------- main
const fsOf = (dir) => {
  try {
    const line = execFileSync('df', ['-T', dir], { encoding: 'utf8' }).trim().split('\n').pop().split(/\s+/);
    return `${line[1]} (${line[6]})`;
  } catch { return 'unknown'; }
};
const load0 = os.loadavg();
const runs = [];
const names = ['queen-edge', 'naive DO queue'];
for (const storage of STORAGE) {
  const stateRoot = mkdtempSync(join(storage === 'tmpfs' ? '/dev/shm' : os.tmpdir(), 'queen-edge-bench-'));
  const run = { storage, fs: fsOf(stateRoot), results: [] };
  runs.push(run);
  const brokers = [];
  try {
    brokers.push(await startQueenEdge(join(stateRoot, 'queen-edge')));
    brokers.push(await startNaive(join(stateRoot, 'naive'), request));
    for (const b of brokers) await warmUp(b);
    for (const size of PAYLOADS) {
      for (const batch of BATCHES) {
        const cell = { size, batch };
        const tag = (b) => `[bench] ${storage.padEnd(5)} ${b.name.padEnd(14)} ${String(size).padStart(4)} B batch ${String(batch).padStart(3)}`;
        for (const b of brokers) {
          const queue = `q${size}-${batch}`;
          const push = await pushRun(b, queue, batch, size);
          console.log(`${tag(b)} push    ${push.msgsPerSec.toFixed(0).padStart(6)} msg/s  cpu ${push.cpuUsPerMsg.toFixed(1)} us/msg`
            + `  rows ${push.rowsPerMsg.toFixed(3)}/msg${per100(push)}  p50 ${push.p50?.toFixed(1)} ms  p99 ${push.p99?.toFixed(1)} ms`
            + `${push.failed ? `  failed ${push.failed}` : ''}`);
          cell[b.name] = { push, queue };
        }
        for (const b of brokers) {
          const { queue, push } = cell[b.name];
          const pa = await popAckRun(b, queue, batch, push.messages);
          console.log(`${tag(b)} pop+ack ${pa.msgsPerSec.toFixed(0).padStart(6)} msg/s  cpu ${pa.cpuUsPerMsg.toFixed(1)} us/msg`
            + `  rows ${pa.rowsPerMsg.toFixed(3)}/msg${per100(pa)}  p50 ${pa.p50?.toFixed(1)} ms  p99 ${pa.p99?.toFixed(1)} ms`
            + `  (${pa.messages} of ${push.messages}${pa.drained ? ', drained' : ''}, ${pa.empty} empty pops)${pa.failed ? `  failed ${pa.failed}` : ''}`);
          cell[b.name].popack = pa;
        }
        run.results.push(cell);
      }
    }
  } finally {
    for (const b of brokers) await b.stop();
    rmSync(stateRoot, { recursive: true, force: true });
  }
}
request.close();
const load1 = os.loadavg();

// ---------------------------------------------------------------- markdown
const k = (v) => (v >= 10_000 ? `${(v / 1000).toFixed(1)}k` : v >= 1000 ? `${(v / 1000).toFixed(2)}k` : v.toFixed(0));
const f1 = (v) => (v >= 100 ? v.toFixed(0) : v.toFixed(1));
const f3 = (v) => (v >= 1 ? v.toFixed(2) : v.toFixed(3));
const ratio = (a, b) => (b > 0 ? `${(a / b).toFixed(2)}x` : 'n/a');
const workerdVersion = JSON.parse(readFileSync(join(ROOT, 'node_modules/@cloudflare/workerd-linux-64/package.json'), 'utf8')).version;
const cpu = os.cpus()[0]?.model?.trim() ?? 'unknown CPU';
const machine = `${os.cpus().length} cores, ${cpu}, ${Math.round(os.totalmem() / 2 ** 30)} GiB; ${os.type()} ${os.release()}; `
  + `node ${process.version}; workerd ${workerdVersion}`;
const md = [];
md.push('<!-- worker:begin -->');
md.push('## Worker on bare workerd, against a naive Durable Object queue');
md.push('');
md.push(`Written by \`scripts/bench-worker${QUICK ? ' --quick' : ''}\` (${SECONDS} s per push measurement), `
  + `measured ${new Date().toISOString().slice(0, 16)}Z. Machine: ${machine}.`);
md.push('');
md.push('- **queen-edge**: the built Worker (`worker/build`) and its `Broker` Durable Object on bare workerd, started by '
  + '`scripts/serve` (no wrangler, no dev proxy), with the settings `scripts/serve` picks for a self-hosted user: '
  + '`COMMIT_SHARING` `auto`, each object sharing commits when that answers more requests (README, "Self-hosted on '
  + 'workerd").');
md.push('- **naive DO queue**: `bench/naive-do/naive.js`, a hand-written JavaScript Durable Object (one SQLite row '
  + 'per message, an index on `(queue, id)`, pop = one `UPDATE ... RETURNING` lease, ack = one `DELETE` per '
  + 'message; no dedup, no consumer groups, no retries), behind the same kind of entry Worker, on the same workerd '
  + 'binary (its own process and config).');
md.push(`- Load: node \`http\` with keep-alive, ${CONNECTIONS} connections, on the same machine. Push: each request `
  + `sends \`batch\` messages to one of ${PARTITIONS} partitions (round robin) of a fresh queue, for ${SECONDS} s. `
  + 'Pop+ack: each connection pops `batch` queue-wide (`wait=false`, no consumer group) and acks what it got in '
  + `one \`/api/v1/ack/batch\`, until the messages the push row stored are all acked or ${SECONDS} s pass; an `
  + 'empty pop (every partition leased by the other connections) waits 1 ms. Payload: a JSON object serialized '
  + 'to exactly 64 or 1,024 bytes. Before the rows, each broker warms up (not counted): '
  + `${WARMUP_SECONDS} s of push then of pop+ack per batch size on a queue of its own, so that no row carries `
  + "the process's start (V8 compiles the hot wasm functions in the background during the first seconds).");
md.push('- **CPU us/msg**: CPU time of the whole workerd process (all threads: HTTP, entry Worker, object, SQLite) '
  + 'during the row, from `/proc/PID/task/*/schedstat`, divided by messages. The load generator is not in it.');
md.push('- **commits/100 msg**: queen-edge\'s Durable Object commits per 100 messages (`storage.commits` of '
  + '`GET /api/v1/status`); at one commit per request it is 100 / batch for push and twice that for pop+ack (a pop '
  + 'and an ack), less when requests share commits. The naive queue commits once per request.');
md.push('- **rows/msg**: rows written per message. queen-edge: the engine\'s `storage.rowsWritten` '
  + '(`GET /api/v1/status`; one row per key put or deleted in `queen_kv`, a `WITHOUT ROWID` table, or in '
  + '`queen_seg`, the rowid table of segments since session 10; neither has a secondary index, so one b-tree '
  + 'entry each). Naive: `cursor.rowsWritten` (what workerd reports for each '
  + 'statement, the figure Durable Objects bill) summed over its statements; its push counts 2 per message, the '
  + 'row and its `(queue, id)` index entry.');
md.push('- **State**: each broker\'s SQLite files in a fresh temporary directory, once on the disk and once on '
  + 'tmpfs (`/dev/shm`). On the disk, workerd\'s SQLite reaches the disk at each commit, and on this machine that '
  + 'dominates small batches; tmpfs shows what the brokers themselves cost.');
md.push(`- Load average (1 min) ${load0[0].toFixed(1)} at the start and ${load1[0].toFixed(1)} at the end of the run, `
  + 'on 2 cores: other work shared the machine, so repeated runs differ; the two brokers of a row ran back to '
  + 'back, which keeps their ratio fairer than the absolute figures.');
md.push('');
for (const run of runs) {
  md.push(`### State on ${run.storage === 'tmpfs' ? 'tmpfs' : 'disk'}: ${run.fs}`);
  md.push('');
  md.push('| payload | batch | broker | push msg/s | pop+ack msg/s | push CPU us/msg | pop+ack CPU us/msg | push rows/msg | pop+ack rows/msg | commits/100 msg push / pop+ack | push p50 / p99 ms | pop+ack req p50 / p99 ms |');
  md.push('|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const c of run.results) {
    for (const name of names) {
      const { push, popack: pa } = c[name];
      md.push(`| ${c.size} B | ${c.batch} | ${name} | ${k(push.msgsPerSec)} | ${k(pa.msgsPerSec)}${pa.drained ? ' (d)' : ''} | `
        + `${f1(push.cpuUsPerMsg)} | ${f1(pa.cpuUsPerMsg)} | ${f3(push.rowsPerMsg)} | ${f3(pa.rowsPerMsg)} | `
        + `${push.commitsPer100 === null ? '' : `${f3(push.commitsPer100)} / ${f3(pa.commitsPer100)}`} | `
        + `${push.p50.toFixed(1)} / ${push.p99.toFixed(1)} | ${pa.p50?.toFixed(1)} / ${pa.p99?.toFixed(1)} |`);
    }
    const q = c['queen-edge'];
    const n = c['naive DO queue'];
    md.push(`| | | *queen-edge / naive* | *${ratio(q.push.msgsPerSec, n.push.msgsPerSec)}* | *${ratio(q.popack.msgsPerSec, n.popack.msgsPerSec)}* | `
      + `*${ratio(q.push.cpuUsPerMsg, n.push.cpuUsPerMsg)}* | *${ratio(q.popack.cpuUsPerMsg, n.popack.cpuUsPerMsg)}* | | | | | |`);
  }
  md.push('');
}
const empties = runs.flatMap((run) => run.results.flatMap((c) => names
  .filter((nm) => c[nm].popack.empty > 0)
  .map((nm) => `${run.storage} ${nm} ${c.size} B batch ${c.batch}: ${c[nm].popack.empty}`)));
md.push('(d): the pop+ack row acked everything its push row stored before its time was up (its rate is then '
  + `messages / time to drain). Empty pops (every partition leased by other connections): ${empties.length ? empties.join('; ') : 'none'}.`);
md.push('');
md.push('Reference, not measured here: **Queen 0.15 + PostgreSQL 15**, same machine type, 8 clients, 10 partitions, '
  + '64-byte payloads, push then pop+ack with `/ack/batch`: push / pop+ack msg/s 29.0k / 13.4k at batch 100, '
  + '7.4k / 4.0k at batch 10, 915 / 371 at batch 1 (issue 11, `issues show 11`, measured in one sitting with the '
  + 'other rows of that issue\'s table).');
md.push('');
md.push('<!-- worker:end -->');
if (OUT) writeFileSync(OUT, md.join('\n'));
console.log(`\n${md.join('\n')}`);

// The load generator behind scripts/bench-worker (read that script's header first). Starts queen-edge on bare
// workerd through scripts/serve and the naive Durable Object queue (bench/naive-do/naive.js) on the same
// workerd binary, then for each payload size and batch size, in alternating rounds (the brokers' order rotating
// each round, a fresh queue each round): push for a fixed time, then pop+ack the messages that push stored. The
// table gives each row's medians over its rounds and the median of the per-round ratios, so that the load of a
// shared machine falls on both brokers alike. Writes a markdown section to --out and prints progress.
//
//   node bench/worker-bench.mjs [--quick] [--out FILE]
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { ROOT, startWorker, workerdUnder } from '../worker/test/harness.mjs';
import { loadDriver, median, pairedRatio, percentile, requester, roundOrder, touchFreeMemory, withStorage } from './load.mjs';
import { startNaive } from './naive-do/start.mjs';

const argv = process.argv.slice(2);
const QUICK = argv.includes('--quick');
const OUT = argv.includes('--out') ? argv[argv.indexOf('--out') + 1] : null;
// A row's push time per broker, split over ROUNDS rounds of SECONDS / ROUNDS each (pop+ack stops at the same).
const SECONDS = Number(process.env.QE_BENCH_SECONDS || (QUICK ? 1.5 : 4));
const ROUNDS = Number(process.env.QE_BENCH_ROUNDS || 3);
// MiB of free memory touched before each row (bench/load.mjs, touchFreeMemory); 0 measures the VM as it is.
const TOUCH_MB = Number(process.env.QE_BENCH_TOUCH_MB ?? 2048);
if (!Number.isInteger(ROUNDS) || ROUNDS < 1) throw new Error(`QE_BENCH_ROUNDS wants a whole number of at least 1, got ${process.env.QE_BENCH_ROUNDS}`);
const ROUND_SECONDS = SECONDS / ROUNDS;
// Batch 1 moves the fewest messages a round, so a checkpoint or a collection is a large part of one of its rounds
// and its per-round ratios spread widest: its rows take more rounds of the same length (QE_BENCH_BATCH1_ROUNDS,
// three times QE_BENCH_ROUNDS unless set), for a median that one slow round moves less.
const BATCH1_ROUNDS = Number(process.env.QE_BENCH_BATCH1_ROUNDS || ROUNDS * 3);
if (!Number.isInteger(BATCH1_ROUNDS) || BATCH1_ROUNDS < 1) throw new Error(`QE_BENCH_BATCH1_ROUNDS wants a whole number of at least 1, got ${process.env.QE_BENCH_BATCH1_ROUNDS}`);
/** How many rounds a row of `batch` takes. */
const roundsAt = (batch) => (batch === 1 ? BATCH1_ROUNDS : ROUNDS);
const CONNECTIONS = 8;
const PARTITIONS = 10;
const BATCHES = [1, 10, 100];
const PAYLOADS = [64, 1024];
// Where the Durable Objects' SQLite files live: the disk (the temp dir) and, when present, tmpfs (/dev/shm),
// which takes the disk's fsync out and leaves the brokers' own cost. QE_BENCH_STORAGE=disk or tmpfs for one.
const STORAGE = (process.env.QE_BENCH_STORAGE || 'disk,tmpfs').split(',')
  .filter((s) => s === 'disk' || (s === 'tmpfs' && existsSync('/dev/shm')));

const request = requester(CONNECTIONS);
const drivers = new Map(PAYLOADS.map((size) => [size, loadDriver({ request, connections: CONNECTIONS, partitions: PARTITIONS, payloadBytes: size })]));

async function startQueenEdge(stateDir) {
  const w = await startWorker({ persistTo: stateDir, runtime: 'workerd' });
  // What scripts/serve picked for this state directory (it logs the choice and why).
  const sharing = /\[serve\] COMMIT_SHARING=(\S+) \(([^)]*)\)/.exec(w.logs());
  if (!sharing) throw new Error(`scripts/serve did not log its COMMIT_SHARING:\n${w.logs()}`);
  return {
    name: 'queen-edge', port: Number(new URL(w.url).port), pid: workerdUnder(w.pid), stop: w.stop,
    sharing: { value: sharing[1], why: sharing[2] },
  };
}

/** Push for `seconds`, then (`popAckRun`) pop+ack what it stored, with the storage counters of each. */
const pushRun = (b, queue, batch, size, seconds) => withStorage(request, b, () => drivers.get(size).push(b, queue, batch, seconds));
const popAckRun = (b, queue, batch, size, available, seconds) =>
  withStorage(request, b, () => drivers.get(size).popAck(b, queue, batch, available, seconds));

/** Before the rows: `WARMUP_SECONDS` of push then pop+ack per batch size on a queue of its own, not counted,
 * so that the rows measure a warmed-up process (V8's JIT and its background compilation of the wasm, which
 * otherwise lands on the first rows, SQLite's cache). */
const WARMUP_SECONDS = Number(process.env.QE_BENCH_WARMUP_SECONDS || 3);
async function warmUp(b) {
  for (const batch of BATCHES) {
    const push = await pushRun(b, `warmup-${batch}`, batch, 64, WARMUP_SECONDS);
    await popAckRun(b, `warmup-${batch}`, batch, 64, push.messages, WARMUP_SECONDS);
  }
}

/** One row's rounds of one broker and operation, summed up: medians over the rounds of the per-round figures,
 * latency percentiles over all the rounds' requests together, and (pop+ack) in how many rounds it drained. */
function summary(rounds) {
  const med = (key) => median(rounds.map((r) => r[key]));
  const latencies = rounds.flatMap((r) => r.latencies);
  return {
    rounds,
    msgsPerSec: med('msgsPerSec'),
    cpuUsPerMsg: med('cpuUsPerMsg'),
    rowsPerMsg: med('rowsPerMsg'),
    commitsPer100: rounds[0].commitsPer100 === null ? null : med('commitsPer100'),
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    messages: rounds.reduce((n, r) => n + r.messages, 0),
    drainedRounds: rounds.filter((r) => r.drained).length,
    empty: rounds.reduce((n, r) => n + (r.empty ?? 0), 0),
  };
}

const per100 = (r) => (r.commitsPer100 === null ? '' : `  commits ${r.commitsPer100.toFixed(2)}/100 msg`);
const line = (r) => `${r.msgsPerSec.toFixed(0).padStart(6)} msg/s  cpu ${r.cpuUsPerMsg.toFixed(1)} us/msg`
  + `  rows ${r.rowsPerMsg.toFixed(3)}/msg${per100(r)}  p50 ${r.latencies.length ? percentile(r.latencies, 50).toFixed(1) : '-'} ms`
  + `  p99 ${r.latencies.length ? percentile(r.latencies, 99).toFixed(1) : '-'} ms`;

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
    run.sharing = brokers[0].sharing;
    brokers.push(await startNaive(join(stateRoot, 'naive'), request));
    for (const b of brokers) await warmUp(b);
    for (const size of PAYLOADS) {
      for (const batch of BATCHES) {
        const touched = touchFreeMemory(TOUCH_MB);
        if (touched) console.log(`[bench] ${TOUCH_MB} MiB of free memory touched in ${touched.toFixed(1)} s`);
        const cell = { size, batch };
        const rounds = Object.fromEntries(brokers.map((b) => [b.name, { push: [], popack: [] }]));
        const rowRounds = roundsAt(batch);
        const tag = (b, round) => `[bench] ${storage.padEnd(5)} ${String(size).padStart(4)} B batch ${String(batch).padStart(3)} `
          + `round ${round + 1}/${rowRounds} ${b.name.padEnd(14)}`;
        for (let round = 0; round < rowRounds; round++) {
          const order = roundOrder(brokers, round);
          const queue = `q${size}-${batch}-r${round}`;
          const pushed = new Map();
          for (const b of order) {
            const push = await pushRun(b, queue, batch, size, ROUND_SECONDS);
            console.log(`${tag(b, round)} push    ${line(push)}`);
            pushed.set(b.name, push.messages);
            rounds[b.name].push.push(push);
          }
          for (const b of order) {
            const pa = await popAckRun(b, queue, batch, size, pushed.get(b.name), ROUND_SECONDS);
            console.log(`${tag(b, round)} pop+ack ${line(pa)}  (${pa.messages} of ${pushed.get(b.name)}`
              + `${pa.drained ? ', drained' : ''}, ${pa.empty} empty pops)  load ${os.loadavg()[0].toFixed(1)}`);
            rounds[b.name].popack.push(pa);
          }
        }
        for (const b of brokers) cell[b.name] = { push: summary(rounds[b.name].push), popack: summary(rounds[b.name].popack) };
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
/** The ratio cell of one operation and figure: the median of the per-round ratios queen-edge / naive, and in how
 * many rounds queen-edge was ahead (more msg/s, or less CPU). */
const ratioCell = (q, n, key, higherIsBetter) => {
  const r = pairedRatio(q.rounds.map((x) => x[key]), n.rounds.map((x) => x[key]), higherIsBetter);
  return Number.isFinite(r.ratio) ? `*${r.ratio.toFixed(2)}x, ${r.ahead}/${r.rounds}*` : '*n/a*';
};
/** A pop+ack rate's mark: (d) when every round drained what its push stored in time, (d k/R) when k rounds did. */
const drainedMark = (pa) => (pa.drainedRounds === pa.rounds.length ? ' (d)'
  : pa.drainedRounds ? ` (d ${pa.drainedRounds}/${pa.rounds.length})` : '');
const workerdVersion = JSON.parse(readFileSync(join(ROOT, 'node_modules/@cloudflare/workerd-linux-64/package.json'), 'utf8')).version;
const cpu = os.cpus()[0]?.model?.trim() ?? 'unknown CPU';
const machine = `${os.cpus().length} cores, ${cpu}, ${Math.round(os.totalmem() / 2 ** 30)} GiB; ${os.type()} ${os.release()}; `
  + `node ${process.version}; workerd ${workerdVersion}`;
const md = [];
md.push('<!-- worker:begin -->');
md.push('## Worker on bare workerd, against a naive Durable Object queue');
md.push('');
md.push(`Written by \`scripts/bench-worker${QUICK ? ' --quick' : ''}\` (${ROUNDS} rounds of ${+ROUND_SECONDS.toFixed(2)} s per `
  + `push measurement, ${SECONDS} s per row and broker; batch 1: ${BATCH1_ROUNDS} rounds, `
  + `${+(BATCH1_ROUNDS * ROUND_SECONDS).toFixed(2)} s), `
  + `measured ${new Date().toISOString().slice(0, 16)}Z. Machine: ${machine}.`);
md.push('');
md.push('- **queen-edge**: the built Worker (`worker/build`) and its `Broker` Durable Object on bare workerd, started by '
  + '`scripts/serve` (no wrangler, no dev proxy), with the settings `scripts/serve` picks for a self-hosted user: '
  + `\`COMMIT_SHARING\` by the state's file system: ${runs.map((r) => `\`${r.sharing.value}\` on ${r.storage} (${r.sharing.why.replace(/^the state directory is on /, '')})`).join(', ')} `
  + '(README, "Self-hosted on workerd").');
md.push('- **naive DO queue**: `bench/naive-do/naive.js`, a hand-written JavaScript Durable Object (one SQLite row '
  + 'per message, an index on `(queue, id)`, pop = one `UPDATE ... RETURNING` lease, ack = one `DELETE` per '
  + 'message; no dedup, no consumer groups, no retries), behind the same kind of entry Worker, on the same workerd '
  + 'binary (its own process and config).');
md.push(`- Load: node \`http\` with keep-alive, ${CONNECTIONS} connections, on the same machine. Push: each request `
  + `sends \`batch\` messages to one of ${PARTITIONS} partitions (round robin) of a fresh queue, for `
  + `${+ROUND_SECONDS.toFixed(2)} s. Pop+ack: each connection pops \`batch\` queue-wide (\`wait=false\`, no consumer `
  + 'group) and acks what it got in one `/api/v1/ack/batch`, until the messages that round\'s push stored are all '
  + `acked or ${+ROUND_SECONDS.toFixed(2)} s pass; an `
  + 'empty pop (every partition leased by the other connections) waits 1 ms. Payload: a JSON object serialized '
  + 'to exactly 64 or 1,024 bytes. Before the rows, each broker warms up (not counted): '
  + `${WARMUP_SECONDS} s of push then of pop+ack per batch size on a queue of its own, so that no row carries `
  + "the process's start (V8 compiles the hot wasm functions in the background during the first seconds).");
md.push(`- **Rounds**: each row is measured in ${ROUNDS} alternating rounds (\`QE_BENCH_ROUNDS\`), each on a fresh `
  + 'queue: both brokers push in turn, then both pop+ack in the same order, which rotates every round (in one '
  + 'round queen-edge goes first, in the next the naive queue). Each push lasts the row\'s time divided by the '
  + `rounds (${SECONDS} s / ${ROUNDS}), so a run takes about as long as one measurement per row would. The batch-1 `
  + `rows take ${BATCH1_ROUNDS} rounds of that length (\`QE_BENCH_BATCH1_ROUNDS\`): a batch-1 round moves the fewest `
  + 'messages, so a checkpoint or a garbage collection is a large part of it, and its per-round ratios spread the '
  + 'widest (docs/decisions.md, "Batch 1 at parity, in more rounds (session 32)"). msg/s, CPU '
  + 'us/msg, rows/msg and commits/100 msg are the medians of the rounds\' figures; the latency percentiles are '
  + 'taken over all the rounds\' requests together (as many requests as one measurement of the whole time, and a '
  + 'p99 that a median of short rounds would understate). The *queen-edge / naive* row is the median of the '
  + 'ratios of the same round (queen-edge\'s figure over the naive queue\'s, both measured minutes apart at most), '
  + 'then in how many rounds queen-edge was ahead: more msg/s, or less CPU per message.');
md.push('- **CPU us/msg**: CPU time of the whole workerd process (all threads: HTTP, entry Worker, object, SQLite) '
  + 'during each round\'s measurement, from `/proc/PID/task/*/schedstat`, divided by messages. The load generator is not in it.');
md.push('- **commits/100 msg**: queen-edge\'s Durable Object commits per 100 messages (`storage.commits` of '
  + '`GET /api/v1/status`); at one commit per request it is 100 / batch for push and twice that for pop+ack (a pop '
  + 'and an ack), less when requests share commits. The naive queue commits once per request.');
md.push('- **rows/msg**: rows written per message. queen-edge: the engine\'s `storage.rowsWritten` '
  + '(`GET /api/v1/status`; one row per key put or deleted in `queen_kv`, a `WITHOUT ROWID` table, or in '
  + '`queen_seg`, the rowid table of segments since session 10; neither has a secondary index, so one b-tree '
  + 'entry each; a segment of 1 KB or more is one SQLite row more, in `queen_blob`, since session 30, which '
  + 'this count leaves out and Durable Objects bill: at most 0.01 a message more at batch 100). Naive: `cursor.rowsWritten` (what workerd reports for each '
  + 'statement, the figure Durable Objects bill) summed over its statements; its push counts 2 per message, the '
  + 'row and its `(queue, id)` index entry.');
md.push('- **State**: each broker\'s SQLite files in a fresh temporary directory, once on the disk and once on '
  + 'tmpfs (`/dev/shm`). On the disk, workerd\'s SQLite reaches the disk at each commit, and on this machine that '
  + 'dominates small batches; tmpfs shows what the brokers themselves cost.');
md.push(TOUCH_MB > 0
  ? `- **Memory touched before each row**: ${TOUCH_MB} MiB written to a file in /dev/shm and deleted (\`QE_BENCH_TOUCH_MB\`; 0 to `
    + 'skip). This machine is a VM on which the first write to memory the guest has not touched lately is slow, '
    + 'which a database file that grows meets at every checkpoint: queen-edge\'s does (it keeps consumed messages '
    + 'until retention, as Queen does), the naive queue\'s reuses the pages of the rows it deleted. Touched '
    + 'memory measures both as on a server whose memory is in use (docs/decisions.md, "A growing database on a '
    + 'fresh VM").'
  : '- **Memory not touched before the rows** (`QE_BENCH_TOUCH_MB=0`): a growing database meets memory this VM '
    + 'has not touched lately, slow to write the first time (docs/decisions.md, "A growing database on a fresh VM").');
md.push(`- Load average (1 min) ${load0[0].toFixed(1)} at the start and ${load1[0].toFixed(1)} at the end of the run, `
  + 'on 2 cores: other work shared the machine, so repeated runs differ; the brokers of a row alternate round '
  + 'by round, which keeps their ratio fairer than the absolute figures, and the rounds ahead say how steady it was.');
md.push('');
for (const run of runs) {
  md.push(`### State on ${run.storage === 'tmpfs' ? 'tmpfs' : 'disk'}: ${run.fs}`);
  md.push('');
  md.push('| payload | batch | broker | push msg/s | pop+ack msg/s | push CPU us/msg | pop+ack CPU us/msg | push rows/msg | pop+ack rows/msg | commits/100 msg push / pop+ack | push p50 / p99 ms | pop+ack req p50 / p99 ms |');
  md.push('|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const c of run.results) {
    for (const name of names) {
      const { push, popack: pa } = c[name];
      md.push(`| ${c.size} B | ${c.batch} | ${name} | ${k(push.msgsPerSec)} | ${k(pa.msgsPerSec)}${drainedMark(pa)} | `
        + `${f1(push.cpuUsPerMsg)} | ${f1(pa.cpuUsPerMsg)} | ${f3(push.rowsPerMsg)} | ${f3(pa.rowsPerMsg)} | `
        + `${push.commitsPer100 === null ? '' : `${f3(push.commitsPer100)} / ${f3(pa.commitsPer100)}`} | `
        + `${push.p50.toFixed(1)} / ${push.p99.toFixed(1)} | ${pa.p50?.toFixed(1)} / ${pa.p99?.toFixed(1)} |`);
    }
    const q = c['queen-edge'];
    const n = c['naive DO queue'];
    md.push(`| | | *queen-edge / naive* | ${ratioCell(q.push, n.push, 'msgsPerSec', true)} | ${ratioCell(q.popack, n.popack, 'msgsPerSec', true)} | `
      + `${ratioCell(q.push, n.push, 'cpuUsPerMsg', false)} | ${ratioCell(q.popack, n.popack, 'cpuUsPerMsg', false)} | | | | | |`);
  }
  md.push('');
}
const empties = runs.flatMap((run) => run.results.flatMap((c) => names
  .filter((nm) => c[nm].popack.empty > 0)
  .map((nm) => `${run.storage} ${nm} ${c.size} B batch ${c.batch}: ${c[nm].popack.empty}`)));
md.push('(d): in every round, pop+ack acked everything that round\'s push stored before its time was up (its rate '
  + 'is then messages / time to drain); (d k/R): in k of the R rounds. Empty pops (every partition leased by other '
  + `connections), summed over the rounds: ${empties.length ? empties.join('; ') : 'none'}.`);
md.push('');
md.push('Reference, not measured here: **Queen 0.15 + PostgreSQL 15**, same machine type, 8 clients, 10 partitions, '
  + '64-byte payloads, push then pop+ack with `/ack/batch`: push / pop+ack msg/s 29.0k / 13.4k at batch 100, '
  + '7.4k / 4.0k at batch 10, 915 / 371 at batch 1 (issue 11, `issues show 11`, measured in one sitting with the '
  + 'other rows of that issue\'s table).');
md.push('');
md.push('<!-- worker:end -->');
if (OUT) writeFileSync(OUT, md.join('\n'));
console.log(`\n${md.join('\n')}`);

// The pipeline of a Queen consumer that forwards what it reads: pop a batch from queue A, then either one
// transaction {ack each message, push one message per message to queue B} (`tx`: all or nothing, docs/protocol.md
// §3.9 and, across shards, §3.9.1) or an `/ack/batch` and a push (`sep`: two requests, not atomic). Queue A is
// filled first (10 partitions, 64-byte payloads, not timed); 8 connections then move it all, in the order sep,
// tx, sep, tx, each on queues of its own. Prints messages moved per second and workerd CPU per message (all its
// threads, /proc schedstat). With `--shards N` the broker spreads over N Durable Objects, and a transaction whose
// two queues live on different shards runs the two-phase commit. `--perf DIR` records the last `tx` run with
// `perf` (workerd with V8's perf map) into DIR/tx.txt for bench/worker-perf-split.py. Prints only; not part of
// scripts/test.
//
//   node bench/pipeline.mjs [--build DIR] [--shards 1] [--batch 100] [--messages 40000] [--perf DIR]
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { startWorker, workerdUnder } from '../worker/test/harness.mjs';
import { cpuNs, requester, perfScriptWhile } from './load.mjs';

const argv = process.argv.slice(2);
const opt = (name, fallback) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : fallback);
const BUILD = resolve(opt('--build', 'worker/build'));
const SHARDS = opt('--shards', '1');
const BATCH = Number(opt('--batch', 100));
const MESSAGES = Number(opt('--messages', 40000));
const PERF = opt('--perf', null);

const request = requester(8);
const payload = { n: 1, pad: 'x'.repeat(48) };

async function fill(port, queue) {
  for (let i = 0; i < MESSAGES; i += 100) {
    const items = Array.from({ length: Math.min(100, MESSAGES - i) }, (_, k) => ({
      queue, partition: `p${(i / 100) % 10}`, transactionId: `${queue}-${i + k}`, payload,
    }));
    const res = await request(port, 'POST', '/api/v1/push', JSON.stringify({ items }));
    if (res.status !== 201) throw new Error(`fill ${res.status}: ${res.body.slice(0, 200)}`);
  }
}

/** Moves everything in `from` to `to` with `mode` (`tx` or `sep`) from 8 connections. */
async function move(port, pid, mode, from, to) {
  let moved = 0;
  const cpu0 = cpuNs(pid);
  const t0 = performance.now();
  await Promise.all(Array.from({ length: 8 }, async () => {
    while (moved < MESSAGES) {
      const pop = await request(port, 'GET', `/api/v1/pop/queue/${from}?batch=${BATCH}&wait=false`);
      if (pop.status === 204) {
        await new Promise((r) => setTimeout(r, 1));
        continue;
      }
      if (pop.status !== 200) throw new Error(`pop ${pop.status}: ${pop.body.slice(0, 200)}`);
      const messages = JSON.parse(pop.body).messages;
      const items = messages.map((m) => ({ queue: to, partition: 'p0', payload: m.data }));
      const acks = messages.map((m) => ({
        transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'completed',
      }));
      if (mode === 'tx') {
        const operations = [...acks.map((a) => ({ type: 'ack', ...a })), { type: 'push', items }];
        const requiredLeases = [...new Set(messages.map((m) => m.leaseId))];
        const res = await request(port, 'POST', '/api/v1/transaction', JSON.stringify({ operations, requiredLeases }));
        if (res.status !== 200 || !JSON.parse(res.body).success) throw new Error(`transaction ${res.status}: ${res.body.slice(0, 200)}`);
      } else {
        const ack = await request(port, 'POST', '/api/v1/ack/batch', JSON.stringify({ acknowledgments: acks }));
        if (ack.status !== 200) throw new Error(`ack ${ack.status}: ${ack.body.slice(0, 200)}`);
        const push = await request(port, 'POST', '/api/v1/push', JSON.stringify({ items }));
        if (push.status !== 201) throw new Error(`push ${push.status}: ${push.body.slice(0, 200)}`);
      }
      moved += messages.length;
    }
  }));
  const seconds = (performance.now() - t0) / 1000;
  const us = (cpuNs(pid) - cpu0) / 1000 / moved;
  console.log(`${mode.padEnd(3)} SHARDS=${SHARDS} batch ${BATCH}: ${Math.round(moved / seconds)} msg/s moved, ${us.toFixed(1)} workerd CPU us/msg`);
}

const state = mkdtempSync(join('/dev/shm', 'queen-edge-pipeline-'));
const w = await startWorker({
  persistTo: state, vars: { SHARDS }, runtime: 'workerd',
  extraArgs: ['--build-dir', BUILD, ...(PERF ? ['--v8-flag', '--perf-basic-prof'] : [])],
});
try {
  const port = Number(new URL(w.url).port);
  const pid = workerdUnder(w.pid);
  const modes = ['sep', 'tx', 'sep', 'tx'];
  for (const [n, mode] of modes.entries()) {
    await fill(port, `from-${n}`);
    const run = () => move(port, pid, mode, `from-${n}`, `to-${n}`);
    if (PERF && n === modes.length - 1) {
      mkdirSync(PERF, { recursive: true });
      await perfScriptWhile(pid, PERF, 'tx', run);
    } else {
      await run();
    }
  }
} finally {
  await w.stop();
  rmSync(state, { recursive: true, force: true });
  request.close();
}

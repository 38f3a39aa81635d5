// Consumers as Queen's clients run them: long-polling pops (`wait=true`) of up to 100 messages, each answered batch
// acked in one `/ack/batch`, while producers push batches to 10 partitions for --seconds. Each payload carries the
// time it was sent; prints messages delivered per second (until the last one pushed was delivered), workerd CPU
// per message (all its threads, /proc schedstat, until the consumers stopped), pops and empty pops (a long poll
// that timed out: each consumer's last one), messages per pop, and the latency from a push's send to its message's
// delivery (p50, p99). On bare workerd
// (scripts/serve), state on tmpfs. Prints only; not part of scripts/test.
//
//   node bench/consume.mjs [--build DIR] [--consumers 8] [--producers 2] [--batch 10] [--seconds 6] [--shards 1]
import { mkdtempSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { startWorker, workerdUnder } from '../worker/test/harness.mjs';
import { cpuNs, requester } from './load.mjs';

const argv = process.argv.slice(2);
const opt = (name, fallback) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : fallback);
const BUILD = resolve(opt('--build', 'worker/build'));
const CONSUMERS = Number(opt('--consumers', 8));
const PRODUCERS = Number(opt('--producers', 2));
const BATCH = Number(opt('--batch', 10));
const SECONDS = Number(opt('--seconds', 6));
const SHARDS = opt('--shards', '1');
const QUEUE = 'consumed';
/** How long the consumers may take to drain what was pushed once the producers stop. */
const DRAIN_MS = 10_000;

const request = requester(CONSUMERS + PRODUCERS);
const wallClock = () => performance.timeOrigin + performance.now();
const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))];

const state = mkdtempSync(join('/dev/shm', 'queen-edge-consume-'));
const w = await startWorker({ persistTo: state, vars: { SHARDS }, runtime: 'workerd', extraArgs: ['--build-dir', BUILD] });
try {
  const port = Number(new URL(w.url).port);
  const pid = workerdUnder(w.pid);
  let producing = true;
  let pushed = 0;
  let delivered = 0;
  let pops = 0;
  let empty = 0;
  // When the last message pushed was delivered (the consumers' last long polls, which time out, do not count).
  let doneAt = null;
  const latencies = [];
  const cpu0 = cpuNs(pid);
  const t0 = performance.now();
  const producers = Array.from({ length: PRODUCERS }, async (_, p) => {
    const until = t0 + SECONDS * 1000;
    for (let n = 0; performance.now() < until; n++) {
      const items = Array.from({ length: BATCH }, () => ({ queue: QUEUE, partition: `p${(p + n) % 10}`, payload: { sent: wallClock() } }));
      const res = await request(port, 'POST', '/api/v1/push', JSON.stringify({ items }));
      if (res.status !== 201) throw new Error(`push ${res.status}: ${res.body.slice(0, 200)}`);
      pushed += BATCH;
    }
  });
  const consumers = Array.from({ length: CONSUMERS }, async () => {
    while (producing || delivered < pushed) {
      const pop = await request(port, 'GET', `/api/v1/pop/queue/${QUEUE}?batch=100&wait=true&timeout=1000`);
      pops++;
      if (pop.status === 204) {
        empty++;
        continue;
      }
      if (pop.status !== 200) throw new Error(`pop ${pop.status}: ${pop.body.slice(0, 200)}`);
      const now = wallClock();
      const messages = JSON.parse(pop.body).messages;
      for (const m of messages) latencies.push(now - m.data.sent);
      const acknowledgments = messages.map((m) => ({
        transactionId: m.transactionId, partitionId: m.partitionId, leaseId: m.leaseId, status: 'completed',
      }));
      const ack = await request(port, 'POST', '/api/v1/ack/batch', JSON.stringify({ acknowledgments }));
      if (ack.status !== 200) throw new Error(`ack ${ack.status}: ${ack.body.slice(0, 200)}`);
      delivered += messages.length;
      if (!producing && delivered >= pushed) doneAt ??= performance.now();
    }
  });
  await Promise.all(producers);
  producing = false;
  if (delivered >= pushed) doneAt ??= performance.now();
  const drained = await Promise.race([
    Promise.all(consumers).then(() => true),
    new Promise((r) => setTimeout(() => r(false), DRAIN_MS)),
  ]);
  const seconds = ((doneAt ?? performance.now()) - t0) / 1000;
  const cpuUs = (cpuNs(pid) - cpu0) / 1000;
  latencies.sort((a, b) => a - b);
  console.log(`SHARDS=${SHARDS}, ${PRODUCERS} producers pushing ${BATCH} at a time, ${CONSUMERS} long-polling consumers: `
    + `${delivered} of ${pushed} delivered${drained ? '' : ' (not drained in time)'} in ${seconds.toFixed(1)} s, `
    + `${Math.round(delivered / seconds)} msg/s, ${(cpuUs / Math.max(1, delivered)).toFixed(1)} workerd CPU us/msg; `
    + `${pops} pops (${empty} empty), ${(delivered / Math.max(1, pops - empty)).toFixed(1)} messages a pop; `
    + `latency push -> delivery p50 ${percentile(latencies, 50)?.toFixed(1)} ms, p99 ${percentile(latencies, 99)?.toFixed(1)} ms`);
} finally {
  await w.stop();
  rmSync(state, { recursive: true, force: true });
  request.close();
}

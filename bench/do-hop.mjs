// What the hop from the entry Worker to the Durable Object costs in its shapes (bench/do-hop/hop.js: the
// client's Request forwarded as it is, a fresh request with its parts, an RPC call, requests grouped into one
// hop, and no hop at all), with no broker behind it:
// one JavaScript object on the workerd binary the project pins, 8 keep-alive connections, each request a push
// body of --batch messages of 64 B (as bench/load.mjs sends) answered with 330 bytes per message (about what
// queen-edge answers a push). Shapes alternate round by round (order reversed every other round); prints the
// workerd CPU per request of each round, the medians and the rounds where each shape used less than the first.
// Prints only; not part of scripts/test.
//
//   node bench/do-hop.mjs [--shapes forward,fresh,rpc,coalesce,local] [--batch 100] [--rounds 11] [--requests 2000]
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { ROOT } from '../worker/test/harness.mjs';
import { startJsDurableObject } from './js-do.mjs';
import { cpuNs, requester } from './load.mjs';

const argv = process.argv.slice(2);
const opt = (name, fallback) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : fallback);
const SHAPES = opt('--shapes', 'forward,fresh,rpc').split(',');
const BATCH = Number(opt('--batch', 100));
const ROUNDS = Number(opt('--rounds', 11));
const REQUESTS = Number(opt('--requests', 2000));
const CONNECTIONS = 8;
const REPLY_BYTES_PER_MESSAGE = 330;

const request = requester(CONNECTIONS);
const state = mkdtempSync(join('/dev/shm', 'queen-edge-hop-'));
const hop = await startJsDurableObject({
  file: join(ROOT, 'bench', 'do-hop', 'hop.js'),
  className: 'Hop',
  binding: 'HOP',
  stateDir: state,
  ready: async (port) => (await request(port, 'GET', '/ready')).status === 200,
});
const pad = 'x'.repeat(64 - JSON.stringify({ n: 0, pad: '' }).length);
const body = JSON.stringify({
  items: Array.from({ length: BATCH }, (_, i) => ({ queue: 'q', partition: 'p1', transactionId: `q-${i}`, payload: { n: i, pad } })),
});

/** Workerd CPU us per request over `n` requests of `shape`. */
async function cpuPerRequest(shape, n) {
  const path = `/${shape}?reply=${BATCH * REPLY_BYTES_PER_MESSAGE}`;
  const c0 = cpuNs(hop.pid);
  let sent = 0;
  await Promise.all(Array.from({ length: CONNECTIONS }, async () => {
    while (sent < n) {
      sent++;
      const res = await request(hop.port, 'POST', path, body);
      if (res.status !== 201) throw new Error(`${shape}: ${res.status} ${res.body.slice(0, 200)}`);
    }
  }));
  return (cpuNs(hop.pid) - c0) / 1000 / n;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const load0 = os.loadavg()[0];
const results = Object.fromEntries(SHAPES.map((s) => [s, []]));
let groupStats = '';
try {
  for (const shape of SHAPES) await cpuPerRequest(shape, REQUESTS); // warm-up, not counted
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 ? [...SHAPES].reverse() : SHAPES;
    for (const shape of order) results[shape].push(await cpuPerRequest(shape, REQUESTS));
  }
  groupStats = (await request(hop.port, 'GET', '/stats')).body;
} finally {
  request.close();
  await hop.stop();
  rmSync(state, { recursive: true, force: true });
}
const first = results[SHAPES[0]];
console.log(`\nhop shapes, batch ${BATCH} (${body.length} B body, ${BATCH * REPLY_BYTES_PER_MESSAGE} B answer), ${ROUNDS} rounds of ${REQUESTS} requests; load average ${load0.toFixed(1)} at the start, ${os.loadavg()[0].toFixed(1)} at the end`);
console.log(`| shape | workerd CPU us per request, each round | median | rounds below ${SHAPES[0]} |`);
console.log('|---|---|---:|---:|');
for (const shape of SHAPES) {
  const xs = results[shape];
  const below = shape === SHAPES[0] ? '' : `${xs.filter((x, i) => x < first[i]).length} of ${xs.length}`;
  console.log(`| ${shape} | ${xs.map((x) => x.toFixed(0)).join(' ')} | ${median(xs).toFixed(0)} | ${below} |`);
}
if (SHAPES.includes('coalesce')) console.log(`coalesce: ${groupStats}`);

// What big segment rows cost the statements of a pop+ack on workerd's Durable Object SQLite: runs
// bench/do-sql/big-rows.js (one object per layout and segment size, filled with 1000 segments, their index
// entries and 10 lane records) on the workerd binary the project pins, state on tmpfs, and measures the workerd
// CPU per operation: `lane` (the upsert of one lane record, what the commit of a pop or an ack writes) and `read`
// (one segment read by key, a pop's `DoStore::get`), each its own implicit transaction, less the same request
// with no statement. Layouts and ops alternate round by round; prints medians. Prints only; not part of
// scripts/test.
//
//   node bench/do-sql-big-rows.mjs [--rounds 5] [--ops 200] [--sizes 15302,111302] [--layouts kv,split,rowid]
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import { join } from 'node:path';
import { ROOT } from '../worker/test/harness.mjs';
import { startJsDurableObject } from './js-do.mjs';
import { cpuNs, requester } from './load.mjs';

const argv = process.argv.slice(2);
const opt = (name, fallback) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : fallback);
const ROUNDS = Number(opt('--rounds', 5));
const OPS = Number(opt('--ops', 200));
const SIZES = opt('--sizes', '15302,111302').split(',').map(Number);
const LAYOUTS = opt('--layouts', 'kv,split,rowid').split(',');
const request = requester(1);

const state = mkdtempSync(join('/dev/shm', 'queen-edge-big-rows-'));
const obj = await startJsDurableObject({
  file: join(ROOT, 'bench', 'do-sql', 'big-rows.js'),
  className: 'BigRows',
  binding: 'BIG_ROWS',
  stateDir: state,
  ready: async (port) => (await request(port, 'GET', '/run?layout=kv&size=100&op=none&n=1')).status === 200,
});

async function cpuOf(layout, size, op) {
  const c0 = cpuNs(obj.pid);
  const res = await request(obj.port, 'GET', `/run?layout=${layout}&size=${size}&op=${op}&n=${OPS}`);
  if (res.status !== 200) throw new Error(`${layout} ${size} ${op}: ${res.status} ${res.body}`);
  return (cpuNs(obj.pid) - c0) / 1000 / OPS;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const load0 = os.loadavg()[0];
const results = new Map();
try {
  try {
    for (const t of readdirSync(`/proc/${obj.pid}/task`)) execFileSync('renice', ['-n', '-10', '-p', t], { stdio: 'ignore' });
  } catch { /* not root: normal priority */ }
  for (const size of SIZES) for (const layout of LAYOUTS) await cpuOf(layout, size, 'none'); // fills, not counted
  for (let round = 0; round < ROUNDS; round++) {
    for (const size of SIZES) {
      const order = LAYOUTS.map((_, i) => LAYOUTS[(i + round) % LAYOUTS.length]);
      for (const layout of order) {
        const base = await cpuOf(layout, size, 'none');
        for (const op of ['lane', 'read']) {
          const key = `${size}|${layout}|${op}`;
          if (!results.has(key)) results.set(key, []);
          results.get(key).push((await cpuOf(layout, size, op)) - base);
        }
      }
    }
  }
} finally {
  await obj.stop();
  request.close();
  rmSync(state, { recursive: true, force: true });
}
console.log(`median of ${ROUNDS} rounds, ${OPS} operations each, 1000 segments per object, state on tmpfs; load average `
  + `${load0.toFixed(1)} at the start, ${os.loadavg()[0].toFixed(1)} at the end; workerd CPU us per operation`);
console.log(`| segment bytes | layout | lane record upsert | segment read |`);
console.log('|---:|---|---:|---:|');
for (const size of SIZES) {
  for (const layout of LAYOUTS) {
    const cell = (op) => median(results.get(`${size}|${layout}|${op}`)).toFixed(1);
    console.log(`| ${size} | ${layout} | ${cell('lane')} | ${cell('read')} |`);
  }
}

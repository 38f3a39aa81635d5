// Which SQL statement shape commits queen-edge's rows most cheaply on workerd's Durable Object SQLite: runs
// bench/do-sql/shapes.js (one object per shape, each with its own queen_kv table) on the workerd binary the
// project pins, state on tmpfs, and measures the workerd CPU per commit of the rows a queen-edge operation
// writes in steady state (captured from the session 7 build's statements: a 1-message push writes a new
// segment of 149 B and a new index entry of 30 B; a pop and an ack update the lane record, 106 B and 57 B; a
// 10- / 100-message push of 64 B payloads a 1.5 KB / 15 KB segment and a 66 B / 426 B index entry; a
// 100-message push of 1 KB payloads a 111 KB segment and a 426 B index entry). Each request runs --commits
// commits, each followed by `await ctx.storage.sync()` (its own implicit transaction); the same request with
// no statement is subtracted. Shapes and ops alternate round by round; prints the median per commit and the
// rows written per commit (`cursor.rowsWritten`). Prints only; not part of scripts/test.
//
//   node bench/do-sql-shapes.mjs [--rounds 7] [--commits 200] [--ops push1,pop1,ack1,push10,push100,push100k,seg1p10,seg1kp10]
//                                [--shapes view,view-when,upsert,upsert+trigger,upsert+delete,upsert+delete-txn,...] [--no-naive]
//   shapes (bench/do-sql/shapes.js): view, view-when, upsert, upsert+trigger, upsert+delete, upsert+delete-txn,
//   insert, insert-or-replace, upsert-text, upsert-1key, rowid, seg-rowid, seg-rowid-txn, seg-route, seg-direct, seg-route-nodel,
//   none; SHAPE/drain ends each cursor with next().
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { ROOT } from '../worker/test/harness.mjs';
import { startJsDurableObject } from './js-do.mjs';
import { cpuNs, requester } from './load.mjs';

const argv = process.argv.slice(2);
const opt = (name, fallback) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : fallback);
const ROUNDS = Number(opt('--rounds', 7));
const COMMITS = Number(opt('--commits', 200));
const OPS = opt('--ops', 'push1,pop1,ack1,push100k').split(',');
const SHAPES = opt('--shapes', 'view,view-when,upsert,upsert+trigger,upsert+delete,upsert+delete-txn').split(',');
const NAIVE = !argv.includes('--no-naive');
const request = requester(1);

const state = mkdtempSync(join('/dev/shm', 'queen-edge-shapes-'));
const shapesDo = await startJsDurableObject({
  file: join(ROOT, 'bench', 'do-sql', 'shapes.js'),
  className: 'Shapes',
  binding: 'SHAPES',
  stateDir: state,
  ready: async (port) => (await request(port, 'GET', '/run?shape=none&op=none&n=1')).status === 200,
});
const { port } = shapesDo;

async function run(shape, op, n) {
  const res = await request(port, 'GET', `/run?shape=${encodeURIComponent(shape)}&op=${op}&n=${n}`);
  if (res.status !== 200) throw new Error(`${shape} ${op}: ${res.status} ${res.body}`);
  return JSON.parse(res.body);
}

async function cpuOf(shape, op) {
  const c0 = cpuNs(shapesDo.pid);
  const r = await run(shape, op, COMMITS);
  return { us: (cpuNs(shapesDo.pid) - c0) / 1000, rows: r.rowsWritten };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const load0 = os.loadavg()[0];
const results = new Map(); // `${shape}|${op}` -> [us per commit]
const rows = new Map();
try {
  try {
    for (const t of (await import('node:fs')).readdirSync(`/proc/${shapesDo.pid}/task`)) {
      (await import('node:child_process')).execFileSync('renice', ['-n', '-10', '-p', t], { stdio: 'ignore' });
    }
  } catch { console.log('[shapes] could not renice workerd'); }
  const shapes = [...SHAPES, ...(NAIVE ? ['naive'] : [])];
  for (const s of shapes) for (const op of OPS) await run(s, op, 50); // warm-up: statements cached, tables grown
  for (let round = 0; round < ROUNDS; round++) {
    for (const op of OPS) {
      const order = shapes.map((_, i) => shapes[(i + round) % shapes.length]);
      const base = await cpuOf('none', 'none');
      for (const s of order) {
        if (s === 'naive' && !['push1', 'pop1', 'ack1', 'seg1p10', 'seg1kp10'].includes(op)) continue;
        const r = await cpuOf(s, op);
        const key = `${s}|${op}`;
        if (!results.has(key)) results.set(key, []);
        results.get(key).push((r.us - base.us) / COMMITS);
        rows.set(key, r.rows / COMMITS);
      }
    }
    console.log(`[shapes] round ${round + 1} of ${ROUNDS} (load ${os.loadavg()[0].toFixed(1)})`);
  }
  console.log(`\nworkerd CPU per commit, us (median of ${ROUNDS} rounds of ${COMMITS} commits, each then storage.sync(), `
    + `minus the same with no statement); rows written per commit in brackets; state on tmpfs; `
    + `load average ${load0.toFixed(1)} at the start, ${os.loadavg()[0].toFixed(1)} at the end`);
  console.log(`| shape | ${OPS.join(' | ')} |`);
  console.log(`|---|${OPS.map(() => '---:').join('|')}|`);
  for (const s of shapes) {
    const cells = OPS.map((op) => {
      const xs = results.get(`${s}|${op}`);
      return xs ? `${median(xs).toFixed(1)} (${rows.get(`${s}|${op}`)})` : '-';
    });
    console.log(`| ${s} | ${cells.join(' | ')} |`);
  }
} finally {
  await shapesDo.stop();
  request.close();
  rmSync(state, { recursive: true, force: true });
}

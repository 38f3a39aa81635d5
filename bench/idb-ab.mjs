// Paired A/B of browser module builds against each other and the naive IndexedDB queue, in ONE headless
// Chromium page: every build is imported from its own URL (its own module instance and wasm), so all of them
// and the naive queue run in the same minutes, round after round, in rotating order.
//
//   node bench/idb-ab.mjs --build a=DIR --build b=DIR [--rounds 8] [--batches 1,10,100] [--calls 200] [--floor]
//
// DIR is a staged module (what scripts/build-js puts in js/dist or www/vendor/queen-edge: queen-edge.js and
// queen_edge_bg.wasm). Each round, at each batch size, opens a fresh database for every build and for the
// naive queue (tests/js/bench.mjs's, the same code) and runs `--calls` sequential pushes of `batch` messages
// through the fluent API, then as many pops of `batch` + acks, durability strict, the sides' calls
// interleaved one by one (in an order shuffled for each call), so the machine's load drifts hit every
// side alike; each side's calls are timed alone. Printed: per batch
// and build, the median messages/s of push and pop+ack over the rounds, each build over the naive queue of the
// same round (median of the per-round ratios), and each build after the first against the first: the median
// of its per-round ratios and the rounds it won. Load averages before and after. Printed only: a measuring
// tool, never a pass/fail criterion.
//
// --floor adds a side that makes the module's IndexedDB commits with no module at all (no wasm, no JS
// wrapper, no answers): a push is one `readwrite` transaction over `records` (durability strict; no request
// of the writer fence since schema 3, src/store/idb.rs "Fencing") with one put of a segment-sized
// `Uint8Array` (SEGMENT_BYTES a message), then `commit()`; a pop+ack is two such commits, each with a
// lane-sized record instead of the segment. (The module's pushes
// also put an index page now and then.) What the module adds to a call is its time minus the floor's.

import { loadavg } from 'node:os';
import { readFile } from 'node:fs/promises';
import { extname, resolve } from 'node:path';
import { launch, openPage, uniqueName } from '../tests/js/harness.mjs';

const args = process.argv.slice(2);
const values = (flag) => args.flatMap((a, i) => (a === flag ? [args[i + 1]] : []));
const builds = values('--build').map((spec) => {
  const eq = spec.indexOf('=');
  if (eq < 1) throw new Error(`--build NAME=DIR, got ${spec}`);
  return { name: spec.slice(0, eq), dir: resolve(spec.slice(eq + 1)) };
});
if (builds.length === 0) {
  console.error('usage: node bench/idb-ab.mjs --build a=DIR [--build b=DIR ...] [--rounds R] [--batches 1,10,100] [--calls N] [--floor]');
  process.exit(2);
}
const rounds = Number(values('--rounds')[0] ?? 8);
const batches = (values('--batches')[0] ?? '1,10,100').split(',').map(Number);
const calls = Number(values('--calls')[0] ?? 200);
const floor = args.includes('--floor');
// The floor's record sizes, bytes: what a message of these payloads adds to the module's segment, and the
// module's lane record (counted in the page: docs/decisions.md, "The browser's batch-100 calls against their
// IndexedDB floor (session 15) — idb-b100").
const SEGMENT_BYTES = 240;
const LANE_BYTES = 100;
const load = () => loadavg().map((x) => x.toFixed(1)).join(' ');
const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const TYPES = { '.js': 'text/javascript', '.wasm': 'application/wasm', '.map': 'application/json' };

const env = await launch();
const loadStart = load();
const started = new Date().toISOString().slice(11, 19);
let result;
try {
  const context = await env.browser.newContext();
  // /ab/<name>/<file> serves <file> of that build's directory.
  await context.route('**/ab/**', async (route) => {
    const path = new URL(route.request().url()).pathname.split('/');
    const build = builds.find((b) => b.name === path[2]);
    try {
      const body = await readFile(resolve(build.dir, path.slice(3).join('/')));
      await route.fulfill({ status: 200, body, headers: { 'content-type': TYPES[extname(path.at(-1))] || 'application/octet-stream', 'cache-control': 'no-store' } });
    } catch {
      await route.fulfill({ status: 404, body: 'not found' });
    }
  });
  const page = await openPage(context, env.url, 'idb-ab');
  result = await page.evaluate(async ({ names, rounds, batches, calls, prefix, floor, segmentBytes, laneBytes }) => {
    const modules = {};
    for (const name of names) modules[name] = await import(`/ab/${name}/queen-edge.js`);
    const text = 'x'.repeat(100);
    const now = () => performance.now();
    let seq = 0;

    // A side: open() a fresh database, then push(batch), popAck(batch) one call at a time, close().
    function queenEdge(QE) {
      let queen, dbName;
      return {
        async open() {
          dbName = `${prefix}-${seq++}`;
          queen = await QE.Queen.open({ name: dbName });
        },
        async push(batch, i) {
          await queen.queue('bench').push(Array.from({ length: batch }, (_, k) => ({ data: { i: i * batch + k, text } })));
        },
        async popAck(batch) {
          const msgs = await queen.queue('bench').batch(batch).wait(false).pop();
          if (msgs.length === 0) throw new Error('nothing popped');
          const ack = await queen.ack(msgs, true);
          if (!ack.success) throw new Error('ack failed: ' + ack.error);
        },
        async close() {
          await queen.close();
          await QE.Queen.deleteDatabase(dbName);
        }
      };
    }

    // tests/js/bench.mjs's naive queue.
    function naive() {
      let db, name;
      const tx = (mode, fn) => new Promise((res, rej) => {
        const t = db.transaction('messages', mode, { durability: 'strict' });
        const result = fn(t.objectStore('messages'));
        t.oncomplete = () => res(result);
        t.onabort = () => rej(t.error);
      });
      return {
        async open() {
          name = `${prefix}-naive-${seq++}`;
          db = await new Promise((res, rej) => {
            const r = indexedDB.open(name, 1);
            r.onupgradeneeded = () => r.result.createObjectStore('messages', { autoIncrement: true });
            r.onsuccess = () => res(r.result);
            r.onerror = () => rej(r.error);
          });
        },
        async push(batch, i) {
          await tx('readwrite', (s) => { for (let k = 0; k < batch; k++) s.add({ i: i * batch + k, text }); });
        },
        async popAck(batch) {
          const keys = [];
          await tx('readonly', (s) => new Promise((resolve) => {
            const req = s.openCursor();
            req.onsuccess = () => {
              const c = req.result;
              if (c && keys.length < batch) {
                keys.push([c.key, c.value]);
                c.continue();
              } else resolve();
            };
          }));
          if (keys.length === 0) throw new Error('naive: nothing popped');
          await tx('readwrite', (s) => { for (const [key] of keys) s.delete(key); });
        },
        async close() {
          db.close();
          await new Promise((res) => { const r = indexedDB.deleteDatabase(name); r.onsuccess = res; r.onerror = res; });
        }
      };
    }

    // The module's commits without the module (--floor, above).
    function floorSide() {
      let db, name;
      const commit = (key, bytes) => new Promise((res, rej) => {
        const t = db.transaction('records', 'readwrite', { durability: 'strict' });
        t.objectStore('records').put(new Uint8Array(bytes), key);
        t.commit();
        t.oncomplete = res;
        t.onabort = () => rej(t.error);
      });
      let lane;
      return {
        async open() {
          name = `${prefix}-floor-${seq++}`;
          db = await new Promise((res, rej) => {
            const r = indexedDB.open(name, 1);
            r.onupgradeneeded = () => {
              r.result.createObjectStore('records');
              r.result.createObjectStore('meta');
            };
            r.onsuccess = () => res(r.result);
            r.onerror = () => rej(r.error);
          });
          lane = new Uint8Array(laneBytes).fill(120);
        },
        async push(batch, i) {
          await commit('seg/' + String(i).padStart(10, '0'), new Uint8Array(batch * segmentBytes).fill(120));
        },
        async popAck() {
          await commit('lane', lane);
          await commit('lane', lane);
        },
        async close() {
          db.close();
          await new Promise((res) => { const r = indexedDB.deleteDatabase(name); r.onsuccess = res; r.onerror = res; });
        }
      };
    }

    const sides = [...names, ...(floor ? ['floor'] : []), 'naive'];
    const make = (side) => (side === 'naive' ? naive() : side === 'floor' ? floorSide() : queenEdge(modules[side]));
    // One round at one batch size: every side on a fresh database, their calls interleaved one by one, so
    // drifts of the machine's load hit every side alike. The sides' order is shuffled for every call: with
    // an order that only rotated, each side always ran right after the same other side, and what a call
    // leaves behind (IndexedDB's own work after a commit, garbage) slowed the side after it (docs/decisions.md,
    // "idb-push", has the A/A/A runs that showed it). Milliseconds spent in each side's calls.
    async function round(batch) {
      const open = sides.map(make);
      for (const s of open) await s.open();
      const ms = sides.map(() => ({ push: 0, popAck: 0 }));
      const order = sides.map((_, k) => k);
      for (const what of ['push', 'popAck']) {
        for (let i = 0; i < calls; i++) {
          for (let j = order.length - 1; j > 0; j--) {
            const r = Math.floor(Math.random() * (j + 1));
            [order[j], order[r]] = [order[r], order[j]];
          }
          for (const k of order) {
            const t0 = now();
            await open[k][what](batch, i);
            ms[k][what] += now() - t0;
          }
        }
      }
      for (const s of open) await s.close();
      return ms.map((m) => ({ push: calls * batch / (m.push / 1000), popAck: calls * batch / (m.popAck / 1000) }));
    }
    // Warm-up (wasm tier-up, IndexedDB first use), not measured.
    await round(10);
    const out = {};
    for (let r = 0; r < rounds; r++) {
      for (const batch of batches) {
        const got = await round(batch);
        sides.forEach((side, k) => ((out[batch] ||= {})[side] ||= []).push(got[k]));
      }
    }
    return out;
  }, { names: builds.map((b) => b.name), rounds, batches, calls, prefix: uniqueName('ab'), floor, segmentBytes: SEGMENT_BYTES, laneBytes: LANE_BYTES });
  await context.close();
} finally {
  await env.close();
}

console.log(`idb-ab ${started}Z: ${rounds} rounds, ${calls} calls per batch size and side, load average at start ${loadStart}, at end ${load()}`);
for (const b of builds) console.log(`  ${b.name} = ${b.dir}`);
for (const batch of batches) {
  const r = result[batch];
  console.log(`batch ${batch}: messages/s, median of ${rounds} rounds (vs the naive queue: median of per-round ratios)`);
  for (const what of ['push', 'popAck']) {
    const cells = [...builds.map((b) => b.name), ...(floor ? ['floor'] : []), 'naive'].map((side) => {
      const m = median(r[side].map((x) => x[what]));
      const vs = side === 'naive' ? '' : ` (${median(r[side].map((x, i) => x[what] / r.naive[i][what])).toFixed(2)}x)`;
      return `${side} ${m.toFixed(0)}${vs}`;
    });
    console.log(`  ${what.padEnd(7)} ${cells.join('   ')}`);
  }
  // The time to push and pop+ack the same messages, the naive queue's over each side's.
  const time = (x) => 1 / x.push + 1 / x.popAck;
  const overNaive = [...builds.map((b) => b.name), ...(floor ? ['floor'] : [])]
    .map((side) => `${side} ${median(r[side].map((x, i) => time(r.naive[i]) / time(x))).toFixed(2)}x`);
  console.log(`  combined over the naive queue (median of per-round ratios): ${overNaive.join('   ')}`);
  for (const b of builds.slice(1)) {
    const a = builds[0].name;
    const row = (f) => r[b.name].map((x, i) => f(x) / f(r[a][i]));
    const combined = (x) => 1 / (1 / x.push + 1 / x.popAck);
    const parts = [['push', (x) => x.push], ['pop+ack', (x) => x.popAck], ['combined', combined]].map(([label, f]) => {
      const ratios = row(f);
      return `${label} ${median(ratios).toFixed(3)}x (won ${ratios.filter((x) => x > 1).length}/${ratios.length})`;
    });
    console.log(`  ${b.name} over ${a}: ${parts.join(', ')}`);
  }
}

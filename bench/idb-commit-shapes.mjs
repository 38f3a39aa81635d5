// Raw IndexedDB commits of a batch-1 call's shapes, against the naive queue's push, in ONE headless Chromium
// page: no module, only `transaction()`, the requests and the wait for `complete` (docs/decisions.md, "The
// browser's batch-1 push against the naive queue's (session 17) — idb-b1").
//
//   node bench/idb-commit-shapes.mjs [--rounds 10] [--commits 100] [--only a,b,...]
//
// Each shape has its own fresh database (created once, kept for the run). Every round runs `--commits`
// sequential commits of every shape, the shapes' commits interleaved one by one in an order shuffled for each
// commit (as bench/idb-ab.mjs does), durability strict. Printed per shape: the median over rounds of its
// microseconds a commit, and its median per-round ratio over the naive push's. Load averages before and after.
// A measuring tool: prints only.
import { loadavg } from 'node:os';
import { launch, openPage, uniqueName } from '../tests/js/harness.mjs';

const args = process.argv.slice(2);
const value = (flag, d) => (args.includes(flag) ? args[args.indexOf(flag) + 1] : d);
const rounds = Number(value('--rounds', 10));
const commits = Number(value('--commits', 100));
const only = value('--only', null)?.split(',');
const load = () => loadavg().map((x) => x.toFixed(1)).join(' ');

// A shape: the schema of its database (`naive`: one autoIncrement store `messages`; `ours`: `records` and
// `meta` with the unique index `writer` on `meta`, as src/store/idb.rs; `recidx`: `records` with that index
// on `records` itself) and what one commit does. `SEG` is a 240-byte `Uint8Array` (a batch-1 push's
// segment), `FENCE` the fence record `{writer: 1}`.
const SHAPES = {
  'naive push (add of {i, text}, auto-commit)': 'naive',
  'naive push + commit()': 'naive',
  'ours: fence put + segment put over 2 stores, commit() (today)': 'ours',
  'ours without commit()': 'ours',
  'segment put first, then fence put, commit()': 'ours',
  'segment put alone, scope records+meta, commit()': 'ours',
  'segment put alone, scope records, commit()': 'ours',
  'segment add alone (new key), scope records, commit()': 'ours',
  'fence put alone, scope meta, commit()': 'ours',
  'fence put + segment put, one store (index on records), commit()': 'recidx',
  'fence put non-indexed ({w: 1}) + segment put, 2 stores, commit()': 'ours',
  'fence put carrying a 256 B log ({writer: 1, log: bytes}), scope meta, commit()': 'ours',
  'fence put carrying a 1 KB log, scope meta, commit()': 'ours',
  'fence put carrying a 2 KB log, scope meta, commit()': 'ours',
  'fence put carrying a 4 KB log, scope meta, commit()': 'ours'
};

const env = await launch();
const started = new Date().toISOString().slice(11, 19);
const loadStart = load();
let result;
try {
  const context = await env.browser.newContext();
  const page = await openPage(context, env.url, 'commit-shapes');
  const names = Object.keys(SHAPES).filter((n) => !only || only.some((o) => n.startsWith(o)));
  result = await page.evaluate(async ({ names, schemas, rounds, commits, prefix }) => {
    const now = () => performance.now();
    const text = 'x'.repeat(100);
    const open = (name, schema) => new Promise((res, rej) => {
      const r = indexedDB.open(name, 1);
      r.onupgradeneeded = () => {
        const db = r.result;
        if (schema === 'naive') db.createObjectStore('messages', { autoIncrement: true });
        else if (schema === 'ours') {
          db.createObjectStore('records');
          db.createObjectStore('meta').createIndex('writer', 'writer', { unique: true });
        } else {
          db.createObjectStore('records').createIndex('writer', 'writer', { unique: true });
          db.createObjectStore('meta');
        }
      };
      r.onsuccess = () => res(r.result);
      r.onerror = () => rej(r.error);
    });
    const strict = { durability: 'strict' };
    const seg = () => new Uint8Array(240).fill(120);
    const FENCE = { writer: 1 };
    let seq = 0;
    const key = () => 's/' + String(seq++).padStart(12, '0');
    // Each shape's commit: issue everything, then resolve on `complete`.
    const run = (db, name) => new Promise((res, rej) => {
      let t;
      const s = (n) => t.objectStore(n);
      if (name.startsWith('naive push (')) {
        t = db.transaction('messages', 'readwrite', strict);
        s('messages').add({ i: seq++, text });
      } else if (name.startsWith('naive push + commit')) {
        t = db.transaction('messages', 'readwrite', strict);
        s('messages').add({ i: seq++, text });
        t.commit();
      } else if (name.startsWith('ours: fence')) {
        t = db.transaction(['records', 'meta'], 'readwrite', strict);
        s('meta').put(FENCE, 'writer/1');
        s('records').put(seg(), key());
        t.commit();
      } else if (name.startsWith('ours without')) {
        t = db.transaction(['records', 'meta'], 'readwrite', strict);
        s('meta').put(FENCE, 'writer/1');
        s('records').put(seg(), key());
      } else if (name.startsWith('segment put first')) {
        t = db.transaction(['records', 'meta'], 'readwrite', strict);
        s('records').put(seg(), key());
        s('meta').put(FENCE, 'writer/1');
        t.commit();
      } else if (name.startsWith('segment put alone, scope records+meta')) {
        t = db.transaction(['records', 'meta'], 'readwrite', strict);
        s('records').put(seg(), key());
        t.commit();
      } else if (name.startsWith('segment put alone, scope records,')) {
        t = db.transaction('records', 'readwrite', strict);
        s('records').put(seg(), key());
        t.commit();
      } else if (name.startsWith('segment add alone')) {
        t = db.transaction('records', 'readwrite', strict);
        s('records').add(seg(), key());
        t.commit();
      } else if (name.startsWith('fence put alone')) {
        t = db.transaction('meta', 'readwrite', strict);
        s('meta').put(FENCE, 'writer/1');
        t.commit();
      } else if (name.startsWith('fence put + segment put, one store')) {
        t = db.transaction('records', 'readwrite', strict);
        s('records').put(FENCE, 'writer/1');
        s('records').put(seg(), key());
        t.commit();
      } else if (name.startsWith('fence put non-indexed')) {
        t = db.transaction(['records', 'meta'], 'readwrite', strict);
        s('meta').put({ w: 1 }, 'writer/1');
        s('records').put(seg(), key());
        t.commit();
      } else if (name.startsWith('fence put carrying')) {
        const bytes = { '256 B': 256, '1 KB': 1024, '2 KB': 2048, '4 KB': 4096 }[name.match(/carrying a (\d+ K?B)/)[1]];
        t = db.transaction('meta', 'readwrite', strict);
        s('meta').put({ writer: 1, log: new Uint8Array(bytes).fill(seq++ & 255) }, 'writer/1');
        t.commit();
      } else throw new Error('unknown shape ' + name);
      t.oncomplete = res;
      t.onabort = () => rej(t.error);
    });
    const dbs = [];
    for (let i = 0; i < names.length; i++) dbs.push(await open(`${prefix}-${i}`, schemas[i]));
    // Warm-up, not measured.
    for (let k = 0; k < 20; k++) for (let i = 0; i < names.length; i++) await run(dbs[i], names[i]);
    const out = names.map(() => []);
    const order = names.map((_, i) => i);
    for (let r = 0; r < rounds; r++) {
      const ms = names.map(() => 0);
      for (let k = 0; k < commits; k++) {
        for (let j = order.length - 1; j > 0; j--) {
          const x = Math.floor(Math.random() * (j + 1));
          [order[j], order[x]] = [order[x], order[j]];
        }
        for (const i of order) {
          const t0 = now();
          await run(dbs[i], names[i]);
          ms[i] += now() - t0;
        }
      }
      ms.forEach((m, i) => out[i].push((1000 * m) / commits));
    }
    for (let i = 0; i < names.length; i++) {
      dbs[i].close();
      indexedDB.deleteDatabase(`${prefix}-${i}`);
    }
    return out;
  }, { names, schemas: names.map((n) => SHAPES[n]), rounds, commits, prefix: uniqueName('shapes') });
  const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log(`idb-commit-shapes ${started}Z: ${rounds} rounds of ${commits} commits a shape, interleaved; load at start ${loadStart}, at end ${load()}`);
  console.log('  us a commit (median over rounds), and over the naive push (median of per-round ratios, time)');
  const base = names.indexOf(names.find((n) => n.startsWith('naive push (')));
  names.forEach((n, i) => {
    const vs = base < 0 ? '' : `  ${median(result[i].map((x, r) => x / result[base][r])).toFixed(2)}x`;
    console.log(`  ${n.padEnd(68)} ${median(result[i]).toFixed(0).padStart(6)}${vs}`);
  });
} finally {
  await env.close();
}

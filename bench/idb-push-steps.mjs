// Where one sequential batch-N push's time goes in the browser (docs/decisions.md, "The browser's batch-100
// push, session 13"): headless Chromium, durability strict, a cross-origin-isolated page (5 us timers), the
// module of each --build DIR (a staged module: queen-edge.js and queen_edge_bg.wasm) imported from its own URL.
//
//   node bench/idb-push-steps.mjs --build a=DIR [--build b=DIR] [--batch 100] [--calls 200] [--light] [--cpu [--pop] [--naive]]
//
// Marks, each the first of its kind within a push: the fluent call starts; `JSON.stringify` of the request
// is entered and returns; the broker's `handle` is called; `IDBDatabase.transaction` is entered and returns;
// each `put` of the commit is entered and returns; `commit()` returns; the first task after it (the page's
// thread idle); the transaction's `complete` event; the answer object's first `Reflect.set`; `handle`'s answer; the answer's `TextDecoder.decode` and
// `JSON.parse` are entered and return; the fluent call resolves. With --light only the marks of `handle`, the
// transaction, `commit()` and `complete` (the other wrappers and the idle probe cost the page tens of us). Printed per build: the median microseconds
// between consecutive marks and the total (the builds' pushes interleaved one by one). With --cpu, instead a
// CDP CPU profile of the pushes of each build (self time by category, then the top functions by self and
// wasm functions by inclusive time, us a push; a profile inflates native and boundary calls: read proportions);
// with --cpu --pop, of pop+ack calls instead (`pop` of `batch` then `ack` of what it returned; the pushes that fill the queue
// run before the profile starts); with --cpu --naive, also of tests/js/bench.mjs's naive queue's pushes (or pops + acks) in
// the same page after the builds'.
// A measuring tool: prints only.
import { loadavg } from 'node:os';
import { readFile } from 'node:fs/promises';
import { extname, resolve } from 'node:path';
import { launch, openPage, uniqueName } from '../tests/js/harness.mjs';

const args = process.argv.slice(2);
const values = (flag) => args.flatMap((a, i) => (a === flag ? [args[i + 1]] : []));
const builds = values('--build').map((spec) => {
  const eq = spec.indexOf('=');
  return { name: spec.slice(0, eq), dir: resolve(spec.slice(eq + 1)) };
});
const batch = Number(values('--batch')[0] ?? 100);
const calls = Number(values('--calls')[0] ?? 200);
const cpu = args.includes('--cpu');
const light = args.includes('--light');
const pop = args.includes('--pop');
const naive = args.includes('--naive');
const load = () => loadavg().map((x) => x.toFixed(1)).join(' ');
const TYPES = { '.js': 'text/javascript', '.wasm': 'application/wasm', '.map': 'application/json' };

const env = await launch();
console.log(`${new Date().toISOString().slice(11, 19)}Z load ${load()}; batch ${batch}, ${calls} pushes a build`);
try {
  const context = await env.browser.newContext();
  await context.route('**/*', async (route) => {
    const url = new URL(route.request().url());
    const isolation = { 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp', 'cross-origin-resource-policy': 'cross-origin' };
    if (url.pathname.startsWith('/ab/')) {
      const path = url.pathname.split('/');
      const build = builds.find((b) => b.name === path[2]);
      const body = await readFile(resolve(build.dir, path.slice(3).join('/')));
      return route.fulfill({ status: 200, body, headers: { 'content-type': TYPES[extname(path.at(-1))] || 'application/octet-stream', 'cache-control': 'no-store', ...isolation } });
    }
    const response = await route.fetch();
    await route.fulfill({ response, headers: { ...response.headers(), ...isolation } });
  });
  const page = await openPage(context, env.url, 'push-steps');
  await page.evaluate(async ({ names, light, cpu }) => {
    window.mods = {};
    for (const name of names) window.mods[name] = await import(`/ab/${name}/queen-edge.js`);
    window.marks = null;
    const mark = (k) => { const c = window.marks; if (c && !(k in c)) c[k] = performance.now(); };
    window.mark = mark;
    // A profile gets no marks: their wrappers would show in it.
    if (cpu) return;
    const tx = IDBDatabase.prototype.transaction;
    IDBDatabase.prototype.transaction = function (...a) {
      const rw = a[1] === 'readwrite';
      if (rw) mark('tx0');
      const t = tx.apply(this, a);
      if (rw) {
        mark('tx1');
        const c = window.marks;
        t.addEventListener('complete', () => { if (window.marks === c) mark('complete'); });
      }
      return t;
    };
    const commit = IDBTransaction.prototype.commit;
    IDBTransaction.prototype.commit = function () {
      const r = commit.call(this);
      mark('commit');
      if (!light) {
        const c = window.marks;
        const ch = new MessageChannel();
        ch.port1.onmessage = () => { if (window.marks === c) mark('idle'); };
        ch.port2.postMessage(0);
      }
      return r;
    };
    if (light) return;
    const put = IDBObjectStore.prototype.put;
    IDBObjectStore.prototype.put = function (...a) {
      const c = window.marks;
      const n = c ? (c.puts = (c.puts || 0) + 1) : 0;
      mark('put' + n + '0');
      const r = put.apply(this, a);
      mark('put' + n + '1');
      return r;
    };
    const stringify = JSON.stringify;
    JSON.stringify = function (...a) { mark('stringify0'); const r = stringify.apply(this, a); mark('stringify1'); return r; };
    const parse = JSON.parse;
    JSON.parse = function (...a) { if (a[0] && a[0].length > 200) mark('parse0'); const r = parse.apply(this, a); if (a[0] && a[0].length > 200) mark('parse1'); return r; };
    // The answer's JS object: its first `Reflect.set` after the commit's `complete` (the glue looks
    // `Reflect.set` up at each call).
    const reflectSet = Reflect.set;
    Reflect.set = function (...a) { const c = window.marks; if (c && 'complete' in c) mark('object0'); return reflectSet.apply(this, a); };
    const decode = TextDecoder.prototype.decode;
    TextDecoder.prototype.decode = function (...a) { const big = a[0] && a[0].length > 200; if (big) mark('decode0'); const r = decode.apply(this, a); if (big) mark('decode1'); return r; };
  }, { names: builds.map((b) => b.name), light, cpu });

  const result = await page.evaluate(async ({ names, batch, calls, prefix, cpu }) => {
    const text = 'x'.repeat(100);
    const sides = [];
    for (const name of names) {
      const dbName = `${prefix}-${name}`;
      const queen = await window.mods[name].Queen.open({ name: dbName });
      const broker = queen.transport.broker;
      const handle = broker.handle.bind(broker);
      broker.handle = (...a) => { window.mark('handle'); return handle(...a).then((r) => { window.mark('handled'); return r; }); };
      sides.push({ name, dbName, queen, runs: [] });
    }
    const items = (i) => Array.from({ length: batch }, (_, k) => ({ data: { i: i * batch + k, text } }));
    for (let i = 0; i < 30; i++) for (const s of sides) await s.queen.queue('bench').push(items(i));
    if (cpu) return { sides: sides.map((s) => s.name) };
    for (let i = 0; i < calls; i++) {
      for (let j = 0; j < sides.length; j++) {
        const s = sides[(i + j) % sides.length];
        const body = items(i);
        window.marks = { t0: performance.now() };
        await s.queen.queue('bench').push(body);
        window.marks.end = performance.now();
        s.runs.push(window.marks);
        window.marks = null;
      }
    }
    const med = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    const out = {};
    for (const s of sides) {
      const keys = ['t0', 'stringify0', 'stringify1', 'handle', 'tx0', 'tx1'];
      const maxPuts = Math.max(...s.runs.map((r) => r.puts || 0));
      for (let n = 1; n <= Math.min(maxPuts, 2); n++) keys.push('put' + n + '0', 'put' + n + '1');
      keys.push('commit', 'idle', 'complete', 'object0', 'handled', 'decode0', 'decode1', 'parse0', 'parse1', 'end');
      const steps = {};
      for (let j = 1; j < keys.length; j++) {
        const xs = s.runs.filter((x) => keys[j] in x && keys[j - 1] in x).map((x) => x[keys[j]] - x[keys[j - 1]]);
        if (xs.length) steps[`${keys[j - 1]} -> ${keys[j]}`] = [Math.round(1000 * med(xs)), xs.length];
      }
      steps.total = [Math.round(1000 * med(s.runs.map((x) => x.end - x.t0))), s.runs.length];
      steps['puts a push'] = [s.runs.reduce((a, r) => a + (r.puts || 0), 0) / s.runs.length, s.runs.length];
      out[s.name] = steps;
    }
    for (const s of sides) await s.queen.close();
    return { crossOriginIsolated, out };
  }, { names: builds.map((b) => b.name), batch, calls, prefix: uniqueName('steps'), cpu });

  if (!cpu) {
    console.log(`crossOriginIsolated ${result.crossOriginIsolated}; median us between marks [pushes with both marks]`);
    const names = builds.map((b) => b.name);
    const rows = Object.keys(result.out[names[0]]);
    console.log('step'.padEnd(28) + names.map((n) => n.padStart(14)).join(''));
    for (const r of rows) console.log(r.padEnd(28) + names.map((n) => String(result.out[n][r]?.[0] ?? '-').padStart(14)).join(''));
  } else {
    const cdp = await context.newCDPSession(page);
    await cdp.send('Profiler.enable');
    await cdp.send('Profiler.setSamplingInterval', { interval: 50 });
    for (const { name } of [...builds, ...(naive ? [{ name: 'naive' }] : [])]) {
      // With --pop, the pushes run first, off the profile, and the pops + acks of the same messages are profiled.
      const run = (phase) => page.evaluate(async ({ name, batch, calls, phase }) => {
        const text = 'x'.repeat(100);
        const q = (window.qs ||= {})[name] ||= name === 'naive' ? await naiveQueue() : await window.mods[name].Queen.open({ name: 'cpu-' + name + Math.random() });
        // tests/js/bench.mjs's naive queue behind the calls of the fluent API used below.
        async function naiveQueue() {
          const db = await new Promise((res, rej) => {
            const r = indexedDB.open('cpu-naive' + Math.random(), 1);
            r.onupgradeneeded = () => r.result.createObjectStore('messages', { autoIncrement: true });
            r.onsuccess = () => res(r.result);
            r.onerror = () => rej(r.error);
          });
          const tx = (mode, fn) => new Promise((res, rej) => {
            const t = db.transaction('messages', mode, { durability: 'strict' });
            const result = fn(t.objectStore('messages'));
            t.oncomplete = () => res(result);
            t.onabort = () => rej(t.error);
          });
          const queue = {
            push: (items) => tx('readwrite', (s) => { for (const item of items) s.add(item.data); }),
            batch: (n) => ({ wait: () => ({ pop: async () => {
              const keys = [];
              await tx('readonly', (s) => new Promise((resolve) => {
                const req = s.openCursor();
                req.onsuccess = () => {
                  const c = req.result;
                  if (c && keys.length < n) { keys.push([c.key, c.value]); c.continue(); } else resolve();
                };
              }));
              return keys;
            } }) })
          };
          return { queue: () => queue, ack: (keys) => tx('readwrite', (s) => { for (const [key] of keys) s.delete(key); }) };
        }
        const t0 = performance.now();
        for (let i = 0; i < calls; i++) {
          if (phase === 'push') await q.queue('bench').push(Array.from({ length: batch }, (_, k) => ({ data: { i: i * batch + k, text } })));
          else await q.ack(await q.queue('bench').batch(batch).wait(false).pop(), true);
        }
        return performance.now() - t0;
      }, { name, batch, calls, phase });
      if (pop) await run('push');
      await cdp.send('Profiler.start');
      const wall = await run(pop ? 'pop' : 'push');
      const { profile } = await cdp.send('Profiler.stop');
      const what = pop ? 'pop+ack' : 'push';
      summarize(`${name}: ${calls} ${what} calls of ${batch}, ${(wall * 1000 / calls).toFixed(0)} us a ${what}`, profile, calls);
    }
  }
} finally {
  await env.close();
}
console.log(`load at end ${load()}`);

function summarize(title, profile, count) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map();
  for (let i = 0; i < profile.samples.length; i++) {
    const node = byId.get(profile.samples[i]);
    self.set(node, (self.get(node) || 0) + (profile.timeDeltas[i + 1] ?? 0));
  }
  const isWasm = (f) => f.url.endsWith('.wasm') || f.url.includes('wasm://') || /^\$?[a-z_]+::/.test(f.functionName) || /wasm-function/.test(f.functionName);
  const categories = new Map();
  const functions = new Map();
  for (const [node, us] of self) {
    const f = node.callFrame;
    let category;
    if (f.functionName === '(idle)') category = 'idle';
    else if (f.functionName === '(program)') category = 'browser (program)';
    else if (f.functionName === '(garbage collector)') category = 'garbage collector';
    else if (isWasm(f)) category = 'wasm';
    else if (f.url.includes('queen-edge.js')) category = 'JS module (wrapper + glue)';
    else if (f.url === '') category = 'native';
    else category = 'other JS';
    categories.set(category, (categories.get(category) || 0) + us);
    const key = `${(f.functionName || '(anonymous)').replace(/::h[0-9a-f]{16}$/, '')} [${category === 'wasm' ? 'wasm' : f.url ? 'js:' + f.lineNumber : 'native'}]`;
    functions.set(key, (functions.get(key) || 0) + us);
  }
  console.log(`\n${title} (CPU profile, self time, us a call; load ${load()})`);
  for (const [c, us] of [...categories].sort((a, b) => b[1] - a[1])) console.log(`    ${c.padEnd(42)} ${(us / count).toFixed(0).padStart(7)}`);
  console.log('  functions by self time:');
  for (const [f, us] of [...functions].sort((a, b) => b[1] - a[1]).slice(0, 40)) console.log(`    ${f.slice(0, 110).padEnd(110)} ${(us / count).toFixed(1).padStart(7)}`);
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children || []) parent.set(c, n.id);
  const inclusive = new Map();
  for (const [node, us] of self) {
    const seen = new Set();
    for (let id = node.id; id !== undefined; id = parent.get(id)) {
      const f = byId.get(id).callFrame;
      const key = (f.functionName || '(anonymous)').replace(/::h[0-9a-f]{16}$/, '') + (isWasm(f) ? '' : ' [js]');
      if (seen.has(key)) continue;
      seen.add(key);
      inclusive.set(key, (inclusive.get(key) || 0) + us);
    }
  }
  console.log('  functions by inclusive time:');
  for (const [f, us] of [...inclusive].sort((a, b) => b[1] - a[1]).slice(0, 60)) console.log(`    ${f.slice(0, 110).padEnd(110)} ${(us / count).toFixed(1).padStart(7)}`);
  // Top-down: each node's subtree time, children of the same name merged, shown from the wasm's entry down.
  const total = new Map();
  const subtree = (node) => {
    if (total.has(node.id)) return total.get(node.id);
    let t = self.get(node) || 0;
    for (const c of node.children || []) t += subtree(byId.get(c));
    total.set(node.id, t);
    return t;
  };
  const label = (n) => (n.callFrame.functionName || '(anonymous)').replace(/::h[0-9a-f]{16}$/, '').replace(/^queen_edge::/, '');
  const print = (nodes, depth) => {
    const merged = new Map();
    for (const n of nodes) {
      const k = label(n);
      const m = merged.get(k) || { t: 0, children: [] };
      m.t += subtree(n);
      m.children.push(...(n.children || []).map((c) => byId.get(c)));
      merged.set(k, m);
    }
    for (const [k, m] of [...merged].sort((a, b) => b[1].t - a[1].t)) {
      if (m.t / count < 4) continue;
      console.log(`    ${'  '.repeat(depth)}${k.slice(0, 100)} ${(m.t / count).toFixed(0)}`);
      if (depth < 14) print(m.children, depth + 1);
    }
  };
  for (const root of values('--root').concat(['http::handle::{{closure}}'])) {
    console.log(`  top-down from ${root} (us a call):`);
    print(profile.nodes.filter((n) => label(n) === root), 0);
  }
}

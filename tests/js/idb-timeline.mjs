// Where one sequential batch-1 push's time goes, ours beside the naive IndexedDB queue's (docs/decisions.md,
// "The browser's batch-1 path, session 12"): headless Chromium, durability strict, the module staged in
// www/vendor/queen-edge, a cross-origin-isolated page (5 us timers).
//
//   node tests/js/idb-timeline.mjs [N]     N pushes of each, interleaved one by one (default 400)
//
// Marks, each the first of its kind within a push: the fluent call starts (t0); the broker's `handle` is
// called; `queueMicrotask` is called and its callback runs (the wasm task queue); the wasm's `Date.now`
// calls; `IDBDatabase.transaction` is entered (tx0) and returns (tx1); the first request is entered (req0)
// and returns (reqN); `commit()` returns; the task ends (a microtask queued at the commit); the
// transaction's `complete` event; the next wasm task run; `handle`'s answer; the fluent call resolves.
// Printed: the median microseconds between consecutive marks, and the total. A measuring tool: prints only.
import { launch, openPage, uniqueName } from './harness.mjs'
import { loadavg } from 'node:os'
const N = Number(process.argv[2] || 400)
const env = await launch()
try {
  const context = await env.browser.newContext()
  await context.route('**/*', async (route) => {
    const response = await route.fetch()
    await route.fulfill({ response, headers: { ...response.headers(), 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp', 'cross-origin-resource-policy': 'cross-origin' } })
  })
  const page = await openPage(context, env.url, 'timeline')
  const out = await page.evaluate(async ({ name, N }) => {
    let cur = null
    const mark = (k) => { if (cur && !(k in cur)) cur[k] = performance.now() }
    const tx = IDBDatabase.prototype.transaction
    IDBDatabase.prototype.transaction = function (...a) {
      mark('tx0')
      const t = tx.apply(this, a)
      mark('tx1')
      t.addEventListener('complete', () => mark('complete'))
      return t
    }
    const commit = IDBTransaction.prototype.commit
    IDBTransaction.prototype.commit = function () { const r = commit.call(this); mark('commit'); queueMicrotask(() => mark('task end')); return r }
    for (const op of ['put', 'add']) {
      const f = IDBObjectStore.prototype[op]
      IDBObjectStore.prototype[op] = function (...a) { mark('req0'); const r = f.apply(this, a); mark('reqN'); return r }
    }
    const dn = Date.now
    let nows = 0
    Date.now = () => { if (cur && 'handle' in cur && !('tx0' in cur)) mark('now' + ++nows); return dn() }
    const qm = globalThis.queueMicrotask
    globalThis.queueMicrotask = (f) => { const c = cur; if (c && !('tx0' in c)) { mark('qm') }; return qm(() => { if (cur === c && c && !('tx0' in c)) mark('run'); else if (cur === c && c && 'complete' in c) mark('run2'); return f() }) }
    const text = 'x'.repeat(100)
    const queen = await window.QE.Queen.open({ name })
    const q = queen.queue('bench')
    const broker = queen.transport.broker
    const handle = broker.handle.bind(broker)
    broker.handle = (...a) => { mark('handle'); return handle(...a).then((r) => { mark('handled'); return r }) }
    const db = await new Promise((res) => { const r = indexedDB.open(name + '-naive', 1); r.onupgradeneeded = () => r.result.createObjectStore('messages', { autoIncrement: true }); r.onsuccess = () => res(r.result) })
    const naive = (i) => new Promise((res, rej) => { const t = db.transaction('messages', 'readwrite', { durability: 'strict' }); t.objectStore('messages').add({ i, text }); t.commit(); t.oncomplete = res; t.onabort = rej })
    for (let i = 0; i < 50; i++) { await q.push([{ data: { i, text } }]); await naive(i) }
    const ours = [], nv = []
    for (let i = 0; i < N; i++) {
      nows = 0; cur = { t0: performance.now() }; await q.push([{ data: { i, text } }]); cur.end = performance.now(); ours.push(cur)
      cur = { t0: performance.now() }; await naive(i); cur.end = performance.now(); nv.push(cur)
    }
    cur = null
    await queen.close(); db.close()
    const med = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)]
    const steps = (runs, keys) => {
      const r = {}
      for (let j = 1; j < keys.length; j++) r[`${keys[j - 1]} -> ${keys[j]}`] = Math.round(1000 * med(runs.filter((x) => keys[j] in x && keys[j - 1] in x).map((x) => x[keys[j]] - x[keys[j - 1]])))
      r.total = Math.round(1000 * med(runs.map((x) => x.end - x.t0)))
      return r
    }
    return {
      crossOriginIsolated,
      ours: steps(ours, ['t0', 'handle', 'qm', 'run', 'now1', 'now2', 'now3', 'tx0', 'tx1', 'req0', 'reqN', 'commit', 'task end', 'complete', 'run2', 'handled', 'end']),
      naive: steps(nv, ['t0', 'tx0', 'tx1', 'req0', 'reqN', 'commit', 'complete', 'end'])
    }
  }, { name: uniqueName('tl'), N })
  console.log(`load ${loadavg().map((x) => x.toFixed(1)).join(' ')}`)
  console.log(JSON.stringify(out, null, 1))
} finally { await env.close() }

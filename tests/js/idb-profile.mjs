// Where a browser call's time goes (docs/decisions.md, "Browser IndexedDB path, session 8"): headless
// Chromium, durability strict, one tab, the module staged in www/vendor/queen-edge (or --vendor DIR).
//
//   node tests/js/idb-profile.mjs               phases, requests per commit, raw IndexedDB, CPU profile
//   node tests/js/idb-profile.mjs --no-cpu      without the CDP CPU profile (--no-raw: without raw IndexedDB)
//   node tests/js/idb-profile.mjs --raw-only    only the raw IndexedDB commits
//   node tests/js/idb-profile.mjs --vendor DIR[,DIR2]   modules to measure (alternating rounds, one page each)
//   node tests/js/idb-profile.mjs --busy        only CPU time (/proc) and wall time per call, alternating rounds
//                                               over the --vendor modules
//   node tests/js/idb-profile.mjs --views       open with `views: true` (a views build with names, for the profile)
//   node tests/js/idb-profile.mjs --requests    only the page-thread cost of each IndexedDB call of a raw commit, and
//                                               the platform's CompressionStream on a segment-shaped text
//
// Phases of a sequential call through the fluent API (batch-1 push, pop and ack; batch-100 push, pop and
// ack): `IDBDatabase.transaction`, the transaction's `complete` and the broker's `handle` are wrapped in the
// page (cross-origin isolated, so timers have 5 us steps), and each call is split into: JS (the wrapper
// before `handle` and after its answer), wasm (from `handle` until its readwrite transaction exists,
// `IDBDatabase.transaction` included), issue (issuing the requests, until the task yields), IndexedDB (from
// then to `complete`) and after (from `complete` to `handle`'s answer). Medians over the calls.
//
// Raw IndexedDB: plain transactions shaped like a commit (puts of given sizes over one or two object
// stores), one at a time, alternating rounds, median commits/s; the cost of a request more or less.
//
// Printed only: a measurement tool, never a pass/fail criterion.

import { loadavg } from 'node:os'
import { cp, mkdtemp, readFile, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { launch, openPage, uniqueName, ROOT } from './harness.mjs'

const args = process.argv.slice(2)
const has = (flag) => args.includes(flag)
const vendorArg = args.includes('--vendor') ? args[args.indexOf('--vendor') + 1] : null
const openOptions = has('--views') ? { views: true } : {}
const load = () => loadavg().map((x) => x.toFixed(1)).join(' ')
const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)]

const live = resolve(ROOT, 'www/vendor/queen-edge')
const vendors = vendorArg ? vendorArg.split(',') : [null]
let saved = null

/** Stages `dir` as www/vendor/queen-edge (the live module is saved first and restored at the end). */
async function stage(dir) {
  if (!dir) return
  if (!saved) {
    saved = await mkdtemp(join(tmpdir(), 'qe-vendor-'))
    await cp(live, saved, { recursive: true })
  }
  await rm(live, { recursive: true, force: true })
  await cp(dir, live, { recursive: true })
}

const env = await launch()
console.log(`load average at start: ${load()}`)
try {
  if (has('--busy')) {
    await busyRounds()
  } else if (has('--requests')) {
    await requestCosts()
  } else if (!has('--raw-only')) {
    for (let round = 0; round < (vendors.length > 1 ? 3 : 1); round++) {
      for (const dir of vendors) {
        await stage(dir)
        await phases(dir || 'www/vendor/queen-edge')
      }
    }
  }
  if (!has('--no-raw') && !has('--busy') && !has('--requests')) await rawIdb()
  if (!has('--no-cpu') && !has('--raw-only') && !has('--busy') && !has('--requests')) {
    for (const dir of vendors) {
      await stage(dir)
      await cpuProfile(dir || 'www/vendor/queen-edge')
    }
  }
} finally {
  await env.close()
  if (saved) {
    await rm(live, { recursive: true, force: true })
    await cp(saved, live, { recursive: true })
    await rm(saved, { recursive: true, force: true })
  }
}
console.log(`load average at end: ${load()}`)

/** Installs the transaction and request wrappers in the page: window.idbTrace collects one entry per
 * readwrite transaction ({created, issued, complete, requests: [[op, store, key, bytes]]}). */
function instrument() {
  window.idbTrace = []
  const tx = IDBDatabase.prototype.transaction
  IDBDatabase.prototype.transaction = function (...a) {
    const t = tx.apply(this, a)
    if (a[1] === 'readwrite') {
      const entry = { created: performance.now(), issued: 0, complete: 0, requests: [] }
      t.__entry = entry
      window.idbTrace.push(entry)
      // The end of the current task: every request of a commit is issued synchronously before it.
      queueMicrotask(() => { entry.issued = performance.now() })
      t.addEventListener('complete', () => { entry.complete = performance.now() })
    }
    return t
  }
  for (const op of ['put', 'add', 'delete']) {
    const f = IDBObjectStore.prototype[op]
    IDBObjectStore.prototype[op] = function (...a) {
      const entry = this.transaction.__entry
      if (entry) {
        const value = op === 'delete' ? null : a[0]
        const bytes = value == null ? 0 : value.byteLength ?? JSON.stringify(value).length
        const key = op === 'delete' ? a[0] : a[1]
        entry.requests.push([op, this.name, typeof key === 'string' ? key.replace(/[0-9a-f]{16}/g, 'N') : 'range', bytes])
      }
      return f.apply(this, a)
    }
  }
}

async function phases(label) {
  const context = await env.browser.newContext()
  // Cross-origin isolation: performance.now() in steps of 5 us instead of 100.
  await context.route('**/*', async (route) => {
    const response = await route.fetch()
    await route.fulfill({
      response,
      headers: { ...response.headers(), 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp', 'cross-origin-resource-policy': 'cross-origin' }
    })
  })
  const page = await openPage(context, env.url, 'profile')
  await page.evaluate(instrument)
  const result = await page.evaluate(async ({ prefix, openOptions }) => {
    const text = 'x'.repeat(100)
    const name = `${prefix}-phases`
    const queen = await window.QE.Queen.open({ name, ...openOptions })
    // The broker's own entry point, timed: where the JS wrapper ends and the wasm begins.
    const broker = queen.transport.broker
    const handle = broker.handle.bind(broker)
    let current = null
    broker.handle = (...a) => {
      const call = current
      if (call) call.handle = performance.now()
      return handle(...a).then((answer) => {
        if (call) call.handled = performance.now()
        return answer
      })
    }
    const q = queen.queue('bench')
    const out = {}
    // One call: its phases from its last readwrite transaction.
    async function measured(key, run) {
      const before = window.idbTrace.length
      current = { t0: performance.now() }
      const answer = await run()
      const c = current
      current = null
      const t = window.idbTrace.slice(before)
      const last = t[t.length - 1]
      ;(out[key] ||= []).push({
        js: c.handle - c.t0 + performance.now() - c.handled,
        wasm: last.created - c.handle,
        issue: last.issued - last.created,
        idb: last.complete - last.issued,
        after: c.handled - last.complete,
        total: performance.now() - c.t0,
        commits: t.length,
        requests: last.requests
      })
      return answer
    }
    const items = (n, i) => Array.from({ length: n }, (_, k) => ({ data: { i: i + k, text } }))
    // Warm-up.
    for (let i = 0; i < 50; i++) await q.push(items(10, i))
    for (;;) { const m = await q.batch(100).wait(false).pop(); if (!m.length) break; await queen.ack(m, true) }
    for (let i = 0; i < 300; i++) await measured('push 1', () => q.push(items(1, i)))
    for (let i = 0; i < 300; i++) {
      const m = await measured('pop 1', () => q.batch(1).wait(false).pop())
      await measured('ack 1', () => queen.ack(m, true))
    }
    for (let i = 0; i < 60; i++) await measured('push 100', () => q.push(items(100, i * 100)))
    for (let i = 0; i < 60; i++) {
      const m = await measured('pop 100', () => q.batch(100).wait(false).pop())
      await measured('ack 100', () => queen.ack(m, true))
    }
    await queen.close()
    await window.QE.Queen.deleteDatabase(name, openOptions)
    const med = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)]
    const summary = {}
    for (const [key, calls] of Object.entries(out)) {
      const pick = (f) => med(calls.map((c) => c[f]))
      summary[key] = {
        js: pick('js'), wasm: pick('wasm'), issue: pick('issue'), idb: pick('idb'), after: pick('after'), total: pick('total'),
        commits: calls.reduce((a, c) => a + c.commits, 0) / calls.length,
        requests: calls[calls.length - 1].requests
      }
    }
    return { crossOriginIsolated, summary }
  }, { prefix: uniqueName('profile'), openOptions })
  await context.close()
  console.log(`\n${label}: phases of a sequential call, median microseconds (load ${load()}${result.crossOriginIsolated ? '' : '; timers coarse, not isolated'})`)
  console.log('    call           JS   wasm  issue  IndexedDB  after  total  commits   requests of its commit')
  for (const [key, s] of Object.entries(result.summary)) {
    const us = (x, w = 6) => String(Math.round(x * 1000)).padStart(w)
    const reqs = s.requests.map(([op, store, k, bytes]) => `${op} ${store}:${k} ${bytes}B`).join(', ')
    console.log(`    ${key.padEnd(10)} ${us(s.js)} ${us(s.wasm)} ${us(s.issue)} ${us(s.idb, 10)} ${us(s.after)} ${us(s.total)}  ${s.commits.toFixed(2).padStart(7)}   ${reqs}`)
  }
}

/** CPU seconds (user + system) of this script's Chromium: every process descending from this one, and the
 * main threads of its renderers (/proc, clock ticks of 10 ms). */
async function chromiumCpu() {
  const stats = new Map()
  for (const pid of await readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue
    try {
      const stat = await readFile(`/proc/${pid}/stat`, 'utf8')
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      stats.set(Number(pid), { ppid: Number(f[1]), ticks: Number(f[11]) + Number(f[12]) })
    } catch {}
  }
  const mine = new Set([process.pid])
  for (let grew = true; grew;) {
    grew = false
    for (const [pid, s] of stats) if (!mine.has(pid) && mine.has(s.ppid)) { mine.add(pid); grew = true }
  }
  mine.delete(process.pid)
  let all = 0
  let renderers = 0
  for (const pid of mine) {
    all += stats.get(pid).ticks
    try {
      if ((await readFile(`/proc/${pid}/cmdline`, 'utf8')).includes('--type=renderer')) {
        const stat = await readFile(`/proc/${pid}/task/${pid}/stat`, 'utf8')
        const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
        renderers += Number(f[11]) + Number(f[12])
      }
    } catch {}
  }
  return { all: all / 100, main: renderers / 100 }
}

/** CPU time per call (this script's Chromium, all processes; and its renderers' main threads) and wall time,
 * for each module in --vendor, 6 rounds in rotating order; medians. */
async function busyRounds() {
  const scenarios = [['push 1', 1, 500], ['pop+ack 1', 1, 500], ['push 100', 100, 100], ['pop+ack 100', 100, 100]]
  const runs = new Map()
  for (let round = 0; round < 6; round++) {
    // Each round starts with the next module: no module always runs first or last.
    for (const dir of [...vendors.slice(round % vendors.length), ...vendors.slice(0, round % vendors.length)]) {
      await stage(dir)
      const context = await env.browser.newContext()
      const page = await openPage(context, env.url, 'busy')
      const name = uniqueName('busy')
      await page.evaluate(async ({ name, openOptions }) => {
        window.busy = await window.QE.Queen.open({ name, ...openOptions })
        const q = window.busy.queue('bench')
        for (let i = 0; i < 20; i++) await q.push(Array.from({ length: 10 }, (_, k) => ({ data: { i: k } })))
        for (;;) { const m = await q.batch(100).wait(false).pop(); if (!m.length) break; await window.busy.ack(m, true) }
      }, { name, openOptions })
      for (const [what, batch, count] of scenarios) {
        const c0 = await chromiumCpu()
        const wall = await page.evaluate(async ({ what, batch, count }) => {
          const queen = window.busy
          const q = queen.queue('bench')
          const text = 'x'.repeat(100)
          const t0 = performance.now()
          for (let i = 0; i < count; i++) {
            if (what.startsWith('push')) await q.push(Array.from({ length: batch }, (_, k) => ({ data: { i: k, text } })))
            else { const m = await q.batch(batch).wait(false).pop(); await queen.ack(m, true) }
          }
          return performance.now() - t0
        }, { what, batch, count })
        const c1 = await chromiumCpu()
        const key = `${dir}\t${what}`
        if (!runs.has(key)) runs.set(key, [])
        runs.get(key).push({ all: (c1.all - c0.all) * 1e6 / count, main: (c1.main - c0.main) * 1e6 / count, wall: wall * 1000 / count })
      }
      await page.evaluate(async ({ name, openOptions }) => {
        await window.busy.close()
        await window.QE.Queen.deleteDatabase(name, openOptions)
      }, { name, openOptions })
      await context.close()
    }
  }
  console.log(`\nper call, median of 6 alternating rounds: CPU us of all Chromium processes / of the renderer's main thread / wall us (load ${load()})`)
  for (const [what] of scenarios) {
    const cells = vendors.map((dir) => {
      const r = runs.get(`${dir}\t${what}`)
      return `${median(r.map((x) => x.all)).toFixed(0).padStart(5)} / ${median(r.map((x) => x.main)).toFixed(0).padStart(5)} / ${median(r.map((x) => x.wall)).toFixed(0).padStart(5)}`
    })
    console.log(`    ${what.padEnd(12)} ${cells.join('   ')}`)
  }
  console.log(`    (columns: ${vendors.map((d) => d || 'www/vendor/queen-edge').join(', ')})`)
}

async function rawIdb() {
  const context = await env.browser.newContext()
  const page = await openPage(context, env.url, 'raw')
  // [label, [[store, bytes], ...]]: 'r' the records store, 'm' the meta store (an object value).
  const shapes = [
    ['1 put (naive push shape, object 120 B)', [['r', -120]]],
    ['1 put 300 B', [['r', 300]]],
    ['2 puts 300 B + 30 B', [['r', 300], ['r', 30]]],
    ['fence + 2 puts (batch-1 push today)', [['m', 0], ['r', 300], ['r', 30]]],
    ['fence + 1 put 330 B', [['m', 0], ['r', 330]]],
    ['3 puts, one store', [['r', 10], ['r', 300], ['r', 30]]],
    ['1 put 12 KB', [['r', 12000]]],
    ['fence + 2 puts 12 KB + 430 B (batch-100 push)', [['m', 0], ['r', 12000], ['r', 430]]],
    ['fence + 1 put 12.4 KB', [['m', 0], ['r', 12430]]]
  ]
  const result = await page.evaluate(async ({ name, shapes }) => {
    const db = await new Promise((resolve, reject) => {
      const r = indexedDB.open(name, 1)
      r.onupgradeneeded = () => {
        r.result.createObjectStore('records')
        const meta = r.result.createObjectStore('meta')
        meta.createIndex('writer', 'writer', { unique: true })
      }
      r.onsuccess = () => resolve(r.result)
      r.onerror = () => reject(r.error)
    })
    let seq = 0
    const commit = (shape) => new Promise((resolve, reject) => {
      const stores = shape.some(([s]) => s === 'm') ? ['records', 'meta'] : ['records']
      const t = db.transaction(stores, 'readwrite', { durability: 'strict' })
      const n = seq++
      for (const [s, bytes] of shape) {
        if (s === 'm') t.objectStore('meta').put({ writer: 1 }, 'writer/1')
        else if (bytes < 0) t.objectStore('records').put({ i: n, text: 'x'.repeat(-bytes - 20) }, `k/${n}/${bytes}`)
        else t.objectStore('records').put(new Uint8Array(bytes), `k/${String(n).padStart(16, '0')}/${bytes}`)
      }
      t.commit()
      t.oncomplete = resolve
      t.onabort = () => reject(t.error)
    })
    const runs = shapes.map(() => [])
    for (let round = 0; round < 7; round++) {
      for (let i = 0; i < shapes.length; i++) {
        const t0 = performance.now()
        for (let k = 0; k < 150; k++) await commit(shapes[i][1])
        runs[i].push(150 / ((performance.now() - t0) / 1000))
      }
    }
    db.close()
    await new Promise((resolve) => { const r = indexedDB.deleteDatabase(name); r.onsuccess = resolve; r.onerror = resolve })
    return runs
  }, { name: uniqueName('raw'), shapes })
  await context.close()
  console.log(`\nraw IndexedDB, one commit at a time, durability strict: commits/s, median of 7 alternating rounds of 150 (load ${load()})`)
  for (let i = 0; i < shapes.length; i++) {
    const m = median(result[i])
    console.log(`    ${shapes[i][0].padEnd(48)} ${m.toFixed(0).padStart(6)}  (${(1e6 / m).toFixed(0)} us; rounds ${result[i].map((x) => x.toFixed(0)).join(' ')})`)
  }
}

async function cpuProfile(label) {
  const context = await env.browser.newContext()
  const page = await openPage(context, env.url, 'cpu')
  const cdp = await context.newCDPSession(page)
  await cdp.send('Profiler.enable')
  await cdp.send('Profiler.setSamplingInterval', { interval: 50 })
  const name = uniqueName('cpu')
  for (const [what, batch, count] of [['batch-1 push', 1, 500], ['batch-100 push', 100, 100], ['batch-100 pop+ack', 100, 100], ['batch-1 pop+ack', 1, 300]]) {
    await page.evaluate(async ({ name, batch, count, what, openOptions }) => {
      window.prof = { queen: window.prof?.queen || await window.QE.Queen.open({ name, ...openOptions }) }
      const q = window.prof.queen.queue('bench')
      const text = 'x'.repeat(100)
      if (what.includes('pop')) for (let i = 0; i < count; i++) await q.push(Array.from({ length: batch }, (_, k) => ({ data: { i: k, text } })))
    }, { name, batch, count, what, openOptions })
    await cdp.send('Profiler.start')
    const wall = await page.evaluate(async ({ batch, count, what }) => {
      const queen = window.prof.queen
      const q = queen.queue('bench')
      const text = 'x'.repeat(100)
      const t0 = performance.now()
      for (let i = 0; i < count; i++) {
        if (what.includes('push')) await q.push(Array.from({ length: batch }, (_, k) => ({ data: { i: k, text } })))
        else { const m = await q.batch(batch).wait(false).pop(); await queen.ack(m, true) }
      }
      return performance.now() - t0
    }, { batch, count, what })
    const { profile } = await cdp.send('Profiler.stop')
    summarize(`${label}: ${what}, ${count} calls, ${(wall * 1000 / count).toFixed(0)} us a call`, profile, count)
  }
  await page.evaluate(async ({ name, openOptions }) => {
    await window.prof.queen.close()
    await window.QE.Queen.deleteDatabase(name, openOptions)
  }, { name, openOptions })
  await context.close()
}

/** Self time per category and the top functions, microseconds per call. */
function summarize(title, profile, calls) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const self = new Map()
  const deltas = profile.timeDeltas
  for (let i = 0; i < profile.samples.length; i++) {
    const node = byId.get(profile.samples[i])
    const dt = deltas[i + 1] ?? 0
    self.set(node, (self.get(node) || 0) + dt)
  }
  const categories = new Map()
  const functions = new Map()
  for (const [node, us] of self) {
    const f = node.callFrame
    let category
    if (f.functionName === '(idle)') category = 'idle'
    else if (f.functionName === '(program)') category = 'browser (program)'
    else if (f.functionName === '(garbage collector)') category = 'garbage collector'
    else if (f.url.endsWith('.wasm') || f.url.includes('wasm://')) category = 'wasm'
    else if (f.url.includes('queen-edge.js')) category = 'JS module (wrapper + glue)'
    else if (f.url === '') category = 'native (IndexedDB and other built-ins)'
    else category = 'other JS'
    categories.set(category, (categories.get(category) || 0) + us)
    const key = `${f.functionName || '(anonymous)'} ${category === 'wasm' ? '[wasm]' : f.url ? '[js]' : '[native]'}`
    functions.set(key, (functions.get(key) || 0) + us)
  }
  console.log(`\n${title} (CPU profile, self time, microseconds a call; load ${load()})`)
  for (const [c, us] of [...categories].sort((a, b) => b[1] - a[1])) console.log(`    ${c.padEnd(42)} ${(us / calls).toFixed(0).padStart(7)}`)
  // Inclusive time of wasm functions (a function's subtree, each sample counted once per function).
  const parent = new Map()
  for (const n of profile.nodes) for (const c of n.children || []) parent.set(c, n.id)
  const inclusive = new Map()
  for (const [node, us] of self) {
    const seen = new Set()
    for (let id = node.id; id !== undefined; id = parent.get(id)) {
      const f = byId.get(id).callFrame
      if (!(f.url.endsWith('.wasm') || f.url.includes('wasm://'))) continue
      const key = f.functionName.replace(/::h[0-9a-f]{16}$/, '')
      if (seen.has(key)) continue
      seen.add(key)
      inclusive.set(key, (inclusive.get(key) || 0) + us)
    }
  }
  console.log('  wasm functions by inclusive time:')
  for (const [f, us] of [...inclusive].sort((a, b) => b[1] - a[1]).slice(0, 30)) console.log(`    ${f.slice(0, 100).padEnd(100)} ${(us / calls).toFixed(0).padStart(7)}`)
  console.log('  top functions:')
  for (const [f, us] of [...functions].sort((a, b) => b[1] - a[1]).slice(0, 22)) console.log(`    ${f.slice(0, 60).padEnd(60)} ${(us / calls).toFixed(0).padStart(7)}`)
}

/** Page-thread time of each call of a raw commit, in a cross-origin-isolated page (5 us timers):
 * `transaction()`, each request, `commit()`, then the wait until `complete`; commits shaped like the
 * broker's and like the naive queue's, 8 alternating rounds of 100 commits, medians. Then the platform's
 * CompressionStream (deflate-raw) and DecompressionStream on the JSON text of a 100-message segment. */
async function requestCosts() {
  const context = await env.browser.newContext()
  await context.route('**/*', async (route) => {
    const response = await route.fetch()
    await route.fulfill({
      response,
      headers: { ...response.headers(), 'cross-origin-opener-policy': 'same-origin', 'cross-origin-embedder-policy': 'require-corp', 'cross-origin-resource-policy': 'cross-origin' }
    })
  })
  const page = await openPage(context, env.url, 'requests')
  // Requests: n the naive queue's add of {i, text}; f the fence's put of {writer: 1} (indexed store);
  // s a 240 B segment; b a 24 KB segment; c a 4 KB segment; x a 30 B index entry; i, g, h, e, P, Q index
  // pages (sizes below).
  const shapes = [
    ['naive push: add {i, text}', 'n'],
    ['segment 240 B', 's'],
    ['segment 240 B + index entry', 'sx'],
    ['fence + segment 240 B + index entry (push 1)', 'fsx'],
    ['segment + index entry + fence (fence last)', 'sxf'],
    ['fence + segment 24 KB + index entry (push 100)', 'fbx'],
    ['fence + segment 24 KB', 'fb'],
    ['fence + segment 4 KB + index entry', 'fcx'],
    ['fence + segment 240 B + 4 index entries', 'fsxxxx'],
    ['fence + segment 240 B + 16 index entries', 'fs' + 'x'.repeat(16)],
    // Index pages (record format 3): a push writes fence + segment, and every Kth push the page of K
    // entries too. Pages of batch-1 segments (entries of 30 B, 42 B in a page) and of 100-message ones
    // (426 B, 438 B in a page), K = 4, 16, 64.
    ['fence + segment 240 B', 'fs'],
    ['fence + segment 240 B + page of 4 (169 B)', 'fsi'],
    ['fence + segment 240 B + page of 16 (673 B)', 'fsg'],
    ['fence + segment 240 B + page of 64 (2.7 KB)', 'fsh'],
    ['fence + segment 24 KB + page of 4 (1.8 KB)', 'fbe'],
    ['fence + segment 24 KB + page of 16 (7 KB)', 'fbP'],
    ['fence + segment 24 KB + page of 64 (28 KB)', 'fbQ']
  ]
  const result = await page.evaluate(async ({ name, shapes }) => {
    const db = await new Promise((resolve, reject) => {
      const r = indexedDB.open(name, 1)
      r.onupgradeneeded = () => {
        r.result.createObjectStore('records')
        r.result.createObjectStore('meta').createIndex('writer', 'writer', { unique: true })
        r.result.createObjectStore('messages', { autoIncrement: true })
      }
      r.onsuccess = () => resolve(r.result)
      r.onerror = () => reject(r.error)
    })
    const text = 'x'.repeat(100)
    const sizes = { s: 240, b: 24000, c: 4000, x: 30, i: 169, g: 673, h: 2689, e: 1753, P: 7009, Q: 28033 }
    let seq = 0
    const commit = (ops) => new Promise((resolve, reject) => {
      const n = seq++
      const key = (p, j) => `${p}/${String(n).padStart(16, '0')}/${j}`
      const t = [performance.now()]
      const tx = db.transaction(ops === 'n' ? ['messages'] : ['records', 'meta'], 'readwrite', { durability: 'strict' })
      t.push(performance.now())
      for (const [j, op] of [...ops].entries()) {
        if (op === 'n') tx.objectStore('messages').add({ i: n, text })
        else if (op === 'f') tx.objectStore('meta').put({ writer: 1 }, 'writer/1')
        else tx.objectStore('records').put(new Uint8Array(sizes[op]).fill(120), key('sbc'.includes(op) ? 's' : 'x', j))
        t.push(performance.now())
      }
      tx.commit()
      t.push(performance.now())
      tx.oncomplete = () => { t.push(performance.now()); resolve(t.slice(1).map((x, i) => x - t[i])) }
      tx.onabort = () => reject(tx.error)
    })
    const runs = shapes.map(() => [])
    for (let round = 0; round < 8; round++) {
      for (let i = 0; i < shapes.length; i++) for (let k = 0; k < 100; k++) runs[i].push(await commit(shapes[i][1]))
    }
    db.close()
    await new Promise((resolve) => { const r = indexedDB.deleteDatabase(name); r.onsuccess = resolve; r.onerror = resolve })
    // A segment's JSON text as the broker stores it: 100 messages of a 100-character payload.
    const segment = new TextEncoder().encode('[' + Array.from({ length: 100 }, (_, i) => JSON.stringify({
      o: i, i: crypto.randomUUID(), t: crypto.randomUUID(), c: Date.now() + i, p: { i, text: Math.random().toString(36).repeat(9).slice(0, 100) }
    })).join(',') + ']')
    const through = async (bytes, stream) => new Uint8Array(await new Response(new Blob([bytes]).stream().pipeThrough(stream)).arrayBuffer())
    const compressed = await through(segment, new CompressionStream('deflate-raw'))
    const compress = []
    const decompress = []
    for (let i = 0; i < 100; i++) {
      let t0 = performance.now()
      await through(segment, new CompressionStream('deflate-raw'))
      compress.push(performance.now() - t0)
      t0 = performance.now()
      await through(compressed, new DecompressionStream('deflate-raw'))
      decompress.push(performance.now() - t0)
    }
    return { crossOriginIsolated, runs, segment: segment.length, compressed: compressed.length, compress, decompress }
  }, { name: uniqueName('requests'), shapes: shapes.map(([label, ops]) => [label, ops]) })
  await context.close()
  const us = (x) => String(Math.round(x * 1000)).padStart(5)
  console.log(`\npage-thread time of each IndexedDB call of a raw commit, durability strict, median us of 8 alternating rounds of 100 (load ${load()}${result.crossOriginIsolated ? '' : '; timers coarse, not isolated'})`)
  console.log('    commit                                            transaction()  requests in order     commit()  until complete  total')
  for (let i = 0; i < shapes.length; i++) {
    const calls = result.runs[i]
    const cols = calls[0].map((_, j) => median(calls.map((c) => c[j])))
    const totals = median(calls.map((c) => c.reduce((a, b) => a + b, 0)))
    const requests = cols.length > 7 ? `${cols.length - 3} requests, ${us(cols.slice(1, -2).reduce((a, b) => a + b, 0))} in all` : cols.slice(1, -2).map(us).join(' ')
    console.log(`    ${shapes[i][0].padEnd(48)} ${us(cols[0]).padStart(13)}  ${requests.padEnd(20)} ${us(cols[cols.length - 2]).padStart(8)}  ${us(cols[cols.length - 1]).padStart(14)}  ${us(totals)}`)
  }
  console.log(`CompressionStream('deflate-raw') on a segment's JSON text of ${result.segment} B (to ${result.compressed} B): median ${us(median(result.compress))} us; DecompressionStream back: ${us(median(result.decompress))} us`)
}

// Size budget and throughput of the JS module, in one Chromium run.
//
//   node tests/js/bench.mjs            measure, print, write test-artifacts/js/bench.json
//   node tests/js/bench.mjs --write    also replace this script's section of docs/BENCHMARKS.md
//   node tests/js/bench.mjs --size-only
//
// Size: what a browser downloads for Queen.open, i.e. what scripts/build-js ships in js/dist and stages in
// www/vendor/queen-edge: the one minified ES module queen-edge.js (wrapper js/*.js + wasm-bindgen glue,
// bundled by esbuild) and the wasm it fetches, queen_edge_bg.wasm; each raw and gzipped (zlib level 9).
// The source map (queen-edge.js.map) is printed but not counted: only devtools fetch it. Also printed: what
// `Queen.open({ views: true })` fetches instead (the views build's glue chunk and wasm). Enforced limit:
// 241 KB gzipped in all for `Queen.open`; over it, the exit code is 1, always. Issue 11's target is 200 KB
// on stable Rust, which this build does not meet yet (printed as a miss; docs/decisions.md, "Over the
// 200 KB target"): the limit is a ratchet that stops further growth until a size pass brings it back.
//
// Throughput, at batch 1, 10 and 100, durability strict (every answer on disk first):
// - queen-edge: `queue.push(batch)`, then `queue.batch(n).wait(false).pop()` + `queen.ack(batch)`, through
//   the fluent API, in the writer tab;
// - naive baseline: one IndexedDB record per message (autoIncrement key), one readwrite transaction per
//   push batch; pop = read the n oldest records, ack = delete them in one readwrite transaction.
// Same payload for both: {i, text: 100 characters}.
//
// Concurrent callers, at batch 1 and 10 (where group commit pays: requests that arrive while a commit is
// in flight share the next IndexedDB transaction): W producers push at once (each to its own partition),
// then W consumers pop+ack at once (queue mode, one group, any partition), in the writer tab; queen-edge's commits per request are printed
// (IndexedDB transactions the broker committed / requests answered). The naive queue with the same W:
// producers add as above; a consumer takes a batch by reading and deleting it in one readwrite
// transaction (no lease: a crash after it loses the batch), so its pop+ack is one transaction where
// queen-edge answers two requests.
//
//   node tests/js/bench.mjs --concurrent-only    of the throughput, only the concurrent rows (not with --write)

import { gzipSync } from 'node:zlib'
import { readFile, writeFile, mkdir } from 'node:fs/promises'
import { resolve } from 'node:path'
import { launch, openPage, uniqueName, ARTIFACTS, ROOT } from './harness.mjs'

// 234 KB since session 10 (audit2): the correctness fixes of that audit (sealed recorded answers, committed
// views) measured +1.5 KB over main's 232.2 KB (docs/decisions.md); a ratchet, not a target.
// 237 KB since session 11 (idx-page): index pages (record format 3, the open's probe past the pages) measured
// +3.3 KB over main's 233.7 KB, for a push commit of one record instead of two (docs/decisions.md, "Index
// pages (session 11)"); a ratchet, not a target.
// 238 KB since session 11 (lead): shared Durable Object commits (COMMIT_SHARING) brought the engine's gathering
// and review-gather's two dropped-leader fixes into the browser module too, measured +0.3 KB over 237.0.
// 239 KB since session 12 (idb-b1): one complete/abort handler pair per IndexedDB connection instead of a
// promise and two callbacks per commit, and the commit's values made once, measured +1.1 KB over main's 237.3 KB
// for a batch-1 push and pop+ack a few percent faster (docs/decisions.md, "The browser's batch-1 path,
// session 12"); a ratchet, not a target.
// 241 KB since session 12 (seg-gap, lead): the open's check that no segment is stored past a missing one
// (Store::first_keys in IdbStore, the engine's check and its damage error), measured +2.0 KB with idb-b1's change
// beside it: 240.4 KB in all.
// 234 KB since session 14: size-cut's wasm-opt passes and short import names (-7.3 KB), do-text's shared push
// text (+0.4 KB) and one JSON writer for a `Value`'s text (-1.2 KB): 232.7 KB in all.
// 228 KB since session 15 (size-200): B-tree maps of three fewer key/value types (the change set's writes and a
// queue's partition ids boxed, a pop's tried partitions in a sorted list), one call per `object!` field and no
// copy of a `Value` through serde's `Value` serializer (-4.8 KB): 227.8 KB in all.
// 229 KB since session 15 (core-hot, lead): push and pop answers copy the text that repeats (snake and camel
// aliases, a partition's names) instead of writing it again, +0.6 KB for about a third fewer instructions per
// popped message: 228.2 KB in all.
// 217 KB since session 16: wasm SIMD in the browser build (-1.9 KB), JSON read from `str` (-1.7 KB), the
// patched serde_json whose error texts no longer link the float formatting (vendor/README.md, -9.4 KB): 216.6 KB
// in all.
// 216 KB since session 17: every default-build answer written as JSON text instead of a `Value` tree (size,
// -1.7 KB), the ack's run-by-run lease check (push-cpu, +0.1 KB): 215.0 KB in all.
// 214 KB since session 18: the stored records' readers keep their first error instead of returning at each
// field (size18, -1.7 KB): 213.3 KB in all.
// 213.5 KB since session 18's second size round: the stored records' error texts formatted once, by one
// function (size18b, -0.1 KB), the writer fence by version change (vfence: JS +0.2 KB, wasm -0.1 KB): 213.4 KB
// in all.
// 208.3 KB since session 19: serde_json's map a sorted `Vec` (one B-tree instance fewer), the crate's stable
// sort a small merge sort of its own, the trace id checked without uuid's parser (size19, -5.2 KB): 208.2 KB.
// 206.4 KB since size19's transaction-index sort of `u64` by a small merge sort of its own (-1.9 KB):
// 206.3 KB.
// 204.6 KB since session 20: the typed JSON readers' one shared shape reader (size20a, vendor/README.md
// change 3, -1.8 KB): 204.5 KB.
// 203.1 KB since size20b (session 20): serde_json's I/O error text and `rfind`, the Debug formatting of panics that
// cannot happen (`TryFromIntError`, `TryFromSliceError`, `serde_json::Error`, `i64`) and `Split`'s `nth`
// out of the module (-3.3 KB): 200.6 KB with size20a's cut and the bridge's option check moved into its chunk
// (-0.4 KB of JS).
// 199.5 KB since four collect::<Result<..>> became plain loops (-0.9 KB, the lead): 199.4 KB, within issue 11's
// 200 KB target.
// 200 KB (issue 11's target itself) since session 24: the core's refusal of a plain payload for an encrypted
// queue (audit23, a data-safety fix: +0.2 KB) put the module 154 bytes over 199.5 KB; docs/decisions.md,
// "The size budget at the target (session 24)".
// 201 KB since session 34: fixes that outrank the target put the module 1.0 KB over it (transactions resolving
// their acks as one call, a misstated no_writer and unchecked numbers in follower tabs, a broker opened with
// another encryption key refused), and the cuts tried for them would have broken Queen.connect and encryption in
// service workers; docs/decisions.md, "Over the 200 KB target (session 34)". The target line below still
// reports the miss.
// 200 KB (the target again) since session 35: the partitions by id as a sorted vector (LiteMap) and the delivery
// log kept per queue took the B-tree of u64 keys out of the module, and serde_json quotes strings in its errors
// without str's Debug (-1.7 KB); docs/decisions.md, "Back under 200 KB (session 35)".
// 201 KB again later in session 35: four QA fixes that outrank the target (the storage quota counting what a push
// stores, an ack across groups answering per message, a deleted database closing its brokers, a long-poll
// whose client went claiming nothing) put the module 261 bytes over it, and ending the lease of a span retention
// removed 258 more; docs/decisions.md, "Over the 200 KB target again (session 35)". The target line below reports
// the miss.
// 200 KB (the target) since session 36: no `str` slice is left in the library (clippy's `string_slice` denies
// them), so std's string-slice panic, which formats with `char`'s Debug and its Unicode tables, is out of the
// module (-3.7 KB): 196.8 KB; docs/decisions.md, "No `str` slices in the library (session 36)".
const BUDGET_GZ = 200 * 1024
/** Interleaved runs of each sequential batch size (queen-edge, then the naive queue, in each). */
const SEQUENTIAL_RUNS = 5
const TARGET_GZ = 200 * 1024
const args = new Set(process.argv.slice(2))
const vendor = resolve(ROOT, 'www/vendor/queen-edge')

async function sizeOf(rel) {
  const bytes = await readFile(resolve(vendor, rel))
  return { file: rel, raw: bytes.length, gz: gzipSync(bytes, { level: 9 }).length }
}

const sizes = [await sizeOf('queen-edge.js'), await sizeOf('queen_edge_bg.wasm')]
const total = { file: 'total', raw: sizes.reduce((a, s) => a + s.raw, 0), gz: sizes.reduce((a, s) => a + s.gz, 0) }
const sourceMap = await sizeOf('queen-edge.js.map')
const viewsSizes = [await sizeOf('queen_edge_views.js'), await sizeOf('queen_edge_views_bg.wasm')]
// With views the page fetches the bundle, the views glue chunk and the views wasm (not the default wasm).
const viewsFetched = [sizes[0], ...viewsSizes]
const viewsTotal = { file: 'total with views', raw: viewsFetched.reduce((a, s) => a + s.raw, 0), gz: viewsFetched.reduce((a, s) => a + s.gz, 0) }
// Queen.open with a `bridge` also fetches the bridge's own chunk (beside the views build it needs); not in the budget.
const bridgeSize = await sizeOf('bridge.js')
const kb = (n) => (n / 1024).toFixed(1) + ' KB'
const row = (s) => `    ${s.file.padEnd(24)} ${kb(s.raw).padStart(10)} raw ${kb(s.gz).padStart(10)} gzip`
console.log('  size (what the browser downloads for Queen.open, from www/vendor/queen-edge):')
for (const s of [...sizes, total]) console.log(row(s))
console.log(row(sourceMap) + '   (devtools only; not counted)')
console.log('  Queen.open({ views: true }) fetches queen-edge.js and, instead of queen_edge_bg.wasm, these:')
for (const s of [...viewsSizes, viewsTotal]) console.log(row(s))
console.log('  with a bridge, also:')
console.log(row(bridgeSize))
const overBudget = total.gz > BUDGET_GZ
console.log(`  budget ${BUDGET_GZ / 1024} KB gzipped: ${overBudget ? 'OVER BUDGET by ' + kb(total.gz - BUDGET_GZ) : 'within budget'}`)
console.log(`  issue 11 target ${TARGET_GZ / 1024} KB gzipped: ${total.gz > TARGET_GZ ? 'MISSED by ' + kb(total.gz - TARGET_GZ) : 'met'}`)

let results = null
const concurrentOnly = args.has('--concurrent-only')
if (concurrentOnly && args.has('--write')) {
  console.error('--concurrent-only measures part of the section: it cannot --write it')
  process.exit(2)
}
if (!args.has('--size-only')) {
  const env = await launch()
  try {
    const context = await env.browser.newContext()
    const page = await openPage(context, env.url, 'bench')
    results = await page.evaluate(async ({ prefix, concurrentOnly, SEQUENTIAL_RUNS }) => {
      const text = 'x'.repeat(100)
      const totals = { 1: 1000, 10: 2000, 100: 10000 }
      const out = []
      const now = () => performance.now()

      async function queenEdge(batch, n) {
        const dbName = `${prefix}-qe-${batch}-${Math.random().toString(36).slice(2, 8)}`
        const queen = await window.QE.Queen.open({ name: dbName })
        const q = queen.queue('bench')
        let t0 = now()
        for (let i = 0; i < n; i += batch) {
          await q.push(Array.from({ length: batch }, (_, k) => ({ data: { i: i + k, text } })))
        }
        const pushMs = now() - t0
        t0 = now()
        let got = 0
        while (got < n) {
          const msgs = await queen.queue('bench').batch(batch).wait(false).pop()
          if (msgs.length === 0) throw new Error(`queue-edge: only ${got} of ${n} popped`)
          const ack = await queen.ack(msgs, true)
          if (!ack.success) throw new Error('ack failed: ' + ack.error)
          got += msgs.length
        }
        const popAckMs = now() - t0
        const counters = queen.transport.broker.counters()
        await queen.close()
        await window.QE.Queen.deleteDatabase(dbName)
        return { pushMps: n / (pushMs / 1000), popAckMps: n / (popAckMs / 1000), commits: counters.commits, rows: counters.rowsWritten }
      }

      async function naive(batch, n) {
        const name = `${prefix}-naive-${batch}-${Math.random().toString(36).slice(2, 8)}`
        const db = await new Promise((res, rej) => {
          const r = indexedDB.open(name, 1)
          r.onupgradeneeded = () => r.result.createObjectStore('messages', { autoIncrement: true })
          r.onsuccess = () => res(r.result)
          r.onerror = () => rej(r.error)
        })
        const tx = (mode, fn) => new Promise((res, rej) => {
          const t = db.transaction('messages', mode, { durability: 'strict' })
          const result = fn(t.objectStore('messages'))
          t.oncomplete = () => res(result)
          t.onabort = () => rej(t.error)
        })
        let t0 = now()
        for (let i = 0; i < n; i += batch) {
          await tx('readwrite', (s) => { for (let k = 0; k < batch; k++) s.add({ i: i + k, text }) })
        }
        const pushMs = now() - t0
        t0 = now()
        let got = 0
        while (got < n) {
          const keys = []
          await tx('readonly', (s) => new Promise((resolve) => {
            const req = s.openCursor()
            req.onsuccess = () => {
              const c = req.result
              if (c && keys.length < batch) {
                keys.push([c.key, c.value])
                c.continue()
              } else resolve()
            }
          }))
          if (keys.length === 0) throw new Error(`naive: only ${got} of ${n} popped`)
          await tx('readwrite', (s) => { for (const [key] of keys) s.delete(key) })
          got += keys.length
        }
        const popAckMs = now() - t0
        db.close()
        await new Promise((res) => { const r = indexedDB.deleteDatabase(name); r.onsuccess = res; r.onerror = res })
        return { pushMps: n / (pushMs / 1000), popAckMps: n / (popAckMs / 1000), commits: null, rows: null }
      }

      const workersOf = (w, job) => Promise.all(Array.from({ length: w }, (_, k) => job(k)))

      async function queenEdgeConcurrent(batch, n, w) {
        const dbName = `${prefix}-qec-${batch}-${w}-${Math.random().toString(36).slice(2, 8)}`
        const queen = await window.QE.Queen.open({ name: dbName })
        const commits = () => queen.transport.broker.counters().commits
        let c0 = commits()
        let t0 = now()
        let requests = 0
        await workersOf(w, async (k) => {
          // One partition per producer: a partition is leased to one consumer at a time (Queen's unit of
          // parallel consumption), so W consumers need W partitions to work at once.
          const q = queen.queue('bench').partition(`p${k}`)
          for (let i = k * batch; i < n; i += w * batch) {
            await q.push(Array.from({ length: batch }, (_, j) => ({ data: { i: i + j, text } })))
            requests++
          }
        })
        const pushMs = now() - t0
        const push = { requests, commits: commits() - c0 }
        c0 = commits()
        t0 = now()
        requests = 0
        let got = 0
        await workersOf(w, async () => {
          while (got < n) {
            const msgs = await queen.queue('bench').batch(batch).wait(false).pop()
            requests++
            // The rest is leased by other consumers until they ack it.
            if (msgs.length === 0) { await new Promise((resolve) => setTimeout(resolve, 1)); continue }
            const ack = await queen.ack(msgs, true)
            requests++
            if (!ack.success) throw new Error('ack failed: ' + ack.error)
            got += msgs.length
          }
        })
        const popAckMs = now() - t0
        const popAck = { requests, commits: commits() - c0 }
        if (got !== n) throw new Error(`queen-edge: ${got} of ${n} popped`)
        await queen.close()
        await window.QE.Queen.deleteDatabase(dbName)
        return { pushMps: n / (pushMs / 1000), popAckMps: n / (popAckMs / 1000), push, popAck }
      }

      async function naiveConcurrent(batch, n, w) {
        const name = `${prefix}-naivec-${batch}-${w}-${Math.random().toString(36).slice(2, 8)}`
        const db = await new Promise((res, rej) => {
          const r = indexedDB.open(name, 1)
          r.onupgradeneeded = () => r.result.createObjectStore('messages', { autoIncrement: true })
          r.onsuccess = () => res(r.result)
          r.onerror = () => rej(r.error)
        })
        const tx = (fn) => new Promise((res, rej) => {
          const t = db.transaction('messages', 'readwrite', { durability: 'strict' })
          const result = fn(t.objectStore('messages'))
          t.oncomplete = () => res(result)
          t.onabort = () => rej(t.error)
        })
        let t0 = now()
        await workersOf(w, async (k) => {
          for (let i = k * batch; i < n; i += w * batch) {
            await tx((s) => { for (let j = 0; j < batch; j++) s.add({ i: i + j, text }) })
          }
        })
        const pushMs = now() - t0
        t0 = now()
        let got = 0
        await workersOf(w, async () => {
          while (got < n) {
            const taken = await tx((s) => new Promise((resolve) => {
              let count = 0
              const req = s.openCursor()
              req.onsuccess = () => {
                const c = req.result
                if (c && count < batch) {
                  c.delete()
                  count++
                  c.continue()
                } else resolve(count)
              }
            }))
            got += taken
          }
        })
        const popAckMs = now() - t0
        if (got !== n) throw new Error(`naive: ${got} of ${n} taken`)
        db.close()
        await new Promise((res) => { const r = indexedDB.deleteDatabase(name); r.onsuccess = res; r.onerror = res })
        return { pushMps: n / (pushMs / 1000), popAckMps: n / (popAckMs / 1000) }
      }

      // Warm-up (wasm tier-up, IndexedDB first use), not measured.
      await queenEdge(10, 200)
      await naive(10, 200)
      // Three interleaved runs per configuration; the median of each figure is reported.
      const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)]
      const concurrent = []
      for (const [batch, n] of [[1, 400], [10, 2000]]) {
        for (const w of [4, 16]) {
          const runs = []
          for (let rep = 0; rep < 3; rep++) runs.push({ qe: await queenEdgeConcurrent(batch, n, w), nv: await naiveConcurrent(batch, n, w) })
          const pick = (side, key) => median(runs.map((r) => r[side][key]))
          const perRequest = (phase) => {
            const sum = (key) => runs.reduce((a, r) => a + r.qe[phase][key], 0)
            return sum('commits') / sum('requests')
          }
          concurrent.push({
            batch,
            n,
            workers: w,
            queenEdge: { pushMps: pick('qe', 'pushMps'), popAckMps: pick('qe', 'popAckMps'), pushCommitsPerRequest: perRequest('push'), popAckCommitsPerRequest: perRequest('popAck') },
            naive: { pushMps: pick('nv', 'pushMps'), popAckMps: pick('nv', 'popAckMps') },
            spread: runs.map((r) => [Math.round(r.qe.pushMps), Math.round(r.qe.popAckMps), Math.round(r.nv.pushMps), Math.round(r.nv.popAckMps)])
          })
        }
      }
      if (concurrentOnly) return { rows: out, concurrent }
      for (const batch of [1, 10, 100]) {
        const n = totals[batch]
        const runs = []
        for (let rep = 0; rep < SEQUENTIAL_RUNS; rep++) runs.push({ qe: await queenEdge(batch, n), nv: await naive(batch, n) })
        const pick = (side, key) => median(runs.map((r) => r[side][key]))
        out.push({
          batch,
          n,
          queenEdge: { pushMps: pick('qe', 'pushMps'), popAckMps: pick('qe', 'popAckMps'), commits: runs[0].qe.commits, rows: runs[0].qe.rows },
          naive: { pushMps: pick('nv', 'pushMps'), popAckMps: pick('nv', 'popAckMps') },
          spread: runs.map((r) => [Math.round(r.qe.pushMps), Math.round(r.qe.popAckMps), Math.round(r.nv.pushMps), Math.round(r.nv.popAckMps)])
        })
      }
      return { rows: out, concurrent }
    }, { prefix: uniqueName('bench'), concurrentOnly, SEQUENTIAL_RUNS })
    results.chromium = env.browser.version()
  } finally {
    await env.close()
  }
  console.log(`  throughput (Chromium ${results.chromium}, durability strict, messages/s):`)
  console.log('    batch   queen-edge push   naive push   queen-edge pop+ack   naive pop+ack')
  for (const r of results.rows) {
    console.log(`    ${String(r.batch).padStart(5)}   ${r.queenEdge.pushMps.toFixed(0).padStart(15)}   ${r.naive.pushMps.toFixed(0).padStart(10)}   ${r.queenEdge.popAckMps.toFixed(0).padStart(18)}   ${r.naive.popAckMps.toFixed(0).padStart(13)}`)
  }
  if (results.rows.length) console.log(`  against the naive queue (issue 11: batch 100 combined >= 5x, batch 1 >= 1x): ${ratios(results.rows)}`)
  console.log('  concurrent callers in one tab (W producers, then W consumers; messages/s; commits per request):')
  console.log('    batch   W   queen-edge push   naive push   queen-edge pop+ack   naive pop+ack   commits/request push, pop+ack')
  for (const r of results.concurrent) {
    console.log(`    ${String(r.batch).padStart(5)}  ${String(r.workers).padStart(2)}   ${r.queenEdge.pushMps.toFixed(0).padStart(15)}   ${r.naive.pushMps.toFixed(0).padStart(10)}   ${r.queenEdge.popAckMps.toFixed(0).padStart(18)}   ${r.naive.popAckMps.toFixed(0).padStart(13)}   ${r.queenEdge.pushCommitsPerRequest.toFixed(2)}, ${r.queenEdge.popAckCommitsPerRequest.toFixed(2)}`)
  }
}

/**
 * Each row's ratios to the naive queue: the median over the interleaved runs of the run's own ratio (queen-edge's
 * figure over the naive queue's of the same run, measured seconds apart), and in how many runs queen-edge was
 * ahead. "combined" compares the time of a push plus a pop+ack of one message.
 */
function ratios(rows) {
  const middle = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)]
  return rows.map((r) => {
    const time = (push, popAck) => 1 / push + 1 / popAck
    // spread: [queen-edge push, queen-edge pop+ack, naive push, naive pop+ack] per run.
    const per = {
      push: r.spread.map(([qp, , np]) => qp / np),
      'pop+ack': r.spread.map(([, qa, , na]) => qa / na),
      combined: r.spread.map(([qp, qa, np, na]) => time(np, na) / time(qp, qa))
    }
    const parts = Object.entries(per).map(([name, xs]) => `${name} ${middle(xs).toFixed(2)}x (${xs.filter((x) => x > 1).length}/${xs.length})`)
    return `batch ${r.batch}: ${parts.join(', ')}`
  }).join('; ')
}

await mkdir(ARTIFACTS, { recursive: true })
await writeFile(resolve(ARTIFACTS, 'bench.json'), JSON.stringify({ sizes, total, sourceMap, viewsSizes, viewsTotal, bridgeSize, budgetGz: BUDGET_GZ, results }, null, 2))

if (args.has('--write')) {
  const BEGIN = '<!-- js-module:begin -->'
  const END = '<!-- js-module:end -->'
  const lines = [BEGIN, '## In-browser JS module: size and throughput', '']
  const os = await import('node:os')
  const machine = `${os.cpus().length} cores, ${os.cpus()[0]?.model?.trim()}, ${Math.round(os.totalmem() / 2 ** 30)} GiB; node ${process.version}`
  lines.push(`Machine: ${machine}. Measured ${new Date().toISOString().slice(0, 16)}Z by \`node tests/js/bench.mjs --write\` (after \`scripts/build-js\`).`, '')
  lines.push('### Download size (what `Queen.open` fetches)', '')
  lines.push('| file | raw | gzip -9 |', '|---|---:|---:|')
  for (const s of [...sizes, total]) lines.push(`| ${s.file === 'total' ? '**total**' : '`' + s.file + '`'} | ${kb(s.raw)} | ${kb(s.gz)} |`)
  lines.push('', '`queen-edge.js` is the one minified ES module (the wrapper `js/*.js` and the wasm-bindgen glue, bundled',
    `by esbuild); its source map (\`queen-edge.js.map\`, ${kb(sourceMap.raw)}) is fetched only by devtools and not counted.`)
  lines.push('', 'With `Queen.open({ views: true })` (the view routes: queue listings, message browser, status, metrics; the',
    'dashboard page uses it) the browser fetches `queen-edge.js` and, instead of `queen_edge_bg.wasm`, the build with views:', '')
  lines.push('| file | raw | gzip -9 |', '|---|---:|---:|')
  for (const s of [...viewsSizes, viewsTotal]) lines.push(`| ${s.file.startsWith('total') ? '**' + s.file + '**' : '`' + s.file + '`'} | ${kb(s.raw)} | ${kb(s.gz)} |`)
  lines.push('', `With a \`bridge\` (which needs the views build), also its own chunk \`bridge.js\`: ${kb(bridgeSize.raw)} raw, ${kb(bridgeSize.gz)} gzipped (not in the budget).`)
  lines.push('', `Enforced limit: ${BUDGET_GZ / 1024} KB gzipped. ${overBudget ? `**Over it by ${kb(total.gz - BUDGET_GZ)}**.` : 'Within it.'} Target (issue 11): ${TARGET_GZ / 1024} KB gzipped: ${total.gz > TARGET_GZ ? `**missed by ${kb(total.gz - TARGET_GZ)}**` : 'met'} (docs/decisions.md, "${total.gz > TARGET_GZ ? 'Over the 200 KB target again (session 35)' : 'No `str` slices in the library (session 36)'}").`, '')
  if (results) {
    lines.push(`### Throughput (messages/s, headless Chromium ${results.chromium}, durability strict, one tab)`, '')
    lines.push('queen-edge goes through the fluent API (push a batch; pop a batch + ack it). The naive baseline keeps one',
      `IndexedDB record per message (one readwrite transaction per batch) and deletes it on ack. Median of ${SEQUENTIAL_RUNS}`,
      'interleaved runs; on this shared 2-core machine single runs vary by about ±30 %. queen-edge writes one',
      'or two IndexedDB rows per commit (push: the batch\'s segment and its index entry; pop: the lease; ack: the cursor), so its advantage grows',
      'with the batch. At batch 1 the IndexedDB transactions dominate: each queen-edge call is one readwrite transaction',
      'over `records` with its own rows only (the writer fence needs no request: src/store/idb.rs, "Fencing"), and a pop+ack is two of them where',
      'the naive queue does a readonly read and one delete (docs/decisions.md, "Browser size, batch-1 path and compression" and',
      '"Pipelined IndexedDB commits (session 7)").', '')
    lines.push('| batch | messages | queen-edge push | naive push | queen-edge pop+ack | naive pop+ack |', '|---:|---:|---:|---:|---:|---:|')
    for (const r of results.rows) {
      lines.push(`| ${r.batch} | ${r.n} | ${r.queenEdge.pushMps.toFixed(0)} | ${r.naive.pushMps.toFixed(0)} | ${r.queenEdge.popAckMps.toFixed(0)} | ${r.naive.popAckMps.toFixed(0)} |`)
    }
    lines.push('', `Against the naive queue (issue 11's browser targets: batch 100 push+pop+ack combined at least 5x, batch 1 at least 1x), the median of the runs' own ratios and in how many runs queen-edge was ahead: ${ratios(results.rows)}.`)
    lines.push('', '#### Concurrent callers (group commit)', '',
      'W producers push at once (one partition each), then W consumers pop+ack at once (queue mode, one group, any',
      'partition), in the writer tab. Requests',
      'that arrive while a commit is in flight share the next IndexedDB transaction (docs/decisions.md, "Group commit in',
      'the browser, answers in the group"); the last columns are the broker\'s commits per request answered. The naive',
      'consumer takes a batch by reading and deleting it in one readwrite transaction (no lease). Median of three',
      'interleaved runs.', '')
    lines.push('| batch | W | messages | queen-edge push | naive push | queen-edge pop+ack | naive pop+ack | commits/request push | commits/request pop+ack |', '|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
    for (const r of results.concurrent) {
      lines.push(`| ${r.batch} | ${r.workers} | ${r.n} | ${r.queenEdge.pushMps.toFixed(0)} | ${r.naive.pushMps.toFixed(0)} | ${r.queenEdge.popAckMps.toFixed(0)} | ${r.naive.popAckMps.toFixed(0)} | ${r.queenEdge.pushCommitsPerRequest.toFixed(2)} | ${r.queenEdge.popAckCommitsPerRequest.toFixed(2)} |`)
    }
  }
  lines.push(END)
  const path = resolve(ROOT, 'docs/BENCHMARKS.md')
  let doc
  try {
    doc = await readFile(path, 'utf8')
  } catch {
    doc = '# Benchmarks\n\nEach section is written by the script it names; edit the scripts, not the numbers.\n'
  }
  const section = lines.join('\n')
  const start = doc.indexOf(BEGIN)
  const end = doc.indexOf(END)
  if (start >= 0 && end > start) doc = doc.slice(0, start) + section + doc.slice(end + END.length)
  else doc = doc.replace(/\n*$/, '\n\n') + section + '\n'
  await writeFile(path, doc)
  console.log('  wrote docs/BENCHMARKS.md (js-module section)')
}

if (overBudget) {
  console.log(`  FAIL  size budget: the download for Queen.open is over ${BUDGET_GZ / 1024} KB gzipped`)
  process.exit(1)
}

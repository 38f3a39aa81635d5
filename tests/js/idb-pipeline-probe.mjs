// Probe for pipelined IndexedDB commits (docs/decisions.md, "Pipelined IndexedDB commits (session 7)"):
// what Chromium does with readwrite transactions issued before the previous one completed, on a plain
// IndexedDB database (not through queen-edge, which commits one transaction at a time).
//
//   node tests/js/idb-pipeline-probe.mjs            semantics, then speed
//   node tests/js/idb-pipeline-probe.mjs --semantics-only
//
// Semantics: the *turn fence*, a fence that lets commit s + 1 be issued while commit s is in flight and
// applies it only if s was applied, checked inside IndexedDB with no JavaScript callback (which a page
// being unloaded does not run; docs/decisions.md, "The single-read writer fence: reverted"). Two meta
// keys per writer epoch e, `turn/<e>/0` and `turn/<e>/1`; at rest exactly `turn/<e>/<s mod 2>` exists,
// where s is the number of the next commit. Commit s deletes `turn/<e>/<s mod 2>` and `add`s
// `turn/<e>/<(s + 1) mod 2>`. That `add` fails (and aborts commit s) when the key is there: when commit
// s - 1 did not delete it, i.e. failed, or when a later writer claimed the epoch, which puts both keys.
// So it fences writers and chains commits at two requests (the writer fence alone, IdbStore's unique
// `writer` index, takes one), and allows one commit in flight behind another (not two: with s - 2 failed and s - 1 aborted, commit s
// finds its key absent: shown by the probe too). Checked: the first of two fails; the second of three
// fails; a writer claims the epoch between two; none fails; and a failure with the page navigated away
// right after issuing (beside a control commit in another epoch, which must be kept). Exit code 1 when a
// check fails.
//
// Speed: commits per second of queen-edge's batch-1 push (two puts) with each fence: schema version 1's
// (add and delete of `claim/<e + 1>`) and the `writer` index's (one put), one at a time; the turn fence
// one at a time and two in flight; and of a one-put commit (the naive queue's push) one at a time and two
// in flight. Rounds alternate; medians are printed with the load average. Printed only, never a
// pass/fail criterion.

import { loadavg } from 'node:os'
import { launch, openPage } from './harness.mjs'

const semanticsOnly = process.argv.includes('--semantics-only')
const env = await launch()
let failed = 0
const check = (ok, what) => {
  console.log(`  ${ok ? 'ok  ' : 'FAIL'}  ${what}`)
  if (!ok) failed++
}

// Page helpers, installed in every page: open a database, issue one chained commit.
const helpers = () => {
  window.probeOpen = (name) => new Promise((resolve, reject) => {
    const r = indexedDB.open(name, 1)
    r.onupgradeneeded = () => {
      r.result.createObjectStore('records')
      r.result.createObjectStore('meta').createIndex('writer', 'writer', { unique: true })
    }
    r.onsuccess = () => resolve(r.result)
    r.onerror = () => reject(r.error)
  })
  // Issues commit `s` of writer epoch `epoch` with the turn fence (`fence: 'claim'` or `'index'`: schema
  // version 1's or 2's writer fence, which allow no commit in flight behind another); `fail` adds a request that fails (an `add`
  // of an existing key), as a quota error would.
  window.probeCommit = (db, s, { fail = false, record = `r/${s}`, fence = 'turn', epoch = 1 } = {}) => {
    const t = db.transaction(['records', 'meta'], 'readwrite', { durability: 'strict' })
    const meta = t.objectStore('meta')
    const records = t.objectStore('records')
    if (fence === 'turn') {
      meta.delete(`turn/${epoch}/${s % 2}`)
      meta.add(true, `turn/${epoch}/${(s + 1) % 2}`)
    } else if (fence === 'claim') {
      meta.add(true, `claim/${epoch + 1}`)
      meta.delete(`claim/${epoch + 1}`)
    } else if (fence === 'index') {
      meta.put({ writer: epoch }, `writer/${epoch}`)
    }
    records.put(new Uint8Array(200), record)
    if (fence !== 'none') records.put(new Uint8Array(100), `idx/${s % 5}`)
    if (fail) records.add(new Uint8Array(1), 'taken')
    t.commit()
    return new Promise((resolve) => {
      t.oncomplete = () => resolve('committed')
      t.onabort = () => resolve('aborted: ' + (t.error ? t.error.name : 'abort'))
    })
  }
  // What a writer claiming epoch `epoch + 1` does besides its claim marker: puts both turn keys of
  // `epoch`, so every later commit of that epoch fails.
  window.probeClaim = (db, epoch) => {
    const t = db.transaction('meta', 'readwrite', { durability: 'strict' })
    t.objectStore('meta').put(true, `turn/${epoch}/0`)
    t.objectStore('meta').put(true, `turn/${epoch}/1`)
    t.commit()
    return new Promise((resolve) => { t.oncomplete = () => resolve('claimed') })
  }
  // A fresh database as a claim leaves it, with the key a failing commit collides with.
  window.probeFresh = async (name) => {
    const db = await window.probeOpen(name)
    await new Promise((resolve) => {
      const t = db.transaction(['records', 'meta'], 'readwrite')
      // At rest before commit 0 of epochs 1 and 2: turn/<e>/0 (the claim of the epoch puts it).
      t.objectStore('meta').put(true, 'turn/1/0')
      t.objectStore('meta').put(true, 'turn/2/0')
      t.objectStore('records').put(new Uint8Array(1), 'taken')
      t.oncomplete = resolve
    })
    return db
  }
  window.probeKeys = (db) => new Promise((resolve) => {
    const r = db.transaction('records').objectStore('records').getAllKeys()
    r.onsuccess = () => resolve(r.result.filter((k) => k.startsWith('r/')))
  })
}

try {
  const context = await env.browser.newContext()
  await context.addInitScript(helpers)
  const page = await openPage(context, env.url, 'probe')
  const name = `probe-${Date.now().toString(36)}`

  console.log('  turn fence (Chromium ' + env.browser.version() + '):')
  // Each run issues its steps at once, before the first completes; `fail` steps fail, `claim` is a
  // writer claiming the epoch. Expected: every commit after a failure or a claim aborts.
  const runs = {
    'the first of two fails': ['fail', 'ok'],
    'the second fails, the third behind it': ['ok', 'fail', 'ok'],
    'a writer claims the epoch between two': ['ok', 'claim', 'ok'],
    'none fails, three in a row': ['ok', 'ok', 'ok']
  }
  for (const [what, steps] of Object.entries(runs)) {
    const out = await page.evaluate(async ({ name, steps }) => {
      const db = await window.probeFresh(name)
      let s = 0
      const pending = steps.map((step) => step === 'claim'
        ? window.probeClaim(db, 1)
        : window.probeCommit(db, s++, { fail: step === 'fail' }))
      const outcomes = await Promise.all(pending)
      const keys = await window.probeKeys(db)
      db.close()
      return { outcomes, keys }
    }, { name: `${name}-${what.replace(/ /g, '-')}`, steps })
    const stop = steps.findIndex((step) => step !== 'ok')
    const expected = steps.map((step, k) => step === 'claim' ? 'claimed' : (stop >= 0 && k >= stop ? 'aborted' : 'committed'))
    const kept = expected.filter((e, k) => e === 'committed' && steps[k] === 'ok').length
    check(out.outcomes.every((o, k) => o.startsWith(expected[k])) && out.keys.length === kept,
      `${what}: ${out.outcomes.join(', ')}; records kept: ${JSON.stringify(out.keys)}`)
  }

  // The limit: two commits behind a failed one. The third finds its key absent and commits although the
  // first failed: a pipelined store may issue a commit only while at most one other is in flight.
  const limit = await page.evaluate(async (name) => {
    const db = await window.probeFresh(name)
    const outcomes = await Promise.all([0, 1, 2].map((s) => window.probeCommit(db, s, { fail: s === 0 })))
    db.close()
    return outcomes
  }, `${name}-limit`)
  check(limit[0].startsWith('aborted') && limit[1].startsWith('aborted') && limit[2] === 'committed',
    `the limit: a failing commit with two behind it: ${limit.join(', ')} (the third must not be issued)`)

  // Issue a failing commit and one chained after it, then leave the page at once: no JavaScript of the
  // page runs after the navigation, so only IndexedDB itself can abort the second.
  const unloadName = `${name}-unload`
  await page.evaluate(async (name) => { window.unloadDb = await window.probeFresh(name) }, unloadName)
  await page.evaluate(() => {
    window.probeCommit(window.unloadDb, 0, { fail: true })
    window.probeCommit(window.unloadDb, 1, { record: 'r/after-unload' })
    // The control, in another epoch, so it commits: it shows the page's transactions still ran after
    // the navigation.
    window.probeCommit(window.unloadDb, 0, { record: 'r/control', epoch: 2 })
  })
  await page.goto(env.url + '/index.html')
  await page.waitForFunction(() => window.qeReady === true, null, { timeout: 15000 })
  const afterUnload = await page.evaluate(async (name) => {
    const db = await window.probeOpen(name)
    const keys = await window.probeKeys(db)
    db.close()
    return keys
  }, unloadName)
  check(JSON.stringify(afterUnload) === '["r/control"]', `page left right after issuing a failing commit and a chained one: records kept: ${JSON.stringify(afterUnload)}`)

  if (!semanticsOnly) {
    const load = () => loadavg().map((l) => l.toFixed(1)).join(' ')
    console.log(`  speed (commits/s of raw IndexedDB transactions, durability strict; load average before: ${load()}):`)
    const speed = await page.evaluate(async (name) => {
      const db = await window.probeOpen(name)
      const cases = [
        ['4 requests, claim fence, 1 in flight', { fence: 'claim' }, 1],
        ['3 requests, index fence, 1 in flight', { fence: 'index' }, 1],
        ['4 requests, turn fence, 1 in flight', { fence: 'turn' }, 1],
        ['4 requests, turn fence, 2 in flight', { fence: 'turn' }, 2],
        ['1 put, 1 in flight', { fence: 'none' }, 1],
        ['1 put, 2 in flight', { fence: 'none' }, 2]
      ]
      const n = 200
      const rates = {}
      let failures = 0
      // Turn fence state as a claim of epoch 1 leaves it; every case issues an even number of commits.
      await new Promise((resolve) => {
        const t = db.transaction('meta', 'readwrite')
        t.objectStore('meta').put(true, 'turn/1/0')
        t.oncomplete = resolve
      })
      let s = 0
      for (let round = 0; round < 7; round++) {
        for (const [what, options, depth] of cases) {
          const t0 = performance.now()
          const inflight = []
          for (let i = 0; i < n; i++) {
            inflight.push(window.probeCommit(db, options.fence === 'turn' ? s++ : i, options))
            if (inflight.length >= depth && (await inflight.shift()) !== 'committed') failures++
          }
          for (const outcome of await Promise.all(inflight)) if (outcome !== 'committed') failures++
          ;(rates[what] ||= []).push(Math.round(n / ((performance.now() - t0) / 1000)))
        }
      }
      db.close()
      return { rates, failures }
    }, `${name}-speed`)
    check(speed.failures === 0, `every commit of the speed runs committed (${speed.failures} did not)`)
    for (const [what, rates] of Object.entries(speed.rates)) {
      rates.sort((a, b) => a - b)
      console.log(`    ${what.padEnd(40)} median ${String(rates[rates.length >> 1]).padStart(5)}   (${rates.join(' ')})`)
    }
    console.log(`  load average after: ${load()}`)
  }
} finally {
  await env.close()
}
process.exit(failed ? 1 : 0)

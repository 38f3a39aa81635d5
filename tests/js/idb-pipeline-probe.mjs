// Probe for pipelined IndexedDB commits (docs/decisions.md, "Pipelined IndexedDB commits (session 7)"):
// what Chromium does with readwrite transactions issued before the previous one completed, on a plain
// IndexedDB database (not through queen-edge, which commits one transaction at a time).
//
//   node tests/js/idb-pipeline-probe.mjs            semantics, then speed
//   node tests/js/idb-pipeline-probe.mjs --semantics-only
//
// Semantics: the *chained fence*, which lets commit s be issued while commit s - 1 is in flight and
// applies it only if s - 1 was applied, checked inside IndexedDB with no JavaScript callback (which a
// page being unloaded does not run; docs/decisions.md, "The single-read writer fence: reverted"). It
// extends IdbStore's writer fence (schema version 2: a unique index `writer` on the `meta` store; every
// commit at epoch e puts `writer/<e>` = {writer: e}; the claim of e + 1 deletes it and adds
// `claim/<e + 1>` = {writer: e}) with a second unique index, `chain`: commit s puts `writer/<e>` =
// {writer: e, chain: [e, s]} (the claim puts [e + 1, 0]), still one request. A commit issued while
// commit s - 1 is in flight first puts `chain/<e>` = {chain: [e, s - 2]}: the value `writer/<e>` holds
// exactly when s - 1 was not applied, so the put fails in the unique index and aborts commit s. One
// request more, only for a commit issued behind another; one commit may be in flight behind another, not
// two (with s - 2 failed and s - 1 aborted, commit s finds [e, s - 1] absent: the probe shows it).
// Checked: the first of two fails; the second of three fails; a writer claims the epoch between two;
// none fails; the limit; and a failure with the page navigated away right after issuing (beside a control
// commit in another epoch, which must be kept). Exit code 1 when a check fails.
//
// Speed: commits per second of a commit shaped like queen-edge's batch-1 push (two puts) with schema
// version 1's fence (add and delete of `claim/<e + 1>`) and with version 2's (one put), one at a time;
// with the chained fence two in flight; and of a one-put commit (the naive queue's push) one at a time
// and two in flight. Rounds alternate; medians are printed with the load average. Printed only, never a
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

// Page helpers, installed in every page.
const helpers = () => {
  // `chain: false`: IdbStore's schema (only the `writer` index), for the fences that need no chain.
  window.probeOpen = (name, { chain = true } = {}) => new Promise((resolve, reject) => {
    const r = indexedDB.open(name, 1)
    r.onupgradeneeded = () => {
      r.result.createObjectStore('records')
      const meta = r.result.createObjectStore('meta')
      meta.createIndex('writer', 'writer', { unique: true })
      if (chain) meta.createIndex('chain', 'chain', { unique: true })
    }
    r.onsuccess = () => resolve(r.result)
    r.onerror = () => reject(r.error)
  })
  const settled = (t, done) => new Promise((resolve) => {
    t.oncomplete = () => resolve(done)
    t.onabort = () => resolve('aborted: ' + (t.error ? t.error.name : 'abort'))
  })
  // Issues commit `s` (from 1) of writer epoch `epoch`. `fence`: 'chain' (the chained fence; `behind`:
  // commit s - 1 is in flight), 'index' (schema version 2's writer fence), 'claim' (version 1's), 'none'
  // (one put, the naive push). `fail` adds a request that fails (an `add` of an existing key), as a quota
  // error would.
  window.probeCommit = (db, s, { fail = false, record = `r/${s}`, fence = 'chain', behind = false, epoch = 1 } = {}) => {
    const t = db.transaction(['records', 'meta'], 'readwrite', { durability: 'strict' })
    const meta = t.objectStore('meta')
    const records = t.objectStore('records')
    if (fence === 'chain') {
      // Before this commit's own fence put, which replaces the value checked.
      if (behind) meta.put({ chain: [epoch, s - 2] }, `chain/${epoch}`)
      meta.put({ writer: epoch, chain: [epoch, s] }, `writer/${epoch}`)
    } else if (fence === 'index') {
      meta.put({ writer: epoch }, `writer/${epoch}`)
    } else if (fence === 'claim') {
      meta.add(true, `claim/${epoch + 1}`)
      meta.delete(`claim/${epoch + 1}`)
    }
    records.put(new Uint8Array(200), record)
    if (fence !== 'none') records.put(new Uint8Array(100), `idx/${s % 5}`)
    if (fail) records.add(new Uint8Array(1), 'taken')
    t.commit()
    return settled(t, 'committed')
  }
  // A writer claiming epoch `epoch`: fences `epoch - 1` and starts the chain of `epoch`.
  window.probeClaim = (db, epoch) => {
    const t = db.transaction('meta', 'readwrite', { durability: 'strict' })
    const meta = t.objectStore('meta')
    meta.delete(`writer/${epoch - 1}`)
    meta.add({ writer: epoch - 1 }, `claim/${epoch}`)
    meta.put({ writer: epoch, chain: [epoch, 0] }, `writer/${epoch}`)
    t.commit()
    return settled(t, 'claimed')
  }
  // A fresh database with epochs 1 and 5 claimed, and the key a failing commit collides with.
  window.probeFresh = async (name) => {
    const db = await window.probeOpen(name)
    await window.probeClaim(db, 1)
    await window.probeClaim(db, 5)
    await new Promise((resolve) => {
      const t = db.transaction('records', 'readwrite')
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

  console.log('  chained fence (Chromium ' + env.browser.version() + '):')
  // Each run issues its steps at once, before the first completes, each commit behind the one before;
  // `fail` steps fail, `claim` is a writer claiming epoch 2. Expected: every commit after a failure or a
  // claim aborts.
  const runs = {
    'the first of two fails': ['fail', 'ok'],
    'the second fails, the third behind it': ['ok', 'fail', 'ok'],
    'a writer claims the epoch between two': ['ok', 'claim', 'ok'],
    'none fails, three in a row': ['ok', 'ok', 'ok']
  }
  for (const [what, steps] of Object.entries(runs)) {
    const out = await page.evaluate(async ({ name, steps }) => {
      const db = await window.probeFresh(name)
      let s = 1
      const pending = steps.map((step) => step === 'claim'
        ? window.probeClaim(db, 2)
        : window.probeCommit(db, s, { fail: step === 'fail', behind: s++ > 1 }))
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

  // The limit: two commits behind a failed one. The third checks only the second, which aborted without
  // changing the chain, and commits although the first failed: a pipelined store may issue a commit only
  // while at most one other is in flight.
  const limit = await page.evaluate(async (name) => {
    const db = await window.probeFresh(name)
    const outcomes = await Promise.all([1, 2, 3].map((s) => window.probeCommit(db, s, { fail: s === 1, behind: s > 1 })))
    db.close()
    return outcomes
  }, `${name}-limit`)
  check(limit[0].startsWith('aborted') && limit[1].startsWith('aborted') && limit[2] === 'committed',
    `the limit: a failing commit with two behind it: ${limit.join(', ')} (the third must not be issued)`)

  // Issue a failing commit and one behind it, then leave the page at once: no JavaScript of the page runs
  // after the navigation, so only IndexedDB itself can abort the second.
  const unloadName = `${name}-unload`
  await page.evaluate(async (name) => { window.unloadDb = await window.probeFresh(name) }, unloadName)
  await page.evaluate(() => {
    window.probeCommit(window.unloadDb, 1, { fail: true })
    window.probeCommit(window.unloadDb, 2, { record: 'r/after-unload', behind: true })
    // The control, in another epoch, so it commits: it shows the page's transactions still ran after
    // the navigation.
    window.probeCommit(window.unloadDb, 1, { record: 'r/control', epoch: 5 })
  })
  await page.goto(env.url + '/index.html')
  await page.waitForFunction(() => window.qeReady === true, null, { timeout: 15000 })
  const afterUnload = await page.evaluate(async (name) => {
    const db = await window.probeOpen(name)
    const keys = await window.probeKeys(db)
    db.close()
    return keys
  }, unloadName)
  check(JSON.stringify(afterUnload) === '["r/control"]', `page left right after issuing a failing commit and one behind it: records kept: ${JSON.stringify(afterUnload)}`)

  if (!semanticsOnly) {
    const load = () => loadavg().map((l) => l.toFixed(1)).join(' ')
    console.log(`  speed (commits/s of raw IndexedDB transactions, durability strict; load average before: ${load()}):`)
    const speed = await page.evaluate(async (name) => {
      // The chained fence's database has the `chain` index; the others have IdbStore's schema.
      const chained = await window.probeOpen(name + '-chain')
      const plain = await window.probeOpen(name, { chain: false })
      await window.probeClaim(chained, 1)
      await window.probeClaim(plain, 1)
      const cases = [
        ['2 puts + claim fence (4 requests), 1 in flight', { fence: 'claim' }, 1],
        ['2 puts + index fence (3 requests), 1 in flight', { fence: 'index' }, 1],
        ['2 puts + chained fence (4 requests), 2 in flight', { fence: 'chain' }, 2],
        ['1 put, 1 in flight', { fence: 'none' }, 1],
        ['1 put, 2 in flight', { fence: 'none' }, 2]
      ]
      const n = 200
      const rates = {}
      let failures = 0
      let s = 0
      for (let round = 0; round < 7; round++) {
        for (const [what, options, depth] of cases) {
          const t0 = performance.now()
          const inflight = []
          for (let i = 0; i < n; i++) {
            s++
            const db = options.fence === 'chain' ? chained : plain
            inflight.push(window.probeCommit(db, s, { ...options, behind: inflight.length > 0 }))
            if (inflight.length >= depth && (await inflight.shift()) !== 'committed') failures++
          }
          for (const outcome of await Promise.all(inflight)) if (outcome !== 'committed') failures++
          ;(rates[what] ||= []).push(Math.round(n / ((performance.now() - t0) / 1000)))
        }
      }
      chained.close()
      plain.close()
      return { rates, failures }
    }, `${name}-speed`)
    check(speed.failures === 0, `every commit of the speed runs committed (${speed.failures} did not)`)
    for (const [what, rates] of Object.entries(speed.rates)) {
      rates.sort((a, b) => a - b)
      console.log(`    ${what.padEnd(50)} median ${String(rates[rates.length >> 1]).padStart(5)}   (${rates.join(' ')})`)
    }
    console.log(`  load average after: ${load()}`)
  }
} finally {
  await env.close()
}
process.exit(failed ? 1 : 0)

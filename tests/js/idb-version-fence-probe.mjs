// Checks, in headless Chromium, what a writer fence made of IndexedDB version changes would rest on (docs/decisions.md,
// "The browser's batch-1 push against the naive queue's (session 17) — idb-b1"): a writer takes over by opening the
// database at its version + 1; every other connection is sent `versionchange` and (as src/store/idb.rs's
// connections do) closes itself, so a stale writer's later commits cannot be issued at all, and commits carry no
// fence request. Not used by the module: a probe of the platform's semantics, plain IndexedDB only.
//
//   node tests/js/idb-version-fence-probe.mjs
//
// Checks (exit code 1 when one fails):
// 1. after the take-over, the stale connection can start no transaction, and nothing it tries lands;
// 2. a commit the stale writer issued before the take-over's open request lands, and the new writer reads it;
// 3. a commit the stale writer issues in the same task right after the take-over's open request (before its
//    `versionchange` event can run) lands before the upgrade: the new writer reads it after opening;
// 4. a stale connection that does not close on `versionchange` blocks the take-over (its `blocked` event fires,
//    and the open waits): the stale writer's commits meanwhile land, and the take-over completes once it closes,
//    reading them.
// Printed: each check's outcome. A probe: it measures nothing.
import { launch, openPage, uniqueName } from './harness.mjs'

const env = await launch()
let failed = 0
try {
  const context = await env.browser.newContext()
  const page = await openPage(context, env.url, 'version-fence')
  const results = await page.evaluate(async ({ prefix }) => {
    const out = []
    const check = (name, ok, detail) => out.push({ name, ok: !!ok, detail })
    // Opens `name` at `version` (creating `records` in the first upgrade). `closeOnChange`: the connection
    // closes itself on `versionchange`, as IdbStore's do. Resolves to {db, blocked} once open.
    const open = (name, version, closeOnChange = true, onBlocked = () => {}) => new Promise((res, rej) => {
      const r = indexedDB.open(name, version)
      let blocked = false
      r.onupgradeneeded = (e) => {
        if (e.oldVersion < 1) r.result.createObjectStore('records')
      }
      r.onblocked = () => { blocked = true; onBlocked() }
      r.onsuccess = () => {
        const db = r.result
        if (closeOnChange) db.onversionchange = () => db.close()
        res({ db, get blocked() { return blocked } })
      }
      r.onerror = () => rej(r.error)
    })
    const commit = (db, key) => new Promise((res) => {
      let t
      try {
        t = db.transaction('records', 'readwrite', { durability: 'strict' })
      } catch (e) {
        return res('threw ' + e.name)
      }
      t.objectStore('records').put(new Uint8Array([1, 2, 3]), key)
      t.commit()
      t.oncomplete = () => res('complete')
      t.onabort = () => res('abort ' + (t.error && t.error.name))
    })
    const keys = (db) => new Promise((res) => {
      const r = db.transaction('records', 'readonly').objectStore('records').getAllKeys()
      r.onsuccess = () => res(r.result)
    })

    // 1 and 2.
    {
      const name = `${prefix}-1`
      const stale = (await open(name, 1)).db
      const before = commit(stale, 'before')
      // Bounded: a stale connection that does not close would block the take-over for good.
      const writer = await Promise.race([open(name, 2).then((x) => x.db), new Promise((r) => setTimeout(() => r(null), 3000))])
      if (!writer) {
        check('1. the take-over completes and the stale connection starts no transaction after it', false, 'the take-over was still blocked after 3 s')
        stale.close()
        return out
      }
      const beforeOutcome = await before
      const after = await commit(stale, 'after')
      const seen = await keys(writer)
      check('1. the take-over completes and the stale connection starts no transaction after it', after.startsWith('threw') && !seen.includes('after'), `stale commit: ${after}; keys: ${seen}`)
      check('2. a commit issued before the take-over lands and is read by the new writer', beforeOutcome === 'complete' && seen.includes('before'), `${beforeOutcome}; keys: ${seen}`)
      writer.close()
      indexedDB.deleteDatabase(name)
    }
    // 3.
    {
      const name = `${prefix}-3`
      const stale = (await open(name, 1)).db
      const takeOver = open(name, 2)
      const sameTask = commit(stale, 'same-task')
      const writer = (await takeOver).db
      const outcome = await sameTask
      const seen = await keys(writer)
      check('3. a commit issued right after the take-over request lands before the upgrade', outcome === 'complete' && seen.includes('same-task'), `${outcome}; keys: ${seen}`)
      writer.close()
      indexedDB.deleteDatabase(name)
    }
    // 4.
    {
      const name = `${prefix}-4`
      const stale = (await open(name, 1, false)).db
      let blockedSeen = false
      let opened = false
      const takeOver = open(name, 2, true, () => { blockedSeen = true }).then((x) => { opened = true; return x })
      await new Promise((r) => setTimeout(r, 200))
      const during = await commit(stale, 'while-blocked')
      const stillWaiting = !opened
      stale.close()
      const writer = (await takeOver).db
      const seen = await keys(writer)
      check('4. a stale connection that stays open blocks the take-over; its commits land before it', blockedSeen && stillWaiting && during === 'complete' && seen.includes('while-blocked'), `blocked ${blockedSeen}, waiting ${stillWaiting}, commit ${during}; keys: ${seen}`)
      writer.close()
      indexedDB.deleteDatabase(name)
    }
    return out
  }, { prefix: uniqueName('vfence') })
  for (const r of results) {
    console.log(`${r.ok ? 'ok  ' : 'FAIL'} ${r.name} (${r.detail})`)
    if (!r.ok) failed++
  }
} finally {
  await env.close()
}
process.exit(failed ? 1 : 0)

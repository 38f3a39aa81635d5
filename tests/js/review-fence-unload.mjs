// Review check of the one-request writer fence (src/store/idb.rs, "Fencing", schema version 2) while a
// page unloads: a stale writer (epoch 1, after the claim of 2) issues its commit exactly as IdbStore
// does (the fence put `writer/1` = {writer: 1}, then the change, then `commit()`), and in the same task
// the page navigates away, so no JavaScript of the page runs afterwards. A control commit of the current
// writer (epoch 2) is issued in the same task. Expected: the control is kept, the stale change is not.
// The same run with the claim marker written as `true` (schema version 1's marker) shows the check can
// fail: there the stale change is kept.
//
//   node tests/js/review-fence-unload.mjs        exit code 1 when a check fails
//
// Plain IndexedDB on the test server's origin; needs no built module.

import { launch } from './harness.mjs'

const env = await launch()
let failed = 0
const check = (ok, what) => {
  console.log(`  ${ok ? 'ok  ' : 'FAIL'}  ${what}`)
  if (!ok) failed++
}

async function run(markerAsTrue) {
  const context = await env.browser.newContext()
  const page = await context.newPage()
  await page.goto(env.url + '/index.html')
  const name = `review-unload-${markerAsTrue ? 'true' : 'fence'}-${Date.now().toString(36)}`
  await page.evaluate(async ({ name, markerAsTrue }) => {
    const done = (t) => new Promise((resolve, reject) => { t.oncomplete = resolve; t.onabort = () => reject(t.error) })
    const db = await new Promise((resolve, reject) => {
      const r = indexedDB.open(name, 2)
      r.onupgradeneeded = () => {
        r.result.createObjectStore('records')
        const meta = r.result.createObjectStore('meta')
        meta.put(1, 'format')
        meta.createIndex('writer', 'writer', { unique: true })
      }
      r.onsuccess = () => resolve(r.result)
      r.onerror = () => reject(r.error)
    })
    const claim = (n) => {
      const t = db.transaction('meta', 'readwrite')
      const meta = t.objectStore('meta')
      meta.delete(`writer/${n - 1}`)
      meta.add(markerAsTrue ? true : { writer: n - 1 }, `claim/${n}`)
      meta.put(n, 'epoch')
      t.commit()
      return done(t)
    }
    window.commitAt = (epoch, key) => {
      const t = db.transaction(['records', 'meta'], 'readwrite', { durability: 'strict' })
      t.objectStore('meta').put({ writer: epoch }, `writer/${epoch}`)
      t.objectStore('records').put(new Uint8Array(8), key)
      t.commit()
      return t
    }
    await claim(1)
    await done(window.commitAt(1, 'r/1'))
    await claim(2)
  }, { name, markerAsTrue })
  // Issue both commits and leave in the same task.
  await page.evaluate((url) => {
    window.commitAt(1, 'r/stale')
    window.commitAt(2, 'r/control')
    location.href = url
  }, env.url + '/index.html?after').catch(() => {})
  await page.waitForURL(/after/)
  await page.waitForLoadState('load')
  const keys = await page.evaluate(async (name) => {
    const db = await new Promise((resolve, reject) => {
      const r = indexedDB.open(name)
      r.onsuccess = () => resolve(r.result)
      r.onerror = () => reject(r.error)
    })
    const keys = await new Promise((resolve) => {
      const r = db.transaction('records').objectStore('records').getAllKeys()
      r.onsuccess = () => resolve(r.result)
    })
    db.close()
    indexedDB.deleteDatabase(name)
    return keys
  }, name)
  await context.close()
  return keys
}

try {
  const fenced = await run(false)
  check(JSON.stringify(fenced) === '["r/1","r/control"]',
    `stale commit issued as the page leaves, claim marker {writer: 1}: records kept ${JSON.stringify(fenced)}`)
  const unfenced = await run(true)
  check(unfenced.includes('r/stale') && unfenced.includes('r/control'),
    `the same with the marker written as true (no fence): records kept ${JSON.stringify(unfenced)} (the stale one must be there)`)
} finally {
  await env.close()
}
process.exit(failed ? 1 : 0)

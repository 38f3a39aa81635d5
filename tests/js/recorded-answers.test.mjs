// Recorded requests under group commit (review of branch browser-size, commits 50b8a83 and 9d0d2c0): a
// recorded (forwarded) request's answer must be written in the commit that holds its changes, or not at
// all. Drives the broker's wasm class directly (the views chunk exports it) in headless Chromium, with a
// real IndexedDB commit failure: Chromium's DevTools protocol lowers the origin's quota, so a big push
// fails with QuotaExceededError while small ones still commit.
//
//   node tests/js/recorded-answers.test.mjs      (after scripts/build-js)

import { launch, openPage, uniqueName, assertEq, runTests } from './harness.mjs'

/** Runs in the page: the scenario, reported as plain data. */
async function scenario(name) {
  const glue = await import('/vendor/queen-edge/queen_edge_views.js')
  await glue.default()
  const broker = await glue.WasmBroker.open(name, { persist: false })
  const enc = new TextEncoder()
  const dec = new TextDecoder()
  const headers = { 'Content-Type': 'application/json' }
  const body = (items) => enc.encode(JSON.stringify({ items }))
  // Random text so nothing can shrink it below the quota.
  const noise = (n) => {
    const bytes = new Uint8Array(n)
    for (let o = 0; o < n; o += 65536) crypto.getRandomValues(bytes.subarray(o, o + 65536))
    return Array.from(bytes, (b) => String.fromCharCode(33 + (b % 90))).join('')
  }
  const outcome = (p) => p.then(
    (r) => ({ status: r.status, body: dec.decode(r.body) }),
    (e) => ({ error: e.code, message: e.message })
  )
  const big = body([0, 1, 2].map((i) => ({ queue: 'big', payload: { i, noise: noise(1536 * 1024) } })))
  const id = String(Date.now()).padStart(15, '0') + ':review:1'

  // R: a recorded push; A: a big local push, whose commit goes in flight and then fails (quota). R is
  // sent first so its look-up of an earlier answer (a readonly transaction on meta) is created before
  // A's commit; R is then applied while A's commit is in flight, so its changes form the next group,
  // which A's failure takes with it.
  const r = outcome(broker.handle('POST', '/api/v1/push', headers, body([{ queue: 'q', payload: { n: 'R' } }]), id))
  const a = outcome(broker.handle('POST', '/api/v1/push', headers, big))
  const out = { a: await a, r: await r }
  // The test lifts the quota again here (later commits must not fail for it), then lets us go on.
  await new Promise((resolve) => { window.reviewContinue = resolve })
  // B: a later small local push, which commits.
  out.b = await outcome(broker.handle('POST', '/api/v1/push', headers, body([{ queue: 'q', payload: { n: 'B' } }])))

  // What IndexedDB holds under R's id.
  const db = await new Promise((resolve, reject) => {
    const req = indexedDB.open(name)
    req.onsuccess = () => resolve(req.result)
    req.onerror = () => reject(req.error)
  })
  const record = await new Promise((resolve, reject) => {
    const req = db.transaction('meta').objectStore('meta').get('req/' + id)
    req.onsuccess = () => resolve(req.result)
    req.onerror = () => reject(req.error)
  })
  db.close()
  out.record = record === undefined ? null : { status: record.status, body: dec.decode(record.body) }

  // The follower sends R again under the same id (as it does to the next writer when the first one
  // died before its answer arrived), then everything in q is popped.
  out.retry = await outcome(broker.handle('POST', '/api/v1/push', headers, body([{ queue: 'q', payload: { n: 'R' } }]), id))
  out.replayed = broker.counters().replayed
  const popped = await outcome(broker.handle('GET', '/api/v1/pop/queue/q?batch=10', {}, undefined))
  out.popped = popped.status === 200 ? JSON.parse(popped.body).messages.map((m) => m.data.n).sort() : popped
  broker.close()
  broker.free()
  return out
}

/**
 * Runs in the page: a recorded pop on an encrypted queue, whose answer waits for the cipher after the
 * pop was applied (a second await after the command), while a concurrent commit fails.
 */
async function encryptedPop(name) {
  const glue = await import('/vendor/queen-edge/queen_edge_views.js')
  await glue.default()
  // A stand-in for js/local.js's cipher (same interface, src/bindings/cipher.rs): base64 instead of AES-GCM,
  // and `open` answers only once `release` is called, so the test decides when the pop's answer is made.
  let release
  const released = new Promise((resolve) => { release = resolve })
  const cipher = {
    seal: (texts) => Promise.resolve(texts.map((t) => JSON.stringify({ encrypted: btoa(t), iv: 'aXY=', authTag: 'dGFn' }))),
    open: async (texts) => { await released; return texts.map((t) => atob(JSON.parse(t).encrypted)) }
  }
  const broker = await glue.WasmBroker.open(name, { persist: false, cipher })
  const enc = new TextEncoder()
  const dec = new TextDecoder()
  const headers = { 'Content-Type': 'application/json' }
  const json = (value) => enc.encode(JSON.stringify(value))
  const noise = (n) => {
    const bytes = new Uint8Array(n)
    for (let o = 0; o < n; o += 65536) crypto.getRandomValues(bytes.subarray(o, o + 65536))
    return Array.from(bytes, (b) => String.fromCharCode(33 + (b % 90))).join('')
  }
  const outcome = (p) => p.then(
    (r) => ({ status: r.status, body: r.body.length ? JSON.parse(dec.decode(r.body)) : null }),
    (e) => ({ error: e.code, message: e.message })
  )
  const out = {}
  out.configured = (await outcome(broker.handle('POST', '/api/v1/configure', headers, json({ queue: 'enc', options: { encryptionEnabled: true } })))).status
  out.pushed = (await outcome(broker.handle('POST', '/api/v1/push', headers, json({ items: [{ queue: 'enc', payload: { secret: 1 } }] })))).status
  const big = json({ items: [0, 1, 2].map((i) => ({ queue: 'big', payload: { i, noise: noise(1536 * 1024) } })) })
  const id = String(Date.now()).padStart(15, '0') + ':review:2'
  // R (recorded pop, sent first: see `scenario`) is applied while A's commit is in flight, then waits
  // for the cipher; A's commit fails; only then may the cipher answer.
  const r = outcome(broker.handle('GET', '/api/v1/pop/queue/enc?batch=1', {}, undefined, id))
  out.a = (await outcome(broker.handle('POST', '/api/v1/push', headers, big))).status
  release()
  const popped = await r
  const data = (answer) => answer.body && Array.isArray(answer.body.messages) ? answer.body.messages.map((m) => m.data) : answer.body
  out.r = popped.error ? popped : { status: popped.status, messages: data(popped) }
  // The test lifts the quota again here (later commits must not fail for it), then lets us go on.
  await new Promise((resolve) => { window.reviewContinue = resolve })
  // Another consumer pops the same queue: a message leased by an answered pop is not handed out again.
  const again = await outcome(broker.handle('GET', '/api/v1/pop/queue/enc?batch=1', {}, undefined))
  out.again = again.error ? again : { status: again.status, messages: data(again) }
  out.replayed = broker.counters().replayed
  broker.close()
  broker.free()
  return out
}

const tests = [
  ['a recorded request and its answer are stored together or not at all, when the commit its changes joined fails', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'recorded')
    const name = uniqueName('recorded')
    // The override only bites when set before the origin first uses IndexedDB (tests/js/browser.test.mjs).
    const cdp = await context.newCDPSession(page)
    await cdp.send('Storage.overrideQuotaForOrigin', { origin: url, quotaSize: 3 * 1024 * 1024 })
    const running = page.evaluate(`(${scenario.toString()})(${JSON.stringify(name)})`)
    await page.waitForFunction(() => typeof window.reviewContinue === 'function', null, { timeout: 30000 })
    await cdp.send('Storage.overrideQuotaForOrigin', { origin: url })
    await page.evaluate(() => window.reviewContinue())
    const r = await running
    await context.close()
    console.log('      seen:', JSON.stringify({ ...r, a: r.a.error ? r.a : { status: r.a.status } }))
    assertEq(r.a.status, 507, 'set-up: the big push is refused by the quota')
    assertEq(r.b.status, 201, 'a later push commits')
    if (r.r.error) {
      // R failed with the group its changes were in: its answer must not be stored (it goes in the
      // commit that holds its changes, or nowhere), and its retry must run it, not replay a success.
      assertEq(r.record, null, 'no recorded answer for a request whose changes were not written')
      assertEq(r.replayed, 0, 'the retry is not answered from a record')
    } else {
      // R committed (without group commit it does not share A's commit): its retry is its record.
      assertEq(r.record, { status: r.r.status, body: r.r.body }, 'R\'s answer is recorded')
      assertEq(r.replayed, 1, 'the retry is answered from the record')
    }
    // Either way R's message is stored exactly once.
    assertEq(r.popped, ['B', 'R'], 'R is stored once, after R and its retry')
  }],

  ['a recorded pop answers only after the commit of its lease succeeded', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'recorded-pop')
    const name = uniqueName('recorded-pop')
    const cdp = await context.newCDPSession(page)
    await cdp.send('Storage.overrideQuotaForOrigin', { origin: url, quotaSize: 3 * 1024 * 1024 })
    const running = page.evaluate(`(${encryptedPop.toString()})(${JSON.stringify(name)})`)
    await page.waitForFunction(() => typeof window.reviewContinue === 'function', null, { timeout: 30000 })
    await cdp.send('Storage.overrideQuotaForOrigin', { origin: url })
    await page.evaluate(() => window.reviewContinue())
    const r = await running
    await context.close()
    console.log('      seen:', JSON.stringify(r))
    assertEq([r.configured, r.pushed, r.a], [200, 201, 507], 'set-up: the encrypted queue, its message, the refused big push')
    // Either the pop fails (rejected, or a 5xx answer: its lease was not written), or it succeeded and
    // the message stays leased.
    if (!r.r.error && r.r.status < 500) {
      assertEq(r.r, { status: 200, messages: [{ secret: 1 }] }, 'the recorded pop got the message')
      assertEq(r.again.status, 204, 'the message the recorded pop was answered with is not handed out again')
    }
  }]
]

const env = await launch()
let failed
try {
  failed = await runTests(tests, env, process.argv.slice(2))
} finally {
  await env.close()
}
console.log(failed ? `recorded-answers tests: ${failed} failed` : 'recorded-answers tests: all passed')
process.exit(failed ? 1 : 0)

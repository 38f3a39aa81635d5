// Recorded requests under group commit (review of branch browser-size, commits 50b8a83 and 9d0d2c0;
// then branch idb-group, which carries each answer inside its group): a recorded (forwarded) request's
// answer must be written in the commit that holds its changes, or not at all. Drives the broker's wasm
// class directly (the views chunk exports it) in headless Chromium, with a real IndexedDB commit
// failure: Chromium's DevTools protocol lowers the origin's quota, so a big push fails with
// QuotaExceededError while small ones still commit.
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
  out.record = await readRecord(name, id)

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
  // What IndexedDB holds under R's id, now that later commits (the second pop's) went through.
  out.record = await readRecord(name, id)
  broker.close()
  broker.free()
  return out
}

/**
 * Runs in the page: the answer recorded under request id `id` in database `name` as `{ status, body }`
 * (body as text), or null. Answers are stored as bytes (src/bindings/answer.rs: status and header count,
 * 2 bytes each, little-endian; each header's name and value, 4 bytes of length then the text; the body).
 */
async function readRecord(name, id) {
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
  if (record === undefined) return null
  if (!(record instanceof Uint8Array)) return { status: record.status, body: new TextDecoder().decode(record.body) }
  const view = new DataView(record.buffer, record.byteOffset, record.byteLength)
  let at = 4
  for (let h = 0; h < view.getUint16(2, true) * 2; h++) at += 4 + view.getUint32(at, true)
  return { status: view.getUint16(0, true), body: new TextDecoder().decode(record.subarray(at)) }
}

/**
 * Runs in the page: recorded and local pushes applied while one commit is in flight form the next group;
 * with `big`, a push in that group is too big for the quota, so the group's commit fails.
 */
async function sharedGroup(name, big) {
  const glue = await import('/vendor/queen-edge/queen_edge_views.js')
  await glue.default()
  const broker = await glue.WasmBroker.open(name, { persist: false })
  const enc = new TextEncoder()
  const dec = new TextDecoder()
  const headers = { 'Content-Type': 'application/json' }
  const body = (items) => enc.encode(JSON.stringify({ items }))
  const noise = (n) => {
    const bytes = new Uint8Array(n)
    for (let o = 0; o < n; o += 65536) crypto.getRandomValues(bytes.subarray(o, o + 65536))
    return Array.from(bytes, (b) => String.fromCharCode(33 + (b % 90))).join('')
  }
  const outcome = (p) => p.then(
    (r) => ({ status: r.status, body: dec.decode(r.body) }),
    (e) => ({ error: e.code, message: e.message })
  )
  const push = (n, id) => outcome(broker.handle('POST', '/api/v1/push', headers, body([{ queue: 'q', payload: { n } }]), id))
  const ids = [0, 1, 2].map((k) => String(Date.now()).padStart(15, '0') + ':group:' + k)
  const commits0 = broker.counters().commits
  // All issued in one task. The recorded ones first: their look-ups of an earlier answer (readonly
  // transactions on meta) are created before S's commit, so S's commit waits for them, and they are
  // applied while it is in flight, with A and L: R0..R2, A and L form the next group.
  const rs = ids.map((id, k) => push('R' + k, id))
  const s0 = push('S')
  const a = big
    ? outcome(broker.handle('POST', '/api/v1/push', headers, body([0, 1, 2].map((i) => ({ queue: 'big', payload: { i, noise: noise(1536 * 1024) } })))))
    : push('A')
  const l = push('L')
  const out = { s: await s0, a: await a, l: await l, rs: await Promise.all(rs) }
  out.commits = broker.counters().commits - commits0
  if (big) {
    // The test lifts the quota again here (later commits must not fail for it), then lets us go on.
    await new Promise((resolve) => { window.reviewContinue = resolve })
  }
  out.records = []
  for (const id of ids) out.records.push(await readRecord(name, id))
  // The follower sends each R again under its id (as to the next writer when the first died).
  out.retries = await Promise.all(ids.map((id, k) => push('R' + k, id)))
  out.replayed = broker.counters().replayed
  const popped = await outcome(broker.handle('GET', '/api/v1/pop/queue/q?batch=50', {}, undefined))
  out.popped = popped.status === 200 ? JSON.parse(popped.body).messages.map((m) => m.data.n).sort() : popped
  broker.close()
  broker.free()
  return out
}

/**
 * Runs in the page (review-idb): a recorded bulk dead-letter replay of 101 rows (src/http/dlq_bulk.rs: two
 * engine commands, 100 rows then 1), whose second chunk, the one big row, is refused by the quota.
 */
async function bulkReplay(name, payloadBytes, retry) {
  const glue = await import('/vendor/queen-edge/queen_edge_views.js')
  await glue.default()
  let broker = await glue.WasmBroker.open(name, { persist: false })
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
  const call = (method, path, body, id) => outcome(broker.handle(method, path, body ? headers : {}, body ? json(body) : undefined, id))
  const out = {}
  const small = Array.from({ length: 100 }, (_, i) => ({ queue: 'd', payload: { i }, transactionId: 'd-' + i }))
  out.pushed = [(await call('POST', '/api/v1/push', { items: small })).status,
    (await call('POST', '/api/v1/push', { items: [{ queue: 'd', payload: { i: 100, noise: noise(payloadBytes) }, transactionId: 'd-100' }] })).status]
  out.filed = 0
  for (let k = 0; k < 101; k++) {
    const popped = await call('GET', '/api/v1/pop/queue/d')
    const m = popped.body.messages[0]
    const acked = await call('POST', '/api/v1/ack', { transactionId: m.transactionId, partitionId: m.partitionId, status: 'dlq', error: 'boom', leaseId: popped.body.leaseId })
    if (acked.status === 200) out.filed++
  }
  const id = String(Date.now()).padStart(15, '0') + ':review:bulk'
  out.replay = await call('POST', '/api/v1/dlq/replay', { queue: 'd' }, id)
  // The test lifts the quota again here, then lets us go on.
  await new Promise((resolve) => { window.reviewContinue = resolve })
  out.record = await readRecord(name, id)
  // With `retry`: the follower sends it again under its id, to the same writer (as after a lost answer).
  if (retry) out.retry = await call('POST', '/api/v1/dlq/replay', { queue: 'd' }, id)
  // What IndexedDB holds: a broker opened again reads it all from storage.
  broker.close()
  broker.free()
  broker = await glue.WasmBroker.open(name, { persist: false })
  out.storedDeadLetters = (await call('GET', '/api/v1/dlq?queue=d&limit=1000')).body.total
  const replayed = await call('GET', '/api/v1/pop/queue/d?batch=200')
  out.storedReplays = replayed.status === 200 ? replayed.body.messages.length : 0
  broker.close()
  broker.free()
  return out
}

/**
 * Runs in the page: recorded (forwarded) pops of an `encryptionEnabled` queue and of a plain one, on a
 * broker with a stand-in cipher (base64 instead of AES-GCM, js/local.js's interface), their retries under
 * the same ids, and every value of the `meta` store (where recorded answers live) as text; then, as the
 * control that the scan sees plaintext, a recorded pop on a broker without a key.
 */
async function encryptedRecords(name, secret, visible, autoSecret) {
  const glue = await import('/vendor/queen-edge/queen_edge_views.js')
  await glue.default()
  const utf8 = (t) => String.fromCharCode(...new TextEncoder().encode(t))
  const unutf8 = (b) => new TextDecoder().decode(Uint8Array.from(b, (c) => c.charCodeAt(0)))
  const cipher = {
    seal: (texts) => Promise.resolve(texts.map((t) => JSON.stringify({ encrypted: btoa(utf8(t)), iv: 'aXY=', authTag: 'dGFn' }))),
    open: (texts) => Promise.resolve(texts.map((t) => unutf8(atob(JSON.parse(t).encrypted))))
  }
  const enc = new TextEncoder()
  const dec = new TextDecoder()
  const headers = { 'Content-Type': 'application/json' }
  const json = (value) => enc.encode(JSON.stringify(value))
  const outcome = (p) => p.then(
    (r) => ({ status: r.status, body: r.body.length ? JSON.parse(dec.decode(r.body)) : null }),
    (e) => ({ error: e.code, message: e.message })
  )
  const data = (answer) => answer.body && Array.isArray(answer.body.messages) ? answer.body.messages.map((m) => m.data) : answer
  const metaText = async (db) => {
    const handle = await new Promise((resolve, reject) => {
      const req = indexedDB.open(db)
      req.onsuccess = () => resolve(req.result)
      req.onerror = () => reject(req.error)
    })
    const values = await new Promise((resolve, reject) => {
      const req = handle.transaction('meta').objectStore('meta').getAll()
      req.onsuccess = () => resolve(req.result)
      req.onerror = () => reject(req.error)
    })
    handle.close()
    return values.map((v) => v instanceof Uint8Array ? dec.decode(v) : JSON.stringify(v)).join('\n')
  }
  const out = {}
  const broker = await glue.WasmBroker.open(name, { persist: false, cipher })
  out.configured = (await outcome(broker.handle('POST', '/api/v1/configure', headers, json({ queue: 'enc', options: { encryptionEnabled: true } })))).status
  out.pushed = [
    (await outcome(broker.handle('POST', '/api/v1/push', headers, json({ items: [{ queue: 'enc', payload: { secret } }] })))).status,
    (await outcome(broker.handle('POST', '/api/v1/push', headers, json({ items: [{ queue: 'plain', payload: { visible } }] })))).status,
    (await outcome(broker.handle('POST', '/api/v1/push', headers, json({ items: [{ queue: 'enc', partition: 'auto', payload: { secret: autoSecret } }] })))).status
  ]
  const ids = ['enc', 'plain', 'auto'].map((q) => String(Date.now()).padStart(15, '0') + ':sealed:' + q)
  const pop = (q, id) => broker.handle('GET', `/api/v1/pop/queue/${q}?batch=1&leaseSeconds=1`, {}, undefined, id)
  const autoPop = (id) => broker.handle('GET', '/api/v1/pop/queue/enc/partition/auto?batch=1&autoAck=true', {}, undefined, id)
  out.pops = [data(await outcome(pop('enc', ids[0]))), data(await outcome(pop('plain', ids[1]))), data(await outcome(autoPop(ids[2])))]
  // The retries (a follower whose writer died before answering): answered from the records.
  const retries = [await outcome(pop('enc', ids[0])), await outcome(pop('plain', ids[1])), await outcome(autoPop(ids[2]))]
  out.retries = retries.map(data)
  out.replayed = broker.counters().replayed
  // The leased message of the encrypted queue comes again once its lease expires; the autoAck'd one does not.
  await new Promise((resolve) => setTimeout(resolve, 1200))
  out.again = data(await outcome(broker.handle('GET', '/api/v1/pop/queue/enc?batch=10', {}, undefined)))
  broker.close()
  broker.free()
  const meta = await metaText(name)
  out.metaSecret = meta.includes(secret) || meta.includes(autoSecret)
  // The same database opened without the key: the sealed answer does not open, and is refused, not
  // answered as stored.
  const unkeyed = await glue.WasmBroker.open(name, { persist: false })
  const refused = await outcome(unkeyed.handle('GET', '/api/v1/pop/queue/enc/partition/auto?batch=1&autoAck=true', {}, undefined, ids[2]))
  out.unkeyedRetry = { status: refused.status, error: Boolean(refused.body && refused.body.error) }
  unkeyed.close()
  unkeyed.free()
  // The control: the same recorded pop of a plain queue on a broker without a key.
  const keyless = await glue.WasmBroker.open(name + '-keyless', { persist: false })
  await keyless.handle('POST', '/api/v1/push', headers, json({ items: [{ queue: 'plain', payload: { visible } }] }))
  out.keylessPop = data(await outcome(keyless.handle('GET', '/api/v1/pop/queue/plain?batch=1', {}, undefined, ids[1])))
  keyless.close()
  keyless.free()
  out.keylessMetaVisible = (await metaText(name + '-keyless')).includes(visible)
  return out
}

/** The page-side call of `fn` with `args`, with `readRecord` defined beside it. */
const inPage = (fn, ...args) =>
  `(() => { ${readRecord.toString()}\n return (${fn.toString()})(${args.map((a) => JSON.stringify(a)).join(', ')}) })()`

/** What `sharedGroup` saw, without the answers' bodies. */
const summary = (r) => {
  const status = (x) => x === null ? null : x.error ? x.error : x.status
  return {
    s: status(r.s), a: status(r.a), l: status(r.l), rs: r.rs.map(status), commits: r.commits,
    records: r.records.map(status), retries: r.retries.map(status), replayed: r.replayed, popped: r.popped
  }
}

const isFailure = (r) => Boolean(r.error) || r.status >= 500

/**
 * Runs `bulkReplay` in a fresh context under a 4 MB quota until the quota refuses its big row (IndexedDB's
 * usage accounting lags, so the refusal is not certain on every run; at most 4 runs).
 */
async function bulkReplayRefused({ browser, url }, label, retry) {
  let r
  for (let run = 0; run < 4; run++) {
    const context = await browser.newContext()
    const page = await openPage(context, url, label)
    const cdp = await context.newCDPSession(page)
    await cdp.send('Storage.overrideQuotaForOrigin', { origin: url, quotaSize: 4 * 1024 * 1024 })
    const running = page.evaluate(inPage(bulkReplay, uniqueName(label), 1792 * 1024, retry))
    await page.waitForFunction(() => typeof window.reviewContinue === 'function', null, { timeout: 60000 })
    await cdp.send('Storage.overrideQuotaForOrigin', { origin: url })
    await page.evaluate(() => window.reviewContinue())
    r = await running
    await context.close()
    console.log('      seen:', JSON.stringify({ ...r, record: r.record && { status: r.record.status } }))
    if (isFailure(r.replay)) break
  }
  return r
}

const tests = [
  ['a recorded request and its answer are stored together or not at all, when the commit its changes joined fails', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'recorded')
    const name = uniqueName('recorded')
    // The override only bites when set before the origin first uses IndexedDB (tests/js/browser.test.mjs).
    const cdp = await context.newCDPSession(page)
    await cdp.send('Storage.overrideQuotaForOrigin', { origin: url, quotaSize: 3 * 1024 * 1024 })
    const running = page.evaluate(inPage(scenario, name))
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
    const running = page.evaluate(inPage(encryptedPop, name))
    await page.waitForFunction(() => typeof window.reviewContinue === 'function', null, { timeout: 30000 })
    await cdp.send('Storage.overrideQuotaForOrigin', { origin: url })
    await page.evaluate(() => window.reviewContinue())
    const r = await running
    await context.close()
    console.log('      seen:', JSON.stringify(r))
    // Either the pop fails (rejected, or a 5xx answer: its lease was not written), or it succeeded and
    // the message stays leased.
    if (!r.r.error && r.r.status < 500) {
      assertEq(r.r, { status: 200, messages: [{ secret: 1 }] }, 'the recorded pop got the message')
      assertEq(r.again.status, 204, 'the message the recorded pop was answered with is not handed out again')
      assertEq(r.record !== null, true, 'the answered pop is recorded')
    } else {
      // Its answer was made after the failure took its group: no later commit may write it.
      assertEq(r.record, null, 'no recorded answer for a pop whose lease was not written')
    }
    // Checked last, so a broken invariant above is what a failure names.
    assertEq([r.configured, r.pushed, r.a], [200, 201, 507], 'set-up: the encrypted queue, its message, the refused big push')
  }],

  ['a failed group commit with recorded requests in it fails each of them and records none', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'recorded-group')
    const name = uniqueName('recorded-group')
    const cdp = await context.newCDPSession(page)
    await cdp.send('Storage.overrideQuotaForOrigin', { origin: url, quotaSize: 3 * 1024 * 1024 })
    const running = page.evaluate(inPage(sharedGroup, name, true))
    await page.waitForFunction(() => typeof window.reviewContinue === 'function', null, { timeout: 30000 })
    await cdp.send('Storage.overrideQuotaForOrigin', { origin: url })
    await page.evaluate(() => window.reviewContinue())
    const r = await running
    await context.close()
    console.log('      seen:', JSON.stringify(summary(r)))
    r.rs.forEach((answer, k) => {
      if (isFailure(answer)) {
        assertEq(r.records[k], null, `R${k} failed: no recorded answer`)
      } else {
        // Answered: it was committed, so its record and its message are stored.
        assertEq(r.records[k], answer, `R${k} answered ${answer.status}: its answer is recorded as it was`)
      }
    })
    const answered = r.rs.filter((answer) => !isFailure(answer)).length
    assertEq(r.replayed, answered, 'only answered requests are replayed from a record')
    assertEq(r.retries.map((x) => x.status), [201, 201, 201], 'every retry is answered')
    // Each R stored exactly once, whichever way it went; L only if it was answered.
    const expected = ['R0', 'R1', 'R2', 'S', ...(isFailure(r.l) ? [] : ['L'])].sort()
    assertEq(r.popped, expected, 'each accepted push stored exactly once')
    // Checked last, so a broken invariant above is what a failure names.
    assertEq([r.s.status, r.a.status], [201, 507], 'set-up: S commits, the big push A is refused by the quota')
    assertEq(r.rs.some(isFailure), true, 'set-up: the recorded pushes shared the failing commit')
  }],

  ['review-idb: a recorded request of several commands (a bulk dead-letter replay of two chunks) is stored with its answer or not at all', async (env) => {
    const r = await bulkReplayRefused(env, 'recorded-bulk', false)
    if (isFailure(r.replay)) {
      // Failed: nothing of it may be stored (main's per-request slot wrote it all with the answer, or
      // nothing), else its retry replays only the rest and the 100 replays were never reported.
      assertEq(r.record, null, 'no recorded answer for a failed request')
      assertEq([r.storedDeadLetters, r.storedReplays], [101, 0], 'a failed recorded request left none of its replays stored')
    } else {
      assertEq(r.record !== null, true, 'the answered replay is recorded')
      assertEq([r.storedDeadLetters, r.storedReplays], [0, 101], 'an answered replay stored all its rows')
    }
    // Checked last, so a broken invariant above is what a failure names.
    assertEq([r.pushed, r.filed], [[201, 201], 101], 'set-up: 101 dead letters, the last one big')
    assertEq(isFailure(r.replay), true, 'set-up: the replay of the big row is refused by the quota')
  }],

  ['review-idb: the retry of a failed recorded bulk replay replays every dead letter still stored', async (env) => {
    const r = await bulkReplayRefused(env, 'recorded-bulk-retry', true)
    // The retry is answered 200: every dead letter stored when it ran is replayed by then. (After the
    // failed group the engine's memory still holds the refused chunk until a command reloads it, and the
    // bulk route selects its rows from memory: idb-group answers replayed 0 and leaves one stored.)
    assertEq(r.retry.status, 200, 'the retry is answered')
    assertEq([r.storedDeadLetters, r.storedReplays], [0, 101], 'after the answered retry every row is replayed, once')
    assertEq([r.pushed, r.filed], [[201, 201], 101], 'set-up: 101 dead letters, the last one big')
    assertEq(isFailure(r.replay), true, 'set-up: the replay of the big row is refused by the quota')
  }],

  ['audit: a recorded pop of an encryptionEnabled queue keeps no plaintext of its payloads in IndexedDB, and its retry gets its messages', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'recorded-sealed')
    const secret = 'SECRET-' + Math.random().toString(36).slice(2)
    const visible = 'VISIBLE-' + Math.random().toString(36).slice(2)
    const autoSecret = 'AUTOACK-' + Math.random().toString(36).slice(2)
    const r = await page.evaluate(inPage(encryptedRecords, uniqueName('recorded-sealed'), secret, visible, autoSecret))
    await context.close()
    console.log('      seen:', JSON.stringify(r))
    assertEq([r.configured, ...r.pushed], [200, 201, 201, 201], 'set-up: the encrypted queue and the three messages')
    assertEq(r.pops, [[{ secret }], [{ visible }], [{ secret: autoSecret }]], 'each recorded pop gets its message, opened')
    assertEq([r.keylessPop, r.keylessMetaVisible], [[{ visible }], true], 'the scan of meta sees plaintext (a broker without a key records its answers as they are)')
    assertEq(r.metaSecret, false, 'the recorded answers hold no plaintext of the encrypted queue\'s payloads')
    assertEq(r.retries, [[{ secret }], [{ visible }], [{ secret: autoSecret }]], 'each retry gets the messages its pop got, the autoAck one too (its messages are acknowledged and come no more)')
    assertEq(r.replayed, 3, 'all three retries come from the records')
    assertEq(r.again, [{ secret }], 'the leased message comes again after its lease, the autoAck\'d one does not')
    assertEq(r.unkeyedRetry, { status: 503, error: true }, 'without the key the sealed answer is refused, never answered as stored')
  }],

  ['recorded and local requests share commits, and every recorded answer is stored with its changes', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'recorded-shared')
    const name = uniqueName('recorded-shared')
    const r = await page.evaluate(inPage(sharedGroup, name, false))
    await context.close()
    console.log('      seen:', JSON.stringify(summary(r)))
    assertEq([r.s, r.a, r.l, ...r.rs].map((x) => x.status), [201, 201, 201, 201, 201, 201], 'all answered')
    assertEq(r.commits, 2, 'six requests, two commits: S alone, then the five applied while it was in flight')
    assertEq(r.records, r.rs, 'each recorded answer is stored as it was answered')
    assertEq(r.replayed, 3, 'each retry is answered from its record')
    assertEq(r.retries.map((x) => x.body), r.rs.map((x) => x.body), 'as it was answered')
    assertEq(r.popped, ['A', 'L', 'R0', 'R1', 'R2', 'S'], 'each push stored once')
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

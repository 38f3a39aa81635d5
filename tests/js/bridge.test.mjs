// The browser-to-edge bridge (`Queen.open({ name, bridge: { url, token, queues } })`) in real headless
// Chromium against the real Worker on workerd (scripts/serve via worker/test/harness.mjs startWorker),
// with the network cut and restored:
//   1. offline (Playwright context.setOffline): pushes stay local, progress shows pending and offline;
//      back online they reach the edge exactly once, in order per partition;
//   2. the edge unreachable while the browser thinks it is online (route interception): retries with a
//      growing back-off, the last error visible; forwarded when the route is back;
//   2a. the edge in maintenance mode answers `buffered`: the span counts as delivered (`buffered`) and is
//      sent once;
//   2b. two tabs of one broker, both bridged, pushing while offline: each message once at the edge, each
//      tab's pushes in order;
//   3. a wrong token: 401 as the last error, nothing dropped;
//   4. a reload while the edge is unreachable: the pending messages are still there (IndexedDB) and
//      forwarded after the reload; and once more with the page's pagehide hand-back suppressed (an unload
//      cut short): the next page gives the held span back at once (the held-span registry);
//   4a. a tab holding a span crashes while a second bridged tab runs, started after or before the span was
//      claimed: the second gives the span back once the browser dropped the crashed tab's alive lock;
//   5. the tab crashes after the edge stored a batch and before the local ack: the reopened page gives
//      the crashed page's span back at once (the held-span registry, not the 30 s lease), sends it
//      again, the edge answers `duplicate`, and holds each message once;
//   6. bad options fail Queen.open with clear errors;
//   7. (not the bridge) a buffered push through Queen.connect while the broker is unreachable: kept and
//      retried with a back-off, then delivered once.
//
//   node tests/js/bridge.test.mjs [name-filter ...]
// Screenshots of the status at each stage: test-artifacts/js/bridge-*.png.
// Needs scripts/build-js (the bundle in www/vendor/queen-edge) and scripts/build-worker.

import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import { launch, openPage, uniqueName, assert, assertEq, runTests, ROOT, ARTIFACTS } from './harness.mjs'
import { startWorker, tempPersistDir } from '../../worker/test/harness.mjs'

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const TOKEN = 'bridge-' + Math.random().toString(36).slice(2)
/** The edge's and the sealed test's local key (QUEEN_ENCRYPTION_KEY, Queen.open's encryptionKey). */
const KEY = '8f1c2e0b5a7d93e4c6b1f0a29d8e7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a291807'

if (!existsSync(resolve(ROOT, 'www/vendor/queen-edge/queen-edge.js'))) {
  console.error('bridge test: no www/vendor/queen-edge/queen-edge.js; run scripts/build-js')
  process.exit(1)
}
if (!existsSync(resolve(ROOT, 'worker/build/index.js'))) {
  console.error('bridge test: worker/build is missing; run scripts/build-worker')
  process.exit(1)
}

let worker = null

/** What the edge holds in `queue`/`partition`, in order (a fresh group reads from the start). */
async function edgeMessages(queue, partition) {
  const group = 'verify-' + Math.random().toString(36).slice(2)
  const res = await fetch(`${worker.url}/api/v1/pop/queue/${encodeURIComponent(queue)}/partition/${encodeURIComponent(partition)}` +
    `?consumerGroup=${group}&subscriptionMode=all&batch=1000&wait=false&autoAck=true`, {
    headers: { Authorization: 'Bearer ' + TOKEN }
  })
  if (res.status === 204) return []
  assertEq(res.status, 200, 'edge pop')
  return (await res.json()).messages.map((m) => ({ data: m.data, transactionId: m.transactionId }))
}

/** Opens the bridged broker in `page` (window.queen), recording progress events in window.events. */
function openBridged(page, { name, queue, token = TOKEN, ...extra }) {
  return page.evaluate(async ({ name, url, token, queue, extra }) => {
    window.queen = await window.QE.Queen.open({
      name,
      bridge: { url, token, queues: [queue], retryDelayMillis: 200, maxRetryDelayMillis: 1000, ...extra }
    })
    window.events = []
    window.queen.bridge.onProgress((s) => window.events.push(s))
    return window.queen.bridge.status()
  }, { name, url: worker.url, token, queue, extra })
}

/** Polls `page`'s bridge status until `predicate(status)` holds; resolves to that status. */
async function statusWhen(page, predicate, timeoutMillis = 15000) {
  const deadline = Date.now() + timeoutMillis
  for (;;) {
    const status = await page.evaluate(() => window.queen.bridge.status())
    if (predicate(status)) return status
    if (Date.now() >= deadline) throw new Error(`bridge status not reached in ${timeoutMillis} ms: ${JSON.stringify(status)}`)
    await sleep(100)
  }
}

/** Waits until `page`'s bridge holds a span it could not forward (it failed once and retries). */
function holdingASpan(page) {
  return page.waitForFunction(() => window.events.some((s) => s.state === 'retrying' && s.failedAttempts > 0), null, { timeout: 15000 })
}

/**
 * Drains `page`'s bridge within `timeoutMillis`, asserts that `count` messages were forwarded and that the
 * edge holds `pushed` exactly, then closes the page's broker.
 */
async function expectForwarded(page, { queue, pushed, count, timeoutMillis, label }) {
  const drained = await page.evaluate((timeoutMillis) => window.queen.bridge.drain({ timeoutMillis }), timeoutMillis)
  assertEq([drained.pending, drained.forwarded], [0, count], `${label}: forwarded`)
  await assertEdgeHolds(queue, pushed, label)
  await page.evaluate(() => window.queen.close())
}

/** Shows the bridge's status in the page and keeps a screenshot (test-artifacts/js/bridge-<label>.png). */
async function screenshot(page, label) {
  await page.evaluate(async (label) => {
    const status = await window.queen.bridge.status()
    let pre = document.getElementById('bridge-status')
    if (!pre) {
      pre = document.createElement('pre')
      pre.id = 'bridge-status'
      document.body.append(pre)
    }
    pre.textContent = label + '\n' + JSON.stringify(status, null, 2)
  }, label)
  await page.screenshot({ path: resolve(ARTIFACTS, `bridge-${label}.png`) })
}

/** Pushes `count` messages to each partition of `queue` locally; resolves to {partition: [{data, transactionId}]}. */
function pushLocal(page, queue, partitions, count, tag) {
  return page.evaluate(async ({ queue, partitions, count, tag }) => {
    const out = {}
    for (const p of partitions) {
      const items = Array.from({ length: count }, (_, i) => ({ data: { tag, p, i } }))
      const results = await window.queen.queue(queue).partition(p).push(items)
      out[p] = results.map((r, i) => ({ data: items[i].data, transactionId: r.transactionId, status: r.status }))
    }
    return out
  }, { queue, partitions, count, tag })
}

/** Asserts that the edge holds exactly `expected` (per partition, in order, each transactionId once). */
async function assertEdgeHolds(queue, expected, label) {
  for (const [partition, items] of Object.entries(expected)) {
    const got = await edgeMessages(queue, partition)
    assertEq(got.map((m) => m.transactionId), items.map((m) => m.transactionId),
      `${label}: the edge holds partition ${partition} exactly once, in push order`)
    assertEq(got.map((m) => m.data), items.map((m) => m.data), `${label}: with the payloads`)
  }
}

/** A call to the edge with the token; resolves to {status, body}. */
async function edgeCall(method, path, body) {
  const res = await fetch(worker.url + path, {
    method,
    headers: { Authorization: 'Bearer ' + TOKEN, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body)
  })
  const text = await res.text()
  return { status: res.status, body: text ? JSON.parse(text) : null }
}

/**
 * Two bridged tabs of one broker; the first claims a span (the edge unreachable, so it holds it) and crashes.
 * The second must give the span back at once (the drain is shorter than the 30 s lease), whether it started
 * while the first already held the span (it finds the note when it starts) or before the first claimed it
 * (it learns of the note from a `storage` event).
 */
async function crashBesideAnotherTab(browser, url, { secondStartsFirst }) {
  const context = await browser.newContext()
  const first = await openPage(context, url, 'crash-other first')
  const second = await openPage(context, url, 'crash-other second')
  const name = uniqueName('bridge-crash-other')
  const queue = uniqueName('outbox')
  // Routes per page: a context's routes cannot be changed once one of its pages crashed.
  for (const page of [first, second]) await page.route(worker.url + '/**', (route) => route.abort('internetdisconnected'))
  await openBridged(first, { name, queue })
  if (secondStartsFirst) await openBridged(second, { name, queue })
  const pushed = await pushLocal(first, queue, ['x'], 3, 'crash-other')
  await holdingASpan(first)
  if (!secondStartsFirst) await openBridged(second, { name, queue })
  const gone = new Promise((resolveCrash) => first.once('crash', () => resolveCrash()))
  const cdp = await context.newCDPSession(first)
  cdp.send('Page.crash').catch(() => {})
  await gone
  await second.unroute(worker.url + '/**')
  // As above: the drain is shorter than the lease.
  await expectForwarded(second, { queue, pushed, count: 3, timeoutMillis: 15000, label: 'by the other tab after the crash' })
  await context.close()
}

const tests = [
  ['an encryptionEnabled queue is forwarded only to an encrypted queue at the edge, never stored there in plain text', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'sealed')
    const name = uniqueName('bridge-sealed')
    const queue = uniqueName('sealed')
    const secret = { secret: 'SEALED-' + Math.random().toString(36).slice(2) }
    await page.evaluate(async ({ name, url, token, queue, key, secret }) => {
      window.queen = await window.QE.Queen.open({
        name,
        encryptionKey: key,
        bridge: { url, token, queues: [queue], retryDelayMillis: 200, maxRetryDelayMillis: 1000 }
      })
      const c = await window.queen.request('POST', '/api/v1/configure', { queue, options: { encryptionEnabled: true } })
      if (c.status !== 200) throw new Error('local configure: ' + JSON.stringify(c))
      await window.queen.queue(queue).push([{ data: secret }])
    }, { name, url: worker.url, token: TOKEN, queue, key: KEY, secret })
    const held = await statusWhen(page, (s) => s.lastError !== null)
    assertEq([held.pending, held.forwarded], [1, 0], `held while the edge's queue is not encrypted (${JSON.stringify(held)})`)
    assert(/encryptionEnabled/.test(held.lastError || ''), `the last error says why: ${held.lastError}`)
    const before = await edgeCall('GET', `/api/v1/resources/queues/${encodeURIComponent(queue)}`)
    assertEq(before.status, 404, `the edge holds nothing of the queue, in plain text or otherwise (${JSON.stringify(before.body)})`)
    // Encrypted at the edge too: forwarded, stored there as an envelope, popped in plain text.
    const cfg = await edgeCall('POST', '/api/v1/configure', { queue, options: { encryptionEnabled: true } })
    assertEq(cfg.status, 200, 'edge configure')
    await page.evaluate(() => window.queen.bridge.retryNow())
    const drained = await page.evaluate(() => window.queen.bridge.drain({ timeoutMillis: 20000 }))
    assertEq([drained.pending, drained.forwarded], [0, 1], 'forwarded once the edge encrypts the queue')
    const listed = await edgeCall('GET', `/api/v1/messages?queue=${encodeURIComponent(queue)}`)
    assertEq(listed.body.messages.map((m) => m.isEncrypted), [true], 'stored as an envelope at the edge')
    assertEq((await edgeMessages(queue, 'Default')).map((m) => m.data), [secret], 'and read back in plain text')
    await page.evaluate(() => window.queen.close())
    await context.close()
  }],

  ['offline: pushes stay local with pending shown; back online they reach the edge once, in order', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'offline')
    const name = uniqueName('bridge-offline')
    const queue = uniqueName('outbox')
    const first = await openBridged(page, { name, queue })
    assertEq([first.url, first.queues, first.pending, first.forwarded], [worker.url, [queue], 0, 0], 'a fresh bridge')
    await context.setOffline(true)
    const pushed = await pushLocal(page, queue, ['a', 'b'], 5, 'offline')
    assertEq(Object.values(pushed).flat().map((x) => x.status), Array(10).fill('queued'), 'pushes are answered locally while offline')
    await sleep(1500)
    const offline = await page.evaluate(() => window.queen.bridge.status())
    assertEq([offline.state, offline.online, offline.pending, offline.forwarded], ['offline', false, 10, 0],
      `offline: the ten pushes are pending (${JSON.stringify(offline)})`)
    assertEq((await edgeMessages(queue, 'a')).length, 0, 'nothing reached the edge while offline')
    await screenshot(page, 'offline')
    await context.setOffline(false)
    const drained = await page.evaluate(() => window.queen.bridge.drain({ timeoutMillis: 20000 }))
    assertEq([drained.pending, drained.forwarded, drained.duplicates, drained.online], [0, 10, 0, true], 'back online: all forwarded')
    await screenshot(page, 'online-drained')
    await assertEdgeHolds(queue, pushed, 'after going online')
    const states = await page.evaluate(() => [...new Set(window.events.map((e) => e.state))])
    assert(states.includes('offline') && states.includes('idle'), `progress events went through offline to idle: ${states}`)
    // Later pushes go straight through.
    const more = await pushLocal(page, queue, ['a'], 2, 'online')
    await page.evaluate(() => window.queen.bridge.drain({ timeoutMillis: 20000 }))
    await assertEdgeHolds(queue, { a: [...pushed.a, ...more.a] }, 'a later push')
    await page.evaluate(() => window.queen.close())
    await context.close()
  }],

  ['the edge unreachable while the browser is online: retries with back-off, last error visible, then forwarded', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'unreachable')
    const name = uniqueName('bridge-route')
    const queue = uniqueName('outbox')
    let refused = 0
    await page.route(worker.url + '/**', (route) => {
      refused++
      return route.abort('connectionrefused')
    })
    await openBridged(page, { name, queue })
    const pushed = await pushLocal(page, queue, ['p'], 4, 'cut')
    const since = Date.now()
    await statusWhen(page, (s) => s.failedAttempts >= 2)
    // Held to the same 2.5 s as unloaded, longer when the machine is slow to get there.
    await sleep(Math.max(0, 2500 - (Date.now() - since)))
    const elapsed = Date.now() - since
    const refusedSoFar = refused
    // A snapshot may land inside an attempt (state `forwarding`); the state between attempts is
    // `retrying`, so read until the bridge is between two attempts (at most a back-off of 1 s).
    const cut = await statusWhen(page, (s) => s.state !== 'forwarding', 3000)
    assertEq([cut.state, cut.online, cut.pending, cut.forwarded], ['retrying', true, 4, 0], `retrying (${JSON.stringify(cut)})`)
    assert(cut.failedAttempts >= 2 && refused >= 2, `retried (${cut.failedAttempts} attempts, ${refused} requests refused)`)
    // 200 ms doubling to 1 s: about 2 + elapsed / 1 s attempts (6 in 2.5 s); a busy loop makes dozens.
    assert(refusedSoFar <= 3 + Math.ceil(elapsed / 1000), `with a back-off, not a busy loop (${refusedSoFar} requests in ${elapsed} ms with 200 ms doubling to 1 s)`)
    assert(/^network:/.test(cut.lastError) && cut.lastErrorAt && cut.nextRetryAt, `the last error and the next retry are shown: ${JSON.stringify(cut)}`)
    await screenshot(page, 'edge-unreachable')
    await page.unroute(worker.url + '/**')
    const drained = await page.evaluate(() => window.queen.bridge.drain({ timeoutMillis: 20000 }))
    assertEq([drained.pending, drained.forwarded, drained.state, drained.nextRetryAt], [0, 4, 'idle', null], 'forwarded once the edge answers')
    await assertEdgeHolds(queue, pushed, 'after the route came back')
    await page.evaluate(() => window.queen.close())
    await context.close()
  }],

  ['the edge in maintenance mode answers buffered: the span counts as delivered and is sent once', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'maintenance')
    const name = uniqueName('bridge-maint')
    const queue = uniqueName('outbox')
    const maintenance = (enabled) => fetch(`${worker.url}/api/v1/system/maintenance`, {
      method: 'POST',
      headers: { Authorization: 'Bearer ' + TOKEN, 'Content-Type': 'application/json' },
      body: JSON.stringify({ enabled })
    }).then((r) => r.json())
    let pushes = 0
    await page.route(worker.url + '/api/v1/push', (route) => {
      pushes++
      return route.continue()
    })
    try {
      assertEq((await maintenance(true)).maintenanceMode, true, 'the edge is in maintenance mode')
      await openBridged(page, { name, queue })
      const pushed = await pushLocal(page, queue, ['m'], 3, 'maint')
      const drained = await page.evaluate(() => window.queen.bridge.drain({ timeoutMillis: 20000 }))
      assertEq([drained.pending, drained.forwarded, drained.buffered, drained.duplicates, drained.failedAttempts, drained.lastError],
        [0, 3, 3, 0, 0, null], `buffered counts as delivered (${JSON.stringify(drained)})`)
      await sleep(1500) // past several back-offs of 200 ms: a refusal would have been sent again by now
      assertEq(pushes, 1, 'the span was sent to the edge once')
      const off = await maintenance(false)
      assertEq(off.maintenanceMode, false, 'maintenance mode off')
      await assertEdgeHolds(queue, pushed, 'after the edge drained its buffer')
    } finally {
      await maintenance(false)
      await page.evaluate(() => window.queen.close())
      await context.close()
    }
  }],

  ['two tabs, both bridged, pushing while offline: each message reaches the edge once, in order', async ({ browser, url }) => {
    const context = await browser.newContext()
    const a = await openPage(context, url, 'tab A')
    const b = await openPage(context, url, 'tab B')
    const name = uniqueName('bridge-tabs')
    const queue = uniqueName('outbox')
    await openBridged(a, { name, queue })
    await openBridged(b, { name, queue })
    const roles = [await a.evaluate(() => window.queen.role), await b.evaluate(() => window.queen.role)]
    assertEq(roles, ['writer', 'follower'], 'one writer, one follower, both with a bridge')
    await context.setOffline(true)
    const [fromA, fromB] = await Promise.all([
      pushLocal(a, queue, ['p1', 'p2', 'p3'], 4, 'A'),
      pushLocal(b, queue, ['p1', 'p2', 'p3'], 4, 'B')
    ])
    await context.setOffline(false)
    await Promise.all([a, b].map((p) => p.evaluate(() => window.queen.bridge.drain({ timeoutMillis: 20000 }))))
    const forwarded = (await a.evaluate(() => window.queen.bridge.status())).forwarded +
      (await b.evaluate(() => window.queen.bridge.status())).forwarded
    assertEq(forwarded, 24, 'the two bridges forwarded 24 messages between them')
    for (const p of ['p1', 'p2', 'p3']) {
      const got = await edgeMessages(queue, p)
      const ids = got.map((m) => m.transactionId)
      assertEq(new Set(ids).size, 8, `partition ${p}: eight distinct messages at the edge (${ids.length} rows)`)
      // Each tab's pushes keep their order (the two tabs' pushes interleave as the writer took them).
      for (const [tab, pushed] of [['A', fromA], ['B', fromB]]) {
        assertEq(got.filter((m) => m.data.tag === tab).map((m) => m.transactionId), pushed[p].map((m) => m.transactionId),
          `partition ${p}: tab ${tab}'s pushes in order`)
      }
    }
    await b.evaluate(() => window.queen.close())
    await a.evaluate(() => window.queen.close())
    await context.close()
  }],

  ['a wrong token: 401 is the last error and nothing is dropped', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'token')
    const name = uniqueName('bridge-token')
    const queue = uniqueName('outbox')
    await openBridged(page, { name, queue, token: 'not-the-token' })
    await pushLocal(page, queue, ['p'], 2, 'token')
    // The bridge alternates between `forwarding` (an attempt) and `retrying` (its backoff): wait for a backoff
    // after a refusal rather than reading the state at a fixed moment, which may fall inside an attempt.
    const s = await statusWhen(page, (status) => status.state === 'retrying' && status.lastError)
    assertEq([s.state, s.pending, s.forwarded], ['retrying', 2, 0], `refused by the edge (${JSON.stringify(s)})`)
    assert(/^unauthorized: /.test(s.lastError), `the edge's 401 is the last error: ${s.lastError}`)
    assertEq((await edgeMessages(queue, 'p')).length, 0, 'the edge has nothing')
    await page.evaluate(() => window.queen.close())
    await context.close()
  }],

  ['a reload while the edge is unreachable: the pending pushes are still there and are forwarded after it', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'reload')
    const name = uniqueName('bridge-reload')
    const queue = uniqueName('outbox')
    await context.route(worker.url + '/**', (route) => route.abort('internetdisconnected'))
    await openBridged(page, { name, queue })
    const pushed = await pushLocal(page, queue, ['x', 'y'], 3, 'reload')
    await page.reload()
    await page.waitForFunction(() => window.qeReady === true, null, { timeout: 15000 })
    const after = await openBridged(page, { name, queue })
    assertEq(after.pending, 6, 'after the reload the six pushes are pending (read from IndexedDB)')
    await context.unroute(worker.url + '/**')
    await expectForwarded(page, { queue, pushed, count: 6, timeoutMillis: 20000, label: 'after the reload' })
    await context.close()
  }],

  ['a reload whose pagehide hand-back never lands: the next page gives the held span back at once (not after the 30 s lease)', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'reload-cut')
    const name = uniqueName('bridge-reload-cut')
    const queue = uniqueName('outbox')
    await context.route(worker.url + '/**', (route) => route.abort('internetdisconnected'))
    await openBridged(page, { name, queue })
    const pushed = await pushLocal(page, queue, ['x'], 3, 'reload-cut')
    await holdingASpan(page)
    // An unload cut short: the bridge's pagehide hand-back (an ack through the page's broker) never lands.
    await page.evaluate(() => {
      window.queen.ack = () => new Promise(() => {})
    })
    await page.reload()
    await page.waitForFunction(() => window.qeReady === true, null, { timeout: 15000 })
    await context.unroute(worker.url + '/**')
    await openBridged(page, { name, queue })
    // The default lease (30 s) outlasts this drain: only the held-span registry frees the span in time.
    await expectForwarded(page, { queue, pushed, count: 3, timeoutMillis: 15000, label: 'after the cut-short reload' })
    await context.close()
  }],

  ['a tab holding a span crashes while another bridged tab runs: that tab gives the span back at once (not after the 30 s lease)', async ({ browser, url }) => {
    await crashBesideAnotherTab(browser, url, { secondStartsFirst: false })
  }],

  ['another bridged tab started before the span was claimed: it learns of the note and gives the span back at once after the crash', async ({ browser, url }) => {
    await crashBesideAnotherTab(browser, url, { secondStartsFirst: true })
  }],

  ['the tab crashes after the edge stored a batch, before the local ack: the next page gives the span back at once (not after the 30 s lease) and resends it, the edge holds it once', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'crash')
    const name = uniqueName('bridge-crash')
    const queue = uniqueName('outbox')
    let stored = null
    const crashed = new Promise((resolveCrash) => {
      page.route(worker.url + '/api/v1/push', async (route) => {
        // The request reaches the edge, which stores the batch; the tab dies before it sees the answer.
        const response = await route.fetch()
        stored = await response.json()
        // Go on only once the tab is really gone: until then it is still the writer and could retry.
        page.once('crash', () => resolveCrash())
        const cdp = await context.newCDPSession(page)
        cdp.send('Page.crash').catch(() => {})
      })
    })
    // The default lease (30 s) outlasts the drain below: only the give-back of a crashed page's span
    // (the held-span registry) lets the reopened page resend in time.
    await openBridged(page, { name, queue })
    await context.setOffline(true)
    const pushed = await pushLocal(page, queue, ['p'], 5, 'crash')
    await context.setOffline(false)
    await crashed
    assertEq(stored.map((r) => r.status), Array(5).fill('queued'), 'the edge stored the batch before the crash')
    await sleep(300)
    const reopened = await openPage(context, url, 'crash reopened')
    const before = await openBridged(reopened, { name, queue })
    assertEq(before.pending, 5, 'after the crash the batch is still pending locally (it was never acked)')
    const drained = await reopened.evaluate(() => window.queen.bridge.drain({ timeoutMillis: 20000 }))
    assertEq([drained.pending, drained.forwarded, drained.duplicates], [0, 5, 5],
      'the crashed page\'s span was given back and sent again, and the edge answered duplicate for each')
    await assertEdgeHolds(queue, pushed, 'after the crash')
    await reopened.evaluate(() => window.queen.close())
    await context.close()
  }],

  ['buffered push through Queen.connect: the broker unreachable keeps the items buffered and retried, then delivered once', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'buffer-retry')
    const queue = uniqueName('buffered')
    let refused = 0
    await page.route(worker.url + '/api/v1/push', (route) => {
      refused++
      return route.abort('connectionrefused')
    })
    const since = Date.now()
    await page.evaluate(async ({ url, token, queue }) => {
      window.remote = window.QE.Queen.connect(url, { token, retryAttempts: 1 })
      await window.remote.queue(queue).partition('p').buffer({ messageCount: 100, timeMillis: 100 }).push([{ data: 1 }, { data: 2 }, { data: 3 }])
    }, { url: worker.url, token: TOKEN, queue })
    for (const deadline = Date.now() + 10000; refused < 2 && Date.now() < deadline;) await sleep(50)
    // Held to the same 1.2 s as unloaded, longer when the machine is slow to get there.
    await sleep(Math.max(0, 1200 - (Date.now() - since)))
    const cut = await page.evaluate(() => window.remote.getBufferStats())
    const [elapsed, refusedSoFar] = [Date.now() - since, refused]
    assertEq([cut.totalBufferedMessages, cut.failedMessages, cut.flushesPerformed], [3, 0, 0], `unreachable: the items stay buffered (${JSON.stringify(cut)})`)
    // 250 ms doubling to 5 s after the first flush at 100 ms: about 3 attempts in 1.2 s; a busy loop makes dozens.
    assert(refusedSoFar >= 2 && refusedSoFar <= 3 + Math.ceil(elapsed / 400), `retried with a back-off (${refusedSoFar} attempts in ${elapsed} ms)`)
    assert(typeof cut.lastError === 'string' && cut.lastError.length > 0, 'the last error is shown')
    await page.unroute(worker.url + '/api/v1/push')
    // The retry timer delivers them (its back-off is at most 5 s by then). Waits for the flush's end, not for the
    // buffer to empty: a batch in flight is out of the buffer and not yet counted.
    await page.waitForFunction(() => {
      const stats = window.remote.getBufferStats()
      return stats.totalBufferedMessages === 0 && stats.flushesPerformed + stats.failedMessages > 0
    }, null, { timeout: 15000, polling: 100 })
    const after = await page.evaluate(() => window.remote.getBufferStats())
    assertEq([after.totalBufferedMessages, after.flushesPerformed, after.failedMessages], [0, 1, 0], `delivered by the retry timer (${JSON.stringify(after)})`)
    assertEq((await edgeMessages(queue, 'p')).map((m) => m.data), [1, 2, 3], 'the broker has them once, in order')
    await context.close()
  }],

  ['bad bridge options fail with clear errors', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'options')
    const r = await page.evaluate(async ({ name, url }) => {
      const { Queen } = window.QE
      const attempt = async (fn) => {
        try {
          await fn()
          return 'opened'
        } catch (e) {
          return `${e.code}: ${e.message}`
        }
      }
      return {
        unknown: await attempt(() => Queen.open({ name, bridge: { url, queues: ['q'], mapping: {} } })),
        noUrl: await attempt(() => Queen.open({ name, bridge: { queues: ['q'] } })),
        noQueues: await attempt(() => Queen.open({ name, bridge: { url, queues: [] } })),
        badNumber: await attempt(() => Queen.open({ name, bridge: { url, queues: ['q'], batch: 0 } })),
        noViews: await attempt(() => Queen.open({ name, views: false, bridge: { url, queues: ['q'] } })),
        connect: await attempt(() => Queen.connect(url, { bridge: { url, queues: ['q'] } })),
        serve: await attempt(() => window.QE.serveQueen({ name, bridge: { url, queues: ['q'] } }))
      }
    }, { name: uniqueName('bridge-options'), url: worker.url })
    assertEq(r.unknown, "invalid: bridge: unknown option 'mapping' (known: url, token, queues, batch, leaseSeconds, retryDelayMillis, maxRetryDelayMillis, timeoutMillis)", 'unknown key')
    assertEq(r.noUrl, 'invalid: bridge.url must be the absolute URL of the edge broker', 'no url')
    assertEq(r.noQueues, 'invalid: bridge.queues must be a non-empty array of queue names', 'no queues')
    assertEq(r.badNumber, 'invalid: bridge.batch must be an integer >= 1', 'bad number')
    assert(/^invalid: bridge needs views/.test(r.noViews), `views: false: ${r.noViews}`)
    assert(/^invalid: bridge is an option of Queen.open/.test(r.connect), `Queen.connect: ${r.connect}`)
    assert(/^invalid: bridge is an option of Queen.open/.test(r.serve), `serveQueen: ${r.serve}`)
    await context.close()
  }]
]

const t0 = Date.now()
const state = tempPersistDir()
let failed = 1
let env = null
try {
  worker = await startWorker({ persistTo: state.dir, vars: { API_TOKEN: TOKEN, QUEEN_ENCRYPTION_KEY: KEY } })
  console.log(`  worker (workerd) at ${worker.url} after ${Date.now() - t0} ms`)
  env = await launch()
  failed = await runTests(tests, env, process.argv.slice(2))
  if (failed) console.log('  --- worker log ---\n' + worker.logs())
} catch (e) {
  console.log(`  FAIL  setup: ${(e && e.stack) || e}`)
} finally {
  if (env) await env.close()
  if (worker) await worker.stop()
  state.cleanup()
}
console.log(failed ? `bridge tests: ${failed} failed (${Date.now() - t0} ms)` : `bridge tests: all passed (${Date.now() - t0} ms)`)
process.exit(failed ? 1 : 0)

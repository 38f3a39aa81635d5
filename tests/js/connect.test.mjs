// `Queen.connect(url, { token })` against the real Worker: wrangler dev (workerd, on a free port, fresh state,
// via worker/test/harness.mjs) with bearer tokens, driven from real headless Chromium (playwright-core).
//
//   1. A page served by the Worker itself imports the module from the Worker's static assets and runs one
//      scenario of the fluent API twice: over HTTP (`Queen.connect(location.origin, { token })`) and on the
//      in-browser broker (`Queen.open`). Both runs must give the same answers (message field sets, push, ack,
//      DLQ, transaction and admin result shapes, error codes), and those answers are checked.
//   2. A page on another origin (tests/js/server.mjs) runs the HTTP scenario cross-origin: CORS preflights
//      (Authorization, JSON bodies), and error answers readable by the page.
//   3. A long-poll `.wait(true)` parked by one client is woken by a push from another client (other page).
//   4. `Queen.connect(url + '/?broker=name')` reaches that broker on every request (BROKER_SELECTABLE).
//   5. Wrong, missing and read-only tokens give the documented QueenError codes on every path.
//
//   node tests/js/connect.test.mjs [name-filter ...]
// Needs scripts/build-js (the bundle in www/vendor/queen-edge) and scripts/build-worker.

import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import { launch, openPage, uniqueName, assert, assertEq, runTests, ROOT } from './harness.mjs'
import { startWrangler, tempPersistDir } from '../../worker/test/harness.mjs'
import { recordAnswers, factsProblems, checkAnswerTypes } from './answers.mjs'

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

// The module as users get it: the bundle staged by scripts/build-js, served by the Worker's static assets
// (www/) and by tests/js/server.mjs alike.
const MODULE_PATH = '/vendor/queen-edge/queen-edge.js'
if (!existsSync(resolve(ROOT, 'www' + MODULE_PATH))) {
  console.error(`connect test: no www${MODULE_PATH}; run scripts/build-js`)
  process.exit(1)
}
if (!existsSync(resolve(ROOT, 'worker/build/index.js'))) {
  console.error('connect test: worker/build is missing; run scripts/build-worker')
  process.exit(1)
}

const ADMIN_TOKEN = 'connect-admin-' + Math.random().toString(36).slice(2)
const READ_ONLY_TOKEN = 'connect-ro-' + Math.random().toString(36).slice(2)

/**
 * The scenario, run inside a page (self-contained: serialised with toString). `mode` 'connect' uses
 * Queen.connect(url, { token }); 'open' uses Queen.open({ name }). Returns only values that must not depend
 * on the transport (no ids, no times), so the two modes can be compared as a whole.
 */
async function scenario({ moduleUrl, mode, url, token, name, q }) {
  const { Queen, QueenError } = await import(moduleUrl)
  const queen = mode === 'connect' ? Queen.connect(url, { token }) : await Queen.open({ name, views: true })
  const keys = (o) => (o && typeof o === 'object' ? Object.keys(o).sort() : typeof o)
  const data = (ms) => ms.map((m) => m.data)
  // An ack result without the ids the broker minted.
  const result = (r) => {
    if (!r) return r
    const { transactionId, ...rest } = r
    return { ...rest, transactionId: typeof transactionId }
  }
  const caught = async (fn) => {
    try {
      return { resolved: await fn() }
    } catch (e) {
      return {
        isQueenError: e instanceof QueenError, name: e.name, code: e.code, status: e.status,
        message: e.message, body: e.body
      }
    }
  }
  const out = { role: queen.role }
  const billing = () => queen.queue(q).group('billing').subscriptionMode('all').batch(10).wait(false)

  // Configure, then push three messages to partition 'eu' (and one again: deduplicated).
  const created = await queen.queue(q).config({ leaseTime: 30, retryLimit: 1, retryDelay: 0 }).create()
  out.create = { configured: created.configured, keys: keys(created) }
  const pushed = await queen.queue(q).partition('eu').push([{ data: { n: 1 } }, { data: { n: 2 } }, { data: { n: 3 } }])
  const again = await queen.queue(q).partition('eu').push({ data: { n: 1 }, transactionId: pushed[0].transactionId })
  out.push = {
    statuses: pushed.map((p) => p.status),
    keys: keys(pushed[0]),
    duplicate: again[0].status,
    sameId: again[0].message_id === pushed[0].message_id
  }

  // Pop with a group and a batch; ack the first.
  const msgs = await billing().pop()
  out.pop = {
    data: data(msgs),
    keys: keys(msgs[0]),
    queue: msgs[0].queue,
    partition: msgs[0].partition,
    group: msgs[0].consumerGroup,
    attempts: msgs.map((m) => m.deliveryAttempt),
    offsets: msgs.map((m) => typeof m.offset),
    oneLease: new Set(msgs.map((m) => m.leaseId)).size
  }
  const ackTrue = await queen.ack(msgs[0], true, { group: 'billing' })
  out.ackTrue = { success: ackTrue.success, keys: keys(ackTrue), resultKeys: keys(ackTrue.results[0]) }

  // Nack 'retry': the lease of the span is released and the rest comes again.
  const retry = await queen.ack(msgs[1], 'retry', { group: 'billing' })
  out.retry = { success: retry.success, result: result(retry.results[0]) }
  const redelivered = await billing().pop()
  out.redelivered = { data: data(redelivered), attempts: redelivered.map((m) => m.deliveryAttempt) }

  // 'dlq' files n2 at once; n3 comes again and is failed (ack false) until past the retry limit.
  const toDlq = await queen.ack(redelivered[0], 'dlq', { group: 'billing', error: 'poison' })
  out.ackDlq = { success: toDlq.success, result: result(toDlq.results[0]) }
  out.failures = []
  for (let i = 0; i < 5; i++) {
    const [m] = await billing().pop()
    if (!m) break
    const r = await queen.ack(m, false, { group: 'billing', error: 'fail ' + (i + 1) })
    out.failures.push({ n: m.data.n, attempt: m.deliveryAttempt, success: r.success, result: result(r.results[0]) })
    if (r.results[0] && r.results[0].dlq) break
  }
  out.afterFailures = data(await billing().pop())

  // The group's dead-letter queue, then a replay through queen.admin.
  const dlq = await queen.queue(q).dlq('billing').limit(10).get()
  out.dlq = {
    total: dlq.total,
    rows: dlq.messages.map((d) => ({ n: d.data.n, error: d.errorMessage, group: d.consumerGroup })),
    keys: keys(dlq.messages[0]),
    pageKeys: keys(dlq)
  }
  const limited = await queen.queue(q).dlq('billing').limit(1).get()
  out.dlqLimit1 = limited.messages.map((d) => d.data.n)
  const poisoned = dlq.messages.find((d) => d.data.n === 2)
  const replay = await queen.admin.retryMessage(poisoned.partitionId, poisoned.transactionId)
  out.replay = { keys: keys(replay), replayed: replay.replayed }
  out.replayAgain = await caught(() => queen.admin.retryMessage(poisoned.partitionId, poisoned.transactionId))
  const back = await billing().pop()
  out.back = { data: data(back), ack: (await queen.ack(back, true, { group: 'billing' })).success }
  out.dlqAfterReplay = (await queen.queue(q).dlq('billing').get()).messages.map((d) => d.data.n)
  out.emptyPop = await billing().pop()

  // Transaction: ack one message and push another, atomically; a second ack of it is refused.
  await queen.queue(q + '-in').push({ data: { step: 1 } })
  const [m] = await queen.queue(q + '-in').wait(false).pop()
  const tx = await queen.transaction().ack(m).queue(q + '-out').partition('p1').push([{ data: { step: 2 } }]).commit()
  out.tx = { success: tx.success, keys: keys(tx) }
  out.txOut = data(await queen.queue(q + '-out').partition('p1').wait(false).pop())
  out.txIn = data(await queen.queue(q + '-in').wait(false).pop())
  const stale = await caught(() => queen.transaction().ack(m).commit())
  out.txStale = { code: stale.code, isQueenError: stale.isQueenError }
  out.txEmpty = (await caught(() => queen.transaction().commit())).code

  // consume(): one message at a time, stop after three; the other two are given back.
  await queen.queue(q + '-c').push([1, 2, 3, 4, 5].map((n) => ({ data: { n } })))
  const seen = []
  await queen.queue(q + '-c').group('workers').subscriptionMode('all').batch(5).wait(false).each().limit(3)
    .consume(async (message) => { seen.push(message.data.n) })
  out.consumed = seen
  out.consumeRest = data(await queen.queue(q + '-c').group('workers').batch(10).wait(false).pop())

  // A long-poll nobody wakes ends empty at its timeout.
  const t0 = Date.now()
  const timedOut = await queen.queue(q + '-idle').wait(true).timeoutMillis(800).pop()
  out.longPollTimeout = { messages: timedOut, waited: Date.now() - t0 >= 700 }

  // 4xx answers surface as QueenErrors with the broker's message.
  const bad = 'bad\u0001name'
  out.badCreate = await caught(() => queen.queue(bad).create())
  out.badPush = await caught(() => queen.queue(bad).push({ data: 1 }))
  out.badPop = await queen.queue(bad).wait(false).pop()
  out.missingQueue = await caught(() => queen.admin.getQueue(q + '-never-created'))
  const tooLong = 'x'.repeat(300)
  out.longName = (await caught(() => queen.queue(tooLong).push({ data: 1 }))).code
  out.badAck = await queen.ack({ transactionId: 'nope', partitionId: 'nope', leaseId: 'nope' }, true)

  await queen.close()
  return out
}

/** The values every run of the scenario must give, whatever the transport. */
function checkScenario(r, label) {
  const L = (what) => `${label}: ${what}`
  assertEq(r.create.configured, true, L('create() configured the queue'))
  assertEq(r.push.statuses, ['queued', 'queued', 'queued'], L('push statuses'))
  assertEq(r.push.duplicate, 'duplicate', L('a repeated transactionId is a duplicate'))
  assert(r.push.sameId, L('the duplicate names the original message id'))
  assertEq(r.pop.data, [{ n: 1 }, { n: 2 }, { n: 3 }], L('pop with group + batch returns the partition in order'))
  for (const f of ['consumerGroup', 'createdAt', 'data', 'deliveryAttempt', 'id', 'leaseId', 'offset', 'partition',
    'partitionId', 'queue', 'transactionId']) {
    assert(r.pop.keys.includes(f), L(`messages carry ${f} (have ${r.pop.keys})`))
  }
  assertEq([r.pop.queue, r.pop.partition, r.pop.group], [r.queue, 'eu', 'billing'], L('queue, partition, group of a message'))
  assertEq(r.pop.attempts, [1, 1, 1], L('first delivery'))
  assertEq(r.pop.oneLease, 1, L('one lease for the batch'))
  assertEq(r.ackTrue.success, true, L('ack true'))
  assertEq(r.retry.success, true, L("ack 'retry' accepted"))
  assertEq(r.redelivered.data, [{ n: 2 }, { n: 3 }], L("after 'retry' the rest of the span comes again"))
  assertEq([r.ackDlq.success, r.ackDlq.result.dlq], [true, true], L("ack 'dlq' files the message"))
  assertEq(r.failures.map((f) => [f.n, f.attempt, f.success, !!(f.result && f.result.dlq)]), [[3, 1, true, false], [3, 2, true, true]],
    L('ack false: retried once (retryLimit 1), then dead-lettered'))
  assertEq(r.afterFailures, [], L('nothing left after the failures'))
  assertEq(r.dlq.total, 2, L('two dead letters'))
  assertEq(r.dlq.rows, [
    { n: 3, error: 'fail 2', group: 'billing' },
    { n: 2, error: 'poison', group: 'billing' }
  ], L('dlq(group).limit(n).get(): newest first, with the error'))
  assertEq(r.dlqLimit1, [3], L('dlq().limit(1): the newest only'))
  assertEq(r.replay.replayed, true, L('admin.retryMessage replays'))
  assertEq([r.replayAgain.code, r.replayAgain.status], ['not_found', 404], L('a second replay: not_found'))
  assertEq(r.back, { data: [{ n: 2 }], ack: true }, L('the replayed message is delivered again and acked'))
  assertEq(r.dlqAfterReplay, [3], L('the replayed dead letter left the DLQ'))
  assertEq(r.emptyPop, [], L('nothing else to pop'))
  assertEq(r.tx.success, true, L('transaction committed'))
  assertEq(r.txOut, [{ step: 2 }], L('the transaction push is visible'))
  assertEq(r.txIn, [], L('the transaction ack is applied'))
  assertEq(r.txStale, { code: 'conflict', isQueenError: true }, L('a transaction on a spent lease is refused'))
  assertEq(r.txEmpty, 'invalid', L('an empty transaction is refused client-side'))
  assertEq(r.consumed, [1, 2, 3], L('consume() with .each().limit(3) handles three, one by one'))
  assertEq(r.consumeRest, [{ n: 4 }, { n: 5 }], L('the two not handled were given back'))
  assertEq(r.longPollTimeout, { messages: [], waited: true }, L('an unwoken long-poll ends empty at its timeout'))
  for (const [what, e] of [['create', r.badCreate], ['push', r.badPush]]) {
    assertEq([e.isQueenError, e.name, e.code, e.status], [true, 'QueenError', 'bad_request', 400],
      L(`an invalid queue name on ${what} is a bad_request QueenError (${JSON.stringify(e)})`))
    assert(/control characters/.test(e.message), L(`the broker's reason is the message: ${e.message}`))
    assertEq(e.body, { error: e.message }, L('the answer body is on the error'))
  }
  assertEq(r.badPop, [], L('pop() resolves to [] on a refused request, as queen-mq does'))
  assertEq([r.missingQueue.code, r.missingQueue.status], ['not_found', 404], L('admin.getQueue of a missing queue'))
  assertEq(r.longName, 'bad_request', L('an over-long queue name'))
  assertEq(r.badAck.success, false, L('an ack of an unknown message fails without throwing'))
}

/** Fails naming each part of two scenario runs that differ (the role aside). */
function assertSameAnswers(a, b, message) {
  const differ = []
  for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) {
    if (key === 'role') continue
    const [x, y] = [JSON.stringify(a[key]), JSON.stringify(b[key])]
    if (x !== y) differ.push(`${key}:\n        one   ${x}\n        other ${y}`)
  }
  if (differ.length) throw new Error(`assertion failed: ${message}\n      ${differ.join('\n      ')}`)
}

let worker = null
let state = null

/** A page whose document comes from the Worker (a static asset: the module itself, shown as text). */
async function workerPage(browser) {
  const context = await browser.newContext()
  const page = await context.newPage()
  page.on('pageerror', (e) => console.log(`    [worker-origin pageerror] ${e.message}`))
  await page.goto(worker.url + MODULE_PATH)
  return { context, page }
}

const run = (page, args) => page.evaluate(`(${scenario.toString()})(${JSON.stringify(args)})`)

const tests = [
  ['same origin: Queen.connect to the Worker serving the page, and Queen.open, give the same answers', async ({ browser }) => {
    const { context, page } = await workerPage(browser)
    const moduleUrl = worker.url + MODULE_PATH
    const served = await page.evaluate(async (u) => {
      const res = await fetch(u)
      return [res.status, res.headers.get('content-type')]
    }, moduleUrl)
    assertEq(served[0], 200, 'the Worker serves the module as a static asset')
    const q = uniqueName('same')
    const http = await run(page, { moduleUrl, mode: 'connect', url: worker.url, token: ADMIN_TOKEN, q })
    const local = await run(page, { moduleUrl, mode: 'open', name: uniqueName('open'), q })
    assertEq(http.role, 'remote', 'Queen.connect is remote')
    assertEq(local.role, 'writer', 'Queen.open is the writer')
    checkScenario({ ...http, queue: q }, 'connect (same origin)')
    checkScenario({ ...local, queue: q }, 'open')
    assertSameAnswers(http, local, 'Queen.connect and Queen.open answer the scenario alike')
    await context.close()
  }],

  ['the Worker\'s answers through Queen.connect have the types js/index.d.ts declares (tsc --strict)', async ({ browser }) => {
    const { context, page } = await workerPage(browser)
    const recorded = await page.evaluate(`(${recordAnswers.toString()})(${JSON.stringify({
      moduleUrl: worker.url + MODULE_PATH, mode: 'connect', url: worker.url, token: ADMIN_TOKEN, q: uniqueName('answers')
    })})`)
    const problems = factsProblems(recorded.facts)
    assert(problems.length === 0, problems.join('\n      '))
    const typeErrors = await checkAnswerTypes(recorded.answers, 'connect')
    assert(typeErrors === '', 'answers of the Worker against js/index.d.ts:\n' + typeErrors)
    await context.close()
  }],

  ['cross origin: the page on another origin connects with CORS', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'cross-origin')
    const q = uniqueName('cross')
    const pageOrigin = await page.evaluate(() => location.origin)
    assert(pageOrigin !== worker.url, `the page (${pageOrigin}) is on another origin than the Worker (${worker.url})`)
    const r = await run(page, { moduleUrl: url + MODULE_PATH, mode: 'connect', url: worker.url, token: ADMIN_TOKEN, q })
    checkScenario({ ...r, queue: q }, 'connect (cross origin)')
    // A raw preflight, as the browser sends it for an authorised JSON request.
    const preflight = await fetch(worker.url + '/api/v1/push', {
      method: 'OPTIONS',
      headers: {
        Origin: pageOrigin,
        'Access-Control-Request-Method': 'POST',
        'Access-Control-Request-Headers': 'authorization, content-type'
      }
    })
    assert(preflight.status >= 200 && preflight.status < 300, `preflight answered ${preflight.status}`)
    assertEq(preflight.headers.get('access-control-allow-origin'), '*', 'preflight allows any origin')
    assert(/authorization/i.test(preflight.headers.get('access-control-allow-headers') || ''),
      'preflight allows the Authorization header')
    await context.close()
  }],

  ['long-poll .wait(true) woken by a push from another client', async ({ browser, url }) => {
    const context = await browser.newContext()
    const waiter = await openPage(context, url, 'waiter')
    const { context: pusherContext, page: pusher } = await workerPage(browser)
    const q = uniqueName('lp')
    await waiter.evaluate(async ({ moduleUrl, url, token }) => {
      const { Queen } = await import(moduleUrl)
      window.client = Queen.connect(url, { token })
    }, { moduleUrl: url + MODULE_PATH, url: worker.url, token: ADMIN_TOKEN })
    await waiter.evaluate((q) => {
      const t0 = Date.now()
      window.parked = window.client.queue(q).group('lp').subscriptionMode('all').batch(5).wait(true)
        .timeoutMillis(10000).pop()
        .then((msgs) => ({ wokeAt: Date.now(), ms: Date.now() - t0, data: msgs.map((m) => m.data), group: msgs[0] && msgs[0].consumerGroup }))
    }, q)
    await sleep(600)
    const pushed = await pusher.evaluate(async ({ moduleUrl, url, token, q }) => {
      const { Queen } = await import(moduleUrl)
      const other = Queen.connect(url, { token })
      const startedAt = Date.now()
      const statuses = (await other.queue(q).push({ data: 'wake up' })).map((p) => p.status)
      return { statuses, startedAt, doneAt: Date.now() }
    }, { moduleUrl: worker.url + MODULE_PATH, url: worker.url, token: ADMIN_TOKEN, q })
    assertEq(pushed.statuses, ['queued'], 'the other client pushed')
    const lp = await waiter.evaluate(() => window.parked)
    assertEq(lp.data, ['wake up'], 'the parked long-poll got the push')
    assertEq(lp.group, 'lp', 'in its group')
    assert(lp.ms >= 500, `it parked (${lp.ms} ms)`)
    const afterPush = lp.wokeAt - pushed.doneAt
    assert(lp.wokeAt >= pushed.startedAt && afterPush < 8000,
      `it woke on the push, not at its timeout (${afterPush} ms after the push was answered)`)
    await context.close()
    await pusherContext.close()
  }],

  ['broker selection: a query in the connect URL (?broker=) or the X-Queen-Broker header, cross origin', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'broker')
    const q = uniqueName('sel')
    const r = await page.evaluate(async ({ moduleUrl, url, token, q }) => {
      const { Queen } = await import(moduleUrl)
      const tenant = Queen.connect(url + '/?broker=tenant-b', { token })
      const other = Queen.connect(url, { token })
      const out = { name: tenant.name }
      out.push = (await tenant.queue(q).push([{ data: 'b1' }, { data: 'b2' }])).map((p) => p.status)
      out.defaultSees = (await other.queue(q).batch(10).wait(false).pop()).map((m) => m.data)
      const msgs = await tenant.queue(q).batch(10).wait(true).timeoutMillis(2000).pop()
      out.tenantSees = msgs.map((m) => m.data)
      out.ack = (await tenant.ack(msgs, true)).success
      out.queues = (await tenant.admin.listQueues()).queues.map((x) => x.name).filter((n) => n === q)
      // The same broker picked by header: CORS allows X-Queen-Broker, so the preflight passes.
      const byHeader = Queen.connect(url, { token, headers: { 'X-Queen-Broker': 'tenant-b' } })
      out.headerPush = (await byHeader.queue(q).push([{ data: 'b3' }])).map((p) => p.status)
      out.tenantSeesHeaderPush = (await tenant.queue(q).batch(10).wait(true).timeoutMillis(2000).pop()).map((m) => m.data)
      return out
    }, { moduleUrl: url + MODULE_PATH, url: worker.url, token: ADMIN_TOKEN, q })
    assertEq(r.name, worker.url, 'the base URL without its query is the name')
    assertEq(r.push, ['queued', 'queued'], 'push to broker tenant-b')
    assertEq(r.defaultSees, [], 'the default broker does not have them')
    assertEq(r.tenantSees, ['b1', 'b2'], 'broker tenant-b has them (pop with its own query plus ?broker=)')
    assertEq(r.ack, true, 'ack on broker tenant-b')
    assertEq(r.queues, [q], 'admin calls go to broker tenant-b too')
    assertEq(r.headerPush, ['queued'], 'push to broker tenant-b by the X-Queen-Broker header, cross origin')
    assertEq(r.tenantSeesHeaderPush, ['b3'], 'it reached broker tenant-b')
    await context.close()
  }],

  ['tokens: wrong, missing and read-only tokens give QueenErrors with the documented codes', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'auth')
    const r = await page.evaluate(async ({ moduleUrl, url, readOnly }) => {
      const { Queen, QueenError } = await import(moduleUrl)
      const caught = async (fn) => {
        try {
          return { resolved: await fn() }
        } catch (e) {
          return { isQueenError: e instanceof QueenError, name: e.name, code: e.code, status: e.status, message: e.message, body: e.body }
        }
      }
      // Counts the push requests a client sends: a 401 must not be retried (5xx answers are, after 1 s).
      const counting = (token) => {
        const calls = []
        const queen = Queen.connect(url, {
          token,
          fetch: (input, init) => {
            calls.push(new URL(String(input)).pathname)
            return fetch(input, init)
          }
        })
        return { queen, pushRequests: () => calls.filter((path) => path === '/api/v1/push').length }
      }
      const probe = async ({ queen, pushRequests }) => {
        const push = await caught(() => queen.queue('auth').push({ data: 1 }))
        return {
          push,
          pushRequests: pushRequests(),
          create: await caught(() => queen.queue('auth').create()),
          admin: await caught(() => queen.admin.getOverview()),
          dlq: await queen.queue('auth').dlq().get(),
          pop: await queen.queue('auth').wait(false).pop(),
          ack: await queen.ack({ transactionId: 't', partitionId: 'p', leaseId: 'l' }, true),
          consume: await caught(() => queen.queue('auth').wait(false).limit(1).consume(async () => {})),
          tx: await caught(() => queen.transaction().queue('auth').push([{ data: 1 }]).commit()),
          raw: await queen.request('GET', '/api/v1/resources/queues'),
          health: (await queen.request('GET', '/health')).status
        }
      }
      return {
        wrong: await probe(counting('not-the-token')),
        missing: await probe(counting(undefined)),
        readOnly: {
          push: await caught(() => Queen.connect(url, { token: readOnly }).queue('auth').push({ data: 1 })),
          list: await caught(() => Queen.connect(url, { token: readOnly }).admin.listQueues())
        }
      }
    }, { moduleUrl: url + MODULE_PATH, url: worker.url, readOnly: READ_ONLY_TOKEN })
    for (const [label, p, message] of [['wrong token', r.wrong, 'Invalid token'], ['no token', r.missing, 'Authentication required']]) {
      const L = (what) => `${label}: ${what}`
      for (const what of ['push', 'create', 'admin', 'consume', 'tx']) {
        const e = p[what]
        assertEq([e.isQueenError, e.name, e.code, e.status, e.message], [true, 'QueenError', 'unauthorized', 401, message],
          L(`${what} throws QueenError unauthorized (${JSON.stringify(e)})`))
      }
      assertEq(p.push.body, { error: message }, L('the answer body is on the error'))
      assertEq(p.pushRequests, 1, L('a 401 is not retried: one push request'))
      assertEq(p.pop, [], L('pop() resolves to [] (queen-mq semantics)'))
      assertEq(p.dlq, { messages: [], total: 0 }, L('dlq().get() resolves to an empty page'))
      assertEq([p.ack.success, p.ack.code, p.ack.error], [false, 'unauthorized', message], L('ack resolves to { success: false, code, error }'))
      assertEq([p.raw.status, p.raw.body], [401, { error: message }], L('queen.request gives the raw 401'))
      assertEq(p.health, 200, L('/health stays public'))
    }
    assertEq([r.readOnly.push.code, r.readOnly.push.status], ['forbidden', 403], 'a read-only token may not push')
    assert(Array.isArray(r.readOnly.list.resolved && r.readOnly.list.resolved.queues) || r.readOnly.list.resolved,
      `a read-only token may list queues (${JSON.stringify(r.readOnly.list).slice(0, 200)})`)
    await context.close()
  }]
]

const t0 = Date.now()
state = tempPersistDir()
let failed = 1
let env = null
try {
  worker = await startWrangler({
    persistTo: state.dir,
    vars: { API_TOKEN: ADMIN_TOKEN, API_TOKEN_READ_ONLY: READ_ONLY_TOKEN, BROKER_SELECTABLE: 'true' }
  })
  console.log(`  worker at ${worker.url} after ${Date.now() - t0} ms; module ${MODULE_PATH}`)
  env = await launch()
  failed = await runTests(tests, env, process.argv.slice(2))
  if (failed) console.log('  --- wrangler log ---\n' + worker.logs())
} catch (e) {
  console.log(`  FAIL  setup: ${(e && e.stack) || e}`)
} finally {
  if (env) await env.close()
  if (worker) await worker.stop()
  state.cleanup()
}
console.log(failed ? `connect tests: ${failed} failed (${Date.now() - t0} ms)` : `connect tests: all passed (${Date.now() - t0} ms)`)
process.exit(failed ? 1 : 0)

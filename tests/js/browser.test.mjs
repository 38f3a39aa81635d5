// Browser tests of the JS module in real headless Chromium (playwright-core, /usr/bin/chromium), on the
// built module as users get it: the minified bundle www/vendor/queen-edge/queen-edge.js and its wasm
// (from scripts/build-js). No mocks.
//
//   node tests/js/browser.test.mjs [name-filter ...]
//
// Screenshots and logs go to test-artifacts/js/.

import { launch, openPage, uniqueName, assert, assertEq, runTests, ARTIFACTS } from './harness.mjs'
import { recordAnswers, factsProblems, checkAnswerTypes } from './answers.mjs'

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** Opens broker `name` in `page`, pushes one message 'before' to queue 'held', and closes it. */
const pushBefore = (page, name) => page.evaluate(async (name) => {
  const queen = await window.QE.Queen.open({ name })
  await queen.queue('held').push({ data: 'before' })
  await queen.close()
}, name)

/** Opens database `name` in `page` as page code would, with no versionchange handler: it never closes. */
const holdConnection = (page, name) => page.evaluate((name) => new Promise((resolve, reject) => {
  const request = indexedDB.open(name)
  request.onsuccess = () => { window.holder = request.result; resolve() }
  request.onerror = () => reject(request.error)
}), name)

/** Starts Queen.open(name) in `page` without waiting; its onBlocked calls, 'opened' or 'failed: …' go to window.events. */
const openWatched = (page, name) => page.evaluate((name) => {
  window.events = []
  window.QE.Queen.open({ name, onBlocked: (blocked) => window.events.push(blocked) })
    .then((queen) => { window.queen = queen; window.events.push('opened') },
      (error) => window.events.push('failed: ' + error.message))
}, name)

const tests = [
  ['answers recorded in Chromium have the types js/index.d.ts declares (tsc --strict); 0-based offsets, groups, ack takes the group of the message, buffer', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'answers')
    const recorded = await page.evaluate(`(${recordAnswers.toString()})(${JSON.stringify({
      moduleUrl: '/vendor/queen-edge/queen-edge.js', mode: 'open', name: uniqueName('answers'), q: 'answers'
    })})`)
    const problems = factsProblems(recorded.facts)
    assert(problems.length === 0, problems.join('\n      '))
    const typeErrors = await checkAnswerTypes(recorded.answers, 'open')
    assert(typeErrors === '', 'recorded answers against js/index.d.ts:\n' + typeErrors)
    await context.close()
  }],

  ['uuidv7: distinct version-7 ids carrying the current millisecond, across refills of the random pool', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'uuidv7')
    // 3000 ids draw the 4 KB pool (256 ids) about twelve times; the client mints these for the items it
    // pushes over HTTP and for buffered pushes (in the page the broker mints the others: next test).
    const r = await page.evaluate(() => {
      const { uuidv7 } = window.QE
      const before = Date.now()
      const ids = Array.from({ length: 3000 }, () => uuidv7())
      const after = Date.now()
      const shape = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
      const ms = ids.map((id) => parseInt(id.slice(0, 8) + id.slice(9, 13), 16))
      return {
        badShape: ids.filter((id) => !shape.test(id)),
        distinct: new Set(ids).size,
        distinctTails: new Set(ids.map((id) => id.slice(24))).size,
        outOfTime: ms.filter((m) => m < before || m > after).length,
        ordered: ms.every((m, i) => i === 0 || m >= ms[i - 1])
      }
    })
    assertEq(r.badShape, [], 'every id has the UUIDv7 shape (version 7, variant 10)')
    assertEq(r.distinct, 3000, 'no id repeats')
    assertEq(r.distinctTails, 3000, 'the random 48 bits of the tail differ between ids')
    assertEq(r.outOfTime, 0, 'each id carries the millisecond it was minted in')
    assert(r.ordered, 'ids minted one after another are ordered by their millisecond')
    await context.close()
  }],

  ['in the page the broker mints the transaction ids the items lack: none is sent, each result carries a fresh UUIDv7; ids given, buffered pushes and HTTP keep theirs', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'minted-ids')
    const r = await page.evaluate(async (name) => {
      const { Queen } = window.QE
      const queen = await Queen.open({ name })
      const broker = queen.transport.broker
      const handle = broker.handle.bind(broker)
      const sent = []
      broker.handle = (method, path, headers, body, id) => {
        if (path === '/api/v1/push' || path === '/api/v1/transaction') sent.push(JSON.parse(body))
        return handle(method, path, headers, body, id)
      }
      const shape = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
      const out = {}
      const pushed = await queen.queue('ids').push([{ data: 1 }, { data: 2 }, { data: 3, transactionId: 'mine' }])
      out.sentIds = sent[0].items.map((i) => i.transactionId ?? null)
      out.resultIds = pushed.map((p) => [shape.test(p.transactionId), p.transactionId === p.transaction_id])
      out.distinct = new Set(pushed.map((p) => p.transactionId)).size
      out.given = pushed[2].transactionId
      // A minted id is deduplicated as any other.
      const again = await queen.queue('ids').push({ data: 1, transactionId: pushed[0].transactionId })
      out.again = again[0].status
      await queen.transaction().queue('ids').push([{ data: 4 }]).commit()
      out.txSent = sent.at(-1).operations[0].items.map((i) => i.transactionId ?? null)
      const popped = await queen.queue('ids').batch(10).wait(false).pop()
      out.popped = popped.map((m) => [m.data, shape.test(m.transactionId) || m.transactionId])
      // Buffered: the items are handed to onSuccess and may be sent again, so the client makes their ids.
      let handed = null
      await queen.queue('ids').buffer({ messageCount: 1 }).push({ data: 5 }).onSuccess((items) => { handed = items })
      await queen.flushAllBuffers()
      out.bufferedHanded = handed.map((i) => shape.test(i.transactionId))
      out.bufferedSent = sent.at(-1).items.map((i) => shape.test(i.transactionId))
      await queen.close()
      // Over HTTP the client makes every id (a request sent again after a lost answer is deduplicated).
      let body = null
      const http = Queen.connect('http://queen.invalid', { retryAttempts: 0, fetch: async (_url, init) => {
        body = JSON.parse(init.body)
        return new Response('[]', { status: 201, headers: { 'content-type': 'application/json' } })
      } })
      await http.queue('ids').push([{ data: 1 }])
      out.httpSent = body.items.map((i) => shape.test(i.transactionId))
      return out
    }, uniqueName('minted-ids'))
    assertEq(r.sentIds, [null, null, 'mine'], 'the page sends no id for the items without one, and the given id as it is')
    assertEq(r.resultIds, [[true, true], [true, true], [false, true]], 'each result carries a UUIDv7 from the broker, under both names')
    assertEq(r.distinct, 3, 'the minted ids are distinct')
    assertEq(r.given, 'mine', 'a given id is kept')
    assertEq(r.again, 'duplicate', 'a minted id pushed again is a duplicate')
    assertEq(r.txSent, [null], 'a transaction push sends no id for an item without one')
    assertEq(r.popped, [[1, true], [2, true], [3, 'mine'], [4, true]], 'popped messages carry the minted ids')
    assertEq(r.bufferedHanded, [true], 'a buffered item handed to onSuccess has its client-made id')
    assertEq(r.bufferedSent, [true], 'and is sent with it')
    assertEq(r.httpSent, [true], 'over HTTP the client makes the id')
    await context.close()
  }],

  ['push, pop, ack, nack to the dead-letter queue, replay', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'basic')
    const name = uniqueName('basic')
    const r = await page.evaluate(async (name) => {
      const { Queen } = window.QE
      const queen = await Queen.open({ name })
      const out = { role: queen.role, persistedType: typeof queen.persisted }
      const created = await queen.queue('orders').config({ retryLimit: 0, leaseTime: 30 }).create()
      out.configured = created.configured
      const pushed = await queen.queue('orders').push([{ data: { n: 1 } }, { data: { n: 2 } }, { payload: { n: 3 } }, 4])
      out.pushStatuses = pushed.map((p) => p.status)
      // Same transactionId again: deduplicated.
      const again = await queen.queue('orders').push({ data: { n: 1 }, transactionId: pushed[0].transactionId })
      out.dupStatus = again[0].status
      out.dupId = again[0].message_id === pushed[0].message_id
      const msgs = await queen.queue('orders').batch(10).wait(false).pop()
      out.popped = msgs.map((m) => m.data)
      out.fields = Object.keys(msgs[0]).sort()
      out.ack = (await queen.ack(msgs[0], true)).success
      out.nack = await queen.ack(msgs[1], false, { error: 'boom' })
      // The nack released the batch's lease: the rest of the span is delivered again.
      const rest = await queen.queue('orders').batch(10).wait(false).pop()
      out.redelivered = rest.map((m) => m.data)
      out.rest = (await queen.ack(rest, true)).success
      const dlq = await queen.queue('orders').dlq().limit(10).get()
      out.dlq = dlq.messages.map((d) => ({ data: d.data, error: d.errorMessage }))
      out.empty = await queen.queue('orders').wait(false).pop()
      // Replay (admin.retryMessage): the message comes back at the end of its partition.
      const d = dlq.messages[0]
      const replay = await queen.admin.retryMessage(d.partitionId, d.transactionId)
      out.replayed = replay.replayed
      out.replayedAgain = (await queen.request('POST', `/api/v1/messages/${d.partitionId}/${d.transactionId}/retry`, {})).status
      const back = await queen.queue('orders').wait(false).pop()
      out.back = back.map((m) => m.data)
      out.backAck = (await queen.ack(back[0], true)).success
      out.dlqAfter = (await queen.queue('orders').dlq().get()).messages.length
      const health = await queen.request('GET', '/health')
      out.health = [health.status, health.body.status]
      await queen.close()
      out.closedRole = queen.role
      try {
        await queen.queue('orders').wait(false).pop()
        out.afterClose = 'no error'
      } catch (e) {
        out.afterClose = e.code
      }
      return out
    }, name)
    assertEq(r.role, 'writer', 'the only context is the writer')
    assertEq(r.persistedType, 'boolean', 'persist() was asked and its answer reported')
    assertEq(r.configured, true, 'create() configured the queue')
    assertEq(r.pushStatuses, ['queued', 'queued', 'queued', 'queued'], 'push statuses')
    assertEq(r.dupStatus, 'duplicate', 'a repeated transactionId is a duplicate')
    assert(r.dupId, 'the duplicate names the original message id')
    assertEq(r.popped, [{ n: 1 }, { n: 2 }, { n: 3 }, 4], 'pop returns the payloads in order')
    for (const f of ['consumerGroup', 'createdAt', 'data', 'id', 'leaseId', 'partition', 'partitionId', 'queue', 'transactionId']) {
      assert(r.fields.includes(f), `messages carry ${f} (have ${r.fields})`)
    }
    assertEq(r.ack, true, 'ack true')
    assertEq(r.nack.success, true, 'nack accepted')
    assertEq(r.nack.results[0].dlq, true, 'retryLimit 0: the nack dead-letters')
    assertEq(r.redelivered, [{ n: 3 }, 4], 'the rest of the nacked span comes again')
    assertEq(r.rest, true, 'batch ack')
    assertEq(r.dlq, [{ data: { n: 2 }, error: 'boom' }], 'the DLQ holds the nacked message and its error')
    assertEq(r.empty, [], 'nothing left to pop')
    assertEq(r.replayed, true, 'retryMessage replays')
    assertEq(r.replayedAgain, 404, 'a second replay finds no dead letter')
    assertEq(r.back, [{ n: 2 }], 'the replayed message is delivered again')
    assertEq(r.backAck, true, 'and acked')
    assertEq(r.dlqAfter, 0, 'the DLQ is empty after the replay')
    assertEq(r.health, [200, 'healthy'], '/health through queen.request')
    assertEq(r.closedRole, 'closed', 'role after close')
    assertEq(r.afterClose, 'closed', 'calls after close fail with code closed')
    await context.close()
  }],

  ['an ack across groups never reads as "nothing applied" when part was: a bad status is refused before anything is sent, a failed group\'s messages say so beside the applied ones, indexes are the caller\'s', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'ack-groups')
    const r = await page.evaluate(async (name) => {
      const queen = await window.QE.Queen.open({ name })
      await queen.queue('acks').push([{ data: 1 }, { data: 2 }])
      const pop = (group) => queen.queue('acks').group(group).subscriptionMode('all').batch(1).wait(false).pop()
      const out = {}
      // The bad item is the second: nothing of the batch is sent, and the error says index 1.
      const [a] = await pop('g1')
      const [b] = await pop('g2')
      b._status = 'bogus'
      out.refused = await queen.ack([a, b], true)
      delete b._status
      out.afterRefused = [(await queen.ack(a, true)).success, (await queen.ack(b, true)).success]
      out.single = await queen.ack({ ...a, _status: 7 }, true)
      // The second group's request fails (the broker refuses a leaseId that is not a string) after the first one was applied.
      const [c] = await pop('g3')
      const [d] = await pop('g4')
      out.partial = await queen.ack([c, { ...d, leaseId: 42 }], true)
      out.again = [(await queen.ack(c, true)).success, (await queen.ack(d, true)).success]
      await queen.close()
      return out
    }, uniqueName('ack-groups'))
    assertEq([r.refused.success, r.refused.code, r.refused.results], [false, 'bad_request', undefined], 'a bad status fails the whole ack')
    assert(/Invalid status 'bogus'.*\(acknowledgments\[1\]\.status\)/.test(r.refused.error), `the error names the caller's index 1: ${r.refused.error}`)
    assertEq(r.afterRefused, [true, true], 'nothing of the refused ack was applied: both messages ack now')
    assertEq([r.single.success, r.single.code, r.single.error], [false, 'bad_request',
      "Invalid status '7': expected completed, success, failed, retry or dlq"], 'a single message with a bad status is refused too')
    const p = r.partial
    assertEq([p.success, p.code], [false, 'bad_request'], 'the partial ack reports failure with the failed request\'s code')
    assertEq(p.results.map((x) => [x.index, x.success]), [[0, true], [1, false]], 'per message: the first group\'s ack applied, the second\'s not')
    assertEq(p[0].success, true, 'the results are also at their indexes, as queen-mq answers')
    assert(/leaseId.*\(acknowledgments\[1\]\.leaseId\)/.test(p.results[1].error) && p.error === p.results[1].error,
      `the failed item's error names the caller's index 1: ${p.results[1].error}`)
    assertEq(r.again, [false, true], 'acking again: the first was applied (its lease is gone), the second was not')
    await context.close()
  }],

  ['builders: autopilot, conflation, leaseSeconds, buffer (count, time, flushBuffer, close, a refused batch)', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'builders')
    const name = uniqueName('builders')
    const r = await page.evaluate(async (name) => {
      const { Queen } = window.QE
      const queen = await Queen.open({ name })
      const out = {}
      const data = (ms) => ms.map((m) => m.data)
      // autopilot: no batch set, the broker sizes it (a plain pop takes one).
      await queen.queue('auto').push(Array.from({ length: 20 }, (_, i) => ({ data: i })))
      out.plain = (await queen.queue('auto').group('plain').subscriptionMode('all').wait(false).pop()).length
      out.autopilot = (await queen.queue('auto').group('pilot').subscriptionMode('all').autopilot().wait(false).pop()).length
      out.autopilotBatch = (await queen.queue('auto').group('pilot5').subscriptionMode('all').autopilot().batch(5).wait(false).pop()).length
      // conflation: only the newest message of the partition; without a group the broker refuses and pop throws.
      await queen.queue('conf').partition('sensor').push([{ data: 'v1' }, { data: 'v2' }, { data: 'v3' }])
      const conflated = await queen.queue('conf').partition('sensor').group('latest').subscriptionMode('all').conflation().batch(10).wait(false).pop()
      out.conflated = data(conflated)
      out.conflatedAck = (await queen.ack(conflated)).success
      out.conflatedAfter = data(await queen.queue('conf').partition('sensor').group('latest').conflation().batch(10).wait(false).pop())
      try {
        await queen.queue('conf').conflation().wait(false).pop()
        out.conflationNoGroup = 'resolved'
      } catch (e) {
        out.conflationNoGroup = [e.code, e.message]
      }
      // leaseSeconds: a 3 s lease instead of the queue's 300 s: the message comes back after it (polled for
      // up to 20 s, far below 300 s).
      await queen.queue('lease').config({ leaseTime: 300 }).create()
      await queen.queue('lease').push({ data: 'x' })
      const [leased] = await queen.queue('lease').leaseSeconds(3).wait(false).pop()
      out.heldDuringLease = (await queen.queue('lease').wait(false).pop()).length
      let again = []
      for (const deadline = Date.now() + 20000; again.length === 0 && Date.now() < deadline;) {
        await new Promise((r) => setTimeout(r, 200))
        again = await queen.queue('lease').wait(false).pop()
      }
      out.afterLease = [again.length, again[0] && again[0].deliveryAttempt, leased.deliveryAttempt]
      try {
        queen.queue('lease').leaseSeconds(0)
      } catch (e) {
        out.badLease = e.code
      }
      // buffer: by count (3), by time (2 s), by flushBuffer, by close.
      const count = await queen.queue('buf').partition('c').buffer({ messageCount: 3, timeMillis: 60000 }).push([{ data: 1 }, { data: 2 }])
      out.bufferedResult = count
      out.beforeCount = (await queen.queue('buf').partition('c').batch(10).wait(false).pop()).length
      await queen.queue('buf').partition('c').buffer({ messageCount: 3, timeMillis: 60000 }).push({ data: 3 })
      await new Promise((r) => setTimeout(r, 100))
      const byCount = await queen.queue('buf').partition('c').batch(10).wait(false).pop()
      out.byCount = data(byCount)
      await queen.ack(byCount)
      await queen.queue('buf').partition('t').buffer({ messageCount: 100, timeMillis: 2000 }).push([{ data: 'a' }, { data: 'b' }])
      out.beforeTime = (await queen.queue('buf').partition('t').batch(10).wait(false).pop()).length
      let byTime = []
      for (const deadline = Date.now() + 15000; byTime.length === 0 && Date.now() < deadline;) {
        await new Promise((r) => setTimeout(r, 200))
        byTime = await queen.queue('buf').partition('t').batch(10).wait(false).pop()
      }
      out.byTime = data(byTime)
      await queen.queue('buf').partition('f').buffer({ messageCount: 100, timeMillis: 60000 }).push({ data: 'f' })
      await queen.queue('buf').partition('f').flushBuffer()
      out.byFlush = data(await queen.queue('buf').partition('f').batch(10).wait(false).pop())
      // A batch the broker refuses (an invalid queue name: 400) is dropped and counted, and flushBuffer rejects.
      await queen.queue('bad\u0001name').buffer({ messageCount: 100, timeMillis: 60000 }).push({ data: 'nope' })
      try {
        await queen.queue('bad\u0001name').flushBuffer()
        out.refused = 'resolved'
      } catch (e) {
        out.refused = e.code
      }
      const stats = queen.getBufferStats()
      out.refusedStats = [stats.failedMessages, typeof stats.lastError, stats.totalBufferedMessages]
      try {
        queen.queue('buf').buffer({ messageCount: 0 })
      } catch (e) {
        out.badBuffer = e.code
      }
      try {
        await queen.queue('buf').buffer().push({ data: 'never' }).onError(() => {})
        out.bufferedOnError = 'resolved'
      } catch (e) {
        out.bufferedOnError = e.code
      }
      await queen.queue('buf').partition('z').buffer({ messageCount: 100, timeMillis: 60000 }).push([{ data: 'z1' }, { data: 'z2' }])
      await queen.close()
      const reopened = await Queen.open({ name })
      out.byClose = data(await reopened.queue('buf').partition('z').batch(10).wait(false).pop())
      await reopened.close()
      return out
    }, name)
    assertEq(r.plain, 1, 'a plain pop takes one message')
    assert(r.autopilot === 20, `an autopilot pop without a batch lets the broker size it: got ${r.autopilot} of 20`)
    assertEq(r.autopilotBatch, 5, 'a batch set under autopilot is kept')
    assertEq(r.conflated, ['v3'], 'conflation delivers the newest message only')
    assertEq(r.conflatedAck, true, 'and acking it (group from the message) works')
    assertEq(r.conflatedAfter, [], 'the older ones were passed')
    assertEq(r.conflationNoGroup[0], 'bad_request', `conflation without a group throws: ${r.conflationNoGroup}`)
    assertEq(r.heldDuringLease, 0, 'leased')
    assertEq(r.afterLease, [1, 2, 1], 'leaseSeconds(3): the message is delivered again after its 3 s lease, not after the queue\'s 300 s')
    assertEq(r.badLease, 'invalid', 'leaseSeconds(0) is refused')
    assertEq(r.bufferedResult, { buffered: true, count: 2 }, 'a buffered push resolves at once')
    assertEq(r.beforeCount, 0, 'nothing sent below messageCount')
    assertEq(r.byCount, [1, 2, 3], 'sent when messageCount items wait')
    assertEq(r.beforeTime, 0, 'nothing sent before timeMillis')
    assertEq(r.byTime, ['a', 'b'], 'sent timeMillis after the first item')
    assertEq(r.byFlush, ['f'], 'flushBuffer sends at once')
    assertEq(r.refused, 'bad_request', 'a refused batch rejects flushBuffer')
    assertEq(r.refusedStats, [1, 'string', 0], 'and is counted as failed, not kept')
    assertEq(r.badBuffer, 'invalid', 'buffer({ messageCount: 0 }) is refused')
    assertEq(r.bufferedOnError, 'invalid', 'onError on a buffered push (it could never be called) is refused')
    assertEq(r.byClose, ['z1', 'z2'], 'close() flushes the buffers')
    await context.close()
  }],

  ['consume: each, limit, onError, renewLease; transaction; renew; seek', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'consume')
    const name = uniqueName('consume')
    const r = await page.evaluate(async (name) => {
      const { Queen } = window.QE
      const queen = await Queen.open({ name })
      const out = {}
      await queen.queue('jobs').config({ retryLimit: 0 }).create()
      await queen.queue('jobs').push([1, 2, 3, 4, 5].map((n) => ({ data: { n } })))
      const seen = []
      await queen.queue('jobs').group('g').subscriptionMode('all').batch(5).wait(false).each().limit(3)
        .renewLease(true, 50)
        .consume(async (m) => { seen.push(m.data.n); await new Promise((r) => setTimeout(r, 60)) })
      out.each = seen
      // The two not processed were given back (retry ack) and come next.
      const failed = []
      await queen.queue('jobs').group('g').batch(5).wait(false).limit(2)
        .consume(async (batch) => { throw new Error('handler failed on ' + batch.length) })
        .onError(async (batch, error) => {
          failed.push(error.message)
          await queen.ack(batch, 'dlq', { group: 'g', error: error.message })
        })
      out.failed = failed
      // each(): onError acks the failed message `true` (log and skip), which keeps the lease: the loop goes
      // on with the rest of the batch at once, not after the 60 s lease (session 36's QA).
      await queen.queue('skip').config({ leaseTime: 60 }).create()
      await queen.queue('skip').push([1, 2, 3].map((n) => ({ data: { n } })))
      const skipped = []
      const started = Date.now()
      await queen.queue('skip').batch(3).each().wait(false).limit(3)
        .consume(async (m) => { if (m.data.n === 1) throw new Error('poison'); skipped.push(m.data.n) })
        .onError(async (m) => { await queen.ack(m, true) })
      out.skipped = [skipped, Date.now() - started < 10000]
      out.dlq = (await queen.queue('jobs').dlq('g').get()).messages.map((m) => m.data.n).sort()
      // The dead-lettering released the lease: the rest of that batch is delivered again.
      out.after = (await queen.queue('jobs').group('g').batch(5).wait(false).pop()).map((m) => m.data.n)
      // Transaction: ack one message and push another, atomically.
      await queen.queue('tx-in').push({ data: { step: 1 } })
      const [m] = await queen.queue('tx-in').wait(false).pop()
      const tx = await queen.transaction().ack(m).queue('tx-out').partition('p1').push([{ data: { step: 2 } }]).commit()
      out.tx = tx.success
      out.txOut = (await queen.queue('tx-out').partition('p1').wait(false).pop()).map((x) => x.data)
      out.txIn = await queen.queue('tx-in').wait(false).pop()
      try {
        await queen.transaction().commit()
      } catch (e) {
        out.emptyTx = e.code
      }
      // Renew a lease.
      await queen.queue('lease').push({ data: 1 })
      const [l] = await queen.queue('lease').wait(false).pop()
      const renewed = await queen.renew(l)
      out.renew = [renewed.success, typeof renewed.newExpiresAt]
      // Seek a group back to the start: its messages come again.
      await queen.queue('seek').push([{ data: 'a' }, { data: 'b' }])
      const first = await queen.queue('seek').group('s').subscriptionMode('all').batch(2).wait(false).pop()
      await queen.ack(first, true, { group: 's' })
      out.seek = (await queen.admin.seekConsumerGroup('s', 'seek', { timestamp: '2000-01-01T00:00:00Z' })).success
      out.afterSeek = (await queen.queue('seek').group('s').batch(2).wait(false).pop()).map((x) => x.data)
      await queen.close()
      return out
    }, name)
    assertEq(r.each, [1, 2, 3], 'each() + limit(3) handles three messages one by one')
    assertEq(r.failed, ['handler failed on 2'], 'onError receives the failed batch and the error')
    assertEq(r.skipped, [[2, 3], true], 'onError acking true keeps the lease: the rest of the batch is handled at once')
    assertEq(r.dlq, [4], 'onError dead-lettered the batch: its first message is filed')
    assertEq(r.after, [5], 'and the rest of the span is delivered again')
    assertEq(r.tx, true, 'transaction committed')
    assertEq(r.txOut, [{ step: 2 }], 'the transaction push is visible')
    assertEq(r.txIn, [], 'the transaction ack is applied')
    assertEq(r.emptyTx, 'invalid', 'an empty transaction is refused client-side')
    assertEq(r.renew, [true, 'string'], 'renew extends the lease')
    assertEq(r.seek, true, 'seek succeeded')
    assertEq(r.afterSeek, ['a', 'b'], 'after a seek back the group reads again')
    await context.close()
  }],

  ['state survives a page reload', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'reload')
    const name = uniqueName('reload')
    await page.evaluate(async (name) => {
      const queen = await window.QE.Queen.open({ name })
      await queen.queue('keep').push([{ data: 'a' }, { data: 'b' }, { data: 'c' }])
      const [m] = await queen.queue('keep').wait(false).pop()
      await queen.ack(m, true)
      await queen.queue('keep').dlq() // builder only
    }, name)
    await page.reload()
    await page.waitForFunction(() => window.qeReady === true)
    const after = await page.evaluate(async (name) => {
      const queen = await window.QE.Queen.open({ name })
      const msgs = await queen.queue('keep').batch(10).wait(false).pop()
      await queen.ack(msgs, true)
      return { role: queen.role, data: msgs.map((m) => m.data) }
    }, name)
    assertEq(after.role, 'writer', 'the reloaded page is the writer again')
    assertEq(after.data, ['b', 'c'], 'unacked messages survive the reload; the acked one does not come back')
    await page.reload()
    await page.waitForFunction(() => window.qeReady === true)
    const last = await page.evaluate(async (name) => {
      const queen = await window.QE.Queen.open({ name })
      return (await queen.queue('keep').batch(10).wait(false).pop()).length
    }, name)
    assertEq(last, 0, 'acks survive a reload')
    await page.screenshot({ path: `${ARTIFACTS}/reload.png` })
    await context.close()
  }],

  ['views: the default build answers view routes 501 not_built; views: true has them, fetched only then', async ({ browser, url }) => {
    const context = await browser.newContext()
    const fetched = []
    context.on('request', (r) => fetched.push(new URL(r.url()).pathname))
    const a = await openPage(context, url, 'views A')
    const name = uniqueName('views')
    const lean = await a.evaluate(async (name) => {
      const queen = await window.QE.Queen.open({ name })
      await queen.queue('v').push([{ data: 1 }, { data: 2 }])
      const failure = await queen.admin.listQueues().then(() => null, (e) => ({ code: e.code, status: e.status, message: e.message }))
      const bulk = await queen.admin.replayDeadLetters({ queue: 'v' }, { dryRun: true })
        .then(() => null, (e) => ({ code: e.code, status: e.status, message: e.message }))
      const dlq = await queen.queue('v').dlq().limit(5).get()
      const health = (await queen.request('GET', '/health')).status
      await queen.close()
      return { failure, bulk, dlq: Array.isArray(dlq.messages), health }
    }, name)
    assertEq(lean.bulk && [lean.bulk.code, lean.bulk.status], ['not_built', 501], 'bulk dead-letter work on the default build is 501 not_built')
    assert(/views: true/.test(lean.bulk.message), 'the error says how to get the bulk routes: ' + lean.bulk.message)
    assertEq(lean.failure && [lean.failure.code, lean.failure.status], ['not_built', 501], 'a view route on the default build is 501 not_built')
    assert(/views: true/.test(lean.failure.message), 'the error says how to get the view routes: ' + lean.failure.message)
    assertEq([lean.dlq, lean.health], [true, 200], 'the fluent API (dlq().get()) and /health work without views')
    assert(!fetched.some((p) => /queen_edge_views/.test(p)), 'the default build never fetches the views files')
    assert(fetched.some((p) => p.endsWith('/queen_edge_bg.wasm')), 'the default build fetched its own wasm')

    const full = await a.evaluate(async (name) => {
      window.queen = await window.QE.Queen.open({ name, views: true })
      const queues = (await window.queen.admin.listQueues()).queues.map((q) => q.name)
      const detail = await window.queen.admin.getQueue('v')
      const prometheus = await window.queen.request('GET', '/metrics/prometheus')
      // Issue 16 in the browser: a delivery log and bulk dead-letter work through the admin API.
      const w = window.queen.queue('w')
      await w.config({ retryLimit: 0, deliveryLog: 'failures', retryBackoff: { baseMs: 10 } }).create()
      await w.push([{ data: 'poison' }])
      const [m] = await w.wait(false).pop()
      await window.queen.ack(m, false, { error: 'boom' })
      const dry = await window.queen.admin.replayDeadLetters({ queue: 'w', errorContains: 'boo' }, { dryRun: true })
      const replayed = await window.queen.admin.replayDeadLetters({ queue: 'w' })
      const again = await window.queen.admin.replayDeadLetters({ queue: 'w' })
      const [back] = await w.wait(false).pop()
      const log = await window.queen.admin.listDeliveries({ queue: 'w' })
      return {
        role: window.queen.role, queues, total: detail.totals.total, prometheus: prometheus.status,
        bulk: [dry.count, dry.sample[0].errorMessage, replayed.replayed, again.replayed, back.transactionId.startsWith('dlq:')],
        log: log.deliveries.map((d) => [d.outcome, d.error])
      }
    }, name)
    assertEq(full.bulk, [1, 'boom', 1, 0, true], 'bulk dry run, replay as dlq:<id>, and a second replay that adds nothing')
    assertEq(full.log, [['dead_lettered', 'boom']], 'the delivery log holds the failed attempt')
    assertEq(full.role, 'writer', 'the views build took the database over')
    assertEq([full.queues.includes('v'), full.total, full.prometheus], [true, 2, 200], 'the views build serves the view routes on the same data')
    assert(fetched.some((p) => p.endsWith('/queen_edge_views_bg.wasm')) && fetched.some((p) => p.endsWith('/queen_edge_views.js')),
      'views: true fetched the views glue and wasm')

    // A follower on the default build: its view requests are answered by the writer, which has views.
    const b = await openPage(context, url, 'views B')
    const follower = await b.evaluate(async (name) => {
      const queen = await window.QE.Queen.open({ name })
      return { role: queen.role, queues: (await queen.admin.listQueues()).queues.map((q) => q.name) }
    }, name)
    assertEq([follower.role, follower.queues.includes('v')], ['follower', true], 'a default-build follower gets view answers from a views writer')
    await context.close()
  }],

  ['two tabs: one writer, forwarding, long-polls, disjoint spans, takeover within 10 s', async ({ browser, url }) => {
    const context = await browser.newContext()
    const a = await openPage(context, url, 'tab A')
    const b = await openPage(context, url, 'tab B')
    const name = uniqueName('tabs')
    const roleA = await a.evaluate(async (name) => {
      window.queen = await window.QE.Queen.open({ name })
      return window.queen.role
    }, name)
    const roleB = await b.evaluate(async (name) => {
      window.queen = await window.QE.Queen.open({ name })
      window.roleChangedAt = null
      window.queen.onRoleChange((role) => { if (role === 'writer') window.roleChangedAt = Date.now() })
      return window.queen.role
    }, name)
    assertEq([roleA, roleB], ['writer', 'follower'], 'the first tab writes, the second follows')

    // A long-poll from the follower is answered by a push in the writer's tab.
    const longPoll = b.evaluate(async () => {
      const t0 = Date.now()
      window.lpStarted = true
      const msgs = await window.queen.queue('lp').timeoutMillis(10000).pop()
      return { ms: Date.now() - t0, data: msgs.map((m) => m.data) }
    })
    // The 400 ms are counted from B's t0, not from when node sent the evaluate (a loaded renderer may run it late).
    await b.waitForFunction(() => window.lpStarted === true, null, { timeout: 15000 })
    await sleep(400)
    await a.evaluate(() => window.queen.queue('lp').push({ data: 'wake' }))
    const lp = await longPoll
    assertEq(lp.data, ['wake'], 'the follower long-poll got the push')
    assert(lp.ms >= 300 && lp.ms < 8000, `the follower long-poll parked and woke on the push, not its 10 s timeout (${lp.ms} ms)`)

    // Both tabs consume one group over 3 partitions; record every delivery.
    await a.evaluate(async () => {
      const q = window.queen
      await q.queue('work').config({ leaseTime: 60, retryLimit: 5 }).create()
      for (const p of ['p0', 'p1', 'p2']) {
        await q.queue('work').partition(p).push(Array.from({ length: 20 }, (_, i) => ({ data: { p, i } })))
      }
    })
    const consume = (page, label) => page.evaluate(async (label) => {
      const q = window.queen
      const spans = []
      const deadline = Date.now() + 15000
      let idle = 0
      while (Date.now() < deadline && idle < 6) {
        const msgs = await q.queue('work').group('g').subscriptionMode('all').batch(4).wait(true).timeoutMillis(300).pop()
        if (msgs.length === 0) { idle++; continue }
        idle = 0
        const claimedAt = performance.timeOrigin + performance.now()
        await new Promise((r) => setTimeout(r, 15))
        const ack = await q.ack(msgs, true, { group: 'g' })
        spans.push({
          tab: label,
          partitionId: msgs[0].partitionId,
          offsets: msgs.map((m) => m.offset),
          leaseId: msgs[0].leaseId,
          claimedAt,
          ackedAt: performance.timeOrigin + performance.now(),
          ackOk: ack.success
        })
      }
      return spans
    }, label)
    const [spansA, spansB] = await Promise.all([consume(a, 'A'), consume(b, 'B')])
    const spans = [...spansA, ...spansB]
    const keys = spans.flatMap((s) => s.offsets.map((o) => `${s.partitionId}:${o}`))
    assertEq(keys.length, 60, 'every message delivered')
    assertEq(new Set(keys).size, 60, 'no message delivered twice')
    assert(spans.every((s) => s.ackOk), 'every ack accepted')
    assert(spansA.length > 0 && spansB.length > 0, `both tabs consumed (A ${spansA.length}, B ${spansB.length} spans)`)
    for (const x of spans) {
      for (const y of spans) {
        if (x === y || x.partitionId !== y.partitionId) continue
        const overlapTime = x.claimedAt < y.ackedAt && y.claimedAt < x.ackedAt
        const overlapOffsets = x.offsets.some((o) => y.offsets.includes(o))
        assert(!overlapOffsets, `spans never share a message (${JSON.stringify([x, y])})`)
        assert(!(overlapTime && x.tab !== y.tab && x.leaseId === y.leaseId), 'two tabs never hold one lease')
      }
    }

    // Nothing acknowledged is lost: A pushes, gets its answer, and its tab closes at once.
    const pushed = await a.evaluate(() => window.queen.queue('handover').push([{ data: 1 }, { data: 2 }, { data: 3 }]))
    assertEq(pushed.map((p) => p.status), ['queued', 'queued', 'queued'], 'push acknowledged before the close')
    // B parks a long-poll at A (the writer) and A's tab goes away while it waits.
    const parked = b.evaluate(async () => {
      const msgs = await window.queen.queue('late').timeoutMillis(15000).pop()
      return msgs.map((m) => m.data)
    })
    await sleep(300)
    const closedAt = Date.now()
    await a.close()
    // In locks mode only the release of A's Web Lock makes B the writer (noWriterTimeout is 30 s), so a
    // broken hand-over still fails; the bound leaves room for a loaded machine (about 50 ms unloaded).
    await b.waitForFunction(() => window.roleChangedAt !== null, null, { timeout: 15000 })
    const takeover = await b.evaluate(() => ({ role: window.queen.role, at: window.roleChangedAt }))
    assertEq(takeover.role, 'writer', 'tab B took over')
    const takeoverMs = takeover.at - closedAt
    console.log(`      takeover after the writer's tab closed: ${takeoverMs} ms`)
    assert(takeoverMs < 10000, `takeover within 10 s (${takeoverMs} ms)`)
    const handed = await b.evaluate(async () => {
      const msgs = await window.queen.queue('handover').batch(10).wait(false).pop()
      await window.queen.ack(msgs, true)
      return msgs.map((m) => m.data)
    })
    assertEq(handed, [1, 2, 3], 'messages acknowledged by the old writer are there after the takeover')
    const again = await b.evaluate(() => window.queen.queue('work').group('g').batch(100).wait(false).pop())
    assertEq(again.length, 0, 'acked work is not redelivered after the takeover')
    // A third tab follows B; its push wakes B's re-sent long-poll.
    const c = await openPage(context, url, 'tab C')
    const roleC = await c.evaluate(async (name) => {
      window.queen = await window.QE.Queen.open({ name })
      await window.queen.queue('late').push({ data: 'late' })
      return window.queen.role
    }, name)
    assertEq(roleC, 'follower', 'a new tab follows the new writer')
    assertEq(await parked, ['late'], 'the long-poll parked at the old writer was re-sent and answered')
    await b.screenshot({ path: `${ARTIFACTS}/two-tabs-b.png` })
    await context.close()
  }],

  ['close() from onRoleChange(\'follower\') while another connection takes the database over and pushes run: close() resolves and every push settles', async ({ browser, url }) => {
    const context = await browser.newContext()
    const name = uniqueName('close-on-stepdown')
    const w = await openPage(context, url, 'writer')
    const t = await openPage(context, url, 'taker')
    await w.evaluate(async (name) => {
      const queen = await window.QE.Queen.open({ name })
      await queen.queue('q').create()
      window.out = { answers: [], closed: 'pending', started: 0 }
      queen.onRoleChange((role) => {
        if (role === 'follower') queen.close().then(() => { window.out.closed = 'resolved' }, (e) => { window.out.closed = 'rejected ' + e.message })
      })
      let i = 0
      const pump = () => {
        if (window.out.closed !== 'pending' || queen.role === 'closed') return
        for (let k = 0; k < 8; k++) {
          const n = i++
          window.out.started++
          queen.queue('q').partition('p' + (n % 8)).push({ data: n }).then((r) => r[0].status, (e) => e.code).then((a) => { window.out.answers[n] = a })
        }
        setTimeout(pump, 1)
      }
      pump()
    }, name)
    // Another connection takes the database over (a version change, as a writer of another build would).
    await t.evaluate(async (name) => {
      const version = (await indexedDB.databases()).find((d) => d.name === name).version
      await new Promise((resolve, reject) => {
        const open = indexedDB.open(name, version + 1)
        open.onsuccess = () => { open.result.close(); resolve() }
        open.onerror = () => reject(open.error)
      })
    }, name)
    await w.waitForFunction(() => window.out.closed !== 'pending' && window.out.answers.filter((a) => a !== undefined).length === window.out.started, null, { timeout: 15000 })
      .catch(() => {})
    const out = await w.evaluate(() => ({
      closed: window.out.closed, started: window.out.started, settled: window.out.answers.filter((a) => a !== undefined).length
    }))
    assertEq(out.closed, 'resolved', 'close() resolved')
    assertEq(out.settled, out.started, 'every push settled')
    await context.close()
  }],

  ['close() with requests in flight: the writer\'s own get their real answers (stored exactly when answered queued, the rest say nothing was written); a follower\'s reject `closed` saying they may or may not have been applied', async ({ browser, url }) => {
    const context = await browser.newContext()
    const name = uniqueName('close-inflight')
    const w = await openPage(context, url, 'writer')
    const f = await openPage(context, url, 'follower')
    /**
     * In `page`: `count` pushes (partitions p0 to p7 of queue `q`), then close(): after a macrotask when `closeAt`
     * is 0, else as soon as `closeAt` pushes are answered. Returns each push's answer and how many were pending
     * at close().
     */
    const pushThenClose = (page, q, count, closeAt) => page.evaluate(async ([name, q, count, closeAt]) => {
      const queen = await window.QE.Queen.open({ name })
      await queen.queue(q).create()
      let settled = 0
      let pendingAtClose = -1
      let closing = null
      const close = () => { pendingAtClose = count - settled; closing = queen.close() }
      const answers = Array.from({ length: count }, (_, i) => queen.queue(q).partition('p' + (i % 8)).push({ data: i })
        .then((r) => r[0].status, (e) => `${e.code}: ${e.message}`)
        .then((answer) => { settled++; if (closeAt && settled === closeAt) close(); return answer }))
      if (!closeAt) await new Promise((resolve) => setTimeout(resolve, 0)).then(close)
      const all = await Promise.all(answers)
      await closing
      return { answers: all, pendingAtClose }
    }, [name, q, count, closeAt])
    const stored = (q) => f.evaluate(async ([name, q]) => {
      const queen = await window.QE.Queen.open({ name })
      let n = 0
      for (let msgs; (msgs = await queen.queue(q).batch(1000).partitions(8).wait(false).pop()).length;) n += msgs.length
      await queen.close()
      return n
    }, [name, q])

    const own = await pushThenClose(w, 'own', 8, 0)
    const ownQueued = own.answers.filter((a) => a === 'queued').length
    assert(own.pendingAtClose > 0, `pushes were pending at close() (${own.pendingAtClose})`)
    for (const a of own.answers) {
      assert(a === 'queued' || /^closed: .*nothing of the request was written/.test(a), `each push the writer's broker ran says what happened to it: ${a}`)
    }
    assert(ownQueued >= 1, `the commit under way at close() finished (${JSON.stringify(own.answers)})`)
    assertEq(await stored('own'), ownQueued, 'stored after close() = pushes answered queued')

    await w.evaluate(async (name) => { window.queen = await window.QE.Queen.open({ name }) }, name)
    const fromFollower = await pushThenClose(f, 'forwarded', 2000, 20)
    await w.evaluate(() => window.queen.close())
    assert(fromFollower.pendingAtClose > 0, `forwarded pushes were pending at close() (${fromFollower.pendingAtClose})`)
    const rejected = fromFollower.answers.filter((a) => a !== 'queued')
    assert(rejected.length > 0 && rejected.length <= fromFollower.pendingAtClose, `pushes pending at close() rejected (${rejected.length} of ${fromFollower.pendingAtClose})`)
    for (const a of rejected) assert(/^closed: .*may or may not have been applied/.test(a), `a forwarded push pending at close() says its outcome is unknown: ${a}`)
    assert(await stored('forwarded') >= 2000 - rejected.length, 'every push answered queued is stored')
    await context.close()
  }],

  ['without Web Locks: two tabs pushing at once lose nothing (the storage fence keeps one writer)', async ({ browser, url }) => {
    // A non-secure origin (plain http on a LAN address) has no navigator.locks.
    const context = await browser.newContext()
    await context.addInitScript(() => { delete Navigator.prototype.locks })
    const a = await openPage(context, url, 'no-locks A')
    const b = await openPage(context, url, 'no-locks B')
    const name = uniqueName('nolocks')
    const open = (page) => page.evaluate(async (name) => {
      if ('locks' in navigator) throw new Error('navigator.locks is still there')
      window.roles = []
      window.queen = await window.QE.Queen.open({ name })
      window.roles.push(window.queen.role)
      window.queen.onRoleChange((role) => window.roles.push(role))
      return window.queen.role
    }, name)
    // Opened at the same moment: neither hears a writer, so both may claim; the fence settles it.
    const roles = await Promise.all([open(a), open(b)])
    const PER_TAB = 200
    const push = (page, label) => page.evaluate(async ({ label, n }) => {
      const q = window.queen
      const acked = []
      const failed = []
      let next = 0
      const worker = async () => {
        while (next < n) {
          const i = next++
          try {
            const [r] = await q.queue('fence').push({ data: { label, i } })
            if (r.status === 'queued') acked.push(r.transactionId)
            else failed.push(r.status)
          } catch (e) {
            failed.push(e.code || String(e))
          }
        }
      }
      await Promise.all([worker(), worker(), worker(), worker()])
      return { acked, failed, roles: window.roles }
    }, { label, n: PER_TAB })
    const [ra, rb] = await Promise.all([push(a, 'A'), push(b, 'B')])
    console.log(`      opened as ${roles.join(' + ')}; roles over time A ${ra.roles.join('>')}, B ${rb.roles.join('>')}; ` +
      `acknowledged ${ra.acked.length} + ${rb.acked.length}, failed ${ra.failed.length + rb.failed.length}`)
    await a.close()
    await b.close()
    // A fresh tab loads from IndexedDB alone: everything acknowledged must be there, exactly once.
    const fresh = await openPage(context, url, 'no-locks fresh')
    const found = await fresh.evaluate(async (name) => {
      const queen = await window.QE.Queen.open({ name })
      const ids = []
      for (;;) {
        const msgs = await queen.queue('fence').batch(500).wait(false).pop()
        if (msgs.length === 0) break
        ids.push(...msgs.map((m) => m.transactionId))
        await queen.ack(msgs, true)
      }
      const role = queen.role
      await queen.close()
      return { ids, role }
    }, name)
    assertEq(found.role, 'writer', 'the fresh tab is the writer')
    const acked = [...ra.acked, ...rb.acked]
    const counts = new Map()
    for (const id of found.ids) counts.set(id, (counts.get(id) || 0) + 1)
    const missing = acked.filter((id) => !counts.has(id))
    const twice = [...counts].filter(([, n]) => n > 1)
    assertEq(missing.length, 0, `every acknowledged push is stored (${missing.length} of ${acked.length} missing)`)
    assertEq(twice.length, 0, 'no message is stored twice')
    assertEq(found.ids.length, acked.length, 'nothing unacknowledged appeared')
    assertEq(acked.length, 2 * PER_TAB, `every push was acknowledged (failures: ${JSON.stringify([...ra.failed, ...rb.failed].slice(0, 5))})`)
    await context.close()
  }],

  ['without Web Locks: a take-over held back by a connection that does not close waits and says so (onBlocked)', async ({ browser, url }) => {
    const context = await browser.newContext()
    await context.addInitScript(() => { delete Navigator.prototype.locks })
    const a = await openPage(context, url, 'blocked A')
    const b = await openPage(context, url, 'blocked B')
    const name = uniqueName('blocked')
    await pushBefore(a, name)
    // Page code in B holds its own connection and has no versionchange handler: it never closes.
    await holdConnection(b, name)
    // A opens again: no writer answers, so it takes over, and the take-over waits for B's connection.
    await openWatched(a, name)
    await a.waitForFunction(() => window.events.length > 0, null, { timeout: 15000 })
    assertEq(await a.evaluate(() => window.events), [true], 'onBlocked(true), and Queen.open still waits')
    await b.evaluate(() => window.holder.close())
    await a.waitForFunction(() => window.events.includes('opened') || window.events.some((e) => typeof e === 'string'),
      null, { timeout: 15000 })
    assertEq(await a.evaluate(() => window.events), [true, false, 'opened'], 'onBlocked(false), then the open resolves')
    const found = await a.evaluate(async () => {
      const role = window.queen.role
      const messages = await window.queen.queue('held').batch(10).wait(false).pop()
      await window.queen.close()
      return { role, data: messages.map((m) => m.data) }
    })
    assertEq(found, { role: 'writer', data: ['before'] }, 'the writer once the holder closed, with everything written before')
    await context.close()
  }],

  ['without Web Locks: a second tab that opens while a take-over is held back says so too (onBlocked) — review-vfence', async ({ browser, url }) => {
    // IndexedDB queues B's open behind A's blocked take-over, but fires `blocked` only on A's request:
    // B's Queen.open waits as long as A's does and must say so as well.
    const context = await browser.newContext()
    await context.addInitScript(() => { delete Navigator.prototype.locks })
    const a = await openPage(context, url, 'queued A')
    const b = await openPage(context, url, 'queued B')
    const holder = await openPage(context, url, 'queued holder')
    const name = uniqueName('queued')
    await pushBefore(a, name)
    // Page code holds its own connection and has no versionchange handler: it never closes.
    await holdConnection(holder, name)
    await openWatched(a, name)
    await a.waitForFunction(() => window.events.length > 0, null, { timeout: 15000 })
    assertEq(await a.evaluate(() => window.events), [true], 'A: onBlocked(true), and Queen.open still waits')
    // B: nobody answers its hello (A is not the writer yet), so it takes over too, queued behind A.
    await openWatched(b, name)
    let bEvents = []
    try {
      await b.waitForFunction(() => window.events.length > 0, null, { timeout: 10000 })
    } catch {
      // B said nothing: checked below, after the holder let both go.
    }
    bEvents = await b.evaluate(() => window.events.slice())
    await holder.evaluate(() => window.holder.close())
    for (const page of [a, b]) {
      await page.waitForFunction(() => window.events.includes('opened') || window.events.some((e) => typeof e === 'string'),
        null, { timeout: 15000 })
      await page.evaluate(() => window.queen && window.queen.close())
    }
    assertEq(bEvents, [true], 'B: its Queen.open waited behind the held-back take-over; onBlocked(true) must say so')
    await context.close()
  }],

  ['Queen.deleteDatabase under open brokers: the writer and its followers close with code closed naming deleteDatabase (pending and later calls, a consume loop), the lock is free, and Queen.open starts on the new, empty database', async ({ browser, url }) => {
    const context = await browser.newContext()
    const a = await openPage(context, url, 'deleted writer')
    const b = await openPage(context, url, 'deleted follower')
    const c = await openPage(context, url, 'deleting tab')
    const name = uniqueName('deleted')
    const outcome = (promise) => promise.then(() => 'no error', (e) => [e.code, /deleteDatabase/.test(e.message)])
    const roleA = await a.evaluate(async ([name, outcome]) => {
      window.outcome = eval(outcome)
      window.queen = await window.QE.Queen.open({ name })
      await window.queen.queue('kept').push({ data: 'old' })
      window.parked = window.outcome(window.queen.queue('idle').timeoutMillis(20000).pop())
      return window.queen.role
    }, [name, outcome.toString()])
    const roleB = await b.evaluate(async ([name, outcome]) => {
      window.outcome = eval(outcome)
      window.queen = await window.QE.Queen.open({ name })
      window.consumed = window.outcome(window.queen.queue('idle').group('g').consume(async () => {}))
      return window.queen.role
    }, [name, outcome.toString()])
    assertEq([roleA, roleB], ['writer', 'follower'], 'one writer, one follower')
    await sleep(300)
    await c.evaluate((name) => window.QE.Queen.deleteDatabase(name), name)
    const after = (page) => page.evaluate(async () => {
      const t0 = Date.now()
      while (window.queen.role !== 'closed' && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 50))
      return {
        role: window.queen.role,
        pending: await (window.parked || window.consumed),
        push: await window.outcome(window.queen.queue('kept').push({ data: 'x' })),
        pop: await window.outcome(window.queen.queue('kept').wait(false).pop()),
        close: await window.outcome(window.queen.close())
      }
    })
    const closed = { role: 'closed', pending: ['closed', true], push: ['closed', true], pop: ['closed', true], close: 'no error' }
    assertEq(await after(a), closed, 'the writer closed: its parked pop and later calls fail closed, naming deleteDatabase')
    assertEq(await after(b), closed, 'the follower closed too: its consume loop stops with that error')
    const r = await c.evaluate(async (name) => {
      const { Queen } = window.QE
      const queen = await Queen.open({ name })
      const out = { kept: await queen.queue('kept').wait(false).pop() }
      out.pushed = (await queen.queue('fresh').push({ data: 'new' }))[0].status
      out.popped = (await queen.queue('fresh').wait(false).pop()).map((m) => m.data)
      out.role = queen.role
      // The writer's own tab deletes it: the same.
      await Queen.deleteDatabase(name)
      const t0 = Date.now()
      while (queen.role !== 'closed' && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 50))
      out.ownRole = queen.role
      out.ownPush = await queen.queue('fresh').push({ data: 'x' }).then(() => 'no error', (e) => e.code)
      const again = await Queen.open({ name })
      out.againPush = (await again.queue('fresh').push({ data: 'again' }))[0].status
      out.againRole = again.role
      await again.close()
      return out
    }, name)
    assertEq(r, { kept: [], pushed: 'queued', popped: ['new'], role: 'writer', ownRole: 'closed', ownPush: 'closed', againPush: 'queued', againRole: 'writer' },
      'a fresh Queen.open writes the new, empty database; the writer deleting its own database closes too, and opens again')
    // The browser clearing the site's data closes a writer the same way.
    await a.evaluate(async (name) => { window.queen = await window.QE.Queen.open({ name }) }, name)
    await (await context.newCDPSession(a)).send('Storage.clearDataForOrigin', { origin: url, storageTypes: 'indexeddb' })
    assertEq((await after(a)).push, ['closed', true], 'site data cleared: the writer closes, saying so')
    await context.close()
  }],

  ['a broker another one took over from answers no request from its memory: code superseded (so it is sent on) — review-vfence', async ({ browser, url }) => {
    // Two brokers on one database in one page: the second's take-over closes the first's connection. The
    // first must then refuse even a read it could answer from memory (it would be stale), as `superseded`,
    // which js/local.js answers by stepping down and sending the request to the writer.
    const context = await browser.newContext()
    const page = await openPage(context, url, 'superseded-reads')
    const name = uniqueName('superseded-reads')
    const r = await page.evaluate(async (name) => {
      const glue = await import('/vendor/queen-edge/queen_edge_views.js')
      await glue.default()
      const enc = new TextEncoder()
      const dec = new TextDecoder()
      const headers = { 'Content-Type': 'application/json' }
      const push = (broker, n) => broker.handle('POST', '/api/v1/push', headers,
        enc.encode(JSON.stringify({ items: [{ queue: 'q', payload: { n } }] })))
      const outcome = (p) => p.then((x) => ({ status: x.status, body: dec.decode(x.body) }), (e) => ({ error: e.code }))
      const first = await glue.WasmBroker.open(name, { persist: false })
      const pushed = (await push(first, 1)).status
      // Read once, so the first broker holds the queue in memory.
      const before = await outcome(first.handle('GET', '/api/v1/resources/queues/q', {}, undefined))
      const second = await glue.WasmBroker.open(name, { persist: false })
      const pushedSecond = (await push(second, 2)).status
      const after = await outcome(first.handle('GET', '/api/v1/resources/queues/q', {}, undefined))
      const epochs = [first.epoch, second.epoch]
      first.close(); first.free()
      second.close(); second.free()
      return { pushed, before: before.status, pushedSecond, after, epochs }
    }, name)
    await context.close()
    assertEq([r.pushed, r.before, r.pushedSecond], [201, 200, 201], 'both brokers wrote while each was the writer')
    assert(r.epochs[1] > r.epochs[0], `the second claimed a later epoch (${r.epochs})`)
    assertEq(r.after, { error: 'superseded' }, 'the first broker refuses the read as superseded')
  }],

  ['writer tab crashed mid-burst: every acknowledged write is there exactly once, no ack reported failed, no lease leaked', async ({ browser, url }) => {
    const context = await browser.newContext()
    const w = await openPage(context, url, 'crash writer')
    const f = await openPage(context, url, 'crash follower')
    const name = uniqueName('crash')
    await w.evaluate(async (name) => {
      window.queen = await window.QE.Queen.open({ name })
      // Long leases: a pop whose answer was lost would hold its messages past the end of the test.
      await window.queen.queue('burst').config({ leaseTime: 600, retryLimit: 100, retryDelay: 0 }).create()
    }, name)
    const roleF = await f.evaluate(async (name) => {
      window.queen = await window.QE.Queen.open({ name })
      return window.queen.role
    }, name)
    assertEq(roleF, 'follower', 'the second tab follows')
    // The burst, from the follower: 4 pushers and 3 consumers (pop 5, ack), all forwarded to the writer.
    const burst = f.evaluate(async () => {
      const q = window.queen
      const out = { pushed: [], pushFailed: [], consumed: [], ackFailed: [] }
      window.progress = out
      let pushing = true
      const pusher = async (k) => {
        for (let i = 0; i < 100; i++) {
          try {
            const [r] = await q.queue('burst').push({ data: { k, i } })
            if (r.status === 'queued') out.pushed.push(r.transactionId)
            else out.pushFailed.push(r.status)
          } catch (e) {
            out.pushFailed.push(e.code || String(e))
          }
        }
      }
      const consumer = async () => {
        let idle = 0
        while (pushing || idle < 3) {
          const msgs = await q.queue('burst').batch(5).wait(false).pop()
          if (msgs.length === 0) {
            idle++
            await new Promise((resolve) => setTimeout(resolve, 30))
            continue
          }
          idle = 0
          const ack = await q.ack(msgs, true)
          if (ack.success) out.consumed.push(...msgs.map((m) => m.transactionId))
          else out.ackFailed.push(ack.error || ack.code)
        }
      }
      const pushers = [0, 1, 2, 3].map(pusher)
      const consumers = [consumer(), consumer(), consumer()]
      await Promise.all(pushers)
      pushing = false
      await Promise.all(consumers)
      out.role = q.role
      return out
    })
    await f.waitForFunction(() => window.progress && window.progress.pushed.length >= 120, null, { timeout: 20000 })
    const cdp = await context.newCDPSession(w)
    cdp.send('Page.crash').catch(() => {})
    const r = await burst
    // What is left, read by the follower that took over (it loaded from IndexedDB).
    const left = await f.evaluate(async () => {
      const q = window.queen
      const ids = []
      for (;;) {
        const msgs = await q.queue('burst').batch(500).wait(false).pop()
        if (msgs.length === 0) break
        ids.push(...msgs.map((m) => m.transactionId))
        await q.ack(msgs, true)
      }
      return { ids, role: q.role, counters: q.transport.broker.counters() }
    })
    console.log(`      pushed ${r.pushed.length} (failed ${r.pushFailed.length}), consumed ${r.consumed.length} during the burst, ` +
      `${left.ids.length} after; answered from records after the takeover: ${left.counters.replayed}`)
    assertEq(left.role, 'writer', 'the follower took over')
    assertEq(r.pushFailed, [], 'no push failed')
    assertEq(r.ackFailed, [], 'no ack was reported failed')
    const seen = new Map()
    for (const id of [...r.consumed, ...left.ids]) seen.set(id, (seen.get(id) || 0) + 1)
    const missing = r.pushed.filter((id) => !seen.has(id))
    const twice = [...seen].filter(([, n]) => n > 1)
    assertEq(missing.length, 0, `every acknowledged push was consumed or is still there (${missing.length} missing: leaked leases or lost writes)`)
    assertEq(twice.length, 0, `no message delivered twice (${JSON.stringify(twice.slice(0, 3))})`)
    assertEq(seen.size, r.pushed.length, 'no message that was not acknowledged')
    await context.close()
  }],

  ['a hung writer: a forwarded request fails with timeout instead of waiting forever', async ({ browser, url }) => {
    const context = await browser.newContext()
    const w = await openPage(context, url, 'hung writer')
    const f = await openPage(context, url, 'hung follower')
    const name = uniqueName('hung')
    await w.evaluate(async (name) => {
      window.queen = await window.QE.Queen.open({ name })
      // The broker never answers (a stuck commit), while the tab itself stays alive and acknowledges.
      window.queen.transport.broker.handle = () => new Promise(() => {})
    }, name)
    const r = await f.evaluate(async (name) => {
      const queen = await window.QE.Queen.open({ name, noWriterTimeoutMillis: 1500 })
      const t0 = Date.now()
      try {
        await queen.queue('q').push({ data: 1 })
        return { role: queen.role, outcome: 'answered' }
      } catch (e) {
        return { role: queen.role, outcome: e.code, ms: Date.now() - t0 }
      }
    }, name)
    assertEq([r.role, r.outcome], ['follower', 'timeout'], 'the follower gives up with code timeout')
    assert(r.ms >= 1400 && r.ms < 10000, `after about noWriterTimeoutMillis, not the 30 s default (${r.ms} ms)`)
    await context.close()
  }],

  ['no_writer means not applied: a writer stalled past the follower\'s wait leaves the request alone', async ({ browser, url }) => {
    const context = await browser.newContext()
    const w = await openPage(context, url, 'stalled writer')
    const f = await openPage(context, url, 'stalled follower')
    const name = uniqueName('stalled')
    await w.evaluate(async (name) => { window.queen = await window.QE.Queen.open({ name }) }, name)
    await f.evaluate(async (name) => { window.queen = await window.QE.Queen.open({ name, noWriterTimeoutMillis: 1000 }) }, name)
    // The writer's thread is busy for 5 s (as under a modal dialog or a debugger pause); the follower's
    // push waits 1 s for it, then gives up. Not awaited: the busy loop holds the page.
    const stall = w.evaluate(() => { const end = Date.now() + 5000; while (Date.now() < end); })
    const r = await f.evaluate(async () => {
      const t0 = Date.now()
      try {
        await window.queen.queue('q').push({ data: 1 })
        return { outcome: 'answered' }
      } catch (e) {
        return { outcome: e.code, message: e.message, ms: Date.now() - t0 }
      }
    })
    await stall
    // The writer, free again, has the follower's request (and its re-sends) in its queue: it leaves them.
    const popped = await w.evaluate(async () => {
      await new Promise((resolve) => setTimeout(resolve, 1000))
      return (await window.queen.queue('q').subscriptionMode('all').batch(10).wait(false).pop()).length
    })
    assertEq([r.outcome, popped], ['no_writer', 0], 'the follower gave up, and nothing of its request was stored')
    assert(/not applied/.test(r.message), `the error says so (${r.message})`)
    assert(r.ms < 4500, `before the writer is free again (${r.ms} ms)`)
    await context.close()
  }],

  ['a broker with another encryptionKey than the one that sealed the database is refused', async ({ browser, url }) => {
    const page = await openPage(await browser.newContext(), url, 'two keys')
    const r = await page.evaluate(async (name) => {
      const { Queen } = window.QE
      const K1 = '11'.repeat(32)
      const K2 = '22'.repeat(32)
      const first = await Queen.open({ name, encryptionKey: K1 })
      await first.queue('vault').config({ encryptionEnabled: true }).create()
      await first.queue('vault').push([{ data: { card: 'one' } }])
      await first.close()
      const other = await Queen.open({ name, encryptionKey: K2 }).then((q) => q.close().then(() => 'opened'), (e) => e.code + ': ' + e.message)
      const again = await Queen.open({ name, encryptionKey: K1 })
      const popped = (await again.queue('vault').batch(10).wait(false).pop()).map((m) => m.data)
      await again.close()
      return { other, popped }
    }, uniqueName('twokeys'))
    assertEq(r.other, "invalid: encryptionKey is not this database's key", 'another key is refused before it takes over')
    assertEq(r.popped, [{ card: 'one' }], 'the key that sealed it still opens it')
    await page.context().close()
  }],

  ['a tab opened with an encryptionKey under a writer tab opened without one is refused, not handed ciphertext', async ({ browser, url }) => {
    const context = await browser.newContext()
    const writer = await openPage(context, url, 'keyless writer')
    const follower = await openPage(context, url, 'keyed follower')
    const name = uniqueName('keyless-writer')
    const KEY = '33'.repeat(32)
    // The database sealed by a keyed broker, then served by a tab without the key.
    await writer.evaluate(async ({ name, KEY }) => {
      const sealed = await window.QE.Queen.open({ name, encryptionKey: KEY })
      await sealed.queue('vault').config({ encryptionEnabled: true }).create()
      await sealed.queue('vault').push([{ data: { card: 'one' } }])
      await sealed.close()
      window.queen = await window.QE.Queen.open({ name })
      return window.queen.role
    }, { name, KEY })
    const r = await follower.evaluate(async ({ name, KEY }) => {
      const queen = await window.QE.Queen.open({ name, encryptionKey: KEY })
      const failure = (e) => e.code + ': ' + e.message
      // Through the raw request: the fluent pop answers [] on any failure, as queen-mq's does.
      const answer = await queen.request('GET', '/api/v1/pop/queue/vault?batch=10&wait=false')
      const pop = [answer.status, answer.body && answer.body.error]
      const push = await queen.queue('plain').push([{ data: 1 }]).then(() => 'pushed', failure)
      const role = queen.role
      await queen.close()
      return { role, pop, push }
    }, { name, KEY })
    assertEq(r.role, 'follower', 'the keyed tab is a follower of the keyless writer')
    assert(r.pop[0] === 409 && /^this tab was opened with an encryptionKey, but the writer tab/.test(r.pop[1]), `a pop is refused: ${JSON.stringify(r.pop)}`)
    assert(/pass the same encryptionKey to Queen.open in every tab/.test(r.push), `so is a push: ${r.push}`)
    // Nothing was leased by the refused pop: the writer itself still gets the message (as stored).
    const left = await writer.evaluate(async () => (await window.queen.queue('vault').batch(10).wait(false).pop()).length)
    assertEq(left, 1, 'the refused pop leased nothing')
    await context.close()
  }],

  ['Queen.open checks its numbers in every tab, not only in the one that writes, and refuses unknown options', async ({ browser, url }) => {
    const page = await openPage(await browser.newContext(), url, 'open numbers')
    const r = await page.evaluate(async (name) => {
      const outcome = (options) => window.QE.Queen.open({ name, ...options }).then((q) => q.close().then(() => 'opened'), (e) => e.code + ': ' + e.message)
      return {
        textTimeout: await outcome({ noWriterTimeoutMillis: '1500' }),
        halfByte: await outcome({ cacheBytes: 1.5 }),
        textQuota: await outcome({ maxStoredBytes: 'lots' }),
        good: await outcome({ noWriterTimeoutMillis: 1500, maxStoredBytes: 1 << 20, cacheBytes: null }),
        misspelt: await outcome({ maxStoredbytes: 2000 })
      }
    }, uniqueName('numbers'))
    assertEq(r.textTimeout, 'invalid: noWriterTimeoutMillis must be a number of milliseconds', 'a time as text')
    assertEq(r.halfByte, 'invalid: cacheBytes must be a whole number of bytes', 'a fraction of a byte')
    assertEq(r.textQuota, 'invalid: maxStoredBytes must be a whole number of bytes', 'a quota as text')
    assertEq(r.good, 'opened', 'numbers, and null for none')
    assertEq(r.misspelt, 'invalid: Queen.open has no option maxStoredbytes', 'a misspelt option is refused, not run as its default')
    await page.context().close()
  }],

  ['maxStoredBytes is a hard limit: a push or a transaction that would pass it is refused (quota_exceeded) and stores nothing', async ({ browser, url }) => {
    const page = await openPage(await browser.newContext(), url, 'max stored bytes')
    const r = await page.evaluate(async (name) => {
      const queen = await window.QE.Queen.open({ name, maxStoredBytes: 10000, views: true })
      const outcome = (promise) => promise.then(() => 'ok', (e) => [e.name, e.code, e.status])
      const ones = (n) => Array.from({ length: n }, () => ({ data: 1 }))
      const storedBytes = async () => (await queen.admin.getStatus()).storage.storedBytes
      const out = {}
      // 1000 payloads of 1 byte: 1000 bytes as payloads, about 120,000 as stored messages.
      out.push = await outcome(queen.queue('a').push(ones(1000)))
      out.afterPush = await storedBytes()
      out.tx = await outcome(queen.transaction().queue('a').push(ones(100)).commit())
      out.afterTx = await storedBytes()
      // Then one message at a time until the quota refuses one: never past it.
      out.fill = []
      for (let i = 0; i < 200; i++) {
        const o = await outcome(queen.queue('a').push({ data: 'y' }))
        if (o !== 'ok') { out.fill.push(o); break }
      }
      out.full = await storedBytes()
      await queen.close()
      return out
    }, uniqueName('maxstored'))
    const refused = ['QueenError', 'quota_exceeded', 507]
    assertEq(r.push, refused, 'the push that does not fit is refused')
    assertEq(r.afterPush, 0, 'and stores nothing')
    assertEq(r.tx, refused, 'a transaction that does not fit is refused as a push is')
    assertEq(r.afterTx, 0, 'and applies nothing')
    assertEq(r.fill, [refused], 'filling one message at a time ends in a refusal')
    assert(r.full <= 10000 && r.full > 10000 - 240, `full at ${r.full} of 10000 stored bytes`)
    await page.context().close()
  }],

  ['a closing follower tab gives back what its parked long-poll claims', async ({ browser, url }) => {
    const context = await browser.newContext()
    const a = await openPage(context, url, 'writer')
    const b = await openPage(context, url, 'follower')
    const name = uniqueName('gone')
    await a.evaluate(async (name) => { window.queen = await window.QE.Queen.open({ name }) }, name)
    const roleB = await b.evaluate(async (name) => {
      window.queen = await window.QE.Queen.open({ name })
      // Parked at the writer; never awaited: the tab closes first.
      window.queen.queue('orphan').group('g').subscriptionMode('all').timeoutMillis(20000).pop()
      return window.queen.role
    }, name)
    assertEq(roleB, 'follower', 'second tab follows')
    // A second channel in A's page sees B's 'gone' after the writer's own channel (created earlier) has:
    // A pushes only once the writer knows B is gone, however late a loaded browser delivers it.
    await a.evaluate((name) => {
      window.goneSeen = new Promise((resolve) => {
        const channel = new BroadcastChannel('queen-edge:' + name)
        channel.onmessage = (event) => { if (event.data && event.data.t === 'gone') resolve(true) }
        setTimeout(() => resolve(false), 15000)
      })
    }, name)
    await sleep(300)
    await b.close()
    assert(await a.evaluate(() => window.goneSeen), 'the closing follower said it is gone')
    const r = await a.evaluate(async () => {
      const q = window.queen
      await q.queue('orphan').push({ data: 'x' })
      // The orphaned pop claims it and the writer gives it back straight away. The queue's lease is
      // 300 s, so a missing give-back still fails the 15 s long-poll below.
      await new Promise((resolve) => setTimeout(resolve, 300))
      const msgs = await q.queue('orphan').group('g').subscriptionMode('all').wait(true).timeoutMillis(15000).pop()
      return msgs.map((m) => [m.data, m.deliveryAttempt])
    })
    assertEq(r.map((x) => x[0]), ['x'], 'the message is deliverable at once, not leased to the closed tab')
    await context.close()
  }],

  ['service-worker mode answers a Queen HTTP client', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'sw')
    const name = uniqueName('sw')
    const r = await page.evaluate(async (name) => {
      const reg = await navigator.serviceWorker.register('/sw.js?name=' + name, { type: 'module', scope: '/' })
      await navigator.serviceWorker.ready
      if (!navigator.serviceWorker.controller) {
        await new Promise((resolve) => navigator.serviceWorker.addEventListener('controllerchange', resolve, { once: true }))
      }
      const out = { scope: reg.scope }
      const health = await fetch('/health')
      out.health = [health.status, (await health.json()).status]
      // The fluent client over HTTP, against this origin: every call goes through the service worker.
      const client = window.QE.Queen.connect(location.origin)
      out.role = client.role
      await client.queue('swq').create()
      out.push = (await client.queue('swq').push([{ data: { hello: 'sw' } }, { data: 2 }])).map((p) => p.status)
      const msgs = await client.queue('swq').batch(5).wait(false).pop()
      out.data = msgs.map((m) => m.data)
      out.ack = (await client.ack(msgs, true)).success
      // A raw fetch, as any Queen HTTP client sends it.
      const raw = await fetch('/api/v1/push', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ items: [{ queue: 'swq', payload: 'raw', transactionId: 'raw-1' }] })
      })
      out.raw = [raw.status, (await raw.json())[0].status, raw.headers.get('access-control-allow-origin')]
      const empty = await fetch('/api/v1/pop/queue/nothing-here?wait=false')
      out.empty = empty.status
      const notQueen = await fetch('/index.html')
      out.passThrough = notQueen.status
      // The page opening the same broker follows the service worker (it holds the database).
      const queen = await window.QE.Queen.open({ name })
      out.pageRole = queen.role
      out.pagePop = (await queen.queue('swq').wait(false).pop()).map((m) => m.data)
      // The database deleted: the page's Queen closes, the service worker serves the new, empty one.
      await window.QE.Queen.deleteDatabase(name)
      const t0 = Date.now()
      while (queen.role !== 'closed' && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 50))
      out.pageAfterDelete = queen.role
      out.afterDelete = (await fetch('/api/v1/pop/queue/swq?wait=false')).status
      await queen.close()
      await reg.unregister()
      return out
    }, name)
    assertEq(r.health, [200, 'healthy'], '/health from the service worker')
    assertEq(r.role, 'remote', 'Queen.connect is an HTTP client')
    assertEq(r.push, ['queued', 'queued'], 'push through the service worker')
    assertEq(r.data, [{ hello: 'sw' }, 2], 'pop through the service worker')
    assertEq(r.ack, true, 'ack through the service worker')
    assertEq(r.raw, [201, 'queued', '*'], 'a raw Queen HTTP push (201, CORS)')
    assertEq(r.empty, 204, 'an empty pop is a 204')
    assertEq(r.passThrough, 200, 'other paths are not answered by the broker')
    assertEq(r.pageRole, 'follower', 'the page follows the service worker writer')
    assertEq(r.pagePop, ['raw'], 'the page sees the same broker')
    assertEq(r.pageAfterDelete, 'closed', 'Queen.deleteDatabase closes the page\'s Queen')
    assertEq(r.afterDelete, 204, 'and the service worker serves the new, empty database')
    await context.close()
  }],

  ['dedicated worker: the bundle loads its wasm and opens the broker; the page follows it', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'worker')
    const name = uniqueName('worker')
    const r = await page.evaluate(async (name) => {
      const worker = new Worker('/worker.js', { type: 'module' })
      const answer = await new Promise((resolve, reject) => {
        worker.onmessage = (e) => resolve(e.data)
        worker.onerror = (e) => reject(new Error('worker error: ' + e.message))
        worker.postMessage({ name })
      })
      // The page opening the same broker follows the worker (it holds the database).
      const queen = await window.QE.Queen.open({ name })
      answer.pageRole = queen.role
      answer.pagePop = (await queen.queue('wq').wait(false).pop()).map((m) => m.data)
      await queen.close()
      worker.terminate()
      return answer
    }, name)
    assertEq(r.error, undefined, 'the worker opened the broker')
    assertEq(r.role, 'writer', 'the worker is the writer')
    assertEq(r.push, ['queued', 'queued'], 'push in the worker')
    assertEq([r.first, r.ack], [{ from: 'worker' }, true], 'pop and ack in the worker')
    assertEq(r.pageRole, 'follower', 'the page follows the worker writer')
    assertEq(r.pagePop, [2], 'the page sees the same broker')
    await context.close()
  }],

  ['clear errors: quota exceeded', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'quota')
    const name = uniqueName('quota')
    // Quota: Chromium's DevTools protocol lowers this origin's quota; a big push then fails. (Seen here:
    // the override only bites when set before the origin first uses IndexedDB, hence a test of its own.)
    const cdp = await context.newCDPSession(page)
    await cdp.send('Storage.overrideQuotaForOrigin', { origin: url, quotaSize: 3 * 1024 * 1024 })
    const quota = await page.evaluate(async (name) => {
      const queen = await window.QE.Queen.open({ name })
      const out = {}
      const big = 'x'.repeat(512 * 1024)
      try {
        for (let i = 0; i < 40; i++) {
          // Random text so deflate cannot shrink it below the quota.
          const bytes = new Uint8Array(600 * 1024)
          for (let o = 0; o < bytes.length; o += 65536) crypto.getRandomValues(bytes.subarray(o, o + 65536))
          const noise = Array.from(bytes, (b) => String.fromCharCode(33 + (b % 90))).join('')
          await queen.queue('big').push({ data: { i, big: big.length, noise } })
        }
        out.push = 'no error'
      } catch (e) {
        out.push = [e.name, e.code, e.status, e.message]
      }
      // The broker still answers (nothing half-written).
      out.health = (await queen.request('GET', '/health')).status
      await queen.close()
      return out
    }, name)
    await cdp.send('Storage.overrideQuotaForOrigin', { origin: url })
    assertEq(quota.push.slice(0, 3), ['QueenError', 'quota_exceeded', 507], `quota exceeded is reported as such: ${quota.push[3]}`)
    assertEq(quota.health, 200, 'the broker still answers after a refused commit')

    await context.close()
  }],

  ['clear errors: newer format, IndexedDB unavailable, a module that cannot load', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'errors')
    const name = uniqueName('errors')
    // A database written by a newer format version (meta/format) and by a newer schema version.
    const newer = await page.evaluate(async (name) => {
      const out = {}
      await new Promise((resolve, reject) => {
        const req = indexedDB.open(name + '-format', 1)
        req.onupgradeneeded = () => {
          req.result.createObjectStore('records')
          req.result.createObjectStore('meta').put(999, 'format')
        }
        req.onsuccess = () => { req.result.close(); resolve() }
        req.onerror = () => reject(req.error)
      })
      try {
        await window.QE.Queen.open({ name: name + '-format' })
        out.format = 'opened'
      } catch (e) {
        out.format = [e.name, e.code, e.message]
      }
      await new Promise((resolve) => {
        const req = indexedDB.open(name + '-schema', 7)
        req.onupgradeneeded = () => req.result.createObjectStore('x')
        req.onsuccess = () => { req.result.close(); resolve() }
      })
      try {
        await window.QE.Queen.open({ name: name + '-schema' })
        out.schema = 'opened'
      } catch (e) {
        out.schema = [e.name, e.code]
      }
      try {
        await window.QE.Queen.open({ name: name + '-bad', durability: 'sometimes' })
      } catch (e) {
        out.badOption = e.code
      }
      const relaxed = await window.QE.Queen.open({ name: name + '-relaxed', durability: 'relaxed' })
      out.relaxed = (await relaxed.queue('r').push({ data: 1 }))[0].status
      await relaxed.close()
      return out
    }, name)
    assertEq(newer.format.slice(0, 2), ['QueenError', 'newer_format'], 'newer format refused with code newer_format')
    assert(/newer/.test(newer.format[2]), `the message says why: ${newer.format[2]}`)
    // The IndexedDB version is the writer epoch (src/store/idb.rs, "Fencing"): a database at version 7
    // without queen-edge's stores is refused as not a queen-edge one, not as newer.
    assertEq(newer.schema, ['QueenError', 'storage'], 'a foreign database at a later version refused with code storage')
    assertEq(newer.badOption, 'invalid', 'an unknown durability is refused')
    assertEq(newer.relaxed, 'queued', 'durability relaxed opens and commits')

    // IndexedDB unavailable: an opaque-origin (sandboxed) frame may not use it.
    const unavailable = await page.evaluate(async (moduleUrl) => {
      const frame = document.createElement('iframe')
      frame.setAttribute('sandbox', 'allow-scripts')
      frame.srcdoc = `<script type="module">
        import { Queen } from '${moduleUrl}'
        Queen.open({ name: 'sandboxed' }).then(
          () => parent.postMessage({ opened: true }, '*'),
          (e) => parent.postMessage({ name: e.name, code: e.code, message: e.message }, '*'))
      </` + 'script>'
      const answer = new Promise((resolve) => window.addEventListener('message', (e) => resolve(e.data), { once: true }))
      document.body.appendChild(frame)
      return answer
    }, url + '/vendor/queen-edge/queen-edge.js')
    assertEq([unavailable.name, unavailable.code], ['QueenError', 'unavailable'], `IndexedDB unavailable: ${unavailable.message}`)

    // A wasm module that cannot load says so; when the runtime rejects WebAssembly SIMD (stubbed here: every
    // browser the tests run has it), the message says that this is why. Each frame is a fresh module
    // instance, so neither reuses a loaded module.
    const failedLoad = (stubSimd) => page.evaluate(async ({ moduleUrl, stubSimd }) => {
      const frame = document.createElement('iframe')
      frame.srcdoc = `<script type="module">
        if (${stubSimd}) WebAssembly.validate = () => false
        const { Queen } = await import('${moduleUrl}')
        Queen.open({ name: 'no-wasm', wasmUrl: '/no-such-module.wasm' }).then(
          () => parent.postMessage({ opened: true }, '*'),
          (e) => parent.postMessage({ name: e.name, code: e.code, message: e.message }, '*'))
      </` + 'script>'
      const answer = new Promise((resolve) => window.addEventListener('message', (e) => resolve(e.data), { once: true }))
      document.body.appendChild(frame)
      const data = await answer
      frame.remove()
      return data
    }, { moduleUrl: url + '/vendor/queen-edge/queen-edge.js', stubSimd })
    const noSimd = await failedLoad(true)
    assertEq([noSimd.name, noSimd.code], ['QueenError', 'unavailable'], `no SIMD: ${noSimd.message}`)
    assert(/lacks WebAssembly SIMD/.test(noSimd.message), `the message says SIMD is missing: ${noSimd.message}`)
    const missing = await failedLoad(false)
    assertEq([missing.name, missing.code], ['QueenError', 'unavailable'], `missing module: ${missing.message}`)
    assert(/could not load the queen-edge wasm module/.test(missing.message) && !/SIMD/.test(missing.message),
      `a missing module is not blamed on SIMD: ${missing.message}`)
    await context.close()
  }],

  // Encryption at rest (wire contract §2.4, docs/decisions.md). The raw check reads every record of the
  // IndexedDB database with IndexedDB itself, turns segments into their JSON (format 2 is JSON after the
  // version byte; format 1 is raw DEFLATE, inflated with DecompressionStream) and searches the text. A
  // plain queue's marker must be found by the same scan, so the scan is shown to see plaintext.
  ['encryption at rest: encryptionKey round-trips, IndexedDB holds no plaintext, no key refuses', async ({ browser, url }) => {
    const context = await browser.newContext()
    const page = await openPage(context, url, 'encryption')
    const name = uniqueName('enc')
    const r = await page.evaluate(async (name) => {
      const { Queen } = window.QE
      const KEY = '3c9f1a7e5b2d4c6e8f0a1b3c5d7e9f2a4b6c8d0e1f3a5b7c9d2e4f6a8b0c1d3e'
      const SECRET = 'SECRET-MARKER-5e1f0c'
      const VISIBLE = 'VISIBLE-MARKER-77ab2d'
      const out = {}
      const failure = (e) => ({ code: e.code, status: e.status, message: e.message })

      // No key: the broker says so and refuses encrypted queues.
      const bare = await Queen.open({ name: name + '-bare' })
      out.bareHealth = (await bare.request('GET', '/health')).body.encryption
      out.bareConfigure = await bare.queue('vault').config({ encryptionEnabled: true }).create().then(() => 'created', failure)
      await bare.close()
      // Malformed keys fail open.
      out.badHex = await Queen.open({ name: name + '-bad', encryptionKey: 'abc' }).then(() => 'opened', failure)
      const aes128 = await crypto.subtle.generateKey({ name: 'AES-GCM', length: 128 }, false, ['encrypt', 'decrypt'])
      out.badCryptoKey = await Queen.open({ name: name + '-bad2', encryptionKey: aes128 }).then(() => 'opened', failure)

      // With a key (hex).
      const queen = await Queen.open({ name, encryptionKey: KEY })
      out.health = (await queen.request('GET', '/health')).body.encryption
      out.created = (await queen.queue('vault').config({ encryptionEnabled: true, retryLimit: 0 }).create()).options.encryptionEnabled
      const items = Array.from({ length: 10 }, (_, i) => ({ data: { card: SECRET, i } }))
      out.pushed = (await queen.queue('vault').push(items)).map((p) => p.status)
      out.tx = (await queen.transaction().queue('vault').push([{ data: { card: SECRET, via: 'tx' } }]).commit()).success
      await queen.queue('open').push([{ data: { note: VISIBLE } }])
      const popped = await queen.queue('vault').batch(50).wait(false).pop()
      out.popped = popped.map((m) => m.data)
      out.dlqAck = (await queen.ack(popped[0], 'dlq')).success
      out.dlq = (await queen.queue('vault').dlq().get()).messages.map((d) => d.data)
      // The plaintext sealed is the payload's JSON text as pushed: its key order comes back.
      await queen.queue('vault-order').config({ encryptionEnabled: true }).create()
      await queen.queue('vault-order').push([{ data: { zeta: 1, alpha: { y: 2, b: 3 } } }])
      out.ordered = (await queen.queue('vault-order').batch(1).wait(false).pop()).map((m) => JSON.stringify(m.data))
      await queen.close()

      // The raw records.
      const db = await new Promise((resolve, reject) => {
        const req = indexedDB.open(name)
        req.onsuccess = () => resolve(req.result)
        req.onerror = () => reject(req.error)
      })
      const all = (what) => new Promise((resolve, reject) => {
        const req = db.transaction('records', 'readonly').objectStore('records')[what]()
        req.onsuccess = () => resolve(req.result)
        req.onerror = () => reject(req.error)
      })
      const [keys, values] = [await all('getAllKeys'), await all('getAll')]
      db.close()
      let text = ''
      for (let i = 0; i < keys.length; i++) {
        let bytes = new Uint8Array(values[i].buffer ? values[i].buffer.slice(values[i].byteOffset, values[i].byteOffset + values[i].byteLength) : values[i])
        if (String(keys[i]).startsWith('s/') && bytes[0] === 1) {
          const stream = new Blob([bytes.subarray(1)]).stream().pipeThrough(new DecompressionStream('deflate-raw'))
          bytes = new Uint8Array(await new Response(stream).arrayBuffer())
        } else if (String(keys[i]).startsWith('s/')) {
          bytes = bytes.subarray(1)
        }
        text += keys[i] + ' ' + new TextDecoder().decode(bytes) + '\n'
      }
      out.records = keys.length
      out.rawSecret = text.includes(SECRET)
      out.rawVisible = text.includes(VISIBLE)
      out.rawEnvelope = /"authTag":"[A-Za-z0-9+/]{22}==","encrypted":"[A-Za-z0-9+/=]+","iv":"[A-Za-z0-9+/]{22}=="/.test(text)

      // Reopened with the same key as a non-extractable CryptoKey: the dead letter reads back.
      const raw = new Uint8Array(KEY.match(/../g).map((h) => parseInt(h, 16)))
      const cryptoKey = await crypto.subtle.importKey('raw', raw, 'AES-GCM', false, ['encrypt', 'decrypt'])
      const again = await Queen.open({ name, encryptionKey: cryptoKey })
      out.dlqWithCryptoKey = (await again.queue('vault').dlq().get()).messages.map((d) => d.data)
      await again.close()
      // Reopened without a key: the envelope as stored, and pushes to the queue refused.
      const keyless = await Queen.open({ name })
      out.dlqKeyless = Object.keys((await keyless.queue('vault').dlq().get()).messages[0].data).sort()
      out.keylessPush = await keyless.queue('vault').push([{ data: { card: SECRET } }]).then(() => 'pushed', failure)
      await keyless.close()
      return out
    }, name)
    assertEq([r.bareHealth.keyConfigured, r.bareHealth.cipher], [false, 'AES-256-GCM'], '/health says there is no key')
    assertEq([r.bareConfigure.code, r.bareConfigure.status], ['bad_request', 400], `no key: configure refused (${r.bareConfigure.message})`)
    assert(/no encryption key/.test(r.bareConfigure.message) && /encryptionKey/.test(r.bareConfigure.message), 'the refusal says how to fix it')
    assertEq(r.badHex.code, 'invalid', `a malformed hex key fails open (${r.badHex.message})`)
    assertEq(r.badCryptoKey.code, 'invalid', `an AES-128 CryptoKey fails open (${r.badCryptoKey.message})`)
    assert(/256/.test(r.badCryptoKey.message), 'the CryptoKey refusal names the size')
    assertEq(r.health.keyConfigured, true, '/health says there is a key')
    assertEq(r.created, true, 'the encrypted queue is created')
    assertEq(r.pushed, Array(10).fill('queued'), 'pushes queued')
    assertEq(r.tx, true, 'a transaction pushes to the encrypted queue')
    const expected = [...Array.from({ length: 10 }, (_, i) => ({ card: 'SECRET-MARKER-5e1f0c', i })), { card: 'SECRET-MARKER-5e1f0c', via: 'tx' }]
    assertEq(r.popped, expected, 'pop gives the plaintext back')
    assertEq(r.dlqAck, true, 'dead-lettered')
    assertEq(r.dlq, [expected[0]], 'the DLQ listing decrypts')
    assertEq(r.ordered, ['{"zeta":1,"alpha":{"y":2,"b":3}}'], 'an encrypted payload comes back with its keys in the order pushed')
    assert(r.records > 0, 'records were read')
    assertEq(r.rawVisible, true, 'the raw scan sees the plain queue\'s payload')
    assertEq(r.rawSecret, false, 'IndexedDB holds no plaintext of the encrypted queue')
    assertEq(r.rawEnvelope, true, 'IndexedDB holds Queen\'s envelope')
    assertEq(r.dlqWithCryptoKey, [expected[0]], 'a non-extractable CryptoKey of the same bytes decrypts')
    assertEq(r.dlqKeyless, ['authTag', 'encrypted', 'iv'], 'without a key the envelope is returned as stored')
    assertEq([r.keylessPush.code, r.keylessPush.status], ['conflict', 409], `without a key pushes are refused (${r.keylessPush.message})`)
    await context.close()
  }]
]

const env = await launch()
let failed
try {
  failed = await runTests(tests, env, process.argv.slice(2))
} finally {
  await env.close()
}
console.log(failed ? `browser tests: ${failed} failed` : 'browser tests: all passed')
process.exit(failed ? 1 : 0)

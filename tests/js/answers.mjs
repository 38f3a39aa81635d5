// js/index.d.ts checked against real answers: a page records what the module's calls resolve to
// (`recordAnswers`, run in Chromium against the in-browser broker or, through Queen.connect, the Worker),
// and `checkAnswerTypes` writes each answer as a TypeScript literal assigned to the type index.d.ts gives
// that call, then compiles it with `tsc --strict`. A field the broker sends and the types do not declare
// fails (excess property check), as does a declared non-optional field that is missing or of another
// type. Used by tests/js/browser.test.mjs and tests/js/connect.test.mjs.

import { execFileSync } from 'node:child_process'
import { mkdir, writeFile } from 'node:fs/promises'
import { resolve } from 'node:path'
import { ROOT, ARTIFACTS } from './harness.mjs'

/** Each recorded answer and the type index.d.ts declares for it. */
export const ANSWER_TYPES = {
  push: 'PushResult[]',
  pushDuplicate: 'PushResult[]',
  popGroup: 'Message[]',
  ackFromMessage: 'AckResult',
  ackBatchFromMessages: 'AckResult',
  popQueueMode: 'Message[]',
  ackBatch: 'AckResult',
  renew: 'RenewResult',
  renewMany: 'RenewResult[]',
  ackDlq: 'AckResult',
  dlq: 'DeadLetterPage',
  transaction: 'TransactionResult',
  bufferedPush: 'BufferedPushResult',
  bufferStats: 'BufferStats',
  bufferStatsAfter: 'BufferStats',
  raw: 'RawResponse',
  unsupported: 'RecordedError'
}

/**
 * Runs in the page (serialised with toString): every call whose answer type index.d.ts declares, on
 * `Queen.open({ name, views: true })` (mode 'open') or `Queen.connect(url, { token })` (mode 'connect').
 * Returns `{ answers, facts }`: the raw answers, and facts the test asserts (offsets, groups).
 */
export async function recordAnswers({ moduleUrl, mode, url, token, name, q }) {
  const { Queen } = await import(moduleUrl)
  const queen = mode === 'connect' ? Queen.connect(url, { token }) : await Queen.open({ name, views: true })
  const a = {}
  await queen.queue(q).config({ retryLimit: 0, leaseTime: 30 }).create()
  a.push = await queen.queue(q).partition('p').push([
    { data: { n: 1 } },
    { data: { n: 2 }, traceId: '0b3b4f6e-8c2d-4b8a-9f1e-2a6c5d7e8f90' }
  ])
  a.pushDuplicate = await queen.queue(q).partition('p').push({ data: { n: 1 }, transactionId: a.push[0].transactionId })
  // A group's pop, acked without naming the group: the ack must take it from the message.
  a.popGroup = await queen.queue(q).group('g').subscriptionMode('all').partition('p').batch(10).wait(false).pop()
  a.ackFromMessage = await queen.ack(a.popGroup[0])
  a.ackBatchFromMessages = await queen.ack(a.popGroup.slice(1))
  a.popQueueMode = await queen.queue(q).partition('p').batch(10).wait(false).pop()
  a.ackBatch = await queen.ack(a.popQueueMode, true)
  await queen.queue(q).partition('r').push([{ data: 'renew me' }])
  const [m] = await queen.queue(q).partition('r').wait(false).pop()
  a.renew = await queen.renew(m)
  a.renewMany = await queen.renew([m, m.leaseId])
  a.ackDlq = await queen.ack(m, 'dlq', { error: 'recorded failure' })
  a.dlq = await queen.queue(q).dlq().limit(10).get()
  a.transaction = await queen.transaction().queue(q).partition('t').push([{ data: { step: 1 } }]).commit()
  a.bufferedPush = await queen.queue(q).partition('b').buffer({ messageCount: 10, timeMillis: 60000 }).push([{ data: 1 }, { data: 2 }])
  a.bufferStats = queen.getBufferStats()
  await queen.flushAllBuffers()
  a.bufferStatsAfter = queen.getBufferStats()
  a.raw = await queen.request('GET', '/health')
  try {
    a.unsupported = await queen.admin.getSystemMetrics()
  } catch (e) {
    a.unsupported = { name: e.name, code: e.code, status: e.status, message: e.message }
  }
  const facts = {
    firstOffsets: a.popGroup.map((x) => x.offset),
    groupOfGroupPop: a.popGroup[0] && a.popGroup[0].consumerGroup,
    groupOfQueueModePop: a.popQueueMode[0] && a.popQueueMode[0].consumerGroup,
    queueModeData: a.popQueueMode.map((x) => x.data),
    ackFromMessage: [a.ackFromMessage.success, a.ackFromMessage.error ?? null],
    ackBatchFromMessages: [a.ackBatchFromMessages.success, a.ackBatchFromMessages.error ?? null],
    groupAfterAck: (await queen.queue(q).partition('p').push({ data: { n: 3 } }), await queen.queue(q).group('g').partition('p').batch(10).wait(false).pop()).map((x) => x.data),
    bufferedCounts: [a.bufferStats.totalBufferedMessages, a.bufferStatsAfter.totalBufferedMessages],
    unsupported: [a.unsupported.code, a.unsupported.status],
    flushed: (await queen.queue(q).partition('b').batch(10).wait(false).pop()).map((x) => x.data)
  }
  await queen.close()
  return { answers: a, facts }
}

/** The facts every run must show, whatever the transport. */
export function factsProblems(facts) {
  const problems = []
  const want = (ok, what) => { if (!ok) problems.push(what + ': ' + JSON.stringify(facts)) }
  want(JSON.stringify(facts.firstOffsets) === '[0,1]', 'offsets are 0-based: the first two messages of a partition have offsets 0 and 1')
  want(facts.groupOfGroupPop === 'g', "a group's messages name it in consumerGroup")
  want(facts.groupOfQueueModePop === '__QUEUE_MODE__', "queue-mode messages say '__QUEUE_MODE__' in consumerGroup")
  want(JSON.stringify(facts.queueModeData) === '[{"n":1},{"n":2}]', 'queue mode is a consumer of its own')
  want(JSON.stringify(facts.ackFromMessage) === '[true,null]', 'ack(message) without a group acks in the group of the message')
  want(JSON.stringify(facts.ackBatchFromMessages) === '[true,null]', 'ack([messages]) without a group acks in the group of the messages')
  want(JSON.stringify(facts.groupAfterAck) === '[{"n":3}]', "those acks released the group's lease and moved its cursor")
  want(JSON.stringify(facts.bufferedCounts) === '[2,0]', 'buffer() held two items until flushAllBuffers sent them')
  want(JSON.stringify(facts.unsupported) === '["unsupported",404]', 'admin.getSystemMetrics (no such route here) is QueenError unsupported')
  want(JSON.stringify(facts.flushed) === '[1,2]', 'the flushed items reached the broker in order')
  return problems
}

/**
 * Type-checks `answers` (name -> value) against js/index.d.ts with tsc --strict. Returns the compiler's
 * output, or '' when every answer has its declared type. The generated file stays in test-artifacts.
 */
export async function checkAnswerTypes(answers, label) {
  const dir = resolve(ARTIFACTS, 'answers-' + label)
  await mkdir(dir, { recursive: true })
  const missing = Object.keys(ANSWER_TYPES).filter((k) => !(k in answers))
  if (missing.length) return 'answers not recorded: ' + missing.join(', ')
  const types = [...new Set(Object.values(ANSWER_TYPES).map((t) => t.replace('[]', '')))].filter((t) => t !== 'RecordedError')
  const lines = [
    `// Generated by tests/js/answers.mjs from answers recorded in Chromium (${label}). Compiled, never run.`,
    `import type { ${types.join(', ')}, QueenErrorCode } from ${JSON.stringify(resolve(ROOT, 'js/index.js'))}`,
    'type RecordedError = { name: "QueenError"; code: QueenErrorCode; status: number | undefined; message: string }',
    ''
  ]
  for (const [key, type] of Object.entries(ANSWER_TYPES)) {
    lines.push(`export const ${key}: ${type} = ${JSON.stringify(answers[key], null, 2)}`, '')
  }
  await writeFile(resolve(dir, 'answers.ts'), lines.join('\n'))
  await writeFile(resolve(dir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: {
      strict: true, noEmit: true, target: 'ES2022', module: 'ES2022', moduleResolution: 'bundler',
      lib: ['ES2022', 'DOM', 'DOM.Iterable'], types: []
    },
    files: ['answers.ts', resolve(ROOT, 'js/index.d.ts')]
  }, null, 2))
  try {
    execFileSync(process.execPath, [resolve(ROOT, 'node_modules/typescript/lib/tsc.js'), '-p', resolve(dir, 'tsconfig.json')], { stdio: 'pipe' })
    return ''
  } catch (error) {
    return (error.stdout || '').toString() + (error.stderr || '').toString()
  }
}

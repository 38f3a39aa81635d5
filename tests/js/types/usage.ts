// Compiled (never run) by tests/js/api-check.mjs with `tsc --strict --noEmit`: the published types
// describe real interfaces. The @ts-expect-error lines fail the check if a type decays to `any`.

import {
  Queen,
  QueenError,
  serveQueen,
  QUEUE_DEFAULTS,
  uuidv7,
  type Message,
  type PushResult,
  type AckResult,
  type DeadLetterPage,
  type QueenRole,
  type RawResponse,
  type TransactionResult,
  type QueenErrorCode,
  type JsonObject,
  type OperationFailure,
  type BufferedPushResult,
  type BufferStats,
  type Bridge,
  type BridgeStatus
} from '../../../js/index.js'

interface Order {
  id: number
  total: number
}

export async function usage(): Promise<void> {
  const queen: Queen = await Queen.open({ name: 'app', durability: 'relaxed' })
  const role: QueenRole = queen.role
  const persisted: boolean | undefined = queen.persisted
  const remote: Queen = Queen.connect('https://broker.example', { token: 't', timeoutMillis: 5000 })

  await queen.queue('orders').config({ leaseTime: 30, retryLimit: 2, deadLetterQueue: true }).create()
  const pushed: PushResult[] = await queen.queue('orders').partition('eu').push([{ data: { id: 1, total: 9 } }])
  const status: 'queued' | 'duplicate' | 'failed' | 'buffered' = pushed[0].status
  await queen.queue('orders').push({ data: 1 }).onSuccess((queued) => { queued.map((q) => q.transactionId) })

  const msgs: Message<Order>[] = await queen.queue<Order>('orders').group('billing').batch(10).wait(false).pop()
  const total: number = msgs[0].data.total
  const partitionId: string = msgs[0].partitionId
  const ack: AckResult = await queen.ack(msgs, true, { group: 'billing' })
  const ok: boolean = ack.success
  await queen.ack(msgs[0], 'dlq', { group: 'billing', error: 'bad order' })
  await queen.ack(msgs[0], 'retry')
  const renewed = await queen.renew(msgs[0])
  const expires: string | null = renewed.newExpiresAt
  const many = await queen.renew(msgs)
  many.map((r) => r.success)

  // consume: a batch by default, one message after each().
  await queen.queue<Order>('orders').group('g').batch(5).limit(10).consume(async (batch) => {
    const first: Message<Order> = batch[0]
    return first.data.id
  })
  const consumer = queen.queue<Order>('orders').each().autoAck(false).renewLease(true, 1000)
    .consume(async (m) => { const id: number = m.data.id; return id })
    .onError(async (m, error) => { await queen.ack(m, false, { error: String(error) }) })
  consumer.stop()
  await consumer
  // Callbacks may return what they like (it is awaited and ignored): the README's dead-lettering example,
  // whose callback returns queen.ack's Promise<AckResult>.
  await queen.queue('orders').each().limit(100).renewLease(true, 10_000)
    .consume(async (message) => { void message })
    .onError(async (message, error) => queen.ack(message, 'dlq', { error: String(error) }))
  await queen.queue('orders').batch(10).consume(async (batch) => batch.length)
    .onSuccess((batch) => queen.ack(batch, true))
  await queen.queue('orders').push({ data: 1 }).onSuccess(async (queued) => queued.length).onError((failed) => failed)
  // An operation with onError resolves to the body or to {success: false, error}.
  const created: JsonObject | OperationFailure = await queen.queue('orders').create().onError((error) => error.code)
  void created
  const offset: number = msgs[0].offset
  void offset

  const page: DeadLetterPage<Order> = await queen.queue<Order>('orders').dlq('billing').limit(20).get()
  const reason: string | null = page.messages[0].errorMessage
  const tx: TransactionResult = await queen.transaction().ack(msgs[0]).queue('out').partition('p').push([{ data: 2 }]).commit()
  const txOk: boolean = tx.success
  await queen.admin.retryMessage(partitionId, msgs[0].transactionId)
  await queen.admin.seekConsumerGroup('billing', 'orders', { toEnd: true })
  await queen.queue('jobs').config({ reclaimLimit: 3, retryBackoff: { baseMs: 500, factor: 2, maxMs: 60_000 }, deliveryLog: 'failures' }).create()
  const preview = await queen.admin.replayDeadLetters({ queue: 'jobs', errorContains: 'timeout', from: '2026-01-01T00:00:00Z' }, { dryRun: true })
  console.log(preview.count)
  await queen.admin.deleteDeadLetters({ queue: 'jobs', consumerGroup: 'billing', limit: 100 })
  const log = await queen.admin.listDeliveries({ queue: 'jobs', transactionId: msgs[0].transactionId, limit: 20 })
  console.log(log.total)
  await queen.queue('orders').delete()

  const raw: RawResponse = await queen.request('GET', '/health')
  const code: number = raw.status
  const unsubscribe: () => void = queen.onRoleChange((r) => { const s: QueenRole = r; return s })
  unsubscribe()

  try {
    await queen.queue('x').push({ data: 1 })
  } catch (e) {
    if (e instanceof QueenError) {
      const c: QueenErrorCode = e.code
      const s: number | undefined = e.status
      void c, s
    }
  }
  // Queen's builders: a buffered push resolves to {buffered, count}, a plain one to results.
  const buffered: BufferedPushResult = await queen.queue('orders').buffer({ messageCount: 10 }).partition('p').push([{ data: 1 }])
  const bufferedCount: number = buffered.count
  await queen.queue('orders').buffer().each().push({ data: 2 }).onSuccess((items) => items.map((i) => i.transactionId))
  await queen.queue('orders').flushBuffer()
  await queen.flushAllBuffers()
  const stats: BufferStats = queen.getBufferStats()
  const lastBufferError: string | null = stats.lastError
  const sized: Message[] = await queen.queue('orders').group('g').autopilot().conflation().leaseSeconds(10).wait(false).pop()
  await queen.ack(sized)
  const group: string = sized[0].consumerGroup

  // The bridge: null without the option.
  const bridged = await Queen.open({ name: 'b', bridge: { url: 'https://edge.example', token: 't', queues: ['orders'], leaseSeconds: 10 } })
  const bridge: Bridge | null = bridged.bridge
  if (bridge) {
    const progress: BridgeStatus = await bridge.status()
    const pending: number | null = progress.pending
    const state: 'starting' | 'idle' | 'forwarding' | 'retrying' | 'offline' | 'stopped' = progress.state
    bridge.onProgress((s) => s.lastError)()
    await bridge.drain({ timeoutMillis: 1000 })
    bridge.retryNow()
    void pending, state
  }

  const leaseTime: 300 = QUEUE_DEFAULTS.leaseTime
  const id: string = uuidv7()
  await queen.close()
  await remote.close()

  // The types are real: wrong uses fail to compile.
  // @ts-expect-error batch takes a number
  queen.queue('q').batch('ten')
  // @ts-expect-error data of a typed queue is not a string
  const wrong: string = msgs[0].data
  // @ts-expect-error durability is one of three words
  await Queen.open({ name: 'x', durability: 'sometimes' })
  // @ts-expect-error open needs a name
  await Queen.open({})
  // @ts-expect-error role is a closed set
  const r2: 'leader' = queen.role
  // @ts-expect-error each() handlers receive one message, not an array
  queen.queue<Order>('orders').each().consume(async (m: Message<Order>[]) => m)
  // @ts-expect-error a buffered push does not resolve to push results
  const notResults: PushResult[] = await queen.queue('orders').buffer().push({ data: 1 })
  // @ts-expect-error bridge options need queues
  await Queen.open({ name: 'x', bridge: { url: 'https://edge.example' } })
  // @ts-expect-error the bridge takes no unknown options
  await Queen.open({ name: 'x', bridge: { url: 'https://edge.example', queues: ['q'], mapping: {} } })

  void role, persisted, status, total, ok, expires, reason, txOk, code, leaseTime, id, wrong, r2
  void bufferedCount, lastBufferError, group, notResults
}

// Service worker: the handler takes a fetch event and says whether it answered.
declare const event: { request: Request; respondWith(r: Response | Promise<Response>): void }
const handle = serveQueen({ name: 'app' })
const answered: boolean = handle(event)
void answered

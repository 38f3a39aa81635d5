// Types of queen-edge's JS module. Checked into the repository; tests/js/api-snapshot.d.ts is a dump of
// this file's declarations, diffed by tests/js/api-check.mjs so an API change is deliberate. The answer
// types are checked against answers recorded in Chromium, from the in-browser broker and from the
// Worker (tests/js/answers.mjs, compiled with tsc --strict).

/** Codes of {@link QueenError}. */
export type QueenErrorCode =
  | 'quota_exceeded'
  | 'unavailable'
  | 'newer_format'
  | 'storage'
  | 'bad_request'
  | 'unauthorized'
  | 'forbidden'
  | 'not_found'
  | 'conflict'
  | 'too_large'
  | 'unsupported'
  | 'not_built'
  | 'server_error'
  | 'network'
  | 'timeout'
  | 'closed'
  | 'no_writer'
  | 'invalid'
  | `http_${number}`

/** An error from the broker, the browser or the transport, with a machine-readable `code`. */
export class QueenError extends Error {
  constructor(code: QueenErrorCode, message: string, extra?: { status?: number; body?: unknown; cause?: unknown })
  readonly name: 'QueenError'
  /** What went wrong: storage (`quota_exceeded`, `unavailable`, `newer_format`, `storage`), an HTTP class, or transport. */
  readonly code: QueenErrorCode
  /** The HTTP status of the answer, when there was one. */
  readonly status: number | undefined
  /** The answer body, when there was one. */
  readonly body: unknown
}

/** Any JSON value (a message payload). */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json }

/** Queue options (wire-contract §2). Unknown keys are ignored by the broker. */
export interface QueueOptions {
  /** Seconds a popped batch stays leased (default 300 via `config()`). */
  leaseTime?: number
  /** Failed deliveries before a message is dead-lettered (default 3). */
  retryLimit?: number
  /** Milliseconds a lane waits after a failure before redelivering. */
  retryDelay?: number
  priority?: number
  /** Seconds a message stays invisible after its push. */
  delayedProcessing?: number
  /** Seconds a partition must be quiet before it is delivered (debounce). */
  windowBuffer?: number
  maxSize?: number
  /** Seconds after which unconsumed messages expire. */
  ttl?: number
  retentionSeconds?: number
  completedRetentionSeconds?: number
  retentionEnabled?: boolean
  /** File failed messages in the dead-letter queue. */
  deadLetterQueue?: boolean
  dlqAfterMaxRetries?: boolean
  encryptionEnabled?: boolean
  maxWaitTimeSeconds?: number
  /** Crash-loop quarantine: after this many lease expiries in a row from one offset, deliver the head
   *  alone; after as many more, dead-letter it (0 or absent = off). */
  reclaimLimit?: number
  /** A failed delivery waits `baseMs * factor^n` (capped at `maxMs`) instead of `retryDelay`. */
  retryBackoff?: RetryBackoff | null
  /** Keep a record of every delivery attempt (`failures`) or of all (`all`); read with `admin.listDeliveries`. */
  deliveryLog?: 'off' | 'failures' | 'all'
  [key: string]: Json | undefined
}

/** `retryBackoff`: n counts the failures charged to the lane's retry budget (0 for the first). */
export type RetryBackoff = {
  baseMs: number
  /** Default 2. */
  factor?: number
  /** Default 300000 (or `baseMs` when longer). */
  maxMs?: number
}

/** Which dead-letter rows a bulk call selects; every field is optional. */
export interface DeadLetterFilter {
  queue?: string
  consumerGroup?: string
  /** Partition name. */
  partition?: string
  errorContains?: string
  /** ISO-8601 bounds on the time a row was dead-lettered (inclusive). */
  from?: string
  to?: string
  /** At most this many rows. */
  limit?: number
}

/** The options every `config(...).create()` sends, overlaid with the caller's. */
export declare const QUEUE_DEFAULTS: Readonly<{
  leaseTime: 300
  retryLimit: 3
  priority: 0
  delayedProcessing: 0
  windowBuffer: 0
  maxSize: 0
  retentionSeconds: 0
  completedRetentionSeconds: 0
  encryptionEnabled: false
}>

/** A fresh UUIDv7 (the client's default `transactionId` over HTTP and for buffered pushes; in the page the broker mints one). */
export declare function uuidv7(): string

/** What `push` accepts per item: `{data}` / `{payload}` (plus ids), or the payload itself. */
export type PushItem =
  | { data: Json; transactionId?: string; traceId?: string }
  | { payload: Json; transactionId?: string; traceId?: string }
  | Json

/** One entry of a push answer, in item order (snake_case fields with their camelCase aliases). */
export interface PushResult {
  index: number
  status: 'queued' | 'duplicate' | 'failed' | 'buffered'
  transaction_id: string
  transactionId: string
  /** The stored message's id (for a duplicate: the original's). */
  message_id?: string
  messageId?: string
  partition_id?: string
  partitionId?: string
  /** Only on `queued` results (may be null). */
  trace_id?: string | null
  queueName?: string
  partition?: string
  /** The message's 0-based position in its partition; only on `queued` results. */
  offset?: number
  error?: string
}

/** A delivered message, with the same fields as over HTTP. */
export interface Message<T = Json> {
  id: string
  transactionId: string
  partitionId: string
  partition: string
  queue: string
  leaseId: string
  /**
   * The consumer group the message was popped with; `'__QUEUE_MODE__'` for queue mode (no group).
   * `queen.ack(message)` without a group acks in this one.
   */
  consumerGroup: string
  data: T
  traceId: string | null
  producerSub: string | null
  /** ISO-8601 time of the push (microseconds). */
  createdAt: string
  /** Position in the partition, 0-based: the first message pushed to a partition has offset 0. */
  offset: number
  /** 1 on the first delivery, then counts redeliveries. */
  deliveryAttempt: number
  retryCount: number
  /** Records a trace event (only on messages delivered by `consume`); never throws. */
  trace?: (event: { traceName?: string | string[]; traceNames?: string[]; eventType?: string; data: Json }) => Promise<{ success: boolean; error?: string }>
  /** Per-message override of the status of a batch `ack`. */
  _status?: AckStatus
  /** Per-message override of the error of a batch `ack`. */
  _error?: string | null
}

/** `true` = completed, `false` = failed (retried, then dead-lettered), or a status string. */
export type AckStatus = boolean | 'completed' | 'success' | 'failed' | 'retry' | 'dlq'

/** Options of `queen.ack`. */
export interface AckContext {
  /**
   * The consumer group to ack in. Default: each message's own `consumerGroup` (the group it was popped
   * with; queue mode for `'__QUEUE_MODE__'`). A batch of messages from several groups is acked with one
   * request per group.
   */
  group?: string
  consumerGroup?: string
  /** Why it failed (kept with a dead letter). */
  error?: string | null
}

/** One entry of an ack answer. */
export interface AckItemResult {
  index: number
  transactionId: string
  partitionId?: string
  success: boolean
  error: string | null
  status?: string
  queueName?: string
  partitionName?: string
  leaseReleased?: boolean
  dlq?: boolean
}

/** What `queen.ack` resolves to (it never throws). */
export interface AckResult {
  success: boolean
  error?: string
  code?: QueenErrorCode
  results?: AckItemResult[]
  [index: number]: AckItemResult
}

/** What `queen.renew` resolves to per lease. */
export interface RenewResult {
  leaseId: string | null
  success: boolean
  newExpiresAt: string | null
  error?: string
}

/** A dead letter as `dlq().get()` returns it. */
export interface DeadLetter<T = Json> {
  /** The dead-letter row id (what `admin.replayDeadLetter` takes). */
  id: string
  /** The dead-lettered message's id. */
  messageId?: string
  transactionId: string
  partitionId: string
  queue: string
  partition: string
  /** The group it failed in (`'__QUEUE_MODE__'` for queue mode on queen-edge). */
  consumerGroup: string | null
  errorMessage: string | null
  retryCount: number
  data: T
  createdAt: string
  failedAt: string
  producerSub: string | null
  /** The message's 0-based position in its partition. */
  offset?: number
  /** When the message was pushed (ISO). */
  originalCreatedAt?: string
}

/** A page of the dead-letter queue, newest first. */
export interface DeadLetterPage<T = Json> {
  messages: DeadLetter<T>[]
  /** Rows in this page. */
  total: number
  pagination?: { limit: number; offset: number }
}

/** Answer of a transaction. */
export interface TransactionResult {
  transactionId: string
  success: boolean
  error?: string
  results: Array<Record<string, Json>>
}

/** Any JSON object answer (dashboard and admin routes). */
export type JsonObject = { [key: string]: Json }

/** What an {@link OperationBuilder} with an `onError` callback resolves to when the request failed. */
export interface OperationFailure {
  success: false
  /** The error's message (the callback received the error itself). */
  error: string
}

/**
 * A request sent when awaited; `.onSuccess` / `.onError` observe it. Callbacks are awaited, and what they
 * return is ignored (so `async` callbacks and ones returning another call's promise both fit).
 */
export class OperationBuilder<T = JsonObject> implements PromiseLike<T> {
  private constructor()
  onSuccess(callback: (body: T) => unknown): this
  /** With a callback set, a failure resolves to `{success: false, error}` instead of throwing. */
  onError(callback: (error: QueenError) => unknown): OperationBuilder<T | OperationFailure>
  then<A = T, B = never>(onfulfilled?: ((value: T) => A | PromiseLike<A>) | null, onrejected?: ((reason: unknown) => B | PromiseLike<B>) | null): Promise<A | B>
  catch<B = never>(onrejected?: ((reason: unknown) => B | PromiseLike<B>) | null): Promise<T | B>
  finally(onfinally?: (() => void) | null): Promise<T>
}

/** A push, sent when awaited; resolves to one result per item, in order. */
export class PushBuilder implements PromiseLike<PushResult[]> {
  private constructor()
  onSuccess(callback: (queued: PushResult[]) => unknown): this
  onDuplicate(callback: (duplicates: PushResult[]) => unknown): this
  /** Receives the failed results, or the error of a failed request (the push then does not throw). */
  onError(callback: (failed: PushResult[] | QueenError) => unknown): this
  then<A = PushResult[], B = never>(onfulfilled?: ((value: PushResult[]) => A | PromiseLike<A>) | null, onrejected?: ((reason: unknown) => B | PromiseLike<B>) | null): Promise<A | B>
  catch<B = never>(onrejected?: ((reason: unknown) => B | PromiseLike<B>) | null): Promise<PushResult[] | B>
  finally(onfinally?: (() => void) | null): Promise<PushResult[]>
}

/** Options of `queue(q).buffer(options)` (Queen's client-side buffering). */
export interface BufferOptions {
  /** Items per request: a buffer is sent when this many are waiting (default 100). */
  messageCount?: number
  /** Milliseconds after the first buffered item when the buffer is sent anyway (default 1000). */
  timeMillis?: number
}

/** An item as a buffered push holds it (what `onSuccess` of a buffered push receives). */
export interface BufferedItem {
  queue: string
  partition: string
  payload: Json
  transactionId: string
  traceId?: string
}

/** What a buffered push resolves to: the items joined the buffer (nothing was sent yet). */
export interface BufferedPushResult {
  buffered: true
  count: number
}

/** A push after `.buffer()`: the items join the client-side buffer when awaited. */
export interface BufferedPushBuilder extends PromiseLike<BufferedPushResult> {
  /** Called with the items once they are in the buffer. */
  onSuccess(callback: (items: BufferedItem[]) => unknown): this
  catch<B = never>(onrejected?: ((reason: unknown) => B | PromiseLike<B>) | null): Promise<BufferedPushResult | B>
  finally(onfinally?: (() => void) | null): Promise<BufferedPushResult>
}

/** `queen.getBufferStats()`: Queen's fields, plus what the broker refused. */
export interface BufferStats {
  /** Buffers (queue/partition) holding items. */
  activeBuffers: number
  totalBufferedMessages: number
  /** Milliseconds since the oldest held item was buffered (0 when none). */
  oldestBufferAge: number
  /** Requests that delivered a batch. */
  flushesPerformed: number
  /**
   * Items dropped because the broker refused them (a 4xx other than 408/429, or an item answered
   * `failed`). Items that failed for a passing reason (network, 5xx, ...) stay buffered and are retried.
   */
  failedMessages: number
  /** The last failure's message, or null. */
  lastError: string | null
}

/** The consume loop; awaiting it waits until every worker stopped (or one threw). */
export class ConsumeBuilder<T = Json, Each extends boolean = false> implements PromiseLike<void> {
  private constructor()
  /** Replaces the automatic ack of successes: the callback must ack. */
  onSuccess(callback: (subject: Each extends true ? Message<T> : Message<T>[]) => unknown): this
  /** Replaces the automatic nack of handler failures: the callback decides (`ack(m, false | 'retry' | 'dlq')`). */
  onError(callback: (subject: Each extends true ? Message<T> : Message<T>[], error: unknown) => unknown): this
  /** Stops every worker after its current step. */
  stop(): void
  then<A = void, B = never>(onfulfilled?: ((value: void) => A | PromiseLike<A>) | null, onrejected?: ((reason: unknown) => B | PromiseLike<B>) | null): Promise<A | B>
  catch<B = never>(onrejected?: ((reason: unknown) => B | PromiseLike<B>) | null): Promise<void | B>
  finally(onfinally?: (() => void) | null): Promise<void>
}

/** `queue(q).dlq(group)`: a page of dead letters. */
export class DLQBuilder<T = Json> {
  private constructor()
  /** Page size (default 100). */
  limit(n: number): this
  /** Rows to skip (default 0). */
  offset(n: number): this
  from(time: string | Date): this
  to(time: string | Date): this
  /** Resolves to the page; `{messages: [], total: 0}` when the request fails. */
  get(): Promise<DeadLetterPage<T>>
}

/** A handler of `consume`: the batch (an array), or one message after `.each()`. */
export type ConsumeHandler<T = Json, Each extends boolean = false> = (
  subject: Each extends true ? Message<T> : Message<T>[]
) => unknown

/**
 * `queen.queue(name)`: configure, push, pop, consume. Every setter returns the builder. `Each` records
 * whether `.each()` was called, which decides what the `consume` handler receives; `Buffered` whether
 * `.buffer()` was, which decides what `push` resolves to.
 */
export class QueueBuilder<T = Json, Each extends boolean = false, Buffered extends boolean = false> {
  private constructor()
  /** The queue name. */
  readonly name: string | null
  namespace(name: string): this
  task(name: string): this
  /** Options for `create()`, overlaid on QUEUE_DEFAULTS. */
  config(options: QueueOptions): this
  /** Creates the queue or overwrites all its options. */
  create(): OperationBuilder<JsonObject>
  /** Deletes the queue and everything in it. */
  delete(): OperationBuilder<JsonObject>
  /** Partition to push to or pop from (default `'Default'`). */
  partition(name: string): this
  /** Sends the items (after `.buffer()`: adds them to the client-side buffer). */
  push(items: PushItem | PushItem[]): Buffered extends true ? BufferedPushBuilder : PushBuilder
  /**
   * Buffers pushes client-side per queue/partition: sent in one request when `messageCount` wait or
   * `timeMillis` after the first, or by `flushBuffer()`, `queen.flushAllBuffers()`, `queen.close()`.
   * Throws QueenError `invalid` on an unknown option or a bad value.
   */
  buffer(options?: BufferOptions): QueueBuilder<T, Each, true>
  /** Sends what `.buffer()` holds for this queue and partition; rejects with the first failure. */
  flushBuffer(): Promise<void>
  /** Consumer group (default: queue mode). */
  group(name: string): this
  concurrency(n: number): this
  /** Messages per pop (default 1; under `.autopilot()` the broker's choice unless set). */
  batch(n: number): this
  /** Partitions one pop may claim (default 1; under `.autopilot()` the broker's choice unless set). */
  partitions(n: number): this
  /**
   * `autopilot=true`: the broker sizes `batch` from the group's recent ack rate and `partitions` from
   * the ready ones, for whichever of the two was not set. Off unless called (queen-mq 0.15's requests).
   */
  autopilot(enabled?: boolean): this
  /**
   * `conflation=true`: the group gets only the newest message of each partition; the cursor moves past
   * the older ones. Needs `.group()`; refused with autoAck (then `pop()` throws instead of resolving to `[]`).
   */
  conflation(enabled?: boolean): this
  /** Lease of what a pop claims, in seconds (instead of the queue's `leaseTime`); an integer >= 1. */
  leaseSeconds(seconds: number): this
  /** `consume` stops after this many messages. */
  limit(n: number): this
  /** `consume` stops after this long without messages. */
  idleMillis(ms: number): this
  /** `consume`: ack after the handler (default true). `pop`: `true` asks the broker to commit on delivery. */
  autoAck(enabled: boolean): this
  /** `consume`: extend the lease every `intervalMillis` while the handler runs. */
  renewLease(enabled: boolean, intervalMillis?: number): this
  subscriptionMode(mode: 'new' | 'all'): this
  subscriptionFrom(from: string | Date): this
  /** `consume`: one handler call per message. */
  each(): QueueBuilder<T, true, Buffered>
  /** Long-poll (default true). */
  wait(enabled: boolean): this
  /** Long-poll deadline in ms (default 30000). */
  timeoutMillis(ms: number): this
  /**
   * Claims messages; `[]` when there are none (after the long-poll) or the request failed (a refused
   * conflating pop throws).
   */
  pop(): Promise<Message<T>[]>
  consume(handler: ConsumeHandler<T, Each>, options?: { signal?: AbortSignal }): ConsumeBuilder<T, Each>
  /** Dead letters of this queue (of one group when given). */
  dlq(group?: string): DLQBuilder<T>
}

/** A push inside a transaction: `.partition(p)` then `.push(items)`. */
export interface TransactionQueue {
  partition(name: string): TransactionQueue
  push(items: PushItem | PushItem[]): TransactionBuilder
}

/** `queen.transaction()`: acks and pushes applied all or nothing. */
export class TransactionBuilder {
  private constructor()
  ack(messages: Message<unknown> | Message<unknown>[], status?: AckStatus, context?: AckContext): this
  queue(name: string): TransactionQueue
  /** Throws a QueenError (`conflict`) when the broker refuses; `invalid` when empty. */
  commit(): Promise<TransactionResult>
}

/**
 * `queen.admin`: operations and dashboard calls; each throws a QueenError on a non-2xx answer. A call
 * whose route the broker does not serve throws code `unsupported` naming the route (queen-edge today:
 * `getSystemMetrics`, `getWorkerMetrics`, and the traces and maintenance calls where those routes are
 * not built).
 */
export class Admin {
  private constructor()
  getOverview(): Promise<JsonObject>
  getNamespaces(): Promise<JsonObject>
  getTasks(): Promise<JsonObject>
  listQueues(params?: Record<string, string | number>): Promise<JsonObject>
  getQueue(name: string): Promise<JsonObject>
  deleteQueue(name: string): Promise<JsonObject>
  listMessages(params?: Record<string, string | number>): Promise<JsonObject>
  getMessage(partitionId: string, transactionId: string): Promise<JsonObject>
  /** Deletes the dead-letter row(s) of a message. */
  deleteMessage(partitionId: string, transactionId: string): Promise<JsonObject>
  /** Replays a dead-lettered message to the end of its partition (idempotent). */
  retryMessage(partitionId: string, transactionId: string): Promise<JsonObject>
  /** Replays a dead letter by its row id. A message two groups filed has a row each, and replaying both
   *  pushes two copies; `retryMessage` (by message address) replays it once. */
  replayDeadLetter(id: string): Promise<JsonObject>
  /** Replays the messages of the dead letters the filter selects, in chunks: one copy per message (the
   *  newest row's, as `dlq:<id>`, so twice adds nothing), and every dead letter of that message goes, other
   *  groups' too (the copy reaches every group). Answers `{selected, replayed, queued, duplicates, chunks}`
   *  (rows selected, rows removed, copies pushed or already there); `{dryRun: true}` answers `{count,
   *  sample}` and changes nothing. Against `Queen.open`, needs
   *  `views: true` (the default build answers 501 `not_built`); the edge broker always has it. */
  replayDeadLetters(filter?: DeadLetterFilter, options?: { dryRun?: boolean }): Promise<JsonObject>
  /** Deletes every dead letter the filter selects, in chunks; `{dryRun: true}` previews (`views: true`, as above). */
  deleteDeadLetters(filter?: DeadLetterFilter, options?: { dryRun?: boolean }): Promise<JsonObject>
  /** The delivery log of queues with `deliveryLog` on, newest first (`views: true`, as above). */
  listDeliveries(params?: { queue?: string, consumerGroup?: string, partition?: string,
    transactionId?: string, limit?: number, offset?: number }): Promise<JsonObject>
  getTracesByName(name: string, params?: Record<string, string | number>): Promise<JsonObject>
  getTraceNames(params?: Record<string, string | number>): Promise<JsonObject>
  getTracesForMessage(partitionId: string, transactionId: string): Promise<JsonObject>
  getStatus(params?: Record<string, string | number>): Promise<JsonObject>
  getQueueStats(params?: Record<string, string | number>): Promise<JsonObject>
  getQueueDetail(name: string, params?: Record<string, string | number>): Promise<JsonObject>
  getAnalytics(params?: Record<string, string | number>): Promise<JsonObject>
  listConsumerGroups(): Promise<Json>
  refreshConsumerStats(): Promise<JsonObject>
  getConsumerGroup(name: string): Promise<JsonObject>
  getLaggingConsumers(minLagSeconds?: number): Promise<Json>
  deleteConsumerGroupForQueue(group: string, queue: string, deleteMetadata?: boolean): Promise<JsonObject>
  seekConsumerGroup(group: string, queue: string, options: { toEnd: true } | { timestamp: string }): Promise<JsonObject>
  health(): Promise<JsonObject>
  metrics(): Promise<JsonObject>
  getMaintenanceMode(): Promise<JsonObject>
  setMaintenanceMode(enabled: boolean): Promise<JsonObject>
  getPopMaintenanceMode(): Promise<JsonObject>
  setPopMaintenanceMode(enabled: boolean): Promise<JsonObject>
  getSystemMetrics(params?: Record<string, string | number>): Promise<JsonObject>
  getWorkerMetrics(params?: Record<string, string | number>): Promise<JsonObject>
}

/** Options of {@link Queen.open}. */
export interface OpenOptions {
  /** The broker (and IndexedDB database) name. */
  name: string
  /**
   * `'strict'` (default): every answer is on disk first. `'relaxed'`: faster; a power loss right
   * after an answer may lose it (a tab crash does not). `'default'`: the browser's choice.
   */
  durability?: 'strict' | 'relaxed' | 'default'
  /** Ask `navigator.storage.persist()` when becoming the writer (default true). */
  persist?: boolean
  /** Retention and eviction period in the writer, ms (default 60000; 0 = off). */
  maintenanceIntervalMillis?: number
  /** Follower: re-send period while no writer acknowledged a request, ms (default 250; re-sent every 4 periods). */
  resendMillis?: number
  /**
   * Follower: give up (code `no_writer`: not applied) when no writer acknowledged a request this long, ms
   * (default 30000); a writer that gets to the request later (a tab stalled by a dialog or a debugger)
   * leaves it alone. The numeric options are checked in every tab at `Queen.open` (code `invalid`).
   */
  noWriterTimeoutMillis?: number
  /** Writer: how long answers to forwarded requests are kept for re-sends, ms (default 60000). */
  answerCacheMillis?: number
  /**
   * Storage quota in bytes of stored messages (a message stores about 120 bytes besides its payload):
   * a push or transaction that would pass it is refused with status 507 (code `quota_exceeded`, with an
   * error saying the broker is full) and stores nothing; pops, acks, dead-letter replay and deletes keep
   * working. Default: none (the browser's own quota then answers `quota_exceeded`).
   */
  maxStoredBytes?: number
  /** Memory the writer may spend keeping decoded messages (their fields, texts and bookkeeping counted), in bytes (default 32 MiB). */
  cacheBytes?: number
  /**
   * Without Web Locks (non-secure origins): a follower whose forwarded request no writer acknowledged
   * this long claims writership itself, ms (default 2000). Storage fences writers either way.
   */
  claimAfterMillis?: number
  /**
   * Called with `true` when this context's take-over of the database waits for another tab or worker
   * that keeps it open and does not close when asked (page code or DevTools holding their own
   * connection, a frozen or busy page that cannot run its handler), or is queued behind another context's
   * take-over that waits so (without Web Locks: that context says so on the channel), and with `false`
   * once it went through or the other one's wait ended. Meanwhile
   * nothing is lost or written twice: the holder keeps writing, and a context that must write to open
   * (no other writer answers) has `Queen.open` still pending. With Web Locks only the lock's holder
   * takes over, so only connections outside queen-edge can hold it back.
   */
  onBlocked?: (blocked: boolean) => void
  /**
   * Load the build with the view (dashboard) routes: queue listings and details, the message browser,
   * overview, namespaces, tasks, status and metrics, with the `admin` methods that read them (default
   * false: a smaller download; those routes then answer 501, QueenError code `not_built`). The tab or
   * worker that becomes the writer answers for every context, so pass the same value everywhere. Not
   * available in a service worker (browsers forbid the `import()` that loads it there): code `invalid`.
   */
  views?: boolean
  /**
   * The AES-256-GCM key that encrypts, in IndexedDB, the payloads of queues configured with
   * `encryptionEnabled` (Queen's `QUEEN_ENCRYPTION_KEY`): 64 hex characters, or a Web Crypto
   * `CryptoKey` (AES-GCM, 256 bits, usages `encrypt` and `decrypt`; it may be non-extractable). Pops,
   * the DLQ and the message browser give the plaintext back. Without a key, configuring such a queue
   * is refused (QueenError `bad_request`) and pushing to one (made with a key earlier) is refused
   * (`conflict`). A malformed key fails `open` with code `invalid`. The tab or worker that becomes
   * the writer encrypts for every context, so pass the same key everywhere: a broker opened with another
   * key than the one that sealed the database is refused (`invalid`). Needs a secure context
   * (https or localhost), where browsers offer `crypto.subtle`.
   */
  encryptionKey?: string | CryptoKey
  /** Where the .wasm file is (default: next to the module; with `views`, the views build's file). */
  wasmUrl?: string | URL
  /**
   * Forward pushes to some queues to an edge broker (a queen-edge Worker or a Queen server): see
   * {@link Bridge}. Implies `views: true` (the pending count reads the depth view; `views: false` with a
   * bridge is refused). Unknown keys and bad values fail `open` with code `invalid`.
   */
  bridge?: BridgeOptions
}

/** `Queen.open({ bridge })`. */
export interface BridgeOptions {
  /** The edge broker's base URL (`?broker=` in it is kept, as for `Queen.connect`). */
  url: string
  /** Sent as `Authorization: Bearer <token>` to the edge. */
  token?: string
  /** The local queues whose messages go to the edge (the same queue and partition names there). */
  queues: string[]
  /** Messages per forwarded request, one partition's span at a time (default 100). */
  batch?: number
  /**
   * Lease on the span being forwarded, in seconds (default 30; renewed while it is retried). After a
   * crash mid-forward, the span is forwarded again once this lease expires.
   */
  leaseSeconds?: number
  /** First wait after a failed forward, ms (default 1000), doubling up to `maxRetryDelayMillis` (default 60000). */
  retryDelayMillis?: number
  maxRetryDelayMillis?: number
  /** Per-request timeout to the edge, ms (default 30000). */
  timeoutMillis?: number
}

/** What the bridge is doing: `queen.bridge.status()` and `onProgress`. */
export interface BridgeStatus {
  url: string
  queues: string[]
  /**
   * `starting`, `idle` (nothing to forward), `forwarding`, `retrying` (a forward failed; see
   * `lastError`, `nextRetryAt`), `offline` (the browser says so; waits for `online`), `stopped`.
   */
  state: 'starting' | 'idle' | 'forwarding' | 'retrying' | 'offline' | 'stopped'
  /** `navigator.onLine` (true where the browser does not say). */
  online: boolean
  /**
   * Messages of the bridged queues the edge has not acknowledged yet, read from the local broker
   * (`status()` reads it now; `onProgress` gives the last one read). Null when the broker could not say.
   */
  pending: number | null
  /** Messages the edge took since this bridge started (resends it already had included). */
  forwarded: number
  /** Of those, resends the edge answered `duplicate` (already there: harmless). */
  duplicates: number
  /**
   * Of those, messages the edge answered `buffered` (it is in maintenance mode: it holds them in its buffer
   * and drains them into the queue when maintenance ends). Delivered: they are not sent again.
   */
  buffered: number
  /** Failed forward attempts since the last success. */
  failedAttempts: number
  lastError: string | null
  /** ISO times. */
  lastErrorAt: string | null
  lastForwardAt: string | null
  /** When a failed forward is tried again (null when nothing is failing). */
  nextRetryAt: string | null
}

/**
 * `queen.bridge`: forwards pushes to the bridged queues from the local broker to the edge, exactly once
 * by transactionId, in order per partition. The forward position is a consumer group (`__bridge__`) of
 * the local broker, acked only after the edge answered, so it survives reloads and crashes.
 */
export interface Bridge {
  readonly url: string
  readonly queues: string[]
  /** Progress, with `pending` read now. */
  status(): Promise<BridgeStatus>
  /** Calls `callback` on every change; returns an unsubscribe function. */
  onProgress(callback: (status: BridgeStatus) => void): () => void
  /** Resolves once nothing is pending; rejects with QueenError `timeout` (naming the last error). */
  drain(options?: { timeoutMillis?: number }): Promise<BridgeStatus>
  /** Ends the current back-off: failed forwards are tried again now. */
  retryNow(): void
  /** Stops forwarding (`close()` does); a span held for a retry is given back to the local broker. */
  stop(): Promise<void>
}

/** Options of {@link Queen.connect}. */
export interface ConnectOptions {
  /** Sent as `Authorization: Bearer <token>`. */
  token?: string
  headers?: Record<string, string>
  /** Per-request timeout in ms (default 30000; pops use their long-poll timeout + 5000). */
  timeoutMillis?: number
  /** Attempts on 5xx and network failures (default 3). */
  retryAttempts?: number
  /** First back-off in ms, doubling (default 1000). */
  retryDelayMillis?: number
  fetch?: typeof fetch
}

/** Where a client's requests go. */
export type QueenRole = 'writer' | 'follower' | 'closed' | 'remote'

/** The answer of {@link Queen.request}. */
export interface RawResponse {
  status: number
  /** Parsed JSON, the text of a non-JSON answer, or null when empty. */
  body: Json
}

/** Queen's JS client API, over the in-browser broker or HTTP. */
export class Queen {
  private constructor()
  /** Opens the broker `name` in this page or worker on IndexedDB (writer or follower; see `role`). */
  static open(options: OpenOptions): Promise<Queen>
  /** The same API over HTTP to a queen-edge worker or a Queen server. */
  static connect(url: string, options?: ConnectOptions): Queen
  /**
   * Deletes the IndexedDB database of broker `name` and everything in it. Every Queen open on it, in any
   * tab or worker, closes: `role` turns `'closed'`, and its pending and later calls reject with code
   * `closed` and a message saying the database was deleted (a consume loop stops with it). `Queen.open(name)`
   * afterwards starts on a new, empty database; a `serveQueen` service worker does so at its next request.
   */
  static deleteDatabase(name: string, options?: { views?: boolean; wasmUrl?: string | URL }): Promise<void>
  /** `'writer'` / `'follower'` / `'closed'` in the browser, `'remote'` over HTTP. */
  readonly role: QueenRole
  /** The answer to `navigator.storage.persist()` when this context became the writer; `undefined` when not asked or not available. */
  readonly persisted: boolean | undefined
  /** Broker name, or base URL over HTTP. */
  readonly name: string
  readonly admin: Admin
  /** The bridge of `Queen.open({ bridge })`; null otherwise. */
  readonly bridge: Bridge | null
  /** One raw Queen HTTP call; never throws for an HTTP status. `body`: JSON-encoded unless a string. */
  request(method: string, path: string, body?: unknown): Promise<RawResponse>
  queue<T = Json>(name?: string): QueueBuilder<T>
  /** Acks a message or messages (in their own group unless `context.group` says); never throws. */
  ack(messages: Message<unknown> | Message<unknown>[], status?: AckStatus, context?: AckContext): Promise<AckResult>
  renew(target: Message<unknown> | string): Promise<RenewResult>
  renew(target: Array<Message<unknown> | string>): Promise<RenewResult[]>
  transaction(): TransactionBuilder
  deleteConsumerGroup(group: string, deleteMetadata?: boolean): Promise<JsonObject>
  updateConsumerGroupTimestamp(group: string, timestamp: string | Date): Promise<JsonObject>
  /** Calls `callback` when `role` changes; returns an unsubscribe function. */
  onRoleChange(callback: (role: QueenRole) => void): () => void
  /** Sends what `.buffer()` holds, for every queue; rejects with the first failure. */
  flushAllBuffers(): Promise<void>
  getBufferStats(): BufferStats
  /**
   * Stops this client: flushes buffers first (up to 30 s; rejects, after closing, when some items could
   * not be sent), stops the bridge; in the browser a writer hands the database to the next tab or worker.
   * Requests still pending: in the browser, those this tab's broker is running get their own answers (a
   * commit under way finishes; the rest reject with code `closed`, saying nothing of them was written;
   * resolves once they have them); the others reject with code `closed` and a message saying that they
   * may or may not have been applied. Requests made after `close()` reject with code `closed`.
   */
  close(): Promise<void>
}

/** A service worker's `FetchEvent`, as far as {@link serveQueen} needs it. */
export interface QueenFetchEvent {
  readonly request: Request
  respondWith(response: Response | Promise<Response>): void
}

/**
 * Service-worker mode: a fetch handler answering `/api/v1/*`, `/health` and `/metrics*` of this origin
 * from the in-browser broker (returns true) and leaving other requests alone (returns false). No
 * `bridge` here (it needs the views build, which browsers cannot load in a service worker): refused.
 */
export declare function serveQueen(options: Omit<OpenOptions, 'bridge'>): (event: QueenFetchEvent) => boolean

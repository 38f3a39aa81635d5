// Types of queen-edge's JS module. Checked into the repository; tests/js/api-snapshot.txt is a dump of
// this file's declarations, diffed by scripts/test.d/50-js-playwright so an API change is deliberate.

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

/** A fresh UUIDv7 (the client's default `transactionId`). */
export declare function uuidv7(): string

/** What `push` accepts per item: `{data}` / `{payload}` (plus ids), or the payload itself. */
export type PushItem =
  | { data: Json; transactionId?: string; traceId?: string }
  | { payload: Json; transactionId?: string; traceId?: string }
  | Json

/** One entry of a push answer, in item order. */
export interface PushResult {
  index: number
  status: 'queued' | 'duplicate' | 'failed' | 'buffered'
  transaction_id: string
  transactionId: string
  message_id?: string
  messageId?: string
  partition_id?: string
  trace_id?: string | null
  queueName?: string
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
  consumerGroup: string | null
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
  /** The consumer group the message was popped with (omit for queue mode). */
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
  transactionId: string
  partitionId: string
  queue: string
  partition: string
  consumerGroup: string | null
  errorMessage: string | null
  retryCount: number
  data: T
  createdAt: string
  failedAt: string
  producerSub: string | null
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
 * whether `.each()` was called, which decides what the `consume` handler receives.
 */
export class QueueBuilder<T = Json, Each extends boolean = false> {
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
  push(items: PushItem | PushItem[]): PushBuilder
  /** Consumer group (default: queue mode). */
  group(name: string): this
  concurrency(n: number): this
  /** Messages per pop (default 1). */
  batch(n: number): this
  /** Partitions one pop may claim (default 1). */
  partitions(n: number): this
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
  each(): QueueBuilder<T, true>
  /** Long-poll (default true). */
  wait(enabled: boolean): this
  /** Long-poll deadline in ms (default 30000). */
  timeoutMillis(ms: number): this
  /** Claims messages; `[]` when there are none (after the long-poll) or the request failed. */
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

/** `queen.admin`: operations and dashboard calls; each throws a QueenError on a non-2xx answer. */
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
  /** Replays a dead letter by its row id. */
  replayDeadLetter(id: string): Promise<JsonObject>
  /** Replays every dead letter the filter selects (as `dlq:<id>`, so twice adds nothing), in chunks;
   *  `{dryRun: true}` answers `{count, sample}` and changes nothing. Against `Queen.open`, needs
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
  /** Follower: give up (code `no_writer`) when no writer acknowledged a request this long, ms (default 30000). */
  noWriterTimeoutMillis?: number
  /** Writer: how long answers to forwarded requests are kept for re-sends, ms (default 60000). */
  answerCacheMillis?: number
  /**
   * Storage quota in bytes of stored messages: a push that would pass it is refused with status 507
   * (code `quota_exceeded`, with an error saying the broker is full); pops, acks, dead-letter replay
   * and deletes keep working. Default: none (the browser's own quota then answers `quota_exceeded`).
   */
  maxStoredBytes?: number
  /** Bytes of decoded messages the writer keeps in memory (default 32 MiB). */
  cacheBytes?: number
  /**
   * Without Web Locks (non-secure origins): a follower whose forwarded request no writer acknowledged
   * this long claims writership itself, ms (default 2000). Storage fences writers either way.
   */
  claimAfterMillis?: number
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
   * the writer encrypts for every context, so pass the same key everywhere. Needs a secure context
   * (https or localhost), where browsers offer `crypto.subtle`.
   */
  encryptionKey?: string | CryptoKey
  /** Where the .wasm file is (default: next to the module; with `views`, the views build's file). */
  wasmUrl?: string | URL
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
  /** Deletes the IndexedDB database of broker `name`. */
  static deleteDatabase(name: string, options?: { views?: boolean; wasmUrl?: string | URL }): Promise<void>
  /** `'writer'` / `'follower'` / `'closed'` in the browser, `'remote'` over HTTP. */
  readonly role: QueenRole
  /** The answer to `navigator.storage.persist()` when this context became the writer; `undefined` when not asked or not available. */
  readonly persisted: boolean | undefined
  /** Broker name, or base URL over HTTP. */
  readonly name: string
  readonly admin: Admin
  /** One raw Queen HTTP call; never throws for an HTTP status. `body`: JSON-encoded unless a string. */
  request(method: string, path: string, body?: unknown): Promise<RawResponse>
  queue<T = Json>(name?: string): QueueBuilder<T>
  /** Acks a message or messages; never throws. */
  ack(messages: Message<unknown> | Message<unknown>[], status?: AckStatus, context?: AckContext): Promise<AckResult>
  renew(target: Message<unknown> | string): Promise<RenewResult>
  renew(target: Array<Message<unknown> | string>): Promise<RenewResult[]>
  transaction(): TransactionBuilder
  deleteConsumerGroup(group: string, deleteMetadata?: boolean): Promise<JsonObject>
  updateConsumerGroupTimestamp(group: string, timestamp: string | Date): Promise<JsonObject>
  /** Calls `callback` when `role` changes; returns an unsubscribe function. */
  onRoleChange(callback: (role: QueenRole) => void): () => void
  /** Stops this client; in the browser a writer hands the database to the next tab or worker. */
  close(): Promise<void>
}

/** A service worker's `FetchEvent`, as far as {@link serveQueen} needs it. */
export interface QueenFetchEvent {
  readonly request: Request
  respondWith(response: Response | Promise<Response>): void
}

/**
 * Service-worker mode: a fetch handler answering `/api/v1/*`, `/health` and `/metrics*` of this origin
 * from the in-browser broker (returns true) and leaving other requests alone (returns false).
 */
export declare function serveQueen(options: OpenOptions): (event: QueenFetchEvent) => boolean

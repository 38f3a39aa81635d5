// The fluent client: Queen's JS API (queen-mq) over a transport.
//
// One implementation serves both homes: `Queen.open` (the in-browser broker, js/local.js) and
// `Queen.connect` (HTTP to a queen-edge worker or a Queen server, js/http.js). A transport is one method,
// `request(method, path, body, options) -> Promise<{status, headers, body}>` (body parsed JSON, text, or
// null), which never throws for an HTTP status, only for a failure to get an answer (QueenError).
//
// Builder semantics follow wire-contract §4 (queen-mq 0.15 plus the 2.6 additions): QueueBuilder,
// PushBuilder, OperationBuilder, ConsumeBuilder, DLQBuilder, TransactionBuilder, Admin.

import { QueenError, errorFromResponse, asQueenError } from './errors.js'
import { BufferManager, bufferOptions } from './buffer.js'

/** Options every `.config(...).create()` sends, overlaid with the caller's (wire-contract §4). */
export const QUEUE_DEFAULTS = Object.freeze({
  leaseTime: 300,
  retryLimit: 3,
  priority: 0,
  delayedProcessing: 0,
  windowBuffer: 0,
  maxSize: 0,
  retentionSeconds: 0,
  completedRetentionSeconds: 0,
  encryptionEnabled: false
})

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

// Two hex digits per byte value, and random bytes drawn 4 KB at a time: one getRandomValues call per 256
// ids instead of one per id, which dominated a large push's time in the browser (docs/decisions.md,
// "Browser IndexedDB path, session 8").
const HEX = Array.from({ length: 256 }, (_, b) => (b < 16 ? '0' : '') + b.toString(16))
const pool = new Uint8Array(4096)
let used = pool.length
let lastMs = -1
let msHex = ''

/** A UUIDv7 (time-ordered) from `Date.now()` and `crypto.getRandomValues`. */
export function uuidv7() {
  if (used === pool.length) {
    globalThis.crypto.getRandomValues(pool)
    used = 0
  }
  const o = used
  used += 16
  const now = Date.now()
  if (now !== lastMs) {
    lastMs = now
    const hex = now.toString(16).padStart(12, '0')
    msHex = hex.slice(0, 8) + '-' + hex.slice(8) + '-'
  }
  let tail = ''
  for (let i = o + 10; i < used; i++) tail += HEX[pool[i]]
  return msHex + HEX[0x70 | (pool[o + 6] & 0x0f)] + HEX[pool[o + 7]] + '-' + HEX[0x80 | (pool[o + 8] & 0x3f)] +
    HEX[pool[o + 9]] + '-' + tail
}

/** A pushed item's payload: its `data` if present, else its `payload`, else the item itself. */
function payloadOf(item) {
  if (item !== null && typeof item === 'object') {
    if ('data' in item) return item.data
    if ('payload' in item) return item.payload
  }
  return item
}

/**
 * The `transactionId` a pushed item is sent with: its own, else a fresh UUIDv7, or none when `mintsIds` (the
 * broker makes it: LocalTransport.mintsIds).
 */
function sentId(item, mintsIds) {
  const own = item !== null && typeof item === 'object' && item.transactionId
  return own || (mintsIds ? undefined : uuidv7())
}

/** The ack statuses the broker takes (besides none: `completed`). */
const ACK_STATUSES = ['completed', 'success', 'failed', 'retry', 'dlq']

/** Messages acked through `Queen.ack` whose lease the broker kept (`leaseReleased: false`): a consume loop
 * in `each()` mode goes on with the rest of their batch after its handler failed on them. */
const LEASE_KEPT = new WeakSet()

function ackStatus(status) {
  if (status === true) return 'completed'
  if (status === false) return 'failed'
  return status
}

function pause(ms, signal) {
  if (signal && signal.aborted) return Promise.resolve()
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer)
      if (signal) signal.removeEventListener('abort', done)
      resolve()
    }
    const timer = setTimeout(done, ms)
    if (signal) signal.addEventListener('abort', done, { once: true })
  })
}

/** Sends a request and returns the body of a 2xx answer; throws a QueenError otherwise. */
async function call(transport, method, path, body, options) {
  const response = await transport.request(method, path, body, options)
  if (response.status < 200 || response.status >= 300) throw routeError(method, path, response)
  return response.body
}

/**
 * The QueenError of a non-2xx answer; a 404 `no_such_route` (a route Queen has and this broker does
 * not serve) becomes code `unsupported`, naming the route.
 */
function routeError(method, path, response) {
  const error = errorFromResponse(response)
  if (response.status === 404 && response.body && response.body.error === 'no_such_route') {
    return new QueenError('unsupported', `${method} ${path.split('?')[0]} is not served by this broker (no_such_route)`, {
      status: 404,
      body: response.body
    })
  }
  return error
}

function encodeQuery(params) {
  const parts = []
  for (const [key, value] of Object.entries(params)) {
    if (value === undefined || value === null || value === '') continue
    parts.push(encodeURIComponent(key) + '=' + encodeURIComponent(String(value)))
  }
  return parts.length ? '?' + parts.join('&') : ''
}

/** The work of an {@link Awaited} subclass: a method returning its promise (a symbol: no public name). */
const RUN = Symbol()
/** {@link Awaited}'s own start: runs `[RUN]()` the first time, then returns the same promise. */
const START = Symbol()

/**
 * A thenable whose work starts once, when it is first awaited (or chained with `then`, `catch`, `finally`,
 * or started by the subclass with `this[START]()`): a subclass defines `[RUN]()`.
 */
class Awaited {
  #promise = null

  then(resolve, reject) {
    return this[START]().then(resolve, reject)
  }

  catch(reject) {
    return this[START]().catch(reject)
  }

  finally(callback) {
    return this[START]().finally(callback)
  }

  [START]() {
    if (!this.#promise) this.#promise = this[RUN]()
    return this.#promise
  }
}

/** A request built now and sent when awaited; `.onSuccess` / `.onError` observe the outcome. */
export class OperationBuilder extends Awaited {
  #transport
  #method
  #path
  #body
  #onSuccess = null
  #onError = null

  constructor(transport, method, path, body) {
    super()
    this.#transport = transport
    this.#method = method
    this.#path = path
    this.#body = body
  }

  /** Called with the answer body when the operation succeeds. */
  onSuccess(callback) {
    this.#onSuccess = callback
    return this
  }

  /** Called with the error when it fails; the awaited value is then `{success: false, error}`. */
  onError(callback) {
    this.#onError = callback
    return this
  }

  async [RUN]() {
    try {
      const body = await call(this.#transport, this.#method, this.#path, this.#body)
      if (body && typeof body === 'object' && !Array.isArray(body) && body.error) {
        throw new QueenError('server_error', String(body.error), { body })
      }
      if (this.#onSuccess) await this.#onSuccess(body)
      return body
    } catch (error) {
      if (!this.#onError) throw error
      await this.#onError(error)
      return { success: false, error: error.message }
    }
  }
}

/**
 * A push, sent when awaited. Resolves to the broker's result array, one entry per item, in order; after
 * `.buffer()`, the items join the client-side buffer and it resolves to `{buffered: true, count}`.
 */
export class PushBuilder extends Awaited {
  #transport
  #items
  #buffer
  #onSuccess = null
  #onDuplicate = null
  #onError = null

  /** `buffer`: `{manager, key, options}` for a buffered push, else null. */
  constructor(transport, items, buffer = null) {
    super()
    this.#transport = transport
    this.#items = items
    this.#buffer = buffer
  }

  /** Called with the `queued` results. */
  onSuccess(callback) {
    this.#onSuccess = callback
    return this
  }

  /** Called with the `duplicate` results (an item whose transactionId was already pushed). */
  onDuplicate(callback) {
    this.#onDuplicate = callback
    return this
  }

  /** Called with the failed results, or with the error when the whole push failed (it then does not throw). */
  onError(callback) {
    this.#onError = callback
    return this
  }

  [RUN]() {
    return this.#buffer ? this.#bufferItems() : this.#send()
  }

  async #bufferItems() {
    if (this.#onError || this.#onDuplicate) {
      throw new QueenError('invalid', 'a buffered push is sent later: its failures are in getBufferStats() and flushBuffer(), not onError/onDuplicate')
    }
    const { manager, key, options } = this.#buffer
    manager.add(key, this.#items, options)
    if (this.#onSuccess) await this.#onSuccess(this.#items)
    return { buffered: true, count: this.#items.length }
  }

  async #send() {
    let results
    try {
      results = await call(this.#transport, 'POST', '/api/v1/push', { items: this.#items })
    } catch (error) {
      if (!this.#onError) throw error
      await this.#onError(error)
      return []
    }
    if (!Array.isArray(results)) results = []
    const queued = results.filter((r) => r && r.status === 'queued')
    const duplicates = results.filter((r) => r && r.status === 'duplicate')
    const failed = results.filter((r) => r && r.status === 'failed')
    if (queued.length && this.#onSuccess) await this.#onSuccess(queued)
    if (duplicates.length && this.#onDuplicate) await this.#onDuplicate(duplicates)
    if (failed.length) {
      if (this.#onError) await this.#onError(failed)
      else throw new QueenError('server_error', failed[0].error || 'push failed', { body: results })
    }
    return results
  }
}

/** `queue(q).dlq(group)`: a page of the dead-letter queue, newest first. */
export class DLQBuilder {
  #transport
  #queue
  #group
  #partition
  #limit = 100
  #offset = 0
  #from = null
  #to = null

  constructor(transport, queue, group, partition) {
    this.#transport = transport
    this.#queue = queue
    this.#group = group
    this.#partition = partition
  }

  /** Page size (default 100). */
  limit(n) {
    this.#limit = Math.max(1, n)
    return this
  }

  /** Rows to skip (default 0). */
  offset(n) {
    this.#offset = Math.max(0, n)
    return this
  }

  /** Only rows filed at or after this time (sent; the broker may ignore it). */
  from(time) {
    this.#from = time instanceof Date ? time.toISOString() : time
    return this
  }

  /** Only rows filed at or before this time (sent; the broker may ignore it). */
  to(time) {
    this.#to = time instanceof Date ? time.toISOString() : time
    return this
  }

  /** Fetches the page; `{messages: [], total: 0}` when the request fails. */
  async get() {
    const query = encodeQuery({
      queue: this.#queue,
      limit: this.#limit,
      offset: this.#offset,
      consumerGroup: this.#group,
      partition: this.#partition && this.#partition !== 'Default' ? this.#partition : null,
      from: this.#from,
      to: this.#to
    })
    try {
      const body = await call(this.#transport, 'GET', '/api/v1/dlq' + query)
      return body || { messages: [], total: 0 }
    } catch (error) {
      if (error && error.code === 'closed') throw error
      return { messages: [], total: 0 }
    }
  }
}

/** The consume loop: awaitable (resolves when every worker stopped). */
export class ConsumeBuilder extends Awaited {
  #queen
  #transport
  #handler
  #options
  #onSuccess = null
  #onError = null
  #controller = new AbortController()

  constructor(queen, transport, handler, options) {
    super()
    this.#queen = queen
    this.#transport = transport
    this.#handler = handler
    this.#options = options
    if (options.signal) {
      if (options.signal.aborted) this.#controller.abort()
      else options.signal.addEventListener('abort', () => this.#controller.abort(), { once: true })
    }
    // Start on the next microtask so `.onSuccess/.onError` chained right after consume() apply.
    queueMicrotask(() => this[START]())
  }

  /**
   * Called with the message (`.each()`) or the batch after the handler succeeded. When set, the
   * consumer does not ack successes itself: the callback must (e.g. `queen.ack(m, true, {group})`).
   */
  onSuccess(callback) {
    this.#onSuccess = callback
    return this
  }

  /**
   * Called with the message or batch and the error when the handler throws. When set, the consumer
   * does not nack failures itself: the callback decides (`queen.ack(m, false | 'retry' | 'dlq', ...)`).
   */
  onError(callback) {
    this.#onError = callback
    return this
  }

  /** Stops every worker after its current step (a parked long-poll ends at its timeout). */
  stop() {
    this.#controller.abort()
  }

  [RUN]() {
    const workers = []
    for (let i = 0; i < this.#options.concurrency; i++) workers.push(this.#worker())
    return Promise.all(workers).then(() => undefined)
  }

  #ackContext() {
    return this.#options.group ? { group: this.#options.group } : {}
  }

  async #worker() {
    const o = this.#options
    const signal = this.#controller.signal
    const path = o.path + encodeQuery(o.params)
    let processed = 0
    let lastMessageAt = Date.now()
    while (!signal.aborted) {
      if (o.limit && processed >= o.limit) break
      if (o.idleMillis && Date.now() - lastMessageAt >= o.idleMillis) break
      let response
      try {
        response = await this.#transport.request('GET', path, undefined, {
          timeoutMs: o.wait ? o.timeoutMillis + 5000 : o.timeoutMillis
        })
      } catch (error) {
        if (signal.aborted) break
        const code = error && error.code
        if (code === 'timeout' && o.wait) continue
        if (code === 'network' || code === 'no_writer' || code === 'timeout') {
          await pause(1000, signal)
          continue
        }
        throw asQueenError(error)
      }
      if (response.status === 204 || !response.body || !Array.isArray(response.body.messages) ||
          response.body.messages.length === 0) {
        if (response.status >= 400) {
          if (response.status >= 500) {
            await pause(1000, signal)
            continue
          }
          throw errorFromResponse(response)
        }
        const autopilot = response.body && response.body.autopilot
        if (!o.wait) await pause(autopilot && autopilot.waitMs > 0 ? autopilot.waitMs : 100, signal)
        continue
      }
      const messages = response.body.messages.filter((m) => m != null)
      for (const m of messages) this.#addTrace(m)
      lastMessageAt = Date.now()
      if (signal.aborted) {
        await this.#release(messages)
        break
      }
      const renewal = o.renewLease && o.renewLeaseIntervalMillis
        ? setInterval(() => { this.#queen.renew(messages).catch(() => {}) }, o.renewLeaseIntervalMillis)
        : null
      try {
        if (o.each) {
          const abandoned = new Set()
          for (let i = 0; i < messages.length; i++) {
            const message = messages[i]
            if (signal.aborted || (o.limit && processed >= o.limit)) {
              await this.#release(messages.slice(i).filter((m) => !abandoned.has(m.partitionId)))
              break
            }
            if (abandoned.has(message.partitionId)) continue
            const ok = await this.#process(message)
            processed++
            // A failed message whose ack released the partition's lease (the default `failed`, or `retry` or
            // `dlq` from onError): its later messages come again, so skip them. One that onError acked with
            // the lease kept (acked `true`: log and skip) leaves the rest of the batch to this loop.
            if (!ok && !LEASE_KEPT.has(message)) abandoned.add(message.partitionId)
          }
        } else {
          await this.#process(messages)
          processed += messages.length
        }
      } finally {
        if (renewal) clearInterval(renewal)
      }
    }
  }

  /** Runs the handler on a message or batch and settles it; false when the handler threw. */
  async #process(subject) {
    try {
      await this.#handler(subject)
    } catch (error) {
      if (this.#onError) {
        await this.#onError(subject, error)
      } else {
        await this.#queen.ack(subject, false, {
          ...this.#ackContext(),
          error: (error && error.message) || String(error)
        })
      }
      return false
    }
    if (this.#onSuccess) await this.#onSuccess(subject)
    else if (this.#options.autoAck) await this.#queen.ack(subject, true, this.#ackContext())
    return true
  }

  /** Gives back messages this worker will not process (stopped or limit reached): `retry` acks. */
  async #release(messages) {
    if (!messages.length) return
    try {
      await this.#queen.ack(messages, 'retry', this.#ackContext())
    } catch {
      // Best effort: the lease expires otherwise.
    }
  }

  #addTrace(message) {
    const transport = this.#transport
    const group = this.#options.group || '__QUEUE_MODE__'
    Object.defineProperty(message, 'trace', {
      enumerable: false,
      configurable: true,
      value: async ({ traceName, traceNames, eventType = 'info', data } = {}) => {
        try {
          const names = traceNames ?? (traceName === undefined ? null : traceName)
          await call(transport, 'POST', '/api/v1/traces', {
            transactionId: message.transactionId,
            partitionId: message.partitionId,
            consumerGroup: group,
            traceNames: names,
            eventType,
            data
          })
          return { success: true }
        } catch (error) {
          return { success: false, error: error.message }
        }
      }
    })
  }
}

/** `queen.queue(name)`: create, push, pop, consume, dlq, delete. */
export class QueueBuilder {
  #queen
  #transport
  #name
  #partition = 'Default'
  #namespace = null
  #task = null
  #group = null
  #config = null
  #concurrency = 1
  #batch = 1
  #partitions = 1
  #limit = null
  #idleMillis = null
  #autoAck = true
  #autoAckSet = false
  #wait = true
  #timeoutMillis = 30000
  #renewLease = false
  #renewLeaseIntervalMillis = null
  #subscriptionMode = null
  #subscriptionFrom = null
  #each = false
  #buffers
  #bufferOptions = null
  #batchSet = false
  #partitionsSet = false
  #autopilot = false
  #conflation = false
  #leaseSeconds = null

  constructor(queen, transport, name, buffers) {
    this.#queen = queen
    this.#transport = transport
    this.#name = name === undefined ? null : name
    this.#buffers = buffers
  }

  /** The queue name. */
  get name() {
    return this.#name
  }

  /** Namespace label (sent on create; with no queue name, pops discover by it). */
  namespace(name) {
    this.#namespace = name
    return this
  }

  /** Task label (sent on create; with no queue name, pops discover by it). */
  task(name) {
    this.#task = name
    return this
  }

  /** Queue options for `create()`, overlaid on QUEUE_DEFAULTS. */
  config(options) {
    this.#config = { ...QUEUE_DEFAULTS, ...(options || {}) }
    return this
  }

  /** Creates the queue or overwrites its options (`POST /api/v1/configure`). */
  create() {
    this.#requireName('create')
    return new OperationBuilder(this.#transport, 'POST', '/api/v1/configure', {
      queue: this.#name,
      namespace: this.#namespace,
      task: this.#task,
      options: this.#config || { ...QUEUE_DEFAULTS }
    })
  }

  /** Deletes the queue and everything in it. */
  delete() {
    this.#requireName('delete')
    return new OperationBuilder(this.#transport, 'DELETE',
      '/api/v1/resources/queues/' + encodeURIComponent(this.#name), undefined)
  }

  /** Partition to push to or pop from (default `Default`). */
  partition(name) {
    this.#partition = name
    return this
  }

  /**
   * Pushes one item or many. An item's payload is its `data` if present, else its `payload`, else the
   * item itself; its `transactionId` (dedup key) is its own or a fresh UUIDv7 (made here, or by the broker
   * in the page: the results carry it either way).
   */
  push(items) {
    this.#requireName('push')
    const list = Array.isArray(items) ? items : [items]
    // In the page the broker mints the ids of items sent without one (LocalTransport.mintsIds), but not for
    // a buffered push: its items are handed to onSuccess, and a failed send is sent again.
    const mintsIds = !this.#bufferOptions && this.#transport.mintsIds === true
    const formatted = list.map((item) => {
      const out = { queue: this.#name, partition: this.#partition, payload: payloadOf(item) }
      const id = sentId(item, mintsIds)
      if (id) out.transactionId = id
      if (item !== null && typeof item === 'object' && typeof item.traceId === 'string' && UUID_RE.test(item.traceId)) {
        out.traceId = item.traceId
      }
      return out
    })
    const buffer = this.#bufferOptions
      ? { manager: this.#buffers, key: `${this.#name}/${this.#partition}`, options: this.#bufferOptions }
      : null
    return new PushBuilder(this.#transport, formatted, buffer)
  }

  /**
   * Buffers pushes client-side (Queen's `.buffer()`): `push()` then resolves to `{buffered: true,
   * count}` at once, and the items go out per queue/partition in one request when `messageCount`
   * (default 100) are waiting or `timeMillis` (default 1000) after the first, or on `flushBuffer()`,
   * `queen.flushAllBuffers()` and `queen.close()`.
   */
  buffer(options) {
    this.#bufferOptions = bufferOptions(options)
    return this
  }

  /** Sends what `.buffer()` holds for this queue and partition; rejects with the first failure. */
  flushBuffer() {
    this.#requireName('flushBuffer')
    return this.#buffers.flush(`${this.#name}/${this.#partition}`)
  }

  /** Consumer group (default: queue mode, one logical consumer). */
  group(name) {
    this.#group = name
    return this
  }

  /** Parallel workers in `consume()` (default 1). */
  concurrency(n) {
    this.#concurrency = Math.max(1, n)
    return this
  }

  /** Messages per pop (default 1, or the broker's choice under `.autopilot()`). */
  batch(n) {
    this.#batch = Math.max(1, n)
    this.#batchSet = true
    return this
  }

  /** Partitions one pop may claim (default 1, or the broker's choice under `.autopilot()`). */
  partitions(n) {
    this.#partitions = Math.max(1, n)
    this.#partitionsSet = true
    return this
  }

  /**
   * Lets the broker size pops (`autopilot=true`): it picks `batch` from the group's recent ack rate and
   * `partitions` from the ready ones, for whichever of the two this builder did not set. Off by default
   * (queen-mq 0.15's requests; docs/decisions.md, "autopilot off by default").
   */
  autopilot(enabled = true) {
    this.#autopilot = !!enabled
    return this
  }

  /**
   * Conflation (`conflation=true`): the group gets only the newest message of each partition, and the
   * cursor moves past the older ones. Needs `.group()`; the broker refuses it with autoAck, and `pop()`
   * then throws the QueenError instead of resolving to `[]`.
   */
  conflation(enabled = true) {
    this.#conflation = !!enabled
    return this
  }

  /** Lease of the messages a pop claims, in seconds (instead of the queue's `leaseTime`). */
  leaseSeconds(seconds) {
    if (!Number.isInteger(seconds) || seconds < 1) throw new QueenError('invalid', 'leaseSeconds must be an integer >= 1')
    this.#leaseSeconds = seconds
    return this
  }

  /** `consume()` stops after this many messages. */
  limit(n) {
    this.#limit = n
    return this
  }

  /** `consume()` stops after this long without messages. */
  idleMillis(ms) {
    this.#idleMillis = ms
    return this
  }

  /**
   * `consume()`: ack after the handler (default true). `pop()`: `autoAck(true)` asks the broker to
   * commit on delivery (no lease).
   */
  autoAck(enabled) {
    this.#autoAck = !!enabled
    this.#autoAckSet = true
    return this
  }

  /** `consume()`: extend the lease every `intervalMillis` while the handler runs. */
  renewLease(enabled, intervalMillis) {
    this.#renewLease = !!enabled
    if (intervalMillis) this.#renewLeaseIntervalMillis = intervalMillis
    return this
  }

  /** Where a new group starts: `'new'` (only later messages) or `'all'`. */
  subscriptionMode(mode) {
    this.#subscriptionMode = mode
    return this
  }

  /** Where a new group starts: an ISO time or `'now'`. */
  subscriptionFrom(from) {
    this.#subscriptionFrom = from instanceof Date ? from.toISOString() : from
    return this
  }

  /** `consume()`: call the handler once per message instead of once per batch. */
  each() {
    this.#each = true
    return this
  }

  /** Long-poll (default true: an empty pop waits up to `timeoutMillis`). */
  wait(enabled) {
    this.#wait = !!enabled
    return this
  }

  /** Long-poll deadline in ms (default 30000; the broker caps it at 60000). */
  timeoutMillis(ms) {
    this.#timeoutMillis = Math.max(1, ms)
    return this
  }

  #requireName(what) {
    if (this.#name === null || this.#name === undefined) {
      throw new QueenError('invalid', `Queue name is required for ${what}`)
    }
  }

  #popPath() {
    if (this.#name !== null && this.#name !== undefined) {
      if (this.#partition && this.#partition !== 'Default') {
        return `/api/v1/pop/queue/${encodeURIComponent(this.#name)}/partition/${encodeURIComponent(this.#partition)}`
      }
      return `/api/v1/pop/queue/${encodeURIComponent(this.#name)}`
    }
    if (this.#namespace || this.#task) return '/api/v1/pop'
    throw new QueenError('invalid', 'Must specify queue, namespace, or task for pop operation')
  }

  /** Query parameters of pop and consume, as Queen's JS client sends them (wire-contract §2.3). */
  #popParams() {
    const autopilot = this.#autopilot && !(this.#batchSet && this.#partitionsSet)
    return {
      autopilot: autopilot ? 'true' : null,
      batch: this.#autopilot && !this.#batchSet ? null : this.#batch,
      wait: this.#wait ? 'true' : 'false',
      timeout: this.#timeoutMillis,
      consumerGroup: this.#group,
      namespace: this.#namespace,
      task: this.#task,
      subscriptionMode: this.#subscriptionMode,
      subscriptionFrom: this.#subscriptionFrom,
      partitions: (this.#autopilot && this.#partitionsSet) || this.#partitions > 1 ? this.#partitions : null,
      conflation: this.#conflation ? 'true' : null,
      leaseSeconds: this.#leaseSeconds
    }
  }

  /**
   * Claims messages. Resolves to the messages (`[]` when there are none, after the long-poll when
   * `wait` is on, and on transport failures, as queen-mq does); throws when the Queen was closed, and
   * on a refused conflating pop.
   */
  async pop() {
    const path = this.#popPath()
    const params = this.#popParams()
    if (this.#autoAckSet && this.#autoAck) params.autoAck = 'true'
    try {
      const response = await this.#transport.request('GET', path + encodeQuery(params), undefined, {
        timeoutMs: this.#timeoutMillis + 5000
      })
      // As Queen's clients: a refused conflating pop throws; other failures resolve to [].
      if (this.#conflation && response.status >= 400 && response.status < 500) throw routeError('GET', path, response)
      if (response.status !== 200 || !response.body || !Array.isArray(response.body.messages)) return []
      return response.body.messages.filter((m) => m != null)
    } catch (error) {
      if (error && (error.code === 'closed' || (this.#conflation && error.status >= 400 && error.status < 500))) throw error
      return []
    }
  }

  /**
   * Runs `handler` on claimed messages until stopped (`signal`, `.stop()`, `limit`, `idleMillis`).
   * The handler gets a batch (an array) unless `.each()` is set.
   */
  consume(handler, options = {}) {
    return new ConsumeBuilder(this.#queen, this.#transport, handler, {
      path: this.#popPath(),
      params: this.#popParams(),
      group: this.#group,
      concurrency: this.#concurrency,
      limit: this.#limit,
      idleMillis: this.#idleMillis,
      autoAck: this.#autoAck,
      wait: this.#wait,
      timeoutMillis: this.#timeoutMillis,
      renewLease: this.#renewLease,
      renewLeaseIntervalMillis: this.#renewLeaseIntervalMillis,
      each: this.#each,
      signal: options.signal
    })
  }

  /** The dead-letter queue of this queue (optionally of one group). */
  dlq(group) {
    return new DLQBuilder(this.#transport, this.#name, group === undefined ? null : group, this.#partition)
  }
}

/** `queen.transaction()`: acks and pushes applied atomically by `commit()`. */
export class TransactionBuilder {
  #transport
  #operations = []
  #leases = new Set()

  constructor(transport) {
    this.#transport = transport
  }

  /** Acks a message or messages inside the transaction. */
  ack(messages, status = 'completed', context = {}) {
    const list = Array.isArray(messages) ? messages : [messages]
    for (const m of list) {
      if (!m || !m.transactionId || !m.partitionId) {
        throw new QueenError('invalid', 'ack needs messages with transactionId and partitionId')
      }
      const op = { type: 'ack', transactionId: m.transactionId, partitionId: m.partitionId, status: ackStatus(status) }
      const group = context.consumerGroup ?? context.group ?? m.consumerGroup
      if (group && group !== '__QUEUE_MODE__') op.consumerGroup = group
      if (m.leaseId) {
        op.leaseId = m.leaseId
        this.#leases.add(m.leaseId)
      }
      if (context.error) op.error = context.error
      this.#operations.push(op)
    }
    return this
  }

  /** Starts a push to `queue` inside the transaction: `.partition(p)` then `.push(items)`. */
  queue(name) {
    const tx = this
    const operations = this.#operations
    const transport = this.#transport
    let partition = null
    const builder = {
      partition(p) {
        partition = p
        return builder
      },
      push(items) {
        const list = Array.isArray(items) ? items : [items]
        const mintsIds = transport.mintsIds === true
        operations.push({
          type: 'push',
          items: list.map((item) => {
            const out = { queue: name, payload: payloadOf(item) }
            const id = sentId(item, mintsIds)
            if (id) out.transactionId = id
            if (partition !== null) out.partition = partition
            return out
          })
        })
        return tx
      }
    }
    return builder
  }

  /** Applies every operation or none. Throws a QueenError when the broker refuses the transaction. */
  async commit() {
    if (this.#operations.length === 0) {
      throw new QueenError('invalid', 'Transaction has no operations to commit')
    }
    const body = await call(this.#transport, 'POST', '/api/v1/transaction', {
      operations: this.#operations,
      requiredLeases: [...this.#leases]
    })
    if (!body || body.success !== true) {
      throw new QueenError('conflict', (body && body.error) || 'Transaction failed', { status: 200, body })
    }
    return body
  }
}

function enc(segment) {
  return encodeURIComponent(segment)
}

/** The consumer group a delivered message names (`null` for queue mode). */
function messageGroup(m) {
  const g = m && m.consumerGroup
  return typeof g === 'string' && g !== '' && g !== '__QUEUE_MODE__' ? g : null
}

const BUFFERS = new WeakMap()

/**
 * For `Queen.close()`: sends what the client's buffers hold (bounded by `timeoutMs`), then stops them.
 * Rejects when some buffered items could not be sent.
 */
export async function flushBuffersForClose(client, timeoutMs = 30000) {
  const manager = BUFFERS.get(client)
  if (!manager) return
  const deadline = Date.now() + timeoutMs
  let lastError = null
  while (manager.stats().totalBufferedMessages > 0 && Date.now() < deadline) {
    try {
      await manager.flushAll()
      lastError = null
    } catch (error) {
      lastError = error
      // A passing failure keeps the items buffered: try again until the deadline.
      if (manager.stats().totalBufferedMessages > 0) await pause(250)
    }
  }
  const left = manager.stats().totalBufferedMessages
  manager.stop()
  if (left > 0) {
    throw new QueenError((lastError && lastError.code) || 'timeout',
      `close: ${left} buffered messages were not sent` + (lastError ? `: ${lastError.message}` : ''))
  }
  if (lastError) throw lastError
}

/** `queen.admin`: dashboard and operations calls. Each resolves to the answer body or throws a QueenError. */
export class Admin {
  #transport

  constructor(transport) {
    this.#transport = transport
  }

  #get(path, params) {
    return call(this.#transport, 'GET', path + encodeQuery(params || {}))
  }

  getOverview() { return this.#get('/api/v1/resources/overview') }
  getNamespaces() { return this.#get('/api/v1/resources/namespaces') }
  getTasks() { return this.#get('/api/v1/resources/tasks') }
  listQueues(params) { return this.#get('/api/v1/resources/queues', params) }
  getQueue(name) { return this.#get('/api/v1/resources/queues/' + enc(name)) }
  /** Deletes a queue and everything in it. */
  deleteQueue(name) { return call(this.#transport, 'DELETE', '/api/v1/resources/queues/' + enc(name)) }
  listMessages(params) { return this.#get('/api/v1/messages', params) }
  getMessage(partitionId, transactionId) {
    return this.#get(`/api/v1/messages/${enc(partitionId)}/${enc(transactionId)}`)
  }
  /** Deletes the dead-letter row(s) of a message. */
  deleteMessage(partitionId, transactionId) {
    return call(this.#transport, 'DELETE', `/api/v1/messages/${enc(partitionId)}/${enc(transactionId)}`)
  }
  /** Replays a dead-lettered message to its queue (idempotent). */
  retryMessage(partitionId, transactionId) {
    return call(this.#transport, 'POST', `/api/v1/messages/${enc(partitionId)}/${enc(transactionId)}/retry`, {})
  }
  /** Replays a dead letter by its DLQ row id. */
  replayDeadLetter(id) { return call(this.#transport, 'POST', `/api/v1/dlq/${enc(id)}/replay`, {}) }
  /** Replays the dead letters a filter selects, in chunks; `{dryRun: true}` previews count and sample. */
  replayDeadLetters(filter, options) { return this.#bulk('replay', filter, options) }
  /** Deletes the dead letters a filter selects, in chunks; `{dryRun: true}` previews count and sample. */
  deleteDeadLetters(filter, options) { return this.#bulk('delete', filter, options) }
  /** The delivery log (queues with `deliveryLog` on), newest first. */
  listDeliveries(params) { return this.#get('/api/v1/deliveries', params) }

  #bulk(action, filter, options) {
    const body = { ...(filter || {}), dryRun: Boolean(options && options.dryRun) }
    return call(this.#transport, 'POST', `/api/v1/dlq/${action}`, body)
  }
  getTracesByName(name, params) { return this.#get('/api/v1/traces/by-name/' + enc(name), params) }
  getTraceNames(params) { return this.#get('/api/v1/traces/names', params) }
  getTracesForMessage(partitionId, transactionId) {
    return this.#get(`/api/v1/traces/${enc(partitionId)}/${enc(transactionId)}`)
  }
  getStatus(params) { return this.#get('/api/v1/status', params) }
  getQueueStats(params) { return this.#get('/api/v1/status/queues', params) }
  getQueueDetail(name, params) { return this.#get('/api/v1/status/queues/' + enc(name), params) }
  getAnalytics(params) { return this.#get('/api/v1/status/analytics', params) }
  listConsumerGroups() { return this.#get('/api/v1/consumer-groups') }
  refreshConsumerStats() { return call(this.#transport, 'POST', '/api/v1/stats/refresh', {}) }
  getConsumerGroup(name) { return this.#get('/api/v1/consumer-groups/' + enc(name)) }
  getLaggingConsumers(minLagSeconds = 60) {
    return this.#get('/api/v1/consumer-groups/lagging', { minLagSeconds })
  }
  deleteConsumerGroupForQueue(group, queue, deleteMetadata = true) {
    return call(this.#transport, 'DELETE',
      `/api/v1/consumer-groups/${enc(group)}/queues/${enc(queue)}?deleteMetadata=${deleteMetadata ? 'true' : 'false'}`)
  }
  /** Moves a group's cursors on a queue: `{toEnd: true}` or `{timestamp: iso}`. */
  seekConsumerGroup(group, queue, options) {
    return call(this.#transport, 'POST', `/api/v1/consumer-groups/${enc(group)}/queues/${enc(queue)}/seek`, options || {})
  }
  health() { return call(this.#transport, 'GET', '/health') }
  metrics() { return call(this.#transport, 'GET', '/metrics') }
  getMaintenanceMode() { return this.#get('/api/v1/system/maintenance') }
  setMaintenanceMode(enabled) { return call(this.#transport, 'POST', '/api/v1/system/maintenance', { enabled }) }
  getPopMaintenanceMode() { return this.#get('/api/v1/system/maintenance/pop') }
  setPopMaintenanceMode(enabled) { return call(this.#transport, 'POST', '/api/v1/system/maintenance/pop', { enabled }) }
  getSystemMetrics(params) { return this.#get('/api/v1/analytics/system-metrics', params) }
  getWorkerMetrics(params) { return this.#get('/api/v1/analytics/worker-metrics', params) }
}

/**
 * The client: `queen.queue(name)...`, `ack`, `renew`, `transaction`, `admin`, plus `request` for raw
 * Queen HTTP calls. Made by `Queen.open` (in-browser broker) or `Queen.connect` (HTTP).
 */
export class QueenClient {
  #transport
  #admin
  #buffers

  constructor(transport) {
    this.#transport = transport
    this.#admin = new Admin(transport)
    this.#buffers = new BufferManager(transport)
    BUFFERS.set(this, this.#buffers)
  }

  /** The transport underneath (internal). */
  get transport() {
    return this.#transport
  }

  /** Dashboard and operations calls. */
  get admin() {
    return this.#admin
  }

  /**
   * One raw Queen HTTP call. `body` is JSON-encoded unless it is a string; resolves to
   * `{status, body}` with `body` parsed JSON, text for non-JSON answers, or null when empty. Never
   * throws for an HTTP status.
   */
  async request(method, path, body) {
    const response = await this.#transport.request(method, path, body)
    return { status: response.status, body: response.body }
  }

  /** A builder for queue `name`. */
  queue(name) {
    return new QueueBuilder(this, this.#transport, name, this.#buffers)
  }

  /** Sends everything `.buffer()` holds, for every queue; rejects with the first failure. */
  flushAllBuffers() {
    return this.#buffers.flushAll()
  }

  /**
   * Queen's buffer stats (`activeBuffers`, `totalBufferedMessages`, `oldestBufferAge` in ms,
   * `flushesPerformed`), plus `failedMessages` (dropped because the broker refused them) and `lastError`.
   */
  getBufferStats() {
    return this.#buffers.stats()
  }

  /**
   * Acks one message or many: `status` true (`completed`), false (`failed`), `'retry'` or `'dlq'`.
   * Per-message `_status` / `_error` override. Never throws: resolves to `{success, error?, results}`.
   */
  async ack(messages, status = true, context = {}) {
    const explicitGroup = context.group ?? context.consumerGroup ?? null
    // Without a group in `context`, each message is acked in the group it was popped with.
    const groupOf = (m) => explicitGroup ?? messageGroup(m)
    const error = context.error ?? null
    const item = (m) => {
      const out = {
        transactionId: m.transactionId || m.id,
        partitionId: m.partitionId,
        status: ackStatus(m._status !== undefined ? m._status : status),
        error: m._error !== undefined ? m._error : error
      }
      if (m.leaseId) out.leaseId = m.leaseId
      return out
    }
    const many = Array.isArray(messages)
    const list = many ? messages : [messages]
    if (list.length === 0) return { success: true, results: [] }
    if (list.some((m) => !m || !m.partitionId)) {
      return { success: false, error: many ? 'partitionId is required for every message' : 'partitionId is required' }
    }
    const items = list.map(item)
    // Refused here, before anything is sent: a batch acked per group must not fail half applied.
    const bad = items.findIndex((a) => a.status != null && !ACK_STATUSES.includes(a.status))
    if (bad >= 0) {
      return { success: false, code: 'bad_request', error: `Invalid status '${items[bad].status}': expected completed, ` +
        `success, failed, retry or dlq${many ? ` (acknowledgments[${bad}].status)` : ''}` }
    }
    const groups = new Map()
    list.forEach((m, i) => {
      const g = groupOf(m)
      if (!groups.has(g)) groups.set(g, [])
      groups.get(g).push(i)
    })
    // One request per group; each message's result says whether its group's request was applied.
    const results = []
    let code
    for (const [group, indexes] of groups) {
      const sent = indexes.map((i) => items[i])
      let answers
      try {
        const response = await this.#transport.request('POST', many ? '/api/v1/ack/batch' : '/api/v1/ack',
          many ? { acknowledgments: sent, consumerGroup: group } : { ...sent[0], consumerGroup: group })
        if (response.status < 200 || response.status >= 300) throw errorFromResponse(response)
        answers = Array.isArray(response.body) ? response.body : [response.body]
      } catch (e) {
        const err = asQueenError(e)
        // Not known to have kept a lease (it may have been applied): consume's loop skips the rest.
        for (const i of indexes) LEASE_KEPT.delete(list[i])
        // The broker's indexes are within the group's request: say them in the caller's array.
        const message = err.message.replace(/acknowledgments\[(\d+)\]/g, (_, k) => `acknowledgments[${indexes[k]}]`)
        if (groups.size === 1) return { success: false, error: message, code: err.code }
        code ??= err.code
        answers = sent.map((a) => ({ transactionId: a.transactionId, partitionId: a.partitionId, success: false, error: message }))
      }
      indexes.forEach((i, k) => {
        results[i] = answers[k] && typeof answers[k] === 'object' ? { ...answers[k], index: i } : answers[k]
      })
    }
    list.forEach((m, i) => {
      const r = results[i]
      if (r && r.success !== false && !r.error && r.leaseReleased === false) LEASE_KEPT.add(m)
      else LEASE_KEPT.delete(m)
    })
    const failed = results.find((r) => !r || r.success === false || r.error)
    const out = { ...results, success: !failed, results }
    if (failed) out.error = (failed && failed.error) || 'ack failed'
    if (code) out.code = code
    return out
  }

  /** Extends leases: a message, a lease id, or an array of either (one request per distinct lease). */
  async renew(target) {
    const list = Array.isArray(target) ? target : [target]
    const ids = [...new Set(list.map((t) => (typeof t === 'string' ? t : t && t.leaseId)).filter(Boolean))]
    const results = []
    for (const leaseId of ids) {
      try {
        const response = await this.#transport.request('POST', `/api/v1/lease/${enc(leaseId)}/extend`, {})
        const body = response.body || {}
        results.push({
          leaseId,
          success: response.status === 200 && body.success !== false,
          newExpiresAt: body.newExpiresAt ?? body.lease_expires_at ?? null,
          ...(body.error ? { error: body.error } : {})
        })
      } catch (e) {
        results.push({ leaseId, success: false, newExpiresAt: null, error: asQueenError(e).message })
      }
    }
    return Array.isArray(target) ? results : results[0] || { leaseId: null, success: false, newExpiresAt: null, error: 'no lease id' }
  }

  /** A transaction of acks and pushes, applied atomically by `.commit()`. */
  transaction() {
    return new TransactionBuilder(this.#transport)
  }

  /** Deletes a consumer group's positions (and by default its subscription metadata). */
  deleteConsumerGroup(group, deleteMetadata = true) {
    return call(this.#transport, 'DELETE',
      `/api/v1/consumer-groups/${enc(group)}?deleteMetadata=${deleteMetadata ? 'true' : 'false'}`)
  }

  /** Rewrites where a group starts on partitions it has not consumed yet. */
  updateConsumerGroupTimestamp(group, timestamp) {
    const ts = timestamp instanceof Date ? timestamp.toISOString() : timestamp
    return call(this.#transport, 'POST', `/api/v1/consumer-groups/${enc(group)}/subscription`, {
      subscriptionTimestamp: ts
    })
  }
}

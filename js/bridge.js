// The browser-to-edge bridge: `Queen.open({ name, bridge: { url, token, queues } })`.
//
// Pushes to the bridged queues land in the local broker (IndexedDB) as any push does; the bridge is a
// consumer group (`__bridge__`) on those queues that forwards what it claims to the edge broker at
// `url` (`POST /api/v1/push`, same queue, partition, payload and transactionId) and acks locally only
// after the edge answered. So the forward position is the group's cursor, durable in IndexedDB: a
// reload or a tab crash mid-forward loses nothing, and what was sent but not acked is sent again when
// its lease expires, where the edge's transactionId dedup answers `duplicate` (exactly once at the
// edge). An edge in maintenance mode answers `buffered`: accepted (it drains its buffer into the queue
// later), so the span is delivered as with `queued`. One loop per queue, one partition's span at a time,
// so the edge appends in partition order.
// Failures (offline, 5xx, 401, an item refused) keep the batch leased and retry it with a doubling
// back-off; nothing is dropped. See docs/decisions.md ("browser-to-edge bridge").
//
// A page that goes away while it holds a span gives it back on `pagehide`, but a page being unloaded may
// not finish that write, and a crashed one runs nothing. So each span held is also noted in the held-span
// registry (held-spans.js), from which other bridges on the broker give back the spans of bridges that are
// gone, instead of waiting `leaseSeconds` for their leases.

// This file imports nothing from the main module: the bundle makes it (with held-spans.js) a chunk of its
// own, loaded by `Queen.open` only with a bridge, and what it needs from the main module is handed to
// bridgeOptions and the constructor. The bridge's options are checked here too, so a page without a bridge
// downloads neither.
import { HeldSpans } from './held-spans.js'

/** The consumer group the bridge forwards with, on every bridged queue of the local broker. */
const BRIDGE_GROUP = '__bridge__'
/** How long an idle loop's local long-poll parks before it polls again. */
const IDLE_POLL_MILLIS = 10000
/** Edge push results that mean the edge has the message (`buffered`: held in its maintenance buffer). */
const ACCEPTED = new Set(['queued', 'duplicate', 'buffered'])

const enc = encodeURIComponent
const iso = (ms) => (ms ? new Date(ms).toISOString() : null)

let QueenError, errorFromResponse, asQueenError

/** Defaults of the bridge's numeric options. */
export const BRIDGE_DEFAULTS = Object.freeze({
  batch: 100,
  leaseSeconds: 30,
  retryDelayMillis: 1000,
  maxRetryDelayMillis: 60000,
  timeoutMillis: 30000
})
const KNOWN = ['url', 'token', 'queues', ...Object.keys(BRIDGE_DEFAULTS)]

/**
 * Checks `Queen.open`'s `bridge` option; throws QueenError `invalid` naming what is wrong. `deps`: as the
 * Bridge constructor's (the main module's QueenError is the one thrown).
 */
export function bridgeOptions(options, deps) {
  ;({ QueenError, errorFromResponse, asQueenError } = deps)
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new QueenError('invalid', 'bridge must be an object: { url, token, queues }')
  }
  for (const key of Object.keys(options)) {
    if (!KNOWN.includes(key)) throw new QueenError('invalid', `bridge: unknown option '${key}' (known: ${KNOWN.join(', ')})`)
  }
  let url
  try {
    url = new URL(options.url)
  } catch {
    throw new QueenError('invalid', 'bridge.url must be the absolute URL of the edge broker')
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new QueenError('invalid', 'bridge.url must be http(s)')
  if (options.token !== undefined && (typeof options.token !== 'string' || options.token === '')) {
    throw new QueenError('invalid', 'bridge.token must be a non-empty string')
  }
  const queues = options.queues
  if (!Array.isArray(queues) || queues.length === 0 || queues.some((q) => typeof q !== 'string' || q === '')) {
    throw new QueenError('invalid', 'bridge.queues must be a non-empty array of queue names')
  }
  if (new Set(queues).size !== queues.length) throw new QueenError('invalid', 'bridge.queues names a queue twice')
  const out = { url: options.url, token: options.token, queues: [...queues] }
  for (const [key, fallback] of Object.entries(BRIDGE_DEFAULTS)) {
    const value = options[key] ?? fallback
    if (!Number.isInteger(value) || value < 1) throw new QueenError('invalid', `bridge.${key} must be an integer >= 1`)
    out[key] = value
  }
  if (out.maxRetryDelayMillis < out.retryDelayMillis) {
    throw new QueenError('invalid', 'bridge.maxRetryDelayMillis must be >= retryDelayMillis')
  }
  return out
}

/** `queen.bridge`: forwards the bridged queues to the edge broker; progress in `status()`. */
export class Bridge {
  #queen
  #options
  #edge
  #stopped = false
  #loops = []
  #wakers = new Set()
  #listeners = new Set()
  #failing = new Set()
  #state = 'starting'
  #forwarded = 0
  #duplicates = 0
  #buffered = 0
  #lastError = null
  #lastErrorAt = 0
  #lastForwardAt = 0
  #nextRetryAt = 0
  #failedAttempts = 0
  #pending = null
  #onOnline = null
  #onOffline = null
  #onPageHide = null
  #held = new Set()
  #registry = null
  #keyed = null
  #sealedAtEdge = new Set()

  /**
   * Starts forwarding (internal: `Queen.open` makes it). `options`: checked by bridgeOptions (below); `deps`:
   * `{QueenError, errorFromResponse, asQueenError, HttpTransport}` of the main module.
   */
  constructor(queen, options, deps) {
    ;({ QueenError, errorFromResponse, asQueenError } = deps)
    this.#queen = queen
    this.#options = options
    this.#edge = new deps.HttpTransport(options.url, {
      token: options.token,
      timeoutMillis: options.timeoutMillis,
      retryAttempts: 1
    })
    const target = globalThis
    if (typeof target.addEventListener === 'function') {
      this.#onOnline = () => {
        this.#emit()
        this.retryNow()
      }
      this.#onOffline = () => this.#emit()
      target.addEventListener('online', this.#onOnline)
      target.addEventListener('offline', this.#onOffline)
      // A page going away (reload, navigation) gives back the spans it holds, so the next page does not
      // wait for their leases; best effort: if it does not get through, the leases expire.
      this.#onPageHide = () => {
        for (const messages of this.#held) this.#queen.ack(messages, 'retry', { group: BRIDGE_GROUP })
      }
      target.addEventListener('pagehide', this.#onPageHide)
    }
    const ready = HeldSpans.open(queen.name, (messages) => this.#queen.ack(messages, 'retry', { group: BRIDGE_GROUP }))
      .then((heldSpans) => {
        this.#registry = heldSpans
        if (this.#stopped && heldSpans) heldSpans.close()
      })
    this.#loops = options.queues.map(async (queue) => {
      await ready
      return this.#run(queue)
    })
  }

  /** The edge broker's URL. */
  get url() {
    return this.#options.url
  }

  /** The bridged queues. */
  get queues() {
    return [...this.#options.queues]
  }

  /**
   * Progress, with `pending` read now from the local broker: messages of the bridged queues the edge
   * has not acknowledged yet (`null` when the broker could not say, e.g. a writer without views).
   */
  async status() {
    await this.#refreshPending()
    return this.#snapshot()
  }

  /** Calls `callback(status)` on every change (its `pending` is the last one read). Returns an unsubscribe function. */
  onProgress(callback) {
    this.#listeners.add(callback)
    return () => this.#listeners.delete(callback)
  }

  /**
   * Resolves to the status once nothing is pending (everything pushed to the bridged queues so far
   * reached the edge) and no batch is in flight or held for a retry, so its counts are final; rejects
   * with QueenError `timeout` (naming the last error) after `timeoutMillis`.
   */
  async drain({ timeoutMillis = 30000 } = {}) {
    const deadline = Date.now() + timeoutMillis
    for (;;) {
      const status = await this.status()
      // A batch acknowledged locally reads as not pending before its forward is counted: wait for it.
      if (status.pending === 0 && status.state !== 'forwarding' && status.state !== 'retrying') return status
      if (this.#stopped) throw new QueenError('closed', 'the bridge was stopped')
      if (Date.now() >= deadline) {
        throw new QueenError('timeout', `bridge: ${status.pending ?? 'some'} messages not forwarded within ${timeoutMillis} ms` +
          (status.lastError ? ` (last error: ${status.lastError})` : ''))
      }
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }

  /** Ends the current back-off wait: failed batches are tried again now. */
  retryNow() {
    for (const wake of [...this.#wakers]) wake()
  }

  /** Stops forwarding (`queen.close()` calls it); a batch held for a retry is given back to the local broker. */
  async stop() {
    if (this.#stopped) return
    this.#stopped = true
    this.#state = 'stopped'
    if (this.#onOnline) {
      globalThis.removeEventListener('online', this.#onOnline)
      globalThis.removeEventListener('offline', this.#onOffline)
      globalThis.removeEventListener('pagehide', this.#onPageHide)
    }
    this.retryNow()
    this.#edge.close()
    // Loops parked in a local long-poll end when the transport closes; do not wait for them.
    await Promise.race([Promise.allSettled(this.#loops), new Promise((resolve) => setTimeout(resolve, 1000))])
    // A span still noted now was not given back: other bridges do it, as for a page that is gone.
    if (this.#registry) this.#registry.close()
    this.#emit()
  }

  #online() {
    const nav = globalThis.navigator
    return !(nav && nav.onLine === false)
  }

  #snapshot() {
    return {
      url: this.#options.url,
      queues: [...this.#options.queues],
      state: this.#stopped ? 'stopped' : !this.#online() ? 'offline' : this.#state,
      online: this.#online(),
      pending: this.#pending,
      forwarded: this.#forwarded,
      duplicates: this.#duplicates,
      buffered: this.#buffered,
      failedAttempts: this.#failedAttempts,
      lastError: this.#lastError,
      lastErrorAt: iso(this.#lastErrorAt),
      lastForwardAt: iso(this.#lastForwardAt),
      nextRetryAt: this.#failing.size ? iso(this.#nextRetryAt) : null
    }
  }

  #emit() {
    const snapshot = this.#snapshot()
    for (const listener of this.#listeners) {
      try {
        listener(snapshot)
      } catch {
        // A listener's failure is its own.
      }
    }
  }

  /** Reads the bridge group's backlog on each bridged queue (the depth view). */
  async #refreshPending() {
    let total = 0
    try {
      for (const queue of this.#options.queues) {
        const grouped = await this.#queen.request('GET', `/api/v1/resources/queues/${enc(queue)}/depth?group=${BRIDGE_GROUP}`)
        if (grouped.status === 200) {
          total += grouped.body.pending
          continue
        }
        if (grouped.status !== 404) throw errorFromResponse(grouped)
        // The group has not claimed from this queue yet (or the queue does not exist): all of it is pending.
        const whole = await this.#queen.request('GET', `/api/v1/resources/queues/${enc(queue)}/depth`)
        if (whole.status === 200) total += whole.body.pending
        else if (whole.status !== 404) throw errorFromResponse(whole)
      }
      this.#pending = total
    } catch {
      this.#pending = null
    }
  }

  /** Waits `ms`, or until `retryNow()`, an `online` event or `stop()`. */
  #sleep(ms) {
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer)
        this.#wakers.delete(wake)
        resolve()
      }
      const timer = setTimeout(wake, ms)
      this.#wakers.add(wake)
    })
  }

  /** One queue: claim a span, forward it until the edge takes it, ack it locally; again. */
  async #run(queue) {
    const o = this.#options
    const path = `/api/v1/pop/queue/${enc(queue)}?consumerGroup=${BRIDGE_GROUP}&subscriptionMode=all` +
      `&batch=${o.batch}&leaseSeconds=${o.leaseSeconds}&wait=true&timeout=${IDLE_POLL_MILLIS}`
    let delay = o.retryDelayMillis
    while (!this.#stopped) {
      let messages = []
      try {
        const answer = await this.#queen.request('GET', path)
        if (answer.status >= 400) throw errorFromResponse(answer)
        messages = (answer.body && Array.isArray(answer.body.messages) ? answer.body.messages : []).filter(Boolean)
      } catch (error) {
        const e = asQueenError(error)
        if (this.#stopped || e.code === 'closed') break
        this.#fail(queue, 'local broker: ' + e.message, delay)
        await this.#sleep(delay)
        delay = Math.min(o.maxRetryDelayMillis, delay * 2)
        continue
      }
      if (messages.length === 0) {
        if (this.#state === 'starting') this.#setState('idle')
        continue
      }
      delay = await this.#forward(queue, messages, delay)
    }
  }

  /** Forwards one claimed span until the edge took it (then acks it) or the lease is lost. Returns the next back-off. */
  async #forward(queue, messages, delay) {
    const o = this.#options
    const leaseId = messages[0].leaseId
    let leaseLost = false
    const renewal = setInterval(async () => {
      const renewed = await this.#queen.renew(leaseId)
      if (!renewed.success) leaseLost = true
    }, Math.max(1000, (o.leaseSeconds * 1000) / 3))
    this.#held.add(messages)
    if (this.#registry) this.#registry.note(leaseId, messages)
    let keepNote = false
    const items = messages.map((m) => {
      const item = { queue: m.queue || queue, partition: m.partition, payload: m.data, transactionId: m.transactionId }
      if (m.traceId) item.traceId = m.traceId
      return item
    })
    try {
      while (!this.#stopped && !leaseLost) {
        if (!this.#online()) {
          this.#fail(queue, this.#lastError || 'offline', o.maxRetryDelayMillis, false)
          await this.#sleep(o.maxRetryDelayMillis)
          continue
        }
        this.#setState('forwarding')
        let results
        try {
          await this.#checkSealing(queue)
          const answer = await this.#edge.request('POST', '/api/v1/push', { items })
          if (answer.status < 200 || answer.status >= 300) throw errorFromResponse(answer)
          results = Array.isArray(answer.body) ? answer.body : null
          if (!results || results.length !== items.length) throw new QueenError('server_error', 'the edge answered the push without one result per item')
          const refused = results.find((r) => !r || !ACCEPTED.has(r.status))
          if (refused) throw new QueenError('server_error', `the edge refused ${items[results.indexOf(refused)].transactionId}: ${(refused && refused.error) || 'no reason given'}`)
        } catch (error) {
          if (this.#stopped) break
          const e = asQueenError(error, 'network')
          this.#fail(queue, `${e.code}: ${e.message}`, delay)
          await this.#sleep(delay)
          delay = Math.min(o.maxRetryDelayMillis, delay * 2)
          continue
        }
        // The edge has them: now the local cursor may move. A lost lease only means a resend later,
        // which the edge answers `duplicate`.
        await this.#queen.ack(messages, true, { group: BRIDGE_GROUP })
        this.#forwarded += results.length
        this.#duplicates += results.filter((r) => r.status === 'duplicate').length
        this.#buffered += results.filter((r) => r.status === 'buffered').length
        this.#lastForwardAt = Date.now()
        this.#failing.delete(queue)
        this.#failedAttempts = this.#failing.size ? this.#failedAttempts : 0
        this.#setState(this.#failing.size ? 'retrying' : 'idle', false)
        await this.#refreshPending()
        this.#emit()
        return o.retryDelayMillis
      }
      if (this.#stopped && !leaseLost) {
        // Give the span back so the next context forwards it without waiting for the lease; if that does
        // not land (the transport closed first), its note stays for other bridges to give it back.
        keepNote = !(await this.#queen.ack(messages, 'retry', { group: BRIDGE_GROUP })).success
      }
      return delay
    } finally {
      clearInterval(renewal)
      this.#held.delete(messages)
      if (this.#registry && !keepNote) this.#registry.forget(leaseId)
    }
  }

  /**
   * Throws QueenError `conflict` when `queue` has encryptionEnabled here and not at the edge: the local
   * pop hands the bridge plain text, which the edge would then store as it is (a push never makes an
   * encrypted queue). A broker without a key pops envelopes as stored, so it forwards ciphertext.
   */
  async #checkSealing(queue) {
    if (this.#sealedAtEdge.has(queue)) return
    if (this.#keyed === null) {
      const health = await this.#queen.request('GET', '/health')
      if (health.status !== 200) throw errorFromResponse(health)
      this.#keyed = !!(health.body && health.body.encryption && health.body.encryption.keyConfigured)
    }
    if (!this.#keyed) return
    const path = `/api/v1/resources/queues/${enc(queue)}`
    const local = await this.#queen.request('GET', path)
    // A writer without views (501) cannot say: only an encrypted edge queue is safe then.
    if (local.status === 200 && !(local.body && local.body.options && local.body.options.encryptionEnabled)) return
    if (local.status !== 200 && local.status !== 404 && local.status !== 501) throw errorFromResponse(local)
    const edge = await this.#edge.request('GET', path)
    if (edge.status === 200 && edge.body && edge.body.options && edge.body.options.encryptionEnabled) {
      this.#sealedAtEdge.add(queue)
      return
    }
    if (edge.status !== 200 && edge.status !== 404) throw errorFromResponse(edge)
    const here = local.status === 501
      ? `the tab that writes this broker was opened without views, so it cannot say whether queue ${queue} has encryptionEnabled ` +
        '(open every tab with views: true to forward plain queues),'
      : `queue ${queue} has encryptionEnabled here,`
    throw new QueenError('conflict', `${here} and at the edge ` +
      `${edge.status === 404 ? 'it does not exist' : 'it does not have it'}: its payloads would be stored there in plain text. ` +
      'Configure it at the edge with encryptionEnabled (the edge needs QUEEN_ENCRYPTION_KEY); its messages wait here until then')
  }

  #fail(queue, message, delay, count = true) {
    if (count) this.#failedAttempts++
    this.#failing.add(queue)
    this.#lastError = message
    this.#lastErrorAt = Date.now()
    this.#nextRetryAt = Date.now() + delay
    this.#setState('retrying', false)
    this.#refreshPending().then(() => this.#emit())
  }

  #setState(state, emit = true) {
    if (this.#stopped) return
    const changed = this.#state !== state
    this.#state = state
    if (changed && emit) this.#emit()
  }
}

// Client-side push buffering, as in Queen's JS client: `queue(q).partition(p).buffer({messageCount,
// timeMillis}).push(items)` keeps items per queue/partition and sends them in one `POST /api/v1/push`
// when `messageCount` are waiting, `timeMillis` after the first one, or on `flushBuffer()`,
// `flushAllBuffers()` and `close()`.
//
// Failures: a batch that failed for a passing reason (network, timeout, no writer, 5xx, 429, 507) goes
// back to the front of its buffer and is sent again with a back-off (250 ms doubling to 5 s); a batch
// the broker refused (another 4xx, or items answered `failed`) is dropped and counted in
// `getBufferStats().failedMessages` with `lastError` (docs/decisions.md, "buffered push").

import { QueenError, errorFromResponse, asQueenError } from './errors.js'

/** Defaults of `.buffer()`: Queen's. */
export const BUFFER_DEFAULTS = Object.freeze({ messageCount: 100, timeMillis: 1000 })

const RETRY_FIRST_MS = 250
const RETRY_MAX_MS = 5000
const PASSING = new Set(['network', 'timeout', 'no_writer', 'server_error', 'unavailable', 'quota_exceeded', 'http_429', 'http_408'])

/** Checks and completes `.buffer(options)`; throws QueenError `invalid` on bad values or unknown keys. */
export function bufferOptions(options = {}) {
  if (options === null || typeof options !== 'object') throw new QueenError('invalid', 'buffer() takes {messageCount, timeMillis}')
  for (const key of Object.keys(options)) {
    if (!(key in BUFFER_DEFAULTS)) throw new QueenError('invalid', `buffer(): unknown option '${key}' (known: messageCount, timeMillis)`)
  }
  const out = { ...BUFFER_DEFAULTS, ...options }
  if (!Number.isInteger(out.messageCount) || out.messageCount < 1) throw new QueenError('invalid', 'buffer(): messageCount must be an integer >= 1')
  if (!Number.isFinite(out.timeMillis) || out.timeMillis < 0) throw new QueenError('invalid', 'buffer(): timeMillis must be a number >= 0')
  return out
}

/** The buffers of one client, by `queue/partition`. */
export class BufferManager {
  #transport
  #buffers = new Map()
  #flushes = 0
  #failedMessages = 0
  #lastError = null

  constructor(transport) {
    this.#transport = transport
  }

  /** Adds formatted push items to the buffer of `key` (`queue/partition`). */
  add(key, items, options) {
    let buffer = this.#buffers.get(key)
    if (!buffer) {
      buffer = { items: [], options, firstAt: 0, timer: null, chain: Promise.resolve(), retryMs: RETRY_FIRST_MS }
      this.#buffers.set(key, buffer)
    }
    if (buffer.items.length === 0) buffer.firstAt = Date.now()
    buffer.items.push(...items)
    if (buffer.items.length >= buffer.options.messageCount) this.#background(key, false)
    else if (!buffer.timer) buffer.timer = setTimeout(() => this.#background(key), buffer.options.timeMillis)
  }

  /**
   * Sends everything buffered for `key` (with `all` false, only full batches: the rest waits for its
   * timer); rejects with the first failure (passing ones stay buffered).
   */
  flush(key, all = true) {
    const buffer = this.#buffers.get(key)
    if (!buffer) return Promise.resolve()
    const run = buffer.chain.then(() => this.#send(key, buffer, all))
    buffer.chain = run.catch(() => {})
    return run
  }

  /** Flushes every buffer; rejects with the first failure after trying them all. */
  async flushAll() {
    const results = await Promise.allSettled([...this.#buffers.keys()].map((key) => this.flush(key)))
    const failed = results.find((r) => r.status === 'rejected')
    if (failed) throw failed.reason
  }

  /** Queen's buffer stats, plus `failedMessages` and `lastError`. */
  stats() {
    let total = 0
    let oldest = 0
    for (const buffer of this.#buffers.values()) {
      total += buffer.items.length
      if (buffer.items.length) oldest = Math.max(oldest, Date.now() - buffer.firstAt)
    }
    return {
      activeBuffers: [...this.#buffers.values()].filter((b) => b.items.length).length,
      totalBufferedMessages: total,
      oldestBufferAge: oldest,
      flushesPerformed: this.#flushes,
      failedMessages: this.#failedMessages,
      lastError: this.#lastError
    }
  }

  /** Stops the timers (buffered items not flushed are dropped: `close()` flushes first). */
  stop() {
    for (const buffer of this.#buffers.values()) clearTimeout(buffer.timer)
    this.#buffers.clear()
  }

  #background(key, all = true) {
    this.flush(key, all).catch(() => {})
  }

  /** After a dropped batch, what is still buffered goes out at the next timer. */
  #rearm(key, buffer) {
    if (buffer.items.length && !buffer.timer) {
      buffer.timer = setTimeout(() => this.#background(key), buffer.options.timeMillis)
    }
  }

  async #send(key, buffer, all) {
    clearTimeout(buffer.timer)
    buffer.timer = null
    while (buffer.items.length && (all || buffer.items.length >= buffer.options.messageCount)) {
      const batch = buffer.items.splice(0, buffer.options.messageCount)
      let failed = []
      try {
        const response = await this.#transport.request('POST', '/api/v1/push', { items: batch })
        if (response.status < 200 || response.status >= 300) throw errorFromResponse(response)
        if (Array.isArray(response.body)) failed = response.body.filter((r) => r && r.status === 'failed')
        else if (response.body && typeof response.body === 'object' && response.body.error) {
          throw new QueenError('server_error', String(response.body.error), { status: response.status, body: response.body })
        }
      } catch (e) {
        const error = asQueenError(e, 'network')
        this.#lastError = error.message
        if (PASSING.has(error.code)) {
          buffer.items.unshift(...batch)
          buffer.timer = setTimeout(() => this.#background(key), buffer.retryMs)
          buffer.retryMs = Math.min(RETRY_MAX_MS, buffer.retryMs * 2)
        } else {
          this.#failedMessages += batch.length
          this.#rearm(key, buffer)
        }
        throw error
      }
      this.#flushes++
      buffer.retryMs = RETRY_FIRST_MS
      if (failed.length) {
        this.#failedMessages += failed.length
        this.#lastError = failed[0].error || 'push failed'
        this.#rearm(key, buffer)
        throw new QueenError('server_error', this.#lastError, { body: failed })
      }
    }
    if (buffer.items.length) {
      buffer.firstAt = Date.now()
      this.#rearm(key, buffer)
    } else if (this.#buffers.get(key) === buffer) {
      this.#buffers.delete(key)
    }
  }
}

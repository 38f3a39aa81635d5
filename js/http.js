// The HTTP transport: Queen's API over fetch, to a queen-edge worker or a Queen server.

import { MAYBE_APPLIED, QueenError } from './errors.js'

/** Parses an answer body: JSON when it parses, the text otherwise, null when empty. */
export function parseBody(text) {
  if (text === '' || text === undefined || text === null) return null
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/** Encodes a request body: strings are sent as they are, anything else as JSON; null/undefined = none. */
export function encodeBody(body) {
  if (body === undefined || body === null) return undefined
  if (typeof body === 'string') return body
  return JSON.stringify(body)
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

export class HttpTransport {
  #base
  #query
  #headers
  #timeoutMillis
  #retryAttempts
  #retryDelayMillis
  #fetch
  #closed = false
  #inflight = new Set()

  /**
   * @param {string} url base URL, e.g. `https://broker.example.workers.dev`; a query string in it (e.g.
   *   `?broker=eu`, which picks the broker of a queen-edge worker) is sent with every request
   * @param {object} [options] `token`, `headers`, `timeoutMillis` (30000), `retryAttempts` (3),
   *   `retryDelayMillis` (1000), `fetch`
   */
  constructor(url, options = {}) {
    if (typeof url !== 'string' || !url) throw new QueenError('invalid', 'Queen.connect needs a URL')
    // The query (and fragment) of the base URL must not end up in front of the request path.
    const noFragment = url.split('#')[0]
    const q = noFragment.indexOf('?')
    this.#base = (q < 0 ? noFragment : noFragment.slice(0, q)).replace(/\/+$/, '')
    this.#query = q < 0 ? '' : noFragment.slice(q + 1)
    this.#headers = { ...(options.headers || {}) }
    if (options.token) this.#headers.Authorization = 'Bearer ' + options.token
    this.#timeoutMillis = options.timeoutMillis ?? 30000
    this.#retryAttempts = Math.max(1, options.retryAttempts ?? 3)
    this.#retryDelayMillis = options.retryDelayMillis ?? 1000
    this.#fetch = options.fetch || globalThis.fetch.bind(globalThis)
  }

  get url() {
    return this.#base
  }

  /**
   * Sends one request; 5xx answers and network failures are retried (`retryAttempts` in all, back-off
   * `retryDelayMillis` doubling). Resolves to `{status, headers, body}`; throws QueenError `network`,
   * `timeout` or `closed`.
   */
  async request(method, path, body, options = {}) {
    const encoded = encodeBody(body)
    const headers = { ...this.#headers }
    if (encoded !== undefined) headers['Content-Type'] = 'application/json'
    const timeoutMs = options.timeoutMs ?? this.#timeoutMillis
    const target = this.#base + path + (this.#query ? (path.includes('?') ? '&' : '?') + this.#query : '')
    let lastError = null
    for (let attempt = 0; attempt < this.#retryAttempts; attempt++) {
      if (attempt > 0) await sleep(this.#retryDelayMillis * 2 ** (attempt - 1))
      if (this.#closed) throw new QueenError('closed', attempt > 0 ? MAYBE_APPLIED : 'this Queen was closed')
      const controller = new AbortController()
      this.#inflight.add(controller)
      const timer = setTimeout(() => controller.abort(new QueenError('timeout', `no answer within ${timeoutMs} ms`)), timeoutMs)
      try {
        const res = await this.#fetch(target, {
          method,
          headers,
          body: encoded,
          signal: controller.signal
        })
        const text = await res.text()
        const out = { status: res.status, headers: Object.fromEntries(res.headers.entries()), body: parseBody(text) }
        if (res.status >= 500 && attempt + 1 < this.#retryAttempts) {
          lastError = out
          continue
        }
        return out
      } catch (error) {
        if (this.#closed) {
          throw new QueenError('closed', MAYBE_APPLIED)
        }
        if (controller.signal.aborted) {
          lastError = new QueenError('timeout', `no answer within ${timeoutMs} ms from ${this.#base}${path}`)
          // A long-poll that timed out on our side is not retried: the caller polls again.
          throw lastError
        }
        lastError = new QueenError('network', `${method} ${this.#base}${path}: ${error.message || error}`, { cause: error })
      } finally {
        clearTimeout(timer)
        this.#inflight.delete(controller)
      }
    }
    if (lastError instanceof QueenError) throw lastError
    return lastError
  }

  close() {
    this.#closed = true
    for (const controller of this.#inflight) controller.abort()
    this.#inflight.clear()
  }
}

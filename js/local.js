// The in-browser transport: one writer per database across tabs and workers.
//
// Every page or worker that opens the broker `name` competes for the Web Lock `queen-edge:<name>`.
// - The holder is the writer: it opens the broker on IndexedDB (WasmBroker), serves its own requests
//   locally and answers the others' on the BroadcastChannel `queen-edge:<name>`. It holds the lock with a
//   promise that settles only on close(), so the browser releases it when the tab or worker goes away.
// - The others are followers: they forward each request on the channel with a unique id and wait for the
//   answer. Their lock request stays queued, so when the writer goes away one of them becomes the writer
//   (opening the broker reloads everything from IndexedDB) and announces itself.
//
// Channel messages (structured clone):
//   {t:'hello', from}                                   a follower asks who the writer is
//   {t:'writer', writer}                                 "I am the writer" (on takeover and on hello)
//   {t:'req', id, from, method, path, headers, body}     a forwarded request (body: Uint8Array | undefined)
//   {t:'ack', id, to, writer}                            the writer has it and is working on it
//   {t:'res', id, to, writer, status, headers, body}     the answer
//   {t:'gone', from}                                     a follower closed (or its page is going away)
//
// Delivery: a follower re-sends a request every `resendMillis` until a writer acks it, and re-sends every
// request not yet answered when a different writer announces itself (the old one died with it). The
// writer remembers request ids for a while and never runs one twice: a duplicate gets the ack again, or
// the stored answer. A request that reached an old writer, was committed, and whose answer was lost with
// that writer is run again by the new one: pushes carry client-minted transactionIds, so a re-run push
// answers `duplicate` with the original message id instead of storing the message twice.
//
// A follower that goes away with a long-poll parked at the writer says so ('gone'); when that pop later
// claims messages, the writer gives them back at once (a `retry` ack: no retry charged) instead of
// leaving them leased to nobody until the lease expires.

import init, { WasmBroker } from './pkg/queen_edge.js'
import { QueenError, asQueenError } from './errors.js'
import { parseBody, encodeBody } from './http.js'

// Two builds of the broker: without the view (dashboard) routes, what Queen.open loads by default and
// what every page downloads; and with them (`views: true`), fetched only when asked for: a separate
// chunk (its glue) and wasm file (docs/decisions.md, "views").
const wasmReady = { lean: null, views: null }

/**
 * Loads and instantiates one build of the wasm module once per global; resolves to its `WasmBroker`
 * class. `wasmUrl` overrides where that build's `.wasm` file is fetched from.
 */
export function loadWasm(wasmUrl, views = false) {
  const kind = views ? 'views' : 'lean'
  if (views && typeof globalThis.ServiceWorkerGlobalScope === 'function' &&
      globalThis instanceof globalThis.ServiceWorkerGlobalScope) {
    // Browsers forbid import() in service workers, and the views build is a chunk loaded with import().
    return Promise.reject(new QueenError('invalid',
      'views: true is not available in a service worker (browsers forbid import() there); ' +
      'serve the view routes from a page or a dedicated worker, or open the broker without views'))
  }
  if (!wasmReady[kind]) {
    const options = wasmUrl ? { module_or_path: wasmUrl } : undefined
    const loading = views
      ? import('./pkg/queen_edge_views.js').then((glue) => glue.default(options).then(() => glue.WasmBroker))
      : init(options).then(() => WasmBroker)
    wasmReady[kind] = loading.catch((error) => {
      wasmReady[kind] = null
      const which = views ? 'queen-edge wasm module (with views)' : 'queen-edge wasm module'
      throw new QueenError('unavailable', `could not load the ${which}: ` + (error.message || error), { cause: error })
    })
  }
  return wasmReady[kind]
}

const encoder = new TextEncoder()
const decoder = new TextDecoder()

function randomId() {
  const bytes = new Uint8Array(8)
  globalThis.crypto.getRandomValues(bytes)
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')
}

/**
 * Deletes the IndexedDB database of broker `name` (every open broker on it stops working). With
 * `views: true` it uses the views build (the one `options.wasmUrl` then points at), so a page that only
 * loads that build does not fetch the other.
 */
export async function deleteDatabase(name, options = {}) {
  const Broker = await loadWasm(options.wasmUrl, options.views === true)
  try {
    await Broker.deleteDatabase(name)
  } catch (error) {
    throw asQueenError(error)
  }
}

/**
 * The cipher of `encryptionKey` (null when there is none): AES-256-GCM with Queen's envelope
 * `{"encrypted", "iv", "authTag"}` (base64; a random 16-byte IV per payload, a 16-byte tag) on the
 * browser's Web Crypto. The wasm calls `seal(jsonTexts)` and `open(envelopeTexts)` (src/js/cipher.rs);
 * doing this here costs less download than in the wasm. A hex key is imported non-extractable; a
 * CryptoKey is checked. Done in every context (a follower fails on a bad key too).
 */
async function cipher(key) {
  if (key == null) return null
  const bad = (why) => new QueenError('invalid', 'encryptionKey must be 64 hex characters (32 bytes) or an AES-GCM CryptoKey of 256 bits usable to encrypt and decrypt: ' + why)
  const { crypto } = globalThis
  const subtle = crypto && crypto.subtle
  if (!subtle) throw new QueenError('invalid', 'encryptionKey needs crypto.subtle, which browsers offer only in secure contexts (https or localhost)')
  if (typeof key === 'string') {
    const hex = key.trim()
    if (!/^[0-9a-fA-F]{64}$/.test(hex)) throw bad(`got a string of ${hex.length} characters that is not 64 hex digits`)
    key = await subtle.importKey('raw', fromHex(hex), 'AES-GCM', false, ['encrypt', 'decrypt'])
  } else {
    const algorithm = (key && key.algorithm) || {}
    if (!(typeof CryptoKey === 'function' && key instanceof CryptoKey)) throw bad('got ' + typeof key)
    if (algorithm.name !== 'AES-GCM' || algorithm.length !== 256) throw bad(`got ${algorithm.name} of ${algorithm.length} bits`)
    if (!key.usages.includes('encrypt') || !key.usages.includes('decrypt')) throw bad(`its usages are ${key.usages.join(', ') || 'none'}`)
  }
  const b64 = (bytes) => {
    let s = ''
    for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000))
    return btoa(s)
  }
  const unb64 = (s) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0))
  const encoder = new TextEncoder()
  const decoder = new TextDecoder('utf-8', { fatal: true })
  return {
    seal: (texts) => Promise.all(texts.map(async (text) => {
      const iv = crypto.getRandomValues(new Uint8Array(16))
      const out = new Uint8Array(await subtle.encrypt({ name: 'AES-GCM', iv }, key, encoder.encode(text)))
      const tag = out.length - 16
      return JSON.stringify({ encrypted: b64(out.subarray(0, tag)), iv: b64(iv), authTag: b64(out.subarray(tag)) })
    })),
    open: (texts) => Promise.all(texts.map(async (text) => {
      try {
        const e = JSON.parse(text)
        const [data, iv, tag] = [unb64(e.encrypted), unb64(e.iv), unb64(e.authTag)]
        if (iv.length !== 16 || tag.length !== 16) return null
        const sealed = new Uint8Array(data.length + 16)
        sealed.set(data)
        sealed.set(tag, data.length)
        return decoder.decode(await subtle.decrypt({ name: 'AES-GCM', iv }, key, sealed))
      } catch {
        return null // another key, altered bytes, malformed fields: returned as stored
      }
    }))
  }
}

function fromHex(hex) {
  return new Uint8Array(hex.match(/../g).map((h) => parseInt(h, 16)))
}

export class LocalTransport {
  #name
  #options
  #id = randomId()
  #seq = 0
  #channel = null
  #role = 'connecting'
  #broker = null
  #persisted = undefined
  #writerId = null
  #pending = new Map()
  #served = new Map()
  #releaseLock = null
  #lockAbort = new AbortController()
  #closed = false
  #timers = []
  #maintenance = null
  #roleListeners = new Set()
  #lastError = null
  #gone = new Set()
  #onPageHide = null
  #Broker

  constructor(options, Broker) {
    this.#Broker = Broker
    this.#name = options.name
    this.#options = {
      durability: options.durability ?? 'strict',
      persist: options.persist ?? true,
      maintenanceIntervalMillis: options.maintenanceIntervalMillis ?? 60000,
      resendMillis: options.resendMillis ?? 250,
      noWriterTimeoutMillis: options.noWriterTimeoutMillis ?? 30000,
      answerCacheMillis: options.answerCacheMillis ?? 60000,
      cipher: options.cipher ?? null
    }
  }

  /** Opens the broker `options.name` in this global: as the writer if nobody else is, else as a follower. */
  static async open(options = {}) {
    if (!options || typeof options.name !== 'string' || options.name === '') {
      throw new QueenError('invalid', 'Queen.open needs a name: Queen.open({ name: "app" })')
    }
    if (!['strict', 'relaxed', 'default'].includes(options.durability ?? 'strict')) {
      throw new QueenError('invalid', 'durability must be "strict", "relaxed" or "default"')
    }
    const encryption = await cipher(options.encryptionKey)
    const Broker = await loadWasm(options.wasmUrl, options.views === true)
    const transport = new LocalTransport({ ...options, cipher: encryption }, Broker)
    await transport.#start()
    return transport
  }

  get name() {
    return this.#name
  }

  /** `'writer'` (this global holds the database) or `'follower'` (requests go to the writer). */
  get role() {
    return this.#role
  }

  /** The browser's answer to `navigator.storage.persist()` when this global became the writer. */
  get persisted() {
    return this.#persisted
  }

  /** The id of the writer this transport last heard from (its own when it is the writer). */
  get writerId() {
    return this.#writerId
  }

  /** This transport's id on the channel. */
  get id() {
    return this.#id
  }

  /** The last error of a failed takeover (the database could not be opened), or null. */
  get lastError() {
    return this.#lastError
  }

  /** The underlying broker while this global is the writer (internal; for benchmarks and tests). */
  get broker() {
    return this.#broker
  }

  onRoleChange(callback) {
    this.#roleListeners.add(callback)
    return () => this.#roleListeners.delete(callback)
  }

  #lockName() {
    return 'queen-edge:' + this.#name
  }

  async #start() {
    if (typeof BroadcastChannel === 'function') {
      this.#channel = new BroadcastChannel('queen-edge:' + this.#name)
      this.#channel.onmessage = (event) => this.#onMessage(event.data)
    }
    const locks = globalThis.navigator && globalThis.navigator.locks
    let got
    if (!locks || !this.#channel) {
      got = 'no-locks'
    } else {
      try {
        got = await new Promise((resolve, reject) => {
          locks
            .request(this.#lockName(), { ifAvailable: true }, (lock) => {
              if (!lock) {
                resolve(false)
                return undefined
              }
              return new Promise((release) => {
                this.#releaseLock = release
                resolve(true)
              })
            })
            .catch(reject)
        })
      } catch {
        // Web Locks refused here (an opaque origin, e.g. a sandboxed iframe): no other context can share
        // this origin's storage anyway, so act alone.
        got = 'no-locks'
      }
    }
    this.#timers.push(setInterval(() => this.#tick(), this.#options.resendMillis))
    if (typeof globalThis.addEventListener === 'function' && typeof globalThis.document !== 'undefined') {
      // A closing tab: say so while the channel still works, so the writer frees what it claims for us.
      this.#onPageHide = (event) => { if (!event.persisted) this.#post({ t: 'gone', from: this.#id }) }
      globalThis.addEventListener('pagehide', this.#onPageHide)
    }
    if (got === true || got === 'no-locks') {
      try {
        await this.#becomeWriter()
      } catch (error) {
        this.#shutdown()
        throw asQueenError(error)
      }
    } else {
      this.#setRole('follower')
      this.#post({ t: 'hello', from: this.#id })
      this.#queueForLock()
    }
  }

  #queueForLock() {
    const locks = globalThis.navigator.locks
    locks
      .request(this.#lockName(), { signal: this.#lockAbort.signal }, async () => {
        if (this.#closed) return undefined
        try {
          await this.#becomeWriter()
        } catch (error) {
          // The database cannot be opened here (e.g. a newer format): give the lock back and try again
          // later; meanwhile another context may succeed.
          this.#lastError = asQueenError(error)
          for (const entry of this.#pending.values()) {
            if (entry.local) {
              this.#pending.delete(entry.msg.id)
              entry.reject(this.#lastError)
            }
          }
          setTimeout(() => { if (!this.#closed) this.#queueForLock() }, 1000)
          return undefined
        }
        return new Promise((release) => { this.#releaseLock = release })
      })
      .catch(() => {
        // AbortError on close(): nothing to do.
      })
  }

  async #becomeWriter() {
    let broker
    try {
      broker = await this.#Broker.open(this.#name, {
        durability: this.#options.durability,
        persist: this.#options.persist,
        cipher: this.#options.cipher
      })
    } catch (error) {
      throw asQueenError(error)
    }
    if (this.#closed) {
      broker.close()
      broker.free()
      return
    }
    this.#broker = broker
    this.#persisted = broker.persisted
    this.#writerId = this.#id
    this.#lastError = null
    this.#setRole('writer')
    this.#post({ t: 'writer', writer: this.#id })
    if (this.#options.maintenanceIntervalMillis > 0) {
      this.#maintenance = setInterval(() => {
        if (this.#broker) this.#broker.maintain().catch(() => {})
      }, this.#options.maintenanceIntervalMillis)
    }
    // Requests this global had forwarded to the writer that just went away: run them here.
    for (const entry of [...this.#pending.values()]) this.#runPendingLocally(entry)
  }

  #setRole(role) {
    if (this.#role === role) return
    this.#role = role
    for (const callback of this.#roleListeners) {
      try {
        callback(role)
      } catch {
        // A listener's failure is its own.
      }
    }
  }

  #post(message) {
    if (!this.#channel) return
    try {
      this.#channel.postMessage(message)
    } catch {
      // The channel is closed (we are closing).
    }
  }

  /** Sends a request through the broker; `body` is JSON-encoded unless a string. */
  async request(method, path, body, _options) {
    const encoded = encodeBody(body)
    const headers = encoded === undefined ? {} : { 'Content-Type': 'application/json' }
    const response = await this.raw(method, path, headers, encoded === undefined ? undefined : encoder.encode(encoded))
    const text = response.body && response.body.length ? decoder.decode(response.body) : ''
    return { status: response.status, headers: response.headers, body: parseBody(text) }
  }

  /**
   * One request in HTTP shape: `headers` a plain object, `body` a Uint8Array or undefined. Resolves to
   * `{status, headers, body: Uint8Array}`.
   */
  raw(method, path, headers, body) {
    if (this.#closed) return Promise.reject(new QueenError('closed', 'this Queen was closed'))
    if (this.#role === 'writer') return this.#handleLocal(method, path, headers, body)
    return new Promise((resolve, reject) => {
      const id = this.#id + ':' + ++this.#seq
      const now = Date.now()
      const entry = {
        msg: { t: 'req', id, from: this.#id, method, path, headers, body },
        resolve,
        reject,
        acked: null,
        local: false,
        sentAt: now,
        createdAt: now
      }
      this.#pending.set(id, entry)
      this.#post(entry.msg)
    })
  }

  async #handleLocal(method, path, headers, body) {
    const broker = this.#broker
    if (!broker || this.#closed) throw new QueenError('closed', 'this Queen was closed')
    let response
    try {
      response = await broker.handle(method, path, headers, body)
    } catch (error) {
      throw asQueenError(error)
    }
    if (this.#closed) throw new QueenError('closed', 'this Queen was closed')
    return response
  }

  #runPendingLocally(entry) {
    if (entry.local) return
    entry.local = true
    const { method, path, headers, body } = entry.msg
    this.#handleLocal(method, path, headers, body).then(
      (response) => this.#settle(entry.msg.id, response, null),
      (error) => this.#settle(entry.msg.id, null, error)
    )
  }

  #settle(id, response, error) {
    const entry = this.#pending.get(id)
    if (!entry) return
    this.#pending.delete(id)
    if (error) entry.reject(error)
    else entry.resolve(response)
  }

  #tick() {
    const now = Date.now()
    if (this.#role !== 'writer') {
      for (const entry of [...this.#pending.values()]) {
        if (entry.local || entry.acked) continue
        if (now - entry.createdAt > this.#options.noWriterTimeoutMillis) {
          const reason = this.#lastError ? ': ' + this.#lastError.message : ''
          this.#settle(entry.msg.id, null, new QueenError('no_writer',
            `no tab or worker serving "${this.#name}" answered within ${this.#options.noWriterTimeoutMillis} ms${reason}`))
          continue
        }
        if (now - entry.sentAt >= this.#options.resendMillis * 4) {
          entry.sentAt = now
          this.#post(entry.msg)
        }
      }
    }
    for (const [id, served] of this.#served) {
      if (served.response && now - served.at > this.#options.answerCacheMillis) this.#served.delete(id)
    }
  }

  #onMessage(data) {
    if (!data || typeof data !== 'object' || this.#closed) return
    switch (data.t) {
      case 'hello':
        if (this.#role === 'writer') this.#post({ t: 'writer', writer: this.#id })
        break
      case 'writer':
        if (data.writer === this.#id) break
        this.#writerId = data.writer
        if (this.#role !== 'writer') {
          for (const entry of this.#pending.values()) {
            if (entry.local || entry.acked === data.writer) continue
            entry.acked = null
            entry.sentAt = Date.now()
            this.#post(entry.msg)
          }
        }
        break
      case 'req':
        if (this.#role === 'writer') this.#serveForwarded(data)
        break
      case 'gone':
        if (this.#gone.size > 1000) this.#gone.clear()
        this.#gone.add(data.from)
        break
      case 'ack':
        if (data.to === this.#id) {
          const entry = this.#pending.get(data.id)
          if (entry) {
            entry.acked = data.writer
            this.#writerId = data.writer
          }
        }
        break
      case 'res':
        if (data.to === this.#id) {
          this.#settle(data.id, { status: data.status, headers: data.headers, body: data.body }, null)
        }
        break
      default:
        break
    }
  }

  #serveForwarded(req) {
    const known = this.#served.get(req.id)
    if (known) {
      if (known.response) this.#post({ t: 'res', id: req.id, to: req.from, writer: this.#id, ...known.response })
      else this.#post({ t: 'ack', id: req.id, to: req.from, writer: this.#id })
      return
    }
    const served = { at: Date.now(), response: null }
    this.#served.set(req.id, served)
    this.#post({ t: 'ack', id: req.id, to: req.from, writer: this.#id })
    this.#handleLocal(req.method, req.path, req.headers, req.body).then(
      (response) => {
        if (this.#closed) return
        if (this.#gone.has(req.from)) {
          this.#releaseOrphanedPop(req, response)
          return
        }
        served.response = { status: response.status, headers: response.headers, body: response.body }
        served.at = Date.now()
        this.#post({ t: 'res', id: req.id, to: req.from, writer: this.#id, ...served.response })
      },
      (error) => {
        // Closing: say nothing, the follower re-sends to the next writer.
        if (this.#closed) return
        const err = asQueenError(error)
        served.response = {
          status: err.code === 'quota_exceeded' ? 507 : 503,
          headers: { 'Content-Type': 'application/json' },
          body: encoder.encode(JSON.stringify({ error: err.message, code: err.code }))
        }
        served.at = Date.now()
        this.#post({ t: 'res', id: req.id, to: req.from, writer: this.#id, ...served.response })
      }
    )
  }

  /** A pop answered for a follower that is gone: give its messages back (`retry`: no retry charged). */
  #releaseOrphanedPop(req, response) {
    if (req.method !== 'GET' || !String(req.path).startsWith('/api/v1/pop') || response.status !== 200) return
    let body
    try {
      body = JSON.parse(decoder.decode(response.body))
    } catch {
      return
    }
    const messages = (body && Array.isArray(body.messages) ? body.messages : []).filter((m) => m && m.leaseId)
    if (!messages.length) return
    const groups = new Map()
    for (const m of messages) {
      const group = m.consumerGroup || '__QUEUE_MODE__'
      if (!groups.has(group)) groups.set(group, [])
      groups.get(group).push({ transactionId: m.transactionId, partitionId: m.partitionId, status: 'retry', leaseId: m.leaseId })
    }
    for (const [consumerGroup, acknowledgments] of groups) {
      const payload = encoder.encode(JSON.stringify({ acknowledgments, consumerGroup }))
      this.#handleLocal('POST', '/api/v1/ack/batch', { ...req.headers, 'Content-Type': 'application/json' }, payload)
        .catch(() => {})
    }
  }

  #shutdown() {
    this.#closed = true
    for (const timer of this.#timers) clearInterval(timer)
    this.#timers = []
    if (this.#maintenance) clearInterval(this.#maintenance)
    this.#maintenance = null
    if (this.#broker) {
      this.#broker.close()
      this.#broker = null
    }
    if (this.#releaseLock) this.#releaseLock()
    this.#releaseLock = null
    this.#lockAbort.abort()
    if (this.#onPageHide) globalThis.removeEventListener('pagehide', this.#onPageHide)
    this.#onPageHide = null
    if (this.#channel) this.#channel.close()
    this.#channel = null
  }

  /**
   * Closes this context's part: a writer fences its broker (nothing more reaches IndexedDB) and gives the
   * lock to the next waiting context; requests still pending here reject with code `closed`.
   */
  close() {
    if (this.#closed) return
    if (this.#role === 'follower') this.#post({ t: 'gone', from: this.#id })
    this.#shutdown()
    for (const entry of this.#pending.values()) entry.reject(new QueenError('closed', 'this Queen was closed'))
    this.#pending.clear()
    this.#setRole('closed')
  }
}

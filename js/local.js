// The in-browser transport: one writer per database across tabs and workers.
//
// Who writes. Every page or worker that opens the broker `name` talks to the others on the
// BroadcastChannel `queen-edge:<name>`; one of them is the writer: it opens the broker on IndexedDB
// (WasmBroker), serves its own requests locally and answers the others'. The others are followers: they
// forward each request on the channel with a unique id and wait for the answer.
// - With Web Locks, the writer is the holder of the lock `queen-edge:<name>` (held with a promise that
//   settles only on close(), so the browser releases it when the tab or worker goes away). Followers keep a
//   lock request queued, so when the writer goes away one of them becomes the writer.
// - Without Web Locks (a non-secure origin, e.g. plain http on a LAN address), the election goes through
//   the storage fence: a context asks who the writer is (`hello`) and, when nobody answers within
//   `resendMillis`, claims writership itself. A follower claims too when its forwarded request is not
//   acknowledged within `claimAfterMillis`, and soon after its writer says it is going away (`gone`).
// - Either way storage has the last word. Opening a WasmBroker takes over the writer epoch in IndexedDB
//   (the database's version goes up by one, and IndexedDB first closes every other connection: src/store/
//   idb.rs, "Fencing"): a writer that another context took over from cannot write any more. A take-over
//   that a connection which does not close holds back waits; `onBlocked` (Queen.open's option) says so.
//   IndexedDB tells only the held-back open (`blocked`); opens queued behind it wait as long with no event,
//   so a held-back context says so on the channel, and a context whose own open is pending reports that.
//   The stale writer's refused commit wrote nothing, so the request is not answered: the writer steps
//   down to follower (closing its broker; a later takeover loads everything from storage again) and
//   forwards its own requests to the current writer; forwarded ones are re-sent by their followers. Two
//   contexts that both claimed (both opened at once) settle the same way: the higher epoch stays writer.
//   The epoch travels as `version` (the database version); earlier builds sent a counter of their own as
//   `epoch`, which this build ignores (their claims are not comparable with ours).
//
// Channel messages (structured clone):
//   {t:'hello', from}                                   who is the writer?
//   {t:'writer', writer, version}                        "I am the writer" (on takeover and on hello)
//   {t:'req', id, from, method, path, headers, body}     a forwarded request (body: string | Uint8Array | undefined)
//   {t:'ack', id, to, writer}                            the writer has it and is working on it
//   {t:'res', id, to, writer, status, headers, body}     the answer
//   {t:'gone', from, deleted?}                           a context closed (or its page is going away); `deleted`: the
//                                                        writer's database was deleted (why, the error's message):
//                                                        its followers close too
//   {t:'blocked', from, blocked}                         its take-over is held back (true; on hello too), or no longer (false)
//
// Delivery: a follower re-sends a request every `resendMillis` × 4 until a writer acks it, keeps re-sending
// it at that pace after the ack (the writer acks again: it is alive and working on it), and re-sends every
// request not yet answered when a different writer announces itself. The writer never runs one id twice: a
// duplicate gets the ack again, or the answer it remembers. Forwarded requests are recorded: the writer
// commits what a request writes together with its answer under the request's id (src/bindings/mod.rs), so when a
// writer dies after committing but before answering, the next writer (or the follower itself, taking over)
// answers the retry from that record instead of running it again: an ack is not reported failed, a pop
// returns the messages and lease it took instead of leasing others (except a pop whose answer holds
// payloads of an encrypted queue: that answer is not stored, in plain text or at all, so its retry fails
// with 503 and its messages come again after their lease). A forwarded request fails with
// `timeout` when its writer stops acknowledging it for `noWriterTimeoutMillis` (a hung writer), or when no
// answer came within `noWriterTimeoutMillis` plus the request's own long-poll time; its outcome is then
// unknown. Ids start with their creation time (ms, 15 digits): recorded answers are kept 10 minutes.
//
// A follower that goes away with a long-poll parked at the writer says so ('gone'); when that pop later
// claims messages, the writer gives them back at once (a `retry` ack: no retry charged) instead of
// leaving them leased to nobody until the lease expires.

import init, { WasmBroker } from './pkg/queen_edge.js'
import { MAYBE_APPLIED, QueenError, asQueenError } from './errors.js'
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
      const why = lacksWasmSimd() ? ': this browser lacks WebAssembly SIMD, which the module is built with ' +
        '(Chrome 91, Firefox 89, Safari 16.4 or later)' : ''
      throw new QueenError('unavailable', `could not load the ${which}${why}: ` + (error.message || error),
        { cause: error })
    })
  }
  return wasmReady[kind]
}

// The smallest module that uses a SIMD instruction (`i8x16.splat` then `i8x16.popcnt`; wasm-feature-detect's
// probe): checked only after a load failed, to say why.
const SIMD_PROBE = [0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0, 65, 0, 253, 15,
  253, 98, 11]

/** True when this runtime's WebAssembly rejects SIMD instructions (scripts/build-js builds with simd128). */
export function lacksWasmSimd() {
  try {
    return !WebAssembly.validate(new Uint8Array(SIMD_PROBE))
  } catch {
    return false
  }
}

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/** `Queen.open`'s number options: times (`...Millis`) and byte counts. */
const NUMBER_OPTIONS = ['resendMillis', 'noWriterTimeoutMillis', 'answerCacheMillis', 'claimAfterMillis',
  'maintenanceIntervalMillis', 'maxStoredBytes', 'cacheBytes']
/** `Queen.open`'s options (index.d.ts, OpenOptions). */
const OPEN_OPTIONS = [...NUMBER_OPTIONS, 'name', 'durability', 'persist', 'onBlocked', 'views', 'encryptionKey',
  'wasmUrl', 'bridge']

/** The `closed` error's message for a request close() interrupted before anything of it was written. */
const NOT_WRITTEN = 'this Queen was closed; nothing of the request was written'

/** How long a long-poll pop at `path` may wait at the writer, ms (0 for anything else). */
function longPollMillis(path) {
  const query = String(path).split('?')[1]
  if (!query) return 0
  const params = new URLSearchParams(query)
  const wait = params.get('wait')
  return wait === 'true' || wait === '1' ? Number(params.get('timeout')) || 30000 : 0
}

function randomId() {
  const bytes = new Uint8Array(8)
  globalThis.crypto.getRandomValues(bytes)
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')
}

/**
 * Deletes the IndexedDB database of broker `name`: every Queen open on it closes (#watch), rejecting its
 * calls with code `closed` saying so. With
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
 * browser's Web Crypto. The wasm calls `seal(jsonTexts)` and `open(envelopeTexts)` (src/bindings/cipher.rs);
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
  // 'locks' (Web Locks elect), 'fence' (no Web Locks: elect through the storage fence) or 'alone' (no
  // channel, or Web Locks refused in an opaque origin: nothing else can reach this storage).
  #mode = 'locks'
  #broker = null
  #epoch = 0
  #writerEpoch = 0
  #claiming = false
  #writerGoneAt = 0
  #claimDelay = 0
  #onWriterHeard = null
  #persisted = undefined
  #writerId = null
  #pending = new Map()
  #served = new Map()
  #releaseLock = null
  #lockAbort = new AbortController()
  #closed = false
  // close(): resolves its promise once the requests this context's broker was running have their answers.
  #onDrained = null
  #closing = null
  #timers = []
  #maintenance = null
  #roleListeners = new Set()
  #lastError = null
  #blocked = false
  // This context's own open was held back (IndexedDB's `blocked`); the ids of contexts whose open is held
  // back (their `blocked` messages), which hold back ours too while ours is pending (#opening).
  #ownBlocked = false
  #othersBlocked = new Set()
  #opening = false
  #gone = new Set()
  #onPageHide = null
  // The writer's own connection to its database, watching for a deletion (#watch); why this Queen is closed.
  #watcher = null
  #why = 'this Queen was closed'
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
      maxStoredBytes: options.maxStoredBytes,
      cacheBytes: options.cacheBytes,
      claimAfterMillis: options.claimAfterMillis ?? 2000,
      onBlocked: typeof options.onBlocked === 'function' ? options.onBlocked : null,
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
    // A misspelt option would run as its default without a word (a quota turned off, say).
    for (const name of Object.keys(options)) {
      if (!OPEN_OPTIONS.includes(name)) throw new QueenError('invalid', `Queen.open has no option ${name}`)
    }
    // Checked in every context: a follower's bad value would otherwise fail only when it takes over (a
    // byte count), or never time out (a time as text).
    for (const name of NUMBER_OPTIONS) {
      const value = options[name]
      const millis = name.endsWith('Millis')
      if (value != null && !(typeof value === 'number' && value >= 0 && (millis || Number.isSafeInteger(value)))) {
        throw new QueenError('invalid', `${name} must be ${millis ? 'a number of milliseconds' : 'a whole number of bytes'}`)
      }
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

  /**
   * True while this context's take-over of the database waits for another tab or worker that keeps it
   * open (it does not close when asked: an older build's page, page code or DevTools holding their own
   * connection), or is queued behind another context's take-over that waits so. Nothing is written
   * meanwhile by this context; the holder still writes.
   */
  get blocked() {
    return this.#blocked
  }

  /** The last error of a failed takeover (the database could not be opened), or null. */
  get lastError() {
    return this.#lastError
  }

  /**
   * True: an item pushed without a `transactionId` gets a fresh UUIDv7 from the broker (internal, read by the
   * fluent client). Over HTTP the client makes one, so that a request sent again after a lost answer is
   * deduplicated; here a request is never sent again as a new push (one sent on to the writer again
   * carries its request id and is answered from its record), so an id made by the client would only cost
   * the broker its duplicate look-ups for an id that cannot be a duplicate.
   */
  get mintsIds() {
    return true
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
    if (!this.#channel) {
      got = 'alone'
    } else if (!locks) {
      got = 'fence'
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
        got = 'alone'
      }
    }
    this.#mode = got === 'alone' || got === 'fence' ? got : 'locks'
    this.#timers.push(setInterval(() => this.#tick(), this.#options.resendMillis))
    if (typeof globalThis.addEventListener === 'function' && typeof globalThis.document !== 'undefined') {
      // A closing tab: say so while the channel still works, so the writer frees what it claims for us
      // (or, from the writer, so followers without Web Locks claim at once).
      this.#onPageHide = (event) => { if (!event.persisted) this.#post({ t: 'gone', from: this.#id }) }
      globalThis.addEventListener('pagehide', this.#onPageHide)
    }
    if (got === 'fence') {
      // Ask first; claim only when no writer answers.
      await new Promise((resolve) => {
        this.#onWriterHeard = resolve
        this.#post({ t: 'hello', from: this.#id })
        setTimeout(resolve, this.#options.resendMillis)
      })
      this.#onWriterHeard = null
    }
    if (got === true || got === 'alone' || (got === 'fence' && !this.#writerId)) {
      try {
        await this.#becomeWriter()
      } catch (error) {
        this.#shutdown()
        throw asQueenError(error)
      }
    }
    if (this.#role !== 'writer') {
      // Holding the lock without being the writer (another context claimed while this one opened):
      // give it back before queueing for it.
      if (this.#releaseLock) this.#releaseLock()
      this.#releaseLock = null
      this.#setRole('follower')
      if (got !== 'fence') this.#post({ t: 'hello', from: this.#id })
      if (this.#mode === 'locks') this.#queueForLock()
      // Nobody to forward to: take over again.
      if (this.#mode === 'alone') this.#claim()
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
          for (const entry of [...this.#pending.values()]) {
            if (entry.local) this.#settle(entry.msg.id, null, this.#lastError)
          }
          setTimeout(() => { if (!this.#closed) this.#queueForLock() }, 1000)
          return undefined
        }
        if (this.#role !== 'writer') {
          // Not the writer after all (a context outside the lock claimed meanwhile): give the lock back.
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
    if (this.#role === 'writer') return
    let broker
    this.#opening = true
    this.#updateBlocked()
    try {
      broker = await this.#Broker.open(this.#name, {
        durability: this.#options.durability,
        persist: this.#options.persist,
        maxStoredBytes: this.#options.maxStoredBytes,
        cacheBytes: this.#options.cacheBytes,
        cipher: this.#options.cipher,
        onBlocked: (blocked) => this.#onBlocked(blocked)
      })
    } catch (error) {
      // Another context claimed the database while this one was opening it: that one is the writer.
      if (error && error.code === 'superseded') return
      throw asQueenError(error)
    } finally {
      // IndexedDB handles open requests in order: every open queued before ours has ended too.
      this.#opening = false
      this.#othersBlocked.clear()
      this.#updateBlocked()
    }
    if (this.#closed || this.#role === 'writer' || broker.epoch < this.#writerEpoch) {
      // Closed meanwhile, or another context took over after our claim (its announcement came first).
      broker.close()
      broker.free()
      return
    }
    this.#broker = broker
    this.#persisted = broker.persisted
    this.#writerId = this.#id
    this.#epoch = broker.epoch
    this.#writerEpoch = broker.epoch
    this.#lastError = null
    this.#setRole('writer')
    this.#post({ t: 'writer', writer: this.#id, version: this.#epoch })
    this.#watch(broker)
    if (this.#options.maintenanceIntervalMillis > 0) {
      this.#maintenance = setInterval(() => {
        const current = this.#broker
        if (!current) return
        current.maintain().catch((error) => {
          if (error && error.code === 'superseded') this.#stepDown(current)
        })
      }, this.#options.maintenanceIntervalMillis)
    }
    // Requests this global had forwarded to the writer that just went away: run them here.
    for (const entry of [...this.#pending.values()]) this.#runPendingLocally(entry)
  }

  /**
   * Watches `broker`'s database with a connection of this context's own (the broker's is inside the wasm,
   * which closes it on any version change and then only refuses calls): IndexedDB sends it `versionchange`
   * with no new version when the database is deleted, and `close` when the browser drops it (site data
   * cleared). Either closes this Queen, and its followers (they hear `gone` with `deleted`), so the lock is
   * free for a fresh Queen.open. A new version is another context's take-over: only the watcher closes.
   */
  #watch(broker) {
    const request = indexedDB.open(this.#name)
    const deleted = () => {
      if (this.#broker === broker) {
        this.#close(`database "${this.#name}" was deleted (Queen.deleteDatabase or site data cleared): ` +
          'this Queen is closed; Queen.open starts an empty one')
      }
    }
    // Deleted since the broker opened it: do not make an empty one.
    request.onupgradeneeded = () => { request.transaction.abort(); deleted() }
    request.onsuccess = () => {
      const db = request.result
      db.onversionchange = (event) => { db.close(); if (event.newVersion === null) deleted() }
      db.onclose = deleted
      if (this.#broker === broker) this.#watcher = db
      else db.close()
    }
  }

  /**
   * No longer the writer (another context took over `broker`'s database): fence the broker, which is
   * never used again, and follow. In-flight requests on it fail without writing and are sent on.
   */
  #stepDown(broker) {
    if (this.#role !== 'writer' || this.#broker !== broker) return
    this.#broker = null
    broker.close()
    this.#watcher?.close()
    if (this.#maintenance) clearInterval(this.#maintenance)
    this.#maintenance = null
    this.#writerId = null
    this.#setRole('follower')
    if (this.#mode === 'locks') {
      if (this.#releaseLock) this.#releaseLock()
      this.#releaseLock = null
      this.#queueForLock()
    } else if (this.#mode === 'alone') {
      // Nobody to forward to: take over again (reloading from storage) and run what is pending here.
      this.#claim()
    }
    this.#post({ t: 'hello', from: this.#id })
  }

  /** Takes over without a lock (modes 'fence' and 'alone'); a failure is kept in lastError. */
  #claim() {
    if (this.#claiming || this.#closed || this.#role === 'writer') return
    this.#claiming = true
    this.#becomeWriter().then(
      () => { this.#claiming = false },
      (error) => {
        this.#claiming = false
        this.#lastError = asQueenError(error)
      }
    )
  }

  /** IndexedDB held back this context's own open (true), or let it through (false): tell the others too. */
  #onBlocked(blocked) {
    this.#ownBlocked = blocked
    this.#post({ t: 'blocked', from: this.#id, blocked })
    this.#updateBlocked()
  }

  /** Reports `blocked` when it changed: this context's open is held back, or queued behind one that is. */
  #updateBlocked() {
    const blocked = this.#ownBlocked || (this.#opening && this.#othersBlocked.size > 0)
    if (this.#blocked === blocked) return
    this.#blocked = blocked
    const listener = this.#options.onBlocked
    if (!listener) return
    try {
      listener(blocked)
    } catch {
      // A listener's failure is its own.
    }
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

  /**
   * Sends a request through the broker; `body` is JSON-encoded unless a string. The text goes to the
   * broker as it is (the wasm glue writes it straight into wasm memory): no encoded copy in between.
   * No headers: the broker reads a body as JSON whatever its `Content-Type` says (the header only refuses
   * Queen's binary protocols), and the glue reads every header into wasm, call after call.
   */
  async request(method, path, body, _options) {
    const encoded = encodeBody(body)
    const response = await this.raw(method, path, undefined, encoded)
    const text = response.body && response.body.length ? decoder.decode(response.body) : ''
    return { status: response.status, headers: response.headers, body: parseBody(text) }
  }

  /**
   * One request in HTTP shape: `headers` a plain object or undefined, `body` a string (sent as UTF-8), a
   * Uint8Array or undefined. Resolves to `{status, headers, body: Uint8Array}`.
   */
  raw(method, path, headers, body) {
    if (this.#closed) return Promise.reject(new QueenError('closed', this.#why))
    return new Promise((resolve, reject) => {
      const now = Date.now()
      const id = String(now).padStart(15, '0') + ':' + this.#id + ':' + ++this.#seq
      const entry = {
        // giveUpAt: when this context stops waiting for a writer to take the request; a writer reached later
        // leaves it alone (#serveForwarded), so that `no_writer` means it was not applied.
        // keyed: this context has an encryptionKey, so it expects payloads in plain text (#serveForwarded).
        msg: { t: 'req', id, from: this.#id, method, path, headers, body, giveUpAt: now + this.#options.noWriterTimeoutMillis, keyed: this.#options.cipher != null },
        resolve,
        reject,
        acked: null,
        ackedAt: 0,
        local: false,
        forwarded: false,
        sentAt: now,
        forwardedAt: now,
        createdAt: now,
        deadline: now + this.#options.noWriterTimeoutMillis + longPollMillis(path),
        attempts: 0
      }
      this.#pending.set(id, entry)
      if (this.#role === 'writer') this.#runPendingLocally(entry)
      else this.#forward(entry)
    })
  }

  /** Sends a pending request to the writer (again). */
  #forward(entry) {
    entry.forwarded = true
    entry.acked = null
    entry.sentAt = entry.forwardedAt = Date.now()
    this.#post(entry.msg)
  }

  /**
   * Runs one request on the writer's broker, recorded under `requestId` when given (see the top of this
   * file). Resolves to the answer, or to null when the broker was superseded (another context took over;
   * nothing of the request was written): the caller sends the request on. Rejects with the request's own
   * failure.
   */
  async #handleLocal(method, path, headers, body, requestId) {
    const broker = this.#broker
    if (!broker || this.#closed) throw new QueenError('closed', this.#why)
    let response
    try {
      response = await broker.handle(method, path, headers, body, requestId)
    } catch (error) {
      const err = asQueenError(error)
      // After this context's close(), the fenced store refused it before writing anything.
      if (this.#closed && err.code === 'unavailable') throw new QueenError('closed', NOT_WRITTEN)
      if (err.code !== 'superseded') throw err
      response = null
    }
    // Closed meanwhile: a commit that was in flight finished, and its answer is delivered as it is; a
    // failure (the fenced store refused it, a 5xx) or a takeover wrote nothing.
    if (this.#closed) {
      if (!response || response.status >= 500) throw new QueenError('closed', NOT_WRITTEN)
      return response
    }
    // A failure on a broker this context stepped down from meanwhile: its store was fenced, so the
    // request was refused before writing anything.
    if (response && response.status >= 500 && this.#broker !== broker) response = null
    if (!response) this.#stepDown(broker)
    return response
  }

  #runPendingLocally(entry) {
    if (entry.local) return
    entry.local = true
    const { method, path, headers, body, id } = entry.msg
    // Once forwarded, a writer that died may have run it: recorded, so its record answers it here.
    this.#handleLocal(method, path, headers, body, entry.forwarded ? id : undefined).then(
      (response) => {
        if (response) {
          this.#settle(entry.msg.id, response, null)
        } else if (entry.attempts++ >= 5) {
          this.#settle(entry.msg.id, null, new QueenError('superseded',
            `other tabs or workers kept taking over "${this.#name}"; nothing of this request was written`))
        } else if (this.#closed) {
          this.#settle(entry.msg.id, null, new QueenError('closed', NOT_WRITTEN))
        } else if (this.#pending.has(entry.msg.id)) {
          // Not written: send it to whoever is the writer now (or run it here if that is us again).
          entry.local = false
          if (this.#role === 'writer') this.#runPendingLocally(entry)
          else this.#forward(entry)
        }
      },
      (error) => this.#settle(entry.msg.id, null, error)
    )
  }

  #settle(id, response, error) {
    const entry = this.#pending.get(id)
    if (!entry) return
    this.#pending.delete(id)
    if (error) entry.reject(error)
    else entry.resolve(response)
    if (this.#closed && this.#pending.size === 0 && this.#onDrained) this.#onDrained()
  }

  #tick() {
    const now = Date.now()
    if (this.#role === 'follower') {
      let claim = false
      for (const entry of [...this.#pending.values()]) {
        if (entry.local) continue
        if (entry.acked) {
          // Acknowledged: keep asking, so a writer that died or hangs is noticed (it acks every re-send).
          const silent = now - entry.ackedAt
          if (silent > this.#options.noWriterTimeoutMillis || now > entry.deadline) {
            this.#settle(entry.msg.id, null, new QueenError('timeout',
              `the writer of "${this.#name}" ${now > entry.deadline ? 'did not answer in time' : 'stopped answering'}; ` +
              'the request may or may not have been applied'))
            continue
          }
          if (silent >= this.#options.claimAfterMillis) claim = true
        } else {
          // After giveUpAt no writer takes it; the re-send interval more lets an acknowledgement sent just
          // before it arrive.
          if (now > entry.msg.giveUpAt + this.#options.resendMillis * 4) {
            const reason = this.#lastError ? ': ' + this.#lastError.message : ''
            this.#settle(entry.msg.id, null, new QueenError('no_writer',
              `no tab or worker serving "${this.#name}" answered within ${this.#options.noWriterTimeoutMillis} ms${reason}; ` +
              'the request was not applied'))
            continue
          }
          if (now - entry.forwardedAt >= this.#options.claimAfterMillis) claim = true
        }
        if (now - entry.sentAt >= this.#options.resendMillis * 4) {
          entry.sentAt = now
          this.#post(entry.msg)
        }
      }
      // Without Web Locks a follower elects itself: when the writer does not acknowledge, or soon after
      // it left (a random delay, so several followers rarely claim at once; if they do, the fence decides).
      if (this.#mode === 'fence' && (claim ||
          (this.#writerId === null && this.#writerGoneAt && now - this.#writerGoneAt >= this.#claimDelay))) {
        this.#writerGoneAt = 0
        this.#claim()
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
        if (this.#role === 'writer') this.#post({ t: 'writer', writer: this.#id, version: this.#epoch })
        if (this.#ownBlocked) this.#post({ t: 'blocked', from: this.#id, blocked: true })
        break
      case 'blocked':
        if (data.from === this.#id) break
        if (data.blocked) this.#othersBlocked.add(data.from)
        else this.#othersBlocked.delete(data.from)
        this.#updateBlocked()
        break
      case 'writer': {
        if (data.writer === this.#id) break
        const epoch = typeof data.version === 'number' ? data.version : 0
        if (this.#role === 'writer') {
          // Two writers: the one that took over last holds the database; the other steps down.
          if (epoch > this.#epoch) {
            this.#stepDown(this.#broker)
          } else {
            this.#post({ t: 'writer', writer: this.#id, version: this.#epoch })
            break
          }
        }
        // An announcement from a writer older than the one we know (it has not noticed yet).
        if (epoch < this.#writerEpoch) break
        this.#writerId = data.writer
        this.#writerEpoch = epoch
        this.#writerGoneAt = 0
        if (this.#onWriterHeard) this.#onWriterHeard()
        if (this.#role !== 'writer') {
          for (const entry of this.#pending.values()) {
            if (entry.local || entry.acked === data.writer) continue
            this.#forward(entry)
          }
        }
        break
      }
      case 'req':
        if (this.#role === 'writer') {
          this.#serveForwarded(data)
        } else {
          // A writer that stepped down still knows the answers it gave.
          const known = this.#served.get(data.id)
          if (known && known.response) this.#post({ t: 'res', id: data.id, to: data.from, writer: this.#id, ...known.response })
        }
        break
      case 'gone':
        // Its database was deleted: so is this Queen's.
        if (data.deleted && data.from === this.#writerId) return this.#close(data.deleted)
        if (data.from === this.#writerId && this.#role !== 'writer') {
          this.#writerId = null
          this.#writerGoneAt = Date.now()
          this.#claimDelay = Math.random() * this.#options.resendMillis * 2
        }
        if (this.#gone.size > 1000) this.#gone.clear()
        this.#gone.add(data.from)
        this.#othersBlocked.delete(data.from)
        this.#updateBlocked()
        break
      case 'ack':
        if (data.to === this.#id) {
          const entry = this.#pending.get(data.id)
          if (entry) {
            entry.acked = data.writer
            entry.ackedAt = Date.now()
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
    // Its sender has given up on it (`no_writer`, which says it was not applied): a writer stalled that
    // long (a modal dialog, a debugger) leaves it alone.
    if (Date.now() > req.giveUpAt) return
    const served = { at: Date.now(), response: null }
    this.#served.set(req.id, served)
    this.#post({ t: 'ack', id: req.id, to: req.from, writer: this.#id })
    // A keyed tab's request: a broker without the key refuses it unrun, after answering a retry of one
    // another writer ran from its record (src/bindings `handle`).
    const headers = req.keyed ? { ...req.headers, 'x-queen-keyed': '1' } : req.headers
    this.#handleLocal(req.method, req.path, headers, req.body, req.id).then(
      (response) => {
        if (this.#closed) return
        if (!response) {
          // Superseded: nothing was written; the follower re-sends it to the writer that took over.
          this.#served.delete(req.id)
          return
        }
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
    this.#watcher?.close()
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
   * lock to the next waiting context. Requests made later reject with code `closed`. Of the requests still
   * pending, those this context's broker is running get their own answers (a commit already under way
   * finishes and its request succeeds; those the fenced store refused reject with code `closed`, saying
   * nothing of them was written), and the promise resolves once they have them. The others reject with code
   * `closed` at once, saying that their outcome is unknown: a request sent to the writer of another tab or
   * worker, and a long-poll pop (whose messages' lease then expires), may or may not have been applied.
   */
  close() {
    return this.#close()
  }

  /** close(), or with `why` (its database was deleted): every pending request and later one rejects with it. */
  #close(why) {
    if (this.#closed) return this.#closing
    this.#post({ t: 'gone', from: this.#id, deleted: why })
    this.#shutdown()
    if (why) this.#why = why
    for (const entry of [...this.#pending.values()]) {
      if (!why && entry.local && longPollMillis(entry.msg.path) === 0) continue
      this.#pending.delete(entry.msg.id)
      entry.reject(new QueenError('closed', why || MAYBE_APPLIED))
    }
    this.#closing = this.#pending.size === 0 ? Promise.resolve() : new Promise((resolve) => { this.#onDrained = resolve })
    this.#setRole('closed')
    return this.#closing
  }
}

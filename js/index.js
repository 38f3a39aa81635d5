// queen-edge: a Queen MQ broker in the browser (IndexedDB), with Queen's fluent JS API.
//
//   import { Queen } from 'queen-edge'
//   const queen = await Queen.open({ name: 'app' })          // broker in this page, on IndexedDB
//   const remote = Queen.connect('https://broker.example', { token })  // same API over HTTP
//
// Types: index.d.ts. Design: README.md (In the browser) and docs/decisions.md.

import { QueenClient, flushBuffersForClose } from './client.js'
import { HttpTransport } from './http.js'
import { LocalTransport, deleteDatabase as deleteLocalDatabase, loadWasm } from './local.js'
import { QueenError, asQueenError, errorFromResponse } from './errors.js'

export { QueenError } from './errors.js'
export {
  QueueBuilder,
  PushBuilder,
  OperationBuilder,
  ConsumeBuilder,
  DLQBuilder,
  TransactionBuilder,
  Admin,
  QUEUE_DEFAULTS,
  uuidv7
} from './client.js'

/** A Queen client: in-browser broker (`Queen.open`) or HTTP (`Queen.connect`). */
export class Queen extends QueenClient {
  #bridge = null

  /**
   * Opens the broker `name` in this page or worker, on IndexedDB. Across tabs and workers of the
   * origin, one holds the database (the writer) and the others forward to it; see `role`. With
   * `bridge: { url, token, queues }`, pushes to those queues are forwarded to the edge broker at `url`
   * (see `queen.bridge`); the bridge reads its pending count from the view routes, so it loads the
   * views build (`views: false` with a bridge is refused).
   */
  static async open(options) {
    let bridge = null
    let Bridge = null
    const deps = { QueenError, errorFromResponse, asQueenError, HttpTransport }
    if (options && options.bridge !== undefined) {
      // The option check lives in the bridge's chunk, so a page without a bridge downloads neither.
      const chunk = await import('./bridge.js')
      Bridge = chunk.Bridge
      bridge = chunk.bridgeOptions(options.bridge, deps)
      if (options.views === false) {
        throw new QueenError('invalid', 'bridge needs views (its pending count reads the depth view): leave views unset or true')
      }
      options = { ...options, views: true }
    }
    const queen = new Queen(await LocalTransport.open(options))
    if (bridge) queen.#bridge = new Bridge(queen, bridge, deps)
    return queen
  }

  /** The same API over HTTP to a queen-edge worker or a Queen server. */
  static connect(url, options = {}) {
    if (options && options.bridge !== undefined) {
      throw new QueenError('invalid', 'bridge is an option of Queen.open (a broker in this page), not of Queen.connect')
    }
    return new Queen(new HttpTransport(url, options))
  }

  /** The browser-to-edge bridge of `Queen.open({ bridge })`, or null. */
  get bridge() {
    return this.#bridge
  }

  /**
   * Deletes the IndexedDB database of broker `name` and everything in it; every Queen open on it closes
   * (LocalTransport's #watch), and a later Queen.open starts on a new, empty one.
   */
  static deleteDatabase(name, options) {
    return deleteLocalDatabase(name, options)
  }

  /** `'writer'`, `'follower'`, `'closed'` (in-browser) or `'remote'` (HTTP). */
  get role() {
    const t = this.transport
    return t instanceof LocalTransport ? t.role : 'remote'
  }

  /**
   * In-browser: the answer to `navigator.storage.persist()` when this context became the writer
   * (`true`: storage will not be evicted under pressure; `undefined`: not asked, a follower, or not
   * available here, as in workers). HTTP: `undefined`.
   */
  get persisted() {
    const t = this.transport
    return t instanceof LocalTransport ? t.persisted : undefined
  }

  /** The broker name (in-browser) or base URL (HTTP). */
  get name() {
    const t = this.transport
    return t instanceof LocalTransport ? t.name : t.url
  }

  /** Calls `callback(role)` whenever `role` changes (a follower taking over). Returns an unsubscribe function. */
  onRoleChange(callback) {
    const t = this.transport
    return t instanceof LocalTransport ? t.onRoleChange(callback) : () => {}
  }

  /**
   * Stops this client: sends what `.buffer()` holds first (up to 30 s; rejects, after closing, when
   * some could not be sent). In-browser, a writer hands the database to the next tab or worker, and
   * resolves once the requests its broker was running have their answers (LocalTransport.close).
   */
  async close() {
    try {
      await flushBuffersForClose(this)
    } finally {
      if (this.#bridge) await this.#bridge.stop()
      await this.transport.close()
    }
  }
}

const QUEEN_PATH = /^\/(api\/v1\/|health$|metrics$|metrics\/)/

const CORS = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Allow-Methods': 'GET, POST, PUT, DELETE, OPTIONS',
  'Access-Control-Allow-Headers': 'Content-Type, Authorization, X-Queen-Broker'
}

/**
 * Service-worker mode. Returns a fetch handler that answers `/api/v1/*`, `/health` and `/metrics*` of
 * this origin from the in-browser broker `options.name` (returns true), and leaves every other request
 * alone (returns false):
 *
 *   const handle = serveQueen({ name: 'app' })
 *   self.addEventListener('fetch', (event) => { handle(event) })
 */
export function serveQueen(options) {
  if (options && options.bridge !== undefined) {
    throw new QueenError('invalid', 'bridge is an option of Queen.open, not of serveQueen (browsers forbid the views build it needs in a service worker)')
  }
  let opening = null
  const transport = () => {
    if (!opening) {
      opening = LocalTransport.open(options).then((t) => {
        // Closed only when its database was deleted: the next request opens the new one.
        t.onRoleChange((role) => { if (role === 'closed') opening = null })
        return t
      }, (error) => {
        opening = null
        throw error
      })
    }
    return opening
  }
  const origin = globalThis.location ? globalThis.location.origin : null
  // Start loading early: the first request then does not wait for the wasm download.
  loadWasm(options && options.wasmUrl, Boolean(options && options.views === true)).catch(() => {})
  return (event) => {
    const request = event.request
    let url
    try {
      url = new URL(request.url)
    } catch {
      return false
    }
    if (origin && url.origin !== origin) return false
    if (!QUEEN_PATH.test(url.pathname)) return false
    event.respondWith((async () => {
      try {
        const t = await transport()
        const body = request.method === 'GET' || request.method === 'HEAD'
          ? undefined
          : new Uint8Array(await request.arrayBuffer())
        const headers = {}
        request.headers.forEach((value, key) => { headers[key] = value })
        const res = await t.raw(request.method, url.pathname + url.search, headers, body)
        const noBody = res.status === 204 || res.status === 304 || request.method === 'HEAD'
        return new Response(noBody ? null : res.body, { status: res.status, headers: res.headers })
      } catch (error) {
        const err = asQueenError(error)
        return new Response(JSON.stringify({ error: err.message, code: err.code }), {
          status: err.code === 'quota_exceeded' ? 507 : 503,
          headers: { 'Content-Type': 'application/json', ...CORS }
        })
      }
    })())
    return true
  }
}


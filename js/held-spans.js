// The bridge's held-span registry (docs/decisions.md, "The bridge's held-span registry (session 25)").
//
// A bridge holds a span (one partition's leased batch) while it forwards it. A page that goes away gives
// its span back on `pagehide`, but an unload may be cut short before that write lands, and a crashed page
// runs nothing: the span would stay leased for `leaseSeconds`. So every span held is also noted here, in
// localStorage, beside the name of a Web Lock its bridge holds for its whole life (its alive lock). The
// browser drops that lock when the bridge's page is gone, however it went. Then another bridge on the same
// broker gives the span back (`release`, a `retry` ack fenced by the lease id) and forgets the note:
//   - a bridge that starts gives back the notes of bridges whose lock is no longer held;
//   - for each note of a bridge still alive, it waits on that bridge's alive lock (nobody else asks for it,
//     so it is granted exactly when that bridge is gone) and then gives back what that bridge left;
//   - it learns of notes other tabs write later from `storage` events, and waits on their locks too.
// A note is written only after its bridge's alive lock was granted, and notes are read before the held
// locks are asked for, so a note whose lock is not held belongs to a bridge that is gone: a live bridge's
// span is never given back. Without localStorage or Web Locks (a worker, an opaque origin) there is no
// registry, and such spans wait for their leases.
//
// Imported by bridge.js only, so the bundle keeps it in the bridge's chunk.

/** localStorage key prefix of notes: then the broker's name URI-encoded (so that it holds no colon: a
 * broker `a` must not read the notes of a broker `a:b`), a colon and the lease id. */
const NOTE_PREFIX = 'queen-edge-bridge:'
/** Web Lock name prefix of a bridge's alive lock (then a random id). */
const ALIVE_PREFIX = 'queen-edge-bridge-alive:'
/** Error codes of an ack that did not reach the local broker's answer: the note is kept for a later try. */
const NOT_ANSWERED = new Set(['closed', 'no_writer', 'timeout', 'superseded', 'storage', 'unavailable', 'server_error', 'network', 'quota_exceeded'])

/** The notes of the spans one bridge holds, and the give-back of spans dead bridges left. */
export class HeldSpans {
  #storage
  #locks
  #alive
  #prefix
  #release
  #endAlive
  #watched = new Set()
  #unwatch = new AbortController()
  #onStorage = null
  #closed = false

  /**
   * Opens the registry of broker `name` for one bridge: resolves once the bridge's alive lock is held, to a
   * HeldSpans, or to null where localStorage or Web Locks are missing or refused. `release(messages)` gives
   * a span back and resolves to the ack's answer (`{success, results?}`; it never throws). The spans that
   * dead bridges left are given back in the background.
   */
  static async open(name, release) {
    let storage = null
    try {
      storage = globalThis.localStorage ?? null
    } catch {
      // Storage refused (a sandboxed frame): no registry.
    }
    const locks = globalThis.navigator && globalThis.navigator.locks
    if (!storage || !locks) return null
    const alive = ALIVE_PREFIX + Math.random().toString(36).slice(2) + Date.now().toString(36)
    let endAlive
    try {
      await new Promise((granted, refused) => {
        locks.request(alive, () => new Promise((end) => {
          endAlive = end
          granted()
        })).catch(refused)
      })
    } catch {
      return null
    }
    const held = new HeldSpans(storage, locks, alive, NOTE_PREFIX + encodeURIComponent(name) + ':', release, endAlive)
    held.#sweep().catch(() => {})
    return held
  }

  constructor(storage, locks, alive, prefix, release, endAlive) {
    this.#storage = storage
    this.#locks = locks
    this.#alive = alive
    this.#prefix = prefix
    this.#release = release
    this.#endAlive = endAlive
  }

  /**
   * Notes the span `messages` (leased as `leaseId`); best effort (storage full: that span waits for its
   * lease if the page goes away). The note keeps the span's last message: a `retry` ack of it releases the
   * whole lease and keeps the cursor (contract §3.5), even once retention dropped the span's head. One note
   * per lease id, as the bridge's pop claims one partition a lease.
   */
  note(leaseId, messages) {
    if (this.#closed || !leaseId || messages.length === 0) return
    const { transactionId, partitionId } = messages[messages.length - 1]
    try {
      this.#storage.setItem(this.#prefix + leaseId, JSON.stringify({ alive: this.#alive, messages: [{ transactionId, partitionId, leaseId }] }))
    } catch {
      // Storage full.
    }
  }

  /** Forgets the note of `leaseId` (the span was acked, given back, or its lease was lost). */
  forget(leaseId) {
    try {
      this.#storage.removeItem(this.#prefix + leaseId)
    } catch {
      // Storage refused: the note stays, and whoever reads it finds the lease gone.
    }
  }

  /** Ends the bridge's alive lock and stops watching others'. Notes left behind are given back by others. */
  close() {
    if (this.#closed) return
    this.#closed = true
    this.#unwatch.abort()
    if (this.#onStorage) globalThis.removeEventListener('storage', this.#onStorage)
    this.#endAlive()
  }

  /** Gives back the notes of dead bridges; waits on the alive locks of the others, now and as they note. */
  async #sweep() {
    const notes = this.#readNotes()
    const held = new Set((await this.#locks.query()).held.map((lock) => lock.name))
    if (this.#closed) return
    if (typeof globalThis.addEventListener === 'function') {
      this.#onStorage = (event) => {
        if (!event.key || !event.key.startsWith(this.#prefix) || !event.newValue) return
        const noted = parse(event.newValue)
        if (noted) this.#watch(noted.alive)
      }
      globalThis.addEventListener('storage', this.#onStorage)
    }
    const giveBacks = []
    for (const [key, noted] of notes) {
      if (noted && noted.alive === this.#alive) continue
      if (noted && held.has(noted.alive)) this.#watch(noted.alive)
      else giveBacks.push(this.#giveBack(key, noted))
    }
    await Promise.all(giveBacks)
  }

  /** The notes of this broker, as [key, note or null when unreadable]. */
  #readNotes() {
    const notes = []
    for (let i = 0; i < this.#storage.length; i++) {
      const key = this.#storage.key(i)
      if (key && key.startsWith(this.#prefix)) notes.push([key, parse(this.#storage.getItem(key))])
    }
    return notes
  }

  /** Waits for bridge `alive`'s lock (granted once that bridge is gone), then gives back what it left. */
  #watch(alive) {
    if (this.#closed || alive === this.#alive || this.#watched.has(alive)) return
    this.#watched.add(alive)
    this.#locks.request(alive, { signal: this.#unwatch.signal }, async () => {
      if (this.#closed) return
      await Promise.all(this.#readNotes().filter(([, noted]) => noted && noted.alive === alive)
        .map(([key, noted]) => this.#giveBack(key, noted)))
    }).catch(() => {}).finally(() => this.#watched.delete(alive))
  }

  /**
   * Gives back a dead bridge's span and forgets its note once the local broker answered (a refusal means the
   * lease is gone already). When the ack did not get an answer the note stays for the next bridge that
   * starts; the lease ends on its own meanwhile.
   */
  async #giveBack(key, noted) {
    if (noted && Array.isArray(noted.messages)) {
      const answer = await this.#release(noted.messages)
      if (!answer.success && !Array.isArray(answer.results) && NOT_ANSWERED.has(answer.code)) return
    }
    this.forget(key.slice(this.#prefix.length))
  }
}

/** A note's JSON, or null when it is not a note. */
function parse(text) {
  try {
    const noted = JSON.parse(text)
    return noted && typeof noted === 'object' && typeof noted.alive === 'string' ? noted : null
  } catch {
    return null
  }
}

// Errors thrown by queen-edge, with a machine-readable `code`.

/**
 * An error from the broker or the browser, with a `code` a program can switch on:
 * - browser storage: `quota_exceeded`, `unavailable` (no IndexedDB, e.g. some private modes),
 *   `newer_format` (the database was written by a newer queen-edge), `storage` (any other IndexedDB
 *   failure);
 * - broker answers: `bad_request`, `unauthorized`, `forbidden`, `not_found`, `conflict`, `too_large`,
 *   `unsupported`, `not_built` (a view route on a broker opened without `views: true`),
 *   `server_error`;
 * - transport: `network`, `timeout`, `closed` (the Queen was closed: a request made after it was not sent;
 *   one it interrupted may or may not have been applied, and its message says so; or its database was
 *   deleted, and the message says that), `no_writer` (no tab
 *   took the request in time: it was not applied, and a writer that gets to it later leaves it alone);
 * - client side: `invalid` (a call that cannot be sent, e.g. an empty transaction).
 */
/** The `closed` error's message for a request close() interrupted whose outcome is unknown. */
export const MAYBE_APPLIED = 'this Queen was closed; the request may or may not have been applied'

export class QueenError extends Error {
  /**
   * @param {string} code
   * @param {string} message
   * @param {{status?: number, body?: unknown, cause?: unknown}} [extra]
   */
  constructor(code, message, extra = {}) {
    super(message, extra.cause === undefined ? undefined : { cause: extra.cause })
    this.name = 'QueenError'
    this.code = code
    this.status = extra.status
    this.body = extra.body
  }
}

const CODE_BY_STATUS = {
  400: 'bad_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  409: 'conflict',
  413: 'too_large',
  415: 'unsupported',
  501: 'not_built',
  503: 'unavailable',
  507: 'quota_exceeded'
}

/** The QueenError for a non-2xx answer `{status, body}`. */
export function errorFromResponse(response) {
  const { status, body } = response
  const code = CODE_BY_STATUS[status] || (status >= 500 ? 'server_error' : 'http_' + status)
  let message
  if (body && typeof body === 'object' && typeof body.error === 'string') message = body.error
  else if (typeof body === 'string' && body) message = body
  else message = 'HTTP ' + status
  return new QueenError(code, message, { status, body })
}

/** Turns anything thrown into a QueenError (keeps QueenErrors and errors that already carry a code). */
export function asQueenError(error, fallbackCode = 'storage') {
  if (error instanceof QueenError) return error
  if (error && typeof error === 'object' && typeof error.code === 'string') {
    return new QueenError(error.code, error.message || String(error), { cause: error })
  }
  return new QueenError(fallbackCode, (error && error.message) || String(error), { cause: error })
}

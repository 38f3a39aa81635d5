// Options of the browser-to-edge bridge (`Queen.open({ bridge })`), checked before the broker opens.
// The bridge itself (js/bridge.js) is a chunk loaded only when a bridge is asked for.

import { QueenError } from './errors.js'

/** Defaults of the bridge's numeric options. */
export const BRIDGE_DEFAULTS = Object.freeze({
  batch: 100,
  leaseSeconds: 30,
  retryDelayMillis: 1000,
  maxRetryDelayMillis: 60000,
  timeoutMillis: 30000
})
const KNOWN = ['url', 'token', 'queues', ...Object.keys(BRIDGE_DEFAULTS)]

/** Checks `Queen.open`'s `bridge` option; throws QueenError `invalid` naming what is wrong. */
export function bridgeOptions(options) {
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

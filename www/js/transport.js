// Connects to a broker and wraps its `request(method, path, body)` so that every failure becomes an
// ApiError with a message in plain words. Data only flows through the Queen HTTP API.

const MODULE_URL = '/vendor/queen-edge/queen-edge.js';

/** A failed broker call, with `message` written for people. */
export class ApiError extends Error {
  constructor(message, { status = 0, detail = '' } = {}) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.detail = detail;
  }
}

let modulePromise = null;
async function loadModule() {
  modulePromise ??= import(MODULE_URL).catch((e) => {
    modulePromise = null;
    throw new ApiError(
      `The queen-edge JavaScript module could not be loaded from ${MODULE_URL}. ` +
      'Build it with scripts/build-js (scripts/dev does this) and reload the page.',
      { detail: String(e?.message || e) });
  });
  const mod = await modulePromise;
  if (!mod?.Queen) throw new ApiError(`${MODULE_URL} loaded, but it does not export Queen.`);
  return mod.Queen;
}

/**
 * Opens a connection. `settings` = {mode: 'browser', db} or {mode: 'worker', url, token}.
 * Returns {label, request(method, path, body) -> Promise<{status, body}>, close()}.
 */
export async function connect(settings) {
  const Queen = await loadModule();
  let queen;
  let label;
  if (settings.mode === 'worker') {
    const url = normaliseUrl(settings.url);
    try {
      queen = await Queen.connect(url, settings.token ? { token: settings.token } : {});
    } catch (e) {
      throw new ApiError(`Could not set up a connection to ${url}: ${reason(e)}`);
    }
    label = `worker at ${url}`;
  } else {
    const name = (settings.db || '').trim();
    if (!name) throw new ApiError('Give the in-browser database a name.');
    try {
      // views: the dashboard reads the queue listings and the message browser (the build with view
      // routes; plain Queen.open loads the smaller one without them).
      queen = await Queen.open({ name, views: true });
    } catch (e) {
      throw new ApiError(`Could not open the in-browser broker on IndexedDB database “${name}”: ${reason(e)}. ` +
        'Private windows and some browser settings block IndexedDB.');
    }
    label = `in-browser broker (IndexedDB “${name}”)`;
    if (queen.role === 'follower') label += ', held by another tab: this tab forwards to it';
  }
  const conn = {
    label,
    settings,
    async request(method, path, body) {
      let res;
      try {
        res = await queen.request(method, path, body ?? null);
      } catch (e) {
        throw new ApiError(settings.mode === 'worker'
          ? `Could not reach the broker at ${normaliseUrl(settings.url)} (${reason(e)}). Is it running? scripts/dev starts one.`
          : `The in-browser broker failed: ${reason(e)}`, { detail: String(e) });
      }
      if (!res || typeof res.status !== 'number') throw new ApiError('The broker gave an answer the page does not understand.');
      if (res.status >= 400) throw new ApiError(describe(res.status, res.body), { status: res.status, detail: JSON.stringify(res.body) });
      return res;
    },
    close() {
      try {
        Promise.resolve(queen.close?.()).catch(() => {});
      } catch { /* closing is best effort */ }
    },
  };
  // Probe, so that a wrong URL or token shows up now, in plain words.
  await conn.request('GET', '/api/v1/resources/queues');
  // Whether the broker keeps encryptionEnabled queues (queen-edge refuses them without a key; its
  // /health says which). true / false, or null when the broker does not say (e.g. Queen itself).
  conn.encryption = null;
  try {
    const key = (await conn.request('GET', '/health')).body?.encryption?.keyConfigured;
    if (typeof key === 'boolean') conn.encryption = key;
  } catch { /* unknown: the form leaves the option as it is */ }
  return conn;
}

function normaliseUrl(url) {
  const raw = (url || '').trim();
  if (!raw) throw new ApiError('Enter the worker URL, for example http://127.0.0.1:6632.');
  let u;
  try { u = new URL(raw); } catch { throw new ApiError(`“${raw}” is not a URL. Try http://127.0.0.1:6632.`); }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new ApiError('The worker URL must start with http:// or https://.');
  return u.origin + u.pathname.replace(/\/+$/, '').replace(/\/api\/v1$/, '');
}

function reason(e) {
  const m = e?.message || String(e);
  return /failed to fetch|networkerror|load failed/i.test(m) ? 'network error' : m;
}

/** The broker's answer `status` + `{error}` body, in words. */
export function describe(status, body) {
  const said = (body && typeof body === 'object' && typeof body.error === 'string' ? body.error : '').replace(/\.$/, '');
  switch (true) {
    case status === 401: return said === 'Authentication required'
      ? 'This broker needs a token. Enter it next to the URL and connect again.'
      : `The broker did not accept the token${said ? ` (${said})` : ''}. Check it and connect again.`;
    case status === 403: return 'The token is valid but not allowed to do this.';
    case status === 404: return said ? `Not found: ${said}.` : 'Not found.';
    case status === 413: return `Too big for the broker${said ? `: ${said}` : ''}.`;
    case status === 501: return `This broker does not serve that yet${said ? `: ${said}` : ''}.`;
    case status >= 500: return `The broker had a problem (${status})${said ? `: ${said}` : ''}. Try again in a moment.`;
    default: return said ? `The broker refused: ${said}.` : `The broker refused the request (${status}).`;
  }
}

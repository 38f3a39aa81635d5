// The entry Worker's hot path, installed as the fetch handler by worker/shim.js (docs/decisions.md, "The entry
// Worker's hot path (session 7)"). One synchronous call into the wasm, entryPrecheck (worker/src/entry.rs),
// decides with the same Rust code as the wasm fetch handler: the route, the caller's access and the declared
// body size are checked there, before any Durable Object is woken. Its answer is
//   - a string: the name of the Broker object to forward to; the request goes to it unchanged (its body is
//     not read here), and the object's Response comes back as it is;
//   - a Response: the answer itself (a preflight, a refusal);
//   - undefined: not decided here (assets, test routes, a JWT whose signature needs Web Crypto, SHARDS > 1,
//     the shard migration): fastFetch returns undefined and the caller runs the wasm fetch handler.
// Per isolate, as the precheck's own settings are (EntrySettings in worker/src/fetch.rs): which optional headers
// the decision reads (entryHeaders; a header it never reads is passed as null, not fetched from workerd), and
// the DurableObjectId of each object name forwarded to (idFromName hashes the name; an id, unlike a stub, is
// not bound to the request that made it).
import { entryHeaders, entryPrecheck } from './index.js';

/** The binding of the Broker objects' namespace (BROKER_BINDING in worker/src/lib.rs). */
const BROKER_BINDING = 'BROKER';
/** entryHeaders' bits (READS_AUTHORIZATION, READS_BROKER_HEADER in worker/src/entry.rs). */
const READS_AUTHORIZATION = 1;
const READS_BROKER_HEADER = 2;
/** Object ids kept per isolate, at most (a selectable broker's names come from callers). */
const MAX_IDS = 256;

let reads = -1;
let idNamespace = null;
const ids = new Map();

/** The id of the object named `name` in `namespace`, made once per isolate. */
function objectId(namespace, name) {
  if (namespace !== idNamespace || ids.size >= MAX_IDS) {
    ids.clear();
    idNamespace = namespace;
  }
  let id = ids.get(name);
  if (id === undefined) {
    id = namespace.idFromName(name);
    ids.set(name, id);
  }
  return id;
}

/**
 * Serves `request` on the hot path: a Response or a promise of one, or undefined when the wasm fetch
 * handler must serve it.
 */
export function fastFetch(request, env) {
  const headers = request.headers;
  if (reads < 0) reads = entryHeaders(env);
  const decision = entryPrecheck(env, request.method, request.url, headers.get('content-length'),
    reads & READS_AUTHORIZATION ? headers.get('authorization') : null,
    reads & READS_BROKER_HEADER ? headers.get('x-queen-broker') : null);
  if (typeof decision === 'string') {
    const namespace = env[BROKER_BINDING];
    return namespace.get(objectId(namespace, decision)).fetch(request);
  }
  return decision;
}

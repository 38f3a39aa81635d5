// The entry Worker's hot path, installed as the fetch handler by worker/shim.js (docs/decisions.md, "The entry
// Worker's hot path (session 7)"). One synchronous call into the wasm, entryPrecheck (worker/src/entry.rs),
// decides with the same Rust code as the wasm fetch handler: the route, the caller's access and the declared
// body size are checked there, before any Durable Object is woken. Its answer is
//   - a string: the name of the Broker object to forward to; the request goes to it unchanged (its body is
//     not read here), and the object's Response comes back as it is;
//   - a Response: the answer itself (a preflight, a refusal);
//   - undefined: not decided here (assets, test routes, a JWT whose signature needs Web Crypto, SHARDS > 1,
//     the shard migration): fastFetch returns undefined and the caller runs the wasm fetch handler.
import { entryPrecheck } from './index.js';

/** The binding of the Broker objects' namespace (BROKER_BINDING in worker/src/lib.rs). */
const BROKER_BINDING = 'BROKER';

/**
 * Serves `request` on the hot path: a Response or a promise of one, or undefined when the wasm fetch
 * handler must serve it.
 */
export function fastFetch(request, env) {
  const headers = request.headers;
  const decision = entryPrecheck(env, request.method, request.url, headers.get('content-length'),
    headers.get('authorization'), headers.get('x-queen-broker'));
  if (typeof decision === 'string') {
    const namespace = env[BROKER_BINDING];
    return namespace.get(namespace.idFromName(decision)).fetch(request);
  }
  return decision;
}

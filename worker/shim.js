// The Worker's entry module around the wasm-bindgen output (worker/build/index.js after bundling).
// Copied from worker-build 0.8.7 (src/js/shim.js, MIT OR Apache-2.0), which produced it before;
// scripts/build-worker replaces $HANDLERS with one line per exported handler and appends one
// line per exported class (the Durable Object), then bundles it with esbuild. Keep it equal to the shim of the
// worker-build version matching the `worker` crate in Cargo.lock, but for the default export (after $HANDLERS):
// a plain object of handlers whose fetch runs the hot path of worker/entry.js first and the wasm handler for the
// rest; and for the Durable Object classes (`durableObjectClass`, at the end), which are queen-edge's own.
import { WorkerEntrypoint } from "cloudflare:workers";
import * as exports from "./index.js";
import { fastFetch } from "./entry.js";

Error.stackTraceLimit = 100;
const initState = exports.__worker_init_state();

function checkReinitialize() {
  if (initState.criticalError) {
    console.log("Reinitializing Wasm application");
    exports.__wbg_reset_state();
    initState.criticalError = false;
    initState.instanceId++;
  }
}

addEventListener('error', (e) => {
  handleMaybeCritical(e.error);
});

function handleMaybeCritical(e) {
  if (e instanceof WebAssembly.RuntimeError) {
    console.error('Critical', e);
    initState.criticalError = true;
  }
}

class Entrypoint extends WorkerEntrypoint {}

$HANDLERS

// queen-edge: the default export is a plain object of handlers, not the proxied Entrypoint class, so that workerd
// constructs no entrypoint (and no proxies) for each request: each handler runs the Entrypoint method with the
// env and ctx workerd passes it. fetch runs the entry's hot path (worker/entry.js) first: it answers or forwards
// what one synchronous call into the wasm decides; the wasm fetch handler serves the rest. Only event handlers
// fit a plain object: an RPC method (any other export) would need the class back, so the module refuses to load.
const EVENT_HANDLERS = ["fetch", "queue", "scheduled", "email", "connect"];
const handlers = {};
for (const name of Object.getOwnPropertyNames(Entrypoint.prototype)) {
  if (name === "constructor") continue;
  if (!EVENT_HANDLERS.includes(name)) {
    throw new Error(`the wasm exports ${name}, an entrypoint RPC method: worker/shim.js exports handlers as a plain object`);
  }
  const method = Entrypoint.prototype[name];
  handlers[name] = function (arg, env, ctx) {
    checkReinitialize();
    try {
      const fast = name === "fetch" ? fastFetch(arg, env) : undefined;
      return fast ?? method.call({ env, ctx }, arg);
    } catch (e) {
      handleMaybeCritical(e);
      throw e;
    }
  };
}

const instanceProxyHooks = {
  set: (target, prop, value, receiver) => Reflect.set(target.instance, prop, value, receiver),
  has: (target, prop) => Reflect.has(target.instance, prop),
  deleteProperty: (target, prop) => Reflect.deleteProperty(target.instance, prop),
  apply: (target, thisArg, args) => Reflect.apply(target.instance, thisArg, args),
  construct: (target, args, newTarget) => Reflect.construct(target.instance, args, newTarget),
  getPrototypeOf: (target) => Reflect.getPrototypeOf(target.instance),
  setPrototypeOf: (target, proto) => Reflect.setPrototypeOf(target.instance, proto),
  isExtensible: (target) => Reflect.isExtensible(target.instance),
  preventExtensions: (target) => Reflect.preventExtensions(target.instance),
  getOwnPropertyDescriptor: (target, prop) => Reflect.getOwnPropertyDescriptor(target.instance, prop),
  defineProperty: (target, prop, descriptor) => Reflect.defineProperty(target.instance, prop, descriptor),
  ownKeys: (target) => Reflect.ownKeys(target.instance),
};

const classProxyHooks = {
  construct(ctor, args, newTarget) {
    try {
      checkReinitialize();
      const instance = {
        instance: Reflect.construct(ctor, args, newTarget),
        instanceId: initState.instanceId,
        ctor,
        args,
        newTarget
      };
      return new Proxy(instance, {
        ...instanceProxyHooks,
        get(target, prop, receiver) {
          if (target.instanceId !== initState.instanceId) {
            target.instance = Reflect.construct(target.ctor, target.args, target.newTarget);
            target.instanceId = initState.instanceId;
          }
          const original = Reflect.get(target.instance, prop, receiver);
          if (typeof original !== 'function') return original;
          if (original.constructor === Function) {
            return new Proxy(original, {
              apply(target, thisArg, argArray) {
                checkReinitialize();
                try {
                  return target.apply(thisArg, argArray);
                } catch (e) {
                  handleMaybeCritical(e);
                  throw e;
                }
              }
            });
          } else {
            return new Proxy(original, {
              async apply(target, thisArg, argArray) {
                checkReinitialize();
                try {
                  return await target.apply(thisArg, argArray);
                } catch (e) {
                  handleMaybeCritical(e);
                  throw e;
                }
              }
            });
          }
        }
      });
    } catch (e) {
      initState.criticalError = true;
      throw e;
    }
  }
};

export default handlers;

// The Durable Object classes (queen-edge's, not worker-build's: scripts/build-worker exports each class as
// `durableObjectClass(exports.Name)`). An instance keeps the wasm object and builds it again after a trap
// reset the wasm instance, as the proxies above do. When the wasm class has `serve` (the Broker), `fetch`
// reads a public request's body once and passes the request's parts to it; the answer comes back as a frame
// (worker/src/frame.rs, `frame`): status, header set, body, built into a `Response` here, in the same call
// unless the request had to wait (then `serve` returns a Promise of the frame). Internal and test routes
// (`/__...`), and a body without a declared length or declared longer than the limit (read in Rust, which
// stops at the limit and answers 413), go to the wasm object's own `fetch` with the `Request`. `fetch` is not
// an async function: a request without a body that the wasm answers at once (a pop) gets its `Response`
// back with no promise in between; one with a body gets the promise of its `arrayBuffer()` read.
const EMPTY_BODY = new Uint8Array(0);
const frameDecoder = new TextDecoder();

/** A rejection handler that notes a wasm trap (`handleMaybeCritical`) and rejects again. */
function critical(e) {
  handleMaybeCritical(e);
  throw e;
}

/** `name\nvalue\n` pairs as [name, value] arrays. */
function headerPairs(text) {
  const parts = text.split('\n');
  const pairs = [];
  for (let i = 0; i + 1 < parts.length; i += 2) pairs.push([parts[i], parts[i + 1]]);
  return pairs;
}

function durableObjectClass(Wasm) {
  const fast = typeof Wasm.prototype.serve === 'function';
  // The two header sets nearly every answer carries, built once: 0 the CORS headers, 1 with JSON.
  const headerSets = fast ? [0, 1].map((kind) => new Headers(headerPairs(Wasm.frameHeaders(kind)))) : [];

  const ObjectClass = class {
    constructor(state, env) {
      try {
        checkReinitialize();
        this.args = [state, env];
        this.instanceId = initState.instanceId;
        this.wasm = new Wasm(state, env);
        this.settingsOf(this.wasm);
      } catch (e) {
        initState.criticalError = true;
        throw e;
      }
    }

    current() {
      checkReinitialize();
      if (this.instanceId !== initState.instanceId) {
        this.wasm = new Wasm(...this.args);
        this.instanceId = initState.instanceId;
        this.settingsOf(this.wasm);
      }
      return this.wasm;
    }

    /** What the fast path keeps of a (new) wasm object: its body limit and which headers it reads. */
    settingsOf(wasm) {
      this.maxBodyBytes = fast ? wasm.maxBodyBytes : 0;
      this.readsAuthorization = fast ? wasm.readsAuthorization : true;
      this.shardHintWanted = fast;
    }

    /** `fetch` (see below). */
    serveObjectRequest(request) {
      try {
        const wasm = this.current();
        if (!fast) return this.serveInWasm(wasm, request);
        const url = request.url;
        if (url.startsWith('/__', url.indexOf('/', url.indexOf('://') + 3))) return this.serveInWasm(wasm, request);
        const method = request.method;
        const headers = request.headers;
        if (method === 'GET' || method === 'HEAD') return this.serve(wasm, method, url, headers, request.signal, EMPTY_BODY);
        const declared = headers.get('content-length');
        if (declared === null) {
          if (request.body !== null) return this.serveInWasm(wasm, request);
          return this.serve(wasm, method, url, headers, null, EMPTY_BODY);
        }
        if (Number(declared) > this.maxBodyBytes) return this.serveInWasm(wasm, request);
        if (declared === '0') return this.serve(wasm, method, url, headers, null, EMPTY_BODY);
        return request.arrayBuffer().then((body) => this.serve(wasm, method, url, headers, null, new Uint8Array(body)));
      } catch (e) {
        handleMaybeCritical(e);
        throw e;
      }
    }

    /**
     * The answer of `wasm.serve` to a request whose body is read: a `Response` when the wasm answered within
     * the call (no promise, no microtask), else a promise of one. Reads `Authorization` only when the
     * object's settings use it, and `x-queen-shard` only until the engine is open (`wantsShardHint`).
     * `signal`: the request's AbortSignal for a GET (a pop may park and must stop if its client goes), null
     * for the rest, which never wait for a client.
     */
    serve(wasm, method, url, headers, signal, body) {
      try {
        let shard = null;
        if (this.shardHintWanted) {
          this.shardHintWanted = wasm.wantsShardHint;
          if (this.shardHintWanted) shard = headers.get('x-queen-shard');
        }
        const frame = wasm.serve(method, url, this.readsAuthorization ? headers.get('authorization') : null,
          headers.get('content-type'), shard, body, signal);
        if (frame instanceof Uint8Array) return this.toResponse(frame);
        return frame.then((f) => this.toResponse(f), critical);
      } catch (e) {
        handleMaybeCritical(e);
        throw e;
      }
    }

    /** The wasm object's own `fetch`, for the requests `serve` does not take. */
    async serveInWasm(wasm, request) {
      try {
        return await wasm.fetch(request);
      } catch (e) {
        handleMaybeCritical(e);
        throw e;
      }
    }

    /** The `Response` of a frame (a method, so that profiles name it). */
    toResponse(frame) {
      const status = (frame[0] << 8) | frame[1];
      const kind = frame[2];
      let start = 3;
      let headers;
      if (kind === 2) {
        const length = frame[3] | (frame[4] << 8) | (frame[5] << 16) | (frame[6] << 24);
        start = 7 + length;
        headers = new Headers(headerSets[0]);
        for (const [name, value] of headerPairs(frameDecoder.decode(frame.subarray(7, start)))) {
          if (headerSets[0].has(name)) headers.set(name, value);
          else headers.append(name, value);
        }
      } else {
        headers = headerSets[kind];
      }
      return new Response(start < frame.length ? frame.subarray(start) : null, { status, headers });
    }

    async alarm() {
      try {
        return await this.current().alarm();
      } catch (e) {
        handleMaybeCritical(e);
        throw e;
      }
    }
  };
  // workerd calls `fetch`; the function keeps the name `serveObjectRequest`, so that a V8 profile tells the
  // object's requests from the entry Worker's `fetch` (bench/worker-profile.mjs).
  ObjectClass.prototype.fetch = ObjectClass.prototype.serveObjectRequest;
  return ObjectClass;
}

// The Worker's entry module around the wasm-bindgen output (worker/build/index.js after bundling).
// Copied from worker-build 0.8.7 (src/js/shim.js, MIT OR Apache-2.0), which produced it before;
// scripts/build-worker replaces $HANDLERS with one line per exported handler and appends one
// line per exported class (the Durable Object), as worker-build does, then bundles it with esbuild.
// Keep it equal to the shim of the worker-build version matching the `worker` crate in Cargo.lock, but for the
// default export (after $HANDLERS): a plain object of handlers whose fetch runs the hot path of worker/entry.js
// first and the wasm handler for the rest.
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

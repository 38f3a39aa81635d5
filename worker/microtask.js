// `queueMicrotask` for the bundle's wasm-bindgen glue, injected by scripts/build-worker (esbuild `--inject`):
// every free reference to the global `queueMicrotask` in index.js calls this function instead.
//
// Why: the Rust futures of the Worker (js_sys's task queue) schedule their polls with `queueMicrotask`, at
// least once per request. workerd implements that global in C++: each call wraps the callback in a new native
// function (a V8 API function instantiated from a template, with its own map) and a GC-visited handle, which
// perf on workerd shows as one of the larger items of a one-message request (docs/decisions.md, "The
// microtask queue of the Worker's futures (session 23)"). A reaction on a settled promise is V8's own
// microtask, with nothing of workerd's around it.
//
// Same contract as workerd's: the callback runs as a microtask of the current turn, in the order queued, and
// an exception it throws is passed to `reportError` (the global `error` event, which worker/shim.js listens to
// for wasm traps) instead of rejecting a promise nobody handles.
const settled = Promise.resolve();

export function queueMicrotask(callback) {
  settled.then(() => {
    try {
      callback();
    } catch (e) {
      reportError(e);
    }
  });
}

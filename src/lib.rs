//! queen-edge: a message broker with Queen MQ's semantics, in Rust compiled to WebAssembly.
//!
//! Layers, from the inside out:
//! - [`core`]: the sans-IO broker state machine (queues, partitions, lanes, leases, dead letters).
//! - [`engine`]: the async shell that commits each command's change set before replying and parks
//!   long-polls.
//! - [`store`]: the [`store::Store`] trait and its implementations.
//! - [`http`]: Queen's HTTP API, runtime-agnostic.
//! - `js` (wasm32 only): the npm module's bindings.

#![warn(missing_docs)]
// A `str` slice (`&text[a..b]`) can panic with a message that formats the text with `char`'s `Debug`,
// linking the standard library's Unicode tables into the browser module (docs/decisions.md, "No `str`
// slices in the library"); `get`, `split_at_checked`, `split_once` and `strip_prefix` cannot.
#![cfg_attr(not(test), deny(clippy::string_slice))]

#[cfg(target_arch = "wasm32")]
pub mod bindings;
pub mod core;
pub mod engine;
pub mod http;
pub mod store;

/// The npm module's allocator (feature `talc`, wasm32 only): talc instead of std's dlmalloc, about
/// 2 KB of the gzipped download smaller (docs/decisions.md, "JS module size"). The browser module is
/// single-threaded, which talc's wasm allocator requires.
#[cfg(all(
    feature = "talc",
    target_arch = "wasm32",
    not(target_feature = "atomics")
))]
#[global_allocator]
static ALLOCATOR: talc::wasm::WasmDynamicTalc = talc::wasm::new_wasm_dynamic_allocator();

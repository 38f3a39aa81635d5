//! `IdbStore` inside a shared worker (the global is not a window): conformance and `persist()`.
#![cfg(target_arch = "wasm32")]

mod idb_common;

use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_shared_worker);

#[wasm_bindgen_test]
async fn idb_store_passes_conformance_in_shared_worker() {
    idb_common::conformance_here("shared-worker").await;
}

#[wasm_bindgen_test]
async fn persist_is_unavailable_in_shared_worker() {
    idb_common::persist_is_unavailable_here().await;
}

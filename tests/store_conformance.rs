//! The storage conformance suite on the in-memory reference store (all but the reopen check): natively with `cargo test`, and as
//! wasm under `wasm-pack test --node` (or a browser).

use queen_edge::store::{conformance, MemStore};

/// Every check but `survives_reopen`: a MemStore keeps nothing outside the process, and a "reopen" (a clone
/// sharing the same map) would compare the data with itself.
async fn mem_store_conformance() {
    let passed = conformance::run_all_but_reopen(MemStore::new())
        .await
        .expect("MemStore must pass the conformance suite");
    assert_eq!(
        passed,
        [
            "empty_scan",
            "ordered_prefix_scan",
            "mixed_commit",
            "binary_and_empty_values",
            "large_values",
            "many_records",
            "delete_missing",
            "get_keys",
            "segment_shaped_keys",
            "first_keys",
            "clear"
        ],
        "every check but survives_reopen ran"
    );
}

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn mem_store_passes_conformance() {
    futures::executor::block_on(mem_store_conformance());
}

#[cfg(target_arch = "wasm32")]
#[wasm_bindgen_test::wasm_bindgen_test]
async fn mem_store_passes_conformance() {
    mem_store_conformance().await;
}

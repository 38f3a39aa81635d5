//! The storage conformance suite on the in-memory reference store: natively with `cargo test`, and as
//! wasm under `wasm-pack test --node` (or a browser).

use queen_edge::store::{conformance, MemStore};

async fn mem_store_conformance() {
    let store = MemStore::new();
    let passed = conformance::run_all(|| {
        let store = store.clone();
        async move { store }
    })
    .await
    .expect("MemStore must pass the conformance suite");
    assert_eq!(passed.len(), 10, "every check ran: {passed:?}");
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

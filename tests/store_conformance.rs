//! The storage conformance suite on the in-memory reference store.

use queen_edge::store::{conformance, MemStore};

#[test]
fn mem_store_passes_conformance() {
    let store = MemStore::new();
    let passed = futures::executor::block_on(conformance::run_all(|| {
        let store = store.clone();
        async move { store }
    }))
    .expect("MemStore must pass the conformance suite");
    assert_eq!(passed.len(), 9, "every check ran: {passed:?}");
}

//! Checks shared by the IndexedDB test binaries, one per JavaScript global (window, dedicated, shared and
//! service worker): each binary picks its global with `wasm_bindgen_test_configure!`.

// Each binary uses part of this module.
#![allow(dead_code)]

pub mod raw;

use queen_edge::store::idb::{self, IdbOptions, IdbStore};
use queen_edge::store::{conformance, StoreErrorKind};

/// A database name no earlier run used.
pub fn unique_name(what: &str) -> String {
    format!(
        "queen-edge-test-{what}-{}-{}",
        js_sys::Date::now() as u64,
        (js_sys::Math::random() * 1e9) as u64
    )
}

/// Runs the storage conformance suite on a fresh database in the current global, then deletes it.
pub async fn conformance_here(context: &str) {
    let name = unique_name(context);
    let passed = conformance::run_all(|| async {
        IdbStore::open(&name, IdbOptions::default())
            .await
            .unwrap_or_else(|e| panic!("open {name} in a {context}: {e}"))
    })
    .await
    .unwrap_or_else(|e| panic!("IdbStore failed conformance in a {context}: {e}"));
    assert_eq!(passed.len(), 12, "every check ran: {passed:?}");
    IdbStore::delete_database(&name)
        .await
        .expect("delete test database");
}

/// `persist()` in a worker: the API is exposed to windows only, so the answer is `Unavailable`.
pub async fn persist_is_unavailable_here() {
    let err = idb::persist()
        .await
        .expect_err("navigator.storage.persist is window-only");
    assert_eq!(err.kind, StoreErrorKind::Unavailable, "{err}");
}

//! The native integration tests, compiled into one test binary (Cargo.toml: `autotests = false` and the
//! `[[test]]` list). Each file below is a module of it with its own tests, named `FILE::test` in the output
//! (`cargo test --test native http_routes::` runs one file's). One binary links the crate and its
//! dependencies once instead of once a file, which is most of what the test tier compiles
//! (docs/decisions.md, "One native test binary").
//!
//! Files that stay test binaries of their own, each a `[[test]]` of Cargo.toml: those that make their
//! counting allocator the process's (`body_retention`, `cache_weight`: `#[global_allocator]`, one per
//! binary), and those that the browser tier also compiles for wasm32 (`conformance`, `simulation`,
//! `store_conformance`, `http_lean`, `wasm_idb*`). [`every_test_file_is_compiled`] fails when a file in
//! tests/ is in neither place.

mod http_support;
mod support;

mod ack_runs;
mod audit;
mod audit_s23;
mod cache_commits;
mod capacity;
mod capacity_order;
mod compress_slices_review;
mod faults;
mod first_pop_subscription;
mod group_commit;
mod http_encryption;
mod http_fuzz;
mod http_lane_counts;
mod http_malformed;
mod http_parity;
mod http_queue_history;
mod http_redelivery;
mod http_routes;
mod index_pages;
mod loader_fuzz;
mod model;
mod prepared;
mod quota;
mod redelivery;
mod reshard;
mod shared_body_text;
mod vendored_serde_json;
mod views_committed;

/// Every `tests/*.rs` file is a module of this binary or the path of a `[[test]]` in Cargo.toml: with
/// `autotests = false` Cargo compiles nothing else, so a new file left out of both would never run.
#[test]
fn every_test_file_is_compiled() {
    let root = env!("CARGO_MANIFEST_DIR");
    let manifest = std::fs::read_to_string(format!("{root}/Cargo.toml")).unwrap();
    let this = std::fs::read_to_string(format!("{root}/tests/native.rs")).unwrap();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(format!("{root}/tests")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let Some(stem) = name.strip_suffix(".rs") else {
            continue;
        };
        let as_test = format!("path = \"tests/{name}\"");
        let as_module = format!("\nmod {stem};\n");
        if !manifest.contains(&as_test) && !this.contains(&as_module) {
            missing.push(name);
        }
    }
    assert!(
        missing.is_empty(),
        "tests/ files neither a module of tests/native.rs nor a [[test]] of Cargo.toml: {missing:?}"
    );
}

//! The npm module's default build (no `ops` feature: no push buffer, no traces) over a database where
//! a full build turned maintenance mode on: it honours what is stored. Pops claim nothing while pop
//! maintenance is on; pushes are refused (503) while push maintenance is on or buffered messages wait,
//! never applied ahead of them; the maintenance and trace routes answer 501 with what to do instead.
//! Run where the npm module's configuration is built anyway: in 40-browser (wasm32, no default features,
//! `talc`; in node), beside the crate's other wasm tests. By hand, natively: `cargo test --test http_lean
//! --no-default-features`.

#![cfg(not(feature = "ops"))]

mod http_support;

use http_support::*;
use queen_edge::http::HttpConfig;
use queen_edge::store::{ChangeSet, Store};
use serde_json::json;

fn stored_mode(h: &Harness, push: bool, pop: bool, buffered: bool) -> Harness {
    let mut changes = ChangeSet::default();
    changes.put(
        "m/mode",
        serde_json::to_vec(&json!({"pushPaused": push, "popPaused": pop})).unwrap(),
    );
    if buffered {
        changes.put(
            "b/0000000000000000",
            serde_json::to_vec(
                &json!({"queue": "lean", "partition": "Default", "payload": 2,
                                       "transactionId": "buffered-1"}),
            )
            .unwrap(),
        );
    }
    futures::executor::block_on(h.store.commit(&changes)).unwrap();
    h.restart(HttpConfig::default())
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_build_without_ops_honours_a_stored_maintenance_mode() {
    let h = Harness::new();
    let (status, _) = h.call(
        "POST",
        "/api/v1/push",
        Some(json!({"items": [{"queue": "lean", "payload": 1}]})),
    );
    assert_eq!(status, 201);

    let h = stored_mode(&h, true, true, false);
    assert_eq!(
        h.call("GET", "/api/v1/pop/queue/lean?batch=10", None).0,
        204,
        "pops paused"
    );
    let (status, body) = h.call(
        "POST",
        "/api/v1/push",
        Some(json!({"items": [{"queue": "lean", "payload": 3}]})),
    );
    assert_eq!(status, 503, "{body}");
    assert!(body["error"]
        .as_str()
        .unwrap()
        .starts_with("Maintenance mode is on"));
    for (method, target) in [
        ("GET", "/api/v1/system/maintenance"),
        ("POST", "/api/v1/system/maintenance/pop"),
        ("POST", "/api/v1/traces"),
    ] {
        let (status, body) = h.call(method, target, Some(json!({"enabled": false})));
        assert_eq!(status, 501, "{method} {target}: {body}");
        assert!(body["error"].as_str().unwrap().contains("views: true"));
    }

    // Maintenance off but a buffered message waiting: pushes are still refused (it goes first).
    let h = stored_mode(&h, false, false, true);
    let (status, _) = h.call(
        "POST",
        "/api/v1/push",
        Some(json!({"items": [{"queue": "lean", "payload": 3}]})),
    );
    assert_eq!(status, 503);
    let (status, body) = h.call("GET", "/api/v1/pop/queue/lean?batch=10", None);
    assert_eq!(status, 200, "pops resume");
    assert_eq!(body["messages"][0]["data"], 1);
}

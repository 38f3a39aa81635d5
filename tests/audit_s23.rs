//! Defects found by the session-23 audit of stored copies and multi-step operations (docs/decisions.md,
//! "Audit of stored copies and multi-step operations (session 23) — audit"), each pinned by the test
//! that showed it.

#![cfg(all(not(target_arch = "wasm32"), feature = "ops"))]

mod http_support;

use http_support::*;
use queen_edge::http::HttpConfig;
use serde_json::json;

/// Turning push maintenance off commits the switch, then drains the buffer a chunk per commit. When a
/// drain commit fails (or the broker stops mid-drain), the items left in the buffer were pushed and
/// answered `buffered`, yet nothing but a later push (or switching maintenance again) ever drained
/// them: consumers never got them. Maintenance (the Worker's alarm, the page's timer) must finish the
/// drain.
#[test]
fn buffered_messages_left_by_a_failed_drain_reach_consumers_without_another_push() {
    let h = Harness::new();
    let (status, _) = h.call(
        "POST",
        "/api/v1/system/maintenance",
        Some(json!({"enabled": true})),
    );
    assert_eq!(status, 200);
    let (status, body) = h.call(
        "POST",
        "/api/v1/push",
        Some(json!({"items": [{"queue": "m", "payload": "waits"}]})),
    );
    assert_eq!((status, &body[0]["status"]), (201, &json!("buffered")));
    // The switch commits, the drain's commit fails; then the broker restarts.
    h.store.fail_commit_after(1);
    let (status, body) = h.call(
        "POST",
        "/api/v1/system/maintenance",
        Some(json!({"enabled": false})),
    );
    assert_eq!(status, 500, "{body}");
    let h = h.restart(HttpConfig::default());
    let (_, mode) = h.call("GET", "/api/v1/system/maintenance", None);
    assert_eq!(mode["maintenanceMode"], false, "{mode}");
    // Maintenance runs (as the alarm or the page's timer would).
    futures::executor::block_on(h.engine.maintain()).expect("maintenance runs");
    let (status, popped) = h.call("GET", "/api/v1/pop/queue/m?batch=10&wait=false", None);
    assert_eq!(
        status, 200,
        "the buffered message was never delivered: {popped}"
    );
    assert_eq!(popped["messages"][0]["data"], json!("waits"));
}

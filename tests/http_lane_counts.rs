//! Golden route test for the lane counts in `GET /resources/queues/:queue` (each lane's `counts`:
//! messages delivered to the group, acks it sent, and the failed ones among them), which the page's
//! throughput pictures sample: request in, exact JSON out, across a restart of the engine over the
//! same store.

#![cfg(not(target_arch = "wasm32"))]

use crate::http_support;

use http_support::*;
use queen_edge::http::HttpConfig;
use serde_json::{json, Value};

/// `counts` of each lane of the queue's only partition, by group.
fn lane_counts(h: &Harness, queue: &str) -> Vec<(String, Value)> {
    let (status, q) = h.call("GET", &format!("/api/v1/resources/queues/{queue}"), None);
    assert_eq!(status, 200, "{q}");
    q["partitions"][0]["lanes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["consumerGroup"].as_str().unwrap().to_string(),
                l["counts"].clone(),
            )
        })
        .collect()
}

#[test]
fn each_lane_reports_its_stored_counts_and_keeps_them_across_a_restart() {
    let h = Harness::new();
    h.call(
        "POST",
        "/api/v1/configure",
        Some(json!({"queue": "lc", "options": {"retryLimit": 3, "retryDelay": 0}})),
    );
    let items: Vec<Value> = (0..3)
        .map(|n| json!({"queue": "lc", "payload": n}))
        .collect();
    let (status, body) = h.call("POST", "/api/v1/push", Some(json!({ "items": items })));
    assert_eq!(status, 201, "{body}");

    // Queue mode: two delivered, both completed.
    let two = h.pop_messages("/api/v1/pop/queue/lc?batch=2");
    h.ack_batch(&two, "completed", None);
    // Group g: one delivered and failed, delivered again and completed.
    let target = "/api/v1/pop/queue/lc?batch=1&consumerGroup=g&subscriptionMode=all";
    let first = h.pop_messages(target);
    h.ack_batch(&first, "failed", Some("g"));
    let again = h.pop_messages(target);
    assert_eq!(again[0]["transactionId"], first[0]["transactionId"]);
    h.ack_batch(&again, "completed", Some("g"));

    let expected = vec![
        (
            "__QUEUE_MODE__".to_string(),
            json!({"delivered": 2, "acked": 2, "failed": 0}),
        ),
        (
            "g".to_string(),
            json!({"delivered": 2, "acked": 2, "failed": 1}),
        ),
    ];
    assert_eq!(lane_counts(&h, "lc"), expected);
    let h = h.restart(HttpConfig::default());
    assert_eq!(lane_counts(&h, "lc"), expected, "the counts are stored");
}

//! The storage quota (`max_stored_bytes`, the Worker's `MAX_STORED_BYTES`, the browser's
//! `maxStoredBytes`) is a hard limit on the stored segment bytes: a push or a transaction that would
//! take them past it is refused with 507 and stores nothing, and an accepted one never ends over it
//! (docs/decisions.md, "The storage quota is a hard limit; a transaction it refuses answers 507").

#![cfg(not(target_arch = "wasm32"))]

use crate::http_support;

use http_support::*;
use queen_edge::core::BrokerConfig;
use queen_edge::http::HttpConfig;
use serde_json::{json, Value};

fn with_quota(quota: u64) -> Harness {
    Harness::with_broker_config(
        HttpConfig::default(),
        BrokerConfig {
            max_stored_bytes: Some(quota),
            ..BrokerConfig::default()
        },
    )
}

fn stored(h: &Harness) -> u64 {
    h.engine.read(|b, _| b.storage_usage()).0
}

/// `n` items of payload `1` on queue `queue`, each with a transaction id as the JS client sends.
fn items(queue: &str, n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            json!({"queue": queue, "payload": 1,
                   "transactionId": format!("0190a6f4-0000-7000-8000-{i:012}")})
        })
        .collect()
}

fn segment_keys(h: &Harness) -> usize {
    h.snapshot()
        .iter()
        .filter(|r| r.0.starts_with("s/"))
        .count()
}

#[test]
fn a_push_whose_messages_take_more_than_their_payloads_past_the_quota_is_refused_whole() {
    // QA's case: 1000 payloads of 1 byte, each stored with about 120 bytes of envelope.
    let h = with_quota(10_000);
    let (status, body) = h.call(
        "POST",
        "/api/v1/push",
        Some(json!({ "items": items("a", 1000) })),
    );
    assert_eq!(status, 507, "the push is refused");
    let error = body["error"].as_str().expect("an error text");
    assert!(error.contains("full") && error.contains("10000"), "{error}");
    assert!(
        !error.contains("Consume and acknowledge") && error.contains("completedRetentionSeconds"),
        "the text says what frees space: {error}"
    );
    assert_eq!(stored(&h), 0, "nothing is stored");
    assert_eq!(segment_keys(&h), 0, "no segment written");
}

#[test]
fn pushes_fill_the_quota_to_within_one_message_and_never_past_it() {
    let quota = 4_000;
    let h = with_quota(quota);
    let mut last_added = 0;
    let mut n = 0;
    loop {
        let before = stored(&h);
        let (status, body) = h.call(
            "POST",
            "/api/v1/push",
            Some(json!({"items": [{"queue": "a", "payload": {"data": "y"}}]})),
        );
        if status == 507 {
            assert_eq!(stored(&h), before, "a refused push stores nothing");
            assert!(
                quota - before < last_added + 2,
                "refused only when the message does not fit: {before} of {quota} stored, a message \
                 takes {last_added}"
            );
            break;
        }
        assert_eq!(status, 201, "{body}");
        last_added = stored(&h) - before;
        assert!(stored(&h) <= quota, "{} stored of {quota}", stored(&h));
        n += 1;
        assert!(n < 100, "the quota refuses a push at some point");
    }
    assert!(n > 10, "{n} pushes fitted");
}

#[test]
fn a_transaction_past_the_quota_answers_507_like_a_push_and_applies_nothing() {
    let h = with_quota(4_000);
    // 40 payloads of 1 byte: far under the quota as payloads, over it as stored messages.
    let (status, body) = h.call(
        "POST",
        "/api/v1/transaction",
        Some(json!({"operations": [
            {"type": "push", "items": items("a", 20)},
            {"type": "push", "items": items("b", 20)},
        ]})),
    );
    assert_eq!(status, 507, "{body}");
    assert!(
        body["error"].as_str().is_some_and(|e| e.contains("full")),
        "{body}"
    );
    assert_eq!(stored(&h), 0);
    assert_eq!(segment_keys(&h), 0);
    // One that fits is applied.
    let (status, body) = h.call(
        "POST",
        "/api/v1/transaction",
        Some(json!({"operations": [{"type": "push", "items": items("a", 5)}]})),
    );
    assert_eq!((status, &body["success"]), (200, &json!(true)), "{body}");
    assert!(stored(&h) > 0 && stored(&h) <= 4_000);
}

/// A part of a transaction across shards that the quota refuses answers 507, which the coordinator
/// hands to the client as it is (worker/src/txn_coordinator.rs).
#[cfg(feature = "twophase")]
#[test]
fn a_prepared_part_past_the_quota_answers_507() {
    let h = with_quota(4_000);
    let body = json!({"operations": [{"type": "push", "items": items("a", 40)}]});
    let r = h.prepare_part(body.to_string().into_bytes());
    assert_eq!(r.status, 507, "{}", response_json(&r));
    assert!(response_json(&r)["error"]
        .as_str()
        .is_some_and(|e| e.contains("full")));
    let body = json!({"operations": [{"type": "push", "items": items("a", 5)}]});
    let r = h.prepare_part(body.to_string().into_bytes());
    assert_eq!(
        response_json(&r),
        json!({"prepared": true}),
        "one that fits is prepared"
    );
}

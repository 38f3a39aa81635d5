//! What a request body leaves alive in memory after its answer (docs/decisions.md, "do-text"). A
//! counting allocator measures the heap the broker keeps after a push (the segment cache), a push in
//! maintenance (the buffer) and a prepared transaction part (held until its commit or abort), each
//! sent with a megabyte of text in a field the broker skips: what is kept must be about the messages,
//! not the body. One test, so that nothing else allocates meanwhile.

#![cfg(not(target_arch = "wasm32"))]

mod http_support;

use http_support::*;
use queen_edge::http::HttpRequest;
#[path = "support/live_heap.rs"]
mod live_heap;

const PAD: usize = 1 << 20;

/// The bytes still allocated after `f` (its own values dropped).
fn kept(f: impl FnOnce()) -> isize {
    let before = live_heap::live();
    f();
    live_heap::live() - before
}

/// A megabyte of text for a skipped field.
fn pad() -> String {
    "x".repeat(PAD)
}

fn push(h: &Harness, body: String) {
    let r = h.send(HttpRequest::new("POST", "/api/v1/push").with_json(body.into_bytes()));
    assert!(r.status < 300, "{}", String::from_utf8_lossy(&r.body));
}

#[test]
fn a_request_body_is_not_kept_alive_by_what_the_broker_holds() {
    let h = Harness::new();
    // Warm up: the queue, its partition and the first segment exist before the measures.
    push(
        &h,
        r#"{"items": [{"queue": "q", "payload": 0}]}"#.to_string(),
    );
    push(
        &h,
        r#"{"items": [{"queue": "m", "payload": 0}]}"#.to_string(),
    );

    // A push: its batch goes to the segment cache.
    let cached = kept(|| {
        push(
            &h,
            format!(
                r#"{{"pad": "{}", "items": [{{"queue": "q", "payload": {{"a": 1}}, "transactionId": "t1", "pad": "{}"}}]}}"#,
                pad(),
                pad()
            ),
        )
    });

    // A push during maintenance: buffered.
    set_maintenance(&h, true);
    let buffered = kept(|| {
        push(
            &h,
            format!(
                r#"{{"pad": "{}", "items": [{{"queue": "m", "payload": {{"b": 2}}, "transactionId": "t2"}}]}}"#,
                pad()
            ),
        )
    });
    set_maintenance(&h, false);

    // A prepared transaction part (a shard's half of a two-phase commit): held until commit or abort.
    // The pad is inside the item: the Worker's split (worker/src/txn_plan.rs) keeps an item's fields.
    #[cfg(feature = "twophase")]
    let prepared = kept(|| {
        let body = format!(
            r#"{{"operations": [{{"type": "push", "items": [{{"queue": "q", "payload": {{"c": 3}}, "transactionId": "t3", "pad": "{}"}}]}}]}}"#,
            pad()
        );
        let r = h.prepare_part(body.into_bytes());
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        assert!(String::from_utf8_lossy(&r.body).contains("\"prepared\":true"));
    });
    #[cfg(not(feature = "twophase"))]
    let prepared = 0;

    // An ack batch: its items' ids are parts of the body, handed on to the results (the second item's
    // message is not found, so its result's transaction id is the item's).
    let popped = h.pop_messages("/api/v1/pop/queue/q?batch=1");
    let m = &popped[0];
    let acked = kept(|| {
        let body = format!(
            r#"{{"pad": "{}", "acknowledgments": [{{"transactionId": {}, "partitionId": {}, "leaseId": {}}}, {{"transactionId": "none", "partitionId": {}}}]}}"#,
            pad(),
            m["transactionId"],
            m["partitionId"],
            m["leaseId"],
            m["partitionId"]
        );
        let (code, answer) = h.call_raw("POST", "/api/v1/ack/batch", body.as_bytes());
        assert_eq!(code, 200, "{answer}");
        assert_eq!(answer[0]["success"], true, "{answer}");
    });
    eprintln!(
        "kept after: push {cached} B, buffered push {buffered} B, prepare {prepared} B, ack {acked} B"
    );
    let limit = (PAD / 4) as isize;
    assert!(cached < limit, "the segment cache kept {cached} bytes");
    assert!(
        buffered < limit,
        "the maintenance buffer kept {buffered} bytes"
    );
    assert!(
        prepared < limit,
        "a prepared part kept {prepared} bytes: its request body"
    );
    assert!(
        acked < limit,
        "an ack batch kept {acked} bytes: its request body"
    );
}

/// Turns maintenance mode on or off, expecting 200.
fn set_maintenance(h: &Harness, enabled: bool) {
    let (code, body) = h.call(
        "POST",
        "/api/v1/system/maintenance",
        Some(serde_json::json!({ "enabled": enabled })),
    );
    assert_eq!(code, 200, "{body}");
}

//! Golden route test for `GET /api/v1/status/queues/:queue/history` (module `core::history`): request
//! in, exact JSON out, on the harness's virtual clock. Traffic lands in the 5 s bucket it happened in,
//! each group's backlog is carried through idle buckets, a reload keeps the history, a restart starts
//! it again (it is kept in memory only), and a long run keeps the last 15 minutes.

#![cfg(not(target_arch = "wasm32"))]

use crate::http_support;

use http_support::*;
use queen_edge::http::HttpConfig;
use serde_json::{json, Value};

const QM: &str = "__QUEUE_MODE__";

fn push(h: &Harness, n: usize) {
    let items: Vec<Value> = (0..n)
        .map(|i| json!({"queue": "hq", "payload": i}))
        .collect();
    let (status, body) = h.call("POST", "/api/v1/push", Some(json!({ "items": items })));
    assert_eq!(status, 201, "{body}");
}

fn history(h: &Harness, query: &str) -> Value {
    let (status, body) = h.call(
        "GET",
        &format!("/api/v1/status/queues/hq/history{query}"),
        None,
    );
    assert_eq!(status, 200, "{body}");
    body
}

fn bucket(at: i64, traffic: [u64; 4], backlog: Value) -> Value {
    json!({"at": iso_ms(at), "pushed": traffic[0], "delivered": traffic[1], "acked": traffic[2],
           "failed": traffic[3], "backlog": backlog})
}

#[test]
fn traffic_lands_in_its_bucket_and_the_backlog_is_carried() {
    let h = Harness::new();
    assert_eq!(
        h.call("GET", "/api/v1/status/queues/none/history", None),
        (404, json!({"error": "Queue not found"}))
    );
    let (status, body) = h.call("POST", "/api/v1/configure", Some(json!({"queue": "hq"})));
    assert_eq!(status, 200, "{body}");
    // Created after the broker's first sample: measured from its creation, from zero.
    assert_eq!(
        history(&h, ""),
        json!({"queue": "hq", "bucketSeconds": 5, "windowSeconds": 900, "from": iso_ms(T0),
               "to": iso_ms(T0), "measuredSince": iso_ms(T0), "groups": [], "groupsNotRecorded": [],
               "buckets": [bucket(T0, [0, 0, 0, 0], json!({}))]})
    );

    h.advance(1_000);
    push(&h, 3);
    h.advance(6_000);
    let two = h.pop_messages("/api/v1/pop/queue/hq?batch=2");
    assert_eq!(two.len(), 2);
    h.advance(1_000);
    h.ack_batch(&two, "completed", None);
    h.advance(13_000);
    let g = "/api/v1/pop/queue/hq?batch=1&consumerGroup=g&subscriptionMode=all";
    let one = h.pop_messages(g);
    h.advance(1_000);
    h.ack_batch(&one, "failed", Some("g"));
    h.advance(1_000);

    let expected = json!({
        "queue": "hq", "bucketSeconds": 5, "windowSeconds": 60, "from": iso_ms(T0),
        "to": iso_ms(T0 + 23_000), "measuredSince": iso_ms(T0), "groups": [QM, "g"],
        "groupsNotRecorded": [],
        "buckets": [
            bucket(T0, [3, 0, 0, 0], json!({})),
            bucket(T0 + 5_000, [0, 2, 2, 0], json!({QM: 1})),
            bucket(T0 + 10_000, [0, 0, 0, 0], json!({QM: 1})),
            bucket(T0 + 15_000, [0, 0, 0, 0], json!({QM: 1})),
            // The bucket still filling: a delivery and its failed ack; g's backlog counts from its cursor.
            bucket(T0 + 20_000, [0, 1, 1, 1], json!({QM: 1, "g": 3})),
        ],
    });
    assert_eq!(history(&h, "?minutes=1"), expected);

    // A reload (what the engine does after a failed commit) is not a restart: the history stays.
    futures::executor::block_on(h.engine.reload()).expect("the engine reloads");
    assert_eq!(history(&h, "?minutes=1"), expected, "kept across a reload");

    for bad in ["0", "16", "x"] {
        assert_eq!(
            h.call(
                "GET",
                &format!("/api/v1/status/queues/hq/history?minutes={bad}"),
                None
            ),
            (
                400,
                json!({"error": format!("minutes must be an integer between 1 and 15, got '{bad}'")})
            )
        );
    }

    // A restart: memory only, so nothing is measured until the first command, which is the baseline.
    let h = h.restart(HttpConfig::default());
    assert_eq!(
        history(&h, ""),
        json!({"queue": "hq", "bucketSeconds": 5, "windowSeconds": 900, "from": null,
               "to": iso_ms(T0 + 23_000), "measuredSince": null, "groups": [],
               "groupsNotRecorded": [QM, "g"], "buckets": []})
    );
    h.advance(3_000);
    push(&h, 1);
    h.advance(1_000);
    assert_eq!(
        history(&h, ""),
        json!({"queue": "hq", "bucketSeconds": 5, "windowSeconds": 900,
               "from": iso_ms(T0 + 25_000), "to": iso_ms(T0 + 27_000),
               "measuredSince": iso_ms(T0 + 26_000), "groups": [QM, "g"], "groupsNotRecorded": [],
               "buckets": [bucket(T0 + 25_000, [1, 0, 0, 0], json!({QM: 2, "g": 4}))]})
    );
}

#[test]
fn a_long_run_keeps_the_last_fifteen_minutes() {
    let h = Harness::new();
    h.call("POST", "/api/v1/configure", Some(json!({"queue": "hq"})));
    // One push in each of 240 buckets (20 minutes).
    for _ in 0..240 {
        h.advance(5_000);
        push(&h, 1);
    }
    let body = history(&h, "");
    let buckets = body["buckets"].as_array().unwrap();
    assert_eq!(buckets.len(), 180, "15 minutes of 5 s buckets");
    let now_bucket = (h.now() / 5_000) * 5_000;
    assert_eq!(buckets[0]["at"], iso_ms(now_bucket - 179 * 5_000));
    assert_eq!(buckets[179]["at"], iso_ms(now_bucket));
    assert!(
        buckets.iter().all(|b| b["pushed"] == 1),
        "every kept bucket holds its push: {body}"
    );
    assert_eq!(body["measuredSince"], iso_ms(T0));
}

#[test]
fn the_backlog_of_at_most_sixteen_groups_is_recorded() {
    let h = Harness::new();
    h.call("POST", "/api/v1/configure", Some(json!({"queue": "hq"})));
    push(&h, 1);
    for i in 0..17 {
        let target =
            format!("/api/v1/pop/queue/hq?batch=1&consumerGroup=g{i:02}&subscriptionMode=all");
        assert_eq!(h.pop_messages(&target).len(), 1);
    }
    let body = history(&h, "?minutes=1");
    let recorded: Vec<String> = (0..16).map(|i| format!("g{i:02}")).collect();
    assert_eq!(body["groups"], json!(recorded));
    assert_eq!(body["groupsNotRecorded"], json!(["g16"]));
    let last = &body["buckets"][0];
    assert_eq!(last["delivered"], 17);
    assert_eq!(last["backlog"].as_object().unwrap().len(), 16, "{body}");
}

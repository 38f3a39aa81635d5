//! Issue 16 over the HTTP layer (native engine over `MemStore`): the `/configure` options
//! `reclaimLimit`, `retryBackoff`, `deliveryLog` (validated, echoed only when set, stored), the
//! lane view's hold and quarantine, `GET /api/v1/deliveries`, and the bulk dead-letter routes
//! `POST /api/v1/dlq/replay` and `POST /api/v1/dlq/delete`.

#![cfg(not(target_arch = "wasm32"))]

use crate::http_support;

use http_support::*;
use queen_edge::http::HttpConfig;
use serde_json::{json, Value};

fn s(v: &Value) -> String {
    v.as_str().expect("a string").to_string()
}

fn configure(h: &Harness, queue: &str, options: Value) -> (u16, Value) {
    h.call(
        "POST",
        "/api/v1/configure",
        Some(json!({"queue": queue, "options": options})),
    )
}

fn push(h: &Harness, queue: &str, partition: &str, tx: &str) -> Value {
    let (status, body) = h.call(
        "POST",
        "/api/v1/push",
        Some(
            json!({"items": [{"queue": queue, "partition": partition, "payload": {"tx": tx},
                              "transactionId": tx}]}),
        ),
    );
    assert_eq!(status, 201, "{body}");
    body[0].clone()
}

fn ack(h: &Harness, message: &Value, lease: &Value, status: &str, error: &str) -> Value {
    let (code, body) = h.call(
        "POST",
        "/api/v1/ack",
        Some(
            json!({"transactionId": message["transactionId"], "partitionId": message["partitionId"],
                    "status": status, "error": error, "leaseId": lease}),
        ),
    );
    assert_eq!(code, 200, "{body}");
    body
}

/// Files `n` messages of `queue`/`partition` as dead letters with `error`, one explicit `dlq` each.
fn file_dead_letters(h: &Harness, queue: &str, partition: &str, n: usize, error: &str) {
    for i in 0..n {
        push(
            h,
            queue,
            partition,
            &format!("{queue}-{partition}-{error}-{i}"),
        );
        let (_, popped) = h.call(
            "GET",
            &format!("/api/v1/pop/queue/{queue}/partition/{partition}"),
            None,
        );
        let acked = ack(h, &popped["messages"][0], &popped["leaseId"], "dlq", error);
        assert_eq!(acked[0]["dlq"], true, "{acked}");
    }
}

const QUEEN_OPTION_KEYS: [&str; 15] = [
    "priority",
    "leaseTime",
    "retryLimit",
    "retryDelay",
    "maxSize",
    "ttl",
    "deadLetterQueue",
    "dlqAfterMaxRetries",
    "delayedProcessing",
    "windowBuffer",
    "retentionSeconds",
    "completedRetentionSeconds",
    "retentionEnabled",
    "encryptionEnabled",
    "maxWaitTimeSeconds",
];

#[test]
fn with_every_option_off_configure_echoes_queens_fifteen_options_only() {
    let h = Harness::new();
    let (status, body) = configure(&h, "q", json!({}));
    assert_eq!(status, 200);
    let mut keys: Vec<&str> = body["options"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    let mut queen = QUEEN_OPTION_KEYS.to_vec();
    queen.sort();
    assert_eq!(keys, queen);
    let (_, body) = configure(&h, "q", json!({"retryBackoff": null, "deliveryLog": "off"}));
    assert_eq!(body["options"].as_object().unwrap().len(), 15);
}

#[test]
fn the_new_options_are_echoed_stored_and_survive_a_restart() {
    let h = Harness::new();
    let sent = json!({"reclaimLimit": 3, "retryBackoff": {"baseMs": 200, "factor": 1.5, "maxMs": 5000},
                      "deliveryLog": "failures"});
    let (status, body) = configure(&h, "q", sent.clone());
    assert_eq!(status, 200, "{body}");
    for key in ["reclaimLimit", "retryBackoff", "deliveryLog"] {
        assert_eq!(body["options"][key], sent[key], "{key}");
    }
    let (_, defaults) = configure(&h, "d", json!({"retryBackoff": {"baseMs": 50}}));
    assert_eq!(
        defaults["options"]["retryBackoff"],
        json!({"baseMs": 50, "factor": 2.0, "maxMs": 300000})
    );
    // Stored: a reopened broker applies them (the backoff hold shows on the lane).
    let h = h.restart(HttpConfig::default());
    push(&h, "q", "Default", "t1");
    let (_, popped) = h.call("GET", "/api/v1/pop/queue/q", None);
    ack(
        &h,
        &popped["messages"][0],
        &popped["leaseId"],
        "failed",
        "boom",
    );
    let (_, view) = h.call("GET", "/api/v1/resources/queues/q", None);
    let lane = &view["partitions"][0]["lanes"][0];
    assert_eq!(
        lane["holdUntil"],
        json!(iso_ms(h.now() + 200)),
        "baseMs, not retryDelay: {view}"
    );
}

#[test]
fn bad_option_values_are_400_naming_the_field() {
    let h = Harness::new();
    for (options, field) in [
        (json!({"reclaimLimit": -1}), "reclaimLimit"),
        (json!({"reclaimLimit": 1_000_000}), "reclaimLimit"),
        (json!({"reclaimLimit": "3"}), "reclaimLimit"),
        (json!({"retryBackoff": 5}), "retryBackoff"),
        (json!({"retryBackoff": {}}), "baseMs"),
        (json!({"retryBackoff": {"baseMs": 0}}), "baseMs"),
        (
            json!({"retryBackoff": {"baseMs": 10, "factor": 0.5}}),
            "factor",
        ),
        (
            json!({"retryBackoff": {"baseMs": 10, "factor": "2"}}),
            "factor",
        ),
        (
            json!({"retryBackoff": {"baseMs": 100, "maxMs": 10}}),
            "maxMs",
        ),
        (json!({"deliveryLog": "some"}), "deliveryLog"),
        (json!({"deliveryLog": true}), "deliveryLog"),
    ] {
        let (status, body) = configure(&h, "q", options.clone());
        assert_eq!(status, 400, "{options} -> {body}");
        assert!(s(&body["error"]).contains(field), "{options} -> {body}");
    }
    let (status, _) = h.call("GET", "/api/v1/resources/queues/q", None);
    assert_eq!(status, 404, "a refused configure creates nothing");
}

#[test]
fn a_quarantined_lane_shows_its_head_in_the_queue_view() {
    let h = Harness::new();
    configure(&h, "q", json!({"reclaimLimit": 1, "leaseTime": 1}));
    for i in 0..3 {
        push(&h, "q", "Default", &format!("t{i}"));
    }
    let (_, first) = h.call("GET", "/api/v1/pop/queue/q?batch=3", None);
    assert_eq!(first["messages"].as_array().unwrap().len(), 3);
    h.advance(1000);
    let (_, alone) = h.call("GET", "/api/v1/pop/queue/q?batch=3", None);
    assert_eq!(alone["messages"].as_array().unwrap().len(), 1);
    let (_, view) = h.call("GET", "/api/v1/resources/queues/q", None);
    let lane = &view["partitions"][0]["lanes"][0];
    assert_eq!(lane["quarantinedOffset"], 0, "{view}");
}

#[test]
fn deliveries_are_listed_filtered_and_paged() {
    let h = Harness::new();
    configure(&h, "q", json!({"deliveryLog": "all", "retryDelay": 0}));
    configure(&h, "quiet", json!({}));
    let m1 = push(&h, "q", "p1", "a1");
    push(&h, "q", "p2", "b1");
    push(&h, "quiet", "Default", "c1");
    let (_, popped) = h.call("GET", "/api/v1/pop/queue/q/partition/p1", None);
    ack(
        &h,
        &popped["messages"][0],
        &popped["leaseId"],
        "failed",
        "boom",
    );
    let (_, popped) = h.call("GET", "/api/v1/pop/queue/q/partition/p1", None);
    ack(
        &h,
        &popped["messages"][0],
        &popped["leaseId"],
        "completed",
        "",
    );
    let (_, popped) = h.call(
        "GET",
        "/api/v1/pop/queue/q/partition/p2?consumerGroup=g&subscriptionMode=all",
        None,
    );
    let (code, _) = h.call(
        "POST",
        "/api/v1/ack",
        Some(
            json!({"transactionId": "b1", "partitionId": popped["messages"][0]["partitionId"],
                    "status": "completed", "consumerGroup": "g"}),
        ),
    );
    assert_eq!(code, 200);
    let (_, quiet) = h.call("GET", "/api/v1/pop/queue/quiet", None);
    ack(
        &h,
        &quiet["messages"][0],
        &quiet["leaseId"],
        "completed",
        "",
    );

    let (status, all) = h.call("GET", "/api/v1/deliveries", None);
    assert_eq!(status, 200, "{all}");
    assert_eq!(
        all["total"], 3,
        "the queue without a log records nothing: {all}"
    );
    let newest = &all["deliveries"][0];
    assert_eq!(
        (&newest["consumerGroup"], &newest["outcome"]),
        (&json!("g"), &json!("completed"))
    );
    let (_, by_tx) = h.call("GET", "/api/v1/deliveries?queue=q&transactionId=a1", None);
    let outcomes: Vec<&Value> = by_tx["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| &d["outcome"])
        .collect();
    assert_eq!(outcomes, vec!["completed", "failed"]);
    let failed = &by_tx["deliveries"][1];
    assert_eq!(failed["error"], "boom");
    assert_eq!(failed["partitionId"], m1["partitionId"]);
    assert_eq!(
        (&failed["fromOffset"], &failed["toOffset"]),
        (&json!(0), &json!(0))
    );
    let (_, g) = h.call(
        "GET",
        "/api/v1/deliveries?consumerGroup=__QUEUE_MODE__&partition=p1",
        None,
    );
    assert_eq!(g["total"], 2);
    let (_, page) = h.call("GET", "/api/v1/deliveries?limit=1&offset=1", None);
    assert_eq!(page["deliveries"].as_array().unwrap().len(), 1);
    assert_eq!(page["deliveries"][0], all["deliveries"][1]);
    assert_eq!(page["pagination"], json!({"limit": 1, "offset": 1}));
    for bad in ["limit=0", "limit=x", "offset=-1"] {
        let (status, body) = h.call("GET", &format!("/api/v1/deliveries?{bad}"), None);
        assert_eq!(status, 400, "{bad}: {body}");
    }
}

#[test]
fn bulk_dry_run_counts_and_samples_and_changes_nothing() {
    let h = Harness::new();
    file_dead_letters(&h, "q", "p1", 12, "timeout");
    file_dead_letters(&h, "q", "p2", 3, "parse");
    let (status, body) = h.call(
        "POST",
        "/api/v1/dlq/replay",
        Some(json!({"queue": "q", "errorContains": "time", "dryRun": true})),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (&body["count"], &body["dryRun"]),
        (&json!(12), &json!(true))
    );
    let sample = body["sample"].as_array().unwrap();
    assert_eq!(sample.len(), 10);
    assert!(sample.iter().all(|d| d["errorMessage"] == "timeout"));
    let (_, limited) = h.call(
        "POST",
        "/api/v1/dlq/delete",
        Some(json!({"partition": "p2", "dryRun": true, "limit": 2})),
    );
    assert_eq!(
        (
            &limited["count"],
            limited["sample"].as_array().unwrap().len()
        ),
        (&json!(2), 2)
    );
    let (_, dlq) = h.call("GET", "/api/v1/dlq?queue=q", None);
    assert_eq!(dlq["total"], 15, "a dry run changes nothing");
}

#[test]
fn bulk_replay_goes_in_chunks_as_dlq_ids_and_twice_adds_nothing() {
    let h = Harness::new();
    file_dead_letters(&h, "big", "Default", 230, "crash");
    file_dead_letters(&h, "big", "other", 2, "crash");
    let (status, body) = h.call(
        "POST",
        "/api/v1/dlq/replay",
        Some(json!({"queue": "big", "partition": "Default", "limit": 210})),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"dryRun": false, "selected": 210, "replayed": 210, "queued": 210, "duplicates": 0, "chunks": 3})
    );
    let (_, dlq) = h.call("GET", "/api/v1/dlq?queue=big&limit=1000", None);
    assert_eq!(dlq["total"], 22);
    // The replayed rows are new messages with transactionId dlq:<row id>, oldest rows first.
    let (_, popped) = h.call(
        "GET",
        "/api/v1/pop/queue/big/partition/Default?batch=1000",
        None,
    );
    let messages = popped["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 210);
    assert!(messages
        .iter()
        .all(|m| s(&m["transactionId"]).starts_with("dlq:")));
    // Replaying a row again (the same transaction id) adds nothing.
    let again = &messages[0];
    let (_, dup) = h.call(
        "POST",
        "/api/v1/push",
        Some(json!({"items": [{"queue": "big", "partition": "Default",
                              "transactionId": again["transactionId"], "payload": 1}]})),
    );
    assert_eq!(dup[0]["status"], "duplicate");
    // The rest: the filter matches nothing twice.
    let (_, rest) = h.call("POST", "/api/v1/dlq/replay", Some(json!({"queue": "big"})));
    assert_eq!(
        (&rest["replayed"], &rest["chunks"]),
        (&json!(22), &json!(1))
    );
    let (_, none) = h.call("POST", "/api/v1/dlq/replay", Some(json!({"queue": "big"})));
    assert_eq!((&none["replayed"], &none["chunks"]), (&json!(0), &json!(0)));
}

/// A message that two groups filed is one message address with two rows. Bulk replay works by address,
/// as `admin.retryMessage` does: one copy, both rows gone, even with a filter naming one group (the copy
/// reaches every group). Before, each row was pushed, so every group received the message twice, under
/// two transaction ids no client could see as the same.
#[test]
fn bulk_replay_pushes_one_copy_per_message_address() {
    let h = Harness::new();
    push(&h, "m", "p", "both");
    push(&h, "m", "p", "only-g1");
    // g1 files both messages, g2 only the first.
    for (group, count) in [("g1", 2), ("g2", 1)] {
        for _ in 0..count {
            let (_, popped) = h.call(
                "GET",
                &format!(
                    "/api/v1/pop/queue/m/partition/p?consumerGroup={group}&subscriptionMode=all"
                ),
                None,
            );
            let m = &popped["messages"][0];
            let (code, body) = h.call(
                "POST",
                "/api/v1/ack",
                Some(
                    json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                            "status": "dlq", "error": "bad", "leaseId": popped["leaseId"],
                            "consumerGroup": group}),
                ),
            );
            assert_eq!((code, &body[0]["dlq"]), (200, &json!(true)), "{body}");
        }
    }
    let (_, dlq) = h.call("GET", "/api/v1/dlq?queue=m", None);
    assert_eq!(dlq["total"], 3, "{dlq}");
    let (status, body) = h.call(
        "POST",
        "/api/v1/dlq/replay",
        Some(json!({"queue": "m", "consumerGroup": "g1"})),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"dryRun": false, "selected": 2, "replayed": 3, "queued": 2, "duplicates": 0, "chunks": 1}),
        "two rows selected, at two addresses, with three rows"
    );
    let (_, dlq) = h.call("GET", "/api/v1/dlq?queue=m", None);
    assert_eq!(
        dlq["total"], 0,
        "g2's row at the replayed address went too: {dlq}"
    );
    // A new group reading from the start sees the two originals and one copy of each.
    let (_, all) = h.call(
        "GET",
        "/api/v1/pop/queue/m/partition/p?consumerGroup=g3&subscriptionMode=all&batch=10",
        None,
    );
    let payloads: Vec<String> = all["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["data"]["tx"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(payloads, ["both", "only-g1", "both", "only-g1"]);
}

#[test]
fn bulk_delete_by_group_error_and_time() {
    let h = Harness::new();
    file_dead_letters(&h, "q", "Default", 4, "old");
    h.advance(60_000);
    let middle = iso_ms(h.now());
    file_dead_letters(&h, "q", "Default", 3, "new");
    let (_, none) = h.call(
        "POST",
        "/api/v1/dlq/delete",
        Some(json!({"consumerGroup": "somebody-else"})),
    );
    assert_eq!(none["deleted"], 0);
    let (_, body) = h.call(
        "POST",
        "/api/v1/dlq/delete",
        Some(json!({"consumerGroup": "__QUEUE_MODE__", "to": middle, "errorContains": "ol"})),
    );
    assert_eq!(
        body,
        json!({"dryRun": false, "selected": 4, "deleted": 4, "chunks": 1}),
        "{body}"
    );
    let (_, from) = h.call(
        "POST",
        "/api/v1/dlq/delete",
        Some(json!({"from": middle, "dryRun": true})),
    );
    assert_eq!(from["count"], 3);
    let (_, dlq) = h.call("GET", "/api/v1/dlq?queue=q", None);
    assert_eq!(dlq["total"], 3);
}

#[test]
fn bad_bulk_bodies_are_400() {
    let h = Harness::new();
    for (body, needle) in [
        (json!({"limit": 0}), "limit"),
        (json!({"limit": -3}), "limit"),
        (json!({"from": "yesterday"}), "from"),
        (
            json!({"from": "2024-05-02T00:00:00Z", "to": "2024-05-01T00:00:00Z"}),
            "later",
        ),
        (json!({"dryRun": "yes"}), "dryRun"),
        (json!({"queue": 5}), "queue"),
        (json!([1]), "object"),
    ] {
        for route in ["/api/v1/dlq/replay", "/api/v1/dlq/delete"] {
            let (status, answer) = h.call("POST", route, Some(body.clone()));
            assert_eq!(status, 400, "{route} {body} -> {answer}");
            assert!(
                s(&answer["error"]).contains(needle),
                "{route} {body} -> {answer}"
            );
        }
    }
}

//! Golden tests, one or more per route: request in, exact status and JSON out (generated ids are read
//! from earlier answers and put into the expected JSON).

#![cfg(not(target_arch = "wasm32"))]

use crate::http_support;

use http_support::*;
use queen_edge::http::{AuthConfig, AuthToken, HttpConfig, HttpRequest, Role};
use serde_json::{json, Value};

fn push_one(h: &Harness, queue: &str, tx: &str, payload: Value) -> Value {
    let (status, body) = h.call(
        "POST",
        "/api/v1/push",
        Some(json!({"items": [{"queue": queue, "payload": payload, "transactionId": tx}]})),
    );
    assert_eq!(status, 201, "{body}");
    body[0].clone()
}

fn pop(h: &Harness, target: &str) -> (u16, Value) {
    h.call("GET", target, None)
}

fn s(v: &Value) -> String {
    v.as_str().expect("a string").to_string()
}

// ---------------------------------------------------------------------------------------------
// push
// ---------------------------------------------------------------------------------------------

#[test]
fn push_answers_201_with_snake_and_camel_keys_and_duplicates_carry_the_winner() {
    let h = Harness::new();
    let (status, body) = h.call(
        "POST",
        "/api/v1/push",
        Some(json!({"items": [
            {"queue": "orders", "partition": "p1", "payload": {"n": 1}, "transactionId": "t1"},
            {"queue": "orders", "partition": "p1", "payload": {"n": 2}, "transactionId": "t1"},
            {"queue": "orders", "payload": null, "transactionId": "t1",
             "traceId": "0b9e2f2c-8a3e-4c1d-9f00-1234567890ab"}
        ]})),
    );
    assert_eq!(status, 201);
    let id0 = s(&body[0]["message_id"]);
    let pid0 = s(&body[0]["partition_id"]);
    let id2 = s(&body[2]["message_id"]);
    let pid2 = s(&body[2]["partition_id"]);
    assert_ne!(
        pid0, pid2,
        "same transactionId on another partition is another message"
    );
    assert_eq!(
        body,
        json!([
            {"index": 0, "status": "queued", "transaction_id": "t1", "transactionId": "t1",
             "message_id": id0, "messageId": id0, "partition_id": pid0, "partitionId": pid0,
             "trace_id": null, "queueName": "orders", "partition": "p1", "offset": 0},
            {"index": 1, "status": "duplicate", "transaction_id": "t1", "transactionId": "t1",
             "message_id": id0, "messageId": id0, "partition_id": pid0, "partitionId": pid0,
             "queueName": "orders", "partition": "p1"},
            {"index": 2, "status": "queued", "transaction_id": "t1", "transactionId": "t1",
             "message_id": id2, "messageId": id2, "partition_id": pid2, "partitionId": pid2,
             "trace_id": "0b9e2f2c-8a3e-4c1d-9f00-1234567890ab", "queueName": "orders",
             "partition": "Default", "offset": 0}
        ])
    );
}

#[test]
fn push_empty_items_is_201_empty_array() {
    let h = Harness::new();
    assert_eq!(
        h.call("POST", "/api/v1/push", Some(json!({"items": []}))),
        (201, json!([]))
    );
}

#[test]
fn push_mints_a_transaction_id_and_null_payload_round_trips() {
    let h = Harness::new();
    let (status, body) = h.call(
        "POST",
        "/api/v1/push",
        Some(json!({"items": [{"queue": "nulls"}], "bufferMs": 10, "bufferMax": 5})),
    );
    assert_eq!(status, 201);
    assert!(!s(&body[0]["transactionId"]).is_empty());
    let (status, popped) = pop(&h, "/api/v1/pop/queue/nulls");
    assert_eq!(status, 200);
    assert_eq!(popped["messages"][0]["data"], Value::Null);
    assert_eq!(
        popped["messages"][0]["transactionId"],
        body[0]["transactionId"]
    );
}

#[test]
fn payloads_come_back_as_the_client_sent_them() {
    // Queen hands a payload back as it was pushed: here its text is kept byte for byte (whitespace
    // inside it, the spelling of numbers and escapes), in pop replies, the DLQ listing and the message
    // browser, even where the JSON does not fit a `serde_json::Value` (1e400).
    let h = Harness::new();
    let sent = [r#"{ "b" : 2.50, "a": [1,  "\u00e9"] }"#, "1e400", "null"];
    let body = format!(
        r#"{{"items": [{{"queue": "raw", "transactionId": "t0", "payload": {} }},
                      {{"queue": "raw", "transactionId": "t1", "payload":{}}},
                      {{"queue": "raw", "transactionId": "t2", "payload" : {}}}]}}"#,
        sent[0], sent[1], sent[2]
    );
    let (status, pushed) = h.call_raw("POST", "/api/v1/push", body.as_bytes());
    assert_eq!(status, 201, "{pushed}");
    let pid = s(&pushed[0]["partitionId"]);
    let text = |r: &queen_edge::http::HttpResponse| String::from_utf8(r.body.clone()).unwrap();
    let popped = h.send(HttpRequest::new("GET", "/api/v1/pop/queue/raw?batch=10"));
    assert_eq!(popped.status, 200);
    let popped = text(&popped);
    for p in sent {
        assert!(
            popped.contains(&format!(r#""data":{p},"#)),
            "{p} in {popped}"
        );
    }
    let shown = text(&h.send(HttpRequest::new(
        "GET",
        &format!("/api/v1/messages/{pid}/t1"),
    )));
    assert!(shown.contains(r#""payload":1e400,"data":1e400"#), "{shown}");
    let lease = popped
        .split(r#""leaseId":""#)
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    let (status, acked) = h.call(
        "POST",
        "/api/v1/ack",
        Some(json!({"transactionId": "t0", "partitionId": pid, "status": "dlq", "leaseId": lease})),
    );
    assert_eq!((status, &acked[0]["dlq"]), (200, &json!(true)), "{acked}");
    let listing = text(&h.send(HttpRequest::new("GET", "/api/v1/dlq?queue=raw")));
    assert!(
        listing.contains(&format!(r#""data":{},"#, sent[0])),
        "{listing}"
    );
}

#[test]
fn a_payload_nested_deeper_than_512_levels_is_refused() {
    // A payload is kept as its text, but one nested past what every Queen client's JSON reader takes
    // (Python's stops near 1,000 levels) would be accepted and then stall its partition for those
    // consumers: 512 arrays or objects deep is taken and comes back as sent, 513 is a 400 naming the item
    // (`Limits::max_payload_depth`; docs/decisions.md, "Payloads nest at most 512 levels (session 32)").
    let h = Harness::new();
    let nested = |depth: usize| "[".repeat(depth) + &"]".repeat(depth);
    let push = |payload: &str| {
        let body = format!(
            r#"{{"items": [{{"queue": "deep", "transactionId": "t{}", "payload": {payload}}}]}}"#,
            payload.len()
        );
        h.call_raw("POST", "/api/v1/push", body.as_bytes())
    };
    let (status, refused) = push(&nested(513));
    assert_eq!(
        (status, refused),
        (
            400,
            json!({"error": "Payload nested deeper than 512 levels (items[0].payload)"})
        )
    );
    let object = "{\"a\":".repeat(513) + "1" + &"}".repeat(513);
    assert_eq!(push(&object).0, 400, "an object nests the same way");
    // Brackets inside strings are text, not nesting.
    let text = format!("[\"{}\\\"{}\"]", "[".repeat(600), "{".repeat(600));
    assert_eq!(push(&text).0, 201, "brackets in a string");

    let (status, pushed) = push(&nested(512));
    assert_eq!(status, 201, "{pushed}");
    let popped = h.send(HttpRequest::new("GET", "/api/v1/pop/queue/deep?batch=10"));
    assert_eq!(popped.status, 200);
    let popped = String::from_utf8(popped.body).unwrap();
    assert!(
        popped.contains(&format!(r#""data":{},"#, nested(512))),
        "the 512-deep payload comes back as sent"
    );
}

// ---------------------------------------------------------------------------------------------
// pop
// ---------------------------------------------------------------------------------------------

#[test]
fn pop_answers_the_contract_shape() {
    let h = Harness::new();
    let pushed = push_one(&h, "orders", "t1", json!({"a": 1}));
    let (status, body) = pop(
        &h,
        "/api/v1/pop/queue/orders?autopilot=false&batch=10&wait=false&timeout=30000&frames=true",
    );
    assert_eq!(status, 200);
    let lease = s(&body["leaseId"]);
    assert!(!lease.is_empty());
    let pid = s(&pushed["partitionId"]);
    assert_eq!(
        body,
        json!({
            "success": true, "queue": "orders", "partition": "Default", "partitionId": pid,
            "leaseId": lease, "consumerGroup": "__QUEUE_MODE__", "partitionsClaimed": 1,
            "messages": [{
                "id": pushed["messageId"], "transactionId": "t1", "traceId": null, "data": {"a": 1},
                "producerSub": null, "createdAt": iso_us(T0), "queue": "orders",
                "partition": "Default", "partitionId": pid, "leaseId": lease,
                "consumerGroup": "__QUEUE_MODE__", "deliveryAttempt": 1, "offset": 0,
                "retryCount": 0
            }]
        })
    );
}

#[test]
fn pop_on_missing_queue_or_partition_is_204_without_body() {
    let h = Harness::new();
    for target in [
        "/api/v1/pop/queue/nope",
        "/api/v1/pop/queue/nope/partition/p1",
        "/api/v1/pop/queue/nope?wait=false&consumerGroup=g",
    ] {
        let r = h.send(HttpRequest::new("GET", target));
        assert_eq!(r.status, 204, "{target}");
        assert!(r.body.is_empty());
        assert_eq!(r.header("Access-Control-Allow-Origin"), Some("*"));
    }
}

#[test]
fn pop_specific_partition_and_batch_budget() {
    let h = Harness::new();
    h.call(
        "POST",
        "/api/v1/push",
        Some(json!({"items": [
            {"queue": "q", "partition": "a", "payload": 1},
            {"queue": "q", "partition": "a", "payload": 2},
            {"queue": "q", "partition": "a", "payload": 3},
            {"queue": "q", "partition": "b", "payload": 4}
        ]})),
    );
    let (status, body) = pop(&h, "/api/v1/pop/queue/q/partition/b?batch=10");
    assert_eq!(status, 200);
    assert_eq!(body["partition"], "b");
    assert_eq!(body["messages"].as_array().unwrap().len(), 1);
    assert_eq!(body["messages"][0]["data"], 4);
    let (status, body) = pop(&h, "/api/v1/pop/queue/q/partition/a?batch=2");
    assert_eq!(status, 200);
    let data: Vec<_> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["data"].clone())
        .collect();
    assert_eq!(data, vec![json!(1), json!(2)]);
    assert_eq!(body["messages"][1]["offset"], 1);
}

#[test]
fn pop_discovery_by_namespace_and_task() {
    let h = Harness::new();
    push_one(&h, "billing.invoices.v2", "t1", json!("x"));
    let (status, body) = pop(&h, "/api/v1/pop?namespace=billing&task=invoices");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["messages"][0]["queue"], "billing.invoices.v2");
    assert_eq!(body["queue"], "billing.invoices.v2");
    assert_eq!(pop(&h, "/api/v1/pop?namespace=other").0, 204);
}

#[test]
fn pop_auto_ack_has_no_lease() {
    let h = Harness::new();
    push_one(&h, "q", "t1", json!(1));
    let (status, body) = pop(&h, "/api/v1/pop/queue/q?autoAck=true");
    assert_eq!(status, 200);
    assert_eq!(body["leaseId"], "");
    assert_eq!(body["messages"][0]["leaseId"], "");
    assert_eq!(
        pop(&h, "/api/v1/pop/queue/q").0,
        204,
        "autoAck committed the cursor"
    );
}

#[test]
fn pop_autopilot_without_batch_sizes_the_batch() {
    let h = Harness::new();
    let items: Vec<Value> = (0..5)
        .map(|i| json!({"queue": "auto", "payload": i}))
        .collect();
    h.call("POST", "/api/v1/push", Some(json!({ "items": items })));
    let (status, body) = pop(
        &h,
        "/api/v1/pop/queue/auto?autopilot=true&wait=true&timeout=30000",
    );
    assert_eq!(status, 200);
    assert_eq!(body["messages"].as_array().unwrap().len(), 5, "{body}");
    assert!(body["autopilot"]["batch"].as_u64().unwrap() >= 5, "{body}");
}

#[test]
fn pop_named_group_echoes_the_group() {
    let h = Harness::new();
    push_one(&h, "q", "t1", json!(1));
    let (status, body) = pop(
        &h,
        "/api/v1/pop/queue/q?consumerGroup=g1&subscriptionMode=all",
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["consumerGroup"], "g1");
    assert_eq!(body["messages"][0]["consumerGroup"], "g1");
    // An empty consumerGroup means queue mode.
    let (status, body) = pop(&h, "/api/v1/pop/queue/q?consumerGroup=");
    assert_eq!(status, 200);
    assert_eq!(body["consumerGroup"], "__QUEUE_MODE__");
}

#[test]
fn conflating_group_answers_200_when_empty() {
    let h = Harness::new();
    push_one(&h, "c", "t1", json!(1));
    push_one(&h, "c", "t2", json!(2));
    let (status, body) = pop(
        &h,
        "/api/v1/pop/queue/c?consumerGroup=g&conflation=true&subscriptionMode=all&batch=10",
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["conflation"], true);
    let (status, body) = pop(&h, "/api/v1/pop/queue/c?consumerGroup=g&conflation=true");
    assert_eq!(status, 200, "an empty conflating pop is a 200: {body}");
    assert_eq!(body["messages"], json!([]));
    assert_eq!(body["conflation"], true);
}

// ---------------------------------------------------------------------------------------------
// long-poll
// ---------------------------------------------------------------------------------------------

#[test]
fn long_poll_wakes_on_push() {
    let h = Harness::new();
    let waiting = h.spawn(HttpRequest::new(
        "GET",
        "/api/v1/pop/queue/lp?wait=true&timeout=30000",
    ));
    h.advance(1_000);
    assert!(waiting.get().is_none(), "the pop parks");
    push_one(&h, "lp", "t1", json!("hello"));
    h.run_until_stalled();
    let r = waiting.get().expect("the push woke the pop");
    assert_eq!(r.status, 200);
    assert_eq!(response_json(&r)["messages"][0]["data"], "hello");
    assert_eq!(
        h.now(),
        T0 + 1_000,
        "answered at the push, not at the deadline"
    );
}

#[test]
fn long_poll_wakes_on_nack() {
    let h = Harness::new();
    let pushed = push_one(&h, "nq", "t1", json!(1));
    let (_, first) = pop(&h, "/api/v1/pop/queue/nq");
    let lease = s(&first["leaseId"]);
    let waiting = h.spawn(HttpRequest::new(
        "GET",
        "/api/v1/pop/queue/nq?wait=true&timeout=30000",
    ));
    h.advance(500);
    assert!(
        waiting.get().is_none(),
        "the lane is leased, so the second pop parks"
    );
    let (status, acked) = h.call(
        "POST",
        "/api/v1/ack",
        Some(
            json!({"transactionId": "t1", "partitionId": pushed["partitionId"],
                    "status": "retry", "leaseId": lease, "consumerGroup": null, "error": null}),
        ),
    );
    assert_eq!(status, 200);
    assert_eq!(acked[0]["success"], true);
    h.run_until_stalled();
    let r = waiting.get().expect("the nack woke the parked pop");
    assert_eq!(r.status, 200);
    assert_eq!(response_json(&r)["messages"][0]["transactionId"], "t1");
    assert_eq!(h.now(), T0 + 500);
}

#[test]
fn long_poll_answers_204_at_the_deadline() {
    let h = Harness::new();
    let r = h.send(HttpRequest::new(
        "GET",
        "/api/v1/pop/queue/idle?wait=true&timeout=5000",
    ));
    assert_eq!(r.status, 204);
    assert!(r.body.is_empty());
    assert_eq!(h.now(), T0 + 5_000, "really waited the whole timeout");
}

#[test]
fn long_poll_defaults_to_30s_and_clamps_to_60s() {
    let h = Harness::new();
    assert_eq!(
        h.send(HttpRequest::new("GET", "/api/v1/pop/queue/idle?wait=true"))
            .status,
        204
    );
    assert_eq!(h.now(), T0 + 30_000);
    assert_eq!(
        h.send(HttpRequest::new(
            "GET",
            "/api/v1/pop/queue/idle?wait=true&timeout=600000"
        ))
        .status,
        204
    );
    assert_eq!(h.now(), T0 + 30_000 + 60_000);
}

#[test]
fn no_wait_answers_at_once() {
    let h = Harness::new();
    assert_eq!(
        h.send(HttpRequest::new(
            "GET",
            "/api/v1/pop/queue/idle?wait=false&timeout=30000"
        ))
        .status,
        204
    );
    assert_eq!(h.now(), T0);
}

// ---------------------------------------------------------------------------------------------
// ack
// ---------------------------------------------------------------------------------------------

#[test]
fn single_ack_answers_an_array() {
    let h = Harness::new();
    let pushed = push_one(&h, "q", "t1", json!(1));
    let (_, popped) = pop(&h, "/api/v1/pop/queue/q");
    let pid = s(&pushed["partitionId"]);
    let (status, body) = h.call(
        "POST",
        "/api/v1/ack",
        Some(
            json!({"transactionId": "t1", "partitionId": pid, "status": "completed",
                    "error": null, "consumerGroup": null, "leaseId": popped["leaseId"]}),
        ),
    );
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!([{"index": 0, "transactionId": "t1", "partitionId": pid, "success": true,
                "error": null, "queueName": "q", "partitionName": "Default",
                "leaseReleased": true, "dlq": false, "status": "completed"}])
    );
}

#[test]
fn batch_ack_is_index_aligned_with_null_errors() {
    let h = Harness::new();
    let items: Vec<Value> = (0..3)
        .map(|i| json!({"queue": "q", "payload": i, "transactionId": format!("t{i}")}))
        .collect();
    let (_, pushed) = h.call("POST", "/api/v1/push", Some(json!({ "items": items })));
    let pid = s(&pushed[0]["partitionId"]);
    let (_, popped) = pop(&h, "/api/v1/pop/queue/q?batch=3");
    let lease = s(&popped["leaseId"]);
    let (status, body) = h.call(
        "POST",
        "/api/v1/ack/batch",
        Some(json!({"acknowledgments": [
            {"transactionId": "t0", "partitionId": pid, "status": "completed", "error": null, "leaseId": lease},
            {"transactionId": "t1", "partitionId": pid, "status": "completed", "error": null, "leaseId": lease},
            {"transactionId": "nope", "partitionId": pid, "status": "completed", "error": null}
        ], "consumerGroup": null})),
    );
    assert_eq!(status, 200);
    assert_eq!(body.as_array().unwrap().len(), 3);
    for (i, item) in body.as_array().unwrap().iter().enumerate() {
        assert_eq!(item["index"], i);
    }
    assert_eq!(body[0]["success"], true);
    assert_eq!(body[0]["error"], Value::Null);
    assert_eq!(body[1]["success"], true);
    assert_eq!(body[1]["error"], Value::Null);
    assert_eq!(body[1]["leaseReleased"], false, "t2 is still in flight");
    assert_eq!(body[2]["success"], false);
    assert_eq!(body[2]["error"], "Message not found");
}

#[test]
fn ack_with_a_foreign_lease_is_refused_per_item() {
    let h = Harness::new();
    let pushed = push_one(&h, "q", "t1", json!(1));
    pop(&h, "/api/v1/pop/queue/q");
    let (status, body) = h.call(
        "POST",
        "/api/v1/ack",
        Some(json!({"transactionId": "t1", "partitionId": pushed["partitionId"], "leaseId": "not-the-lease"})),
    );
    assert_eq!(status, 200);
    assert_eq!(body[0]["success"], false);
    assert_eq!(body[0]["error"], "Invalid or expired lease");
}

#[test]
fn acks_for_a_group_that_never_popped_are_refused_and_make_no_group() {
    // QA repro: the refused ack made group X, whose first pop (mode new) then got the history.
    let h = Harness::new();
    let mut pid = Value::Null;
    for tx in ["h0", "h1", "h2"] {
        pid = push_one(&h, "Q", tx, json!(tx))["partitionId"].clone();
    }
    let (status, body) = h.call(
        "POST",
        "/api/v1/ack",
        Some(
            json!({"transactionId": "h1", "partitionId": pid, "consumerGroup": "X",
                    "leaseId": "01a2470a-0000-7000-8000-000000000000", "status": "completed"}),
        ),
    );
    assert_eq!(status, 200);
    assert_eq!(body[0]["success"], false);
    assert_eq!(body[0]["error"], "Invalid or expired lease");
    let (status, body) = h.call(
        "POST",
        "/api/v1/ack/batch",
        Some(json!({"consumerGroup": "X", "acknowledgments": [
            {"transactionId": "h0", "partitionId": pid, "status": "completed"},
            {"transactionId": "h2", "partitionId": pid, "status": "dlq"}]})),
    );
    assert_eq!(status, 200);
    for item in body.as_array().unwrap() {
        assert_eq!(item["success"], false, "{item}");
        assert_eq!(
            item["error"], "Consumer group has no cursor on this partition",
            "{item}"
        );
    }
    assert_eq!(h.call("GET", "/api/v1/consumer-groups", None).1, json!([]));
    push_one(&h, "Q", "new0", json!("new0"));
    h.advance(1);
    assert_eq!(
        pop(&h, "/api/v1/pop/queue/Q?batch=10&consumerGroup=X").0,
        204,
        "X's first pop applies mode new"
    );
    h.advance(1);
    push_one(&h, "Q", "new1", json!("new1"));
    let got = h.pop_messages("/api/v1/pop/queue/Q?batch=10&consumerGroup=X");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["transactionId"], "new1");
}

#[test]
fn failed_ack_with_no_budget_files_a_dead_letter() {
    let h = Harness::new();
    h.call(
        "POST",
        "/api/v1/configure",
        Some(json!({"queue": "d", "options": {"retryLimit": 0}})),
    );
    let pushed = push_one(&h, "d", "t1", json!({"x": 1}));
    let (_, popped) = pop(&h, "/api/v1/pop/queue/d");
    let (status, body) = h.call(
        "POST",
        "/api/v1/ack",
        Some(
            json!({"transactionId": "t1", "partitionId": pushed["partitionId"],
                    "status": "failed", "error": "boom", "leaseId": popped["leaseId"]}),
        ),
    );
    assert_eq!(status, 200);
    assert_eq!(body[0]["success"], true);
    assert_eq!(body[0]["dlq"], true);
    assert_eq!(body[0]["error"], Value::Null);
}

// ---------------------------------------------------------------------------------------------
// lease extend
// ---------------------------------------------------------------------------------------------

#[test]
fn lease_extend_with_no_body_renews_for_60s() {
    let h = Harness::new();
    push_one(&h, "q", "t1", json!(1));
    let (_, popped) = pop(&h, "/api/v1/pop/queue/q?leaseSeconds=10");
    let lease = s(&popped["leaseId"]);
    let r = h.send(HttpRequest::new(
        "POST",
        &format!("/api/v1/lease/{lease}/extend"),
    ));
    assert_eq!(r.status, 200);
    let expiry = iso_us(T0 + 60_000);
    assert_eq!(
        response_json(&r),
        json!({"leaseId": lease, "success": true, "renewed": 1, "newExpiresAt": expiry,
               "expiresAt": expiry, "lease_expires_at": expiry})
    );
    // Never shortens.
    let (status, body) = h.call(
        "POST",
        &format!("/api/v1/lease/{lease}/extend"),
        Some(json!({"seconds": 5})),
    );
    assert_eq!(status, 200);
    assert_eq!(body["newExpiresAt"], expiry);
}

#[test]
fn lease_extend_of_unknown_lease_is_200_with_error() {
    let h = Harness::new();
    let (status, body) = h.call(
        "POST",
        "/api/v1/lease/no-such-lease/extend",
        Some(json!({})),
    );
    assert_eq!(status, 200);
    assert_eq!(body["success"], false);
    assert_eq!(body["renewed"], 0);
    assert_eq!(body["newExpiresAt"], Value::Null);
    assert_eq!(body["error"], "Lease not found");
}

// ---------------------------------------------------------------------------------------------
// transaction
// ---------------------------------------------------------------------------------------------

#[test]
fn transaction_acks_and_pushes_atomically() {
    let h = Harness::new();
    let pushed = push_one(&h, "in", "t1", json!(1));
    let (_, popped) = pop(&h, "/api/v1/pop/queue/in");
    let pid = s(&pushed["partitionId"]);
    let (status, body) = h.call(
        "POST",
        "/api/v1/transaction",
        Some(json!({"operations": [
            {"type": "ack", "transactionId": "t1", "partitionId": pid, "status": "completed",
             "leaseId": popped["leaseId"]},
            {"type": "push", "items": [{"queue": "out", "payload": {"v": 2}, "transactionId": "o1"}]}
        ], "requiredLeases": [popped["leaseId"]]})),
    );
    assert_eq!(status, 200);
    assert_eq!(body["success"], true, "{body}");
    assert!(!s(&body["transactionId"]).is_empty());
    assert_eq!(body["results"][0]["type"], "ack");
    assert_eq!(body["results"][0]["success"], true);
    assert_eq!(body["results"][0]["error"], Value::Null);
    assert_eq!(body["results"][1]["type"], "push");
    assert_eq!(body["results"][1]["transactionId"], "o1");
    assert_eq!(body["results"][1]["queueName"], "out");
    assert_eq!(body.get("error"), None);
    let (_, out) = pop(&h, "/api/v1/pop/queue/out");
    assert_eq!(out["messages"][0]["data"], json!({"v": 2}));
}

#[test]
fn transaction_logical_failure_is_200_and_rolls_back() {
    let h = Harness::new();
    let before = h.snapshot();
    let (status, body) = h.call(
        "POST",
        "/api/v1/transaction",
        Some(json!({"operations": [
            {"type": "push", "items": [{"queue": "out", "payload": 1}]},
            {"type": "ack", "transactionId": "ghost", "partitionId": "1"}
        ]})),
    );
    assert_eq!(status, 200);
    assert_eq!(body["success"], false);
    assert!(!s(&body["error"]).is_empty());
    assert_eq!(h.snapshot(), before, "rolled back");
    assert_eq!(pop(&h, "/api/v1/pop/queue/out").0, 204);
}

#[test]
fn transaction_unknown_operation_type_fails_the_transaction() {
    let h = Harness::new();
    let (status, body) = h.call(
        "POST",
        "/api/v1/transaction",
        Some(json!({"operations": [{"type": "teleport"}]})),
    );
    assert_eq!(status, 200);
    assert_eq!(body["success"], false);
    assert!(s(&body["error"]).contains("teleport"), "{body}");
}

// ---------------------------------------------------------------------------------------------
// configure, queues
// ---------------------------------------------------------------------------------------------

#[test]
fn configure_echoes_all_15_options_with_types() {
    let h = Harness::new();
    let (status, body) = h.call(
        "POST",
        "/api/v1/configure",
        Some(
            json!({"queue": "cfg", "namespace": null, "task": "t", "options": {
            "leaseTime": 300, "retryLimit": 3, "priority": 0, "delayedProcessing": 0,
            "windowBuffer": 0, "maxSize": 0, "retentionSeconds": 0,
            "completedRetentionSeconds": 0, "encryptionEnabled": false, "unknownKey": "ignored"}}),
        ),
    );
    assert_eq!(status, 200);
    let queue_id = s(&body["queueId"]);
    let partition_id = s(&body["partitionId"]);
    assert_eq!(
        body,
        json!({"configured": true, "queueId": queue_id, "partitionId": partition_id,
               "queue": "cfg", "namespace": "", "task": "t", "options": {
                   "priority": 0, "leaseTime": 300, "retryLimit": 3, "retryDelay": 1000,
                   "maxSize": 0, "ttl": 3600, "deadLetterQueue": true, "dlqAfterMaxRetries": true,
                   "delayedProcessing": 0, "windowBuffer": 0, "retentionSeconds": 0,
                   "completedRetentionSeconds": 0, "retentionEnabled": false,
                   "encryptionEnabled": false, "maxWaitTimeSeconds": 0}})
    );
}

#[test]
fn configure_accepts_the_empty_queue_name() {
    let h = Harness::new();
    let (status, body) = h.call("POST", "/api/v1/configure", Some(json!({"queue": ""})));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["queue"], "");
}

#[test]
fn delete_queue_answers_deleted_even_when_missing() {
    let h = Harness::new();
    push_one(&h, "gone", "t1", json!(1));
    assert_eq!(
        h.call("DELETE", "/api/v1/resources/queues/gone", None),
        (
            200,
            json!({"deleted": true, "queue": "gone", "existed": true})
        )
    );
    assert_eq!(
        h.call("DELETE", "/api/v1/resources/queues/gone", None),
        (
            200,
            json!({"deleted": true, "queue": "gone", "existed": false})
        )
    );
    assert_eq!(pop(&h, "/api/v1/pop/queue/gone").0, 204);
}

#[test]
fn queue_list_and_detail() {
    let h = Harness::new();
    push_one(&h, "a.b", "t1", json!(1));
    let (status, body) = h.call("GET", "/api/v1/resources/queues", None);
    assert_eq!(status, 200);
    let q = &body["queues"][0];
    assert_eq!(q["name"], "a.b");
    assert_eq!(q["namespace"], "a");
    assert_eq!(q["task"], "b");
    assert_eq!(q["partitions"], 1);
    assert_eq!(
        q["messages"],
        json!({"total": 1, "pending": 1, "processing": 0})
    );
    assert_eq!(q["createdAt"], iso_ms(T0));

    let (status, body) = h.call("GET", "/api/v1/resources/queues/a.b", None);
    assert_eq!(status, 200);
    assert_eq!(body["name"], "a.b");
    assert_eq!(
        body["options"]["leaseTime"], 60,
        "push-created queues lease for 60 s"
    );
    assert_eq!(body["partitions"][0]["name"], "Default");
    assert_eq!(body["totals"]["total"], 1);

    assert_eq!(
        h.call("GET", "/api/v1/resources/queues/none", None),
        (404, json!({"error": "Queue not found"}))
    );
    let (status, body) = h.call("GET", "/api/v1/resources/namespaces", None);
    assert_eq!(status, 200);
    assert_eq!(body["namespaces"][0]["namespace"], "a");
    let (status, body) = h.call("GET", "/api/v1/resources/overview", None);
    assert_eq!(status, 200);
    assert_eq!(body["queues"], 1);
}

// ---------------------------------------------------------------------------------------------
// consumer-group views, depth, partitions, status/*
// ---------------------------------------------------------------------------------------------

fn push_to(h: &Harness, queue: &str, partition: &str, txs: &[&str]) {
    let items: Vec<Value> = txs
        .iter()
        .map(|t| json!({"queue": queue, "partition": partition, "payload": t, "transactionId": t}))
        .collect();
    let (status, body) = h.call("POST", "/api/v1/push", Some(json!({ "items": items })));
    assert_eq!(status, 201, "{body}");
}

/// Queue `cg`: `Default` holds three messages pushed at T0, `p2` one pushed at T0+400 s. At T0+500 s
/// group `g` (subscribed from the start) takes and acks `Default`'s first message, and group `late`
/// subscribes to new messages only.
fn group_fixture() -> Harness {
    let h = Harness::new();
    push_to(&h, "cg", "Default", &["a", "b", "c"]);
    h.advance(400_000);
    push_to(&h, "cg", "p2", &["d"]);
    h.advance(100_000);
    let (status, popped) = pop(
        &h,
        "/api/v1/pop/queue/cg/partition/Default?consumerGroup=g&subscriptionMode=all&batch=1",
    );
    assert_eq!(status, 200, "{popped}");
    let m = &popped["messages"][0];
    let (_, acked) = h.call(
        "POST",
        "/api/v1/ack",
        Some(
            json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                    "status": "completed", "consumerGroup": "g", "leaseId": popped["leaseId"]}),
        ),
    );
    assert_eq!(acked[0]["success"], true, "{acked}");
    let (status, _) = pop(
        &h,
        "/api/v1/pop/queue/cg?consumerGroup=late&subscriptionMode=new",
    );
    assert_eq!(status, 204);
    h
}

#[test]
fn consumer_groups_list_has_real_lag_and_state() {
    let h = group_fixture();
    let (status, body) = h.call("GET", "/api/v1/consumer-groups", None);
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!([
            {"name": "g", "topics": ["cg"], "queueName": "cg", "members": 2,
             "partitionsWithLag": 2, "totalLag": 3, "maxTimeLag": 500, "state": "Lagging",
             "activeLeases": 0, "subscriptionMode": "all", "subscriptionTimestamp": null,
             "subscriptionCreatedAt": iso_ms(T0 + 500_000), "conflation": false},
            {"name": "late", "topics": ["cg"], "queueName": "cg", "members": 2,
             "partitionsWithLag": 0, "totalLag": 0, "maxTimeLag": 0, "state": "Stable",
             "activeLeases": 0, "subscriptionMode": "new",
             "subscriptionTimestamp": iso_ms(T0 + 500_000),
             "subscriptionCreatedAt": iso_ms(T0 + 500_000), "conflation": false},
        ])
    );

    // The queue-mode group appears once it has a lane; a live lease counts and makes it Stable.
    h.advance(1_000);
    let (status, popped) = pop(&h, "/api/v1/pop/queue/cg/partition/p2?batch=1");
    assert_eq!(status, 200, "{popped}");
    let (_, body) = h.call("GET", "/api/v1/consumer-groups", None);
    let qm = body
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "__QUEUE_MODE__")
        .expect("queue mode listed");
    assert_eq!(qm["activeLeases"], 1, "{qm}");
    assert_eq!(
        qm["totalLag"], 4,
        "the leased message is still after the cursor: {qm}"
    );
    assert_eq!(qm["partitionsWithLag"], 2);
    assert_eq!(qm["maxTimeLag"], 501);
    assert_eq!(qm["subscriptionMode"], Value::Null);

    // A seek moves only the cursors a group has: before its first pop it makes none, and the group
    // is not listed. Claiming makes it Stable; placed by a seek, nothing claimed since, work pending
    // younger than 300 s: Dead, until it claims again.
    let h = Harness::new();
    push_to(&h, "dq", "Default", &["x"]);
    let seek = |h: &Harness| {
        let (status, _) = h.call(
            "POST",
            "/api/v1/consumer-groups/idle/queues/dq/seek",
            Some(json!({"timestamp": "2000-01-01T00:00:00Z"})),
        );
        assert_eq!(status, 200);
    };
    seek(&h);
    assert_eq!(h.call("GET", "/api/v1/consumer-groups", None).1, json!([]));
    let (status, _) = pop(
        &h,
        "/api/v1/pop/queue/dq?consumerGroup=idle&batch=1&subscriptionMode=all",
    );
    assert_eq!(status, 200);
    let (_, body) = h.call("GET", "/api/v1/consumer-groups", None);
    assert_eq!(body[0]["state"], "Stable", "{body}");
    assert_eq!(body[0]["activeLeases"], 1);
    seek(&h);
    let (_, body) = h.call("GET", "/api/v1/consumer-groups", None);
    assert_eq!(
        body,
        json!([{"name": "idle", "topics": ["dq"], "queueName": "dq", "members": 1,
                "partitionsWithLag": 1, "totalLag": 1, "maxTimeLag": 0, "state": "Dead",
                "activeLeases": 0, "subscriptionMode": "all", "subscriptionTimestamp": null,
                "subscriptionCreatedAt": iso_ms(T0), "conflation": false}])
    );
}

#[test]
fn consumer_group_detail_and_lagging() {
    let h = group_fixture();
    let (status, body) = h.call("GET", "/api/v1/consumer-groups/g", None);
    assert_eq!(status, 200);
    let ids: Vec<String> = ["Default", "p2"]
        .iter()
        .map(|p| {
            let (_, q) = h.call("GET", "/api/v1/resources/queues/cg", None);
            s(&q["partitions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["name"] == *p)
                .unwrap()["id"])
        })
        .collect();
    assert_eq!(
        body,
        json!({"cg": {"partitions": [
            {"partition": "Default", "partitionId": ids[0], "workerId": null, "leaseActive": false,
             "leaseExpiresAt": null, "offsetLag": 2, "timeLagSeconds": 500, "committedOffset": 0,
             "retryCount": 0, "totalConsumed": null, "lastConsumedAt": null},
            {"partition": "p2", "partitionId": ids[1], "workerId": null, "leaseActive": false,
             "leaseExpiresAt": null, "offsetLag": 1, "timeLagSeconds": 100, "committedOffset": -1,
             "retryCount": 0, "totalConsumed": null, "lastConsumedAt": null},
        ]}})
    );
    assert_eq!(
        h.call("GET", "/api/v1/consumer-groups/nobody", None),
        (200, json!({})),
        "an unknown group answers {{}}, as Queen does"
    );

    let (status, body) = h.call(
        "GET",
        "/api/v1/consumer-groups/lagging?minLagSeconds=60",
        None,
    );
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!([
            {"consumer_group": "g", "queue_name": "cg", "partition_name": "Default",
             "partition_id": ids[0], "worker_id": null, "offset_lag": 2, "time_lag_seconds": 500,
             "lag_hours": 0.14, "oldest_unconsumed_at": iso_ms(T0), "last_consumed_at": null},
            {"consumer_group": "g", "queue_name": "cg", "partition_name": "p2",
             "partition_id": ids[1], "worker_id": null, "offset_lag": 1, "time_lag_seconds": 100,
             "lag_hours": 0.03, "oldest_unconsumed_at": iso_ms(T0 + 400_000),
             "last_consumed_at": null},
        ])
    );
    assert_eq!(
        h.call("GET", "/api/v1/consumer-groups/lagging", None),
        (200, json!([])),
        "minLagSeconds defaults to 3600"
    );
    h.advance(3_200_000);
    let (_, body) = h.call("GET", "/api/v1/consumer-groups/lagging", None);
    assert_eq!(body.as_array().unwrap().len(), 1, "{body}");
    assert_eq!(body[0]["time_lag_seconds"], 3700);
    let (status, body) = h.call(
        "GET",
        "/api/v1/consumer-groups/lagging?minLagSeconds=x",
        None,
    );
    assert_eq!(status, 400, "{body}");
}

#[test]
fn queue_depth_worst_cursor_and_per_group() {
    let h = group_fixture();
    let (status, body) = h.call("GET", "/api/v1/resources/queues/cg/depth", None);
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"queue": "cg", "group": null, "pending": 3, "partitionsPending": 2,
               "conflation": false, "effectivePending": 3,
               "partitions": [{"partition": "Default", "pending": 2},
                              {"partition": "p2", "pending": 1}]}),
        "without a group each partition counts its most-behind group"
    );
    let (_, body) = h.call("GET", "/api/v1/resources/queues/cg/depth?group=late", None);
    assert_eq!(
        body,
        json!({"queue": "cg", "group": "late", "pending": 0, "partitionsPending": 0,
               "conflation": false, "effectivePending": 0,
               "partitions": [{"partition": "Default", "pending": 0},
                              {"partition": "p2", "pending": 0}]})
    );
    let (status, body) = h.call(
        "GET",
        "/api/v1/resources/queues/cg/depth?group=nobody",
        None,
    );
    assert_eq!(status, 404, "{body}");
    assert_eq!(
        h.call("GET", "/api/v1/resources/queues/none/depth", None),
        (404, json!({"error": "Queue not found"}))
    );

    // No group reads it: every retained message is pending.
    push_to(&h, "fresh", "Default", &["1", "2"]);
    let (_, body) = h.call("GET", "/api/v1/resources/queues/fresh/depth", None);
    assert_eq!(
        (body["pending"].clone(), body["partitionsPending"].clone()),
        (json!(2), json!(1))
    );

    // A conflating group owes one handler run per partition.
    push_to(&h, "fresh", "other", &["3", "4", "5"]);
    let (status, _) = pop(
        &h,
        "/api/v1/pop/queue/fresh/partition/other?consumerGroup=cf&conflation=true&subscriptionMode=all",
    );
    assert_eq!(status, 200);
    let (_, body) = h.call("GET", "/api/v1/resources/queues/fresh/depth?group=cf", None);
    assert_eq!(
        body,
        json!({"queue": "fresh", "group": "cf", "pending": 3, "partitionsPending": 2,
               "conflation": true, "effectivePending": 2,
               "partitions": [{"partition": "Default", "pending": 2},
                              {"partition": "other", "pending": 1}]}),
        "the conflating pop skipped to `other`'s newest message, which it holds leased"
    );
}

#[test]
fn partitions_listing_with_filters_and_paging() {
    let h = group_fixture();
    push_to(&h, "ns.t", "Default", &["z"]);
    let (status, body) = h.call("GET", "/api/v1/resources/partitions", None);
    assert_eq!(status, 200);
    let names: Vec<(String, String)> = body["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (s(&p["queue"]), s(&p["name"])))
        .collect();
    assert_eq!(
        names,
        vec![
            ("cg".into(), "Default".into()),
            ("cg".into(), "p2".into()),
            ("ns.t".into(), "Default".into())
        ]
    );
    assert_eq!(
        body["pagination"],
        json!({"limit": 100, "offset": 0, "total": 3})
    );
    let first = &body["partitions"][0];
    assert_eq!(
        first["messages"],
        json!({"total": 3, "pending": 3, "processing": 0, "completed": 0, "failed": 0, "deadLetter": 0}),
        "counts as the queue-mode group sees them"
    );
    assert_eq!(first["oldestMessage"], iso_ms(T0));
    assert_eq!(first["nextOffset"], 3);
    assert_eq!(first["consumerGroups"], 2, "g and late");
    let (_, body) = h.call("GET", "/api/v1/resources/partitions?namespace=ns", None);
    assert_eq!(body["partitions"].as_array().unwrap().len(), 1);
    assert_eq!(body["partitions"][0]["task"], "t");
    let (_, body) = h.call(
        "GET",
        "/api/v1/resources/partitions?queue=cg&limit=1&offset=1",
        None,
    );
    assert_eq!(body["partitions"][0]["name"], "p2");
    assert_eq!(
        body["pagination"],
        json!({"limit": 1, "offset": 1, "total": 2})
    );
}

#[test]
fn status_queues_and_queue_detail() {
    let h = group_fixture();
    h.advance(1_000);
    push_to(&h, "later", "Default", &["z"]);
    let (status, body) = h.call("GET", "/api/v1/status/queues", None);
    assert_eq!(status, 200);
    let (_, cg) = h.call("GET", "/api/v1/resources/queues/cg", None);
    let (_, later) = h.call("GET", "/api/v1/resources/queues/later", None);
    assert_eq!(
        body,
        json!({"queues": [
            {"id": later["id"], "name": "later", "namespace": later["namespace"], "task": later["task"],
             "createdAt": iso_ms(T0 + 501_000), "partitions": 1,
             "messages": {"total": 1, "pending": 1, "processing": 0}},
            {"id": cg["id"], "name": "cg", "namespace": cg["namespace"], "task": cg["task"],
             "createdAt": iso_ms(T0), "partitions": 2,
             "messages": {"total": 4, "pending": 4, "processing": 0}},
        ], "pagination": {"limit": 100, "offset": 0}}),
        "newest queue first"
    );
    let (_, body) = h.call("GET", "/api/v1/status/queues?limit=1&offset=1", None);
    assert_eq!(body["queues"][0]["name"], "cg");

    // Queue mode takes Default's first two messages and acks the first.
    let (_, popped) = pop(&h, "/api/v1/pop/queue/cg/partition/Default?batch=2");
    let m = &popped["messages"][0];
    h.call(
        "POST",
        "/api/v1/ack",
        Some(
            json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                    "status": "completed", "leaseId": popped["leaseId"]}),
        ),
    );
    let (status, body) = h.call("GET", "/api/v1/status/queues/cg", None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["queue"],
        json!({"id": cg["id"], "name": "cg", "namespace": cg["namespace"], "task": cg["task"],
               "priority": 0,
               "createdAt": iso_ms(T0),
               "config": {"leaseTime": 60, "retryLimit": cg["options"]["retryLimit"],
                          "retryDelay": cg["options"]["retryDelay"], "ttl": cg["options"]["ttl"],
                          "maxQueueSize": cg["options"]["maxSize"],
                          "deadLetterQueue": cg["options"]["deadLetterQueue"]}})
    );
    let d = &body["partitions"][0];
    let counts = json!({"total": 3, "pending": 1, "processing": 1, "completed": 1, "failed": 0,
                        "deadLetter": 0});
    assert_eq!(d["name"], "Default");
    assert_eq!(d["messages"], counts);
    assert_eq!(d["stats"], counts);
    assert_eq!(
        d["cursor"],
        json!({"totalConsumed": null, "batchesConsumed": null})
    );
    assert_eq!(d["lastActivity"], Value::Null);
    assert_eq!(d["newestMessage"], iso_ms(T0));
    assert_eq!(body["totals"]["messages"]["total"], 4);
    assert_eq!(body["totals"]["pending"], 2);
    assert_eq!(body["totals"]["processing"], 1);
    assert_eq!(
        h.call("GET", "/api/v1/status/queues/none", None),
        (404, json!({"error": "Queue not found"}))
    );
}

#[test]
fn status_queue_messages_newest_first_with_status() {
    let h = Harness::new();
    push_to(&h, "sm", "Default", &["a", "b"]);
    h.advance(1_000);
    push_to(&h, "sm", "p2", &["c"]);
    h.advance(1_000);
    push_to(&h, "sm", "Default", &["d"]);
    // Queue mode: `a` acked, `b` leased.
    let (_, popped) = pop(&h, "/api/v1/pop/queue/sm/partition/Default?batch=2");
    let m = &popped["messages"][0];
    h.call(
        "POST",
        "/api/v1/ack",
        Some(
            json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                    "status": "completed", "leaseId": popped["leaseId"]}),
        ),
    );
    let (status, body) = h.call("GET", "/api/v1/status/queues/sm/messages", None);
    assert_eq!(status, 200);
    let got: Vec<(String, String, String)> = body
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (s(&m["transactionId"]), s(&m["status"]), s(&m["createdAt"])))
        .collect();
    assert_eq!(
        got,
        vec![
            ("d".into(), "pending".into(), iso_ms(T0 + 2_000)),
            ("c".into(), "pending".into(), iso_ms(T0 + 1_000)),
            ("b".into(), "processing".into(), iso_ms(T0)),
            ("a".into(), "completed".into(), iso_ms(T0)),
        ]
    );
    let first = &body[0];
    assert_eq!(first["queuePath"], "sm/Default");
    assert_eq!(first["offset"], 2);
    assert!(
        first.get("payload").is_none() && first.get("data").is_none(),
        "{first}"
    );
    let (_, body) = h.call(
        "GET",
        "/api/v1/status/queues/sm/messages?limit=2&offset=1",
        None,
    );
    let page: Vec<String> = body
        .as_array()
        .unwrap()
        .iter()
        .map(|m| s(&m["transactionId"]))
        .collect();
    assert_eq!(page, vec!["c", "b"]);
    assert_eq!(
        h.call("GET", "/api/v1/status/queues/none/messages", None),
        (200, json!([])),
        "an unknown queue lists nothing, as Queen does"
    );

    // A dead letter shows as such.
    let h = Harness::new();
    dead_letter(&h, "dl", "t1");
    let (_, body) = h.call("GET", "/api/v1/status/queues/dl/messages", None);
    assert_eq!(body[0]["status"], "dead_letter", "{body}");
}

#[test]
fn status_analytics_counts_pushes_per_bucket() {
    let h = Harness::new();
    push_to(&h, "an", "Default", &["a", "b"]);
    h.advance(3_600_000);
    push_to(&h, "an", "Default", &["c"]);
    push_to(&h, "other", "Default", &["x"]);
    let (status, body) = h.call(
        "GET",
        &format!(
            "/api/v1/status/analytics?interval=hour&from={}&to={}",
            iso_ms(T0 - 3_600_000),
            iso_ms(T0 + 3_600_000)
        ),
        None,
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"dataPoints": [
                  {"timestamp": iso_ms(T0 - 3_600_000), "messages": 0},
                  {"timestamp": iso_ms(T0), "messages": 2},
                  {"timestamp": iso_ms(T0 + 3_600_000), "messages": 2}],
               "interval": "hour", "from": iso_ms(T0 - 3_600_000), "to": iso_ms(T0 + 3_600_000)})
    );
    let (_, body) = h.call("GET", "/api/v1/status/analytics?queue=an", None);
    let total: u64 = body["dataPoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["messages"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 3, "default: the last 24 h, hourly; {body}");
    assert_eq!(body["dataPoints"].as_array().unwrap().len(), 25);
    // `from` inside a bucket: messages before it are not counted.
    let (_, body) = h.call(
        "GET",
        &format!(
            "/api/v1/status/analytics?interval=day&from={}",
            iso_ms(T0 + 1)
        ),
        None,
    );
    assert_eq!(body["dataPoints"][0]["messages"], 2, "{body}");
    assert_eq!(
        h.call("GET", "/api/v1/status/analytics?interval=week", None)
            .0,
        400
    );
    assert_eq!(
        h.call("GET", "/api/v1/status/analytics?from=yesterday", None)
            .0,
        400
    );
}

#[test]
fn status_buffers_reports_no_file_buffer() {
    let h = Harness::new();
    assert_eq!(
        h.call("GET", "/api/v1/status/buffers", None),
        (
            200,
            json!({"pending": 0, "failed": 0, "dbHealthy": true, "worker": "queen-edge-0"})
        )
    );
}

// ---------------------------------------------------------------------------------------------
// dead letters
// ---------------------------------------------------------------------------------------------

/// Pushes one message to `queue` and files it to the DLQ with an explicit `dlq` ack.
fn dead_letter(h: &Harness, queue: &str, tx: &str) -> (String, Value) {
    let pushed = push_one(h, queue, tx, json!({"tx": tx}));
    let (_, popped) = pop(h, &format!("/api/v1/pop/queue/{queue}"));
    let (_, acked) = h.call(
        "POST",
        "/api/v1/ack",
        Some(
            json!({"transactionId": tx, "partitionId": pushed["partitionId"], "status": "dlq",
                    "error": "bad", "leaseId": popped["leaseId"]}),
        ),
    );
    assert_eq!(acked[0]["dlq"], true, "{acked}");
    (s(&pushed["partitionId"]), pushed)
}

#[test]
fn dlq_listing_has_the_contract_keys() {
    let h = Harness::new();
    let (pid, pushed) = dead_letter(&h, "dq", "t1");
    let (status, body) = h.call("GET", "/api/v1/dlq?queue=dq&limit=10&offset=0", None);
    assert_eq!(status, 200);
    let row = &body["messages"][0];
    let id = s(&row["id"]);
    assert_eq!(
        body,
        json!({"total": 1, "pagination": {"limit": 10, "offset": 0}, "messages": [{
            "id": id, "messageId": pushed["messageId"], "transactionId": "t1", "partitionId": pid,
            "queue": "dq", "partition": "Default", "consumerGroup": "__QUEUE_MODE__",
            "errorMessage": "bad", "retryCount": 0, "data": {"tx": "t1"},
            "createdAt": iso_ms(T0), "failedAt": iso_ms(T0), "producerSub": null, "offset": 0,
            "originalCreatedAt": iso_ms(T0)}]})
    );
    let (status, body) = h.call("GET", "/api/v1/dlq?queue=other", None);
    assert_eq!((status, body["total"].clone()), (200, json!(0)));
}

#[test]
fn dlq_replay_by_id_is_idempotent() {
    let h = Harness::new();
    let (pid, _) = dead_letter(&h, "dq", "t1");
    let (_, listing) = h.call("GET", "/api/v1/dlq", None);
    let id = s(&listing["messages"][0]["id"]);
    let (status, body) = h.call("POST", &format!("/api/v1/dlq/{id}/replay"), Some(json!({})));
    assert_eq!(status, 200);
    let message_id = s(&body["messageId"]);
    assert_eq!(
        body,
        json!({"success": true, "replayed": true, "dlqRowRemoved": true, "id": id,
               "transactionId": format!("dlq:{id}"), "messageId": message_id, "queue": "dq",
               "partition": "Default", "partitionId": pid, "status": "queued"})
    );
    let (status, body) = h.call("POST", &format!("/api/v1/dlq/{id}/replay"), None);
    assert_eq!(status, 404, "{body}");
    assert!(body["error"].is_string());
    let (_, popped) = pop(&h, "/api/v1/pop/queue/dq");
    assert_eq!(popped["messages"][0]["transactionId"], format!("dlq:{id}"));
}

#[test]
fn retry_by_address_accepts_an_empty_body() {
    let h = Harness::new();
    let (pid, _) = dead_letter(&h, "dq", "t1");
    let r = h.send(HttpRequest::new(
        "POST",
        &format!("/api/v1/messages/{pid}/t1/retry"),
    ));
    assert_eq!(r.status, 200);
    let body = response_json(&r);
    assert_eq!(body["replayed"], true);
    assert_eq!(body["dlqRowRemoved"], true);
    assert!(s(&body["transactionId"]).starts_with("dlq:"));
    let (status, _) = h.call("POST", &format!("/api/v1/messages/{pid}/t1/retry"), None);
    assert_eq!(status, 404);
}

#[test]
fn delete_dead_letter_by_address() {
    let h = Harness::new();
    let (pid, _) = dead_letter(&h, "dq", "t1");
    assert_eq!(
        h.call("DELETE", &format!("/api/v1/messages/{pid}/t1"), None),
        (
            200,
            json!({"success": true, "partitionId": pid, "transactionId": "t1", "deleted": 1})
        )
    );
    let (status, body) = h.call("DELETE", &format!("/api/v1/messages/{pid}/t1"), None);
    assert_eq!(status, 404);
    assert!(body["error"].is_string());
    // A live message is not deletable.
    let live = push_one(&h, "dq", "live", json!(1));
    let (status, _) = h.call(
        "DELETE",
        &format!("/api/v1/messages/{}/live", s(&live["partitionId"])),
        None,
    );
    assert_eq!(status, 404);
}

// ---------------------------------------------------------------------------------------------
// messages (dashboard)
// ---------------------------------------------------------------------------------------------

#[test]
fn message_listing_and_detail() {
    let h = Harness::new();
    let pushed = push_one(&h, "m", "t1", json!({"k": "v"}));
    let pid = s(&pushed["partitionId"]);
    let (status, body) = h.call("GET", "/api/v1/messages?queue=m", None);
    assert_eq!(status, 200);
    assert_eq!(body["messages"][0]["transactionId"], "t1");
    assert_eq!(body["messages"][0]["status"], "pending");
    let (status, body) = h.call("GET", &format!("/api/v1/messages/{pid}/t1"), None);
    assert_eq!(status, 200);
    assert_eq!(body["payload"], json!({"k": "v"}));
    assert_eq!(body["createdAt"], iso_ms(T0));
    assert_eq!(
        h.call("GET", &format!("/api/v1/messages/{pid}/none"), None),
        (404, json!({"error": "Message not found"}))
    );
}

// ---------------------------------------------------------------------------------------------
// consumer groups
// ---------------------------------------------------------------------------------------------

#[test]
fn seek_to_end_and_back_by_timestamp() {
    let h = Harness::new();
    push_one(&h, "sq", "t1", json!(1));
    let (status, _) = pop(
        &h,
        "/api/v1/pop/queue/sq?consumerGroup=g&subscriptionMode=all",
    );
    assert_eq!(status, 200);
    let (status, body) = h.call(
        "POST",
        "/api/v1/consumer-groups/g/queues/sq/seek",
        Some(json!({"toEnd": true})),
    );
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"success": true, "consumerGroup": "g", "queueName": "sq", "seekToEnd": true,
               "targetTimestamp": null, "partitionsUpdated": 1})
    );
    assert_eq!(
        pop(&h, "/api/v1/pop/queue/sq?consumerGroup=g").0,
        204,
        "seek released the lease and skipped"
    );
    let (status, body) = h.call(
        "POST",
        "/api/v1/consumer-groups/g/queues/sq/seek",
        Some(json!({"timestamp": "2000-01-01T00:00:00Z"})),
    );
    assert_eq!(status, 200);
    assert_eq!(body["seekToEnd"], false);
    assert_eq!(body["targetTimestamp"], "2000-01-01T00:00:00.000Z");
    assert_eq!(
        pop(&h, "/api/v1/pop/queue/sq?consumerGroup=g").0,
        200,
        "backward seek re-delivers"
    );
}

#[test]
fn seeking_a_group_without_cursors_updates_nothing_and_makes_no_group() {
    let h = Harness::new();
    push_one(&h, "Q", "h0", json!(0));
    let (status, body) = h.call(
        "POST",
        "/api/v1/consumer-groups/ghost/queues/Q/seek",
        Some(json!({"timestamp": "2000-01-01T00:00:00Z"})),
    );
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"success": true, "consumerGroup": "ghost", "queueName": "Q", "seekToEnd": false,
               "targetTimestamp": "2000-01-01T00:00:00.000Z", "partitionsUpdated": 0})
    );
    assert_eq!(h.call("GET", "/api/v1/consumer-groups", None).1, json!([]));
    h.advance(1);
    assert_eq!(
        pop(
            &h,
            "/api/v1/pop/queue/Q?batch=10&consumerGroup=ghost&subscriptionMode=new"
        )
        .0,
        204,
        "ghost's first pop applies mode new"
    );
}

#[test]
fn seek_group_with_percent_encoded_names() {
    let h = Harness::new();
    push_one(&h, "my queue", "t1", json!(1));
    pop(
        &h,
        "/api/v1/pop/queue/my%20queue?consumerGroup=my%20group&subscriptionMode=all",
    );
    let (status, body) = h.call(
        "POST",
        "/api/v1/consumer-groups/my%20group/queues/my%20queue/seek",
        Some(json!({"toEnd": true})),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["consumerGroup"], "my group");
    assert_eq!(body["queueName"], "my queue");
}

#[test]
fn partition_seek_and_unknown_partition() {
    let h = Harness::new();
    push_one(&h, "ps", "t1", json!(1));
    pop(
        &h,
        "/api/v1/pop/queue/ps?consumerGroup=g&subscriptionMode=all",
    );
    let r = h.send(HttpRequest::new(
        "POST",
        "/api/v1/consumer-groups/g/queues/ps/partitions/Default/seek",
    ));
    assert_eq!(r.status, 200);
    let body = response_json(&r);
    assert_eq!(body["success"], true);
    assert_eq!(body["partitionName"], "Default");
    assert_eq!(body["cursorMovedTo"], 0);
    let (status, body) = h.call(
        "POST",
        "/api/v1/consumer-groups/g/queues/ps/partitions/nope/seek",
        None,
    );
    assert_eq!(status, 404, "{body}");
}

#[test]
fn delete_group_and_group_on_queue() {
    let h = Harness::new();
    push_one(&h, "dg", "t1", json!(1));
    pop(
        &h,
        "/api/v1/pop/queue/dg?consumerGroup=g&subscriptionMode=all",
    );
    let (status, body) = h.call(
        "DELETE",
        "/api/v1/consumer-groups/g/queues/dg?deleteMetadata=false",
        None,
    );
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"success": true, "consumerGroup": "g", "queueName": "dg",
               "deletedPartitions": 1, "metadataDeleted": false})
    );
    let (status, body) = h.call("DELETE", "/api/v1/consumer-groups/g", None);
    assert_eq!(status, 200);
    assert_eq!(body["success"], true);
    assert_eq!(body["consumerGroup"], "g");
    assert_eq!(body["metadataDeleted"], true);
}

#[test]
fn update_subscription_timestamp() {
    let h = Harness::new();
    push_one(&h, "us", "t1", json!(1));
    pop(&h, "/api/v1/pop/queue/us?consumerGroup=g");
    let (status, body) = h.call(
        "POST",
        "/api/v1/consumer-groups/g/subscription",
        Some(json!({"subscriptionTimestamp": "2024-01-01T00:00:00.000Z"})),
    );
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"success": true, "consumerGroup": "g", "newTimestamp": "2024-01-01T00:00:00.000Z",
               "rowsUpdated": 1})
    );
}

// ---------------------------------------------------------------------------------------------
// traces, stats refresh
// ---------------------------------------------------------------------------------------------

#[test]
fn trace_post_answers_201_with_a_uuid() {
    let h = Harness::new();
    let pushed = push_one(&h, "tr", "t1", json!(1));
    let (status, body) = h.call(
        "POST",
        "/api/v1/traces",
        Some(
            json!({"transactionId": "t1", "partitionId": pushed["partitionId"],
                    "consumerGroup": "__QUEUE_MODE__", "traceNames": null, "eventType": "info",
                    "data": {"step": 1}}),
        ),
    );
    assert_eq!(status, 201);
    assert_eq!(body["success"], true);
    assert!(uuid::Uuid::parse_str(&s(&body["traceId"])).is_ok());
    let (status, _) = h.call(
        "POST",
        "/api/v1/traces",
        Some(json!({"transactionId": "zz", "partitionId": pushed["partitionId"], "data": {}})),
    );
    assert_eq!(status, 404);
}

#[test]
fn stats_refresh_is_a_no_op() {
    let h = Harness::new();
    let r = h.send(HttpRequest::new("POST", "/api/v1/stats/refresh"));
    assert_eq!(r.status, 200);
    assert_eq!(response_json(&r)["success"], true);
}

// ---------------------------------------------------------------------------------------------
// health, metrics, status
// ---------------------------------------------------------------------------------------------

#[test]
fn health_is_healthy() {
    let h = Harness::new();
    let (status, body) = h.call("GET", "/health", None);
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"status": "healthy", "database": "connected", "server": "queen-edge",
               "worker_id": "queen-edge-0", "version": env!("CARGO_PKG_VERSION"),
               "shared_state": {"enabled": false},
               "queen": {"worker_id": "queen-edge-0", "status": "active"},
               "encryption": {"keyConfigured": false, "cipher": "AES-256-GCM"}})
    );
}

#[test]
fn metrics_json_and_prometheus_text() {
    let h = Harness::with_config(HttpConfig {
        started_at_ms: T0 - 90_000,
        ..HttpConfig::default()
    });
    push_one(&h, "mq", "t1", json!(1));
    let (status, body) = h.call("GET", "/metrics", None);
    assert_eq!(status, 200);
    assert_eq!(body["uptime"], 90);
    assert_eq!(body["messages"]["total"], 1);
    for key in ["requests", "database", "memory", "cpu"] {
        assert!(body[key].is_object(), "{key}");
    }
    let r = h.send(HttpRequest::new("GET", "/metrics/prometheus"));
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/plain; version=0.0.4"));
    let text = String::from_utf8(r.body).unwrap();
    for line in [
        "queen_uptime_seconds 90",
        "queen_cluster_push_messages_total{scope=\"cluster\"} 1",
        "queen_cluster_pop_messages_total{scope=\"cluster\"} 0",
        "queen_cluster_ack_messages_total{scope=\"cluster\"} 0",
        "queen_dlq_depth 0",
        "# TYPE queen_dlq_depth_by_queue gauge",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
}

#[test]
fn status_summarises_the_broker() {
    let h = Harness::new();
    dead_letter(&h, "st", "t1");
    let (status, body) = h.call("GET", "/api/v1/status", None);
    assert_eq!(status, 200);
    for key in [
        "timeRange",
        "bucketMinutes",
        "pointCount",
        "throughput",
        "queues",
        "messages",
        "leases",
        "deadLetterQueue",
        "workers",
        "errors",
        "statsAge",
    ] {
        assert!(body.get(key).is_some(), "{key}");
    }
    assert_eq!(body["deadLetterQueue"]["total"], 1);
    assert_eq!(
        body["deadLetterQueue"]["byQueue"],
        json!([{"queue": "st", "count": 1}])
    );
}

// ---------------------------------------------------------------------------------------------
// transport: CORS, preflight, unknown routes, auth
// ---------------------------------------------------------------------------------------------

#[test]
fn cors_on_every_answer_and_preflight_is_204() {
    let h = Harness::new();
    let r = h.send(HttpRequest::new("OPTIONS", "/api/v1/push"));
    assert_eq!(r.status, 204);
    assert!(r.body.is_empty());
    for (name, value) in [
        ("Access-Control-Allow-Origin", "*"),
        (
            "Access-Control-Allow-Methods",
            "GET, POST, PUT, DELETE, OPTIONS",
        ),
        (
            "Access-Control-Allow-Headers",
            "Content-Type, Authorization, X-Queen-Broker",
        ),
        ("Access-Control-Max-Age", "86400"),
    ] {
        assert_eq!(r.header(name), Some(value), "{name}");
        let err = h.send(HttpRequest::new("GET", "/nope"));
        assert_eq!(err.header(name), Some(value), "{name} on an error");
    }
    let ok = h.send(HttpRequest::new("GET", "/health"));
    assert_eq!(ok.header("content-type"), Some("application/json"));
    assert_eq!(ok.header("access-control-allow-origin"), Some("*"));
}

#[test]
fn unknown_routes_are_404_no_such_route() {
    let h = Harness::new();
    for (method, target) in [
        ("GET", "/api/v1/nothing"),
        ("DELETE", "/api/v1/queues/q/clear"),
        ("POST", "/api/v1/messages/p/t/dlq"),
        ("POST", "/api/v1/stream/define"),
        ("GET", "/api/v1/push"),
        ("PUT", "/api/v1/push"),
        ("GET", "/"),
    ] {
        assert_eq!(
            h.call(method, target, None),
            (404, json!({"error": "no_such_route"})),
            "{method} {target}"
        );
    }
}

fn auth_config() -> HttpConfig {
    HttpConfig {
        auth: Some(AuthConfig {
            tokens: vec![
                AuthToken::new("read-token", Role::ReadOnly),
                AuthToken::new("write-token", Role::ReadWrite),
                AuthToken {
                    token: "admin-token".into(),
                    role: Role::Admin,
                    subject: Some("alice".into()),
                },
            ],
        }),
        ..HttpConfig::default()
    }
}

fn with_token(method: &str, target: &str, token: Option<&str>, body: Option<Value>) -> HttpRequest {
    let mut r = HttpRequest::new(method, target);
    if let Some(b) = body {
        r = r.with_json(serde_json::to_vec(&b).unwrap());
    }
    if let Some(t) = token {
        r = r.with_header("Authorization", &format!("Bearer {t}"));
    }
    r
}

#[test]
fn auth_checks_roles_per_route() {
    let h = Harness::with_config(auth_config());
    let push = json!({"items": [{"queue": "a", "payload": 1}]});
    let cases: Vec<(HttpRequest, u16, Option<&str>)> = vec![
        (with_token("GET", "/health", None, None), 200, None),
        (with_token("GET", "/metrics", None, None), 200, None),
        (
            with_token("GET", "/metrics/prometheus", None, None),
            401,
            Some("Authentication required"),
        ),
        (
            with_token("GET", "/metrics/prometheus", Some("read-token"), None),
            200,
            None,
        ),
        (
            with_token("GET", "/api/v1/consumer-groups", None, None),
            401,
            Some("Authentication required"),
        ),
        (
            with_token("GET", "/api/v1/consumer-groups", Some("read-token"), None),
            200,
            None,
        ),
        (
            with_token("GET", "/api/v1/status/queues", Some("read-token"), None),
            200,
            None,
        ),
        (with_token("OPTIONS", "/api/v1/push", None, None), 204, None),
        (
            with_token("POST", "/api/v1/push", None, Some(push.clone())),
            401,
            Some("Authentication required"),
        ),
        (
            with_token("POST", "/api/v1/push", Some("wrong"), Some(push.clone())),
            401,
            Some("Invalid token"),
        ),
        (
            with_token(
                "POST",
                "/api/v1/push",
                Some("read-token"),
                Some(push.clone()),
            ),
            403,
            Some("Insufficient permissions"),
        ),
        (
            with_token("GET", "/api/v1/resources/queues", Some("read-token"), None),
            200,
            None,
        ),
        (
            with_token("GET", "/api/v1/resources/queues", None, None),
            401,
            Some("Authentication required"),
        ),
        (
            with_token(
                "POST",
                "/api/v1/push",
                Some("write-token"),
                Some(push.clone()),
            ),
            201,
            None,
        ),
        (
            with_token(
                "DELETE",
                "/api/v1/resources/queues/a",
                Some("write-token"),
                None,
            ),
            403,
            Some("Insufficient permissions"),
        ),
        (
            with_token(
                "DELETE",
                "/api/v1/consumer-groups/g",
                Some("write-token"),
                None,
            ),
            403,
            Some("Insufficient permissions"),
        ),
        (
            with_token("GET", "/api/v1/pop/queue/a", Some("read-token"), None),
            403,
            Some("Insufficient permissions"),
        ),
        (
            with_token(
                "POST",
                "/api/v1/push",
                Some("admin-token"),
                Some(push.clone()),
            ),
            201,
            None,
        ),
        (
            with_token(
                "DELETE",
                "/api/v1/resources/queues/a",
                Some("admin-token"),
                None,
            ),
            200,
            None,
        ),
        (
            HttpRequest::new("GET", "/api/v1/dlq").with_header("authorization", "read-token"),
            200,
            None,
        ),
    ];
    for (i, (request, status, error)) in cases.into_iter().enumerate() {
        let r = h.send(request);
        assert_eq!(
            r.status,
            status,
            "case {i}: {}",
            String::from_utf8_lossy(&r.body)
        );
        if let Some(e) = error {
            assert_eq!(response_json(&r), json!({ "error": e }), "case {i}");
        }
    }
}

#[test]
fn auth_subject_is_stamped_as_producer_sub() {
    let h = Harness::with_config(auth_config());
    let r = h.send(with_token(
        "POST",
        "/api/v1/push",
        Some("admin-token"),
        Some(json!({"items": [{"queue": "s", "payload": 1, "producerSub": "mallory"}]})),
    ));
    assert_eq!(r.status, 201);
    let r = h.send(with_token(
        "GET",
        "/api/v1/pop/queue/s",
        Some("admin-token"),
        None,
    ));
    assert_eq!(response_json(&r)["messages"][0]["producerSub"], "alice");
}

#[test]
fn producer_sub_from_the_body_is_ignored_without_auth() {
    let h = Harness::new();
    h.call(
        "POST",
        "/api/v1/push",
        Some(json!({"items": [{"queue": "s", "payload": 1, "producerSub": "mallory"}]})),
    );
    let (_, body) = pop(&h, "/api/v1/pop/queue/s");
    assert_eq!(body["messages"][0]["producerSub"], Value::Null);
}

#[test]
fn storage_failure_is_a_500_and_changes_nothing() {
    let h = Harness::new();
    let before = h.snapshot();
    h.store.fail_next_commits(1);
    let (status, body) = h.call(
        "POST",
        "/api/v1/push",
        Some(json!({"items": [{"queue": "f", "payload": 1}]})),
    );
    assert_eq!(status, 500);
    assert!(s(&body["error"]).starts_with("storage failure"), "{body}");
    assert_eq!(h.snapshot(), before);
    assert_eq!(pop(&h, "/api/v1/pop/queue/f").0, 204);
}

// ---------------------------------------------------------------------------------------------
// the 2.6.0 Python client's default flow (contract appendix §6)
// ---------------------------------------------------------------------------------------------

#[test]
fn python_client_default_flow() {
    let h = Harness::new();
    // 1. queue(q).config({retry_delay: 2000}).create(): 9 default keys + the caller's, null labels.
    let (status, body) = h.call(
        "POST",
        "/api/v1/configure",
        Some(
            json!({"queue": "orders", "namespace": null, "task": null, "options": {
            "leaseTime": 300, "retryLimit": 3, "priority": 0, "delayedProcessing": 0,
            "windowBuffer": 0, "maxSize": 0, "retentionSeconds": 0,
            "completedRetentionSeconds": 0, "encryptionEnabled": false, "retryDelay": 2000}}),
        ),
    );
    assert_eq!(status, 200);
    assert!(body.get("error").is_none());
    // 3. push with client-minted transaction ids and partition always present.
    let (status, pushed) = h.call(
        "POST",
        "/api/v1/push",
        Some(json!({"items": [
            {"queue": "orders", "partition": "Default", "payload": {"n": 1},
             "transactionId": "5b0c3f5e-2f43-4c7a-8a54-0a9a3f3b1e01"},
            {"queue": "orders", "partition": "Default", "payload": {"n": 2},
             "transactionId": "5b0c3f5e-2f43-4c7a-8a54-0a9a3f3b1e02"}
        ]})),
    );
    assert_eq!(status, 201);
    assert_eq!(pushed[0]["status"], "queued");
    // 4. the default pop: autopilot, long-poll, no batch.
    let (status, popped) = pop(
        &h,
        "/api/v1/pop/queue/orders?autopilot=true&wait=true&timeout=30000&consumerGroup=workers&subscriptionMode=all",
    );
    assert_eq!(status, 200);
    let messages = popped["messages"].as_array().unwrap().clone();
    assert_eq!(messages.len(), 2, "autopilot sized the batch: {popped}");
    // 7. renew with no body.
    let lease = s(&popped["leaseId"]);
    let r = h.send(HttpRequest::new(
        "POST",
        &format!("/api/v1/lease/{lease}/extend"),
    ));
    assert_eq!(response_json(&r)["success"], true);
    // 5. the handler raised: the whole batch is acked `failed` on /ack/batch with the exception text.
    let acks: Vec<Value> = messages
        .iter()
        .map(|m| {
            json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                        "status": "failed", "error": "ValueError: boom", "leaseId": m["leaseId"]})
        })
        .collect();
    let (status, body) = h.call(
        "POST",
        "/api/v1/ack/batch",
        Some(json!({"acknowledgments": acks, "consumerGroup": "workers"})),
    );
    assert_eq!(status, 200);
    for item in body.as_array().unwrap() {
        assert_eq!(item["success"], true, "{body}");
        assert_eq!(
            item["error"],
            Value::Null,
            "a truthy error fails the whole Python call"
        );
    }
    // The retry hold (retryDelay 2000 ms): a parked long-poll wakes when it ends.
    let waiting = h.spawn(HttpRequest::new(
        "GET",
        "/api/v1/pop/queue/orders?autopilot=true&wait=true&timeout=30000&consumerGroup=workers",
    ));
    h.advance(1_999);
    assert!(waiting.get().is_none(), "held for retryDelay");
    h.advance(1);
    let r = waiting.get().expect("woken when the retry hold ended");
    assert_eq!(r.status, 200);
    let redelivered = response_json(&r);
    assert_eq!(redelivered["messages"].as_array().unwrap().len(), 2);
    assert_eq!(redelivered["messages"][0]["retryCount"], 1);
    // 6. this time the handler succeeds: the default loop acks the list on /ack/batch.
    let acks: Vec<Value> = redelivered["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                        "status": "completed", "error": null, "leaseId": m["leaseId"]})
        })
        .collect();
    let (_, body) = h.call(
        "POST",
        "/api/v1/ack/batch",
        Some(json!({"acknowledgments": acks, "consumerGroup": "workers"})),
    );
    assert_eq!(body[1]["leaseReleased"], true);
    // 9/10. nothing in the DLQ; retry of a non-dead-letter address is a 404 (raises in the caller).
    let (_, dlq) = h.call("GET", "/api/v1/dlq?queue=orders&limit=100&offset=0", None);
    assert_eq!(dlq["total"], 0);
    let pid = s(&messages[0]["partitionId"]);
    let r = h.send(HttpRequest::new(
        "POST",
        &format!("/api/v1/messages/{pid}/5b0c3f5e-2f43-4c7a-8a54-0a9a3f3b1e01/retry"),
    ));
    assert_eq!(r.status, 404);
    // 2. delete with the raw name.
    let (status, body) = h.call("DELETE", "/api/v1/resources/queues/orders", None);
    assert_eq!((status, body["deleted"].clone()), (200, json!(true)));
}

#[test]
fn items_above_a_nack_report_success_with_null_error() {
    let h = Harness::new();
    let items: Vec<Value> = (0..3)
        .map(|i| json!({"queue": "n", "payload": i, "transactionId": format!("t{i}")}))
        .collect();
    let (_, pushed) = h.call("POST", "/api/v1/push", Some(json!({ "items": items })));
    let pid = s(&pushed[0]["partitionId"]);
    let (_, popped) = pop(&h, "/api/v1/pop/queue/n?batch=3");
    let lease = s(&popped["leaseId"]);
    let (status, body) = h.call(
        "POST",
        "/api/v1/ack/batch",
        Some(json!({"acknowledgments": [
            {"transactionId": "t0", "partitionId": pid, "status": "completed", "leaseId": lease},
            {"transactionId": "t1", "partitionId": pid, "status": "retry", "leaseId": lease},
            {"transactionId": "t2", "partitionId": pid, "status": "completed", "leaseId": lease}
        ]})),
    );
    assert_eq!(status, 200);
    for item in body.as_array().unwrap() {
        assert_eq!(item["success"], true, "{body}");
        assert_eq!(item["error"], Value::Null, "{body}");
    }
    let (_, again) = pop(&h, "/api/v1/pop/queue/n?batch=3");
    let tx: Vec<_> = again["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["transactionId"].clone())
        .collect();
    assert_eq!(
        tx,
        vec![json!("t1"), json!("t2")],
        "the cursor stopped at the retry"
    );
}

#[test]
fn tasks_listing() {
    let h = Harness::new();
    push_one(&h, "billing.invoices", "t1", json!(1));
    let (status, body) = h.call("GET", "/api/v1/resources/tasks", None);
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"tasks": [{"task": "invoices", "queues": 1, "partitions": 1,
                          "messages": {"total": 1, "pending": 1}}]})
    );
}

#[test]
fn subscription_from_a_time_skips_older_messages() {
    let h = Harness::new();
    push_one(&h, "sf", "old", json!(1));
    h.advance(10_000);
    push_one(&h, "sf", "new", json!(2));
    let from = iso_ms(T0 + 5_000);
    let (status, body) = pop(
        &h,
        &format!("/api/v1/pop/queue/sf?consumerGroup=g&subscriptionFrom={from}&batch=10"),
    );
    assert_eq!(status, 200, "{body}");
    let tx: Vec<_> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["transactionId"].clone())
        .collect();
    assert_eq!(tx, vec![json!("new")]);
    // `now` starts after everything already there.
    assert_eq!(
        pop(
            &h,
            "/api/v1/pop/queue/sf?consumerGroup=g2&subscriptionFrom=now"
        )
        .0,
        204
    );
}

/// A message the queue-mode group dead-lettered is `dead_letter` in every view: the listing (whatever
/// status is asked for), the message itself, and the counts, which then add up to the total (a QA pass
/// found it counted as both `completed` and `deadLetter`).
#[test]
fn the_counts_take_a_dead_lettered_message_once_and_only_while_it_is_retained() {
    let h = Harness::new();
    let (status, _) = h.call(
        "POST",
        "/api/v1/configure",
        Some(json!({"queue": "dc", "options": {"retentionEnabled": true, "retentionSeconds": 2}})),
    );
    assert_eq!(status, 200);
    push_to(&h, "dc", "Default", &["m0"]);
    for group in ["a", "b"] {
        let (_, got) = pop(
            &h,
            &format!("/api/v1/pop/queue/dc?consumerGroup={group}&subscriptionMode=all&wait=false"),
        );
        let m = &got["messages"][0];
        let (status, body) = h.call(
            "POST",
            "/api/v1/ack",
            Some(
                json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                        "leaseId": m["leaseId"], "consumerGroup": group, "status": "dlq"}),
            ),
        );
        assert_eq!(status, 200, "{body}");
    }
    let counts = |h: &Harness| {
        let (_, body) = h.call("GET", "/api/v1/resources/queues/dc", None);
        let t = &body["totals"];
        [
            t["total"].clone(),
            t["pending"].clone(),
            t["completed"].clone(),
            t["deadLetter"].clone(),
        ]
    };
    let dlq_rows = |h: &Harness| {
        let (_, body) = h.call("GET", "/api/v1/dlq?queue=dc", None);
        body["messages"].as_array().unwrap().len()
    };
    assert_eq!(
        counts(&h),
        [json!(1), json!(0), json!(0), json!(1)],
        "one message, two groups' rows"
    );
    assert_eq!(dlq_rows(&h), 2);
    // The overview counts as the queues do (session 36's QA: it counted the rows, `deadLetter: 2`).
    let overview_is_the_queue_s = |h: &Harness| {
        let (_, o) = h.call("GET", "/api/v1/resources/overview", None);
        let (_, q) = h.call("GET", "/api/v1/resources/queues/dc", None);
        assert_eq!(o["messages"], q["totals"], "{o}");
    };
    overview_is_the_queue_s(&h);
    h.advance(3_000);
    futures::executor::block_on(h.engine.maintain()).unwrap();
    assert_eq!(
        counts(&h),
        [json!(0), json!(0), json!(0), json!(0)],
        "retention removed the message"
    );
    assert_eq!(dlq_rows(&h), 2, "the rows stay for replay");
    overview_is_the_queue_s(&h);
}

#[test]
fn a_dead_lettered_message_is_dead_letter_in_the_listing_the_message_and_the_counts() {
    let h = Harness::new();
    let (status, _) = h.call(
        "POST",
        "/api/v1/configure",
        Some(json!({"queue": "dl", "options": {"retryLimit": 0}})),
    );
    assert_eq!(status, 200);
    push_to(&h, "dl", "Default", &["c0", "c1", "c2", "c3", "c4"]);
    let (_, first) = pop(&h, "/api/v1/pop/queue/dl?batch=2&wait=false");
    let ack = |tx: &str, status: &str| {
        let msgs = first["messages"].as_array().unwrap();
        let m = msgs.iter().find(|m| m["transactionId"] == tx).unwrap();
        json!({"transactionId": tx, "partitionId": m["partitionId"], "leaseId": m["leaseId"], "status": status})
    };
    let (status, body) = h.call(
        "POST",
        "/api/v1/ack/batch",
        Some(json!({"acknowledgments": [ack("c0", "completed"), ack("c1", "dlq")]})),
    );
    assert_eq!(status, 200, "{body}");
    let (_, leased) = pop(&h, "/api/v1/pop/queue/dl?batch=2&wait=false");
    assert_eq!(
        leased["messages"].as_array().unwrap().len(),
        2,
        "c2 and c3 leased"
    );

    let (_, body) = h.call("GET", "/api/v1/resources/queues/dl", None);
    let totals = &body["totals"];
    assert_eq!(
        [
            &totals["total"],
            &totals["pending"],
            &totals["processing"],
            &totals["completed"],
            &totals["deadLetter"]
        ],
        [&json!(5), &json!(1), &json!(2), &json!(1), &json!(1)],
        "{totals}"
    );
    let status_of = |tx: &str, query: &str| -> Vec<String> {
        let (_, body) = h.call("GET", &format!("/api/v1/messages?queue=dl{query}"), None);
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["transactionId"] == tx)
            .map(|m| s(&m["status"]))
            .collect()
    };
    assert_eq!(status_of("c1", ""), ["dead_letter"], "unfiltered");
    assert!(
        status_of("c1", "&status=completed").is_empty(),
        "not completed"
    );
    assert_eq!(status_of("c1", "&status=dead_letter"), ["dead_letter"]);
    let pid = s(&first["messages"][0]["partitionId"]);
    let (status, body) = h.call("GET", &format!("/api/v1/messages/{pid}/c1"), None);
    assert_eq!(
        (status, s(&body["status"])),
        (200, "dead_letter".to_string())
    );
}

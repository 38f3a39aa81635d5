//! Golden route tests for maintenance mode and traces (wire-contract §1.10, §1.11, §1.2 "buffered"),
//! the measured numbers (/metrics, overview, /status) and the small behaviours of issue 14 item 7
//! (conflating long-poll, autopilot sizing, message listing filters): request in, exact status and
//! JSON out, across restarts of the engine over the same store.

#![cfg(not(target_arch = "wasm32"))]

use crate::http_support;

use http_support::*;
use queen_edge::http::{AuthConfig, AuthToken, HttpConfig, HttpRequest, Role};
use serde_json::{json, Value};

fn push(h: &Harness, items: Value) -> (u16, Value) {
    h.call("POST", "/api/v1/push", Some(json!({ "items": items })))
}

fn pop_all(h: &Harness, queue: &str) -> Vec<Value> {
    let (status, body) = h.call(
        "GET",
        &format!("/api/v1/pop/queue/{queue}?batch=100&autoAck=true"),
        None,
    );
    match status {
        204 => Vec::new(),
        200 => body["messages"].as_array().unwrap().clone(),
        other => panic!("pop answered {other}: {body}"),
    }
}

fn data_of(messages: &[Value]) -> Vec<Value> {
    messages.iter().map(|m| m["data"].clone()).collect()
}

/// Every maintenance route answers this shape (contract §1.11's keys of all three routes).
fn maintenance_answer(buffered: u64, push: bool, pop: bool, bytes: u64, message: &str) -> Value {
    json!({
        "maintenanceMode": push,
        "popMaintenanceMode": pop,
        "bufferedMessages": buffered,
        "bufferHealthy": true,
        "bufferStats": {"pendingMessages": buffered, "pendingBytes": bytes,
                        "maxBytes": 16 * 1024 * 1024},
        "message": message,
    })
}

const PUSH_ON: &str = "Maintenance mode is on: pushes are buffered until it is turned off";
const PUSH_OFF: &str = "Maintenance mode is off: pushes are applied at once";
const POP_ON: &str = "Pop maintenance mode is on: every pop answers empty";
const POP_OFF: &str = "Pop maintenance mode is off";

// ---------------------------------------------------------------------------------------------
// push maintenance
// ---------------------------------------------------------------------------------------------

#[test]
fn push_maintenance_buffers_survives_a_restart_and_drains_in_order_exactly_once() {
    let h = Harness::new();
    assert_eq!(
        h.call("GET", "/api/v1/system/maintenance", None),
        (200, maintenance_answer(0, false, false, 0, PUSH_OFF))
    );
    let (status, _) = push(
        &h,
        json!([{"queue": "mm", "payload": {"n": 0}, "transactionId": "t0"}]),
    );
    assert_eq!(status, 201);

    assert_eq!(
        h.call(
            "POST",
            "/api/v1/system/maintenance",
            Some(json!({"enabled": true}))
        ),
        (200, maintenance_answer(0, true, false, 0, PUSH_ON))
    );
    let (status, body) = push(
        &h,
        json!([
            {"queue": "mm", "payload": {"n": 1}, "transactionId": "t1"},
            {"queue": "mm", "partition": "p2", "payload": {"n": 2}},
            {"queue": "mm", "payload": {"n": 1}, "transactionId": "t1"},
        ]),
    );
    assert_eq!(status, 201);
    let minted = body[1]["transactionId"].as_str().unwrap().to_string();
    assert!(
        !minted.is_empty(),
        "a transaction id is minted for an item without one"
    );
    assert_eq!(
        body,
        json!([
            {"index": 0, "status": "buffered", "queue": "mm", "queueName": "mm", "partition": "Default",
             "transactionId": "t1", "transaction_id": "t1"},
            {"index": 1, "status": "buffered", "queue": "mm", "queueName": "mm", "partition": "p2",
             "transactionId": minted, "transaction_id": minted},
            {"index": 2, "status": "buffered", "queue": "mm", "queueName": "mm", "partition": "Default",
             "transactionId": "t1", "transaction_id": "t1"},
        ])
    );
    let (status, _) = push(
        &h,
        json!([{"queue": "mm", "payload": {"n": 3}, "transactionId": "t3"}]),
    );
    assert_eq!(status, 201);
    // Buffered messages are not in the queue yet: only the one pushed before maintenance.
    assert_eq!(data_of(&pop_all(&h, "mm")), vec![json!({"n": 0})]);

    // The switch and the buffer survive a restart.
    let h = h.restart(HttpConfig::default());
    assert_eq!(
        h.call("GET", "/api/v1/system/maintenance", None),
        (200, maintenance_answer(4, true, false, 28, PUSH_ON))
    );
    assert_eq!(
        h.call(
            "POST",
            "/api/v1/system/maintenance",
            Some(json!({"enabled": false}))
        ),
        (200, maintenance_answer(0, false, false, 0, PUSH_OFF)),
        "answered after the buffer drained"
    );
    // Delivered in buffer order, the in-buffer duplicate once.
    let delivered = pop_all(&h, "mm");
    assert_eq!(data_of(&delivered), vec![json!({"n": 1}), json!({"n": 3})]);
    let p2 = h.call(
        "GET",
        "/api/v1/pop/queue/mm/partition/p2?batch=10&autoAck=true",
        None,
    );
    assert_eq!(p2.0, 200);
    assert_eq!(p2.1["messages"][0]["transactionId"], json!(minted));
    assert_eq!(p2.1["messages"][0]["data"], json!({"n": 2}));
    assert_eq!(
        h.call("GET", "/api/v1/system/maintenance", None),
        (200, maintenance_answer(0, false, false, 0, PUSH_OFF))
    );
    // No buffer record is left behind.
    assert!(h.snapshot().iter().all(|(k, _)| !k.starts_with("b/")));
    // A push after the drain is applied at once.
    let (_, body) = push(
        &h,
        json!([{"queue": "mm", "payload": {"n": 4}, "transactionId": "t4"}]),
    );
    assert_eq!(body[0]["status"], "queued");
}

#[test]
fn maintenance_post_needs_a_boolean_and_an_admin() {
    let h = Harness::new();
    for body in [json!({}), json!({"enabled": "true"}), json!({"enabled": 1})] {
        assert_eq!(
            h.call("POST", "/api/v1/system/maintenance", Some(body.clone())),
            (400, json!({"error": "enabled (boolean) is required"})),
            "{body}"
        );
        assert_eq!(
            h.call("POST", "/api/v1/system/maintenance/pop", Some(body.clone())),
            (400, json!({"error": "enabled (boolean) is required"})),
            "{body}"
        );
    }
    let h = Harness::with_config(HttpConfig {
        auth: Some(AuthConfig {
            tokens: vec![
                AuthToken::new("rw", Role::ReadWrite),
                AuthToken::new("admin", Role::Admin),
            ],
        }),
        ..HttpConfig::default()
    });
    for target in [
        "/api/v1/system/maintenance",
        "/api/v1/system/maintenance/pop",
    ] {
        let r = h.send(HttpRequest::new("GET", target).with_header("Authorization", "Bearer rw"));
        assert_eq!(r.status, 403, "{target}");
        let r =
            h.send(HttpRequest::new("GET", target).with_header("Authorization", "Bearer admin"));
        assert_eq!(r.status, 200, "{target}");
    }
}

#[test]
fn a_transaction_that_pushes_is_refused_during_push_maintenance() {
    let h = Harness::new();
    h.call(
        "POST",
        "/api/v1/system/maintenance",
        Some(json!({"enabled": true})),
    );
    let (status, body) = h.call(
        "POST",
        "/api/v1/transaction",
        Some(json!({"operations": [{"type": "push", "items": [{"queue": "tx", "payload": 1}]}]})),
    );
    assert_eq!(status, 503, "{body}");
    assert!(body["error"]
        .as_str()
        .unwrap()
        .contains("Maintenance mode is on"));
    h.call(
        "POST",
        "/api/v1/system/maintenance",
        Some(json!({"enabled": false})),
    );
    let (status, body) = h.call(
        "POST",
        "/api/v1/transaction",
        Some(json!({"operations": [{"type": "push", "items": [{"queue": "tx", "payload": 1}]}]})),
    );
    assert_eq!((status, body["success"].clone()), (200, json!(true)));
}

// ---------------------------------------------------------------------------------------------
// pop maintenance
// ---------------------------------------------------------------------------------------------

#[test]
fn pop_maintenance_answers_empty_survives_a_restart_and_wakes_parked_pops_when_off() {
    let h = Harness::new();
    push(&h, json!([{"queue": "pm", "payload": {"n": 1}}]));
    assert_eq!(
        h.call(
            "POST",
            "/api/v1/system/maintenance/pop",
            Some(json!({"enabled": true}))
        ),
        (200, maintenance_answer(0, false, true, 0, POP_ON))
    );
    assert_eq!(h.call("GET", "/api/v1/pop/queue/pm?batch=10", None).0, 204);
    let h = h.restart(HttpConfig::default());
    assert_eq!(
        h.call("GET", "/api/v1/system/maintenance/pop", None),
        (200, maintenance_answer(0, false, true, 0, POP_ON))
    );
    assert_eq!(h.call("GET", "/api/v1/pop/queue/pm?batch=10", None).0, 204);
    // A long-poll parks while pops are paused, and is answered when they resume.
    let parked = h.spawn(HttpRequest::new(
        "GET",
        "/api/v1/pop/queue/pm?batch=10&wait=true&timeout=30000",
    ));
    h.advance(1_000);
    assert!(parked.get().is_none(), "the long-poll is parked");
    let off = h.call(
        "POST",
        "/api/v1/system/maintenance/pop",
        Some(json!({"enabled": false})),
    );
    assert_eq!(off, (200, maintenance_answer(0, false, false, 0, POP_OFF)));
    h.run_until_stalled();
    let answer = parked.get().expect("woken when pops resume");
    assert_eq!(answer.status, 200);
    assert_eq!(
        response_json(&answer)["messages"][0]["data"],
        json!({"n": 1})
    );
}

// ---------------------------------------------------------------------------------------------
// traces
// ---------------------------------------------------------------------------------------------

fn trace(h: &Harness, pid: &str, tx: &str, names: Value, data: Value) -> String {
    let (status, body) = h.call(
        "POST",
        "/api/v1/traces",
        Some(
            json!({"transactionId": tx, "partitionId": pid, "consumerGroup": "workers",
                    "traceNames": names, "data": data}),
        ),
    );
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["success"], true);
    body["traceId"].as_str().unwrap().to_string()
}

#[test]
fn traces_are_stored_read_per_message_by_name_and_as_names_and_survive_a_restart() {
    let h = Harness::new();
    let (_, pushed) = push(
        &h,
        json!([{"queue": "tq", "payload": 1, "transactionId": "a"},
               {"queue": "tq", "payload": 2, "transactionId": "b"}]),
    );
    let pid = pushed[0]["partitionId"].as_str().unwrap().to_string();
    let t0 = h.now();
    let id1 = trace(
        &h,
        &pid,
        "a",
        json!(["order-1", "billing"]),
        json!({"step": 1}),
    );
    h.advance(1_000);
    let id2 = trace(&h, &pid, "a", json!("order-1"), json!({"step": 2}));
    h.advance(1_000);
    let id3 = trace(&h, &pid, "b", json!(null), json!({"text": "no name"}));
    // Defaults: eventType info, a missing group is queue mode.
    let (status, body) = h.call(
        "POST",
        "/api/v1/traces",
        Some(
            json!({"transactionId": "b", "partitionId": pid, "eventType": "error",
                    "traceNames": ["order-2"], "data": [1, 2]}),
        ),
    );
    assert_eq!(status, 201);
    let id4 = body["traceId"].as_str().unwrap().to_string();

    let expected_a = json!({"traces": [
        {"id": id1, "eventType": "info", "data": {"step": 1}, "consumerGroup": "workers",
         "workerId": "queen-edge-0", "createdAt": iso_ms(t0), "traceNames": ["billing", "order-1"]},
        {"id": id2, "eventType": "info", "data": {"step": 2}, "consumerGroup": "workers",
         "workerId": "queen-edge-0", "createdAt": iso_ms(t0 + 1_000), "traceNames": ["order-1"]},
    ]});
    assert_eq!(
        h.call("GET", &format!("/api/v1/traces/{pid}/a"), None),
        (200, expected_a.clone())
    );
    assert_eq!(
        h.call("GET", &format!("/api/v1/traces/{pid}/b"), None).1["traces"][1],
        json!({"id": id4, "eventType": "error", "data": [1, 2], "consumerGroup": "__QUEUE_MODE__",
               "workerId": "queen-edge-0", "createdAt": iso_ms(t0 + 2_000),
               "traceNames": ["order-2"]})
    );
    assert_eq!(
        h.call("GET", &format!("/api/v1/traces/{pid}/zz"), None),
        (200, json!({"traces": []}))
    );
    let by_name = |target: &str| h.call("GET", target, None);
    assert_eq!(
        by_name("/api/v1/traces/by-name/order-1?limit=1&offset=1"),
        (
            200,
            json!({"traces": [
                {"id": id2, "eventType": "info", "data": {"step": 2}, "consumerGroup": "workers",
                 "workerId": "queen-edge-0", "createdAt": iso_ms(t0 + 1_000),
                 "traceNames": ["order-1"], "transactionId": "a", "partitionId": pid,
                 "queueName": "tq", "partitionName": "Default"},
            ], "pagination": {"limit": 1, "offset": 1}})
        )
    );
    assert_eq!(
        by_name("/api/v1/traces/by-name/order-1").1["traces"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let names = json!({
        "traceNames": [
            {"traceName": "order-2", "traceCount": 1, "messageCount": 1, "lastSeen": iso_ms(t0 + 2_000)},
            {"traceName": "order-1", "traceCount": 2, "messageCount": 1, "lastSeen": iso_ms(t0 + 1_000)},
            {"traceName": "billing", "traceCount": 1, "messageCount": 1, "lastSeen": iso_ms(t0)},
        ],
        "total": 3,
        "pagination": {"limit": 50, "offset": 0},
    });
    assert_eq!(
        h.call("GET", "/api/v1/traces/names", None),
        (200, names.clone())
    );
    assert_eq!(
        h.call("GET", "/api/v1/traces/names?limit=1&offset=2", None)
            .1["traceNames"],
        json!([{"traceName": "billing", "traceCount": 1, "messageCount": 1, "lastSeen": iso_ms(t0)}])
    );
    let _ = id3;
    // The message browser counts each message's traces.
    let (_, listed) = h.call("GET", "/api/v1/messages?queue=tq", None);
    let counts: Vec<Value> = listed["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["traceCount"].clone())
        .collect();
    assert_eq!(counts, vec![json!(2), json!(2)]);
    let (_, one) = h.call("GET", &format!("/api/v1/messages/{pid}/a"), None);
    assert_eq!(one["traceCount"], 2);

    // Stored: the same answers after a restart.
    let h = h.restart(HttpConfig::default());
    assert_eq!(
        h.call("GET", &format!("/api/v1/traces/{pid}/a"), None),
        (200, expected_a)
    );
    assert_eq!(h.call("GET", "/api/v1/traces/names", None), (200, names));
}

#[test]
fn trace_input_is_checked() {
    let h = Harness::new();
    let (_, pushed) = push(
        &h,
        json!([{"queue": "tv", "payload": 1, "transactionId": "a"}]),
    );
    let pid = pushed[0]["partitionId"].as_str().unwrap().to_string();
    for (body, status, error) in [
        (
            json!({"partitionId": pid, "data": 1}),
            400,
            "transactionId and partitionId are required",
        ),
        (
            json!({"transactionId": "a", "partitionId": pid}),
            400,
            "data is required",
        ),
        (
            json!({"transactionId": "a", "partitionId": pid, "data": 1, "traceNames": [1]}),
            400,
            "traceNames must be a string, a list of at most 16 strings, or null",
        ),
        (
            json!({"transactionId": "a", "partitionId": pid, "data": 1, "eventType": 5}),
            400,
            "eventType must be a string",
        ),
        (
            json!({"transactionId": "nope", "partitionId": pid, "data": 1}),
            404,
            "Message not found",
        ),
    ] {
        assert_eq!(
            h.call("POST", "/api/v1/traces", Some(body.clone())),
            (status, json!({"error": error})),
            "{body}"
        );
    }
    let names: Vec<String> = (0..17).map(|i| format!("n{i}")).collect();
    let (status, _) = h.call(
        "POST",
        "/api/v1/traces",
        Some(json!({"transactionId": "a", "partitionId": pid, "data": 1, "traceNames": names})),
    );
    assert_eq!(status, 400);
    let big = "x".repeat(70 * 1024);
    let (status, _) = h.call(
        "POST",
        "/api/v1/traces",
        Some(json!({"transactionId": "a", "partitionId": pid, "data": big})),
    );
    assert_eq!(status, 413);
    assert_eq!(
        h.call("GET", &format!("/api/v1/traces/{pid}/a"), None),
        (200, json!({"traces": []})),
        "refused traces store nothing"
    );
}

#[test]
fn traces_go_with_their_message() {
    let h = Harness::new();
    let (status, _) = h.call(
        "POST",
        "/api/v1/configure",
        Some(json!({"queue": "tr", "options": {"retentionEnabled": true, "retentionSeconds": 1}})),
    );
    assert_eq!(status, 200);
    let (_, pushed) = push(
        &h,
        json!([{"queue": "tr", "payload": 1, "transactionId": "a"}]),
    );
    let pid = pushed[0]["partitionId"].as_str().unwrap().to_string();
    trace(&h, &pid, "a", json!(["gone"]), json!(1));
    assert_eq!(h.call("GET", "/api/v1/traces/names", None).1["total"], 1);
    h.advance(5_000);
    futures::executor::block_on(h.engine.maintain()).unwrap();
    assert_eq!(
        h.call("GET", &format!("/api/v1/traces/{pid}/a"), None),
        (200, json!({"traces": []}))
    );
    assert_eq!(h.call("GET", "/api/v1/traces/names", None).1["total"], 0);
    assert!(
        h.snapshot().iter().all(|(k, _)| !k.starts_with("t/")),
        "the trace record is deleted with its message"
    );
}

// ---------------------------------------------------------------------------------------------
// measured numbers
// ---------------------------------------------------------------------------------------------

fn ack_all(h: &Harness, messages: &[Value], status: &str, group: Option<&str>) {
    let body = h.ack_batch(messages, status, group);
    assert!(
        body.as_array()
            .unwrap()
            .iter()
            .all(|r| r["success"] == true),
        "{body}"
    );
}

#[test]
fn counters_are_stored_and_metrics_overview_and_status_report_measured_values() {
    let h = Harness::new();
    let items: Vec<Value> = (0..6)
        .map(|n| json!({"queue": "cq", "payload": n}))
        .collect();
    push(&h, json!(items));
    let (_, popped) = h.call("GET", "/api/v1/pop/queue/cq?batch=4", None);
    let popped = popped["messages"].as_array().unwrap().clone();
    ack_all(&h, &popped[..3], "completed", None);
    ack_all(&h, &popped[3..], "failed", None);
    h.advance(30_000);

    let check = |h: &Harness| {
        let (_, m) = h.call("GET", "/metrics", None);
        assert_eq!(
            (
                m["broker"]["pushed"].clone(),
                m["broker"]["popped"].clone(),
                m["broker"]["acked"].clone(),
                m["broker"]["failed"].clone()
            ),
            (json!(6), json!(4), json!(4), json!(1))
        );
        assert_eq!(m["messages"]["total"], 6);
        let (_, o) = h.call("GET", "/api/v1/resources/overview", None);
        // The overview's message categories are the queues' own counts summed (one queue here), so they
        // add up to `total`; the failed acks are the measured counter of `/metrics` and `/status`.
        let (_, q) = h.call("GET", "/api/v1/resources/queues/cq", None);
        assert_eq!(o["messages"], q["totals"], "{o}");
        assert_eq!(o["lag"]["pendingMessages"], 3, "{o}");
        assert_eq!(o["lag"]["maxTimeLagSeconds"], 30, "{o}");
        let (_, s) = h.call("GET", "/api/v1/status", None);
        assert_eq!(s["messages"]["failed"], 1);
        assert_eq!(s["messages"]["pushed"], 6);
        s
    };
    let s = check(&h);
    // Throughput: what this broker measured in the minute it happened.
    assert_eq!(s["pointCount"], 1);
    assert_eq!(
        s["throughput"][0],
        json!({"timestamp": iso_ms(T0 - T0 % 60_000), "pushed": 6, "popped": 4, "acked": 4,
               "failed": 1})
    );
    let (_, o) = h.call("GET", "/api/v1/resources/overview", None);
    assert_eq!(o["throughput"]["pushed"], 6);
    assert_eq!(o["throughput"]["pushPerSecond"], json!(0.02));
    // The failed span waits out its retry delay: the partition shows it as failed.
    let (_, q) = h.call("GET", "/api/v1/resources/queues/cq", None);
    assert_eq!(
        q["totals"]["failed"], 0,
        "the 1 s retry delay has passed: {q}"
    );

    // Totals survive a restart (the series starts again).
    let h = h.restart(HttpConfig::default());
    let s = check(&h);
    assert_eq!(s["pointCount"], 0);
    // The counts live in the lane's record: no row of their own.
    let lane = h
        .snapshot()
        .into_iter()
        .find(|(k, _)| k.starts_with("l/"))
        .expect("the queue-mode lane is stored");
    let lane: Value = serde_json::from_slice(&lane.1).unwrap();
    assert_eq!(
        (&lane["nd"], &lane["na"], &lane["nf"]),
        (&json!(4), &json!(4), &json!(1))
    );
}

#[test]
fn a_failed_span_counts_as_failed_while_it_waits_for_its_retry() {
    let h = Harness::new();
    h.call(
        "POST",
        "/api/v1/configure",
        Some(json!({"queue": "fq", "options": {"retryDelay": 60000}})),
    );
    push(
        &h,
        json!([{"queue": "fq", "payload": 1}, {"queue": "fq", "payload": 2}]),
    );
    let (_, popped) = h.call("GET", "/api/v1/pop/queue/fq?batch=2", None);
    ack_all(&h, popped["messages"].as_array().unwrap(), "failed", None);
    let (_, q) = h.call("GET", "/api/v1/resources/queues/fq", None);
    assert_eq!(
        q["totals"],
        json!({"total": 2, "pending": 0, "processing": 0, "completed": 0, "failed": 2,
               "deadLetter": 0})
    );
    h.advance(61_000);
    let (_, q) = h.call("GET", "/api/v1/resources/queues/fq", None);
    assert_eq!(q["totals"]["failed"], 0);
    assert_eq!(q["totals"]["pending"], 2);
}

// ---------------------------------------------------------------------------------------------
// small behaviours
// ---------------------------------------------------------------------------------------------

#[test]
fn an_empty_conflating_pop_with_wait_parks_until_a_push() {
    let h = Harness::new();
    push(&h, json!([{"queue": "cf", "payload": 1}]));
    let first = h.call(
        "GET",
        "/api/v1/pop/queue/cf?consumerGroup=g&conflation=true&subscriptionMode=all&autoAck=false",
        None,
    );
    assert_eq!(first.0, 200);
    ack_all(
        &h,
        first.1["messages"].as_array().unwrap(),
        "completed",
        Some("g"),
    );
    let parked = h.spawn(HttpRequest::new(
        "GET",
        "/api/v1/pop/queue/cf?consumerGroup=g&conflation=true&wait=true&timeout=10000",
    ));
    h.advance(2_000);
    assert!(parked.get().is_none(), "parked, not answered at once");
    push(&h, json!([{"queue": "cf", "payload": 2}]));
    h.run_until_stalled();
    let r = parked.get().expect("woken by the push");
    assert_eq!(response_json(&r)["messages"][0]["data"], 2);
    // With nothing pushed, the deadline answers 200 with no messages (conflation).
    let r = h.send(HttpRequest::new(
        "GET",
        "/api/v1/pop/queue/cf?consumerGroup=g2&conflation=true&subscriptionMode=new&wait=true&timeout=5000",
    ));
    assert_eq!(r.status, 200);
    assert_eq!(h.now(), T0 + 2_000 + 5_000, "answered at its deadline");
    assert_eq!(response_json(&r)["messages"], json!([]));
}

#[test]
fn autopilot_sizes_the_batch_from_the_groups_recent_ack_rate() {
    let h = Harness::new();
    let items: Vec<Value> = (0..3000)
        .map(|n| json!({"queue": "ap", "payload": n}))
        .collect();
    push(&h, json!(items));
    let target = "/api/v1/pop/queue/ap?consumerGroup=g&subscriptionMode=all&autopilot=true";
    let (_, first) = h.call("GET", target, None);
    assert_eq!(first["autopilot"]["batch"], 100, "no acks yet: the minimum");
    assert_eq!(first["messages"].as_array().unwrap().len(), 100);
    ack_all(
        &h,
        first["messages"].as_array().unwrap(),
        "completed",
        Some("g"),
    );
    // 100 acks within the 10 s window: 10 a second, still the minimum.
    let (_, second) = h.call("GET", target, None);
    assert_eq!(second["autopilot"]["batch"], 100);
    // A group acking fast gets bigger batches: 100 + 100 + 2500 acks in the window.
    ack_all(
        &h,
        second["messages"].as_array().unwrap(),
        "completed",
        Some("g"),
    );
    let (_, big) = h.call("GET", &format!("{target}&batch=2500"), None);
    assert!(
        big["autopilot"]["batch"] == 2500,
        "a sent batch is never changed: {}",
        big["autopilot"]
    );
    ack_all(
        &h,
        big["messages"].as_array().unwrap(),
        "completed",
        Some("g"),
    );
    let (_, sized) = h.call("GET", target, None);
    assert_eq!(
        sized["autopilot"]["batch"], 270,
        "2,700 acks in 10 s: 270 a second"
    );
    ack_all(
        &h,
        sized["messages"].as_array().unwrap(),
        "completed",
        Some("g"),
    );
    // The rate is recent: 10 s later it is back to the minimum.
    h.advance(10_000);
    push(&h, json!([{"queue": "ap", "payload": "late"}]));
    let (_, later) = h.call("GET", target, None);
    assert_eq!(later["autopilot"]["batch"], 100);
}

#[test]
fn message_listing_honours_from_to_and_dead_letter_status() {
    let h = Harness::new();
    h.call(
        "POST",
        "/api/v1/configure",
        Some(json!({"queue": "ml", "options": {"retryLimit": 0}})),
    );
    for n in 0..3 {
        push(
            &h,
            json!([{"queue": "ml", "payload": n, "transactionId": format!("t{n}")}]),
        );
        h.advance(60_000);
    }
    let txs = |target: &str| -> Vec<Value> {
        let (status, body) = h.call("GET", target, None);
        assert_eq!(status, 200, "{body}");
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["transactionId"].clone())
            .collect()
    };
    assert_eq!(
        txs("/api/v1/messages?queue=ml"),
        vec![json!("t0"), json!("t1"), json!("t2")]
    );
    let at = |ms: i64| iso_ms(ms).replace(':', "%3A");
    assert_eq!(
        txs(&format!(
            "/api/v1/messages?queue=ml&from={}",
            at(T0 + 60_000)
        )),
        vec![json!("t1"), json!("t2")]
    );
    assert_eq!(
        txs(&format!("/api/v1/messages?queue=ml&to={}", at(T0 + 60_000))),
        vec![json!("t0"), json!("t1")]
    );
    assert_eq!(
        txs(&format!(
            "/api/v1/messages?queue=ml&from={}&to={}",
            at(T0 + 1),
            at(T0 + 119_999)
        )),
        vec![json!("t1")]
    );
    // t0 goes to the dead-letter queue (retryLimit 0).
    let (_, popped) = h.call("GET", "/api/v1/pop/queue/ml?batch=1", None);
    ack_all(&h, popped["messages"].as_array().unwrap(), "failed", None);
    let (_, listed) = h.call("GET", "/api/v1/messages?queue=ml&status=dead_letter", None);
    assert_eq!(listed["messages"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed["messages"][0]["transactionId"], "t0");
    assert_eq!(listed["messages"][0]["status"], "dead_letter");
    assert_eq!(
        txs("/api/v1/messages?queue=ml&status=pending"),
        vec![json!("t1"), json!("t2")]
    );
    assert_eq!(
        h.call("GET", "/api/v1/messages?from=yesterday", None),
        (
            400,
            json!({"error": "from must be an ISO-8601 timestamp, got 'yesterday'"})
        )
    );
}

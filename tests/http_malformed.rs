//! A table of malformed requests: each gets the stated 4xx and error text, and changes nothing (the
//! store and the broker's views are identical before and after).

#![cfg(not(target_arch = "wasm32"))]

use crate::http_support;

use http_support::*;
use queen_edge::http::{HttpConfig, HttpRequest, Limits};
use serde_json::{json, Value};

/// How the `error` text must match.
enum Text {
    /// Exactly this.
    Is(&'static str),
    /// Starts with this.
    Starts(&'static str),
}

struct Case {
    method: &'static str,
    target: String,
    body: Option<Vec<u8>>,
    content_type: Option<&'static str>,
    status: u16,
    error: Text,
}

fn case(method: &'static str, target: &str, body: Option<&str>, status: u16, error: Text) -> Case {
    Case {
        method,
        target: target.to_string(),
        body: body.map(|b| b.as_bytes().to_vec()),
        content_type: None,
        status,
        error,
    }
}

fn bytes(method: &'static str, target: &str, body: Vec<u8>, status: u16, error: Text) -> Case {
    Case {
        method,
        target: target.to_string(),
        body: Some(body),
        content_type: None,
        status,
        error,
    }
}

use Text::{Is, Starts};

/// A broker holding a queue `q` with two messages (one leased in queue mode), and a dead letter.
fn setup() -> (Harness, String, String) {
    let h = Harness::with_config(HttpConfig {
        limits: Limits {
            max_items_per_push: 5,
            max_ack_items: 5,
            max_payload_bytes: 64,
            max_body_bytes: 4096,
            ..Limits::default()
        },
        ..HttpConfig::default()
    });
    let (status, pushed) = h.call(
        "POST",
        "/api/v1/push",
        Some(json!({"items": [
            {"queue": "q", "payload": 1, "transactionId": "t1"},
            {"queue": "q", "payload": 2, "transactionId": "t2"},
            {"queue": "dead", "payload": 3, "transactionId": "d1"}
        ]})),
    );
    assert_eq!(status, 201);
    let (status, popped) = h.call("GET", "/api/v1/pop/queue/q", None);
    assert_eq!(status, 200);
    let (_, dead) = h.call("GET", "/api/v1/pop/queue/dead", None);
    let (_, acked) = h.call(
        "POST",
        "/api/v1/ack",
        Some(
            json!({"transactionId": "d1", "partitionId": pushed[2]["partitionId"],
                    "status": "dlq", "leaseId": dead["leaseId"]}),
        ),
    );
    assert_eq!(acked[0]["dlq"], true);
    let pid = pushed[0]["partitionId"].as_str().unwrap().to_string();
    let lease = popped["leaseId"].as_str().unwrap().to_string();
    (h, pid, lease)
}

fn cases(pid: &str, lease: &str) -> Vec<Case> {
    let long = "x".repeat(300);
    let ack = |extra: Value| {
        let mut base = json!({"transactionId": "t1", "partitionId": pid, "leaseId": lease});
        for (k, v) in extra.as_object().unwrap() {
            if v.is_null() {
                base.as_object_mut().unwrap().remove(k);
            } else {
                base[k] = v.clone();
            }
        }
        base.to_string()
    };
    let seek = "/api/v1/consumer-groups/g/queues/q/seek";
    let extend = format!("/api/v1/lease/{lease}/extend");
    let mut v = vec![
        // ---- push ----
        case("POST", "/api/v1/push", None, 400, Is("Empty request body")),
        case("POST", "/api/v1/push", Some("  \n"), 400, Is("Empty request body")),
        case("POST", "/api/v1/push", Some("{"), 400, Starts("Invalid JSON: ")),
        case("POST", "/api/v1/push", Some("{\"items\": [}"), 400, Starts("Invalid JSON: ")),
        case("POST", "/api/v1/push", Some("[]"), 400, Is("Request body must be a JSON object")),
        case("POST", "/api/v1/push", Some("{}"), 400, Is("items array is required")),
        case("POST", "/api/v1/push", Some(r#"{"items": {}}"#), 400, Is("items array is required")),
        case("POST", "/api/v1/push", Some(r#"{"items": [1]}"#), 400, Is("items[0] must be an object, got a number")),
        case("POST", "/api/v1/push", Some(r#"{"items": [{"payload": 1}]}"#), 400, Is("Queue must be a string (items[0].queue)")),
        case("POST", "/api/v1/push", Some(r#"{"items": [{"queue": 5}]}"#), 400, Is("Queue must be a string (items[0].queue)")),
        case("POST", "/api/v1/push", Some(r#"{"items": [{"queue": "q", "partition": 7}]}"#), 400, Is("Partition must be a string (items[0].partition)")),
        case("POST", "/api/v1/push", Some(r#"{"items": [{"queue": "q", "partition": ""}]}"#), 400, Is("Partition name must not be empty")),
        case("POST", "/api/v1/push", Some(&format!(r#"{{"items": [{{"queue": "{long}"}}]}}"#)), 400, Is("Queue name is too long (300 bytes; the limit is 256)")),
        case("POST", "/api/v1/push", Some(r#"{"items": [{"queue": "a\u0000b"}]}"#), 400, Is("Queue name must not contain control characters")),
        case("POST", "/api/v1/push", Some(r#"{"items": [{"queue": "q", "transactionId": 5}]}"#), 400, Is("TransactionId must be a string (items[0].transactionId)")),
        case("POST", "/api/v1/push", Some(&format!(r#"{{"items": [{{"queue": "q", "transactionId": "{long}"}}]}}"#)), 400, Is("transactionId is too long (300 bytes; the limit is 256)")),
        case("POST", "/api/v1/push", Some(r#"{"items": [{"queue": "q", "traceId": 5}]}"#), 400, Is("TraceId must be a string (items[0].traceId)")),
        case("POST", "/api/v1/push", Some(r#"{"items": [{"queue": "q", "traceId": "abc"}]}"#), 400, Is("TraceId must be a UUID, got 'abc' (items[0].traceId)")),
        case("POST", "/api/v1/push", Some(r#"{"items": [{"queue": "q", "payload": 1}, {"queue": "q", "partition": false}]}"#), 400, Is("Partition must be a string (items[1].partition)")),
        case("POST", "/api/v1/push", Some(r#"{"items": [{"queue":"q"},{"queue":"q"},{"queue":"q"},{"queue":"q"},{"queue":"q"},{"queue":"q"}]}"#), 413, Is("Too many items: 6 (the limit is 5)")),
        case("POST", "/api/v1/push", Some(&format!(r#"{{"items": [{{"queue": "q", "payload": "{}"}}]}}"#, "p".repeat(100))), 413, Is("Payload too large: 102 bytes (the limit is 64) (items[0].payload)")),
        bytes("POST", "/api/v1/push", vec![b' '; 5000], 413, Is("Request body too large: 5000 bytes (the limit is 4096)")),
        Case { content_type: Some("application/x-queen-push"), ..bytes("POST", "/api/v1/push", b"QPB1....".to_vec(), 415, Is("Binary Queen protocols are not supported; send JSON")) },
        // ---- pop ----
        case("GET", "/api/v1/pop/queue/q?batch=0", None, 400, Is("batch must be an integer between 1 and 10000, got '0'")),
        case("GET", "/api/v1/pop/queue/q?batch=abc", None, 400, Is("batch must be an integer between 1 and 10000, got 'abc'")),
        case("GET", "/api/v1/pop/queue/q?batch=-1", None, 400, Is("batch must be an integer between 1 and 10000, got '-1'")),
        case("GET", "/api/v1/pop/queue/q?batch=10001", None, 400, Is("batch must be an integer between 1 and 10000, got '10001'")),
        case("GET", "/api/v1/pop/queue/q?partitions=0", None, 400, Is("partitions must be an integer between 1 and 64, got '0'")),
        case("GET", "/api/v1/pop/queue/q?partitions=65", None, 400, Is("partitions must be an integer between 1 and 64, got '65'")),
        case("GET", "/api/v1/pop/queue/q/partition/Default?partitions=100", None, 400, Is("partitions must be an integer between 1 and 64, got '100'")),
        case("GET", "/api/v1/pop/queue/q?wait=true&timeout=-5", None, 400, Is("timeout must be a non-negative integer of milliseconds, got '-5'")),
        case("GET", "/api/v1/pop/queue/q?timeout=soon", None, 400, Is("timeout must be a non-negative integer of milliseconds, got 'soon'")),
        case("GET", "/api/v1/pop/queue/q?leaseSeconds=-1", None, 400, Is("leaseSeconds must be an integer between 0 and 604800, got '-1'")),
        case("GET", "/api/v1/pop/queue/q?leaseSeconds=99999999999", None, 400, Is("leaseSeconds must be an integer between 0 and 604800, got '99999999999'")),
        case("GET", "/api/v1/pop/queue/q?conflation=true", None, 400, Is("conflation needs a consumerGroup (queue mode cannot conflate)")),
        case("GET", "/api/v1/pop/queue/q?conflation=true&consumerGroup=g&autoAck=true", None, 400, Is("conflation cannot be combined with autoAck")),
        case("GET", "/api/v1/pop/queue/q?consumerGroup=g&subscriptionFrom=yesterday", None, 400, Is("subscriptionFrom must be an ISO-8601 time or 'now', got 'yesterday'")),
        case("GET", "/api/v1/pop", None, 400, Is("namespace or task is required for a discovery pop")),
        case("GET", &format!("/api/v1/pop/queue/{long}"), None, 400, Is("Queue name is too long (300 bytes; the limit is 256)")),
        case("GET", &format!("/api/v1/pop/queue/q?consumerGroup={long}"), None, 400, Is("consumerGroup is too long (300 bytes; the limit is 256)")),
        case("GET", "/api/v1/pop/queue/%FF", None, 400, Is("'%FF' is not valid UTF-8 once decoded")),
        // ---- ack ----
        case("POST", "/api/v1/ack", None, 400, Is("Empty request body")),
        case("POST", "/api/v1/ack", Some("nope"), 400, Starts("Invalid JSON: ")),
        case("POST", "/api/v1/ack", Some(&ack(json!({"transactionId": null}))), 400, Is("transactionId is required")),
        case("POST", "/api/v1/ack", Some(&ack(json!({"transactionId": 5}))), 400, Is("transactionId is required")),
        case("POST", "/api/v1/ack", Some(&ack(json!({"partitionId": null}))), 400, Is("partitionId is required to ensure message uniqueness")),
        case("POST", "/api/v1/ack", Some(&ack(json!({"status": "bogus"}))), 400, Is("Invalid status 'bogus': expected completed, success, failed, retry or dlq")),
        case("POST", "/api/v1/ack", Some(&ack(json!({"status": 5}))), 400, Is("status must be a string, got a number")),
        case("POST", "/api/v1/ack", Some(&ack(json!({"error": 5}))), 400, Is("error must be a string or null")),
        case("POST", "/api/v1/ack", Some(&ack(json!({"consumerGroup": 5}))), 400, Is("consumerGroup must be a string or null")),
        case("POST", "/api/v1/ack", Some(&ack(json!({"leaseId": []}))), 400, Is("leaseId must be a string or null")),
        case("POST", "/api/v1/ack/batch", Some("{}"), 400, Is("acknowledgments array is required")),
        case("POST", "/api/v1/ack/batch", Some(r#"{"acknowledgments": []}"#), 400, Is("acknowledgments array cannot be empty")),
        case("POST", "/api/v1/ack/batch", Some(r#"{"acknowledgments": ["t1"]}"#), 400, Is("acknowledgments[0] must be an object, got a string")),
        case("POST", "/api/v1/ack/batch", Some(&format!(r#"{{"acknowledgments": [{}, {}], "consumerGroup": null}}"#, ack(json!({})), ack(json!({"transactionId": "t2", "status": "later"})))), 400, Is("Invalid status 'later': expected completed, success, failed, retry or dlq (acknowledgments[1].status)")),
        case("POST", "/api/v1/ack/batch", Some(&format!(r#"{{"acknowledgments": [{0},{0},{0},{0},{0},{0}]}}"#, ack(json!({})))), 413, Is("Too many acknowledgments: 6 (the limit is 5)")),
        // ---- lease extend ----
        case("POST", &extend, Some("{"), 400, Starts("Invalid JSON: ")),
        case("POST", &extend, Some("[]"), 400, Is("Request body must be a JSON object")),
        case("POST", &extend, Some(r#"{"seconds": -1}"#), 400, Is("seconds must be an integer between 0 and 604800, got -1")),
        case("POST", &extend, Some(r#"{"seconds": "ten"}"#), 400, Is("seconds must be an integer between 0 and 604800, got \"ten\"")),
        case("POST", &extend, Some(r#"{"seconds": 0}"#), 400, Is("seconds must be an integer between 1 and 604800, got 0")),
        case("POST", &extend, Some(r#"{"seconds": 1e12}"#), 400, Is("seconds must be an integer between 0 and 604800, got 1000000000000.0")),
        case("POST", &format!("/api/v1/lease/{long}/extend"), None, 400, Is("leaseId is too long (300 bytes; the limit is 256)")),
        // ---- transaction ----
        case("POST", "/api/v1/transaction", None, 400, Is("Empty request body")),
        case("POST", "/api/v1/transaction", Some("{}"), 400, Is("operations array required")),
        case("POST", "/api/v1/transaction", Some(r#"{"operations": []}"#), 400, Is("operations array cannot be empty")),
        case("POST", "/api/v1/transaction", Some(r#"{"operations": [3]}"#), 400, Is("operations[0] must be an object, got a number")),
        case("POST", "/api/v1/transaction", Some(r#"{"operations": [{"items": []}]}"#), 400, Is("operations[0].type must be a string")),
        case("POST", "/api/v1/transaction", Some(r#"{"operations": [{"type": "push"}]}"#), 400, Is("items array is required (operations[0].items)")),
        case("POST", "/api/v1/transaction", Some(r#"{"operations": [{"type": "push", "items": [{"queue": 1}]}]}"#), 400, Is("Queue must be a string (operations[0].items[0].queue)")),
        case("POST", "/api/v1/transaction", Some(&format!(r#"{{"operations": [{{"type": "push", "items": [{{"queue": "q"}}]}}, {}]}}"#, ack(json!({"type": "ack", "status": "maybe"})))), 400, Is("Invalid status 'maybe': expected completed, success, failed, retry or dlq (operations[1].status)")),
        case("POST", "/api/v1/transaction", Some(r#"{"operations": [{"type": "push", "items": [{"queue": "q"}]}], "kv": [{"op": "set"}]}"#), 400, Is("kv operations are not supported by this broker")),
        // ---- configure ----
        case("POST", "/api/v1/configure", Some("{}"), 400, Is("queue is required")),
        case("POST", "/api/v1/configure", Some(r#"{"queue": 5}"#), 400, Is("queue is required")),
        case("POST", "/api/v1/configure", Some(r#"{"queue": "q", "options": []}"#), 400, Is("options must be an object, got an array")),
        case("POST", "/api/v1/configure", Some(r#"{"queue": "q", "options": {"leaseTime": -1}}"#), 400, Is("leaseTime must be an integer between 0 and 604800, got -1 (options.leaseTime)")),
        case("POST", "/api/v1/configure", Some(r#"{"queue": "q", "options": {"leaseTime": "300"}}"#), 400, Is("leaseTime must be an integer between 0 and 604800, got \"300\" (options.leaseTime)")),
        case("POST", "/api/v1/configure", Some(r#"{"queue": "q", "options": {"retryLimit": 1.5}}"#), 400, Is("retryLimit must be an integer between 0 and 4294967295, got 1.5 (options.retryLimit)")),
        case("POST", "/api/v1/configure", Some(r#"{"queue": "q", "options": {"deadLetterQueue": "yes"}}"#), 400, Is("deadLetterQueue must be a boolean, got a string")),
        case("POST", "/api/v1/configure", Some(r#"{"queue": "q", "options": {"priority": "high"}}"#), 400, Is("priority must be an integer, got a string")),
        // ---- seek, subscription ----
        case("POST", seek, None, 400, Is("Must specify either 'toEnd': true or 'timestamp'")),
        case("POST", seek, Some(r#"{"toEnd": false}"#), 400, Is("Must specify either 'toEnd': true or 'timestamp'")),
        case("POST", seek, Some(r#"{"toEnd": "yes"}"#), 400, Is("toEnd must be a boolean, got a string")),
        case("POST", seek, Some(r#"{"timestamp": "yesterday"}"#), 400, Is("timestamp must be an ISO-8601 time, got 'yesterday'")),
        case("POST", seek, Some(r#"{"timestamp": 5}"#), 400, Is("timestamp must be an ISO-8601 string, got a number")),
        case("POST", "/api/v1/consumer-groups//queues/q/seek", Some(r#"{"toEnd": true}"#), 400, Is("consumerGroup must not be empty")),
        case("POST", "/api/v1/consumer-groups/g/subscription", Some("{}"), 400, Is("subscriptionTimestamp is required")),
        case("POST", "/api/v1/consumer-groups/g/subscription", Some(r#"{"subscriptionTimestamp": "2024-02-30T00:00:00Z"}"#), 400, Is("subscriptionTimestamp must be an ISO-8601 time, got '2024-02-30T00:00:00Z'")),
        // ---- dead letters, messages ----
        case("GET", "/api/v1/dlq?limit=-1", None, 400, Is("limit must be an integer between 0 and 10000, got '-1'")),
        case("GET", "/api/v1/dlq?offset=x", None, 400, Is("offset must be an integer between 0 and 4294967295, got 'x'")),
        case("POST", "/api/v1/dlq/abc/replay", Some("{"), 400, Starts("Invalid JSON: ")),
        case("POST", "/api/v1/dlq/no-such-row/replay", None, 404, Starts("")),
        case("POST", &format!("/api/v1/messages/{pid}/t1/retry"), None, 404, Starts("")),
        case("DELETE", &format!("/api/v1/messages/{pid}/t1"), None, 404, Starts("")),
        case("GET", "/api/v1/messages?status=lost", None, 400, Is("status must be one of pending, processing, completed, dead_letter; got 'lost'")),
        case("DELETE", &format!("/api/v1/resources/queues/{long}"), None, 400, Is("Queue name is too long (300 bytes; the limit is 256)")),
        // ---- traces ----
        case("POST", "/api/v1/traces", Some(r#"{"data": {}}"#), 400, Is("transactionId and partitionId are required")),
        case("POST", "/api/v1/traces", Some(&format!(r#"{{"transactionId": "t1", "partitionId": "{pid}"}}"#)), 400, Is("data is required")),
        case("POST", "/api/v1/traces", Some(&format!(r#"{{"transactionId": "t1", "partitionId": "{pid}", "data": 1, "traceNames": 5}}"#)), 400, Is("traceNames must be a string, a list of at most 16 strings, or null")),
    ];
    for c in &mut v {
        if c.content_type.is_none() && c.body.is_some() {
            c.content_type = Some("application/json");
        }
    }
    v
}

#[test]
fn malformed_requests_get_4xx_with_a_reason_and_change_nothing() {
    let (h, pid, lease) = setup();
    let table = cases(&pid, &lease);
    assert!(table.len() >= 50, "the table has {} cases", table.len());
    let view = |h: &Harness| {
        h.engine.read(|b, now| {
            (
                b.stats(now),
                b.list_queues(now),
                b.dead_letters(&queen_edge::core::api::DlqQuery {
                    limit: 1000,
                    ..Default::default()
                }),
            )
        })
    };
    let store_before = h.snapshot();
    let view_before = view(&h);
    let mut failures = Vec::new();
    for (i, c) in table.iter().enumerate() {
        let mut request = HttpRequest::new(c.method, &c.target);
        if let Some(body) = &c.body {
            request.body = body.clone();
        }
        if let Some(t) = c.content_type {
            request = request.with_header("Content-Type", t);
        }
        let r = h.send(request);
        let body = response_json(&r);
        let text = body["error"].as_str().unwrap_or("<no error field>");
        let text_ok = match c.error {
            Is(want) => text == want,
            Starts(want) => text.starts_with(want) && !text.is_empty(),
        };
        if r.status != c.status || !text_ok {
            failures.push(format!(
                "#{i} {} {}: got {} {text:?}",
                c.method, c.target, r.status
            ));
        }
        assert_eq!(r.header("content-type"), Some("application/json"), "#{i}");
        assert_eq!(r.header("access-control-allow-origin"), Some("*"), "#{i}");
        assert_eq!(
            h.snapshot(),
            store_before,
            "#{i} {} {} changed the store",
            c.method,
            c.target
        );
        assert!(
            view(&h) == view_before,
            "#{i} {} {} changed the broker",
            c.method,
            c.target
        );
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

//! Property/fuzz tests: random requests (random routes, query strings, bytes and JSON bodies) against a
//! broker holding a little state. No request may panic, none may get a 5xx (the store never fails here,
//! so a 5xx would be a bug), and every answer must be well-formed: CORS headers, and a JSON body with
//! `Content-Type: application/json` unless it is a 204 or the Prometheus text.
//!
//! Run longer with more cases (proptest reads `PROPTEST_CASES`), preferably in release mode:
//!
//! ```text
//! PROPTEST_CASES=100000 cargo test --release --test native http_fuzz::
//! ```

#![cfg(not(target_arch = "wasm32"))]

use crate::http_support;

use http_support::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use queen_edge::http::HttpRequest;
use serde_json::{json, Map, Value};

const KEYS: &[&str] = &[
    "items",
    "queue",
    "partition",
    "payload",
    "transactionId",
    "traceId",
    "namespace",
    "task",
    "acknowledgments",
    "partitionId",
    "status",
    "error",
    "leaseId",
    "consumerGroup",
    "seconds",
    "operations",
    "type",
    "requiredLeases",
    "kv",
    "timers",
    "options",
    "leaseTime",
    "retryLimit",
    "retryDelay",
    "priority",
    "deadLetterQueue",
    "dlqAfterMaxRetries",
    "ttl",
    "toEnd",
    "timestamp",
    "subscriptionTimestamp",
    "data",
    "traceNames",
    "eventType",
    "producerSub",
];

const WORDS: &[&str] = &[
    "q",
    "t1",
    "t2",
    "1",
    "2",
    "Default",
    "completed",
    "success",
    "failed",
    "retry",
    "dlq",
    "push",
    "ack",
    "now",
    "all",
    "new",
    "__QUEUE_MODE__",
    "2024-05-01T12:00:00Z",
    "1970-01-01T00:00:00Z",
    "0b9e2f2c-8a3e-4c1d-9f00-1234567890ab",
    "",
    "%",
    "%FF",
    "a/b",
    "\u{0}",
    "é",
];

const PARAMS: &[&str] = &[
    "batch",
    "wait",
    "timeout",
    "partitions",
    "autoAck",
    "consumerGroup",
    "subscriptionMode",
    "subscriptionFrom",
    "leaseSeconds",
    "autopilot",
    "conflation",
    "namespace",
    "task",
    "limit",
    "offset",
    "queue",
    "deleteMetadata",
    "status",
    "frames",
    "partition",
];

fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => proptest::sample::select(WORDS).prop_map(str::to_string),
        1 => "[a-zA-Z0-9 %+:./_-]{0,12}",
        1 => any::<String>(),
    ]
}

fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        (-3i64..70).prop_map(|n| json!(n)),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("JSON numbers are finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
    ]
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        word().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            proptest::collection::vec(
                (
                    prop_oneof![
                        4 => proptest::sample::select(KEYS).prop_map(str::to_string),
                        1 => "[a-zA-Z]{1,6}",
                    ],
                    inner
                ),
                0..6
            )
            .prop_map(|pairs| Value::Object(pairs.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

const TEMPLATES: &[(&str, &str)] = &[
    ("POST", "/api/v1/push"),
    ("GET", "/api/v1/pop/queue/{}"),
    ("GET", "/api/v1/pop/queue/{}/partition/{}"),
    ("GET", "/api/v1/pop"),
    ("POST", "/api/v1/ack"),
    ("POST", "/api/v1/ack/batch"),
    ("POST", "/api/v1/lease/{}/extend"),
    ("POST", "/api/v1/transaction"),
    ("POST", "/api/v1/configure"),
    ("GET", "/api/v1/resources/queues"),
    ("GET", "/api/v1/resources/queues/{}"),
    ("DELETE", "/api/v1/resources/queues/{}"),
    ("GET", "/api/v1/resources/overview"),
    ("GET", "/api/v1/resources/namespaces"),
    ("GET", "/api/v1/resources/tasks"),
    ("GET", "/api/v1/dlq"),
    ("POST", "/api/v1/dlq/{}/replay"),
    ("GET", "/api/v1/messages"),
    ("GET", "/api/v1/messages/{}/{}"),
    ("DELETE", "/api/v1/messages/{}/{}"),
    ("POST", "/api/v1/messages/{}/{}/retry"),
    ("DELETE", "/api/v1/consumer-groups/{}"),
    ("DELETE", "/api/v1/consumer-groups/{}/queues/{}"),
    ("POST", "/api/v1/consumer-groups/{}/subscription"),
    ("POST", "/api/v1/consumer-groups/{}/queues/{}/seek"),
    (
        "POST",
        "/api/v1/consumer-groups/{}/queues/{}/partitions/{}/seek",
    ),
    ("POST", "/api/v1/stats/refresh"),
    ("POST", "/api/v1/traces"),
    ("GET", "/health"),
    ("GET", "/metrics"),
    ("GET", "/metrics/prometheus"),
    ("GET", "/api/v1/status"),
    ("OPTIONS", "/api/v1/push"),
];

/// A path segment: mostly plausible names, sometimes percent-encoded junk.
fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => proptest::sample::select(&["q", "Default", "1", "2", "t1", "g", "dlq:1"][..]).prop_map(str::to_string),
        1 => "[a-zA-Z0-9%._:-]{0,10}",
    ]
}

fn path() -> impl Strategy<Value = (String, String)> {
    prop_oneof![
        9 => (
            proptest::sample::select(TEMPLATES),
            proptest::collection::vec(segment(), 3),
            prop_oneof![4 => Just(None), 1 => proptest::sample::select(&["GET", "POST", "DELETE", "PUT", "PATCH", "get"][..]).prop_map(Some)],
        )
            .prop_map(|((method, template), segs, other)| {
                let mut path = String::new();
                let mut parts = template.split("{}");
                path.push_str(parts.next().unwrap_or(""));
                for (i, part) in parts.enumerate() {
                    path.push_str(&segs[i]);
                    path.push_str(part);
                }
                (other.unwrap_or(method).to_string(), path)
            }),
        1 => ("[A-Z]{1,7}", "/[ -~]{0,30}"),
    ]
}

fn query() -> impl Strategy<Value = String> {
    let value = prop_oneof![
        Just("true".to_string()),
        Just("1".to_string()),
        Just("false".to_string()),
        (-5i64..100).prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        "[a-zA-Z0-9%+:.-]{0,10}",
    ];
    proptest::collection::vec(
        (
            prop_oneof![
                4 => proptest::sample::select(PARAMS).prop_map(str::to_string),
                1 => "[a-z%]{0,5}",
            ],
            value,
        ),
        0..6,
    )
    .prop_map(|pairs| {
        pairs
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("&")
    })
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        1 => Just(Vec::new()),
        2 => proptest::collection::vec(any::<u8>(), 0..64),
        6 => arb_json().prop_map(|v| serde_json::to_vec(&v).unwrap()),
    ]
}

fn request() -> impl Strategy<Value = HttpRequest> {
    (path(), query(), body(), any::<bool>()).prop_map(|((method, path), query, body, json_type)| {
        let mut r = HttpRequest::new(&method, &path);
        r.query = query;
        r.body = body;
        if json_type {
            r = r.with_header("Content-Type", "application/json");
        }
        r
    })
}

/// A broker with a queue `q` (partition id "1" in practice), a leased message and a dead letter.
fn seeded() -> Harness {
    let h = Harness::new();
    h.call(
        "POST",
        "/api/v1/push",
        Some(json!({"items": [
            {"queue": "q", "payload": 1, "transactionId": "t1"},
            {"queue": "q", "payload": 2, "transactionId": "t2"},
            {"queue": "q", "partition": "p2", "payload": 3, "transactionId": "t3"}
        ]})),
    );
    let (_, popped) = h.call(
        "GET",
        "/api/v1/pop/queue/q?consumerGroup=g&subscriptionMode=all",
        None,
    );
    if let Some(m) = popped["messages"].get(0) {
        h.call(
            "POST",
            "/api/v1/ack",
            Some(
                json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                        "status": "dlq", "consumerGroup": "g"}),
            ),
        );
    }
    h.call("GET", "/api/v1/pop/queue/q", None);
    h
}

fn check(h: &Harness, request: HttpRequest) -> Result<(), TestCaseError> {
    let described = format!("{} {}?{}", request.method, request.path, request.query);
    let r = h.send(request);
    prop_assert!(
        r.status < 500,
        "{described} -> {} {}",
        r.status,
        String::from_utf8_lossy(&r.body)
    );
    prop_assert!(
        [200, 201, 204, 400, 401, 403, 404, 409, 413, 415].contains(&r.status),
        "{described} -> unexpected status {}",
        r.status
    );
    prop_assert_eq!(r.header("Access-Control-Allow-Origin"), Some("*"));
    if r.status == 204 {
        prop_assert!(r.body.is_empty(), "{described}: 204 with a body");
    } else if r.header("content-type") == Some("application/json") {
        let parsed: Result<Value, _> = serde_json::from_slice(&r.body);
        prop_assert!(parsed.is_ok(), "{described}: body is not JSON");
        if r.status >= 400 {
            let v = parsed.unwrap();
            prop_assert!(
                v["error"].as_str().is_some_and(|e| !e.is_empty()),
                "{described}: {} without an error text: {v}",
                r.status
            );
        }
    } else {
        prop_assert_eq!(
            r.header("content-type"),
            Some("text/plain; version=0.0.4"),
            "{} answered neither JSON nor metrics text",
            described
        );
    }
    Ok(())
}

fn runner() -> TestRunner {
    TestRunner::new(Config {
        failure_persistence: None,
        ..Config::default()
    })
}

#[test]
fn random_requests_never_panic_or_5xx() {
    runner()
        .run(&request(), |request| check(&seeded(), request))
        .unwrap();
}

#[test]
fn random_request_sequences_on_one_broker_never_panic_or_5xx() {
    runner()
        .run(&proptest::collection::vec(request(), 1..12), |requests| {
            let h = seeded();
            for request in requests {
                check(&h, request)?;
            }
            Ok(())
        })
        .unwrap();
}

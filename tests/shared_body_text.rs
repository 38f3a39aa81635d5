//! Payloads and names kept as parts of the request body (docs/decisions.md, "do-text"): odd payloads and
//! names pushed as raw bytes, popped, acked and pushed again through a transaction, from the cache and after
//! a restart; every reply's exact bytes are written to the file named by `QE_REPLY_TRANSCRIPT` (when set) so
//! that two builds can be compared byte for byte, and each payload must come back exactly as it was sent.

#![cfg(not(target_arch = "wasm32"))]

use crate::http_support;

use http_support::*;
use queen_edge::http::{HttpRequest, HttpResponse};
use serde_json::Value;
use std::cell::RefCell;

/// The replies seen, in order: `METHOD target -> status body`.
#[derive(Default)]
struct Transcript(RefCell<String>);

impl Transcript {
    fn send(&self, h: &Harness, method: &str, target: &str, body: &[u8]) -> HttpResponse {
        let mut request = HttpRequest::new(method, target);
        if !body.is_empty() || method == "POST" {
            request = request.with_json(body.to_vec());
        }
        let r = h.send(request);
        self.0.borrow_mut().push_str(&format!(
            "{method} {target} {}\n-> {} {}\n",
            String::from_utf8_lossy(body),
            r.status,
            String::from_utf8_lossy(&r.body)
        ));
        r
    }

    fn save(&self, name: &str) {
        if let Ok(dir) = std::env::var("QE_REPLY_TRANSCRIPT") {
            std::fs::write(format!("{dir}.{name}"), self.0.borrow().as_bytes()).unwrap();
        }
    }
}

/// Payload texts as sent: whitespace inside, escapes, raw multi-byte text, surrogate pairs, numbers
/// that do not fit a double or an i64.
const PAYLOADS: &[&str] = &[
    "{ \"a\" : [1, 2.50, -0, 1e400, 12345678901234567890123456789],\n\t\"b\":{\"c\":{ }} }",
    r#""\u00e9\ud83d\ude00\"\\\/ tail""#,
    "\"é😀 raw\"",
    "[ ]",
    "0.1e-7",
    "-12345678901234567890",
    "true",
    r#"{"k\u0065y": "v\u0000", "é": [null]}"#,
];

/// A push body whose names are written with escapes and raw multi-byte text, and whose transaction ids
/// are sent twice, once escaped and once raw (the second of each is a duplicate).
fn odd_push_body() -> Vec<u8> {
    let mut items = Vec::new();
    for (i, p) in PAYLOADS.iter().enumerate() {
        // The queue `odd` written three ways, the partition `pé` two ways.
        let queue = [r#""odd""#, r#""o\u0064d""#, r#""\u006f\u0064\u0064""#][i % 3];
        let partition = [r#""p\u00e9""#, "\"pé\""][i % 2];
        items.push(format!(
            r#"{{"queue": {queue}, "partition": {partition}, "payload": {p}, "transactionId": "t{i}-é\"😀"}}"#
        ));
    }
    // Duplicates of items 0 and 1 with the ids written with escapes; an item whose keys are escaped.
    items.push(
        r#"{"queue": "odd", "partition": "pé", "payload": 1, "transactionId": "t0-\u00e9\u0022\ud83d\ude00"}"#
            .to_string(),
    );
    items.push(
        r#"{"qu\u0065ue": "odd", "partition": "p\u00e9", "payload": 2, "transactionId": "t1-é\"\ud83d\ude00"}"#
            .to_string(),
    );
    items.push(
        r#"{"queue": "odd", "p\u0061rtition": "p\u00e9", "p\u0061yload": "escaped keys", "tr\u0061nsactionId": "k\u0065y"}"#
            .to_string(),
    );
    format!("{{\"items\": [{}]}}", items.join(",\n ")).into_bytes()
}

/// The reply as a `Value` (serde_json refuses `1e400` as a `Value`: read as `1` here, the bytes are
/// checked by [`assert_payloads_verbatim`]).
fn body_json(r: &HttpResponse) -> Value {
    let text = String::from_utf8_lossy(&r.body).replace("1e400", "1");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Every payload text as sent is in `reply`'s bytes exactly, in order.
fn assert_payloads_verbatim(reply: &HttpResponse) {
    let text = std::str::from_utf8(&reply.body).unwrap();
    let mut from = 0;
    for p in PAYLOADS {
        let at = text[from..]
            .find(p)
            .unwrap_or_else(|| panic!("payload {p} not sent back as it was: {text}"));
        from += at + p.len();
    }
    assert!(
        text.contains("\"escaped keys\""),
        "the item with escaped keys: {text}"
    );
}

#[test]
fn odd_payloads_and_names_round_trip_exactly() {
    let t = Transcript::default();
    let h = Harness::new();
    let pushed = t.send(&h, "POST", "/api/v1/push", &odd_push_body());
    assert_eq!(
        pushed.status,
        201,
        "{}",
        String::from_utf8_lossy(&pushed.body)
    );
    let results = body_json(&pushed);
    let statuses: Vec<&str> = results
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    let mut expected = vec!["queued"; PAYLOADS.len()];
    expected.extend(["duplicate", "duplicate", "queued"]);
    assert_eq!(statuses, expected, "{results}");
    for r in results.as_array().unwrap() {
        assert_eq!(r["queueName"], "odd", "{r}");
        assert_eq!(r["partition"], "pé", "{r}");
    }
    assert_eq!(results[0]["transactionId"], "t0-é\"😀");
    assert_eq!(results[PAYLOADS.len()]["transactionId"], "t0-é\"😀");
    assert_eq!(results[PAYLOADS.len() + 2]["transactionId"], "key");

    // Popped from the cache (the pushed batch).
    let popped = t.send(&h, "GET", "/api/v1/pop/queue/odd?batch=100", b"");
    assert_eq!(popped.status, 200);
    assert_payloads_verbatim(&popped);
    let messages = body_json(&popped)["messages"].as_array().unwrap().clone();
    assert_eq!(messages.len(), PAYLOADS.len() + 1);
    assert_eq!(messages[0]["transactionId"], "t0-é\"😀");
    assert_eq!(messages[0]["partition"], "pé");
    // A duplicate sent again now, against the stored (cached) message.
    let again = t.send(
        &h,
        "POST",
        "/api/v1/push",
        r#"{"items": [{"queue": "odd", "partition": "p\u00e9", "payload": 3, "transactionId": "t\u0032-é\"😀"}]}"#.as_bytes(),
    );
    assert_eq!(
        body_json(&again)[0]["status"],
        "duplicate",
        "{}",
        body_json(&again)
    );
    let acked = h.ack_batch(&messages[..2], "completed", None);
    t.0.borrow_mut().push_str(&format!("ack -> {acked}\n"));

    // A transaction: a push with escaped names, an ack of a popped message with its ids escaped.
    let partition_id = messages[2]["partitionId"].as_str().unwrap();
    let lease = messages[2]["leaseId"].as_str().unwrap();
    let tx = format!(
        r#"{{"operations": [{{"type": "push", "items": [{{"queue": "\u006fdd", "partition": "tx\u00e9", "payload": {{ "x" : 1.0 }} , "transactionId": "\ud83d\ude00"}}]}},
            {{"type": "ack", "transactionId": "t2-\u00e9\"😀", "partitionId": "{partition_id}", "leaseId": "{lease}", "status": "completed"}}]}}"#
    );
    let answered = t.send(&h, "POST", "/api/v1/transaction", tx.as_bytes());
    assert_eq!(
        answered.status,
        200,
        "{}",
        String::from_utf8_lossy(&answered.body)
    );
    let popped = t.send(&h, "GET", "/api/v1/pop/queue/odd/partition/tx%C3%A9", b"");
    let text = String::from_utf8_lossy(&popped.body);
    assert!(text.contains(r#""data":{ "x" : 1.0 }"#), "{text}");
    assert_eq!(body_json(&popped)["messages"][0]["transactionId"], "😀");

    // The same messages read back from the store by a fresh engine (segments decoded, not cached).
    let h = Harness::new();
    t.send(&h, "POST", "/api/v1/push", &odd_push_body());
    let restarted = h.restart(Default::default());
    let popped = t.send(&restarted, "GET", "/api/v1/pop/queue/odd?batch=100", b"");
    assert_eq!(popped.status, 200);
    assert_payloads_verbatim(&popped);
    t.save("round-trip");
}

#[test]
fn bad_push_and_transaction_bodies_are_4xx_with_an_error() {
    let t = Transcript::default();
    let h = Harness::new();
    let bodies: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"  \n ".to_vec(),
        b"{".to_vec(),
        b"[]".to_vec(),
        b"null".to_vec(),
        b"{\"items\": 5}".to_vec(),
        b"{\"items\": [5]}".to_vec(),
        b"{\"items\": [{\"queue\": 5, \"payload\": 1}]}".to_vec(),
        b"{\"items\": [{\"queue\": \"q\", \"partition\": [], \"payload\": 1}]}".to_vec(),
        b"{\"items\": [{\"queue\": \"q\", \"transactionId\": 1, \"payload\": 1}]}".to_vec(),
        b"{\"items\": [{\"queue\": \"q\", \"payload\": 1,}]}".to_vec(),
        b"{\"items\": [{\"queue\": \"q\", \"payload\": \"\\ud800\"}]}".to_vec(),
        b"{\"items\": [{\"queue\": \"q\\ud800\", \"payload\": 1}]}".to_vec(),
        b"{\"items\": [{\"queue\": \"q\", \"payload\": 01}]}".to_vec(),
        b"{\"items\": [{\"queue\": \"\", \"payload\": 1}]}".to_vec(),
        b"\xef\xbb\xbf{\"items\": [{\"queue\": \"q\", \"payload\": 1}]}".to_vec(),
        // Not UTF-8: in a payload, in a name, in a skipped field, in a key, a truncated sequence.
        b"{\"items\": [{\"queue\": \"q\", \"payload\": \"\xff\"}]}".to_vec(),
        b"{\"items\": [{\"queue\": \"q\xc3\", \"payload\": 1}]}".to_vec(),
        b"{\"x\": \"\xfe\", \"items\": [{\"queue\": \"q\", \"payload\": 1}]}".to_vec(),
        b"{\"items\": [{\"\xe9\": 1, \"queue\": \"q\", \"payload\": 1}]}".to_vec(),
        b"{\"items\": [{\"queue\": \"q\", \"payload\": \"\xf0\x9f\x98\"}]}".to_vec(),
    ];
    for target in ["/api/v1/push", "/api/v1/transaction"] {
        for body in &bodies {
            let body = if target == "/api/v1/transaction" && body.starts_with(b"{\"items\"") {
                // The same items as a push operation, their raw bytes kept.
                let mut b = b"{\"operations\": [{\"type\": \"push\", ".to_vec();
                b.extend_from_slice(&body[1..body.len() - 1]);
                b.extend_from_slice(b"}]}");
                b
            } else {
                body.clone()
            };
            let r = t.send(&h, "POST", target, &body);
            let shown = String::from_utf8_lossy(&body).into_owned();
            if (400..500).contains(&r.status) {
                let v = body_json(&r);
                assert!(v["error"].is_string(), "{target} {shown}: {v}");
            } else {
                // Accepted: recorded in the transcript for the comparison of builds.
                t.0.borrow_mut()
                    .push_str(&format!("ACCEPTED {target} {shown}\n"));
            }
        }
    }
    t.save("errors");
}

use crate::support;

/// A push body of every payload of [`PAYLOADS`] to queue `g`, ids `{prefix}-N` written with escapes.
fn payloads_body(prefix: &str) -> Vec<u8> {
    let items: Vec<String> = PAYLOADS
        .iter()
        .enumerate()
        .map(|(i, p)| {
            format!(
                r#"{{"queue": "\u0067", "payload": {p}, "transactionId": "{prefix}-\u00e9{i}"}}"#
            )
        })
        .collect();
    format!("{{\"items\": [{}]}}", items.join(", ")).into_bytes()
}

#[test]
fn payloads_survive_a_failed_group_commit_and_the_reload_after_it() {
    use futures::executor::block_on;
    use queen_edge::core::BrokerConfig;
    use queen_edge::engine::Engine;
    use queen_edge::http::{handle, HttpConfig};
    use support::{SlowStore, TestHost};

    let broker = || BrokerConfig {
        default_subscription_new: false,
        ..BrokerConfig::default()
    };
    let store = SlowStore::new(1);
    let engine = block_on(Engine::open(store.clone(), TestHost::new(), broker())).unwrap();
    let config = HttpConfig::default();
    let send = |engine: &Engine<SlowStore, TestHost>, method: &str, target: &str, body: &[u8]| {
        let mut request = HttpRequest::new(method, target);
        if !body.is_empty() {
            request = request.with_json(body.to_vec());
        }
        block_on(handle(engine, &config, request))
    };
    let first = send(&engine, "POST", "/api/v1/push", &payloads_body("a"));
    assert_eq!(first.status, 201);
    // The next push commits alone; the one applied while it is in flight is in the group that fails.
    store.fail_commit(store.commits.get() + 2);
    let (kept, failed) = block_on(futures::future::join(
        handle(
            &engine,
            &config,
            HttpRequest::new("POST", "/api/v1/push").with_json(payloads_body("b")),
        ),
        handle(
            &engine,
            &config,
            HttpRequest::new("POST", "/api/v1/push").with_json(payloads_body("c")),
        ),
    ));
    assert_eq!(kept.status, 201, "{}", String::from_utf8_lossy(&kept.body));
    assert!(
        failed.status >= 500,
        "{}",
        String::from_utf8_lossy(&failed.body)
    );
    // After the reload: a, b from the store; c again, now kept (its ids were not kept by the failure).
    let again = send(&engine, "POST", "/api/v1/push", &payloads_body("c"));
    let again_text = String::from_utf8_lossy(&again.body).into_owned();
    assert_eq!(again.status, 201, "{again_text}");
    assert!(!again_text.contains("duplicate"), "{again_text}");
    for group in ["g1", "g2"] {
        let popped = send(
            &engine,
            "GET",
            &format!("/api/v1/pop/queue/g?batch=100&consumerGroup={group}"),
            b"",
        );
        assert_eq!(popped.status, 200);
        let text = String::from_utf8_lossy(&popped.body).into_owned();
        let mut from = 0;
        for prefix in ["a", "b", "c"] {
            for (i, p) in PAYLOADS.iter().enumerate() {
                let id = format!("\"transactionId\":\"{prefix}-é{i}\"");
                let at = text[from..]
                    .find(&id)
                    .unwrap_or_else(|| panic!("{id}: {text}"));
                from += at;
                let data = text[from..].find("\"data\":").unwrap() + from + 7;
                assert!(
                    text[data..].starts_with(p),
                    "{prefix}-{i}: {}",
                    &text[data..]
                );
            }
        }
        assert_eq!(
            body_json(&popped)["messages"].as_array().unwrap().len(),
            3 * PAYLOADS.len()
        );
    }
    let reopened = block_on(Engine::open(store.clone(), TestHost::new(), broker())).unwrap();
    let popped = send(
        &reopened,
        "GET",
        "/api/v1/pop/queue/g?batch=100&consumerGroup=g3",
        b"",
    );
    assert_eq!(
        body_json(&popped)["messages"].as_array().unwrap().len(),
        3 * PAYLOADS.len()
    );
}

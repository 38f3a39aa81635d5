//! Encryption at rest through the HTTP layer (wire contract §2.4, docs/decisions.md): golden answers for
//! a broker without a key (queues that ask for encryption are refused, nothing stored) and with one
//! (payloads stored only as envelopes, plain text on every way out).

#![cfg(not(target_arch = "wasm32"))]

use crate::http_support;

use http_support::*;
use queen_edge::core::api::is_envelope;
use queen_edge::core::segment;
use queen_edge::http::{EncryptionKey, HttpConfig};
use serde_json::{json, Value};

const KEY: &str = "8f1c2e0b5a7d93e4c6b1f0a29d8e7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a291807";
const MARKER: &str = "PLAINTEXT-MARKER-7f3a";

fn keyed() -> HttpConfig {
    HttpConfig {
        encryption: Some(EncryptionKey::from_hex(KEY).expect("a valid key")),
        ..HttpConfig::default()
    }
}

fn configure(h: &Harness, queue: &str, encrypted: bool) -> (u16, Value) {
    h.call(
        "POST",
        "/api/v1/configure",
        Some(json!({"queue": queue, "options": {"encryptionEnabled": encrypted, "retryLimit": 0}})),
    )
}

fn push(h: &Harness, queue: &str, tx: &str, payload: Value) -> (u16, Value) {
    h.call(
        "POST",
        "/api/v1/push",
        Some(json!({"items": [{"queue": queue, "transactionId": tx, "payload": payload}]})),
    )
}

/// Every stored byte as text, segments decoded (they may be DEFLATE-compressed).
fn stored_text(h: &Harness) -> String {
    h.snapshot()
        .iter()
        .map(|r| {
            let value = if r.0.starts_with("s/") {
                let messages = segment::decode(&r.1).expect("segments decode");
                serde_json::to_string(&messages).unwrap()
            } else {
                String::from_utf8_lossy(&r.1).into_owned()
            };
            format!("{} {}\n", r.0, value)
        })
        .collect()
}

/// The payloads of every stored message, as stored.
fn stored_payloads(h: &Harness) -> Vec<Value> {
    h.snapshot()
        .iter()
        .filter(|r| r.0.starts_with("s/"))
        .flat_map(|r| segment::decode(&r.1).expect("segments decode"))
        .map(|m| m.payload.to_value().expect("stored payloads are JSON"))
        .collect()
}

#[test]
fn without_a_key_configure_encryption_is_refused_and_nothing_changes() {
    let h = Harness::new();
    let before = h.snapshot();
    let (status, body) = configure(&h, "secret", true);
    assert_eq!(status, 400);
    assert_eq!(
        body,
        json!({"error": "encryptionEnabled is true, but this broker has no encryption key (set the \
                         QUEEN_ENCRYPTION_KEY secret on the Worker, or pass encryptionKey to Queen.open \
                         in every tab of the browser), so it cannot keep payloads encrypted at rest; \
                         queue 'secret' was not configured"})
    );
    assert_eq!(h.snapshot(), before, "a refused configure stores nothing");
    assert_eq!(
        h.call("GET", "/api/v1/resources/queues/secret", None).0,
        404
    );
    // Asking for no encryption is fine, as is leaving the option out.
    assert_eq!(configure(&h, "plain", false).0, 200);
    assert_eq!(push(&h, "plain", "t1", json!({"m": MARKER})).0, 201);
}

#[test]
fn without_a_key_pushes_to_an_encrypted_queue_are_refused() {
    // The queue was made encrypted by a broker that had a key; this one restarted without it.
    let keyed = Harness::with_config(keyed());
    assert_eq!(configure(&keyed, "secret", true).0, 200);
    assert_eq!(push(&keyed, "secret", "t0", json!({"m": "before"})).0, 201);
    let h = keyed.restart(HttpConfig::default());
    let before = h.snapshot();
    let refusal = json!({"error": "queue 'secret' has encryptionEnabled, but this broker has no \
        encryption key (set the QUEEN_ENCRYPTION_KEY secret on the Worker, or pass encryptionKey to \
        Queen.open in every tab of the browser), so it cannot keep payloads encrypted at rest; nothing \
        was pushed"});
    assert_eq!(
        push(&h, "secret", "t1", json!({"m": MARKER})),
        (409, refusal.clone())
    );
    // A batch that only partly goes there is refused whole.
    let (status, body) = h.call(
        "POST",
        "/api/v1/push",
        Some(json!({"items": [{"queue": "other", "payload": 1},
                              {"queue": "secret", "payload": {"m": MARKER}}]})),
    );
    assert_eq!((status, body), (409, refusal.clone()));
    // So is a transaction that pushes there.
    let (status, body) = h.call(
        "POST",
        "/api/v1/transaction",
        Some(json!({"operations": [{"type": "push", "items": [
            {"queue": "secret", "payload": {"m": MARKER}}]}]})),
    );
    assert_eq!((status, body), (409, refusal));
    assert_eq!(h.snapshot(), before, "refused pushes store nothing");
    assert!(!stored_text(&h).contains(MARKER));
    // What is stored stays readable as stored (the envelope): there is no key to open it.
    let (status, popped) = h.call("GET", "/api/v1/pop/queue/secret", None);
    assert_eq!(status, 200);
    let data = &popped["messages"][0]["data"];
    assert_eq!(
        data.as_object()
            .map(|o| o.keys().cloned().collect::<Vec<_>>()),
        Some(vec!["authTag".into(), "encrypted".into(), "iv".into()])
    );
}

#[test]
fn with_a_key_payloads_are_stored_as_envelopes_and_read_back_in_plain_text() {
    let h = Harness::with_config(keyed());
    let (status, body) = configure(&h, "secret", true);
    assert_eq!(status, 200);
    assert_eq!(body["options"]["encryptionEnabled"], true);
    let payload = json!({"m": MARKER, "n": [1, 2.5, null], "s": "é€"});
    let (status, pushed) = push(&h, "secret", "t1", payload.clone());
    assert_eq!(status, 201, "{pushed}");
    let pid = pushed[0]["partitionId"].as_str().unwrap().to_string();
    // A transaction's pushes are sealed too.
    let (status, tx) = h.call(
        "POST",
        "/api/v1/transaction",
        Some(json!({"operations": [{"type": "push", "items": [
            {"queue": "secret", "transactionId": "t2", "payload": {"m": MARKER, "via": "tx"}}]}]})),
    );
    assert_eq!((status, tx["success"].clone()), (200, json!(true)), "{tx}");
    // An unencrypted queue on the same broker stays plain.
    assert_eq!(
        push(&h, "plain", "p1", json!({"plain": "visible-text"})).0,
        201
    );

    // Storage: no plaintext of the encrypted queue; its payloads are Queen's envelope.
    let stored = stored_text(&h);
    assert!(!stored.contains(MARKER), "plaintext at rest:\n{stored}");
    assert!(
        stored.contains("visible-text"),
        "the plain queue is stored as is"
    );
    let envelopes: Vec<Value> = stored_payloads(&h)
        .into_iter()
        .filter(|p| p.get("encrypted").is_some())
        .collect();
    assert_eq!(envelopes.len(), 2);
    for e in &envelopes {
        let keys: Vec<&str> = e.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        assert_eq!(keys, ["authTag", "encrypted", "iv"]);
        assert_eq!(e["iv"].as_str().unwrap().len(), 24, "16-byte IV in base64");
        assert_eq!(
            e["authTag"].as_str().unwrap().len(),
            24,
            "16-byte tag in base64"
        );
    }

    // The message browser: decrypted, and says it is stored encrypted.
    let (status, detail) = h.call("GET", &format!("/api/v1/messages/{pid}/t1"), None);
    assert_eq!(status, 200);
    assert_eq!(
        (&detail["payload"], &detail["data"], &detail["isEncrypted"]),
        (&payload, &payload, &json!(true))
    );
    let (_, listing) = h.call("GET", "/api/v1/messages?queue=secret", None);
    assert_eq!(listing["messages"][0]["payload"], payload);
    assert_eq!(
        listing["messages"][1]["payload"],
        json!({"m": MARKER, "via": "tx"})
    );
    let (_, plain) = h.call("GET", "/api/v1/messages?queue=plain", None);
    assert_eq!(plain["messages"][0]["isEncrypted"], false);

    // Pop: plain text.
    let (status, popped) = h.call("GET", "/api/v1/pop/queue/secret?batch=10", None);
    assert_eq!(status, 200);
    assert_eq!(popped["messages"][0]["data"], payload);
    assert_eq!(
        popped["messages"][1]["data"],
        json!({"m": MARKER, "via": "tx"})
    );

    // Dead letter: the row keeps the envelope, the listing decrypts, a replay is still encrypted.
    let (_, acked) = h.call(
        "POST",
        "/api/v1/ack",
        Some(
            json!({"transactionId": "t1", "partitionId": pid, "status": "dlq",
                    "leaseId": popped["leaseId"]}),
        ),
    );
    assert_eq!(acked[0]["dlq"], true, "{acked}");
    assert!(!stored_text(&h).contains(MARKER));
    let (_, dlq) = h.call("GET", "/api/v1/dlq?queue=secret", None);
    assert_eq!(dlq["messages"][0]["data"], payload);
    let id = dlq["messages"][0]["id"].as_str().unwrap().to_string();
    let (status, _) = h.call("POST", &format!("/api/v1/dlq/{id}/replay"), None);
    assert_eq!(status, 200);
    assert!(!stored_text(&h).contains(MARKER));
    let (_, again) = h.call(
        "GET",
        "/api/v1/pop/queue/secret?consumerGroup=later&subscriptionMode=all&batch=10",
        None,
    );
    let replayed: Vec<&Value> = again["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["transactionId"] == format!("dlq:{id}"))
        .map(|m| &m["data"])
        .collect();
    assert_eq!(replayed, [&payload]);

    // A restart with the same key reads everything back; with another key, the envelope is returned
    // as stored (contract §2.4), never a wrong plaintext.
    let same = h.restart(keyed());
    let (_, detail) = same.call("GET", &format!("/api/v1/messages/{pid}/t1"), None);
    assert_eq!(detail["payload"], payload);
    let other = h.restart(HttpConfig {
        encryption: Some(EncryptionKey::from_hex(&KEY.replace('8', "9")).unwrap()),
        ..HttpConfig::default()
    });
    let (_, detail) = other.call("GET", &format!("/api/v1/messages/{pid}/t1"), None);
    assert_eq!(detail["isEncrypted"], true);
    assert!(detail["payload"]["encrypted"].is_string(), "{detail}");
}

#[test]
fn turning_encryption_off_keeps_earlier_messages_readable() {
    let h = Harness::with_config(keyed());
    assert_eq!(configure(&h, "q", true).0, 200);
    assert_eq!(push(&h, "q", "sealed", json!({"m": MARKER})).0, 201);
    assert_eq!(configure(&h, "q", false).0, 200);
    assert_eq!(push(&h, "q", "open", json!({"m": "open"})).0, 201);
    let (_, popped) = h.call("GET", "/api/v1/pop/queue/q?batch=10", None);
    assert_eq!(popped["messages"][0]["data"], json!({"m": MARKER}));
    assert_eq!(popped["messages"][1]["data"], json!({"m": "open"}));
}

#[test]
fn health_says_whether_a_key_is_configured() {
    let (_, body) = Harness::new().call("GET", "/health", None);
    assert_eq!(
        body["encryption"],
        json!({"keyConfigured": false, "cipher": "AES-256-GCM"})
    );
    let (_, body) = Harness::with_config(keyed()).call("GET", "/health", None);
    assert_eq!(body["encryption"]["keyConfigured"], true);
}

/// Every place a payload of an `encryptionEnabled` queue or a copy of it is stored, walked through and
/// scanned after each step (session 23 audit): the maintenance buffer and its drain, an exhausted
/// `failed` and a `reclaimLimit` filing into the dead-letter queue, the delivery log, a bulk replay, a
/// trace, and a prepared part of a transaction across shards. None may hold the plaintext.
#[test]
fn every_stored_copy_of_an_encrypted_queue_holds_only_the_envelope() {
    let h = Harness::with_config(keyed());
    let (status, body) = h.call(
        "POST",
        "/api/v1/configure",
        Some(
            json!({"queue": "secret", "options": {"encryptionEnabled": true, "retryLimit": 0,
                    "dlqAfterMaxRetries": true, "deadLetterQueue": true, "reclaimLimit": 1,
                    "deliveryLog": "all", "leaseTime": 5}}),
        ),
    );
    assert_eq!(status, 200, "{body}");
    let clean = |step: &str| {
        let stored = stored_text(&h);
        assert!(
            !stored.contains(MARKER),
            "plaintext at rest after {step}:\n{stored}"
        );
    };
    // Maintenance buffer (`b/`), then its drain into the queue.
    let (status, _) = h.call(
        "POST",
        "/api/v1/system/maintenance",
        Some(json!({"enabled": true})),
    );
    assert_eq!(status, 200);
    let (status, body) = push(&h, "secret", "b1", json!({"m": MARKER, "via": "buffer"}));
    assert_eq!((status, &body[0]["status"]), (201, &json!("buffered")));
    clean("a buffered push");
    let (status, _) = h.call(
        "POST",
        "/api/v1/system/maintenance",
        Some(json!({"enabled": false})),
    );
    assert_eq!(status, 200);
    clean("the drain");
    for tx in ["f1", "r1"] {
        assert_eq!(
            push(&h, "secret", tx, json!({"m": MARKER, "tx": tx})).0,
            201
        );
    }
    // An exhausted `failed` (retryLimit 0) files the head to the dead-letter queue.
    let popped =
        h.pop_messages("/api/v1/pop/queue/secret?consumerGroup=g&subscriptionMode=all&batch=1");
    assert_eq!(popped.len(), 1);
    assert_eq!(popped[0]["data"]["via"], "buffer");
    let acked = h.ack_batch(&popped, "failed", Some("g"));
    assert_eq!(acked[0]["dlq"], true, "{acked}");
    clean("a failed ack filed to the dead-letter queue");
    // `reclaimLimit` 1: a lease that runs out twice (the second time delivered alone) files the head.
    for _ in 0..2 {
        let popped =
            h.pop_messages("/api/v1/pop/queue/secret?consumerGroup=g&subscriptionMode=all&batch=1");
        assert_eq!(popped.len(), 1);
        h.advance(6_000);
    }
    let _ = h.call(
        "GET",
        "/api/v1/pop/queue/secret?consumerGroup=g&subscriptionMode=all&batch=1&wait=false",
        None,
    );
    clean("reclaimLimit filings and the delivery log");
    let (_, dlq) = h.call("GET", "/api/v1/dlq?queue=secret", None);
    assert!(
        !dlq["messages"].as_array().unwrap().is_empty(),
        "the dead-letter queue holds the filed heads: {dlq}"
    );
    // A trace about a message of the queue.
    let m =
        &h.pop_messages("/api/v1/pop/queue/secret?consumerGroup=t&subscriptionMode=all&batch=1")[0];
    let (status, body) = h.call(
        "POST",
        "/api/v1/traces",
        Some(
            json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                    "consumerGroup": "t", "data": {"note": "seen"}}),
        ),
    );
    assert_eq!(status, 201, "{body}");
    clean("a trace");
    // Bulk replay of every dead letter of the queue.
    let (status, body) = h.call(
        "POST",
        "/api/v1/dlq/replay",
        Some(json!({"queue": "secret"})),
    );
    assert_eq!(status, 200, "{body}");
    assert!(body["replayed"].as_u64().unwrap() >= 1, "{body}");
    clean("a bulk replay");
    // A prepared part of a transaction across shards (`w/`).
    #[cfg(feature = "twophase")]
    {
        let body = json!({"operations": [{"type": "push", "items": [
            {"queue": "secret", "transactionId": "w1", "payload": {"m": MARKER, "via": "prepared"}}]}]});
        let r = h.prepare_part(body.to_string().into_bytes());
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        clean("a prepared part");
        let r =
            futures::executor::block_on(queen_edge::http::prepared::commit(&h.engine, "part-1"));
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        clean("a committed prepared part");
    }
    // Everything comes back in plain text to a fresh group.
    let all = h.pop_messages(
        "/api/v1/pop/queue/secret?consumerGroup=fresh&subscriptionMode=all&batch=100",
    );
    let texts: Vec<String> = all.iter().map(|m| m["data"].to_string()).collect();
    assert!(
        texts.iter().all(|t| t.contains(MARKER)),
        "every message opens: {texts:?}"
    );
}

/// The plaintext sealed is the payload's text as pushed, and a pop answers that text byte for byte:
/// numbers beyond `f64`, key order and repeated keys survive, and valid JSON a `serde_json::Value`
/// cannot hold (a number beyond `f64`'s range, a lone surrogate escape, deep nesting) is stored, as on a
/// plain queue. Found by session 36's QA pass: such payloads came back rounded and reordered, or the
/// push answered 500 (which Queen's clients retry) and stored nothing.
#[test]
fn an_encrypted_queue_keeps_each_payload_text_byte_for_byte() {
    let h = Harness::with_config(keyed());
    configure(&h, "secret", true);
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    let payloads = [
        r#"[12345678901234567890123, 1e2, -0, {"b":1,"a":2}, {"a":1,"a":2}, 123456789012345678901234567890.5]"#,
        r#"{"x":1E400}"#,
        r#""\ud800""#,
        deep.as_str(),
    ];
    for (i, payload) in payloads.iter().enumerate() {
        let body = format!(
            r#"{{"items": [{{"queue": "secret", "transactionId": "t{i}", "payload": {payload}}}]}}"#
        );
        let (status, answer) = h.call_raw("POST", "/api/v1/push", body.as_bytes());
        assert_eq!(status, 201, "{payload}: {answer}");
    }
    assert!(
        stored_payloads(&h).iter().all(is_envelope),
        "stored only as envelopes"
    );
    let response = h.send(queen_edge::http::HttpRequest::new(
        "GET",
        "/api/v1/pop/queue/secret?batch=10&wait=false",
    ));
    assert_eq!(response.status, 200);
    let text = String::from_utf8(response.body.clone()).unwrap();
    for payload in payloads {
        assert!(
            text.contains(&format!(r#""data":{payload}"#))
                || text.contains(&format!(r#""payload":{payload}"#)),
            "{payload} comes back as pushed: {text}"
        );
    }
}

//! Defects found by the session-9 audit (docs/decisions.md, "Audit (session 9) — audit"), each pinned
//! by the test that showed it: an acknowledged write lost, a message delivered to no one, or an answer
//! that misstates what happened to data.

use crate::http_support;
use crate::support;

use futures::executor::block_on;
use queen_edge::core::api::*;
use queen_edge::core::BrokerConfig;
use queen_edge::engine::Engine;
use queen_edge::store::MemStore;
use serde_json::json;
use support::TestHost;

fn open(store: &MemStore, host: &TestHost, config: BrokerConfig) -> Engine<MemStore, TestHost> {
    block_on(Engine::open(store.clone(), host.clone(), config)).unwrap()
}

fn pop_group(
    engine: &Engine<MemStore, TestHost>,
    queue: &str,
    group: &str,
) -> Vec<serde_json::Value> {
    support::auto_ack_pop(engine, queue, Some(group))
}

/// A `new` group's first pop fixes its start at that pop's `now`, and a partition's cursor is the last
/// offset created at or before it. A message pushed after that pop, within the same millisecond, was
/// created "at" the start: every partition the group had not touched yet skipped it, so the group never
/// got it, although it was pushed after the group subscribed.
#[test]
fn a_push_in_the_same_millisecond_after_a_new_groups_first_pop_reaches_the_group() {
    let store = MemStore::new();
    let host = TestHost::new();
    let engine = open(&store, &host, BrokerConfig::default());
    block_on(engine.push(vec![PushItem::new("q", json!("history"))])).unwrap();
    host.now.set(host.now.get() + 10);
    // The group's first pop: nothing new yet, the subscription starts now.
    assert!(pop_group(&engine, "q", "g").is_empty());
    // A producer pushes in the same millisecond, after the pop.
    block_on(engine.push(vec![PushItem::new("q", json!("after the first pop"))])).unwrap();
    host.now.set(host.now.get() + 1);
    assert_eq!(
        pop_group(&engine, "q", "g"),
        vec![json!("after the first pop")],
        "a message pushed after the group subscribed is the group's"
    );
    // The history pushed before the first pop stays skipped, after a restart too.
    let reopened = open(&store, &host, BrokerConfig::default());
    assert!(pop_group(&reopened, "q", "g").is_empty());
}

/// The same after a reload in that millisecond (what a failed commit or a restart does): the clock the
/// load rebuilds must be past every `new` subscription's start, not only past the newest message.
#[test]
fn a_push_in_the_same_millisecond_after_a_reload_reaches_a_new_group() {
    let store = MemStore::new();
    let host = TestHost::new();
    let engine = open(&store, &host, BrokerConfig::default());
    block_on(engine.push(vec![PushItem::new("q", json!("history"))])).unwrap();
    host.now.set(host.now.get() + 10);
    assert!(pop_group(&engine, "q", "g").is_empty());
    block_on(engine.reload()).unwrap();
    block_on(engine.push(vec![PushItem::new("q", json!("after the reload"))])).unwrap();
    host.now.set(host.now.get() + 1);
    assert_eq!(
        pop_group(&engine, "q", "g"),
        vec![json!("after the reload")]
    );
}

/// An ack call that leaves a gap below its `dlq` item files the head after the committed prefix (the
/// gap), not the item's message (docs/protocol.md §4.3). The answer marked the `dlq` item `dlq: true`
/// anyway, so the caller was told its message was filed while it stays pending (it comes again) and
/// another was filed. `dlq: true` marks the item whose message was filed (§3.4), and only that one.
#[test]
fn dlq_true_marks_only_the_item_whose_message_was_filed() {
    let store = MemStore::new();
    let host = TestHost::new();
    let config = BrokerConfig {
        default_subscription_new: false,
        ..BrokerConfig::default()
    };
    let engine = open(&store, &host, config);
    let items = (0..4)
        .map(|n| PushItem::new("q", json!(n)))
        .collect::<Vec<_>>();
    block_on(engine.push(items)).unwrap();
    let popped = block_on(engine.pop(
        PopRequest {
            batch: Some(4),
            ..PopRequest::queue("q")
        },
        None,
    ))
    .unwrap();
    let m = &popped.messages;
    assert_eq!(m.len(), 4);
    // Acks message 0, leaves 1 un-acked, and sends `dlq` for 3.
    let results = block_on(engine.ack(
        None,
        vec![
            AckItem::new(
                &m[0].transaction_id,
                &m[0].partition_id,
                AckStatus::Completed,
            ),
            AckItem::new(&m[3].transaction_id, &m[3].partition_id, AckStatus::Dlq),
        ],
    ))
    .unwrap();
    let filed: Vec<u64> = engine.read(|b, _| {
        b.dead_letters(&DlqQuery {
            queue: Some("q".into()),
            limit: 10,
            ..Default::default()
        })
        .iter()
        .map(|d| d.offset)
        .collect()
    });
    assert_eq!(filed, vec![1], "the gap is filed (protocol §4.3)");
    assert!(results.iter().all(|r| r.success));
    assert!(
        !results[1].dlq,
        "message 3 was not filed: its item must not say dlq: true"
    );
    // Message 3 indeed comes again.
    let again = block_on(engine.pop(
        PopRequest {
            batch: Some(4),
            ..PopRequest::queue("q")
        },
        None,
    ))
    .unwrap();
    let offsets: Vec<serde_json::Value> = again
        .messages
        .iter()
        .map(|m| m.payload.to_value().unwrap())
        .collect();
    assert_eq!(offsets, vec![json!(2), json!(3)]);
}

/// A bulk dead-letter replay goes in chunks, each its own commit. When a later chunk's commit failed, the
/// call answered only the storage failure, as if nothing had happened, while the rows of the earlier
/// chunks were replayed (pushed back and removed from the dead-letter queue) for good. The error must
/// say what was done before it.
#[test]
fn a_bulk_replay_failing_after_a_chunk_says_what_it_replayed() {
    let h = http_support::Harness::new();
    let items: Vec<serde_json::Value> = (0..150)
        .map(|i| json!({"queue": "d", "payload": {"n": i}}))
        .collect();
    let (status, body) = h.call("POST", "/api/v1/push", Some(json!({ "items": items })));
    assert_eq!(status, 201, "{body}");
    for _ in 0..150 {
        let (_, popped) = h.call("GET", "/api/v1/pop/queue/d?batch=1", None);
        let m = &popped["messages"][0];
        let (code, acked) = h.call(
            "POST",
            "/api/v1/ack",
            Some(
                json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                        "status": "dlq", "error": "boom", "leaseId": popped["leaseId"]}),
            ),
        );
        assert_eq!((code, &acked[0]["dlq"]), (200, &json!(true)), "{acked}");
    }
    // The first chunk (100 rows) commits, the second fails.
    h.store.fail_commit_after(1);
    let (status, body) = h.call("POST", "/api/v1/dlq/replay", Some(json!({"queue": "d"})));
    let (_, dlq) = h.call("GET", "/api/v1/dlq?queue=d&limit=1000", None);
    assert_eq!(
        dlq["total"], 50,
        "the first chunk was replayed and stays so"
    );
    assert_eq!(status, 500, "{body}");
    let error = body["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("injected commit failure")
            && error.contains("100 dead letters were replayed and stay so"),
        "the error says what was replayed before it: {error}"
    );
}

/// The rule behind the first finding, checked over many interleavings: a `new` group gets exactly the
/// messages pushed after its first pop of the queue (in command order), on every partition, including
/// partitions created later, whatever the milliseconds (the clock moves by 0 or 1 ms a step, mostly 0).
/// A pop that finds no queue makes the subscription all the same (session 10, audit2: contract §3.7, as
/// Queen records it at the pop route): these pops do not wait (a waiting one is the next test).
#[test]
fn new_groups_get_exactly_what_is_pushed_after_their_first_pop() {
    for seed in 0..150u64 {
        let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let store = MemStore::new();
        let host = TestHost::new();
        let engine = open(&store, &host, BrokerConfig::default());
        let groups = ["a", "b", "c"];
        let mut subscribed = [false; 3];
        let mut expected: [Vec<u64>; 3] = Default::default();
        let mut got: [Vec<u64>; 3] = Default::default();
        let pop_into = |g: usize, got: &mut [Vec<u64>; 3]| {
            for m in block_on(engine.pop(
                PopRequest {
                    group: Some(groups[g].into()),
                    batch: Some(100),
                    partitions: Some(8),
                    auto_ack: true,
                    ..PopRequest::queue("q")
                },
                None,
            ))
            .unwrap()
            .messages
            {
                got[g].push(m.payload.to_value().unwrap().as_u64().unwrap());
            }
        };
        for n in 0..80u64 {
            host.now.set(host.now.get() + (next(4) == 0) as i64);
            if next(3) == 0 {
                let g = next(3) as usize;
                subscribed[g] = true;
                pop_into(g, &mut got);
            } else {
                let partition = format!("p{}", next(5));
                block_on(engine.push(vec![PushItem {
                    partition: partition.into(),
                    ..PushItem::new("q", json!(n))
                }]))
                .unwrap();
                for g in 0..3 {
                    if subscribed[g] {
                        expected[g].push(n);
                    }
                }
            }
        }
        host.now.set(host.now.get() + 1);
        for g in 0..3 {
            if subscribed[g] {
                pop_into(g, &mut got);
                got[g].sort();
            }
            assert_eq!(got[g], expected[g], "seed {seed}, group {}", groups[g]);
        }
    }
}

/// A consumer of a `new` group that starts before its queue exists long-polls it; the first push creates
/// the queue and wakes the pop, which only then makes the group's subscription, starting "now": after the
/// message that woke it. So the group never got the first messages of its queue, though they were all
/// pushed while it waited. A subscription made by a later attempt of a waiting pop starts when the pop
/// began (everything in a queue that did not exist then was pushed after it).
#[test]
fn a_new_group_waiting_before_its_queue_exists_gets_the_push_that_wakes_it() {
    use queen_edge::http::HttpRequest;
    let h = http_support::Harness::new();
    let waiting = h.spawn(HttpRequest::new(
        "GET",
        "/api/v1/pop/queue/fresh?consumerGroup=g&autoAck=true&wait=true&timeout=30000",
    ));
    h.advance(1_000);
    assert!(waiting.get().is_none(), "the pop parks");
    let (status, body) = h.call(
        "POST",
        "/api/v1/push",
        Some(json!({"items": [{"queue": "fresh", "payload": "first"}]})),
    );
    assert_eq!(status, 201, "{body}");
    h.run_until_stalled();
    let answer = waiting
        .get()
        .expect("the push woke the pop and it answered");
    assert_eq!(
        answer.status, 200,
        "the message that woke the pop is the group's"
    );
    assert_eq!(
        http_support::response_json(&answer)["messages"][0]["data"],
        "first"
    );
    // A later message reaches the group too (the subscription is in place).
    h.call(
        "POST",
        "/api/v1/push",
        Some(json!({"items": [{"queue": "fresh", "payload": "second"}]})),
    );
    let (status, later) = h.call(
        "GET",
        "/api/v1/pop/queue/fresh?consumerGroup=g&autoAck=true",
        None,
    );
    assert_eq!(
        (status, &later["messages"][0]["data"]),
        (200, &json!("second"))
    );
}

/// Turning push maintenance off commits the switch, then drains the buffer chunk by chunk. When the
/// drain's commit failed, the call answered only the failure, while maintenance mode was already off for
/// good (pushes applied at once again). The error must say what holds.
#[test]
fn turning_maintenance_off_says_it_is_off_when_the_drain_fails() {
    let h = http_support::Harness::new();
    let (status, body) = h.call(
        "POST",
        "/api/v1/system/maintenance",
        Some(json!({"enabled": true})),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = h.call(
        "POST",
        "/api/v1/push",
        Some(json!({"items": [{"queue": "m", "payload": "waits"}]})),
    );
    assert_eq!(
        (status, &body[0]["status"]),
        (201, &json!("buffered")),
        "{body}"
    );
    // The switch commits, the drain's commit fails.
    h.store.fail_commit_after(1);
    let (status, body) = h.call(
        "POST",
        "/api/v1/system/maintenance",
        Some(json!({"enabled": false})),
    );
    let (_, now) = h.call("GET", "/api/v1/system/maintenance", None);
    assert_eq!(now["maintenanceMode"], false, "the switch was committed");
    assert_eq!(status, 500, "{body}");
    let error = body["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("injected commit failure") && error.contains("maintenance mode is now off"),
        "the error says the mode is off: {error}"
    );
    // The buffered message is not lost: the next push drains it first.
    h.call(
        "POST",
        "/api/v1/push",
        Some(json!({"items": [{"queue": "m", "payload": "after"}]})),
    );
    let (_, popped) = h.call("GET", "/api/v1/pop/queue/m?batch=10", None);
    let data: Vec<&serde_json::Value> = popped["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["data"])
        .collect();
    assert_eq!(data, vec![&json!("waits"), &json!("after")]);
}

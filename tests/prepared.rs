//! Prepared transaction parts (docs/protocol.md §3.9.1, `core::prepared`): a prepared part's pushes are
//! invisible and its acks' leases pinned (they outlive their expiry, and nobody else acts on them), across a
//! restart; commit applies it once, abort leaves no trace and releases the leases.
#![cfg(feature = "twophase")]

use crate::support;

use futures::executor::block_on;
use queen_edge::core::api::*;
use queen_edge::core::prepared::PINNED_LEASE;
use queen_edge::core::BrokerConfig;
use queen_edge::engine::Engine;
use queen_edge::store::MemStore;
use serde_json::json;
use support::TestHost;

type TestEngine = Engine<MemStore, TestHost>;

fn open(store: &MemStore, host: &TestHost) -> TestEngine {
    block_on(Engine::open(
        store.clone(),
        host.clone(),
        BrokerConfig::default(),
    ))
    .unwrap()
}

/// Pushes one message to `queue` and pops it with a 30 s lease.
fn leased(engine: &TestEngine, queue: &str) -> DeliveredMessage {
    block_on(engine.push(vec![PushItem::new(queue, json!("in"))])).unwrap();
    let reply = block_on(engine.pop(
        PopRequest {
            lease_seconds: Some(30),
            ..PopRequest::queue(queue)
        },
        None,
    ))
    .unwrap();
    reply.messages.into_iter().next().expect("a message")
}

fn pop_payloads(engine: &TestEngine, queue: &str) -> Vec<serde_json::Value> {
    block_on(engine.pop(
        PopRequest {
            batch: Some(10),
            ..PopRequest::queue(queue)
        },
        None,
    ))
    .unwrap()
    .messages
    .into_iter()
    .map(|m| m.payload.to_value().unwrap())
    .collect()
}

fn ack_op(m: &DeliveredMessage) -> TxOperation {
    let mut item = AckItem::new(&m.transaction_id, &m.partition_id, AckStatus::Completed);
    item.lease_id = Some(m.lease_id.clone());
    TxOperation::Ack { item, group: None }
}

fn ack_now(engine: &TestEngine, m: &DeliveredMessage) -> AckResult {
    let mut item = AckItem::new(&m.transaction_id, &m.partition_id, AckStatus::Completed);
    item.lease_id = Some(m.lease_id.clone());
    block_on(engine.ack(None, vec![item])).unwrap().remove(0)
}

fn part(m: &DeliveredMessage) -> Vec<TxOperation> {
    vec![
        ack_op(m),
        TxOperation::Push(vec![PushItem::new("out", json!("pushed"))]),
    ]
}

#[test]
fn a_prepared_part_pins_its_lease_hides_its_push_survives_a_restart_and_commits_once() {
    let store = MemStore::new();
    let host = TestHost::new();
    let engine = open(&store, &host);
    let m = leased(&engine, "q");
    assert_eq!(
        block_on(engine.prepare("tx-1", "coordinator", part(&m))).unwrap(),
        Ok(())
    );
    // Long past the lease's expiry: pinned, the message is not delivered again, nobody acks it, the
    // push is not visible.
    host.now.set(host.now.get() + 3_600_000);
    assert!(pop_payloads(&engine, "q").is_empty());
    assert_eq!(ack_now(&engine, &m).error.as_deref(), Some(PINNED_LEASE));
    assert!(pop_payloads(&engine, "out").is_empty());
    // A second transaction acking on the pinned lease is refused at prepare.
    assert_eq!(
        block_on(engine.prepare("tx-2", "coordinator", vec![ack_op(&m)])).unwrap(),
        Err(PINNED_LEASE.to_string())
    );
    // A restart keeps the part and its pin.
    let engine = open(&store, &host);
    let listed = engine.read(|b, _| b.prepared_list());
    assert_eq!(
        listed
            .iter()
            .map(|p| (p.id.as_str(), p.owner.as_str()))
            .collect::<Vec<_>>(),
        [("tx-1", "coordinator")]
    );
    assert!(pop_payloads(&engine, "q").is_empty());
    // Commit: the ack and the push apply together, once.
    let reply = block_on(engine.commit_prepared("tx-1"))
        .unwrap()
        .expect("prepared");
    assert!(reply.success);
    assert_eq!(reply.transaction_id, "tx-1");
    assert_eq!(reply.results.len(), 2);
    assert!(
        matches!(&reply.results[0], TxResult::Ack(a) if a.success),
        "{reply:?}"
    );
    assert_eq!(block_on(engine.commit_prepared("tx-1")).unwrap(), None);
    assert_eq!(pop_payloads(&engine, "out"), [json!("pushed")]);
    assert!(pop_payloads(&engine, "q").is_empty(), "acked: never again");
    assert!(engine.read(|b, _| b.prepared_list()).is_empty());
    let engine = open(&store, &host);
    assert!(engine.read(|b, _| b.prepared_list()).is_empty());
    // Once the pop's lease on it expires, the pushed message comes back: one message, not two.
    host.now.set(host.now.get() + 3_600_000);
    assert_eq!(pop_payloads(&engine, "out"), [json!("pushed")]);
}

#[test]
fn an_aborted_part_leaves_nothing_and_releases_its_lease() {
    let store = MemStore::new();
    let host = TestHost::new();
    let engine = open(&store, &host);
    let m = leased(&engine, "q");
    block_on(engine.prepare("tx-1", "coordinator", part(&m)))
        .unwrap()
        .unwrap();
    assert!(block_on(engine.abort_prepared("tx-1")).unwrap());
    assert!(!block_on(engine.abort_prepared("tx-1")).unwrap());
    assert_eq!(block_on(engine.commit_prepared("tx-1")).unwrap(), None);
    // Unpinned, the lease is live until its expiry: the consumer may still ack with it.
    assert!(ack_now(&engine, &m).success);
    let m2 = leased(&engine, "q2");
    block_on(engine.prepare("tx-2", "coordinator", vec![ack_op(&m2)]))
        .unwrap()
        .unwrap();
    block_on(engine.abort_prepared("tx-2")).unwrap();
    // Past its expiry, the released lease has expired: the message is delivered again.
    host.now.set(host.now.get() + 60_000);
    assert_eq!(pop_payloads(&engine, "q2"), [json!("in")]);
    assert!(pop_payloads(&engine, "out").is_empty());
    let engine = open(&store, &host);
    assert!(engine.read(|b, _| b.prepared_list()).is_empty());
    assert!(pop_payloads(&engine, "out").is_empty());
}

#[test]
fn a_part_that_fails_its_checks_is_refused_and_nothing_is_stored() {
    let store = MemStore::new();
    let host = TestHost::new();
    let engine = open(&store, &host);
    let m = leased(&engine, "q");
    let mut stale = m.clone();
    stale.lease_id = "not-the-lease".into();
    let refused = block_on(engine.prepare("tx-1", "coordinator", part(&stale))).unwrap();
    assert_eq!(refused, Err("Invalid or expired lease".to_string()));
    assert!(engine.read(|b, _| b.prepared_list()).is_empty());
    // Nothing pinned: the real lease still acks.
    assert!(ack_now(&engine, &m).success);
    let unknown = block_on(engine.prepare(
        "tx-2",
        "coordinator",
        vec![TxOperation::Unknown("nope".into())],
    ))
    .unwrap();
    assert_eq!(unknown, Err("Unknown operation type: nope".to_string()));
}

#[test]
fn the_commit_route_answers_the_parts_transaction_answer_as_an_object() {
    let store = MemStore::new();
    let host = TestHost::new();
    let engine = open(&store, &host);
    let m = leased(&engine, "q");
    assert_eq!(
        block_on(engine.prepare("tx-http", "coordinator", part(&m))).unwrap(),
        Ok(())
    );
    let response = block_on(queen_edge::http::prepared::commit(&engine, "tx-http"));
    assert_eq!(response.status, 200);
    let body: serde_json::Value = serde_json::from_slice(&response.body).unwrap();
    assert_eq!(body["committed"], json!(true), "{body}");
    // The coordinator reads `reply.results` and merges them in request order (worker/src/txn_plan.rs).
    let types: Vec<&str> = body["reply"]["results"]
        .as_array()
        .unwrap_or_else(|| panic!("reply.results is not an array: {body}"))
        .iter()
        .map(|r| r["type"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(types, ["ack", "push"], "{body}");
    assert_eq!(body["reply"]["success"], json!(true));
    let again = block_on(queen_edge::http::prepared::commit(&engine, "tx-http"));
    let body: serde_json::Value = serde_json::from_slice(&again.body).unwrap();
    assert_eq!(body, json!({ "committed": false }));
}

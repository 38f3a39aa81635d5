//! Engine divergence under store faults (issue 15.4): state the store does not hold must never reach a
//! later commit or a later answer.

mod support;

use futures::executor::block_on;
use queen_edge::core::api::*;
use queen_edge::core::BrokerConfig;
use queen_edge::engine::Engine;
use queen_edge::store::MemStore;
use serde_json::json;
use support::TestHost;

fn config() -> BrokerConfig {
    BrokerConfig {
        default_subscription_new: false,
        ..BrokerConfig::default()
    }
}

/// Everything retained, read by a group that has never read before.
fn queued(engine: &Engine<MemStore, TestHost>, group: &str) -> Vec<serde_json::Value> {
    let reply = block_on(engine.pop(
        PopRequest {
            group: Some(group.into()),
            batch: Some(100),
            ..PopRequest::queue("q")
        },
        None,
    ))
    .unwrap();
    reply
        .messages
        .into_iter()
        .map(|m| m.payload.to_value().unwrap())
        .collect()
}

#[test]
fn a_rolled_back_transaction_whose_reload_fails_leaves_nothing_behind() {
    let store = MemStore::new();
    let engine = block_on(Engine::open(store.clone(), TestHost::new(), config())).unwrap();
    let pushed = block_on(engine.push(vec![
        PushItem::new("q", json!("kept")),
        PushItem::new("q", json!("second")),
    ]))
    .unwrap();
    // Group "worker" leases the first message only.
    let lease = block_on(engine.pop(
        PopRequest {
            group: Some("worker".into()),
            batch: Some(1),
            ..PopRequest::queue("q")
        },
        None,
    ))
    .unwrap();
    assert_eq!(lease.messages.len(), 1);
    // A transaction that pushes, then acks the second message outside the live lease's span: the ack
    // fails after the push was applied, so the transaction is rolled back by a reload, and that
    // reload's reads fail.
    store.fail_next_reads(1);
    let reply = block_on(engine.transaction(vec![
        TxOperation::Push(vec![PushItem::new("q", json!("rolled back"))]),
        TxOperation::Ack {
            item: AckItem::new(
                &pushed[1].transaction_id,
                &pushed[1].partition_id,
                AckStatus::Completed,
            ),
            group: Some("worker".into()),
        },
    ]));
    assert!(reply.is_err() || !reply.unwrap().success);
    // The next commands reload first: the rolled-back push is neither delivered nor committed later.
    block_on(engine.push(vec![PushItem::new("q", json!("after"))])).unwrap();
    let all = vec![json!("kept"), json!("second"), json!("after")];
    assert_eq!(queued(&engine, "audit"), all);
    let reopened = block_on(Engine::open(store.clone(), TestHost::new(), config())).unwrap();
    assert_eq!(queued(&reopened, "audit-after-restart"), all);
}

#[test]
fn a_failed_commit_whose_reload_fails_keeps_failing_until_the_store_answers() {
    let store = MemStore::new();
    let engine = block_on(Engine::open(store.clone(), TestHost::new(), config())).unwrap();
    store.fail_next_commits(1);
    assert!(block_on(engine.push(vec![PushItem::new("q", json!("lost"))])).is_err());
    store.fail_next_reads(1);
    assert!(
        block_on(engine.push(vec![PushItem::new("q", json!("refused"))])).is_err(),
        "a command that cannot reload first is refused"
    );
    block_on(engine.push(vec![PushItem::new("q", json!("ok"))])).unwrap();
    assert_eq!(queued(&engine, "audit"), vec![json!("ok")]);
}

#[test]
fn a_lost_index_entry_of_the_last_segment_stops_the_open() {
    let store = MemStore::new();
    {
        let engine = block_on(Engine::open(store.clone(), TestHost::new(), config())).unwrap();
        block_on(engine.push(vec![PushItem::new("q", json!(1))])).unwrap();
        block_on(engine.push(vec![PushItem::new("q", json!(2))])).unwrap();
    }
    let last_entry = block_on(queen_edge::store::Store::scan(&store, "x/"))
        .unwrap()
        .pop()
        .unwrap()
        .0;
    let mut damage = queen_edge::store::ChangeSet::default();
    damage.delete(last_entry);
    block_on(queen_edge::store::Store::commit(&store, &damage)).unwrap();
    match block_on(Engine::open(store.clone(), TestHost::new(), config())) {
        Err(e) => assert!(
            e.to_string().contains("past its partition's indexed end"),
            "{e}"
        ),
        Ok(_) => panic!("an open over a lost index entry must fail, not reuse the offset"),
    }
}

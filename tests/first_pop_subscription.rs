//! A named group's start is fixed by its first pop, whether or not the queue exists yet (wire contract
//! §3.7, spec 003 "only messages pushed after the group's first pop"; Queen records the subscription at the
//! pop route, before it looks for the queue). docs/decisions.md, "A `new` group's first pop before its
//! queue exists (session 10) — audit2".

use crate::support;

use futures::executor::block_on;
use queen_edge::core::api::*;
use queen_edge::core::BrokerConfig;
use queen_edge::engine::Engine;
use queen_edge::store::{MemStore, Store};
use serde_json::json;
use support::{auto_ack_pop, TestHost};

fn open(store: &MemStore, host: &TestHost) -> Engine<MemStore, TestHost> {
    block_on(Engine::open(
        store.clone(),
        host.clone(),
        BrokerConfig::default(),
    ))
    .unwrap()
}

fn push(engine: &Engine<MemStore, TestHost>, queue: &str, payload: &str) {
    block_on(engine.push(vec![PushItem::new(queue, json!(payload))])).unwrap();
}

/// The stored subscription keys (`g/...`).
fn subscription_keys(store: &MemStore) -> Vec<String> {
    block_on(store.scan("g/"))
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect()
}

/// The default mode is `new`: a group that polls a queue before anyone pushed to it gets every message
/// pushed after that first pop (it used to subscribe at its first pop that found the queue, skipping what
/// was pushed in between).
#[test]
fn a_polling_new_group_gets_what_is_pushed_after_its_first_pop_before_the_queue_existed() {
    let (store, host) = (MemStore::new(), TestHost::new());
    let engine = open(&store, &host);
    assert!(
        auto_ack_pop(&engine, "fresh", Some("g")).is_empty(),
        "nothing yet"
    );
    host.now.set(host.now.get() + 5);
    push(&engine, "fresh", "first");
    host.now.set(host.now.get() + 5);
    assert_eq!(
        auto_ack_pop(&engine, "fresh", Some("g")),
        vec![json!("first")]
    );
}

/// The start is stored: a restart between the first pop and the push changes nothing.
#[test]
fn the_first_pops_start_survives_a_restart() {
    let (store, host) = (MemStore::new(), TestHost::new());
    assert!(auto_ack_pop(&open(&store, &host), "fresh", Some("g")).is_empty());
    host.now.set(host.now.get() + 5);
    let engine = open(&store, &host);
    push(&engine, "fresh", "after the restart");
    assert_eq!(
        auto_ack_pop(&engine, "fresh", Some("g")),
        vec![json!("after the restart")]
    );
}

/// What was pushed before the group's first pop stays skipped (`new`), and a pop without a group stores
/// no subscription for a queue that does not exist.
#[test]
fn messages_before_the_first_pop_stay_skipped_and_queue_mode_stores_nothing() {
    let (store, host) = (MemStore::new(), TestHost::new());
    let engine = open(&store, &host);
    assert!(auto_ack_pop(&engine, "nobody", None).is_empty());
    assert_eq!(
        subscription_keys(&store),
        Vec::<String>::new(),
        "queue mode subscribes to nothing"
    );
    push(&engine, "q", "before");
    host.now.set(host.now.get() + 5);
    assert!(
        auto_ack_pop(&engine, "q", Some("late")).is_empty(),
        "pushed before the group's first pop"
    );
    push(&engine, "q", "after");
    assert_eq!(
        auto_ack_pop(&engine, "q", Some("late")),
        vec![json!("after")]
    );
}

/// Deleting a queue drops the subscriptions made before it existed too, as those made after.
#[test]
fn deleting_the_queue_drops_a_subscription_made_before_it_existed() {
    let (store, host) = (MemStore::new(), TestHost::new());
    let engine = open(&store, &host);
    assert!(auto_ack_pop(&engine, "fresh", Some("g")).is_empty());
    assert_eq!(
        subscription_keys(&store).len(),
        1,
        "the first pop stored the group's start"
    );
    push(&engine, "fresh", "x");
    block_on(engine.delete_queue("fresh")).unwrap();
    assert_eq!(subscription_keys(&store), Vec::<String>::new());
}

//! Group commit (issue 11): commands that arrive while a commit is in flight are committed together in
//! the next one; each replies only after the commit that holds its changes; a failed group commit fails
//! every command in it, keeps nothing of them, and the broker goes on from the store.

mod support;

use futures::executor::block_on;
use futures::future::join_all;
use queen_edge::core::api::*;
use queen_edge::core::BrokerConfig;
use queen_edge::engine::{Engine, EngineError};
use queen_edge::store::{ChangeSet, MemStore, Record, Store, StoreError};
use serde_json::json;
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use support::TestHost;

/// Pending once, then ready: a commit that takes a moment, as IndexedDB's do.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

/// A `MemStore` whose commits yield before they apply, and that can fail its commit number `n`.
#[derive(Clone)]
struct SlowStore {
    inner: MemStore,
    commits: Rc<Cell<u32>>,
    fail_commit: Rc<Cell<Option<u32>>>,
}

impl Store for SlowStore {
    async fn scan(&self, prefix: &str) -> Result<Vec<Record>, StoreError> {
        self.inner.scan(prefix).await
    }
    async fn get(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        self.inner.get(keys).await
    }
    async fn commit(&self, changes: &ChangeSet) -> Result<(), StoreError> {
        YieldOnce(false).await;
        let n = self.commits.get() + 1;
        self.commits.set(n);
        if self.fail_commit.get() == Some(n) {
            return Err(StoreError::other("injected failure of a group commit"));
        }
        self.inner.commit(changes).await
    }
}

fn config() -> BrokerConfig {
    BrokerConfig {
        default_subscription_new: false,
        ..BrokerConfig::default()
    }
}

fn open() -> (SlowStore, Engine<SlowStore, TestHost>) {
    let store = SlowStore {
        inner: MemStore::new(),
        commits: Rc::new(Cell::new(0)),
        fail_commit: Rc::new(Cell::new(None)),
    };
    let engine = block_on(Engine::open(store.clone(), TestHost::new(), config())).unwrap();
    (store, engine)
}

fn push_one(
    engine: &Engine<SlowStore, TestHost>,
    i: u32,
) -> impl Future<Output = Result<Vec<PushResult>, EngineError>> + '_ {
    engine.push(vec![PushItem {
        transaction_id: Some(format!("tx-{i}")),
        ..PushItem::new("q", json!({ "i": i }))
    }])
}

fn drain(engine: &Engine<SlowStore, TestHost>) -> Vec<u32> {
    let reply = block_on(engine.pop(
        PopRequest {
            group: Some("check".into()),
            batch: Some(1000),
            ..PopRequest::queue("q")
        },
        None,
    ))
    .unwrap();
    reply
        .messages
        .iter()
        .map(|m| m.payload.to_value().unwrap()["i"].as_u64().unwrap() as u32)
        .collect()
}

#[test]
fn concurrent_commands_share_commits_and_each_reply_follows_its_commit() {
    let (store, engine) = open();
    let results = block_on(join_all((0..20).map(|i| push_one(&engine, i))));
    assert!(results
        .iter()
        .all(|r| r.as_ref().unwrap()[0].status == PushStatus::Queued));
    // The first push commits alone; the other 19 were applied while it was in flight: one commit.
    assert_eq!(store.commits.get(), 2, "20 pushes, 2 commits");
    assert_eq!(engine.counters().commits, 2);
    // Every answered push is stored: a new engine over the same store finds all of them, in order.
    let reopened = block_on(Engine::open(store.clone(), TestHost::new(), config())).unwrap();
    assert_eq!(drain(&reopened), (0..20).collect::<Vec<_>>());
}

#[test]
fn a_failed_group_commit_fails_every_command_in_it_and_keeps_nothing_of_them() {
    let (store, engine) = open();
    block_on(push_one(&engine, 100)).unwrap();
    // Commit 2 will hold push 0 alone; commit 3 the pushes and the pop applied while 2 was in flight.
    store.fail_commit.set(Some(3));
    let pushes = join_all((0..6).map(|i| push_one(&engine, i)));
    let pop = engine.pop(
        PopRequest {
            group: Some("eager".into()),
            batch: Some(100),
            ..PopRequest::queue("q")
        },
        None,
    );
    let (pushes, pop) = block_on(futures::future::join(pushes, pop));
    assert!(pushes[0].is_ok(), "push 0 committed alone: {:?}", pushes[0]);
    for (i, r) in pushes.iter().enumerate().skip(1) {
        assert!(
            matches!(r, Err(EngineError::Store(_))),
            "push {i} was in the failed group: {r:?}"
        );
    }
    assert!(
        matches!(pop, Err(EngineError::Store(_))),
        "the pop applied on top of the failed pushes fails too: {pop:?}"
    );
    // Nothing of the failed group is visible, and the broker goes on from the store.
    assert_eq!(drain(&engine), vec![100, 0]);
    let again = block_on(push_one(&engine, 5)).unwrap();
    assert_eq!(
        (again[0].status.clone(), again[0].offset),
        (PushStatus::Queued, 2)
    );
    let reopened = block_on(Engine::open(store.clone(), TestHost::new(), config())).unwrap();
    let all: Vec<u32> = {
        let r = block_on(reopened.pop(
            PopRequest {
                group: Some("after".into()),
                batch: Some(100),
                ..PopRequest::queue("q")
            },
            None,
        ))
        .unwrap();
        r.messages
            .iter()
            .map(|m| m.payload.to_value().unwrap()["i"].as_u64().unwrap() as u32)
            .collect()
    };
    assert_eq!(all, vec![100, 0, 5]);
}

#[test]
fn with_group_commit_off_each_command_commits_in_its_own_call() {
    let store = SlowStore {
        inner: MemStore::new(),
        commits: Rc::new(Cell::new(0)),
        fail_commit: Rc::new(Cell::new(None)),
    };
    let off = BrokerConfig {
        group_commit: false,
        ..config()
    };
    let engine = block_on(Engine::open(store.clone(), TestHost::new(), off)).unwrap();
    let results = block_on(join_all((0..20).map(|i| push_one(&engine, i))));
    assert!(results.iter().all(|r| r.is_ok()));
    assert_eq!(store.commits.get(), 20, "one commit per push");
}

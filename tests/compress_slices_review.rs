//! The sliced compression pass with requests run between two of its slices (review-slices): a host whose
//! `sleep(0)` (the wait between two slices) runs pushes, pops, acks, a queue deletion, a failed commit or
//! a second maintenance pass before the next slice is read. After each, memory and store agree (stored
//! bytes, what waits for compression, as a fresh open reads them) and every message still reads back.
#![cfg(feature = "deflate")]

use crate::support;

use futures::executor::block_on;
use futures::future::LocalBoxFuture;
use queen_edge::core::api::*;
use queen_edge::core::compaction::{COMPRESS_AFTER_MS, COMPRESS_SEGMENTS_PER_SLICE};
use queen_edge::core::BrokerConfig;
use queen_edge::engine::{Engine, Host};
use queen_edge::store::{ChangeSet, MemStore, Store};
use serde_json::{json, Value};
use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::rc::{Rc, Weak};
use support::{auto_ack_pop, configure_retention, SlowStore, T0};

type Hook = Box<dyn FnMut(u32) -> Option<LocalBoxFuture<'static, ()>>>;

/// A host whose `sleep(0)` runs the hook's future (the requests workerd delivers between two slices).
#[derive(Clone)]
struct HookHost {
    now: Rc<Cell<i64>>,
    hook: Rc<RefCell<Option<Hook>>>,
    zero_sleeps: Rc<Cell<u32>>,
    opens: Rc<Cell<u64>>,
}

impl HookHost {
    fn new() -> Self {
        HookHost {
            now: Rc::new(Cell::new(T0)),
            hook: Rc::default(),
            zero_sleeps: Rc::default(),
            opens: Rc::default(),
        }
    }
}

impl Host for HookHost {
    fn now_ms(&self) -> i64 {
        self.now.get()
    }
    fn sleep(&self, ms: u64) -> LocalBoxFuture<'static, ()> {
        if ms == 0 {
            let n = self.zero_sleeps.get() + 1;
            self.zero_sleeps.set(n);
            let run = self.hook.borrow_mut().as_mut().and_then(|hook| hook(n));
            if let Some(run) = run {
                return run;
            }
        }
        Box::pin(async {})
    }
    fn entropy(&self) -> u64 {
        self.opens.set(self.opens.get() + 1);
        (self.now.get() as u64) ^ (self.opens.get() << 40)
    }
}

type E = Engine<SlowStore, HookHost>;

fn config() -> BrokerConfig {
    BrokerConfig {
        default_subscription_new: false,
        ..BrokerConfig::default()
    }
}

fn push(engine: &E, queue: &str, partition: &str, n: u64) {
    block_on(push_async(engine, queue, partition, n)).unwrap();
}

async fn push_async(
    engine: &E,
    queue: &str,
    partition: &str,
    n: u64,
) -> Result<(), queen_edge::engine::EngineError> {
    engine
        .push(vec![PushItem {
            partition: partition.into(),
            ..PushItem::new(queue, json!({ "n": n }))
        }])
        .await
        .map(|_| ())
}

/// Pushes `count` one-message segments to `orders`, two partitions, each its own segment; then lets
/// them wait long enough to be compressed. Returns the numbers pushed.
fn fill(engine: &E, host: &HookHost, count: u64) -> BTreeSet<u64> {
    for n in 0..count {
        push(engine, "orders", if n % 2 == 0 { "a" } else { "b" }, n);
        host.now.set(host.now.get() + 1);
    }
    host.now.set(host.now.get() + COMPRESS_AFTER_MS + 1);
    (0..count).collect()
}

/// A deep copy of `store`'s records (so reading them back does not touch the store under test).
fn copy(store: &MemStore) -> MemStore {
    let out = MemStore::new();
    let mut changes = ChangeSet::default();
    for (key, value) in block_on(store.scan("")).unwrap() {
        changes.put(key, value);
    }
    block_on(out.commit(&changes)).unwrap();
    out
}

fn stored_segment_bytes(store: &MemStore) -> u64 {
    block_on(store.scan("s/"))
        .unwrap()
        .iter()
        .map(|(_, v)| v.len() as u64)
        .sum()
}

/// Memory and store agree, and the numbers of `queue` read back from the store (a copy, fresh open, a
/// new group from the start) are `expected` (when given).
fn check(
    engine: &E,
    store: &SlowStore,
    host: &HookHost,
    queue: &str,
    expected: Option<&BTreeSet<u64>>,
) {
    block_on(engine.settle()).unwrap();
    let live_bytes = engine.read(|b, _| b.storage_usage().0);
    assert_eq!(
        live_bytes,
        stored_segment_bytes(&store.inner),
        "memory's stored bytes are the store's"
    );
    let far = host.now.get() + 10 * COMPRESS_AFTER_MS;
    let mut live_waiting = engine.read(|b, _| b.segments_to_compress(far));
    let fresh = block_on(Engine::open(copy(&store.inner), HookHost::new(), config())).unwrap();
    let mut fresh_waiting = fresh.read(|b, _| b.segments_to_compress(far));
    live_waiting.sort();
    fresh_waiting.sort();
    assert_eq!(
        live_waiting, fresh_waiting,
        "what waits, as memory and as the pages say"
    );
    assert_eq!(fresh.read(|b, _| b.storage_usage().0), live_bytes);
    let mut got = BTreeSet::new();
    loop {
        let payloads: Vec<Value> = auto_ack_pop(&fresh, queue, Some("review-check"));
        if payloads.is_empty() {
            break;
        }
        for p in payloads {
            assert!(got.insert(p["n"].as_u64().unwrap()), "delivered twice: {p}");
        }
    }
    if let Some(expected) = expected {
        assert_eq!(&got, expected);
    }
}

fn set_hook(
    host: &HookHost,
    hook: impl FnMut(u32) -> Option<LocalBoxFuture<'static, ()>> + 'static,
) {
    *host.hook.borrow_mut() = Some(Box::new(hook));
}

fn setup(yields: u32) -> (SlowStore, HookHost, Rc<E>) {
    let store = SlowStore::new(yields);
    let host = HookHost::new();
    let engine = Rc::new(block_on(Engine::open(store.clone(), host.clone(), config())).unwrap());
    (store, host, engine)
}

const SEGMENTS: u64 = 3 * COMPRESS_SEGMENTS_PER_SLICE as u64 + 40;

/// Pushes to the partitions being compressed, pops and acks, between every two slices.
#[test]
fn traffic_between_slices_keeps_memory_and_store_agreeing() {
    for yields in [0, 1] {
        let (store, host, engine) = setup(yields);
        let mut expected = fill(&engine, &host, SEGMENTS);
        let weak: Weak<E> = Rc::downgrade(&engine);
        let pushed = Rc::new(RefCell::new(Vec::new()));
        let log = pushed.clone();
        set_hook(&host, move |n| {
            let engine = weak.upgrade()?;
            let log = log.clone();
            Some(Box::pin(async move {
                for i in 0..20u64 {
                    let v = 1_000_000 + u64::from(n) * 100 + i;
                    push_async(&engine, "orders", if i % 2 == 0 { "a" } else { "b" }, v)
                        .await
                        .unwrap();
                    log.borrow_mut().push(v);
                }
                let _ = engine
                    .pop(
                        PopRequest {
                            group: Some("g".into()),
                            batch: Some(7),
                            auto_ack: true,
                            ..PopRequest::queue("orders")
                        },
                        None,
                    )
                    .await
                    .unwrap();
            }))
        });
        let report = block_on(engine.maintain()).unwrap();
        assert!(
            host.zero_sleeps.get() >= 3,
            "{} waits between slices",
            host.zero_sleeps.get()
        );
        assert!(report.segments_compressed > 2 * COMPRESS_SEGMENTS_PER_SLICE as u64);
        expected.extend(pushed.borrow().iter().copied());
        check(&engine, &store, &host, "orders", Some(&expected));
        // Once more, after everything waited: the rest compresses and still agrees.
        *host.hook.borrow_mut() = None;
        host.now.set(host.now.get() + COMPRESS_AFTER_MS + 1);
        while block_on(engine.maintain()).unwrap().segments_compressed > 0 {}
        check(&engine, &store, &host, "orders", Some(&expected));
        let json_left = block_on(store.inner.scan("s/"))
            .unwrap()
            .iter()
            .filter(|(_, v)| v[0] == 2)
            .count();
        // Only segments whose entry is in no page yet (at most one page's worth a partition).
        assert!(
            json_left < 2 * queen_edge::core::ENTRIES_PER_PAGE,
            "{json_left} left as JSON"
        );
    }
}

/// The queue whose segments the pass is compressing is deleted (and made again) between two slices.
#[test]
fn a_queue_deleted_between_slices() {
    for yields in [0, 1] {
        let (store, host, engine) = setup(yields);
        fill(&engine, &host, SEGMENTS);
        let weak: Weak<E> = Rc::downgrade(&engine);
        set_hook(&host, move |n| {
            let engine = weak.upgrade()?;
            (n == 1).then(|| {
                Box::pin(async move {
                    assert!(engine.delete_queue("orders").await.unwrap());
                    for v in 0..40 {
                        push_async(&engine, "orders", "a", 5_000 + v).await.unwrap();
                    }
                }) as LocalBoxFuture<'static, ()>
            })
        });
        block_on(engine.maintain()).unwrap();
        let expected: BTreeSet<u64> = (5_000..5_040).collect();
        check(&engine, &store, &host, "orders", Some(&expected));
    }
}

/// A request's commit fails between two slices (the next slice runs after a reload), then the commit
/// of a slice itself fails: maintenance fails, memory is reloaded, and nothing acknowledged is lost.
#[test]
fn failed_commits_between_and_in_slices() {
    for yields in [0, 1] {
        let (store, host, engine) = setup(yields);
        let mut expected = fill(&engine, &host, SEGMENTS);
        let weak: Weak<E> = Rc::downgrade(&engine);
        let failing = store.clone();
        let acked = Rc::new(RefCell::new(Vec::new()));
        let log = acked.clone();
        set_hook(&host, move |n| {
            let engine = weak.upgrade()?;
            let store = failing.clone();
            let log = log.clone();
            Some(Box::pin(async move {
                match n {
                    1 => {
                        store.fail_next();
                        assert!(push_async(&engine, "orders", "a", 9_000).await.is_err());
                        push_async(&engine, "orders", "b", 9_001).await.unwrap();
                        log.borrow_mut().push(9_001);
                    }
                    2 => {
                        push_async(&engine, "orders", "a", 9_002).await.unwrap();
                        log.borrow_mut().push(9_002);
                        // The next commit is the slice's.
                        store.fail_next();
                    }
                    _ => {}
                }
            }) as LocalBoxFuture<'static, ()>)
        });
        assert!(
            block_on(engine.maintain()).is_err(),
            "the second slice's commit failed"
        );
        expected.extend(acked.borrow().iter().copied());
        check(&engine, &store, &host, "orders", Some(&expected));
        *host.hook.borrow_mut() = None;
        while block_on(engine.maintain()).unwrap().segments_compressed > 0 {}
        check(&engine, &store, &host, "orders", Some(&expected));
    }
}

/// A second maintenance pass (retention deleting the segments the first still lists) runs between two
/// slices of the first.
#[test]
fn retention_between_slices() {
    for yields in [0, 1] {
        let (store, host, engine) = setup(yields);
        configure_retention(&engine, "orders", 3600);
        fill(&engine, &host, SEGMENTS);
        let weak: Weak<E> = Rc::downgrade(&engine);
        let clock = host.now.clone();
        set_hook(&host, move |n| {
            let engine = weak.upgrade()?;
            let clock = clock.clone();
            (n == 1).then(|| {
                Box::pin(async move {
                    // Half the backlog expires: the pushes were one millisecond apart.
                    clock.set(clock.get() + 3_600_000 - COMPRESS_AFTER_MS - (SEGMENTS as i64) / 2);
                    let report = engine.maintain().await.unwrap();
                    assert!(report.segments_deleted > 0);
                    for v in 0..40 {
                        push_async(&engine, "orders", "b", 7_000 + v).await.unwrap();
                    }
                }) as LocalBoxFuture<'static, ()>
            })
        });
        block_on(engine.maintain()).unwrap();
        check(&engine, &store, &host, "orders", None);
    }
}

/// Large segments: a pass is cut by bytes (at most `COMPRESS_BYTES_PER_SLICE` a slice, at least one
/// segment), with traffic between the slices.
#[test]
fn a_pass_of_large_segments_is_cut_by_bytes() {
    use queen_edge::core::compaction::COMPRESS_BYTES_PER_SLICE;
    let (store, host, engine) = setup(1);
    let pad = "z".repeat(60_000);
    let mut expected = BTreeSet::new();
    for n in 0..40u64 {
        block_on(engine.push(vec![PushItem::new("orders", json!({ "n": n, "pad": pad }))]))
            .unwrap();
        expected.insert(n);
        host.now.set(host.now.get() + 1);
    }
    host.now.set(host.now.get() + COMPRESS_AFTER_MS + 1);
    let weak: Weak<E> = Rc::downgrade(&engine);
    set_hook(&host, move |n| {
        let engine = weak.upgrade()?;
        Some(Box::pin(async move {
            push_async(&engine, "orders", "Default", 100 + u64::from(n))
                .await
                .unwrap();
        }) as LocalBoxFuture<'static, ()>)
    });
    let report = block_on(engine.maintain()).unwrap();
    assert_eq!(report.segments_compressed, 40);
    let slices = (40 * 60_000u64).div_ceil(COMPRESS_BYTES_PER_SLICE);
    assert!(
        u64::from(host.zero_sleeps.get()) >= slices - 1,
        "{} waits for at least {slices} slices",
        host.zero_sleeps.get()
    );
    expected.extend((1..=host.zero_sleeps.get()).map(|n| 100 + u64::from(n)));
    check(&engine, &store, &host, "orders", Some(&expected));
}

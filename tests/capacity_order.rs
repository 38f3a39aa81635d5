//! The segment cache's eviction order against what the consumers will read (docs/decisions.md, "Review of
//! the segment cache order (session 9) — review-cache"), through the engine over a `MemStore` that counts
//! what it is asked to read.
//!
//! A segment every lane of its partition has passed is read again only by a view or a group starting
//! over, however the lanes passed it: by acks, by a seek, or because retention deleted it. Such segments
//! must leave the cache before a backlog that a consumer is about to read.

use crate::support;

use futures::executor::block_on;
use queen_edge::core::api::*;
use queen_edge::core::BrokerConfig;
use queen_edge::engine::Engine;
use queen_edge::store::MemStore;
use serde_json::json;
use support::{completed_items, configure_retention, TestHost};

/// Messages per push, and per pop: one segment each.
const BATCH: usize = 50;
/// Segments of the backlog nobody will read again (about 52 KB each decoded): several times the budget.
const DEAD_SEGMENTS: usize = 80;
/// Segments of the backlog a consumer then drains: well within the budget on their own.
const LIVE_SEGMENTS: usize = 12;
/// Room for about 19 segments.
const CACHE_BYTES: usize = 1024 * 1024;

fn open(store: &MemStore, host: &TestHost) -> Engine<MemStore, TestHost> {
    let config = BrokerConfig {
        default_subscription_new: false,
        cache_bytes: CACHE_BYTES,
        ..BrokerConfig::default()
    };
    block_on(Engine::open(store.clone(), host.clone(), config)).expect("opens")
}

/// Pushes `segments` batches of `BATCH` messages of about 1 KB to partition `partition` of `queue`.
fn push_backlog(
    engine: &Engine<MemStore, TestHost>,
    host: &TestHost,
    queue: &str,
    partition: &str,
    segments: usize,
) {
    let pad = "x".repeat(1000);
    for push in 0..segments {
        let items = (0..BATCH)
            .map(|i| PushItem {
                partition: partition.into(),
                ..PushItem::new(queue, json!({ "push": push, "i": i, "pad": pad }))
            })
            .collect();
        let results = block_on(engine.push(items)).expect("push");
        assert!(results.iter().all(|r| r.status == PushStatus::Queued));
        host.now.set(host.now.get() + 1);
    }
}

/// Pops `BATCH` messages of `queue` for `group` and acks them, until a pop comes back empty; returns
/// how many pops found messages.
fn drain(engine: &Engine<MemStore, TestHost>, queue: &str, group: &str) -> usize {
    let mut pops = 0;
    loop {
        let reply = block_on(engine.pop(
            PopRequest {
                group: Some(group.into()),
                batch: Some(BATCH as u32),
                ..PopRequest::queue(queue)
            },
            None,
        ))
        .expect("pop");
        if reply.messages.is_empty() {
            return pops;
        }
        pops += 1;
        let items = completed_items(&reply);
        let acked = block_on(engine.ack(Some(group.into()), items)).expect("ack");
        assert!(acked.iter().all(|a| a.success), "{acked:?}");
    }
}

/// Pushes the live backlog, drains it, and returns how many segments the drain read back from the
/// store.
fn live_backlog_reads(
    engine: &Engine<MemStore, TestHost>,
    store: &MemStore,
    host: &TestHost,
) -> usize {
    push_backlog(engine, host, "live", "p", LIVE_SEGMENTS);
    store.take_reads();
    assert_eq!(drain(engine, "live", "reader"), LIVE_SEGMENTS);
    store.take_reads().keys_got.len()
}

#[test]
fn segments_a_seek_skipped_go_before_a_backlog_being_read() {
    let store = MemStore::new();
    let host = TestHost::new();
    let engine = open(&store, &host);
    push_backlog(&engine, &host, "orders", "a", DEAD_SEGMENTS);
    // The only group claims a first batch (a seek moves only the cursors a group has), then skips
    // the whole backlog: nothing reads those segments again.
    let first = PopRequest {
        group: Some("billing".into()),
        batch: Some(BATCH as u32),
        ..PopRequest::queue("orders")
    };
    assert_eq!(
        block_on(engine.pop(first, None))
            .expect("pop")
            .messages
            .len(),
        BATCH
    );
    block_on(engine.seek("billing", "orders", SeekTarget::End)).expect("seek");
    assert_eq!(drain(&engine, "orders", "billing"), 0);
    assert_eq!(live_backlog_reads(&engine, &store, &host), 0);
}

#[test]
fn segments_retention_deleted_go_before_a_backlog_being_read() {
    let store = MemStore::new();
    let host = TestHost::new();
    let engine = open(&store, &host);
    configure_retention(&engine, "orders", 60);
    push_backlog(&engine, &host, "orders", "a", DEAD_SEGMENTS);
    host.now.set(host.now.get() + 61_000);
    let report = block_on(engine.maintain()).expect("maintain");
    assert_eq!(report.retention_deleted, (DEAD_SEGMENTS * BATCH) as u64);
    assert_eq!(live_backlog_reads(&engine, &store, &host), 0);
}

/// A small deterministic generator (the test needs no quality, only repeatability).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[test]
fn the_cache_keeps_its_budget_in_every_order_of_pushes_pops_acks_seeks_and_maintenance() {
    for seed in 0..4 {
        let store = MemStore::new();
        let host = TestHost::new();
        let engine = open(&store, &host);
        configure_retention(&engine, "kept", 30);
        let mut rng = Lcg(seed);
        let queues = ["kept", "live"];
        let groups = ["a", "b", "c"];
        for step in 0..400 {
            let queue = queues[rng.below(2) as usize];
            let group = groups[rng.below(3) as usize];
            match rng.below(10) {
                0..=3 | 9 => {
                    let partition = format!("p{}", rng.below(4));
                    push_backlog(&engine, &host, queue, &partition, 1);
                }
                4..=6 => {
                    let reply = block_on(engine.pop(
                        PopRequest {
                            group: Some(group.into()),
                            batch: Some(BATCH as u32),
                            ..PopRequest::queue(queue)
                        },
                        None,
                    ))
                    .expect("pop");
                    // Some batches are left to their lease (they come back after it), some acked.
                    if rng.below(4) > 0 && !reply.messages.is_empty() {
                        let items = completed_items(&reply);
                        block_on(engine.ack(Some(group.into()), items)).expect("ack");
                    }
                }
                7 => {
                    let target = if rng.below(2) == 0 {
                        SeekTarget::End
                    } else {
                        SeekTarget::Timestamp(host.now.get() - rng.below(40_000) as i64)
                    };
                    // A queue nobody pushed to yet is not found: that is fine here.
                    let _ = block_on(engine.seek(group, queue, target));
                }
                _ => {
                    host.now.set(host.now.get() + rng.below(20_000) as i64);
                    block_on(engine.maintain()).expect("maintain");
                }
            }
            let (used, _, budget) = engine.read(|b, _| {
                b.trim_cache();
                b.cache_usage()
            });
            assert!(
                used <= budget,
                "seed {seed} step {step}: {used} bytes cached over {budget}"
            );
        }
    }
}

//! Capacity: a backlog many times the segment cache, through the engine over a `MemStore` that counts
//! what it is asked to read (issue 12).
//!
//! - An open reads the index prefixes only, never a segment.
//! - Every message is delivered once, in order, after a restart, reading each segment about once.
//! - Dedup stays exact across the restart (a re-pushed transaction id is a duplicate of the original).
//! - A failed commit reloads the index, not the segments.
//! - The storage quota refuses pushes with 507-class errors while pops, acks and deletes go on.

use crate::support;

use futures::executor::block_on;
use queen_edge::core::api::*;
use queen_edge::core::{BrokerConfig, ENTRIES_PER_PAGE, INDEX_PREFIXES};
use queen_edge::engine::{Engine, EngineError};
use queen_edge::store::MemStore;
use serde_json::json;
use support::{completed_items, TestHost};

/// Room for one segment of `BATCH` messages of about 1 KB as the cache weighs it (the memory it holds:
/// its JSON text and the decoded messages), under the low-water mark a trim goes down to.
const CACHE_BYTES: usize = 96 * 1024;
const PARTITIONS: [&str; 2] = ["a", "b"];
const PUSHES_PER_PARTITION: usize = 40;
const BATCH: usize = 50;

fn config() -> BrokerConfig {
    BrokerConfig {
        default_subscription_new: false,
        cache_bytes: CACHE_BYTES,
        ..BrokerConfig::default()
    }
}

fn open(store: &MemStore, host: &TestHost, config: BrokerConfig) -> Engine<MemStore, TestHost> {
    block_on(Engine::open(store.clone(), host.clone(), config)).expect("opens")
}

fn transaction_id(partition: &str, n: usize) -> String {
    format!("{partition}-{n:06}")
}

/// `keys`, sorted.
fn sorted(mut keys: Vec<String>) -> Vec<String> {
    keys.sort();
    keys
}

/// The keys an open of what [`fill`] pushed reads, sorted: each partition's segments past its last
/// index page, and the absent key after them.
fn past_the_pages() -> Vec<String> {
    let paged = PUSHES_PER_PARTITION / ENTRIES_PER_PAGE * ENTRIES_PER_PAGE;
    assert!(
        paged < PUSHES_PER_PARTITION,
        "some segments are past the pages"
    );
    let mut keys: Vec<String> = (1..=PARTITIONS.len() as u64)
        .flat_map(|pid| {
            (paged..=PUSHES_PER_PARTITION)
                .map(move |push| queen_edge::core::segment_key(pid, (push * BATCH) as u64))
        })
        .collect();
    keys.sort();
    keys
}

/// Pushes `PUSHES_PER_PARTITION` batches of `BATCH` messages of about 1 KB to each partition.
fn fill(engine: &Engine<MemStore, TestHost>, host: &TestHost) -> usize {
    let pad = "x".repeat(1000);
    let mut n = 0;
    for push in 0..PUSHES_PER_PARTITION {
        for partition in PARTITIONS {
            let items = (0..BATCH)
                .map(|i| {
                    let seq = push * BATCH + i;
                    PushItem {
                        partition: partition.into(),
                        transaction_id: Some(transaction_id(partition, seq).into()),
                        ..PushItem::new("orders", json!({ "seq": seq, "pad": pad }))
                    }
                })
                .collect();
            let results = block_on(engine.push(items)).expect("push");
            assert!(results.iter().all(|r| r.status == PushStatus::Queued));
            n += BATCH;
        }
        host.now.set(host.now.get() + 1);
    }
    n
}

#[test]
fn a_backlog_many_times_the_cache_opens_from_the_index_and_drains_once_in_order() {
    let store = MemStore::new();
    let host = TestHost::new();
    let total = {
        let engine = open(&store, &host, config());
        fill(&engine, &host)
    };
    let payload_bytes = total * 1000;
    assert!(
        payload_bytes > 40 * CACHE_BYTES,
        "the backlog dwarfs the cache"
    );

    // Restart: the open reads the index prefixes and no segment.
    store.take_reads();
    let engine = open(&store, &host, config());
    let reads = store.take_reads();
    assert_eq!(
        reads.scans,
        INDEX_PREFIXES.to_vec(),
        "an open scans the index prefixes only"
    );
    // The only keys it asks for are the segments past each partition's last index page (pushed
    // after it, fewer than a page's worth: module `core::pages`), and the absent key after them.
    assert_eq!(
        sorted(reads.keys_got),
        past_the_pages(),
        "an open reads no segment but those past the pages"
    );
    // And, in one call, whether any segment is stored past each partition's absent key (damage).
    let calls: Vec<usize> = reads.ranges.iter().map(Vec::len).collect();
    assert_eq!(calls, [PARTITIONS.len()], "one range a partition");
    let segments = PARTITIONS.len() * PUSHES_PER_PARTITION;
    assert!(
        reads.records_scanned < (segments * 2) as u64,
        "an open reads index records ({} of them), not messages",
        reads.records_scanned
    );
    let (cached_bytes, cached_segments, _) = engine.read(|b, _| b.cache_usage());
    assert_eq!(
        (cached_bytes, cached_segments),
        (0, 0),
        "nothing is cached at open"
    );

    // Dedup is exact across the restart: an old id is a duplicate of the original message.
    let dup = block_on(engine.push(vec![PushItem {
        partition: "a".into(),
        transaction_id: Some(transaction_id("a", 7).into()),
        ..PushItem::new("orders", json!("again"))
    }]))
    .expect("push");
    assert_eq!(dup[0].status, PushStatus::Duplicate);
    assert_eq!(dup[0].offset, 7);

    // Drain: every message once, in order per partition, each segment read about once.
    store.take_reads();
    let mut next = [0usize; 2];
    loop {
        let reply = block_on(engine.pop(
            PopRequest {
                group: Some("billing".into()),
                batch: Some(BATCH as u32),
                ..PopRequest::queue("orders")
            },
            None,
        ))
        .expect("pop");
        if reply.messages.is_empty() {
            break;
        }
        let items: Vec<AckItem> = reply
            .messages
            .iter()
            .map(|m| {
                let p = PARTITIONS.iter().position(|p| *p == m.partition).unwrap();
                assert_eq!(m.transaction_id, transaction_id(&m.partition, next[p]));
                assert_eq!(m.payload.to_value().unwrap()["seq"], json!(next[p]));
                next[p] += 1;
                AckItem::new(&m.transaction_id, &m.partition_id, AckStatus::Completed)
                    .with_lease(&reply.lease_id)
            })
            .collect();
        let acked = block_on(engine.ack(Some("billing".into()), items)).expect("ack");
        assert!(acked.iter().all(|a| a.success), "{acked:?}");
    }
    assert_eq!(next, [PUSHES_PER_PARTITION * BATCH; 2]);
    let reads = store.take_reads();
    assert!(reads.scans.is_empty(), "pops and acks scan nothing");
    assert!(
        reads.keys_got.len() <= segments + 2,
        "{} segment reads for {segments} segments",
        reads.keys_got.len()
    );
    let counters = engine.counters();
    assert_eq!(
        counters.reruns, 0,
        "the pop and ack planners loaded what they read"
    );
    let (cached_bytes, _, budget) = engine.read(|b, _| b.cache_usage());
    assert!(
        cached_bytes <= budget + 2 * BATCH * 1100,
        "the cache keeps near its budget"
    );
}

/// Pops `BATCH` messages for `group` and acks them all, `pops` times or until a pop comes back empty;
/// returns how many pops found messages.
fn pop_and_ack(engine: &Engine<MemStore, TestHost>, group: &str, pops: usize) -> usize {
    for done in 0..pops {
        let reply = block_on(engine.pop(
            PopRequest {
                group: Some(group.into()),
                batch: Some(BATCH as u32),
                ..PopRequest::queue("orders")
            },
            None,
        ))
        .expect("pop");
        if reply.messages.is_empty() {
            return done;
        }
        let items = completed_items(&reply);
        let acked = block_on(engine.ack(Some(group.into()), items)).expect("ack");
        assert!(acked.iter().all(|a| a.success), "{acked:?}");
    }
    pops
}

#[test]
fn a_backlog_over_the_cache_keeps_its_oldest_segments_and_acked_ones_go_first() {
    // Room for about a fifth of the backlog's segments (each about 52 KB decoded).
    let config = BrokerConfig {
        cache_bytes: 1024 * 1024,
        ..config()
    };
    let store = MemStore::new();
    let host = TestHost::new();
    let engine = open(&store, &host, config);
    fill(&engine, &host);
    let segments = PARTITIONS.len() * PUSHES_PER_PARTITION;
    let cached = engine.read(|b, _| {
        b.trim_cache();
        b.cache_usage().1
    });
    assert!(
        cached > 8 && cached < segments / 2,
        "{cached} of {segments} segments cached"
    );
    // The pushed segments the cache kept are the oldest: the first pops read (almost) nothing back. Least
    // recently used order kept the newest, the ones read last, and these pops read every segment. (A push's
    // duplicate check that meets a fingerprint of an earlier message reads that segment, which the cache
    // then keeps as a read one, in place of an unread one: one or two here.)
    store.take_reads();
    assert_eq!(pop_and_ack(&engine, "billing", cached), cached);
    let first_reads = store.take_reads().keys_got.len();
    assert!(
        first_reads <= 2,
        "{first_reads} of the first {cached} pops read their segment back"
    );
    // Every segment the cache did not keep is read back once: a segment every lane has acked goes first
    // when the cache is trimmed, so no read evicts what a later pop reads.
    let rest = segments - cached;
    assert_eq!(pop_and_ack(&engine, "billing", segments), rest);
    assert_eq!(first_reads + store.take_reads().keys_got.len(), rest);
    // A second group starting over gets them all (from the store where they were evicted).
    assert_eq!(pop_and_ack(&engine, "audit", segments + 1), segments);
    assert!(store.take_reads().keys_got.len() >= rest);
}

#[test]
fn a_backlog_nobody_reads_does_not_crowd_out_a_queue_whose_consumer_keeps_up() {
    let config = BrokerConfig {
        cache_bytes: 1024 * 1024,
        ..config()
    };
    let store = MemStore::new();
    let host = TestHost::new();
    let engine = open(&store, &host, config);
    fill(&engine, &host); // "orders": 80 segments, four times the budget, never popped
    store.take_reads();
    let pad = "y".repeat(1000);
    for round in 0..30 {
        let items = (0..BATCH)
            .map(|i| PushItem {
                partition: "live".into(),
                ..PushItem::new("live", json!({ "round": round, "i": i, "pad": pad }))
            })
            .collect();
        block_on(engine.push(items)).expect("push");
        let reply = block_on(engine.pop(
            PopRequest {
                group: Some("reader".into()),
                batch: Some(BATCH as u32),
                ..PopRequest::queue("live")
            },
            None,
        ))
        .expect("pop");
        assert_eq!(reply.messages.len(), BATCH);
        let items = completed_items(&reply);
        block_on(engine.ack(Some("reader".into()), items)).expect("ack");
    }
    // Each pushed segment is its partition's head when it is popped; the unread backlog's segments past
    // their partitions' heads go first.
    assert_eq!(store.take_reads().keys_got, Vec::<String>::new());
}

#[test]
fn a_failed_commit_reloads_the_index_not_the_segments() {
    let store = MemStore::new();
    let host = TestHost::new();
    let engine = open(&store, &host, config());
    fill(&engine, &host);
    store.take_reads();
    store.fail_next_commits(1);
    let failed = block_on(engine.push(vec![PushItem {
        partition: "a".into(),
        ..PushItem::new("orders", json!(1))
    }]));
    assert!(matches!(failed, Err(EngineError::Store(_))));
    // The next command reloads first, from the index; the message was not stored, this one is.
    let ok = block_on(engine.push(vec![PushItem {
        partition: "a".into(),
        ..PushItem::new("orders", json!(2))
    }]))
    .expect("push");
    assert_eq!(ok[0].status, PushStatus::Queued);
    assert_eq!(ok[0].offset, (PUSHES_PER_PARTITION * BATCH) as u64);
    let reads = store.take_reads();
    assert_eq!(reads.scans, INDEX_PREFIXES.to_vec());
    assert_eq!(
        sorted(reads.keys_got),
        past_the_pages(),
        "the segments past each partition's pages and one absence check, no other segment"
    );
    assert_eq!(engine.counters().reloads, 1);
}

#[test]
fn a_missing_segment_is_a_hard_error_not_a_skip() {
    let store = MemStore::new();
    let host = TestHost::new();
    let engine = open(&store, &host, config());
    fill(&engine, &host);
    // Damage: delete one segment record behind the broker's back, then restart (empty cache).
    let mut damage = queen_edge::store::ChangeSet::default();
    damage.delete(queen_edge::core::segment_key(1, 0));
    block_on(queen_edge::store::Store::commit(&store, &damage)).unwrap();
    let engine = open(&store, &host, config());
    let popped = block_on(engine.pop(
        PopRequest {
            batch: Some(10),
            partitions: Some(2),
            ..PopRequest::queue("orders")
        },
        None,
    ));
    match popped {
        Err(EngineError::Store(e)) => assert!(e.message.contains("damaged"), "{e}"),
        other => panic!("expected a storage error, got {other:?}"),
    }
}

#[test]
fn the_quota_refuses_pushes_and_keeps_draining() {
    let store = MemStore::new();
    let host = TestHost::new();
    let quota = 40_000;
    let engine = open(
        &store,
        &host,
        BrokerConfig {
            max_stored_bytes: Some(quota),
            ..config()
        },
    );
    let mut refused = None;
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in 0..200 {
        // Hex noise: payloads deflate does not shrink much.
        let pad: String = (0..64)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                format!("{x:016x}")
            })
            .collect();
        match block_on(engine.push(vec![PushItem::new("q", json!({ "i": i, "pad": pad }))])) {
            Ok(r) => assert_eq!(r[0].status, PushStatus::Queued),
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    let Some(EngineError::Core(e)) = refused else {
        panic!("a push past the quota is refused, got {refused:?}");
    };
    assert_eq!(e.kind, ErrorKind::Full);
    assert!(
        e.message.contains("full") && e.message.contains("MAX_STORED_BYTES"),
        "{e}"
    );
    let (stored, max) = engine.read(|b, _| b.storage_usage());
    assert!(stored <= quota && max == Some(quota));

    // Pops and acks work at the limit; deleting the queue frees the space.
    let reply = block_on(engine.pop(
        PopRequest {
            batch: Some(5),
            ..PopRequest::queue("q")
        },
        None,
    ))
    .expect("pop at the limit");
    assert_eq!(reply.messages.len(), 5);
    let items = reply
        .messages
        .iter()
        .map(|m| AckItem::new(&m.transaction_id, &m.partition_id, AckStatus::Completed))
        .collect();
    assert!(block_on(engine.ack(None, items))
        .unwrap()
        .iter()
        .all(|a| a.success));
    assert!(block_on(engine.delete_queue("q")).unwrap());
    assert_eq!(engine.read(|b, _| b.storage_usage()).0, 0);
    block_on(engine.push(vec![PushItem::new("q", json!("fits again"))]))
        .expect("push after delete");
}

#[test]
fn format_1_data_is_upgraded_at_open_and_stays_exact() {
    let store = MemStore::new();
    let host = TestHost::new();
    {
        let engine = open(&store, &host, config());
        fill(&engine, &host);
    }
    // Make it format 1: no index entries, format version 1.
    let mut downgrade = queen_edge::store::ChangeSet::default();
    let records = block_on(queen_edge::store::Store::scan(&store, "")).unwrap();
    for (key, _) in &records {
        if key.starts_with("x/") {
            downgrade.delete(key.clone());
        }
    }
    downgrade.put("m/format", br#"{"version":1,"nextPartitionId":3}"#.to_vec());
    block_on(queen_edge::store::Store::commit(&store, &downgrade)).unwrap();

    store.take_reads();
    let engine = open(&store, &host, config());
    let reads = store.take_reads();
    assert!(
        reads.scans.contains(&"s/".to_string()),
        "format 1 is read once"
    );
    let after = block_on(queen_edge::store::Store::scan(&store, "x/")).unwrap();
    assert_eq!(
        after.len(),
        PARTITIONS.len() * PUSHES_PER_PARTITION,
        "index entries written"
    );
    let dup = block_on(engine.push(vec![PushItem {
        partition: "b".into(),
        transaction_id: Some(transaction_id("b", 1234).into()),
        ..PushItem::new("orders", json!("again"))
    }]))
    .unwrap();
    assert_eq!(dup[0].status, PushStatus::Duplicate);
    assert_eq!(dup[0].offset, 1234);

    // The next open is format 2: index prefixes only.
    drop(engine);
    store.take_reads();
    let _engine = open(&store, &host, config());
    assert_eq!(store.take_reads().scans, INDEX_PREFIXES.to_vec());
}

/// Rewrites partition `pid`'s stored data as the build before maintenance compression wrote it:
/// DEFLATE segments (format 1) and version 1 index entries (no flags byte), one record each (record
/// format 2's layout), in place of its index pages.
#[cfg(feature = "deflate")]
fn rewrite_as_previous_build(store: &MemStore, pid: u64) {
    use queen_edge::core::{parse_segment_key, segment};
    let mut old = queen_edge::store::ChangeSet::default();
    for (key, page) in block_on(queen_edge::store::Store::scan(store, "x/")).unwrap() {
        if parse_segment_key(&key).map(|(p, _)| p) != Some(pid) {
            continue;
        }
        old.delete(key);
        for (first, value) in page_entries(&page) {
            let segment_key = queen_edge::core::segment_key(pid, first);
            let stored = block_on(queen_edge::store::Store::get(
                store,
                std::slice::from_ref(&segment_key),
            ))
            .unwrap()
            .remove(0)
            .unwrap();
            let compressed = segment::compress(&stored).unwrap().expect("pushed as JSON");
            // Version 1: the same header without the flags byte (byte 25), the new stored size.
            assert_eq!(value[0], 2, "this build writes version 2 entries");
            let mut entry = value[..25].to_vec();
            entry[0] = 1;
            entry[21..25].copy_from_slice(&(compressed.len() as u32).to_le_bytes());
            entry.extend_from_slice(&value[26..]);
            old.put(segment_key, compressed);
            old.put(queen_edge::core::index_entry_key(pid, first), entry);
        }
    }
    block_on(queen_edge::store::Store::commit(store, &old)).unwrap();
}

/// The (first offset, entry) pairs of an index page, as docs/protocol.md lays it out: byte 0 = 3, then
/// per entry its first offset (u64 LE), its length (u32 LE) and the entry.
fn page_entries(page: &[u8]) -> Vec<(u64, Vec<u8>)> {
    assert_eq!(page[0], 3, "an index page");
    let mut out = Vec::new();
    let mut rest = &page[1..];
    while !rest.is_empty() {
        let first = u64::from_le_bytes(rest[..8].try_into().unwrap());
        let len = u32::from_le_bytes(rest[8..12].try_into().unwrap()) as usize;
        out.push((first, rest[12..12 + len].to_vec()));
        rest = &rest[12 + len..];
    }
    out
}

/// Bytes of every stored segment record.
fn stored_segment_bytes(store: &MemStore) -> u64 {
    block_on(queen_edge::store::Store::scan(store, "s/"))
        .unwrap()
        .iter()
        .map(|(_, v)| v.len() as u64)
        .sum()
}

#[cfg(feature = "deflate")]
#[test]
fn maintenance_compresses_waiting_segments_and_data_of_the_previous_format_still_reads() {
    use queen_edge::core::compaction::COMPRESS_AFTER_MS;
    let store = MemStore::new();
    let host = TestHost::new();
    {
        let engine = open(&store, &host, config());
        fill(&engine, &host);
        // Maintenance writes the pages of the segments pushed since the last full one (nothing has
        // waited long enough to be compressed yet).
        let report = block_on(engine.maintain()).unwrap();
        assert_eq!(report.segments_compressed, 0);
    }
    assert_eq!(
        block_on(queen_edge::store::Store::scan(&store, "x/"))
            .unwrap()
            .len(),
        PARTITIONS.len() * PUSHES_PER_PARTITION.div_ceil(ENTRIES_PER_PAGE),
        "every segment's entry is in a page"
    );
    let segments = |first_byte: u8| {
        block_on(queen_edge::store::Store::scan(&store, "s/"))
            .unwrap()
            .iter()
            .filter(|(_, v)| v[0] == first_byte)
            .count()
    };
    assert_eq!(
        segments(2),
        PARTITIONS.len() * PUSHES_PER_PARTITION,
        "pushes store JSON text"
    );
    // Partition "a" (id 1) as the previous build left it: compressed at push, version 1 entries.
    rewrite_as_previous_build(&store, 1);
    assert_eq!(segments(1), PUSHES_PER_PARTITION);

    let engine = open(&store, &host, config());
    assert_eq!(
        engine.read(|b, _| b.storage_usage()).0,
        stored_segment_bytes(&store),
        "stored bytes as the entries of both versions say"
    );
    // Not yet: the segments have not waited long enough.
    let report = block_on(engine.maintain()).unwrap();
    assert_eq!(report.segments_compressed, 0);
    host.now.set(host.now.get() + COMPRESS_AFTER_MS + 1);
    let report = block_on(engine.maintain()).unwrap();
    assert_eq!(
        report.segments_compressed, PUSHES_PER_PARTITION as u64,
        "partition b's segments, and none of the previous build's"
    );
    assert_eq!(segments(2), 0, "every segment is compressed");
    let stored = engine.read(|b, _| b.storage_usage()).0;
    assert_eq!(stored, stored_segment_bytes(&store));
    assert_eq!(block_on(engine.maintain()).unwrap().segments_compressed, 0);

    // After a restart nothing waits (the flags were cleared with the rewrite), and every message of
    // both partitions reads back in order, with exact dedup.
    drop(engine);
    let engine = open(&store, &host, config());
    assert_eq!(block_on(engine.maintain()).unwrap().segments_compressed, 0);
    assert_eq!(engine.read(|b, _| b.storage_usage()).0, stored);
    for partition in PARTITIONS {
        let dup = block_on(engine.push(vec![PushItem {
            partition: partition.into(),
            transaction_id: Some(transaction_id(partition, 77).into()),
            ..PushItem::new("orders", json!("again"))
        }]))
        .unwrap();
        assert_eq!(
            (dup[0].status.clone(), dup[0].offset),
            (PushStatus::Duplicate, 77)
        );
    }
    let mut next = [0usize; 2];
    loop {
        let reply = block_on(engine.pop(
            PopRequest {
                batch: Some(BATCH as u32),
                ..PopRequest::queue("orders")
            },
            None,
        ))
        .unwrap();
        if reply.messages.is_empty() {
            break;
        }
        let items: Vec<AckItem> = reply
            .messages
            .iter()
            .map(|m| {
                let p = PARTITIONS.iter().position(|p| *p == m.partition).unwrap();
                assert_eq!(m.transaction_id, transaction_id(&m.partition, next[p]));
                assert_eq!(m.payload.to_value().unwrap()["seq"], json!(next[p]));
                next[p] += 1;
                AckItem::new(&m.transaction_id, &m.partition_id, AckStatus::Completed)
            })
            .collect();
        assert!(block_on(engine.ack(None, items))
            .unwrap()
            .iter()
            .all(|a| a.success));
    }
    assert_eq!(next, [PUSHES_PER_PARTITION * BATCH; 2]);
}

#[cfg(feature = "deflate")]
#[test]
fn maintenance_compresses_a_backlog_larger_than_one_pass_over_several() {
    use queen_edge::core::compaction::{COMPRESS_AFTER_MS, COMPRESS_BYTES_PER_PASS};
    let store = MemStore::new();
    let host = TestHost::new();
    let engine = open(&store, &host, config());
    let pad = "y".repeat(1000);
    let mut pushed = 0;
    while (engine.read(|b, _| b.storage_usage().0)) < 2 * COMPRESS_BYTES_PER_PASS + 1 {
        let items = (0..100)
            .map(|i| PushItem {
                partition: format!("p{}", i % 10).into(),
                ..PushItem::new("orders", json!({ "n": pushed + i, "pad": pad }))
            })
            .collect();
        block_on(engine.push(items)).unwrap();
        pushed += 100;
        host.now.set(host.now.get() + 1);
    }
    host.now.set(host.now.get() + COMPRESS_AFTER_MS + 1);
    let mut passes = 0;
    while block_on(engine.maintain()).unwrap().segments_compressed > 0 {
        passes += 1;
    }
    assert!(passes >= 3, "{passes} passes");
    let json_left = block_on(queen_edge::store::Store::scan(&store, "s/"))
        .unwrap()
        .iter()
        .filter(|(_, v)| v[0] == 2)
        .count();
    assert_eq!(json_left, 0, "every segment compressed");
    assert_eq!(
        engine.read(|b, _| b.storage_usage()).0,
        stored_segment_bytes(&store)
    );
}

#[cfg(feature = "deflate")]
#[test]
fn maintenance_compresses_a_pass_in_slices_each_committed_on_its_own() {
    use queen_edge::core::compaction::{COMPRESS_AFTER_MS, COMPRESS_SEGMENTS_PER_SLICE};
    let store = MemStore::new();
    let host = TestHost::new();
    let engine = open(&store, &host, config());
    // Small segments (one message each), more than two slices' worth by count, far under a pass's bytes.
    let segments = 3 * COMPRESS_SEGMENTS_PER_SLICE + 10;
    for n in 0..segments {
        block_on(engine.push(vec![PushItem::new("orders", json!({ "n": n }))])).unwrap();
        host.now.set(host.now.get() + 1);
    }
    host.now.set(host.now.get() + COMPRESS_AFTER_MS + 1);
    let left = engine.read(|b, now| b.segments_to_compress(now).len());
    assert!(left > 2 * COMPRESS_SEGMENTS_PER_SLICE, "{left} waiting");
    let commits = engine.counters().commits;
    let report = block_on(engine.maintain()).unwrap();
    assert!(
        report.segments_compressed >= left as u64,
        "one pass compresses them all: {} of {left}",
        report.segments_compressed
    );
    let slices = left.div_ceil(COMPRESS_SEGMENTS_PER_SLICE) as u64;
    assert!(
        engine.counters().commits - commits >= slices,
        "{} commits for {slices} slices",
        engine.counters().commits - commits
    );
    assert_eq!(
        engine.read(|b, _| b.storage_usage()).0,
        stored_segment_bytes(&store)
    );
}

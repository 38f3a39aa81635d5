//! Index pages (module `core::pages`, record format 3) through the engine over a `MemStore`: retention
//! and queue deletion of segments whose entries are in a page or in none yet, and the upgrade of record
//! format 2 (one index entry record per segment) with a backlog. Crashes before a page is written are in
//! tests/faults.rs and tests/simulation.rs.

use crate::support;

use futures::executor::block_on;
use queen_edge::core::api::*;
use queen_edge::core::{parse_segment_key, BrokerConfig, ENTRIES_PER_PAGE};
use queen_edge::engine::Engine;
use queen_edge::store::{ChangeSet, MemStore, Store};
use serde_json::json;
use support::{completed_items, configure_retention, TestHost};

fn config() -> BrokerConfig {
    BrokerConfig {
        default_subscription_new: false,
        ..BrokerConfig::default()
    }
}

fn open(store: &MemStore, host: &TestHost) -> Engine<MemStore, TestHost> {
    block_on(Engine::open(store.clone(), host.clone(), config())).expect("opens")
}

fn keys(store: &MemStore, prefix: &str) -> Vec<String> {
    block_on(store.scan(prefix))
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect()
}

/// Pushes `segments` batches of 2 messages to partition "a" of `queue`, one millisecond apart; the
/// payloads count up from `from`.
fn push_segments(
    engine: &Engine<MemStore, TestHost>,
    host: &TestHost,
    queue: &str,
    from: i64,
    segments: usize,
) {
    for n in 0..segments as i64 {
        let items = (0..2)
            .map(|i| PushItem {
                partition: "a".into(),
                ..PushItem::new(queue, json!(from + n * 2 + i))
            })
            .collect();
        block_on(engine.push(items)).expect("push");
        host.now.set(host.now.get() + 1);
    }
}

/// Every message of `queue`, popped and acknowledged by `group` until none is left, as payloads.
fn drain(engine: &Engine<MemStore, TestHost>, queue: &str, group: &str) -> Vec<i64> {
    let mut out = Vec::new();
    loop {
        let reply = block_on(engine.pop(
            PopRequest {
                group: Some(group.into()),
                batch: Some(7),
                ..PopRequest::queue(queue)
            },
            None,
        ))
        .expect("pop");
        if reply.messages.is_empty() {
            return out;
        }
        out.extend(
            reply
                .messages
                .iter()
                .map(|m| m.payload.get().parse::<i64>().unwrap()),
        );
        let acked =
            block_on(engine.ack(Some(group.to_string()), completed_items(&reply))).expect("ack");
        assert!(acked.iter().all(|a| a.success));
    }
}

/// Retention deletes segments whose entries are in a page, in part of a page and in none yet: a page
/// goes with its last segment, a page whose first segments went stays (and opens), and nothing of a
/// deleted segment is left.
#[test]
fn retention_deletes_segments_in_pages_and_past_them() {
    let store = MemStore::new();
    let host = TestHost::new();
    let engine = open(&store, &host);
    configure_retention(&engine, "q", 60);
    let k = ENTRIES_PER_PAGE;
    // Old: one full page and three segments into the second; then, a minute later, the rest of the
    // second page and five segments past it.
    push_segments(&engine, &host, "q", 0, k + 3);
    host.now.set(host.now.get() + 30_000);
    let young_from = 2 * (k as i64 + 3);
    push_segments(&engine, &host, "q", young_from, k - 3 + 5);
    assert_eq!(keys(&store, "x/").len(), 2, "two full pages");
    host.now.set(host.now.get() + 31_000);
    let report = block_on(engine.maintain()).unwrap();
    assert_eq!(report.segments_deleted, (k + 3) as u64);
    let pages = keys(&store, "x/");
    assert_eq!(
        pages.len(),
        2,
        "the first page went with its segments; the second stays (its first three went); \
         maintenance wrote the page of the five past it: {pages:?}"
    );
    assert_eq!(keys(&store, "s/").len(), k - 3 + 5);
    engine.read(|b, _| b.check_invariants()).unwrap();
    let young: Vec<i64> = (young_from..young_from + 2 * (k as i64 + 2)).collect();
    drop(engine);
    let engine = open(&store, &host);
    engine.read(|b, _| b.check_invariants()).unwrap();
    assert_eq!(drain(&engine, "q", "g"), young);

    // Unpaged segments that retention deletes before their page is written are not named by it.
    push_segments(&engine, &host, "q", 1000, 3);
    host.now.set(host.now.get() + 61_000);
    let report = block_on(engine.maintain()).unwrap();
    assert_eq!(report.segments_deleted, (k + 2 + 3) as u64);
    assert_eq!(keys(&store, "x/"), Vec::<String>::new(), "no page is left");
    assert_eq!(keys(&store, "s/"), Vec::<String>::new());
    push_segments(&engine, &host, "q", 2000, 2);
    drop(engine);
    let engine = open(&store, &host);
    engine.read(|b, _| b.check_invariants()).unwrap();
    assert_eq!(drain(&engine, "q", "h"), vec![2000, 2001, 2002, 2003]);
}

/// Deleting a queue deletes its pages and the segments past them.
#[test]
fn deleting_a_queue_deletes_its_pages_and_unpaged_segments() {
    let store = MemStore::new();
    let host = TestHost::new();
    let engine = open(&store, &host);
    push_segments(&engine, &host, "q", 0, 2 * ENTRIES_PER_PAGE + 4);
    assert!(block_on(engine.delete_queue("q")).unwrap());
    assert_eq!(keys(&store, "x/"), Vec::<String>::new());
    assert_eq!(keys(&store, "s/"), Vec::<String>::new());
    drop(engine);
    let engine = open(&store, &host);
    push_segments(&engine, &host, "q", 100, 1);
    assert_eq!(drain(&engine, "q", "g"), vec![100, 101]);
}

/// Record format 2 (one index entry record per segment, written in its push's commit) opens: the open
/// records format 3, and the whole backlog pops and acks in order, with the pushes after it.
#[test]
fn record_format_2_with_a_backlog_opens_and_drains() {
    let store = MemStore::new();
    let host = TestHost::new();
    let total = 2 * ENTRIES_PER_PAGE + 5;
    {
        let engine = open(&store, &host);
        push_segments(&engine, &host, "q", 0, total);
        block_on(engine.maintain()).unwrap();
    }
    // Rewrite as format 2 wrote it: each page's entries as records of their own, format version 2.
    let mut old = ChangeSet::default();
    for (key, page) in block_on(store.scan("x/")).unwrap() {
        let (pid, _) = parse_segment_key(&key).unwrap();
        old.delete(key);
        assert_eq!(page[0], 3, "an index page");
        let mut rest = &page[1..];
        while !rest.is_empty() {
            let first = u64::from_le_bytes(rest[..8].try_into().unwrap());
            let len = u32::from_le_bytes(rest[8..12].try_into().unwrap()) as usize;
            old.put(
                queen_edge::core::index_entry_key(pid, first),
                rest[12..12 + len].to_vec(),
            );
            rest = &rest[12 + len..];
        }
    }
    let format = block_on(store.get(&["m/format".to_string()])).unwrap()[0]
        .clone()
        .unwrap();
    let format = String::from_utf8(format).unwrap();
    assert!(format.contains("\"version\":3"), "{format}");
    old.put(
        "m/format",
        format
            .replace("\"version\":3", "\"version\":2")
            .into_bytes(),
    );
    block_on(store.commit(&old)).unwrap();
    assert_eq!(keys(&store, "x/").len(), total);

    let engine = open(&store, &host);
    let format = block_on(store.get(&["m/format".to_string()])).unwrap()[0]
        .clone()
        .unwrap();
    assert!(
        String::from_utf8(format).unwrap().contains("\"version\":3"),
        "the open records format 3, which an older build refuses"
    );
    push_segments(&engine, &host, "q", 1000, 3);
    let mut want: Vec<i64> = (0..2 * total as i64).collect();
    want.extend(1000..1006);
    assert_eq!(drain(&engine, "q", "g"), want);
    // And after a crash (the three new segments are in no page).
    drop(engine);
    let engine = open(&store, &host);
    assert_eq!(drain(&engine, "q", "h"), want);
}

/// Two compaction passes whose reads overlap (module `core::compaction`): the second reads the page of
/// its segment before the first pass's rewrite of that page landed, and compresses a segment the first
/// did not. Its rewrite must not put back what the first pass changed in the page's other entries (the
/// first pass's segments stated as waiting, at their size before compression): the stored bytes
/// memory counts, after a restart too, are those of the stored segments, and nothing waits that is
/// compressed already. (Record format 2 kept one entry per record, so a pass rewrote only its own.)
#[cfg(feature = "deflate")]
#[test]
fn a_compaction_pass_that_read_a_page_before_another_rewrite_landed_keeps_that_rewrite() {
    use queen_edge::core::{index_entry_key, segment_key};
    use support::Harness;
    let mut h = Harness::new();
    let pad = "x".repeat(400);
    // Segments A and B, then C half a minute later; maintenance writes their page.
    h.push_to(
        "q",
        "a",
        vec![json!(format!("a{pad}")), json!(format!("b{pad}"))],
    );
    h.push_to(
        "q",
        "a",
        vec![json!(format!("c{pad}")), json!(format!("d{pad}"))],
    );
    h.advance(30_000);
    h.push_to(
        "q",
        "a",
        vec![json!(format!("e{pad}")), json!(format!("f{pad}"))],
    );
    h.broker.maintain(h.now);
    h.commit();
    assert_eq!(
        h.records.keys().filter(|k| k.starts_with("x/")).count(),
        1,
        "one page holds the three entries"
    );
    let fetch = |h: &Harness, records: &std::collections::BTreeMap<String, Vec<u8>>| {
        h.broker
            .segments_to_compress(h.now)
            .into_iter()
            .map(|(pid, first)| {
                let page = h.broker.index_page_of(pid, first).expect("paged");
                (
                    pid,
                    first,
                    records[&segment_key(pid, first)].clone(),
                    records[&index_entry_key(pid, page)].clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    // Pass X: A and B are due.
    h.advance(31_000);
    let x = fetch(&h, &h.records);
    assert_eq!(x.len(), 2);
    let before_x = h.records.clone();
    assert_eq!(h.broker.compress_segments(&x), 2);
    // Pass Y: C is due now; it reads the store while X's commit is still in flight.
    h.advance(30_000);
    let y = fetch(&h, &before_x);
    assert_eq!(y.len(), 1);
    h.commit();
    assert_eq!(h.broker.compress_segments(&y), 1);
    h.commit();

    let stored = |h: &Harness| -> u64 {
        h.records
            .iter()
            .filter(|(k, _)| k.starts_with("s/"))
            .map(|(_, v)| v.len() as u64)
            .sum()
    };
    assert_eq!(h.broker.storage_usage().0, stored(&h));
    h.restart();
    h.broker.check_invariants().unwrap();
    assert_eq!(
        h.broker.storage_usage().0,
        stored(&h),
        "the page states every segment's stored size"
    );
    assert_eq!(
        h.broker.segments_to_compress(h.now + 3_600_000),
        Vec::<(u64, u64)>::new(),
        "every segment is compressed: the page says none waits"
    );
}

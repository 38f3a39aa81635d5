//! Engine divergence under store faults (issue 15.4): state the store does not hold must never reach a
//! later commit or a later answer.

use crate::support;

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

/// Every message of queue `q`'s partition `partition`, in offset order, read by a group that has never
/// read before.
fn drained(engine: &Engine<MemStore, TestHost>, group: &str, partition: &str) -> Vec<i64> {
    let reply = block_on(engine.pop(
        PopRequest {
            group: Some(group.into()),
            batch: Some(10_000),
            target: PopTarget::Partition {
                queue: "q".into(),
                partition: partition.into(),
            },
            ..PopRequest::queue("q")
        },
        None,
    ))
    .unwrap();
    reply
        .messages
        .iter()
        .map(|m| m.payload.get().parse::<i64>().unwrap())
        .collect()
}

/// A crash (the engine dropped, the store kept) after push commits whose segments' entries are in no
/// index page yet: the reopen finds those segments past the pages and indexes them, so every
/// acknowledged message is there in order, dedup still knows them, and later pushes do not reuse their
/// offsets.
#[test]
fn a_crash_before_the_index_page_is_written_loses_no_acknowledged_push() {
    use queen_edge::core::ENTRIES_PER_PAGE;
    let store = MemStore::new();
    // Partition a: two full pages and K-1 segments past them; b: K-1 segments and no page.
    let pushes = [("a", 3 * ENTRIES_PER_PAGE - 1), ("b", ENTRIES_PER_PAGE - 1)];
    let mut sent: std::collections::BTreeMap<&str, Vec<i64>> = Default::default();
    {
        let engine = block_on(Engine::open(store.clone(), TestHost::new(), config())).unwrap();
        for (partition, count) in pushes {
            for n in 0..count as i64 {
                let batch: Vec<i64> = (0..=n % 3).map(|i| n * 10 + i).collect();
                let items = batch
                    .iter()
                    .map(|v| PushItem {
                        partition: partition.into(),
                        transaction_id: Some(format!("{partition}-{v}").into()),
                        ..PushItem::new("q", json!(v))
                    })
                    .collect();
                let results = block_on(engine.push(items)).unwrap();
                assert!(results.iter().all(|r| r.status == PushStatus::Queued));
                sent.entry(partition).or_default().extend(batch);
            }
        }
    }
    let pages = block_on(queen_edge::store::Store::scan(&store, "x/")).unwrap();
    assert_eq!(pages.len(), 2, "partition a's two full pages only");

    store.take_reads();
    let engine = block_on(Engine::open(store.clone(), TestHost::new(), config())).unwrap();
    let reads = store.take_reads();
    assert_eq!(
        reads.keys_got.len(),
        2 * ENTRIES_PER_PAGE,
        "K-1 segments a partition found past the pages, and the absent key after them"
    );
    for (partition, _) in pushes {
        assert_eq!(drained(&engine, "after-crash", partition), sent[partition]);
    }
    // Dedup knows the recovered segments' messages.
    let dup = block_on(engine.push(vec![PushItem {
        partition: "b".into(),
        transaction_id: Some("b-140".into()),
        ..PushItem::new("q", json!("again"))
    }]))
    .unwrap();
    assert_eq!(dup[0].status, PushStatus::Duplicate);
    // The next push follows them (it fills partition b's first page), and all of it survives another
    // crash.
    block_on(engine.push(vec![PushItem {
        partition: "b".into(),
        ..PushItem::new("q", json!(-1))
    }]))
    .unwrap();
    sent.entry("b").or_default().push(-1);
    drop(engine);
    assert_eq!(
        block_on(queen_edge::store::Store::scan(&store, "x/"))
            .unwrap()
            .len(),
        3,
        "partition b's page, written by its Kth push, holds the recovered entries"
    );
    let engine = block_on(Engine::open(store.clone(), TestHost::new(), config())).unwrap();
    for (partition, _) in pushes {
        assert_eq!(drained(&engine, "second", partition), sent[partition]);
    }
}

/// A segment stored past a partition's indexed end that does not continue it is damage: the open
/// fails rather than guess.
#[test]
fn a_segment_past_the_pages_that_does_not_follow_them_stops_the_open() {
    let store = MemStore::new();
    {
        let engine = block_on(Engine::open(store.clone(), TestHost::new(), config())).unwrap();
        block_on(engine.push(vec![PushItem::new("q", json!(1))])).unwrap();
        block_on(engine.push(vec![PushItem::new("q", json!(2))])).unwrap();
    }
    // The second segment (offset 1) rewritten to hold offset 5.
    let key = queen_edge::core::segment_key(1, 1);
    let stored = block_on(queen_edge::store::Store::get(
        &store,
        std::slice::from_ref(&key),
    ))
    .unwrap()
    .remove(0)
    .unwrap();
    let text = String::from_utf8(stored[1..].to_vec()).unwrap();
    let moved = text.replacen("\"o\":1", "\"o\":5", 1);
    assert_ne!(moved, text, "the segment names its offsets as `o`");
    let mut damage = queen_edge::store::ChangeSet::default();
    damage.put(key, [&stored[..1], moved.as_bytes()].concat());
    block_on(queen_edge::store::Store::commit(&store, &damage)).unwrap();
    match block_on(Engine::open(store.clone(), TestHost::new(), config())) {
        Err(e) => assert!(e.to_string().contains("after its partition's end"), "{e}"),
        Ok(_) => panic!("an open over a segment that does not follow its partition must fail"),
    }
}

/// Partition a: one full page and five segments past it; partition b: three segments and no page (one
/// message a push, so segment `n` of a partition starts at offset `n`). The store, and each partition's
/// id.
fn unpaged_runs() -> (MemStore, u64, u64) {
    use queen_edge::core::ENTRIES_PER_PAGE;
    let store = MemStore::new();
    let engine = block_on(Engine::open(store.clone(), TestHost::new(), config())).unwrap();
    for (partition, count) in [("a", ENTRIES_PER_PAGE + 5), ("b", 3)] {
        for n in 0..count {
            block_on(engine.push(vec![PushItem {
                partition: partition.into(),
                ..PushItem::new("q", json!(n))
            }]))
            .unwrap();
        }
    }
    drop(engine);
    let pid = |partition: &str| {
        let records = block_on(queen_edge::store::Store::scan(&store, "p/")).unwrap();
        let (key, _) = records
            .iter()
            .find(|(_, v)| {
                String::from_utf8_lossy(v).contains(&format!("\"name\":\"{partition}\""))
            })
            .unwrap_or_else(|| panic!("partition {partition} is stored: {records:?}"));
        u64::from_str_radix(key.rsplit('/').next().unwrap(), 16).unwrap()
    };
    let (a, b) = (pid("a"), pid("b"));
    (store, a, b)
}

/// A segment missing in the run past a partition's pages (storage damage: committed segments are never
/// deleted before their later ones) while a later one is stored: the open fails naming the partition,
/// the missing key and the stored one after it, rather than cut the partition short there (the later
/// segments' acknowledged messages unread, their offsets taken by the next push). Covered: a segment in
/// the middle of the run past a page, and the first segment of a partition with no page (where the probe
/// stops at its first key).
#[test]
fn a_segment_missing_before_a_stored_one_past_the_pages_stops_the_open() {
    use queen_edge::core::{segment_key, ENTRIES_PER_PAGE};
    let page_end = ENTRIES_PER_PAGE as u64;
    for (partition, missing, later) in [("a", page_end + 2, page_end + 3), ("b", 0, 1)] {
        let (store, a, b) = unpaged_runs();
        let pid = if partition == "a" { a } else { b };
        // The healthy store opens, and its open asks for one range a partition, in one call.
        store.take_reads();
        drop(block_on(Engine::open(store.clone(), TestHost::new(), config())).unwrap());
        let calls = store.take_reads().ranges;
        assert_eq!((calls.len(), calls[0].len()), (1, 2), "{calls:?}");
        let (missing, later) = (segment_key(pid, missing), segment_key(pid, later));
        let mut damage = queen_edge::store::ChangeSet::default();
        damage.delete(missing.clone());
        block_on(queen_edge::store::Store::commit(&store, &damage)).unwrap();
        let e = match block_on(Engine::open(store.clone(), TestHost::new(), config())) {
            Err(e) => e.to_string(),
            Ok(engine) => panic!(
                "an open over a missing segment {missing} before {later} must fail; it opened with {:?}",
                queued(&engine, "after-damage")
            ),
        };
        for part in [
            "storage is damaged",
            &format!("\"{missing}\""),
            &format!("\"{later}\""),
            &format!("partition \"{partition}\" of queue \"q\""),
        ] {
            assert!(e.contains(part), "{part:?} in {e}");
        }
    }
}

/// A store whose `first_keys` first lands `pending`, a commit of another writer (the browser's tabs: a
/// tab that took the writer epoch after this open's began commits between its reads, each read being
/// its own IndexedDB transaction; module `bindings`, `IdbStore::take_over`).
struct RacingStore {
    inner: MemStore,
    pending: std::cell::RefCell<Option<queen_edge::store::ChangeSet>>,
}

impl queen_edge::store::Store for RacingStore {
    async fn scan(
        &self,
        prefix: &str,
    ) -> Result<Vec<queen_edge::store::Record>, queen_edge::store::StoreError> {
        self.inner.scan(prefix).await
    }
    async fn get(
        &self,
        keys: &[String],
    ) -> Result<Vec<Option<Vec<u8>>>, queen_edge::store::StoreError> {
        self.inner.get(keys).await
    }
    async fn first_keys(
        &self,
        ranges: &[queen_edge::store::KeyRange],
    ) -> Result<Vec<Option<String>>, queen_edge::store::StoreError> {
        let pending = self.pending.borrow_mut().take();
        if let Some(changes) = pending {
            self.inner.commit(&changes).await?;
        }
        self.inner.first_keys(ranges).await
    }
    async fn commit(
        &self,
        changes: &queen_edge::store::ChangeSet,
    ) -> Result<(), queen_edge::store::StoreError> {
        self.inner.commit(changes).await
    }
}

/// A copy of `store`'s records in a store of its own.
fn copy_of(store: &MemStore) -> MemStore {
    use queen_edge::store::Store;
    let copy = MemStore::new();
    let mut changes = queen_edge::store::ChangeSet::default();
    for (key, value) in block_on(store.scan("")).unwrap() {
        changes.put(key, value);
    }
    block_on(copy.commit(&changes)).unwrap();
    copy
}

/// An open whose store takes another writer's push between the probe past the pages (which found the
/// partition's next key absent) and the check for segments stored past it (which finds that very key)
/// is not damage: nothing is missing, the key was written after the probe read. (In the browser such an
/// open belongs to a tab superseded during its open: its first commit is refused by the fence and it
/// steps down; refusing the open as damaged instead made `Queen.open` reject without Web Locks.) A key
/// found after the absent one is still damage (`a_segment_missing_before_a_stored_one_past_the_pages_stops_the_open`).
#[test]
fn a_segment_another_writer_commits_during_the_open_is_not_damage() {
    use queen_edge::store::Store;
    let store = MemStore::new();
    let engine = block_on(Engine::open(store.clone(), TestHost::new(), config())).unwrap();
    for n in 0..3 {
        block_on(engine.push(vec![PushItem::new("q", json!(n))])).unwrap();
    }
    drop(engine);
    // The other writer's push, as the records it changes: run on a copy, compared with the original.
    let before: std::collections::BTreeMap<_, _> =
        block_on(store.scan("")).unwrap().into_iter().collect();
    let other = copy_of(&store);
    let writer = block_on(Engine::open(other.clone(), TestHost::new(), config())).unwrap();
    block_on(writer.push(vec![PushItem::new("q", json!("other"))])).unwrap();
    drop(writer);
    let mut push = queen_edge::store::ChangeSet::default();
    for (key, value) in block_on(other.scan("")).unwrap() {
        if before.get(&key) != Some(&value) {
            assert!(
                key.starts_with("s/"),
                "the push writes its segment alone: {key}"
            );
            push.put(key, value);
        }
    }
    assert!(!push.is_empty(), "the other writer's push wrote a segment");
    let racing = RacingStore {
        inner: store.clone(),
        pending: std::cell::RefCell::new(Some(push)),
    };
    if let Err(e) = block_on(Engine::open(racing, TestHost::new(), config())) {
        panic!("an open that raced another writer's push must not report damage: {e}");
    }
    // Reopened after the race: all four messages, in order.
    let engine = block_on(Engine::open(store.clone(), TestHost::new(), config())).unwrap();
    assert_eq!(
        queued(&engine, "after"),
        [json!(0), json!(1), json!(2), json!("other")]
    );
}

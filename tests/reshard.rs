//! The shard migration's record half (`queen_edge::core::reshard`) over real brokers: data written by one
//! unsharded broker is moved, queue by queue, into two shards (one of them the same store, rewritten in
//! place, as the Worker's shard 0 is), and the two brokers opened over the result hold every message,
//! cursor and dead letter once, with ids that route to their shard, and serve reads, pops and acks.
//! The workerd tests (worker/test/reshard.test.mjs) run the whole migration through the Worker.

#![cfg(all(not(target_arch = "wasm32"), feature = "ops"))]

use crate::http_support;

use http_support::*;
use queen_edge::core::ids::ShardTag;
use queen_edge::core::reshard::{
    drop_keys, import, select, unpaged_segments, Destination, Survey, SURVEY_PREFIXES,
};
use queen_edge::core::BrokerConfig;
use queen_edge::store::{MemStore, Record, Store};
use serde_json::{json, Value};
use std::collections::BTreeMap;

fn scan(store: &MemStore) -> Vec<Record> {
    let mut out = Vec::new();
    for prefix in SURVEY_PREFIXES {
        out.extend(futures::executor::block_on(store.scan(prefix)).unwrap());
    }
    out
}

/// `queue`'s records in `store`, segment values included, and its segment keys.
fn export(store: &MemStore, queue: &str) -> (Vec<Record>, Vec<String>) {
    let (mut mine, mut segments) = select(&scan(store), queue).unwrap();
    let unpaged = futures::executor::block_on(unpaged_segments(store, &mine)).unwrap();
    let values = futures::executor::block_on(store.get(&segments)).unwrap();
    for (k, v) in segments.iter().zip(values) {
        mine.push((k.clone(), v.expect("segment stored")));
    }
    for (k, v) in unpaged {
        segments.push(k.clone());
        mine.push((k, v));
    }
    (mine, segments)
}

/// Moves `queue` from `from` (shard `source`) to `to` (shard `index` of `count`), as the Worker does:
/// import with a marker in one commit, then drop from the source; in one commit when they are the same
/// store.
fn move_queue(
    from: &MemStore,
    to: &MemStore,
    same: bool,
    queue: &str,
    dest: Destination,
    source: u16,
) {
    let (mine, segments) = export(from, queue);
    let old: Vec<Record> = mine
        .iter()
        .filter(|(k, _)| !k.starts_with("s/"))
        .cloned()
        .collect();
    if same {
        let keys: std::collections::BTreeSet<&String> = mine.iter().map(|(k, _)| k).collect();
        let others: Vec<Record> = scan(from)
            .into_iter()
            .filter(|(k, _)| !keys.contains(k))
            .collect();
        let imported = import(
            &mine,
            queue,
            &Survey::of(&others).unwrap(),
            dest,
            "plan",
            source,
        )
        .unwrap();
        let mut changes = drop_keys(&old, &segments);
        changes.absorb(imported.changes);
        futures::executor::block_on(from.commit(&changes)).unwrap();
    } else {
        let imported = import(
            &mine,
            queue,
            &Survey::of(&scan(to)).unwrap(),
            dest,
            "plan",
            source,
        )
        .unwrap();
        futures::executor::block_on(to.commit(&imported.changes)).unwrap();
        futures::executor::block_on(from.commit(&drop_keys(&old, &segments))).unwrap();
    }
}

/// Every transaction id a fresh group can pop from `queue`.
fn drain(h: &Harness, queue: &str, group: &str) -> Vec<String> {
    let mut out = Vec::new();
    loop {
        let (status, body) = h.call(
            "GET",
            &format!("/api/v1/pop/queue/{queue}?consumerGroup={group}&subscriptionMode=all&batch=100&wait=false"),
            None,
        );
        if status == 204 {
            return out;
        }
        assert_eq!(status, 200, "{body}");
        let lease = body["leaseId"].as_str().unwrap().to_string();
        let mut acks = Vec::new();
        for m in body["messages"].as_array().unwrap() {
            out.push(m["transactionId"].as_str().unwrap().to_string());
            acks.push(
                json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                             "status": "completed", "leaseId": lease}),
            );
        }
        let (status, acked) = h.call(
            "POST",
            "/api/v1/ack/batch",
            Some(json!({"acknowledgments": acks, "consumerGroup": group})),
        );
        assert_eq!(status, 200, "{acked}");
        assert!(
            acked
                .as_array()
                .unwrap()
                .iter()
                .all(|a| a["success"] == true),
            "{acked}"
        );
    }
}

#[test]
fn queues_move_to_two_shards_with_every_message_cursor_and_dead_letter_once() {
    let h = Harness::new();
    let queues: Vec<String> = (0..6).map(|i| format!("q{i}")).collect();
    let mut sent: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for q in &queues {
        for i in 0..12 {
            let tx = format!("{q}-t{i}");
            let (status, body) = h.call(
                "POST",
                "/api/v1/push",
                Some(
                    json!({"items": [{"queue": q, "partition": format!("p{}", i % 3),
                                        "payload": {"i": i}, "transactionId": tx}]}),
                ),
            );
            assert_eq!(status, 201, "{body}");
            sent.entry(q.clone()).or_default().push(tx);
        }
    }
    // Group `done` consumes four messages of q0 (its cursor moves); one message of every queue goes to
    // the dead-letter queue.
    let (_, popped) = h.call(
        "GET",
        "/api/v1/pop/queue/q0/partition/p0?consumerGroup=done&subscriptionMode=all&batch=4&wait=false",
        None,
    );
    let done: Vec<String> = popped["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["transactionId"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(done.len(), 4, "{popped}");
    let acks: Vec<Value> = popped["messages"].as_array().unwrap().iter().map(|m| {
        json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"], "status": "completed",
               "leaseId": popped["leaseId"]})
    }).collect();
    let (status, acked) = h.call(
        "POST",
        "/api/v1/ack/batch",
        Some(json!({"acknowledgments": acks, "consumerGroup": "done"})),
    );
    assert_eq!(status, 200);
    assert!(
        acked
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["success"] == true),
        "{acked}"
    );
    for q in &queues {
        let (_, p) = h.call(
            "GET",
            &format!("/api/v1/pop/queue/{q}/partition/p1?batch=1&wait=false"),
            None,
        );
        let m = &p["messages"][0];
        let (status, acked) = h.call(
            "POST",
            "/api/v1/ack",
            Some(
                json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                        "status": "dlq", "error": "bad", "leaseId": p["leaseId"]}),
            ),
        );
        assert_eq!((status, &acked[0]["dlq"]), (200, &json!(true)), "{acked}");
    }
    let (_, before) = h.call("GET", "/api/v1/dlq?limit=100", None);
    assert_eq!(before["messages"].as_array().unwrap().len(), queues.len());

    // A live lease is reported: the Worker refuses to move while one is held.
    let survey = Survey::of(&scan(&h.store)).unwrap();
    assert_eq!(
        survey.live_leases("plan", h.now()).0,
        0,
        "every lease was released"
    );

    // 1 -> 2 shards: even queues stay in this store (shard 0), odd ones move to a new store (shard 1).
    let zero = h.store.clone();
    let one = MemStore::new();
    let floor = survey.next_partition_id;
    for (i, q) in queues.iter().enumerate() {
        let index = (i % 2) as u16;
        let dest = Destination {
            shard: ShardTag { index, count: 2 },
            partition_floor: floor,
        };
        let to = if index == 0 { &zero } else { &one };
        move_queue(&zero, to, index == 0, q, dest, 0);
    }
    let after = (
        Survey::of(&scan(&zero)).unwrap(),
        Survey::of(&scan(&one)).unwrap(),
    );
    assert_eq!(
        after.0.arrived("plan").len() + after.1.arrived("plan").len(),
        queues.len()
    );
    assert!(after.0.pending("plan").is_empty() && after.1.pending("plan").is_empty());

    let shards: Vec<Harness> = [zero, one]
        .into_iter()
        .enumerate()
        .map(|(k, store)| {
            let config = BrokerConfig {
                shard: ShardTag {
                    index: k as u16,
                    count: 2,
                },
                ..BrokerConfig::default()
            };
            Harness::over(store, config, 1_000)
        })
        .collect();
    for (i, q) in queues.iter().enumerate() {
        let shard = &shards[i % 2];
        let other = &shards[1 - i % 2];
        assert_eq!(
            other
                .call("GET", &format!("/api/v1/resources/queues/{q}"), None)
                .0,
            404
        );
        // Partition ids route to the shard that holds them.
        let (_, parts) = shard.call(
            "GET",
            &format!("/api/v1/resources/partitions?queue={q}"),
            None,
        );
        let parts = parts["partitions"].as_array().unwrap();
        assert_eq!(parts.len(), 3, "{parts:?}");
        for p in parts {
            let id = p["id"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| p["id"].to_string());
            assert_eq!(
                ShardTag::shard_of_partition(&id, 2),
                Some((i % 2) as u16),
                "{p}"
            );
        }
        // A fresh group reads every message once (the dead-lettered one too: it is a group's copy).
        let mut got = drain(shard, q, "fresh");
        got.sort();
        let mut want = sent[q].clone();
        want.sort();
        assert_eq!(got, want, "{q}");
    }
    // Group `done` keeps its cursor: the four it acknowledged are not delivered again.
    let again = drain(&shards[0], "q0", "done");
    assert_eq!(again.len(), 12 - 4, "{again:?}");
    assert!(done.iter().all(|tx| !again.contains(tx)));
    // Dead letters: one per queue, on the queue's shard, with ids that route there, and replayable.
    for (k, shard) in shards.iter().enumerate() {
        let (_, dlq) = shard.call("GET", "/api/v1/dlq?limit=100", None);
        let rows = dlq["messages"].as_array().unwrap();
        assert_eq!(rows.len(), 3, "{dlq}");
        for row in rows {
            let id = row["id"].as_str().unwrap();
            assert_eq!(ShardTag::shard_of_uuid(id, 2), Some(k as u16), "{row}");
        }
        let id = rows[0]["id"].as_str().unwrap();
        let (status, body) =
            shard.call("POST", &format!("/api/v1/dlq/{id}/replay"), Some(json!({})));
        assert_eq!(status, 200, "{body}");
    }
}

#[test]
fn a_queue_imported_twice_is_refused_not_duplicated() {
    let h = Harness::new();
    let (status, _) = h.call(
        "POST",
        "/api/v1/push",
        Some(json!({"items": [{"queue": "a", "payload": 1}]})),
    );
    assert_eq!(status, 201);
    let target = MemStore::new();
    let dest = Destination {
        shard: ShardTag { index: 1, count: 2 },
        partition_floor: 10,
    };
    let (mine, _) = export(&h.store, "a");
    let first = import(
        &mine,
        "a",
        &Survey::of(&scan(&target)).unwrap(),
        dest,
        "plan",
        0,
    )
    .unwrap();
    futures::executor::block_on(target.commit(&first.changes)).unwrap();
    // The marker says it arrived: a resumed migration skips it, and importing again is refused.
    let survey = Survey::of(&scan(&target)).unwrap();
    assert_eq!(survey.arrived("plan"), vec!["a".to_string()]);
    let again = import(&mine, "a", &survey, dest, "plan", 0).unwrap_err();
    assert!(
        again.message.contains("stored on the target shard already"),
        "{}",
        again.message
    );
}

/// A shard whose records a newer build wrote (a higher record format: this build would misread them,
/// as record format 3's index pages are misread by a format 2 build, which names one segment per page
/// and none past the pages) is refused by the survey's format check, before anything is moved or
/// dropped.
#[test]
fn a_shard_of_a_newer_record_format_is_refused() {
    use queen_edge::core::FORMAT_VERSION;
    use queen_edge::store::StoreErrorKind;
    let newer = json!({ "version": FORMAT_VERSION + 1, "nextPartitionId": 1 });
    let records = vec![("m/format".to_string(), serde_json::to_vec(&newer).unwrap())];
    let e = Survey::of(&records)
        .unwrap()
        .check_format()
        .expect_err("a newer record format must be refused");
    assert_eq!(e.kind, StoreErrorKind::NewerFormat, "{}", e.message);
    let current = json!({ "version": FORMAT_VERSION, "nextPartitionId": 1 });
    let records = vec![(
        "m/format".to_string(),
        serde_json::to_vec(&current).unwrap(),
    )];
    Survey::of(&records).unwrap().check_format().unwrap();
}

/// A segment missing in the run past a partition's pages while a later one is stored (storage damage)
/// stops the migration's read of the unpaged segments with an error naming both keys, as it stops the
/// open: moved without the segments before it the partition would arrive cut short, and the later
/// segment would stay behind in the source when the queue is dropped.
#[test]
fn a_segment_missing_before_a_stored_one_stops_the_migration() {
    let h = Harness::new();
    for i in 0..4 {
        let (status, body) = h.call(
            "POST",
            "/api/v1/push",
            Some(json!({"items": [{"queue": "a", "payload": i}]})),
        );
        assert_eq!(status, 201, "{body}");
    }
    let (mine, _) = select(&scan(&h.store), "a").unwrap();
    let keys: Vec<String> = futures::executor::block_on(unpaged_segments(&h.store, &mine))
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(keys.len(), 4, "four segments past the pages: {keys:?}");
    let mut damage = queen_edge::store::ChangeSet::default();
    damage.delete(keys[1].clone());
    futures::executor::block_on(h.store.commit(&damage)).unwrap();
    let e = futures::executor::block_on(unpaged_segments(&h.store, &mine))
        .expect_err("a migration over a missing segment must stop");
    for part in ["storage is damaged", &keys[1], &keys[2]] {
        assert!(e.message.contains(part), "{part:?} in {}", e.message);
    }
}

/// Buffered push items (maintenance mode) of two queues, interleaved in the buffer, and one of the
/// queues moved to another shard: the source keeps the other queue's items, whose sequence numbers
/// now have a hole where the moved ones were. The open reads a hole in the buffer as damage
/// ("buffered push items ... are missing"), so the source shard would refuse to open: every
/// acknowledged message on it out of reach, and the buffered ones never drained. The shards must open,
/// and every buffered item must be drained into its queue once, on its shard.
#[test]
fn a_queue_moved_out_of_an_interleaved_maintenance_buffer_leaves_the_source_openable() {
    let h = Harness::new();
    let (status, body) = h.call(
        "POST",
        "/api/v1/system/maintenance",
        Some(json!({"enabled": true})),
    );
    assert_eq!(status, 200, "{body}");
    // Buffer order: a0 b0 a1 b1 a2 b2.
    for i in 0..3 {
        for q in ["a", "b"] {
            let (status, body) = h.call(
                "POST",
                "/api/v1/push",
                Some(json!({"items": [{"queue": q, "payload": {"i": i}, "transactionId": format!("{q}{i}")}]})),
            );
            assert_eq!(status, 201, "{body}");
            assert_eq!(body[0]["status"], "buffered", "{body}");
        }
    }
    let survey = Survey::of(&scan(&h.store)).unwrap();
    let zero = h.store.clone();
    let one = MemStore::new();
    let floor = survey.next_partition_id;
    // `a` stays on shard 0 (rewritten in place), `b` moves to shard 1.
    for (q, index) in [("a", 0u16), ("b", 1)] {
        let dest = Destination {
            shard: ShardTag { index, count: 2 },
            partition_floor: floor,
        };
        let to = if index == 0 { &zero } else { &one };
        move_queue(&zero, to, index == 0, q, dest, 0);
    }
    for (k, store) in [zero, one].into_iter().enumerate() {
        let config = BrokerConfig {
            shard: ShardTag {
                index: k as u16,
                count: 2,
            },
            ..BrokerConfig::default()
        };
        // Harness::over panics with the open's error if the shard does not open.
        let shard = Harness::over(store, config, 1_000);
        let (status, body) = shard.call(
            "POST",
            "/api/v1/system/maintenance",
            Some(json!({"enabled": false})),
        );
        assert_eq!(status, 200, "{body}");
        let q = ["a", "b"][k];
        let got = drain(&shard, q, "g");
        assert_eq!(
            got,
            (0..3).map(|i| format!("{q}{i}")).collect::<Vec<_>>(),
            "shard {k}"
        );
    }
}

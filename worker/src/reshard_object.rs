//! The shard migration's work inside one broker object: internal routes under `/__shard/reshard/`, sent
//! only by the entry Worker's coordinator ([`crate::reshard`]; public paths never start with `/__shard/`).
//!
//! They read and write the object's storage directly (a [`DoStore`] over it, the records of
//! `queen_edge::core::reshard`), never through an engine, and refuse (409) while the object's engine is
//! open or opening: during a migration every object refuses to open (its placement names the old
//! count, shard 0 holds an unfinished plan), so nothing else writes these records meanwhile.
//!
//! - `GET survey?plan=`: what the object holds ([`Survey`]), its placement and (shard 0) the plan;
//! - `POST plan`: records the plan (shard 0);
//! - `POST export?queue=`: the queue's records, segments included (`encode_records`);
//! - `POST import?plan=&queue=&source=&index=&count=&floor=` (body: an export): writes them, rewritten
//!   for this shard, with the arrival marker, in one commit; answers `already` when the marker is there;
//! - `POST rekey?plan=&queue=&index=&count=&floor=`: the same for a queue that stays in this object:
//!   old records deleted and new ones written in one commit;
//! - `POST drop?queue=`: deletes the queue's records (after its import elsewhere), in one commit;
//! - `POST finish?plan=&index=&count=` (body `{"mode": text or null, "retire": bool}`): records the new
//!   placement (or none for a retired object, which must be empty), deletes the plan's markers, copies
//!   the maintenance switches, and lets the object open again; on shard 0 marks the plan done.

use queen_edge::core::ids::ShardTag;
use queen_edge::core::reshard::{
    decode_records, drop_keys, encode_records, import, select, unpaged_segments, Destination,
    Survey, MARKER_PREFIX, SURVEY_PREFIXES,
};
use queen_edge::store::{ChangeSet, Record, Store, StoreError};
use serde::Deserialize;
use serde_json::json;
use worker::worker_sys::web_sys;
use worker::{Method, Request, Result, Storage};

use crate::broker::Broker;
use crate::do_store::DoStore;
use crate::reshard::{Phase, Plan, PLAN_KEY};
use crate::respond;
use crate::routing::query_param;
use crate::shard_guard::{Placement, PLACEMENT_KEY};

/// Every record the migration reads (all but segments).
async fn survey_records(store: &DoStore) -> std::result::Result<Vec<Record>, StoreError> {
    let mut records = Vec::new();
    for prefix in SURVEY_PREFIXES {
        records.extend(store.scan(prefix).await?);
    }
    Ok(records)
}

/// One queue's records with its segments' values (the indexed ones' keys in the second list, then
/// the unpaged ones', all of which [`drop_keys`] deletes).
async fn export_records(
    store: &DoStore,
    records: &[Record],
    queue: &str,
) -> std::result::Result<(Vec<Record>, Vec<String>), StoreError> {
    let (mut mine, mut segments) = select(records, queue)?;
    let unpaged = unpaged_segments(store, &mine).await?;
    let values = store.get(&segments).await?;
    for (key, value) in segments.iter().zip(values) {
        let value = value.ok_or_else(|| {
            StoreError::other(format!(
                "storage is damaged: segment \"{key}\" has an index entry but is not stored"
            ))
        })?;
        mine.push((key.clone(), value));
    }
    for (key, value) in unpaged {
        segments.push(key.clone());
        mine.push((key, value));
    }
    Ok((mine, segments))
}

fn store_error(e: StoreError) -> Result<web_sys::Response> {
    respond::error(500, &format!("shard migration: {}", e.message))
}

fn number<T: std::str::FromStr>(query: &str, name: &str) -> std::result::Result<T, String> {
    query_param(query, name)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("shard migration route wants `{name}`"))
}

#[derive(Deserialize)]
struct Finish {
    mode: Option<String>,
    retire: bool,
}

/// Answers one `/__shard/reshard/...` route on `broker`'s storage.
pub async fn handle(
    broker: &Broker,
    path: &str,
    req: web_sys::Request,
) -> Result<web_sys::Response> {
    let mut req = Request::from(req);
    let query = req.url()?.query().unwrap_or("").to_string();
    let storage: Storage = broker.storage();
    let route = path.trim_start_matches("/__shard/reshard/");
    if route == "finish" {
        // A finish already recorded answers ok again (a rerun after a crash while finishing), even
        // though the object may be serving by now.
        let placement: Option<Placement> = storage.get(PLACEMENT_KEY).await?;
        let index = number::<u16>(&query, "index").ok();
        let count = number::<u16>(&query, "count").ok();
        let finished = match (index, count) {
            (Some(i), Some(c)) if i < c => placement == Some(Placement { index: i, count: c }),
            (Some(_), Some(_)) => placement.is_none(),
            _ => false,
        };
        if finished && index != Some(0) {
            return respond::json(200, &json!({ "ok": true, "already": true }));
        }
    }
    if route != "survey" && broker.engine_open_or_opening() {
        return respond::error(
            409,
            "this shard's broker is open: the migration only writes to shards that refuse to open",
        );
    }
    let store = match DoStore::open(&storage) {
        Ok(store) => store,
        Err(e) => return store_error(e),
    };
    let plan_id = query_param(&query, "plan").unwrap_or_default();
    match (req.method(), route) {
        (Method::Get, "survey") => {
            let records = match survey_records(&store).await {
                Ok(r) => r,
                Err(e) => return store_error(e),
            };
            let survey = match Survey::of(&records) {
                Ok(s) => s,
                Err(e) => return store_error(e),
            };
            let placement: Option<Placement> = storage.get(PLACEMENT_KEY).await?;
            let plan: Option<Plan> = storage.get(PLAN_KEY).await?;
            let (leases, lease_until) = survey.live_leases(&plan_id, js_sys::Date::now() as i64);
            respond::json(
                200,
                &json!({
                    "pending": survey.pending(&plan_id),
                    "arrived": survey.arrived(&plan_id),
                    "liveLeases": leases,
                    "leasesExpireAtMs": lease_until,
                    "nextPartitionId": survey.next_partition_id,
                    "formatError": survey.check_format().err().map(|e| e.message),
                    "placement": placement,
                    "plan": plan,
                    "mode": survey.mode.map(|m| String::from_utf8_lossy(&m).into_owned()),
                    "queues": survey.queues.len(),
                    "labels": survey.labels,
                }),
            )
        }
        (Method::Post, "plan") => {
            let Ok(plan) = req.json::<Plan>().await else {
                return respond::error(400, "the plan route wants a plan");
            };
            storage.put(PLAN_KEY, &plan).await?;
            respond::json(200, &json!({ "ok": true }))
        }
        (Method::Post, "export") => {
            let Some(queue) = query_param(&query, "queue") else {
                return respond::error(400, "export wants `queue`");
            };
            let exported = match survey_records(&store).await {
                Ok(records) => export_records(&store, &records, &queue).await,
                Err(e) => Err(e),
            };
            match exported {
                Ok((records, _)) => respond::respond(
                    200,
                    &[(
                        "content-type".to_string(),
                        "application/octet-stream".to_string(),
                    )],
                    &encode_records(&records),
                ),
                Err(e) => store_error(e),
            }
        }
        (Method::Post, "import") | (Method::Post, "rekey") => {
            let (queue, source, index, count, floor) = match (
                query_param(&query, "queue").ok_or_else(|| "import wants `queue`".to_string()),
                number::<u16>(&query, "source"),
                number::<u16>(&query, "index"),
                number::<u16>(&query, "count"),
                number::<u64>(&query, "floor"),
            ) {
                (Ok(q), Ok(s), Ok(i), Ok(c), Ok(f)) => (q, s, i, c, f),
                (q, s, i, c, f) => {
                    let reason = [q.err(), s.err(), i.err(), c.err(), f.err()]
                        .into_iter()
                        .flatten()
                        .collect::<Vec<_>>()
                        .join("; ");
                    return respond::error(400, &reason);
                }
            };
            let records = match survey_records(&store).await {
                Ok(r) => r,
                Err(e) => return store_error(e),
            };
            let survey = match Survey::of(&records) {
                Ok(s) => s,
                Err(e) => return store_error(e),
            };
            // Resuming: a queue this plan already wrote here is not written twice.
            if survey
                .markers
                .get(&plan_id)
                .is_some_and(|q| q.contains(&queue))
            {
                return respond::json(200, &json!({ "already": true }));
            }
            let to = Destination {
                shard: ShardTag { index, count },
                partition_floor: floor,
            };
            let outcome = if route == "import" {
                let body = req.bytes().await?;
                match decode_records(&body) {
                    Ok(bundle) => import(&bundle, &queue, &survey, to, &plan_id, source)
                        .map(|imported| (imported, ChangeSet::default())),
                    Err(e) => return respond::error(400, &e),
                }
            } else {
                rekey(&store, &records, &queue, to, &plan_id, source).await
            };
            let (imported, mut changes) = match outcome {
                Ok(pair) => pair,
                Err(e) => return store_error(e),
            };
            changes.absorb(imported.changes);
            if let Err(e) = store.commit(&changes).await {
                return store_error(e);
            }
            respond::json(
                200,
                &json!({
                    "partitions": imported.partitions,
                    "deadLetters": imported.dead_letters.0,
                    "renamedDeadLetters": imported.dead_letters.1,
                }),
            )
        }
        (Method::Post, "drop") => {
            let Some(queue) = query_param(&query, "queue") else {
                return respond::error(400, "drop wants `queue`");
            };
            let dropped = match survey_records(&store).await {
                Ok(records) => select(&records, &queue),
                Err(e) => Err(e),
            };
            let (records, mut segments) = match dropped {
                Ok(pair) => pair,
                Err(e) => return store_error(e),
            };
            match unpaged_segments(&store, &records).await {
                Ok(unpaged) => segments.extend(unpaged.into_iter().map(|(key, _)| key)),
                Err(e) => return store_error(e),
            }
            if let Err(e) = store.commit(&drop_keys(&records, &segments)).await {
                return store_error(e);
            }
            respond::json(200, &json!({ "deleted": records.len() + segments.len() }))
        }
        (Method::Post, "finish") => {
            let (index, count) = match (
                number::<u16>(&query, "index"),
                number::<u16>(&query, "count"),
            ) {
                (Ok(i), Ok(c)) => (i, c),
                (Err(e), _) | (_, Err(e)) => return respond::error(400, &e),
            };
            let Ok(finish) = req.json::<Finish>().await else {
                return respond::error(400, "finish wants {\"mode\": ..., \"retire\": ...}");
            };
            finish_here(broker, &storage, &store, &plan_id, index, count, finish).await
        }
        _ => respond::error(404, "no such shard migration route"),
    }
}

/// A queue that stays in this object: its records rewritten for the new count, the old ones deleted,
/// both in the change sets returned (import first, deletions second).
async fn rekey(
    store: &DoStore,
    records: &[Record],
    queue: &str,
    to: Destination,
    plan: &str,
    source: u16,
) -> std::result::Result<(queen_edge::core::reshard::Imported, ChangeSet), StoreError> {
    let (mine, segments) = export_records(store, records, queue).await?;
    let moving: std::collections::BTreeSet<&str> = mine.iter().map(|(k, _)| k.as_str()).collect();
    let others: Vec<Record> = records
        .iter()
        .filter(|(k, _)| !moving.contains(k.as_str()))
        .cloned()
        .collect();
    let without = Survey::of(&others)?;
    let imported = import(&mine, queue, &without, to, plan, source)?;
    let old: Vec<Record> = mine
        .into_iter()
        .filter(|(k, _)| !k.starts_with("s/"))
        .collect();
    Ok((imported, drop_keys(&old, &segments)))
}

async fn finish_here(
    broker: &Broker,
    storage: &Storage,
    store: &DoStore,
    plan_id: &str,
    index: u16,
    count: u16,
    finish: Finish,
) -> Result<web_sys::Response> {
    let records = match survey_records(store).await {
        Ok(r) => r,
        Err(e) => return store_error(e),
    };
    let survey = match Survey::of(&records) {
        Ok(s) => s,
        Err(e) => return store_error(e),
    };
    if !survey.pending(plan_id).is_empty() && finish.retire {
        return respond::error(
            409,
            "this shard still holds queues the migration has not moved: it cannot be retired",
        );
    }
    let mut changes = ChangeSet::default();
    for (key, _) in records.iter().filter(|(k, _)| k.starts_with(MARKER_PREFIX)) {
        changes.delete(key.clone());
    }
    if !finish.retire && index > 0 {
        match finish.mode {
            Some(mode) => changes.put(queen_edge::core::maintenance::MODE_KEY, mode.into_bytes()),
            None => changes.delete(queen_edge::core::maintenance::MODE_KEY),
        }
    }
    if let Err(e) = store.commit(&changes).await {
        return store_error(e);
    }
    if finish.retire {
        storage.delete(PLACEMENT_KEY).await?;
    } else {
        storage
            .put(PLACEMENT_KEY, Placement { index, count })
            .await?;
    }
    if index == 0 && !finish.retire {
        let plan: Option<Plan> = storage.get(PLAN_KEY).await?;
        if let Some(mut plan) = plan {
            plan.phase = Phase::Done;
            storage.put(PLAN_KEY, &plan).await?;
        }
    }
    broker.forget_refusal();
    respond::json(200, &json!({ "ok": true }))
}

//! The coordinator of transactions across shards: two-phase commit (docs/protocol.md §3.9.1).
//!
//! It is one more `Broker` object per broker, `<broker>#txn` ([`ShardMap::coordinator_name`]), that
//! opens no engine: its storage holds one record per transaction it has not finished
//! (`txn/<id>`: the broker, the shards, the state, when it started). The entry Worker sends it a
//! transaction whose queues live on several shards (`POST /__shard/txn/run`, the client's headers and
//! body); it:
//!
//! 1. splits the body into one part per shard ([`crate::txn_plan`]) and records the transaction as
//!    `preparing`, durably, before any shard hears of it;
//! 2. sends every shard its part to prepare (`/__shard/txn/prepare`, [`crate::txn_participant`]): the
//!    shard checks it, stores it and pins the leases it acks with, or refuses it;
//! 3. writes the decision: `committed` when every shard prepared, `aborted` otherwise. Writing it is
//!    the commit point;
//! 4. sends the decision to every shard (`/__shard/txn/commit` or `/abort`), and when every shard
//!    confirmed, deletes the record; then answers the client (the parts' results in request order).
//!
//! Crashes, at any step, are finished by alarms (both sides are idempotent by transaction id):
//! - the coordinator's alarm aborts a transaction still `preparing` after [`timeout`] (presumed
//!   abort: no shard can have applied anything), and sends a recorded decision again to the shards
//!   that did not confirm it;
//! - a shard's alarm asks the coordinator about a part prepared longer than [`timeout`] ago
//!   (`/__shard/txn/status`): `committed` commits it, `aborted` or `unknown` (no record: finished
//!   and deleted, so the shard's part is a late copy) aborts it; the coordinator asked about a
//!   `preparing` transaction past its timeout decides `aborted` first.
//!
//! A live run and the alarm never decide differently: the decision is written only over
//! `preparing`, read back first, and the alarm leaves alone a transaction this isolate is still
//! running. A test-only fault point (var `QUEEN_TEST_TXN_FAULT`, honoured only with
//! `QUEEN_TEST_ROUTES`) stops a run after the prepares (`after-prepare`) or after the decision
//! (`after-decision`), answering 500, so a test can kill the process there.

use std::cell::RefCell;
use std::collections::HashSet;

use futures::future::join_all;
use serde::{Deserialize, Serialize};
use serde_json::json;
use serde_json::value::RawValue;
use worker::worker_sys::web_sys;
use worker::{Env, Headers, ListOptions, Method, Result, State};

use crate::frame::{CONTENT_TYPE, JSON};
use crate::respond;
use crate::shards::ShardMap;
use crate::split_text::Members;
use crate::txn_plan::{self, Part};
use crate::vars::{flag, shard_count, var};

/// Header naming the broker of a transaction the entry Worker sends to the coordinator.
pub const BROKER_HEADER: &str = "x-queen-txn-broker";
/// Header carrying the transaction id to a shard.
pub const ID_HEADER: &str = "x-queen-txn-id";
/// Header carrying the coordinator's object name to a shard (it asks there after a crash).
pub const OWNER_HEADER: &str = "x-queen-txn-owner";
/// Storage key prefix of the coordinator's records.
const RECORD_PREFIX: &str = "txn/";
/// Storage key that marks an object as a coordinator (its alarm recovers transactions, nothing else).
pub const MARKER_KEY: &str = "queen-txn-coordinator";
thread_local! {
    /// Transactions a live run in this isolate is driving (the alarm leaves them to it).
    static RUNNING: RefCell<HashSet<String>> = RefCell::new(HashSet::new());
}

/// The phase timeout, `TXN_TIMEOUT_MS` ([`crate::config::txn_timeout_ms`]). A value that cannot be read
/// stops every shard of the broker (its `WorkerConfig` notes it), so the default this falls back to
/// then decides nothing: no shard prepares.
pub fn timeout(env: &Env) -> i64 {
    crate::config::txn_timeout_ms(var(env, crate::config::TXN_TIMEOUT_VAR).as_deref())
        .unwrap_or(crate::config::DEFAULT_TXN_TIMEOUT_MS)
}

/// Where a transaction is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Prepares sent, no decision yet.
    Preparing,
    /// Decided: commit (every shard prepared).
    Committed,
    /// Decided: abort.
    Aborted,
}

/// A transaction the coordinator has not finished.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    /// The broker (shard 0's object name).
    pub broker: String,
    /// The shards that got a part.
    pub shards: Vec<u16>,
    /// The shards that confirmed the decision.
    #[serde(default)]
    pub confirmed: Vec<u16>,
    /// The phase.
    pub phase: Phase,
    /// When the run started (Unix ms).
    pub started_ms: i64,
}

fn record_key(id: &str) -> String {
    format!("{RECORD_PREFIX}{id}")
}

async fn load(state: &State, id: &str) -> Result<Option<Record>> {
    let text: Option<String> = state.storage().get(&record_key(id)).await?;
    Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
}

async fn save(state: &State, id: &str, record: &Record) -> Result<()> {
    let text = serde_json::to_string(record)?;
    state.storage().put(&record_key(id), text).await
}

/// Schedules the object's alarm no later than `at_ms`.
pub async fn alarm_by(state: &State, at_ms: i64) -> Result<()> {
    let storage = state.storage();
    let now = js_sys::Date::now() as i64;
    match storage.get_alarm().await? {
        Some(current) if current <= at_ms => Ok(()),
        _ => storage.set_alarm((at_ms - now).max(0)).await,
    }
}

/// A fresh transaction id (a UUIDv7).
fn mint_id() -> String {
    let now = js_sys::Date::now() as i64;
    let seed = (js_sys::Math::random() * u64::MAX as f64) as u64 ^ (now as u64).rotate_left(17);
    queen_edge::core::ids::IdGen::new(seed).uuid_v7(now)
}

/// The fault point `name` is on (tests only).
fn fault(env: &Env, name: &str) -> bool {
    flag(env, "QUEEN_TEST_ROUTES") && var(env, "QUEEN_TEST_TXN_FAULT").as_deref() == Some(name)
}

/// The coordinator's routes: `POST /__shard/txn/run` and `GET /__shard/txn/status?id=`.
pub async fn handle(
    state: &State,
    env: &Env,
    path: &str,
    req: web_sys::Request,
) -> Result<web_sys::Response> {
    // Marks the object, so its alarm knows it recovers transactions (and opens no engine).
    let storage = state.storage();
    if storage.get::<bool>(MARKER_KEY).await?.is_none() {
        storage.put(MARKER_KEY, true).await?;
    }
    match path {
        "/__shard/txn/run" => run(state, env, req).await,
        "/__shard/txn/status" => {
            let url = req.url();
            let (_, query) = crate::path_and_query(&url);
            let Some(id) = crate::routing::query_param(query, "id") else {
                return respond::error(400, "status wants ?id=");
            };
            let phase = status(state, env, &id).await?;
            respond::json(200, &json!({ "state": phase }))
        }
        _ => respond::error(404, "no such transaction route"),
    }
}

/// The state of transaction `id` for a shard that asks: `committed`, `aborted` or `unknown` (no
/// record), or `preparing` while it may still commit. A transaction preparing past its timeout that no
/// run in this isolate is driving is decided `aborted` here.
async fn status(state: &State, env: &Env, id: &str) -> Result<&'static str> {
    let Some(mut record) = load(state, id).await? else {
        return Ok("unknown");
    };
    let now = js_sys::Date::now() as i64;
    let running = RUNNING.with(|r| r.borrow().contains(id));
    if record.phase == Phase::Preparing && !running && now - record.started_ms >= timeout(env) {
        record.phase = Phase::Aborted;
        save(state, id, &record).await?;
        alarm_by(state, now).await?;
    }
    Ok(match record.phase {
        Phase::Preparing => "preparing",
        Phase::Committed => "committed",
        Phase::Aborted => "aborted",
    })
}

/// One shard's answer, read (its body as the shard wrote it).
struct ShardAnswer {
    status: u16,
    body: Vec<u8>,
}

impl ShardAnswer {
    fn members(&self) -> Option<Members<'_>> {
        serde_json::from_slice(&self.body).ok()
    }

    /// True for a prepare's `{"prepared": true}`.
    fn prepared(&self) -> bool {
        self.members()
            .and_then(|m| m.get("prepared"))
            .is_some_and(|v| v.get() == "true")
    }

    /// The answer's `error`, when it is a string.
    fn error(&self) -> Option<String> {
        self.members()?.string("error")
    }

    /// The texts of the `results` of a commit's `reply` (none when the reply has no list of them); `None`
    /// when the answer has no `reply` (the part was not committed by this answer).
    fn reply_results(&self) -> Option<Vec<&RawValue>> {
        let reply = self.members()?.get("reply")?;
        Some(
            serde_json::from_str::<Members>(reply.get())
                .ok()
                .and_then(|r| r.items("results").ok())
                .unwrap_or_default(),
        )
    }
}

async fn ask_shard(
    env: &Env,
    map: &ShardMap,
    shard: u16,
    route: &str,
    id: &str,
    headers: &Headers,
    body: Option<&[u8]>,
) -> ShardAnswer {
    // One copy made by the runtime (not a call from Rust per header and its strings both ways).
    let out = match web_sys::Headers::new_with_headers(&headers.0) {
        Ok(copy) => Headers(copy),
        Err(_) => Headers::new(),
    };
    let _ = out.set(ID_HEADER, id);
    let _ = out.set(OWNER_HEADER, &map.coordinator_name());
    let _ = out.set("content-type", "application/json");
    let url = format!("https://shard/__shard/txn/{route}");
    let method = if body.is_some() {
        Method::Post
    } else {
        Method::Get
    };
    match crate::sharded::send(env, map, shard, method, &url, &out, body).await {
        Ok(response) => {
            let status = response.status();
            let bytes = crate::sharded::read_body(&response)
                .await
                .unwrap_or_default();
            ShardAnswer {
                status,
                body: bytes,
            }
        }
        Err(e) => ShardAnswer {
            status: 503,
            body: json!({ "error": format!("shard {shard} did not answer: {e}") })
                .to_string()
                .into_bytes(),
        },
    }
}

/// Sends the decision of `record` to the shards that did not confirm it; returns each confirming
/// shard's answer (a commit's holds the part's transaction answer, `reply`) and records the
/// confirmations. Deletes the record when every shard confirmed.
async fn finish(
    state: &State,
    env: &Env,
    id: &str,
    record: &mut Record,
) -> Result<Vec<(u16, ShardAnswer)>> {
    let map = ShardMap {
        broker: record.broker.clone(),
        count: shard_count(env).map_err(worker::Error::RustError)?,
    };
    let route = match record.phase {
        Phase::Committed => "commit",
        Phase::Aborted => "abort",
        Phase::Preparing => return Ok(Vec::new()),
    };
    let pending: Vec<u16> = record
        .shards
        .iter()
        .copied()
        .filter(|s| !record.confirmed.contains(s))
        .collect();
    let headers = Headers::new();
    let answers = join_all(pending.iter().map(|&shard| {
        let (map, headers) = (&map, &headers);
        async move {
            (
                shard,
                ask_shard(env, map, shard, route, id, headers, Some(b"{}")).await,
            )
        }
    }))
    .await;
    let mut replies = Vec::new();
    for (shard, answer) in answers {
        if answer.status == 200 {
            record.confirmed.push(shard);
            replies.push((shard, answer));
        }
    }
    if record.shards.iter().all(|s| record.confirmed.contains(s)) {
        state.storage().delete(&record_key(id)).await?;
    } else {
        save(state, id, record).await?;
        alarm_by(state, js_sys::Date::now() as i64 + timeout(env)).await?;
    }
    Ok(replies)
}

/// Runs one transaction across shards (steps 1 to 4 of the module documentation).
async fn run(state: &State, env: &Env, req: web_sys::Request) -> Result<web_sys::Response> {
    let headers = Headers(req.headers());
    let Some(broker) = headers.get(BROKER_HEADER)? else {
        return respond::error(400, "a transaction run names its broker");
    };
    let map = ShardMap {
        broker: broker.clone(),
        count: shard_count(env).map_err(worker::Error::RustError)?,
    };
    let buffer = worker::wasm_bindgen_futures::JsFuture::from(req.array_buffer()?).await?;
    let bytes = js_sys::Uint8Array::new(&buffer).to_vec();
    let parts = match txn_plan::split(&map, &bytes) {
        Ok(Some(parts)) => parts,
        Ok(None) => return respond::error(400, "operations array required"),
        Err(_) => return respond::error(400, "a transaction body is a JSON object"),
    };
    let id = mint_id();
    RUNNING.with(|r| r.borrow_mut().insert(id.clone()));
    let answer = drive(state, env, &map, &id, &parts, &headers).await;
    RUNNING.with(|r| r.borrow_mut().remove(&id));
    answer
}

async fn drive(
    state: &State,
    env: &Env,
    map: &ShardMap,
    id: &str,
    parts: &[Part],
    headers: &Headers,
) -> Result<web_sys::Response> {
    let started = js_sys::Date::now() as i64;
    let mut record = Record {
        broker: map.broker.clone(),
        shards: parts.iter().map(|p| p.shard).collect(),
        confirmed: Vec::new(),
        phase: Phase::Preparing,
        started_ms: started,
    };
    // 1. Recorded before any shard hears of it: a crash from here on is found by the alarm.
    save(state, id, &record).await?;
    alarm_by(state, started + timeout(env)).await?;
    // 2. Prepare everywhere (the client's headers go along: each shard checks the caller).
    let prepares = join_all(parts.iter().map(|part| async move {
        ask_shard(
            env,
            map,
            part.shard,
            "prepare",
            id,
            headers,
            Some(&part.body()),
        )
        .await
    }))
    .await;
    // The first refusal in part order: a shard's error answer (a 4xx: the caller, a malformed part; a
    // 507: the storage quota), handed to the client as it is, or its reason.
    let refusal = prepares
        .iter()
        .find(|answer| answer.status != 200 || !answer.prepared());
    if fault(env, "after-prepare") {
        return respond::error(
            500,
            "test fault: the coordinator stopped after the prepares",
        );
    }
    // 3. The decision, written only over `preparing` (an alarm or a status query may have aborted a
    // run that took too long).
    let wanted = if refusal.is_none() {
        Phase::Committed
    } else {
        Phase::Aborted
    };
    let stored = load(state, id).await?.map(|r| r.phase);
    record.phase = match stored {
        Some(Phase::Preparing) | None => wanted,
        Some(decided) => decided,
    };
    save(state, id, &record).await?;
    if fault(env, "after-decision") {
        return respond::error(
            500,
            "test fault: the coordinator stopped after the decision",
        );
    }
    // 4. Tell every shard, then answer.
    let replies = finish(state, env, id, &mut record).await?;
    if record.phase == Phase::Aborted {
        return match refusal {
            Some(answer) if answer.status != 200 => respond::respond(
                answer.status,
                &[(CONTENT_TYPE.into(), JSON.into())],
                &answer.body,
            ),
            _ => {
                let error = refusal.and_then(ShardAnswer::error).unwrap_or_else(|| {
                    "the transaction took too long to prepare and was aborted".to_string()
                });
                respond::json(
                    200,
                    &json!({ "transactionId": id, "success": false, "error": error, "results": [] }),
                )
            }
        };
    }
    let mut answers = Vec::new();
    let mut pending = Vec::new();
    for part in parts {
        let results = replies
            .iter()
            .find(|(s, _)| *s == part.shard)
            .and_then(|(_, answer)| answer.reply_results());
        match results {
            Some(results) => answers.push(results),
            None => {
                pending.push(part.shard);
                answers.push(Vec::new());
            }
        }
    }
    // {"transactionId", "success", "results", and "pendingShards" when some shard has not confirmed
    // (committed, but the alarm sends those the commit again)}, the parts' results as they wrote them.
    let mut answer = format!(
        r#"{{"transactionId":{},"success":true,"results":"#,
        json!(id)
    )
    .into_bytes();
    answer.extend_from_slice(&txn_plan::merge_results(parts, &answers));
    if !pending.is_empty() {
        answer.extend_from_slice(format!(r#","pendingShards":{}"#, json!(pending)).as_bytes());
    }
    answer.push(b'}');
    respond::respond(200, &[(CONTENT_TYPE.into(), JSON.into())], &answer)
}

/// The coordinator's alarm: aborts transactions undecided past their timeout (unless this isolate
/// is running them) and sends every recorded decision again; schedules itself while records remain.
pub async fn recover(state: &State, env: &Env) -> Result<()> {
    let storage = state.storage();
    let listed = storage
        .list_with_options(ListOptions::new().prefix(RECORD_PREFIX))
        .await?;
    let mut records = Vec::new();
    listed.for_each(&mut |value, key| {
        let (Some(key), Some(text)) = (key.as_string(), value.as_string()) else {
            return;
        };
        if let Ok(record) = serde_json::from_str::<Record>(&text) {
            records.push((key[RECORD_PREFIX.len()..].to_string(), record));
        }
    });
    let now = js_sys::Date::now() as i64;
    let limit = timeout(env);
    let mut next: Option<i64> = None;
    for (id, mut record) in records {
        if RUNNING.with(|r| r.borrow().contains(&id)) {
            next = Some(next.map_or(now + limit, |n| n.min(now + limit)));
            continue;
        }
        if record.phase == Phase::Preparing {
            if now - record.started_ms < limit {
                let at = record.started_ms + limit;
                next = Some(next.map_or(at, |n| n.min(at)));
                continue;
            }
            // Presumed abort: no shard applied anything, and none will commit without a decision.
            record.phase = Phase::Aborted;
            save(state, &id, &record).await?;
        }
        finish(state, env, &id, &mut record).await?;
    }
    if let Some(at) = next {
        alarm_by(state, at).await?;
    }
    Ok(())
}

//! The trace reads (feature `views`, wire-contract §1.10), in the shapes of Queen's
//! `get_message_traces_v1`, `get_traces_by_name_v1` and `get_available_trace_names_v1`:
//! - `GET /api/v1/traces/:partitionId/:transactionId` → `{traces:[…]}`, oldest first;
//! - `GET /api/v1/traces/by-name/:name?limit=100&offset=0` → `{traces:[…], pagination}`;
//! - `GET /api/v1/traces/names?limit=50&offset=0` → `{traceNames:[…], total, pagination}`, most
//!   recently seen first.

use crate::core::timefmt::iso_millis;
use crate::core::traces::{decode_trace, Trace};
use crate::engine::{Engine, Host};
use crate::http::error::{json_response, HttpError};
use crate::http::query::Query;
use crate::http::wire::{check_id, check_name};
use crate::http::{HttpConfig, HttpResponse};
use crate::store::Store;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

fn page(query: &Query, config: &HttpConfig, default: u64) -> Result<(usize, usize), HttpError> {
    let limit = query
        .uint("limit", 0, config.limits.max_page as u64)?
        .unwrap_or(default) as usize;
    let offset = query.uint("offset", 0, u32::MAX as u64)?.unwrap_or(0) as usize;
    Ok((limit, offset))
}

/// A stored trace read back, with its message's partition id, queue and partition name.
struct Stored {
    trace: Trace,
    partition_id: String,
    queue: String,
    partition: String,
}

/// Reads the trace records `keys` names (key, queue, partition), oldest first. A record deleted since
/// the keys were listed (pruned meanwhile) is skipped.
async fn read<S: Store, H: Host>(
    engine: &Engine<S, H>,
    keys: Vec<(String, String, String)>,
) -> Result<Vec<Stored>, HttpError> {
    let names: Vec<String> = keys.iter().map(|(k, _, _)| k.clone()).collect();
    let values = engine
        .store()
        .get(&names)
        .await
        .map_err(|e| HttpError::from(crate::engine::EngineError::Store(e)))?;
    let mut out = Vec::new();
    for ((key, queue, partition), value) in keys.into_iter().zip(values) {
        let Some(bytes) = value else { continue };
        let trace = decode_trace(&key, &bytes)
            .map_err(|e| HttpError::from(crate::engine::EngineError::Store(e)))?;
        // The key is t/<seq>/<pid>/<offset>, 16 hex digits each.
        let pid = key
            .split('/')
            .nth(2)
            .and_then(|p| u64::from_str_radix(p, 16).ok())
            .unwrap_or(0);
        out.push(Stored {
            trace,
            partition_id: pid.to_string(),
            queue,
            partition,
        });
    }
    Ok(out)
}

/// One trace; `with_message` adds where the message lives (the by-name listing).
fn trace(s: &Stored, with_message: bool) -> Value {
    let t = &s.trace;
    let data = t.data.to_value().unwrap_or(Value::Null);
    let mut names = t.names.clone();
    names.sort();
    let mut out = json!({
        "id": t.id,
        "eventType": t.event_type,
        "data": data,
        "consumerGroup": t.consumer_group,
        "workerId": t.worker_id,
        "createdAt": iso_millis(t.created_at_ms),
        "traceNames": names,
    });
    if with_message {
        out["transactionId"] = json!(t.transaction_id);
        out["partitionId"] = json!(s.partition_id);
        out["queueName"] = json!(s.queue);
        out["partitionName"] = json!(s.partition);
    }
    out
}

/// `GET /api/v1/traces/:partitionId/:transactionId`.
pub(crate) async fn of_message<S: Store, H: Host>(
    engine: &Engine<S, H>,
    config: &HttpConfig,
    partition_id: &str,
    transaction_id: &str,
) -> Result<HttpResponse, HttpError> {
    check_id("partitionId", partition_id, &config.limits)?;
    check_id("transactionId", transaction_id, &config.limits)?;
    let keys = engine
        .read_loaded(|b, _| {
            b.trace_target(partition_id, transaction_id)
                .map(|at| b.trace_keys(Some(at)))
                .unwrap_or_default()
        })
        .await?;
    let list: Vec<Value> = read(engine, keys)
        .await?
        .iter()
        .map(|s| trace(s, false))
        .collect();
    Ok(json_response(200, &json!({ "traces": list })))
}

/// `GET /api/v1/traces/by-name/:name`.
pub(crate) async fn by_name<S: Store, H: Host>(
    engine: &Engine<S, H>,
    config: &HttpConfig,
    name: &str,
    query: &Query,
) -> Result<HttpResponse, HttpError> {
    check_name("Trace name", name, false, &config.limits)?;
    let (limit, offset) = page(query, config, 100)?;
    let keys = engine.read(|b, _| b.trace_keys(None));
    let list: Vec<Value> = read(engine, keys)
        .await?
        .iter()
        .filter(|s| s.trace.names.iter().any(|n| n == name))
        .skip(offset)
        .take(limit)
        .map(|s| trace(s, true))
        .collect();
    Ok(json_response(
        200,
        &json!({
            "traces": list,
            "pagination": {"limit": limit, "offset": offset},
        }),
    ))
}

/// One name's traces, distinct messages (partition id, transaction id) and when it was last seen.
type NameCounts<'a> = (u64, BTreeSet<(&'a str, &'a str)>, i64);

/// `GET /api/v1/traces/names`.
pub(crate) async fn names<S: Store, H: Host>(
    engine: &Engine<S, H>,
    config: &HttpConfig,
    query: &Query,
) -> Result<HttpResponse, HttpError> {
    let (limit, offset) = page(query, config, 50)?;
    let keys = engine.read(|b, _| b.trace_keys(None));
    let stored = read(engine, keys).await?;
    let mut by_name: BTreeMap<&str, NameCounts> = BTreeMap::new();
    for s in &stored {
        for n in &s.trace.names {
            let e = by_name.entry(n.as_str()).or_default();
            e.0 += 1;
            e.1.insert((s.partition_id.as_str(), s.trace.transaction_id.as_str()));
            e.2 = e.2.max(s.trace.created_at_ms);
        }
    }
    let mut all: Vec<(&str, u64, usize, i64)> = by_name
        .into_iter()
        .map(|(name, (traces, messages, last))| (name, traces, messages.len(), last))
        .collect();
    // Most recently seen first, then by name.
    all.sort_by(|a, b| b.3.cmp(&a.3).then_with(|| a.0.cmp(b.0)));
    let list: Vec<Value> = all
        .iter()
        .skip(offset)
        .take(limit)
        .map(|(name, traces, messages, last)| {
            json!({
                "traceName": name,
                "traceCount": traces,
                "messageCount": messages,
                "lastSeen": iso_millis(*last),
            })
        })
        .collect();
    Ok(json_response(
        200,
        &json!({
            "traceNames": list,
            "total": all.len(),
            "pagination": {"limit": limit, "offset": offset},
        }),
    ))
}

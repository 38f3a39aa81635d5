//! The trace reads (feature `views`, wire-contract §1.10), in the shapes of Queen's
//! `get_message_traces_v1`, `get_traces_by_name_v1` and `get_available_trace_names_v1`:
//! - `GET /api/v1/traces/:partitionId/:transactionId` → `{traces:[…]}`, oldest first;
//! - `GET /api/v1/traces/by-name/:name?limit=100&offset=0` → `{traces:[…], pagination}`;
//! - `GET /api/v1/traces/names?limit=50&offset=0` → `{traceNames:[…], total, pagination}`, most
//!   recently seen first.

use crate::core::timefmt::iso_millis;
use crate::core::traces::TraceView;
use crate::engine::{Engine, Host};
use crate::http::error::{json_response, HttpError};
use crate::http::query::Query;
use crate::http::wire::{check_id, check_name};
use crate::http::{HttpConfig, HttpResponse};
use crate::store::Store;
use serde_json::{json, Value};

fn page(query: &Query, config: &HttpConfig, default: u64) -> Result<(usize, usize), HttpError> {
    let limit = query
        .uint("limit", 0, config.limits.max_page as u64)?
        .unwrap_or(default) as usize;
    let offset = query.uint("offset", 0, u32::MAX as u64)?.unwrap_or(0) as usize;
    Ok((limit, offset))
}

/// One trace; `with_message` adds where the message lives (the by-name listing).
fn trace(v: &TraceView, with_message: bool) -> Value {
    let t = &v.trace;
    let data = t.data.to_value().unwrap_or(Value::Null);
    let mut out = json!({
        "id": t.id,
        "eventType": t.event_type,
        "data": data,
        "consumerGroup": t.consumer_group,
        "workerId": t.worker_id,
        "createdAt": iso_millis(t.created_at_ms),
        "traceNames": t.names,
    });
    if with_message {
        out["transactionId"] = json!(t.transaction_id);
        out["partitionId"] = json!(t.pid.to_string());
        out["queueName"] = json!(v.queue);
        out["partitionName"] = json!(v.partition);
    }
    out
}

/// `GET /api/v1/traces/:partitionId/:transactionId`.
pub(crate) fn of_message<S: Store, H: Host>(
    engine: &Engine<S, H>,
    config: &HttpConfig,
    partition_id: &str,
    transaction_id: &str,
) -> Result<HttpResponse, HttpError> {
    check_id("partitionId", partition_id, &config.limits)?;
    check_id("transactionId", transaction_id, &config.limits)?;
    let list: Vec<Value> = engine.read(|b, _| {
        b.traces_of(partition_id, transaction_id)
            .iter()
            .map(|v| trace(v, false))
            .collect()
    });
    Ok(json_response(200, &json!({ "traces": list })))
}

/// `GET /api/v1/traces/by-name/:name`.
pub(crate) fn by_name<S: Store, H: Host>(
    engine: &Engine<S, H>,
    config: &HttpConfig,
    name: &str,
    query: &Query,
) -> Result<HttpResponse, HttpError> {
    check_name("Trace name", name, false, &config.limits)?;
    let (limit, offset) = page(query, config, 100)?;
    let list: Vec<Value> = engine.read(|b, _| {
        b.traces_named(name, limit, offset)
            .iter()
            .map(|v| trace(v, true))
            .collect()
    });
    Ok(json_response(
        200,
        &json!({
            "traces": list,
            "pagination": {"limit": limit, "offset": offset},
        }),
    ))
}

/// `GET /api/v1/traces/names`.
pub(crate) fn names<S: Store, H: Host>(
    engine: &Engine<S, H>,
    config: &HttpConfig,
    query: &Query,
) -> Result<HttpResponse, HttpError> {
    let (limit, offset) = page(query, config, 50)?;
    let all = engine.read(|b, _| b.trace_names());
    let list: Vec<Value> = all
        .iter()
        .skip(offset)
        .take(limit)
        .map(|n| {
            json!({
                "traceName": n.name,
                "traceCount": n.trace_count,
                "messageCount": n.message_count,
                "lastSeen": iso_millis(n.last_seen_ms),
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

//! `POST /api/v1/traces` (wire-contract §1.10, appendix D22): the body, validated into a
//! [`TraceRequest`], and the answer. The reads (`GET /traces/...`) are view routes
//! (`views/traces.rs`).

use super::error::{json_response, HttpError};
use super::wire::{check_id, check_name, parse_object};
use super::{HttpConfig, HttpResponse};
use crate::core::api::{Payload, QUEUE_MODE_GROUP};
use crate::core::traces::{TraceRequest, MAX_TRACE_DATA_BYTES, MAX_TRACE_NAMES};
use crate::engine::{Engine, Host};
use crate::store::Store;
use serde_json::{json, Value};

/// Trace body → request. `id` is left empty for the caller to mint.
pub(crate) fn parse(body: &[u8], config: &HttpConfig) -> Result<TraceRequest, HttpError> {
    let limits = &config.limits;
    let map = parse_object(body)?;
    let (Some(Value::String(t)), Some(Value::String(p))) =
        (map.get("transactionId"), map.get("partitionId"))
    else {
        return Err(HttpError::bad_request(
            "transactionId and partitionId are required",
        ));
    };
    check_id("transactionId", t, limits)?;
    check_id("partitionId", p, limits)?;
    let data = match map.get("data") {
        None | Some(Value::Null) => return Err(HttpError::bad_request("data is required")),
        Some(v) => Payload::from_value(v),
    };
    if data.len() > MAX_TRACE_DATA_BYTES {
        return Err(HttpError::too_large(format!(
            "trace data is too large ({} bytes; the limit is {MAX_TRACE_DATA_BYTES})",
            data.len()
        )));
    }
    let consumer_group = match map.get("consumerGroup") {
        None | Some(Value::Null) => QUEUE_MODE_GROUP.to_string(),
        Some(Value::String(g)) if g.is_empty() => QUEUE_MODE_GROUP.to_string(),
        Some(Value::String(g)) => {
            check_name("consumerGroup", g, false, limits)?;
            g.clone()
        }
        Some(_) => {
            return Err(HttpError::bad_request(
                "consumerGroup must be a string or null",
            ))
        }
    };
    let names: Vec<String> = match map.get("traceNames") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(n)) => vec![n.clone()],
        Some(Value::Array(list)) if list.iter().all(Value::is_string) => list
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        Some(_) => {
            return Err(HttpError::bad_request(
                "traceNames must be a string, a list of strings or null",
            ))
        }
    };
    if names.len() > MAX_TRACE_NAMES {
        return Err(HttpError::bad_request(format!(
            "traceNames has {} names; the limit is {MAX_TRACE_NAMES}",
            names.len()
        )));
    }
    for n in &names {
        check_name("traceNames entry", n, false, limits)?;
    }
    let event_type = match map.get("eventType") {
        None | Some(Value::Null) => "info".to_string(),
        Some(Value::String(e)) if e.is_empty() => "info".to_string(),
        Some(Value::String(e)) => {
            check_name("eventType", e, false, limits)?;
            e.clone()
        }
        Some(_) => return Err(HttpError::bad_request("eventType must be a string")),
    };
    Ok(TraceRequest {
        partition_id: p.clone(),
        transaction_id: t.clone(),
        consumer_group,
        event_type,
        names,
        data,
        id: String::new(),
        worker_id: config.worker_id.clone(),
    })
}

/// Records the trace: 201 `{success:true, traceId}`, 404 `Message not found` when no such message is
/// retained (the snapshot's 500; the JS SDK swallows either).
pub(crate) async fn record<S: Store, H: Host>(
    engine: &Engine<S, H>,
    mut request: TraceRequest,
    id: String,
) -> Result<HttpResponse, HttpError> {
    request.id = id;
    match engine.record_trace(request).await {
        Ok(trace_id) => Ok(json_response(
            201,
            &json!({"success": true, "traceId": trace_id}),
        )),
        Err(e) => Err(e.into()),
    }
}

//! `POST /api/v1/traces` (wire-contract §1.10, appendix D22): the body, validated into a
//! [`TraceRequest`], and the answer. The reads (`GET /traces/...`) are view routes
//! (`views/traces.rs`).

use super::error::{json_response, HttpError};
use super::wire::{check_id, check_name, opt_group, parse_object};
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
    let consumer_group =
        opt_group(&map, "consumerGroup", "", limits)?.unwrap_or_else(|| QUEUE_MODE_GROUP.into());
    let mut names: Vec<String> = Vec::new();
    match map.get("traceNames") {
        None | Some(Value::Null) => {}
        Some(Value::String(n)) => names.push(n.clone()),
        Some(Value::Array(list)) if list.len() <= MAX_TRACE_NAMES => {
            for v in list {
                names.push(v.as_str().ok_or_else(bad_names)?.to_string());
            }
        }
        Some(_) => return Err(bad_names()),
    }
    for n in &names {
        check_name("traceNames entry", n, false, limits)?;
    }
    let event_type = match map.get("eventType") {
        None | Some(Value::Null) => "info",
        Some(Value::String(e)) if e.is_empty() => "info",
        Some(Value::String(e)) => e.as_str(),
        Some(_) => return Err(HttpError::bad_request("eventType must be a string")),
    };
    check_name("eventType", event_type, false, limits)?;
    Ok(TraceRequest {
        partition_id: p.clone(),
        transaction_id: t.clone(),
        consumer_group,
        event_type: event_type.to_string(),
        names,
        data,
        id: String::new(),
        worker_id: config.worker_id.clone(),
    })
}

fn bad_names() -> HttpError {
    HttpError::bad_request("traceNames must be a string, a list of at most 16 strings, or null")
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

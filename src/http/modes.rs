//! Maintenance mode routes (wire-contract §1.11) and the buffered push answer (§1.2).
//!
//! - `GET /api/v1/system/maintenance` → `{maintenanceMode, popMaintenanceMode, bufferedMessages,
//!   bufferHealthy, bufferStats}`;
//! - `POST /api/v1/system/maintenance {enabled}` → `{maintenanceMode, bufferedMessages, bufferHealthy,
//!   message}` (turning it off drains the buffer before answering);
//! - `GET|POST /api/v1/system/maintenance/pop` (`{enabled}`) → `{popMaintenanceMode, message}`.

use super::error::{json_response, HttpError};
use super::wire;
use super::HttpResponse;
use crate::core::maintenance::{BufferedResult, ModeState};
use crate::engine::{Engine, Host};
use crate::store::Store;
use serde_json::{json, Value};

/// The `enabled` boolean of a maintenance POST body.
fn enabled(body: &[u8]) -> Result<bool, HttpError> {
    let map = wire::parse_object(body)?;
    match map.get("enabled") {
        Some(Value::Bool(on)) => Ok(*on),
        _ => Err(HttpError::bad_request("enabled (boolean) is required")),
    }
}

fn push_state(mode: &ModeState) -> Value {
    json!({
        "maintenanceMode": mode.push_paused,
        "popMaintenanceMode": mode.pop_paused,
        "bufferedMessages": mode.buffered(),
        // The buffer is the broker's own storage: it is healthy whenever the store answers (a failed
        // write is an error answer, never a silent drop).
        "bufferHealthy": true,
        "bufferStats": {
            "pendingMessages": mode.buffered(),
            "firstSequence": mode.first_seq,
            "nextSequence": mode.next_seq,
            "draining": !mode.push_paused && mode.buffered() > 0,
        },
    })
}

/// `GET|POST /api/v1/system/maintenance`.
pub(crate) async fn push_maintenance<S: Store, H: Host>(
    engine: &Engine<S, H>,
    body: Option<&[u8]>,
) -> Result<HttpResponse, HttpError> {
    let Some(body) = body else {
        let mode = engine.read(|b, _| b.mode().clone());
        return Ok(json_response(200, &push_state(&mode)));
    };
    let on = enabled(body)?;
    let left = engine.set_push_maintenance(on).await?;
    let message = if on {
        "Maintenance mode enabled: pushes are buffered until it is turned off".to_string()
    } else if left == 0 {
        "Maintenance mode disabled: the buffered pushes were delivered".to_string()
    } else {
        format!("Maintenance mode disabled: {left} buffered messages are still being delivered")
    };
    let mode = engine.read(|b, _| b.mode().clone());
    Ok(json_response(
        200,
        &json!({
            "maintenanceMode": mode.push_paused,
            "bufferedMessages": mode.buffered(),
            "bufferHealthy": true,
            "message": message,
        }),
    ))
}

/// `GET|POST /api/v1/system/maintenance/pop`.
pub(crate) async fn pop_maintenance<S: Store, H: Host>(
    engine: &Engine<S, H>,
    body: Option<&[u8]>,
) -> Result<HttpResponse, HttpError> {
    if let Some(body) = body {
        engine.set_pop_maintenance(enabled(body)?).await?;
    }
    let on = engine.read(|b, _| b.mode().pop_paused);
    let message = if on {
        "Pop maintenance mode is on: every pop answers empty"
    } else {
        "Pop maintenance mode is off"
    };
    Ok(json_response(
        200,
        &json!({"popMaintenanceMode": on, "message": message}),
    ))
}

/// The 201 answer to a buffered push: one `{index, status:"buffered", queue, partition, transactionId}`
/// per item, in input order.
pub(crate) fn buffered_answer(results: &[BufferedResult]) -> HttpResponse {
    let list: Vec<Value> = results
        .iter()
        .map(|r| {
            json!({
                "index": r.index,
                "status": "buffered",
                "queue": r.queue,
                "queueName": r.queue,
                "partition": r.partition,
                "transactionId": r.transaction_id,
                "transaction_id": r.transaction_id,
            })
        })
        .collect();
    json_response(201, &Value::Array(list))
}

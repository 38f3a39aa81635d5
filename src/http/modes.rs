//! Maintenance mode routes (wire-contract §1.11) and the buffered push answer (§1.2).
//!
//! - `GET /api/v1/system/maintenance` → `{maintenanceMode, popMaintenanceMode, bufferedMessages,
//!   bufferHealthy, bufferStats}`;
//! - `POST /api/v1/system/maintenance {enabled}` → `{maintenanceMode, bufferedMessages, bufferHealthy,
//!   message}` (turning it off drains the buffer before answering);
//! - `GET|POST /api/v1/system/maintenance/pop` (`{enabled}`) → `{popMaintenanceMode, message}`.
//!
//! Every answer carries all of these keys (one shape for the three routes; extra keys are harmless).

use super::error::{json_response, HttpError};
use super::render::SeqOf;
use super::wire;
use super::HttpResponse;
use crate::core::maintenance::{BufferedResult, MAX_BUFFER_BYTES};
use crate::engine::{Engine, Host};
use crate::store::Store;
use serde::Serialize;
use serde_json::Value;

/// The `enabled` boolean of a maintenance POST body.
fn enabled(body: &[u8]) -> Result<bool, HttpError> {
    let map = wire::parse_object(body)?;
    match map.get("enabled") {
        Some(Value::Bool(on)) => Ok(*on),
        _ => Err(HttpError::bad_request("enabled (boolean) is required")),
    }
}

/// The answer of every maintenance route: the keys contract §1.11 lists for each route, all of them
/// in every answer (a superset; clients read the ones their route names).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ModeAnswer {
    maintenance_mode: bool,
    pop_maintenance_mode: bool,
    buffered_messages: u64,
    /// The buffer is the broker's own storage: healthy whenever the store answers (a failed write is
    /// an error answer, never a silent drop).
    buffer_healthy: bool,
    buffer_stats: BufferStats,
    message: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BufferStats {
    pending_messages: u64,
    pending_bytes: u64,
    max_bytes: u64,
}

/// `GET|POST /api/v1/system/maintenance` (`pop` false) and `/system/maintenance/pop` (`pop` true);
/// `body` is the POST's. Turning push maintenance off answers after the buffer drained.
pub(crate) async fn maintenance<S: Store, H: Host>(
    engine: &Engine<S, H>,
    pop: bool,
    body: Option<&[u8]>,
) -> Result<HttpResponse, HttpError> {
    if let Some(body) = body {
        let on = enabled(body)?;
        if let Err(e) = engine.set_maintenance(pop, on).await {
            // Turning push maintenance off commits the switch, then drains: a failure of the drain
            // leaves the switch committed, which the answer must say.
            let mut error = HttpError::from(e);
            if let Ok(mode) = engine.read_current(|b, _| b.mode()).await {
                let now = if pop {
                    mode.pop_paused
                } else {
                    mode.push_paused
                };
                if now == on {
                    error.message = format!(
                        "{}; {} mode is now {}",
                        error.message,
                        if pop {
                            "pop maintenance"
                        } else {
                            "maintenance"
                        },
                        if on { "on" } else { "off" }
                    );
                }
            }
            return Err(error);
        }
    }
    let (mode, buffered, bytes) = engine.maintenance_state();
    let message = match (pop, mode.pop_paused, mode.push_paused) {
        (true, true, _) => "Pop maintenance mode is on: every pop answers empty",
        (true, false, _) => "Pop maintenance mode is off",
        (false, _, true) => "Maintenance mode is on: pushes are buffered until it is turned off",
        (false, _, false) => "Maintenance mode is off: pushes are applied at once",
    };
    Ok(json_response(
        200,
        &ModeAnswer {
            maintenance_mode: mode.push_paused,
            pop_maintenance_mode: mode.pop_paused,
            buffered_messages: buffered,
            buffer_healthy: true,
            buffer_stats: BufferStats {
                pending_messages: buffered,
                pending_bytes: bytes,
                max_bytes: MAX_BUFFER_BYTES,
            },
            message,
        },
    ))
}

/// The 201 answer to a buffered push: one `{index, status:"buffered", queue, partition, transactionId}`
/// per item, in input order.
pub(crate) fn buffered_answer(results: &[BufferedResult]) -> HttpResponse {
    #[derive(Serialize)]
    struct Out<'a> {
        index: usize,
        status: &'static str,
        queue: &'a str,
        #[serde(rename = "queueName")]
        queue_name: &'a str,
        partition: &'a str,
        #[serde(rename = "transactionId")]
        transaction_id_camel: &'a str,
        transaction_id: &'a str,
    }
    fn out(r: &BufferedResult) -> Out<'_> {
        Out {
            index: r.index,
            status: "buffered",
            queue: &r.queue,
            queue_name: &r.queue,
            partition: &r.partition,
            transaction_id_camel: &r.transaction_id,
            transaction_id: &r.transaction_id,
        }
    }
    json_response(201, &SeqOf(results, out))
}

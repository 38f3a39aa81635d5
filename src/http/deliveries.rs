//! `GET /api/v1/deliveries`: the delivery log of queues with `deliveryLog` on (module
//! `crate::core::deliveries`), newest first, filtered by `queue`, `consumerGroup` (`__QUEUE_MODE__`
//! for queue mode), `partition` (name) and `transactionId`, paged by `limit` and `offset`.

use super::error::{json_response, HttpError};
use super::query::Query;
use super::wire::{check_id, check_name};
use super::{HttpConfig, HttpResponse};
use crate::core::api::{DeliveryQuery, DeliveryRecord};
use crate::core::timefmt::iso_millis;
use crate::engine::{Engine, Host};
use crate::store::Store;
use serde_json::{json, Value};

/// Records per page when `limit` is not sent.
pub const DEFAULT_LIMIT: usize = 100;

/// Answers `GET /api/v1/deliveries`.
pub(crate) async fn answer<S: Store, H: Host>(
    engine: &Engine<S, H>,
    config: &HttpConfig,
    query: &Query,
) -> Result<HttpResponse, HttpError> {
    let limits = &config.limits;
    let limit = query
        .uint("limit", 1, limits.max_page as u64)?
        .map_or(DEFAULT_LIMIT, |n| n as usize);
    let offset = query.uint("offset", 0, u32::MAX as u64)?.unwrap_or(0) as usize;
    let text = |key: &str| query.non_empty(key).map(str::to_string);
    let request = DeliveryQuery {
        queue: text("queue"),
        group: text("consumerGroup"),
        partition: text("partition"),
        transaction_id: text("transactionId"),
        limit,
        offset,
    };
    if let Some(q) = &request.queue {
        check_name("Queue name", q, true, limits)?;
    }
    if let Some(g) = &request.group {
        check_name("consumerGroup", g, false, limits)?;
    }
    if let Some(p) = &request.partition {
        check_name("Partition name", p, false, limits)?;
    }
    if let Some(t) = &request.transaction_id {
        check_id("transactionId", t, limits)?;
    }
    // A transaction-id filter reads segments to confirm a fingerprint: a loaded read.
    let page = engine.read_loaded(|b, _| b.deliveries(&request)).await?;
    let records: Vec<Value> = page.records.iter().map(record).collect();
    Ok(json_response(
        200,
        &json!({
            "deliveries": records,
            "total": page.total,
            "pagination": {"limit": limit, "offset": offset},
        }),
    ))
}

fn record(r: &DeliveryRecord) -> Value {
    json!({
        "id": r.seq,
        "queue": r.queue,
        "partition": r.partition,
        "partitionId": r.partition_id.to_string(),
        "consumerGroup": r.group,
        "leaseId": r.lease_id,
        "fromOffset": r.first,
        "toOffset": r.last,
        "deliveryAttempt": r.attempt,
        "outcome": r.outcome.as_str(),
        "offset": r.offset,
        "error": r.error,
        "holdUntil": r.hold_until_ms.map(iso_millis),
        "at": iso_millis(r.at_ms),
    })
}

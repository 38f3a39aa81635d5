//! `GET /api/v1/status/queues/:queue/history?minutes=`: the queue's recent throughput and each
//! group's backlog, bucket by bucket, as the broker measured them (module `crate::core::history`).
//!
//! Answer: `{queue, bucketSeconds, windowSeconds, from, to, measuredSince, groups, groupsNotRecorded,
//! buckets: [{at, pushed, delivered, acked, failed, backlog: {group: n}}]}`. `at` is a bucket's start;
//! the last bucket holds `to` (now) and is still filling. Buckets before `measuredSince` (the broker's
//! first command after it started, or the queue's creation) are left out: nothing was measured then.
//! `measuredSince` is null, with no buckets, when no command ran since the broker started.

use crate::core::history::{BUCKET_MS, KEEP_BUCKETS};
use crate::core::timefmt::iso_millis;
use crate::engine::{Engine, Host};
use crate::http::error::{json_response, HttpError};
use crate::http::query::Query;
use crate::http::wire::check_name;
use crate::http::{HttpConfig, HttpResponse};
use crate::store::Store;
use serde_json::{json, Map, Value};

/// Minutes answered when `minutes` is absent: everything kept.
const MAX_MINUTES: u64 = (KEEP_BUCKETS as u64 * BUCKET_MS as u64) / 60_000;

/// Answers the route; 404 `Queue not found` for an unknown queue, 400 for a bad `minutes`.
pub(crate) fn answer<S: Store, H: Host>(
    engine: &Engine<S, H>,
    config: &HttpConfig,
    queue: &str,
    query: &Query,
) -> Result<HttpResponse, HttpError> {
    check_name("Queue name", queue, true, &config.limits)?;
    let minutes = query
        .uint("minutes", 1, MAX_MINUTES)?
        .unwrap_or(MAX_MINUTES);
    let window_ms = minutes as i64 * 60_000;
    let (history, now) = engine.read(|b, now| (b.queue_history(queue, now, window_ms), now));
    let Some(h) = history else {
        return Err(HttpError::not_found("Queue not found"));
    };
    let buckets: Vec<Value> = h
        .buckets
        .iter()
        .map(|b| {
            let backlog: Map<String, Value> = h
                .groups
                .iter()
                .zip(&b.backlog)
                .map(|(g, n)| (g.clone(), json!(n)))
                .collect();
            json!({
                "at": iso_millis(b.start_ms),
                "pushed": b.traffic.pushed,
                "delivered": b.traffic.delivered,
                "acked": b.traffic.acked,
                "failed": b.traffic.failed,
                "backlog": backlog,
            })
        })
        .collect();
    let from = h.buckets.first().map(|b| iso_millis(b.start_ms));
    Ok(json_response(
        200,
        &json!({
            "queue": queue,
            "bucketSeconds": BUCKET_MS / 1000,
            "windowSeconds": window_ms / 1000,
            "from": from,
            "to": iso_millis(now),
            "measuredSince": h.measured_since_ms.map(iso_millis),
            "groups": h.groups,
            "groupsNotRecorded": h.groups_not_recorded,
            "buckets": buckets,
        }),
    ))
}

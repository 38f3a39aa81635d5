//! The consumer-group views (feature `views`): `GET /api/v1/consumer-groups`, `/consumer-groups/:group`
//! and `/consumer-groups/lagging?minLagSeconds=` (contract §1.9, shapes of Queen's
//! `get_consumer_groups_v4`, `get_consumer_group_details_v1` and `get_lagging_partitions_v1`).
//!
//! Every number comes from memory: cursors, offsets and the segment index's push times (the time lag of
//! a partition is the age of the first message after the cursor). Nothing reads a segment. What the
//! broker does not keep (when a group last acked, how many messages it consumed in all) is `null`
//! (docs/decisions.md, "Consumer-group views").

use crate::core::api::{GroupPartitionView, GroupView};
use crate::core::timefmt::iso_millis;
use serde_json::{json, Value};

/// A group whose oldest pending message is older than this is `Lagging` (Queen's threshold).
pub(crate) const LAGGING_AFTER_S: i64 = 300;

/// `minLagSeconds` when the query does not give one (Queen's route default).
pub(crate) const DEFAULT_MIN_LAG_S: u64 = 3600;

/// Seconds since the oldest pending message of the partition was pushed; `None` when nothing is
/// pending.
pub(crate) fn time_lag_s(p: &GroupPartitionView, now: i64) -> Option<i64> {
    p.oldest_pending_ms.map(|t| (now - t).max(0) / 1000)
}

/// One entry of `GET /consumer-groups`.
pub(crate) fn summary(g: &GroupView, now: i64) -> Value {
    let with_lag = g.partitions.iter().filter(|p| p.lane.backlog > 0).count();
    let total_lag: u64 = g.partitions.iter().map(|p| p.lane.backlog).sum();
    let max_time_lag = g
        .partitions
        .iter()
        .filter_map(|p| time_lag_s(p, now))
        .max()
        .unwrap_or(0);
    let leases = g
        .partitions
        .iter()
        .filter(|p| p.lane.lease_id.is_some())
        .count();
    let claimed = g.partitions.iter().any(|p| p.claimed);
    // Queen: Lagging past 300 s of time lag; Stable when the group consumes; Dead otherwise. A group with
    // nothing pending is Stable (caught up), whether or not it has claimed since its last seek.
    let state = if max_time_lag > LAGGING_AFTER_S {
        "Lagging"
    } else if with_lag == 0 || claimed || leases > 0 {
        "Stable"
    } else {
        "Dead"
    };
    let sub = g.subscription.as_ref();
    json!({
        "name": g.group,
        "topics": [g.queue],
        "queueName": g.queue,
        "members": g.partitions.len(),
        "partitionsWithLag": with_lag,
        "totalLag": total_lag,
        "maxTimeLag": max_time_lag,
        "state": state,
        "activeLeases": leases,
        "subscriptionMode": sub.map(|s| s.mode.clone()),
        "subscriptionTimestamp": sub.and_then(|s| s.start_ms).map(iso_millis),
        "subscriptionCreatedAt": sub.map(|s| iso_millis(s.created_at_ms)),
        "conflation": sub.is_some_and(|s| s.conflation),
    })
}

/// One partition of `GET /consumer-groups/:group`.
fn partition_detail(p: &GroupPartitionView, now: i64) -> Value {
    json!({
        "partition": p.partition,
        "partitionId": p.partition_id,
        "workerId": p.lane.lease_id,
        "leaseActive": p.lane.lease_id.is_some(),
        "leaseExpiresAt": p.lane.lease_expires_at_ms.map(iso_millis),
        "offsetLag": p.lane.backlog,
        "timeLagSeconds": time_lag_s(p, now).unwrap_or(0),
        "committedOffset": p.lane.committed,
        "retryCount": p.lane.retry_count,
        "totalConsumed": Value::Null,
        "lastConsumedAt": Value::Null,
    })
}

/// `GET /consumer-groups/:group`: `{ <queue>: {partitions: [...]} }`, `{}` for a group on no queue (as
/// Queen answers).
pub(crate) fn detail(groups: &[GroupView], now: i64) -> Value {
    let mut out = serde_json::Map::new();
    for g in groups {
        let partitions: Vec<Value> = g
            .partitions
            .iter()
            .map(|p| partition_detail(p, now))
            .collect();
        out.insert(g.queue.clone(), json!({ "partitions": partitions }));
    }
    Value::Object(out)
}

/// `GET /consumer-groups/lagging`: the (group, partition) pairs whose time lag is over `min_lag_s`,
/// largest lag first (Queen's snake_case keys).
pub(crate) fn lagging(groups: &[GroupView], min_lag_s: u64, now: i64) -> Value {
    let mut rows: Vec<(i64, Value)> = Vec::new();
    for g in groups {
        for p in &g.partitions {
            let Some(lag) = time_lag_s(p, now) else {
                continue;
            };
            if lag <= min_lag_s as i64 {
                continue;
            }
            rows.push((
                lag,
                json!({
                    "consumer_group": g.group,
                    "queue_name": g.queue,
                    "partition_name": p.partition,
                    "partition_id": p.partition_id,
                    "worker_id": p.lane.lease_id,
                    "offset_lag": p.lane.backlog,
                    "time_lag_seconds": lag,
                    "lag_hours": (lag as f64 / 36.0).round() / 100.0,
                    "oldest_unconsumed_at": p.oldest_pending_ms.map(iso_millis),
                    "last_consumed_at": Value::Null,
                }),
            ));
        }
    }
    // Stable: ties keep the (group, queue, partition) order.
    crate::core::sort::sort_by_key(&mut rows, |(lag, _)| std::cmp::Reverse(*lag));
    Value::Array(rows.into_iter().map(|(_, v)| v).collect())
}

//! The read routes Queen's clients call besides the listings (feature `views`):
//! `GET /resources/queues/:queue/depth`, `/resources/partitions`, and the `/status/*` views
//! (`/status/queues`, `/status/queues/:queue`, `/status/queues/:queue/messages`, `/status/analytics`,
//! `/status/buffers`), in the shapes of Queen's `get_status_queues_v2`, `get_queue_detail_v2`,
//! `get_queue_messages_v1`, `get_analytics_v1` and the 2.6 Python client's `get_queue_depth`.
//!
//! Counts come from memory (offsets, cursors, the segment index); only the message listing reads
//! segments, one page of them, for the ids it shows. A number the broker does not keep is `null`
//! (docs/decisions.md, "Status and depth views").

use super::render::{self, Counts};
use crate::core::api::{GroupView, QueueView, QUEUE_MODE_GROUP};
use crate::core::timefmt::{iso_millis, parse_iso};
use crate::engine::{Engine, Host};
use crate::http::error::{json_response, HttpError};
use crate::http::query::{clip, Query};
use crate::http::wire::check_name;
use crate::http::{HttpConfig, HttpResponse};
use crate::store::Store;
use serde_json::{json, Value};

/// Default page of `/status/queues` and `/resources/partitions` (Queen's).
const DEFAULT_LIST_LIMIT: u64 = 100;
/// Default page of `/status/queues/:queue/messages` (Queen's).
const DEFAULT_MESSAGES_LIMIT: u64 = 50;
/// Most buckets one `/status/analytics` answer holds.
const MAX_BUCKETS: i64 = 10_000;

fn page(query: &Query, config: &HttpConfig, default: u64) -> Result<(usize, usize), HttpError> {
    let limit = query
        .uint("limit", 0, config.limits.max_page as u64)?
        .unwrap_or(default) as usize;
    let offset = query.uint("offset", 0, u32::MAX as u64)?.unwrap_or(0) as usize;
    Ok((limit, offset))
}

fn counts_messages(c: &Counts) -> Value {
    json!({
        "total": c.total,
        "pending": c.pending,
        "processing": c.processing,
        "completed": c.completed,
        "failed": c.failed,
        "deadLetter": c.dead_letter,
    })
}

/// `GET /resources/queues/:queue/depth?group=`: pending messages per partition. Without a group, a
/// partition's pending is that of its most-behind group (every retained message when no group reads
/// it); with one, that group's own backlog. 404 for an unknown queue, or a group that has neither
/// claimed on the queue nor subscribed to it.
pub(crate) fn depth<S: Store, H: Host>(
    engine: &Engine<S, H>,
    config: &HttpConfig,
    queue: &str,
    query: &Query,
) -> Result<HttpResponse, HttpError> {
    check_name("Queue name", queue, true, &config.limits)?;
    let group = query.non_empty("group");
    if let Some(g) = group {
        check_name("group", g, false, &config.limits)?;
    }
    let answer = engine.read(|b, now| -> Result<Value, HttpError> {
        let q = b
            .queue_view(now, queue)
            .ok_or_else(|| HttpError::not_found("Queue not found"))?;
        let (rows, conflation): (Vec<(String, u64)>, bool) = match group {
            Some(g) => {
                if !b.group_is_on_queue(g, queue) {
                    return Err(HttpError::not_found(format!(
                        "Consumer group '{}' has not consumed from or subscribed to queue '{}'",
                        clip(g),
                        clip(queue)
                    )));
                }
                let view: GroupView = b
                    .group_view(g, queue, now)
                    .ok_or_else(|| HttpError::not_found("Queue not found"))?;
                let conflation = view.subscription.as_ref().is_some_and(|s| s.conflation);
                (
                    view.partitions
                        .iter()
                        .map(|p| (p.partition.clone(), p.lane.backlog))
                        .collect(),
                    conflation,
                )
            }
            None => (
                q.partitions
                    .iter()
                    .map(|p| {
                        let worst = p.lanes.iter().map(|l| l.backlog).max();
                        (p.name.clone(), worst.unwrap_or(p.messages))
                    })
                    .collect(),
                false,
            ),
        };
        let pending: u64 = rows.iter().map(|(_, n)| n).sum();
        let partitions_pending = rows.iter().filter(|(_, n)| *n > 0).count() as u64;
        Ok(json!({
            "queue": q.name,
            "group": group,
            "pending": pending,
            "partitionsPending": partitions_pending,
            "conflation": conflation,
            "effectivePending": if conflation { partitions_pending } else { pending },
            "partitions": rows
                .iter()
                .map(|(name, n)| json!({"partition": name, "pending": n}))
                .collect::<Vec<_>>(),
        }))
    })?;
    Ok(json_response(200, &answer))
}

/// `GET /resources/partitions?queue=&namespace=&task=&limit=&offset=`: every partition with its counts
/// (as the queue-mode group sees them, like `/resources/queues/:queue`), by queue then partition name.
pub(crate) fn partitions<S: Store, H: Host>(
    engine: &Engine<S, H>,
    config: &HttpConfig,
    query: &Query,
) -> Result<HttpResponse, HttpError> {
    let (limit, offset) = page(query, config, DEFAULT_LIST_LIMIT)?;
    let queue = query.non_empty("queue");
    let namespace = query.non_empty("namespace");
    let task = query.non_empty("task");
    let answer = engine.read(|b, now| {
        let mut rows = Vec::new();
        for q in b.list_queues(now) {
            if queue.is_some_and(|n| q.name != n)
                || namespace.is_some_and(|n| q.namespace != n)
                || task.is_some_and(|t| q.task != t)
            {
                continue;
            }
            for p in &q.partitions {
                let c = render::partition_counts(p, now);
                rows.push(json!({
                    "id": p.id,
                    "name": p.name,
                    "queue": q.name,
                    "namespace": q.namespace,
                    "task": q.task,
                    "createdAt": iso_millis(p.created_at_ms),
                    "messages": counts_messages(&c),
                    "oldestMessage": p.oldest_message_ms.map(iso_millis),
                    "newestMessage": p.newest_message_ms.map(iso_millis),
                    "nextOffset": p.next_offset,
                    "firstRetainedOffset": p.first_retained_offset,
                    "consumerGroups": p.lanes.len(),
                    "leasesActive": p.lanes.iter().filter(|l| l.lease_id.is_some()).count(),
                }));
            }
        }
        let total = rows.len();
        let rows: Vec<Value> = rows.into_iter().skip(offset).take(limit).collect();
        json!({
            "partitions": rows,
            "pagination": {"limit": limit, "offset": offset, "total": total},
        })
    });
    Ok(json_response(200, &answer))
}

/// `GET /status/queues?namespace=&task=&limit=&offset=`: queues newest first.
pub(crate) fn status_queues<S: Store, H: Host>(
    engine: &Engine<S, H>,
    config: &HttpConfig,
    query: &Query,
) -> Result<HttpResponse, HttpError> {
    let (limit, offset) = page(query, config, DEFAULT_LIST_LIMIT)?;
    let namespace = query.non_empty("namespace");
    let task = query.non_empty("task");
    let answer = engine.read(|b, now| {
        let mut queues: Vec<QueueView> = b
            .list_queues(now)
            .into_iter()
            .filter(|q| namespace.is_none_or(|n| q.namespace == n))
            .filter(|q| task.is_none_or(|t| q.task == t))
            .collect();
        crate::core::sort::sort_by(&mut queues, |a, b| {
            b.created_at_ms
                .cmp(&a.created_at_ms)
                .then_with(|| a.name.cmp(&b.name))
        });
        let list: Vec<Value> = queues
            .iter()
            .skip(offset)
            .take(limit)
            .map(|q| {
                let c = render::queue_counts(q, now);
                json!({
                    "id": q.id,
                    "name": q.name,
                    "namespace": q.namespace,
                    "task": q.task,
                    "createdAt": iso_millis(q.created_at_ms),
                    "partitions": q.partitions.len(),
                    "messages": {"total": c.total, "pending": c.pending, "processing": c.processing},
                })
            })
            .collect();
        json!({ "queues": list, "pagination": {"limit": limit, "offset": offset} })
    });
    Ok(json_response(200, &answer))
}

/// `GET /status/queues/:queue`: the queue, its configuration, its partitions with counts, and totals;
/// 404 `Queue not found`.
pub(crate) fn status_queue<S: Store, H: Host>(
    engine: &Engine<S, H>,
    config: &HttpConfig,
    queue: &str,
) -> Result<HttpResponse, HttpError> {
    check_name("Queue name", queue, true, &config.limits)?;
    let answer = engine.read(|b, now| {
        let q = b.queue_view(now, queue)?;
        let o = &q.options;
        let partitions: Vec<Value> = q
            .partitions
            .iter()
            .map(|p| {
                let c = counts_messages(&render::partition_counts(p, now));
                json!({
                    "id": p.id,
                    "name": p.name,
                    "createdAt": iso_millis(p.created_at_ms),
                    "messages": c,
                    "stats": c,
                    // Not kept: how many messages the queue-mode group consumed in all, in how many
                    // batches, and when it last did (docs/decisions.md).
                    "cursor": {"totalConsumed": Value::Null, "batchesConsumed": Value::Null},
                    "lastActivity": Value::Null,
                    "oldestMessage": p.oldest_message_ms.map(iso_millis),
                    "newestMessage": p.newest_message_ms.map(iso_millis),
                })
            })
            .collect();
        let t = render::queue_counts(&q, now);
        let mut totals = counts_messages(&t);
        totals["messages"] = counts_messages(&t);
        Some(json!({
            "queue": {
                "id": q.id,
                "name": q.name,
                "namespace": q.namespace,
                "task": q.task,
                "priority": o.priority,
                "createdAt": iso_millis(q.created_at_ms),
                "config": {
                    "leaseTime": o.lease_time_s,
                    "retryLimit": o.retry_limit,
                    "retryDelay": o.retry_delay_ms,
                    "ttl": o.ttl_s,
                    "maxQueueSize": o.max_size,
                    "deadLetterQueue": o.dead_letter_queue,
                },
            },
            "partitions": partitions,
            "totals": totals,
        }))
    });
    match answer {
        Some(v) => Ok(json_response(200, &v)),
        None => Err(HttpError::not_found("Queue not found")),
    }
}

/// `GET /status/queues/:queue/messages?limit=&offset=`: the queue's retained messages newest first,
/// without payloads, with their status for the queue-mode group (`dead_letter` when any group filed
/// one). An unknown queue answers `[]`, as Queen does.
pub(crate) async fn status_queue_messages<S: Store, H: Host>(
    engine: &Engine<S, H>,
    config: &HttpConfig,
    queue: &str,
    query: &Query,
) -> Result<HttpResponse, HttpError> {
    check_name("Queue name", queue, true, &config.limits)?;
    let (limit, offset) = page(query, config, DEFAULT_MESSAGES_LIMIT)?;
    let rows = engine
        .read_loaded(|b, now| {
            let Some(picked) = b.newest_offsets(queue, offset, limit) else {
                return Vec::new();
            };
            let dead = b.dead_lettered_offsets(queue);
            let groups = b.group_view(QUEUE_MODE_GROUP, queue, now);
            picked
                .into_iter()
                .filter_map(|(pid, off)| {
                    let m = b.message_at(pid, off)?;
                    let lane = groups.as_ref().and_then(|g| {
                        g.partitions
                            .iter()
                            .find(|p| p.partition_id == m.partition_id)
                            .map(|p| &p.lane)
                    });
                    let status = if dead.contains(&(pid, off)) {
                        "dead_letter"
                    } else if lane.is_some_and(|l| off as i64 <= l.committed) {
                        "completed"
                    } else if lane.is_some_and(|l| {
                        l.lease_id.is_some() && l.batch_end.is_some_and(|e| off <= e)
                    }) {
                        "processing"
                    } else {
                        "pending"
                    };
                    Some(json!({
                        "id": m.id,
                        "transactionId": m.transaction_id,
                        "partitionId": m.partition_id,
                        "queuePath": format!("{}/{}", m.queue, m.partition),
                        "queue": m.queue,
                        "partition": m.partition,
                        "offset": m.offset,
                        "status": status,
                        "createdAt": iso_millis(m.created_at_ms),
                    }))
                })
                .collect::<Vec<_>>()
        })
        .await?;
    Ok(json_response(200, &Value::Array(rows)))
}

/// `GET /status/analytics?from=&to=&interval=minute|hour|day&queue=&namespace=&task=`: messages pushed
/// per bucket (default: hourly over the last 24 h), counted from the retained messages' push times.
pub(crate) fn analytics<S: Store, H: Host>(
    engine: &Engine<S, H>,
    query: &Query,
) -> Result<HttpResponse, HttpError> {
    let interval = query.non_empty("interval").unwrap_or("hour");
    let bucket_ms: i64 = match interval {
        "minute" => 60_000,
        "hour" => 3_600_000,
        "day" => 86_400_000,
        other => {
            return Err(HttpError::bad_request(format!(
                "interval must be one of minute, hour, day; got '{}'",
                clip(other)
            )))
        }
    };
    let instant = |key: &str| -> Result<Option<i64>, HttpError> {
        match query.non_empty(key) {
            None => Ok(None),
            Some(raw) => parse_iso(raw).map(Some).ok_or_else(|| {
                HttpError::bad_request(format!(
                    "{key} must be an ISO-8601 timestamp, got '{}'",
                    clip(raw)
                ))
            }),
        }
    };
    let (from, to) = (instant("from")?, instant("to")?);
    let queue = query.non_empty("queue");
    let namespace = query.non_empty("namespace");
    let task = query.non_empty("task");
    let answer = engine.read(|b, now| -> Result<Value, HttpError> {
        let to = to.unwrap_or(now);
        let from = from.unwrap_or(to - 86_400_000);
        if from > to {
            return Err(HttpError::bad_request("from must not be after to"));
        }
        // Buckets start on whole intervals (UTC), as Postgres' date_trunc does.
        let start = from.div_euclid(bucket_ms) * bucket_ms;
        if (to - start) / bucket_ms + 1 > MAX_BUCKETS {
            return Err(HttpError::bad_request(format!(
                "from..to spans more than {MAX_BUCKETS} {interval} buckets"
            )));
        }
        let counts = b.pushed_per_bucket(start, (from, to), bucket_ms, |q| {
            queue.is_none_or(|n| q.name == n)
                && namespace.is_none_or(|n| q.namespace == n)
                && task.is_none_or(|t| q.task == t)
        });
        let points: Vec<Value> = counts
            .iter()
            .enumerate()
            .map(|(i, n)| {
                json!({"timestamp": iso_millis(start + i as i64 * bucket_ms), "messages": n})
            })
            .collect();
        Ok(json!({
            "dataPoints": points,
            "interval": interval,
            "from": iso_millis(from),
            "to": iso_millis(to),
        }))
    })?;
    Ok(json_response(200, &answer))
}

/// `GET /status/buffers`: `pending` is the messages maintenance mode's push buffer holds (queen-edge
/// has no other buffer: a push answers after its commit); nothing fails there (a refused write is an
/// error answer). `dbHealthy` probes the store as `/health` does.
pub(crate) async fn buffers<S: Store, H: Host>(
    engine: &Engine<S, H>,
    config: &HttpConfig,
) -> Result<HttpResponse, HttpError> {
    let healthy = engine
        .store()
        .scan(crate::http::handlers::HEALTH_PROBE_PREFIX)
        .await
        .is_ok();
    Ok(json_response(
        200,
        &json!({
            "pending": engine.read(|b, _| b.maintenance().buffered()),
            "failed": 0,
            "dbHealthy": healthy,
            "worker": config.worker_id,
        }),
    ))
}

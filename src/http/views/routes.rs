//! The view routes' answers (feature `views`).

use super::groups;
use super::prometheus;
use super::render;
use super::status as status_views;
use super::traces;
use crate::core::timefmt::iso_millis;
use crate::engine::{Engine, Host};
use crate::http::crypto;
use crate::http::error::{json_response, HttpError};
use crate::http::query::{clip, Query};
use crate::http::router::Route;
use crate::http::wire::{check_id, check_name};
use crate::http::{HttpConfig, HttpResponse};
use crate::store::Store;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Answers one view route; any other route is a bug in the caller.
pub(in crate::http) async fn answer<S: Store, H: Host>(
    engine: &Engine<S, H>,
    config: &HttpConfig,
    route: Route,
    query: &Query,
) -> Result<HttpResponse, HttpError> {
    let limits = &config.limits;
    match route {
        Route::ListQueues => {
            let namespace = query.non_empty("namespace");
            let task = query.non_empty("task");
            let queues = engine.read(|b, now| {
                b.list_queues(now)
                    .iter()
                    .filter(|q| namespace.is_none_or(|n| q.namespace == n))
                    .filter(|q| task.is_none_or(|t| q.task == t))
                    .map(|q| render::queue_summary(q, now))
                    .collect::<Vec<_>>()
            });
            Ok(json_response(200, &json!({ "queues": queues })))
        }
        Route::GetQueue { queue } => {
            check_name("Queue name", &queue, true, limits)?;
            let view = engine.read(|b, now| {
                b.queue_view(now, &queue)
                    .map(|q| render::queue_detail(&q, now))
            });
            match view {
                Some(v) => Ok(json_response(200, &v)),
                None => Err(HttpError::not_found("Queue not found")),
            }
        }
        Route::Overview => Ok(json_response(200, &overview(engine))),
        Route::Namespaces => Ok(json_response(200, &labels(engine, true))),
        Route::Tasks => Ok(json_response(200, &labels(engine, false))),
        Route::ListMessages => list_messages(engine, config, query).await,
        Route::GetMessage {
            partition_id,
            transaction_id,
        } => {
            check_id("partitionId", &partition_id, limits)?;
            check_id("transactionId", &transaction_id, limits)?;
            let found = engine
                .read_loaded(|b, now| {
                    b.message(&partition_id, &transaction_id).map(|m| {
                        let q = b.queue_view(now, &m.queue);
                        render::message(m, q.as_ref(), now)
                    })
                })
                .await?;
            match found {
                Some(mut v) => {
                    open_rendered(config, std::slice::from_mut(&mut v)).await;
                    Ok(json_response(200, &v))
                }
                None => Err(HttpError::not_found("Message not found")),
            }
        }
        Route::Metrics => {
            let (stats, now) = engine.read(|b, now| (b.stats(now), now));
            Ok(json_response(
                200,
                &json!({
                    "uptime": uptime_s(config, now),
                    "requests": {"total": 0, "rate": 0},
                    "messages": {"total": stats.pushed, "rate": 0},
                    "database": {"poolSize": 1, "idleConnections": 1, "waitingRequests": 0},
                    "memory": {"rss": 0, "heapTotal": 0, "heapUsed": 0, "external": 0, "arrayBuffers": 0},
                    "cpu": {"user": 0, "system": 0},
                    "broker": {
                        "pushed": stats.pushed,
                        "popped": stats.popped,
                        "acked": stats.acked,
                        "queues": stats.queues,
                        "partitions": stats.partitions,
                        "messages": stats.messages,
                        "liveLeases": stats.live_leases,
                        "dlqDepth": stats.dlq_depth,
                    },
                }),
            ))
        }
        Route::Prometheus => {
            let (stats, now) = engine.read(|b, now| (b.stats(now), now));
            Ok(HttpResponse {
                status: 200,
                headers: vec![(
                    "Content-Type".to_string(),
                    prometheus::CONTENT_TYPE.to_string(),
                )],
                body: prometheus::render(&stats, &engine.counters(), uptime_s(config, now))
                    .into_bytes(),
            })
        }
        Route::Status => Ok(json_response(200, &status(engine, config))),
        Route::ListGroups => {
            let list = engine.read(|b, now| {
                b.consumer_groups(now)
                    .iter()
                    .map(|g| groups::summary(g, now))
                    .collect::<Vec<_>>()
            });
            Ok(json_response(200, &Value::Array(list)))
        }
        Route::GetGroup { group } => {
            check_name("Consumer group", &group, false, limits)?;
            let detail = engine.read(|b, now| {
                let mine: Vec<_> = b
                    .consumer_groups(now)
                    .into_iter()
                    .filter(|g| g.group == group)
                    .collect();
                groups::detail(&mine, now)
            });
            Ok(json_response(200, &detail))
        }
        Route::LaggingGroups => {
            let min_lag = query
                .uint("minLagSeconds", 0, i64::MAX as u64)?
                .unwrap_or(groups::DEFAULT_MIN_LAG_S);
            let rows = engine.read(|b, now| groups::lagging(&b.consumer_groups(now), min_lag, now));
            Ok(json_response(200, &rows))
        }
        Route::QueueDepth { queue } => status_views::depth(engine, config, &queue, query),
        Route::ListPartitions => status_views::partitions(engine, config, query),
        Route::StatusQueues => status_views::status_queues(engine, config, query),
        Route::StatusQueue { queue } => status_views::status_queue(engine, config, &queue),
        Route::StatusQueueMessages { queue } => {
            status_views::status_queue_messages(engine, config, &queue, query).await
        }
        Route::StatusAnalytics => status_views::analytics(engine, query),
        Route::StatusBuffers => status_views::buffers(engine, config).await,
        Route::MessageTraces {
            partition_id,
            transaction_id,
        } => traces::of_message(engine, config, &partition_id, &transaction_id),
        Route::TracesByName { name } => traces::by_name(engine, config, &name, query),
        Route::TraceNames => traces::names(engine, config, query),
        other => unreachable!("not a view route: {other:?}"),
    }
}

fn uptime_s(config: &HttpConfig, now: i64) -> i64 {
    if config.started_at_ms > 0 {
        (now - config.started_at_ms).max(0) / 1000
    } else {
        0
    }
}

/// `GET /api/v1/messages`: messages of the filtered queues/partitions, oldest first per partition.
async fn list_messages<S: Store, H: Host>(
    engine: &Engine<S, H>,
    config: &HttpConfig,
    query: &Query,
) -> Result<HttpResponse, HttpError> {
    let limits = &config.limits;
    let limit = query
        .uint("limit", 0, limits.max_page as u64)?
        .unwrap_or(200) as usize;
    let offset = query.uint("offset", 0, u32::MAX as u64)?.unwrap_or(0) as usize;
    let queue = query.non_empty("queue");
    let partition = query.non_empty("partition");
    let namespace = query
        .non_empty("ns")
        .or_else(|| query.non_empty("namespace"));
    let task = query.non_empty("task");
    let status = query.non_empty("status");
    if let Some(s) = status {
        if !["pending", "processing", "completed", "dead_letter"].contains(&s) {
            return Err(HttpError::bad_request(format!(
                "status must be one of pending, processing, completed, dead_letter; got '{}'",
                clip(s)
            )));
        }
    }
    let want = offset.saturating_add(limit);
    let messages = engine
        .read_loaded(|b, now| -> Result<Vec<render::MessageOut>, HttpError> {
            let mut out = Vec::new();
            for q in b.list_queues(now) {
                if queue.is_some_and(|n| q.name != n)
                    || namespace.is_some_and(|n| q.namespace != n)
                    || task.is_some_and(|t| q.task != t)
                {
                    continue;
                }
                for p in &q.partitions {
                    if partition.is_some_and(|n| p.name != n) {
                        continue;
                    }
                    let views = b
                        .messages(&q.name, &p.name, p.first_retained_offset, want.max(1))
                        .map_err(HttpError::from)?;
                    for m in views {
                        let v = render::message(m, Some(&q), now);
                        if status.is_none_or(|s| v.status == s) {
                            out.push(v);
                        }
                    }
                    if out.len() >= want {
                        break;
                    }
                }
                if out.len() >= want {
                    break;
                }
            }
            Ok(out.into_iter().skip(offset).take(limit).collect::<Vec<_>>())
        })
        .await??;
    let mut messages = messages;
    open_rendered(config, &mut messages).await;
    #[derive(serde::Serialize)]
    struct Listing {
        messages: Vec<render::MessageOut>,
        mode: Value,
    }
    Ok(json_response(
        200,
        &Listing {
            messages,
            mode: json!({"hasQueueMode": true, "busGroupsCount": 0, "type": "queue"}),
        },
    ))
}

fn overview<S: Store, H: Host>(engine: &Engine<S, H>) -> Value {
    engine.read(|b, now| {
        let queues = b.list_queues(now);
        let stats = b.stats(now);
        let totals = queues.iter().map(|q| render::queue_counts(q, now)).fold(
            (0u64, 0u64, 0u64, 0u64),
            |a, c| {
                (
                    a.0 + c.total,
                    a.1 + c.pending,
                    a.2 + c.processing,
                    a.3 + c.completed,
                )
            },
        );
        let namespaces: std::collections::BTreeSet<String> =
            queues.iter().map(|q| q.namespace.clone()).collect();
        let tasks: std::collections::BTreeSet<String> =
            queues.iter().map(|q| q.task.clone()).collect();
        json!({
            "queues": queues.len(),
            "partitions": queues.iter().map(|q| q.partitions.len()).sum::<usize>(),
            "namespaces": namespaces.len(),
            "tasks": tasks.len(),
            "messages": {
                "total": totals.0,
                "pending": totals.1,
                "processing": totals.2,
                "completed": totals.3,
                "failed": 0,
                "deadLetter": stats.dlq_depth,
            },
            "lag": {},
            "throughput": {},
            "statsAge": 0,
        })
    })
}

/// `/resources/namespaces` (`by_namespace`) or `/resources/tasks`.
fn labels<S: Store, H: Host>(engine: &Engine<S, H>, by_namespace: bool) -> Value {
    engine.read(|b, now| {
        let mut groups: BTreeMap<String, Box<(u64, u64, u64, u64)>> = BTreeMap::new();
        for q in b.list_queues(now) {
            let key = if by_namespace { &q.namespace } else { &q.task };
            let c = render::queue_counts(&q, now);
            let e = groups.entry(key.clone()).or_default();
            e.0 += 1;
            e.1 += q.partitions.len() as u64;
            e.2 += c.total;
            e.3 += c.pending;
        }
        let field = if by_namespace { "namespace" } else { "task" };
        let list: Vec<Value> = groups
            .into_iter()
            .map(|(name, counts)| {
                let (queues, partitions, total, pending) = *counts;
                json!({
                    field: name,
                    "queues": queues,
                    "partitions": partitions,
                    "messages": {"total": total, "pending": pending},
                })
            })
            .collect();
        if by_namespace {
            json!({ "namespaces": list })
        } else {
            json!({ "tasks": list })
        }
    })
}

/// `GET /api/v1/status`: a summary from the live counters (the broker keeps no time series).
fn status<S: Store, H: Host>(engine: &Engine<S, H>, config: &HttpConfig) -> Value {
    engine.read(|b, now| {
        let stats = b.stats(now);
        let queues = b.list_queues(now);
        let c = queues.iter().map(|q| render::queue_counts(q, now)).fold(
            (0u64, 0u64, 0u64),
            |a, c| (a.0 + c.pending, a.1 + c.processing, a.2 + c.completed),
        );
        json!({
            "timeRange": {"from": iso_millis(now - 3_600_000), "to": iso_millis(now)},
            "bucketMinutes": 1,
            "pointCount": 0,
            "throughput": [],
            "queues": {"total": stats.queues, "partitions": stats.partitions},
            "messages": {
                "total": stats.messages,
                "pending": c.0,
                "processing": c.1,
                "completed": c.2,
                "pushed": stats.pushed,
                "popped": stats.popped,
                "acked": stats.acked,
            },
            "leases": {"active": stats.live_leases},
            "deadLetterQueue": {
                "total": stats.dlq_depth,
                "byQueue": stats.dlq_depth_by_queue.iter()
                    .map(|(q, n)| json!({"queue": q, "count": n}))
                    .collect::<Vec<_>>(),
            },
            "workers": [{"workerId": config.worker_id, "status": "active", "uptime": uptime_s(config, now)}],
            "errors": {},
            "statsAge": 0,
            "storage": storage_counters(engine),
        })
    })
}

/// Stored bytes against the quota, the segment cache, and the store's counters since the broker opened
/// (rows are what Durable Objects bill).
fn storage_counters<S: Store, H: Host>(engine: &Engine<S, H>) -> Value {
    let c = engine.counters();
    let ((stored, quota), (cached, segments, budget)) =
        engine.read(|b, _| (b.storage_usage(), b.cache_usage()));
    json!({
        "storedBytes": stored,
        "maxStoredBytes": quota,
        "cache": {"bytes": cached, "segments": segments, "budgetBytes": budget},
        "commits": c.commits,
        "rowsWritten": c.rows_written,
        "bytesWritten": c.bytes_written,
        "reloads": c.reloads,
        "segmentsRead": c.segments_read,
        "reruns": c.reruns,
    })
}

/// Decrypts the `payload` of rendered messages (`render::message`) and mirrors it into `data`.
async fn open_rendered(config: &HttpConfig, messages: &mut [render::MessageOut]) {
    if config.encryption.is_none() {
        return;
    }
    crypto::open_payloads(
        config,
        messages.iter_mut().map(|m| &mut m.payload).collect(),
    )
    .await;
    for m in messages.iter_mut() {
        m.data = m.payload.clone();
    }
}

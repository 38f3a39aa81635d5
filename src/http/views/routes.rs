//! The view routes' answers (feature `views`).

use super::groups;
use super::history;
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
                        let at = (partition_id.parse().unwrap_or(u64::MAX), m.offset);
                        let dead = b.dead_lettered_offsets(&m.queue).contains(&at);
                        let mut out = render::message(m, q.as_ref(), now);
                        if dead {
                            out.status = "dead_letter";
                        }
                        out.trace_count = b
                            .trace_target(&partition_id, &transaction_id)
                            .and_then(|at| b.trace_counts().get(&at).copied())
                            .unwrap_or(0);
                        out
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
            let (stats, totals, rates, now) =
                engine.read(|b, now| (b.stats(now), b.meters_totals(), rates(b, now), now));
            let c = engine.counters();
            // Queen's keys; what a broker in a Worker or a page cannot measure (process memory and
            // CPU, a connection pool) is null, never a made-up figure (docs/decisions.md).
            Ok(json_response(
                200,
                &json!({
                    "uptime": uptime_s(config, now),
                    "requests": {"total": Value::Null, "rate": Value::Null},
                    "messages": {"total": totals.pushed, "rate": rates["pushPerSecond"]},
                    "database": {"poolSize": Value::Null, "idleConnections": Value::Null,
                                 "waitingRequests": Value::Null, "commits": c.commits,
                                 "rowsWritten": c.rows_written},
                    "memory": memory(),
                    "cpu": {"user": Value::Null, "system": Value::Null},
                    "throughput": rates,
                    "broker": {
                        "pushed": stats.pushed,
                        "popped": stats.popped,
                        "acked": stats.acked,
                        "failed": totals.failed,
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
        Route::QueueHistory { queue } => history::answer(engine, config, &queue, query),
        Route::StatusAnalytics => status_views::analytics(engine, query),
        Route::StatusBuffers => status_views::buffers(engine, config).await,
        Route::MessageTraces {
            partition_id,
            transaction_id,
        } => traces::of_message(engine, config, &partition_id, &transaction_id).await,
        Route::TracesByName { name } => traces::by_name(engine, config, &name, query).await,
        Route::TraceNames => traces::names(engine, config, query).await,
        other => unreachable!("not a view route: {other:?}"),
    }
}

/// Minutes the throughput rates average over.
const RATE_WINDOW_MINUTES: i64 = 5;

/// Messages per second pushed, popped, acked and failed over the last [`RATE_WINDOW_MINUTES`] (or
/// since the broker opened, when that is shorter), measured by the core's per-minute counts.
fn rates(b: &crate::core::Broker, now: i64) -> Value {
    let from = now - RATE_WINDOW_MINUTES * 60_000;
    let minutes = b.minutes_since(from);
    let sum = |f: fn(&crate::core::meters::Totals) -> u64| -> u64 {
        minutes.iter().map(|m| f(&m.counts)).sum()
    };
    let seconds = (RATE_WINDOW_MINUTES * 60) as f64;
    let rate = |n: u64| ((n as f64 / seconds) * 1000.0).round() / 1000.0;
    json!({
        "windowSeconds": RATE_WINDOW_MINUTES * 60,
        "pushed": sum(|t| t.pushed),
        "popped": sum(|t| t.popped),
        "acked": sum(|t| t.acked),
        "failed": sum(|t| t.failed),
        "pushPerSecond": rate(sum(|t| t.pushed)),
        "popPerSecond": rate(sum(|t| t.popped)),
        "ackPerSecond": rate(sum(|t| t.acked)),
        "failedPerSecond": rate(sum(|t| t.failed)),
    })
}

/// The broker's own memory: the wasm linear memory where it runs in wasm, else null.
fn memory() -> Value {
    #[cfg(target_arch = "wasm32")]
    let heap: Value = json!(core::arch::wasm32::memory_size(0) as u64 * 65_536);
    #[cfg(not(target_arch = "wasm32"))]
    let heap = Value::Null;
    json!({"rss": Value::Null, "heapTotal": heap, "heapUsed": Value::Null,
           "external": Value::Null, "arrayBuffers": Value::Null})
}

/// Lag over every (group, queue): messages after the cursors, and the age of the oldest of them.
fn lag(b: &crate::core::Broker, now: i64) -> Value {
    let groups = b.consumer_groups(now);
    let mut pending = 0u64;
    let mut oldest: Option<i64> = None;
    for g in &groups {
        for p in &g.partitions {
            pending += p.lane.backlog;
            if let Some(t) = p.oldest_pending_ms {
                oldest = Some(oldest.map_or(t, |o| o.min(t)));
            }
        }
    }
    json!({
        "consumerGroups": groups.len(),
        "pendingMessages": pending,
        "maxTimeLagSeconds": oldest.map(|t| (now - t).max(0) / 1000),
        "oldestPendingAt": oldest.map(iso_millis),
    })
}

fn uptime_s(config: &HttpConfig, now: i64) -> i64 {
    if config.started_at_ms > 0 {
        (now - config.started_at_ms).max(0) / 1000
    } else {
        0
    }
}

/// Messages one read of `GET /api/v1/messages` takes from a partition at a time.
const MESSAGE_CHUNK: usize = 500;

/// `GET /api/v1/messages`: messages of the filtered queues/partitions, oldest first per partition,
/// pushed within `from..=to` when given, with `status` (`dead_letter`: a group filed it).
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
    let instant = |key: &str| -> Result<Option<i64>, HttpError> {
        match query.non_empty(key) {
            None => Ok(None),
            Some(raw) => crate::core::timefmt::parse_iso(raw)
                .map(Some)
                .ok_or_else(|| {
                    HttpError::bad_request(format!(
                        "{key} must be an ISO-8601 timestamp, got '{}'",
                        clip(raw)
                    ))
                }),
        }
    };
    // No default window: the page and clients page by offset from the oldest retained message, and a
    // default `from` would hide older ones (docs/decisions.md).
    let (from, to) = (instant("from")?, instant("to")?);
    let want = offset.saturating_add(limit);
    let messages = engine
        .read_loaded(|b, now| -> Result<Vec<render::MessageOut>, HttpError> {
            let mut out = Vec::new();
            let traced = b.trace_counts();
            for q in b.list_queues(now) {
                if queue.is_some_and(|n| q.name != n)
                    || namespace.is_some_and(|n| q.namespace != n)
                    || task.is_some_and(|t| q.task != t)
                {
                    continue;
                }
                // Any status: a dead-lettered message is listed as `dead_letter` whatever is asked for.
                let dead = b.dead_lettered_offsets(&q.name);
                for p in &q.partitions {
                    if partition.is_some_and(|n| p.name != n) {
                        continue;
                    }
                    let pid: u64 = p.id.parse().unwrap_or(u64::MAX);
                    let mut next = match from {
                        Some(t) => b
                            .first_offset_pushed_at_or_after(&q.name, &p.name, t)
                            .unwrap_or(p.next_offset),
                        None => p.first_retained_offset,
                    };
                    // Read in chunks until the page is full, the partition ends, or `to` is passed.
                    'partition: while out.len() < want && next < p.next_offset {
                        let views = b
                            .messages(&q.name, &p.name, next, MESSAGE_CHUNK)
                            .map_err(HttpError::from)?;
                        // `messages` covers exactly MESSAGE_CHUNK offsets (a segment that is not loaded
                        // leaves a gap the engine fills and reruns).
                        next = next.saturating_add(MESSAGE_CHUNK as u64);
                        for m in views {
                            if to.is_some_and(|t| m.created_at_ms > t) {
                                break 'partition;
                            }
                            if from.is_some_and(|t| m.created_at_ms < t) {
                                continue;
                            }
                            let is_dead = dead.contains(&(pid, m.offset));
                            let traces = traced.get(&(pid, m.offset)).copied().unwrap_or(0);
                            let mut v = render::message(m, Some(&q), now);
                            v.trace_count = traces;
                            if is_dead {
                                v.status = "dead_letter";
                            }
                            if status.is_none_or(|s| v.status == s) {
                                out.push(v);
                                if out.len() >= want {
                                    break 'partition;
                                }
                            }
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
        // Every category summed over the queues' own counts, so they add up to `total` as each queue's
        // do (a dead-lettered message once while retained, `failed` the messages waiting out a retry).
        let totals = render::sum(queues.iter().map(|q| render::queue_counts(q, now)));
        let namespaces: std::collections::BTreeSet<String> =
            queues.iter().map(|q| q.namespace.clone()).collect();
        let tasks: std::collections::BTreeSet<String> =
            queues.iter().map(|q| q.task.clone()).collect();
        json!({
            "queues": queues.len(),
            "partitions": queues.iter().map(|q| q.partitions.len()).sum::<usize>(),
            "namespaces": namespaces.len(),
            "tasks": tasks.len(),
            "messages": render::counts_json(&totals),
            "lag": lag(b, now),
            "throughput": rates(b, now),
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
        let totals = b.meters_totals();
        let from = now - 3_600_000;
        let points: Vec<Value> = b
            .minutes_since(from)
            .iter()
            .map(|m| {
                json!({
                    "timestamp": iso_millis(m.minute_ms),
                    "pushed": m.counts.pushed,
                    "popped": m.counts.popped,
                    "acked": m.counts.acked,
                    "failed": m.counts.failed,
                })
            })
            .collect();
        json!({
            "timeRange": {"from": iso_millis(from), "to": iso_millis(now)},
            "bucketMinutes": 1,
            "pointCount": points.len(),
            "throughput": points,
            "queues": {"total": stats.queues, "partitions": stats.partitions},
            "messages": {
                "total": stats.messages,
                "pending": c.0,
                "processing": c.1,
                "completed": c.2,
                "pushed": stats.pushed,
                "popped": stats.popped,
                "acked": stats.acked,
                "failed": totals.failed,
            },
            "lag": lag(b, now),
            "leases": {"active": stats.live_leases},
            "deadLetterQueue": {
                "total": stats.dlq_depth,
                "byQueue": stats.dlq_depth_by_queue.iter()
                    .map(|(q, n)| json!({"queue": q, "count": n}))
                    .collect::<Vec<_>>(),
            },
            "workers": [{"workerId": config.worker_id, "status": "active", "uptime": uptime_s(config, now)}],
            "errors": {"failedAcks": totals.failed},
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

//! One function per route: validate, call the engine, render.

use super::auth::Caller;
use super::crypto;
use super::error::{json_text_response, no_content, HttpError};
#[cfg(feature = "ops")]
use super::modes;
use super::query::{clip, Query};
use super::render;
use super::router::{self, Route};
#[cfg(feature = "ops")]
use super::traces;
use super::views;
use super::wire::{self, check_id, check_name};
use super::{HttpConfig, HttpRequest, HttpResponse};
use crate::core::api::*;
use crate::core::json_text::JsonText;
use crate::core::timefmt::parse_iso;
#[cfg(feature = "ops")]
use crate::engine::PushOutcome;
use crate::engine::{Engine, EngineError, Host};
use crate::store::Store;

/// A key prefix no record uses: `/health` scans it to check that the store answers.
pub(super) const HEALTH_PROBE_PREFIX: &str = "\u{7f}health-probe/";

/// Routes, authenticates and answers one request.
pub(crate) async fn dispatch<S: Store, H: Host>(
    engine: &Engine<S, H>,
    config: &HttpConfig,
    mut request: HttpRequest,
    #[cfg(feature = "jwt")] jwt: &super::jwt::JwtOutcome,
) -> Result<HttpResponse, HttpError> {
    if request.query.is_empty() {
        if let Some((path, query)) = request.path.split_once('?') {
            let (path, query) = (path.to_string(), query.to_string());
            request.path = path;
            request.query = query;
        }
    }
    let route = router::route(&request.method, &request.path)?;
    // Memory-only reads (`Engine::read`: the views) answer only committed state: a view waits for the
    // commits in flight (one that fails would take back what the view would have shown) and reads before
    // its next await. Other routes only reload after a failed commit, so they do not answer from what it
    // refused. (A pop takes the command gate itself; a long-poll must not wait here.)
    if request.method == "GET" && !route.is_pop() {
        engine.settle().await?;
    } else {
        engine.reload_if_failed().await?;
    }
    if route == Route::Preflight {
        return Ok(no_content());
    }
    #[cfg(not(feature = "jwt"))]
    let mut caller = super::auth::check(
        config.auth.as_ref(),
        route.access(),
        request.header("authorization"),
    )?;
    #[cfg(feature = "jwt")]
    let mut caller = super::jwt::check(
        config,
        route.access(),
        &request.path,
        request.header("authorization"),
        jwt,
    )?;
    let limits = &config.limits;
    if request.body.len() > limits.max_body_bytes {
        return Err(HttpError::too_large(format!(
            "Request body too large: {} bytes (the limit is {})",
            request.body.len(),
            limits.max_body_bytes
        )));
    }
    if request.header("content-type").is_some_and(|t| {
        t.trim()
            .to_ascii_lowercase()
            .starts_with("application/x-queen")
    }) {
        return Err(HttpError::unsupported_media(
            "Binary Queen protocols are not supported; send JSON",
        ));
    }
    caller.client = std::mem::take(&mut request.client);
    let query = Query::parse(&request.query)?;
    let body = request.body.as_slice();
    Route::dispatch_to(engine, config, route, &query, body, &caller).await
}

impl Route {
    async fn dispatch_to<S: Store, H: Host>(
        engine: &Engine<S, H>,
        config: &HttpConfig,
        route: Route,
        query: &Query,
        body: &[u8],
        caller: &Caller,
    ) -> Result<HttpResponse, HttpError> {
        let limits = &config.limits;
        match route {
            Route::Preflight => Ok(no_content()),
            Route::Push => {
                let mut items = wire::push_items(body, limits, caller.subject.as_deref())?;
                crypto::seal_items(engine, config, items.iter_mut().collect()).await?;
                if engine.push_needs_buffer_path() {
                    #[cfg(not(feature = "ops"))]
                    return Err(maintenance_not_built());
                    #[cfg(feature = "ops")]
                    return match engine.push_or_buffer(items).await? {
                        PushOutcome::Buffered(results) => Ok(modes::buffered_answer(&results)),
                        PushOutcome::Pushed(results) => {
                            Ok(json_text_response(201, render::push_results(&results)))
                        }
                    };
                }
                let results = engine.push(items).await?;
                Ok(json_text_response(201, render::push_results(&results)))
            }
            Route::PopQueue { queue } => {
                check_name("Queue name", &queue, true, limits)?;
                pop(engine, config, PopTarget::Queue { queue }, query, caller).await
            }
            Route::PopPartition { queue, partition } => {
                check_name("Queue name", &queue, true, limits)?;
                check_name("Partition name", &partition, false, limits)?;
                pop(
                    engine,
                    config,
                    PopTarget::Partition { queue, partition },
                    query,
                    caller,
                )
                .await
            }
            Route::PopDiscovery => {
                let namespace = query.non_empty("namespace").map(str::to_string);
                let task = query.non_empty("task").map(str::to_string);
                if namespace.is_none() && task.is_none() {
                    return Err(HttpError::bad_request(
                        "namespace or task is required for a discovery pop",
                    ));
                }
                for (what, v) in [("namespace", &namespace), ("task", &task)] {
                    if let Some(v) = v {
                        check_name(what, v, false, limits)?;
                    }
                }
                pop(
                    engine,
                    config,
                    PopTarget::Discovery { namespace, task },
                    query,
                    caller,
                )
                .await
            }
            Route::Ack => {
                let (group, item) = wire::single_ack(body, limits)?;
                let results = engine.ack(group, vec![item]).await?;
                Ok(ack_answer(&results))
            }
            Route::AckBatch => {
                let (group, items) = wire::batch_ack(body, limits)?;
                let results = engine.ack(group, items).await?;
                Ok(ack_answer(&results))
            }
            Route::LeaseExtend { lease_id } => {
                check_id("leaseId", &lease_id, limits)?;
                let seconds = wire::extend_seconds(body, limits)?;
                let reply = engine.extend_lease(&lease_id, seconds).await?;
                Ok(json_text_response(200, render::extend_reply(&reply)))
            }
            Route::Transaction => {
                let ops =
                    transaction_operations(engine, config, body, caller.subject.as_deref()).await?;
                let reply = engine.transaction(ops).await?;
                Ok(json_text_response(200, render::tx_reply(&reply)))
            }
            Route::Configure => {
                let request = wire::configure(body, limits)?;
                crypto::check_configure(config, &request)?;
                let reply = engine.configure(request).await?;
                Ok(json_text_response(200, render::configure_reply(&reply)))
            }
            Route::DeleteQueue { queue } => {
                check_name("Queue name", &queue, true, limits)?;
                let existed = engine.delete_queue(&queue).await?;
                let mut t = JsonText::with_capacity(64 + queue.len());
                t.raw(if existed {
                    "{\"deleted\":true,\"existed\":true,\"queue\":"
                } else {
                    "{\"deleted\":true,\"existed\":false,\"queue\":"
                })
                .str(&queue)
                .raw("}");
                Ok(json_text_response(200, t.into_bytes()))
            }
            view @ (Route::ListQueues
            | Route::GetQueue { .. }
            | Route::Overview
            | Route::Namespaces
            | Route::Tasks
            | Route::ListMessages
            | Route::GetMessage { .. }
            | Route::Metrics
            | Route::Prometheus
            | Route::Status
            | Route::ListGroups
            | Route::LaggingGroups
            | Route::GetGroup { .. }
            | Route::QueueDepth { .. }
            | Route::ListPartitions
            | Route::StatusQueues
            | Route::StatusQueue { .. }
            | Route::StatusQueueMessages { .. }
            | Route::QueueHistory { .. }
            | Route::StatusAnalytics
            | Route::StatusBuffers
            | Route::MessageTraces { .. }
            | Route::TracesByName { .. }
            | Route::TraceNames) => views::answer(engine, config, view, query).await,
            #[cfg(feature = "ops")]
            Route::GetMaintenance => modes::maintenance(engine, false, None).await,
            #[cfg(feature = "ops")]
            Route::SetMaintenance => modes::maintenance(engine, false, Some(body)).await,
            #[cfg(feature = "ops")]
            Route::GetPopMaintenance => modes::maintenance(engine, true, None).await,
            #[cfg(feature = "ops")]
            Route::SetPopMaintenance => modes::maintenance(engine, true, Some(body)).await,
            #[cfg(not(feature = "ops"))]
            Route::GetMaintenance
            | Route::SetMaintenance
            | Route::GetPopMaintenance
            | Route::SetPopMaintenance
            | Route::PostTrace => Err(HttpError::not_in_default_build(OPS_LEFT_OUT)),
            Route::ListDlq => {
                let limit = query
                    .uint("limit", 0, limits.max_page as u64)?
                    .unwrap_or(100) as usize;
                let offset = query.uint("offset", 0, u32::MAX as u64)?.unwrap_or(0) as usize;
                let dlq = DlqQuery {
                    queue: query.non_empty("queue").map(str::to_string),
                    consumer_group: query.non_empty("consumerGroup").map(str::to_string),
                    limit,
                    offset,
                };
                let mut letters = engine.read(|b, _| b.dead_letters(&dlq));
                let payloads = letters.iter_mut().map(|d| &mut d.payload).collect();
                crypto::open_payloads(config, payloads).await;
                Ok(json_text_response(
                    200,
                    render::dlq_list(&letters, limit, offset),
                ))
            }
            #[cfg(feature = "views")]
            route @ (Route::ReplayDlqBulk | Route::DeleteDlqBulk | Route::Deliveries) => {
                super::operations::answer(engine, config, route, query, body).await
            }
            #[cfg(not(feature = "views"))]
            Route::ReplayDlqBulk | Route::DeleteDlqBulk | Route::Deliveries => {
                Err(super::operations::unavailable())
            }
            Route::ReplayDlq { id } => {
                check_id("id", &id, limits)?;
                wire::parse_json(body, false)?;
                let reply = engine.replay_dead_letter(&id).await?;
                Ok(json_text_response(200, render::replay_reply(&reply)))
            }
            Route::RetryMessage {
                partition_id,
                transaction_id,
            } => {
                check_id("partitionId", &partition_id, limits)?;
                check_id("transactionId", &transaction_id, limits)?;
                wire::parse_json(body, false)?;
                let reply = engine
                    .replay_address(&partition_id, &transaction_id)
                    .await?;
                Ok(json_text_response(200, render::replay_reply(&reply)))
            }
            Route::DeleteMessage {
                partition_id,
                transaction_id,
            } => {
                check_id("partitionId", &partition_id, limits)?;
                check_id("transactionId", &transaction_id, limits)?;
                let deleted = engine
                    .delete_dead_letters(&partition_id, &transaction_id)
                    .await?;
                if deleted == 0 {
                    return Err(HttpError::not_found("No dead letter at this address"));
                }
                let mut t = JsonText::with_capacity(96);
                t.raw("{\"deleted\":")
                    .uint(deleted as u64)
                    .raw(",\"partitionId\":")
                    .str(&partition_id)
                    .raw(",\"success\":true,\"transactionId\":")
                    .str(&transaction_id)
                    .raw("}");
                Ok(json_text_response(200, t.into_bytes()))
            }
            Route::DeleteGroup { group } => {
                check_name("consumerGroup", &group, false, limits)?;
                let meta = query.flag_or("deleteMetadata", true);
                let r = engine.delete_group(&group, None, meta).await?;
                Ok(group_deleted(&group, None, &r))
            }
            Route::DeleteGroupQueue { group, queue } => {
                check_name("consumerGroup", &group, false, limits)?;
                check_name("Queue name", &queue, true, limits)?;
                let meta = query.flag_or("deleteMetadata", true);
                let r = engine.delete_group(&group, Some(&queue), meta).await?;
                Ok(group_deleted(&group, Some(&queue), &r))
            }
            Route::UpdateSubscription { group } => {
                check_name("consumerGroup", &group, false, limits)?;
                let start_ms = wire::subscription_timestamp(body)?;
                let rows = engine.update_subscription(&group, start_ms).await?;
                let mut t = JsonText::with_capacity(96 + group.len());
                t.raw("{\"consumerGroup\":")
                    .str(&group)
                    .raw(",\"newTimestamp\":")
                    .iso_millis(start_ms)
                    .raw(",\"rowsUpdated\":")
                    .uint(rows.into())
                    .raw(",\"success\":true}");
                Ok(json_text_response(200, t.into_bytes()))
            }
            Route::Seek { group, queue } => {
                check_name("consumerGroup", &group, false, limits)?;
                check_name("Queue name", &queue, true, limits)?;
                let target = wire::seek_target(body)?;
                let reply = engine.seek(&group, &queue, target).await?;
                let mut t = JsonText::with_capacity(160 + group.len() + queue.len());
                t.raw("{\"consumerGroup\":")
                    .str(&group)
                    .raw(",\"partitionsUpdated\":")
                    .uint(reply.partitions_updated.into())
                    .raw(",\"queueName\":")
                    .str(&queue);
                match target {
                    SeekTarget::End => {
                        t.raw(",\"seekToEnd\":true,\"success\":true,\"targetTimestamp\":null}")
                    }
                    SeekTarget::Timestamp(ms) => t
                        .raw(",\"seekToEnd\":false,\"success\":true,\"targetTimestamp\":")
                        .iso_millis(ms)
                        .raw("}"),
                };
                Ok(json_text_response(200, t.into_bytes()))
            }
            Route::SeekPartition {
                group,
                queue,
                partition,
            } => {
                check_name("consumerGroup", &group, false, limits)?;
                check_name("Queue name", &queue, true, limits)?;
                check_name("Partition name", &partition, false, limits)?;
                wire::parse_json(body, false)?;
                let cursor = engine
                    .seek_partition_to_end(&group, &queue, &partition)
                    .await?;
                let mut t = JsonText::with_capacity(128 + group.len() + queue.len());
                t.raw("{\"consumerGroup\":")
                    .str(&group)
                    .raw(",\"cursorMovedTo\":")
                    .int(cursor)
                    .raw(",\"partitionName\":")
                    .str(&partition)
                    .raw(",\"queueName\":")
                    .str(&queue)
                    .raw(",\"success\":true,\"updated\":true}");
                Ok(json_text_response(200, t.into_bytes()))
            }
            Route::StatsRefresh => Ok(json_text_response(
                200,
                b"{\"message\":\"Statistics are computed live; nothing to refresh\",\"success\":true}"
                    .to_vec(),
            )),
            #[cfg(feature = "ops")]
            Route::PostTrace => {
                let request = traces::parse(body, config)?;
                traces::record(engine, request, mint_uuid(engine.host())).await
            }
            Route::Health => {
                // Probe the store with an empty range read: 503 when storage is unusable.
                let mut t = JsonText::with_capacity(384);
                let status = match engine.store().scan(HEALTH_PROBE_PREFIX).await {
                    Err(e) => {
                        t.raw("{\"database\":\"disconnected\",\"error\":")
                            .str(&format!("storage failure: {}", e.message))
                            .raw(",\"server\":")
                            .str(&config.server_name)
                            .raw(",\"status\":\"unhealthy\"");
                        503
                    }
                    Ok(_) => {
                        // `encryption` is ours: whether encryptionEnabled queues are accepted (the
                        // page asks).
                        t.raw("{\"database\":\"connected\",\"encryption\":")
                            .raw("{\"cipher\":\"AES-256-GCM\",\"keyConfigured\":")
                        .bool(config.encryption.is_some())
                        .raw("},\"queen\":{\"status\":\"active\",\"worker_id\":")
                        .str(&config.worker_id)
                        .raw("},\"server\":")
                        .str(&config.server_name)
                        .raw(",\"shared_state\":{\"enabled\":false},\"status\":\"healthy\"");
                        200
                    }
                };
                t.raw(",\"version\":")
                    .str(&config.version)
                    .raw(",\"worker_id\":")
                    .str(&config.worker_id)
                    .raw("}");
                Ok(json_text_response(status, t.into_bytes()))
            }
        }
    }
}

/// What a build without `ops` leaves out (its maintenance and trace routes answer 501 saying so).
#[cfg(not(feature = "ops"))]
const OPS_LEFT_OUT: &str = "Maintenance mode and traces are";

/// A push while maintenance mode (set by a full build) is on, or its buffer still holds messages, in a
/// build that cannot buffer or drain: refused (503), never applied ahead of the buffered messages.
#[cfg(not(feature = "ops"))]
fn maintenance_not_built() -> HttpError {
    HttpError {
        status: 503,
        message: format!(
            "Maintenance mode is on, or its buffer still holds pushed messages, and this build \
             cannot buffer or deliver them: the push is refused. {}",
            super::error::not_in_default_build(OPS_LEFT_OUT)
        ),
    }
}

/// A transaction body read into its operations, pushed payloads sealed (encryption), with the
/// maintenance checks a push gets: what the transaction route applies, and what a shard prepares of
/// a transaction across shards (`super::prepared`).
pub(super) async fn transaction_operations<S: Store, H: Host>(
    engine: &Engine<S, H>,
    config: &HttpConfig,
    body: &[u8],
    subject: Option<&str>,
) -> Result<Vec<TxOperation>, HttpError> {
    let limits = &config.limits;
    let mut ops = wire::transaction(body, limits, subject)?;
    let pushed = ops.iter_mut().flat_map(|op| match op {
        TxOperation::Push(items) => items.iter_mut(),
        _ => [].iter_mut(),
    });
    crypto::seal_items(engine, config, pushed.collect()).await?;
    let pushes = ops.iter().any(|op| matches!(op, TxOperation::Push(_)));
    if pushes && engine.push_needs_buffer_path() {
        #[cfg(not(feature = "ops"))]
        return Err(maintenance_not_built());
        #[cfg(feature = "ops")]
        {
            if engine.maintenance_state().0.push_paused {
                return Err(HttpError {
                    status: 503,
                    message: "Maintenance mode is on: pushes are buffered, and a \
                              transaction that pushes is refused until it is turned off"
                        .to_string(),
                });
            }
            // Buffered pushes go first (turning maintenance off drains them; this
            // finishes a drain that failed part way).
            engine.drain_push_buffer().await?;
        }
    }
    Ok(ops)
}

/// Pop (contract §1.3).
async fn pop<S: Store, H: Host>(
    engine: &Engine<S, H>,
    config: &HttpConfig,
    target: PopTarget,
    query: &Query,
    caller: &Caller,
) -> Result<HttpResponse, HttpError> {
    let limits = &config.limits;
    let group = query
        .non_empty("consumerGroup")
        .filter(|g| *g != QUEUE_MODE_GROUP)
        .map(str::to_string);
    if let Some(g) = &group {
        check_name("consumerGroup", g, false, limits)?;
    }
    let batch = query
        .uint("batch", 1, limits.max_pop_batch as u64)?
        .map(|b| b as u32);
    let partitions = query.uint("partitions", 1, 64)?.map(|p| p as u32);
    // Larger values are clamped to `max_wait_ms` (contract §1.3); only non-integers are refused.
    let timeout_ms = query
        .uint("timeout", 0, u64::MAX)
        .map_err(|_| {
            HttpError::bad_request(format!(
                "timeout must be a non-negative integer of milliseconds, got '{}'",
                clip(query.get("timeout").unwrap_or(""))
            ))
        })?
        .unwrap_or(limits.default_wait_ms)
        .min(limits.max_wait_ms);
    let lease_seconds = query
        .uint("leaseSeconds", 0, limits.max_lease_seconds)?
        .filter(|s| *s > 0);
    let auto_ack = query.flag("autoAck");
    let conflation = query.flag("conflation");
    let subscription_mode = query.non_empty("subscriptionMode");
    if let Some(m) = subscription_mode {
        check_name("subscriptionMode", m, false, limits)?;
    }
    // subscriptionFrom wins over subscriptionMode (wire-contract §1.3).
    let subscription = match query.non_empty("subscriptionFrom") {
        None => subscription_mode.map(SubscriptionStart::from_mode),
        Some("now") => Some(SubscriptionStart::New),
        Some(t) => Some(SubscriptionStart::At(parse_iso(t).ok_or_else(|| {
            HttpError::bad_request(format!(
                "subscriptionFrom must be an ISO-8601 time or 'now', got '{}'",
                clip(t)
            ))
        })?)),
    };
    if conflation && group.is_none() {
        return Err(HttpError::bad_request(
            "conflation needs a consumerGroup (queue mode cannot conflate)",
        ));
    }
    if conflation && auto_ack {
        return Err(HttpError::bad_request(
            "conflation cannot be combined with autoAck",
        ));
    }
    let request = PopRequest {
        target,
        group,
        batch,
        partitions,
        auto_ack,
        subscription,
        lease_seconds,
        autopilot: query.flag("autopilot"),
        conflation,
    };
    let wait_ms = query.flag("wait").then_some(timeout_ms);
    let gone = || caller.client.has_gone();
    match engine.pop_for(request, wait_ms, &gone).await {
        Ok(mut reply) => {
            let payloads = reply.messages.iter_mut().map(|m| &mut m.payload).collect();
            if crypto::open_payloads(config, payloads).await {
                // Plaintext of encrypted queues: a recorded (forwarded) pop must not store this answer.
                engine.note_opened_payloads();
            }
            if reply.messages.is_empty() && !reply.conflation && !reply.conflation_conflict {
                Ok(no_content())
            } else {
                Ok(json_text_response(
                    200,
                    render::pop_reply(&reply, conflation),
                ))
            }
        }
        // A pop on a queue or partition that does not exist is an empty pop, never a 4xx.
        Err(EngineError::Core(e)) if e.kind == ErrorKind::NotFound => Ok(no_content()),
        Err(e) => Err(e.into()),
    }
}

/// The answer to deleting a consumer group (on one queue or all).
fn group_deleted(group: &str, queue: Option<&str>, r: &GroupDeleteReply) -> HttpResponse {
    let mut t = JsonText::with_capacity(128 + group.len());
    t.raw("{\"consumerGroup\":")
        .str(group)
        .raw(",\"deletedPartitions\":")
        .uint(r.deleted_partitions.into())
        .raw(if r.metadata_deleted {
            ",\"metadataDeleted\":true"
        } else {
            ",\"metadataDeleted\":false"
        });
    if let Some(queue) = queue {
        t.raw(",\"queueName\":").str(queue);
    }
    t.raw(",\"success\":true}");
    json_text_response(200, t.into_bytes())
}

fn ack_answer(results: &[AckResult]) -> HttpResponse {
    json_text_response(200, render::ack_results(results))
}

/// A fresh UUIDv4 from the host's entropy, for trace ids.
#[cfg(feature = "ops")]
fn mint_uuid<H: Host>(host: &H) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let hi = host.entropy() ^ (host.now_ms() as u64).rotate_left(17);
    let lo = host
        .entropy()
        .wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&hi.to_be_bytes());
    bytes[8..].copy_from_slice(&lo.to_be_bytes());
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .hyphenated()
        .to_string()
}

//! Core replies → JSON answers, with the contract's field names (and the appendix's additions).

use crate::core::api::*;
use crate::core::timefmt::{iso_micros, iso_millis};
use serde_json::{json, Value};

fn push_status(status: &PushStatus) -> &'static str {
    match status {
        PushStatus::Queued => "queued",
        PushStatus::Duplicate => "duplicate",
    }
}

/// One push result (contract §1.2): snake_case plus the camelCase aliases.
pub(crate) fn push_result(r: &PushResult) -> Value {
    match r.status {
        PushStatus::Queued => json!({
            "index": r.index,
            "status": "queued",
            "transaction_id": r.transaction_id,
            "transactionId": r.transaction_id,
            "message_id": r.message_id,
            "messageId": r.message_id,
            "partition_id": r.partition_id,
            "partitionId": r.partition_id,
            "trace_id": r.trace_id,
            "queueName": r.queue,
            "partition": r.partition,
            "offset": r.offset,
        }),
        PushStatus::Duplicate => json!({
            "index": r.index,
            "status": "duplicate",
            "transaction_id": r.transaction_id,
            "transactionId": r.transaction_id,
            "message_id": r.message_id,
            "messageId": r.message_id,
            "partition_id": r.partition_id,
            "partitionId": r.partition_id,
            "queueName": r.queue,
            "partition": r.partition,
        }),
    }
}

/// One delivered message (contract §1.3, appendix D15).
pub(crate) fn delivered(m: &DeliveredMessage) -> Value {
    json!({
        "id": m.id,
        "transactionId": m.transaction_id,
        "traceId": m.trace_id,
        "data": m.payload,
        "producerSub": m.producer_sub,
        "createdAt": iso_micros(m.created_at_ms),
        "queue": m.queue,
        "partition": m.partition,
        "partitionId": m.partition_id,
        "leaseId": m.lease_id,
        "consumerGroup": m.consumer_group,
        "deliveryAttempt": m.delivery_attempt,
        "offset": m.offset,
        "retryCount": m.retry_count,
    })
}

/// A pop answer with messages (or an empty conflating one).
pub(crate) fn pop_reply(r: &PopReply, conflation_requested: bool) -> Value {
    let mut body = json!({
        "success": true,
        "queue": r.queue,
        "partition": r.partition,
        "partitionId": r.partition_id,
        "leaseId": r.lease_id,
        "consumerGroup": r.consumer_group,
        "messages": r.messages.iter().map(delivered).collect::<Vec<_>>(),
        "partitionsClaimed": r.partitions_claimed,
    });
    let map = body.as_object_mut().expect("built as an object above");
    if let Some(a) = &r.autopilot {
        map.insert(
            "autopilot".into(),
            json!({"batch": a.batch, "partitions": a.partitions, "waitMs": a.wait_ms}),
        );
    }
    if r.conflation || conflation_requested {
        map.insert("conflation".into(), Value::Bool(r.conflation));
    }
    if r.conflation_conflict {
        map.insert("conflationConflict".into(), Value::Bool(true));
    }
    body
}

/// One ack result (contract §1.4): `error` is `null` on success.
pub(crate) fn ack_result(r: &AckResult) -> Value {
    let error = if r.success {
        Value::Null
    } else {
        // Any refused item must carry a non-empty error (the Go SDK reads only `error`).
        Value::String(
            r.error
                .clone()
                .filter(|e| !e.is_empty())
                .unwrap_or_else(|| "Ack refused".to_string()),
        )
    };
    json!({
        "index": r.index,
        "transactionId": r.transaction_id,
        "partitionId": r.partition_id,
        "success": r.success,
        "error": error,
        "queueName": r.queue,
        "partitionName": r.partition,
        "leaseReleased": r.lease_released,
        "dlq": r.dlq,
        "status": r.status,
    })
}

/// The lease-extend object (contract §1.5, appendix D9).
pub(crate) fn extend_reply(r: &ExtendReply) -> Value {
    let success = r.renewed > 0;
    let expiry = r.expires_at_ms.filter(|_| success).map(iso_micros);
    let mut body = json!({
        "leaseId": r.lease_id,
        "success": success,
        "renewed": r.renewed,
        "newExpiresAt": expiry,
        "expiresAt": expiry,
        "lease_expires_at": expiry,
    });
    if !success {
        let error = r
            .error
            .clone()
            .filter(|e| !e.is_empty())
            .unwrap_or_else(|| "Lease not found".to_string());
        body["error"] = Value::String(error);
    }
    body
}

/// The transaction object (contract §1.6): results flat, one per pushed item and one per ack.
pub(crate) fn tx_reply(r: &TxReply) -> Value {
    let results: Vec<Value> = r
        .results
        .iter()
        .enumerate()
        .map(|(i, result)| match result {
            TxResult::Push(p) => json!({
                "index": i,
                "type": "push",
                "success": true,
                "status": push_status(&p.status),
                "transactionId": p.transaction_id,
                "messageId": p.message_id,
                "partitionId": p.partition_id,
                "queueName": p.queue,
                "partition": p.partition,
            }),
            TxResult::Ack(a) => json!({
                "index": i,
                "type": "ack",
                "success": a.success,
                "transactionId": a.transaction_id,
                "partitionId": a.partition_id,
                "error": if a.success { Value::Null } else {
                    Value::String(a.error.clone().filter(|e| !e.is_empty()).unwrap_or_else(|| "Ack refused".into()))
                },
                "dlq": a.dlq,
                "leaseReleased": a.lease_released,
            }),
        })
        .collect();
    let mut body = json!({
        "transactionId": r.transaction_id,
        "success": r.success,
        "results": results,
    });
    if !r.success {
        body["error"] = Value::String(
            r.error
                .clone()
                .filter(|e| !e.is_empty())
                .unwrap_or_else(|| "Transaction failed".to_string()),
        );
    }
    body
}

/// The 15 options with their wire names and JSON types (contract §1.7).
pub(crate) fn options(o: &QueueOptions) -> Value {
    json!({
        "priority": o.priority,
        "leaseTime": o.lease_time_s,
        "retryLimit": o.retry_limit,
        "retryDelay": o.retry_delay_ms,
        "maxSize": o.max_size,
        "ttl": o.ttl_s,
        "deadLetterQueue": o.dead_letter_queue,
        "dlqAfterMaxRetries": o.dlq_after_max_retries,
        "delayedProcessing": o.delayed_processing_s,
        "windowBuffer": o.window_buffer_s,
        "retentionSeconds": o.retention_s,
        "completedRetentionSeconds": o.completed_retention_s,
        "retentionEnabled": o.retention_enabled,
        "encryptionEnabled": o.encryption_enabled,
        "maxWaitTimeSeconds": o.max_wait_time_s,
    })
}

/// The `/configure` answer.
pub(crate) fn configure_reply(r: &ConfigureReply) -> Value {
    json!({
        "configured": true,
        "queueId": r.queue_id,
        "partitionId": r.partition_id,
        "queue": r.queue,
        "namespace": r.namespace,
        "task": r.task,
        "options": options(&r.options),
    })
}

/// One dead letter (contract §1.8): `createdAt` equals `failedAt`; `producerSub` is always null.
pub(crate) fn dead_letter(d: &DeadLetterView) -> Value {
    let failed_at = iso_millis(d.failed_at_ms);
    json!({
        "id": d.id,
        "messageId": d.message_id,
        "transactionId": d.transaction_id,
        "partitionId": d.partition_id,
        "queue": d.queue,
        "partition": d.partition,
        "consumerGroup": d.consumer_group,
        "errorMessage": d.error_message,
        "retryCount": d.retry_count,
        "data": d.payload,
        "createdAt": failed_at,
        "failedAt": failed_at,
        "producerSub": Value::Null,
        "offset": d.offset,
        "originalCreatedAt": iso_millis(d.original_created_at_ms),
    })
}

/// The replay answer (contract §1.8 DECIDE).
pub(crate) fn replay_reply(r: &ReplayReply) -> Value {
    json!({
        "success": true,
        "replayed": true,
        "dlqRowRemoved": r.rows_removed > 0,
        "id": r.id,
        "transactionId": r.transaction_id,
        "messageId": r.message_id,
        "queue": r.queue,
        "partition": r.partition,
        "partitionId": r.partition_id,
        "status": push_status(&r.status),
    })
}

/// A lane's in-flight count: the leased span when the lease is live.
fn processing(lane: &LaneView, now: i64) -> u64 {
    match (lane.lease_expires_at_ms, lane.batch_end) {
        (Some(x), Some(end)) if x > now && lane.lease_id.is_some() => {
            (end as i64 - lane.committed).max(0) as u64
        }
        _ => 0,
    }
}

/// Message counts of a partition as seen by the queue-mode group.
pub(crate) struct Counts {
    pub(crate) total: u64,
    pub(crate) pending: u64,
    pub(crate) processing: u64,
    pub(crate) completed: u64,
    pub(crate) dead_letter: u64,
}

pub(crate) fn partition_counts(p: &PartitionView, now: i64) -> Counts {
    let lane = p
        .lanes
        .iter()
        .find(|l| l.consumer_group == QUEUE_MODE_GROUP);
    let (pending, processing) = match lane {
        Some(l) => {
            let inflight = processing(l, now);
            (l.backlog.saturating_sub(inflight).min(p.messages), inflight)
        }
        None => (p.messages, 0),
    };
    Counts {
        total: p.messages,
        pending,
        processing,
        completed: p.messages.saturating_sub(pending + processing),
        dead_letter: p.dead_letters,
    }
}

fn counts_json(c: &Counts) -> Value {
    json!({
        "total": c.total,
        "pending": c.pending,
        "processing": c.processing,
        "completed": c.completed,
        "failed": 0,
        "deadLetter": c.dead_letter,
    })
}

fn sum(counts: impl Iterator<Item = Counts>) -> Counts {
    counts.fold(
        Counts {
            total: 0,
            pending: 0,
            processing: 0,
            completed: 0,
            dead_letter: 0,
        },
        |a, c| Counts {
            total: a.total + c.total,
            pending: a.pending + c.pending,
            processing: a.processing + c.processing,
            completed: a.completed + c.completed,
            dead_letter: a.dead_letter + c.dead_letter,
        },
    )
}

/// Totals over a queue's partitions.
pub(crate) fn queue_counts(q: &QueueView, now: i64) -> Counts {
    sum(q.partitions.iter().map(|p| partition_counts(p, now)))
}

/// A queue in `GET /resources/queues`.
pub(crate) fn queue_summary(q: &QueueView, now: i64) -> Value {
    let c = queue_counts(q, now);
    json!({
        "id": q.id,
        "name": q.name,
        "namespace": q.namespace,
        "task": q.task,
        "createdAt": iso_millis(q.created_at_ms),
        "partitions": q.partitions.len(),
        "messages": {"total": c.total, "pending": c.pending, "processing": c.processing},
    })
}

fn lane(l: &LaneView) -> Value {
    json!({
        "consumerGroup": l.consumer_group,
        "committedOffset": l.committed,
        "backlog": l.backlog,
        "leaseId": l.lease_id,
        "leaseExpiresAt": l.lease_expires_at_ms.map(iso_millis),
        "batchEnd": l.batch_end,
        "retryCount": l.retry_count,
        "attemptCount": l.attempt_count,
        "holdUntil": l.hold_until_ms.map(iso_millis),
    })
}

/// `GET /resources/queues/:queue`.
pub(crate) fn queue_detail(q: &QueueView, now: i64) -> Value {
    let partitions: Vec<Value> = q
        .partitions
        .iter()
        .map(|p| {
            json!({
                "id": p.id,
                "name": p.name,
                "createdAt": iso_millis(p.created_at_ms),
                "stats": counts_json(&partition_counts(p, now)),
                "oldestMessage": p.oldest_message_ms.map(iso_millis),
                "newestMessage": p.newest_message_ms.map(iso_millis),
                "nextOffset": p.next_offset,
                "firstRetainedOffset": p.first_retained_offset,
                "lanes": p.lanes.iter().map(lane).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "id": q.id,
        "name": q.name,
        "namespace": q.namespace,
        "task": q.task,
        "createdAt": iso_millis(q.created_at_ms),
        "options": options(&q.options),
        "partitions": partitions,
        "totals": counts_json(&queue_counts(q, now)),
    })
}

/// A stored message for the message browser.
pub(crate) fn message(m: &MessageView, q: Option<&QueueView>, now: i64) -> Value {
    let part = q.and_then(|q| q.partitions.iter().find(|p| p.id == m.partition_id));
    let status = part
        .and_then(|p| {
            p.lanes
                .iter()
                .find(|l| l.consumer_group == QUEUE_MODE_GROUP)
        })
        .map(|l| {
            if (m.offset as i64) <= l.committed {
                "completed"
            } else if processing(l, now) > 0 && l.batch_end.is_some_and(|e| m.offset <= e) {
                "processing"
            } else {
                "pending"
            }
        })
        .unwrap_or("pending");
    json!({
        "id": m.id,
        "transactionId": m.transaction_id,
        "partitionId": m.partition_id,
        "queuePath": format!("{}/{}", m.queue, m.partition),
        "queue": m.queue,
        "partition": m.partition,
        "namespace": q.map(|q| q.namespace.clone()),
        "task": q.map(|q| q.task.clone()),
        "status": status,
        "traceId": m.trace_id,
        "producerSub": Value::Null,
        "queuePriority": q.map(|q| q.options.priority),
        "createdAt": iso_millis(m.created_at_ms),
        "offset": m.offset,
        "payload": m.payload,
        "data": m.payload,
    })
}

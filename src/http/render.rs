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

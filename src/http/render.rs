//! Core replies → JSON answers, with the contract's field names (and the appendix's additions).
//!
//! Every answer here is written as JSON text straight into the body ([`JsonText`]: literal keys, no
//! `Value` tree and no per-field serializer calls), byte for byte what `serde_json` wrote for the
//! `Value`s and structs they replaced (the tests keep those as the reference). Each payload is written as
//! the JSON text it was stored as. The answers that were `Value` objects keep their keys in byte order
//! (what `serde_json`'s map wrote); those that were structs keep the structs' field order.

use super::json_text::{JsonText, Repeat};
use crate::core::api::*;
#[cfg(any(feature = "ops", test))]
use serde::{Serialize, Serializer};
#[cfg(feature = "views")]
use serde_json::Value;

/// Serializes the items of a slice as a JSON array, each through a function, without collecting them.
#[cfg(any(feature = "ops", test))]
pub(crate) struct SeqOf<'a, T, S>(pub(crate) &'a [T], pub(crate) fn(&'a T) -> S);

#[cfg(any(feature = "ops", test))]
impl<T, S: Serialize> Serialize for SeqOf<'_, T, S> {
    fn serialize<Z: Serializer>(&self, serializer: Z) -> Result<Z::Ok, Z::Error> {
        serializer.collect_seq(self.0.iter().map(self.1))
    }
}

fn push_status(status: &PushStatus) -> &'static str {
    match status {
        PushStatus::Queued => "queued",
        PushStatus::Duplicate => "duplicate",
    }
}

/// The `status` field of a push result in the answer, key and value as one literal.
fn push_status_field(status: &PushStatus) -> &'static str {
    match status {
        PushStatus::Queued => ",\"status\":\"queued\"",
        PushStatus::Duplicate => ",\"status\":\"duplicate\"",
    }
}

/// The push answer (contract §1.2): one result per item, snake_case plus the camelCase aliases. A
/// duplicate has no `trace_id` and no `offset`; a queued result has both (`trace_id` may be `null`).
///
/// The results of one partition share its names ([`SharedStr::is_same_part`]): they are written for
/// the first and copied for the next ones.
pub(crate) fn push_results(results: &[PushResult]) -> Vec<u8> {
    let mut t = JsonText::with_capacity(64 + results.len() * 480);
    let (mut partition_id, mut names) = (Repeat::default(), Repeat::default());
    t.raw("[");
    for (i, r) in results.iter().enumerate() {
        let queued = r.status == PushStatus::Queued;
        let previous = i.checked_sub(1).map(|p| &results[p]);
        // The previous entry's closing brace goes with this one's opening.
        t.raw(if i == 0 {
            "{\"index\":"
        } else {
            "},{\"index\":"
        })
        .uint(r.index as u64)
        .raw(push_status_field(&r.status))
        .str_twice(
            ",\"transaction_id\":",
            ",\"transactionId\":",
            &r.transaction_id,
        )
        .str_twice(",\"message_id\":", ",\"messageId\":", &r.message_id)
        .repeat(
            &mut partition_id,
            previous.is_some_and(|p| p.partition_id.is_same_part(&r.partition_id)),
            |t| {
                t.str_twice(",\"partition_id\":", ",\"partitionId\":", &r.partition_id);
            },
        );
        if queued {
            match r.trace_id.as_deref() {
                Some(trace_id) => t.raw(",\"trace_id\":").str(trace_id),
                None => t.raw(",\"trace_id\":null"),
            };
        }
        let same_names = previous.is_some_and(|p| {
            p.queue.is_same_part(&r.queue) && p.partition.is_same_part(&r.partition)
        });
        t.repeat(&mut names, same_names, |t| {
            t.raw(",\"queueName\":")
                .str(&r.queue)
                .raw(",\"partition\":")
                .str(&r.partition);
        });
        if queued {
            t.raw(",\"offset\":").uint(r.offset);
        }
    }
    t.raw(if results.is_empty() { "]" } else { "}]" });
    t.into_bytes()
}

/// One delivered message (contract §1.3, appendix D15): the payload is `data`. `previous`, the message
/// written before it in the answer: its creation time and its partition's names and lease, when the
/// same, are copied from what was written for it.
fn delivered(
    t: &mut JsonText,
    m: &DeliveredMessage,
    previous: Option<&DeliveredMessage>,
    repeats: &mut [Repeat; 2],
) {
    let [created_at, names] = repeats;
    let same_names = previous.is_some_and(|p| {
        p.queue.is_same_part(&m.queue)
            && p.partition.is_same_part(&m.partition)
            && p.partition_id.is_same_part(&m.partition_id)
            && p.lease_id.is_same_part(&m.lease_id)
            && p.consumer_group.is_same_part(&m.consumer_group)
    });
    t.raw("{\"id\":")
        .str(&m.id)
        .raw(",\"transactionId\":")
        .str(&m.transaction_id)
        .raw(",\"traceId\":")
        .opt_str(m.trace_id.as_deref())
        .raw(",\"data\":")
        .payload(&m.payload)
        .raw(",\"producerSub\":")
        .opt_str(m.producer_sub.as_deref())
        .raw(",\"createdAt\":")
        .repeat(
            created_at,
            previous.is_some_and(|p| p.created_at_ms == m.created_at_ms),
            |t| {
                t.iso_micros(m.created_at_ms);
            },
        )
        .repeat(names, same_names, |t| {
            t.raw(",\"queue\":")
                .str(&m.queue)
                .raw(",\"partition\":")
                .str(&m.partition)
                .raw(",\"partitionId\":")
                .str(&m.partition_id)
                .raw(",\"leaseId\":")
                .str(&m.lease_id)
                .raw(",\"consumerGroup\":")
                .str(&m.consumer_group);
        })
        .raw(",\"deliveryAttempt\":")
        .uint(m.delivery_attempt.into())
        .raw(",\"offset\":")
        .uint(m.offset)
        .raw(",\"retryCount\":")
        .uint(m.retry_count.into())
        .raw("}");
}

/// A pop answer with messages (or an empty conflating one): `autopilot`, `conflation` and
/// `conflationConflict` only when they apply.
pub(crate) fn pop_reply(r: &PopReply, conflation_requested: bool) -> Vec<u8> {
    let payload_bytes: usize = r.messages.iter().map(|m| m.payload.len()).sum();
    let mut t = JsonText::with_capacity(256 + payload_bytes + r.messages.len() * 420);
    t.raw("{\"success\":true,\"queue\":")
        .opt_str(r.queue.as_deref())
        .raw(",\"partition\":")
        .opt_str(r.partition.as_deref())
        .raw(",\"partitionId\":")
        .opt_str(r.partition_id.as_deref())
        .raw(",\"leaseId\":")
        .str(&r.lease_id)
        .raw(",\"consumerGroup\":")
        .str(&r.consumer_group)
        .raw(",\"messages\":[");
    let mut repeats = Default::default();
    for (i, m) in r.messages.iter().enumerate() {
        let previous = i.checked_sub(1).map(|p| &r.messages[p]);
        if previous.is_some() {
            t.raw(",");
        }
        delivered(&mut t, m, previous, &mut repeats);
    }
    t.raw("],\"partitionsClaimed\":")
        .uint(r.partitions_claimed.into());
    if let Some(a) = r.autopilot {
        t.raw(",\"autopilot\":{\"batch\":")
            .uint(a.batch.into())
            .raw(",\"partitions\":")
            .uint(a.partitions.into())
            .raw(",\"waitMs\":")
            .uint(a.wait_ms)
            .raw("}");
    }
    if r.conflation || conflation_requested {
        t.raw(",\"conflation\":").bool(r.conflation);
    }
    if r.conflation_conflict {
        t.raw(",\"conflationConflict\":true");
    }
    t.raw("}");
    t.into_bytes()
}

/// The ack answer (contract §1.4): one result per item; `error` is `null` on success and never empty on
/// a refusal (the Go SDK reads only `error`). Consecutive results of one partition share its names
/// ([`SharedStr::is_same_part`]): they are written for the first and copied for the next ones.
pub(crate) fn ack_results(results: &[AckResult]) -> Vec<u8> {
    let mut t = JsonText::with_capacity(2 + results.len() * 300);
    let mut names = Repeat::default();
    t.raw("[");
    for (i, r) in results.iter().enumerate() {
        let previous = i.checked_sub(1).map(|p| &results[p]);
        t.raw(if i == 0 {
            "{\"index\":"
        } else {
            ",{\"index\":"
        })
        .uint(r.index as u64)
        .raw(",\"transactionId\":")
        .str(&r.transaction_id)
        .raw(",\"partitionId\":")
        .str(&r.partition_id);
        if r.success {
            t.raw(",\"success\":true,\"error\":null");
        } else {
            let error = r.error.as_deref().filter(|e| !e.is_empty());
            t.raw(",\"success\":false,\"error\":")
                .str(error.unwrap_or("Ack refused"));
        }
        let same_names = previous.is_some_and(|p| {
            same_part(&p.queue, &r.queue) && same_part(&p.partition, &r.partition)
        });
        t.repeat(&mut names, same_names, |t| {
            t.raw(",\"queueName\":")
                .opt_str(r.queue.as_deref())
                .raw(",\"partitionName\":")
                .opt_str(r.partition.as_deref());
        })
        .raw(match (r.lease_released, r.dlq) {
            (false, false) => ",\"leaseReleased\":false,\"dlq\":false,\"status\":",
            (false, true) => ",\"leaseReleased\":false,\"dlq\":true,\"status\":",
            (true, false) => ",\"leaseReleased\":true,\"dlq\":false,\"status\":",
            (true, true) => ",\"leaseReleased\":true,\"dlq\":true,\"status\":",
        })
        .str(&r.status)
        .raw("}");
    }
    t.raw("]");
    t.into_bytes()
}

/// True when both are absent or both are the same part of one text ([`SharedStr::is_same_part`]).
fn same_part(a: &Option<SharedStr>, b: &Option<SharedStr>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a.is_same_part(b),
        (None, None) => true,
        _ => false,
    }
}

/// The lease-extend answer (contract §1.5, appendix D9).
pub(crate) fn extend_reply(r: &ExtendReply) -> Vec<u8> {
    let success = r.renewed > 0;
    let expiry = r.expires_at_ms.filter(|_| success);
    let write_expiry = |t: &mut JsonText| {
        match expiry {
            Some(ms) => t.iso_micros(ms),
            None => t.raw("null"),
        };
    };
    let mut t = JsonText::with_capacity(256);
    t.raw("{");
    if !success {
        let error = r.error.as_deref().filter(|e| !e.is_empty());
        t.raw("\"error\":")
            .str(error.unwrap_or("Lease not found"))
            .raw(",");
    }
    t.raw("\"expiresAt\":");
    write_expiry(&mut t);
    t.raw(",\"leaseId\":")
        .str(&r.lease_id)
        .raw(",\"lease_expires_at\":");
    write_expiry(&mut t);
    t.raw(",\"newExpiresAt\":");
    write_expiry(&mut t);
    t.raw(",\"renewed\":")
        .uint(r.renewed.into())
        .raw(if success {
            ",\"success\":true}"
        } else {
            ",\"success\":false}"
        });
    t.into_bytes()
}

/// The transaction answer (contract §1.6): results flat, one per pushed item and one per ack.
pub(crate) fn tx_reply(r: &TxReply) -> Vec<u8> {
    let mut t = JsonText::with_capacity(64 + r.results.len() * 320);
    t.raw("{");
    if !r.success {
        let error = r.error.as_deref().filter(|e| !e.is_empty());
        t.raw("\"error\":")
            .str(error.unwrap_or("Transaction failed"))
            .raw(",");
    }
    t.raw("\"results\":[");
    for (i, result) in r.results.iter().enumerate() {
        if i > 0 {
            t.raw(",");
        }
        match result {
            TxResult::Push(p) => {
                t.raw("{\"index\":")
                    .uint(i as u64)
                    .raw(",\"messageId\":")
                    .str(&p.message_id)
                    .raw(",\"partition\":")
                    .str(&p.partition)
                    .raw(",\"partitionId\":")
                    .str(&p.partition_id)
                    .raw(",\"queueName\":")
                    .str(&p.queue)
                    .raw(",\"status\":")
                    .str(push_status(&p.status))
                    .raw(",\"success\":true,\"transactionId\":")
                    .str(&p.transaction_id)
                    .raw(",\"type\":\"push\"}");
            }
            TxResult::Ack(a) => {
                t.raw(if a.dlq {
                    "{\"dlq\":true,\"error\":"
                } else {
                    "{\"dlq\":false,\"error\":"
                });
                if a.success {
                    t.raw("null");
                } else {
                    let error = a.error.as_deref().filter(|e| !e.is_empty());
                    t.str(error.unwrap_or("Ack refused"));
                }
                t.raw(",\"index\":")
                    .uint(i as u64)
                    .raw(",\"leaseReleased\":")
                    .bool(a.lease_released)
                    .raw(",\"partitionId\":")
                    .str(&a.partition_id)
                    .raw(",\"success\":")
                    .bool(a.success)
                    .raw(",\"transactionId\":")
                    .str(&a.transaction_id)
                    .raw(",\"type\":\"ack\"}");
            }
        }
    }
    t.raw("],\"success\":")
        .bool(r.success)
        .raw(",\"transactionId\":")
        .str(&r.transaction_id)
        .raw("}");
    t.into_bytes()
}

/// The 15 options with their wire names and JSON types (contract §1.7), and those beyond Queen that are
/// set (`super::redelivery`), as a JSON object.
pub(crate) fn options(t: &mut JsonText, o: &QueueOptions) {
    t.raw("{\"completedRetentionSeconds\":")
        .uint(o.completed_retention_s)
        .raw(",\"deadLetterQueue\":")
        .bool(o.dead_letter_queue)
        .raw(",\"delayedProcessing\":")
        .uint(o.delayed_processing_s);
    if !o.delivery_log.is_off() {
        t.raw(",\"deliveryLog\":").str(o.delivery_log.as_str());
    }
    t.raw(",\"dlqAfterMaxRetries\":")
        .bool(o.dlq_after_max_retries)
        .raw(",\"encryptionEnabled\":")
        .bool(o.encryption_enabled)
        .raw(",\"leaseTime\":")
        .uint(o.lease_time_s)
        .raw(",\"maxSize\":")
        .uint(o.max_size)
        .raw(",\"maxWaitTimeSeconds\":")
        .uint(o.max_wait_time_s)
        .raw(",\"priority\":")
        .int(o.priority);
    if o.reclaim_limit > 0 {
        t.raw(",\"reclaimLimit\":").uint(o.reclaim_limit.into());
    }
    t.raw(",\"retentionEnabled\":")
        .bool(o.retention_enabled)
        .raw(",\"retentionSeconds\":")
        .uint(o.retention_s);
    if let Some(b) = o.retry_backoff() {
        t.raw(",\"retryBackoff\":{\"baseMs\":")
            .uint(b.base_ms)
            .raw(",\"factor\":")
            .float(b.factor_permille as f64 / 1000.0)
            .raw(",\"maxMs\":")
            .uint(b.max_ms)
            .raw("}");
    }
    t.raw(",\"retryDelay\":")
        .uint(o.retry_delay_ms)
        .raw(",\"retryLimit\":")
        .uint(o.retry_limit.into())
        .raw(",\"ttl\":")
        .uint(o.ttl_s)
        .raw(",\"windowBuffer\":")
        .uint(o.window_buffer_s)
        .raw("}");
}

/// The options object as a `Value`, for the views (which build their answers as `Value`s).
#[cfg(feature = "views")]
pub(crate) fn options_value(o: &QueueOptions) -> Value {
    let mut t = JsonText::with_capacity(512);
    options(&mut t, o);
    serde_json::from_str(&t.into_string()).unwrap_or(Value::Null)
}

/// The `/configure` answer.
pub(crate) fn configure_reply(r: &ConfigureReply) -> Vec<u8> {
    let mut t = JsonText::with_capacity(640);
    t.raw("{\"configured\":true,\"namespace\":")
        .str(&r.namespace)
        .raw(",\"options\":");
    options(&mut t, &r.options);
    t.raw(",\"partitionId\":")
        .str(&r.partition_id)
        .raw(",\"queue\":")
        .str(&r.queue)
        .raw(",\"queueId\":")
        .str(&r.queue_id)
        .raw(",\"task\":")
        .str(&r.task)
        .raw("}");
    t.into_bytes()
}

/// One dead letter (contract §1.8): `createdAt` equals `failedAt`; `producerSub` is always null.
pub(crate) fn dead_letter(t: &mut JsonText, d: &DeadLetterView) {
    t.raw("{\"id\":")
        .str(&d.id)
        .raw(",\"messageId\":")
        .str(&d.message_id)
        .raw(",\"transactionId\":")
        .str(&d.transaction_id)
        .raw(",\"partitionId\":")
        .str(&d.partition_id)
        .raw(",\"queue\":")
        .str(&d.queue)
        .raw(",\"partition\":")
        .str(&d.partition)
        .raw(",\"consumerGroup\":")
        .str(&d.consumer_group)
        .raw(",\"errorMessage\":")
        .str(&d.error_message)
        .raw(",\"retryCount\":")
        .uint(d.retry_count.into())
        .raw(",\"data\":")
        .payload(&d.payload)
        .raw(",\"createdAt\":")
        .iso_millis(d.failed_at_ms)
        .raw(",\"failedAt\":")
        .iso_millis(d.failed_at_ms)
        .raw(",\"producerSub\":null,\"offset\":")
        .uint(d.offset)
        .raw(",\"originalCreatedAt\":")
        .iso_millis(d.original_created_at_ms)
        .raw("}");
}

/// One dead letter as a `Value`, for the bulk dead-letter answers (views build).
#[cfg(feature = "views")]
pub(crate) fn dead_letter_value(d: &DeadLetterView) -> Value {
    let mut t = JsonText::with_capacity(512 + d.payload.len());
    dead_letter(&mut t, d);
    serde_json::from_str(&t.into_string()).unwrap_or(Value::Null)
}

/// The DLQ listing: a page of dead letters.
pub(crate) fn dlq_list(letters: &[DeadLetterView], limit: usize, offset: usize) -> Vec<u8> {
    let payload_bytes: usize = letters.iter().map(|d| d.payload.len()).sum();
    let mut t = JsonText::with_capacity(96 + payload_bytes + letters.len() * 512);
    t.raw("{\"total\":")
        .uint(letters.len() as u64)
        .raw(",\"messages\":[");
    for (i, d) in letters.iter().enumerate() {
        if i > 0 {
            t.raw(",");
        }
        dead_letter(&mut t, d);
    }
    t.raw("],\"pagination\":{\"limit\":")
        .uint(limit as u64)
        .raw(",\"offset\":")
        .uint(offset as u64)
        .raw("}}");
    t.into_bytes()
}

/// The replay answer (contract §1.8 DECIDE).
pub(crate) fn replay_reply(r: &ReplayReply) -> Vec<u8> {
    let mut t = JsonText::with_capacity(384);
    t.raw(if r.rows_removed > 0 {
        "{\"dlqRowRemoved\":true,\"id\":"
    } else {
        "{\"dlqRowRemoved\":false,\"id\":"
    })
    .str(&r.id)
    .raw(",\"messageId\":")
    .str(&r.message_id)
    .raw(",\"partition\":")
    .str(&r.partition)
    .raw(",\"partitionId\":")
    .str(&r.partition_id)
    .raw(",\"queue\":")
    .str(&r.queue)
    .raw(",\"replayed\":true,\"status\":")
    .str(push_status(&r.status))
    .raw(",\"success\":true,\"transactionId\":")
    .str(&r.transaction_id)
    .raw("}");
    t.into_bytes()
}

#[cfg(test)]
mod tests {
    //! The writers against the serde-derived shapes they replaced (kept here as the reference): the
    //! same bytes for the same replies.
    use super::*;
    use crate::core::timefmt::{iso_micros, iso_millis};
    use serde::Serialize;
    use serde_json::{json as object, Value};

    /// `object[key] = value`.
    fn set(object: &mut Value, key: &str, value: Value) {
        object[key] = value;
    }

    /// One push result (contract §1.2): snake_case plus the camelCase aliases. A duplicate has no
    /// `trace_id` and no `offset`; a queued result has both (`trace_id` may be `null`).
    #[derive(Serialize)]
    struct PushResultOut<'a> {
        index: usize,
        status: &'static str,
        transaction_id: &'a str,
        #[serde(rename = "transactionId")]
        transaction_id_camel: &'a str,
        message_id: &'a str,
        #[serde(rename = "messageId")]
        message_id_camel: &'a str,
        partition_id: &'a str,
        #[serde(rename = "partitionId")]
        partition_id_camel: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        trace_id: Option<Option<&'a str>>,
        #[serde(rename = "queueName")]
        queue_name: &'a str,
        partition: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        offset: Option<u64>,
    }

    /// One push result (contract §1.2).
    fn old_push_result(r: &PushResult) -> PushResultOut<'_> {
        let queued = r.status == PushStatus::Queued;
        PushResultOut {
            index: r.index,
            status: push_status(&r.status),
            transaction_id: &r.transaction_id,
            transaction_id_camel: &r.transaction_id,
            message_id: &r.message_id,
            message_id_camel: &r.message_id,
            partition_id: &r.partition_id,
            partition_id_camel: &r.partition_id,
            trace_id: queued.then_some(r.trace_id.as_deref()),
            queue_name: &r.queue,
            partition: &r.partition,
            offset: queued.then_some(r.offset),
        }
    }

    /// One delivered message (contract §1.3, appendix D15): the payload is `data`.
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct DeliveredOut<'a> {
        id: &'a str,
        transaction_id: &'a str,
        trace_id: Option<&'a str>,
        data: &'a Payload,
        producer_sub: Option<&'a str>,
        created_at: String,
        queue: &'a str,
        partition: &'a str,
        partition_id: &'a str,
        lease_id: &'a str,
        consumer_group: &'a str,
        delivery_attempt: u32,
        offset: u64,
        retry_count: u32,
    }

    /// One delivered message.
    fn old_delivered(m: &DeliveredMessage) -> DeliveredOut<'_> {
        DeliveredOut {
            id: &m.id,
            transaction_id: &m.transaction_id,
            trace_id: m.trace_id.as_deref(),
            data: &m.payload,
            producer_sub: m.producer_sub.as_deref(),
            created_at: iso_micros(m.created_at_ms),
            queue: &m.queue,
            partition: &m.partition,
            partition_id: &m.partition_id,
            lease_id: &m.lease_id,
            consumer_group: &m.consumer_group,
            delivery_attempt: m.delivery_attempt,
            offset: m.offset,
            retry_count: m.retry_count,
        }
    }

    /// The autopilot echo of a pop answer.
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct AutopilotOut {
        batch: u32,
        partitions: u32,
        wait_ms: u64,
    }

    /// A pop answer: `autopilot`, `conflation` and `conflationConflict` only when they apply.
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct PopOut<'a> {
        success: bool,
        queue: Option<&'a str>,
        partition: Option<&'a str>,
        partition_id: Option<&'a str>,
        lease_id: &'a str,
        consumer_group: &'a str,
        messages: SeqOf<'a, DeliveredMessage, DeliveredOut<'a>>,
        partitions_claimed: u32,
        #[serde(skip_serializing_if = "Option::is_none")]
        autopilot: Option<AutopilotOut>,
        #[serde(skip_serializing_if = "Option::is_none")]
        conflation: Option<bool>,
        #[serde(skip_serializing_if = "Option::is_none")]
        conflation_conflict: Option<bool>,
    }

    /// A pop answer with messages (or an empty conflating one).
    fn old_pop_reply(r: &PopReply, conflation_requested: bool) -> PopOut<'_> {
        PopOut {
            success: true,
            queue: r.queue.as_deref(),
            partition: r.partition.as_deref(),
            partition_id: r.partition_id.as_deref(),
            lease_id: &r.lease_id,
            consumer_group: &r.consumer_group,
            messages: SeqOf(&r.messages, old_delivered),
            partitions_claimed: r.partitions_claimed,
            autopilot: r.autopilot.map(|a| AutopilotOut {
                batch: a.batch,
                partitions: a.partitions,
                wait_ms: a.wait_ms,
            }),
            conflation: (r.conflation || conflation_requested).then_some(r.conflation),
            conflation_conflict: r.conflation_conflict.then_some(true),
        }
    }

    /// One ack result (contract §1.4): `error` is `null` on success.
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct AckResultOut<'a> {
        index: usize,
        transaction_id: &'a str,
        partition_id: &'a str,
        success: bool,
        error: Option<&'a str>,
        queue_name: Option<&'a str>,
        partition_name: Option<&'a str>,
        lease_released: bool,
        dlq: bool,
        status: &'a str,
    }

    /// One ack result.
    fn old_ack_result(r: &AckResult) -> AckResultOut<'_> {
        AckResultOut {
            index: r.index,
            transaction_id: &r.transaction_id,
            partition_id: &r.partition_id,
            success: r.success,
            // Any refused item must carry a non-empty error (the Go SDK reads only `error`).
            error: (!r.success).then(|| {
                r.error
                    .as_deref()
                    .filter(|e| !e.is_empty())
                    .unwrap_or("Ack refused")
            }),
            queue_name: r.queue.as_deref(),
            partition_name: r.partition.as_deref(),
            lease_released: r.lease_released,
            dlq: r.dlq,
            status: &r.status,
        }
    }

    // The object answers as they were built before (`Value` trees through `object!`, serde-derived
    // structs), the reference for the writers that replaced them.
    /// The lease-extend object (contract §1.5, appendix D9).
    fn old_extend_reply(r: &ExtendReply) -> Value {
        let success = r.renewed > 0;
        let expiry = r.expires_at_ms.filter(|_| success).map(iso_micros);
        let mut body = object!({
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
            set(&mut body, "error", Value::String(error));
        }
        body
    }

    /// The transaction object (contract §1.6): results flat, one per pushed item and one per ack.
    fn old_tx_reply(r: &TxReply) -> Value {
        let results: Vec<Value> = r
            .results
            .iter()
            .enumerate()
            .map(|(i, result)| match result {
                TxResult::Push(p) => object!({
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
                TxResult::Ack(a) => object!({
                    "index": i,
                    "type": "ack",
                    "success": a.success,
                    "transactionId": a.transaction_id,
                    "partitionId": a.partition_id,
                    "error": (!a.success).then(|| {
                        a.error.clone().filter(|e| !e.is_empty()).unwrap_or_else(|| "Ack refused".into())
                    }),
                    "dlq": a.dlq,
                    "leaseReleased": a.lease_released,
                }),
            })
            .collect();
        let mut body = object!({
            "transactionId": r.transaction_id,
            "success": r.success,
        });
        set(&mut body, "results", Value::Array(results));
        if !r.success {
            let error = r
                .error
                .clone()
                .filter(|e| !e.is_empty())
                .unwrap_or_else(|| "Transaction failed".to_string());
            set(&mut body, "error", Value::String(error));
        }
        body
    }

    /// The 15 options with their wire names and JSON types (contract §1.7).
    fn old_options(o: &QueueOptions) -> Value {
        let mut echo = object!({
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
        });
        old_echo(o, &mut echo);
        echo
    }

    /// The `/configure` answer.
    fn old_configure_reply(r: &ConfigureReply) -> Value {
        let mut reply = object!({
            "configured": true,
            "queueId": r.queue_id,
            "partitionId": r.partition_id,
            "queue": r.queue,
            "namespace": r.namespace,
            "task": r.task,
        });
        set(&mut reply, "options", old_options(&r.options));
        reply
    }

    /// One dead letter (contract §1.8): `createdAt` equals `failedAt`; `producerSub` is always null.
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct DeadLetterOut<'a> {
        id: &'a str,
        message_id: &'a str,
        transaction_id: &'a str,
        partition_id: &'a str,
        queue: &'a str,
        partition: &'a str,
        consumer_group: &'a str,
        error_message: &'a str,
        retry_count: u32,
        data: &'a Payload,
        created_at: String,
        failed_at: String,
        producer_sub: Option<&'a str>,
        offset: u64,
        original_created_at: String,
    }

    /// One dead letter.
    fn old_dead_letter(d: &DeadLetterView) -> DeadLetterOut<'_> {
        let failed_at = iso_millis(d.failed_at_ms);
        DeadLetterOut {
            id: &d.id,
            message_id: &d.message_id,
            transaction_id: &d.transaction_id,
            partition_id: &d.partition_id,
            queue: &d.queue,
            partition: &d.partition,
            consumer_group: &d.consumer_group,
            error_message: &d.error_message,
            retry_count: d.retry_count,
            data: &d.payload,
            created_at: failed_at.clone(),
            failed_at,
            producer_sub: None,
            offset: d.offset,
            original_created_at: iso_millis(d.original_created_at_ms),
        }
    }

    /// The DLQ listing: a page of dead letters.
    #[derive(Serialize)]
    struct DlqListOut<'a> {
        total: usize,
        messages: SeqOf<'a, DeadLetterView, DeadLetterOut<'a>>,
        pagination: Value,
    }

    /// The replay answer (contract §1.8 DECIDE).
    fn old_replay_reply(r: &ReplayReply) -> Value {
        object!({
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

    /// Adds the options that are set to an `options` echo object (was `redelivery::echo`).
    fn old_echo(o: &QueueOptions, out: &mut Value) {
        let Some(map) = out.as_object_mut() else {
            return;
        };
        if o.reclaim_limit > 0 {
            map.insert("reclaimLimit".into(), Value::from(o.reclaim_limit));
        }
        if let Some(b) = o.retry_backoff() {
            let mut backoff = serde_json::Map::new();
            backoff.insert("baseMs".into(), Value::from(b.base_ms));
            backoff.insert(
                "factor".into(),
                Value::from(b.factor_permille as f64 / 1000.0),
            );
            backoff.insert("maxMs".into(), Value::from(b.max_ms));
            map.insert("retryBackoff".into(), Value::Object(backoff));
        }
        if !o.delivery_log.is_off() {
            map.insert("deliveryLog".into(), Value::from(o.delivery_log.as_str()));
        }
    }

    fn sample_messages() -> Vec<DeliveredMessage> {
        let texts = [
            ("plain", "{\"n\":1,\"pad\":\"xxxx\"}"),
            ("quote\" and \\ back\tslash\u{1}", "[1,2.5,\"é\",null]"),
            ("unicode é 漢字 😀", "\"a string payload\""),
        ];
        texts
            .iter()
            .enumerate()
            .map(|(i, (name, payload))| DeliveredMessage {
                id: format!("0192f3c4-5e6f-7a8b-9c0d-e1f2a3b4c5d{i}").into(),
                transaction_id: format!("tx-{name}").into(),
                trace_id: (i != 1).then(|| format!("trace-{name}").into()),
                payload: Payload::from_json(payload.to_string()).unwrap(),
                producer_sub: (i == 2).then(|| (*name).into()),
                created_at_ms: 1_764_600_000_123 + i as i64,
                queue: format!("q-{name}").into(),
                partition: (*name).into(),
                partition_id: format!("pid-{i}").into(),
                lease_id: "lease-1".into(),
                consumer_group: "__QUEUE_MODE__".into(),
                delivery_attempt: i as u32 + 1,
                offset: u64::MAX - i as u64,
                retry_count: i as u32,
            })
            .collect()
    }

    /// Messages as a pop hands them out: runs that share their partition's names and lease (clones of
    /// one text) and their creation time, broken by a message that differs in one of them only.
    fn runs_of_shared_messages() -> Vec<DeliveredMessage> {
        let base = sample_messages();
        let mut out: Vec<DeliveredMessage> = Vec::new();
        for (k, from) in [0, 0, 0, 0, 1, 0, 0, 2, 2].into_iter().enumerate() {
            let mut m = base[from].clone();
            m.id = format!("id-{k}").into();
            // Pairs of messages share a time.
            m.created_at_ms += (k / 2) as i64;
            match k {
                // Another lease, the rest of the names shared.
                2 => m.lease_id = "lease-2".into(),
                // Equal text in another allocation: written again, the same.
                3 => m.queue = String::from(&m.queue).into(),
                // Another group.
                6 => m.consumer_group = "g2".into(),
                _ => {}
            }
            out.push(m);
        }
        out
    }

    #[test]
    fn pop_replies_are_written_as_before() {
        let messages = sample_messages();
        let shared = PopReply {
            lease_id: "lease-1".into(),
            consumer_group: "__QUEUE_MODE__".into(),
            messages: runs_of_shared_messages(),
            partitions_claimed: 2,
            queue: None,
            partition: None,
            partition_id: None,
            conflation: false,
            conflation_conflict: false,
            autopilot: None,
        };
        assert_eq!(
            String::from_utf8(pop_reply(&shared, false)).unwrap(),
            serde_json::to_string(&old_pop_reply(&shared, false)).unwrap()
        );
        let replies = [
            PopReply {
                lease_id: "lease-1".into(),
                consumer_group: "workers \"a\"".into(),
                messages: messages.clone(),
                partitions_claimed: 3,
                queue: Some("q".into()),
                partition: None,
                partition_id: Some("pid".into()),
                conflation: false,
                conflation_conflict: false,
                autopilot: None,
            },
            PopReply {
                lease_id: String::new(),
                consumer_group: "g".into(),
                messages: Vec::new(),
                partitions_claimed: 0,
                queue: None,
                partition: Some("p".into()),
                partition_id: None,
                conflation: true,
                conflation_conflict: true,
                autopilot: Some(AutopilotEcho {
                    batch: 100,
                    partitions: 4,
                    wait_ms: 250,
                }),
            },
        ];
        for reply in &replies {
            for requested in [false, true] {
                assert_eq!(
                    String::from_utf8(pop_reply(reply, requested)).unwrap(),
                    serde_json::to_string(&old_pop_reply(reply, requested)).unwrap()
                );
            }
        }
    }

    #[test]
    fn push_and_ack_results_are_written_as_before() {
        let push: Vec<PushResult> = (0..4)
            .map(|i| PushResult {
                index: i,
                status: if i == 2 {
                    PushStatus::Duplicate
                } else {
                    PushStatus::Queued
                },
                message_id: format!("m-{i}").into(),
                transaction_id: format!("t \"{i}\"").into(),
                partition_id: format!("pid-{i}").into(),
                queue: "orders".into(),
                partition: "Default".into(),
                offset: 1000 + i as u64,
                trace_id: (i == 1).then(|| "trace".into()),
            })
            .collect();
        assert_eq!(
            String::from_utf8(push_results(&push)).unwrap(),
            serde_json::to_string(&SeqOf(&push, old_push_result)).unwrap()
        );
        assert_eq!(push_results(&[]), b"[]");
        // As a push hands them out: a partition's results share its names (clones of one text); runs
        // broken by a result that differs in one name only.
        let (pid, queue, partition) = (
            SharedStr::from("7"),
            SharedStr::from("q"),
            SharedStr::from("p"),
        );
        let shared: Vec<PushResult> = (0..8)
            .map(|i| {
                let mut r = push[i % 4].clone();
                r.index = i;
                (r.partition_id, r.queue, r.partition) =
                    (pid.clone(), queue.clone(), partition.clone());
                match i {
                    3 => r.partition_id = "8".into(),
                    5 => r.queue = "q2".into(),
                    6 => r.partition = "p2".into(),
                    _ => {}
                }
                r
            })
            .collect();
        assert_eq!(
            String::from_utf8(push_results(&shared)).unwrap(),
            serde_json::to_string(&SeqOf(&shared, old_push_result)).unwrap()
        );
        let acks: Vec<AckResult> = (0..4)
            .map(|i| AckResult {
                index: i,
                transaction_id: format!("t-{i}").into(),
                partition_id: format!("p\n{i}").into(),
                success: i % 2 == 0,
                error: match i {
                    1 => Some(String::new()),
                    3 => Some("Lease expired".into()),
                    _ => None,
                },
                queue: (i > 0).then(|| "q".into()),
                partition: (i > 1).then(|| "p".into()),
                lease_released: i == 0,
                dlq: i == 3,
                status: "completed".into(),
            })
            .collect();
        assert_eq!(
            String::from_utf8(ack_results(&acks)).unwrap(),
            serde_json::to_string(&SeqOf(&acks, old_ack_result)).unwrap()
        );
        // As an ack hands them out: a partition's results share its names; runs broken by a result
        // without them, or with one name that differs.
        let shared: Vec<AckResult> = (0..9)
            .map(|i| {
                let mut r = acks[i % 4].clone();
                r.index = i;
                (r.queue, r.partition) = (Some(queue.clone()), Some(partition.clone()));
                match i {
                    3 => r.queue = None,
                    4 => (r.queue, r.partition) = (None, None),
                    5 => (r.queue, r.partition) = (None, None),
                    6 => r.partition = Some("p2".into()),
                    _ => {}
                }
                r
            })
            .collect();
        assert_eq!(
            String::from_utf8(ack_results(&shared)).unwrap(),
            serde_json::to_string(&SeqOf(&shared, old_ack_result)).unwrap()
        );
    }

    fn text(bytes: Vec<u8>) -> String {
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn object_answers_are_written_as_before() {
        for (renewed, expires, error) in [
            (1, Some(1_714_564_800_123), None),
            (0, Some(1_714_564_800_123), None),
            (0, None, Some(String::new())),
            (0, None, Some("Lease \"x\" expired".to_string())),
        ] {
            let reply = ExtendReply {
                lease_id: "lease-é\n".into(),
                renewed,
                expires_at_ms: expires,
                error,
            };
            assert_eq!(
                text(extend_reply(&reply)),
                old_extend_reply(&reply).to_string()
            );
        }
        let push = |i: usize, status| {
            TxResult::Push(PushResult {
                index: i,
                status,
                message_id: format!("m-{i}").into(),
                transaction_id: format!("t \"{i}\"").into(),
                partition_id: "pid".into(),
                queue: "orders".into(),
                partition: "Default".into(),
                offset: 7,
                trace_id: None,
            })
        };
        let ack = |i: usize, success, error: Option<&str>| {
            TxResult::Ack(AckResult {
                index: i,
                transaction_id: format!("t-{i}").into(),
                partition_id: "p\t1".into(),
                success,
                error: error.map(str::to_string),
                queue: None,
                partition: None,
                lease_released: i.is_multiple_of(2),
                dlq: i.is_multiple_of(3),
                status: "completed".into(),
            })
        };
        let results = vec![
            push(0, PushStatus::Queued),
            ack(1, true, None),
            push(2, PushStatus::Duplicate),
            ack(3, false, Some("")),
            ack(4, false, Some("Lease expired")),
            ack(5, false, None),
            ack(6, true, None),
        ];
        for (success, error, results) in [
            (true, None, results.clone()),
            (false, Some("no".to_string()), results),
            (false, Some(String::new()), Vec::new()),
            (false, None, Vec::new()),
            (true, None, Vec::new()),
        ] {
            let reply = TxReply {
                transaction_id: "tx-1".into(),
                success,
                error,
                results,
            };
            assert_eq!(text(tx_reply(&reply)), old_tx_reply(&reply).to_string());
        }
        let mut options = QueueOptions::configure_defaults();
        options.priority = -3;
        let mut all = options.clone();
        all.reclaim_limit = 4;
        all.backoff_base_ms = 100;
        all.backoff_factor_permille = 2500;
        all.backoff_max_ms = 60_000;
        all.delivery_log = DeliveryLogMode::Failures;
        let mut whole = all.clone();
        whole.backoff_factor_permille = 2000;
        whole.delivery_log = DeliveryLogMode::All;
        for options in [options, all, whole] {
            let reply = ConfigureReply {
                queue_id: "qid".into(),
                partition_id: "pid".into(),
                queue: "q\"1".into(),
                namespace: String::new(),
                task: "t".into(),
                options,
            };
            assert_eq!(
                text(configure_reply(&reply)),
                old_configure_reply(&reply).to_string()
            );
        }
        let letters: Vec<DeadLetterView> = (0..3)
            .map(|i| DeadLetterView {
                id: format!("dlq-{i}"),
                message_id: format!("m-{i}"),
                transaction_id: "t\"x".into(),
                partition_id: "pid".into(),
                queue: "q".into(),
                partition: "Default".into(),
                consumer_group: "__QUEUE_MODE__".into(),
                error_message: "Max retries \n exceeded".into(),
                retry_count: i,
                payload: serde_json::json!({"n": i, "s": "é"}).into(),
                failed_at_ms: 1_714_564_800_000 + i as i64,
                offset: 10 + i as u64,
                original_created_at_ms: 1_714_564_700_999,
            })
            .collect();
        for n in [0, 1, 3] {
            let old = serde_json::to_string(&DlqListOut {
                total: n,
                messages: SeqOf(&letters[..n], old_dead_letter),
                pagination: object!({"limit": 100, "offset": 2}),
            })
            .unwrap();
            assert_eq!(text(dlq_list(&letters[..n], 100, 2)), old);
        }
        for rows_removed in [0, 1] {
            let reply = ReplayReply {
                id: "d-1".into(),
                transaction_id: "t".into(),
                message_id: "m".into(),
                queue: "q".into(),
                partition: "p".into(),
                partition_id: "pid".into(),
                status: PushStatus::Duplicate,
                rows_removed,
            };
            assert_eq!(
                text(replay_reply(&reply)),
                old_replay_reply(&reply).to_string()
            );
        }
    }
}

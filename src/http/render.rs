//! Core replies → JSON answers, with the contract's field names (and the appendix's additions).
//!
//! The answers that carry one entry per message are written without a `Value` tree per message: push
//! and ack results and pop replies as JSON text straight into the body ([`JsonText`]: literal keys, no
//! per-field serializer calls), dead letters as borrowed structs serialized by `serde_json`. Each payload
//! is written as the JSON text it was stored as.

use super::json_text::{JsonText, Repeat};
use super::object::{object, set};
use crate::core::api::*;
use crate::core::timefmt::{iso_micros, iso_millis};
use serde::{Serialize, Serializer};
use serde_json::Value;

/// Serializes the items of a slice as a JSON array, each through a function, without collecting them.
pub(crate) struct SeqOf<'a, T, S>(pub(crate) &'a [T], pub(crate) fn(&'a T) -> S);

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

/// The lease-extend object (contract §1.5, appendix D9).
pub(crate) fn extend_reply(r: &ExtendReply) -> Value {
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
pub(crate) fn tx_reply(r: &TxReply) -> Value {
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
pub(crate) fn options(o: &QueueOptions) -> Value {
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
    super::redelivery::echo(o, &mut echo);
    echo
}

/// The `/configure` answer.
pub(crate) fn configure_reply(r: &ConfigureReply) -> Value {
    let mut reply = object!({
        "configured": true,
        "queueId": r.queue_id,
        "partitionId": r.partition_id,
        "queue": r.queue,
        "namespace": r.namespace,
        "task": r.task,
    });
    set(&mut reply, "options", options(&r.options));
    reply
}

/// One dead letter (contract §1.8): `createdAt` equals `failedAt`; `producerSub` is always null.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DeadLetterOut<'a> {
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
pub(crate) fn dead_letter(d: &DeadLetterView) -> DeadLetterOut<'_> {
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
pub(crate) struct DlqListOut<'a> {
    pub(crate) total: usize,
    pub(crate) messages: SeqOf<'a, DeadLetterView, DeadLetterOut<'a>>,
    pub(crate) pagination: Value,
}

/// The replay answer (contract §1.8 DECIDE).
pub(crate) fn replay_reply(r: &ReplayReply) -> Value {
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

#[cfg(test)]
mod tests {
    //! The writers against the serde-derived shapes they replaced (kept here as the reference): the
    //! same bytes for the same replies.
    use super::*;

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
}

//! Rendering for the view routes (feature `views`): counts, queue summaries and details, messages.

use crate::core::api::*;
use crate::core::timefmt::iso_millis;
use serde_json::{json, Value};

/// A lane's in-flight count: the leased span when the lease is live.
fn processing(lane: &LaneView, now: i64) -> u64 {
    match (lane.lease_expires_at_ms, lane.batch_end) {
        (Some(x), Some(end)) if x > now && lane.lease_id.is_some() => {
            (end as i64 - lane.committed).max(0) as u64
        }
        _ => 0,
    }
}

/// A lane's failed count: the span of its last claim while it waits out the retry delay after a
/// `failed` ack (it is delivered again when the hold ends).
fn failed(lane: &LaneView, now: i64) -> u64 {
    match (lane.hold_until_ms, lane.batch_end) {
        (Some(h), Some(end)) if h > now && lane.lease_id.is_none() => {
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
    /// Waiting out a retry delay after a `failed` ack.
    pub(crate) failed: u64,
    pub(crate) dead_letter: u64,
}

pub(crate) fn partition_counts(p: &PartitionView, now: i64) -> Counts {
    let lane = p
        .lanes
        .iter()
        .find(|l| l.consumer_group == QUEUE_MODE_GROUP);
    let (pending, processing, failed) = match lane {
        Some(l) => {
            let inflight = processing(l, now);
            let failed = failed(l, now).min(l.backlog);
            (
                l.backlog.saturating_sub(inflight + failed).min(p.messages),
                inflight,
                failed,
            )
        }
        None => (p.messages, 0, 0),
    };
    // A dead-lettered message is listed as `dead_letter` (routes, `list_messages`), not in the category its
    // offset would put it in.
    let (dead_completed, dead_pending) = p.dead_retained;
    let pending = pending.saturating_sub(dead_pending);
    Counts {
        total: p.messages,
        pending,
        processing,
        completed: p
            .messages
            .saturating_sub(pending + processing + failed + dead_pending + dead_completed),
        failed,
        // Retained messages with a dead-letter row, each once: the rows themselves (one per group that
        // filed the message, kept after retention removes it) are what `/dlq` lists.
        dead_letter: dead_pending + dead_completed,
    }
}

pub(crate) fn counts_json(c: &Counts) -> Value {
    json!({
        "total": c.total,
        "pending": c.pending,
        "processing": c.processing,
        "completed": c.completed,
        "failed": c.failed,
        "deadLetter": c.dead_letter,
    })
}

pub(crate) fn sum(counts: impl Iterator<Item = Counts>) -> Counts {
    counts.fold(
        Counts {
            total: 0,
            pending: 0,
            processing: 0,
            completed: 0,
            failed: 0,
            dead_letter: 0,
        },
        |a, c| Counts {
            total: a.total + c.total,
            pending: a.pending + c.pending,
            processing: a.processing + c.processing,
            completed: a.completed + c.completed,
            failed: a.failed + c.failed,
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
    let mut lane = json!({
        "consumerGroup": l.consumer_group,
        "committedOffset": l.committed,
        "backlog": l.backlog,
        "leaseId": l.lease_id,
        "leaseExpiresAt": l.lease_expires_at_ms.map(iso_millis),
        "batchEnd": l.batch_end,
        "retryCount": l.retry_count,
        "attemptCount": l.attempt_count,
        "holdUntil": l.hold_until_ms.map(iso_millis),
        // The lane's stored counts: what the page's throughput pictures sample.
        "counts": {
            "delivered": l.delivered,
            "acked": l.acked,
            "failed": l.failed,
        },
    });
    // reclaimLimit's quarantine, shown only on a lane that is in one.
    if let Some(offset) = l.quarantined_offset {
        lane["quarantinedOffset"] = json!(offset);
        lane["expiryStreak"] = json!(l.expiry_streak);
    }
    lane
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
        "options": crate::http::render::options_value(&q.options),
        "partitions": partitions,
        "totals": counts_json(&queue_counts(q, now)),
    })
}

/// A stored message for the message browser (the payload as `payload` and as `data`, as stored).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MessageOut {
    id: String,
    transaction_id: String,
    partition_id: String,
    queue_path: String,
    queue: String,
    partition: String,
    namespace: Option<String>,
    task: Option<String>,
    /// `pending`, `processing` or `completed`, for the queue-mode group.
    pub(crate) status: &'static str,
    trace_id: Option<String>,
    producer_sub: Option<String>,
    queue_priority: Option<i64>,
    created_at: String,
    offset: u64,
    /// Whether the stored payload is an encryption envelope (computed before it is opened).
    is_encrypted: bool,
    /// Trace events recorded about this message (`GET /traces/:partitionId/:transactionId` lists them).
    pub(crate) trace_count: u64,
    pub(crate) payload: Payload,
    pub(crate) data: Payload,
}

/// A stored message for the message browser.
pub(crate) fn message(m: MessageView, q: Option<&QueueView>, now: i64) -> MessageOut {
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
    MessageOut {
        queue_path: format!("{}/{}", m.queue, m.partition),
        id: m.id,
        transaction_id: m.transaction_id,
        partition_id: m.partition_id,
        queue: m.queue,
        partition: m.partition,
        namespace: q.map(|q| q.namespace.clone()),
        task: q.map(|q| q.task.clone()),
        status,
        trace_id: m.trace_id,
        producer_sub: None,
        queue_priority: q.map(|q| q.options.priority),
        created_at: iso_millis(m.created_at_ms),
        offset: m.offset,
        is_encrypted: crate::http::crypto::envelope_of(&m.payload).is_some(),
        trace_count: 0,
        data: m.payload.clone(),
        payload: m.payload,
    }
}

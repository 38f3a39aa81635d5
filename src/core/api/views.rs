//! Views for dashboards, status and the page.

use super::*;

/// A lane as the page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneView {
    /// Consumer group.
    pub consumer_group: String,
    /// Last committed offset; -1 = nothing.
    pub committed: i64,
    /// Messages after the cursor.
    pub backlog: u64,
    /// Live lease id, if any.
    pub lease_id: Option<String>,
    /// When the live lease expires.
    pub lease_expires_at_ms: Option<i64>,
    /// Inclusive end of the leased span, or of the failed span while it waits out its retry delay.
    pub batch_end: Option<u64>,
    /// Retry budget used.
    pub retry_count: u32,
    /// Redelivery counter.
    pub attempt_count: u32,
    /// Not claimable before this instant.
    pub hold_until_ms: Option<i64>,
    /// The head `reclaimLimit` quarantined (claims deliver it alone), if any.
    pub quarantined_offset: Option<u64>,
    /// Lease expiries in a row of claims starting at the same offset.
    pub expiry_streak: u32,
    /// Messages this group was delivered here, from the lane's stored counts (module `meters`).
    pub delivered: u64,
    /// Acks this group sent here (any status), from the lane's stored counts.
    pub acked: u64,
    /// Of those, acks with status `failed` or `dlq`.
    pub failed: u64,
}

/// One consumer group's position in one partition of a queue, for the consumer-group views.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupPartitionView {
    /// Partition name.
    pub partition: String,
    /// Partition id.
    pub partition_id: String,
    /// The lane (materialised from the subscription when the group has not claimed here yet).
    pub lane: LaneView,
    /// Push time of the oldest message after the cursor (`None` when nothing is pending).
    pub oldest_pending_ms: Option<i64>,
    /// True when the group has claimed here since its lane was made or last seeked.
    pub claimed: bool,
}

/// One consumer group on one queue: its subscription, if any, and its position in every partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupView {
    /// Group name (`__QUEUE_MODE__` for queue mode).
    pub group: String,
    /// Queue name.
    pub queue: String,
    /// The subscription fixed by the group's first pop (named groups only).
    pub subscription: Option<SubscriptionView>,
    /// One entry per partition of the queue, by partition name.
    pub partitions: Vec<GroupPartitionView>,
}

/// A named group's subscription as the views show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionView {
    /// The mode named at creation.
    pub mode: String,
    /// Start instant; `None` = from the oldest retained message.
    pub start_ms: Option<i64>,
    /// When it was created.
    pub created_at_ms: i64,
    /// Deliver only the newest message per partition.
    pub conflation: bool,
}

/// A partition as the page and the resources routes show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionView {
    /// Partition id.
    pub id: String,
    /// Partition name.
    pub name: String,
    /// When it was created.
    pub created_at_ms: i64,
    /// Next offset to assign.
    pub next_offset: u64,
    /// Lowest offset still retained.
    pub first_retained_offset: u64,
    /// Retained message count.
    pub messages: u64,
    /// Oldest retained message time.
    pub oldest_message_ms: Option<i64>,
    /// Newest message time.
    pub newest_message_ms: Option<i64>,
    /// One entry per group with a lane here.
    pub lanes: Vec<LaneView>,
    /// Retained messages with a dead-letter row (any group), at or below the queue-mode group's committed
    /// offset and above it: the message listing shows them as `dead_letter`, so the counts take them out
    /// of `completed` and `pending` and count them as `deadLetter`.
    pub dead_retained: (u64, u64),
}

/// A queue as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueView {
    /// Queue id.
    pub id: String,
    /// Queue name.
    pub name: String,
    /// Namespace label.
    pub namespace: String,
    /// Task label.
    pub task: String,
    /// When it was created.
    pub created_at_ms: i64,
    /// Its options.
    pub options: QueueOptions,
    /// Its partitions.
    pub partitions: Vec<PartitionView>,
}

/// A stored message as the message browser shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageView {
    /// Message id.
    pub id: String,
    /// Transaction id.
    pub transaction_id: String,
    /// Trace id.
    pub trace_id: Option<String>,
    /// 0-based offset.
    pub offset: u64,
    /// Push time.
    pub created_at_ms: i64,
    /// Payload.
    pub payload: Payload,
    /// Queue name.
    pub queue: String,
    /// Partition name.
    pub partition: String,
    /// Partition id.
    pub partition_id: String,
}

/// Totals since the storage was created (module `meters`), plus gauges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrokerStats {
    /// Messages queued by pushes.
    pub pushed: u64,
    /// Messages delivered by pops.
    pub popped: u64,
    /// Ack items accepted.
    pub acked: u64,
    /// Dead-letter rows stored.
    pub dlq_depth: u64,
    /// Dead-letter rows per queue.
    pub dlq_depth_by_queue: Vec<(String, u64)>,
    /// Queues.
    pub queues: u64,
    /// Partitions.
    pub partitions: u64,
    /// Retained messages.
    pub messages: u64,
    /// Live leases.
    pub live_leases: u64,
}

//! Dead letters, seek and consumer groups.

use super::*;

/// A dead-letter listing query.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DlqQuery {
    /// Only this queue.
    pub queue: Option<String>,
    /// Only this group.
    pub consumer_group: Option<String>,
    /// Page size (default 100).
    pub limit: usize,
    /// Rows to skip (newest first).
    pub offset: usize,
}

/// One dead letter as listed.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetterView {
    /// Dead-letter row id (what replay takes).
    pub id: String,
    /// Original message id.
    pub message_id: String,
    /// Original transaction id.
    pub transaction_id: String,
    /// Partition id.
    pub partition_id: String,
    /// Queue name.
    pub queue: String,
    /// Partition name.
    pub partition: String,
    /// Group that gave up on it.
    pub consumer_group: String,
    /// The error chain's result.
    pub error_message: String,
    /// Budget used when filed.
    pub retry_count: u32,
    /// Payload snapshot.
    pub payload: Payload,
    /// When it was filed.
    pub failed_at_ms: i64,
    /// Original offset.
    pub offset: u64,
    /// When the original message was pushed.
    pub original_created_at_ms: i64,
}

/// The answer to a replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayReply {
    /// The dead-letter row replayed.
    pub id: String,
    /// `dlq:<id>`.
    pub transaction_id: String,
    /// The new (or existing) message id.
    pub message_id: String,
    /// Queue name.
    pub queue: String,
    /// Partition name.
    pub partition: String,
    /// Partition id.
    pub partition_id: String,
    /// Queued or duplicate.
    pub status: PushStatus,
    /// Dead-letter rows removed.
    pub rows_removed: usize,
}

/// Where a seek moves a group's cursors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeekTarget {
    /// Past the last message.
    End,
    /// To the last message created at or before this instant.
    Timestamp(i64),
}

/// The answer to a seek.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeekReply {
    /// Lanes moved.
    pub partitions_updated: u32,
}

/// The answer to a consumer-group delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDeleteReply {
    /// Lanes removed.
    pub deleted_partitions: u32,
    /// Subscriptions removed.
    pub metadata_deleted: bool,
}

/// Periodic maintenance results.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MaintenanceReport {
    /// Messages removed by retention.
    pub retention_deleted: u64,
    /// Messages removed by eviction (`maxWaitTimeSeconds`).
    pub evicted: u64,
    /// Segments (rows) removed.
    pub segments_deleted: u64,
    /// Segments rewritten compressed (module `compaction`; builds with the `deflate` feature).
    pub segments_compressed: u64,
}

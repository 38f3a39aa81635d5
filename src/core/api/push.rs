//! Push: items and per-item results.

use super::*;

/// One message to push.
#[derive(Debug, Clone, PartialEq)]
pub struct PushItem {
    /// Target queue (created with push defaults if missing).
    pub queue: SharedStr,
    /// Target partition (created if missing); `DEFAULT_PARTITION` when not sent.
    pub partition: SharedStr,
    /// Any JSON value, `null` included.
    pub payload: Payload,
    /// Dedup key within the partition; minted when `None` or empty.
    pub transaction_id: Option<SharedStr>,
    /// Optional UUID trace id (validated by the caller).
    pub trace_id: Option<String>,
    /// Namespace label, used only when this push creates the queue.
    pub namespace: Option<String>,
    /// Task label, used only when this push creates the queue.
    pub task: Option<String>,
    /// Authenticated producer (`sub` of the token), never client supplied.
    pub producer_sub: Option<String>,
}

impl PushItem {
    /// A push of `payload` to `queue`'s default partition with nothing else set.
    pub fn new(queue: impl Into<SharedStr>, payload: impl Into<Payload>) -> Self {
        PushItem {
            queue: queue.into(),
            partition: DEFAULT_PARTITION.into(),
            payload: payload.into(),
            transaction_id: None,
            trace_id: None,
            namespace: None,
            task: None,
            producer_sub: None,
        }
    }
}

impl PushItem {
    /// The same item holding only its own texts, not the larger text (a request body) its payload and
    /// names may be parts of: for what memory keeps longer than the push (the maintenance buffer).
    pub fn detached(self) -> Self {
        PushItem {
            queue: self.queue.as_str().into(),
            partition: self.partition.as_str().into(),
            payload: self.payload.detached(),
            transaction_id: self.transaction_id.as_deref().map(SharedStr::from),
            ..self
        }
    }
}

/// What happened to one pushed item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushStatus {
    /// Stored as a new message.
    Queued,
    /// A message with this transaction id already exists in the partition; `message_id` is the winner's.
    Duplicate,
}

/// The result of one pushed item, in input order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushResult {
    /// Position in the request.
    pub index: usize,
    /// Queued or duplicate.
    pub status: PushStatus,
    /// The stored (or winning) message's id.
    pub message_id: SharedStr,
    /// The transaction id (minted if none was sent).
    pub transaction_id: SharedStr,
    /// Partition id.
    pub partition_id: SharedStr,
    /// Queue name.
    pub queue: SharedStr,
    /// Partition name.
    pub partition: SharedStr,
    /// Offset of the message in its partition.
    pub offset: u64,
    /// Trace id, if one was sent.
    pub trace_id: Option<SharedStr>,
}

//! Ack: statuses, items and results.

use super::SharedStr;

/// An ack item's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AckStatus {
    /// `completed` (or `success`).
    Completed,
    /// `failed`: charges the budget, or files/drops when exhausted.
    Failed,
    /// `retry`: redeliver at once, no charge.
    Retry,
    /// `dlq`: file to the dead-letter queue now.
    Dlq,
    /// Anything else; the item is refused with `Invalid status`.
    Invalid(String),
}

impl AckStatus {
    /// Parses a wire status; `None` (absent) means completed.
    pub fn parse(status: Option<&str>) -> Self {
        match status {
            None | Some("completed") | Some("success") => AckStatus::Completed,
            Some("failed") => AckStatus::Failed,
            Some("retry") => AckStatus::Retry,
            Some("dlq") => AckStatus::Dlq,
            Some(other) => AckStatus::Invalid(other.to_string()),
        }
    }

    /// The wire name, without a copy for the known statuses (an ack result carries it).
    pub fn wire_name(&self) -> std::borrow::Cow<'static, str> {
        match self {
            AckStatus::Completed => "completed".into(),
            AckStatus::Failed => "failed".into(),
            AckStatus::Retry => "retry".into(),
            AckStatus::Dlq => "dlq".into(),
            AckStatus::Invalid(s) => s.clone().into(),
        }
    }

    /// The wire name.
    pub fn as_str(&self) -> &str {
        match self {
            AckStatus::Completed => "completed",
            AckStatus::Failed => "failed",
            AckStatus::Retry => "retry",
            AckStatus::Dlq => "dlq",
            AckStatus::Invalid(s) => s,
        }
    }
}

/// One ack item. Its ids are shared text: parts of the request body when the HTTP layer read them
/// from one, handed on to the results without a copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckItem {
    /// The message's transaction id.
    pub transaction_id: SharedStr,
    /// The message's partition id.
    pub partition_id: SharedStr,
    /// What to do.
    pub status: AckStatus,
    /// Reason for failed/dlq.
    pub error: Option<String>,
    /// Fences the ack when non-empty.
    pub lease_id: Option<SharedStr>,
}

impl AckItem {
    /// An item with the given status and nothing else.
    pub fn new(
        transaction_id: impl Into<SharedStr>,
        partition_id: impl Into<SharedStr>,
        status: AckStatus,
    ) -> Self {
        AckItem {
            transaction_id: transaction_id.into(),
            partition_id: partition_id.into(),
            status,
            error: None,
            lease_id: None,
        }
    }

    /// The same item fenced by `lease_id`.
    pub fn with_lease(mut self, lease_id: impl Into<SharedStr>) -> Self {
        self.lease_id = Some(lease_id.into());
        self
    }

    /// The same item carrying `error`.
    pub fn with_error(mut self, error: impl Into<String>) -> Self {
        self.error = Some(error.into());
        self
    }
}

/// The result of one ack item, index-aligned with the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckResult {
    /// Position in the request.
    pub index: usize,
    /// The item's transaction id (shared with the stored message when the ack found it loaded).
    pub transaction_id: SharedStr,
    /// The item's partition id.
    pub partition_id: SharedStr,
    /// Whether the item was accepted.
    pub success: bool,
    /// `None` on success; why it was refused otherwise.
    pub error: Option<String>,
    /// Queue name, when the message was found.
    pub queue: Option<SharedStr>,
    /// Partition name, when the message was found.
    pub partition: Option<SharedStr>,
    /// The lane's lease ended up released.
    pub lease_released: bool,
    /// This item's message was filed to the dead-letter queue.
    pub dlq: bool,
    /// The status that was applied.
    pub status: std::borrow::Cow<'static, str>,
}

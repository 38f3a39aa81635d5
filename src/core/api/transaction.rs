//! Lease extend and transactions.

use super::*;

/// The answer to a lease extend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtendReply {
    /// The lease id asked about.
    pub lease_id: String,
    /// Number of live lanes renewed.
    pub renewed: u32,
    /// Earliest new expiry over the renewed lanes.
    pub expires_at_ms: Option<i64>,
    /// Why nothing was renewed (`Lease not found` / `Lease already expired`).
    pub error: Option<String>,
}

/// One operation of a transaction.
#[derive(Debug, Clone, PartialEq)]
pub enum TxOperation {
    /// Push these items.
    Push(Vec<PushItem>),
    /// Ack one message for a group (`None` = queue mode).
    Ack {
        /// The ack.
        item: AckItem,
        /// Its consumer group.
        group: Option<String>,
    },
    /// An operation type the broker does not know; fails the transaction.
    Unknown(String),
}

/// One result of a transaction, flat: one per pushed item and one per ack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxResult {
    /// A pushed item.
    Push(PushResult),
    /// An ack.
    Ack(AckResult),
}

/// The answer to a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxReply {
    /// The transaction's id (minted).
    pub transaction_id: String,
    /// All applied, or none.
    pub success: bool,
    /// Why it rolled back.
    pub error: Option<String>,
    /// Results (on failure: up to and including the failing operation).
    pub results: Vec<TxResult>,
}

//! The core's command inputs and replies: plain data, independent of any wire format.
//!
//! The HTTP layer (`src/http`) and the JS module translate their wire shapes into these types and back.
//! Times are milliseconds since the Unix epoch (`_ms`), durations say their unit in their name.
//! One module per command family; everything is re-exported here, so `core::api::X` names every type.

pub use super::deliveries::{
    DeliveryPage, DeliveryQuery, DeliveryRecord, Outcome, MAX_RECORDS_PER_QUEUE,
};
pub use super::dlq_bulk::{DlqFilter, DlqSelection};
pub use super::redelivery::{DeliveryLogMode, RetryBackoff};
use serde_json::value::RawValue;
use serde_json::Value;

/// The consumer group a pop or ack names when it names none: Queen's shared "queue mode" group.
pub const QUEUE_MODE_GROUP: &str = "__QUEUE_MODE__";
/// The partition a push or pop addresses when it names none.
pub const DEFAULT_PARTITION: &str = "Default";

/// Why a command was refused. Refusals change nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoreError {
    /// The class of refusal (maps to an HTTP status).
    pub kind: ErrorKind,
    /// What is wrong, in words the caller can act on.
    pub message: String,
}

/// Classes of refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request is malformed or not allowed (HTTP 400).
    BadRequest,
    /// The addressed thing does not exist (HTTP 404).
    NotFound,
    /// The request conflicts with stored state (HTTP 409).
    Conflict,
    /// The request exceeds a configured limit (HTTP 413).
    TooLarge,
    /// The broker holds as many bytes as its storage quota allows (HTTP 507).
    Full,
}

impl CoreError {
    /// A 400-class refusal.
    pub fn bad_request(message: impl Into<String>) -> Self {
        CoreError {
            kind: ErrorKind::BadRequest,
            message: message.into(),
        }
    }
    /// A 404-class refusal.
    pub fn not_found(message: impl Into<String>) -> Self {
        CoreError {
            kind: ErrorKind::NotFound,
            message: message.into(),
        }
    }
    /// A 507-class refusal: the storage quota is reached.
    pub fn full(message: impl Into<String>) -> Self {
        CoreError {
            kind: ErrorKind::Full,
            message: message.into(),
        }
    }
    /// A 413-class refusal.
    pub fn too_large(message: impl Into<String>) -> Self {
        CoreError {
            kind: ErrorKind::TooLarge,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for CoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CoreError {}

/// Result of a core command.
pub type CoreResult<T> = Result<T, CoreError>;

mod ack;
mod dead_letters;
mod options;
mod payload;
mod pop;
mod push;
mod shared;
mod transaction;
mod views;

pub use ack::*;
pub use dead_letters::*;
pub use options::*;
pub use payload::*;
pub use pop::*;
pub use push::*;
pub use shared::*;
pub use transaction::*;
pub use views::*;

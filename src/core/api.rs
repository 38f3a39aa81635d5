//! The core's command inputs and replies: plain data, independent of any wire format.
//!
//! The HTTP layer (`src/http`) and the JS module translate their wire shapes into these types and back.
//! Times are milliseconds since the Unix epoch (`_ms`), durations say their unit in their name.

pub use super::deliveries::{DeliveryPage, DeliveryQuery, DeliveryRecord, Outcome};
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

// ---------------------------------------------------------------------------------------------
// Payloads
// ---------------------------------------------------------------------------------------------

/// A message payload: one JSON value of any type (`null` included), kept as JSON text from the request
/// to the segment to the reply. The broker never looks inside a payload: the HTTP layer's parser checks
/// that it is valid JSON and captures its text, segments embed that text as it is, and replies embed it
/// again, so no payload is ever built into a `serde_json::Value` tree on the hot path (docs/decisions.md,
/// "Payloads as raw JSON text").
///
/// The text is the value as the client sent it (whitespace inside it included; none around it).
/// Equality is equality of that text: `{"a":1}` and `{"a": 1}` are different payloads here, although
/// they are the same JSON value. This is the one type to wrap or change if payloads are ever
/// transformed on their way in or out (encryption, for one).
#[derive(Clone)]
pub struct Payload(Box<RawValue>);

impl Payload {
    /// The JSON `null` payload (a push item without one).
    pub fn null() -> Self {
        Payload(RawValue::NULL.to_owned())
    }

    /// The empty object `{}` (a transaction's push item without a payload).
    pub fn empty_object() -> Self {
        // Serialized, not parsed: no JSON parser over `&str` in the wasm module for this.
        Payload::from_value(&Value::Object(serde_json::Map::new()))
    }

    /// A payload holding `value` as compact JSON text.
    pub fn from_value(value: &Value) -> Self {
        // A `Value` always serializes (its map keys are strings).
        Payload(serde_json::value::to_raw_value(value).expect("a JSON value serializes"))
    }

    /// `text` as a payload: fails unless it is exactly one JSON value (whitespace around it is dropped).
    pub fn from_json(text: String) -> Result<Self, serde_json::Error> {
        RawValue::from_string(text).map(Payload)
    }

    /// The payload's JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// Length of the JSON text in bytes (what the payload adds to a segment before compression).
    pub fn len(&self) -> usize {
        self.0.get().len()
    }

    /// Always false: a JSON value's text is never empty (`null` is four bytes).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The payload parsed into a `serde_json::Value` tree (for tests and cold paths). Fails only where
    /// valid JSON text does not fit a `Value`: a number beyond `f64`'s range, a lone surrogate escape.
    pub fn to_value(&self) -> Result<Value, serde_json::Error> {
        // From bytes: the parser over slices is the one the module already has.
        serde_json::from_slice(self.0.get().as_bytes())
    }

    /// The raw JSON value.
    pub fn into_raw(self) -> Box<RawValue> {
        self.0
    }
}

impl From<Box<RawValue>> for Payload {
    fn from(raw: Box<RawValue>) -> Self {
        Payload(raw)
    }
}

/// Convenience for tests, benchmarks and cold paths: serializes the tree to compact text.
impl From<Value> for Payload {
    fn from(value: Value) -> Self {
        Payload::from_value(&value)
    }
}

impl PartialEq for Payload {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl Eq for Payload {}

impl std::fmt::Debug for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.get())
    }
}

impl std::fmt::Display for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.get())
    }
}

/// Writes the text as it is (it is one valid JSON value).
impl serde::Serialize for Payload {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

/// Captures one JSON value's text (serde_json deserializers only, which check it is valid JSON).
impl<'de> serde::Deserialize<'de> for Payload {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Box::<RawValue>::deserialize(deserializer).map(Payload)
    }
}

// ---------------------------------------------------------------------------------------------
// Queue configuration
// ---------------------------------------------------------------------------------------------

/// The 15 queue options of wire-contract §2.1, with wire units (seconds, except `retry_delay_ms`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct QueueOptions {
    /// Default lease length in seconds.
    pub lease_time_s: u64,
    /// Size of the per-lane retry budget.
    pub retry_limit: u32,
    /// Hold before a `failed` redelivers, in milliseconds.
    pub retry_delay_ms: u64,
    /// Stored and echoed only.
    pub max_size: u64,
    /// Stored and echoed only (seconds).
    pub ttl_s: u64,
    /// Dead-letter exhausted messages (with `dlq_after_max_retries`: either on enables the DLQ).
    pub dead_letter_queue: bool,
    /// Dead-letter exhausted messages (see `dead_letter_queue`).
    pub dlq_after_max_retries: bool,
    /// A message becomes visible this many seconds after it was pushed.
    pub delayed_processing_s: u64,
    /// A partition is poppable only when its newest message is at least this old (seconds).
    pub window_buffer_s: u64,
    /// Gate for `retention_s` and `completed_retention_s`.
    pub retention_enabled: bool,
    /// With retention on: delete any message older than this (seconds; 0 = off).
    pub retention_s: u64,
    /// With retention on: delete messages older than this that every group has consumed (0 = off).
    pub completed_retention_s: u64,
    /// Eviction: delete unconsumed messages older than this, regardless of retention (0 = off).
    pub max_wait_time_s: u64,
    /// Encrypt payloads at rest (stored and echoed; see docs/decisions.md).
    pub encryption_enabled: bool,
    /// Discovery pops drain higher priorities first.
    pub priority: i64,
    /// `reclaimLimit` (0 = off; module `redelivery`). Stored only when set.
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub reclaim_limit: u32,
    /// `retryBackoff.baseMs` (0 = no backoff: the fixed `retry_delay_ms`; see [`Self::retry_backoff`]).
    /// The backoff is three flat fields, stored only when set: no nested record for the browser module
    /// to write and read.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub backoff_base_ms: u64,
    /// `retryBackoff.factor`, in thousandths.
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub backoff_factor_permille: u32,
    /// `retryBackoff.maxMs`.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub backoff_max_ms: u64,
    /// `deliveryLog` (off by default). Stored only when on.
    #[serde(skip_serializing_if = "DeliveryLogMode::is_off")]
    pub delivery_log: DeliveryLogMode,
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

impl QueueOptions {
    /// Options of a queue created by its first push (wire-contract §2.2).
    pub fn push_created() -> Self {
        QueueOptions {
            lease_time_s: 60,
            retry_limit: 3,
            retry_delay_ms: 1000,
            max_size: 0,
            ttl_s: 3600,
            dead_letter_queue: true,
            dlq_after_max_retries: true,
            delayed_processing_s: 0,
            window_buffer_s: 0,
            retention_enabled: false,
            retention_s: 0,
            completed_retention_s: 0,
            max_wait_time_s: 0,
            encryption_enabled: false,
            priority: 0,
            reclaim_limit: 0,
            backoff_base_ms: 0,
            backoff_factor_permille: 0,
            backoff_max_ms: 0,
            delivery_log: DeliveryLogMode::Off,
        }
    }

    /// Options of a queue created or rewritten by `/configure` with nothing sent (wire-contract §2.1).
    pub fn configure_defaults() -> Self {
        QueueOptions {
            lease_time_s: 300,
            ..Self::push_created()
        }
    }

    /// `retryBackoff`, when set.
    pub fn retry_backoff(&self) -> Option<RetryBackoff> {
        (self.backoff_base_ms > 0).then_some(RetryBackoff {
            base_ms: self.backoff_base_ms,
            factor_permille: self.backoff_factor_permille,
            max_ms: self.backoff_max_ms,
        })
    }

    /// True when an exhausted `failed` is filed to the dead-letter queue rather than dropped.
    pub fn dlq_enabled(&self) -> bool {
        self.dead_letter_queue || self.dlq_after_max_retries
    }

    /// The hold after a `failed` charged with `used` retries already used: the `retryBackoff` curve
    /// when set, else `retryDelay`.
    pub fn retry_hold_ms(&self, used: u32) -> u64 {
        match &self.retry_backoff() {
            Some(backoff) => backoff.hold_ms(used),
            None => self.retry_delay_ms,
        }
    }
}

/// The options a `/configure` call sent; every `None` takes its configure default (it is not a merge).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OptionsPatch {
    /// `leaseTime`.
    pub lease_time_s: Option<u64>,
    /// `retryLimit`.
    pub retry_limit: Option<u32>,
    /// `retryDelay` (ms).
    pub retry_delay_ms: Option<u64>,
    /// `maxSize`.
    pub max_size: Option<u64>,
    /// `ttl`.
    pub ttl_s: Option<u64>,
    /// `deadLetterQueue`.
    pub dead_letter_queue: Option<bool>,
    /// `dlqAfterMaxRetries`.
    pub dlq_after_max_retries: Option<bool>,
    /// `delayedProcessing`.
    pub delayed_processing_s: Option<u64>,
    /// `windowBuffer`.
    pub window_buffer_s: Option<u64>,
    /// `retentionEnabled`.
    pub retention_enabled: Option<bool>,
    /// `retentionSeconds`.
    pub retention_s: Option<u64>,
    /// `completedRetentionSeconds`.
    pub completed_retention_s: Option<u64>,
    /// `maxWaitTimeSeconds`.
    pub max_wait_time_s: Option<u64>,
    /// `encryptionEnabled`.
    pub encryption_enabled: Option<bool>,
    /// `priority`.
    pub priority: Option<i64>,
    /// `reclaimLimit`.
    pub reclaim_limit: Option<u32>,
    /// `retryBackoff` (validated by [`RetryBackoff::validate`]).
    pub retry_backoff: Option<RetryBackoff>,
    /// `deliveryLog`.
    pub delivery_log: Option<DeliveryLogMode>,
}

impl OptionsPatch {
    /// The full option set: sent values over configure defaults.
    pub fn resolve(&self) -> QueueOptions {
        let d = QueueOptions::configure_defaults();
        QueueOptions {
            lease_time_s: self.lease_time_s.unwrap_or(d.lease_time_s),
            retry_limit: self.retry_limit.unwrap_or(d.retry_limit),
            retry_delay_ms: self.retry_delay_ms.unwrap_or(d.retry_delay_ms),
            max_size: self.max_size.unwrap_or(d.max_size),
            ttl_s: self.ttl_s.unwrap_or(d.ttl_s),
            dead_letter_queue: self.dead_letter_queue.unwrap_or(d.dead_letter_queue),
            dlq_after_max_retries: self
                .dlq_after_max_retries
                .unwrap_or(d.dlq_after_max_retries),
            delayed_processing_s: self.delayed_processing_s.unwrap_or(d.delayed_processing_s),
            window_buffer_s: self.window_buffer_s.unwrap_or(d.window_buffer_s),
            retention_enabled: self.retention_enabled.unwrap_or(d.retention_enabled),
            retention_s: self.retention_s.unwrap_or(d.retention_s),
            completed_retention_s: self
                .completed_retention_s
                .unwrap_or(d.completed_retention_s),
            max_wait_time_s: self.max_wait_time_s.unwrap_or(d.max_wait_time_s),
            encryption_enabled: self.encryption_enabled.unwrap_or(d.encryption_enabled),
            priority: self.priority.unwrap_or(d.priority),
            reclaim_limit: self.reclaim_limit.unwrap_or(d.reclaim_limit),
            backoff_base_ms: self.retry_backoff.map_or(d.backoff_base_ms, |b| b.base_ms),
            backoff_factor_permille: self
                .retry_backoff
                .map_or(d.backoff_factor_permille, |b| b.factor_permille),
            backoff_max_ms: self.retry_backoff.map_or(d.backoff_max_ms, |b| b.max_ms),
            delivery_log: self.delivery_log.unwrap_or(d.delivery_log),
        }
    }
}

/// `/configure`: create a queue or overwrite all its options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigureRequest {
    /// Queue name (may be empty).
    pub queue: String,
    /// Namespace label; `None` resets it to `""`.
    pub namespace: Option<String>,
    /// Task label; `None` resets it to `""`.
    pub task: Option<String>,
    /// The options sent.
    pub options: OptionsPatch,
}

/// The answer to `/configure`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigureReply {
    /// The queue's id.
    pub queue_id: String,
    /// The id of its `Default` partition.
    pub partition_id: String,
    /// Queue name.
    pub queue: String,
    /// Namespace label.
    pub namespace: String,
    /// Task label.
    pub task: String,
    /// The stored options.
    pub options: QueueOptions,
}

// ---------------------------------------------------------------------------------------------
// Push
// ---------------------------------------------------------------------------------------------

/// One message to push.
#[derive(Debug, Clone, PartialEq)]
pub struct PushItem {
    /// Target queue (created with push defaults if missing).
    pub queue: String,
    /// Target partition (created if missing); `DEFAULT_PARTITION` when not sent.
    pub partition: String,
    /// Any JSON value, `null` included.
    pub payload: Payload,
    /// Dedup key within the partition; minted when `None` or empty.
    pub transaction_id: Option<String>,
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
    pub fn new(queue: impl Into<String>, payload: impl Into<Payload>) -> Self {
        PushItem {
            queue: queue.into(),
            partition: DEFAULT_PARTITION.to_string(),
            payload: payload.into(),
            transaction_id: None,
            trace_id: None,
            namespace: None,
            task: None,
            producer_sub: None,
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
    pub message_id: String,
    /// The transaction id (minted if none was sent).
    pub transaction_id: String,
    /// Partition id.
    pub partition_id: String,
    /// Queue name.
    pub queue: String,
    /// Partition name.
    pub partition: String,
    /// Offset of the message in its partition.
    pub offset: u64,
    /// Trace id, if one was sent.
    pub trace_id: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Pop
// ---------------------------------------------------------------------------------------------

/// Where a pop looks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PopTarget {
    /// Any partition of a queue.
    Queue {
        /// Queue name.
        queue: String,
    },
    /// One named partition of a queue.
    Partition {
        /// Queue name.
        queue: String,
        /// Partition name.
        partition: String,
    },
    /// Every queue carrying these labels (at least one is set).
    Discovery {
        /// Namespace label to match.
        namespace: Option<String>,
        /// Task label to match.
        task: Option<String>,
    },
}

/// Where a named group starts reading when its first pop creates its subscription (docs/protocol.md §2.3),
/// parsed at the edge from `subscriptionMode` and `subscriptionFrom` (which wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscriptionStart {
    /// After the first pop's instant: `subscriptionMode=new` or `new-only`, `subscriptionFrom=now`.
    New,
    /// From the oldest retained message: any other `subscriptionMode` (wire-contract §7, note 24).
    All,
    /// After this instant (ms since the epoch): `subscriptionFrom=<ISO time>`.
    At(i64),
}

impl SubscriptionStart {
    /// The start a `subscriptionMode` value names.
    pub fn from_mode(mode: &str) -> Self {
        match mode {
            "new" | "new-only" => SubscriptionStart::New,
            _ => SubscriptionStart::All,
        }
    }
}

/// A pop (claim) request. Long-polling is the engine's business; the core answers at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PopRequest {
    /// Where to look.
    pub target: PopTarget,
    /// Consumer group; `None` means `QUEUE_MODE_GROUP`.
    pub group: Option<String>,
    /// Message budget of the whole pop; `None` = 1, or autopilot sizing when `autopilot`.
    pub batch: Option<u32>,
    /// Claim up to this many partitions (1..=64); `None` = 1, or autopilot sizing.
    pub partitions: Option<u32>,
    /// Commit at delivery, no lease.
    pub auto_ack: bool,
    /// Where a named group starts, read on its first pop only; `None` = the broker's default
    /// (`BrokerConfig::default_subscription_new`).
    pub subscription: Option<SubscriptionStart>,
    /// Overrides the queue's lease time when > 0.
    pub lease_seconds: Option<u64>,
    /// Let the broker size `batch` and `partitions` when they are not sent.
    pub autopilot: bool,
    /// Deliver only the newest message per partition (named groups only; fixed by the first pop).
    pub conflation: bool,
}

impl PopRequest {
    /// A plain pop of one message from any partition of `queue` in queue mode.
    pub fn queue(queue: impl Into<String>) -> Self {
        PopRequest {
            target: PopTarget::Queue {
                queue: queue.into(),
            },
            group: None,
            batch: None,
            partitions: None,
            auto_ack: false,
            subscription: None,
            lease_seconds: None,
            autopilot: false,
            conflation: false,
        }
    }
}

/// One delivered message.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveredMessage {
    /// Message id.
    pub id: String,
    /// Transaction id (dedup key).
    pub transaction_id: String,
    /// Trace id, if pushed with one.
    pub trace_id: Option<String>,
    /// The payload.
    pub payload: Payload,
    /// Authenticated producer, if any.
    pub producer_sub: Option<String>,
    /// When it was pushed.
    pub created_at_ms: i64,
    /// Queue name.
    pub queue: String,
    /// Partition name.
    pub partition: String,
    /// Partition id (use it to ack).
    pub partition_id: String,
    /// The lease id of this claim; `""` for autoAck.
    pub lease_id: String,
    /// The consumer group it was delivered to.
    pub consumer_group: String,
    /// 1 on the first delivery of a claim start, +1 each time a claim restarts at the same offset.
    pub delivery_attempt: u32,
    /// 0-based offset in its partition.
    pub offset: u64,
    /// The lane's retry budget used.
    pub retry_count: u32,
}

/// The broker's sizing choice when autopilot was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutopilotEcho {
    /// Batch budget used.
    pub batch: u32,
    /// Partition count used.
    pub partitions: u32,
    /// Suggested sleep between empty non-waiting polls.
    pub wait_ms: u64,
}

/// The answer to a pop.
#[derive(Debug, Clone, PartialEq)]
pub struct PopReply {
    /// The lease of this claim (shared by every claimed partition); `""` for autoAck or nothing claimed.
    pub lease_id: String,
    /// The group the pop read for.
    pub consumer_group: String,
    /// Messages, partition by partition, in offset order within each.
    pub messages: Vec<DeliveredMessage>,
    /// Number of partitions claimed.
    pub partitions_claimed: u32,
    /// Queue of the first claimed partition (or the addressed queue).
    pub queue: Option<String>,
    /// Name of the first claimed partition.
    pub partition: Option<String>,
    /// Id of the first claimed partition.
    pub partition_id: Option<String>,
    /// True when the group conflates (an empty conflating pop is still a 200).
    pub conflation: bool,
    /// True when the request asked for conflation but the group was fixed without it (or vice versa).
    pub conflation_conflict: bool,
    /// Present when autopilot sized the pop.
    pub autopilot: Option<AutopilotEcho>,
}

// ---------------------------------------------------------------------------------------------
// Ack
// ---------------------------------------------------------------------------------------------

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

/// One ack item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckItem {
    /// The message's transaction id.
    pub transaction_id: String,
    /// The message's partition id.
    pub partition_id: String,
    /// What to do.
    pub status: AckStatus,
    /// Reason for failed/dlq.
    pub error: Option<String>,
    /// Fences the ack when non-empty.
    pub lease_id: Option<String>,
}

impl AckItem {
    /// An item with the given status and nothing else.
    pub fn new(
        transaction_id: impl Into<String>,
        partition_id: impl Into<String>,
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
    pub fn with_lease(mut self, lease_id: impl Into<String>) -> Self {
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
    /// The item's transaction id.
    pub transaction_id: String,
    /// The item's partition id.
    pub partition_id: String,
    /// Whether the item was accepted.
    pub success: bool,
    /// `None` on success; why it was refused otherwise.
    pub error: Option<String>,
    /// Queue name, when the message was found.
    pub queue: Option<String>,
    /// Partition name, when the message was found.
    pub partition: Option<String>,
    /// The lane's lease ended up released.
    pub lease_released: bool,
    /// This item's message was filed to the dead-letter queue.
    pub dlq: bool,
    /// The status that was applied.
    pub status: String,
}

// ---------------------------------------------------------------------------------------------
// Lease extend, transactions
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Dead letters, seek, groups
// ---------------------------------------------------------------------------------------------

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
}

// ---------------------------------------------------------------------------------------------
// Views for dashboards, status and the page
// ---------------------------------------------------------------------------------------------

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
    /// Dead letters filed from this partition.
    pub dead_letters: u64,
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

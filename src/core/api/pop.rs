//! Pop: targets, subscription start, requests and replies.

use super::*;

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
    /// [`Self::New`] for a long-poll's later attempt (`Engine::pop`): after this instant, just before the
    /// pop began waiting, so what was pushed while it waited is the group's. It only matters when the
    /// queue appeared meanwhile (an attempt that finds the queue makes the subscription).
    NewSince(i64),
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

/// One delivered message. Its strings are shared: the ids with the stored message, the queue,
/// partition, lease and group with every message of its partition in the reply.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveredMessage {
    /// Message id.
    pub id: SharedStr,
    /// Transaction id (dedup key).
    pub transaction_id: SharedStr,
    /// Trace id, if pushed with one.
    pub trace_id: Option<SharedStr>,
    /// The payload.
    pub payload: Payload,
    /// Authenticated producer, if any.
    pub producer_sub: Option<SharedStr>,
    /// When it was pushed.
    pub created_at_ms: i64,
    /// Queue name.
    pub queue: SharedStr,
    /// Partition name.
    pub partition: SharedStr,
    /// Partition id (use it to ack).
    pub partition_id: SharedStr,
    /// The lease id of this claim; `""` for autoAck.
    pub lease_id: SharedStr,
    /// The consumer group it was delivered to.
    pub consumer_group: SharedStr,
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

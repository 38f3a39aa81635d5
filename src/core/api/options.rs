//! Queue configuration: options, patches, configure.

use super::*;

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

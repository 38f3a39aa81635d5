//! The sans-IO broker core. (Implementation in progress: the signatures below are the contract the
//! engine and the HTTP layer build on.)

pub mod api;

use crate::store::{ChangeSet, Record, StoreError};
use api::*;
use std::collections::BTreeSet;

/// Broker-wide settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerConfig {
    /// Where a named group starts when its first pop sends no mode (`new` per seed 003).
    pub default_subscription_new: bool,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            default_subscription_new: true,
        }
    }
}

/// The broker state machine.
pub struct Broker {
    changes: ChangeSet,
    woken: BTreeSet<String>,
    discard: bool,
}

#[allow(missing_docs, unused_variables)]
impl Broker {
    pub fn from_records(
        config: BrokerConfig,
        seed: u64,
        records: Vec<Record>,
    ) -> Result<Self, StoreError> {
        Ok(Broker {
            changes: ChangeSet::default(),
            woken: BTreeSet::new(),
            discard: false,
        })
    }
    pub fn take_changes(&mut self) -> ChangeSet {
        std::mem::take(&mut self.changes)
    }
    pub fn take_woken_queues(&mut self) -> BTreeSet<String> {
        std::mem::take(&mut self.woken)
    }
    pub fn take_discard_flag(&mut self) -> bool {
        std::mem::take(&mut self.discard)
    }
    pub fn next_deadline_ms(&self) -> Option<i64> {
        None
    }
    pub fn push(&mut self, now: i64, items: Vec<PushItem>) -> CoreResult<Vec<PushResult>> {
        Err(CoreError::bad_request("not implemented"))
    }
    pub fn pop(&mut self, now: i64, req: &PopRequest) -> CoreResult<PopReply> {
        Err(CoreError::bad_request("not implemented"))
    }
    pub fn ack(&mut self, now: i64, group: Option<&str>, items: &[AckItem]) -> Vec<AckResult> {
        vec![]
    }
    pub fn extend_lease(&mut self, now: i64, lease_id: &str, seconds: u64) -> ExtendReply {
        ExtendReply {
            lease_id: lease_id.into(),
            renewed: 0,
            expires_at_ms: None,
            error: None,
        }
    }
    pub fn transaction(&mut self, now: i64, ops: Vec<TxOperation>) -> TxReply {
        TxReply {
            transaction_id: String::new(),
            success: false,
            error: None,
            results: vec![],
        }
    }
    pub fn configure(&mut self, now: i64, req: ConfigureRequest) -> CoreResult<ConfigureReply> {
        Err(CoreError::bad_request("not implemented"))
    }
    pub fn delete_queue(&mut self, now: i64, queue: &str) -> bool {
        false
    }
    pub fn replay_dead_letter(&mut self, now: i64, id: &str) -> CoreResult<ReplayReply> {
        Err(CoreError::not_found("not implemented"))
    }
    pub fn replay_address(
        &mut self,
        now: i64,
        partition_id: &str,
        transaction_id: &str,
    ) -> CoreResult<ReplayReply> {
        Err(CoreError::not_found("not implemented"))
    }
    pub fn delete_dead_letters(
        &mut self,
        now: i64,
        partition_id: &str,
        transaction_id: &str,
    ) -> CoreResult<usize> {
        Err(CoreError::not_found("not implemented"))
    }
    pub fn seek(
        &mut self,
        now: i64,
        group: &str,
        queue: &str,
        target: SeekTarget,
    ) -> CoreResult<SeekReply> {
        Err(CoreError::not_found("not implemented"))
    }
    pub fn seek_partition_to_end(
        &mut self,
        now: i64,
        group: &str,
        queue: &str,
        partition: &str,
    ) -> CoreResult<i64> {
        Err(CoreError::not_found("not implemented"))
    }
    pub fn delete_group(
        &mut self,
        now: i64,
        group: &str,
        queue: Option<&str>,
        delete_metadata: bool,
    ) -> GroupDeleteReply {
        GroupDeleteReply {
            deleted_partitions: 0,
            metadata_deleted: false,
        }
    }
    pub fn update_subscription(&mut self, now: i64, group: &str, start_ms: i64) -> u32 {
        0
    }
    pub fn maintain(&mut self, now: i64) -> MaintenanceReport {
        MaintenanceReport::default()
    }
    // ---- reads ----
    pub fn list_queues(&self, now: i64) -> Vec<QueueView> {
        vec![]
    }
    pub fn queue_view(&self, now: i64, queue: &str) -> Option<QueueView> {
        None
    }
    pub fn dead_letters(&self, query: &DlqQuery) -> Vec<DeadLetterView> {
        vec![]
    }
    pub fn messages(
        &self,
        queue: &str,
        partition: &str,
        from_offset: u64,
        limit: usize,
    ) -> CoreResult<Vec<MessageView>> {
        Ok(vec![])
    }
    pub fn message(&self, partition_id: &str, transaction_id: &str) -> Option<MessageView> {
        None
    }
    pub fn stats(&self, now: i64) -> BrokerStats {
        BrokerStats::default()
    }
}

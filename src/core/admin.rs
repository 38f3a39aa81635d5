//! Queue configuration, dead letters, seeks, consumer groups, transactions, retention and the read
//! views.

use super::ack::{INVALID_LEASE, MESSAGE_NOT_FOUND};
use super::api::*;
use super::records::*;
use super::state::*;
use super::Broker;

impl Broker {
    /// Creates a queue or overwrites its options and labels (docs/protocol.md §2.1; wire-contract §1.7).
    pub fn configure(&mut self, now: i64, req: ConfigureRequest) -> CoreResult<ConfigureReply> {
        let now = self.tick(now);
        let options = req.options.resolve();
        if let Some(backoff) = &req.options.retry_backoff {
            backoff.validate(u64::MAX)?;
        }
        if options.reclaim_limit > super::redelivery::MAX_RECLAIM_LIMIT {
            return Err(CoreError::bad_request("reclaimLimit must be at most 1000"));
        }
        self.ensure_queue(now, &req.queue, None, None);
        {
            let q = self.queues.get_mut(&req.queue).expect("ensured above");
            q.record.options = options.clone();
            q.record.namespace = req.namespace.clone().unwrap_or_default();
            q.record.task = req.task.clone().unwrap_or_default();
        }
        self.save_queue(&req.queue);
        let pid = self.ensure_partition(now, &req.queue, DEFAULT_PARTITION);
        // Lease lengths, holds and visibility rules may have changed: let parked pops look again.
        self.wake_queue(req.queue.clone());
        let q = &self.queues[&req.queue].record;
        Ok(ConfigureReply {
            queue_id: q.id.clone(),
            partition_id: pid.to_string(),
            queue: q.name.clone(),
            namespace: q.namespace.clone(),
            task: q.task.clone(),
            options,
        })
    }

    /// Deletes a queue with its partitions, messages, lanes, dead letters and subscriptions.
    /// Returns whether it existed.
    pub fn delete_queue(&mut self, now: i64, queue: &str) -> bool {
        self.tick(now);
        let Some(q) = self.queues.remove(queue) else {
            return false;
        };
        self.changes.delete(queue_key(queue));
        for pid in q.partitions.values() {
            if let Some(p) = self.partitions.remove(pid) {
                self.changes.delete(partition_key(*pid));
                for seg in &p.segments {
                    self.changes.delete(segment_key(*pid, seg.first));
                    self.changes.delete(index_entry_key(*pid, seg.first));
                }
                self.stored_bytes = self.stored_bytes.saturating_sub(p.stored_bytes());
                for (group, lane) in &p.lanes {
                    self.changes.delete(lane_key(*pid, group));
                    if let Some(lease) = lane.lease_id() {
                        self.unindex_lease(lease, *pid, group);
                    }
                }
                self.cache.forget_partition(*pid);
            }
            self.timers.retain(|(_, p, _)| p != pid);
        }
        let letters: Vec<String> = self
            .dead_letters
            .values()
            .filter(|d| d.queue == queue)
            .map(|d| d.id.clone())
            .collect();
        for id in letters {
            self.dead_letters.remove(&id);
            self.changes.delete(dead_letter_key(&id));
        }
        let subs: Vec<(String, String)> = self
            .subscriptions
            .keys()
            .filter(|(q, _)| q == queue)
            .cloned()
            .collect();
        for key in subs {
            self.subscriptions.remove(&key);
            self.changes.delete(subscription_key(&key.0, &key.1));
        }
        self.groups.retain(|(q, _), _| q != queue);
        self.forget_deliveries(queue, None);
        self.wake_queue(queue.to_string());
        true
    }

    /// Replays one dead letter: a copy goes to the end of its partition as `dlq:<id>`, the row goes.
    pub fn replay_dead_letter(&mut self, now: i64, id: &str) -> CoreResult<ReplayReply> {
        let now = self.tick(now);
        let letter = self
            .dead_letters
            .get(id)
            .cloned()
            .ok_or_else(|| CoreError::not_found(format!("Dead letter {id} not found")))?;
        Ok(self.replay(now, *letter, vec![id.to_string()]))
    }

    /// Replays the dead letter at a message address (`admin.retryMessage`): the newest row there is
    /// pushed once; every row at the address is removed.
    pub fn replay_address(
        &mut self,
        now: i64,
        partition_id: &str,
        transaction_id: &str,
    ) -> CoreResult<ReplayReply> {
        let now = self.tick(now);
        let rows = self.rows_at(partition_id, transaction_id);
        let newest = rows
            .last()
            .and_then(|id| self.dead_letters.get(id).cloned())
            .ok_or_else(|| CoreError::not_found("No dead letter at this address"))?;
        Ok(self.replay(now, *newest, rows))
    }

    pub(super) fn replay(
        &mut self,
        now: i64,
        letter: DeadLetter,
        remove: Vec<String>,
    ) -> ReplayReply {
        let item = PushItem {
            queue: letter.queue.clone(),
            partition: letter.partition.clone(),
            payload: letter.payload.clone(),
            transaction_id: Some(format!("dlq:{}", letter.id)),
            trace_id: letter.trace_id.clone(),
            namespace: None,
            task: None,
            producer_sub: None,
        };
        let pushed = self.push_items(now, vec![item], 0).remove(0);
        for id in &remove {
            self.dead_letters.remove(id);
            self.changes.delete(dead_letter_key(id));
        }
        ReplayReply {
            id: letter.id.clone(),
            transaction_id: pushed.transaction_id,
            message_id: pushed.message_id,
            queue: pushed.queue,
            partition: pushed.partition,
            partition_id: pushed.partition_id,
            status: pushed.status,
            rows_removed: remove.len(),
        }
    }

    /// Dead-letter row ids at a message address, oldest filing first.
    fn rows_at(&self, partition_id: &str, transaction_id: &str) -> Vec<String> {
        let Ok(pid) = partition_id.parse::<u64>() else {
            return Vec::new();
        };
        let mut rows: Vec<&DeadLetter> = self
            .dead_letters
            .values()
            .filter(|d| d.partition_id == pid && d.transaction_id == transaction_id)
            .map(|d| &**d)
            .collect();
        super::sort::sort_by_key(&mut rows, |d| d.seq);
        rows.into_iter().map(|d| d.id.clone()).collect()
    }

    /// Deletes the dead-letter rows at a message address (never a live message).
    pub fn delete_dead_letters(
        &mut self,
        now: i64,
        partition_id: &str,
        transaction_id: &str,
    ) -> CoreResult<usize> {
        self.tick(now);
        let rows = self.rows_at(partition_id, transaction_id);
        if rows.is_empty() {
            return Err(CoreError::not_found("No dead letter at this address"));
        }
        for id in &rows {
            self.dead_letters.remove(id);
            self.changes.delete(dead_letter_key(id));
        }
        Ok(rows.len())
    }

    /// Moves `group`'s cursor on every partition of `queue`, releasing leases (docs/protocol.md §3.8).
    pub fn seek(
        &mut self,
        now: i64,
        group: &str,
        queue: &str,
        target: SeekTarget,
    ) -> CoreResult<SeekReply> {
        let now = self.tick(now);
        let group = Self::group_name(Some(group));
        let pids: Vec<u64> = self
            .queues
            .get(queue)
            .ok_or_else(|| CoreError::not_found(format!("Queue {queue} not found")))?
            .partitions
            .values()
            .copied()
            .collect();
        let mut updated = 0;
        for pid in pids {
            let p = &self.partitions[&pid];
            let cursor = match target {
                SeekTarget::End => p.next_offset as i64 - 1,
                SeekTarget::Timestamp(t) => p.last_offset_created_at_or_before(t),
            };
            self.seek_lane(now, pid, &group, cursor);
            updated += 1;
        }
        self.wake_queue(queue.to_string());
        Ok(SeekReply {
            partitions_updated: updated,
        })
    }

    fn seek_lane(&mut self, _now: i64, pid: u64, group: &str, cursor: i64) {
        self.release_lane(pid, group);
        let queue = self.partitions[&pid].queue.clone();
        if let Some(lane) = self.lane_mut(pid, group) {
            lane.seek(cursor);
        }
        self.save_lane(pid, group);
        self.refresh(&queue, group, pid);
    }

    /// Moves `group`'s cursor on one partition to its end. Returns the new cursor.
    pub fn seek_partition_to_end(
        &mut self,
        now: i64,
        group: &str,
        queue: &str,
        partition: &str,
    ) -> CoreResult<i64> {
        let now = self.tick(now);
        let group = Self::group_name(Some(group));
        let pid = self
            .queues
            .get(queue)
            .and_then(|q| q.partitions.get(partition))
            .copied()
            .ok_or_else(|| CoreError::not_found("Partition not found"))?;
        let cursor = self.partitions[&pid].next_offset as i64 - 1;
        self.seek_lane(now, pid, &group, cursor);
        self.wake_queue(queue.to_string());
        Ok(cursor)
    }

    /// Deletes `group`'s lanes (on `queue`, or everywhere) and, if asked, its subscriptions.
    pub fn delete_group(
        &mut self,
        now: i64,
        group: &str,
        queue: Option<&str>,
        delete_metadata: bool,
    ) -> GroupDeleteReply {
        self.tick(now);
        let pids: Vec<u64> = self
            .partitions
            .values()
            .filter(|p| queue.is_none_or(|q| p.queue == q))
            .map(|p| p.id)
            .collect();
        let mut deleted = 0;
        for pid in pids {
            let had = self.partitions[&pid].lanes.contains_key(group);
            if !had {
                continue;
            }
            self.release_lane(pid, group);
            let p = self.partitions.get_mut(&pid).expect("listed above");
            p.lanes.remove(group);
            let queue_name = p.queue.clone();
            self.changes.delete(lane_key(pid, group));
            self.wake_queue(queue_name);
            deleted += 1;
        }
        let mut metadata_deleted = false;
        if delete_metadata {
            let keys: Vec<(String, String)> = self
                .subscriptions
                .keys()
                .filter(|(q, g)| g == group && queue.is_none_or(|x| x == q))
                .cloned()
                .collect();
            for key in keys {
                self.subscriptions.remove(&key);
                self.changes.delete(subscription_key(&key.0, &key.1));
                metadata_deleted = true;
            }
        }
        self.groups
            .retain(|(q, g), _| !(g == group && queue.is_none_or(|x| x == q)));
        GroupDeleteReply {
            deleted_partitions: deleted,
            metadata_deleted,
        }
    }

    /// Rewrites the start time of every subscription of `group`; lanes that never committed are
    /// re-derived from it. Returns the number of subscriptions rewritten.
    pub fn update_subscription(&mut self, now: i64, group: &str, start_ms: i64) -> u32 {
        self.tick(now);
        let keys: Vec<(String, String)> = self
            .subscriptions
            .keys()
            .filter(|(_, g)| g == group)
            .cloned()
            .collect();
        for (queue, g) in &keys {
            if let Some(sub) = self.subscriptions.get_mut(&(queue.clone(), g.clone())) {
                sub.start_ms = Some(start_ms);
                sub.mode = SubscriptionMode::Timestamp;
            }
            self.save_subscription(queue, g);
            let pids: Vec<u64> = self
                .queues
                .get(queue)
                .map(|q| q.partitions.values().copied().collect())
                .unwrap_or_default();
            for pid in pids {
                let untouched = self.partitions[&pid]
                    .lanes
                    .get(g)
                    .is_none_or(|l| l.never_claimed());
                if untouched {
                    let cursor = self.initial_cursor(pid, g);
                    if let Some(lane) = self.lane_mut(pid, g) {
                        lane.resubscribe(cursor);
                    }
                    if self.partitions[&pid].lanes.contains_key(g) {
                        self.save_lane(pid, g);
                    }
                    self.refresh(queue, g, pid);
                }
            }
            self.wake_queue(queue.clone());
        }
        keys.len() as u32
    }

    /// The segments a transaction of `operations` will read that are not loaded.
    pub fn segments_needed_for_transaction(&self, operations: &[TxOperation]) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        for op in operations {
            let more = match op {
                TxOperation::Push(items) => self.segments_needed_for_push(items),
                TxOperation::Ack { item, group } => {
                    self.segments_needed_for_ack(group.as_deref(), std::slice::from_ref(item))
                }
                TxOperation::Unknown(_) => Vec::new(),
            };
            for key in more {
                if !out.contains(&key) {
                    out.push(key);
                }
            }
        }
        out
    }

    /// Applies a transaction atomically (docs/protocol.md §3.9): every operation or none.
    pub fn transaction(&mut self, now: i64, operations: Vec<TxOperation>) -> TxReply {
        let now = self.tick(now);
        let transaction_id = self.ids.uuid_v7(now);
        // Validate what can be validated against the state before anything is applied, so the common
        // refusals cost no rollback.
        if let Some(error) = self.precheck_transaction(now, &operations) {
            return TxReply {
                transaction_id,
                success: false,
                error: Some(error),
                results: Vec::new(),
            };
        }
        let mut results = Vec::new();
        for op in operations {
            match op {
                TxOperation::Push(items) => {
                    let base = results.len();
                    results.extend(
                        self.push_items(now, items, base)
                            .into_iter()
                            .map(TxResult::Push),
                    );
                }
                TxOperation::Ack { item, group } => {
                    let mut r = self
                        .ack(now, group.as_deref(), std::slice::from_ref(&item))
                        .remove(0);
                    r.index = results.len();
                    let failed = !r.success;
                    let error = r.error.clone();
                    results.push(TxResult::Ack(r));
                    if failed {
                        // Earlier operations already touched state: the engine reloads from the store.
                        self.discard = true;
                        self.changes = Default::default();
                        return TxReply {
                            transaction_id,
                            success: false,
                            error,
                            results,
                        };
                    }
                }
                TxOperation::Unknown(kind) => {
                    self.discard = true;
                    self.changes = Default::default();
                    return TxReply {
                        transaction_id,
                        success: false,
                        error: Some(format!("Unknown operation type: {kind}")),
                        results,
                    };
                }
            }
        }
        TxReply {
            transaction_id,
            success: true,
            error: None,
            results,
        }
    }

    fn precheck_transaction(&self, now: i64, operations: &[TxOperation]) -> Option<String> {
        let push_bytes = operations
            .iter()
            .map(|op| match op {
                TxOperation::Push(items) => Self::push_size(items),
                _ => 0,
            })
            .sum();
        if let Err(full) = self.check_quota(push_bytes) {
            return Some(full.message);
        }
        for op in operations {
            match op {
                TxOperation::Unknown(kind) => {
                    return Some(format!("Unknown operation type: {kind}"))
                }
                TxOperation::Push(_) => {}
                TxOperation::Ack { item, group } => {
                    let group = Self::group_name(group.as_deref());
                    let found = self
                        .find_retained(&item.partition_id, &item.transaction_id)
                        .map(|(pid, _)| &self.partitions[&pid]);
                    let Some(p) = found else {
                        return Some(MESSAGE_NOT_FOUND.to_string());
                    };
                    if let AckStatus::Invalid(s) = &item.status {
                        return Some(format!("Invalid status: {s}"));
                    }
                    if let Some(fence) = item.lease_id.as_deref().filter(|l| !l.is_empty()) {
                        let live = p.lanes.get(&group).and_then(|l| l.live_lease(now));
                        if live != Some(fence) {
                            return Some(INVALID_LEASE.to_string());
                        }
                    }
                }
            }
        }
        None
    }

    /// Retention and eviction (docs/protocol.md §3.10): deletes expired messages, whole segments at a time
    /// once every message in them is gone.
    pub fn maintain(&mut self, now: i64) -> MaintenanceReport {
        let now = self.tick(now);
        let mut report = MaintenanceReport::default();
        let queues: Vec<(String, QueueOptions)> = self
            .queues
            .values()
            .map(|q| (q.record.name.clone(), q.record.options.clone()))
            .collect();
        for (queue, o) in queues {
            if o.retention_enabled && o.retention_s > 0 {
                let age_ms = o.retention_s.saturating_mul(1000).min(i64::MAX as u64) as i64;
                self.forget_deliveries(&queue, Some(now.saturating_sub(age_ms)));
            }
            let pids: Vec<u64> = self.queues[&queue].partitions.values().copied().collect();
            for pid in pids {
                let p = &self.partitions[&pid];
                let mut new_first = p.first_offset;
                let older_than = |secs: u64| {
                    (p.last_offset_created_at_or_before(now - (secs * 1000) as i64) + 1) as u64
                };
                if o.retention_enabled && o.retention_s > 0 {
                    let cut = older_than(o.retention_s);
                    report.retention_deleted += cut.saturating_sub(new_first);
                    new_first = new_first.max(cut);
                }
                if o.retention_enabled && o.completed_retention_s > 0 {
                    let consumed = self.consumed_by_all(&queue, pid);
                    let cut = older_than(o.completed_retention_s).min((consumed + 1).max(0) as u64);
                    report.retention_deleted += cut.saturating_sub(new_first);
                    new_first = new_first.max(cut);
                }
                if o.max_wait_time_s > 0 {
                    let cut = older_than(o.max_wait_time_s);
                    report.evicted += cut.saturating_sub(new_first);
                    new_first = new_first.max(cut);
                }
                if new_first > self.partitions[&pid].first_offset {
                    report.segments_deleted += self.trim_partition(pid, new_first);
                }
            }
        }
        report
    }

    /// The highest offset every group with a lane or subscription on the partition has committed.
    fn consumed_by_all(&self, queue: &str, pid: u64) -> i64 {
        let p = &self.partitions[&pid];
        let mut groups: Vec<String> = p.lanes.keys().cloned().collect();
        groups.extend(
            self.subscriptions
                .keys()
                .filter(|(q, _)| q == queue)
                .map(|(_, g)| g.clone()),
        );
        groups
            .iter()
            .map(|g| {
                p.lanes
                    .get(g)
                    .map_or_else(|| self.initial_cursor(pid, g), |l| l.committed())
            })
            .min()
            .unwrap_or(-1)
    }

    /// Drops offsets below `new_first` from partition `pid`. Returns segments deleted.
    fn trim_partition(&mut self, pid: u64, new_first: u64) -> u64 {
        let (queue, doomed) = {
            let p = self
                .partitions
                .get_mut(&pid)
                .expect("trimmed partition exists");
            let keep_from = p.segments.partition_point(|s| s.last < new_first);
            let doomed: Vec<SegmentMeta> = p.segments.drain(..keep_from).collect();
            if let Some(next) = p
                .segments
                .front()
                .map(|s| s.seq)
                .or(doomed.last().map(|s| s.seq + 1))
            {
                p.txids.forget_below(next);
            }
            p.first_offset = new_first;
            let floor = new_first as i64 - 1;
            for lane in p.lanes.values_mut() {
                lane.raise_floor(floor);
            }
            (p.queue.clone(), doomed)
        };
        for seg in &doomed {
            self.changes.delete(segment_key(pid, seg.first));
            self.changes.delete(index_entry_key(pid, seg.first));
            self.stored_bytes = self.stored_bytes.saturating_sub(seg.stored_bytes as u64);
        }
        let groups: Vec<String> = self.partitions[&pid].lanes.keys().cloned().collect();
        for g in groups {
            self.save_lane(pid, &g);
            self.refresh(&queue, &g, pid);
        }
        self.save_partition(pid);
        doomed.len() as u64
    }
}

//! Read-only views: what the resources, status and dead-letter routes and the page show.

use super::api::*;
use super::state::*;
use super::Broker;

impl Broker {
    fn lane_view(&self, p: &Partition, group: &str, now: i64) -> LaneView {
        let lane = p
            .lanes
            .get(group)
            .map(|l| (**l).clone())
            .unwrap_or_else(|| Lane::at(self.initial_cursor(p.id, group)));
        let committed = lane.committed.max(p.first_offset as i64 - 1);
        let leased = lane.is_leased(now);
        LaneView {
            consumer_group: group.to_string(),
            committed,
            backlog: (p.next_offset as i64 - 1 - committed).max(0) as u64,
            lease_id: lane.live_lease(now).map(str::to_string),
            lease_expires_at_ms: leased.then_some(lane.lease_expires_ms),
            batch_end: (leased && lane.batch_end >= 0).then_some(lane.batch_end as u64),
            retry_count: lane.retry_count,
            attempt_count: lane.attempt_count,
            hold_until_ms: lane.is_held(now).then_some(lane.hold_until_ms),
        }
    }

    fn partition_view(&self, p: &Partition, now: i64) -> PartitionView {
        let mut groups: Vec<String> = p.lanes.keys().cloned().collect();
        for (q, g) in self.subscriptions.keys() {
            if q == &p.queue && !groups.contains(g) {
                groups.push(g.clone());
            }
        }
        groups.sort();
        PartitionView {
            id: p.id.to_string(),
            name: p.name.clone(),
            created_at_ms: p.created_at_ms,
            next_offset: p.next_offset,
            first_retained_offset: p.first_offset,
            messages: p.retained(),
            oldest_message_ms: p.oldest_created(),
            newest_message_ms: p.newest_created(),
            lanes: groups.iter().map(|g| self.lane_view(p, g, now)).collect(),
            dead_letters: self
                .dead_letters
                .values()
                .filter(|d| d.partition_id == p.id)
                .count() as u64,
        }
    }

    fn queue_view_of(&self, q: &Queue, now: i64) -> QueueView {
        QueueView {
            id: q.record.id.clone(),
            name: q.record.name.clone(),
            namespace: q.record.namespace.clone(),
            task: q.record.task.clone(),
            created_at_ms: q.record.created_at_ms,
            options: q.record.options.clone(),
            partitions: q
                .partitions
                .values()
                .map(|pid| self.partition_view(&self.partitions[pid], now))
                .collect(),
        }
    }

    /// Every queue with its partitions and lanes, by name.
    pub fn list_queues(&self, now: i64) -> Vec<QueueView> {
        let now = now.max(self.now_ms);
        self.queues
            .values()
            .map(|q| self.queue_view_of(q, now))
            .collect()
    }

    /// One queue, if it exists.
    pub fn queue_view(&self, now: i64, queue: &str) -> Option<QueueView> {
        let now = now.max(self.now_ms);
        self.queues.get(queue).map(|q| self.queue_view_of(q, now))
    }

    /// One queue's options, if it exists (no view is built: cheap enough for every push).
    pub fn queue_options(&self, queue: &str) -> Option<&QueueOptions> {
        self.queues.get(queue).map(|q| &q.record.options)
    }

    /// Dead letters, newest first, filtered and paged.
    pub fn dead_letters(&self, query: &DlqQuery) -> Vec<DeadLetterView> {
        let mut newest_first: Vec<&DeadLetter> = self.dead_letters.values().map(|d| &**d).collect();
        newest_first.sort_by_key(|d| std::cmp::Reverse(d.seq));
        newest_first
            .into_iter()
            .filter(|d| query.queue.as_deref().is_none_or(|q| d.queue == q))
            .filter(|d| query.consumer_group.as_deref().is_none_or(|g| d.group == g))
            .skip(query.offset)
            .take(query.limit)
            .map(|d| DeadLetterView {
                id: d.id.clone(),
                message_id: d.message_id.clone(),
                transaction_id: d.transaction_id.clone(),
                partition_id: d.partition_id.to_string(),
                queue: d.queue.clone(),
                partition: d.partition.clone(),
                consumer_group: d.group.clone(),
                error_message: d.error.clone(),
                retry_count: d.retry_count,
                payload: d.payload.clone(),
                failed_at_ms: d.failed_at_ms,
                offset: d.offset,
                original_created_at_ms: d.created_at_ms,
            })
            .collect()
    }

    fn message_view(&self, p: &Partition, offset: u64) -> Option<MessageView> {
        let m = self.stored_message(p.id, offset)?;
        Some(MessageView {
            id: m.id,
            transaction_id: m.transaction_id,
            trace_id: m.trace_id,
            offset,
            created_at_ms: m.created_at_ms,
            payload: m.payload,
            queue: p.queue.clone(),
            partition: p.name.clone(),
            partition_id: p.id.to_string(),
        })
    }

    /// Retained messages of one partition from `from_offset` on, at most `limit`.
    pub fn messages(
        &self,
        queue: &str,
        partition: &str,
        from_offset: u64,
        limit: usize,
    ) -> CoreResult<Vec<MessageView>> {
        let pid = self
            .queues
            .get(queue)
            .and_then(|q| q.partitions.get(partition))
            .ok_or_else(|| CoreError::not_found("Partition not found"))?;
        let p = &self.partitions[pid];
        let start = from_offset.max(p.first_offset);
        Ok((start..p.next_offset)
            .take(limit)
            .filter_map(|o| self.message_view(p, o))
            .collect())
    }

    /// The segments [`Self::messages`] with the same arguments reads that are not loaded.
    pub fn segments_needed_for_messages(
        &self,
        queue: &str,
        partition: &str,
        from_offset: u64,
        limit: usize,
    ) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let Some(p) = self
            .queues
            .get(queue)
            .and_then(|q| q.partitions.get(partition))
            .and_then(|pid| self.partitions.get(pid))
        else {
            return out;
        };
        let mut offset = from_offset.max(p.first_offset);
        let end = offset.saturating_add(limit as u64).min(p.next_offset);
        while offset < end {
            let Some(seg) = p.segment_of(offset) else {
                break;
            };
            self.want_segment(p.id, seg.first, &mut out);
            offset = seg.last + 1;
        }
        out
    }

    /// The segments [`Self::message`] with the same arguments reads that are not loaded.
    pub fn segments_needed_for_message(
        &self,
        partition_id: &str,
        transaction_id: &str,
    ) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        if let Ok(pid) = partition_id.parse::<u64>() {
            self.transaction_candidates(pid, transaction_id, &mut out);
        }
        out
    }

    /// One retained message by address.
    pub fn message(&self, partition_id: &str, transaction_id: &str) -> Option<MessageView> {
        let (pid, offset) = self.find_retained(partition_id, transaction_id)?;
        self.message_view(&self.partitions[&pid], offset)
    }

    /// Counters since open and current gauges.
    pub fn stats(&self, now: i64) -> BrokerStats {
        let now = now.max(self.now_ms);
        let mut by_queue: std::collections::BTreeMap<String, u64> = Default::default();
        for d in self.dead_letters.values() {
            *by_queue.entry(d.queue.clone()).or_default() += 1;
        }
        BrokerStats {
            pushed: self.stats.pushed,
            popped: self.stats.popped,
            acked: self.stats.acked,
            dlq_depth: self.dead_letters.len() as u64,
            dlq_depth_by_queue: by_queue.into_iter().collect(),
            queues: self.queues.len() as u64,
            partitions: self.partitions.len() as u64,
            messages: self.partitions.values().map(|p| p.retained()).sum(),
            live_leases: self
                .partitions
                .values()
                .flat_map(|p| p.lanes.values())
                .filter(|l| l.is_leased(now))
                .count() as u64,
        }
    }

    /// The subscription of `group` on `queue`, if its first pop happened.
    pub fn subscription(&self, queue: &str, group: &str) -> Option<&Subscription> {
        self.subscriptions
            .get(&(queue.to_string(), group.to_string()))
            .map(|s| &**s)
    }
}

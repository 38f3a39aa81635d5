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
        let committed = lane.committed().max(p.first_offset as i64 - 1);
        let leased = lane.is_leased(now);
        LaneView {
            consumer_group: group.to_string(),
            committed,
            backlog: (p.next_offset as i64 - 1 - committed).max(0) as u64,
            lease_id: lane.live_lease(now).map(str::to_string),
            lease_expires_at_ms: leased.then_some(lane.lease_expires_ms()),
            // The span of the live claim, or of the failed one waiting out its retry delay.
            batch_end: ((leased || lane.is_held(now)) && lane.batch_end() >= 0)
                .then_some(lane.batch_end() as u64),
            retry_count: lane.retry_count(),
            attempt_count: lane.attempt_count(),
            hold_until_ms: lane.is_held(now).then_some(lane.hold_until_ms()),
            quarantined_offset: lane.quarantined_head(),
            expiry_streak: lane.expiry_streak(),
            delivered: lane.delivered,
            acked: lane.acked,
            failed: lane.failed,
        }
    }

    fn partition_view(&self, p: &Partition, now: i64) -> PartitionView {
        let mut groups: Vec<String> = p.lanes.keys().cloned().collect();
        for (q, g) in self.subscriptions.keys() {
            if q == &p.queue && !groups.contains(g) {
                groups.push(g.clone());
            }
        }
        super::sort::sort(&mut groups);
        let dead_retained = self.dead_retained(p);
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
            dead_retained,
        }
    }

    /// [`PartitionView::dead_retained`] of `p`: its retained offsets with a dead-letter row, counted once
    /// each, at or below the queue-mode group's committed offset and above it.
    fn dead_retained(&self, p: &Partition) -> (u64, u64) {
        let mut offsets: Vec<u64> = (self.dead_letters.values())
            .filter(|d| d.partition_id == p.id && d.offset >= p.first_offset)
            .map(|d| d.offset)
            .collect();
        offsets.sort_unstable();
        offsets.dedup();
        let committed = p
            .lanes
            .get(QUEUE_MODE_GROUP)
            .map_or(-1, |lane| lane.committed());
        let below = offsets.iter().filter(|&&o| o as i64 <= committed).count() as u64;
        (below, offsets.len() as u64 - below)
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
    #[inline(never)]
    pub fn queue_options(&self, queue: &str) -> Option<&QueueOptions> {
        self.queues.get(queue).map(|q| &q.record.options)
    }

    /// Dead letters, newest first, filtered and paged.
    pub fn dead_letters(&self, query: &DlqQuery) -> Vec<DeadLetterView> {
        let mut newest_first: Vec<&DeadLetter> = self.dead_letters.values().map(|d| &**d).collect();
        super::sort::sort_by_key(&mut newest_first, |d| std::cmp::Reverse(d.seq));
        newest_first
            .into_iter()
            .filter(|d| query.queue.as_deref().is_none_or(|q| d.queue == q))
            .filter(|d| query.consumer_group.as_deref().is_none_or(|g| d.group == g))
            .skip(query.offset)
            .take(query.limit)
            .map(Self::dead_letter_view)
            .collect()
    }

    /// A dead-letter row as listed.
    pub(super) fn dead_letter_view(d: &DeadLetter) -> DeadLetterView {
        DeadLetterView {
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
        }
    }

    fn message_view(&self, p: &Partition, offset: u64) -> Option<MessageView> {
        let m = self.stored_message(p.id, offset)?;
        Some(MessageView {
            id: m.id.into(),
            transaction_id: m.transaction_id.into(),
            trace_id: m.trace_id.map(String::from),
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

    /// Stored totals and current gauges.
    pub fn stats(&self, now: i64) -> BrokerStats {
        let now = now.max(self.now_ms);
        let mut by_queue: std::collections::BTreeMap<String, u64> = Default::default();
        for d in self.dead_letters.values() {
            *by_queue.entry(d.queue.clone()).or_default() += 1;
        }
        BrokerStats {
            pushed: self.meters_totals().pushed,
            popped: self.meters_totals().popped,
            acked: self.meters_totals().acked,
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

    /// Every (consumer group, queue) pair, by group then queue: a group is on a queue when it has a
    /// lane on one of its partitions or a subscription to it. Each entry covers every partition of the
    /// queue (a partition the group has not claimed yet shows the cursor its subscription gives it).
    /// Computed from memory only: cursors, offsets and segment push times, never message bytes.
    pub fn consumer_groups(&self, now: i64) -> Vec<GroupView> {
        let now = now.max(self.now_ms);
        let mut pairs: std::collections::BTreeSet<(String, String)> = Default::default();
        for p in self.partitions.values() {
            for g in p.lanes.keys() {
                pairs.insert((g.clone(), p.queue.clone()));
            }
        }
        for (q, g) in self.subscriptions.keys() {
            if self.queues.contains_key(q) {
                pairs.insert((g.clone(), q.clone()));
            }
        }
        pairs
            .into_iter()
            .filter_map(|(g, q)| self.group_view(&g, &q, now))
            .collect()
    }

    /// One group on one queue (see [`Self::consumer_groups`]); `None` when the queue does not exist.
    pub fn group_view(&self, group: &str, queue: &str, now: i64) -> Option<GroupView> {
        let now = now.max(self.now_ms);
        let q = self.queues.get(queue)?;
        let partitions = q
            .partitions
            .values()
            .filter_map(|pid| self.partitions.get(pid))
            .map(|p| {
                let lane = self.lane_view(p, group, now);
                let oldest_pending_ms = if lane.backlog > 0 {
                    p.created_at((lane.committed + 1) as u64)
                } else {
                    None
                };
                GroupPartitionView {
                    partition: p.name.clone(),
                    partition_id: p.id.to_string(),
                    claimed: p.lanes.get(group).is_some_and(|l| l.claim_start() >= 0),
                    lane,
                    oldest_pending_ms,
                }
            })
            .collect();
        let subscription = self.subscription(queue, group).map(|s| SubscriptionView {
            mode: s.mode.as_str().to_string(),
            start_ms: s.start_ms,
            created_at_ms: s.created_at_ms,
            conflation: s.conflation,
        });
        Some(GroupView {
            group: group.to_string(),
            queue: queue.to_string(),
            subscription,
            partitions,
        })
    }

    /// True when `group` has a lane on a partition of `queue` or a subscription to it.
    pub fn group_is_on_queue(&self, group: &str, queue: &str) -> bool {
        self.subscription(queue, group).is_some()
            || self.queues.get(queue).is_some_and(|q| {
                q.partitions.values().any(|pid| {
                    self.partitions
                        .get(pid)
                        .is_some_and(|p| p.lanes.contains_key(group))
                })
            })
    }

    /// Retained messages of the queues `include` accepts that were pushed in `from..=to`, counted into
    /// buckets of `bucket_ms` starting at `start` (`start <= from`; bucket `i` covers
    /// `start + i * bucket_ms` onwards, the last one holds `to`). From the segment index only: one push
    /// time per segment.
    pub fn pushed_per_bucket(
        &self,
        start: i64,
        (from, to): (i64, i64),
        bucket_ms: i64,
        include: impl Fn(&QueueView) -> bool,
    ) -> Vec<u64> {
        let buckets = if to < start || bucket_ms <= 0 {
            0
        } else {
            ((to - start) / bucket_ms + 1) as usize
        };
        let mut out = vec![0u64; buckets];
        for q in self.queues.values() {
            let summary = QueueView {
                id: q.record.id.clone(),
                name: q.record.name.clone(),
                namespace: q.record.namespace.clone(),
                task: q.record.task.clone(),
                created_at_ms: q.record.created_at_ms,
                options: q.record.options.clone(),
                partitions: Vec::new(),
            };
            if !include(&summary) {
                continue;
            }
            for p in q
                .partitions
                .values()
                .filter_map(|pid| self.partitions.get(pid))
            {
                for seg in &p.segments {
                    if seg.created_ms < from || seg.created_ms > to || seg.last < p.first_offset {
                        continue;
                    }
                    let first = seg.first.max(p.first_offset);
                    let at = ((seg.created_ms - start) / bucket_ms) as usize;
                    if let Some(slot) = out.get_mut(at) {
                        *slot += seg.last - first + 1;
                    }
                }
            }
        }
        out
    }

    /// The (partition id, offset) of the retained messages of `queue`, newest push first (ties: higher
    /// partition id, then higher offset, first), skipping `skip` and taking at most `take`. From the
    /// segment index only; `None` when the queue does not exist.
    pub fn newest_offsets(&self, queue: &str, skip: usize, take: usize) -> Option<Vec<(u64, u64)>> {
        let q = self.queues.get(queue)?;
        // One cursor per partition at its newest retained offset; a heap picks the newest of them.
        let mut heap: std::collections::BinaryHeap<(i64, u64, u64)> = q
            .partitions
            .values()
            .filter_map(|pid| self.partitions.get(pid))
            .filter(|p| p.retained() > 0)
            .filter_map(|p| {
                let last = p.next_offset - 1;
                Some((p.created_at(last)?, p.id, last))
            })
            .collect();
        let mut out = Vec::new();
        let mut skipped = 0usize;
        while out.len() < take {
            let Some((_, pid, offset)) = heap.pop() else {
                break;
            };
            if skipped < skip {
                skipped += 1;
            } else {
                out.push((pid, offset));
            }
            let p = &self.partitions[&pid];
            if offset > p.first_offset {
                if let Some(at) = p.created_at(offset - 1) {
                    heap.push((at, pid, offset - 1));
                }
            }
        }
        Some(out)
    }

    /// The stored message at (partition id, offset), if retained. Reads its segment: call it inside
    /// `Engine::read_loaded`, which loads what a run missed and runs again.
    pub fn message_at(&self, pid: u64, offset: u64) -> Option<MessageView> {
        let p = self.partitions.get(&pid)?;
        if offset < p.first_offset || offset >= p.next_offset {
            return None;
        }
        self.message_view(p, offset)
    }

    /// The first retained offset of `queue`/`partition` pushed at or after `instant` (the next offset
    /// when none is), from the segment index; `None` for an unknown partition.
    pub fn first_offset_pushed_at_or_after(
        &self,
        queue: &str,
        partition: &str,
        instant: i64,
    ) -> Option<u64> {
        let pid = self.queues.get(queue)?.partitions.get(partition)?;
        let p = &self.partitions[pid];
        Some(
            (p.last_offset_created_at_or_before(instant - 1) + 1).max(p.first_offset as i64) as u64,
        )
    }

    /// The (partition id, offset) of every message of `queue` with a dead-letter row (any group).
    pub fn dead_lettered_offsets(&self, queue: &str) -> std::collections::HashSet<(u64, u64)> {
        self.dead_letters
            .values()
            .filter(|d| d.queue == queue)
            .map(|d| (d.partition_id, d.offset))
            .collect()
    }

    /// The subscription of `group` on `queue`, if its first pop happened.
    pub fn subscription(&self, queue: &str, group: &str) -> Option<&Subscription> {
        self.subscriptions
            .get(&(queue.to_string(), group.to_string()))
            .map(|s| &**s)
    }
}

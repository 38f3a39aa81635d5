//! Ack resolution (docs/protocol.md §3.4, §4.3): one call, resolved per lane.

use super::api::*;
use super::deliveries::AttemptBefore;
use super::segment::StoredMessage;
use super::state::*;
use super::txindex;
use super::Broker;
use std::rc::Rc;

/// Item error for a message that does not exist (or is no longer retained).
pub const MESSAGE_NOT_FOUND: &str = "Message not found";
/// Item error for a fenced ack whose lease is not the lane's live lease.
pub const INVALID_LEASE: &str = "Invalid or expired lease";
/// Item error for a `completed` beyond the leased span while a lease is live.
pub const NOT_IN_SPAN: &str = "Message not in leased span";
/// Item error for an unfenced ack whose group has no cursor (lane) on the message's partition: it
/// never popped there, so it has nothing to ack (docs/decisions.md, "An ack needs the group's cursor").
pub const NO_CURSOR: &str = "Consumer group has no cursor on this partition";
/// Error recorded on a dead letter when no item of the call carried one.
pub const RETRIES_EXHAUSTED: &str = "Retries exhausted";

/// Where an ack call's next item probably is: the offset after the message found last, in the
/// segment that held it, with what the search found on the way there. Valid for one pass over a
/// call's items, during which no lane's span and no segment changes (a pass only reads them).
#[derive(Debug, Clone)]
struct SpanHint {
    pid: u64,
    next: u64,
    /// The lane's span, `start..=end`, as [`Broker::find_in_lease_span`] computed it.
    start: u64,
    end: u64,
    segment_first: u64,
    segment_last: u64,
    /// The segment's messages, index 0 at `segment_first`.
    messages: Rc<[StoredMessage]>,
}

/// What fences an ack on one lane, read once per run of items on it: whether a lease is live, where its
/// span ends, and a fence already found to be the live lease (an item's own text, so nothing is copied).
/// The lookup pass changes no lane and makes none: an item whose group has no lane there is refused.
/// Keyed by partition alone: one ack call is for one consumer group, so a partition names one lane.
struct LaneSpan {
    pid: u64,
    leased: bool,
    batch_end: i64,
    fence: Option<SharedStr>,
}

/// An item that passed lookup and fencing, waiting for its lane's resolution.
struct Pending {
    index: usize,
    offset: u64,
    status: AckStatus,
    error: Option<String>,
}

impl Broker {
    /// Resolves an ack call for one group (`None` = queue mode). Results are index-aligned with `items`.
    pub fn ack(&mut self, now: i64, group: Option<&str>, items: &[AckItem]) -> Vec<AckResult> {
        let now = self.tick(now);
        let group = Self::group_name(group);
        // Items name a few partitions, usually in runs: each partition id's text is shared by the
        // results that name it.
        let mut last_pid: Option<SharedStr> = None;
        let mut results: Vec<AckResult> = Vec::with_capacity(items.len());
        // The queue and partition names of the partition found last, shared by its results.
        let mut names: Option<(u64, SharedStr, SharedStr)> = None;

        // Lookup and fencing, per item; survivors grouped by lane (partition) below.
        let mut survivors: Vec<(u64, Pending)> = Vec::new();
        // Where the next item probably is: right after the one before (acks come in pop order).
        let mut hint = None;
        // The fencing of the lane found last (items come in runs of one partition).
        let mut lane_span: Option<LaneSpan> = None;
        for (index, item) in items.iter().enumerate() {
            let partition_id = match &last_pid {
                Some(shared) if *shared == item.partition_id => shared.clone(),
                _ => {
                    last_pid = Some(item.partition_id.clone());
                    item.partition_id.clone()
                }
            };
            let in_span = self.find_in_lease_span(
                &item.partition_id,
                &group,
                &item.transaction_id,
                &mut hint,
            );
            // A message found in the cache lends its transaction id (the same text) to the result.
            let (found, transaction_id) = match in_span {
                Some((pid, offset, shared)) => (Some((pid, offset)), shared),
                None => (
                    self.find_retained(&item.partition_id, &item.transaction_id),
                    item.transaction_id.clone(),
                ),
            };
            results.push(AckResult {
                index,
                transaction_id,
                partition_id,
                success: false,
                error: None,
                queue: None,
                partition: None,
                lease_released: false,
                dlq: false,
                status: item.status.wire_name(),
            });
            let Some((pid, offset)) = found else {
                results[index].error = Some(MESSAGE_NOT_FOUND.to_string());
                continue;
            };
            let (queue, partition) = self.shared_names(pid, &mut names);
            results[index].queue = Some(queue);
            results[index].partition = Some(partition);
            if let AckStatus::Invalid(s) = &item.status {
                results[index].error = Some(format!("Invalid status: {s}"));
                continue;
            }
            #[cfg(feature = "twophase")]
            if self.pinned_against(pid, &group) {
                results[index].error = Some(super::prepared::PINNED_LEASE.to_string());
                continue;
            }
            let span = match lane_span.as_mut().filter(|span| span.pid == pid) {
                Some(span) => span,
                None => {
                    // A refused item changes nothing, so no lane is made here: the group's first
                    // pop makes it, from its subscription. Without one, a fenced item names no live
                    // lease and an unfenced one acks for a group that never popped this partition.
                    let Some(lane) = self.partitions[&pid].lanes.get(&group) else {
                        let fenced = item.lease_id.as_ref().is_some_and(|l| !l.is_empty());
                        let error = if fenced { INVALID_LEASE } else { NO_CURSOR };
                        results[index].error = Some(error.to_string());
                        continue;
                    };
                    let live = lane.live_lease(now);
                    // This item's fence, when it is the live lease: the next items compare with it.
                    let fence = item
                        .lease_id
                        .as_ref()
                        .filter(|l| live == Some(l.as_str()))
                        .cloned();
                    lane_span.insert(LaneSpan {
                        pid,
                        leased: live.is_some(),
                        batch_end: lane.batch_end(),
                        fence,
                    })
                }
            };
            if let Some(fence) = item.lease_id.as_ref().filter(|l| !l.is_empty()) {
                let known = span.fence.as_ref().is_some_and(|f| f == fence);
                if !known {
                    let live = self
                        .partitions
                        .get(&pid)
                        .and_then(|p| p.lanes.get(&group))
                        .and_then(|lane| lane.live_lease(now));
                    if live != Some(fence.as_str()) {
                        results[index].error = Some(INVALID_LEASE.to_string());
                        continue;
                    }
                    span.fence = Some(fence.clone());
                }
            }
            if span.leased && offset as i64 > span.batch_end {
                results[index].error = Some(NOT_IN_SPAN.to_string());
                continue;
            }
            survivors.push((
                pid,
                Pending {
                    index,
                    offset,
                    status: item.status.clone(),
                    error: item.error.clone().filter(|e| !e.is_empty()),
                },
            ));
        }

        // Lanes in partition-id order, each lane's items in call order (the sort is stable). A sorted
        // Vec, not a BTreeMap: one B-tree key/value type fewer in the browser module.
        super::sort::sort_by_key(&mut survivors, |(pid, _)| *pid);
        let mut rest = survivors.into_iter().peekable();
        while let Some((pid, first)) = rest.next() {
            let mut pending = vec![first];
            while let Some((_, next)) = rest.next_if(|(other, _)| *other == pid) {
                pending.push(next);
            }
            self.resolve_lane(now, pid, &group, &pending, &mut results);
        }
        results
    }

    /// The queue and partition names of `pid` as shared text, made once while `last` holds them.
    fn shared_names(
        &self,
        pid: u64,
        last: &mut Option<(u64, SharedStr, SharedStr)>,
    ) -> (SharedStr, SharedStr) {
        match last {
            Some((at, queue, partition)) if *at == pid => (queue.clone(), partition.clone()),
            _ => {
                let p = &self.partitions[&pid];
                let (queue, partition) = (
                    SharedStr::from(p.queue.as_str()),
                    SharedStr::from(p.name.as_str()),
                );
                *last = Some((pid, queue.clone(), partition.clone()));
                (queue, partition)
            }
        }
    }

    /// The (pid, offset) of the retained message at a wire address, if any.
    pub(super) fn find_retained(
        &self,
        partition_id: &str,
        transaction_id: &str,
    ) -> Option<(u64, u64)> {
        let pid = partition_id.parse::<u64>().ok()?;
        let offset = self.find_transaction(pid, transaction_id)?;
        (offset >= self.partitions.get(&pid)?.first_offset).then_some((pid, offset))
    }

    /// The (pid, offset) of the message at a wire address when it is in the span `group` last claimed
    /// on that partition and that span's segments are loaded (the usual ack, right after its pop):
    /// found by the cached segments' fingerprints, without the transaction-id index.
    ///
    /// The same answer [`Self::find_retained`] gives: a partition's stored messages carry distinct
    /// transaction ids (push refuses a second one as a duplicate). `None` says only "not found this
    /// way"; nothing is recorded as read.
    ///
    /// `hint` is where the caller expects it (right after the message found before: acks come in the
    /// order of their pop). The message there is compared first, by its text, without looking the
    /// partition, its lane and the segment up again; then the span is scanned, that segment from the
    /// hinted place. A message found updates the hint, and comes with its own transaction id as
    /// shared text.
    fn find_in_lease_span(
        &self,
        partition_id: &str,
        group: &str,
        transaction_id: &str,
        hint: &mut Option<SpanHint>,
    ) -> Option<(u64, u64, SharedStr)> {
        let pid = partition_id.parse::<u64>().ok()?;
        if let Some(h) = hint.as_mut().filter(|h| h.pid == pid) {
            let next = h.next;
            if (h.start..=h.end).contains(&next) && next <= h.segment_last {
                if let Some(m) = h
                    .messages
                    .get((next - h.segment_first) as usize)
                    .filter(|m| m.transaction_id == transaction_id)
                {
                    let shared = m.transaction_id.clone();
                    h.next += 1;
                    return Some((pid, next, shared));
                }
            }
        }
        let p = self.partitions.get(&pid)?;
        let lane = p.lanes.get(group)?;
        let start = (lane.committed() + 1).max(p.first_offset as i64);
        let end = lane.batch_end();
        if end < start {
            return None;
        }
        let (start, end) = (start as u64, end as u64);
        let fingerprint = txindex::fingerprint(transaction_id);
        let mut offset = start;
        while offset <= end {
            let seg = p.segment_of(offset)?;
            let from = match hint {
                Some(h) if h.pid == pid && (seg.first..=seg.last).contains(&h.next) => {
                    (h.next - seg.first) as usize
                }
                _ => 0,
            };
            if let Some((at, messages)) = self.cache.peek_position_of_transaction(
                pid,
                seg.first,
                transaction_id,
                fingerprint,
                from,
            ) {
                let found = seg.first + at as u64;
                if found < p.first_offset {
                    return None;
                }
                let shared = messages[at].transaction_id.clone();
                *hint = Some(SpanHint {
                    pid,
                    next: found + 1,
                    start,
                    end,
                    segment_first: seg.first,
                    segment_last: seg.last,
                    messages,
                });
                return Some((pid, found, shared));
            }
            offset = seg.last + 1;
        }
        None
    }

    /// The segments an ack of `items` for `group` will read that are not loaded: the candidates for
    /// each item's transaction id, and the segment of each touched lane's head (which an exhausted
    /// retry budget files as a dead letter).
    pub fn segments_needed_for_ack(
        &self,
        group: Option<&str>,
        items: &[AckItem],
    ) -> Vec<(u64, u64)> {
        let group = Self::group_name(group);
        let mut out = Vec::new();
        let mut hint = None;
        // The partition whose head was named last (items come in runs of one partition).
        let mut head_named = None;
        for item in items {
            let Ok(pid) = item.partition_id.parse::<u64>() else {
                continue;
            };
            let in_span = self.find_in_lease_span(
                &item.partition_id,
                &group,
                &item.transaction_id,
                &mut hint,
            );
            if in_span.is_none() {
                self.transaction_candidates(pid, &item.transaction_id, &mut out);
            }
            if head_named.replace(pid) == Some(pid) {
                continue;
            }
            let Some(p) = self.partitions.get(&pid) else {
                continue;
            };
            let committed = p
                .lanes
                .get(&group)
                .map_or(p.first_offset as i64 - 1, |l| l.committed());
            let head = (committed + 1).max(p.first_offset as i64) as u64;
            if let Some(seg) = p.segment_of(head) {
                self.want_segment(pid, seg.first, &mut out);
            }
        }
        out
    }

    /// Applies one lane's share of an ack call (the table of docs/protocol.md §4.3).
    fn resolve_lane(
        &mut self,
        now: i64,
        pid: u64,
        group: &str,
        pending: &[Pending],
        results: &mut [AckResult],
    ) {
        let Some(queue) = self.partitions.get(&pid).map(|p| p.queue.clone()) else {
            return;
        };
        let options = self
            .queues
            .get(&queue)
            .map(|q| q.record.options.clone())
            .unwrap_or_else(QueueOptions::push_created);
        // Acks at or below the cursor are success no-ops: they carry no signal.
        let committed = self.partitions[&pid].lanes[group].committed();
        let signal = pending
            .iter()
            .filter(|x| !matches!(x.status, AckStatus::Completed) && x.offset as i64 > committed)
            .min_by_key(|x| x.offset);
        let completed_below = |limit: Option<u64>| {
            pending
                .iter()
                .filter(|x| x.status == AckStatus::Completed && limit.is_none_or(|s| x.offset < s))
                .map(|x| x.offset as i64)
                .max()
                .unwrap_or(-1)
        };
        let p = completed_below(signal.map(|s| s.offset));
        let old_lease = self.partitions[&pid].lanes[group]
            .lease_id()
            .map(str::to_string);
        let before = AttemptBefore::of(&self.partitions[&pid].lanes[group], now);
        let lane = self
            .partitions
            .get_mut(&pid)
            .and_then(|p| p.lanes.get_mut(group))
            .expect("the lookup found the lane");
        let mut filed: Option<(u64, u32, String)> = None; // (offset, retry count, error)
        let mut dlq_item: Option<usize> = None;
        match signal {
            None => {
                lane.commit_prefix(p);
            }
            Some(s) => match s.status {
                AckStatus::Retry => lane.release_retry(p),
                AckStatus::Failed if lane.retry_count() < options.retry_limit => {
                    lane.release_failed(p, now + options.retry_hold_ms(lane.retry_count()) as i64);
                }
                _ => {
                    // Exhausted `failed` or explicit `dlq`: pass the head after the committed prefix.
                    let head = (lane.committed().max(p) + 1) as u64;
                    let retry_count = lane.retry_count();
                    lane.pass_poison(head as i64);
                    let file = s.status == AckStatus::Dlq || options.dlq_enabled();
                    if file {
                        let error = s
                            .error
                            .clone()
                            .or_else(|| pending.iter().find_map(|x| x.error.clone()))
                            .unwrap_or_else(|| RETRIES_EXHAUSTED.to_string());
                        filed = Some((head, retry_count, error));
                        // `dlq: true` marks the item whose message is filed: none when the head is
                        // a gap the call left below its signal (the signal's message stays pending).
                        dlq_item = pending.iter().find(|x| x.offset == head).map(|x| x.index);
                    }
                }
            },
        }
        let released = lane.lease_id().is_none() || !lane.is_leased(now);
        if let (Some(old), true) = (old_lease, lane.lease_id().is_none()) {
            self.unindex_lease(&old, pid, group);
        }
        let outcome = signal.map(|s| {
            let error = filed.as_ref().map(|f| f.2.clone());
            (&s.status, s.offset, error.or_else(|| s.error.clone()))
        });
        let mode = options.delivery_log;
        self.log_ack_outcome(now, pid, group, mode, before, outcome, filed.is_some());
        if let Some((offset, retry_count, error)) = filed {
            self.file_dead_letter(now, pid, group, offset, retry_count, error);
        }
        let failed = pending
            .iter()
            .filter(|x| matches!(x.status, AckStatus::Failed | AckStatus::Dlq))
            .count() as u64;
        if let Some(lane) = self
            .partitions
            .get_mut(&pid)
            .and_then(|p| p.lanes.get_mut(group))
        {
            lane.acked += pending.len() as u64;
            lane.failed += failed;
        }
        self.save_lane(pid, group);
        self.refresh(&queue, group, pid);
        if released {
            self.wake_queue(queue.clone());
        }
        // The lookup set every pending item's queue and partition (the lane's partition) already.
        for x in pending {
            let r = &mut results[x.index];
            r.success = true;
            r.error = None;
            r.lease_released = released;
            r.dlq = dlq_item == Some(x.index);
        }
        self.count_acks(now, &queue, group, pending.len() as u64, failed);
    }

    /// The highest offset of `pid` every lane has committed: the offset before the partition's first
    /// when no group has a lane there, -1 when there is no such partition. The segment cache's trim ranks
    /// the segments at or below it first out (`Broker::trim_cache`).
    pub(super) fn passed_by_every_lane(&self, pid: u64) -> i64 {
        self.partitions.get(&pid).map_or(-1, |p| {
            p.lanes
                .values()
                .map(|lane| lane.committed())
                .min()
                .unwrap_or(p.first_offset as i64 - 1)
        })
    }

    /// Files offset `offset` of `pid` as a dead letter of `group`.
    pub(super) fn file_dead_letter(
        &mut self,
        now: i64,
        pid: u64,
        group: &str,
        offset: u64,
        retry_count: u32,
        error: String,
    ) {
        let Some(m) = self.stored_message(pid, offset) else {
            return;
        };
        let p = &self.partitions[&pid];
        let letter = DeadLetter {
            id: self.ids.uuid_v7(now),
            partition_id: pid,
            queue: p.queue.clone(),
            partition: p.name.clone(),
            group: group.to_string(),
            message_id: m.id.into(),
            transaction_id: m.transaction_id.into(),
            offset,
            // Kept as long as the letter: its own copy, not a share of the segment's text.
            payload: m.payload.detached(),
            trace_id: m.trace_id.map(String::from),
            error,
            retry_count,
            failed_at_ms: now,
            created_at_ms: m.created_at_ms,
            seq: self.next_dead_letter_seq,
        };
        let id = letter.id.clone();
        self.next_dead_letter_seq += 1;
        self.dead_letters.insert(id.clone(), Box::new(letter));
        self.save_dead_letter(&id);
    }

    /// Extends every live lane of `lease_id` to at least `now + seconds` (docs/protocol.md §3.5).
    pub fn extend_lease(&mut self, now: i64, lease_id: &str, seconds: u64) -> ExtendReply {
        let now = self.tick(now);
        let lanes = self.leases.get(lease_id).cloned().unwrap_or_default();
        let mut renewed = 0u32;
        let mut earliest: Option<i64> = None;
        let target = now.saturating_add((seconds.min(u32::MAX as u64) * 1000) as i64);
        for (pid, group) in &lanes {
            let Some(lane) = self
                .partitions
                .get_mut(pid)
                .and_then(|p| p.lanes.get_mut(group))
            else {
                continue;
            };
            if lane.lease_id() != Some(lease_id) || !lane.is_leased(now) {
                continue;
            }
            let expiry = lane.extend(target);
            renewed += 1;
            earliest = Some(earliest.map_or(expiry, |e: i64| e.min(expiry)));
            self.timers.insert((expiry, *pid, group.clone()));
            self.save_lane(*pid, group);
        }
        let error = if renewed > 0 {
            None
        } else if lanes.is_empty() {
            Some("Lease not found".to_string())
        } else {
            Some("Lease already expired".to_string())
        };
        ExtendReply {
            lease_id: lease_id.to_string(),
            renewed,
            expires_at_ms: earliest,
            error,
        }
    }
}

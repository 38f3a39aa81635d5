//! The delivery log (`deliveryLog` queue option: `off`, `failures`, `all`): one record per delivery
//! attempt once its outcome is known, stored under `v/<seq>` and read at open, so it survives restarts.
//!
//! An attempt is a claim of a span; its outcome is what ended it: `completed` (the span was acked),
//! `retry`, `failed` (with the hold it set), `dead_lettered`, `dropped` (exhausted, DLQ off), `expired`
//! (the lease ran out; recorded when the core's clock passes the expiry) or `auto_acked`. A partial
//! ack does not end an attempt; a seek or a deleted group ends one without a record.
//!
//! Bounded: at most [`MAX_RECORDS_PER_QUEUE`] per queue (the oldest go first), and `maintain` deletes
//! records older than the queue's `retentionSeconds` when its retention is on. Deleting a queue
//! deletes its records.

use super::api::*;
use super::redelivery::DeliveryLogMode;
use super::state::Lane;
use super::Broker;
use serde::Serialize;

/// Most delivery records kept per queue.
pub const MAX_RECORDS_PER_QUEUE: usize = 10_000;

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Every message of the span was acked `completed`.
    Completed,
    /// `retry`: redelivered at once, no budget charged.
    Retry,
    /// `failed` with budget left: held, then redelivered.
    Failed,
    /// Filed to the dead-letter queue (`failed` exhausted, `dlq`, or `reclaimLimit`).
    DeadLettered,
    /// Exhausted `failed` with the dead-letter queue off: passed over.
    Dropped,
    /// The lease ran out.
    Expired,
    /// Delivered with `autoAck` (committed at delivery).
    AutoAcked,
}

impl Outcome {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Retry => "retry",
            Outcome::Failed => "failed",
            Outcome::DeadLettered => "dead_lettered",
            Outcome::Dropped => "dropped",
            Outcome::Expired => "expired",
            Outcome::AutoAcked => "auto_acked",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        [
            Outcome::Completed,
            Outcome::Retry,
            Outcome::Failed,
            Outcome::DeadLettered,
            Outcome::Dropped,
            Outcome::Expired,
            Outcome::AutoAcked,
        ]
        .into_iter()
        .find(|o| o.as_str() == text)
    }

    fn is_success(self) -> bool {
        matches!(self, Outcome::Completed | Outcome::AutoAcked)
    }
}

/// One stored delivery record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeliveryRecord {
    /// Order across the broker (newest = highest); its key.
    pub seq: u64,
    /// Queue name.
    pub queue: String,
    /// Partition name.
    pub partition: String,
    /// Partition id.
    pub partition_id: u64,
    /// Consumer group (`QUEUE_MODE_GROUP` in queue mode).
    pub group: String,
    /// The attempt's lease (none for `auto_acked`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_id: Option<String>,
    /// First offset of the delivered span.
    pub first: u64,
    /// Last offset of the delivered span.
    pub last: u64,
    /// `deliveryAttempt` of the claim.
    pub attempt: u32,
    /// How it ended.
    pub outcome: Outcome,
    /// The offset the outcome names (the signal of `retry`/`failed`, the filed head).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// The error the consumer sent, or why the core gave up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The hold a `failed` set (retryDelay or retryBackoff), Unix ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hold_until_ms: Option<i64>,
    /// When the outcome happened, Unix ms.
    pub at_ms: i64,
}

/// What a lane's claim looked like before an ack resolved it.
#[derive(Debug, Clone)]
pub(super) struct AttemptBefore {
    lease_id: Option<String>,
    first: i64,
    last: i64,
    attempt: u32,
    retry_count: u32,
}

impl AttemptBefore {
    /// The claim `lane` holds at `now`.
    pub(super) fn of(lane: &Lane, now: i64) -> Self {
        AttemptBefore {
            lease_id: lane.live_lease(now).map(str::to_string),
            first: lane.claim_start(),
            last: lane.batch_end(),
            attempt: lane.attempt_count() + 1,
            retry_count: lane.retry_count(),
        }
    }
}

/// The log in memory: each queue's records, oldest (lowest sequence) first, in a short list of the queues
/// that keep a log. Plain vectors, not a map by sequence: they cost the browser module less code, and the
/// oldest records of one queue leave from the front of that queue's list only.
#[derive(Debug, Default)]
pub(super) struct DeliveryLog {
    /// Boxed: the oldest leave from the front, which moves the pointers behind them, not the records.
    #[allow(clippy::vec_box)]
    by_queue: Vec<(String, Vec<Box<DeliveryRecord>>)>,
    next_seq: u64,
}

impl DeliveryLog {
    fn records(&self, queue: &str) -> &[Box<DeliveryRecord>] {
        self.by_queue
            .iter()
            .find(|(q, _)| q == queue)
            .map_or(&[], |(_, records)| records)
    }

    /// The lists of `queue`, or of every queue when `None`.
    fn lists<'a>(
        &'a self,
        queue: Option<&'a str>,
    ) -> impl Iterator<Item = &'a [Box<DeliveryRecord>]> {
        self.by_queue
            .iter()
            .filter(move |(q, _)| queue.is_none_or(|want| q == want))
            .map(|(_, records)| records.as_slice())
    }

    /// The records of `queue` (of every queue when `None`), newest (highest sequence) first: the lists
    /// merged from their newest ends, one step per record taken, so a page stops where it is full.
    fn newest_first<'a>(
        &'a self,
        queue: Option<&'a str>,
    ) -> impl Iterator<Item = &'a DeliveryRecord> {
        let lists: Vec<&[Box<DeliveryRecord>]> = self.lists(queue).collect();
        let mut ends: Vec<usize> = lists.iter().map(|list| list.len()).collect();
        std::iter::from_fn(move || {
            let newest = (0..lists.len())
                .filter(|&at| ends[at] > 0)
                .max_by_key(|&at| lists[at][ends[at] - 1].seq)?;
            ends[newest] -= 1;
            Some(&*lists[newest][ends[newest]])
        })
    }

    #[allow(clippy::vec_box)]
    fn records_mut(&mut self, queue: &str) -> &mut Vec<Box<DeliveryRecord>> {
        let at = match self.by_queue.iter().position(|(q, _)| q == queue) {
            Some(at) => at,
            None => {
                self.by_queue.push((queue.to_string(), Vec::new()));
                self.by_queue.len() - 1
            }
        };
        &mut self.by_queue[at].1
    }
}

/// `GET /api/v1/deliveries` filters and page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliveryQuery {
    /// Only this queue.
    pub queue: Option<String>,
    /// Only this group (`QUEUE_MODE_GROUP` for queue mode).
    pub group: Option<String>,
    /// Only this partition (by name).
    pub partition: Option<String>,
    /// Only attempts whose span held the message with this transaction id.
    pub transaction_id: Option<String>,
    /// Page size.
    pub limit: usize,
    /// Records to skip (newest first).
    pub offset: usize,
}

/// A page of the log, newest first, and how many records match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryPage {
    /// The records on this page.
    pub records: Vec<DeliveryRecord>,
    /// Records matching the filters.
    pub total: usize,
}

pub(super) fn delivery_key(seq: u64) -> String {
    format!("v/{seq:016x}")
}

impl Broker {
    /// Ends the attempt `before` on lane (pid, group) after an ack resolved it, if that ended it and the
    /// queue's `deliveryLog` records it. `signal`: the lowest non-`completed` item (status, offset,
    /// error); `filed`: whether a head was dead-lettered.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn log_ack_outcome(
        &mut self,
        now: i64,
        pid: u64,
        group: &str,
        mode: DeliveryLogMode,
        before: AttemptBefore,
        signal: Option<(&AckStatus, u64, Option<String>)>,
        filed: bool,
    ) {
        if mode.is_off() {
            return;
        }
        let Some(lane) = self.partitions.get(&pid).and_then(|p| p.lanes.get(group)) else {
            return;
        };
        let (outcome, offset, error, hold) = match signal {
            None if before.lease_id.is_some() && lane.committed() >= before.last => {
                (Outcome::Completed, None, None, None)
            }
            None => return, // a partial ack (the attempt goes on) or an ack with no live claim
            Some((AckStatus::Retry, s, e)) => (Outcome::Retry, Some(s), e, None),
            Some((AckStatus::Failed, s, e)) if lane.retry_count() > before.retry_count => {
                (Outcome::Failed, Some(s), e, Some(lane.hold_until_ms()))
            }
            Some((_, s, e)) if filed => (Outcome::DeadLettered, Some(s), e, None),
            Some((_, s, e)) => (Outcome::Dropped, Some(s), e, None),
        };
        if !mode.records(outcome.is_success()) || before.first < 0 {
            return;
        }
        let record = self.delivery_record(pid, group, &before, outcome, now);
        self.append_delivery(DeliveryRecord {
            offset,
            error,
            hold_until_ms: hold,
            ..record
        });
    }

    /// Records an `auto_acked` claim of `first..=last` (only under `deliveryLog: all`).
    pub(super) fn log_auto_ack(
        &mut self,
        now: i64,
        pid: u64,
        group: &str,
        mode: DeliveryLogMode,
        first: u64,
        attempt: u32,
    ) {
        if !mode.records(true) {
            return;
        }
        let Some(lane) = self.partitions.get(&pid).and_then(|p| p.lanes.get(group)) else {
            return;
        };
        let before = AttemptBefore {
            lease_id: None,
            first: first as i64,
            last: lane.committed(),
            attempt,
            retry_count: 0,
        };
        let record = self.delivery_record(pid, group, &before, Outcome::AutoAcked, now);
        self.append_delivery(record);
    }

    /// Called when a timer of lane (pid, group) set for instant `at` fires: if it was the lane's lease
    /// expiry and the lease did expire, records the `expired` attempt once (a reopened broker re-arms
    /// the same timer, so a record already there for this lease and instant is not written again).
    pub(super) fn log_expiry(&mut self, pid: u64, group: &str, at: i64) {
        let Some(p) = self.partitions.get(&pid) else {
            return;
        };
        let Some(lane) = p.lanes.get(group) else {
            return;
        };
        if !lane.lease_expired(self.now_ms) || lane.lease_expires_ms() != at {
            return;
        }
        let mode = self
            .queues
            .get(&p.queue)
            .map_or(DeliveryLogMode::Off, |q| q.record.options.delivery_log);
        if !mode.records(false) {
            return;
        }
        let lease = lane.lease_id().map(str::to_string);
        // Records are not in expiry order (an expiry is recorded late, at its instant), so the whole
        // queue's log is searched: a bounded scan, and only when a lease expired with the log on.
        let already = self.deliveries.records(&p.queue).iter().rev().any(|r| {
            r.outcome == Outcome::Expired
                && r.at_ms == at
                && r.partition_id == pid
                && r.group == group
                && r.lease_id == lease
        });
        if already {
            return;
        }
        let before = AttemptBefore {
            lease_id: lease,
            first: lane.claim_start(),
            last: lane.batch_end(),
            attempt: lane.attempt_count() + 1,
            retry_count: lane.retry_count(),
        };
        let record = self.delivery_record(pid, group, &before, Outcome::Expired, at);
        self.append_delivery(record);
    }

    fn delivery_record(
        &self,
        pid: u64,
        group: &str,
        before: &AttemptBefore,
        outcome: Outcome,
        at_ms: i64,
    ) -> DeliveryRecord {
        let p = &self.partitions[&pid];
        DeliveryRecord {
            seq: 0,
            queue: p.queue.clone(),
            partition: p.name.clone(),
            partition_id: pid,
            group: group.to_string(),
            lease_id: before.lease_id.clone(),
            first: before.first.max(0) as u64,
            last: before.last.max(before.first).max(0) as u64,
            attempt: before.attempt,
            outcome,
            offset: None,
            error: None,
            hold_until_ms: None,
            at_ms,
        }
    }

    /// Stores a record (numbered here), dropping the queue's oldest beyond the bound.
    fn append_delivery(&mut self, mut record: DeliveryRecord) {
        record.seq = self.deliveries.next_seq;
        self.deliveries.next_seq += 1;
        self.changes.put(
            delivery_key(record.seq),
            serde_json::to_vec(&record).unwrap_or_else(|e| panic!("records serialize: {e}")),
        );
        let records = self.deliveries.records_mut(&record.queue);
        records.push(Box::new(record));
        let excess = records.len().saturating_sub(MAX_RECORDS_PER_QUEUE);
        let doomed: Vec<u64> = records.drain(..excess).map(|r| r.seq).collect();
        for seq in doomed {
            self.changes.delete(delivery_key(seq));
        }
    }

    /// Keeps a record read at open.
    pub(super) fn load_delivery(&mut self, record: DeliveryRecord) {
        self.deliveries.next_seq = self.deliveries.next_seq.max(record.seq + 1);
        // Keys are read in ascending order, so each queue's records stay oldest first.
        self.deliveries
            .records_mut(&record.queue)
            .push(Box::new(record));
    }

    /// Deletes every record of `queue`, or those older than `before_ms` when given.
    pub(super) fn forget_deliveries(&mut self, queue: &str, before_ms: Option<i64>) -> u64 {
        let Some(at) = self
            .deliveries
            .by_queue
            .iter()
            .position(|(q, _)| q == queue)
        else {
            return 0;
        };
        let records = &mut self.deliveries.by_queue[at].1;
        let old = records
            .iter()
            .take_while(|r| before_ms.is_none_or(|cut| r.at_ms < cut))
            .count();
        let doomed: Vec<u64> = records.drain(..old).map(|r| r.seq).collect();
        if records.is_empty() {
            self.deliveries.by_queue.remove(at);
        }
        for seq in &doomed {
            self.changes.delete(delivery_key(*seq));
        }
        doomed.len() as u64
    }

    /// A page of the delivery log, newest first.
    pub fn deliveries(&self, query: &DeliveryQuery) -> DeliveryPage {
        // A transaction id names one offset per partition that holds it.
        let at: Option<Vec<(u64, u64)>> = query.transaction_id.as_ref().map(|tx| {
            self.partitions
                .values()
                .filter(|p| query.queue.as_ref().is_none_or(|q| &p.queue == q))
                .filter(|p| query.partition.as_ref().is_none_or(|n| &p.name == n))
                .filter_map(|p| self.find_transaction(p.id, tx).map(|o| (p.id, o)))
                .collect()
        });
        let matches = |r: &DeliveryRecord| {
            query.queue.as_ref().is_none_or(|q| &r.queue == q)
                && query.group.as_ref().is_none_or(|g| &r.group == g)
                && query.partition.as_ref().is_none_or(|n| &r.partition == n)
                && at.as_ref().is_none_or(|at| {
                    at.iter()
                        .any(|(pid, o)| r.partition_id == *pid && (r.first..=r.last).contains(o))
                })
        };
        let queue = query.queue.as_deref();
        // The count in any order, in one pass; the page in order, merged only as far as it reaches.
        let total = (self.deliveries.lists(queue).flatten())
            .filter(|r| matches(r))
            .count();
        let records = (self.deliveries.newest_first(queue))
            .filter(|r| matches(r))
            .skip(query.offset)
            .take(query.limit)
            .cloned()
            .collect();
        DeliveryPage { records, total }
    }
}

/// Reads a stored delivery record (the fields its derived `Serialize` writes).
pub(super) fn read_delivery(f: &mut super::fields::Fields) -> DeliveryRecord {
    let outcome = f.string("outcome");
    DeliveryRecord {
        seq: f.u64("seq"),
        queue: f.string("queue"),
        partition: f.string("partition"),
        partition_id: f.u64("partition_id"),
        group: f.string("group"),
        lease_id: f.opt_string("lease_id"),
        first: f.u64("first"),
        last: f.u64("last"),
        attempt: f.u32("attempt"),
        outcome: Outcome::parse(&outcome).unwrap_or_else(|| {
            f.fail(format!("field `outcome`: unknown outcome \"{outcome}\""));
            Outcome::Completed
        }),
        offset: f.opt_i64("offset").map(|o| o.max(0) as u64),
        error: f.opt_string("error"),
        hold_until_ms: f.opt_i64("hold_until_ms"),
        at_ms: f.i64("at_ms"),
    }
}

//! Each queue's recent history: messages pushed, delivered, acked and failed acks per bucket of
//! [`BUCKET_MS`], and each consumer group's backlog at the end of each bucket, over the last
//! [`KEEP_BUCKETS`] buckets (what the page draws when it opens, docs/decisions.md "Queue history").
//!
//! Measured, with no counting of its own: the broker already keeps the counters (a partition's next
//! offset counts its pushes; each lane stores the messages it delivered and the acks and failed acks
//! it accepted; a group's backlog is the messages after its cursor). At the first command of each
//! bucket, before that command applies, [`Broker::sample_history`] reads every queue's counters. Every
//! command between two samples ran in the bucket of the first (the next bucket's first command takes
//! the next sample), so the difference of two samples is exactly that bucket's traffic, and the second
//! sample is the backlog at that bucket's end (only commands move a backlog). The bucket still filling
//! is the difference between the live counters and the last sample ([`Broker::queue_history`]).
//!
//! Bounded: a queue keeps at most [`KEEP_BUCKETS`] buckets, only those in which something changed,
//! and the backlog of at most [`MAX_GROUPS`] groups (the first it saw). In memory only: a restart starts
//! it again (its first sample after opening is the baseline), because keeping it would cost a stored
//! write per active queue per bucket. A reload after a failed commit keeps it ([`Broker::keep_history`]).
//!
//! Approximations, each towards less: a bucket in which a partition or a group of the queue was deleted
//! loses that lane's counts from the sum and shows no negative traffic; a queue deleted and created
//! again starts a new history.

use super::state::Queue;
use super::Broker;
use std::collections::{BTreeMap, VecDeque};

/// Width of a bucket, in ms.
pub const BUCKET_MS: i64 = 5_000;
/// Buckets a queue keeps (with [`BUCKET_MS`], the last 15 minutes).
pub const KEEP_BUCKETS: usize = 180;
/// Groups whose backlog a queue records (the first it sees).
pub const MAX_GROUPS: usize = 16;

/// Message counts: cumulative in a sample, differences in a bucket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Messages pushed.
    pub pushed: u64,
    /// Messages delivered by pops (every group).
    pub delivered: u64,
    /// Ack items accepted (any status).
    pub acked: u64,
    /// Ack items accepted with status `failed` or `dlq`.
    pub failed: u64,
}

impl Traffic {
    /// `self - before`, field by field, never below zero.
    fn since(&self, before: &Traffic) -> Traffic {
        Traffic {
            pushed: self.pushed.saturating_sub(before.pushed),
            delivered: self.delivered.saturating_sub(before.delivered),
            acked: self.acked.saturating_sub(before.acked),
            failed: self.failed.saturating_sub(before.failed),
        }
    }

    fn is_zero(&self) -> bool {
        *self == Traffic::default()
    }
}

/// One bucket of a queue's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryBucket {
    /// Start of the bucket (Unix ms, a multiple of [`BUCKET_MS`]).
    pub start_ms: i64,
    /// What happened in it.
    pub traffic: Traffic,
    /// Backlog of each recorded group at its end (in the order of [`QueueHistory::groups`]; a shorter
    /// list means the later groups were not recorded yet: no backlog).
    pub backlog: Vec<u64>,
}

/// A queue's history as a read answers it: every bucket from `since` (or the window's start) to now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueHistory {
    /// When the broker started measuring this queue (the baseline sample after it opened, or the
    /// queue's creation); `None`: no command ran since the broker opened, so nothing was measured.
    pub measured_since_ms: Option<i64>,
    /// Groups whose backlog is recorded, in the order of [`HistoryBucket::backlog`].
    pub groups: Vec<String>,
    /// Groups reading the queue whose backlog is not recorded ([`MAX_GROUPS`] reached).
    pub groups_not_recorded: Vec<String>,
    /// Every bucket in the window since `measured_since_ms`, oldest first; the last one holds now.
    pub buckets: Vec<HistoryBucket>,
}

/// One queue's counters at one instant.
struct Sample<'a> {
    created_at_ms: i64,
    traffic: Traffic,
    /// Backlog by group (every group with a lane or a subscription on the queue).
    backlog: Vec<(&'a str, u64)>,
}

/// What a queue keeps between samples.
#[derive(Debug, Default)]
struct Kept {
    created_at_ms: i64,
    since_ms: i64,
    groups: Vec<String>,
    /// Counters at the last sample.
    last: Traffic,
    /// Backlog at the last sample, by recorded group.
    last_backlog: Vec<u64>,
    /// Backlog before the oldest kept bucket (what a bucket before it showed).
    carried: Vec<u64>,
    /// Buckets in which something changed, oldest first.
    buckets: VecDeque<HistoryBucket>,
}

impl Kept {
    /// The backlog of `sample` by recorded group, recording groups not seen before while there is room.
    fn align(&mut self, sample: &Sample<'_>) -> Vec<u64> {
        for (group, _) in &sample.backlog {
            if self.groups.len() < MAX_GROUPS && !self.groups.iter().any(|g| g == group) {
                self.groups.push(group.to_string());
            }
        }
        self.groups
            .iter()
            .map(|g| {
                sample
                    .backlog
                    .iter()
                    .find(|(name, _)| *name == g)
                    .map_or(0, |(_, n)| *n)
            })
            .collect()
    }

    /// Files what happened since the last sample, in bucket `bucket`, and takes `sample` as the last.
    fn advance(&mut self, bucket: i64, sample: &Sample<'_>) {
        let backlog = self.align(sample);
        let traffic = sample.traffic.since(&self.last);
        if !traffic.is_zero() || backlog != self.last_backlog {
            self.buckets.push_back(HistoryBucket {
                start_ms: bucket,
                traffic,
                backlog: backlog.clone(),
            });
        }
        self.last = sample.traffic;
        self.last_backlog = backlog;
    }

    /// Drops buckets that start before `horizon`, carrying the backlog of the last one dropped.
    fn trim(&mut self, horizon: i64) {
        while self.buckets.front().is_some_and(|b| b.start_ms < horizon) {
            if let Some(old) = self.buckets.pop_front() {
                self.carried = old.backlog;
            }
        }
    }
}

/// The broker's per-queue history (see the module documentation).
#[derive(Debug, Default)]
pub struct History {
    /// Start of the bucket of the last sample; `None` before the first.
    last_bucket: Option<i64>,
    queues: BTreeMap<String, Kept>,
}

/// Start of the bucket holding `t`.
pub fn bucket_of(t: i64) -> i64 {
    t.div_euclid(BUCKET_MS) * BUCKET_MS
}

impl Broker {
    /// Takes a sample of every queue's counters when `now` is in a bucket the last sample was not in
    /// (called at the start of every command, before it applies; one comparison otherwise).
    pub(super) fn sample_history(&mut self, now: i64) {
        let bucket = bucket_of(now);
        let previous = self.history.last_bucket;
        if previous.is_some_and(|b| b >= bucket) {
            return;
        }
        // Out of `self` while the samples borrow it.
        let mut history = std::mem::take(&mut self.history);
        let samples = self.queue_samples();
        history.queues.retain(|name, kept| {
            samples
                .get(name.as_str())
                .is_some_and(|s| s.created_at_ms == kept.created_at_ms)
        });
        for (name, sample) in &samples {
            match history.queues.get_mut(*name) {
                Some(kept) => {
                    if let Some(previous) = previous {
                        kept.advance(previous, sample);
                    }
                }
                None => {
                    let mut kept = Kept {
                        created_at_ms: sample.created_at_ms,
                        ..Kept::default()
                    };
                    match previous {
                        // The baseline after opening: what came before is not measured.
                        None => {
                            kept.since_ms = now;
                            kept.last = sample.traffic;
                            kept.last_backlog = kept.align(sample);
                            kept.carried = kept.last_backlog.clone();
                        }
                        // Created after the last sample, so in its bucket: everything it has counted
                        // happened there.
                        Some(previous) => {
                            kept.since_ms = sample.created_at_ms.max(previous);
                            kept.advance(previous, sample);
                        }
                    }
                    history.queues.insert(name.to_string(), kept);
                }
            }
        }
        drop(samples);
        let horizon = bucket - (KEEP_BUCKETS as i64 - 1) * BUCKET_MS;
        for kept in history.queues.values_mut() {
            kept.trim(horizon);
        }
        history.last_bucket = Some(bucket);
        self.history = history;
    }

    /// Every queue's counters now.
    fn queue_samples(&self) -> BTreeMap<&str, Sample<'_>> {
        let mut subscribed: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (queue, group) in self.subscriptions.keys() {
            subscribed
                .entry(queue.as_str())
                .or_default()
                .push(group.as_str());
        }
        self.queues
            .iter()
            .map(|(name, q)| {
                let groups = subscribed.get(name.as_str()).map_or(&[][..], |g| &g[..]);
                (name.as_str(), self.queue_sample(q, groups))
            })
            .collect()
    }

    /// The counters of queue `q` now; `subscribed` names the groups subscribed to it.
    fn queue_sample<'a>(&'a self, q: &'a Queue, subscribed: &[&'a str]) -> Sample<'a> {
        let mut sample = Sample {
            created_at_ms: q.record.created_at_ms,
            traffic: Traffic::default(),
            backlog: Vec::new(),
        };
        for p in q
            .partitions
            .values()
            .filter_map(|pid| self.partitions.get(pid))
        {
            sample.traffic.pushed += p.next_offset;
            let floor = p.first_offset as i64 - 1;
            let after =
                |committed: i64| (p.next_offset as i64 - 1 - committed.max(floor)).max(0) as u64;
            for (group, lane) in &p.lanes {
                sample.traffic.delivered += lane.delivered;
                sample.traffic.acked += lane.acked;
                sample.traffic.failed += lane.failed;
                add_backlog(&mut sample.backlog, group, after(lane.committed()));
            }
            // A subscribed group that has not claimed here yet counts from where it would start.
            for group in subscribed {
                if !p.lanes.contains_key(*group) {
                    add_backlog(
                        &mut sample.backlog,
                        group,
                        after(self.initial_cursor(p.id, group)),
                    );
                }
            }
        }
        sample
    }

    /// The history of `queue` over the last `window_ms` ending at `now` (`None`: no such queue): the
    /// `window_ms / BUCKET_MS` buckets up to the one holding `now`, from the one holding the start of
    /// the measurement when that is later.
    pub fn queue_history(&self, queue: &str, now: i64, window_ms: i64) -> Option<QueueHistory> {
        let q = self.queues.get(queue)?;
        let subscribed: Vec<&str> = self
            .subscriptions
            .keys()
            .filter(|(sq, _)| sq == queue)
            .map(|(_, g)| g.as_str())
            .collect();
        let sample = &self.queue_sample(q, &subscribed);
        let reading: Vec<String> = sample.backlog.iter().map(|(g, _)| g.to_string()).collect();
        let Some(last_bucket) = self.history.last_bucket else {
            return Some(QueueHistory {
                measured_since_ms: None,
                groups: Vec::new(),
                groups_not_recorded: reading,
                buckets: Vec::new(),
            });
        };
        let fresh;
        let kept = match self
            .history
            .queues
            .get(queue)
            .filter(|k| k.created_at_ms == sample.created_at_ms)
        {
            Some(kept) => kept,
            // Created since the last sample (in its bucket): the next sample starts it from zero.
            None => {
                fresh = Kept {
                    created_at_ms: sample.created_at_ms,
                    since_ms: sample.created_at_ms.max(last_bucket),
                    ..Kept::default()
                };
                &fresh
            }
        };
        // The bucket still filling: the live counters against the last sample. Groups first seen since
        // the last sample are recorded here as the next sample would record them.
        let mut live = Kept {
            groups: kept.groups.clone(),
            last: kept.last,
            last_backlog: kept.last_backlog.clone(),
            ..Kept::default()
        };
        live.advance(last_bucket, sample);
        let groups = live.groups;
        let not_recorded = reading
            .into_iter()
            .filter(|g| !groups.contains(g))
            .collect();
        let now_bucket = bucket_of(now).max(last_bucket);
        // The window is its last whole buckets, the one holding now included.
        let first = (now_bucket - (window_ms / BUCKET_MS - 1).max(0) * BUCKET_MS)
            .max(bucket_of(kept.since_ms));
        let mut stored = kept.buckets.iter().chain(live.buckets.iter()).peekable();
        // The backlog as the window opens: that of the last change before it.
        let mut backlog = &kept.carried;
        while let Some(b) = stored.next_if(|b| b.start_ms < first) {
            backlog = &b.backlog;
        }
        let mut buckets = Vec::new();
        let mut start = first;
        while start <= now_bucket {
            let mut traffic = Traffic::default();
            if let Some(b) = stored.next_if(|b| b.start_ms == start) {
                traffic = b.traffic;
                backlog = &b.backlog;
            }
            buckets.push(HistoryBucket {
                start_ms: start,
                traffic,
                backlog: backlog.clone(),
            });
            start += BUCKET_MS;
        }
        Some(QueueHistory {
            measured_since_ms: Some(kept.since_ms),
            groups,
            groups_not_recorded: not_recorded,
            buckets,
        })
    }

    /// Moves the history of `old` (a broker this one replaces after a reload) into this one: the
    /// counters it sampled are still the store's or older, so differences stay exact.
    pub fn keep_history(&mut self, old: &mut Broker) {
        self.history = std::mem::take(&mut old.history);
    }
}

fn add_backlog<'a>(backlog: &mut Vec<(&'a str, u64)>, group: &'a str, n: u64) {
    match backlog.iter_mut().find(|(g, _)| *g == group) {
        Some((_, total)) => *total += n,
        None => backlog.push((group, n)),
    }
}

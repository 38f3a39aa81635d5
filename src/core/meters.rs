//! Measured numbers: totals of pushed, popped, acked and failed messages that survive restarts, the
//! same counts per minute over the last hour, and each consumer group's recent ack rate (what
//! autopilot sizes its batches from, wire-contract §1.3).
//!
//! The totals cost no row of their own: pushed is the sum of the partitions' next offsets (offsets
//! are never reused), and each lane's record carries its delivered, acked and failed counts
//! (`Lane::delivered`, `acked`, `failed`), written in the commit of the pop or ack they count. So the totals are those of the
//! queues and groups that exist: deleting a queue or a group takes its counts with it. The per-minute
//! series and the ack rates are kept in memory only: after a restart they start empty and fill again
//! as traffic comes (they measure the recent past, which a restart interrupts).

use super::Broker;
use litemap::LiteMap;

/// Minutes the per-minute series keeps.
pub const SERIES_MINUTES: usize = 60;
/// Window of the per-group ack rate, in seconds (one bucket a second).
pub const ACK_RATE_WINDOW_S: usize = 10;
/// Autopilot's batch bounds (seed 003: 100 to 1,000).
pub const AUTOPILOT_MIN_BATCH: u32 = 100;
/// See [`AUTOPILOT_MIN_BATCH`].
pub const AUTOPILOT_MAX_BATCH: u32 = 1000;

/// What a count is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meter {
    /// Messages queued by pushes.
    Pushed = 0,
    /// Messages delivered by pops.
    Popped = 1,
    /// Ack items accepted (any status).
    Acked = 2,
    /// Ack items accepted with status `failed` or `dlq`.
    Failed = 3,
}

/// Totals over the queues and groups that exist.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Messages queued by pushes.
    pub pushed: u64,
    /// Messages delivered by pops.
    pub popped: u64,
    /// Ack items accepted.
    pub acked: u64,
    /// Ack items accepted with status `failed` or `dlq`.
    pub failed: u64,
}

impl Totals {
    #[cfg(feature = "views")]
    fn add(&mut self, meter: Meter, n: u64) {
        match meter {
            Meter::Pushed => self.pushed += n,
            Meter::Popped => self.popped += n,
            Meter::Acked => self.acked += n,
            Meter::Failed => self.failed += n,
        }
    }
}

/// Counts of one minute.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MinuteCounts {
    /// Start of the minute (Unix ms, a multiple of 60 000).
    pub minute_ms: i64,
    /// Counts by [`Meter`].
    pub counts: Totals,
}

/// Acks of one group on one queue over the last seconds: one bucket a second, by second modulo the
/// window, each stamped with the second it counts.
#[derive(Debug, Default)]
struct AckWindow([(i64, u64); ACK_RATE_WINDOW_S]);

impl AckWindow {
    fn note(&mut self, now: i64, n: u64) {
        let second = now.div_euclid(1000);
        let slot = &mut self.0[second.rem_euclid(ACK_RATE_WINDOW_S as i64) as usize];
        if slot.0 != second {
            *slot = (second, 0);
        }
        slot.1 += n;
    }

    /// Acks per second over the window ending at `now`.
    fn rate(&self, now: i64) -> f64 {
        let second = now.div_euclid(1000);
        let acks: u64 = self
            .0
            .iter()
            .filter(|(s, _)| *s > second - ACK_RATE_WINDOW_S as i64 && *s <= second)
            .map(|(_, n)| n)
            .sum();
        acks as f64 / ACK_RATE_WINDOW_S as f64
    }
}

/// The broker's meters (see the module documentation).
#[derive(Debug, Default)]
pub struct Meters {
    /// The per-minute series, oldest first (only the views read it).
    #[cfg(feature = "views")]
    minutes: Vec<MinuteCounts>,
    /// Ack windows by (queue, group).
    acks: LiteMap<(String, String), Box<AckWindow>>,
}

impl Meters {
    #[cfg(feature = "views")]
    fn note(&mut self, now: i64, meter: Meter, n: u64) {
        let minute_ms = now.div_euclid(60_000) * 60_000;
        match self.minutes.last_mut() {
            Some(m) if m.minute_ms == minute_ms => m.counts.add(meter, n),
            _ => {
                let mut counts = Totals::default();
                counts.add(meter, n);
                self.minutes.push(MinuteCounts { minute_ms, counts });
            }
        }
        let horizon = minute_ms - (SERIES_MINUTES as i64) * 60_000;
        self.minutes.retain(|m| m.minute_ms > horizon);
    }

    #[cfg(not(feature = "views"))]
    fn note(&mut self, _now: i64, _meter: Meter, _n: u64) {}
}

impl Broker {
    /// Counts `n` messages of `meter` in the per-minute series.
    pub(super) fn count(&mut self, now: i64, meter: Meter, n: u64) {
        if n > 0 {
            self.meters.note(now, meter, n);
        }
    }

    /// Counts `n` acks of `group` on `queue` (`failed` of them failed) for the totals and the ack rate.
    pub(super) fn count_acks(&mut self, now: i64, queue: &str, group: &str, n: u64, failed: u64) {
        self.count(now, Meter::Acked, n);
        self.count(now, Meter::Failed, failed);
        let key = (queue.to_string(), group.to_string());
        if self.meters.acks.get(&key).is_none() {
            self.meters.acks.insert(key.clone(), Box::default());
        }
        if let Some(window) = self.meters.acks.get_mut(&key) {
            window.note(now, n);
        }
    }

    /// Totals over the queues and groups that exist (see the module documentation).
    pub fn meters_totals(&self) -> Totals {
        let mut totals = Totals::default();
        for p in self.partitions.values() {
            totals.pushed += p.next_offset;
            for lane in p.lanes.values() {
                totals.popped += lane.delivered;
                totals.acked += lane.acked;
                totals.failed += lane.failed;
            }
        }
        totals
    }

    /// Counts per minute, oldest first, for the minutes since `from_ms` that had traffic (at most the
    /// last [`SERIES_MINUTES`], and none from before the broker opened).
    #[cfg(feature = "views")]
    pub fn minutes_since(&self, from_ms: i64) -> Vec<MinuteCounts> {
        self.meters
            .minutes
            .iter()
            .filter(|m| m.minute_ms + 60_000 > from_ms)
            .copied()
            .collect()
    }

    /// Acks per second of `group` on `queue` over the last [`ACK_RATE_WINDOW_S`] seconds.
    pub fn ack_rate(&self, queue: &str, group: &str, now: i64) -> f64 {
        self.meters
            .acks
            .get(&(queue.to_string(), group.to_string()))
            .map_or(0.0, |w| w.rate(now))
    }

    /// Autopilot's batch for `group` on `queue`: about one second of the group's recent acks, within
    /// [`AUTOPILOT_MIN_BATCH`]..=[`AUTOPILOT_MAX_BATCH`] (the minimum for a group that has not acked
    /// lately).
    pub fn autopilot_batch(&self, queue: &str, group: &str, now: i64) -> u32 {
        let per_second = self.ack_rate(queue, group, now).ceil() as u32;
        per_second.clamp(AUTOPILOT_MIN_BATCH, AUTOPILOT_MAX_BATCH)
    }
}

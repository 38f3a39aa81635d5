//! `COMMIT_SHARING = "auto"`: whether a `Broker` object's commit leaders gather now, decided by trying
//! both ways and keeping the faster ([`AutoSharing`]).
//!
//! Sharing a commit pays where a commit blocks the object (SQLite's `fsync` on a self-hosted workerd with
//! its state on disk) and costs where a commit is nearly free (state on tmpfs); where a deployment stands
//! is not known in advance (a fast NVMe disk, a network file system, Cloudflare's replicated storage). The
//! object cannot time a commit itself: workerd's `Date.now()` is frozen during a turn, the commit runs
//! after the turn, and the wall time between turns on a shared machine is mostly other work (the
//! measurements in docs/decisions.md, "Sharing commits automatically"). What it can count is its own
//! throughput: requests answered per millisecond. So it measures that with sharing off and on, in short
//! alternating *epochs*, and keeps the faster for a while.
//!
//! Rules (each has a test below):
//! 1. **Epochs.** The object's time is cut into epochs. The first answer starts one; an epoch ends at
//!    the answer that makes it last at least [`EPOCH_MS`] and hold at least [`EPOCH_ANSWERS`] answers
//!    (the one that started it not counted), and that answer starts the next. Its rate is its answers
//!    over its length.
//! 2. **Idle restarts.** An answer more than [`IDLE_MS`] after the one before restarts the current
//!    epoch (what it counted so far is dropped): a gap measures the clients' pauses, not the object.
//! 3. **Probing.** A cycle begins with [`PROBE`]'s epochs, sharing off and on in the order off, on, on,
//!    off, ... (so a load that drifts during the probe weighs on both alike), each epoch's answers and
//!    length added to its setting's tally of its half of the probe (each half is off, on, on, off).
//! 4. **Deciding.** A half of the probe finds sharing faster only if its `on` tally's rate beats its `off`
//!    tally's by more than [`MARGIN_PERCENT`]; otherwise (a tie too) it finds it slower, where a lone
//!    request is answered without a wait.
//! 5. **Both halves must agree.** After the probe, sharing is kept on for the next epochs if both halves
//!    found it faster, and off if both found it slower. A probe whose halves disagree changes nothing:
//!    the decision in force (off before the first) stands. A load that changes once during a probe
//!    (clients turning from pushes to pops, a pause and then another batch size) tilts only the half it
//!    changed in, so it cannot turn the decision by itself.
//! 6. **Keeping longer while probes do not overturn it.** A decision is kept for [`KEEP_EPOCHS`] epochs;
//!    a probe that leaves it standing (it decides the same, or its halves disagree) doubles that, up to
//!    [`MAX_KEEP_EPOCHS`], and one that decides otherwise starts again from [`KEEP_EPOCHS`]. So the
//!    epochs spent probing (half of them in the other setting) shrink while nothing shows the other
//!    setting faster (where both are about as fast, a probe often finds its halves disagreeing), and a
//!    change is followed within a cycle.
//! 7. **Probing again.** After the kept epochs the cycle starts over with fresh tallies, so a change of
//!    load or of batch size is followed.
//! 8. **Before the first decision** the object shares as the probe says (it starts with sharing off).

/// Shortest epoch, in milliseconds of the object's clock.
pub const EPOCH_MS: i64 = 100;
/// Fewest answers an epoch counts.
pub const EPOCH_ANSWERS: u32 = 16;
/// A longer gap between two answers restarts the epoch.
pub const IDLE_MS: i64 = 250;
/// Whether each probing epoch shares commits: off and on alike, in an order that cancels a steady drift.
pub const PROBE: [bool; 8] = [false, true, true, false, false, true, true, false];
/// Epochs that keep a decision before the next probe, at first and after a probe that changed it.
pub const KEEP_EPOCHS: u32 = 32;
/// The most epochs a decision is kept, after probes that agreed with it.
pub const MAX_KEEP_EPOCHS: u32 = 256;
/// How much faster (in percent of the other rate) sharing must be to be kept on.
pub const MARGIN_PERCENT: u64 = 5;

/// Answers and milliseconds counted under one setting during a probe.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Tally {
    answers: u64,
    ms: u64,
}

/// The tallies of one half of the probe, sharing off and on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Half {
    on: Tally,
    off: Tally,
}

impl Half {
    /// Whether this half found sharing faster (rule 4).
    fn finds_sharing_faster(&self) -> bool {
        faster_by_margin(self.on, self.off)
    }
}

/// The policy of one object: feed it every answer's time ([`AutoSharing::answered`]), ask it whether a
/// commit's leader gathers now ([`AutoSharing::shares`]). See the module documentation for its rules.
#[derive(Debug, Clone, Default)]
pub struct AutoSharing {
    /// The epoch's place in the cycle: below `PROBE.len()` probing, then keeping `decided`.
    epoch: u32,
    /// When the current epoch started (`None` until the first answer).
    started_at: Option<i64>,
    /// Answers counted in the current epoch.
    answers: u32,
    /// The last answer's time.
    last_answer: i64,
    /// The tallies of the probe's two halves.
    halves: [Half; 2],
    /// The decision in force after the probe.
    decided: bool,
    /// Epochs the current decision is kept (0 before the first decision).
    keep: u32,
}

impl AutoSharing {
    /// Whether a commit's leader gathers now.
    pub fn shares(&self) -> bool {
        PROBE
            .get(self.epoch as usize)
            .copied()
            .unwrap_or(self.decided)
    }

    /// A request was answered at `now_ms` (the object's clock).
    pub fn answered(&mut self, now_ms: i64) {
        let idle = now_ms - self.last_answer > IDLE_MS;
        self.last_answer = now_ms;
        let started_at = match self.started_at {
            Some(at) if !idle => at,
            _ => {
                self.started_at = Some(now_ms);
                self.answers = 0;
                return;
            }
        };
        self.answers += 1;
        let length = now_ms - started_at;
        if length >= EPOCH_MS && self.answers >= EPOCH_ANSWERS {
            self.end_epoch(length);
            self.started_at = Some(now_ms);
            self.answers = 0;
        }
    }

    /// Counts an epoch of `length` ms that ended now, and moves to the next.
    fn end_epoch(&mut self, length: i64) {
        let epoch = self.epoch as usize;
        if epoch < PROBE.len() {
            let half = &mut self.halves[epoch * 2 / PROBE.len()];
            let tally = if PROBE[epoch] {
                &mut half.on
            } else {
                &mut half.off
            };
            tally.answers += u64::from(self.answers);
            tally.ms += length as u64;
        }
        self.epoch += 1;
        if self.epoch as usize == PROBE.len() {
            self.decide();
        } else if self.epoch as usize == PROBE.len() + self.keep as usize {
            self.epoch = 0;
        }
    }

    /// Ends a probe: decides by its halves (rules 5 and 6) and clears its tallies.
    fn decide(&mut self) {
        let [first, second] = std::mem::take(&mut self.halves);
        let found = first.finds_sharing_faster();
        let overturned = found == second.finds_sharing_faster() && found != self.decided;
        self.keep = if overturned || self.keep == 0 {
            KEEP_EPOCHS
        } else {
            (self.keep * 2).min(MAX_KEEP_EPOCHS)
        };
        if overturned {
            self.decided = found;
        }
    }
}

/// True when `a`'s rate is more than [`MARGIN_PERCENT`] above `b`'s.
fn faster_by_margin(a: Tally, b: Tally) -> bool {
    // a.answers / a.ms > b.answers / b.ms * (100 + margin) / 100, without division.
    u128::from(a.answers) * u128::from(b.ms) * 100
        > u128::from(b.answers) * u128::from(a.ms) * u128::from(100 + MARGIN_PERCENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers at `interval_ms(shares)` until `until_ms`, from `*now` on; returns the settings seen at
    /// each answer.
    fn run(
        policy: &mut AutoSharing,
        now: &mut i64,
        until_ms: i64,
        interval_ms: impl Fn(bool) -> i64,
    ) -> Vec<bool> {
        let mut seen = Vec::new();
        while *now < until_ms {
            seen.push(policy.shares());
            policy.answered(*now);
            *now += interval_ms(policy.shares());
        }
        seen
    }

    /// Drives whole epochs of answers every `interval_ms(shares)` ms; returns each epoch's setting.
    fn epochs(
        policy: &mut AutoSharing,
        now: &mut i64,
        count: usize,
        interval_ms: impl Fn(bool) -> i64,
    ) -> Vec<bool> {
        load_epochs(policy, now, count, |_, shares| interval_ms(shares))
    }

    /// As [`epochs`], the interval also depending on the epoch's index in this call: a load that changes.
    fn load_epochs(
        policy: &mut AutoSharing,
        now: &mut i64,
        count: usize,
        interval_ms: impl Fn(usize, bool) -> i64,
    ) -> Vec<bool> {
        let mut settings = Vec::new();
        while settings.len() < count {
            let index = settings.len();
            let epoch = policy.epoch;
            settings.push(policy.shares());
            while policy.epoch == epoch {
                policy.answered(*now);
                *now += interval_ms(index, policy.shares());
            }
        }
        settings
    }

    /// One answer every `on_ms` with sharing on, every `off_ms` with it off.
    fn rates(on_ms: i64, off_ms: i64) -> impl Fn(bool) -> i64 {
        move |shares| if shares { on_ms } else { off_ms }
    }

    #[test]
    fn rule_1_an_epoch_ends_after_its_least_length_and_its_least_answers() {
        // Answers every 1 ms: the length decides.
        let mut p = AutoSharing::default();
        for t in 0..=EPOCH_MS - 1 {
            p.answered(t);
        }
        assert_eq!(
            p.epoch,
            0,
            "{} answers in {} ms: not yet",
            EPOCH_MS - 1,
            EPOCH_MS - 1
        );
        p.answered(EPOCH_MS);
        assert_eq!(p.epoch, 1);
        // Answers every 10 ms: the count decides.
        let mut p = AutoSharing::default();
        let mut t = 0;
        p.answered(t);
        for _ in 0..EPOCH_ANSWERS - 1 {
            t += 10;
            p.answered(t);
        }
        assert!(t >= EPOCH_MS);
        assert_eq!(p.epoch, 0, "{} answers: not yet", EPOCH_ANSWERS - 1);
        p.answered(t + 10);
        assert_eq!(p.epoch, 1);
    }

    #[test]
    fn rule_2_a_gap_longer_than_idle_restarts_the_epoch_without_its_answers() {
        let mut p = AutoSharing::default();
        // A slow start, then a pause, then a fast stretch: only the fast stretch is counted.
        for t in (0..50).step_by(10) {
            p.answered(t);
        }
        let resume = 40 + IDLE_MS + 1;
        let mut t = resume;
        while p.epoch == 0 {
            p.answered(t);
            t += 1;
        }
        assert_eq!(
            p.halves[0].off,
            Tally {
                answers: EPOCH_MS as u64,
                ms: EPOCH_MS as u64
            }
        );
        // A gap of exactly IDLE_MS does not restart it.
        let mut p = AutoSharing::default();
        p.answered(0);
        p.answered(IDLE_MS);
        assert_eq!((p.started_at, p.answers), (Some(0), 1));
    }

    #[test]
    fn rule_3_the_probe_alternates_off_and_on_and_tallies_each_half() {
        let mut p = AutoSharing::default();
        let mut now = 0;
        let seen = epochs(&mut p, &mut now, PROBE.len() - 1, rates(2, 5));
        assert_eq!(seen, PROBE[..PROBE.len() - 1]);
        // An epoch off holds 20 answers in 100 ms (one in 5 ms), one on 50 (one in 2 ms). The first half
        // has two of each; the second (its last epoch, off, running) two on and one off.
        let tally = |epochs: u64, answers: u64| Tally {
            answers: epochs * answers,
            ms: epochs * EPOCH_MS as u64,
        };
        assert_eq!(
            p.halves,
            [
                Half {
                    on: tally(2, 50),
                    off: tally(2, 20)
                },
                Half {
                    on: tally(2, 50),
                    off: tally(1, 20)
                }
            ]
        );
    }

    #[test]
    fn rule_4_a_half_finds_sharing_faster_only_by_the_margin() {
        for (on_ms, off_ms, kept) in [
            (2, 5, true),    // sharing answers faster: on
            (5, 2, false),   // sharing answers slower: off
            (10, 10, false), // a tie: off
        ] {
            let mut p = AutoSharing::default();
            let mut now = 0;
            epochs(&mut p, &mut now, PROBE.len(), rates(on_ms, off_ms));
            let kept_epochs = epochs(&mut p, &mut now, KEEP_EPOCHS as usize, rates(on_ms, off_ms));
            assert!(
                kept_epochs.iter().all(|&s| s == kept),
                "on {on_ms} ms, off {off_ms} ms"
            );
        }
        // Within the margin: 100 answers in 1000 ms against 100 in 1040 ms is 4 % faster, not enough.
        let on = Tally {
            answers: 100,
            ms: 1000,
        };
        let half = |off_ms| Half {
            on,
            off: Tally {
                answers: 100,
                ms: off_ms,
            },
        };
        assert!(!half(1040).finds_sharing_faster());
        assert!(half(1060).finds_sharing_faster());
    }

    #[test]
    fn rule_5_a_probe_whose_halves_disagree_leaves_the_decision_in_force_standing() {
        // One answer in 2 ms whatever the setting, but in 1 ms once the load has changed: after the
        // probe's first epoch (its first half sees sharing faster, its second a tie), or after its fifth
        // (the first half a tie, the second sharing faster).
        let stepped_after = |step: usize| move |epoch: usize, _| if epoch < step { 2 } else { 1 };
        for step in [1, 5] {
            // A new object: off, as before the probe.
            let mut p = AutoSharing::default();
            let mut now = 0;
            load_epochs(&mut p, &mut now, PROBE.len(), stepped_after(step));
            assert!(!p.shares(), "a step after epoch {step} turned sharing on");
            assert_eq!(p.keep, KEEP_EPOCHS);
            // An object that shares: it stays on (kept twice as long, rule 6).
            let mut p = AutoSharing::default();
            epochs(&mut p, &mut now, PROBE.len(), rates(2, 5));
            let keep = p.keep;
            epochs(&mut p, &mut now, keep as usize, rates(2, 5));
            load_epochs(&mut p, &mut now, PROBE.len(), |epoch, shares| {
                // Sharing twice as fast, but the load slows tenfold after the step.
                let interval = if shares { 2 } else { 4 };
                if epoch < step {
                    interval
                } else {
                    interval * 10
                }
            });
            assert!(p.shares(), "a step after epoch {step} turned sharing off");
            assert_eq!(p.keep, 2 * keep);
        }
    }

    #[test]
    fn rule_6_a_decision_is_kept_twice_as_long_after_each_probe_that_leaves_it_and_reset_by_one_that_overturns_it(
    ) {
        let mut p = AutoSharing::default();
        let mut now = 0;
        let mut kept = Vec::new();
        // Sharing faster for four cycles, then slower.
        for (cycle, on_ms) in [2, 2, 2, 2, 5].into_iter().enumerate() {
            let off_ms = 7 - on_ms;
            epochs(&mut p, &mut now, PROBE.len(), rates(on_ms, off_ms));
            kept.push((p.shares(), p.keep));
            let keep = p.keep as usize;
            let during = epochs(&mut p, &mut now, keep, rates(on_ms, off_ms));
            assert!(during.iter().all(|&s| s == (on_ms == 2)), "cycle {cycle}");
            assert_eq!(
                p.epoch, 0,
                "cycle {cycle}: the probe starts after {keep} kept epochs"
            );
        }
        let k = KEEP_EPOCHS;
        assert_eq!(
            kept,
            [
                (true, k),
                (true, 2 * k),
                (true, 4 * k),
                (true, (8 * k).min(MAX_KEEP_EPOCHS)),
                (false, k)
            ]
        );
    }

    #[test]
    fn rule_7_after_the_kept_epochs_the_probe_starts_over_with_fresh_tallies() {
        let mut p = AutoSharing::default();
        let mut now = 0;
        // Sharing faster in the first cycle, slower in the second.
        epochs(
            &mut p,
            &mut now,
            PROBE.len() + KEEP_EPOCHS as usize,
            rates(2, 5),
        );
        assert_eq!((p.epoch, p.halves), (0, Default::default()));
        let probe = epochs(&mut p, &mut now, PROBE.len(), rates(5, 2));
        assert_eq!(probe, PROBE);
        assert!(!p.shares(), "the second probe found sharing slower");
    }

    #[test]
    fn rule_8_a_new_object_starts_probing_with_sharing_off() {
        let mut p = AutoSharing::default();
        assert!(!p.shares());
        let mut now = 0;
        let seen = run(&mut p, &mut now, EPOCH_MS, |_| 1);
        assert!(seen.iter().all(|&s| !s));
        run(&mut p, &mut now, EPOCH_MS + 2, |_| 1);
        assert!(p.shares(), "the probe's second epoch shares");
    }
}

//! The lane: one consumer group's position in one partition.
//!
//! A lane holds the committed cursor `C` (-1 = nothing committed; offsets are 0-based), the lease
//! (`L` id and `X` expiry), the batch end `E` (the leased span is `(C, E]`), the retry budget used `R`,
//! the redelivery counter `A`, the claim start `S`, the retry hold `H`, the expiry streak `K` (lease
//! expiries in a row of claims starting at `S`) and the quarantined head `Q` (-1 = none).
//!
//! Every field is private: the named transitions below are the only writers, so a rule cannot be bypassed
//! by a caller that sets a field. The core reads the fields through getters.
//!
//! States (derived, never stored): **Free** (no live lease, no hold), **Leased** (`L` set and `X > now`,
//! or `L` set and pinned `P`: a prepared cross-shard transaction acks on it, module `prepared`),
//! **Held** (no live lease, `H > now`). An expired lease is Free: there is no sweeper. A lane is
//! **Quarantined** while `Q = C+1`: its claims deliver the head alone (`reclaimLimit`).
//!
//! Transition table (docs/protocol.md §4.3 for rows claim to 9; `p` = highest completed offset below the
//! lowest signal `s`, `N` = retryLimit, `D` = retryDelay or the backoff of `retryBackoff`, `M` =
//! reclaimLimit; each row has a unit test named after it at the end of this file):
//!
//! | row | event | from | C | lease | R | A | H | K, Q | effect |
//! |---|---|---|---|---|---|---|---|---|---|
//! | `claim` | pop | Free | - | L, X=now+lease, E=last read | - | +1 if start==S else 0; S=C+1 | 0 | K+1 if the last lease expired at start==S else 0 | deliver C+1..E |
//! | `claim_auto_ack` | pop autoAck | Free | E | none | 0 | 0 | 0 | 0, - | deliver, commit |
//! | 1 `commit_prefix` | acks, no signal, C<E | Leased | max(C,p) | kept | - | - | - | - | |
//! | 2 `complete` | acks, no signal, C reaches E | Leased | E | released | 0 | 0 | - | - | next batch |
//! | 3 `release_retry` | `retry` at s | Leased | max(C,p) | released | - | - | - | - | s..E now |
//! | 4 `release_failed` | `failed` at s, R<N | Leased | max(C,p) | released | R+1 | - | now+D | - | s..E after D |
//! | 5 `dead_letter` | `failed` at s, R>=N, DLQ on | Leased | head | released | 0 | 0 | 0 | - | head filed |
//! | 6 `drop_exhausted` | `failed` at s, R>=N, DLQ off | Leased | head | released | 0 | 0 | 0 | - | head dropped |
//! | 7 `dead_letter` | `dlq` at s | Leased | head | released | 0 | 0 | 0 | - | head filed |
//! | 8 `expire` | lease passes X | Leased | - | dead | - | +1 at next claim | - | K+1 at next claim | C+1.. again |
//! | 9 `seek` | seek | any | target | released | 0 | 0 | 0 | 0, none | from target |
//! | `extend` | lease extend | Leased | - | X=max(X, now+s) | - | - | - | - | |
//! | `raise_floor` | retention trims below f | any | max(C,f-1) | released if E<=f-1, not P | 0 if E<=f-1, not P | 0 if E<=f-1, not P | 0 if E<=f-1, not P | K=0 if E<=f-1, not P | a removed span's lease, budget and hold end |
//! | `skip_to` | conflation pop | Free | max(C,newest-1) | - | - | - | - | - | older never delivered |
//! | `resubscribe` | subscription moved, never claimed | Free | cursor | - | - | - | - | - | |
//! | `quarantine` | pop, K reached M | Free | - | as `claim`, E=C+1 | - | as `claim` | - | K=0, Q=C+1 | head alone |
//! | `dead_letter_expired` | pop, Q=C+1 and K reached M | Free | head | released | 0 | 0 | 0 | 0, none | head filed (or dropped, DLQ off) |
//! | `pin` | a prepared transaction acks on the lane | Leased | - | P set: live whatever X says | - | - | - | - | |
//! | `unpin` | that transaction commits or aborts | any | - | P cleared: X rules again | - | - | - | - | |
//!
//! `head` is the first offset after the committed prefix (`max(C,p)+1`), which is `s` whenever the
//! consumer acked everything below `s`. A transition that moves `C` to or past `Q` ends the quarantine.

use super::fields::Fields;
use super::json_text::JsonText;
use serde::Serialize;

/// A lane's stored state (record `l/<pid>/<group>`, module `records`). The derived `Serialize` defines
/// the record's text; [`Lane::record`] writes the same bytes without serde (a pop and an ack save a
/// lane each), which the test `the_record_is_what_serde_writes` checks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Lane {
    /// `C`: last committed offset, -1 when nothing is committed.
    #[serde(rename = "c")]
    committed: i64,
    /// `L`: the lease id of the current (or last, expired) claim.
    #[serde(rename = "l", skip_serializing_if = "Option::is_none")]
    lease_id: Option<String>,
    /// `X`: lease expiry, Unix ms.
    #[serde(rename = "x")]
    lease_expires_ms: i64,
    /// `E`: inclusive end of the current (or last) claim; -1 before any claim.
    #[serde(rename = "e")]
    batch_end: i64,
    /// `R`: retry budget used.
    #[serde(rename = "r")]
    retry_count: u32,
    /// `A`: redelivery counter.
    #[serde(rename = "a")]
    attempt_count: u32,
    /// `S`: C+1 at the last claim, -1 before any claim.
    #[serde(rename = "s")]
    claim_start: i64,
    /// `H`: not claimable before this instant (0 = no hold).
    #[serde(rename = "h")]
    hold_until_ms: i64,
    /// `K`: lease expiries in a row of claims starting at `S` (written only when not 0).
    #[serde(rename = "k", skip_serializing_if = "is_zero")]
    expiry_streak: u32,
    /// `Q`: the quarantined head, -1 = none (written only when set).
    #[serde(rename = "q", skip_serializing_if = "is_none_offset")]
    quarantined: i64,
    /// Messages delivered, acks and failed acks on this lane (module `meters`; not a lane rule: stored
    /// in the lane's record so the counts commit with the pops and acks they count). Absent while 0.
    #[serde(rename = "nd", skip_serializing_if = "is_zero_count")]
    pub delivered: u64,
    /// See [`Lane::delivered`].
    #[serde(rename = "na", skip_serializing_if = "is_zero_count")]
    pub acked: u64,
    /// See [`Lane::delivered`].
    #[serde(rename = "nf", skip_serializing_if = "is_zero_count")]
    pub failed: u64,
    /// `P`: the lease is pinned by a prepared transaction (module `prepared`): it stays live past `X`
    /// until the transaction commits or aborts. Written only when set.
    #[serde(rename = "pn", skip_serializing_if = "is_false")]
    pinned: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_zero_count(n: &u64) -> bool {
    *n == 0
}

fn is_none_offset(n: &i64) -> bool {
    *n < 0
}

/// What a claim of a lane must do under `reclaimLimit` ([`Lane::reclaim_verdict`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reclaim {
    /// Claim the span as usual.
    Whole,
    /// Claim the head alone (`quarantine`).
    HeadAlone,
    /// File (or drop) the head, then claim what follows (`dead_letter_expired`).
    FileHead,
}

impl Lane {
    /// A lane positioned after `committed`, with nothing leased.
    pub fn at(committed: i64) -> Self {
        Lane {
            committed,
            lease_id: None,
            lease_expires_ms: 0,
            batch_end: -1,
            retry_count: 0,
            attempt_count: 0,
            claim_start: -1,
            hold_until_ms: 0,
            expiry_streak: 0,
            quarantined: -1,
            delivered: 0,
            acked: 0,
            failed: 0,
            pinned: false,
        }
    }

    /// The stored record: byte for byte what the derived `Serialize` writes through `serde_json`, in
    /// its field order, the optional fields left out under the same conditions.
    pub(super) fn record(&self) -> Vec<u8> {
        let mut t = JsonText::with_capacity(128);
        t.raw("{\"c\":").int(self.committed);
        if let Some(lease_id) = &self.lease_id {
            t.raw(",\"l\":").str(lease_id);
        }
        t.raw(",\"x\":")
            .int(self.lease_expires_ms)
            .raw(",\"e\":")
            .int(self.batch_end)
            .raw(",\"r\":")
            .uint(self.retry_count.into())
            .raw(",\"a\":")
            .uint(self.attempt_count.into())
            .raw(",\"s\":")
            .int(self.claim_start)
            .raw(",\"h\":")
            .int(self.hold_until_ms);
        if !is_zero(&self.expiry_streak) {
            t.raw(",\"k\":").uint(self.expiry_streak.into());
        }
        if !is_none_offset(&self.quarantined) {
            t.raw(",\"q\":").int(self.quarantined);
        }
        for (key, count) in [
            (",\"nd\":", self.delivered),
            (",\"na\":", self.acked),
            (",\"nf\":", self.failed),
        ] {
            if !is_zero_count(&count) {
                t.raw(key).uint(count);
            }
        }
        if !is_false(&self.pinned) {
            t.raw(",\"pn\":true");
        }
        t.raw("}");
        t.into_bytes()
    }

    /// Reads a stored lane record, field for field what the derived `Serialize` writes; fields older
    /// builds did not write take the values [`Lane::at`] gives them.
    pub(super) fn read(f: &mut Fields) -> Lane {
        Lane {
            committed: f.i64("c"),
            lease_id: f.opt_string("l"),
            lease_expires_ms: f.i64_or("x", 0),
            batch_end: f.i64_or("e", -1),
            retry_count: f.u32_or("r", 0),
            attempt_count: f.u32_or("a", 0),
            claim_start: f.i64_or("s", -1),
            hold_until_ms: f.i64_or("h", 0),
            expiry_streak: f.u32_or("k", 0),
            quarantined: f.i64_or("q", -1).max(-1),
            // Counts (module `meters`): read as i64, the reader the other fields use.
            delivered: f.i64_or("nd", 0) as u64,
            acked: f.i64_or("na", 0) as u64,
            failed: f.i64_or("nf", 0) as u64,
            pinned: f.bool_or("pn", false),
        }
    }

    /// `C`.
    pub fn committed(&self) -> i64 {
        self.committed
    }

    /// `L`, live or not (see [`Self::live_lease`]).
    pub fn lease_id(&self) -> Option<&str> {
        self.lease_id.as_deref()
    }

    /// `X`.
    pub fn lease_expires_ms(&self) -> i64 {
        self.lease_expires_ms
    }

    /// `E`.
    pub fn batch_end(&self) -> i64 {
        self.batch_end
    }

    /// `R`.
    pub fn retry_count(&self) -> u32 {
        self.retry_count
    }

    /// `A`.
    pub fn attempt_count(&self) -> u32 {
        self.attempt_count
    }

    /// `S`.
    pub fn claim_start(&self) -> i64 {
        self.claim_start
    }

    /// `H`.
    pub fn hold_until_ms(&self) -> i64 {
        self.hold_until_ms
    }

    /// `K`.
    pub fn expiry_streak(&self) -> u32 {
        self.expiry_streak
    }

    /// `Q`, when a head is quarantined.
    pub fn quarantined_head(&self) -> Option<u64> {
        (self.quarantined >= 0).then_some(self.quarantined as u64)
    }

    /// True when the lane holds a lease that has not expired (or is pinned, which does not expire).
    pub fn is_leased(&self, now: i64) -> bool {
        self.lease_id.is_some() && (self.pinned || self.lease_expires_ms > now)
    }

    /// True when the lane's last lease ran out without being released (row 8, `expire`).
    pub fn lease_expired(&self, now: i64) -> bool {
        self.lease_id.is_some() && !self.pinned && self.lease_expires_ms <= now
    }

    /// `P`: the lease is pinned by a prepared transaction.
    pub fn is_pinned(&self) -> bool {
        self.pinned && self.lease_id.is_some()
    }

    /// `pin`: the live lease stays live past `X` until [`Self::unpin`]. Only a leased lane is pinned
    /// (the caller checks).
    pub fn pin(&mut self) {
        self.pinned = true;
    }

    /// `unpin`: `X` rules the lease again (an `X` already past means it expired).
    pub fn unpin(&mut self) {
        self.pinned = false;
    }

    /// True when a retry hold is still running.
    pub fn is_held(&self, now: i64) -> bool {
        self.hold_until_ms > now
    }

    /// True when the lane may be claimed now (given it has messages after the cursor).
    pub fn is_free(&self, now: i64) -> bool {
        !self.is_leased(now) && !self.is_held(now)
    }

    /// The live lease id, if any.
    pub fn live_lease(&self, now: i64) -> Option<&str> {
        if self.is_leased(now) {
            self.lease_id.as_deref()
        } else {
            None
        }
    }

    /// `K` as a claim now would set it: one more when the last lease expired on a claim starting where
    /// this one starts, else 0 (an ack, a release or a new start breaks the streak).
    fn streak_at_claim(&self) -> u32 {
        let start = self.committed + 1;
        if self.lease_id.is_some() && start == self.claim_start {
            self.expiry_streak.saturating_add(1)
        } else {
            0
        }
    }

    /// What a claim now must do under `reclaimLimit` = `limit` (0 = off: always [`Reclaim::Whole`]).
    pub fn reclaim_verdict(&self, limit: u32) -> Reclaim {
        if limit == 0 {
            return Reclaim::Whole;
        }
        let reached = self.streak_at_claim() >= limit;
        match (self.quarantined == self.committed + 1, reached) {
            (true, true) => Reclaim::FileHead,
            (true, false) | (false, true) => Reclaim::HeadAlone,
            (false, false) => Reclaim::Whole,
        }
    }

    /// `claim`: leases `(C, last]` under `lease_id` until `expires_ms`. Returns `deliveryAttempt`.
    pub fn claim(&mut self, last: u64, lease_id: &str, expires_ms: i64) -> u32 {
        self.expiry_streak = self.streak_at_claim();
        self.bump_attempt();
        self.lease_id = Some(lease_id.to_string());
        self.lease_expires_ms = expires_ms;
        self.batch_end = last as i64;
        self.hold_until_ms = 0;
        self.attempt_count + 1
    }

    /// `quarantine`: leases the head `C+1` alone; entering the quarantine restarts the streak, so the
    /// head alone gets `reclaimLimit` more expiries. Returns `deliveryAttempt`.
    pub fn quarantine(&mut self, lease_id: &str, expires_ms: i64) -> u32 {
        let head = self.committed + 1;
        let attempt = self.claim(head as u64, lease_id, expires_ms);
        if self.quarantined != head {
            self.quarantined = head;
            self.expiry_streak = 0;
        }
        attempt
    }

    /// `dead_letter_expired`: the quarantined head outlived its lease `reclaimLimit` more times; the
    /// cursor passes it (the caller files or drops it) and the lane leaves the quarantine. Returns the
    /// head's offset.
    pub fn dead_letter_expired(&mut self) -> u64 {
        let head = self.committed + 1;
        self.pass_poison(head);
        head as u64
    }

    /// `claim_auto_ack`: delivers `(C, last]` and commits it at once, with no lease.
    /// Returns `deliveryAttempt`.
    pub fn claim_auto_ack(&mut self, last: u64) -> u32 {
        self.bump_attempt();
        let attempt = self.attempt_count + 1;
        self.committed = last as i64;
        self.batch_end = last as i64;
        self.lease_id = None;
        self.lease_expires_ms = 0;
        self.retry_count = 0;
        self.attempt_count = 0;
        self.hold_until_ms = 0;
        self.expiry_streak = 0;
        self.settle_quarantine();
        attempt
    }

    fn bump_attempt(&mut self) {
        let start = self.committed + 1;
        if start == self.claim_start {
            self.attempt_count = self.attempt_count.saturating_add(1);
        } else {
            self.attempt_count = 0;
        }
        self.claim_start = start;
    }

    /// Rows 1 and 2 (`commit_prefix`, `complete`): commits up to `p`. Returns true when the batch is
    /// complete (C reached E) and the lease was released.
    pub fn commit_prefix(&mut self, p: i64) -> bool {
        self.committed = self.committed.max(p);
        self.settle_quarantine();
        if self.committed >= self.batch_end {
            self.release();
            self.retry_count = 0;
            self.attempt_count = 0;
            true
        } else {
            false
        }
    }

    /// Row 3 (`release_retry`): commits the prefix and releases the lease; no budget is charged.
    pub fn release_retry(&mut self, p: i64) {
        self.committed = self.committed.max(p);
        self.settle_quarantine();
        self.release();
    }

    /// Row 4 (`release_failed`): commits the prefix, charges one retry, releases and holds until
    /// `hold_until_ms`.
    pub fn release_failed(&mut self, p: i64, hold_until_ms: i64) {
        self.committed = self.committed.max(p);
        self.settle_quarantine();
        self.retry_count = self.retry_count.saturating_add(1);
        self.hold_until_ms = hold_until_ms;
        self.release();
    }

    /// Rows 5 to 7 (`dead_letter`, `drop_exhausted`): moves the cursor past `head` and resets the
    /// budget and the redelivery counter.
    pub fn pass_poison(&mut self, head: i64) {
        self.committed = self.committed.max(head);
        self.settle_quarantine();
        self.retry_count = 0;
        self.attempt_count = 0;
        self.hold_until_ms = 0;
        self.expiry_streak = 0;
        self.release();
    }

    /// Row 9 (`seek`): moves the cursor to `target` (either direction), releases any lease and resets
    /// the counters, the hold and the quarantine.
    pub fn seek(&mut self, target: i64) {
        self.committed = target;
        self.release();
        self.retry_count = 0;
        self.attempt_count = 0;
        self.claim_start = -1;
        self.hold_until_ms = 0;
        self.batch_end = target;
        self.expiry_streak = 0;
        self.quarantined = -1;
    }

    /// `extend`: the live lease runs until at least `target_ms`. Returns the new expiry.
    pub fn extend(&mut self, target_ms: i64) -> i64 {
        self.lease_expires_ms = self.lease_expires_ms.max(target_ms);
        self.lease_expires_ms
    }

    /// `raise_floor`: retention (or eviction) removed every offset up to `floor`; the cursor is at least
    /// there. Once the whole last span `(C, E]` is removed, what belonged to it goes with it, as after a
    /// completed span: its lease ends (nothing of it is left to ack, and the lane delivers what follows
    /// without waiting for its expiry), and the retry budget it used, its redelivery count, its retry
    /// hold and its expiry streak are reset (a message after it starts with a whole budget and no
    /// wait). A pinned lease (a prepared transaction acks on it) is left to that transaction. Returns the
    /// id of a lease it ended.
    pub fn raise_floor(&mut self, floor: i64) -> Option<String> {
        self.committed = self.committed.max(floor);
        self.settle_quarantine();
        if self.pinned || self.batch_end > floor {
            return None;
        }
        let ended = self.lease_id.take();
        self.release();
        self.retry_count = 0;
        self.attempt_count = 0;
        self.hold_until_ms = 0;
        self.expiry_streak = 0;
        ended
    }

    /// `skip_to`: a conflation claim moves the cursor to `offset` (the older messages are never
    /// delivered to this group).
    pub fn skip_to(&mut self, offset: i64) {
        self.committed = self.committed.max(offset);
        self.settle_quarantine();
    }

    /// `resubscribe`: a lane that never claimed takes the cursor its moved subscription gives it.
    pub fn resubscribe(&mut self, cursor: i64) {
        self.committed = cursor;
    }

    /// True when the lane never claimed and holds no lease (what `resubscribe` may move).
    pub fn never_claimed(&self) -> bool {
        self.claim_start < 0 && self.lease_id.is_none()
    }

    /// Ends the quarantine once the cursor reached or passed the quarantined head.
    fn settle_quarantine(&mut self) {
        if self.quarantined >= 0 && self.committed >= self.quarantined {
            self.quarantined = -1;
        }
    }

    /// Ends the lease (the id is kept out of the stored row so later fenced acks are refused).
    fn release(&mut self) {
        self.lease_id = None;
        self.lease_expires_ms = 0;
        self.pinned = false;
    }
}

#[cfg(test)]
mod tests {
    //! One test per row of the transition table, named after it: the row's columns, checked on the
    //! lane alone.
    use super::*;

    /// (C, L, E, R, A, H, K, Q) in one tuple, for compact comparisons.
    type Columns = (i64, Option<String>, i64, u32, u32, i64, u32, i64);

    fn cols(l: &Lane) -> Columns {
        (
            l.committed,
            l.lease_id.clone(),
            l.batch_end,
            l.retry_count,
            l.attempt_count,
            l.hold_until_ms,
            l.expiry_streak,
            l.quarantined,
        )
    }

    /// A lane that committed `c` and then claimed `(c, last]` under lease `L` until 100.
    fn leased(c: i64, last: u64) -> Lane {
        let mut lane = Lane::at(c);
        lane.claim(last, "L", 100);
        lane
    }

    fn l(id: &str) -> Option<String> {
        Some(id.to_string())
    }

    #[test]
    fn claim() {
        let mut lane = Lane::at(-1);
        assert_eq!(lane.claim(4, "L1", 100), 1);
        assert_eq!(cols(&lane), (-1, l("L1"), 4, 0, 0, 0, 0, -1));
        assert!(lane.is_leased(99) && !lane.is_leased(100));
        // The lease expired; the same start again: A+1 and K+1.
        assert_eq!(lane.claim(4, "L2", 200), 2);
        assert_eq!((lane.attempt_count, lane.expiry_streak), (1, 1));
        // Released by a retry at the same start: A+1, but the expiry streak is broken.
        lane.release_retry(-1);
        assert_eq!(lane.claim(4, "L3", 300), 3);
        assert_eq!(lane.expiry_streak, 0);
        // A new start resets both counters.
        lane.release_retry(1);
        assert_eq!(lane.claim(4, "L4", 400), 1);
        assert_eq!((lane.claim_start, lane.expiry_streak), (2, 0));
    }

    #[test]
    fn claim_auto_ack() {
        let mut lane = Lane::at(-1);
        lane.release_failed(-1, 50);
        assert_eq!(lane.claim_auto_ack(3), 1);
        assert_eq!(cols(&lane), (3, None, 3, 0, 0, 0, 0, -1));
    }

    #[test]
    fn commit_prefix() {
        let mut lane = leased(-1, 4);
        assert!(!lane.commit_prefix(2));
        assert_eq!(cols(&lane), (2, l("L"), 4, 0, 0, 0, 0, -1));
        assert!(!lane.commit_prefix(1), "the cursor never moves back");
        assert_eq!(lane.committed, 2);
    }

    #[test]
    fn complete() {
        let mut lane = leased(-1, 4);
        lane.release_failed(-1, 50);
        lane.claim(4, "L2", 200);
        assert_eq!(lane.retry_count, 1);
        assert!(lane.commit_prefix(4));
        assert_eq!(cols(&lane), (4, None, 4, 0, 0, 0, 0, -1));
    }

    #[test]
    fn release_retry() {
        let mut lane = leased(-1, 4);
        lane.release_retry(1);
        assert_eq!(cols(&lane), (1, None, 4, 0, 0, 0, 0, -1));
        assert!(lane.is_free(0));
    }

    #[test]
    fn release_failed() {
        let mut lane = leased(-1, 4);
        lane.release_failed(0, 1_000);
        assert_eq!(cols(&lane), (0, None, 4, 1, 0, 1_000, 0, -1));
        assert!(lane.is_held(999) && !lane.is_free(999) && lane.is_free(1_000));
    }

    #[test]
    fn dead_letter() {
        let mut lane = leased(-1, 4);
        lane.release_failed(-1, 50);
        lane.claim(4, "L2", 200);
        lane.pass_poison(0);
        assert_eq!(cols(&lane), (0, None, 4, 0, 0, 0, 0, -1));
    }

    #[test]
    fn drop_exhausted() {
        // The same lane transition as `dead_letter`: only the caller's filing differs.
        let mut lane = leased(1, 4);
        lane.pass_poison(2);
        assert_eq!(cols(&lane), (2, None, 4, 0, 0, 0, 0, -1));
        lane.pass_poison(1);
        assert_eq!(
            lane.committed, 2,
            "passing an older head moves nothing back"
        );
    }

    #[test]
    fn expire() {
        let lane = leased(-1, 4);
        assert!(!lane.lease_expired(99) && lane.lease_expired(100));
        assert!(
            lane.is_free(100),
            "an expired lease is Free, no sweeper needed"
        );
        assert_eq!(lane.live_lease(100), None);
        assert_eq!(lane.streak_at_claim(), 1, "K+1 at the next claim");
    }

    #[test]
    fn pin() {
        let mut lane = leased(-1, 4);
        lane.pin();
        assert!(lane.is_pinned());
        assert!(
            !lane.lease_expired(1_000) && lane.is_leased(1_000),
            "a pinned lease does not expire"
        );
        assert_eq!(lane.live_lease(1_000), Some("L"));
        assert!(!lane.is_free(1_000));
        assert!(
            lane.commit_prefix(4) && !lane.is_pinned(),
            "releasing the lease ends the pin"
        );
    }

    #[test]
    fn unpin() {
        let mut lane = leased(-1, 4);
        lane.pin();
        lane.unpin();
        assert!(!lane.is_pinned());
        assert!(
            lane.is_leased(99) && lane.lease_expired(100),
            "X rules again"
        );
    }

    #[test]
    fn seek() {
        let mut lane = leased(-1, 4);
        lane.release_failed(1, 500);
        lane.seek(7);
        assert_eq!(cols(&lane), (7, None, 7, 0, 0, 0, 0, -1));
        assert_eq!(lane.claim_start, -1);
    }

    #[test]
    fn extend() {
        let mut lane = leased(-1, 4);
        assert_eq!(lane.extend(300), 300);
        assert_eq!(
            lane.extend(200),
            300,
            "an extension never shortens the lease"
        );
        assert!(lane.is_leased(299));
    }

    #[test]
    fn raise_floor() {
        let mut lane = Lane::at(-1);
        assert_eq!(lane.raise_floor(9), None);
        assert_eq!(lane.committed, 9);
        lane.raise_floor(3);
        assert_eq!(lane.committed, 9);
        // A lease over 10..=14: kept while any of its span is left, ended once all of it is removed.
        let mut lane = leased(9, 14);
        lane.release_failed(9, 50);
        lane.claim(14, "L2", 200);
        assert_eq!(lane.raise_floor(12), None);
        assert_eq!(cols(&lane), (12, l("L2"), 14, 1, 1, 0, 0, -1));
        assert_eq!(lane.raise_floor(14), l("L2"));
        assert_eq!(cols(&lane), (14, None, 14, 0, 0, 0, 0, -1));
        // A span released by `failed` (no lease, a hold, R=1): kept while any of it is left, then its
        // budget and its hold go with it.
        let mut lane = leased(9, 14);
        lane.release_failed(9, 500);
        assert_eq!(lane.raise_floor(12), None);
        assert_eq!(cols(&lane), (12, None, 14, 1, 0, 500, 0, -1));
        assert_eq!(lane.raise_floor(14), None);
        assert_eq!(cols(&lane), (14, None, 14, 0, 0, 0, 0, -1));
    }

    #[test]
    fn skip_to() {
        let mut lane = Lane::at(2);
        lane.skip_to(6);
        lane.claim(7, "L", 100);
        assert_eq!(
            (lane.committed, lane.claim_start, lane.batch_end),
            (6, 7, 7)
        );
    }

    #[test]
    fn resubscribe() {
        let mut lane = Lane::at(-1);
        assert!(lane.never_claimed());
        lane.resubscribe(5);
        assert_eq!(lane.committed, 5);
        lane.claim(6, "L", 100);
        assert!(!lane.never_claimed());
    }

    #[test]
    fn quarantine() {
        let mut lane = Lane::at(-1);
        assert_eq!(lane.reclaim_verdict(0), Reclaim::Whole, "off");
        lane.claim(4, "L1", 100);
        assert_eq!(lane.reclaim_verdict(2), Reclaim::Whole, "one expiry of two");
        lane.claim(4, "L2", 200);
        assert_eq!(lane.expiry_streak, 1);
        assert_eq!(lane.reclaim_verdict(2), Reclaim::HeadAlone);
        assert_eq!(lane.quarantine("L3", 300), 3);
        assert_eq!(cols(&lane), (-1, l("L3"), 0, 0, 2, 0, 0, 0));
        // Acked: the quarantine ends and claims take whole spans again.
        assert!(lane.commit_prefix(0));
        assert_eq!(lane.quarantined_head(), None);
        assert_eq!(lane.reclaim_verdict(2), Reclaim::Whole);
    }

    #[test]
    fn dead_letter_expired() {
        let mut lane = Lane::at(-1);
        lane.claim(4, "L1", 100);
        lane.quarantine("L2", 200);
        assert_eq!(
            lane.reclaim_verdict(2),
            Reclaim::HeadAlone,
            "one expiry alone of two"
        );
        lane.quarantine("L3", 300);
        assert_eq!(lane.expiry_streak, 1);
        assert_eq!(lane.reclaim_verdict(2), Reclaim::FileHead);
        assert_eq!(lane.dead_letter_expired(), 0);
        assert_eq!(cols(&lane), (0, None, 0, 0, 0, 0, 0, -1));
        assert_eq!(lane.reclaim_verdict(2), Reclaim::Whole);
    }

    #[test]
    fn a_retry_in_quarantine_keeps_the_head_alone() {
        let mut lane = Lane::at(-1);
        lane.claim(4, "L1", 100);
        lane.quarantine("L2", 200);
        lane.release_failed(-1, 250);
        assert_eq!(
            (lane.retry_count, lane.quarantined_head()),
            (1, Some(0)),
            "a failed head is charged as usual and stays quarantined"
        );
        assert_eq!(lane.reclaim_verdict(1), Reclaim::HeadAlone);
    }

    #[test]
    fn records_written_before_k_and_q_read_with_their_defaults() {
        let mut fields = Fields::parse(br#"{"c":5,"l":"L","x":9}"#).unwrap();
        let lane = Lane::read(&mut fields);
        assert_eq!(
            (lane.committed, lane.expiry_streak, lane.quarantined_head()),
            (5, 0, None)
        );
        let fresh = serde_json::to_string(&Lane::at(-1)).unwrap();
        assert!(
            !fresh.contains("\"k\"") && !fresh.contains("\"q\""),
            "{fresh}"
        );
    }

    proptest::proptest! {
        /// `Lane::record` writes what the derived `Serialize` writes through `serde_json`, whatever the
        /// fields hold: the optional ones set or not, ids that need escapes, the integers' extremes.
        #[test]
        fn the_record_is_what_serde_writes(
            committed in proptest::prelude::any::<i64>(),
            lease_id in proptest::option::of("(.|[\"\\\\\\x00-\\x1f]){0,12}"),
            lease_expires_ms in proptest::prelude::any::<i64>(),
            batch_end in proptest::prelude::any::<i64>(),
            retry_count in proptest::prelude::any::<u32>(),
            attempt_count in proptest::prelude::any::<u32>(),
            claim_start in proptest::prelude::any::<i64>(),
            hold_until_ms in proptest::prelude::any::<i64>(),
            expiry_streak in proptest::prop_oneof![proptest::strategy::Just(0u32), proptest::prelude::any::<u32>()],
            quarantined in proptest::prop_oneof![proptest::strategy::Just(-1i64), proptest::prelude::any::<i64>()],
            counts in proptest::array::uniform3(proptest::prop_oneof![proptest::strategy::Just(0u64), proptest::prelude::any::<u64>()]),
            pinned in proptest::prelude::any::<bool>(),
        ) {
            let lane = Lane {
                committed,
                lease_id,
                lease_expires_ms,
                batch_end,
                retry_count,
                attempt_count,
                claim_start,
                hold_until_ms,
                expiry_streak,
                quarantined,
                delivered: counts[0],
                acked: counts[1],
                failed: counts[2],
                pinned,
            };
            let serde = serde_json::to_vec(&lane).unwrap();
            proptest::prop_assert_eq!(
                String::from_utf8(lane.record()).unwrap(),
                String::from_utf8(serde).unwrap()
            );
        }
    }
}

//! The lane: one consumer group's position in one partition.
//!
//! A lane holds the committed cursor `C` (-1 = nothing committed; offsets are 0-based), the lease
//! (`L` id and `X` expiry), the batch end `E` (the leased span is `(C, E]`), the retry budget used `R`,
//! the redelivery counter `A`, the claim start `S` and the retry hold `H`.
//!
//! States (derived, never stored): **Free** (no live lease, no hold), **Leased** (`L` set and `X > now`),
//! **Held** (no live lease, `H > now`). An expired lease is Free: there is no sweeper.
//!
//! Transition table (docs/protocol.md §4.3; `p` = highest completed offset below the lowest signal `s`,
//! `N` = retryLimit, `D` = retryDelay; each row has a test named after it in `tests/conformance.rs`):
//!
//! | row | event | from | C | lease | R | A | H | effect |
//! |---|---|---|---|---|---|---|---|---|
//! | claim | pop | Free | - | L, X=now+lease, E=last read | - | +1 if start==S else 0; S=C+1 | - | deliver C+1..E |
//! | claim_auto_ack | pop autoAck | Free | E | none | 0 | 0 | - | deliver, commit |
//! | 1 `commit_prefix` | acks, no signal, C<E | Leased | max(C,p) | kept | - | - | - | |
//! | 2 `complete` | acks, no signal, C reaches E | Leased | E | released | 0 | 0 | - | next batch |
//! | 3 `release_retry` | `retry` at s | Leased | max(C,p) | released | - | - | - | s..E now |
//! | 4 `release_failed` | `failed` at s, R<N | Leased | max(C,p) | released | R+1 | - | now+D | s..E after D |
//! | 5 `dead_letter` | `failed` at s, R>=N, DLQ on | Leased | head | released | 0 | 0 | - | head filed |
//! | 6 `drop_exhausted` | `failed` at s, R>=N, DLQ off | Leased | head | released | 0 | 0 | - | head dropped |
//! | 7 `dead_letter` | `dlq` at s | Leased | head | released | 0 | 0 | - | head filed |
//! | 8 `expire` | lease passes X | Leased | - | dead | - | +1 at next claim | - | C+1.. again |
//! | 9 `seek` | seek | any | target | released | 0 | 0 | cleared | from target |
//!
//! `head` is the first offset after the committed prefix (`max(C,p)+1`), which is `s` whenever the
//! consumer acked everything below `s`.

use serde::Serialize;

/// A lane's stored state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Lane {
    /// `C`: last committed offset, -1 when nothing is committed.
    #[serde(rename = "c")]
    pub committed: i64,
    /// `L`: the lease id of the current (or last) claim.
    #[serde(rename = "l", skip_serializing_if = "Option::is_none")]
    pub lease_id: Option<String>,
    /// `X`: lease expiry, Unix ms.
    #[serde(rename = "x")]
    pub lease_expires_ms: i64,
    /// `E`: inclusive end of the current (or last) claim; -1 before any claim.
    #[serde(rename = "e")]
    pub batch_end: i64,
    /// `R`: retry budget used.
    #[serde(rename = "r")]
    pub retry_count: u32,
    /// `A`: redelivery counter.
    #[serde(rename = "a")]
    pub attempt_count: u32,
    /// `S`: C+1 at the last claim, -1 before any claim.
    #[serde(rename = "s")]
    pub claim_start: i64,
    /// `H`: not claimable before this instant (0 = no hold).
    #[serde(rename = "h")]
    pub hold_until_ms: i64,
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
        }
    }

    /// True when the lane holds a lease that has not expired.
    pub fn is_leased(&self, now: i64) -> bool {
        self.lease_id.is_some() && self.lease_expires_ms > now
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

    /// `claim`: leases `(C, last]` under `lease_id` until `expires_ms`. Returns `deliveryAttempt`.
    pub fn claim(&mut self, last: u64, lease_id: &str, expires_ms: i64) -> u32 {
        self.bump_attempt();
        self.lease_id = Some(lease_id.to_string());
        self.lease_expires_ms = expires_ms;
        self.batch_end = last as i64;
        self.hold_until_ms = 0;
        self.attempt_count + 1
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
        self.release();
    }

    /// Row 4 (`release_failed`): commits the prefix, charges one retry, releases and holds until
    /// `hold_until_ms`.
    pub fn release_failed(&mut self, p: i64, hold_until_ms: i64) {
        self.committed = self.committed.max(p);
        self.retry_count = self.retry_count.saturating_add(1);
        self.hold_until_ms = hold_until_ms;
        self.release();
    }

    /// Rows 5 to 7 (`dead_letter`, `drop_exhausted`): moves the cursor past `head` and resets the
    /// budget and the redelivery counter.
    pub fn pass_poison(&mut self, head: i64) {
        self.committed = self.committed.max(head);
        self.retry_count = 0;
        self.attempt_count = 0;
        self.hold_until_ms = 0;
        self.release();
    }

    /// Row 9 (`seek`): moves the cursor to `target` (either direction), releases any lease and resets
    /// the counters and the hold.
    pub fn seek(&mut self, target: i64) {
        self.committed = target;
        self.release();
        self.retry_count = 0;
        self.attempt_count = 0;
        self.claim_start = -1;
        self.hold_until_ms = 0;
        self.batch_end = target;
    }

    /// Ends the lease (the id is kept out of the stored row so later fenced acks are refused).
    pub fn release(&mut self) {
        self.lease_id = None;
        self.lease_expires_ms = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn claim_counts_redeliveries_only_at_the_same_start() {
        let mut lane = Lane::at(-1);
        assert_eq!(lane.claim(4, "L1", 100), 1);
        // expiry, same start: attempt 2
        assert_eq!(lane.claim(4, "L2", 200), 2);
        lane.release_retry(1); // committed 0..=1
        assert_eq!(
            lane.claim(4, "L3", 300),
            1,
            "a new start resets the counter"
        );
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn complete_resets_budget() {
        let mut lane = Lane::at(-1);
        lane.claim(4, "L", 100);
        lane.release_failed(-1, 50);
        assert_eq!(lane.retry_count, 1);
        lane.claim(4, "L2", 200);
        assert!(!lane.commit_prefix(2));
        assert!(lane.is_leased(150));
        assert!(lane.commit_prefix(4));
        assert_eq!(
            (lane.retry_count, lane.attempt_count, lane.lease_id.clone()),
            (0, 0, None)
        );
    }
}

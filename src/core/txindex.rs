//! Exact `(partition, transactionId)` lookup, without transaction ids in memory (docs/protocol.md §6.5).
//!
//! Queen's rule is that a transaction id is unique within its partition: a second push with it is a
//! duplicate, and an ack names its message by it. Memory holds only a 32-bit fingerprint of each id
//! and the number of the segment that holds it ([`TxIndex`], 8 bytes a message); a fingerprint match is
//! a candidate, confirmed by reading that segment (usually cached: acks follow the pop that read it,
//! and a producer's retry follows its push). Distinct ids share a fingerprint with probability about
//! `n / 2^32` per lookup, which costs one extra segment read, never a wrong answer.
//!
//! The fingerprints of each segment are also stored beside it (the segment's index record, module
//! `records`), so opening a broker rebuilds this index without reading any segment.
//!
//! Layout: sorted runs of `fingerprint << 32 | segment number`, smallest last; a push adds a run and
//! merges the small tail runs while a run is at most twice the size of the one after it, so there are
//! O(log n) runs and a lookup is a binary search in each. Segments trimmed by retention are forgotten
//! by number ([`TxIndex::forget_below`]) and dropped from the runs at their next merge.

/// The fingerprint of a transaction id: 64-bit FNV-1a folded to 32 bits. Stored on disk, so it must
/// never change.
pub fn fingerprint(transaction_id: &str) -> u32 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in transaction_id.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (hash ^ (hash >> 32)) as u32
}

/// Fingerprint -> segment numbers of one partition. See the module documentation.
#[derive(Debug, Clone, Default)]
pub struct TxIndex {
    runs: Vec<Vec<u64>>,
    /// Segment numbers below this are gone (trimmed); their entries are skipped and dropped on merge.
    live_from: u32,
}

fn pack(fingerprint: u32, seq: u32) -> u64 {
    (u64::from(fingerprint) << 32) | u64::from(seq)
}

impl TxIndex {
    /// Builds the index from `(fingerprint, segment number)` pairs in any order (at open).
    pub fn from_entries(entries: impl IntoIterator<Item = (u32, u32)>) -> Self {
        let mut run: Vec<u64> = entries.into_iter().map(|(f, s)| pack(f, s)).collect();
        run.sort_unstable();
        let runs = if run.is_empty() {
            Vec::new()
        } else {
            vec![run]
        };
        TxIndex { runs, live_from: 0 }
    }

    /// Adds the fingerprints of segment `seq`.
    pub fn add(&mut self, seq: u32, fingerprints: impl IntoIterator<Item = u32>) {
        let mut run: Vec<u64> = fingerprints.into_iter().map(|f| pack(f, seq)).collect();
        if run.is_empty() {
            return;
        }
        run.sort_unstable();
        self.runs.push(run);
        while self.runs.len() >= 2 {
            let n = self.runs.len();
            if self.runs[n - 2].len() > 2 * self.runs[n - 1].len() {
                break;
            }
            let newer = self.runs.pop().expect("two runs");
            let older = self.runs.pop().expect("two runs");
            let merged = merge(&older, &newer, self.live_from);
            if !merged.is_empty() {
                self.runs.push(merged);
            }
        }
    }

    /// Segment numbers that may hold `fingerprint`, each at most once, oldest first.
    pub fn candidates(&self, fingerprint: u32) -> Vec<u32> {
        let low = pack(fingerprint, 0);
        let mut found = Vec::new();
        for run in &self.runs {
            let start = run.partition_point(|e| *e < low);
            for entry in &run[start..] {
                if (entry >> 32) as u32 != fingerprint {
                    break;
                }
                let seq = *entry as u32;
                if seq >= self.live_from {
                    // Kept sorted as it grows (a handful of entries): no sort of its own.
                    if let Err(at) = found.binary_search(&seq) {
                        found.insert(at, seq);
                    }
                }
            }
        }
        found
    }

    /// Forgets every segment numbered below `seq` (they were trimmed).
    pub fn forget_below(&mut self, seq: u32) {
        self.live_from = self.live_from.max(seq);
        let live_from = self.live_from;
        // Drop whole runs that hold only forgotten segments (the old ones, usually); the rest go at
        // their next merge.
        self.runs
            .retain(|run| run.iter().any(|e| (*e as u32) >= live_from));
    }

    /// Entries held (8 bytes each).
    pub fn len(&self) -> usize {
        self.runs.iter().map(Vec::len).sum()
    }

    /// True when no entry is held.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }
}

/// Merges two sorted runs, dropping entries of segments numbered below `live_from`.
fn merge(a: &[u64], b: &[u64], live_from: u32) -> Vec<u64> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let take_a = j >= b.len() || (i < a.len() && a[i] <= b[j]);
        let entry = if take_a {
            i += 1;
            a[i - 1]
        } else {
            j += 1;
            b[j - 1]
        };
        if entry as u32 >= live_from {
            out.push(entry);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[test]
    fn fingerprints_are_stable() {
        // Stored on disk: these values must never change.
        assert_eq!(fingerprint(""), 0xcbf29ce4 ^ 0x84222325);
        assert_eq!(fingerprint("order-1"), fingerprint("order-1"));
        assert_ne!(fingerprint("order-1"), fingerprint("order-2"));
    }

    #[test]
    fn runs_stay_logarithmic() {
        let mut index = TxIndex::default();
        for seq in 0..1000u32 {
            index.add(seq, (0..10).map(|i| seq * 10 + i));
        }
        assert_eq!(index.len(), 10_000);
        assert!(index.runs.len() <= 16, "{} runs", index.runs.len());
        assert_eq!(index.candidates(5_675), vec![567]);
        assert!(index.candidates(10_001).is_empty());
    }

    proptest! {
        /// Against a map of every id: a present id always finds its segment, forgotten segments never
        /// come back, and candidates are a small superset.
        #[test]
        fn finds_every_live_id(
            batches in prop::collection::vec(prop::collection::vec(0u32..5000, 1..20), 1..60),
            forget in 0u32..60,
        ) {
            let mut index = TxIndex::default();
            let mut truth: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
            for (seq, ids) in batches.iter().enumerate() {
                let seq = seq as u32;
                if seq == forget {
                    index.forget_below(forget);
                }
                index.add(seq, ids.iter().copied());
                for id in ids {
                    truth.entry(*id).or_default().push(seq);
                }
            }
            let live_from = if (forget as usize) < batches.len() { forget } else { 0 };
            for (id, seqs) in &truth {
                let got = index.candidates(*id);
                for seq in seqs.iter().filter(|s| **s >= live_from) {
                    prop_assert!(got.contains(seq), "id {id} seq {seq} missing from {got:?}");
                }
                prop_assert!(got.iter().all(|s| *s >= live_from));
            }
        }
    }
}

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
//! O(log n) runs. Fingerprints are uniform, so a run larger than [`DIRECTORY_MIN`] entries keeps a
//! directory of where each value of the fingerprint's top bits starts (one `u32` per
//! [`ENTRIES_PER_SLOT`] entries): a lookup reads one directory slot and scans the few entries it
//! names, rather than binary-searching the whole run (which, across the runs, was most of an ack's
//! time). Segments trimmed by retention are forgotten by number ([`TxIndex::forget_below`]) and
//! dropped from the runs at their next merge.

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
    runs: Vec<Run>,
    /// Segment numbers below this are gone (trimmed); their entries are skipped and dropped on merge.
    live_from: u32,
}

/// Runs of at most this many entries have no directory (a binary search over a few cache lines).
const DIRECTORY_MIN: usize = 64;
/// About how many entries one directory slot covers.
const ENTRIES_PER_SLOT: usize = 8;

/// One sorted run and its directory.
#[derive(Debug, Clone, Default)]
struct Run {
    entries: Vec<u64>,
    /// Empty, or `2^bits + 1` slots: slot `k` is the index of the first entry whose fingerprint's top
    /// `bits` bits are at least `k` (the last slot is the run's length).
    directory: Vec<u32>,
    bits: u32,
}

impl Run {
    fn new(entries: Vec<u64>) -> Self {
        let mut run = Run {
            entries,
            directory: Vec::new(),
            bits: 0,
        };
        if run.entries.len() > DIRECTORY_MIN {
            let bits = (run.entries.len() / ENTRIES_PER_SLOT).ilog2().min(24);
            let slots = 1usize << bits;
            let mut directory = Vec::with_capacity(slots + 1);
            let mut at = 0;
            for k in 0..slots as u64 {
                while at < run.entries.len() && (run.entries[at] >> (64 - bits)) < k {
                    at += 1;
                }
                directory.push(at as u32);
            }
            directory.push(run.entries.len() as u32);
            run.directory = directory;
            run.bits = bits;
        }
        run
    }

    /// The entries that may hold `fingerprint`: a directory slot's range, or the whole run.
    fn window(&self, fingerprint: u32) -> &[u64] {
        if self.directory.is_empty() {
            return &self.entries;
        }
        let k = (fingerprint >> (32 - self.bits)) as usize;
        &self.entries[self.directory[k] as usize..self.directory[k + 1] as usize]
    }

    fn len(&self) -> usize {
        self.entries.len()
    }
}

fn pack(fingerprint: u32, seq: u32) -> u64 {
    (u64::from(fingerprint) << 32) | u64::from(seq)
}

impl TxIndex {
    /// Builds the index from `(fingerprint, segment number)` pairs in any order (at open).
    pub fn from_entries(entries: impl IntoIterator<Item = (u32, u32)>) -> Self {
        let mut run: Vec<u64> = entries.into_iter().map(|(f, s)| pack(f, s)).collect();
        super::sort::sort_u64(&mut run);
        let runs = if run.is_empty() {
            Vec::new()
        } else {
            vec![Run::new(run)]
        };
        TxIndex { runs, live_from: 0 }
    }

    /// Adds the fingerprints of segment `seq`.
    pub fn add(&mut self, seq: u32, fingerprints: impl IntoIterator<Item = u32>) {
        let mut run: Vec<u64> = fingerprints.into_iter().map(|f| pack(f, seq)).collect();
        if run.is_empty() {
            return;
        }
        super::sort::sort_u64(&mut run);
        let mut run = Run::new(run);
        // Merge the tail runs into the new one while the next older is at most twice its size.
        while let Some(older) = self.runs.last() {
            if older.len() > 2 * run.len() {
                break;
            }
            let older = self.runs.pop().expect("checked above");
            run = Run::new(merge(&older.entries, &run.entries, self.live_from));
        }
        if run.len() > 0 {
            self.runs.push(run);
        }
    }

    /// Segment numbers that may hold `fingerprint`, each at most once, oldest first.
    pub fn candidates(&self, fingerprint: u32) -> Vec<u32> {
        let low = pack(fingerprint, 0);
        let mut found = Vec::new();
        for run in &self.runs {
            let window = run.window(fingerprint);
            let start = window.partition_point(|e| *e < low);
            for entry in &window[start..] {
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
            .retain(|run| run.entries.iter().any(|e| (*e as u32) >= live_from));
    }

    /// Entries held (8 bytes each).
    pub fn len(&self) -> usize {
        self.runs.iter().map(Run::len).sum()
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

    #[test]
    fn directories_find_the_extremes() {
        let ids = [0u32, 1, u32::MAX, u32::MAX - 1, 1 << 31, (1 << 31) - 1];
        let spread = (0..2000u32).map(|i| (i.wrapping_mul(0x9E37_79B1), i / 10));
        let index = TxIndex::from_entries(spread.chain(ids.iter().map(|id| (*id, 500))));
        assert!(!index.runs[0].directory.is_empty());
        for id in ids {
            assert!(index.candidates(id).contains(&500), "{id}");
        }
    }

    proptest! {
        /// Against a map of every id: a present id always finds its segment, forgotten segments never
        /// come back, and candidates are a small superset.
        /// Ids are spread over the whole `u32` range (as real fingerprints are), so the runs' directories
        /// have many slots, and fall in few enough distinct values to share fingerprints across segments.
        #[test]
        fn finds_every_live_id(
            batches in prop::collection::vec(prop::collection::vec(0u32..5000, 1..20), 1..60),
            forget in 0u32..60,
        ) {
            let batches: Vec<Vec<u32>> = batches
                .into_iter()
                .map(|ids| ids.into_iter().map(|id| id.wrapping_mul(0x9E37_79B1)).collect())
                .collect();
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

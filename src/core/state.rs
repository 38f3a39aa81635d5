//! The core's in-memory state types.

use super::api::QueueOptions;
pub use super::lane::Lane;
use super::segment::{self, StoredMessage};
use serde::Serialize;
use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};
use std::rc::Rc;

/// A queue's stored configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueRecord {
    /// Queue id.
    pub id: String,
    /// Queue name.
    pub name: String,
    /// Namespace label.
    pub namespace: String,
    /// Task label.
    pub task: String,
    /// Creation time.
    pub created_at_ms: i64,
    /// Options.
    pub options: QueueOptions,
}

/// A queue in memory: its record and its partitions by name.
#[derive(Debug, Clone)]
pub struct Queue {
    /// The stored part.
    pub record: QueueRecord,
    /// Partition name -> partition id.
    pub partitions: BTreeMap<String, u64>,
}

/// A partition's stored metadata (its messages live in segments).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionRecord {
    /// Partition id.
    pub id: u64,
    /// Owning queue.
    pub queue: String,
    /// Partition name.
    pub name: String,
    /// Creation time.
    pub created_at_ms: i64,
    /// Lowest retained offset (retention moves it up).
    pub first_offset: u64,
}

/// One stored segment: offsets `first..=last`, encoded (src/core/segment.rs).
#[derive(Debug, Clone)]
pub struct SegmentEntry {
    /// Last offset in it.
    pub last: u64,
    /// The encoded bytes.
    pub bytes: Rc<Vec<u8>>,
}

/// A partition in memory.
#[derive(Debug, Clone)]
pub struct Partition {
    /// Partition id.
    pub id: u64,
    /// Owning queue.
    pub queue: String,
    /// Partition name.
    pub name: String,
    /// Creation time.
    pub created_at_ms: i64,
    /// Lowest retained offset.
    pub first_offset: u64,
    /// Next offset to assign.
    pub next_offset: u64,
    /// Push time of each retained message: `created[i]` is offset `first_offset + i`.
    pub created: VecDeque<i64>,
    /// Segments by first offset (boxed, like the broker's maps: see [`super::Broker`]).
    pub segments: BTreeMap<u64, Box<SegmentEntry>>,
    /// Transaction id -> offset, for dedup and ack lookup.
    pub dedup: HashMap<String, u64>,
    /// Lanes by group.
    pub lanes: BTreeMap<String, Box<Lane>>,
}

impl Partition {
    /// A new, empty partition.
    pub fn new(id: u64, queue: &str, name: &str, now: i64) -> Self {
        Partition {
            id,
            queue: queue.to_string(),
            name: name.to_string(),
            created_at_ms: now,
            first_offset: 0,
            next_offset: 0,
            created: VecDeque::new(),
            segments: BTreeMap::new(),
            dedup: HashMap::new(),
            lanes: BTreeMap::new(),
        }
    }

    /// The stored metadata.
    pub fn record(&self) -> PartitionRecord {
        PartitionRecord {
            id: self.id,
            queue: self.queue.clone(),
            name: self.name.clone(),
            created_at_ms: self.created_at_ms,
            first_offset: self.first_offset,
        }
    }

    /// Push time of a retained offset.
    pub fn created_at(&self, offset: u64) -> Option<i64> {
        offset
            .checked_sub(self.first_offset)
            .and_then(|i| self.created.get(i as usize).copied())
    }

    /// Push time of the newest message.
    pub fn newest_created(&self) -> Option<i64> {
        self.created.back().copied()
    }

    /// The last offset whose message was pushed at or before `instant` (-1 / floor if none).
    pub fn last_offset_created_at_or_before(&self, instant: i64) -> i64 {
        let count = self.created.partition_point(|&c| c <= instant);
        self.first_offset as i64 + count as i64 - 1
    }

    /// Retained message count.
    pub fn retained(&self) -> u64 {
        self.next_offset - self.first_offset
    }
}

/// Where a named group starts on a queue, fixed by its first pop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Subscription {
    /// Group name.
    pub group: String,
    /// Queue name.
    pub queue: String,
    /// Start after this instant; `None` = from the oldest retained message.
    pub start_ms: Option<i64>,
    /// Deliver only the newest message per partition.
    pub conflation: bool,
    /// When the subscription was created.
    pub created_at_ms: i64,
    /// The mode named at creation (for display).
    pub mode: String,
}

/// A dead-letter row: a per-group copy of a message that was given up on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeadLetter {
    /// Row id (UUIDv7, so ids sort by filing time).
    pub id: String,
    /// Partition id of the original.
    pub partition_id: u64,
    /// Queue name.
    pub queue: String,
    /// Partition name.
    pub partition: String,
    /// Group that gave up.
    pub group: String,
    /// Original message id.
    pub message_id: String,
    /// Original transaction id.
    pub transaction_id: String,
    /// Original offset.
    pub offset: u64,
    /// Payload snapshot.
    pub payload: serde_json::Value,
    /// Original trace id.
    pub trace_id: Option<String>,
    /// Error chain result.
    pub error: String,
    /// Budget used at filing.
    pub retry_count: u32,
    /// Filing time.
    pub failed_at_ms: i64,
    /// Original push time.
    pub created_at_ms: i64,
    /// Filing order across the whole broker (newest = highest); survives restarts.
    pub seq: u64,
}

/// The claimable partitions of one (queue, group), in round-robin order.
///
/// `order` is a sorted `Vec` of `(seq, pid)` rather than a `BTreeSet`: a partition joins with the
/// newest `seq`, so inserts append, and the B-tree code for this key type was about 1.5 KB of the gzipped
/// browser module (docs/decisions.md). A removal shifts the tail (16 bytes per ready partition).
#[derive(Debug, Clone, Default)]
pub struct ReadySet {
    order: Vec<(u64, u64)>,
    seq_of: HashMap<u64, u64>,
}

impl ReadySet {
    /// Adds `pid` at the back unless present; true when added.
    pub fn insert(&mut self, pid: u64, seq: u64) -> bool {
        if self.seq_of.contains_key(&pid) {
            return false;
        }
        self.seq_of.insert(pid, seq);
        let key = (seq, pid);
        let at = self.order.partition_point(|k| *k < key);
        self.order.insert(at, key);
        true
    }

    /// Removes `pid` if present.
    pub fn remove(&mut self, pid: u64) {
        if let Some(seq) = self.seq_of.remove(&pid) {
            if let Ok(at) = self.order.binary_search(&(seq, pid)) {
                self.order.remove(at);
            }
        }
    }

    /// Partition ids in order.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.order.iter().map(|(_, pid)| *pid)
    }

    /// Number of ready partitions.
    pub fn len(&self) -> usize {
        self.order.len()
    }
}

/// When lanes must be looked at again (a lease expires, a retry hold ends, a delayed message comes
/// due), earliest first, as `(instant, partition id, group)`.
///
/// Entries are hints: a due one makes the core re-check that lane, so an entry that went stale (the
/// lease was acked early) costs one re-check and nothing else. A binary heap rather than a `BTreeSet`:
/// the B-tree code for this key type was about 2.5 KB of the gzipped browser module (docs/decisions.md).
/// Like a set, it holds an entry once: every push re-checks the leased lanes of its partition and
/// re-arms the same timer, which must not pile up copies.
#[derive(Debug, Clone, Default)]
pub struct Timers {
    heap: BinaryHeap<Reverse<(i64, u64, String)>>,
}

impl Timers {
    /// Adds a timer, unless the same one is already set (a scan: the heap holds one entry per leased
    /// or held lane, and comparing the instant first keeps it cheap).
    pub fn insert(&mut self, timer: (i64, u64, String)) {
        if !self.heap.iter().any(|Reverse(t)| *t == timer) {
            self.heap.push(Reverse(timer));
        }
    }

    /// Number of timers set.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// The earliest instant, if any.
    pub fn next_at(&self) -> Option<i64> {
        self.heap.peek().map(|Reverse((at, _, _))| *at)
    }

    /// Takes out the earliest timer if it is due at `now`.
    pub fn pop_due(&mut self, now: i64) -> Option<(i64, u64, String)> {
        if self.next_at()? > now {
            return None;
        }
        self.heap.pop().map(|Reverse(first)| first)
    }

    /// Keeps only the timers `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&(i64, u64, String)) -> bool) {
        self.heap.retain(|Reverse(t)| keep(t));
    }
}

/// A small cache of decoded segments, so sequential pops decode each segment once.
#[derive(Debug, Default)]
pub struct SegmentCache {
    slots: RefCell<VecDeque<CachedSegment>>,
}

/// A decoded segment keyed by (partition id, first offset).
type CachedSegment = ((u64, u64), Rc<Vec<StoredMessage>>);

const CACHE_SLOTS: usize = 64;

impl SegmentCache {
    /// The decoded segment (pid, first), decoding and caching it on a miss.
    pub fn get(&self, pid: u64, first: u64, entry: &SegmentEntry) -> Rc<Vec<StoredMessage>> {
        let mut slots = self.slots.borrow_mut();
        if let Some(pos) = slots.iter().position(|(k, _)| *k == (pid, first)) {
            let hit = slots.remove(pos).expect("position is in range");
            let decoded = hit.1.clone();
            slots.push_front(hit);
            return decoded;
        }
        // Segments were validated when loaded or written; a decode failure here means memory corruption,
        // and skipping the segment would lose its messages silently: stop instead.
        let decoded = Rc::new(
            segment::decode(&entry.bytes)
                .expect("segments are validated when they are loaded and when they are written"),
        );
        slots.push_front(((pid, first), decoded.clone()));
        slots.truncate(CACHE_SLOTS);
        decoded
    }

    /// Forgets cached segments of a partition.
    pub fn forget_partition(&self, pid: u64) {
        self.slots.borrow_mut().retain(|((p, _), _)| *p != pid);
    }
}

/// Counters since open.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counters {
    /// Messages queued.
    pub pushed: u64,
    /// Messages delivered.
    pub popped: u64,
    /// Ack items accepted.
    pub acked: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timers_fire_earliest_first_and_hold_an_entry_once() {
        let mut timers = Timers::default();
        for _ in 0..3 {
            timers.insert((20, 1, "g".to_string()));
        }
        timers.insert((10, 2, "g".to_string()));
        timers.insert((20, 1, "h".to_string()));
        assert_eq!(
            timers.len(),
            3,
            "re-arming the same timer does not add a copy"
        );
        assert_eq!(timers.next_at(), Some(10));
        assert_eq!(timers.pop_due(5), None);
        assert_eq!(timers.pop_due(25), Some((10, 2, "g".to_string())));
        assert_eq!(timers.pop_due(25), Some((20, 1, "g".to_string())));
        timers.retain(|(_, pid, _)| *pid != 1);
        assert_eq!((timers.len(), timers.pop_due(25)), (0, None));
    }

    #[test]
    fn ready_sets_keep_join_order() {
        let mut set = ReadySet::default();
        assert!(set.insert(7, 3) && set.insert(5, 1) && set.insert(9, 2));
        assert!(!set.insert(7, 4), "a partition is in the set once");
        assert_eq!(set.iter().collect::<Vec<_>>(), vec![5, 9, 7]);
        set.remove(9);
        set.remove(42);
        assert_eq!((set.iter().collect::<Vec<_>>(), set.len()), (vec![5, 7], 2));
    }
}

//! The core's in-memory state types.

use super::api::{Payload, QueueOptions};
pub use super::lane::Lane;
use super::segment::{self, StoredMessage};
pub use super::txindex::TxIndex;
use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;
use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
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
    /// Partition name -> partition id. The ids are boxed as the broker's maps box their values (module
    /// `core`, `Broker`): the map is then the same `BTreeMap<String, Box<_>>` code as theirs instead of
    /// a B-tree copy of its own in the browser module.
    pub partitions: BTreeMap<String, Box<u64>>,
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

/// What memory holds of one stored segment: its place, its push time and its size. The bytes stay in the
/// store (record `s/<pid>/<first>`) and are read on demand into the [`SegmentCache`]; the transaction ids
/// of its messages are fingerprinted in the partition's [`TxIndex`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentMeta {
    /// First offset in it.
    pub first: u64,
    /// Last offset in it.
    pub last: u64,
    /// Its number in the partition (0, 1, 2, ... in push order; never reused), as the [`TxIndex`] names it.
    pub seq: u32,
    /// Push time of its messages (one push batch shares one `now`), Unix ms.
    pub created_ms: i64,
    /// Bytes of the stored segment record.
    pub stored_bytes: u32,
}

/// A partition in memory: its metadata, lanes and the index of its segments, never its messages.
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
    /// Stored segments in offset order (contiguous: each starts after the one before ends).
    pub segments: VecDeque<SegmentMeta>,
    /// Number the next segment gets.
    pub next_segment_seq: u32,
    /// Transaction id fingerprints -> segment numbers, for dedup and ack lookup.
    pub txids: TxIndex,
    /// Lanes by group.
    pub lanes: BTreeMap<String, Box<Lane>>,
    /// The first offset of the earliest segment that waits for compression (`u64::MAX`: none). The
    /// segments that wait are the newest ones (pushes append them, maintenance compresses them oldest
    /// first), so this one offset says which they are (module `compaction`).
    pub compress_from: u64,
    /// The keys' first offsets of the index pages holding this partition's entries, in order (module
    /// `pages`): the entry of a paged segment is in the page with the greatest start at or below its
    /// first offset.
    pub pages: VecDeque<u64>,
    /// The transaction-id fingerprints of the newest segments, whose entries are in no page yet (one
    /// per segment, oldest first: they are the last `unpaged.len()` of `segments`).
    pub unpaged: Vec<Vec<u32>>,
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
            segments: VecDeque::new(),
            next_segment_seq: 0,
            txids: TxIndex::default(),
            lanes: BTreeMap::new(),
            compress_from: u64::MAX,
            pages: VecDeque::new(),
            unpaged: Vec::new(),
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

    /// The segment holding `offset`, if one is stored.
    pub fn segment_of(&self, offset: u64) -> Option<&SegmentMeta> {
        let after = self.segments.partition_point(|s| s.first <= offset);
        let seg = self.segments.get(after.checked_sub(1)?)?;
        (seg.last >= offset).then_some(seg)
    }

    /// The segment numbered `seq`, if still stored.
    pub fn segment_by_seq(&self, seq: u32) -> Option<&SegmentMeta> {
        let at = self.segments.partition_point(|s| s.seq < seq);
        self.segments.get(at).filter(|s| s.seq == seq)
    }

    /// Push time of a retained offset.
    pub fn created_at(&self, offset: u64) -> Option<i64> {
        if offset < self.first_offset {
            return None;
        }
        self.segment_of(offset).map(|s| s.created_ms)
    }

    /// Push time of the oldest retained message.
    pub fn oldest_created(&self) -> Option<i64> {
        self.created_at(self.first_offset)
    }

    /// Push time of the newest message.
    pub fn newest_created(&self) -> Option<i64> {
        if self.retained() == 0 {
            return None;
        }
        self.segments.back().map(|s| s.created_ms)
    }

    /// The last offset whose message was pushed at or before `instant` (`first_offset - 1` if none).
    ///
    /// Push times never decrease along a partition (the core's clock never goes backwards), so this is
    /// a binary search over the segments.
    pub fn last_offset_created_at_or_before(&self, instant: i64) -> i64 {
        let floor = self.first_offset as i64 - 1;
        let count = self.segments.partition_point(|s| s.created_ms <= instant);
        match count.checked_sub(1).and_then(|i| self.segments.get(i)) {
            Some(seg) => (seg.last as i64).max(floor),
            None => floor,
        }
    }

    /// Retained message count.
    pub fn retained(&self) -> u64 {
        self.next_offset - self.first_offset
    }

    /// Bytes of the stored segment records.
    pub fn stored_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.stored_bytes as u64).sum()
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
    /// How its start was chosen (for display).
    pub mode: SubscriptionMode,
}

/// How a subscription's start was chosen; stored and shown as `new`, `all` or `timestamp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SubscriptionMode {
    /// After its first pop's instant.
    New,
    /// From the oldest retained message.
    All,
    /// After a given instant (`subscriptionFrom`, or moved by a subscription update).
    Timestamp,
}

impl SubscriptionMode {
    /// Its stored and shown name.
    pub fn as_str(self) -> &'static str {
        match self {
            SubscriptionMode::New => "new",
            SubscriptionMode::All => "all",
            SubscriptionMode::Timestamp => "timestamp",
        }
    }

    /// The mode a stored name names.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "new" => Some(SubscriptionMode::New),
            "all" => Some(SubscriptionMode::All),
            "timestamp" => Some(SubscriptionMode::Timestamp),
            _ => None,
        }
    }
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
    pub payload: Payload,
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

    /// True when the timer (at, pid, group) is set.
    pub fn contains(&self, at: i64, pid: u64, group: &str) -> bool {
        self.heap
            .iter()
            .any(|Reverse((a, p, g))| *a == at && *p == pid && g == group)
    }

    /// True when any timer is set for lane (pid, group).
    pub fn has_lane(&self, pid: u64, group: &str) -> bool {
        self.heap
            .iter()
            .any(|Reverse((_, p, g))| *p == pid && g == group)
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

/// Decoded segments kept in memory, within a byte budget.
///
/// What goes first when the budget is exceeded: segments every lane of their partition has passed (told by
/// the distance [`SegmentCache::trim`] is given, from the lanes as they are then), then segments a push
/// wrote and nothing has read since, those farthest from their partition's head first (consumers read a
/// partition oldest first, so those are needed last; least recently used order evicted the oldest, exactly
/// the ones the next pops read, so that a backlog larger than the budget missed at every pop), then read
/// segments, least recently used first. A pushed segment is never evicted before the engine reports its
/// commit ([`SegmentCache::committed_through`]): until then the cache holds its only copy the core can
/// read.
///
/// The core reads messages only from here. The engine fills it before a command with what the command's
/// planner says it will read (`Broker::segments_needed_*`), and trims it to the budget between commands,
/// never during one, so a command finds everything that was loaded for it. A read of a segment that is
/// not here is recorded as a miss ([`SegmentCache::take_misses`]); the engine then drops the command's
/// effects, loads what was missed and runs it again.
#[derive(Debug)]
pub struct SegmentCache {
    budget_bytes: usize,
    inner: RefCell<CacheInner>,
}

#[derive(Debug, Default)]
struct CacheInner {
    slots: HashMap<(u64, u64), CachedSegment>,
    used_bytes: usize,
    clock: u64,
    /// The clock up to which every pushed segment is committed ([`SegmentCache::committed_through`]).
    committed: u64,
    misses: Vec<(u64, u64)>,
}

#[derive(Debug)]
struct CachedSegment {
    messages: Rc<[StoredMessage]>,
    /// The transaction-id fingerprint of each message, index-aligned: a lookup by transaction id
    /// compares these before it compares any id.
    fingerprints: Vec<u32>,
    weight: usize,
    /// Eviction order, lowest first, for a segment no lane has passed (a passed one ranks 0 when trimmed):
    /// [`PUSHED_RANK`] for a segment a push wrote and nothing read since (ordered among themselves by
    /// distance from their partition's head when trimmed); [`READ_RANK`] plus the clock of its last read
    /// otherwise.
    rank: u64,
    /// The clock at which a push inserted it (0: read from the store): not evicted before the engine
    /// reports a commit through that clock.
    pushed_at: u64,
}

/// The rank of a pushed, unread segment at its partition's head (see `CachedSegment::rank`; farther ones
/// rank lower by their distance): above every passed one (the clock stays far below 2^62).
const PUSHED_RANK: u64 = u64::MAX >> 1;
/// The rank of a segment read at clock 0: above every pushed, unread one.
const READ_RANK: u64 = 1 << 63;

impl SegmentCache {
    /// An empty cache that [`Self::trim`] keeps under `budget_bytes` (weights are the memory a segment
    /// holds: `segment::decoded_weight` and the slot, see [`Self::insert`]).
    pub fn new(budget_bytes: usize) -> Self {
        SegmentCache {
            budget_bytes,
            inner: RefCell::new(CacheInner::default()),
        }
    }

    /// The decoded segment (pid, first), or `None` (recorded as a miss) when it is not loaded.
    pub fn get(&self, pid: u64, first: u64) -> Option<Rc<[StoredMessage]>> {
        let mut inner = self.inner.borrow_mut();
        inner.clock += 1;
        let clock = inner.clock;
        match inner.slots.get_mut(&(pid, first)) {
            Some(slot) => {
                slot.rank = READ_RANK | clock;
                Some(slot.messages.clone())
            }
            None => {
                if !inner.misses.contains(&(pid, first)) {
                    inner.misses.push((pid, first));
                }
                None
            }
        }
    }

    /// The index in segment (pid, first) of the message whose transaction id is `transaction_id`
    /// (whose fingerprint is `fingerprint`): `Some(None)` when the segment holds none, `None`
    /// (recorded as a miss) when the segment is not loaded.
    pub fn position_of_transaction(
        &self,
        pid: u64,
        first: u64,
        transaction_id: &str,
        fingerprint: u32,
    ) -> Option<Option<usize>> {
        let mut inner = self.inner.borrow_mut();
        inner.clock += 1;
        let clock = inner.clock;
        match inner.slots.get_mut(&(pid, first)) {
            Some(slot) => {
                slot.rank = READ_RANK | clock;
                Some(
                    slot.fingerprints
                        .iter()
                        .enumerate()
                        .filter(|(_, f)| **f == fingerprint)
                        .map(|(at, _)| at)
                        .find(|at| slot.messages[*at].transaction_id == transaction_id),
                )
            }
            None => {
                if !inner.misses.contains(&(pid, first)) {
                    inner.misses.push((pid, first));
                }
                None
            }
        }
    }

    /// [`Self::position_of_transaction`] for a caller that only hopes the segment is loaded: `None` when
    /// it is not loaded or holds no such message, and nothing is recorded (no miss, no use).
    ///
    /// The scan starts at index `from` and wraps around: a caller that expects the message at a place
    /// (acks in the order of their pop) finds it in one step. The segment's messages come with the
    /// index (an `Rc` clone): the message's own transaction id is shared text an answer can carry
    /// without a copy, and a caller can look at the next messages without another lookup.
    pub fn peek_position_of_transaction(
        &self,
        pid: u64,
        first: u64,
        transaction_id: &str,
        fingerprint: u32,
        from: usize,
    ) -> Option<(usize, Rc<[StoredMessage]>)> {
        let inner = self.inner.borrow();
        let slot = inner.slots.get(&(pid, first))?;
        let from = from.min(slot.fingerprints.len());
        (from..slot.fingerprints.len())
            .chain(0..from)
            .filter(|at| slot.fingerprints[*at] == fingerprint)
            .find(|at| slot.messages[*at].transaction_id == transaction_id)
            .map(|at| (at, slot.messages.clone()))
    }

    /// True when segment (pid, first) is loaded.
    pub fn contains(&self, pid: u64, first: u64) -> bool {
        self.inner.borrow().slots.contains_key(&(pid, first))
    }

    /// The memory a slot holds beside its messages' (`segment::decoded_weight`): the map's entry, the
    /// message slice's `Rc` counts, `fingerprints` fingerprints.
    fn slot_weight(fingerprints: usize) -> usize {
        std::mem::size_of::<((u64, u64), CachedSegment)>()
            + segment::RC_COUNTS
            + fingerprints * std::mem::size_of::<u32>()
            + 2 * segment::ALLOCATION_OVERHEAD
    }

    /// Keeps a decoded segment; `weight` is what its messages hold (`segment::decoded_weight`; the slot's
    /// own memory is added here), `fingerprints` the
    /// transaction-id fingerprint of each message (index-aligned). `pushed`: written by a push, not read
    /// (evicted before read segments, the farthest from its partition's head first).
    pub fn insert(
        &self,
        pid: u64,
        first: u64,
        messages: Rc<[StoredMessage]>,
        weight: usize,
        fingerprints: Vec<u32>,
        pushed: bool,
    ) {
        debug_assert_eq!(messages.len(), fingerprints.len());
        let weight = weight + Self::slot_weight(fingerprints.capacity());
        let mut inner = self.inner.borrow_mut();
        inner.clock += 1;
        let clock = inner.clock;
        let slot = CachedSegment {
            messages,
            fingerprints,
            weight,
            rank: if pushed {
                PUSHED_RANK
            } else {
                READ_RANK | clock
            },
            pushed_at: if pushed { clock } else { 0 },
        };
        if let Some(old) = inner.slots.insert((pid, first), slot) {
            inner.used_bytes -= old.weight;
        }
        inner.used_bytes += weight;
    }

    /// Evicts segments in the cache's order (passed, then pushed and unread, the farthest from their
    /// partition's head first, `distance(pid, first, end)` telling how far (`end`: the offset after the
    /// segment's last; `u64::MAX` ranks it with the passed ones), then least recently read; never a pushed
    /// segment whose commit is not reported) until the cache fits its budget, and then some: down to
    /// [`Self::low_water_bytes`], so a cache that stays full is sorted once every few commands rather than
    /// after each.
    pub fn trim(&self, distance: impl Fn(u64, u64, u64) -> u64) {
        let mut inner = self.inner.borrow_mut();
        if inner.used_bytes <= self.budget_bytes {
            return;
        }
        let target = self.low_water_bytes();
        let committed = inner.committed;
        let mut by_rank: Vec<(u64, (u64, u64))> = inner
            .slots
            .iter()
            .filter(|(_, s)| s.pushed_at <= committed)
            .map(|(&(pid, first), s)| {
                let distance = distance(pid, first, first + s.messages.len() as u64);
                let rank = if distance == u64::MAX {
                    0
                } else if s.rank == PUSHED_RANK {
                    PUSHED_RANK.saturating_sub(distance)
                } else {
                    s.rank
                };
                (rank, (pid, first))
            })
            .collect();
        super::sort::sort(&mut by_rank);
        for (_, key) in by_rank {
            if inner.used_bytes <= target {
                break;
            }
            if let Some(old) = inner.slots.remove(&key) {
                inner.used_bytes -= old.weight;
            }
        }
    }

    /// The clock now: a segment inserted so far was inserted at or before it.
    pub fn clock(&self) -> u64 {
        self.inner.borrow().clock
    }

    /// The engine committed every change applied up to `clock` ([`Self::clock`] when it took them): the
    /// segments pushed until then may be evicted.
    pub fn committed_through(&self, clock: u64) {
        let mut inner = self.inner.borrow_mut();
        inner.committed = inner.committed.max(clock);
    }

    /// Forgets cached segments of a partition.
    pub fn forget_partition(&self, pid: u64) {
        let mut inner = self.inner.borrow_mut();
        let doomed: Vec<(u64, u64)> = inner
            .slots
            .keys()
            .filter(|(p, _)| *p == pid)
            .copied()
            .collect();
        for key in doomed {
            if let Some(old) = inner.slots.remove(&key) {
                inner.used_bytes -= old.weight;
            }
        }
    }

    /// True when a segment was read but not loaded since the last [`Self::take_misses`].
    pub fn has_misses(&self) -> bool {
        !self.inner.borrow().misses.is_empty()
    }

    /// The segments read but not loaded since the last call.
    pub fn take_misses(&self) -> Vec<(u64, u64)> {
        std::mem::take(&mut self.inner.borrow_mut().misses)
    }

    /// Bytes held (decoded weights) and segments held.
    pub fn usage(&self) -> (usize, usize) {
        let inner = self.inner.borrow();
        (inner.used_bytes, inner.slots.len())
    }

    /// What [`Self::trim`] evicts down to once the budget is exceeded: seven eighths of it.
    fn low_water_bytes(&self) -> usize {
        self.budget_bytes - self.budget_bytes / 8
    }

    /// The byte budget [`Self::trim`] keeps to.
    pub fn budget_bytes(&self) -> usize {
        self.budget_bytes
    }
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
    fn the_cache_evicts_passed_then_farthest_pushed_then_least_recently_read_never_uncommitted() {
        // Each segment weighs 200 bytes of messages and its slot: four fit.
        let weight = 200 + SegmentCache::slot_weight(0);
        let cache = SegmentCache::new(4 * weight);
        let put = |first: u64, pushed: bool| {
            cache.insert(1, first, Rc::from(Vec::new()), 200, Vec::new(), pushed);
        };
        put(0, false); // read from the store
        put(1, true);
        put(2, true);
        put(3, true);
        assert!(cache.get(1, 0).is_some());
        // Over budget, but nothing pushed is committed: only the read segment may go.
        put(4, true);
        cache.trim(|_, first, _| first);
        assert_eq!(cache.usage(), (4 * weight, 4));
        assert!(!cache.contains(1, 0) && cache.contains(1, 4));
        // Committed: the farthest pushed go first (distance here: the first offset).
        cache.committed_through(cache.clock());
        put(5, true);
        cache.trim(|_, first, _| first);
        assert_eq!(cache.usage().1, 3);
        assert!(cache.contains(1, 1) && cache.contains(1, 2) && cache.contains(1, 5));
        // A passed segment (distance u64::MAX) goes before any other, read or not, a read one last.
        assert!(cache.get(1, 1).is_some() && cache.get(1, 2).is_some());
        cache.committed_through(cache.clock());
        put(6, false);
        put(7, false);
        cache.trim(|_, first, _| if first == 2 { u64::MAX } else { first });
        assert!(!cache.contains(1, 2), "passed first");
        assert!(!cache.contains(1, 5), "then the pushed one");
        assert_eq!(cache.usage().1, 3, "the read ones stay");
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

//! The sans-IO broker core: queues, partitions, lanes, leases, dead letters and segments (docs/protocol.md).
//!
//! [`Broker`] is plain deterministic Rust: no async, no I/O, no clock, no randomness of its own. Every
//! command takes `now` (Unix ms, clamped so it never goes backwards) and returns its reply; the records
//! it changed accumulate in a change set that the engine takes ([`Broker::take_changes`]) and commits
//! before replying. Ids come from an [`ids::IdGen`] seeded by the host.
//!
//! Methods, quinn-style:
//! - inputs/mutators: `push`, `pop`, `ack`, `extend_lease`, `transaction`, `configure`, `delete_queue`,
//!   `replay_dead_letter`, `replay_address`, `delete_dead_letters`, `seek`, `seek_partition_to_end`,
//!   `delete_group`, `update_subscription`, `maintain`, `dlq_replay_rows`, `dlq_delete_rows`;
//! - outputs: `take_changes`, `take_woken_queues`, `take_discard_flag`, `next_deadline_ms`;
//! - getters: `list_queues`, `queue_view`, `dead_letters`, `messages`, `message`, `stats`, `deliveries`,
//!   `dlq_select`, `dlq_preview`, `queue_history` (feature `views`).
//!
//! Pop cost does not grow with idle or leased partitions: each (queue, group) keeps a ready set of the
//! partitions it could claim, and a timer set brings leased and held lanes back when their lease expires
//! or their hold ends.

mod ack;
pub mod api;
mod commands;
pub mod compaction;
mod deliveries;
mod dlq_bulk;
pub(crate) mod fields;
mod fxhash;
#[cfg(feature = "views")]
pub mod history;
pub mod ids;
mod invariants;
pub(crate) mod json_text;
pub mod lane;
pub mod maintenance;
pub mod meters;
mod pages;
mod pop;
#[cfg(feature = "twophase")]
pub mod prepared;
mod push;
mod reclaim;
mod records;
pub mod redelivery;
#[cfg(feature = "ops")]
pub mod reshard;
pub mod segment;
pub mod sort;
mod state;
pub mod timefmt;
#[cfg(feature = "ops")]
pub mod traces;
pub mod txindex;
mod views;

use crate::store::{ChangeSet, Record, StoreError};
use api::*;
use fxhash::FxHashMap as HashMap;
use ids::IdGen;
use litemap::LiteMap;
use state::*;
use std::collections::BTreeMap;

pub use pages::{segments_from, ENTRIES_PER_PAGE};
/// The namespace and task a queue created without them gets from its name (`ns.task...`).
pub use push::{labels_from_name, PushLookup};
pub use records::{
    index_entry_key, needs_segment_upgrade, parse_segment_key, segment_key, FORMAT_VERSION,
    INDEX_PREFIXES, SEGMENT_PREFIX,
};
pub use state::{Subscription, SubscriptionMode};

/// Default byte budget of the decoded-segment cache: a quarter of a Durable Object's 128 MB.
pub const DEFAULT_CACHE_BYTES: usize = 32 * 1024 * 1024;

/// Broker-wide settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerConfig {
    /// Where a named group starts when its first pop sends no mode: `true` = only new messages (seed
    /// 003, the product default), `false` = everything retained (Queen 0.15's default).
    pub default_subscription_new: bool,
    /// Byte budget of the decoded-segment cache (decoded JSON bytes).
    pub cache_bytes: usize,
    /// Storage quota: pushes that would take the stored segment bytes past it are refused (507).
    /// `None`: no quota.
    pub max_stored_bytes: Option<u64>,
    /// Whether the engine lets commands applied during a commit share the next one (group commit).
    /// Off, each command commits inside its own call, under the command gate. Recorded requests
    /// (`Engine::set_recording`) hold their group for their answer either way.
    pub group_commit: bool,
    /// Which shard of the Worker's `SHARDS` this broker is: its ids carry the index (see
    /// [`ids::ShardTag`]). Default: the only one, ids untagged.
    pub shard: ids::ShardTag,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            default_subscription_new: true,
            cache_bytes: DEFAULT_CACHE_BYTES,
            max_stored_bytes: None,
            group_commit: true,
            shard: ids::ShardTag::default(),
        }
    }
}

/// The broker state machine. See the module documentation.
///
/// The maps hold their values boxed: every `BTreeMap<K, V>` is its own copy of the B-tree code, but with
/// a pointer for `V` the copies for one key type are identical and wasm-opt merges them. That is about
/// 10 KB of the npm module's gzipped download (docs/decisions.md, "JS module size"), for one allocation
/// per queue, partition, lane, segment, subscription and dead letter. For the same reason the small
/// (queue, group)-keyed maps and the partitions by id are `LiteMap`s (sorted vectors; partition ids are
/// minted in ascending order and read back in it, so an insert appends), the timers a binary heap and
/// the woken queues a list: a B-tree key type fewer each.
pub struct Broker {
    config: BrokerConfig,
    ids: IdGen,
    /// The latest `now` seen; time never goes backwards inside the core.
    now_ms: i64,
    queues: BTreeMap<String, Box<Queue>>,
    partitions: LiteMap<u64, Box<Partition>>,
    next_partition_id: u64,
    subscriptions: LiteMap<(String, String), Box<Subscription>>,
    dead_letters: BTreeMap<String, Box<DeadLetter>>,
    next_dead_letter_seq: u64,
    /// Ready sets per (queue, group).
    groups: LiteMap<(String, String), Box<ReadySet>>,
    /// Lease id -> the lanes it holds (pid, group).
    leases: HashMap<String, Vec<(u64, String)>>,
    /// (instant, pid, group): re-check a lane then (lease expiry, hold end, delayed message due).
    timers: Timers,
    ready_seq: u64,
    cache: SegmentCache,
    /// Bytes of every stored segment record (what the storage quota counts).
    stored_bytes: u64,
    /// Pushed, popped, acked and failed counts (module `meters`).
    meters: meters::Meters,
    /// Maintenance mode switches and the push buffer (module `maintenance`).
    mode: maintenance::Maintenance,
    /// Recorded trace events (module `traces`).
    #[cfg(feature = "ops")]
    traces: traces::TraceLog,
    changes: ChangeSet,
    /// Queues that gained claimable work during the current command, each once.
    woken: Vec<String>,
    discard: bool,
    /// How many segments' transaction ids were indexed (`PushLookup` relies on it).
    txids_indexed: u64,
    /// The delivery log of the queues that keep one (module `deliveries`).
    deliveries: deliveries::DeliveryLog,
    /// Each queue's recent throughput and backlog (module `history`).
    #[cfg(feature = "views")]
    history: history::History,
    /// Prepared transaction parts by id (module `prepared`).
    #[cfg(feature = "twophase")]
    prepared: BTreeMap<String, Box<prepared::Prepared>>,
    /// While a prepared part commits: the lanes it pinned, on which its acks may act.
    #[cfg(feature = "twophase")]
    committing_pins: Option<Vec<(u64, String)>>,
}

impl Broker {
    /// An empty broker.
    pub fn new(config: BrokerConfig, seed: u64) -> Self {
        let cache = SegmentCache::new(config.cache_bytes);
        Broker {
            ids: IdGen::for_shard(seed, config.shard),
            config,
            now_ms: 0,
            queues: BTreeMap::new(),
            partitions: LiteMap::new(),
            next_partition_id: 1,
            subscriptions: LiteMap::new(),
            dead_letters: BTreeMap::new(),
            next_dead_letter_seq: 0,
            groups: LiteMap::new(),
            leases: HashMap::default(),
            timers: Timers::default(),
            ready_seq: 0,
            cache,
            stored_bytes: 0,
            meters: meters::Meters::default(),
            mode: maintenance::Maintenance::default(),
            #[cfg(feature = "ops")]
            traces: traces::TraceLog::default(),
            changes: ChangeSet::default(),
            woken: Vec::new(),
            discard: false,
            txids_indexed: 0,
            deliveries: Default::default(),
            #[cfg(feature = "views")]
            history: Default::default(),
            #[cfg(feature = "twophase")]
            prepared: BTreeMap::new(),
            #[cfg(feature = "twophase")]
            committing_pins: None,
        }
    }

    /// Rebuilds a broker from stored records: at least every record under [`INDEX_PREFIXES`] (what the
    /// engine reads at open and after a failure); segment records given too are decoded into the cache.
    /// Opening format 1 data leaves its upgrade in the pending change set ([`Self::take_changes`]).
    pub fn from_records(
        config: BrokerConfig,
        seed: u64,
        records: Vec<Record>,
    ) -> Result<Self, StoreError> {
        let record_count = records.len() as u64;
        let mut broker = Broker::new(config, seed);
        broker.load(records)?;
        broker.stored_bytes = broker.partitions.values().map(|p| p.stored_bytes()).sum();
        // Mix what was loaded into the id stream, so a host that reseeds with the same value after a
        // reload does not mint the same ids again.
        broker.ids = IdGen::for_shard(
            seed ^ (broker.now_ms as u64).rotate_left(21) ^ record_count.rotate_left(47),
            broker.config.shard,
        );
        Ok(broker)
    }

    /// Keeps a segment read from the store (key `s/<pid>/<first>`) in the cache. Fails when the bytes do
    /// not decode, or do not hold the offsets the index says they hold.
    pub fn load_segment(&self, pid: u64, first: u64, bytes: &[u8]) -> Result<(), StoreError> {
        let key = segment_key(pid, first);
        let messages = segment::decode(bytes).map_err(|e| records::unreadable(&key, &e))?;
        let expected = self
            .partitions
            .get(&pid)
            .and_then(|p| p.segment_of(first))
            .filter(|s| s.first == first);
        if let Some(meta) = expected {
            let offsets_match = messages.len() as u64 == meta.last - meta.first + 1
                && messages
                    .iter()
                    .zip(meta.first..)
                    .all(|(m, o)| m.offset == o);
            if !offsets_match {
                return Err(StoreError::other(format!(
                    "storage is damaged: segment \"{key}\" does not hold offsets {}..={}",
                    meta.first, meta.last
                )));
            }
        }
        let weight = segment::decoded_weight(&messages);
        let fingerprints = messages
            .iter()
            .map(|m| txindex::fingerprint(&m.transaction_id))
            .collect();
        self.cache.insert(
            pid,
            first,
            std::rc::Rc::from(messages),
            weight,
            fingerprints,
            false,
        );
        Ok(())
    }

    /// Trims the segment cache to its budget (the engine calls this between commands). The head of a
    /// partition is the offset after what every lane has committed, or its first offset when no group has
    /// a lane there. A segment wholly below the head goes first, however the lanes passed it (acks, a
    /// seek, retention, a deleted group): only a view or a group starting over reads it again. Pushed
    /// segments nobody has read go next, by their distance from the head.
    pub fn trim_cache(&self) {
        self.cache.trim(|pid, first, end| {
            let head = (self.passed_by_every_lane(pid) + 1) as u64;
            if end <= head {
                u64::MAX
            } else {
                first.saturating_sub(head)
            }
        });
    }

    /// The segment cache's clock: what [`Self::cache_committed_through`] takes.
    pub fn cache_clock(&self) -> u64 {
        self.cache.clock()
    }

    /// Every change applied up to `clock` ([`Self::cache_clock`] when the engine took them) is committed:
    /// the segments pushed until then may leave the cache (until then it holds their only readable copy).
    pub fn cache_committed_through(&self, clock: u64) {
        self.cache.committed_through(clock);
    }

    /// Segments read by the last command that were not loaded (the engine reloads and reruns it).
    pub fn take_segment_misses(&self) -> Vec<(u64, u64)> {
        self.cache.take_misses()
    }

    /// Bytes and segments held by the segment cache, and its budget.
    pub fn cache_usage(&self) -> (usize, usize, usize) {
        let (bytes, segments) = self.cache.usage();
        (bytes, segments, self.cache.budget_bytes())
    }

    /// Bytes of stored segment records, and the quota if one is set.
    pub fn storage_usage(&self) -> (u64, Option<u64>) {
        (self.stored_bytes, self.config.max_stored_bytes)
    }

    /// Refuses (507) a command's pushes (`pushes`, in the order it applies them) when what they store
    /// ([`Self::stored_size`]), with `held` bytes kept for prepared parts, would take the stored bytes
    /// past the quota. `now`: the command's time; `None` for a prepared part, applied later.
    fn check_quota(&self, now: Option<i64>, pushes: &[&[PushItem]], held: u64) -> CoreResult<()> {
        let Some(max) = self.config.max_stored_bytes else {
            return Ok(());
        };
        let mut ahead = 0;
        let mut incoming = held;
        for items in pushes {
            incoming += self.stored_size(items, now.map(|now| (now, ahead)));
            ahead += items.len() as u64;
        }
        if self.stored_bytes.saturating_add(incoming) > max {
            return Err(CoreError::full(format!(
                "the broker is full: {} bytes stored, {incoming} more needed, quota (MAX_STORED_BYTES) \
                 {max}; messages keep their space, consumed or not, until retention (retentionSeconds or \
                 completedRetentionSeconds) or deleting their queue removes them",
                self.stored_bytes
            )));
        }
        Ok(())
    }

    /// The change set accumulated since the last call.
    pub fn take_changes(&mut self) -> ChangeSet {
        std::mem::take(&mut self.changes)
    }

    /// Queues that gained claimable work since the last call (to wake parked pops).
    pub fn take_woken_queues(&mut self) -> Vec<String> {
        std::mem::take(&mut self.woken)
    }

    /// Notes that `queue` gained claimable work (a short list: the queues one command touched).
    fn wake_queue(&mut self, queue: impl AsRef<str> + Into<String>) {
        if !self.woken.iter().any(|q| q == queue.as_ref()) {
            self.woken.push(queue.into());
        }
    }

    /// True when the last command must be rolled back by reloading from the store (a failed
    /// transaction that had already touched state).
    pub fn take_discard_flag(&mut self) -> bool {
        std::mem::take(&mut self.discard)
    }

    /// The earliest instant at which a lease expires, a retry hold ends or a delayed message comes due.
    pub fn next_deadline_ms(&self) -> Option<i64> {
        self.timers.next_at()
    }

    /// Clamps `now` so it never goes backwards, then fires every timer that is due.
    fn tick(&mut self, now: i64) -> i64 {
        self.now_ms = self.now_ms.max(now);
        let now = self.now_ms;
        #[cfg(feature = "views")]
        self.sample_history(now);
        while let Some((at, pid, group)) = self.timers.pop_due(now) {
            self.log_expiry(pid, &group, at);
            if let Some(queue) = self.partitions.get(&pid).map(|p| p.queue.clone()) {
                self.refresh(&queue, &group, pid);
                self.wake_queue(queue);
            }
        }
        now
    }

    /// Resolves a wire group name: absent or empty means queue mode.
    fn group_name(group: Option<&str>) -> String {
        match group {
            Some(g) if !g.is_empty() => g.to_string(),
            _ => QUEUE_MODE_GROUP.to_string(),
        }
    }

    /// The cursor a lane starts at for `group` on partition `pid` (from the group's subscription).
    fn initial_cursor(&self, pid: u64, group: &str) -> i64 {
        let Some(p) = self.partitions.get(&pid) else {
            return -1;
        };
        let floor = p.first_offset as i64 - 1;
        if group == QUEUE_MODE_GROUP {
            return floor;
        }
        match self
            .subscriptions
            .get(&(p.queue.clone(), group.to_string()))
            .and_then(|s| s.start_ms)
        {
            None => floor,
            Some(start) => p.last_offset_created_at_or_before(start).max(floor),
        }
    }

    /// The lane of `group` on `pid`, materialised from the subscription if it does not exist yet.
    fn lane_mut(&mut self, pid: u64, group: &str) -> Option<&mut Lane> {
        if !self.partitions.get(&pid)?.lanes.contains_key(group) {
            let cursor = self.initial_cursor(pid, group);
            let p = self.partitions.get_mut(&pid)?;
            p.lanes
                .insert(group.to_string(), Box::new(Lane::at(cursor)));
        }
        self.partitions
            .get_mut(&pid)?
            .lanes
            .get_mut(group)
            .map(|l| &mut **l)
    }

    /// Re-evaluates whether lane (pid, group) belongs in its ready set, and arms its timer.
    fn refresh(&mut self, queue: &str, group: &str, pid: u64) {
        let now = self.now_ms;
        let key = (queue.to_string(), group.to_string());
        if !self.groups.contains_key(&key) {
            return;
        }
        let Some(p) = self.partitions.get(&pid) else {
            return;
        };
        let lane_state = p
            .lanes
            .get(group)
            .map(|l| (**l).clone())
            .unwrap_or_else(|| Lane::at(self.initial_cursor(pid, group)));
        let has_backlog = lane_state.committed() + 1 < p.next_offset as i64;
        // A pinned lease (module `prepared`) waits for its transaction's end, not for a time: the
        // commit or abort refreshes the lane.
        let pinned = lane_state.is_pinned();
        let wait_until = if pinned {
            None
        } else if lane_state.is_leased(now) {
            Some(lane_state.lease_expires_ms())
        } else if lane_state.is_held(now) {
            Some(lane_state.hold_until_ms())
        } else {
            None
        };
        if let Some(at) = wait_until {
            self.timers.insert((at, pid, group.to_string()));
        }
        let ready = has_backlog && wait_until.is_none() && !pinned;
        let seq = self.ready_seq;
        let set = self.groups.get_mut(&key).expect("checked above");
        if ready {
            if set.insert(pid, seq) {
                self.ready_seq += 1;
            }
        } else {
            set.remove(pid);
        }
    }

    /// Builds the ready set of (queue, group) if it does not exist (once per group and load).
    fn ensure_group_index(&mut self, queue: &str, group: &str) {
        let key = (queue.to_string(), group.to_string());
        if self.groups.contains_key(&key) {
            return;
        }
        self.groups.insert(key, Box::default());
        let pids: Vec<u64> = self
            .queues
            .get(queue)
            .map(|q| q.partitions.values().map(|pid| **pid).collect())
            .unwrap_or_default();
        for pid in pids {
            self.refresh(queue, group, pid);
        }
    }

    /// Records a lease id as holding lane (pid, group).
    fn index_lease(&mut self, lease_id: &str, pid: u64, group: &str) {
        self.leases
            .entry(lease_id.to_string())
            .or_default()
            .push((pid, group.to_string()));
    }

    /// Forgets that `lease_id` holds lane (pid, group).
    fn unindex_lease(&mut self, lease_id: &str, pid: u64, group: &str) {
        if let Some(list) = self.leases.get_mut(lease_id) {
            list.retain(|(p, g)| !(*p == pid && g == group));
            if list.is_empty() {
                self.leases.remove(lease_id);
            }
        }
    }

    /// Takes lane (pid, group)'s lease out of the lease index, before a transition that releases it
    /// (`seek`) or the lane's removal.
    fn release_lane(&mut self, pid: u64, group: &str) {
        let old = self
            .partitions
            .get(&pid)
            .and_then(|p| p.lanes.get(group))
            .and_then(|l| l.lease_id().map(str::to_string));
        if let Some(old) = old {
            self.unindex_lease(&old, pid, group);
        }
    }
}

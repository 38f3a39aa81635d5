//! Moving one queue's stored records to another broker, with ids that route there: the record half of
//! the Worker's shard migration (`worker/src/reshard.rs` drives it; docs/decisions.md "Resharding").
//!
//! A queue's records (the key table of module `records`) are `q/<queue>`, `g/<queue>/<group>`, its
//! partitions `p/<pid>` with their segments `s/<pid>/*`, index entries `x/<pid>/*` and lanes
//! `l/<pid>/*`, its dead letters `d/<id>`, delivery records `v/<seq>`, traces `t/<seq>/<pid>/<offset>`
//! and buffered push items `b/<seq>`. [`Survey`] reads what a store holds (which queues, which ids and
//! sequence numbers are taken, live leases, migration markers); [`select`] picks one queue's records;
//! [`import`] rewrites them for a target store into one change set, with a marker record
//! (`r/<plan>/<queue>`) that says the queue arrived; [`drop_keys`] deletes them at the source.
//!
//! Rewriting, so that every id a client may send back routes to the target shard:
//! - a partition keeps its id when `(id - 1) % count` already names the target and the target holds no
//!   partition with that id; otherwise it gets the target's next id at or above the migration's floor
//!   (above every partition id any old shard ever minted, so a stale id never names a new partition);
//! - a dead letter keeps its id when its last four hex digits already route to the target; otherwise
//!   those four digits are replaced by the target's index (the rest of the UUIDv7, its time, stays);
//! - delivery records, traces, dead-letter filing order and buffered items are renumbered after the
//!   target's own, in their old order;
//! - queue, group, lane and message contents are copied unchanged (message and queue ids do not route).
//!
//! A store holding a record kind this module does not know is refused ([`Survey::of`]): a migration
//! never leaves records it does not understand behind on the wrong shard.

use super::ids::ShardTag;
use super::maintenance::{BUFFER_PREFIX, MODE_KEY};
use super::pages::{decode_index_record, segment_past_a_gap, segments_from};
use super::records::{
    dead_letter, dead_letter_key, decode, esc, format_bytes, index_entry_key, json, lane,
    parse_pid, parse_segment_key, partition_key, partition_record, queue_record, read_format,
    segment_key, unesc, FORMAT_VERSION,
};
use super::traces::trace_key;
use crate::store::{ChangeSet, Record, Store, StoreError, StoreErrorKind};
use std::collections::{BTreeMap, BTreeSet};

/// The prefix of migration markers.
pub const MARKER_PREFIX: &str = "r/";

/// The prefixes a migration reads: every record kind but segments (read per partition), markers, and
/// prepared two-phase transactions (`w/`, which it refuses to move).
pub const SURVEY_PREFIXES: [&str; 12] = [
    "m/",
    "q/",
    "p/",
    "x/",
    "l/",
    "g/",
    "d/",
    "v/",
    "t/",
    "b/",
    "w/",
    MARKER_PREFIX,
];

/// The key of the marker that says `queue` arrived in this store during migration `plan`.
pub fn marker_key(plan: &str, queue: &str) -> String {
    format!("{MARKER_PREFIX}{}/{}", esc(plan), esc(queue))
}

/// The (plan, queue) a marker key names.
fn parse_marker_key(key: &str) -> Option<(String, String)> {
    let rest = key.strip_prefix(MARKER_PREFIX)?;
    let (plan, queue) = rest.split_once('/')?;
    Some((unesc(plan), unesc(queue)))
}

/// What one stored record is, as far as a migration cares.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// `m/format` or `m/mode`: the store's own, never moved with a queue.
    Broker,
    /// A record of this queue.
    Of(String),
    /// A record of partition `pid` (its queue is known once the `p/` records are read).
    OfPartition(u64),
    /// A trace about a message of partition `pid`: a partition deleted since leaves its traces until
    /// maintenance prunes them, so one without its partition belongs to no queue.
    Trace(u64),
    /// A marker of a migration.
    Marker(String, String),
}

fn unreadable(key: &str, what: impl std::fmt::Display) -> StoreError {
    super::records::unreadable(key, &what)
}

/// The queue a record whose value names it (`queue` field) belongs to.
fn queue_field(key: &str, value: &[u8]) -> Result<String, StoreError> {
    super::fields::Fields::read(value, |f| f.string("queue")).map_err(|e| unreadable(key, e))
}

fn classify(key: &str, value: &[u8]) -> Result<Kind, StoreError> {
    let (prefix, rest) = key.split_once('/').unwrap_or((key, ""));
    Ok(match prefix {
        "m" if key == "m/format" || key == MODE_KEY => Kind::Broker,
        "q" => Kind::Of(unesc(rest)),
        "g" => Kind::Of(unesc(rest.split('/').next().unwrap_or(""))),
        "p" | "l" => Kind::OfPartition(parse_pid(key)?),
        "s" | "x" => Kind::OfPartition(
            parse_segment_key(key)
                .ok_or_else(|| unreadable(key, "bad key"))?
                .0,
        ),
        "t" => Kind::Trace(
            rest.split('/')
                .nth(1)
                .and_then(|h| u64::from_str_radix(h, 16).ok())
                .ok_or_else(|| unreadable(key, "bad key"))?,
        ),
        "d" | "v" | "b" => Kind::Of(queue_field(key, value)?),
        "r" => {
            let (plan, queue) = parse_marker_key(key).ok_or_else(|| unreadable(key, "bad key"))?;
            Kind::Marker(plan, queue)
        }
        "w" => {
            return Err(StoreError::other(format!(
                "a prepared cross-shard transaction is stored (\"{key}\"): its coordinator must commit \
                 or abort it first, which needs the broker open. Set SHARDS back to the old count until it \
                 is finished (it aborts by itself after TXN_TIMEOUT_MS), then migrate; nothing was moved"
            )))
        }
        _ => {
            return Err(StoreError::other(format!(
                "stored record \"{key}\" is of a kind the shard migration does not know; \
                 nothing was moved"
            )))
        }
    })
}

/// The partition -> queue map of `records` (from the `p/` records).
fn partition_queues(records: &[Record]) -> Result<BTreeMap<u64, String>, StoreError> {
    let mut out = BTreeMap::new();
    for (key, value) in records.iter().filter(|(k, _)| k.starts_with("p/")) {
        let p = decode(key, value, partition_record)?;
        out.insert(p.id, p.queue);
    }
    Ok(out)
}

/// A record, the queue it belongs to (`None`: the store's own records and markers) and its kind.
type Owned<'a> = (&'a Record, Option<String>, Kind);

/// Each record with the queue it belongs to.
fn owners(records: &[Record]) -> Result<Vec<Owned<'_>>, StoreError> {
    let pids = partition_queues(records)?;
    let mut out = Vec::with_capacity(records.len());
    for record in records {
        let kind = classify(&record.0, &record.1)?;
        let owner = match &kind {
            Kind::Of(q) => Some(q.clone()),
            Kind::OfPartition(pid) => Some(pids.get(pid).cloned().ok_or_else(|| {
                StoreError::other(format!(
                    "storage is damaged: record \"{}\" names partition {pid}, which is not stored",
                    record.0
                ))
            })?),
            Kind::Trace(pid) => pids.get(pid).cloned(),
            Kind::Broker | Kind::Marker(..) => None,
        };
        out.push((record, owner, kind));
    }
    Ok(out)
}

/// What a store holds, for a migration: read from its [`SURVEY_PREFIXES`] records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Survey {
    /// Every queue with a record here (a queue record, or only buffered push items), and the latest
    /// lease expiry of each of its lanes that holds a lease.
    pub queues: BTreeMap<String, Vec<i64>>,
    /// Queues each migration plan has marked as arrived here.
    pub markers: BTreeMap<String, BTreeSet<String>>,
    /// The `m/format` version (`None`: no record, a store never opened).
    pub format_version: Option<u32>,
    /// Above every partition id stored or ever minted here.
    pub next_partition_id: u64,
    /// Partition ids stored.
    pub partitions: BTreeSet<u64>,
    /// Dead-letter ids stored.
    pub dead_letters: BTreeSet<String>,
    /// Next free delivery-record, trace, buffered-item and dead-letter filing number.
    pub next_seq: Seqs,
    /// The `m/mode` record (maintenance switches), when stored.
    pub mode: Option<Vec<u8>>,
    /// The (namespace, task) labels of each queue's record and buffered items (discovery's catalog).
    pub labels: BTreeMap<String, BTreeSet<(String, String)>>,
}

/// The next free sequence numbers of the numbered record kinds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Seqs {
    /// `v/<seq>`.
    pub delivery: u64,
    /// `t/<seq>/...`.
    pub trace: u64,
    /// `b/<seq>`.
    pub buffer: u64,
    /// A dead letter's `seq` (filing order).
    pub dead_letter: u64,
}

fn hex_seq(key: &str) -> Option<u64> {
    key.split('/')
        .nth(1)
        .and_then(|h| u64::from_str_radix(h, 16).ok())
}

impl Survey {
    /// Reads `records` (keys under [`SURVEY_PREFIXES`], any order).
    pub fn of(records: &[Record]) -> Result<Survey, StoreError> {
        let mut s = Survey {
            next_partition_id: 1,
            ..Survey::default()
        };
        for (record, owner, kind) in owners(records)? {
            let (key, value) = record;
            if let Some(q) = &owner {
                s.queues.entry(q.clone()).or_default();
            }
            match key.split('/').next().unwrap_or("") {
                "m" if key == "m/format" => {
                    let (version, next) = read_format(key, value)?;
                    s.format_version = Some(version);
                    s.next_partition_id = s.next_partition_id.max(next);
                }
                "m" => s.mode = Some(value.clone()),
                "q" => {
                    let record = decode(key, value, queue_record)?;
                    s.labels
                        .entry(record.name)
                        .or_default()
                        .insert((record.namespace, record.task));
                }
                "b" => {
                    if let (Some(q), Some(label)) = (&owner, buffered_labels(key, value)?) {
                        s.labels.entry(q.clone()).or_default().insert(label);
                    }
                    s.next_seq.buffer = s.next_seq.buffer.max(next_of(key)?);
                }
                "p" => {
                    let pid = parse_pid(key)?;
                    s.partitions.insert(pid);
                    s.next_partition_id = s.next_partition_id.max(pid + 1);
                }
                "l" => {
                    let l = decode(key, value, lane)?;
                    if l.lease_id().is_some() {
                        if let Some(q) = &owner {
                            s.queues
                                .entry(q.clone())
                                .or_default()
                                .push(l.lease_expires_ms());
                        }
                    }
                }
                "d" => {
                    let d = decode(key, value, dead_letter)?;
                    s.next_seq.dead_letter = s.next_seq.dead_letter.max(d.seq + 1);
                    s.dead_letters.insert(d.id);
                }
                "v" => s.next_seq.delivery = s.next_seq.delivery.max(next_of(key)?),
                "t" => s.next_seq.trace = s.next_seq.trace.max(next_of(key)?),
                _ => {}
            }
            if let Kind::Marker(plan, queue) = kind {
                s.markers.entry(plan).or_default().insert(queue);
            }
        }
        Ok(s)
    }

    /// The queues here that migration `plan` has still to move (those it has not marked as arrived).
    pub fn pending(&self, plan: &str) -> Vec<String> {
        let arrived = self.markers.get(plan);
        self.queues
            .keys()
            .filter(|q| arrived.is_none_or(|a| !a.contains(*q)))
            .cloned()
            .collect()
    }

    /// The queues migration `plan` has marked as arrived here.
    pub fn arrived(&self, plan: &str) -> Vec<String> {
        self.markers
            .get(plan)
            .map(|m| m.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Leases on the queues `plan` has still to move that have not expired at `now_ms`: how many, and
    /// when the last of them expires.
    pub fn live_leases(&self, plan: &str, now_ms: i64) -> (u64, i64) {
        let arrived = self.markers.get(plan);
        let live: Vec<i64> = self
            .queues
            .iter()
            .filter(|(q, _)| arrived.is_none_or(|a| !a.contains(*q)))
            .flat_map(|(_, leases)| leases.iter().copied())
            .filter(|expires| *expires > now_ms)
            .collect();
        (live.len() as u64, live.iter().copied().max().unwrap_or(0))
    }

    /// Refuses a store of an older record format (its segments have no index entries to move, or not in
    /// pages), and of a newer one ([`StoreErrorKind::NewerFormat`]: this build would misread its records,
    /// as a format 2 build names one segment per index page and none past the pages).
    pub fn check_format(&self) -> Result<(), StoreError> {
        match self.format_version {
            Some(v) if v < FORMAT_VERSION => Err(StoreError::other(format!(
                "this shard's data is in record format {v}: open the broker once with its old SHARDS on \
                 this build (which upgrades it to format {FORMAT_VERSION}), then migrate"
            ))),
            Some(v) if v > FORMAT_VERSION => Err(StoreError::new(
                StoreErrorKind::NewerFormat,
                format!(
                    "this shard's data is in record format {v}, newer than this build understands \
                     ({FORMAT_VERSION}): migrate with the build that wrote it"
                ),
            )),
            _ => Ok(()),
        }
    }
}

/// The (namespace, task) a buffered push item names, when it names either.
fn buffered_labels(key: &str, value: &[u8]) -> Result<Option<(String, String)>, StoreError> {
    let (namespace, task) =
        super::fields::Fields::read(value, |f| (f.opt_string("namespace"), f.opt_string("task")))
            .map_err(|e| unreadable(key, e))?;
    Ok((namespace.is_some() || task.is_some())
        .then(|| (namespace.unwrap_or_default(), task.unwrap_or_default())))
}

fn next_of(key: &str) -> Result<u64, StoreError> {
    hex_seq(key)
        .map(|s| s + 1)
        .ok_or_else(|| unreadable(key, "bad key"))
}

/// The records of `queue` among `records` (keys under [`SURVEY_PREFIXES`]), in key order, and the keys
/// of its indexed segments (`s/`, one per retained index entry: read them to export, delete them to
/// drop). Segments whose entries are in no index page yet are not named: [`indexed_ends`] says where
/// they start.
pub fn select(records: &[Record], queue: &str) -> Result<(Vec<Record>, Vec<String>), StoreError> {
    let mut mine = Vec::new();
    for (record, owner, _) in owners(records)? {
        if owner.as_deref() == Some(queue) {
            mine.push(record.clone());
        }
    }
    mine.sort_by(|a, b| a.0.cmp(&b.0));
    let segments = retained_entries(&mine)?
        .into_iter()
        .map(|(pid, first, _)| segment_key(pid, first))
        .collect();
    Ok((mine, segments))
}

/// (partition, first offset, last offset) of every index entry among `records` (one queue's, in key
/// order) whose segment is retained (entries of segments retention deleted stay in their page until its
/// last segment goes: module `pages`).
fn retained_entries(records: &[Record]) -> Result<Vec<(u64, u64, u64)>, StoreError> {
    let mut first_offsets = BTreeMap::new();
    for (key, value) in records.iter().filter(|(k, _)| k.starts_with("p/")) {
        let p = decode(key, value, partition_record)?;
        first_offsets.insert(p.id, p.first_offset);
    }
    let mut out = Vec::new();
    for (key, value) in records.iter().filter(|(k, _)| k.starts_with("x/")) {
        let (pid, _) = parse_segment_key(key).ok_or_else(|| unreadable(key, "bad key"))?;
        let floor = first_offsets.get(&pid).copied().unwrap_or(0);
        for entry in decode_index_record(key, value)? {
            if entry.meta.last >= floor {
                out.push((pid, entry.meta.first, entry.meta.last));
            }
        }
    }
    Ok(out)
}

/// Where each partition of one queue's `records` ([`select`]'s) ends as its index pages say: the key a
/// segment pushed after the last page would have, with the partition id. Such segments are stored
/// (a crash came before their page was written): a migration reads them from there, one key after
/// another ([`unpaged_segments`]), and moves them with the rest; the target's open indexes them.
fn indexed_ends(records: &[Record]) -> Result<Vec<(u64, u64)>, StoreError> {
    let mut ends = BTreeMap::new();
    for (key, value) in records.iter().filter(|(k, _)| k.starts_with("p/")) {
        let p = decode(key, value, partition_record)?;
        ends.insert(p.id, p.first_offset);
    }
    for (pid, _, last) in retained_entries(records)? {
        let end = ends.entry(pid).or_insert(0);
        *end = (*end).max(last + 1);
    }
    Ok(ends.into_iter().collect())
}

/// The segments of one queue (`mine`, its records as [`select`] gave them) that no index page names
/// yet, with their values: stored right after their partition's indexed end ([`indexed_ends`]), one
/// after another (module `pages`). A migration moves and drops them with the others. A segment stored
/// past the first absent key of its partition is damage, an error (as at open): moved without the
/// segments before it, the partition would arrive cut short.
pub async fn unpaged_segments<S: Store>(
    store: &S,
    mine: &[Record],
) -> Result<Vec<Record>, StoreError> {
    let mut found = Vec::new();
    let mut ends = indexed_ends(mine)?;
    let mut absent = Vec::with_capacity(ends.len());
    while !ends.is_empty() {
        let keys: Vec<String> = ends.iter().map(|(p, o)| segment_key(*p, *o)).collect();
        let values = store.get(&keys).await?;
        let mut next = Vec::new();
        for ((pid, end), (key, value)) in ends.into_iter().zip(keys.into_iter().zip(values)) {
            match value {
                Some(bytes) => {
                    next.push((pid, segment_end(&key, &bytes)?));
                    found.push((key, bytes));
                }
                None => absent.push((pid, end)),
            }
        }
        ends = next;
    }
    let ranges: Vec<_> = absent.iter().map(|(p, o)| segments_from(*p, *o)).collect();
    let stored = store.first_keys(&ranges).await?;
    if let Some(((pid, end), Some(key))) = absent.iter().zip(stored).find(|(_, k)| k.is_some()) {
        let partition = format!("partition {pid}");
        return Err(segment_past_a_gap(&partition, *pid, *end, &key));
    }
    Ok(found)
}

/// The offset after the last message of a stored segment (`key` names it, for errors).
fn segment_end(key: &str, bytes: &[u8]) -> Result<u64, StoreError> {
    let messages = super::segment::decode(bytes).map_err(|e| unreadable(key, e))?;
    messages
        .last()
        .map(|m| m.offset + 1)
        .ok_or_else(|| unreadable(key, "segment holds no messages"))
}

/// The keys that [`drop_keys`] deletes: `records` and `segments` as [`select`] gave them.
pub fn drop_keys(records: &[Record], segments: &[String]) -> ChangeSet {
    let mut changes = ChangeSet::default();
    for (key, _) in records {
        changes.delete(key.clone());
    }
    for key in segments {
        changes.delete(key.clone());
    }
    changes
}

/// Where a queue goes: the target's shard and the migration's partition id floor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Destination {
    /// The target shard (its index among the new count).
    pub shard: ShardTag,
    /// New partition ids are at least this (above every id the old shards minted).
    pub partition_floor: u64,
}

/// What [`import`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imported {
    /// The records to commit in the target, marker included, in one commit.
    pub changes: ChangeSet,
    /// Old and new partition ids.
    pub partitions: Vec<(u64, u64)>,
    /// Dead letters moved, and how many of them got a new id.
    pub dead_letters: (u64, u64),
}

/// Rewrites `records` (one queue's, with its segments: [`select`] plus their values) for the store
/// `target` surveys, as shard `to.shard`, marking them as moved by migration `plan` from shard
/// `source`. `target` must not hold the queue (a same-store move surveys the store without it).
pub fn import(
    records: &[Record],
    queue: &str,
    target: &Survey,
    to: Destination,
    plan: &str,
    source: u16,
) -> Result<Imported, StoreError> {
    target.check_format()?;
    if target.queues.contains_key(queue) {
        return Err(StoreError::other(format!(
            "queue \"{queue}\" is stored on the target shard already, and no migration marker says it \
             arrived there: the broker's data is inconsistent; nothing was moved"
        )));
    }
    let tag = to.shard;
    let count = tag.count.max(1);
    let mut out = ChangeSet::default();
    let mut next_pid = target.next_partition_id.max(to.partition_floor).max(1);
    let mut pid_map: BTreeMap<u64, u64> = BTreeMap::new();
    // Partitions first: everything else names them.
    for (key, value) in records.iter().filter(|(k, _)| k.starts_with("p/")) {
        let mut p = decode(key, value, partition_record)?;
        if p.queue != queue {
            return Err(StoreError::other(format!(
                "record \"{key}\" is not of queue \"{queue}\""
            )));
        }
        let routes = ShardTag::shard_of_partition(&p.id.to_string(), count) == Some(tag.index);
        let new = if routes && !target.partitions.contains(&p.id) {
            p.id
        } else {
            let id = tag.next_partition_id(next_pid);
            next_pid = id + 1;
            id
        };
        pid_map.insert(p.id, new);
        p.id = new;
        out.put(partition_key(new), json(&p));
    }
    let highest = pid_map.values().copied().max().unwrap_or(0);
    let next_partition_id = target
        .next_partition_id
        .max(to.partition_floor)
        .max(highest + 1);
    let new_pid = |key: &str, pid: u64| -> Result<u64, StoreError> {
        pid_map.get(&pid).copied().ok_or_else(|| {
            StoreError::other(format!(
                "record \"{key}\" names partition {pid}, which the queue's records do not hold"
            ))
        })
    };
    let mut seqs = target.next_seq;
    // Dead letters keep their filing order: renumber them in old `seq` order.
    let mut letters = Vec::new();
    for (key, value) in records.iter().filter(|(k, _)| k.starts_with("d/")) {
        letters.push(decode(key, value, dead_letter)?);
    }
    letters.sort_by_key(|d| d.seq);
    let old_ids: BTreeSet<String> = letters.iter().map(|d| d.id.clone()).collect();
    let mut new_ids = BTreeSet::new();
    let mut renamed = 0;
    let letter_count = letters.len() as u64;
    for mut d in letters {
        let routes = count == 1 || ShardTag::shard_of_uuid(&d.id, count) == Some(tag.index);
        let id = if routes && !target.dead_letters.contains(&d.id) {
            d.id.clone()
        } else {
            let Some(stem) =
                d.id.get(..d.id.len().saturating_sub(4))
                    .filter(|_| d.id.len() == 36)
            else {
                return Err(StoreError::other(format!(
                    "dead letter \"{}\" has no UUID id to give a shard",
                    d.id
                )));
            };
            renamed += 1;
            format!("{stem}{:04x}", tag.index)
        };
        if target.dead_letters.contains(&id)
            || (id != d.id && old_ids.contains(&id))
            || !new_ids.insert(id.clone())
        {
            return Err(StoreError::other(format!(
                "dead letter \"{}\" would take id \"{id}\", which the target holds; nothing was moved",
                d.id
            )));
        }
        d.partition_id = new_pid(&format!("d/{}", d.id), d.partition_id)?;
        d.id = id;
        d.seq = seqs.dead_letter;
        seqs.dead_letter += 1;
        out.put(dead_letter_key(&d.id), json(&d));
    }
    // The rest, in key order (numbered kinds in their old order).
    for (key, value) in records {
        let (prefix, rest) = key.split_once('/').unwrap_or((key, ""));
        match prefix {
            "p" | "d" => {}
            "q" | "g" => out.put(key.clone(), value.clone()),
            "s" | "x" => {
                let (pid, first) =
                    parse_segment_key(key).ok_or_else(|| unreadable(key, "bad key"))?;
                let pid = new_pid(key, pid)?;
                let new_key = if prefix == "s" {
                    segment_key(pid, first)
                } else {
                    index_entry_key(pid, first)
                };
                out.put(new_key, value.clone());
            }
            "l" => {
                let pid = new_pid(key, parse_pid(key)?)?;
                let group = rest.split_once('/').map_or("", |(_, g)| g);
                out.put(format!("l/{pid:016x}/{group}"), value.clone());
            }
            "v" => {
                let mut record = decode(key, value, super::deliveries::read_delivery)?;
                record.partition_id = new_pid(key, record.partition_id)?;
                record.seq = seqs.delivery;
                seqs.delivery += 1;
                out.put(super::deliveries::delivery_key(record.seq), json(&record));
            }
            "t" => {
                let mut parts = rest.split('/').skip(1);
                let mut next = || parts.next().and_then(|h| u64::from_str_radix(h, 16).ok());
                let (Some(pid), Some(offset)) = (next(), next()) else {
                    return Err(unreadable(key, "bad key"));
                };
                out.put(
                    trace_key(seqs.trace, new_pid(key, pid)?, offset),
                    value.clone(),
                );
                seqs.trace += 1;
            }
            "b" => {
                out.put(
                    format!("{BUFFER_PREFIX}{:016x}", seqs.buffer),
                    value.clone(),
                );
                seqs.buffer += 1;
            }
            _ => {
                return Err(StoreError::other(format!(
                    "record \"{key}\" cannot be moved with a queue"
                )))
            }
        }
    }
    out.put("m/format", format_bytes(next_partition_id));
    let partitions: Vec<(u64, u64)> = pid_map.into_iter().collect();
    let marker = serde_json::json!({
        "source": source,
        "partitions": partitions,
        "deadLetters": letter_count,
    });
    out.put(
        marker_key(plan, queue),
        serde_json::to_vec(&marker).expect("json"),
    );
    Ok(Imported {
        changes: out,
        partitions,
        dead_letters: (letter_count, renamed),
    })
}

/// Encodes records as one byte string: per record, the key's length (u32 big-endian), the key, the
/// value's length (u32 big-endian), the value.
pub fn encode_records(records: &[Record]) -> Vec<u8> {
    let size = records.iter().map(|(k, v)| 8 + k.len() + v.len()).sum();
    let mut out = Vec::with_capacity(size);
    for (key, value) in records {
        out.extend_from_slice(&(key.len() as u32).to_be_bytes());
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(&(value.len() as u32).to_be_bytes());
        out.extend_from_slice(value);
    }
    out
}

/// Reads what [`encode_records`] wrote; `Err` when the bytes are cut short or a key is not UTF-8.
pub fn decode_records(mut bytes: &[u8]) -> Result<Vec<Record>, String> {
    fn take<'a>(bytes: &mut &'a [u8], n: usize) -> Result<&'a [u8], String> {
        if bytes.len() < n {
            return Err("record bundle is cut short".to_string());
        }
        let (head, tail) = bytes.split_at(n);
        *bytes = tail;
        Ok(head)
    }
    fn length(bytes: &mut &[u8]) -> Result<usize, String> {
        let raw = take(bytes, 4)?;
        Ok(u32::from_be_bytes(raw.try_into().expect("4 bytes")) as usize)
    }
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let n = length(&mut bytes)?;
        let key = std::str::from_utf8(take(&mut bytes, n)?)
            .map_err(|_| "record bundle holds a key that is not UTF-8".to_string())?
            .to_string();
        let n = length(&mut bytes)?;
        out.push((key, take(&mut bytes, n)?.to_vec()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundles_round_trip_and_refuse_a_cut() {
        let records = vec![
            ("q/a".to_string(), b"{}".to_vec()),
            (
                "s/0000000000000001/0000000000000000".to_string(),
                vec![0, 1, 2, 255],
            ),
            ("g/a/".to_string(), Vec::new()),
        ];
        let bytes = encode_records(&records);
        assert_eq!(decode_records(&bytes).unwrap(), records);
        assert!(decode_records(&bytes[..bytes.len() - 1]).is_err());
    }

    #[test]
    fn unknown_record_kinds_are_refused() {
        let e = Survey::of(&[("z/1".to_string(), Vec::new())]).unwrap_err();
        assert!(e.message.contains("does not know"), "{}", e.message);
        assert_eq!(
            parse_marker_key(&marker_key("p1", "a/b")),
            Some(("p1".to_string(), "a/b".to_string()))
        );
    }
}

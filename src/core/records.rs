//! How the core's state maps to store records, and how it is rebuilt from them (docs/protocol.md §6).
//!
//! Keys sort: numbers are 16 hex digits, big-endian. Names are escaped (`%` and `/`) so a name can never
//! spill into the next key component.
//!
//! | key | value |
//! |---|---|
//! | `m/format` | `{"version":1,"nextPartitionId":n}` |
//! | `q/<queue>` | queue record (JSON) |
//! | `p/<pid>` | partition record (JSON) |
//! | `s/<pid>/<first offset>` | segment (see [`super::segment`]): read on demand, never at open |
//! | `x/<pid>/<first offset>` | that segment's index entry (binary, below): read at open |
//! | `l/<pid>/<group>` | lane (JSON) |
//! | `g/<queue>/<group>` | subscription (JSON) |
//! | `d/<dead-letter id>` | dead letter (JSON) |
//! | `v/<seq>` | delivery record (JSON, module `deliveries`) |
//! | `m/mode` | maintenance switches and push-buffer bounds (module `maintenance`) |
//! | `b/<seq>` | one buffered push item (module `maintenance`) |
//! | `t/<seq>/<pid>/<offset>` | one trace event (module `traces`): only the key is read at open |
//! | `w/<transaction id>` | a prepared transaction part (module `prepared`, builds with `twophase`) |
//!
//! A segment's index entry (binary, below) is stored in an index page: one record `x/<pid>/<first>` holding
//! the entries of several consecutive segments of the partition, `<first>` the first offset of the first
//! segment it was written with (module `pages`). A push commits its segment alone; the entries of a
//! partition's last [`pages::ENTRIES_PER_PAGE`] segments are written together as one page when the last of
//! them is pushed, or earlier in maintenance. A segment whose page is not written yet (a crash came first)
//! is found at open where the partition's indexed end says the next segment would be, and indexed from its
//! own bytes (module `pages`).
//!
//! ```text
//! page:   byte 0 = 3 (page version), then per entry: first offset u64 LE, entry length u32 LE, the entry
//! entry:  byte 0       2 (entry version)
//!         bytes 1..9   last offset, u64 little-endian
//!         bytes 9..13  segment number in its partition, u32 LE
//!         bytes 13..21 push time, i64 LE (Unix ms)
//!         bytes 21..25 bytes of the stored segment, u32 LE
//!         byte 25      flags: bit 0 = the segment waits for compression (module `segment`)
//!         bytes 26..   one u32 LE transaction-id fingerprint per message (module `txindex`), in offset order
//! ```
//!
//! Record format 2 stored one entry per record (the entry itself, its first offset in the key); such
//! records are read as pages of one. Entry version 1 (written before segments were compressed in
//! maintenance) is version 2 without the flags byte (fingerprints from byte 25): its segment waits for
//! nothing. All are read. A page may keep the entries of segments retention deleted since (their last
//! offset is below the partition's first offset): they are skipped at open, and the page goes with the
//! last of its segments.
//!
//! Format version 1 stored no index entries; opening it reads every segment once and writes them
//! ([`Broker::load`] puts them in the pending change set, with this format version).
//!
//! Opening reads every prefix but `s/` ([`INDEX_PREFIXES`]); memory then holds everything but message
//! bytes, so open time and memory grow with partitions, lanes, dead letters and segments, plus the 8
//! bytes a message of the transaction-id index.
use super::api::{DeliveryLogMode, QueueOptions};
use super::fields::Fields;
use super::segment;
use super::state::*;
use super::txindex;
use super::Broker;
use crate::store::{Record, StoreError, StoreErrorKind};
use serde::Serialize;

/// The record format this build writes (3: index entries in pages, a push's commit writes its segment
/// alone). Format 2 wrote one index entry per segment in the segment's commit; format 1 none.
pub const FORMAT_VERSION: u32 = 3;

/// The first record format with index entries: older data has its segments read once at open.
const FIRST_INDEXED_FORMAT: u32 = 2;

/// The key prefixes an open reads: everything but segments.
#[cfg(not(feature = "twophase"))]
pub const INDEX_PREFIXES: [&str; 10] = ["m/", "q/", "p/", "x/", "l/", "g/", "d/", "v/", "t/", "b/"];
/// The key prefixes an open reads: everything but segments (and prepared transactions, `w/`).
#[cfg(feature = "twophase")]
pub const INDEX_PREFIXES: [&str; 11] = [
    "m/", "q/", "p/", "x/", "l/", "g/", "d/", "v/", "t/", "b/", "w/",
];

/// The prefix of segment records, read on demand.
pub const SEGMENT_PREFIX: &str = "s/";

/// The index entry version this build writes, and the one before it (read, never written).
const INDEX_ENTRY_VERSION: u8 = 2;
const INDEX_ENTRY_V1: u8 = 1;
/// Bytes before the fingerprints, by entry version.
const INDEX_ENTRY_HEADER: usize = 26;
const INDEX_ENTRY_V1_HEADER: usize = 25;
/// Flag bit of an index entry: its segment is JSON text waiting for compression in maintenance.
const FLAG_COMPRESS_PENDING: u8 = 1;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FormatRecord {
    version: u32,
    next_partition_id: u64,
}

/// `name` with `%` written `%25` and `/` written `%2F`, so a name is one segment of a key.
pub(super) fn esc(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    push_escaped(&mut out, name);
    out
}

/// Appends [`esc`]`(name)` to `key`.
fn push_escaped(key: &mut String, name: &str) {
    for c in name.chars() {
        match c {
            '%' => key.push_str("%25"),
            '/' => key.push_str("%2F"),
            c => key.push(c),
        }
    }
}

pub(super) fn queue_key(name: &str) -> String {
    format!("q/{}", esc(name))
}
pub(super) fn partition_key(pid: u64) -> String {
    numbered_key("p/", &[pid], "")
}

/// `start`, then each of `numbers` as 16 lower-case hex digits (as `{n:016x}` writes them) followed by a
/// `/` but the last, then `end`: the keys an open writes for every partition and segment it indexes,
/// without the formatter's padding machinery.
fn numbered_key(start: &str, numbers: &[u64], end: &str) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut key = String::with_capacity(start.len() + numbers.len() * 17 + end.len());
    key.push_str(start);
    for (i, n) in numbers.iter().enumerate() {
        if i > 0 {
            key.push('/');
        }
        for shift in (0..16).rev() {
            key.push(char::from(DIGITS[(n >> (shift * 4) & 0xf) as usize]));
        }
    }
    key.push_str(end);
    key
}
/// True when `records` (the index prefixes) hold format 1 data, whose segments have no index entries
/// yet: the open must read the segments once to write them.
pub fn needs_segment_upgrade(records: &[Record]) -> bool {
    let version = records
        .iter()
        .find(|(k, _)| k == "m/format")
        .and_then(|(k, v)| decode(k, v, format_record).ok())
        .map(|f| f.version);
    match version {
        Some(v) => v < FIRST_INDEXED_FORMAT,
        None => records.iter().any(|(k, _)| k.starts_with("p/")),
    }
}

/// The key of segment (pid, first).
pub fn segment_key(pid: u64, first: u64) -> String {
    numbered_key("s/", &[pid, first], "")
}
/// The prefix of partition `pid`'s segment keys.
pub fn partition_segment_prefix(pid: u64) -> String {
    numbered_key("s/", &[pid], "/")
}
/// The key of segment (pid, first)'s index entry.
pub fn index_entry_key(pid: u64, first: u64) -> String {
    numbered_key("x/", &[pid, first], "")
}

/// The (pid, first offset) a segment or index entry key names.
pub fn parse_segment_key(key: &str) -> Option<(u64, u64)> {
    let pid = u64::from_str_radix(key_field(key, 1)?, 16).ok()?;
    let first = u64::from_str_radix(key_field(key, 2)?, 16).ok()?;
    Some((pid, first))
}

/// The `n`th '/'-separated field of `key`, as `key.split('/').nth(n)` answers it, by `split_once`:
/// `Iterator::nth` over a `Split` is a function of 0.5 KB in the browser module.
fn key_field(key: &str, n: usize) -> Option<&str> {
    let mut rest = key;
    for _ in 0..n {
        rest = rest.split_once('/')?.1;
    }
    Some(rest.split_once('/').map_or(rest, |(field, _)| field))
}

/// What follows the second '/' of `key`, as `key.splitn(3, '/').nth(2)` answers it.
fn after_second_slash(key: &str) -> Option<&str> {
    let (_, rest) = key.split_once('/')?;
    Some(rest.split_once('/')?.1)
}

/// A segment's index entry (see the module documentation); `pending`: its segment waits for
/// compression.
pub(super) fn encode_index_entry(
    meta: &SegmentMeta,
    fingerprints: &[u32],
    pending: bool,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(INDEX_ENTRY_HEADER + 4 * fingerprints.len());
    out.push(INDEX_ENTRY_VERSION);
    out.extend_from_slice(&meta.last.to_le_bytes());
    out.extend_from_slice(&meta.seq.to_le_bytes());
    out.extend_from_slice(&meta.created_ms.to_le_bytes());
    out.extend_from_slice(&meta.stored_bytes.to_le_bytes());
    out.push(if pending { FLAG_COMPRESS_PENDING } else { 0 });
    for f in fingerprints {
        out.extend_from_slice(&f.to_le_bytes());
    }
    out
}

/// A segment's index entry read back: its metadata, its fingerprints, and whether the segment waits
/// for compression.
pub(super) struct DecodedEntry {
    pub(super) meta: SegmentMeta,
    pub(super) fingerprints: Vec<u32>,
    pub(super) pending: bool,
}

/// Reads the index entry of the segment starting at `first` back (either version); `key` names the
/// record holding it, for errors.
pub(super) fn decode_index_entry(
    key: &str,
    first: u64,
    bytes: &[u8],
) -> Result<DecodedEntry, StoreError> {
    let header = match bytes.first() {
        Some(&INDEX_ENTRY_VERSION) => INDEX_ENTRY_HEADER,
        Some(&INDEX_ENTRY_V1) => INDEX_ENTRY_V1_HEADER,
        Some(other) => {
            return Err(unreadable(
                key,
                &format_args!("unknown index entry version {other}"),
            ))
        }
        None => return Err(unreadable(key, &"empty index entry")),
    };
    if bytes.len() < header || !(bytes.len() - header).is_multiple_of(4) {
        return Err(unreadable(
            key,
            &format_args!("index entry of {} bytes", bytes.len()),
        ));
    }
    let u64_at = |at: usize| {
        u64::from_le_bytes(
            bytes[at..at + 8]
                .try_into()
                .unwrap_or_else(|_| unreachable!("8 bytes")),
        )
    };
    let u32_at = |at: usize| {
        u32::from_le_bytes(
            bytes[at..at + 4]
                .try_into()
                .unwrap_or_else(|_| unreachable!("4 bytes")),
        )
    };
    let meta = SegmentMeta {
        first,
        last: u64_at(1),
        seq: u32_at(9),
        created_ms: u64_at(13) as i64,
        stored_bytes: u32_at(21),
    };
    let pending = header == INDEX_ENTRY_HEADER && bytes[25] & FLAG_COMPRESS_PENDING != 0;
    let fingerprints: Vec<u32> = (header..bytes.len()).step_by(4).map(u32_at).collect();
    if meta.last < first || fingerprints.len() as u64 != meta.last - first + 1 {
        return Err(unreadable(
            key,
            &format_args!(
                "index entry covers offsets {first}..={} but has {} fingerprints",
                meta.last,
                fingerprints.len()
            ),
        ));
    }
    Ok(DecodedEntry {
        meta,
        fingerprints,
        pending,
    })
}
/// `l/{pid:016x}/{esc(group)}`, written without the formatter (a pop and an ack write one each).
pub(super) fn lane_key(pid: u64, group: &str) -> String {
    let mut key = numbered_key("l/", &[pid], "/");
    key.reserve(group.len());
    push_escaped(&mut key, group);
    key
}
pub(super) fn subscription_key(queue: &str, group: &str) -> String {
    format!("g/{}/{}", esc(queue), esc(group))
}
pub(super) fn dead_letter_key(id: &str) -> String {
    format!("d/{id}")
}

pub(super) fn json<T: Serialize>(value: &T) -> Vec<u8> {
    // Plain data structs with string keys always serialize.
    serde_json::to_vec(value).unwrap_or_else(|e| panic!("records serialize: {e}"))
}

/// The error of a record at `key` that does not read (`e` says why): every such text is built here,
/// by one function for every type of `e` (a text with figures is passed as `&format_args!(…)`, not
/// formatted twice).
pub(super) fn unreadable(key: &str, e: &dyn std::fmt::Display) -> StoreError {
    StoreError::other(format!("stored record \"{key}\" is unreadable: {e}"))
}

/// The `m/format` record of this build's format with `next_partition_id` (the shard migration writes it).
#[cfg(feature = "ops")]
pub(super) fn format_bytes(next_partition_id: u64) -> Vec<u8> {
    json(&FormatRecord {
        version: FORMAT_VERSION,
        next_partition_id,
    })
}

/// The (version, next partition id) an `m/format` record holds.
#[cfg(feature = "ops")]
pub(super) fn read_format(key: &str, bytes: &[u8]) -> Result<(u32, u64), StoreError> {
    decode(key, bytes, format_record).map(|f| (f.version, f.next_partition_id))
}

impl Broker {
    pub(super) fn save_format(&mut self) {
        let rec = FormatRecord {
            version: FORMAT_VERSION,
            next_partition_id: self.next_partition_id,
        };
        self.changes.put("m/format", json(&rec));
    }

    pub(super) fn save_queue(&mut self, name: &str) {
        if let Some(q) = self.queues.get(name) {
            let bytes = json(&q.record);
            self.changes.put(queue_key(name), bytes);
        }
    }

    pub(super) fn save_partition(&mut self, pid: u64) {
        if let Some(p) = self.partitions.get(&pid) {
            let bytes = json(&p.record());
            self.changes.put(partition_key(pid), bytes);
        }
    }

    pub(super) fn save_lane(&mut self, pid: u64, group: &str) {
        if let Some(lane) = self.partitions.get(&pid).and_then(|p| p.lanes.get(group)) {
            let bytes = lane.record();
            self.changes.put(lane_key(pid, group), bytes);
        }
    }

    pub(super) fn save_subscription(&mut self, queue: &str, group: &str) {
        if let Some(sub) = self
            .subscriptions
            .get(&(queue.to_string(), group.to_string()))
        {
            let bytes = json(sub);
            self.changes.put(subscription_key(queue, group), bytes);
        }
    }

    pub(super) fn save_dead_letter(&mut self, id: &str) {
        if let Some(d) = self.dead_letters.get(id) {
            let bytes = json(d);
            self.changes.put(dead_letter_key(id), bytes);
        }
    }

    /// Rebuilds state from records (keys in ascending order, as `Store::scan` returns them).
    ///
    /// `records` holds at least the [`INDEX_PREFIXES`]. Segment records (`s/`) given too are decoded
    /// into the cache; a segment without an index entry gets one: in format 1, put in the pending change
    /// set for the caller to commit; in later formats (pushed after the last index page, module
    /// `pages`), in memory until its page is written (it must follow its partition's indexed end).
    pub(super) fn load(&mut self, records: Vec<Record>) -> Result<(), StoreError> {
        let mut lanes = Vec::new();
        let mut entries: Vec<LoadedEntry> = Vec::new();
        let mut segments: Vec<(String, u64, u64, Vec<u8>)> = Vec::new();
        let mut format_version = 0;
        for (key, value) in records {
            let kind = key.split('/').next().unwrap_or("");
            match kind {
                "m" if key == "m/format" => {
                    let rec = decode(&key, &value, format_record)?;
                    if rec.version > FORMAT_VERSION {
                        return Err(StoreError::new(
                            StoreErrorKind::NewerFormat,
                            format!(
                                "this broker's data was written by format version {}, newer than this build \
                                 understands ({FORMAT_VERSION}); upgrade queen-edge",
                                rec.version
                            ),
                        ));
                    }
                    format_version = rec.version;
                    self.next_partition_id = self.next_partition_id.max(rec.next_partition_id);
                }
                "m" if key == super::maintenance::MODE_KEY => {
                    self.mode.state = super::maintenance::decode_mode(&key, &value)?;
                }
                #[cfg(feature = "ops")]
                "b" => {
                    let seq = super::maintenance::buffer_seq(&key)
                        .ok_or_else(|| unreadable(&key, &"bad key"))?;
                    let item = super::maintenance::decode_buffered(&key, &value)?;
                    self.mode.load_buffered(seq, item)?;
                }
                // A build without `ops` cannot drain the buffer: it counts it (and refuses pushes).
                #[cfg(not(feature = "ops"))]
                "b" => self.mode.count_foreign_buffered(),
                #[cfg(feature = "ops")]
                "t" => self.traces.load(&key, value.len() as u64)?,
                #[cfg(feature = "twophase")]
                "w" => self.load_prepared(&key, &value)?,
                "q" => {
                    let record = decode(&key, &value, queue_record)?;
                    self.queues.insert(
                        record.name.clone(),
                        Box::new(Queue {
                            record,
                            partitions: Default::default(),
                        }),
                    );
                }
                "p" => {
                    let rec = decode(&key, &value, partition_record)?;
                    let mut p = Partition::new(rec.id, &rec.queue, &rec.name, rec.created_at_ms);
                    p.first_offset = rec.first_offset;
                    p.next_offset = rec.first_offset;
                    self.next_partition_id = self.next_partition_id.max(rec.id + 1);
                    self.partitions.insert(rec.id, Box::new(p));
                }
                "s" => {
                    let (pid, first) =
                        parse_segment_key(&key).ok_or_else(|| unreadable(&key, &"bad key"))?;
                    segments.push((key, pid, first, value));
                }
                "x" => {
                    let (pid, page) =
                        parse_segment_key(&key).ok_or_else(|| unreadable(&key, &"bad key"))?;
                    for entry in super::pages::decode_index_record(&key, &value)? {
                        entries.push((pid, entry.meta, entry.fingerprints, entry.pending, page));
                    }
                }
                "l" => {
                    let pid = parse_pid(&key)?;
                    let lane = decode(&key, &value, lane)?;
                    let group = unesc(after_second_slash(&key).unwrap_or(""));
                    lanes.push((pid, group, lane));
                }
                "g" => {
                    let sub = decode(&key, &value, subscription)?;
                    self.subscriptions
                        .insert((sub.queue.clone(), sub.group.clone()), Box::new(sub));
                }
                "d" => {
                    let d = decode(&key, &value, dead_letter)?;
                    self.next_dead_letter_seq = self.next_dead_letter_seq.max(d.seq + 1);
                    self.dead_letters.insert(d.id.clone(), Box::new(d));
                }
                "v" => {
                    let record = decode(&key, &value, super::deliveries::read_delivery)?;
                    self.load_delivery(record);
                }
                _ => {}
            }
        }
        let mut migrated = false;
        let mut unpaged = Vec::new();
        for (key, pid, first, value) in segments {
            let messages = segment::decode(&value).map_err(|e| unreadable(&key, &e))?;
            let weight = segment::decoded_weight(&messages);
            let fingerprints: Vec<u32> = messages
                .iter()
                .map(|m| txindex::fingerprint(&m.transaction_id))
                .collect();
            let has_entry = entries
                .iter()
                .any(|(p, m, _, _, _)| *p == pid && m.first == first);
            if !has_entry && format_version >= FIRST_INDEXED_FORMAT {
                // Pushed after its partition's last index page: indexed below, once the pages are.
                unpaged.push((pid, first, value));
                continue;
            }
            if !has_entry {
                // Format 1: build the index entry from the segment itself.
                let (Some(head), Some(tail)) = (messages.first(), messages.last()) else {
                    return Err(unreadable(&key, &"segment holds no messages"));
                };
                if head.offset != first {
                    return Err(unreadable(
                        &key,
                        &"segment's first offset differs from its key",
                    ));
                }
                let meta = SegmentMeta {
                    first,
                    last: tail.offset,
                    seq: 0, // numbered below, once every segment of the partition is known
                    created_ms: head.created_at_ms,
                    stored_bytes: value.len() as u32,
                };
                entries.push((pid, meta, fingerprints.clone(), false, first));
                migrated = true;
            }
            self.cache.insert(
                pid,
                first,
                std::rc::Rc::from(messages),
                weight,
                fingerprints,
                false,
            );
        }
        if migrated {
            super::sort::sort_by_key(&mut entries, |(pid, meta, _, _, _)| (*pid, meta.first));
            let mut last_pid = None;
            let mut seq = 0;
            for (pid, meta, _, _, _) in entries.iter_mut() {
                if last_pid != Some(*pid) {
                    (last_pid, seq) = (Some(*pid), 0);
                }
                meta.seq = seq;
                seq += 1;
            }
        }
        // Keys sort "p/" before "q/": attach partitions to their queues once both are loaded.
        if let Some(orphan) = self
            .partitions
            .values()
            .find(|p| !self.queues.contains_key(&p.queue))
        {
            return Err(damaged(format_args!(
                "partition {} names queue \"{}\", which is not stored",
                orphan.id, orphan.queue
            )));
        }
        for p in self.partitions.values() {
            if let Some(q) = self.queues.get_mut(&p.queue) {
                q.partitions.insert(p.name.clone(), Box::new(p.id));
            }
        }
        self.attach_segments(entries, migrated)?;
        for (pid, first, value) in unpaged {
            self.index_segment(pid, first, &value, true)?;
        }
        for (pid, group, lane) in lanes {
            if let Some(p) = self.partitions.get_mut(&pid) {
                if let Some(lease) = lane.lease_id() {
                    self.leases
                        .entry(lease.to_string())
                        .or_default()
                        .push((pid, group.clone()));
                }
                if lane.lease_id().is_some() || lane.hold_until_ms() > 0 {
                    let at = lane.lease_expires_ms().max(lane.hold_until_ms());
                    self.timers.insert((at, pid, group.clone()));
                }
                p.lanes.insert(group, Box::new(lane));
            }
        }
        if migrated || (format_version > 0 && format_version < FORMAT_VERSION) {
            self.save_format();
        }
        // Clock: never earlier than anything stored.
        let newest = self
            .partitions
            .values()
            .filter_map(|p| p.newest_created())
            .max()
            .unwrap_or(0);
        // And past every `new` subscription's start, as when it was made (`ensure_subscription`): a
        // push right after a reload must not be created at the start a cursor skips through.
        let newest_start = self
            .subscriptions
            .values()
            .filter(|s| s.mode == SubscriptionMode::New)
            .filter_map(|s| s.start_ms)
            .max()
            .map_or(0, |start| start.saturating_add(1));
        self.now_ms = self.now_ms.max(newest).max(newest_start);
        Ok(())
    }

    /// Gives each partition its segments (entries sorted by partition and first offset), checking that
    /// they are contiguous and cover every retained offset, and its pages; an entry of a segment retention
    /// deleted (below the partition's first offset) is skipped, and a page left with no other is deleted.
    /// With `write`, also puts each index entry in the pending change set (the format 1 upgrade).
    fn attach_segments(
        &mut self,
        mut entries: Vec<LoadedEntry>,
        write: bool,
    ) -> Result<(), StoreError> {
        super::sort::sort_by_key(&mut entries, |(pid, meta, _, _, _)| (*pid, meta.first));
        let mut by_partition: Vec<(u64, Vec<IndexEntry>)> = Vec::new();
        for (pid, meta, fingerprints, pending, page) in entries {
            match by_partition.last_mut() {
                Some((p, list)) if *p == pid => list.push((meta, fingerprints, pending, page)),
                _ => by_partition.push((pid, vec![(meta, fingerprints, pending, page)])),
            }
        }
        for (pid, list) in by_partition {
            let Some(p) = self.partitions.get_mut(&pid) else {
                return Err(damaged(format_args!(
                    "segments are stored for partition {pid}, which is not"
                )));
            };
            let mut expected: Option<u64> = None;
            let mut fingerprints_of = Vec::new();
            let mut dead_pages = Vec::new();
            for (meta, fingerprints, pending, page) in list {
                if p.pages.back() != Some(&page) {
                    if p.pages.back().is_some_and(|&last| last > page) {
                        return Err(damaged(format_args!(
                            "partition {pid}'s index pages overlap at offset {}",
                            meta.first
                        )));
                    }
                    p.pages.push_back(page);
                }
                if meta.last < p.first_offset {
                    // Retention deleted its segment; its page holds later ones (or goes, below).
                    continue;
                }
                if let Some(next) = expected {
                    if meta.first != next {
                        return Err(damaged(format_args!(
                            "partition {pid} of queue \"{}\" is missing offsets {next}..{}",
                            p.queue, meta.first
                        )));
                    }
                } else {
                    // The first retained segment: pages before its own hold nothing retained.
                    while p.pages.len() > 1 {
                        dead_pages.push(p.pages.pop_front().unwrap_or_default());
                    }
                }
                expected = Some(meta.last + 1);
                if write {
                    self.changes.put(
                        index_entry_key(pid, meta.first),
                        encode_index_entry(&meta, &fingerprints, pending),
                    );
                }
                if pending {
                    p.compress_from = p.compress_from.min(meta.first);
                }
                fingerprints_of.extend(fingerprints.into_iter().map(|f| (f, meta.seq)));
                p.next_segment_seq = p.next_segment_seq.max(meta.seq + 1);
                p.next_offset = p.next_offset.max(meta.last + 1);
                p.segments.push_back(meta);
            }
            if p.segments.is_empty() {
                dead_pages.extend(p.pages.drain(..));
            }
            for page in dead_pages {
                self.changes.delete(index_entry_key(pid, page));
            }
            let head = p.segments.front().map_or(p.next_offset, |s| s.first);
            if head > p.first_offset {
                return Err(damaged(format_args!(
                    "partition {pid} of queue \"{}\" is missing offsets {}..{head}",
                    p.queue, p.first_offset
                )));
            }
            p.txids = TxIndex::from_entries(fingerprints_of);
            self.txids_indexed += 1;
        }
        Ok(())
    }
}

/// A segment's metadata, the fingerprints of its transaction ids and whether it waits for
/// compression, as its index entry stores them, and the first offset of the page holding it.
type IndexEntry = (SegmentMeta, Vec<u32>, bool, u64);

/// An [`IndexEntry`] with its partition id, as the open collects them.
type LoadedEntry = (u64, SegmentMeta, Vec<u32>, bool, u64);

/// Storage that lost records the broker needs: a hard error, never a silent skip (`what` says which,
/// formatted once, into the error's text).
fn damaged(what: std::fmt::Arguments) -> StoreError {
    StoreError::other(format!("storage is damaged: {what}"))
}

/// Decodes the record at `key` with `read` (module [`super::fields`]); any failure names the record.
pub(super) fn decode<T>(
    key: &str,
    bytes: &[u8],
    read: fn(&mut Fields) -> T,
) -> Result<T, StoreError> {
    Fields::read(bytes, read).map_err(|e| unreadable(key, &e))
}

// One reader per record type, field for field what its derived `Serialize` writes (state.rs, lane.rs,
// core::api): the same names, and the same defaults for fields older builds did not write.

fn format_record(f: &mut Fields) -> FormatRecord {
    FormatRecord {
        version: f.u32("version"),
        next_partition_id: f.u64("nextPartitionId"),
    }
}

pub(super) fn queue_record(f: &mut Fields) -> QueueRecord {
    QueueRecord {
        id: f.string("id"),
        name: f.string("name"),
        namespace: f.string("namespace"),
        task: f.string("task"),
        created_at_ms: f.i64("created_at_ms"),
        options: {
            let mut nested = f.object("options");
            let options = queue_options(&mut nested);
            f.merge(nested);
            options
        },
    }
}

fn queue_options(f: &mut Fields) -> QueueOptions {
    QueueOptions {
        lease_time_s: f.u64("lease_time_s"),
        retry_limit: f.u32("retry_limit"),
        retry_delay_ms: f.u64("retry_delay_ms"),
        max_size: f.u64("max_size"),
        ttl_s: f.u64("ttl_s"),
        dead_letter_queue: f.bool("dead_letter_queue"),
        dlq_after_max_retries: f.bool("dlq_after_max_retries"),
        delayed_processing_s: f.u64("delayed_processing_s"),
        window_buffer_s: f.u64("window_buffer_s"),
        retention_enabled: f.bool("retention_enabled"),
        retention_s: f.u64("retention_s"),
        completed_retention_s: f.u64("completed_retention_s"),
        max_wait_time_s: f.u64("max_wait_time_s"),
        encryption_enabled: f.bool("encryption_enabled"),
        priority: f.i64("priority"),
        reclaim_limit: f.u32_or("reclaim_limit", 0),
        backoff_base_ms: f.u64_or("backoff_base_ms", 0),
        backoff_factor_permille: f.u32_or("backoff_factor_permille", 0),
        backoff_max_ms: f.u64_or("backoff_max_ms", 0),
        delivery_log: match f.opt_string("delivery_log") {
            None => DeliveryLogMode::Off,
            Some(text) => DeliveryLogMode::parse(&text).unwrap_or_else(|| {
                f.fail(format!("field `delivery_log`: unknown mode \"{text}\""));
                DeliveryLogMode::Off
            }),
        },
    }
}

pub(super) fn partition_record(f: &mut Fields) -> PartitionRecord {
    PartitionRecord {
        id: f.u64("id"),
        queue: f.string("queue"),
        name: f.string("name"),
        created_at_ms: f.i64("created_at_ms"),
        first_offset: f.u64("first_offset"),
    }
}

pub(super) fn lane(f: &mut Fields) -> Lane {
    Lane::read(f)
}

fn subscription(f: &mut Fields) -> Subscription {
    Subscription {
        group: f.string("group"),
        queue: f.string("queue"),
        start_ms: f.opt_i64("start_ms"),
        conflation: f.bool("conflation"),
        created_at_ms: f.i64("created_at_ms"),
        mode: {
            let name = f.string("mode");
            SubscriptionMode::parse(&name).unwrap_or_else(|| {
                f.fail(format!("unknown subscription mode \"{name}\""));
                SubscriptionMode::New
            })
        },
    }
}

pub(super) fn dead_letter(f: &mut Fields) -> DeadLetter {
    DeadLetter {
        id: f.string("id"),
        partition_id: f.u64("partition_id"),
        queue: f.string("queue"),
        partition: f.string("partition"),
        group: f.string("group"),
        message_id: f.string("message_id"),
        transaction_id: f.string("transaction_id"),
        offset: f.u64("offset"),
        payload: f.payload(),
        trace_id: f.opt_string("trace_id"),
        error: f.string("error"),
        retry_count: f.u32("retry_count"),
        failed_at_ms: f.i64("failed_at_ms"),
        created_at_ms: f.i64("created_at_ms"),
        seq: f.u64_or("seq", 0),
    }
}

pub(super) fn parse_pid(key: &str) -> Result<u64, StoreError> {
    key_field(key, 1)
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .ok_or_else(|| unreadable(key, &"bad partition id in key"))
}

/// The inverse of [`esc`]: `%2F` → `/`, `%25` → `%`, in one pass (a `%` in any other place is kept).
/// By hand rather than `str::replace` with a text pattern, whose substring searcher would be in the
/// browser module for this one use.
pub(super) fn unesc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some((head, tail)) = rest.split_once('%') {
        out.push_str(head);
        rest = if let Some(after) = tail.strip_prefix("2F") {
            out.push('/');
            after
        } else if let Some(after) = tail.strip_prefix("25") {
            out.push('%');
            after
        } else {
            out.push('%');
            tail
        };
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    //! The readers against the derived `Serialize`: whatever this build writes, it reads back equal;
    //! and records older builds wrote (without the fields added since) read with their defaults.
    use super::*;
    use proptest::prelude::*;
    use serde_json::{json, Value};

    /// `key_field` and `after_second_slash` answer as the iterators they replace, for keys with no, one,
    /// two and more separators, empty fields and separators at either end.
    #[test]
    fn key_fields_read_as_split_and_splitn() {
        let keys = [
            "",
            "/",
            "//",
            "///x",
            "a",
            "a/",
            "/a",
            "a/b",
            "a/b/",
            "a/b/c",
            "a/b/c/d",
            "s/1f/2a",
            "l/1/group/with/slashes",
            "é/ü/ö",
        ];
        for key in keys {
            for n in 0..5 {
                assert_eq!(key_field(key, n), key.split('/').nth(n), "{key:?} {n}");
            }
            assert_eq!(
                after_second_slash(key),
                key.splitn(3, '/').nth(2),
                "{key:?}"
            );
        }
    }

    #[test]
    fn numbered_keys_are_what_the_formatter_writes() {
        for (pid, first) in [(0, 0), (1, 5), (0xabc, 0xdef0), (u64::MAX, u64::MAX - 1)] {
            assert_eq!(
                segment_key(pid, first),
                format!("s/{pid:016x}/{first:016x}")
            );
            assert_eq!(
                index_entry_key(pid, first),
                format!("x/{pid:016x}/{first:016x}")
            );
            assert_eq!(partition_segment_prefix(pid), format!("s/{pid:016x}/"));
            assert_eq!(partition_key(pid), format!("p/{pid:016x}"));
            for group in ["", "g", "__QUEUE_MODE__", "a/b%c", "%/%/", "é/€%"] {
                let escaped = group.replace('%', "%25").replace('/', "%2F");
                assert_eq!(lane_key(pid, group), format!("l/{pid:016x}/{escaped}"));
                assert_eq!(esc(group), escaped);
            }
        }
    }

    fn round_trip<T: Serialize + PartialEq + std::fmt::Debug>(
        value: &T,
        read: fn(&mut Fields) -> T,
    ) {
        let back = decode("test/key", &json(value), read).expect("reads what it wrote");
        assert_eq!(&back, value);
    }

    fn payload() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            ".{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(2, 8, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
                prop::collection::btree_map(".{0,4}", inner, 0..3)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn options() -> impl Strategy<Value = QueueOptions> {
        (
            (
                any::<u64>(),
                any::<u32>(),
                any::<u64>(),
                any::<u64>(),
                any::<u64>(),
            ),
            (
                any::<bool>(),
                any::<bool>(),
                any::<u64>(),
                any::<u64>(),
                any::<bool>(),
            ),
            (
                any::<u64>(),
                any::<u64>(),
                any::<u64>(),
                any::<bool>(),
                any::<i64>(),
            ),
        )
            .prop_map(
                |((a, b, c, d, e), (f, g, h, i, j), (k, l, m, n, o))| QueueOptions {
                    lease_time_s: a,
                    retry_limit: b,
                    retry_delay_ms: c,
                    max_size: d,
                    ttl_s: e,
                    dead_letter_queue: f,
                    dlq_after_max_retries: g,
                    delayed_processing_s: h,
                    window_buffer_s: i,
                    retention_enabled: j,
                    retention_s: k,
                    completed_retention_s: l,
                    max_wait_time_s: m,
                    encryption_enabled: n,
                    priority: o,
                    reclaim_limit: (a % 7) as u32,
                    backoff_base_ms: if f { c } else { 0 },
                    backoff_factor_permille: if f { b } else { 0 },
                    backoff_max_ms: if f { d } else { 0 },
                    delivery_log: [
                        DeliveryLogMode::Off,
                        DeliveryLogMode::Failures,
                        DeliveryLogMode::All,
                    ][(e % 3) as usize],
                },
            )
    }

    proptest! {
        #[test]
        fn queue_and_partition_records(
            names in prop::collection::vec(".{0,12}", 4),
            created in any::<i64>(),
            id in any::<u64>(),
            first in any::<u64>(),
            options in options(),
        ) {
            round_trip(&QueueRecord {
                id: names[0].clone(),
                name: names[1].clone(),
                namespace: names[2].clone(),
                task: names[3].clone(),
                created_at_ms: created,
                options,
            }, queue_record);
            round_trip(&PartitionRecord {
                id,
                queue: names[0].clone(),
                name: names[1].clone(),
                created_at_ms: created,
                first_offset: first,
            }, partition_record);
        }

        #[test]
        fn lanes(
            c in any::<i64>(), l in proptest::option::of(".{0,12}"), x in any::<i64>(),
            e in any::<i64>(), r in any::<u32>(), a in any::<u32>(), s in any::<i64>(), h in any::<i64>(),
            k in any::<u32>(), q in any::<i64>(),
        ) {
            // Lane fields are private: build one from a record, then check it reads back equal.
            let (nd, na, nf) = ((x as u64) >> 1, r as u64, a as u64);
            let stored = json!({"c": c, "l": l, "x": x, "e": e, "r": r, "a": a, "s": s, "h": h, "k": k, "q": q,
                                "nd": nd, "na": na, "nf": nf});
            let first = decode("l/1/g", &json(&stored), lane).expect("reads");
            prop_assert_eq!((first.committed(), first.lease_id().map(str::to_string)), (c, l));
            prop_assert_eq!((first.expiry_streak(), first.hold_until_ms()), (k, h));
            prop_assert_eq!((first.delivered, first.acked, first.failed), (nd, na, nf));
            round_trip(&first, lane);
        }

        #[test]
        fn subscriptions_and_dead_letters(
            names in prop::collection::vec(".{0,12}", 7),
            start in proptest::option::of(any::<i64>()),
            flag in any::<bool>(),
            numbers in (any::<u64>(), any::<u64>(), any::<u32>(), any::<i64>(), any::<i64>(), any::<u64>()),
            trace in proptest::option::of(".{0,12}"),
            payload in payload(),
        ) {
            round_trip(&Subscription {
                group: names[0].clone(),
                queue: names[1].clone(),
                start_ms: start,
                conflation: flag,
                created_at_ms: numbers.3,
                mode: [SubscriptionMode::New, SubscriptionMode::All, SubscriptionMode::Timestamp]
                    [numbers.2 as usize % 3],
            }, subscription);
            round_trip(&DeadLetter {
                id: names[0].clone(),
                partition_id: numbers.0,
                queue: names[1].clone(),
                partition: names[2].clone(),
                group: names[3].clone(),
                message_id: names[4].clone(),
                transaction_id: names[5].clone(),
                offset: numbers.1,
                payload: payload.into(),
                trace_id: trace,
                error: names[6].clone(),
                retry_count: numbers.2,
                failed_at_ms: numbers.3,
                created_at_ms: numbers.4,
                seq: numbers.5,
            }, dead_letter);
        }
    }

    #[test]
    fn escaped_names_read_back() {
        for name in [
            "", "a", "a/b", "%", "%2F", "%25", "/%/", "x%2", "%F", "é/€%",
        ] {
            assert_eq!(unesc(&esc(name)), name, "{name}");
        }
        assert_eq!(unesc("50%"), "50%", "a stray % is kept");
    }

    #[test]
    fn format_record_reads_back() {
        let rec = FormatRecord {
            version: 1,
            next_partition_id: 42,
        };
        let back = decode("m/format", &json(&rec), format_record).unwrap();
        assert_eq!((back.version, back.next_partition_id), (1, 42));
    }

    #[test]
    fn fields_added_later_have_their_defaults() {
        let lane = decode("l/1/g", br#"{"c":5}"#, lane).unwrap();
        assert_eq!(lane, Lane::at(5));
        let d = decode(
            "d/x",
            json(&json!({
                "id": "x", "partition_id": 1, "queue": "q", "partition": "p", "group": "g",
                "message_id": "m", "transaction_id": "t", "offset": 3, "payload": null,
                "error": "boom", "retry_count": 2, "failed_at_ms": 10, "created_at_ms": 9
            }))
            .as_slice(),
            dead_letter,
        )
        .unwrap();
        assert_eq!((d.trace_id, d.seq, d.payload.get()), (None, 0, "null"));
    }

    #[test]
    fn a_bad_record_names_its_key_and_field() {
        let e = decode("l/0000000000000001/g", br#"{"c":"five"}"#, lane).unwrap_err();
        assert!(
            e.message.contains("l/0000000000000001/g") && e.message.contains("field `c`"),
            "{}",
            e.message
        );
        let e = decode("q/orders", br#"{"id":"1"}"#, queue_record).unwrap_err();
        assert!(e.message.contains("missing field `name`"), "{}", e.message);
    }
}

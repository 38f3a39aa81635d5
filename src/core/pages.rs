//! Index pages: the index entries of several consecutive segments of a partition in one record, so that
//! most push commits write their segment alone (docs/decisions.md, "Index pages (session 11)").
//!
//! A push keeps its new segment's fingerprints in memory (`Partition::unpaged`); when a partition has
//! [`ENTRIES_PER_PAGE`] segments without a stored entry, the push that made the last of them writes their
//! entries as one page `x/<pid>/<first offset of the first>` (record layout in module `records`).
//! Maintenance writes the pages of every partition with such segments ([`Broker::write_pages`]), so a
//! quiet partition's entries do not wait for more pushes.
//!
//! An entry is derived from its segment alone (last offset and push time from its messages, the number by
//! counting, the size and the compression flag from its stored bytes, the fingerprints from its
//! transaction ids), so a crash before a page is written loses nothing: a segment is committed before any
//! page names it, and the open finds the segments no page names where they must be, right after their
//! partition's indexed end, one key at a time ([`Broker::index_found_segment`]). They are the newest of
//! their partition and fewer than [`ENTRIES_PER_PAGE`]: the open reads at most that many keys a partition.
//! Where a partition's probe stops (the first absent key), no later segment of it may be stored: commits
//! are all or nothing and retention deletes from the front, so only damage leaves one (a segment lost in
//! the middle of the run), and its messages would be lost and their offsets taken by the next push. The
//! open asks the store for the first key of each partition's segments from there on ([`segments_from`], one
//! `Store::first_keys` call for every partition) and fails with [`Broker::segment_past_a_gap`] when one is.
//!
//! A page is written once. Compression in maintenance rewrites the page of the segments it compresses
//! (module `compaction`); retention leaves a page whose first segments it deleted as it is (the open
//! skips entries below the partition's first offset) and deletes it with the last of its segments.

use super::records::{decode_index_entry, encode_index_entry, index_entry_key, unreadable};
use super::records::{parse_segment_key, partition_segment_prefix, segment_key, DecodedEntry};
use super::segment;
use super::state::{Partition, SegmentMeta};
use super::txindex;
use super::Broker;
use crate::store::{KeyRange, StoreError};

/// How many segments' entries a page holds when a push writes it (docs/decisions.md, "Index pages
/// (session 11)": the measurement behind the number).
pub const ENTRIES_PER_PAGE: usize = 16;

/// Byte 0 of a page record (entries of format 2 records start with their entry version, 1 or 2).
const PAGE_VERSION: u8 = 3;

/// A page holding `entries` (metadata, fingerprints, waits for compression), in offset order.
pub(super) fn encode_page<'a>(
    entries: impl IntoIterator<Item = (&'a SegmentMeta, &'a [u32], bool)>,
) -> Vec<u8> {
    let mut out = vec![PAGE_VERSION];
    for (meta, fingerprints, pending) in entries {
        let entry = encode_index_entry(meta, fingerprints, pending);
        out.extend_from_slice(&meta.first.to_le_bytes());
        out.extend_from_slice(&(entry.len() as u32).to_le_bytes());
        out.extend_from_slice(&entry);
    }
    out
}

/// The entries of the index record at `key`: a page's, in its order, or the one entry of a record
/// format 2 wrote (its first offset in the key).
pub(super) fn decode_index_record(
    key: &str,
    bytes: &[u8],
) -> Result<Vec<DecodedEntry>, StoreError> {
    let (_, key_first) = parse_segment_key(key).ok_or_else(|| unreadable(key, &"bad key"))?;
    if bytes.first() != Some(&PAGE_VERSION) {
        return Ok(vec![decode_index_entry(key, key_first, bytes)?]);
    }
    let mut entries = Vec::new();
    let mut rest = &bytes[1..];
    while !rest.is_empty() {
        if rest.len() < 12 {
            return Err(unreadable(key, &"index page ends inside an entry's header"));
        }
        let first = u64::from_le_bytes(rest[..8].try_into().unwrap_or_else(|_| unreachable!()));
        let len = u32::from_le_bytes(rest[8..12].try_into().unwrap_or_else(|_| unreachable!()));
        let Some(entry) = rest.get(12..12 + len as usize) else {
            return Err(unreadable(key, &"index page ends inside an entry"));
        };
        let decoded = decode_index_entry(key, first, entry)?;
        if let Some(before) = entries.last().map(|e: &DecodedEntry| e.meta.last) {
            if first != before + 1 {
                return Err(unreadable(key, &"index page's entries are not consecutive"));
            }
        } else if first != key_first {
            return Err(unreadable(
                key,
                &"index page's first entry differs from its key",
            ));
        }
        entries.push(decoded);
        rest = &rest[12 + len as usize..];
    }
    if entries.is_empty() {
        return Err(unreadable(key, &"empty index page"));
    }
    Ok(entries)
}

/// The first offset of the page holding the entry of `p`'s segment at `first`; `None` when the segment
/// is not stored or its entry is in no page yet.
pub(super) fn page_of(p: &Partition, first: u64) -> Option<u64> {
    let at = p.segments.partition_point(|s| s.first < first);
    if p.segments.get(at).is_none_or(|s| s.first != first)
        || at >= p.segments.len() - p.unpaged.len()
    {
        return None;
    }
    let page = p.pages.partition_point(|&start| start <= first);
    page.checked_sub(1).map(|i| p.pages[i])
}

impl Broker {
    /// A new segment (the last of `pid`'s segments) has no entry stored: keeps its fingerprints, and
    /// writes the page when it is the [`ENTRIES_PER_PAGE`]th such segment.
    pub(super) fn note_unpaged(&mut self, pid: u64, fingerprints: Vec<u32>) {
        let Some(p) = self.partitions.get_mut(&pid) else {
            return;
        };
        p.unpaged.push(fingerprints);
        if p.unpaged.len() >= ENTRIES_PER_PAGE {
            self.write_page(pid);
        }
    }

    /// Writes the entries of `pid`'s segments that have none stored as one page.
    fn write_page(&mut self, pid: u64) {
        let Some(p) = self.partitions.get_mut(&pid) else {
            return;
        };
        let count = p.unpaged.len();
        if count == 0 {
            return;
        }
        let from = p.segments.len() - count;
        let compress_from = p.compress_from;
        let first = p.segments[from].first;
        let bytes = encode_page(
            p.segments
                .range(from..)
                .zip(p.unpaged.iter())
                .map(|(meta, fps)| (meta, fps.as_slice(), meta.first >= compress_from)),
        );
        p.unpaged.clear();
        p.pages.push_back(first);
        self.changes.put(index_entry_key(pid, first), bytes);
    }

    /// Writes a page for every partition with segments whose entries are in none (maintenance). Returns
    /// how many pages it wrote.
    pub fn write_pages(&mut self) -> u64 {
        let pids: Vec<u64> = self
            .partitions
            .values()
            .filter(|p| !p.unpaged.is_empty())
            .map(|p| p.id)
            .collect();
        for pid in &pids {
            self.write_page(*pid);
        }
        pids.len() as u64
    }

    /// After retention dropped `pid`'s oldest segments: forgets the unpaged ones among them, and deletes
    /// the pages that hold no retained segment's entry any more.
    pub(super) fn forget_pages_before_segments(&mut self, pid: u64) {
        let Some(p) = self.partitions.get_mut(&pid) else {
            return;
        };
        if p.unpaged.len() > p.segments.len() {
            let gone = p.unpaged.len() - p.segments.len();
            p.unpaged.drain(..gone);
        }
        let paged = p.segments.len() - p.unpaged.len();
        let keep_from = match p.segments.front() {
            Some(front) if paged > 0 => p
                .pages
                .partition_point(|&start| start <= front.first)
                .saturating_sub(1),
            _ => p.pages.len(),
        };
        let doomed: Vec<u64> = p.pages.drain(..keep_from).collect();
        for first in doomed {
            self.changes.delete(index_entry_key(pid, first));
        }
    }

    /// Indexes a segment the open found stored right after `pid`'s indexed end (its entry was in no page
    /// yet when the broker stopped), from its own bytes: it becomes `pid`'s newest segment, without a
    /// stored entry. Returns the partition's new end (where the next such segment would be). Fails when
    /// the bytes do not decode or do not start at `first`, the partition's end.
    pub fn index_found_segment(
        &mut self,
        pid: u64,
        first: u64,
        bytes: &[u8],
    ) -> Result<u64, StoreError> {
        self.index_segment(pid, first, bytes, false)
    }

    /// [`Self::index_found_segment`]; with `keep`, the decoded segment also goes in the cache (an open
    /// given every record, segments included: `Broker::load`).
    pub(super) fn index_segment(
        &mut self,
        pid: u64,
        first: u64,
        bytes: &[u8],
        keep: bool,
    ) -> Result<u64, StoreError> {
        let key = segment_key(pid, first);
        let messages = segment::decode(bytes).map_err(|e| unreadable(&key, &e))?;
        let (Some(head), Some(tail)) = (messages.first(), messages.last()) else {
            return Err(unreadable(&key, &"segment holds no messages"));
        };
        let contiguous = messages.iter().zip(first..).all(|(m, o)| m.offset == o);
        let Some(p) = self.partitions.get_mut(&pid) else {
            return Err(unreadable(&key, &"its partition is not stored"));
        };
        if head.offset != first || first != p.next_offset || !contiguous {
            return Err(unreadable(
                &key,
                &"segment does not hold the offsets after its partition's end",
            ));
        }
        let meta = SegmentMeta {
            first,
            last: tail.offset,
            seq: p.next_segment_seq,
            created_ms: head.created_at_ms,
            stored_bytes: bytes.len() as u32,
        };
        let fingerprints: Vec<u32> = messages
            .iter()
            .map(|m| txindex::fingerprint(&m.transaction_id))
            .collect();
        // As pushed: JSON text, waiting for compression in a build that compresses.
        if segment::COMPRESSES && bytes.first() == Some(&segment::SEGMENT_FORMAT_JSON) {
            p.compress_from = p.compress_from.min(first);
        }
        p.next_segment_seq += 1;
        p.next_offset = meta.last + 1;
        p.txids.add(meta.seq, fingerprints.iter().copied());
        p.segments.push_back(meta);
        self.txids_indexed += 1;
        self.stored_bytes += u64::from(meta.stored_bytes);
        self.now_ms = self.now_ms.max(meta.created_ms);
        // The engine's open holds no message bytes (a pop reads the segment again).
        if keep {
            let weight = segment::decoded_weight(&messages);
            let fps = fingerprints.clone();
            self.cache
                .insert(pid, first, std::rc::Rc::from(messages), weight, fps, false);
        }
        self.note_unpaged(pid, fingerprints);
        Ok(meta.last + 1)
    }

    /// The damage of `found`, a segment key of partition `pid` stored past offset `end`, where the open
    /// found no segment (module documentation): [`segment_past_a_gap`] with the partition's names.
    pub fn segment_past_a_gap(&self, pid: u64, end: u64, found: &str) -> StoreError {
        let partition = match self.partitions.get(&pid) {
            Some(p) => format!("partition \"{}\" of queue \"{}\"", p.name, p.queue),
            None => format!("partition {pid}"),
        };
        segment_past_a_gap(&partition, pid, end, found)
    }

    /// The (partition, offset) right after each partition's indexed end: where a segment whose entry is
    /// in no page would be stored.
    pub fn indexed_ends(&self) -> Vec<(u64, u64)> {
        self.partitions
            .values()
            .map(|p| (p.id, p.next_offset))
            .collect()
    }
}

/// The damage of `found`, a segment key of partition `pid` (named by `partition`) stored past offset
/// `end`, where no segment is (module documentation): names the missing key and the stored one.
pub fn segment_past_a_gap(partition: &str, pid: u64, end: u64, found: &str) -> StoreError {
    StoreError::other(format!(
        "storage is damaged: segment \"{}\" of {partition} is not stored, but the later \"{found}\" \
         is: the messages between them are lost",
        segment_key(pid, end)
    ))
}

/// The keys of partition `pid`'s segments from offset `end` on: none is stored when no segment is at
/// `end` (module documentation).
pub fn segments_from(pid: u64, end: u64) -> KeyRange {
    KeyRange {
        prefix: partition_segment_prefix(pid),
        from: segment_key(pid, end),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(first: u64, last: u64, seq: u32) -> SegmentMeta {
        SegmentMeta {
            first,
            last,
            seq,
            created_ms: 1_700_000_000_000 + i64::from(seq),
            stored_bytes: 100 + seq,
        }
    }

    #[test]
    fn a_page_reads_back_its_entries_in_order() {
        let metas = [meta(10, 12, 0), meta(13, 13, 1), meta(14, 15, 2)];
        let fps: [Vec<u32>; 3] = [vec![1, 2, 3], vec![4], vec![5, 6]];
        let bytes = encode_page(
            metas
                .iter()
                .zip(fps.iter())
                .enumerate()
                .map(|(i, (m, f))| (m, f.as_slice(), i == 2)),
        );
        let key = index_entry_key(7, 10);
        let back = decode_index_record(&key, &bytes).unwrap();
        assert_eq!(back.len(), 3);
        for (i, e) in back.iter().enumerate() {
            assert_eq!(
                (e.meta, &e.fingerprints, e.pending),
                (metas[i], &fps[i], i == 2)
            );
        }
    }

    #[test]
    fn a_format_2_entry_reads_as_a_page_of_one() {
        let m = meta(5, 6, 3);
        let key = index_entry_key(1, 5);
        let back = decode_index_record(&key, &encode_index_entry(&m, &[9, 8], true)).unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!((back[0].meta, back[0].pending), (m, true));
    }

    #[test]
    fn a_damaged_page_is_an_error() {
        let metas = [meta(10, 12, 0), meta(13, 13, 1)];
        let fps: [Vec<u32>; 2] = [vec![1, 2, 3], vec![4]];
        let bytes = encode_page(
            metas
                .iter()
                .zip(fps.iter())
                .map(|(m, f)| (m, f.as_slice(), false)),
        );
        let key = index_entry_key(7, 10);
        assert!(decode_index_record(&key, &bytes[..bytes.len() - 1]).is_err());
        assert!(decode_index_record(&index_entry_key(7, 9), &bytes).is_err());
        assert!(decode_index_record(&key, &[PAGE_VERSION]).is_err());
        let gap = encode_page(
            [meta(10, 12, 0), meta(14, 14, 1)]
                .iter()
                .zip(fps.iter())
                .map(|(m, f)| (m, f.as_slice(), false)),
        );
        assert!(decode_index_record(&key, &gap).is_err());
    }
}

//! Compression of stored segments in maintenance, off the request path (builds with the `deflate`
//! feature; docs/decisions.md, "Core speed, second pass").
//!
//! A push stores its segment as JSON text (format 2) and marks its index entry as waiting for
//! compression. Maintenance asks which segments have waited long enough
//! ([`Broker::segments_to_compress`]), the engine reads them and the index pages holding their entries
//! ([`Broker::index_page_of`]) back from the store, and [`Broker::compress_segments`] rewrites each as
//! format 1 and rewrites its page (the stored size changed, the flag cleared). A segment that retention
//! deletes first is never compressed: most segments of a queue whose consumers keep up and whose
//! completed messages expire. A segment whose entry is in no page yet waits (maintenance writes the
//! pages first, so it waits one pass at most).
//!
//! The segments that wait are always the newest of their partition (pushes append them, maintenance
//! takes them oldest first), so memory keeps one offset per partition (`Partition::compress_from`);
//! the open rebuilds it from the index entries' flags.

#[cfg(feature = "deflate")]
use super::records::{index_entry_key, segment_key};
use super::segment;
use super::Broker;

/// How long a segment stays as pushed before maintenance compresses it: one maintenance period of the
/// Worker, so a segment consumed and expired within it is never compressed.
pub const COMPRESS_AFTER_MS: i64 = 60_000;

/// Most stored bytes of segments one maintenance pass compresses (in slices of at most
/// [`COMPRESS_BYTES_PER_SLICE`], each under the command gate); what is left waits for the next pass.
pub const COMPRESS_BYTES_PER_PASS: u64 = 8 << 20;

/// Most stored bytes of segments one slice of a pass compresses: the engine compresses a pass in slices,
/// each read, rewritten and committed under the command gate, and lets the requests waiting meanwhile
/// run between two slices, so that no request waits behind a whole pass (docs/decisions.md, "The
/// Worker's batch-100 push, per byte").
pub const COMPRESS_BYTES_PER_SLICE: u64 = 1 << 20;

/// Most segments one slice of a pass compresses (see [`COMPRESS_BYTES_PER_SLICE`]): each costs a read
/// and a rewrite whatever its size, so a pass of small segments is cut by count.
pub const COMPRESS_SEGMENTS_PER_SLICE: usize = 256;

/// A segment read back for compression: partition id, first offset, the stored segment, the stored index
/// page holding its entry.
pub type FetchedSegment = (u64, u64, Vec<u8>, Vec<u8>);

impl Broker {
    /// The segments maintenance should compress at `now`, oldest first in each partition: those that
    /// wait and were pushed at least [`COMPRESS_AFTER_MS`] before, up to [`COMPRESS_BYTES_PER_PASS`]
    /// stored bytes. Empty in a build that does not compress.
    pub fn segments_to_compress(&self, now: i64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        if !segment::COMPRESSES {
            return out;
        }
        let due = now.max(self.now_ms).saturating_sub(COMPRESS_AFTER_MS);
        let mut bytes = 0u64;
        for p in self.partitions.values() {
            if p.compress_from == u64::MAX {
                continue;
            }
            let from = p.segments.partition_point(|s| s.last < p.compress_from);
            let paged = p.segments.len() - p.unpaged.len();
            for seg in p.segments.range(from..paged) {
                if seg.created_ms > due || bytes >= COMPRESS_BYTES_PER_PASS {
                    break;
                }
                bytes += u64::from(seg.stored_bytes);
                out.push((p.id, seg.first));
            }
            if bytes >= COMPRESS_BYTES_PER_PASS {
                break;
            }
        }
        out
    }

    /// The key's first offset of the index page holding the entry of segment (pid, first), if it is in
    /// one.
    pub fn index_page_of(&self, pid: u64, first: u64) -> Option<u64> {
        self.partitions
            .get(&pid)
            .and_then(|p| super::pages::page_of(p, first))
    }

    /// The stored bytes of segment (pid, first), if memory knows it.
    #[cfg(feature = "deflate")]
    pub fn segment_stored_bytes(&self, pid: u64, first: u64) -> Option<u64> {
        let p = self.partitions.get(&pid)?;
        let at = p.segments.partition_point(|s| s.first < first);
        p.segments
            .get(at)
            .filter(|s| s.first == first)
            .map(|s| u64::from(s.stored_bytes))
    }

    /// Rewrites segments read back from the store (in the order [`Self::segments_to_compress`] named
    /// them) as format 1, and the pages holding their entries, and returns how many were rewritten. A
    /// segment that is no longer stored, no longer waits, whose page is not the one read, or whose stored
    /// entry does not match memory is left as it is (it stays readable as it is).
    #[cfg(feature = "deflate")]
    pub fn compress_segments(&mut self, fetched: &[FetchedSegment]) -> u64 {
        use super::pages::{decode_index_record, encode_page};
        let mut done = 0;
        // Pages read: (pid, page's first offset, its entries as updated so far, whether any was).
        let mut pages: Vec<(u64, u64, Vec<super::records::DecodedEntry>, bool)> = Vec::new();
        for (pid, first, stored, page_bytes) in fetched {
            let (pid, first) = (*pid, *first);
            let Some(page) = self.index_page_of(pid, first) else {
                continue;
            };
            let Some(p) = self.partitions.get_mut(&pid) else {
                continue;
            };
            if p.compress_from > first {
                continue;
            }
            let at = p.segments.partition_point(|s| s.first < first);
            let key = index_entry_key(pid, page);
            let slot = match pages
                .iter()
                .position(|(q, f, _, _)| (*q, *f) == (pid, page))
            {
                Some(slot) => slot,
                None => {
                    let Ok(entries) = decode_index_record(&key, page_bytes) else {
                        continue;
                    };
                    pages.push((pid, page, entries, false));
                    pages.len() - 1
                }
            };
            let Some(entry) = pages[slot].2.iter_mut().find(|e| e.meta.first == first) else {
                continue;
            };
            if entry.meta != p.segments[at] {
                continue;
            }
            let Ok(compressed) = segment::compress(stored) else {
                continue;
            };
            let old_bytes = u64::from(p.segments[at].stored_bytes);
            if let Some(bytes) = &compressed {
                p.segments[at].stored_bytes = bytes.len() as u32;
            }
            let meta = p.segments[at];
            p.compress_from = p.segments.get(at + 1).map_or(u64::MAX, |s| s.first);
            self.stored_bytes = self.stored_bytes - old_bytes + u64::from(meta.stored_bytes);
            if let Some(bytes) = compressed {
                self.changes.put(segment_key(pid, first), bytes);
            }
            entry.meta = meta;
            entry.pending = false;
            pages[slot].3 = true;
            done += 1;
        }
        for (pid, page, mut entries, _) in pages.into_iter().filter(|page| page.3) {
            self.refresh_page_entries(pid, &mut entries);
            let bytes = encode_page(
                entries
                    .iter()
                    .map(|e| (&e.meta, e.fingerprints.as_slice(), e.pending)),
            );
            self.changes.put(index_entry_key(pid, page), bytes);
        }
        done
    }

    /// Sets the entries of a page read back for rewriting to what memory holds for their segments. The
    /// page may have been read before an earlier pass's rewrite of it landed (two passes whose reads
    /// overlap): its other entries would then put back what that pass changed (a compressed segment
    /// stated as waiting, at its old size). Memory holds everything committed or in flight before this
    /// rewrite, so it is what the page must say. An entry of a segment retention deleted is left as it
    /// is (the open skips it).
    #[cfg(feature = "deflate")]
    fn refresh_page_entries(&self, pid: u64, entries: &mut [super::records::DecodedEntry]) {
        let Some(p) = self.partitions.get(&pid) else {
            return;
        };
        for entry in entries {
            let at = p.segments.partition_point(|s| s.first < entry.meta.first);
            if let Some(meta) = p.segments.get(at).filter(|s| s.first == entry.meta.first) {
                entry.meta = *meta;
                entry.pending = meta.first >= p.compress_from;
            }
        }
    }
}

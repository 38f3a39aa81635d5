//! Push: append messages to partitions, creating queues and partitions on first use, with
//! `(partition, transactionId)` dedup.

use super::api::*;
use super::fxhash::FxHashMap;
use super::meters::Meter;
use super::records;
use super::segment::{self, StoredMessage};
use super::state::*;
use super::txindex;
use super::Broker;
use std::collections::BTreeMap;
use std::rc::Rc;

/// Why a push with a plain payload for a queue that has `encryptionEnabled` was refused.
pub const UNSEALED_PUSH: &str =
    "encryptionEnabled was turned on during this push: nothing was pushed, send it again";

/// The new messages of one push for one partition, and the names its results share.
struct Batch {
    pid: u64,
    messages: Vec<StoredMessage>,
    queue: SharedStr,
    partition: SharedStr,
    partition_id: SharedStr,
}

/// What [`Broker::look_up_push`] found for a push's items, before the engine loads what it names.
pub struct PushLookup {
    /// The segments the push will read that are not loaded.
    pub segments: Vec<(u64, u64)>,
    /// Set when no sent transaction id had a candidate segment (module `txindex`): then no item can
    /// be a duplicate of a stored message for as long as no transaction id is indexed since, which
    /// the broker's count `txids_indexed`, the value here, tells. Every place that indexes ids counts
    /// (`append_segment` for a push, `index_segment` and `attach_segments` for an open); an index
    /// otherwise only loses entries (trimmed segments, deleted partitions), which makes no candidate.
    /// So the answer cannot be stale: whatever runs between the lookup and the push (the tick's
    /// timers, a drain of the maintenance buffer, another push) either indexes nothing or changes
    /// the count, and then the push looks its ids up again.
    none_stored_at: Option<u64>,
}

/// Namespace and task labels derived from a queue name: `billing.invoices.v2` -> (`billing`, `invoices`).
pub fn labels_from_name(name: &str) -> (String, String) {
    let mut parts = name.split('.');
    let namespace = parts.next().unwrap_or("").to_string();
    let task = parts.next().unwrap_or("").to_string();
    (namespace, task)
}

impl Broker {
    /// Creates `name` with push-creation defaults if it does not exist.
    pub(super) fn ensure_queue(
        &mut self,
        now: i64,
        name: &str,
        namespace: Option<&str>,
        task: Option<&str>,
    ) {
        if self.queues.contains_key(name) {
            return;
        }
        let (derived_ns, derived_task) = labels_from_name(name);
        let record = QueueRecord {
            id: self.ids.uuid_v7(now),
            name: name.to_string(),
            namespace: namespace.map(str::to_string).unwrap_or(derived_ns),
            task: task.map(str::to_string).unwrap_or(derived_task),
            created_at_ms: now,
            options: QueueOptions::push_created(),
        };
        self.queues.insert(
            name.to_string(),
            Box::new(Queue {
                record,
                partitions: BTreeMap::new(),
            }),
        );
        self.save_queue(name);
    }

    /// The id of partition `name` of `queue` (which must exist), creating the partition if needed.
    pub(super) fn ensure_partition(&mut self, now: i64, queue: &str, name: &str) -> u64 {
        if let Some(pid) = self.queues.get(queue).and_then(|q| q.partitions.get(name)) {
            return **pid;
        }
        let pid = self.config.shard.next_partition_id(self.next_partition_id);
        self.next_partition_id = pid + 1;
        self.partitions
            .insert(pid, Box::new(Partition::new(pid, queue, name, now)));
        if let Some(q) = self.queues.get_mut(queue) {
            q.partitions.insert(name.to_string(), Box::new(pid));
        }
        self.save_partition(pid);
        self.save_format();
        pid
    }

    /// The message stored at `offset` of partition `pid`, from the segment cache. `None` when no segment
    /// holds the offset, or when its segment is not loaded (a miss the engine sees and repairs).
    pub(super) fn stored_message(&self, pid: u64, offset: u64) -> Option<StoredMessage> {
        let p = self.partitions.get(&pid)?;
        let seg = p.segment_of(offset)?;
        let decoded = self.cache.get(pid, seg.first)?;
        decoded.get((offset - seg.first) as usize).cloned()
    }

    /// The offset of the stored message of partition `pid` with `transaction_id`, if any (retained or
    /// not: a trimmed message's segment may still be stored). Reads the candidate segments the
    /// transaction-id index names; a candidate that is not loaded is a miss.
    pub(super) fn find_transaction(&self, pid: u64, transaction_id: &str) -> Option<u64> {
        let p = self.partitions.get(&pid)?;
        let fingerprint = txindex::fingerprint(transaction_id);
        for seq in p.txids.candidates(fingerprint) {
            let Some(seg) = p.segment_by_seq(seq) else {
                continue;
            };
            let found =
                self.cache
                    .position_of_transaction(pid, seg.first, transaction_id, fingerprint);
            if let Some(Some(at)) = found {
                return Some(seg.first + at as u64);
            }
        }
        None
    }

    /// The segments [`Self::find_transaction`] would read for `transaction_id` that are not loaded.
    /// True when it would read any (loaded or not).
    pub(super) fn transaction_candidates(
        &self,
        pid: u64,
        transaction_id: &str,
        out: &mut Vec<(u64, u64)>,
    ) -> bool {
        let Some(p) = self.partitions.get(&pid) else {
            return false;
        };
        let mut any = false;
        for seq in p.txids.candidates(txindex::fingerprint(transaction_id)) {
            if let Some(seg) = p.segment_by_seq(seq) {
                any = true;
                self.want_segment(pid, seg.first, out);
            }
        }
        any
    }

    /// Adds segment (pid, first) to `out` unless it is loaded or already there.
    pub(super) fn want_segment(&self, pid: u64, first: u64, out: &mut Vec<(u64, u64)>) {
        if !self.cache.contains(pid, first) && !out.contains(&(pid, first)) {
            out.push((pid, first));
        }
    }

    /// The segments a push of `items` will read (to check transaction ids against stored ones) that
    /// are not loaded.
    pub fn segments_needed_for_push(&self, items: &[PushItem]) -> Vec<(u64, u64)> {
        self.look_up_push(items).segments
    }

    /// The first look at the transaction ids `items` send: the segments the push will read that are
    /// not loaded, and whether it need not look again ([`PushLookup`]).
    pub fn look_up_push(&self, items: &[PushItem]) -> PushLookup {
        let mut segments = Vec::new();
        let mut any = false;
        let mut last = None;
        for item in items {
            let Some(transaction_id) = item.transaction_id.as_deref().filter(|t| !t.is_empty())
            else {
                continue;
            };
            if let Some(pid) = self.item_partition(item, &mut last) {
                any |= self.transaction_candidates(pid, transaction_id, &mut segments);
            }
        }
        PushLookup {
            segments,
            none_stored_at: (!any).then_some(self.txids_indexed),
        }
    }

    /// The id of the existing partition `item` names, if any. `last` holds the previous item's answer
    /// (queue, partition, id), reused while the items name the same partition, as a push's items
    /// usually do.
    fn item_partition<'i>(
        &self,
        item: &'i PushItem,
        last: &mut Option<(&'i str, &'i str, Option<u64>)>,
    ) -> Option<u64> {
        let partition = if item.partition.is_empty() {
            DEFAULT_PARTITION
        } else {
            &item.partition
        };
        if let Some((queue, name, pid)) = *last {
            if queue == item.queue && name == partition {
                return pid;
            }
        }
        let pid = self
            .queues
            .get(item.queue.as_str())
            .and_then(|q| q.partitions.get(partition))
            .map(|pid| **pid);
        *last = Some((&item.queue, partition, pid));
        pid
    }

    /// Pushes `items` (docs/protocol.md §3.1; wire-contract §1.2). Results come back in input order.
    pub fn push(&mut self, now: i64, items: Vec<PushItem>) -> CoreResult<Vec<PushResult>> {
        let mut items = items;
        self.push_taking(now, &mut items, None)
    }

    /// [`Self::push`] for a caller that may have to run the push again (the engine): `items` are taken
    /// only once every stored message the push compares them with was found loaded. After a segment
    /// miss (see `SegmentCache`) they are left in place and nothing is pushed; the engine drops the
    /// command's effects, loads the segment and calls again. So the engine need not clone the items
    /// for each run. `lookup`: what [`Self::look_up_push`] found for these `items` (if the caller
    /// has it), which spares the push looking its sent ids up again when it still holds.
    pub fn push_taking(
        &mut self,
        now: i64,
        items: &mut Vec<PushItem>,
        lookup: Option<PushLookup>,
    ) -> CoreResult<Vec<PushResult>> {
        let now = self.tick(now);
        self.check_quota(Some(now), &[items], 0)?;
        self.check_sealed(items)?;
        let none_stored = lookup.is_some_and(|l| l.none_stored_at == Some(self.txids_indexed));
        let stored = if none_stored {
            Vec::new()
        } else {
            self.stored_duplicates(items)
        };
        if self.cache.has_misses() {
            return Ok(Vec::new());
        }
        Ok(self.append_items(now, std::mem::take(items), 0, stored))
    }

    /// Refuses (409) a push that carries a plain payload for a queue that has `encryptionEnabled`. The
    /// HTTP layer seals the payloads of such queues, reading the flag before the command runs; a configure
    /// that turned it on in between (both waiting for the command gate) must not let this push store its
    /// payload in plain text, so nothing of it is pushed and the client sends it again, sealed then.
    #[inline(never)]
    pub(super) fn check_sealed(&self, items: &[PushItem]) -> CoreResult<()> {
        let unsealed = items.iter().any(|item| {
            self.queue_options(&item.queue)
                .is_some_and(|o| o.encryption_enabled)
                && envelope_of(&item.payload).is_none()
        });
        if unsealed {
            return Err(CoreError {
                kind: ErrorKind::Conflict,
                message: UNSEALED_PUSH.to_string(),
            });
        }
        Ok(())
    }

    /// The bytes storing `items` adds to the stored segments (each message's
    /// [`segment::message_bytes`] and a segment's frame for each run of items on one partition), never
    /// less: exact unless an item is a duplicate (it stores nothing) or the items span partitions (an
    /// item's offset is counted as its partition's next one, plus `ahead`, plus its position in
    /// `items`). `at`: the command's time and how many messages it stores before these (a transaction's
    /// earlier pushes); `None` for a prepared part, applied later: every offset and time at its longest.
    pub(super) fn stored_size(&self, items: &[PushItem], at: Option<(i64, u64)>) -> u64 {
        let (now, ahead) = at.unwrap_or((i64::MIN, u64::MAX));
        let mut last = None;
        let mut next = 0;
        let mut total = 0;
        for (i, item) in items.iter().enumerate() {
            let run = last.map(|(queue, partition, _)| (queue, partition));
            let pid = self.item_partition(item, &mut last);
            if last.map(|(queue, partition, _)| (queue, partition)) != run {
                next = pid
                    .and_then(|pid| self.partitions.get(&pid))
                    .map_or(0, |p| p.next_offset);
                total += segment::FRAME_BYTES;
            }
            total += segment::message_bytes(
                next.saturating_add(ahead).saturating_add(i as u64),
                now,
                item.transaction_id.as_deref().filter(|t| !t.is_empty()),
                item.trace_id.as_deref(),
                item.producer_sub.as_deref(),
                item.payload.len(),
            );
        }
        total
    }

    /// For each item with a transaction id, the stored message of its partition carrying that id
    /// (offset and message id), if any. Read-only: pushes append only after every item was looked up,
    /// so the answers hold for the whole push. Empty (no allocation) when no item sent an id: every id
    /// will be minted.
    fn stored_duplicates(&self, items: &[PushItem]) -> Vec<Option<(u64, SharedStr)>> {
        let sends_ids = items
            .iter()
            .any(|i| i.transaction_id.as_deref().is_some_and(|t| !t.is_empty()));
        if !sends_ids {
            return Vec::new();
        }
        let mut last = None;
        items
            .iter()
            .map(|item| {
                let transaction_id = item.transaction_id.as_deref().filter(|t| !t.is_empty())?;
                let pid = self.item_partition(item, &mut last)?;
                let offset = self.find_transaction(pid, transaction_id)?;
                let id = self.stored_message(pid, offset).map(|m| m.id)?;
                Some((offset, id))
            })
            .collect()
    }

    /// Appends items; `index_base` offsets the reported indexes (transactions number results flat).
    pub(super) fn push_items(
        &mut self,
        now: i64,
        items: Vec<PushItem>,
        index_base: usize,
    ) -> Vec<PushResult> {
        let stored = self.stored_duplicates(&items);
        self.append_items(now, items, index_base, stored)
    }

    /// Appends items whose stored duplicates were looked up ([`Self::stored_duplicates`]).
    ///
    /// A transaction id the broker mints is a fresh UUIDv7 (the time, a counter and 62 bits of the
    /// seeded generator's output): it is not looked up, neither in the batch nor in storage, because no
    /// message can carry it yet (docs/decisions.md, "Core speed: where the time went").
    ///
    /// Each partition's queue, name and id are made once as shared text for every result of the
    /// partition, and a message's ids are shared by its stored copy and its result.
    fn append_items(
        &mut self,
        now: i64,
        items: Vec<PushItem>,
        index_base: usize,
        stored: Vec<Option<(u64, SharedStr)>>,
    ) -> Vec<PushResult> {
        // New messages per partition, in input order, written as one segment per partition.
        let mut batches: Vec<Batch> = Vec::new();
        // Transaction ids sent with this call -> (partition, index in its batch) of the first message
        // queued with it. The same id queued on two partitions (rare) falls back to a scan of the batch.
        let mut queued: FxHashMap<SharedStr, (u64, usize)> = FxHashMap::default();
        let mut results = Vec::with_capacity(items.len());
        // The batch of the previous item, looked up again only when the next names another.
        let mut last: Option<usize> = None;
        // The producer of the previous item, shared while the next names the same.
        let mut last_sub: Option<SharedStr> = None;
        let total = items.len();
        // Shorter than `items` (empty) when no item sent a transaction id.
        let mut stored = stored.into_iter();
        for (i, item) in items.into_iter().enumerate() {
            let stored = stored.next().flatten();
            let partition = if item.partition.is_empty() {
                DEFAULT_PARTITION
            } else {
                &item.partition
            };
            let slot = match last {
                Some(slot) if self.is_partition(batches[slot].pid, &item.queue, partition) => slot,
                _ => {
                    self.ensure_queue(
                        now,
                        &item.queue,
                        item.namespace.as_deref(),
                        item.task.as_deref(),
                    );
                    let pid = self.ensure_partition(now, &item.queue, partition);
                    match batches.iter().position(|b| b.pid == pid) {
                        Some(slot) => slot,
                        None => {
                            batches.push(Batch {
                                pid,
                                // Room for every item left (a push usually names one partition); the
                                // segment gives back what it did not use (append_segment).
                                messages: Vec::with_capacity(total - i),
                                queue: SharedStr::from(item.queue.as_str()),
                                partition: SharedStr::from(partition),
                                partition_id: SharedStr::from(pid.to_string()),
                            });
                            batches.len() - 1
                        }
                    }
                }
            };
            last = Some(slot);
            let pid = batches[slot].pid;
            // A sent id is a part of the request body until the segment is written (append_segment).
            let sent = item.transaction_id.filter(|t| !t.is_empty());
            let minted = sent.is_none();
            let transaction_id = match sent {
                Some(t) => t,
                None => self.ids.uuid_v7_shared(now),
            };
            let trace_id = item.trace_id.map(SharedStr::from);
            // Duplicates of this batch first, then of stored segments.
            let in_batch = if minted {
                None
            } else {
                let batch = &batches[slot].messages;
                match queued.get(transaction_id.as_str()) {
                    None => None,
                    Some(&(p, at)) if p == pid => Some(&batch[at]),
                    Some(_) => batch.iter().find(|m| m.transaction_id == transaction_id),
                }
                .map(|m| (m.offset, m.id.clone()))
            };
            let names = &batches[slot];
            if let Some((offset, winner)) = in_batch.or(stored) {
                results.push(PushResult {
                    index: index_base + i,
                    status: PushStatus::Duplicate,
                    message_id: winner,
                    transaction_id,
                    partition_id: names.partition_id.clone(),
                    queue: names.queue.clone(),
                    partition: names.partition.clone(),
                    offset,
                    trace_id,
                });
                continue;
            }
            let p = self.partitions.get_mut(&pid).expect("ensured above");
            let offset = p.next_offset;
            p.next_offset += 1;
            let id = self.ids.uuid_v7_shared(now);
            let producer_sub = match (item.producer_sub, &last_sub) {
                (None, _) => None,
                (Some(sub), Some(shared)) if *shared == sub => Some(shared.clone()),
                (Some(sub), _) => {
                    let shared = SharedStr::from(sub);
                    last_sub = Some(shared.clone());
                    Some(shared)
                }
            };
            results.push(PushResult {
                index: index_base + i,
                status: PushStatus::Queued,
                message_id: id.clone(),
                transaction_id: transaction_id.clone(),
                partition_id: names.partition_id.clone(),
                queue: names.queue.clone(),
                partition: names.partition.clone(),
                offset,
                trace_id: trace_id.clone(),
            });
            let batch = &mut batches[slot].messages;
            if !minted {
                queued
                    .entry(transaction_id.clone())
                    .or_insert((pid, batch.len()));
            }
            batch.push(StoredMessage {
                offset,
                id,
                transaction_id,
                trace_id,
                producer_sub,
                created_at_ms: now,
                payload: item.payload,
            });
        }
        // Segments in partition-id order, as before (the order of the change set does not matter, but
        // the order of wakeups and stats stays the same).
        super::sort::sort_by_key(&mut batches, |b| b.pid);
        for Batch { pid, messages, .. } in batches {
            if messages.is_empty() {
                continue;
            }
            self.count(now, Meter::Pushed, messages.len() as u64);
            self.append_segment(now, pid, messages);
        }
        results
    }

    /// True when partition `pid` is partition `name` of queue `queue`.
    fn is_partition(&self, pid: u64, queue: &str, name: &str) -> bool {
        self.partitions
            .get(&pid)
            .is_some_and(|p| p.queue == queue && p.name == name)
    }

    /// Stores `batch` (offsets contiguous, from the partition's old end) as one new segment of `pid`:
    /// the segment goes in the change set (its index entry in a later page), the decoded batch in the
    /// cache, its texts parts of one text ([`segment::encode_shared`]) and the messages one slice of
    /// their exact length (no spare capacity of the batch kept).
    fn append_segment(&mut self, now: i64, pid: u64, batch: Vec<StoredMessage>) {
        let first = batch[0].offset;
        let last = batch[batch.len() - 1].offset;
        let (bytes, batch) = segment::encode_shared(batch);
        let fingerprints: Vec<u32> = batch
            .iter()
            .map(|m| txindex::fingerprint(&m.transaction_id))
            .collect();
        let queue = {
            let p = self
                .partitions
                .get_mut(&pid)
                .expect("batched partitions exist");
            let meta = SegmentMeta {
                first,
                last,
                seq: p.next_segment_seq,
                created_ms: now,
                stored_bytes: bytes.len() as u32,
            };
            p.next_segment_seq += 1;
            p.txids.add(meta.seq, fingerprints.iter().copied());
            p.segments.push_back(meta);
            self.txids_indexed += 1;
            // Written as JSON text; a build that compresses does it in maintenance (module
            // `compaction`).
            let pending = segment::COMPRESSES;
            if pending {
                p.compress_from = p.compress_from.min(first);
            }
            p.queue.clone()
        };
        self.stored_bytes += bytes.len() as u64;
        self.changes.put(records::segment_key(pid, first), bytes);
        let weight = segment::decoded_weight(&batch);
        self.cache.insert(
            pid,
            first,
            Rc::from(batch),
            weight,
            fingerprints.clone(),
            true,
        );
        // Its index entry goes in a page, written with the partition's next ones (module `pages`).
        self.note_unpaged(pid, fingerprints);
        self.after_append(&queue, pid);
    }

    /// A partition gained messages: every group with a ready set on its queue may claim it now.
    pub(super) fn after_append(&mut self, queue: &str, pid: u64) {
        self.refresh_ready_sets(queue, pid);
        self.wake_queue(queue.to_string());
    }

    /// Refreshes partition `pid` in every ready set of `queue`, the groups with no lane there included.
    pub(super) fn refresh_ready_sets(&mut self, queue: &str, pid: u64) {
        // The ready sets of `queue` are adjacent in the sorted map, from (queue, "") on.
        let start = self
            .groups
            .find_index(&(queue.to_string(), String::new()))
            .unwrap_or_else(|insert_at| insert_at);
        let groups: Vec<String> = (start..self.groups.len())
            .map_while(|i| self.groups.get_indexed(i))
            .take_while(|((q, _), _)| q == queue)
            .map(|((_, g), _)| g.clone())
            .collect();
        for group in groups {
            self.refresh(queue, &group, pid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::BrokerConfig;
    use serde_json::json;

    const NOW: i64 = 1_767_225_600_000;

    fn item(partition: &str, transaction_id: &str) -> PushItem {
        PushItem {
            partition: partition.into(),
            transaction_id: Some(transaction_id.into()),
            ..PushItem::new("q", json!(1))
        }
    }

    fn statuses(results: &[PushResult]) -> Vec<PushStatus> {
        results.iter().map(|r| r.status.clone()).collect()
    }

    /// A lookup that found no stored id is used only while no id was indexed since: the pushes
    /// between it and its push below (another producer's, which stores the same id) each index one,
    /// and the push looks its ids up again and finds them.
    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn a_lookup_is_not_used_once_an_id_was_indexed_since() {
        let mut b = Broker::new(BrokerConfig::default(), 1);
        b.push(NOW, vec![item("p", "x")]).unwrap();
        // `y` on the existing partition, `z` on one not made yet.
        let mut items = vec![item("p", "y"), item("new", "z")];
        let lookup = b.look_up_push(&items);
        assert!(lookup.segments.is_empty());
        assert!(lookup.none_stored_at.is_some());
        b.push(NOW, vec![item("p", "y"), item("new", "z")]).unwrap();
        let results = b.push_taking(NOW, &mut items, Some(lookup)).unwrap();
        assert_eq!(
            statuses(&results),
            [PushStatus::Duplicate, PushStatus::Duplicate]
        );
    }

    /// The same for a segment an open finds past the index (`index_found_segment`): the push looks
    /// again, misses the segment (not loaded) and pushes nothing, for the engine to load it.
    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn a_lookup_is_not_used_once_an_open_indexed_a_segment_since() {
        let mut b = Broker::new(BrokerConfig::default(), 1);
        b.push(NOW, vec![item("p", "x")]).unwrap();
        let pid = *b.queues["q"].partitions["p"];
        let mut items = vec![item("p", "y")];
        let lookup = b.look_up_push(&items);
        assert!(lookup.none_stored_at.is_some());
        let first = b.partitions[&pid].next_offset;
        let found = segment::encode(&[StoredMessage {
            offset: first,
            id: "m".into(),
            transaction_id: "y".into(),
            trace_id: None,
            producer_sub: None,
            created_at_ms: NOW,
            payload: json!(1).into(),
        }]);
        b.index_found_segment(pid, first, &found).unwrap();
        let results = b.push_taking(NOW, &mut items, Some(lookup)).unwrap();
        assert!(results.is_empty());
        assert_eq!(items.len(), 1, "left for the next run");
        assert_eq!(b.take_segment_misses(), [(pid, first)]);
    }

    /// A lookup that still holds spares the second one and answers as it would.
    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn a_lookup_that_holds_answers_as_looking_again_would() {
        let mut b = Broker::new(BrokerConfig::default(), 1);
        b.push(NOW, vec![item("p", "x")]).unwrap();
        let mut items = vec![item("p", "y"), item("p", "y"), item("new", "z")];
        let lookup = b.look_up_push(&items);
        assert!(lookup.none_stored_at.is_some());
        let results = b.push_taking(NOW, &mut items, Some(lookup)).unwrap();
        assert_eq!(
            statuses(&results),
            [
                PushStatus::Queued,
                PushStatus::Duplicate,
                PushStatus::Queued
            ]
        );
        // An id that has a candidate: the lookup says so, and the push looks it up.
        let mut items = vec![item("p", "x")];
        let lookup = b.look_up_push(&items);
        assert_eq!(lookup.none_stored_at, None);
        let results = b.push_taking(NOW, &mut items, Some(lookup)).unwrap();
        assert_eq!(statuses(&results), [PushStatus::Duplicate]);
    }
}

//! Bulk dead-letter work (issue 16): select rows by a filter, count and sample them, and replay or
//! delete them in chunks.
//!
//! The core does one chunk per command ([`Broker::dlq_replay_rows`], [`Broker::dlq_delete_rows`]); the
//! caller (the HTTP route) picks the next chunk with [`Broker::dlq_select`] between commands, so a large
//! dead-letter queue never holds the command gate for long. A replay works by message address, as
//! `admin.retryMessage` does: the newest row at the address is pushed once as `transactionId`
//! `dlq:<row id>` and every row at the address goes, so a message that two groups filed comes back
//! once, and replaying it twice adds nothing.

use super::api::*;
use super::fxhash::FxHashMap;
use super::records::dead_letter_key;
use super::sort::sort_by_key;
use super::state::DeadLetter;
use super::Broker;

/// Which dead-letter rows a bulk call selects (every `None` matches anything).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DlqFilter {
    /// Queue name.
    pub queue: Option<String>,
    /// Consumer group (`QUEUE_MODE_GROUP` for queue mode).
    pub consumer_group: Option<String>,
    /// Partition name.
    pub partition: Option<String>,
    /// A substring of the error.
    pub error_contains: Option<String>,
    /// Dead-lettered at or after this instant (Unix ms).
    pub from_ms: Option<i64>,
    /// Dead-lettered at or before this instant (Unix ms).
    pub to_ms: Option<i64>,
}

impl DlqFilter {
    fn matches(&self, d: &DeadLetter) -> bool {
        self.queue.as_ref().is_none_or(|q| &d.queue == q)
            && self.consumer_group.as_ref().is_none_or(|g| &d.group == g)
            && self.partition.as_ref().is_none_or(|p| &d.partition == p)
            && self
                .error_contains
                .as_ref()
                .is_none_or(|e| d.error.contains(e.as_str()))
            && self.from_ms.is_none_or(|t| d.failed_at_ms >= t)
            && self.to_ms.is_none_or(|t| d.failed_at_ms <= t)
    }
}

/// A selection of rows: ids in filing order, and where the next chunk starts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DlqSelection {
    /// Row ids, oldest filing first.
    pub ids: Vec<String>,
    /// The filing sequence of the last row selected (the next chunk starts after it).
    pub last_seq: Option<u64>,
}

impl Broker {
    /// The filing sequence the next dead letter will get: rows filed from now on are at or above it
    /// (a bulk call bounds itself by it, so it does not chase rows filed while it runs).
    pub fn dlq_next_seq(&self) -> u64 {
        self.next_dead_letter_seq
    }

    /// Up to `max` rows matching `filter` with filing sequence in `(after, before)`, oldest first.
    pub fn dlq_select(
        &self,
        filter: &DlqFilter,
        after: Option<u64>,
        before: u64,
        max: usize,
    ) -> DlqSelection {
        let mut rows: Vec<&DeadLetter> = self
            .dead_letters
            .values()
            .map(|d| &**d)
            .filter(|d| after.is_none_or(|a| d.seq > a) && d.seq < before && filter.matches(d))
            .collect();
        rows.sort_by_key(|d| d.seq);
        rows.truncate(max);
        DlqSelection {
            last_seq: rows.last().map(|d| d.seq),
            ids: rows.into_iter().map(|d| d.id.clone()).collect(),
        }
    }

    /// How many rows match `filter`, and the views of the first `sample` (oldest first).
    pub fn dlq_preview(&self, filter: &DlqFilter, sample: usize) -> (usize, Vec<DeadLetterView>) {
        let all = self.dlq_select(filter, None, u64::MAX, usize::MAX);
        let sample = all
            .ids
            .iter()
            .take(sample)
            .filter_map(|id| self.dead_letters.get(id))
            .map(|d| Self::dead_letter_view(d))
            .collect();
        (all.ids.len(), sample)
    }

    /// Replays the rows `ids` still present (one chunk), one message address (partition, transaction
    /// id) at a time, as a replay by address does: the newest row at the address is pushed once, and
    /// every row there goes, other groups' rows too (the copy reaches every group; a second copy would
    /// reach each group twice). One reply per address replayed, in the order of its first row in `ids`.
    pub fn dlq_replay_rows(&mut self, now: i64, ids: &[String]) -> Vec<ReplayReply> {
        let now = self.tick(now);
        let mut at_address = self.rows_at_addresses(ids);
        let mut replies = Vec::new();
        for id in ids {
            let Some(letter) = self.dead_letters.get(id) else {
                continue; // gone before this chunk, or replayed with an earlier row of its address
            };
            let pid = letter.partition_id;
            let Some(rows) = at_address
                .get_mut(letter.transaction_id.as_str())
                .and_then(|by_partition| by_partition.remove(&pid))
            else {
                continue;
            };
            let Some(newest) = rows.last().and_then(|(_, r)| self.dead_letters.get(r)) else {
                continue;
            };
            let newest = (**newest).clone();
            let remove = rows.into_iter().map(|(_, r)| r).collect();
            replies.push(self.replay(now, newest, remove));
        }
        replies
    }

    /// Every dead-letter row at the message addresses of the rows `ids`: by transaction id, then
    /// partition id, the rows' (filing sequence, row id), oldest filing first. One pass over the dead
    /// letters, as `dlq_select` makes per chunk.
    fn rows_at_addresses(
        &self,
        ids: &[String],
    ) -> FxHashMap<String, FxHashMap<u64, Vec<(u64, String)>>> {
        let mut at: FxHashMap<String, FxHashMap<u64, Vec<(u64, String)>>> = FxHashMap::default();
        for id in ids {
            if let Some(d) = self.dead_letters.get(id) {
                at.entry(d.transaction_id.clone())
                    .or_default()
                    .insert(d.partition_id, Vec::new());
            }
        }
        for d in self.dead_letters.values() {
            if let Some(rows) = at
                .get_mut(d.transaction_id.as_str())
                .and_then(|by_partition| by_partition.get_mut(&d.partition_id))
            {
                rows.push((d.seq, d.id.clone()));
            }
        }
        for rows in at
            .values_mut()
            .flat_map(|by_partition| by_partition.values_mut())
        {
            sort_by_key(rows, |(seq, _)| *seq);
        }
        at
    }

    /// Deletes the rows `ids` still present (one chunk). Returns how many went.
    pub fn dlq_delete_rows(&mut self, now: i64, ids: &[String]) -> usize {
        self.tick(now);
        let mut deleted = 0;
        for id in ids {
            if self.dead_letters.remove(id).is_some() {
                self.changes.delete(dead_letter_key(id));
                deleted += 1;
            }
        }
        deleted
    }
}

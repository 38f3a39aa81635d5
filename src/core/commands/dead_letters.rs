//! Dead letters: replay and delete, one at a time or by address (docs/protocol.md §3.7).

use crate::core::api::*;
use crate::core::records::*;
use crate::core::state::*;
use crate::core::Broker;

impl Broker {
    /// Replays one dead letter: a copy goes to the end of its partition as `dlq:<id>`, the row goes.
    pub fn replay_dead_letter(&mut self, now: i64, id: &str) -> CoreResult<ReplayReply> {
        let now = self.tick(now);
        let letter = self
            .dead_letters
            .get(id)
            .cloned()
            .ok_or_else(|| CoreError::not_found(format!("Dead letter {id} not found")))?;
        Ok(self.replay(now, *letter, vec![id.to_string()]))
    }

    /// Replays the dead letter at a message address (`admin.retryMessage`): the newest row there is
    /// pushed once; every row at the address is removed.
    pub fn replay_address(
        &mut self,
        now: i64,
        partition_id: &str,
        transaction_id: &str,
    ) -> CoreResult<ReplayReply> {
        let now = self.tick(now);
        let rows = self.rows_at(partition_id, transaction_id);
        let newest = rows
            .last()
            .and_then(|id| self.dead_letters.get(id).cloned())
            .ok_or_else(|| CoreError::not_found("No dead letter at this address"))?;
        Ok(self.replay(now, *newest, rows))
    }

    pub(in crate::core) fn replay(
        &mut self,
        now: i64,
        letter: DeadLetter,
        remove: Vec<String>,
    ) -> ReplayReply {
        let item = PushItem {
            queue: letter.queue.as_str().into(),
            partition: letter.partition.as_str().into(),
            payload: letter.payload.clone(),
            transaction_id: Some(format!("dlq:{}", letter.id).into()),
            trace_id: letter.trace_id.clone(),
            namespace: None,
            task: None,
            producer_sub: None,
        };
        let pushed = self.push_items(now, vec![item], 0).remove(0);
        for id in &remove {
            self.dead_letters.remove(id);
            self.changes.delete(dead_letter_key(id));
        }
        ReplayReply {
            id: letter.id.clone(),
            transaction_id: pushed.transaction_id.into(),
            message_id: pushed.message_id.into(),
            queue: pushed.queue.into(),
            partition: pushed.partition.into(),
            partition_id: pushed.partition_id.into(),
            status: pushed.status,
            rows_removed: remove.len(),
        }
    }

    /// Dead-letter row ids at a message address, oldest filing first.
    fn rows_at(&self, partition_id: &str, transaction_id: &str) -> Vec<String> {
        let Ok(pid) = partition_id.parse::<u64>() else {
            return Vec::new();
        };
        let mut rows: Vec<&DeadLetter> = self
            .dead_letters
            .values()
            .filter(|d| d.partition_id == pid && d.transaction_id == transaction_id)
            .map(|d| &**d)
            .collect();
        crate::core::sort::sort_by_key(&mut rows, |d| d.seq);
        rows.into_iter().map(|d| d.id.clone()).collect()
    }

    /// Deletes the dead-letter rows at a message address (never a live message).
    pub fn delete_dead_letters(
        &mut self,
        now: i64,
        partition_id: &str,
        transaction_id: &str,
    ) -> CoreResult<usize> {
        self.tick(now);
        let rows = self.rows_at(partition_id, transaction_id);
        if rows.is_empty() {
            return Err(CoreError::not_found("No dead letter at this address"));
        }
        for id in &rows {
            self.dead_letters.remove(id);
            self.changes.delete(dead_letter_key(id));
        }
        Ok(rows.len())
    }
}

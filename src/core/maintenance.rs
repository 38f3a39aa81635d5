//! Maintenance mode (wire-contract §1.11): push buffering and pop pausing, both stored so they survive
//! a restart.
//!
//! - **Push maintenance** on: a push is not applied to its queues. Its items (transaction ids minted
//!   now when absent, payloads as the HTTP layer sealed them) are stored in the buffer, one record per
//!   item, and answered `buffered`. Turned off, the buffer drains into the queues in buffer order,
//!   a chunk per command: each chunk's push and the removal of its buffer records are one commit, so a
//!   crash mid-drain neither loses nor repeats an item. While items remain buffered, a push drains them
//!   first, so nothing overtakes a buffered message.
//! - **Pop maintenance** on: every pop claims nothing (an empty reply; a long-poll parks until the mode
//!   is turned off or its deadline passes).
//!
//! Records: `m/mode` holds the switches and the buffer's bounds; `b/<seq>` (16 hex digits) holds one
//! buffered item. Only `m/mode` is read at open; buffered items are read when they are drained.

use super::api::*;
use super::fields::Fields;
use super::Broker;
use crate::store::StoreError;
use serde::Serialize;

/// The key of the mode record.
pub const MODE_KEY: &str = "m/mode";
/// The prefix of buffered push items.
pub const BUFFER_PREFIX: &str = "b/";
/// Most buffered items one drain command pushes.
pub const DRAIN_CHUNK: u64 = 500;

/// The maintenance switches and the push buffer's bounds (stored at [`MODE_KEY`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModeState {
    /// Pushes are buffered instead of applied.
    pub push_paused: bool,
    /// Pops claim nothing.
    pub pop_paused: bool,
    /// Sequence number of the oldest buffered item (== `next_seq` when the buffer is empty).
    pub first_seq: u64,
    /// Sequence number the next buffered item gets.
    pub next_seq: u64,
}

impl ModeState {
    /// Items waiting in the buffer.
    pub fn buffered(&self) -> u64 {
        self.next_seq - self.first_seq
    }
}

/// The key of buffered item `seq`.
pub fn buffer_key(seq: u64) -> String {
    format!("{BUFFER_PREFIX}{seq:016x}")
}

/// A buffered push item as stored.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BufferedRecord<'a> {
    queue: &'a str,
    partition: &'a str,
    payload: &'a Payload,
    transaction_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    trace_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    task: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    producer_sub: Option<&'a str>,
    buffered_at: i64,
}

/// Reads a stored buffered item back into a push item.
pub fn decode_buffered(key: &str, bytes: &[u8]) -> Result<PushItem, StoreError> {
    let read = |f: &mut Fields| -> Result<PushItem, String> {
        Ok(PushItem {
            queue: f.string("queue")?,
            partition: f.string("partition")?,
            payload: f.payload()?,
            transaction_id: Some(f.string("transactionId")?),
            trace_id: f.opt_string("traceId")?,
            namespace: f.opt_string("namespace")?,
            task: f.opt_string("task")?,
            producer_sub: f.opt_string("producerSub")?,
        })
    };
    Fields::parse(bytes)
        .and_then(|mut f| read(&mut f))
        .map_err(|e| StoreError::other(format!("stored record \"{key}\" is unreadable: {e}")))
}

/// Reads the mode record.
pub(super) fn decode_mode(key: &str, bytes: &[u8]) -> Result<ModeState, StoreError> {
    let read = |f: &mut Fields| -> Result<ModeState, String> {
        let state = ModeState {
            push_paused: f.bool("pushPaused")?,
            pop_paused: f.bool("popPaused")?,
            first_seq: f.u64("firstSeq")?,
            next_seq: f.u64("nextSeq")?,
        };
        if state.first_seq > state.next_seq {
            return Err("firstSeq is past nextSeq".to_string());
        }
        Ok(state)
    };
    Fields::parse(bytes)
        .and_then(|mut f| read(&mut f))
        .map_err(|e| StoreError::other(format!("stored record \"{key}\" is unreadable: {e}")))
}

/// One buffered item's answer (wire-contract §1.2: `status: "buffered"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferedResult {
    /// Position in the request.
    pub index: usize,
    /// Queue name.
    pub queue: String,
    /// Partition name.
    pub partition: String,
    /// The transaction id (minted when none was sent).
    pub transaction_id: String,
}

impl Broker {
    /// The maintenance switches and buffer bounds.
    pub fn mode(&self) -> &ModeState {
        &self.mode
    }

    pub(super) fn set_mode(&mut self, mode: ModeState) {
        self.mode = mode;
    }

    fn save_mode(&mut self) {
        // Plain data with string keys always serializes.
        let bytes = serde_json::to_vec(&self.mode).expect("the mode record serializes");
        self.changes.put(MODE_KEY, bytes);
    }

    /// Turns push maintenance on or off. Turning it off does not drain: the engine drains next.
    pub fn set_push_maintenance(&mut self, now: i64, on: bool) {
        self.tick(now);
        if self.mode.push_paused != on {
            self.mode.push_paused = on;
            self.save_mode();
        }
    }

    /// Turns pop maintenance on or off; turning it off wakes every parked pop.
    pub fn set_pop_maintenance(&mut self, now: i64, on: bool) {
        self.tick(now);
        if self.mode.pop_paused != on {
            self.mode.pop_paused = on;
            self.save_mode();
        }
        if !on {
            let queues: Vec<String> = self.queues.keys().cloned().collect();
            for q in queues {
                self.wake_queue(q);
            }
        }
    }

    /// Stores `items` in the push buffer (push maintenance), minting missing transaction ids.
    pub fn buffer_push(&mut self, now: i64, items: &[PushItem]) -> Vec<BufferedResult> {
        let now = self.tick(now);
        let mut results = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            let transaction_id = match item.transaction_id.as_deref() {
                Some(t) if !t.is_empty() => t.to_string(),
                _ => self.ids.uuid_v7(now),
            };
            let record = BufferedRecord {
                queue: &item.queue,
                partition: &item.partition,
                payload: &item.payload,
                transaction_id: &transaction_id,
                trace_id: item.trace_id.as_deref(),
                namespace: item.namespace.as_deref(),
                task: item.task.as_deref(),
                producer_sub: item.producer_sub.as_deref(),
                buffered_at: now,
            };
            let bytes = serde_json::to_vec(&record).expect("a buffered item serializes");
            self.changes.put(buffer_key(self.mode.next_seq), bytes);
            self.mode.next_seq += 1;
            results.push(BufferedResult {
                index,
                queue: item.queue.clone(),
                partition: item.partition.clone(),
                transaction_id,
            });
        }
        if !items.is_empty() {
            self.save_mode();
        }
        results
    }

    /// The next chunk to drain: the sequence numbers `first..end` (empty when nothing is buffered or
    /// push maintenance is on).
    pub fn next_drain_span(&self) -> (u64, u64) {
        let first = self.mode.first_seq;
        if self.mode.push_paused {
            return (first, first);
        }
        (first, self.mode.next_seq.min(first + DRAIN_CHUNK))
    }

    /// Pushes buffered items `first..first + items.len()` (read from the store by the engine) and removes
    /// their records, in one change set. Does nothing (returns 0) when the buffer no longer starts at
    /// `first` (another drain took them) or push maintenance is on again.
    pub fn drain_buffer(&mut self, now: i64, first: u64, items: &[PushItem]) -> CoreResult<u64> {
        let now = self.tick(now);
        let n = items.len() as u64;
        if self.mode.push_paused || self.mode.first_seq != first || first + n > self.mode.next_seq {
            return Ok(0);
        }
        self.push(now, items.to_vec())?;
        for seq in first..first + n {
            self.changes.delete(buffer_key(seq));
        }
        self.mode.first_seq += n;
        self.save_mode();
        Ok(n)
    }
}

//! Maintenance mode (wire-contract §1.11): push buffering and pop pausing, both stored so they survive
//! a restart.
//!
//! - **Push maintenance** on: a push is not applied to its queues. Its items (transaction ids minted
//!   now when absent, payloads as the HTTP layer sealed them) are stored in the buffer, one record per
//!   item, and answered `buffered`. The buffer holds at most [`MAX_BUFFER_BYTES`] of payloads; a push
//!   past it is refused (507), never dropped. Turned off, the buffer drains into the queues in buffer
//!   order, a chunk per command: each chunk's push and the removal of its buffer records are one
//!   commit, so a crash mid-drain neither loses nor repeats an item. While items remain buffered, a
//!   push drains them first, so nothing overtakes a buffered message.
//! - **Pop maintenance** on: every pop claims nothing (an empty reply; a long-poll parks until the mode
//!   is turned off or its deadline passes).
//!
//! Records: `m/mode` holds the switches; `b/<seq>` (16 hex digits) holds one buffered item. Both are
//! read at open: the buffer lives in memory too (it is bounded, and exists only around a maintenance
//! window).
//!
//! The push buffer is the cargo feature `ops`. A build without it (the npm module's default build)
//! still honours what is stored: pops claim nothing while pop maintenance is on, and while push
//! maintenance is on or items wait in the buffer, pushes are refused (the HTTP layer answers 503) rather
//! than applied ahead of the buffered ones.

#[cfg(feature = "ops")]
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
#[cfg(feature = "ops")]
pub const DRAIN_CHUNK: usize = 500;
/// Most payload bytes the push buffer holds.
pub const MAX_BUFFER_BYTES: u64 = 16 * 1024 * 1024;

/// The maintenance switches (stored at [`MODE_KEY`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModeState {
    /// Pushes are buffered instead of applied.
    pub push_paused: bool,
    /// Pops claim nothing.
    pub pop_paused: bool,
}

/// The switches and the push buffer.
#[derive(Debug, Default)]
pub struct Maintenance {
    /// The switches.
    pub state: ModeState,
    /// Buffered items, oldest first: item `i` is record `b/<first_seq + i>`.
    #[cfg(feature = "ops")]
    buffer: Vec<PushItem>,
    /// Sequence number of the oldest buffered item.
    #[cfg(feature = "ops")]
    first_seq: u64,
    /// Payload bytes in the buffer.
    #[cfg(feature = "ops")]
    buffer_bytes: u64,
    /// Sequence number the next buffered item gets.
    #[cfg(feature = "ops")]
    next_seq: u64,
    /// Buffered items stored (by a build with `ops`), counted at open by a build without it.
    #[cfg(not(feature = "ops"))]
    foreign_buffered: u64,
}

impl Maintenance {
    /// Counts a stored buffered item (a build without `ops` does not read them).
    #[cfg(not(feature = "ops"))]
    pub(super) fn count_foreign_buffered(&mut self) {
        self.foreign_buffered += 1;
    }

    /// Adds item `seq` (records are loaded in key order); a gap in the sequence is damage.
    #[cfg(feature = "ops")]
    pub(super) fn load_buffered(&mut self, seq: u64, item: PushItem) -> Result<(), StoreError> {
        if self.buffer.is_empty() {
            self.first_seq = seq;
        } else if seq != self.next_seq {
            return Err(StoreError::other(format!(
                "storage is damaged: buffered push items {}..{seq} are missing",
                self.next_seq
            )));
        }
        self.buffer_bytes += item.payload.len() as u64;
        self.next_seq = seq + 1;
        self.buffer.push(item);
        Ok(())
    }

    /// Items waiting in the buffer.
    pub fn buffered(&self) -> u64 {
        #[cfg(feature = "ops")]
        return self.buffer.len() as u64;
        #[cfg(not(feature = "ops"))]
        self.foreign_buffered
    }

    /// Payload bytes waiting in the buffer.
    #[cfg(feature = "ops")]
    pub fn buffered_bytes(&self) -> u64 {
        self.buffer_bytes
    }

    /// The items the next drain command pushes.
    #[cfg(feature = "ops")]
    fn chunk(&self) -> &[PushItem] {
        &self.buffer[..self.buffer.len().min(DRAIN_CHUNK)]
    }
}

/// The bytes of `items`' payloads as JSON text: what the push buffer counts against
/// [`MAX_BUFFER_BYTES`].
#[cfg(feature = "ops")]
fn payload_bytes(items: &[PushItem]) -> u64 {
    items.iter().map(|i| i.payload.len() as u64).sum()
}

/// The key of buffered item `seq`.
#[cfg(feature = "ops")]
pub fn buffer_key(seq: u64) -> String {
    format!("{BUFFER_PREFIX}{seq:016x}")
}

/// A buffered push item as stored.
#[cfg(feature = "ops")]
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
}

/// The sequence number a `b/` key names.
#[cfg(feature = "ops")]
pub(super) fn buffer_seq(key: &str) -> Option<u64> {
    u64::from_str_radix(key.strip_prefix(BUFFER_PREFIX)?, 16).ok()
}

/// Reads a stored buffered item back into a push item.
#[cfg(feature = "ops")]
pub(super) fn decode_buffered(key: &str, bytes: &[u8]) -> Result<PushItem, StoreError> {
    let read = |f: &mut Fields| PushItem {
        queue: f.string("queue").into(),
        partition: f.string("partition").into(),
        payload: f.payload(),
        transaction_id: Some(f.string("transactionId").into()),
        trace_id: f.opt_string("traceId"),
        namespace: f.opt_string("namespace"),
        task: f.opt_string("task"),
        producer_sub: f.opt_string("producerSub"),
    };
    Fields::read(bytes, read).map_err(|e| super::records::unreadable(key, &e))
}

/// Reads the mode record.
pub(super) fn decode_mode(key: &str, bytes: &[u8]) -> Result<ModeState, StoreError> {
    let read = |f: &mut Fields| ModeState {
        push_paused: f.bool("pushPaused"),
        pop_paused: f.bool("popPaused"),
    };
    Fields::read(bytes, read).map_err(|e| super::records::unreadable(key, &e))
}

/// One buffered item's answer (wire-contract §1.2: `status: "buffered"`).
#[cfg(feature = "ops")]
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
    /// The maintenance switches and the push buffer.
    pub fn maintenance(&self) -> &Maintenance {
        &self.mode
    }

    /// The maintenance switches.
    pub fn mode(&self) -> ModeState {
        self.mode.state
    }

    /// True while periodic maintenance (`Engine::maintain`) has work to do: a queue to retain or evict
    /// from, or items waiting in the push buffer while push maintenance is off, whose drain maintenance
    /// finishes when one stopped part way, whether or not their queues exist yet. (While push
    /// maintenance is on the buffer only grows; the request that turns it off is a request, after which
    /// this is asked again. A build without `ops` counts a buffer it cannot drain, and has no alarm.)
    pub fn has_periodic_work(&self) -> bool {
        !self.queues.is_empty() || (self.mode.buffered() > 0 && !self.mode.state.push_paused)
    }
}

#[cfg(feature = "ops")]
impl Broker {
    fn save_mode(&mut self) {
        // Plain data with string keys always serializes.
        let bytes = serde_json::to_vec(&self.mode.state)
            .unwrap_or_else(|e| panic!("the mode record serializes: {e}"));
        self.changes.put(MODE_KEY, bytes);
    }

    /// Turns push maintenance (`pop` false) or pop maintenance (`pop` true) on or off. Turning push
    /// maintenance off does not drain (the engine drains next); turning pop maintenance off wakes
    /// every parked pop.
    pub fn set_maintenance(&mut self, now: i64, pop: bool, on: bool) {
        self.tick(now);
        let switch = if pop {
            &mut self.mode.state.pop_paused
        } else {
            &mut self.mode.state.push_paused
        };
        if *switch != on {
            *switch = on;
            self.save_mode();
        }
        if pop && !on {
            let queues: Vec<String> = self.queues.keys().cloned().collect();
            for q in queues {
                self.wake_queue(q);
            }
        }
    }

    /// Stores `items` in the push buffer (push maintenance), minting missing transaction ids. Refused
    /// whole (507) when they would take the buffer past [`MAX_BUFFER_BYTES`].
    pub fn buffer_push(&mut self, now: i64, items: &[PushItem]) -> CoreResult<Vec<BufferedResult>> {
        let now = self.tick(now);
        self.check_sealed(items)?;
        let incoming = payload_bytes(items);
        if self.mode.buffer_bytes + incoming > MAX_BUFFER_BYTES {
            return Err(CoreError::full(format!(
                "the maintenance buffer is full ({} bytes of messages wait in it; the limit is \
                 {MAX_BUFFER_BYTES}): turn maintenance mode off to deliver them",
                self.mode.buffer_bytes
            )));
        }
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
            };
            let bytes = serde_json::to_vec(&record)
                .unwrap_or_else(|e| panic!("a buffered item serializes: {e}"));
            self.changes.put(buffer_key(self.mode.next_seq), bytes);
            if self.mode.buffer.is_empty() {
                self.mode.first_seq = self.mode.next_seq;
            }
            self.mode.next_seq += 1;
            // Kept until maintenance ends: not holding the request's body. The transaction id is the minted
            // or given one, set after detaching so that it is copied once.
            let mut stored = PushItem {
                transaction_id: None,
                ..item.clone()
            }
            .detached();
            stored.transaction_id = Some(transaction_id.as_str().into());
            self.mode.buffer_bytes += stored.payload.len() as u64;
            self.mode.buffer.push(stored);
            results.push(BufferedResult {
                index,
                queue: item.queue.to_string(),
                partition: item.partition.to_string(),
                transaction_id,
            });
        }
        Ok(results)
    }

    /// The segments the next drain command reads (to check transaction ids) that are not loaded.
    pub fn segments_needed_for_drain(&self) -> Vec<(u64, u64)> {
        self.segments_needed_for_push(self.mode.chunk())
    }

    /// Pushes the oldest buffered items (at most [`DRAIN_CHUNK`]) into their queues and removes their
    /// records, in one change set; returns how many (0: nothing buffered, or push maintenance is on).
    pub fn drain_buffer(&mut self, now: i64) -> CoreResult<u64> {
        let now = self.tick(now);
        if self.mode.state.push_paused {
            return Ok(0);
        }
        let n = self.mode.chunk().len();
        // Refused whole: the buffer stays as it was.
        self.check_quota(Some(now), &[self.mode.chunk()], 0)?;
        let rest = self.mode.buffer.split_off(n);
        let chunk = std::mem::replace(&mut self.mode.buffer, rest);
        self.mode.buffer_bytes -= payload_bytes(&chunk);
        self.push_items(now, chunk, 0);
        for _ in 0..n {
            self.changes.delete(buffer_key(self.mode.first_seq));
            self.mode.first_seq += 1;
        }
        Ok(n as u64)
    }
}

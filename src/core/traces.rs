//! Message traces (wire-contract §1.10): events a consumer records about a message (`msg.trace(...)`),
//! read back per message, per trace name, and as a list of names.
//!
//! A trace belongs to a retained message: recording one for a message that is not stored (or no longer
//! retained) is refused, and a trace goes when its message goes (retention, eviction, queue deletion:
//! [`Broker::prune_traces`] runs with maintenance, and reads skip traces whose message is gone).
//!
//! Traces are bounded: each event's data is at most [`MAX_TRACE_DATA_BYTES`] (the HTTP layer refuses
//! more), an event carries at most [`MAX_TRACE_NAMES`] names, and the stored traces together take at
//! most [`TRACE_BUDGET_BYTES`]; past it the oldest traces are deleted in the same commit as the new one.
//!
//! Each trace is one record `t/<seq>/<partition id>/<offset>` (16 hex digits each; seq in recording
//! order) whose value is the event as JSON ([`Trace`]). Memory holds only what the key says and the
//! record's size (what pruning and the byte budget need); the views read the records themselves from
//! the store ([`decode_trace`]).

use super::api::*;
use super::fields::Fields;
use super::Broker;
use crate::store::StoreError;
use serde::Serialize;
use std::collections::BTreeMap;

/// The prefix of trace records.
pub const TRACE_PREFIX: &str = "t/";
/// Largest `data` of one trace event (its JSON text), in bytes.
pub const MAX_TRACE_DATA_BYTES: usize = 64 * 1024;
/// Most names one trace event carries.
pub const MAX_TRACE_NAMES: usize = 16;
/// Bytes of trace records kept; the oldest traces are deleted past it.
pub const TRACE_BUDGET_BYTES: u64 = 8 * 1024 * 1024;

/// A trace event to record (validated by the HTTP layer).
#[derive(Debug, Clone, PartialEq)]
pub struct TraceRequest {
    /// Partition id of the traced message.
    pub partition_id: String,
    /// Transaction id of the traced message.
    pub transaction_id: String,
    /// The consumer group that recorded it (`__QUEUE_MODE__` for queue mode).
    pub consumer_group: String,
    /// Event type (`info` by default).
    pub event_type: String,
    /// Names linking traces across messages, deduplicated.
    pub names: Vec<String>,
    /// The event's data.
    pub data: Payload,
    /// Id to give the trace (a UUID the HTTP layer mints).
    pub id: String,
    /// Who recorded it (the broker's worker id).
    pub worker_id: String,
}

/// A stored trace event (the value of its record).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Trace {
    /// Trace id (UUID).
    pub id: String,
    /// Transaction id of the traced message.
    pub transaction_id: String,
    /// The recording consumer group.
    pub consumer_group: String,
    /// Event type.
    pub event_type: String,
    /// Trace names, distinct, in the order they were sent.
    pub names: Vec<String>,
    /// The event's data (stored under the `payload` key, kept as JSON text).
    #[serde(rename = "payload")]
    pub data: Payload,
    /// The recording worker.
    pub worker_id: String,
    /// When it was recorded (Unix ms).
    pub created_at_ms: i64,
}

/// Where a stored trace's message lives, from its key, and the record's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceEntry {
    /// Partition of the traced message.
    pub pid: u64,
    /// Offset of the traced message.
    pub offset: u64,
    /// Bytes of the record.
    pub bytes: u64,
}

/// The stored traces' entries, by sequence number (recording order).
#[derive(Debug, Default)]
pub struct TraceLog {
    by_seq: BTreeMap<u64, Box<TraceEntry>>,
    next_seq: u64,
    stored_bytes: u64,
}

/// The key of trace `seq` about offset `offset` of partition `pid`.
pub fn trace_key(seq: u64, pid: u64, offset: u64) -> String {
    format!("{TRACE_PREFIX}{seq:016x}/{pid:016x}/{offset:016x}")
}

/// The (seq, pid, offset) a trace key names.
fn parse_trace_key(key: &str) -> Option<(u64, u64, u64)> {
    let mut parts = key.strip_prefix(TRACE_PREFIX)?.split('/');
    let mut next = || u64::from_str_radix(parts.next()?, 16).ok();
    Some((next()?, next()?, next()?))
}

/// Reads a trace record's value (the views do, from the store).
pub fn decode_trace(key: &str, bytes: &[u8]) -> Result<Trace, StoreError> {
    let read = |f: &mut Fields| Trace {
        id: f.string("id"),
        transaction_id: f.string("transactionId"),
        consumer_group: f.string("consumerGroup"),
        event_type: f.string("eventType"),
        names: f.strings("names"),
        data: f.payload(),
        worker_id: f.string("workerId"),
        created_at_ms: f.i64("createdAtMs"),
    };
    Fields::read(bytes, read).map_err(|e| super::records::unreadable(key, &e))
}

impl TraceLog {
    /// Adds a loaded trace record (only its key and size are read).
    pub(super) fn load(&mut self, key: &str, bytes: u64) -> Result<(), StoreError> {
        let (seq, pid, offset) =
            parse_trace_key(key).ok_or_else(|| super::records::unreadable(key, &"bad key"))?;
        self.next_seq = self.next_seq.max(seq + 1);
        self.stored_bytes += bytes;
        self.by_seq
            .insert(seq, Box::new(TraceEntry { pid, offset, bytes }));
        Ok(())
    }
}

impl Broker {
    /// Records a trace event about a retained message. Not found: no such message is retained.
    pub fn record_trace(&mut self, now: i64, req: &TraceRequest) -> CoreResult<String> {
        let now = self.tick(now);
        let (pid, offset) = self
            .find_retained(&req.partition_id, &req.transaction_id)
            .ok_or_else(|| CoreError::not_found("Message not found"))?;
        // Distinct, in the order sent (the views sort them); no sort here keeps a sort routine out of
        // the browser module.
        let mut names: Vec<String> = Vec::new();
        for n in &req.names {
            if names.len() < MAX_TRACE_NAMES && !names.contains(n) {
                names.push(n.clone());
            }
        }
        let trace = Trace {
            id: req.id.clone(),
            transaction_id: req.transaction_id.clone(),
            consumer_group: req.consumer_group.clone(),
            event_type: req.event_type.clone(),
            names,
            data: req.data.clone(),
            worker_id: req.worker_id.clone(),
            created_at_ms: now,
        };
        let bytes =
            serde_json::to_vec(&trace).unwrap_or_else(|e| panic!("a trace serializes: {e}"));
        let seq = self.traces.next_seq;
        let entry = TraceEntry {
            pid,
            offset,
            bytes: bytes.len() as u64,
        };
        self.changes.put(trace_key(seq, pid, offset), bytes);
        self.traces.next_seq += 1;
        self.traces.stored_bytes += entry.bytes;
        self.traces.by_seq.insert(seq, Box::new(entry));
        while self.traces.stored_bytes > TRACE_BUDGET_BYTES {
            let Some(oldest) = self.traces.by_seq.keys().next().copied() else {
                break;
            };
            self.drop_trace(oldest);
        }
        Ok(req.id.clone())
    }

    /// The segments [`Self::record_trace`] reads (to find the message) that are not loaded.
    pub fn segments_needed_for_trace(&self, req: &TraceRequest) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        if let Ok(pid) = req.partition_id.parse::<u64>() {
            self.transaction_candidates(pid, &req.transaction_id, &mut out);
        }
        out
    }

    fn drop_trace(&mut self, seq: u64) {
        if let Some(t) = self.traces.by_seq.remove(&seq) {
            self.traces.stored_bytes -= t.bytes;
            self.changes.delete(trace_key(seq, t.pid, t.offset));
        }
    }

    /// True when the message a trace is about is still retained.
    fn trace_is_live(&self, t: &TraceEntry) -> bool {
        self.partitions
            .get(&t.pid)
            .is_some_and(|p| t.offset >= p.first_offset && t.offset < p.next_offset)
    }

    /// Deletes the traces whose message is no longer retained; returns how many.
    pub fn prune_traces(&mut self) -> u64 {
        let dead: Vec<u64> = self
            .traces
            .by_seq
            .iter()
            .filter(|(_, t)| !self.trace_is_live(t))
            .map(|(seq, _)| *seq)
            .collect();
        for seq in &dead {
            self.drop_trace(*seq);
        }
        dead.len() as u64
    }

    /// The keys of the stored traces whose message is retained, oldest first, with the queue and
    /// partition name of their message; only those about offset `at` of partition `pid` when given.
    pub fn trace_keys(&self, at: Option<(u64, u64)>) -> Vec<(String, String, String)> {
        self.traces
            .by_seq
            .iter()
            .filter(|(_, t)| at.is_none_or(|a| a == (t.pid, t.offset)))
            .filter(|(_, t)| self.trace_is_live(t))
            .filter_map(|(seq, t)| {
                let p = self.partitions.get(&t.pid)?;
                Some((
                    trace_key(*seq, t.pid, t.offset),
                    p.queue.clone(),
                    p.name.clone(),
                ))
            })
            .collect()
    }

    /// The retained message `transaction_id` of partition `partition_id`, as (partition id, offset).
    pub fn trace_target(&self, partition_id: &str, transaction_id: &str) -> Option<(u64, u64)> {
        self.find_retained(partition_id, transaction_id)
    }

    /// How many traces each traced message has: (partition id, offset) -> count.
    pub fn trace_counts(&self) -> BTreeMap<(u64, u64), u64> {
        let mut counts = BTreeMap::new();
        for t in self
            .traces
            .by_seq
            .values()
            .filter(|t| self.trace_is_live(t))
        {
            *counts.entry((t.pid, t.offset)).or_default() += 1;
        }
        counts
    }

    /// Stored traces and their bytes.
    pub fn trace_usage(&self) -> (usize, u64) {
        (self.traces.by_seq.len(), self.traces.stored_bytes)
    }
}

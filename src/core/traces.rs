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
//! Each trace is one record `t/<seq>` (16 hex digits, in recording order), read at open: the trace log
//! lives in memory, within the byte budget.

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

/// A stored trace event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Trace {
    /// Trace id (UUID).
    pub id: String,
    /// Recording order.
    pub seq: u64,
    /// Partition of the traced message.
    pub pid: u64,
    /// Offset of the traced message.
    pub offset: u64,
    /// Transaction id of the traced message.
    pub transaction_id: String,
    /// The recording consumer group.
    pub consumer_group: String,
    /// Event type.
    pub event_type: String,
    /// Trace names, sorted.
    pub names: Vec<String>,
    /// The event's data (stored under the `payload` key, kept as JSON text).
    #[serde(rename = "payload")]
    pub data: Payload,
    /// The recording worker.
    pub worker_id: String,
    /// When it was recorded (Unix ms).
    pub created_at_ms: i64,
    /// Bytes of its stored record.
    #[serde(skip)]
    pub stored_bytes: u64,
}

/// A trace as the views show it: the event and where its message lives.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceView {
    /// The event.
    pub trace: Trace,
    /// Queue of the traced message.
    pub queue: String,
    /// Partition name of the traced message.
    pub partition: String,
}

/// One trace name with its counts (for `/traces/names`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceNameView {
    /// The name.
    pub name: String,
    /// Traces carrying it.
    pub trace_count: u64,
    /// Distinct messages those traces are about.
    pub message_count: u64,
    /// When the newest of them was recorded.
    pub last_seen_ms: i64,
}

/// The stored traces, in recording order.
#[derive(Debug, Default)]
pub struct TraceLog {
    by_seq: BTreeMap<u64, Box<Trace>>,
    next_seq: u64,
    stored_bytes: u64,
}

fn trace_key(seq: u64) -> String {
    format!("{TRACE_PREFIX}{seq:016x}")
}

/// Reads a trace record.
pub(super) fn decode_trace(key: &str, bytes: &[u8]) -> Result<Trace, StoreError> {
    let read = |f: &mut Fields| -> Result<Trace, String> {
        let names = f.strings("names")?;
        Ok(Trace {
            id: f.string("id")?,
            seq: f.u64("seq")?,
            pid: f.u64("pid")?,
            offset: f.u64("offset")?,
            transaction_id: f.string("transactionId")?,
            consumer_group: f.string("consumerGroup")?,
            event_type: f.string("eventType")?,
            names,
            data: f.payload()?,
            worker_id: f.string("workerId")?,
            created_at_ms: f.i64("createdAtMs")?,
            stored_bytes: bytes.len() as u64,
        })
    };
    Fields::parse(bytes)
        .and_then(|mut f| read(&mut f))
        .map_err(|e| StoreError::other(format!("stored record \"{key}\" is unreadable: {e}")))
}

impl TraceLog {
    /// Adds a loaded trace.
    pub(super) fn load(&mut self, trace: Trace) {
        self.next_seq = self.next_seq.max(trace.seq + 1);
        self.stored_bytes += trace.stored_bytes;
        self.by_seq.insert(trace.seq, Box::new(trace));
    }

    /// Number of stored traces and their bytes.
    pub fn usage(&self) -> (usize, u64) {
        (self.by_seq.len(), self.stored_bytes)
    }
}

impl Broker {
    /// Records a trace event about a retained message. Not found: no such message is retained.
    pub fn record_trace(&mut self, now: i64, req: &TraceRequest) -> CoreResult<String> {
        let now = self.tick(now);
        let (pid, offset) = self
            .find_retained(&req.partition_id, &req.transaction_id)
            .ok_or_else(|| CoreError::not_found("Message not found"))?;
        let mut names = req.names.clone();
        names.sort();
        names.dedup();
        names.truncate(MAX_TRACE_NAMES);
        let seq = self.traces.next_seq;
        let mut trace = Trace {
            id: req.id.clone(),
            seq,
            pid,
            offset,
            transaction_id: req.transaction_id.clone(),
            consumer_group: req.consumer_group.clone(),
            event_type: req.event_type.clone(),
            names,
            data: req.data.clone(),
            worker_id: req.worker_id.clone(),
            created_at_ms: now,
            stored_bytes: 0,
        };
        let bytes = serde_json::to_vec(&trace).expect("a trace serializes");
        trace.stored_bytes = bytes.len() as u64;
        self.changes.put(trace_key(seq), bytes);
        self.traces.next_seq += 1;
        self.traces.stored_bytes += trace.stored_bytes;
        self.traces.by_seq.insert(seq, Box::new(trace));
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
            self.traces.stored_bytes -= t.stored_bytes;
            self.changes.delete(trace_key(seq));
        }
    }

    /// True when the message a trace is about is still retained.
    fn trace_is_live(&self, t: &Trace) -> bool {
        self.partitions
            .get(&t.pid)
            .is_some_and(|p| t.offset >= p.first_offset && t.offset < p.next_offset)
    }

    /// Deletes the traces whose message is no longer retained; returns how many.
    pub fn prune_traces(&mut self) -> u64 {
        let dead: Vec<u64> = self
            .traces
            .by_seq
            .values()
            .filter(|t| !self.trace_is_live(t))
            .map(|t| t.seq)
            .collect();
        for seq in &dead {
            self.drop_trace(*seq);
        }
        dead.len() as u64
    }

    fn trace_view(&self, t: &Trace) -> Option<TraceView> {
        if !self.trace_is_live(t) {
            return None;
        }
        let p = self.partitions.get(&t.pid)?;
        Some(TraceView {
            trace: t.clone(),
            queue: p.queue.clone(),
            partition: p.name.clone(),
        })
    }

    /// The traces of one message, oldest first.
    pub fn traces_of(&self, partition_id: &str, transaction_id: &str) -> Vec<TraceView> {
        let Ok(pid) = partition_id.parse::<u64>() else {
            return Vec::new();
        };
        self.traces
            .by_seq
            .values()
            .filter(|t| t.pid == pid && t.transaction_id == transaction_id)
            .filter_map(|t| self.trace_view(t))
            .collect()
    }

    /// A page of the traces carrying `name`, oldest first.
    pub fn traces_named(&self, name: &str, limit: usize, offset: usize) -> Vec<TraceView> {
        self.traces
            .by_seq
            .values()
            .filter(|t| t.names.iter().any(|n| n == name))
            .filter_map(|t| self.trace_view(t))
            .skip(offset)
            .take(limit)
            .collect()
    }

    /// Every trace name with its counts, most recently seen first (then by name), and the total.
    pub fn trace_names(&self) -> Vec<TraceNameView> {
        let mut names: BTreeMap<&str, (u64, std::collections::BTreeSet<(u64, &str)>, i64)> =
            BTreeMap::new();
        for t in self
            .traces
            .by_seq
            .values()
            .filter(|t| self.trace_is_live(t))
        {
            for n in &t.names {
                let e = names.entry(n.as_str()).or_default();
                e.0 += 1;
                e.1.insert((t.pid, t.transaction_id.as_str()));
                e.2 = e.2.max(t.created_at_ms);
            }
        }
        let mut list: Vec<TraceNameView> = names
            .into_iter()
            .map(|(name, (traces, messages, last))| TraceNameView {
                name: name.to_string(),
                trace_count: traces,
                message_count: messages.len() as u64,
                last_seen_ms: last,
            })
            .collect();
        list.sort_by(|a, b| {
            b.last_seen_ms
                .cmp(&a.last_seen_ms)
                .then_with(|| a.name.cmp(&b.name))
        });
        list
    }

    /// How many traces each traced message has: (partition id, transaction id) -> count.
    pub fn trace_counts(&self) -> BTreeMap<(u64, String), u64> {
        let mut counts = BTreeMap::new();
        for t in self
            .traces
            .by_seq
            .values()
            .filter(|t| self.trace_is_live(t))
        {
            *counts.entry((t.pid, t.transaction_id.clone())).or_default() += 1;
        }
        counts
    }

    /// Stored traces and their bytes.
    pub fn trace_usage(&self) -> (usize, u64) {
        self.traces.usage()
    }
}

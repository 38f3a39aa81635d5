//! Prepared transactions: a participant's half of a two-phase commit (docs/protocol.md §3.9.1).
//!
//! A Worker with `SHARDS` > 1 splits a transaction whose queues live on several brokers into one part per
//! broker. Each part goes through three commands here:
//!
//! - [`Broker::prepare`] checks the part as the one-broker transaction does before it applies anything
//!   (quota, operation types, every acked message found, every lease live, no ack beyond its lease's
//!   span) and refuses it with the reason, or stores it as record `w/<id>` and **pins** the lease of
//!   every lane it acks on ([`super::lane::Lane::pin`]): a pinned lease neither expires nor is claimed
//!   again, and no other ack or transaction may act on it. The record and the pins are one commit.
//!   Its pushes are only in the record: nothing is visible to a pop until the commit.
//! - [`Broker::commit_prepared`] applies the stored part through the transaction path and removes the
//!   record, in one commit; the pins end with it. It cannot be refused: the checks were made at
//!   prepare, the leases it acks with are still live (pinned), and its pushes were admitted against the
//!   quota then (prepared pushes count towards it). An ack that an operator's action made moot in
//!   between (the queue, the message or the group's position removed or moved by hand) is answered in
//!   its result, and the rest still applies.
//! - [`Broker::abort_prepared`] drops the record and unpins, in one commit: as if never prepared.
//!
//! All three are idempotent by id: a second prepare of a prepared id answers as the first did, a commit
//! or abort of an id with no record does nothing and says so. Who decides between commit and abort is
//! the caller's business; the record keeps its `owner` (opaque here) for it.

use super::api::*;
use super::fields::{json_type, Fields};
use super::Broker;
use crate::store::StoreError;
use serde::Serialize;
use serde_json::Value;

/// The prefix of prepared transaction records.
pub const PREPARED_PREFIX: &str = "w/";

/// Ack error for an ack (or one-broker transaction) on a lane whose lease a prepared transaction pinned.
pub const PINNED_LEASE: &str = "The lease is held by a prepared transaction";

/// A prepared part, in memory.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// Who decides its outcome (the caller's name for its coordinator).
    pub owner: String,
    /// When it was prepared (Unix ms).
    pub prepared_at_ms: i64,
    operations: Vec<TxOperation>,
    /// The lanes it pinned: (partition id, group, lease id).
    pins: Vec<(u64, String, String)>,
}

/// What [`Broker::prepared_list`] tells about one prepared part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedInfo {
    /// The transaction id.
    pub id: String,
    /// Who decides its outcome.
    pub owner: String,
    /// When it was prepared (Unix ms).
    pub prepared_at_ms: i64,
}

fn prepared_key(id: &str) -> String {
    format!(
        "{PREPARED_PREFIX}{}",
        id.replace('%', "%25").replace('/', "%2F")
    )
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PushRecord<'a> {
    queue: &'a str,
    partition: &'a str,
    /// The payload's JSON text, as a string: kept byte for byte.
    payload_text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    transaction_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    trace_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    task: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    producer_sub: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AckRecord<'a> {
    transaction_id: &'a str,
    partition_id: &'a str,
    status: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lease_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    group: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum OperationRecord<'a> {
    Push(Vec<PushRecord<'a>>),
    Ack(AckRecord<'a>),
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PreparedRecord<'a> {
    owner: &'a str,
    prepared_at: i64,
    operations: Vec<OperationRecord<'a>>,
    /// `[pid, group, lease id]` per pinned lane.
    pins: &'a [(u64, String, String)],
}

fn encode(p: &Prepared) -> Vec<u8> {
    let operations = p
        .operations
        .iter()
        .filter_map(|op| match op {
            TxOperation::Push(items) => Some(OperationRecord::Push(
                items
                    .iter()
                    .map(|i| PushRecord {
                        queue: &i.queue,
                        partition: &i.partition,
                        payload_text: i.payload.get(),
                        transaction_id: i.transaction_id.as_deref(),
                        trace_id: i.trace_id.as_deref(),
                        namespace: i.namespace.as_deref(),
                        task: i.task.as_deref(),
                        producer_sub: i.producer_sub.as_deref(),
                    })
                    .collect(),
            )),
            TxOperation::Ack { item, group } => Some(OperationRecord::Ack(AckRecord {
                transaction_id: &item.transaction_id,
                partition_id: &item.partition_id,
                status: item.status.as_str(),
                error: item.error.as_deref(),
                lease_id: item.lease_id.as_deref(),
                group: group.as_deref(),
            })),
            // Prepare refuses unknown operations: a prepared part never holds one.
            TxOperation::Unknown(_) => None,
        })
        .collect();
    let record = PreparedRecord {
        owner: &p.owner,
        prepared_at: p.prepared_at_ms,
        operations,
        pins: &p.pins,
    };
    serde_json::to_vec(&record).expect("a prepared record serializes")
}

fn decode(key: &str, bytes: &[u8]) -> Result<Prepared, StoreError> {
    let unreadable = |e: String| super::records::unreadable(key, &e);
    let read = || -> Result<Prepared, String> {
        let mut f = Fields::parse(bytes)?;
        let owner = f.string("owner");
        let prepared_at_ms = f.i64("preparedAt");
        let list = |f: &mut Fields, key: &str| -> Result<Vec<Value>, String> {
            let value = f.object_value(key);
            f.check()?;
            match value {
                Value::Array(items) => Ok(items),
                other => Err(format!(
                    "field `{key}`: expected a list, found {}",
                    json_type(&other)
                )),
            }
        };
        let mut operations = Vec::new();
        for op in list(&mut f, "operations")? {
            let mut op = Fields::of(op)?;
            if op.has("push") {
                let mut items = Vec::new();
                for item in list(&mut op, "push")? {
                    let mut i = Fields::of(item)?;
                    let text = i.string("payloadText");
                    i.check()?;
                    let payload = Payload::from_json(text).map_err(|e| e.to_string())?;
                    let item = PushItem {
                        queue: i.string("queue").into(),
                        partition: i.string("partition").into(),
                        payload,
                        transaction_id: i.opt_string("transactionId").map(SharedStr::from),
                        trace_id: i.opt_string("traceId"),
                        namespace: i.opt_string("namespace"),
                        task: i.opt_string("task"),
                        producer_sub: i.opt_string("producerSub"),
                    };
                    items.push(i.finish(item)?);
                }
                operations.push(TxOperation::Push(items));
            } else {
                let mut a = op.object("ack");
                op.check()?;
                let status = a.string("status");
                let ack = TxOperation::Ack {
                    item: AckItem {
                        transaction_id: a.string("transactionId").into(),
                        partition_id: a.string("partitionId").into(),
                        status: AckStatus::parse(Some(&status)),
                        error: a.opt_string("error"),
                        lease_id: a.opt_string("leaseId").map(SharedStr::from),
                    },
                    group: a.opt_string("group"),
                };
                operations.push(a.finish(ack)?);
            }
        }
        let mut pins = Vec::new();
        for pin in list(&mut f, "pins")? {
            let bad = || "field `pins`: expected [pid, group, lease]".to_string();
            let Value::Array(parts) = pin else {
                return Err(bad());
            };
            match parts.as_slice() {
                [Value::Number(pid), Value::String(group), Value::String(lease)] => {
                    pins.push((pid.as_u64().ok_or_else(bad)?, group.clone(), lease.clone()))
                }
                _ => return Err(bad()),
            }
        }
        Ok(Prepared {
            owner,
            prepared_at_ms,
            operations,
            pins,
        })
    };
    read().map_err(unreadable)
}

impl Broker {
    /// Keeps a prepared record read at open (its pins are in the lane records already).
    pub(super) fn load_prepared(&mut self, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let prepared = decode(key, bytes)?;
        let id = key
            .strip_prefix(PREPARED_PREFIX)
            .unwrap_or(key)
            .replace("%2F", "/")
            .replace("%25", "%");
        self.prepared.insert(id, Box::new(prepared));
        Ok(())
    }

    /// The prepared parts, oldest first.
    pub fn prepared_list(&self) -> Vec<PreparedInfo> {
        let mut list: Vec<PreparedInfo> = self
            .prepared
            .iter()
            .map(|(id, p)| PreparedInfo {
                id: id.clone(),
                owner: p.owner.clone(),
                prepared_at_ms: p.prepared_at_ms,
            })
            .collect();
        super::sort::sort_by_key(&mut list, |p| p.prepared_at_ms);
        list
    }

    /// The segments a commit of prepared part `id` reads that are not loaded.
    pub fn segments_needed_for_commit(&self, id: &str) -> Vec<(u64, u64)> {
        match self.prepared.get(id) {
            Some(p) => self.segments_needed_for_transaction(&p.operations),
            None => Vec::new(),
        }
    }

    /// Prepares part `id` of a transaction decided by `owner`: `Ok(Err)` is why it is refused
    /// (nothing changed); an error (507) when its pushes, with those of the parts prepared before,
    /// would take the stored bytes past the quota. See the module documentation.
    pub fn prepare(
        &mut self,
        now: i64,
        id: &str,
        owner: &str,
        operations: Vec<TxOperation>,
    ) -> CoreResult<Result<(), String>> {
        let now = self.tick(now);
        if self.prepared.contains_key(id) {
            return Ok(Ok(()));
        }
        // What the prepared parts will store when they commit, counted as for this one: offsets and
        // times at their longest.
        let held: u64 = self
            .prepared
            .values()
            .flat_map(|p| &p.operations)
            .map(|op| match op {
                TxOperation::Push(items) => self.stored_size(items, None),
                _ => 0,
            })
            .sum();
        self.check_transaction_quota(None, &operations, held)?;
        Ok(self.prepare_checked(now, id, owner, operations))
    }

    /// [`Self::prepare`] once the quota admitted the part.
    fn prepare_checked(
        &mut self,
        now: i64,
        id: &str,
        owner: &str,
        operations: Vec<TxOperation>,
    ) -> Result<(), String> {
        if let Some(error) = self.precheck_transaction(now, &operations) {
            return Err(error);
        }
        // The lanes to pin: each ack's lane when it holds a live lease (found by the precheck).
        let mut pins: Vec<(u64, String, String)> = Vec::new();
        for op in &operations {
            let TxOperation::Ack { item, group } = op else {
                continue;
            };
            let group = Self::group_name(group.as_deref());
            let Some((pid, offset)) = self.find_retained(&item.partition_id, &item.transaction_id)
            else {
                return Err(super::ack::MESSAGE_NOT_FOUND.to_string());
            };
            let Some(lane) = self.partitions[&pid].lanes.get(&group) else {
                continue;
            };
            if lane.is_pinned() && !pins.iter().any(|(p, g, _)| *p == pid && *g == group) {
                return Err(PINNED_LEASE.to_string());
            }
            let Some(lease) = lane.live_lease(now) else {
                continue;
            };
            if offset as i64 > lane.batch_end() {
                return Err(super::ack::NOT_IN_SPAN.to_string());
            }
            if !pins.iter().any(|(p, g, _)| *p == pid && *g == group) {
                pins.push((pid, group, lease.to_string()));
            }
        }
        for (pid, group, _) in &pins {
            self.set_pin(*pid, group, true);
        }
        // Kept until commit or abort: not holding the request's body.
        let operations = operations
            .into_iter()
            .map(|op| match op {
                TxOperation::Push(items) => {
                    TxOperation::Push(items.into_iter().map(PushItem::detached).collect())
                }
                other => other,
            })
            .collect();
        let prepared = Prepared {
            owner: owner.to_string(),
            prepared_at_ms: now,
            operations,
            pins,
        };
        self.changes.put(prepared_key(id), encode(&prepared));
        self.prepared.insert(id.to_string(), Box::new(prepared));
        Ok(())
    }

    /// Commits prepared part `id`: its operations applied, its record removed, its pins ended, in
    /// one change set. `None` when nothing is prepared under `id` (committed or aborted before, or
    /// never prepared).
    pub fn commit_prepared(&mut self, now: i64, id: &str) -> Option<TxReply> {
        let now = self.tick(now);
        let prepared = *self.prepared.remove(id)?;
        self.changes.delete(prepared_key(id));
        let lanes: Vec<(u64, String)> = prepared
            .pins
            .iter()
            .map(|(pid, group, _)| (*pid, group.clone()))
            .collect();
        self.committing_pins = Some(lanes);
        let (results, _) = self.apply_operations(now, prepared.operations, true);
        self.committing_pins = None;
        self.end_pins(&prepared.pins);
        Some(TxReply {
            transaction_id: id.to_string(),
            success: true,
            error: None,
            results,
        })
    }

    /// Aborts prepared part `id`: its record removed and its pins ended, nothing applied. False when
    /// nothing is prepared under `id`.
    pub fn abort_prepared(&mut self, now: i64, id: &str) -> bool {
        self.tick(now);
        let Some(prepared) = self.prepared.remove(id) else {
            return false;
        };
        self.changes.delete(prepared_key(id));
        self.end_pins(&prepared.pins);
        true
    }

    /// True when an ack on lane (pid, group) must be refused because a prepared transaction other
    /// than the one committing now pinned its lease.
    pub(super) fn pinned_against(&self, pid: u64, group: &str) -> bool {
        let pinned = self
            .partitions
            .get(&pid)
            .and_then(|p| p.lanes.get(group))
            .is_some_and(|l| l.is_pinned());
        pinned
            && !self
                .committing_pins
                .as_ref()
                .is_some_and(|lanes| lanes.iter().any(|(p, g)| *p == pid && g == group))
    }

    /// Unpins the lanes of `pins` that still hold the pinned lease.
    fn end_pins(&mut self, pins: &[(u64, String, String)]) {
        for (pid, group, lease) in pins {
            let still = self
                .partitions
                .get(pid)
                .and_then(|p| p.lanes.get(group))
                .is_some_and(|l| l.is_pinned() && l.lease_id() == Some(lease.as_str()));
            if still {
                self.set_pin(*pid, group, false);
            }
        }
    }

    fn set_pin(&mut self, pid: u64, group: &str, on: bool) {
        let Some(lane) = self
            .partitions
            .get_mut(&pid)
            .and_then(|p| p.lanes.get_mut(group))
        else {
            return;
        };
        if on {
            lane.pin();
        } else {
            lane.unpin();
        }
        self.save_lane(pid, group);
        if let Some(queue) = self.partitions.get(&pid).map(|p| p.queue.clone()) {
            self.refresh(&queue, group, pid);
            if !on {
                self.wake_queue(queue);
            }
        }
    }
}

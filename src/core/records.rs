//! How the core's state maps to store records, and how it is rebuilt from them.
//!
//! Keys sort: numbers are 16 hex digits, big-endian. Names are escaped (`%` and `/`) so a name can never
//! spill into the next key component.
//!
//! | key | value |
//! |---|---|
//! | `m/format` | `{"version":1,"nextPartitionId":n}` |
//! | `q/<queue>` | queue record (JSON) |
//! | `p/<pid>` | partition record (JSON) |
//! | `s/<pid>/<first offset>` | segment (see [`super::segment`]) |
//! | `l/<pid>/<group>` | lane (JSON) |
//! | `g/<queue>/<group>` | subscription (JSON) |
//! | `d/<dead-letter id>` | dead letter (JSON) |

use super::segment;
use super::state::*;
use super::Broker;
use crate::store::{Record, StoreError, StoreErrorKind};
use serde::{Deserialize, Serialize};

/// The record format this build writes.
pub const FORMAT_VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FormatRecord {
    version: u32,
    next_partition_id: u64,
}

fn esc(name: &str) -> String {
    name.replace('%', "%25").replace('/', "%2F")
}

pub(super) fn queue_key(name: &str) -> String {
    format!("q/{}", esc(name))
}
pub(super) fn partition_key(pid: u64) -> String {
    format!("p/{pid:016x}")
}
pub(super) fn segment_key(pid: u64, first: u64) -> String {
    format!("s/{pid:016x}/{first:016x}")
}
pub(super) fn lane_key(pid: u64, group: &str) -> String {
    format!("l/{pid:016x}/{}", esc(group))
}
pub(super) fn subscription_key(queue: &str, group: &str) -> String {
    format!("g/{}/{}", esc(queue), esc(group))
}
pub(super) fn dead_letter_key(id: &str) -> String {
    format!("d/{id}")
}

fn json<T: Serialize>(value: &T) -> Vec<u8> {
    // Plain data structs with string keys always serialize.
    serde_json::to_vec(value).expect("records serialize")
}

fn corrupt(key: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::other(format!("stored record \"{key}\" is unreadable: {e}"))
}

impl Broker {
    pub(super) fn save_format(&mut self) {
        let rec = FormatRecord {
            version: FORMAT_VERSION,
            next_partition_id: self.next_partition_id,
        };
        self.changes.put("m/format", json(&rec));
    }

    pub(super) fn save_queue(&mut self, name: &str) {
        if let Some(q) = self.queues.get(name) {
            let bytes = json(&q.record);
            self.changes.put(queue_key(name), bytes);
        }
    }

    pub(super) fn save_partition(&mut self, pid: u64) {
        if let Some(p) = self.partitions.get(&pid) {
            let bytes = json(&p.record());
            self.changes.put(partition_key(pid), bytes);
        }
    }

    pub(super) fn save_lane(&mut self, pid: u64, group: &str) {
        if let Some(lane) = self.partitions.get(&pid).and_then(|p| p.lanes.get(group)) {
            let bytes = json(lane);
            self.changes.put(lane_key(pid, group), bytes);
        }
    }

    pub(super) fn save_subscription(&mut self, queue: &str, group: &str) {
        if let Some(sub) = self
            .subscriptions
            .get(&(queue.to_string(), group.to_string()))
        {
            let bytes = json(sub);
            self.changes.put(subscription_key(queue, group), bytes);
        }
    }

    pub(super) fn save_dead_letter(&mut self, id: &str) {
        if let Some(d) = self.dead_letters.get(id) {
            let bytes = json(d);
            self.changes.put(dead_letter_key(id), bytes);
        }
    }

    /// Rebuilds state from records (keys in ascending order, as `Store::scan` returns them).
    pub(super) fn load(&mut self, records: Vec<Record>) -> Result<(), StoreError> {
        let mut lanes = Vec::new();
        for (key, value) in records {
            let kind = key.split('/').next().unwrap_or("");
            match kind {
                "m" if key == "m/format" => {
                    let rec: FormatRecord =
                        serde_json::from_slice(&value).map_err(|e| corrupt(&key, e))?;
                    if rec.version > FORMAT_VERSION {
                        return Err(StoreError::new(
                            StoreErrorKind::NewerFormat,
                            format!(
                                "this broker's data was written by format version {}, newer than this build \
                                 understands ({FORMAT_VERSION}); upgrade queen-edge",
                                rec.version
                            ),
                        ));
                    }
                    self.next_partition_id = self.next_partition_id.max(rec.next_partition_id);
                }
                "q" => {
                    let record: QueueRecord =
                        serde_json::from_slice(&value).map_err(|e| corrupt(&key, e))?;
                    self.queues.insert(
                        record.name.clone(),
                        Box::new(Queue {
                            record,
                            partitions: Default::default(),
                        }),
                    );
                }
                "p" => {
                    let rec: PartitionRecord =
                        serde_json::from_slice(&value).map_err(|e| corrupt(&key, e))?;
                    let mut p = Partition::new(rec.id, &rec.queue, &rec.name, rec.created_at_ms);
                    p.first_offset = rec.first_offset;
                    p.next_offset = rec.first_offset;
                    self.next_partition_id = self.next_partition_id.max(rec.id + 1);
                    self.partitions.insert(rec.id, Box::new(p));
                }
                "s" => self.load_segment(&key, value)?,
                "l" => {
                    let pid = parse_pid(&key)?;
                    let lane: Lane =
                        serde_json::from_slice(&value).map_err(|e| corrupt(&key, e))?;
                    let group = unesc(key.splitn(3, '/').nth(2).unwrap_or(""));
                    lanes.push((pid, group, lane));
                }
                "g" => {
                    let sub: Subscription =
                        serde_json::from_slice(&value).map_err(|e| corrupt(&key, e))?;
                    self.subscriptions
                        .insert((sub.queue.clone(), sub.group.clone()), Box::new(sub));
                }
                "d" => {
                    let d: DeadLetter =
                        serde_json::from_slice(&value).map_err(|e| corrupt(&key, e))?;
                    self.next_dead_letter_seq = self.next_dead_letter_seq.max(d.seq + 1);
                    self.dead_letters.insert(d.id.clone(), Box::new(d));
                }
                _ => {}
            }
        }
        // Keys sort "p/" before "q/": attach partitions to their queues once both are loaded.
        self.partitions
            .retain(|_, p| self.queues.contains_key(&p.queue));
        for p in self.partitions.values() {
            if let Some(q) = self.queues.get_mut(&p.queue) {
                q.partitions.insert(p.name.clone(), p.id);
            }
        }
        for (pid, group, lane) in lanes {
            if let Some(p) = self.partitions.get_mut(&pid) {
                if let Some(lease) = lane.lease_id.clone() {
                    self.leases
                        .entry(lease)
                        .or_default()
                        .push((pid, group.clone()));
                }
                if lane.lease_id.is_some() || lane.hold_until_ms > 0 {
                    let at = lane.lease_expires_ms.max(lane.hold_until_ms);
                    self.timers.insert((at, pid, group.clone()));
                }
                p.lanes.insert(group, Box::new(lane));
            }
        }
        // Clock: never earlier than anything stored.
        let newest = self
            .partitions
            .values()
            .filter_map(|p| p.newest_created())
            .max()
            .unwrap_or(0);
        self.now_ms = self.now_ms.max(newest);
        Ok(())
    }

    fn load_segment(&mut self, key: &str, value: Vec<u8>) -> Result<(), StoreError> {
        let pid = parse_pid(key)?;
        let messages = segment::decode(&value).map_err(|e| corrupt(key, e))?;
        let Some(p) = self.partitions.get_mut(&pid) else {
            return Ok(());
        };
        let (Some(first), Some(last)) = (messages.first(), messages.last()) else {
            return Ok(());
        };
        let (first, last) = (first.offset, last.offset);
        for m in messages.iter() {
            if m.offset >= p.first_offset {
                p.created.push_back(m.created_at_ms);
            }
            p.dedup.insert(m.transaction_id.clone(), m.offset);
        }
        p.next_offset = p.next_offset.max(last + 1);
        p.segments.insert(
            first,
            Box::new(SegmentEntry {
                last,
                bytes: std::rc::Rc::new(value),
            }),
        );
        Ok(())
    }
}

fn parse_pid(key: &str) -> Result<u64, StoreError> {
    key.split('/')
        .nth(1)
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .ok_or_else(|| corrupt(key, "bad partition id in key"))
}

fn unesc(text: &str) -> String {
    text.replace("%2F", "/").replace("%25", "%")
}

//! Push: append messages to partitions, creating queues and partitions on first use, with
//! `(partition, transactionId)` dedup.

use super::api::*;
use super::segment::{self, StoredMessage};
use super::state::*;
use super::Broker;
use std::collections::BTreeMap;

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
            return *pid;
        }
        let pid = self.next_partition_id;
        self.next_partition_id += 1;
        self.partitions
            .insert(pid, Box::new(Partition::new(pid, queue, name, now)));
        if let Some(q) = self.queues.get_mut(queue) {
            q.partitions.insert(name.to_string(), pid);
        }
        self.save_partition(pid);
        self.save_format();
        pid
    }

    /// The message id stored at `offset` of partition `pid`.
    pub(super) fn stored_message(&self, pid: u64, offset: u64) -> Option<StoredMessage> {
        let p = self.partitions.get(&pid)?;
        let (first, entry) = p.segments.range(..=offset).next_back()?;
        if entry.last < offset {
            return None;
        }
        let decoded = self.cache.get(pid, *first, entry);
        decoded.get((offset - first) as usize).cloned()
    }

    /// Pushes `items` (wire-contract §1.2). Results come back in input order.
    pub fn push(&mut self, now: i64, items: Vec<PushItem>) -> CoreResult<Vec<PushResult>> {
        let now = self.tick(now);
        Ok(self.push_items(now, items, 0))
    }

    /// Appends items; `index_base` offsets the reported indexes (transactions number results flat).
    pub(super) fn push_items(
        &mut self,
        now: i64,
        items: Vec<PushItem>,
        index_base: usize,
    ) -> Vec<PushResult> {
        // New messages per partition, in input order, written as one segment per partition.
        let mut batches: BTreeMap<u64, Vec<StoredMessage>> = BTreeMap::new();
        let mut results = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            self.ensure_queue(
                now,
                &item.queue,
                item.namespace.as_deref(),
                item.task.as_deref(),
            );
            let partition = if item.partition.is_empty() {
                DEFAULT_PARTITION
            } else {
                &item.partition
            };
            let pid = self.ensure_partition(now, &item.queue, partition);
            let transaction_id = match item.transaction_id.filter(|t| !t.is_empty()) {
                Some(t) => t,
                None => self.ids.uuid_v7(now),
            };
            let p = self.partitions.get_mut(&pid).expect("ensured above");
            if let Some(&offset) = p.dedup.get(&transaction_id) {
                let winner = batches
                    .get(&pid)
                    .and_then(|b| b.iter().find(|m| m.offset == offset).map(|m| m.id.clone()))
                    .or_else(|| self.stored_message(pid, offset).map(|m| m.id))
                    .unwrap_or_default();
                results.push(PushResult {
                    index: index_base + i,
                    status: PushStatus::Duplicate,
                    message_id: winner,
                    transaction_id,
                    partition_id: pid.to_string(),
                    queue: item.queue,
                    partition: partition.to_string(),
                    offset,
                    trace_id: item.trace_id,
                });
                continue;
            }
            let offset = p.next_offset;
            p.next_offset += 1;
            p.created.push_back(now);
            p.dedup.insert(transaction_id.clone(), offset);
            let id = self.ids.uuid_v7(now);
            batches.entry(pid).or_default().push(StoredMessage {
                offset,
                id: id.clone(),
                transaction_id: transaction_id.clone(),
                trace_id: item.trace_id.clone(),
                producer_sub: item.producer_sub,
                created_at_ms: now,
                payload: item.payload,
            });
            results.push(PushResult {
                index: index_base + i,
                status: PushStatus::Queued,
                message_id: id,
                transaction_id,
                partition_id: pid.to_string(),
                queue: item.queue,
                partition: partition.to_string(),
                offset,
                trace_id: item.trace_id,
            });
        }
        for (pid, batch) in batches {
            self.stats.pushed += batch.len() as u64;
            let first = batch[0].offset;
            let last = batch[batch.len() - 1].offset;
            let bytes = segment::encode(&batch);
            self.changes
                .put(super::records::segment_key(pid, first), bytes.clone());
            let queue = {
                let p = self
                    .partitions
                    .get_mut(&pid)
                    .expect("batched partitions exist");
                p.segments.insert(
                    first,
                    Box::new(SegmentEntry {
                        last,
                        bytes: std::rc::Rc::new(bytes),
                    }),
                );
                p.queue.clone()
            };
            self.after_append(&queue, pid);
        }
        results
    }

    /// A partition gained messages: every group with a ready set on its queue may claim it now.
    pub(super) fn after_append(&mut self, queue: &str, pid: u64) {
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
        self.wake_queue(queue.to_string());
    }
}

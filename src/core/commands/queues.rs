//! Queues: configure and delete (docs/protocol.md §2.1).

use crate::core::api::*;
use crate::core::records::*;
use crate::core::state::{Partition, Queue};
use crate::core::{sort, Broker};
use litemap::LiteMap;

impl Broker {
    /// Creates a queue or overwrites its options and labels (docs/protocol.md §2.1; wire-contract §1.7).
    pub fn configure(&mut self, now: i64, req: ConfigureRequest) -> CoreResult<ConfigureReply> {
        let now = self.tick(now);
        let options = req.options.resolve();
        if let Some(backoff) = &req.options.retry_backoff {
            backoff.validate(u64::MAX)?;
        }
        if options.reclaim_limit > crate::core::redelivery::MAX_RECLAIM_LIMIT {
            return Err(CoreError::bad_request("reclaimLimit must be at most 1000"));
        }
        self.ensure_queue(now, &req.queue, None, None);
        {
            let q = self.queues.get_mut(&req.queue).expect("ensured above");
            q.record.options = options.clone();
            q.record.namespace = req.namespace.clone().unwrap_or_default();
            q.record.task = req.task.clone().unwrap_or_default();
        }
        self.save_queue(&req.queue);
        let pid = self.ensure_partition(now, &req.queue, DEFAULT_PARTITION);
        // Lease lengths, holds and visibility rules may have changed: let parked pops look again.
        self.wake_queue(req.queue.clone());
        let q = &self.queues[&req.queue].record;
        Ok(ConfigureReply {
            queue_id: q.id.clone(),
            partition_id: pid.to_string(),
            queue: q.name.clone(),
            namespace: q.namespace.clone(),
            task: q.task.clone(),
            options,
        })
    }

    /// Deletes a queue with its partitions, messages, lanes, dead letters and subscriptions.
    /// Returns whether it existed.
    pub fn delete_queue(&mut self, now: i64, queue: &str) -> bool {
        self.tick(now);
        let Some(q) = self.queues.remove(queue) else {
            return false;
        };
        self.changes.delete(queue_key(queue));
        for (pid, p) in self.take_partitions(&q) {
            self.changes.delete(partition_key(pid));
            for seg in &p.segments {
                self.changes.delete(segment_key(pid, seg.first));
            }
            for page in &p.pages {
                self.changes.delete(index_entry_key(pid, *page));
            }
            self.stored_bytes = self.stored_bytes.saturating_sub(p.stored_bytes());
            for (group, lane) in &p.lanes {
                self.changes.delete(lane_key(pid, group));
                if let Some(lease) = lane.lease_id() {
                    self.unindex_lease(lease, pid, group);
                }
            }
            self.cache.forget_partition(pid);
        }
        let letters: Vec<String> = self
            .dead_letters
            .values()
            .filter(|d| d.queue == queue)
            .map(|d| d.id.clone())
            .collect();
        for id in letters {
            self.dead_letters.remove(&id);
            self.changes.delete(dead_letter_key(&id));
        }
        let subs: Vec<(String, String)> = self
            .subscriptions
            .keys()
            .filter(|(q, _)| q == queue)
            .cloned()
            .collect();
        for key in subs {
            self.subscriptions.remove(&key);
            self.changes.delete(subscription_key(&key.0, &key.1));
        }
        self.groups.retain(|(q, _), _| q != queue);
        self.forget_deliveries(queue, None);
        self.wake_queue(queue.to_string());
        true
    }

    /// Takes the partitions of the deleted queue `q` out of the broker, with their timers, in one pass
    /// over each (the partition map is a sorted vector, where one removal at a time would move the rest
    /// once per partition).
    fn take_partitions(&mut self, q: &Queue) -> Vec<(u64, Box<Partition>)> {
        let mut pids: Vec<u64> = q.partitions.values().map(|pid| **pid).collect();
        sort::sort_u64(&mut pids);
        let doomed = |pid: &u64| pids.binary_search(pid).is_ok();
        self.timers.retain(|(_, pid, _)| !doomed(pid));
        let mut kept = Vec::new();
        let mut taken = Vec::new();
        for entry in std::mem::take(&mut self.partitions).into_tuple_vec() {
            match doomed(&entry.0) {
                true => taken.push(entry),
                false => kept.push(entry),
            }
        }
        self.partitions = LiteMap::from_sorted_store_unchecked(kept);
        taken
    }
}

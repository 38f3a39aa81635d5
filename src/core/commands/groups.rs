//! Consumer groups: seek, delete, subscription updates (docs/protocol.md §3.8).

use crate::core::api::*;
use crate::core::records::*;
use crate::core::state::*;
use crate::core::Broker;

impl Broker {
    /// Moves `group`'s cursor on every partition of `queue` where it has one, releasing leases
    /// (docs/protocol.md §3.8). Makes no cursor: a group that never popped `queue` has none to move,
    /// and its first pop still starts where its subscription says.
    pub fn seek(
        &mut self,
        now: i64,
        group: &str,
        queue: &str,
        target: SeekTarget,
    ) -> CoreResult<SeekReply> {
        let now = self.tick(now);
        let group = Self::group_name(Some(group));
        let pids: Vec<u64> = self
            .queues
            .get(queue)
            .ok_or_else(|| CoreError::not_found(format!("Queue {queue} not found")))?
            .partitions
            .values()
            .map(|pid| **pid)
            .filter(|pid| self.partitions[pid].lanes.contains_key(&group))
            .collect();
        let mut updated = 0;
        for pid in pids {
            let p = &self.partitions[&pid];
            let cursor = match target {
                SeekTarget::End => p.next_offset as i64 - 1,
                SeekTarget::Timestamp(t) => p.last_offset_created_at_or_before(t),
            };
            self.seek_lane(now, pid, &group, cursor);
            updated += 1;
        }
        self.wake_queue(queue.to_string());
        Ok(SeekReply {
            partitions_updated: updated,
        })
    }

    fn seek_lane(&mut self, _now: i64, pid: u64, group: &str, cursor: i64) {
        self.release_lane(pid, group);
        let queue = self.partitions[&pid].queue.clone();
        if let Some(lane) = self.lane_mut(pid, group) {
            lane.seek(cursor);
        }
        self.save_lane(pid, group);
        self.refresh(&queue, group, pid);
    }

    /// Moves `group`'s cursor on one partition to its end. Returns the new cursor.
    pub fn seek_partition_to_end(
        &mut self,
        now: i64,
        group: &str,
        queue: &str,
        partition: &str,
    ) -> CoreResult<i64> {
        let now = self.tick(now);
        let group = Self::group_name(Some(group));
        let pid = self
            .queues
            .get(queue)
            .and_then(|q| q.partitions.get(partition))
            .map(|pid| **pid)
            .ok_or_else(|| CoreError::not_found("Partition not found"))?;
        let cursor = self.partitions[&pid].next_offset as i64 - 1;
        self.seek_lane(now, pid, &group, cursor);
        self.wake_queue(queue.to_string());
        Ok(cursor)
    }

    /// Deletes `group`'s lanes (on `queue`, or everywhere) and, if asked, its subscriptions.
    pub fn delete_group(
        &mut self,
        now: i64,
        group: &str,
        queue: Option<&str>,
        delete_metadata: bool,
    ) -> GroupDeleteReply {
        self.tick(now);
        let pids: Vec<u64> = self
            .partitions
            .values()
            .filter(|p| queue.is_none_or(|q| p.queue == q))
            .map(|p| p.id)
            .collect();
        let mut deleted = 0;
        for pid in pids {
            let had = self.partitions[&pid].lanes.contains_key(group);
            if !had {
                continue;
            }
            self.release_lane(pid, group);
            let p = self.partitions.get_mut(&pid).expect("listed above");
            p.lanes.remove(group);
            let queue_name = p.queue.clone();
            self.changes.delete(lane_key(pid, group));
            self.wake_queue(queue_name);
            deleted += 1;
        }
        let mut metadata_deleted = false;
        if delete_metadata {
            let keys: Vec<(String, String)> = self
                .subscriptions
                .keys()
                .filter(|(q, g)| g == group && queue.is_none_or(|x| x == q))
                .cloned()
                .collect();
            for key in keys {
                self.subscriptions.remove(&key);
                self.changes.delete(subscription_key(&key.0, &key.1));
                metadata_deleted = true;
            }
        }
        self.groups
            .retain(|(q, g), _| !(g == group && queue.is_none_or(|x| x == q)));
        GroupDeleteReply {
            deleted_partitions: deleted,
            metadata_deleted,
        }
    }

    /// Rewrites the start time of every subscription of `group`; lanes that never committed are
    /// re-derived from it. Returns the number of subscriptions rewritten.
    pub fn update_subscription(&mut self, now: i64, group: &str, start_ms: i64) -> u32 {
        self.tick(now);
        let keys: Vec<(String, String)> = self
            .subscriptions
            .keys()
            .filter(|(_, g)| g == group)
            .cloned()
            .collect();
        for (queue, g) in &keys {
            if let Some(sub) = self.subscriptions.get_mut(&(queue.clone(), g.clone())) {
                sub.start_ms = Some(start_ms);
                sub.mode = SubscriptionMode::Timestamp;
            }
            self.save_subscription(queue, g);
            let pids: Vec<u64> = self
                .queues
                .get(queue)
                .map(|q| q.partitions.values().map(|pid| **pid).collect())
                .unwrap_or_default();
            for pid in pids {
                let untouched = self.partitions[&pid]
                    .lanes
                    .get(g)
                    .is_none_or(|l| l.never_claimed());
                if untouched {
                    let cursor = self.initial_cursor(pid, g);
                    if let Some(lane) = self.lane_mut(pid, g) {
                        lane.resubscribe(cursor);
                    }
                    if self.partitions[&pid].lanes.contains_key(g) {
                        self.save_lane(pid, g);
                    }
                    self.refresh(queue, g, pid);
                }
            }
            self.wake_queue(queue.clone());
        }
        keys.len() as u32
    }
}

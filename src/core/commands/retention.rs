//! Retention and eviction (docs/protocol.md §3.10).

use crate::core::api::*;
use crate::core::records::*;
use crate::core::state::*;
use crate::core::Broker;

impl Broker {
    /// Retention and eviction (docs/protocol.md §3.10): deletes expired messages, whole segments at a time
    /// once every message in them is gone.
    pub fn maintain(&mut self, now: i64) -> MaintenanceReport {
        let now = self.tick(now);
        let mut report = MaintenanceReport::default();
        let queues: Vec<(String, QueueOptions)> = self
            .queues
            .values()
            .map(|q| (q.record.name.clone(), q.record.options.clone()))
            .collect();
        for (queue, o) in queues {
            if o.retention_enabled && o.retention_s > 0 {
                let age_ms = o.retention_s.saturating_mul(1000).min(i64::MAX as u64) as i64;
                self.forget_deliveries(&queue, Some(now.saturating_sub(age_ms)));
            }
            let pids: Vec<u64> = self.queues[&queue]
                .partitions
                .values()
                .map(|pid| **pid)
                .collect();
            for pid in pids {
                let p = &self.partitions[&pid];
                let mut new_first = p.first_offset;
                let older_than = |secs: u64| {
                    (p.last_offset_created_at_or_before(now - (secs * 1000) as i64) + 1) as u64
                };
                if o.retention_enabled && o.retention_s > 0 {
                    let cut = older_than(o.retention_s);
                    report.retention_deleted += cut.saturating_sub(new_first);
                    new_first = new_first.max(cut);
                }
                if o.retention_enabled && o.completed_retention_s > 0 {
                    let consumed = self.consumed_by_all(&queue, pid);
                    let cut = older_than(o.completed_retention_s).min((consumed + 1).max(0) as u64);
                    report.retention_deleted += cut.saturating_sub(new_first);
                    new_first = new_first.max(cut);
                }
                if o.max_wait_time_s > 0 {
                    let cut = older_than(o.max_wait_time_s);
                    report.evicted += cut.saturating_sub(new_first);
                    new_first = new_first.max(cut);
                }
                if new_first > self.partitions[&pid].first_offset {
                    report.segments_deleted += self.trim_partition(pid, new_first);
                }
            }
        }
        // The entries of segments pushed since the last page, so a quiet partition's wait for no push.
        self.write_pages();
        report
    }

    /// The highest offset every group with a lane or subscription on the partition has committed.
    fn consumed_by_all(&self, queue: &str, pid: u64) -> i64 {
        let p = &self.partitions[&pid];
        let mut groups: Vec<String> = p.lanes.keys().cloned().collect();
        groups.extend(
            self.subscriptions
                .keys()
                .filter(|(q, _)| q == queue)
                .map(|(_, g)| g.clone()),
        );
        groups
            .iter()
            .map(|g| {
                p.lanes
                    .get(g)
                    .map_or_else(|| self.initial_cursor(pid, g), |l| l.committed())
            })
            .min()
            .unwrap_or(-1)
    }

    /// Drops offsets below `new_first` from partition `pid`. Returns segments deleted.
    fn trim_partition(&mut self, pid: u64, new_first: u64) -> u64 {
        let mut ended = Vec::new();
        let (queue, doomed) = {
            let p = self
                .partitions
                .get_mut(&pid)
                .expect("trimmed partition exists");
            let keep_from = p.segments.partition_point(|s| s.last < new_first);
            let doomed: Vec<SegmentMeta> = p.segments.drain(..keep_from).collect();
            if let Some(next) = p
                .segments
                .front()
                .map(|s| s.seq)
                .or(doomed.last().map(|s| s.seq + 1))
            {
                p.txids.forget_below(next);
            }
            p.first_offset = new_first;
            let floor = new_first as i64 - 1;
            for (group, lane) in p.lanes.iter_mut() {
                if let Some(lease) = lane.raise_floor(floor) {
                    ended.push((lease, group.clone()));
                }
            }
            (p.queue.clone(), doomed)
        };
        // Leases whose whole span was removed ended (`Lane::raise_floor`): out of the lease index.
        for (lease, group) in ended {
            self.unindex_lease(&lease, pid, &group);
        }
        for seg in &doomed {
            self.changes.delete(segment_key(pid, seg.first));
            self.stored_bytes = self.stored_bytes.saturating_sub(seg.stored_bytes as u64);
        }
        self.forget_pages_before_segments(pid);
        let groups: Vec<String> = self.partitions[&pid].lanes.keys().cloned().collect();
        for g in groups {
            self.save_lane(pid, &g);
        }
        // Every ready set, not only those of the groups with a lane here: a group without one counts at
        // its initial cursor, which the new floor moves too.
        self.refresh_ready_sets(&queue, pid);
        self.save_partition(pid);
        // A lease or a retry hold that ended with its span may free a lane a parked pop waits for.
        self.wake_queue(queue);
        doomed.len() as u64
    }
}

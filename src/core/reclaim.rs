//! `reclaimLimit` at claim time (rows `quarantine` and `dead_letter_expired` of the lane table; the
//! option is described in module `redelivery`).

use super::api::QueueOptions;
use super::lane::{Lane, Reclaim};
use super::Broker;

/// The error a head gets when `reclaimLimit` dead-letters it.
pub fn expired_error(limit: u32) -> String {
    format!(
        "Lease expired {limit} times with the message delivered alone (reclaimLimit {limit}); \
         the consumer never acknowledged it"
    )
}

impl Broker {
    /// How a claim of the free `lane` of partition `pid` will go under `reclaimLimit` = `limit`, for
    /// the segment planner: the cursor it claims after (past a head it will file, whose segment goes in
    /// `out`) and whether it takes the head alone. The planner must follow the claim: a span it plans
    /// longer than the claim takes leaves budget that the claim spends on partitions it did not plan.
    pub(super) fn reclaim_plan(
        &self,
        pid: u64,
        lane: &Lane,
        limit: u32,
        out: &mut Vec<(u64, u64)>,
    ) -> (i64, bool) {
        match lane.reclaim_verdict(limit) {
            Reclaim::Whole => (lane.committed(), false),
            Reclaim::HeadAlone => (lane.committed(), true),
            Reclaim::FileHead => {
                let head = lane.committed() + 1;
                let seg = self
                    .partitions
                    .get(&pid)
                    .and_then(|p| p.segment_of(head as u64));
                if let Some(seg) = seg {
                    self.want_segment(pid, seg.first, out);
                }
                (head, false)
            }
        }
    }

    /// Applies `reclaimLimit` to the free lane (pid, group) about to be claimed: true when the claim
    /// must deliver the head alone. When the quarantined head outlived its lease the limit again, it is
    /// filed as a dead letter (dropped with the DLQ off) and the lane moves past it first.
    pub(super) fn reclaim_gate(
        &mut self,
        now: i64,
        pid: u64,
        group: &str,
        options: &QueueOptions,
    ) -> bool {
        let Some(lane) = self.partitions.get(&pid).and_then(|p| p.lanes.get(group)) else {
            return false;
        };
        match lane.reclaim_verdict(options.reclaim_limit) {
            Reclaim::Whole => false,
            Reclaim::HeadAlone => true,
            Reclaim::FileHead => {
                let stale = lane.lease_id().map(str::to_string);
                let retry_count = lane.retry_count();
                if let Some(stale) = stale {
                    self.unindex_lease(&stale, pid, group);
                }
                let lane = self
                    .partitions
                    .get_mut(&pid)
                    .and_then(|p| p.lanes.get_mut(group))
                    .expect("read above");
                let head = lane.dead_letter_expired();
                if options.dlq_enabled() {
                    let error = expired_error(options.reclaim_limit);
                    self.file_dead_letter(now, pid, group, head, retry_count, error);
                }
                self.save_lane(pid, group);
                false
            }
        }
    }
}

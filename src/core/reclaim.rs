//! `reclaimLimit` at claim time (rows `quarantine` and `dead_letter_expired` of the lane table; the
//! option is described in module `redelivery`).

use super::api::QueueOptions;
use super::lane::Reclaim;
use super::Broker;

/// The error a head gets when `reclaimLimit` dead-letters it.
pub fn expired_error(limit: u32) -> String {
    format!(
        "Lease expired {limit} times with the message delivered alone (reclaimLimit {limit}); \
         the consumer never acknowledged it"
    )
}

impl Broker {
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

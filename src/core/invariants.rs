//! [`Broker::check_invariants`]: the derived structures agree with the lanes and segments they index.
//!
//! The lanes, partitions and segment index are the truth (they are what is stored); the ready sets, the
//! lease index, the timers, the stored-bytes sum and the segment chain are derived from them and kept in
//! step by every command. A disagreement is a broken invariant: a lane that can be claimed but no pop
//! will find, a lease id that acks cannot resolve, a lease that never expires. The simulation calls this
//! after every step.

use super::Broker;

impl Broker {
    /// Checks every derived structure against the state it indexes, at the core's own clock (the last
    /// `now` it saw). `Err` names the first disagreement.
    pub fn check_invariants(&self) -> Result<(), String> {
        let now = self.now_ms;
        let mut stored_bytes = 0u64;
        for (pid, p) in &self.partitions {
            // Segment chain: contiguous, covering the retained offsets, numbered in order.
            let mut expected_first: Option<u64> = None;
            let mut last_seq: Option<u32> = None;
            for seg in &p.segments {
                if expected_first.is_some_and(|e| e != seg.first) || seg.last < seg.first {
                    return Err(format!(
                        "partition {pid}: segment {}..={} breaks the chain",
                        seg.first, seg.last
                    ));
                }
                if last_seq.is_some_and(|s| s >= seg.seq) {
                    return Err(format!(
                        "partition {pid}: segment numbers do not increase at {}",
                        seg.first
                    ));
                }
                expected_first = Some(seg.last + 1);
                last_seq = Some(seg.seq);
                stored_bytes += seg.stored_bytes as u64;
            }
            let head = p.segments.front().map_or(p.next_offset, |s| s.first);
            let tail = p.segments.back().map_or(p.first_offset, |s| s.last + 1);
            if head > p.first_offset || (p.retained() > 0 && tail != p.next_offset) {
                return Err(format!(
                    "partition {pid}: segments cover {head}..{tail}, retained offsets are {}..{}",
                    p.first_offset, p.next_offset
                ));
            }
            // Index pages: in order, fewer than a page's worth of segments past them, each paged
            // segment in a page that starts at or before it, no page after the paged segments.
            let paged = p
                .segments
                .len()
                .checked_sub(p.unpaged.len())
                .ok_or_else(|| format!("partition {pid}: more unpaged segments than segments"))?;
            if p.unpaged.len() >= super::pages::ENTRIES_PER_PAGE {
                return Err(format!(
                    "partition {pid}: {} segments wait for a page",
                    p.unpaged.len()
                ));
            }
            if p.pages
                .iter()
                .zip(p.pages.iter().skip(1))
                .any(|(a, b)| a >= b)
            {
                return Err(format!("partition {pid}: index pages out of order"));
            }
            let first_paged = p.segments.front().filter(|_| paged > 0);
            let last_paged = paged.checked_sub(1).and_then(|i| p.segments.get(i));
            let pages_fit = match (first_paged, last_paged) {
                (Some(first), Some(last)) => {
                    p.pages.front().is_some_and(|&s| s <= first.first)
                        && p.pages.back().is_some_and(|&s| s <= last.first)
                        && p.pages.get(1).is_none_or(|&s| s > first.first)
                }
                _ => p.pages.is_empty(),
            };
            if !pages_fit {
                return Err(format!(
                    "partition {pid}: pages {:?} do not hold the entries of its {paged} paged segments",
                    p.pages
                ));
            }
            for (seg, fps) in p.segments.range(paged..).zip(&p.unpaged) {
                if fps.len() as u64 != seg.last - seg.first + 1 {
                    return Err(format!(
                        "partition {pid}: unpaged segment {} has {} fingerprints",
                        seg.first,
                        fps.len()
                    ));
                }
            }
            for (group, lane) in &p.lanes {
                // A quarantined head (reclaimLimit) is the lane's head, and a live lease on it covers
                // it alone.
                if let Some(q) = lane.quarantined_head() {
                    if q as i64 != lane.committed() + 1 {
                        return Err(format!(
                            "lane ({pid}, {group}): quarantined head {q} is not its head ({})",
                            lane.committed() + 1
                        ));
                    }
                    if lane.is_leased(now) && lane.batch_end() != q as i64 {
                        return Err(format!(
                            "lane ({pid}, {group}): quarantined head {q} leased with a span to {}",
                            lane.batch_end()
                        ));
                    }
                }
                // The lease index holds every live lease.
                if let Some(lease) = lane.live_lease(now) {
                    let indexed = self
                        .leases
                        .get(lease)
                        .is_some_and(|lanes| lanes.iter().any(|(p2, g)| p2 == pid && g == group));
                    if !indexed {
                        return Err(format!(
                            "lane ({pid}, {group}): live lease {lease} is not in the lease index"
                        ));
                    }
                }
                // Ready sets and timers exist for a group once it pops after an open: from then on,
                // timers bring leased and held lanes back, and a claimable lane is ready or deferred.
                let key = (p.queue.clone(), group.clone());
                let Some(ready) = self.groups.get(&key) else {
                    continue;
                };
                // A pinned lease (module `prepared`) has no timer: its transaction's end refreshes it.
                if lane.is_leased(now)
                    && !lane.is_pinned()
                    && !self.timers.contains(lane.lease_expires_ms(), *pid, group)
                {
                    return Err(format!(
                        "lane ({pid}, {group}): no timer at its lease expiry"
                    ));
                }
                if !lane.is_leased(now)
                    && lane.is_held(now)
                    && !self.timers.contains(lane.hold_until_ms(), *pid, group)
                {
                    return Err(format!(
                        "lane ({pid}, {group}): no timer at the end of its hold"
                    ));
                }
                let claimable = lane.is_free(now) && lane.committed() + 1 < p.next_offset as i64;
                if claimable
                    && !ready.iter().any(|r| r == *pid)
                    && !self.timers.has_lane(*pid, group)
                {
                    return Err(format!(
                        "lane ({pid}, {group}): claimable but neither ready nor deferred"
                    ));
                }
            }
        }
        if stored_bytes != self.stored_bytes {
            return Err(format!(
                "stored bytes are {} but the segments hold {stored_bytes}",
                self.stored_bytes
            ));
        }
        // Every indexed lease names lanes that hold it.
        for (lease, lanes) in &self.leases {
            for (pid, group) in lanes {
                let holds = self
                    .partitions
                    .get(pid)
                    .and_then(|p| p.lanes.get(group))
                    .is_some_and(|l| l.lease_id() == Some(lease.as_str()));
                if !holds {
                    return Err(format!("lease {lease} is indexed for lane ({pid}, {group}), which does not hold it"));
                }
            }
        }
        // Every ready partition belongs to its queue and can be claimed by its group.
        for ((queue, group), ready) in self.groups.iter() {
            for pid in ready.iter() {
                let Some(p) = self.partitions.get(&pid).filter(|p| &p.queue == queue) else {
                    return Err(format!(
                        "ready set ({queue}, {group}) holds partition {pid} of another queue"
                    ));
                };
                let (free, committed) = match p.lanes.get(group) {
                    Some(lane) => (lane.is_free(now), lane.committed()),
                    None => (true, self.initial_cursor(pid, group)),
                };
                if !free || committed + 1 >= p.next_offset as i64 {
                    return Err(format!("ready set ({queue}, {group}) holds partition {pid}, which cannot be claimed"));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! One canary per invariant: corrupt one derived structure and see its own check fire.
    use super::super::api::*;
    use super::super::{Broker, BrokerConfig};
    use serde_json::json;

    const NOW: i64 = 1_767_225_600_000;

    /// Two partitions with messages; group `g` popped `p0` (a live lease), `p1` is ready.
    fn broker() -> (Broker, u64, u64) {
        let mut b = Broker::new(
            BrokerConfig {
                default_subscription_new: false,
                ..BrokerConfig::default()
            },
            1,
        );
        for (partition, n) in [("p0", 3), ("p1", 2)] {
            for i in 0..n {
                let item = PushItem {
                    partition: partition.into(),
                    ..PushItem::new("q", json!(i))
                };
                b.push(NOW, vec![item]).unwrap();
            }
        }
        let reply = b
            .pop(
                NOW,
                &PopRequest {
                    group: Some("g".into()),
                    target: PopTarget::Partition {
                        queue: "q".into(),
                        partition: "p0".into(),
                    },
                    ..PopRequest::queue("q")
                },
            )
            .unwrap();
        assert_eq!(reply.messages.len(), 1);
        b.ensure_group_index("q", "g");
        let p0 = *b.queues["q"].partitions["p0"];
        let p1 = *b.queues["q"].partitions["p1"];
        b.check_invariants().expect("a healthy broker passes");
        (b, p0, p1)
    }

    fn fires(b: &Broker, expected: &str) {
        let e = b.check_invariants().expect_err("the corruption is caught");
        assert!(e.contains(expected), "{e}");
    }

    #[test]
    fn lease_index_missing_a_live_lease() {
        let (mut b, _, _) = broker();
        b.leases.clear();
        fires(&b, "not in the lease index");
    }

    #[test]
    fn lease_index_naming_a_lane_that_does_not_hold_it() {
        let (mut b, _, p1) = broker();
        b.index_lease("stray", p1, "g");
        fires(&b, "does not hold it");
    }

    #[test]
    fn leased_lane_without_a_timer() {
        let (mut b, _, _) = broker();
        b.timers.retain(|_| false);
        fires(&b, "no timer at its lease expiry");
    }

    #[test]
    fn claimable_lane_neither_ready_nor_deferred() {
        let (mut b, _, p1) = broker();
        b.lane_mut(p1, "g");
        b.groups
            .get_mut(&("q".to_string(), "g".to_string()))
            .unwrap()
            .remove(p1);
        fires(&b, "neither ready nor deferred");
    }

    #[test]
    fn ready_set_holding_a_leased_lane() {
        let (mut b, p0, _) = broker();
        b.groups
            .get_mut(&("q".to_string(), "g".to_string()))
            .unwrap()
            .insert(p0, 99);
        fires(&b, "cannot be claimed");
    }

    #[test]
    fn stored_bytes_out_of_step() {
        let (mut b, _, _) = broker();
        b.stored_bytes += 1;
        fires(&b, "stored bytes");
    }

    #[test]
    fn quarantined_lane_leased_with_a_whole_span() {
        let (mut b, p0, _) = broker();
        let lane = b.lane_mut(p0, "g").unwrap();
        lane.quarantine("Q", NOW + 1);
        lane.claim(2, "Q2", NOW + 1);
        fires(&b, "leased with a span to 2");
    }

    #[test]
    fn quarantined_head_behind_the_cursor() {
        let (mut b, p0, _) = broker();
        let lane = b.lane_mut(p0, "g").unwrap();
        lane.quarantine("Q", NOW + 1);
        lane.resubscribe(1);
        fires(&b, "is not its head");
    }

    #[test]
    fn segment_chain_with_a_gap() {
        let (mut b, p0, _) = broker();
        b.partitions.get_mut(&p0).unwrap().segments.remove(1);
        fires(&b, "breaks the chain");
    }
}

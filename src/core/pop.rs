//! Pop: claim spans of messages for a consumer group (docs/protocol.md §3.2, §4.2; wire-contract §1.3).

use super::api::*;
use super::meters::Meter;
use super::state::*;
use super::Broker;

/// Most partitions autopilot claims in one pop.
pub const AUTOPILOT_MAX_PARTITIONS: u32 = 16;
/// Lease of a discovery pop without `leaseSeconds`, and of a queue whose lease time is 0.
pub const FALLBACK_LEASE_S: u64 = 60;
/// Largest `partitions` a pop may ask for.
pub const MAX_PARTITIONS_PER_POP: u32 = 64;

/// What one pop is allowed to take, and how.
struct ClaimPlan<'a> {
    group: &'a str,
    auto_ack: bool,
    discovery: bool,
    lease_seconds: Option<u64>,
    budget: u32,
    max_partitions: u32,
    lease_id: Option<String>,
}

impl Broker {
    /// Claims messages for a group (docs/protocol.md §3.2). Never waits: an empty reply means nothing is
    /// claimable now; the engine parks long-polls.
    pub fn pop(&mut self, now: i64, req: &PopRequest) -> CoreResult<PopReply> {
        let now = self.tick(now);
        if let Some(n) = req.partitions {
            if !(1..=MAX_PARTITIONS_PER_POP).contains(&n) {
                return Err(CoreError::bad_request(format!(
                    "partitions must be between 1 and 64, got {n}"
                )));
            }
        }
        if req.batch == Some(0) {
            return Err(CoreError::bad_request("batch must be at least 1"));
        }
        let group = Self::group_name(req.group.as_deref());
        if req.conflation && group == QUEUE_MODE_GROUP {
            return Err(CoreError::bad_request("conflation needs a consumer group"));
        }
        if req.conflation && req.auto_ack {
            return Err(CoreError::bad_request(
                "conflation cannot be combined with autoAck",
            ));
        }
        let (queues, single_partition, discovery) = match &req.target {
            PopTarget::Queue { queue } => (vec![queue.clone()], None, false),
            PopTarget::Partition { queue, partition } => {
                (vec![queue.clone()], Some(partition.clone()), false)
            }
            PopTarget::Discovery { namespace, task } => (
                self.discover(namespace.as_deref(), task.as_deref()),
                None,
                true,
            ),
        };

        let mut reply = PopReply {
            lease_id: String::new(),
            consumer_group: group.clone(),
            messages: Vec::new(),
            partitions_claimed: 0,
            queue: match &req.target {
                PopTarget::Queue { queue } | PopTarget::Partition { queue, .. } => {
                    Some(queue.clone())
                }
                PopTarget::Discovery { .. } => None,
            },
            partition: single_partition.clone(),
            partition_id: None,
            conflation: false,
            conflation_conflict: false,
            autopilot: None,
        };
        if self.mode.state.pop_paused {
            // Pop maintenance (module `maintenance`): nothing is claimed.
            return Ok(reply);
        }

        let mut plan = ClaimPlan {
            group: &group,
            auto_ack: req.auto_ack,
            discovery,
            lease_seconds: req.lease_seconds.filter(|s| *s > 0),
            budget: 0,
            max_partitions: 1,
            lease_id: None,
        };
        let mut sized = false;
        for queue in queues {
            if !self.queues.contains_key(&queue) {
                // A named group's start is fixed by its first pop, the queue existing or not (contract
                // §3.7; Queen records it at the pop route): a `new` group then gets what is pushed after
                // this pop, also when the push creates the queue. A discovery pop names no missing queue.
                if group != QUEUE_MODE_GROUP && !discovery {
                    self.ensure_subscription(now, &queue, &group, req);
                }
                continue;
            }
            let conflation = if group == QUEUE_MODE_GROUP {
                false
            } else {
                let sub = self.ensure_subscription(now, &queue, &group, req);
                sub.conflation
            };
            reply.conflation |= conflation;
            reply.conflation_conflict |= req.conflation != conflation && req.conflation;
            self.ensure_group_index(&queue, &group);
            if !sized {
                sized = true;
                let ready = self
                    .groups
                    .get(&(queue.clone(), group.clone()))
                    .map_or(0, |s| s.len()) as u32;
                plan.budget = match req.batch {
                    Some(batch) => batch,
                    None if req.autopilot => self.autopilot_batch(&queue, &group, now),
                    None => 1,
                };
                plan.max_partitions = match (&single_partition, req.partitions) {
                    (Some(_), _) => 1,
                    (None, Some(n)) => n,
                    (None, None) if req.autopilot => ready.clamp(1, AUTOPILOT_MAX_PARTITIONS),
                    (None, None) => 1,
                };
                if req.autopilot {
                    reply.autopilot = Some(AutopilotEcho {
                        batch: plan.budget,
                        partitions: plan.max_partitions,
                        wait_ms: 100,
                    });
                }
            }
            let candidates: Vec<u64> = match &single_partition {
                Some(name) => self.queues[&queue]
                    .partitions
                    .get(name)
                    .map(|pid| **pid)
                    .into_iter()
                    .collect(),
                None => Vec::new(),
            };
            if single_partition.is_some() {
                for pid in candidates {
                    self.claim_partition(now, &queue, pid, conflation, &mut plan, &mut reply);
                }
            } else {
                // The partitions tried so far, sorted: a list rather than a `BTreeSet` (a B-tree type of
                // its own in the browser module). Each round scans the whole ready set against it, so a
                // sorted insert costs no more than the round already does.
                let mut tried: Vec<u64> = Vec::new();
                loop {
                    if plan.budget == 0 || reply.partitions_claimed >= plan.max_partitions {
                        break;
                    }
                    let want = (plan.max_partitions - reply.partitions_claimed) as usize * 2 + 4;
                    let batch: Vec<u64> = self
                        .groups
                        .get(&(queue.clone(), group.clone()))
                        .map(|s| {
                            s.iter()
                                .filter(|pid| tried.binary_search(pid).is_err())
                                .take(want)
                                .collect()
                        })
                        .unwrap_or_default();
                    if batch.is_empty() {
                        break;
                    }
                    for pid in batch {
                        if let Err(at) = tried.binary_search(&pid) {
                            tried.insert(at, pid);
                        }
                        if plan.budget == 0 || reply.partitions_claimed >= plan.max_partitions {
                            break;
                        }
                        self.claim_partition(now, &queue, pid, conflation, &mut plan, &mut reply);
                    }
                }
            }
            if plan.budget == 0 || reply.partitions_claimed >= plan.max_partitions {
                break;
            }
        }
        if !req.auto_ack {
            reply.lease_id = plan.lease_id.clone().unwrap_or_default();
        }
        Ok(reply)
    }

    /// The segments a pop of `req` will read that are not loaded.
    ///
    /// Follows the claim order of [`Self::pop`] (ready sets, free lanes, the batch budget shared across
    /// partitions) without changing anything, and names the segments covering each span it would claim,
    /// ignoring delays (which only shorten spans). What it misses (a group's first pop, whose
    /// subscription is not made yet) the engine repairs by rerunning the pop.
    pub fn segments_needed_for_pop(&self, now: i64, req: &PopRequest) -> Vec<(u64, u64)> {
        let now = now.max(self.now_ms);
        let group = Self::group_name(req.group.as_deref());
        let queues = match &req.target {
            PopTarget::Queue { queue } | PopTarget::Partition { queue, .. } => vec![queue.clone()],
            PopTarget::Discovery { namespace, task } => {
                self.discover(namespace.as_deref(), task.as_deref())
            }
        };
        let mut budget = match (req.batch, queues.first()) {
            (Some(batch), _) => batch,
            (None, Some(queue)) if req.autopilot => self.autopilot_batch(queue, &group, now),
            (None, _) => 1,
        } as u64;
        let mut partitions_left = match (&req.target, req.partitions) {
            (PopTarget::Partition { .. }, _) => 1,
            (_, Some(n)) => n.min(MAX_PARTITIONS_PER_POP),
            (_, None) if req.autopilot => AUTOPILOT_MAX_PARTITIONS,
            (_, None) => 1,
        };
        let mut out = Vec::new();
        for queue in queues {
            let Some(q) = self.queues.get(&queue) else {
                continue;
            };
            let pids: Vec<u64> = match &req.target {
                PopTarget::Partition { partition, .. } => q
                    .partitions
                    .get(partition)
                    .map(|pid| **pid)
                    .into_iter()
                    .collect(),
                _ => match self.groups.get(&(queue.clone(), group.clone())) {
                    Some(ready) => ready.iter().collect(),
                    // No ready set yet: every partition may be claimable.
                    None => q.partitions.values().map(|pid| **pid).collect(),
                },
            };
            for pid in pids {
                if budget == 0 || partitions_left == 0 {
                    return out;
                }
                let Some(p) = self.partitions.get(&pid) else {
                    continue;
                };
                let (committed, head_alone) = match p.lanes.get(&group) {
                    Some(lane) if !lane.is_free(now) => continue,
                    Some(lane) => {
                        self.reclaim_plan(pid, lane, q.record.options.reclaim_limit, &mut out)
                    }
                    None => (self.initial_cursor(pid, &group), false),
                };
                let start = (committed.max(p.first_offset as i64 - 1) + 1) as u64;
                if start >= p.next_offset {
                    continue;
                }
                let last = if req.conflation {
                    p.next_offset - 1
                } else if head_alone {
                    start
                } else {
                    (start + budget - 1).min(p.next_offset - 1)
                };
                let first = if req.conflation { last } else { start };
                let mut offset = first;
                while offset <= last {
                    let Some(seg) = p.segment_of(offset) else {
                        break;
                    };
                    self.want_segment(pid, seg.first, &mut out);
                    offset = seg.last + 1;
                }
                budget = budget.saturating_sub(last - first + 1);
                partitions_left -= 1;
            }
        }
        out
    }

    /// Queues carrying the labels, highest priority first.
    fn discover(&self, namespace: Option<&str>, task: Option<&str>) -> Vec<String> {
        let mut found: Vec<(i64, String)> = self
            .queues
            .values()
            .filter(|q| namespace.is_none_or(|ns| q.record.namespace == ns))
            .filter(|q| task.is_none_or(|t| q.record.task == t))
            .map(|q| (-q.record.options.priority, q.record.name.clone()))
            .collect();
        super::sort::sort(&mut found);
        found.into_iter().map(|(_, name)| name).collect()
    }

    /// The group's subscription on `queue`, created from this (first) pop if it has none.
    fn ensure_subscription(
        &mut self,
        now: i64,
        queue: &str,
        group: &str,
        req: &PopRequest,
    ) -> Subscription {
        let key = (queue.to_string(), group.to_string());
        if let Some(sub) = self.subscriptions.get(&key) {
            return (**sub).clone();
        }
        let start = req
            .subscription
            .unwrap_or(if self.config.default_subscription_new {
                SubscriptionStart::New
            } else {
                SubscriptionStart::All
            });
        let (start_ms, mode) = match start {
            SubscriptionStart::New => (Some(now), SubscriptionMode::New),
            SubscriptionStart::NewSince(t) => (Some(t.min(now)), SubscriptionMode::New),
            SubscriptionStart::All => (None, SubscriptionMode::All),
            SubscriptionStart::At(t) => (Some(t), SubscriptionMode::Timestamp),
        };
        let sub = Subscription {
            group: group.to_string(),
            queue: queue.to_string(),
            start_ms,
            conflation: req.conflation,
            created_at_ms: now,
            mode,
        };
        self.subscriptions.insert(key, Box::new(sub.clone()));
        self.save_subscription(queue, group);
        if mode == SubscriptionMode::New {
            // A partition's cursor for the group is the last offset created at or before the start,
            // so whatever is pushed from now on must be created after it, in this millisecond too:
            // the clock moves one past the start (it never goes back; the load does the same).
            self.now_ms = self.now_ms.max(now.saturating_add(1));
        }
        sub
    }

    /// Tries to claim partition `pid` for the plan; appends what it delivers to `reply`.
    fn claim_partition(
        &mut self,
        now: i64,
        queue: &str,
        pid: u64,
        conflation: bool,
        plan: &mut ClaimPlan<'_>,
        reply: &mut PopReply,
    ) {
        let group = plan.group;
        let Some(options) = self.queues.get(queue).map(|q| q.record.options.clone()) else {
            return;
        };
        let Some(lane) = self.lane_mut(pid, group) else {
            return;
        };
        if !lane.is_free(now) {
            self.refresh(queue, group, pid);
            return;
        }
        let head_alone = self.reclaim_gate(now, pid, group, &options);
        let p = &self.partitions[&pid];
        let floor = p.first_offset as i64 - 1;
        let start = (p.lanes[group].committed().max(floor) + 1) as u64;
        if start >= p.next_offset {
            self.refresh(queue, group, pid);
            return;
        }
        // windowBuffer: wait until the newest message is old enough.
        if options.window_buffer_s > 0 {
            let newest = p.newest_created().unwrap_or(now);
            let due = newest + (options.window_buffer_s * 1000) as i64;
            if due > now {
                self.defer(queue, group, pid, due);
                return;
            }
        }
        // delayedProcessing: read only messages that are due, stopping at the first that is not.
        let delay_ms = (options.delayed_processing_s * 1000) as i64;
        let due_cutoff = now - delay_ms;
        let last_due = if delay_ms > 0 {
            p.last_offset_created_at_or_before(due_cutoff)
        } else {
            p.next_offset as i64 - 1
        };
        if last_due < start as i64 {
            let due = p.created_at(start).map_or(now + 1, |c| c + delay_ms);
            self.defer(queue, group, pid, due);
            return;
        }
        let (first, last) = if conflation {
            (last_due as u64, last_due as u64)
        } else {
            let last = (start as i64 + plan.budget as i64 - 1).min(last_due) as u64;
            (start, if head_alone { start } else { last })
        };
        let lease_ms =
            (plan
                .lease_seconds
                .unwrap_or(if plan.discovery || options.lease_time_s == 0 {
                    FALLBACK_LEASE_S
                } else {
                    options.lease_time_s
                })
                * 1000) as i64;
        if !plan.auto_ack && plan.lease_id.is_none() {
            plan.lease_id = Some(self.ids.uuid_v7(now));
        }
        let lease_id = plan.lease_id.clone().unwrap_or_default();
        let stale_lease = self.partitions[&pid].lanes[group]
            .lease_id()
            .map(str::to_string);
        if let Some(stale) = stale_lease {
            self.unindex_lease(&stale, pid, group);
        }
        let lane = self
            .partitions
            .get_mut(&pid)
            .and_then(|p| p.lanes.get_mut(group))
            .expect("materialised above");
        if conflation {
            // Move the cursor past the older messages; they are never delivered to this group.
            lane.skip_to(first as i64 - 1);
        }
        lane.delivered += last - first + 1;
        let attempt = if plan.auto_ack {
            lane.claim_auto_ack(last)
        } else if head_alone {
            lane.quarantine(&lease_id, now + lease_ms)
        } else {
            lane.claim(last, &lease_id, now + lease_ms)
        };
        let retry_count = lane.retry_count();
        if !plan.auto_ack {
            self.index_lease(&lease_id, pid, group);
        } else {
            self.log_auto_ack(now, pid, group, options.delivery_log, first, attempt);
        }
        self.save_lane(pid, group);
        // Re-file the lane at the back of its ready set (round-robin across partitions).
        if let Some(set) = self.groups.get_mut(&(queue.to_string(), group.to_string())) {
            set.remove(pid);
        }
        self.refresh(queue, group, pid);

        let p = &self.partitions[&pid];
        // Made once for every message of this claim (shared text, not a copy per message).
        let partition_name = SharedStr::from(p.name.as_str());
        let partition_id = SharedStr::from(pid.to_string());
        let queue_name = SharedStr::from(queue);
        let group_name = SharedStr::from(group);
        let delivered_lease = if plan.auto_ack {
            SharedStr::default()
        } else {
            SharedStr::from(lease_id)
        };
        let mut count = 0u32;
        // Segment by segment (one cache read each); an offset no loaded segment holds is skipped (a
        // segment that is not loaded is recorded as a miss, and the engine runs the pop again).
        let mut offset = first;
        while offset <= last {
            let Some(seg) = p.segment_of(offset) else {
                offset += 1;
                continue;
            };
            let upto = seg.last.min(last);
            reply.messages.reserve((upto - offset + 1) as usize);
            if let Some(decoded) = self.cache.get(pid, seg.first) {
                for at in offset..=upto {
                    let Some(m) = decoded.get((at - seg.first) as usize) else {
                        continue;
                    };
                    count += 1;
                    reply.messages.push(DeliveredMessage {
                        id: m.id.clone(),
                        transaction_id: m.transaction_id.clone(),
                        trace_id: m.trace_id.clone(),
                        payload: m.payload.clone(),
                        producer_sub: m.producer_sub.clone(),
                        created_at_ms: m.created_at_ms,
                        queue: queue_name.clone(),
                        partition: partition_name.clone(),
                        partition_id: partition_id.clone(),
                        lease_id: delivered_lease.clone(),
                        consumer_group: group_name.clone(),
                        delivery_attempt: attempt,
                        offset: at,
                        retry_count,
                    });
                }
            }
            offset = upto + 1;
        }
        self.count(now, Meter::Popped, count as u64);
        plan.budget = plan.budget.saturating_sub(count);
        if reply.partitions_claimed == 0 {
            reply.queue = Some(queue.to_string());
            reply.partition = Some(partition_name.to_string());
            reply.partition_id = Some(partition_id.to_string());
        }
        reply.partitions_claimed += 1;
    }

    /// Takes a lane out of its ready set until `at` (a delayed or debounced partition).
    fn defer(&mut self, queue: &str, group: &str, pid: u64, at: i64) {
        if let Some(set) = self.groups.get_mut(&(queue.to_string(), group.to_string())) {
            set.remove(pid);
        }
        self.timers.insert((at, pid, group.to_string()));
    }
}

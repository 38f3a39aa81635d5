//! Transactions: all-or-nothing pushes and acks (docs/protocol.md §3.9).

use crate::core::ack::{INVALID_LEASE, MESSAGE_NOT_FOUND, NO_CURSOR};
use crate::core::api::*;
use crate::core::Broker;

impl Broker {
    /// The segments a transaction of `operations` will read that are not loaded.
    pub fn segments_needed_for_transaction(&self, operations: &[TxOperation]) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        for op in operations {
            let more = match op {
                TxOperation::Push(items) => self.segments_needed_for_push(items),
                TxOperation::Ack { item, group } => {
                    self.segments_needed_for_ack(group.as_deref(), std::slice::from_ref(item))
                }
                TxOperation::Unknown(_) => Vec::new(),
            };
            for key in more {
                if !out.contains(&key) {
                    out.push(key);
                }
            }
        }
        out
    }

    /// Applies a transaction atomically (docs/protocol.md §3.9): every operation or none. Refused whole
    /// (an error, 507) when its pushes would take the stored bytes past the quota, as a push is.
    pub fn transaction(&mut self, now: i64, operations: Vec<TxOperation>) -> CoreResult<TxReply> {
        let now = self.tick(now);
        self.check_transaction_quota(Some(now), &operations, 0)?;
        let transaction_id = self.ids.uuid_v7(now);
        // Validate what can be validated against the state before anything is applied, so the common
        // refusals cost no rollback.
        if let Some(error) = self.precheck_transaction(now, &operations) {
            return Ok(TxReply {
                transaction_id,
                success: false,
                error: Some(error),
                results: Vec::new(),
            });
        }
        let (results, outcome) = self.apply_operations(now, operations, false);
        Ok(TxReply {
            transaction_id,
            success: outcome.is_ok(),
            error: outcome.err().flatten(),
            results,
        })
    }

    /// [`Self::check_quota`] for the pushes of `operations`.
    pub(crate) fn check_transaction_quota(
        &self,
        now: Option<i64>,
        operations: &[TxOperation],
        held: u64,
    ) -> CoreResult<()> {
        let pushes: Vec<&[PushItem]> = operations
            .iter()
            .filter_map(|op| match op {
                TxOperation::Push(items) => Some(&items[..]),
                _ => None,
            })
            .collect();
        self.check_quota(now, &pushes, held)
    }

    /// Applies `operations`, with their acks as ONE ack call per consumer group (docs/wire-contract.md
    /// §3.5: the ack ops of a transaction are one call, resolved per lane, their order not mattering).
    /// So a lane's retry budget is charged once for the transaction, as for one `/ack/batch`, and
    /// several acks under one lease are all checked against the lease the transaction found, not
    /// against what an earlier ack of the same transaction left. The acks are resolved first: an ack
    /// can only name a message stored before the transaction (`precheck_transaction`), so the pushes do
    /// not change what they find. The results are in operation order.
    ///
    /// Not `forced` (a one-broker transaction): the first failed ack or unknown operation, in operation
    /// order, fails it: nothing of it is kept (the engine reloads), and the results end at that
    /// operation's. `forced` (the commit of a prepared part, module `prepared`): every operation is
    /// applied; a failed ack is answered in its result and the rest still applies.
    pub(crate) fn apply_operations(
        &mut self,
        now: i64,
        operations: Vec<TxOperation>,
        forced: bool,
    ) -> (Vec<TxResult>, Result<(), Option<String>>) {
        let mut acked = self.ack_per_group(now, &operations);
        let mut results = Vec::new();
        for (at, op) in operations.into_iter().enumerate() {
            match op {
                TxOperation::Push(items) => {
                    let base = results.len();
                    results.extend(
                        self.push_items(now, items, base)
                            .into_iter()
                            .map(TxResult::Push),
                    );
                }
                TxOperation::Ack { .. } => {
                    let Some(found) = acked.iter().position(|r| r.index == at) else {
                        continue;
                    };
                    let mut r = acked.swap_remove(found);
                    r.index = results.len();
                    let failed = !r.success;
                    let error = r.error.clone();
                    results.push(TxResult::Ack(r));
                    if failed && !forced {
                        // Earlier operations already touched state: the engine reloads from the store.
                        self.discard = true;
                        self.changes = Default::default();
                        return (results, Err(error));
                    }
                }
                TxOperation::Unknown(kind) => {
                    if forced {
                        continue;
                    }
                    self.discard = true;
                    self.changes = Default::default();
                    return (
                        results,
                        Err(Some(format!("Unknown operation type: {kind}"))),
                    );
                }
            }
        }
        (results, Ok(()))
    }

    /// Resolves the acks of `operations` as one ack call per consumer group, the groups in the order
    /// they first appear. Each result's `index` is its operation's position in `operations`.
    fn ack_per_group(&mut self, now: i64, operations: &[TxOperation]) -> Vec<AckResult> {
        let mut acked = Vec::new();
        let mut groups_done: Vec<String> = Vec::new();
        for (at, op) in operations.iter().enumerate() {
            let TxOperation::Ack { group, .. } = op else {
                continue;
            };
            let group = Self::group_name(group.as_deref());
            if groups_done.contains(&group) {
                continue;
            }
            // This group's acks: this one and those after it.
            let mut positions = Vec::new();
            let mut items = Vec::new();
            for (k, op) in operations.iter().enumerate().skip(at) {
                if let TxOperation::Ack { item, group: g } = op {
                    if Self::group_name(g.as_deref()) == group {
                        positions.push(k);
                        items.push(item.clone());
                    }
                }
            }
            for (k, mut r) in positions
                .into_iter()
                .zip(self.ack(now, Some(&group), &items))
            {
                r.index = k;
                acked.push(r);
            }
            groups_done.push(group);
        }
        acked
    }

    pub(crate) fn precheck_transaction(
        &self,
        now: i64,
        operations: &[TxOperation],
    ) -> Option<String> {
        for op in operations {
            match op {
                TxOperation::Unknown(kind) => {
                    return Some(format!("Unknown operation type: {kind}"))
                }
                TxOperation::Push(items) => {
                    if let Err(e) = self.check_sealed(items) {
                        return Some(e.message);
                    }
                }
                TxOperation::Ack { item, group } => {
                    let group = Self::group_name(group.as_deref());
                    let found = self
                        .find_retained(&item.partition_id, &item.transaction_id)
                        .map(|(pid, _)| &self.partitions[&pid]);
                    let Some(p) = found else {
                        return Some(MESSAGE_NOT_FOUND.to_string());
                    };
                    if let AckStatus::Invalid(s) = &item.status {
                        return Some(format!("Invalid status: {s}"));
                    }
                    let lane = p.lanes.get(&group);
                    if let Some(fence) = item.lease_id.as_deref().filter(|l| !l.is_empty()) {
                        if lane.and_then(|l| l.live_lease(now)) != Some(fence) {
                            return Some(INVALID_LEASE.to_string());
                        }
                    }
                    if lane.is_none() {
                        return Some(NO_CURSOR.to_string());
                    }
                }
            }
        }
        None
    }
}

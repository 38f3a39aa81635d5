//! The `COMMIT_SHARING = "auto"` policy of each object, kept for the isolate's life ([`policy_of`]).
//!
//! workerd drops a Durable Object that has been idle for a few seconds and starts it again at its next
//! request, in the same isolate, over the same storage. A policy held by the object alone started over
//! with it: every burst of requests after a pause began with a fresh probe (half of its epochs in the
//! setting the last probe had found slower) and held that probe's decision for the shortest time. The
//! commit's cost is the storage's, which the restart does not change, so the object's policy is kept
//! here, by object id, and a restarted object goes on where it was (its epoch, its decision and how long
//! it keeps it); an idle gap restarts only the epoch that was running (rule 2 of
//! [`crate::auto_sharing`]). A new isolate starts each object's policy afresh, and so does every object
//! when the isolate has kept [`MAX_POLICIES`] of them (the map is emptied then: a broker's objects are
//! few, but a selectable broker's names come from callers).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use crate::auto_sharing::AutoSharing;

/// Policies kept per isolate, at most.
pub const MAX_POLICIES: usize = 1024;

thread_local! {
    /// The policy of every object started in this isolate, by object id.
    static POLICIES: RefCell<HashMap<String, Rc<RefCell<AutoSharing>>>> = RefCell::default();
}

/// The policy of the object `object_id`: the one it had when it last ran in this isolate, or a new one.
pub fn policy_of(object_id: &str) -> Rc<RefCell<AutoSharing>> {
    POLICIES.with(|policies| {
        let mut policies = policies.borrow_mut();
        if policies.len() >= MAX_POLICIES && !policies.contains_key(object_id) {
            policies.clear();
        }
        policies.entry(object_id.to_owned()).or_default().clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers every millisecond from `from` for `ms` milliseconds.
    fn answer_for(policy: &RefCell<AutoSharing>, from: i64, ms: i64) {
        for t in from..from + ms {
            policy.borrow_mut().answered(t);
        }
    }

    #[test]
    fn an_object_started_again_keeps_its_policy_and_another_object_has_its_own() {
        let first = policy_of("object-a");
        // Past the probe's first epoch (off): its second shares.
        answer_for(&first, 0, 150);
        assert!(first.borrow().shares());
        drop(first);
        // The object is dropped and started again: it goes on in the probe's second epoch.
        let again = policy_of("object-a");
        assert!(again.borrow().shares());
        // Another object starts its own probe, with sharing off.
        assert!(!policy_of("object-b").borrow().shares());
    }

    #[test]
    fn the_isolate_keeps_at_most_max_policies() {
        let first = policy_of("bounded-0");
        answer_for(&first, 0, 150);
        drop(first);
        for n in 1..MAX_POLICIES {
            policy_of(&format!("bounded-{n}"));
        }
        // Full: the next new object empties the map, so the first starts afresh (off).
        policy_of("bounded-new");
        assert!(!policy_of("bounded-0").borrow().shares());
        assert!(POLICIES.with(|policies| policies.borrow().len()) <= MAX_POLICIES);
    }
}

//! Group commit: commands applied while a commit is in flight ride together in the next one.
//!
//! A command is applied to the core under the command gate, then *joins* the open group with its change
//! set and releases the gate, so the next command can be applied while this one waits for the store.
//! Whoever finds no commit in flight *leads*: it commits the open group, answers its members, and goes on
//! with the group that formed meanwhile, until none is left. Each command replies only after the commit
//! that holds its changes.
//!
//! A failed commit fails every member of its group and of the group formed during it (those commands
//! were applied on top of changes the store refused), and bumps the *epoch*: a command applied before the
//! failure that joins after it is refused instead of joining (its effects may rest on refused changes).
//! The engine then reloads from the store before the next command, as it did for a single failed commit.

use crate::store::{ChangeSet, StoreError};
use futures::channel::oneshot;
use std::cell::{Cell, RefCell};

/// What a group member learns when its group's commit settles.
pub(crate) type Settled = Result<(), StoreError>;

/// The open group: changes of commands applied since the last commit started.
#[derive(Default)]
pub(crate) struct Group {
    pub(crate) changes: ChangeSet,
    pub(crate) woken: Vec<String>,
    pub(crate) members: Vec<oneshot::Sender<Settled>>,
}

impl Group {
    /// Answers every member.
    pub(crate) fn settle(self, outcome: &Settled) {
        for member in self.members {
            let _ = member.send(outcome.clone());
        }
    }
}

/// The group-commit state of one engine. See the module documentation.
#[derive(Default)]
pub(crate) struct GroupCommit {
    open: RefCell<Option<Group>>,
    committing: Cell<bool>,
    epoch: Cell<u64>,
}

impl GroupCommit {
    /// The current epoch (changes when a commit fails).
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.get()
    }

    /// Adds a command's changes to the open group, if the epoch is still `applied_in`; returns what to
    /// await for the outcome, or `None` when a commit failed since the command was applied.
    pub(crate) fn join(
        &self,
        applied_in: u64,
        changes: ChangeSet,
        woken: Vec<String>,
    ) -> Option<oneshot::Receiver<Settled>> {
        if applied_in != self.epoch.get() {
            return None;
        }
        let (tx, rx) = oneshot::channel();
        let mut open = self.open.borrow_mut();
        let group = open.get_or_insert_with(Group::default);
        group.changes.absorb(changes);
        for queue in woken {
            if !group.woken.contains(&queue) {
                group.woken.push(queue);
            }
        }
        group.members.push(tx);
        Some(rx)
    }

    /// Takes the lead if no commit is in flight: `Some` guard while leading.
    pub(crate) fn lead(&self) -> Option<Leading<'_>> {
        if self.committing.get() {
            return None;
        }
        self.committing.set(true);
        Some(Leading { group: self })
    }

    /// True when no commit is in flight and no group is open.
    pub(crate) fn is_idle(&self) -> bool {
        !self.committing.get() && self.open.borrow().is_none()
    }
}

/// The leader's hold on the commit pipeline; dropping it (even mid-commit, if the leading request is
/// cancelled) lets the next command lead.
pub(crate) struct Leading<'a> {
    group: &'a GroupCommit,
}

impl Leading<'_> {
    /// The next group to commit, if one is open.
    pub(crate) fn next_group(&self) -> Option<Group> {
        self.group.open.borrow_mut().take()
    }

    /// A commit failed: the open group (applied on top of it) fails too, and commands applied before
    /// now may no longer join.
    pub(crate) fn failed(&self, outcome: &Settled) {
        self.group.epoch.set(self.group.epoch.get() + 1);
        if let Some(later) = self.next_group() {
            later.settle(outcome);
        }
    }
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        self.group.committing.set(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_join_one_group_until_it_is_taken() {
        let gc = GroupCommit::default();
        let mut a = ChangeSet::default();
        a.put("a", vec![1]);
        let mut b = ChangeSet::default();
        b.put("b", vec![2]);
        let ra = gc.join(0, a, vec!["q".into()]).unwrap();
        let rb = gc.join(0, b, vec!["q".into()]).unwrap();
        let lead = gc.lead().expect("nobody leads yet");
        assert!(gc.lead().is_none(), "one leader at a time");
        let group = lead.next_group().unwrap();
        assert_eq!((group.changes.rows(), group.woken.len()), (2, 1));
        group.settle(&Ok(()));
        assert!(lead.next_group().is_none());
        drop(lead);
        assert!(gc.is_idle());
        for mut r in [ra, rb] {
            assert_eq!(r.try_recv().unwrap(), Some(Ok(())));
        }
    }

    #[test]
    fn a_failure_fails_the_next_group_and_refuses_stale_joins() {
        let gc = GroupCommit::default();
        let applied_in = gc.epoch();
        let lead = gc.lead().unwrap();
        let mut later = gc.join(applied_in, ChangeSet::default(), vec![]).unwrap();
        lead.failed(&Err(StoreError::other("disk full")));
        assert!(later.try_recv().unwrap().unwrap().is_err());
        assert!(gc.join(applied_in, ChangeSet::default(), vec![]).is_none());
        assert!(gc.join(gc.epoch(), ChangeSet::default(), vec![]).is_some());
    }
}

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
//! A commit whose leader is dropped while the store commits it (its request cancelled) has an unknown
//! outcome and counts as failed the same way ([`InFlight`]).
//!
//! # Held groups and notes (recorded requests)
//!
//! A recorded request (the browser's forwarded requests, `Engine::set_recording`) must have its answer
//! written in the very store transaction that holds its changes, and nowhere else. Its command joins the
//! open group and *holds* it ([`GroupCommit::hold_open`]): a held group is never taken for commit. When
//! the answer is ready, [`GroupCommit::release`] puts it into that group as a *note* (a write the group
//! owns, committed with its changes by `Store::commit_noted`) and drops the hold. Groups are numbered, so
//! a release names the group it held: if that group is gone, only a failure can have taken it (a failed
//! commit takes the open group, held or not, and fails its members), and the note is dropped with it.
//! So a note is only ever committed with the changes it describes, and a failed group drops its notes.
//! A holder keeps the command gate while it holds (the engine's `Recording`), so nobody holding the gate
//! waits for a held group; a holder that ends without leading the commit calls a leader
//! ([`GroupCommit::call_a_leader`]), so the group's other members are not left waiting.
//!
//! # Gathering (a store whose commit completes at once)
//!
//! A group forms only while a commit is in flight. Over a store whose commit completes in the call that
//! starts it (Durable Object SQLite), no command ever finds one, so every command commits alone. There
//! the host offers [`Host::gather`](super::Host::gather): a wait during which the requests it holds are
//! delivered. A leader that awaits it before taking the open group keeps `committing` set meanwhile, so
//! the commands applied during the wait join that group and do not lead; the one commit then holds them
//! all, and answers them all when it settles (a failure fails them all, as above).
//!
//! The wait pays only when another request comes during it, and a lone request must not pay it each
//! time. So the leader gathers while gathering brings company: after a wait that brought nobody (a group
//! of one member), the next leads commit at once, one after the first such wait, then twice as many
//! after each further one in a row, at most [`GATHER_PROBE_EVERY`]; the lead after them gathers again,
//! and a gather that brings company starts over ([`GroupCommit::gather_due`],
//! [`GroupCommit::gathered`]). Under load a wait that happens to bring nobody costs one lead without
//! gathering; a lone client waits at fewer and fewer commits, at last at one in `GATHER_PROBE_EVERY + 1`.

use crate::store::{ChangeSet, Note, StoreError};
use futures::channel::oneshot;
use std::cell::{Cell, RefCell};

/// The most leads that commit without gathering after gathers that brought no other member, before
/// the next one gathers again (module documentation, *Gathering*).
pub const GATHER_PROBE_EVERY: u32 = 16;

/// What a group member learns when its group's commit settles.
pub(crate) type Settled = Result<(), StoreError>;

/// The open group: changes of commands applied since the last commit started.
#[derive(Default)]
pub(crate) struct Group {
    pub(crate) changes: ChangeSet,
    pub(crate) woken: Vec<String>,
    pub(crate) members: Vec<oneshot::Sender<Settled>>,
    /// Notes of recorded members, committed in the same transaction as `changes`.
    pub(crate) notes: Vec<Note>,
    /// Holds not yet released: the group is not taken for commit while any is left.
    holds: u32,
    /// The group's number, so a release finds the group it held or learns it is gone.
    number: u64,
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
    /// The number the next group opened gets.
    next_number: Cell<u64>,
    /// Members waiting for their commit, told when a held group is released by a request that will
    /// not lead its commit itself ([`GroupCommit::call_a_leader`]).
    leaders_wanted: RefCell<Vec<oneshot::Sender<()>>>,
    /// Leads left to commit without gathering (module documentation, *Gathering*).
    gather_skips: Cell<u32>,
    /// How many leads skip gathering after the next gather that brings nobody.
    gather_backoff: Cell<u32>,
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
        let group = open.get_or_insert_with(|| {
            let number = self.next_number.get();
            self.next_number.set(number + 1);
            Group {
                number,
                ..Group::default()
            }
        });
        group.changes.absorb(changes);
        for queue in woken {
            if !group.woken.contains(&queue) {
                group.woken.push(queue);
            }
        }
        group.members.push(tx);
        Some(rx)
    }

    /// Holds the open group (the one a command just joined: call it right after [`Self::join`], with no
    /// await between) until [`Self::release`]; returns its number.
    pub(crate) fn hold_open(&self) -> u64 {
        let mut open = self.open.borrow_mut();
        let group = open
            .as_mut()
            .expect("hold_open is called right after a join, so a group is open");
        group.holds += 1;
        group.number
    }

    /// Releases one hold on group `number`, adding `note` to it. `false` when that group is gone: only a
    /// failed commit takes a held group, so its members failed and `note` is dropped with them.
    pub(crate) fn release(&self, number: u64, note: Option<Note>) -> bool {
        let mut open = self.open.borrow_mut();
        match open.as_mut() {
            Some(group) if group.number == number => {
                group.holds -= 1;
                group.notes.extend(note);
                true
            }
            _ => false,
        }
    }

    /// True while group `number` is open (a failure has not taken it).
    pub(crate) fn is_open(&self, number: u64) -> bool {
        self.open
            .borrow()
            .as_ref()
            .is_some_and(|group| group.number == number)
    }

    /// Fails the open group, held or not, with its notes, as a failed commit does (see
    /// [`Leading::failed`]): for a held group whose holder must undo one of its commands.
    pub(crate) fn fail_open(&self, outcome: &Settled) {
        self.epoch.set(self.epoch.get() + 1);
        let open = self.open.borrow_mut().take();
        if let Some(open) = open {
            open.settle(outcome);
        }
    }

    /// Completes when [`Self::call_a_leader`] is next called: a member waiting for its commit awaits
    /// this beside its outcome, and tries to lead when it fires.
    pub(crate) fn leader_wanted(&self) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        let mut wanted = self.leaders_wanted.borrow_mut();
        // Drop the calls of members that were answered meanwhile.
        wanted.retain(|s| !s.is_canceled());
        wanted.push(tx);
        rx
    }

    /// Wakes every member waiting for its commit, so one of them leads: called when a group is released
    /// by a request that ends without leading its commit (its future was dropped).
    pub(crate) fn call_a_leader(&self) {
        let wanted = std::mem::take(&mut *self.leaders_wanted.borrow_mut());
        for member in wanted {
            let _ = member.send(());
        }
    }

    /// Takes the lead if no commit is in flight: `Some` guard while leading.
    pub(crate) fn lead(&self) -> Option<Leading<'_>> {
        if self.committing.get() {
            return None;
        }
        self.committing.set(true);
        Some(Leading { group: self })
    }

    /// Whether a leader that may gather should (module documentation, *Gathering*): counts down the
    /// leads left to commit at once after a gather that brought nobody.
    pub(crate) fn gather_due(&self) -> bool {
        match self.gather_skips.get() {
            0 => true,
            left => {
                self.gather_skips.set(left - 1);
                false
            }
        }
    }

    /// A gather ended with a group of `members`: one (nobody came) stops gathering for some leads,
    /// twice as many as the last time in a row, at most [`GATHER_PROBE_EVERY`]; more starts over.
    pub(crate) fn gathered(&self, members: usize) {
        if members > 1 {
            self.gather_skips.set(0);
            self.gather_backoff.set(1);
        } else {
            let skips = self.gather_backoff.get().clamp(1, GATHER_PROBE_EVERY);
            self.gather_skips.set(skips);
            self.gather_backoff.set((skips * 2).min(GATHER_PROBE_EVERY));
        }
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
    /// The next group to commit, if one is open and not held.
    pub(crate) fn next_group(&self) -> Option<Group> {
        let mut open = self.group.open.borrow_mut();
        if open.as_ref().is_some_and(|group| group.holds > 0) {
            return None;
        }
        open.take()
    }

    /// A commit failed: the open group (applied on top of it) fails too, held or not, with its notes,
    /// and commands applied before now may no longer join.
    pub(crate) fn failed(&self, outcome: &Settled) {
        self.group.fail_open(outcome);
    }

    /// Marks a commit as started: until [`InFlight::landed`], dropping the guard (the leader's request
    /// cancelled while the store commits) leaves its outcome unknown, so it is taken as a failure.
    pub(crate) fn in_flight<'b>(&'b self, needs_reload: &'b Cell<bool>) -> InFlight<'b> {
        InFlight {
            group: self.group,
            needs_reload: Some(needs_reload),
        }
    }
}

/// A commit whose outcome the leader has not learnt yet ([`Leading::in_flight`]). Dropped before
/// [`InFlight::landed`], the commit may or may not have happened: the open group (applied on top of
/// it) fails as after a failed commit, and the engine reloads from the store before the next command,
/// so nothing applied on top of an unknown commit is acknowledged.
pub(crate) struct InFlight<'a> {
    group: &'a GroupCommit,
    /// The engine's reload flag; `None` once the outcome is known.
    needs_reload: Option<&'a Cell<bool>>,
}

impl InFlight<'_> {
    /// The store answered: the leader handles the outcome itself.
    pub(crate) fn landed(mut self) {
        self.needs_reload = None;
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Some(needs_reload) = self.needs_reload {
            needs_reload.set(true);
            self.group.fail_open(&Err(StoreError::other(
                "the commit these changes were applied on was abandoned (its request was \
                 cancelled); its outcome is unknown, and nothing applied on top of it was kept",
            )));
        }
    }
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        self.group.committing.set(false);
        // A leader that ends with a group open it could take was dropped before taking it (its request
        // cancelled while it gathered): its members, waiting for their commit, are called to lead it.
        // (Dropped while a commit was in flight, [`InFlight`] failed the open group first.)
        let stranded = self
            .group
            .open
            .borrow()
            .as_ref()
            .is_some_and(|group| group.holds == 0);
        if stranded {
            self.group.call_a_leader();
        }
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
    fn a_held_group_is_committed_after_its_release_with_its_note() {
        let gc = GroupCommit::default();
        let mut member = gc.join(0, ChangeSet::default(), vec![]).unwrap();
        let held = gc.hold_open();
        let lead = gc.lead().unwrap();
        assert!(lead.next_group().is_none(), "held: not taken");
        assert!(gc.release(held, Some(("req/1".into(), vec![7]))));
        let group = lead.next_group().expect("released");
        assert_eq!(group.notes, vec![("req/1".to_string(), vec![7])]);
        group.settle(&Ok(()));
        assert_eq!(member.try_recv().unwrap(), Some(Ok(())));
    }

    #[test]
    fn a_failure_takes_a_held_group_and_its_later_release_finds_it_gone() {
        let gc = GroupCommit::default();
        let lead = gc.lead().unwrap();
        let mut member = gc.join(0, ChangeSet::default(), vec![]).unwrap();
        let held = gc.hold_open();
        lead.failed(&Err(StoreError::other("disk full")));
        assert!(
            member.try_recv().unwrap().unwrap().is_err(),
            "its members fail"
        );
        // A new group opens; the release must not put the note there.
        let _other = gc.join(gc.epoch(), ChangeSet::default(), vec![]).unwrap();
        assert!(!gc.release(held, Some(("req/1".into(), vec![7]))));
        assert!(lead.next_group().unwrap().notes.is_empty());
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

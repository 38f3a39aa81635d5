//! The engine: the async shell around the sans-IO [`Broker`] (docs/protocol.md §5).
//!
//! For each command it takes the command gate (one command at a time), applies the command to the core
//! with the host's `now`, and hands its change set to the group commit (module `group`): commands
//! applied while a commit is in flight are committed together in the next one, and each replies only
//! after the commit that holds its changes. If a commit fails, every command in it (and in the group
//! formed during it) fails, and the in-memory state is reloaded from the store, so a failed write never
//! leaves the broker believing something the store does not hold: the error path is the restart path.
//!
//! A *recorded* request (the browser's forwarded requests, [`Engine::set_recording`]) has its answer
//! committed in the same store transaction as all its changes: its first command holds its group open
//! and keeps the command gate, its later commands join that same group, and the answer goes into it as
//! a note when it is ready (module `group`, *Held groups and notes*; [`Recording`]).
//!
//! Long-polls park here: a pop with `wait_ms` that finds nothing registers a waiter for its queue and
//! sleeps (through the [`Host`]) until a push, a lease release, the next lease expiry or retry-hold end,
//! or its deadline, then tries again.

mod gate;
mod group;
mod modes;
mod waiters;

pub use group::GATHER_PROBE_EVERY;
#[cfg(feature = "ops")]
pub use modes::PushOutcome;

use crate::core::api::*;
use crate::core::{
    needs_segment_upgrade, segment_key, segments_from, Broker, BrokerConfig, INDEX_PREFIXES,
    SEGMENT_PREFIX,
};
use crate::store::{ChangeSet, Note, Store, StoreError};
use futures::channel::oneshot;
use futures::future::{select, Either, LocalBoxFuture};
use gate::{Gate, GateGuard};
use group::{GroupCommit, Settled};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use waiters::Waiters;

/// What the engine needs from the runtime it lives in: a clock and a way to sleep.
pub trait Host {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;
    /// A future that completes after `ms` milliseconds.
    fn sleep(&self, ms: u64) -> LocalBoxFuture<'static, ()>;
    /// 64 bits of entropy to seed id generation, fresh at every call (called at open and at every
    /// reload; a host that returns the same bits twice risks minting the same lease id twice).
    fn entropy(&self) -> u64;
    /// A future that completes once the requests the host holds for this broker have been delivered
    /// (one macrotask in a JS runtime), awaited by a commit's leader before it takes the open group, so
    /// that the commands of those requests ride in the same commit; `None` (the default): commit at
    /// once. Worth it where a commit's cost is mostly per commit and nothing else would group them: a
    /// store whose commit completes in the call that starts it (Durable Object SQLite).
    fn gather(&self) -> Option<LocalBoxFuture<'static, ()>> {
        None
    }
}

/// Why an engine command failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineError {
    /// The core refused the command (bad input, not found, ...). Nothing changed.
    Core(CoreError),
    /// The store failed. Nothing the command did is visible; state was reloaded from the store.
    Store(StoreError),
}

impl std::fmt::Display for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EngineError::Core(e) => write!(f, "{e}"),
            EngineError::Store(e) => write!(f, "storage failure: {e}"),
        }
    }
}

impl std::error::Error for EngineError {}

impl From<CoreError> for EngineError {
    fn from(e: CoreError) -> Self {
        EngineError::Core(e)
    }
}

impl From<StoreError> for EngineError {
    fn from(e: StoreError) -> Self {
        EngineError::Store(e)
    }
}

/// Result of an engine command.
pub type EngineResult<T> = Result<T, EngineError>;

/// Counters about the engine's own work (for benchmarks and metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineCounters {
    /// Change sets committed.
    pub commits: u64,
    /// Members of committed groups beyond the first (a commit that answered `n` commands adds `n - 1`):
    /// how much group commit, gathering included, shared commits.
    pub shared: u64,
    /// Rows (puts + deletes) committed.
    pub rows_written: u64,
    /// Bytes of values committed.
    pub bytes_written: u64,
    /// Reloads after a failed commit.
    pub reloads: u64,
    /// Segments read from the store on demand.
    pub segments_read: u64,
    /// Commands run again because they read a segment their planner did not load.
    pub reruns: u64,
}

/// Names the segments (partition id, first offset) a command will read: the core's
/// `segments_needed_*` planners.
type SegmentPlanner<'a> = dyn Fn(&Broker, i64) -> Vec<(u64, u64)> + 'a;

/// Most runs of one command (see [`Engine::run`]); each run after the first loads what the one before
/// it missed, so a second run settles unless the store changes under the engine.
const MAX_RUNS: usize = 3;

/// A recorded request's tie to the group commit: set it around every poll of the request's future
/// ([`Engine::set_recording`]), then call [`Engine::finish_recording`] with the answer.
///
/// Invariants (each command replies only after the commit that holds its changes; an answer is stored
/// exactly when all those changes are, and a request whose changes are not all stored fails):
/// - the request's first command joins the open group, *holds* it (it is not committed) and *keeps the
///   command gate*; each later command of the request passes the gate it keeps and joins the same
///   group, so every change of the request, of several commands too (a bulk dead-letter replay in
///   chunks), is in that one group, and commands return before the commit, so the answer can be
///   rendered;
/// - a held group's holder keeps the gate, so no other command waits for a held group while holding
///   the gate (no deadlock), and nobody else applies a command on top of the request until it is
///   answered;
/// - before a long-poll parks, the group and the gate are released without a note and the request
///   waits for the commit of its commands (a parked pop holds nothing);
/// - a later command of the request that must be undone (a rollback, a segment read it did not plan)
///   would need a reload that drops the held, uncommitted changes: the held group fails instead, as
///   if its commit had failed, and so does the request;
/// - [`Engine::finish_recording`] puts the answer into the held group as a note, releases it and the
///   gate, leads or waits for its commit, and fails if it failed. If a failure took the held group
///   meanwhile, the note is dropped with it and the request's later commands are refused.
#[derive(Default)]
pub struct Recording {
    /// The number of the group holding the request's commands, while held.
    held: Cell<Option<u64>>,
    /// The request keeps the command gate (from its first command until it releases its group).
    keeps_gate: Cell<bool>,
    /// One of its commands changed something (its answer is then worth recording).
    changed: Cell<bool>,
    /// Outcomes of the commits holding the request's commands, not yet awaited.
    settled: RefCell<Vec<oneshot::Receiver<Settled>>>,
    /// Its answer holds payloads opened from `encryptionEnabled` queues ([`Engine::note_opened_payloads`]).
    opened: Cell<bool>,
}

impl Recording {
    /// True when the request's answer holds payloads opened from `encryptionEnabled` queues: its record
    /// must not keep that answer, which would store them in plain text.
    pub fn holds_opened_payloads(&self) -> bool {
        self.opened.get()
    }
}

/// The command gate as one command holds it: taken for it, or kept by its recorded request across its
/// commands (see [`Recording`]).
struct CommandGate<'a> {
    /// `None`: kept by the request, released by it when it releases its group.
    guard: Option<GateGuard<'a>>,
}

impl CommandGate<'_> {
    /// True when the request keeps the gate (this command did not take it).
    fn kept(&self) -> bool {
        self.guard.is_none()
    }

    /// Leaves the gate held for `recording` after this command.
    fn keep_for(mut self, recording: &Recording) {
        if let Some(guard) = self.guard.take() {
            guard.keep();
            recording.keeps_gate.set(true);
        }
    }
}

/// A broker over a store, serving one command at a time.
pub struct Engine<S: Store, H: Host> {
    store: S,
    host: H,
    config: BrokerConfig,
    core: RefCell<Broker>,
    gate: Gate,
    needs_reload: Cell<bool>,
    waiters: Waiters,
    group: GroupCommit,
    counters: Cell<EngineCounters>,
    /// The recording of the request whose future is being polled, if any ([`Self::set_recording`]).
    recording: RefCell<Option<Rc<Recording>>>,
}

impl<S: Store, H: Host> Engine<S, H> {
    /// Opens a broker over `store`, loading everything the core keeps in memory.
    pub async fn open(store: S, host: H, config: BrokerConfig) -> EngineResult<Self> {
        let core = Self::load(&store, &host, &config).await?;
        Ok(Engine {
            store,
            host,
            config,
            core: RefCell::new(core),
            gate: Gate::default(),
            needs_reload: Cell::new(false),
            waiters: Waiters::default(),
            group: GroupCommit::default(),
            counters: Cell::new(EngineCounters::default()),
            recording: RefCell::new(None),
        })
    }

    /// Sets the recording the commands applied from now on belong to (`None`: not recorded) and returns
    /// the one set before. Set it around each poll of one request's future, so only its own commands
    /// see it.
    pub fn set_recording(&self, recording: Option<Rc<Recording>>) -> Option<Rc<Recording>> {
        self.recording.replace(recording)
    }

    /// Ends a recorded request whose answer is ready: `note()` (its answer, as a note) goes into the
    /// group holding the request's commands if one of them changed something, the group and the gate
    /// are released, the group is committed, and this waits for the commit of every command of the
    /// request.
    /// `Ok(true)`: the note was committed with the request's changes; `Ok(false)`: there was nothing to
    /// record (no change held); `Err`: a commit holding the request's changes failed, and the note, if
    /// any, was dropped with them.
    pub async fn finish_recording(
        &self,
        recording: &Recording,
        note: impl FnOnce() -> Note,
    ) -> EngineResult<bool> {
        let note = recording
            .held
            .get()
            .filter(|_| recording.changed.get())
            .map(|_| note());
        let recorded = note.is_some();
        self.release_recording(recording, note);
        self.settle_recording(recording).await?;
        Ok(recorded)
    }

    /// Tells the current request's recording, if it has one, that its answer holds payloads opened from
    /// `encryptionEnabled` queues (see [`Recording::holds_opened_payloads`]).
    pub fn note_opened_payloads(&self) {
        if let Some(recording) = self.recording.borrow().as_ref() {
            recording.opened.set(true);
        }
    }

    /// Releases the group and the gate a recording holds, without a note, and does not wait: for a
    /// request that ends without answering (its future was dropped). The other members of the group
    /// waiting for its commit are woken, so one of them leads it.
    pub fn abandon_recording(&self, recording: &Recording) {
        if self.release_recording(recording, None) {
            self.group.call_a_leader();
        }
    }

    /// Releases the group `recording` holds (if any), adding `note` to it, then the gate it keeps. If the
    /// group is gone, a failure took it: its members (the request's commands among them) learn it from
    /// their outcome. True when it released a group still open (whose commit is then due).
    fn release_recording(&self, recording: &Recording, note: Option<Note>) -> bool {
        let released = recording
            .held
            .take()
            .is_some_and(|number| self.group.release(number, note));
        recording.changed.set(false);
        if recording.keeps_gate.replace(false) {
            self.gate.release_kept();
        }
        released
    }

    /// The current request's recording if it keeps the command gate (see [`Recording`]).
    fn recording_keeping_gate(&self) -> Option<Rc<Recording>> {
        self.recording
            .borrow()
            .clone()
            .filter(|recording| recording.keeps_gate.get())
    }

    /// Releases what `recording` holds, leads the commits (unless a commit is in flight, whose leader
    /// then goes on with them) and waits for the outcome of every commit holding the request's commands.
    async fn settle_recording(&self, recording: &Recording) -> EngineResult<()> {
        self.release_recording(recording, None);
        let settled = std::mem::take(&mut *recording.settled.borrow_mut());
        if settled.is_empty() {
            return Ok(());
        }
        self.lead_commits(false).await;
        for outcome in settled {
            self.await_commit(outcome).await?;
        }
        Ok(())
    }

    /// Settles the current request's recording, if it has one (see [`Recording`]): called before every
    /// wait inside the engine.
    async fn settle_current_recording(&self) -> EngineResult<()> {
        let recording = self.recording.borrow().clone();
        match recording {
            Some(recording) => self.settle_recording(&recording).await,
            None => Ok(()),
        }
    }

    /// Reads the index records (never the segments, except once to upgrade format 1 data) and builds
    /// the core from them, committing the upgrade if there was one.
    async fn load(store: &S, host: &H, config: &BrokerConfig) -> EngineResult<Broker> {
        let mut records = Vec::new();
        for prefix in INDEX_PREFIXES {
            records.extend(store.scan(prefix).await?);
        }
        if needs_segment_upgrade(&records) {
            records.extend(store.scan(SEGMENT_PREFIX).await?);
            crate::core::sort::sort_by(&mut records, |a, b| a.0.cmp(&b.0));
        }
        let mut core = Broker::from_records(config.clone(), host.entropy(), records)
            .map_err(EngineError::Store)?;
        let upgrade = core.take_changes();
        if !upgrade.is_empty() {
            store.commit(&upgrade).await?;
        }
        Self::index_unpaged_segments(store, &mut core).await?;
        Ok(core)
    }

    /// Finds the segments stored past each partition's indexed end (pushed after the last index page
    /// was written: module `core::pages`) and indexes them from their own bytes, one key a partition at
    /// a time, until every partition's next key is absent: fewer than `ENTRIES_PER_PAGE` reads a
    /// partition. Without this the next push would take their offsets and overwrite them. Then one read
    /// of every partition's segment keys past its absent key: one stored there is damage (a segment
    /// missing before it), an error rather than a partition cut short there. The absent key itself found
    /// there is not: it was committed after the probe read it, by another writer (a browser tab that took
    /// the writer epoch during this open, each read being a transaction of its own), and this open's
    /// first commit is refused by the fence.
    async fn index_unpaged_segments(store: &S, core: &mut Broker) -> EngineResult<()> {
        let mut ends = core.indexed_ends();
        let mut absent = Vec::with_capacity(ends.len());
        while !ends.is_empty() {
            let keys: Vec<String> = ends.iter().map(|(p, o)| segment_key(*p, *o)).collect();
            let found = store.get(&keys).await?;
            let mut next = Vec::new();
            for ((pid, first), value) in ends.into_iter().zip(found) {
                match value {
                    Some(bytes) => next.push((pid, core.index_found_segment(pid, first, &bytes)?)),
                    None => absent.push((pid, first)),
                }
            }
            ends = next;
        }
        if !absent.is_empty() {
            let ranges: Vec<_> = absent.iter().map(|(p, o)| segments_from(*p, *o)).collect();
            let stored = store.first_keys(&ranges).await?;
            let past_a_gap = |((pid, end), key): &(&(u64, u64), Option<String>)| {
                key.as_ref()
                    .is_some_and(|key| *key != segment_key(*pid, *end))
            };
            if let Some(((pid, end), Some(found))) = absent.iter().zip(stored).find(past_a_gap) {
                return Err(EngineError::Store(
                    core.segment_past_a_gap(*pid, *end, &found),
                ));
            }
        }
        // A page filled by what was found (only if the pages were shorter when written).
        let pages = core.take_changes();
        if !pages.is_empty() {
            store.commit(&pages).await?;
        }
        Ok(())
    }

    /// Reads `segments` from the store into the core's cache. A segment the index names but the store
    /// lacks is damage, reported as an error (never skipped).
    async fn fetch_segments(&self, segments: &[(u64, u64)]) -> EngineResult<()> {
        if segments.is_empty() {
            return Ok(());
        }
        let keys: Vec<String> = segments
            .iter()
            .map(|(pid, first)| segment_key(*pid, *first))
            .collect();
        let values = self.store.get(&keys).await?;
        let core = self.core.borrow();
        for ((pid, first), (key, value)) in segments.iter().zip(keys.iter().zip(values)) {
            let Some(bytes) = value else {
                return Err(EngineError::Store(StoreError::other(format!(
                    "storage is damaged: segment \"{key}\" is indexed but not stored"
                ))));
            };
            core.load_segment(*pid, *first, &bytes)?;
        }
        let mut c = self.counters.get();
        c.segments_read += segments.len() as u64;
        self.counters.set(c);
        Ok(())
    }

    /// The store underneath.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The host underneath.
    pub fn host(&self) -> &H {
        &self.host
    }

    /// Work counters.
    pub fn counters(&self) -> EngineCounters {
        self.counters.get()
    }

    /// Runs a read-only view over the current state (memory: what the store holds, plus commits in
    /// flight; after a failed commit, also what it refused until the next command reloads, see
    /// [`Self::reload_if_failed`]).
    pub fn read<R>(&self, f: impl FnOnce(&Broker, i64) -> R) -> R {
        let now = self.host.now_ms();
        f(&self.core.borrow(), now)
    }

    /// [`Self::read`] after [`Self::reload_if_failed`]: never reads changes a failed commit refused.
    pub async fn read_current<R>(&self, f: impl FnOnce(&Broker, i64) -> R) -> EngineResult<R> {
        self.reload_if_failed().await?;
        // No await between the reload and the read: no failure can come between them.
        Ok(self.read(f))
    }

    /// If a commit failed and memory still holds what it refused (the engine reloads when the next
    /// command takes the gate), reloads now; does nothing otherwise. Called at the start of each HTTP
    /// request, so memory-only reads ([`Self::read`]) answer from what the store holds.
    pub async fn reload_if_failed(&self) -> EngineResult<()> {
        if self.needs_reload.get() {
            // Entering reloads (or, for a recorded request whose own group failed, refuses).
            drop(self.enter().await?);
        }
        Ok(())
    }

    /// Waits until memory holds only committed state: takes the command gate (no command applies
    /// meanwhile), waits for the commits in flight and reloads if one failed, then releases the gate. A
    /// memory-only read ([`Self::read`]) with no await between it and this call's return reads only what
    /// the store holds. A recorded request keeping the gate reads its own held group, as
    /// [`Self::read_loaded`] does.
    pub async fn settle(&self) -> EngineResult<()> {
        let gate = self.enter().await?;
        if !gate.kept() {
            self.flush().await?;
        }
        Ok(())
    }

    /// Runs a read-only view that reads messages, under the command gate (so it sees only committed
    /// state), loading the segments it reads: a run that misses some loads them and runs again.
    pub async fn read_loaded<R>(&self, f: impl Fn(&Broker, i64) -> R) -> EngineResult<R> {
        let gate = self.enter().await?;
        if !gate.kept() {
            // Only committed state: wait for commits in flight (nothing new applies: we hold the gate).
            // A recorded request keeping the gate reads its own held group instead: what it reads is
            // committed with its answer or the request fails (see `Recording`).
            self.flush().await?;
        }
        // Trimmed before the first run only: what a run missed and was loaded stays for the next.
        self.core.borrow().trim_cache();
        for _attempt in 0..MAX_RUNS {
            let now = self.host.now_ms();
            let result = f(&self.core.borrow(), now);
            let missed = self.core.borrow().take_segment_misses();
            if missed.is_empty() {
                return Ok(result);
            }
            self.fetch_segments(&missed).await?;
        }
        Err(EngineError::Store(StoreError::other(format!(
            "a read kept reading segments that were not loaded ({MAX_RUNS} runs)"
        ))))
    }

    /// Drops the in-memory state and reloads it from the store (also what a restart does).
    pub async fn reload(&self) -> EngineResult<()> {
        let _gate = self.gate.enter().await;
        // Commits in flight land first: a reload before one lands would forget what it acknowledges
        // (the next push would take its offsets), and its leader would report the old cache's clock.
        self.flush().await?;
        self.reload_locked().await
    }

    /// Reloads with the gate already held (boxed: it is awaited from several places).
    fn reload_locked(&self) -> LocalBoxFuture<'_, EngineResult<()>> {
        Box::pin(async move {
            #[allow(unused_mut)]
            let mut core = Self::load(&self.store, &self.host, &self.config).await?;
            // A reload is not a restart: the queues' recent history goes on (module core::history).
            #[cfg(feature = "views")]
            core.keep_history(&mut self.core.borrow_mut());
            *self.core.borrow_mut() = core;
            self.needs_reload.set(false);
            let mut c = self.counters.get();
            c.reloads += 1;
            self.counters.set(c);
            // Anything may have changed: let every parked pop look again.
            self.waiters.wake_all();
            Ok(())
        })
    }

    /// Applies one command under the gate and commits its changes before returning.
    ///
    /// `needs` names the segments the command will read (the core's `segments_needed_*` planners); they
    /// are loaded first. The command may run more than once: if it reads a segment its planner did not
    /// name, its effects are dropped (reload), the segment is loaded and it runs again, so it must be
    /// repeatable (take its input by reference, or clone it).
    ///
    /// Generic over the command, but nothing here awaits anything of its own: the command runs inside
    /// [`Self::run_erased`] through a `dyn FnMut`, so every command shares one future for the gate, the
    /// commit and the wakeups instead of carrying its own copy (about 2.3 KB gzipped of the browser
    /// module, docs/decisions.md).
    async fn run<R>(
        &self,
        needs: impl Fn(&Broker, i64) -> Vec<(u64, u64)>,
        mut command: impl FnMut(&mut Broker, i64) -> CoreResult<R>,
    ) -> EngineResult<R> {
        let mut outcome = None;
        self.run_erased(&needs, &mut |core, now| {
            outcome = Some(command(core, now));
        })
        .await?;
        match outcome {
            Some(outcome) => outcome.map_err(EngineError::Core),
            None => unreachable!("run_erased calls the command when it returns Ok"),
        }
    }

    /// A command that reads no segment (configure, seek, extend a lease, ...).
    async fn run_plain<R>(
        &self,
        command: impl FnMut(&mut Broker, i64) -> CoreResult<R>,
    ) -> EngineResult<R> {
        self.run(|_, _| Vec::new(), command).await
    }

    /// The command-independent part of [`Self::run`]: takes the gate, loads what `needs` names, calls
    /// `command` with the state and the time (again after a miss, see [`Self::run`]), then settles what
    /// it changed. Returns `Ok` only after `command` ran.
    fn run_erased<'a>(
        &'a self,
        needs: &'a SegmentPlanner<'a>,
        command: &'a mut dyn FnMut(&mut Broker, i64),
    ) -> LocalBoxFuture<'a, EngineResult<()>> {
        Box::pin(async move {
            let gate = self.enter().await?;
            let applied_in = self.group.epoch();
            let mut missed: Vec<(u64, u64)> = Vec::new();
            // Trimmed before the first run only: nothing loaded for a command is evicted during it.
            self.core.borrow().trim_cache();
            for _attempt in 0..MAX_RUNS {
                let now = self.host.now_ms();
                let wanted = {
                    let core = self.core.borrow();
                    let mut wanted = needs(&core, now);
                    wanted.append(&mut missed);
                    wanted
                };
                self.fetch_segments(&wanted).await?;
                let (changes, woken, discard) = {
                    let mut core = self.core.borrow_mut();
                    command(&mut core, now);
                    let discard = core.take_discard_flag();
                    (core.take_changes(), core.take_woken_queues(), discard)
                };
                missed = self.core.borrow().take_segment_misses();
                if missed.is_empty() && !discard {
                    let changed = !changes.is_empty();
                    let Some(settled) = self.group.join(applied_in, changes, woken) else {
                        return Err(EngineError::Store(StoreError::other(
                            "a commit failed while this command was applied; nothing of it was kept",
                        )));
                    };
                    let recording = self.recording.borrow().clone();
                    if let Some(recording) = recording {
                        // A recorded request's command: its group waits for the answer, and the
                        // request keeps the gate until then (`Recording`). A later command joined
                        // the group its first one holds (`enter` checked it is still open, and the
                        // epoch check above that no failure took it since).
                        if recording.held.get().is_none() {
                            recording.held.set(Some(self.group.hold_open()));
                        }
                        recording.changed.set(recording.changed.get() || changed);
                        recording.settled.borrow_mut().push(settled);
                        gate.keep_for(&recording);
                        return Ok(());
                    }
                    if self.config.group_commit {
                        // The next command may be applied while this one waits for its commit.
                        drop(gate);
                        self.lead_commits(true).await;
                    } else {
                        // Committed in this call, under the gate: a group of one.
                        self.lead_commits(false).await;
                        drop(gate);
                    }
                    return self.await_commit(settled).await;
                }
                // Its effects must go: a transaction that rolled back, or a command that read a
                // segment that was not loaded (what it did may rest on a message it did not see).
                // Reload from the store once the commits in flight are done (we hold the gate). Marked
                // first: if the reload fails, the next command reloads before it runs, so these effects
                // can never reach a later commit.
                self.needs_reload.set(true);
                if gate.kept() {
                    // A later command of a recorded request: the reload would drop its held,
                    // uncommitted changes. Its group fails instead, and so does the request.
                    let failure = StoreError::other(
                        "a command of this recorded request had to be undone while its earlier \
                         commands were not committed; nothing of the request was kept",
                    );
                    self.group.fail_open(&Err(failure.clone()));
                    self.flush().await?;
                    return Err(EngineError::Store(failure));
                }
                self.flush().await?;
                if missed.is_empty() {
                    return Ok(());
                }
                let mut c = self.counters.get();
                c.reruns += 1;
                self.counters.set(c);
            }
            // Named by their keys (no `Debug` formatting in the browser module).
            let missed: Vec<String> = missed.iter().map(|(p, f)| segment_key(*p, *f)).collect();
            Err(EngineError::Store(StoreError::other(format!(
                "a command kept reading segments that were not loaded ({MAX_RUNS} runs); nothing was \
                 changed: {}",
                missed.join(", ")
            ))))
        })
    }

    /// Takes the command gate, reloading first if an earlier commit failed. A recorded request that
    /// keeps the gate passes (see [`Recording`]), unless a failure took its group: then it is refused.
    fn enter(&self) -> LocalBoxFuture<'_, EngineResult<CommandGate<'_>>> {
        Box::pin(async move {
            if let Some(recording) = self.recording_keeping_gate() {
                let lost = recording
                    .held
                    .get()
                    .is_some_and(|number| !self.group.is_open(number));
                if lost || self.needs_reload.get() {
                    return Err(EngineError::Store(StoreError::other(
                        "a commit failed under this recorded request's earlier commands; nothing of \
                         the request was kept",
                    )));
                }
                return Ok(CommandGate { guard: None });
            }
            // Nothing is held without the gate; this only waits for commits left unawaited.
            self.settle_current_recording().await?;
            let gate = self.gate.enter().await;
            if self.needs_reload.get() {
                // A commit failed: let the commits in flight settle, then reload (flush does both).
                self.flush().await?;
            }
            Ok(CommandGate { guard: Some(gate) })
        })
    }

    /// Waits for the outcome of the commit holding a command. If a held group is released by a request
    /// that does not lead its commit (`abandon_recording`), this tries to lead it.
    /// Call it right after leading (or finding a leader), with no await between.
    async fn await_commit(&self, mut settled: oneshot::Receiver<Settled>) -> EngineResult<()> {
        loop {
            let wanted = self.group.leader_wanted();
            match select(settled, wanted).await {
                Either::Left((Ok(outcome), _)) => return outcome.map_err(EngineError::Store),
                Either::Left((Err(_), _)) => {
                    return Err(EngineError::Store(StoreError::other(
                        "the commit holding this command was abandoned; its outcome is unknown",
                    )))
                }
                Either::Right((_, pending)) => {
                    self.lead_commits(false).await;
                    settled = pending;
                }
            }
        }
    }

    /// Commits open groups until none is left, unless another command is already doing so (module
    /// `group`). Each group's members are answered when its commit settles. With `gather` (a command
    /// that released the gate, so others can be applied meanwhile), the leader first awaits the host's
    /// [`Host::gather`] when the group commit's gathering says it pays (module `group`, *Gathering*).
    fn lead_commits(&self, gather: bool) -> LocalBoxFuture<'_, ()> {
        Box::pin(async move {
            let Some(leading) = self.group.lead() else {
                return;
            };
            let gathered = if gather && self.group.gather_due() {
                self.host.gather()
            } else {
                None
            };
            let gathering = gathered.is_some();
            if let Some(gathered) = gathered {
                gathered.await;
            }
            let mut first = true;
            while let Some(group) = leading.next_group() {
                if std::mem::take(&mut first) && gathering {
                    self.group.gathered(group.members.len());
                }
                // Every change applied so far is in this group or an earlier one (a command joins
                // right after it is applied): the segments pushed until now are committed with it.
                let applied_through = self.core.borrow().cache_clock();
                let writes = !group.changes.is_empty() || !group.notes.is_empty();
                // Dropped mid-commit (the leading request cancelled), the outcome is unknown: what was
                // applied on top of it fails and the engine reloads (`group::InFlight`).
                let in_flight = leading.in_flight(&self.needs_reload);
                let outcome = if !writes {
                    Ok(())
                } else if group.notes.is_empty() {
                    self.store.commit(&group.changes).await
                } else {
                    // Recorded answers go in the same transaction as the changes they report.
                    self.store.commit_noted(&group.changes, &group.notes).await
                };
                in_flight.landed();
                match &outcome {
                    Ok(()) => {
                        let mut c = self.counters.get();
                        if writes {
                            c.commits += 1;
                            c.shared += group.members.len().saturating_sub(1) as u64;
                        }
                        c.rows_written += group.changes.rows() as u64;
                        c.bytes_written += group.changes.bytes() as u64;
                        self.counters.set(c);
                        self.core.borrow().cache_committed_through(applied_through);
                        self.waiters.wake(&group.woken);
                    }
                    Err(_) => {
                        // Memory holds what the store refused: reload before the next command.
                        self.needs_reload.set(true);
                        leading.failed(&outcome);
                    }
                }
                group.settle(&outcome);
            }
        })
    }

    /// Waits until no commit is in flight and no group is open (leading the open one if nobody does).
    /// Called with the gate held, so no command joins meanwhile.
    async fn flush(&self) -> EngineResult<()> {
        while !self.group.is_idle() {
            let Some(settled) =
                self.group
                    .join(self.group.epoch(), ChangeSet::default(), Vec::new())
            else {
                continue;
            };
            self.lead_commits(false).await;
            // A failure of the group it waited for is that group's members' error, not the caller's.
            // Awaited as a member does: if that group's leader is dropped before it takes it (its
            // request cancelled while it gathers), this leads it, as nobody else can join while the
            // gate is held here.
            let _ = self.await_commit(settled).await;
        }
        if self.needs_reload.get() {
            self.reload_locked().await?;
        }
        Ok(())
    }

    /// Pushes messages (docs/protocol.md §3.1; wire-contract §1.2).
    pub async fn push(&self, items: Vec<PushItem>) -> EngineResult<Vec<PushResult>> {
        // Taken by the run that pushes them; a run that missed a segment leaves them for the next.
        let items = std::cell::RefCell::new(items);
        // What a run's lookup found, taken by that run's push (the core uses it only while it
        // still holds: `PushLookup`).
        let lookup = std::cell::Cell::new(None);
        self.run(
            |b, _| {
                let mut found = b.look_up_push(&items.borrow());
                let segments = std::mem::take(&mut found.segments);
                lookup.set(Some(found));
                segments
            },
            |b, now| b.push_taking(now, &mut items.borrow_mut(), lookup.take()),
        )
        .await
    }

    /// Pops (claims) messages; with `wait_ms`, parks until something is claimable or the time passes.
    pub async fn pop(&self, request: PopRequest, wait_ms: Option<u64>) -> EngineResult<PopReply> {
        self.pop_for(request, wait_ms, &|| false).await
    }

    /// [`Engine::pop`] for a client that may go while its long-poll is parked: once `gone` says so, the
    /// pop stops at its next wake-up with what it has (nothing), instead of claiming messages nobody
    /// would receive (wire-contract §1.3). Checked after each wait, before the next attempt.
    pub async fn pop_for(
        &self,
        mut request: PopRequest,
        wait_ms: Option<u64>,
        gone: &dyn Fn() -> bool,
    ) -> EngineResult<PopReply> {
        let began = self.host.now_ms();
        let deadline = wait_ms.map(|w| began.saturating_add(w as i64));
        let parked_queue = match &request.target {
            PopTarget::Queue { queue } | PopTarget::Partition { queue, .. } => Some(queue.clone()),
            PopTarget::Discovery { .. } => None,
        };
        // A parking pop registers as a waiter when its empty attempt is applied, not after its commit:
        // a push applied meanwhile (with group commit, possibly in the very commit that holds this
        // attempt) wakes it, instead of being missed until the deadline.
        let waiter = RefCell::new(None);
        loop {
            let (reply, next_timer_ms) = self
                .run(
                    |b, now| b.segments_needed_for_pop(now, &request),
                    |b, now| {
                        let reply = b.pop(now, &request)?;
                        let parks = deadline.is_some() && reply.messages.is_empty();
                        if let Some(queue) = parked_queue.as_ref().filter(|_| parks) {
                            *waiter.borrow_mut() = Some(self.waiters.register(queue));
                        }
                        Ok((reply, b.next_deadline_ms()))
                    },
                )
                .await?;
            let (Some(deadline), Some(woken)) = (deadline, waiter.borrow_mut().take()) else {
                return Ok(reply);
            };
            // An empty conflating pop parks like any other (it answers 200 with no messages only
            // when its deadline passes).
            if !reply.messages.is_empty() || reply.conflation_conflict {
                return Ok(reply);
            }
            let now = self.host.now_ms();
            if now >= deadline {
                return Ok(reply);
            }
            // If a later attempt makes a `new` group's subscription (the first made none: pop
            // maintenance was on), it starts when this pop began: what was pushed while it waited is
            // the group's. (A missing queue does not stop the first attempt making it: `core::pop`.)
            let new = request
                .subscription
                .map_or(self.config.default_subscription_new, |s| {
                    s == SubscriptionStart::New
                });
            if new {
                request.subscription = Some(SubscriptionStart::NewSince(began - 1));
            }
            // A recorded request's empty attempt is committed (and its failure reported) before it
            // parks: a long-poll must not hold a group (see `Recording`).
            self.settle_current_recording().await?;
            // `now < deadline` (checked above), so this is `t.clamp(now + 1, deadline)`, without the
            // check of the bounds whose panic text brings `i64`'s `Debug` into the browser module.
            let wake_at = next_timer_ms.map_or(deadline, |t| t.max(now + 1).min(deadline));
            let sleep = self.host.sleep((wake_at - now) as u64);
            match select(woken, sleep).await {
                Either::Left(_) | Either::Right(_) => {}
            }
            if gone() {
                return Ok(reply);
            }
        }
    }

    /// Acks items for one group (docs/protocol.md §3.4, §4.3; wire-contract §1.4).
    pub async fn ack(
        &self,
        group: Option<String>,
        items: Vec<AckItem>,
    ) -> EngineResult<Vec<AckResult>> {
        self.run(
            |b, _| b.segments_needed_for_ack(group.as_deref(), &items),
            |b, now| Ok(b.ack(now, group.as_deref(), &items)),
        )
        .await
    }

    /// Extends every live lane of a lease (docs/protocol.md §3.5; wire-contract §1.5).
    pub async fn extend_lease(&self, lease_id: &str, seconds: u64) -> EngineResult<ExtendReply> {
        self.run_plain(|b, now| Ok(b.extend_lease(now, lease_id, seconds)))
            .await
    }

    /// Applies a transaction, all or nothing (docs/protocol.md §3.9; wire-contract §1.6); an error
    /// (507) when the quota refuses its pushes.
    pub async fn transaction(&self, operations: Vec<TxOperation>) -> EngineResult<TxReply> {
        self.run(
            |b, _| b.segments_needed_for_transaction(&operations),
            |b, now| b.transaction(now, operations.clone()),
        )
        .await
    }

    /// Prepares part `id` of a transaction across brokers, decided by `owner` (docs/protocol.md
    /// §3.9.1, `core::prepared`): `Ok(Err(reason))` when the part is refused (nothing changed), an
    /// error (507) when the quota refuses its pushes.
    #[cfg(feature = "twophase")]
    pub async fn prepare(
        &self,
        id: &str,
        owner: &str,
        operations: Vec<TxOperation>,
    ) -> EngineResult<Result<(), String>> {
        self.run(
            |b, _| b.segments_needed_for_transaction(&operations),
            |b, now| b.prepare(now, id, owner, operations.clone()),
        )
        .await
    }

    /// Commits prepared part `id`; `None` when nothing is prepared under it.
    #[cfg(feature = "twophase")]
    pub async fn commit_prepared(&self, id: &str) -> EngineResult<Option<TxReply>> {
        self.run(
            |b, _| b.segments_needed_for_commit(id),
            |b, now| Ok(b.commit_prepared(now, id)),
        )
        .await
    }

    /// Aborts prepared part `id`; false when nothing is prepared under it.
    #[cfg(feature = "twophase")]
    pub async fn abort_prepared(&self, id: &str) -> EngineResult<bool> {
        self.run_plain(|b, now| Ok(b.abort_prepared(now, id))).await
    }

    /// Creates a queue or overwrites its options (wire-contract §1.7).
    pub async fn configure(&self, request: ConfigureRequest) -> EngineResult<ConfigureReply> {
        self.run_plain(|b, now| b.configure(now, request.clone()))
            .await
    }

    /// Deletes a queue and everything in it; returns whether it existed.
    pub async fn delete_queue(&self, queue: &str) -> EngineResult<bool> {
        self.run_plain(|b, now| Ok(b.delete_queue(now, queue)))
            .await
    }

    /// Replays a dead letter by its row id.
    pub async fn replay_dead_letter(&self, id: &str) -> EngineResult<ReplayReply> {
        self.run_plain(|b, now| b.replay_dead_letter(now, id)).await
    }

    /// Replays the dead letter(s) at a message address.
    pub async fn replay_address(
        &self,
        partition_id: &str,
        transaction_id: &str,
    ) -> EngineResult<ReplayReply> {
        self.run_plain(|b, now| b.replay_address(now, partition_id, transaction_id))
            .await
    }

    /// Deletes the dead-letter rows at a message address; returns how many.
    pub async fn delete_dead_letters(
        &self,
        partition_id: &str,
        transaction_id: &str,
    ) -> EngineResult<usize> {
        self.run_plain(|b, now| b.delete_dead_letters(now, partition_id, transaction_id))
            .await
    }

    /// Replays one chunk of dead-letter rows by message address: one copy per address, every row there
    /// removed (bulk replay, `core::dlq_bulk`).
    pub async fn dlq_replay_rows(&self, ids: &[String]) -> EngineResult<Vec<ReplayReply>> {
        self.run_plain(|b, now| Ok(b.dlq_replay_rows(now, ids)))
            .await
    }

    /// Deletes one chunk of dead-letter rows; returns how many went (bulk delete).
    pub async fn dlq_delete_rows(&self, ids: &[String]) -> EngineResult<usize> {
        self.run_plain(|b, now| Ok(b.dlq_delete_rows(now, ids)))
            .await
    }

    /// Moves a group's cursors on a queue: those it has (a seek makes none).
    pub async fn seek(
        &self,
        group: &str,
        queue: &str,
        target: SeekTarget,
    ) -> EngineResult<SeekReply> {
        self.run_plain(|b, now| b.seek(now, group, queue, target))
            .await
    }

    /// Moves a group's cursor on one partition to its end; returns the new cursor.
    pub async fn seek_partition_to_end(
        &self,
        group: &str,
        queue: &str,
        partition: &str,
    ) -> EngineResult<i64> {
        self.run_plain(|b, now| b.seek_partition_to_end(now, group, queue, partition))
            .await
    }

    /// Deletes a group's lanes (on one queue or all) and optionally its subscriptions.
    pub async fn delete_group(
        &self,
        group: &str,
        queue: Option<&str>,
        delete_metadata: bool,
    ) -> EngineResult<GroupDeleteReply> {
        self.run_plain(|b, now| Ok(b.delete_group(now, group, queue, delete_metadata)))
            .await
    }

    /// Rewrites the stored start time of every subscription of a group; returns how many.
    pub async fn update_subscription(&self, group: &str, start_ms: i64) -> EngineResult<u32> {
        self.run_plain(|b, now| Ok(b.update_subscription(now, group, start_ms)))
            .await
    }

    /// Runs retention and eviction, and deletes the traces of messages no longer retained (the host
    /// calls this periodically). Then it finishes a drain of the maintenance buffer that stopped part
    /// way (a failed commit, or a stop, after push maintenance was turned off): otherwise what waits
    /// there, answered `buffered`, would reach its queue only with the next push.
    pub async fn maintain(&self) -> EngineResult<MaintenanceReport> {
        let mut report = self
            .run_plain(|b, now| {
                let report = b.maintain(now);
                #[cfg(feature = "ops")]
                b.prune_traces();
                Ok(report)
            })
            .await?;
        report.segments_compressed = self.compress_waiting_segments().await?;
        #[cfg(feature = "ops")]
        if self.read(|b, _| !b.mode().push_paused && b.maintenance().buffered() > 0) {
            match self.drain_push_buffer().await {
                // The core refuses a chunk that does not fit the quota: it waits in the buffer for
                // room, as the pushes behind it do, and retention above ran all the same.
                Ok(()) | Err(EngineError::Core(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(report)
    }

    /// Compresses the segments that have waited long enough (`core::compaction`): reads them and
    /// the index pages holding their entries, and commits them rewritten, in slices of at most
    /// [`COMPRESS_BYTES_PER_SLICE`](crate::core::compaction::COMPRESS_BYTES_PER_SLICE) stored bytes and
    /// [`COMPRESS_SEGMENTS_PER_SLICE`](crate::core::compaction::COMPRESS_SEGMENTS_PER_SLICE) segments,
    /// with a wait of the host between two slices ([`Host::sleep`], 0 ms), during which the requests
    /// the host holds are served. Returns how many were rewritten.
    #[cfg(feature = "deflate")]
    async fn compress_waiting_segments(&self) -> EngineResult<u64> {
        use crate::core::compaction::{COMPRESS_BYTES_PER_SLICE, COMPRESS_SEGMENTS_PER_SLICE};
        // (pid, first offset, first offset of its index page, stored bytes)
        let wanted: Vec<(u64, u64, u64, u64)> = self.read(|b, now| {
            b.segments_to_compress(now)
                .into_iter()
                .filter_map(|(pid, first)| {
                    Some((
                        pid,
                        first,
                        b.index_page_of(pid, first)?,
                        b.segment_stored_bytes(pid, first)?,
                    ))
                })
                .collect()
        });
        let mut done = 0;
        let mut rest = &wanted[..];
        while !rest.is_empty() {
            if rest.len() < wanted.len() {
                // Not before the first slice: the requests held meanwhile run before the next.
                self.host.sleep(0).await;
            }
            let mut n = 0;
            let mut bytes = 0;
            while n < rest.len()
                && n < COMPRESS_SEGMENTS_PER_SLICE
                && (n == 0 || bytes + rest[n].3 <= COMPRESS_BYTES_PER_SLICE)
            {
                bytes += rest[n].3;
                n += 1;
            }
            let (slice, tail) = rest.split_at(n);
            rest = tail;
            done += self.compress_slice(slice).await?;
        }
        Ok(done)
    }

    /// One slice of [`Self::compress_waiting_segments`]: reads its segments and their pages, and
    /// commits them rewritten.
    #[cfg(feature = "deflate")]
    async fn compress_slice(&self, slice: &[(u64, u64, u64, u64)]) -> EngineResult<u64> {
        let mut keys = Vec::with_capacity(slice.len() * 2);
        for (pid, first, page, _) in slice {
            keys.push(segment_key(*pid, *first));
            keys.push(crate::core::index_entry_key(*pid, *page));
        }
        // Committed long ago (they waited a minute), and never rewritten but here (a page is written
        // once, then only here): what is read is what memory describes, which the core checks again
        // against the entry. A page whose commit is still in flight is not read yet: its segments wait.
        let mut values = self.store.get(&keys).await?.into_iter();
        let mut fetched = Vec::with_capacity(slice.len());
        for (pid, first, _, _) in slice {
            if let (Some(Some(segment)), Some(Some(entry))) = (values.next(), values.next()) {
                fetched.push((*pid, *first, segment, entry));
            }
        }
        self.run_plain(|b, _| Ok(b.compress_segments(&fetched)))
            .await
    }

    /// A build without the `deflate` feature never compresses segments.
    #[cfg(not(feature = "deflate"))]
    async fn compress_waiting_segments(&self) -> EngineResult<u64> {
        Ok(0)
    }
}

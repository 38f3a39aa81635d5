//! The engine: the async shell around the sans-IO [`Broker`] (docs/protocol.md §5).
//!
//! For each command it takes the command gate (one command at a time), applies the command to the core
//! with the host's `now`, and hands its change set to the group commit (module `group`): commands
//! applied while a commit is in flight are committed together in the next one, and each replies only
//! after the commit that holds its changes. If a commit fails, every command in it (and in the group
//! formed during it) fails, and the in-memory state is reloaded from the store, so a failed write never
//! leaves the broker believing something the store does not hold: the error path is the restart path.
//!
//! Long-polls park here: a pop with `wait_ms` that finds nothing registers a waiter for its queue and
//! sleeps (through the [`Host`]) until a push, a lease release, the next lease expiry or retry-hold end,
//! or its deadline, then tries again.

mod gate;
mod group;
mod modes;
mod waiters;

#[cfg(feature = "ops")]
pub use modes::PushOutcome;

use crate::core::api::*;
use crate::core::{
    needs_segment_upgrade, segment_key, Broker, BrokerConfig, INDEX_PREFIXES, SEGMENT_PREFIX,
};
use crate::store::{ChangeSet, Store, StoreError};
use futures::future::{select, Either, LocalBoxFuture};
use gate::{Gate, GateGuard};
use group::GroupCommit;
use std::cell::{Cell, RefCell};
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
        })
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
        // A segment past a partition's indexed end means a lost index entry: refuse to open rather
        // than let the next push overwrite it.
        let beyond = core.keys_after_indexed_ends();
        let found = store.get(&beyond).await?;
        if let Some((key, _)) = beyond.iter().zip(found).find(|(_, v)| v.is_some()) {
            return Err(EngineError::Store(StoreError::other(format!(
                "storage is damaged: segment \"{key}\" is stored past its partition's indexed end \
                 (its index entry is missing)"
            ))));
        }
        Ok(core)
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

    /// Runs a read-only view over the current state.
    pub fn read<R>(&self, f: impl FnOnce(&Broker, i64) -> R) -> R {
        let now = self.host.now_ms();
        f(&self.core.borrow(), now)
    }

    /// Runs a read-only view that reads messages, under the command gate (so it sees only committed
    /// state), loading the segments it reads: a run that misses some loads them and runs again.
    pub async fn read_loaded<R>(&self, f: impl Fn(&Broker, i64) -> R) -> EngineResult<R> {
        let _gate = self.enter().await?;
        // Only committed state: wait for commits in flight (nothing new applies: we hold the gate).
        self.flush().await?;
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
                    let Some(settled) = self.group.join(applied_in, changes, woken) else {
                        return Err(EngineError::Store(StoreError::other(
                            "a commit failed while this command was applied; nothing of it was kept",
                        )));
                    };
                    if self.config.group_commit {
                        // The next command may be applied while this one waits for its commit.
                        drop(gate);
                        self.lead_commits().await;
                    } else {
                        // Committed in this call, under the gate: a group of one.
                        self.lead_commits().await;
                        drop(gate);
                    }
                    return match settled.await {
                        Ok(outcome) => outcome.map_err(EngineError::Store),
                        Err(_) => Err(EngineError::Store(StoreError::other(
                            "the commit holding this command was abandoned; its outcome is unknown",
                        ))),
                    };
                }
                // Its effects must go: a transaction that rolled back, or a command that read a
                // segment that was not loaded (what it did may rest on a message it did not see).
                // Reload from the store once the commits in flight are done (we hold the gate). Marked
                // first: if the reload fails, the next command reloads before it runs, so these effects
                // can never reach a later commit.
                self.needs_reload.set(true);
                self.flush().await?;
                if missed.is_empty() {
                    return Ok(());
                }
                let mut c = self.counters.get();
                c.reruns += 1;
                self.counters.set(c);
            }
            Err(EngineError::Store(StoreError::other(format!(
                "a command kept reading segments that were not loaded ({MAX_RUNS} runs); nothing was \
                 changed: {missed:?}"
            ))))
        })
    }

    /// Takes the command gate, reloading first if an earlier commit failed.
    fn enter(&self) -> LocalBoxFuture<'_, EngineResult<GateGuard<'_>>> {
        Box::pin(async move {
            let gate = self.gate.enter().await;
            if self.needs_reload.get() {
                // A commit failed: let the commits in flight settle, then reload (flush does both).
                self.flush().await?;
            }
            Ok(gate)
        })
    }

    /// Commits open groups until none is left, unless another command is already doing so (module
    /// `group`). Each group's members are answered when its commit settles.
    fn lead_commits(&self) -> LocalBoxFuture<'_, ()> {
        Box::pin(async move {
            let Some(leading) = self.group.lead() else {
                return;
            };
            while let Some(group) = leading.next_group() {
                let outcome = if group.changes.is_empty() {
                    Ok(())
                } else {
                    self.store.commit(&group.changes).await
                };
                match &outcome {
                    Ok(()) => {
                        let mut c = self.counters.get();
                        if !group.changes.is_empty() {
                            c.commits += 1;
                        }
                        c.rows_written += group.changes.rows() as u64;
                        c.bytes_written += group.changes.bytes() as u64;
                        self.counters.set(c);
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
            self.lead_commits().await;
            // A failure of the group it waited for is that group's members' error, not the caller's.
            let _ = settled.await;
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
        self.run(
            |b, _| b.segments_needed_for_push(&items.borrow()),
            |b, now| b.push_taking(now, &mut items.borrow_mut()),
        )
        .await
    }

    /// Pops (claims) messages; with `wait_ms`, parks until something is claimable or the time passes.
    pub async fn pop(&self, request: PopRequest, wait_ms: Option<u64>) -> EngineResult<PopReply> {
        let deadline = wait_ms.map(|w| self.host.now_ms().saturating_add(w as i64));
        let parked_queue = match &request.target {
            PopTarget::Queue { queue } | PopTarget::Partition { queue, .. } => Some(queue.clone()),
            PopTarget::Discovery { .. } => None,
        };
        loop {
            let (reply, next_timer_ms) = self
                .run(
                    |b, now| b.segments_needed_for_pop(now, &request),
                    |b, now| {
                        let reply = b.pop(now, &request)?;
                        Ok((reply, b.next_deadline_ms()))
                    },
                )
                .await?;
            let (Some(deadline), Some(queue)) = (deadline, parked_queue.as_ref()) else {
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
            let wake_at = next_timer_ms.map_or(deadline, |t| t.clamp(now + 1, deadline));
            let woken = self.waiters.register(queue);
            let sleep = self.host.sleep((wake_at - now) as u64);
            match select(woken, sleep).await {
                Either::Left(_) | Either::Right(_) => {}
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

    /// Applies a transaction, all or nothing (docs/protocol.md §3.9; wire-contract §1.6).
    pub async fn transaction(&self, operations: Vec<TxOperation>) -> EngineResult<TxReply> {
        self.run(
            |b, _| b.segments_needed_for_transaction(&operations),
            |b, now| Ok(b.transaction(now, operations.clone())),
        )
        .await
    }

    /// Prepares part `id` of a transaction across brokers, decided by `owner` (docs/protocol.md
    /// §3.9.1, `core::prepared`): `Ok(Err(reason))` when the part is refused (nothing changed).
    #[cfg(feature = "twophase")]
    pub async fn prepare(
        &self,
        id: &str,
        owner: &str,
        operations: Vec<TxOperation>,
    ) -> EngineResult<Result<(), String>> {
        self.run(
            |b, _| b.segments_needed_for_transaction(&operations),
            |b, now| Ok(b.prepare(now, id, owner, operations.clone())),
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

    /// Replays one chunk of dead-letter rows, each as a single replay (bulk replay, `core::dlq_bulk`).
    pub async fn dlq_replay_rows(&self, ids: &[String]) -> EngineResult<Vec<ReplayReply>> {
        self.run_plain(|b, now| Ok(b.dlq_replay_rows(now, ids)))
            .await
    }

    /// Deletes one chunk of dead-letter rows; returns how many went (bulk delete).
    pub async fn dlq_delete_rows(&self, ids: &[String]) -> EngineResult<usize> {
        self.run_plain(|b, now| Ok(b.dlq_delete_rows(now, ids)))
            .await
    }

    /// Moves a group's cursors on every partition of a queue.
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
    /// calls this periodically).
    pub async fn maintain(&self) -> EngineResult<MaintenanceReport> {
        self.run_plain(|b, now| {
            let report = b.maintain(now);
            #[cfg(feature = "ops")]
            b.prune_traces();
            Ok(report)
        })
        .await
    }
}

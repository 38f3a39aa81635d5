//! Deterministic simulation (tier 4): seeded random workloads against the engine over an in-memory store,
//! with consumer crashes, stalls past the lease, stale and duplicate acks, store commit failures,
//! restarts and clock jumps, then a drain. What is checked, each a [`Check`]:
//!
//! 1. no acknowledged message is lost: every push answered `Ok` is readable (`LostPush`), and a push whose
//!    commit failed is not (`FailedPushVisible`);
//! 2. at most one live lease per lane: no two leases of one group that are surely live at once cover a
//!    partition, the claims of crashed consumers included (`OneLiveLease`);
//! 3. cursors move back only by seek (`CursorBackOnlyBySeek`);
//! 4. every delivery was pushed, with its payload (`DeliveryWasPushed`), and nothing committed is delivered
//!    again to its group unless a seek moved the cursor back (`NoRedelivery`);
//! 5. acks of a lease that is surely live succeed item by item, acks of a lease that surely ended are
//!    refused with an error (`AckOutcome`);
//! 6. the core's derived structures agree with its lanes after every step (`CoreInvariants`:
//!    `Broker::check_invariants`, whose own canaries are in src/core/invariants.rs);
//! 7. liveness: with the faults off and consumers acking, everything pushed drains within a bound
//!    (`Liveness`).
//!
//! One canary per check (`canary_*`): a fault that breaks exactly what the check guards, and a run that
//! must stop on that check (failures of other checks are noted and passed over in a canary run).
//!
//! `SIM_SEEDS=n` runs more seeds (`SIM_SEED_FROM=f`: seeds `f..f+n`, to go on where a search stopped);
//! `SIM_SEED=s cargo test --test simulation replay_one -- --ignored --nocapture` replays one seed with a
//! step log.

use futures::executor::block_on;
use futures::future::LocalBoxFuture;
use queen_edge::core::api::*;
use queen_edge::core::BrokerConfig;
use queen_edge::engine::{Engine, EngineError, Host};
use queen_edge::store::{ChangeSet, KeyRange, MemStore, Record, Store, StoreError};
use serde_json::json;
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

#[cfg(not(target_arch = "wasm32"))]
#[path = "sim/concurrent.rs"]
mod concurrent;

#[derive(Clone)]
struct SimHost {
    /// The simulation's clock.
    now: Rc<Cell<i64>>,
    /// How far the broker's clock runs ahead of the simulation's (a canary's fault; 0 otherwise).
    skew: Rc<Cell<i64>>,
    seed: u64,
    opens: Rc<Cell<u64>>,
}

impl Host for SimHost {
    fn now_ms(&self) -> i64 {
        self.now.get() + self.skew.get()
    }
    fn sleep(&self, _ms: u64) -> LocalBoxFuture<'static, ()> {
        Box::pin(async {})
    }
    fn entropy(&self) -> u64 {
        // Fresh bits for every open, like a real host's random source, but reproducible per seed.
        self.opens.set(self.opens.get() + 1);
        self.seed.wrapping_mul(31).wrapping_add(self.opens.get())
    }
}

/// A [`MemStore`] that can also apply a commit and then report it failed (a canary's fault).
#[derive(Clone, Default)]
struct SimStore {
    mem: MemStore,
    apply_then_fail: Rc<Cell<u32>>,
}

impl Store for SimStore {
    async fn scan(&self, prefix: &str) -> Result<Vec<Record>, StoreError> {
        self.mem.scan(prefix).await
    }
    async fn get(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        self.mem.get(keys).await
    }
    async fn first_keys(&self, ranges: &[KeyRange]) -> Result<Vec<Option<String>>, StoreError> {
        self.mem.first_keys(ranges).await
    }
    async fn commit(&self, changes: &ChangeSet) -> Result<(), StoreError> {
        self.mem.commit(changes).await?;
        let n = self.apply_then_fail.get();
        if n > 0 {
            self.apply_then_fail.set(n - 1);
            return Err(StoreError::other(
                "injected: commit applied, then reported failed",
            ));
        }
        Ok(())
    }
}

/// xorshift64*: the simulation's only source of randomness.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

const QUEUE: &str = "sim";
const GROUPS: [&str; 2] = ["__QUEUE_MODE__", "g2"];
const PARTITIONS: [&str; 3] = ["p0", "p1", "p2"];
const LEASE_S: u64 = 5;
const LEASE_MS: i64 = LEASE_S as i64 * 1000;
const STEPS: usize = 300;
/// Rounds of the drain (each pops every group once) before liveness fails.
const DRAIN_ROUNDS: usize = 60;
const T0: i64 = 1_767_225_600_000;

/// What a failure breaks (module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    LostPush,
    FailedPushVisible,
    OneLiveLease,
    CursorBackOnlyBySeek,
    DeliveryWasPushed,
    NoRedelivery,
    AckOutcome,
    CoreInvariants,
    Liveness,
    /// The engine refused a well-formed command, or a store open failed.
    Engine,
}

#[derive(Debug)]
struct Failure {
    check: Check,
    message: String,
}

fn fail(check: Check, message: impl Into<String>) -> Failure {
    Failure {
        check,
        message: message.into(),
    }
}

type Outcome = Result<(), Failure>;

/// A fault a canary injects (the canaries are native only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(target_arch = "wasm32", allow(dead_code))]
enum Fault {
    None,
    /// The store reports every commit done and keeps nothing.
    DropWrites,
    /// Now and then a commit is applied and then reported failed.
    ApplyThenFail,
    /// The broker's clock jumps ahead of everyone else's now and then, and between every pop and ack of
    /// the drain.
    BrokerClockAhead,
    /// A consumer the simulation does not know seeks a group back to the start, and pops.
    RogueSeek,
    /// A producer the simulation does not know pushes first.
    RoguePush,
    /// The store fails every commit from the drain on.
    StoreDownWhileDraining,
}

/// A claim a simulated consumer holds. The broker's clock is somewhere between the simulation's clock
/// and the latest instant the simulation's clock showed, so a lease expires somewhere in
/// `expires_lo..=expires_hi`.
#[derive(Clone, Debug)]
struct Held {
    group: &'static str,
    lease_id: String,
    expires_lo: i64,
    expires_hi: i64,
    messages: Vec<DeliveredMessage>,
}

/// How often the checks that could pass over nothing had something to check, summed over a run.
#[derive(Debug, Default, Clone, Copy)]
struct Stats {
    /// Ack items judged under a lease that was surely live.
    live_acks: u64,
    /// Ack items judged under a lease that had surely ended.
    ended_acks: u64,
    /// Pops whose exclusivity was checked against a surely live claim of a crashed consumer.
    crashed_claims_checked: u64,
    /// Messages the drain delivered.
    drained: u64,
    /// Checks that found a lane quarantined by `reclaimLimit` (odd seeds run with it on).
    quarantined_checks: u64,
}

impl std::ops::AddAssign for Stats {
    fn add_assign(&mut self, o: Stats) {
        self.live_acks += o.live_acks;
        self.ended_acks += o.ended_acks;
        self.crashed_claims_checked += o.crashed_claims_checked;
        self.drained += o.drained;
        self.quarantined_checks += o.quarantined_checks;
    }
}

struct Sim {
    rng: Rng,
    stats: Stats,
    host: SimHost,
    store: SimStore,
    engine: Engine<SimStore, SimHost>,
    fault: Fault,
    /// (partition id, transaction id) -> payload of every push answered Ok.
    pushed: BTreeMap<(String, String), serde_json::Value>,
    /// Pushes whose commit failed: must not exist.
    failed_pushes: Vec<(String, String)>,
    /// (partition id, group) -> last committed cursor observed.
    cursors: HashMap<(String, String), i64>,
    /// Claims of live consumers, which ack, extend or crash.
    held: Vec<Held>,
    /// Claims of crashed consumers: never acked, live until their lease ends.
    crashed: Vec<Held>,
    log: Vec<String>,
    verbose: bool,
    next_tx: u64,
    /// The latest instant the simulation's clock has shown.
    max_seen: i64,
    steps_since_full_check: u32,
}

fn run<T>(f: impl std::future::Future<Output = T>) -> T {
    block_on(f)
}

impl Sim {
    fn new(seed: u64, fault: Fault, verbose: bool) -> Self {
        let host = SimHost {
            now: Rc::new(Cell::new(T0)),
            skew: Rc::new(Cell::new(0)),
            seed,
            opens: Rc::new(Cell::new(0)),
        };
        let store = SimStore::default();
        if fault == Fault::DropWrites {
            store.mem.drop_writes(true);
        }
        let engine = run(Engine::open(store.clone(), host.clone(), sim_config())).unwrap();
        let mut sim = Sim {
            rng: Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1),
            stats: Stats::default(),
            host,
            store,
            engine,
            fault,
            pushed: BTreeMap::new(),
            failed_pushes: Vec::new(),
            cursors: HashMap::new(),
            held: Vec::new(),
            crashed: Vec::new(),
            log: Vec::new(),
            verbose,
            next_tx: 0,
            max_seen: T0,
            steps_since_full_check: 0,
        };
        // Odd seeds also run issue 16's options, so the invariants see quarantined lanes, backoff
        // holds and the delivery log; even seeds keep every option off.
        let beyond = seed % 2 == 1;
        let options = OptionsPatch {
            retry_limit: Some(2),
            retry_delay_ms: Some(300),
            lease_time_s: Some(LEASE_S),
            reclaim_limit: beyond.then_some(2),
            retry_backoff: beyond.then_some(RetryBackoff {
                base_ms: 100,
                factor_permille: 3000,
                max_ms: 2000,
            }),
            delivery_log: beyond.then_some(if seed % 4 == 1 {
                DeliveryLogMode::All
            } else {
                DeliveryLogMode::Failures
            }),
            ..Default::default()
        };
        run(sim.engine.configure(ConfigureRequest {
            queue: QUEUE.into(),
            options,
            ..Default::default()
        }))
        .expect("configure");
        if fault == Fault::RoguePush {
            let items = PARTITIONS
                .iter()
                .map(|p| PushItem {
                    partition: (*p).into(),
                    transaction_id: Some(format!("rogue-{p}").into()),
                    ..PushItem::new(QUEUE, json!({ "rogue": p }))
                })
                .collect();
            run(sim.engine.push(items)).expect("rogue push");
            sim.note("rogue producer: one message per partition".into());
        }
        sim
    }

    fn note(&mut self, line: String) {
        if self.verbose {
            println!("{line}");
        }
        self.log.push(line);
        if self.log.len() > 40 {
            self.log.remove(0);
        }
    }

    fn now(&self) -> i64 {
        self.host.now.get()
    }

    fn set_clock(&mut self, ms: i64) {
        self.host.now.set(ms);
        self.max_seen = self.max_seen.max(ms);
    }

    fn step(&mut self) -> Outcome {
        let roll = self.rng.below(100);
        if self.rng.chance(4) {
            if self.fault == Fault::ApplyThenFail {
                self.store.apply_then_fail.set(1);
                self.note("store: next commit is applied, then reported failed".into());
            } else {
                self.store.mem.fail_next_commits(1);
                self.note("store: next commit fails".into());
            }
        }
        if self.fault == Fault::BrokerClockAhead && self.rng.chance(5) {
            self.host.skew.set(self.host.skew.get() + LEASE_MS + 1_000);
            self.note("broker clock jumps ahead".into());
        }
        if self.fault == Fault::RogueSeek && self.rng.chance(5) {
            self.rogue_seek()?;
        }
        match roll {
            0..=29 => self.push(),
            30..=54 => self.pop(),
            55..=74 => self.ack_some(),
            75..=79 => self.stale_or_duplicate_ack(),
            80..=83 => {
                // consumer crash: its claim is never acked, but its lease lives on
                if !self.held.is_empty() {
                    let i = self.rng.below(self.held.len() as u64) as usize;
                    let h = self.held.remove(i);
                    self.note(format!("crash: abandon claim {}", h.lease_id));
                    self.crashed.push(h);
                }
                Ok(())
            }
            84..=87 => {
                let ms = [100, 1_000, 6_000, 30_000][self.rng.below(4) as usize];
                self.set_clock(self.now() + ms);
                self.note(format!("clock +{ms} ms"));
                Ok(())
            }
            88..=89 => self.restart(),
            90..=91 => self.seek(),
            92..=94 => self.extend(),
            _ => {
                // clock jump backwards: the core clamps
                self.set_clock(self.now() - 2_000);
                self.note("clock -2000 ms".into());
                Ok(())
            }
        }?;
        self.check()
    }

    fn push(&mut self) -> Outcome {
        let n = 1 + self.rng.below(4) as usize;
        let mut items = Vec::new();
        for _ in 0..n {
            let partition = PARTITIONS[self.rng.below(3) as usize];
            // Sometimes re-push an earlier transaction id (client retry).
            let tx = if self.next_tx > 0 && self.rng.chance(10) {
                format!("tx{}", self.rng.below(self.next_tx))
            } else {
                self.next_tx += 1;
                format!("tx{}", self.next_tx - 1)
            };
            items.push(PushItem {
                partition: partition.into(),
                transaction_id: Some(tx.clone().into()),
                ..PushItem::new(QUEUE, json!({ "tx": tx, "p": partition }))
            });
        }
        match run(self.engine.push(items.clone())) {
            Ok(results) => {
                for r in results {
                    let key = (r.partition_id.to_string(), r.transaction_id.to_string());
                    if r.status == PushStatus::Queued {
                        let payload = json!({ "tx": r.transaction_id, "p": r.partition });
                        self.pushed.insert(key, payload);
                    } else if !self.pushed.contains_key(&key) {
                        return Err(fail(
                            Check::FailedPushVisible,
                            format!("duplicate reported for never-acknowledged push {key:?}"),
                        ));
                    }
                }
                self.note(format!("push {n}: ok"));
            }
            Err(EngineError::Store(_)) => {
                for it in items {
                    let pid = self.engine.read(|b, now| {
                        b.queue_view(now, QUEUE).and_then(|q| {
                            q.partitions
                                .iter()
                                .find(|p| p.name == it.partition)
                                .map(|p| p.id.clone())
                        })
                    });
                    if let Some(pid) = pid {
                        let key = (pid, it.transaction_id.clone().unwrap().to_string());
                        if !self.pushed.contains_key(&key) {
                            self.failed_pushes.push(key);
                        }
                    }
                }
                self.note(format!("push {n}: store failure"));
            }
            Err(e) => return Err(fail(Check::Engine, format!("push refused: {e}"))),
        }
        Ok(())
    }

    fn pop(&mut self) -> Outcome {
        let group = GROUPS[self.rng.below(2) as usize];
        let batch = 1 + self.rng.below(5) as u32;
        let partitions = 1 + self.rng.below(2) as u32;
        if let Some(claim) = self.pop_group(group, batch, partitions)? {
            self.held.push(claim);
        }
        Ok(())
    }

    /// One pop of `group`, with every delivery checked; the claim when it delivered something.
    fn pop_group(
        &mut self,
        group: &'static str,
        batch: u32,
        partitions: u32,
    ) -> Result<Option<Held>, Failure> {
        let mut req = PopRequest::queue(QUEUE);
        req.group = (group != QUEUE_MODE_GROUP).then(|| group.to_string());
        req.batch = Some(batch);
        req.partitions = Some(partitions);
        let before = self.now();
        let reply = match run(self.engine.pop(req, None)) {
            Ok(r) => r,
            Err(EngineError::Store(_)) => {
                self.note(format!("pop {group}: store failure"));
                return Ok(None);
            }
            Err(e) => return Err(fail(Check::Engine, format!("pop refused: {e}"))),
        };
        if reply.messages.is_empty() {
            return Ok(None);
        }
        for m in &reply.messages {
            let key = (m.partition_id.to_string(), m.transaction_id.to_string());
            match self.pushed.get(&key) {
                Some(p) if Some(p) == m.payload.to_value().ok().as_ref() => {}
                Some(_) => {
                    return Err(fail(
                        Check::DeliveryWasPushed,
                        format!("delivery {key:?} has a payload that was never pushed"),
                    ))
                }
                None => {
                    return Err(fail(
                        Check::DeliveryWasPushed,
                        format!("delivery {key:?} was never pushed"),
                    ))
                }
            }
            let seen = self
                .cursors
                .get(&(m.partition_id.to_string(), group.to_string()))
                .copied()
                .unwrap_or(-1);
            if (m.offset as i64) <= seen {
                return Err(fail(
                    Check::NoRedelivery,
                    format!(
                        "offset {} of {} redelivered to {group} after commit at {seen}",
                        m.offset, m.partition_id
                    ),
                ));
            }
            // Exclusivity: no other claim of this group, held or crashed, that is surely live (its
            // lease ends after any instant the broker's clock can show) covers this partition.
            let crashed_live = self
                .crashed
                .iter()
                .filter(|h| h.group == group && h.expires_lo > self.max_seen)
                .count();
            self.stats.crashed_claims_checked += crashed_live as u64;
            for h in self.held.iter().chain(&self.crashed) {
                if h.group == group
                    && h.expires_lo > self.max_seen
                    && h.lease_id != reply.lease_id
                    && h.messages.iter().any(|x| x.partition_id == m.partition_id)
                {
                    return Err(fail(
                        Check::OneLiveLease,
                        format!(
                            "two live leases on partition {} for {group}: {} and {}",
                            m.partition_id, h.lease_id, reply.lease_id
                        ),
                    ));
                }
            }
        }
        self.note(format!(
            "pop {group}: {} msgs lease {}",
            reply.messages.len(),
            reply.lease_id
        ));
        Ok(Some(Held {
            group,
            lease_id: reply.lease_id.clone(),
            expires_lo: before + LEASE_MS,
            expires_hi: self.max_seen + LEASE_MS,
            messages: reply.messages,
        }))
    }

    fn ack_some(&mut self) -> Outcome {
        if self.held.is_empty() {
            return Ok(());
        }
        let i = self.rng.below(self.held.len() as u64) as usize;
        let h = self.held.remove(i);
        let statuses = [
            AckStatus::Completed,
            AckStatus::Completed,
            AckStatus::Completed,
            AckStatus::Failed,
            AckStatus::Retry,
            AckStatus::Dlq,
        ];
        let mut items = Vec::new();
        for m in &h.messages {
            if self.rng.chance(15) {
                continue;
            }
            let s = statuses[self.rng.below(statuses.len() as u64) as usize].clone();
            items.push(AckItem::new(&m.transaction_id, &m.partition_id, s).with_lease(&h.lease_id));
        }
        self.ack(&h, items)
    }

    /// Acks `items` of claim `h` and checks each outcome against what the lease allows.
    fn ack(&mut self, h: &Held, items: Vec<AckItem>) -> Outcome {
        let surely_live = h.expires_lo > self.max_seen;
        let surely_ended = self.now() > h.expires_hi;
        if surely_live {
            self.stats.live_acks += items.len() as u64;
        }
        if surely_ended {
            self.stats.ended_acks += items.len() as u64;
        }
        let group = (h.group != QUEUE_MODE_GROUP).then(|| h.group.to_string());
        match run(self.engine.ack(group, items.clone())) {
            Ok(results) => {
                if results.len() != items.len() {
                    return Err(fail(
                        Check::AckOutcome,
                        format!("{} items acked, {} answers", items.len(), results.len()),
                    ));
                }
                for (r, it) in results.iter().zip(&items) {
                    if !r.success && r.error.as_deref().is_none_or(str::is_empty) {
                        return Err(fail(
                            Check::AckOutcome,
                            format!("refused ack item without an error: {r:?}"),
                        ));
                    }
                    if surely_live && !r.success {
                        return Err(fail(
                            Check::AckOutcome,
                            format!(
                                "ack of {} under live lease {} refused: {:?}",
                                it.transaction_id, h.lease_id, r.error
                            ),
                        ));
                    }
                    if surely_ended && r.success {
                        return Err(fail(
                            Check::AckOutcome,
                            format!(
                                "ack of {} under ended lease {} accepted",
                                it.transaction_id, h.lease_id
                            ),
                        ));
                    }
                }
                self.note(format!("ack {} items of {}", items.len(), h.lease_id));
            }
            Err(EngineError::Store(_)) => self.note("ack: store failure".into()),
            Err(e) => return Err(fail(Check::Engine, format!("ack refused: {e}"))),
        }
        Ok(())
    }

    fn stale_or_duplicate_ack(&mut self) -> Outcome {
        // Ack a message with a made-up lease: must be refused per item, never applied.
        let Some(h) = self.held.first().cloned() else {
            return Ok(());
        };
        let m = &h.messages[0];
        let items = vec![
            AckItem::new(&m.transaction_id, &m.partition_id, AckStatus::Completed)
                .with_lease("stale-lease"),
        ];
        let group = (h.group != QUEUE_MODE_GROUP).then(|| h.group.to_string());
        if let Ok(results) = run(self.engine.ack(group, items)) {
            if results[0].success {
                return Err(fail(
                    Check::AckOutcome,
                    "an ack fenced by an unknown lease was accepted",
                ));
            }
        }
        self.note("stale ack refused".into());
        Ok(())
    }

    fn restart(&mut self) -> Outcome {
        self.engine = run(Engine::open(
            self.store.clone(),
            self.host.clone(),
            sim_config(),
        ))
        .map_err(|e| fail(Check::Engine, format!("reopen failed: {e}")))?;
        self.note("restart".into());
        self.steps_since_full_check = u32::MAX;
        Ok(())
    }

    fn seek(&mut self) -> Outcome {
        let group = GROUPS[self.rng.below(2) as usize];
        let target = if self.rng.chance(50) {
            SeekTarget::End
        } else {
            SeekTarget::Timestamp(self.now() - 20_000)
        };
        if run(self.engine.seek(group, QUEUE, target)).is_ok() {
            // Seek may move cursors back and releases leases: forget what we knew for this group.
            self.cursors.retain(|(_, g), _| g != group);
            self.held.retain(|h| h.group != group);
            self.crashed.retain(|h| h.group != group);
            self.note(format!("seek {group} {target:?}"));
        }
        Ok(())
    }

    /// The [`Fault::RogueSeek`] fault: a seek the simulation does not learn of, then a pop.
    fn rogue_seek(&mut self) -> Outcome {
        let Some(group) = GROUPS.into_iter().find(|g| {
            self.cursors
                .iter()
                .any(|((_, cg), c)| cg.as_str() == *g && *c >= 0)
        }) else {
            return Ok(());
        };
        if run(self
            .engine
            .seek(group, QUEUE, SeekTarget::Timestamp(T0 - 3_600_000)))
        .is_ok()
        {
            self.note(format!("rogue seek of {group} to the start"));
            if let Some(claim) = self.pop_group(group, 10, 3)? {
                self.held.push(claim);
            }
        }
        Ok(())
    }

    fn extend(&mut self) -> Outcome {
        let Some(i) =
            (!self.held.is_empty()).then(|| self.rng.below(self.held.len() as u64) as usize)
        else {
            return Ok(());
        };
        let lease = self.held[i].lease_id.clone();
        let before = self.now();
        if let Ok(reply) = run(self.engine.extend_lease(&lease, LEASE_S)) {
            if reply.renewed > 0 {
                let max_seen = self.max_seen;
                let hi = max_seen + LEASE_MS;
                for h in self.held.iter_mut().filter(|h| h.lease_id == lease) {
                    // The broker renews the lanes that still hold the lease. A claim surely live until
                    // now holds all of its lanes, so all of them were renewed. One whose lease may have
                    // lapsed may have lost lanes to other claims meanwhile (and a broker reloaded with
                    // its clock behind can find the lease live again on the others): its lower bound
                    // stays, or the model would count it live on a lane another claim holds.
                    if h.expires_lo > max_seen {
                        h.expires_lo = h.expires_lo.max(before + LEASE_MS);
                    }
                    h.expires_hi = h.expires_hi.max(hi);
                }
            }
            self.note(format!("extend {lease}: {}", reply.renewed));
        }
        Ok(())
    }

    fn check(&mut self) -> Outcome {
        // Reading back every acknowledged push is the expensive check: do it after restarts and
        // every 25 steps; the per-partition counts below are checked every step.
        self.steps_since_full_check = self.steps_since_full_check.saturating_add(1);
        let full = self.steps_since_full_check >= 25;
        if full {
            self.steps_since_full_check = 0;
        }
        // The core's derived structures (ready sets, lease index, timers, segment chain) agree with
        // the lanes and segments, after every step.
        self.engine
            .read(|b, _| b.check_invariants())
            .map_err(|e| fail(Check::CoreInvariants, format!("broken invariant: {e}")))?;
        let mut per_partition: BTreeMap<&str, u64> = BTreeMap::new();
        for (p, _) in self.pushed.keys() {
            *per_partition.entry(p.as_str()).or_default() += 1;
        }
        let (views, missing, ghosts) = run(self.engine.read_loaded(|b, now| {
            let views = b.queue_view(now, QUEUE);
            let missing: Vec<_> = if full {
                self.pushed
                    .keys()
                    .filter(|(p, t)| b.message(p, t).is_none())
                    .cloned()
                    .collect()
            } else {
                Vec::new()
            };
            let ghosts: Vec<_> = self
                .failed_pushes
                .iter()
                .filter(|(p, t)| {
                    b.message(p, t).is_some() && !self.pushed.contains_key(&(p.clone(), t.clone()))
                })
                .cloned()
                .collect();
            (views, missing, ghosts)
        }))
        // What the checker cannot read back is lost to it.
        .map_err(|e| fail(Check::LostPush, format!("the checker's read failed: {e}")))?;
        if let Some(m) = missing.first() {
            return Err(fail(
                Check::LostPush,
                format!(
                    "acknowledged push {m:?} is lost ({} missing)",
                    missing.len()
                ),
            ));
        }
        if let Some(g) = ghosts.first() {
            return Err(fail(
                Check::FailedPushVisible,
                format!("push {g:?} whose commit failed is visible"),
            ));
        }
        if let Some(q) = views {
            for p in &q.partitions {
                let acknowledged = per_partition.get(p.id.as_str()).copied().unwrap_or(0);
                if p.messages < acknowledged {
                    return Err(fail(
                        Check::LostPush,
                        format!(
                            "partition {} holds {} messages, {acknowledged} were acknowledged",
                            p.id, p.messages
                        ),
                    ));
                }
                for lane in &p.lanes {
                    if lane.quarantined_offset.is_some() {
                        self.stats.quarantined_checks += 1;
                    }
                    let key = (p.id.clone(), lane.consumer_group.clone());
                    let before = self.cursors.get(&key).copied().unwrap_or(-1);
                    if lane.committed < before {
                        return Err(fail(
                            Check::CursorBackOnlyBySeek,
                            format!(
                                "cursor of {key:?} moved back from {before} to {} without a seek",
                                lane.committed
                            ),
                        ));
                    }
                    self.cursors.insert(key, lane.committed);
                }
            }
        } else if !self.pushed.is_empty() {
            return Err(fail(Check::LostPush, "queue vanished"));
        }
        Ok(())
    }

    /// Liveness: faults off (but a canary's), the live consumers ack what they hold, and then every
    /// group pops and acks until everything is committed. Between rounds that deliver nothing the clock
    /// moves past a lease, so crashed consumers' leases and retry holds end. Fails after
    /// [`DRAIN_ROUNDS`] rounds.
    fn drain(&mut self) -> Outcome {
        self.store.mem.fail_next_commits(0);
        self.store.apply_then_fail.set(0);
        if self.fault == Fault::StoreDownWhileDraining {
            self.store.mem.fail_next_commits(u32::MAX);
        }
        // No clock behind its latest instant either: a lease taken now is surely live until it ends.
        self.set_clock(self.max_seen);
        self.note("drain: faults off, consumers ack".into());
        for h in std::mem::take(&mut self.held) {
            let items = h
                .messages
                .iter()
                .map(|m| {
                    AckItem::new(&m.transaction_id, &m.partition_id, AckStatus::Completed)
                        .with_lease(&h.lease_id)
                })
                .collect();
            self.ack(&h, items)?;
        }
        self.check()?;
        for round in 0..DRAIN_ROUNDS {
            let mut delivered = 0;
            for group in GROUPS {
                if let Some(h) = self.pop_group(group, 100, 3)? {
                    delivered += h.messages.len();
                    self.stats.drained += h.messages.len() as u64;
                    if self.fault == Fault::BrokerClockAhead {
                        self.host.skew.set(self.host.skew.get() + LEASE_MS + 1_000);
                        self.note("broker clock jumps ahead".into());
                    }
                    let items = h
                        .messages
                        .iter()
                        .map(|m| {
                            AckItem::new(&m.transaction_id, &m.partition_id, AckStatus::Completed)
                                .with_lease(&h.lease_id)
                        })
                        .collect();
                    self.ack(&h, items)?;
                }
                self.check()?;
            }
            if delivered == 0 {
                if self.undrained().is_empty() {
                    self.note(format!("drained after {round} rounds"));
                    return Ok(());
                }
                self.set_clock(self.max_seen + LEASE_MS + 1_000);
            }
        }
        Err(fail(
            Check::Liveness,
            format!(
                "not drained after {DRAIN_ROUNDS} rounds: {:?}",
                self.undrained()
            ),
        ))
    }

    /// The lanes (partition, group, committed, last offset) with messages left to commit.
    fn undrained(&self) -> Vec<(String, &'static str, i64, i64)> {
        let Some(q) = self.engine.read(|b, now| b.queue_view(now, QUEUE)) else {
            return Vec::new();
        };
        let mut left = Vec::new();
        for p in q.partitions.iter().filter(|p| p.next_offset > 0) {
            let last = p.next_offset as i64 - 1;
            for group in GROUPS {
                let committed = p
                    .lanes
                    .iter()
                    .find(|l| l.consumer_group == group)
                    .map_or(-1, |l| l.committed);
                if committed < last {
                    left.push((p.id.clone(), group, committed, last));
                }
            }
        }
        left
    }
}

/// Runs one seed: the random phase, then the drain. With `canary: Some(check)` the run stops only at a
/// failure of `check`; failures of other checks are noted and the run goes on.
fn run_seed(
    seed: u64,
    fault: Fault,
    canary: Option<Check>,
    verbose: bool,
) -> Result<Stats, Failure> {
    let mut sim = Sim::new(seed, fault, verbose);
    let outcome = |sim: &mut Sim, result: Outcome, at: &str| -> Outcome {
        match result {
            Err(f) if canary.is_none_or(|c| c == f.check) => Err(fail(
                f.check,
                format!(
                    "seed {seed} failed {at}: {:?}: {}\nlast steps:\n  {}\nreplay: SIM_SEED={seed} cargo test --test simulation replay_one -- --ignored --nocapture",
                    f.check,
                    f.message,
                    sim.log.join("\n  ")
                ),
            )),
            Err(f) => {
                sim.note(format!("(passed over: {:?}: {})", f.check, f.message));
                Ok(())
            }
            Ok(()) => Ok(()),
        }
    };
    for step in 0..STEPS {
        let result = sim.step();
        outcome(&mut sim, result, &format!("at step {step}"))?;
    }
    sim.steps_since_full_check = u32::MAX;
    let result = sim.check();
    outcome(&mut sim, result, "the check after the last step")?;
    let result = sim.drain();
    outcome(&mut sim, result, "the drain")?;
    sim.steps_since_full_check = u32::MAX;
    let result = sim.check();
    outcome(&mut sim, result, "the check after the drain")?;
    Ok(sim.stats)
}

/// The seeds a run covers: `SIM_SEEDS` of them (`default_seeds` unless set), from `SIM_SEED_FROM` (0 unless
/// set), so that a longer search can go on where an earlier one stopped. Under wasm there is no environment.
fn seed_range(default_seeds: u64) -> std::ops::Range<u64> {
    let read = |name: &str, default: u64| match std::env::var(name) {
        Ok(s) => s
            .parse()
            .unwrap_or_else(|_| panic!("{name}={s}: want a whole number")),
        Err(_) => default,
    };
    let from = read("SIM_SEED_FROM", 0);
    from..from + read("SIM_SEEDS", default_seeds)
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn simulation_seeds() {
    // Under wasm (no environment: always the default) fewer seeds: what wasm32 changes (32-bit usize, the
    // allocator, the JS clock) shows in any seed, and the native run covers the rest.
    let default_seeds = if cfg!(target_arch = "wasm32") {
        50
    } else {
        200
    };
    let seeds = seed_range(default_seeds);
    let mut stats = Stats::default();
    for seed in seeds.clone() {
        match run_seed(seed, Fault::None, None, false) {
            Ok(s) => stats += s,
            Err(e) => panic!("{}", e.message),
        }
    }
    println!("seeds {seeds:?}: {stats:?}");
    // The checks that could pass over nothing had something to check.
    assert!(
        stats.live_acks > 0,
        "no ack under a surely live lease: {stats:?}"
    );
    assert!(
        stats.ended_acks > 0,
        "no ack under a surely ended lease: {stats:?}"
    );
    assert!(
        stats.crashed_claims_checked > 0,
        "no pop met a crashed consumer's live claim: {stats:?}"
    );
    assert!(stats.drained > 0, "the drain delivered nothing: {stats:?}");
    assert!(
        seeds.end - seeds.start < 2 || stats.quarantined_checks > 0,
        "no seed reached a reclaimLimit quarantine, so the invariants never saw one: {stats:?}"
    );
}

/// Runs `seeds` seeds with `fault` and asserts that every one of them stops on `check`. Native only: the
/// canaries test the checker, which wasm32 does not change.
#[cfg(not(target_arch = "wasm32"))]
fn canary(fault: Fault, check: Check, seeds: u64) {
    for seed in 0..seeds {
        match run_seed(seed, fault, Some(check), false) {
            Err(f) => assert_eq!(f.check, check, "{}", f.message),
            Ok(_) => {
                panic!("seed {seed}: the fault {fault:?} went unnoticed by the {check:?} check")
            }
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn canary_store_that_drops_writes_trips_lost_push() {
    canary(Fault::DropWrites, Check::LostPush, 10);
}

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn canary_commit_applied_then_failed_trips_failed_push_visible() {
    canary(Fault::ApplyThenFail, Check::FailedPushVisible, 10);
}

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn canary_broker_clock_ahead_trips_one_live_lease() {
    canary(Fault::BrokerClockAhead, Check::OneLiveLease, 10);
}

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn canary_broker_clock_ahead_trips_ack_outcome() {
    canary(Fault::BrokerClockAhead, Check::AckOutcome, 10);
}

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn canary_rogue_seek_trips_cursor_back_only_by_seek() {
    canary(Fault::RogueSeek, Check::CursorBackOnlyBySeek, 10);
}

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn canary_rogue_seek_trips_no_redelivery() {
    canary(Fault::RogueSeek, Check::NoRedelivery, 10);
}

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn canary_rogue_push_trips_delivery_was_pushed() {
    canary(Fault::RoguePush, Check::DeliveryWasPushed, 10);
}

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn canary_store_down_while_draining_trips_liveness() {
    canary(Fault::StoreDownWhileDraining, Check::Liveness, 10);
}

/// Replays `SIM_SEED` with a step log (native only: there is no environment under wasm).
#[cfg(not(target_arch = "wasm32"))]
#[test]
#[ignore = "replays one seed: SIM_SEED=s cargo test --test simulation replay_one -- --ignored --nocapture"]
fn replay_one() {
    let seed = std::env::var("SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .expect("SIM_SEED=<seed> names the seed to replay");
    let stats = run_seed(seed, Fault::None, None, true).unwrap_or_else(|e| panic!("{}", e.message));
    println!("{stats:?}");
}

/// The broker configuration of every simulated open: a segment cache far smaller than the backlog, so
/// pops, acks and dedup read segments from the store on demand and the cache evicts all the time.
fn sim_config() -> BrokerConfig {
    BrokerConfig {
        default_subscription_new: false,
        cache_bytes: 2 * 1024,
        ..BrokerConfig::default()
    }
}

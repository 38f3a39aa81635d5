//! Deterministic simulation (tier 4): seeded random workloads against the engine over an in-memory store,
//! with consumer crashes, stalls past the lease, stale and duplicate acks, store commit failures,
//! restarts, clock jumps and periodic maintenance (`Engine::maintain`, as the hosts run it: retention and
//! eviction, docs/protocol.md §3.10), then a drain. About two thirds of the seeds configure the queue with
//! some of `retentionSeconds`, `completedRetentionSeconds` (both gated by `retentionEnabled`, sometimes
//! off) and `maxWaitTimeSeconds`, in seconds small against the simulated clock ([`Retention`]). What is
//! checked, each a [`Check`]:
//!
//! 1. no acknowledged message is lost: every push answered `Ok` at or above its partition's first retained
//!    offset is readable, and the partition holds at least as many (`LostPush`), and a push whose commit
//!    failed is not (`FailedPushVisible`);
//! 2. at most one live lease per lane: no two leases of one group that are surely live at once cover a
//!    partition, the claims of crashed consumers included (`OneLiveLease`);
//! 3. cursors move back only by seek (`CursorBackOnlyBySeek`);
//! 4. every delivery was pushed, with its payload (`DeliveryWasPushed`), and nothing committed is delivered
//!    again to its group unless a seek moved the cursor back (`NoRedelivery`);
//! 5. acks of a lease that is surely live succeed item by item, acks of a lease that surely ended are
//!    refused with an error, and an ack of a message maintenance removed is refused with
//!    `Message not found` whatever its lease (contract §3.4) (`AckOutcome`);
//! 6. the core's derived structures agree with its lanes after every step (`CoreInvariants`:
//!    `Broker::check_invariants`, whose own canaries are in src/core/invariants.rs);
//! 7. liveness: with the faults off and consumers acking, everything pushed drains within a bound
//!    (`Liveness`);
//! 8. a partition's first retained offset (below it every message is gone) never passes what the rules
//!    allowed at some maintenance run (`RemovedOnlyByRule`). The model computes the bounds from the
//!    contract, per partition and as a prefix: each rule removes up to the newest message old enough, and
//!    `completedRetentionSeconds` no further than the lowest cursor of the groups with a lane there or a
//!    subscription (one without a lane at its initial cursor; with no such group nothing is completed). Its
//!    clock is an interval (the broker's clock is between the simulation's and the latest instant it showed,
//!    at each push as at maintenance), so each run has a floor it must reach and one it may reach; a message
//!    exactly as old as a limit may go or stay;
//! 9. a maintenance run answered `Ok` reached the floor the rules make it reach, and no floor ever moves
//!    back (`RemovalDone`);
//! 10. nothing below the floor is delivered after its removal (`NoDeliveryOfRemoved`);
//! 11. no lane keeps a live lease whose whole span is below the floor, and an extend renews no lease whose
//!     every span was removed (`NoLeaseOverRemoved`: lane row `raise_floor` ends such a lease). The model
//!     counts a claim as holding a lane only while some of what it delivered there is retained, for
//!     `OneLiveLease` too.
//!
//! One canary per check (`canary_*`): a fault that breaks exactly what the check guards, and a run that
//! must stop on that check (failures of other checks are noted and passed over in a canary run). The
//! canaries of faults other than maintenance's run without retention or maintenance, as before these were
//! simulated; maintenance's run every rule.
//!
//! `SIM_SEEDS=n` runs more seeds (`SIM_SEED_FROM=f`: seeds `f..f+n`, to go on where a search stopped);
//! `SIM_SEED=s cargo test --test simulation replay_one -- --ignored --nocapture` replays one seed with a
//! step log (with `SIM_FAULT=<Fault> SIM_CANARY=<Check>`, a canary's run of it).

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

/// A [`MemStore`] that can also apply a commit and then report it failed, or apply a commit but its lane
/// records (canaries' faults).
#[derive(Clone, Default)]
struct SimStore {
    mem: MemStore,
    apply_then_fail: Rc<Cell<u32>>,
    drop_lane_writes: Rc<Cell<bool>>,
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
        if self.drop_lane_writes.get() {
            // Lane records are `l/<pid>/<group>` (module `records`).
            let mut kept = ChangeSet::default();
            for (key, value) in changes.puts().filter(|(k, _)| !k.starts_with("l/")) {
                kept.put(key.clone(), value.clone());
            }
            for key in changes.deletes().filter(|k| !k.starts_with("l/")) {
                kept.delete(key.clone());
            }
            return self.mem.commit(&kept).await;
        }
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
/// Percent of steps that run periodic maintenance (`Engine::maintain`), from a stream of their own.
const MAINTAIN_PERCENT: u64 = 4;

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
    RemovedOnlyByRule,
    RemovalDone,
    NoDeliveryOfRemoved,
    NoLeaseOverRemoved,
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
    /// At maintenance the broker's clock runs an hour ahead, so it removes what no rule allows yet.
    MaintainClockAhead,
    /// As `MaintainClockAhead` (so that maintenance removes what is there), and the store reports
    /// maintenance's commits done and keeps nothing; the host restarts after.
    MaintainWritesLost,
    /// As `MaintainClockAhead` (so that maintenance removes every leased span), and the store keeps
    /// maintenance's commits but their lane records; the host restarts after.
    MaintainLaneWritesLost,
}

impl Fault {
    /// The faults of maintenance, whose canaries run with every rule on.
    fn at_maintenance(self) -> bool {
        matches!(
            self,
            Fault::MaintainClockAhead | Fault::MaintainWritesLost | Fault::MaintainLaneWritesLost
        )
    }
}

/// The retention and eviction options of a seed (docs/protocol.md §3.10), chosen from a stream of their
/// own so that a seed's main stream does not depend on them. Small against the simulated clock, which runs
/// about 80 s over the random phase.
#[derive(Clone, Copy, Debug, Default)]
struct Retention {
    /// `retentionEnabled`: gates the two below, not eviction.
    enabled: bool,
    /// `retentionSeconds`.
    retention_s: u64,
    /// `completedRetentionSeconds`.
    completed_s: u64,
    /// `maxWaitTimeSeconds`.
    max_wait_s: u64,
}

impl Retention {
    fn for_seed(seed: u64, fault: Fault) -> Self {
        match fault {
            Fault::None => {}
            // The maintenance canaries run every rule; the others none.
            f if f.at_maintenance() => {
                return Retention {
                    enabled: true,
                    retention_s: 40,
                    completed_s: 10,
                    max_wait_s: 20,
                }
            }
            _ => return Retention::default(),
        }
        let mut rng = Rng(seed.wrapping_mul(0xD1B5_4A32_D192_ED03) ^ 0x0005_EED0 | 1);
        let mut pick = |choices: &[u64]| choices[rng.below(choices.len() as u64) as usize];
        let (retention_s, completed_s, max_wait_s) =
            (pick(&[10, 20, 40]), pick(&[2, 5, 10]), pick(&[5, 15, 30]));
        match rng.below(6) {
            // A third of the seeds keep every option off.
            0 | 1 => Retention::default(),
            2 => Retention {
                enabled: true,
                retention_s,
                ..Default::default()
            },
            3 => Retention {
                enabled: true,
                completed_s,
                ..Default::default()
            },
            // Eviction alone, with the switch that does not gate it on or off.
            4 => Retention {
                enabled: rng.chance(50),
                max_wait_s,
                ..Default::default()
            },
            // Every rule, the switch sometimes off (then eviction alone applies).
            _ => Retention {
                enabled: rng.chance(75),
                retention_s,
                completed_s,
                max_wait_s,
            },
        }
    }
}

/// What the model knows of one partition.
#[derive(Debug, Default)]
struct Part {
    /// (offset, earliest and latest instant the broker's clock can have shown at its push) of every push
    /// answered `Queued`, in offset order.
    pushes: Vec<(u64, i64, i64)>,
    /// The highest first retained offset the rules have allowed so far.
    allowed: u64,
    /// The highest first retained offset seen: everything below was removed.
    floor: u64,
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
    /// Messages maintenance removed.
    removed: u64,
    /// Ack items judged for a message maintenance had removed.
    removed_acks: u64,
    /// Lanes whose whole span of a surely live claim maintenance removed.
    spans_removed_live: u64,
}

impl std::ops::AddAssign for Stats {
    fn add_assign(&mut self, o: Stats) {
        self.live_acks += o.live_acks;
        self.ended_acks += o.ended_acks;
        self.crashed_claims_checked += o.crashed_claims_checked;
        self.drained += o.drained;
        self.quarantined_checks += o.quarantined_checks;
        self.removed += o.removed;
        self.removed_acks += o.removed_acks;
        self.spans_removed_live += o.spans_removed_live;
    }
}

struct Sim {
    rng: Rng,
    stats: Stats,
    host: SimHost,
    store: SimStore,
    engine: Engine<SimStore, SimHost>,
    fault: Fault,
    /// (partition id, transaction id) -> payload and offset of every push answered Ok.
    pushed: BTreeMap<(String, String), (serde_json::Value, u64)>,
    /// Partition id -> what the model knows of it.
    parts: BTreeMap<String, Part>,
    retention: Retention,
    /// The stream that decides when maintenance runs.
    maintenance_rng: Rng,
    /// True once a pop of the named group was answered: it has a subscription to the queue.
    subscribed: bool,
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
            parts: BTreeMap::new(),
            retention: Retention::for_seed(seed, fault),
            maintenance_rng: Rng(seed.wrapping_mul(0xA24B_AED4_963E_E407) ^ 0x3A17 | 1),
            subscribed: false,
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
            retention_enabled: Some(sim.retention.enabled),
            retention_s: Some(sim.retention.retention_s),
            completed_retention_s: Some(sim.retention.completed_s),
            max_wait_time_s: Some(sim.retention.max_wait_s),
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
        // The canaries of other faults run as before maintenance was simulated.
        let maintains = self.fault == Fault::None || self.fault.at_maintenance();
        if self.maintenance_rng.chance(MAINTAIN_PERCENT) && maintains {
            self.maintain()?;
            return self.check();
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
                        // The broker's clock at the push: at least the simulation's, at most the latest
                        // instant the simulation's clock showed.
                        let (lo, hi) = (self.now(), self.max_seen);
                        self.parts
                            .entry(key.0.clone())
                            .or_default()
                            .pushes
                            .push((r.offset, lo, hi));
                        self.pushed.insert(key, (payload, r.offset));
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
            Ok(r) => {
                // The pop made the named group's subscription (contract §2.3), delivering or not.
                self.subscribed |= group != QUEUE_MODE_GROUP;
                r
            }
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
                Some((p, _)) if Some(p) == m.payload.to_value().ok().as_ref() => {}
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
            let floor = self.floor(&m.partition_id);
            if m.offset < floor {
                return Err(fail(
                    Check::NoDeliveryOfRemoved,
                    format!(
                        "offset {} of {} delivered to {group} after maintenance removed every offset below {floor}",
                        m.offset, m.partition_id
                    ),
                ));
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
            // lease ends after any instant the broker's clock can show) covers this partition with a span
            // maintenance did not remove wholly (such a lease ended, lane row `raise_floor`).
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
                    && self.holds(h, &m.partition_id)
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

    /// Acks `items` of claim `h` and checks each outcome against what the lease allows: an item of a
    /// message maintenance removed is refused (contract §3.4, `Message not found`), whatever the lease.
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
                    let removed = h.messages.iter().find(|m| {
                        m.transaction_id == it.transaction_id
                            && m.partition_id == it.partition_id
                            && m.offset < self.floor(&m.partition_id)
                    });
                    if let Some(m) = removed {
                        self.stats.removed_acks += 1;
                        // The message is looked up by its transaction id first: gone, it is not found,
                        // unless the id was pushed again since (then the later message answers).
                        let key = (m.partition_id.to_string(), m.transaction_id.to_string());
                        let pushed_again =
                            self.pushed.get(&key).is_some_and(|(_, o)| *o != m.offset);
                        if r.success
                            || !pushed_again && r.error.as_deref() != Some("Message not found")
                        {
                            return Err(fail(
                                Check::AckOutcome,
                                format!(
                                    "ack of {} under lease {} after maintenance removed it: {r:?}",
                                    it.transaction_id, h.lease_id
                                ),
                            ));
                        }
                        continue;
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
            let h = &self.held[i];
            if reply.renewed > 0 && h.messages.iter().all(|m| !self.holds(h, &m.partition_id)) {
                return Err(fail(
                    Check::NoLeaseOverRemoved,
                    format!("extend renewed lease {lease}, whose every span maintenance removed"),
                ));
            }
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
        let (views, missing, ghosts) = run(self.engine.read_loaded(|b, now| {
            let views = b.queue_view(now, QUEUE);
            // Below a partition's first retained offset a push is gone, which the floor's own checks
            // judge; at or above it, it must be there.
            let floor = |pid: &str| {
                views.as_ref().map_or(0, |q| {
                    q.partitions
                        .iter()
                        .find(|p| p.id == pid)
                        .map_or(0, |p| p.first_retained_offset)
                })
            };
            let missing: Vec<_> = if full {
                self.pushed
                    .iter()
                    .filter(|((p, t), (_, offset))| {
                        *offset >= floor(p) && b.message(p, t).is_none()
                    })
                    .map(|(key, _)| key.clone())
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
        // The floors first: a canary's fault that breaks them may break the core's invariants too.
        if let Some(q) = &views {
            self.observe_floors(q)?;
        }
        // The core's derived structures (ready sets, lease index, timers, segment chain) agree with
        // the lanes and segments, after every step.
        self.engine
            .read(|b, _| b.check_invariants())
            .map_err(|e| fail(Check::CoreInvariants, format!("broken invariant: {e}")))?;
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
            let mut retained: BTreeMap<&str, u64> = BTreeMap::new();
            for p in &q.partitions {
                retained.insert(p.id.as_str(), p.first_retained_offset);
            }
            let mut per_partition: BTreeMap<&str, u64> = BTreeMap::new();
            for ((p, _), (_, offset)) in &self.pushed {
                if retained.get(p.as_str()).is_none_or(|f| offset >= f) {
                    *per_partition.entry(p.as_str()).or_default() += 1;
                }
            }
            for p in &q.partitions {
                let acknowledged = per_partition.get(p.id.as_str()).copied().unwrap_or(0);
                if p.messages < acknowledged {
                    return Err(fail(
                        Check::LostPush,
                        format!(
                            "partition {} holds {} messages, {acknowledged} were acknowledged at or above its floor {}",
                            p.id, p.messages, p.first_retained_offset
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

    /// The first retained offset of every partition: never above what the rules allowed
    /// (`RemovedOnlyByRule`), never back below one seen (`RemovalDone`), and no lane keeps a live lease
    /// over a span wholly below it (`NoLeaseOverRemoved`, lane row `raise_floor`).
    fn observe_floors(&mut self, q: &QueueView) -> Outcome {
        // Every partition is looked at, and the failures ranked, so that one a canary's fault causes
        // first does not hide another.
        let (mut lease_over, mut beyond_rule, mut back) = (None, None, None);
        for p in &q.partitions {
            let part = self.parts.entry(p.id.clone()).or_default();
            let f = p.first_retained_offset;
            let seen = part.floor;
            // What is gone stays gone for the model, whatever is found wrong below.
            part.floor = seen.max(f);
            if f > part.allowed {
                beyond_rule.get_or_insert_with(|| {
                    fail(
                        Check::RemovedOnlyByRule,
                        format!(
                            "partition {} retains from offset {f}; the rules allowed removal below {} only",
                            p.id, part.allowed
                        ),
                    )
                });
            }
            if f < seen {
                back.get_or_insert_with(|| {
                    fail(
                        Check::RemovalDone,
                        format!(
                            "partition {} retains from offset {f} again, after maintenance removed everything below {seen}",
                            p.id
                        ),
                    )
                });
            }
            for lane in &p.lanes {
                if let (Some(lease), Some(end)) = (&lane.lease_id, lane.batch_end) {
                    if end < f {
                        lease_over.get_or_insert_with(|| {
                            fail(
                                Check::NoLeaseOverRemoved,
                                format!(
                                    "{} keeps live lease {lease} on partition {} over a span ending at {end}, below its floor {f}",
                                    lane.consumer_group, p.id
                                ),
                            )
                        });
                    }
                }
            }
        }
        match lease_over.or(back).or(beyond_rule) {
            Some(f) => Err(f),
            None => Ok(()),
        }
    }

    /// The first retained offset the model knows of partition `pid` (everything below was removed).
    fn floor(&self, pid: &str) -> u64 {
        self.parts.get(pid).map_or(0, |p| p.floor)
    }

    /// True while claim `h` may still hold its lane on partition `pid`: some of what it delivered there is
    /// retained (a lease whose whole span maintenance removed ended, lane row `raise_floor`).
    fn holds(&self, h: &Held, pid: &str) -> bool {
        let floor = self.floor(pid);
        h.messages
            .iter()
            .any(|m| m.partition_id == pid && m.offset >= floor)
    }

    /// Periodic maintenance, as the hosts run it (`Engine::maintain`). Before it, the model computes for
    /// each partition the first retained offset the rules make it reach surely and the one they let it
    /// reach at most (`floor_bounds`); an answered run must have reached the first, and no floor may ever
    /// pass the second.
    fn maintain(&mut self) -> Outcome {
        let before =
            run(self.engine.read_loaded(|b, now| b.queue_view(now, QUEUE))).map_err(|e| {
                fail(
                    Check::Engine,
                    format!("the read before maintenance failed: {e}"),
                )
            })?;
        let bounds: Vec<(String, u64, u64)> = before
            .iter()
            .flat_map(|q| &q.partitions)
            .map(|p| {
                let (must, may) = self.floor_bounds(p);
                (p.id.clone(), must, may)
            })
            .collect();
        for (pid, _, may) in &bounds {
            let part = self.parts.entry(pid.clone()).or_default();
            part.allowed = part.allowed.max(*may);
        }
        // The spans of surely live claims each lane holds, to count those maintenance removes wholly.
        let live: Vec<(String, u64)> = self
            .held
            .iter()
            .chain(&self.crashed)
            .filter(|h| h.expires_lo > self.max_seen)
            .flat_map(|h| {
                let mut ends: BTreeMap<String, u64> = BTreeMap::new();
                for m in &h.messages {
                    let end = ends.entry(m.partition_id.to_string()).or_default();
                    *end = (*end).max(m.offset);
                }
                ends.into_iter()
                    .filter(|(pid, end)| *end >= self.floor(pid))
            })
            .collect();
        let skew = self.host.skew.get();
        if self.fault.at_maintenance() {
            self.host.skew.set(skew + 3_600_000);
        }
        self.store
            .mem
            .drop_writes(self.fault == Fault::MaintainWritesLost);
        self.store
            .drop_lane_writes
            .set(self.fault == Fault::MaintainLaneWritesLost);
        let result = run(self.engine.maintain());
        self.store.mem.drop_writes(false);
        self.store.drop_lane_writes.set(false);
        let after = run(self.engine.read_loaded(|b, now| b.queue_view(now, QUEUE)));
        self.host.skew.set(skew);
        let after = after.map_err(|e| {
            fail(
                Check::Engine,
                format!("the read after maintenance failed: {e}"),
            )
        })?;
        match &result {
            Ok(r) => self.note(format!(
                "maintain: {} retained out, {} evicted, {} segments compressed",
                r.retention_deleted, r.evicted, r.segments_compressed
            )),
            Err(EngineError::Store(_)) => self.note("maintain: store failure".into()),
            Err(e) => return Err(fail(Check::Engine, format!("maintenance refused: {e}"))),
        }
        let mut short = None;
        if let Some(q) = &after {
            let floors: BTreeMap<&str, u64> = q
                .partitions
                .iter()
                .map(|p| (p.id.as_str(), p.first_retained_offset))
                .collect();
            for (pid, must, _) in &bounds {
                let f = floors.get(pid.as_str()).copied().unwrap_or(0);
                if result.is_ok() {
                    if f < *must {
                        short.get_or_insert_with(|| fail(
                            Check::RemovalDone,
                            format!(
                                "maintenance answered, and partition {pid} still retains from {f}: the rules removed everything below {must}"
                            ),
                        ));
                    }
                    self.stats.removed += f.saturating_sub(self.floor(pid));
                }
            }
            for (pid, end) in &live {
                if floors.get(pid.as_str()).is_some_and(|f| end < f) {
                    self.stats.spans_removed_live += 1;
                }
            }
        }
        let outcome = after.as_ref().map_or(Ok(()), |q| self.observe_floors(q));
        if matches!(
            self.fault,
            Fault::MaintainWritesLost | Fault::MaintainLaneWritesLost
        ) {
            self.restart()?;
        }
        short.map_or(outcome, Err)
    }

    /// The first retained offset partition `p` must reach (`.0`) and may reach (`.1`) at a maintenance run
    /// now, by the rules of the contract (docs/protocol.md §3.10) and what the model knows: when each
    /// message was pushed, and the cursors `p` shows. Each rule cuts a prefix: the messages up to the
    /// newest one old enough (push times only grow along a partition).
    fn floor_bounds(&self, p: &PartitionView) -> (u64, u64) {
        let f = p.first_retained_offset;
        let Some(part) = self.parts.get(&p.id) else {
            return (f, f);
        };
        let r = self.retention;
        // The broker's clock now, as at each push, is between the simulation's clock and the latest
        // instant it showed. A message is surely older than `limit_s` when its latest push instant is more
        // than that before the simulation's clock, and possibly when its earliest is at least that before
        // the latest instant (one exactly `limit_s` old may go or stay: "older than" in whole ms).
        let (now, latest) = (self.now(), self.max_seen);
        let cut = |limit_s: u64| {
            let ms = limit_s as i64 * 1000;
            let upto = |old: &dyn Fn(i64, i64) -> bool| {
                part.pushes
                    .iter()
                    .filter(|(_, lo, hi)| old(*lo, *hi))
                    .map(|(offset, ..)| offset + 1)
                    .max()
                    .unwrap_or(0)
            };
            (
                upto(&|_, hi| hi < now - ms),
                upto(&|lo, _| lo <= latest - ms),
            )
        };
        let (mut must, mut may) = (f, f);
        let mut raise = |(m, y): (u64, u64)| {
            must = must.max(m);
            may = may.max(y);
        };
        if r.enabled && r.retention_s > 0 {
            raise(cut(r.retention_s));
        }
        if r.enabled && r.completed_s > 0 {
            // Completed: committed by every group with a lane here or a subscription to the queue; one
            // without a lane counts at its initial cursor, the floor (both groups start at the oldest).
            // With no such group nothing is completed.
            let consumed = GROUPS
                .iter()
                .filter_map(|g| match p.lanes.iter().find(|l| l.consumer_group == *g) {
                    Some(lane) => Some(lane.committed),
                    None if *g != QUEUE_MODE_GROUP && self.subscribed => Some(f as i64 - 1),
                    None => None,
                })
                .min();
            if let Some(consumed) = consumed {
                let upto = (consumed + 1).max(0) as u64;
                let (m, y) = cut(r.completed_s);
                raise((m.min(upto), y.min(upto)));
            }
        }
        if r.max_wait_s > 0 {
            raise(cut(r.max_wait_s));
        }
        (must, may)
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
                // A group without a lane here starts at the floor (both start at the oldest).
                let committed = p
                    .lanes
                    .iter()
                    .find(|l| l.consumer_group == group)
                    .map_or(p.first_retained_offset as i64 - 1, |l| l.committed);
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
    // Retention and eviction run in about two thirds of the seeds: a few seeds may remove nothing.
    let few = seeds.end - seeds.start < 20;
    assert!(
        few || stats.removed > 0,
        "maintenance removed nothing: {stats:?}"
    );
    assert!(
        few || stats.removed_acks > 0,
        "no ack of a removed message: {stats:?}"
    );
    assert!(
        few || stats.spans_removed_live > 0,
        "maintenance never removed a surely live claim's whole span: {stats:?}"
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

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn canary_maintenance_with_its_clock_ahead_trips_removed_only_by_rule() {
    canary(Fault::MaintainClockAhead, Check::RemovedOnlyByRule, 10);
}

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn canary_maintenance_writes_lost_trips_removal_done() {
    canary(Fault::MaintainWritesLost, Check::RemovalDone, 10);
}

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn canary_maintenance_writes_lost_trips_no_delivery_of_removed() {
    canary(Fault::MaintainWritesLost, Check::NoDeliveryOfRemoved, 10);
}

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn canary_maintenance_lane_writes_lost_trips_no_lease_over_removed() {
    canary(Fault::MaintainLaneWritesLost, Check::NoLeaseOverRemoved, 10);
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
    // A canary's run: `SIM_FAULT=<Fault variant> SIM_CANARY=<Check variant>`.
    let named = |var: &str| std::env::var(var).ok();
    let fault = named("SIM_FAULT").map_or(Fault::None, |name| {
        *FAULTS
            .iter()
            .find(|f| format!("{f:?}") == name)
            .unwrap_or_else(|| panic!("SIM_FAULT={name}: want one of {FAULTS:?}"))
    });
    let canary = named("SIM_CANARY").map(|name| {
        *CHECKS
            .iter()
            .find(|c| format!("{c:?}") == name)
            .unwrap_or_else(|| panic!("SIM_CANARY={name}: want one of {CHECKS:?}"))
    });
    match run_seed(seed, fault, canary, true) {
        Ok(stats) => println!("{stats:?}"),
        Err(e) if canary.is_some() => println!("stopped as a canary run must: {}", e.message),
        Err(e) => panic!("{}", e.message),
    }
}

/// Every fault, for `SIM_FAULT`.
#[cfg(not(target_arch = "wasm32"))]
const FAULTS: [Fault; 10] = [
    Fault::None,
    Fault::DropWrites,
    Fault::ApplyThenFail,
    Fault::BrokerClockAhead,
    Fault::RogueSeek,
    Fault::RoguePush,
    Fault::StoreDownWhileDraining,
    Fault::MaintainClockAhead,
    Fault::MaintainWritesLost,
    Fault::MaintainLaneWritesLost,
];

/// Every check, for `SIM_CANARY`.
#[cfg(not(target_arch = "wasm32"))]
const CHECKS: [Check; 14] = [
    Check::LostPush,
    Check::FailedPushVisible,
    Check::OneLiveLease,
    Check::CursorBackOnlyBySeek,
    Check::DeliveryWasPushed,
    Check::NoRedelivery,
    Check::AckOutcome,
    Check::CoreInvariants,
    Check::Liveness,
    Check::RemovedOnlyByRule,
    Check::RemovalDone,
    Check::NoDeliveryOfRemoved,
    Check::NoLeaseOverRemoved,
    Check::Engine,
];

/// The broker configuration of every simulated open: a segment cache far smaller than the backlog, so
/// pops, acks and dedup read segments from the store on demand and the cache evicts all the time.
fn sim_config() -> BrokerConfig {
    BrokerConfig {
        default_subscription_new: false,
        cache_bytes: 2 * 1024,
        ..BrokerConfig::default()
    }
}

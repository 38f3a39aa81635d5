//! Concurrency on a virtual clock: producers and long-polling consumers run as tasks of one executor
//! against one engine, over a store whose reads and commits take virtual time, so commands overlap: pops
//! park as waiters, commands queue at the command gate, commits are grouped. Time moves only when every
//! task waits, straight to the next timer; a task that waits on nothing left to fire is a lost wakeup.
//!
//! Checked, per seed:
//! - every accepted push is committed exactly once by each group, with its payload;
//! - no two consumers of a group hold a live lease on one partition at once (the virtual clock is the
//!   broker's, so "live" is exact);
//! - every ack under a live lease succeeds, a late one (after its lease) is refused;
//! - a long-poll that answers empty waited its whole wait; a pushed message, or one whose retry hold
//!   ended, reaches a parked consumer well before the long-poll's wait runs out (waiters are woken by
//!   commits and by the broker's timers, not by their timeout);
//! - the gate serves commands in the order they asked for it: of two pushes to one partition, the earlier
//!   gets the lower offsets; and a push or an ack is answered within a bound;
//! - `Broker::check_invariants` holds whenever every task waits.
//!
//! Odd seeds run as on Durable Object SQLite: commits take no time (reads still do), so commands would
//! never meet a commit in flight, and the host gathers (`Host::gather`, one virtual millisecond), so a
//! commit's leader waits for the commands applied meanwhile and commits them together.

use super::{Rng, T0};
use futures::executor::LocalPool;
use futures::future::LocalBoxFuture;
use futures::task::LocalSpawnExt;
use queen_edge::core::api::*;
use queen_edge::core::BrokerConfig;
use queen_edge::engine::{Engine, Host};
use queen_edge::store::{ChangeSet, KeyRange, MemStore, Record, Store, StoreError};
use serde_json::json;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

const QUEUE: &str = "conc";
const PARTITIONS: [&str; 3] = ["p0", "p1", "p2"];
const GROUPS: [&str; 2] = ["__QUEUE_MODE__", "g2"];
const CONSUMERS_PER_GROUP: usize = 3;
const PRODUCERS: usize = 2;
const PUSHES_PER_PRODUCER: usize = 25;
const LEASE_MS: i64 = 5_000;
const RETRY_DELAY_MS: i64 = 300;
/// A long-poll's wait: far longer than any delivery may take.
const WAIT_MS: u64 = 10_000;
/// How long after its push (or its retry hold) a message may wait for a parked consumer.
const DELIVERY_BOUND_MS: i64 = 1_000;
/// How long a push or an ack may wait for its answer.
const ANSWER_BOUND_MS: i64 = 500;
/// The longest a store read or commit takes.
const STORE_DELAY_MS: u64 = 5;
/// The run must be over by then.
const TIME_LIMIT_MS: i64 = 600_000;

/// The virtual clock and its timers.
#[derive(Default)]
struct Clock {
    now: Cell<i64>,
    timers: RefCell<Vec<(i64, Waker)>>,
}

impl Clock {
    fn sleep(self: &Rc<Self>, ms: u64) -> Sleep {
        Sleep {
            clock: self.clone(),
            at: self.now.get() + ms as i64,
        }
    }

    /// Moves to the earliest timer and wakes every timer due. `false` when no timer is set.
    fn advance(&self) -> bool {
        let mut timers = self.timers.borrow_mut();
        let Some(next) = timers.iter().map(|(at, _)| *at).min() else {
            return false;
        };
        self.now.set(self.now.get().max(next));
        let now = self.now.get();
        let (due, later): (Vec<_>, Vec<_>) = timers.drain(..).partition(|(at, _)| *at <= now);
        *timers = later;
        drop(timers);
        for (_, waker) in due {
            waker.wake();
        }
        true
    }
}

struct Sleep {
    clock: Rc<Clock>,
    at: i64,
}

impl Future for Sleep {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.clock.now.get() >= self.at {
            return Poll::Ready(());
        }
        self.clock
            .timers
            .borrow_mut()
            .push((self.at, cx.waker().clone()));
        Poll::Pending
    }
}

#[derive(Clone)]
struct VirtualHost {
    clock: Rc<Clock>,
    seed: u64,
    /// Gathers for one virtual millisecond (odd seeds).
    gathers: bool,
}

impl Host for VirtualHost {
    fn now_ms(&self) -> i64 {
        self.clock.now.get()
    }
    fn sleep(&self, ms: u64) -> LocalBoxFuture<'static, ()> {
        Box::pin(self.clock.sleep(ms))
    }
    fn entropy(&self) -> u64 {
        self.seed
    }
    fn gather(&self) -> Option<LocalBoxFuture<'static, ()>> {
        self.gathers
            .then(|| Box::pin(self.clock.sleep(1)) as LocalBoxFuture<'static, ()>)
    }
}

/// A [`MemStore`] whose reads and commits take 1 to [`STORE_DELAY_MS`] virtual milliseconds (commits
/// none with `instant_commits`).
#[derive(Clone)]
struct SlowStore {
    mem: MemStore,
    clock: Rc<Clock>,
    rng: Rc<RefCell<Rng>>,
    instant_commits: bool,
}

impl SlowStore {
    fn delay(&self) -> Sleep {
        let ms = 1 + self.rng.borrow_mut().below(STORE_DELAY_MS);
        self.clock.sleep(ms)
    }
}

impl Store for SlowStore {
    async fn scan(&self, prefix: &str) -> Result<Vec<Record>, StoreError> {
        self.delay().await;
        self.mem.scan(prefix).await
    }
    async fn get(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        self.delay().await;
        self.mem.get(keys).await
    }
    async fn first_keys(&self, ranges: &[KeyRange]) -> Result<Vec<Option<String>>, StoreError> {
        self.delay().await;
        self.mem.first_keys(ranges).await
    }
    async fn commit(&self, changes: &ChangeSet) -> Result<(), StoreError> {
        if !self.instant_commits {
            self.delay().await;
        }
        self.mem.commit(changes).await
    }
}

/// What the tasks saw, shared between them. Partitions by name.
#[derive(Default)]
struct World {
    /// (partition, transaction id) -> (payload, instant the push was sent), recorded before sending.
    sent: BTreeMap<(String, String), (serde_json::Value, i64)>,
    /// Pushes answered `queued`.
    pushed: BTreeSet<(String, String)>,
    producers_left: usize,
    /// (group, partition, transaction id) -> committing lease.
    committed: BTreeMap<(&'static str, String, String), String>,
    /// (group, partition) -> (lease id, expiry, whether its ack was sent) of the latest claim.
    leases: HashMap<(&'static str, String), (String, i64, bool)>,
    /// (group, partition) -> the instant its lane was last seen to become claimable (an ack answered, a
    /// retry hold's end, the end of a lease whose holder never acked in time).
    free_at: HashMap<(&'static str, String), i64>,
    /// Pushes in the order they asked for the command gate.
    push_seq: u64,
    /// (partition, gate order, first offset) of every answered push.
    push_order: Vec<(String, u64, u64)>,
    /// Bursts of three pushes to one partition at once.
    bursts: u64,
    failures: Vec<String>,
    late_acks: u64,
    retries: u64,
    empty_polls: u64,
    woken_deliveries: u64,
}

impl World {
    fn done(&self) -> bool {
        self.producers_left == 0 && self.committed.len() == self.pushed.len() * GROUPS.len()
    }
}

type SharedEngine = Rc<Engine<SlowStore, VirtualHost>>;

/// What a task needs.
#[derive(Clone)]
struct Ctx {
    engine: SharedEngine,
    clock: Rc<Clock>,
    world: Rc<RefCell<World>>,
    rng: Rc<RefCell<Rng>>,
}

impl Ctx {
    fn below(&self, n: u64) -> u64 {
        self.rng.borrow_mut().below(n)
    }
    fn chance(&self, percent: u64) -> bool {
        self.rng.borrow_mut().chance(percent)
    }
    fn now(&self) -> i64 {
        self.clock.now.get()
    }
    fn failure(&self, message: String) {
        self.world.borrow_mut().failures.push(message);
    }
}

async fn producer(id: usize, cx: Ctx) {
    for n in 0..PUSHES_PER_PRODUCER {
        cx.clock.sleep(cx.below(200)).await;
        let partition = PARTITIONS[cx.below(3) as usize];
        if cx.chance(15) {
            // A burst: three pushes to one partition at once, which meet at the gate.
            cx.world.borrow_mut().bursts += 1;
            let burst = (0..3).map(|b| push(&cx, format!("w{id}-{n}-b{b}"), partition, 1));
            futures::future::join_all(burst).await;
        } else {
            let size = 1 + cx.below(3) as usize;
            push(&cx, format!("w{id}-{n}"), partition, size).await;
        }
    }
    cx.world.borrow_mut().producers_left -= 1;
}

/// One push of `size` messages to `partition`, transaction ids `{name}-{k}`, checked and recorded.
async fn push(cx: &Ctx, name: String, partition: &str, size: usize) {
    let sent = cx.now();
    let items: Vec<PushItem> = (0..size)
        .map(|k| {
            let tx = format!("{name}-{k}");
            let payload = json!({ "tx": tx });
            cx.world
                .borrow_mut()
                .sent
                .insert((partition.to_string(), tx.clone()), (payload.clone(), sent));
            PushItem {
                partition: partition.into(),
                transaction_id: Some(tx.into()),
                ..PushItem::new(QUEUE, payload)
            }
        })
        .collect();
    // The push asks for the gate on its first poll, right below: no other task runs in between.
    let seq = {
        let mut w = cx.world.borrow_mut();
        w.push_seq += 1;
        w.push_seq
    };
    let results = cx.engine.push(items).await;
    let waited = cx.now() - sent;
    if waited > ANSWER_BOUND_MS {
        cx.failure(format!("a push waited {waited} ms for its answer"));
    }
    match results {
        Ok(results) => {
            if let Some(first) = results.first() {
                let entry = (first.partition.to_string(), seq, first.offset);
                cx.world.borrow_mut().push_order.push(entry);
            }
            for r in results {
                if r.status == PushStatus::Queued {
                    cx.world
                        .borrow_mut()
                        .pushed
                        .insert((r.partition.into(), r.transaction_id.into()));
                } else {
                    cx.failure(format!("push {} answered {:?}", r.transaction_id, r.status));
                }
            }
        }
        Err(e) => cx.failure(format!("push failed: {e}")),
    }
}

/// The partitions of a reply, in order, each once.
fn partitions_of(reply: &PopReply) -> Vec<String> {
    let mut partitions: Vec<String> = reply
        .messages
        .iter()
        .map(|m| m.partition.to_string())
        .collect();
    partitions.dedup();
    partitions
}

/// Checks a delivery against what was sent and when it became ready; records the claim.
fn check_delivery(cx: &Ctx, name: &str, group: &'static str, sent: i64, reply: &PopReply) {
    let now = cx.now();
    let mut w = cx.world.borrow_mut();
    // Per partition: until when the previous claim held it (None: released by an ack on its way, at an
    // instant not known here).
    let mut held_until: HashMap<String, Option<i64>> = HashMap::new();
    for partition in partitions_of(reply) {
        let key = (group, partition.clone());
        let previous = w.leases.get(&key).filter(|l| l.0 != reply.lease_id);
        held_until.insert(
            partition.clone(),
            previous.map_or(Some(i64::MIN), |l| (!l.2).then_some(l.1)),
        );
        // A lease whose ack is on its way may have been released by it already.
        if let Some((other, expires, acking)) = w.leases.get(&key) {
            if *expires > now && !*acking && *other != reply.lease_id {
                let message = format!(
                    "{name}: partition {partition} leased twice for {group}: {other} and {}",
                    reply.lease_id
                );
                w.failures.push(message);
            }
        }
        // The broker's own expiry of the lease (it may be gone already: acked by another task's
        // command that ran first).
        let expires = cx
            .engine
            .read(|b, now| b.queue_view(now, QUEUE))
            .and_then(|q| {
                q.partitions
                    .into_iter()
                    .find(|p| p.name == partition)
                    .and_then(|p| p.lanes.into_iter().find(|l| l.consumer_group == group))
            })
            .filter(|l| l.lease_id.as_deref() == Some(reply.lease_id.as_str()))
            .and_then(|l| l.lease_expires_at_ms)
            .unwrap_or(now);
        w.leases
            .insert(key, (reply.lease_id.clone(), expires, false));
    }
    for m in &reply.messages {
        let key = (m.partition.to_string(), m.transaction_id.to_string());
        let Some((payload, sent_at)) = w.sent.get(&key).cloned() else {
            w.failures
                .push(format!("{name}: delivery {key:?} was never pushed"));
            continue;
        };
        if m.payload.to_value().ok().as_ref() != Some(&payload) {
            w.failures
                .push(format!("{name}: delivery {key:?} with another payload"));
        }
        let Some(held_until) = held_until[m.partition.as_str()] else {
            continue;
        };
        let free_at = w.free_at.get(&(group, m.partition.to_string())).copied();
        let ready_at = free_at.unwrap_or(sent_at).max(sent_at).max(held_until);
        // The pop waited since before the message was ready: the push's commit or the broker's timer
        // must have woken it, well before the long-poll's own timeout.
        if sent < ready_at {
            w.woken_deliveries += 1;
            if now - ready_at > DELIVERY_BOUND_MS {
                w.failures.push(format!(
                    "{name}: {key:?} reached a parked consumer {} ms after it was ready",
                    now - ready_at
                ));
            }
        }
    }
}

async fn consumer(group: &'static str, idx: usize, cx: Ctx) {
    let name = format!("{group}#{idx}");
    while !cx.world.borrow().done() && cx.world.borrow().failures.is_empty() {
        let mut req = PopRequest::queue(QUEUE);
        req.group = req_group(group);
        req.batch = Some(1 + cx.below(4) as u32);
        let sent = cx.now();
        let reply = match cx.engine.pop(req, Some(WAIT_MS)).await {
            Ok(r) => r,
            Err(e) => return cx.failure(format!("{name}: pop failed: {e}")),
        };
        if reply.messages.is_empty() {
            let waited = cx.now() - sent;
            cx.world.borrow_mut().empty_polls += 1;
            if waited < WAIT_MS as i64 {
                cx.failure(format!(
                    "{name}: an empty long-poll answered after {waited} ms of its {WAIT_MS}"
                ));
            }
            continue;
        }
        check_delivery(&cx, &name, group, sent, &reply);
        let expires = partitions_of(&reply)
            .into_iter()
            .filter_map(|p| cx.world.borrow().leases.get(&(group, p)).map(|l| l.1))
            .min()
            .unwrap_or(cx.now());
        // Work, now and then past the lease; now and then a failure (retried after the retry delay).
        let roll = cx.below(100);
        let late = roll < 3;
        let retry = (3..10).contains(&roll);
        let work = if late {
            LEASE_MS as u64 + 1_000
        } else {
            cx.below(20)
        };
        cx.clock.sleep(work).await;
        let status = if retry {
            AckStatus::Failed
        } else {
            AckStatus::Completed
        };
        let items: Vec<AckItem> = reply
            .messages
            .iter()
            .map(|m| {
                AckItem::new(&m.transaction_id, &m.partition_id, status.clone())
                    .with_lease(&reply.lease_id)
            })
            .collect();
        let ack_sent = cx.now();
        // Surely live: answered well before the lease ends; surely ended: sent after it ended.
        let live = ack_sent + ANSWER_BOUND_MS < expires;
        let ended = ack_sent >= expires;
        for partition in partitions_of(&reply) {
            if let Some(lease) = cx.world.borrow_mut().leases.get_mut(&(group, partition)) {
                if lease.0 == reply.lease_id {
                    lease.2 = true;
                }
            }
        }
        let answer = cx.engine.ack(req_group(group), items).await;
        let now = cx.now();
        if now - ack_sent > ANSWER_BOUND_MS {
            cx.failure(format!(
                "{name}: an ack waited {} ms for its answer",
                now - ack_sent
            ));
        }
        let results = match answer {
            Ok(r) => r,
            Err(e) => return cx.failure(format!("{name}: ack failed: {e}")),
        };
        let mut w = cx.world.borrow_mut();
        for (r, m) in results.iter().zip(&reply.messages) {
            if live && !r.success {
                let message = format!(
                    "{name}: ack of {} under a live lease refused: {:?}",
                    m.transaction_id, r.error
                );
                w.failures.push(message);
            }
            if ended && r.success {
                let message = format!(
                    "{name}: ack of {} after its lease ended accepted",
                    m.transaction_id
                );
                w.failures.push(message);
            }
            if r.success && !retry {
                let key = (group, m.partition.to_string(), m.transaction_id.to_string());
                if let Some(before) = w.committed.insert(key.clone(), reply.lease_id.clone()) {
                    let message = format!(
                        "{name}: {key:?} committed twice ({before}, {})",
                        reply.lease_id
                    );
                    w.failures.push(message);
                }
            }
        }
        let free_at = if ended {
            w.late_acks += 1;
            expires
        } else if retry {
            w.retries += 1;
            now + RETRY_DELAY_MS
        } else {
            now
        };
        for partition in partitions_of(&reply) {
            let key = (group, partition);
            let at = w.free_at.entry(key).or_insert(free_at);
            *at = (*at).max(free_at);
        }
    }
}

fn req_group(group: &'static str) -> Option<String> {
    (group != QUEUE_MODE_GROUP).then(|| group.to_string())
}

/// Runs one seed; `Err` names what went wrong.
/// An executor, its clock, an engine opened on it and the seed's random source.
type Opened = (LocalPool, Rc<Clock>, SharedEngine, Rc<RefCell<Rng>>);

/// Whether seed `seed` runs as on Durable Object SQLite (module documentation): the odd ones.
fn as_on_durable_objects(seed: u64) -> bool {
    seed % 2 == 1
}

/// Opens an engine on a fresh executor and clock (queue [`QUEUE`] configured), for seed `seed`.
fn open(seed: u64) -> Result<Opened, String> {
    let clock = Rc::new(Clock::default());
    clock.now.set(T0);
    let rng = Rc::new(RefCell::new(Rng(
        seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1
    )));
    let durable_object = as_on_durable_objects(seed);
    let store = SlowStore {
        mem: MemStore::new(),
        clock: clock.clone(),
        rng: rng.clone(),
        instant_commits: durable_object,
    };
    let host = VirtualHost {
        clock: clock.clone(),
        seed,
        gathers: durable_object,
    };
    let mut pool = LocalPool::new();
    // A segment cache far smaller than the backlog: commands load segments from the store while they
    // hold the gate, so others queue behind them.
    let config = BrokerConfig {
        default_subscription_new: false,
        cache_bytes: 2 * 1024,
        ..BrokerConfig::default()
    };
    let opened: Rc<RefCell<Option<SharedEngine>>> = Rc::default();
    {
        let opened = opened.clone();
        pool.spawner()
            .spawn_local(async move {
                let engine = Engine::open(store, host, config).await.expect("open");
                engine
                    .configure(ConfigureRequest {
                        queue: QUEUE.into(),
                        options: OptionsPatch {
                            lease_time_s: Some((LEASE_MS / 1000) as u64),
                            retry_limit: Some(1_000),
                            retry_delay_ms: Some(RETRY_DELAY_MS as u64),
                            ..Default::default()
                        },
                        ..Default::default()
                    })
                    .await
                    .expect("configure");
                *opened.borrow_mut() = Some(Rc::new(engine));
            })
            .unwrap();
    }
    while opened.borrow().is_none() {
        pool.run_until_stalled();
        if opened.borrow().is_none() && !clock.advance() {
            return Err("the open waits on nothing".into());
        }
    }
    let engine = opened.borrow_mut().take().unwrap();
    Ok((pool, clock, engine, rng))
}

/// Runs one seed; `Err` names what went wrong.
fn run_concurrent(seed: u64) -> Result<Counts, String> {
    let (mut pool, clock, engine, rng) = open(seed)?;
    let host_gathers = as_on_durable_objects(seed);
    let world = Rc::new(RefCell::new(World {
        producers_left: PRODUCERS,
        ..World::default()
    }));
    let spawner = pool.spawner();
    let tasks = Rc::new(Cell::new(0usize));
    let spawn = |f: LocalBoxFuture<'static, ()>| {
        let tasks = tasks.clone();
        tasks.set(tasks.get() + 1);
        spawner
            .spawn_local(async move {
                f.await;
                tasks.set(tasks.get() - 1);
            })
            .unwrap();
    };
    let cx = Ctx {
        engine: engine.clone(),
        clock: clock.clone(),
        world: world.clone(),
        rng: rng.clone(),
    };
    for id in 0..PRODUCERS {
        spawn(Box::pin(producer(id, cx.clone())));
    }
    for group in GROUPS {
        for idx in 0..CONSUMERS_PER_GROUP {
            spawn(Box::pin(consumer(group, idx, cx.clone())));
        }
    }
    loop {
        pool.run_until_stalled();
        engine
            .read(|b, _| b.check_invariants())
            .map_err(|e| format!("broken invariant at {} ms: {e}", clock.now.get() - T0))?;
        if let Some(f) = world.borrow().failures.first() {
            return Err(format!("at {} ms: {f}", clock.now.get() - T0));
        }
        if tasks.get() == 0 {
            break;
        }
        if !clock.advance() {
            return Err(format!(
                "{} tasks wait on nothing at {} ms (a lost wakeup)",
                tasks.get(),
                clock.now.get() - T0
            ));
        }
        if clock.now.get() - T0 > TIME_LIMIT_MS {
            return Err(format!("not done after {TIME_LIMIT_MS} virtual ms"));
        }
    }
    let w = world.borrow();
    // The gate serves first come, first served: of two pushes to one partition, the one that asked first
    // was applied first.
    let mut order = w.push_order.clone();
    order.sort();
    for pair in order.windows(2) {
        if pair[0].0 == pair[1].0 && pair[0].2 > pair[1].2 {
            return Err(format!(
                "push {} asked for the gate before push {} on {} but got offset {} after {}",
                pair[0].1, pair[1].1, pair[0].0, pair[0].2, pair[1].2
            ));
        }
    }
    for group in GROUPS {
        let missing: Vec<_> = w
            .pushed
            .iter()
            .filter(|(p, t)| !w.committed.contains_key(&(group, p.clone(), t.clone())))
            .collect();
        if let Some(m) = missing.first() {
            return Err(format!(
                "{group} never committed {m:?} ({} missing)",
                missing.len()
            ));
        }
    }
    // Commits take no time on these seeds: only gathering makes commands share one.
    let gathered = host_gathers && engine.counters().shared > 0;
    if host_gathers && !gathered {
        return Err(format!(
            "{} commits, none shared: gathering grouped nothing",
            engine.counters().commits
        ));
    }
    Ok(Counts {
        gathered_seeds: u64::from(gathered),
        messages: w.pushed.len() as u64,
        late_acks: w.late_acks,
        retries: w.retries,
        empty_polls: w.empty_polls,
        woken_deliveries: w.woken_deliveries,
        bursts: w.bursts,
    })
}

/// What a run exercised.
#[derive(Debug, Default)]
struct Counts {
    /// Seeds whose host gathered, all of which shared commits.
    gathered_seeds: u64,
    messages: u64,
    late_acks: u64,
    retries: u64,
    empty_polls: u64,
    woken_deliveries: u64,
    bursts: u64,
}

#[test]
fn concurrent_long_polls_gate_and_waiters_on_a_virtual_clock() {
    let seeds = super::seed_range(20);
    let mut total = Counts::default();
    for seed in seeds.clone() {
        let c = run_concurrent(seed).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        total.messages += c.messages;
        total.late_acks += c.late_acks;
        total.retries += c.retries;
        total.empty_polls += c.empty_polls;
        total.woken_deliveries += c.woken_deliveries;
        total.bursts += c.bursts;
        total.gathered_seeds += c.gathered_seeds;
    }
    println!("seeds {seeds:?}: {total:?}");
    // The checks that could pass over nothing had something to check.
    assert!(
        total.late_acks > 0
            && total.retries > 0
            && total.empty_polls > 0
            && total.woken_deliveries > 0
            && total.bursts > 0
            && (seeds.end - seeds.start < 2 || total.gathered_seeds > 0),
        "{total:?}"
    );
}

/// A long-poll in a quiet broker (no other command, so no commit wakes it) is woken by the broker's
/// timers: at the end of a retry hold (after a `failed` ack), and at the end of a lease its holder never
/// acked.
#[test]
fn quiet_long_polls_are_woken_by_timers() {
    let (mut pool, clock, engine, _) = open(1).expect("open");
    let outcome: Rc<RefCell<Option<Result<(), String>>>> = Rc::default();
    let done = outcome.clone();
    let c = clock.clone();
    pool.spawner()
        .spawn_local(async move {
            let result = async {
                let push = PushItem::new(QUEUE, json!({ "n": 1 }));
                engine.push(vec![push]).await.map_err(|e| e.to_string())?;
                let pop = |wait: Option<u64>| engine.pop(PopRequest::queue(QUEUE), wait);
                let first = pop(None).await.map_err(|e| e.to_string())?;
                let m = first.messages.first().ok_or("nothing delivered")?;
                let retry = AckItem::new(&m.transaction_id, &m.partition_id, AckStatus::Failed)
                    .with_lease(&first.lease_id);
                // The hold starts when the ack is applied: between its sending and its answer.
                let sent = c.now.get();
                engine
                    .ack(None, vec![retry])
                    .await
                    .map_err(|e| e.to_string())?;
                let answered = c.now.get();
                let again = pop(Some(WAIT_MS)).await.map_err(|e| e.to_string())?;
                let now = c.now.get();
                if again.messages.is_empty()
                    || now < sent + RETRY_DELAY_MS
                    || now > answered + RETRY_DELAY_MS + DELIVERY_BOUND_MS
                {
                    return Err(format!(
                        "after a retry hold: {} messages, {} ms after the failed ack",
                        again.messages.len(),
                        now - sent
                    ));
                }
                // The consumer crashes: the lease ends unacked, and a parked consumer gets the message.
                let expires = engine
                    .read(|b, now| b.queue_view(now, QUEUE))
                    .and_then(|q| q.partitions.into_iter().next())
                    .and_then(|p| p.lanes.into_iter().next())
                    .and_then(|l| l.lease_expires_at_ms)
                    .ok_or("no lease after the second delivery")?;
                let third = pop(Some(WAIT_MS)).await.map_err(|e| e.to_string())?;
                let waited = c.now.get() - expires;
                if third.messages.is_empty() || !(0..=DELIVERY_BOUND_MS).contains(&waited) {
                    return Err(format!(
                        "after a lease ended: {} messages, {waited} ms after it ended",
                        third.messages.len()
                    ));
                }
                Ok(())
            }
            .await;
            *done.borrow_mut() = Some(result);
        })
        .unwrap();
    while outcome.borrow().is_none() {
        pool.run_until_stalled();
        if outcome.borrow().is_none() && !clock.advance() {
            panic!("the long-poll waits on nothing (a lost wakeup)");
        }
    }
    let result = outcome.borrow_mut().take().unwrap();
    result.unwrap();
}

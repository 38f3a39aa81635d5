//! Shared test harness: a core broker driven with an explicit clock, and a restart helper that
//! rebuilds the broker from the records it committed.
#![allow(dead_code)]

use queen_edge::core::api::*;
use queen_edge::core::{Broker, BrokerConfig};
use queen_edge::store::{ChangeSet, KeyRange, MemStore, Note, Record, Store, StoreError};
use serde_json::{json, Value};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

/// Start of test time: 2026-01-01T00:00:00Z.
pub const T0: i64 = 1_767_225_600_000;

/// An engine host for tests: a clock the test moves by hand (from [`T0`]), sleeps that end at once,
/// and entropy taken from the clock.
#[derive(Clone)]
pub struct TestHost {
    pub now: std::rc::Rc<std::cell::Cell<i64>>,
}

impl TestHost {
    /// A host whose clock reads [`T0`].
    pub fn new() -> Self {
        TestHost {
            now: std::rc::Rc::new(std::cell::Cell::new(T0)),
        }
    }
}

impl queen_edge::engine::Host for TestHost {
    fn now_ms(&self) -> i64 {
        self.now.get()
    }
    fn sleep(&self, _ms: u64) -> futures::future::LocalBoxFuture<'static, ()> {
        Box::pin(async {})
    }
    fn entropy(&self) -> u64 {
        self.now.get() as u64
    }
}

/// A broker, its committed records and a clock.
pub struct Harness {
    pub broker: Broker,
    pub now: i64,
    pub records: BTreeMap<String, Vec<u8>>,
    pub config: BrokerConfig,
    pub opens: u64,
}

impl Harness {
    /// A broker whose groups start from all retained messages unless told otherwise.
    pub fn new() -> Self {
        Self::with_config(BrokerConfig {
            default_subscription_new: false,
            ..BrokerConfig::default()
        })
    }

    pub fn with_config(config: BrokerConfig) -> Self {
        Harness {
            broker: Broker::new(config.clone(), 7),
            now: T0,
            records: BTreeMap::new(),
            config,
            opens: 0,
        }
    }

    /// Applies the pending change set to the record map (what the engine commits).
    pub fn commit(&mut self) -> ChangeSet {
        let changes = self.broker.take_changes();
        for k in changes.deletes() {
            self.records.remove(k);
        }
        for (k, v) in changes.puts() {
            self.records.insert(k.clone(), v.clone());
        }
        self.broker.take_woken_queues();
        changes
    }

    /// Rebuilds the broker from the committed records, as after a crash.
    pub fn restart(&mut self) {
        self.commit();
        let records: Vec<Record> = self
            .records
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        // A host gives fresh entropy at every open.
        self.opens += 1;
        self.broker = Broker::from_records(self.config.clone(), 99 + self.opens, records)
            .expect("records load");
    }

    pub fn advance(&mut self, ms: i64) {
        self.now += ms;
    }

    pub fn configure(&mut self, queue: &str, options: OptionsPatch) -> ConfigureReply {
        let r = self
            .broker
            .configure(
                self.now,
                ConfigureRequest {
                    queue: queue.into(),
                    namespace: None,
                    task: None,
                    options,
                },
            )
            .unwrap();
        self.commit();
        r
    }

    pub fn push_to(
        &mut self,
        queue: &str,
        partition: &str,
        payloads: Vec<Value>,
    ) -> Vec<PushResult> {
        let items = payloads
            .into_iter()
            .map(|p| PushItem {
                partition: partition.into(),
                ..PushItem::new(queue, p)
            })
            .collect();
        let r = self.broker.push(self.now, items).unwrap();
        self.commit();
        r
    }

    pub fn push_n(&mut self, queue: &str, n: usize) -> Vec<PushResult> {
        self.push_to(
            queue,
            DEFAULT_PARTITION,
            (0..n).map(|i| json!({ "n": i })).collect(),
        )
    }

    pub fn pop_with(&mut self, req: PopRequest) -> PopReply {
        let r = self.broker.pop(self.now, &req).unwrap();
        self.commit();
        r
    }

    pub fn pop(&mut self, queue: &str, group: Option<&str>, batch: u32) -> PopReply {
        let mut req = PopRequest::queue(queue);
        req.group = group.map(str::to_string);
        req.batch = Some(batch);
        self.pop_with(req)
    }

    pub fn ack(&mut self, group: Option<&str>, items: Vec<AckItem>) -> Vec<AckResult> {
        let r = self.broker.ack(self.now, group, &items);
        self.commit();
        r
    }

    /// Acks the delivered messages with one status each (same order), fenced by their lease.
    pub fn ack_msgs(
        &mut self,
        reply: &PopReply,
        statuses: &[(usize, AckStatus)],
    ) -> Vec<AckResult> {
        let items = statuses
            .iter()
            .map(|(i, s)| {
                let m = &reply.messages[*i];
                AckItem::new(&m.transaction_id, &m.partition_id, s.clone()).with_lease(&m.lease_id)
            })
            .collect();
        let group = Some(reply.consumer_group.as_str()).filter(|g| *g != QUEUE_MODE_GROUP);
        self.ack(group, items)
    }

    pub fn lane(&self, queue: &str, group: &str) -> LaneView {
        let q = self
            .broker
            .queue_view(self.now, queue)
            .expect("queue exists");
        q.partitions[0]
            .lanes
            .iter()
            .find(|l| l.consumer_group == group)
            .cloned()
            .unwrap_or_else(|| panic!("no lane for {group}"))
    }

    pub fn dlq(&self, queue: &str) -> Vec<DeadLetterView> {
        self.broker.dead_letters(&DlqQuery {
            queue: Some(queue.into()),
            limit: 100,
            ..Default::default()
        })
    }
}

/// Offsets of a pop reply.
pub fn offsets(reply: &PopReply) -> Vec<u64> {
    reply.messages.iter().map(|m| m.offset).collect()
}

#[allow(unused_imports)]
pub use AckStatus::{Completed as C, Dlq as D, Failed as F, Retry as R};

/// Pending once, then ready: a commit that takes a moment, as IndexedDB's do, so commands apply while it
/// is in flight.
pub struct YieldOnce(pub bool);

impl std::future::Future for YieldOnce {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            std::task::Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    }
}

/// Every message of a pop reply acked as completed, under the reply's lease.
pub fn completed_items(reply: &PopReply) -> Vec<AckItem> {
    reply
        .messages
        .iter()
        .map(|m| {
            AckItem::new(&m.transaction_id, &m.partition_id, AckStatus::Completed)
                .with_lease(&reply.lease_id)
        })
        .collect()
}

/// A `MemStore` whose commits yield `yields` times before they apply (so commands apply while a commit is in
/// flight, as with IndexedDB), and that fails the commits it is told to: by number (counted from 1), the next
/// one, or the next one that carries a note (a recorded answer). Clones share the store and the switches.
#[derive(Clone)]
pub struct SlowStore {
    pub inner: MemStore,
    /// Commits asked of the store so far, failed ones included.
    pub commits: Rc<Cell<u32>>,
    /// Set: the next commit that carries a note fails (and clears it).
    pub fail_noted: Rc<Cell<bool>>,
    failing: Rc<RefCell<BTreeSet<u32>>>,
    yields: u32,
}

impl SlowStore {
    pub fn new(yields: u32) -> Self {
        SlowStore {
            inner: MemStore::new(),
            commits: Rc::new(Cell::new(0)),
            fail_noted: Rc::new(Cell::new(false)),
            failing: Rc::default(),
            yields,
        }
    }

    /// Commit number `n` (counted from 1 over the store's life) fails.
    pub fn fail_commit(&self, n: u32) {
        self.failing.borrow_mut().insert(n);
    }

    /// The next commit fails.
    pub fn fail_next(&self) {
        self.fail_commit(self.commits.get() + 1);
    }
}

impl Store for SlowStore {
    async fn scan(&self, prefix: &str) -> Result<Vec<Record>, StoreError> {
        self.inner.scan(prefix).await
    }
    async fn get(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        self.inner.get(keys).await
    }
    async fn first_keys(&self, ranges: &[KeyRange]) -> Result<Vec<Option<String>>, StoreError> {
        self.inner.first_keys(ranges).await
    }
    async fn commit(&self, changes: &ChangeSet) -> Result<(), StoreError> {
        self.commit_noted(changes, &[]).await
    }
    async fn commit_noted(&self, changes: &ChangeSet, notes: &[Note]) -> Result<(), StoreError> {
        for _ in 0..self.yields {
            YieldOnce(false).await;
        }
        let n = self.commits.get() + 1;
        self.commits.set(n);
        if self.failing.borrow().contains(&n)
            || (!notes.is_empty() && self.fail_noted.replace(false))
        {
            return Err(StoreError::other("injected failure of a commit"));
        }
        self.inner.commit_noted(changes, notes).await
    }
}

/// Turns retention on for `queue`: completed messages are deleted `seconds` after they were pushed.
pub fn configure_retention<S: Store, H: queen_edge::engine::Host>(
    engine: &queen_edge::engine::Engine<S, H>,
    queue: &str,
    seconds: u64,
) {
    futures::executor::block_on(engine.configure(ConfigureRequest {
        queue: queue.into(),
        namespace: None,
        task: None,
        options: OptionsPatch {
            retention_enabled: Some(true),
            retention_s: Some(seconds),
            ..Default::default()
        },
    }))
    .expect("configure");
}

/// A polling pop (no wait) of up to 100 messages of `queue`, by `group` or queue-wide, acknowledged as it
/// goes (`autoAck`): the payloads it got.
pub fn auto_ack_pop<S: Store, H: queen_edge::engine::Host>(
    engine: &queen_edge::engine::Engine<S, H>,
    queue: &str,
    group: Option<&str>,
) -> Vec<Value> {
    futures::executor::block_on(engine.pop(
        PopRequest {
            group: group.map(Into::into),
            batch: Some(100),
            auto_ack: true,
            ..PopRequest::queue(queue)
        },
        None,
    ))
    .unwrap()
    .messages
    .into_iter()
    .map(|m| m.payload.to_value().unwrap())
    .collect()
}

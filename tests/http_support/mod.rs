//! Shared harness for the HTTP wire tests: an engine over `MemStore` with a virtual clock, driven on a
//! single-threaded `LocalPool`.
//!
//! Time only moves when the test says so ([`Harness::advance`]) or when every task is parked on a sleep
//! ([`Harness::send`] then jumps to the earliest sleeper). So a long-poll that really waits 30 s takes no
//! wall time, and the test can check exactly when it answered.
//!
//! With `QE_REPLY_TRANSCRIPT=PREFIX` set, every answer [`Harness::wait`] returns (so every
//! [`Harness::send`] and `call`) is appended, with its request, to the file `PREFIX.TEST` (TEST: the
//! running test's name), so the replies of two builds can be compared byte for byte.

#![allow(dead_code)]

use futures::channel::oneshot;
use futures::executor::LocalPool;
use futures::future::LocalBoxFuture;
use futures::task::LocalSpawnExt;
use queen_edge::core::BrokerConfig;
use queen_edge::engine::{Engine, Host};
use queen_edge::http::{handle, HttpConfig, HttpRequest, HttpResponse};
use queen_edge::store::{MemStore, Record, Store};
use serde_json::Value;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// 2024-05-01T12:00:00.000Z.
pub const T0: i64 = 1_714_564_800_000;

#[derive(Default)]
struct Clock {
    now: Cell<i64>,
    sleepers: RefCell<Vec<(i64, oneshot::Sender<()>)>>,
}

/// A [`Host`] with a clock that moves only when the harness moves it.
#[derive(Clone)]
pub struct TestHost {
    clock: Rc<Clock>,
}

impl TestHost {
    pub fn new(now: i64) -> Self {
        let clock = Clock::default();
        clock.now.set(now);
        TestHost {
            clock: Rc::new(clock),
        }
    }

    /// The earliest deadline of a sleep someone still waits for.
    fn next_sleeper(&self) -> Option<i64> {
        let mut sleepers = self.clock.sleepers.borrow_mut();
        sleepers.retain(|(_, tx)| !tx.is_canceled());
        sleepers.iter().map(|(t, _)| *t).min()
    }

    /// Moves the clock to `to` (never backwards) and wakes the sleeps due by then.
    fn set_now(&self, to: i64) {
        if to > self.clock.now.get() {
            self.clock.now.set(to);
        }
        let now = self.clock.now.get();
        let due: Vec<_> = {
            let mut sleepers = self.clock.sleepers.borrow_mut();
            let (due, keep) = std::mem::take(&mut *sleepers)
                .into_iter()
                .partition(|(t, _)| *t <= now);
            *sleepers = keep;
            due
        };
        for (_, tx) in due {
            let _ = tx.send(());
        }
    }
}

impl Host for TestHost {
    fn now_ms(&self) -> i64 {
        self.clock.now.get()
    }

    fn sleep(&self, ms: u64) -> LocalBoxFuture<'static, ()> {
        let (tx, rx) = oneshot::channel();
        let at = self.clock.now.get().saturating_add(ms as i64);
        self.clock.sleepers.borrow_mut().push((at, tx));
        Box::pin(async move {
            let _ = rx.await;
        })
    }

    fn entropy(&self) -> u64 {
        0x5EED_CAFE
    }
}

/// A response that may not have arrived yet, and the request it answers (for the transcript).
#[derive(Clone, Default)]
pub struct Pending(Rc<RefCell<Option<HttpResponse>>>, Rc<String>);

impl Pending {
    /// The response, if it arrived.
    pub fn get(&self) -> Option<HttpResponse> {
        self.0.borrow().clone()
    }
}

/// An engine, its store and clock, and an executor.
pub struct Harness {
    /// The engine under test.
    pub engine: Rc<Engine<MemStore, TestHost>>,
    /// Its store (clones share data).
    pub store: MemStore,
    /// Its clock.
    pub host: TestHost,
    /// The HTTP configuration handed to `handle`.
    pub config: Rc<HttpConfig>,
    pool: RefCell<LocalPool>,
}

impl Default for Harness {
    fn default() -> Self {
        Self::new()
    }
}

impl Harness {
    /// A fresh broker at [`T0`] with the default HTTP configuration.
    pub fn new() -> Self {
        Self::with_config(HttpConfig::default())
    }

    /// A fresh broker at [`T0`] with `config`.
    pub fn with_config(config: HttpConfig) -> Self {
        Self::with_broker_config(config, BrokerConfig::default())
    }

    /// A fresh broker at [`T0`] with both configurations.
    pub fn with_broker_config(config: HttpConfig, broker: BrokerConfig) -> Self {
        let store = MemStore::new();
        let host = TestHost::new(T0);
        let engine = futures::executor::block_on(Engine::open(store.clone(), host.clone(), broker))
            .expect("engine opens over an empty MemStore");
        Harness {
            engine: Rc::new(engine),
            store,
            host,
            config: Rc::new(config),
            pool: RefCell::new(LocalPool::new()),
        }
    }

    /// A broker over `store` (holding data already) with `broker`'s settings, at [`T0`] + `ms`.
    pub fn over(store: MemStore, broker: BrokerConfig, ms: i64) -> Self {
        let host = TestHost::new(T0 + ms);
        let engine = futures::executor::block_on(Engine::open(store.clone(), host.clone(), broker))
            .expect("engine opens over its MemStore");
        Harness {
            engine: Rc::new(engine),
            store,
            host,
            config: Rc::new(HttpConfig::default()),
            pool: RefCell::new(LocalPool::new()),
        }
    }

    /// The same store and clock opened again by a fresh engine with `config`: a restart, e.g. with
    /// another encryption key or none.
    pub fn restart(&self, config: HttpConfig) -> Harness {
        let engine = futures::executor::block_on(Engine::open(
            self.store.clone(),
            self.host.clone(),
            BrokerConfig::default(),
        ))
        .expect("engine reopens over its MemStore");
        Harness {
            engine: Rc::new(engine),
            store: self.store.clone(),
            host: self.host.clone(),
            config: Rc::new(config),
            pool: RefCell::new(LocalPool::new()),
        }
    }

    /// Current virtual time.
    pub fn now(&self) -> i64 {
        self.host.now_ms()
    }

    /// Starts a request without driving it.
    pub fn spawn(&self, request: HttpRequest) -> Pending {
        let line = format!(
            "{} {}?{} {}",
            request.method,
            request.path,
            request.query,
            String::from_utf8_lossy(&request.body)
        );
        let slot = Pending(Rc::default(), Rc::new(line));
        let out = slot.clone();
        let engine = self.engine.clone();
        let config = self.config.clone();
        self.pool
            .borrow()
            .spawner()
            .spawn_local(async move {
                let response = handle(&engine, &config, request).await;
                *out.0.borrow_mut() = Some(response);
            })
            .expect("the local pool accepts tasks");
        slot
    }

    /// Runs every task until all are parked.
    pub fn run_until_stalled(&self) {
        self.pool.borrow_mut().run_until_stalled();
    }

    /// Moves the clock forward by `ms`, waking sleeps in deadline order and running tasks between.
    pub fn advance(&self, ms: i64) {
        let target = self.now() + ms;
        self.run_until_stalled();
        while let Some(t) = self.host.next_sleeper().filter(|t| *t <= target) {
            self.host.set_now(t);
            self.run_until_stalled();
        }
        self.host.set_now(target);
        self.run_until_stalled();
    }

    /// Drives `pending` to completion, jumping the clock to the next sleeper whenever all tasks park.
    pub fn wait(&self, pending: &Pending) -> HttpResponse {
        loop {
            self.run_until_stalled();
            if let Some(r) = pending.get() {
                transcribe(pending, &r);
                return r;
            }
            let t = self
                .host
                .next_sleeper()
                .expect("request is stuck: nothing runnable and nobody sleeping");
            self.host.set_now(t);
        }
    }

    /// Sends a request and drives it to its answer.
    pub fn send(&self, request: HttpRequest) -> HttpResponse {
        let pending = self.spawn(request);
        self.wait(&pending)
    }

    /// Prepares the transaction `body` as part `part-1` of a transaction across shards (owner
    /// `owner`), as the coordinator's `POST /internal/prepare` would; returns the answer.
    #[cfg(feature = "twophase")]
    pub fn prepare_part(&self, body: Vec<u8>) -> HttpResponse {
        let request = HttpRequest::new("POST", "/internal/prepare").with_json(body);
        futures::executor::block_on(queen_edge::http::prepared::prepare(
            &self.engine,
            &self.config,
            &request,
            #[cfg(feature = "jwt")]
            &queen_edge::http::jwt::JwtOutcome::default(),
            "part-1",
            "owner",
        ))
    }

    /// Sends `method target` with an optional JSON body; returns the status and the JSON body
    /// (`Value::Null` when there is none).
    pub fn call(&self, method: &str, target: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = HttpRequest::new(method, target);
        if let Some(b) = body {
            request = request.with_json(serde_json::to_vec(&b).unwrap());
        }
        let response = self.send(request);
        (response.status, response_json(&response))
    }

    /// Sends raw bytes as the body.
    pub fn call_raw(&self, method: &str, target: &str, body: &[u8]) -> (u16, Value) {
        let response = self.send(HttpRequest::new(method, target).with_json(body.to_vec()));
        (response.status, response_json(&response))
    }

    /// Pops with `GET target` (which must answer 200) and returns its `messages`.
    pub fn pop_messages(&self, target: &str) -> Vec<Value> {
        let (status, body) = self.call("GET", target, None);
        assert_eq!(status, 200, "{body}");
        body["messages"].as_array().unwrap().clone()
    }

    /// Acks `messages` (as a pop returned them) with `status` in one `/ack/batch` for `group`, which
    /// must answer 200; returns its body.
    pub fn ack_batch(&self, messages: &[Value], status: &str, group: Option<&str>) -> Value {
        let acks: Vec<Value> = messages
            .iter()
            .map(|m| {
                serde_json::json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                       "leaseId": m["leaseId"], "status": status})
            })
            .collect();
        let (code, body) = self.call(
            "POST",
            "/api/v1/ack/batch",
            Some(serde_json::json!({"acknowledgments": acks, "consumerGroup": group})),
        );
        assert_eq!(code, 200, "{body}");
        body
    }

    /// Every record in the store (to check that a refused request changed nothing).
    pub fn snapshot(&self) -> Vec<Record> {
        futures::executor::block_on(self.store.scan("")).expect("MemStore scans")
    }
}

/// Appends `response` and its request to the transcript file, when `QE_REPLY_TRANSCRIPT` names one.
fn transcribe(pending: &Pending, response: &HttpResponse) {
    let Ok(prefix) = std::env::var("QE_REPLY_TRANSCRIPT") else {
        return;
    };
    let test = std::thread::current()
        .name()
        .unwrap_or("main")
        .replace("::", ".");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(format!("{prefix}.{test}"))
        .expect("the transcript file opens");
    let text = format!(
        "{}\n-> {} {:?} {}\n",
        pending.1,
        response.status,
        response.headers,
        String::from_utf8_lossy(&response.body)
    );
    std::io::Write::write_all(&mut file, text.as_bytes()).expect("the transcript is written");
}

/// The JSON body of a response, or `Null` for an empty body. Panics on a non-JSON body.
pub fn response_json(response: &HttpResponse) -> Value {
    if response.body.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(&response.body).unwrap_or_else(|e| {
        panic!(
            "status {} body is not JSON ({e}): {}",
            response.status,
            String::from_utf8_lossy(&response.body)
        )
    })
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` of `ms`.
pub fn iso_ms(ms: i64) -> String {
    let dt = time::OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000).unwrap();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        dt.year(),
        u8::from(dt.month()),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second(),
        ms.rem_euclid(1000)
    )
}

/// `YYYY-MM-DDTHH:MM:SS.ffffffZ` of `ms`.
pub fn iso_us(ms: i64) -> String {
    let s = iso_ms(ms);
    format!("{}000Z", &s[..s.len() - 1])
}

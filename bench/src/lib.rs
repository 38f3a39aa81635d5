//! The core benchmark: push and pop+ack throughput through the engine over the in-memory store, and
//! stored bytes per message, natively (`queen-bench`) and in wasm under node (`runBench`).
//!
//! It measures the broker's own work (core + change sets + the reference store), not a network or a
//! real disk: that is what the worker and browser benchmarks add.

use futures::executor::block_on;
use futures::future::LocalBoxFuture;
use queen_edge::core::api::*;
use queen_edge::core::BrokerConfig;
use queen_edge::engine::{Engine, Host};
use queen_edge::store::MemStore;
use serde_json::{json, Value};
use std::cell::Cell;
use std::rc::Rc;

/// A clock the benchmark advances by hand, so leases never expire mid-run.
#[derive(Clone)]
pub struct BenchHost {
    /// The clock, Unix ms; the benchmark moves it.
    pub now: Rc<Cell<i64>>,
    opens: Rc<Cell<u64>>,
}

impl BenchHost {
    /// A host whose clock reads `now_ms`.
    pub fn new(now_ms: i64) -> Self {
        BenchHost {
            now: Rc::new(Cell::new(now_ms)),
            opens: Rc::new(Cell::new(0)),
        }
    }
}

impl Host for BenchHost {
    fn now_ms(&self) -> i64 {
        self.now.get()
    }
    fn sleep(&self, _ms: u64) -> LocalBoxFuture<'static, ()> {
        Box::pin(async {})
    }
    fn entropy(&self) -> u64 {
        self.opens.set(self.opens.get() + 1);
        0x5EED ^ self.opens.get()
    }
}

/// A realistic event payload (~350 bytes of JSON).
pub fn realistic_payload(i: u64) -> Value {
    json!({
        "type": "order.created",
        "orderId": format!("ord-{:08}", i),
        "customer": { "id": format!("cus-{:06}", i % 5000), "tier": "gold", "country": "DE" },
        "items": [
            { "sku": "SKU-1042", "qty": 2, "price": 19.99 },
            { "sku": "SKU-2210", "qty": 1, "price": 5.49 }
        ],
        "total": 45.47,
        "currency": "EUR",
        "createdAt": "2026-11-30T10:15:00.000Z",
        "source": "web-checkout"
    })
}

/// One measured scenario.
#[derive(Debug, Clone)]
pub struct Row {
    /// Messages per push call and per pop.
    pub batch: u32,
    /// Partitions the messages are spread over.
    pub partitions: u32,
    /// Messages moved.
    pub messages: u64,
    /// Push messages per second.
    pub push_per_s: f64,
    /// Pop+ack messages per second.
    pub pop_ack_per_s: f64,
    /// Store rows written per message by pushes.
    pub push_rows_per_msg: f64,
    /// Store rows written per message by pops and acks together.
    pub pop_ack_rows_per_msg: f64,
}

/// Stored size of messages at one batch size.
#[derive(Debug, Clone)]
pub struct SizeRow {
    /// Messages per segment.
    pub batch: u32,
    /// Bytes of JSON per message before compression (message fields and payload).
    pub raw_bytes_per_msg: f64,
    /// Bytes stored per message (segment row, compressed, plus its key).
    pub stored_bytes_per_msg: f64,
}

fn open() -> (Engine<MemStore, BenchHost>, MemStore, BenchHost) {
    let host = BenchHost::new(1_767_225_600_000);
    let store = MemStore::new();
    let engine = block_on(Engine::open(
        store.clone(),
        host.clone(),
        BrokerConfig::default(),
    ))
    .expect("open");
    (engine, store, host)
}

/// Runs one scenario; `clock_ms` reads wall time (native `Instant`, or `performance.now()` in wasm).
pub fn run_scenario(batch: u32, partitions: u32, messages: u64, clock_ms: &dyn Fn() -> f64) -> Row {
    let (engine, _store, host) = open();
    block_on(engine.configure(ConfigureRequest {
        queue: "bench".into(),
        ..Default::default()
    }))
    .expect("configure");
    let calls = messages / batch as u64;
    let names: Vec<String> = (0..partitions).map(|p| format!("p{p}")).collect();
    let before = engine.counters();
    let start = clock_ms();
    let mut n = 0u64;
    for call in 0..calls {
        let partition = &names[(call % partitions as u64) as usize];
        let items = (0..batch)
            .map(|_| {
                n += 1;
                PushItem {
                    partition: partition.clone(),
                    ..PushItem::new("bench", realistic_payload(n))
                }
            })
            .collect();
        block_on(engine.push(items)).expect("push");
        host.now.set(host.now.get() + 1);
    }
    let push_s = (clock_ms() - start) / 1000.0;
    let after_push = engine.counters();

    let start = clock_ms();
    let mut consumed = 0u64;
    while consumed < n {
        let mut req = PopRequest::queue("bench");
        req.batch = Some(batch);
        let reply = block_on(engine.pop(req, None)).expect("pop");
        if reply.messages.is_empty() {
            break;
        }
        let items = reply
            .messages
            .iter()
            .map(|m| {
                AckItem::new(&m.transaction_id, &m.partition_id, AckStatus::Completed)
                    .with_lease(&m.lease_id)
            })
            .collect();
        let results = block_on(engine.ack(None, items)).expect("ack");
        debug_assert!(results.iter().all(|r| r.success));
        consumed += reply.messages.len() as u64;
    }
    let pop_s = (clock_ms() - start) / 1000.0;
    let after_pop = engine.counters();
    assert_eq!(consumed, n, "every pushed message is consumed once");
    Row {
        batch,
        partitions,
        messages: n,
        push_per_s: n as f64 / push_s.max(1e-9),
        pop_ack_per_s: consumed as f64 / pop_s.max(1e-9),
        push_rows_per_msg: (after_push.rows_written - before.rows_written) as f64 / n as f64,
        pop_ack_rows_per_msg: (after_pop.rows_written - after_push.rows_written) as f64 / n as f64,
    }
}

/// Stored bytes per message for the realistic payload at a batch size.
pub fn measure_size(batch: u32) -> SizeRow {
    let (engine, store, _host) = open();
    let items: Vec<PushItem> = (0..batch as u64)
        .map(|i| PushItem::new("size", realistic_payload(i)))
        .collect();
    let raw: usize = items
        .iter()
        .map(|i| serde_json::to_vec(&i.payload).map(|v| v.len()).unwrap_or(0))
        .sum();
    // Raw also counts the per-message fields a segment keeps (ids, transaction id, time, offset).
    let fields_per_msg = 36 + 36 + 13 + 8;
    let before = store.stored_bytes();
    block_on(engine.push(items)).expect("push");
    let segment_bytes: usize = block_on(queen_edge::store::Store::scan(&store, "s/"))
        .expect("scan")
        .iter()
        .map(|(k, v)| k.len() + v.len())
        .sum();
    let _ = before;
    SizeRow {
        batch,
        raw_bytes_per_msg: (raw as f64 / batch as f64) + fields_per_msg as f64,
        stored_bytes_per_msg: segment_bytes as f64 / batch as f64,
    }
}

/// The scenarios of the issue: batch 1, 10, 100 on 1 and 10,000 partitions.
pub fn scenarios(quick: bool) -> Vec<(u32, u32, u64)> {
    let scale = if quick { 10 } else { 1 };
    vec![
        (1, 1, 20_000 / scale),
        (10, 1, 100_000 / scale),
        (100, 1, 200_000 / scale),
        (1, 10_000, 20_000 / scale),
        (10, 10_000, 100_000 / scale),
        (100, 10_000, 1_000_000 / scale),
    ]
}

/// Runs everything and renders a Markdown report.
pub fn run_all(label: &str, quick: bool, clock_ms: &dyn Fn() -> f64) -> String {
    let mut out = format!(
        "#### {label}\n\n| batch | partitions | messages | push msg/s | pop+ack msg/s | rows/msg push | rows/msg pop+ack |\n|---|---|---|---|---|---|---|\n"
    );
    for (batch, partitions, messages) in scenarios(quick) {
        let r = run_scenario(batch, partitions, messages, clock_ms);
        out.push_str(&format!(
            "| {} | {} | {} | {:.0} | {:.0} | {:.2} | {:.2} |\n",
            r.batch,
            r.partitions,
            r.messages,
            r.push_per_s,
            r.pop_ack_per_s,
            r.push_rows_per_msg,
            r.pop_ack_rows_per_msg
        ));
    }
    out.push_str("\n| batch per segment | bytes/msg before compression | bytes/msg stored |\n|---|---|---|\n");
    for batch in [1, 10, 100] {
        let s = measure_size(batch);
        out.push_str(&format!(
            "| {} | {:.0} | {:.0} |\n",
            s.batch, s.raw_bytes_per_msg, s.stored_bytes_per_msg
        ));
    }
    out
}

/// wasm entry point for node: runs the benchmark and returns the Markdown table.
#[cfg(target_arch = "wasm32")]
#[wasm_bindgen::prelude::wasm_bindgen(js_name = runBench)]
pub fn run_bench(quick: bool) -> String {
    let clock = || js_sys::Date::now();
    run_all("wasm32 under node", quick, &clock)
}

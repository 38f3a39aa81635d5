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

mod http_run;
pub use http_run::{run_http_scenario, HttpRow};

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

/// The payloads the benchmark pushes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadKind {
    /// [`realistic_payload`]: a ~350-byte order event.
    Order,
    /// [`small_payload`]: exactly 64 bytes of JSON text.
    Small,
}

impl PayloadKind {
    /// How the report names it.
    pub fn label(self) -> &'static str {
        match self {
            PayloadKind::Order => "~350 B",
            PayloadKind::Small => "64 B",
        }
    }

    /// Message `i`'s payload.
    pub fn payload(self, i: u64) -> Payload {
        match self {
            PayloadKind::Order => realistic_payload(i).into(),
            PayloadKind::Small => small_payload(i),
        }
    }
}

/// A 64-byte payload: `{"type":"order.created","id":"ord-00000042","total":45.47,"n":1}` with the
/// number padded so every message's JSON text is exactly 64 bytes.
pub fn small_payload(i: u64) -> Payload {
    let text = format!(
        "{{\"type\":\"order.created\",\"id\":\"ord-{:08}\",\"total\":45.47,\"n\":{:1}}}",
        i % 100_000_000,
        i % 10
    );
    debug_assert_eq!(text.len(), 64, "{text}");
    Payload::from_json(text).expect("valid JSON")
}

/// One measured scenario.
#[derive(Debug, Clone)]
pub struct Row {
    /// The payload pushed.
    pub payload: PayloadKind,
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
    /// The payload pushed.
    pub payload: PayloadKind,
    /// Messages per segment.
    pub batch: u32,
    /// Bytes of JSON per message before compression (message fields and payload).
    pub raw_bytes_per_msg: f64,
    /// Bytes stored per message right after the push (segment row as pushed, plus its key).
    pub stored_bytes_per_msg: f64,
    /// Bytes stored per message once maintenance compressed the segment (what stays stored).
    pub compressed_bytes_per_msg: f64,
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
///
/// Only the engine's calls are timed: each push call's items (what the HTTP layer would have parsed) are
/// built before its clock starts, and each ack call's items between the pop and the ack, off the clock.
/// `phase` is told when the timed engine calls of the push phase (`"push"`) and of the pop+ack phase
/// (`"pop+ack"`) start, and when the untimed building of their items does (`"prep"`): the profiler
/// names the thread after it, so the benchmark's own work is not counted in either phase.
pub fn run_scenario(
    kind: PayloadKind,
    batch: u32,
    partitions: u32,
    messages: u64,
    clock_ms: &dyn Fn() -> f64,
    phase: &dyn Fn(&str),
) -> Row {
    let (engine, _store, host) = open();
    block_on(engine.configure(ConfigureRequest {
        queue: "bench".into(),
        ..Default::default()
    }))
    .expect("configure");
    let calls = messages / batch as u64;
    let names: Vec<String> = (0..partitions).map(|p| format!("p{p}")).collect();
    let before = engine.counters();
    let mut push_ms = 0.0;
    let mut n = 0u64;
    for call in 0..calls {
        phase("prep");
        let partition = &names[(call % partitions as u64) as usize];
        let items: Vec<PushItem> = (0..batch)
            .map(|_| {
                n += 1;
                PushItem {
                    partition: partition.clone().into(),
                    ..PushItem::new("bench", kind.payload(n))
                }
            })
            .collect();
        phase("push");
        let start = clock_ms();
        block_on(engine.push(items)).expect("push");
        push_ms += clock_ms() - start;
        host.now.set(host.now.get() + 1);
    }
    let after_push = engine.counters();

    let mut pop_ms = 0.0;
    let mut consumed = 0u64;
    while consumed < n {
        let mut req = PopRequest::queue("bench");
        req.batch = Some(batch);
        phase("pop+ack");
        let start = clock_ms();
        let reply = block_on(engine.pop(req, None)).expect("pop");
        pop_ms += clock_ms() - start;
        if reply.messages.is_empty() {
            break;
        }
        phase("prep");
        let items = reply
            .messages
            .iter()
            .map(|m| {
                AckItem::new(&m.transaction_id, &m.partition_id, AckStatus::Completed)
                    .with_lease(&m.lease_id)
            })
            .collect();
        phase("pop+ack");
        let start = clock_ms();
        let results = block_on(engine.ack(None, items)).expect("ack");
        pop_ms += clock_ms() - start;
        debug_assert!(results.iter().all(|r| r.success));
        consumed += reply.messages.len() as u64;
    }
    let after_pop = engine.counters();
    assert_eq!(consumed, n, "every pushed message is consumed once");
    Row {
        payload: kind,
        batch,
        partitions,
        messages: n,
        push_per_s: n as f64 / (push_ms / 1000.0).max(1e-9),
        pop_ack_per_s: consumed as f64 / (pop_ms / 1000.0).max(1e-9),
        push_rows_per_msg: (after_push.rows_written - before.rows_written) as f64 / n as f64,
        pop_ack_rows_per_msg: (after_pop.rows_written - after_push.rows_written) as f64 / n as f64,
    }
}

/// Stored bytes per message for a payload at a batch size.
pub fn measure_size(kind: PayloadKind, batch: u32) -> SizeRow {
    let (engine, store, host) = open();
    let items: Vec<PushItem> = (0..batch as u64)
        .map(|i| PushItem::new("size", kind.payload(i)))
        .collect();
    let raw: usize = items
        .iter()
        .map(|i| serde_json::to_vec(&i.payload).map(|v| v.len()).unwrap_or(0))
        .sum();
    // Raw also counts the per-message fields a segment keeps (ids, transaction id, time, offset).
    let fields_per_msg = 36 + 36 + 13 + 8;
    let before = store.stored_bytes();
    block_on(engine.push(items)).expect("push");
    let segment_bytes = || -> usize {
        block_on(queen_edge::store::Store::scan(&store, "s/"))
            .expect("scan")
            .iter()
            .map(|(k, v)| k.len() + v.len())
            .sum()
    };
    let pushed = segment_bytes();
    // Maintenance compresses segments that waited long enough (builds with `deflate`).
    host.now
        .set(host.now.get() + queen_edge::core::compaction::COMPRESS_AFTER_MS + 1);
    block_on(engine.maintain()).expect("maintain");
    let kept = segment_bytes();
    let _ = before;
    SizeRow {
        payload: kind,
        batch,
        raw_bytes_per_msg: (raw as f64 / batch as f64) + fields_per_msg as f64,
        stored_bytes_per_msg: pushed as f64 / batch as f64,
        compressed_bytes_per_msg: kept as f64 / batch as f64,
    }
}

/// What encoding one segment of `batch` messages costs: JSON text alone, and DEFLATE at `level`.
#[derive(Debug, Clone)]
pub struct EncodingRow {
    /// The payload of every message.
    pub payload: PayloadKind,
    /// `None`: JSON text only (format 2); `Some(level)`: DEFLATE at that level (format 1).
    pub level: Option<u8>,
    /// Microseconds of encoding per message.
    pub us_per_msg: f64,
    /// Bytes per message of the encoded segment.
    pub bytes_per_msg: f64,
}

/// Encodes one segment of 100 messages (as a push batch stores them) many times at each level.
pub fn measure_encoding(kind: PayloadKind, clock_ms: &dyn Fn() -> f64) -> Vec<EncodingRow> {
    use queen_edge::core::segment::{self, StoredMessage};
    let batch: Vec<StoredMessage> = (0..100u64)
        .map(|i| StoredMessage {
            offset: 1_000 + i,
            id: format!("019a6f7e-8c2d-7{:03x}-9f3a-5c1e2b4d6a{:02x}", i, i % 256).into(),
            transaction_id: format!("019a6f7e-8c2d-7{:03x}-8e1b-3a9c7d5f1e{:02x}", i, i % 256)
                .into(),
            trace_id: None,
            producer_sub: None,
            created_at_ms: 1_767_225_600_000,
            payload: kind.payload(i),
        })
        .collect();
    let rounds = 200;
    let mut rows = Vec::new();
    for level in [None, Some(1u8), Some(6)] {
        let start = clock_ms();
        let mut bytes = 0;
        for _ in 0..rounds {
            bytes = match level {
                None => segment::encode_as(segment::SEGMENT_FORMAT_JSON, &batch).len(),
                Some(level) => segment::encode_deflate_at(level, &batch).len(),
            };
        }
        let per_msg_ms = (clock_ms() - start) / (rounds * batch.len()) as f64;
        rows.push(EncodingRow {
            payload: kind,
            level,
            us_per_msg: per_msg_ms * 1000.0,
            bytes_per_msg: bytes as f64 / batch.len() as f64,
        });
    }
    rows
}

/// The scenarios: the order event at batch 1, 10, 100 on 1 and 10,000 partitions (issue 2), and the
/// 64-byte payload at batch 1, 10, 100 on 1, 10 and 10,000 partitions (issue 11).
pub fn scenarios(quick: bool) -> Vec<(PayloadKind, u32, u32, u64)> {
    let scale = if quick { 10 } else { 1 };
    let order = [
        (1, 1, 20_000),
        (10, 1, 100_000),
        (100, 1, 200_000),
        (1, 10_000, 20_000),
        (10, 10_000, 100_000),
        (100, 10_000, 1_000_000),
    ];
    let small = [
        (1, 1, 50_000),
        (10, 1, 200_000),
        (100, 1, 1_000_000),
        (1, 10, 50_000),
        (10, 10, 200_000),
        (100, 10, 1_000_000),
        (1, 10_000, 50_000),
        (10, 10_000, 200_000),
        (100, 10_000, 1_000_000),
    ];
    let with = |kind, list: &[(u32, u32, u64)]| {
        list.iter()
            .map(move |&(b, p, m)| (kind, b, p, m / scale))
            .collect::<Vec<_>>()
    };
    let mut all = with(PayloadKind::Order, &order);
    all.extend(with(PayloadKind::Small, &small));
    all
}

/// The median of `values` (the mean of the middle two for an even count); `values` is not empty.
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

/// msg/s as thousands or millions, for the range columns (`834k`, `1.42M`).
fn short_rate(per_s: f64) -> String {
    if per_s >= 1e6 {
        format!("{:.2}M", per_s / 1e6)
    } else {
        format!("{:.0}k", per_s / 1e3)
    }
}

/// Runs everything and renders a Markdown report. Each throughput scenario runs `rounds` times (the
/// whole list once per round, so that a slow spell of a shared machine falls on several scenarios rather
/// than on every round of one); the table shows each scenario's median msg/s and, with more than one
/// round, the lowest and highest.
pub fn run_all(label: &str, quick: bool, rounds: u32, clock_ms: &dyn Fn() -> f64) -> String {
    let rounds = rounds.max(1);
    let list = scenarios(quick);
    let mut runs: Vec<Vec<Row>> = vec![Vec::new(); list.len()];
    for _ in 0..rounds {
        for (i, &(kind, batch, partitions, messages)) in list.iter().enumerate() {
            runs[i].push(run_scenario(
                kind,
                batch,
                partitions,
                messages,
                clock_ms,
                &|_| {},
            ));
        }
    }
    let ranges = rounds > 1;
    let mut out = if ranges {
        format!(
            "#### {label}\n\nMedian of {rounds} rounds; the range columns give the lowest and highest round.\n\n| payload | batch | partitions | messages | push msg/s | pop+ack msg/s | push range | pop+ack range | rows/msg push | rows/msg pop+ack |\n|---|---|---|---|---|---|---|---|---|---|\n"
        )
    } else {
        format!(
            "#### {label}\n\nOne round.\n\n| payload | batch | partitions | messages | push msg/s | pop+ack msg/s | rows/msg push | rows/msg pop+ack |\n|---|---|---|---|---|---|---|---|\n"
        )
    };
    for rows in &runs {
        // What every round of a scenario shares (its parameters, and its rows per message).
        let first = &rows[0];
        let mut push: Vec<f64> = rows.iter().map(|r| r.push_per_s).collect();
        let mut pop: Vec<f64> = rows.iter().map(|r| r.pop_ack_per_s).collect();
        let (push_median, pop_median) = (median(&mut push), median(&mut pop));
        let range = |sorted: &[f64]| {
            format!(
                "{} to {}",
                short_rate(sorted[0]),
                short_rate(sorted[sorted.len() - 1])
            )
        };
        let range_cells = if ranges {
            format!(" {} | {} |", range(&push), range(&pop))
        } else {
            String::new()
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {:.0} | {:.0} |{range_cells} {:.2} | {:.2} |\n",
            first.payload.label(),
            first.batch,
            first.partitions,
            first.messages,
            push_median,
            pop_median,
            first.push_rows_per_msg,
            first.pop_ack_rows_per_msg
        ));
    }
    out.push_str("\n| payload | batch per segment | bytes/msg before compression | bytes/msg stored by the push | bytes/msg stored after maintenance |\n|---|---|---|---|---|\n");
    for kind in [PayloadKind::Order, PayloadKind::Small] {
        for batch in [1, 10, 100] {
            let s = measure_size(kind, batch);
            out.push_str(&format!(
                "| {} | {} | {:.0} | {:.0} | {:.0} |\n",
                kind.label(),
                s.batch,
                s.raw_bytes_per_msg,
                s.stored_bytes_per_msg,
                s.compressed_bytes_per_msg
            ));
        }
    }
    out.push_str("\n| payload | segment of 100 encoded as | µs/msg to encode | bytes/msg |\n|---|---|---|---|\n");
    for kind in [PayloadKind::Order, PayloadKind::Small] {
        for row in measure_encoding(kind, clock_ms) {
            let how = match row.level {
                None => "JSON text (format 2)".to_string(),
                Some(level) => format!("DEFLATE level {level} (format 1)"),
            };
            out.push_str(&format!(
                "| {} | {how} | {:.2} | {:.0} |\n",
                kind.label(),
                row.us_per_msg,
                row.bytes_per_msg
            ));
        }
    }
    out
}

/// wasm entry point for node: the profiled scenario alone (64-byte payloads, batch 100), timed by the
/// process's CPU time (`process.cpuUsage()`, user + system), so that other processes on a loaded machine
/// count less than in wall-clock figures. Returns `messages partitions push_msg_per_cpu_s
/// pop_ack_msg_per_cpu_s`.
#[cfg(target_arch = "wasm32")]
#[wasm_bindgen::prelude::wasm_bindgen(js_name = runScenarioCpu)]
pub fn run_scenario_cpu(messages: u32, partitions: u32) -> String {
    use wasm_bindgen::JsCast;
    let process =
        js_sys::Reflect::get(&js_sys::global(), &"process".into()).expect("node's process");
    let cpu_usage = js_sys::Reflect::get(&process, &"cpuUsage".into())
        .ok()
        .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
        .expect("process.cpuUsage");
    let clock = move || {
        let usage = cpu_usage.call0(&process).expect("cpuUsage");
        let field = |name: &str| {
            js_sys::Reflect::get(&usage, &name.into())
                .ok()
                .and_then(|v| v.as_f64())
                .unwrap_or(0.0)
        };
        (field("user") + field("system")) / 1000.0
    };
    let row = run_scenario(
        PayloadKind::Small,
        100,
        partitions,
        messages as u64,
        &clock,
        &|_| {},
    );
    format!(
        "{} {} {:.0} {:.0}",
        row.messages, row.partitions, row.push_per_s, row.pop_ack_per_s
    )
}

/// wasm entry point for node: runs the benchmark and returns the Markdown table.
#[cfg(target_arch = "wasm32")]
#[wasm_bindgen::prelude::wasm_bindgen(js_name = runBench)]
pub fn run_bench(quick: bool) -> String {
    use wasm_bindgen::JsCast;
    // `performance.now()` (sub-millisecond: each engine call is timed on its own), `Date.now()` where
    // there is none.
    let performance = js_sys::Reflect::get(&js_sys::global(), &"performance".into()).ok();
    let now = performance
        .as_ref()
        .and_then(|p| js_sys::Reflect::get(p, &"now".into()).ok())
        .and_then(|f| f.dyn_into::<js_sys::Function>().ok());
    let clock = move || match (&performance, &now) {
        (Some(p), Some(now)) => now
            .call0(p)
            .ok()
            .and_then(|v| v.as_f64())
            .unwrap_or_else(js_sys::Date::now),
        _ => js_sys::Date::now(),
    };
    run_all("wasm32 under node", quick, 1, &clock)
}

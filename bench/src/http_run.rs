//! The profiled scenario through the HTTP layer (`queen-bench --http-run`): the same pushes and
//! pop+acks as [`crate::run_scenario`], but each call is a request to `queen_edge::http::handle` with
//! the JSON body a client sends (as `bench/worker-ab.mjs` builds it), so the request readers and the
//! reply writers are timed with the engine. Bodies are built off the clock.
//!
//! Each request is sent by its own function ([`push_call`], [`pop_call`], [`ack_call`]), never inlined,
//! so an instruction count can be limited to one kind of call (`valgrind --tool=callgrind
//! --toggle-collect='*http_run::push_call*'`).

use crate::{open, PayloadKind};
use futures::executor::block_on;
use queen_edge::http::{handle, HttpConfig, HttpRequest, HttpResponse};
use queen_edge::store::MemStore;
use serde_json::Value;

type BenchEngine = queen_edge::engine::Engine<MemStore, crate::BenchHost>;

/// Sends one push request; it must be accepted.
#[inline(never)]
pub fn push_call(engine: &BenchEngine, config: &HttpConfig, request: HttpRequest) -> HttpResponse {
    let response = block_on(handle(engine, config, request));
    assert_eq!(response.status, 201, "push: {:?}", response.json());
    response
}

/// Sends one pop request.
#[inline(never)]
pub fn pop_call(engine: &BenchEngine, config: &HttpConfig, request: HttpRequest) -> HttpResponse {
    block_on(handle(engine, config, request))
}

/// Sends one ack request; it must succeed.
#[inline(never)]
pub fn ack_call(engine: &BenchEngine, config: &HttpConfig, request: HttpRequest) -> HttpResponse {
    let response = block_on(handle(engine, config, request));
    assert_eq!(response.status, 200, "ack: {:?}", response.json());
    response
}

/// Push and pop+ack time per message, in microseconds.
pub struct HttpRow {
    /// Messages pushed (and popped and acked).
    pub messages: u64,
    /// Push: microseconds per message.
    pub push_us: f64,
    /// Pop+ack: microseconds per message.
    pub pop_ack_us: f64,
}

/// A payload of `size` bytes of JSON text, `{"n":…,"pad":"xxx…"}`, as the worker benchmarks send.
fn padded_payload(size: usize, n: u64) -> String {
    let base = format!("{{\"n\":{n},\"pad\":\"\"}}").len();
    format!(
        "{{\"n\":{n},\"pad\":\"{}\"}}",
        "x".repeat(size.saturating_sub(base))
    )
}

/// Runs `messages` messages in batches of `batch` over `partitions` partitions with payloads of
/// `payload_bytes` (0: the core benchmark's 64-byte order payload), `phase` told as in
/// [`crate::run_scenario`].
pub fn run_http_scenario(
    payload_bytes: usize,
    batch: u32,
    partitions: u32,
    messages: u64,
    clock_ms: &dyn Fn() -> f64,
    phase: &dyn Fn(&str),
) -> HttpRow {
    let (engine, _store, host) = open();
    let config = HttpConfig::default();
    let calls = messages / batch as u64;
    let mut n = 0u64;
    let mut push_ms = 0.0;
    for call in 0..calls {
        phase("prep");
        let partition = format!("p{}", call % partitions as u64);
        let mut body = String::from("{\"items\":[");
        for k in 0..batch {
            n += 1;
            let payload = if payload_bytes == 0 {
                PayloadKind::Small.payload(n).get().to_string()
            } else {
                padded_payload(payload_bytes, n)
            };
            if k > 0 {
                body.push(',');
            }
            body.push_str(&format!(
                "{{\"queue\":\"bench\",\"partition\":\"{partition}\",\"transactionId\":\"bench-{n}\",\"payload\":{payload}}}"
            ));
        }
        body.push_str("]}");
        let request = HttpRequest::new("POST", "/api/v1/push").with_json(body);
        phase("push");
        let start = clock_ms();
        let response = push_call(&engine, &config, request);
        push_ms += clock_ms() - start;
        drop(response);
        host.now.set(host.now.get() + 1);
    }

    let mut pop_ms = 0.0;
    let mut consumed = 0u64;
    let pop_target = format!("/api/v1/pop/queue/bench?batch={batch}&wait=false");
    while consumed < n {
        phase("pop+ack");
        let start = clock_ms();
        let response = pop_call(&engine, &config, HttpRequest::new("GET", &pop_target));
        pop_ms += clock_ms() - start;
        if response.status != 200 {
            break;
        }
        phase("prep");
        // The pop's answer and the ack body's tree are dropped here, off the clock.
        let (body, count) = {
            let reply: Value = serde_json::from_slice(&response.body).expect("pop reply");
            let messages = reply["messages"].as_array().expect("messages");
            let acks: Vec<Value> = messages
                .iter()
                .map(|m| {
                    serde_json::json!({
                        "transactionId": m["transactionId"],
                        "partitionId": m["partitionId"],
                        "leaseId": m["leaseId"],
                        "status": "completed",
                    })
                })
                .collect();
            let body = serde_json::to_vec(&serde_json::json!({ "acknowledgments": acks }))
                .expect("ack body");
            (body, messages.len() as u64)
        };
        drop(response);
        let request = HttpRequest::new("POST", "/api/v1/ack/batch").with_json(body);
        phase("pop+ack");
        let start = clock_ms();
        let response = ack_call(&engine, &config, request);
        pop_ms += clock_ms() - start;
        drop(response);
        consumed += count;
    }
    assert_eq!(consumed, n, "every pushed message is consumed once");
    HttpRow {
        messages: n,
        push_us: push_ms * 1000.0 / n as f64,
        pop_ack_us: pop_ms * 1000.0 / consumed.max(1) as f64,
    }
}

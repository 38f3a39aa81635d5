//! `queen-capacity`: what a large backlog costs a broker (issue 12), printed as Markdown.
//!
//! For each target of stored bytes it pushes ~1 KB order events through the engine over `MemStore`
//! (10 partitions, batches of 100, so 10 messages a segment), then opens a new engine over the same
//! store and reports: how long the open took, what it read, how much heap the broker holds after it
//! (a counting allocator: live bytes after the open minus before), bytes of heap per stored message, and
//! the latency of a 100-message pop whose segments are not cached (read and decoded from the store) and
//! of one whose segments are (pushed just before).
//!
//! `cargo run --release -p queen-edge-bench --bin queen-capacity -- 0.1 1` (targets in GB).
//! The store is in memory: a read costs a copy here, a SQLite or IndexedDB read on a real host.

use futures::executor::block_on;
use queen_edge::core::api::*;
use queen_edge::core::BrokerConfig;
use queen_edge::engine::Engine;
use queen_edge::store::MemStore;
use queen_edge_bench::BenchHost;
use serde_json::json;
use std::time::Instant;

/// Live heap bytes (`live_heap::live`), counted by wrapping the system allocator.
#[path = "../../tests/support/live_heap.rs"]
mod live_heap;
use live_heap::live;

const PARTITIONS: u64 = 10;
const BATCH: u64 = 100;

/// A ~1 KB order event; ids and amounts vary, so it compresses like real traffic, not like padding.
fn payload(i: u64) -> serde_json::Value {
    let lines: Vec<_> = (0..8)
        .map(|k| {
            let x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(k * 7);
            json!({"sku": format!("SKU-{:05}", x % 100_000), "qty": x % 7 + 1,
                   "price": (x % 100_000) as f64 / 100.0, "warehouse": format!("wh-{}", x % 13)})
        })
        .collect();
    json!({
        "type": "order.created",
        "orderId": format!("ord-{i:010}"),
        "customer": {"id": format!("cus-{:07}", i.wrapping_mul(2_654_435_761) % 10_000_000),
                     "email": format!("user{}@example.com", i % 999_983)},
        "lines": lines,
        "note": format!("{:x}", i.wrapping_mul(0xD6E8_FEB8_6659_FD93)),
    })
}

fn config() -> BrokerConfig {
    BrokerConfig {
        default_subscription_new: false,
        ..BrokerConfig::default()
    }
}

fn pop_ms(engine: &Engine<MemStore, BenchHost>, group: &str) -> (f64, usize) {
    let start = Instant::now();
    let reply = block_on(engine.pop(
        PopRequest {
            group: Some(group.to_string()),
            batch: Some(BATCH as u32),
            ..PopRequest::queue("orders")
        },
        None,
    ))
    .expect("pop");
    (start.elapsed().as_secs_f64() * 1000.0, reply.messages.len())
}

fn main() {
    let targets: Vec<f64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let targets = if targets.is_empty() {
        vec![0.1]
    } else {
        targets
    };
    println!("| stored (segments) | messages | open | records read at open | broker heap after open | heap per message | pop 100, not cached | pop 100, cached |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    let host = BenchHost::new(1_767_225_600_000);
    let store = MemStore::new();
    let mut pushed = 0u64;
    for target_gb in targets {
        let target = (target_gb * 1e9) as usize;
        {
            let engine = block_on(Engine::open(store.clone(), host.clone(), config())).unwrap();
            // The broker's own count of stored segment bytes (O(1); the store's total walks every record).
            // Pushes store JSON text and maintenance compresses it (core::compaction), so the target
            // counts what stays stored: fill, let maintenance compress, fill again until it is reached
            // with nothing left to compress.
            let stored = || engine.read(|b, _| b.storage_usage().0) as usize;
            loop {
                fill_to(&engine, &host, target, &mut pushed);
                host.now
                    .set(host.now.get() + queen_edge::core::compaction::COMPRESS_AFTER_MS + 1);
                let mut compressed = 0;
                while let Ok(report) = block_on(engine.maintain()) {
                    if report.segments_compressed == 0 {
                        break;
                    }
                    compressed += report.segments_compressed;
                }
                if compressed == 0 || stored() >= target {
                    break;
                }
            }
        }
        store.take_reads();
        let before = live();
        let start = Instant::now();
        let engine = block_on(Engine::open(store.clone(), host.clone(), config())).unwrap();
        let open_ms = start.elapsed().as_secs_f64() * 1000.0;
        let heap = (live() - before).max(0) as f64;
        let reads = store.take_reads();
        let (cold_ms, cold_n) = pop_ms(&engine, "cold");
        // Cached: a fresh batch is in the cache right after its push.
        let items = (0..BATCH)
            .map(|k| PushItem {
                partition: format!("hot-{target_gb}").into(),
                ..PushItem::new("orders", payload(pushed + k))
            })
            .collect();
        block_on(engine.push(items)).expect("push");
        pushed += BATCH;
        let start = Instant::now();
        let warm = block_on(engine.pop(
            PopRequest {
                group: Some("warm".into()),
                batch: Some(BATCH as u32),
                target: PopTarget::Partition {
                    queue: "orders".into(),
                    partition: format!("hot-{target_gb}"),
                },
                ..PopRequest::queue("orders")
            },
            None,
        ))
        .expect("pop");
        let warm_ms = start.elapsed().as_secs_f64() * 1000.0;
        println!(
            "| {:.2} GB ({}) | {} | {:.0} ms | {} | {:.1} MB | {:.1} B | {:.2} ms ({} msgs) | {:.2} ms ({} msgs) |",
            store.stored_bytes() as f64 / 1e9,
            store.len() / 2,
            pushed,
            open_ms,
            reads.records_scanned,
            heap / 1e6,
            heap / pushed as f64,
            cold_ms,
            cold_n,
            warm_ms,
            warm.messages.len(),
        );
        drop(engine);
    }
}

/// Pushes batches of [`BATCH`] events until the broker stores `target` bytes of segments.
fn fill_to(
    engine: &Engine<MemStore, BenchHost>,
    host: &BenchHost,
    target: usize,
    pushed: &mut u64,
) {
    while (engine.read(|b, _| b.storage_usage().0) as usize) < target {
        let items = (0..BATCH)
            .map(|k| {
                let i = *pushed + k;
                PushItem {
                    partition: format!("p{}", i % PARTITIONS).into(),
                    transaction_id: Some(format!("tx-{i}").into()),
                    ..PushItem::new("orders", payload(i))
                }
            })
            .collect();
        block_on(engine.push(items)).expect("push");
        *pushed += BATCH;
        host.now.set(host.now.get() + 1);
    }
}

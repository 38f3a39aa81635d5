//! `queen-bench`: prints the core benchmark's figures as Markdown (native build).
//!
//! `cargo run --release -p queen-edge-bench` (add `--quick` for a ten times smaller run; `QE_CORE_ROUNDS`
//! rounds of the throughput scenarios, 3 unless told, each row the median).
//! `queen-bench --profile-run MESSAGES [PARTITIONS]` runs only the profiled scenario (64-byte payloads,
//! batch 100, 10 partitions unless told) for `scripts/bench-core --profile`, naming the thread after
//! each phase (`qb-push`, `qb-popack`, and `qb-prep` while it builds the next call's items off the
//! clock) so `perf report --comms` can tell the phases apart.
//! `queen-bench --http-run MESSAGES [PAYLOAD_BYTES] [BATCH]` runs the same scenario through the HTTP layer
//! (request bodies read, replies written; 64-byte payloads and batch 100 unless told) and prints the time
//! per message of each phase.

use queen_edge_bench::{run_scenario, PayloadKind};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let origin = Instant::now();
    let clock = move || origin.elapsed().as_secs_f64() * 1000.0;
    // Names the thread after the phase, for `perf report --comms`.
    let named = std::cell::Cell::new("");
    let name_thread = |phase: &str| {
        let comm = match phase {
            "push" => "qb-push",
            "pop+ack" => "qb-popack",
            _ => "qb-prep",
        };
        if named.replace(comm) != comm {
            std::fs::write("/proc/thread-self/comm", comm).expect("thread name");
        }
    };
    if let Some(at) = args.iter().position(|a| a == "--profile-run") {
        let messages: u64 = args
            .get(at + 1)
            .and_then(|m| m.parse().ok())
            .expect("--profile-run MESSAGES");
        let partitions: u32 = args
            .get(at + 2)
            .map_or(Some(10), |p| p.parse().ok())
            .expect("--profile-run MESSAGES [PARTITIONS]");
        let row = run_scenario(
            PayloadKind::Small,
            100,
            partitions,
            messages,
            &clock,
            &name_thread,
        );
        println!(
            "profiled run: {} messages, {} partitions, push {:.0} msg/s, pop+ack {:.0} msg/s",
            row.messages, row.partitions, row.push_per_s, row.pop_ack_per_s
        );
        return;
    }
    if let Some(at) = args.iter().position(|a| a == "--http-run") {
        let arg = |i: usize, name: &str, default: u64| -> u64 {
            args.get(at + i)
                .map_or(Some(default), |v| v.parse().ok())
                .unwrap_or_else(|| {
                    panic!("--http-run MESSAGES [PAYLOAD_BYTES] [BATCH]: bad {name}")
                })
        };
        let messages = arg(1, "MESSAGES", 100_000);
        let payload = arg(2, "PAYLOAD_BYTES", 64) as usize;
        let batch = arg(3, "BATCH", 100) as u32;
        let row =
            queen_edge_bench::run_http_scenario(payload, batch, 10, messages, &clock, &name_thread);
        println!(
            "http run: {} messages, {payload} B, batch {batch}: push {:.2} us/msg, pop+ack {:.2} us/msg",
            row.messages, row.push_us, row.pop_ack_us
        );
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
    let rounds = match std::env::var("QE_CORE_ROUNDS") {
        Ok(text) => text
            .parse()
            .ok()
            .filter(|&r: &u32| r >= 1)
            .unwrap_or_else(|| panic!("QE_CORE_ROUNDS={text}: want a whole number of at least 1")),
        Err(_) => 3,
    };
    print!(
        "{}",
        queen_edge_bench::run_all("native (release)", quick, rounds, &clock)
    );
}

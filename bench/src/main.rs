//! `queen-bench`: prints the core benchmark's figures as Markdown (native build).
//!
//! `cargo run --release -p queen-edge-bench` (add `--quick` for a ten times smaller run).
//! `queen-bench --profile-run MESSAGES [PARTITIONS]` runs only the profiled scenario (64-byte payloads,
//! batch 100, 10 partitions unless told) for `scripts/bench-core --profile`, naming the thread after
//! each phase (`qb-push`, `qb-popack`, and `qb-prep` while it builds the next call's items off the
//! clock) so `perf report --comms` can tell the phases apart.

use queen_edge_bench::{run_scenario, PayloadKind};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let origin = Instant::now();
    let clock = move || origin.elapsed().as_secs_f64() * 1000.0;
    if let Some(at) = args.iter().position(|a| a == "--profile-run") {
        let messages: u64 = args
            .get(at + 1)
            .and_then(|m| m.parse().ok())
            .expect("--profile-run MESSAGES");
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
    let quick = args.iter().any(|a| a == "--quick");
    print!(
        "{}",
        queen_edge_bench::run_all("native (release)", quick, &clock)
    );
}

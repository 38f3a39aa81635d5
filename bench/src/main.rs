//! `queen-bench`: prints the core benchmark's figures as Markdown (native build).
//!
//! `cargo run --release -p queen-edge-bench` (add `--quick` for a ten times smaller run).

use std::time::Instant;

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let origin = Instant::now();
    let clock = move || origin.elapsed().as_secs_f64() * 1000.0;
    print!(
        "{}",
        queen_edge_bench::run_all("native (release)", quick, &clock)
    );
}

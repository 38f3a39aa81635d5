//! `GET /metrics/prometheus`: the text exposition format 0.0.4 (contract §1.11).
//!
//! Families: `queen_uptime_seconds`, `queen_cluster_{push,pop,ack}_messages_total{scope="cluster"}`,
//! `queen_dlq_depth`, `queen_dlq_depth_by_queue{queue}`, and gauges for queues, partitions, retained
//! messages and live leases.

use crate::core::api::BrokerStats;
use crate::engine::EngineCounters;
use std::fmt::Write;

/// The content type of the answer.
pub(crate) const CONTENT_TYPE: &str = "text/plain; version=0.0.4";

/// Escapes a label value (`\`, `"` and newlines).
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Renders the metrics text, including the store's write counters.
pub(crate) fn render(stats: &BrokerStats, store: &EngineCounters, uptime_s: i64) -> String {
    let mut out = String::new();
    for (name, help, value) in [
        (
            "queen_store_commits_total",
            "Change sets committed to the store.",
            store.commits,
        ),
        (
            "queen_store_rows_written_total",
            "Store rows written (puts plus deletes).",
            store.rows_written,
        ),
        (
            "queen_store_bytes_written_total",
            "Bytes of values written to the store.",
            store.bytes_written,
        ),
        (
            "queen_store_reloads_total",
            "Reloads from the store after a failed commit.",
            store.reloads,
        ),
    ] {
        family(&mut out, name, "counter", help);
        let _ = writeln!(out, "{name} {value}");
    }
    family(
        &mut out,
        "queen_uptime_seconds",
        "gauge",
        "Seconds since the broker started.",
    );
    let _ = writeln!(out, "queen_uptime_seconds {uptime_s}");
    for (name, help, value) in [
        (
            "queen_cluster_push_messages_total",
            "Messages queued by pushes.",
            stats.pushed,
        ),
        (
            "queen_cluster_pop_messages_total",
            "Messages delivered by pops.",
            stats.popped,
        ),
        (
            "queen_cluster_ack_messages_total",
            "Ack items accepted.",
            stats.acked,
        ),
    ] {
        family(&mut out, name, "counter", help);
        let _ = writeln!(out, "{name}{{scope=\"cluster\"}} {value}");
    }
    family(
        &mut out,
        "queen_dlq_depth",
        "gauge",
        "Dead-letter rows stored.",
    );
    let _ = writeln!(out, "queen_dlq_depth {}", stats.dlq_depth);
    family(
        &mut out,
        "queen_dlq_depth_by_queue",
        "gauge",
        "Dead-letter rows stored, per queue.",
    );
    for (queue, depth) in &stats.dlq_depth_by_queue {
        let _ = writeln!(
            out,
            "queen_dlq_depth_by_queue{{queue=\"{}\"}} {depth}",
            label(queue)
        );
    }
    for (name, help, value) in [
        ("queen_queues", "Queues.", stats.queues),
        ("queen_partitions", "Partitions.", stats.partitions),
        ("queen_messages", "Retained messages.", stats.messages),
        ("queen_live_leases", "Live leases.", stats.live_leases),
    ] {
        family(&mut out, name, "gauge", help);
        let _ = writeln!(out, "{name} {value}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_labels() {
        let stats = BrokerStats {
            dlq_depth: 2,
            dlq_depth_by_queue: vec![("a\"b\\c\nd".into(), 2)],
            ..Default::default()
        };
        let text = render(
            &stats,
            &EngineCounters {
                rows_written: 7,
                ..Default::default()
            },
            5,
        );
        assert!(text.contains("queen_store_rows_written_total 7"), "{text}");
        assert!(
            text.contains("queen_dlq_depth_by_queue{queue=\"a\\\"b\\\\c\\nd\"} 2"),
            "{text}"
        );
        assert!(text.contains("queen_uptime_seconds 5"));
        assert!(text.contains("queen_cluster_push_messages_total{scope=\"cluster\"} 0"));
    }
}

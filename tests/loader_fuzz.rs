//! The loader under damaged storage (issue 15.3): dropped, truncated and mutated records either load
//! or fail with an error; they never panic. Damage the loader can see for certain (a missing index
//! entry inside a partition's chain, an unreadable index entry) is always an error.

use crate::support;

use proptest::prelude::*;
use queen_edge::core::api::AckStatus;
use queen_edge::core::{Broker, BrokerConfig, ENTRIES_PER_PAGE};
use serde_json::json;
use support::Harness;

/// The records of a small broker: two partitions of two full index pages and a few segments past them,
/// a group mid-way, a dead letter.
fn records() -> Vec<(String, Vec<u8>)> {
    let mut h = Harness::new();
    for round in 0..2 * ENTRIES_PER_PAGE + 3 {
        h.push_to(
            "q",
            "a",
            (0..3).map(|i| json!({ "a": round * 3 + i })).collect(),
        );
        h.push_to("q", "b", vec![json!({ "b": round })]);
    }
    let popped = h.pop("q", Some("g"), 2);
    h.ack_msgs(&popped, &[(0, AckStatus::Completed), (1, AckStatus::Dlq)]);
    h.commit();
    h.records
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[derive(Debug, Clone)]
enum Damage {
    Drop(usize),
    Truncate(usize, usize),
    Flip(usize, usize, u8),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        any::<usize>().prop_map(Damage::Drop),
        (any::<usize>(), any::<usize>()).prop_map(|(r, n)| Damage::Truncate(r, n)),
        (any::<usize>(), any::<usize>(), 1u8..=255).prop_map(|(r, at, x)| Damage::Flip(r, at, x)),
    ]
}

fn apply(records: &mut Vec<(String, Vec<u8>)>, damage: &Damage) -> String {
    let n = records.len();
    match *damage {
        Damage::Drop(r) => records.remove(r % n).0,
        Damage::Truncate(r, len) => {
            let (key, value) = &mut records[r % n];
            let keep = len % (value.len().max(1));
            value.truncate(keep);
            key.clone()
        }
        Damage::Flip(r, at, x) => {
            let (key, value) = &mut records[r % n];
            if !value.is_empty() {
                let at = at % value.len();
                value[at] ^= x;
            }
            key.clone()
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn damaged_records_load_or_fail_but_never_panic(damages in prop::collection::vec(damage(), 1..4)) {
        let mut records = records();
        let mut touched = Vec::new();
        for d in &damages {
            touched.push(apply(&mut records, d));
        }
        let outcome = std::panic::catch_unwind(|| {
            Broker::from_records(BrokerConfig::default(), 1, records.clone()).map(|_| ())
        });
        prop_assert!(outcome.is_ok(), "the loader panicked on {damages:?} of {touched:?}");
    }
}

#[test]
fn a_dropped_index_page_inside_the_chain_is_an_error() {
    let mut records = records();
    let pages: Vec<usize> = records
        .iter()
        .enumerate()
        .filter(|(_, (k, _))| k.starts_with("x/"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(pages.len(), 4, "two pages a partition");
    records.remove(pages[0]); // partition a's first page
                              // With the segments given too, its segments are neither indexed nor after the end.
    let e = Broker::from_records(BrokerConfig::default(), 1, records.clone())
        .err()
        .expect("segments without their page inside the chain are an error");
    assert!(e.message.contains("damaged"), "{e}");
    // As the engine opens (index records only), the chain has a gap.
    records.retain(|(k, _)| !k.starts_with("s/"));
    let e = Broker::from_records(BrokerConfig::default(), 1, records)
        .err()
        .expect("a gap is an error");
    assert!(
        e.message.contains("damaged") && e.message.contains("missing offsets"),
        "{e}"
    );
}

#[test]
fn a_truncated_index_page_is_an_error() {
    let mut records = records();
    let at = records
        .iter()
        .position(|(k, _)| k.starts_with("x/"))
        .unwrap();
    records[at].1.truncate(20);
    let e = Broker::from_records(BrokerConfig::default(), 1, records)
        .err()
        .expect("an unreadable index page is an error");
    assert!(e.message.contains("unreadable"), "{e}");
}

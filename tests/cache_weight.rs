//! The segment cache's weight of a segment (`segment::decoded_weight`) against the memory its messages
//! really hold, counted by a counting allocator: the cache's budget is memory, so the weight must not
//! count less than what is held (it once counted a third to a half of it), nor far more.

#[path = "support/live_heap.rs"]
mod live_heap;

use queen_edge::core::api::{Payload, SharedStr};
use queen_edge::core::segment::{self, StoredMessage};
use std::rc::Rc;

fn batch(n: u64) -> Vec<StoredMessage> {
    (0..n)
        .map(|i| StoredMessage {
            offset: i,
            id: SharedStr::from(format!("0193f0a1-7c2e-7b3a-9d4e-{i:012x}")),
            transaction_id: SharedStr::from(format!("bench-{i}")),
            trace_id: None,
            producer_sub: None,
            created_at_ms: 1_767_225_600_000 + i as i64,
            payload: Payload::from_json(format!("{{\"n\":{i},\"pad\":\"{}\"}}", "x".repeat(40)))
                .unwrap(),
        })
        .collect()
}

/// The live heap that `make` leaves behind, with what it made.
fn held<T>(make: impl FnOnce() -> T) -> (T, usize) {
    let before = live_heap::live();
    let made = make();
    (made, (live_heap::live() - before) as usize)
}

/// `messages` is an `Rc` slice, whose counts the cache counts with its slot (`SegmentCache::insert`).
fn check(what: &str, messages: &[StoredMessage], live: usize) {
    let weight = segment::decoded_weight(messages) + segment::RC_COUNTS;
    println!("{what}: weight {weight}, held {live}");
    assert!(
        weight >= live,
        "{what}: weight {weight} under the {live} bytes held"
    );
    assert!(
        weight <= live * 3 / 2,
        "{what}: weight {weight} far above the {live} bytes held"
    );
}

#[test]
fn a_segments_weight_is_at_least_the_memory_it_holds() {
    for n in [1, 10, 100, 1000] {
        let bytes = segment::encode(&batch(n));
        // Read from the store: the messages as the cache keeps them (an exact slice).
        let (read, live) = held(|| Rc::<[StoredMessage]>::from(segment::decode(&bytes).unwrap()));
        check(&format!("{n} read"), &read, live);
        drop(read);
        // Pushed: the batch's own pieces, then one text of just its messages' texts.
        let pieces = batch(n);
        let ((_, shared), live) = held(|| {
            let (bytes, shared) = segment::encode_shared(batch(n));
            drop(bytes);
            (0, Rc::<[StoredMessage]>::from(shared))
        });
        check(&format!("{n} pushed"), &shared, live);
        drop(pieces);
    }
}

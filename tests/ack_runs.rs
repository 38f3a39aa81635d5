//! One ack call whose items name several partitions, interleaved and out of pop order: each item is
//! found and fenced by its own partition's lane (the ack reads a lane's fencing once per run of items on
//! it, and looks for the next item where the one before was found: neither may leak into another
//! partition's items).

use crate::support;

use queen_edge::core::api::*;
use serde_json::json;
use support::*;

/// The item errors of the wire contract (§1.4).
const INVALID_LEASE: &str = "Invalid or expired lease";
const NOT_IN_SPAN: &str = "Message not in leased span";

/// Pops `batch` messages of one partition of `q` in queue mode.
fn pop_one_partition(h: &mut Harness, batch: u32) -> PopReply {
    let mut req = PopRequest::queue("q");
    req.batch = Some(batch);
    req.partitions = Some(1);
    h.pop_with(req)
}

/// Each result's success and error text, in item order.
fn outcomes(results: &[AckResult]) -> Vec<(bool, Option<&str>)> {
    results
        .iter()
        .map(|r| (r.success, r.error.as_deref()))
        .collect()
}

#[test]
fn interleaved_items_are_fenced_by_their_own_lane() {
    let mut h = Harness::new();
    h.push_to("q", "a", (0..4).map(|n| json!({ "a": n })).collect());
    h.push_to("q", "b", (0..3).map(|n| json!({ "b": n })).collect());
    let first = pop_one_partition(&mut h, 3);
    let second = pop_one_partition(&mut h, 3);
    assert_eq!(first.messages.len(), 3);
    assert_eq!(second.messages.len(), 3);
    assert_ne!(first.partition_id, second.partition_id);
    assert_ne!(first.lease_id, second.lease_id);

    let item = |reply: &PopReply, i: usize, lease: &PopReply| {
        let m = &reply.messages[i];
        AckItem::new(&m.transaction_id, &m.partition_id, AckStatus::Completed)
            .with_lease(lease.lease_id.as_str())
    };
    let (x, y) = (&first, &second);
    let items = vec![
        item(x, 0, x),
        item(y, 0, y),
        item(x, 2, x), // out of pop order
        item(y, 1, x), // the other partition's lease
        item(x, 1, y), // the other partition's lease
        item(y, 2, y),
        item(x, 1, x),
    ];
    let results = h.ack(None, items);
    let outcome = outcomes(&results);
    assert_eq!(
        outcome,
        vec![
            (true, None),
            (true, None),
            (true, None),
            (false, Some(INVALID_LEASE)),
            (false, Some(INVALID_LEASE)),
            (true, None),
            (true, None),
        ]
    );
    for (r, m) in results.iter().zip([
        &x.messages[0],
        &y.messages[0],
        &x.messages[2],
        &y.messages[1],
        &x.messages[1],
        &y.messages[2],
        &x.messages[1],
    ]) {
        assert_eq!(r.transaction_id.as_str(), m.transaction_id);
        assert_eq!(r.partition_id.as_str(), m.partition_id);
        assert_eq!(r.partition.as_deref(), Some(m.partition.as_str()));
    }
}

#[test]
fn a_message_past_the_span_is_not_in_it_after_one_that_is() {
    let mut h = Harness::new();
    h.push_to("q", "a", (0..4).map(|n| json!({ "a": n })).collect());
    let reply = pop_one_partition(&mut h, 3);
    assert_eq!(reply.messages.len(), 3);
    // The fourth message: pushed, not popped (a second pop of one message claims nothing while the
    // partition is leased).
    let again = pop_one_partition(&mut h, 1);
    assert!(again.messages.is_empty());
    let last = reply.messages.last().expect("three");
    let fourth_offset = last.offset + 1;
    let items: Vec<AckItem> = reply
        .messages
        .iter()
        .map(|m| {
            AckItem::new(&m.transaction_id, &m.partition_id, AckStatus::Completed)
                .with_lease(reply.lease_id.as_str())
        })
        .collect();
    let results = h.ack(None, items[..2].to_vec());
    assert!(results.iter().all(|r| r.success));
    // Pop the fourth in a group that is ahead, to learn its transaction id, then ack it in queue mode
    // right after the third (the hint points past the span's end).
    let mut req = PopRequest::queue("q");
    req.group = Some("reader".into());
    req.batch = Some(4);
    let read = h.pop_with(req);
    let fourth = read
        .messages
        .iter()
        .find(|m| m.offset == fourth_offset)
        .expect("the fourth message");
    let results = h.ack(
        None,
        vec![
            items[2].clone(),
            AckItem::new(
                &fourth.transaction_id,
                &fourth.partition_id,
                AckStatus::Completed,
            )
            .with_lease(reply.lease_id.as_str()),
        ],
    );
    let outcome = outcomes(&results);
    assert_eq!(outcome, vec![(true, None), (false, Some(NOT_IN_SPAN))]);
}

#[test]
fn a_wrong_fence_after_a_right_one_on_the_same_lane_is_refused() {
    let mut h = Harness::new();
    h.push_to("q", "a", (0..4).map(|n| json!({ "a": n })).collect());
    let reply = pop_one_partition(&mut h, 4);
    assert_eq!(reply.messages.len(), 4);
    let m = &reply.messages;
    let item = |i: usize| {
        AckItem::new(
            &m[i].transaction_id,
            &m[i].partition_id,
            AckStatus::Completed,
        )
    };
    let items = vec![
        item(0).with_lease(reply.lease_id.as_str()),
        item(1).with_lease("another-lease"),
        item(2),
        item(3).with_lease(reply.lease_id.as_str()),
    ];
    let results = h.ack(None, items);
    let outcome = outcomes(&results);
    assert_eq!(
        outcome,
        vec![
            (true, None),
            (false, Some(INVALID_LEASE)),
            (true, None),
            (true, None),
        ]
    );
}

//! Splitting a transaction across shards into one part per shard, and putting the parts' answers back
//! in the client's order (pure; the protocol is in [`crate::txn_coordinator`]).
//!
//! A transaction's results are flat: one per pushed item, one per ack, in operation order (wire
//! contract §1.6). A push operation whose items live on several shards becomes one push operation per
//! shard (items in request order); an ack goes to its partition's shard. Each part remembers, for each of
//! its results, the position of that result in the whole answer. An operation of an unknown type goes
//! to the first part, whose prepare refuses it (and so the whole transaction).

use serde_json::value::RawValue;

use crate::shards::ShardMap;
use crate::split_text::{write_array, Members};

/// One shard's part of a transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    /// The shard.
    pub shard: u16,
    /// The part's operations (a transaction body's `operations`), each as JSON text: an operation as the
    /// client sent it, or a push operation with only this shard's items.
    pub operations: Vec<Vec<u8>>,
    /// For each result the part answers, in its order: that result's position in the whole answer.
    pub slots: Vec<usize>,
}

impl Part {
    /// The part as a transaction body.
    pub fn body(&self) -> Vec<u8> {
        let length: usize = self.operations.iter().map(|op| op.len() + 1).sum();
        let mut out = Vec::with_capacity(length + 18);
        out.extend_from_slice(b"{\"operations\":");
        write_array(&mut out, self.operations.iter().map(Vec::as_slice));
        out.push(b'}');
        out
    }
}

/// Splits the `operations` of a transaction body over the shards of `map`, parts in order of first
/// appearance. Each operation and item goes to its part as the client sent it (its text, never built into
/// a value: payloads are only scanned). `Ok(None)` when the body has no operations list (the caller
/// sends it whole to a shard, which answers the 400); `Err` when the body is not a JSON object.
pub fn split(map: &ShardMap, body: &[u8]) -> Result<Option<Vec<Part>>, serde_json::Error> {
    let body: Members = serde_json::from_slice(body)?;
    let Some(operations) = body
        .get("operations")
        .and_then(|list| serde_json::from_str::<Vec<&RawValue>>(list.get()).ok())
    else {
        return Ok(None);
    };
    let mut parts: Vec<Part> = Vec::new();
    fn part_of(parts: &mut Vec<Part>, shard: u16) -> &mut Part {
        let at = match parts.iter().position(|p| p.shard == shard) {
            Some(at) => at,
            None => {
                parts.push(Part {
                    shard,
                    operations: Vec::new(),
                    slots: Vec::new(),
                });
                parts.len() - 1
            }
        };
        &mut parts[at]
    }
    let mut slot = 0;
    for op in operations {
        let members = serde_json::from_str::<Members>(op.get()).ok();
        let kind = members.as_ref().and_then(|m| m.string("type"));
        match (kind.as_deref(), &members) {
            (Some("push"), Some(members)) => {
                let items = members.items("items").unwrap_or_default();
                // This operation's items, grouped by shard in order of first appearance.
                let mut groups: Vec<(u16, Vec<&RawValue>, Vec<usize>)> = Vec::new();
                for item in items {
                    let queue = serde_json::from_str::<Members>(item.get())
                        .ok()
                        .and_then(|m| m.string("queue"))
                        .unwrap_or_default();
                    let shard = map.of_queue(&queue);
                    match groups.iter_mut().find(|(s, _, _)| *s == shard) {
                        Some((_, list, slots)) => {
                            list.push(item);
                            slots.push(slot);
                        }
                        None => groups.push((shard, vec![item], vec![slot])),
                    }
                    slot += 1;
                }
                for (shard, list, slots) in groups {
                    let mut text = Vec::with_capacity(op.get().len());
                    members.write_with_array(&mut text, "items", &list);
                    let part = part_of(&mut parts, shard);
                    part.operations.push(text);
                    part.slots.extend(slots);
                }
            }
            (Some("ack"), Some(members)) => {
                let shard = members
                    .string("partitionId")
                    .map_or(0, |p| map.of_partition(&p));
                let part = part_of(&mut parts, shard);
                part.operations.push(op.get().as_bytes().to_vec());
                part.slots.push(slot);
                slot += 1;
            }
            _ => {
                let first = parts.first().map_or(0, |p| p.shard);
                part_of(&mut parts, first)
                    .operations
                    .push(op.get().as_bytes().to_vec());
            }
        }
    }
    Ok(Some(parts))
}

/// The whole answer's `results` (a JSON array's text) from each part's (the texts of its results, in part
/// order, as `split` made the parts): each result moved to its slot, its `index` rewritten when it has one.
/// A part that answered fewer results than it has slots leaves those slots out.
pub fn merge_results(parts: &[Part], answers: &[Vec<&RawValue>]) -> Vec<u8> {
    let total = parts.iter().map(|p| p.slots.len()).sum();
    let mut text = Vec::new();
    let mut placed: Vec<Option<std::ops::Range<usize>>> = vec![None; total];
    for (part, results) in parts.iter().zip(answers) {
        for (result, &slot) in results.iter().zip(&part.slots) {
            let start = text.len();
            match serde_json::from_str::<Members>(result.get()) {
                Ok(members) if members.get("index").is_some() => {
                    members.write_with_index(&mut text, slot)
                }
                _ => text.extend_from_slice(result.get().as_bytes()),
            }
            placed[slot] = Some(start..text.len());
        }
    }
    let mut out = Vec::with_capacity(text.len() + total + 2);
    write_array(
        &mut out,
        placed.into_iter().flatten().map(|range| &text[range]),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::fixtures::{map, two_queues};
    use serde_json::{json, Value};

    #[test]
    fn a_push_over_two_shards_becomes_two_parts_and_merges_back_in_order() {
        let m = map();
        let (a, b) = two_queues();
        // Partition id 3 is on shard (3-1)%4 = 2.
        let body = json!({"operations": [
            {"type": "push", "items": [{"queue": a, "payload": 1}, {"queue": b, "payload": 2}, {"queue": a, "payload": 3}]},
            {"type": "ack", "transactionId": "t", "partitionId": "3"},
        ]});
        let parts = split(&m, body.to_string().as_bytes()).unwrap().unwrap();
        let sa = m.of_queue(&a);
        let sb = m.of_queue(&b);
        let find = |s: u16| parts.iter().find(|p| p.shard == s).unwrap();
        let op =
            |s: u16, n: usize| serde_json::from_slice::<Value>(&find(s).operations[n]).unwrap();
        assert_eq!(
            op(sa, 0),
            json!({"type": "push", "items": [{"queue": a, "payload": 1}, {"queue": a, "payload": 3}]})
        );
        assert_eq!(
            op(sb, 0),
            json!({"type": "push", "items": [{"queue": b, "payload": 2}]})
        );
        assert_eq!(
            op(2, 0),
            json!({"type": "ack", "transactionId": "t", "partitionId": "3"})
        );
        assert_eq!(find(sa).slots[..2], [0, 2]);
        assert_eq!(find(sb).slots[..1], [1]);
        assert_eq!(find(2).slots.last(), Some(&3));
        let texts: Vec<Vec<String>> = parts
            .iter()
            .map(|p| {
                (0..p.slots.len())
                    .map(|i| json!({"index": i, "slot": p.slots[i]}).to_string())
                    .collect()
            })
            .collect();
        let answers: Vec<Vec<&RawValue>> = texts
            .iter()
            .map(|t| t.iter().map(|r| serde_json::from_str(r).unwrap()).collect())
            .collect();
        let merged: Vec<Value> = serde_json::from_slice(&merge_results(&parts, &answers)).unwrap();
        assert_eq!(merged.len(), 4);
        for (i, r) in merged.iter().enumerate() {
            assert_eq!(r["index"], json!(i));
            assert_eq!(r["slot"], json!(i));
        }
    }

    #[test]
    fn unknown_operations_go_to_the_first_part() {
        let m = map();
        let (a, _) = two_queues();
        let body = json!({"operations": [
            {"type": "push", "items": [{"queue": a}]},
            {"type": "nope"},
        ]});
        let parts = split(&m, body.to_string().as_bytes()).unwrap().unwrap();
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].operations.len(), 2);
        assert_eq!(split(&m, b"{}").unwrap(), None);
        assert_eq!(split(&m, br#"{"operations":{}}"#).unwrap(), None);
        assert!(split(&m, b"[1]").is_err());
    }
}

//! The catalog of a sharded broker: which shards hold queues of which namespace and task, so a discovery
//! pop asks only those shards (not every one).
//!
//! It is one more `Broker` object (named `<broker>#catalog`, see [`crate::shards::ShardMap`]) that answers
//! two internal routes (`crate::catalog_object`), reached only from the entry Worker (public paths never
//! start with `/__shard/`):
//! - `POST /__shard/catalog/register` `{"labels": [[namespace, task, shard], ...]}`: records the labels
//!   (durably, before it answers);
//! - `GET /__shard/catalog/lookup?namespace=&task=`: `{"shards": [...]}`, the shards with a label matching
//!   both given parts.
//!
//! The entry Worker registers a queue's labels before it forwards the push or configure that may create it,
//! so a label is in the catalog before its first message exists. Entries are never removed: a stale one
//! (its queue deleted) costs a discovery pop one empty probe of that shard.

use serde::{Deserialize, Serialize};

/// The catalog object's storage key of the label list.
pub const LABELS_KEY: &str = "queen-catalog-labels";

/// One catalog entry: a shard holds (or held) a queue with this namespace and task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Label(pub String, pub String, pub u16);

/// The shards (ascending, each once) with a label matching `namespace` and `task` (each when given).
pub fn matching(labels: &[Label], namespace: Option<&str>, task: Option<&str>) -> Vec<u16> {
    let mut shards: Vec<u16> = labels
        .iter()
        .filter(|Label(n, t, _)| namespace.is_none_or(|x| x == n) && task.is_none_or(|x| x == t))
        .map(|Label(_, _, s)| *s)
        .collect();
    shards.sort_unstable();
    shards.dedup();
    shards
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_matches_both_parts() {
        let labels = vec![
            Label("billing".into(), "invoices".into(), 2),
            Label("billing".into(), "refunds".into(), 0),
            Label("mail".into(), "invoices".into(), 3),
        ];
        assert_eq!(matching(&labels, Some("billing"), None), vec![0, 2]);
        assert_eq!(matching(&labels, None, Some("invoices")), vec![2, 3]);
        assert_eq!(
            matching(&labels, Some("billing"), Some("invoices")),
            vec![2]
        );
        assert_eq!(matching(&labels, Some("none"), None), Vec::<u16>::new());
    }
}

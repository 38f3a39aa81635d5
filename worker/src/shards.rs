//! Shards: one broker spread over `SHARDS` Durable Objects (the Worker var, default 1).
//!
//! Each queue lives on exactly one shard, chosen by [`shard_of_queue`]: FNV-1a (64-bit) of the queue name's
//! UTF-8 bytes, modulo the shard count. The hash is part of the stored layout (a queue's messages are on
//! the shard it names), so it must never change; `SHARDS` must not change either over existing data
//! (the objects refuse, see [`crate::shard_guard`]).
//!
//! Object names: shard 0 is the broker's own object (`BROKER_NAME`, or the selected broker), so a
//! Worker with one shard uses exactly the object it always used; shard `k > 0` is `<broker>#shard-k`, and
//! the catalog of discovery labels is `<broker>#catalog`. `#` is not allowed in broker names, so no
//! selectable broker name can reach a shard or the catalog directly.
//!
//! Ids a client sends back on their own carry their shard (`queen_edge::core::ids::ShardTag`): lease and
//! dead-letter ids in their last four hex digits, partition ids as `(id - 1) % SHARDS`.

use queen_edge::core::ids::ShardTag;

/// Header that tells a shard object its index (sent by the entry Worker when `SHARDS` > 1).
pub const SHARD_HEADER: &str = "x-queen-shard";
/// The most shards a Worker may run.
pub const MAX_SHARDS: u16 = 256;

/// The shard count from the value of the var `SHARDS` (read by `crate::vars::shard_count`): 1 when unset;
/// `Err` (the reason) when it is not an integer in `1..=MAX_SHARDS`.
pub fn parse_shard_count(value: Option<&str>) -> Result<u16, String> {
    match value {
        None => Ok(1),
        Some(v) => v
            .parse::<u16>()
            .ok()
            .filter(|n| (1..=MAX_SHARDS).contains(n))
            .ok_or_else(|| format!("SHARDS must be an integer from 1 to {MAX_SHARDS}, got '{v}'")),
    }
}

/// FNV-1a, 64-bit (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The shard that holds queue `name` among `count` shards. Never change this function: it decides where
/// stored queues are.
pub fn shard_of_queue(name: &str, count: u16) -> u16 {
    (fnv1a64(name.as_bytes()) % u64::from(count.max(1))) as u16
}

/// The shards of one broker: its name and how many shards it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardMap {
    /// The broker's name (the object of shard 0).
    pub broker: String,
    /// How many shards.
    pub count: u16,
}

impl ShardMap {
    /// The Durable Object name of shard `index`.
    pub fn object_name(&self, index: u16) -> String {
        if index == 0 {
            self.broker.clone()
        } else {
            format!("{}#shard-{index}", self.broker)
        }
    }

    /// The Durable Object name of the broker's catalog (which shards hold which namespaces and tasks).
    pub fn catalog_name(&self) -> String {
        format!("{}#catalog", self.broker)
    }

    /// The Durable Object name of the broker's coordinator of transactions across shards
    /// (`crate::txn_coordinator`).
    pub fn coordinator_name(&self) -> String {
        format!("{}#txn", self.broker)
    }

    /// The shard of queue `name`.
    pub fn of_queue(&self, name: &str) -> u16 {
        shard_of_queue(name, self.count)
    }

    /// The shard that minted lease or dead-letter id `id`; shard 0 (which answers "not found") when the
    /// id carries none.
    pub fn of_uuid(&self, id: &str) -> u16 {
        ShardTag::shard_of_uuid(id, self.count).unwrap_or(0)
    }

    /// The shard that holds partition id `id`; shard 0 (which answers "not found") when it is not one.
    pub fn of_partition(&self, id: &str) -> u16 {
        ShardTag::shard_of_partition(id, self.count).unwrap_or(0)
    }

    /// Every shard index.
    pub fn all(&self) -> impl Iterator<Item = u16> {
        0..self.count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_fnv1a_and_never_changes() {
        // Reference values of FNV-1a 64 (the published test vectors), and fixed placements: if these
        // change, stored queues are on the wrong shard.
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
        assert_eq!(shard_of_queue("orders", 1), 0);
        let placed: Vec<u16> = ["orders", "emails", "a", "q-1", "q-2"]
            .iter()
            .map(|q| shard_of_queue(q, 4))
            .collect();
        let expected: Vec<u16> = ["orders", "emails", "a", "q-1", "q-2"]
            .iter()
            .map(|q| (fnv1a64(q.as_bytes()) % 4) as u16)
            .collect();
        assert_eq!(placed, expected);
    }

    #[test]
    fn names_and_counts() {
        let map = ShardMap {
            broker: "default".into(),
            count: 4,
        };
        assert_eq!(map.object_name(0), "default");
        assert_eq!(map.object_name(3), "default#shard-3");
        assert_eq!(map.catalog_name(), "default#catalog");
        assert_eq!(map.coordinator_name(), "default#txn");
        assert_eq!(parse_shard_count(None), Ok(1));
        assert_eq!(parse_shard_count(Some("4")), Ok(4));
        assert!(parse_shard_count(Some("0")).is_err());
        assert!(parse_shard_count(Some("257")).is_err());
        assert!(parse_shard_count(Some("x")).is_err());
        assert_eq!(map.of_partition("7"), 2);
        assert_eq!(map.of_partition("nope"), 0);
    }
}

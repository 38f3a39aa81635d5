//! Identifier minting: UUIDv7 from the command's `now` plus bits from a seeded generator.
//!
//! The core owns no entropy of its own. The host seeds the generator once (from real entropy in
//! production, from a fixed seed in tests), so a seeded run mints the same ids every time.

use super::api::SharedStr;

/// A deterministic generator of UUIDv7 strings that sort in the order they were minted (a 12-bit
/// counter in `rand_a` orders ids minted within one millisecond, RFC 9562 method 1).
#[derive(Debug, Clone)]
pub struct IdGen {
    state: u64,
    last_ms: u64,
    seq: u16,
    /// Written into the last two bytes of every id (the last four hex digits), when set.
    tag: Option<u16>,
}

/// Which shard of how many a broker is (a Worker with `SHARDS` > 1 spreads queues over several
/// brokers). Ids that a client sends back on their own (lease ids, dead-letter ids, partition ids) carry
/// the shard index, so the entry Worker routes them to the broker that minted them:
/// - UUIDs (lease, dead-letter, queue ids): the last four hex digits are the index ([`IdGen`]);
/// - partition ids (decimal integers): `(id - 1) % count == index` ([`ShardTag::next_partition_id`]).
///
/// With `count == 1` (the default) nothing is tagged: ids are exactly those of an unsharded broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardTag {
    /// This broker's shard, `0..count`.
    pub index: u16,
    /// How many shards the Worker runs.
    pub count: u16,
}

impl Default for ShardTag {
    fn default() -> Self {
        ShardTag { index: 0, count: 1 }
    }
}

impl ShardTag {
    /// The smallest partition id `>= next` that belongs to this shard.
    pub fn next_partition_id(&self, next: u64) -> u64 {
        let count = u64::from(self.count.max(1));
        let index = u64::from(self.index) % count;
        // Ids of shard `index` are 1 + index + k * count: the first at or after `next`.
        let base = next.max(1) - 1;
        let (q, r) = (base / count, base % count);
        let k = if r <= index { q } else { q + 1 };
        1 + index + k * count
    }

    /// The shard of a UUID minted by a tagged [`IdGen`] among `count` shards (its last four hex digits,
    /// modulo `count`); `None` when `id` does not end in four hex digits.
    pub fn shard_of_uuid(id: &str, count: u16) -> Option<u16> {
        let tail = id.get(id.len().checked_sub(4)?..)?;
        let value = u16::from_str_radix(tail, 16).ok()?;
        Some(value % count.max(1))
    }

    /// The shard of a partition id among `count` shards; `None` when it is not a positive integer.
    pub fn shard_of_partition(id: &str, count: u16) -> Option<u16> {
        let pid = id.parse::<u64>().ok().filter(|p| *p > 0)?;
        Some(((pid - 1) % u64::from(count.max(1))) as u16)
    }
}

impl IdGen {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        IdGen {
            state: seed,
            last_ms: 0,
            seq: 0,
            tag: None,
        }
    }

    /// A generator seeded with `seed` whose ids carry `shard`'s index (nothing when it has one shard).
    pub fn for_shard(seed: u64, shard: ShardTag) -> Self {
        let mut ids = IdGen::new(seed);
        if shard.count > 1 {
            ids.tag = Some(shard.index);
        }
        ids
    }

    /// The next 64 pseudo-random bits (splitmix64).
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A UUIDv7 for the instant `now_ms`, as a lowercase hyphenated string.
    pub fn uuid_v7(&mut self, now_ms: i64) -> String {
        let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
        self.next_v7(now_ms)
            .hyphenated()
            .encode_lower(&mut text)
            .to_owned()
    }

    /// [`Self::uuid_v7`] as shared text (one allocation: what a pushed message's ids are).
    pub fn uuid_v7_shared(&mut self, now_ms: i64) -> SharedStr {
        let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
        SharedStr::from(&*self.next_v7(now_ms).hyphenated().encode_lower(&mut text))
    }

    /// The next UUIDv7 (see [`Self::uuid_v7`]).
    fn next_v7(&mut self, now_ms: i64) -> uuid::Uuid {
        let mut random = [0u8; 10];
        random[..8].copy_from_slice(&self.next_u64().to_le_bytes());
        random[8..].copy_from_slice(&self.next_u64().to_le_bytes()[..2]);
        let now = now_ms.max(0) as u64;
        if now > self.last_ms {
            self.last_ms = now;
            // Start low in the counter space so many ids fit in this millisecond.
            self.seq = (self.next_u64() & 0x3FF) as u16;
        } else if self.seq >= 0xFFF {
            self.last_ms += 1;
            self.seq = 0;
        } else {
            self.seq += 1;
        }
        // The low 12 bits of random[0..2] are rand_a (the counter), random[2..10] fill rand_b.
        random[0] = (self.seq >> 8) as u8 & 0x0F;
        random[1] = (self.seq & 0xFF) as u8;
        if let Some(tag) = self.tag {
            random[8..].copy_from_slice(&tag.to_be_bytes());
        }
        uuid::Builder::from_unix_timestamp_millis(self.last_ms, &random).into_uuid()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn same_seed_same_ids_and_v7_shape() {
        let mut a = IdGen::new(42);
        let mut b = IdGen::new(42);
        let x = a.uuid_v7(1_700_000_000_000);
        assert_eq!(x, b.uuid_v7(1_700_000_000_000));
        assert_eq!(x.len(), 36);
        assert_eq!(&x[14..15], "7", "version nibble is 7: {x}");
        assert_ne!(x, a.uuid_v7(1_700_000_000_000));
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn ids_minted_in_one_millisecond_sort_in_mint_order() {
        let mut g = IdGen::new(3);
        let ids: Vec<String> = (0..10_000).map(|_| g.uuid_v7(1_700_000_000_000)).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted);
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn shard_tags_route_back() {
        for count in [2u16, 3, 4, 7] {
            for index in 0..count {
                let tag = ShardTag { index, count };
                let mut g = IdGen::for_shard(9, tag);
                for _ in 0..50 {
                    let id = g.uuid_v7(1_700_000_000_000);
                    assert_eq!(ShardTag::shard_of_uuid(&id, count), Some(index), "{id}");
                }
                let mut next = 1;
                for _ in 0..20 {
                    let pid = tag.next_partition_id(next);
                    assert!(pid >= next);
                    assert_eq!(
                        ShardTag::shard_of_partition(&pid.to_string(), count),
                        Some(index)
                    );
                    next = pid + 1;
                }
            }
        }
        let one = ShardTag::default();
        assert_eq!(
            (1..10)
                .map(|n| one.next_partition_id(n))
                .collect::<Vec<_>>(),
            (1..10).collect::<Vec<_>>()
        );
        assert_eq!(ShardTag::shard_of_partition("0", 4), None);
        assert_eq!(ShardTag::shard_of_uuid("xyz", 4), None);
    }
}

//! Identifier minting: UUIDv7 from the command's `now` plus bits from a seeded generator.
//!
//! The core owns no entropy of its own. The host seeds the generator once (from real entropy in
//! production, from a fixed seed in tests), so a seeded run mints the same ids every time.

/// A deterministic generator of UUIDv7 strings.
#[derive(Debug, Clone)]
pub struct IdGen {
    state: u64,
}

impl IdGen {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        IdGen { state: seed }
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
        let mut random = [0u8; 10];
        random[..8].copy_from_slice(&self.next_u64().to_le_bytes());
        random[8..].copy_from_slice(&self.next_u64().to_le_bytes()[..2]);
        let millis = now_ms.max(0) as u64;
        uuid::Builder::from_unix_timestamp_millis(millis, &random)
            .into_uuid()
            .hyphenated()
            .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_ids_and_v7_shape() {
        let mut a = IdGen::new(42);
        let mut b = IdGen::new(42);
        let x = a.uuid_v7(1_700_000_000_000);
        assert_eq!(x, b.uuid_v7(1_700_000_000_000));
        assert_eq!(x.len(), 36);
        assert_eq!(&x[14..15], "7", "version nibble is 7: {x}");
        assert_ne!(x, a.uuid_v7(1_700_000_000_000));
    }
}

//! Identifier minting: UUIDv7 from the command's `now` plus bits from a seeded generator.
//!
//! The core owns no entropy of its own. The host seeds the generator once (from real entropy in
//! production, from a fixed seed in tests), so a seeded run mints the same ids every time.

/// A deterministic generator of UUIDv7 strings that sort in the order they were minted (a 12-bit
/// counter in `rand_a` orders ids minted within one millisecond, RFC 9562 method 1).
#[derive(Debug, Clone)]
pub struct IdGen {
    state: u64,
    last_ms: u64,
    seq: u16,
}

impl IdGen {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        IdGen {
            state: seed,
            last_ms: 0,
            seq: 0,
        }
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
        // uuid puts the low 12 bits of bytes 0..2 into rand_a.
        random[0] = (self.seq >> 8) as u8 & 0x0F;
        random[1] = (self.seq & 0xFF) as u8;
        let millis = self.last_ms;
        uuid::Builder::from_unix_timestamp_millis(millis, &random)
            .into_uuid()
            .hyphenated()
            .to_string()
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
}

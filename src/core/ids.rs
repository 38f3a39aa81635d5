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
        // The low 12 bits of random[0..2] are rand_a (the counter), random[2..10] fill rand_b.
        random[0] = (self.seq >> 8) as u8 & 0x0F;
        random[1] = (self.seq & 0xFF) as u8;
        format_v7(self.last_ms, &random)
    }
}

/// The hyphenated lowercase text of the UUIDv7 with Unix time `millis` and the 10 bytes `random`
/// (RFC 9562 §5.7, the layout of `uuid::Builder::from_unix_timestamp_millis`), written straight into
/// one 36-byte string.
fn format_v7(millis: u64, random: &[u8; 10]) -> String {
    let mut bytes = [0u8; 16];
    bytes[..6].copy_from_slice(&millis.to_be_bytes()[2..]);
    bytes[6] = 0x70 | (random[0] & 0x0F);
    bytes[7] = random[1];
    bytes[8] = 0x80 | (random[2] & 0x3F);
    bytes[9..].copy_from_slice(&random[3..]);
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut text = [0u8; 36];
    let mut at = 0;
    for (i, byte) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            text[at] = b'-';
            at += 1;
        }
        text[at] = HEX[(byte >> 4) as usize];
        text[at + 1] = HEX[(byte & 0x0F) as usize];
        at += 2;
    }
    // Only ASCII hex digits and hyphens were written.
    String::from_utf8(text.to_vec()).expect("ASCII")
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
    fn formats_what_the_uuid_crate_builds() {
        let mut g = IdGen::new(7);
        for millis in [0u64, 1, 1_700_000_000_000, (1 << 48) - 1] {
            let mut random = [0u8; 10];
            random[..8].copy_from_slice(&g.next_u64().to_le_bytes());
            random[8..].copy_from_slice(&g.next_u64().to_le_bytes()[..2]);
            let expected = uuid::Builder::from_unix_timestamp_millis(millis, &random)
                .into_uuid()
                .hyphenated()
                .to_string();
            assert_eq!(format_v7(millis, &random), expected);
        }
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

//! The hasher of the core's hash maps keyed by text: rustc-hash's `FxHasher` with the same hashes, whose
//! byte-string hash (`hash_bytes`, a copy of rustc-hash 2.1's; that crate is MIT or Apache-2.0) converts its slices
//! of 8 and 4 bytes with `try_into().unwrap_or_default()` instead of `try_into().unwrap()` (the slices have
//! the array's length, so neither the default nor the panic is ever taken). The `unwrap`
//! brings `TryFromSliceError`'s `Debug` into the browser module, and with it the standard library's
//! tuple-formatting machinery, for a panic that cannot happen (docs/decisions.md, "Browser size:
//! formatting and data (session 20)"). Integers are hashed by `FxHasher` itself.

use rustc_hash::FxHasher;
use std::hash::{BuildHasher, Hasher};

/// A `HashMap` hashed by [`Fx`].
pub(crate) type FxHashMap<K, V> = std::collections::HashMap<K, V, BuildFx>;

/// Builds [`Fx`] hashers (as `rustc_hash::FxBuildHasher` builds `FxHasher`s).
#[derive(Clone, Copy, Default)]
pub(crate) struct BuildFx;

impl BuildHasher for BuildFx {
    type Hasher = Fx;
    fn build_hasher(&self) -> Fx {
        Fx(FxHasher::default())
    }
}

/// `FxHasher`, with the byte strings hashed by this module's [`hash_bytes`].
#[derive(Default)]
pub(crate) struct Fx(FxHasher);

impl Hasher for Fx {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        self.0.write_u64(hash_bytes(bytes));
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.0.write_u8(i);
    }
    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.0.write_u16(i);
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.0.write_u32(i);
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.0.write_u64(i);
    }
    #[inline]
    fn write_u128(&mut self, i: u128) {
        self.0.write_u128(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.0.write_usize(i);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0.finish()
    }
}

// rustc-hash's constants (digits of pi).
const SEED1: u64 = 0x243f_6a88_85a3_08d3;
const SEED2: u64 = 0x1319_8a2e_0370_7344;
const PREVENT_TRIVIAL_ZERO_COLLAPSE: u64 = 0xa409_3822_299f_31d0;

/// rustc-hash's `multiply_mix`.
#[inline]
fn multiply_mix(x: u64, y: u64) -> u64 {
    if cfg!(any(
        all(
            target_pointer_width = "64",
            not(any(target_arch = "sparc64", target_arch = "wasm64")),
        ),
        target_arch = "aarch64",
        target_arch = "x86_64",
        all(target_family = "wasm", target_feature = "wide-arithmetic"),
    )) {
        let full = (x as u128).wrapping_mul(y as u128);
        let lo = full as u64;
        let hi = (full >> 64) as u64;
        lo ^ hi
    } else {
        let lx = x as u32;
        let ly = y as u32;
        let hx = (x >> 32) as u32;
        let hy = (y >> 32) as u32;
        let afull = (lx as u64).wrapping_mul(hy as u64);
        let bfull = (hx as u64).wrapping_mul(ly as u64);
        afull ^ bfull.rotate_right(32)
    }
}

/// rustc-hash's `hash_bytes`: the same value for every input.
#[inline]
fn hash_bytes(bytes: &[u8]) -> u64 {
    let len = bytes.len();
    let mut s0 = SEED1;
    let mut s1 = SEED2;

    if len <= 16 {
        if len >= 8 {
            s0 ^= u64::from_le_bytes(bytes[0..8].try_into().unwrap_or_default());
            s1 ^= u64::from_le_bytes(bytes[len - 8..].try_into().unwrap_or_default());
        } else if len >= 4 {
            s0 ^= u32::from_le_bytes(bytes[0..4].try_into().unwrap_or_default()) as u64;
            s1 ^= u32::from_le_bytes(bytes[len - 4..].try_into().unwrap_or_default()) as u64;
        } else if len > 0 {
            let lo = bytes[0];
            let mid = bytes[len / 2];
            let hi = bytes[len - 1];
            s0 ^= lo as u64;
            s1 ^= ((hi as u64) << 8) | mid as u64;
        }
    } else {
        let mut bulk = &bytes[..(len - 1)];
        while let Some((chunk, rest)) = bulk.split_first_chunk::<16>() {
            let x = u64::from_le_bytes((&chunk[..8]).try_into().unwrap_or_default());
            let y = u64::from_le_bytes((&chunk[8..]).try_into().unwrap_or_default());
            let t = multiply_mix(s0 ^ x, PREVENT_TRIVIAL_ZERO_COLLAPSE ^ y);
            s0 = s1;
            s1 = t;
            bulk = rest;
        }
        let suffix = &bytes[len - 16..];
        s0 ^= u64::from_le_bytes(suffix[0..8].try_into().unwrap_or_default());
        s1 ^= u64::from_le_bytes(suffix[8..16].try_into().unwrap_or_default());
    }

    multiply_mix(s0, s1) ^ (len as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::Hash;

    fn ours<T: Hash + ?Sized>(v: &T) -> u64 {
        BuildFx.hash_one(v)
    }

    fn theirs<T: Hash + ?Sized>(v: &T) -> u64 {
        rustc_hash::FxBuildHasher.hash_one(v)
    }

    /// The same hash as rustc-hash's for texts of every length from 0 to 80 (each branch of
    /// `hash_bytes`: empty, 1-3, 4-7, 8-16, the bulk loop with and without a partial last chunk), for
    /// integers and for tuples of both, so a map iterates in the same order with either hasher.
    #[test]
    fn hashes_as_rustc_hash() {
        let text: String = (0..80u32)
            .map(|i| char::from(b'!' + ((i * 37 + 11) % 90) as u8))
            .collect();
        for n in 0..=80 {
            let s = &text[..n];
            assert_eq!(ours(s), theirs(s), "{n}");
            assert_eq!(ours(&s.to_string()), theirs(&s.to_string()), "{n}");
            assert_eq!(ours(&(n as u64, s)), theirs(&(n as u64, s)), "{n}");
        }
        assert_eq!(ours("é✓😀"), theirs("é✓😀"));
        for v in [0u64, 1, 255, 1 << 32, u64::MAX] {
            assert_eq!(ours(&v), theirs(&v));
            assert_eq!(ours(&(v, v ^ 7)), theirs(&(v, v ^ 7)));
        }
    }
}

//! One stable sort for the crate's records, views and lists.
//!
//! The standard library's sorts are generic over the element type and the comparison: every call site
//! compiles its own copy of the whole sort (a few kilobytes of wasm each). These functions sort a list of
//! positions instead, through one non-generic merge sort with the comparison behind a `dyn`, then move
//! the elements into that order. Same results as `slice::sort_by` (stable, `O(n log n)`, linear on input
//! that is already sorted), at the cost of two `Vec`s of positions and an indirect call per comparison.
//! Plain integers (the transaction index's runs, sorted on every push) have [`sort_u64`], with no
//! positions and no indirect call.

use std::cmp::Ordering;

/// Sorts `items` stably by `compare`, as `slice::sort_by` does.
pub fn sort_by<T>(items: &mut [T], mut compare: impl FnMut(&T, &T) -> Ordering) {
    if items.len() < 2 {
        return;
    }
    let order = sorted_positions(items.len(), &mut |a, b| compare(&items[a], &items[b]));
    permute(items, order);
}

/// Sorts `items` stably by the key `key` extracts, as `slice::sort_by_key` does.
pub fn sort_by_key<T, K: Ord>(items: &mut [T], mut key: impl FnMut(&T) -> K) {
    sort_by(items, |a, b| key(a).cmp(&key(b)));
}

/// Sorts `items` stably in their natural order, as `slice::sort` does.
pub fn sort<T: Ord>(items: &mut [T]) {
    sort_by(items, T::cmp);
}

/// The positions `0..n` in the order `compare` gives them, of equal ones in their order: a bottom-up
/// merge sort, `O(n log n)`, and one comparison an element when they already are in order (a store's
/// scan, ids minted in order). The one sort of the crate's lists (a few hundred bytes of code; the
/// standard library's stable sort is a few kilobytes of wasm).
#[inline(never)]
fn sorted_positions(n: usize, compare: &mut dyn FnMut(usize, usize) -> Ordering) -> Vec<usize> {
    let mut from: Vec<usize> = (0..n).collect();
    if (1..n).all(|i| compare(i - 1, i) != Ordering::Greater) {
        return from;
    }
    let mut to = from.clone();
    let mut width = 1;
    while width < n {
        let mut start = 0;
        while start < n {
            let mid = n.min(start + width);
            let end = n.min(start + 2 * width);
            let (mut left, mut right) = (start, mid);
            for slot in &mut to[start..end] {
                // The right run's next only when it is smaller: equal ones keep their order.
                if right < end
                    && (left == mid || compare(from[right], from[left]) == Ordering::Less)
                {
                    *slot = from[right];
                    right += 1;
                } else {
                    *slot = from[left];
                    left += 1;
                }
            }
            start = end;
        }
        std::mem::swap(&mut from, &mut to);
        width *= 2;
    }
    from
}

/// Sorts `items` ascending, as `slice::sort_unstable` does: an insertion sort of short blocks, then
/// bottom-up merges through one buffer (a few hundred bytes of code against the standard library's
/// several kilobytes for its unstable sort; `O(n log n)`).
pub fn sort_u64(items: &mut [u64]) {
    const BLOCK: usize = 16;
    let n = items.len();
    for block in items.chunks_mut(BLOCK) {
        insertion_sort(block);
    }
    if n <= BLOCK {
        return;
    }
    let mut buf = items.to_vec();
    let mut in_items = true;
    let mut width = BLOCK;
    while width < n {
        let (from, to): (&[u64], &mut [u64]) = if in_items {
            (items, &mut buf)
        } else {
            (&buf, items)
        };
        let mut start = 0;
        while start < n {
            let mid = n.min(start + width);
            let end = n.min(start + 2 * width);
            let (mut left, mut right, mut out) = (start, mid, start);
            while left < mid && right < end {
                let (l, r) = (from[left], from[right]);
                let take_right = r < l;
                to[out] = if take_right { r } else { l };
                right += take_right as usize;
                left += !take_right as usize;
                out += 1;
            }
            to[out..out + (mid - left)].copy_from_slice(&from[left..mid]);
            out += mid - left;
            to[out..end].copy_from_slice(&from[right..end]);
            start = end;
        }
        in_items = !in_items;
        width *= 2;
    }
    if !in_items {
        items.copy_from_slice(&buf);
    }
}

fn insertion_sort(items: &mut [u64]) {
    for i in 1..items.len() {
        let x = items[i];
        let mut at = i;
        while at > 0 && items[at - 1] > x {
            items[at] = items[at - 1];
            at -= 1;
        }
        items[at] = x;
    }
}

/// Rearranges `items` so that position `i` holds what was at `order[i]`, one cycle of the permutation
/// at a time (swaps only, no copies of `T`).
fn permute<T>(items: &mut [T], mut order: Vec<usize>) {
    for start in 0..items.len() {
        let mut at = start;
        loop {
            let from = order[at];
            order[at] = at;
            if from == start {
                break;
            }
            items.swap(at, from);
            at = from;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_like_the_standard_library_and_stays_stable() {
        // A fixed pseudo-random sequence with many equal keys, so stability is exercised.
        let mut state = 12345u32;
        let mut items: Vec<(u32, usize)> = (0..500)
            .map(|i| {
                state = state.wrapping_mul(1_103_515_245).wrapping_add(12345);
                ((state >> 16) % 37, i)
            })
            .collect();
        let mut expected = items.clone();
        expected.sort_by_key(|(k, _)| *k);
        sort_by_key(&mut items, |(k, _)| *k);
        assert_eq!(items, expected);
    }

    #[test]
    fn sorts_integers_like_the_standard_library() {
        let mut state = 99u64;
        for n in [
            0usize, 1, 2, 15, 16, 17, 31, 32, 33, 100, 255, 256, 257, 1000, 4099,
        ] {
            let mut items: Vec<u64> = (0..n)
                .map(|_| {
                    state = state
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1);
                    // Few distinct values in every other list, so equal ones meet in the merges.
                    if n % 2 == 0 {
                        state >> 60
                    } else {
                        state
                    }
                })
                .collect();
            let mut expected = items.clone();
            expected.sort_unstable();
            sort_u64(&mut items);
            assert_eq!(items, expected, "n = {n}");
            let mut reversed: Vec<u64> = (0..n as u64).rev().collect();
            sort_u64(&mut reversed);
            assert_eq!(reversed, (0..n as u64).collect::<Vec<_>>());
        }
    }

    #[test]
    fn handles_sorted_reversed_short_and_empty_input() {
        for n in [0usize, 1, 2, 3, 10, 64] {
            let mut ascending: Vec<usize> = (0..n).collect();
            sort(&mut ascending);
            assert_eq!(ascending, (0..n).collect::<Vec<_>>());
            let mut descending: Vec<usize> = (0..n).rev().collect();
            sort(&mut descending);
            assert_eq!(descending, (0..n).collect::<Vec<_>>());
            let mut strings: Vec<String> = (0..n).rev().map(|i| format!("k{i:03}")).collect();
            sort_by(&mut strings, |a, b| b.cmp(a));
            assert_eq!(
                strings,
                (0..n).rev().map(|i| format!("k{i:03}")).collect::<Vec<_>>()
            );
        }
    }
}

//! queen-edge change (vendor/README.md): the map behind `Map<String, Value>` without the
//! `preserve_order` feature, a `Vec` of entries kept sorted by key instead of a `BTreeMap`. The same
//! order (iteration, serialization), the same answers to every call; in the browser module it replaces a
//! whole B-tree instance (insert, remove, rebalancing, iterators) by a binary search over a `Vec`.
//!
//! A key inserted out of order shifts the entries after it, so a map built from many entries in any
//! order (a parsed object, `collect`, `extend`) is built by [`SortedMap::from_entries`]: the entries
//! are gathered first and sorted once, `O(n log n)` like the B-tree.

use crate::value::Value;
use alloc::string::String;
use alloc::vec::{self, Vec};
use core::borrow::Borrow;
use core::fmt::{self, Debug};
use core::{iter, mem, slice};

#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub(crate) struct SortedMap<K = String, V = Value> {
    entries: Vec<(K, V)>,
}

pub(crate) type Iter<'a> =
    iter::Map<slice::Iter<'a, (String, Value)>, fn(&'a (String, Value)) -> (&'a String, &'a Value)>;
pub(crate) type IterMut<'a> = iter::Map<
    slice::IterMut<'a, (String, Value)>,
    fn(&'a mut (String, Value)) -> (&'a String, &'a mut Value),
>;
pub(crate) type IntoIter = vec::IntoIter<(String, Value)>;
pub(crate) type Keys<'a> =
    iter::Map<slice::Iter<'a, (String, Value)>, fn(&'a (String, Value)) -> &'a String>;
pub(crate) type Values<'a> =
    iter::Map<slice::Iter<'a, (String, Value)>, fn(&'a (String, Value)) -> &'a Value>;
pub(crate) type ValuesMut<'a> =
    iter::Map<slice::IterMut<'a, (String, Value)>, fn(&'a mut (String, Value)) -> &'a mut Value>;
pub(crate) type IntoValues = iter::Map<vec::IntoIter<(String, Value)>, fn((String, Value)) -> Value>;

impl SortedMap {
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        SortedMap {
            entries: Vec::with_capacity(capacity),
        }
    }

    /// A map of `entries` in any order; of entries with equal keys the last one counts, as when they
    /// are inserted one after the other.
    pub(crate) fn from_entries(mut entries: Vec<(String, Value)>) -> Self {
        if !entries.windows(2).all(|w| w[0].0 < w[1].0) {
            let order = key_order(&entries);
            permute(&mut entries, order);
            // Stable: equal keys stay in insertion order, and each later value moves into the kept entry.
            entries.dedup_by(|later, kept| {
                let same = later.0 == kept.0;
                if same {
                    mem::swap(&mut later.1, &mut kept.1);
                }
                same
            });
        }
        SortedMap { entries }
    }

    fn find<Q>(&self, key: &Q) -> Result<usize, usize>
    where
        String: Borrow<Q>,
        Q: ?Sized + Ord,
    {
        self.entries.binary_search_by(|e| e.0.borrow().cmp(key))
    }

    pub(crate) fn clear(&mut self) {
        self.entries.clear();
    }

    pub(crate) fn get<Q>(&self, key: &Q) -> Option<&Value>
    where
        String: Borrow<Q>,
        Q: ?Sized + Ord,
    {
        self.find(key).ok().map(|i| &self.entries[i].1)
    }

    pub(crate) fn contains_key<Q>(&self, key: &Q) -> bool
    where
        String: Borrow<Q>,
        Q: ?Sized + Ord,
    {
        self.find(key).is_ok()
    }

    pub(crate) fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut Value>
    where
        String: Borrow<Q>,
        Q: ?Sized + Ord,
    {
        match self.find(key) {
            Ok(i) => Some(&mut self.entries[i].1),
            Err(_) => None,
        }
    }

    pub(crate) fn get_key_value<Q>(&self, key: &Q) -> Option<(&String, &Value)>
    where
        String: Borrow<Q>,
        Q: ?Sized + Ord,
    {
        self.find(key).ok().map(|i| pair(&self.entries[i]))
    }

    /// As `BTreeMap::insert`: a key already there keeps its entry (and its key) and gets the value.
    pub(crate) fn insert(&mut self, key: String, value: Value) -> Option<Value> {
        match self.find(&*key) {
            Ok(i) => Some(mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                self.entries.insert(i, (key, value));
                None
            }
        }
    }

    pub(crate) fn remove<Q>(&mut self, key: &Q) -> Option<Value>
    where
        String: Borrow<Q>,
        Q: ?Sized + Ord,
    {
        self.remove_entry(key).map(|(_, v)| v)
    }

    pub(crate) fn remove_entry<Q>(&mut self, key: &Q) -> Option<(String, Value)>
    where
        String: Borrow<Q>,
        Q: ?Sized + Ord,
    {
        match self.find(key) {
            Ok(i) => Some(self.entries.remove(i)),
            Err(_) => None,
        }
    }

    pub(crate) fn append(&mut self, other: &mut Self) {
        let other = mem::take(&mut other.entries);
        self.extend(other);
    }

    pub(crate) fn extend<I: IntoIterator<Item = (String, Value)>>(&mut self, iter: I) {
        let mut entries = mem::take(&mut self.entries);
        entries.extend(iter);
        *self = SortedMap::from_entries(entries);
    }

    pub(crate) fn entry(&mut self, key: String) -> Entry {
        match self.find(&*key) {
            Ok(index) => Entry::Occupied(OccupiedEntry {
                entries: &mut self.entries,
                index,
            }),
            Err(index) => Entry::Vacant(VacantEntry {
                entries: &mut self.entries,
                index,
                key,
            }),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(crate) fn iter(&self) -> Iter {
        self.entries.iter().map(pair as _)
    }

    pub(crate) fn iter_mut(&mut self) -> IterMut {
        self.entries.iter_mut().map(pair_mut as _)
    }

    pub(crate) fn keys(&self) -> Keys {
        self.entries.iter().map(key as _)
    }

    pub(crate) fn values(&self) -> Values {
        self.entries.iter().map(value as _)
    }

    pub(crate) fn values_mut(&mut self) -> ValuesMut {
        self.entries.iter_mut().map(value_mut as _)
    }

    pub(crate) fn into_values(self) -> IntoValues {
        self.entries.into_iter().map(into_value as _)
    }

    pub(crate) fn into_iter(self) -> IntoIter {
        self.entries.into_iter()
    }

    pub(crate) fn retain<F: FnMut(&String, &mut Value) -> bool>(&mut self, mut f: F) {
        self.entries.retain_mut(|e| f(&e.0, &mut e.1));
    }

    pub(crate) fn index<Q>(&self, key: &Q) -> &Value
    where
        String: Borrow<Q>,
        Q: ?Sized + Ord,
    {
        self.get(key).expect("no entry found for key")
    }
}

impl Debug for SortedMap {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

fn pair(e: &(String, Value)) -> (&String, &Value) {
    (&e.0, &e.1)
}

fn pair_mut(e: &mut (String, Value)) -> (&String, &mut Value) {
    (&e.0, &mut e.1)
}

fn key(e: &(String, Value)) -> &String {
    &e.0
}

fn value(e: &(String, Value)) -> &Value {
    &e.1
}

fn value_mut(e: &mut (String, Value)) -> &mut Value {
    &mut e.1
}

fn into_value(e: (String, Value)) -> Value {
    e.1
}

/// The positions of `entries` in key order, of equal keys in their order: a bottom-up merge sort, a
/// few hundred bytes of code where the standard library's stable sort would bring a copy of its own.
fn key_order(entries: &[(String, Value)]) -> Vec<usize> {
    let n = entries.len();
    let mut from: Vec<usize> = (0..n).collect();
    let mut to = from.clone();
    let mut width = 1;
    while width < n {
        let mut start = 0;
        while start < n {
            let mid = n.min(start + width);
            let end = n.min(start + 2 * width);
            let (mut left, mut right) = (start, mid);
            for slot in &mut to[start..end] {
                // The right run's next only when its key is smaller: equal keys keep their order.
                if right < end && (left == mid || entries[from[right]].0 < entries[from[left]].0) {
                    *slot = from[right];
                    right += 1;
                } else {
                    *slot = from[left];
                    left += 1;
                }
            }
            start = end;
        }
        mem::swap(&mut from, &mut to);
        width *= 2;
    }
    from
}

/// Rearranges `items` so that position `i` holds what was at `order[i]`, one cycle at a time.
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

pub(crate) enum Entry<'a> {
    Vacant(VacantEntry<'a>),
    Occupied(OccupiedEntry<'a>),
}

pub(crate) struct VacantEntry<'a> {
    entries: &'a mut Vec<(String, Value)>,
    index: usize,
    key: String,
}

impl<'a> VacantEntry<'a> {
    pub(crate) fn key(&self) -> &String {
        &self.key
    }

    pub(crate) fn insert(self, value: Value) -> &'a mut Value {
        self.entries.insert(self.index, (self.key, value));
        &mut self.entries[self.index].1
    }
}

pub(crate) struct OccupiedEntry<'a> {
    entries: &'a mut Vec<(String, Value)>,
    index: usize,
}

impl<'a> OccupiedEntry<'a> {
    pub(crate) fn key(&self) -> &String {
        &self.entries[self.index].0
    }

    pub(crate) fn get(&self) -> &Value {
        &self.entries[self.index].1
    }

    pub(crate) fn get_mut(&mut self) -> &mut Value {
        &mut self.entries[self.index].1
    }

    pub(crate) fn into_mut(self) -> &'a mut Value {
        &mut self.entries[self.index].1
    }

    pub(crate) fn insert(&mut self, value: Value) -> Value {
        mem::replace(&mut self.entries[self.index].1, value)
    }

    pub(crate) fn remove(self) -> Value {
        self.remove_entry().1
    }

    pub(crate) fn remove_entry(self) -> (String, Value) {
        self.entries.remove(self.index)
    }
}

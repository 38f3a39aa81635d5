//! Persistence: the [`Store`] trait, the change set the core hands out, and the in-memory reference store.
//!
//! A store is a sorted map from string keys to byte values with one write operation: commit a
//! [`ChangeSet`] atomically. The engine commits the change set of every command before it replies, so
//! whatever a client was told is durable in the store.
//!
//! Implementations:
//! - [`MemStore`] (here): the reference, used by native tests and as the canary base.
//! - `IdbStore` (`src/store/idb.rs`, wasm32 only): IndexedDB, one readwrite transaction per commit.
//! - `DoStore` (`worker/src/do_store.rs`): Durable Object SQLite storage.
//!
//! Every implementation must pass [`conformance`].

pub mod conformance;
#[cfg(target_arch = "wasm32")]
pub mod idb;
mod mem;

#[cfg(target_arch = "wasm32")]
pub use idb::{Durability, IdbOptions, IdbStore};
pub use mem::{MemStore, ReadCounts};

use std::collections::BTreeMap;
use std::fmt;

/// One stored record: a key and its value.
pub type Record = (String, Vec<u8>);

/// A note: a key and value a store keeps apart from its records (never returned by `scan` or `get`),
/// written atomically with a commit ([`Store::commit_noted`]). The browser's recorded requests keep
/// their answers this way, so an answer is stored exactly when the changes it reports are.
pub type Note = (String, Vec<u8>);

/// The keys that start with `prefix` and are `from` or after it (in key order): what
/// [`Store::first_keys`] looks in. (`from` before `prefix`: every key that starts with `prefix`.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRange {
    /// Every key of the range starts with it.
    pub prefix: String,
    /// The range's lower bound, inclusive.
    pub from: String,
}

/// The writes of one command: records to put and keys to delete, applied all or nothing.
///
/// One ordered map from key to its last write in this set (`Some(value)`: put; `None`: delete), so a key
/// is never both put and deleted and a commit is deterministic. (One map rather than a put map and a
/// delete set, and its writes boxed as the core's maps box their values: the map is then the same
/// `BTreeMap<String, Box<_>>` code as theirs, not a B-tree copy of its own in the browser module,
/// docs/decisions.md.)
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ChangeSet {
    writes: BTreeMap<String, Box<Option<Vec<u8>>>>,
}

impl ChangeSet {
    /// Records `value` under `key`, replacing any earlier put or delete of it in this set.
    pub fn put(&mut self, key: impl Into<String>, value: Vec<u8>) {
        self.writes.insert(key.into(), Box::new(Some(value)));
    }

    /// Records the removal of `key`, replacing any earlier put of it in this set.
    pub fn delete(&mut self, key: impl Into<String>) {
        self.writes.insert(key.into(), Box::new(None));
    }

    /// The records to write, in key order.
    pub fn puts(&self) -> impl Iterator<Item = (&String, &Vec<u8>)> + '_ {
        self.writes
            .iter()
            .filter_map(|(key, value)| value.as_ref().as_ref().map(|v| (key, v)))
    }

    /// The keys to remove, in key order.
    pub fn deletes(&self) -> impl Iterator<Item = &String> + '_ {
        self.writes
            .iter()
            .filter_map(|(key, value)| value.is_none().then_some(key))
    }

    /// True when the set writes nothing.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    /// Number of records written or deleted (the unit Durable Objects bill by).
    pub fn rows(&self) -> usize {
        self.writes.len()
    }

    /// Total bytes of the values put.
    pub fn bytes(&self) -> usize {
        self.puts().map(|(k, v)| k.len() + v.len()).sum()
    }

    /// Merges `other` into `self`; `other`'s operations win on the same key.
    pub fn absorb(&mut self, other: ChangeSet) {
        self.writes.extend(other.writes);
    }
}

/// A store failed. The engine treats every failure the same way: the command fails, in-memory state is
/// dropped and reloaded from the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError {
    /// What went wrong, in words a person can act on.
    pub message: String,
    /// The kind of failure, for hosts that map it to a specific answer.
    pub kind: StoreErrorKind,
}

/// Classes of store failure that callers may treat differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreErrorKind {
    /// The storage quota is exhausted.
    QuotaExceeded,
    /// The storage cannot be used at all (for example IndexedDB in some private modes).
    Unavailable,
    /// The data was written by a newer format version than this build understands.
    NewerFormat,
    /// Anything else; the write did not happen.
    Other,
}

impl StoreError {
    /// A failure of kind [`StoreErrorKind::Other`].
    pub fn other(message: impl Into<String>) -> Self {
        StoreError {
            message: message.into(),
            kind: StoreErrorKind::Other,
        }
    }

    /// A failure of the given kind.
    pub fn new(kind: StoreErrorKind, message: impl Into<String>) -> Self {
        StoreError {
            message: message.into(),
            kind,
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for StoreError {}

/// Durable sorted key-value storage with atomic multi-key commits.
///
/// Contract (checked by [`conformance`]):
/// - `scan(prefix)` returns every record whose key starts with `prefix`, in ascending byte order of keys,
///   reflecting every commit that returned `Ok` and none that returned `Err`.
/// - `commit(changes)` applies all puts and deletes or none of them. When it returns `Ok` the changes
///   survive a restart of the host. When it returns `Err`, nothing of it is visible.
/// - Values of any length up to 16 MiB round-trip byte for byte (stores with smaller row limits split
///   values internally); keys are non-empty UTF-8 strings up to 1 KiB.
/// - `get(keys)` returns, for each key in order, its value as of the last commit that returned `Ok`, or
///   `None` when it is not stored; it is one consistent read of every key.
/// - `first_keys(ranges)` returns, for each range in order, the first key in byte order that is stored in
///   it as of the last commit that returned `Ok`, or `None` when none is; it reads no value.
/// - Calls are made one at a time by the engine; a store need not support concurrent commits.
#[allow(async_fn_in_trait)]
pub trait Store {
    /// Every record whose key starts with `prefix`, in key order. The engine scans the index prefixes at
    /// open (never the segments), so a scan's cost is the records under its prefix, not the store's.
    async fn scan(&self, prefix: &str) -> Result<Vec<Record>, StoreError>;

    /// The values of `keys`, index-aligned (`None`: not stored). How the engine reads segments on
    /// demand: a handful of keys at a time.
    async fn get(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, StoreError>;

    /// For each of `ranges`, index-aligned, the first key stored in it (`None`: none is). Keys only, at
    /// most one a range, so its cost is the number of ranges: how the open checks that no segment is
    /// stored past a partition's end (a missing one before it would be damage).
    async fn first_keys(&self, ranges: &[KeyRange]) -> Result<Vec<Option<String>>, StoreError>;

    /// Applies `changes` atomically and durably.
    async fn commit(&self, changes: &ChangeSet) -> Result<(), StoreError>;

    /// Applies `changes` and writes `notes` in one atomic, durable commit: all of it or none. A store
    /// that keeps no notes refuses any (the default), so a note is never dropped while its changes are
    /// written.
    async fn commit_noted(&self, changes: &ChangeSet, notes: &[Note]) -> Result<(), StoreError> {
        if !notes.is_empty() {
            return Err(StoreError::other(
                "this store keeps no notes (recorded answers); nothing was written",
            ));
        }
        self.commit(changes).await
    }
}

//! [`MemStore`]: the in-memory reference [`Store`], with fault injection for tests.

use super::{ChangeSet, KeyRange, Note, Record, Store, StoreError};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

/// An in-memory [`Store`]. Clones share the same data, so a test can "restart" an engine by opening a
/// new one over a clone.
///
/// Fault injection: [`MemStore::fail_next_commits`] makes the next commits fail without writing
/// ([`MemStore::fail_commit_after`]: one commit, after some succeed),
/// [`MemStore::fail_next_reads`] the next reads (scans, gets, first keys), and [`MemStore::drop_writes`] turns it into a
/// canary that reports success but keeps nothing (the simulation must catch it).
///
/// It counts what it is asked to read ([`MemStore::reads`]), so tests can assert what an open or a pop
/// reads.
#[derive(Clone, Default)]
pub struct MemStore {
    inner: Rc<MemInner>,
}

#[derive(Default)]
struct MemInner {
    records: RefCell<BTreeMap<String, Vec<u8>>>,
    notes: RefCell<BTreeMap<String, Vec<u8>>>,
    failing_commits: Cell<u32>,
    /// Commits left to succeed before the next one fails ([`MemStore::fail_commit_after`]).
    commits_before_failure: Cell<Option<u32>>,
    dropping_writes: Cell<bool>,
    failing_reads: Cell<u32>,
    commits: Cell<u64>,
    rows_written: Cell<u64>,
    reads: RefCell<ReadCounts>,
}

/// What a [`MemStore`] was asked to read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadCounts {
    /// Prefixes scanned, in call order.
    pub scans: Vec<String>,
    /// Records returned by scans.
    pub records_scanned: u64,
    /// Keys asked for by `get`, in call order.
    pub keys_got: Vec<String>,
    /// The ranges of each `first_keys` call, in call order.
    pub ranges: Vec<Vec<KeyRange>>,
}

impl MemStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes the next `n` commits fail with an error and change nothing.
    pub fn fail_next_commits(&self, n: u32) {
        self.inner.failing_commits.set(n);
    }

    /// Lets the next `n` commits succeed, then makes the one after them fail without writing: a failure
    /// in the middle of a request of several commits.
    pub fn fail_commit_after(&self, n: u32) {
        self.inner.commits_before_failure.set(Some(n));
    }

    /// When `on`, commits report success but write nothing: a broken store for canary tests.
    pub fn drop_writes(&self, on: bool) {
        self.inner.dropping_writes.set(on);
    }

    /// Makes the next `n` reads (scans, gets or first keys) fail with an error.
    pub fn fail_next_reads(&self, n: u32) {
        self.inner.failing_reads.set(n);
    }

    /// What was read since the last call, and resets the counts.
    pub fn take_reads(&self) -> ReadCounts {
        std::mem::take(&mut self.inner.reads.borrow_mut())
    }

    /// Number of successful commits so far.
    pub fn commits(&self) -> u64 {
        self.inner.commits.get()
    }

    /// Number of rows (puts plus deletes) written by successful commits so far.
    pub fn rows_written(&self) -> u64 {
        self.inner.rows_written.get()
    }

    /// The note stored under `key` ([`Store::commit_noted`]), if any.
    pub fn note(&self, key: &str) -> Option<Vec<u8>> {
        self.inner.notes.borrow().get(key).cloned()
    }

    /// Number of records currently stored.
    pub fn len(&self) -> usize {
        self.inner.records.borrow().len()
    }

    /// True when nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Total bytes of keys and values stored.
    pub fn stored_bytes(&self) -> usize {
        self.inner
            .records
            .borrow()
            .iter()
            .map(|(k, v)| k.len() + v.len())
            .sum()
    }
}

impl MemStore {
    fn read_fault(&self) -> Result<(), StoreError> {
        let failing = self.inner.failing_reads.get();
        if failing > 0 {
            self.inner.failing_reads.set(failing - 1);
            return Err(StoreError::other("injected read failure"));
        }
        Ok(())
    }
}

impl Store for MemStore {
    async fn scan(&self, prefix: &str) -> Result<Vec<Record>, StoreError> {
        self.read_fault()?;
        let records = self.inner.records.borrow();
        let found: Vec<Record> = records
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut reads = self.inner.reads.borrow_mut();
        reads.scans.push(prefix.to_string());
        reads.records_scanned += found.len() as u64;
        Ok(found)
    }

    async fn get(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        self.read_fault()?;
        let records = self.inner.records.borrow();
        self.inner
            .reads
            .borrow_mut()
            .keys_got
            .extend(keys.iter().cloned());
        Ok(keys.iter().map(|k| records.get(k).cloned()).collect())
    }

    async fn first_keys(&self, ranges: &[KeyRange]) -> Result<Vec<Option<String>>, StoreError> {
        self.read_fault()?;
        let records = self.inner.records.borrow();
        self.inner.reads.borrow_mut().ranges.push(ranges.to_vec());
        Ok(ranges
            .iter()
            .map(|range| {
                let from = range.from.as_str().max(range.prefix.as_str());
                records
                    .range::<str, _>((std::ops::Bound::Included(from), std::ops::Bound::Unbounded))
                    .next()
                    .map(|(key, _)| key)
                    .filter(|key| key.starts_with(&range.prefix))
                    .cloned()
            })
            .collect())
    }

    async fn commit(&self, changes: &ChangeSet) -> Result<(), StoreError> {
        self.commit_noted(changes, &[]).await
    }

    async fn commit_noted(&self, changes: &ChangeSet, notes: &[Note]) -> Result<(), StoreError> {
        let failing = self.inner.failing_commits.get();
        if failing > 0 {
            self.inner.failing_commits.set(failing - 1);
            return Err(StoreError::other("injected commit failure"));
        }
        match self.inner.commits_before_failure.get() {
            Some(0) => {
                self.inner.commits_before_failure.set(None);
                return Err(StoreError::other("injected commit failure"));
            }
            Some(n) => self.inner.commits_before_failure.set(Some(n - 1)),
            None => {}
        }
        self.inner.commits.set(self.inner.commits.get() + 1);
        self.inner
            .rows_written
            .set(self.inner.rows_written.get() + changes.rows() as u64);
        if self.inner.dropping_writes.get() {
            return Ok(());
        }
        let mut records = self.inner.records.borrow_mut();
        for key in changes.deletes() {
            records.remove(key);
        }
        for (key, value) in changes.puts() {
            records.insert(key.clone(), value.clone());
        }
        self.inner.notes.borrow_mut().extend(notes.iter().cloned());
        Ok(())
    }
}

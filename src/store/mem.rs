//! [`MemStore`]: the in-memory reference [`Store`], with fault injection for tests.

use super::{ChangeSet, Record, Store, StoreError};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

/// An in-memory [`Store`]. Clones share the same data, so a test can "restart" an engine by opening a
/// new one over a clone.
///
/// Fault injection: [`MemStore::fail_next_commits`] makes the next commits fail without writing, and
/// [`MemStore::drop_writes`] turns it into a canary that reports success but keeps nothing (the
/// simulation must catch it).
#[derive(Clone, Default)]
pub struct MemStore {
    inner: Rc<MemInner>,
}

#[derive(Default)]
struct MemInner {
    records: RefCell<BTreeMap<String, Vec<u8>>>,
    failing_commits: Cell<u32>,
    dropping_writes: Cell<bool>,
    commits: Cell<u64>,
    rows_written: Cell<u64>,
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

    /// When `on`, commits report success but write nothing: a broken store for canary tests.
    pub fn drop_writes(&self, on: bool) {
        self.inner.dropping_writes.set(on);
    }

    /// Number of successful commits so far.
    pub fn commits(&self) -> u64 {
        self.inner.commits.get()
    }

    /// Number of rows (puts plus deletes) written by successful commits so far.
    pub fn rows_written(&self) -> u64 {
        self.inner.rows_written.get()
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

impl Store for MemStore {
    async fn scan(&self, prefix: &str) -> Result<Vec<Record>, StoreError> {
        let records = self.inner.records.borrow();
        Ok(records
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    async fn commit(&self, changes: &ChangeSet) -> Result<(), StoreError> {
        let failing = self.inner.failing_commits.get();
        if failing > 0 {
            self.inner.failing_commits.set(failing - 1);
            return Err(StoreError::other("injected commit failure"));
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
        Ok(())
    }
}

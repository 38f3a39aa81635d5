//! [`DoStore`]: the [`Store`] trait on Durable Object SQLite storage.
//!
//! # Layout
//!
//! One table, `queen_kv`, holds every record:
//!
//! ```sql
//! CREATE TABLE queen_kv (key TEXT NOT NULL, chunk INTEGER NOT NULL, value BLOB NOT NULL,
//!                        PRIMARY KEY (key, chunk)) WITHOUT ROWID
//! ```
//!
//! A value is split into chunks of [`CHUNK_BYTES`] (1 MiB, well under the 2 MB row limit of Durable Object
//! SQLite); chunk `0..n` of a key hold the value in order, and an empty value is one empty chunk `0`. Keys are
//! `TEXT` compared with SQLite's default `BINARY` collation (`memcmp` over UTF-8), so `ORDER BY key` is the
//! byte order the [`Store`] contract asks for. The table is `WITHOUT ROWID`, so a row written is one b-tree
//! entry and no second index: rows written is what Cloudflare bills.
//!
//! A second table, `queen_meta`, records the layout version ([`FORMAT_VERSION`]); opening storage written by
//! a newer layout fails with [`StoreErrorKind::NewerFormat`] instead of misreading it.
//!
//! # Commit
//!
//! Every commit runs inside one `ctx.storage.transactionSync(...)` call, so it applies all or nothing: if any
//! statement throws, SQLite rolls the whole transaction back and the commit returns `Err`. The workers-rs
//! binding (worker 0.8.7) has no `transactionSync`, so it is called on the raw storage object through
//! `js_sys::Reflect`. Statements are batched (up to [`MAX_BINDINGS`] bound parameters each) to keep the
//! number of calls into the runtime small:
//! 1. deleted keys: `DELETE ... WHERE key IN (...)`;
//! 2. stale chunks of put keys (a value that shrank): `DELETE ... WHERE key IN (...) AND chunk >= n`,
//!    grouped by the new chunk count `n`;
//! 3. the new chunks: `INSERT ... ON CONFLICT (key, chunk) DO UPDATE` (an upsert writes one row, where
//!    `INSERT OR REPLACE` would delete and insert).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

use queen_edge::store::{ChangeSet, Record, Store, StoreError, StoreErrorKind};
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};
use worker::{SqlStorage, SqlStorageValue, Storage};

/// Bytes per stored chunk of a value (1 MiB; the Durable Object SQLite row limit is 2 MB).
pub const CHUNK_BYTES: usize = 1024 * 1024;

/// The on-disk layout version this build writes and understands.
pub const FORMAT_VERSION: i64 = 1;

/// Bound parameters per statement, under SQLite-in-Durable-Objects' limit of 100.
pub const MAX_BINDINGS: usize = 99;

/// Largest total of bound value bytes batched into one `INSERT` (bigger chunks go alone).
const MAX_BATCH_BYTES: usize = 256 * 1024;

/// Counters of the work a [`DoStore`] has done, for benchmarks and `/metrics`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DoStoreStats {
    /// Commits that returned `Ok`.
    pub commits: u64,
    /// Rows written by successful commits, as SQLite reports them (`cursor.rowsWritten`): the billing unit.
    pub rows_written: u64,
    /// Rows read by scans, as SQLite reports them (`cursor.rowsRead`).
    pub rows_read: u64,
    /// SQL statements executed by successful commits.
    pub statements: u64,
}

#[derive(Debug, Default)]
struct Counters {
    commits: Cell<u64>,
    rows_written: Cell<u64>,
    rows_read: Cell<u64>,
    statements: Cell<u64>,
}

/// A [`Store`] over the SQLite storage of one Durable Object.
///
/// Cloning is cheap; clones share the storage and the counters.
#[derive(Debug, Clone)]
pub struct DoStore {
    sql: SqlStorage,
    raw: JsValue,
    counters: Rc<Counters>,
}

/// One SQL statement with its bound parameters, prepared before the transaction starts.
struct Statement {
    sql: String,
    bindings: Vec<SqlStorageValue>,
}

impl DoStore {
    /// Opens the store on `storage` (from `state.storage()`), creating its tables if needed.
    ///
    /// Fails with [`StoreErrorKind::NewerFormat`] when the storage was written by a newer layout, and with
    /// [`StoreErrorKind::Unavailable`] when the SQL API is missing (a Durable Object class not declared in
    /// `new_sqlite_classes`).
    pub fn open(storage: &Storage) -> Result<Self, StoreError> {
        let raw: JsValue = AsRef::<JsValue>::as_ref(storage.as_raw()).clone();
        let has_sql = js_sys::Reflect::get(&raw, &JsValue::from_str("sql"))
            .map(|v| !v.is_undefined() && !v.is_null())
            .unwrap_or(false);
        if !has_sql {
            return Err(StoreError::new(
                StoreErrorKind::Unavailable,
                "Durable Object has no SQL storage: declare the class in a `new_sqlite_classes` migration",
            ));
        }
        let store = DoStore {
            sql: storage.sql(),
            raw,
            counters: Rc::new(Counters::default()),
        };
        store.exec(
            "CREATE TABLE IF NOT EXISTS queen_kv (key TEXT NOT NULL, chunk INTEGER NOT NULL, \
             value BLOB NOT NULL, PRIMARY KEY (key, chunk)) WITHOUT ROWID",
            Vec::new(),
        )?;
        store.exec(
            "CREATE TABLE IF NOT EXISTS queen_meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL)",
            Vec::new(),
        )?;
        let rows: Vec<Vec<SqlStorageValue>> = store
            .sql
            .exec(
                "SELECT value FROM queen_meta WHERE name = 'format'",
                None::<Vec<SqlStorageValue>>,
            )
            .map_err(sql_error)?
            .raw()
            .collect::<Result<_, _>>()
            .map_err(sql_error)?;
        match rows.first().and_then(|row| row.first()) {
            None => {
                store.exec(
                    "INSERT INTO queen_meta (name, value) VALUES ('format', ?)",
                    vec![SqlStorageValue::Integer(FORMAT_VERSION)],
                )?;
            }
            Some(SqlStorageValue::Integer(v)) if *v <= FORMAT_VERSION => {}
            Some(other) => {
                return Err(StoreError::new(
                    StoreErrorKind::NewerFormat,
                    format!(
                        "storage format {other:?} is newer than this build understands ({FORMAT_VERSION})"
                    ),
                ))
            }
        }
        Ok(store)
    }

    /// Opens `storage` again like [`DoStore::open`], but keeps counting into this store's counters (so a
    /// test that reopens the store still sees the totals).
    pub fn reopen(&self, storage: &Storage) -> Result<Self, StoreError> {
        let mut store = DoStore::open(storage)?;
        store.counters = self.counters.clone();
        Ok(store)
    }

    /// Test hook: runs the statements of `changes` and then one that fails, in one transaction, as a commit
    /// that breaks halfway would. Must return `Err` and leave nothing of `changes` visible.
    pub(crate) fn commit_then_fail(&self, changes: &ChangeSet) -> Result<(), StoreError> {
        let mut statements = plan(changes);
        statements.push(Statement {
            sql: "INSERT INTO queen_no_such_table (x) VALUES (1)".into(),
            bindings: Vec::new(),
        });
        self.run_in_transaction(statements).map(|_| ())
    }

    /// What this store (and its clones) have done since it was opened.
    pub fn stats(&self) -> DoStoreStats {
        DoStoreStats {
            commits: self.counters.commits.get(),
            rows_written: self.counters.rows_written.get(),
            rows_read: self.counters.rows_read.get(),
            statements: self.counters.statements.get(),
        }
    }

    /// Size of the object's SQLite database in bytes (all tables, not only this store's).
    pub fn database_size(&self) -> usize {
        self.sql.database_size()
    }

    fn exec(&self, query: &str, bindings: Vec<SqlStorageValue>) -> Result<(), StoreError> {
        self.sql.exec(query, bindings).map_err(sql_error)?;
        Ok(())
    }

    /// Joins the chunk rows of a `SELECT key, chunk, value ... ORDER BY key, chunk` into records, keeping
    /// the keys `keep` accepts, and counts the rows read.
    fn assemble(
        &self,
        cursor: worker::SqlCursor,
        keep: impl Fn(&str) -> bool,
    ) -> Result<Vec<Record>, StoreError> {
        let mut out: Vec<Record> = Vec::new();
        let mut next_chunk = 0i64;
        for row in cursor.raw() {
            let row = row.map_err(sql_error)?;
            let mut cols = row.into_iter();
            let (Some(SqlStorageValue::String(key)), Some(SqlStorageValue::Integer(chunk)), value) =
                (cols.next(), cols.next(), cols.next())
            else {
                return Err(StoreError::other(
                    "queen_kv row has unexpected column types",
                ));
            };
            let bytes = match value {
                Some(SqlStorageValue::Blob(b)) => b,
                Some(SqlStorageValue::Null) | None => Vec::new(),
                Some(other) => {
                    return Err(StoreError::other(format!(
                        "queen_kv value of {key:?} is not a blob: {other:?}"
                    )))
                }
            };
            if !keep(&key) {
                continue;
            }
            match out.last_mut() {
                Some((last, value)) if *last == key => {
                    if chunk != next_chunk {
                        return Err(StoreError::other(format!(
                            "queen_kv chunks of {key:?} are not contiguous (saw {chunk}, want {next_chunk})"
                        )));
                    }
                    value.extend_from_slice(&bytes);
                }
                _ => {
                    if chunk != 0 {
                        return Err(StoreError::other(format!(
                            "queen_kv value of {key:?} starts at chunk {chunk}"
                        )));
                    }
                    out.push((key, bytes));
                }
            }
            next_chunk = chunk + 1;
        }
        let read = self.counters.rows_read.get() + cursor.rows_read() as u64;
        self.counters.rows_read.set(read);
        Ok(out)
    }

    /// Runs `statements` inside one `transactionSync`, returning the rows written.
    fn run_in_transaction(&self, statements: Vec<Statement>) -> Result<u64, StoreError> {
        let written = Rc::new(Cell::new(0u64));
        let sql = self.sql.clone();
        let written_in = written.clone();
        let mut pending = Some(statements);
        let body = Closure::<dyn FnMut() -> Result<JsValue, JsValue>>::new(move || {
            let statements = pending.take().unwrap_or_default();
            for st in statements {
                let cursor = sql
                    .exec(&st.sql, st.bindings)
                    .map_err(|e| JsValue::from_str(&e.to_string()))?;
                written_in.set(written_in.get() + cursor.rows_written() as u64);
            }
            Ok(JsValue::UNDEFINED)
        });
        let transaction_sync =
            js_sys::Reflect::get(&self.raw, &JsValue::from_str("transactionSync"))
                .ok()
                .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
                .ok_or_else(|| {
                    StoreError::new(
                        StoreErrorKind::Unavailable,
                        "storage.transactionSync is missing (needs a SQLite-backed Durable Object)",
                    )
                })?;
        transaction_sync
            .call1(&self.raw, body.as_ref().unchecked_ref())
            .map_err(js_error)?;
        Ok(written.get())
    }
}

/// Chunks of `value`: at least one (an empty value is one empty chunk).
fn chunks(value: &[u8]) -> Vec<&[u8]> {
    if value.is_empty() {
        vec![value]
    } else {
        value.chunks(CHUNK_BYTES).collect()
    }
}

/// `?, ?, ..., ?` with `n` placeholders.
fn placeholders(n: usize) -> String {
    let mut s = String::with_capacity(n * 3);
    for i in 0..n {
        if i > 0 {
            s.push_str(", ");
        }
        s.push('?');
    }
    s
}

/// The statements that apply `changes`, in order: deletes, stale-chunk removal, upserts.
fn plan(changes: &ChangeSet) -> Vec<Statement> {
    let mut out = Vec::new();

    // 1. Deleted keys, every chunk.
    let deletes: Vec<&String> = changes.deletes().collect();
    for batch in deletes.chunks(MAX_BINDINGS) {
        out.push(Statement {
            sql: format!(
                "DELETE FROM queen_kv WHERE key IN ({})",
                placeholders(batch.len())
            ),
            bindings: batch
                .iter()
                .map(|k| SqlStorageValue::from(k.as_str()))
                .collect(),
        });
    }

    // 2. Chunks beyond the new length of each put key (left over from a longer old value).
    let mut by_count: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
    for (key, value) in changes.puts() {
        by_count
            .entry(chunks(value).len())
            .or_default()
            .push(key.as_str());
    }
    for (count, keys) in &by_count {
        for batch in keys.chunks(MAX_BINDINGS - 1) {
            let mut bindings = vec![SqlStorageValue::Integer(*count as i64)];
            bindings.extend(batch.iter().map(|k| SqlStorageValue::from(*k)));
            out.push(Statement {
                sql: format!(
                    "DELETE FROM queen_kv WHERE chunk >= ? AND key IN ({})",
                    placeholders(batch.len())
                ),
                bindings,
            });
        }
    }

    // 3. Upsert every chunk, batched by parameter count and bytes.
    let mut rows: Vec<SqlStorageValue> = Vec::new();
    let mut batch_bytes = 0usize;
    let flush = |rows: &mut Vec<SqlStorageValue>, out: &mut Vec<Statement>| {
        if rows.is_empty() {
            return;
        }
        let n = rows.len() / 3;
        let values = vec!["(?, ?, ?)"; n].join(", ");
        out.push(Statement {
            sql: format!(
                "INSERT INTO queen_kv (key, chunk, value) VALUES {values} \
                 ON CONFLICT (key, chunk) DO UPDATE SET value = excluded.value"
            ),
            bindings: std::mem::take(rows),
        });
    };
    for (key, value) in changes.puts() {
        for (i, chunk) in chunks(value).into_iter().enumerate() {
            if rows.len() + 3 > MAX_BINDINGS
                || (!rows.is_empty() && batch_bytes + chunk.len() > MAX_BATCH_BYTES)
            {
                flush(&mut rows, &mut out);
                batch_bytes = 0;
            }
            rows.push(SqlStorageValue::from(key.as_str()));
            rows.push(SqlStorageValue::Integer(i as i64));
            rows.push(SqlStorageValue::Blob(chunk.to_vec()));
            batch_bytes += chunk.len();
        }
    }
    flush(&mut rows, &mut out);
    out
}

/// The smallest string greater than every string that starts with `prefix`, or `None` when there is none
/// (empty prefix, or every character is `char::MAX`). Code-point order equals UTF-8 byte order.
fn prefix_end(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let next = match last {
            '\u{D7FF}' => Some('\u{E000}'),
            c => char::from_u32(c as u32 + 1),
        };
        if let Some(next) = next {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

fn sql_error(e: worker::Error) -> StoreError {
    classify(e.to_string())
}

fn js_error(e: JsValue) -> StoreError {
    let message = e
        .dyn_ref::<js_sys::Error>()
        .map(|err| String::from(err.message()))
        .or_else(|| e.as_string())
        .unwrap_or_else(|| format!("{e:?}"));
    classify(message)
}

fn classify(message: String) -> StoreError {
    let lower = message.to_ascii_lowercase();
    let kind = if lower.contains("sqlite_full")
        || lower.contains("database or disk is full")
        || (lower.contains("exceed") && lower.contains("size"))
    {
        StoreErrorKind::QuotaExceeded
    } else {
        StoreErrorKind::Other
    };
    StoreError::new(kind, format!("Durable Object SQLite: {message}"))
}

impl Store for DoStore {
    async fn scan(&self, prefix: &str) -> Result<Vec<Record>, StoreError> {
        let cursor = match prefix_end(prefix) {
            Some(end) => self.sql.exec(
                "SELECT key, chunk, value FROM queen_kv WHERE key >= ? AND key < ? ORDER BY key, chunk",
                vec![SqlStorageValue::from(prefix), SqlStorageValue::from(end)],
            ),
            None => self.sql.exec(
                "SELECT key, chunk, value FROM queen_kv WHERE key >= ? ORDER BY key, chunk",
                vec![SqlStorageValue::from(prefix)],
            ),
        }
        .map_err(sql_error)?;
        self.assemble(cursor, |key| key.starts_with(prefix))
    }

    async fn get(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let mut found: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for batch in keys.chunks(MAX_BINDINGS) {
            let cursor = self
                .sql
                .exec(
                    &format!(
                        "SELECT key, chunk, value FROM queen_kv WHERE key IN ({}) ORDER BY key, chunk",
                        placeholders(batch.len())
                    ),
                    batch
                        .iter()
                        .map(|k| SqlStorageValue::from(k.as_str()))
                        .collect::<Vec<_>>(),
                )
                .map_err(sql_error)?;
            found.extend(self.assemble(cursor, |_| true)?);
        }
        Ok(keys.iter().map(|k| found.get(k).cloned()).collect())
    }

    async fn commit(&self, changes: &ChangeSet) -> Result<(), StoreError> {
        if changes.is_empty() {
            return Ok(());
        }
        let statements = plan(changes);
        let count = statements.len() as u64;
        let written = self.run_in_transaction(statements)?;
        let c = &self.counters;
        c.commits.set(c.commits.get() + 1);
        c.rows_written.set(c.rows_written.get() + written);
        c.statements.set(c.statements.get() + count);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_increments_last_char() {
        assert_eq!(prefix_end("p/"), Some("p0".to_string()));
        assert_eq!(prefix_end(""), None);
        assert_eq!(prefix_end("a\u{D7FF}"), Some("a\u{E000}".to_string()));
        assert_eq!(prefix_end("a\u{10FFFF}"), Some("b".to_string()));
        assert_eq!(prefix_end("\u{10FFFF}"), None);
    }

    #[test]
    fn chunks_of_empty_value_is_one_empty_chunk() {
        assert_eq!(chunks(&[]).len(), 1);
        assert_eq!(chunks(&vec![0; CHUNK_BYTES]).len(), 1);
        assert_eq!(chunks(&vec![0; CHUNK_BYTES + 1]).len(), 2);
    }

    #[test]
    fn plan_respects_binding_limit() {
        let mut changes = ChangeSet::default();
        for i in 0..500 {
            changes.put(format!("k/{i:04}"), vec![1; 10]);
            changes.delete(format!("d/{i:04}"));
        }
        changes.put("big", vec![7; 3 * CHUNK_BYTES + 1]);
        let statements = plan(&changes);
        assert!(statements.iter().all(|s| s.bindings.len() <= MAX_BINDINGS));
        let inserted: usize = statements
            .iter()
            .filter(|s| s.sql.starts_with("INSERT"))
            .map(|s| s.bindings.len() / 3)
            .sum();
        assert_eq!(inserted, 500 + 4);
        // Deletes come first, so a key deleted and re-put in one commit cannot happen, and stale chunk
        // removal precedes the upserts.
        let first_insert = statements
            .iter()
            .position(|s| s.sql.starts_with("INSERT"))
            .unwrap();
        assert!(statements[..first_insert]
            .iter()
            .all(|s| s.sql.starts_with("DELETE")));
    }
}

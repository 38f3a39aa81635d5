//! [`DoStore`]: the [`Store`] trait on Durable Object SQLite storage.
//!
//! # Layout
//!
//! Two tables hold the records:
//!
//! ```sql
//! CREATE TABLE queen_kv (key TEXT NOT NULL, chunk INTEGER NOT NULL, value BLOB NOT NULL,
//!                        PRIMARY KEY (key, chunk)) WITHOUT ROWID
//! CREATE TABLE queen_seg (id INTEGER PRIMARY KEY, value BLOB NOT NULL)
//! ```
//!
//! `queen_seg` holds segment values: a key `s/PID/FIRST` (16 lower-case hex digits each, as
//! `queen_edge::core::segment_key` writes it) with a partition id below 2^21 and a first offset below 2^32
//! ([`segment_id`]) is the row `pid << 32 | first`, when its value is shorter than [`CHUNK_BYTES`]. Ids sort as
//! their keys do, and stay under 2^53, which a JS number (the SQL binding's integers) holds exactly. Every
//! other record is in `queen_kv`: other keys, segment keys whose numbers do not fit, and segment values of
//! [`CHUNK_BYTES`] or more (so a segment key's value lives in one table or the other, never both).
//! Why: `queen_kv` is `WITHOUT ROWID`, an index b-tree whose cells are whole rows, and SQLite reads a whole
//! overflowing row to compare a key with it while it seeks; with segments (15 to 111 KB at batch 100) among
//! them every seek, for a lane record as for a segment, read several segments on its way down. In a rowid
//! table the b-tree's interior cells are integers (docs/decisions.md, "Segments in a table of their own").
//!
//! In `queen_kv` a value is split into chunks of [`CHUNK_BYTES`] (1 MiB, well under the 2 MB row limit of
//! Durable Object SQLite); chunk `0..n` of a key hold the value in order, and an empty value is one empty chunk
//! `0`. Keys are `TEXT` compared with SQLite's default `BINARY` collation (`memcmp` over UTF-8), so `ORDER BY
//! key` is the byte order the [`Store`] contract asks for. A scan reads the key range from `queen_kv` and the
//! id range of the same keys from `queen_seg` (none when no segment key can be in it: [`first_segment_id_from`])
//! and merges them; a get reads the segment keys from `queen_seg` first and whatever it did not find from
//! `queen_kv`; `first_keys` asks both tables for the first key of each range (a statement of two scalar
//! subqueries a range, [`first_keys_row`]) and takes the smaller. A row written is one b-tree entry in either
//! table and no second index: rows written is what Cloudflare bills.
//!
//! A third table, `queen_meta`, records the layout version ([`FORMAT_VERSION`]); opening storage written by a
//! newer layout fails with [`StoreErrorKind::NewerFormat`] instead of misreading it. Format 1 (sessions 6 to
//! 9) kept segments in `queen_kv` too: opening it creates `queen_seg` and the triggers and writes format 2, in
//! one `transactionSync`, and moves nothing (the old segments are read where they are, and move to
//! `queen_seg` when they are written again). From then on a format 1 build refuses the storage, as it must: it
//! would not look in `queen_seg`.
//!
//! # Commit
//!
//! A commit is at most four kinds of statement, in this order:
//! - `DELETE FROM queen_seg WHERE id IN (?, ...)` for the segment keys it deletes;
//! - `DELETE FROM queen_kv WHERE key IN (?, ...)` for every key it deletes (every chunk of each; a segment key
//!   too, whose value may be in `queen_kv`);
//! - a trim of each value of [`CHUNK_BYTES`] or more (below), and for such a value under a segment key the
//!   delete of its `queen_seg` row;
//! - `INSERT INTO queen_kv (key, chunk, value) VALUES (?, 0, ?), (?, ?, ?), ... ON CONFLICT (key, chunk) DO
//!   UPDATE SET value = excluded.value` for every chunk of every value it puts, chunk 0 of a key first (an
//!   upsert writes one row, where `INSERT OR REPLACE` would delete and insert). A value bound for `queen_seg`
//!   is a row `(key, -1 - id, value)`: the trigger [`ROUTE_TRIGGER`] (`BEFORE INSERT` on `queen_kv`, for a
//!   negative chunk) upserts it into `queen_seg`, deletes the key's rows in `queen_kv` (a value of
//!   [`CHUNK_BYTES`] or more, or one format 1 wrote: it finds none otherwise) and skips the row. So a push
//!   (its segment, index entry and partition record) is still one statement, and writes the rows it wrote
//!   before.
//!
//! A put must not leave an old, longer value's later chunks behind:
//! - a value shorter than [`CHUNK_BYTES`] is one chunk, whose chunk 0 is shorter than a full chunk; when such
//!   a chunk 0 updates an existing one, the trigger [`SHRINK_TRIGGER`] on `queen_kv` deletes the key's chunks
//!   after 0, inside the same statement (it finds none unless the old value had several). The update of a
//!   lane record at every pop and ack runs one range delete that finds nothing;
//! - a value of [`CHUNK_BYTES`] or more gets, before its upserts, `DELETE FROM queen_kv WHERE key = ? AND
//!   chunk >= n` (`n` its chunk count), so its own chunks are updated in place (one row each) and only the
//!   old ones past `n` are deleted. Such a value's chunks are statements of their own anyway
//!   ([`MAX_BATCH_BYTES`]), so the commit is already several statements.
//!
//! Rows are batched into statements of up to [`MAX_BINDINGS`] bound parameters and [`MAX_BATCH_BYTES`] of
//! values (chunk numbers are written into the statement, keys, values and `queen_seg` ids are bound). A commit
//! of one statement (every push, pop and ack of up to 49 keys: they put and do not delete) runs it as it is:
//! one SQLite statement applies all or nothing (the triggers' writes are part of it), and it joins the
//! object's implicit transaction, which workerd commits before any answer leaves the object (its output
//! gate), together with the other writes of the same turn. A commit of several statements (deletes and puts
//! together, or more rows than one statement holds) runs them inside one `ctx.storage.transactionSync(...)`
//! call, so it still applies all or nothing (the workers-rs binding, worker 0.8.7, has no
//! `transactionSync`: it is called on the raw storage object through `js_sys::Reflect`).
//! `cursor.rowsWritten` counts the triggers' writes too, so rows written is still the billed figure.
//!
//! `/__test/store/previous-build` and `/__test/store/downgrade` ([`crate::selftest`]) check storage format 1
//! wrote, with that build's SQL and with a broker's backlog.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use queen_edge::store::{ChangeSet, KeyRange, Record, Store, StoreError, StoreErrorKind};
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};
use worker::{SqlStorage, SqlStorageValue, Storage};

/// Bytes per stored chunk of a value (1 MiB; the Durable Object SQLite row limit is 2 MB).
pub const CHUNK_BYTES: usize = 1024 * 1024;

/// The on-disk layout version this build writes and understands (2: segments in `queen_seg`).
pub const FORMAT_VERSION: i64 = 2;

/// Partition ids below `1 << SEG_PID_BITS` and first offsets below `1 << SEG_FIRST_BITS` make a segment key
/// whose value can live in `queen_seg`: the id `pid << SEG_FIRST_BITS | first` stays under 2^53, which a JS
/// number (the SQL binding's integers) holds exactly.
const SEG_PID_BITS: u32 = 21;
const SEG_FIRST_BITS: u32 = 32;
/// One past the largest `queen_seg` id.
const SEG_ID_END: u64 = 1 << (SEG_PID_BITS + SEG_FIRST_BITS);

/// The table of segment values (module documentation, "Layout").
const SEG_TABLE: &str =
    "CREATE TABLE IF NOT EXISTS queen_seg (id INTEGER PRIMARY KEY, value BLOB NOT NULL)";

/// Puts a row of an upsert into `queen_kv` whose chunk is negative into `queen_seg` instead (id `-1 -
/// chunk`), deletes whatever `queen_kv` holds under its key (a value of [`CHUNK_BYTES`] or more it had
/// before), and skips the row (`RAISE(IGNORE)` ends this row's insert, the statement goes on with the next
/// row). So a commit that puts segments and other records stays one statement. Its name carries a version:
/// a changed body gets a new name.
const ROUTE_TRIGGER: &str = "CREATE TRIGGER IF NOT EXISTS queen_seg_route_v1 \
     BEFORE INSERT ON queen_kv WHEN NEW.chunk < 0 BEGIN \
       INSERT INTO queen_seg (id, value) VALUES (-1 - NEW.chunk, NEW.value) \
         ON CONFLICT (id) DO UPDATE SET value = excluded.value; \
       DELETE FROM queen_kv WHERE key = NEW.key; \
       SELECT RAISE(IGNORE); \
     END";

/// Bound parameters per statement, under SQLite-in-Durable-Objects' limit of 100.
pub const MAX_BINDINGS: usize = 99;

/// Largest total of bound value bytes batched into one `INSERT` (bigger chunks go alone).
const MAX_BATCH_BYTES: usize = 256 * 1024;

/// Deletes the chunks after chunk 0 of a key whose chunk 0 is updated with a one-chunk value (shorter than
/// [`CHUNK_BYTES`], the number in its `WHEN`: see the module documentation). Its name carries a version: a
/// changed body gets a new name, never an old trigger kept by `IF NOT EXISTS`.
const SHRINK_TRIGGER: &str = "CREATE TRIGGER IF NOT EXISTS queen_kv_shrink_v2 \
     AFTER UPDATE OF value ON queen_kv WHEN NEW.chunk = 0 AND length(NEW.value) < 1048576 BEGIN \
       DELETE FROM queen_kv WHERE key = NEW.key AND chunk > 0; \
     END";

/// Drops the trigger of an earlier build of this commit SQL (`queen_kv_shrink_v1`, commit ea7b0ea on branch
/// worker-sql): it deleted a key's chunks after 0 on every update of chunk 0, which that build's commits
/// counted on and this build's do not (kept, it would delete and insert again what a multi-chunk put updates in
/// place). That build, opening storage again, creates it again and commits right with both in place.
const DROP_EARLIER_TRIGGER: &str = "DROP TRIGGER IF EXISTS queen_kv_shrink_v1";

/// The start of the statement that deletes the old chunks past a multi-chunk value's own (its key and
/// chunk count follow).
const TRIM_HEAD: &str = "DELETE FROM queen_kv WHERE key = ? AND chunk >= ";

/// The start and end of a statement that puts chunks.
const UPSERT_HEAD: &str = "INSERT INTO queen_kv (key, chunk, value) VALUES ";
const UPSERT_TAIL: &str = " ON CONFLICT (key, chunk) DO UPDATE SET value = excluded.value";

/// The start and end of a statement that deletes keys.
const DELETE_HEAD: &str = "DELETE FROM queen_kv WHERE key IN (";
const DELETE_TAIL: &str = ")";

/// Deletes the `queen_seg` row of a segment key whose new value, of [`CHUNK_BYTES`] or more, goes to `queen_kv`.
const SEG_EVICT: &str = "DELETE FROM queen_seg WHERE id = ?";

/// The start of a statement that deletes segment values from `queen_seg` (ends with [`DELETE_TAIL`]).
const SEG_DELETE_HEAD: &str = "DELETE FROM queen_seg WHERE id IN (";

/// The key of the row [`DoStore::commit_then_fail`] adds: its `NULL` value breaks `queen_kv`'s `NOT NULL`,
/// so the statement fails at its last row.
const FAIL_KEY: &str = "queen_kv/commit_then_fail";

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
/// Cloning is cheap; clones share the storage, the counters and the commit callback.
#[derive(Debug, Clone)]
pub struct DoStore {
    sql: SqlStorage,
    raw: JsValue,
    counters: Rc<Counters>,
    transaction: Rc<Transaction>,
}

/// One SQL statement with its bound parameters, prepared before the transaction starts; the values are
/// borrowed from the change set until they are turned into JS values ([`Statement::into_js`]).
struct Statement<'a> {
    sql: String,
    bindings: Vec<Binding<'a>>,
}

/// A bound parameter.
#[derive(Debug, Clone, Copy)]
enum Binding<'a> {
    Text(&'a str),
    Blob(&'a [u8]),
    /// An integer whose magnitude is at most 2^53 (exact as a JS number).
    Int(i64),
}

/// A statement with its parameters as JS values (a blob copied once, into a `Uint8Array`).
struct JsStatement {
    sql: String,
    bindings: Vec<JsValue>,
}

impl Statement<'_> {
    fn into_js(self) -> JsStatement {
        let bindings = self
            .bindings
            .into_iter()
            .map(|b| match b {
                Binding::Text(text) => JsValue::from_str(text),
                Binding::Blob(bytes) => js_sys::Uint8Array::from(bytes).into(),
                Binding::Int(n) => JsValue::from_f64(n as f64),
            })
            .collect();
        JsStatement {
            sql: self.sql,
            bindings,
        }
    }
}

/// `storage.transactionSync` and the one callback every commit hands it (made once per store, not per
/// commit): the callback runs the statements left in `pending` and adds their rows written to `written`.
struct Transaction {
    transaction_sync: js_sys::Function,
    body: Closure<dyn FnMut() -> Result<JsValue, JsValue>>,
    pending: Rc<RefCell<Vec<JsStatement>>>,
    written: Rc<Cell<u64>>,
}

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Transaction")
    }
}

impl Transaction {
    fn new(sql: &SqlStorage, raw: &JsValue) -> Result<Self, StoreError> {
        let transaction_sync = js_sys::Reflect::get(raw, &JsValue::from_str("transactionSync"))
            .ok()
            .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
            .ok_or_else(|| {
                StoreError::new(
                    StoreErrorKind::Unavailable,
                    "storage.transactionSync is missing (needs a SQLite-backed Durable Object)",
                )
            })?;
        let pending: Rc<RefCell<Vec<JsStatement>>> = Rc::default();
        let written: Rc<Cell<u64>> = Rc::default();
        let (sql, pending_in, written_in) = (sql.clone(), pending.clone(), written.clone());
        let body = Closure::<dyn FnMut() -> Result<JsValue, JsValue>>::new(move || {
            let statements = std::mem::take(&mut *pending_in.borrow_mut());
            for st in statements {
                let written = crate::sql_exec::exec(&sql, &st.sql, st.bindings)?;
                written_in.set(written_in.get() + written);
            }
            Ok(JsValue::UNDEFINED)
        });
        Ok(Transaction {
            transaction_sync,
            body,
            pending,
            written,
        })
    }
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
        let sql = storage.sql();
        let transaction = Rc::new(Transaction::new(&sql, &raw)?);
        let store = DoStore {
            sql,
            raw,
            counters: Rc::new(Counters::default()),
            transaction,
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
        let stored = match rows.first().and_then(|row| row.first()) {
            None => None,
            Some(SqlStorageValue::Integer(v)) if *v <= FORMAT_VERSION => Some(*v),
            Some(other) => {
                return Err(StoreError::new(
                    StoreErrorKind::NewerFormat,
                    format!(
                        "storage format {other:?} is newer than this build understands ({FORMAT_VERSION})"
                    ),
                ))
            }
        };
        // Only once the format is known to be this build's or an older one: storage of a newer layout is left
        // as it was found.
        let schema = [
            SEG_TABLE,
            DROP_EARLIER_TRIGGER,
            SHRINK_TRIGGER,
            ROUTE_TRIGGER,
        ];
        if stored == Some(FORMAT_VERSION) {
            for statement in schema {
                store.exec(statement, Vec::new())?;
            }
        } else {
            // New storage, or format 1 (segments in `queen_kv`, which stay there: reads look in both tables).
            // The schema and the version in one transaction: a build of format 1 refuses the storage from the
            // moment `queen_seg_route_v1` can put a segment where it would not look.
            let mut statements: Vec<Statement> = schema
                .iter()
                .map(|sql| Statement {
                    sql: sql.to_string(),
                    bindings: Vec::new(),
                })
                .collect();
            statements.push(Statement {
                sql: format!(
                    "INSERT INTO queen_meta (name, value) VALUES ('format', {FORMAT_VERSION}) \
                     ON CONFLICT (name) DO UPDATE SET value = excluded.value"
                ),
                bindings: Vec::new(),
            });
            store.run_in_transaction(statements)?;
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

    /// Test hook: commits `changes` as [`Store::commit`] would, with one more row at the end that fails,
    /// as a commit that breaks halfway would. Must return `Err` and leave nothing of `changes` visible.
    pub(crate) fn commit_then_fail(&self, changes: &ChangeSet) -> Result<(), StoreError> {
        self.run(plan(changes, true)).map(|_| ())
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

    /// The records of a `SELECT id, value FROM queen_seg ... ORDER BY id`, in key order, and counts the rows
    /// read.
    fn assemble_segments(&self, cursor: worker::SqlCursor) -> Result<Vec<Record>, StoreError> {
        let mut out: Vec<Record> = Vec::new();
        for row in cursor.raw() {
            let row = row.map_err(sql_error)?;
            let mut cols = row.into_iter();
            match (cols.next(), cols.next()) {
                (Some(SqlStorageValue::Integer(id)), Some(SqlStorageValue::Blob(value)))
                    if (0..SEG_ID_END as i64).contains(&id) =>
                {
                    out.push((segment_key_of(id as u64), value));
                }
                (Some(SqlStorageValue::Integer(id)), Some(SqlStorageValue::Null) | None)
                    if (0..SEG_ID_END as i64).contains(&id) =>
                {
                    out.push((segment_key_of(id as u64), Vec::new()));
                }
                other => {
                    return Err(StoreError::other(format!(
                        "queen_seg row has unexpected column types: {other:?}"
                    )))
                }
            }
        }
        let read = self.counters.rows_read.get() + cursor.rows_read() as u64;
        self.counters.rows_read.set(read);
        Ok(out)
    }

    /// The segment values of `queen_seg` whose keys lie in `[from, to)` (`to` `None`: no upper bound), in key
    /// order; no query when no id can lie there.
    fn scan_segments(&self, from: &str, to: Option<&str>) -> Result<Vec<Record>, StoreError> {
        let first = first_segment_id_from(from);
        let end = to.map_or(SEG_ID_END, first_segment_id_from);
        if first >= end {
            return Ok(Vec::new());
        }
        let cursor = self
            .sql
            .exec(
                "SELECT id, value FROM queen_seg WHERE id BETWEEN ? AND ? ORDER BY id",
                vec![
                    SqlStorageValue::Integer(first as i64),
                    SqlStorageValue::Integer((end - 1) as i64),
                ],
            )
            .map_err(sql_error)?;
        self.assemble_segments(cursor)
    }

    /// The first key of `range` ([`Store::first_keys`]): one statement, [`first_keys_row`].
    fn first_key(&self, range: &KeyRange) -> Result<Option<String>, StoreError> {
        let (query, bindings) = first_keys_row(range);
        let cursor = self.sql.exec(&query, bindings).map_err(sql_error)?;
        let mut first = None;
        for row in cursor.raw() {
            let mut cols = row.map_err(sql_error)?.into_iter();
            let segment = match cols.next() {
                Some(SqlStorageValue::Integer(id)) if (0..SEG_ID_END as i64).contains(&id) => {
                    Some(segment_key_of(id as u64))
                }
                Some(SqlStorageValue::Null) => None,
                other => {
                    return Err(StoreError::other(format!(
                        "first_keys: queen_seg id of unexpected type: {other:?}"
                    )))
                }
            };
            let kv = match cols.next() {
                Some(SqlStorageValue::String(key)) => Some(key),
                Some(SqlStorageValue::Null) => None,
                other => {
                    return Err(StoreError::other(format!(
                        "first_keys: queen_kv key of unexpected type: {other:?}"
                    )))
                }
            };
            // A key is in one table or the other: the first of the range is the smaller.
            first = match (segment, kv) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        let read = self.counters.rows_read.get() + cursor.rows_read() as u64;
        self.counters.rows_read.set(read);
        Ok(first)
    }

    /// Runs the statements of a commit, returning the rows written: one statement as it is (it applies all
    /// or nothing by itself), several inside one `transactionSync`.
    fn run(&self, mut statements: Vec<Statement>) -> Result<u64, StoreError> {
        if statements.len() == 1 {
            let JsStatement { sql, bindings } = statements.remove(0).into_js();
            return crate::sql_exec::exec(&self.sql, &sql, bindings).map_err(js_error);
        }
        self.run_in_transaction(statements)
    }

    /// Runs `statements` inside one `transactionSync`, returning the rows written.
    fn run_in_transaction(&self, statements: Vec<Statement>) -> Result<u64, StoreError> {
        let t = &self.transaction;
        *t.pending.borrow_mut() = statements.into_iter().map(Statement::into_js).collect();
        t.written.set(0);
        let outcome = t
            .transaction_sync
            .call1(&self.raw, t.body.as_ref().unchecked_ref());
        // A statement that threw leaves the rest unrun: never let them reach the next commit.
        t.pending.borrow_mut().clear();
        outcome.map_err(js_error)?;
        Ok(t.written.get())
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

/// The `queen_seg` id of `key` when `key` is a segment key (`s/PID/FIRST`, 16 lower-case hex digits each,
/// as `queen_edge::core::segment_key` writes it) whose numbers fit ([`SEG_PID_BITS`], [`SEG_FIRST_BITS`]); the
/// id is `pid << SEG_FIRST_BITS | first`, so ids sort as their keys do. Any other key is `None`.
pub(crate) fn segment_id(key: &str) -> Option<i64> {
    let bytes = key.as_bytes();
    if bytes.len() != 35 || !key.starts_with("s/") || bytes[18] != b'/' {
        return None;
    }
    let hex = |digits: &[u8]| -> Option<u64> {
        digits.iter().try_fold(0u64, |n, &d| {
            let v = match d {
                b'0'..=b'9' => d - b'0',
                b'a'..=b'f' => d - b'a' + 10,
                _ => return None,
            };
            Some(n << 4 | u64::from(v))
        })
    };
    let pid = hex(&bytes[2..18])?;
    let first = hex(&bytes[19..35])?;
    if pid >> SEG_PID_BITS != 0 || first >> SEG_FIRST_BITS != 0 {
        return None;
    }
    Some((pid << SEG_FIRST_BITS | first) as i64)
}

/// The key of `queen_seg` id `id` (the inverse of [`segment_id`]).
fn segment_key_of(id: u64) -> String {
    format!(
        "s/{:016x}/{:016x}",
        id >> SEG_FIRST_BITS,
        id & ((1 << SEG_FIRST_BITS) - 1)
    )
}

/// The smallest `queen_seg` id whose key is `bound` or after it, [`SEG_ID_END`] when none is (a binary search:
/// [`segment_key_of`] grows with the id).
fn first_segment_id_from(bound: &str) -> u64 {
    let (mut low, mut high) = (0u64, SEG_ID_END);
    while low < high {
        let mid = low + (high - low) / 2;
        if segment_key_of(mid).as_str() >= bound {
            high = mid;
        } else {
            low = mid + 1;
        }
    }
    low
}

/// The statement of [`Store::first_keys`] for `range`, with its bindings: one row of the first `queen_seg`
/// id of the range (`NULL` when no id can lie in it) and the first `queen_kv` key of it, each a scalar
/// subquery that seeks once in its table's b-tree and reads at most one row.
fn first_keys_row(range: &KeyRange) -> (String, Vec<SqlStorageValue>) {
    let (prefix, from) = (range.prefix.as_str(), range.from.as_str());
    // Every key that starts with the prefix is before `from`: nothing can be in the range.
    if from > prefix && !from.starts_with(prefix) {
        return ("SELECT NULL, NULL".into(), Vec::new());
    }
    let lower = from.max(prefix);
    let upper = prefix_end(prefix);
    let mut bindings = Vec::with_capacity(4);
    let first = first_segment_id_from(lower);
    let end = upper.as_deref().map_or(SEG_ID_END, first_segment_id_from);
    let segment = if first < end {
        bindings.push(SqlStorageValue::Integer(first as i64));
        bindings.push(SqlStorageValue::Integer((end - 1) as i64));
        "(SELECT id FROM queen_seg WHERE id BETWEEN ? AND ? ORDER BY id LIMIT 1)"
    } else {
        "NULL"
    };
    bindings.push(SqlStorageValue::from(lower));
    let kv = match upper {
        Some(upper) => {
            bindings.push(SqlStorageValue::from(upper));
            "(SELECT key FROM queen_kv WHERE key >= ? AND key < ? ORDER BY key LIMIT 1)"
        }
        None => "(SELECT key FROM queen_kv WHERE key >= ? ORDER BY key LIMIT 1)",
    };
    (format!("SELECT {segment}, {kv}"), bindings)
}

/// `a` and `b`, each in key order and with no key in both, as one list in key order.
fn merge_records(a: Vec<Record>, b: Vec<Record>) -> Vec<Record> {
    if b.is_empty() {
        return a;
    }
    if a.is_empty() {
        return b;
    }
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
    loop {
        let take_a = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => x.0 < y.0,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return out,
        };
        out.extend(if take_a { a.next() } else { b.next() });
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

/// The statements of a commit of `changes` (module documentation, "Commit"): the deletes, the trims of
/// multi-chunk values, then every chunk of every put (chunk 0 of a key first), batched by bound parameters and bytes; with `fail`, one more put
/// row at the end whose `NULL` value fails its statement.
fn plan(changes: &ChangeSet, fail: bool) -> Vec<Statement<'_>> {
    let mut segment_deletes = Batch::new(SEG_DELETE_HEAD, DELETE_TAIL);
    let mut deletes = Batch::new(DELETE_HEAD, DELETE_TAIL);
    for key in changes.deletes() {
        if let Some(id) = segment_id(key) {
            segment_deletes.row("?", &[Binding::Int(id)], 0);
        }
        // A segment key's value of CHUNK_BYTES or more, or one format 1 wrote, is in `queen_kv`.
        deletes.row("?", &[Binding::Text(key)], 0);
    }
    let mut trims = Vec::new();
    let mut puts = Batch::new(UPSERT_HEAD, UPSERT_TAIL);
    for (key, value) in changes.puts() {
        let id = segment_id(key);
        if let Some(id) = id.filter(|_| value.len() < CHUNK_BYTES) {
            // ROUTE_TRIGGER puts it in `queen_seg`.
            puts.row(
                "(?, ?, ?)",
                &[
                    Binding::Text(key),
                    Binding::Int(-1 - id),
                    Binding::Blob(value),
                ],
                value.len(),
            );
            continue;
        }
        let parts = chunks(value);
        if value.len() >= CHUNK_BYTES {
            trims.push(Statement {
                sql: format!("{TRIM_HEAD}{}", parts.len()),
                bindings: vec![Binding::Text(key)],
            });
            if let Some(id) = id {
                trims.push(Statement {
                    sql: SEG_EVICT.to_string(),
                    bindings: vec![Binding::Int(id)],
                });
            }
        }
        for (i, chunk) in parts.into_iter().enumerate() {
            puts.row(
                &format!("(?, {i}, ?)"),
                &[Binding::Text(key), Binding::Blob(chunk)],
                chunk.len(),
            );
        }
    }
    if fail {
        puts.row("(?, 0, NULL)", &[Binding::Text(FAIL_KEY)], 0);
    }
    let mut statements = segment_deletes.finish();
    statements.extend(deletes.finish());
    statements.extend(trims);
    statements.extend(puts.finish());
    statements
}

/// Rows of one kind (the `tuple`s of [`Batch::row`] between `head` and `tail`) gathered into statements.
struct Batch<'a> {
    head: &'static str,
    tail: &'static str,
    done: Vec<Statement<'a>>,
    sql: String,
    bindings: Vec<Binding<'a>>,
    rows: usize,
    bytes: usize,
}

impl<'a> Batch<'a> {
    fn new(head: &'static str, tail: &'static str) -> Self {
        Batch {
            head,
            tail,
            done: Vec::new(),
            sql: String::new(),
            bindings: Vec::new(),
            rows: 0,
            bytes: 0,
        }
    }

    /// Adds one row (`tuple`, with `bindings` for its `?`s and `len` bytes of value), starting a new
    /// statement when this one would pass [`MAX_BINDINGS`] or [`MAX_BATCH_BYTES`].
    fn row(&mut self, tuple: &str, bindings: &[Binding<'a>], len: usize) {
        if self.rows > 0
            && (self.bindings.len() + bindings.len() > MAX_BINDINGS
                || self.bytes + len > MAX_BATCH_BYTES)
        {
            self.flush();
        }
        if self.rows == 0 {
            self.sql.push_str(self.head);
        } else {
            self.sql.push_str(", ");
        }
        self.sql.push_str(tuple);
        self.bindings.extend_from_slice(bindings);
        self.rows += 1;
        self.bytes += len;
    }

    fn flush(&mut self) {
        if self.rows == 0 {
            return;
        }
        self.sql.push_str(self.tail);
        self.done.push(Statement {
            sql: std::mem::take(&mut self.sql),
            bindings: std::mem::take(&mut self.bindings),
        });
        self.rows = 0;
        self.bytes = 0;
    }

    fn finish(mut self) -> Vec<Statement<'a>> {
        self.flush();
        self.done
    }
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
        let end = prefix_end(prefix);
        let segments = self.scan_segments(prefix, end.as_deref())?;
        let cursor = match end {
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
        let records = self.assemble(cursor, |key| key.starts_with(prefix))?;
        Ok(merge_records(records, segments))
    }

    async fn get(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let mut found: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        let ids: Vec<SqlStorageValue> = keys
            .iter()
            .filter_map(|k| segment_id(k).map(SqlStorageValue::Integer))
            .collect();
        for batch in ids.chunks(MAX_BINDINGS) {
            let cursor = self
                .sql
                .exec(
                    &format!(
                        "SELECT id, value FROM queen_seg WHERE id IN ({})",
                        placeholders(batch.len())
                    ),
                    batch.to_vec(),
                )
                .map_err(sql_error)?;
            found.extend(self.assemble_segments(cursor)?);
        }
        // Every other key, and a segment key `queen_seg` does not hold (a value of CHUNK_BYTES or more, one
        // format 1 wrote, or none).
        let rest: Vec<&String> = keys.iter().filter(|k| !found.contains_key(*k)).collect();
        for batch in rest.chunks(MAX_BINDINGS) {
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
        // Each value moves out of the map (a segment is tens of kilobytes); a key asked for twice gets a
        // copy of what its first place got.
        let mut first_place: BTreeMap<&str, usize> = BTreeMap::new();
        let mut values: Vec<Option<Vec<u8>>> = Vec::with_capacity(keys.len());
        for key in keys {
            let value = match found.remove(key) {
                Some(value) => {
                    first_place.insert(key, values.len());
                    Some(value)
                }
                None => first_place
                    .get(key.as_str())
                    .and_then(|&at| values[at].clone()),
            };
            values.push(value);
        }
        Ok(values)
    }

    async fn first_keys(&self, ranges: &[KeyRange]) -> Result<Vec<Option<String>>, StoreError> {
        // One statement a range: workerd's SQLite refuses a `SELECT` of 48 subquery columns, and a
        // `UNION ALL` of 24 rows. Each call is synchronous and reads at most two rows.
        ranges.iter().map(|range| self.first_key(range)).collect()
    }

    async fn commit(&self, changes: &ChangeSet) -> Result<(), StoreError> {
        if changes.is_empty() {
            return Ok(());
        }
        let statements = plan(changes, false);
        let count = statements.len() as u64;
        let written = self.run(statements)?;
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
    fn the_shrink_trigger_skips_values_of_a_full_chunk_or_more() {
        assert!(SHRINK_TRIGGER.contains(&format!("length(NEW.value) < {CHUNK_BYTES} ")));
    }

    #[test]
    fn segment_ids_are_the_segment_keys_that_fit_in_key_order() {
        let key = |pid: u64, first: u64| format!("s/{pid:016x}/{first:016x}");
        assert_eq!(segment_id(&key(0, 0)), Some(0));
        assert_eq!(segment_id(&key(1, 5)), Some((1 << 32) + 5));
        let top = key((1 << SEG_PID_BITS) - 1, (1 << SEG_FIRST_BITS) - 1);
        assert_eq!(segment_id(&top), Some(SEG_ID_END as i64 - 1));
        // Ids and `-1 - id` stay exact as JS numbers.
        const { assert!(SEG_ID_END <= 1 << 53) };
        for other in [
            key(1 << SEG_PID_BITS, 0),
            key(0, 1 << SEG_FIRST_BITS),
            key(u64::MAX, u64::MAX),
            "s/000000000000000A/0000000000000000".to_string(),
            "s/0000000000000001/000000000000000".to_string(),
            "s/0000000000000001/0000000000000000x".to_string(),
            "x/0000000000000001/0000000000000000".to_string(),
            "s/0000000000000001-0000000000000000".to_string(),
            "s/+000000000000001/0000000000000000".to_string(),
        ] {
            assert_eq!(segment_id(&other), None, "{other}");
        }
        for id in [
            0,
            1,
            (1 << 32) - 1,
            1 << 32,
            12_345 << 32 | 678,
            SEG_ID_END - 1,
        ] {
            assert_eq!(segment_id(&segment_key_of(id)), Some(id as i64));
            assert!(segment_key_of(id) < segment_key_of(id + 1) || id + 1 == SEG_ID_END);
        }
    }

    #[test]
    fn the_first_segment_id_from_a_bound_is_the_first_key_at_or_after_it() {
        assert_eq!(first_segment_id_from(""), 0);
        assert_eq!(first_segment_id_from("s/"), 0);
        assert_eq!(first_segment_id_from("s0"), SEG_ID_END);
        assert_eq!(first_segment_id_from("t"), SEG_ID_END);
        assert_eq!(first_segment_id_from("s/0000000000000001/"), 1 << 32);
        assert_eq!(first_segment_id_from("s/00000000000000010"), 2 << 32);
        assert_eq!(
            first_segment_id_from("s/0000000000000001/0000000000000005"),
            (1 << 32) + 5
        );
        assert_eq!(
            first_segment_id_from("s/0000000000000001/0000000000000005x"),
            (1 << 32) + 6
        );
        assert_eq!(first_segment_id_from("s/0000000000200000"), SEG_ID_END);
        assert_eq!(first_segment_id_from("s/00000000001fffff/1"), SEG_ID_END);
    }

    #[test]
    fn a_first_keys_statement_binds_only_what_its_range_can_hold() {
        let range = |prefix: &str, from: &str| KeyRange {
            prefix: prefix.into(),
            from: from.into(),
        };
        // `from` after every key of the prefix: no subquery.
        let (row, bindings) = first_keys_row(&range("fk/", "s/"));
        assert_eq!((row.as_str(), bindings.len()), ("SELECT NULL, NULL", 0));
        // No segment key can start with `fk/`: `queen_kv` only.
        let (row, bindings) = first_keys_row(&range("fk/", ""));
        assert!(
            row.starts_with("SELECT NULL, (SELECT key FROM queen_kv"),
            "{row}"
        );
        assert_eq!(bindings.len(), 2);
        // A partition's segments from offset 5 on: both tables, the ids from `pid << 32 | 5`.
        let (row, bindings) =
            first_keys_row(&range("s/0000000000000002/", &segment_key_of(2 << 32 | 5)));
        assert!(
            row.contains("queen_seg") && row.contains("queen_kv"),
            "{row}"
        );
        assert_eq!(bindings.len(), 4);
        assert!(matches!(bindings[0], SqlStorageValue::Integer(id) if id == (2 << 32 | 5)));
        assert!(matches!(bindings[1], SqlStorageValue::Integer(id) if id == (3 << 32) - 1));
    }

    #[test]
    fn merged_records_are_in_key_order() {
        let r = |k: &str| (k.to_string(), k.as_bytes().to_vec());
        let merged = merge_records(
            vec![r("s/"), r("s/1x"), r("s/3")],
            vec![r("s/0"), r("s/1"), r("s/2"), r("s/4")],
        );
        let keys: Vec<&str> = merged.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["s/", "s/0", "s/1", "s/1x", "s/2", "s/3", "s/4"]);
        assert_eq!(merge_records(Vec::new(), vec![r("a")]), vec![r("a")]);
    }

    #[test]
    fn a_push_with_a_segment_is_one_upsert_the_segment_row_routed() {
        let mut changes = ChangeSet::default();
        let seg = "s/0000000000000002/0000000000000064".to_string();
        changes.put(seg.clone(), vec![1; 1000]);
        changes.put("x/0000000000000002/0000000000000064", vec![2; 30]);
        changes.put("p/0000000000000002", vec![3; 20]);
        let statements = plan(&changes, false);
        assert_eq!(statements.len(), 1);
        assert_eq!(
            statements[0].sql,
            format!("{UPSERT_HEAD}(?, 0, ?), (?, ?, ?), (?, 0, ?){UPSERT_TAIL}")
        );
        assert!(
            matches!(statements[0].bindings[3], Binding::Int(n) if n == -1 - ((2 << 32) + 100))
        );
        // A segment key's value of CHUNK_BYTES or more stays in `queen_kv`, its `queen_seg` row deleted.
        let mut big = ChangeSet::default();
        big.put(seg.clone(), vec![4; CHUNK_BYTES + 1]);
        let statements = plan(&big, false);
        let sqls: Vec<&str> = statements.iter().map(|s| s.sql.as_str()).collect();
        assert_eq!(sqls[..2], [format!("{TRIM_HEAD}2").as_str(), SEG_EVICT]);
        assert!(sqls[2..].iter().all(|s| s.starts_with(UPSERT_HEAD)));
        // A delete of a segment key deletes it from both tables, `queen_seg` first.
        let mut delete = ChangeSet::default();
        delete.delete(seg);
        delete.delete("x/0000000000000002/0000000000000064");
        let statements = plan(&delete, false);
        assert_eq!(statements.len(), 2);
        assert_eq!(
            statements[0].sql,
            format!("{SEG_DELETE_HEAD}?{DELETE_TAIL}")
        );
        assert_eq!(statements[1].sql, format!("{DELETE_HEAD}?, ?{DELETE_TAIL}"));
    }

    #[test]
    fn chunks_of_empty_value_is_one_empty_chunk() {
        assert_eq!(chunks(&[]).len(), 1);
        assert_eq!(chunks(&vec![0; CHUNK_BYTES]).len(), 1);
        assert_eq!(chunks(&vec![0; CHUNK_BYTES + 1]).len(), 2);
    }

    #[test]
    fn plan_respects_binding_and_byte_limits() {
        let mut changes = ChangeSet::default();
        for i in 0..500 {
            changes.put(format!("k/{i:04}"), vec![1; 10]);
            changes.delete(format!("d/{i:04}"));
        }
        changes.put("big", vec![7; 3 * CHUNK_BYTES + 1]);
        let statements = plan(&changes, false);
        assert!(statements.iter().all(|s| s.bindings.len() <= MAX_BINDINGS));
        let deletes: Vec<&Statement> = statements
            .iter()
            .filter(|s| s.sql.starts_with(DELETE_HEAD))
            .collect();
        let puts: Vec<&Statement> = statements
            .iter()
            .filter(|s| s.sql.starts_with(UPSERT_HEAD))
            .collect();
        assert_eq!(deletes.len() + 1 + puts.len(), statements.len());
        assert!(deletes.iter().all(|s| s.sql.ends_with(DELETE_TAIL)));
        assert!(puts
            .iter()
            .all(|s| s.sql.starts_with(UPSERT_HEAD) && s.sql.ends_with(UPSERT_TAIL)));
        // Deletes first, then puts.
        assert!(statements[..deletes.len()]
            .iter()
            .all(|s| s.sql.starts_with(DELETE_HEAD)));
        let bound = |list: &[&Statement]| -> usize { list.iter().map(|s| s.bindings.len()).sum() };
        assert_eq!(bound(&deletes), 500, "every delete");
        assert_eq!(
            bound(&puts),
            2 * (500 + 4),
            "every put, the big one in four chunks"
        );
        // A chunk over the byte budget goes alone, and the chunks of a value stay in order.
        let big: Vec<&&Statement> = puts
            .iter()
            .filter(|s| {
                s.bindings
                    .iter()
                    .any(|b| matches!(b, Binding::Blob(v) if v.len() == CHUNK_BYTES))
            })
            .collect();
        assert_eq!(big.len(), 3);
        assert!(big.iter().all(|s| s.bindings.len() == 2));
        // The big value's old chunks past its four are trimmed, before any upsert.
        let trims: Vec<usize> = (0..statements.len())
            .filter(|&i| statements[i].sql.starts_with(TRIM_HEAD))
            .collect();
        assert_eq!(trims.len(), 1);
        assert_eq!(statements[trims[0]].sql, format!("{TRIM_HEAD}4"));
        assert_eq!(trims[0], deletes.len());
        for (i, s) in big.iter().enumerate() {
            assert!(s.sql.starts_with(&format!("{UPSERT_HEAD}(?, {i}, ?)")));
        }
    }

    #[test]
    fn a_put_only_commit_is_one_upsert_and_the_fail_row_joins_it() {
        let mut changes = ChangeSet::default();
        changes.put("s/1", vec![1; 100]);
        changes.put("x/1", vec![2; 10]);
        let statements = plan(&changes, false);
        assert_eq!(statements.len(), 1);
        assert_eq!(
            statements[0].sql,
            format!("{UPSERT_HEAD}(?, 0, ?), (?, 0, ?){UPSERT_TAIL}")
        );
        let failing = plan(&changes, true);
        assert_eq!(failing.len(), 1);
        assert_eq!(
            failing[0].sql,
            format!("{UPSERT_HEAD}(?, 0, ?), (?, 0, ?), (?, 0, NULL){UPSERT_TAIL}")
        );
    }

    #[test]
    fn deletes_and_puts_are_two_statements_deletes_first() {
        let mut changes = ChangeSet::default();
        changes.put("s/1", vec![1; 100]);
        changes.delete("l/1");
        changes.delete("l/2");
        let statements = plan(&changes, false);
        assert_eq!(statements.len(), 2);
        assert_eq!(statements[0].sql, format!("{DELETE_HEAD}?, ?{DELETE_TAIL}"));
        assert_eq!(
            statements[1].sql,
            format!("{UPSERT_HEAD}(?, 0, ?){UPSERT_TAIL}")
        );
        // A delete-only commit that fails: the failing row is a statement of its own after the deletes, so the
        // commit runs in a transaction.
        let mut only_deletes = ChangeSet::default();
        only_deletes.delete("l/1");
        assert_eq!(plan(&only_deletes, false).len(), 1);
        assert_eq!(plan(&only_deletes, true).len(), 2);
    }
}

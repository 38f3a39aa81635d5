//! [`DoStore`]: the [`Store`] trait on Durable Object SQLite storage.
//!
//! # Layout
//!
//! Three tables hold the records:
//!
//! ```sql
//! CREATE TABLE queen_kv (key TEXT NOT NULL, chunk INTEGER NOT NULL, value BLOB NOT NULL,
//!                        PRIMARY KEY (key, chunk)) WITHOUT ROWID
//! CREATE TABLE queen_seg (id INTEGER PRIMARY KEY, value BLOB NOT NULL, blob INTEGER)
//! CREATE TABLE queen_blob (id INTEGER PRIMARY KEY, value BLOB NOT NULL)
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
//! A segment value of [`BLOB_MIN_BYTES`] or more (a push of a few messages or more) is a row of `queen_blob`,
//! appended (the next rowid), and its `queen_seg` row holds an empty `value` and the `blob` id; a shorter one is
//! inline in `queen_seg` (`blob` `NULL`). Why: `queen_seg` ids follow the partitions, so with several partitions
//! pushed at once each new segment goes into the middle of the b-tree, and a leaf holds one long value, so
//! every insert split a full leaf and rewrote its neighbours;
//! appended at the right edge of `queen_blob` it writes its own pages, and its small `queen_seg` row shares a
//! leaf with others (docs/decisions.md, "The disk's share of a batch-100
//! push, and long segments appended to a table of their own"). Triggers keep the
//! two in step: [`ROUTE_BLOB_TRIGGER`] writes both rows, and deleting or rewriting a `queen_seg` row deletes
//! the `queen_blob` row it pointed at ([`BLOB_DELETE_TRIGGER`], [`BLOB_UPDATE_TRIGGER`]). Reads take the value
//! from `queen_blob` when the row points there ([`SEG_ROWS_HEAD`]).
//!
//! In `queen_kv` a value is split into chunks of [`CHUNK_BYTES`] (1 MiB, well under the 2 MB row limit of
//! Durable Object SQLite); chunk `0..n` of a key hold the value in order, and an empty value is one empty chunk
//! `0`. Keys are `TEXT` compared with SQLite's default `BINARY` collation (`memcmp` over UTF-8), so `ORDER BY
//! key` is the byte order the [`Store`] contract asks for. A scan reads the key range from `queen_kv` and the
//! id range of the same keys from `queen_seg` (none when no segment key can be in it: [`first_segment_id_from`])
//! and merges them; a get reads the segment keys from `queen_seg` first and whatever it did not find from
//! `queen_kv`; `first_keys` asks both tables for the first key of each range (two scalar subqueries a range,
//! the ranges batched into statements by `crate::do_layout::first_keys_plan`) and takes the smaller. A row written is one b-tree entry in any
//! table and no second index: rows written is what Cloudflare bills.
//!
//! A fourth table, `queen_meta`, records the layout version ([`FORMAT_VERSION`]); opening storage written by a
//! newer layout fails with [`StoreErrorKind::NewerFormat`] instead of misreading it. Format 1 (sessions 6 to
//! 9) kept segments in `queen_kv` too: opening it creates `queen_seg` and the triggers and writes format 2, in
//! one `transactionSync`, and moves nothing (the old segments are read where they are, and move to
//! `queen_seg` when they are written again). From then on a format 1 build refuses the storage, as it must: it
//! would not look in `queen_seg`. Format 2 (sessions 10 to 29) had no `queen_blob`: opening it adds the `blob`
//! column (`NULL` in every row it holds, whose values stay inline; unless the table has it already),
//! `queen_blob` and the triggers, and writes
//! format 3, in one transaction; a format 2 build then refuses it (it would read an empty value where a
//! `queen_blob` row holds it).
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
//!   negative chunk and a value shorter than [`BLOB_MIN_BYTES`]) upserts it into `queen_seg`, or
//!   [`ROUTE_BLOB_TRIGGER`] (a longer one) appends it to `queen_blob` and upserts its `queen_seg` row; either
//!   deletes the key's rows in `queen_kv` (a value of [`CHUNK_BYTES`] or more, or one format 1 wrote: it
//!   finds none otherwise) and skips the row. So a push (its segment, index entry and partition record) is
//!   still one statement; a long segment writes two rows where it wrote one.
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
//!
//! The layout's constants, the statements of a commit ([`plan`]) and the key arithmetic are in
//! [`crate::do_layout`] (no I/O, so its unit tests run natively).
//!
//! [`CHUNK_BYTES`]: crate::do_layout::CHUNK_BYTES
//! [`MAX_BATCH_BYTES`]: crate::do_layout::MAX_BATCH_BYTES
//! [`BLOB_MIN_BYTES`]: crate::do_layout::BLOB_MIN_BYTES

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use queen_edge::store::{ChangeSet, KeyRange, Record, Store, StoreError, StoreErrorKind};
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};
use worker::{SqlStorage, SqlStorageValue, Storage};

use crate::do_layout::{
    first_keys_plan, first_segment_id_from, merge_records, placeholders, plan, prefix_end,
    segment_id, segment_key_of, Binding, Statement, BLOB_DELETE_TRIGGER, BLOB_TABLE,
    BLOB_UPDATE_TRIGGER, DROP_EARLIER_TRIGGER, DROP_ROUTE_V1, FORMAT_VERSION, MAX_BINDINGS,
    ROUTE_BLOB_TRIGGER, ROUTE_TRIGGER, SEG_BLOB_COLUMN, SEG_ID_END, SEG_LACKS_BLOB_COLUMN,
    SEG_ROWS_HEAD, SEG_TABLE, SHRINK_TRIGGER,
};
use crate::sql_rows::Rows;

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

/// A statement with its parameters as JS values (a blob copied once, into a `Uint8Array`).
struct JsStatement {
    sql: String,
    bindings: Vec<JsValue>,
}

/// `statement` with its parameters turned into JS values.
fn to_js(statement: Statement) -> JsStatement {
    let bindings = statement
        .bindings
        .into_iter()
        .map(|b| match b {
            Binding::Text(text) => JsValue::from_str(text),
            Binding::Blob(bytes) => js_sys::Uint8Array::from(bytes).into(),
            Binding::Int(n) => JsValue::from_f64(n as f64),
        })
        .collect();
    JsStatement {
        sql: statement.sql,
        bindings,
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
        let stored = match store
            .first_cell("SELECT value FROM queen_meta WHERE name = 'format'")?
            .as_ref()
        {
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
            BLOB_TABLE,
            DROP_EARLIER_TRIGGER,
            DROP_ROUTE_V1,
            SHRINK_TRIGGER,
            ROUTE_TRIGGER,
            ROUTE_BLOB_TRIGGER,
            BLOB_DELETE_TRIGGER,
            BLOB_UPDATE_TRIGGER,
        ];
        if stored == Some(FORMAT_VERSION) {
            for statement in schema {
                store.exec(statement, Vec::new())?;
            }
        } else {
            // New storage, format 1 (segments in `queen_kv`, which stay there: reads look in both tables) or
            // format 2 (`queen_seg` without its `blob` column: its rows stay as they are, values inline). The
            // schema and the version in one transaction: an older build refuses the storage from the moment
            // a trigger can put a segment where it would not look.
            // Asked of the table, not of the format row: a `queen_seg` that has the column already (storage
            // repaired by hand) is not altered twice.
            let upgrade = matches!(
                store.first_cell(SEG_LACKS_BLOB_COLUMN)?,
                Some(SqlStorageValue::Integer(1))
            )
            .then_some(SEG_BLOB_COLUMN);
            let mut statements: Vec<Statement> = upgrade
                .into_iter()
                .chain(schema)
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

    /// The first column of the first row of `query` (no bindings), if it has a row.
    fn first_cell(&self, query: &str) -> Result<Option<SqlStorageValue>, StoreError> {
        let rows: Vec<Vec<SqlStorageValue>> = self
            .sql
            .exec(query, None::<Vec<SqlStorageValue>>)
            .map_err(sql_error)?
            .raw()
            .collect::<Result<_, _>>()
            .map_err(sql_error)?;
        Ok(rows
            .into_iter()
            .next()
            .and_then(|row| row.into_iter().next()))
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

    /// Runs a read statement ([`crate::sql_rows`]).
    fn read(&self, query: &str, bindings: Vec<JsValue>) -> Result<Rows, StoreError> {
        crate::sql_rows::query(&self.sql, query, bindings).map_err(js_error)
    }

    /// Counts the rows SQLite read for `rows`, read to its end.
    fn count_read(&self, rows: &Rows) {
        let read = self.counters.rows_read.get() + rows.rows_read();
        self.counters.rows_read.set(read);
    }

    /// Joins the chunk rows of a `SELECT key, chunk, value ... ORDER BY key, chunk` into records, keeping
    /// the keys `keep` accepts, and counts the rows read.
    fn assemble(
        &self,
        mut rows: Rows,
        keep: impl Fn(&str) -> bool,
    ) -> Result<Vec<Record>, StoreError> {
        let mut out: Vec<Record> = Vec::new();
        let mut next_chunk = 0i64;
        while let Some(row) = rows.next_row().map_err(js_error)? {
            let (Some(key), Some(chunk)) = (row.cell(0).text(), row.cell(1).int()) else {
                return Err(StoreError::other(
                    "queen_kv row has unexpected column types",
                ));
            };
            let value = row.cell(2);
            let bytes = match value.blob() {
                Some(bytes) => bytes,
                None if value.is_null() => Vec::new(),
                None => {
                    return Err(StoreError::other(format!(
                        "queen_kv value of {key:?} is not a blob: {value:?}"
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
        self.count_read(&rows);
        Ok(out)
    }

    /// The records of a `SELECT id, value FROM queen_seg ... ORDER BY id`, in key order, and counts the rows
    /// read.
    fn assemble_segments(&self, rows: Rows) -> Result<Vec<Record>, StoreError> {
        let mut out: Vec<Record> = Vec::new();
        self.segment_rows(rows, |id, value| out.push((segment_key_of(id), value)))?;
        Ok(out)
    }

    /// Hands each row `(id, value)` of a `SELECT id, value FROM queen_seg ...` to `each`, in the
    /// statement's order, and counts the rows read.
    fn segment_rows(
        &self,
        mut rows: Rows,
        mut each: impl FnMut(u64, Vec<u8>),
    ) -> Result<(), StoreError> {
        while let Some(row) = rows.next_row().map_err(js_error)? {
            let id = row
                .cell(0)
                .int()
                .filter(|id| (0..SEG_ID_END as i64).contains(id));
            let value = row.cell(1);
            match (id, value.blob()) {
                (Some(id), Some(bytes)) => each(id as u64, bytes),
                (Some(id), None) if value.is_null() => each(id as u64, Vec::new()),
                _ => {
                    return Err(StoreError::other(format!(
                        "queen_seg row has unexpected column types: {:?}, {value:?}",
                        row.cell(0)
                    )))
                }
            }
        }
        self.count_read(&rows);
        Ok(())
    }

    /// The segment values of `queen_seg` whose keys lie in `[from, to)` (`to` `None`: no upper bound), in key
    /// order; no query when no id can lie there.
    fn scan_segments(&self, from: &str, to: Option<&str>) -> Result<Vec<Record>, StoreError> {
        let first = first_segment_id_from(from);
        let end = to.map_or(SEG_ID_END, first_segment_id_from);
        if first >= end {
            return Ok(Vec::new());
        }
        let rows = self.read(
            &format!("{SEG_ROWS_HEAD}s.id BETWEEN ? AND ? ORDER BY s.id"),
            vec![
                JsValue::from_f64(first as f64),
                JsValue::from_f64((end - 1) as f64),
            ],
        )?;
        self.assemble_segments(rows)
    }

    /// Runs a `first_keys` statement of `crate::do_layout::first_keys_plan` (`indexed`: rows `(i, id, key)`;
    /// otherwise rows `(id, key)` of `crate::do_layout::first_keys_row`, the answer of range 0) and puts the first key of
    /// each range it answers into `out[indexes[i]]`: the smaller of the two, since a key is in one table or
    /// the other.
    fn first_keys_of(
        &self,
        statement: Statement,
        indexed: bool,
        indexes: &[usize],
        out: &mut [Option<String>],
    ) -> Result<(), StoreError> {
        let JsStatement { sql, bindings } = to_js(statement);
        let mut rows = self.read(&sql, bindings)?;
        let first_cell = if indexed { 1 } else { 0 };
        while let Some(row) = rows.next_row().map_err(js_error)? {
            let at = if indexed {
                let index = row.cell(0);
                match index.int() {
                    Some(i) if (0..indexes.len() as i64).contains(&i) => indexes[i as usize],
                    _ => {
                        return Err(StoreError::other(format!(
                            "first_keys: range index of unexpected value: {index:?}"
                        )))
                    }
                }
            } else {
                indexes[0]
            };
            let id = row.cell(first_cell);
            let segment = match id.int() {
                Some(id) if (0..SEG_ID_END as i64).contains(&id) => Some(segment_key_of(id as u64)),
                _ if id.is_null() => None,
                _ => {
                    return Err(StoreError::other(format!(
                        "first_keys: queen_seg id of unexpected type: {id:?}"
                    )))
                }
            };
            let key = row.cell(first_cell + 1);
            let kv = match key.text() {
                Some(key) => Some(key),
                None if key.is_null() => None,
                None => {
                    return Err(StoreError::other(format!(
                        "first_keys: queen_kv key of unexpected type: {key:?}"
                    )))
                }
            };
            out[at] = match (segment, kv) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        self.count_read(&rows);
        Ok(())
    }

    /// Runs the statements of a commit, returning the rows written: one statement as it is (it applies all
    /// or nothing by itself), several inside one `transactionSync`.
    fn run(&self, mut statements: Vec<Statement>) -> Result<u64, StoreError> {
        if statements.len() == 1 {
            let JsStatement { sql, bindings } = to_js(statements.remove(0));
            return crate::sql_exec::exec(&self.sql, &sql, bindings).map_err(js_error);
        }
        self.run_in_transaction(statements)
    }

    /// Runs `statements` inside one `transactionSync`, returning the rows written.
    fn run_in_transaction(&self, statements: Vec<Statement>) -> Result<u64, StoreError> {
        let t = &self.transaction;
        *t.pending.borrow_mut() = statements.into_iter().map(to_js).collect();
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
        let rows = match &end {
            Some(end) => self.read(
                "SELECT key, chunk, value FROM queen_kv WHERE key >= ? AND key < ? ORDER BY key, chunk",
                vec![JsValue::from_str(prefix), JsValue::from_str(end)],
            ),
            None => self.read(
                "SELECT key, chunk, value FROM queen_kv WHERE key >= ? ORDER BY key, chunk",
                vec![JsValue::from_str(prefix)],
            ),
        }?;
        let records = self.assemble(rows, |key| key.starts_with(prefix))?;
        Ok(merge_records(records, segments))
    }

    async fn get(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        // Each distinct key is read once, into the place of its first ask; a key asked for again gets a
        // copy of it at the end.
        let mut first_place: HashMap<&str, usize> = HashMap::with_capacity(keys.len());
        for (at, key) in keys.iter().enumerate() {
            first_place.entry(key.as_str()).or_insert(at);
        }
        let mut values: Vec<Option<Vec<u8>>> = vec![None; keys.len()];
        let by_id: HashMap<i64, usize> = first_place
            .iter()
            .filter_map(|(key, &at)| segment_id(key).map(|id| (id, at)))
            .collect();
        let ids: Vec<i64> = by_id.keys().copied().collect();
        for batch in ids.chunks(MAX_BINDINGS) {
            let rows = self.read(
                &format!("{SEG_ROWS_HEAD}s.id IN ({})", placeholders(batch.len())),
                batch
                    .iter()
                    .map(|&id| JsValue::from_f64(id as f64))
                    .collect(),
            )?;
            self.segment_rows(rows, |id, value| {
                if let Some(&at) = by_id.get(&(id as i64)) {
                    values[at] = Some(value);
                }
            })?;
        }
        // Every other key, and a segment key `queen_seg` does not hold (a value of CHUNK_BYTES or more, one
        // format 1 wrote, or none).
        let rest: Vec<&str> = first_place
            .iter()
            .filter(|(_, &at)| values[at].is_none())
            .map(|(&key, _)| key)
            .collect();
        for batch in rest.chunks(MAX_BINDINGS) {
            let rows = self.read(
                &format!(
                    "SELECT key, chunk, value FROM queen_kv WHERE key IN ({}) ORDER BY key, chunk",
                    placeholders(batch.len())
                ),
                batch.iter().map(|&key| JsValue::from_str(key)).collect(),
            )?;
            for (key, value) in self.assemble(rows, |_| true)? {
                if let Some(&at) = first_place.get(key.as_str()) {
                    values[at] = Some(value);
                }
            }
        }
        for (at, key) in keys.iter().enumerate() {
            let first = first_place[key.as_str()];
            if first != at {
                values[at] = values[first].clone();
            }
        }
        Ok(values)
    }

    async fn first_keys(&self, ranges: &[KeyRange]) -> Result<Vec<Option<String>>, StoreError> {
        let uppers: Vec<Option<String>> = ranges.iter().map(|r| prefix_end(&r.prefix)).collect();
        let plan = first_keys_plan(ranges, &uppers);
        let mut out = vec![None; ranges.len()];
        for (indexes, statement) in plan.batches {
            self.first_keys_of(statement, true, &indexes, &mut out)?;
        }
        for (at, statement) in plan.alone {
            self.first_keys_of(statement, false, &[at], &mut out)?;
        }
        Ok(out)
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

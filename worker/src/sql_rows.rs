//! A read statement's rows, each cell read as the type its reader expects: workers-rs's `SqlCursor::raw`
//! turns every cell into a `SqlStorageValue` by testing one type after another (null, undefined, boolean,
//! string, number, then a `Uint8Array`, then an `ArrayBuffer`), each test a call from wasm into JS, so a
//! blob cell, tested last, costs the most calls; an open of thousands of partitions reads a row or more for
//! each. Here a reader asks for the type it wants (a few calls for `NULL` or a blob's copy, one otherwise),
//! and the statement's text comes from [`crate::sql_exec`]'s table of JS strings (docs/decisions.md,
//! "do-open", has the counts).

use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::{JsCast, JsValue};
use worker::SqlStorage;

#[wasm_bindgen]
extern "C" {
    /// workerd's `SqlStorage` (`ctx.storage.sql`).
    type Sql;
    /// A cursor `exec` returns.
    type ReadCursor;

    #[wasm_bindgen(method, catch, variadic, js_name = exec)]
    fn exec_read(
        this: &Sql,
        query: &JsValue,
        bindings: Vec<JsValue>,
    ) -> Result<ReadCursor, JsValue>;

    #[wasm_bindgen(method)]
    fn raw(this: &ReadCursor) -> js_sys::Iterator;

    #[wasm_bindgen(method, getter, js_name = rowsRead)]
    fn rows_read(this: &ReadCursor) -> f64;
}

/// The rows of one read statement, in order.
pub struct Rows {
    cursor: ReadCursor,
    rows: js_sys::Iterator,
}

/// Runs the read `query` with `bindings` (its `?` parameters in order) on `sql`.
pub fn query(sql: &SqlStorage, query: &str, bindings: Vec<JsValue>) -> Result<Rows, JsValue> {
    let sql: &Sql = AsRef::<JsValue>::as_ref(sql).unchecked_ref();
    let cursor = sql.exec_read(&crate::sql_exec::text(query), bindings)?;
    let rows = cursor.raw();
    Ok(Rows { cursor, rows })
}

impl Rows {
    /// The next row, `None` after the last.
    pub fn next_row(&mut self) -> Result<Option<Row>, JsValue> {
        let next = self.rows.next()?;
        if next.done() {
            return Ok(None);
        }
        Ok(Some(Row(next.value().unchecked_into())))
    }

    /// The rows SQLite read for the statement so far (`cursor.rowsRead`).
    pub fn rows_read(&self) -> u64 {
        self.cursor.rows_read() as u64
    }
}

/// One row: its cells by column.
pub struct Row(js_sys::Array);

impl Row {
    /// The cell of column `column`.
    pub fn cell(&self, column: u32) -> Cell {
        Cell(self.0.get(column))
    }
}

/// One cell, read as the type its reader expects (`None` when it is not of that type).
#[derive(Debug)]
pub struct Cell(JsValue);

/// Largest integer a JS number holds exactly.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

impl Cell {
    /// True for `NULL`.
    pub fn is_null(&self) -> bool {
        self.0.is_null()
    }

    /// A text cell.
    pub fn text(&self) -> Option<String> {
        self.0.as_string()
    }

    /// An integer cell: a number with no fraction that a JS number holds exactly (SQLite's integers
    /// reach JS as numbers).
    pub fn int(&self) -> Option<i64> {
        self.0
            .as_f64()
            .filter(|n| n.fract() == 0.0 && n.abs() <= MAX_SAFE_INTEGER)
            .map(|n| n as i64)
    }

    /// A blob cell (workerd gives an `ArrayBuffer`), copied.
    pub fn blob(&self) -> Option<Vec<u8>> {
        if let Some(buffer) = self.0.dyn_ref::<js_sys::ArrayBuffer>() {
            return Some(js_sys::Uint8Array::new(buffer).to_vec());
        }
        self.0
            .dyn_ref::<js_sys::Uint8Array>()
            .map(js_sys::Uint8Array::to_vec)
    }
}

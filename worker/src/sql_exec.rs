//! A commit's statements run with one call into workerd each: `sql.exec(query, ...bindings)` with the
//! bindings passed as one array and the query as a JS string kept per isolate, where workers-rs's
//! `SqlStorage::exec_raw` makes an `Array` and pushes each binding into it (one call each) and turns the
//! query text into a JS string again every time. A commit's statement texts repeat (a 1-message push, pop or
//! ack is one statement whose text depends only on its shape), so the strings are kept in a small table.

use std::cell::RefCell;
use std::collections::HashMap;

use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::{JsCast, JsValue};
use worker::SqlStorage;

/// Statement texts kept as JS strings, at most; the table starts over when full (texts of big batches
/// vary with their row count, so they would otherwise pile up).
const MAX_TEXTS: usize = 64;
/// Longer texts (many rows) are converted each time instead of kept.
const MAX_TEXT_BYTES: usize = 1024;

#[wasm_bindgen]
extern "C" {
    /// workerd's `SqlStorage` (`ctx.storage.sql`).
    type Sql;
    /// A cursor `exec` returns.
    type Cursor;

    #[wasm_bindgen(method, catch, variadic, js_name = exec)]
    fn exec_variadic(
        this: &Sql,
        query: &JsValue,
        bindings: Vec<JsValue>,
    ) -> Result<Cursor, JsValue>;

    #[wasm_bindgen(method, getter, js_name = rowsWritten)]
    fn rows_written(this: &Cursor) -> f64;
}

thread_local! {
    static TEXTS: RefCell<HashMap<String, JsValue>> = RefCell::new(HashMap::new());
}

/// `query` as a JS string, from the table when it is there.
pub(crate) fn text(query: &str) -> JsValue {
    if query.len() > MAX_TEXT_BYTES {
        return JsValue::from_str(query);
    }
    TEXTS.with(|texts| {
        let mut texts = texts.borrow_mut();
        if let Some(js) = texts.get(query) {
            return js.clone();
        }
        if texts.len() >= MAX_TEXTS {
            texts.clear();
        }
        let js = JsValue::from_str(query);
        texts.insert(query.to_string(), js.clone());
        js
    })
}

/// Runs `query` with `bindings` (its `?` parameters in order) on `sql`: the rows it wrote, or the error
/// workerd threw.
pub fn exec(sql: &SqlStorage, query: &str, bindings: Vec<JsValue>) -> Result<u64, JsValue> {
    let sql: &Sql = AsRef::<JsValue>::as_ref(sql).unchecked_ref();
    let cursor = sql.exec_variadic(&text(query), bindings)?;
    Ok(cursor.rows_written() as u64)
}

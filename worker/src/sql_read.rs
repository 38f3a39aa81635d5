//! A read statement run with its rows packed on the JS side ([`crate::sql_rows`]): workers-rs's
//! `SqlCursor::raw` crosses into JS for every row (the iterator's `next`, `done` and `value`) and for every
//! cell (the array's `get`, then a type test a type until one fits, and the copy), which at an open of
//! thousands of partitions was a large share of the open's time. Here one JS function runs the statement,
//! walks the rows and returns four typed arrays, copied into wasm once each.

use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::{JsCast, JsValue};
use worker::SqlStorage;

use crate::sql_rows::PackedRows;

#[wasm_bindgen(inline_js = r#"
const encoder = new TextEncoder();
/** Runs `query` with `bindings` on `sql` and packs its rows: [columns, rowsRead, tags, numbers, lengths,
 * bytes] (tags 0 null, 1 number, 2 text, 3 blob: module sql_rows). */
export function queenReadRows(sql, query, bindings) {
  const cursor = sql.exec(query, ...bindings);
  const tags = [];
  const numbers = [];
  const parts = [];
  let total = 0;
  for (const row of cursor.raw()) {
    for (let i = 0; i < row.length; i++) {
      const v = row[i];
      if (v === null) {
        tags.push(0);
      } else if (typeof v === 'number') {
        tags.push(1);
        numbers.push(v);
      } else if (typeof v === 'string') {
        const b = encoder.encode(v);
        tags.push(2);
        parts.push(b);
        total += b.length;
      } else if (v instanceof ArrayBuffer) {
        const b = new Uint8Array(v);
        tags.push(3);
        parts.push(b);
        total += b.length;
      } else if (ArrayBuffer.isView(v)) {
        const b = new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
        tags.push(3);
        parts.push(b);
        total += b.length;
      } else {
        throw new Error(`SQL value of unexpected type ${typeof v}`);
      }
    }
  }
  const bytes = new Uint8Array(total);
  const lengths = new Uint32Array(parts.length);
  let at = 0;
  for (let i = 0; i < parts.length; i++) {
    bytes.set(parts[i], at);
    at += parts[i].length;
    lengths[i] = parts[i].length;
  }
  return [cursor.columnNames.length, cursor.rowsRead, Uint8Array.from(tags), Float64Array.from(numbers),
    lengths, bytes];
}
"#)]
extern "C" {
    #[wasm_bindgen(catch, js_name = queenReadRows)]
    fn read_rows_js(
        sql: &JsValue,
        query: &JsValue,
        bindings: Vec<JsValue>,
    ) -> Result<js_sys::Array, JsValue>;
}

/// Runs the read `query` with `bindings` (its `?` parameters in order) on `sql`: its rows, packed, and the
/// rows SQLite read for it (`cursor.rowsRead`), or the error workerd threw.
pub fn read(
    sql: &SqlStorage,
    query: &str,
    bindings: Vec<JsValue>,
) -> Result<(PackedRows, u64), JsValue> {
    let out = read_rows_js(sql.as_ref(), &crate::sql_exec::text(query), bindings)?;
    let number = |i: u32| out.get(i).as_f64().unwrap_or(0.0);
    let rows = PackedRows {
        columns: number(0) as usize,
        tags: out.get(2).unchecked_into::<js_sys::Uint8Array>().to_vec(),
        numbers: out.get(3).unchecked_into::<js_sys::Float64Array>().to_vec(),
        lengths: out.get(4).unchecked_into::<js_sys::Uint32Array>().to_vec(),
        bytes: out.get(5).unchecked_into::<js_sys::Uint8Array>().to_vec(),
    };
    Ok((rows, number(1) as u64))
}

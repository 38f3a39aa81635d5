//! Test-only routes that make the object's SQLite run out of space (`SQLITE_FULL`), to see what workerd
//! does with a turn whose later statement fails that way (docs/decisions.md, "A full disk in the Durable
//! Object (session 10) — audit2"). Served through [`crate::selftest`], so only when `QUEEN_TEST_ROUTES` is
//! `true`.
//!
//! - `POST /__test/full/turn?object=NAME`: in one request (one turn of the object's implicit transaction), a
//!   commit that succeeds (`full/a`), then the database is capped at its current size and a commit of a
//!   value that does not fit (`full/b`; with `shape=one` one statement, else several in `transactionSync`)
//!   fails. Answers 200 with both outcomes, if workerd lets the answer
//!   out.
//! - `GET /__test/full/turn?object=NAME`: the keys under `full/` now, with their lengths.
//! - `POST /__test/full/cap?object=NAME&spare=BYTES`: caps the object's database at its current size plus
//!   `BYTES` (rounded down to whole pages), so that later writes past that fail with `SQLITE_FULL`.

use queen_edge::store::{ChangeSet, Store};
use serde_json::{json, Value};
use wasm_bindgen::{JsCast, JsValue};
use worker::worker_sys::web_sys::Response;
use worker::{Method, Result, State};

use crate::do_store::DoStore;
use crate::respond::json as json_response;

/// SQLite's page size in Durable Objects (the default, 4096 bytes).
const PAGE_BYTES: usize = 4096;

/// Serves `path` when it is one of this module's routes, `None` otherwise.
pub async fn handle(
    state: &State,
    method: &Method,
    path: &str,
    query: &str,
) -> Option<Result<Response>> {
    let outcome = match (method, path) {
        (Method::Post, "/__test/full/turn") => {
            let spill = query.contains("shape=spill");
            turn(state, spill || query.contains("shape=one"), spill).await
        }
        (Method::Get, "/__test/full/turn") => keys(state).await,
        (Method::Post, "/__test/full/cap") => {
            let spare = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("spare="))
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            cap(state, spare).map(|pages| json!({ "ok": true, "max_pages": pages }))
        }
        _ => return None,
    };
    Some(match outcome {
        Ok(body) => json_response(200, &body),
        Err(e) => json_response(500, &json!({ "ok": false, "error": e })),
    })
}

type Checked = std::result::Result<Value, String>;

/// Caps the database at its current size plus `spare` bytes; returns the page limit set.
fn cap(state: &State, spare: usize) -> std::result::Result<usize, String> {
    let sql = state.storage().sql();
    let pages = (sql.database_size() + spare) / PAGE_BYTES;
    let raw: &JsValue = sql.as_ref();
    let set = js_sys::Reflect::get(raw, &JsValue::from_str("setMaxPageCountForTest"))
        .ok()
        .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
        .ok_or("sql.setMaxPageCountForTest is missing (workerd only)")?;
    set.call1(raw, &JsValue::from_f64(pages as f64))
        .map_err(|e| format!("setMaxPageCountForTest: {e:?}"))?;
    Ok(pages)
}

/// `POST /__test/full/turn`: see the module documentation.
async fn turn(state: &State, one_statement: bool, spill: bool) -> Checked {
    let store = DoStore::open(&state.storage()).map_err(|e| e.message)?;
    let mut first = ChangeSet::default();
    first.put("full/a", b"committed before the disk filled".to_vec());
    store.commit(&first).await.map_err(|e| e.message)?;
    if spill {
        // More than SQLite's page cache holds, in the same turn, so the transaction spills to the file.
        for i in 0..60 {
            let mut more = ChangeSet::default();
            more.put(format!("full/spill/{i:03}"), vec![i as u8; 100 * 1024]);
            store.commit(&more).await.map_err(|e| e.message)?;
        }
    }
    let pages = cap(state, 0)?;
    let mut second = ChangeSet::default();
    // One statement (a value under the batch limit) or several in `transactionSync` (a multi-chunk value).
    let len = if one_statement {
        200 * 1024
    } else {
        4 * 1024 * 1024
    };
    second.put("full/b", vec![7; len]);
    let failed = store.commit(&second).await;
    Ok(json!({
        "ok": failed.is_err(),
        "first": "committed",
        "max_pages": pages,
        "second_error": failed.err().map(|e| e.message),
    }))
}

/// `GET /__test/full/turn`: see the module documentation.
async fn keys(state: &State) -> Checked {
    let store = DoStore::open(&state.storage()).map_err(|e| e.message)?;
    let got = store.scan("full/").await.map_err(|e| e.message)?;
    let keys: Vec<String> = got
        .iter()
        .map(|(k, v)| format!("{k}:{}", v.len()))
        .collect();
    Ok(json!({ "ok": true, "keys": keys }))
}

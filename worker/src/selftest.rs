//! Test-only routes that run checks inside workerd. Served only when the variable `QUEEN_TEST_ROUTES` is
//! `true` (the test driver passes `--var QUEEN_TEST_ROUTES:true` to `wrangler dev`; the production
//! `wrangler.toml` never sets it). The entry Worker and the Durable Object both check the flag.
//!
//! - `GET /__test/store/conformance?object=NAME`: runs `queen_edge::store::conformance::run_all` on a
//!   [`DoStore`] in the object `NAME`, answers `{ok, passed, error, stats}`.
//! - `POST /__test/store/durability?object=NAME`: commits a known record set (one value split across chunks).
//! - `GET /__test/store/durability?object=NAME`: checks that record set byte for byte (after a restart of
//!   wrangler this proves the commits reached disk).
//! - `GET /__test/store/atomicity?object=NAME`: a commit whose last row fails must leave no trace, for a
//!   put-only commit (one statement) and for one that deletes too (two statements in one transaction).
//! - `GET /__test/store/previous-build?object=NAME`: storage written by the previous build's commit SQL (the
//!   `queen_apply_v1` view of sessions 6 and 7, kept here) reads and shrinks right with this build, and that
//!   SQL still commits right on storage this build has opened (with this build's shrink trigger in place).
//! - `GET /__test/alarm?object=NAME`: whether the object has a maintenance alarm scheduled.
//! - `/__test/commit/...`: the commit SQL's review checks ([`crate::selftest_commit`]).
//! - `/__test/full/...`: a database that runs out of space ([`crate::selftest_full`]).

use queen_edge::store::{conformance, ChangeSet, Store};
use serde_json::json;
use wasm_bindgen::JsValue;
use worker::worker_sys::web_sys::Response;
use worker::{Method, Request, Result, SqlStorage, SqlStorageValue, State};

use crate::do_store::{DoStore, CHUNK_BYTES};
use crate::respond::{error as error_response, json as json_response};

/// The record set the durability check writes and reads back: a small value, an empty one, and one that
/// spans three chunks.
fn durability_records() -> Vec<(String, Vec<u8>)> {
    let big: Vec<u8> = (0..2 * CHUNK_BYTES + 12_345)
        .map(|i| (i.wrapping_mul(31) ^ (i >> 7)) as u8)
        .collect();
    vec![
        ("durable/a".to_string(), b"hello".to_vec()),
        ("durable/big".to_string(), big),
        ("durable/empty".to_string(), Vec::new()),
    ]
}

/// Serves one `/__test/...` request inside the Durable Object.
pub async fn handle(state: &State, req: Request) -> Result<Response> {
    let path = req.path();
    if let Some(answer) = crate::selftest_commit::handle(state, &req.method(), &path).await {
        return answer;
    }
    let query = req
        .url()
        .map(|u| u.query().unwrap_or_default().to_string())
        .unwrap_or_default();
    if let Some(answer) = crate::selftest_full::handle(state, &req.method(), &path, &query).await {
        return answer;
    }
    if req.method() == Method::Get && path == "/__test/store/previous-build" {
        // Before `DoStore::open`: the storage must first be written as the previous build left it.
        return match previous_build(state).await {
            Ok(checked) => json_response(200, &json!({ "ok": true, "checked": checked })),
            Err(e) => json_response(500, &json!({ "ok": false, "error": e })),
        };
    }
    let store = match DoStore::open(&state.storage()) {
        Ok(store) => store,
        Err(e) => return json_response(500, &json!({ "ok": false, "error": e.message })),
    };
    match (req.method(), path.as_str()) {
        (Method::Get, "/__test/store/conformance") => {
            let result = conformance::run_all(|| {
                let reopened = store.reopen(&state.storage());
                async move {
                    // The first open above succeeded on this same storage, and the schema exists now.
                    reopened.expect("DoStore reopens storage it opened a moment ago")
                }
            })
            .await;
            let stats = store.stats();
            let (ok, passed, error) = match result {
                Ok(passed) => (true, passed, None),
                Err(e) => (false, Vec::new(), Some(e)),
            };
            json_response(
                if ok { 200 } else { 500 },
                &json!({
                    "ok": ok,
                    "passed": passed,
                    "error": error,
                    "stats": {
                        "commits": stats.commits,
                        "rows_written": stats.rows_written,
                        "rows_read": stats.rows_read,
                        "statements": stats.statements,
                    },
                    "database_size": store.database_size(),
                }),
            )
        }
        (Method::Post, "/__test/store/durability") => {
            let mut changes = ChangeSet::default();
            for (key, value) in durability_records() {
                changes.put(key, value);
            }
            match store.commit(&changes).await {
                Ok(()) => json_response(
                    200,
                    &json!({ "ok": true, "rows_written": store.stats().rows_written }),
                ),
                Err(e) => json_response(500, &json!({ "ok": false, "error": e.message })),
            }
        }
        (Method::Get, "/__test/store/durability") => {
            let want = durability_records();
            match store.scan("durable/").await {
                Ok(got) => {
                    let ok = got == want;
                    let keys: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
                    let sizes: Vec<usize> = got.iter().map(|(_, v)| v.len()).collect();
                    json_response(
                        if ok { 200 } else { 500 },
                        &json!({ "ok": ok, "keys": keys, "sizes": sizes }),
                    )
                }
                Err(e) => json_response(500, &json!({ "ok": false, "error": e.message })),
            }
        }
        (Method::Get, "/__test/store/atomicity") => {
            let mut setup = ChangeSet::default();
            setup.put("atomic/keep", b"before".to_vec());
            setup.put("atomic/shrink", vec![5; 2 * CHUNK_BYTES + 1]);
            if let Err(e) = store.commit(&setup).await {
                return json_response(500, &json!({ "ok": false, "error": e.message }));
            }
            // Put-only: one upsert statement whose last row fails. With deletes: the delete statement and the
            // upsert run in one transaction, and the upsert's last row fails after the delete has run.
            let mut puts_only = ChangeSet::default();
            puts_only.put("atomic/new", b"never".to_vec());
            puts_only.put("atomic/keep", b"after".to_vec());
            puts_only.put("atomic/shrink", vec![6; 10]);
            let mut with_delete = ChangeSet::default();
            with_delete.put("atomic/new", b"never".to_vec());
            with_delete.put("atomic/shrink", vec![6; 10]);
            with_delete.delete("atomic/keep");
            let failed = [
                store.commit_then_fail(&puts_only),
                store.commit_then_fail(&with_delete),
            ];
            let after = match store.scan("atomic/").await {
                Ok(records) => records,
                Err(e) => return json_response(500, &json!({ "ok": false, "error": e.message })),
            };
            let mut want = setup
                .puts()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<Vec<_>>();
            want.sort();
            let ok = failed.iter().all(|f| f.is_err()) && after == want;
            json_response(
                if ok { 200 } else { 500 },
                &json!({
                    "ok": ok,
                    "commit_errors": failed.iter().map(|f| f.as_ref().err().map(|e| e.message.clone())).collect::<Vec<_>>(),
                    "keys_after": after.iter().map(|(k, v)| format!("{k}:{}", v.len())).collect::<Vec<_>>(),
                }),
            )
        }
        (Method::Get, "/__test/alarm") => {
            let scheduled = state.storage().get_alarm().await?;
            json_response(200, &json!({ "scheduled": scheduled.is_some() }))
        }
        _ => error_response(404, "Not Found"),
    }
}

/// The commit SQL of the previous build (sessions 6 and 7, `worker/src/do_store.rs`), word for word: a view
/// whose `INSTEAD OF` trigger applies each row (op 0 deletes a key, op 1 upserts a chunk and on chunk 0
/// deletes the chunks at or past `chunks`).
pub(crate) const PREVIOUS_SCHEMA: [&str; 4] = [
    "CREATE TABLE IF NOT EXISTS queen_kv (key TEXT NOT NULL, chunk INTEGER NOT NULL, \
     value BLOB NOT NULL, PRIMARY KEY (key, chunk)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS queen_meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL)",
    "CREATE VIEW IF NOT EXISTS queen_apply_v1 (op, key, chunk, value, chunks) AS \
     SELECT NULL, NULL, NULL, NULL, NULL WHERE 0",
    "CREATE TRIGGER IF NOT EXISTS queen_apply_v1_row \
     INSTEAD OF INSERT ON queen_apply_v1 BEGIN \
       DELETE FROM queen_kv WHERE NEW.op = 0 AND key = NEW.key; \
       DELETE FROM queen_kv WHERE NEW.op = 1 AND NEW.chunk = 0 AND key = NEW.key AND chunk >= NEW.chunks; \
       INSERT INTO queen_kv (key, chunk, value) SELECT NEW.key, NEW.chunk, NEW.value WHERE NEW.op = 1 \
         ON CONFLICT (key, chunk) DO UPDATE SET value = excluded.value; \
       SELECT RAISE(ABORT, 'queen_apply_v1: refused (test hook)') WHERE NEW.op = 9; \
     END",
];

/// A value of `len` bytes that differs from others of other `seed`s.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Commits `puts` as the previous build did: one `queen_apply_v1` row per chunk, chunk 0 of a key first.
pub(crate) fn previous_commit(
    sql: &SqlStorage,
    puts: &[(&str, &[u8])],
) -> std::result::Result<(), String> {
    let mut tuples = Vec::new();
    let mut bindings: Vec<JsValue> = Vec::new();
    for (key, value) in puts {
        let parts: Vec<&[u8]> = value.chunks(CHUNK_BYTES).collect();
        for (i, part) in parts.iter().enumerate() {
            tuples.push(format!("(1, ?, {i}, ?, {})", parts.len()));
            bindings.push(JsValue::from_str(key));
            bindings.push(js_sys::Uint8Array::from(*part).into());
        }
    }
    let query = format!(
        "INSERT INTO queen_apply_v1 (op, key, chunk, value, chunks) VALUES {}",
        tuples.join(", ")
    );
    sql.exec_raw(&query, bindings)
        .map(|_| ())
        .map_err(|e| format!("previous build's commit: {e}"))
}

/// Rows `key` has in `queen_kv` (its chunks, stale ones included).
fn chunk_rows(sql: &SqlStorage, key: &str) -> std::result::Result<i64, String> {
    let rows: Vec<Vec<SqlStorageValue>> = sql
        .exec(
            "SELECT count(*) FROM queen_kv WHERE key = ?",
            vec![SqlStorageValue::from(key)],
        )
        .and_then(|c| c.raw().collect::<Result<_>>())
        .map_err(|e| e.to_string())?;
    match rows.first().and_then(|r| r.first()) {
        Some(SqlStorageValue::Integer(n)) => Ok(*n),
        other => Err(format!("count(*) of {key}: {other:?}")),
    }
}

/// `/__test/store/previous-build`: see the module documentation. Returns the steps checked.
async fn previous_build(state: &State) -> std::result::Result<Vec<&'static str>, String> {
    let sql = state.storage().sql();
    for statement in PREVIOUS_SCHEMA {
        sql.exec(statement, None::<Vec<SqlStorageValue>>)
            .map_err(|e| e.to_string())?;
    }
    let mut checked = Vec::new();
    let three = pattern(2 * CHUNK_BYTES + 5, 1);
    previous_commit(&sql, &[("prev/big", &three), ("prev/small", b"old")])?;

    // This build opens that storage, reads it, and shrinks the three-chunk value to two chunks.
    let store = DoStore::open(&state.storage()).map_err(|e| e.message)?;
    let got = store.scan("prev/").await.map_err(|e| e.message)?;
    if got
        != vec![
            ("prev/big".to_string(), three),
            ("prev/small".to_string(), b"old".to_vec()),
        ]
    {
        return Err("this build misread the previous build's values".into());
    }
    checked.push("this build reads the previous build's values");
    let two = pattern(CHUNK_BYTES + 7, 2);
    let mut changes = ChangeSet::default();
    changes.put("prev/big", two.clone());
    let written = store.stats().rows_written;
    store.commit(&changes).await.map_err(|e| e.message)?;
    // Chunk 2 deleted by the trim, chunks 0 and 1 updated in place (cursor.rowsWritten counts deletes too).
    let written = store.stats().rows_written - written;
    if written != 3 {
        return Err(format!("the shrink wrote {written} rows, not 3"));
    }
    if chunk_rows(&sql, "prev/big")? != 2
        || store.scan("prev/big").await.map_err(|e| e.message)?
            != vec![("prev/big".to_string(), two)]
    {
        return Err(
            "this build's shrink of the previous build's value left stale chunks or a wrong value"
                .into(),
        );
    }
    checked.push("this build shrinks a value the previous build wrote");

    // The previous build opens storage this build has opened (its schema statements again, the shrink trigger
    // in place), shrinks the two-chunk value to one chunk and grows the small one to two.
    for statement in PREVIOUS_SCHEMA {
        sql.exec(statement, None::<Vec<SqlStorageValue>>)
            .map_err(|e| e.to_string())?;
    }
    let grown = pattern(CHUNK_BYTES + 3, 3);
    previous_commit(&sql, &[("prev/big", b"one"), ("prev/small", &grown)])?;
    if chunk_rows(&sql, "prev/big")? != 1 || chunk_rows(&sql, "prev/small")? != 2 {
        return Err(
            "the previous build's commit went wrong with the shrink trigger in place".into(),
        );
    }
    let got = store.scan("prev/").await.map_err(|e| e.message)?;
    if got
        != vec![
            ("prev/big".to_string(), b"one".to_vec()),
            ("prev/small".to_string(), grown),
        ]
    {
        return Err("values the previous build wrote over this build's are misread".into());
    }
    checked.push("the previous build commits right on storage this build opened");

    // This build shrinks the two-chunk value the previous build grew to one chunk: the shrink trigger deletes
    // chunk 1, and its delete is counted (1 row updated, 1 deleted).
    let mut changes = ChangeSet::default();
    changes.put("prev/small", b"tiny".to_vec());
    let written = store.stats().rows_written;
    store.commit(&changes).await.map_err(|e| e.message)?;
    let written = store.stats().rows_written - written;
    if written != 2 || chunk_rows(&sql, "prev/small")? != 1 {
        return Err(format!(
            "the trigger's shrink wrote {written} rows (not 2) or left stale chunks"
        ));
    }
    checked.push("the shrink trigger's deletes count as rows written");
    Ok(checked)
}

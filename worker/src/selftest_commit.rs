//! Test-only routes that check the Durable Object commit's SQL ([`DoStore`]) where a review looked for faults
//! (docs/decisions.md, "Review of the Durable Object commit's SQL (session 8)"). Served through
//! [`crate::selftest`], so only when `QUEEN_TEST_ROUTES` is `true`. Each answers `{ok, ...}` with status 200 when
//! every check held, 500 with the failed checks otherwise.
//!
//! - `GET /__test/commit/shrink?object=NAME`: one key's value goes through many sizes (several chunks, fewer,
//!   one, empty, more again), each commit a different shape (alone, beside other keys, beside a delete, split
//!   over many statements), a key is deleted and put again in the next commit; after each commit the key has
//!   exactly its value's chunk rows and reads back byte for byte.
//! - `GET /__test/commit/rows-written?object=NAME`: for commits of each shape, the rows written the store
//!   counts (`cursor.rowsWritten`, summed) against SQLite's own count of changed rows (`total_changes()`,
//!   which includes a trigger's changes).
//! - `GET /__test/commit/rows-written-previous?object=NAME`: the rows the previous build's commit SQL
//!   ([`crate::selftest::PREVIOUS_SCHEMA`], format 1, in an object this build never opened) changes for the
//!   same puts, to compare (figures only, no check).
//! - `POST /__test/commit/turn?object=NAME`: in one request (one turn of the object's implicit transaction),
//!   a commit that succeeds, a one-statement commit that fails, another that succeeds, and a two-statement
//!   commit (in `transactionSync`) that fails. `GET` checks that exactly the two successful commits are there
//!   (after a SIGKILL of workerd this proves the failed statements did not take the turn's writes with them).
//! - `GET /__test/commit/stale-trigger?object=NAME`: storage that an earlier build of this commit SQL opened
//!   (commit ea7b0ea: a shrink trigger firing on every update of a chunk 0, under the name this build's
//!   trigger had there) is opened by this build, whose trigger must then be the one in force: a three-chunk
//!   value written over a three-chunk value writes three rows.
//! - `GET /__test/commit/earlier-build?object=NAME`: the other way round: storage this build opened and wrote
//!   to is refused by ea7b0ea, as by every build of format 1 (their format check: this build writes format 2,
//!   segments in `queen_seg`, where they would not look).
//! - `GET /__test/commit/newer-format?object=NAME`: storage whose `queen_meta` names a newer format is refused
//!   by [`DoStore::open`], which must leave that storage's schema as it found it.

use queen_edge::store::{ChangeSet, Store, StoreErrorKind};
use serde_json::{json, Value};
use worker::worker_sys::web_sys::Response;
use worker::{Method, Result, SqlStorage, SqlStorageValue, State};

use crate::do_layout::{CHUNK_BYTES, FORMAT_VERSION};
use crate::do_store::DoStore;
use crate::respond::json as json_response;

/// Serves `path` when it is one of this module's routes, `None` otherwise.
pub async fn handle(state: &State, method: &Method, path: &str) -> Option<Result<Response>> {
    let outcome = match (method, path) {
        (Method::Get, "/__test/commit/shrink") => shrink(state).await,
        (Method::Get, "/__test/commit/rows-written") => rows_written(state).await,
        (Method::Get, "/__test/commit/rows-written-previous") => rows_written_previous(state),
        (Method::Post, "/__test/commit/turn") => turn_write(state).await,
        (Method::Get, "/__test/commit/turn") => turn_check(state).await,
        (Method::Get, "/__test/commit/newer-format") => newer_format(state).await,
        (Method::Get, "/__test/commit/stale-trigger") => stale_trigger(state).await,
        (Method::Get, "/__test/commit/earlier-build") => earlier_build(state).await,
        _ => return None,
    };
    Some(match outcome {
        Ok(body) => {
            let ok = body["ok"] == Value::Bool(true);
            json_response(if ok { 200 } else { 500 }, &body)
        }
        Err(e) => json_response(500, &json!({ "ok": false, "error": e })),
    })
}

type Checked = std::result::Result<Value, String>;

fn open(state: &State) -> std::result::Result<DoStore, String> {
    DoStore::open(&state.storage()).map_err(|e| e.message)
}

/// A value of `len` bytes that differs from values of other `seed`s.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed) ^ ((i >> 11) as u8))
        .collect()
}

/// First column of the first row of `query`, as an integer.
fn integer(
    sql: &SqlStorage,
    query: &str,
    bindings: Vec<SqlStorageValue>,
) -> std::result::Result<i64, String> {
    let rows: Vec<Vec<SqlStorageValue>> = sql
        .exec(query, bindings)
        .and_then(|c| c.raw().collect::<Result<_>>())
        .map_err(|e| format!("{query}: {e}"))?;
    match rows.first().and_then(|r| r.first()) {
        Some(SqlStorageValue::Integer(n)) => Ok(*n),
        other => Err(format!("{query}: {other:?}")),
    }
}

/// Rows `key` has in `queen_kv` (stale chunks included).
fn chunk_rows(sql: &SqlStorage, key: &str) -> std::result::Result<i64, String> {
    integer(
        sql,
        "SELECT count(*) FROM queen_kv WHERE key = ?",
        vec![SqlStorageValue::from(key)],
    )
}

/// Chunk rows a value of `len` bytes is stored in (an empty value is one empty chunk).
fn chunks_of(len: usize) -> i64 {
    len.div_ceil(CHUNK_BYTES).max(1) as i64
}

/// `/__test/commit/shrink`: see the module documentation.
async fn shrink(state: &State) -> Checked {
    let store = open(state)?;
    let sql = state.storage().sql();
    const KEY: &str = "sh/k";
    let c = CHUNK_BYTES;
    // (length of the value of KEY, shape of the commit that puts it)
    let steps: [(usize, &str); 12] = [
        (3 * c + 5, "alone"),
        (2 * c + 1, "alone"),
        (c + 1, "beside other puts"),
        (c, "beside a delete"),
        (10, "alone"),
        (0, "beside other puts"),
        (2 * c, "beside a delete"),
        (0, "alone"),
        (3 * c + 1, "many statements"),
        (1, "many statements"),
        (2 * c + 3, "beside a delete"),
        (0, "beside a delete"),
    ];
    let mut failures = Vec::new();
    let mut seen = Vec::new();
    for (step, (len, shape)) in steps.iter().enumerate() {
        let value = pattern(*len, step as u8);
        let mut changes = ChangeSet::default();
        changes.put(KEY, value.clone());
        match *shape {
            "beside other puts" => {
                changes.put("sh/a", pattern(100, 1));
                changes.put("sh/z", pattern(100, 2));
            }
            "beside a delete" => {
                // A key that sorts right after KEY: a prefix-bounded delete would take KEY with it.
                changes.put("sh/k0", pattern(c + 1, 3));
                store.commit(&changes).await.map_err(|e| e.message)?;
                changes = ChangeSet::default();
                changes.put(KEY, value.clone());
                changes.delete("sh/k0");
            }
            "many statements" => {
                // More small puts than one statement binds, around KEY in key order.
                for i in 0..60 {
                    changes.put(format!("sh/j{i:02}"), pattern(10, i));
                    changes.put(format!("sh/l{i:02}"), pattern(10, i));
                }
            }
            _ => {}
        }
        if let Err(e) = store.commit(&changes).await {
            failures.push(format!(
                "step {step} ({len} bytes, {shape}): commit failed: {}",
                e.message
            ));
            continue;
        }
        let rows = chunk_rows(&sql, KEY)?;
        let got = store
            .get(&[KEY.to_string(), "sh/k0".to_string()])
            .await
            .map_err(|e| e.message)?;
        seen.push(json!({ "step": step, "len": len, "shape": shape, "chunk_rows": rows }));
        if rows != chunks_of(*len) {
            failures.push(format!(
                "step {step} ({len} bytes, {shape}): {rows} chunk rows, want {}",
                chunks_of(*len)
            ));
        }
        if got[0].as_deref() != Some(&value[..]) {
            failures.push(format!(
                "step {step} ({len} bytes, {shape}): value reads back wrong"
            ));
        }
        if *shape == "beside a delete" && (got[1].is_some() || chunk_rows(&sql, "sh/k0")? != 0) {
            failures.push(format!("step {step}: the deleted key sh/k0 is still there"));
        }
    }

    // A key deleted in one commit and put again in the next, in the same turn, shorter than before.
    let mut put = ChangeSet::default();
    put.put("sh/again", pattern(2 * c + 9, 7));
    store.commit(&put).await.map_err(|e| e.message)?;
    let mut delete = ChangeSet::default();
    delete.delete("sh/again");
    store.commit(&delete).await.map_err(|e| e.message)?;
    let mut again = ChangeSet::default();
    again.put("sh/again", b"back".to_vec());
    store.commit(&again).await.map_err(|e| e.message)?;
    if chunk_rows(&sql, "sh/again")? != 1
        || store
            .get(&["sh/again".to_string()])
            .await
            .map_err(|e| e.message)?[0]
            .as_deref()
            != Some(&b"back"[..])
    {
        failures.push("a key deleted and put again reads back wrong or keeps stale chunks".into());
    }
    // No key has a gap or a chunk past its end: every key's chunks are 0..n.
    let gaps = integer(
        &sql,
        "SELECT count(*) FROM (SELECT key, max(chunk) + 1 AS top, count(*) AS n FROM queen_kv \
         WHERE key >= 'sh/' AND key < 'sh0' GROUP BY key) WHERE top != n",
        Vec::new(),
    )?;
    if gaps != 0 {
        failures.push(format!("{gaps} keys have chunks that are not 0..n"));
    }
    Ok(json!({ "ok": failures.is_empty(), "failures": failures, "steps": seen }))
}

/// The segment key the segment cases of `rows-written` and `rows-written-previous` write.
const RW_SEGMENT: &str = "s/0000000000000002/0000000000000000";

/// `/__test/commit/rows-written`: see the module documentation.
async fn rows_written(state: &State) -> Checked {
    let store = open(state)?;
    let sql = state.storage().sql();
    type Build = fn(&mut ChangeSet);
    let cases: [(&str, Build); 18] = [
        ("put a new one-chunk value", |s| s.put("rw/a", vec![1; 10])),
        ("update a one-chunk value", |s| s.put("rw/a", vec![2; 10])),
        ("put a new three-chunk value", |s| {
            s.put("rw/b", vec![3; 2 * CHUNK_BYTES + 1])
        }),
        ("shrink three chunks to one", |s| s.put("rw/b", vec![4; 10])),
        ("grow one chunk to three", |s| {
            s.put("rw/b", vec![5; 2 * CHUNK_BYTES + 1])
        }),
        ("three chunks over three chunks", |s| {
            s.put("rw/b", vec![6; 2 * CHUNK_BYTES + 1])
        }),
        ("empty over three chunks", |s| s.put("rw/b", Vec::new())),
        ("delete a one-chunk key and put another", |s| {
            s.delete("rw/a");
            s.put("rw/c", vec![7; 10]);
        }),
        ("delete a missing key", |s| s.delete("rw/missing")),
        // Segment keys: their rows go to `queen_seg` through the routing trigger, or to `queen_kv` at
        // CHUNK_BYTES or more (the cases of `rows-written-previous` by the same names, and a push's shape).
        ("put a new segment", |s| s.put(RW_SEGMENT, vec![8; 100])),
        ("update a segment", |s| s.put(RW_SEGMENT, vec![9; 100])),
        ("grow a segment to three chunks", |s| {
            s.put(RW_SEGMENT, vec![10; 2 * CHUNK_BYTES + 1])
        }),
        ("shrink a three-chunk segment to one", |s| {
            s.put(RW_SEGMENT, vec![11; 100])
        }),
        ("push: a segment, its index entry, the partition", |s| {
            s.put("p/0000000000000003", vec![12; 20]);
            s.put("s/0000000000000003/0000000000000000", vec![13; 1000]);
            s.put("x/0000000000000003/0000000000000000", vec![14; 30]);
        }),
        ("delete a segment", |s| s.delete(RW_SEGMENT)),
        // A long segment: its `queen_blob` row and its `queen_seg` row (format 3).
        ("put a long segment", |s| s.put(RW_SEGMENT, vec![15; 4000])),
        ("update a long segment", |s| {
            s.put(RW_SEGMENT, vec![16; 5000])
        }),
        ("delete a long segment", |s| s.delete(RW_SEGMENT)),
    ];
    let mut failures = Vec::new();
    let mut seen = Vec::new();
    for (name, build) in cases {
        let mut changes = ChangeSet::default();
        build(&mut changes);
        let before_changes = integer(&sql, "SELECT total_changes()", Vec::new())?;
        let before_counted = store.stats().rows_written;
        store
            .commit(&changes)
            .await
            .map_err(|e| format!("{name}: {}", e.message))?;
        let changed = integer(&sql, "SELECT total_changes()", Vec::new())? - before_changes;
        let counted = (store.stats().rows_written - before_counted) as i64;
        seen.push(
            json!({ "case": name, "rows_written": counted, "total_changes": changed,
                          "change_set_rows": changes.rows() }),
        );
        if counted != changed {
            failures.push(format!(
                "{name}: the store counted {counted} rows written, SQLite changed {changed}"
            ));
        }
    }
    Ok(json!({ "ok": failures.is_empty(), "failures": failures, "cases": seen }))
}

/// `/__test/commit/rows-written-previous`: see the module documentation.
fn rows_written_previous(state: &State) -> Checked {
    let sql = state.storage().sql();
    for statement in crate::selftest::PREVIOUS_SCHEMA {
        sql.exec(statement, None::<Vec<SqlStorageValue>>)
            .map_err(|e| e.to_string())?;
    }
    let three = |seed| pattern(2 * CHUNK_BYTES + 1, seed);
    let cases: [(&str, &str, Vec<u8>); 10] = [
        ("put a new one-chunk value", "rw/a", vec![1; 10]),
        ("update a one-chunk value", "rw/a", vec![2; 10]),
        ("put a new three-chunk value", "rw/b", three(3)),
        ("shrink three chunks to one", "rw/b", vec![4; 10]),
        ("grow one chunk to three", "rw/b", three(5)),
        ("three chunks over three chunks", "rw/b", three(6)),
        ("put a new segment", RW_SEGMENT, vec![8; 100]),
        ("update a segment", RW_SEGMENT, vec![9; 100]),
        ("grow a segment to three chunks", RW_SEGMENT, three(10)),
        (
            "shrink a three-chunk segment to one",
            RW_SEGMENT,
            vec![11; 100],
        ),
    ];
    let mut seen = Vec::new();
    for (name, key, value) in cases {
        let before = integer(&sql, "SELECT total_changes()", Vec::new())?;
        crate::selftest::previous_commit(&sql, &[(key, &value)])?;
        let changed = integer(&sql, "SELECT total_changes()", Vec::new())? - before;
        seen.push(json!({ "case": name, "total_changes": changed }));
    }
    Ok(json!({ "ok": true, "cases": seen }))
}

/// `POST /__test/commit/turn`: see the module documentation.
async fn turn_write(state: &State) -> Checked {
    let store = open(state)?;
    let mut first = ChangeSet::default();
    first.put("turn/a", pattern(2 * CHUNK_BYTES + 1, 1));
    first.put("turn/gone", b"deleted by the third commit".to_vec());
    store.commit(&first).await.map_err(|e| e.message)?;
    let mut one_statement = ChangeSet::default();
    one_statement.put("turn/b", b"never".to_vec());
    one_statement.put("turn/a", b"never".to_vec());
    let failed_one = store.commit_then_fail(&one_statement);
    let mut third = ChangeSet::default();
    third.put("turn/c", b"after a failed commit".to_vec());
    third.delete("turn/gone");
    store.commit(&third).await.map_err(|e| e.message)?;
    let mut two_statements = ChangeSet::default();
    two_statements.delete("turn/c");
    two_statements.put("turn/d", b"never".to_vec());
    let failed_two = store.commit_then_fail(&two_statements);
    let mut body = turn_state(&store).await?;
    let both_failed = failed_one.is_err() && failed_two.is_err();
    body["ok"] = Value::Bool(body["ok"] == Value::Bool(true) && both_failed);
    body["commit_errors"] = json!([
        failed_one.err().map(|e| e.message),
        failed_two.err().map(|e| e.message)
    ]);
    Ok(body)
}

/// `GET /__test/commit/turn`: see the module documentation.
async fn turn_check(state: &State) -> Checked {
    turn_state(&open(state)?).await
}

async fn turn_state(store: &DoStore) -> Checked {
    let got = store.scan("turn/").await.map_err(|e| e.message)?;
    let want = vec![
        ("turn/a".to_string(), pattern(2 * CHUNK_BYTES + 1, 1)),
        ("turn/c".to_string(), b"after a failed commit".to_vec()),
    ];
    let keys: Vec<String> = got
        .iter()
        .map(|(k, v)| format!("{k}:{}", v.len()))
        .collect();
    Ok(json!({ "ok": got == want, "keys": keys }))
}

/// `/__test/commit/newer-format`: see the module documentation.
async fn newer_format(state: &State) -> Checked {
    let sql = state.storage().sql();
    for statement in [
        "CREATE TABLE IF NOT EXISTS queen_kv (key TEXT NOT NULL, chunk INTEGER NOT NULL, \
         value BLOB NOT NULL, PRIMARY KEY (key, chunk)) WITHOUT ROWID",
        "CREATE TABLE IF NOT EXISTS queen_meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL)",
    ] {
        sql.exec(statement, None::<Vec<SqlStorageValue>>)
            .map_err(|e| e.to_string())?;
    }
    sql.exec(
        "INSERT OR REPLACE INTO queen_meta (name, value) VALUES ('format', ?)",
        vec![SqlStorageValue::Integer(FORMAT_VERSION + 1)],
    )
    .map_err(|e| e.to_string())?;
    let schema = |sql: &SqlStorage| -> std::result::Result<Vec<String>, String> {
        let rows: Vec<Vec<SqlStorageValue>> = sql
            .exec(
                "SELECT type || ' ' || name FROM sqlite_master WHERE name LIKE 'queen%' ORDER BY name",
                None::<Vec<SqlStorageValue>>,
            )
            .and_then(|c| c.raw().collect::<Result<_>>())
            .map_err(|e| e.to_string())?;
        Ok(rows
            .into_iter()
            .filter_map(|r| match r.into_iter().next() {
                Some(SqlStorageValue::String(s)) => Some(s),
                _ => None,
            })
            .collect())
    };
    let before = schema(&sql)?;
    let refused = matches!(
        DoStore::open(&state.storage()),
        Err(ref e) if e.kind == StoreErrorKind::NewerFormat
    );
    let after = schema(&sql)?;
    Ok(
        json!({ "ok": refused && before == after, "refused": refused,
               "schema_before": before, "schema_after": after }),
    )
}

/// The shrink trigger of commit ea7b0ea (an earlier build of this commit SQL), word for word.
const EARLIER_SHRINK_TRIGGER: &str = "CREATE TRIGGER IF NOT EXISTS queen_kv_shrink_v1 \
     AFTER UPDATE OF value ON queen_kv WHEN NEW.chunk = 0 BEGIN \
       DELETE FROM queen_kv WHERE key = NEW.key AND chunk > 0; \
     END";

/// `/__test/commit/stale-trigger`: see the module documentation.
async fn stale_trigger(state: &State) -> Checked {
    let sql = state.storage().sql();
    // The storage as ea7b0ea's DoStore::open left it.
    for statement in [
        "CREATE TABLE IF NOT EXISTS queen_kv (key TEXT NOT NULL, chunk INTEGER NOT NULL, \
         value BLOB NOT NULL, PRIMARY KEY (key, chunk)) WITHOUT ROWID",
        "CREATE TABLE IF NOT EXISTS queen_meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL)",
        "INSERT OR IGNORE INTO queen_meta (name, value) VALUES ('format', 1)",
        EARLIER_SHRINK_TRIGGER,
    ] {
        sql.exec(statement, None::<Vec<SqlStorageValue>>)
            .map_err(|e| e.to_string())?;
    }
    let store = open(state)?;
    let three = |seed| pattern(2 * CHUNK_BYTES + 1, seed);
    let mut first = ChangeSet::default();
    first.put("st/k", three(1));
    store.commit(&first).await.map_err(|e| e.message)?;
    let before = store.stats().rows_written;
    let mut again = ChangeSet::default();
    again.put("st/k", three(2));
    store.commit(&again).await.map_err(|e| e.message)?;
    let written = store.stats().rows_written - before;
    let got = store
        .get(&["st/k".to_string()])
        .await
        .map_err(|e| e.message)?;
    let rows: Vec<Vec<SqlStorageValue>> = sql
        .exec(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name",
            None::<Vec<SqlStorageValue>>,
        )
        .and_then(|c| c.raw().collect::<Result<_>>())
        .map_err(|e| e.to_string())?;
    let triggers: Vec<String> = rows
        .into_iter()
        .filter_map(|r| match r.into_iter().next() {
            Some(SqlStorageValue::String(s)) => Some(s),
            _ => None,
        })
        .collect();
    let value_ok = got[0].as_deref() == Some(&three(2)[..]);

    Ok(json!({
        "ok": value_ok && written == 3,
        "value_ok": value_ok,
        "rows_written_three_over_three": written,
        "triggers": triggers,
    }))
}

/// `/__test/commit/earlier-build`: see the module documentation.
async fn earlier_build(state: &State) -> Checked {
    let sql = state.storage().sql();
    let store = open(state)?;
    let mut first = ChangeSet::default();
    first.put("st/k", pattern(2 * CHUNK_BYTES + 1, 1));
    first.put("s/0000000000000001/0000000000000000", pattern(100, 2));
    store.commit(&first).await.map_err(|e| e.message)?;
    // ea7b0ea and every build of format 1 check the format before they write: this storage is refused.
    let accepted = crate::selftest::previous_build_accepts(&sql)?;
    Ok(json!({ "ok": !accepted, "refused_by_format_1": !accepted }))
}

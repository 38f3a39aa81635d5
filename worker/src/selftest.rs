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
//! - `GET /__test/store/previous-build?object=NAME`: storage the previous build (format 1, every record in
//!   `queen_kv`) wrote with its commit SQL (kept here) opens as this build's format, which that build's format check
//!   refuses; its segments and records read back by scan and get, and move to `queen_seg` when written again.
//! - `POST /__test/store/downgrade?object=NAME`: rewrites the object's storage as the previous build would have
//!   written it (every segment in `queen_kv`, format 1), for a test that restarts workerd and works on.
//! - `GET /__test/store/layout?object=NAME`: the stored format and the segment rows in each table (`queen_blob`'s
//!   too).
//! - `GET /__test/store/upgrade-fails?object=NAME`: an upgrade of format 1 storage whose last statement fails
//!   (the format row refuses 2) must fail the open and leave the storage exactly as format 1 had it: no
//!   `queen_seg`, no routing trigger, its segment where it was.
//! - `GET /__test/store/format2?object=NAME`: storage format 2 wrote (`queen_seg` without its `blob` column,
//!   that build's routing trigger) opens as this build's format and reads back; a long segment written then
//!   goes to `queen_blob`, and written again shorter, or deleted, leaves no `queen_blob` row behind.
//! - `POST /__test/store/delete?object=NAME&key=KEY`: deletes the record `KEY` (storage damage, for a test
//!   of how a broker opening it answers; the broker's engine, if open, does not see it until it reopens).
//! - `GET /__test/alarm?object=NAME`: whether the object has a maintenance alarm scheduled.
//! - `/__test/commit/...`: the commit SQL's review checks ([`crate::selftest_commit`]).
//! - `/__test/full/...`: a database that runs out of space ([`crate::selftest_full`]).

use queen_edge::store::{conformance, ChangeSet, Store};
use serde_json::{json, Value};
use worker::worker_sys::web_sys::Response;
use worker::{Method, Request, Result, SqlStorage, SqlStorageValue, State};

use crate::do_layout::{BLOB_MIN_BYTES, CHUNK_BYTES, FORMAT_VERSION};
use crate::do_store::DoStore;
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
    let raw = match (req.method(), path.as_str()) {
        (Method::Post, "/__test/store/downgrade") => Some(downgrade(state)),
        (Method::Get, "/__test/store/layout") => Some(layout(state)),
        (Method::Get, "/__test/store/upgrade-fails") => Some(upgrade_fails(state)),
        (Method::Get, "/__test/store/format2") => Some(
            format2(state)
                .await
                .map(|checked| json!({ "ok": true, "checked": checked })),
        ),
        _ => None,
    };
    if let Some(outcome) = raw {
        return match outcome {
            Ok(body) => json_response(200, &body),
            Err(e) => json_response(500, &json!({ "ok": false, "error": e })),
        };
    }
    let store = match DoStore::open(&state.storage()) {
        Ok(store) => store,
        Err(e) => return json_response(500, &json!({ "ok": false, "error": e.message })),
    };
    match (req.method(), path.as_str()) {
        (Method::Post, "/__test/store/delete") => {
            let Some(key) = crate::routing::query_param(&query, "key") else {
                return error_response(400, "key is required");
            };
            let mut changes = ChangeSet::default();
            changes.delete(key.clone());
            match store.commit(&changes).await {
                Ok(()) => json_response(200, &json!({ "ok": true, "deleted": key })),
                Err(e) => json_response(500, &json!({ "ok": false, "error": e.message })),
            }
        }
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
            // A segment key: its row goes to `queen_seg` through the routing trigger, inside the same statement.
            puts_only.put("s/0000000000000007/0000000000000000", b"never".to_vec());
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
            let segment = match store.scan("s/").await {
                Ok(records) => records,
                Err(e) => return json_response(500, &json!({ "ok": false, "error": e.message })),
            };
            let mut want = setup
                .puts()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<Vec<_>>();
            want.sort();
            let ok = failed.iter().all(|f| f.is_err()) && after == want && segment.is_empty();
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

/// The schema the previous build (format 1: sessions 6 to 9, every record in `queen_kv`) gave new storage, as
/// its `DoStore::open` left it: the tables, format 1, and the shrink trigger of sessions 8 and 9.
pub(crate) const PREVIOUS_SCHEMA: [&str; 4] = [
    "CREATE TABLE IF NOT EXISTS queen_kv (key TEXT NOT NULL, chunk INTEGER NOT NULL, \
     value BLOB NOT NULL, PRIMARY KEY (key, chunk)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS queen_meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL)",
    "INSERT OR IGNORE INTO queen_meta (name, value) VALUES ('format', 1)",
    "CREATE TRIGGER IF NOT EXISTS queen_kv_shrink_v2 \
     AFTER UPDATE OF value ON queen_kv WHEN NEW.chunk = 0 AND length(NEW.value) < 1048576 BEGIN \
       DELETE FROM queen_kv WHERE key = NEW.key AND chunk > 0; \
     END",
];

/// The previous build's check of the stored format (its `DoStore::open`): it reads storage of format 1 or
/// none and refuses any other.
pub(crate) fn previous_build_accepts(sql: &SqlStorage) -> std::result::Result<bool, String> {
    let rows: Vec<Vec<SqlStorageValue>> = sql
        .exec(
            "SELECT value FROM queen_meta WHERE name = 'format'",
            None::<Vec<SqlStorageValue>>,
        )
        .and_then(|c| c.raw().collect::<Result<_>>())
        .map_err(|e| e.to_string())?;
    Ok(match rows.first().and_then(|row| row.first()) {
        None => true,
        Some(SqlStorageValue::Integer(v)) => *v <= 1,
        Some(_) => false,
    })
}

/// A value of `len` bytes that differs from others of other `seed`s.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Commits `puts` as the previous build did (format 1): for a value of [`CHUNK_BYTES`] or more, a delete of
/// the key's chunks past its own; then an upsert of each chunk into `queen_kv`, chunk 0 first.
pub(crate) fn previous_commit(
    sql: &SqlStorage,
    puts: &[(&str, &[u8])],
) -> std::result::Result<(), String> {
    for (key, value) in puts {
        let parts: Vec<&[u8]> = if value.is_empty() {
            vec![value]
        } else {
            value.chunks(CHUNK_BYTES).collect()
        };
        let run = |query: String, bindings: Vec<SqlStorageValue>| {
            sql.exec(&query, bindings)
                .map(|_| ())
                .map_err(|e| format!("previous build's commit: {e}"))
        };
        if value.len() >= CHUNK_BYTES {
            run(
                format!(
                    "DELETE FROM queen_kv WHERE key = ? AND chunk >= {}",
                    parts.len()
                ),
                vec![SqlStorageValue::from(*key)],
            )?;
        }
        for (i, part) in parts.iter().enumerate() {
            run(
                format!(
                    "INSERT INTO queen_kv (key, chunk, value) VALUES (?, {i}, ?) \
                     ON CONFLICT (key, chunk) DO UPDATE SET value = excluded.value"
                ),
                vec![
                    SqlStorageValue::from(*key),
                    SqlStorageValue::Blob(part.to_vec()),
                ],
            )?;
        }
    }
    Ok(())
}

/// First column of the first row of `query`, as an integer.
fn integer(sql: &SqlStorage, query: &str, key: Option<&str>) -> std::result::Result<i64, String> {
    let bindings: Vec<SqlStorageValue> = key.map(SqlStorageValue::from).into_iter().collect();
    let rows: Vec<Vec<SqlStorageValue>> = sql
        .exec(query, bindings)
        .and_then(|c| c.raw().collect::<Result<_>>())
        .map_err(|e| e.to_string())?;
    match rows.first().and_then(|r| r.first()) {
        Some(SqlStorageValue::Integer(n)) => Ok(*n),
        other => Err(format!("{query}: {other:?}")),
    }
}

/// Rows `key` has in `queen_kv` (its chunks, stale ones included).
fn chunk_rows(sql: &SqlStorage, key: &str) -> std::result::Result<i64, String> {
    integer(
        sql,
        "SELECT count(*) FROM queen_kv WHERE key = ?",
        Some(key),
    )
}

/// The key of segment (pid, first), as the core writes it.
fn seg(pid: u64, first: u64) -> String {
    format!("s/{pid:016x}/{first:016x}")
}

/// `/__test/store/previous-build`: see the module documentation. Returns the steps checked.
async fn previous_build(state: &State) -> std::result::Result<Vec<&'static str>, String> {
    let sql = state.storage().sql();
    for statement in PREVIOUS_SCHEMA {
        sql.exec(statement, None::<Vec<SqlStorageValue>>)
            .map_err(|e| e.to_string())?;
    }
    let mut checked = Vec::new();
    // Segments of two partitions (one of CHUNK_BYTES or more), a segment key whose partition id does not fit
    // `queen_seg`, and records of other kinds, all in `queen_kv` as the previous build wrote them.
    let big = pattern(CHUNK_BYTES + 5, 1);
    let old: Vec<(String, Vec<u8>)> = vec![
        (seg(1, 0), pattern(300, 2)),
        (seg(1, 0x32), pattern(301, 3)),
        (seg(1, 0x64), pattern(302, 4)),
        (seg(2, 0), big.clone()),
        (seg(u64::MAX, 0), pattern(303, 5)),
        ("p/0000000000000001".to_string(), b"partition".to_vec()),
        (
            "x/0000000000000001/0000000000000000".to_string(),
            b"entry".to_vec(),
        ),
    ];
    let puts: Vec<(&str, &[u8])> = old.iter().map(|(k, v)| (k.as_str(), &v[..])).collect();
    previous_commit(&sql, &puts)?;

    // This build opens it: its format from now on, nothing moved, everything reads back in key order.
    let store = DoStore::open(&state.storage()).map_err(|e| e.message)?;
    if integer(
        &sql,
        "SELECT value FROM queen_meta WHERE name = 'format'",
        None,
    )? != FORMAT_VERSION
        || previous_build_accepts(&sql)?
    {
        return Err(
            "the opened storage is not this build's format, or a format 1 build would read it"
                .into(),
        );
    }
    checked
        .push("the storage is this build's format once opened, which the previous build refuses");
    if integer(&sql, "SELECT count(*) FROM queen_seg", None)? != 0 {
        return Err("the upgrade moved segments (it should leave them where they are)".into());
    }
    let mut want = old.clone();
    want.sort();
    if store.scan("").await.map_err(|e| e.message)? != want {
        return Err("this build misread the previous build's records".into());
    }
    let keys: Vec<String> = old.iter().map(|(k, _)| k.clone()).collect();
    let got = store.get(&keys).await.map_err(|e| e.message)?;
    if got != old.iter().map(|(_, v)| Some(v.clone())).collect::<Vec<_>>() {
        return Err("this build's get misread the previous build's records".into());
    }
    checked.push("this build reads the previous build's segments and records, by scan and by get");

    // One commit: a new segment (to `queen_seg`), an old one written again (moves), one deleted, the big one
    // shrunk (moves), the one that does not fit written again (stays), an old one left alone.
    let mut changes = ChangeSet::default();
    changes.put(seg(1, 0xc8), pattern(304, 6));
    changes.put(seg(1, 0x64), pattern(305, 7));
    changes.delete(seg(1, 0));
    changes.put(seg(2, 0), pattern(306, 8));
    changes.put(seg(u64::MAX, 0), pattern(307, 9));
    store.commit(&changes).await.map_err(|e| e.message)?;
    let want: Vec<(String, Vec<u8>)> = vec![
        (seg(1, 0x32), pattern(301, 3)),
        (seg(1, 0x64), pattern(305, 7)),
        (seg(1, 0xc8), pattern(304, 6)),
        (seg(2, 0), pattern(306, 8)),
        (seg(u64::MAX, 0), pattern(307, 9)),
    ];
    if store.scan("s/").await.map_err(|e| e.message)? != want {
        return Err(
            "segments of both formats read back wrong or out of order after a commit".into(),
        );
    }
    let placed = [
        (seg(1, 0), 0),
        (seg(1, 0x32), 1),
        (seg(1, 0x64), 0),
        (seg(1, 0xc8), 0),
        (seg(2, 0), 0),
        (seg(u64::MAX, 0), 1),
    ];
    for (key, rows) in placed {
        if chunk_rows(&sql, &key)? != rows {
            return Err(format!(
                "{key} has {} rows in queen_kv, want {rows}",
                chunk_rows(&sql, &key)?
            ));
        }
    }
    if integer(&sql, "SELECT count(*) FROM queen_seg", None)? != 3 {
        return Err("queen_seg does not hold exactly the three segments written since".into());
    }
    checked
        .push("written again, a previous build's segment moves to queen_seg; deleted, it is gone");
    Ok(checked)
}

/// `POST /__test/store/downgrade`: rewrites the object's storage into the previous build's layout (format 1:
/// every segment back in `queen_kv`, no `queen_seg`, no routing trigger), as if that build had written it.
/// The object must be restarted before its next request (its open store would still route segments).
fn downgrade(state: &State) -> std::result::Result<Value, String> {
    let sql = state.storage().sql();
    let ids: Vec<Vec<SqlStorageValue>> = sql
        .exec(
            "SELECT id FROM queen_seg ORDER BY id",
            None::<Vec<SqlStorageValue>>,
        )
        .and_then(|c| c.raw().collect::<Result<_>>())
        .map_err(|e| e.to_string())?;
    let mut moved = 0;
    for row in ids {
        let Some(SqlStorageValue::Integer(id)) = row.into_iter().next() else {
            return Err("queen_seg id is not an integer".into());
        };
        let key = seg((id >> 32) as u64, (id & 0xffff_ffff) as u64);
        sql.exec(
            "INSERT INTO queen_kv (key, chunk, value) SELECT ?, 0, \
             coalesce((SELECT b.value FROM queen_blob b WHERE b.id = s.blob), s.value) \
             FROM queen_seg s WHERE s.id = ?",
            vec![
                SqlStorageValue::from(key.as_str()),
                SqlStorageValue::Integer(id),
            ],
        )
        .map_err(|e| e.to_string())?;
        moved += 1;
    }
    for statement in [
        "DROP TRIGGER IF EXISTS queen_seg_route_v1",
        "DROP TRIGGER IF EXISTS queen_seg_route_v2",
        "DROP TRIGGER IF EXISTS queen_seg_route_blob_v1",
        "DROP TABLE IF EXISTS queen_seg",
        "DROP TABLE IF EXISTS queen_blob",
        "UPDATE queen_meta SET value = 1 WHERE name = 'format'",
    ] {
        sql.exec(statement, None::<Vec<SqlStorageValue>>)
            .map_err(|e| e.to_string())?;
    }
    Ok(json!({ "ok": true, "moved": moved }))
}

/// `GET /__test/store/layout`: the stored format and how many segment rows each table holds (without opening
/// the store, so without upgrading it).
fn layout(state: &State) -> std::result::Result<Value, String> {
    let sql = state.storage().sql();
    let format = integer(
        &sql,
        "SELECT value FROM queen_meta WHERE name = 'format'",
        None,
    )?;
    let in_kv = integer(
        &sql,
        "SELECT count(*) FROM queen_kv WHERE key >= 's/' AND key < 's0'",
        None,
    )?;
    let (has_seg, in_seg) = table_rows(&sql, "queen_seg")?;
    let (_, in_blob) = table_rows(&sql, "queen_blob")?;
    Ok(
        json!({ "ok": true, "format": format, "kvSegmentRows": in_kv, "segRows": in_seg, "hasSegTable": has_seg,
            "blobRows": in_blob }),
    )
}

/// Whether table `name` exists, and its rows (0 when it does not).
fn table_rows(sql: &SqlStorage, name: &str) -> std::result::Result<(bool, i64), String> {
    let exists = integer(
        sql,
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?",
        Some(name),
    )? == 1;
    let rows = if exists {
        integer(sql, &format!("SELECT count(*) FROM {name}"), None)?
    } else {
        0
    };
    Ok((exists, rows))
}

/// The objects of the storage's schema (tables, triggers, views), sorted by name.
fn schema_names(sql: &SqlStorage) -> std::result::Result<Vec<String>, String> {
    let rows: Vec<Vec<SqlStorageValue>> = sql
        .exec(
            "SELECT type || ' ' || name FROM sqlite_master \
             WHERE type IN ('table', 'trigger', 'view') AND name NOT LIKE '\\_cf\\_%' ESCAPE '\\' \
             AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
            None::<Vec<SqlStorageValue>>,
        )
        .and_then(|c| c.raw().collect::<Result<_>>())
        .map_err(|e| e.to_string())?;
    Ok(rows
        .into_iter()
        .filter_map(|row| match row.into_iter().next() {
            Some(SqlStorageValue::String(name)) => Some(name),
            _ => None,
        })
        .collect())
}

/// `GET /__test/store/upgrade-fails`: see the module documentation.
fn upgrade_fails(state: &State) -> std::result::Result<Value, String> {
    let sql = state.storage().sql();
    // Format 1 storage as the previous build left it, but with a format row that refuses any format past 1:
    // the upgrade's last statement (the format row) fails after its `CREATE`s ran.
    sql.exec(
        "CREATE TABLE IF NOT EXISTS queen_meta (name TEXT PRIMARY KEY, \
         value INTEGER NOT NULL CHECK (value <= 1))",
        None::<Vec<SqlStorageValue>>,
    )
    .map_err(|e| e.to_string())?;
    for statement in PREVIOUS_SCHEMA {
        sql.exec(statement, None::<Vec<SqlStorageValue>>)
            .map_err(|e| e.to_string())?;
    }
    let segment = seg(4, 0);
    let value = pattern(500, 9);
    previous_commit(&sql, &[(segment.as_str(), &value)])?;
    let before = schema_names(&sql)?;
    let refused = match DoStore::open(&state.storage()) {
        Ok(_) => return Err("the open succeeded although the format row refuses 2".into()),
        Err(e) => e.message,
    };
    let after = schema_names(&sql)?;
    let format = integer(
        &sql,
        "SELECT value FROM queen_meta WHERE name = 'format'",
        None,
    )?;
    let rows = chunk_rows(&sql, &segment)?;
    let ok = after == before && format == 1 && rows == 1;
    Ok(json!({
        "ok": ok, "refused": refused, "schema_before": before, "schema_after": after,
        "format": format, "segment_rows_in_queen_kv": rows,
    }))
}

/// Format 2's schema (sessions 10 to 29): `queen_seg` without the `blob` column, and its routing trigger.
const FORMAT2_SCHEMA: [&str; 3] = [
    "CREATE TABLE IF NOT EXISTS queen_seg (id INTEGER PRIMARY KEY, value BLOB NOT NULL)",
    "CREATE TRIGGER IF NOT EXISTS queen_seg_route_v1 \
     BEFORE INSERT ON queen_kv WHEN NEW.chunk < 0 BEGIN \
       INSERT INTO queen_seg (id, value) VALUES (-1 - NEW.chunk, NEW.value) \
         ON CONFLICT (id) DO UPDATE SET value = excluded.value; \
       DELETE FROM queen_kv WHERE key = NEW.key; \
       SELECT RAISE(IGNORE); \
     END",
    "UPDATE queen_meta SET value = 2 WHERE name = 'format'",
];

/// `GET /__test/store/format2`: see the module documentation. Returns the steps checked.
async fn format2(state: &State) -> std::result::Result<Vec<&'static str>, String> {
    let sql = state.storage().sql();
    for statement in PREVIOUS_SCHEMA.iter().chain(FORMAT2_SCHEMA.iter()) {
        sql.exec(statement, None::<Vec<SqlStorageValue>>)
            .map_err(|e| e.to_string())?;
    }
    // Format 2's rows: a short and a long segment in `queen_seg`, through its trigger.
    let old = vec![
        (seg(1, 0), pattern(200, 1)),
        (seg(1, 0x64), pattern(BLOB_MIN_BYTES * 3, 2)),
    ];
    for (key, value) in &old {
        let id = crate::do_layout::segment_id(key).ok_or("a test key without a queen_seg id")?;
        sql.exec(
            "INSERT INTO queen_kv (key, chunk, value) VALUES (?, ?, ?)",
            vec![
                SqlStorageValue::from(key.as_str()),
                SqlStorageValue::Integer(-1 - id),
                SqlStorageValue::Blob(value.clone()),
            ],
        )
        .map_err(|e| format!("format 2's commit: {e}"))?;
    }
    let mut checked = Vec::new();
    let store = DoStore::open(&state.storage()).map_err(|e| e.message)?;
    let format = integer(
        &sql,
        "SELECT value FROM queen_meta WHERE name = 'format'",
        None,
    )?;
    if format != FORMAT_VERSION || integer(&sql, "SELECT count(*) FROM queen_blob", None)? != 0 {
        return Err(format!(
            "opened format 2 storage is format {format}, or moved values"
        ));
    }
    if store.scan("s/").await.map_err(|e| e.message)? != old {
        return Err("this build misread format 2's segments".into());
    }
    checked.push("format 2 storage opens as this build's format and reads back as it was");

    // A long segment new, the old long one written again long: two `queen_blob` rows, read back.
    let mut changes = ChangeSet::default();
    changes.put(seg(1, 0xc8), pattern(BLOB_MIN_BYTES, 3));
    changes.put(seg(1, 0x64), pattern(BLOB_MIN_BYTES * 2, 4));
    store.commit(&changes).await.map_err(|e| e.message)?;
    let blobs = integer(&sql, "SELECT count(*) FROM queen_blob", None)?;
    let want = vec![
        (seg(1, 0), pattern(200, 1)),
        (seg(1, 0x64), pattern(BLOB_MIN_BYTES * 2, 4)),
        (seg(1, 0xc8), pattern(BLOB_MIN_BYTES, 3)),
    ];
    let keys: Vec<String> = want.iter().map(|(k, _)| k.clone()).collect();
    let got = store.get(&keys).await.map_err(|e| e.message)?;
    if blobs != 2
        || store.scan("s/").await.map_err(|e| e.message)? != want
        || got
            != want
                .iter()
                .map(|(_, v)| Some(v.clone()))
                .collect::<Vec<_>>()
    {
        return Err(format!(
            "long segments: {blobs} queen_blob rows (want 2), or misread"
        ));
    }
    checked.push("long segments go to queen_blob, and read back by scan and by get");

    // Written again long (its old row replaced), written again short, deleted: no row is left behind.
    let mut changes = ChangeSet::default();
    changes.put(seg(1, 0xc8), pattern(BLOB_MIN_BYTES + 1, 5));
    store.commit(&changes).await.map_err(|e| e.message)?;
    let replaced = integer(&sql, "SELECT count(*) FROM queen_blob", None)?;
    let mut changes = ChangeSet::default();
    changes.put(seg(1, 0x64), pattern(10, 6));
    changes.delete(seg(1, 0xc8));
    store.commit(&changes).await.map_err(|e| e.message)?;
    let left = integer(&sql, "SELECT count(*) FROM queen_blob", None)?;
    let want = vec![(seg(1, 0), pattern(200, 1)), (seg(1, 0x64), pattern(10, 6))];
    if replaced != 2 || left != 0 || store.scan("s/").await.map_err(|e| e.message)? != want {
        return Err(format!(
            "queen_blob rows: {replaced} after a rewrite (want 2), {left} after shortening and delete (want 0)"
        ));
    }
    checked.push("a long segment written again or deleted leaves no queen_blob row behind");
    Ok(checked)
}

//! Test-only routes that run checks inside workerd. Served only when the variable `QUEEN_TEST_ROUTES` is
//! `true` (the test driver passes `--var QUEEN_TEST_ROUTES:true` to `wrangler dev`; the production
//! `wrangler.toml` never sets it). The entry Worker and the Durable Object both check the flag.
//!
//! - `GET /__test/store/conformance?object=NAME`: runs `queen_edge::store::conformance::run_all` on a
//!   [`DoStore`] in the object `NAME`, answers `{ok, passed, error, stats}`.
//! - `POST /__test/store/durability?object=NAME`: commits a known record set (one value split across chunks).
//! - `GET /__test/store/durability?object=NAME`: checks that record set byte for byte (after a restart of
//!   wrangler this proves the commits reached disk).
//! - `GET /__test/store/atomicity?object=NAME`: a commit whose last statement fails must leave no trace.
//! - `GET /__test/alarm?object=NAME`: whether the object has a maintenance alarm scheduled.

use queen_edge::store::{conformance, ChangeSet, Store};
use serde_json::json;
use worker::worker_sys::web_sys::Response;
use worker::{Method, Request, Result, State};

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
            let mut changes = ChangeSet::default();
            changes.put("atomic/new", b"never".to_vec());
            changes.put("atomic/keep", b"after".to_vec());
            changes.put("atomic/shrink", vec![6; 10]);
            changes.delete("atomic/missing");
            let failed = store.commit_then_fail(&changes);
            let after = match store.scan("atomic/").await {
                Ok(records) => records,
                Err(e) => return json_response(500, &json!({ "ok": false, "error": e.message })),
            };
            let mut want = setup
                .puts()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<Vec<_>>();
            want.sort();
            let ok = failed.is_err() && after == want;
            json_response(
                if ok { 200 } else { 500 },
                &json!({
                    "ok": ok,
                    "commit_error": failed.err().map(|e| e.message),
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

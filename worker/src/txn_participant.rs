//! A shard's side of transactions across shards (docs/protocol.md §3.9.1; the coordinator is
//! [`crate::txn_coordinator`]).
//!
//! Internal routes of a shard object, sent only by the coordinator (public paths never start with
//! `/__shard/`), each naming the transaction in the `x-queen-txn-id` header:
//! - `POST /__shard/txn/prepare` (the part as a transaction body, the client's `Authorization`, the
//!   coordinator in `x-queen-txn-owner`): `queen_edge::http::prepared::prepare`; a prepared part
//!   schedules the object's alarm at its timeout;
//! - `POST /__shard/txn/commit` and `/abort`: apply or drop the prepared part (idempotent).
//!
//! [`recover`] runs from the object's alarm: a part prepared longer than the timeout ago is settled by
//! asking its coordinator (`committed`: commit; `aborted` or `unknown`: abort; `preparing` or no
//! answer: ask again later).

use serde_json::Value;
use worker::worker_sys::web_sys;
use worker::{Env, Headers, Method, RequestInit, Result};

use crate::broker::{read_request, Broker, BrokerEngine};
use crate::respond;
use crate::txn_coordinator::{timeout, ID_HEADER, OWNER_HEADER};

/// Answers a participant route on this shard's engine.
pub async fn handle(
    broker: &Broker,
    engine: &BrokerEngine,
    path: &str,
    req: web_sys::Request,
) -> Result<web_sys::Response> {
    let config = broker.config();
    let request = match read_request(&req, config.http.limits.max_body_bytes).await? {
        Ok(request) => request,
        Err(too_large) => return respond::answer(&too_large),
    };
    let Some(id) = request.header(ID_HEADER).map(str::to_string) else {
        return respond::error(400, "a transaction route names its transaction");
    };
    match path {
        "/__shard/txn/prepare" => {
            let Some(owner) = request.header(OWNER_HEADER).map(str::to_string) else {
                return respond::error(400, "a prepare names its coordinator");
            };
            let outcome = queen_edge::http::jwt::authenticate(
                &config.http,
                &crate::jwt::WebCryptoVerifier,
                "POST",
                "/api/v1/transaction",
                request.header("authorization"),
                js_sys::Date::now() as i64,
            )
            .await;
            let answer = queen_edge::http::prepared::prepare(
                engine,
                &config.http,
                &request,
                &outcome,
                &id,
                &owner,
            )
            .await;
            let prepared = answer.status == 200
                && serde_json::from_slice::<Value>(&answer.body)
                    .ok()
                    .and_then(|v| v.get("prepared").and_then(Value::as_bool))
                    == Some(true);
            if prepared {
                let at = js_sys::Date::now() as i64 + timeout(broker.env());
                broker.alarm_by(at).await;
            }
            respond::answer(&answer)
        }
        "/__shard/txn/commit" => {
            respond::answer(&queen_edge::http::prepared::commit(engine, &id).await)
        }
        "/__shard/txn/abort" => {
            respond::answer(&queen_edge::http::prepared::abort(engine, &id).await)
        }
        _ => respond::error(404, "no such transaction route"),
    }
}

/// Asks coordinator object `owner` about transaction `id`: its state, `None` when it did not answer.
async fn ask(env: &Env, owner: &str, id: &str) -> Option<String> {
    let headers = Headers::new();
    let mut init = RequestInit::new();
    init.with_method(Method::Get).with_headers(headers);
    let url = format!(
        "https://txn/__shard/txn/status?id={}",
        String::from(js_sys::encode_uri_component(id))
    );
    let request = worker::Request::new_with_init(&url, &init).ok()?;
    let response = crate::fetch::forward_to_object(request.inner(), env, owner)
        .await
        .ok()?;
    if response.status() != 200 {
        return None;
    }
    let body = crate::sharded::read_body(&response).await.ok()?;
    serde_json::from_slice::<Value>(&body)
        .ok()?
        .get("state")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// Settles the parts prepared longer than the timeout ago by asking their coordinators; returns
/// when the alarm should run again for the parts left (`None`: none left).
pub async fn recover(env: &Env, engine: &BrokerEngine) -> Option<i64> {
    let limit = timeout(env);
    let mut next: Option<i64> = None;
    let mut later = |at: i64| next = Some(next.map_or(at, |n: i64| n.min(at)));
    for part in engine.read(|b, _| b.prepared_list()) {
        let now = js_sys::Date::now() as i64;
        if now - part.prepared_at_ms < limit {
            later(part.prepared_at_ms + limit);
            continue;
        }
        let settled = match ask(env, &part.owner, &part.id).await.as_deref() {
            Some("committed") => engine.commit_prepared(&part.id).await.map(|_| ()),
            Some("aborted") | Some("unknown") => engine.abort_prepared(&part.id).await.map(|_| ()),
            _ => {
                later(now + limit);
                continue;
            }
        };
        if let Err(e) = settled {
            worker::console_error!("settling prepared transaction {} failed: {e}", part.id);
            later(now + limit);
        }
    }
    next
}

//! A shard's side of a transaction across shards (docs/protocol.md §3.9.1): prepare, commit and abort
//! of its part, for the Worker's internal routes (never routed from a public path).
//!
//! Prepare reads the part's body exactly as the transaction route reads a transaction (the caller
//! checked as for `POST /api/v1/transaction`, pushed payloads sealed, the maintenance checks), then
//! hands it to [`Engine::prepare`]. Answers: `{"prepared": true}`, or `{"prepared": false, "error"}`
//! when the part is refused; a malformed part or a refused caller gets the route's own 4xx, a part
//! the storage quota refuses a 507 (as a push or a transaction would).

use super::error::{json_response, json_text_response, HttpError};
use super::router::Route;
use super::{handlers, render, HttpConfig, HttpRequest, HttpResponse};
use crate::engine::{Engine, Host};
use crate::store::Store;
use serde_json::json;

/// Prepares part `id` (decided by `owner`) from `request`, a transaction body.
pub async fn prepare<S: Store, H: Host>(
    engine: &Engine<S, H>,
    config: &HttpConfig,
    request: &HttpRequest,
    #[cfg(feature = "jwt")] jwt: &super::jwt::JwtOutcome,
    id: &str,
    owner: &str,
) -> HttpResponse {
    let answer = async {
        let authorization = request.header("authorization");
        #[cfg(not(feature = "jwt"))]
        let caller = super::auth::check(
            config.auth.as_ref(),
            Route::Transaction.access(),
            authorization,
        )?;
        #[cfg(feature = "jwt")]
        let caller = super::jwt::check(
            config,
            Route::Transaction.access(),
            "/api/v1/transaction",
            authorization,
            jwt,
        )?;
        let operations = handlers::transaction_operations(
            engine,
            config,
            &request.body,
            caller.subject.as_deref(),
        )
        .await?;
        Ok::<_, HttpError>(match engine.prepare(id, owner, operations).await? {
            Ok(()) => json_response(200, &json!({ "prepared": true })),
            Err(error) => json_response(200, &json!({ "prepared": false, "error": error })),
        })
    };
    answer.await.unwrap_or_else(HttpError::into_response)
}

/// Commits prepared part `id`: `{"committed": true, "reply": <the transaction answer of the part>}`,
/// or `{"committed": false}` when nothing is prepared under `id` (applied before, or never prepared).
pub async fn commit<S: Store, H: Host>(engine: &Engine<S, H>, id: &str) -> HttpResponse {
    match engine.commit_prepared(id).await {
        Ok(Some(reply)) => {
            // The part's transaction answer is JSON text (render::tx_reply), set in as it is.
            let mut body = br#"{"committed":true,"reply":"#.to_vec();
            body.extend_from_slice(&render::tx_reply(&reply));
            body.push(b'}');
            json_text_response(200, body)
        }
        Ok(None) => json_response(200, &json!({ "committed": false })),
        Err(e) => HttpError::from(e).into_response(),
    }
}

/// Aborts prepared part `id`: `{"aborted": true}`, or `false` when nothing was prepared under it.
pub async fn abort<S: Store, H: Host>(engine: &Engine<S, H>, id: &str) -> HttpResponse {
    match engine.abort_prepared(id).await {
        Ok(aborted) => json_response(200, &json!({ "aborted": aborted })),
        Err(e) => HttpError::from(e).into_response(),
    }
}

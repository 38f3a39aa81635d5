//! The queen-edge Cloudflare Worker: a thin entry Worker in front of one `Broker` Durable Object per broker.
//!
//! Routing (see `wrangler.toml` at the repository root):
//! - `/api/v1/*`, `/health`, `/metrics`, `/metrics/*`: checked first (route, bearer token or JWT (its
//!   signature through Web Crypto, [`jwt`]), declared `Content-Length` against `MAX_BODY_BYTES`:
//!   `queen_edge::http::precheck_with_jwt`), then forwarded unchanged to the
//!   Durable Object named by [`broker_name`], which checks again and answers through `src/http`.
//!   With `SHARDS` > 1 ([`shards`]) the broker is spread over several objects: [`sharded`] decides which
//!   ([`routing`]) and merges fan-out answers ([`fanout`]).
//! - `/__test/*`: only when the variable `QUEEN_TEST_ROUTES` is `true` (tests), else 404.
//! - everything else: the static page in `www/` through the `ASSETS` binding (most asset requests never reach
//!   this code: Workers serves matching files first).

#![warn(missing_docs)]

// The #[durable_object] macro generates undocumented wasm-bindgen glue (`new`, `fetch`) inside this module.
#[allow(missing_docs)]
pub mod broker;
pub mod catalog;
pub mod config;
pub mod do_store;
pub mod fanout;
pub mod host;
pub mod jwt;
pub mod routing;
pub mod selftest;
pub mod shape;
pub mod shard_guard;
pub mod sharded;
pub mod shards;

use worker::{event, Context, Env, Method, Request, Response, Result};

use crate::broker::{api_response, error_response};
use crate::config::{flag, var, WorkerConfig};

/// Name of the Durable Object namespace binding.
pub const BROKER_BINDING: &str = "BROKER";
/// Name of the static assets binding.
pub const ASSETS_BINDING: &str = "ASSETS";
/// Header that picks the broker when `BROKER_SELECTABLE` is on.
pub const BROKER_HEADER: &str = "x-queen-broker";
/// Query parameter that picks the broker when `BROKER_SELECTABLE` is on (the header wins when both are sent).
pub const BROKER_QUERY: &str = "broker";

/// True for the paths the broker answers (the rest are static assets).
pub fn is_broker_path(path: &str) -> bool {
    path == "/api/v1"
        || path.starts_with("/api/v1/")
        || path == "/health"
        || path == "/metrics"
        || path.starts_with("/metrics/")
}

/// A valid broker name: 1 to 64 characters of `A-Z a-z 0-9 _ . -`.
pub fn valid_broker_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// The name of the Durable Object that serves `req`: `BROKER_NAME` (default `default`), or, when
/// `BROKER_SELECTABLE` is `true`, the `x-queen-broker` header or `broker` query parameter if present.
/// `Err` carries the 400 message for an invalid name.
pub fn broker_name(req: &Request, env: &Env) -> std::result::Result<String, String> {
    let fixed = var(env, "BROKER_NAME").unwrap_or_else(|| "default".to_string());
    if !flag(env, "BROKER_SELECTABLE") {
        return Ok(fixed);
    }
    let from_header = req.headers().get(BROKER_HEADER).ok().flatten();
    let from_query = req.url().ok().and_then(|url| {
        url.query_pairs()
            .find(|(k, _)| k == BROKER_QUERY)
            .map(|(_, v)| v.into_owned())
    });
    match from_header.or(from_query) {
        None => Ok(fixed),
        Some(name) if valid_broker_name(&name) => Ok(name),
        Some(_) => Err("broker name must be 1-64 characters of A-Z a-z 0-9 _ . -".to_string()),
    }
}

async fn forward(req: Request, env: &Env, name: &str) -> Result<Response> {
    let namespace = env.durable_object(BROKER_BINDING)?;
    let stub = namespace.id_from_name(name)?.get_stub()?;
    stub.fetch_with_request(req).await
}

#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    let path = req.path();

    if path.starts_with("/__test/") {
        if !flag(&env, "QUEEN_TEST_ROUTES") {
            return error_response(404, "Not Found");
        }
        let object = req
            .url()?
            .query_pairs()
            .find(|(k, _)| k == "object")
            .map(|(_, v)| v.into_owned())
            .unwrap_or_else(|| "selftest".to_string());
        if !valid_broker_name(&object) {
            return error_response(400, "invalid object name");
        }
        return forward(req, &env, &object).await;
    }

    if !is_broker_path(&path) {
        return env.assets(ASSETS_BINDING)?.fetch_request(req).await;
    }

    // A CORS preflight is answered here, as the broker would (204 and the CORS headers for any path):
    // it carries neither a token nor the X-Queen-Broker value, so forwarding it would only wake a
    // Durable Object, perhaps the wrong one.
    if req.method() == Method::Options {
        return api_response(204, &[], Vec::new());
    }

    // Route, token and declared body size are checked here, before a Durable Object is woken (or
    // created, with BROKER_SELECTABLE) and before any body is buffered.
    let config = WorkerConfig::from_env(&env, String::new(), 0);
    let authorization = req.headers().get("authorization").ok().flatten();
    let content_length = req
        .headers()
        .get("content-length")
        .ok()
        .flatten()
        .and_then(|v| v.trim().parse::<u64>().ok());
    let method = req.method().to_string();
    let outcome = queen_edge::http::jwt::authenticate(
        &config.http,
        &jwt::WebCryptoVerifier,
        &method,
        &path,
        authorization.as_deref(),
        js_sys::Date::now() as i64,
    )
    .await;
    if let Err(refusal) = queen_edge::http::precheck_with_jwt(
        &config.http,
        &method,
        &path,
        authorization.as_deref(),
        content_length,
        &outcome,
    ) {
        return api_response(refusal.status, &refusal.headers, refusal.body);
    }

    let name = match broker_name(&req, &env) {
        Ok(name) => name,
        Err(message) => return error_response(400, &message),
    };
    match shards::shard_count(&env) {
        // One shard: the broker's own object, as before shards existed.
        Ok(1) => forward(req, &env, &name).await,
        Ok(count) => {
            let map = shards::ShardMap {
                broker: name,
                count,
            };
            sharded::handle(req, &env, map, &config).await
        }
        Err(message) => error_response(503, &format!("broker unavailable: {message}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_paths() {
        assert!(is_broker_path("/api/v1/push"));
        assert!(is_broker_path("/health"));
        assert!(is_broker_path("/metrics/prometheus"));
        assert!(!is_broker_path("/"));
        assert!(!is_broker_path("/index.html"));
        assert!(!is_broker_path("/api/v10"));
    }

    #[test]
    fn broker_names() {
        assert!(valid_broker_name("default"));
        assert!(valid_broker_name("tenant-1.eu_west"));
        assert!(!valid_broker_name(""));
        assert!(!valid_broker_name("a/b"));
        assert!(!valid_broker_name(&"x".repeat(65)));
    }
}

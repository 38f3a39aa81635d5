//! Queen's HTTP API, runtime-agnostic: method, path, query, headers and body in; status, headers and body
//! out.
//!
//! The Cloudflare worker and the in-browser Service Worker mode both call [`handle`]; nothing here knows
//! about either. The routes, fields, defaults and status codes are those of the wire contract
//! (`shared/spec/wire-contract.md`, with the 2.6.0 client appendix).
//!
//! Module map, one job each:
//! - `router`: the route table (method and path segments to a [`Route`](router::Route) and its access level);
//! - `query`: query-string parsing and percent-decoding;
//! - `wire`: JSON request bodies, validated into core command types (wire DTOs stay out of the core);
//! - `render`: core replies to JSON answers (`crate::core::json_text`: the writer of the per-message answers,
//!   shared with the segments);
//! - ISO-8601 timestamps come from `crate::core::timefmt` (shared with the core);
//! - `auth`: bearer tokens and roles;
//! - `crypto`: encryption at rest of `encryptionEnabled` queues' payloads (sealed on the way in, opened
//!   on the way out);
//! - `jwt` (the `jwt` feature): JWT parsing and claims checks, the signature behind a verifier trait;
//! - `error`: the `{"error": ...}` answers and how engine errors map to statuses;
//! - `handlers`: one function per route, calling the engine;
//! - `modes`: maintenance mode (push buffering, pop pausing) and the buffered push answer;
//! - `traces`: `POST /api/v1/traces` (the reads are views);
//! - `views`: the read-only dashboard routes (listings, message browser, status, metrics and the
//!   `/metrics/prometheus` text), a cargo feature the npm module's default build leaves out;
//! - `operations`: the delivery log (`deliveries`) and bulk dead-letter work (`dlq_bulk`), built with
//!   the same feature;
//! - `redelivery`: the `/configure` options beyond Queen (`reclaimLimit`, `retryBackoff`, `deliveryLog`).
//!
//! Every malformed request gets a 4xx with a JSON error that says what is wrong, and changes nothing.
//! A 5xx means the store failed (the client may retry).

mod auth;
mod crypto;
#[cfg(feature = "views")]
mod deliveries;
#[cfg(feature = "views")]
mod dlq_bulk;
mod error;
mod handlers;
use crate::core::json_text;
#[cfg(feature = "jwt")]
pub mod jwt;
#[cfg(feature = "ops")]
mod modes;
mod operations;
#[cfg(feature = "twophase")]
pub mod prepared;
mod query;
mod redelivery;
mod render;
mod router;
#[cfg(feature = "ops")]
mod traces;
mod views;
mod wire;

pub use auth::{AuthConfig, AuthToken, Role};
pub use crypto::{Cipher, EncryptionKey};

use crate::engine::{Engine, Host};
use crate::store::Store;

/// An HTTP request, fully read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpRequest {
    /// Method, e.g. `GET` (compared case-insensitively).
    pub method: String,
    /// The URL path, still percent-encoded, e.g. `/api/v1/pop/queue/q1`. If it carries a `?query` and
    /// [`HttpRequest::query`] is empty, the part after `?` is used as the query.
    pub path: String,
    /// The raw query string, without the leading `?` (empty when absent).
    pub query: String,
    /// Header names and values, in any case.
    pub headers: Vec<(String, String)>,
    /// The whole body (empty when there is none).
    pub body: Vec<u8>,
    /// Whether the client has gone (never, unless the embedder says how to tell).
    pub client: ClientGone,
}

/// Tells whether the client of a request has gone (disconnected): a long-poll parked for it then stops
/// without claiming what a later push brings, which nobody would receive (wire-contract §1.3: a client
/// disconnect cancels the parked request). The embedder sets it where its runtime reports a disconnect
/// (the Worker: the request's `AbortSignal`); by default a client never goes. Not part of a request's
/// value: two requests that differ only in it are equal.
#[derive(Clone, Default)]
pub struct ClientGone(Option<std::rc::Rc<dyn Fn() -> bool>>);

impl ClientGone {
    /// A client that has gone when `gone` says so.
    pub fn when(gone: impl Fn() -> bool + 'static) -> Self {
        ClientGone(Some(std::rc::Rc::new(gone)))
    }

    /// Whether the client has gone.
    pub fn has_gone(&self) -> bool {
        self.0.as_ref().is_some_and(|gone| gone())
    }
}

impl std::fmt::Debug for ClientGone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "ClientGone(told)"
        } else {
            "ClientGone(never)"
        })
    }
}

impl PartialEq for ClientGone {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for ClientGone {}

impl HttpRequest {
    /// A request for `target` (a path with an optional `?query`) with no headers and no body.
    pub fn new(method: &str, target: &str) -> Self {
        let (path, query) = match target.split_once('?') {
            Some((p, q)) => (p, q),
            None => (target, ""),
        };
        HttpRequest {
            method: method.to_string(),
            path: path.to_string(),
            query: query.to_string(),
            headers: Vec::new(),
            body: Vec::new(),
            client: ClientGone::default(),
        }
    }

    /// The same request with `body` and `Content-Type: application/json`.
    pub fn with_json(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self.headers
            .push(("Content-Type".to_string(), "application/json".to_string()));
        self
    }

    /// The same request with one more header.
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// An HTTP answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpResponse {
    /// Status code.
    pub status: u16,
    /// Headers (CORS on every answer; `Content-Type` whenever there is a body).
    pub headers: Vec<(String, String)>,
    /// The body (empty for 204).
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body parsed as JSON, if it is JSON.
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_str(std::str::from_utf8(&self.body).ok()?).ok()
    }
}

/// Size and range limits on requests. Everything over a limit is refused with 413 (sizes and counts) or
/// 400 (values), and nothing changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest request body accepted, in bytes. Default 16 MiB.
    pub max_body_bytes: usize,
    /// Largest single message payload (its compact JSON encoding), in bytes. Default 4 MiB.
    pub max_payload_bytes: usize,
    /// Most items in one push (also the most pushed items in one transaction). Default 10 000.
    pub max_items_per_push: usize,
    /// Most items in one `/ack/batch`. Default 10 000.
    pub max_ack_items: usize,
    /// Most operations in one transaction. Default 1 000.
    pub max_transaction_operations: usize,
    /// Largest pop `batch`. Default 10 000.
    pub max_pop_batch: u32,
    /// Longest queue, partition, consumer-group, namespace and task name, in bytes. Default 256.
    pub max_name_bytes: usize,
    /// Longest transaction, lease, trace or dead-letter id, in bytes. Default 256.
    pub max_id_bytes: usize,
    /// Longest lease (pop `leaseSeconds`, extend `seconds`, option `leaseTime`), in seconds. Default 7 days.
    pub max_lease_seconds: u64,
    /// Longest long-poll; larger `timeout` values are clamped to it (contract §1.3). Default 60 000 ms.
    pub max_wait_ms: u64,
    /// Long-poll length when `wait=true` comes without `timeout`. Default 30 000 ms.
    pub default_wait_ms: u64,
    /// Longest duration option (`ttl`, retention, delays), in seconds. Default 10 years.
    pub max_duration_seconds: u64,
    /// Largest dead-letter or message page (`limit`). Default 10 000.
    pub max_page: usize,
    /// Most arrays and objects a pushed payload may nest. Default 512, within what every Queen
    /// client's JSON reader takes (Python's stops near 1 000 levels): a payload its consumers cannot
    /// read would come back at every pop and hold its partition.
    pub max_payload_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 16 * 1024 * 1024,
            max_payload_bytes: 4 * 1024 * 1024,
            max_items_per_push: 10_000,
            max_ack_items: 10_000,
            max_transaction_operations: 1_000,
            max_pop_batch: 10_000,
            max_name_bytes: 256,
            max_id_bytes: 256,
            max_lease_seconds: 7 * 24 * 3600,
            max_wait_ms: 60_000,
            default_wait_ms: 30_000,
            max_duration_seconds: 10 * 365 * 24 * 3600,
            max_page: 10_000,
            max_payload_depth: 512,
        }
    }
}

/// Configuration of the HTTP layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpConfig {
    /// Request limits.
    pub limits: Limits,
    /// Bearer-token authentication; `None` (the default) means off.
    pub auth: Option<AuthConfig>,
    /// JWT authentication (beside the static tokens); `None` (the default) means off. Requests are then
    /// answered through [`handle_with_jwt`] and [`precheck_with_jwt`] with a verified [`jwt::JwtOutcome`].
    #[cfg(feature = "jwt")]
    pub jwt: Option<jwt::JwtConfig>,
    /// Version reported by `/health`. Default: this crate's version.
    pub version: String,
    /// Server name reported by `/health`. Default `queen-edge`.
    pub server_name: String,
    /// Worker id reported by `/health`. Default `queen-edge-0`.
    pub worker_id: String,
    /// When the broker started (ms since the epoch); uptime is measured from it. 0 = unknown (uptime 0).
    pub started_at_ms: i64,
    /// The key that encrypts the payloads of `encryptionEnabled` queues at rest. `None` (the default):
    /// such queues are refused (configure 400, push 409), never stored in plain text.
    pub encryption: Option<EncryptionKey>,
}

impl HttpConfig {
    /// Whether answering a request can depend on its `Authorization` header: bearer tokens or JWT are on.
    /// When false, [`handle`] and [`precheck`] answer every request as if the header were absent, so a
    /// runtime may skip reading it (the Worker's JS does).
    pub fn reads_authorization(&self) -> bool {
        #[cfg(feature = "jwt")]
        if self.jwt.is_some() {
            return true;
        }
        self.auth.is_some()
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            limits: Limits::default(),
            auth: None,
            #[cfg(feature = "jwt")]
            jwt: None,
            version: env!("CARGO_PKG_VERSION").to_string(),
            server_name: "queen-edge".to_string(),
            worker_id: "queen-edge-0".to_string(),
            started_at_ms: 0,
            encryption: None,
        }
    }
}

/// Answers one request. Never panics on input; a pop with `wait=true` may park up to its timeout.
pub async fn handle<S: Store, H: Host>(
    engine: &Engine<S, H>,
    config: &HttpConfig,
    request: HttpRequest,
) -> HttpResponse {
    #[cfg(feature = "jwt")]
    let result = handlers::dispatch(engine, config, request, &jwt::JwtOutcome::default()).await;
    #[cfg(not(feature = "jwt"))]
    let result = handlers::dispatch(engine, config, request).await;
    let mut response = match result {
        Ok(response) => response,
        Err(error) => error.into_response(),
    };
    add_cors(&mut response);
    response
}

/// [`handle`] for a request whose JWT (if any) the embedder has checked with [`jwt::authenticate`].
/// Plain [`handle`] refuses (503) a token that would need JWT verification.
#[cfg(feature = "jwt")]
pub async fn handle_with_jwt<S: Store, H: Host>(
    engine: &Engine<S, H>,
    config: &HttpConfig,
    request: HttpRequest,
    jwt: &jwt::JwtOutcome,
) -> HttpResponse {
    let mut response = match handlers::dispatch(engine, config, request, jwt).await {
        Ok(response) => response,
        Err(error) => error.into_response(),
    };
    add_cors(&mut response);
    response
}

/// What can be decided about a request before its body is read and before a broker is woken: the
/// route exists, the caller may use it, and a declared `Content-Length` is within the body limit. The
/// Worker's entry calls this, so a bad token or an oversized body never reaches (or creates) a Durable
/// Object and never buffers; the broker checks the same again. `Err` is the whole answer to send.
pub fn precheck(
    config: &HttpConfig,
    method: &str,
    path: &str,
    authorization: Option<&str>,
    content_length: Option<u64>,
) -> Result<(), HttpResponse> {
    #[cfg(feature = "jwt")]
    return precheck_with_jwt(
        config,
        method,
        path,
        authorization,
        content_length,
        &jwt::JwtOutcome::default(),
    );
    #[cfg(not(feature = "jwt"))]
    precheck_inner(config, method, path, content_length, |access| {
        auth::check(config.auth.as_ref(), access, authorization).map(|_| ())
    })
}

/// [`precheck`] for a request whose JWT (if any) the embedder has checked with [`jwt::authenticate`].
#[cfg(feature = "jwt")]
pub fn precheck_with_jwt(
    config: &HttpConfig,
    method: &str,
    path: &str,
    authorization: Option<&str>,
    content_length: Option<u64>,
    outcome: &jwt::JwtOutcome,
) -> Result<(), HttpResponse> {
    precheck_inner(config, method, path, content_length, |access| {
        jwt::check(config, access, path, authorization, outcome).map(|_| ())
    })
}

/// Checks that the caller may use an admin-only route this layer does not serve itself (the Worker's
/// shard migration, `POST /api/v1/system/reshard`), as it checks its own admin routes: `Err` is the
/// 401 or 403 answer.
#[cfg(feature = "jwt")]
pub fn check_admin(
    config: &HttpConfig,
    path: &str,
    authorization: Option<&str>,
    outcome: &jwt::JwtOutcome,
) -> Result<(), HttpResponse> {
    jwt::check(config, auth::Access::Admin, path, authorization, outcome)
        .map(|_| ())
        .map_err(|e| {
            let mut response = e.into_response();
            add_cors(&mut response);
            response
        })
}

fn precheck_inner(
    config: &HttpConfig,
    method: &str,
    path: &str,
    content_length: Option<u64>,
    check: impl FnOnce(auth::Access) -> Result<(), error::HttpError>,
) -> Result<(), HttpResponse> {
    let decide = || -> Result<(), error::HttpError> {
        let route = router::route(method, path)?;
        if route == router::Route::Preflight {
            return Ok(());
        }
        check(route.access())?;
        if let Some(length) = content_length.filter(|l| *l > config.limits.max_body_bytes as u64) {
            return Err(error::HttpError::too_large(format!(
                "Request body too large: {length} bytes (the limit is {})",
                config.limits.max_body_bytes
            )));
        }
        Ok(())
    };
    decide().map_err(|e| {
        let mut response = e.into_response();
        add_cors(&mut response);
        response
    })
}

/// The answer to a body longer than `limit` bytes whose length was not declared (the reader stopped at
/// the limit): 413 with the CORS headers.
pub fn body_too_large(limit: usize) -> HttpResponse {
    let mut response = error::HttpError::too_large(format!(
        "Request body too large: more than {limit} bytes (the limit is {limit})"
    ))
    .into_response();
    add_cors(&mut response);
    response
}

/// The CORS headers of contract §0.1, on every answer. `X-Queen-Broker` (the Worker's broker selection,
/// an addition of ours) is allowed too, so a page on another origin can pick a broker by header.
pub const CORS_HEADERS: [(&str, &str); 4] = [
    ("Access-Control-Allow-Origin", "*"),
    (
        "Access-Control-Allow-Methods",
        "GET, POST, PUT, DELETE, OPTIONS",
    ),
    (
        "Access-Control-Allow-Headers",
        "Content-Type, Authorization, X-Queen-Broker",
    ),
    ("Access-Control-Max-Age", "86400"),
];

fn add_cors(response: &mut HttpResponse) {
    for (name, value) in CORS_HEADERS {
        if response.header(name).is_none() {
            response.headers.push((name.to_string(), value.to_string()));
        }
    }
}

/// Checks the body of a push, ack, batch ack or transaction as the broker would, without applying it:
/// `Err` is the whole 4xx answer. The Worker's entry calls this before it splits a request over several
/// shards, so a malformed item refuses the whole request instead of being refused by one shard after
/// another shard applied its part. Other routes are not checked here (`Ok`).
pub fn validate_body(
    config: &HttpConfig,
    method: &str,
    path: &str,
    body: &[u8],
) -> Result<(), HttpResponse> {
    let limits = &config.limits;
    let checked = match router::route(method, path) {
        Ok(router::Route::Push) => wire::push_items(body, limits, None).map(|_| ()),
        Ok(router::Route::Ack) => wire::single_ack(body, limits).map(|_| ()),
        Ok(router::Route::AckBatch) => wire::batch_ack(body, limits).map(|_| ()),
        Ok(router::Route::Transaction) => wire::transaction(body, limits, None).map(|_| ()),
        _ => Ok(()),
    };
    checked.map_err(|e| {
        let mut response = e.into_response();
        add_cors(&mut response);
        response
    })
}

#[cfg(test)]
mod reads_authorization_tests {
    use super::*;

    const ROUTES: [(&str, &str); 4] = [
        ("POST", "/api/v1/push"),
        ("GET", "/api/v1/pop/queue/q"),
        ("POST", "/api/v1/ack/batch"),
        ("DELETE", "/api/v1/resources/queues/q"),
    ];

    #[test]
    fn without_tokens_or_jwt_the_header_changes_no_answer() {
        let config = HttpConfig::default();
        assert!(!config.reads_authorization());
        for (method, path) in ROUTES {
            let without = precheck(&config, method, path, None, None);
            for header in ["Bearer nope", "Basic x", ""] {
                assert_eq!(precheck(&config, method, path, Some(header), None), without);
            }
        }
    }

    #[test]
    fn with_tokens_the_header_is_read() {
        let config = HttpConfig {
            auth: Some(AuthConfig {
                tokens: vec![AuthToken::new("secret", Role::Admin)],
            }),
            ..HttpConfig::default()
        };
        assert!(config.reads_authorization());
        for (method, path) in ROUTES {
            assert_eq!(
                precheck(&config, method, path, None, None)
                    .unwrap_err()
                    .status,
                401
            );
            assert!(precheck(&config, method, path, Some("Bearer secret"), None).is_ok());
        }
    }
}

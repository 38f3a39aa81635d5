//! The queen-edge Cloudflare Worker: a thin entry Worker in front of one `Broker` Durable Object per broker.
//!
//! Routing (see `wrangler.toml` at the repository root):
//! - `/api/v1/*`, `/health`, `/metrics`, `/metrics/*`: checked first (route, bearer token or JWT (its
//!   signature through Web Crypto, [`jwt`]), declared `Content-Length` against `MAX_BODY_BYTES`:
//!   `queen_edge::http::precheck_with_jwt`), then forwarded unchanged to the
//!   Durable Object named by [`entry::broker_name`] (the object's response goes back as it is), which
//!   checks again and answers through `src/http`. [`entry::decide`] takes that decision for both fetch
//!   handlers: the JS one (`worker/entry.js`), which asks it synchronously ([`entry::entry_precheck`])
//!   and forwards the request itself, and the wasm one below ([`forward_to_object`]), which serves what
//!   the JS handler hands over: JWTs to verify through Web Crypto, `SHARDS` > 1, the shard migration,
//!   test routes and assets.
//!   With `SHARDS` > 1 ([`shards`]) the broker is spread over several objects: [`sharded`] decides which
//!   ([`routing`]) and merges fan-out answers ([`fanout`]).
//! - `/api/v1/system/reshard`: the shard migration, answered here ([`reshard`]).
//! - `/__test/*`: only when the variable `QUEEN_TEST_ROUTES` is `true` (tests), else 404; sent to the object
//!   `object=NAME` (default `selftest`), or with `shard=K` to shard K's object of broker `NAME`.
//! - everything else: the static page in `www/` through the `ASSETS` binding (most asset requests never reach
//!   this code: Workers serves matching files first).

#![warn(missing_docs)]

pub mod auto_sharing;
pub mod broker;
pub mod catalog;
pub mod config;
pub mod do_store;
pub mod entry;
pub mod fanout;
pub mod host;
pub mod jwt;
pub mod reshard;
pub mod reshard_object;
pub mod respond;
pub mod routing;
pub mod run_now;
pub mod selftest;
pub mod selftest_commit;
pub mod selftest_full;
pub mod shape;
pub mod shard_guard;
pub mod sharded;
pub mod shards;
pub mod sql_exec;
pub mod txn_coordinator;
pub mod txn_participant;
pub mod txn_plan;

use std::rc::Rc;

use wasm_bindgen::JsCast;
use worker::worker_sys::web_sys;
use worker::{event, Context, Env, Result};

use crate::broker::path_and_query;
use crate::config::{flag, var, WorkerConfig};
use crate::entry::Decision;

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

/// What the entry Worker reads from its environment. Read on the first request and kept for the
/// isolate's life: an isolate runs one version of the Worker, whose vars and secrets do not change.
pub struct EntrySettings {
    /// The HTTP settings the precheck uses (tokens, JWT, body limit).
    pub config: WorkerConfig,
    /// `BROKER_NAME` (default `default`).
    pub broker_name: String,
    /// `broker_name` as a JS string, handed to the JS fetch handler without converting it again
    /// ([`entry::entry_precheck`]).
    pub broker_name_js: wasm_bindgen::JsValue,
    /// `BROKER_SELECTABLE`.
    pub selectable: bool,
    /// `QUEEN_TEST_ROUTES`.
    pub test_routes: bool,
    /// `SHARDS` ([`shards::shard_count`]): `Err` is why the value is refused.
    pub shards: std::result::Result<u16, String>,
}

impl EntrySettings {
    fn read(env: &Env) -> Self {
        let broker_name = var(env, "BROKER_NAME").unwrap_or_else(|| "default".to_string());
        EntrySettings {
            config: WorkerConfig::from_env(env, String::new(), 0),
            broker_name_js: wasm_bindgen::JsValue::from_str(&broker_name),
            broker_name,
            selectable: flag(env, "BROKER_SELECTABLE"),
            test_routes: flag(env, "QUEEN_TEST_ROUTES"),
            shards: shards::shard_count(env),
        }
    }

    /// The settings of this isolate.
    pub fn get(env: &Env) -> Rc<Self> {
        thread_local! {
            static SETTINGS: std::cell::OnceCell<Rc<EntrySettings>> = const { std::cell::OnceCell::new() };
        }
        SETTINGS.with(|cell| cell.get_or_init(|| Rc::new(Self::read(env))).clone())
    }
}

/// The value of query parameter `name`, percent-decoded.
fn query_param(query: &str, name: &str) -> Option<String> {
    worker::url::form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// Sends `req` to the Durable Object named `name` and answers with the object's `Response` as it is (its
/// body streams through; nothing is copied or wrapped again).
pub async fn forward_to_object(
    req: &web_sys::Request,
    env: &Env,
    name: &str,
) -> Result<web_sys::Response> {
    let namespace = env.durable_object(BROKER_BINDING)?;
    let stub: worker::worker_sys::DurableObject =
        namespace.id_from_name(name)?.get_stub()?.into_rpc();
    let response =
        worker::wasm_bindgen_futures::JsFuture::from(stub.fetch_with_request(req)?).await?;
    Ok(response.dyn_into::<web_sys::Response>()?)
}

#[event(fetch)]
async fn fetch(req: web_sys::Request, env: Env, _ctx: Context) -> Result<web_sys::Response> {
    let url = req.url();
    let (path, query) = path_and_query(&url);
    let settings = EntrySettings::get(&env);

    if path.starts_with("/__test/") {
        if !settings.test_routes {
            return respond::error(404, "Not Found");
        }
        let object = query_param(query, "object").unwrap_or_else(|| "selftest".to_string());
        if !valid_broker_name(&object) {
            return respond::error(400, "invalid object name");
        }
        // `shard=K`: shard K's object of the broker named `object` (its name holds a `#`).
        let object = match query_param(query, "shard").map(|k| k.parse::<u16>()) {
            None => object,
            Some(Ok(index)) => shards::ShardMap {
                broker: object,
                count: index.saturating_add(1),
            }
            .object_name(index),
            Some(Err(_)) => return respond::error(400, "shard must be a shard index"),
        };
        return forward_to_object(&req, &env, &object).await;
    }

    if !is_broker_path(path) {
        let asset = env
            .assets(ASSETS_BINDING)?
            .fetch_request(worker::Request::from(req))
            .await?;
        return Ok(asset.into());
    }

    let method = req.method().to_ascii_uppercase();
    let headers = req.headers();
    let authorization = headers.get("authorization").ok().flatten();
    let content_length = headers.get("content-length").ok().flatten();
    let outcome = if method == "OPTIONS" {
        queen_edge::http::jwt::JwtOutcome::default()
    } else {
        queen_edge::http::jwt::authenticate(
            &settings.config.http,
            &jwt::WebCryptoVerifier,
            &method,
            path,
            authorization.as_deref(),
            js_sys::Date::now() as i64,
        )
        .await
    };
    let target = entry::Target {
        method: &method,
        path,
        query,
        authorization: authorization.as_deref(),
        content_length: content_length.as_deref(),
        broker_header: headers.get(BROKER_HEADER).ok().flatten(),
    };
    match entry::decide(&settings, target, &outcome) {
        Decision::Answer(answer) => answer,
        Decision::Forward(name) => forward_to_object(&req, &env, &name).await,
        Decision::Sharded(map) => sharded::handle(req, &env, map, &settings.config).await,
        Decision::Reshard(name) => reshard::handle(req, &env, &settings, name).await,
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
    fn request_targets() {
        assert_eq!(
            path_and_query("http://localhost:6632/api/v1/pop/queue/q?batch=10&wait=false"),
            ("/api/v1/pop/queue/q", "batch=10&wait=false")
        );
        assert_eq!(path_and_query("https://h.example/health"), ("/health", ""));
        assert_eq!(path_and_query("https://h.example"), ("/", ""));
        assert_eq!(path_and_query("http://h/a%3Fb?c=d#frag"), ("/a%3Fb", "c=d"));
        assert_eq!(path_and_query("/metrics?x"), ("/metrics", "x"));
        assert_eq!(
            query_param("a=1&broker=t%2D1&b", BROKER_QUERY).as_deref(),
            Some("t-1")
        );
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

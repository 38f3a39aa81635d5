//! The queen-edge Cloudflare Worker: a thin entry Worker in front of one `Broker` Durable Object per broker.
//!
//! Routing (see `wrangler.toml` at the repository root):
//! - `/api/v1/*`, `/health`, `/metrics`, `/metrics/*`: checked first (route, bearer token or JWT (its
//!   signature through Web Crypto, [`jwt`]), declared `Content-Length` against `MAX_BODY_BYTES`:
//!   `queen_edge::http::precheck_with_jwt`), then forwarded unchanged to the
//!   Durable Object named by [`entry::broker_name`] (the object's response goes back as it is), which
//!   checks again and answers through `src/http`. [`entry::decide`] takes that decision for both fetch
//!   handlers: the JS one (`worker/entry.js`), which asks it synchronously ([`entry::entry_precheck`])
//!   and forwards the request itself, and the wasm one ([`fetch`]), which serves what
//!   the JS handler hands over: JWTs to verify through Web Crypto, `SHARDS` > 1, the shard migration,
//!   test routes and assets.
//!   With `SHARDS` > 1 ([`shards`]) the broker is spread over several objects: [`sharded`] decides which
//!   ([`routing`]) and merges fan-out answers ([`fanout`]).
//! - `/api/v1/system/reshard`: the shard migration, answered here ([`reshard`]).
//! - `/__test/*`: only when the variable `QUEEN_TEST_ROUTES` is `true` (tests), else 404; sent to the object
//!   `object=NAME` (default `selftest`), or with `shard=K` to shard K's object of broker `NAME`.
//! - everything else: the static page in `www/` through the `ASSETS` binding (most asset requests never reach
//!   this code: Workers serves matching files first).
//!
//! # What is compiled where
//!
//! The modules that talk to workerd (through workers-rs, `web-sys` and `js-sys`) are compiled for wasm32
//! only, and so is the `worker` dependency (worker/Cargo.toml). The rest is logic without I/O, compiled on
//! every target: natively it is built only for its unit tests (`cargo test --workspace`), which then need
//! neither workers-rs nor what it pulls in. A module that needs workerd goes in the second list; a module in
//! the first must not use one of the second.

#![warn(missing_docs)]

// Logic without I/O: every target.
pub mod auto_sharing;
pub mod catalog;
pub mod config;
pub mod do_layout;
pub mod fanout;
pub mod frame;
pub mod routing;
pub mod shape;
pub mod shard_guard;
pub mod shards;
pub mod sharing_memory;
pub mod split_text;
pub mod sync_auth;
pub mod txn_plan;

// workerd's side: wasm32 only.
#[cfg(target_arch = "wasm32")]
pub mod broker;
#[cfg(target_arch = "wasm32")]
pub mod catalog_object;
#[cfg(target_arch = "wasm32")]
pub mod do_store;
#[cfg(target_arch = "wasm32")]
pub mod entry;
#[cfg(target_arch = "wasm32")]
pub mod fetch;
#[cfg(target_arch = "wasm32")]
pub mod host;
#[cfg(target_arch = "wasm32")]
pub mod jwt;
#[cfg(target_arch = "wasm32")]
pub mod reshard;
#[cfg(target_arch = "wasm32")]
pub mod reshard_object;
#[cfg(target_arch = "wasm32")]
pub mod respond;
#[cfg(target_arch = "wasm32")]
pub mod run_now;
#[cfg(target_arch = "wasm32")]
pub mod selftest;
#[cfg(target_arch = "wasm32")]
pub mod selftest_commit;
#[cfg(target_arch = "wasm32")]
pub mod selftest_full;
#[cfg(target_arch = "wasm32")]
pub mod sharded;
#[cfg(target_arch = "wasm32")]
pub mod sql_exec;
#[cfg(target_arch = "wasm32")]
pub mod sql_rows;
#[cfg(target_arch = "wasm32")]
pub mod txn_coordinator;
#[cfg(target_arch = "wasm32")]
pub mod txn_participant;
#[cfg(target_arch = "wasm32")]
pub mod vars;

/// Name of the Durable Object namespace binding.
pub const BROKER_BINDING: &str = "BROKER";
/// Name of the static assets binding.
pub const ASSETS_BINDING: &str = "ASSETS";
/// Header that picks the broker when `BROKER_SELECTABLE` is on.
pub const BROKER_HEADER: &str = "x-queen-broker";
/// Query parameter that picks the broker when `BROKER_SELECTABLE` is on (the header wins when both are sent).
pub const BROKER_QUERY: &str = "broker";

/// True for the paths the broker answers (the rest are static assets). Every path under `/api` is the
/// broker's, so that one it does not serve (`/api/v2/...`) is its JSON 404 `no_such_route` (wire contract
/// D18), not the page's.
pub fn is_broker_path(path: &str) -> bool {
    path == "/api"
        || path.starts_with("/api/")
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

/// The path and the query (without `?`) of a request URL as workerd serialises it
/// (`http://host/path?query`); a bare `/path?query` works too.
pub fn path_and_query(url: &str) -> (&str, &str) {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let target = url[after_scheme..]
        .find('/')
        .map_or("/", |i| &url[after_scheme + i..]);
    let target = target.split_once('#').map_or(target, |(t, _)| t);
    target.split_once('?').unwrap_or((target, ""))
}

/// The value of query parameter `name` (`application/x-www-form-urlencoded`: `+` is a space, `%XX` is
/// decoded), empty when it is given empty. The entry Worker's own parameters (`broker`, and `object` and
/// `shard` on test routes) are read with it; [`routing::query_param`] reads the broker's.
pub fn query_param(query: &str, name: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
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
        assert!(is_broker_path("/api/v10"));
        assert!(is_broker_path("/api"));
        assert!(!is_broker_path("/apis"));
        assert!(!is_broker_path("/api.html"));
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

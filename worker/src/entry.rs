//! What the entry Worker does with a request to a broker path, decided without I/O ([`decide`]), and the
//! synchronous export the JS fetch handler calls for it ([`entry_precheck`]).
//!
//! Two handlers share [`decide`]:
//! - the JS fetch handler (`worker/entry.js`, installed by `worker/shim.js`) calls [`entry_precheck`] once per
//!   request. When the decision needs no await (no JWT signature to verify) it comes back as a ready
//!   answer (a preflight, a refusal) or as the name of the object to forward to, and the JS handler forwards
//!   the request itself (`env.BROKER.get(env.BROKER.idFromName(name)).fetch(request)`): no Rust future,
//!   no promise glue, no copy of the request. Anything else comes back `undefined`;
//! - the wasm fetch handler (`crate::fetch`) serves the rest: assets, test routes, requests whose JWT must be
//!   verified through Web Crypto, `SHARDS` > 1 and the shard migration.
//!
//! Either way the route, the caller's access and the declared body size are checked before any Durable
//! Object is woken (docs/decisions.md, "Abuse: objects are not woken for nothing").

use std::borrow::Cow;

use queen_edge::http::jwt::JwtOutcome;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::JsValue;
use worker::worker_sys::web_sys;
use worker::Env;

use crate::fetch::EntrySettings;
use crate::shards::ShardMap;
use crate::sync_auth::outcome_without_crypto;
use crate::{
    is_broker_path, path_and_query, query_param, reshard, respond, valid_broker_name, BROKER_QUERY,
};

/// What the entry Worker does with a request to a broker path.
pub enum Decision<'a> {
    /// Answer with this, without waking any object (a preflight, a refusal). `Err`: the answer could not
    /// be built.
    Answer(worker::Result<web_sys::Response>),
    /// Forward the request unchanged to the object of this name (one shard). Borrowed: the settings'
    /// `BROKER_NAME`.
    Forward(Cow<'a, str>),
    /// Route it over the shards of this broker (`SHARDS` > 1).
    Sharded(ShardMap),
    /// The shard migration (`reshard::ROUTE`) of this broker; the caller is an admin.
    Reshard(String),
}

/// The parts of a request [`decide`] reads.
pub struct Target<'r> {
    /// The method, upper case.
    pub method: &'r str,
    /// The path (still percent-encoded).
    pub path: &'r str,
    /// The raw query string, without `?`.
    pub query: &'r str,
    /// The `Authorization` header.
    pub authorization: Option<&'r str>,
    /// The `Content-Length` header.
    pub content_length: Option<&'r str>,
    /// The `X-Queen-Broker` header.
    pub broker_header: Option<String>,
}

/// Decides what to do with a request to a broker path ([`is_broker_path`]) whose JWT, if any, gave
/// `outcome` (`queen_edge::http::jwt::authenticate`); a preflight needs none. In order: a preflight is
/// answered here (204 with the CORS headers: it carries neither a token nor the broker's name, so
/// forwarding it would only wake an object, perhaps the wrong one); the shard migration is admin only;
/// the precheck (`queen_edge::http::precheck_with_jwt`: route, access, declared `Content-Length`) refuses
/// before any object is woken; then the broker is chosen ([`broker_name`], 400 for a bad name) and
/// `SHARDS` says whether one object serves it.
pub fn decide<'a>(
    settings: &'a EntrySettings,
    target: Target<'_>,
    outcome: &JwtOutcome,
) -> Decision<'a> {
    if target.method == "OPTIONS" {
        return Decision::Answer(respond::respond(204, &[], &[]));
    }
    let http = &settings.config.http;
    if target.path == reshard::ROUTE {
        if let Err(refusal) =
            queen_edge::http::check_admin(http, target.path, target.authorization, outcome)
        {
            return Decision::Answer(respond::answer(&refusal));
        }
        return match broker_name(settings, target.broker_header, target.query) {
            Ok(name) => Decision::Reshard(name.into_owned()),
            Err(message) => Decision::Answer(respond::error(400, &message)),
        };
    }
    let content_length = target
        .content_length
        .and_then(|v| v.trim().parse::<u64>().ok());
    if let Err(refusal) = queen_edge::http::precheck_with_jwt(
        http,
        target.method,
        target.path,
        target.authorization,
        content_length,
        outcome,
    ) {
        return Decision::Answer(respond::answer(&refusal));
    }
    let name = match broker_name(settings, target.broker_header, target.query) {
        Ok(name) => name,
        Err(message) => return Decision::Answer(respond::error(400, &message)),
    };
    match &settings.shards {
        // One shard: the broker's own object, as before shards existed.
        Ok(1) => Decision::Forward(name),
        Ok(count) => Decision::Sharded(ShardMap {
            broker: name.into_owned(),
            count: *count,
        }),
        Err(message) => Decision::Answer(respond::error(
            503,
            &format!("broker unavailable: {message}"),
        )),
    }
}

/// The name of the Durable Object that serves a request with the `X-Queen-Broker` header `header` and
/// `query`: `BROKER_NAME` (default `default`), or, when `BROKER_SELECTABLE` is `true`, the header or
/// the `broker` query parameter if present. `Err` carries the 400 message for an invalid name.
pub fn broker_name<'a>(
    settings: &'a EntrySettings,
    header: Option<String>,
    query: &str,
) -> Result<Cow<'a, str>, String> {
    if !settings.selectable {
        return Ok(Cow::Borrowed(&settings.broker_name));
    }
    match header.or_else(|| query_param(query, BROKER_QUERY)) {
        None => Ok(Cow::Borrowed(&settings.broker_name)),
        Some(name) if valid_broker_name(&name) => Ok(Cow::Owned(name)),
        Some(_) => Err("broker name must be 1-64 characters of A-Z a-z 0-9 _ . -".to_string()),
    }
}

/// The entry Worker's synchronous decision for the JS fetch handler (`worker/entry.js`), from the request's
/// method, URL and three headers: a `Response` to answer with (a preflight, a refusal: no object is
/// woken), a string (forward the request unchanged to the `BROKER` object of that name), or `undefined`
/// (not decided here: hand the request to the wasm fetch handler). Never awaits; the same [`decide`] as
/// the wasm handler.
#[wasm_bindgen(js_name = entryPrecheck)]
pub fn entry_precheck(
    env: &Env,
    method: &str,
    url: &str,
    content_length: Option<String>,
    authorization: Option<String>,
    broker_header: Option<String>,
) -> JsValue {
    let (path, query) = path_and_query(url);
    if !is_broker_path(path) {
        return JsValue::UNDEFINED;
    }
    let settings = EntrySettings::get(env);
    let method = method.to_ascii_uppercase();
    let authorization = authorization.as_deref();
    let outcome = if method == "OPTIONS" {
        JwtOutcome::default()
    } else {
        match outcome_without_crypto(&settings.config.http, &method, path, authorization) {
            Some(outcome) => outcome,
            None => return JsValue::UNDEFINED,
        }
    };
    let target = Target {
        method: &method,
        path,
        query,
        authorization,
        content_length: content_length.as_deref(),
        broker_header,
    };
    match decide(&settings, target, &outcome) {
        Decision::Answer(Ok(response)) => response.into(),
        Decision::Forward(Cow::Borrowed(_)) => settings.broker_name_js.clone(),
        Decision::Forward(Cow::Owned(name)) => JsValue::from_str(&name),
        Decision::Answer(Err(_)) | Decision::Sharded(_) | Decision::Reshard(_) => {
            JsValue::UNDEFINED
        }
    }
}

/// [`entry_headers`]: the request's `Authorization` header can change the decision.
pub const READS_AUTHORIZATION: u32 = 1;
/// [`entry_headers`]: the request's `X-Queen-Broker` header can change the decision.
pub const READS_BROKER_HEADER: u32 = 2;

/// Which optional headers [`entry_precheck`] reads in this isolate ([`READS_AUTHORIZATION`],
/// [`READS_BROKER_HEADER`]), from settings kept for the isolate's life ([`EntrySettings`]): the JS fetch
/// handler asks once and passes `null` for a header the decision never reads, instead of fetching it
/// from workerd on every request. `Content-Length` is always read.
#[wasm_bindgen(js_name = entryHeaders)]
pub fn entry_headers(env: &Env) -> u32 {
    let settings = EntrySettings::get(env);
    let mut reads = 0;
    if settings.config.http.reads_authorization() {
        reads |= READS_AUTHORIZATION;
    }
    if settings.selectable {
        reads |= READS_BROKER_HEADER;
    }
    reads
}

//! The entry Worker's wasm fetch handler ([`fetch`]) and the settings it reads once per isolate
//! ([`EntrySettings`]).
//!
//! The JS fetch handler (`worker/entry.js`) forwards what [`crate::entry::entry_precheck`] decides without
//! awaiting and hands the rest over to this one: test routes, static assets, JWTs whose signature Web Crypto
//! must verify, `SHARDS` > 1 and the shard migration. Requests go to a Durable Object through
//! [`forward_to_object`].

use std::rc::Rc;

use wasm_bindgen::JsCast;
use worker::worker_sys::web_sys;
use worker::{event, Context, Env, Result};

use crate::config::WorkerConfig;
use crate::entry::Decision;
use crate::vars::{flag, shard_count, var};
use crate::{
    entry, is_broker_path, jwt, path_and_query, query_param, reshard, respond, sharded, shards,
    valid_broker_name, ASSETS_BINDING, BROKER_BINDING, BROKER_HEADER,
};

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
    /// `SHARDS` ([`shard_count`]): `Err` is why the value is refused.
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
            shards: shard_count(env),
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

/// `/__test/abandon?target=PATH&after=MS` (test routes only): a client that goes. Sends `GET PATH` (with its
/// query) to the object with an `AbortSignal` aborted after `MS` milliseconds, as workerd aborts a forwarded
/// request whose client disconnected (`enable_request_signal`; workerd on one machine does not notice a
/// client's disconnect itself). Answers the object's `Response` when it came first, else
/// `{"abandoned":true}`.
async fn abandon(url: &str, query: &str, env: &Env, object: &str) -> Result<web_sys::Response> {
    let Some(target) = query_param(query, "target").filter(|t| t.starts_with('/')) else {
        return respond::error(400, "target must be a path");
    };
    let Some(after) = query_param(query, "after").and_then(|ms| ms.parse::<u64>().ok()) else {
        return respond::error(400, "after must be milliseconds");
    };
    let origin_end = url.find("://").map_or(0, |at| at + 3);
    let origin = &url[..url[origin_end..]
        .find('/')
        .map_or(url.len(), |at| origin_end + at)];
    let controller = web_sys::AbortController::new()?;
    let init = web_sys::RequestInit::new();
    init.set_signal(Some(&controller.signal()));
    let request = web_sys::Request::new_with_str_and_init(&format!("{origin}{target}"), &init)?;
    let answer = forward_to_object(&request, env, object);
    let timer = worker::Delay::from(std::time::Duration::from_millis(after));
    futures::pin_mut!(answer);
    match futures::future::select(answer, timer).await {
        futures::future::Either::Left((answer, _)) => answer,
        futures::future::Either::Right(((), pending)) => {
            controller.abort();
            // The object's side ends now, or at its own pace; its answer, if any, is nobody's.
            let _ = pending.await;
            respond::json(200, &serde_json::json!({ "abandoned": true }))
        }
    }
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
        if path == "/__test/abandon" {
            return abandon(&url, query, &env, &object).await;
        }
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

//! The `Broker` Durable Object: one broker (every queue of it) per object, on SQLite-backed storage.
//!
//! The entry Worker (`worker/entry.js`, `crate::fetch`) forwards `/api/v1/*`, `/health`, `/metrics*` (and,
//! in tests only, `/__test/*`) here unchanged. The object opens one [`Engine`] over a [`DoStore`] on its first
//! request and keeps it while the object lives; every request is read into an [`HttpRequest`] and answered by
//! `queen_edge::http::handle`. Requests interleave at their awaits (a long-poll parks without blocking
//! pushes); the engine serialises commands itself.
//!
//! If the store cannot be opened (or the engine cannot load), `/health` answers 503 `unhealthy` and every
//! other route 503 `{"error": ...}`; the next request tries again. A malformed `QUEEN_ENCRYPTION_KEY` does
//! the same until the secret is fixed (the object never opens the store with it).

use std::rc::Rc;

use futures::lock::Mutex;
use futures::StreamExt;
use js_sys::Uint8Array;
use queen_edge::engine::Engine;
use queen_edge::http::{handle_with_jwt, ClientGone, HttpRequest, HttpResponse};
use serde_json::json;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::JsValue;
use worker::worker_sys::{web_sys, DurableObjectState};
use worker::{console_error, console_log, ByteStream, Env, Headers, Method, Result, State};

use crate::config::{CommitSharing, WorkerConfig};
use crate::do_store::DoStore;
use crate::frame;
use crate::host::{Sharing, WorkerHost};
use crate::path_and_query;
use crate::respond;
use crate::run_now::run_now;
use crate::shard_guard::{self, Decision, Placement, PLACEMENT_KEY};
use crate::shards::SHARD_HEADER;
use crate::vars::flag;

/// The engine a `Broker` object runs.
pub type BrokerEngine = Engine<DoStore, WorkerHost>;

/// Reads `req` (the body is consumed) into the HTTP layer's request type, reading at most
/// `max_body_bytes` of body: a longer body (declared or not) is answered 413 (`Err`). A body with a
/// declared length within the limit is read in one piece; one without is streamed and the read stops at
/// the limit.
pub async fn read_request(
    req: &web_sys::Request,
    max_body_bytes: usize,
) -> Result<std::result::Result<HttpRequest, HttpResponse>> {
    let url = req.url();
    let (path, query) = path_and_query(&url);
    let method = req.method().to_ascii_uppercase();
    let headers: Vec<(String, String)> = worker::Headers(req.headers()).entries().collect();
    let mut body = Vec::new();
    // A request without a body (a DELETE, say) has no stream: its body is empty.
    if !matches!(method.as_str(), "GET" | "HEAD") {
        if let Some(stream) = req.body() {
            let declared = headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                .and_then(|(_, v)| v.trim().parse::<usize>().ok());
            match declared {
                Some(length) if length > max_body_bytes => {
                    return Ok(Err(queen_edge::http::body_too_large(max_body_bytes)))
                }
                Some(_) => {
                    let buffer =
                        worker::wasm_bindgen_futures::JsFuture::from(req.array_buffer()?).await?;
                    body = Uint8Array::new(&buffer).to_vec();
                }
                None => {
                    let mut chunks = ByteStream::from(stream);
                    while let Some(chunk) = chunks.next().await {
                        let chunk = chunk?;
                        if body.len() + chunk.len() > max_body_bytes {
                            return Ok(Err(queen_edge::http::body_too_large(max_body_bytes)));
                        }
                        body.extend_from_slice(&chunk);
                    }
                }
            }
            if body.len() > max_body_bytes {
                return Ok(Err(queen_edge::http::body_too_large(max_body_bytes)));
            }
        }
    }
    Ok(Ok(HttpRequest {
        method,
        path: path.to_string(),
        query: query.to_string(),
        headers,
        body,
        client: client_gone(req.signal()),
    }))
}

/// A request's `AbortSignal` as the HTTP layer's [`ClientGone`]: workerd aborts it when the caller of the
/// object goes (the entry Worker's forwarded request, itself aborted when its client disconnects, with the
/// compatibility flag `enable_request_signal` that wrangler.toml sets), so that a parked long-poll stops
/// without claiming anything.
pub fn client_gone(signal: web_sys::AbortSignal) -> ClientGone {
    ClientGone::when(move || signal.aborted())
}

/// `k@broker` (the `x-queen-shard` header) -> (k, broker).
pub fn parse_shard_hint(value: &str) -> Option<(u16, String)> {
    let (index, broker) = value.split_once('@')?;
    Some((index.parse().ok()?, broker.to_string()))
}

/// How often the alarm runs retention and eviction (`Engine::maintain`) unless the var
/// `MAINTENANCE_INTERVAL_MS` says otherwise.
pub const MAINTENANCE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);

/// One `Broker` Durable Object: its state, settings and engine. JS sees it through [`BrokerObject`].
pub struct Broker {
    state: State,
    env: Env,
    config: WorkerConfig,
    engine: Mutex<Option<Rc<BrokerEngine>>>,
    /// True while a maintenance alarm is scheduled (an idle, empty broker lets it lapse).
    alarm_armed: std::cell::Cell<bool>,
    /// The shard index and broker name from the entry Worker's `x-queen-shard` header (`k@broker`), when
    /// `SHARDS` > 1.
    shard_hint: std::cell::RefCell<Option<(u16, String)>>,
    /// Why this object refuses to open (a changed `SHARDS`, see [`crate::shard_guard`]), once decided.
    refusal: std::cell::RefCell<Option<String>>,
    /// Whether commits are shared (`COMMIT_SHARING`); with `auto`, every answer of [`Broker::answer`] is
    /// fed to the policy the engine's host asks.
    sharing: Sharing,
    /// This object's shard and the broker's shard count, `(index, count)`, once its engine is open.
    placement: std::cell::Cell<Option<(u16, u16)>>,
}

impl Broker {
    /// The object's engine, opened on first use (over a fresh [`DoStore`]) and kept for the object's life.
    pub async fn engine(&self) -> std::result::Result<Rc<BrokerEngine>, String> {
        if let Some(error) = &self.config.startup_error {
            return Err(error.clone());
        }
        if let Some(refusal) = self.refusal.borrow().as_ref() {
            return Err(refusal.clone());
        }
        let mut slot = self.engine.lock().await;
        if let Some(engine) = slot.as_ref() {
            return Ok(engine.clone());
        }
        let count = crate::vars::shard_count(&self.env)?;
        let storage = self.state.storage();
        let stored: Option<Placement> = storage
            .get(PLACEMENT_KEY)
            .await
            .map_err(|e| format!("reading the shard placement: {e}"))?;
        // An unfinished shard migration (its plan is on shard 0) keeps the broker closed, whatever SHARDS
        // says now: some queues have moved and others not.
        let plan: Option<crate::reshard::Plan> = storage
            .get(crate::reshard::PLAN_KEY)
            .await
            .map_err(|e| format!("reading the shard migration plan: {e}"))?;
        if let Some(reason) = plan.and_then(|p| p.refusal()) {
            *self.refusal.borrow_mut() = Some(reason.clone());
            return Err(reason);
        }
        let hint = self.shard_hint.borrow().clone();
        let index = match (&hint, stored) {
            _ if count == 1 => 0,
            (Some((index, _)), _) => *index,
            (None, Some(p)) => p.index,
            (None, None) => 0,
        };
        let mut broker_config = self.config.broker.clone();
        broker_config.shard = queen_edge::core::ids::ShardTag { index, count };
        self.placement.set(Some((index, count)));
        let store = DoStore::open(&storage).map_err(|e| e.message)?;
        let host = WorkerHost {
            sharing: self.sharing.clone(),
        };
        let engine = Engine::open(store, host, broker_config)
            .await
            .map_err(|e| e.to_string())?;
        let has_data = engine.read(|b, now| b.stats(now).queues) > 0;
        match shard_guard::decide(stored, index, count, has_data) {
            Decision::Refuse(reason) => {
                console_error!("broker refuses to open: {reason}");
                *self.refusal.borrow_mut() = Some(reason.clone());
                return Err(reason);
            }
            Decision::Open { record: true } => {
                if index > 0 {
                    let broker = hint.map(|(_, b)| b).unwrap_or_default();
                    self.check_with_shard_zero(&broker, count).await?;
                }
                storage
                    .put(PLACEMENT_KEY, Placement { index, count })
                    .await
                    .map_err(|e| format!("recording the shard placement: {e}"))?;
            }
            Decision::Open { record: false } => {}
        }
        let engine = Rc::new(engine);
        *slot = Some(engine.clone());
        drop(slot);
        if let Ok(Some(_)) = self.state.storage().get_alarm().await {
            self.alarm_armed.set(true);
        }
        self.arm_alarm_if_needed(&engine).await;
        // Parts of transactions across shards prepared before a restart: the alarm settles them.
        if let Some(first) = engine.read(|b, _| b.prepared_list().first().map(|p| p.prepared_at_ms))
        {
            self.alarm_by(first + crate::txn_coordinator::timeout(&self.env))
                .await;
        }
        Ok(engine)
    }

    /// The Worker's environment.
    pub fn env(&self) -> &Env {
        &self.env
    }

    /// Schedules the object's alarm no later than `at_ms` (the alarm runs maintenance too).
    pub async fn alarm_by(&self, at_ms: i64) {
        match crate::txn_coordinator::alarm_by(&self.state, at_ms).await {
            Ok(()) => self.alarm_armed.set(true),
            Err(e) => console_error!("scheduling the alarm failed: {e}"),
        }
    }

    /// Retention, eviction and the end of a stopped drain run from the object's alarm: schedules one
    /// when the broker has such work (`has_periodic_work`: queues, or items in the push buffer) and
    /// none is scheduled. An empty broker needs none, so an object that was only probed (or whose
    /// queues were all deleted) goes quiet instead of waking every minute forever.
    async fn arm_alarm_if_needed(&self, engine: &BrokerEngine) {
        if self.alarm_armed.get() || !engine.read(|b, _| b.has_periodic_work()) {
            return;
        }
        if self
            .state
            .storage()
            .set_alarm(self.maintenance_interval())
            .await
            .is_ok()
        {
            self.alarm_armed.set(true);
        }
    }

    /// The maintenance period: the var `MAINTENANCE_INTERVAL_MS` (at least 100 ms), else one minute.
    fn maintenance_interval(&self) -> std::time::Duration {
        self.env
            .var("MAINTENANCE_INTERVAL_MS")
            .ok()
            .and_then(|v| v.to_string().parse::<u64>().ok())
            .map(|ms| std::time::Duration::from_millis(ms.max(100)))
            .unwrap_or(MAINTENANCE_INTERVAL)
    }

    /// Asks shard 0 of `broker` whether it opens with `count` shards (it decides for the whole broker: it
    /// is the object that held every queue before shards). A refusal there is this object's refusal.
    async fn check_with_shard_zero(
        &self,
        broker: &str,
        count: u16,
    ) -> std::result::Result<(), String> {
        let map = crate::shards::ShardMap {
            broker: broker.to_string(),
            count,
        };
        let answer = crate::sharded::send(
            &self.env,
            &map,
            0,
            Method::Get,
            "https://shard/__shard/check",
            &Headers::new(),
            None,
        )
        .await
        .map_err(|e| format!("asking shard 0 about SHARDS: {e}"))?;
        if answer.status() == 200 {
            return Ok(());
        }
        let body: serde_json::Value = match crate::sharded::read_body(&answer).await {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_default(),
            Err(_) => serde_json::Value::Null,
        };
        let reason = body
            .get("error")
            .and_then(|e| e.as_str())
            .unwrap_or("shard 0 refused")
            .trim_start_matches("broker unavailable: ")
            .to_string();
        Err(reason)
    }

    /// The object's storage.
    pub fn storage(&self) -> worker::Storage {
        self.state.storage()
    }

    /// True when the engine is open, or a request is opening it right now (the shard migration then
    /// leaves the object's records alone).
    pub fn engine_open_or_opening(&self) -> bool {
        self.engine.try_lock().is_none_or(|slot| slot.is_some())
    }

    /// Forgets why the object refused to open (the shard migration finished here): the next request
    /// opens the engine and decides again.
    pub fn forget_refusal(&self) {
        *self.refusal.borrow_mut() = None;
    }

    /// `/__test/refuse` (test routes only): `POST` makes this object refuse every request of the API
    /// with a 503 as an object that cannot open does (a shard fault for the fan-out tests), `DELETE`
    /// ends that.
    fn test_refuse(&self, method: &str) -> Result<web_sys::Response> {
        match method.to_ascii_uppercase().as_str() {
            "POST" => {
                *self.refusal.borrow_mut() = Some("refused by /__test/refuse".to_string());
                respond::json(200, &json!({ "refusing": true }))
            }
            "DELETE" => {
                self.forget_refusal();
                respond::json(200, &json!({ "refusing": false }))
            }
            _ => respond::error(405, "POST or DELETE"),
        }
    }

    /// Settings read from the environment when the object started.
    pub fn config(&self) -> &WorkerConfig {
        &self.config
    }

    /// The answer of an object that cannot open its engine: `/health` says `unhealthy`, every other
    /// route 503 `{"error": ...}`.
    fn unavailable(&self, path: &str, message: String) -> HttpResponse {
        let body = if path == "/health" {
            json!({
                "status": "unhealthy",
                "database": "disconnected",
                "server": self.config.http.server_name,
                "worker_id": self.config.http.worker_id,
                "version": self.config.http.version,
                "error": message,
            })
        } else {
            json!({ "error": format!("broker unavailable: {message}") })
        };
        HttpResponse {
            status: 503,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: serde_json::to_vec(&body).unwrap_or_default(),
        }
    }

    /// True when the engine is open (and no other request is opening it right now).
    fn engine_is_open(&self) -> bool {
        self.engine.try_lock().is_some_and(|slot| slot.is_some())
    }

    /// The internal routes of a sharded broker (`/__shard/...`, sent only by the entry Worker and by the
    /// objects of the same broker: public paths never start with it): the catalog object's routes
    /// ([`crate::catalog`]), the transaction coordinator's (`/__shard/txn/run`, `/status`:
    /// [`crate::txn_coordinator`]) and a shard's part of a transaction (`/__shard/txn/prepare`,
    /// `/commit`, `/abort`: [`crate::txn_participant`]), and `/__shard/check`, which answers 200 when
    /// this object's engine opens (with its shard guard) and 503 otherwise.
    async fn serve_internal(&self, path: &str, req: web_sys::Request) -> Result<web_sys::Response> {
        if path.starts_with("/__shard/catalog/") {
            return crate::catalog_object::handle(&self.state, req).await;
        }
        if path.starts_with("/__shard/reshard/") {
            return crate::reshard_object::handle(self, path, req).await;
        }
        if path == "/__shard/txn/run" || path == "/__shard/txn/status" {
            return crate::txn_coordinator::handle(&self.state, &self.env, path, req).await;
        }
        if path.starts_with("/__shard/txn/") {
            return match self.engine().await {
                Ok(engine) => crate::txn_participant::handle(self, &engine, path, req).await,
                Err(message) => respond::answer(&self.unavailable(path, message)),
            };
        }
        if path == "/__shard/check" {
            return match self.engine().await {
                Ok(_) => respond::json(200, &json!({ "ok": true })),
                Err(message) => respond::answer(&self.unavailable(path, message)),
            };
        }
        respond::error(404, "Not Found")
    }

    /// Keeps the shard hint of a request (the `x-queen-shard` header's value) while the engine is not
    /// open: the hint picks the shard the engine opens as, and is not used afterwards.
    fn note_shard_hint(&self, value: Option<&str>) {
        if let Some(hint) = value.and_then(parse_shard_hint) {
            if !self.engine_is_open() {
                *self.shard_hint.borrow_mut() = Some(hint);
            }
        }
    }

    /// Answers one request from workerd's `Request` (the object class's `fetch`, for the requests the
    /// shim does not send to [`BrokerObject::serve`]: internal and test routes, bodies without a declared
    /// length or longer than the limit).
    async fn serve_request(&self, req: web_sys::Request) -> Result<web_sys::Response> {
        let url = req.url();
        let (path, _) = path_and_query(&url);
        if path.starts_with("/__test/") {
            if !flag(&self.env, "QUEEN_TEST_ROUTES") {
                return respond::error(404, "Not Found");
            }
            if path == "/__test/refuse" {
                return self.test_refuse(&req.method());
            }
            return crate::selftest::handle(&self.state, req.into()).await;
        }
        // Once the engine is open, no request pays for reading the header.
        if !self.engine_is_open() {
            self.note_shard_hint(req.headers().get(SHARD_HEADER).ok().flatten().as_deref());
        }
        if path.starts_with("/__shard/") {
            return self.serve_internal(path, req).await;
        }
        let request = match read_request(&req, self.config.http.limits.max_body_bytes).await? {
            Ok(request) => request,
            Err(too_large) => return respond::answer(&too_large),
        };
        respond::answer(&self.answer(request).await)
    }

    /// Answers one request of the public API (`/api/v1/*`, `/health`, `/metrics*`), read already.
    async fn answer(&self, request: HttpRequest) -> HttpResponse {
        let engine = match self.engine().await {
            Ok(engine) => engine,
            Err(message) => return self.unavailable(&request.path, message),
        };
        if let Some(refusal) = self.misrouted(&request) {
            return refusal;
        }
        // The entry Worker checked the token already; the object checks again (it trusts no header).
        let outcome = queen_edge::http::jwt::authenticate(
            &self.config.http,
            &crate::jwt::WebCryptoVerifier,
            &request.method,
            &request.path,
            request.header("authorization"),
            js_sys::Date::now() as i64,
        )
        .await;
        let answer = handle_with_jwt(&engine, &self.config.http, request, &outcome).await;
        if let Sharing::Auto(policy) = &self.sharing {
            policy.borrow_mut().answered(js_sys::Date::now() as i64);
        }
        // A request may have created the first queue of an idle broker.
        self.arm_alarm_if_needed(&engine).await;
        answer
    }

    /// The 500 for a write of a queue another shard serves ([`crate::shape::stray_queue`]), before anything
    /// of it is applied: storing it here would answer it as done while no pop could reach it.
    fn misrouted(&self, request: &HttpRequest) -> Option<HttpResponse> {
        let (index, count) = self.placement.get()?;
        if request.method != "POST" {
            return None;
        }
        let (queue, home) = crate::shape::stray_queue(&request.path, &request.body, index, count)?;
        let message = format!(
            "misrouted: queue {queue:?} is served by shard {home}, and this request reached shard {index}; nothing of it was applied"
        );
        console_error!("{message}");
        Some(HttpResponse {
            status: 500,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: serde_json::to_vec(&json!({ "error": message })).unwrap_or_default(),
        })
    }

    /// Runs retention and eviction, then schedules the next run. A failure is logged and retried at
    /// the next alarm; it never loses data (maintenance only deletes what the queue's options expire).
    async fn run_alarm(&self) {
        // The coordinator of transactions across shards opens no engine: its alarm only recovers.
        let storage = self.state.storage();
        if let Ok(Some(true)) = storage
            .get::<bool>(crate::txn_coordinator::MARKER_KEY)
            .await
        {
            if let Err(e) = crate::txn_coordinator::recover(&self.state, &self.env).await {
                console_error!("transaction recovery failed: {e}");
            }
            return;
        }
        match self.engine().await {
            Ok(engine) => match engine.maintain().await {
                Ok(report) => console_log!(
                    "maintenance: {} retained-out, {} evicted, {} segments deleted, {} compressed",
                    report.retention_deleted,
                    report.evicted,
                    report.segments_deleted,
                    report.segments_compressed
                ),
                Err(e) => console_error!("maintenance failed: {e}"),
            },
            Err(e) => console_error!("maintenance skipped, broker unavailable: {e}"),
        }
        // Scheduled again only while there is something to maintain (see `arm_alarm_if_needed`)
        // or a prepared transaction part to settle.
        self.alarm_armed.set(false);
        if let Ok(engine) = self.engine().await {
            let next = crate::txn_participant::recover(&self.env, &engine).await;
            self.arm_alarm_if_needed(&engine).await;
            if let Some(at) = next {
                self.alarm_by(at).await;
            }
        }
    }
}

/// The Durable Object class `Broker` (bound as `BROKER` in `wrangler.toml`), exported to JS by hand.
///
/// workerd instantiates the class `scripts/build-worker` makes of it with `worker/shim.js`
/// (`durableObjectClass`). Its `fetch` reads a public API request's body once (`arrayBuffer()`) and calls
/// [`BrokerObject::serve`] with the method, the URL, the two headers the HTTP layer reads and the body;
/// the answer comes back as bytes ([`frame::frame`]) from which JS builds the `Response`, in the same
/// call when the request needs no real wait ([`run_now`]). Internal and test routes, and bodies without
/// a declared length or declared longer than the limit, go to [`BrokerObject::fetch`] with workerd's
/// `Request` as it is (no `worker::Request`, whose constructor copies the `cf` object).
#[wasm_bindgen(wasm_bindgen = ::worker::wasm_bindgen, js_name = Broker)]
pub struct BrokerObject {
    broker: Rc<Broker>,
}

// What `#[durable_object]` would export (constructor, `fetch`, `alarm`; the futures asserted
// unwind-safe as it does), plus `serve`, `maxBodyBytes` and `frameHeaders` for the shim.
#[wasm_bindgen(
    wasm_bindgen = ::worker::wasm_bindgen,
    wasm_bindgen_futures = ::worker::wasm_bindgen_futures,
    js_sys = ::worker::js_sys,
    js_class = Broker
)]
impl BrokerObject {
    /// Called by workerd when the object starts.
    #[wasm_bindgen(constructor)]
    pub fn new(state: DurableObjectState, env: Env) -> BrokerObject {
        let state = State::from(state);
        let object_id = state.id().to_string();
        let config = WorkerConfig::from_env(&env, object_id.clone(), js_sys::Date::now() as i64);
        if let Some(error) = &config.startup_error {
            console_error!("broker cannot start: {error}");
        }
        let sharing = match config.commit_sharing {
            CommitSharing::Off => Sharing::Off,
            CommitSharing::On => Sharing::On,
            // Kept across the object's restarts after idle spells (crate::sharing_memory).
            CommitSharing::Auto => Sharing::Auto(crate::sharing_memory::policy_of(&object_id)),
        };
        BrokerObject {
            broker: Rc::new(Broker {
                state,
                env,
                config,
                engine: Mutex::new(None),
                alarm_armed: std::cell::Cell::new(false),
                shard_hint: std::cell::RefCell::new(None),
                refusal: std::cell::RefCell::new(None),
                sharing,
                placement: std::cell::Cell::new(None),
            }),
        }
    }

    /// Answers one request given as its parts: `method`, the `url` as workerd serialises it, the
    /// `Authorization`, `Content-Type` and `x-queen-shard` headers, and the whole body (within
    /// [`BrokerObject::max_body_bytes`], checked again by the HTTP layer), and the request's `signal` for
    /// a GET ([`client_gone`]; the shim passes none for other methods). Returns the answer as a
    /// [`frame::frame`] (a `Uint8Array`), or a `Promise` of one when the request must wait.
    // The request's parts as plain arguments: one call from the shim, no object to read fields from.
    #[allow(clippy::too_many_arguments)]
    pub fn serve(
        &self,
        method: &str,
        url: &str,
        authorization: Option<String>,
        content_type: Option<String>,
        shard: Option<String>,
        body: Vec<u8>,
        signal: Option<web_sys::AbortSignal>,
    ) -> std::result::Result<JsValue, JsValue> {
        self.broker.note_shard_hint(shard.as_deref());
        let (path, query) = path_and_query(url);
        let mut headers = Vec::new();
        if let Some(value) = authorization {
            headers.push(("authorization".to_string(), value));
        }
        if let Some(value) = content_type {
            headers.push(("content-type".to_string(), value));
        }
        let request = HttpRequest {
            method: method.to_ascii_uppercase(),
            path: path.to_string(),
            query: query.to_string(),
            headers,
            body,
            client: signal.map(client_gone).unwrap_or_default(),
        };
        let broker = self.broker.clone();
        run_now(async move {
            let answer = broker.answer(request).await;
            Ok(js_sys::Uint8Array::from(frame::frame(&answer).as_slice()).into())
        })
    }

    /// The largest body [`BrokerObject::serve`] takes (`MAX_BODY_BYTES`); a longer one goes to `fetch`,
    /// which answers 413 without reading it.
    #[wasm_bindgen(getter, js_name = maxBodyBytes)]
    pub fn max_body_bytes(&self) -> f64 {
        self.broker.config.http.limits.max_body_bytes as f64
    }

    /// Whether [`BrokerObject::serve`] reads its `authorization` argument ([`HttpConfig::reads_authorization`]
    /// of this object's settings, fixed for its life): when false the shim passes `null` without reading
    /// the header.
    ///
    /// [`HttpConfig::reads_authorization`]: queen_edge::http::HttpConfig::reads_authorization
    #[wasm_bindgen(getter, js_name = readsAuthorization)]
    pub fn reads_authorization(&self) -> bool {
        self.broker.config.http.reads_authorization()
    }

    /// Whether [`BrokerObject::serve`] still reads its `shard` argument: until the engine is open (it never
    /// closes again), after which the shim stops reading the header.
    #[wasm_bindgen(getter, js_name = wantsShardHint)]
    pub fn wants_shard_hint(&self) -> bool {
        !self.broker.engine_is_open()
    }

    /// The header set `kind` of a frame as `name\nvalue\n` pairs ([`frame::frame_headers`]).
    #[wasm_bindgen(js_name = frameHeaders)]
    pub fn frame_headers(kind: u8) -> String {
        frame::frame_headers(kind)
    }

    /// Called by workerd (through the shim) for the requests [`BrokerObject::serve`] does not take.
    #[wasm_bindgen(js_name = fetch)]
    pub async fn fetch(&self, req: web_sys::Request) -> std::result::Result<JsValue, JsValue> {
        let broker = self.broker.clone();
        std::panic::AssertUnwindSafe(async move {
            broker
                .serve_request(req)
                .await
                .map(JsValue::from)
                .map_err(JsValue::from)
        })
        .await
    }

    /// Called by workerd when the maintenance alarm fires.
    #[wasm_bindgen(js_name = alarm)]
    pub async fn alarm(&self) -> std::result::Result<JsValue, JsValue> {
        let broker = self.broker.clone();
        std::panic::AssertUnwindSafe(async move {
            broker.run_alarm().await;
            respond::respond(200, &[], b"maintained")
                .map(JsValue::from)
                .map_err(JsValue::from)
        })
        .await
    }
}

//! The `Broker` Durable Object: one broker (every queue of it) per object, on SQLite-backed storage.
//!
//! The entry Worker (`lib.rs`) forwards `/api/v1/*`, `/health`, `/metrics*` (and, in tests only, `/__test/*`)
//! here unchanged. The object opens one [`Engine`] over a [`DoStore`] on its first request and keeps it while
//! the object lives; every request is read into an [`HttpRequest`] and answered by
//! `queen_edge::http::handle`. Requests interleave at their awaits (a long-poll parks without blocking
//! pushes); the engine serialises commands itself.
//!
//! If the store cannot be opened (or the engine cannot load), `/health` answers 503 `unhealthy` and every
//! other route 503 `{"error": ...}`; the next request tries again.

use std::rc::Rc;

use futures::lock::Mutex;
use queen_edge::engine::Engine;
use queen_edge::http::{handle_with_jwt, HttpRequest, HttpResponse, CORS_HEADERS};
use serde_json::json;
use worker::{
    console_error, console_log, durable_object, DurableObject, Env, Headers, Method, Request,
    Response, Result, State,
};

use crate::config::{flag, WorkerConfig};
use crate::do_store::DoStore;
use crate::host::WorkerHost;

/// The engine a `Broker` object runs.
pub type BrokerEngine = Engine<DoStore, WorkerHost>;

/// Reads `req` completely (the body is consumed) into the HTTP layer's request type.
pub async fn read_request(mut req: Request) -> Result<HttpRequest> {
    let url = req.url()?;
    let method = req.method().to_string().to_ascii_uppercase();
    let headers = req.headers().entries().collect();
    let body = if matches!(req.method(), Method::Get | Method::Head) {
        Vec::new()
    } else {
        req.bytes().await?
    };
    Ok(HttpRequest {
        method,
        path: url.path().to_string(),
        query: url.query().unwrap_or("").to_string(),
        headers,
        body,
    })
}

/// Turns the HTTP layer's answer into a workerd response.
pub fn write_response(answer: HttpResponse) -> Result<Response> {
    api_response(answer.status, &answer.headers, answer.body)
}

/// Builds a response from a status, headers and body; adds the CORS headers unless `headers` already set them.
pub fn api_response(status: u16, headers: &[(String, String)], body: Vec<u8>) -> Result<Response> {
    let out = Headers::new();
    for (name, value) in headers {
        out.append(name, value)?;
    }
    for (name, value) in CORS_HEADERS {
        if !out.has(name)? {
            out.set(name, value)?;
        }
    }
    let response = if body.is_empty() {
        Response::empty()?
    } else {
        Response::from_bytes(body)?
    };
    Ok(response.with_status(status).with_headers(out))
}

/// A JSON response with the CORS headers.
pub fn json_response(status: u16, value: &serde_json::Value) -> Result<Response> {
    api_response(
        status,
        &[("Content-Type".into(), "application/json".into())],
        serde_json::to_vec(value)?,
    )
}

/// `{"error": message}` with `status` and the CORS headers.
pub fn error_response(status: u16, message: &str) -> Result<Response> {
    json_response(status, &json!({ "error": message }))
}

/// How often the alarm runs retention and eviction (`Engine::maintain`) unless the var
/// `MAINTENANCE_INTERVAL_MS` says otherwise.
pub const MAINTENANCE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);

/// The Durable Object class `Broker` (bound as `BROKER` in `wrangler.toml`).
#[durable_object]
pub struct Broker {
    state: State,
    env: Env,
    config: WorkerConfig,
    engine: Mutex<Option<Rc<BrokerEngine>>>,
}

impl Broker {
    /// The object's engine, opened on first use (over a fresh [`DoStore`]) and kept for the object's life.
    pub async fn engine(&self) -> std::result::Result<Rc<BrokerEngine>, String> {
        let mut slot = self.engine.lock().await;
        if let Some(engine) = slot.as_ref() {
            return Ok(engine.clone());
        }
        let store = DoStore::open(&self.state.storage()).map_err(|e| e.message)?;
        let engine = Engine::open(store, WorkerHost, self.config.broker.clone())
            .await
            .map_err(|e| e.to_string())?;
        let engine = Rc::new(engine);
        *slot = Some(engine.clone());
        drop(slot);
        // Retention and eviction run from the object's alarm; make sure one is scheduled.
        if let Ok(None) = self.state.storage().get_alarm().await {
            let _ = self
                .state
                .storage()
                .set_alarm(self.maintenance_interval())
                .await;
        }
        Ok(engine)
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

    /// Settings read from the environment when the object started.
    pub fn config(&self) -> &WorkerConfig {
        &self.config
    }

    async fn unavailable(&self, path: &str, message: String) -> Result<Response> {
        if path == "/health" {
            let id = self.config.http.worker_id.clone();
            return json_response(
                503,
                &json!({
                    "status": "unhealthy",
                    "database": "disconnected",
                    "server": self.config.http.server_name,
                    "worker_id": id,
                    "version": self.config.http.version,
                    "error": message,
                }),
            );
        }
        error_response(503, &format!("broker unavailable: {message}"))
    }
}

impl DurableObject for Broker {
    fn new(state: State, env: Env) -> Self {
        let worker_id = state.id().to_string();
        let config = WorkerConfig::from_env(&env, worker_id, js_sys::Date::now() as i64);
        Broker {
            state,
            env,
            config,
            engine: Mutex::new(None),
        }
    }

    async fn fetch(&self, req: Request) -> Result<Response> {
        let path = req.path();
        if path.starts_with("/__test/") {
            if !flag(&self.env, "QUEEN_TEST_ROUTES") {
                return error_response(404, "Not Found");
            }
            return crate::selftest::handle(&self.state, req).await;
        }
        let engine = match self.engine().await {
            Ok(engine) => engine,
            Err(message) => return self.unavailable(&path, message).await,
        };
        let request = read_request(req).await?;
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
        write_response(answer)
    }

    /// Runs retention and eviction, then schedules the next run. A failure is logged and retried at
    /// the next alarm; it never loses data (maintenance only deletes what the queue's options expire).
    async fn alarm(&self) -> Result<Response> {
        match self.engine().await {
            Ok(engine) => match engine.maintain().await {
                Ok(report) => console_log!(
                    "maintenance: {} retained-out, {} evicted, {} segments deleted",
                    report.retention_deleted,
                    report.evicted,
                    report.segments_deleted
                ),
                Err(e) => console_error!("maintenance failed: {e}"),
            },
            Err(e) => console_error!("maintenance skipped, broker unavailable: {e}"),
        }
        self.state
            .storage()
            .set_alarm(self.maintenance_interval())
            .await?;
        Response::ok("maintained")
    }
}

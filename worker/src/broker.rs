//! The `Broker` Durable Object: one broker (every queue of it) per object, on SQLite-backed storage.
//!
//! The entry Worker (`lib.rs`) forwards `/api/v1/*`, `/health`, `/metrics*` (and, in tests only, `/__test/*`)
//! here unchanged. Until the engine is wired in, the object answers `/health` for real (it opens its
//! [`DoStore`]), `OPTIONS` with the CORS preflight, and every other route with
//! `501 {"error": "..."}`.
//!
//! # Hooking the engine in
//!
//! Edit [`Broker::handle_api`] only: build the engine once (keep it in a `RefCell` field created in
//! [`DurableObject::new`], or lazily on first use), over [`Broker::store`] and [`Broker::config`], then turn the
//! [`ApiRequest`] into whatever `queen_edge::http::handle` takes and its answer into [`api_response`].

use std::cell::RefCell;

use queen_edge::store::StoreError;
use serde_json::json;
use worker::{
    durable_object, DurableObject, Env, Headers, Method, Request, Response, Result, State,
};

use crate::config::{flag, BrokerConfig};
use crate::do_store::DoStore;

/// The CORS headers the wire contract puts on every JSON response (§0.1).
pub const CORS_HEADERS: [(&str, &str); 4] = [
    ("Access-Control-Allow-Origin", "*"),
    (
        "Access-Control-Allow-Methods",
        "GET, POST, PUT, DELETE, OPTIONS",
    ),
    (
        "Access-Control-Allow-Headers",
        "Content-Type, Authorization",
    ),
    ("Access-Control-Max-Age", "86400"),
];

/// A request as the runtime-agnostic HTTP layer wants it: everything read, nothing borrowed from the runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiRequest {
    /// Upper-case method, e.g. `GET`.
    pub method: String,
    /// The URL path, still percent-encoded, e.g. `/api/v1/pop/queue/q1`.
    pub path: String,
    /// The raw query string without `?` (empty when absent).
    pub query: String,
    /// Header names (lower-case, as the runtime gives them) and values, in the runtime's order.
    pub headers: Vec<(String, String)>,
    /// The whole body.
    pub body: Vec<u8>,
}

impl ApiRequest {
    /// Reads `req` completely (the body is consumed).
    pub async fn read(mut req: Request) -> Result<Self> {
        let url = req.url()?;
        let method = req.method().to_string().to_ascii_uppercase();
        let headers = req.headers().entries().collect();
        let body = if matches!(req.method(), Method::Get | Method::Head) {
            Vec::new()
        } else {
            req.bytes().await?
        };
        Ok(ApiRequest {
            method,
            path: url.path().to_string(),
            query: url.query().unwrap_or("").to_string(),
            headers,
            body,
        })
    }

    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
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

/// The Durable Object class `Broker` (bound as `BROKER` in `wrangler.toml`).
#[durable_object]
pub struct Broker {
    state: State,
    env: Env,
    config: BrokerConfig,
    store: RefCell<Option<DoStore>>,
}

impl Broker {
    /// The object's store, opened on first use and kept for the object's lifetime.
    pub fn store(&self) -> std::result::Result<DoStore, StoreError> {
        if let Some(store) = self.store.borrow().as_ref() {
            return Ok(store.clone());
        }
        let store = DoStore::open(&self.state.storage())?;
        *self.store.borrow_mut() = Some(store.clone());
        Ok(store)
    }

    /// Limits and defaults from the environment.
    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    /// `GET /health`: healthy when the store opens and answers a scan.
    async fn health(&self) -> Result<Response> {
        use queen_edge::store::Store;
        let probe = match self.store() {
            Ok(store) => store.scan("\u{0}health-probe/").await.map(|_| ()),
            Err(e) => Err(e),
        };
        let id = self.state.id().to_string();
        let base = json!({
            "server": "queen-edge",
            "worker_id": id,
            "version": env!("CARGO_PKG_VERSION"),
            "shared_state": { "enabled": false },
            "queen": { "worker_id": id, "status": "active" },
        });
        let mut body = base;
        match probe {
            Ok(()) => {
                body["status"] = json!("healthy");
                body["database"] = json!("connected");
                json_response(200, &body)
            }
            Err(e) => {
                body["status"] = json!("unhealthy");
                body["database"] = json!("disconnected");
                body["error"] = json!(e.message);
                json_response(503, &body)
            }
        }
    }

    /// Every route of the Queen API (and `/metrics*`). **The engine hook**: replace the placeholder below.
    async fn handle_api(&self, req: ApiRequest) -> Result<Response> {
        if req.method == "OPTIONS" {
            return api_response(204, &[], Vec::new());
        }
        if req.path == "/health" {
            return self.health().await;
        }
        error_response(
            501,
            "queen-edge: the broker engine is not wired into the Durable Object yet",
        )
    }
}

impl DurableObject for Broker {
    fn new(state: State, env: Env) -> Self {
        let config = BrokerConfig::from_env(&env);
        Broker {
            state,
            env,
            config,
            store: RefCell::new(None),
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
        let req = ApiRequest::read(req).await?;
        self.handle_api(req).await
    }
}

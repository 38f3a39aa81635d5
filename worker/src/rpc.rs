//! The entry Worker's hop to the `Broker` object as a JS RPC call instead of an HTTP subrequest.
//!
//! With one shard, the entry Worker has already read everything the object needs from the request (method,
//! path, query, the `Authorization` header) and reads the body once; it calls the object's `request` method
//! on the stub with those values ([`call_object`]) and builds the client's `Response` from what the method
//! returns. The object reads the values into an [`HttpRequest`] ([`incoming`]), answers it through
//! `src/http` as its `fetch` handler does, and returns the answer as `[status, headers, body]`
//! ([`outgoing`]). No `Request` or `Response` object is made for the hop, and no body is streamed through it.
//!
//! A body without a declared `Content-Length` (chunked) still goes through `fetch`
//! ([`crate::forward_to_object`]): the object streams it and stops at `MAX_BODY_BYTES`. Sharded brokers and
//! the test routes use `fetch` too.

use js_sys::{Array, Uint8Array};
use queen_edge::http::{HttpRequest, HttpResponse, CORS_HEADERS};
use wasm_bindgen::{JsCast, JsValue};
use worker::worker_sys::web_sys;
use worker::{Env, Result};

use crate::respond;

/// Name of the object's RPC method (exported by `Broker`, wrapped by the build's `DurableObject` class).
pub const METHOD: &str = "request";

/// What the entry Worker read from a request before the hop.
pub struct Call<'a> {
    /// The method, upper case.
    pub method: &'a str,
    /// The path, still percent-encoded.
    pub path: &'a str,
    /// The query string, without `?`.
    pub query: &'a str,
    /// The `Authorization` header, if any.
    pub authorization: Option<&'a str>,
    /// The `Content-Length` header, if declared.
    pub content_length: Option<u64>,
}

/// True when the request must go through `fetch` instead (a body whose length is not declared: the
/// object reads it as a stream and stops at the body limit).
pub fn needs_fetch(req: &web_sys::Request, call: &Call) -> bool {
    has_body(call.method) && call.content_length.is_none() && req.body().is_some()
}

/// True for methods whose body the broker reads.
fn has_body(method: &str) -> bool {
    !matches!(method, "GET" | "HEAD")
}

/// Sends `req` to the object named `name` as an RPC call and answers with what the object returned.
pub async fn call_object(
    req: &web_sys::Request,
    env: &Env,
    name: &str,
    call: &Call<'_>,
) -> Result<web_sys::Response> {
    let body = if has_body(call.method) && call.content_length.unwrap_or(0) > 0 {
        worker::wasm_bindgen_futures::JsFuture::from(req.array_buffer()?).await?
    } else {
        JsValue::NULL
    };
    let content_type = req.headers().get("content-type").ok().flatten();
    let stub = crate::object_stub(env, name)?;
    let method = js_sys::Reflect::get(&stub, &JsValue::from_str(METHOD))?
        .dyn_into::<js_sys::Function>()
        .map_err(|_| worker::Error::RustError("the Broker stub has no request method".into()))?;
    let args = Array::of5(
        &JsValue::from_str(call.method),
        &JsValue::from_str(call.path),
        &JsValue::from_str(call.query),
        &call.authorization.map_or(JsValue::NULL, JsValue::from_str),
        &content_type.map_or(JsValue::NULL, |t| JsValue::from_str(&t)),
    );
    args.push(&body);
    // `Reflect.apply`, not `method.apply`: every property of an RPC method stub (`apply` too) names a
    // remote method.
    let promise = js_sys::Reflect::apply(&method, &stub, &args)?;
    let answer = worker::wasm_bindgen_futures::JsFuture::from(js_sys::Promise::resolve(&promise))
        .await?
        .dyn_into::<Array>()
        .map_err(|_| {
            worker::Error::RustError("the Broker's request answer is not an array".into())
        })?;
    let status = answer.get(0).as_f64().unwrap_or(500.0) as u16;
    let flat = answer.get(1).dyn_into::<Array>().unwrap_or_default();
    let headers: Vec<(String, String)> = (0..flat.length() / 2)
        .map(|i| {
            let text = |v: JsValue| v.as_string().unwrap_or_default();
            (text(flat.get(2 * i)), text(flat.get(2 * i + 1)))
        })
        .collect();
    respond::respond_js(status, &headers, &answer.get(2))
}

/// The object's side: the RPC arguments as the HTTP layer's request.
pub fn incoming(
    method: String,
    path: String,
    query: String,
    authorization: Option<String>,
    content_type: Option<String>,
    body: &JsValue,
) -> HttpRequest {
    let mut headers = Vec::with_capacity(2);
    if let Some(value) = authorization {
        headers.push(("authorization".to_string(), value));
    }
    if let Some(value) = content_type {
        headers.push(("content-type".to_string(), value));
    }
    let body = if body.is_null() || body.is_undefined() {
        Vec::new()
    } else {
        Uint8Array::new(body).to_vec()
    };
    HttpRequest {
        method,
        path,
        query,
        headers,
        body,
    }
}

/// The object's side: an answer as `[status, [name, value, ...], body]`, without the CORS headers at their
/// default values (the entry Worker adds those, as [`respond::respond`] always does).
pub fn outgoing(answer: &HttpResponse) -> JsValue {
    let headers = Array::new();
    for (name, value) in &answer.headers {
        let default_cors = CORS_HEADERS
            .iter()
            .any(|(n, v)| n.eq_ignore_ascii_case(name) && v == value);
        if !default_cors {
            headers.push(&JsValue::from_str(name));
            headers.push(&JsValue::from_str(value));
        }
    }
    let body = if answer.body.is_empty() {
        JsValue::NULL
    } else {
        // A fresh JS buffer: wasm memory must not leave the object.
        Uint8Array::from(answer.body.as_slice()).into()
    };
    Array::of3(&JsValue::from(answer.status), &headers, &body).into()
}

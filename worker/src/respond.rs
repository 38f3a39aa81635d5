//! workerd `Response`s built straight from Rust: a status, headers and a body in, one `new Response(body,
//! init)` out, with the CORS headers of `queen_edge::http::CORS_HEADERS` on every answer.
//!
//! The headers almost every answer carries (the CORS set, with or without `Content-Type:
//! application/json`) are built once per isolate and copied with one `new Headers(cached)` per answer,
//! instead of one call into workerd per header ([`crate::frame::plan_headers`] splits an answer's headers).

use queen_edge::http::{HttpResponse, CORS_HEADERS};
use serde_json::json;
use wasm_bindgen::JsValue;
use worker::worker_sys::web_sys;

use crate::frame::{plan_headers, CONTENT_TYPE, JSON};

thread_local! {
    /// The CORS headers alone.
    static CORS_ONLY: web_sys::Headers = cached_headers(false);
    /// The CORS headers and `Content-Type: application/json`.
    static CORS_JSON: web_sys::Headers = cached_headers(true);
}

fn cached_headers(json: bool) -> web_sys::Headers {
    let headers = web_sys::Headers::new().expect("new Headers() cannot fail");
    if json {
        headers
            .set(CONTENT_TYPE, JSON)
            .expect("a valid header name and value");
    }
    for (name, value) in CORS_HEADERS {
        headers
            .set(name, value)
            .expect("a valid header name and value");
    }
    headers
}

/// The headers of an answer: `headers`, plus each CORS header `headers` does not set itself.
fn headers_for(headers: &[(String, String)]) -> Result<web_sys::Headers, JsValue> {
    let plan = plan_headers(headers);
    let cached = if plan.json { &CORS_JSON } else { &CORS_ONLY };
    let out = cached.with(web_sys::Headers::new_with_headers)?;
    for (name, value) in plan.extra {
        // An answer that sets a CORS header itself replaces the default; any other header is added.
        if CORS_HEADERS
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(name))
        {
            out.set(name, value)?;
        } else {
            out.append(name, value)?;
        }
    }
    Ok(out)
}

/// A response with `status`, `headers` (plus the CORS headers it does not set) and `body` (none when empty).
pub fn respond(
    status: u16,
    headers: &[(String, String)],
    body: &[u8],
) -> worker::Result<web_sys::Response> {
    let init = web_sys::ResponseInit::new();
    init.set_status(status);
    init.set_headers(&headers_for(headers)?.into());
    let response = if body.is_empty() {
        web_sys::Response::new_with_opt_str_and_init(None, &init)?
    } else {
        // A fresh JS buffer: workerd keeps the body, and wasm memory must not be handed over.
        let bytes = js_sys::Uint8Array::from(body);
        web_sys::Response::new_with_opt_buffer_source_and_init(Some(&bytes), &init)?
    };
    Ok(response)
}

/// The HTTP layer's answer as a workerd response.
pub fn answer(answer: &HttpResponse) -> worker::Result<web_sys::Response> {
    respond(answer.status, &answer.headers, &answer.body)
}

/// A JSON response.
pub fn json(status: u16, value: &serde_json::Value) -> worker::Result<web_sys::Response> {
    respond(
        status,
        &[(CONTENT_TYPE.into(), JSON.into())],
        &serde_json::to_vec(value)?,
    )
}

/// `{"error": message}` with `status`.
pub fn error(status: u16, message: &str) -> worker::Result<web_sys::Response> {
    json(status, &json!({ "error": message }))
}

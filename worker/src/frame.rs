//! The HTTP layer's answers as bytes ([`frame`]) for the object's class in `worker/shim.js`, which builds the
//! workerd `Response` from them in JS, and the plan both that and `crate::respond` follow for an answer's
//! headers: one of two cached sets (the CORS headers of `queen_edge::http::CORS_HEADERS`, with or without
//! `Content-Type: application/json`) and what the answer adds to it ([`plan_headers`]).

use queen_edge::http::{HttpResponse, CORS_HEADERS};

/// The `Content-Type` header's name.
pub const CONTENT_TYPE: &str = "Content-Type";
/// The JSON media type.
pub const JSON: &str = "application/json";

/// True when `(name, value)` is one of the CORS headers with its default value.
pub fn is_default_cors(name: &str, value: &str) -> bool {
    CORS_HEADERS
        .iter()
        .any(|(n, v)| n.eq_ignore_ascii_case(name) && *v == value)
}

/// An answer's headers split into one of the two cached sets and what it adds to that set.
pub struct HeaderPlan<'a> {
    /// The set to start from: the CORS headers, with `Content-Type: application/json` when true.
    pub json: bool,
    /// The answer's other headers, in order (neither a default CORS pair nor the JSON content type
    /// when `json`).
    pub extra: Vec<&'a (String, String)>,
}

/// Splits `headers` into one of the two cached sets and what it adds to that set.
pub fn plan_headers(headers: &[(String, String)]) -> HeaderPlan<'_> {
    let mut extra: Vec<&(String, String)> = headers
        .iter()
        .filter(|(name, value)| !is_default_cors(name, value))
        .collect();
    let json =
        matches!(extra.first(), Some((n, v)) if n.eq_ignore_ascii_case(CONTENT_TYPE) && v == JSON);
    if json {
        extra.remove(0);
    }
    HeaderPlan { json, extra }
}

/// The first bytes of a [`frame`]: the status (2 bytes, big-endian), then the header set (1 byte).
pub const FRAME_HEAD: usize = 3;

/// Header set byte of a [`frame`]: the CORS headers.
pub const FRAME_CORS: u8 = 0;
/// Header set byte of a [`frame`]: the CORS headers and `Content-Type: application/json`.
pub const FRAME_CORS_JSON: u8 = 1;
/// Header set byte of a [`frame`]: the CORS headers plus the listed ones.
pub const FRAME_LISTED: u8 = 2;

/// The HTTP layer's answer as bytes, for the object's class in `worker/shim.js`, which builds the
/// `Response` from them in JS (one copy out of wasm, no call back into workerd from Rust):
///
/// - status, 2 bytes big-endian;
/// - header set, 1 byte: [`FRAME_CORS`], [`FRAME_CORS_JSON`], or [`FRAME_LISTED`], which is followed by
///   a 4-byte little-endian length and that many bytes of `name\nvalue\n` pairs (UTF-8) that go on top
///   of the CORS headers (a CORS header named there replaces the default, any other is added), as
///   `crate::respond::respond` does;
/// - the body, to the end.
pub fn frame(answer: &HttpResponse) -> Vec<u8> {
    let plan = plan_headers(&answer.headers);
    let listed: Option<String> = (!plan.extra.is_empty()).then(|| {
        let mut text = String::new();
        if plan.json {
            text.push_str(CONTENT_TYPE);
            text.push('\n');
            text.push_str(JSON);
            text.push('\n');
        }
        for (name, value) in &plan.extra {
            text.push_str(name);
            text.push('\n');
            text.push_str(value);
            text.push('\n');
        }
        text
    });
    let mut out = Vec::with_capacity(
        FRAME_HEAD + listed.as_ref().map_or(0, |t| 4 + t.len()) + answer.body.len(),
    );
    out.extend_from_slice(&answer.status.to_be_bytes());
    match &listed {
        Some(text) => {
            out.push(FRAME_LISTED);
            out.extend_from_slice(&(text.len() as u32).to_le_bytes());
            out.extend_from_slice(text.as_bytes());
        }
        None if plan.json => out.push(FRAME_CORS_JSON),
        None => out.push(FRAME_CORS),
    }
    out.extend_from_slice(&answer.body);
    out
}

/// The header set `kind` of a [`frame`] ([`FRAME_CORS`] or [`FRAME_CORS_JSON`]) as `name\nvalue\n`
/// pairs: the JS side builds each set once from this.
pub fn frame_headers(kind: u8) -> String {
    let mut text = String::new();
    if kind == FRAME_CORS_JSON {
        text.push_str(CONTENT_TYPE);
        text.push('\n');
        text.push_str(JSON);
        text.push('\n');
    }
    for (name, value) in CORS_HEADERS {
        text.push_str(name);
        text.push('\n');
        text.push_str(value);
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_cors_pairs_are_recognised() {
        assert!(is_default_cors("access-control-allow-origin", "*"));
        assert!(!is_default_cors(
            "Access-Control-Allow-Origin",
            "https://a.example"
        ));
        assert!(!is_default_cors("Content-Type", JSON));
    }

    fn answer(status: u16, headers: &[(&str, &str)], body: &[u8]) -> HttpResponse {
        let mut headers: Vec<(String, String)> = headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        headers.extend(
            CORS_HEADERS
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string())),
        );
        HttpResponse {
            status,
            headers,
            body: body.to_vec(),
        }
    }

    #[test]
    fn frames_name_the_cached_header_sets() {
        let json = frame(&answer(201, &[(CONTENT_TYPE, JSON)], b"[1]"));
        assert_eq!(json, [&[0, 201, FRAME_CORS_JSON][..], b"[1]"].concat());
        let empty = frame(&answer(204, &[], b""));
        assert_eq!(empty, vec![0, 204, FRAME_CORS]);
        let error = frame(&answer(503, &[("content-type", JSON)], b"{}"));
        assert_eq!(error[..3], [1, 247, FRAME_CORS_JSON]);
    }

    #[test]
    fn frames_list_other_headers_after_the_status() {
        let text = frame(&answer(200, &[(CONTENT_TYPE, "text/plain")], b"x 1"));
        let listed = format!("{CONTENT_TYPE}\ntext/plain\n");
        let mut want = vec![0, 200, FRAME_LISTED];
        want.extend_from_slice(&(listed.len() as u32).to_le_bytes());
        want.extend_from_slice(listed.as_bytes());
        want.extend_from_slice(b"x 1");
        assert_eq!(text, want);
        // A CORS header with another value is listed (the shim sets it over the default); JSON plus
        // another header lists both.
        let both = frame(&HttpResponse {
            status: 200,
            headers: vec![
                (CONTENT_TYPE.into(), JSON.into()),
                (
                    "Access-Control-Allow-Origin".into(),
                    "https://a.example".into(),
                ),
            ],
            body: Vec::new(),
        });
        let listed =
            format!("{CONTENT_TYPE}\n{JSON}\nAccess-Control-Allow-Origin\nhttps://a.example\n");
        assert_eq!(both[2], FRAME_LISTED);
        assert_eq!(&both[7..], listed.as_bytes());
    }

    #[test]
    fn frame_headers_are_the_cors_set_with_or_without_json() {
        let cors = frame_headers(FRAME_CORS);
        assert_eq!(cors.lines().count(), 2 * CORS_HEADERS.len());
        assert!(cors.starts_with("Access-Control-Allow-Origin\n*\n"));
        assert_eq!(
            frame_headers(FRAME_CORS_JSON),
            format!("{CONTENT_TYPE}\n{JSON}\n{cors}")
        );
    }
}

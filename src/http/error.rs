//! Error answers: `{"error": "<text>"}` with a 4xx for bad input and a 5xx only for storage failures.

use super::HttpResponse;
use crate::core::api::{CoreError, ErrorKind};
use crate::core::json_text::JsonText;
use crate::engine::EngineError;
use crate::store::StoreErrorKind;

/// A refused request: a status and the text that says what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HttpError {
    pub(crate) status: u16,
    pub(crate) message: String,
}

impl HttpError {
    /// 400: malformed or not allowed.
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        HttpError {
            status: 400,
            message: message.into(),
        }
    }

    /// 401: no or unknown credentials.
    pub(crate) fn unauthorized(message: impl Into<String>) -> Self {
        HttpError {
            status: 401,
            message: message.into(),
        }
    }

    /// 403: the credentials' role is not enough.
    pub(crate) fn forbidden(message: impl Into<String>) -> Self {
        HttpError {
            status: 403,
            message: message.into(),
        }
    }

    /// 404: the addressed thing does not exist.
    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        HttpError {
            status: 404,
            message: message.into(),
        }
    }

    /// 404 `no_such_route`.
    pub(crate) fn no_such_route() -> Self {
        Self::not_found("no_such_route")
    }

    /// 501: the route exists in Queen's API but this build leaves it out (a cargo feature).
    #[cfg(not(feature = "views"))]
    pub(crate) fn not_built(message: impl Into<String>) -> Self {
        HttpError {
            status: 501,
            message: message.into(),
        }
    }

    /// 501 for `what` (routes the npm module's default build leaves out), saying how to get them.
    #[cfg(not(feature = "views"))]
    pub(crate) fn not_in_default_build(what: &str) -> Self {
        Self::not_built(not_in_default_build(what))
    }

    /// 409: the request is well formed, but the state it addresses refuses it.
    pub(crate) fn conflict(message: impl Into<String>) -> Self {
        HttpError {
            status: 409,
            message: message.into(),
        }
    }

    /// 500: something this broker relies on failed (not the caller's fault; the store has its own
    /// statuses).
    pub(crate) fn internal(message: impl Into<String>) -> Self {
        HttpError {
            status: 500,
            message: message.into(),
        }
    }

    /// 413: over a configured size or count limit.
    pub(crate) fn too_large(message: impl Into<String>) -> Self {
        HttpError {
            status: 413,
            message: message.into(),
        }
    }

    /// 415: a body format this broker does not speak.
    pub(crate) fn unsupported_media(message: impl Into<String>) -> Self {
        HttpError {
            status: 415,
            message: message.into(),
        }
    }

    /// The JSON answer.
    pub(crate) fn into_response(self) -> HttpResponse {
        let mut t = JsonText::with_capacity(self.message.len() + 12);
        t.raw("{\"error\":").str(&self.message).raw("}");
        json_text_response(self.status, t.into_bytes())
    }
}

impl From<CoreError> for HttpError {
    fn from(e: CoreError) -> Self {
        let status = match e.kind {
            ErrorKind::BadRequest => 400,
            ErrorKind::NotFound => 404,
            ErrorKind::Conflict => 409,
            ErrorKind::TooLarge => 413,
            ErrorKind::Full => 507,
        };
        HttpError {
            status,
            message: e.message,
        }
    }
}

impl From<EngineError> for HttpError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::Core(core) => core.into(),
            EngineError::Store(store) => {
                let status = match store.kind {
                    StoreErrorKind::QuotaExceeded => 507,
                    StoreErrorKind::Unavailable => 503,
                    StoreErrorKind::NewerFormat | StoreErrorKind::Other => 500,
                };
                HttpError {
                    status,
                    message: format!("storage failure: {}", store.message),
                }
            }
        }
    }
}

/// A JSON answer with `Content-Type: application/json`: a `Value` or a struct, serialized (the routes
/// of the `ops` and `views` features; the others write their answers as JSON text).
#[cfg(feature = "ops")]
pub(crate) fn json_response<T: serde::Serialize + ?Sized>(status: u16, body: &T) -> HttpResponse {
    HttpResponse {
        status,
        headers: vec![("Content-Type".to_string(), "application/json".to_string())],
        // Serializing a `Value` or a reply struct (string keys, raw payloads that are valid JSON) cannot
        // fail.
        body: serde_json::to_vec(body).unwrap_or_else(|_| b"{}".to_vec()),
    }
}

/// A JSON answer whose body is already JSON text (`render`'s writers), with `Content-Type:
/// application/json`.
pub(crate) fn json_text_response(status: u16, body: Vec<u8>) -> HttpResponse {
    HttpResponse {
        status,
        headers: vec![("Content-Type".to_string(), "application/json".to_string())],
        body,
    }
}

/// A 204 with no body.
pub(crate) fn no_content() -> HttpResponse {
    HttpResponse {
        status: 204,
        headers: Vec::new(),
        body: Vec::new(),
    }
}

/// That `what` (routes the npm module's default build leaves out, for size) is not in this build, and how
/// to get it: one text for every such route.
#[cfg(not(feature = "views"))]
pub(crate) fn not_in_default_build(what: &str) -> String {
    format!(
        "{what} not in the default build of the queen-edge module: open the database with \
         Queen.open({{ name, views: true }}) in every tab and worker that uses it, or use the edge broker"
    )
}

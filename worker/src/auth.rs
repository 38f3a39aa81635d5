//! Request authentication at the edge, before a request reaches the Durable Object.
//!
//! Today one mode exists: a shared bearer token. When the secret `API_TOKEN` is set, every request whose path
//! is not in `JWT_SKIP_PATHS` must carry `Authorization: Bearer <API_TOKEN>` (the `Bearer` prefix is
//! case-insensitive and may be left out, as in Queen). The token grants every role. JWT verification
//! (`JWT_ENABLED`, roles per route, contract §1.12) is not implemented yet.

use subtle::ConstantTimeEq;

/// Queen's default `JWT_SKIP_PATHS`: public paths that never need a token.
pub const DEFAULT_SKIP_PATHS: &str = "/health,/metrics/prometheus,/metrics,/";

/// Why a request was refused; the text goes into `{"error": ...}` with status 401.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthError {
    /// No `Authorization` header was sent.
    Missing,
    /// A token was sent and it is not the configured one.
    Invalid,
}

impl AuthError {
    /// The error text, as Queen words it.
    pub fn message(&self) -> &'static str {
        match self {
            AuthError::Missing => "Authentication required",
            AuthError::Invalid => "Invalid token",
        }
    }
}

/// True when `path` is public under the comma-separated `skip_paths` list: an entry matches exactly, or as a
/// prefix when it ends in `/` (a bare `/` matches only `/`).
pub fn is_skipped(path: &str, skip_paths: &str) -> bool {
    skip_paths
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .any(|entry| {
            entry == path || (entry != "/" && entry.ends_with('/') && path.starts_with(entry))
        })
}

/// Checks the `Authorization` header value against `token`.
pub fn check_bearer(header: Option<&str>, token: &str) -> Result<(), AuthError> {
    let header = header.map(str::trim).filter(|h| !h.is_empty());
    let Some(header) = header else {
        return Err(AuthError::Missing);
    };
    let presented = match header.split_once(' ') {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("bearer") => rest.trim(),
        _ => header,
    };
    if bool::from(presented.as_bytes().ct_eq(token.as_bytes())) {
        Ok(())
    } else {
        Err(AuthError::Invalid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skip_paths_match_exactly_or_by_prefix() {
        assert!(is_skipped("/health", DEFAULT_SKIP_PATHS));
        assert!(is_skipped("/", DEFAULT_SKIP_PATHS));
        assert!(!is_skipped("/api/v1/push", DEFAULT_SKIP_PATHS));
        assert!(!is_skipped("/metrics/other", DEFAULT_SKIP_PATHS));
        assert!(is_skipped("/api/v1/status/x", "/api/v1/status/"));
    }

    #[test]
    fn bearer_prefix_is_optional_and_case_insensitive() {
        assert_eq!(check_bearer(Some("Bearer s3cret"), "s3cret"), Ok(()));
        assert_eq!(check_bearer(Some("bearer s3cret"), "s3cret"), Ok(()));
        assert_eq!(check_bearer(Some("s3cret"), "s3cret"), Ok(()));
        assert_eq!(
            check_bearer(Some("Bearer nope"), "s3cret"),
            Err(AuthError::Invalid)
        );
        assert_eq!(check_bearer(None, "s3cret"), Err(AuthError::Missing));
        assert_eq!(check_bearer(Some("  "), "s3cret"), Err(AuthError::Missing));
    }
}

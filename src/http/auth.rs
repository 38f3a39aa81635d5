//! Bearer-token authentication with roles (contract §1.12, simplified to static tokens).
//!
//! Off by default. When configured, every route except the public ones (`/health`, `/metrics`,
//! `/metrics/prometheus`, CORS preflight) needs `Authorization: Bearer <token>` (the prefix is
//! case-insensitive and may be left out, as in Queen). No token: 401 `Authentication required`; a token
//! that matches none: 401 `Invalid token`; a role below the route's level: 403 `Insufficient permissions`.
//! Tokens are compared in constant time and never logged (their `Debug` output is redacted).

use super::error::HttpError;
use subtle::ConstantTimeEq;

/// A token's role. `Admin` ⊃ `ReadWrite` ⊃ `ReadOnly`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// The GET admin routes.
    ReadOnly,
    /// Push, pop, ack, transaction, lease, configure, traces, seek, subscription, DLQ replay and delete.
    ReadWrite,
    /// Everything, including queue and consumer-group deletion and stats refresh.
    Admin,
}

/// One accepted bearer token.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthToken {
    /// The secret itself.
    pub token: String,
    /// What it may do.
    pub role: Role,
    /// Stamped as `producerSub` on messages pushed with this token (like a JWT `sub`), if set.
    pub subject: Option<String>,
}

impl AuthToken {
    /// A token with `role` and no subject.
    pub fn new(token: impl Into<String>, role: Role) -> Self {
        AuthToken {
            token: token.into(),
            role,
            subject: None,
        }
    }
}

impl std::fmt::Debug for AuthToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthToken")
            .field("token", &"<redacted>")
            .field("role", &self.role)
            .field("subject", &self.subject)
            .finish()
    }
}

/// The accepted tokens.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthConfig {
    /// Tokens and their roles. Empty tokens never match.
    pub tokens: Vec<AuthToken>,
}

/// What a route needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Anyone.
    Public,
    /// At least [`Role::ReadOnly`].
    ReadOnly,
    /// At least [`Role::ReadWrite`].
    ReadWrite,
    /// [`Role::Admin`].
    Admin,
}

/// Who is calling, once checked, and whether they are still there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Caller {
    /// The subject to stamp as `producerSub`.
    pub(crate) subject: Option<String>,
    /// Whether the caller has gone (the request's [`super::ClientGone`]).
    pub(crate) client: super::ClientGone,
}

/// Checks the `Authorization` header value against `config` for a route needing `access`.
pub(crate) fn check(
    config: Option<&AuthConfig>,
    access: Access,
    authorization: Option<&str>,
) -> Result<Caller, HttpError> {
    let Some(config) = config else {
        return Ok(Caller::default());
    };
    if access == Access::Public {
        return Ok(Caller::default());
    }
    let presented = authorization.map(bearer).unwrap_or("");
    if presented.is_empty() {
        return Err(HttpError::unauthorized("Authentication required"));
    }
    // Compare against every token (no early exit on a match).
    let mut matched: Option<&AuthToken> = None;
    for candidate in &config.tokens {
        let equal: bool = candidate
            .token
            .as_bytes()
            .ct_eq(presented.as_bytes())
            .into();
        if equal && !candidate.token.is_empty() {
            matched = Some(candidate);
        }
    }
    let Some(token) = matched else {
        return Err(HttpError::unauthorized("Invalid token"));
    };
    let needed = match access {
        Access::Public => return Ok(Caller::default()),
        Access::ReadOnly => Role::ReadOnly,
        Access::ReadWrite => Role::ReadWrite,
        Access::Admin => Role::Admin,
    };
    if token.role < needed {
        return Err(HttpError::forbidden("Insufficient permissions"));
    }
    Ok(Caller {
        subject: token.subject.clone(),
        ..Caller::default()
    })
}

/// The static token equal to `presented`, if any (every token is compared, in constant time).
#[cfg(feature = "jwt")]
pub(crate) fn find_token<'a>(config: &'a AuthConfig, presented: &str) -> Option<&'a AuthToken> {
    let mut matched = None;
    for candidate in &config.tokens {
        let equal: bool = candidate
            .token
            .as_bytes()
            .ct_eq(presented.as_bytes())
            .into();
        if equal && !candidate.token.is_empty() {
            matched = Some(candidate);
        }
    }
    matched
}

/// The token in an `Authorization` value: after a case-insensitive `Bearer ` prefix, or the bare value.
pub(crate) fn bearer(value: &str) -> &str {
    let value = value.trim();
    match value.split_at_checked(7) {
        Some((prefix, token)) if prefix.eq_ignore_ascii_case("bearer ") => token.trim(),
        _ => value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> AuthConfig {
        AuthConfig {
            tokens: vec![
                AuthToken::new("ro-secret", Role::ReadOnly),
                AuthToken::new("rw-secret", Role::ReadWrite),
                AuthToken::new("", Role::Admin),
            ],
        }
    }

    #[test]
    fn roles_are_ordered() {
        let c = config();
        assert!(check(Some(&c), Access::ReadOnly, Some("Bearer ro-secret")).is_ok());
        assert_eq!(
            check(Some(&c), Access::ReadWrite, Some("bearer ro-secret"))
                .unwrap_err()
                .status,
            403
        );
        assert!(check(Some(&c), Access::ReadWrite, Some("rw-secret")).is_ok());
        assert_eq!(
            check(Some(&c), Access::Admin, Some("Bearer rw-secret"))
                .unwrap_err()
                .status,
            403
        );
    }

    #[test]
    fn missing_empty_and_unknown_tokens_are_401() {
        let c = config();
        for header in [None, Some(""), Some("Bearer "), Some("Bearer nope")] {
            assert_eq!(
                check(Some(&c), Access::ReadOnly, header)
                    .unwrap_err()
                    .status,
                401
            );
        }
        assert!(check(Some(&c), Access::Public, None).is_ok());
        assert!(check(None, Access::Admin, None).is_ok());
    }

    #[test]
    fn debug_redacts() {
        let text = format!("{:?}", config());
        assert!(!text.contains("secret"), "{text}");
    }
}

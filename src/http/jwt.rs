//! JWT authentication (contract §1.12), beside the static bearer tokens of `auth`.
//!
//! Everything but the signature check is plain Rust here: splitting and decoding the token, the algorithm
//! whitelist (`alg: none` and any algorithm without a configured key are refused), `exp`/`nbf` with the
//! clock skew, `iss`, `aud`, roles, `sub`. The signature is checked by the embedder through
//! [`SignatureVerifier`] (the Worker uses Web Crypto, which is async), so the flow is:
//!
//! 1. the embedder calls [`authenticate`] (async) with its verifier and gets a [`JwtOutcome`];
//! 2. it hands the outcome to [`precheck_with_jwt`](super::precheck_with_jwt) or
//!    [`handle_with_jwt`](super::handle_with_jwt), which check the role against the route as for static
//!    tokens and stamp the token's `sub` as `producerSub`.
//!
//! A request whose JWT was never verified (plain [`handle`](super::handle) with JWT configured and a token
//! that is no static token) is refused with 503, never let through. A configuration that cannot work
//! (`JWT_ENABLED` without a key source, an unknown algorithm, a bad PEM) is kept in
//! [`JwtConfig::error`]: every authenticated route then answers 503 with the reason.
//!
//! The whole module is behind the `jwt` cargo feature (on by default; the npm module's builds leave it out).

use super::auth::{self, Access, AuthConfig, Caller, Role};
use super::error::HttpError;
use super::router::{self, Route};
use super::HttpConfig;
use serde_json::Value;

/// A signature algorithm this broker accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JwtAlgorithm {
    /// HMAC SHA-256 with `JWT_SECRET`.
    Hs256,
    /// RSASSA-PKCS1-v1_5 SHA-256 with `JWT_PUBLIC_KEY` or a JWKS key.
    Rs256,
    /// Ed25519 with `JWT_PUBLIC_KEY` or a JWKS key.
    EdDsa,
}

impl JwtAlgorithm {
    /// The JOSE name (`HS256`, `RS256`, `EdDSA`).
    pub fn name(self) -> &'static str {
        match self {
            JwtAlgorithm::Hs256 => "HS256",
            JwtAlgorithm::Rs256 => "RS256",
            JwtAlgorithm::EdDsa => "EdDSA",
        }
    }

    fn from_jose(name: &str) -> Option<Self> {
        match name {
            "HS256" => Some(JwtAlgorithm::Hs256),
            "RS256" => Some(JwtAlgorithm::Rs256),
            "EdDSA" => Some(JwtAlgorithm::EdDsa),
            _ => None,
        }
    }
}

/// The kind of key in a `JWT_PUBLIC_KEY` PEM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PublicKeyKind {
    /// An RSA key (for RS256).
    Rsa,
    /// An Ed25519 key (for EdDSA).
    Ed25519,
}

/// A decoded `JWT_PUBLIC_KEY`: its SubjectPublicKeyInfo DER bytes and kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey {
    /// SubjectPublicKeyInfo, DER (what Web Crypto imports as `spki`).
    pub spki: Vec<u8>,
    /// RSA or Ed25519.
    pub kind: PublicKeyKind,
}

/// The raw settings, as read from the environment (names as in the contract).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct JwtSettings {
    /// `JWT_ALGORITHM`: `HS256`, `RS256`, `EdDSA` or `auto` (the default).
    pub algorithm: Option<String>,
    /// `JWT_SECRET` (HS256).
    pub secret: Option<String>,
    /// `JWT_PUBLIC_KEY` (a SPKI `PUBLIC KEY` PEM; `\n` escapes are accepted for one-line variables).
    pub public_key_pem: Option<String>,
    /// `JWT_JWKS_URL`.
    pub jwks_url: Option<String>,
    /// `JWT_ISSUER`.
    pub issuer: Option<String>,
    /// `JWT_AUDIENCE`.
    pub audience: Option<String>,
    /// `JWT_CLOCK_SKEW` in seconds (default 30).
    pub clock_skew: Option<String>,
    /// `JWT_ROLES_CLAIM` (default `role`).
    pub roles_claim: Option<String>,
    /// `JWT_SKIP_PATHS`, comma-separated (default `/health,/metrics,/`: unlike Queen's default,
    /// `/metrics/prometheus` is not skipped, since its series name queues; docs/decisions.md).
    pub skip_paths: Option<String>,
}

impl std::fmt::Debug for JwtSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtSettings")
            .field("algorithm", &self.algorithm)
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .field("public_key_pem", &self.public_key_pem.is_some())
            .field("jwks_url", &self.jwks_url)
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("clock_skew", &self.clock_skew)
            .field("roles_claim", &self.roles_claim)
            .field("skip_paths", &self.skip_paths)
            .finish()
    }
}

/// The default of `JWT_SKIP_PATHS`.
pub const DEFAULT_SKIP_PATHS: &str = "/health,/metrics,/";
/// The default of `JWT_CLOCK_SKEW`, in seconds.
pub const DEFAULT_CLOCK_SKEW: u64 = 30;

/// Checked JWT settings.
#[derive(Clone, PartialEq, Eq)]
pub struct JwtConfig {
    /// The algorithms a token may use: the one of `JWT_ALGORITHM`, or with `auto` each one a key is
    /// configured for. Never `none`.
    pub algorithms: Vec<JwtAlgorithm>,
    /// The HMAC secret (HS256).
    pub secret: Option<Vec<u8>>,
    /// The decoded `JWT_PUBLIC_KEY`.
    pub public_key: Option<PublicKey>,
    /// `JWT_JWKS_URL`.
    pub jwks_url: Option<String>,
    /// Required `iss`, if set.
    pub issuer: Option<String>,
    /// Required `aud` (the claim, a string or an array, must contain it), if set.
    pub audience: Option<String>,
    /// Tolerance on `exp` and `nbf`, in seconds.
    pub clock_skew_seconds: u64,
    /// The claim holding the role (a string, or an array of roles). The array claim `roles` is read too.
    pub roles_claim: String,
    /// Paths that need no token: exact matches, or prefixes for entries ending in `/` (a bare `/` only
    /// matches itself).
    pub skip_paths: Vec<String>,
    /// Why this configuration cannot verify anything, if it cannot: authenticated routes answer 503 with it.
    pub error: Option<String>,
}

impl std::fmt::Debug for JwtConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtConfig")
            .field("algorithms", &self.algorithms)
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .field("public_key", &self.public_key.as_ref().map(|k| k.kind))
            .field("jwks_url", &self.jwks_url)
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("clock_skew_seconds", &self.clock_skew_seconds)
            .field("roles_claim", &self.roles_claim)
            .field("skip_paths", &self.skip_paths)
            .field("error", &self.error)
            .finish()
    }
}

impl JwtConfig {
    /// Checks `settings`. Never fails: a configuration that cannot work keeps its reason in
    /// [`JwtConfig::error`] (so the broker answers 503 with it instead of starting open).
    pub fn from_settings(settings: &JwtSettings) -> JwtConfig {
        let mut errors: Vec<String> = Vec::new();
        let secret = settings.secret.as_ref().map(|s| s.as_bytes().to_vec());
        let public_key = match settings.public_key_pem.as_deref() {
            None => None,
            Some(pem) => match parse_public_key_pem(pem) {
                Ok(key) => Some(key),
                Err(e) => {
                    errors.push(format!("JWT_PUBLIC_KEY: {e}"));
                    None
                }
            },
        };
        let jwks_url = settings.jwks_url.clone();
        if let Some(url) = &jwks_url {
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                errors.push(format!("JWT_JWKS_URL must be an http(s) URL, not {url:?}"));
            }
        }
        let asymmetric = |kind: PublicKeyKind| {
            jwks_url.is_some() || public_key.as_ref().is_some_and(|k| k.kind == kind)
        };
        let algorithms = match settings.algorithm.as_deref().map(str::trim) {
            None | Some("") | Some("auto") | Some("AUTO") | Some("Auto") => {
                let mut algs = Vec::new();
                if secret.is_some() {
                    algs.push(JwtAlgorithm::Hs256);
                }
                if asymmetric(PublicKeyKind::Rsa) {
                    algs.push(JwtAlgorithm::Rs256);
                }
                if asymmetric(PublicKeyKind::Ed25519) {
                    algs.push(JwtAlgorithm::EdDsa);
                }
                if algs.is_empty() && errors.is_empty() {
                    errors.push(
                        "JWT_ENABLED is set but no key is configured (JWT_SECRET, JWT_PUBLIC_KEY or JWT_JWKS_URL)"
                            .to_string(),
                    );
                }
                algs
            }
            Some(name) => match JwtAlgorithm::from_jose(name) {
                None => {
                    errors.push(format!(
                        "JWT_ALGORITHM {name:?} is not supported (HS256, RS256, EdDSA or auto)"
                    ));
                    Vec::new()
                }
                Some(JwtAlgorithm::Hs256) => {
                    if secret.is_none() {
                        errors.push("JWT_ALGORITHM HS256 needs JWT_SECRET".to_string());
                    }
                    vec![JwtAlgorithm::Hs256]
                }
                Some(alg) => {
                    let kind = match alg {
                        JwtAlgorithm::Rs256 => PublicKeyKind::Rsa,
                        _ => PublicKeyKind::Ed25519,
                    };
                    match &public_key {
                        Some(key) if key.kind != kind => errors.push(format!(
                            "JWT_PUBLIC_KEY is an {:?} key, JWT_ALGORITHM {} needs {:?}",
                            key.kind,
                            alg.name(),
                            kind
                        )),
                        None if jwks_url.is_none() && settings.public_key_pem.is_none() => errors
                            .push(format!(
                                "JWT_ALGORITHM {} needs JWT_PUBLIC_KEY or JWT_JWKS_URL",
                                alg.name()
                            )),
                        _ => {}
                    }
                    vec![alg]
                }
            },
        };
        let clock_skew_seconds = match settings.clock_skew.as_deref().map(str::trim) {
            None | Some("") => DEFAULT_CLOCK_SKEW,
            Some(v) => match v.parse::<u64>() {
                Ok(n) => n,
                Err(_) => {
                    errors.push(format!(
                        "JWT_CLOCK_SKEW must be a number of seconds, not {v:?}"
                    ));
                    DEFAULT_CLOCK_SKEW
                }
            },
        };
        let roles_claim = settings
            .roles_claim
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .unwrap_or("role")
            .to_string();
        let skip_paths = settings
            .skip_paths
            .as_deref()
            .unwrap_or(DEFAULT_SKIP_PATHS)
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        JwtConfig {
            algorithms,
            secret,
            public_key,
            jwks_url,
            issuer: settings.issuer.clone(),
            audience: settings.audience.clone(),
            clock_skew_seconds,
            roles_claim,
            skip_paths,
            error: if errors.is_empty() {
                None
            } else {
                Some(format!("JWT misconfigured: {}", errors.join("; ")))
            },
        }
    }

    /// True when `path` needs no token.
    pub fn skips(&self, path: &str) -> bool {
        self.skip_paths.iter().any(|entry| {
            entry == path || (entry.len() > 1 && entry.ends_with('/') && path.starts_with(entry))
        })
    }
}

/// What the signature check can answer besides yes or no.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyError {
    /// The token names a key that is not known (a JWKS without its `kid`, a key of the wrong type): 401.
    UnknownKey(String),
    /// The key cannot be used (a PEM Web Crypto refuses, an unreachable JWKS): 503.
    Unavailable(String),
}

/// Checks a signature. The Worker's implementation uses Web Crypto; tests use a double.
#[allow(async_fn_in_trait)]
pub trait SignatureVerifier {
    /// True when `signature` is `alg`'s signature of `signing_input` (the token's first two parts, as
    /// sent) under the configured key for `alg` (with a JWKS, the key `kid`, or the only one that fits).
    async fn verify(
        &self,
        config: &JwtConfig,
        alg: JwtAlgorithm,
        kid: Option<&str>,
        signing_input: &[u8],
        signature: &[u8],
    ) -> Result<bool, VerifyError>;
}

/// A verified token's identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The highest role the token carries, if any.
    pub role: Option<Role>,
    /// The `sub` claim, stamped as `producerSub`.
    pub subject: Option<String>,
}

/// The result of [`authenticate`] for one request, handed to `precheck_with_jwt` / `handle_with_jwt`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JwtOutcome(Verdict);

#[derive(Debug, Clone, Default, PartialEq, Eq)]
enum Verdict {
    /// Never verified (plain `handle`): a token that needs JWT verification is refused (503).
    #[default]
    Unchecked,
    /// No JWT verification applies (JWT off, public or skipped route, no token, a static token).
    NotApplicable,
    /// Verified.
    Valid(Principal),
    /// Refused: the answer to send.
    Refused(HttpError),
}

impl JwtOutcome {
    /// The status the outcome refuses with (401 or 503), if it refuses.
    pub fn refusal_status(&self) -> Option<u16> {
        match &self.0 {
            Verdict::Refused(e) => Some(e.status),
            _ => None,
        }
    }

    /// The verified identity, if a token was verified.
    pub fn principal(&self) -> Option<&Principal> {
        match &self.0 {
            Verdict::Valid(p) => Some(p),
            _ => None,
        }
    }
}

/// True when `presented` is one of the static tokens (constant time per token).
fn is_static_token(auth: Option<&AuthConfig>, presented: &str) -> bool {
    auth.is_some_and(|a| auth::find_token(a, presented).is_some())
}

/// Whether a request needs JWT verification, and if so its token.
fn token_to_verify<'a>(
    config: &HttpConfig,
    method: &str,
    path: &str,
    authorization: Option<&'a str>,
) -> Option<&'a str> {
    let jwt = config.jwt.as_ref()?;
    let route = router::route(method, path).ok()?;
    if route == Route::Preflight || route.access() == Access::Public || jwt.skips(path) {
        return None;
    }
    let presented = authorization.map(auth::bearer).unwrap_or("");
    if presented.is_empty() || is_static_token(config.auth.as_ref(), presented) {
        return None;
    }
    Some(presented)
}

/// Verifies the request's JWT, if it needs one (see the module documentation). `now_ms`: the clock, ms
/// since the epoch. Never fails: a refusal is carried in the outcome.
pub async fn authenticate<V: SignatureVerifier>(
    config: &HttpConfig,
    verifier: &V,
    method: &str,
    path: &str,
    authorization: Option<&str>,
    now_ms: i64,
) -> JwtOutcome {
    let path = path.split_once('?').map_or(path, |(p, _)| p);
    let Some(token) = token_to_verify(config, method, path, authorization) else {
        return JwtOutcome(Verdict::NotApplicable);
    };
    let Some(jwt) = config.jwt.as_ref() else {
        return JwtOutcome(Verdict::NotApplicable);
    };
    JwtOutcome(
        match verify_token(jwt, verifier, token, now_ms / 1000).await {
            Ok(principal) => Verdict::Valid(principal),
            Err(e) => Verdict::Refused(e),
        },
    )
}

/// The whole check of one token: format, algorithm, signature, then claims.
pub(crate) async fn verify_token<V: SignatureVerifier>(
    config: &JwtConfig,
    verifier: &V,
    token: &str,
    now_s: i64,
) -> Result<Principal, HttpError> {
    if let Some(reason) = &config.error {
        return Err(unavailable(reason.clone()));
    }
    let parsed = parse(token)?;
    let alg = check_algorithm(config, &parsed.header)?;
    let kid = parsed.header.get("kid").and_then(Value::as_str);
    match verifier
        .verify(
            config,
            alg,
            kid,
            parsed.signing_input.as_bytes(),
            &parsed.signature,
        )
        .await
    {
        Ok(true) => {}
        Ok(false) => return Err(HttpError::unauthorized("Invalid token signature")),
        Err(VerifyError::UnknownKey(m)) => {
            return Err(HttpError::unauthorized(format!("Invalid token: {m}")))
        }
        Err(VerifyError::Unavailable(m)) => return Err(unavailable(m)),
    }
    check_claims(config, &parsed.claims, now_s)
}

fn unavailable(message: String) -> HttpError {
    HttpError {
        status: 503,
        message,
    }
}

/// A token split and decoded (nothing checked yet but its form).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ParsedToken {
    pub(crate) header: serde_json::Map<String, Value>,
    pub(crate) claims: serde_json::Map<String, Value>,
    /// `<header>.<payload>` as sent: what the signature covers.
    pub(crate) signing_input: String,
    pub(crate) signature: Vec<u8>,
}

fn malformed(what: &str) -> HttpError {
    HttpError::unauthorized(format!("Malformed token: {what}"))
}

/// Splits a compact JWS and decodes its parts.
pub(crate) fn parse(token: &str) -> Result<ParsedToken, HttpError> {
    let mut parts = token.split('.');
    let (Some(h), Some(p), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(malformed("expected three dot-separated parts"));
    };
    let object = |part: &str, what: &str| -> Result<serde_json::Map<String, Value>, HttpError> {
        let bytes = base64_decode(part, true)
            .ok_or_else(|| malformed(&format!("{what} is not base64url")))?;
        match std::str::from_utf8(&bytes).map(serde_json::from_str) {
            Ok(Ok(Value::Object(map))) => Ok(map),
            _ => Err(malformed(&format!("{what} is not a JSON object"))),
        }
    };
    let header = object(h, "header")?;
    let claims = object(p, "payload")?;
    let signature =
        base64_decode(s, true).ok_or_else(|| malformed("signature is not base64url"))?;
    Ok(ParsedToken {
        header,
        claims,
        signing_input: format!("{h}.{p}"),
        signature,
    })
}

/// The header's algorithm, if this broker accepts it. `none` (in any case) and every algorithm not
/// configured are refused; so is a header with `crit` (no extension is understood).
pub(crate) fn check_algorithm(
    config: &JwtConfig,
    header: &serde_json::Map<String, Value>,
) -> Result<JwtAlgorithm, HttpError> {
    let Some(name) = header.get("alg").and_then(Value::as_str) else {
        return Err(malformed("header has no alg"));
    };
    if name.eq_ignore_ascii_case("none") {
        return Err(HttpError::unauthorized(
            "Invalid token: unsigned tokens (alg none) are not accepted",
        ));
    }
    if header.contains_key("crit") {
        return Err(HttpError::unauthorized(
            "Invalid token: critical header extensions are not supported",
        ));
    }
    match JwtAlgorithm::from_jose(name) {
        Some(alg) if config.algorithms.contains(&alg) => Ok(alg),
        _ => Err(HttpError::unauthorized(format!(
            "Invalid token: algorithm {name} is not accepted"
        ))),
    }
}

/// `exp`, `nbf` (with the skew), `iss`, `aud`, then the role and `sub`.
pub(crate) fn check_claims(
    config: &JwtConfig,
    claims: &serde_json::Map<String, Value>,
    now_s: i64,
) -> Result<Principal, HttpError> {
    let skew = config.clock_skew_seconds.min(i64::MAX as u64) as i64;
    let time = |name: &str| -> Result<Option<i64>, HttpError> {
        match claims.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .filter(|f| f.is_finite())
                .map(|f| Some(f.floor() as i64))
                .ok_or_else(|| malformed(&format!("{name} is not a number"))),
        }
    };
    if let Some(exp) = time("exp")? {
        if now_s >= exp.saturating_add(skew) {
            return Err(HttpError::unauthorized("Token expired"));
        }
    }
    if let Some(nbf) = time("nbf")? {
        if now_s.saturating_add(skew) < nbf {
            return Err(HttpError::unauthorized("Token not yet valid"));
        }
    }
    if let Some(issuer) = &config.issuer {
        if claims.get("iss").and_then(Value::as_str) != Some(issuer.as_str()) {
            return Err(HttpError::unauthorized("Invalid token issuer"));
        }
    }
    if let Some(audience) = &config.audience {
        let ok = match claims.get("aud") {
            Some(Value::String(a)) => a == audience,
            Some(Value::Array(list)) => list.iter().any(|a| a.as_str() == Some(audience)),
            _ => false,
        };
        if !ok {
            return Err(HttpError::unauthorized("Invalid token audience"));
        }
    }
    let subject = match claims.get("sub") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(malformed("sub is not a string")),
    };
    let mut role = None;
    let mut consider = |value: Option<&Value>| match value {
        Some(Value::String(s)) => role = role.max(role_named(s)),
        Some(Value::Array(list)) => {
            for v in list {
                role = role.max(v.as_str().and_then(role_named));
            }
        }
        _ => {}
    };
    consider(claims.get(&config.roles_claim));
    consider(claims.get("roles"));
    Ok(Principal { role, subject })
}

/// A role by its contract name (`admin`, `read-write`, `read-only`; `_` for `-` and any case accepted).
fn role_named(name: &str) -> Option<Role> {
    match name.trim().to_ascii_lowercase().replace('_', "-").as_str() {
        "admin" => Some(Role::Admin),
        "read-write" | "readwrite" => Some(Role::ReadWrite),
        "read-only" | "readonly" => Some(Role::ReadOnly),
        _ => None,
    }
}

/// The route check with JWT: public and skipped paths pass; then a static token, then the verified JWT,
/// whose role must reach `access`.
pub(crate) fn check(
    config: &HttpConfig,
    access: Access,
    path: &str,
    authorization: Option<&str>,
    outcome: &JwtOutcome,
) -> Result<Caller, HttpError> {
    let Some(jwt) = config.jwt.as_ref() else {
        return auth::check(config.auth.as_ref(), access, authorization);
    };
    if access == Access::Public || jwt.skips(path) {
        return Ok(Caller::default());
    }
    let presented = authorization.map(auth::bearer).unwrap_or("");
    if !presented.is_empty() && is_static_token(config.auth.as_ref(), presented) {
        return auth::check(config.auth.as_ref(), access, authorization);
    }
    // A configuration that cannot verify anything says so (static tokens keep working).
    if let Some(reason) = &jwt.error {
        return Err(unavailable(reason.clone()));
    }
    if presented.is_empty() {
        return Err(HttpError::unauthorized("Authentication required"));
    }
    let principal = match &outcome.0 {
        Verdict::Valid(p) => p,
        Verdict::Refused(e) => return Err(e.clone()),
        Verdict::Unchecked | Verdict::NotApplicable => {
            return Err(unavailable(
                "JWT authentication is configured but this token was not verified".to_string(),
            ))
        }
    };
    let needed = match access {
        Access::Public => return Ok(Caller::default()),
        Access::ReadOnly => Role::ReadOnly,
        Access::ReadWrite => Role::ReadWrite,
        Access::Admin => Role::Admin,
    };
    if principal.role.is_none_or(|r| r < needed) {
        return Err(HttpError::forbidden("Insufficient permissions"));
    }
    Ok(Caller {
        subject: principal.subject.clone(),
        ..Caller::default()
    })
}

/// Base64 (standard or, with `url`, URL-safe; padding optional) to bytes; `None` on any other character.
pub(crate) fn base64_decode(text: &str, url: bool) -> Option<Vec<u8>> {
    let text = text.trim_end_matches('=');
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut acc: u32 = 0;
    let mut bits = 0u32;
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' if url => 62,
            b'_' if url => 63,
            b'+' if !url => 62,
            b'/' if !url => 63,
            _ => return None,
        } as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    // 6 leftover bits can't come from whole bytes.
    if bits >= 6 {
        return None;
    }
    Some(out)
}

/// Decodes a `-----BEGIN PUBLIC KEY-----` PEM (SubjectPublicKeyInfo) and tells RSA from Ed25519 by its
/// algorithm identifier. Literal `\n` sequences count as line breaks (one-line variables).
pub fn parse_public_key_pem(pem: &str) -> Result<PublicKey, String> {
    let pem = pem.replace("\\n", "\n");
    let pem = pem.trim();
    if pem.contains("BEGIN RSA PUBLIC KEY") {
        return Err(
            "a PKCS#1 'RSA PUBLIC KEY' PEM; use the SubjectPublicKeyInfo form ('BEGIN PUBLIC KEY')"
                .to_string(),
        );
    }
    let begin = "-----BEGIN PUBLIC KEY-----";
    let end = "-----END PUBLIC KEY-----";
    let (Some(start), Some(stop)) = (pem.find(begin), pem.find(end)) else {
        return Err("not a PEM public key (expected -----BEGIN PUBLIC KEY-----)".to_string());
    };
    let body: String = pem
        .get(start + begin.len()..stop)
        .ok_or("not a PEM public key")?
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let spki = base64_decode(&body, false).ok_or("the PEM body is not base64")?;
    const RSA_OID: &[u8] = &[
        0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01,
    ];
    const ED25519_OID: &[u8] = &[0x06, 0x03, 0x2b, 0x65, 0x70];
    let head = &spki[..spki.len().min(24)];
    let contains = |needle: &[u8]| head.windows(needle.len()).any(|w| w == needle);
    let kind = if spki.first() != Some(&0x30) {
        return Err("the PEM body is not a DER SubjectPublicKeyInfo".to_string());
    } else if contains(RSA_OID) {
        PublicKeyKind::Rsa
    } else if contains(ED25519_OID) {
        PublicKeyKind::Ed25519
    } else {
        return Err("the key is neither RSA nor Ed25519".to_string());
    };
    Ok(PublicKey { spki, kind })
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;
    use std::cell::Cell;

    fn b64url(bytes: &[u8]) -> String {
        const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let n = chunk.iter().fold(0u32, |a, b| (a << 8) | *b as u32) << (8 * (3 - chunk.len()));
            for i in 0..=chunk.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            }
        }
        out
    }

    /// A double: a signature is valid when it equals `SIG:<alg>:<signing input>`.
    struct Double {
        calls: Cell<u32>,
    }

    impl SignatureVerifier for Double {
        async fn verify(
            &self,
            _config: &JwtConfig,
            alg: JwtAlgorithm,
            kid: Option<&str>,
            signing_input: &[u8],
            signature: &[u8],
        ) -> Result<bool, VerifyError> {
            self.calls.set(self.calls.get() + 1);
            if kid == Some("unknown") {
                return Err(VerifyError::UnknownKey("no key unknown".into()));
            }
            let expected = [
                b"SIG:".as_slice(),
                alg.name().as_bytes(),
                b":",
                signing_input,
            ]
            .concat();
            Ok(signature == expected.as_slice())
        }
    }

    fn double() -> Double {
        Double {
            calls: Cell::new(0),
        }
    }

    fn token(header: Value, claims: Value) -> String {
        let h = b64url(header.to_string().as_bytes());
        let p = b64url(claims.to_string().as_bytes());
        let alg = header["alg"].as_str().unwrap_or("");
        let sig = b64url(format!("SIG:{alg}:{h}.{p}").as_bytes());
        format!("{h}.{p}.{sig}")
    }

    fn settings() -> JwtSettings {
        JwtSettings {
            secret: Some("s3cret".into()),
            issuer: Some("https://issuer".into()),
            audience: Some("queen".into()),
            ..JwtSettings::default()
        }
    }

    fn http(settings: &JwtSettings) -> HttpConfig {
        HttpConfig {
            jwt: Some(JwtConfig::from_settings(settings)),
            ..HttpConfig::default()
        }
    }

    const NOW: i64 = 1_800_000_000;

    fn good_claims() -> Value {
        serde_json::json!({"sub": "alice", "iss": "https://issuer", "aud": "queen", "exp": NOW + 60, "nbf": NOW - 5, "role": "read-write"})
    }

    fn run(config: &HttpConfig, token: &str, access: Access) -> Result<Caller, HttpError> {
        let d = double();
        let header = format!("Bearer {token}");
        let method = match access {
            Access::ReadWrite | Access::Admin => "POST",
            _ => "GET",
        };
        let path = match access {
            Access::ReadWrite => "/api/v1/push",
            Access::Admin => "/api/v1/stats/refresh",
            _ => "/api/v1/resources/queues",
        };
        let outcome = block_on(authenticate(
            config,
            &d,
            method,
            path,
            Some(&header),
            NOW * 1000,
        ));
        check(config, access, path, Some(&header), &outcome)
    }

    fn hs(claims: Value) -> String {
        token(serde_json::json!({"alg": "HS256", "typ": "JWT"}), claims)
    }

    #[test]
    fn valid_token_gives_subject_and_role() {
        let c = http(&settings());
        let caller = run(&c, &hs(good_claims()), Access::ReadWrite).unwrap();
        assert_eq!(caller.subject.as_deref(), Some("alice"));
        let e = run(&c, &hs(good_claims()), Access::Admin).unwrap_err();
        assert_eq!(
            (e.status, e.message.as_str()),
            (403, "Insufficient permissions")
        );
    }

    #[test]
    fn time_claims_with_skew() {
        let c = http(&settings());
        let mut claims = good_claims();
        claims["exp"] = (NOW - 10).into(); // within the 30 s skew
        assert!(run(&c, &hs(claims.clone()), Access::ReadOnly).is_ok());
        claims["exp"] = (NOW - 31).into();
        let e = run(&c, &hs(claims), Access::ReadOnly).unwrap_err();
        assert_eq!((e.status, e.message.as_str()), (401, "Token expired"));
        let mut claims = good_claims();
        claims["nbf"] = (NOW + 29).into();
        assert!(run(&c, &hs(claims.clone()), Access::ReadOnly).is_ok());
        claims["nbf"] = (NOW + 31).into();
        let e = run(&c, &hs(claims), Access::ReadOnly).unwrap_err();
        assert_eq!((e.status, e.message.as_str()), (401, "Token not yet valid"));
        let mut claims = good_claims();
        claims["exp"] = "soon".into();
        assert_eq!(
            run(&c, &hs(claims), Access::ReadOnly).unwrap_err().status,
            401
        );
        let c = http(&JwtSettings {
            clock_skew: Some("0".into()),
            ..settings()
        });
        let mut claims = good_claims();
        claims["exp"] = (NOW - 1).into();
        assert_eq!(
            run(&c, &hs(claims), Access::ReadOnly).unwrap_err().message,
            "Token expired"
        );
    }

    #[test]
    fn issuer_and_audience() {
        let c = http(&settings());
        let mut claims = good_claims();
        claims["iss"] = "https://other".into();
        let e = run(&c, &hs(claims), Access::ReadOnly).unwrap_err();
        assert_eq!(
            (e.status, e.message.as_str()),
            (401, "Invalid token issuer")
        );
        let mut claims = good_claims();
        claims["aud"] = "other".into();
        let e = run(&c, &hs(claims.clone()), Access::ReadOnly).unwrap_err();
        assert_eq!(
            (e.status, e.message.as_str()),
            (401, "Invalid token audience")
        );
        claims["aud"] = serde_json::json!(["x", "queen"]);
        assert!(run(&c, &hs(claims.clone()), Access::ReadOnly).is_ok());
        claims.as_object_mut().unwrap().remove("aud");
        assert_eq!(
            run(&c, &hs(claims), Access::ReadOnly).unwrap_err().message,
            "Invalid token audience"
        );
    }

    #[test]
    fn alg_none_and_unconfigured_algs_are_refused_before_the_signature() {
        let c = http(&settings());
        for alg in ["none", "None", "NONE"] {
            let h = b64url(format!(r#"{{"alg":"{alg}"}}"#).as_bytes());
            let p = b64url(good_claims().to_string().as_bytes());
            let d = double();
            let config = c.jwt.as_ref().unwrap();
            for t in [format!("{h}.{p}."), format!("{h}.{p}")] {
                let e = block_on(verify_token(config, &d, &t, NOW)).unwrap_err();
                assert_eq!(e.status, 401, "{t}");
            }
            let e = block_on(verify_token(config, &d, &format!("{h}.{p}."), NOW)).unwrap_err();
            assert!(e.message.contains("alg none"), "{}", e.message);
            assert_eq!(d.calls.get(), 0);
        }
        // Only a secret: RS256 and EdDSA are not accepted (no algorithm confusion with the secret).
        for alg in ["RS256", "EdDSA", "HS512", "ES256"] {
            let t = token(serde_json::json!({ "alg": alg }), good_claims());
            let e = run(&c, &t, Access::ReadOnly).unwrap_err();
            assert_eq!(e.status, 401);
            assert!(e.message.contains("not accepted"), "{}", e.message);
        }
        let t = token(
            serde_json::json!({"alg": "HS256", "crit": ["b64"]}),
            good_claims(),
        );
        assert_eq!(run(&c, &t, Access::ReadOnly).unwrap_err().status, 401);
    }

    #[test]
    fn wrong_signature_and_malformed() {
        let c = http(&settings());
        let t = hs(good_claims());
        let (rest, _) = t.rsplit_once('.').unwrap();
        let forged = format!("{rest}.{}", b64url(b"SIG:HS256:nope"));
        let e = run(&c, &forged, Access::ReadOnly).unwrap_err();
        assert_eq!(
            (e.status, e.message.as_str()),
            (401, "Invalid token signature")
        );
        for bad in [
            "abc",
            "a.b",
            "a.b.c.d",
            "!!.e30.",
            "e30.!!.",
            "bnVsbA.e30.",
            "e30.e30.@",
        ] {
            let e = run(&c, bad, Access::ReadOnly).unwrap_err();
            assert_eq!(e.status, 401, "{bad}");
            assert!(
                e.message.starts_with("Malformed token"),
                "{bad}: {}",
                e.message
            );
        }
        let t = token(
            serde_json::json!({"alg": "HS256", "kid": "unknown"}),
            good_claims(),
        );
        assert_eq!(run(&c, &t, Access::ReadOnly).unwrap_err().status, 401);
    }

    #[test]
    fn roles_from_claims() {
        let c = http(&JwtSettings {
            roles_claim: Some("perm".into()),
            ..settings()
        });
        let mut claims = good_claims();
        claims.as_object_mut().unwrap().remove("role");
        assert_eq!(
            run(&c, &hs(claims.clone()), Access::ReadOnly)
                .unwrap_err()
                .status,
            403
        );
        claims["perm"] = "admin".into();
        assert!(run(&c, &hs(claims.clone()), Access::Admin).is_ok());
        claims["perm"] = serde_json::json!(["read-only"]);
        assert!(run(&c, &hs(claims.clone()), Access::ReadOnly).is_ok());
        assert_eq!(
            run(&c, &hs(claims.clone()), Access::ReadWrite)
                .unwrap_err()
                .status,
            403
        );
        claims["roles"] = serde_json::json!(["read_write", "bogus"]);
        assert!(run(&c, &hs(claims.clone()), Access::ReadWrite).is_ok());
        // the configured claim replaces `role`
        claims = good_claims();
        assert_eq!(
            run(&c, &hs(claims), Access::ReadOnly).unwrap_err().status,
            403
        );
    }

    #[test]
    fn static_tokens_skip_paths_and_missing_tokens() {
        let mut c = http(&settings());
        c.auth = Some(AuthConfig {
            tokens: vec![crate::http::AuthToken::new("static-rw", Role::ReadWrite)],
        });
        let d = double();
        let o = block_on(authenticate(
            &c,
            &d,
            "POST",
            "/api/v1/push",
            Some("Bearer static-rw"),
            0,
        ));
        assert_eq!(d.calls.get(), 0);
        assert!(check(
            &c,
            Access::ReadWrite,
            "/api/v1/push",
            Some("Bearer static-rw"),
            &o
        )
        .is_ok());
        let o = JwtOutcome::default();
        let e = check(&c, Access::ReadOnly, "/api/v1/resources/queues", None, &o).unwrap_err();
        assert_eq!(
            (e.status, e.message.as_str()),
            (401, "Authentication required")
        );
        // A JWT that was never verified is refused, not let through.
        let t = format!("Bearer {}", hs(good_claims()));
        let e = check(
            &c,
            Access::ReadOnly,
            "/api/v1/resources/queues",
            Some(&t),
            &o,
        )
        .unwrap_err();
        assert_eq!(e.status, 503);
        let jwt = c.jwt.as_ref().unwrap();
        assert!(jwt.skips("/health") && jwt.skips("/metrics") && jwt.skips("/"));
        assert!(!jwt.skips("/api/v1/push"));
        let c2 = JwtConfig::from_settings(&JwtSettings {
            skip_paths: Some("/api/v1/status/, /, /x".into()),
            ..settings()
        });
        assert!(c2.skips("/api/v1/status/queues") && c2.skips("/x") && !c2.skips("/x/y"));
        assert!(!c2.skips("/api/v1/push"), "a bare / is no prefix");
    }

    #[test]
    fn misconfiguration_is_503_with_the_reason() {
        let cases = [
            (JwtSettings::default(), "no key"),
            (
                JwtSettings {
                    algorithm: Some("HS384".into()),
                    secret: Some("x".into()),
                    ..JwtSettings::default()
                },
                "HS384",
            ),
            (
                JwtSettings {
                    algorithm: Some("RS256".into()),
                    secret: Some("x".into()),
                    ..JwtSettings::default()
                },
                "needs JWT_PUBLIC_KEY",
            ),
            (
                JwtSettings {
                    public_key_pem: Some(
                        "-----BEGIN PUBLIC KEY-----\n!!!\n-----END PUBLIC KEY-----".into(),
                    ),
                    ..JwtSettings::default()
                },
                "JWT_PUBLIC_KEY",
            ),
            (
                JwtSettings {
                    algorithm: Some("HS256".into()),
                    ..JwtSettings::default()
                },
                "needs JWT_SECRET",
            ),
            (
                JwtSettings {
                    secret: Some("x".into()),
                    clock_skew: Some("soon".into()),
                    ..JwtSettings::default()
                },
                "JWT_CLOCK_SKEW",
            ),
        ];
        for (s, needle) in cases {
            let c = http(&s);
            let reason = c.jwt.as_ref().unwrap().error.clone().unwrap_or_default();
            assert!(reason.contains(needle), "{reason} lacks {needle}");
            let e = run(&c, &hs(good_claims()), Access::ReadOnly).unwrap_err();
            assert_eq!(e.status, 503, "{s:?}");
            assert!(e.message.contains(needle), "{}", e.message);
        }
    }

    #[test]
    fn pem_kinds() {
        // openssl genpkey -algorithm ed25519 | openssl pkey -pubout
        let ed = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=\n-----END PUBLIC KEY-----\n";
        let key = parse_public_key_pem(ed).unwrap();
        assert_eq!((key.kind, key.spki.len()), (PublicKeyKind::Ed25519, 44));
        assert_eq!(
            parse_public_key_pem(&ed.replace('\n', "\\n")).unwrap().kind,
            PublicKeyKind::Ed25519
        );
        let c = JwtConfig::from_settings(&JwtSettings {
            public_key_pem: Some(ed.into()),
            ..JwtSettings::default()
        });
        assert_eq!(
            (c.algorithms.as_slice(), c.error.as_deref()),
            ([JwtAlgorithm::EdDsa].as_slice(), None)
        );
        let c = JwtConfig::from_settings(&JwtSettings {
            algorithm: Some("RS256".into()),
            public_key_pem: Some(ed.into()),
            ..JwtSettings::default()
        });
        assert!(c.error.unwrap().contains("needs Rsa"));
        assert!(parse_public_key_pem(
            "-----BEGIN RSA PUBLIC KEY-----\nAA==\n-----END RSA PUBLIC KEY-----"
        )
        .is_err());
        assert!(parse_public_key_pem("hello").is_err());
    }

    #[test]
    fn base64() {
        assert_eq!(base64_decode("aGVsbG8", true).unwrap(), b"hello");
        assert_eq!(base64_decode("aGVsbG8=", false).unwrap(), b"hello");
        assert_eq!(base64_decode("-_8", true).unwrap(), [0xfb, 0xff]);
        assert!(base64_decode("-_8", false).is_none());
        assert!(base64_decode("a", true).is_none());
        assert_eq!(
            base64_decode(&b64url(&[1, 2, 3, 4, 5]), true).unwrap(),
            [1, 2, 3, 4, 5]
        );
    }
}

//! A request's authentication outcome when it can be had without awaiting ([`outcome_without_crypto`]):
//! when no JWT signature must be verified, which only Web Crypto can do, asynchronously. The entry Worker's
//! synchronous precheck (`crate::entry::entry_precheck`) decides with it.

use std::cell::Cell;

use futures::FutureExt;
use queen_edge::http::jwt::{
    authenticate, JwtAlgorithm, JwtConfig, JwtOutcome, SignatureVerifier, VerifyError,
};
use queen_edge::http::HttpConfig;

/// A [`SignatureVerifier`] that checks nothing: it notes that a signature had to be checked.
struct NoCrypto {
    asked: Cell<bool>,
}

impl SignatureVerifier for NoCrypto {
    async fn verify(
        &self,
        _config: &JwtConfig,
        _alg: JwtAlgorithm,
        _kid: Option<&str>,
        _signing_input: &[u8],
        _signature: &[u8],
    ) -> Result<bool, VerifyError> {
        self.asked.set(true);
        Ok(false)
    }
}

/// The outcome `authenticate` gives a request when it needs no signature checked (JWT off, a public or
/// skipped route, no token, a static token, a token refused before its signature: malformed, `alg`
/// refused): the same value, computed without awaiting. `None` when a signature must be verified (the
/// caller then takes the async path with Web Crypto).
pub fn outcome_without_crypto(
    http: &HttpConfig,
    method: &str,
    path: &str,
    authorization: Option<&str>,
) -> Option<JwtOutcome> {
    let verifier = NoCrypto {
        asked: Cell::new(false),
    };
    // The clock is read only after a signature is verified (the claims), which this verifier never
    // lets happen: the outcome of such a token is thrown away below.
    let outcome = authenticate(http, &verifier, method, path, authorization, 0).now_or_never()?;
    (!verifier.asked.get()).then_some(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;
    use queen_edge::http::jwt::JwtSettings;
    use queen_edge::http::{AuthConfig, AuthToken, Role};

    fn jwt_on() -> HttpConfig {
        HttpConfig {
            auth: Some(AuthConfig {
                tokens: vec![AuthToken::new("static-token", Role::Admin)],
            }),
            jwt: Some(JwtConfig::from_settings(&JwtSettings {
                algorithm: Some("HS256".into()),
                secret: Some("s3cret".into()),
                ..JwtSettings::default()
            })),
            ..HttpConfig::default()
        }
    }

    /// A token of the right form and algorithm (its signature is never checked here).
    const SIGNED: &str = "Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl";

    #[test]
    fn no_crypto_when_no_signature_is_checked() {
        let off = HttpConfig::default();
        let on = jwt_on();
        let queues = "/api/v1/resources/queues";
        let outcome = |config: &HttpConfig, auth: Option<&str>| {
            outcome_without_crypto(config, "GET", queues, auth)
        };
        // JWT off, a public route, no token, a static token: decided here, nothing refused.
        for decided in [
            outcome(&off, Some(SIGNED)),
            outcome(&on, None),
            outcome(&on, Some("Bearer static-token")),
            outcome_without_crypto(&on, "GET", "/health", Some(SIGNED)),
        ] {
            assert_eq!(
                decided.expect("decided without crypto").refusal_status(),
                None
            );
        }
        // A malformed token is refused before any signature: decided here too.
        assert_eq!(
            outcome(&on, Some("Bearer not-a-jwt"))
                .expect("decided without crypto")
                .refusal_status(),
            Some(401)
        );
        // A token whose signature must be verified goes to the async path.
        assert_eq!(outcome(&on, Some(SIGNED)), None);
    }
}

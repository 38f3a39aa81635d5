//! JWT signatures through Web Crypto (`crypto.subtle.importKey` + `verify`): HMAC SHA-256 (HS256),
//! RSASSA-PKCS1-v1_5 SHA-256 (RS256) and Ed25519 (EdDSA), all built into workerd.
//!
//! Everything else about a token (format, algorithm whitelist, `exp`/`nbf`/`iss`/`aud`, roles) is checked in
//! plain Rust by `queen_edge::http::jwt`; this module only implements its [`SignatureVerifier`].
//!
//! Keys come from `JWT_SECRET`, `JWT_PUBLIC_KEY` (SPKI PEM, decoded by the http layer) or `JWT_JWKS_URL`.
//! A JWKS document is fetched on first use and cached per isolate for [`JWKS_TTL_MS`]; a token whose `kid` is
//! not in the cached document triggers one refetch, at most once per [`JWKS_MIN_REFRESH_MS`] (so unknown
//! `kid`s cannot make the broker hammer the key server). A failed fetch falls back to the cached document if
//! there is one, else answers 503.

use std::cell::RefCell;

use queen_edge::http::jwt::{JwtAlgorithm, JwtConfig, SignatureVerifier, VerifyError};
use serde_json::Value;
use worker::js_sys::{self, Array, Function, Object, Promise, Reflect, Uint8Array};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::{Fetch, Url};

/// How long a fetched JWKS document is used before it is fetched again.
pub const JWKS_TTL_MS: f64 = 5.0 * 60.0 * 1000.0;
/// The shortest time between two fetches of the JWKS document (refreshes on an unknown `kid`).
pub const JWKS_MIN_REFRESH_MS: f64 = 5.0 * 1000.0;

struct JwksCache {
    url: String,
    keys: Vec<Value>,
    fetched_ms: f64,
}

thread_local! {
    static JWKS: RefCell<Option<JwksCache>> = const { RefCell::new(None) };
}

/// The Web Crypto verifier (stateless but for the per-isolate JWKS cache).
pub struct WebCryptoVerifier;

fn js_error(e: JsValue) -> String {
    if let Some(err) = e.dyn_ref::<js_sys::Error>() {
        return String::from(err.message());
    }
    e.as_string().unwrap_or_else(|| format!("{e:?}"))
}

/// `crypto.subtle.<method>(...args)`, awaited.
async fn subtle(method: &str, args: &[JsValue]) -> Result<JsValue, String> {
    let crypto = Reflect::get(&js_sys::global(), &"crypto".into()).map_err(js_error)?;
    let subtle = Reflect::get(&crypto, &"subtle".into()).map_err(js_error)?;
    let function: Function = Reflect::get(&subtle, &method.into())
        .map_err(js_error)?
        .dyn_into()
        .map_err(|_| format!("crypto.subtle.{method} is missing"))?;
    let array = Array::new();
    for a in args {
        array.push(a);
    }
    let promise: Promise = function
        .apply(&subtle, &array)
        .map_err(js_error)?
        .dyn_into()
        .map_err(|_| format!("crypto.subtle.{method} returned no promise"))?;
    JsFuture::from(promise).await.map_err(js_error)
}

fn object(pairs: &[(&str, &str)]) -> JsValue {
    let o = Object::new();
    for (k, v) in pairs {
        let _ = Reflect::set(&o, &(*k).into(), &(*v).into());
    }
    o.into()
}

/// The Web Crypto algorithm for importing and for verifying.
fn algorithm(alg: JwtAlgorithm) -> JsValue {
    match alg {
        JwtAlgorithm::Hs256 => object(&[("name", "HMAC"), ("hash", "SHA-256")]),
        JwtAlgorithm::Rs256 => object(&[("name", "RSASSA-PKCS1-v1_5"), ("hash", "SHA-256")]),
        JwtAlgorithm::EdDsa => object(&[("name", "Ed25519")]),
    }
}

async fn import(format: &str, data: JsValue, alg: JwtAlgorithm) -> Result<JsValue, String> {
    let usages = Array::of1(&"verify".into());
    subtle(
        "importKey",
        &[
            format.into(),
            data,
            algorithm(alg),
            JsValue::FALSE,
            usages.into(),
        ],
    )
    .await
}

/// True when the JWK can verify `alg`.
fn jwk_fits(jwk: &Value, alg: JwtAlgorithm) -> bool {
    let s = |k: &str| jwk.get(k).and_then(Value::as_str);
    let kind = match alg {
        JwtAlgorithm::Hs256 => s("kty") == Some("oct"),
        JwtAlgorithm::Rs256 => s("kty") == Some("RSA"),
        JwtAlgorithm::EdDsa => s("kty") == Some("OKP") && s("crv") == Some("Ed25519"),
    };
    kind && s("alg")
        .is_none_or(|a| a == alg.name() || (alg == JwtAlgorithm::EdDsa && a == "Ed25519"))
        && s("use").is_none_or(|u| u == "sig")
}

fn pick(keys: &[Value], alg: JwtAlgorithm, kid: Option<&str>) -> Option<Value> {
    keys.iter()
        .filter(|k| jwk_fits(k, alg))
        .find(|k| kid.is_none() || k.get("kid").and_then(Value::as_str) == kid)
        .cloned()
}

async fn fetch_jwks(url: &str) -> Result<Vec<Value>, String> {
    let parsed = Url::parse(url).map_err(|e| format!("JWT_JWKS_URL {url:?}: {e}"))?;
    let mut response = Fetch::Url(parsed)
        .send()
        .await
        .map_err(|e| format!("JWKS fetch from {url} failed: {e}"))?;
    if response.status_code() != 200 {
        return Err(format!(
            "JWKS fetch from {url} answered {}",
            response.status_code()
        ));
    }
    let text = response
        .text()
        .await
        .map_err(|e| format!("JWKS fetch from {url} failed: {e}"))?;
    let document: Value =
        serde_json::from_str(&text).map_err(|e| format!("JWKS from {url} is not JSON: {e}"))?;
    match document.get("keys") {
        Some(Value::Array(keys)) => Ok(keys.clone()),
        _ => Err(format!("JWKS from {url} has no keys array")),
    }
}

/// The JWK for `alg`/`kid` from the cached document, fetching it when missing, stale, or (bounded) when
/// the `kid` is unknown.
async fn jwks_key(url: &str, alg: JwtAlgorithm, kid: Option<&str>) -> Result<Value, VerifyError> {
    let now = js_sys::Date::now();
    let cached = JWKS.with(|c| {
        c.borrow()
            .as_ref()
            .filter(|c| c.url == url)
            .map(|c| (pick(&c.keys, alg, kid), now - c.fetched_ms, c.keys.clone()))
    });
    let (found, age) = match &cached {
        Some((found, age, _)) => (found.clone(), *age),
        None => (None, f64::INFINITY),
    };
    let fresh = age < JWKS_TTL_MS;
    if let (Some(key), true) = (&found, fresh) {
        return Ok(key.clone());
    }
    if fresh && age < JWKS_MIN_REFRESH_MS {
        // Unknown kid, but the document was fetched moments ago: no refetch.
        return Err(unknown(kid));
    }
    match fetch_jwks(url).await {
        Ok(keys) => {
            let key = pick(&keys, alg, kid);
            JWKS.with(|c| {
                *c.borrow_mut() = Some(JwksCache {
                    url: url.to_string(),
                    keys,
                    fetched_ms: now,
                })
            });
            key.ok_or_else(|| unknown(kid))
        }
        Err(message) => match (found, cached) {
            // Stale but present: better than nothing while the key server is down.
            (Some(key), _) => Ok(key),
            (None, Some(_)) => Err(unknown(kid)),
            (None, None) => Err(VerifyError::Unavailable(message)),
        },
    }
}

fn unknown(kid: Option<&str>) -> VerifyError {
    VerifyError::UnknownKey(match kid {
        Some(kid) => format!("no key {kid:?} for this algorithm in the JWKS"),
        None => "no key for this algorithm in the JWKS".to_string(),
    })
}

impl SignatureVerifier for WebCryptoVerifier {
    async fn verify(
        &self,
        config: &JwtConfig,
        alg: JwtAlgorithm,
        kid: Option<&str>,
        signing_input: &[u8],
        signature: &[u8],
    ) -> Result<bool, VerifyError> {
        let key = match alg {
            JwtAlgorithm::Hs256 => {
                let Some(secret) = &config.secret else {
                    return Err(VerifyError::Unavailable("JWT_SECRET is not set".into()));
                };
                import("raw", Uint8Array::from(secret.as_slice()).into(), alg)
                    .await
                    .map_err(|e| VerifyError::Unavailable(format!("JWT_SECRET: {e}")))?
            }
            _ => match (&config.public_key, &config.jwks_url) {
                (Some(pem), _)
                    if (alg == JwtAlgorithm::Rs256)
                        == (pem.kind == queen_edge::http::jwt::PublicKeyKind::Rsa) =>
                {
                    import("spki", Uint8Array::from(pem.spki.as_slice()).into(), alg)
                        .await
                        .map_err(|e| {
                            VerifyError::Unavailable(format!(
                                "JWT misconfigured: JWT_PUBLIC_KEY could not be imported: {e}"
                            ))
                        })?
                }
                (_, Some(url)) => {
                    let jwk = jwks_key(url, alg, kid).await?;
                    let data = js_sys::JSON::parse(&jwk.to_string())
                        .map_err(|e| VerifyError::UnknownKey(js_error(e)))?;
                    import("jwk", data, alg).await.map_err(|e| {
                        VerifyError::UnknownKey(format!("JWKS key cannot be used: {e}"))
                    })?
                }
                _ => {
                    return Err(VerifyError::UnknownKey(format!(
                        "no key configured for {}",
                        alg.name()
                    )))
                }
            },
        };
        let verdict = subtle(
            "verify",
            &[
                algorithm(alg),
                key,
                Uint8Array::from(signature).into(),
                Uint8Array::from(signing_input).into(),
            ],
        )
        .await;
        // A signature Web Crypto cannot even read (a wrong length) is a wrong signature.
        Ok(verdict.ok().and_then(|v| v.as_bool()).unwrap_or(false))
    }
}

//! Queen's envelope with AES-256-GCM done in Rust's reach: the platform's Web Crypto on wasm32 (the
//! Worker; `webcrypto.rs`) and RustCrypto's `aes-gcm` natively (tests, tools; `native.rs`). The npm module
//! does not use this: its JS does the same with Web Crypto (`js/local.js`, `src/bindings/cipher.rs`), which
//! costs less download than these lines in the wasm.
//!
//! The envelope (contract §2.4): `{"encrypted": b64(ciphertext), "iv": b64(16 random bytes), "authTag":
//! b64(16-byte tag)}`, no associated data; the plaintext is the payload's JSON text as it was pushed.

#[cfg(not(target_arch = "wasm32"))]
use super::native as platform;
#[cfg(target_arch = "wasm32")]
use super::webcrypto as platform;

use super::{base64, Cipher};
use futures::future::LocalBoxFuture;
use serde_json::{Map, Value};

/// Bytes of the random IV (Queen's choice; Web Crypto and `aes-gcm` both accept it).
pub(super) const IV_BYTES: usize = 16;
/// Bytes of the GCM authentication tag.
pub(super) const TAG_BYTES: usize = 16;

/// One encrypted payload, as bytes.
#[derive(Clone)]
pub(super) struct Sealed {
    pub(super) iv: [u8; IV_BYTES],
    pub(super) ciphertext: Vec<u8>,
    pub(super) auth_tag: [u8; TAG_BYTES],
}

/// AES-256-GCM under one key, writing and reading Queen's envelope.
pub(super) struct AesCipher(platform::Key);

impl AesCipher {
    /// The cipher of a raw 32-byte key.
    pub(super) fn from_bytes(bytes: &[u8; 32]) -> Result<Self, String> {
        platform::Key::from_bytes(bytes).map(AesCipher)
    }
}

/// The sealed bytes of an envelope, if `payload` is one (base64 fields, 16-byte IV and tag).
fn sealed(payload: &Value) -> Option<Sealed> {
    let field = |k: &str| payload.get(k)?.as_str().and_then(base64::decode);
    Some(Sealed {
        ciphertext: field("encrypted")?,
        iv: field("iv")?.try_into().ok()?,
        auth_tag: field("authTag")?.try_into().ok()?,
    })
}

impl Cipher for AesCipher {
    fn seal_all<'a>(
        &'a self,
        plaintexts: Vec<&'a str>,
    ) -> LocalBoxFuture<'a, Result<Vec<Value>, String>> {
        Box::pin(async move {
            let plaintexts: Vec<Vec<u8>> =
                plaintexts.iter().map(|p| p.as_bytes().to_vec()).collect();
            let sealed = self.0.seal_all(&plaintexts).await?;
            Ok(sealed
                .iter()
                .map(|s| {
                    let mut envelope = Map::new();
                    envelope.insert("encrypted".into(), base64::encode(&s.ciphertext).into());
                    envelope.insert("iv".into(), base64::encode(&s.iv).into());
                    envelope.insert("authTag".into(), base64::encode(&s.auth_tag).into());
                    Value::Object(envelope)
                })
                .collect())
        })
    }

    fn open_all<'a>(
        &'a self,
        envelopes: Vec<&'a Value>,
    ) -> LocalBoxFuture<'a, Vec<Option<String>>> {
        Box::pin(async move {
            // Only well-formed envelopes go to the cipher; the others stay `None`.
            let parsed: Vec<Option<Sealed>> = envelopes.iter().map(|e| sealed(e)).collect();
            let wellformed: Vec<Sealed> = parsed.iter().flatten().cloned().collect();
            let mut opened = self.0.open_all(&wellformed).await.into_iter();
            parsed
                .iter()
                .map(|p| {
                    p.as_ref()?;
                    String::from_utf8(opened.next().flatten()?).ok()
                })
                .collect()
        })
    }
}

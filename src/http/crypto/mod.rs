//! Encryption at rest (wire contract §2.4), done at the HTTP boundary so that the core, its segments and
//! the store only ever hold ciphertext for a queue with `encryptionEnabled`.
//!
//! - **Push** (and a transaction's pushes): each payload of an encrypted queue is replaced, before the
//!   command reaches the engine, by the envelope `{"encrypted", "iv", "authTag"}` (base64 fields;
//!   AES-256-GCM, a random 16-byte IV per payload, a 16-byte tag; the plaintext is the payload's compact
//!   JSON). Which queues are encrypted is read from the broker just before the push; a queue the push
//!   creates is never encrypted (push-created queues have `encryptionEnabled: false`).
//! - **Out** (pop replies, the DLQ listing, the message browser): every payload shaped as an envelope is
//!   decrypted, whatever the queue's current flag says, so turning the flag off later does not strand
//!   what was stored under it. One that does not decrypt (wrong key, altered, or a user payload that
//!   only looks like an envelope) is returned as stored (contract §2.4). A dead letter and its replay
//!   keep the envelope verbatim: the core copies payloads, it never reads them.
//! - **No key**: configuring `encryptionEnabled: true` is refused (400) and so is pushing to a queue that
//!   has it (409), instead of the contract's plaintext-with-a-warning fallback (docs/decisions.md).
//!
//! The cipher is the platform's Web Crypto on wasm32 (`webcrypto.rs`: the Worker and the npm module
//! carry no AES code) and RustCrypto's `aes-gcm` natively (`native.rs`: tests and tools).

mod base64;
#[cfg(not(target_arch = "wasm32"))]
mod native;
#[cfg(target_arch = "wasm32")]
mod webcrypto;

#[cfg(not(target_arch = "wasm32"))]
use native as aes;
#[cfg(target_arch = "wasm32")]
use webcrypto as aes;

use super::error::HttpError;
use super::HttpConfig;
use crate::core::api::{ConfigureRequest, PushItem};
use crate::engine::{Engine, Host};
use crate::store::Store;
use futures::future::join_all;
use serde_json::{Map, Value};
use std::rc::Rc;

/// Bytes of the random IV (Queen's choice; Web Crypto and `aes-gcm` both accept it).
const IV_BYTES: usize = 16;
/// Bytes of the GCM authentication tag.
const TAG_BYTES: usize = 16;

/// The error of a queue that asks for encryption on a broker that has no key.
const NO_KEY: &str = "this broker has no encryption key (set the QUEEN_ENCRYPTION_KEY secret on the \
                      Worker, or pass encryptionKey to Queen.open in the browser), so it cannot keep \
                      payloads encrypted at rest";

/// One encrypted payload, as bytes.
struct Sealed {
    iv: [u8; IV_BYTES],
    ciphertext: Vec<u8>,
    auth_tag: [u8; TAG_BYTES],
}

/// The broker's AES-256-GCM key (`QUEEN_ENCRYPTION_KEY`, or `Queen.open({ encryptionKey })`).
///
/// Clones share the key. `Debug` never shows it; two keys are equal only when one is a clone of the
/// other.
#[derive(Clone)]
pub struct EncryptionKey(Rc<aes::Key>);

impl EncryptionKey {
    /// A key from 64 hex characters (32 bytes; surrounding whitespace is ignored). The error says what
    /// is wrong without repeating the key.
    pub fn from_hex(hex: &str) -> Result<Self, String> {
        let hex = hex.trim();
        if hex.len() != 64 {
            return Err(format!(
                "the encryption key must be 64 hex characters (32 bytes), got {} characters",
                hex.chars().count()
            ));
        }
        let mut bytes = [0u8; 32];
        for (i, pair) in hex.as_bytes().chunks(2).enumerate() {
            let digit = |c: u8| (c as char).to_digit(16);
            match (digit(pair[0]), digit(pair[1])) {
                (Some(hi), Some(lo)) => bytes[i] = (hi * 16 + lo) as u8,
                _ => {
                    return Err(
                        "the encryption key must be 64 hex characters (0-9, a-f), and it has \
                         another character"
                            .to_string(),
                    )
                }
            }
        }
        let key = aes::Key::from_bytes(&bytes);
        bytes.fill(0);
        Ok(EncryptionKey(Rc::new(key?)))
    }

    /// A key from a Web Crypto `CryptoKey` (AES-GCM, 256 bits, usages `encrypt` and `decrypt`); it may
    /// be non-extractable.
    #[cfg(target_arch = "wasm32")]
    pub fn from_crypto_key(key: wasm_bindgen::JsValue) -> Result<Self, String> {
        Ok(EncryptionKey(Rc::new(aes::Key::from_crypto_key(key)?)))
    }

    /// Encrypts a payload into its stored envelope.
    async fn seal(&self, payload: &Value) -> Result<Value, HttpError> {
        // Serializing a `Value` cannot fail (its map keys are strings).
        let plaintext = serde_json::to_vec(payload).unwrap_or_default();
        let sealed = self
            .0
            .seal(&plaintext)
            .await
            .map_err(|e| HttpError::internal(format!("encryption failed: {e}")))?;
        let mut envelope = Map::new();
        envelope.insert(
            "encrypted".into(),
            base64::encode(&sealed.ciphertext).into(),
        );
        envelope.insert("iv".into(), base64::encode(&sealed.iv).into());
        envelope.insert("authTag".into(), base64::encode(&sealed.auth_tag).into());
        Ok(Value::Object(envelope))
    }

    /// Decrypts `payload` in place when it is an envelope this key opens; leaves it as it is otherwise.
    async fn open(&self, payload: &mut Value) {
        let Some(sealed) = envelope(payload) else {
            return;
        };
        if let Some(plain) = self.0.open(&sealed).await {
            if let Ok(value) = serde_json::from_slice(&plain) {
                *payload = value;
            }
        }
    }
}

impl std::fmt::Debug for EncryptionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EncryptionKey(AES-256-GCM, redacted)")
    }
}

impl PartialEq for EncryptionKey {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for EncryptionKey {}

/// The sealed bytes of an envelope: an object with exactly the string fields `encrypted`, `iv` and
/// `authTag`, in base64, with a 16-byte IV and tag. Anything else is not an envelope.
fn envelope(payload: &Value) -> Option<Sealed> {
    let Value::Object(map) = payload else {
        return None;
    };
    if map.len() != 3 {
        return None;
    }
    let field = |k: &str| map.get(k)?.as_str().and_then(base64::decode);
    Some(Sealed {
        ciphertext: field("encrypted")?,
        iv: field("iv")?.try_into().ok()?,
        auth_tag: field("authTag")?.try_into().ok()?,
    })
}

/// True when `payload` is stored as an envelope (the message browser's `isEncrypted`).
pub(crate) fn is_envelope(payload: &Value) -> bool {
    envelope(payload).is_some()
}

/// Refuses `encryptionEnabled: true` on a broker without a key (400; nothing changes).
pub(crate) fn check_configure(
    config: &HttpConfig,
    request: &ConfigureRequest,
) -> Result<(), HttpError> {
    if request.options.encryption_enabled == Some(true) && config.encryption.is_none() {
        return Err(HttpError::bad_request(format!(
            "encryptionEnabled is true, but {NO_KEY}; queue '{}' was not configured",
            request.queue
        )));
    }
    Ok(())
}

/// Replaces the payload of every item bound for an encrypted queue by its envelope. Refuses the whole
/// push (409, nothing stored) when such a queue exists and the broker has no key.
pub(crate) async fn seal_items<S: Store, H: Host>(
    engine: &Engine<S, H>,
    config: &HttpConfig,
    items: &mut [PushItem],
) -> Result<(), HttpError> {
    let encrypted: Vec<bool> = engine.read(|b, _| {
        items
            .iter()
            .map(|i| {
                b.queue_options(&i.queue)
                    .is_some_and(|o| o.encryption_enabled)
            })
            .collect()
    });
    let Some(first) = encrypted.iter().position(|e| *e) else {
        return Ok(());
    };
    let Some(key) = &config.encryption else {
        return Err(HttpError::conflict(format!(
            "queue '{}' has encryptionEnabled, but {NO_KEY}; nothing was pushed",
            items[first].queue
        )));
    };
    let targets = items
        .iter_mut()
        .zip(encrypted)
        .filter(|(_, e)| *e)
        .map(|(item, _)| item);
    let sealed = join_all(targets.map(|item| async move {
        item.payload = key.seal(&item.payload).await?;
        Ok::<(), HttpError>(())
    }))
    .await;
    sealed.into_iter().collect()
}

/// Decrypts, in place, every payload among `payloads` that is an envelope (nothing without a key).
pub(crate) async fn open_payloads<'a>(
    config: &HttpConfig,
    payloads: impl Iterator<Item = &'a mut Value>,
) {
    let Some(key) = &config.encryption else {
        return;
    };
    join_all(payloads.map(|p| key.open(p))).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;
    use serde_json::json;

    const KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    #[test]
    fn bad_keys_say_what_is_wrong() {
        let short = EncryptionKey::from_hex("abcd").unwrap_err();
        assert!(
            short.contains("64 hex characters") && short.contains("got 4"),
            "{short}"
        );
        let not_hex = EncryptionKey::from_hex(&KEY.replace('0', "g")).unwrap_err();
        assert!(not_hex.contains("another character"), "{not_hex}");
        assert!(EncryptionKey::from_hex(&format!(" {} \n", KEY.to_uppercase())).is_ok());
    }

    #[test]
    fn debug_hides_the_key() {
        let key = EncryptionKey::from_hex(KEY).unwrap();
        assert_eq!(format!("{key:?}"), "EncryptionKey(AES-256-GCM, redacted)");
        assert_eq!(key, key.clone());
        assert_ne!(key, EncryptionKey::from_hex(KEY).unwrap());
    }

    #[test]
    fn seal_then_open_round_trips_with_fresh_ivs() {
        let key = EncryptionKey::from_hex(KEY).unwrap();
        let payload = json!({"card": "4111 1111", "n": [1, 2.5, null], "s": "é€"});
        let a = block_on(key.seal(&payload)).unwrap();
        let b = block_on(key.seal(&payload)).unwrap();
        assert_ne!(a, b, "a fresh IV per payload");
        assert!(is_envelope(&a));
        assert!(!a.to_string().contains("4111"));
        let mut opened = a.clone();
        block_on(key.open(&mut opened));
        assert_eq!(opened, payload);
    }

    #[test]
    fn what_does_not_open_is_returned_as_stored() {
        let key = EncryptionKey::from_hex(KEY).unwrap();
        let other = EncryptionKey::from_hex(&KEY.replace('1', "2")).unwrap();
        let sealed = block_on(other.seal(&json!("secret"))).unwrap();
        let mut v = sealed.clone();
        block_on(key.open(&mut v));
        assert_eq!(v, sealed, "wrong key");
        let mut tampered = sealed.clone();
        tampered["encrypted"] = json!(base64::encode(b"xxxxxxxx"));
        let mut v = tampered.clone();
        block_on(other.open(&mut v));
        assert_eq!(v, tampered, "altered ciphertext");
        for look_alike in [
            json!({"encrypted": "aGk=", "iv": "aGk=", "authTag": "aGk="}),
            json!({"encrypted": 1, "iv": "x", "authTag": "y"}),
            json!({"encrypted": "", "iv": "", "authTag": "", "more": 1}),
            json!("plain"),
        ] {
            let mut v = look_alike.clone();
            block_on(key.open(&mut v));
            assert_eq!(v, look_alike);
        }
    }

    /// The envelope Queen's Node server writes (crypto.createCipheriv('aes-256-gcm', key, iv16)) for
    /// `{"a":1}` under KEY with IV 00..0f: computed once with Node and pinned here.
    #[test]
    fn opens_an_envelope_made_by_node_crypto() {
        let key = EncryptionKey::from_hex(KEY).unwrap();
        let mut v = json!({
            "encrypted": NODE_CIPHERTEXT,
            "iv": "AAECAwQFBgcICQoLDA0ODw==",
            "authTag": NODE_TAG,
        });
        block_on(key.open(&mut v));
        assert_eq!(v, json!({"a": 1}));
    }

    const NODE_CIPHERTEXT: &str = "HE7BVAPVNw==";
    const NODE_TAG: &str = "vqgzN8OZhionBeEqrUWh5Q==";
}

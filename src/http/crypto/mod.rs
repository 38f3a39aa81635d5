//! Encryption at rest (wire contract §2.4), done at the HTTP boundary so that the core, its segments and
//! the store only ever hold ciphertext for a queue with `encryptionEnabled`.
//!
//! - **Push** (and a transaction's pushes): each payload of an encrypted queue is replaced, before the
//!   command reaches the engine, by Queen's envelope `{"encrypted", "iv", "authTag"}` (base64 fields;
//!   AES-256-GCM, a random 16-byte IV per payload, a 16-byte tag; the plaintext is the payload's JSON
//!   text as it was pushed). Which queues are encrypted is read from the broker just before the push; a queue the push
//!   creates is never encrypted (push-created queues have `encryptionEnabled: false`).
//! - **Out** (pop replies, the DLQ listing, the message browser): every payload shaped as an envelope is
//!   decrypted, whatever the queue's current flag says, so turning the flag off later does not strand
//!   what was stored under it. One that does not decrypt (wrong key, altered, or a user payload that
//!   only looks like an envelope) is returned as stored (contract §2.4). A dead letter and its replay
//!   keep the envelope verbatim: the core copies payloads, it never reads them.
//! - **No key**: configuring `encryptionEnabled: true` is refused (400) and so is pushing to a queue that
//!   has it (409), instead of the contract's plaintext-with-a-warning fallback (docs/decisions.md).
//!
//! The [`Cipher`] behind an [`EncryptionKey`]: `envelope.rs` on the platform's Web Crypto in the Worker
//! (`webcrypto.rs`: no AES code in the wasm) and on RustCrypto's `aes-gcm` natively (`native.rs`: tests,
//! tools); in the npm module, the module's JS on the browser's Web Crypto (`src/bindings/cipher.rs`), because
//! that costs the least download. A request's payloads are sealed or opened as one batch.

mod base64;
mod envelope;
#[cfg(not(target_arch = "wasm32"))]
mod native;
#[cfg(target_arch = "wasm32")]
mod webcrypto;

use super::error::HttpError;
use super::HttpConfig;
use crate::core::api::{ConfigureRequest, Payload, PushItem};
use crate::engine::{Engine, Host};
use crate::store::Store;
use futures::future::LocalBoxFuture;
use serde_json::Value;
use std::rc::Rc;

/// The error of a queue that asks for encryption on a broker that has no key.
const NO_KEY: &str = "this broker has no encryption key (set the QUEEN_ENCRYPTION_KEY secret on the \
                      Worker, or pass encryptionKey to Queen.open in every tab of the browser), so it \
                      cannot keep payloads encrypted at rest";

/// AES-256-GCM with Queen's envelope (contract §2.4), under one key.
///
/// The plaintext is a payload's JSON text exactly as it was pushed (its UTF-8 bytes), and opening gives
/// that text back: no payload goes through a `serde_json::Value` on the way, which would round numbers
/// beyond `f64`, reorder or merge object keys, and refuse valid JSON a `Value` cannot hold (a number
/// beyond `f64`'s range, a lone surrogate escape, deep nesting).
pub trait Cipher {
    /// The envelope of each payload text, each sealed under its own random 16-byte IV.
    fn seal_all<'a>(
        &'a self,
        plaintexts: Vec<&'a str>,
    ) -> LocalBoxFuture<'a, Result<Vec<Value>, String>>;

    /// The payload text in each envelope, or `None` where it does not open (another key, altered
    /// bytes, malformed fields, a plaintext that is not UTF-8).
    fn open_all<'a>(&'a self, envelopes: Vec<&'a Value>)
        -> LocalBoxFuture<'a, Vec<Option<String>>>;
}

/// The broker's encryption key (`QUEEN_ENCRYPTION_KEY`, or `Queen.open({ encryptionKey })`), as the
/// [`Cipher`] that uses it.
///
/// Clones share the key. `Debug` never shows it; two keys are equal only when one is a clone of the
/// other.
#[derive(Clone)]
pub struct EncryptionKey(Rc<dyn Cipher>);

impl EncryptionKey {
    /// A key from 64 hex characters (32 bytes; surrounding whitespace is ignored), used through
    /// `envelope.rs`. The error says what is wrong without repeating the key.
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
        let cipher = envelope::AesCipher::from_bytes(&bytes);
        bytes.fill(0);
        Ok(Self::from_cipher(cipher?))
    }

    /// A key that is some other [`Cipher`] (the npm module's, which lives in JS).
    pub fn from_cipher(cipher: impl Cipher + 'static) -> Self {
        EncryptionKey(Rc::new(cipher))
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

pub(crate) use crate::core::api::envelope_of;

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
///
/// Reads the flags now; the returned future (boxed and not generic, so its code exists once in the
/// module rather than inlined into every route that awaits it) does the rest.
pub(crate) fn seal_items<'a, S: Store, H: Host>(
    engine: &Engine<S, H>,
    config: &'a HttpConfig,
    items: Vec<&'a mut PushItem>,
) -> LocalBoxFuture<'a, Result<(), HttpError>> {
    let encrypted: Vec<bool> = engine.read(|b, _| {
        items
            .iter()
            .map(|i| {
                b.queue_options(&i.queue)
                    .is_some_and(|o| o.encryption_enabled)
            })
            .collect()
    });
    Box::pin(seal_marked(config, items, encrypted))
}

async fn seal_marked(
    config: &HttpConfig,
    items: Vec<&mut PushItem>,
    encrypted: Vec<bool>,
) -> Result<(), HttpError> {
    let mut targets: Vec<&mut PushItem> = items
        .into_iter()
        .zip(encrypted)
        .filter_map(|(item, e)| e.then_some(item))
        .collect();
    let Some(first) = targets.first() else {
        return Ok(());
    };
    let Some(key) = &config.encryption else {
        return Err(HttpError::conflict(format!(
            "queue '{}' has encryptionEnabled, but {NO_KEY}; nothing was pushed",
            first.queue
        )));
    };
    // The payloads' own texts, as pushed (the trait's documentation says why not a `Value`).
    let plain: Vec<&str> = targets.iter().map(|item| item.payload.get()).collect();
    let sealed = key
        .0
        .seal_all(plain)
        .await
        .map_err(|e| HttpError::internal(format!("encryption failed: {e}")))?;
    for (item, envelope) in targets.iter_mut().zip(sealed) {
        item.payload = Payload::from(envelope);
    }
    Ok(())
}

/// Decrypts, in place, every payload among `payloads` that is an envelope (nothing without a key).
/// True when it opened one: a route that changes state (so its answer may be recorded, `engine::Recording`)
/// must then tell the engine ([`Engine::note_opened_payloads`]), so no record keeps the plaintext.
pub(crate) fn open_payloads<'a>(
    config: &'a HttpConfig,
    payloads: Vec<&'a mut Payload>,
) -> LocalBoxFuture<'a, bool> {
    Box::pin(async move {
        let Some(key) = &config.encryption else {
            return false;
        };
        let (mut targets, envelopes): (Vec<&mut Payload>, Vec<Value>) = payloads
            .into_iter()
            .filter_map(|p| envelope_of(p).map(|e| (p, e)))
            .unzip();
        if targets.is_empty() {
            return false;
        }
        let opened = key.0.open_all(envelopes.iter().collect()).await;
        let mut any = false;
        for (payload, plain) in targets.iter_mut().zip(opened) {
            // A plaintext that is not one JSON value (no sealer of ours or Queen's writes one) leaves
            // the envelope as stored, as one that does not open does.
            if let Some(plain) = plain.and_then(|text| Payload::from_json(text).ok()) {
                **payload = plain;
                any = true;
            }
        }
        any
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::api::is_envelope;
    use futures::executor::block_on;
    use serde_json::json;

    fn seal(key: &EncryptionKey, payload: &Value) -> Value {
        seal_text(key, &payload.to_string())
    }

    fn seal_text(key: &EncryptionKey, text: &str) -> Value {
        block_on(key.0.seal_all(vec![text])).unwrap().remove(0)
    }

    /// What `open_payloads` does to one payload.
    fn open(key: &EncryptionKey, payload: &mut Value) {
        if let Some(text) = open_text(key, payload) {
            *payload = serde_json::from_str(&text).unwrap();
        }
    }

    /// The plaintext of an envelope, as `open_payloads` puts it in the payload's place.
    fn open_text(key: &EncryptionKey, payload: &Value) -> Option<String> {
        if !is_envelope(payload) {
            return None;
        }
        block_on(key.0.open_all(vec![payload])).remove(0)
    }

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
        let a = seal(&key, &payload);
        let b = seal(&key, &payload);
        assert_ne!(a, b, "a fresh IV per payload");
        assert!(is_envelope(&a));
        assert!(!a.to_string().contains("4111"));
        let mut opened = a.clone();
        open(&key, &mut opened);
        assert_eq!(opened, payload);
    }

    #[test]
    fn what_does_not_open_is_returned_as_stored() {
        let key = EncryptionKey::from_hex(KEY).unwrap();
        let other = EncryptionKey::from_hex(&KEY.replace('1', "2")).unwrap();
        let sealed = seal(&other, &json!("secret"));
        let mut v = sealed.clone();
        open(&key, &mut v);
        assert_eq!(v, sealed, "wrong key");
        let mut tampered = sealed.clone();
        tampered["encrypted"] = json!("eHh4eHh4eHg=");
        let mut v = tampered.clone();
        open(&other, &mut v);
        assert_eq!(v, tampered, "altered ciphertext");
        for look_alike in [
            json!({"encrypted": "aGk=", "iv": "aGk=", "authTag": "aGk="}),
            json!({"encrypted": 1, "iv": "x", "authTag": "y"}),
            json!({"encrypted": "", "iv": "", "authTag": "", "more": 1}),
            json!("plain"),
        ] {
            let mut v = look_alike.clone();
            open(&key, &mut v);
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
        open(&key, &mut v);
        assert_eq!(v, json!({"a": 1}));
    }

    /// The plaintext is the pushed text itself: numbers beyond `f64`, key order, repeated keys, lone
    /// surrogate escapes and deep nesting all come back byte for byte (a `Value` on the way changed the
    /// first three and refused the last two).
    #[test]
    fn the_plaintext_is_the_pushed_text_byte_for_byte() {
        let key = EncryptionKey::from_hex(KEY).unwrap();
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        for text in [
            r#"[12345678901234567890123, 1e2, -0, {"b":1,"a":2}, {"a":1,"a":2}]"#,
            r#"{"x":1E400}"#,
            r#""\ud800""#,
            deep.as_str(),
        ] {
            let sealed = seal_text(&key, text);
            assert!(is_envelope(&sealed));
            assert_eq!(open_text(&key, &sealed).as_deref(), Some(text));
        }
    }

    const NODE_CIPHERTEXT: &str = "HE7BVAPVNw==";
    const NODE_TAG: &str = "vqgzN8OZhionBeEqrUWh5Q==";
}

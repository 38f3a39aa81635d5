//! AES-256-GCM through the platform's Web Crypto (`crypto.subtle`), in the Worker (workerd) and in the
//! browser: no cipher code in the wasm, only calls. A 16-byte IV from `crypto.getRandomValues`, a
//! 128-bit tag, no associated data; Web Crypto returns ciphertext and tag as one buffer (tag last).

use super::{Sealed, IV_BYTES, TAG_BYTES};
use js_sys::{Object, Promise, Reflect, Uint8Array};
use std::cell::RefCell;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

#[wasm_bindgen]
extern "C" {
    /// `crypto.subtle`.
    type Subtle;
    #[wasm_bindgen(method, catch, js_name = importKey)]
    fn import_key(
        this: &Subtle,
        format: &str,
        key: &[u8],
        algorithm: &str,
        extractable: bool,
        usages: &js_sys::Array,
    ) -> Result<Promise, JsValue>;
    #[wasm_bindgen(method, catch)]
    fn encrypt(
        this: &Subtle,
        algorithm: &Object,
        key: &JsValue,
        data: &[u8],
    ) -> Result<Promise, JsValue>;
    #[wasm_bindgen(method, catch)]
    fn decrypt(
        this: &Subtle,
        algorithm: &Object,
        key: &JsValue,
        data: &[u8],
    ) -> Result<Promise, JsValue>;

    /// `crypto`.
    type Crypto;
    #[wasm_bindgen(method, getter)]
    fn subtle(this: &Crypto) -> JsValue;
    #[wasm_bindgen(method, catch, js_name = getRandomValues)]
    fn get_random_values(this: &Crypto, array: &mut [u8]) -> Result<JsValue, JsValue>;
}

/// A key held by Web Crypto: the `CryptoKey` itself, or the pending `importKey` that makes it.
pub(super) struct Key {
    crypto: Crypto,
    subtle: Subtle,
    key: RefCell<Result<JsValue, Promise>>,
}

/// `crypto` and `crypto.subtle` of this global, or why there are none.
fn platform() -> Result<(Crypto, Subtle), String> {
    let crypto = Reflect::get(&js_sys::global(), &"crypto".into())
        .ok()
        .filter(|c| c.is_object())
        .ok_or("this JavaScript environment has no Web Crypto (globalThis.crypto)")?;
    let crypto: Crypto = crypto.unchecked_into();
    let subtle = crypto.subtle();
    if !subtle.is_object() {
        return Err(
            "crypto.subtle is not available here (browsers offer it only in secure \
                    contexts: https or localhost)"
                .into(),
        );
    }
    Ok((crypto, subtle.unchecked_into()))
}

impl Key {
    /// The key of 32 raw bytes, imported as a non-extractable AES-GCM key (the import finishes in the
    /// background; the first seal or open waits for it).
    pub(super) fn from_bytes(bytes: &[u8; 32]) -> Result<Key, String> {
        let (crypto, subtle) = platform()?;
        let usages = js_sys::Array::of2(&"encrypt".into(), &"decrypt".into());
        let pending = subtle
            .import_key("raw", bytes, "AES-GCM", false, &usages)
            .map_err(|e| format!("crypto.subtle.importKey failed: {}", describe(&e)))?;
        Ok(Key {
            crypto,
            subtle,
            key: RefCell::new(Err(pending)),
        })
    }

    /// An existing `CryptoKey` (checked: AES-GCM, 256 bits, usable to encrypt and decrypt).
    pub(super) fn from_crypto_key(key: JsValue) -> Result<Key, String> {
        let (crypto, subtle) = platform()?;
        let field = |o: &JsValue, k: &str| Reflect::get(o, &k.into()).unwrap_or(JsValue::UNDEFINED);
        let algorithm = field(&key, "algorithm");
        let name = field(&algorithm, "name").as_string();
        let bits = field(&algorithm, "length").as_f64();
        if name.as_deref() != Some("AES-GCM") || bits != Some(256.0) {
            return Err(format!(
                "encryptionKey must be a 64-character hex string or an AES-GCM CryptoKey of 256 bits \
                 (got algorithm {}, {} bits)",
                name.unwrap_or_else(|| "none".into()),
                bits.map_or("no".into(), |b| b.to_string())
            ));
        }
        let usages = field(&key, "usages");
        for usage in ["encrypt", "decrypt"] {
            let has = js_sys::Array::is_array(&usages)
                && usages
                    .unchecked_ref::<js_sys::Array>()
                    .includes(&usage.into(), 0);
            if !has {
                return Err(format!(
                    "the encryptionKey CryptoKey must allow '{usage}' (its usages: {})",
                    describe(&usages)
                ));
            }
        }
        Ok(Key {
            crypto,
            subtle,
            key: RefCell::new(Ok(key)),
        })
    }

    /// The `CryptoKey`, waiting for the import the first time.
    async fn key(&self) -> Result<JsValue, String> {
        let pending = match &*self.key.borrow() {
            Ok(key) => return Ok(key.clone()),
            Err(pending) => pending.clone(),
        };
        let key = JsFuture::from(pending)
            .await
            .map_err(|e| format!("crypto.subtle.importKey failed: {}", describe(&e)))?;
        *self.key.borrow_mut() = Ok(key.clone());
        Ok(key)
    }

    fn algorithm(iv: &[u8; IV_BYTES]) -> Object {
        let algorithm = Object::new();
        let _ = Reflect::set(&algorithm, &"name".into(), &"AES-GCM".into());
        let _ = Reflect::set(&algorithm, &"iv".into(), &Uint8Array::from(&iv[..]));
        algorithm
    }

    /// Encrypts `plaintext` under a fresh random IV.
    pub(super) async fn seal(&self, plaintext: &[u8]) -> Result<Sealed, String> {
        let key = self.key().await?;
        let mut iv = [0u8; IV_BYTES];
        self.crypto
            .get_random_values(&mut iv)
            .map_err(|e| format!("crypto.getRandomValues failed: {}", describe(&e)))?;
        let call = self
            .subtle
            .encrypt(&Self::algorithm(&iv), &key, plaintext)
            .map_err(|e| describe(&e));
        let out = match call {
            Ok(promise) => JsFuture::from(promise).await.map_err(|e| describe(&e)),
            Err(e) => Err(e),
        }
        .map_err(|e| format!("crypto.subtle.encrypt failed: {e}"))?;
        let mut bytes = Uint8Array::new(&out).to_vec();
        if bytes.len() < TAG_BYTES {
            return Err("crypto.subtle.encrypt returned less than a tag".into());
        }
        let mut auth_tag = [0u8; TAG_BYTES];
        auth_tag.copy_from_slice(&bytes[bytes.len() - TAG_BYTES..]);
        bytes.truncate(bytes.len() - TAG_BYTES);
        Ok(Sealed {
            iv,
            ciphertext: bytes,
            auth_tag,
        })
    }

    /// Decrypts and authenticates; `None` when the tag does not match (wrong key or altered bytes).
    pub(super) async fn open(&self, sealed: &Sealed) -> Option<Vec<u8>> {
        let key = self.key().await.ok()?;
        let mut data = Vec::with_capacity(sealed.ciphertext.len() + TAG_BYTES);
        data.extend_from_slice(&sealed.ciphertext);
        data.extend_from_slice(&sealed.auth_tag);
        let promise = self
            .subtle
            .decrypt(&Self::algorithm(&sealed.iv), &key, &data)
            .ok()?;
        let out = JsFuture::from(promise).await.ok()?;
        Some(Uint8Array::new(&out).to_vec())
    }
}

/// A thrown JS value as text (its `message` when it has one).
fn describe(e: &JsValue) -> String {
    Reflect::get(e, &"message".into())
        .ok()
        .and_then(|m| m.as_string())
        .or_else(|| e.as_string())
        .unwrap_or_else(|| "unknown error".into())
}

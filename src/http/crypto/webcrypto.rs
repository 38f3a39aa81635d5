//! AES-256-GCM through the platform's Web Crypto (`crypto.subtle`), for the Worker (workerd): no cipher
//! code in the wasm, only calls. A 16-byte IV from `crypto.getRandomValues`, a
//! 128-bit tag, no associated data; Web Crypto returns ciphertext and tag as one buffer (tag last).

use super::envelope::{Sealed, IV_BYTES, TAG_BYTES};
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

    /// Encrypts each plaintext under its own fresh random IV. The `encrypt` calls all start before the
    /// first answer is awaited (one `Promise.all`), so a batch costs one round trip, not one per message.
    pub(super) async fn seal_all(&self, plaintexts: &[Vec<u8>]) -> Result<Vec<Sealed>, String> {
        let key = self.key().await?;
        let calls = js_sys::Array::new();
        let mut ivs = Vec::with_capacity(plaintexts.len());
        for plaintext in plaintexts {
            let mut iv = [0u8; IV_BYTES];
            self.crypto
                .get_random_values(&mut iv)
                .map_err(|e| format!("crypto.getRandomValues failed: {}", describe(&e)))?;
            let call = self
                .subtle
                .encrypt(&Self::algorithm(&iv), &key, plaintext)
                .map_err(|e| format!("crypto.subtle.encrypt failed: {}", describe(&e)))?;
            calls.push(&call);
            ivs.push(iv);
        }
        let outs = JsFuture::from(Promise::all(&calls))
            .await
            .map_err(|e| format!("crypto.subtle.encrypt failed: {}", describe(&e)))?;
        let outs: js_sys::Array = outs.unchecked_into();
        ivs.into_iter()
            .zip(outs.iter())
            .map(|(iv, out)| {
                let mut bytes = Uint8Array::new(&out).to_vec();
                let Some(split) = bytes.len().checked_sub(TAG_BYTES) else {
                    return Err("crypto.subtle.encrypt returned less than a tag".to_string());
                };
                let mut auth_tag = [0u8; TAG_BYTES];
                auth_tag.copy_from_slice(&bytes[split..]);
                bytes.truncate(split);
                Ok(Sealed {
                    iv,
                    ciphertext: bytes,
                    auth_tag,
                })
            })
            .collect()
    }

    /// Decrypts and authenticates each envelope; `None` for one whose tag does not match (wrong key or
    /// altered bytes). All `decrypt` calls run at once (one `Promise.allSettled`).
    pub(super) async fn open_all(&self, sealed: &[Sealed]) -> Vec<Option<Vec<u8>>> {
        let Ok(key) = self.key().await else {
            return sealed.iter().map(|_| None).collect();
        };
        let calls = js_sys::Array::new();
        for s in sealed {
            let mut data = Vec::with_capacity(s.ciphertext.len() + TAG_BYTES);
            data.extend_from_slice(&s.ciphertext);
            data.extend_from_slice(&s.auth_tag);
            let call = self
                .subtle
                .decrypt(&Self::algorithm(&s.iv), &key, &data)
                .unwrap_or_else(|e| Promise::reject(&e));
            calls.push(&call);
        }
        let Ok(settled) = JsFuture::from(Promise::all_settled(&calls)).await else {
            return sealed.iter().map(|_| None).collect();
        };
        let settled: js_sys::Array = settled.unchecked_into();
        settled
            .iter()
            .map(|outcome| {
                let value = Reflect::get(&outcome, &"value".into()).ok()?;
                value
                    .is_instance_of::<js_sys::ArrayBuffer>()
                    .then(|| Uint8Array::new(&value).to_vec())
            })
            .collect()
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

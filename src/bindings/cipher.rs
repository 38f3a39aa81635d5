//! The npm module's [`Cipher`]: AES-256-GCM with Queen's envelope, done by the module's JS on the
//! browser's Web Crypto (`cipher()` in `js/local.js`, which makes one from the `encryptionKey` of
//! `Queen.open`). The wasm only hands payload texts over and takes texts back (it parses the envelopes
//! `seal` makes; the HTTP layer checks each opened plaintext is one JSON value): the same
//! work in Rust (`src/http/crypto/envelope.rs`, what the Worker uses) costs several KB more download.
//!
//! The JS object has two methods, each taking an array of JSON texts and resolving to an array of the
//! same length: `seal(plaintexts)` to envelope texts, `open(envelopes)` to plaintext texts or `null`
//! where one does not open.

use crate::core::json_text::value_text;
use crate::http::Cipher;
use futures::future::LocalBoxFuture;
use js_sys::{Array, Function, Promise, Reflect};
use serde_json::Value;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

/// The JS cipher's two functions, `seal` and `open`.
#[derive(Clone)]
pub struct JsCipher {
    seal: Function,
    open: Function,
}

impl JsCipher {
    /// The cipher object's `seal` and `open` functions, if it has them.
    pub fn new(cipher: &JsValue) -> Option<Self> {
        let f = |name: &str| Reflect::get(cipher, &name.into()).ok()?.dyn_into().ok();
        Some(JsCipher {
            seal: f("seal")?,
            open: f("open")?,
        })
    }
}

impl JsCipher {
    /// `text` sealed in one envelope (its JSON text), or `None` when the cipher refused: for what holds
    /// opened payloads but is no payload itself (a recorded answer, `answer.rs`).
    pub async fn seal_text(&self, text: &str) -> Option<String> {
        call(&self.seal, vec![text.to_owned()])
            .await
            .ok()?
            .get(0)
            .as_string()
    }

    /// The text in an envelope [`JsCipher::seal_text`] made, or `None` when it does not open.
    pub async fn open_text(&self, envelope: &str) -> Option<String> {
        call(&self.open, vec![envelope.to_owned()])
            .await
            .ok()?
            .get(0)
            .as_string()
    }
}

/// Calls `f` with the texts and waits for its array of answers.
async fn call(f: &Function, texts: Vec<String>) -> Result<Array, String> {
    let args: Array = texts.into_iter().map(JsValue::from).collect();
    let answers = match f.call1(&JsValue::NULL, &args) {
        Ok(promise) => JsFuture::from(Promise::from(promise)).await,
        Err(e) => Err(e),
    };
    answers
        .map(JsCast::unchecked_into)
        .map_err(|_| "the browser's Web Crypto refused".to_string())
}

impl Cipher for JsCipher {
    fn seal_all<'a>(
        &'a self,
        plaintexts: Vec<&'a str>,
    ) -> LocalBoxFuture<'a, Result<Vec<Value>, String>> {
        Box::pin(async move {
            let count = plaintexts.len();
            let texts = plaintexts.into_iter().map(str::to_owned).collect();
            let sealed = call(&self.seal, texts).await?;
            if sealed.length() as usize != count {
                return Err("the cipher answered a different number of envelopes".into());
            }
            // `from_str`, the module's one JSON reader (over `str`; a second, over bytes, would grow
            // the module).
            sealed
                .iter()
                .map(|e| {
                    e.as_string()
                        .and_then(|text| serde_json::from_str(&text).ok())
                        .ok_or_else(|| "the cipher answered something that is not JSON".into())
                })
                .collect()
        })
    }

    fn open_all<'a>(
        &'a self,
        envelopes: Vec<&'a Value>,
    ) -> LocalBoxFuture<'a, Vec<Option<String>>> {
        Box::pin(async move {
            let texts = envelopes.iter().copied().map(value_text).collect();
            match call(&self.open, texts).await {
                Ok(answers) => answers.iter().map(|a| a.as_string()).collect(),
                Err(_) => Vec::new(),
            }
        })
    }
}

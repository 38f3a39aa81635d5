//! Which key sealed this database's encrypted payloads.
//!
//! Every tab and worker of a page must open its broker with the same `encryptionKey`: the writer seals and
//! opens payloads with its own key, so a writer with another key would seal new payloads under it and hand
//! out the ones it cannot open as stored (wire contract §2.4), leaving a queue under two keys. So the first
//! broker opened with a key writes a text sealed with it in `meta` ([`KEY_CHECK`]), and a broker whose key
//! does not open that text is refused before it takes over. A broker opened without a key is let in, as
//! the contract has it (payloads as stored; pushes to encrypted queues refused).

use super::cipher::JsCipher;
use super::{js_error, store_js_error};
use crate::store::idb::IdbStore;
use crate::store::ChangeSet;
use wasm_bindgen::JsValue;

/// The `meta` key of the sealed text.
const KEY_CHECK: &str = "key-check";

/// Whether no key was marked yet (then [`seal`] marks `cipher`'s once this broker is the writer). Errors
/// with code `invalid` when the marked key is not `cipher`'s.
pub async fn unset(store: &IdbStore, cipher: &JsCipher) -> Result<bool, JsValue> {
    let stored = store
        .read_meta(KEY_CHECK)
        .await
        .map_err(|e| store_js_error(&e))?;
    let Some(envelope) = stored.as_string() else {
        return Ok(true);
    };
    match cipher.open_text(&envelope).await {
        Some(_) => Ok(false),
        None => Err(js_error(
            "invalid",
            "encryptionKey is not this database's key",
        )),
    }
}

/// Marks `cipher`'s key as the one this database's payloads are sealed with (not when the cipher refuses:
/// the next keyed open tries again).
pub async fn seal(store: &IdbStore, cipher: &JsCipher) -> Result<(), JsValue> {
    let Some(envelope) = cipher.seal_text("0").await else {
        return Ok(());
    };
    store
        .commit_recording(
            &ChangeSet::default(),
            &[(KEY_CHECK.into(), envelope.into())],
            "",
        )
        .await
        .map_err(|e| store_js_error(&e))
}

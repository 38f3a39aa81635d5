//! A JS string as UTF-8 bytes in wasm memory, written there by the platform's `TextEncoder.encodeInto`.
//!
//! wasm-bindgen's own conversion of a string (`JsValue::as_string`) copies an ASCII text one character at a
//! time in a JavaScript loop; a request body is mostly ASCII JSON, tens of kilobytes for a large batch, and
//! `encodeInto` writes it in one native call (docs/decisions.md, "The browser's batch-100 push, session 13").

use js_sys::{JsString, Uint8Array};
use wasm_bindgen::prelude::*;

#[wasm_bindgen]
extern "C" {
    /// The platform's `TextEncoder`.
    type TextEncoder;

    #[wasm_bindgen(constructor)]
    fn new() -> TextEncoder;

    /// Writes as much of `source` as fits into `dest`; whole characters only.
    #[wasm_bindgen(method, js_name = encodeInto)]
    fn encode_into(this: &TextEncoder, source: &JsString, dest: &Uint8Array) -> EncodeResult;

    /// `{read, written}` of `encodeInto`.
    type EncodeResult;

    /// The UTF-16 code units of the source that were written.
    #[wasm_bindgen(method, getter)]
    fn read(this: &EncodeResult) -> u32;
}

/// Writes JS strings into wasm memory as UTF-8.
pub struct Utf8Writer {
    encoder: TextEncoder,
}

impl Utf8Writer {
    pub fn new() -> Self {
        Utf8Writer {
            encoder: TextEncoder::new(),
        }
    }

    /// The UTF-8 bytes of `text` (a lone surrogate becomes U+FFFD, as with any `TextEncoder`).
    ///
    /// Written with room for one byte per UTF-16 code unit: when every unit was read, each took one byte
    /// (a unit takes at least one), so the text was ASCII and the bytes are exactly `units` long. Any other
    /// text is converted again by wasm-bindgen (`JsValue::as_string`).
    pub fn bytes_of(&self, text: &JsString) -> Vec<u8> {
        let units = text.length();
        let mut out: Vec<u8> = Vec::with_capacity(units as usize);
        // SAFETY: the view covers the vector's capacity and is used only by `encodeInto`, which runs no
        // wasm code (nothing can allocate and move or grow the memory under it); the length is set only
        // when all `units` bytes were written.
        unsafe {
            let view = Uint8Array::view_mut_raw(out.as_mut_ptr(), units as usize);
            if self.encoder.encode_into(text, &view).read() == units {
                out.set_len(units as usize);
                return out;
            }
        }
        String::from(text).into_bytes()
    }
}

//! The JS shape of an answer, `{ status, headers, body }`, made from JS values a broker makes once: the
//! three keys, and the headers object of the last header list it answered with.
//!
//! Almost every answer carries the same headers (the content type and the CORS headers, module
//! `crate::http`), so each answer's `headers` is a copy (`Object.assign`) of one object made for that list,
//! instead of a name and a value made from Rust text and set one by one: every answer still gets an
//! object of its own, which its receiver may change. A different list makes a new object, kept in its
//! place.

use crate::http::HttpResponse;
use js_sys::{Object, Reflect, Uint8Array};
use std::cell::RefCell;
use wasm_bindgen::JsValue;

/// What [`AnswerObjects::make`] reuses.
pub struct AnswerObjects {
    status: JsValue,
    headers: JsValue,
    body: JsValue,
    /// The last header list answered with, and its headers object.
    last_headers: RefCell<Option<(Vec<(String, String)>, Object)>>,
}

impl AnswerObjects {
    pub fn new() -> Self {
        AnswerObjects {
            status: "status".into(),
            headers: "headers".into(),
            body: "body".into(),
            last_headers: RefCell::new(None),
        }
    }

    /// `response` as `{ status, headers, body }`: `headers` an object of its own, `body` a `Uint8Array`
    /// (a copy of the bytes).
    pub fn make(&self, response: &HttpResponse) -> Result<JsValue, JsValue> {
        let out = Object::new();
        Reflect::set(&out, &self.status, &JsValue::from(response.status))?;
        let headers = Object::assign(&Object::new(), &self.headers_of(&response.headers)?);
        Reflect::set(&out, &self.headers, &headers)?;
        let body = Uint8Array::from(response.body.as_slice());
        Reflect::set(&out, &self.body, &body)?;
        Ok(out.into())
    }

    /// The headers object of `list`: the kept one when `list` is the last list, else a new one (kept).
    fn headers_of(&self, list: &[(String, String)]) -> Result<Object, JsValue> {
        let mut last = self.last_headers.borrow_mut();
        if let Some((_, object)) = last.as_ref().filter(|(kept, _)| kept.as_slice() == list) {
            return Ok(object.clone());
        }
        let object = Object::new();
        for (name, value) in list {
            Reflect::set(&object, &name.as_str().into(), &value.as_str().into())?;
        }
        *last = Some((list.to_vec(), object.clone()));
        Ok(object)
    }
}

//! Payloads: the raw JSON text of a message, kept as it came.

use super::*;

/// A message payload: one JSON value of any type (`null` included), kept as JSON text from the request
/// to the segment to the reply. The broker never looks inside a payload: the HTTP layer's parser checks
/// that it is valid JSON and captures its text, segments embed that text as it is, and replies embed it
/// again, so no payload is ever built into a `serde_json::Value` tree on the hot path (docs/decisions.md,
/// "Payloads as raw JSON text").
///
/// The text is the value as the client sent it (whitespace inside it included; none around it).
/// Equality is equality of that text: `{"a":1}` and `{"a": 1}` are different payloads here, although
/// they are the same JSON value. This is the one type to wrap or change if payloads are ever
/// transformed on their way in or out (encryption, for one).
///
/// A payload read back from a segment is a part of the segment's JSON text ([`Payload::in_text`]),
/// shared with the cached segment and every reply that delivers it: no allocation per message on the
/// way from the store to the reply. A pushed payload is likewise a part of the request body's text until
/// its segment is written, and then a part of the one text the cache keeps of that segment's messages
/// (`segment::encode_shared`). [`Payload::detached`] copies it out for what is kept long.
#[derive(Clone)]
pub struct Payload(Text);

/// Where a payload's text is.
#[derive(Clone)]
enum Text {
    /// Its own allocation, checked by serde_json when it was captured.
    Own(Box<RawValue>),
    /// A part of a larger JSON text (a segment's, a request body's), checked by serde_json to be one
    /// JSON value when that text was read.
    InText(SharedStr),
}

impl Payload {
    /// The JSON `null` payload (a push item without one).
    pub fn null() -> Self {
        Payload(Text::Own(RawValue::NULL.to_owned()))
    }

    /// The empty object `{}` (a transaction's push item without a payload).
    pub fn empty_object() -> Self {
        Payload::from_value(&Value::Object(serde_json::Map::new()))
    }

    /// A payload holding `value` as compact JSON text.
    pub fn from_value(value: &Value) -> Self {
        // A `Value` always serializes (its map keys are strings).
        Payload(Text::Own(
            serde_json::value::to_raw_value(value)
                .unwrap_or_else(|e| panic!("a JSON value serializes: {e}")),
        ))
    }

    /// `text` as a payload: fails unless it is exactly one JSON value (whitespace around it is dropped).
    pub fn from_json(text: String) -> Result<Self, serde_json::Error> {
        RawValue::from_string(text).map(|raw| Payload(Text::Own(raw)))
    }

    /// A payload that is a part of a larger text: `text` must be exactly one JSON value, which its reader
    /// checked with serde_json (the segment reader, the push body's parser).
    pub(crate) fn in_text(text: SharedStr) -> Self {
        Payload(Text::InText(text))
    }

    /// True when the payload is a part of a larger text ([`Self::in_text`]).
    #[cfg(test)]
    pub(crate) fn is_in_text(&self) -> bool {
        matches!(self.0, Text::InText(_))
    }

    /// The larger text the payload is a part of ([`Self::in_text`]), if it is one.
    pub(crate) fn shared(&self) -> Option<&SharedStr> {
        match &self.0 {
            Text::InText(text) => Some(text),
            Text::Own(_) => None,
        }
    }

    /// The same payload in its own allocation, not holding the text it was read from (for what memory
    /// keeps longer than a reply: a dead letter).
    pub fn detached(self) -> Self {
        match self.0 {
            Text::Own(_) => self,
            Text::InText(text) => Payload(Text::Own(own_raw(&text))),
        }
    }

    /// The payload's JSON text.
    pub fn get(&self) -> &str {
        match &self.0 {
            Text::Own(raw) => raw.get(),
            Text::InText(text) => text,
        }
    }

    /// Length of the JSON text in bytes (what the payload adds to a segment before compression).
    pub fn len(&self) -> usize {
        self.get().len()
    }

    /// Always false: a JSON value's text is never empty (`null` is four bytes).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The payload parsed into a `serde_json::Value` tree (for tests and cold paths). Fails only where
    /// valid JSON text does not fit a `Value`: a number beyond `f64`'s range, a lone surrogate escape.
    pub fn to_value(&self) -> Result<Value, serde_json::Error> {
        serde_json::from_str(self.get())
    }

    /// The raw JSON value.
    pub fn into_raw(self) -> Box<RawValue> {
        match self.0 {
            Text::Own(raw) => raw,
            Text::InText(text) => own_raw(&text),
        }
    }
}

/// A payload's text from a larger text as a `RawValue` of its own. Its reader checked that the text
/// is one JSON value, so this parse (serde_json's, the only way to make a `RawValue`) cannot fail.
fn own_raw(text: &str) -> Box<RawValue> {
    first_raw_value(text)
        .filter(|(_, end)| *end == text.len())
        .expect("a payload in a larger text was checked when that text was read")
        .0
        .to_owned()
}

/// The JSON value at the start of `text`, checked by serde_json, and the offset right after it (what
/// the segment reader captures payloads with).
pub(crate) fn first_raw_value(text: &str) -> Option<(&RawValue, usize)> {
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<&RawValue>();
    let raw = values.next()?.ok()?;
    Some((raw, values.byte_offset()))
}

impl From<Box<RawValue>> for Payload {
    fn from(raw: Box<RawValue>) -> Self {
        Payload(Text::Own(raw))
    }
}

/// Convenience for tests, benchmarks and cold paths: serializes the tree to compact text.
impl From<Value> for Payload {
    fn from(value: Value) -> Self {
        Payload::from_value(&value)
    }
}

impl PartialEq for Payload {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl Eq for Payload {}

impl std::fmt::Debug for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.get())
    }
}

impl std::fmt::Display for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.get())
    }
}

/// Writes the text as it is (it is one valid JSON value).
impl serde::Serialize for Payload {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Text::Own(raw) => raw.serialize(serializer),
            // serde_json writes raw text only from a `RawValue`: made from the text, checked again
            // (cold paths: a decoded segment written again, a view of a stored message).
            Text::InText(text) => own_raw(text).serialize(serializer),
        }
    }
}

/// Captures one JSON value's text (serde_json deserializers only, which check it is valid JSON).
impl<'de> serde::Deserialize<'de> for Payload {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Box::<RawValue>::deserialize(deserializer).map(|raw| Payload(Text::Own(raw)))
    }
}

/// True when `payload` has the envelope's shape of encryption at rest (`http::crypto`): an object of
/// exactly the string fields `encrypted`, `iv` and `authTag` (the message browser's `isEncrypted`; the
/// cipher checks the rest).
pub fn is_envelope(payload: &Value) -> bool {
    let Value::Object(map) = payload else {
        return false;
    };
    map.len() == 3
        && ["encrypted", "iv", "authTag"]
            .iter()
            .all(|k| map.get(*k).is_some_and(Value::is_string))
}

/// The envelope's tag key as it appears in JSON text.
const AUTH_TAG_KEY: &[u8] = b"\"authTag\"";

/// The envelope a raw payload holds, if it is one. Payloads are raw JSON text: only an object that
/// mentions `authTag` is parsed to look closer, so plain payloads cost a scan, not a parse.
#[inline(never)]
pub fn envelope_of(payload: &Payload) -> Option<Value> {
    let text = payload.get();
    // A byte-window search: `str::contains` with a text pattern would bring the standard library's
    // substring searcher into the browser module for this one use.
    let mentions_tag = text
        .as_bytes()
        .windows(AUTH_TAG_KEY.len())
        .any(|w| w == AUTH_TAG_KEY);
    if !text.trim_start().starts_with('{') || !mentions_tag {
        return None;
    }
    payload.to_value().ok().filter(is_envelope)
}

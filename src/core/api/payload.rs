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
#[derive(Clone)]
pub struct Payload(Box<RawValue>);

impl Payload {
    /// The JSON `null` payload (a push item without one).
    pub fn null() -> Self {
        Payload(RawValue::NULL.to_owned())
    }

    /// The empty object `{}` (a transaction's push item without a payload).
    pub fn empty_object() -> Self {
        // Serialized, not parsed: no JSON parser over `&str` in the wasm module for this.
        Payload::from_value(&Value::Object(serde_json::Map::new()))
    }

    /// A payload holding `value` as compact JSON text.
    pub fn from_value(value: &Value) -> Self {
        // A `Value` always serializes (its map keys are strings).
        Payload(
            serde_json::value::to_raw_value(value)
                .unwrap_or_else(|e| panic!("a JSON value serializes: {e}")),
        )
    }

    /// `text` as a payload: fails unless it is exactly one JSON value (whitespace around it is dropped).
    pub fn from_json(text: String) -> Result<Self, serde_json::Error> {
        RawValue::from_string(text).map(Payload)
    }

    /// The payload's JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// Length of the JSON text in bytes (what the payload adds to a segment before compression).
    pub fn len(&self) -> usize {
        self.0.get().len()
    }

    /// Always false: a JSON value's text is never empty (`null` is four bytes).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The payload parsed into a `serde_json::Value` tree (for tests and cold paths). Fails only where
    /// valid JSON text does not fit a `Value`: a number beyond `f64`'s range, a lone surrogate escape.
    pub fn to_value(&self) -> Result<Value, serde_json::Error> {
        // From bytes: the parser over slices is the one the module already has.
        serde_json::from_slice(self.0.get().as_bytes())
    }

    /// The raw JSON value.
    pub fn into_raw(self) -> Box<RawValue> {
        self.0
    }
}

impl From<Box<RawValue>> for Payload {
    fn from(raw: Box<RawValue>) -> Self {
        Payload(raw)
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
        self.0.serialize(serializer)
    }
}

/// Captures one JSON value's text (serde_json deserializers only, which check it is valid JSON).
impl<'de> serde::Deserialize<'de> for Payload {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Box::<RawValue>::deserialize(deserializer).map(Payload)
    }
}

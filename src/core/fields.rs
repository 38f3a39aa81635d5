//! Reading stored JSON records field by field (used by `records` and `segment`).
//!
//! The stored records are written with serde's derived `Serialize`. They are read back through one
//! parsed `serde_json::Value` and this reader rather than a derived `Deserialize`: the derived code is
//! generated per record type and per field, and was about 8 KB of the gzipped browser module
//! (docs/decisions.md). The rules are those the derived code had:
//! - a required field must be present, with the right JSON type (integers must fit their Rust type);
//! - an `Option` field may be missing or `null`;
//! - a field with a default may be missing (it is also allowed to be `null`, which this build never
//!   writes);
//! - unknown fields are ignored (a newer build may add some).
//!
//! A field named `payload` is the exception: it is captured as JSON text ([`Payload`]) and never parsed
//! into a tree (a payload is any JSON the wire's parser accepted, which a `Value` may not hold: a
//! number beyond `f64`, a lone surrogate escape).
//!
//! [`Shaped`] is the small piece of serde this module and the HTTP layer share: read a position that
//! should hold an object (or an array) in one pass, and when it holds another JSON type, record only
//! which one, for an error that names it. [`StrField`] does the same for a position that should hold a
//! string (the HTTP layer's push and ack items).

use super::api::Payload;
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::marker::PhantomData;

/// The field every record keeps as JSON text.
const PAYLOAD_KEY: &str = "payload";

/// The fields of one JSON object; each read takes its field out (no copies of strings or payloads).
#[derive(Debug)]
pub(crate) struct Fields(Map<String, Value>, Option<Payload>);

/// What went wrong reading a record, in words (the caller adds which record).
pub(crate) type FieldError = String;

impl Fields {
    /// Parses `bytes` as one JSON object.
    pub(crate) fn parse(bytes: &[u8]) -> Result<Self, FieldError> {
        let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_string())?;
        match serde_json::from_str(text).map_err(|e| e.to_string())? {
            Shaped::Is(fields) => Ok(fields),
            Shaped::Not(kind) => Err(format!("expected a JSON object, found {kind}")),
        }
    }

    /// The fields of `value`, which must be a JSON object.
    pub(crate) fn of(value: Value) -> Result<Self, FieldError> {
        match value {
            Value::Object(mut map) => {
                let payload = map.remove(PAYLOAD_KEY).map(Payload::from);
                Ok(Fields(map, payload))
            }
            other => Err(format!(
                "expected a JSON object, found {}",
                json_type(&other)
            )),
        }
    }

    /// Takes `key` out; `null` counts as absent.
    fn take(&mut self, key: &str) -> Option<Value> {
        self.0.remove(key).filter(|v| !v.is_null())
    }

    /// Takes a required field through `convert`, which answers `None` for a wrong type or range.
    fn required<T>(
        &mut self,
        key: &str,
        expected: &str,
        convert: fn(Value) -> Option<T>,
    ) -> Result<T, FieldError> {
        required(key, self.take(key), expected, convert)
    }

    /// Takes an optional field through `convert` (absent or `null` is `None`).
    fn optional<T>(
        &mut self,
        key: &str,
        expected: &str,
        convert: fn(Value) -> Option<T>,
    ) -> Result<Option<T>, FieldError> {
        optional(key, self.take(key), expected, convert)
    }

    /// A required string.
    pub(crate) fn string(&mut self, key: &str) -> Result<String, FieldError> {
        self.required(key, "a string", into_string)
    }

    /// An optional string.
    pub(crate) fn opt_string(&mut self, key: &str) -> Result<Option<String>, FieldError> {
        self.optional(key, "a string", into_string)
    }

    /// A required unsigned 64-bit integer.
    pub(crate) fn u64(&mut self, key: &str) -> Result<u64, FieldError> {
        self.required(key, "an unsigned integer", |v| v.as_u64())
    }

    /// An unsigned 64-bit integer, `default` when absent.
    pub(crate) fn u64_or(&mut self, key: &str, default: u64) -> Result<u64, FieldError> {
        Ok(self
            .optional(key, "an unsigned integer", |v| v.as_u64())?
            .unwrap_or(default))
    }

    /// A required unsigned 32-bit integer.
    pub(crate) fn u32(&mut self, key: &str) -> Result<u32, FieldError> {
        self.required(key, "a 32-bit unsigned integer", as_u32)
    }

    /// An unsigned 32-bit integer, `default` when absent.
    pub(crate) fn u32_or(&mut self, key: &str, default: u32) -> Result<u32, FieldError> {
        Ok(self
            .optional(key, "a 32-bit unsigned integer", as_u32)?
            .unwrap_or(default))
    }

    /// A required signed 64-bit integer.
    pub(crate) fn i64(&mut self, key: &str) -> Result<i64, FieldError> {
        self.required(key, "an integer", |v| v.as_i64())
    }

    /// A signed 64-bit integer, `default` when absent.
    pub(crate) fn i64_or(&mut self, key: &str, default: i64) -> Result<i64, FieldError> {
        Ok(self.opt_i64(key)?.unwrap_or(default))
    }

    /// An optional signed 64-bit integer.
    pub(crate) fn opt_i64(&mut self, key: &str) -> Result<Option<i64>, FieldError> {
        self.optional(key, "an integer", |v| v.as_i64())
    }

    /// A required boolean.
    pub(crate) fn bool(&mut self, key: &str) -> Result<bool, FieldError> {
        self.required(key, "a boolean", |v| v.as_bool())
    }

    /// An optional boolean, `default` when absent.
    pub(crate) fn bool_or(&mut self, key: &str, default: bool) -> Result<bool, FieldError> {
        Ok(self
            .optional(key, "a boolean", |v| v.as_bool())?
            .unwrap_or(default))
    }

    /// The required `payload` field: any JSON, `null` included, as its text.
    pub(crate) fn payload(&mut self) -> Result<Payload, FieldError> {
        self.1
            .take()
            .ok_or_else(|| format!("missing field `{PAYLOAD_KEY}`"))
    }

    /// A list of strings, empty when absent.
    #[cfg(feature = "ops")]
    pub(crate) fn strings(&mut self, key: &str) -> Result<Vec<String>, FieldError> {
        let list = self.optional(key, "a list of strings", |v| match v {
            Value::Array(items) => items.into_iter().map(into_string).collect(),
            _ => None,
        })?;
        Ok(list.unwrap_or_default())
    }

    /// A required field of any JSON type, as a tree.
    #[cfg(feature = "twophase")]
    pub(crate) fn object_value(&mut self, key: &str) -> Result<Value, FieldError> {
        self.required(key, "a value", Some)
    }

    /// True when `key` is present and not `null`.
    #[cfg(feature = "twophase")]
    pub(crate) fn has(&self, key: &str) -> bool {
        self.0.get(key).is_some_and(|v| !v.is_null())
    }

    /// A required nested object.
    pub(crate) fn object(&mut self, key: &str) -> Result<Fields, FieldError> {
        let value = self.required(key, "an object", Some)?;
        Fields::of(value).map_err(|e| format!("field `{key}`: {e}"))
    }
}

impl<'de> FromCompound<'de> for Fields {
    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Shaped<Self>, A::Error> {
        let mut fields = Map::new();
        let mut payload = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == PAYLOAD_KEY {
                payload = Some(map.next_value()?);
            } else {
                fields.insert(key, map.next_value()?);
            }
        }
        Ok(Shaped::Is(Fields(fields, payload)))
    }
}

/// What a position that should hold an object or an array held.
pub(crate) enum Shaped<T> {
    /// The expected JSON type, read.
    Is(T),
    /// Another JSON type, in [`json_type`]'s words (`"a number"`, `"null"`, ...).
    Not(&'static str),
}

/// Skips the rest of an object: one copy per reader, shared by every type that skips one.
fn skip_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

/// Skips the rest of an array: one copy per reader, shared by every type that skips one.
fn skip_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

/// A type read from a JSON object or a JSON array (the other, and every scalar, is [`Shaped::Not`]).
/// `'de` is the text being read: a type may borrow from it (the push body's payloads).
pub(crate) trait FromCompound<'de>: Sized {
    /// Reads the object (the default skips it).
    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Shaped<Self>, A::Error> {
        skip_map(map)?;
        Ok(Shaped::Not("an object"))
    }

    /// Reads the array (the default skips it).
    fn from_seq<A: SeqAccess<'de>>(seq: A) -> Result<Shaped<Self>, A::Error> {
        skip_seq(seq)?;
        Ok(Shaped::Not("an array"))
    }
}

impl<'de, T: FromCompound<'de>> Deserialize<'de> for Shaped<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ShapedVisitor(PhantomData))
    }
}

struct ShapedVisitor<T>(PhantomData<T>);

impl<'de, T: FromCompound<'de>> Visitor<'de> for ShapedVisitor<T> {
    type Value = Shaped<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Shaped::Not("a boolean"))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Shaped::Not("a number"))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Shaped::Not("a number"))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Shaped::Not("a number"))
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Shaped::Not("a string"))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Shaped::Not("null"))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        T::from_seq(seq)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        T::from_map(map)
    }
}

/// A value read where a string is expected, accepting every JSON type (`deserialize_any`): the string
/// (as `T`, [`FromJsonStr`]), `null`, or which other type was there (skipped, and named in
/// [`json_type`]'s words for an error).
pub(crate) enum StrField<T = String> {
    /// JSON `null`.
    Null,
    /// A string.
    Str(T),
    /// Another JSON type: `"a boolean"`, `"a number"`, `"an array"` or `"an object"`.
    Not(&'static str),
}

/// What a string read by [`StrField`] becomes; `'de` is the text being read.
pub(crate) trait FromJsonStr<'de>: Sized {
    /// From a string the parser lends for the moment.
    fn from_str(s: &str) -> Self;
    /// From a string the parser built (an escaped one).
    fn from_string(s: String) -> Self {
        Self::from_str(&s)
    }
    /// From a string of the text itself, which lives as long as the text (a parser over a text in
    /// memory lends a string without escapes so).
    fn from_borrowed(s: &'de str) -> Self {
        Self::from_str(s)
    }
}

impl FromJsonStr<'_> for String {
    fn from_str(s: &str) -> Self {
        s.to_owned()
    }
    fn from_string(s: String) -> Self {
        s
    }
}

impl<T> StrField<T> {
    /// An absent field or `null` as `Ok(None)`, a string as `Ok(Some(..))`, another type as
    /// `Err(its name)`.
    pub(crate) fn text(field: Option<StrField<T>>) -> Result<Option<T>, &'static str> {
        match field {
            None | Some(StrField::Null) => Ok(None),
            Some(StrField::Str(s)) => Ok(Some(s)),
            Some(StrField::Not(kind)) => Err(kind),
        }
    }
}

impl<'de, T: FromJsonStr<'de>> StrField<T> {
    /// The same field of a parsed `Value` (the readers that still parse a whole object first).
    pub(crate) fn of_value(value: Option<&Value>) -> Option<StrField<T>> {
        value.map(|v| match v {
            Value::Null => StrField::Null,
            Value::String(s) => StrField::Str(T::from_str(s)),
            other => StrField::Not(json_type(other)),
        })
    }
}

impl<'de, T: FromJsonStr<'de>> Deserialize<'de> for StrField<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrFieldVisitor(PhantomData))
    }
}

struct StrFieldVisitor<T>(PhantomData<T>);

impl<'de, T: FromJsonStr<'de>> Visitor<'de> for StrFieldVisitor<T> {
    type Value = StrField<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(StrField::Not("a boolean"))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(StrField::Not("a number"))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(StrField::Not("a number"))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(StrField::Not("a number"))
    }
    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(StrField::Str(T::from_str(s)))
    }
    fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
        Ok(StrField::Str(T::from_string(s)))
    }
    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(StrField::Str(T::from_borrowed(s)))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(StrField::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        skip_seq(seq)?;
        Ok(StrField::Not("an array"))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        skip_map(map)?;
        Ok(StrField::Not("an object"))
    }
}

/// A required field's value (`None`: absent or `null`) through `convert`, which answers `None` for a
/// wrong type or range: the rules of [`Fields`], for readers that collect their fields themselves.
pub(crate) fn required<T>(
    key: &str,
    value: Option<Value>,
    expected: &str,
    convert: fn(Value) -> Option<T>,
) -> Result<T, FieldError> {
    match value {
        None => Err(format!("missing field `{key}`")),
        Some(v) => convert(v).ok_or_else(|| format!("field `{key}`: expected {expected}")),
    }
}

/// An optional field's value (`None`: absent or `null`) through `convert`.
pub(crate) fn optional<T>(
    key: &str,
    value: Option<Value>,
    expected: &str,
    convert: fn(Value) -> Option<T>,
) -> Result<Option<T>, FieldError> {
    match value {
        None => Ok(None),
        Some(v) => convert(v)
            .map(Some)
            .ok_or_else(|| format!("field `{key}`: expected {expected}")),
    }
}

/// A JSON array of `T`, read element by element.
pub(crate) struct List<T>(pub(crate) Vec<T>);

impl<'de, T: Deserialize<'de>> FromCompound<'de> for List<T> {
    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Shaped<Self>, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Shaped::Is(List(items)))
    }
}

pub(crate) fn into_string(v: Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s),
        _ => None,
    }
}

fn as_u32(v: Value) -> Option<u32> {
    v.as_u64().and_then(|n| u32::try_from(n).ok())
}

/// How a value's JSON type reads in an error ("a string", "null", ...); the HTTP layer uses it too.
pub(crate) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn required_optional_defaults_and_types() {
        let mut f = Fields::parse(
            br#"{"s":"x","n":7,"neg":-3,"big":4294967296,"b":true,"nul":null,"o":{"k":1},"f":1.5,"extra":[1]}"#,
        )
        .unwrap();
        assert_eq!(f.string("s").unwrap(), "x");
        assert_eq!(f.u32("n").unwrap(), 7);
        assert_eq!(f.i64("neg").unwrap(), -3);
        assert_eq!(
            f.u32("big").unwrap_err(),
            "field `big`: expected a 32-bit unsigned integer"
        );
        assert!(f.bool("b").unwrap());
        assert_eq!(f.opt_string("nul").unwrap(), None);
        let mut payloads = Fields::parse(br#"{"payload":null}"#).unwrap();
        assert_eq!(
            payloads.payload().unwrap().get(),
            "null",
            "a null payload is a payload"
        );
        assert_eq!(payloads.payload().unwrap_err(), "missing field `payload`");
        // Kept as sent, even where a `Value` could not hold it.
        let mut odd = Fields::parse(br#"{"payload": [1e400, "\ud800"] }"#).unwrap();
        assert_eq!(odd.payload().unwrap().get(), r#"[1e400, "\ud800"]"#);
        assert_eq!(f.opt_i64("absent").unwrap(), None);
        assert_eq!(f.i64_or("absent", -1).unwrap(), -1);
        assert_eq!(f.u64_or("absent", 9).unwrap(), 9);
        assert_eq!(f.object("o").unwrap().u64("k").unwrap(), 1);
        assert_eq!(
            f.u64("f").unwrap_err(),
            "field `f`: expected an unsigned integer"
        );
        assert_eq!(f.string("gone").unwrap_err(), "missing field `gone`");
        // A field is taken by its read: reading it again finds it missing.
        assert_eq!(f.string("s").unwrap_err(), "missing field `s`");
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn string_fields_name_what_else_was_sent() {
        let read = |json: &str| -> Vec<String> {
            let fields: Vec<StrField> = serde_json::from_str(json).unwrap();
            fields
                .into_iter()
                .map(|f| match f {
                    StrField::Null => "null".to_string(),
                    StrField::Str(s) => format!("str {s}"),
                    StrField::Not(kind) => kind.to_string(),
                })
                .collect()
        };
        assert_eq!(
            read(
                r#"["a", "esc\"aped\u00e9", null, true, 1, -1, 1.5, [1, [2], {"k": [3]}], {"k": {"n": null}}, "last"]"#
            ),
            [
                "str a",
                "str esc\"apedé",
                "null",
                "a boolean",
                "a number",
                "a number",
                "a number",
                "an array",
                "an object",
                "str last",
            ]
        );
        assert_eq!(
            StrField::text(Some(StrField::Str("x".to_string()))),
            Ok(Some("x".to_string()))
        );
        assert_eq!(StrField::<String>::text(None), Ok(None));
        assert_eq!(StrField::<String>::text(Some(StrField::Null)), Ok(None));
        assert_eq!(
            StrField::<String>::text(Some(StrField::Not("a number"))),
            Err("a number")
        );
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn not_an_object() {
        assert_eq!(
            Fields::parse(b"[1]").unwrap_err(),
            "expected a JSON object, found an array"
        );
        assert_eq!(
            Fields::parse(b"7").unwrap_err(),
            "expected a JSON object, found a number"
        );
        assert!(Fields::parse(b"{").is_err());
        assert!(Fields::parse(b"[1,]").is_err());
        assert_eq!(Fields::parse(b"{\"a\":\"\xff\"}").unwrap_err(), "not UTF-8");
    }
}

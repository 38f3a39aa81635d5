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
use serde_json::Value;
use std::marker::PhantomData;

/// The field every record keeps as JSON text.
const PAYLOAD_KEY: &str = "payload";

/// The fields of one JSON object; each read takes its field out (no copies of strings or payloads).
///
/// A read that fails (a missing field, a wrong type) keeps its error and answers the type's default
/// (`""`, `0`, `false`, `None`), so a reader is one straight run of reads with no early return;
/// [`Fields::finish`] then answers the first error, as a reader that stopped at it would have. The
/// readers of every record type share these few functions instead of each carrying its own error
/// path (docs/decisions.md, "Browser size ... session 18").
///
/// The fields are kept as parsed, in a list searched from its end (a record has a few dozen fields at
/// most, each read once; of a key sent twice the last counts, as in a map).
#[derive(Debug)]
pub(crate) struct Fields {
    map: Vec<(String, Value)>,
    payload: Option<Payload>,
    error: Option<FieldError>,
}

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

    /// Parses `bytes` as one JSON object and reads it with `read`: its value, or the first error.
    pub(crate) fn read<T>(
        bytes: &[u8],
        read: impl FnOnce(&mut Fields) -> T,
    ) -> Result<T, FieldError> {
        let mut fields = Fields::parse(bytes)?;
        let value = read(&mut fields);
        fields.finish(value)
    }

    /// The fields of `value`, which must be a JSON object.
    pub(crate) fn of(value: Value) -> Result<Self, FieldError> {
        match value {
            Value::Object(map) => Ok(Fields::new(map.into_iter().collect())),
            other => Err(format!(
                "expected a JSON object, found {}",
                json_type(&other)
            )),
        }
    }

    /// The fields of `map` (its payload kept aside as text), with no error yet.
    fn new(map: Vec<(String, Value)>) -> Self {
        let mut fields = Fields {
            map,
            payload: None,
            error: None,
        };
        fields.payload = fields.remove(PAYLOAD_KEY).map(Payload::from);
        fields
    }

    /// Takes `key` out, `null` included. The others keep their order (a `swap_remove` would move the
    /// last copy of a repeated key in front of an earlier one).
    fn remove(&mut self, key: &str) -> Option<Value> {
        let at = self.map.iter().rposition(|(k, _)| k == key)?;
        Some(self.map.remove(at).1)
    }

    /// `value` when every read so far succeeded, else the first error.
    pub(crate) fn finish<T>(self, value: T) -> Result<T, FieldError> {
        match self.error {
            None => Ok(value),
            Some(e) => Err(e),
        }
    }

    /// The first error so far, as an `Err` (for readers that stop between parts).
    #[cfg(feature = "twophase")]
    pub(crate) fn check(&mut self) -> Result<(), FieldError> {
        match self.error.take() {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }

    /// Keeps `error` unless an earlier one is kept.
    pub(crate) fn fail(&mut self, error: FieldError) {
        if self.error.is_none() {
            self.error = Some(error);
        }
    }

    /// Takes over the first error of `nested` (a nested object read after this one's earlier fields).
    pub(crate) fn merge(&mut self, nested: Fields) {
        if let Some(e) = nested.error {
            self.fail(e);
        }
    }

    /// Takes `key` out; `null` counts as absent.
    fn take(&mut self, key: &str) -> Option<Value> {
        self.remove(key).filter(|v| !v.is_null())
    }

    /// A field through `convert`, which answers `None` for a wrong type or range: a required one when
    /// `required`, else `None` when absent. A failure is kept ([`Fields::fail`]) and reads as `None`.
    fn field<T>(
        &mut self,
        key: &str,
        required: bool,
        expected: &str,
        convert: fn(Value) -> Option<T>,
    ) -> Option<T> {
        let read = match self.take(key) {
            None if required => Err(format!("missing field `{key}`")),
            None => return None,
            Some(v) => convert(v).ok_or_else(|| format!("field `{key}`: expected {expected}")),
        };
        match read {
            Ok(value) => Some(value),
            Err(e) => {
                self.fail(e);
                None
            }
        }
    }

    /// A required string.
    pub(crate) fn string(&mut self, key: &str) -> String {
        self.field(key, true, "a string", into_string)
            .unwrap_or_default()
    }

    /// An optional string.
    pub(crate) fn opt_string(&mut self, key: &str) -> Option<String> {
        self.field(key, false, "a string", into_string)
    }

    /// A required unsigned 64-bit integer.
    pub(crate) fn u64(&mut self, key: &str) -> u64 {
        self.u64_or_else(key, true, 0)
    }

    /// An unsigned 64-bit integer, `default` when absent.
    pub(crate) fn u64_or(&mut self, key: &str, default: u64) -> u64 {
        self.u64_or_else(key, false, default)
    }

    fn u64_or_else(&mut self, key: &str, required: bool, default: u64) -> u64 {
        self.field(key, required, "an unsigned integer", |v| v.as_u64())
            .unwrap_or(default)
    }

    /// A required unsigned 32-bit integer.
    pub(crate) fn u32(&mut self, key: &str) -> u32 {
        self.u32_or_else(key, true, 0)
    }

    /// An unsigned 32-bit integer, `default` when absent.
    pub(crate) fn u32_or(&mut self, key: &str, default: u32) -> u32 {
        self.u32_or_else(key, false, default)
    }

    fn u32_or_else(&mut self, key: &str, required: bool, default: u32) -> u32 {
        self.field(key, required, "a 32-bit unsigned integer", as_u32)
            .unwrap_or(default)
    }

    /// A required signed 64-bit integer.
    pub(crate) fn i64(&mut self, key: &str) -> i64 {
        self.field(key, true, "an integer", |v| v.as_i64())
            .unwrap_or_default()
    }

    /// A signed 64-bit integer, `default` when absent.
    pub(crate) fn i64_or(&mut self, key: &str, default: i64) -> i64 {
        self.opt_i64(key).unwrap_or(default)
    }

    /// An optional signed 64-bit integer.
    pub(crate) fn opt_i64(&mut self, key: &str) -> Option<i64> {
        self.field(key, false, "an integer", |v| v.as_i64())
    }

    /// A required boolean.
    pub(crate) fn bool(&mut self, key: &str) -> bool {
        self.bool_or_else(key, true, false)
    }

    /// An optional boolean, `default` when absent.
    pub(crate) fn bool_or(&mut self, key: &str, default: bool) -> bool {
        self.bool_or_else(key, false, default)
    }

    fn bool_or_else(&mut self, key: &str, required: bool, default: bool) -> bool {
        self.field(key, required, "a boolean", |v| v.as_bool())
            .unwrap_or(default)
    }

    /// The required `payload` field: any JSON, `null` included, as its text.
    pub(crate) fn payload(&mut self) -> Payload {
        match self.payload.take() {
            Some(payload) => payload,
            None => {
                self.fail(format!("missing field `{PAYLOAD_KEY}`"));
                Payload::null()
            }
        }
    }

    /// A list of strings, empty when absent.
    #[cfg(feature = "ops")]
    pub(crate) fn strings(&mut self, key: &str) -> Vec<String> {
        self.field(key, false, "a list of strings", |v| match v {
            Value::Array(items) => items.into_iter().map(into_string).collect(),
            _ => None,
        })
        .unwrap_or_default()
    }

    /// A required field of any JSON type, as a tree (`null` when it failed).
    #[cfg(feature = "twophase")]
    pub(crate) fn object_value(&mut self, key: &str) -> Value {
        self.field(key, true, "a value", Some).unwrap_or_default()
    }

    /// True when `key` is present and not `null`.
    #[cfg(feature = "twophase")]
    pub(crate) fn has(&self, key: &str) -> bool {
        self.map
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .is_some_and(|(_, v)| !v.is_null())
    }

    /// A required nested object (none when it failed: its reads then fail too, after this error).
    /// Its own errors come back through [`Fields::merge`] or [`Fields::finish`].
    pub(crate) fn object(&mut self, key: &str) -> Fields {
        let nested = self
            .field(key, true, "an object", Some)
            .map(Fields::of)
            .unwrap_or_else(|| Ok(Fields::new(Vec::new())));
        match nested {
            Ok(fields) => fields,
            Err(e) => {
                self.fail(format!("field `{key}`: {e}"));
                Fields::new(Vec::new())
            }
        }
    }
}

impl<'de> FromCompound<'de> for Fields {
    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Shaped<Self>, A::Error> {
        let mut fields = Vec::new();
        let mut payload = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == PAYLOAD_KEY {
                payload = Some(map.next_value()?);
            } else {
                fields.push((key, map.next_value()?));
            }
        }
        Ok(Shaped::Is(Fields {
            map: fields,
            payload,
            error: None,
        }))
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
    /// Through the vendored serde_json's shape reader (vendor/README.md, change 3): an object or an
    /// array goes to `T` as `deserialize_any` would hand it over; any other value is parsed by one
    /// function shared by every `T` and comes back as its kind, where `deserialize_any` would carry a
    /// scalar parser in every `T`'s copy (docs/decisions.md, "one shared shape reader").
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_newtype_struct(serde_json::de::SHAPE_TOKEN, ShapedVisitor(PhantomData))
    }
}

struct ShapedVisitor<T>(PhantomData<T>);

impl<'de, T: FromCompound<'de>> Visitor<'de> for ShapedVisitor<T> {
    type Value = Shaped<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    /// The kind of a value that is neither an object nor an array, as the shape reader numbers it.
    fn visit_u64<E>(self, kind: u64) -> Result<Self::Value, E> {
        Ok(Shaped::Not(match kind {
            0 => "null",
            1 => "a boolean",
            2 => "a number",
            _ => "a string",
        }))
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
        let parse = || {
            Fields::parse(
                br#"{"s":"x","n":7,"neg":-3,"big":4294967296,"b":true,"nul":null,"o":{"k":1},"f":1.5,"extra":[1]}"#,
            )
            .unwrap()
        };
        let mut f = parse();
        assert_eq!(f.string("s"), "x");
        assert_eq!(f.u32("n"), 7);
        assert_eq!(f.i64("neg"), -3);
        assert!(f.bool("b"));
        assert_eq!(f.opt_string("nul"), None);
        assert_eq!(f.opt_i64("absent"), None);
        assert_eq!(f.i64_or("absent", -1), -1);
        assert_eq!(f.u64_or("absent", 9), 9);
        assert_eq!(f.u32_or("absent", 4), 4);
        assert!(f.bool_or("absent", true));
        let mut o = f.object("o");
        assert_eq!(o.u64("k"), 1);
        f.merge(o);
        assert_eq!(f.finish(()), Ok(()), "every read so far succeeded");

        // A failed read answers the default and keeps its error; the first error is the one answered.
        type Read = fn(&mut Fields);
        let failing: [(Read, &str); 7] = [
            (
                |f| assert_eq!(f.u32("big"), 0),
                "field `big`: expected a 32-bit unsigned integer",
            ),
            (
                |f| assert_eq!(f.u64("f"), 0),
                "field `f`: expected an unsigned integer",
            ),
            (|f| assert_eq!(f.string("gone"), ""), "missing field `gone`"),
            (
                |f| assert_eq!(f.u64_or("o", 3), 3),
                "field `o`: expected an unsigned integer",
            ),
            (|f| assert!(!f.bool("n")), "field `n`: expected a boolean"),
            (
                |f| assert_eq!(f.object("n").u64("k"), 0),
                "field `n`: expected a JSON object, found a number",
            ),
            (
                |f| assert_eq!(f.object("gone").u64("k"), 0),
                "missing field `gone`",
            ),
        ];
        for (read, error) in failing {
            let mut f = parse();
            read(&mut f);
            assert_eq!(f.string("s"), "x", "a failed read stops no later one");
            assert_eq!(f.u64("absent"), 0);
            assert_eq!(f.finish(()), Err(error.to_string()));
        }
        // A nested object's error is taken over only when none came before it.
        let mut f = parse();
        let mut o = f.object("o");
        assert_eq!(o.string("k"), "");
        f.merge(o);
        assert_eq!(f.string("absent"), "");
        assert_eq!(
            f.finish(()),
            Err("field `k`: expected a string".to_string())
        );
        // A field is taken by its read: reading it again finds it missing.
        let mut f = parse();
        f.string("s");
        f.string("s");
        assert_eq!(f.finish(()), Err("missing field `s`".to_string()));

        let mut payloads = Fields::parse(br#"{"payload":null}"#).unwrap();
        assert_eq!(
            payloads.payload().get(),
            "null",
            "a null payload is a payload"
        );
        assert_eq!(
            payloads.payload().get(),
            "null",
            "the default after a failed read"
        );
        assert_eq!(
            payloads.finish(()),
            Err("missing field `payload`".to_string())
        );
        // Kept as sent, even where a `Value` could not hold it.
        let mut odd = Fields::parse(br#"{"payload": [1e400, "\ud800"] }"#).unwrap();
        assert_eq!(odd.payload().get(), r#"[1e400, "\ud800"]"#);
        assert_eq!(
            Fields::read(br#"{"a":1}"#, |f| (f.u64("a"), f.string("b"))),
            Err("missing field `b`".to_string())
        );
        assert_eq!(Fields::read(br#"{"a":1}"#, |f| f.u64("a")), Ok(1));
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

    /// Of a key sent twice the last value counts, as it did when the fields were a map, also in a
    /// nested object; each read takes its field out.
    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn a_repeated_key_reads_its_last_value() {
        let mut f = Fields::parse(br#"{"a":1,"b":"x","a":2,"o":{"c":3,"c":4}}"#).unwrap();
        assert_eq!(f.u64("a"), 2);
        assert_eq!(f.string("b"), "x");
        let mut o = f.object("o");
        assert_eq!(o.u64("c"), 4);
        assert_eq!(f.opt_string("b"), None);
        assert!(f.finish(()).is_ok());
        // A field taken out before a repeated key must not reorder its copies.
        let mut f = Fields::parse(br#"{"x":0,"a":1,"a":2}"#).unwrap();
        assert_eq!(f.u64("x"), 0);
        assert_eq!(f.u64("a"), 2);
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

    /// A type nested in itself as deep as the text goes (for the parser's depth limit).
    struct Nest;

    impl<'de> FromCompound<'de> for Nest {
        fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Shaped<Self>, A::Error> {
            while seq.next_element::<Shaped<Nest>>()?.is_some() {}
            Ok(Shaped::Is(Nest))
        }
    }

    /// Every JSON type where a [`Shaped`] is read comes back named, and the parser's errors there are
    /// serde_json's `deserialize_any`'s, word for word and at the same place (they reach the replies:
    /// "Invalid JSON: ..." and the segment and record errors).
    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn shapes_name_every_json_type_and_keep_the_parser_errors() {
        type Objects = Shaped<List<Shaped<Fields>>>;
        let kinds = |json: &str| -> Vec<&'static str> {
            match serde_json::from_str::<Objects>(json).unwrap() {
                Shaped::Is(List(items)) => items
                    .into_iter()
                    .map(|item| match item {
                        Shaped::Is(_) => "read",
                        Shaped::Not(kind) => kind,
                    })
                    .collect(),
                Shaped::Not(kind) => vec![kind],
            }
        };
        assert_eq!(
            kinds(
                r#" [ {"a": [1, {"b": null}]}, null, true, false, 0, -1, 1.5e3, -0.0, 18446744073709551616, "s", "esc\"\u00e9", [], [1, [2], {"c": [3]}], {} ] "#
            ),
            [
                "read",
                "null",
                "a boolean",
                "a boolean",
                "a number",
                "a number",
                "a number",
                "a number",
                "a number",
                "a string",
                "a string",
                "an array",
                "an array",
                "read",
            ]
        );
        for (json, kind) in [
            ("null", "null"),
            (" true", "a boolean"),
            ("7", "a number"),
            ("-7.5", "a number"),
            (r#""x""#, "a string"),
            (r#"{"a": [1]}"#, "an object"),
        ] {
            assert_eq!(kinds(json), [kind], "{json}");
        }
        let error = |json: &str| match serde_json::from_str::<Objects>(json) {
            Ok(_) => "read".to_string(),
            Err(e) => e.to_string(),
        };
        for (json, expected) in [
            ("", "EOF while parsing a value at line 1 column 0"),
            ("  ", "EOF while parsing a value at line 1 column 2"),
            ("nul", "EOF while parsing a value at line 1 column 3"),
            ("nulL", "expected ident at line 1 column 4"),
            ("[tru]", "expected ident at line 1 column 5"),
            ("[fals", "EOF while parsing a value at line 1 column 5"),
            ("[-]", "invalid number at line 1 column 3"),
            ("[-x]", "invalid number at line 1 column 3"),
            ("[01]", "invalid number at line 1 column 3"),
            ("[1.]", "invalid number at line 1 column 4"),
            ("[1e400]", "number out of range at line 1 column 6"),
            ("[\"abc]", "EOF while parsing a string at line 1 column 6"),
            ("[\"\\x\"]", "invalid escape at line 1 column 4"),
            (
                "[\"\\ud800\"]",
                "unexpected end of hex escape at line 1 column 9",
            ),
            ("[}", "expected value at line 1 column 2"),
            ("[1,]", "trailing comma at line 1 column 4"),
            ("[1 2]", "expected `,` or `]` at line 1 column 4"),
            ("[{\"a\":1,}]", "trailing comma at line 1 column 9"),
            ("[{\"a\" 1}]", "expected `:` at line 1 column 7"),
            ("[{\"a\":1} 2]", "expected `,` or `]` at line 1 column 10"),
            ("{\"a\":1", "EOF while parsing an object at line 1 column 6"),
            ("[]x", "trailing characters at line 1 column 3"),
            ("x", "expected value at line 1 column 1"),
            ("[x]", "expected value at line 1 column 2"),
        ] {
            assert_eq!(error(json), expected, "{json}");
        }
        let deep = |n: usize| "[".repeat(n) + &"]".repeat(n);
        let nest = |json: &str| match serde_json::from_str::<Shaped<Nest>>(json) {
            Ok(_) => "read".to_string(),
            Err(e) => e.to_string(),
        };
        assert_eq!(nest(&deep(127)), "read");
        assert_eq!(
            nest(&deep(128)),
            "recursion limit exceeded at line 1 column 128"
        );
        assert_eq!(
            nest(&(deep(5) + "[")),
            "trailing characters at line 1 column 11"
        );
        assert_eq!(nest("[[[]"), "EOF while parsing a list at line 1 column 4");
        assert_eq!(nest("[[1]]"), "read");
    }
}

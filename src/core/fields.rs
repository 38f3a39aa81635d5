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

use serde_json::{Map, Value};

/// The fields of one JSON object; each read takes its field out (no copies of strings or payloads).
#[derive(Debug)]
pub(crate) struct Fields(Map<String, Value>);

/// What went wrong reading a record, in words (the caller adds which record).
pub(crate) type FieldError = String;

impl Fields {
    /// Parses `bytes` as one JSON object.
    pub(crate) fn parse(bytes: &[u8]) -> Result<Self, FieldError> {
        let value: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        Self::of(value)
    }

    /// The fields of `value`, which must be a JSON object.
    pub(crate) fn of(value: Value) -> Result<Self, FieldError> {
        match value {
            Value::Object(map) => Ok(Fields(map)),
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
        match self.take(key) {
            None => Err(format!("missing field `{key}`")),
            Some(v) => convert(v).ok_or_else(|| format!("field `{key}`: expected {expected}")),
        }
    }

    /// Takes an optional field through `convert` (absent or `null` is `None`).
    fn optional<T>(
        &mut self,
        key: &str,
        expected: &str,
        convert: fn(Value) -> Option<T>,
    ) -> Result<Option<T>, FieldError> {
        match self.take(key) {
            None => Ok(None),
            Some(v) => convert(v)
                .map(Some)
                .ok_or_else(|| format!("field `{key}`: expected {expected}")),
        }
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

    /// A required value of any JSON type, `null` included (a payload).
    pub(crate) fn value(&mut self, key: &str) -> Result<Value, FieldError> {
        self.0
            .remove(key)
            .ok_or_else(|| format!("missing field `{key}`"))
    }

    /// A required nested object.
    pub(crate) fn object(&mut self, key: &str) -> Result<Fields, FieldError> {
        let value = self.required(key, "an object", Some)?;
        Fields::of(value).map_err(|e| format!("field `{key}`: {e}"))
    }
}

fn into_string(v: Value) -> Option<String> {
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
        let mut payloads = Fields::parse(br#"{"p":null}"#).unwrap();
        assert_eq!(
            payloads.value("p").unwrap(),
            Value::Null,
            "a null payload is a payload"
        );
        assert_eq!(payloads.value("p").unwrap_err(), "missing field `p`");
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
    fn not_an_object() {
        assert_eq!(
            Fields::parse(b"[1]").unwrap_err(),
            "expected a JSON object, found an array"
        );
        assert!(Fields::parse(b"{").is_err());
    }
}

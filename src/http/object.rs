//! `object!`: a JSON object answer built as `serde_json::json!` builds one, without its `unwrap`.
//!
//! `json!` turns each value into a `Value` with `serde_json::to_value(..).unwrap()`; that `unwrap`
//! formats `serde_json::Error` with `Debug`, which brings string escaping and the Unicode tables behind
//! it into the browser module (docs/decisions.md, "Browser size, session 7"). `object!` expands to the
//! same map inserts, each a call of [`put`], and formats the error with `Display` instead (the module
//! has that anyway); answers are plain data with string keys, which always serialize. Objects only:
//! `{"key": value, ...}`, where a value is an expression or a nested `{...}`. A value that is a `Value`
//! already (an answer built elsewhere, a list of them) is added with [`set`] after: [`value`] would copy it
//! through serde's `Value` serializer, code the browser module has no other use for. The view routes,
//! which the default build leaves out, keep `json!`.

use serde_json::Value;

/// `value` as a `Value`.
pub(crate) fn value<T: serde::Serialize + ?Sized>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or_else(|e| panic!("an answer did not serialize: {e}"))
}

/// Adds `key` to `map` with `value`: what each field of an [`object!`] expands to. One call per
/// field, not inlined, so a field costs a call rather than a copy of the key's allocation, the map
/// insert and the drop of what it replaced in every answer that builds an object.
#[inline(never)]
pub(crate) fn put(map: &mut serde_json::Map<String, Value>, key: &str, value: Value) {
    map.insert(key.into(), value);
}

/// Sets `key` of `object`, an object [`object!`] made, to `value`. Not `object[key] = value`: `Value`'s
/// `IndexMut` can panic with the key `Debug`-formatted, which the browser module has no other use for.
pub(crate) fn set(object: &mut Value, key: &str, value: Value) {
    if let Value::Object(map) = object {
        put(map, key, value);
    }
}

/// A JSON object from `{"key": value, ...}` (see the module's doc).
macro_rules! object {
    (@fields $map:ident) => {};
    (@fields $map:ident $key:literal : { $($inner:tt)* } $(, $($rest:tt)*)?) => {
        $crate::http::object::put(&mut $map, $key, $crate::http::object::object!({ $($inner)* }));
        $crate::http::object::object!(@fields $map $($($rest)*)?);
    };
    (@fields $map:ident $key:literal : $value:expr $(, $($rest:tt)*)?) => {
        $crate::http::object::put(&mut $map, $key, $crate::http::object::value(&$value));
        $crate::http::object::object!(@fields $map $($($rest)*)?);
    };
    ({ $($fields:tt)* }) => {{
        #[allow(unused_mut)]
        let mut map = serde_json::Map::new();
        $crate::http::object::object!(@fields map $($fields)*);
        serde_json::Value::Object(map)
    }};
}

pub(crate) use object;

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn builds_what_json_builds() {
        let name = "q".to_string();
        let none: Option<u64> = None;
        assert_eq!(
            object!({
                "a": 1,
                "name": name,
                "none": none,
                "nested": {"enabled": false, "n": 2 + 3},
                "list": vec![1, 2],
            }),
            json!({"a": 1, "name": "q", "none": null, "nested": {"enabled": false, "n": 5}, "list": [1, 2]})
        );
        assert_eq!(object!({}), json!({}));
    }
}

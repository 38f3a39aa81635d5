//! Shared text: one immutable string, cloned by reference count.

use std::rc::Rc;

/// An immutable string whose clones share one allocation.
///
/// The replies of push, pop and ack carry the same few strings on every message of a partition (queue,
/// partition name, partition id, lease id, group), and a stored message's ids are handed to every reply
/// that delivers it. Made once and shared, they cost one allocation per partition or per message
/// instead of one per copy (docs/decisions.md, "Core speed, second pass"). It reads like a `&str`
/// (`Deref`), compares with `str`, `&str` and `String`, and serializes as a JSON string.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct SharedStr(Rc<str>);

impl SharedStr {
    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for SharedStr {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for SharedStr {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for SharedStr {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<&str> for SharedStr {
    fn from(text: &str) -> Self {
        SharedStr(Rc::from(text))
    }
}

impl From<String> for SharedStr {
    fn from(text: String) -> Self {
        SharedStr(Rc::from(text))
    }
}

impl From<&String> for SharedStr {
    fn from(text: &String) -> Self {
        SharedStr(Rc::from(text.as_str()))
    }
}

impl From<&SharedStr> for String {
    fn from(text: &SharedStr) -> Self {
        text.0.to_string()
    }
}

impl From<SharedStr> for String {
    fn from(text: SharedStr) -> Self {
        text.0.to_string()
    }
}

impl PartialEq<str> for SharedStr {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for SharedStr {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl PartialEq<String> for SharedStr {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<SharedStr> for String {
    fn eq(&self, other: &SharedStr) -> bool {
        **self == *other.0
    }
}

impl PartialEq<SharedStr> for &str {
    fn eq(&self, other: &SharedStr) -> bool {
        **self == *other.0
    }
}

impl PartialEq<SharedStr> for str {
    fn eq(&self, other: &SharedStr) -> bool {
        *self == *other.0
    }
}

impl std::fmt::Debug for SharedStr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.0, f)
    }
}

impl std::fmt::Display for SharedStr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl serde::Serialize for SharedStr {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn clones_share_and_compare_as_text() {
        let a = SharedStr::from("queue-1");
        let b = a.clone();
        assert!(Rc::ptr_eq(&a.0, &b.0), "a clone shares the allocation");
        assert_eq!(a, "queue-1");
        assert_eq!("queue-1", a);
        assert_eq!(a, "queue-1".to_string());
        assert_eq!(a.len(), 7);
        assert_eq!(format!("{a}/{a:?}"), "queue-1/\"queue-1\"");
        assert_eq!(serde_json::to_string(&a).unwrap(), "\"queue-1\"");
        assert_eq!(String::from(b), "queue-1");
    }
}

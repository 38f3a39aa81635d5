//! Query strings and path segments.
//!
//! Ordinary parsing (`a=1&b=2`, `+` is a space, percent-decoding; the first of repeated keys wins), not
//! the snapshot's substring search. Booleans: only `true` or `1` mean true; anything else, or absent, is
//! false (contract §0.1). Integers: an empty value is absent; anything else that is not an integer in range
//! is a 400 that names the parameter (the "every malformed request gets a 4xx" overrides the
//! contract's "unparsable means the default"; docs/decisions.md).

use super::error::HttpError;

/// Percent-decodes `raw`. `plus_is_space` applies to query strings only. Invalid `%` sequences are kept
/// literally (names with a raw `%` then still work); bytes that do not form UTF-8 are a 400.
pub(crate) fn percent_decode(raw: &str, plus_is_space: bool) -> Result<String, HttpError> {
    if !(raw.contains('%') || plus_is_space && raw.contains('+')) {
        return Ok(raw.to_string());
    }
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h * 16 + l);
                    i += 3;
                }
                _ => {
                    out.push(b'%');
                    i += 1;
                }
            },
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out)
        .map_err(|_| HttpError::bad_request(format!("'{raw}' is not valid UTF-8 once decoded")))
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// A parsed query string.
#[derive(Debug, Clone, Default)]
pub(crate) struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    /// Parses a raw query string (without `?`).
    pub(crate) fn parse(raw: &str) -> Result<Self, HttpError> {
        let mut pairs = Vec::new();
        for part in raw.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').unwrap_or((part, ""));
            pairs.push((percent_decode(k, true)?, percent_decode(v, true)?));
        }
        Ok(Query { pairs })
    }

    /// The first value of `key`, if present.
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The first value of `key`, treating an empty value as absent.
    pub(crate) fn non_empty(&self, key: &str) -> Option<&str> {
        self.get(key).filter(|v| !v.is_empty())
    }

    /// `true` only for `true` or `1`.
    pub(crate) fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true") | Some("1"))
    }

    /// A boolean with a default: `true`/`1` are true, `false`/`0` are false, absent is `default`;
    /// anything else is also `default` (contract §0.1).
    pub(crate) fn flag_or(&self, key: &str, default: bool) -> bool {
        match self.get(key) {
            Some("true") | Some("1") => true,
            Some("false") | Some("0") => false,
            _ => default,
        }
    }

    /// An unsigned integer in `min..=max`; empty or absent is `None`; anything else is a 400.
    pub(crate) fn uint(&self, key: &str, min: u64, max: u64) -> Result<Option<u64>, HttpError> {
        let Some(raw) = self.non_empty(key) else {
            return Ok(None);
        };
        match raw.parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(Some(n)),
            _ => Err(HttpError::bad_request(format!(
                "{key} must be an integer between {min} and {max}, got '{}'",
                clip(raw)
            ))),
        }
    }
}

/// `s` shortened for an error message.
pub(crate) fn clip(s: &str) -> String {
    const MAX: usize = 64;
    if s.len() <= MAX {
        return s.to_string();
    }
    // The longest head of at most MAX bytes that ends on a character; `get` (not `&s[..end]`) keeps the
    // standard library's string-slice panic, and the Unicode tables its message needs, out of the module.
    let head = (0..=MAX)
        .rev()
        .find_map(|end| s.get(..end))
        .unwrap_or_default();
    format!("{head}...")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_keeps_short_texts_and_cuts_long_ones_on_a_character() {
        assert_eq!(clip("short"), "short");
        assert_eq!(clip(&"a".repeat(70)), format!("{}...", "a".repeat(64)));
        // 63 ASCII bytes, then a 3-byte character across the 64-byte mark: cut before it.
        let text = format!("{}€tail", "a".repeat(63));
        assert_eq!(clip(&text), format!("{}...", "a".repeat(63)));
    }

    #[test]
    fn decodes_percent_and_plus() {
        assert_eq!(percent_decode("a%20b+c", true).unwrap(), "a b c");
        assert_eq!(percent_decode("a%20b+c", false).unwrap(), "a b+c");
        assert_eq!(percent_decode("100%", false).unwrap(), "100%");
        assert_eq!(percent_decode("%zz%4", false).unwrap(), "%zz%4");
        assert_eq!(percent_decode("%C3%A9", false).unwrap(), "é");
        assert!(percent_decode("%FF", false).is_err());
    }

    #[test]
    fn first_value_wins_and_flags_are_strict() {
        let q = Query::parse("wait=yes&batch=5&batch=7&x&autoAck=1").unwrap();
        assert!(!q.flag("wait"));
        assert!(q.flag("autoAck"));
        assert_eq!(q.uint("batch", 1, 10).unwrap(), Some(5));
        assert_eq!(q.get("x"), Some(""));
        assert!(q.uint("batch", 6, 10).is_err());
        assert_eq!(q.uint("missing", 1, 10).unwrap(), None);
    }
}

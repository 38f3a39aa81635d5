//! JSON text written straight into a byte buffer, for the HTTP answers (`http::render`, the
//! handlers) and for segments (module `segment`): keys are literal text, strings
//! are copied as they are unless they hold a character JSON must escape, numbers are written digit by
//! digit. The output is byte for byte what `serde_json::to_vec` writes for the same fields in the same
//! order: a string that needs escaping is handed to `serde_json` itself.

use super::api::Payload;
use super::timefmt::iso_bytes;

/// `value`'s JSON text, as `serde_json::to_string` writes it: the same text `Value`'s `Display` writes,
/// without the formatting machinery `Display` brings into the browser module.
pub(crate) fn value_text(value: &serde_json::Value) -> String {
    // Not `expect`: that would bring `serde_json::Error`'s `Debug` into the module for a panic that
    // cannot happen (a `Value` always serializes).
    match serde_json::to_string(value) {
        Ok(text) => text,
        Err(_) => unreachable!("a JSON value serializes"),
    }
}

/// A JSON text being written. The buffer is a `String` (every piece written is text), so a segment's
/// text can be shared as `str` without checking it again (module `segment`).
pub(crate) struct JsonText {
    out: String,
}

/// A word with every byte equal to `b`.
const fn splat(b: u8) -> u64 {
    u64::from_ne_bytes([b; 8])
}

const ONES: u64 = splat(0x01);
const HIGHS: u64 = splat(0x80);

/// True when some byte of `word` is zero.
fn has_zero_byte(word: u64) -> bool {
    word.wrapping_sub(ONES) & !word & HIGHS != 0
}

/// True when `s` holds a byte JSON escapes: `"`, `\` or a control character below 0x20 (the bytes
/// `serde_json` escapes; everything else, non-ASCII included, is written as it is).
fn needs_escape(s: &[u8]) -> bool {
    let mut words = s.chunks_exact(8);
    for chunk in &mut words {
        let word = u64::from_ne_bytes(
            chunk
                .try_into()
                .unwrap_or_else(|_| unreachable!("chunks of 8 bytes")),
        );
        // A byte below 0x20 (bytes of 0x80 and above never match: their high bit is set in `word`).
        let control = word.wrapping_sub(splat(0x20)) & !word & HIGHS != 0;
        if control || has_zero_byte(word ^ splat(b'"')) || has_zero_byte(word ^ splat(b'\\')) {
            return true;
        }
    }
    words
        .remainder()
        .iter()
        .any(|&b| b < 0x20 || b == b'"' || b == b'\\')
}

/// The length of `s` written as a JSON string by [`JsonText::str`], quotes included.
pub(crate) fn json_str_len(s: &str) -> u64 {
    let len = if needs_escape(s.as_bytes()) {
        // Rare (ids and names seldom hold a quote or a control character): measured as written.
        serde_json::to_string(s).map_or(0, |escaped| escaped.len())
    } else {
        s.len() + 2
    };
    len as u64
}

/// Where a piece of an answer that repeats from one entry to the next was written last
/// ([`JsonText::repeat`]); nowhere yet by default.
#[derive(Default)]
pub(crate) struct Repeat(Option<std::ops::Range<usize>>);

impl JsonText {
    /// A text written after `prefix` (kept as it is).
    pub(crate) fn after(prefix: String) -> Self {
        JsonText { out: prefix }
    }

    /// An empty text with room for `capacity` bytes.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        JsonText {
            out: String::with_capacity(capacity),
        }
    }

    /// Literal JSON text (punctuation, `"key":`), written as it is. Not inlined: it is called at every
    /// key of every answer, and a call is smaller than the append it makes.
    #[inline(never)]
    pub(crate) fn raw(&mut self, text: &str) -> &mut Self {
        self.out.push_str(text);
        self
    }

    /// ASCII bytes (digits, a time's text), written as they are.
    fn ascii(&mut self, bytes: &[u8]) -> &mut Self {
        // Always `Ok`: the callers pass ASCII only.
        self.out
            .push_str(std::str::from_utf8(bytes).unwrap_or_default());
        self
    }

    /// A JSON string.
    pub(crate) fn str(&mut self, s: &str) -> &mut Self {
        if needs_escape(s.as_bytes()) {
            // A `&str` always serializes.
            if let Ok(escaped) = serde_json::to_string(s) {
                self.out.push_str(&escaped);
            }
        } else {
            self.out.reserve(s.len() + 2);
            self.out.push('"');
            self.out.push_str(s);
            self.out.push('"');
        }
        self
    }

    /// A JSON string, or `null`.
    pub(crate) fn opt_str(&mut self, s: Option<&str>) -> &mut Self {
        match s {
            Some(s) => self.str(s),
            None => self.raw("null"),
        }
    }

    /// An integer, negative or not.
    pub(crate) fn int(&mut self, n: i64) -> &mut Self {
        self.out.push_str(itoa::Buffer::new().format(n));
        self
    }

    /// A non-negative integer, written by `itoa` (what `serde_json` writes integers with).
    pub(crate) fn uint(&mut self, n: u64) -> &mut Self {
        self.out.push_str(itoa::Buffer::new().format(n));
        self
    }

    /// A time as a JSON string, `"YYYY-MM-DDTHH:MM:SS.ffffffZ"` (what `timefmt::iso_micros` writes),
    /// without a `String` in between.
    pub(crate) fn iso_micros(&mut self, ms: i64) -> &mut Self {
        self.iso(ms, true)
    }

    /// A time as a JSON string, `"YYYY-MM-DDTHH:MM:SS.mmmZ"` (what `timefmt::iso_millis` writes).
    pub(crate) fn iso_millis(&mut self, ms: i64) -> &mut Self {
        self.iso(ms, false)
    }

    /// A time as a JSON string, with microseconds or milliseconds.
    fn iso(&mut self, ms: i64, micros: bool) -> &mut Self {
        let (digits, len) = iso_bytes(ms, micros);
        self.out.push('"');
        self.ascii(&digits[..len]);
        self.out.push('"');
        self
    }

    /// A number with a fraction, as `serde_json` writes an `f64`.
    pub(crate) fn float(&mut self, f: f64) -> &mut Self {
        // An `f64` always serializes (a non-finite one as `null`).
        if let Ok(text) = serde_json::to_string(&f) {
            self.out.push_str(&text);
        }
        self
    }

    /// `true` or `false`.
    pub(crate) fn bool(&mut self, b: bool) -> &mut Self {
        self.raw(if b { "true" } else { "false" })
    }

    /// `s` as a JSON string after `key`, then again after `alias` (an answer's snake and camel case
    /// keys): checked for escapes once, then copied.
    pub(crate) fn str_twice(&mut self, key: &str, alias: &str, s: &str) -> &mut Self {
        self.raw(key);
        let start = self.out.len();
        self.str(s);
        let end = self.out.len();
        self.raw(alias);
        self.out.extend_from_within(start..end);
        self
    }

    /// What `write` writes, or, when `same` says it would write what it wrote last time through
    /// `repeat` (the same partition's names on the next entry of an answer), a copy of that text.
    pub(crate) fn repeat(
        &mut self,
        repeat: &mut Repeat,
        same: bool,
        write: impl FnOnce(&mut Self),
    ) -> &mut Self {
        match &repeat.0 {
            Some(last) if same => self.out.extend_from_within(last.clone()),
            _ => {
                let start = self.out.len();
                write(self);
                repeat.0 = Some(start..self.out.len());
            }
        }
        self
    }

    /// A payload: its JSON text as stored.
    pub(crate) fn payload(&mut self, payload: &Payload) -> &mut Self {
        self.raw(payload.get())
    }

    /// The text written, as bytes.
    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.out.into_bytes()
    }

    /// The text written.
    pub(crate) fn into_string(self) -> String {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(write: impl FnOnce(&mut JsonText)) -> String {
        let mut t = JsonText::with_capacity(0);
        write(&mut t);
        String::from_utf8(t.into_bytes()).unwrap()
    }

    #[test]
    fn strings_are_written_as_serde_json_writes_them() {
        let cases = [
            "",
            "plain",
            "0192f3c4-5e6f-7a8b-9c0d-e1f2a3b4c5d6",
            "quote\" inside a long enough string",
            "back\\slash",
            "tab\tand\nnewline",
            "\u{1}\u{1f}\u{7f}",
            "é ü 漢字 😀 and more bytes than eight",
            "exactly8",
            "seven\"7",
            "\u{80}\u{ff}\u{100}",
        ];
        for s in cases {
            assert_eq!(
                text(|t| {
                    t.str(s);
                }),
                serde_json::to_string(s).unwrap(),
                "{s:?}"
            );
            assert_eq!(
                json_str_len(s),
                text(|t| _ = t.str(s)).len() as u64,
                "{s:?}"
            );
        }
        for b in 0u8..=255 {
            let s = format!("abcdefg{}hijklmn", b as char);
            assert_eq!(
                text(|t| {
                    t.str(&s);
                }),
                serde_json::to_string(&s).unwrap(),
                "{b}"
            );
            assert_eq!(
                json_str_len(&s),
                text(|t| _ = t.str(&s)).len() as u64,
                "{b}"
            );
        }
    }

    #[test]
    fn repeated_pieces_are_copied_only_when_the_same() {
        let mut repeat = Repeat::default();
        let written = text(|t| {
            t.str_twice("{\"a\":", ",\"A\":", "x\"y");
            // `same` before anything was written: written, not copied.
            t.repeat(&mut repeat, true, |t| {
                t.raw(",").str("p1");
            });
            t.repeat(&mut repeat, true, |_| unreachable!("copied"));
            t.repeat(&mut repeat, false, |t| {
                t.raw(",").str("p2");
            });
            t.repeat(&mut repeat, true, |_| unreachable!("copied"));
            t.raw("}");
        });
        assert_eq!(written, r#"{"a":"x\"y","A":"x\"y","p1","p1","p2","p2"}"#);
    }

    #[test]
    fn numbers_and_literals() {
        for n in [0u64, 7, 10, 99, 100, 12_345, u32::MAX as u64, u64::MAX] {
            assert_eq!(
                text(|t| {
                    t.uint(n);
                }),
                n.to_string()
            );
        }
        for n in [0i64, 1, -1, 42, -1_000_007, i64::MIN, i64::MAX] {
            assert_eq!(
                text(|t| {
                    t.int(n);
                }),
                serde_json::to_string(&n).unwrap()
            );
        }
        assert_eq!(
            text(|t| {
                t.bool(true).raw(",").bool(false).raw(",").opt_str(None);
            }),
            "true,false,null"
        );
    }

    #[test]
    fn floats_are_written_as_serde_json_writes_them() {
        for f in [0.0, 1.0, 2.5, 1000.0, 0.001, 1.234, f64::NAN] {
            assert_eq!(
                text(|t| {
                    t.float(f);
                }),
                serde_json::to_string(&serde_json::json!(f)).unwrap()
            );
        }
    }

    #[test]
    fn times_are_written_as_iso_micros_writes_them() {
        for ms in [
            0i64,
            1,
            999,
            1_767_225_600_123,
            253_402_300_799_999,
            -1,
            i64::MAX,
        ] {
            assert_eq!(
                text(|t| {
                    t.iso_micros(ms);
                }),
                format!("\"{}\"", crate::core::timefmt::iso_micros(ms))
            );
            assert_eq!(
                text(|t| {
                    t.iso_millis(ms);
                }),
                format!("\"{}\"", crate::core::timefmt::iso_millis(ms))
            );
        }
    }
}

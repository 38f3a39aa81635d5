//! Segments: the immutable blocks that hold message payloads (docs/protocol.md §6.3).
//!
//! One segment per push batch per partition. Two formats, told apart by the first byte:
//!
//! ```text
//! format 1 (DEFLATE)   byte 0 = 1, bytes 1.. = raw DEFLATE (miniz_oxide; written at level 1) of a JSON array
//!                      of StoredMessage
//! format 2 (JSON)      byte 0 = 2, bytes 1.. = the same JSON array, uncompressed
//! ```
//!
//! Every build writes format 2 on the request path: a push stores its segment as JSON text, which
//! costs a copy, where DEFLATE cost more than the rest of the push (docs/decisions.md, "Core speed,
//! second pass"). Builds with the `deflate` feature (the default: the Worker, native tools) mark such
//! a segment as waiting for compression in its index entry, and maintenance later rewrites the
//! segments that are still stored as format 1 ([`compress`]); a segment deleted before that (consumed
//! and expired) is never compressed. Both formats are read by every build with `deflate`. The npm
//! module is built without it and never compresses: miniz_oxide is about 17 KB of the gzipped
//! download, and a browser's IndexedDB sits on the user's own disk (docs/decisions.md, "JS module
//! size"). A build without `deflate` refuses format 1 with a clear error rather than guessing.
//!
//! Readers refuse versions they do not know, so a future format can be added beside these. A pop
//! decodes only the segments that cover the offsets it reads.

use super::api::{Payload, SharedStr};
use super::fields::{FieldError, FromCompound, List, Shaped};
use super::json_text::JsonText;
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Serialize;
use std::rc::Rc;

/// Format 1: DEFLATE-compressed JSON (written by builds with the `deflate` feature).
pub const SEGMENT_FORMAT_DEFLATE: u8 = 1;
/// Format 2: uncompressed JSON (written by builds without the `deflate` feature).
pub const SEGMENT_FORMAT_JSON: u8 = 2;
/// The newest format any build understands.
const NEWEST_FORMAT: u8 = SEGMENT_FORMAT_JSON;

/// The segment format pushes write (every build): JSON text, compressed later by maintenance in builds
/// with the `deflate` feature ([`compress`]).
pub const WRITE_FORMAT: u8 = SEGMENT_FORMAT_JSON;

/// True when this build compresses segments in maintenance (the `deflate` feature).
pub const COMPRESSES: bool = cfg!(feature = "deflate");

/// One message as stored in a segment.
///
/// Read back in one pass by [`decode`]: the payload captured as JSON text, the other fields by the
/// field reader's rules (module `fields`): unknown fields are ignored, `r` and `s` may be missing or
/// `null`, the others are required (`p` may be `null`). Not a derived `Deserialize`: its typed errors
/// pull float formatting and more into the browser module.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredMessage {
    /// 0-based offset in its partition.
    #[serde(rename = "o")]
    pub offset: u64,
    /// Message id (UUIDv7).
    #[serde(rename = "i")]
    pub id: SharedStr,
    /// Transaction id (dedup key).
    #[serde(rename = "t")]
    pub transaction_id: SharedStr,
    /// Optional trace id.
    #[serde(rename = "r", default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<SharedStr>,
    /// Optional authenticated producer.
    #[serde(rename = "s", default, skip_serializing_if = "Option::is_none")]
    pub producer_sub: Option<SharedStr>,
    /// Push time, Unix ms.
    #[serde(rename = "c")]
    pub created_at_ms: i64,
    /// The payload, as JSON text embedded in the segment's JSON.
    #[serde(rename = "p")]
    pub payload: Payload,
}

/// The allocator's bookkeeping and rounding per allocation, an estimate (dlmalloc and talc keep a header of
/// a word or two and round sizes up to two words): counted in each allocation a cached segment holds.
pub const ALLOCATION_OVERHEAD: usize = 2 * std::mem::size_of::<usize>();

/// An `Rc`'s strong and weak counts, which share its allocation.
pub const RC_COUNTS: usize = 2 * std::mem::size_of::<usize>();

/// What a decoded segment's messages hold in memory, in bytes, as the segment cache counts them against its
/// budget: each message's own fields (`size_of::<StoredMessage>()`) and every text they keep alive, each
/// allocation once and whole (a segment read from the store keeps its whole JSON text; a pushed one the
/// text of [`encode_shared`]; a payload of its own its own allocation), with the allocator's bookkeeping.
/// The cache adds its per-segment structures (`SegmentCache::insert`). The budget is the memory the cache
/// may take, so this must not undercount (tests/cache_weight.rs checks it against a counting allocator).
pub fn decoded_weight(messages: &[StoredMessage]) -> usize {
    // (address, length) of each shared text, each once: parts of one text come one after the other, so
    // only a new text is listed, and the list stays short.
    let mut texts: Vec<(usize, usize)> = Vec::new();
    let mut last = 0;
    let mut own = 0;
    let mut held = |part: &SharedStr| {
        let (address, length) = part.allocation();
        if address != last {
            last = address;
            texts.push((address, length));
        }
    };
    for m in messages {
        held(&m.id);
        held(&m.transaction_id);
        if let Some(t) = &m.trace_id {
            held(t);
        }
        if let Some(sub) = &m.producer_sub {
            held(sub);
        }
        match m.payload.shared() {
            Some(part) => held(part),
            None => own += m.payload.len() + ALLOCATION_OVERHEAD,
        }
    }
    super::sort::sort_by_key(&mut texts, |&(address, _)| address);
    texts.dedup_by_key(|t| t.0);
    let shared: usize = texts
        .iter()
        .map(|&(_, length)| length + RC_COUNTS + ALLOCATION_OVERHEAD)
        .sum();
    std::mem::size_of_val(messages) + own + shared
}

/// Appends the JSON array of `messages` to `out`: byte for byte what `serde_json` writes for them
/// through [`StoredMessage`]'s `Serialize` (the fields in its order, `r` and `s` only when set), written
/// with [`JsonText`] (literal keys, strings copied unless they need escaping, the payload's text as it
/// is), without `serde_json`'s per-field writer calls or a payload read from a segment checked again.
fn write_json(messages: &[StoredMessage], out: String) -> String {
    let mut t = JsonText::after(out);
    t.raw("[");
    for (i, m) in messages.iter().enumerate() {
        t.raw(if i == 0 { "{\"o\":" } else { ",{\"o\":" })
            .uint(m.offset)
            .raw(",\"i\":")
            .str(&m.id)
            .raw(",\"t\":")
            .str(&m.transaction_id);
        if let Some(r) = &m.trace_id {
            t.raw(",\"r\":").str(r);
        }
        if let Some(sub) = &m.producer_sub {
            t.raw(",\"s\":").str(sub);
        }
        t.raw(",\"c\":")
            .int(m.created_at_ms)
            .raw(",\"p\":")
            .payload(&m.payload)
            .raw("}");
    }
    t.raw("]");
    t.into_string()
}

/// The bytes a segment of [`WRITE_FORMAT`] takes besides its messages' [`message_bytes`]: the format
/// byte and the brackets, less the comma the first message goes without.
pub const FRAME_BYTES: u64 = 2;

/// The bytes one message takes in a segment of [`WRITE_FORMAT`] (as `write_json` writes it), its comma
/// included: `,{"o":…,"i":…,"t":…,"r":…,"s":…,"c":…,"p":…}`, `r` and `s` only when set. Its id is a
/// UUID (36 characters), and so is its transaction id when `transaction_id` is `None` (minted). What the
/// storage quota counts a push by before anything of it is applied (`Broker::check_quota`).
pub fn message_bytes(
    offset: u64,
    created_ms: i64,
    transaction_id: Option<&str>,
    trace_id: Option<&str>,
    producer_sub: Option<&str>,
    payload: usize,
) -> u64 {
    let digits = |n: u64| n.checked_ilog10().map_or(1, |d| u64::from(d) + 1);
    let text = |s: &str| super::json_text::json_str_len(s);
    let field = |s: Option<&str>| s.map_or(0, |s| 5 + text(s));
    // `,{"o":` and `,"i":` `,"t":` `,"c":` `,"p":` and `}`; a UUID and its quotes.
    const KEYS: u64 = 6 + 4 * 5 + 1;
    const UUID: u64 = 38;
    KEYS + digits(offset)
        + UUID
        + transaction_id.map_or(UUID, text)
        + field(trace_id)
        + field(producer_sub)
        + digits(created_ms.unsigned_abs())
        + u64::from(created_ms < 0)
        + payload as u64
}

/// Encodes a batch of messages (offsets ascending, contiguous) into a segment of [`WRITE_FORMAT`].
pub fn encode(messages: &[StoredMessage]) -> Vec<u8> {
    encode_as(WRITE_FORMAT, messages)
}

/// The segment text of format 2: the format byte, then the JSON array (a format byte below 0x20 is
/// one character of text).
fn json_segment(messages: &[StoredMessage]) -> String {
    // Written straight into the segment, sized from the payloads (the other fields of a message take
    // about a hundred bytes), so it is allocated once and never copied.
    let estimate: usize = messages.iter().map(|m| m.payload.len() + 128).sum();
    let mut out = String::with_capacity(estimate + 2);
    out.push(char::from(SEGMENT_FORMAT_JSON));
    write_json(messages, out)
}

/// [`encode`] for a batch the segment cache will hold: the segment, and the messages as a read of it
/// gives them back, their ids, transaction ids, trace ids and payloads parts of one text that holds just
/// those, one after the other. So a pushed batch is cached as one allocation of its messages' own texts,
/// not as the push's own pieces (each payload and sent id a part of its request body, which would keep
/// the whole body alive; each minted id an allocation of its own), and not as a copy of the whole
/// segment: its keys, offsets and times are in the messages' other fields, and the cache never reads
/// them as text (docs/decisions.md, "What a pushed segment keeps in memory").
pub fn encode_shared(mut messages: Vec<StoredMessage>) -> (Vec<u8>, Vec<StoredMessage>) {
    debug_assert_eq!(WRITE_FORMAT, SEGMENT_FORMAT_JSON);
    let segment = json_segment(&messages);
    let length: usize = messages
        .iter()
        .map(|m| {
            m.id.len()
                + m.transaction_id.len()
                + m.trace_id.as_ref().map_or(0, |t| t.len())
                + m.payload.len()
        })
        .sum();
    let mut text = String::with_capacity(length);
    for m in &messages {
        text.push_str(&m.id);
        text.push_str(&m.transaction_id);
        if let Some(t) = &m.trace_id {
            text.push_str(t);
        }
        text.push_str(m.payload.get());
    }
    let shared: Rc<str> = Rc::from(text);
    let mut at = 0;
    let mut next = |part: &str| {
        let start = at;
        at += part.len();
        SharedStr::within(&shared, start, at).unwrap_or_else(|| SharedStr::from(part))
    };
    for m in &mut messages {
        m.id = next(&m.id);
        m.transaction_id = next(&m.transaction_id);
        if let Some(t) = &mut m.trace_id {
            *t = next(t);
        }
        m.payload = Payload::in_text(next(m.payload.get()));
    }
    (segment.into_bytes(), messages)
}

/// Encodes a batch in a given format ([`SEGMENT_FORMAT_JSON`], or [`SEGMENT_FORMAT_DEFLATE`] in builds
/// with the `deflate` feature).
///
/// # Panics
/// On a format this build cannot write (a programming error: the formats are constants).
pub fn encode_as(format: u8, messages: &[StoredMessage]) -> Vec<u8> {
    match format {
        SEGMENT_FORMAT_JSON => json_segment(messages).into_bytes(),
        #[cfg(feature = "deflate")]
        SEGMENT_FORMAT_DEFLATE => encode_deflate_at(deflate::DEFLATE_LEVEL, messages),
        _ => panic!("this build cannot write segment format {format}"),
    }
}

/// A format 1 segment compressed at DEFLATE `level` (0 to 10): what the core benchmark compares
/// levels with. Any level reads back the same.
#[cfg(feature = "deflate")]
pub fn encode_deflate_at(level: u8, messages: &[StoredMessage]) -> Vec<u8> {
    JSON_BUFFER.with(|cell| {
        let mut json = cell.borrow_mut();
        json.clear();
        *json = write_json(messages, std::mem::take(&mut *json));
        let mut out = Vec::with_capacity(json.len() / 4 + 64);
        out.push(SEGMENT_FORMAT_DEFLATE);
        deflate::deflate_into(json.as_bytes(), level, &mut out);
        out
    })
}

#[cfg(feature = "deflate")]
thread_local! {
    /// The JSON text of a segment being compressed, reused (a segment's text is a large buffer).
    static JSON_BUFFER: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// A stored segment rewritten as format 1 (DEFLATE), for maintenance: `None` when it is format 1
/// already. The JSON text is compressed as it is, so the segment decodes to the same messages. Fails on
/// a segment this build cannot read (the caller leaves it as it is).
#[cfg(feature = "deflate")]
pub fn compress(stored: &[u8]) -> Result<Option<Vec<u8>>, String> {
    match stored.first() {
        Some(&SEGMENT_FORMAT_DEFLATE) => Ok(None),
        Some(&SEGMENT_FORMAT_JSON) => {
            let json = &stored[1..];
            let mut out = Vec::with_capacity(json.len() / 4 + 64);
            out.push(SEGMENT_FORMAT_DEFLATE);
            deflate::deflate_into(json, deflate::DEFLATE_LEVEL, &mut out);
            Ok(Some(out))
        }
        Some(v) => Err(format!("unknown segment format {v}")),
        None => Err("empty segment".to_string()),
    }
}

/// DEFLATE with one reused compressor per thread (builds with the `deflate` feature).
#[cfg(feature = "deflate")]
mod deflate {
    /// The level maintenance compresses segments at: level 1 costs a sixth of level 6's time for about
    /// a fifth more bytes (the core benchmark's encoding table; docs/decisions.md, "Core speed: where
    /// the time went"). Readers inflate any level.
    pub(super) const DEFLATE_LEVEL: u8 = 1;

    thread_local! {
        /// One compressor per thread, reset between segments: a fresh `CompressorOxide` allocates and
        /// clears a few hundred KiB of tables, which dominated small pushes.
        /// Kept with the level it was made for; another level makes a new one.
        static COMPRESSOR: std::cell::RefCell<Option<(u8, Box<CompressorOxide>)>> = const { std::cell::RefCell::new(None) };
    }

    use miniz_oxide::deflate::core::{
        compress, create_comp_flags_from_zip_params, CompressorOxide, TDEFLFlush, TDEFLStatus,
    };
    use miniz_oxide::inflate::core::{decompress, inflate_flags, DecompressorOxide};
    use miniz_oxide::inflate::TINFLStatus;

    thread_local! {
        /// One decompressor and one output buffer per thread, reused by every segment read back: a
        /// fresh output vector grown by doubling (and its copies) was a visible share of a pop.
        static INFLATE: std::cell::RefCell<(Box<DecompressorOxide>, Vec<u8>)> =
            std::cell::RefCell::new((Box::default(), Vec::new()));
    }

    /// The largest inflate buffer kept between segments (a rare huge segment does not pin its size).
    const KEPT_INFLATE_BYTES: usize = 1 << 20;

    /// Inflates raw DEFLATE `input` into the thread's reused buffer and hands the text to `then`.
    pub(super) fn inflate_then<T>(
        input: &[u8],
        then: impl FnOnce(&[u8]) -> Result<T, String>,
    ) -> Result<T, String> {
        INFLATE.with(|cell| {
            let mut guard = cell.borrow_mut();
            let (inflater, out) = &mut *guard;
            inflater.init();
            // Only what this call writes is read back (the output buffer does not wrap), so the
            // buffer is grown but never cleared.
            let want = input.len().saturating_mul(4).max(1024);
            if out.len() < want {
                out.resize(want, 0);
            }
            let mut in_pos = 0;
            let mut out_pos = 0;
            loop {
                let (status, read, written) = decompress(
                    inflater,
                    &input[in_pos..],
                    out,
                    out_pos,
                    inflate_flags::TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF,
                );
                in_pos += read;
                out_pos += written;
                match status {
                    TINFLStatus::Done => break,
                    TINFLStatus::HasMoreOutput => {
                        let grow = out.len().max(1024);
                        out.resize(out.len() + grow, 0);
                    }
                    other => return Err(format!("segment does not inflate: {other:?}")),
                }
            }
            let result = then(&out[..out_pos]);
            if out.len() > KEPT_INFLATE_BYTES {
                *out = Vec::new();
            }
            result
        })
    }

    /// Raw DEFLATE of `input`, appended to `out` (the same stream `miniz_oxide::deflate::compress_to_vec`
    /// produces, with a reused compressor).
    pub(super) fn deflate_into(mut input: &[u8], level: u8, out: &mut Vec<u8>) {
        COMPRESSOR.with(|cell| {
            let mut slot = cell.borrow_mut();
            if slot.as_ref().is_none_or(|(made_for, _)| *made_for != level) {
                let flags = create_comp_flags_from_zip_params(level.into(), 0, 0);
                *slot = Some((level, Box::new(CompressorOxide::new(flags))));
            }
            let (_, compressor) = slot.as_mut().expect("made above");
            compressor.reset();
            let start = out.len();
            out.resize(start + (input.len() / 4).max(64), 0);
            let mut pos = start;
            loop {
                let (status, bytes_in, bytes_out) =
                    compress(compressor, input, &mut out[pos..], TDEFLFlush::Finish);
                pos += bytes_out;
                match status {
                    TDEFLStatus::Done => break,
                    TDEFLStatus::Okay => {
                        input = &input[bytes_in..];
                        if out.len() - pos < 64 {
                            let grow = out.len().max(64);
                            out.resize(out.len() + grow, 0);
                        }
                    }
                    // Compressing an in-memory buffer into a growing buffer cannot fail.
                    other => unreachable!("deflate failed: {other:?}"),
                }
            }
            out.truncate(pos);
        });
    }
}

/// Decodes a segment. Fails on an unknown version, corrupt bytes, or (in a build without the
/// `deflate` feature) a DEFLATE segment.
pub fn decode(bytes: &[u8]) -> Result<Vec<StoredMessage>, String> {
    match bytes.first() {
        Some(&SEGMENT_FORMAT_JSON) => decode_json(&bytes[1..]),
        #[cfg(feature = "deflate")]
        Some(&SEGMENT_FORMAT_DEFLATE) => deflate::inflate_then(&bytes[1..], decode_json),
        #[cfg(not(feature = "deflate"))]
        Some(&SEGMENT_FORMAT_DEFLATE) => Err(
            "segment is DEFLATE-compressed (format 1), which this build (without the `deflate` \
             feature) cannot read"
                .to_string(),
        ),
        Some(v) => Err(format!(
            "unknown segment format {v}: this build reads formats up to {NEWEST_FORMAT} (written by a \
             newer queen-edge?)"
        )),
        None => Err("empty segment".to_string()),
    }
}

/// The JSON array of a segment, parsed in one pass (payloads captured as text). Errors read like the
/// field reader's: `segment JSON is corrupt: field `o`: expected an unsigned integer`.
///
/// Segments as this broker writes them take a direct path first ([`exact`]); anything else (older
/// writers' whitespace, unknown or `null` fields, escapes in ids, damage) takes the general reader,
/// which also gives the errors.
fn decode_json(json: &[u8]) -> Result<Vec<StoredMessage>, String> {
    if let Some(messages) = exact::decode(json) {
        return Ok(messages);
    }
    let corrupt = |e: &str| format!("segment JSON is corrupt: {e}");
    let Ok(json) = std::str::from_utf8(json) else {
        return Err(corrupt("not UTF-8"));
    };
    match serde_json::from_str(json) {
        Err(e) => Err(corrupt(&e.to_string())),
        Ok(Shaped::Not(_)) => Err(corrupt("expected an array of messages")),
        Ok(Shaped::Is(List(items))) => items
            .into_iter()
            .map(|item| match item {
                Shaped::Is(MessageIn(m)) => m.map_err(|e| corrupt(&e)),
                Shaped::Not(kind) => Err(corrupt(&format!("expected a JSON object, found {kind}"))),
            })
            .collect(),
    }
}

/// One message of a segment as read (or why it cannot be).
struct MessageIn(Result<StoredMessage, FieldError>);

/// The keys of [`StoredMessage`]: a slot for each field but the payload (`p`, [`P`]).
const KEYS: [&str; 7] = ["o", "i", "t", "r", "s", "c", "p"];
const P: usize = 6;

/// A key of a segment message: its index in [`KEYS`], `None` for a key this build does not know.
struct Key(Option<usize>);

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E>(self, key: &str) -> Result<Key, E> {
                Ok(Key(KEYS.iter().position(|k| *k == key)))
            }
        }
        deserializer.deserialize_identifier(KeyVisitor)
    }
}

impl<'de> FromCompound<'de> for MessageIn {
    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Shaped<Self>, A::Error> {
        let mut slots: [Option<Scalar>; P] = Default::default();
        let mut payload = None;
        while let Some(Key(key)) = map.next_key()? {
            match key {
                Some(P) => payload = Some(map.next_value()?),
                Some(i) => slots[i] = Some(map.next_value()?),
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Shaped::Is(MessageIn(stored_message(slots, payload))))
    }
}

/// One field of a segment message as read: numbers and strings as they are (no `Value` tree, which
/// cost an allocation per field), anything else only as "not what a field holds".
enum Scalar {
    Null,
    Unsigned(u64),
    Negative(i64),
    Text(SharedStr),
    Other,
}

impl Scalar {
    fn into_u64(self) -> Option<u64> {
        match self {
            Scalar::Unsigned(n) => Some(n),
            _ => None,
        }
    }

    fn into_i64(self) -> Option<i64> {
        match self {
            Scalar::Unsigned(n) => i64::try_from(n).ok(),
            Scalar::Negative(n) => Some(n),
            _ => None,
        }
    }

    fn into_text(self) -> Option<SharedStr> {
        match self {
            Scalar::Text(s) => Some(s),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ScalarVisitor;
        impl<'de> Visitor<'de> for ScalarVisitor {
            type Value = Scalar;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_unit<E>(self) -> Result<Scalar, E> {
                Ok(Scalar::Null)
            }
            fn visit_none<E>(self) -> Result<Scalar, E> {
                Ok(Scalar::Null)
            }
            fn visit_u64<E>(self, n: u64) -> Result<Scalar, E> {
                Ok(Scalar::Unsigned(n))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Scalar, E> {
                Ok(match u64::try_from(n) {
                    Ok(n) => Scalar::Unsigned(n),
                    Err(_) => Scalar::Negative(n),
                })
            }
            fn visit_f64<E>(self, _: f64) -> Result<Scalar, E> {
                Ok(Scalar::Other)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Scalar, E> {
                Ok(Scalar::Other)
            }
            fn visit_str<E>(self, s: &str) -> Result<Scalar, E> {
                Ok(Scalar::Text(s.into()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Scalar, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scalar, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other)
            }
        }
        deserializer.deserialize_any(ScalarVisitor)
    }
}

/// A required field (the field reader's rule and words, module `fields`).
fn required<T>(
    key: &str,
    value: Option<Scalar>,
    expected: &str,
    convert: fn(Scalar) -> Option<T>,
) -> Result<T, FieldError> {
    match value {
        None => Err(format!("missing field `{key}`")),
        Some(v) => convert(v).ok_or_else(|| format!("field `{key}`: expected {expected}")),
    }
}

/// An optional field (absent or `null` is `None`).
fn optional<T>(
    key: &str,
    value: Option<Scalar>,
    expected: &str,
    convert: fn(Scalar) -> Option<T>,
) -> Result<Option<T>, FieldError> {
    value
        .map(|v| convert(v).ok_or_else(|| format!("field `{key}`: expected {expected}")))
        .transpose()
}

/// A message from its fields (a `null` counts as absent, but for the payload).
fn stored_message(
    slots: [Option<Scalar>; P],
    payload: Option<Payload>,
) -> Result<StoredMessage, FieldError> {
    let [o, i, t, r, s, c] = slots.map(|v| v.filter(|v| !matches!(v, Scalar::Null)));
    Ok(StoredMessage {
        offset: required("o", o, "an unsigned integer", Scalar::into_u64)?,
        id: required("i", i, "a string", Scalar::into_text)?,
        transaction_id: required("t", t, "a string", Scalar::into_text)?,
        trace_id: optional("r", r, "a string", Scalar::into_text)?,
        producer_sub: optional("s", s, "a string", Scalar::into_text)?,
        created_at_ms: required("c", c, "an integer", Scalar::into_i64)?,
        payload: payload.ok_or_else(|| "missing field `p`".to_string())?,
    })
}

/// The direct reader of segments in exactly the layout [`encode`] writes: no whitespace, the fields
/// in declaration order (`o`, `i`, `t`, `r`?, `s`?, `c`, `p`), ids without escapes. It gives up
/// (`None`) at the first byte that differs, and the general reader takes over; what it accepts, it
/// reads to the same messages (the test `the_direct_reader_agrees_with_the_general_one`). The
/// payload is checked by serde_json as in the general reader (it is one valid JSON value).
///
/// The segment's JSON text is kept once, shared: each message's ids and payload are places in it
/// ([`SharedStr::within`], [`Payload::in_text`]), so a segment costs a few allocations, not a few
/// per message, to read and to evict.
mod exact {
    use super::{Payload, SharedStr, StoredMessage};
    use crate::core::api::first_raw_value;
    use std::rc::Rc;

    /// A cursor over a segment's JSON text.
    struct Cursor<'a> {
        shared: &'a Rc<str>,
        text: &'a [u8],
        at: usize,
    }

    impl<'a> Cursor<'a> {
        /// Consumes `expected` if the text continues with it.
        fn eat(&mut self, expected: &[u8]) -> Option<()> {
            let end = self.at.checked_add(expected.len())?;
            (self.text.get(self.at..end)? == expected).then(|| self.at = end)
        }

        /// A run of ASCII digits as an unsigned integer (no leading zeros, as JSON says).
        fn unsigned(&mut self) -> Option<u64> {
            let start = self.at;
            let mut value: u64 = 0;
            while let Some(d) = self.text.get(self.at).filter(|b| b.is_ascii_digit()) {
                value = value.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
                self.at += 1;
            }
            let digits = self.at - start;
            (digits > 0 && (digits == 1 || self.text[start] != b'0')).then_some(value)
        }

        /// A signed integer that fits `i64`.
        fn signed(&mut self) -> Option<i64> {
            if self.eat(b"-").is_some() {
                let magnitude = self.unsigned()?;
                0i64.checked_sub_unsigned(magnitude)
            } else {
                i64::try_from(self.unsigned()?).ok()
            }
        }

        /// A string without escapes, as a part of the shared text (the opening quote already eaten).
        fn text(&mut self) -> Option<SharedStr> {
            let start = self.at;
            let len = self.text[start..]
                .iter()
                .position(|b| *b == b'"' || *b == b'\\' || *b < 0x20)?;
            let end = start + len;
            if self.text[end] != b'"' {
                return None;
            }
            self.at = end + 1;
            SharedStr::within(self.shared, start, end)
        }

        /// An optional string field `"<key>":"..."` that may follow.
        fn optional_text(&mut self, key_and_quote: &[u8]) -> Option<Option<SharedStr>> {
            if self.eat(key_and_quote).is_some() {
                self.text().map(Some)
            } else {
                Some(None)
            }
        }

        /// One JSON value's text, checked by serde_json, as a part of the shared text.
        fn payload(&mut self) -> Option<Payload> {
            let (raw, after) = first_raw_value(self.shared.get(self.at..)?)?;
            let end = self.at + after;
            let start = end.checked_sub(raw.get().len())?;
            // The value's text ends where the parser stopped (no whitespace after it in this layout).
            if self.text.get(start..end)? != raw.get().as_bytes() {
                return None;
            }
            self.at = end;
            SharedStr::within(self.shared, start, end).map(Payload::in_text)
        }
    }

    /// The messages of a segment's JSON text, or `None` where it differs from what [`super::encode`]
    /// writes (or is not UTF-8).
    pub(super) fn decode(json: &[u8]) -> Option<Vec<StoredMessage>> {
        let shared: Rc<str> = Rc::from(std::str::from_utf8(json).ok()?);
        let mut c = Cursor {
            shared: &shared,
            text: shared.as_bytes(),
            at: 0,
        };
        c.eat(b"[")?;
        let mut messages = Vec::new();
        if c.eat(b"]").is_some() {
            return (c.at == json.len()).then_some(messages);
        }
        loop {
            c.eat(b"{\"o\":")?;
            let offset = c.unsigned()?;
            c.eat(b",\"i\":\"")?;
            let id = c.text()?;
            c.eat(b",\"t\":\"")?;
            let transaction_id = c.text()?;
            let trace_id = c.optional_text(b",\"r\":\"")?;
            let producer_sub = c.optional_text(b",\"s\":\"")?;
            c.eat(b",\"c\":")?;
            let created_at_ms = c.signed()?;
            c.eat(b",\"p\":")?;
            let payload = c.payload()?;
            c.eat(b"}")?;
            messages.push(StoredMessage {
                offset,
                id,
                transaction_id,
                trace_id,
                producer_sub,
                created_at_ms,
                payload,
            });
            if messages.len() == 1 {
                // Sized once, from the first message's length (messages of a batch are alike).
                messages.reserve(json.len() / c.at);
            }
            if c.eat(b"]").is_some() {
                return (c.at == json.len()).then_some(messages);
            }
            c.eat(b",")?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn the_direct_reader_agrees_with_the_general_one() {
        let general = |json: &[u8]| -> Vec<StoredMessage> {
            match serde_json::from_str(std::str::from_utf8(json).unwrap()).unwrap() {
                Shaped::Is(List(items)) => items
                    .into_iter()
                    .map(|item| match item {
                        Shaped::Is(MessageIn(m)) => m.unwrap(),
                        Shaped::Not(_) => panic!("not an object"),
                    })
                    .collect(),
                Shaped::Not(_) => panic!("not an array"),
            }
        };
        let mut batch: Vec<_> = (0..20)
            .map(|i| {
                msg(
                    i,
                    json!({"i": i, "s": "q\"uote\\ \u{e9}", "n": [1.5, null, {"a": {}}]}),
                )
            })
            .collect();
        batch[3].trace_id = Some("trace-3".into());
        batch[4].producer_sub = Some("sub é".into());
        batch[5].created_at_ms = -42;
        batch[6].payload = json!(null).into();
        batch[7].payload = json!(7).into();
        batch[8].payload = json!("text").into();
        batch[9].offset = u64::MAX;
        for segment in [&batch[..], &batch[..1], &[]] {
            let json = serde_json::to_vec(segment).unwrap();
            let direct = exact::decode(&json).expect("what encode writes reads directly");
            assert_eq!(direct, general(&json));
            assert_eq!(direct, segment.to_vec());
        }
        // Anything else is left to the general reader, which reads it or names what is wrong.
        let others: [&[u8]; 9] = [
            br#"[{"o":0,"i":"a","t":"x","c":5,"p":1} ]"#,
            br#"[{"o":0,"i":"a\u0062","t":"x","c":5,"p":1}]"#,
            br#"[{"o":0,"i":"a","t":"x","r":null,"c":5,"p":1}]"#,
            br#"[{"o":0,"i":"a","t":"x","c":5,"p":1,"new":1}]"#,
            br#"[{"o":01,"i":"a","t":"x","c":5,"p":1}]"#,
            br#"[{"o":1.5,"i":"a","t":"x","c":5,"p":1}]"#,
            br#"[{"o":0,"i":"a","t":"x","c":5,"p":tru}]"#,
            br#"[{"o":0,"i":"a","t":"x","c":5,"p":1}]x"#,
            br#"[{"o":0,"i":"a","t":"x","c":99999999999999999999,"p":1}]"#,
        ];
        for json in others {
            assert_eq!(
                exact::decode(json),
                None,
                "{}",
                String::from_utf8_lossy(json)
            );
        }
        assert_eq!(
            decode_json(br#"[{"o":0,"i":"a\u0062","t":"x","c":5,"p":1}]"#).unwrap()[0].id,
            "ab"
        );
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn the_segment_writer_writes_what_serde_json_writes() {
        let mut batch: Vec<_> = (0..12)
            .map(|i| {
                msg(
                    i,
                    json!({"i": i, "s": "q\"uote\\ \u{e9}\n", "n": [1.5, null]}),
                )
            })
            .collect();
        batch[1].trace_id = Some("0192f3c4-5e6f-7a8b-9c0d-e1f2a3b4c5d6".into());
        batch[2].producer_sub = Some("sub \"é\"\t".into());
        batch[3].trace_id = Some("t".into());
        batch[3].producer_sub = Some("s".into());
        batch[4].transaction_id = "tab\tquote\"back\\slash\u{1}".into();
        batch[5].id = "".into();
        batch[6].created_at_ms = -42;
        batch[7].created_at_ms = i64::MIN;
        batch[8].offset = u64::MAX;
        batch[9].payload = json!(null).into();
        batch[10].payload = Payload::from_json(" [1, 2] ".to_string()).unwrap();
        // Payloads that are parts of a segment's text, as a decoded segment holds them.
        let stored = encode_as(SEGMENT_FORMAT_JSON, &batch);
        let decoded = decode(&stored).unwrap();
        for segment in [&batch[..], &batch[..1], &[], &decoded[..]] {
            let mut written = vec![SEGMENT_FORMAT_JSON];
            written.extend(serde_json::to_vec(segment).unwrap());
            assert_eq!(
                String::from_utf8(encode_as(SEGMENT_FORMAT_JSON, segment)).unwrap(),
                String::from_utf8(written).unwrap()
            );
        }
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn a_shared_encoding_is_the_segment_and_its_messages_as_parts_of_one_text_of_their_own() {
        let mut batch: Vec<_> = (0..6)
            .map(|i| msg(i, json!({"i": i, "s": "q\"uote \u{e9}"})))
            .collect();
        // A sent id with escapes, a part of its request body.
        let body: Rc<str> = Rc::from("[\"tab\tquote\"]");
        batch[1].transaction_id = SharedStr::within(&body, 2, 11).unwrap();
        batch[2].id = "".into();
        batch[3].trace_id = Some("trace".into());
        batch[4].payload = Payload::from_json(" [1, 2] ".to_string()).unwrap();
        let (bytes, shared) = encode_shared(batch.clone());
        assert_eq!(bytes, encode(&batch), "the same segment");
        assert_eq!(shared, batch, "the same messages");
        assert_eq!(decode(&bytes).unwrap(), batch);
        // Every text of every message is a part of one text that holds just them, in order: no copy of
        // the segment's keys, offsets and times, and nothing of the request body.
        let parts: Vec<&SharedStr> = shared
            .iter()
            .flat_map(|m| {
                let payload = m.payload.shared().expect("a part of a text");
                [
                    Some(&m.id),
                    Some(&m.transaction_id),
                    m.trace_id.as_ref(),
                    Some(payload),
                ]
            })
            .flatten()
            .collect();
        let first = parts[0];
        let mut at = parts[0].as_ptr() as usize;
        for part in &parts {
            assert!(
                part.shares_with(first),
                "{:?} in the one text",
                part.as_str()
            );
            assert_eq!(
                part.as_ptr() as usize,
                at,
                "{:?} right after the one before",
                part.as_str()
            );
            at += part.len();
        }
        let length: usize = parts.iter().map(|p| p.len()).sum();
        assert!(
            length < bytes.len() / 2,
            "the parts, not the segment: {length} of {}",
            bytes.len()
        );
        assert!(
            !shared[1]
                .transaction_id
                .shares_with(&batch[1].transaction_id),
            "not a part of the body"
        );
        assert!(
            decoded_weight(&shared) <= decoded_weight(&batch),
            "one text weighs no more than the push's pieces"
        );
    }

    fn msg(offset: u64, payload: Value) -> StoredMessage {
        StoredMessage {
            offset,
            id: format!("id-{offset}").into(),
            transaction_id: format!("tx-{offset}").into(),
            trace_id: None,
            producer_sub: None,
            created_at_ms: 1000 + offset as i64,
            payload: payload.into(),
        }
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn message_bytes_adds_up_to_the_segment_written() {
        let uuid = |n: u64| SharedStr::from(format!("0192f3c4-5e6f-7a8b-9c0d-{n:012}"));
        let mut batch: Vec<_> = (0..120)
            .map(|i| StoredMessage {
                id: uuid(i),
                transaction_id: uuid(i + 1000),
                created_at_ms: 1_720_000_000_000,
                ..msg(i * 97, json!({"i": i, "s": "q\"uote\\ \u{e9}\u{1}"}))
            })
            .collect();
        batch[3].trace_id = Some("trace\n3".into());
        batch[4].producer_sub = Some("sub é \"x\"".into());
        batch[5].created_at_ms = -42;
        batch[6].transaction_id = "sent \u{1f} id \t".into();
        batch[7].trace_id = Some("".into());
        batch[8].offset = u64::MAX;
        batch[9].created_at_ms = i64::MIN;
        let minted: Vec<bool> = (0..batch.len()).map(|i| i != 6).collect();
        for (n, segment) in [&batch[..], &batch[..1], &batch[6..7]]
            .into_iter()
            .enumerate()
        {
            let counted: u64 = segment
                .iter()
                .zip(if n == 2 { &minted[6..] } else { &minted[..] })
                .map(|(m, &minted)| {
                    message_bytes(
                        m.offset,
                        m.created_at_ms,
                        (!minted).then_some(&*m.transaction_id),
                        m.trace_id.as_deref(),
                        m.producer_sub.as_deref(),
                        m.payload.len(),
                    )
                })
                .sum();
            assert_eq!(FRAME_BYTES + counted, encode(segment).len() as u64);
        }
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn round_trips_any_json_including_null() {
        let batch = vec![
            msg(0, Value::Null),
            msg(1, json!({})),
            msg(2, json!({"a": [1, 2.5, "x"]})),
        ];
        assert_eq!(decode(&encode(&batch)).unwrap(), batch);
        assert_eq!(
            decode(&encode_as(SEGMENT_FORMAT_JSON, &batch)).unwrap(),
            batch
        );
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn json_segments_are_the_plain_array_after_the_version_byte() {
        let batch = vec![msg(0, json!({"k": 1}))];
        let bytes = encode_as(SEGMENT_FORMAT_JSON, &batch);
        assert_eq!(bytes[0], 2);
        assert_eq!(&bytes[1..], serde_json::to_vec(&batch).unwrap().as_slice());
        let mut corrupt = bytes.clone();
        corrupt.truncate(bytes.len() - 1);
        assert!(decode(&corrupt).unwrap_err().contains("corrupt"));
    }

    #[cfg(feature = "deflate")]
    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn reused_compressor_matches_the_one_shot_stream() {
        let big: Vec<_> = (0..500)
            .map(|i| msg(i, json!({"i": i, "pad": "abc".repeat(i as usize % 40)})))
            .collect();
        for batch in [&big[..1], &big[..]] {
            let json = serde_json::to_vec(batch).unwrap();
            let mut ours = Vec::new();
            deflate::deflate_into(&json, deflate::DEFLATE_LEVEL, &mut ours);
            assert_eq!(
                ours,
                miniz_oxide::deflate::compress_to_vec(&json, deflate::DEFLATE_LEVEL)
            );
            let segment = encode_as(SEGMENT_FORMAT_DEFLATE, batch);
            assert_eq!(segment[0], 1);
            assert_eq!(decode(&segment).unwrap(), batch.to_vec());
        }
    }

    #[cfg(feature = "deflate")]
    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn pushes_write_json_that_maintenance_compresses_to_the_same_messages() {
        let batch: Vec<_> = (0..300)
            .map(|i| msg(i, json!({"i": i, "pad": "abc".repeat(i as usize % 40)})))
            .collect();
        let pushed = encode(&batch);
        assert_eq!(
            pushed[0], SEGMENT_FORMAT_JSON,
            "the request path writes JSON text"
        );
        let compressed = compress(&pushed).unwrap().expect("JSON is compressed");
        assert_eq!(compressed[0], SEGMENT_FORMAT_DEFLATE);
        assert!(compressed.len() * 3 < pushed.len());
        assert_eq!(decode(&compressed).unwrap(), batch);
        assert_eq!(
            compress(&compressed).unwrap(),
            None,
            "format 1 stays as it is"
        );
        assert!(compress(&[9, 1]).is_err() && compress(&[]).is_err());
        // The reused inflate buffer: a small segment after a large one reads only its own bytes.
        let small = encode_as(SEGMENT_FORMAT_DEFLATE, &batch[..2]);
        assert_eq!(decode(&small).unwrap(), batch[..2].to_vec());
        let mut broken = compressed.clone();
        broken.truncate(compressed.len() / 2);
        assert!(decode(&broken).unwrap_err().contains("does not inflate"));
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn payload_text_is_kept_and_the_field_rules_hold() {
        // Written by an older build (or a newer one with an extra field): optional fields missing or
        // null, an unknown field, payloads with whitespace inside and around.
        let json = br#"[{"o":0,"i":"a","t":"x","c":5,"p": { "k" : [1, 2] } ,"new":1},
                        {"o":1,"i":"b","t":"y","r":null,"s":"sub","c":6,"p":null}]"#;
        let mut bytes = vec![SEGMENT_FORMAT_JSON];
        bytes.extend_from_slice(json);
        let back = decode(&bytes).unwrap();
        assert_eq!(back[0].payload.get(), r#"{ "k" : [1, 2] }"#);
        assert_eq!(
            (back[0].trace_id.as_deref(), back[0].producer_sub.as_deref()),
            (None, None)
        );
        assert_eq!(back[1].payload.get(), "null");
        assert_eq!(back[1].producer_sub.as_deref(), Some("sub"));
        // What it writes back is the same text inside the same array.
        assert_eq!(decode(&encode(&back)).unwrap(), back);

        let corrupt = |json: &str| {
            let mut bytes = vec![SEGMENT_FORMAT_JSON];
            bytes.extend_from_slice(json.as_bytes());
            decode(&bytes).unwrap_err()
        };
        let e = corrupt(r#"[{"o":0,"i":"a","t":"x","c":5}]"#);
        assert_eq!(e, "segment JSON is corrupt: missing field `p`");
        let e = corrupt(r#"[{"o":"zero","i":"a","t":"x","c":5,"p":1}]"#);
        assert_eq!(
            e,
            "segment JSON is corrupt: field `o`: expected an unsigned integer"
        );
        let e = corrupt(r#"[{"o":0,"i":"a","t":"x","c":5,"p":1}, 7]"#);
        assert_eq!(
            e,
            "segment JSON is corrupt: expected a JSON object, found a number"
        );
        let e = corrupt(r#"{"o":0}"#);
        assert_eq!(e, "segment JSON is corrupt: expected an array of messages");
        let e = corrupt(r#"[{"o":0,"p":1}"#);
        assert!(
            e.starts_with("segment JSON is corrupt: EOF while parsing"),
            "{e}"
        );
        // Bytes that are not UTF-8, in an id or in a payload: damage, reported as such.
        for bad in [
            &b"[{\"o\":0,\"i\":\"a\xff\",\"t\":\"x\",\"c\":5,\"p\":1}]"[..],
            b"[{\"o\":0,\"i\":\"a\",\"t\":\"x\",\"c\":5,\"p\":\"\xc3\"}]",
        ] {
            let mut bytes = vec![SEGMENT_FORMAT_JSON];
            bytes.extend_from_slice(bad);
            assert_eq!(
                decode(&bytes).unwrap_err(),
                "segment JSON is corrupt: not UTF-8"
            );
        }
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn refuses_unknown_version() {
        let mut bytes = encode(&[msg(0, json!(1))]);
        bytes[0] = 9;
        assert!(decode(&bytes).unwrap_err().contains("newer"));
        assert!(decode(&[]).unwrap_err().contains("empty"));
    }

    #[cfg(feature = "deflate")]
    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn compresses_realistic_payloads() {
        let batch: Vec<_> = (0..100)
            .map(|i| msg(i, json!({"orderId": i, "customer": "c-1042", "items": [{"sku": "A-1", "qty": 2}], "status": "created"})))
            .collect();
        let raw = serde_json::to_vec(&batch).unwrap().len();
        assert!(
            encode_as(SEGMENT_FORMAT_DEFLATE, &batch).len() * 3 < raw,
            "deflate should shrink repetitive JSON at least 3x"
        );
    }
}

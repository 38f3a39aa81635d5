//! JSON request bodies, validated into core command types.
//!
//! Rules every body follows:
//! - a zero-length body is 400 `Empty request body` where one is required; unparsable JSON is
//!   400 `Invalid JSON: …`; a body over `max_body_bytes` is 413;
//! - JSON `null` means absent (the 2.6.0 Python client sends `null` for absent groups, namespaces, tasks
//!   and errors);
//! - wrong types are a 400 that names the field, with the contract's own texts where it gives them
//!   (`Queue must be a string`, `transactionId is required`, ...), followed by where in the body it is.
//!
//! Push and transaction bodies, which carry payloads, are parsed in one pass into typed shapes
//! ([`PushBody`], [`TxBody`]) rather than a `Value` tree: each payload is captured as its JSON text
//! ([`Payload`]), still checked to be valid JSON by the parser, and travels as that text to the segment
//! and back out in pop replies. The other fields of a push item, and the `/ack/batch` body
//! ([`AckBatchBody`]), are read as [`StrField`]s: the string moved into the command, or only the name of
//! the JSON type sent instead, for the error. The other routes' bodies (single ack, extend, configure,
//! seek, subscription, a transaction's operations) are still read into a `Value` map (docs/decisions.md,
//! "Readers and writers on serde's visitor API").

use super::error::HttpError;
use super::query::clip;
use super::Limits;
use crate::core::api::*;
use crate::core::fields::{json_type, FromCompound, FromJsonStr, List, Shaped, StrField};
use crate::core::json_text::value_text;
use crate::core::timefmt::parse_iso;
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::rc::Rc;

/// The body as JSON. `required`: an empty body is a 400; otherwise it is `None`.
pub(crate) fn parse_json(body: &[u8], required: bool) -> Result<Option<Value>, HttpError> {
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return if required {
            Err(HttpError::bad_request("Empty request body"))
        } else {
            Ok(None)
        };
    }
    serde_json::from_str(body_utf8(body)?)
        .map(Some)
        .map_err(|e| HttpError::bad_request(format!("Invalid JSON: {e}")))
}

/// The body as text: a 400 when it is not UTF-8 (JSON's encoding). Every body is checked here once,
/// whole, and then read by serde_json's reader over `str`, which checks no string again (its reader
/// over bytes checks each string it reads); it is the only JSON reader in the module.
fn body_utf8(body: &[u8]) -> Result<&str, HttpError> {
    std::str::from_utf8(body)
        .map_err(|_| HttpError::bad_request("Invalid JSON: the body is not UTF-8"))
}

/// The body as a JSON object (required).
pub(crate) fn parse_object(body: &[u8]) -> Result<Map<String, Value>, HttpError> {
    match parse_json(body, true)? {
        Some(Value::Object(map)) => Ok(map),
        _ => Err(HttpError::bad_request("Request body must be a JSON object")),
    }
}

/// The body as a JSON object, or an empty one when there is no body.
pub(crate) fn parse_optional_object(body: &[u8]) -> Result<Map<String, Value>, HttpError> {
    match parse_json(body, false)? {
        None => Ok(Map::new()),
        Some(Value::Object(map)) => Ok(map),
        Some(_) => Err(HttpError::bad_request("Request body must be a JSON object")),
    }
}

/// Where a part of the body is, for error texts: `items[3]`, `operations[1].items[0]`, `options`, or
/// the top level (empty). Written out only when an error names it.
#[derive(Clone, Copy)]
pub(crate) struct Path<'a> {
    list: &'a str,
    index: Option<usize>,
}

impl<'a> Path<'a> {
    /// The top level of the body.
    const TOP: Path<'static> = Path {
        list: "",
        index: None,
    };

    /// A named part (`options`, `operations[1]`); `""` is the top level.
    fn named(list: &'a str) -> Self {
        Path { list, index: None }
    }

    /// Item `index` of the array `list`.
    fn item(list: &'a str, index: usize) -> Self {
        Path {
            list,
            index: Some(index),
        }
    }
}

impl std::fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(self.list)?;
        match self.index {
            Some(i) => write!(f, "[{i}]"),
            None => Ok(()),
        }
    }
}

/// `where` for messages: ` (items[3].queue)` or `` at the top level.
fn at_path(path: Path, key: &str) -> String {
    if path.list.is_empty() && path.index.is_none() {
        String::new()
    } else {
        format!(" ({path}.{key})")
    }
}

/// [`at_path`] of a named part (`""`: the top level).
fn at(path: &str, key: &str) -> String {
    at_path(Path::named(path), key)
}

/// A string field read as sent ([`StrField`]); absent or `null` is `None`; other types are a 400 with
/// `wrong_type`.
fn str_field<T>(
    field: Option<StrField<T>>,
    key: &str,
    path: Path,
    wrong_type: &str,
) -> Result<Option<T>, HttpError> {
    StrField::text(field)
        .map_err(|_| HttpError::bad_request(format!("{wrong_type}{}", at_path(path, key))))
}

/// Checks a name's length (names may be empty only where the caller allows it).
pub(crate) fn check_name(
    what: &str,
    name: &str,
    allow_empty: bool,
    limits: &Limits,
) -> Result<(), HttpError> {
    if name.is_empty() && !allow_empty {
        return Err(HttpError::bad_request(format!("{what} must not be empty")));
    }
    if name.len() > limits.max_name_bytes {
        return Err(HttpError::bad_request(format!(
            "{what} is too long ({} bytes; the limit is {})",
            name.len(),
            limits.max_name_bytes
        )));
    }
    if name.chars().any(char::is_control) {
        return Err(HttpError::bad_request(format!(
            "{what} must not contain control characters"
        )));
    }
    Ok(())
}

/// Checks an id's length (ids are opaque, non-empty strings).
pub(crate) fn check_id(what: &str, id: &str, limits: &Limits) -> Result<(), HttpError> {
    if id.is_empty() {
        return Err(HttpError::bad_request(format!("{what} must not be empty")));
    }
    if id.len() > limits.max_id_bytes {
        return Err(HttpError::bad_request(format!(
            "{what} is too long ({} bytes; the limit is {})",
            id.len(),
            limits.max_id_bytes
        )));
    }
    Ok(())
}

/// An optional consumer group: absent, `null`, `""` and `__QUEUE_MODE__` mean queue mode.
pub(crate) fn opt_group(
    map: &Map<String, Value>,
    key: &str,
    path: &str,
    limits: &Limits,
) -> Result<Option<String>, HttpError> {
    group_of(
        StrField::of_value(map.get(key)),
        key,
        Path::named(path),
        limits,
    )
}

/// [`opt_group`] of a field read as sent.
fn group_of(
    field: Option<StrField<BodyStr>>,
    key: &str,
    path: Path,
    limits: &Limits,
) -> Result<Option<String>, HttpError> {
    let group =
        str_field(field, key, path, "consumerGroup must be a string or null")?.map(String::from);
    match group.as_deref() {
        None | Some("") | Some(QUEUE_MODE_GROUP) => Ok(None),
        Some(g) => {
            check_name("consumerGroup", g, false, limits)?;
            Ok(group)
        }
    }
}

/// A non-negative integer field in `0..=max`; absent or `null` is `None`. Integral floats (`300.0`) are
/// accepted.
pub(crate) fn opt_uint(
    map: &Map<String, Value>,
    key: &str,
    path: &str,
    max: u64,
) -> Result<Option<u64>, HttpError> {
    let bad = |v: &Value| {
        HttpError::bad_request(format!(
            "{key} must be an integer between 0 and {max}, got {}{}",
            clip(&value_text(v)),
            at(path, key)
        ))
    };
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v @ Value::Number(n)) => {
            let value = if let Some(u) = n.as_u64() {
                Some(u)
            } else {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= max as f64)
                    .map(|f| f as u64)
            };
            match value {
                Some(u) if u <= max => Ok(Some(u)),
                _ => Err(bad(v)),
            }
        }
        Some(v) => Err(bad(v)),
    }
}

fn opt_int(map: &Map<String, Value>, key: &str) -> Result<Option<i64>, HttpError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v @ Value::Number(n)) => n
            .as_i64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                    .map(|f| f as i64)
            })
            .map(Some)
            .ok_or_else(|| {
                HttpError::bad_request(format!(
                    "{key} must be an integer, got {}",
                    clip(&value_text(v))
                ))
            }),
        Some(v) => Err(HttpError::bad_request(format!(
            "{key} must be an integer, got {}",
            json_type(v)
        ))),
    }
}

fn opt_bool(map: &Map<String, Value>, key: &str) -> Result<Option<bool>, HttpError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(HttpError::bad_request(format!(
            "{key} must be a boolean, got {}",
            json_type(v)
        ))),
    }
}

// ---------------------------------------------------------------------------------------------
// Push
// ---------------------------------------------------------------------------------------------

/// The body's text in one shared copy, for the readers whose items keep parts of it (push,
/// transaction, ack batch): a 400 when it is not UTF-8 ([`body_utf8`]). An empty body passes: [`parse_shaped`]
/// refuses it.
fn body_text(body: &[u8]) -> Result<Rc<str>, HttpError> {
    body_utf8(body).map(Rc::from)
}

/// The body as `T`, an object read in one pass (required); `T` may borrow from the body.
fn parse_shaped<'de, T: FromCompound<'de>>(body: &'de str) -> Result<T, HttpError> {
    if body.bytes().all(|b| b.is_ascii_whitespace()) {
        return Err(HttpError::bad_request("Empty request body"));
    }
    match serde_json::from_str(body) {
        Ok(Shaped::Is(body)) => Ok(body),
        Ok(Shaped::Not(_)) => Err(HttpError::bad_request("Request body must be a JSON object")),
        Err(e) => Err(HttpError::bad_request(format!("Invalid JSON: {e}"))),
    }
}

/// `items` of a push body or a transaction's push operation, borrowing the payloads from the body.
type ItemList<'de> = Shaped<List<Shaped<ItemIn<'de>>>>;

/// The keys the push and transaction bodies read, matched without allocating.
enum Key {
    Items,
    Queue,
    Partition,
    Payload,
    TransactionId,
    TraceId,
    Namespace,
    Task,
    Operations,
    Kv,
    Timers,
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl serde::de::Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E>(self, key: &str) -> Result<Key, E> {
                Ok(match key {
                    "items" => Key::Items,
                    "queue" => Key::Queue,
                    "partition" => Key::Partition,
                    "payload" => Key::Payload,
                    "transactionId" => Key::TransactionId,
                    "traceId" => Key::TraceId,
                    "namespace" => Key::Namespace,
                    "task" => Key::Task,
                    "operations" => Key::Operations,
                    "kv" => Key::Kv,
                    "timers" => Key::Timers,
                    _ => Key::Other,
                })
            }
        }
        deserializer.deserialize_identifier(KeyVisitor)
    }
}

/// A push body: `{"items": [...]}`; other keys are skipped (a repeated key: the last one counts).
pub(crate) struct PushBody<'de> {
    items: Option<ItemList<'de>>,
}

impl<'de> FromCompound<'de> for PushBody<'de> {
    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Shaped<Self>, A::Error> {
        let mut items = None;
        while let Some(key) = map.next_key()? {
            match key {
                Key::Items => items = Some(map.next_value()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Shaped::Is(PushBody { items }))
    }
}

/// A string of a push body: lent by the parser (a part of the body), or built by it (one with escapes).
pub(crate) enum BodyStr<'de> {
    Part(&'de str),
    Own(String),
}

impl<'de> FromJsonStr<'de> for BodyStr<'de> {
    fn from_str(s: &str) -> Self {
        BodyStr::Own(s.to_owned())
    }
    fn from_string(s: String) -> Self {
        BodyStr::Own(s)
    }
    fn from_borrowed(s: &'de str) -> Self {
        BodyStr::Part(s)
    }
}

impl std::ops::Deref for BodyStr<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        match self {
            BodyStr::Part(s) => s,
            BodyStr::Own(s) => s,
        }
    }
}

impl From<BodyStr<'_>> for String {
    fn from(s: BodyStr) -> String {
        match s {
            BodyStr::Part(s) => s.to_owned(),
            BodyStr::Own(s) => s,
        }
    }
}

impl BodyStr<'_> {
    /// As shared text: a part of `body` (which the parser read) or its own.
    fn shared(self, body: &Rc<str>) -> SharedStr {
        body_str(body, &self)
    }
}

/// One push item as sent: the payload as JSON text and the queue, partition and transaction id, as parts
/// of the body where they can be; the fields the broker reads as strings or the name of the JSON type
/// sent instead (checked by [`push_item`]), nothing else kept.
#[derive(Default)]
pub(crate) struct ItemIn<'de> {
    queue: Option<StrField<BodyStr<'de>>>,
    partition: Option<StrField<BodyStr<'de>>>,
    payload: Option<&'de RawValue>,
    transaction_id: Option<StrField<BodyStr<'de>>>,
    trace_id: Option<StrField<BodyStr<'de>>>,
    namespace: Option<StrField<BodyStr<'de>>>,
    task: Option<StrField<BodyStr<'de>>>,
}

impl<'de> FromCompound<'de> for ItemIn<'de> {
    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Shaped<Self>, A::Error> {
        let mut item = ItemIn::default();
        while let Some(key) = map.next_key()? {
            let field = match key {
                Key::Payload => {
                    item.payload = Some(map.next_value()?);
                    continue;
                }
                Key::Queue => &mut item.queue,
                Key::Partition => &mut item.partition,
                Key::TransactionId => &mut item.transaction_id,
                Key::TraceId => &mut item.trace_id,
                Key::Namespace => &mut item.namespace,
                Key::Task => &mut item.task,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            *field = Some(map.next_value()?);
        }
        Ok(Shaped::Is(item))
    }
}

/// The items of `list` (`items` at `path`), or the 400 `missing` when it is not an array.
fn item_list<'de>(
    list: Option<ItemList<'de>>,
    missing: impl FnOnce() -> String,
) -> Result<Vec<Shaped<ItemIn<'de>>>, HttpError> {
    match list {
        Some(Shaped::Is(List(items))) => Ok(items),
        _ => Err(HttpError::bad_request(missing())),
    }
}

/// `POST /api/v1/push` body → items (contract §1.2). The body's text is copied once into a shared
/// text, and each payload is a part of it ([`Payload::in_text`]) rather than an allocation of its own.
pub(crate) fn push_items(
    body: &[u8],
    limits: &Limits,
    producer_sub: Option<&str>,
) -> Result<Vec<PushItem>, HttpError> {
    let text = body_text(body)?;
    let parsed: PushBody = parse_shaped(&text)?;
    let items = item_list(parsed.items, || "items array is required".to_string())?;
    if items.len() > limits.max_items_per_push {
        return Err(HttpError::too_large(format!(
            "Too many items: {} (the limit is {})",
            items.len(),
            limits.max_items_per_push
        )));
    }
    let measure = body.len() > limits.max_payload_bytes;
    let mut out = Vec::with_capacity(items.len());
    for (i, v) in items.into_iter().enumerate() {
        let path = Path::item("items", i);
        out.push(push_item(
            v,
            &text,
            path,
            limits,
            producer_sub,
            measure,
            Payload::null,
        )?);
    }
    Ok(out)
}

/// Whether the JSON text `json` (a valid value, as the parser found it) nests more than `limit` arrays
/// and objects. A value that does takes at least two bytes a level, so shorter texts are not scanned.
fn nests_deeper_than(json: &str, limit: usize) -> bool {
    if json.len() <= limit.saturating_mul(2) {
        return false;
    }
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in json.as_bytes() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// `raw`, which the parser lent from `body`, as a payload that is a part of it.
fn body_part(body: &Rc<str>, raw: &RawValue) -> Payload {
    Payload::in_text(body_str(body, raw.get()))
}

/// `s` as shared text: a part of `body` when it is one (a string the parser lent from it: always, for
/// one it did not build), else a copy of its own.
fn body_str(body: &Rc<str>, s: &str) -> SharedStr {
    SharedStr::part_of(body, s).unwrap_or_else(|| SharedStr::from(s))
}

/// The size of `payload` as compact JSON, which `max_payload_bytes` limits. Only a payload whose text
/// is over the limit is measured again (the text is at least as long as its compact form).
fn compact_size(payload: &Payload) -> usize {
    payload
        .to_value()
        .ok()
        .and_then(|v| serde_json::to_vec(&v).ok())
        .map_or(payload.len(), |b| b.len())
}

/// One push item at `path` (`items[3]`, `operations[1].items[0]`), read from `body`; `missing_payload`
/// when it has none.
pub(crate) fn push_item(
    v: Shaped<ItemIn>,
    body: &Rc<str>,
    path: Path,
    limits: &Limits,
    producer_sub: Option<&str>,
    measure_payload: bool,
    missing_payload: fn() -> Payload,
) -> Result<PushItem, HttpError> {
    let item = match v {
        Shaped::Is(item) => item,
        Shaped::Not(kind) => {
            return Err(HttpError::bad_request(format!(
                "{path} must be an object, got {kind}"
            )))
        }
    };
    let queue = match item.queue {
        Some(StrField::Str(q)) => q.shared(body),
        _ => {
            return Err(HttpError::bad_request(format!(
                "Queue must be a string{}",
                at_path(path, "queue")
            )))
        }
    };
    check_name("Queue name", &queue, true, limits)?;
    let partition = str_field(
        item.partition,
        "partition",
        path,
        "Partition must be a string",
    )?
    .map_or_else(|| SharedStr::from(DEFAULT_PARTITION), |p| p.shared(body));
    check_name("Partition name", &partition, false, limits)?;
    let payload = match item.payload {
        Some(raw) => {
            if nests_deeper_than(raw.get(), limits.max_payload_depth) {
                return Err(HttpError::bad_request(format!(
                    "Payload nested deeper than {} levels{}",
                    limits.max_payload_depth,
                    at_path(path, "payload")
                )));
            }
            body_part(body, raw)
        }
        None => missing_payload(),
    };
    if measure_payload && payload.len() > limits.max_payload_bytes {
        let size = compact_size(&payload);
        if size > limits.max_payload_bytes {
            return Err(HttpError::too_large(format!(
                "Payload too large: {size} bytes (the limit is {}){}",
                limits.max_payload_bytes,
                at_path(path, "payload")
            )));
        }
    }
    let transaction_id = str_field(
        item.transaction_id,
        "transactionId",
        path,
        "TransactionId must be a string",
    )?
    .map(|t| t.shared(body))
    .filter(|t| !t.is_empty());
    if let Some(t) = &transaction_id {
        check_id("transactionId", t, limits)?;
    }
    let trace_id = str_field(item.trace_id, "traceId", path, "TraceId must be a string")?
        .filter(|t| !t.is_empty())
        .map(String::from);
    if let Some(t) = &trace_id {
        if !is_hyphenated_uuid(t) {
            return Err(HttpError::bad_request(format!(
                "TraceId must be a UUID, got '{}'{}",
                clip(t),
                at_path(path, "traceId")
            )));
        }
    }
    // Labels: non-strings are treated as absent (contract §1.7's rule, applied here too).
    let label = |key: &str, v: Option<StrField<BodyStr>>| -> Result<Option<String>, HttpError> {
        match v {
            Some(StrField::Str(s)) if !s.is_empty() => {
                check_name(key, &s, false, limits)?;
                Ok(Some(s.into()))
            }
            _ => Ok(None),
        }
    };
    Ok(PushItem {
        partition,
        payload,
        transaction_id,
        trace_id,
        namespace: label("namespace", item.namespace)?,
        task: label("task", item.task)?,
        producer_sub: producer_sub.map(str::to_string),
        queue,
    })
}

/// True for a UUID in its hyphenated form (36 characters, `8-4-4-4-12` hex digits of either case): what
/// `uuid::Uuid::parse_str` accepts at that length, without linking its parser and error texts.
fn is_hyphenated_uuid(t: &str) -> bool {
    t.len() == 36
        && t.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}

// ---------------------------------------------------------------------------------------------
// Ack
// ---------------------------------------------------------------------------------------------

/// The fields an ack reads, as sent (checked by [`ack_fields`]); an `/ack/batch` item is read straight
/// into it, other keys skipped (a repeated key: the last one counts).
#[derive(Default)]
pub(crate) struct AckIn<'de> {
    transaction_id: Option<StrField<BodyStr<'de>>>,
    partition_id: Option<StrField<BodyStr<'de>>>,
    status: Option<StrField<AckStatus>>,
    error: Option<StrField<BodyStr<'de>>>,
    lease_id: Option<StrField<BodyStr<'de>>>,
}

impl AckIn<'_> {
    /// The ack fields of an object already parsed (the single-ack body, a transaction's ack).
    fn of(map: &Map<String, Value>) -> Self {
        let field = |key: &str| StrField::of_value(map.get(key));
        AckIn {
            transaction_id: field("transactionId"),
            partition_id: field("partitionId"),
            status: StrField::of_value(map.get("status")),
            error: field("error"),
            lease_id: field("leaseId"),
        }
    }
}

/// An ack's `status` is read straight into its [`AckStatus`]: no copy of the string unless it is not
/// one of the statuses.
impl FromJsonStr<'_> for AckStatus {
    fn from_str(s: &str) -> Self {
        AckStatus::parse(Some(s))
    }
}

/// The keys the `/ack/batch` body reads, matched without allocating.
enum AckKey {
    Acknowledgments,
    ConsumerGroup,
    TransactionId,
    PartitionId,
    Status,
    Error,
    LeaseId,
    Other,
}

impl<'de> Deserialize<'de> for AckKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl serde::de::Visitor<'_> for KeyVisitor {
            type Value = AckKey;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E>(self, key: &str) -> Result<AckKey, E> {
                Ok(match key {
                    "acknowledgments" => AckKey::Acknowledgments,
                    "consumerGroup" => AckKey::ConsumerGroup,
                    "transactionId" => AckKey::TransactionId,
                    "partitionId" => AckKey::PartitionId,
                    "status" => AckKey::Status,
                    "error" => AckKey::Error,
                    "leaseId" => AckKey::LeaseId,
                    _ => AckKey::Other,
                })
            }
        }
        deserializer.deserialize_identifier(KeyVisitor)
    }
}

impl<'de> FromCompound<'de> for AckIn<'de> {
    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Shaped<Self>, A::Error> {
        let mut item = AckIn::default();
        while let Some(key) = map.next_key()? {
            let field = match key {
                AckKey::Status => {
                    item.status = Some(map.next_value()?);
                    continue;
                }
                AckKey::TransactionId => &mut item.transaction_id,
                AckKey::PartitionId => &mut item.partition_id,
                AckKey::Error => &mut item.error,
                AckKey::LeaseId => &mut item.lease_id,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            *field = Some(map.next_value()?);
        }
        Ok(Shaped::Is(item))
    }
}

/// An `/ack/batch` body: `acknowledgments` and `consumerGroup`; other keys are skipped.
pub(crate) struct AckBatchBody<'de> {
    acknowledgments: Option<Shaped<List<Shaped<AckIn<'de>>>>>,
    consumer_group: Option<StrField<BodyStr<'de>>>,
}

impl<'de> FromCompound<'de> for AckBatchBody<'de> {
    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Shaped<Self>, A::Error> {
        let mut body = AckBatchBody {
            acknowledgments: None,
            consumer_group: None,
        };
        while let Some(key) = map.next_key()? {
            match key {
                AckKey::Acknowledgments => body.acknowledgments = Some(map.next_value()?),
                AckKey::ConsumerGroup => body.consumer_group = Some(map.next_value()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Shaped::Is(body))
    }
}

/// One ack at `path` (the top level for the single-ack body). `body`: the text the strings were read
/// from, when they were (an `/ack/batch` body): the item's ids are parts of it.
fn ack_fields(
    a: AckIn,
    path: Path,
    limits: &Limits,
    body: Option<&Rc<str>>,
) -> Result<AckItem, HttpError> {
    let shared = |s: BodyStr| match body {
        Some(body) => s.shared(body),
        None => SharedStr::from(String::from(s)),
    };
    let transaction_id = match a.transaction_id {
        Some(StrField::Str(t)) if !t.is_empty() => shared(t),
        _ => {
            return Err(HttpError::bad_request(format!(
                "transactionId is required{}",
                at_path(path, "transactionId")
            )))
        }
    };
    check_id("transactionId", &transaction_id, limits)?;
    let partition_id = match a.partition_id {
        Some(StrField::Str(p)) if !p.is_empty() => shared(p),
        _ => {
            return Err(HttpError::bad_request(format!(
                "partitionId is required to ensure message uniqueness{}",
                at_path(path, "partitionId")
            )))
        }
    };
    check_id("partitionId", &partition_id, limits)?;
    let status = match a.status {
        None | Some(StrField::Null) => AckStatus::Completed,
        Some(StrField::Str(status)) => match status {
            AckStatus::Invalid(s) => {
                return Err(HttpError::bad_request(format!(
                    "Invalid status '{}': expected completed, success, failed, retry or dlq{}",
                    clip(&s),
                    at_path(path, "status")
                )))
            }
            status => status,
        },
        Some(StrField::Not(kind)) => {
            return Err(HttpError::bad_request(format!(
                "status must be a string, got {kind}{}",
                at_path(path, "status")
            )))
        }
    };
    let error = str_field(a.error, "error", path, "error must be a string or null")?
        .filter(|e| !e.is_empty())
        .map(String::from);
    let lease_id = str_field(
        a.lease_id,
        "leaseId",
        path,
        "leaseId must be a string or null",
    )?
    .filter(|l| !l.is_empty())
    .map(shared);
    if let Some(l) = &lease_id {
        check_id("leaseId", l, limits)?;
    }
    Ok(AckItem {
        transaction_id,
        partition_id,
        status,
        error,
        lease_id,
    })
}

/// `POST /api/v1/ack` body → (group, item).
pub(crate) fn single_ack(
    body: &[u8],
    limits: &Limits,
) -> Result<(Option<String>, AckItem), HttpError> {
    let map = parse_object(body)?;
    let group = opt_group(&map, "consumerGroup", "", limits)?;
    let item = ack_fields(AckIn::of(&map), Path::TOP, limits, None)?;
    Ok((group, item))
}

/// `POST /api/v1/ack/batch` body → (group, items), read in one pass into [`AckBatchBody`]. The top-level
/// group applies to every item.
pub(crate) fn batch_ack(
    body: &[u8],
    limits: &Limits,
) -> Result<(Option<String>, Vec<AckItem>), HttpError> {
    let text = body_text(body)?;
    let parsed: AckBatchBody = parse_shaped(&text)?;
    let items = match parsed.acknowledgments {
        Some(Shaped::Is(List(items))) => items,
        _ => return Err(HttpError::bad_request("acknowledgments array is required")),
    };
    if items.is_empty() {
        return Err(HttpError::bad_request(
            "acknowledgments array cannot be empty",
        ));
    }
    if items.len() > limits.max_ack_items {
        return Err(HttpError::too_large(format!(
            "Too many acknowledgments: {} (the limit is {})",
            items.len(),
            limits.max_ack_items
        )));
    }
    let group = group_of(parsed.consumer_group, "consumerGroup", Path::TOP, limits)?;
    let mut out = Vec::with_capacity(items.len());
    for (i, v) in items.into_iter().enumerate() {
        let path = Path::item("acknowledgments", i);
        out.push(match v {
            Shaped::Is(item) => ack_fields(item, path, limits, Some(&text))?,
            Shaped::Not(kind) => {
                return Err(HttpError::bad_request(format!(
                    "{path} must be an object, got {kind}"
                )))
            }
        });
    }
    Ok((group, out))
}

// ---------------------------------------------------------------------------------------------
// Lease extend, transaction
// ---------------------------------------------------------------------------------------------

/// `POST /api/v1/lease/:id/extend` body → seconds. No body, `{}` or `seconds: null` mean 60.
pub(crate) fn extend_seconds(body: &[u8], limits: &Limits) -> Result<u64, HttpError> {
    let map = parse_optional_object(body)?;
    match opt_uint(&map, "seconds", "", limits.max_lease_seconds)? {
        None => Ok(60),
        Some(0) => Err(HttpError::bad_request(format!(
            "seconds must be an integer between 1 and {}, got 0",
            limits.max_lease_seconds
        ))),
        Some(s) => Ok(s),
    }
}

/// A transaction body: `operations`, and `kv` and `timers` (refused unless empty); other keys skipped.
pub(crate) struct TxBody<'de> {
    operations: Option<Shaped<List<Shaped<OpIn<'de>>>>>,
    kv: Option<Value>,
    timers: Option<Value>,
}

impl<'de> FromCompound<'de> for TxBody<'de> {
    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Shaped<Self>, A::Error> {
        let mut body = TxBody {
            operations: None,
            kv: None,
            timers: None,
        };
        while let Some(key) = map.next_key()? {
            match key {
                Key::Operations => body.operations = Some(map.next_value()?),
                Key::Kv => body.kv = Some(map.next_value()?),
                Key::Timers => body.timers = Some(map.next_value()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Shaped::Is(body))
    }
}

/// One operation as sent: its `items` (a push's, payloads as text) and every other field as a value.
pub(crate) struct OpIn<'de> {
    fields: Map<String, Value>,
    items: Option<ItemList<'de>>,
}

impl<'de> FromCompound<'de> for OpIn<'de> {
    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Shaped<Self>, A::Error> {
        let mut fields = Vec::new();
        let mut items = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == "items" {
                items = Some(map.next_value()?);
            } else {
                fields.push((key, map.next_value()?));
            }
        }
        Ok(Shaped::Is(OpIn {
            fields: Map::from_entries(fields),
            items,
        }))
    }
}

/// `POST /api/v1/transaction` body → operations (contract §1.6).
pub(crate) fn transaction(
    body: &[u8],
    limits: &Limits,
    producer_sub: Option<&str>,
) -> Result<Vec<TxOperation>, HttpError> {
    let text = body_text(body)?;
    let parsed: TxBody = parse_shaped(&text)?;
    let ops = match parsed.operations {
        Some(Shaped::Is(List(ops))) => ops,
        _ => return Err(HttpError::bad_request("operations array required")),
    };
    if ops.is_empty() {
        return Err(HttpError::bad_request("operations array cannot be empty"));
    }
    if ops.len() > limits.max_transaction_operations {
        return Err(HttpError::too_large(format!(
            "Too many operations: {} (the limit is {})",
            ops.len(),
            limits.max_transaction_operations
        )));
    }
    for (key, value) in [("kv", &parsed.kv), ("timers", &parsed.timers)] {
        match value {
            None | Some(Value::Null) => {}
            Some(Value::Array(a)) if a.is_empty() => {}
            Some(_) => {
                return Err(HttpError::bad_request(format!(
                    "{key} operations are not supported by this broker"
                )))
            }
        }
    }
    let measure = body.len() > limits.max_payload_bytes;
    let mut pushed = 0usize;
    let mut out = Vec::with_capacity(ops.len());
    for (i, op) in ops.into_iter().enumerate() {
        let path = format!("operations[{i}]");
        let op = match op {
            Shaped::Is(op) => op,
            Shaped::Not(kind) => {
                return Err(HttpError::bad_request(format!(
                    "{path} must be an object, got {kind}"
                )))
            }
        };
        let kind = match op.fields.get("type") {
            Some(Value::String(t)) => t.as_str(),
            _ => {
                return Err(HttpError::bad_request(format!(
                    "{path}.type must be a string"
                )))
            }
        };
        match kind {
            "push" => {
                let items = item_list(op.items, || {
                    format!("items array is required ({path}.items)")
                })?;
                pushed += items.len();
                let list = format!("{path}.items");
                if pushed > limits.max_items_per_push {
                    return Err(HttpError::too_large(format!(
                        "Too many pushed items in the transaction (the limit is {})",
                        limits.max_items_per_push
                    )));
                }
                let mut pushed = Vec::with_capacity(items.len());
                for (j, v) in items.into_iter().enumerate() {
                    // Transaction pushes default a missing payload to `{}` (contract §1.2).
                    let path = Path::item(&list, j);
                    pushed.push(push_item(
                        v,
                        &text,
                        path,
                        limits,
                        producer_sub,
                        measure,
                        Payload::empty_object,
                    )?);
                }
                out.push(TxOperation::Push(pushed));
            }
            "ack" => {
                let group = opt_group(&op.fields, "consumerGroup", &path, limits)?;
                let item = ack_fields(AckIn::of(&op.fields), Path::named(&path), limits, None)?;
                out.push(TxOperation::Ack { item, group });
            }
            other => {
                if other.len() > limits.max_name_bytes {
                    return Err(HttpError::bad_request(format!("{path}.type is too long")));
                }
                out.push(TxOperation::Unknown(other.to_string()));
            }
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Configure
// ---------------------------------------------------------------------------------------------

/// `POST /api/v1/configure` body → request (contract §1.7). Unknown option keys are ignored.
pub(crate) fn configure(body: &[u8], limits: &Limits) -> Result<ConfigureRequest, HttpError> {
    let map = parse_object(body)?;
    let queue = match map.get("queue") {
        Some(Value::String(q)) => q.clone(),
        _ => return Err(HttpError::bad_request("queue is required")),
    };
    check_name("Queue name", &queue, true, limits)?;
    let label = |key: &str| -> Result<Option<String>, HttpError> {
        match map.get(key) {
            Some(Value::String(s)) => {
                check_name(key, s, true, limits)?;
                Ok(Some(s.clone()))
            }
            _ => Ok(None),
        }
    };
    let namespace = label("namespace")?;
    let task = label("task")?;
    let empty = Map::new();
    let o = match map.get("options") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(o)) => o,
        Some(v) => {
            return Err(HttpError::bad_request(format!(
                "options must be an object, got {}",
                json_type(v)
            )))
        }
    };
    let dur = limits.max_duration_seconds;
    let p = "options";
    let options = OptionsPatch {
        lease_time_s: opt_uint(o, "leaseTime", p, limits.max_lease_seconds)?,
        retry_limit: opt_uint(o, "retryLimit", p, u32::MAX as u64)?.map(|n| n as u32),
        retry_delay_ms: opt_uint(o, "retryDelay", p, dur.saturating_mul(1000))?,
        max_size: opt_uint(o, "maxSize", p, i64::MAX as u64)?,
        ttl_s: opt_uint(o, "ttl", p, dur)?,
        dead_letter_queue: opt_bool(o, "deadLetterQueue")?,
        dlq_after_max_retries: opt_bool(o, "dlqAfterMaxRetries")?,
        delayed_processing_s: opt_uint(o, "delayedProcessing", p, dur)?,
        window_buffer_s: opt_uint(o, "windowBuffer", p, dur)?,
        retention_enabled: opt_bool(o, "retentionEnabled")?,
        retention_s: opt_uint(o, "retentionSeconds", p, dur)?,
        completed_retention_s: opt_uint(o, "completedRetentionSeconds", p, dur)?,
        max_wait_time_s: opt_uint(o, "maxWaitTimeSeconds", p, dur)?,
        encryption_enabled: opt_bool(o, "encryptionEnabled")?,
        priority: opt_int(o, "priority")?,
        ..super::redelivery::patch(o, limits)?
    };
    Ok(ConfigureRequest {
        queue,
        namespace,
        task,
        options,
    })
}

// ---------------------------------------------------------------------------------------------
// Consumer groups, traces
// ---------------------------------------------------------------------------------------------

/// Seek body → target (contract §1.9). `toEnd: true` wins over `timestamp`.
pub(crate) fn seek_target(body: &[u8]) -> Result<SeekTarget, HttpError> {
    let map = parse_optional_object(body)?;
    if opt_bool(&map, "toEnd")? == Some(true) {
        return Ok(SeekTarget::End);
    }
    match map.get("timestamp") {
        None | Some(Value::Null) => Err(HttpError::bad_request(
            "Must specify either 'toEnd': true or 'timestamp'",
        )),
        Some(Value::String(s)) => parse_iso(s).map(SeekTarget::Timestamp).ok_or_else(|| {
            HttpError::bad_request(format!(
                "timestamp must be an ISO-8601 time, got '{}'",
                clip(s)
            ))
        }),
        Some(v) => Err(HttpError::bad_request(format!(
            "timestamp must be an ISO-8601 string, got {}",
            json_type(v)
        ))),
    }
}

/// Subscription body → start time in ms.
pub(crate) fn subscription_timestamp(body: &[u8]) -> Result<i64, HttpError> {
    let map = parse_object(body)?;
    match map.get("subscriptionTimestamp") {
        Some(Value::String(s)) => parse_iso(s).ok_or_else(|| {
            HttpError::bad_request(format!(
                "subscriptionTimestamp must be an ISO-8601 time, got '{}'",
                clip(s)
            ))
        }),
        None | Some(Value::Null) => {
            Err(HttpError::bad_request("subscriptionTimestamp is required"))
        }
        Some(v) => Err(HttpError::bad_request(format!(
            "subscriptionTimestamp must be an ISO-8601 string, got {}",
            json_type(v)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_is_counted_outside_strings_only() {
        let nested = |depth: usize| "[".repeat(depth) + &"]".repeat(depth);
        assert!(!nests_deeper_than(&nested(3), 3));
        assert!(nests_deeper_than(&nested(4), 3));
        assert!(nests_deeper_than(r#"{"a":{"b":[{"c":1}]}}"#, 3));
        // An escaped backslash ends before the closing quote, so the brackets after it count.
        assert!(nests_deeper_than(r#"["\\",[[[1]]]]"#, 3));
        // An escaped quote does not close the string, so the brackets inside it do not count.
        assert!(!nests_deeper_than(r#"["\"[[[[[[[[",1]"#, 3));
        // A text too short to hold more than `limit` levels is not scanned.
        assert!(!nests_deeper_than("[[[[", 3));
    }

    #[test]
    fn trace_ids_are_checked_as_the_uuid_crate_reads_them() {
        let cases = [
            "123e4567-e89b-12d3-a456-426614174000",
            "123E4567-E89B-12D3-A456-426614174000",
            "123e4567-e89b-12d3-a456-42661417400",
            "123e4567-e89b-12d3-a456-4266141740000",
            "123e4567e89b-12d3-a456-4266141740000",
            "123e4567-e89b-12d3-a456-42661417400g",
            "123e4567-e89b-12d3-a456+426614174000",
            "{23e4567-e89b-12d3-a456-42661417400}",
            "123e4567-e89b-12d3-a456-42661417400\u{e9}",
            "123e4567e89b12d3a456426614174000",
            "",
        ];
        for t in cases {
            let crate_reads = t.len() == 36 && uuid::Uuid::parse_str(t).is_ok();
            assert_eq!(is_hyphenated_uuid(t), crate_reads, "{t}");
        }
    }

    #[test]
    fn empty_and_invalid_bodies() {
        assert_eq!(parse_object(b"").unwrap_err().message, "Empty request body");
        assert!(parse_object(b"{")
            .unwrap_err()
            .message
            .starts_with("Invalid JSON: "));
        assert_eq!(parse_optional_object(b"").unwrap(), Map::new());
    }

    #[test]
    fn push_payloads_are_parts_of_the_body_as_sent() {
        let l = Limits::default();
        let body = br#"{"items": [{"queue": "q", "payload": { "a" : [1, "\u00e9\"", 1e400] } },
            {"queue": "q", "partition": "p", "payload": null}, {"queue": "q"}]}"#;
        let items = push_items(body, &l, None).unwrap();
        assert_eq!(
            items[0].payload.get(),
            r#"{ "a" : [1, "\u00e9\"", 1e400] }"#
        );
        assert_eq!(items[1].payload.get(), "null");
        assert!(items[0].payload.is_in_text() && items[1].payload.is_in_text());
        assert_eq!(items[2].payload.get(), "null", "no payload is null");
        assert_eq!(items[1].partition, "p");
        assert_eq!(items[0].partition, DEFAULT_PARTITION);
        // The names are parts of the body too, where the body holds them as they are.
        let text = std::str::from_utf8(body).unwrap();
        let base = items[1].payload.get().as_ptr() as usize - text.find("null").unwrap();
        let place = |s: &str| s.as_ptr() as usize - base;
        assert_eq!(
            place(&items[1].queue),
            text.find(r#""q", "partition""#).unwrap() + 1
        );
        assert_eq!(place(&items[1].partition), text.find(r#""p""#).unwrap() + 1);
        let escaped = push_items(
            br#"{"items": [{"queue": "\u0071", "transactionId": "t\"1"}]}"#,
            &l,
            None,
        )
        .unwrap();
        assert_eq!(
            (
                escaped[0].queue.as_str(),
                escaped[0].transaction_id.as_deref()
            ),
            ("q", Some("t\"1"))
        );
        let sent = push_items(
            br#"{"items": [{"queue": "q", "transactionId": "t-1", "payload": 1}]}"#,
            &l,
            None,
        )
        .unwrap();
        let detached = sent[0].clone().detached();
        assert_eq!(detached, sent[0]);
        assert!(
            !detached.payload.is_in_text(),
            "its own texts, not the body's"
        );
        let tx = br#"{"operations": [{"type": "push", "items": [{"queue": "q", "payload": [ 1 ]}, {"queue": "q"}]}]}"#;
        match &transaction(tx, &l, None).unwrap()[0] {
            TxOperation::Push(items) => {
                assert_eq!(items[0].payload.get(), "[ 1 ]");
                assert!(items[0].payload.is_in_text());
                assert_eq!(items[1].payload.get(), "{}");
            }
            _ => panic!("a push"),
        }
    }

    #[test]
    fn bodies_that_are_not_utf8_are_invalid_json() {
        let l = Limits::default();
        let in_payload = b"{\"items\": [{\"queue\": \"q\", \"payload\": \"\xff\"}]}";
        let e = push_items(in_payload, &l, None).unwrap_err();
        assert_eq!(
            (e.status, e.message.as_str()),
            (400, "Invalid JSON: the body is not UTF-8")
        );
        let skipped = b"{\"x\": \"\xff\", \"items\": []}";
        let e = push_items(skipped, &l, None).unwrap_err();
        assert_eq!(
            (e.status, e.message.as_str()),
            (400, "Invalid JSON: the body is not UTF-8")
        );
        assert_eq!(
            push_items(b" ", &l, None).unwrap_err().message,
            "Empty request body"
        );
    }

    /// Every body is checked as UTF-8 whole before it is parsed (`body_utf8`): the ack batch and the
    /// bodies read into a `Value` answer as the push does, wherever the bad bytes are.
    #[test]
    fn every_body_that_is_not_utf8_is_invalid_json() {
        let l = Limits::default();
        let not_utf8 = (400, "Invalid JSON: the body is not UTF-8");
        for body in [
            &b"{\"acknowledgments\": [{\"transactionId\": \"t\xff\", \"partitionId\": \"1\"}]}"[..],
            b"{\"consumerGroup\": \"g\xc3\", \"acknowledgments\": []}",
            b"{\"\xe9\": 1, \"acknowledgments\": []}",
        ] {
            let e = batch_ack(body, &l).unwrap_err();
            assert_eq!((e.status, e.message.as_str()), not_utf8);
        }
        let e = single_ack(b"{\"transactionId\": \"\xf0\x9f\x98\"}", &l).unwrap_err();
        assert_eq!((e.status, e.message.as_str()), not_utf8);
        let e = parse_optional_object(b"{\"x\": \"\xfe\"}").unwrap_err();
        assert_eq!((e.status, e.message.as_str()), not_utf8);
        assert_eq!(
            batch_ack(b" \n", &l).unwrap_err().message,
            "Empty request body"
        );
    }

    #[test]
    fn extend_defaults_to_sixty() {
        let l = Limits::default();
        assert_eq!(extend_seconds(b"", &l).unwrap(), 60);
        assert_eq!(extend_seconds(b"{}", &l).unwrap(), 60);
        assert_eq!(extend_seconds(br#"{"seconds":5}"#, &l).unwrap(), 5);
        assert!(extend_seconds(br#"{"seconds":-5}"#, &l).is_err());
        assert!(extend_seconds(br#"{"seconds":"5"}"#, &l).is_err());
    }

    #[test]
    fn integral_floats_are_integers() {
        let m: Map<String, Value> = serde_json::from_str(r#"{"a":300.0,"b":1.5,"c":-1}"#).unwrap();
        assert_eq!(opt_uint(&m, "a", "", 1000).unwrap(), Some(300));
        assert!(opt_uint(&m, "b", "", 1000).is_err());
        assert!(opt_uint(&m, "c", "", 1000).is_err());
    }
}

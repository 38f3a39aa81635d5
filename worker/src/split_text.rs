//! The texts of a push or batch ack split over shards ([`split_bodies`]) and of the shards' answers put back
//! in request order ([`MergedResults`]), written without a JSON tree: each item goes to its shard's body as
//! the client sent it, and each result comes back as its shard wrote it, with only `index` rewritten (the
//! item's place in the whole request). Payloads are scanned by the parser, never built into values and
//! printed again.
//!
//! What a split request's answer looks like is [`crate::sharded`]'s (request order, failed items of a
//! refusing shard); this module only writes the texts. Its reader of a JSON object as sent (`Members`) also
//! splits transactions across shards and reads the shards' answers to them ([`crate::txn_plan`],
//! [`crate::txn_coordinator`]).

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

use serde::de::{Deserializer, Error as _, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

/// A JSON object as sent: each member's key (unescaped) and its value's text, in order.
pub(crate) struct Members<'a>(Vec<(Key<'a>, &'a RawValue)>);

/// A member's key: lent by the parser, or its own when it had escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, key: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(key)))
            }
            fn visit_str<E>(self, key: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(key.to_owned())))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MembersVisitor;
        impl<'de> Visitor<'de> for MembersVisitor {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'de>, A::Error> {
                let mut members = Vec::new();
                while let Some(key) = map.next_key::<Key>()? {
                    members.push((key, map.next_value::<&RawValue>()?));
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(MembersVisitor)
    }
}

impl<'a> Members<'a> {
    /// The text of member `name`'s value (the last one, when the object has several).
    pub(crate) fn get(&self, name: &str) -> Option<&'a RawValue> {
        self.0
            .iter()
            .rev()
            .find(|(key, _)| key.0 == name)
            .map(|(_, value)| *value)
    }

    /// Member `name` when it is a JSON string, unescaped.
    pub(crate) fn string(&self, name: &str) -> Option<String> {
        serde_json::from_str(self.get(name)?.get()).ok()
    }

    /// Writes the object to `out` with the value of its `index` member (each, when it has several) replaced
    /// by `index`.
    pub(crate) fn write_with_index(&self, out: &mut Vec<u8>, index: usize) {
        self.write(out, |key, out| {
            let is_index = key == "index";
            if is_index {
                out.extend_from_slice(index.to_string().as_bytes());
            }
            is_index
        });
    }

    /// Writes the object to `out` with the value of its member `field` (each, when it has several) replaced
    /// by an array of `items`.
    pub(crate) fn write_with_array(&self, out: &mut Vec<u8>, field: &str, items: &[&RawValue]) {
        self.write(out, |key, out| {
            let is_field = key == field;
            if is_field {
                write_array(out, items.iter().map(|item| item.get().as_bytes()));
            }
            is_field
        });
    }

    /// The texts of the items of the array under `field` (the last such member, as [`Self::get`]; none
    /// when there is no such member); fails when its value is not an array.
    pub(crate) fn items(&self, field: &str) -> Result<Vec<&'a RawValue>, serde_json::Error> {
        match self.get(field) {
            Some(list) => serde_json::from_str(list.get()),
            None => Ok(Vec::new()),
        }
    }

    /// Writes the object to `out`, each member as it was but for those whose value `replace` writes itself
    /// (it is given the key and returns true when it did).
    pub(crate) fn write(
        &self,
        out: &mut Vec<u8>,
        mut replace: impl FnMut(&str, &mut Vec<u8>) -> bool,
    ) {
        out.push(b'{');
        for (n, (key, value)) in self.0.iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            write_key(out, &key.0);
            if !replace(&key.0, out) {
                out.extend_from_slice(value.get().as_bytes());
            }
        }
        out.push(b'}');
    }
}

/// A JSON array of `texts` (each a JSON value's text), written to `out`.
pub(crate) fn write_array<'t>(out: &mut Vec<u8>, texts: impl IntoIterator<Item = &'t [u8]>) {
    out.push(b'[');
    for (n, text) in texts.into_iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        out.extend_from_slice(text);
    }
    out.push(b']');
}

/// `"key":`, the key escaped as JSON wants it.
fn write_key(out: &mut Vec<u8>, key: &str) {
    // Writing a string into a `Vec` cannot fail.
    let _ = serde_json::to_writer(&mut *out, key);
    out.push(b':');
}

/// The body of each part of a split request: `body` (a JSON object) with the array under `field` holding only
/// the items at the part's `indices`, in that order, and every other member as sent. Fails when `body` is not
/// a JSON object, `field` is not an array, or an index is past its end (the routing plan read the same body, so
/// none of these happens to a request it split).
pub fn split_bodies(
    body: &[u8],
    field: &str,
    parts: &[&[usize]],
) -> Result<Vec<Vec<u8>>, serde_json::Error> {
    let members: Members = serde_json::from_slice(body)?;
    let items = members.items(field)?;
    if let Some(i) = parts
        .iter()
        .flat_map(|p| p.iter())
        .find(|&&i| i >= items.len())
    {
        return Err(serde_json::Error::custom(format!("no item {i} in {field}")));
    }
    let mut bodies = Vec::with_capacity(parts.len());
    for indices in parts {
        let chosen: Vec<&RawValue> = indices.iter().map(|&i| items[i]).collect();
        let mut out = Vec::with_capacity(body.len() / parts.len().max(1) + 64);
        members.write_with_array(&mut out, field, &chosen);
        bodies.push(out);
    }
    Ok(bodies)
}

/// The members `names` of each item of the array under `field` in `body` (a JSON object), as values: `Null`
/// for a member the item does not have (the last one when it has several), that is not an object, or whose
/// value a JSON tree cannot hold. The items' other members (payloads) are scanned, not built: a payload the
/// broker takes as text but a tree refuses (nested past its depth limit, a number past `f64`, a lone
/// surrogate) must not fail the read after [`split_bodies`] sent the parts.
pub fn item_members<const N: usize>(
    body: &[u8],
    field: &str,
    names: [&str; N],
) -> Result<Vec<[serde_json::Value; N]>, serde_json::Error> {
    let members: Members = serde_json::from_slice(body)?;
    Ok(members
        .items(field)?
        .into_iter()
        .map(|item| {
            let item = serde_json::from_str::<Members>(item.get()).ok();
            names.map(|name| {
                item.as_ref()
                    .and_then(|m| m.get(name))
                    .and_then(|value| serde_json::from_str(value.get()).ok())
                    .unwrap_or(serde_json::Value::Null)
            })
        })
        .collect())
}

/// The entries of a split request's answer (a JSON array, one entry per item), gathered from its parts'
/// answers: each entry's text goes into one buffer as it is placed, and [`Self::into_body`] writes them out in
/// request order, `null` for an item no answer named.
pub struct MergedResults {
    text: Vec<u8>,
    entries: Vec<Option<Range<usize>>>,
}

impl MergedResults {
    /// Room for the answers to a request of `items` items.
    pub fn new(items: usize) -> Self {
        MergedResults {
            text: Vec::new(),
            entries: vec![None; items],
        }
    }

    /// Places a part's answer `body` (a JSON array; anything else places nothing): its entry at position
    /// `pos` answers the part's item `index` when the entry is an object whose `index` is a whole number, else
    /// the part's item `pos`; that item is the request's item `indices[local]`. An entry with an `index` gets
    /// that global index instead; an entry naming no item of the part is dropped.
    pub fn place_answer(&mut self, body: &[u8], indices: &[usize]) {
        let Ok(entries) = serde_json::from_slice::<Vec<&RawValue>>(body) else {
            return;
        };
        for (pos, entry) in entries.into_iter().enumerate() {
            let members = serde_json::from_str::<Members>(entry.get()).ok();
            let index = members
                .as_ref()
                .and_then(|m| m.get("index"))
                .map(|value| serde_json::from_str::<u64>(value.get()).ok());
            let local = index.flatten().map_or(pos, |i| i as usize);
            let Some(&global) = indices.get(local) else {
                continue;
            };
            let start = self.text.len();
            match (&members, index) {
                (Some(members), Some(_)) => members.write_with_index(&mut self.text, global),
                _ => self.text.extend_from_slice(entry.get().as_bytes()),
            }
            self.entries[global] = Some(start..self.text.len());
        }
    }

    /// Places `entry` (any JSON value) as the answer to the request's item `global`.
    pub fn place(&mut self, global: usize, entry: &serde_json::Value) {
        let start = self.text.len();
        // Writing a value into a `Vec` cannot fail.
        let _ = serde_json::to_writer(&mut self.text, entry);
        self.entries[global] = Some(start..self.text.len());
    }

    /// The merged answer: a JSON array of the placed entries in request order.
    pub fn into_body(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.text.len() + self.entries.len() * 5 + 2);
        let entries = self.entries.iter().map(|entry| match entry {
            Some(range) => &self.text[range.clone()],
            None => b"null".as_slice(),
        });
        write_array(&mut out, entries);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn parse(bytes: &[u8]) -> Value {
        serde_json::from_slice(bytes).unwrap()
    }

    #[test]
    fn each_part_gets_its_items_as_sent_and_the_other_members() {
        let body = br#"{"items":[{"queue":"a","payload":{"x":1.50}},{"queue":"b","payload":"\u00e9"},{"queue":"a","payload":null}],"extra":{"k":[1,2]},"esc\"aped":true}"#;
        let bodies = split_bodies(body, "items", &[&[0, 2], &[1]]).unwrap();
        assert_eq!(
            String::from_utf8(bodies[0].clone()).unwrap(),
            r#"{"items":[{"queue":"a","payload":{"x":1.50}},{"queue":"a","payload":null}],"extra":{"k":[1,2]},"esc\"aped":true}"#
        );
        assert_eq!(
            String::from_utf8(bodies[1].clone()).unwrap(),
            r#"{"items":[{"queue":"b","payload":"\u00e9"}],"extra":{"k":[1,2]},"esc\"aped":true}"#
        );
    }

    #[test]
    fn a_split_of_what_is_not_an_object_or_an_index_past_the_end_fails() {
        assert!(split_bodies(b"[1]", "items", &[&[0]]).is_err());
        assert!(split_bodies(br#"{"items":{}}"#, "items", &[&[0]]).is_err());
        assert!(split_bodies(br#"{"items":[1]}"#, "items", &[&[1]]).is_err());
    }

    #[test]
    fn a_refused_part_reads_its_items_fields_past_payloads_a_tree_cannot_hold() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        for payload in [deep.as_str(), r#""\ud800""#, "1e400"] {
            let body = format!(
                r#"{{"items":[{{"queue":"a","payload":{payload},"transactionId":"t0"}},7,{{"queue":"b","transactionId":"x","transactionId":"t2","partitionId":{deep}}}]}}"#
            );
            // What the refused path read before: a tree of the whole body, which fails on such a payload.
            assert!(serde_json::from_str::<Value>(&body).is_err(), "{payload}");
            assert!(split_bodies(body.as_bytes(), "items", &[&[0], &[1, 2]]).is_ok());
            let fields = item_members(
                body.as_bytes(),
                "items",
                ["transactionId", "partitionId", "queue"],
            )
            .unwrap();
            assert_eq!(
                fields,
                vec![
                    [json!("t0"), Value::Null, json!("a")],
                    [Value::Null, Value::Null, Value::Null],
                    [json!("t2"), Value::Null, json!("b")],
                ]
            );
        }
    }

    #[test]
    fn answers_go_back_in_request_order_with_their_global_index() {
        let mut merged = MergedResults::new(4);
        merged.place_answer(
            br#"[{"index":0,"status":"queued","queueName":"a"},{"index":1,"status":"duplicate"}]"#,
            &[0, 3],
        );
        merged.place_answer(br#"[{"index":0,"transactionId":"t\"1"}]"#, &[2]);
        assert_eq!(
            String::from_utf8(merged.into_body()).unwrap(),
            r#"[{"index":0,"status":"queued","queueName":"a"},null,{"index":2,"transactionId":"t\"1"},{"index":3,"status":"duplicate"}]"#
        );
    }

    #[test]
    fn an_entry_without_a_whole_index_answers_its_position() {
        let mut merged = MergedResults::new(3);
        // No index: the entry's position names the part's item, and the text is kept as it is.
        merged.place_answer(br#"[{"success":true},7]"#, &[2, 0]);
        // An index that is not a whole number: its position too, and the index is still rewritten.
        merged.place_answer(br#"[{"index":"x","ok":1}]"#, &[1]);
        assert_eq!(
            parse(&merged.into_body()),
            json!([7, {"index": 1, "ok": 1}, {"success": true}])
        );
    }

    #[test]
    fn entries_naming_no_item_of_the_part_and_answers_that_are_not_arrays_place_nothing() {
        let mut merged = MergedResults::new(2);
        merged.place_answer(br#"[{"index":5}]"#, &[0]);
        merged.place_answer(br#"{"error":"refused"}"#, &[1]);
        merged.place(1, &json!({"index": 1, "status": "failed"}));
        assert_eq!(
            parse(&merged.into_body()),
            json!([null, {"index": 1, "status": "failed"}])
        );
    }
}

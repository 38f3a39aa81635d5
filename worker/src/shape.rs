//! The fields of a request body that routing reads ([`BodyShape`]), and nothing else: payloads and every
//! other field are skipped by the parser without being built, so deciding where a push goes costs a scan of
//! its bytes, not a JSON tree.
//!
//! Every field is lenient: a value of another type than routing expects reads as absent instead of failing
//! the parse. The broker tolerates some of those (a non-string `namespace` on a pushed item is ignored), and a
//! field one route does not use must not decide another's routing. A field a route needs that is absent or
//! of the wrong type sends the request to shard 0, whose broker answers the 400. A key written twice reads as
//! its last value, as the broker reads it.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// The routing fields of a request body (each route reads its own).
#[derive(Debug, Default)]
pub struct BodyShape {
    /// `queue` (configure).
    pub queue: Option<String>,
    /// `partitionId` (single ack, traces).
    pub partition_id: Option<String>,
    /// `namespace` (configure).
    pub namespace: Option<String>,
    /// `task` (configure).
    pub task: Option<String>,
    /// `items` (push); an element that is not an object is `None`.
    pub items: Option<Vec<Option<ItemShape>>>,
    /// `acknowledgments` (batch ack).
    pub acknowledgments: Option<Vec<Option<ItemShape>>>,
    /// `operations` (transaction).
    pub operations: Option<Vec<Option<OperationShape>>>,
    /// `limit` (bulk dead-letter work): only whether it is there and not null.
    pub limit: Option<IgnoredAny>,
}

/// The routing fields of a pushed item or an acknowledgment.
#[derive(Debug, Default)]
pub struct ItemShape {
    /// `queue` (pushed item).
    pub queue: Option<String>,
    /// `partitionId` (acknowledgment).
    pub partition_id: Option<String>,
    /// `namespace` (pushed item).
    pub namespace: Option<String>,
    /// `task` (pushed item).
    pub task: Option<String>,
}

/// The routing fields of a transaction operation.
#[derive(Debug, Default)]
pub struct OperationShape {
    /// `items` (push operation).
    pub items: Option<Vec<Option<ItemShape>>>,
    /// `partitionId` (ack operation).
    pub partition_id: Option<String>,
}

/// A reader of a routing shape from a JSON object: each listed key read with its reader (whose value is its
/// `.0`), every other key skipped without being built. A key written twice reads as its last value, as the
/// broker's own readers read it (`queen_edge::http`), so routing sends a request to the shard that will
/// serve the queue the broker reads. (serde's derived readers refuse a repeated field instead, and such a
/// body went to shard 0, which stored a queue that was not its own.)
macro_rules! last_value_wins {
    ($shape:ty { $($key:literal => $field:ident: $reader:ty),* $(,)? }) => {
        impl<'de> Deserialize<'de> for $shape {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct ShapeVisitor;
                impl<'de> Visitor<'de> for ShapeVisitor {
                    type Value = $shape;
                    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                        f.write_str("a JSON object")
                    }
                    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<$shape, A::Error> {
                        let mut out = <$shape>::default();
                        while let Some(key) = map.next_key::<String>()? {
                            match key.as_str() {
                                $($key => out.$field = map.next_value::<$reader>()?.0,)*
                                _ => {
                                    map.next_value::<IgnoredAny>()?;
                                }
                            }
                        }
                        Ok(out)
                    }
                }
                d.deserialize_map(ShapeVisitor)
            }
        }
    };
}

last_value_wins!(BodyShape {
    "queue" => queue: LenientString,
    "partitionId" => partition_id: LenientString,
    "namespace" => namespace: LenientString,
    "task" => task: LenientString,
    "items" => items: LenientList<ItemShape>,
    "acknowledgments" => acknowledgments: LenientList<ItemShape>,
    "operations" => operations: LenientList<OperationShape>,
    "limit" => limit: NotNull,
});

last_value_wins!(ItemShape {
    "queue" => queue: LenientString,
    "partitionId" => partition_id: LenientString,
    "namespace" => namespace: LenientString,
    "task" => task: LenientString,
});

last_value_wins!(OperationShape {
    "items" => items: LenientList<ItemShape>,
    "partitionId" => partition_id: LenientString,
});

/// [`lenient_string`] as a reader.
struct LenientString(Option<String>);

impl<'de> Deserialize<'de> for LenientString {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        lenient_string(d).map(LenientString)
    }
}

/// [`lenient_list`] as a reader.
struct LenientList<T>(Option<Vec<Option<T>>>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for LenientList<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        lenient_list(d).map(LenientList)
    }
}

/// Any JSON value, skipped: `Some` unless it is `null`.
struct NotNull(Option<IgnoredAny>);

impl<'de> Deserialize<'de> for NotNull {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Option::<IgnoredAny>::deserialize(d).map(NotNull)
    }
}

/// The routing fields of `body`; `None` when it is not JSON (or not a JSON object): the request then goes
/// to shard 0, which answers the 400. An empty body has no fields. A key written twice reads as its last
/// value ([`last_value_wins`]).
pub fn shape(body: &[u8]) -> Option<BodyShape> {
    if body.is_empty() {
        return Some(BodyShape::default());
    }
    serde_json::from_slice(body).ok()
}

/// The first queue a write names that shard `index` of `count` does not serve, with the shard that does: the
/// items of a push (`/api/v1/push`), the pushed items of a transaction (`/api/v1/transaction`), the queue of a
/// configure (`/api/v1/configure`); `None` for any other request, a body routing cannot read (its broker answers
/// the 400), or one shard. The entry Worker routes each queue to its shard, so a stray queue is a routing
/// fault: the shard refuses the request rather than store a queue no pop can reach (`crate::broker`).
pub fn stray_queue(path: &str, body: &[u8], index: u16, count: u16) -> Option<(String, u16)> {
    if count <= 1 {
        return None;
    }
    let shape = match path {
        "/api/v1/push" | "/api/v1/transaction" | "/api/v1/configure" => shape(body)?,
        _ => return None,
    };
    let items = |list: &Option<Vec<Option<ItemShape>>>| -> Vec<String> {
        list.iter()
            .flatten()
            .flatten()
            .filter_map(|item| item.queue.clone())
            .collect()
    };
    let queues = match path {
        "/api/v1/push" => items(&shape.items),
        "/api/v1/transaction" => shape
            .operations
            .iter()
            .flatten()
            .flatten()
            .flat_map(|op| items(&op.items))
            .collect(),
        _ => shape.queue.into_iter().collect(),
    };
    queues.into_iter().find_map(|queue| {
        let home = crate::shards::shard_of_queue(&queue, count);
        (home != index).then_some((queue, home))
    })
}

/// Any JSON value: a string is kept, anything else skipped as `None`.
fn lenient_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    struct StringOrSkip;
    impl<'de> Visitor<'de> for StringOrSkip {
        type Value = Option<String>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(v.to_string()))
        }
        fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
            Ok(Some(v))
        }
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(None)
        }
    }
    d.deserialize_any(StringOrSkip)
}

/// Any JSON value: an array is kept, each element that is an object read as `T` (others `None`); anything
/// else skipped as `None`.
fn lenient_list<'de, D, T>(d: D) -> Result<Option<Vec<Option<T>>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct ListOrSkip<T>(PhantomData<T>);
    impl<'de, T: Deserialize<'de>> Visitor<'de> for ListOrSkip<T> {
        type Value = Option<Vec<Option<T>>>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(element) = seq.next_element::<ObjectOrSkip<T>>()? {
                out.push(element.0);
            }
            Ok(Some(out))
        }
    }
    d.deserialize_any(ListOrSkip(PhantomData))
}

/// An element of a lenient list: an object read as `T`, anything else `None`.
struct ObjectOrSkip<T>(Option<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for ObjectOrSkip<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ElementVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for ElementVisitor<T> {
            type Value = ObjectOrSkip<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let value = T::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(ObjectOrSkip(Some(value)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(ObjectOrSkip(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(ObjectOrSkip(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(ObjectOrSkip(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(ObjectOrSkip(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(ObjectOrSkip(None))
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(ObjectOrSkip(None))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(ObjectOrSkip(None))
            }
        }
        d.deserialize_any(ElementVisitor(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrong_types_read_as_absent() {
        let s = shape(
            br#"{"queue":"q","namespace":5,"task":{"a":[1]},"items":[{"queue":"a","namespace":[1],"payload":{"x":[1,2]}},7,{"queue":3}],"acknowledgments":"no","operations":[{"items":[{"queue":"b"}],"partitionId":9}]}"#,
        )
        .unwrap();
        assert_eq!(s.queue.as_deref(), Some("q"));
        assert_eq!((s.namespace, s.task), (None, None));
        let items = s.items.unwrap();
        assert_eq!(items.len(), 3);
        assert_eq!(items[0].as_ref().unwrap().queue.as_deref(), Some("a"));
        assert!(items[0].as_ref().unwrap().namespace.is_none());
        assert!(items[1].is_none());
        assert!(items[2].as_ref().unwrap().queue.is_none());
        assert!(s.acknowledgments.is_none());
        let op = s.operations.unwrap().remove(0).unwrap();
        assert_eq!(op.partition_id, None);
        assert_eq!(
            op.items.unwrap()[0].as_ref().unwrap().queue.as_deref(),
            Some("b")
        );
        assert!(shape(b"{not json").is_none());
        assert!(shape(b"").is_some());
    }

    #[test]
    fn a_write_of_a_queue_another_shard_serves_is_found() {
        use crate::shards::shard_of_queue;
        let home = |q: &str| shard_of_queue(q, 4);
        let (mine, other) =
            (0..100)
                .map(|i| format!("q{i}"))
                .fold((None, None), |(mine, other), q| match home(&q) {
                    1 => (mine.or(Some(q)), other),
                    _ => (mine, other.or(Some(q))),
                });
        let (mine, other) = (mine.unwrap(), other.unwrap());
        let push =
            |q: &str| format!(r#"{{"queue":"{other}","items":[{{"queue":"{q}","payload":1}}]}}"#);
        // A push's top-level `queue` is not read (the push does not use it); its items' are.
        assert_eq!(
            stray_queue("/api/v1/push", push(&mine).as_bytes(), 1, 4),
            None
        );
        assert_eq!(
            stray_queue("/api/v1/push", push(&other).as_bytes(), 1, 4),
            Some((other.clone(), home(&other)))
        );
        let txn = format!(
            r#"{{"operations":[{{"type":"push","items":[{{"queue":"{mine}"}},{{"queue":"{other}"}}]}}]}}"#
        );
        assert_eq!(
            stray_queue("/api/v1/transaction", txn.as_bytes(), 1, 4),
            Some((other.clone(), home(&other)))
        );
        let configure = format!(r#"{{"queue":"{other}"}}"#);
        assert!(stray_queue("/api/v1/configure", configure.as_bytes(), 1, 4).is_some());
        // One shard, another route, or a body routing cannot read: nothing to check here.
        assert_eq!(
            stray_queue("/api/v1/push", push(&other).as_bytes(), 0, 1),
            None
        );
        assert_eq!(
            stray_queue("/api/v1/ack", push(&other).as_bytes(), 1, 4),
            None
        );
        assert_eq!(stray_queue("/api/v1/push", b"{not json", 1, 4), None);
    }

    #[test]
    fn a_repeated_key_reads_as_its_last_value_at_every_level() {
        let s = shape(
            br#"{"queue":"first","queue":"last","items":[{"queue":"a"}],"items":[{"queue":"x","payload":1,"queue":"y"}],"namespace":1,"namespace":"ns","operations":[{"partitionId":"p1","partitionId":"p2","items":[{"queue":"b","queue":"c"}]}]}"#,
        )
        .unwrap();
        assert_eq!(s.queue.as_deref(), Some("last"));
        assert_eq!(s.namespace.as_deref(), Some("ns"));
        let items = s.items.unwrap();
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].as_ref().unwrap().queue.as_deref(), Some("y"));
        let op = s.operations.unwrap().remove(0).unwrap();
        assert_eq!(op.partition_id.as_deref(), Some("p2"));
        assert_eq!(
            op.items.unwrap()[0].as_ref().unwrap().queue.as_deref(),
            Some("c")
        );
        // Beside a payload nested deeper than a JSON tree may be (the broker keeps payloads as text).
        let deep = format!("{}{}", "[".repeat(300), "]".repeat(300));
        let body = format!(r#"{{"items":[{{"queue":"a","payload":{deep},"queue":"b"}}]}}"#);
        let items = shape(body.as_bytes()).unwrap().items.unwrap();
        assert_eq!(items[0].as_ref().unwrap().queue.as_deref(), Some("b"));
    }
}

//! Which shard(s) a request goes to, decided from its method, path, query and body (pure: no I/O).
//!
//! - queue-scoped routes go to the queue's shard (path `:queue`, body `queue`, `?queue=`);
//! - lease, dead-letter and partition ids go to the shard encoded in them;
//! - a push or batch ack whose items all live on one shard goes there unchanged (no extra hop); otherwise it
//!   is split by shard and the answers merged in request order ([`Plan::Split`]);
//! - a transaction on one shard goes there; one touching several shards goes to the broker's
//!   coordinator, which runs a two-phase commit ([`Plan::Transaction`]);
//! - discovery pops ([`Plan::Discovery`]) ask the catalog which shards hold the namespace or task;
//! - routes over every queue fan out to every shard and merge ([`Plan::FanOut`]).
//!
//! A body that does not parse goes to shard 0, which answers the 400.

pub use crate::shape::{shape, BodyShape, ItemShape, OperationShape};

use crate::shards::ShardMap;

/// What the entry Worker does with a request when `SHARDS` > 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Forward the request unchanged to this shard.
    One(u16),
    /// Split the body's list (`field`) by shard: each part is (shard, indices of its items in the list).
    Split {
        /// The list field: `items` (push) or `acknowledgments` (batch ack).
        field: &'static str,
        /// The shards and their items, in order of first appearance.
        parts: Vec<(u16, Vec<usize>)>,
    },
    /// A pop by namespace or task.
    Discovery,
    /// Ask every shard and merge the answers.
    FanOut(Merge),
    /// Answer this status and error without asking any shard.
    Refuse(u16, String),
    /// A transaction over these shards (ascending): two-phase commit through the coordinator
    /// (`crate::txn_coordinator`).
    Transaction(Vec<u16>),
}

/// How the answers of a fan-out are merged (see `crate::fanout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Merge {
    /// `/health`: the first unhealthy answer, else shard 0's.
    Health,
    /// Objects: numbers summed, lists concatenated, the rest from shard 0.
    Sum,
    /// `/resources/queues`: `queues` concatenated, sorted by name.
    Queues,
    /// `/resources/overview`: sums, with namespaces and tasks counted once across shards.
    Overview,
    /// `/resources/namespaces` (`true`) or `/resources/tasks` (`false`): rows merged by label.
    Labels(bool),
    /// A JSON array answer, concatenated.
    Array,
    /// `/consumer-groups/:group`: one object keyed by queue, merged.
    Object,
    /// A paged listing: each shard is asked for `offset + limit` rows from 0, the rows merged in the
    /// listing's order, then the page cut.
    Paged(Paging),
    /// `/metrics/prometheus`: every series labelled `shard="k"`.
    Prometheus,
    /// `/traces/names`: every shard's names, merged by name (counts added), then the page cut.
    TraceNames,
}

/// A paged listing's list field, order and default page size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paging {
    /// The list field of the answer.
    pub field: &'static str,
    /// The fields the rows are ordered by, and whether descending.
    pub order: &'static [&'static str],
    /// Descending (newest first).
    pub descending: bool,
    /// The route's default `limit`.
    pub default_limit: u64,
    /// Whether the answer's `pagination` carries a grand `total` (summed over shards).
    pub total: bool,
    /// What a top-level `total` of the answer counts.
    pub top_total: TopTotal,
}

/// What a paged answer's top-level `total` counts, so the merge knows how to combine it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopTotal {
    /// The rows on this page (`/dlq`, `/messages`): the merged page's length.
    PageSize,
    /// Every row matching the filter (`/deliveries`): summed over shards.
    Sum,
}

/// Decides the plan for a request. `path` is still percent-encoded; `query` is the raw query string.
pub fn plan(map: &ShardMap, method: &str, path: &str, query: &str, body: &[u8]) -> Plan {
    plan_shaped(map, method, path, query, shape(body).as_ref())
}

/// [`plan`] for a body already read into its [`BodyShape`] (`None`: not JSON of that shape).
pub fn plan_shaped(
    map: &ShardMap,
    method: &str,
    path: &str,
    query: &str,
    body: Option<&BodyShape>,
) -> Plan {
    let method = method.to_ascii_uppercase();
    let segs: Vec<String> = path
        .trim_start_matches('/')
        .split('/')
        .map(|s| percent_decode(s).unwrap_or_else(|| s.to_string()))
        .collect();
    let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
    let queue_param = query_param(query, "queue");
    use Plan::*;
    match (method.as_str(), segs.as_slice()) {
        ("GET", ["health"]) => FanOut(Merge::Health),
        ("GET", ["metrics"]) => FanOut(Merge::Sum),
        ("GET", ["metrics", "prometheus"]) => FanOut(Merge::Prometheus),
        (m, ["api", "v1", tail @ ..]) => match (m, tail) {
            ("POST", ["push"]) => split(body.and_then(|b| b.items.as_deref()), "items", |item| {
                item.queue.as_deref().map(|q| map.of_queue(q))
            }),
            ("GET", ["pop"]) => Discovery,
            ("GET", ["pop", "queue", q, ..]) => One(map.of_queue(q)),
            // A message's traces are on its partition's shard; the listings by name span every shard.
            ("GET", ["traces", "names"]) => FanOut(Merge::TraceNames),
            ("GET", ["traces", "by-name", _]) => FanOut(Merge::Paged(Paging {
                field: "traces",
                order: &["createdAt", "id"],
                descending: false,
                default_limit: 100,
                total: false,
                top_total: TopTotal::PageSize,
            })),
            ("GET", ["traces", partition_id, _]) => One(map.of_partition(partition_id)),
            ("POST", ["ack"]) | ("POST", ["traces"]) => One(body
                .and_then(|b| b.partition_id.as_deref())
                .map_or(0, |p| map.of_partition(p))),
            ("POST", ["ack", "batch"]) => split(
                body.and_then(|b| b.acknowledgments.as_deref()),
                "acknowledgments",
                |item| item.partition_id.as_deref().map(|p| map.of_partition(p)),
            ),
            ("POST", ["lease", id, "extend"]) => One(map.of_uuid(id)),
            ("POST", ["transaction"]) => transaction(map, body),
            ("POST", ["configure"]) => One(body
                .and_then(|b| b.queue.as_deref())
                .map_or(0, |q| map.of_queue(q))),
            (_, ["resources", "queues", q, ..]) => One(map.of_queue(q)),
            ("GET", ["resources", "queues"]) => FanOut(Merge::Queues),
            ("GET", ["resources", "overview"]) => FanOut(Merge::Overview),
            ("GET", ["resources", "namespaces"]) => FanOut(Merge::Labels(true)),
            ("GET", ["resources", "tasks"]) => FanOut(Merge::Labels(false)),
            ("GET", ["resources", "partitions"]) => match queue_param {
                Some(q) => One(map.of_queue(&q)),
                None => FanOut(Merge::Paged(Paging {
                    field: "partitions",
                    order: &["queue", "partition"],
                    descending: false,
                    default_limit: 100,
                    total: true,
                    top_total: TopTotal::PageSize,
                })),
            },
            ("GET", ["dlq"]) => match queue_param {
                Some(q) => One(map.of_queue(&q)),
                None => FanOut(Merge::Paged(Paging {
                    field: "messages",
                    order: &["failedAt", "id"],
                    descending: true,
                    default_limit: 100,
                    total: false,
                    top_total: TopTotal::PageSize,
                })),
            },
            ("POST", ["dlq", "replay" | "delete"]) => bulk_dead_letters(map, body),
            ("POST", ["dlq", id, "replay"]) => One(map.of_uuid(id)),
            ("GET", ["deliveries"]) => match queue_param {
                Some(q) => One(map.of_queue(&q)),
                None => FanOut(Merge::Paged(Paging {
                    field: "deliveries",
                    order: &["at", "id"],
                    descending: true,
                    default_limit: 100,
                    total: true,
                    top_total: TopTotal::Sum,
                })),
            },
            ("GET", ["messages"]) => match queue_param {
                Some(q) => One(map.of_queue(&q)),
                None => FanOut(Merge::Paged(Paging {
                    field: "messages",
                    order: &["queue", "partition"],
                    descending: false,
                    default_limit: 200,
                    total: false,
                    top_total: TopTotal::PageSize,
                })),
            },
            (_, ["messages", partition_id, ..]) => One(map.of_partition(partition_id)),
            ("GET", ["consumer-groups"]) => FanOut(Merge::Array),
            ("GET", ["consumer-groups", "lagging"]) => FanOut(Merge::Array),
            ("GET", ["consumer-groups", _]) => FanOut(Merge::Object),
            (_, ["consumer-groups", _, "queues", q, ..]) => One(map.of_queue(q)),
            ("DELETE", ["consumer-groups", _]) => FanOut(Merge::Sum),
            ("POST", ["consumer-groups", _, "subscription"]) => FanOut(Merge::Sum),
            ("GET", ["status"]) => FanOut(Merge::Sum),
            ("GET", ["status", "queues"]) => FanOut(Merge::Paged(Paging {
                field: "queues",
                order: &["createdAt", "name"],
                descending: true,
                default_limit: 100,
                total: false,
                top_total: TopTotal::PageSize,
            })),
            ("GET", ["status", "queues", q, ..]) => One(map.of_queue(q)),
            ("GET", ["status", "analytics"]) => FanOut(Merge::Sum),
            ("GET", ["status", "buffers"]) => FanOut(Merge::Sum),
            // Maintenance mode is per object: every shard is switched (and reports) together.
            (_, ["system", "maintenance", ..]) => FanOut(Merge::Sum),
            // Unknown routes, `stats/refresh`: shard 0 answers (404 for an unknown route).
            _ => One(0),
        },
        _ => One(0),
    }
}

/// `POST /dlq/replay|delete`: a filter naming a queue goes to its shard. Without a queue every shard
/// works on its own dead letters and the counts are summed; a `limit` cannot be kept across shards that
/// way, so such a request is refused rather than doing more than it asked.
fn bulk_dead_letters(map: &ShardMap, body: Option<&BodyShape>) -> Plan {
    match body {
        Some(BodyShape { queue: Some(q), .. }) => Plan::One(map.of_queue(q)),
        Some(BodyShape { limit: Some(_), .. }) => Plan::Refuse(
            400,
            "With SHARDS > 1, bulk dead-letter work with a limit must name a queue (each shard holds \
             its own dead letters, so a limit over all of them cannot be kept)"
                .to_string(),
        ),
        _ => Plan::FanOut(Merge::Sum),
    }
}

/// A transaction: the shards of its pushed items' queues and of its acks' partitions. One shard: forward
/// (today's single commit). Several: two-phase commit ([`Plan::Transaction`]).
fn transaction(map: &ShardMap, body: Option<&BodyShape>) -> Plan {
    let Some(body) = body else {
        return Plan::One(0);
    };
    let mut shards: Vec<u16> = Vec::new();
    let mut add = |s: u16| {
        if !shards.contains(&s) {
            shards.push(s);
        }
    };
    for op in body.operations.iter().flatten().flatten() {
        for item in op.items.iter().flatten().flatten() {
            if let Some(q) = &item.queue {
                add(map.of_queue(q));
            }
        }
        if let Some(p) = &op.partition_id {
            add(map.of_partition(p));
        }
    }
    match shards.as_slice() {
        [] => Plan::One(0),
        [one] => Plan::One(*one),
        many => {
            let mut sorted = many.to_vec();
            sorted.sort_unstable();
            Plan::Transaction(sorted)
        }
    }
}

/// Groups the items of list `field` by `shard_of`. An item without a shard, or a body that does not
/// parse, sends the whole request to shard 0 (which refuses it as a whole).
fn split(
    items: Option<&[Option<ItemShape>]>,
    field: &'static str,
    shard_of: impl Fn(&ItemShape) -> Option<u16>,
) -> Plan {
    let Some(items) = items else {
        return Plan::One(0);
    };
    let mut parts: Vec<(u16, Vec<usize>)> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let Some(shard) = item.as_ref().and_then(&shard_of) else {
            return Plan::One(0);
        };
        match parts.iter_mut().find(|(s, _)| *s == shard) {
            Some((_, indices)) => indices.push(i),
            None => parts.push((shard, vec![i])),
        }
    }
    match parts.as_slice() {
        [] => Plan::One(0),
        [(one, _)] => Plan::One(*one),
        _ => Plan::Split { field, parts },
    }
}

/// The percent-decoded value of query parameter `name`, if present and non-empty.
pub fn query_param(query: &str, name: &str) -> Option<String> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| percent_decode(&v.replace('+', " ")).unwrap_or_else(|| v.to_string()))
        .filter(|v| !v.is_empty())
}

/// Decodes `%XX` escapes; `None` when an escape is malformed or the bytes are not UTF-8 (the shard then
/// sees the raw segment and answers the 400 itself).
pub fn percent_decode(s: &str) -> Option<String> {
    if !s.contains('%') {
        return Some(s.to_string());
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Fixtures of the unit tests that split requests over shards (this module's and `txn_plan`'s).
#[cfg(test)]
pub(crate) mod fixtures {
    use super::ShardMap;

    /// Broker "b" over 4 shards.
    pub(crate) fn map() -> ShardMap {
        ShardMap {
            broker: "b".into(),
            count: 4,
        }
    }

    /// Two queue names on different shards of [`map`].
    pub(crate) fn two_queues() -> (String, String) {
        let m = map();
        let a = "q0".to_string();
        let b = (1..)
            .map(|i| format!("q{i}"))
            .find(|q| m.of_queue(q) != m.of_queue(&a))
            .unwrap();
        (a, b)
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{map, two_queues};
    use super::*;

    #[test]
    fn queue_routes_go_to_the_queue_shard() {
        let m = map();
        let s = m.of_queue("a/b");
        assert_eq!(
            plan(&m, "GET", "/api/v1/pop/queue/a%2Fb", "", b""),
            Plan::One(s)
        );
        assert_eq!(
            plan(&m, "DELETE", "/api/v1/resources/queues/a%2Fb", "", b""),
            Plan::One(s)
        );
        assert_eq!(
            plan(&m, "GET", "/api/v1/dlq", "queue=a%2Fb&limit=3", b""),
            Plan::One(s)
        );
        assert_eq!(
            plan(&m, "POST", "/api/v1/configure", "", br#"{"queue":"a/b"}"#),
            Plan::One(s)
        );
        assert_eq!(
            plan(&m, "POST", "/api/v1/lease/x/extend", "", b""),
            Plan::One(0)
        );
        assert_eq!(
            plan(&m, "POST", "/api/v1/ack", "", br#"{"partitionId":"3"}"#),
            Plan::One(2)
        );
    }

    #[test]
    fn a_message_s_traces_are_read_on_its_shard_and_listings_span_every_shard() {
        let m = map();
        let shard = m.of_partition("3");
        assert_ne!(shard, 0, "a partition off shard 0, so the test can fail");
        assert_eq!(
            plan(&m, "POST", "/api/v1/traces", "", br#"{"partitionId":"3"}"#),
            Plan::One(shard)
        );
        assert_eq!(
            plan(&m, "GET", "/api/v1/traces/3/tx-1", "", b""),
            Plan::One(shard)
        );
        assert_eq!(
            plan(&m, "GET", "/api/v1/traces/names", "limit=5", b""),
            Plan::FanOut(Merge::TraceNames)
        );
        assert!(matches!(
            plan(&m, "GET", "/api/v1/traces/by-name/checkout", "", b""),
            Plan::FanOut(Merge::Paged(Paging {
                field: "traces",
                ..
            }))
        ));
    }

    #[test]
    fn pushes_split_only_over_several_shards() {
        let m = map();
        let (a, b) = two_queues();
        let one = format!(r#"{{"items":[{{"queue":"{a}"}},{{"queue":"{a}"}}]}}"#);
        assert_eq!(
            plan(&m, "POST", "/api/v1/push", "", one.as_bytes()),
            Plan::One(m.of_queue(&a))
        );
        let mixed =
            format!(r#"{{"items":[{{"queue":"{a}"}},{{"queue":"{b}"}},{{"queue":"{a}"}}]}}"#);
        assert_eq!(
            plan(&m, "POST", "/api/v1/push", "", mixed.as_bytes()),
            Plan::Split {
                field: "items",
                parts: vec![(m.of_queue(&a), vec![0, 2]), (m.of_queue(&b), vec![1])]
            }
        );
        assert_eq!(
            plan(&m, "POST", "/api/v1/push", "", b"{not json"),
            Plan::One(0)
        );
    }

    #[test]
    fn cross_shard_transactions_go_to_two_phase_commit() {
        let m = map();
        let (a, b) = two_queues();
        let same = format!(r#"{{"operations":[{{"type":"push","items":[{{"queue":"{a}"}}]}}]}}"#);
        assert_eq!(
            plan(&m, "POST", "/api/v1/transaction", "", same.as_bytes()),
            Plan::One(m.of_queue(&a))
        );
        let across = format!(
            r#"{{"operations":[{{"type":"push","items":[{{"queue":"{a}"}}]}},{{"type":"push","items":[{{"queue":"{b}"}}]}}]}}"#
        );
        let mut both = vec![m.of_queue(&a), m.of_queue(&b)];
        both.sort_unstable();
        assert_eq!(
            plan(&m, "POST", "/api/v1/transaction", "", across.as_bytes()),
            Plan::Transaction(both)
        );
    }

    #[test]
    fn maintenance_mode_switches_every_shard() {
        let m = map();
        for (method, path) in [
            ("GET", "/api/v1/system/maintenance"),
            ("POST", "/api/v1/system/maintenance"),
            ("POST", "/api/v1/system/maintenance/pop"),
        ] {
            assert_eq!(
                plan(&m, method, path, "", br#"{"enabled":true}"#),
                Plan::FanOut(Merge::Sum),
                "{method} {path}"
            );
        }
    }

    #[test]
    fn bulk_dead_letters_and_the_delivery_log_follow_their_queue() {
        let m = map();
        let q = m.of_queue("orders");
        for path in ["/api/v1/dlq/replay", "/api/v1/dlq/delete"] {
            assert_eq!(
                plan(&m, "POST", path, "", br#"{"queue":"orders","limit":5}"#),
                Plan::One(q),
                "{path}"
            );
            assert_eq!(
                plan(
                    &m,
                    "POST",
                    path,
                    "",
                    br#"{"errorContains":"x","dryRun":true}"#
                ),
                Plan::FanOut(Merge::Sum),
                "{path}"
            );
            assert!(
                matches!(
                    plan(&m, "POST", path, "", br#"{"limit":5}"#),
                    Plan::Refuse(400, _)
                ),
                "{path}"
            );
        }
        assert_eq!(
            plan(&m, "GET", "/api/v1/deliveries", "queue=orders", b""),
            Plan::One(q)
        );
        assert!(matches!(
            plan(&m, "GET", "/api/v1/deliveries", "", b""),
            Plan::FanOut(Merge::Paged(Paging {
                top_total: TopTotal::Sum,
                ..
            }))
        ));
    }

    #[test]
    fn decoding() {
        assert_eq!(percent_decode("a%2Fb").as_deref(), Some("a/b"));
        assert_eq!(percent_decode("a%2"), None);
        assert_eq!(
            query_param("x=1&queue=a%20b", "queue").as_deref(),
            Some("a b")
        );
        assert_eq!(query_param("queue=", "queue"), None);
    }
}

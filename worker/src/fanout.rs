//! Merging the answers of several shards into one (pure: JSON in, JSON out).
//!
//! Each function takes the shards' answers in shard order. A shard that answered an error makes the
//! merged answer that error (the caller checks statuses first, see `crate::sharded`); a write that only
//! some shards applied gets an error naming them ([`partial_write_error`]).

use std::cmp::Ordering;

use serde_json::{Map, Value};

use crate::routing::{Paging, TopTotal};

/// Keys whose values are not added up across shards: the largest is kept (times, sizes of buckets, and
/// the per-object settings `MAX_STORED_BYTES` and `SEGMENT_CACHE_BYTES`, which every shard has in full).
const MAX_KEYS: [&str; 6] = [
    "uptime",
    "bucketMinutes",
    "pointCount",
    "statsAge",
    "maxStoredBytes",
    "budgetBytes",
];

/// Objects merged key by key: numbers added (except [`MAX_KEYS`], the largest), arrays concatenated,
/// objects merged recursively, booleans and-ed (a health flag holds when it holds on every shard), anything
/// else taken from the first answer that has it. A top-level time series (an array of objects that each
/// have a `timestamp`: `/status` `throughput`, `/status/analytics` `dataPoints`) is merged point by point
/// instead ([`merge_series`]).
pub fn sum(values: Vec<Value>) -> Value {
    let mut it = values.into_iter();
    let Some(first) = it.next() else {
        return Value::Null;
    };
    let mut merged = it.fold(first, |acc, v| sum_two(acc, v, None));
    if let Value::Object(fields) = &mut merged {
        let mut points = None;
        for value in fields.values_mut() {
            if let Some(n) = merge_series(value) {
                points = Some(n);
            }
        }
        // `/status` counts its throughput's points: one per minute, not one per shard and minute.
        if let (Some(n), Some(count)) = (points, fields.get_mut("pointCount")) {
            *count = Value::from(n);
        }
    }
    merged
}

/// The shards' points of one time series, concatenated by [`sum`], as one point per `timestamp` (their
/// numbers added), in time order; the number of points, or `None` when `value` is no time series.
fn merge_series(value: &mut Value) -> Option<usize> {
    let Value::Array(points) = value else {
        return None;
    };
    let stamp = |p: &Value| {
        p.get("timestamp")
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    if points.is_empty() || !points.iter().all(|p| stamp(p).is_some()) {
        return None;
    }
    let mut by_time: std::collections::BTreeMap<String, Value> = Default::default();
    for point in points.drain(..) {
        let at = stamp(&point).unwrap_or_default();
        let merged = match by_time.remove(&at) {
            Some(earlier) => sum_two(earlier, point, None),
            None => point,
        };
        by_time.insert(at, merged);
    }
    points.extend(by_time.into_values());
    Some(points.len())
}

fn sum_two(a: Value, b: Value, key: Option<&str>) -> Value {
    match (a, b) {
        (Value::Object(mut a), Value::Object(b)) => {
            for (k, bv) in b {
                let merged = match a.remove(&k) {
                    Some(av) => sum_two(av, bv, Some(&k)),
                    None => bv,
                };
                a.insert(k, merged);
            }
            Value::Object(a)
        }
        (Value::Array(mut a), Value::Array(b)) => {
            a.extend(b);
            Value::Array(a)
        }
        (Value::Number(a), Value::Number(b)) => {
            let keep_max = key.is_some_and(|k| MAX_KEYS.contains(&k));
            match (a.as_u64(), b.as_u64(), a.as_f64(), b.as_f64()) {
                (Some(x), Some(y), _, _) => Value::from(if keep_max {
                    x.max(y)
                } else {
                    x.saturating_add(y)
                }),
                (_, _, Some(x), Some(y)) => Value::from(if keep_max { x.max(y) } else { x + y }),
                _ => Value::Number(a),
            }
        }
        // Health flags: true only when every shard says so.
        (Value::Bool(a), Value::Bool(b)) => Value::Bool(a && b),
        (Value::Null, b) => b,
        (a, _) => a,
    }
}

/// `/resources/queues`: the `queues` lists concatenated, by name.
pub fn queues(values: Vec<Value>) -> Value {
    let mut all: Vec<Value> = values
        .into_iter()
        .flat_map(|v| take_array(v, "queues"))
        .collect();
    all.sort_by(|a, b| cmp_fields(a, b, &["name"]));
    serde_json::json!({ "queues": all })
}

/// `/resources/overview`: numbers summed; `namespaces` and `tasks` are the distinct labels of `queues`
/// (the merged `/resources/queues` answer), since one label can span shards.
pub fn overview(values: Vec<Value>, queues: &Value) -> Value {
    let mut merged = sum(values);
    let list = queues
        .get("queues")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (field, label) in [("namespaces", "namespace"), ("tasks", "task")] {
        let distinct: std::collections::BTreeSet<String> = list
            .iter()
            .filter_map(|q| q.get(label).and_then(Value::as_str).map(str::to_string))
            .collect();
        if let Some(obj) = merged.as_object_mut() {
            obj.insert(field.to_string(), Value::from(distinct.len()));
        }
    }
    merged
}

/// `/resources/namespaces` or `/resources/tasks`: the rows of one label merged (counts summed).
pub fn labels(values: Vec<Value>, by_namespace: bool) -> Value {
    let (list_field, key) = if by_namespace {
        ("namespaces", "namespace")
    } else {
        ("tasks", "task")
    };
    let mut rows: Vec<Value> = Vec::new();
    for row in values.into_iter().flat_map(|v| take_array(v, list_field)) {
        let name = row.get(key).cloned();
        match rows.iter_mut().find(|r| r.get(key).cloned() == name) {
            Some(existing) => {
                let merged = sum_two(existing.take(), row, None);
                *existing = merged;
            }
            None => rows.push(row),
        }
    }
    rows.sort_by(|a, b| cmp_fields(a, b, &[key]));
    let mut out = Map::new();
    out.insert(list_field.to_string(), Value::Array(rows));
    Value::Object(out)
}

/// A JSON array answer per shard, concatenated.
pub fn array(values: Vec<Value>) -> Value {
    Value::Array(
        values
            .into_iter()
            .flat_map(|v| match v {
                Value::Array(a) => a,
                _ => Vec::new(),
            })
            .collect(),
    )
}

/// One page of a listing: the shards' rows (each asked for `offset + limit` rows from the start) merged
/// in the listing's order, then `offset` skipped and `limit` kept. `total` (when the route has one) is
/// the sum of the shards' totals; a top-level `total` is the page size or the shards' sum, as
/// [`Paging::top_total`] says.
pub fn paged(values: Vec<Value>, paging: &Paging, limit: usize, offset: usize) -> Value {
    let mut first = None;
    let mut grand_total = 0u64;
    let mut top_total = 0u64;
    let mut rows: Vec<Value> = Vec::new();
    for mut v in values {
        grand_total += v
            .pointer("/pagination/total")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        top_total += v.get("total").and_then(Value::as_u64).unwrap_or(0);
        if let Some(Value::Array(list)) = v.get_mut(paging.field).map(Value::take) {
            rows.extend(list);
        }
        if first.is_none() {
            first = Some(v);
        }
    }
    rows.sort_by(|a, b| {
        let o = cmp_fields(a, b, paging.order);
        if paging.descending {
            o.reverse()
        } else {
            o
        }
    });
    let page: Vec<Value> = rows.into_iter().skip(offset).take(limit).collect();
    let mut out = match first {
        Some(Value::Object(o)) => o,
        _ => Map::new(),
    };
    let page_len = page.len();
    out.insert(paging.field.to_string(), Value::Array(page));
    let mut pagination = serde_json::json!({ "limit": limit, "offset": offset });
    if paging.total {
        pagination["total"] = Value::from(grand_total);
    }
    if out.contains_key("pagination") {
        out.insert("pagination".to_string(), pagination);
    }
    if out.contains_key("total") {
        let total = match paging.top_total {
            TopTotal::PageSize => page_len as u64,
            TopTotal::Sum => top_total,
        };
        out.insert("total".to_string(), Value::from(total));
    }
    Value::Object(out)
}

/// `/traces/names`: the names of every shard (each asked for all of them, `limit` its most, from the
/// start) merged by name: `traceCount` and `messageCount` added (a message lives on one shard, so its
/// distinct messages add up), `lastSeen` the latest; ordered as one shard orders them (most recently seen
/// first, then by name), then `offset` skipped and `limit` kept, with `total` the distinct names. An error
/// when a shard holds more names than it was asked for (the merge would miss some).
pub fn trace_names(values: Vec<Value>, limit: usize, offset: usize) -> Result<Value, String> {
    let mut by_name: std::collections::BTreeMap<String, (u64, u64, String)> = Default::default();
    for mut answer in values {
        let shard_total = answer.get("total").and_then(Value::as_u64).unwrap_or(0);
        let rows = take_array(answer.take(), "traceNames");
        if shard_total > rows.len() as u64 {
            return Err(format!(
                "a shard holds {shard_total} trace names, more than the {} a listing across shards \
                 (SHARDS > 1) merges",
                rows.len()
            ));
        }
        for row in rows {
            let field = |k: &str| row.get(k).and_then(Value::as_u64).unwrap_or(0);
            let name = row.get("traceName").and_then(Value::as_str).unwrap_or("");
            let seen = row.get("lastSeen").and_then(Value::as_str).unwrap_or("");
            let entry = by_name.entry(name.to_string()).or_default();
            entry.0 += field("traceCount");
            entry.1 += field("messageCount");
            // ISO 8601 times of one format: the text order is the time order.
            if seen > entry.2.as_str() {
                entry.2 = seen.to_string();
            }
        }
    }
    let total = by_name.len();
    let mut all: Vec<(String, (u64, u64, String))> = by_name.into_iter().collect();
    all.sort_by(|a, b| b.1 .2.cmp(&a.1 .2).then_with(|| a.0.cmp(&b.0)));
    let page: Vec<Value> = all
        .into_iter()
        .skip(offset)
        .take(limit)
        .map(|(name, (traces, messages, seen))| {
            serde_json::json!({"traceName": name, "traceCount": traces, "messageCount": messages,
                               "lastSeen": seen})
        })
        .collect();
    Ok(serde_json::json!({
        "traceNames": page,
        "total": total,
        "pagination": {"limit": limit, "offset": offset},
    }))
}

/// The Prometheus text of every shard, each sample labelled `shard="k"`; `# HELP`/`# TYPE` lines once.
pub fn prometheus(texts: &[(u16, String)]) -> String {
    let mut out = String::new();
    let mut seen_meta = std::collections::HashSet::new();
    // Samples grouped under their metric's metadata: metric name -> lines.
    let mut order: Vec<String> = Vec::new();
    let mut lines: std::collections::HashMap<String, Vec<String>> = Default::default();
    for (shard, text) in texts {
        let mut current = String::new();
        for line in text.lines() {
            if let Some(rest) = line
                .strip_prefix("# HELP ")
                .or_else(|| line.strip_prefix("# TYPE "))
            {
                current = rest.split_whitespace().next().unwrap_or("").to_string();
                if !lines.contains_key(&current) {
                    order.push(current.clone());
                    lines.insert(current.clone(), Vec::new());
                }
                if seen_meta.insert(line.to_string()) {
                    lines
                        .get_mut(&current)
                        .expect("inserted")
                        .push(line.to_string());
                }
                continue;
            }
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let labelled = label_sample(line, *shard);
            match lines.get_mut(&current) {
                Some(group) => group.push(labelled),
                None => {
                    order.push(current.clone());
                    lines.insert(current.clone(), vec![labelled]);
                }
            }
        }
    }
    // Metadata first, then samples, per metric.
    for name in order {
        let group = lines.remove(&name).unwrap_or_default();
        let (meta, samples): (Vec<String>, Vec<String>) =
            group.into_iter().partition(|l| l.starts_with('#'));
        for l in meta.into_iter().chain(samples) {
            out.push_str(&l);
            out.push('\n');
        }
    }
    out
}

/// `name{a="b"} 1` -> `name{shard="k",a="b"} 1`; `name 1` -> `name{shard="k"} 1`.
fn label_sample(line: &str, shard: u16) -> String {
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .unwrap_or(line.len());
    let (name, rest) = line.split_at(name_end);
    if let Some(inner) = rest.strip_prefix('{') {
        if inner.starts_with('}') {
            format!("{name}{{shard=\"{shard}\"{inner}")
        } else {
            format!("{name}{{shard=\"{shard}\",{inner}")
        }
    } else {
        format!("{name}{{shard=\"{shard}\"}}{rest}")
    }
}

fn take_array(mut v: Value, field: &str) -> Vec<Value> {
    match v.get_mut(field).map(Value::take) {
        Some(Value::Array(a)) => a,
        _ => Vec::new(),
    }
}

fn cmp_fields(a: &Value, b: &Value, fields: &[&str]) -> Ordering {
    for f in fields {
        let o = cmp_values(a.get(*f), b.get(*f));
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

fn cmp_values(a: Option<&Value>, b: Option<&Value>) -> Ordering {
    match (a, b) {
        (Some(Value::String(x)), Some(Value::String(y))) => x.cmp(y),
        (Some(Value::Number(x)), Some(Value::Number(y))) => x
            .as_f64()
            .partial_cmp(&y.as_f64())
            .unwrap_or(Ordering::Equal),
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        _ => Ordering::Equal,
    }
}

/// One shard's refusal of a write sent to every shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardFailure {
    /// The shard's index.
    pub shard: u16,
    /// Its HTTP status.
    pub status: u16,
    /// Its `error` text (or its body when it had none).
    pub error: String,
}

/// The `error` of a write sent to every shard that some refused: on how many shards it was applied and
/// on which it failed, each with its status and its own error.
pub fn partial_write_error(applied: &[u16], failed: &[ShardFailure]) -> String {
    let total = applied.len() + failed.len();
    let indexes = |shards: &mut dyn Iterator<Item = u16>| {
        shards.map(|s| s.to_string()).collect::<Vec<_>>().join(", ")
    };
    let mut text = format!("applied on {} of {total} shards", applied.len());
    if !applied.is_empty() {
        text.push_str(&format!(" ({})", indexes(&mut applied.iter().copied())));
    }
    let noun = if failed.len() == 1 { "shard" } else { "shards" };
    text.push_str(&format!(
        ", failed on {noun} {}",
        indexes(&mut failed.iter().map(|f| f.shard))
    ));
    for f in failed {
        text.push_str(&format!("; shard {} ({}): {}", f.shard, f.status, f.error));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sums_and_concatenates() {
        let merged = sum(vec![
            json!({"queues": {"total": 2}, "uptime": 5, "workers": [1], "timeRange": {"from": "a"}}),
            json!({"queues": {"total": 3}, "uptime": 7, "workers": [2], "timeRange": {"from": "b"}}),
        ]);
        assert_eq!(
            merged,
            json!({"queues": {"total": 5}, "uptime": 7, "workers": [1, 2], "timeRange": {"from": "a"}})
        );
    }

    #[test]
    fn time_series_merge_point_by_point() {
        let a = json!({"pointCount": 2, "throughput": [
            {"timestamp": "2026-01-01T00:01:00.000Z", "pushed": 12},
            {"timestamp": "2026-01-01T00:02:00.000Z", "pushed": 1}]});
        let b = json!({"pointCount": 1, "throughput": [
            {"timestamp": "2026-01-01T00:01:00.000Z", "pushed": 12}]});
        let c = json!({"pointCount": 1, "throughput": [
            {"timestamp": "2026-01-01T00:00:00.000Z", "pushed": 3}]});
        assert_eq!(
            sum(vec![a, b, c]),
            json!({"pointCount": 3, "throughput": [
                {"timestamp": "2026-01-01T00:00:00.000Z", "pushed": 3},
                {"timestamp": "2026-01-01T00:01:00.000Z", "pushed": 24},
                {"timestamp": "2026-01-01T00:02:00.000Z", "pushed": 1}]})
        );
        let analytics = |n: u64| json!({"dataPoints": [{"timestamp": "t1", "messages": n}], "interval": "hour"});
        assert_eq!(
            sum(vec![analytics(12), analytics(36)]),
            json!({"dataPoints": [{"timestamp": "t1", "messages": 48}], "interval": "hour"})
        );
    }

    #[test]
    fn pages_across_shards_in_order() {
        let paging = Paging {
            field: "messages",
            order: &["failedAt", "id"],
            descending: true,
            default_limit: 100,
            total: false,
            top_total: TopTotal::PageSize,
        };
        let a = json!({"messages": [{"failedAt": "3", "id": "a"}, {"failedAt": "1", "id": "b"}], "total": 2,
                       "pagination": {"limit": 3, "offset": 0}});
        let b = json!({"messages": [{"failedAt": "4", "id": "c"}, {"failedAt": "2", "id": "d"}], "total": 2,
                       "pagination": {"limit": 3, "offset": 0}});
        let page = paged(vec![a, b], &paging, 2, 1);
        assert_eq!(
            page,
            json!({"messages": [{"failedAt": "3", "id": "a"}, {"failedAt": "2", "id": "d"}], "total": 2,
                   "pagination": {"limit": 2, "offset": 1}})
        );
    }

    #[test]
    fn a_grand_total_is_summed_over_shards() {
        let paging = Paging {
            field: "deliveries",
            order: &["at", "id"],
            descending: true,
            default_limit: 100,
            total: false,
            top_total: TopTotal::Sum,
        };
        let a = json!({"deliveries": [{"at": "2", "id": 1}], "total": 7, "pagination": {"limit": 1, "offset": 0}});
        let b = json!({"deliveries": [{"at": "3", "id": 1}], "total": 5, "pagination": {"limit": 1, "offset": 0}});
        let page = paged(vec![a, b], &paging, 1, 0);
        assert_eq!(
            page,
            json!({"deliveries": [{"at": "3", "id": 1}], "total": 12, "pagination": {"limit": 1, "offset": 0}})
        );
    }

    #[test]
    fn trace_names_merge_by_name_and_page() {
        let a = json!({"traceNames": [
            {"traceName": "x", "traceCount": 2, "messageCount": 1, "lastSeen": "2026-01-01T00:00:02.000Z"},
            {"traceName": "y", "traceCount": 1, "messageCount": 1, "lastSeen": "2026-01-01T00:00:01.000Z"}],
            "total": 2, "pagination": {"limit": 10000, "offset": 0}});
        let b = json!({"traceNames": [
            {"traceName": "y", "traceCount": 3, "messageCount": 2, "lastSeen": "2026-01-01T00:00:05.000Z"}],
            "total": 1, "pagination": {"limit": 10000, "offset": 0}});
        let merged = trace_names(vec![a.clone(), b.clone()], 1, 0).unwrap();
        assert_eq!(
            merged,
            json!({"traceNames": [
                {"traceName": "y", "traceCount": 4, "messageCount": 3, "lastSeen": "2026-01-01T00:00:05.000Z"}],
                "total": 2, "pagination": {"limit": 1, "offset": 0}})
        );
        let second = trace_names(vec![a, b], 1, 1).unwrap();
        assert_eq!(second["traceNames"][0]["traceName"], "x");
        let truncated = json!({"traceNames": [], "total": 3});
        assert!(trace_names(vec![truncated], 1, 0)
            .unwrap_err()
            .contains("3 trace names"));
    }

    #[test]
    fn prometheus_series_carry_the_shard() {
        let text = "# HELP q_up Up.\n# TYPE q_up gauge\nq_up 1\nq_dlq{queue=\"x\"} 2\n";
        let merged = prometheus(&[(0, text.to_string()), (1, text.to_string())]);
        assert_eq!(
            merged,
            "# HELP q_up Up.\n# TYPE q_up gauge\nq_up{shard=\"0\"} 1\nq_dlq{shard=\"0\",queue=\"x\"} 2\n\
             q_up{shard=\"1\"} 1\nq_dlq{shard=\"1\",queue=\"x\"} 2\n"
        );
    }

    #[test]
    fn labels_merge_by_name() {
        let a = json!({"namespaces": [{"namespace": "n", "queues": 1}]});
        let b = json!({"namespaces": [{"namespace": "n", "queues": 2}, {"namespace": "m", "queues": 1}]});
        assert_eq!(
            labels(vec![a, b], true),
            json!({"namespaces": [{"namespace": "m", "queues": 1}, {"namespace": "n", "queues": 3}]})
        );
    }
}

//! The entry Worker's side of sharding (`SHARDS` > 1): reads the request, asks [`routing::plan`] where it
//! goes, and sends it there: one shard (unchanged, no extra hop), a push or batch ack split by shard, a
//! discovery pop over the shards the catalog names, or a fan-out merged by [`crate::fanout`].
//!
//! With one shard the entry Worker does not come here: it forwards every request to the broker's object as
//! before.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;

use futures::future::join_all;
use js_sys::Uint8Array;
use serde_json::{json, Value};
use worker::worker_sys::web_sys;
use worker::{Env, Headers, Method, Request, RequestInit, Result};

use crate::catalog::Label;
use crate::config::WorkerConfig;
use crate::fanout;
use crate::frame::{CONTENT_TYPE, JSON};
use crate::path_and_query;
use crate::respond;
use crate::routing::{self, query_param, Merge, Plan};
use crate::shards::{ShardMap, SHARD_HEADER};
use crate::split_text;

thread_local! {
    /// Labels this isolate has registered in the catalog (a register is idempotent; this only saves hops).
    static REGISTERED: RefCell<HashSet<(String, String, u16)>> = RefCell::new(HashSet::new());
    /// Rotates the first shard a discovery pop tries, so one shard's backlog does not starve the others.
    static DISCOVERY_TURN: Cell<usize> = const { Cell::new(0) };
}

/// A request read whole.
struct Incoming {
    method: Method,
    url: String,
    path: String,
    query: String,
    headers: Headers,
    body: Vec<u8>,
}

/// The whole body of `response` (consumed).
pub async fn read_body(response: &web_sys::Response) -> Result<Vec<u8>> {
    let buffer = worker::wasm_bindgen_futures::JsFuture::from(response.array_buffer()?).await?;
    Ok(Uint8Array::new(&buffer).to_vec())
}

/// Sends a request to shard `shard`'s object (with the `x-queen-shard` header) and returns its answer as
/// the object gave it.
pub async fn send(
    env: &Env,
    map: &ShardMap,
    shard: u16,
    method: Method,
    url: &str,
    headers: &Headers,
    body: Option<&[u8]>,
) -> Result<web_sys::Response> {
    // One copy made by the runtime (not a call from Rust per header and its strings both ways).
    let out = Headers(web_sys::Headers::new_with_headers(&headers.0)?);
    // The body may be a part of the original one: its length is the runtime's to set.
    out.delete("content-length")?;
    out.set(SHARD_HEADER, &format!("{shard}@{}", map.broker))?;
    let mut init = RequestInit::new();
    init.with_method(method).with_headers(out);
    if let Some(bytes) = body.filter(|b| !b.is_empty()) {
        init.with_body(Some(Uint8Array::from(bytes).into()));
    }
    let request = Request::new_with_init(url, &init)?;
    crate::fetch::forward_to_object(request.inner(), env, &map.object_name(shard)).await
}

/// Sends an internal request to the catalog object.
async fn catalog(
    env: &Env,
    map: &ShardMap,
    method: Method,
    url: &str,
    body: Option<&[u8]>,
) -> Result<web_sys::Response> {
    let headers = Headers::new();
    headers.set("content-type", "application/json")?;
    let out_headers = headers;
    let mut init = RequestInit::new();
    init.with_method(method).with_headers(out_headers);
    if let Some(bytes) = body {
        init.with_body(Some(Uint8Array::from(bytes).into()));
    }
    let request = Request::new_with_init(url, &init)?;
    crate::fetch::forward_to_object(request.inner(), env, &map.catalog_name()).await
}

/// Answers a broker request over the shards of `map`.
pub async fn handle(
    req: web_sys::Request,
    env: &Env,
    map: ShardMap,
    config: &WorkerConfig,
) -> Result<web_sys::Response> {
    let url = req.url();
    let (path, query) = path_and_query(&url);
    let limit = config.http.limits.max_body_bytes;
    let method = Method::from(req.method().to_ascii_uppercase());
    let headers = Headers(req.headers());
    // Read as the object reads it: a body over the limit (declared or not) stops the read with a 413.
    let body = match crate::broker::read_request(&req, limit).await? {
        Ok(read) => read.body,
        Err(too_large) => return respond::answer(&too_large),
    };
    let incoming = Incoming {
        method,
        path: path.to_string(),
        query: query.to_string(),
        url,
        headers,
        body,
    };
    // The routing fields of the body, read once (payloads are skipped, not built).
    let shape = routing::shape(&incoming.body);
    let plan = routing::plan_shaped(
        &map,
        incoming.method.as_ref(),
        &incoming.path,
        &incoming.query,
        shape.as_ref(),
    );
    // A body that would be split or sent on is checked whole first: a malformed item refuses the whole
    // request here instead of on one shard after another applied its part.
    if matches!(plan, Plan::Split { .. } | Plan::Transaction(_)) {
        if let Err(refusal) = queen_edge::http::validate_body(
            &config.http,
            incoming.method.as_ref(),
            &incoming.path,
            &incoming.body,
        ) {
            return respond::answer(&refusal);
        }
    }
    if let Some(shape) = &shape {
        register_labels(env, &map, &incoming, shape).await?;
    }
    match plan {
        Plan::One(shard) => forward(env, &map, shard, &incoming).await,
        Plan::Refuse(status, message) => respond::error(status, &message),
        Plan::Split { field, parts } => split(env, &map, &incoming, field, parts).await,
        Plan::Discovery => discovery(env, &map, &incoming).await,
        Plan::Transaction(_) => to_coordinator(env, &map, &incoming).await,
        Plan::FanOut(merge) => fan_out(env, &map, config, &incoming, merge).await,
    }
}

async fn forward(
    env: &Env,
    map: &ShardMap,
    shard: u16,
    req: &Incoming,
) -> Result<web_sys::Response> {
    send(
        env,
        map,
        shard,
        req.method.clone(),
        &req.url,
        &req.headers,
        Some(&req.body),
    )
    .await
}

/// A transaction over several shards goes whole, with the client's headers, to the broker's
/// coordinator ([`crate::txn_coordinator`]), which runs the two-phase commit and answers.
async fn to_coordinator(env: &Env, map: &ShardMap, req: &Incoming) -> Result<web_sys::Response> {
    let headers = Headers::new();
    for (k, v) in req
        .headers
        .entries()
        .filter(|(k, _)| !k.eq_ignore_ascii_case("content-length"))
    {
        headers.append(&k, &v)?;
    }
    headers.set(crate::txn_coordinator::BROKER_HEADER, &map.broker)?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_headers(headers);
    init.with_body(Some(Uint8Array::from(req.body.as_slice()).into()));
    let request = Request::new_with_init("https://txn/__shard/txn/run", &init)?;
    crate::fetch::forward_to_object(request.inner(), env, &map.coordinator_name()).await
}

/// Before a push or configure is forwarded: records in the catalog the namespace and task of each queue
/// it may create (given in the body, and those derived from the name), on the queue's shard.
async fn register_labels(
    env: &Env,
    map: &ShardMap,
    req: &Incoming,
    shape: &routing::BodyShape,
) -> Result<()> {
    if req.method != Method::Post {
        return Ok(());
    }
    let configured;
    let items: Vec<&routing::ItemShape> = match req.path.as_str() {
        "/api/v1/push" => shape.items.iter().flatten().flatten().collect(),
        "/api/v1/configure" => {
            configured = routing::ItemShape {
                queue: shape.queue.clone(),
                partition_id: None,
                namespace: shape.namespace.clone(),
                task: shape.task.clone(),
            };
            vec![&configured]
        }
        "/api/v1/transaction" => shape
            .operations
            .iter()
            .flatten()
            .flatten()
            .flat_map(|op| op.items.iter().flatten().flatten())
            .collect(),
        _ => return Ok(()),
    };
    let mut new_labels = Vec::new();
    for item in items {
        let Some(queue) = item.queue.as_deref() else {
            continue;
        };
        let shard = map.of_queue(queue);
        let (derived_ns, derived_task) = queen_edge::core::labels_from_name(queue);
        let mut candidates = vec![(derived_ns.clone(), derived_task.clone())];
        if item.namespace.is_some() || item.task.is_some() {
            candidates.push((
                item.namespace.clone().unwrap_or(derived_ns),
                item.task.clone().unwrap_or(derived_task),
            ));
        }
        for (ns, task) in candidates {
            let key = (ns, task, shard);
            let fresh =
                REGISTERED.with(|r| !r.borrow().contains(&key)) && !new_labels.contains(&key);
            if fresh {
                new_labels.push(key);
            }
        }
    }
    if new_labels.is_empty() {
        return Ok(());
    }
    let labels: Vec<Label> = new_labels
        .iter()
        .map(|(n, t, s)| Label(n.clone(), t.clone(), *s))
        .collect();
    let body = serde_json::to_vec(&json!({ "labels": labels }))?;
    let answer = catalog(
        env,
        map,
        Method::Post,
        "https://catalog/__shard/catalog/register",
        Some(&body),
    )
    .await?;
    if answer.status() != 200 {
        return Err(worker::Error::RustError(format!(
            "the shard catalog refused a register ({})",
            answer.status()
        )));
    }
    REGISTERED.with(|r| r.borrow_mut().extend(new_labels));
    Ok(())
}

/// A shard's answer, read.
struct Answer {
    shard: u16,
    status: u16,
    content_type: Option<String>,
    body: Vec<u8>,
}

impl Answer {
    async fn read(shard: u16, response: web_sys::Response) -> Result<Answer> {
        Ok(Answer {
            shard,
            status: response.status(),
            content_type: response.headers().get("content-type")?,
            body: read_body(&response).await?,
        })
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    fn respond(self) -> Result<web_sys::Response> {
        let headers: Vec<(String, String)> = self
            .content_type
            .map(|t| vec![("Content-Type".to_string(), t)])
            .unwrap_or_default();
        respond::respond(self.status, &headers, &self.body)
    }
}

/// A push or batch ack over several shards: each shard gets its items (the rest of the body unchanged),
/// the answers are put back in request order with their `index` rewritten. A shard that refuses its part
/// (its store failed, its quota is full) turns its items into `failed` results; the other shards' items
/// stay applied (a push is not a transaction). When every part fails, the first failure is the answer.
async fn split(
    env: &Env,
    map: &ShardMap,
    req: &Incoming,
    field: &'static str,
    parts: Vec<(u16, Vec<usize>)>,
) -> Result<web_sys::Response> {
    let part_indices: Vec<&[usize]> = parts
        .iter()
        .map(|(_, indices)| indices.as_slice())
        .collect();
    let bodies = split_text::split_bodies(&req.body, field, &part_indices)?;
    let mut sends = Vec::new();
    for ((shard, _), bytes) in parts.iter().zip(bodies) {
        sends.push(async move {
            let response = send(
                env,
                map,
                *shard,
                req.method.clone(),
                &req.url,
                &req.headers,
                Some(&bytes),
            )
            .await?;
            Answer::read(*shard, response).await
        });
    }
    let answers: Vec<Answer> = join_all(sends).await.into_iter().collect::<Result<_>>()?;
    if answers.iter().all(|a| !(200..300).contains(&a.status)) {
        return answers
            .into_iter()
            .next()
            .expect("at least two parts")
            .respond();
    }
    let items = parts.iter().map(|(_, indices)| indices.len()).sum();
    let mut merged = split_text::MergedResults::new(items);
    let mut status = 200;
    let mut refused = Vec::new();
    for (answer, (_, indices)) in answers.iter().zip(&parts) {
        if (200..300).contains(&answer.status) {
            status = answer.status;
            merged.place_answer(&answer.body, indices);
        } else {
            refused.push((answer, indices));
        }
    }
    if !refused.is_empty() {
        // Only a refused part's items are read back from the body (rare: a shard that failed its part).
        let sent =
            split_text::item_members(&req.body, field, ["transactionId", "partitionId", "queue"])?;
        for (answer, indices) in refused {
            let error = answer
                .json()
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("refused by its shard")
                .to_string();
            for &global in indices {
                let [transaction_id, partition_id, queue] =
                    sent.get(global).cloned().unwrap_or_default();
                merged.place(
                    global,
                    &json!({
                        "index": global,
                        "status": "failed",
                        "success": false,
                        "error": format!("shard {}: {error}", answer.shard),
                        "transactionId": transaction_id,
                        "partitionId": partition_id,
                        "queueName": queue,
                    }),
                );
            }
        }
    }
    respond::respond(
        status,
        &[(CONTENT_TYPE.into(), JSON.into())],
        &merged.into_body(),
    )
}

/// The request's query without `names`, plus `extra` pairs.
fn rewrite_query(query: &str, names: &[&str], extra: &[(&str, String)]) -> String {
    let mut pairs: Vec<String> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .filter(|p| !names.contains(&p.split('=').next().unwrap_or("")))
        .map(str::to_string)
        .collect();
    for (k, v) in extra {
        pairs.push(format!("{k}={v}"));
    }
    pairs.join("&")
}

fn with_query(req: &Incoming, query: &str) -> String {
    let base = req.url.split('?').next().unwrap_or(&req.url);
    if query.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{query}")
    }
}

/// A pop by namespace or task: the catalog names the shards that hold such queues; each is asked in turn
/// (starting at a rotating one, so one shard's backlog does not starve the others) and the first that has
/// messages answers; none: 204. Like a one-shard broker (wire contract §1.3: discovery does not
/// long-poll), `wait` does not park: every shard is asked with `wait=false`.
async fn discovery(env: &Env, map: &ShardMap, req: &Incoming) -> Result<web_sys::Response> {
    if query_param(&req.query, "namespace").is_none() && query_param(&req.query, "task").is_none() {
        return forward(env, map, 0, req).await; // shard 0 answers the 400
    }
    let plain = rewrite_query(&req.query, &["wait", "timeout"], &[]);
    let lookup = format!("https://catalog/__shard/catalog/lookup?{plain}");
    let no_wait = with_query(
        req,
        &rewrite_query(
            &req.query,
            &["wait", "timeout"],
            &[("wait", "false".into())],
        ),
    );
    let found = catalog(env, map, Method::Get, &lookup, None).await?;
    let shards: Vec<u16> = serde_json::from_slice::<Value>(&read_body(&found).await?)?
        .get("shards")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_u64().map(|s| s as u16))
                // Labels of shards a migration to fewer shards retired (docs/decisions.md "Resharding").
                .filter(|s| *s < map.count)
                .collect()
        })
        .unwrap_or_default();
    let turn = DISCOVERY_TURN.with(|t| {
        let n = t.get();
        t.set(n.wrapping_add(1));
        n
    });
    for i in 0..shards.len() {
        let shard = shards[(turn + i) % shards.len()];
        let answer = send(env, map, shard, Method::Get, &no_wait, &req.headers, None).await?;
        if answer.status() != 204 {
            return Ok(answer);
        }
    }
    respond::respond(204, &[], &[])
}

/// The error of a fan-out whose shard answered JSON a `serde_json::Value` cannot hold, which the merge
/// reads through: a payload the broker keeps byte for byte may hold a number beyond `f64`'s range or a
/// lone surrogate escape.
fn unmergeable(shard: u16, e: &serde_json::Error) -> String {
    format!(
        "shard {shard}'s answer cannot be merged with the others ({e}): it holds a payload beyond what a \
         JSON tree reads (a number past f64's range, a lone surrogate escape); ask for one queue (?queue=) \
         where the route takes one, which one shard answers whole"
    )
}

/// A listing request's `limit` (`default_limit` when absent) and `offset` (0 when absent), or `None` when
/// either is not a number or `limit` is over `max`: shard 0 then answers the 400 a single broker would.
fn page_params(req: &Incoming, default_limit: u64, max: u64) -> Option<(u64, u64)> {
    let parse = |name: &str, default: u64| match query_param(&req.query, name) {
        None => Some(default),
        Some(v) => v.parse::<u64>().ok(),
    };
    let (limit, offset) = (parse("limit", default_limit)?, parse("offset", 0)?);
    (limit <= max).then_some((limit, offset))
}

/// `req`'s URL asking a shard for the first `rows` rows of its listing.
fn first_rows_url(req: &Incoming, rows: u64) -> String {
    with_query(
        req,
        &rewrite_query(
            &req.query,
            &["limit", "offset"],
            &[("limit", rows.to_string()), ("offset", "0".into())],
        ),
    )
}

/// Asks every shard and merges the answers. A shard's error is the answer (its status and body), except
/// for a write some shards applied and others refused: [`partial_write`] says which.
async fn fan_out(
    env: &Env,
    map: &ShardMap,
    config: &WorkerConfig,
    req: &Incoming,
    merge: Merge,
) -> Result<web_sys::Response> {
    let mut url = req.url.clone();
    let mut page = None;
    let mut names_page = None;
    let max = config.http.limits.max_page as u64;
    if merge == Merge::TraceNames {
        let Some((limit, offset)) =
            page_params(req, 50, max).filter(|(_, o)| *o <= u32::MAX as u64)
        else {
            return forward(env, map, 0, req).await; // shard 0 answers the 400
        };
        // Every shard's names: a name's counts are the sum over shards.
        url = first_rows_url(req, max);
        names_page = Some((limit as usize, offset as usize));
    }
    if let Merge::Paged(paging) = &merge {
        let Some((limit, offset)) = page_params(req, paging.default_limit, max) else {
            return forward(env, map, 0, req).await; // shard 0 answers the 400
        };
        // Each shard's first `offset + limit` rows hold the merged page, and a shard answers at most `max`
        // rows: a page past them cannot be merged right, so it is refused rather than answered wrong.
        if offset.saturating_add(limit) > max {
            return respond::error(
                400,
                &format!(
                    "offset + limit is {}: a listing across shards (SHARDS > 1) pages through its first \
                     {max} rows; list one queue (?queue=) to page further",
                    offset.saturating_add(limit)
                ),
            );
        }
        url = first_rows_url(req, offset + limit);
        page = Some((*paging, limit as usize, offset as usize));
    }
    let answers = ask_all(env, map, req, &url).await?;
    if merge == Merge::Health {
        let first_bad = answers.iter().position(|a| a.status != 200).unwrap_or(0);
        return answers
            .into_iter()
            .nth(first_bad)
            .expect("one shard at least")
            .respond();
    }
    if let Some(bad) = answers.iter().position(|a| !(200..300).contains(&a.status)) {
        let applied_somewhere = answers.iter().any(|a| (200..300).contains(&a.status));
        if req.method != Method::Get && applied_somewhere {
            return partial_write(&answers, bad);
        }
        return answers.into_iter().nth(bad).expect("found").respond();
    }
    if merge == Merge::Prometheus {
        let texts: Vec<(u16, String)> = answers
            .iter()
            .map(|a| (a.shard, String::from_utf8_lossy(&a.body).into_owned()))
            .collect();
        let content_type = answers[0].content_type.clone().unwrap_or_default();
        return respond::respond(
            200,
            &[("Content-Type".to_string(), content_type)],
            fanout::prometheus(&texts).as_bytes(),
        );
    }
    let mut values: Vec<Value> = Vec::with_capacity(answers.len());
    for answer in &answers {
        match serde_json::from_slice(&answer.body) {
            Ok(value) => values.push(value),
            // Said, not merged as nothing: a shard's rows would vanish from the listing.
            Err(e) => return respond::error(500, &unmergeable(answer.shard, &e)),
        }
    }
    let merged = match merge {
        Merge::Sum | Merge::Object => fanout::sum(values),
        Merge::Queues => fanout::queues(values),
        Merge::Labels(by_namespace) => fanout::labels(values, by_namespace),
        Merge::Array => fanout::array(values),
        Merge::Overview => {
            let queues_url =
                with_query(req, "").replace("/resources/overview", "/resources/queues");
            let listings = ask_all(env, map, req, &queues_url).await?;
            let queues = fanout::queues(listings.iter().map(Answer::json).collect());
            fanout::overview(values, &queues)
        }
        Merge::Paged(_) => {
            let (paging, limit, offset) = page.expect("set for paged routes");
            fanout::paged(values, &paging, limit, offset)
        }
        Merge::TraceNames => {
            let (limit, offset) = names_page.expect("set for the names listing");
            match fanout::trace_names(values, limit, offset) {
                Ok(merged) => merged,
                Err(e) => return respond::error(400, &e),
            }
        }
        Merge::Health | Merge::Prometheus => unreachable!("answered above"),
    };
    respond::json(answers[0].status, &merged)
}

/// A write sent to every shard that some shards applied and others refused: the first refusal's status, and an `error` that
/// says on which shards the change was applied and on which it failed, with each failing shard's own
/// error (`fanout::partial_write_error`); `appliedShards` and `failedShards` list them by index.
fn partial_write(answers: &[Answer], first_bad: usize) -> Result<web_sys::Response> {
    let mut applied = Vec::new();
    let mut failed = Vec::new();
    for a in answers {
        if (200..300).contains(&a.status) {
            applied.push(a.shard);
        } else {
            let text = match a.json().get("error").and_then(Value::as_str) {
                Some(error) => error.to_string(),
                None => String::from_utf8_lossy(&a.body).into_owned(),
            };
            failed.push(fanout::ShardFailure {
                shard: a.shard,
                status: a.status,
                error: text,
            });
        }
    }
    let error = fanout::partial_write_error(&applied, &failed);
    let failed_shards: Vec<u16> = failed.iter().map(|f| f.shard).collect();
    respond::json(
        answers[first_bad].status,
        &json!({ "error": error, "appliedShards": applied, "failedShards": failed_shards }),
    )
}

async fn ask_all(env: &Env, map: &ShardMap, req: &Incoming, url: &str) -> Result<Vec<Answer>> {
    let sends = map.all().map(|shard| async move {
        let response = send(
            env,
            map,
            shard,
            req.method.clone(),
            url,
            &req.headers,
            Some(&req.body),
        )
        .await?;
        Answer::read(shard, response).await
    });
    join_all(sends).await.into_iter().collect()
}

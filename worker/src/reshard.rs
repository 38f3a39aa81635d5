//! The shard migration's coordinator: `POST /api/v1/system/reshard` (admin only), answered by the entry
//! Worker when it runs with `SHARDS` = the new count and `RESHARD_FROM` = the count the data was written
//! with. `GET` the same route for progress without moving anything.
//!
//! Each call moves up to `maxQueues` queues (body `{"maxQueues": n}`, default [`DEFAULT_BATCH`], so one
//! call stays within a Worker invocation's subrequest budget) and answers its progress
//! (`moved`/`total` queues, `done`); call again until `done` is true. A queue moves in three steps,
//! each one commit of one object ([`crate::reshard_object`]): export from its old shard (read only),
//! import into its new shard with an arrival marker, drop from the old shard. A queue whose old and new
//! shard are the same object is rewritten there in one commit. Nothing is held between calls: each
//! call surveys the objects and goes on from what they hold, so a crash at any point (the Worker, an
//! object, the process) is resumed by calling again, and a queue is never imported twice (its marker)
//! nor dropped before it was imported (the order of the steps).
//!
//! Leases in flight are not moved: while any queue still to move holds a lease that has not expired,
//! the call answers 409 with how many and when the last expires, and moves nothing. The plan (its id,
//! the two counts, its phase) lives on shard 0 under [`PLAN_KEY`]; while it is unfinished the broker
//! refuses to open (503) whatever `SHARDS` says. When every queue has moved, each object records its
//! new placement (objects beyond the new count are emptied and retired) and the broker opens.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use worker::worker_sys::web_sys;
use worker::{Env, Headers, Method, Request, RequestInit, Result};

use crate::catalog::Label;
use crate::fetch::EntrySettings;
use crate::respond;
use crate::shard_guard::Placement;
use crate::shards::{parse_shard_count, ShardMap};
use crate::vars::var;

/// The route.
pub const ROUTE: &str = "/api/v1/system/reshard";
/// The storage key of the [`Plan`] (on shard 0).
pub const PLAN_KEY: &str = "queen-reshard-plan";
/// Queues one call moves unless the body says otherwise.
pub const DEFAULT_BATCH: usize = 50;
/// Most queues one call may be asked to move.
pub const MAX_BATCH: usize = 1000;

/// Where a migration is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Queues are moving.
    Moving,
    /// Every queue has moved; objects are recording their new placement.
    Finishing,
    /// Finished: the broker runs with the new count.
    Done,
}

/// A migration between shard counts, recorded on shard 0.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// Names this migration's arrival markers.
    pub id: String,
    /// The count the data was written with.
    pub from: u16,
    /// The count it moves to.
    pub to: u16,
    /// Where it is.
    pub phase: Phase,
    /// Queues moved, once every queue has (from the finishing phase on).
    #[serde(default)]
    pub moved: usize,
}

impl Plan {
    /// Why the broker refuses to open while this plan is unfinished (`None` once done).
    pub fn refusal(&self) -> Option<String> {
        (self.phase != Phase::Done).then(|| {
            format!(
                "a shard migration from SHARDS={} to SHARDS={} is under way: queues are moving between \
                 shards. Keep SHARDS={} and RESHARD_FROM={} and call POST {ROUTE} until it answers \
                 done (GET {ROUTE} shows its progress)",
                self.from, self.to, self.to, self.from
            )
        })
    }
}

/// What an object's `survey` answers.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ObjectSurvey {
    pending: Vec<String>,
    arrived: Vec<String>,
    live_leases: u64,
    leases_expire_at_ms: i64,
    next_partition_id: u64,
    format_error: Option<String>,
    placement: Option<Placement>,
    plan: Option<Plan>,
    mode: Option<String>,
    labels: std::collections::BTreeMap<String, Vec<(String, String)>>,
}

/// The body of a `POST`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Options {
    max_queues: Option<usize>,
    /// Test hook (only with `QUEEN_TEST_ROUTES`): stop after the first import, before its drop, as a
    /// crash there would.
    stop_after: Option<String>,
}

/// A failure of one step, answered with its status and the progress so far.
struct Stop(u16, String);

impl From<worker::Error> for Stop {
    fn from(e: worker::Error) -> Self {
        Stop(500, format!("shard migration: {e}"))
    }
}

/// Sends an internal migration request to shard `shard`'s object and returns its body, or the object's
/// error.
async fn call(
    env: &Env,
    map: &ShardMap,
    shard: u16,
    method: Method,
    target: &str,
    body: Option<&[u8]>,
) -> std::result::Result<Vec<u8>, Stop> {
    let url = format!("https://shard/__shard/reshard/{target}");
    let answer = crate::sharded::send(env, map, shard, method, &url, &Headers::new(), body).await?;
    let bytes = crate::sharded::read_body(&answer).await?;
    if answer.status() == 200 {
        return Ok(bytes);
    }
    let message = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| v.get("error").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| format!("status {}", answer.status()));
    Err(Stop(
        if answer.status() == 409 { 409 } else { 500 },
        format!("shard {shard}: {message}"),
    ))
}

async fn survey(
    env: &Env,
    map: &ShardMap,
    shard: u16,
    plan: &str,
) -> std::result::Result<ObjectSurvey, Stop> {
    let bytes = call(
        env,
        map,
        shard,
        Method::Get,
        &format!("survey?plan={}", enc(plan)),
        None,
    )
    .await?;
    serde_json::from_slice(&bytes).map_err(|e| Stop(500, format!("shard {shard} survey: {e}")))
}

fn enc(text: &str) -> String {
    worker::url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// Registers a moved queue's labels (and those its name implies) in the catalog, for discovery pops.
async fn register(
    env: &Env,
    map: &ShardMap,
    queue: &str,
    shard: u16,
    labels: Vec<(String, String)>,
) -> std::result::Result<(), Stop> {
    let mut all: Vec<Label> = labels
        .into_iter()
        .map(|(n, t)| Label(n, t, shard))
        .collect();
    let (n, t) = queen_edge::core::labels_from_name(queue);
    all.push(Label(n, t, shard));
    let body =
        serde_json::to_vec(&json!({ "labels": all })).map_err(|e| Stop(500, e.to_string()))?;
    let headers = Headers::new();
    headers.set("content-type", "application/json")?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_headers(headers)
        .with_body(Some(js_sys::Uint8Array::from(body.as_slice()).into()));
    let request = Request::new_with_init("https://catalog/__shard/catalog/register", &init)?;
    let answer = crate::fetch::forward_to_object(request.inner(), env, &map.catalog_name()).await?;
    if answer.status() != 200 {
        return Err(Stop(
            500,
            format!("the shard catalog refused a register ({})", answer.status()),
        ));
    }
    Ok(())
}

/// Progress of the migration, as answered.
#[derive(Debug, Default)]
struct Progress {
    plan: Option<Plan>,
    moved: usize,
    remaining: usize,
}

impl Progress {
    fn body(&self, from: u16, to: u16) -> Value {
        let phase = self.plan.as_ref().map(|p| p.phase);
        json!({
            "from": from,
            "to": to,
            "plan": self.plan.as_ref().map(|p| p.id.clone()),
            "phase": phase,
            "moved": self.moved,
            "total": self.moved + self.remaining,
            "remaining": self.remaining,
            "done": phase == Some(Phase::Done) || (self.plan.is_none() && self.remaining == 0),
        })
    }
}

/// Answers `GET`/`POST` [`ROUTE`] for broker `broker` (the caller has checked the admin token).
pub async fn handle(
    req: web_sys::Request,
    env: &Env,
    settings: &EntrySettings,
    broker: String,
) -> Result<web_sys::Response> {
    let method = req.method().to_ascii_uppercase();
    if method != "GET" && method != "POST" {
        return respond::error(
            405,
            &format!("{ROUTE} answers GET (progress) and POST (run)"),
        );
    }
    let to = match &settings.shards {
        Ok(n) => *n,
        Err(message) => return respond::error(503, &format!("broker unavailable: {message}")),
    };
    let from = match var(env, "RESHARD_FROM") {
        None => {
            return respond::error(
                409,
                "RESHARD_FROM is not set: set it to the SHARDS the broker's data was written with, and \
                 SHARDS to the new count",
            )
        }
        Some(v) => match parse_shard_count(Some(&v)) {
            Ok(n) => n,
            Err(message) => return respond::error(400, &format!("RESHARD_FROM: {message}")),
        },
    };
    let mut options = Options::default();
    if method == "POST" {
        let buffer = worker::wasm_bindgen_futures::JsFuture::from(req.array_buffer()?).await?;
        let body = js_sys::Uint8Array::new(&buffer).to_vec();
        if !body.iter().all(u8::is_ascii_whitespace) {
            options = match serde_json::from_slice(&body) {
                Ok(o) => o,
                Err(e) => {
                    return respond::error(
                        400,
                        &format!("{ROUTE} takes {{\"maxQueues\": n}} or no body: {e}"),
                    )
                }
            };
        }
    }
    if options
        .max_queues
        .is_some_and(|n| !(1..=MAX_BATCH).contains(&n))
    {
        return respond::error(400, &format!("maxQueues must be from 1 to {MAX_BATCH}"));
    }
    match options.stop_after.as_deref() {
        None => {}
        Some("import") if settings.test_routes => {}
        Some(_) => {
            return respond::error(
                400,
                "stopAfter is a test hook (QUEEN_TEST_ROUTES) and takes only \"import\"",
            )
        }
    }
    let mut progress = Progress::default();
    match run(
        env,
        &broker,
        from,
        to,
        method == "POST",
        &options,
        &mut progress,
    )
    .await
    {
        Ok(()) => respond::json(200, &progress.body(from, to)),
        Err(Stop(status, message)) => {
            let mut body = progress.body(from, to);
            body["error"] = Value::from(message);
            respond::json(status, &body)
        }
    }
}

/// Runs one call of the migration from `from` to `to` shards (or, when `!write`, only reports).
async fn run(
    env: &Env,
    broker: &str,
    from: u16,
    to: u16,
    write: bool,
    options: &Options,
    progress: &mut Progress,
) -> std::result::Result<(), Stop> {
    let objects = from.max(to);
    let map = ShardMap {
        broker: broker.to_string(),
        count: objects,
    };
    let zero = survey(env, &map, 0, "").await?;
    let mut plan = match zero.plan {
        Some(p) if p.phase != Phase::Done => {
            if (p.from, p.to) != (from, to) {
                return Err(Stop(
                    409,
                    format!(
                        "a migration from SHARDS={} to SHARDS={} is under way: set RESHARD_FROM={} and \
                         SHARDS={} and finish it first",
                        p.from, p.to, p.from, p.to
                    ),
                ));
            }
            p
        }
        _ => {
            let written = zero.placement.map_or(1, |p| p.count);
            if written == to {
                // Laid out for `to` already: nothing to move, done. When the last migration was this one,
                // its plan (kept, done, on shard 0) says how many queues it moved.
                if let Some(done) = zero.plan.filter(|p| (p.from, p.to) == (from, to)) {
                    progress.moved = done.moved;
                    progress.plan = Some(done);
                }
                return Ok(());
            }
            if written != from {
                return Err(Stop(
                    409,
                    format!(
                        "the broker's data was written with SHARDS={written}, not RESHARD_FROM={from}"
                    ),
                ));
            }
            if from == to {
                return Err(Stop(
                    409,
                    "RESHARD_FROM equals SHARDS: nothing to migrate".into(),
                ));
            }
            let plan = Plan {
                id: format!(
                    "{:x}{:08x}",
                    js_sys::Date::now() as u64,
                    (js_sys::Math::random() * f64::from(u32::MAX)) as u32
                ),
                from,
                to,
                phase: Phase::Moving,
                moved: 0,
            };
            if !write {
                // Progress of a migration not started: every queue is still to move.
                let mut remaining = 0;
                for k in 0..from {
                    remaining += survey(env, &map, k, &plan.id).await?.pending.len();
                }
                progress.remaining = remaining;
                return Ok(());
            }
            save_plan(env, &map, &plan).await?;
            plan
        }
    };
    progress.plan = Some(plan.clone());
    if plan.phase == Phase::Moving {
        let mut surveys = Vec::new();
        for k in 0..objects {
            surveys.push(survey(env, &map, k, &plan.id).await?);
        }
        let pending: Vec<(u16, String)> = surveys
            .iter()
            .enumerate()
            .take(usize::from(from))
            .flat_map(|(k, s)| s.pending.iter().map(move |q| (k as u16, q.clone())))
            .collect();
        progress.remaining = pending.len();
        // A queue imported but not yet dropped (a call stopped between the two) is still pending.
        let arrived: std::collections::BTreeSet<&String> =
            surveys.iter().flat_map(|s| s.arrived.iter()).collect();
        progress.moved = arrived
            .into_iter()
            .filter(|q| !pending.iter().any(|(_, p)| p == *q))
            .count();
        if let Some((k, e)) = surveys
            .iter()
            .enumerate()
            .find_map(|(k, s)| s.format_error.clone().map(|e| (k, e)))
        {
            return Err(Stop(409, format!("shard {k}: {e}")));
        }
        let leases: u64 = surveys
            .iter()
            .take(usize::from(from))
            .map(|s| s.live_leases)
            .sum();
        if leases > 0 {
            let until = surveys
                .iter()
                .map(|s| s.leases_expire_at_ms)
                .max()
                .unwrap_or(0);
            return Err(Stop(
                409,
                format!(
                    "{leases} leases are in flight on queues still to move (the last expires at {}): a \
                     moved partition gets an id that routes to its new shard, so a lease held now could not \
                     be acknowledged after the move. Wait until they are acknowledged or expire (stop \
                     consumers first), then call again; nothing was moved",
                    queen_edge::core::timefmt::iso_millis(until)
                ),
            ));
        }
        if !write {
            return Ok(());
        }
        let floor = surveys
            .iter()
            .map(|s| s.next_partition_id)
            .max()
            .unwrap_or(1);
        let budget = options.max_queues.unwrap_or(DEFAULT_BATCH);
        for (source, queue) in pending.iter().take(budget) {
            let target = crate::shards::shard_of_queue(queue, to);
            // The catalog first: a label ahead of its queue costs a discovery pop one empty probe, a
            // label missing would hide the queue from discovery.
            if to > 1 {
                let labels = surveys[usize::from(*source)]
                    .labels
                    .get(queue)
                    .cloned()
                    .unwrap_or_default();
                register(env, &map, queue, target, labels).await?;
            }
            let args = format!(
                "plan={}&queue={}&source={source}&index={target}&count={to}&floor={floor}",
                enc(&plan.id),
                enc(queue)
            );
            if *source == target {
                call(
                    env,
                    &map,
                    target,
                    Method::Post,
                    &format!("rekey?{args}"),
                    None,
                )
                .await?;
            } else {
                let bundle = call(
                    env,
                    &map,
                    *source,
                    Method::Post,
                    &format!("export?queue={}", enc(queue)),
                    None,
                )
                .await?;
                call(
                    env,
                    &map,
                    target,
                    Method::Post,
                    &format!("import?{args}"),
                    Some(&bundle),
                )
                .await?;
                if options.stop_after.as_deref() == Some("import") {
                    return Err(Stop(
                        500,
                        format!("stopped after importing \"{queue}\" (test hook stopAfter)"),
                    ));
                }
                call(
                    env,
                    &map,
                    *source,
                    Method::Post,
                    &format!("drop?queue={}", enc(queue)),
                    None,
                )
                .await?;
            }
            progress.moved += 1;
            progress.remaining -= 1;
        }
        if progress.remaining > 0 {
            return Ok(());
        }
        plan.phase = Phase::Finishing;
        plan.moved = progress.moved;
        save_plan(env, &map, &plan).await?;
        progress.plan = Some(plan.clone());
    }
    if plan.phase == Phase::Finishing {
        progress.moved = plan.moved;
    }
    if plan.phase == Phase::Finishing && write {
        // Shard 0 last: it marks the plan done, and until then a call comes back here.
        for k in (1..objects).chain([0]) {
            let body = json!({
                "mode": if k == 0 { None } else { zero.mode.clone() },
                "retire": k >= to,
            });
            let body = serde_json::to_vec(&body).map_err(|e| Stop(500, e.to_string()))?;
            call(
                env,
                &map,
                k,
                Method::Post,
                &format!("finish?plan={}&index={k}&count={to}", enc(&plan.id)),
                Some(&body),
            )
            .await?;
        }
        plan.phase = Phase::Done;
        progress.plan = Some(plan);
    }
    Ok(())
}

async fn save_plan(env: &Env, map: &ShardMap, plan: &Plan) -> std::result::Result<(), Stop> {
    let body = serde_json::to_vec(plan).map_err(|e| Stop(500, e.to_string()))?;
    call(env, map, 0, Method::Post, "plan", Some(&body)).await?;
    Ok(())
}

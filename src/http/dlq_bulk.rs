//! `POST /api/v1/dlq/replay` and `POST /api/v1/dlq/delete`: dead-letter rows selected by a filter,
//! previewed with `dryRun` (count and a sample), then replayed or deleted in chunks of
//! [`CHUNK_ROWS`], one engine command per chunk, so other requests are served between chunks
//! (module `crate::core::dlq_bulk`); a recorded (forwarded) request keeps the engine to itself until
//! it is answered, so all its chunks commit with its answer or none does (`engine::Recording`).
//!
//! Body: `{queue, consumerGroup, partition, errorContains, from, to, limit, dryRun}`, every field
//! optional; `from`/`to` are ISO-8601 instants bounding the time a row was dead-lettered (inclusive);
//! `limit` and the dry run's `count` are in selected rows.
//!
//! A replay answers `{dryRun: false, selected, replayed, queued, duplicates, chunks}`: `selected` is the
//! rows the filter selected (what `limit` counts), `replayed` the rows it removed, `queued + duplicates`
//! the copies it pushed, one per message address (a message that two groups filed is one copy and two
//! rows; the other group's row goes even when the filter names a group, as with a replay by address,
//! since the copy reaches every group). A delete answers `{dryRun: false, selected, deleted, chunks}`.

use super::crypto;
use super::error::{json_response, HttpError};
use super::query::clip;
use super::render;
use super::wire::{self, check_name, opt_uint};
use super::{HttpConfig, HttpResponse};
use crate::core::api::{DlqFilter, PushStatus};
use crate::core::fields::json_type;
use crate::core::timefmt::parse_iso;
use crate::engine::{Engine, Host};
use crate::store::Store;
use serde_json::{json, Map, Value};

/// Rows per engine command.
pub const CHUNK_ROWS: usize = 100;
/// Rows a `dryRun` shows.
pub const SAMPLE_ROWS: usize = 10;

/// What a bulk call does with the rows it selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BulkAction {
    /// Push each row back to its partition as `dlq:<id>`.
    Replay,
    /// Remove the rows.
    Delete,
}

struct BulkRequest {
    filter: DlqFilter,
    limit: usize,
    dry_run: bool,
}

fn text<'a>(map: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, HttpError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => Err(HttpError::bad_request(format!(
            "{key} must be a string, got {}",
            json_type(v)
        ))),
    }
}

fn instant(map: &Map<String, Value>, key: &str) -> Result<Option<i64>, HttpError> {
    match text(map, key)? {
        None => Ok(None),
        Some(s) => parse_iso(s).map(Some).ok_or_else(|| {
            HttpError::bad_request(format!("{key} must be an ISO-8601 time, got '{}'", clip(s)))
        }),
    }
}

fn parse(body: &[u8], config: &HttpConfig) -> Result<BulkRequest, HttpError> {
    let limits = &config.limits;
    let map = wire::parse_optional_object(body)?;
    let name = |key: &str, what: &str, empty_ok: bool| -> Result<Option<String>, HttpError> {
        match text(&map, key)? {
            Some(s) => {
                check_name(what, s, empty_ok, limits)?;
                Ok(Some(s.to_string()))
            }
            None => Ok(None),
        }
    };
    let filter = DlqFilter {
        queue: name("queue", "Queue name", true)?,
        consumer_group: name("consumerGroup", "consumerGroup", false)?,
        partition: name("partition", "Partition name", false)?,
        error_contains: text(&map, "errorContains")?.map(str::to_string),
        from_ms: instant(&map, "from")?,
        to_ms: instant(&map, "to")?,
    };
    if let (Some(from), Some(to)) = (filter.from_ms, filter.to_ms) {
        if from > to {
            return Err(HttpError::bad_request("from must not be later than to"));
        }
    }
    let limit = opt_uint(&map, "limit", "", u32::MAX as u64)?;
    if limit == Some(0) {
        return Err(HttpError::bad_request("limit must be at least 1"));
    }
    let dry_run = match map.get("dryRun") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => {
            return Err(HttpError::bad_request(format!(
                "dryRun must be a boolean, got {}",
                json_type(v)
            )))
        }
    };
    Ok(BulkRequest {
        filter,
        limit: limit.map_or(usize::MAX, |n| n as usize),
        dry_run,
    })
}

/// Answers a bulk replay or delete.
pub(crate) async fn answer<S: Store, H: Host>(
    engine: &Engine<S, H>,
    config: &HttpConfig,
    body: &[u8],
    action: BulkAction,
) -> Result<HttpResponse, HttpError> {
    let req = parse(body, config)?;
    if req.dry_run {
        let (count, mut sample) =
            engine.read(|b, _| b.dlq_preview(&req.filter, SAMPLE_ROWS.min(req.limit)));
        let payloads = sample.iter_mut().map(|d| &mut d.payload).collect();
        crypto::open_payloads(config, payloads).await;
        let sample: Vec<Value> = sample.iter().map(render::dead_letter_value).collect();
        return Ok(json_response(
            200,
            &json!({
                "dryRun": true,
                "action": action_name(action),
                "count": count.min(req.limit),
                "sample": sample,
            }),
        ));
    }
    // Rows filed while this runs are not selected: the selection stops at today's next sequence. (A
    // replay still removes such a row when it is at an address it replays, and pushes it if it is the
    // newest there: the copy answers it too.)
    // Read with `read_current`: after a failed commit, memory may still hold the changes it refused
    // (a replay the store does not hold) until the engine reloads.
    let before = engine.read_current(|b, _| b.dlq_next_seq()).await?;
    let mut after = None;
    let mut left = req.limit;
    let (mut done, mut queued, mut duplicates, mut chunks) = (0usize, 0usize, 0usize, 0usize);
    // A failure after some chunks committed says so: those rows stay replayed (or deleted).
    let failed = |e: crate::engine::EngineError, done: usize| {
        let mut error = HttpError::from(e);
        if done > 0 {
            let verb = match action {
                BulkAction::Replay => "replayed",
                BulkAction::Delete => "deleted",
            };
            error.message = format!(
                "{}; before it, {done} dead letters were {verb} and stay so (call again for the rest)",
                error.message
            );
        }
        error
    };
    while left > 0 {
        let chunk = engine
            .read_current(|b, _| b.dlq_select(&req.filter, after, before, CHUNK_ROWS.min(left)))
            .await
            .map_err(|e| failed(e, done))?;
        let Some(last) = chunk.last_seq else {
            break;
        };
        after = Some(last);
        left -= chunk.ids.len();
        chunks += 1;
        match action {
            BulkAction::Replay => {
                let replies = engine
                    .dlq_replay_rows(&chunk.ids)
                    .await
                    .map_err(|e| failed(e, done))?;
                for reply in replies {
                    done += reply.rows_removed;
                    if reply.status == PushStatus::Duplicate {
                        duplicates += 1;
                    } else {
                        queued += 1;
                    }
                }
            }
            BulkAction::Delete => {
                done += engine
                    .dlq_delete_rows(&chunk.ids)
                    .await
                    .map_err(|e| failed(e, done))?
            }
        }
    }
    // Rows selected: what `limit` counts (a replay's `done` counts rows removed, more when other groups'
    // rows share an address).
    let selected = req.limit - left;
    let body = match action {
        BulkAction::Replay => json!({
            "dryRun": false,
            "selected": selected,
            "replayed": done,
            "queued": queued,
            "duplicates": duplicates,
            "chunks": chunks,
        }),
        BulkAction::Delete => {
            json!({"dryRun": false, "selected": selected, "deleted": done, "chunks": chunks})
        }
    };
    Ok(json_response(200, &body))
}

fn action_name(action: BulkAction) -> &'static str {
    match action {
        BulkAction::Replay => "replay",
        BulkAction::Delete => "delete",
    }
}

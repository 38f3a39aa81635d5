//! The `/configure` options beyond Queen (`reclaimLimit`, `retryBackoff`, `deliveryLog`; module
//! `crate::core::redelivery`): read from the `options` object (`render::options` echoes them only when
//! set, so a queue that does not use them answers exactly Queen's 15 options).

use super::error::HttpError;
use super::wire::opt_uint;
use super::Limits;
use crate::core::api::{DeliveryLogMode, OptionsPatch, RetryBackoff};
use crate::core::redelivery::MAX_RECLAIM_LIMIT;
use serde_json::{Map, Value};

/// Backoff cap when `retryBackoff` sends no `maxMs` (or `baseMs` when that is longer).
pub const DEFAULT_BACKOFF_MAX_MS: u64 = 300_000;
/// Backoff factor when `retryBackoff` sends none.
pub const DEFAULT_BACKOFF_FACTOR: f64 = 2.0;

/// What a bad `retryBackoff` is told (one static text: the browser module carries no formatting for it).
const BACKOFF_SHAPE: &str = "retryBackoff must be null or {baseMs: integer >= 1, factor: number from 1 \
     to 1000 (default 2), maxMs: integer >= baseMs (default 300000 or baseMs)} within the longest duration";

/// The three options from a `/configure` `options` object; the other fields of the patch are `None`.
pub(crate) fn patch(o: &Map<String, Value>, limits: &Limits) -> Result<OptionsPatch, HttpError> {
    let reclaim_limit =
        opt_uint(o, "reclaimLimit", "options", MAX_RECLAIM_LIMIT as u64)?.map(|n| n as u32);
    let retry_backoff = match o.get("retryBackoff") {
        None | Some(Value::Null) => None,
        Some(Value::Object(b)) => Some(
            backoff(b, limits.max_duration_seconds.saturating_mul(1000))
                .ok_or_else(|| HttpError::bad_request(BACKOFF_SHAPE))?,
        ),
        Some(_) => return Err(HttpError::bad_request(BACKOFF_SHAPE)),
    };
    let delivery_log = match o.get("deliveryLog") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_str().and_then(DeliveryLogMode::parse).ok_or_else(|| {
            HttpError::bad_request("deliveryLog must be one of the strings off, failures, all")
        })?),
    };
    Ok(OptionsPatch {
        reclaim_limit,
        retry_backoff,
        delivery_log,
        ..OptionsPatch::default()
    })
}

/// The backoff an object describes, if its values are valid.
fn backoff(b: &Map<String, Value>, max_duration_ms: u64) -> Option<RetryBackoff> {
    let int = |key: &str| match b.get(key) {
        None | Some(Value::Null) => Some(None),
        Some(v) => v.as_u64().map(Some),
    };
    let base_ms = int("baseMs")??;
    let factor = match b.get("factor") {
        None | Some(Value::Null) => DEFAULT_BACKOFF_FACTOR,
        Some(v) => v.as_f64().filter(|f| (1.0..=1000.0).contains(f))?,
    };
    let backoff = RetryBackoff {
        base_ms,
        factor_permille: (factor * 1000.0).round() as u32,
        max_ms: int("maxMs")?.unwrap_or(DEFAULT_BACKOFF_MAX_MS.max(base_ms)),
    };
    backoff.validate(max_duration_ms).ok()?;
    Some(backoff)
}

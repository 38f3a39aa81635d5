//! The `/configure` options beyond Queen (`reclaimLimit`, `retryBackoff`, `deliveryLog`; module
//! `crate::core::redelivery`): read from the `options` object, and echoed only when set, so a queue
//! that does not use them answers exactly Queen's 15 options.

use super::error::HttpError;
use super::query::clip;
use super::wire::opt_uint;
use super::Limits;
use crate::core::api::{DeliveryLogMode, OptionsPatch, QueueOptions, RetryBackoff};
use crate::core::fields::json_type;
use crate::core::redelivery::MAX_RECLAIM_LIMIT;
use serde_json::{json, Map, Value};

/// Backoff cap when `retryBackoff` sends no `maxMs` (or `baseMs` when that is longer).
pub const DEFAULT_BACKOFF_MAX_MS: u64 = 300_000;
/// Backoff factor when `retryBackoff` sends none.
pub const DEFAULT_BACKOFF_FACTOR: f64 = 2.0;

/// The three options from a `/configure` `options` object; the other fields of the patch are `None`.
pub(crate) fn patch(o: &Map<String, Value>, limits: &Limits) -> Result<OptionsPatch, HttpError> {
    let p = "options";
    let reclaim_limit = opt_uint(o, "reclaimLimit", p, MAX_RECLAIM_LIMIT as u64)?.map(|n| n as u32);
    let retry_backoff = match o.get("retryBackoff") {
        None | Some(Value::Null) => None,
        Some(Value::Object(b)) => Some(backoff(b, limits)?),
        Some(v) => {
            return Err(HttpError::bad_request(format!(
                "retryBackoff must be an object {{baseMs, factor, maxMs}} or null, got {}",
                json_type(v)
            )))
        }
    };
    let delivery_log = match o.get("deliveryLog") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(DeliveryLogMode::parse(s).ok_or_else(|| {
            HttpError::bad_request(format!(
                "deliveryLog must be one of off, failures, all, got '{}'",
                clip(s)
            ))
        })?),
        Some(v) => {
            return Err(HttpError::bad_request(format!(
                "deliveryLog must be a string (off, failures, all), got {}",
                json_type(v)
            )))
        }
    };
    Ok(OptionsPatch {
        reclaim_limit,
        retry_backoff,
        delivery_log,
        ..OptionsPatch::default()
    })
}

fn backoff(b: &Map<String, Value>, limits: &Limits) -> Result<RetryBackoff, HttpError> {
    let p = "options.retryBackoff";
    let max_duration_ms = limits.max_duration_seconds.saturating_mul(1000);
    let base_ms = opt_uint(b, "baseMs", p, max_duration_ms)?
        .ok_or_else(|| HttpError::bad_request("retryBackoff.baseMs is required"))?;
    let factor = match b.get("factor") {
        None | Some(Value::Null) => DEFAULT_BACKOFF_FACTOR,
        Some(v @ Value::Number(n)) => match n.as_f64().filter(|f| (1.0..=1000.0).contains(f)) {
            Some(f) => f,
            None => {
                return Err(HttpError::bad_request(format!(
                    "retryBackoff.factor must be between 1 and 1000, got {}",
                    clip(&v.to_string())
                )))
            }
        },
        Some(v) => {
            return Err(HttpError::bad_request(format!(
                "retryBackoff.factor must be a number, got {}",
                json_type(v)
            )))
        }
    };
    let max_ms =
        opt_uint(b, "maxMs", p, max_duration_ms)?.unwrap_or(DEFAULT_BACKOFF_MAX_MS.max(base_ms));
    let backoff = RetryBackoff {
        base_ms,
        factor_permille: (factor * 1000.0).round() as u32,
        max_ms,
    };
    backoff.validate(max_duration_ms)?;
    Ok(backoff)
}

/// Adds the options that are set to an `options` echo object.
pub(crate) fn echo(o: &QueueOptions, out: &mut Value) {
    let Some(map) = out.as_object_mut() else {
        return;
    };
    if o.reclaim_limit > 0 {
        map.insert("reclaimLimit".into(), json!(o.reclaim_limit));
    }
    if let Some(b) = &o.retry_backoff {
        map.insert(
            "retryBackoff".into(),
            json!({
                "baseMs": b.base_ms,
                "factor": b.factor_permille as f64 / 1000.0,
                "maxMs": b.max_ms,
            }),
        );
    }
    if !o.delivery_log.is_off() {
        map.insert("deliveryLog".into(), json!(o.delivery_log.as_str()));
    }
}

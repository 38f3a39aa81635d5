//! Per-queue redelivery options beyond Queen (issue 16), each off by default so a queue that does not
//! ask for them behaves as Queen's:
//!
//! - `reclaimLimit` (crash-loop quarantine, rows `quarantine` and `dead_letter_expired` of the lane
//!   table): after that many lease expiries in a row of claims starting at one offset, the lane's
//!   claims deliver the head alone; if the head alone outlives its lease that many more times, it is
//!   dead-lettered (dropped when the queue's dead-letter queue is off, as an exhausted `failed` is).
//! - `retryBackoff` (`{baseMs, factor, maxMs}`): a charged `failed` holds the lane for
//!   `baseMs * factor^R` (R = the retry budget used before this failure), capped at `maxMs`, instead of
//!   the fixed `retryDelay`.
//! - `deliveryLog` (`off`, `failures`, `all`): one record per delivery attempt (module `deliveries`).

use super::api::CoreError;
use serde::Serialize;

/// Largest `reclaimLimit`.
pub const MAX_RECLAIM_LIMIT: u32 = 1000;
/// Largest backoff `factor` (in thousandths: 1000.0).
pub const MAX_FACTOR_PERMILLE: u32 = 1_000_000;

/// `retryBackoff`: the hold after the n-th charged failure is `base_ms * factor^n`, at most `max_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryBackoff {
    /// Hold after the first failure, ms (at least 1).
    pub base_ms: u64,
    /// Growth per failure in thousandths (1000 = constant; at least 1000).
    pub factor_permille: u32,
    /// Cap, ms (at least `base_ms`).
    pub max_ms: u64,
}

impl RetryBackoff {
    /// Checks the values; `max_duration_ms` bounds `maxMs`. The error names the field (static texts:
    /// no formatting code for the browser module).
    pub fn validate(&self, max_duration_ms: u64) -> Result<(), CoreError> {
        let error = if self.base_ms == 0 {
            "retryBackoff.baseMs must be at least 1"
        } else if !(1000..=MAX_FACTOR_PERMILLE).contains(&self.factor_permille) {
            "retryBackoff.factor must be between 1 and 1000"
        } else if self.max_ms < self.base_ms || self.max_ms > max_duration_ms {
            "retryBackoff.maxMs must be at least baseMs and at most the longest duration option"
        } else {
            return Ok(());
        };
        Err(CoreError::bad_request(error))
    }

    /// The hold after a failure charged with `used` retries already used: `base * factor^used`, capped
    /// (integer arithmetic, so every build computes the same instant; u64 saturates long before a
    /// validated cap could matter, and 128-bit division would add a software routine to the module).
    pub fn hold_ms(&self, used: u32) -> u64 {
        let mut hold = self.base_ms;
        for _ in 0..used {
            if hold >= self.max_ms || self.factor_permille == 1000 {
                break;
            }
            hold = hold.saturating_mul(self.factor_permille as u64) / 1000;
        }
        hold.min(self.max_ms)
    }
}

/// `deliveryLog`: which delivery attempts are recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryLogMode {
    /// Nothing (the default).
    #[default]
    Off,
    /// Attempts that did not complete: retry, failed, dead-lettered, dropped, expired.
    Failures,
    /// Every attempt, completed and auto-acked ones too.
    All,
}

impl DeliveryLogMode {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryLogMode::Off => "off",
            DeliveryLogMode::Failures => "failures",
            DeliveryLogMode::All => "all",
        }
    }

    /// Parses a wire name.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "off" => Some(DeliveryLogMode::Off),
            "failures" => Some(DeliveryLogMode::Failures),
            "all" => Some(DeliveryLogMode::All),
            _ => None,
        }
    }

    /// True when this mode records an attempt that ended `completed` (`success`) or otherwise.
    pub fn records(self, success: bool) -> bool {
        match self {
            DeliveryLogMode::Off => false,
            DeliveryLogMode::Failures => !success,
            DeliveryLogMode::All => true,
        }
    }

    /// True for [`DeliveryLogMode::Off`] (what the stored record leaves out).
    pub fn is_off(&self) -> bool {
        *self == DeliveryLogMode::Off
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_by_the_factor_and_stops_at_the_cap() {
        let b = RetryBackoff {
            base_ms: 100,
            factor_permille: 2000,
            max_ms: 1000,
        };
        let holds: Vec<u64> = (0..6).map(|n| b.hold_ms(n)).collect();
        assert_eq!(holds, vec![100, 200, 400, 800, 1000, 1000]);
        let half = RetryBackoff {
            factor_permille: 1500,
            ..b
        };
        assert_eq!((half.hold_ms(1), half.hold_ms(2)), (150, 225));
        assert_eq!(half.hold_ms(u32::MAX), 1000, "a huge n stops at the cap");
    }

    #[test]
    fn bad_backoffs_name_their_field() {
        let ok = RetryBackoff {
            base_ms: 10,
            factor_permille: 2000,
            max_ms: 100,
        };
        assert!(ok.validate(1000).is_ok());
        for (bad, field) in [
            (RetryBackoff { base_ms: 0, ..ok }, "baseMs"),
            (
                RetryBackoff {
                    factor_permille: 999,
                    ..ok
                },
                "factor",
            ),
            (RetryBackoff { max_ms: 5, ..ok }, "maxMs"),
            (RetryBackoff { max_ms: 5000, ..ok }, "maxMs"),
        ] {
            let e = bad.validate(1000).unwrap_err();
            assert!(e.message.contains(field), "{}", e.message);
        }
    }

    #[test]
    fn delivery_log_modes() {
        assert_eq!(
            DeliveryLogMode::parse("failures"),
            Some(DeliveryLogMode::Failures)
        );
        assert_eq!(DeliveryLogMode::parse("some"), None);
        assert!(!DeliveryLogMode::Failures.records(true));
        assert!(DeliveryLogMode::Failures.records(false));
        assert!(DeliveryLogMode::All.records(true));
        assert!(!DeliveryLogMode::Off.records(false));
    }
}

//! ISO-8601 timestamps on the wire.
//!
//! Output: pop `createdAt` and lease expiries use microseconds (`YYYY-MM-DDTHH:MM:SS.ffffffZ`); dead
//! letters and admin routes use milliseconds (`…SS.mmmZ`). Both parse with `Date.parse` and Go's
//! `time.Time`. Input: RFC 3339 (`2024-05-01T12:00:00Z`, `…+02:00`, any fraction), or the same without an
//! offset (Python's naive `isoformat()`), read as UTC.

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

fn split(ms: i64) -> Option<(OffsetDateTime, i64)> {
    let dt = OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000).ok()?;
    Some((dt, ms.rem_euclid(1000)))
}

fn format(ms: i64, micros: bool) -> String {
    let Some((dt, frac_ms)) = split(ms) else {
        // Out of the representable range: only a corrupt value gets here; show the epoch.
        return format(0, micros);
    };
    let base = format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}",
        dt.year(),
        u8::from(dt.month()),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second(),
        frac_ms
    );
    if micros {
        format!("{base}000Z")
    } else {
        format!("{base}Z")
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub(crate) fn iso_millis(ms: i64) -> String {
    format(ms, false)
}

/// `YYYY-MM-DDTHH:MM:SS.ffffffZ`.
pub(crate) fn iso_micros(ms: i64) -> String {
    format(ms, true)
}

/// Parses an ISO-8601 time into ms since the epoch; `None` when it is not one.
pub(crate) fn parse_iso(s: &str) -> Option<i64> {
    let s = s.trim();
    if s.is_empty() || s.len() > 64 {
        return None;
    }
    let dt = OffsetDateTime::parse(s, &Rfc3339)
        .or_else(|_| OffsetDateTime::parse(&format!("{s}Z"), &Rfc3339))
        .ok()?;
    i64::try_from(dt.unix_timestamp_nanos().div_euclid(1_000_000)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_both_precisions() {
        assert_eq!(iso_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_millis(1_714_564_800_123), "2024-05-01T12:00:00.123Z");
        assert_eq!(iso_micros(1_714_564_800_123), "2024-05-01T12:00:00.123000Z");
    }

    #[test]
    fn parses_offsets_fractions_and_naive() {
        assert_eq!(parse_iso("2024-05-01T12:00:00Z"), Some(1_714_564_800_000));
        assert_eq!(
            parse_iso("2024-05-01T12:00:00.123Z"),
            Some(1_714_564_800_123)
        );
        assert_eq!(
            parse_iso("2024-05-01T14:00:00+02:00"),
            Some(1_714_564_800_000)
        );
        assert_eq!(
            parse_iso("2024-05-01T12:00:00.123456"),
            Some(1_714_564_800_123)
        );
        assert_eq!(parse_iso("yesterday"), None);
        assert_eq!(parse_iso("2024-13-01T00:00:00Z"), None);
        assert_eq!(parse_iso(""), None);
    }
}

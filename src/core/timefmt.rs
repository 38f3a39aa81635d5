//! ISO-8601 timestamps as Queen's clients read and write them.

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

fn format(ms: i64, micros: bool) -> String {
    let Ok(dt) = OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000) else {
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
        ms.rem_euclid(1000)
    );
    if micros {
        format!("{base}000Z")
    } else {
        format!("{base}Z")
    }
}

/// `YYYY-MM-DDTHH:MM:SS.ffffffZ` (pop `createdAt`, lease expiries).
pub fn iso_micros(ms: i64) -> String {
    format(ms, true)
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` (admin and dead-letter times).
pub fn iso_millis(ms: i64) -> String {
    format(ms, false)
}

/// Parses RFC 3339 (`Z` or `+hh:mm`, any fraction) into Unix milliseconds; a timestamp without an
/// offset (Python's naive `isoformat()`) is read as UTC.
pub fn parse_iso(text: &str) -> Option<i64> {
    let text = text.trim();
    if text.is_empty() || text.len() > 64 {
        return None;
    }
    let dt = OffsetDateTime::parse(text, &Rfc3339)
        .or_else(|_| OffsetDateTime::parse(&format!("{text}Z"), &Rfc3339))
        .ok()?;
    i64::try_from(dt.unix_timestamp_nanos().div_euclid(1_000_000)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn formats_and_parses() {
        let ms = 1_785_414_896_789;
        assert_eq!(iso_millis(ms), "2026-07-30T12:34:56.789Z");
        assert_eq!(iso_micros(ms), "2026-07-30T12:34:56.789000Z");
        assert_eq!(parse_iso("2026-07-30T12:34:56.789Z"), Some(ms));
        assert_eq!(parse_iso("2026-07-30T14:34:56.789+02:00"), Some(ms));
        assert_eq!(parse_iso("2026-07-30T12:34:56.789"), Some(ms));
        assert_eq!(
            parse_iso("2024-05-01T12:00:00.123456"),
            Some(1_714_564_800_123)
        );
        assert_eq!(parse_iso("yesterday"), None);
        assert_eq!(parse_iso("2024-13-01T00:00:00Z"), None);
        assert_eq!(parse_iso(""), None);
        assert_eq!(iso_millis(0), "1970-01-01T00:00:00.000Z");
    }
}

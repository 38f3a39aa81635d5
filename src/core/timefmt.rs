//! ISO-8601 timestamps as Queen's clients read and write them.

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

fn to_datetime(ms: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

/// `YYYY-MM-DDTHH:MM:SS.ffffffZ` (pop `createdAt`, lease expiries).
pub fn iso_micros(ms: i64) -> String {
    let t = to_datetime(ms);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.microsecond()
    )
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` (admin and dead-letter times).
pub fn iso_millis(ms: i64) -> String {
    let t = to_datetime(ms);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.millisecond()
    )
}

/// Parses an RFC 3339 / ISO-8601 timestamp with an offset (`Z` or `+hh:mm`) into Unix milliseconds.
/// A timestamp without an offset is read as UTC.
pub fn parse_iso(text: &str) -> Option<i64> {
    let text = text.trim();
    let parsed = OffsetDateTime::parse(text, &Rfc3339)
        .ok()
        .or_else(|| OffsetDateTime::parse(&format!("{text}Z"), &Rfc3339).ok())?;
    i64::try_from(parsed.unix_timestamp_nanos() / 1_000_000).ok()
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
        assert_eq!(parse_iso("yesterday"), None);
    }
}

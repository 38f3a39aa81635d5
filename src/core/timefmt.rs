//! ISO-8601 timestamps as Queen's clients read and write them.
//!
//! Formatting and parsing are done here, on the proleptic Gregorian calendar (Howard Hinnant's
//! `days_from_civil` / `civil_from_days`), rather than with the `time` crate: its RFC 3339 parser alone
//! was 5.6 KB of the npm module's gzipped download (docs/decisions.md, "JS module size"). `time` stays
//! the oracle: the tests check this parser against `time`'s on generated and mutated timestamps.

/// Days from 1970-01-01 to the given date.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let month_from_march = i64::from((month + 9) % 12);
    let day_of_year = (153 * month_from_march + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The date `days` after 1970-01-01: (year, month, day).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_from_march + 2) / 5 + 1) as u32;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

const MS_PER_DAY: i64 = 86_400_000;

/// `YYYY-MM-DDTHH:MM:SS.mmm` followed by `000Z` (`micros`) or `Z`, written digit by digit into a
/// fixed buffer (no formatting machinery: a pop answer writes one per message); the length used.
pub(crate) fn iso_bytes(ms: i64, micros: bool) -> ([u8; 27], usize) {
    let (year, month, day) = civil_from_days(ms.div_euclid(MS_PER_DAY));
    if !(0..=9999).contains(&year) {
        // Four-digit years only: only a corrupt value gets here; show the epoch.
        return iso_bytes(0, micros);
    }
    let in_day = ms.rem_euclid(MS_PER_DAY);
    let mut out = *b"0000-00-00T00:00:00.000000Z";
    let mut put = |at: usize, width: usize, mut value: u64| {
        for i in (at..at + width).rev() {
            out[i] = b'0' + (value % 10) as u8;
            value /= 10;
        }
    };
    put(0, 4, year as u64);
    put(5, 2, month.into());
    put(8, 2, day.into());
    put(11, 2, (in_day / 3_600_000) as u64);
    put(14, 2, (in_day / 60_000 % 60) as u64);
    put(17, 2, (in_day / 1000 % 60) as u64);
    put(20, 3, (in_day % 1000) as u64);
    if micros {
        (out, 27)
    } else {
        out[23] = b'Z';
        (out, 24)
    }
}

fn format(ms: i64, micros: bool) -> String {
    let (bytes, len) = iso_bytes(ms, micros);
    String::from_utf8(bytes[..len].to_vec()).unwrap_or_else(|_| unreachable!("ASCII"))
}

/// `YYYY-MM-DDTHH:MM:SS.ffffffZ` (pop `createdAt`, lease expiries).
pub fn iso_micros(ms: i64) -> String {
    format(ms, true)
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` (admin and dead-letter times).
pub fn iso_millis(ms: i64) -> String {
    format(ms, false)
}

/// A cursor over the bytes of a timestamp.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    /// Exactly `n` ASCII digits as a number.
    fn digits(&mut self, n: usize) -> Option<u32> {
        let end = self.at.checked_add(n)?;
        let digits = self.bytes.get(self.at..end)?;
        let mut value = 0u32;
        for &b in digits {
            if !b.is_ascii_digit() {
                return None;
            }
            value = value * 10 + u32::from(b - b'0');
        }
        self.at = end;
        Some(value)
    }

    /// The next byte if it is one of `options`.
    fn one_of(&mut self, options: &[u8]) -> Option<u8> {
        let b = *self.bytes.get(self.at)?;
        if options.contains(&b) {
            self.at += 1;
            Some(b)
        } else {
            None
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }
}

/// RFC 3339 (`date-time`): `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, `Z` in either case, any one
/// byte for the `T` (RFC 3339 §5.6 allows a space; `time` reads any byte there, and so do we);
/// `offset` false reads the same without the offset (UTC). Unix milliseconds, rounded down.
fn parse_rfc3339(text: &str, offset: bool) -> Option<i64> {
    let mut r = Reader {
        bytes: text.as_bytes(),
        at: 0,
    };
    let year = i64::from(r.digits(4)?);
    r.one_of(b"-")?;
    let month = r.digits(2)?;
    r.one_of(b"-")?;
    let day = r.digits(2)?;
    // Any one byte between date and time (see above); a non-ASCII one fails on the digits after it.
    r.bytes.get(r.at)?;
    r.at += 1;
    let hour = r.digits(2)?;
    r.one_of(b":")?;
    let minute = r.digits(2)?;
    r.one_of(b":")?;
    let second = r.digits(2)?;
    let mut nanos = 0u32;
    if r.one_of(b".").is_some() {
        // One digit at least; digits past nanoseconds are read and dropped.
        let mut count = 0;
        while let Some(b) = r.peek().filter(u8::is_ascii_digit) {
            if count < 9 {
                nanos = nanos * 10 + u32::from(b - b'0');
            }
            count += 1;
            r.at += 1;
        }
        if count == 0 {
            return None;
        }
        for _ in count..9 {
            nanos *= 10;
        }
    }
    // No offset expected, or `Z`: UTC.
    let offset_minutes = if !offset || r.one_of(b"Zz").is_some() {
        0
    } else {
        let sign = if r.one_of(b"+-")? == b'-' { -1 } else { 1 };
        let hours = r.digits(2)?;
        r.one_of(b":")?;
        let minutes = r.digits(2)?;
        if hours > 23 || minutes > 59 {
            return None;
        }
        sign * i64::from(hours * 60 + minutes)
    };
    if r.at != r.bytes.len()
        || !(1..=12).contains(&month)
        || day == 0
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let local_minutes =
        days_from_civil(year, month, day) * 1440 + i64::from(hour) * 60 + i64::from(minute);
    let utc_minutes = local_minutes - offset_minutes;
    let (second, nanos) = if second == 60 {
        // A leap second exists only as 23:59:60 UTC on the last day of a month (as `time` checks);
        // it reads as the last instant of that minute.
        let (utc_year, utc_month, utc_day) = civil_from_days(utc_minutes.div_euclid(1440));
        if utc_minutes.rem_euclid(1440) != 1439 || utc_day != days_in_month(utc_year, utc_month) {
            return None;
        }
        (59, 999_999_999)
    } else {
        (second, nanos)
    };
    Some(utc_minutes * 60_000 + i64::from(second) * 1000 + i64::from(nanos / 1_000_000))
}

/// Parses RFC 3339 (`Z` or `+hh:mm`, any fraction) into Unix milliseconds; a timestamp without an
/// offset (Python's naive `isoformat()`) is read as UTC.
pub fn parse_iso(text: &str) -> Option<i64> {
    let text = text.trim();
    if text.is_empty() || text.len() > 64 {
        return None;
    }
    parse_rfc3339(text, true).or_else(|| parse_rfc3339(text, false))
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
        assert_eq!(iso_millis(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(parse_iso("2024-02-29t23:59:60.5z"), Some(1_709_251_199_999));
        assert_eq!(
            parse_iso("2016-12-31T23:59:60Z"),
            Some(1_483_228_799_999),
            "a leap second is the last instant of its minute"
        );
        assert_eq!(parse_iso("2023-02-29T00:00:00Z"), None);
        assert_eq!(parse_iso("2024-01-01T00:00:00."), None);
        assert_eq!(parse_iso("2024-01-01T00:00:00+24:00"), None);
    }

    /// `time`'s RFC 3339 parser, our oracle: Unix ms rounded down.
    fn oracle(text: &str) -> Option<i64> {
        use time::format_description::well_known::Rfc3339;
        let dt = time::OffsetDateTime::parse(text, &Rfc3339).ok()?;
        i64::try_from(dt.unix_timestamp_nanos().div_euclid(1_000_000)).ok()
    }

    fn oracle_format(ms: i64) -> String {
        let dt =
            time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).unwrap();
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            dt.year(),
            u8::from(dt.month()),
            dt.day(),
            dt.hour(),
            dt.minute(),
            dt.second(),
            ms.rem_euclid(1000)
        )
    }

    /// The old `parse_iso` (before this module parsed by itself): `time`, then `time` with a `Z` added.
    fn old_parse_iso(text: &str) -> Option<i64> {
        let text = text.trim();
        if text.is_empty() || text.len() > 64 {
            return None;
        }
        oracle(text).or_else(|| oracle(&format!("{text}Z")))
    }

    /// A timestamp that is RFC 3339 in shape, with every field allowed one step out of range, biased
    /// towards the edges: century and boundary years, month ends, 23:59:60, any separator byte.
    fn timestamp() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let year = prop_oneof![
            prop::sample::select(vec![0u32, 1, 1900, 1970, 2000, 2016, 2024, 2100, 9999]),
            0u32..=9999,
        ];
        let day = prop_oneof![27u32..=32, 0u32..=32];
        let separator = prop_oneof![
            prop::sample::select(vec!['T', 't', ' ']),
            proptest::char::range(' ', '~'),
        ];
        let clock = prop_oneof![
            Just((23u32, 59u32, 60u32)),
            (0u32..=24, 0u32..=60, prop_oneof![Just(60u32), 0u32..=61]),
        ];
        let offset = prop_oneof![
            prop::sample::select(vec!["Z", "z", "", "+00:00", "-00:00", "+23:59", "-23:59"])
                .prop_map(str::to_string),
            (prop::sample::select(vec!['+', '-']), 0u32..=24, 0u32..=60)
                .prop_map(|(s, h, m)| format!("{s}{h:02}:{m:02}")),
        ];
        (
            (year, 0u32..=13, day, separator),
            clock,
            prop::option::of("[0-9]{0,12}"),
            offset,
        )
            .prop_map(|((y, mo, d, t), (h, mi, s), frac, off)| {
                let frac = frac.map(|f| format!(".{f}")).unwrap_or_default();
                format!("{y:04}-{mo:02}-{d:02}{t}{h:02}:{mi:02}:{s:02}{frac}{off}")
            })
    }

    /// A [`timestamp`] with one byte replaced, inserted or deleted.
    fn mutated_timestamp() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        (
            timestamp(),
            0usize..40,
            0u8..3,
            proptest::char::range(' ', '~'),
        )
            .prop_map(|(text, at, how, c)| {
                let mut chars: Vec<char> = text.chars().collect();
                let at = at.min(chars.len());
                match how {
                    0 if at < chars.len() => chars[at] = c,
                    1 => chars.insert(at, c),
                    _ if at < chars.len() => {
                        chars.remove(at);
                    }
                    _ => chars.push(c),
                }
                chars.into_iter().collect()
            })
    }

    // Native only (wasm-bindgen-test does not run proptest's #[test]s); the code is target-independent.
    proptest::proptest! {
        #[test]
        fn parses_as_the_time_crate_does(text in timestamp()) {
            proptest::prop_assert_eq!(parse_rfc3339(&text, true), oracle(&text), "{}", text);
        }

        #[test]
        fn mutated_timestamps_parse_as_the_time_crate_does(text in mutated_timestamp()) {
            proptest::prop_assert_eq!(parse_rfc3339(&text, true), oracle(&text), "{}", text);
        }

        #[test]
        fn parse_iso_answers_as_before(text in prop_oneof_timestamps()) {
            proptest::prop_assert_eq!(parse_iso(&text), old_parse_iso(&text), "{:?}", text);
        }

        #[test]
        fn formats_as_the_time_crate_does(ms in -62_167_219_200_000i64..253_402_300_800_000) {
            proptest::prop_assert_eq!(iso_millis(ms), oracle_format(ms));
        }
    }

    /// Inputs for `parse_iso`: timestamps, mutated ones, naive ones, padded with whitespace, and junk.
    fn prop_oneof_timestamps() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            timestamp(),
            mutated_timestamp(),
            (timestamp(), "[ \\t\\n]{0,2}", "[ \\t\\n]{0,2}")
                .prop_map(|(t, a, b)| format!("{a}{t}{b}")),
            "[0-9]{0,5}[-:.Tt+Zz0-9 ]{0,70}",
        ]
    }
}

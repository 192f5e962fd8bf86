//! Timestamps as records carry them: epoch milliseconds in the ISO-8601 form JS's
//! `toISOString` produces.
//!
//! The core never reads a clock: it is given the time (the glue reads the wall clock,
//! `binding/clock.rs`, where JavaScript passes no reading).
//!
//! Why not chrono? One function of twenty lines does not justify a dependency; the
//! civil-from-days conversion below is Howard Hinnant's public-domain algorithm.

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for milliseconds since the Unix epoch.
pub fn iso8601_millis(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let rem = ms.rem_euclid(86_400_000);
    let (h, m, s, milli) = (rem / 3_600_000, rem / 60_000 % 60, rem / 1000 % 60, rem % 1000);
    let (y, mo, d) = civil_from_days(days);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{m:02}:{s:02}.{milli:03}Z")
}

/// (year, month 1–12, day 1–31) of the day `days` after 1970-01-01 (negative: before).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_known_instants() {
        assert_eq!(iso8601_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601_millis(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso8601_millis(1_798_761_599_999), "2026-12-31T23:59:59.999Z");
        assert_eq!(iso8601_millis(1_709_208_000_123), "2024-02-29T12:00:00.123Z");
    }
}

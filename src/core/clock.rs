//! Timestamps as text: epoch milliseconds in the ISO-8601 form JS's `toISOString`
//! produces (records, summaries), and RFC 3339 text read back (providers' lists, options).
//!
//! Nothing here reads a clock: the core is given the time (the glue reads the wall clock,
//! `binding/clock.rs`, where JavaScript passes no reading).
//!
//! Why not chrono? One function of twenty lines does not justify a dependency; the
//! civil-from-days conversion below and its inverse are Howard Hinnant's public-domain
//! algorithms.

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

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` to epoch milliseconds.
pub fn parse_rfc3339_ms(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(r)?;
        part.iter().all(u8::is_ascii_digit).then(|| part.iter().fold(0i64, |a, d| a * 10 + i64::from(d - b'0')))
    };
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (y, mo, d, h, mi, sec) = (num(0..4)?, num(5..7)?, num(8..10)?, num(11..13)?, num(14..16)?, num(17..19)?);
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let month_days = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if !(1..=12).contains(&mo) || d < 1 || d > month_days[(mo - 1) as usize] || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut frac_ms = 0.0;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return None;
        }
        frac_ms = format!("0.{}", &s[start..i]).parse::<f64>().ok()? * 1000.0;
    }
    let offset_min = match b.get(i)? {
        b'Z' | b'z' if i + 1 == b.len() => 0,
        sign @ (b'+' | b'-') if i + 6 == b.len() && b[i + 3] == b':' => {
            let (oh, om) = (num(i + 1..i + 3)?, num(i + 4..i + 6)?);
            if oh > 23 || om > 59 {
                return None;
            }
            let m = oh * 60 + om;
            if *sign == b'+' {
                m
            } else {
                -m
            }
        }
        _ => return None,
    };
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + sec - offset_min * 60;
    Some(secs as f64 * 1000.0 + frac_ms)
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

    /// The record form of epoch ms with a fraction (whole ms, as a summary shows `now`).
    fn fmt(ms: f64) -> String {
        iso8601_millis(ms.floor() as i64)
    }

    #[test]
    fn rfc3339_round_trips() {
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(parse_rfc3339_ms("2026-11-30T12:00:00.250Z").map(fmt).as_deref(), Some("2026-11-30T12:00:00.250Z"));
        assert_eq!(parse_rfc3339_ms("2026-11-30T13:30:00+01:30"), parse_rfc3339_ms("2026-11-30T12:00:00Z"));
        assert_eq!(parse_rfc3339_ms("2024-02-29T00:00:00Z").map(fmt).as_deref(), Some("2024-02-29T00:00:00.000Z"));
        for bad in [
            "",
            "2026-02-30T00:00:00Z",
            "2026-11-30",
            "2026-11-30T12:00:00",
            "2026-11-30T12:00:00.Z",
            "x026-11-30T12:00:00Z",
            "2026-11-30T12:00:00Zjunk",
        ] {
            assert_eq!(parse_rfc3339_ms(bad), None, "{bad}");
        }
        assert_eq!(fmt(1_764_504_000_000.0), "2025-11-30T12:00:00.000Z");
    }

    #[test]
    fn rfc3339_round_trips_across_eras_leap_days_and_non_zero_fields() {
        let round_trip = |s: &str| parse_rfc3339_ms(s).map(fmt);
        assert_eq!(fmt(0.0), "1970-01-01T00:00:00.000Z");
        for s in [
            "2026-11-30T12:34:56.789Z",
            "2000-02-29T00:00:00.000Z",
            "2100-03-01T00:00:00.000Z",
            "1999-12-31T23:59:59.999Z",
            "0000-01-01T00:00:00.000Z",
            "0000-02-29T00:00:00.000Z",
            "9999-12-31T23:59:59.999Z",
        ] {
            assert_eq!(round_trip(s).as_deref(), Some(s));
        }
        assert_eq!(parse_rfc3339_ms("2000-02-29T00:00:00Z"), Some(951_782_400_000.0));
        assert_eq!(parse_rfc3339_ms("2100-03-01T00:00:00Z"), Some(4_107_542_400_000.0));
        assert_eq!(parse_rfc3339_ms("0000-01-01T00:00:00Z"), Some(-62_167_219_200_000.0));
    }

    #[test]
    fn must_fire_rfc3339_refuses_non_leap_february_29() {
        for bad in ["2023-02-29T00:00:00Z", "1900-02-29T00:00:00Z", "2100-02-29T00:00:00Z"] {
            assert_eq!(parse_rfc3339_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn must_fire_rfc3339_refuses_a_single_wrong_separator() {
        for bad in [
            "2026x11-30T12:00:00Z",
            "2026-11x30T12:00:00Z",
            "2026-11-30x12:00:00Z",
            "2026-11-30T12x00:00Z",
            "2026-11-30T12:00x00Z",
        ] {
            assert_eq!(parse_rfc3339_ms(bad), None, "{bad}");
        }
        for ok in ["2026-11-30t12:00:00Z", "2026-11-30 12:00:00z"] {
            assert!(parse_rfc3339_ms(ok).is_some(), "{ok}");
        }
    }

    #[test]
    fn must_fire_rfc3339_refuses_out_of_range_fields() {
        for bad in [
            "2026-13-01T00:00:00Z",
            "2026-00-01T00:00:00Z",
            "2026-11-00T00:00:00Z",
            "2026-11-31T00:00:00Z",
            "2026-11-30T24:00:00Z",
            "2026-11-30T23:60:00Z",
            "2026-11-30T23:59:61Z",
        ] {
            assert_eq!(parse_rfc3339_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn must_not_fire_rfc3339_accepts_the_largest_valid_fields() {
        // 23:59:60 is a leap second, which RFC 3339 allows.
        assert!(parse_rfc3339_ms("2026-12-31T23:59:60Z").is_some());
        assert_eq!(parse_rfc3339_ms("2026-11-30T23:59:59+23:59"), parse_rfc3339_ms("2026-11-30T00:00:59Z"));
    }

    #[test]
    fn rfc3339_offsets_shift_in_the_right_direction() {
        let noon = parse_rfc3339_ms("2026-11-30T12:00:00Z");
        assert_eq!(parse_rfc3339_ms("2026-11-30T13:30:00+01:30"), noon);
        assert_eq!(parse_rfc3339_ms("2026-11-30T10:30:00-01:30"), noon);
        assert_eq!(parse_rfc3339_ms("2026-11-30T13:30:00.5+01:30"), noon.map(|n| n + 500.0));
    }

    #[test]
    fn must_fire_rfc3339_refuses_malformed_offsets() {
        for bad in [
            "2026-11-30T12:00:00+0130",
            "2026-11-30T12:00:00+01x30",
            "2026-11-30T12:00:00+01:30Z",
            "2026-11-30T12:00:00+24:00",
            "2026-11-30T12:00:00+00:60",
            "2026-11-30T12:00:00.5+01x30",
        ] {
            assert_eq!(parse_rfc3339_ms(bad), None, "{bad}");
        }
    }
}

//! Unix seconds as the minute a person reads (`2026-12-07 23:10`, UTC), with no time crate.

/// `t` (Unix seconds) as `YYYY-MM-DD HH:MM`, UTC.
pub fn utc_minute(t: i64) -> String {
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        secs / 3600,
        (secs % 3600) / 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_dates() {
        assert_eq!(super::utc_minute(0), "1970-01-01 00:00");
        assert_eq!(super::utc_minute(1_796_685_000), "2026-12-07 23:10");
        assert_eq!(super::utc_minute(951_782_400), "2000-02-29 00:00");
    }
}

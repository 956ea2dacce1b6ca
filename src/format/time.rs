//! Timestamps as the run directory and the metrics files write them (UTC ISO-8601), and
//! the longest span a seconds flag may name.

use std::time::SystemTime;

/// The longest time a seconds flag takes (30 days), in traj-run and traj-compress alike:
/// timeouts and retry waits past it are typing mistakes, and an instant that far ahead
/// still fits the clock's range (a `Duration` of 1e30 seconds does not exist).
pub const MAX_SECS: f64 = 30.0 * 86400.0;

/// Now as UTC ISO-8601 with microseconds and a `Z`.
pub fn utc_now() -> String {
    utc_iso(SystemTime::now())
}

/// `t` as UTC ISO-8601 (`2026-11-29T10:59:43.222630Z`).
pub fn utc_iso(t: SystemTime) -> String {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (year, month, day) = civil_date(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_micros()
    )
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days`).
pub fn civil_date(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_micros(1_795_000_000_123_456);
        assert_eq!(utc_iso(t), "2026-11-18T11:06:40.123456Z");
        assert_eq!(
            utc_iso(SystemTime::UNIX_EPOCH),
            "1970-01-01T00:00:00.000000Z"
        );
    }
}

//! A `--min-X` / `--max-X` flag pair as one value: an inclusive range whose ends are
//! each optional. The pair's three rules live here once: the two ends must not cross
//! (a usage error naming both flags), a range with no end set checks nothing, and a
//! value outside gives the reason `<below>: V < MIN` or `<above>: V > MAX`.

use std::fmt::Display;

/// An inclusive range with optional ends.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Bounds<T> {
    pub min: Option<T>,
    pub max: Option<T>,
}

impl<T: PartialOrd + Copy + Display> Bounds<T> {
    /// The range of `--min-NAME` and `--max-NAME`, or the usage error when the minimum
    /// is above the maximum.
    pub fn new(name: &str, min: Option<T>, max: Option<T>) -> Result<Bounds<T>, String> {
        match (min, max) {
            (Some(a), Some(b)) if a > b => {
                Err(format!("--min-{name} {a} is above --max-{name} {b}"))
            }
            _ => Ok(Bounds { min, max }),
        }
    }

    /// True when either end is set.
    pub fn is_set(&self) -> bool {
        self.min.is_some() || self.max.is_some()
    }

    /// The reason `v` is outside the range: `below` or `above`, with the value and the
    /// end it crossed.
    pub fn outside(&self, v: T, below: &str, above: &str) -> Option<String> {
        if let Some(m) = self.min.filter(|&m| v < m) {
            return Some(format!("{below}: {v} < {m}"));
        }
        if let Some(m) = self.max.filter(|&m| v > m) {
            return Some(format!("{above}: {v} > {m}"));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crossed_ends_are_a_usage_error_naming_both_flags() {
        assert_eq!(
            Bounds::new("turns", Some(5), Some(3)).unwrap_err(),
            "--min-turns 5 is above --max-turns 3"
        );
        assert!(Bounds::new("turns", Some(3), Some(3)).is_ok());
        assert!(Bounds::new("reward", None, Some(-1.0)).is_ok());
    }

    #[test]
    fn a_value_is_judged_against_each_end_it_has() {
        let b = Bounds::new("turns", Some(2), Some(4)).unwrap();
        assert_eq!(b.outside(1, "few", "many").as_deref(), Some("few: 1 < 2"));
        assert_eq!(b.outside(5, "few", "many").as_deref(), Some("many: 5 > 4"));
        assert_eq!(b.outside(2, "few", "many"), None);
        assert_eq!(b.outside(4, "few", "many"), None);
        let open = Bounds::<f64>::default();
        assert!(!open.is_set());
        assert_eq!(open.outside(f64::MAX, "low", "high"), None);
        let min_only = Bounds::new("reward", Some(0.5), None).unwrap();
        assert!(min_only.is_set());
        assert_eq!(
            min_only.outside(0.25, "low", "high").as_deref(),
            Some("low: 0.25 < 0.5")
        );
    }
}

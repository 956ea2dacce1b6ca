//! A distribution of whole numbers kept as value -> count: exact quantiles, means and
//! histogram bins, with memory bounded by the number of distinct values (not rows).
//!
//! Fractional quantities are kept as integers of a fixed `scale` (a reward of 0.25 at
//! scale 1000 is 250; a cost of $0.0012 at scale 1,000,000 is 1200): the page divides by
//! `scale` when it shows them, so nothing is rounded twice.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// A count or size from the data as a [`Dist`] value: one past `i64` is held at its
/// end (a cast would wrap `u64::MAX` to -1).
pub fn int<T: TryInto<i64>>(x: T) -> i64 {
    x.try_into().unwrap_or(i64::MAX)
}

/// How many bars a histogram has at most.
pub const MAX_BINS: i64 = 30;

/// Value -> count, and the sum of all values.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Dist {
    counts: BTreeMap<i64, u64>,
    n: u64,
    sum: i128,
}

impl Dist {
    pub fn push(&mut self, v: i64) {
        *self.counts.entry(v).or_default() += 1;
        self.n += 1;
        self.sum += i128::from(v);
    }

    /// Values pushed.
    pub fn len(&self) -> u64 {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    pub fn sum(&self) -> i128 {
        self.sum
    }

    pub fn min(&self) -> Option<i64> {
        self.counts.keys().next().copied()
    }

    pub fn max(&self) -> Option<i64> {
        self.counts.keys().next_back().copied()
    }

    /// The `q` quantile (0..=1) by the nearest-rank rule: the smallest value with at
    /// least `ceil(q * n)` values at or below it.
    pub fn quantile(&self, q: f64) -> Option<i64> {
        if self.n == 0 {
            return None;
        }
        let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut seen = 0;
        for (v, c) in &self.counts {
            seen += c;
            if seen >= rank {
                return Some(*v);
            }
        }
        self.max()
    }

    /// Values strictly above `limit`.
    pub fn count_above(&self, limit: i64) -> u64 {
        self.counts.range(limit + 1..).map(|(_, c)| c).sum()
    }

    /// The histogram: `lo` (first bin's start), `w` (bin width), `bins` (counts of
    /// `[lo + k*w, lo + (k+1)*w)`), and `over`: values above `top` counted apart, so
    /// that one outlier does not squeeze every other bar into the first. `top` is the
    /// maximum unless it is more than three times the 99th percentile, then the latter.
    pub fn histogram(&self) -> (i64, i64, Vec<u64>, u64, i64) {
        let (Some(min), Some(max), Some(p99)) = (self.min(), self.max(), self.quantile(0.99))
        else {
            return (0, 1, Vec::new(), 0, 0);
        };
        let top = if p99 > 0 && max > p99.saturating_mul(3) {
            p99
        } else {
            max
        };
        // In i128: the span of two extreme values (a reward of -1.8e308 beside 1, both
        // held at the ends of i64) does not fit an i64.
        let (min, top128) = (i128::from(min), i128::from(top));
        let span = top128 - min + 1;
        let w = nice_width((span + i128::from(MAX_BINS) - 1) / i128::from(MAX_BINS));
        let lo = min.div_euclid(w) * w;
        let nbins = ((top128 - lo) / w + 1) as usize;
        let mut bins = vec![0u64; nbins];
        let mut over = 0;
        for (v, c) in &self.counts {
            if *v > top {
                over += c;
            } else {
                bins[((i128::from(*v) - lo) / w) as usize] += c;
            }
        }
        let at_most_i64 =
            |x: i128| i64::try_from(x).unwrap_or(if x < 0 { i64::MIN } else { i64::MAX });
        (at_most_i64(lo), at_most_i64(w), bins, over, top)
    }

    /// The page's view: count, sum, mean, min, quartiles and tail quantiles, max, and
    /// the histogram ([`Dist::histogram`]); values at `scale`.
    pub fn to_json(&self, scale: i64) -> Value {
        if self.n == 0 {
            return json!({"n": 0, "scale": scale});
        }
        let (lo, w, bins, over, top) = self.histogram();
        json!({
            "n": self.n,
            "scale": scale,
            "sum": self.sum as f64,
            "mean": self.sum as f64 / self.n as f64,
            "min": self.min(),
            "p50": self.quantile(0.5),
            "p90": self.quantile(0.9),
            "p99": self.quantile(0.99),
            "max": self.max(),
            "lo": lo,
            "w": w,
            "top": top,
            "bins": bins,
            "over": over,
        })
    }
}

/// The smallest of 1, 2, 5 times a power of ten that is at least `w` (at most 10^38).
fn nice_width(w: i128) -> i128 {
    let mut p = 1i128;
    loop {
        for m in [1, 2, 5] {
            if m * p >= w {
                return m * p;
            }
        }
        if p >= 10i128.pow(37) {
            return 10 * p;
        }
        p *= 10;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank() {
        let mut d = Dist::default();
        for v in [5, 1, 3, 3, 9] {
            d.push(v);
        }
        assert_eq!(d.quantile(0.5), Some(3));
        assert_eq!(d.quantile(0.0), Some(1));
        assert_eq!(d.quantile(1.0), Some(9));
        assert_eq!(d.quantile(0.8), Some(5));
        assert_eq!(d.count_above(3), 2);
        assert_eq!((d.len(), d.sum()), (5, 21));
    }

    #[test]
    fn histogram_holds_every_value_once() {
        let mut d = Dist::default();
        for v in 0..1000 {
            d.push(v % 97);
        }
        d.push(100_000);
        let (lo, w, bins, over, top) = d.histogram();
        assert_eq!(bins.iter().sum::<u64>() + over, 1001);
        assert_eq!(over, 1);
        assert!(top < 100_000);
        assert!(bins.len() as i64 <= MAX_BINS + 1, "{} bins", bins.len());
        assert_eq!((lo, w), (0, 5));
        assert_eq!(nice_width(7), 10);
        assert_eq!(nice_width(1), 1);
        assert_eq!(nice_width(3), 5);
    }

    /// A reward of -1.8e308 (a "worst" sentinel) or 1e16 is held at an end of i64;
    /// the span of two such values overflowed, and the report panicked.
    #[test]
    fn histogram_of_values_at_both_ends_of_i64() {
        for values in [
            vec![i64::MIN, 0, 1000, i64::MAX],
            vec![0, i64::MAX],
            vec![i64::MIN, i64::MIN + 1],
            vec![i64::MAX],
        ] {
            let mut d = Dist::default();
            for v in &values {
                d.push(*v);
            }
            let (_, w, bins, over, _) = d.histogram();
            assert_eq!(
                bins.iter().sum::<u64>() + over,
                values.len() as u64,
                "{values:?}"
            );
            assert!(
                bins.len() as i64 <= MAX_BINS + 2,
                "{values:?}: {} bins",
                bins.len()
            );
            assert!(w > 0);
            let _ = d.to_json(1000);
        }
        assert_eq!(int(u64::MAX), i64::MAX, "not -1");
        assert_eq!(int(5usize), 5);
    }
}

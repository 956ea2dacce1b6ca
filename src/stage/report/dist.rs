//! A distribution of whole numbers kept as value -> count: exact quantiles, means and
//! histogram bins, with memory bounded by the number of distinct values (not rows).
//!
//! Fractional quantities are kept as integers of a fixed `scale` (a reward of 0.25 at
//! scale 1000 is 250; a cost of $0.0012 at scale 1,000,000 is 1200): the page divides by
//! `scale` when it shows them, so nothing is rounded twice.

use std::collections::BTreeMap;

use serde_json::{Value, json};

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
        let span = top - min + 1;
        let w = nice_width((span + MAX_BINS - 1) / MAX_BINS);
        let lo = min.div_euclid(w) * w;
        let nbins = ((top - lo) / w + 1) as usize;
        let mut bins = vec![0u64; nbins];
        let mut over = 0;
        for (v, c) in &self.counts {
            if *v > top {
                over += c;
            } else {
                bins[((v - lo) / w) as usize] += c;
            }
        }
        (lo, w, bins, over, top)
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

/// The smallest of 1, 2, 5 times a power of ten that is at least `w`.
fn nice_width(w: i64) -> i64 {
    let mut p = 1i64;
    loop {
        for m in [1, 2, 5] {
            if m * p >= w {
                return m * p;
            }
        }
        p = p.saturating_mul(10);
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
}

//! Which rows the page embeds (`--max-rows N`): a reproducible sample that always holds
//! the extremes, chosen in one pass with memory for N rows.
//!
//! The rule (docs/report.md): at most N rows. The rows with the smallest and the
//! largest token count, the most turns, the most tool calls, the most failed tool
//! results, and the lowest and highest reward (the first such row in input order on
//! ties) come first (in that order, the first N of them when N is smaller); the other
//! places go to the rows whose `splitmix64(seed ^ splitmix64(n))` is smallest, `n`
//! being the row's 0-based number over all inputs. The same input and `--seed` give the
//! same rows on every machine, whatever the order of the others. Memory: N rows by hash
//! and one per extreme.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

/// The extremes always embedded: name, whether the largest value wins, and whether the
/// value is a count (a largest count of 0 is no extreme: no row has "the most tool
/// errors" when none has any).
pub const EXTREMES: [(&str, bool, bool); 7] = [
    ("fewest tokens", false, true),
    ("most tokens", true, true),
    ("most turns", true, true),
    ("most tool calls", true, true),
    ("most tool errors", true, true),
    ("lowest reward", false, false),
    ("highest reward", true, false),
];

/// The values of one row for each of [`EXTREMES`] (`None`: not known for this row).
pub type Measures = [Option<i64>; EXTREMES.len()];

/// The standard splitmix64 finaliser (Steele et al.), the sample's hash.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The sample being chosen.
pub struct Sample {
    seed: u64,
    /// The rows embedded at most (N); as many are held by hash, for the places the
    /// extremes leave.
    k: usize,
    by_hash: BTreeMap<(u64, u64), Arc<Value>>,
    best: Vec<Option<(i64, u64, Arc<Value>)>>,
}

impl Sample {
    pub fn new(max_rows: usize, seed: u64) -> Sample {
        Sample {
            seed,
            k: max_rows,
            by_hash: BTreeMap::new(),
            best: vec![None; EXTREMES.len()],
        }
    }

    /// Offer row `n` with its measures; `view` renders it, called at most once and only
    /// when the row is kept (for now).
    pub fn offer(&mut self, n: u64, m: &Measures, view: impl FnOnce() -> Value) {
        let h = splitmix64(self.seed ^ splitmix64(n));
        let by_hash = self.k > 0
            && (self.by_hash.len() < self.k
                || self
                    .by_hash
                    .keys()
                    .next_back()
                    .is_some_and(|&(top, _)| h < top));
        let wins: Vec<usize> = (0..EXTREMES.len())
            .filter(|&i| {
                let Some(v) = m[i] else { return false };
                let (_, largest, count) = EXTREMES[i];
                if largest && count && v <= 0 {
                    return false;
                }
                match &self.best[i] {
                    None => true,
                    Some((b, _, _)) if EXTREMES[i].1 => v > *b,
                    Some((b, _, _)) => v < *b,
                }
            })
            .collect();
        if !by_hash && wins.is_empty() {
            return;
        }
        let v = Arc::new(view());
        if by_hash {
            self.by_hash.insert((h, n), v.clone());
            if self.by_hash.len() > self.k {
                self.by_hash.pop_last();
            }
        }
        for i in wins {
            self.best[i] = Some((m[i].expect("won"), n, v.clone()));
        }
    }

    /// The embedded rows in input order, at most N, each with `pick`: why it is there
    /// (`sample` and/or the extremes it holds).
    pub fn finish(self) -> Vec<Value> {
        let mut rows: BTreeMap<u64, (Arc<Value>, Vec<&'static str>)> = BTreeMap::new();
        for (i, b) in self.best.into_iter().enumerate() {
            if let Some((_, n, v)) = b
                && (rows.len() < self.k || rows.contains_key(&n))
            {
                rows.entry(n)
                    .or_insert((v, Vec::new()))
                    .1
                    .push(EXTREMES[i].0);
            }
        }
        let mut sampled: Vec<(u64, Arc<Value>)> = Vec::new();
        let mut places = self.k - rows.len().min(self.k);
        for ((_, n), v) in self.by_hash {
            if rows.contains_key(&n) {
                sampled.push((n, v));
            } else if places > 0 {
                places -= 1;
                sampled.push((n, v));
            }
        }
        for (n, v) in sampled {
            rows.entry(n)
                .or_insert((v, Vec::new()))
                .1
                .insert(0, "sample");
        }
        rows.into_values()
            .map(|(v, why)| {
                let mut v = Arc::unwrap_or_clone(v);
                if let Value::Object(m) = &mut v {
                    m.insert("pick".into(), why.into());
                }
                v
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn choose(n: u64, max_rows: usize, seed: u64) -> Vec<Value> {
        let mut s = Sample::new(max_rows, seed);
        for i in 0..n {
            let tokens = if i == 17 {
                1_000_000
            } else {
                (i % 50) as i64 + 10
            };
            let m: Measures = [Some(tokens), Some(tokens), None, None, None, None, None];
            s.offer(i, &m, || json!({"i": i}));
        }
        s.finish()
    }

    #[test]
    fn reproducible_bounded_and_holds_the_extremes() {
        let a = choose(10_000, 50, 7);
        assert_eq!(a, choose(10_000, 50, 7));
        assert_ne!(a, choose(10_000, 50, 8));
        assert!(a.len() <= 50, "{}", a.len());
        let picked = |i: u64| a.iter().find(|v| v["i"] == i).map(|v| v["pick"].clone());
        assert_eq!(picked(17).unwrap(), json!(["most tokens"]));
        // Row 0 holds the fewest tokens (10, first of its ties).
        assert!(
            picked(0)
                .unwrap()
                .as_array()
                .unwrap()
                .contains(&json!("fewest tokens"))
        );
        let order: Vec<u64> = a.iter().map(|v| v["i"].as_u64().unwrap()).collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]));
    }

    /// `--max-rows N` embeds N rows (of enough), never more: the extremes first (the
    /// first N of them when there are more), the sample in the places they leave.
    /// Before, N minus 7 places went to the sample and the extremes came on top.
    #[test]
    fn at_most_n_rows_the_extremes_first() {
        for n in [1, 2, 3, 9, 50] {
            let a = choose(1000, n, 3);
            assert_eq!(a.len(), n, "{n}: {a:?}");
        }
        // One place: the first extreme (the fewest tokens: row 0).
        assert_eq!(choose(1000, 1, 3)[0]["pick"], json!(["fewest tokens"]));
        let two = choose(1000, 2, 3);
        let picks: Vec<&Value> = two.iter().map(|v| &v["pick"]).collect();
        assert!(picks.contains(&&json!(["most tokens"])), "{picks:?}");
    }
}

//! Per-trajectory and aggregate metrics, with the reference's groups, field names and
//! rounding (its §5.2–5.3), plus what traj adds: the tokenizer, the summarizer of each
//! summary, and the reason a row stayed over the limit.

use std::collections::BTreeMap;

use serde_json::{Value, json};

fn round(x: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (x * f).round() / f
}

/// Metrics of one trajectory.
#[derive(Debug, Clone, PartialEq)]
pub struct TrajectoryMetrics {
    pub original_tokens: usize,
    pub compressed_tokens: usize,
    pub original_turns: usize,
    pub compressed_turns: usize,
    /// `-1` when no region was chosen.
    pub start_idx: i64,
    pub end_idx: i64,
    pub was_compressed: bool,
    pub still_over_limit: bool,
    pub skipped_under_target: bool,
    pub api_calls: u32,
    pub errors: u32,
    /// Why the row is still over the limit (traj's addition).
    pub reason: Option<String>,
    /// Who wrote the summary (traj's addition).
    pub summarizer: Option<String>,
    /// The summary failed or timed out (traj's addition; the row was kept or given the
    /// placeholder).
    pub summary_failed: bool,
    /// Turns shortened by `--over-budget truncate` (traj's addition).
    pub truncated_turns: usize,
}

impl Default for TrajectoryMetrics {
    fn default() -> Self {
        TrajectoryMetrics {
            original_tokens: 0,
            compressed_tokens: 0,
            original_turns: 0,
            compressed_turns: 0,
            start_idx: -1,
            end_idx: -1,
            was_compressed: false,
            still_over_limit: false,
            skipped_under_target: false,
            api_calls: 0,
            errors: 0,
            reason: None,
            summarizer: None,
            summary_failed: false,
            truncated_turns: 0,
        }
    }
}

impl TrajectoryMetrics {
    pub fn tokens_saved(&self) -> i64 {
        self.original_tokens as i64 - self.compressed_tokens as i64
    }

    pub fn turns_removed(&self) -> i64 {
        self.original_turns as i64 - self.compressed_turns as i64
    }

    pub fn compression_ratio(&self) -> f64 {
        self.compressed_tokens as f64 / self.original_tokens.max(1) as f64
    }

    /// The per-row `compression_metrics` object, in the reference's key order, then
    /// traj's additions.
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "original_tokens": self.original_tokens,
            "compressed_tokens": self.compressed_tokens,
            "tokens_saved": self.tokens_saved(),
            "compression_ratio": round(self.compression_ratio(), 4),
            "original_turns": self.original_turns,
            "compressed_turns": self.compressed_turns,
            "turns_removed": self.turns_removed(),
            "compression_region": {
                "start_idx": self.start_idx,
                "end_idx": self.end_idx,
                "turns_count": if self.start_idx >= 0 { self.end_idx - self.start_idx } else { 0 },
            },
            "was_compressed": self.was_compressed,
            "still_over_limit": self.still_over_limit,
            "skipped_under_target": self.skipped_under_target,
            "summarization_api_calls": self.api_calls,
            "summarization_errors": self.errors,
        });
        let m = v.as_object_mut().expect("object");
        if let Some(r) = &self.reason {
            m.insert("still_over_limit_reason".into(), json!(r));
        }
        if let Some(s) = &self.summarizer {
            m.insert("summarizer".into(), json!(s));
        }
        if self.truncated_turns > 0 {
            m.insert("truncated_turns".into(), json!(self.truncated_turns));
        }
        v
    }
}

/// A running mean: the sum in the order the values came, and their number (the same
/// result as summing a list of them, without keeping one value per row).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Mean {
    sum: f64,
    n: usize,
}

impl Mean {
    pub fn push(&mut self, x: f64) {
        self.sum += x;
        self.n += 1;
    }

    /// How many values were added.
    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// `None` when no value was added.
    pub fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / self.n as f64)
    }
}

/// Totals over a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Aggregate {
    pub total: u64,
    pub compressed: u64,
    pub skipped_under_target: u64,
    /// Of the skipped: proven under the target by byte length, never tokenized.
    pub skipped_by_size: u64,
    pub still_over: u64,
    pub failed: u64,
    /// Rows passed through because they hold no turn list.
    pub passed_through: u64,
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub turns_before: u64,
    pub turns_after: u64,
    pub api_calls: u64,
    pub errors: u64,
    /// Of the compressed rows: compression ratios, tokens saved, turns removed.
    pub ratios: Mean,
    pub saved: Mean,
    pub turns_removed: Mean,
    pub reasons: BTreeMap<String, u64>,
    /// Rows shortened by `--over-budget truncate`.
    pub truncated: u64,
    /// Rows sent to --rejects by `--over-budget` (not in `total`'s other counts).
    pub rejected_over_budget: u64,
    pub summarizers: BTreeMap<String, u64>,
}

impl Aggregate {
    /// Add one trajectory (the reference's `add_trajectory_metrics`).
    pub fn add(&mut self, m: &TrajectoryMetrics) {
        self.total += 1;
        self.tokens_before += m.original_tokens as u64;
        self.tokens_after += m.compressed_tokens as u64;
        self.turns_before += m.original_turns as u64;
        self.turns_after += m.compressed_turns as u64;
        self.api_calls += u64::from(m.api_calls);
        self.errors += u64::from(m.errors);
        if m.was_compressed {
            self.compressed += 1;
            self.ratios.push(m.compression_ratio());
            self.saved.push(m.tokens_saved() as f64);
            self.turns_removed.push(m.turns_removed() as f64);
            if let Some(s) = &m.summarizer {
                *self.summarizers.entry(s.clone()).or_default() += 1;
            }
        }
        if m.skipped_under_target {
            self.skipped_under_target += 1;
        }
        if m.still_over_limit {
            self.still_over += 1;
            let r = m.reason.clone().unwrap_or_else(|| "unknown".into());
            *self.reasons.entry(r).or_default() += 1;
        }
        if m.summary_failed {
            self.failed += 1;
        }
        if m.truncated_turns > 0 {
            self.truncated += 1;
        }
    }

    /// The `compression_metrics.json` document: the reference's six groups, then
    /// `tokenizer` and `summarizer`.
    pub fn to_json(&self, tokenizer: &str, summarizer: &str, processing: Value) -> Value {
        let mut doc = self.groups(processing);
        if self.truncated > 0 || self.rejected_over_budget > 0 {
            let summary = doc["summary"].as_object_mut().expect("object");
            summary.insert("trajectories_truncated".into(), json!(self.truncated));
            summary.insert(
                "trajectories_rejected_over_budget".into(),
                json!(self.rejected_over_budget),
            );
        }
        let m = doc.as_object_mut().expect("object");
        m.insert("tokenizer".into(), json!(tokenizer));
        m.insert("summarizer".into(), json!(summarizer));
        doc
    }

    fn groups(&self, processing: Value) -> Value {
        json!({
            "summary": {
                "total_trajectories": self.total,
                "trajectories_compressed": self.compressed,
                "trajectories_skipped_under_target": self.skipped_under_target,
                "trajectories_still_over_limit": self.still_over,
                "trajectories_failed": self.failed,
                "compression_rate": round(self.compressed as f64 / self.total.max(1) as f64, 4),
                "trajectories_skipped_by_size": self.skipped_by_size,
                "trajectories_passed_through": self.passed_through,
                "still_over_limit_reasons": self.reasons,
            },
            "tokens": {
                "total_before": self.tokens_before,
                "total_after": self.tokens_after,
                "total_saved": self.tokens_before as i64 - self.tokens_after as i64,
                "overall_compression_ratio": if self.tokens_before == 0 { 0.0 } else {
                    round(self.tokens_after as f64 / self.tokens_before as f64, 4)
                },
            },
            "turns": {
                "total_before": self.turns_before,
                "total_after": self.turns_after,
                "total_removed": self.turns_before as i64 - self.turns_after as i64,
            },
            "averages": {
                "avg_compression_ratio": round(self.ratios.mean().unwrap_or(1.0), 4),
                "avg_tokens_saved_per_compressed": round(self.saved.mean().unwrap_or(0.0), 1),
                "avg_turns_removed_per_compressed": round(self.turns_removed.mean().unwrap_or(0.0), 2),
            },
            "summarization": {
                "total_api_calls": self.api_calls,
                "total_errors": self.errors,
                "success_rate": round(1.0 - self.errors as f64 / self.api_calls.max(1) as f64, 4),
                "summaries_by_summarizer": self.summarizers,
            },
            "processing": processing,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agg(a: &Aggregate) -> Value {
        a.to_json("chars4", "offline-extractive", json!({}))
    }

    // Reference §9.2.
    #[test]
    fn trajectory_defaults_and_dict() {
        let m = TrajectoryMetrics::default();
        assert_eq!(m.original_tokens, 0);
        assert!(!m.was_compressed && !m.skipped_under_target);
        assert_eq!(m.to_json()["compression_region"]["start_idx"], json!(-1));
        let m = TrajectoryMetrics {
            original_tokens: 1000,
            compressed_tokens: 600,
            original_turns: 20,
            compressed_turns: 12,
            start_idx: 4,
            end_idx: 13,
            was_compressed: true,
            api_calls: 2,
            errors: 1,
            ..Default::default()
        };
        let v = m.to_json();
        assert_eq!(v["tokens_saved"], json!(400));
        assert_eq!(v["compression_ratio"], json!(0.6));
        assert_eq!(v["turns_removed"], json!(8));
        assert_eq!(v["compression_region"]["turns_count"], json!(9));
        assert_eq!(v["summarization_api_calls"], json!(2));
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys[0], "original_tokens");
        assert_eq!(keys[12], "summarization_errors");
    }

    // Reference §9.3.
    #[test]
    fn aggregate_empty() {
        let v = agg(&Aggregate::default());
        assert_eq!(v["summary"]["total_trajectories"], json!(0));
        assert_eq!(v["averages"]["avg_compression_ratio"], json!(1.0));
        assert_eq!(v["averages"]["avg_tokens_saved_per_compressed"], json!(0.0));
        assert_eq!(v["summarization"]["success_rate"], json!(1.0));
        assert_eq!(v["tokens"]["overall_compression_ratio"], json!(0.0));
        let groups: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(
            groups,
            [
                "summary",
                "tokens",
                "turns",
                "averages",
                "summarization",
                "processing",
                "tokenizer",
                "summarizer"
            ]
        );
    }

    #[test]
    fn aggregate_one_compressed() {
        let mut a = Aggregate::default();
        a.add(&TrajectoryMetrics {
            original_tokens: 20000,
            compressed_tokens: 10000,
            original_turns: 30,
            compressed_turns: 15,
            was_compressed: true,
            ..Default::default()
        });
        assert_eq!((a.total, a.compressed), (1, 1));
        let v = agg(&a);
        assert_eq!(v["tokens"]["total_saved"], json!(10000));
        assert_eq!(a.ratios.len(), 1);
    }

    #[test]
    fn aggregate_skipped_and_still_over() {
        let mut a = Aggregate::default();
        a.add(&TrajectoryMetrics {
            skipped_under_target: true,
            ..Default::default()
        });
        assert_eq!(
            (a.skipped_under_target, a.compressed, a.still_over),
            (1, 0, 0)
        );
        a.add(&TrajectoryMetrics {
            was_compressed: true,
            still_over_limit: true,
            original_tokens: 10,
            compressed_tokens: 8,
            ..Default::default()
        });
        assert_eq!(a.still_over, 1);
    }

    #[test]
    fn aggregate_three_at_half() {
        let mut a = Aggregate::default();
        for _ in 0..3 {
            a.add(&TrajectoryMetrics {
                original_tokens: 10000,
                compressed_tokens: 5000,
                was_compressed: true,
                ..Default::default()
            });
        }
        let v = agg(&a);
        assert_eq!(v["tokens"]["total_saved"], json!(15000));
        assert_eq!(v["averages"]["avg_compression_ratio"], json!(0.5));
    }

    #[test]
    fn success_rate_counts_errors() {
        let mut a = Aggregate::default();
        a.add(&TrajectoryMetrics {
            api_calls: 3,
            errors: 3,
            ..Default::default()
        });
        assert_eq!(agg(&a)["summarization"]["success_rate"], json!(0.0));
    }
}

//! The overview of one dataset: every row counted (embedded in the page or not), as
//! distributions and tables, and the JSON the page and `--summary` show.
//!
//! Memory is bounded by distinct values ([`Dist`]), tools, reject reasons and, with
//! rewards, prompts (pass@k groups rollouts by prompt); never by rows.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Value, json};

use super::dist::{self, Dist};
use super::facts::{Facts, FailureLine, RejectLine};

/// Scale of costs (micro-dollars) and rewards (thousandths) in their distributions.
pub const COST_SCALE: i64 = 1_000_000;
pub const REWARD_SCALE: i64 = 1_000;

/// Calls, failed and succeeded results, and rows using one tool.
#[derive(Debug, Clone, Copy, Default)]
struct ToolAgg {
    calls: u64,
    failed: u64,
    succeeded: u64,
    rows: u64,
}

/// The running overview of one dataset.
#[derive(Debug, Default)]
pub struct Overview {
    budget: Option<u64>,
    rows: u64,
    status: BTreeMap<&'static str, u64>,
    stop_reasons: BTreeMap<String, u64>,
    unreadable: u64,
    /// The first unreadable row and the first bad line, each as `file:line: why`.
    first_unreadable: Option<String>,
    first_bad: Option<String>,
    tokens: Dist,
    turns: Dist,
    calls: Dist,
    reasoning_pct: Dist,
    assistant_turns: u64,
    reasoning_turns: u64,
    rows_with_reasoning: u64,
    tools: BTreeMap<String, ToolAgg>,
    failures: u64,
    failure_classes: BTreeMap<String, u64>,
    reject_lines: u64,
    rejects: BTreeMap<(String, String), u64>,
    /// Tombstones by their `discarded` reason.
    discarded: BTreeMap<String, u64>,
    // Compression.
    comp_rows: u64,
    comp_before: Dist,
    comp_after: Dist,
    compressed: u64,
    still_over: u64,
    still_over_reasons: BTreeMap<String, u64>,
    summaries: u64,
    // Runs.
    usage_rows: u64,
    run_tokens: Dist,
    run_cost: Dist,
    run_calls: Dist,
    run_secs: Dist,
    // Rollouts.
    reward: Dist,
    rollouts: u64,
    groups: HashMap<String, (u64, u64)>,
}

impl Overview {
    pub fn new(budget: Option<u64>) -> Overview {
        Overview {
            budget,
            ..Overview::default()
        }
    }

    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// A line that is none of a row, a reject, a failure or a tombstone, at `at`.
    pub fn add_bad(&mut self, at: &str, why: &str) {
        self.first_bad.get_or_insert_with(|| format!("{at}: {why}"));
    }

    pub fn add_row(&mut self, at: &str, f: &Facts) {
        self.rows += 1;
        *self.status.entry(f.status()).or_default() += 1;
        if let Some(s) = &f.stop_reason {
            *self.stop_reasons.entry(s.clone()).or_default() += 1;
        }
        if let Some(e) = &f.unreadable {
            self.unreadable += 1;
            self.first_unreadable
                .get_or_insert_with(|| format!("{at}: {e}"));
        }
        self.tokens.push(dist::int(f.tokens));
        self.turns.push(dist::int(f.turns));
        self.calls.push(dist::int(f.calls));
        if let Some(p) = f.reasoning_pct() {
            self.reasoning_pct.push(p);
        }
        self.assistant_turns += f.assistant_turns;
        self.reasoning_turns += f.reasoning_turns;
        self.rows_with_reasoning += u64::from(f.reasoning_turns > 0);
        for (name, (calls, failed, succeeded)) in &f.tools {
            let t = self.tools.entry(name.clone()).or_default();
            t.calls += calls;
            t.failed += failed;
            t.succeeded += succeeded;
            t.rows += 1;
        }
        if let Some(c) = &f.compression {
            self.comp_rows += 1;
            self.comp_before.push(dist::int(c.before));
            self.comp_after.push(dist::int(c.after));
            self.compressed += u64::from(c.was_compressed);
            if c.still_over {
                self.still_over += 1;
                let why = c.reason.clone().unwrap_or_else(|| "no reason given".into());
                *self.still_over_reasons.entry(why).or_default() += 1;
            }
        }
        self.summaries += u64::from(f.summary_at.is_some());
        if let Some(u) = &f.usage {
            self.usage_rows += 1;
            if let Some(t) = u.tokens {
                self.run_tokens.push(dist::int(t));
            }
            if let Some(c) = u.cost {
                self.run_cost.push((c * COST_SCALE as f64).round() as i64);
            }
            if let Some(n) = u.api_calls {
                self.run_calls.push(dist::int(n));
            }
            if let Some(ms) = u.duration_ms {
                self.run_secs.push(dist::int(ms));
            }
        }
        if let Some(r) = f.reward {
            self.reward.push((r * REWARD_SCALE as f64).round() as i64);
            // A row of no task is in the mean reward, and in no group (traj-filter's
            // `--stats` reads it so).
            if let Some(key) = &f.task {
                self.rollouts += 1;
                let g = self.groups.entry(key.clone()).or_default();
                g.0 += 1;
                g.1 += u64::from(passes(r));
            }
        }
    }

    pub fn add_reject(&mut self, r: &RejectLine) {
        self.reject_lines += 1;
        for reason in &r.reasons {
            *self
                .rejects
                .entry((r.stage.clone(), reason.clone()))
                .or_default() += 1;
        }
    }

    pub fn add_discarded(&mut self, why: &str) {
        *self.discarded.entry(why.to_string()).or_default() += 1;
    }

    pub fn add_failure(&mut self, f: &FailureLine) {
        self.failures += 1;
        *self.failure_classes.entry(f.class.clone()).or_default() += 1;
    }

    /// The overview as the page and `--summary` read it. `bad` is the lines that were
    /// none of a row, a reject or a failure (skipped under `--on-error skip`).
    pub fn to_json(&self, bad: u64, run_stats: &[Value]) -> Value {
        let tools: Vec<Value> = self
            .tools
            .iter()
            .map(|(name, t)| {
                let results = t.failed + t.succeeded;
                json!({
                    "name": name,
                    "calls": t.calls,
                    "rows": t.rows,
                    "failed": t.failed,
                    "results": results,
                    "error_rate": if results > 0 { t.failed as f64 / results as f64 } else { 0.0 },
                })
            })
            .collect();
        let rejects: Vec<Value> = self
            .rejects
            .iter()
            .map(|((stage, reason), n)| json!({"stage": stage, "reason": reason, "count": n}))
            .collect();
        let over_budget = self.budget.map(|b| self.tokens.count_above(dist::int(b)));
        json!({
            "rows": self.rows,
            "bad_lines": bad,
            "status": self.status,
            "stop_reasons": self.stop_reasons,
            "unreadable": self.unreadable,
            "first_unreadable": self.first_unreadable,
            "first_bad": self.first_bad,
            "failures": self.failures,
            "failure_classes": self.failure_classes,
            "reject_lines": self.reject_lines,
            "discarded": self.discarded,
            "rejects": rejects,
            "budget": self.budget,
            "over_budget": over_budget,
            "tokens": self.tokens.to_json(1),
            "turns": self.turns.to_json(1),
            "tool_calls": self.calls.to_json(1),
            "reasoning_pct": self.reasoning_pct.to_json(1),
            "reasoning": {
                "assistant_turns": self.assistant_turns,
                "with_reasoning": self.reasoning_turns,
                "rows_with_reasoning": self.rows_with_reasoning,
            },
            "tools": tools,
            "compression": {
                "rows": self.comp_rows,
                "before": self.comp_before.to_json(1),
                "after": self.comp_after.to_json(1),
                "compressed": self.compressed,
                "still_over": self.still_over,
                "still_over_reasons": self.still_over_reasons,
                "with_summary": self.summaries,
            },
            "run": {
                "rows": self.usage_rows,
                "tokens": self.run_tokens.to_json(1),
                "cost": self.run_cost.to_json(COST_SCALE),
                "api_calls": self.run_calls.to_json(1),
                "duration_ms": self.run_secs.to_json(1),
                "statistics": run_stats,
            },
            "rollouts": {
                "rows": self.reward.len(),
                "reward": self.reward.to_json(REWARD_SCALE),
                "grouped": self.rollouts,
                "prompts": self.groups.len(),
                "pass_at_k": pass_at_k(self.groups.values().copied()),
            },
        })
    }
}

/// A rollout passes at the threshold traj-run's `statistics.json` and traj-filter's
/// `--stats` use ([`crate::format::groups::PASS_THRESHOLD`]), so that one page never
/// shows two pass@1 figures for the same rollouts.
pub fn passes(reward: f64) -> bool {
    reward >= crate::format::groups::PASS_THRESHOLD
}

/// pass@k for k = 1, 2, 4, ... and the largest group's size: the mean over the prompts
/// with at least k rollouts of the unbiased estimator `1 - C(n-c, k) / C(n, k)` (n
/// rollouts, c passing; Chen et al. 2021), as `statistics.json`'s `pass_at_k[k-1]`
/// ([`crate::format::groups::RunGroupStats`]) gives it.
pub fn pass_at_k(groups: impl Iterator<Item = (u64, u64)> + Clone) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let Some(max_n) = groups.clone().map(|(n, _)| n).max() else {
        return out;
    };
    let mut ks: Vec<u64> = std::iter::successors(Some(1u64), |k| k.checked_mul(2))
        .take_while(|k| *k <= max_n)
        .collect();
    if ks.last() != Some(&max_n) {
        ks.push(max_n);
    }
    for k in ks {
        let (sum, count) =
            groups
                .clone()
                .filter(|(n, _)| *n >= k)
                .fold((0.0, 0u64), |(s, m), (n, c)| {
                    let p = crate::format::groups::pass_at_k(n as usize, c as usize, k as usize);
                    (s + p, m + 1)
                });
        out.insert(k.to_string(), sum / count as f64);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_at_k_is_the_unbiased_estimator() {
        // One prompt, 4 rollouts, 1 passes: pass@1 = 1/4, pass@2 = 1 - C(3,2)/C(4,2) = 1/2,
        // pass@4 = 1.
        let p = pass_at_k([(4u64, 1u64)].into_iter());
        assert_eq!(p["1"], 0.25);
        assert!((p["2"] - 0.5).abs() < 1e-12);
        assert_eq!(p["4"], 1.0);
        // Two prompts: mean.
        let p = pass_at_k([(2u64, 0u64), (2, 2)].into_iter());
        assert_eq!(p["1"], 0.5);
        assert_eq!(p["2"], 0.5);
        assert!(pass_at_k(std::iter::empty()).is_empty());
        // Three rollouts: pass@3 too; a prompt with fewer rollouts than k is left out of
        // pass@k, as statistics.json does.
        let p = pass_at_k([(3u64, 1u64), (1, 1)].into_iter());
        assert_eq!(p.keys().collect::<Vec<_>>(), ["1", "2", "3"]);
        assert!((p["1"] - (1.0 / 3.0 + 1.0) / 2.0).abs() < 1e-12);
        assert_eq!(p["3"], 1.0);
        assert!(passes(1.0) && !passes(0.5));
    }
}

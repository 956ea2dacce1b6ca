//! Groups of rollouts: the task a rollout belongs to, and the figures of a group's
//! rewards (mean, variance, pass@k, whether the group has a signal for RL).
//!
//! A rollout's task is its `task_uid` without the last (`:ROLLOUT`) part, so the K
//! rollouts of one task row (`ROW:COPY:0` .. `ROW:COPY:K-1`) form one group; a row
//! without a `task_uid` is grouped by its `prompt_index`. A rollout passes when its
//! reward is at least the pass threshold (1 by default: a verifier's 0/1 reward passes
//! at 1). pass@k is the unbiased estimator of Chen et al. (2021), `1 - C(n-c, k) / C(n, k)`
//! for `n` rollouts of which `c` pass, computed as a product so that it never overflows.
//! `traj-run`'s `statistics.json` and `traj-filter --stats` both read these figures from
//! here, so the two never disagree.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

/// Why a row is no member of any group (a reject reason: `no-task: ...`).
pub const NO_TASK: &str =
    "no-task: no `task_uid` or `prompt_index`: the row is no rollout of a task";

/// The default pass threshold: a rollout with reward >= 1 passes.
pub const PASS_THRESHOLD: f64 = 1.0;

/// The group key of a row: its task (`task_uid` without its rollout part), else
/// `prompt_index:N`, else `None` (the row belongs to no group).
pub fn task_of(row: &Map<String, Value>) -> Option<String> {
    let index = match row.get("prompt_index") {
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    task_key(
        row.get("task_uid").and_then(Value::as_str),
        index.as_deref(),
    )
}

/// The one rule behind [`task_of`], from the row's `task_uid` string and the text of
/// its `prompt_index` number (what a reader that keeps raw JSON text has). A whole
/// number is one task however it is spelled (`2`, `2.0`, `2e0`: [`whole_text`]), as
/// traj-merge keys it.
pub fn task_key(task_uid: Option<&str>, prompt_index: Option<&str>) -> Option<String> {
    if let Some(uid) = task_uid.filter(|u| !u.is_empty()) {
        return Some(task_of_uid(uid).to_string());
    }
    prompt_index.map(|n| format!("prompt_index:{}", whole_text(n).as_deref().unwrap_or(n)))
}

/// The exact value of a JSON number that is a whole number, in decimal digits (`-` in
/// front when negative; `0` for any zero), read from its text and never through a
/// float, so that two numbers are one key only when they are one value
/// (`9007199254740993.0` is not `9007199254740992`, `3.0000000000000001` is no whole
/// number). A value of more than [`MAX_DIGITS`] digits is written `DIGITSeEXP` instead.
/// `None` when the text is not a whole number.
pub fn whole_text(raw: &str) -> Option<String> {
    const MAX_DIGITS: i64 = 4096;
    // The common spelling, a plain integer, without the digit work below.
    if let Ok(i) = raw.parse::<i64>() {
        return Some(i.to_string());
    }
    let (neg, t) = match raw.strip_prefix('-') {
        Some(t) => (true, t),
        None => (false, raw),
    };
    let (mantissa, exp) = match t.find(['e', 'E']) {
        Some(i) => (&t[..i], t[i + 1..].parse::<i64>().ok()?),
        None => (t, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    // value = digits x 10^exp, the digits without leading or trailing zeros.
    let all = format!("{int}{frac}");
    let digits = all.trim_start_matches('0');
    let trimmed = digits.trim_end_matches('0');
    if trimmed.is_empty() {
        return Some("0".into());
    }
    let exp = exp
        .checked_sub(frac.len() as i64)?
        .checked_add((digits.len() - trimmed.len()) as i64)?;
    if exp < 0 {
        return None;
    }
    let sign = if neg { "-" } else { "" };
    Some(if trimmed.len() as i64 + exp > MAX_DIGITS {
        format!("{sign}{trimmed}e{exp}")
    } else {
        format!("{sign}{trimmed}{}", "0".repeat(exp as usize))
    })
}

/// A row's task ([`task_key`]) and reward ([`reward_of_raw`]), read from its borrowed
/// view (traj-filter's predicates have it already).
pub fn task_and_reward(row: &crate::format::row::RowView<'_>) -> (Option<String>, Option<f64>) {
    of_raw(row.task_uid(), row.prompt_index(), row.reward())
}

/// [`task_and_reward`] of a line, read by one pass of the JSON scanner over its top-level
/// members (no message list parsed: `--stats`, the gathering of traj-normalize); the
/// members a `--columns core` row keeps in its `metadata` string are read from there
/// when the row has none of its own. `None`: the line is no JSON object.
pub fn task_and_reward_of_line(line: &[u8]) -> Option<(Option<String>, Option<f64>)> {
    let [uid, index, reward, meta] = run_members(line)?;
    if (uid.is_none() || index.is_none() || reward.is_none())
        && let Some(meta) = meta.and_then(crate::format::jsonscan::decode_str)
        && let Some([m_uid, m_index, m_reward, _]) = run_members(meta.as_bytes())
    {
        // Member by member, as the row view's accessors read them.
        return Some(of_raw(
            uid.or(m_uid),
            index.or(m_index),
            reward.or(m_reward),
        ));
    }
    Some(of_raw(uid, index, reward))
}

/// The raw texts of `task_uid`, `prompt_index`, `reward` and `metadata` of the JSON
/// object `line`.
fn run_members(line: &[u8]) -> Option<[Option<&str>; 4]> {
    let text = std::str::from_utf8(line).ok()?;
    let mut m = [None; 4];
    crate::format::row::object_members(line, 0, |key, vs, ve| {
        let k = match &*crate::format::jsonscan::key_text(key) {
            b"task_uid" => 0,
            b"prompt_index" => 1,
            b"reward" => 2,
            b"metadata" => 3,
            _ => return,
        };
        m[k] = Some(&text[vs..ve]);
    })
    .ok()?;
    Some(m)
}

/// The one reading of the three members' raw JSON texts.
fn of_raw(
    uid: Option<&str>,
    index: Option<&str>,
    reward: Option<&str>,
) -> (Option<String>, Option<f64>) {
    let uid = uid
        .filter(|u| u.starts_with('"'))
        .and_then(crate::format::row::decode_str);
    let index = index.filter(|n| n.bytes().next().is_some_and(|b| b.is_ascii_digit()));
    (
        task_key(uid.as_deref(), index),
        reward.and_then(reward_of_raw),
    )
}

/// `ROW:COPY:ROLLOUT` -> `ROW:COPY` (traj-run's form: three parts, the last two whole
/// numbers); any other uid (`math:train:17`, `a:b:c:d`, `gsm8k:1`) is its own task.
pub fn task_of_uid(uid: &str) -> &str {
    let number = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match uid.rsplit_once(':') {
        Some((task, rollout)) if number(rollout) => match task.split_once(':') {
            Some((row, copy)) if !row.is_empty() && number(copy) => task,
            _ => uid,
        },
        _ => uid,
    }
}

/// A row's reward: the number in its `reward` field, if it has one.
pub fn reward_of(row: &Map<String, Value>) -> Option<f64> {
    row.get("reward")
        .and_then(Value::as_f64)
        .filter(|r| r.is_finite())
}

/// [`reward_of`] for the raw JSON text of a `reward` value.
pub fn reward_of_raw(raw: &str) -> Option<f64> {
    match raw.as_bytes().first() {
        Some(b'-' | b'0'..=b'9') => raw.parse::<f64>().ok().filter(|r| r.is_finite()),
        _ => None,
    }
}

/// pass@k for `n` rollouts of which `c` pass: the probability that at least one of `k`
/// rollouts drawn without replacement passes. `k` must be in `1..=n`.
pub fn pass_at_k(n: usize, c: usize, k: usize) -> f64 {
    assert!(
        k >= 1 && k <= n && c <= n,
        "pass@k needs 1 <= k <= n and c <= n"
    );
    if n - c < k {
        return 1.0;
    }
    // C(n-c, k) / C(n, k) = prod_{i = n-c+1}^{n} (1 - k / i)
    let fail: f64 = ((n - c + 1)..=n)
        .map(|i| 1.0 - k as f64 / i as f64)
        .product();
    1.0 - fail
}

/// The figures of one group's rewards.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupStats {
    /// Rollouts with a reward.
    pub n: usize,
    /// Rollouts whose reward is at least the threshold.
    pub passed: usize,
    pub reward_mean: f64,
    /// The population variance of the rewards (0 for one rollout).
    pub reward_variance: f64,
    pub reward_min: f64,
    pub reward_max: f64,
    /// `pass_at_k[k-1]` is pass@k, for every k in 1..=n.
    pub pass_at_k: Vec<f64>,
    /// The rewards are not all equal: the group gives GRPO a gradient.
    pub has_signal: bool,
}

impl GroupStats {
    /// The figures of `rewards` (empty: `None`).
    pub fn of(rewards: &[f64], threshold: f64) -> Option<GroupStats> {
        let n = rewards.len();
        if n == 0 {
            return None;
        }
        let (mean, variance) = mean_and_variance(rewards);
        let min = rewards.iter().copied().fold(f64::INFINITY, f64::min);
        let max = rewards.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let passed = rewards.iter().filter(|&&r| r >= threshold).count();
        Some(GroupStats {
            n,
            passed,
            reward_mean: mean,
            reward_variance: variance,
            reward_min: min,
            reward_max: max,
            pass_at_k: (1..=n).map(|k| pass_at_k(n, passed, k)).collect(),
            has_signal: max > min,
        })
    }
}

/// The mean and the population variance of `rewards` (both 0 for none).
fn mean_and_variance(rewards: &[f64]) -> (f64, f64) {
    if rewards.is_empty() {
        return (0.0, 0.0);
    }
    let n = rewards.len() as f64;
    let mean = rewards.iter().sum::<f64>() / n;
    let variance = rewards.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / n;
    (mean, variance)
}

/// The figures over many groups: the mean of each group's pass@k (over the groups with
/// at least k rollouts), the rewards' mean and variance over every rollout, and the share
/// of groups with a signal.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunGroupStats {
    pub groups: usize,
    pub rollouts: usize,
    pub reward_mean: f64,
    pub reward_variance: f64,
    /// `pass_at_k[k-1]`: the mean pass@k over the groups with at least k rollouts.
    pub pass_at_k: Vec<f64>,
    pub groups_with_signal: usize,
    pub share_with_signal: f64,
}

impl RunGroupStats {
    /// The figures over `groups` (each a group's rewards); groups without rewards are
    /// left out.
    pub fn of<'a>(groups: impl IntoIterator<Item = &'a [f64]>, threshold: f64) -> RunGroupStats {
        let mut n_groups = 0;
        let mut all: Vec<f64> = Vec::new();
        let mut sums: Vec<(f64, usize)> = Vec::new();
        let mut signal = 0;
        for rewards in groups {
            let Some(g) = GroupStats::of(rewards, threshold) else {
                continue;
            };
            n_groups += 1;
            all.extend_from_slice(rewards);
            signal += usize::from(g.has_signal);
            if sums.len() < g.n {
                sums.resize(g.n, (0.0, 0));
            }
            for (k, p) in g.pass_at_k.iter().enumerate() {
                sums[k].0 += p;
                sums[k].1 += 1;
            }
        }
        // The mean and variance of every reward (not a GroupStats of them all: its
        // pass@k for every k up to the number of rollouts is quadratic in it).
        let (mean, variance) = mean_and_variance(&all);
        RunGroupStats {
            groups: n_groups,
            rollouts: all.len(),
            reward_mean: mean,
            reward_variance: variance,
            pass_at_k: sums.iter().map(|(s, c)| s / *c as f64).collect(),
            groups_with_signal: signal,
            share_with_signal: if n_groups == 0 {
                0.0
            } else {
                signal as f64 / n_groups as f64
            },
        }
    }
}

/// The reward figures of many rollouts, over the run and per task: `rewards` of
/// traj-run's `statistics.json` and of `traj-filter --stats`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RewardStatistics {
    /// A rollout passes at a reward of at least this.
    pub pass_threshold: f64,
    pub run: RunGroupStats,
    /// Per task (`task_uid` without its rollout part), sorted by task.
    pub per_task: BTreeMap<String, GroupStats>,
}

impl RewardStatistics {
    /// The figures of the rewards of each task (`None` when there is none). Each
    /// task's rewards are sorted first, so the figures do not depend on the order the
    /// rollouts were read in.
    pub fn of(
        by_task: &mut BTreeMap<String, Vec<f64>>,
        threshold: f64,
    ) -> Option<RewardStatistics> {
        by_task.retain(|_, r| !r.is_empty());
        if by_task.is_empty() {
            return None;
        }
        for r in by_task.values_mut() {
            r.sort_by(f64::total_cmp);
        }
        Some(RewardStatistics {
            pass_threshold: threshold,
            run: RunGroupStats::of(by_task.values().map(Vec::as_slice), threshold),
            per_task: by_task
                .iter()
                .filter_map(|(k, r)| Some((k.clone(), GroupStats::of(r, threshold)?)))
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// pass@k by counting every k-subset: the definition the product must equal.
    fn by_subsets(n: usize, c: usize, k: usize) -> f64 {
        fn choose(n: usize, k: usize) -> f64 {
            (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
        }
        if n - c < k {
            1.0
        } else {
            1.0 - choose(n - c, k) / choose(n, k)
        }
    }

    #[test]
    fn pass_at_k_is_the_unbiased_estimator() {
        for n in 1..=12 {
            for c in 0..=n {
                for k in 1..=n {
                    let (a, b) = (pass_at_k(n, c, k), by_subsets(n, c, k));
                    assert!((a - b).abs() < 1e-12, "n={n} c={c} k={k}: {a} vs {b}");
                }
            }
        }
        assert_eq!(pass_at_k(4, 1, 1), 0.25);
        assert_eq!(pass_at_k(4, 0, 4), 0.0);
        assert_eq!(pass_at_k(4, 1, 4), 1.0);
    }

    #[test]
    fn a_group_of_equal_rewards_has_no_signal() {
        let g = GroupStats::of(&[1.0, 1.0, 1.0], PASS_THRESHOLD).unwrap();
        assert!(!g.has_signal);
        assert_eq!(g.pass_at_k, vec![1.0, 1.0, 1.0]);
        let g = GroupStats::of(&[0.0, 1.0, 0.0, 0.0], PASS_THRESHOLD).unwrap();
        assert!(g.has_signal);
        assert_eq!((g.n, g.passed, g.reward_mean), (4, 1, 0.25));
        assert!((g.reward_variance - 0.1875).abs() < 1e-12);
        assert!(GroupStats::of(&[], PASS_THRESHOLD).is_none());
    }

    #[test]
    fn run_figures_average_pass_at_k_over_groups_that_reach_k() {
        let a = [1.0, 0.0];
        let b = [0.0, 0.0, 0.0, 1.0];
        let r = RunGroupStats::of([&a[..], &b[..]], PASS_THRESHOLD);
        assert_eq!((r.groups, r.rollouts, r.groups_with_signal), (2, 6, 2));
        assert_eq!(r.pass_at_k.len(), 4);
        assert!((r.pass_at_k[0] - (0.5 + 0.25) / 2.0).abs() < 1e-12);
        assert_eq!(r.pass_at_k[3], 1.0);
    }

    #[test]
    fn the_task_is_the_uid_without_its_rollout() {
        let row = |v: Value| v.as_object().unwrap().clone();
        assert_eq!(
            task_of(&row(json!({"task_uid": "ab12:0:3"}))).unwrap(),
            "ab12:0"
        );
        assert_eq!(
            task_of(&row(json!({"prompt_index": 7}))).unwrap(),
            "prompt_index:7"
        );
        assert_eq!(task_of(&row(json!({"id": 1}))), None);
        assert_eq!(task_of_uid("plain"), "plain");
        // Only traj-run's own form loses its rollout part.
        for own in ["ab12:0:3", "t:10:22"] {
            assert_eq!(task_of_uid(own), &own[..own.rfind(':').unwrap()]);
        }
        for foreign in [
            "math:train:17",
            "a:b:c:d",
            "hf/ds:split:7",
            "x:1",
            ":0:1",
            "a:0:",
            "1:2:3:4",
        ] {
            assert_eq!(task_of_uid(foreign), foreign);
        }
        // An empty uid names no task: the prompt_index does.
        assert_eq!(task_key(Some(""), Some("3")).unwrap(), "prompt_index:3");
        assert_eq!(task_key(Some(""), None), None);
        assert_eq!(reward_of(&row(json!({"reward": 0.5}))), Some(0.5));
        assert_eq!(reward_of(&row(json!({"reward": "1"}))), None);
        for raw in ["0.5", "-1", "1e3", "0"] {
            let v: Value = serde_json::from_str(raw).unwrap();
            assert_eq!(reward_of_raw(raw), reward_of(&row(json!({ "reward": v }))));
        }
        assert_eq!(reward_of_raw("\"1\""), None);
        assert_eq!(reward_of_raw("true"), None);
        assert_eq!(task_key(None, Some("7")).unwrap(), "prompt_index:7");
        // The line scanner and the row view read the same.
        for line in [
            r#"{"task_uid": "ab:0:3", "reward": 0.5, "messages": []}"#,
            r#"{"prompt_index": 7, "reward": "1", "conversations": []}"#,
            r#"{"task_uid": 3, "messages": []}"#,
            // `--columns core`: the run members inside `metadata`, member by member.
            r#"{"conversations": [], "metadata": "{\"prompt_index\": 2.0, \"reward\": 1}"}"#,
            r#"{"prompt_index": 4, "conversations": [], "metadata": "{\"task_uid\": \"t:0:1\"}"}"#,
            r#"{"reward": 0, "conversations": [], "metadata": "{\"reward\": 1, \"\\u0074ask_uid\": \"u:1:0\"}"}"#,
        ] {
            let row = crate::format::row::parse_row(line.as_bytes()).unwrap();
            assert_eq!(
                task_and_reward_of_line(line.as_bytes()).unwrap(),
                task_and_reward(&row)
            );
        }
    }
}

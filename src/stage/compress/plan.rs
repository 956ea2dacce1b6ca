//! Which turns of a trajectory to summarise: protected turns, boundary snapping, the
//! greedy region and the net-savings guard (reference §3.1–3.2).
//!
//! Pure functions over roles and per-turn token counts, so the pinned cases of the
//! reference's test suite run on them directly.

/// The role of a turn, as compression sees it (ShareGPT `from` or OpenAI `role`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    System,
    Human,
    Gpt,
    Tool,
    Other,
}

impl Role {
    /// ShareGPT `from` values and OpenAI `role` values.
    pub fn parse(s: &str) -> Role {
        match s {
            "system" | "developer" => Role::System,
            "human" | "user" => Role::Human,
            "gpt" | "assistant" => Role::Gpt,
            "tool" | "function" | "observation" | "ipython" => Role::Tool,
            _ => Role::Other,
        }
    }
}

/// What [`plan`] needs to know.
#[derive(Debug, Clone)]
pub struct PlanConfig {
    pub target_max_tokens: usize,
    pub summary_target_tokens: usize,
    pub protect_first_system: bool,
    pub protect_first_human: bool,
    pub protect_first_gpt: bool,
    pub protect_first_tool: bool,
    pub protect_last_n: usize,
    /// Reproduce the reference's `n // 2` head/tail split.
    pub compat_midpoint: bool,
}

impl Default for PlanConfig {
    fn default() -> Self {
        PlanConfig {
            target_max_tokens: 15250,
            summary_target_tokens: 750,
            protect_first_system: true,
            protect_first_human: true,
            protect_first_gpt: true,
            protect_first_tool: true,
            protect_last_n: 4,
            compat_midpoint: false,
        }
    }
}

/// Why an over-budget trajectory was left as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Every turn is protected, or the region collapsed after snapping.
    NoRegion,
    /// The region holds no more tokens than the summary would.
    NoNetSavings,
}

impl Keep {
    pub fn as_str(self) -> &'static str {
        match self {
            Keep::NoRegion => "no_compressible_region",
            Keep::NoNetSavings => "no_net_savings",
        }
    }
}

/// The outcome of planning one trajectory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// `total <= target`: nothing to do.
    UnderTarget,
    /// Over target but left unchanged.
    Keep(Keep),
    /// Replace turns `start..until` with one summary.
    Compress { start: usize, until: usize },
}

/// The protected indices, sorted: the first turn of each protected role and the last N.
pub fn protected_indices(roles: &[Role], cfg: &PlanConfig) -> Vec<usize> {
    let mut out = first_of_roles(roles, cfg);
    let n = roles.len();
    out.extend(n.saturating_sub(cfg.protect_last_n)..n);
    out.sort_unstable();
    out.dedup();
    out
}

fn first_of_roles(roles: &[Role], cfg: &PlanConfig) -> Vec<usize> {
    let mut out = Vec::new();
    for (role, on) in [
        (Role::System, cfg.protect_first_system),
        (Role::Human, cfg.protect_first_human),
        (Role::Gpt, cfg.protect_first_gpt),
        (Role::Tool, cfg.protect_first_tool),
    ] {
        if on && let Some(i) = roles.iter().position(|r| *r == role) {
            out.push(i);
        }
    }
    out
}

/// The compressible region `[start, end)` before snapping.
///
/// Default (by role): the head is the first turn of each protected role, so the region
/// starts after the last of them; the tail is the last N turns. `compat_midpoint`: the
/// reference's split, where protected indices below `n / 2` are head and the others
/// tail (its open bugs #7248 and #50411: the region inverts on short trajectories and
/// a late first tool turn cuts it short).
pub fn region(roles: &[Role], cfg: &PlanConfig) -> (usize, usize) {
    let n = roles.len();
    if cfg.compat_midpoint {
        let protected = protected_indices(roles, cfg);
        let mid = n / 2;
        let start = protected
            .iter()
            .filter(|&&i| i < mid)
            .max()
            .map_or(0, |i| i + 1);
        let end = protected.iter().copied().find(|&i| i >= mid).unwrap_or(n);
        (start, end)
    } else {
        let start = first_of_roles(roles, cfg)
            .into_iter()
            .max()
            .map_or(0, |i| i + 1);
        let end = n.saturating_sub(cfg.protect_last_n);
        (start, end)
    }
}

/// Move a region boundary off a tool turn so that no tool response is separated from
/// the call before it: forward first (up to `max`), else backward (down to `min`).
pub fn snap(roles: &[Role], idx: usize, min: usize, max: usize) -> usize {
    let clean = |i: usize| i >= roles.len() || roles[i] != Role::Tool;
    let mut pos = idx;
    while pos < max && !clean(pos) {
        pos += 1;
    }
    if clean(pos) {
        return pos;
    }
    let mut pos = idx;
    while pos > min && !clean(pos) {
        pos -= 1;
    }
    pos
}

/// Plan one trajectory from its roles and per-turn token counts.
pub fn plan(roles: &[Role], tokens: &[usize], cfg: &PlanConfig) -> Plan {
    debug_assert_eq!(roles.len(), tokens.len());
    let total: usize = tokens.iter().sum();
    if total <= cfg.target_max_tokens {
        return Plan::UnderTarget;
    }
    let (start, end) = region(roles, cfg);
    if start >= end {
        return Plan::Keep(Keep::NoRegion);
    }
    let start = snap(roles, start, start, end);
    if start >= end {
        return Plan::Keep(Keep::NoRegion);
    }
    let need = total - cfg.target_max_tokens + cfg.summary_target_tokens;
    let mut acc = 0;
    let mut until = end;
    for (i, t) in tokens.iter().enumerate().take(end).skip(start) {
        acc += t;
        if acc >= need {
            until = i + 1;
            break;
        }
    }
    let until = snap(roles, until, start, end);
    if until <= start {
        return Plan::Keep(Keep::NoRegion);
    }
    if tokens[start..until].iter().sum::<usize>() <= cfg.summary_target_tokens {
        return Plan::Keep(Keep::NoNetSavings);
    }
    Plan::Compress { start, until }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Role::*;

    fn roles(s: &str) -> Vec<Role> {
        s.split_whitespace()
            .map(|r| match r {
                "s" => System,
                "h" => Human,
                "g" => Gpt,
                "t" => Tool,
                _ => Other,
            })
            .collect()
    }

    // Reference §9.4: protected indices.
    #[test]
    fn protected_canonical_layout() {
        let r = roles("s h g t g t g t g h");
        let cfg = PlanConfig::default();
        assert_eq!(protected_indices(&r, &cfg), vec![0, 1, 2, 3, 6, 7, 8, 9]);
        for compat in [false, true] {
            let cfg = PlanConfig {
                compat_midpoint: compat,
                ..PlanConfig::default()
            };
            assert_eq!(region(&r, &cfg), (4, 6));
        }
    }

    #[test]
    fn protected_too_few_turns() {
        let r = roles("s h g");
        let cfg = PlanConfig::default();
        assert_eq!(protected_indices(&r, &cfg), vec![0, 1, 2]);
        for compat in [false, true] {
            let cfg = PlanConfig {
                compat_midpoint: compat,
                ..PlanConfig::default()
            };
            let (s, e) = region(&r, &cfg);
            assert!(s >= e);
            assert_eq!(
                plan(&r, &[9000, 9000, 9000], &cfg),
                Plan::Keep(Keep::NoRegion)
            );
        }
    }

    #[test]
    fn protected_last_n_zero() {
        let r = roles("s h g t g t g t");
        let cfg = PlanConfig {
            protect_last_n: 0,
            ..PlanConfig::default()
        };
        let p = protected_indices(&r, &cfg);
        assert_eq!(p, vec![0, 1, 2, 3]);
        assert!(!p.contains(&7));
    }

    #[test]
    fn protected_no_system() {
        let r = roles("h g t g h");
        assert!(protected_indices(&r, &PlanConfig::default()).contains(&0));
        let r = roles("s h g t g h");
        let cfg = PlanConfig {
            protect_first_system: false,
            ..PlanConfig::default()
        };
        assert!(!protected_indices(&r, &cfg).contains(&0));
    }

    #[test]
    fn late_first_tool_differs_from_midpoint() {
        // First tool at index 6 >= n/2: the reference treats it as tail (#50411).
        let r = roles("s h g g g g t g t g");
        let mut cfg = PlanConfig {
            protect_last_n: 2,
            compat_midpoint: true,
            ..PlanConfig::default()
        };
        assert_eq!(region(&r, &cfg), (3, 6));
        cfg.compat_midpoint = false;
        assert_eq!(region(&r, &cfg), (7, 8));
    }

    #[test]
    fn short_trajectory_midpoint_inverts() {
        // n = 6 with last 4: midpoint 3; the reference's head {0,1,2} and tail from 2.
        let r = roles("s h g t g h");
        let cfg = PlanConfig {
            compat_midpoint: true,
            ..PlanConfig::default()
        };
        let (s, e) = region(&r, &cfg);
        assert!(s >= e);
    }

    // Reference §3.2 / §9.9: snapping.
    #[test]
    fn snap_cases() {
        let r = roles("s h g t g t g t g h");
        assert_eq!(snap(&r, 5, 4, 8), 6);
        assert_eq!(snap(&r, 4, 4, 8), 4);
        let r = roles("g t");
        assert_eq!(snap(&r, 1, 0, 1), 0);
    }

    // Reference §3.5: the tool-pair worked example.
    #[test]
    fn tool_pair_worked_example() {
        let r = roles("s h g t g t g t g h");
        let tokens = [18, 20, 12, 12, 400, 12, 12, 12, 6, 1];
        let total: usize = tokens.iter().sum();
        let cfg = PlanConfig {
            protect_last_n: 2,
            summary_target_tokens: 4,
            target_max_tokens: total + 4 - 400,
            ..PlanConfig::default()
        };
        assert_eq!(protected_indices(&r, &cfg), vec![0, 1, 2, 3, 8, 9]);
        assert_eq!(
            plan(&r, &tokens, &cfg),
            Plan::Compress { start: 4, until: 6 }
        );
        let cfg = PlanConfig {
            compat_midpoint: true,
            ..cfg
        };
        assert_eq!(
            plan(&r, &tokens, &cfg),
            Plan::Compress { start: 4, until: 6 }
        );
    }

    // Reference §9.10: net-savings guard.
    #[test]
    fn net_savings_guard() {
        let r = roles("s h g t g t g t");
        let tokens = [200, 200, 1, 1, 1, 1, 1, 1];
        let cfg = PlanConfig {
            protect_last_n: 2,
            summary_target_tokens: 20,
            target_max_tokens: 100,
            ..PlanConfig::default()
        };
        assert_eq!(plan(&r, &tokens, &cfg), Plan::Keep(Keep::NoNetSavings));
    }

    #[test]
    fn under_target_includes_equality() {
        let r = roles("s h g");
        let cfg = PlanConfig {
            target_max_tokens: 30,
            ..PlanConfig::default()
        };
        assert_eq!(plan(&r, &[10, 10, 10], &cfg), Plan::UnderTarget);
        assert_eq!(plan(&[], &[], &cfg), Plan::UnderTarget);
    }

    #[test]
    fn region_of_only_tool_turns_collapses() {
        let r = roles("s h g t t t t g h");
        let cfg = PlanConfig {
            protect_last_n: 2,
            protect_first_tool: false,
            target_max_tokens: 10,
            summary_target_tokens: 1,
            ..PlanConfig::default()
        };
        // Region [3, 7) is all tool turns: the start snap falls back to 3's left side.
        let tokens = [1, 1, 1, 50, 50, 50, 50, 1, 1];
        match plan(&r, &tokens, &cfg) {
            Plan::Compress { start, until } => {
                assert!(r[start] != Tool && (until == r.len() || r[until] != Tool));
            }
            other => assert_eq!(other, Plan::Keep(Keep::NoRegion)),
        }
    }
}

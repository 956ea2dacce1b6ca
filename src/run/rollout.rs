//! Rollouts (`--rollouts K`): the sampling parameters of each request of a rollout
//! (`--temperature`, `--top-p`, the per-rollout `seed`, `--logprobs`) and the settings
//! of its verifier.
//!
//! The seed of rollout `R` of a task is `(S + 1000003 * COPY + R) mod 2^31`, where `S`
//! is the task row's own `seed` field (a non-negative integer) or else the number
//! written by the first 8 hex digits of its `task_uid` (the row's content key), and
//! `COPY` is the row's copy number (the middle part of `task_uid`). So a rollout gets
//! the same seed on every resume and rerun, and the K rollouts of a task differ.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::record::Sampling;
use super::verify::Verifier;

/// When the request carries a `seed` (`--seed-param`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum SeedParam {
    /// Only with `--rollouts` above 1.
    #[default]
    Auto,
    On,
    /// Never (for endpoints that reject the field).
    Off,
}

/// The rollout settings of a run.
#[derive(Debug, Clone, Default)]
pub struct RolloutConfig {
    /// Rollouts per task (at least 1).
    pub rollouts: u32,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub seed_param: SeedParam,
    /// Ask for `logprobs` (and `top_logprobs`).
    pub logprobs: bool,
    pub top_logprobs: Option<u32>,
    /// Ask vLLM for token ids (`return_tokens_as_token_ids`: tokens spelled `token_id:N`).
    pub token_ids: bool,
    pub verifier: Option<Verifier>,
    pub verifier_timeout: Duration,
}

impl RolloutConfig {
    /// Whether requests carry a seed.
    pub fn sends_seed(&self) -> bool {
        match self.seed_param {
            SeedParam::On => true,
            SeedParam::Off => false,
            SeedParam::Auto => self.rollouts > 1,
        }
    }

    /// What the requests of rollout `rollout` of the task `row` (uid `uid`) carry.
    pub fn sampling(&self, row: &Map<String, Value>, uid: &str, rollout: u32) -> Sampling {
        Sampling {
            temperature: self.temperature,
            top_p: self.top_p,
            seed: self.sends_seed().then(|| seed_of(row, uid, rollout)),
        }
    }

    /// The request fields of `sampling` and of `--logprobs`.
    pub fn body_fields(&self, sampling: &Sampling) -> Map<String, Value> {
        let mut m = Map::new();
        if let Some(t) = sampling.temperature {
            m.insert("temperature".into(), json!(t));
        }
        if let Some(p) = sampling.top_p {
            m.insert("top_p".into(), json!(p));
        }
        if let Some(s) = sampling.seed {
            m.insert("seed".into(), json!(s));
        }
        if self.logprobs {
            m.insert("logprobs".into(), json!(true));
            if let Some(n) = self.top_logprobs {
                m.insert("top_logprobs".into(), json!(n));
            }
            if self.token_ids {
                m.insert("return_tokens_as_token_ids".into(), json!(true));
            }
        }
        m
    }
}

/// The seed of rollout `rollout` of the task `row` (see the module's text).
pub fn seed_of(row: &Map<String, Value>, uid: &str, rollout: u32) -> u64 {
    let base = row
        .get("seed")
        .and_then(Value::as_u64)
        .unwrap_or_else(|| u64::from_str_radix(uid.get(..8).unwrap_or("0"), 16).unwrap_or(0));
    let copy: u64 = uid
        .split(':')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    base.wrapping_add(copy.wrapping_mul(1_000_003))
        .wrapping_add(u64::from(rollout))
        % (1 << 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_follow_the_row_and_the_rollout() {
        let row = json!({"prompt": "p"});
        let row = row.as_object().unwrap();
        assert_eq!(seed_of(row, "0000000a12345678:0:3", 3), 13);
        assert_eq!(seed_of(row, "0000000a12345678:2:0", 0), 10 + 2_000_006);
        let own = json!({"prompt": "p", "seed": 100});
        assert_eq!(
            seed_of(own.as_object().unwrap(), "ffffffff00000000:0:1", 1),
            101
        );
        let cfg = RolloutConfig {
            rollouts: 1,
            ..RolloutConfig::default()
        };
        assert_eq!(cfg.sampling(row, "0000000a:0:0", 0).seed, None);
        let cfg = RolloutConfig { rollouts: 4, ..cfg };
        assert_eq!(cfg.sampling(row, "0000000a:0:1", 1).seed, Some(11));
    }
}

//! The settings of one traj-run run ([`RunConfig`]), the request fields derived from
//! them, and [`ConfigError`], the ways a configuration can be refused before any work
//! starts (the binary maps them to its exit codes).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::record::{SandboxUsed, SystemPromptUsed};
use super::request::AgentConfig;
use super::tasks::TaskSource;
use crate::llm::ClientConfig;

/// When reasoning fields go back to the provider (`--send-reasoning`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SendReasoning {
    Auto,
    Yes,
    No,
}

/// A configuration refused before the run starts.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A flag value out of range, or flags that do not go together.
    #[error("{0}")]
    Invalid(String),
    #[error("--prefill-messages: cannot read {}", path.display())]
    PrefillRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: invalid JSON: {source}", path.display())]
    PrefillJson {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{}: expected a JSON array of {{role, content}} messages", path.display())]
    PrefillNotArray { path: PathBuf },
    #[error("{}: message {index}: expected {{\"role\", \"content\"}}", path.display())]
    PrefillMessage { path: PathBuf, index: usize },
    #[error("--system-prompt: cannot read {}", path.display())]
    SystemPromptRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no API key: set {0} (or OPENAI_API_KEY), or name another variable with --api-key-env")]
    NoApiKey(String),
    #[error("--toolsets: {0}")]
    Toolsets(String),
    #[error("unknown distribution {name:?} (known: {known})")]
    UnknownDistribution { name: String, known: String },
    #[error("distribution {0:?} has no toolset available here")]
    NoToolsetAvailable(String),
    #[error(
        "{} already holds a run ({records} records); use --resume to continue it, or another --run-dir",
        dir.display()
    )]
    RunExists { dir: PathBuf, records: u64 },
}

impl ConfigError {
    /// The inputs could not be listed (a directory, a `--glob`).
    pub fn inputs(e: anyhow::Error) -> ConfigError {
        ConfigError::Invalid(format!("{e:#}"))
    }
}

impl crate::error::Classify for ConfigError {
    /// A usage or configuration mistake (exit 2), rather than a file that cannot be read.
    fn is_usage(&self) -> bool {
        !matches!(
            self,
            ConfigError::PrefillRead { .. } | ConfigError::SystemPromptRead { .. }
        )
    }
}

/// Everything the engine needs to run, validated.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub agent: AgentConfig,
    pub client: ClientConfig,
    pub run_dir: PathBuf,
    /// Continue the run in `run_dir`.
    pub resume: bool,
    /// Wait for the run directory's lock instead of exiting when another process holds it.
    pub wait: bool,
    pub tasks: TaskSource,
    /// Records also go here (stdout when `None`).
    pub output: Option<PathBuf>,
    pub quiet: bool,
    pub num_workers: usize,
    pub batch_size: usize,
    /// Failed runs of a prompt allowed over all resumes.
    pub max_attempts: u32,
    pub max_rps: Option<f64>,
    pub max_cost: Option<f64>,
    /// Largest reply read, in bytes (`--max-response-mb`).
    pub max_response: u64,
    /// What a 402 (out of credits) does: stop the run, or pause it and probe.
    pub on_payment: crate::llm::OnPayment,
    pub cache: Option<PathBuf>,
    /// Toolsets of rows without a `toolsets` field.
    pub toolsets: Option<Vec<String>>,
    /// Distribution sampled for rows without a `toolsets` field.
    pub distribution: Option<String>,
    pub seed: u64,
    /// Time between progress snapshots to the run's events (`None`: none are sent;
    /// neither with `quiet`).
    pub progress_every: Option<Duration>,
    /// The system prompt in `agent`, as `statistics.json` records it.
    pub system_prompt: SystemPromptUsed,
    /// The sandbox the tools run in, as `statistics.json` records it.
    pub sandbox: SandboxUsed,
    /// Rollouts per task, their sampling and their verifier.
    pub rollout: super::rollout::RolloutConfig,
}

impl RunConfig {
    /// The config, or the first count or limit out of range.
    /// With neither toolsets nor a distribution, rows without `toolsets` draw from the
    /// `default` distribution (the reference's default), never no tools at all.
    pub fn validated(mut self) -> Result<RunConfig, ConfigError> {
        if self.toolsets.is_none() && self.distribution.is_none() {
            self.distribution = Some("default".into());
        }
        if self.num_workers == 0 || self.batch_size == 0 || self.max_attempts == 0 {
            return Err(ConfigError::Invalid(
                "--num-workers, --batch-size and --max-attempts must be at least 1".into(),
            ));
        }
        if self.rollout.rollouts == 0 {
            return Err(ConfigError::Invalid("--rollouts must be at least 1".into()));
        }
        self.tasks.rollouts = self.rollout.rollouts;
        if let Some(r) = self.max_rps.filter(|r| !(r.is_finite() && *r >= MIN_RPS)) {
            return Err(ConfigError::Invalid(format!(
                "--max-rps must be at least {MIN_RPS} (one request per 1000 s), not {r}"
            )));
        }
        if let Some(c) = self.max_cost.filter(|c| !(c.is_finite() && *c > 0.0)) {
            return Err(ConfigError::Invalid(format!(
                "--max-cost must be > 0, not {c}"
            )));
        }
        Ok(self)
    }
}

/// `mb` MiB (a flag's value) in bytes; it must be > 0.
pub fn megabytes(mb: f64, flag: &str) -> Result<u64, ConfigError> {
    if !(mb > 0.0 && mb.is_finite()) {
        return Err(ConfigError::Invalid(format!("{flag} must be > 0")));
    }
    Ok((mb * (1u64 << 20) as f64).round().max(1.0) as u64)
}

/// The request fields that depend on the endpoint: OpenRouter takes `provider`,
/// `reasoning` and `usage: {include: true}`; a strict OpenAI-compatible server may reject
/// unknown fields, so it gets `provider` and `reasoning` only when asked.
#[derive(Debug, Clone, Default)]
pub struct EndpointFields {
    pub openrouter: bool,
    pub reasoning: Option<Value>,
    pub provider: Option<Value>,
    pub extra_body: Map<String, Value>,
    /// Why flags were not sent, for the caller to tell the user.
    pub unsent: Option<String>,
}

impl EndpointFields {
    /// The fields for `base_url`; `send` (`--send-provider-fields`) sends them anywhere.
    pub fn new(
        base_url: &str,
        send: bool,
        reasoning: Option<Value>,
        provider: Option<Value>,
    ) -> EndpointFields {
        let openrouter = is_openrouter(base_url);
        let send = send || openrouter;
        let unsent = (!send && (reasoning.is_some() || provider.is_some())).then(|| {
            format!(
                "reasoning and provider flags are OpenRouter fields: not sent to {base_url} \
                 (--send-provider-fields sends them)"
            )
        });
        let mut extra_body = Map::new();
        if openrouter {
            // OpenRouter reports the cost of a call only when asked to.
            extra_body.insert("usage".into(), json!({"include": true}));
        }
        EndpointFields {
            openrouter,
            reasoning: reasoning.filter(|_| send),
            provider: provider.filter(|_| send),
            extra_body,
            unsent,
        }
    }
}

pub use crate::format::time::MAX_SECS;

/// The lowest `--max-rps`: one request per 1,000 seconds.
pub const MIN_RPS: f64 = 0.001;

/// Seconds that must be > 0 and at most [`MAX_SECS`], as a duration.
pub fn positive_secs(secs: Option<f64>, flag: &str) -> Result<Option<Duration>, ConfigError> {
    match secs {
        Some(t) if !(t > 0.0 && t <= MAX_SECS) => Err(ConfigError::Invalid(format!(
            "{flag} must be > 0 and at most {MAX_SECS} seconds (30 days), not {t}"
        ))),
        t => Ok(t.map(Duration::from_secs_f64)),
    }
}

/// A comma list, trimmed, empty items dropped.
pub fn split_list(s: Option<&str>) -> Option<Vec<String>> {
    s.map(|s| {
        s.split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect()
    })
}

/// A server on this machine (no API key needed).
pub fn is_local(url: &str) -> bool {
    let rest = url.split("://").nth(1).unwrap_or(url);
    rest.starts_with("127.") || rest.starts_with("localhost") || rest.starts_with("[::1]")
}

/// An OpenRouter endpoint (takes `provider`, `reasoning` and `usage: {include}`).
pub fn is_openrouter(url: &str) -> bool {
    url.contains("openrouter")
}

/// The API key from `env_name` or `OPENAI_API_KEY`; none needed for a local server.
pub fn api_key(env_name: &str, base_url: &str) -> Result<Option<String>, ConfigError> {
    for name in [env_name, "OPENAI_API_KEY"] {
        if let Ok(v) = std::env::var(name)
            && !v.trim().is_empty()
        {
            return Ok(Some(v.trim().to_string()));
        }
    }
    if is_local(base_url) {
        return Ok(None);
    }
    Err(ConfigError::NoApiKey(env_name.to_string()))
}

/// The request's `reasoning` object: `disabled` wins over `effort`.
pub fn reasoning_field(effort: Option<&str>, disabled: bool) -> Option<Value> {
    if disabled {
        Some(json!({"effort": "none"}))
    } else {
        effort.map(|e| json!({"enabled": true, "effort": e}))
    }
}

/// OpenRouter's `provider` routing object, when any part is given.
pub fn provider_field(
    only: Option<&str>,
    ignore: Option<&str>,
    order: Option<&str>,
    sort: Option<&str>,
) -> Option<Value> {
    let mut provider = Map::new();
    for (key, list) in [("only", only), ("ignore", ignore), ("order", order)] {
        if let Some(l) = split_list(list) {
            provider.insert(key.into(), json!(l));
        }
    }
    if let Some(s) = sort {
        provider.insert("sort".into(), json!(s));
    }
    (!provider.is_empty()).then_some(Value::Object(provider))
}

/// The `{role, content}` messages of a `--prefill-messages` file.
pub fn load_prefill(path: &Path) -> Result<Vec<Value>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::PrefillRead {
        path: path.to_path_buf(),
        source,
    })?;
    let v: Value = serde_json::from_str(&text).map_err(|source| ConfigError::PrefillJson {
        path: path.to_path_buf(),
        source,
    })?;
    let Value::Array(list) = v else {
        return Err(ConfigError::PrefillNotArray {
            path: path.to_path_buf(),
        });
    };
    for (index, m) in list.iter().enumerate() {
        if m.get("role").and_then(Value::as_str).is_none() || m.get("content").is_none() {
            return Err(ConfigError::PrefillMessage {
                path: path.to_path_buf(),
                index,
            });
        }
    }
    Ok(list)
}

/// A delay in seconds (>= 0, at most [`MAX_SECS`]), or the deprecated milliseconds flag
/// when given.
pub fn delay(secs: f64, ms: Option<u64>, flag: &str) -> Result<Duration, ConfigError> {
    let check = |secs: f64, flag: &str| {
        if (0.0..=MAX_SECS).contains(&secs) {
            Ok(Duration::from_secs_f64(secs))
        } else {
            Err(ConfigError::Invalid(format!(
                "{flag} must be >= 0 and at most {MAX_SECS} seconds (30 days), not {secs}"
            )))
        }
    };
    let secs = check(secs, flag)?;
    match ms {
        Some(ms) => check(ms as f64 / 1000.0, &format!("{flag} (in milliseconds)")),
        None => Ok(secs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Classify;

    #[test]
    fn request_fields() {
        assert_eq!(
            reasoning_field(Some("high"), true),
            Some(json!({"effort": "none"}))
        );
        assert_eq!(
            reasoning_field(Some("high"), false),
            Some(json!({"enabled": true, "effort": "high"}))
        );
        assert_eq!(reasoning_field(None, false), None);
        assert_eq!(provider_field(None, None, None, None), None);
        assert_eq!(
            provider_field(Some("a, b,"), None, None, Some("price")).unwrap(),
            json!({"only": ["a", "b"], "sort": "price"})
        );
        assert!(is_local("http://127.0.0.1:9/v1") && !is_local("https://x.ai/v1"));
        let r = Some(json!({"effort": "none"}));
        let plain = EndpointFields::new("http://127.0.0.1:9/v1", false, r.clone(), r.clone());
        assert!(plain.reasoning.is_none() && plain.provider.is_none());
        assert!(plain.extra_body.is_empty());
        assert!(
            plain
                .unsent
                .unwrap()
                .contains("not sent to http://127.0.0.1:9/v1")
        );
        let asked = EndpointFields::new("http://127.0.0.1:9/v1", true, r.clone(), None);
        assert_eq!(asked.reasoning, r);
        assert!(asked.unsent.is_none());
        let or = EndpointFields::new("https://openrouter.ai/api/v1", false, r.clone(), r.clone());
        assert!(or.openrouter && or.provider.is_some());
        assert_eq!(or.extra_body["usage"], json!({"include": true}));
    }

    #[test]
    fn prefill_errors_name_the_file_and_message() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("p.json");
        std::fs::write(
            &p,
            r#"[{"role": "user", "content": "x"}, {"role": "user"}]"#,
        )
        .unwrap();
        let e = load_prefill(&p).unwrap_err();
        assert!(e.is_usage());
        assert!(
            e.to_string()
                .ends_with("p.json: message 1: expected {\"role\", \"content\"}")
        );
        let e = load_prefill(&d.path().join("none")).unwrap_err();
        assert!(!e.is_usage());
        std::fs::write(&p, "{}").unwrap();
        assert!(matches!(
            load_prefill(&p),
            Err(ConfigError::PrefillNotArray { .. })
        ));
    }
}

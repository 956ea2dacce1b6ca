//! traj-compress's settings: the reference's YAML layout (`--config FILE`) and the
//! values it resolves to over the defaults. Flags are applied over a [`Resolved`] by the
//! command (flags win over the file, the file over the defaults).
//!
//! One difference of meaning with the flags: the YAML `summarization.max_retries` keeps
//! the reference's meaning, the number of *attempts* per summary, while
//! [`Resolved::max_retries`] (and `--max-retries`) counts the retries after the first
//! attempt; a file's `max_retries: n` therefore resolves to `n - 1` retries (0 for 0).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::Settings;
use super::summary::{Extractive, LlmConfig, LlmSummarizer, Summarizer};
use crate::format::tokens::Tokenizer;

/// A config file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Not the reference's YAML layout (a usage error).
    #[error("{}: {error}", .path.display())]
    Yaml {
        path: PathBuf,
        error: serde_norway::Error,
    },
    /// A value the file gives that no run can use (a usage error).
    #[error("{}: {what}", .path.display())]
    Invalid { path: PathBuf, what: &'static str },
    /// A time in seconds that is negative, not a number or past
    /// [`MAX_SECS`](crate::format::time::MAX_SECS) (a usage error).
    #[error("{0} must be a number of seconds >= 0 and at most {max} (30 days)", max = crate::format::time::MAX_SECS)]
    Seconds(&'static str),
}

impl crate::error::Classify for ConfigError {
    /// Always true: a config that cannot be read or used is a configuration error for
    /// the user to fix (exit 2, as an input file that cannot be opened).
    fn is_usage(&self) -> bool {
        true
    }
}

/// The config's tokenizer, or (not loadable here) the name that gave way to o200k_base.
pub type FileTokenizer = Result<Arc<dyn Tokenizer>, UnloadableTokenizer>;

/// The config's tokenizer cannot be loaded here; o200k_base is used instead.
#[derive(Debug, thiserror::Error)]
#[error("config tokenizer {0:?} is not loadable here; using o200k_base")]
pub struct UnloadableTokenizer(pub String);

/// The reference's YAML layout; every key optional.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct FileConfig {
    pub tokenizer: TokenizerSection,
    pub compression: CompressionSection,
    pub protected_turns: ProtectedSection,
    pub summarization: SummarizationSection,
    pub output: OutputSection,
    pub processing: ProcessingSection,
    pub metrics: MetricsSection,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct TokenizerSection {
    pub name: Option<String>,
    pub trust_remote_code: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct CompressionSection {
    pub target_max_tokens: Option<usize>,
    pub summary_target_tokens: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ProtectedSection {
    pub first_system: Option<bool>,
    pub first_human: Option<bool>,
    pub first_gpt: Option<bool>,
    pub first_tool: Option<bool>,
    pub last_n_turns: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct SummarizationSection {
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub api_key_env: Option<String>,
    pub temperature: Option<f64>,
    /// Attempts per summary (the reference's meaning), not retries.
    pub max_retries: Option<u32>,
    pub retry_delay: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct OutputSection {
    pub add_summary_notice: Option<bool>,
    pub summary_notice_text: Option<String>,
    pub output_suffix: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ProcessingSection {
    pub num_workers: Option<usize>,
    pub max_concurrent_requests: Option<usize>,
    pub skip_under_target: Option<bool>,
    pub save_over_limit: Option<bool>,
    pub per_trajectory_timeout: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct MetricsSection {
    pub enabled: Option<bool>,
    pub per_trajectory: Option<bool>,
    pub output_file: Option<String>,
}

/// Every setting resolved: defaults, then the YAML file, then flags.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub tokenizer: String,
    pub settings: Settings,
    pub model: String,
    pub base_url: String,
    pub api_key_env: String,
    pub temperature: f64,
    /// Retries after the first attempt of a summary (default 2: 3 attempts).
    pub max_retries: u32,
    /// First retry delay in seconds.
    pub retry_delay: f64,
    /// Time budget of one row's whole summary, retries included, in seconds.
    pub summary_timeout: f64,
    pub max_concurrent_requests: usize,
    pub output_suffix: String,
    pub metrics_enabled: bool,
    pub metrics_file: String,
}

impl Resolved {
    /// Attempts per summary: the first one and the retries.
    pub fn attempts(&self) -> u32 {
        self.max_retries.saturating_add(1)
    }

    /// Check what the flags may have set wrong (the times in seconds).
    pub fn check(&self) -> Result<(), ConfigError> {
        for (name, v) in [
            ("--retry-delay", self.retry_delay),
            ("--summary-timeout", self.summary_timeout),
        ] {
            if !(0.0..=crate::format::time::MAX_SECS).contains(&v) {
                return Err(ConfigError::Seconds(name));
            }
        }
        Ok(())
    }

    /// Load the tokenizer the config file names. One traj cannot load (a hub name such
    /// as the reference's Kimi default) gives way to `o200k_base`, which is then the
    /// resolved tokenizer; the inner error says so. A file or folder on this machine
    /// that is no usable tokenizer is the user's to fix: the outer error.
    pub fn load_file_tokenizer(
        &mut self,
    ) -> Result<FileTokenizer, crate::format::tokens::TokenizerError> {
        match crate::format::tokens::load(&self.tokenizer) {
            Ok(t) => Ok(Ok(t)),
            Err(e) if std::path::Path::new(&self.tokenizer).exists() => Err(e),
            Err(_) => {
                let name = std::mem::replace(&mut self.tokenizer, "o200k_base".into());
                Ok(Err(UnloadableTokenizer(name)))
            }
        }
    }

    /// The summarizer: the LLM one when there is an API key, else the offline
    /// extractive one. Building it touches no network.
    pub fn summarizer(&self, api_key: Option<&str>) -> Arc<dyn Summarizer> {
        match api_key {
            Some(key) => Arc::new(LlmSummarizer::new(LlmConfig {
                base_url: self.base_url.clone(),
                api_key: Some(key.to_string()),
                model: self.model.clone(),
                temperature: self.temperature,
                max_attempts: self.attempts(),
                retry_delay: Duration::from_secs_f64(self.retry_delay),
                timeout: Duration::from_secs_f64(self.summary_timeout),
            })),
            None => Arc::new(Extractive),
        }
    }
}

impl FileConfig {
    /// Read a YAML config file.
    pub fn read(path: &Path) -> Result<FileConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let c = FileConfig::from_yaml(&text).map_err(|error| ConfigError::Yaml {
            path: path.to_path_buf(),
            error,
        })?;
        // As --target-max-tokens 0 is refused: every row would be over the budget.
        if c.compression.target_max_tokens == Some(0) {
            return Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                what: "compression.target_max_tokens must be at least 1",
            });
        }
        Ok(c)
    }

    /// Parse the YAML text; an empty file means all defaults.
    pub fn from_yaml(text: &str) -> Result<FileConfig, serde_norway::Error> {
        if text.trim().is_empty() {
            return Ok(FileConfig::default());
        }
        serde_norway::from_str(text)
    }

    /// Apply the file over the defaults.
    pub fn resolve(&self) -> Resolved {
        let mut s = Settings::default();
        let c = &self.compression;
        let p = &self.protected_turns;
        let plan = &mut s.plan;
        plan.target_max_tokens = c.target_max_tokens.unwrap_or(plan.target_max_tokens);
        plan.summary_target_tokens = c
            .summary_target_tokens
            .unwrap_or(plan.summary_target_tokens);
        plan.protect_first_system = p.first_system.unwrap_or(true);
        plan.protect_first_human = p.first_human.unwrap_or(true);
        plan.protect_first_gpt = p.first_gpt.unwrap_or(true);
        plan.protect_first_tool = p.first_tool.unwrap_or(true);
        plan.protect_last_n = p.last_n_turns.unwrap_or(plan.protect_last_n);
        let o = &self.output;
        s.add_summary_notice = o.add_summary_notice.unwrap_or(true);
        if let Some(t) = &o.summary_notice_text {
            s.summary_notice_text = t.clone();
        }
        s.per_trajectory_metrics = self.metrics.per_trajectory.unwrap_or(false);
        let m = &self.summarization;
        let text = |v: &Option<String>, default: &str| v.clone().unwrap_or_else(|| default.into());
        Resolved {
            tokenizer: text(&self.tokenizer.name, "o200k_base"),
            settings: s,
            model: text(&m.model, "google/gemini-3-flash-preview"),
            base_url: text(&m.base_url, "https://openrouter.ai/api/v1"),
            api_key_env: text(&m.api_key_env, "OPENROUTER_API_KEY"),
            temperature: m.temperature.unwrap_or(0.3),
            // The file counts attempts (at least one is always made).
            max_retries: m.max_retries.map_or(2, |n| n.saturating_sub(1)),
            retry_delay: m.retry_delay.unwrap_or(2.0),
            summary_timeout: self.processing.per_trajectory_timeout.unwrap_or(300.0),
            max_concurrent_requests: self.processing.max_concurrent_requests.unwrap_or(50),
            output_suffix: text(&o.output_suffix, "_compressed"),
            metrics_enabled: self.metrics.enabled.unwrap_or(true),
            metrics_file: text(&self.metrics.output_file, "compression_metrics.json"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Classify;

    // Reference §9.1: config.
    #[test]
    fn defaults() {
        let r = FileConfig::default().resolve();
        assert_eq!(r.tokenizer, "o200k_base");
        assert_eq!(r.settings.plan.target_max_tokens, 15250);
        assert_eq!(r.settings.plan.summary_target_tokens, 750);
        assert_eq!(r.settings.plan.protect_last_n, 4);
        assert_eq!(r.max_retries, 2);
        assert_eq!(r.attempts(), 3);
        assert_eq!(r.summary_timeout, 300.0);
        assert_eq!(r.max_concurrent_requests, 50);
        assert_eq!(r.output_suffix, "_compressed");
        assert_eq!(r.metrics_file, "compression_metrics.json");
        assert!(r.metrics_enabled);
        assert!(r.settings.add_summary_notice);
    }

    #[test]
    fn full_yaml() {
        let y = r#"
tokenizer:
  name: "my/tokenizer"
  trust_remote_code: false
compression:
  target_max_tokens: 10000
  summary_target_tokens: 500
protected_turns:
  first_system: true
  first_human: false
  first_gpt: true
  first_tool: true
  last_n_turns: 6
summarization:
  model: "gpt-4"
  base_url: "https://example.invalid/v1"
  api_key_env: "MY_KEY"
  temperature: 0.5
  max_retries: 5
  retry_delay: 1
output:
  add_summary_notice: false
  summary_notice_text: "x"
  output_suffix: "_short"
processing:
  num_workers: 8
  max_concurrent_requests: 100
  skip_under_target: false
  save_over_limit: false
  per_trajectory_timeout: 12.5
metrics:
  enabled: false
  per_trajectory: false
  output_file: "my_metrics.json"
"#;
        let f = FileConfig::from_yaml(y).unwrap();
        let r = f.resolve();
        assert_eq!(r.tokenizer, "my/tokenizer");
        assert_eq!(f.tokenizer.trust_remote_code, Some(false));
        assert_eq!(r.settings.plan.target_max_tokens, 10000);
        assert_eq!(r.settings.plan.summary_target_tokens, 500);
        assert!(!r.settings.plan.protect_first_human);
        assert_eq!(r.settings.plan.protect_last_n, 6);
        assert_eq!(r.model, "gpt-4");
        assert_eq!(r.base_url, "https://example.invalid/v1");
        assert_eq!(r.api_key_env, "MY_KEY");
        assert_eq!(r.temperature, 0.5);
        // 5 attempts in the reference's words: 4 retries.
        assert_eq!(r.max_retries, 4);
        assert_eq!(r.attempts(), 5);
        assert_eq!(r.retry_delay, 1.0);
        assert_eq!(r.summary_timeout, 12.5);
        assert!(!r.settings.add_summary_notice);
        assert_eq!(r.settings.summary_notice_text, "x");
        assert_eq!(r.output_suffix, "_short");
        assert_eq!(f.processing.num_workers, Some(8));
        assert_eq!(r.max_concurrent_requests, 100);
        assert_eq!(f.processing.skip_under_target, Some(false));
        assert!(!r.metrics_enabled);
        assert!(!r.settings.per_trajectory_metrics);
        assert_eq!(r.metrics_file, "my_metrics.json");
    }

    #[test]
    fn max_retries_in_the_file_counts_attempts() {
        for (attempts, retries) in [(0, 0), (1, 0), (2, 1), (3, 2)] {
            let y = format!("summarization:\n  max_retries: {attempts}\n");
            let r = FileConfig::from_yaml(&y).unwrap().resolve();
            assert_eq!(r.max_retries, retries, "max_retries: {attempts}");
            assert_eq!(r.attempts(), attempts.max(1));
        }
    }

    #[test]
    fn partial_and_empty_yaml() {
        let r = FileConfig::from_yaml("compression:\n  target_max_tokens: 8000\n")
            .unwrap()
            .resolve();
        assert_eq!(r.settings.plan.target_max_tokens, 8000);
        assert_eq!(r.settings.plan.protect_last_n, 4);
        for y in ["{}", "", "\n"] {
            let r = FileConfig::from_yaml(y).unwrap().resolve();
            assert_eq!(r.settings.plan.target_max_tokens, 15250);
        }
        let r = FileConfig::from_yaml("summarization:\n  base_url: null\n")
            .unwrap()
            .resolve();
        assert_eq!(r.base_url, "https://openrouter.ai/api/v1");
    }

    #[test]
    fn bad_files_and_values_are_errors() {
        assert!(FileConfig::from_yaml("compression: [1, 2").is_err());
        assert!(FileConfig::from_yaml("compression:\n  target_max_tokens: many\n").is_err());
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.yaml");
        let e = FileConfig::read(&p).err().unwrap();
        assert!(e.is_usage() && matches!(e, ConfigError::Read { .. }));
        std::fs::write(&p, "compression: [1, 2").unwrap();
        let e = FileConfig::read(&p).err().unwrap();
        assert!(e.is_usage() && e.to_string().starts_with(&format!("{}: ", p.display())));
        std::fs::write(&p, "processing:\n  per_trajectory_timeout: 7\n").unwrap();
        let mut r = FileConfig::read(&p).unwrap().resolve();
        assert_eq!(r.summary_timeout, 7.0);
        assert!(r.check().is_ok());
        r.retry_delay = -1.0;
        assert!(matches!(
            r.check(),
            Err(ConfigError::Seconds("--retry-delay"))
        ));
        r.retry_delay = 0.0;
        r.summary_timeout = f64::NAN;
        assert!(matches!(
            r.check(),
            Err(ConfigError::Seconds("--summary-timeout"))
        ));
    }

    #[test]
    fn unloadable_file_tokenizer_gives_way_to_the_default() {
        let mut r = FileConfig::from_yaml("tokenizer:\n  name: moonshotai/Kimi-K2\n")
            .unwrap()
            .resolve();
        let e = r.load_file_tokenizer().unwrap().err().unwrap();
        assert_eq!(e.0, "moonshotai/Kimi-K2");
        assert_eq!(r.tokenizer, "o200k_base");
        let mut r = FileConfig::from_yaml("tokenizer:\n  name: chars4\n")
            .unwrap()
            .resolve();
        assert_eq!(
            r.load_file_tokenizer().unwrap().ok().unwrap().name(),
            "chars4"
        );
        assert_eq!(r.tokenizer, "chars4");
    }
}

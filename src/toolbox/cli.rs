//! Command-line flags for the tools and their sandbox, ready to `#[command(flatten)]`
//! into a binary that runs agents (traj-run), and their conversion into
//! [`ToolConfig`] and [`SandboxConfig`].
//!
//! Flags that make no configuration are a [`ToolArgsError`]; the binary reports it as
//! a usage error (exit 2).
//!
//! Secrets are never flags: a search API key is read from the environment variable
//! named by `--search-key-env` (default `BRAVE_API_KEY` or `TAVILY_API_KEY`).

use std::path::PathBuf;
use std::time::Duration;

use super::config::{LlmToolsConfig, SearchConfig, SearchProvider, ToolConfig};
use super::image::ImageConfig;
use super::limits::Limits;
use super::sandbox::{Backend, SandboxConfig};
use crate::llm::ClientConfig;

/// Flags that do not make a configuration: the caller reports them as a usage error.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ToolArgsError {
    #[error("--tool-timeout must be at least 1 second and at most {max} (30 days)", max = crate::format::time::MAX_SECS)]
    TimeoutOutOfRange,
    #[error("--tool-output-cap must be at least 256 bytes")]
    OutputCapTooSmall,
    #[error("--search {0} needs --search-url (the instance's URL)")]
    SearchUrlMissing(&'static str),
    #[error("--search {provider} needs an API key in ${env}")]
    SearchKeyMissing { provider: &'static str, env: String },
    #[error("--moa-models and --moa-aggregator go together")]
    MoaIncomplete,
    #[error("--docker-image: {0}")]
    BadImage(String),
}

/// Flags that choose and configure the agent's tools.
#[derive(Debug, Clone, clap::Args)]
pub struct ToolArgs {
    /// Isolation of tasks that name no `image`: auto (bwrap when it works here, else
    /// local with a warning), local (fresh directory, scrubbed environment, no
    /// isolation), bwrap (namespaces, no network, host read-only) or docker.
    #[arg(long, value_enum, default_value_t = Backend::Auto, value_name = "BACKEND")]
    pub sandbox: Backend,

    /// Give bwrap and docker sandboxes network access.
    #[arg(long)]
    pub sandbox_network: bool,

    /// Directory in which task workspaces are created (default: the temp dir). A tmpfs
    /// such as /dev/shm makes the one workspace per task cheaper for tool-heavy runs.
    #[arg(long, value_name = "DIR")]
    pub workspace_root: Option<PathBuf>,

    /// Make a new sandbox for every command. By default each worker keeps one bwrap
    /// (or local-namespace) sandbox between its tasks, reset when a task ends: its
    /// processes killed, its workspace, /tmp and /dev/shm emptied (docs/tools.md).
    #[arg(long)]
    pub no_sandbox_reuse: bool,

    /// Pass this variable of traj's environment to tool processes (repeatable);
    /// nothing else of the environment reaches them.
    #[arg(long = "tool-env", value_name = "NAME")]
    pub tool_env: Vec<String>,

    /// Largest time one command may run, in seconds (its process group is then killed).
    #[arg(long, default_value_t = 180, value_name = "SECS")]
    pub tool_timeout: u64,

    /// Most bytes of a command's output returned to the model (the middle is cut).
    #[arg(long, default_value_t = 50_000, value_name = "BYTES")]
    pub tool_output_cap: usize,

    /// Address space of each tool process, in MiB (0: no limit; local and bwrap).
    #[arg(long, default_value_t = Limits::default().memory_mb, value_name = "MIB")]
    pub tool_memory_mb: u64,

    /// Processes a tool command may have running, counted per user (0: no limit; not
    /// enforced for root).
    #[arg(long, default_value_t = Limits::default().processes, value_name = "N")]
    pub tool_processes: u64,

    /// Largest file a tool process may write, in MiB (0: no limit).
    #[arg(long, default_value_t = Limits::default().file_size_mb, value_name = "MIB")]
    pub tool_file_size_mb: u64,

    /// CPU seconds of each tool process (0: no limit; the wall-clock limit is
    /// --tool-timeout).
    #[arg(long, default_value_t = Limits::default().cpu_secs, value_name = "SECS")]
    pub tool_cpu_secs: u64,

    /// The docker-compatible CLI (docker, podman, a path).
    #[arg(long, default_value = "docker", value_name = "CLI")]
    pub docker_cli: String,

    /// Extra `docker run` argument (repeatable), e.g. --docker-arg=--memory=2g.
    #[arg(long = "docker-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub docker_args: Vec<String>,

    /// Image for tasks without one when --sandbox docker.
    #[arg(long, value_name = "IMAGE")]
    pub docker_image: Option<String>,

    /// Search API for web_search (not offered without one).
    #[arg(long, value_enum, value_name = "PROVIDER")]
    pub search: Option<SearchProvider>,

    /// Base URL of the search API (required for searxng: the instance's URL).
    #[arg(long, value_name = "URL")]
    pub search_url: Option<String>,

    /// Environment variable holding the search API key (default: BRAVE_API_KEY or
    /// TAVILY_API_KEY).
    #[arg(long, value_name = "NAME")]
    pub search_key_env: Option<String>,

    /// Results per web search.
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub search_results: usize,

    /// Do not offer web_extract.
    #[arg(long)]
    pub no_web_fetch: bool,

    /// Let web tools reach loopback, private and link-local addresses.
    #[arg(long)]
    pub allow_private_addresses: bool,

    /// Model for vision_analyze (not offered without one).
    #[arg(long, value_name = "MODEL")]
    pub vision_model: Option<String>,

    /// Reference models of mixture_of_agents, comma-separated.
    #[arg(long, value_delimiter = ',', value_name = "MODELS")]
    pub moa_models: Vec<String>,

    /// Aggregator model of mixture_of_agents (not offered without one and models).
    #[arg(long, value_name = "MODEL")]
    pub moa_aggregator: Option<String>,

    /// Model for image_generate (not offered without one).
    #[arg(long, value_name = "MODEL")]
    pub image_model: Option<String>,

    /// OpenAI-compatible API root of image_generate (POST {URL}/images/generations;
    /// default: the run's --base-url, with the same key).
    #[arg(long, value_name = "URL")]
    pub image_base_url: Option<String>,
}

impl ToolArgs {
    /// The sandbox configuration these flags ask for, `auto` settled (probing bwrap
    /// once): when it fell back to local, [`SandboxConfig::auto_fallback`] holds the
    /// warning the caller shows.
    pub fn sandbox_config(&self) -> Result<SandboxConfig, ToolArgsError> {
        if self.tool_timeout == 0 || self.tool_timeout as f64 > crate::format::time::MAX_SECS {
            return Err(ToolArgsError::TimeoutOutOfRange);
        }
        if self.tool_output_cap < 256 {
            return Err(ToolArgsError::OutputCapTooSmall);
        }
        if let Some(why) = self.docker_image.as_deref().and_then(super::image_refused) {
            return Err(ToolArgsError::BadImage(why));
        }
        let mut cfg = SandboxConfig {
            backend: self.sandbox,
            root: self.workspace_root.clone(),
            network: self.sandbox_network,
            env_allow: self.tool_env.clone(),
            env_set: Vec::new(),
            timeout: Duration::from_secs(self.tool_timeout),
            output_cap: self.tool_output_cap,
            docker_cli: self.docker_cli.clone(),
            docker_args: self.docker_args.clone(),
            docker_image: self.docker_image.clone(),
            limits: Limits {
                memory_mb: self.tool_memory_mb,
                processes: self.tool_processes,
                file_size_mb: self.tool_file_size_mb,
                cpu_secs: self.tool_cpu_secs,
            },
            auto_fallback: None,
            // The supervisor of a kept sandbox is this binary (see toolbox::pod).
            pod_exe: (!self.no_sandbox_reuse)
                .then(std::env::current_exe)
                .and_then(Result::ok),
        };
        cfg.resolve_auto();
        Ok(cfg)
    }

    /// The tool configuration; `llm` is the endpoint model-backed tools call (usually
    /// the agent's own).
    pub fn tool_config(&self, llm: &ClientConfig) -> Result<ToolConfig, ToolArgsError> {
        let search = match self.search {
            None => None,
            Some(provider) => {
                let base_url = match (&self.search_url, provider.default_base_url()) {
                    (Some(u), _) => u.clone(),
                    (None, Some(d)) => d.to_string(),
                    (None, None) => return Err(ToolArgsError::SearchUrlMissing(provider.as_str())),
                };
                let key_env = self.search_key_env.clone().or(match provider {
                    SearchProvider::Brave => Some("BRAVE_API_KEY".to_string()),
                    SearchProvider::Tavily => Some("TAVILY_API_KEY".to_string()),
                    SearchProvider::Searxng => None,
                });
                let api_key = key_env.as_ref().and_then(|k| std::env::var(k).ok());
                if provider != SearchProvider::Searxng && api_key.is_none() {
                    return Err(ToolArgsError::SearchKeyMissing {
                        provider: provider.as_str(),
                        env: key_env.unwrap_or_default(),
                    });
                }
                Some(SearchConfig {
                    provider,
                    base_url,
                    api_key,
                    max_results: self.search_results.max(1),
                })
            }
        };
        if self.moa_aggregator.is_some() == self.moa_models.is_empty() {
            return Err(ToolArgsError::MoaIncomplete);
        }
        let image = self.image_model.as_ref().map(|model| ImageConfig {
            base_url: self
                .image_base_url
                .clone()
                .unwrap_or_else(|| llm.base_url.clone()),
            api_key: llm.api_key.clone(),
            model: model.clone(),
            timeout: Duration::from_secs(180),
        });
        let wants_llm = self.vision_model.is_some() || self.moa_aggregator.is_some();
        let llm = wants_llm.then(|| LlmToolsConfig {
            client: llm.clone(),
            vision_model: self.vision_model.clone(),
            moa_models: self.moa_models.clone(),
            moa_aggregator: self.moa_aggregator.clone(),
            max_tokens: None,
        });
        Ok(ToolConfig {
            search,
            web_fetch: !self.no_web_fetch,
            allow_private_addresses: self.allow_private_addresses,
            web_timeout: Duration::from_secs(30),
            llm,
            python: None,
            image,
            ..ToolConfig::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::toolbox::Registry;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        tools: ToolArgs,
    }

    fn parse(args: &[&str]) -> ToolArgs {
        T::try_parse_from(std::iter::once("t").chain(args.iter().copied()))
            .unwrap()
            .tools
    }

    #[test]
    fn flags_become_configs() {
        let a = parse(&[
            "--sandbox",
            "bwrap",
            "--tool-env",
            "LANGUAGE",
            "--tool-timeout",
            "30",
            "--docker-arg=--memory=1g",
            "--search",
            "searxng",
            "--search-url",
            "http://127.0.0.1:8888",
            "--vision-model",
            "v",
            "--moa-models",
            "a,b",
            "--moa-aggregator",
            "c",
        ]);
        let s = a.sandbox_config().unwrap();
        assert_eq!(s.backend, Backend::Bwrap);
        assert_eq!(s.timeout, Duration::from_secs(30));
        assert_eq!(s.env_allow, ["LANGUAGE"]);
        assert_eq!(s.docker_args, ["--memory=1g"]);
        let t = a.tool_config(&ClientConfig::default()).unwrap();
        let r = Registry::builtin(&t);
        for tool in [
            "web_search",
            "vision_analyze",
            "mixture_of_agents",
            "web_extract",
        ] {
            assert!(r.is_available(tool), "{tool}");
        }
        assert_eq!(t.llm.unwrap().moa_models, ["a", "b"]);
        // Defaults: nothing that needs configuration is offered.
        let r = Registry::builtin(&parse(&[]).tool_config(&ClientConfig::default()).unwrap());
        assert!(!r.is_available("web_search") && !r.is_available("vision_analyze"));
        // Incomplete settings are usage errors.
        for bad in [
            &["--search", "searxng"][..],
            &[
                "--search",
                "brave",
                "--search-key-env",
                "TRAJ_SURELY_UNSET_KEY",
            ],
            &["--moa-models", "a"],
        ] {
            assert!(
                parse(bad).tool_config(&ClientConfig::default()).is_err(),
                "{bad:?}"
            );
        }
        assert!(parse(&["--tool-timeout", "0"]).sandbox_config().is_err());
    }
}

//! What the tools are configured with and what they may rely on from the machine:
//! [`ToolConfig`] (search, model-backed tools, images, the browser), each tool's
//! [`Availability`] under it, the `PATH` tool processes get ([`SANDBOX_PATH`]) and
//! [`on_path`]. The tool table and the registry read these; nothing here reads them.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::llm::ClientConfig;

/// Where `web_search` sends queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SearchProvider {
    /// A SearXNG instance's JSON API (`GET {base}/search?q=..&format=json`).
    Searxng,
    /// Brave Search API (`GET {base}/res/v1/web/search`, `X-Subscription-Token`).
    Brave,
    /// Tavily (`POST {base}/search`, bearer token).
    Tavily,
}

impl SearchProvider {
    /// The public endpoint, when the provider has one (SearXNG is self-hosted).
    pub fn default_base_url(self) -> Option<&'static str> {
        match self {
            SearchProvider::Searxng => None,
            SearchProvider::Brave => Some("https://api.search.brave.com"),
            SearchProvider::Tavily => Some("https://api.tavily.com"),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SearchProvider::Searxng => "searxng",
            SearchProvider::Brave => "brave",
            SearchProvider::Tavily => "tavily",
        }
    }
}

/// Settings of `web_search`.
#[derive(Clone)]
pub struct SearchConfig {
    pub provider: SearchProvider,
    /// Base URL of the API (for SearXNG, the instance's root URL).
    pub base_url: String,
    /// API key (Brave, Tavily); never passed to tool processes.
    pub api_key: Option<String>,
    /// Results returned per query (the model may ask for fewer).
    pub max_results: usize,
}

/// Settings of the tools that call a model: `vision_analyze`, `mixture_of_agents`.
#[derive(Clone)]
pub struct LlmToolsConfig {
    /// The OpenAI-compatible endpoint (usually the one traj-run itself uses).
    pub client: ClientConfig,
    /// Model for `vision_analyze` (must accept image input); `None` = tool not offered.
    pub vision_model: Option<String>,
    /// Reference models asked in parallel by `mixture_of_agents`.
    pub moa_models: Vec<String>,
    /// Model that combines the reference answers; `None` = tool not offered.
    pub moa_aggregator: Option<String>,
    /// `max_tokens` for each of these calls (`None` = provider default).
    pub max_tokens: Option<u32>,
}

/// What is configured, hence which tools can be offered.
#[derive(Clone)]
pub struct ToolConfig {
    /// `web_search` backend; `None` = `web_search` not offered.
    pub search: Option<SearchConfig>,
    /// Offer `web_extract` (it fetches from the traj process, not from the sandbox).
    pub web_fetch: bool,
    /// Let `web_extract`/`web_search` reach loopback, private and link-local
    /// addresses. Off by default: a model must not reach cloud metadata or the LAN.
    pub allow_private_addresses: bool,
    /// Timeout of one web request.
    pub web_timeout: Duration,
    /// Model-backed tools; `None` = not offered.
    pub llm: Option<LlmToolsConfig>,
    /// Offer `execute_code`: `None` = when `python3` is on the sandbox `PATH`.
    pub python: Option<bool>,
    /// `image_generate`'s endpoint and model; `None` = not offered.
    pub image: Option<super::image::ImageConfig>,
    /// Whether the browser tools have a Chromium: `None` = look for one on this machine
    /// ([`super::browser::chromium_path`]); `Some` decides (tests, snapshots).
    pub chromium: Option<bool>,
    /// The rate limit and spend cap every model-backed tool call goes through: the
    /// run's own (traj-run attaches its limiter and cap to it).
    pub meter: Arc<crate::llm::Meter>,
}

impl Default for ToolConfig {
    fn default() -> Self {
        ToolConfig {
            search: None,
            web_fetch: true,
            allow_private_addresses: false,
            web_timeout: Duration::from_secs(30),
            llm: None,
            python: None,
            image: None,
            chromium: None,
            meter: Arc::new(crate::llm::Meter::default()),
        }
    }
}

/// Whether a tool can be offered, and why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Availability {
    Available,
    /// Implemented, but this configuration lacks what it needs.
    NotConfigured(String),
    /// Not implemented by traj: never offered.
    NotImplemented(String),
    /// Implemented, but this machine lacks what it needs (no Chromium): never
    /// offered, and its toolset is never drawn.
    Unavailable(String),
}

impl Availability {
    pub fn is_available(&self) -> bool {
        matches!(self, Availability::Available)
    }

    /// `available`, `not configured: ...`, `not implemented: ...`.
    pub fn describe(&self) -> String {
        match self {
            Availability::Available => "available".to_string(),
            Availability::NotConfigured(why) => format!("not configured: {why}"),
            Availability::NotImplemented(why) => format!("not implemented: {why}"),
            Availability::Unavailable(why) => format!("unavailable here: {why}"),
        }
    }
}

/// The `PATH` tool processes get (never the caller's).
pub const SANDBOX_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// True when `prog` is an executable file in one of `path`'s directories.
pub fn on_path(prog: &str, path: &str) -> bool {
    find_on_path(prog, path).is_some()
}

/// Where `prog` is on the colon-separated `path`: the first executable file of that
/// name.
pub fn find_on_path(prog: &str, path: &str) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    path.split(':')
        .map(|dir| Path::new(dir).join(prog))
        .find(|p| {
            std::fs::metadata(p)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// A new empty directory named `PREFIX<host>-<pid>-…` under `root` (created when
/// missing) or the system temp dir: a task's or a pod's workspace. The workspaces a dead
/// run left there (`kill -9`: nothing of it ran to remove them) go first.
pub fn new_workspace(
    root: Option<&Path>,
    prefix: &'static str,
) -> anyhow::Result<tempfile::TempDir> {
    use anyhow::Context;
    let parent = match root {
        Some(root) => {
            std::fs::create_dir_all(root)
                .with_context(|| format!("cannot create {}", root.display()))?;
            root.to_path_buf()
        }
        None => std::env::temp_dir(),
    };
    crate::io::temp::remove_stale(&parent, prefix, "");
    tempfile::Builder::new()
        .prefix(&crate::io::temp::name_prefix(prefix))
        .tempdir_in(&parent)
        .context("cannot create a workspace")
}

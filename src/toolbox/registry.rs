//! Every tool traj knows: toolsets (tools plus `includes`), OpenAI function schemas,
//! and which tools can be offered under a given [`ToolConfig`].
//!
//! Toolset and tool names follow the reference agent (hermes-agent, the version whose
//! batch runner introduced the 17 distributions), so task rows and trajectories stay
//! comparable. The descriptions and schemas are traj's own.
//!
//! A tool is offered only when it is [`Availability::Available`]: a tool whose backend
//! is not configured (no search provider, no model for vision) is
//! [`Availability::NotConfigured`]; a tool traj does not implement (browser, image
//! generation, ...) is [`Availability::NotImplemented`] and is never offered.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, bail};
use serde_json::{Value, json};

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
        }
    }
}

/// One tool as the registry knows it.
#[derive(Debug, Clone)]
pub struct ToolInfo {
    pub name: &'static str,
    /// `{"type":"function","function":{"name","description","parameters"}}`; `None`
    /// for tools traj does not implement.
    pub schema: Option<Value>,
    pub availability: Availability,
}

/// A named group of tools, plus other toolsets it includes.
#[derive(Debug, Clone)]
pub struct Toolset {
    pub name: &'static str,
    pub description: &'static str,
    pub tools: Vec<&'static str>,
    pub includes: Vec<&'static str>,
}

/// Toolsets of the reference agent: (name, description, tools, includes).
type ToolsetDef = (
    &'static str,
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
);

const TOOLSETS: &[ToolsetDef] = &[
    (
        "web",
        "search the web and read pages",
        &["web_search", "web_extract"],
        &[],
    ),
    ("search", "web search only", &["web_search"], &[]),
    (
        "vision",
        "describe and answer questions about images",
        &["vision_analyze"],
        &[],
    ),
    ("image_gen", "generate images", &["image_generate"], &[]),
    (
        "terminal",
        "run shell commands in the task's workspace",
        &["terminal", "process"],
        &[],
    ),
    (
        "moa",
        "ask several models and combine their answers",
        &["mixture_of_agents"],
        &[],
    ),
    (
        "browser",
        "drive a web browser",
        &[
            "browser_navigate",
            "browser_snapshot",
            "browser_click",
            "browser_type",
            "browser_scroll",
            "browser_back",
            "browser_press",
            "browser_close",
            "browser_get_images",
            "browser_vision",
            "web_search",
        ],
        &[],
    ),
    (
        "file",
        "read, write, patch and search files in the workspace",
        &["read_file", "write_file", "patch", "search_files"],
        &[],
    ),
    (
        "code_execution",
        "run Python snippets in the sandbox",
        &["execute_code"],
        &[],
    ),
    (
        "skills",
        "agent skill library",
        &["skills_list", "skill_view", "skill_manage"],
        &[],
    ),
    (
        "cronjob",
        "scheduled jobs",
        &["schedule_cronjob", "list_cronjobs", "remove_cronjob"],
        &[],
    ),
    (
        "rl",
        "reinforcement-learning training control",
        &[
            "rl_list_environments",
            "rl_select_environment",
            "rl_get_current_config",
            "rl_edit_config",
            "rl_start_training",
            "rl_check_status",
            "rl_stop_training",
            "rl_get_results",
            "rl_list_runs",
            "rl_test_inference",
        ],
        &[],
    ),
    ("tts", "text to speech", &["text_to_speech"], &[]),
    ("todo", "a task list kept by the agent", &["todo"], &[]),
    ("memory", "persistent agent memory", &["memory"], &[]),
    (
        "session_search",
        "search past sessions",
        &["session_search"],
        &[],
    ),
    ("clarify", "ask the user a question", &["clarify"], &[]),
    (
        "delegation",
        "hand a subtask to another agent",
        &["delegate_task"],
        &[],
    ),
    (
        "debugging",
        "terminal plus web and file tools",
        &["terminal", "process"],
        &["web", "file"],
    ),
    (
        "safe",
        "no terminal: web, vision, image generation and model mixtures",
        &["mixture_of_agents"],
        &["web", "vision", "image_gen"],
    ),
];

/// Tools traj implements. Everything else in [`TOOLSETS`] is listed as not implemented.
const IMPLEMENTED: &[&str] = &[
    "terminal",
    "read_file",
    "write_file",
    "patch",
    "search_files",
    "execute_code",
    "web_extract",
    "web_search",
    "vision_analyze",
    "mixture_of_agents",
];

/// Names the reference's newest version uses for tools that have no toolset here;
/// known so that data from it is recognised (see [`all_tool_names`]).
const OTHER_KNOWN: &[&str] = &[
    "process_manage",
    "todo_list",
    "cronjob_manage",
    "browser_console",
    "browser_cdp",
    "browser_dialog",
    "browser_exec",
    "send_message",
    "x_search",
    "video_analyze",
    "video_gen",
    "computer_use",
];

/// Every tool name traj knows, implemented or not, sorted: the tools of every
/// toolset plus names only the reference's newest version uses.
pub fn all_tool_names() -> Vec<&'static str> {
    let mut set: BTreeSet<&'static str> = BTreeSet::new();
    for (_, _, tools, _) in TOOLSETS {
        set.extend(tools.iter().copied());
    }
    set.extend(OTHER_KNOWN.iter().copied());
    set.into_iter().collect()
}

/// The `PATH` tool processes get (never the caller's).
pub const SANDBOX_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// True when `prog` is an executable file in one of `path`'s directories.
pub fn on_path(prog: &str, path: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.split(':').any(|dir| {
        std::fs::metadata(Path::new(dir).join(prog))
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    })
}

/// Toolsets and tools, with availability decided by one [`ToolConfig`].
#[derive(Clone)]
pub struct Registry {
    config: Arc<ToolConfig>,
    toolsets: Vec<Toolset>,
    tools: Vec<ToolInfo>,
    index: HashMap<&'static str, usize>,
}

impl Registry {
    /// The built-in toolsets and tools; availability follows `config`.
    pub fn builtin(config: &ToolConfig) -> Registry {
        let toolsets: Vec<Toolset> = TOOLSETS
            .iter()
            .map(|(name, description, tools, includes)| Toolset {
                name,
                description,
                tools: tools.to_vec(),
                includes: includes.to_vec(),
            })
            .collect();
        let mut tools = Vec::new();
        let mut index = HashMap::new();
        for name in all_tool_names() {
            let (schema, availability) = if IMPLEMENTED.contains(&name) {
                (Some(schema(name)), availability(name, config))
            } else {
                (
                    None,
                    Availability::NotImplemented("traj has no implementation".to_string()),
                )
            };
            index.insert(name, tools.len());
            tools.push(ToolInfo {
                name,
                schema,
                availability,
            });
        }
        Registry {
            config: Arc::new(config.clone()),
            toolsets,
            tools,
            index,
        }
    }

    /// The configuration availability was decided with.
    pub fn config(&self) -> &ToolConfig {
        &self.config
    }

    pub(crate) fn config_arc(&self) -> Arc<ToolConfig> {
        self.config.clone()
    }

    /// All toolsets, in the reference's order.
    pub fn toolsets(&self) -> &[Toolset] {
        &self.toolsets
    }

    /// One toolset by name.
    pub fn toolset(&self, name: &str) -> Option<&Toolset> {
        self.toolsets.iter().find(|t| t.name == name)
    }

    /// Every known tool (sorted by name), available or not.
    pub fn tools(&self) -> &[ToolInfo] {
        &self.tools
    }

    /// One tool by name.
    pub fn tool(&self, name: &str) -> Option<&ToolInfo> {
        self.index.get(name).map(|&i| &self.tools[i])
    }

    /// True when `name` is a tool that can be offered.
    pub fn is_available(&self, name: &str) -> bool {
        self.tool(name)
            .is_some_and(|t| t.availability.is_available())
    }

    /// Every tool of the toolsets named (their `includes` followed recursively; `all`
    /// or `*` means every toolset), available or not, without duplicates, in order of
    /// first appearance. Unknown toolset names are an error.
    pub fn resolve_all(&self, toolsets: &[String]) -> Result<Vec<&'static str>> {
        let mut out = Vec::new();
        let mut seen_tools = BTreeSet::new();
        let mut seen_sets = BTreeSet::new();
        let mut stack: Vec<&str> = Vec::new();
        for name in toolsets.iter().rev() {
            if name == "all" || name == "*" {
                stack.extend(self.toolsets.iter().rev().map(|t| t.name));
            } else {
                stack.push(name);
            }
        }
        while let Some(name) = stack.pop() {
            let Some(set) = self.toolset(name) else {
                let known: Vec<&str> = self.toolsets.iter().map(|t| t.name).collect();
                bail!("unknown toolset {name:?} (known: {})", known.join(", "));
            };
            if !seen_sets.insert(set.name) {
                continue; // already expanded (also stops include cycles)
            }
            for tool in &set.tools {
                if seen_tools.insert(*tool) {
                    out.push(*tool);
                }
            }
            stack.extend(set.includes.iter().rev());
        }
        Ok(out)
    }

    /// The tools offered for these toolsets: [`Registry::resolve_all`] keeping only
    /// available tools.
    pub fn resolve(&self, toolsets: &[String]) -> Result<Vec<&'static str>> {
        Ok(self
            .resolve_all(toolsets)?
            .into_iter()
            .filter(|t| self.is_available(t))
            .collect())
    }

    /// True when the toolset (with its includes) offers at least one tool.
    pub fn toolset_available(&self, name: &str) -> bool {
        self.resolve(&[name.to_string()])
            .is_ok_and(|tools| !tools.is_empty())
    }

    /// Names of the toolsets that offer at least one tool.
    pub fn available_toolsets(&self) -> BTreeSet<String> {
        self.toolsets
            .iter()
            .filter(|t| self.toolset_available(t.name))
            .map(|t| t.name.to_string())
            .collect()
    }

    /// Toolsets traj can stand behind, whatever the configuration: at least half of
    /// the toolset's own tools are implemented. So `terminal` (terminal yes, process
    /// no) counts, while `browser` (ten browser tools missing; its one implemented tool,
    /// web_search, belongs to `web`) and `image_gen` do not. traj-sample-tools draws
    /// only from these unless told otherwise; traj-run then offers the configured
    /// subset of their tools.
    pub fn implemented_toolsets(&self) -> BTreeSet<String> {
        self.toolsets
            .iter()
            .filter(|t| {
                let implemented = t
                    .tools
                    .iter()
                    .filter(|n| {
                        self.tool(n).is_some_and(|i| {
                            !matches!(i.availability, Availability::NotImplemented(_))
                        })
                    })
                    .count();
                implemented > 0 && implemented * 2 >= t.tools.len()
            })
            .map(|t| t.name.to_string())
            .collect()
    }

    /// The schemas of `tools` (unknown or unimplemented names are skipped).
    pub fn schemas(&self, tools: &[&str]) -> Vec<Value> {
        tools
            .iter()
            .filter_map(|t| self.tool(t).and_then(|i| i.schema.clone()))
            .collect()
    }
}

fn availability(name: &str, cfg: &ToolConfig) -> Availability {
    let missing = |why: &str| Availability::NotConfigured(why.to_string());
    match name {
        "terminal" | "read_file" | "write_file" | "patch" | "search_files" => {
            Availability::Available
        }
        "execute_code" => match cfg.python {
            Some(true) => Availability::Available,
            Some(false) => missing("execute_code disabled"),
            None if on_path("python3", SANDBOX_PATH) => Availability::Available,
            None => missing("python3 is not on the sandbox PATH"),
        },
        "web_extract" if cfg.web_fetch => Availability::Available,
        "web_extract" => missing("web fetching disabled"),
        "web_search" if cfg.search.is_some() => Availability::Available,
        "web_search" => missing("no search provider (SearXNG, Brave or Tavily) configured"),
        "vision_analyze" => match &cfg.llm {
            Some(l) if l.vision_model.is_some() => Availability::Available,
            _ => missing("no vision model configured"),
        },
        "mixture_of_agents" => match &cfg.llm {
            Some(l) if l.moa_aggregator.is_some() && !l.moa_models.is_empty() => {
                Availability::Available
            }
            _ => missing("no reference models and aggregator configured"),
        },
        _ => Availability::NotImplemented("traj has no implementation".to_string()),
    }
}

fn function(name: &str, description: &str, parameters: Value) -> Value {
    json!({
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters}
    })
}

/// traj's own schema of an implemented tool.
fn schema(name: &str) -> Value {
    match name {
        "terminal" => function(
            name,
            "Run a shell command (sh -c) in this task's workspace directory and get its \
             combined stdout and stderr, plus the exit code. Each command starts from the \
             workspace (or the task's working directory); files persist between calls, \
             shell variables and `cd` do not. Commands that run longer than the timeout \
             are killed together with everything they started; processes left in the \
             background are stopped when the command ends, so run servers and long jobs \
             in the foreground with their own time limit. Long output is cut in the \
             middle with a note.",
            json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The shell command to run."},
                    "timeout": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "Seconds before the command is killed (capped by the run's limit)."
                    }
                },
                "required": ["command"]
            }),
        ),
        "read_file" => function(
            name,
            "Read a text file from the workspace. Lines come back numbered as \
             `N|text`; use offset and limit to page through long files. Paths are \
             relative to the workspace; nothing outside it can be read.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path, relative to the workspace."},
                    "offset": {"type": "integer", "minimum": 1, "description": "First line to return (1-based, default 1)."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 2000, "description": "Most lines to return (default 500)."}
                },
                "required": ["path"]
            }),
        ),
        "write_file" => function(
            name,
            "Create or overwrite a file in the workspace with the given content. \
             Missing parent directories are created.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path, relative to the workspace."},
                    "content": {"type": "string", "description": "The complete new content of the file."}
                },
                "required": ["path", "content"]
            }),
        ),
        "patch" => function(
            name,
            "Edit a file by replacing an exact piece of text. old_string must occur \
             exactly once unless replace_all is true; include enough surrounding lines \
             to make it unique. An empty new_string deletes the text.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path, relative to the workspace."},
                    "old_string": {"type": "string", "description": "The exact text to find."},
                    "new_string": {"type": "string", "description": "The text to put in its place."},
                    "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)."}
                },
                "required": ["path", "old_string", "new_string"]
            }),
        ),
        "search_files" => function(
            name,
            "Search the workspace. With target \"content\" (default), pattern is a regular \
             expression matched against each line of text files, and matching lines come \
             back as path:line:text. With target \"files\", pattern is a glob (`*.py`, \
             `test_*`) matched against file names.",
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Regular expression (content) or glob (files)."},
                    "target": {"type": "string", "enum": ["content", "files"], "description": "What to search (default content)."},
                    "path": {"type": "string", "description": "Directory to search, relative to the workspace (default: all of it)."},
                    "file_glob": {"type": "string", "description": "Content search only: search files whose name matches this glob."},
                    "limit": {"type": "integer", "minimum": 1, "description": "Most results to return (default 50)."}
                },
                "required": ["pattern"]
            }),
        ),
        "execute_code" => function(
            name,
            "Run a Python 3 program in the same sandbox as the terminal, with the \
             workspace as the current directory, and get what it prints (stdout and \
             stderr) and its exit code.",
            json!({
                "type": "object",
                "properties": {
                    "code": {"type": "string", "description": "The Python source to run."},
                    "timeout": {"type": "integer", "minimum": 1, "description": "Seconds before it is killed (capped by the run's limit)."}
                },
                "required": ["code"]
            }),
        ),
        "web_extract" => function(
            name,
            "Fetch web pages and return their readable text (scripts, styles and markup \
             removed) with each page's title. Accepts http and https URLs.",
            json!({
                "type": "object",
                "properties": {
                    "urls": {"type": "array", "items": {"type": "string"}, "maxItems": 5, "description": "Up to 5 URLs to read."}
                },
                "required": ["urls"]
            }),
        ),
        "web_search" => function(
            name,
            "Search the web. Returns a list of results, each with title, url and a short \
             snippet; read a page in full with web_extract.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to search for."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 20, "description": "Most results to return (default 5)."}
                },
                "required": ["query"]
            }),
        ),
        "vision_analyze" => function(
            name,
            "Look at an image and answer a question about it. The image is an http(s) URL \
             or a path to an image file in the workspace.",
            json!({
                "type": "object",
                "properties": {
                    "image_url": {"type": "string", "description": "http(s) URL or workspace path of the image."},
                    "question": {"type": "string", "description": "What to find out about the image."}
                },
                "required": ["image_url", "question"]
            }),
        ),
        "mixture_of_agents" => function(
            name,
            "Put a hard question to several different models at once, then have another \
             model merge their answers into one. Slow and costly: keep it for problems \
             where a second opinion matters.",
            json!({
                "type": "object",
                "properties": {
                    "user_prompt": {"type": "string", "description": "The full question, with all the context the models need."}
                },
                "required": ["user_prompt"]
            }),
        ),
        other => unreachable!("no schema for {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn includes_resolve_recursively_without_duplicates() {
        let r = Registry::builtin(&ToolConfig::default());
        let all = r.resolve_all(&names(&["debugging", "terminal"])).unwrap();
        assert_eq!(
            all,
            vec![
                "terminal",
                "process",
                "web_search",
                "web_extract",
                "read_file",
                "write_file",
                "patch",
                "search_files"
            ]
        );
        let offered = r.resolve(&names(&["debugging"])).unwrap();
        assert!(!offered.contains(&"process"), "not implemented");
        assert!(!offered.contains(&"web_search"), "no provider configured");
        assert!(offered.contains(&"web_extract"));
        assert!(r.resolve(&names(&["nope"])).is_err());
    }

    #[test]
    fn availability_follows_config() {
        let r = Registry::builtin(&ToolConfig::default());
        assert!(!r.toolset_available("browser"));
        assert!(!r.toolset_available("image_gen"));
        assert!(!r.toolset_available("moa"));
        assert!(r.toolset_available("terminal"));
        let cfg = ToolConfig {
            search: Some(SearchConfig {
                provider: SearchProvider::Searxng,
                base_url: "http://127.0.0.1:1".into(),
                api_key: None,
                max_results: 5,
            }),
            ..ToolConfig::default()
        };
        let r = Registry::builtin(&cfg);
        assert_eq!(r.resolve(&names(&["browser"])).unwrap(), vec!["web_search"]);
        assert!(matches!(
            r.tool("browser_click").unwrap().availability,
            Availability::NotImplemented(_)
        ));
        let implemented: Vec<String> = r.implemented_toolsets().into_iter().collect();
        assert_eq!(
            implemented,
            names(&[
                "code_execution",
                "debugging",
                "file",
                "moa",
                "safe",
                "search",
                "terminal",
                "vision",
                "web"
            ])
        );
    }

    #[test]
    fn every_implemented_tool_has_a_valid_schema() {
        let r = Registry::builtin(&ToolConfig::default());
        for name in IMPLEMENTED {
            let s = r.tool(name).unwrap().schema.clone().unwrap();
            assert_eq!(s["type"], "function");
            assert_eq!(s["function"]["name"], *name);
            assert!(s["function"]["description"].as_str().unwrap().len() > 40);
            assert_eq!(s["function"]["parameters"]["type"], "object");
            for req in s["function"]["parameters"]["required"].as_array().unwrap() {
                let req = req.as_str().unwrap();
                assert!(s["function"]["parameters"]["properties"][req].is_object());
            }
        }
        assert!(all_tool_names().contains(&"browser_close"));
        assert!(all_tool_names().contains(&"process_manage"));
    }
}

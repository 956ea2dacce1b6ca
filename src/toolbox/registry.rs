//! The registry: the tool table (`table.rs`) read under one [`ToolConfig`]:
//! toolsets (their tools plus `includes`, resolved), each tool's OpenAI function
//! schema, and which tools can be offered.
//!
//! A tool is offered only when it is [`Availability::Available`]: a tool whose backend
//! is not configured (no search provider, no model for vision) is
//! [`Availability::NotConfigured`]; a tool traj does not implement (skills, cron
//! jobs, ...) is [`Availability::NotImplemented`] and is never offered; one whose
//! machine dependency is missing (the browser without Chromium) is
//! [`Availability::Unavailable`], and its toolset is never drawn.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::Value;

pub use super::config::{
    Availability, LlmToolsConfig, SANDBOX_PATH, SearchConfig, SearchProvider, ToolConfig, on_path,
};
use super::table::{self, TOOLS, TOOLSETS};

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

/// Every tool name traj knows, implemented or not, sorted: the tools of every
/// toolset plus names only the reference's newest version uses.
pub fn all_tool_names() -> Vec<&'static str> {
    let set: BTreeSet<&'static str> = TOOLS.iter().map(|d| d.name).collect();
    set.into_iter().collect()
}

/// A name that is not a toolset.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("unknown toolset {name:?} (known: {known})")]
    UnknownToolset { name: String, known: String },
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
            .map(|&(name, description, includes)| Toolset {
                name,
                description,
                tools: TOOLS
                    .iter()
                    .filter(|d| d.toolsets.contains(&name))
                    .map(|d| d.name)
                    .collect(),
                includes: includes.to_vec(),
            })
            .collect();
        let mut tools = Vec::new();
        let mut index = HashMap::new();
        for name in all_tool_names() {
            let (schema, availability) = match table::find(name).and_then(|d| d.tool.as_ref()) {
                Some(t) => (Some(t.schema(name)), (t.availability)(config)),
                None => (
                    None,
                    Availability::NotImplemented("traj has no implementation".to_string()),
                ),
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

    /// A task offering the available tools of `toolsets`, in a new sandbox.
    pub fn task(
        &self,
        toolsets: &[String],
        sandbox: &super::SandboxConfig,
        spec: &super::TaskSpec,
    ) -> anyhow::Result<super::Task> {
        let offered = self.resolve(toolsets)?;
        let calls = offered
            .iter()
            .map(
                |name| match table::find(name).and_then(|d| d.tool.as_ref()) {
                    Some(t) => t.call,
                    None => unreachable!("{name} is offered, so it is implemented"),
                },
            )
            .collect();
        let schemas = self.schemas(&offered);
        super::Task::with_tools(offered, calls, schemas, self.config_arc(), sandbox, spec)
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
    pub fn resolve_all(&self, toolsets: &[String]) -> Result<Vec<&'static str>, RegistryError> {
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
                return Err(RegistryError::UnknownToolset {
                    name: name.to_string(),
                    known: known.join(", "),
                });
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
    pub fn resolve(&self, toolsets: &[String]) -> Result<Vec<&'static str>, RegistryError> {
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

    /// THE rule for which toolsets a distribution may draw, in traj-sample-tools and in
    /// traj-run's own draw alike (so one seed gives the same toolsets in both): a
    /// toolset is drawable when none of its own tools lacks a machine dependency
    /// ([`Availability::Unavailable`]: the browser without Chromium) and at least one
    /// of its tools (includes followed) is implemented. Configuration (a vision model,
    /// a search provider) is not part of the rule: traj-sample-tools cannot know
    /// traj-run's flags; traj-run offers the configured subset of a drawn toolset, and
    /// a task none of whose drawn tools is configured fails as `tool_host` naming them
    /// (never a request with an empty tool list).
    pub fn drawable_toolsets(&self) -> BTreeSet<String> {
        self.toolsets
            .iter()
            .filter(|t| self.why_not_drawable(t.name).is_none())
            .map(|t| t.name.to_string())
            .collect()
    }

    /// Why `toolset` is not drawable under [`Registry::drawable_toolsets`]'s rule
    /// (`None`: it is), in words for listings.
    pub fn why_not_drawable(&self, toolset: &str) -> Option<String> {
        let Some(set) = self.toolset(toolset) else {
            return Some("unknown toolset".to_string());
        };
        for n in &set.tools {
            if let Some(ToolInfo {
                availability: Availability::Unavailable(why),
                ..
            }) = self.tool(n)
            {
                return Some(why.clone());
            }
        }
        let all = self.resolve_all(&[toolset.to_string()]).unwrap_or_default();
        let implemented = all.iter().any(|n| {
            self.tool(n).is_some_and(|i| {
                matches!(
                    i.availability,
                    Availability::Available | Availability::NotConfigured(_)
                )
            })
        });
        (!implemented).then(|| "traj implements none of its tools".to_string())
    }

    /// The schemas of `tools` (unknown or unimplemented names are skipped).
    pub fn schemas(&self, tools: &[&str]) -> Vec<Value> {
        tools
            .iter()
            .filter_map(|t| self.tool(t).and_then(|i| i.schema.clone()))
            .collect()
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
        assert!(offered.contains(&"process"));
        assert!(!offered.contains(&"web_search"), "no provider configured");
        assert!(offered.contains(&"web_extract"));
        assert!(r.resolve(&names(&["nope"])).is_err());
    }

    #[test]
    fn availability_follows_config() {
        let r = Registry::builtin(&ToolConfig::default());
        let chromium = crate::toolbox::browser::chromium_path().is_some();
        assert_eq!(r.toolset_available("browser"), chromium);
        for (forced, drawable) in [(true, true), (false, false)] {
            let r = Registry::builtin(&ToolConfig {
                chromium: Some(forced),
                ..ToolConfig::default()
            });
            assert_eq!(r.drawable_toolsets().contains("browser"), drawable);
            assert_eq!(r.is_available("browser_navigate"), forced);
        }
        let why = Registry::builtin(&ToolConfig {
            chromium: Some(false),
            ..ToolConfig::default()
        })
        .why_not_drawable("browser")
        .unwrap();
        assert!(why.contains("no chromium"), "{why}");
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
        let browser = r.resolve(&names(&["browser"])).unwrap();
        assert_eq!(browser.len(), if chromium { 11 } else { 1 }, "{browser:?}");
        assert!(browser.contains(&"web_search"));
        assert_eq!(
            r.tool("browser_click").unwrap().availability.is_available(),
            chromium
        );
        let drawable: Vec<String> = r.drawable_toolsets().into_iter().collect();
        let mut want = vec![
            "code_execution",
            "debugging",
            "file",
            "image_gen",
            "moa",
            "safe",
            "search",
            "terminal",
            "vision",
            "web",
        ];
        if chromium {
            want.insert(0, "browser");
        }
        assert_eq!(drawable, names(&want));
        assert_eq!(
            r.why_not_drawable("skills").as_deref(),
            Some("traj implements none of its tools")
        );
    }

    #[test]
    fn every_implemented_tool_has_a_valid_schema() {
        let r = Registry::builtin(&ToolConfig::default());
        for name in TOOLS.iter().filter(|d| d.tool.is_some()).map(|d| d.name) {
            let s = r.tool(name).unwrap().schema.clone().unwrap();
            assert_eq!(s["type"], "function");
            assert_eq!(s["function"]["name"], name);
            assert!(s["function"]["description"].as_str().unwrap().len() > 40);
            assert_eq!(s["function"]["parameters"]["type"], "object");
            let required = s["function"]["parameters"]["required"].as_array();
            for req in required.into_iter().flatten() {
                let req = req.as_str().unwrap();
                assert!(s["function"]["parameters"]["properties"][req].is_object());
            }
        }
        assert!(all_tool_names().contains(&"browser_close"));
        assert!(all_tool_names().contains(&"process_manage"));
    }
}

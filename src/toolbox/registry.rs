//! The registry: the catalog's names ([`crate::catalog::toolsets`]) and the tool table
//! (`table.rs`) read under one [`ToolConfig`]: toolsets (their tools plus `includes`,
//! resolved), each tool's OpenAI function schema, and which tools can be offered.
//!
//! A tool is offered only when it is [`Availability::Available`]: a tool whose backend
//! is not configured (no search provider, no model for vision) is
//! [`Availability::NotConfigured`]; a tool traj does not implement (skills, cron
//! jobs, ...) is [`Availability::NotImplemented`] and is never offered; one whose
//! machine dependency is missing (the browser without Chromium) is
//! [`Availability::Unavailable`]: never offered, though its toolset is still drawn
//! (the draw is the catalog's alone; traj-run fails a task none of whose drawn tools
//! can run as `tool_host`).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::Value;

pub use super::config::{
    Availability, LlmToolsConfig, SANDBOX_PATH, SearchConfig, SearchProvider, ToolConfig, on_path,
};
use super::{availability, table};
use crate::catalog::toolsets::{self as catalog};
pub use crate::catalog::toolsets::{Toolset, all_tool_names};

/// A name that is not a toolset (the catalog's error).
pub type RegistryError = crate::catalog::UnknownToolset;

/// One tool as the registry knows it.
#[derive(Debug, Clone)]
pub struct ToolInfo {
    pub name: &'static str,
    /// `{"type":"function","function":{"name","description","parameters"}}`; `None`
    /// for tools traj does not implement.
    pub schema: Option<Value>,
    pub availability: Availability,
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
        let toolsets = catalog::toolsets();
        let mut tools = Vec::new();
        let mut index = HashMap::new();
        for name in all_tool_names() {
            let schema = table::find(name).map(|d| d.tool.schema(name));
            let availability = availability::of(name, config);
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
            .map(|name| match table::find(name).map(|d| &d.tool) {
                Some(t) => t.call,
                None => unreachable!("{name} is offered, so it is implemented"),
            })
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

    /// Every tool of the toolsets named, available or not: the catalog's
    /// [`resolve_all`](catalog::resolve_all) (includes followed, `all` or `*` for every
    /// toolset, no duplicates, in order of first appearance).
    pub fn resolve_all(&self, toolsets: &[String]) -> Result<Vec<&'static str>, RegistryError> {
        catalog::resolve_all(toolsets)
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

    /// The toolsets a distribution may draw: the catalog's one rule
    /// ([`catalog::why_not_drawable`]), the same on every machine and under every
    /// configuration.
    pub fn drawable_toolsets(&self) -> BTreeSet<String> {
        catalog::drawable_toolsets()
    }

    /// Why `toolset` is not drawable (`None`: it is), in words for listings.
    pub fn why_not_drawable(&self, toolset: &str) -> Option<String> {
        catalog::why_not_drawable(toolset)
    }

    /// Why a task drawing `toolset` could not use it on this machine (`None`: it can):
    /// one of its own tools lacks a machine dependency ([`Availability::Unavailable`]:
    /// the browser without Chromium). Configuration is not part of it (traj-run's
    /// flags decide that). traj-sample-tools warns with it, and its `--only-available`
    /// leaves such toolsets out of the draw.
    pub fn why_not_here(&self, toolset: &str) -> Option<String> {
        availability::why_not_here(toolset, &self.config)
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

    #[test]
    fn includes_resolve_recursively_without_duplicates() {
        let r = Registry::builtin(&ToolConfig::default());
        // Every tool, available or not, is the catalog's resolution (tested there).
        let all = r
            .resolve_all(&["debugging".into(), "terminal".into()])
            .unwrap();
        assert_eq!(
            all,
            catalog::resolve_all(&["debugging".into(), "terminal".into()]).unwrap()
        );
        assert_eq!(all.len(), 8);
        let offered = r.resolve(&["debugging".into()]).unwrap();
        assert!(offered.contains(&"process"));
        assert!(!offered.contains(&"web_search"), "no provider configured");
        assert!(offered.contains(&"web_extract"));
        assert!(r.resolve(&["nope".into()]).is_err());
    }

    #[test]
    fn availability_follows_config() {
        let r = Registry::builtin(&ToolConfig::default());
        let chromium = crate::toolbox::browser::chromium_path().is_some();
        assert_eq!(r.toolset_available("browser"), chromium);
        // Chromium or not, the browser is drawn (the draw is the catalog's); without
        // one it cannot run here, and says why.
        for forced in [true, false] {
            let r = Registry::builtin(&ToolConfig {
                chromium: Some(forced),
                ..ToolConfig::default()
            });
            assert!(r.drawable_toolsets().contains("browser"));
            assert_eq!(r.why_not_drawable("browser"), None);
            assert_eq!(r.is_available("browser_navigate"), forced);
            assert_eq!(r.why_not_here("browser").is_none(), forced);
            assert_eq!(r.why_not_here("terminal"), None);
        }
        let why = Registry::builtin(&ToolConfig {
            chromium: Some(false),
            ..ToolConfig::default()
        })
        .why_not_here("browser")
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
        let browser = r.resolve(&["browser".into()]).unwrap();
        assert_eq!(browser.len(), if chromium { 11 } else { 1 }, "{browser:?}");
        assert!(browser.contains(&"web_search"));
        assert_eq!(
            r.tool("browser_click").unwrap().availability.is_available(),
            chromium
        );
        assert_eq!(
            r.drawable_toolsets(),
            crate::catalog::toolsets::drawable_toolsets()
        );
        assert_eq!(
            r.why_not_drawable("skills").as_deref(),
            Some("traj implements none of its tools")
        );
    }

    #[test]
    fn every_implemented_tool_has_a_valid_schema() {
        let r = Registry::builtin(&ToolConfig::default());
        for name in table::TOOLS.iter().map(|d| d.name) {
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

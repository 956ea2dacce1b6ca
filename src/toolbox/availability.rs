//! When a tool can be offered: the availability rule of every tool traj implements,
//! under one [`ToolConfig`] (a program on the sandbox `PATH`, a Chromium on the machine,
//! a provider or model configured).
//!
//! The rules live apart from the tool table ([`super::table`]: schemas and calls) so that
//! what only asks which tools this machine could run (traj-sample-tools' warning and
//! `--only-available`) links none of the tools: no browser client, no sandbox. The
//! registry reads its availability here too, so both answer alike; a test checks that
//! every tool of the table has a rule and no rule lacks a tool.

use super::browser::chromium_path;
use super::config::{Availability, SANDBOX_PATH, ToolConfig, on_path};
use crate::catalog::toolsets as catalog;

/// The availability of tool `name` under `cfg`: its rule's answer, or `NotImplemented`
/// for a catalog name traj has no implementation of.
pub fn of(name: &str, cfg: &ToolConfig) -> Availability {
    match RULES.iter().find(|(n, _)| *n == name) {
        Some((_, rule)) => rule(cfg),
        None => Availability::NotImplemented("traj has no implementation".to_string()),
    }
}

/// Why toolset `name` cannot run on this machine under `cfg`: the reason of its first
/// tool that is `Unavailable` (a tool merely not configured does not count), or `None`.
pub fn why_not_here(toolset: &str, cfg: &ToolConfig) -> Option<String> {
    catalog::toolset(toolset)?
        .tools
        .iter()
        .find_map(|t| match of(t, cfg) {
            Availability::Unavailable(why) => Some(why),
            _ => None,
        })
}

/// The names of the tools that have a rule (the implemented ones), in catalog order.
pub fn implemented() -> impl Iterator<Item = &'static str> {
    RULES.iter().map(|(n, _)| *n)
}

type Rule = fn(&ToolConfig) -> Availability;

/// Each implemented tool's rule, in the catalog's order.
const RULES: &[(&str, Rule)] = &[
    ("terminal", always),
    ("process", always),
    ("read_file", always),
    ("write_file", always),
    ("patch", always),
    ("search_files", always),
    ("execute_code", python),
    ("browser_navigate", browser),
    ("browser_snapshot", browser),
    ("browser_click", browser),
    ("browser_type", browser),
    ("browser_scroll", browser),
    ("browser_back", browser),
    ("browser_press", browser),
    ("browser_get_images", browser),
    ("browser_vision", browser_vision),
    ("browser_console", browser),
    ("browser_dialog", browser),
    ("web_search", search),
    ("web_extract", web_fetch),
    ("vision_analyze", vision),
    ("image_generate", image_gen),
    ("mixture_of_agents", moa),
];

fn needs(ok: bool, why: &str) -> Availability {
    if ok {
        Availability::Available
    } else {
        Availability::NotConfigured(why.to_string())
    }
}

fn always(_: &ToolConfig) -> Availability {
    Availability::Available
}

fn python(cfg: &ToolConfig) -> Availability {
    match cfg.python {
        Some(true) => Availability::Available,
        Some(false) => needs(false, "execute_code disabled"),
        None => needs(
            on_path("python3", SANDBOX_PATH),
            "python3 is not on the sandbox PATH",
        ),
    }
}

fn web_fetch(cfg: &ToolConfig) -> Availability {
    needs(cfg.web_fetch, "web fetching disabled")
}

fn search(cfg: &ToolConfig) -> Availability {
    needs(
        cfg.search.is_some(),
        "no search provider (SearXNG, Brave or Tavily) configured",
    )
}

fn vision(cfg: &ToolConfig) -> Availability {
    needs(
        cfg.llm.as_ref().is_some_and(|l| l.vision_model.is_some()),
        "no vision model configured",
    )
}

fn image_gen(cfg: &ToolConfig) -> Availability {
    needs(
        cfg.image.is_some(),
        "no image model configured (--image-model)",
    )
}

fn browser(cfg: &ToolConfig) -> Availability {
    if cfg.chromium.unwrap_or_else(|| chromium_path().is_some()) {
        Availability::Available
    } else {
        Availability::Unavailable(
            "no chromium on this machine (install Debian's `chromium`, or set TRAJ_CHROMIUM)"
                .to_string(),
        )
    }
}

fn browser_vision(cfg: &ToolConfig) -> Availability {
    match browser(cfg) {
        Availability::Available => vision(cfg),
        other => other,
    }
}

fn moa(cfg: &ToolConfig) -> Availability {
    needs(
        cfg.llm
            .as_ref()
            .is_some_and(|l| l.moa_aggregator.is_some() && !l.moa_models.is_empty()),
        "no reference models and aggregator configured",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_of_the_table_has_a_rule_and_every_rule_a_tool() {
        let rules: Vec<&str> = implemented().collect();
        let table: Vec<&str> = super::super::table::TOOLS.iter().map(|d| d.name).collect();
        assert_eq!(rules, table);
        for name in catalog::all_tool_names() {
            let implemented = catalog::tool(name).is_some_and(|t| t.implemented);
            let a = of(name, &ToolConfig::default());
            assert_eq!(
                implemented,
                !matches!(a, Availability::NotImplemented(_)),
                "{name}: the catalog's `implemented` and the rules disagree"
            );
        }
    }
}

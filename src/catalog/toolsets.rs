//! The toolsets and the tool names traj knows, and the one rule for which toolsets a
//! distribution may draw.
//!
//! This is data, the same on every machine and in every build: each toolset's name,
//! description and `includes`, and each tool's name, the toolsets it belongs to and
//! whether traj implements it. The toolbox (`crate::toolbox`, built with the `agent`
//! feature) adds to a name what a tool is (its schema, its call) and whether this
//! machine and configuration can offer it; traj-sample-tools reads only this table,
//! so its draws do not depend on what is installed where it runs.
//!
//! Toolset and tool names follow the reference agent (hermes-agent), so task rows and
//! trajectories stay comparable. A toolset's tools are listed in the order of
//! [`TOOLS`], and the schemas traj-run offers a model follow that order.

use std::collections::BTreeSet;

/// A toolset: its name, what it is for, the other toolsets it includes; its own tools
/// are the [`TOOLS`] entries that name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toolset {
    pub name: &'static str,
    pub description: &'static str,
    pub tools: Vec<&'static str>,
    pub includes: Vec<&'static str>,
}

/// A toolset's declaration: (name, description, other toolsets it includes).
type ToolsetDef = (&'static str, &'static str, &'static [&'static str]);

/// Toolsets of the reference agent, in its order.
const TOOLSETS: &[ToolsetDef] = &[
    ("web", "search the web and read pages", &[]),
    ("search", "web search only", &[]),
    ("vision", "describe and answer questions about images", &[]),
    ("image_gen", "generate images", &[]),
    (
        "terminal",
        "run shell commands in the task's workspace",
        &[],
    ),
    ("moa", "ask several models and combine their answers", &[]),
    ("browser", "drive a web browser", &[]),
    (
        "file",
        "read, write, patch and search files in the workspace",
        &[],
    ),
    ("code_execution", "run Python snippets in the sandbox", &[]),
    ("skills", "agent skill library", &[]),
    ("cronjob", "scheduled jobs", &[]),
    ("rl", "reinforcement-learning training control", &[]),
    ("tts", "text to speech", &[]),
    ("todo", "a task list kept by the agent", &[]),
    ("memory", "persistent agent memory", &[]),
    ("session_search", "search past sessions", &[]),
    ("clarify", "ask the user a question", &[]),
    ("delegation", "hand a subtask to another agent", &[]),
    (
        "debugging",
        "terminal plus web and file tools",
        &["web", "file"],
    ),
    (
        "safe",
        "no terminal: web, vision, image generation and model mixtures",
        &["web", "vision", "image_gen"],
    ),
];

/// One tool name: the toolsets it belongs to, and whether traj implements it (the
/// toolbox's table holds an implementation exactly for these; a test checks it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolName {
    pub name: &'static str,
    pub toolsets: &'static [&'static str],
    pub implemented: bool,
}

const fn implemented(name: &'static str, toolsets: &'static [&'static str]) -> ToolName {
    ToolName {
        name,
        toolsets,
        implemented: true,
    }
}

const fn missing(name: &'static str, toolsets: &'static [&'static str]) -> ToolName {
    ToolName {
        name,
        toolsets,
        implemented: false,
    }
}

/// Every tool name, in the order toolsets list them.
pub const TOOLS: &[ToolName] = &[
    implemented("terminal", &["terminal", "debugging"]),
    implemented("process", &["terminal", "debugging"]),
    implemented("read_file", &["file"]),
    implemented("write_file", &["file"]),
    implemented("patch", &["file"]),
    implemented("search_files", &["file"]),
    implemented("execute_code", &["code_execution"]),
    implemented("browser_navigate", &["browser"]),
    implemented("browser_snapshot", &["browser"]),
    implemented("browser_click", &["browser"]),
    implemented("browser_type", &["browser"]),
    implemented("browser_scroll", &["browser"]),
    implemented("browser_back", &["browser"]),
    implemented("browser_press", &["browser"]),
    implemented("browser_get_images", &["browser"]),
    implemented("browser_vision", &["browser"]),
    implemented("browser_console", &["browser"]),
    implemented("browser_dialog", &["browser"]),
    // not offered: raw DevTools access could switch off the request filter
    missing("browser_cdp", &["browser"]),
    implemented("web_search", &["web", "search", "browser"]),
    implemented("web_extract", &["web"]),
    implemented("vision_analyze", &["vision"]),
    implemented("image_generate", &["image_gen"]),
    implemented("mixture_of_agents", &["moa", "safe"]),
    // toolsets of the reference that traj does not implement
    missing("skills_list", &["skills"]),
    missing("skill_view", &["skills"]),
    missing("skill_manage", &["skills"]),
    missing("schedule_cronjob", &["cronjob"]),
    missing("list_cronjobs", &["cronjob"]),
    missing("remove_cronjob", &["cronjob"]),
    missing("rl_list_environments", &["rl"]),
    missing("rl_select_environment", &["rl"]),
    missing("rl_get_current_config", &["rl"]),
    missing("rl_edit_config", &["rl"]),
    missing("rl_start_training", &["rl"]),
    missing("rl_check_status", &["rl"]),
    missing("rl_stop_training", &["rl"]),
    missing("rl_get_results", &["rl"]),
    missing("rl_list_runs", &["rl"]),
    missing("rl_test_inference", &["rl"]),
    missing("text_to_speech", &["tts"]),
    missing("todo", &["todo"]),
    missing("memory", &["memory"]),
    missing("session_search", &["session_search"]),
    missing("clarify", &["clarify"]),
    missing("delegate_task", &["delegation"]),
    // names only the reference's newest version uses, in no toolset: known so that
    // data from it is recognised (see [`all_tool_names`])
    missing("process_manage", &[]),
    missing("todo_list", &[]),
    missing("cronjob_manage", &[]),
    missing("browser_close", &[]),
    missing("browser_exec", &[]),
    missing("send_message", &[]),
    missing("x_search", &[]),
    missing("video_analyze", &[]),
    missing("video_gen", &[]),
    missing("computer_use", &[]),
];

/// A name that is not a toolset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown toolset {name:?} (known: {known})")]
pub struct UnknownToolset {
    pub name: String,
    pub known: String,
}

/// The entry of tool `name`.
pub fn tool(name: &str) -> Option<&'static ToolName> {
    TOOLS.iter().find(|d| d.name == name)
}

/// Every tool name traj knows, implemented or not, sorted: the tools of every toolset
/// plus names only the reference's newest version uses.
pub fn all_tool_names() -> Vec<&'static str> {
    let set: BTreeSet<&'static str> = TOOLS.iter().map(|d| d.name).collect();
    set.into_iter().collect()
}

/// All toolsets, in the reference's order, each with its own tools.
pub fn toolsets() -> Vec<Toolset> {
    TOOLSETS
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
        .collect()
}

/// One toolset by name.
pub fn toolset(name: &str) -> Option<Toolset> {
    toolsets().into_iter().find(|t| t.name == name)
}

/// Every tool of the toolsets named (their `includes` followed recursively; `all` or
/// `*` means every toolset), implemented or not, without duplicates, in order of first
/// appearance. Unknown toolset names are an error.
pub fn resolve_all(names: &[String]) -> Result<Vec<&'static str>, UnknownToolset> {
    let sets = toolsets();
    let mut out = Vec::new();
    let mut seen_tools = BTreeSet::new();
    let mut seen_sets = BTreeSet::new();
    let mut stack: Vec<&str> = Vec::new();
    for name in names.iter().rev() {
        if name == "all" || name == "*" {
            stack.extend(sets.iter().rev().map(|t| t.name));
        } else {
            stack.push(name);
        }
    }
    while let Some(name) = stack.pop() {
        let Some(set) = sets.iter().find(|t| t.name == name) else {
            let known: Vec<&str> = sets.iter().map(|t| t.name).collect();
            return Err(UnknownToolset {
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

/// THE rule for which toolsets a distribution may draw, in traj-sample-tools and in
/// traj-run's own draw alike (so one seed gives the same toolsets in both, on every
/// machine): a toolset is drawable when traj implements at least one of its tools
/// (includes followed). What this machine has (a Chromium) and what traj-run is
/// configured with (a vision model, a search provider) is not part of the rule:
/// traj-run offers the subset of a drawn toolset that can run there, and a task none of
/// whose drawn tools can run fails as `tool_host` naming them (never a request with an
/// empty tool list). `None`: drawable; else why not, in words for listings.
pub fn why_not_drawable(toolset: &str) -> Option<String> {
    let Ok(all) = resolve_all(&[toolset.to_string()]) else {
        return Some("unknown toolset".to_string());
    };
    let implemented = all.iter().any(|n| tool(n).is_some_and(|d| d.implemented));
    (!implemented).then(|| "traj implements none of its tools".to_string())
}

/// The names of the drawable toolsets ([`why_not_drawable`]'s rule).
pub fn drawable_toolsets() -> BTreeSet<String> {
    TOOLSETS
        .iter()
        .filter(|t| why_not_drawable(t.0).is_none())
        .map(|t| t.0.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_table_is_consistent() {
        let sets: BTreeSet<&str> = TOOLSETS.iter().map(|t| t.0).collect();
        assert_eq!(sets.len(), TOOLSETS.len(), "a toolset declared twice");
        let mut seen = BTreeSet::new();
        for d in TOOLS {
            assert!(seen.insert(d.name), "{} declared twice", d.name);
            for s in d.toolsets {
                assert!(sets.contains(s), "{}: unknown toolset {s}", d.name);
            }
        }
        for (name, _, includes) in TOOLSETS {
            for i in *includes {
                assert!(sets.contains(i), "{name} includes unknown {i}");
            }
        }
    }

    #[test]
    fn includes_resolve_recursively_without_duplicates() {
        let all = resolve_all(&names(&["debugging", "terminal"])).unwrap();
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
        let e = resolve_all(&names(&["nope"])).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("unknown toolset \"nope\" (known: web, ")
        );
    }

    /// The drawable toolsets are the table's alone: the browser is one whether or not
    /// this machine has a Chromium.
    #[test]
    fn drawable_toolsets_are_the_tables() {
        let drawable: Vec<String> = drawable_toolsets().into_iter().collect();
        let want = [
            "browser",
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
        assert_eq!(drawable, names(&want));
        assert_eq!(
            why_not_drawable("skills").as_deref(),
            Some("traj implements none of its tools")
        );
        assert_eq!(why_not_drawable("nope").as_deref(), Some("unknown toolset"));
    }

    /// Every toolset a built-in distribution names is drawable, and 4000 draws of each
    /// distribution draw each of its toolsets, on any machine.
    #[test]
    fn every_distribution_draws_every_listed_toolset() {
        let available = drawable_toolsets();
        for d in super::super::distributions::builtin() {
            let mut drawn = BTreeSet::new();
            for key in 0..4000 {
                let got = super::super::distributions::sample(&d, 7, key, &available);
                assert!(!got.is_empty(), "{}: empty draw for row {key}", d.name);
                drawn.extend(got);
            }
            for (t, p) in &d.toolsets {
                assert!(available.contains(t), "{}: {t} is not drawable", d.name);
                if *p > 0.0 {
                    assert!(drawn.contains(t), "{}: {t} ({p}%) never drawn", d.name);
                }
            }
        }
    }
}

//! The tools of one task: which toolsets a row gets (its own `toolsets`, `--toolsets`,
//! or a draw from `--distribution`) and the factory that makes its [`ToolHost`]; a task
//! in a container has its image checked and its container started before it is handed
//! to the agent.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::{Map, Value};

use super::config::ConfigError;
use super::image::{self, Images};
use super::record::FailureClass;
use crate::toolbox::{
    self as toolbox, Backend, Distribution, Registry, SandboxConfig, ToolConfig, ToolHost,
    distributions,
};

/// The tools of one task, and its workspace on the host when it has one (removed by the
/// host's drop, or by the engine when a stopping run leaves the task behind).
pub type Host = (Box<dyn ToolHost>, Option<PathBuf>);

/// Makes the tools of one task from its row and toolsets.
pub type HostFactory =
    dyn Fn(&Map<String, Value>, &[String]) -> Result<Host, HostError> + Sync + Send;

/// Why the tools of a task could not be made.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct HostError {
    pub class: FailureClass,
    pub retryable: bool,
    pub message: String,
}

/// The host of a task offered no tools.
struct NoTools;

impl ToolHost for NoTools {
    fn schemas(&self) -> Vec<Value> {
        Vec::new()
    }
    fn call(&mut self, name: &str, _: &Value) -> toolbox::ToolResult {
        toolbox::ToolResult::error(format!("no tool named {name:?}: this task has no tools"))
    }
}

/// The factory of task hosts; `toolsets` (the `--toolsets` default) is checked here.
pub fn host_factory(
    tool_config: &ToolConfig,
    sandbox: SandboxConfig,
    toolsets: Option<&[String]>,
) -> Result<Box<HostFactory>, ConfigError> {
    let registry = Registry::builtin(tool_config);
    if let Some(t) = toolsets {
        if let Err(e) = registry.resolve_all(t) {
            return Err(ConfigError::Toolsets(format!("{e:#}")));
        }
        if !t.is_empty() && registry.resolve(t).is_ok_and(|tools| tools.is_empty()) {
            return Err(ConfigError::Toolsets(format!(
                "no tool of {} is available here",
                t.join(", ")
            )));
        }
    }
    let images = Images::new(&sandbox.docker_cli);
    Ok(Box::new(move |row, toolsets| {
        match registry.resolve(toolsets) {
            Err(e) => {
                return Err(HostError {
                    class: FailureClass::BadTask,
                    retryable: false,
                    message: format!("{e:#}"),
                });
            }
            // Toolsets asked for, none of whose tools can run here: never `tools: []`.
            Ok(tools) if tools.is_empty() && !toolsets.is_empty() => {
                return Err(HostError {
                    class: FailureClass::ToolHost,
                    retryable: true,
                    message: format!(
                        "no tool of the toolsets {} is available here ({})",
                        toolsets.join(", "),
                        registry
                            .resolve_all(toolsets)
                            .unwrap_or_default()
                            .iter()
                            .filter_map(|t| registry.tool(t))
                            .map(|t| format!("{}: {}", t.name, t.availability.describe()))
                            .collect::<Vec<_>>()
                            .join("; ")
                    ),
                });
            }
            // No tool asked for (`toolsets: []`): no sandbox to make (or to clean up).
            Ok(tools) if tools.is_empty() => return Ok((Box::new(NoTools), None)),
            Ok(_) => {}
        }
        let tool_host = |message: String| HostError {
            class: FailureClass::ToolHost,
            retryable: true,
            message,
        };
        let spec = image::spec_of(row);
        if let Some(why) = spec
            .image
            .as_deref()
            .and_then(crate::toolbox::image_refused)
        {
            return Err(HostError {
                class: FailureClass::BadTask,
                retryable: false,
                message: why,
            });
        }
        let mut task = registry.task(toolsets, &sandbox, &spec).map_err(|e| {
            // A `cwd` no sandbox takes is the row's fault, the same on every attempt.
            if e.chain().any(|c| c.is::<crate::toolbox::BadCwd>()) {
                HostError {
                    class: FailureClass::BadTask,
                    retryable: false,
                    message: format!("{e:#}"),
                }
            } else {
                tool_host(format!("{e:#}"))
            }
        })?;
        if task.sandbox().backend() == Backend::Docker {
            // The image the sandbox runs (the row's, else the configured default).
            let img = spec.image.as_ref().or(sandbox.docker_image.as_ref());
            if let Some(img) = img {
                images.ensure(img).map_err(|e| tool_host(e.to_string()))?;
            }
            // A task that runs commands gets its container now: one that cannot start
            // is this task's failure, not a tool error inside a completed record.
            if task
                .offered()
                .iter()
                .any(|t| matches!(*t, "terminal" | "execute_code"))
            {
                task.sandbox()
                    .command(&["true"])
                    .map_err(|e| tool_host(format!("{e:#}")))?;
            }
        }
        let ws = task.workspace().to_path_buf();
        Ok((Box::new(task) as Box<dyn ToolHost>, Some(ws)))
    }))
}

/// The distribution named by `--distribution` and the toolsets available here.
pub fn distribution(
    name: Option<&str>,
    tool_config: &ToolConfig,
) -> Result<Option<(Distribution, BTreeSet<String>)>, ConfigError> {
    let Some(name) = name else {
        return Ok(None);
    };
    let Some(d) = distributions::builtin()
        .into_iter()
        .find(|d| d.name == name)
    else {
        let names: Vec<String> = distributions::builtin()
            .into_iter()
            .map(|d| d.name)
            .collect();
        return Err(ConfigError::UnknownDistribution {
            name: name.to_string(),
            known: names.join(", "),
        });
    };
    // The one availability rule traj-sample-tools draws with: one seed, one draw.
    let available = Registry::builtin(tool_config).drawable_toolsets();
    if d.fallback(&available).is_none() {
        return Err(ConfigError::NoToolsetAvailable(name.to_string()));
    }
    Ok(Some((d, available)))
}

/// Where a task's toolsets come from.
pub struct ToolsetChoice {
    /// `--toolsets`, for rows without their own.
    pub default: Option<Vec<String>>,
    /// `--distribution` and the toolsets available to draw from.
    pub distribution: Option<(Distribution, BTreeSet<String>)>,
    pub seed: u64,
}

/// Why a row's `toolsets` field cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolsetsError {
    #[error("toolsets is not a list")]
    NotAList,
    #[error("toolsets holds a non-string")]
    NotAString,
}

impl ToolsetChoice {
    /// Where the toolsets of `row` come from, as `statistics.json`'s `distribution`
    /// names it: the `distribution` a row with its own `toolsets` carries
    /// (traj-sample-tools writes it), else `task rows`; `--toolsets`; the name of the
    /// `--distribution` drawn from.
    pub fn source(&self, row: &Map<String, Value>) -> String {
        if row.contains_key("toolsets") {
            return match row.get("distribution") {
                Some(Value::String(d)) => d.clone(),
                _ => "task rows".into(),
            };
        }
        if self.default.is_some() {
            return "--toolsets".into();
        }
        match &self.distribution {
            Some((d, _)) => d.name.clone(),
            None => "none".into(),
        }
    }

    /// The toolsets of the row at `index`: its own, else the default, else a draw.
    pub fn of(&self, row: &Map<String, Value>, index: u64) -> Result<Vec<String>, ToolsetsError> {
        if let Some(v) = row.get("toolsets") {
            let Some(list) = v.as_array() else {
                return Err(ToolsetsError::NotAList);
            };
            return list
                .iter()
                .map(|t| {
                    t.as_str()
                        .map(str::to_string)
                        .ok_or(ToolsetsError::NotAString)
                })
                .collect();
        }
        if let Some(t) = &self.default {
            return Ok(t.clone());
        }
        if let Some((d, available)) = &self.distribution {
            return Ok(distributions::sample(d, self.seed, index, available));
        }
        Ok(Vec::new())
    }
}

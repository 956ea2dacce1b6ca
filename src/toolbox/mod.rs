//! The agent's tools: toolsets, schemas, and the sandboxed runtime that executes calls.
//!
//! [`ToolHost`] is what the agent loop (traj-run) talks to: the schemas offered to the
//! model, and a way to run one call.
//!
//! The pieces:
//! - `table`: the one tool table. Each tool is declared once there: its name, its
//!   toolsets, and (when traj implements it) its schema and call; [`availability`]
//!   holds each implemented tool's availability rule, apart, so that asking what this
//!   machine can run links no tool.
//! - [`Registry`] ([`registry`]): the table read under a [`ToolConfig`]: toolsets
//!   resolved (with `includes`), each tool's OpenAI function schema and availability.
//!   Tools traj does not implement (browser, image generation, ...) are listed as
//!   unavailable, never offered.
//! - the names (toolsets, tools, which traj implements), the drawable-toolset rule and
//!   the distributions are the catalog's ([`crate::catalog`]), read here too.
//! - [`sandbox`]: where commands run: `local` (fresh directory, scrubbed environment),
//!   `bwrap` (bubblewrap namespaces, no network, host read-only) or `docker` (when a
//!   prompt names an image), or `auto` (bwrap where it works, else local with a
//!   warning). Per-command timeout kills the whole process group; [`limits`] caps
//!   memory, processes, file size and CPU of every call.
//! - [`pod`]: each worker thread keeps its bwrap or local-namespace sandbox between
//!   tasks (a supervisor as the namespace's first process runs the commands and resets
//!   the sandbox when a task ends); [`exec`]: one command run to its end (process group,
//!   output cap, timeout, leftovers); [`bwrap`]: bubblewrap's command line.
//! - [`beneath`]: opening files under the workspace root from a descriptor, never
//!   following a link; the file tools ([`fs`]) open everything through it.
//! - [`reaper`]: in local mode traj is a child subreaper, and a call's orphans
//!   (`setsid`, double forks) are killed when it ends; [`ns`]: local commands in
//!   their own user + PID namespace (fresh `/proc`) where the kernel allows it.
//! - [`Task`] ([`task`]): one task's tools, over a fresh workspace; implements
//!   [`ToolHost`] and cleans up (processes, container, directory) on drop.
//!
//! ```no_run
//! use traj::toolbox::{Registry, SandboxConfig, Task, TaskSpec, ToolConfig, ToolHost};
//! let registry = Registry::builtin(&ToolConfig::default());
//! let toolsets = vec!["terminal".to_string(), "file".to_string()];
//! let mut task = registry.task(&toolsets, &SandboxConfig::default(), &TaskSpec::default())?;
//! let schemas = task.schemas(); // offered to the model
//! let result = task.call("terminal", &serde_json::json!({"command": "echo hi"}));
//! # Ok::<(), anyhow::Error>(())
//! ```

use serde_json::Value;

pub mod availability;
pub mod beneath;
pub mod browser;
pub mod bwrap;
pub mod cli;
pub mod config;
pub mod exec;
pub mod fs;
pub mod image;
pub mod limits;
pub mod llm_tools;
pub mod ns;
pub mod pod;
pub mod process;
pub mod reaper;
pub mod registry;
pub mod sandbox;
pub(crate) mod table;
pub mod task;
pub mod web;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod testserver;

pub use crate::catalog::{Distribution, distributions};
pub use cli::{ToolArgs, ToolArgsError};
pub use limits::Limits;
pub use registry::{
    Availability, LlmToolsConfig, Registry, RegistryError, SearchConfig, SearchProvider,
    ToolConfig, ToolInfo, Toolset, all_tool_names,
};
pub use sandbox::{Backend, BadCwd, SandboxConfig, image_refused};
pub use task::{Task, TaskSpec};

/// Why a tool call failed, in words for the model: a tool error it sees and can act
/// on, never an error of the run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(transparent)]
pub struct ToolError(pub String);

/// The argument `name` of a call as a string with more than white space in it, or the
/// error that says the call lacks it.
pub(crate) fn text_arg<'a>(args: &'a serde_json::Value, name: &str) -> Result<&'a str, ToolError> {
    match args.get(name) {
        Some(serde_json::Value::String(s)) if !s.trim().is_empty() => Ok(s),
        _ => Err(ToolError(format!(
            "missing required argument {name:?} (a non-empty string)"
        ))),
    }
}

impl From<String> for ToolError {
    fn from(s: String) -> ToolError {
        ToolError(s)
    }
}

impl From<crate::llm::CapReached> for ToolError {
    fn from(e: crate::llm::CapReached) -> ToolError {
        ToolError(e.to_string())
    }
}

impl From<&str> for ToolError {
    fn from(s: &str) -> ToolError {
        ToolError(s.to_string())
    }
}

impl From<ToolError> for String {
    fn from(e: ToolError) -> String {
        e.0
    }
}

impl std::ops::Deref for ToolError {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The result of one tool call, as sent back to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The `content` of the `role: "tool"` message (usually a JSON object as text).
    pub content: String,
    /// True when the call failed (the tool's own error, not a non-zero exit code).
    pub is_error: bool,
}

impl ToolResult {
    /// A successful result: `value` serialized as JSON text.
    pub fn ok(value: Value) -> ToolResult {
        ToolResult {
            content: value.to_string(),
            is_error: false,
        }
    }

    /// A failed call: `{"error": message}`.
    pub fn error(message: impl Into<String>) -> ToolResult {
        ToolResult {
            content: serde_json::json!({ "error": message.into() }).to_string(),
            is_error: true,
        }
    }
}

/// The tools of one task: what is offered, and how a call runs.
pub trait ToolHost: Send {
    /// OpenAI function schemas (`{"type":"function","function":{...}}`) offered to the model.
    fn schemas(&self) -> Vec<Value>;
    /// Wait until the host can run calls: its sandbox starts in the background, while
    /// the task's first request is in flight. An error means it never will (the task
    /// fails, retryably); called before each call, it returns at once once ready.
    fn ready(&mut self) -> Result<(), String> {
        Ok(())
    }
    /// Run one call. `args` is the parsed arguments object.
    fn call(&mut self, name: &str, args: &Value) -> ToolResult;
    /// The prompt's deadline (`--prompt-timeout`): a call after this runs a command at
    /// most until then (and never longer than the tool timeout).
    fn set_deadline(&mut self, _deadline: Option<std::time::Instant>) {}
    /// Run a verifier shell script in this task's sandbox, after the agent is done
    /// (see [`task::Task::verify`]); a host without a sandbox cannot.
    fn verify(&mut self, _check: &task::Check) -> Result<task::Checked, String> {
        Err(
            "this task has no sandbox to run the verifier in (no tools); use a \
             built-in verifier (match:, regex:, number:)"
                .into(),
        )
    }
}

//! The agent's tools: toolsets, schemas, and the sandboxed runtime that executes calls.
//!
//! [`ToolHost`] is what the agent loop (traj-run) talks to: the schemas offered to the
//! model, and a way to run one call.

use serde_json::Value;

/// The result of one tool call, as sent back to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The `content` of the `role: "tool"` message (usually a JSON object as text).
    pub content: String,
    /// True when the call failed (the tool's own error, not a non-zero exit code).
    pub is_error: bool,
}

/// The tools of one task: what is offered, and how a call runs.
pub trait ToolHost: Send {
    /// OpenAI function schemas (`{"type":"function","function":{...}}`) offered to the model.
    fn schemas(&self) -> Vec<Value>;
    /// Run one call. `args` is the parsed arguments object.
    fn call(&mut self, name: &str, args: &Value) -> ToolResult;
}

//! The data formats: what a trajectory is and how it is written, independent of where
//! the bytes come from. Nothing here imports `io`, `llm`, `run`, `stage` or `cli`.
//!
//! - [`bridge`]: hermes-agent's bridge tools (`tool_call` and the real tool it ran)
//!   and MCP tool names.
//! - [`model`]: the trajectory model (turns, tool calls and results), how a tool
//!   declaration names its tool, and the tool-success rule.
//! - [`stats`]: per-tool call, success and failure counts of a trajectory (`tool_stats`).
//! - [`hermes`]: the Hermes function-calling envelope, rendered and parsed, and the one
//!   tag scanner every stage reads tags with.
//! - [`message`]: the rules for OpenAI-style messages (text, reasoning).
//! - [`pyjson`]: JSON written as Python's `json.dumps` writes it.
//! - [`repair`]: the envelope repair of gpt turns (stray closing tags, duplicated empty
//!   `<think>` blocks, reasoning closed after an empty block), on the Hermes tag scanner.
//! - [`llamafactory`]: LLaMA-Factory's native tool-calling turns (`function_call`,
//!   `observation`), written and read.
//! - [`jsonscan`]: JSON validation and string decoding without building values.
//! - [`row`]: the borrowed row view that traj-filter, traj-merge and traj-compress share.
//! - [`outcome`]: how a row says its run ended (stop reason, failure class), counted.
//! - [`groups`]: rollouts grouped by task, and a group's rewards (mean, variance,
//!   pass@k, signal).
//! - [`tokens`]: token counting (tiktoken encodings, HF `tokenizer.json`, HF tokenizer
//!   directories with their chat template).
//! - [`chat_template`]: a model's `chat_template` rendered as transformers renders it.

pub mod bridge;
pub mod chat_template;
pub mod groups;
pub mod hermes;
pub mod jsonscan;
pub mod llamafactory;
pub mod message;
pub mod model;
pub mod outcome;
pub mod pyjson;
pub mod repair;
pub mod row;
pub mod stats;
pub mod time;
pub mod tokens;

/// A tokenizer spec that names nothing loadable is the user's to fix (exit 2); a bad
/// tokenizer file is not.
impl crate::error::Classify for tokens::TokenizerError {
    fn is_usage(&self) -> bool {
        tokens::TokenizerError::is_usage(self)
    }
}

//! What a model is sent and what is checked before its tool calls run: the agent's
//! configuration ([`AgentConfig`]: model, turn cap, prompts, time limit), the request body
//! of one call (system prompt, prefill, the messages with reasoning fields kept or left
//! out, the run's extra fields), and each tool call of a reply checked against the task's
//! tools (a known name, arguments that are a JSON object, an id for its result).

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::format::model::{ArgsError, call_arguments};

/// How requests are built and how long a prompt may run.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub model: String,
    /// Model calls allowed with tools (the final-answer request comes on top).
    pub max_turns: u32,
    pub max_tokens: Option<u64>,
    /// The request's `reasoning` object (OpenRouter), if any.
    pub reasoning: Option<Value>,
    /// The request's `provider` object (OpenRouter routing), if any.
    pub provider: Option<Value>,
    /// The agent's system prompt (identity, date, tools), sent first; never stored in
    /// records (statistics.json says which one a run used).
    pub system_prompt: Option<String>,
    /// Sent after the system prompt, in the same system message; never stored.
    pub ephemeral_system_prompt: Option<String>,
    /// Sent after the system message; never stored.
    pub prefill: Vec<Value>,
    /// Wall-clock limit per prompt.
    pub prompt_timeout: Option<Duration>,
    /// Send the assistant messages' `reasoning` / `reasoning_details` back to the
    /// provider (OpenRouter takes them; DeepSeek and others reject unknown fields).
    /// Stored messages always keep every field as returned.
    pub send_reasoning: bool,
    /// More top-level request fields (e.g. OpenRouter's `usage: {include: true}`).
    pub extra_body: Map<String, Value>,
    /// What, beside the request itself, names its answer in `--cache`: a task's copy and
    /// rollout when either is not the first (`COPY:ROLLOUT`), so that independent
    /// rollouts of one request are never one cached answer.
    pub cache_tag: Option<String>,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            model: "model".into(),
            max_turns: 10,
            max_tokens: None,
            reasoning: None,
            provider: None,
            system_prompt: None,
            ephemeral_system_prompt: None,
            prefill: Vec::new(),
            prompt_timeout: None,
            send_reasoning: false,
            extra_body: Map::new(),
            cache_tag: None,
        }
    }
}

pub(super) fn tool_names(schemas: &[Value]) -> Vec<String> {
    schemas
        .iter()
        .filter_map(|s| {
            s.pointer("/function/name")
                .or_else(|| s.get("name"))
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .collect()
}

/// Build the request body for `messages` (the system prompt, then the ephemeral one,
/// in one system message, and the prefill in front).
pub fn request_body(cfg: &AgentConfig, messages: &[Value], tools: Option<&[Value]>) -> Value {
    let mut sent = Vec::with_capacity(messages.len() + cfg.prefill.len() + 1);
    let system: Vec<&str> = [&cfg.system_prompt, &cfg.ephemeral_system_prompt]
        .into_iter()
        .flatten()
        .map(String::as_str)
        .collect();
    if !system.is_empty() {
        sent.push(json!({"role": "system", "content": system.join("\n\n")}));
    }
    sent.extend(cfg.prefill.iter().cloned());
    sent.extend(messages.iter().map(|m| outgoing(m, cfg.send_reasoning)));
    let mut body = Map::new();
    body.insert("model".into(), json!(cfg.model));
    body.insert("messages".into(), Value::Array(sent));
    if let Some(t) = tools.filter(|t| !t.is_empty()) {
        body.insert("tools".into(), Value::Array(t.to_vec()));
    }
    if let Some(m) = cfg.max_tokens {
        body.insert("max_tokens".into(), json!(m));
    }
    if let Some(r) = &cfg.reasoning {
        body.insert("reasoning".into(), r.clone());
    }
    if let Some(p) = &cfg.provider {
        body.insert("provider".into(), p.clone());
    }
    for (k, v) in &cfg.extra_body {
        body.entry(k.clone()).or_insert_with(|| v.clone());
    }
    Value::Object(body)
}

/// Why a tool call cannot run; its text is the corrective message the model gets back.
#[derive(Debug, thiserror::Error)]
pub(super) enum BadCall {
    #[error(
        "Unknown tool '{name}'. The tools available are: {available}. Call one of them with a \
         JSON object of arguments, or answer without tools."
    )]
    UnknownTool { name: String, available: String },
    #[error(
        "The arguments of '{0}' must be a JSON object. Call it again with a JSON object of \
         arguments."
    )]
    NotAnObject(String),
    #[error(
        "The arguments of '{name}' are not valid JSON ({error}). Call it again with a JSON \
         object of arguments."
    )]
    NotJson {
        name: String,
        error: serde_json::Error,
    },
}

/// Check one tool call: `Ok((id, name, args))`, or why the model must call again.
pub(super) fn check_call(
    call: &Value,
    names: &[String],
) -> Result<(String, String, Value), BadCall> {
    let name = call
        .pointer("/function/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !names.iter().any(|n| n == name) {
        return Err(BadCall::UnknownTool {
            name: name.chars().take(100).collect(),
            available: names.join(", "),
        });
    }
    let args = call_arguments(call.pointer("/function/arguments")).map_err(|e| match e {
        ArgsError::NotAnObject => BadCall::NotAnObject(name.to_string()),
        ArgsError::NotJson(error) => BadCall::NotJson {
            name: name.to_string(),
            error,
        },
    })?;
    let id = call
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    Ok((id, name.to_string(), args))
}

/// Give every tool call an `id` (some providers omit it), so that each tool result can
/// name its call.
pub(super) fn ensure_call_ids(message: &mut Value, turn: usize) {
    if let Some(calls) = message.get_mut("tool_calls").and_then(Value::as_array_mut) {
        for (k, c) in calls.iter_mut().enumerate() {
            let missing = c
                .get("id")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty);
            if missing && c.is_object() {
                c["id"] = json!(format!("call_{turn}_{k}"));
            }
        }
    }
}

/// An assistant message as sent back: the standard fields, plus the reasoning fields
/// when the provider takes them back (`send_reasoning`; some providers reject them).
fn outgoing(m: &Value, send_reasoning: bool) -> Value {
    if m.get("role").and_then(Value::as_str) != Some("assistant") {
        return m.clone();
    }
    let Some(obj) = m.as_object() else {
        return m.clone();
    };
    let keep = |k: &str| {
        matches!(k, "role" | "content" | "tool_calls" | "name")
            || (send_reasoning && matches!(k, "reasoning" | "reasoning_details"))
    };
    let mut out: Map<String, Value> = obj
        .iter()
        .filter(|(k, _)| keep(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !out.contains_key("content") {
        out.insert("content".into(), Value::Null);
    }
    Value::Object(out)
}

pub(super) fn tool_message(id: &str, content: String) -> Value {
    json!({"role": "tool", "tool_call_id": id, "content": content})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_prompt_and_ephemeral_share_one_system_message() {
        let mut c = AgentConfig {
            model: "m".into(),
            max_turns: 1,
            system_prompt: Some("agent".into()),
            ephemeral_system_prompt: Some("be brief".into()),
            prefill: vec![
                json!({"role": "user", "content": "pre"}),
                json!({"role": "assistant", "content": "fill"}),
            ],
            ..AgentConfig::default()
        };
        let user = [json!({"role": "user", "content": "q"})];
        let b = request_body(&c, &user, None);
        assert_eq!(
            b["messages"][0],
            json!({"role": "system", "content": "agent\n\nbe brief"})
        );
        c.ephemeral_system_prompt = None;
        c.prefill.clear();
        let b = request_body(&c, &user, None);
        assert_eq!(b["messages"][0]["content"], "agent");
        assert_eq!(b["messages"].as_array().unwrap().len(), 2);
    }
}

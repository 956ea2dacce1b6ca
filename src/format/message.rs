//! The rules for OpenAI-style chat messages that every stage shares: the text of a
//! `content` field and where a message keeps its reasoning.

use serde_json::Value;

/// Text of a `content` field: a string, or the text parts of a list of typed parts.
pub fn content_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => {
            let mut out = String::new();
            for p in parts {
                if let Some(t) = p.get("text").and_then(Value::as_str) {
                    out.push_str(t);
                } else if let Some(s) = p.as_str() {
                    out.push_str(s);
                }
            }
            out
        }
        _ => String::new(),
    }
}

/// Reasoning from `reasoning`, `reasoning_content` or `reasoning_details` (OpenRouter's
/// list of `{type, text|summary}`), the first one that holds text.
pub fn reasoning_text(message: &Value) -> Option<String> {
    for key in ["reasoning", "reasoning_content"] {
        if let Some(s) = message.get(key).and_then(Value::as_str)
            && !s.trim().is_empty()
        {
            return Some(s.to_string());
        }
    }
    if let Some(details) = message.get("reasoning_details").and_then(Value::as_array) {
        let mut out = String::new();
        for d in details {
            for key in ["text", "summary"] {
                if let Some(s) = d.get(key).and_then(Value::as_str) {
                    out.push_str(s);
                }
            }
        }
        if !out.trim().is_empty() {
            return Some(out);
        }
    }
    None
}

//! The rules for OpenAI-style chat messages that every stage shares: the text of a
//! `content` field, where a message keeps its reasoning, and the text of a whole
//! message as a model reads it (what token counts count).
//!
//! One rule for the text of `content`, read two ways: [`content_text`] from a `Value`
//! (traj-compress, traj-run) and [`content_text_raw`] from raw JSON (traj-filter).
//!
//! One rule for what each typed part of a `content` list is ([`part`]: text, reasoning,
//! a tool call, an image) and for the calls a tool-call part holds ([`part_calls`]):
//! traj-normalize reads a message's reasoning and calls from its parts by it, and
//! traj-filter's predicates judge a raw row's parts by it, so both agree on what a
//! LLaMA-Factory `{"type": "reasoning", "value": ...}` or `{"type": "tool_call",
//! "value": ...}` part holds.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::format::hermes::py_strip;

/// Text of a `content` field: a string, or the text parts of a list of typed parts
/// (see [`for_each_content_text`]), joined.
pub fn content_text(v: &Value) -> String {
    if let Value::String(s) = v {
        return s.clone();
    }
    let mut out = String::new();
    for_each_content_text(v, &mut |t| out.push_str(t));
    out
}

/// Call `f` on each piece of text of a `content` field, in order, without copying: the
/// string itself, or for a list of parts each part's string `text` (or, without one,
/// its string `value`, LLaMA-Factory's spelling), or a part that is a bare string.
/// Anything else (`null`, numbers, images, objects) holds no text.
pub fn for_each_content_text<'a>(v: &'a Value, f: &mut dyn FnMut(&'a str)) {
    match v {
        Value::String(s) => f(s),
        Value::Array(parts) => {
            for p in parts {
                let text = match p {
                    Value::String(s) => Some(s.as_str()),
                    Value::Object(o) => (o.get("text").and_then(Value::as_str))
                        .or_else(|| o.get("value").and_then(Value::as_str)),
                    _ => None,
                };
                if let Some(t) = text {
                    f(t);
                }
            }
        }
        _ => {}
    }
}

/// Call `f` on each piece of the text of a message as a model reads it: its content
/// ([`for_each_content_text`]), its reasoning (the rule of [`reasoning_text`]), and each
/// tool call's function name and arguments (a string as it is, other JSON as JSON).
/// This is the text token counts count (traj-compress's budget, row lengths).
pub fn for_each_text(message: &Value, f: &mut dyn FnMut(&str)) {
    if let Some(c) = message.get("content") {
        for_each_content_text(c, &mut |t| f(t));
    }
    if let Some(r) = reasoning_text(message) {
        f(&r);
    }
    if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
        for c in calls {
            let func = c.get("function").unwrap_or(c);
            if let Some(n) = func.get("name").and_then(Value::as_str) {
                f(n);
            }
            match func.get("arguments") {
                Some(Value::String(s)) => f(s),
                Some(Value::Null) | None => {}
                Some(v) => f(&v.to_string()),
            }
        }
    }
}

/// Reasoning from `reasoning`, `reasoning_content` or `reasoning_details` (OpenRouter's
/// list of `{type, text|summary}`), the first one that holds text.
pub fn reasoning_text(message: &Value) -> Option<String> {
    reasoning_of(message.as_object()?)
}

/// [`reasoning_text`] of a message's members. "Holds text" is Python's reading (not
/// empty after `str.strip()`), as the reference reads a reply.
pub fn reasoning_of(message: &Map<String, Value>) -> Option<String> {
    let holds_text = |s: &str| !py_strip(s).is_empty();
    for key in ["reasoning", "reasoning_content"] {
        if let Some(Value::String(s)) = message.get(key)
            && holds_text(s)
        {
            return Some(s.clone());
        }
    }
    if let Some(Value::Array(details)) = message.get("reasoning_details") {
        let mut out = String::new();
        for d in details {
            for key in ["text", "summary"] {
                if let Some(s) = d.get(key).and_then(Value::as_str) {
                    out.push_str(s);
                }
            }
        }
        if holds_text(&out) {
            return Some(out);
        }
    }
    None
}

/// The OpenAI role of a ShareGPT turn's `from` (`human` is `user`, `gpt` is
/// `assistant`, `observation`, `function` and `ipython` are `tool`); any other name as
/// it is. What a chat template is given, and what `--to openai` writes for a message
/// kept whole.
pub fn openai_role(from: &str) -> &str {
    match from {
        "human" | "user" => "user",
        "gpt" | "assistant" => "assistant",
        "tool" | "observation" | "function" | "ipython" => "tool",
        other => other,
    }
}

/// A message in OpenAI spelling: a ShareGPT turn (`from` and `value`, no `role`) gets
/// `role` ([`openai_role`]) and `content` in their places (`value` stays `value` beside
/// a `content` of its own: nothing is lost), its other keys kept in their order; any
/// other value as it is. For a message kept whole from a ShareGPT row and given back in
/// an OpenAI list, where a message without `role` is no message.
pub fn in_openai_spelling(message: Value) -> Value {
    let Value::Object(o) = message else {
        return message;
    };
    if o.contains_key("role") || !o.contains_key("from") {
        return Value::Object(o);
    }
    let has_content = o.contains_key("content");
    let mut m = Map::with_capacity(o.len());
    for (k, v) in o {
        match (k.as_str(), v) {
            ("from", Value::String(from)) => {
                m.insert("role".into(), Value::String(openai_role(&from).to_string()));
            }
            ("value", v) if !has_content => {
                m.insert("content".into(), v);
            }
            (_, v) => {
                m.insert(k, v);
            }
        }
    }
    Value::Object(m)
}

/// What one typed part of a `content` list is (see [`part`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Part<'a> {
    /// A text part's text (a bare string is a text part).
    Text(&'a str),
    /// A reasoning part's text.
    Reasoning(&'a str),
    /// A tool-call part (its calls: [`part_calls`]).
    ToolCall(&'a Value),
    /// An image part.
    Image,
    /// A part not understood.
    Unknown(BadPart),
}

/// A content part that is not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadPart {
    #[error("a text part without text")]
    TextWithoutText,
    #[error("a reasoning part without text")]
    ReasoningWithoutText,
    #[error("unsupported part type {0:?}")]
    Unsupported(String),
}

/// The `type` of a part (`"?"` without one).
pub fn part_type(p: &Value) -> &str {
    p.get("type").and_then(Value::as_str).unwrap_or("?")
}

/// The string under the first of `keys` that holds one.
fn part_str<'a>(p: &'a Value, keys: &[&str]) -> Option<&'a str> {
    keys.iter().find_map(|k| p.get(*k).and_then(Value::as_str))
}

/// THE rule for a typed part: `text`/`input_text`/`output_text` (text under `text`,
/// `value` or `content`), `reasoning`/`thinking`/`reasoning_text` (under `reasoning`,
/// `thinking`, `text`, `value` or `content`), `tool_call`/`tool_use`/`function_call`,
/// `image_url`/`image`/`input_image`; a bare string is text.
pub fn part(p: &Value) -> Part<'_> {
    if let Value::String(s) = p {
        return Part::Text(s);
    }
    match part_type(p) {
        "text" | "input_text" | "output_text" => match part_str(p, &["text", "value", "content"]) {
            Some(t) => Part::Text(t),
            None => Part::Unknown(BadPart::TextWithoutText),
        },
        "reasoning" | "thinking" | "reasoning_text" => {
            match part_str(p, &["reasoning", "thinking", "text", "value", "content"]) {
                Some(t) => Part::Reasoning(t),
                None => Part::Unknown(BadPart::ReasoningWithoutText),
            }
        }
        "tool_call" | "tool_use" | "function_call" => Part::ToolCall(p),
        "image_url" | "image" | "input_image" => Part::Image,
        other => Part::Unknown(BadPart::Unsupported(other.to_string())),
    }
}

/// The calls a tool-call part holds, each a call object (`{"name", "arguments"}` or
/// OpenAI's `{"function": {...}}`): LLaMA-Factory's `{"type": "tool_call", "value":
/// "<JSON call or list of calls>"}` (the JSON of its `value` or `text` string), else
/// the part itself (`{"type": "tool_use", "name", "input"}`). Err: serde_json's message
/// for a string that is not JSON.
pub fn part_calls(p: &Value) -> Result<Vec<Cow<'_, Value>>, String> {
    let inner = match part_str(p, &["value", "text"]) {
        Some(s) => serde_json::from_str::<Value>(s).map_err(|e| e.to_string())?,
        None => return Ok(vec![Cow::Borrowed(p)]),
    };
    Ok(match inner {
        Value::Array(l) => l.into_iter().map(Cow::Owned).collect(),
        one => vec![Cow::Owned(one)],
    })
}

/// [`content_text`] of a raw `content` value, borrowed when it is a string without
/// escapes (traj-filter's hot path): the same rule, read without building a `Value`.
pub fn content_text_raw(raw: Option<&RawValue>) -> Cow<'_, str> {
    #[derive(Deserialize)]
    struct Part<'b> {
        #[serde(borrow, default)]
        text: Option<&'b RawValue>,
        #[serde(borrow, default)]
        value: Option<&'b RawValue>,
    }
    let raw_str = |r: &RawValue| crate::format::jsonscan::decode_str(r.get()).map(Cow::into_owned);
    let Some(raw) = raw else {
        return Cow::Borrowed("");
    };
    match raw.get().as_bytes().first() {
        Some(b'"') => crate::format::jsonscan::decode_str(raw.get()).unwrap_or(Cow::Borrowed("")),
        Some(b'[') => {
            let parts: Vec<&RawValue> = serde_json::from_str(raw.get()).unwrap_or_default();
            let mut s = String::new();
            for part in parts {
                match part.get().as_bytes().first() {
                    Some(b'"') => {
                        if let Some(t) = raw_str(part) {
                            s.push_str(&t);
                        }
                    }
                    Some(b'{') => {
                        let Ok(p) = serde_json::from_str::<Part>(part.get()) else {
                            continue;
                        };
                        if let Some(t) = p.text.as_ref().and_then(|r| raw_str(r)) {
                            s.push_str(&t);
                        } else if let Some(v) = p.value.and_then(raw_str) {
                            s.push_str(&v);
                        }
                    }
                    _ => {}
                }
            }
            Cow::Owned(s)
        }
        _ => Cow::Borrowed(""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_sharegpt_message_in_openai_spelling_loses_nothing() {
        let m = json!({"from": "observation", "value": "v", "weight": 0});
        assert_eq!(
            in_openai_spelling(m),
            json!({"role": "tool", "content": "v", "weight": 0})
        );
        // A `content` of its own: `value` stays beside it.
        let m = json!({"from": "system", "value": "late", "content": "other"});
        assert_eq!(
            in_openai_spelling(m),
            json!({"role": "system", "value": "late", "content": "other"})
        );
        // An OpenAI message, and what is no ShareGPT turn, as they are.
        for m in [
            json!({"role": "user", "from": "x"}),
            json!({"value": 1}),
            json!(3),
        ] {
            assert_eq!(in_openai_spelling(m.clone()), m);
        }
        // The names a chat template is given (unchanged since templates count tokens).
        let roles: Vec<&str> = ["human", "gpt", "observation", "function_call", "system"]
            .into_iter()
            .map(openai_role)
            .collect();
        assert_eq!(
            roles,
            ["user", "assistant", "tool", "function_call", "system"]
        );
    }

    fn pieces(m: &Value) -> Vec<String> {
        let mut out = Vec::new();
        for_each_text(m, &mut |s| out.push(s.to_string()));
        out
    }

    #[test]
    fn content_parts() {
        let c = json!([
            {"type": "text", "text": "a"},
            {"type": "text", "value": "b"},
            {"type": "text", "text": "c", "value": "not this"},
            "d",
            {"type": "image_url", "image_url": {"url": "x"}},
            {"type": "text", "text": {"nested": 1}},
            7
        ]);
        assert_eq!(content_text(&c), "abcd");
        assert_eq!(content_text(&json!("s")), "s");
        for v in [json!(null), json!(3), json!({"text": "x"})] {
            assert_eq!(content_text(&v), "");
        }
    }

    #[test]
    fn a_message_reads_content_reasoning_and_calls() {
        let m = json!({
            "role": "assistant",
            "content": [{"type": "text", "text": "I will look."}],
            "reasoning_content": "Think first.",
            "tool_calls": [
                {"id": "1", "type": "function",
                 "function": {"name": "ls", "arguments": "{\"path\": \".\"}"}},
                {"function": {"name": "cat", "arguments": {"path": "a"}}},
                {"name": "bare", "arguments": null}
            ]
        });
        assert_eq!(
            pieces(&m),
            [
                "I will look.",
                "Think first.",
                "ls",
                "{\"path\": \".\"}",
                "cat",
                "{\"path\":\"a\"}",
                "bare"
            ]
        );
        assert!(pieces(&json!({"role": "tool", "content": null})).is_empty());
        // Blank reasoning is no text; the first field that holds some is the reasoning.
        let m = json!({"content": "x", "reasoning": " ", "reasoning_content": "y"});
        assert_eq!(pieces(&m), ["x", "y"]);
    }

    #[test]
    fn reasoning_is_blank_as_python_strips_it() {
        // U+001C..U+001F are white space to Python's strip() and not to Rust's trim().
        let m = json!({"reasoning": "\u{1c}\u{1f} ", "reasoning_details": [
            {"type": "reasoning.summary", "summary": "the "},
            {"type": "reasoning.text", "text": "plan"}
        ]});
        assert_eq!(reasoning_text(&m).as_deref(), Some("the plan"));
        let blank = json!({"reasoning_details": [{"text": "\u{1d}"}], "reasoning": "\n"});
        assert_eq!(reasoning_text(&blank), None);
        assert_eq!(reasoning_text(&json!("not a message")), None);
    }

    #[test]
    fn typed_parts_by_one_rule() {
        assert_eq!(
            part(&json!({"type": "reasoning", "value": "R"})),
            Part::Reasoning("R")
        );
        assert_eq!(
            part(&json!({"type": "text", "value": "T"})),
            Part::Text("T")
        );
        assert_eq!(part(&json!("s")), Part::Text("s"));
        assert_eq!(part(&json!({"type": "image_url"})), Part::Image);
        assert_eq!(
            part(&json!({"type": "text"})),
            Part::Unknown(BadPart::TextWithoutText)
        );
        let p = json!({"type": "tool_call", "value": "[{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\"}]"});
        assert!(matches!(part(&p), Part::ToolCall(_)));
        let calls = part_calls(&p).unwrap();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[1]["name"], "b");
        let u = json!({"type": "tool_use", "name": "c", "input": {}});
        assert_eq!(part_calls(&u).unwrap()[0]["name"], "c");
        assert!(part_calls(&json!({"type": "tool_call", "value": "{"})).is_err());
    }

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_string()).unwrap()
    }

    #[test]
    fn both_readings_follow_one_rule() {
        let parts = r#"[{"type": "text", "text": "a"}, {"type": "x", "value": "b"}]"#;
        assert_eq!(content_text_raw(Some(&raw(parts))), "ab");
        assert_eq!(content_text(&serde_json::from_str(parts).unwrap()), "ab");
        assert_eq!(content_text_raw(Some(&raw(r#""q\n""#))), "q\n");
        assert!(matches!(
            content_text_raw(Some(&raw(r#""plain""#))),
            Cow::Borrowed("plain")
        ));
        assert_eq!(
            content_text_raw(Some(&raw(r#"["s", {"text": "t"}]"#))),
            "st"
        );
        assert_eq!(content_text(&serde_json::json!(["s", {"text": "t"}])), "st");
        assert_eq!(content_text_raw(Some(&raw("5"))), "");
        assert_eq!(content_text_raw(None), "");
    }
}

//! LLaMA-Factory's native tool-calling spelling: the values of its `gpt`,
//! `function_call` and `observation` turns (ShareGPT formatting) or of its assistant,
//! `function_call` and `tool` messages (OpenAI formatting), written and read.
//!
//! What LLaMA-Factory 0.9.5 does with them (`data/converter.py`, `data/formatter.py`):
//! - a `function_call` value is JSON text, `[{"name", "arguments"}, ...]`, that its
//!   `FunctionFormatter` parses and renders with the template's own tool-call format
//!   (Qwen's `<tool_call>` blocks, ...), the arguments an object; a value that holds
//!   `<tool_call>JSON</tool_call>` is read the same way, the text before it kept as is
//!   (how reasoning and text before the calls stay with them);
//! - an `observation` value is the raw tool output, which the template wraps once
//!   (`<tool_response>` for Qwen); several results of one step are joined with
//!   [`RESPONSE_SEPARATOR`], as its OpenAI converter joins consecutive tool messages;
//! - reasoning is a leading `<think>\n…\n</think>\n\n` block of the assistant text (the
//!   templates' `thought_words`).
//!
//! The rules here (one per value):
//! - gpt (no calls): `<think>\nR\n</think>\n\n` when the turn has reasoning, then the
//!   content, byte for byte;
//! - function_call: [`calls_json`] alone when the turn has neither reasoning nor content;
//!   else the reasoning block, the content and `\n` (when not empty), and
//!   `<tool_call>` + [`calls_json`] + `</tool_call>`;
//! - observation: each result's output (a string as it is, other JSON as JSON text)
//!   joined with [`RESPONSE_SEPARATOR`].
//!
//! The JSON is written in the envelope style ([`crate::format::pyjson::Style::Envelope`]):
//! a closing tag inside an argument string is written `<\/…`, so neither LLaMA-Factory's
//! tag regexes nor the reader here can end a block early.

use std::borrow::Cow;

use serde_json::Value;

use crate::format::hermes::{self, EnvelopeError};
use crate::format::model::{GptTurn, ToolCall, ToolResult, Trajectory, Turn};
use crate::format::pyjson::{self, Style};

/// Between two results of one step in an `observation` value (LLaMA-Factory's join).
pub const RESPONSE_SEPARATOR: &str = "\n</tool_response>\n<tool_response>\n";

/// The opening of a reasoning block (LLaMA-Factory's `thought_words[0]`).
pub const THINK_OPEN: &str = "<think>\n";
/// The end of a reasoning block (LLaMA-Factory's `thought_words[1]`).
pub const THINK_CLOSE: &str = "\n</think>\n\n";

const CALL_OPEN: &str = "<tool_call>";
const CALL_CLOSE: &str = "</tool_call>";

/// The reasoning block and content of a turn, as LLaMA-Factory's assistant text.
fn text_part(g: &GptTurn, out: &mut String) -> Result<(), EnvelopeError> {
    if let Some(r) = hermes::written_reasoning(g)? {
        out.push_str(THINK_OPEN);
        out.push_str(r);
        out.push_str(THINK_CLOSE);
    }
    out.push_str(&g.content);
    Ok(())
}

/// The value of a `gpt` turn (an assistant message without calls).
pub fn render_gpt(g: &GptTurn) -> Result<String, EnvelopeError> {
    debug_assert!(g.tool_calls.is_empty());
    let mut s = String::with_capacity(g.content.len() + 32);
    text_part(g, &mut s)?;
    Ok(s)
}

/// `[{"name": …, "arguments": …}, …]`, each call's `id` after its arguments when it has
/// one (LLaMA-Factory reads `name` and `arguments` and ignores the rest).
pub fn calls_json(calls: &[ToolCall]) -> String {
    let mut out = Vec::with_capacity(64 * calls.len() + 2);
    out.push(b'[');
    for (i, c) in calls.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(b", ");
        }
        out.push(b'{');
        hermes::write_call_fields(&mut out, c);
        if let Some(id) = &c.id {
            out.extend_from_slice(b", \"id\": ");
            pyjson::write_str(&mut out, id, Style::Envelope);
        }
        out.push(b'}');
    }
    out.push(b']');
    String::from_utf8(out).expect("UTF-8")
}

/// The value of a `function_call` turn (an assistant message with calls).
pub fn render_function_call(g: &GptTurn) -> Result<String, EnvelopeError> {
    debug_assert!(!g.tool_calls.is_empty());
    let calls = calls_json(&g.tool_calls);
    let mut s = String::with_capacity(g.content.len() + calls.len() + 48);
    text_part(g, &mut s)?;
    if s.is_empty() {
        return Ok(calls);
    }
    if s.contains(CALL_OPEN) || s.contains(CALL_CLOSE) {
        return Err(EnvelopeError(
            "text before the calls contains a <tool_call> tag, which LLaMA-Factory would read as the calls".into(),
        ));
    }
    if !g.content.is_empty() {
        s.push('\n');
    }
    s.push_str(CALL_OPEN);
    s.push_str(&calls);
    s.push_str(CALL_CLOSE);
    Ok(s)
}

/// The raw output of one result: a string as it is, other JSON as its JSON text.
pub fn result_text(r: &ToolResult) -> Cow<'_, str> {
    match &r.content {
        Value::String(s) => Cow::Borrowed(s),
        v => Cow::Owned(pyjson::to_string(v, Style::Python)),
    }
}

/// The value of an `observation` turn: the results' outputs joined with
/// [`RESPONSE_SEPARATOR`]. An output that holds the separator itself could not be told
/// apart from two results, so it is refused.
pub fn render_observation(results: &[ToolResult]) -> Result<String, EnvelopeError> {
    let mut s = String::new();
    for (i, r) in results.iter().enumerate() {
        let t = result_text(r);
        if t.contains(RESPONSE_SEPARATOR) {
            return Err(EnvelopeError(format!(
                "the output of {} holds {RESPONSE_SEPARATOR:?}, LLaMA-Factory's separator of results",
                r.name
            )));
        }
        if i > 0 {
            s.push_str(RESPONSE_SEPARATOR);
        }
        s.push_str(&t);
    }
    Ok(s)
}

/// The results of an `observation` value, in order (see [`render_observation`]).
pub fn split_observation(value: &str) -> impl Iterator<Item = &str> {
    value.split(RESPONSE_SEPARATOR)
}

/// `<think>\nR\n</think>\n\nrest` → `(Some(R), rest)` (an empty block gives `None`);
/// anything else → `(None, value)`.
fn split_think(value: &str) -> (Option<&str>, &str) {
    if let Some(after) = value.strip_prefix(THINK_OPEN) {
        // LLaMA-Factory's empty thought: `<think>\n\n</think>\n\n`.
        if let Some(rest) = after.strip_prefix(THINK_CLOSE) {
            return (None, rest);
        }
        if let Some(end) = after.find(THINK_CLOSE) {
            return (Some(&after[..end]), &after[end + THINK_CLOSE.len()..]);
        }
    }
    (None, value)
}

/// Read a `gpt` value: reasoning (a leading block) and content.
pub fn parse_gpt(value: &str) -> GptTurn {
    let (r, content) = split_think(value);
    GptTurn {
        reasoning: r.map(str::to_string),
        content: content.to_string(),
        tool_calls: Vec::new(),
    }
}

/// A `function_call` value taken apart: reasoning, content, and the JSON text of the
/// calls (a list or one call), for the caller to read.
#[derive(Debug, PartialEq, Eq)]
pub struct FunctionCall<'a> {
    pub reasoning: Option<&'a str>,
    pub content: &'a str,
    pub calls: &'a str,
}

/// Read a `function_call` value (see [`render_function_call`]): the `<tool_call>` form
/// when the value ends with `</tool_call>` (bare JSON ends with `]` or `}`), the calls
/// being what follows the first `<tool_call>`.
pub fn parse_function_call(value: &str) -> FunctionCall<'_> {
    if let Some(body) = value.strip_suffix(CALL_CLOSE)
        && let Some(open) = body.find(CALL_OPEN)
    {
        let (reasoning, rest) = split_think(&body[..open]);
        return FunctionCall {
            reasoning,
            content: rest.strip_suffix('\n').unwrap_or(rest),
            calls: &body[open + CALL_OPEN.len()..],
        };
    }
    let (reasoning, calls) = split_think(value);
    FunctionCall {
        reasoning,
        content: "",
        calls,
    }
}

/// A turn that cannot be written, with its 1-based index in the written list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("turn {0}: {1}")]
pub struct BadTurn(pub usize, pub EnvelopeError);

/// `g` with each call that has no id given the `tool_call_id` of the result that
/// answers it (the next turn's, matched by name in order), so that a ShareGPT
/// `observation`, which carries no id, gets its id back when read.
fn with_result_ids<'a>(g: &'a GptTurn, next: Option<&Turn>) -> Cow<'a, GptTurn> {
    let Some(Turn::Tool(rs)) = next else {
        return Cow::Borrowed(g);
    };
    if g.tool_calls.iter().all(|c| c.id.is_some()) {
        return Cow::Borrowed(g);
    }
    let mut g = g.clone();
    let mut taken: Vec<bool> = g.tool_calls.iter().map(|c| c.id.is_some()).collect();
    for r in rs {
        if r.tool_call_id.is_empty()
            || g.tool_calls
                .iter()
                .any(|c| c.id.as_deref() == Some(&r.tool_call_id))
        {
            continue;
        }
        if let Some(k) = (0..taken.len()).find(|&k| !taken[k] && g.tool_calls[k].name == r.name) {
            g.tool_calls[k].id = Some(r.tool_call_id.clone());
            taken[k] = true;
        }
    }
    Cow::Owned(g)
}

fn turn(out: &mut Vec<u8>, keys: (&str, &str), role: &str, value: &str) {
    turn_weighted(out, keys, role, value, None);
}

/// [`turn`], with the turn's `loss_weight` after its value when it has one.
fn turn_weighted(
    out: &mut Vec<u8>,
    keys: (&str, &str),
    role: &str,
    value: &str,
    weight: Option<&Value>,
) {
    out.extend_from_slice(b"{\"");
    out.extend_from_slice(keys.0.as_bytes());
    out.extend_from_slice(b"\": ");
    pyjson::write_str(out, role, Style::Python);
    out.extend_from_slice(b", \"");
    out.extend_from_slice(keys.1.as_bytes());
    out.extend_from_slice(b"\": ");
    pyjson::write_str(out, value, Style::Python);
    if let Some(w) = weight {
        out.extend_from_slice(b", \"loss_weight\": ");
        pyjson::write_value(out, w, Style::Python);
    }
    out.push(b'}');
}

/// Append the message list of `traj` in LLaMA-Factory's spelling: ShareGPT
/// (`sharegpt`: `{"from", "value"}` turns `human`, `gpt`, `function_call`,
/// `observation`) or OpenAI formatting (`{"role", "content"}` messages `user`,
/// `assistant`, `function_call`, and one `tool` message per result, which LLaMA-Factory
/// joins itself: `{"role", "content"}` like every other message, so that every message
/// of a file has one Arrow type whatever the rows of its first block; the call's id is in
/// the `function_call` value, and a result answers the call of its place, as in an
/// `observation`). The tools go in the
/// row's `tools` column, which the template renders; the source's own system text, when
/// kept, is the first turn (`system`, which LLaMA-Factory reads as the system prompt).
/// With `weights`, a turn carries its [`crate::format::model::LOSS_WEIGHT`]
/// ([`Trajectory::loss_weight`]). On error `out` is left as it was.
pub fn write_turns(
    traj: &Trajectory,
    sharegpt: bool,
    weights: bool,
    out: &mut Vec<u8>,
) -> Result<(), BadTurn> {
    let start = out.len();
    let keys = if sharegpt {
        ("from", "value")
    } else {
        ("role", "content")
    };
    out.push(b'[');
    let mut n = 0;
    let mut sep = |out: &mut Vec<u8>| {
        if n > 0 {
            out.extend_from_slice(b", ");
        }
        n += 1;
        n
    };
    if let Some(system) = &traj.system {
        sep(out);
        turn(out, keys, "system", system);
    }
    for (ti, t) in traj.turns.iter().enumerate() {
        let k = sep(out);
        let w = if weights { traj.loss_weight(ti) } else { None };
        let made = match t {
            Turn::Human(s) => {
                turn_weighted(out, keys, if sharegpt { "human" } else { "user" }, s, w);
                Ok(())
            }
            Turn::Gpt(g) if g.tool_calls.is_empty() => render_gpt(g).map(|v| {
                let role = if sharegpt { "gpt" } else { "assistant" };
                turn_weighted(out, keys, role, &v, w)
            }),
            Turn::Gpt(g) => {
                let g = with_result_ids(g, traj.turns.get(ti + 1));
                render_function_call(&g).map(|v| turn_weighted(out, keys, "function_call", &v, w))
            }
            Turn::Tool(rs) if sharegpt => {
                render_observation(rs).map(|v| turn_weighted(out, keys, "observation", &v, w))
            }
            Turn::Tool(rs) => {
                for (i, r) in rs.iter().enumerate() {
                    if i > 0 {
                        sep(out);
                    }
                    out.extend_from_slice(b"{\"role\": \"tool\", \"content\": ");
                    pyjson::write_str(out, &result_text(r), Style::Python);
                    if let Some(w) = w {
                        out.extend_from_slice(b", \"loss_weight\": ");
                        pyjson::write_value(out, w, Style::Python);
                    }
                    out.push(b'}');
                }
                Ok(())
            }
        };
        if let Err(e) = made {
            out.truncate(start);
            return Err(BadTurn(k, e));
        }
    }
    out.push(b']');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: Option<&str>) -> ToolCall {
        ToolCall {
            id: id.map(str::to_string),
            name: "f".into(),
            arguments: json!({"q": "a</tool_call>b", "n": 1}),
        }
    }

    fn gpt(r: Option<&str>, c: &str, calls: Vec<ToolCall>) -> GptTurn {
        GptTurn {
            reasoning: r.map(str::to_string),
            content: c.into(),
            tool_calls: calls,
        }
    }

    #[test]
    fn values_are_written_as_llamafactory_reads_them() {
        assert_eq!(
            render_function_call(&gpt(None, "", vec![call(None), call(Some("c1"))])).unwrap(),
            r#"[{"name": "f", "arguments": {"q": "a<\/tool_call>b", "n": 1}}, {"name": "f", "arguments": {"q": "a<\/tool_call>b", "n": 1}, "id": "c1"}]"#
        );
        assert_eq!(
            render_function_call(&gpt(Some("why"), "Let me look.", vec![call(None)])).unwrap(),
            "<think>\nwhy\n</think>\n\nLet me look.\n<tool_call>[{\"name\": \"f\", \"arguments\": {\"q\": \"a<\\/tool_call>b\", \"n\": 1}}]</tool_call>"
        );
        assert_eq!(
            render_gpt(&gpt(Some("r"), "answer", vec![])).unwrap(),
            "<think>\nr\n</think>\n\nanswer"
        );
        assert_eq!(render_gpt(&gpt(Some(" "), "a", vec![])).unwrap(), "a");
        assert!(render_gpt(&gpt(Some("x</think>"), "a", vec![])).is_err());
        assert!(render_function_call(&gpt(None, "see <tool_call>", vec![call(None)])).is_err());
        let res = |c: Value| ToolResult {
            tool_call_id: String::new(),
            name: "f".into(),
            content: c,
        };
        assert_eq!(
            render_observation(&[res(json!("plain")), res(json!({"a": 1}))]).unwrap(),
            "plain\n</tool_response>\n<tool_response>\n{\"a\": 1}"
        );
        assert!(render_observation(&[res(json!(RESPONSE_SEPARATOR))]).is_err());
    }

    #[test]
    fn tool_messages_carry_role_and_content_alone() {
        let f = |n: &str| ToolCall {
            id: None,
            name: n.into(),
            arguments: json!({}),
        };
        let r = |id: &str, n: &str, c: &str| ToolResult {
            tool_call_id: id.into(),
            name: n.into(),
            content: json!(c),
        };
        let row = |rs: Vec<ToolResult>| Trajectory {
            turns: vec![
                Turn::Human("hi".into()),
                Turn::Gpt(gpt(None, "", vec![f("a"), f("b")])),
                Turn::Tool(rs),
            ],
            ..Trajectory::default()
        };
        let mut out = Vec::new();
        write_turns(
            &row(vec![r("c1", "a", "A"), r("", "b", "B")]),
            false,
            false,
            &mut out,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"[{"role": "user", "content": "hi"}, {"role": "function_call", "content": "[{\"name\": \"a\", \"arguments\": {}, \"id\": \"c1\"}, {\"name\": \"b\", \"arguments\": {}}]"}, {"role": "tool", "content": "A"}, {"role": "tool", "content": "B"}]"#
        );
    }

    #[test]
    fn values_read_back() {
        for g in [
            gpt(None, "", vec![call(Some("x"))]),
            gpt(Some("why\n\nso"), "", vec![call(None)]),
            gpt(None, "text\n", vec![call(None), call(None)]),
            gpt(Some("r"), "t", vec![call(None)]),
        ] {
            let v = render_function_call(&g).unwrap();
            let p = parse_function_call(&v);
            assert_eq!(p.reasoning, g.reasoning.as_deref(), "{v}");
            assert_eq!(p.content, g.content, "{v}");
            assert_eq!(p.calls, calls_json(&g.tool_calls), "{v}");
        }
        for g in [
            gpt(Some("r\n"), "\n\nx", vec![]),
            gpt(None, "<think>x", vec![]),
        ] {
            assert_eq!(parse_gpt(&render_gpt(&g).unwrap()), g);
        }
        assert_eq!(
            parse_gpt("<think>\n\n</think>\n\nhi"),
            gpt(None, "hi", vec![])
        );
        let joined = "a\n</tool_response>\n<tool_response>\nb";
        assert_eq!(split_observation(joined).collect::<Vec<_>>(), ["a", "b"]);
        let odd = gpt(
            None,
            "",
            vec![ToolCall {
                id: None,
                name: "f".into(),
                arguments: json!({"q": "<tool_call>"}),
            }],
        );
        let v = render_function_call(&odd).unwrap();
        assert_eq!(parse_function_call(&v).calls, v);
    }
}

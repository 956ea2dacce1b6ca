//! The Hermes function-calling text format of ShareGPT rows, both ways.
//!
//! Rendering (model → text) follows the reference exactly (hermes-batch-runner.md §8):
//! - [`system_prompt`]: the fixed Hermes system prompt with the offered tools as a JSON
//!   list inside `<tools>` (each `{"name", "description", "parameters", "required": null}`,
//!   or `[]` when there are none);
//! - [`render_gpt`]: `<think>\n…\n</think>\n` when there is reasoning, the content with
//!   `<REASONING_SCRATCHPAD>` turned into `<think>`, then one
//!   `<tool_call>\n{"name": …, "arguments": …}\n</tool_call>` per call; an empty
//!   `<think>\n</think>\n` in front when the text holds no `<think>` at all; `rstrip` when
//!   there are calls, `strip` when there are none;
//! - [`render_tool`]: one `<tool_response>\n{"tool_call_id": …, "name": …, "content": …}\n
//!   </tool_response>` block per result, joined with `\n`.
//!
//! JSON inside the tags is written as Python's `json.dumps` writes it (`", "`, `": "`,
//! non-ASCII as is).
//!
//! Closing tags (the envelope policy): a closing tag inside a JSON body (tool arguments,
//! tool output, tool descriptions) is written `<\/tag>`, which every JSON parser reads
//! back as the same string, so the repair loses nothing. Raw text cannot be escaped that
//! way, so a turn whose *reasoning* contains `</think>`, or whose *content* contains
//! `<tool_call>` or `</tool_call>`, is refused with an [`EnvelopeError`]: it would be
//! read back as a different turn by any Hermes parser.
//!
//! Parsing (text → model): [`parse_system`], [`parse_gpt`], [`parse_tool`]. They accept
//! what [`render_gpt`] and friends write, and are tolerant of other Hermes writers
//! (whitespace around JSON bodies, a `{"name", "content"}` response without an id, tool
//! lists written as one object per tool). A leading `<think>` block is the turn's
//! reasoning however it is framed ([`split_leading_think`]), never answer text; the
//! readers of other shapes take it the same way ([`take_leading_think`]). For any text
//! `t` these functions produced, `render(parse(t)) == t` byte for byte.
//!
//! Scanning (the one tag reader, borrowed and zero-copy, for stages that judge or quote
//! text rather than convert it): [`scan_gpt`] (reasoning, `<tool_call>` bodies and the
//! first structural problem of a gpt turn: traj-filter's `--well-formed`, traj-compress's
//! summaries), [`response_bodies`] (the `<tool_response>` blocks of a tool turn),
//! [`tools_openings`] (the `<tools>` blocks of a system turn). The parsers above find
//! their tags with the same [`Tag`]s and [`find_tag`].

use serde_json::{Map, Value};

use crate::format::model::{DeclError, GptTurn, ToolCall, ToolResult, ToolSpec};
use crate::format::pyjson::{self, Style};

/// The system prompt up to the tool list.
pub const SYSTEM_PREFIX: &str = "You are a function calling AI model. You are provided with function signatures within <tools> </tools> XML tags. You may call one or more functions to assist with the user query. If available tools are not relevant in assisting with user query, just respond in natural conversational language. Don't make assumptions about what values to plug into functions. After calling & executing the functions, you will be provided with function results within <tool_response> </tool_response> XML tags. Here are the available tools:\n";

/// The system prompt after the tool list.
pub const SYSTEM_SUFFIX: &str = "For each function call return a JSON object, with the following pydantic model json schema for each:\n{'title': 'FunctionCall', 'type': 'object', 'properties': {'name': {'title': 'Name', 'type': 'string'}, 'arguments': {'title': 'Arguments', 'type': 'object'}}, 'required': ['name', 'arguments']}\nEach function call should be enclosed within <tool_call> </tool_call> XML tags.\nExample:\n<tool_call>\n{'name': <function-name>,'arguments': <args-dict>}\n</tool_call>";

const EMPTY_THINK: &str = "<think>\n</think>\n";

/// A turn that cannot be written without breaking the tag envelope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EnvelopeError(pub String);

/// Python's `str.isspace` (Rust's `char::is_whitespace` lacks U+001C..U+001F).
fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `s.strip()`.
pub fn py_strip(s: &str) -> &str {
    s.trim_matches(py_space)
}

/// Python's `s.rstrip()`.
pub fn py_rstrip(s: &str) -> &str {
    s.trim_end_matches(py_space)
}

fn is_blank(s: &str) -> bool {
    py_strip(s).is_empty()
}

/// The tool list as it appears inside `<tools>`: `[]` when empty.
pub fn tools_json(tools: &[ToolSpec]) -> String {
    tools_json_with(tools, &[])
}

/// [`tools_json`], where `raw[i]`, when `Some`, is the text to write for the parameters
/// of tool `i` (already as [`pyjson::write_value`] writes them in [`Style::Envelope`]; see
/// [`parse_system_quick`]), in place of its `parameters`.
fn tools_json_with(tools: &[ToolSpec], raw: &[Option<&str>]) -> String {
    if tools.is_empty() {
        return "[]".to_string();
    }
    let mut out = Vec::with_capacity(256 * tools.len());
    out.push(b'[');
    for (i, t) in tools.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(b", ");
        }
        out.extend_from_slice(b"{\"name\": ");
        pyjson::write_str(&mut out, &t.name, Style::Envelope);
        out.extend_from_slice(b", \"description\": ");
        pyjson::write_str(&mut out, &t.description, Style::Envelope);
        out.extend_from_slice(b", \"parameters\": ");
        match raw.get(i).copied().flatten() {
            Some(text) => out.extend_from_slice(text.as_bytes()),
            None => pyjson::write_value(&mut out, &t.parameters, Style::Envelope),
        }
        out.extend_from_slice(b", \"required\": null}");
    }
    out.push(b']');
    String::from_utf8(out).expect("UTF-8")
}

/// The generated system turn for these tools.
pub fn system_prompt(tools: &[ToolSpec]) -> String {
    system_prompt_with(tools, &[])
}

/// [`system_prompt`] with the parameters of tool `i` written as `raw[i]` where it is
/// `Some` (as [`parse_system_quick`] gives them).
pub fn system_prompt_with(tools: &[ToolSpec], raw: &[Option<&str>]) -> String {
    let tj = tools_json_with(tools, raw);
    let mut s = String::with_capacity(SYSTEM_PREFIX.len() + SYSTEM_SUFFIX.len() + tj.len() + 20);
    s.push_str(SYSTEM_PREFIX);
    s.push_str("<tools>\n");
    s.push_str(&tj);
    s.push_str("\n</tools>\n");
    s.push_str(SYSTEM_SUFFIX);
    s
}

/// `"name": …, "arguments": …` of one call, in the envelope's spelling (the fields every
/// call body starts with, without the braces).
pub fn write_call_fields(out: &mut Vec<u8>, c: &ToolCall) {
    out.extend_from_slice(b"\"name\": ");
    pyjson::write_str(out, &c.name, Style::Envelope);
    out.extend_from_slice(b", \"arguments\": ");
    pyjson::write_value(out, &c.arguments, Style::Envelope);
}

/// The JSON body of one `<tool_call>` block: `{"name": …, "arguments": …}`.
pub fn call_json(c: &ToolCall) -> String {
    let mut out = Vec::with_capacity(64);
    out.push(b'{');
    write_call_fields(&mut out, c);
    out.push(b'}');
    String::from_utf8(out).expect("UTF-8")
}

/// The reasoning of `g` to write, when it holds more than white space (the rule of
/// every writer); an error when it would end its `<think>` block early.
pub fn written_reasoning(g: &GptTurn) -> Result<Option<&str>, EnvelopeError> {
    match g.reasoning.as_deref() {
        Some(r) if !is_blank(r) => {
            if r.contains(Tag::ThinkClose.text()) {
                return Err(EnvelopeError(
                    "reasoning contains </think>, which would end the <think> block early".into(),
                ));
            }
            Ok(Some(r))
        }
        _ => Ok(None),
    }
}

/// The value of a `gpt` turn.
pub fn render_gpt(g: &GptTurn) -> Result<String, EnvelopeError> {
    let mut s = String::with_capacity(g.content.len() + 64);
    if let Some(r) = written_reasoning(g)? {
        s.push_str("<think>\n");
        s.push_str(r);
        s.push_str("\n</think>\n");
    }
    let content = convert_scratchpad(&g.content);
    for tag in [Tag::CallOpen, Tag::CallClose] {
        if content.contains(tag.text()) {
            return Err(EnvelopeError(format!(
                "content contains {tag}, which Hermes parsers would read as a tool call"
            )));
        }
    }
    if g.tool_calls.is_empty() {
        s.push_str(&content);
        if !s.contains(Tag::ThinkOpen.text()) {
            s.insert_str(0, EMPTY_THINK);
        }
        Ok(py_strip(&s).to_string())
    } else {
        if !is_blank(&content) {
            s.push_str(&content);
            s.push('\n');
        }
        for c in &g.tool_calls {
            s.push_str("<tool_call>\n");
            s.push_str(&call_json(c));
            s.push_str("\n</tool_call>\n");
        }
        if !s.contains(Tag::ThinkOpen.text()) {
            s.insert_str(0, EMPTY_THINK);
        }
        let n = py_rstrip(&s).len();
        s.truncate(n);
        Ok(s)
    }
}

/// The JSON body of one `<tool_response>` block.
pub fn response_json(r: &ToolResult) -> String {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(b"{\"tool_call_id\": ");
    pyjson::write_str(&mut out, &r.tool_call_id, Style::Envelope);
    out.extend_from_slice(b", \"name\": ");
    pyjson::write_str(&mut out, &r.name, Style::Envelope);
    out.extend_from_slice(b", \"content\": ");
    pyjson::write_value(&mut out, &r.content, Style::Envelope);
    out.push(b'}');
    String::from_utf8(out).expect("UTF-8")
}

/// The value of a `tool` turn: one block per result, joined with `\n`.
pub fn render_tool(results: &[ToolResult]) -> String {
    let mut s = String::new();
    for (i, r) in results.iter().enumerate() {
        if i > 0 {
            s.push('\n');
        }
        s.push_str("<tool_response>\n");
        s.push_str(&response_json(r));
        s.push_str("\n</tool_response>");
    }
    s
}

/// Why Hermes text does not read back as a turn (the text of the parsers' errors).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("<tools> block has no closing </tools>")]
    ToolsUnclosed,
    #[error("<tools> block: {0}")]
    ToolsNotJson(NotJson),
    #[error("<tools>: {0}")]
    ToolsEntry(DeclError),
    /// The start of the text that follows the last call.
    #[error("text after a </tool_call>: {0:?}")]
    TextAfterCalls(String),
    /// Call `n` (1-based).
    #[error("<tool_call> {0} is not JSON: {1}")]
    CallNotJson(usize, NotJson),
    #[error("<tool_call> {0} has no closing </tool_call>")]
    CallUnclosed(usize),
    #[error("<tool_call> {0}: expected an object with \"name\" and \"arguments\"")]
    CallNotAnObject(usize),
    #[error("<tool_call> {0}: no \"name\" string")]
    CallNoName(usize),
    /// The start of the text outside the blocks.
    #[error("text outside <tool_response> blocks: {0:?}")]
    TextOutsideResponses(String),
    #[error("<tool_response> {0} has no closing </tool_response>")]
    ResponseUnclosed(usize),
}

/// No JSON value at the start of a text: serde_json's message, or `nothing`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotJson(String);

/// The first 40 characters of `s`, for messages.
fn head40(s: &str) -> String {
    s.chars().take(40).collect()
}

/// Parse one JSON value at the start of `s` (after optional white space) by the rule
/// every row is read by ([`crate::io::parse_value_prefix`]: a key written twice is
/// refused, never read as one value taking the other's place); returns the value and
/// the number of bytes it used.
fn json_prefix(s: &str) -> Result<(Value, usize), NotJson> {
    crate::io::parse_value_prefix(s).map_err(NotJson)
}

/// A reading of Hermes text, and how many keys of the JSON bodies it read have no place
/// in what it gives (so that writing it again drops them, and the caller counts them): a
/// `<tool_call>` body's keys beside `name` and `arguments` (an `id`), a
/// `<tool_response>` wrapper's beside `tool_call_id`, `name` and `content`
/// (`is_error`), a `<tools>` entry's that a [`ToolSpec`] does not carry
/// ([`ToolSpec::keys_not_carried`]: `strict`).
#[derive(Debug, Clone, PartialEq)]
pub struct Counted<T> {
    pub value: T,
    pub dropped_keys: usize,
}

/// The tools listed in a system prompt's `<tools>` block, or `None` when it has none.
///
/// Accepts a JSON list or a sequence of JSON objects (the Hermes-Function-Calling
/// spelling) between `<tools>` and `</tools>`; mentions such as "within <tools> </tools>
/// XML tags" are skipped.
pub fn parse_system(value: &str) -> Option<Result<Vec<ToolSpec>, ParseError>> {
    parse_system_counted(value).map(|r| r.map(|c| c.value))
}

/// [`parse_system`], with the keys of the entries that the tools do not carry.
pub fn parse_system_counted(value: &str) -> Option<Result<Counted<Vec<ToolSpec>>, ParseError>> {
    tools_openings(value).find_map(|start| {
        let body = value[start..].trim_start_matches(py_space);
        (body.starts_with('[') || body.starts_with('{')).then(|| parse_tools_body(body))
    })
}

fn parse_tools_body(mut body: &str) -> Result<Counted<Vec<ToolSpec>>, ParseError> {
    let mut tools = Vec::new();
    let mut dropped_keys = 0;
    loop {
        body = body.trim_start_matches(|c: char| py_space(c) || c == ',');
        if body.starts_with(TOOLS_CLOSE) {
            return Ok(Counted {
                value: tools,
                dropped_keys,
            });
        }
        if body.is_empty() {
            return Err(ParseError::ToolsUnclosed);
        }
        let (v, used) = json_prefix(body).map_err(ParseError::ToolsNotJson)?;
        body = &body[used..];
        let items = match v {
            Value::Array(items) => items,
            other => vec![other],
        };
        for t in items {
            dropped_keys += ToolSpec::keys_not_carried(&t);
            tools.push(spec_of(t).map_err(ParseError::ToolsEntry)?);
        }
    }
}

/// [`ToolSpec::from_json`], moving the `parameters` (where it reads them) into the spec.
fn spec_of(mut t: Value) -> Result<ToolSpec, crate::format::model::DeclError> {
    let at = ["/parameters", "/function/parameters"][usize::from(t["function"].is_object())];
    let parameters = t.pointer_mut(at).map(Value::take).filter(|p| !p.is_null());
    let mut spec = ToolSpec::from_json(&t)?;
    spec.parameters = parameters.unwrap_or(spec.parameters);
    Ok(spec)
}

/// Split `<tool_call>` blocks off the end of `rest`. Returns the text before the first
/// block (without the one `\n` the writer puts there) and the calls.
fn split_calls(rest: &str) -> Result<(&str, Counted<Vec<ToolCall>>), ParseError> {
    let Some(first) = find_tag(rest, Tag::CallOpen, 0) else {
        return Ok((
            rest,
            Counted {
                value: Vec::new(),
                dropped_keys: 0,
            },
        ));
    };
    let before = &rest[..first];
    let before = before.strip_suffix('\n').unwrap_or(before);
    let mut calls = Vec::new();
    let mut dropped_keys = 0;
    let mut s = &rest[first..];
    loop {
        s = s.trim_start_matches(py_space);
        if s.is_empty() {
            break;
        }
        let Some(after) = s.strip_prefix(Tag::CallOpen.text()) else {
            return Err(ParseError::TextAfterCalls(head40(s)));
        };
        let n = calls.len() + 1;
        // (A body with a key twice is refused: a second `name` would call another tool.)
        let (v, used) = json_prefix(after).map_err(|e| ParseError::CallNotJson(n, e))?;
        let tail = after[used..].trim_start_matches(py_space);
        let Some(tail) = tail.strip_prefix(Tag::CallClose.text()) else {
            return Err(ParseError::CallUnclosed(n));
        };
        let (call, dropped) = call_from_json(v, n)?;
        calls.push(call);
        dropped_keys += dropped;
        s = tail;
    }
    Ok((
        before,
        Counted {
            value: calls,
            dropped_keys,
        },
    ))
}

/// Call `n` (1-based) from its JSON body, and how many of the body's keys it does not
/// carry.
fn call_from_json(v: Value, n: usize) -> Result<(ToolCall, usize), ParseError> {
    let Value::Object(mut m) = v else {
        return Err(ParseError::CallNotAnObject(n));
    };
    let name = match m.remove("name") {
        Some(Value::String(s)) => s,
        _ => return Err(ParseError::CallNoName(n)),
    };
    let arguments = m
        .remove("arguments")
        .unwrap_or_else(|| Value::Object(Map::new()));
    let call = ToolCall {
        id: None,
        name,
        arguments,
    };
    Ok((call, m.len()))
}

/// Parse the value of a `gpt` turn into reasoning, content and calls.
///
/// A leading `<think>` block becomes the reasoning however it is framed (see
/// [`split_leading_think`]; a block holding only white space becomes none); trailing
/// `<tool_call>` blocks become calls; the rest is the content. A think block is never
/// answer text: where the text frames it otherwise than [`render_gpt`] does
/// (`<think>R</think>x`, a blank line before the calls), writing the turn again gives the
/// canonical framing.
pub fn parse_gpt(value: &str) -> Result<GptTurn, ParseError> {
    parse_gpt_checked(value).map(|(g, _)| g.value)
}

/// [`parse_gpt`] with the keys of the calls' bodies that the calls do not carry, and
/// whether [`render_gpt`] of the turn is known to give back `value` byte for byte
/// (`true` when the reading above has checked it, which it does whenever the text
/// starts with a `<think>` block; `false`: not known, or another framing).
pub fn parse_gpt_checked(value: &str) -> Result<(Counted<GptTurn>, bool), ParseError> {
    let (reasoning, rest) = match leading_reasoning(value) {
        Some((r, rest)) => (Some(r), rest),
        None => (None, value),
    };
    let (
        content,
        Counted {
            value: calls,
            dropped_keys,
        },
    ) = split_calls(rest)?;
    // White space alone before the calls is framing: no text is written there.
    let content = if !calls.is_empty() && reasoning.is_some() && is_blank(content) {
        ""
    } else {
        content
    };
    let g = GptTurn {
        reasoning: reasoning.filter(|r| !is_blank(r)).map(str::to_string),
        content: content.to_string(),
        tool_calls: calls,
    };
    let checked = reasoning.is_some() && render_gpt(&g).ok().as_deref() == Some(value);
    Ok((
        Counted {
            value: g,
            dropped_keys,
        },
        checked,
    ))
}

/// The leading `<think>` block of a turn's text, however it is framed: white space
/// before `<think>`, then the block up to the first `</think>`, gives `(R, rest)`, R the
/// block's text without one `\n` right after `<think>` and one right before `</think>`,
/// rest the text after `</think>` without one `\n` (so the canonical
/// `<think>\nR\n</think>\nrest` gives back R and rest exactly). `None` when the text does
/// not start with a closed `<think>` block.
pub fn split_leading_think(value: &str) -> Option<(&str, &str)> {
    let after_open = value
        .trim_start_matches(py_space)
        .strip_prefix(Tag::ThinkOpen.text())?;
    let close = find_tag(after_open, Tag::ThinkClose, 0)?;
    let inner = &after_open[..close];
    let inner = inner.strip_prefix('\n').unwrap_or(inner);
    let inner = inner.strip_suffix('\n').unwrap_or(inner);
    let after_close = &after_open[close + Tag::ThinkClose.text().len()..];
    Some((inner, after_close.strip_prefix('\n').unwrap_or(after_close)))
}

/// [`split_leading_think`], over blocks holding only white space: the first block that
/// holds text and the text after it, or (`""`, the text after the last block) when every
/// leading block is blank (an empty block in front of another is no reasoning).
fn leading_reasoning(value: &str) -> Option<(&str, &str)> {
    let mut found = None;
    let mut cur = value;
    while let Some((r, rest)) = split_leading_think(cur) {
        if !is_blank(r) {
            return Some((r, rest));
        }
        found = Some(("", rest));
        cur = rest;
    }
    found
}

/// A turn read from a source other than Hermes text (OpenAI content, LLaMA-Factory
/// values) whose reply starts with a `<think>` block and has no reasoning of its own:
/// the block is its reasoning, as [`parse_gpt`] reads it in Hermes text (so that the
/// Hermes text written for the turn reads back as the same turn).
pub fn take_leading_think(g: &mut GptTurn) {
    if g.reasoning.as_deref().is_some_and(|r| !is_blank(r)) {
        return;
    }
    // A scratchpad is a `<think>` block (the writers turn one into the other): read as
    // one, so that the reasoning is framed as every other turn's, once and for all.
    if let std::borrow::Cow::Owned(c) = convert_scratchpad(&g.content) {
        g.content = c;
    }
    if let Some((r, rest)) = leading_reasoning(&g.content) {
        let reasoning = (!is_blank(r)).then(|| r.to_string());
        let framing = !g.tool_calls.is_empty() && is_blank(rest);
        g.content = if framing {
            String::new()
        } else {
            rest.to_string()
        };
        g.reasoning = reasoning;
    }
}

/// Parse the value of a `tool` turn into results.
///
/// Each `<tool_response>` block holding `{"name", "content"}` (with or without
/// `tool_call_id`) gives one result; a block holding anything else gives a result whose
/// content is that body. A value with no block at all is one result holding the whole
/// text (as [`crate::format::model::tool_content_value`] reads it). Missing names and ids are
/// left empty for the caller to pair with the calls.
pub fn parse_tool(value: &str) -> Result<Vec<ToolResult>, ParseError> {
    parse_tool_counted(value).map(|c| c.value)
}

/// [`parse_tool`], with the keys of the `<tool_response>` wrappers that the results do
/// not carry.
pub fn parse_tool_counted(value: &str) -> Result<Counted<Vec<ToolResult>>, ParseError> {
    if find_tag(value, Tag::RespOpen, 0).is_none() {
        return Ok(Counted {
            value: vec![ToolResult {
                tool_call_id: String::new(),
                name: String::new(),
                content: crate::format::model::tool_content_value(value),
            }],
            dropped_keys: 0,
        });
    }
    let mut out = Vec::new();
    let mut dropped_keys = 0;
    let mut s = value;
    loop {
        s = s.trim_start_matches(py_space);
        if s.is_empty() {
            return Ok(Counted {
                value: out,
                dropped_keys,
            });
        }
        let Some(after) = s.strip_prefix(Tag::RespOpen.text()) else {
            return Err(ParseError::TextOutsideResponses(head40(s)));
        };
        // A JSON body ends where its value ends (so a literal `</tool_response>` inside
        // a JSON string cannot end it); any other body at the first closing tag. A body
        // with a key twice is no JSON body (read, one value would take the other's
        // place): it is text, as traj-filter's scanner reads it too.
        if let Ok((v, used)) = json_prefix(after) {
            let rest = after[used..].trim_start_matches(py_space);
            if let Some(tail) = rest.strip_prefix(Tag::RespClose.text()) {
                let (result, dropped) = result_from_value(v);
                out.push(result);
                dropped_keys += dropped;
                s = tail;
                continue;
            }
        }
        let Some(end) = find_tag(after, Tag::RespClose, 0) else {
            return Err(ParseError::ResponseUnclosed(out.len() + 1));
        };
        let body = &after[..end];
        s = &after[end + Tag::RespClose.text().len()..];
        out.push(ToolResult {
            tool_call_id: String::new(),
            name: String::new(),
            content: crate::format::model::tool_content_value(py_strip(body)),
        });
    }
}

/// A result from a parsed JSON body: `{"name", "content"}` (with or without
/// `tool_call_id`) is the wrapper; any other value is the content itself. With the
/// number of the wrapper's other keys, which the result does not carry.
fn result_from_value(v: Value) -> (ToolResult, usize) {
    match v {
        Value::Object(mut m) if m.contains_key("name") && m.contains_key("content") => {
            let name = match m.remove("name") {
                Some(Value::String(s)) => s,
                _ => String::new(),
            };
            let tool_call_id = match m.remove("tool_call_id") {
                Some(Value::String(s)) => s,
                _ => String::new(),
            };
            let content = m.remove("content").unwrap_or(Value::Null);
            let result = ToolResult {
                tool_call_id,
                name,
                content,
            };
            (result, m.len())
        }
        other => {
            let result = ToolResult {
                tool_call_id: String::new(),
                name: String::new(),
                content: other,
            };
            (result, 0)
        }
    }
}

// ---------------------------------------------------------------------------
// The tag scanner: one reading of the Hermes tags for every stage
// ---------------------------------------------------------------------------

/// A Hermes tag, matched literally as the Hermes chat template and its parsers do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tag {
    ThinkOpen,
    ThinkClose,
    CallOpen,
    CallClose,
    RespOpen,
    RespClose,
}

/// Every tag the scanner knows, in the order it tries them.
pub const TAGS: [Tag; 6] = [
    Tag::ThinkOpen,
    Tag::ThinkClose,
    Tag::CallOpen,
    Tag::CallClose,
    Tag::RespOpen,
    Tag::RespClose,
];

impl Tag {
    /// The tag as written.
    pub const fn text(self) -> &'static str {
        match self {
            Tag::ThinkOpen => "<think>",
            Tag::ThinkClose => "</think>",
            Tag::CallOpen => "<tool_call>",
            Tag::CallClose => "</tool_call>",
            Tag::RespOpen => "<tool_response>",
            Tag::RespClose => "</tool_response>",
        }
    }
}

impl std::fmt::Display for Tag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.text())
    }
}

/// The next Hermes tag at or after `from`: its byte offset and kind.
pub fn next_tag(s: &str, from: usize) -> Option<(usize, Tag)> {
    let b = s.as_bytes();
    let mut i = from;
    while let Some(k) = memchr::memchr(b'<', &b[i..]) {
        let p = i + k;
        let rest = &b[p..];
        if rest.len() > 1 && matches!(rest[1], b't' | b'/') {
            for tag in TAGS {
                if rest.starts_with(tag.text().as_bytes()) {
                    return Some((p, tag));
                }
            }
        }
        i = p + 1;
    }
    None
}

/// The byte offset of the first `tag` at or after `from`.
pub fn find_tag(s: &str, tag: Tag, from: usize) -> Option<usize> {
    // One searcher per tag, built once (building one costs more than most searches).
    static FINDERS: std::sync::LazyLock<[memchr::memmem::Finder<'static>; 6]> =
        std::sync::LazyLock::new(|| TAGS.map(|t| memchr::memmem::Finder::new(t.text())));
    FINDERS[tag as usize]
        .find(&s.as_bytes()[from..])
        .map(|k| from + k)
}

/// The first structural problem of a gpt turn's tags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TagError {
    #[error("<think> after a <tool_call>")]
    ThinkAfterCall,
    #[error("{0} inside an unclosed <think>")]
    InsideOpenThink(Tag),
    #[error("<think> is never closed")]
    ThinkNeverClosed,
    #[error("<tool_call> is never closed")]
    CallNeverClosed,
    #[error("{0} without an opening tag")]
    NoOpening(Tag),
    #[error("{0} in a gpt turn")]
    InGptTurn(Tag),
}

/// What a gpt turn's tags hold: reasoning, tool-call bodies, and the first problem.
#[derive(Debug, Default)]
pub struct GptScan<'a> {
    /// Some `<think>` block holds more than white space.
    pub reasoning: bool,
    /// The text inside each `<tool_call>` block, trimmed (borrowed from the turn).
    pub calls: Vec<&'a str>,
    /// The first structural problem, if any.
    pub error: Option<TagError>,
}

impl GptScan<'_> {
    fn fail(&mut self, e: TagError) {
        self.error.get_or_insert(e);
    }
}

/// Scan a gpt turn's value. Lenient: reasoning and calls are found even when the turn
/// is malformed (an unclosed `<think>` still counts as reasoning when it holds text,
/// an unclosed `<tool_call>` still gives its body).
pub fn scan_gpt(v: &str) -> GptScan<'_> {
    let mut t = GptScan::default();
    let mut pos = 0;
    while let Some((p, tag)) = next_tag(v, pos) {
        let start = p + tag.text().len();
        match tag {
            Tag::ThinkOpen => {
                if !t.calls.is_empty() {
                    t.fail(TagError::ThinkAfterCall);
                }
                match next_tag(v, start) {
                    Some((q, Tag::ThinkClose)) => {
                        t.reasoning |= !v[start..q].trim().is_empty();
                        pos = q + Tag::ThinkClose.text().len();
                    }
                    Some((q, other)) => {
                        t.reasoning |= !v[start..q].trim().is_empty();
                        t.fail(TagError::InsideOpenThink(other));
                        pos = q;
                    }
                    None => {
                        t.reasoning |= !v[start..].trim().is_empty();
                        t.fail(TagError::ThinkNeverClosed);
                        break;
                    }
                }
            }
            Tag::CallOpen => match find_tag(v, Tag::CallClose, start) {
                Some(e) => {
                    t.calls.push(v[start..e].trim());
                    pos = e + Tag::CallClose.text().len();
                }
                None => {
                    t.calls.push(v[start..].trim());
                    t.fail(TagError::CallNeverClosed);
                    break;
                }
            },
            Tag::ThinkClose | Tag::CallClose => {
                t.fail(TagError::NoOpening(tag));
                pos = start;
            }
            Tag::RespOpen | Tag::RespClose => {
                t.fail(TagError::InGptTurn(tag));
                pos = start;
            }
        }
    }
    t
}

/// Why a tool turn is not a sequence of `<tool_response>` blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ToolTurnError {
    #[error("text outside <tool_response> blocks in a tool turn")]
    TextOutside,
    #[error("tool turn holds no <tool_response> block")]
    NoBlock,
    #[error("text after the last </tool_response>")]
    TextAfter,
    #[error("<tool_response> is never closed")]
    NeverClosed,
}

/// Split a tool turn into its `<tool_response>` bodies (trimmed, borrowed); strict:
/// only white space may sit between blocks, and each body ends at the first closing tag.
pub fn response_bodies(v: &str) -> Result<Vec<&str>, ToolTurnError> {
    let b = v.as_bytes();
    let open = Tag::RespOpen.text();
    let mut bodies = Vec::new();
    let mut pos = 0;
    loop {
        let rest = &v[pos..];
        pos += rest.len() - rest.trim_start().len();
        if pos == b.len() {
            break;
        }
        if !b[pos..].starts_with(open.as_bytes()) {
            return Err(match find_tag(v, Tag::RespOpen, pos) {
                Some(_) => ToolTurnError::TextOutside,
                None if bodies.is_empty() => ToolTurnError::NoBlock,
                None => ToolTurnError::TextAfter,
            });
        }
        let start = pos + open.len();
        let Some(e) = find_tag(v, Tag::RespClose, start) else {
            return Err(ToolTurnError::NeverClosed);
        };
        bodies.push(v[start..e].trim());
        pos = e + Tag::RespClose.text().len();
    }
    if bodies.is_empty() {
        return Err(ToolTurnError::NoBlock);
    }
    Ok(bodies)
}

pub const TOOLS_OPEN: &str = "<tools>";
pub const TOOLS_CLOSE: &str = "</tools>";

/// Where the Hermes tool prompt of a system text starts and ends: its last
/// [`SYSTEM_PREFIX`], then the first [`SYSTEM_SUFFIX`] after it (the tool list between is
/// JSON, whose strings hold no line break). What traj-normalize splits the row's own
/// text off by, and what traj-compress never cuts.
pub fn tool_prompt_span(text: &str) -> Option<(usize, usize)> {
    // The prefix's searcher is built once: building it is most of the cost of one search.
    static PREFIX: std::sync::LazyLock<memchr::memmem::FinderRev<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::FinderRev::new(SYSTEM_PREFIX));
    let k = PREFIX.rfind(text.as_bytes())?;
    let e = text[k..].find(SYSTEM_SUFFIX)?;
    Some((k, k + e + SYSTEM_SUFFIX.len()))
}

/// The offset just after each `<tools>` of a system turn, in order (the template also
/// names the tags in its prose, so a reader picks the block it wants).
pub fn tools_openings(v: &str) -> impl Iterator<Item = usize> + '_ {
    memchr::memmem::find_iter(v.as_bytes(), TOOLS_OPEN.as_bytes()).map(|k| k + TOOLS_OPEN.len())
}

/// The offset of the `</tools>` closing the block whose body starts at `start`.
pub fn tools_closing(v: &str, start: usize) -> Option<usize> {
    memchr::memmem::find(&v.as_bytes()[start..], TOOLS_CLOSE.as_bytes()).map(|k| start + k)
}

/// `s` without the tags that frame calls and responses (`<tool_call>`, `</tool_call>`,
/// `<tool_response>`, `</tool_response>`), so that a quote of it never holds a call
/// without its response; borrowed when it has none.
pub fn remove_call_tags(s: &str) -> std::borrow::Cow<'_, str> {
    let mut s = std::borrow::Cow::Borrowed(s);
    // Every tag opens with `<`: most texts have none, and are given back as they are.
    if memchr::memchr(b'<', s.as_bytes()).is_none() {
        return s;
    }
    for tag in [Tag::CallOpen, Tag::CallClose, Tag::RespOpen, Tag::RespClose] {
        if s.contains(tag.text()) {
            s = std::borrow::Cow::Owned(s.replace(tag.text(), ""));
        }
    }
    s
}

mod quick;
mod scratchpad;
pub use quick::{QuickContent, QuickResult, QuickTool, parse_system_quick, parse_tool_quick};
pub use scratchpad::{convert_scratchpad, scratchpad_reasoning};

#[cfg(test)]
mod tests;

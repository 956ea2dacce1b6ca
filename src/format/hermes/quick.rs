//! The quick readings of Hermes JSON bodies in Python's spelling: a system prompt's
//! `<tools>` list and a tool turn's `<tool_response>` blocks, read without building the
//! values the writer would only write back (the tools' parameters, the tools' output).
//!
//! [`parse_system_quick`] reads what [`super::parse_system`] reads, when the list is a
//! JSON list of bare `{"name", "description", "parameters", ...}` objects in the
//! spelling [`crate::format::pyjson::writes_as_is`] names; the parameters are then kept
//! as their text, which [`super::system_prompt_with`] writes back as it is.
//! [`parse_tool_quick`] reads what [`super::parse_tool`] reads, when every block holds
//! one `{"tool_call_id", "name", "content"}` object in that spelling; the content is then
//! kept as its text, with the outcome [`classify_result`] gives it. Anything else (`None`)
//! is for the general readers, which give the same values or the error.

use std::ops::Range;

use serde_json::{Map, Value};

use super::{TOOLS_CLOSE, Tag, py_space, tools_openings};
use crate::format::jsonscan::decode_str;
use crate::format::model::{Outcome, ToolSpec, classify_result, classify_text};
use crate::format::pyjson::{as_is_prefix, as_is_string_end};

/// One tool of the list: its spec, where its parameters' text is in the prompt when it
/// is kept (the spec's `parameters` is then `null`, standing in for it), and how many
/// of its keys the spec does not carry (as [`super::Counted`] counts them).
#[derive(Debug, Clone, PartialEq)]
pub struct QuickTool {
    pub spec: ToolSpec,
    pub parameters: Option<Range<usize>>,
    pub dropped_keys: usize,
}

/// serde_json's private key for a number kept as text.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// Nesting allowed inside one member of a tool (well under the parser's limit, which
/// [`super::parse_system`] would otherwise apply).
const DEPTH: usize = 100;

/// The tools of `value`'s `<tools>` block as [`super::parse_system`] reads them:
/// `Some(None)` when it has no block, `Some(Some(tools))` when read here, `None` when
/// this reading does not apply (see the module docs).
///
/// Parameters are kept as text when that text is what [`super::tools_json`] would write
/// for them: in Python's spelling with no `</` anywhere (so no closing tag to escape) and
/// without serde_json's private number key.
pub fn parse_system_quick(value: &str) -> Option<Option<Vec<QuickTool>>> {
    let Some(at) = tools_openings(value).find_map(|start| {
        let body = value[start..].trim_start_matches(py_space);
        let at = value.len() - body.len();
        (body.starts_with('[') || body.starts_with('{')).then_some(at)
    }) else {
        return Some(None);
    };
    let b = value.as_bytes();
    if b[at] != b'[' {
        return None;
    }
    let mut tools = Vec::new();
    let mut i = at + 1;
    if b.get(i) == Some(&b']') {
        i += 1;
    } else {
        loop {
            let (tool, end) = read_tool(value, i)?;
            tools.push(tool);
            i = end;
            if b[i..].starts_with(b", ") {
                i += 2;
            } else if b.get(i) == Some(&b']') {
                i += 1;
                break;
            } else {
                return None;
            }
        }
    }
    // What the general reading does after a value: white space and commas, then the end.
    let rest = value[i..].trim_start_matches(|c: char| py_space(c) || c == ',');
    rest.starts_with(TOOLS_CLOSE).then_some(Some(tools))
}

/// The tool object at `value[i..]`; returns it and the offset after it.
fn read_tool(value: &str, i: usize) -> Option<(QuickTool, usize)> {
    let b = value.as_bytes();
    let (members, i) = object_at(value, i)?;
    let [name, description, parameters, function] =
        pick(&members, ["name", "description", "parameters", "function"]);
    if function.is_some() {
        return None;
    }
    let dropped_keys = members
        .iter()
        .filter(|(k, span)| *k != "type" && !ToolSpec::carries(k, &value[span.clone()] == "null"))
        .count();
    let string = |span: Range<usize>| {
        let text = &value[span];
        text.starts_with('"')
            .then(|| decode_str(text).map(|s| s.into_owned()))
            .flatten()
    };
    let name = string(name?)?;
    let description = match description {
        Some(d) if b[d.start] == b'"' => string(d)?,
        _ => String::new(),
    };
    let (parameters, kept) = match parameters {
        None => (Value::Object(Map::new()), None),
        Some(p) if &value[p.clone()] == "null" => (Value::Object(Map::new()), None),
        // (serde_json reads an object keyed by its private number key as a number.)
        Some(p) if !value[p.clone()].contains("</") && !value[p.clone()].contains(NUMBER_TOKEN) => {
            (Value::Null, Some(p))
        }
        Some(p) => (serde_json::from_str(&value[p]).ok()?, None),
    };
    Some((
        QuickTool {
            spec: ToolSpec {
                name,
                description,
                parameters,
            },
            parameters: kept,
            dropped_keys,
        },
        i,
    ))
}

/// An object's keys and the spans of their values, in order.
type Members<'v> = Vec<(&'v str, Range<usize>)>;

/// The spans of the members named `keys`, in that order (`None` where one is missing;
/// [`object_at`] refuses an object with a key twice).
fn pick<const N: usize>(members: &Members<'_>, keys: [&str; N]) -> [Option<Range<usize>>; N] {
    keys.map(|k| {
        members
            .iter()
            .find(|(key, _)| *key == k)
            .map(|(_, span)| span.clone())
    })
}

/// The non-empty object in Python's spelling that starts at `i` of `value`: its keys
/// and the spans of their values, and where it ends. `None` when it is not one this
/// reading takes: a key with an escape, a key twice, serde_json's private number key
/// (serde_json reads such an object as a number), other separators than `": "` and
/// `", "`, or a member nested deeper than [`DEPTH`].
fn object_at(value: &str, mut i: usize) -> Option<(Members<'_>, usize)> {
    let b = value.as_bytes();
    if b.get(i) != Some(&b'{') || b.get(i + 1) == Some(&b'}') {
        return None;
    }
    i += 1;
    let mut members: Members<'_> = Vec::new();
    loop {
        let end = as_is_string_end(b, i)?;
        let key = &value[i + 1..end - 1];
        if key.contains('\\') || key == NUMBER_TOKEN || members.iter().any(|(k, _)| *k == key) {
            return None;
        }
        i = end;
        if !b[i..].starts_with(b": ") {
            return None;
        }
        i += 2;
        let n = as_is_prefix(&value[i..], DEPTH)?;
        members.push((key, i..i + n));
        i += n;
        if b[i..].starts_with(b", ") {
            i += 2;
        } else if b.get(i) == Some(&b'}') {
            return Some((members, i + 1));
        } else {
            return None;
        }
    }
}

/// One result of a tool turn read by [`parse_tool_quick`], and how many keys of its
/// wrapper it does not carry (as [`super::Counted`] counts them).
#[derive(Debug, Clone, PartialEq)]
pub struct QuickResult {
    pub tool_call_id: String,
    pub name: String,
    pub content: QuickContent,
    pub dropped_keys: usize,
}

/// The content of a [`QuickResult`].
#[derive(Debug, Clone, PartialEq)]
pub enum QuickContent {
    /// The parsed value (the text needs the writer: a closing tag to escape, say).
    Value(Value),
    /// The JSON text of the content, which [`super::response_json`] would write as it
    /// is (where it is in the turn's text), and what [`classify_result`] says of it.
    Text(Range<usize>, Outcome),
}

/// The results of a tool turn's `value` as [`super::parse_tool`] reads them, when every
/// `<tool_response>` block holds one object in Python's spelling with a `name` and a
/// `content` (see the module docs); `None` otherwise.
pub fn parse_tool_quick(value: &str) -> Option<Vec<QuickResult>> {
    let b = value.as_bytes();
    let (open, close) = (Tag::RespOpen.text(), Tag::RespClose.text());
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        i = value.len() - value[i..].trim_start_matches(py_space).len();
        if i == value.len() {
            // (A turn without any block is read as one result by the general reader.)
            return (!out.is_empty()).then_some(out);
        }
        if !value[i..].starts_with(open) {
            return None;
        }
        i += open.len();
        // JSON white space before the body, as serde_json skips it.
        while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            i += 1;
        }
        let (result, end) = read_response(value, i)?;
        out.push(result);
        i = end;
        i = value.len() - value[i..].trim_start_matches(py_space).len();
        if !value[i..].starts_with(close) {
            return None;
        }
        i += close.len();
    }
}

/// The `{"tool_call_id", "name", "content"}` object at `value[i..]`; returns the result
/// and the offset after the object.
fn read_response(value: &str, i: usize) -> Option<(QuickResult, usize)> {
    let b = value.as_bytes();
    let (members, i) = object_at(value, i)?;
    let [id, name, content] = pick(&members, ["tool_call_id", "name", "content"]);
    let dropped_keys = members.len()
        - [&id, &name, &content]
            .iter()
            .filter(|m| m.is_some())
            .count();
    // A string member, or "" (the general reader's rule for any other value).
    let string = |span: Option<Range<usize>>| match span {
        Some(s) if b[s.start] == b'"' => decode_str(&value[s]).map(|t| t.into_owned()),
        _ => Some(String::new()),
    };
    let name_span = name?;
    let content = content?;
    let text = &value[content.clone()];
    let content = if text.contains("</") || text.contains(NUMBER_TOKEN) {
        QuickContent::Value(serde_json::from_str(text).ok()?)
    } else {
        QuickContent::Text(content, outcome_of(text)?)
    };
    Some((
        QuickResult {
            tool_call_id: string(id)?,
            name: string(Some(name_span))?,
            content,
            dropped_keys,
        },
        i,
    ))
}

/// What [`classify_result`] says of the value whose JSON text (in Python's spelling)
/// is `text`, read without building it: an object by its `error`, `content.error` and
/// `success` members, a string by [`classify_text`], anything else succeeds.
fn outcome_of(text: &str) -> Option<Outcome> {
    match text.as_bytes().first()? {
        b'"' => Some(classify_text(&decode_str(text)?)),
        b'{' => {
            let set = |v: Option<&str>| v.is_some_and(|v| v != "null");
            let m = members(text)?;
            let inner_error = match member(&m, "content") {
                Some(c) if c.starts_with('{') => set(member(&members(c)?, "error")),
                _ => false,
            };
            let fails =
                set(member(&m, "error")) || inner_error || member(&m, "success") == Some("false");
            Some(if fails {
                Outcome::Failure
            } else {
                Outcome::Success
            })
        }
        _ => Some(classify_result(&Value::Null)),
    }
}

/// The value text of member `key` of `members`.
fn member<'t>(members: &[(&str, &'t str)], key: &str) -> Option<&'t str> {
    members.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

/// The members of the object `text` (in Python's spelling, so validated and without a
/// key twice): raw keys and value texts.
fn members(text: &str) -> Option<Vec<(&str, &str)>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    if text == "{}" {
        return Some(out);
    }
    let mut i = 1;
    loop {
        let end = as_is_string_end(b, i)?;
        let key = &text[i + 1..end - 1];
        i = end + 2;
        let n = as_is_prefix(&text[i..], DEPTH)?;
        out.push((key, &text[i..i + n]));
        i += n;
        if b.get(i) == Some(&b'}') {
            return Some(out);
        }
        i += 2;
    }
}

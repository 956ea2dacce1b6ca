//! The quick reading of a system prompt's tool list: the `<tools>` list of a prompt in
//! Python's spelling, read without building the tools' parameters.
//!
//! [`parse_system_quick`] reads what [`super::parse_system`] reads, when the list is a
//! JSON list of bare `{"name", "description", "parameters", ...}` objects in the
//! spelling [`crate::format::pyjson::writes_as_is`] names; the parameters are then kept
//! as their text, which [`super::system_prompt_with`] writes back as it is. Anything
//! else (`None`) is for [`super::parse_system`], which gives the same tools or the error.

use std::ops::Range;

use serde_json::{Map, Value};

use super::{TOOLS_CLOSE, py_space, tools_openings};
use crate::format::jsonscan::decode_str;
use crate::format::model::ToolSpec;
use crate::format::pyjson::{as_is_prefix, as_is_string_end};

/// One tool of the list: its spec, and where its parameters' text is in the prompt when
/// it is kept (the spec's `parameters` is then `null`, standing in for it).
#[derive(Debug, Clone, PartialEq)]
pub struct QuickTool {
    pub spec: ToolSpec,
    pub parameters: Option<Range<usize>>,
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
fn read_tool(value: &str, mut i: usize) -> Option<(QuickTool, usize)> {
    let b = value.as_bytes();
    if b.get(i) != Some(&b'{') || b.get(i + 1) == Some(&b'}') {
        return None;
    }
    i += 1;
    let mut keys: Vec<&str> = Vec::new();
    let (mut name, mut description, mut parameters) = (None, None, None);
    loop {
        let end = as_is_string_end(b, i)?;
        let key = &value[i + 1..end - 1];
        if key.contains('\\') || keys.contains(&key) {
            return None;
        }
        keys.push(key);
        i = end;
        if !b[i..].starts_with(b": ") {
            return None;
        }
        i += 2;
        let n = as_is_prefix(&value[i..], DEPTH)?;
        let span = i..i + n;
        i += n;
        match key {
            "name" => name = Some(span),
            "description" => description = Some(span),
            "parameters" => parameters = Some(span),
            "function" => return None,
            _ => {}
        }
        if b[i..].starts_with(b", ") {
            i += 2;
        } else if b.get(i) == Some(&b'}') {
            i += 1;
            break;
        } else {
            return None;
        }
    }
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
        },
        i,
    ))
}

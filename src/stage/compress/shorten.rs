//! The texts of a turn that `--over-budget truncate` may shorten, and the turn with
//! some of them shortened, its structure kept (see [`super::fit`]).
//!
//! A turn's texts are the counted texts a model reads as prose, never its markup:
//! - ShareGPT `value`: the text between Hermes tags (a `<think>` block's reasoning, the
//!   prose around it), the tags kept; a `<tool_call>` block is kept whole (a tool
//!   call is not cut, as an OpenAI one is not); a `<tool_response>` block whose body
//!   is JSON has the strings of its `content` cut (a string `content` itself, or each
//!   string inside an object or list `content`; the whole body's strings when it has
//!   no `content`), and the body is written again as Python's `json.dumps` writes it,
//!   so the block stays valid JSON; a body that is not JSON is cut as text inside its
//!   tags. A `<tools>` block whose body is JSON (the system turn's tool list) has its
//!   `description` strings cut, and is written again as the Hermes prompt writes it:
//!   the names, types and schemas of the tools are kept, and the list stays JSON.
//! - OpenAI message: the `content` string or each text part of a typed `content` list
//!   (its `text`, else its `value`, as [`crate::format::message::for_each_content_text`]
//!   reads it), and the reasoning that is counted (`reasoning` or `reasoning_content`,
//!   else each `text` and `summary` of `reasoning_details`). Tool calls are kept.
//!
//! The texts are visited in one fixed order, so the sizes read by one visit line up
//! with the texts a later visit of the same turn replaces.

use serde_json::Value;

use super::row::Shape;
use crate::format::hermes::{self, Tag, find_tag, next_tag, py_strip};
use crate::format::pyjson;

/// What to do with one text: `Some(new)` replaces it.
pub type Edit<'a> = dyn FnMut(&str) -> Option<String> + 'a;

/// Call `f` on each text of `turn` that may be shortened, in order; the texts it
/// replaces are put in `turn`. True when any text was replaced.
pub fn each_text(turn: &mut Value, shape: Shape, f: &mut Edit<'_>) -> bool {
    let Some(obj) = turn.as_object_mut() else {
        return false;
    };
    match shape {
        Shape::ShareGpt => match obj.get_mut("value") {
            Some(Value::String(s)) => match hermes_text(s, f) {
                Some(new) => {
                    *s = new;
                    true
                }
                None => false,
            },
            _ => false,
        },
        Shape::OpenAi => {
            let mut changed = match obj.get_mut("content") {
                Some(v @ Value::String(_)) => string(v, f),
                Some(Value::Array(parts)) => {
                    let mut changed = false;
                    for p in parts {
                        changed |= match p {
                            Value::String(_) => string(p, f),
                            Value::Object(o) => match o.get("text") {
                                Some(Value::String(_)) => string(&mut o["text"], f),
                                _ => o.get_mut("value").is_some_and(|v| string(v, f)),
                            },
                            _ => false,
                        };
                    }
                    changed
                }
                _ => false,
            };
            changed |= reasoning(obj, f);
            changed
        }
    }
}

/// Offer a string value to `f`; true when replaced.
fn string(v: &mut Value, f: &mut Edit<'_>) -> bool {
    let Value::String(s) = v else {
        return false;
    };
    match f(s) {
        Some(new) => {
            *s = new;
            true
        }
        None => false,
    }
}

/// The counted reasoning of a message, by the rule of
/// [`crate::format::message::reasoning_of`].
fn reasoning(obj: &mut serde_json::Map<String, Value>, f: &mut Edit<'_>) -> bool {
    let holds_text = |s: &str| !py_strip(s).is_empty();
    for key in ["reasoning", "reasoning_content"] {
        if let Some(Value::String(s)) = obj.get(key)
            && holds_text(s)
        {
            return string(&mut obj[key], f);
        }
    }
    let Some(Value::Array(details)) = obj.get_mut("reasoning_details") else {
        return false;
    };
    let mut all = String::new();
    for d in details.iter() {
        for key in ["text", "summary"] {
            if let Some(s) = d.get(key).and_then(Value::as_str) {
                all.push_str(s);
            }
        }
    }
    if !holds_text(&all) {
        return false;
    }
    let mut changed = false;
    for d in details {
        for key in ["text", "summary"] {
            if let Some(v) = d.get_mut(key) {
                changed |= string(v, f);
            }
        }
    }
    changed
}

/// Every string inside `v` (not the keys), in order.
fn json_strings(v: &mut Value, f: &mut Edit<'_>) -> bool {
    match v {
        Value::String(_) => string(v, f),
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |c, item| json_strings(item, f) | c),
        Value::Object(members) => members
            .values_mut()
            .fold(false, |c, item| json_strings(item, f) | c),
        _ => false,
    }
}

/// A Hermes value with its texts offered to `f` (see the module paragraph); `None`
/// when nothing was replaced. The Hermes tool prompt a system turn holds (the fixed
/// template around its `<tools>` list) is markup, never cut: only the text before and
/// after it and the list's descriptions are texts (cut, the template would no longer
/// read as the Hermes prompt, and traj-normalize would take the turn for another
/// writer's prompt and drop the row's own system text with it).
fn hermes_text(s: &str, f: &mut Edit<'_>) -> Option<String> {
    let Some((k, end)) = hermes::tool_prompt_span(s) else {
        return tagged_text(s, f);
    };
    let mut changed = false;
    let mut out = String::with_capacity(s.len());
    let mut part = |out: &mut String, t: &str, f: &mut Edit<'_>| match tagged_text(t, f) {
        Some(new) => {
            out.push_str(&new);
            changed = true;
        }
        None => out.push_str(t),
    };
    part(&mut out, &s[..k], f);
    let body = k + hermes::SYSTEM_PREFIX.len();
    let suffix = end - hermes::SYSTEM_SUFFIX.len();
    out.push_str(&s[k..body]);
    let mut listed = false;
    prose(&mut out, &s[body..suffix], &mut listed, f);
    out.push_str(&s[suffix..end]);
    part(&mut out, &s[end..], f);
    (changed || listed).then_some(out)
}

/// A Hermes text's tags and the prose between them (see the module paragraph).
fn tagged_text(s: &str, f: &mut Edit<'_>) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut changed = false;
    // Where the prose before the next tag starts (all before it is written).
    let mut text = 0;
    loop {
        let Some((p, tag)) = next_tag(s, text) else {
            prose(&mut out, &s[text..], &mut changed, f);
            break;
        };
        prose(&mut out, &s[text..p], &mut changed, f);
        let start = p + tag.text().len();
        match tag {
            Tag::CallOpen => {
                let end = find_tag(s, Tag::CallClose, start)
                    .map_or(s.len(), |e| e + Tag::CallClose.text().len());
                out.push_str(&s[p..end]);
                text = end;
            }
            Tag::RespOpen => match json_body(s, start, Tag::RespClose.text()) {
                Some((mut v, (from, to), end)) => {
                    let edited = match v.get_mut("content") {
                        Some(c) => json_strings(c, f),
                        None => json_strings(&mut v, f),
                    };
                    out.push_str(&s[p..from]);
                    if edited {
                        out.push_str(&pyjson::to_string(&v, pyjson::Style::Envelope));
                        changed = true;
                    } else {
                        out.push_str(&s[from..to]);
                    }
                    out.push_str(&s[to..end]);
                    text = end;
                }
                None => {
                    // A body that is not JSON: its text, inside its tags.
                    let Some(e) = find_tag(s, Tag::RespClose, start) else {
                        out.push_str(&s[p..start]);
                        text = start;
                        continue;
                    };
                    let body = &s[start..e];
                    let lead = body.len() - body.trim_start().len();
                    let inner = body.trim();
                    out.push_str(&s[p..start + lead]);
                    prose(&mut out, inner, &mut changed, f);
                    let end = e + Tag::RespClose.text().len();
                    out.push_str(&s[start + lead + inner.len()..end]);
                    text = end;
                }
            },
            _ => {
                out.push_str(&s[p..start]);
                text = start;
            }
        }
    }
    changed.then_some(out)
}

/// Offer a stretch of prose (not empty) to `f`, writing it or what replaces it. A
/// `<tools>` block whose body is JSON (a system turn's tool list) is not prose: the
/// text before and after it is, and in the list each `description` string is a text
/// of its own; the list is written again as the Hermes prompt writes it, so it stays
/// JSON, and its tags are kept.
fn prose(out: &mut String, t: &str, changed: &mut bool, f: &mut Edit<'_>) {
    if let Some((open, mut v, (from, to), close)) = tools_json(t) {
        prose_text(out, &t[..open], changed, f);
        out.push_str(&t[open..from]);
        if descriptions(&mut v, f) {
            out.push_str(&pyjson::to_string(&v, pyjson::Style::Envelope));
            *changed = true;
        } else {
            out.push_str(&t[from..to]);
        }
        out.push_str(&t[to..close]);
        prose(out, &t[close..], changed, f);
        return;
    }
    prose_text(out, t, changed, f);
}

/// The first `<tools>` block of `t` whose body is a JSON list or object followed by
/// `</tools>`: where its opening tag starts, the body (parsed) and its span, and the end
/// of the closing tag.
fn tools_json(t: &str) -> Option<(usize, Value, (usize, usize), usize)> {
    hermes::tools_openings(t).find_map(|start| {
        if !t[start..].trim_start().starts_with(['[', '{']) {
            return None;
        }
        let (v, span, end) = json_body(t, start, hermes::TOOLS_CLOSE)?;
        Some((start - hermes::TOOLS_OPEN.len(), v, span, end))
    })
}

/// Every string under a `description` key inside `v`, in order.
fn descriptions(v: &mut Value, f: &mut Edit<'_>) -> bool {
    match v {
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |c, item| descriptions(item, f) | c),
        Value::Object(members) => members.iter_mut().fold(false, |c, (k, item)| {
            let edited = match item {
                Value::String(_) if k == "description" => string(item, f),
                _ => descriptions(item, f),
            };
            edited | c
        }),
        _ => false,
    }
}

/// Offer a stretch of text (not empty) to `f` as one text.
fn prose_text(out: &mut String, t: &str, changed: &mut bool, f: &mut Edit<'_>) {
    match (!t.is_empty()).then(|| f(t)).flatten() {
        Some(new) => {
            out.push_str(&new);
            *changed = true;
        }
        None => out.push_str(t),
    }
}

/// The JSON body of the block whose opening tag ends at `start` (a `<tool_response>`,
/// a `<tools>`): the value, parsed once, its span, and the end of the `close` tag. `None`
/// when the body is not one JSON value by the rule every row is read by (a key written
/// twice is no JSON body: written again, one value would be lost; it is text) followed
/// by `close` (white space around it allowed).
fn json_body(s: &str, start: usize, close: &str) -> Option<(Value, (usize, usize), usize)> {
    let rest = &s[start..];
    let from = start + (rest.len() - rest.trim_start().len());
    let (v, used) = crate::io::parse_value_prefix(&s[from..]).ok()?;
    let to = from + used;
    let after = &s[to..];
    let at = to + (after.len() - after.trim_start().len());
    s[at..]
        .starts_with(close)
        .then(|| (v, (from, to), at + close.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The texts of a turn, in order.
    fn texts(turn: &Value, shape: Shape) -> Vec<String> {
        let mut out = Vec::new();
        each_text(&mut turn.clone(), shape, &mut |s| {
            out.push(s.to_string());
            None
        });
        out
    }

    /// Every text longer than 3 characters replaced by `<N>`, its length.
    fn cut(turn: &Value, shape: Shape) -> Value {
        let mut t = turn.clone();
        each_text(&mut t, shape, &mut |s| {
            (s.len() > 3).then(|| format!("<{}>", s.len()))
        });
        t
    }

    fn blocks_json(v: &str) -> Vec<Value> {
        crate::format::hermes::response_bodies(v)
            .expect("blocks")
            .iter()
            .map(|b| serde_json::from_str(b).expect("json body"))
            .collect()
    }

    #[test]
    fn hermes_responses_with_object_and_list_content_stay_json() {
        let a =
            pyjson::dumps(&json!({"name": "bash", "content": {"stdout": "x".repeat(50), "rc": 0}}));
        let b = pyjson::dumps(&json!({"name": "ls", "content": ["y".repeat(9), "ab"]}));
        let c = pyjson::dumps(&json!({"name": "cat", "content": "z".repeat(7)}));
        let v = format!(
            "<tool_response>\n{a}\n</tool_response>\n<tool_response>\n{b}\n</tool_response>\n<tool_response>\n{c}\n</tool_response>"
        );
        let turn = json!({"from": "tool", "value": v});
        let want = [
            "x".repeat(50),
            "\n".into(),
            "y".repeat(9),
            "ab".into(),
            "\n".into(),
            "z".repeat(7),
        ];
        assert_eq!(texts(&turn, Shape::ShareGpt), want);
        let out = cut(&turn, Shape::ShareGpt);
        let bodies = blocks_json(out["value"].as_str().unwrap());
        assert_eq!(
            bodies[0],
            json!({"name": "bash", "content": {"stdout": "<50>", "rc": 0}})
        );
        assert_eq!(bodies[1], json!({"name": "ls", "content": ["<9>", "ab"]}));
        assert_eq!(bodies[2], json!({"name": "cat", "content": "<7>"}));
    }

    #[test]
    fn a_response_body_with_a_key_twice_is_text_and_keeps_both_values() {
        let body = r#"{"name": "t", "content": "ok", "dup": 1, "dup": 2}"#;
        let turn =
            json!({"from": "tool", "value": format!("<tool_response>\n{body}\n</tool_response>")});
        assert_eq!(texts(&turn, Shape::ShareGpt), [body]);
    }

    #[test]
    fn hermes_tags_and_calls_are_kept() {
        let v = "<think>\nlong reasoning\n</think>\nthe answer <tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"long argument\"}}\n</tool_call>";
        let turn = json!({"from": "gpt", "value": v});
        assert_eq!(
            texts(&turn, Shape::ShareGpt),
            ["\nlong reasoning\n", "\nthe answer "]
        );
        assert_eq!(
            cut(&turn, Shape::ShareGpt)["value"],
            "<think><16></think><12><tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"long argument\"}}\n</tool_call>"
        );
        // A body that is not JSON is cut inside its tags; after an unclosed tag, prose.
        let turn =
            json!({"from": "tool", "value": "<tool_response>\nplain output\n</tool_response>"});
        assert_eq!(
            cut(&turn, Shape::ShareGpt)["value"],
            "<tool_response>\n<12>\n</tool_response>"
        );
        let turn = json!({"from": "tool", "value": "<tool_response>\n{\"a\": 1}"});
        assert_eq!(texts(&turn, Shape::ShareGpt), ["\n{\"a\": 1}"]);
    }

    #[test]
    fn a_tool_list_keeps_its_json_and_tags_and_only_descriptions_are_cut() {
        let tools = vec![crate::format::model::ToolSpec {
            name: "web_search_with_a_long_name".into(),
            description: "Search the web for anything.".into(),
            parameters: json!({"type": "object", "properties": {"query": {"type": "string", "description": "What to look for."}}, "required": ["query"]}),
        }];
        let v = hermes::system_prompt(&tools);
        let turn = json!({"from": "system", "value": v});
        let got = texts(&turn, Shape::ShareGpt);
        // The template around the list is markup: the descriptions are the texts (and
        // the line breaks around the list, which are never cut).
        let long: Vec<_> = got.iter().filter(|t| t.trim().len() > 1).collect();
        assert_eq!(
            long,
            ["Search the web for anything.", "What to look for."],
            "{got:?}"
        );
        // Own text before the prompt, and text after it, are texts.
        let own = json!({"from": "system", "value": format!("Be brief.\n\n{v}\n\nA notice.")});
        let got = texts(&own, Shape::ShareGpt);
        assert_eq!(got.first().map(String::as_str), Some("Be brief.\n\n"));
        assert_eq!(got.last().map(String::as_str), Some("\n\nA notice."));
        let cut_own = cut(&own, Shape::ShareGpt);
        let cut_own = cut_own["value"].as_str().unwrap();
        assert!(
            cut_own.contains(crate::format::hermes::SYSTEM_PREFIX),
            "{cut_own}"
        );
        assert!(
            cut_own.contains(crate::format::hermes::SYSTEM_SUFFIX),
            "{cut_own}"
        );
        let out = cut(&turn, Shape::ShareGpt);
        let out = out["value"].as_str().unwrap();
        let listed = hermes::parse_system(out)
            .expect("a tool list")
            .expect("JSON");
        assert_eq!(listed[0].name, tools[0].name);
        assert_eq!(listed[0].description, "<28>");
        assert_eq!(
            listed[0].parameters["properties"]["query"],
            json!({"type": "string", "description": "<17>"})
        );
        assert_eq!(listed[0].parameters["required"], json!(["query"]));
        assert!(
            out.contains("<tools>\n[{") && out.contains("}]\n</tools>"),
            "{out}"
        );
        // Uncut, the list is written as it was.
        let mut same = turn.clone();
        each_text(&mut same, Shape::ShareGpt, &mut |_| None);
        assert_eq!(same, turn);
    }

    #[test]
    fn openai_parts_and_the_counted_reasoning() {
        let turn = json!({
            "role": "assistant",
            "content": [{"type": "text", "text": "a text"}, {"type": "text", "value": "a value"}, {"type": "image_url", "image_url": {"url": "u"}}, "bare"],
            "reasoning": " ",
            "reasoning_content": "the reasoning",
            "tool_calls": [{"function": {"name": "f", "arguments": "{\"long\": \"argument\"}"}}]
        });
        assert_eq!(
            texts(&turn, Shape::OpenAi),
            ["a text", "a value", "bare", "the reasoning"]
        );
        let out = cut(&turn, Shape::OpenAi);
        assert_eq!(out["content"][0], json!({"type": "text", "text": "<6>"}));
        assert_eq!(out["content"][1], json!({"type": "text", "value": "<7>"}));
        assert_eq!(out["content"][2], turn["content"][2]);
        assert_eq!(out["reasoning"], " ");
        assert_eq!(out["reasoning_content"], "<13>");
        assert_eq!(out["tool_calls"], turn["tool_calls"]);
        let turn = json!({"role": "assistant", "reasoning_details": [{"type": "reasoning.text", "text": "step one"}, {"summary": "sum"}]});
        assert_eq!(texts(&turn, Shape::OpenAi), ["step one", "sum"]);
    }
}

//! The predicates' reading of raw run records (OpenAI `messages`): reasoning from the
//! reasoning fields, the content's reasoning parts or its tags, calls from `tool_calls`
//! and the content's tool-call parts (typed parts read by the one message rule,
//! [`message::part`], as traj-normalize reads them), offered tools from the row's
//! `tools` (or `--tools FILE`), and calls paired with tool results by id (calls of
//! parts carry none: the results without an id that follow answer them).

use std::borrow::Cow;

use serde_json::Value;
use serde_json::value::RawValue;

use super::{BadCall, Facts, JsonCall, NoToolList, Offered, Predicates, set_once};
use crate::format::hermes::scan_gpt;
use crate::format::message::{self, Part};
use crate::format::row::{BadRow, Message, RowView, raw_str};
use crate::format::tokens::Tokenizer;

fn nonblank_str(raw: Option<&RawValue>) -> bool {
    raw.and_then(raw_str).is_some_and(|s| !s.trim().is_empty())
}

/// `reasoning_details` whose entries' texts and summaries hold text (the rule of
/// [`message::reasoning_of`], by which traj-normalize reads them as the turn's reasoning).
fn details_reasoning(raw: Option<&RawValue>) -> bool {
    raw.filter(|r| r.get().starts_with('['))
        .and_then(|r| serde_json::from_str::<Value>(r.get()).ok())
        .is_some_and(|details| {
            let mut m = serde_json::Map::new();
            m.insert("reasoning_details".into(), details);
            message::reasoning_of(&m).is_some()
        })
}

/// Call `f` on each text of a message that token counts count: the one rule of
/// [`message::for_each_text`] (content, the first reasoning field that holds text, each
/// call's name and arguments), as traj-compress counts a row against its budget.
fn for_each_text(m: &Message<'_>, f: &mut dyn FnMut(&str)) {
    let parse = |r: Option<&RawValue>| r.and_then(|r| serde_json::from_str::<Value>(r.get()).ok());
    let mut v = serde_json::Map::new();
    // A string content (nearly every message, and most of a row's bytes) is one text,
    // itself: counted as it is decoded, never copied into a `Value` first.
    let content = match m.content.and_then(raw_str) {
        Some(text) => {
            f(&text);
            None
        }
        None => m.content,
    };
    for (key, raw) in [
        ("content", content),
        ("reasoning", m.reasoning),
        ("reasoning_content", m.reasoning_content),
        ("reasoning_details", m.reasoning_details),
    ] {
        if let Some(x) = parse(raw) {
            v.insert(key.into(), x);
        }
    }
    if let Some(calls) = &m.tool_calls {
        let calls = calls
            .iter()
            .map(|c| {
                let mut func = serde_json::Map::new();
                if let Some(fe) = &c.function {
                    if let Some(n) = &fe.name {
                        func.insert("name".into(), Value::String(n.to_string()));
                    }
                    if let Some(a) = parse(fe.arguments) {
                        func.insert("arguments".into(), a);
                    }
                }
                serde_json::json!({ "function": func })
            })
            .collect();
        v.insert("tool_calls".into(), Value::Array(calls));
    }
    message::for_each_text(&Value::Object(v), f);
}

/// The facts of a raw run record.
pub(super) fn facts(
    msgs: &[Message<'_>],
    row: &RowView<'_>,
    p: &Predicates,
    tokenizer: Option<&dyn Tokenizer>,
) -> Result<Facts, BadRow> {
    let mut f = Facts::new(msgs.len(), p, "no messages");
    let offered = if p.valid_tools {
        Some(match &p.tools {
            Some(set) => Offered::Global(set),
            None => Offered::of_row(row.tools, NoToolList::NoRowTools),
        })
    } else {
        None
    };
    // Ids of the calls of the last assistant message still waiting for a tool result.
    let mut open: Vec<String> = Vec::new();
    let mut open_at = 0;
    // Calls of the last assistant message's tool-call parts still waiting for a result
    // (they carry no ids: the results without one that follow answer them, in turn), and
    // that message's number.
    let (mut parts_open, mut parts_at) = (0usize, 0);
    for (i, m) in msgs.iter().enumerate() {
        let n = i + 1;
        let role: &str = &m.role;
        if p.well_formed && role != "tool" && parts_open > 0 {
            set_once(&mut f.malformed, || {
                format!(
                    "message {parts_at}: {parts_open} tool call(s) of its tool-call parts have no tool result"
                )
            });
        }
        if role != "tool" {
            parts_open = 0;
        }
        let text = if role == "assistant" {
            crate::format::message::content_text_raw(m.content)
        } else {
            Cow::Borrowed("")
        };
        if let Some(tk) = tokenizer {
            for_each_text(m, &mut |t| f.tokens += tk.count(t));
        }
        if p.well_formed && role != "tool" && !open.is_empty() {
            set_once(&mut f.malformed, || {
                format!("message {open_at}: tool call(s) {open:?} have no tool result")
            });
            open.clear();
        }
        match role {
            "assistant" => {
                let parts = Parts::of(m.content);
                let body = parts.as_ref().map_or(&*text, |p| p.text.as_str());
                let g = scan_gpt(body);
                f.reasoning |= nonblank_str(m.reasoning)
                    || nonblank_str(m.reasoning_content)
                    || details_reasoning(m.reasoning_details)
                    || parts.as_ref().is_some_and(|p| p.reasoning)
                    || g.reasoning
                    || crate::format::hermes::scratchpad_reasoning(body);
                if let Some(p) = &parts {
                    f.calls += p.calls.len();
                    if let Some(o) = &offered {
                        for c in &p.calls {
                            if let Err(e) = c.check(o) {
                                set_once(&mut f.invalid_tool, || format!("message {n}: {e}"));
                            }
                        }
                    }
                    // A call with an id is answered by it, the others in turn.
                    open.extend(p.ids.iter().flatten().cloned());
                    let without = p.ids.iter().filter(|i| i.is_none()).count();
                    (parts_open, parts_at) = (without, n);
                }
                // OpenAI's legacy `function_call` (an object) is one call.
                if let Some(fc) = m.function_call.filter(|v| v.get().starts_with('{')) {
                    f.calls += 1;
                    if let (Some(o), Ok(v)) = (&offered, serde_json::from_str::<Value>(fc.get()))
                        && let Err(e) = JsonCall::of(&v).check(o)
                    {
                        set_once(&mut f.invalid_tool, || format!("message {n}: {e}"));
                    }
                }
                let calls = m.tool_calls.as_deref().unwrap_or(&[]);
                f.calls += calls.len();
                for (k, c) in calls.iter().enumerate() {
                    let name = c.function.as_ref().and_then(|f| f.name.as_deref());
                    if let Some(o) = &offered {
                        let res = match name {
                            None => Err(BadCall::NoFunctionName(k + 1)),
                            Some(name) => o.check_call(
                                name,
                                c.function.as_ref().and_then(|f| f.arguments),
                                args_are_object,
                            ),
                        };
                        if let Err(e) = res {
                            set_once(&mut f.invalid_tool, || format!("message {n}: {e}"));
                        }
                    }
                    if p.well_formed {
                        match (&c.id, name) {
                            (Some(id), Some(_)) => open.push(id.to_string()),
                            _ => set_once(&mut f.malformed, || {
                                format!("message {n}: call {} has no id or no name", k + 1)
                            }),
                        }
                    }
                }
                open_at = n;
            }
            "tool" if p.well_formed => {
                let id = m.tool_call_id.as_deref().unwrap_or("");
                match open.iter().position(|o| o == id) {
                    Some(k) => {
                        open.remove(k);
                    }
                    // Calls of typed parts carry no ids: results without one answer them.
                    None if id.is_empty() && parts_open > 0 => parts_open -= 1,
                    None => set_once(&mut f.malformed, || {
                        format!("message {n}: tool result {id:?} answers no pending call")
                    }),
                }
            }
            "system" | "user" | "tool" | "developer" => {}
            other if p.well_formed => set_once(&mut f.malformed, || {
                format!("message {n}: unknown role {other:?}")
            }),
            _ => {}
        }
    }
    if p.well_formed && !open.is_empty() {
        set_once(&mut f.malformed, || {
            format!("message {open_at}: tool call(s) {open:?} have no tool result")
        });
    }
    if p.well_formed && parts_open > 0 {
        set_once(&mut f.malformed, || {
            format!(
                "message {parts_at}: {parts_open} tool call(s) of its tool-call parts have no tool result"
            )
        });
    }
    Ok(f)
}

/// A typed `content` list, read by the one part rule ([`message::part`]).
struct Parts {
    /// The text parts, joined with `\n` (as traj-normalize joins them).
    text: String,
    /// A reasoning part holds text that is not blank.
    reasoning: bool,
    calls: Vec<JsonCall>,
    /// The `id` of each call, where it has one (traj-normalize reads it as the call's).
    ids: Vec<Option<String>>,
}

impl Parts {
    /// `None` unless `content` is a list.
    fn of(content: Option<&RawValue>) -> Option<Parts> {
        let raw = content.filter(|c| c.get().starts_with('['))?;
        let Ok(Value::Array(list)) = serde_json::from_str::<Value>(raw.get()) else {
            return None;
        };
        let mut out = Parts {
            text: String::new(),
            reasoning: false,
            calls: Vec::new(),
            ids: Vec::new(),
        };
        let mut texts: Vec<&str> = Vec::new();
        for (k, p) in list.iter().enumerate() {
            match message::part(p) {
                Part::Text(t) => texts.push(t),
                Part::Reasoning(r) => out.reasoning |= !r.trim().is_empty(),
                Part::ToolCall(p) => match message::part_calls(p) {
                    Ok(calls) => {
                        out.calls.extend(calls.iter().map(|c| JsonCall::of(c)));
                        let id =
                            |c: &Value| c.get("id").and_then(Value::as_str).map(str::to_string);
                        out.ids.extend(calls.iter().map(|c| id(c)));
                    }
                    Err(e) => {
                        out.calls.push(JsonCall::Bad(format!(
                            "tool-call part {}: not JSON: {e}",
                            k + 1
                        )));
                        out.ids.push(None);
                    }
                },
                Part::Image | Part::Unknown(_) => {}
            }
        }
        out.text = texts.join("\n");
        Some(out)
    }
}

/// OpenAI arguments are a JSON string holding an object (or, from some servers, the
/// object itself), read as traj-normalize reads them: by the one JSON rule (a key twice
/// is no object), a blank string being `{}`.
pub(super) fn args_are_object(a: &RawValue) -> bool {
    a.get().starts_with('{')
        || raw_str(a).is_some_and(|inner| {
            inner.trim().is_empty() || crate::io::parse_object(inner.as_bytes()).is_ok()
        })
}

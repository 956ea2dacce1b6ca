//! Reading any supported record shape into a [`Trajectory`].
//!
//! The message list is found under `--messages-field`, else `conversations`, else
//! `messages`. Each entry is read by its own keys:
//! - `from`/`value` (ShareGPT): `human`/`user`, `gpt`/`assistant` (Hermes text: `<think>`,
//!   `<tool_call>` blocks), `tool` (`<tool_response>` blocks), LLaMA-Factory's
//!   `function_call` (a JSON call or list of calls, possibly after reasoning and text in
//!   `<tool_call>` form) and `observation` (raw tool output, results joined by its
//!   separator), see [`crate::format::llamafactory`];
//! - `role`/`content` (OpenAI): `user`, `assistant` (with `tool_calls` whose arguments are
//!   a string or an object, legacy `function_call`, reasoning in `reasoning`,
//!   `reasoning_content` or `reasoning_details`, and typed content parts `text`,
//!   `reasoning`, `tool_call`, `image_url`), `tool` (`tool_call_id`, or SWE-agent's
//!   `tool_call_ids`) and legacy `function`.
//!
//! `system` and `developer` entries are not turns: their text before the first turn is
//! the row's own system text ([`Trajectory::system`], by the [`SystemRule`]; see
//! [`keep`]). A system entry holding a `<tools>` block gives the tool list; otherwise
//! the tools come from the row's `tools` field (a list or a JSON string).
//!
//! Tool results are paired with the calls of the assistant turn right before them: by
//! `tool_call_id` where the calls carry ids, else by name, else by position; a result
//! that answers no call is named by its own `name` field or `"unknown"`; results that
//! all answer calls by id are put in the order of their calls ([`super::order`]). A tool result
//! with no assistant-with-calls right before it, a system entry after the first turn and
//! mini-swe-agent's `exit` message are no turns: they are kept whole, at their place
//! ([`Kept::Message`]), and counted. Keys of a message that the model has no field for
//! are kept by the turn they belong to ([`Kept::Keys`]), and so are the reasoning fields
//! that hold more than the turn's reasoning. A leading `<think>` block of a reply's
//! content is its reasoning, as in Hermes text; the ids `--to openai` makes up for calls
//! are read as none.

use serde_json::{Map, Value};

use super::BadArguments;
use super::error::{BadBody, BadMessage, BadRow, ToolsField};
use super::keep::{self, Part, SystemRule, Tally};
use super::members::{
    ItemTexts, call_object, extra_keys, is_result_role, kept_message, lf_call_object,
    provider_reasoning, take_keys, unused_reasoning, whole,
};
use super::pair::{Pending, count_unanswered_ids, drop_made_up_ids, push_results};
use crate::format::message::reasoning_of;
use crate::format::model::json_kind;
use crate::format::model::{
    GptTurn, Kept, KeptValue, ToolCall, ToolResult, ToolSpec, Trajectory, Turn,
    tool_content_value_owned,
};
use crate::format::repair::{self, Mode};
use crate::format::{hermes, llamafactory};

/// What stands in for an image part in text.
pub const IMAGE_PLACEHOLDER: &str = "[screenshot]";

/// The key of the message list in `row`, and the list.
pub fn find_messages<'a>(
    row: &'a Map<String, Value>,
    field: Option<&str>,
) -> Result<(&'a str, &'a [Value]), BadRow> {
    let keys: &[&str] = match field {
        Some(f) => &[f][..],
        None => &["conversations", "messages"][..],
    };
    for k in keys {
        if let Some((key, v)) = row.get_key_value(*k) {
            return match v {
                // `null` is absent: what `datasets` writes for the rows of a mixed-shape
                // dataset that lack the list.
                Value::Null if field.is_none() => continue,
                Value::Array(items) => Ok((key.as_str(), items.as_slice())),
                other => Err(BadRow::NotAList(k.to_string(), json_kind(other))),
            };
        }
    }
    Err(match field {
        Some(f) => BadRow::NoField(f.to_string()),
        None => BadRow::NoMessageList(
            ["history", "trajectory", "chat", "dialog"]
                .into_iter()
                .find(|hint| matches!(row.get(*hint), Some(Value::Array(_)))),
        ),
    })
}

/// The row's own `tools` field: a list of schemas or a JSON string holding one. The keys
/// of a schema that [`ToolSpec`] has no field for are counted in `parts`.
pub fn row_tools(
    row: &Map<String, Value>,
    parts: &mut keep::Parts,
) -> Result<Option<Vec<ToolSpec>>, ToolsField> {
    let parsed;
    let list = match row.get("tools") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(a)) => a,
        Some(Value::String(s)) if s.trim().is_empty() => return Ok(None),
        Some(Value::String(s)) => {
            parsed = serde_json::from_str::<Value>(s)
                .map_err(|e| ToolsField::StringNotJson(e.to_string()))?;
            match &parsed {
                Value::Array(a) => a,
                other => return Err(ToolsField::StringNotAList(json_kind(other))),
            }
        }
        Some(other) => return Err(ToolsField::NotAList(json_kind(other))),
    };
    let specs = list
        .iter()
        .enumerate()
        .map(|(i, t)| ToolSpec::from_json(t).map_err(|e| ToolsField::Entry(i, e)))
        .collect::<Result<Vec<_>, _>>()?;
    for t in list {
        parts.add_n(Part::ToolSchemaKey, ToolSpec::keys_not_carried(t));
    }
    Ok(Some(specs))
}

/// How a message list is read, and what the reading counts.
pub struct ReadCtx<'t> {
    /// Repair or refuse the tags of gpt turns.
    pub mode: Mode,
    /// Whose system text is kept.
    pub rule: SystemRule,
    /// The row is a run record ([`keep::is_run_record`]).
    pub run: bool,
    /// An OpenAI call whose `arguments` string is not JSON.
    pub bad_arguments: BadArguments,
    /// The row's `tools` field is a JSON string, LLaMA-Factory's spelling (even of no
    /// tools: `"[]"`), so its list is read as LLaMA-Factory's unless a call or the tools
    /// are spelled otherwise ([`llamafactory_row`]).
    pub tools_as_text: bool,
    pub tally: &'t mut Tally,
}

impl<'t> ReadCtx<'t> {
    /// A reading under `mode` of a row that is no run record, by the default rule.
    pub fn new(mode: Mode, tally: &'t mut Tally) -> Self {
        ReadCtx {
            mode,
            rule: SystemRule::default(),
            run: false,
            bad_arguments: BadArguments::default(),
            tools_as_text: false,
            tally,
        }
    }
}

/// Read `items` (the message list of a row) into a trajectory; `tools` is the row's own
/// tool list, used when no system entry carries a `<tools>` block. `texts[i]`, where
/// there is one, are the member values of item `i` kept as text by a reading in part
/// (their value in the item is a `null` standing in; empty when the list was parsed
/// whole).
///
/// Each assistant turn's tags go through [`repair::repair_gpt`] first (a ShareGPT
/// turn's Hermes text, an OpenAI reply's content), under `ctx.mode`; repairs and the
/// parts set aside or dropped are counted in `ctx.tally`.
pub fn read_messages(
    items: Vec<Value>,
    texts: &[ItemTexts<'_>],
    tools: Option<Vec<ToolSpec>>,
    ctx: &mut ReadCtx,
) -> Result<Trajectory, BadRow> {
    let mode = ctx.mode;
    let mut turns: Vec<Turn> = Vec::with_capacity(items.len());
    let mut system_tools: Option<Vec<ToolSpec>> = None;
    let mut system: Option<String> = None;
    let mut kept: Vec<Kept> = Vec::new();
    let mut pending: Option<Pending> = None;
    let has_tools = tools.as_ref().is_some_and(|t| !t.is_empty());
    let lf = llamafactory_row(&items, has_tools || ctx.tools_as_text);
    for (i, item) in items.into_iter().enumerate() {
        let at = |e: BadMessage| BadRow::Message(i + 1, e);
        let read_as = texts.get(i);
        let own_texts: &[(String, &str)] = read_as.map_or(&[], |t| &t.members);
        let Value::Object(mut m) = item else {
            return Err(at(BadMessage::NotAnObject(json_kind(&item))));
        };
        let (sharegpt, role) = match (m.get("from"), m.get("role")) {
            (Some(Value::String(r)), _) => (true, r.clone()),
            (_, Some(Value::String(r))) => (false, r.clone()),
            _ => return Err(at(BadMessage::NoRole)),
        };
        let is_result = is_result_role(&role);
        // Messages that are no turn are kept whole, at their place.
        if role == "exit" || (is_result && pending.is_none()) {
            ctx.tally.parts.add(if role == "exit" {
                Part::MessageWithoutTurn
            } else {
                Part::ToolResultWithoutCall
            });
            kept.push(Kept::Message {
                at: turns.len(),
                message: kept_message(m, read_as),
            });
            continue;
        }
        let mut extra = extra_keys(&m, sharegpt, &role);
        let body = if sharegpt {
            m.remove("value")
        } else {
            m.remove("content")
        };
        match role.as_str() {
            "system" | "developer" => {
                pending = None;
                let text = text_of(body, &mut ctx.tally.parts).map_err(|e| at(e.into()))?;
                let listed = hermes::parse_system_counted(&text);
                let lists_tools = listed.is_some();
                if system_tools.is_none()
                    && let Some(t) = listed
                {
                    let t = t.map_err(|e| at(e.into()))?;
                    ctx.tally.parts.add_n(Part::ToolSchemaKey, t.dropped_keys);
                    system_tools = Some(t.value);
                }
                let (own, run) = match keep::read_system(&text, lists_tools) {
                    keep::SystemText::ToolPrompt { own } => {
                        if own.is_none() && keep::other_tool_prompt(&text) {
                            ctx.tally.parts.add(Part::OtherToolPrompt);
                        }
                        (own, false)
                    }
                    keep::SystemText::Own(_) if !turns.is_empty() => {
                        // After the first turn: kept whole, at its place.
                        ctx.tally.parts.add(Part::LateSystemMessage);
                        m.insert(
                            if sharegpt { "value" } else { "content" }.into(),
                            Value::String(text),
                        );
                        kept.push(Kept::Message {
                            at: turns.len(),
                            message: KeptValue::Parsed(whole(m, own_texts)),
                        });
                        continue;
                    }
                    keep::SystemText::Own(t) => (Some(std::borrow::Cow::Borrowed(t)), ctx.run),
                };
                if let Some(own) = own.filter(|t| !t.is_empty()) {
                    match ctx.rule.verdict(run) {
                        Some(part) => ctx.tally.parts.add(part),
                        None => keep::add_system(&mut system, &own),
                    }
                }
                if !extra.is_empty() {
                    ctx.tally.parts.add(Part::SystemMessageKey);
                }
                continue;
            }
            "user" | "human" => {
                pending = None;
                turns.push(Turn::Human(
                    text_of(body, &mut ctx.tally.parts).map_err(|e| at(e.into()))?,
                ));
            }
            "assistant" | "gpt" if lf && sharegpt => {
                let text = text_of(body, &mut ctx.tally.parts).map_err(|e| at(e.into()))?;
                let mut g = llamafactory::parse_gpt(&text);
                hermes::take_leading_think(&mut g);
                pending = None;
                turns.push(Turn::Gpt(g));
            }
            "assistant" | "gpt" => {
                let mut g = if sharegpt {
                    let text = text_of(body, &mut ctx.tally.parts).map_err(|e| at(e.into()))?;
                    // A scratchpad is a `<think>` block, read as one (its reasoning framed
                    // as every turn's, so that a second pass changes nothing).
                    let text = hermes::convert_scratchpad(&text);
                    let text = repair::repair_gpt(&text, false, mode, &mut ctx.tally.repairs)
                        .map_err(|e| at(e.into()))?;
                    let (g, _) = hermes::parse_gpt_checked(&text).map_err(|e| at(e.into()))?;
                    ctx.tally.parts.add_n(Part::ToolCallKey, g.dropped_keys);
                    g.value
                } else {
                    let mut g = openai_assistant(
                        &m,
                        own_texts,
                        body,
                        ctx.bad_arguments,
                        &mut ctx.tally.parts,
                    )
                    .map_err(at)?;
                    let unused = unused_reasoning(&m, g.reasoning.as_deref());
                    if !unused.is_empty() {
                        extra = m
                            .keys()
                            .filter(|k| extra.contains(*k) || unused.contains(&k.as_str()))
                            .cloned()
                            .collect();
                    }
                    if lf && g.reasoning.is_none() && g.tool_calls.is_empty() {
                        let p = llamafactory::parse_gpt(&g.content);
                        (g.reasoning, g.content) = (p.reasoning, p.content);
                    }
                    let after_think = g
                        .reasoning
                        .as_deref()
                        .is_some_and(|r| !hermes::py_strip(r).is_empty());
                    if let std::borrow::Cow::Owned(c) =
                        repair::repair_gpt(&g.content, after_think, mode, &mut ctx.tally.repairs)
                            .map_err(|e| at(e.into()))?
                    {
                        g.content = c;
                    }
                    hermes::take_leading_think(&mut g);
                    g
                };
                let made_up = drop_made_up_ids(&mut g, turns.len());
                pending = Pending::new(&g.tool_calls);
                if let Some(p) = pending.as_mut() {
                    p.made_up = made_up;
                }
                turns.push(Turn::Gpt(g));
            }
            "function_call" => {
                let text = text_of(body, &mut ctx.tally.parts).map_err(|e| at(e.into()))?;
                let value = llamafactory::parse_function_call(&text);
                let v: Value = serde_json::from_str(value.calls)
                    .map_err(|e| at(BadMessage::FunctionCallNotJson(e.to_string())))?;
                let calls = match v {
                    Value::Array(list) => list
                        .into_iter()
                        .map(|c| lf_call_object(&c))
                        .collect::<Result<Vec<_>, _>>(),
                    one => lf_call_object(&one).map(|c| vec![c]),
                }
                .map_err(|e| at(BadMessage::FunctionCall(e)))?;
                let mut g = GptTurn {
                    reasoning: value.reasoning.map(str::to_string),
                    content: value.content.to_string(),
                    tool_calls: calls,
                };
                hermes::take_leading_think(&mut g);
                pending = Pending::new(&g.tool_calls);
                turns.push(Turn::Gpt(g));
            }
            _ if is_result => {
                let Some(p) = pending.as_mut() else {
                    unreachable!("a result without a call is kept above");
                };
                let results = if sharegpt && role == "tool" {
                    let text = text_of(body, &mut ctx.tally.parts).map_err(|e| at(e.into()))?;
                    let read = hermes::parse_tool_counted(&text).map_err(|e| at(e.into()))?;
                    ctx.tally
                        .parts
                        .add_n(Part::ToolResultKey, read.dropped_keys);
                    read.value
                } else if sharegpt && role == "observation" {
                    // LLaMA-Factory joins the results of one step with its separator.
                    let text = text_of(body, &mut ctx.tally.parts).map_err(|e| at(e.into()))?;
                    llamafactory::split_observation(&text)
                        .map(|t| ToolResult {
                            tool_call_id: String::new(),
                            name: String::new(),
                            content: tool_content_value_owned(t.to_string()),
                        })
                        .collect()
                } else {
                    vec![
                        openai_result(&m, body, sharegpt, &mut ctx.tally.parts)
                            .map_err(|e| at(e.into()))?,
                    ]
                };
                let n = results.len();
                push_results(&mut turns, results, p, lf, &mut ctx.tally.parts);
                if let Some(Turn::Tool(group)) = turns.last() {
                    // Each result of the message keeps its keys; the last one takes them.
                    let mut extra = take_keys(&mut m, &extra, own_texts);
                    for r in group.len() - n..group.len() {
                        let keys = if r + 1 < group.len() {
                            extra.clone()
                        } else {
                            std::mem::take(&mut extra)
                        };
                        keep::keep_keys(&mut kept, turns.len() - 1, Some(r), keys);
                    }
                }
                continue;
            }
            other => return Err(at(BadMessage::UnknownRole(other.to_string()))),
        }
        keep::keep_keys(
            &mut kept,
            turns.len() - 1,
            None,
            take_keys(&mut m, &extra, own_texts),
        );
    }
    if turns.is_empty() {
        return Err(BadRow::NoTurns);
    }
    super::order::results_in_call_order(&mut turns, &mut kept);
    count_unanswered_ids(&turns, &mut ctx.tally.parts);
    Ok(Trajectory {
        tools: system_tools.or(tools).unwrap_or_default(),
        system,
        turns,
        kept,
    })
}

/// True when the message list is in LLaMA-Factory's own spelling: it has a
/// `function_call` entry (ShareGPT `from` or OpenAI `role`) or a ShareGPT `observation`;
/// or the row offers tools (`has_tools`, its `tools` field) and makes no call in any
/// other spelling: no Hermes `tool` turn, no system turn with a `<tools>` block (a Hermes
/// row offering tools always has one), no OpenAI `tool_calls`, `function_call` field or
/// `tool`/`function` message. Its assistant texts are then read by
/// [`llamafactory::parse_gpt`] (reasoning in a `<think>\n…\n</think>\n\n` block), and
/// results without an id take the id of the call they answer. A plain chat (no tools)
/// reads as before: as Hermes text (ShareGPT) or as OpenAI content.
fn llamafactory_row(items: &[Value], has_tools: bool) -> bool {
    let native = items.iter().any(|m| {
        match (
            m.get("from").and_then(Value::as_str),
            m.get("role").and_then(Value::as_str),
        ) {
            (Some(r), _) => r == "function_call" || r == "observation",
            (None, Some(r)) => r == "function_call",
            _ => false,
        }
    });
    if native || !has_tools {
        return native;
    }
    // Tools offered: LLaMA-Factory's unless a call or the tools are spelled otherwise.
    !items.iter().any(|m| {
        let r = m
            .get("from")
            .or_else(|| m.get("role"))
            .and_then(Value::as_str)
            .unwrap_or("");
        match r {
            "tool" | "function" => true,
            "system" | "developer" => ["value", "content"].iter().any(|k| {
                m.get(*k)
                    .and_then(Value::as_str)
                    .is_some_and(|t| t.contains("<tools>"))
            }),
            _ => ["tool_calls", "function_call"]
                .iter()
                .any(|k| m.get(*k).is_some_and(|v| !v.is_null())),
        }
    })
}

/// Text of a message body: a string, a list of typed parts (text joined with `\n`,
/// images as [`IMAGE_PLACEHOLDER`]), or null (empty).
fn text_of(body: Option<Value>, parts: &mut keep::Parts) -> Result<String, BadBody> {
    read_body(body, false, parts).map(|b| b.text)
}

/// The keys of a text or reasoning part that [`crate::format::message::part`] reads.
const PART_TEXT_KEYS: [&str; 6] = ["type", "text", "value", "content", "reasoning", "thinking"];

/// What a message body holds.
#[derive(Default)]
struct Body {
    text: String,
    /// Reasoning parts (assistant messages only).
    reasoning: Vec<String>,
    /// Tool-call parts (assistant messages only).
    calls: Vec<ToolCall>,
}

/// Read a message body: a string, a list of typed parts (text joined with `\n`, images
/// as [`IMAGE_PLACEHOLDER`]), or null (empty). Reasoning and tool-call parts are only
/// allowed when `assistant`. A key of a text or reasoning part other than its type and
/// text (Anthropic's `cache_control`, a thinking block's `signature`) is dropped and
/// counted in `parts`.
fn read_body(
    body: Option<Value>,
    assistant: bool,
    parts: &mut keep::Parts,
) -> Result<Body, BadBody> {
    use crate::format::message::{Part, part, part_calls, part_type};
    let mut out = Body::default();
    match body {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => out.text = s,
        Some(Value::Array(list)) => {
            let mut texts = Vec::new();
            for (k, p) in list.iter().enumerate() {
                let read = part(p);
                if let (Part::Text(_) | Part::Reasoning(_), Value::Object(pm)) = (&read, p) {
                    for key in pm.keys() {
                        if !PART_TEXT_KEYS.contains(&key.as_str()) {
                            parts.add(keep::Part::ContentPartKey);
                        }
                    }
                }
                match read {
                    Part::Text(t) => texts.push(t.to_string()),
                    Part::Image => {
                        parts.add(keep::Part::ImagePart);
                        texts.push(IMAGE_PLACEHOLDER.to_string());
                    }
                    Part::Reasoning(_) | Part::ToolCall(_) if !assistant => {
                        return Err(BadBody::AssistantOnly(k + 1, part_type(p).to_string()));
                    }
                    Part::Reasoning(r) => out.reasoning.push(r.to_string()),
                    Part::ToolCall(p) => {
                        let list = part_calls(p).map_err(|e| BadBody::CallPartNotJson(k + 1, e))?;
                        for c in &list {
                            out.calls
                                .push(lf_call_object(c).map_err(|e| BadBody::CallPart(k + 1, e))?);
                        }
                    }
                    Part::Unknown(e) => return Err(BadBody::Part(k + 1, e)),
                }
            }
            out.text = texts.join("\n");
        }
        Some(other) => {
            return Err(BadBody::NotTextOrParts(json_kind(&other)));
        }
    }
    Ok(out)
}

fn openai_assistant(
    m: &Map<String, Value>,
    texts: &[(String, &str)],
    body: Option<Value>,
    bad_arguments: BadArguments,
    parts: &mut keep::Parts,
) -> Result<GptTurn, BadMessage> {
    let Body {
        text: content,
        reasoning: part_reasoning,
        mut calls,
    } = read_body(body, true, parts)?;
    let mut reasoning = reasoning_of(m).or_else(|| provider_reasoning(m, texts));
    if reasoning.is_none() && !part_reasoning.is_empty() {
        reasoning = Some(part_reasoning.join("\n"));
    } else if !part_reasoning.is_empty() && reasoning != Some(part_reasoning.join("\n")) {
        // The message's own reasoning field wins (the reference's reading); the
        // reasoning parts are not written: counted.
        for _ in &part_reasoning {
            parts.add(Part::ReasoningPart);
        }
    }
    match m.get("tool_calls") {
        None | Some(Value::Null) => {}
        Some(Value::Array(list)) => {
            for (k, c) in list.iter().enumerate() {
                let Value::Object(cm) = c else {
                    continue; // the reference skips calls that are not objects
                };
                if let Some(f) = cm.get("function") {
                    for key in cm.keys() {
                        if !matches!(key.as_str(), "id" | "type" | "function") {
                            parts.add(Part::ToolCallKey);
                        }
                    }
                    // Inside `function`: what a call is besides its name and arguments
                    // (`strict`).
                    for key in f.as_object().into_iter().flat_map(|f| f.keys()) {
                        if !matches!(key.as_str(), "name" | "arguments") {
                            parts.add(Part::ToolCallKey);
                        }
                    }
                }
                calls.push(
                    call_object(c, bad_arguments, parts).map_err(|e| BadMessage::ToolCall(k, e))?,
                );
            }
        }
        Some(other) => return Err(BadMessage::ToolCallsNotAList(json_kind(other))),
    }
    if let Some(fc @ Value::Object(_)) = m.get("function_call") {
        calls.push(call_object(fc, bad_arguments, parts).map_err(BadMessage::FunctionCall)?);
    }
    Ok(GptTurn {
        reasoning,
        content,
        tool_calls: calls,
    })
}

/// One tool result from an OpenAI `tool`/`function` message or a ShareGPT
/// `observation`-like turn.
fn openai_result(
    m: &Map<String, Value>,
    body: Option<Value>,
    sharegpt: bool,
    parts: &mut keep::Parts,
) -> Result<ToolResult, BadBody> {
    let id = match (m.get("tool_call_id"), m.get("tool_call_ids")) {
        (Some(Value::String(s)), _) => s.clone(),
        (_, Some(Value::Array(ids))) => ids
            .first()
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        _ => String::new(),
    };
    let name = if sharegpt {
        String::new()
    } else {
        m.get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let content = match body {
        Some(Value::String(s)) => tool_content_value_owned(s),
        None | Some(Value::Null) => Value::String(String::new()),
        Some(b @ Value::Array(_)) => tool_content_value_owned(text_of(Some(b), parts)?),
        // A non-string, non-list content is kept as is (the reference's rule).
        Some(v) => v,
    };
    Ok(ToolResult {
        tool_call_id: id,
        name,
        content,
    })
}

#[cfg(test)]
mod tests {
    use crate::format::row::{BadRow as ViewError, parse_row};
    use crate::stage::normalize::BadRow;
    use serde_json::Value;

    /// A JSON string literal of random text: escapes, `\u` forms, multi-byte characters.
    fn string(rng: &mut fastrand::Rng) -> String {
        const PIECES: [&str; 10] = [
            "a",
            "plain words",
            "\\\"",
            "\\n",
            "\\\\",
            "\\u00e9",
            "\\ud83d\\ude00",
            "é",
            "中文",
            "<think>",
        ];
        let mut s = String::from("\"");
        for _ in 0..rng.usize(0..6) {
            s.push_str(PIECES[rng.usize(0..PIECES.len())]);
        }
        s.push('"');
        s
    }

    /// One member `"key": value` of a turn or message, or nothing.
    fn member(rng: &mut fastrand::Rng, key: &str, texts: &[&str]) -> Option<String> {
        match rng.u8(0..10) {
            0 => None,
            1 => Some(format!("\"{key}\": 3")),
            2 => Some(format!("\"{key}\": null")),
            3..=5 => Some(format!("\"{key}\": {}", string(rng))),
            _ => Some(format!("\"{key}\": {}", texts[rng.usize(0..texts.len())])),
        }
    }

    fn object(rng: &mut fastrand::Rng, mut members: Vec<String>) -> String {
        rng.shuffle(&mut members);
        format!("{{{}}}", members.join(", "))
    }

    fn list(rng: &mut fastrand::Rng, entry: impl Fn(&mut fastrand::Rng) -> String) -> String {
        match rng.u8(0..12) {
            0 => "3".into(),
            1 => "{}".into(),
            2 => string(rng),
            _ => {
                let n = rng.usize(0..5);
                let items: Vec<String> = (0..n)
                    .map(|_| match rng.u8(0..12) {
                        0 => "1".to_string(),
                        _ => entry(rng),
                    })
                    .collect();
                format!("[{}]", items.join(", "))
            }
        }
    }

    /// A random row: a ShareGPT list, an OpenAI list, both or neither, other fields, and
    /// now and then a line cut short (not JSON, or not even UTF-8).
    fn row(rng: &mut fastrand::Rng) -> Vec<u8> {
        let speakers = ["\"human\"", "\"gpt\"", "\"tool\"", "\"sys\\u0074em\""];
        let roles = ["\"user\"", "\"assistant\"", "\"tool\""];
        // A list of entries `{who: one of whos, text: "x"}`, either member maybe missing
        // or of another kind.
        let entries = |rng: &mut fastrand::Rng, who: &str, whos: &[&str], text: &str| {
            list(rng, |rng| {
                let m = [member(rng, who, whos), member(rng, text, &["\"x\""])];
                object(rng, m.into_iter().flatten().collect())
            })
        };
        let mut members = Vec::new();
        if rng.u8(0..4) > 0 {
            let turns = entries(rng, "from", &speakers, "value");
            members.push(format!("\"conversations\": {turns}"));
        }
        if rng.u8(0..3) == 0 {
            let messages = entries(rng, "role", &roles, "content");
            members.push(format!("\"messages\": {messages}"));
        }
        for key in ["completed", "id", "history"] {
            if rng.bool() {
                members.push(format!(
                    "\"{key}\": {}",
                    ["true", "[]", "\"r-1\""][rng.usize(0..3)]
                ));
            }
        }
        let mut line = object(rng, members).into_bytes();
        if rng.u8(0..20) == 0 {
            line.truncate(rng.usize(0..line.len()));
        }
        line
    }

    /// What the general reading expects of a list entry (`from` for turns, `role` for
    /// messages): an object whose key is a string, and for a turn a `value`.
    fn entries_ok(items: &[Value], key: &str, value: Option<&str>) -> bool {
        items.iter().all(|t| {
            t.as_object().is_some_and(|o| {
                o.get(key).is_some_and(Value::is_string) && value.is_none_or(|v| o.contains_key(v))
            })
        })
    }

    /// The borrowed row view (`format::row::parse_row`: what traj-filter, traj-merge and
    /// traj-compress read) and the general reading (`io::parse_object` and
    /// [`super::find_messages`]: what traj-normalize reads, on `serde_json::Value`) agree
    /// on random rows: the same lines are JSON objects, the same rows have a message
    /// list, the same lists are refused, and a ShareGPT list has the same turns, speakers
    /// and texts in both.
    #[test]
    fn the_row_view_reads_rows_as_the_general_reading_does() {
        let mut rng = fastrand::Rng::with_seed(31);
        let mut seen = [0usize; 4];
        for _ in 0..20_000 {
            let bytes = row(&mut rng);
            let line = String::from_utf8_lossy(&bytes);
            let view = parse_row(&bytes);
            let general = crate::io::parse_object(&bytes);
            let not_json = |e: &ViewError| {
                matches!(
                    e,
                    ViewError::Json(_)
                        | ViewError::JsonNear(_)
                        | ViewError::Utf8(_)
                        | ViewError::NotAnObject(_)
                        | ViewError::Line(_)
                )
            };
            let obj = match general {
                Err(_) => {
                    assert!(view.as_ref().is_err_and(not_json), "{line}: {view:?}");
                    seen[0] += 1;
                    continue;
                }
                Ok(obj) => obj,
            };
            assert!(!view.as_ref().is_err_and(not_json), "{line}: {view:?}");
            let messages_ok = match obj.get("messages") {
                None => true,
                Some(Value::Array(items)) => entries_ok(items, "role", None),
                Some(_) => false,
            };
            match super::find_messages(&obj, None) {
                Err(BadRow::NoMessageList(_)) => {
                    assert!(matches!(view, Err(ViewError::NoTurns)), "{line}: {view:?}");
                    seen[1] += 1;
                }
                Err(e) => {
                    assert!(matches!(e, BadRow::NotAList(..)), "{line}: {e}");
                    assert!(matches!(view, Err(ViewError::Shape(_))), "{line}: {view:?}");
                    seen[2] += 1;
                }
                Ok((key, items)) => {
                    let turns_ok =
                        key != "conversations" || entries_ok(items, "from", Some("value"));
                    let view = match view {
                        Ok(v) => v,
                        Err(e) => {
                            assert!(
                                matches!(e, ViewError::Shape(_)) && !(turns_ok && messages_ok),
                                "{line}: {e:?}"
                            );
                            continue;
                        }
                    };
                    assert!(turns_ok && messages_ok, "{line}");
                    if key == "conversations" {
                        let turns = view.conversations.expect("turns");
                        assert_eq!(turns.len(), items.len(), "{line}");
                        for (t, item) in turns.iter().zip(items) {
                            assert_eq!(item["from"].as_str(), Some(&*t.from), "{line}");
                            let value: Value = serde_json::from_str(t.value).expect("raw JSON");
                            assert_eq!(value, item["value"], "{line}");
                        }
                    } else {
                        assert_eq!(view.messages.expect("messages").len(), items.len());
                    }
                    seen[3] += 1;
                }
            }
        }
        // Every branch was taken often.
        assert!(seen.iter().all(|&n| n > 500), "{seen:?}");
    }
}

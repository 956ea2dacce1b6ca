//! A message's keys: which the reader reads, and how the others are kept
//! ([`crate::format::model::Kept`]). A reading in part ([`crate::io::ListRule`]) keeps
//! the value of a key the reader never looks at as the text it was read as, when that
//! text is Python's spelling ([`KeptValue::Text`]); these functions give the same
//! message, keys and values either way. The reasoning fields of a reply are read keys,
//! and kept too when they hold more than the turn's reasoning ([`unused_reasoning`]).
//! A call's members are read here too ([`call_object`], [`lf_call_object`]).

use serde_json::{Map, Value};

use crate::format::message::reasoning_of;
use crate::format::model::{DeclError, KeptKeys, KeptValue, LOSS_WEIGHT, ToolCall};

use super::BadArguments;
use super::keep::{Part, Parts};
pub use crate::io::ItemTexts;

/// The keys each kind of message has read: ShareGPT turns, OpenAI assistant messages,
/// OpenAI tool results, any other OpenAI message.
const SHAREGPT_READ: [&str; 2] = ["from", "value"];
const ASSISTANT_READ: [&str; 7] = [
    "role",
    "content",
    "tool_calls",
    "function_call",
    "reasoning",
    "reasoning_content",
    "reasoning_details",
];
const RESULT_READ: [&str; 5] = ["role", "content", "tool_call_id", "tool_call_ids", "name"];
const OTHER_READ: [&str; 2] = ["role", "content"];

/// The keys of a message the reader does not read (the model has no field for them), in
/// the message's order: all but the role and the body, and for OpenAI assistant and
/// tool messages the keys of their calls, reasoning, call id and name.
pub(super) fn extra_keys(m: &Map<String, Value>, sharegpt: bool, role: &str) -> Vec<String> {
    let read: &[&str] = match (sharegpt, role) {
        (true, _) => &SHAREGPT_READ,
        (false, "assistant" | "gpt") => &ASSISTANT_READ,
        (false, r) if is_result_role(r) => &RESULT_READ,
        (false, _) => &OTHER_READ,
    };
    m.keys()
        .filter(|k| !read.contains(&k.as_str()))
        .cloned()
        .collect()
}

/// True for the roles of a tool result.
pub(super) fn is_result_role(role: &str) -> bool {
    matches!(
        role,
        "tool" | "observation" | "function" | "function_response" | "tool_response" | "ipython"
    )
}

/// True for a key of a message that the reader looks at, whatever the role: a key of
/// `extra_keys`' lists, or `loss_weight` (read by the ShareGPT writers). Any other
/// key is only ever kept, so a reading in part may keep its value as the text it was
/// read as ([`ItemTexts`]); `extra` and `provider_specific_fields`, where
/// `read::provider_reasoning` looks when a reply has no reasoning of its own, are read
/// from that text then.
pub fn is_read_key(key: &str) -> bool {
    [
        &SHAREGPT_READ[..],
        &ASSISTANT_READ,
        &RESULT_READ,
        &OTHER_READ,
    ]
    .iter()
    .any(|keys| keys.contains(&key))
        || key == LOSS_WEIGHT
}

/// The reasoning members of assistant message `m` that hold more than the turn's
/// reasoning (`used`, read by [`reasoning_of`]) and are kept as the message's keys
/// ([`crate::format::model::Kept`]): `reasoning` or `reasoning_content` holding another text (a reply may
/// carry both), and `reasoning_details` when it holds another text or anything besides
/// each entry's `type`, `text` and `summary` (a `signature`, encrypted `data`,
/// `format`).
pub(super) fn unused_reasoning(m: &Map<String, Value>, used: Option<&str>) -> Vec<&'static str> {
    let mut keep = Vec::new();
    for key in ["reasoning", "reasoning_content"] {
        if let Some(Value::String(s)) = m.get(key)
            && !crate::format::hermes::py_strip(s).is_empty()
            && used != Some(s.as_str())
        {
            keep.push(key);
        }
    }
    if let Some(Value::Array(details)) = m.get("reasoning_details") {
        let plain = details.iter().all(|d| {
            d.as_object().is_some_and(|o| {
                o.keys()
                    .all(|k| matches!(k.as_str(), "type" | "text" | "summary"))
            })
        });
        let text: String = details
            .iter()
            .flat_map(|d| ["text", "summary"].map(|k| d.get(k).and_then(Value::as_str)))
            .flatten()
            .collect();
        if !plain
            || (!crate::format::hermes::py_strip(&text).is_empty() && used != Some(text.as_str()))
        {
            keep.push("reasoning_details");
        }
    }
    keep
}

/// Reasoning a provider's reply carries where [`reasoning_of`] does not look: in
/// LiteLLM's `provider_specific_fields`, or in mini-swe-agent's `extra.response` (the
/// raw reply: `choices[0].message`), read by the same rule. A value kept as text
/// (`texts`) is parsed only when it spells a key starting `reasoning` (a text in
/// Python's spelling never escapes a letter, so the search is exact).
pub(super) fn provider_reasoning(
    m: &Map<String, Value>,
    texts: &[(String, &str)],
) -> Option<String> {
    let member = |key: &str| match text_of_key(texts, key) {
        Some(t) => memchr::memmem::find(t.as_bytes(), b"\"reasoning")
            .map(|_| std::borrow::Cow::Owned(KeptValue::parse_text(t))),
        None => m.get(key).map(std::borrow::Cow::Borrowed),
    };
    let own = member("provider_specific_fields");
    if let Some(r) = own
        .as_deref()
        .and_then(Value::as_object)
        .and_then(reasoning_of)
    {
        return Some(r);
    }
    let extra = member("extra");
    extra
        .as_deref()
        .and_then(|e| e.pointer("/response/choices/0/message"))
        .and_then(Value::as_object)
        .and_then(reasoning_of)
}

/// The text a reading in part kept for key `key` of a message.
pub(super) fn text_of_key<'a>(texts: &[(String, &'a str)], key: &str) -> Option<&'a str> {
    texts.iter().find(|(k, _)| k == key).map(|(_, t)| *t)
}

/// The keys `names` of `m` and their values, taken out of `m` in the order of `names`
/// (the values move; a message's extra keys can be large, as mini-swe-agent's whole
/// raw reply under `extra`); a value kept as text (`texts`) stays text.
pub(super) fn take_keys(
    m: &mut Map<String, Value>,
    names: &[String],
    texts: &[(String, &str)],
) -> KeptKeys {
    names
        .iter()
        .filter_map(|k| {
            let v = m.swap_remove(k.as_str())?;
            let v = match text_of_key(texts, k) {
                Some(t) => KeptValue::Text(t.into()),
                None => KeptValue::Parsed(v),
            };
            Some((k.clone(), v))
        })
        .collect()
}

/// Put each value of message `m` kept as text (`texts`) into its place, parsed.
fn parse_texts(m: &mut Map<String, Value>, texts: &[(String, &str)]) {
    for (k, t) in texts {
        if let Some(v) = m.get_mut(k.as_str()) {
            *v = KeptValue::parse_text(t);
        }
    }
}

/// Message `m` whole: each value kept as text (`texts`) parsed into its place.
pub(super) fn whole(mut m: Map<String, Value>, texts: &[(String, &str)]) -> Value {
    parse_texts(&mut m, texts);
    Value::Object(m)
}

/// The list `list` whole, each member value kept as text (`texts`, by item) parsed into
/// its place: the list as a reading of the whole row gives it.
pub fn whole_list(list: &mut Value, texts: &[ItemTexts<'_>]) {
    if let Value::Array(items) = list {
        for (item, texts) in items.iter_mut().zip(texts) {
            if let Value::Object(m) = item {
                parse_texts(m, &texts.members);
            }
        }
    }
}

/// Message `m`, read from `texts`, kept whole as it stands in the row: as its text when
/// that is what the writers write for it (an object of a list field).
pub(super) fn kept_message(m: Map<String, Value>, texts: Option<&ItemTexts<'_>>) -> KeptValue {
    let depth = crate::io::FIELD_DEPTH - 1;
    match texts {
        Some(t) if !t.members.is_empty() && crate::format::pyjson::writes_as_is(t.text, depth) => {
            KeptValue::Text(t.text.into())
        }
        _ => KeptValue::Parsed(whole(m, texts.map_or(&[], |t| &t.members))),
    }
}

/// Arguments as given: a JSON string is parsed, anything else is used as is; missing,
/// `null` or a blank string → `{}` (the rule of [`crate::format::model::call_arguments`],
/// by which traj-run ran the call). A string that is not JSON by the rule every row is
/// read by (a key twice is not: one value would take the other's place) follows `bad`:
/// an error, or `{}` (the reference's rule) counted in `parts` as
/// [`Part::NonJsonArguments`].
pub(super) fn arguments_value(
    a: Option<&Value>,
    bad: BadArguments,
    parts: &mut Parts,
) -> Result<Value, DeclError> {
    match a {
        None | Some(Value::Null) => Ok(Value::Object(Map::new())),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(Value::Object(Map::new())),
        Some(Value::String(s)) => match crate::io::parse_value(s.as_bytes()) {
            Ok(v) => Ok(v),
            Err(e) => match bad {
                BadArguments::Reject => Err(DeclError::ArgumentsNotJson(
                    e.strip_prefix("invalid JSON: ").unwrap_or(&e).to_string(),
                )),
                BadArguments::Empty => {
                    parts.add(Part::NonJsonArguments);
                    Ok(Value::Object(Map::new()))
                }
            },
        },
        Some(v) => Ok(v.clone()),
    }
}

/// A call spelled `{"name", "arguments"}`, `{"function": {...}}` or
/// `{"id", "type": "function", "function": {...}}`, its arguments read as OpenAI spells
/// them (a string is their JSON text; one that is not JSON follows `bad`).
pub(super) fn call_object(
    v: &Value,
    bad: BadArguments,
    parts: &mut Parts,
) -> Result<ToolCall, DeclError> {
    call_object_as(v, Some((bad, parts)))
}

/// A call of LLaMA-Factory's spelling (a `function_call` value, a `tool_call` part):
/// the arguments are the value itself, so a string stays a string (LLaMA-Factory renders
/// it as one: `json.dumps`), as `--to llamafactory` writes the string arguments of a call.
pub(super) fn lf_call_object(v: &Value) -> Result<ToolCall, DeclError> {
    call_object_as(v, None)
}

/// `openai`: how an OpenAI call's string arguments are read; `None` for LLaMA-Factory's
/// spelling, where a string stays a string.
fn call_object_as(
    v: &Value,
    openai: Option<(BadArguments, &mut Parts)>,
) -> Result<ToolCall, DeclError> {
    let crate::format::model::FunctionPart {
        outer: m,
        function: f,
        name,
    } = crate::format::model::function_part(v, "tool call")?;
    let id = match m.get("id") {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        _ => None,
    };
    let args = f.get("arguments").or_else(|| f.get("input"));
    let arguments = match (args, openai) {
        (_, Some((bad, parts))) => arguments_value(args, bad, parts)?,
        (Some(a), None) => a.clone(),
        (None, None) => Value::Object(Map::new()),
    };
    Ok(ToolCall {
        id,
        name,
        arguments,
    })
}

//! The trajectory model every stage shares: what an agent conversation *is*, apart from
//! how one file format or another spells it.
//!
//! A [`Trajectory`] is the tools that were offered plus a list of [`Turn`]s:
//! - [`Turn::Human`]: text from the user (or text injected in the user's place);
//! - [`Turn::Gpt`]: one assistant message: optional reasoning, text content, and zero or
//!   more [`ToolCall`]s;
//! - [`Turn::Tool`]: the [`ToolResult`]s that answer the calls of the `Gpt` turn just
//!   before it, grouped into one turn.
//!
//! The source's own system text is [`Trajectory::system`]; the Hermes format writes it
//! as the system turn of a plain chat, or in front of the tool prompt generated from the
//! tool list (see `crate::stage::normalize::keep`). What a source message
//! carries beyond the model (LLaMA-Factory's `loss_weight`, a `name`, mini-swe-agent's
//! `extra`, a message that is no turn) is [`Trajectory::kept`], by its place in the turns.
//!
//! Readers and writers of concrete formats live in [`crate::format::hermes`] (Hermes ShareGPT
//! text) and [`crate::stage::normalize`] (OpenAI messages, ShareGPT variants, whole rows). This
//! module also holds how a tool declaration names its tool ([`function_part`],
//! [`tool_names`], [`tool_list_names`]), the per-row tool statistics ([`tool_stats`])
//! and the reference's success/failure rule for one tool result ([`classify_result`],
//! [`tool_succeeded`]).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Map, Value};

/// `an array`, `a string`, ... for messages (the one wording, from the line engine).
pub use crate::io::json_kind;

/// A tool declaration or call that does not say which tool it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeclError {
    #[error("a {what} must be an object, found {found}")]
    NotAnObject {
        what: &'static str,
        found: &'static str,
    },
    #[error("a {0} has no \"name\" string")]
    NoName(&'static str),
    /// A call's `arguments` string that is not JSON (the parser's message).
    #[error(
        "the \"arguments\" string is not JSON ({0}); --bad-arguments empty writes {{}} instead"
    )]
    ArgumentsNotJson(String),
}

/// One tool the model was offered.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    /// Free text; `""` when the source had none.
    pub description: String,
    /// The JSON Schema of the arguments; `{}` when the source had none.
    pub parameters: Value,
}

/// A tool schema or call spelled `{"function": {...}}` or bare, taken apart.
pub struct FunctionPart<'a> {
    /// The whole object (where a call's `id` is).
    pub outer: &'a Map<String, Value>,
    /// The `function` object, or the whole object when it is bare.
    pub function: &'a Map<String, Value>,
    pub name: String,
}

/// Take apart a tool schema or call; `what` names it in errors (`"tool schema"`,
/// `"tool call"`).
///
/// The name rule (the one rule for every reader of declarations): the `name` of the
/// `function` object when there is one, else the object's own `name`.
pub fn function_part<'a>(v: &'a Value, what: &'static str) -> Result<FunctionPart<'a>, DeclError> {
    let Value::Object(m) = v else {
        return Err(DeclError::NotAnObject {
            what,
            found: json_kind(v),
        });
    };
    let f = match m.get("function") {
        Some(Value::Object(f)) => f,
        _ => m,
    };
    match f.get("name") {
        Some(Value::String(s)) => Ok(FunctionPart {
            outer: m,
            function: f,
            name: s.clone(),
        }),
        _ => Err(DeclError::NoName(what)),
    }
}

/// One entry of a tool list, read without building it: a plain name, Hermes
/// `{"name", ...}` or OpenAI `{"function": {"name", ...}}`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ToolDecl<'a> {
    Name(#[serde(borrow)] Cow<'a, str>),
    Decl {
        #[serde(borrow, default)]
        name: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        function: Option<NameOnly<'a>>,
    },
}

#[derive(Debug, Deserialize)]
struct NameOnly<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
}

/// A tool list that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolListError {
    /// Not a JSON list of declarations (serde_json's message).
    #[error("not a JSON list of tools: {0}")]
    NotAList(String),
    /// A JSON document that is neither a list nor an object with a `tools` list.
    #[error("expected a JSON list of tools")]
    NoList,
    /// Entry `n` (1-based) names no tool.
    #[error("tool {0}: {1}")]
    Entry(usize, DeclError),
    /// Looks like JSON (starts with `[` or `{`) and is not.
    #[error("invalid JSON: {0}")]
    Json(String),
}

/// Tool names from a JSON list of declarations (as [`function_part`] reads a name);
/// entries that name no tool are skipped. Borrowed parsing: rows carry their lists.
pub fn tool_names(json: &str) -> Result<Vec<String>, ToolListError> {
    let decls: Vec<ToolDecl> =
        serde_json::from_str(json).map_err(|e| ToolListError::NotAList(e.to_string()))?;
    Ok(decls
        .into_iter()
        .filter_map(|d| match d {
            ToolDecl::Name(n) => Some(n.into_owned()),
            ToolDecl::Decl { name, function } => {
                function.map(|f| f.name).or(name).map(|n| n.into_owned())
            }
        })
        .collect())
}

/// Read a tool declarations file (`--tools FILE` of traj-normalize and traj-filter): the
/// names of [`tool_list_names`], errors prefixed with the file's path.
pub fn read_tool_names(path: &std::path::Path) -> anyhow::Result<Vec<String>> {
    use anyhow::Context;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    tool_list_names(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// The names of a tool-declarations file (`--tools FILE` of traj-filter and
/// traj-normalize): a JSON list of names or schemas (OpenAI or bare), a JSON object with
/// such a list under `tools`, or plain text with one name per line (`#` comments).
pub fn tool_list_names(text: &str) -> Result<Vec<String>, ToolListError> {
    let trimmed = text.trim_start_matches('\u{feff}').trim();
    match serde_json::from_str::<Value>(trimmed) {
        Ok(v) => {
            let list = match v {
                Value::Array(l) => l,
                Value::Object(mut m) => match m.remove("tools") {
                    Some(Value::Array(l)) => l,
                    _ => return Err(ToolListError::NoList),
                },
                _ => return Err(ToolListError::NoList),
            };
            let mut names = Vec::with_capacity(list.len());
            for (i, t) in list.iter().enumerate() {
                match t {
                    Value::String(s) => names.push(s.clone()),
                    other => names.push(
                        function_part(other, "tool schema")
                            .map_err(|e| ToolListError::Entry(i + 1, e))?
                            .name,
                    ),
                }
            }
            Ok(names)
        }
        Err(_) if !trimmed.starts_with('[') && !trimmed.starts_with('{') => Ok(trimmed
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(str::to_string)
            .collect()),
        Err(e) => Err(ToolListError::Json(e.to_string())),
    }
}

impl ToolSpec {
    /// Read a tool schema in any of the usual spellings: OpenAI's
    /// `{"type": "function", "function": {"name", "description", "parameters"}}`, the
    /// bare `{"name", "description", "parameters"}`, or the Hermes system prompt's
    /// `{"name", "description", "parameters", "required": null}`.
    pub fn from_json(v: &Value) -> Result<ToolSpec, DeclError> {
        let FunctionPart {
            function: f, name, ..
        } = function_part(v, "tool schema")?;
        let description = match f.get("description") {
            Some(Value::String(s)) => s.clone(),
            _ => String::new(),
        };
        let parameters = match f.get("parameters") {
            Some(p) if !p.is_null() => p.clone(),
            _ => Value::Object(Default::default()),
        };
        Ok(ToolSpec {
            name,
            description,
            parameters,
        })
    }

    /// How many keys of the schema `v` a spec does not carry, so that a writer drops
    /// them: keys beside `{"type", "function": {...}}`, or inside the function (or in a
    /// bare schema, beside `type`) those [`ToolSpec::carries`] does not name (`strict`,
    /// `cache_control`).
    pub fn keys_not_carried(v: &Value) -> usize {
        let Value::Object(m) = v else {
            return 0;
        };
        // The members of `f` beside `skip` that a spec has no place for.
        let dropped = |f: &serde_json::Map<String, Value>, skip: &[&str]| {
            f.iter()
                .filter(|(k, v)| !skip.contains(&k.as_str()) && !Self::carries(k, v.is_null()))
                .count()
        };
        match m.get("function") {
            Some(Value::Object(f)) => {
                m.keys()
                    .filter(|k| !matches!(k.as_str(), "type" | "function"))
                    .count()
                    + dropped(f, &[])
            }
            _ => dropped(m, &["type"]),
        }
    }

    /// Whether a spec carries the member `key` of a schema's function (or of a bare
    /// schema): its name, description and parameters, and the `"required": null` the
    /// Hermes list writes (`null` says whether the member's value is `null`).
    pub fn carries(key: &str, null: bool) -> bool {
        match key {
            "name" | "description" | "parameters" => true,
            "required" => null,
            _ => false,
        }
    }

    /// The OpenAI spelling: `{"type": "function", "function": {...}}`.
    pub fn to_openai(&self) -> Value {
        let mut f = serde_json::Map::new();
        f.insert("name".into(), Value::String(self.name.clone()));
        f.insert(
            "description".into(),
            Value::String(self.description.clone()),
        );
        f.insert("parameters".into(), self.parameters.clone());
        let mut m = serde_json::Map::new();
        m.insert("type".into(), Value::String("function".into()));
        m.insert("function".into(), Value::Object(f));
        Value::Object(m)
    }
}

/// One call the assistant made.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The call id, when the source had one (OpenAI `tool_calls[].id`). The Hermes text
    /// format does not carry call ids; its tool results carry `tool_call_id` instead.
    pub id: Option<String>,
    pub name: String,
    /// The parsed arguments, usually an object. Arguments given as a string that is not
    /// JSON become `{}` (the reference's rule).
    pub arguments: Value,
}

/// The result of one call, as the model saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The id of the call it answers; `""` when unknown.
    pub tool_call_id: String,
    /// The name of the call it answers (matched by id, else by position), or the
    /// source's own name for it, or `"unknown"`.
    pub name: String,
    /// The content: a JSON value parsed from text that looked like JSON (starts with `{`
    /// or `[` once stripped), else the text as a string. See [`tool_content_value`].
    pub content: Value,
}

/// One assistant message.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GptTurn {
    /// Reasoning text (`reasoning`, `reasoning_content`, ... or a `<think>` block), if any.
    pub reasoning: Option<String>,
    /// The visible text; `""` when there is none.
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
}

/// One turn of a conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum Turn {
    Human(String),
    Gpt(GptTurn),
    Tool(Vec<ToolResult>),
}

/// A conversation and the tools it was offered.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Trajectory {
    pub tools: Vec<ToolSpec>,
    /// The source's own system text (its system messages before the first turn, joined
    /// with `\n\n`); `None` when it had none or it is not kept.
    pub system: Option<String>,
    pub turns: Vec<Turn>,
    /// What the source's messages carried beyond the model, in turn order.
    pub kept: Vec<Kept>,
}

/// Something a source message carried that the model has no field for, kept by its
/// place so that a writer can give it back.
#[derive(Debug, Clone, PartialEq)]
pub enum Kept {
    /// Keys of the message that became turn `turn` (of result `result` of a tool turn),
    /// in the message's key order.
    Keys {
        turn: usize,
        result: Option<usize>,
        keys: KeptKeys,
    },
    /// A whole message that is no turn (a tool result answering no call, a system
    /// message after the first turn, mini-swe-agent's `exit`), which stood before turn
    /// `at` (`at` = the number of turns before it).
    Message { at: usize, message: KeptValue },
}

/// The keys kept of one message, in the message's key order.
pub type KeptKeys = indexmap::IndexMap<String, KeptValue>;

/// The value of a kept key: parsed, or the JSON text it was read as when that text is
/// what the writers write for it ([`crate::format::pyjson::writes_as_is`]: Python's
/// spelling), kept as it is and never parsed. mini-swe-agent keeps each step's whole raw
/// reply under `extra`: reading and writing it as text costs a scan and a copy.
#[derive(Debug, Clone)]
pub enum KeptValue {
    Parsed(Value),
    /// JSON text for which [`crate::format::pyjson::writes_as_is`] holds.
    Text(Box<str>),
}

impl KeptValue {
    /// The value, parsed from the text where it is kept as text.
    pub fn to_value(&self) -> Value {
        match self {
            KeptValue::Parsed(v) => v.clone(),
            KeptValue::Text(t) => Self::parse_text(t),
        }
    }

    /// The value of a text kept as [`KeptValue::Text`] (one JSON value by construction).
    pub fn parse_text(text: &str) -> Value {
        serde_json::from_str(text).expect("kept text is one JSON value")
    }

    /// The value when it is kept parsed.
    pub fn parsed(&self) -> Option<&Value> {
        match self {
            KeptValue::Parsed(v) => Some(v),
            KeptValue::Text(_) => None,
        }
    }

    /// Append the value as [`crate::format::pyjson::write_value`] writes it in Python's
    /// spelling (a text kept is that spelling already).
    pub fn write(&self, out: &mut Vec<u8>) {
        match self {
            KeptValue::Parsed(v) => {
                crate::format::pyjson::write_value(out, v, crate::format::pyjson::Style::Python)
            }
            KeptValue::Text(t) => out.extend_from_slice(t.as_bytes()),
        }
    }
}

/// Equal when the values are: a text equals the value it parses to.
impl PartialEq for KeptValue {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (KeptValue::Text(a), KeptValue::Text(b)) if a == b => true,
            (KeptValue::Parsed(a), KeptValue::Parsed(b)) => a == b,
            _ => self.to_value() == other.to_value(),
        }
    }
}

/// A message's keys, all parsed.
pub fn kept_keys(m: Map<String, Value>) -> KeptKeys {
    m.into_iter()
        .map(|(k, v)| (k, KeptValue::Parsed(v)))
        .collect()
}

/// The per-turn key the ShareGPT shapes carry on the turn itself (LLaMA-Factory's
/// weight of a message in the loss).
pub const LOSS_WEIGHT: &str = "loss_weight";

impl Trajectory {
    /// The keys kept for turn `turn` (result `result` of a tool turn), in order.
    pub fn keys_of(&self, turn: usize, result: Option<usize>) -> Option<&KeptKeys> {
        self.kept.iter().find_map(|k| match k {
            Kept::Keys {
                turn: t,
                result: r,
                keys,
            } if *t == turn && *r == result => Some(keys),
            _ => None,
        })
    }

    /// The `loss_weight` a ShareGPT writer puts on turn `turn`: the turn's own, or for
    /// a tool turn the one every result has (none when they differ or one has none).
    pub fn loss_weight(&self, turn: usize) -> Option<&Value> {
        // `loss_weight` is always kept parsed (the readers never keep it as text).
        let of = |result| {
            self.keys_of(turn, result)
                .and_then(|k| k.get(LOSS_WEIGHT))
                .and_then(KeptValue::parsed)
        };
        match self.turns.get(turn)? {
            Turn::Tool(rs) => {
                let first = of(Some(0))?;
                (1..rs.len())
                    .all(|r| of(Some(r)) == Some(first))
                    .then_some(first)
            }
            _ => of(None),
        }
    }

    /// The messages kept whole that stood before turn `at`, in order.
    pub fn messages_at(&self, at: usize) -> impl Iterator<Item = &KeptValue> {
        self.kept.iter().filter_map(move |k| match k {
            Kept::Message { at: a, message } if *a == at => Some(message),
            _ => None,
        })
    }
}

/// What one tool result says about its call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Success,
    Failure,
}

/// The reference's rule for whether a tool result is a failure (hermes-batch-runner.md
/// §3.2), applied to the content as the model saw it:
/// - a JSON object fails when its `error` is present and not null, when its `content`
///   is an object whose `error` is not null, or when its `success` is exactly `false`
///   (a non-zero exit code is not a failure);
/// - any other JSON value (array, number, ...) succeeds;
/// - text that is not JSON fails when it is empty or when, stripped and lowercased, it
///   starts with `error:`.
pub fn classify_result(content: &Value) -> Outcome {
    match content {
        Value::Object(m) => classify_object(m),
        Value::String(s) => classify_text(s),
        _ => Outcome::Success,
    }
}

/// [`classify_result`] of tool output as text (what traj-run stores in a `tool`
/// message's `content`).
pub fn classify_text(s: &str) -> Outcome {
    match serde_json::from_str::<Value>(s) {
        Ok(Value::Object(m)) => classify_object(&m),
        Ok(_) => Outcome::Success,
        Err(_) => {
            let t = s.trim();
            if t.is_empty() || t.get(..6).is_some_and(|p| p.eq_ignore_ascii_case("error:")) {
                Outcome::Failure
            } else {
                Outcome::Success
            }
        }
    }
}

/// True when tool output text is a success by [`classify_result`]'s rule.
pub fn tool_succeeded(content: &str) -> bool {
    classify_text(content) == Outcome::Success
}

fn classify_object(m: &serde_json::Map<String, Value>) -> Outcome {
    let err_set = |v: Option<&Value>| v.is_some_and(|e| !e.is_null());
    if err_set(m.get("error")) {
        return Outcome::Failure;
    }
    if let Some(Value::Object(inner)) = m.get("content")
        && err_set(inner.get("error"))
    {
        return Outcome::Failure;
    }
    if m.get("success") == Some(&Value::Bool(false)) {
        return Outcome::Failure;
    }
    Outcome::Success
}

/// Why a tool call's `arguments` cannot be the object a tool is called with.
#[derive(Debug)]
pub enum ArgsError {
    /// Text that is not JSON.
    NotJson(serde_json::Error),
    /// JSON, or a value, that is not an object.
    NotAnObject,
}

/// A tool call's `arguments` as the object a tool is called with: absent, null or blank
/// text is `{}`; text must be the JSON of an object; an object is taken as it is.
pub fn call_arguments(v: Option<&Value>) -> Result<Value, ArgsError> {
    match v {
        None | Some(Value::Null) => Ok(Value::Object(serde_json::Map::new())),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(Value::Object(serde_json::Map::new())),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(v @ Value::Object(_)) => Ok(v),
            Ok(_) => Err(ArgsError::NotAnObject),
            Err(e) => Err(ArgsError::NotJson(e)),
        },
        Some(v @ Value::Object(_)) => Ok(v.clone()),
        Some(_) => Err(ArgsError::NotAnObject),
    }
}

/// Turn tool output text into the value stored in a result: text whose stripped form
/// starts with `{` or `[` and is JSON becomes that JSON value (the reference's rule);
/// anything else stays text. JSON here is the rule every row is read by
/// ([`crate::io::parse_value`]): an object with a key twice stays text, since one value
/// would silently take the other's place.
pub fn tool_content_value(text: &str) -> Value {
    let t = text.trim_start();
    if (t.starts_with('{') || t.starts_with('['))
        && let Ok(v) = crate::io::parse_value(text.as_bytes())
    {
        return v;
    }
    Value::String(text.to_string())
}

/// [`tool_content_value`] without copying text that stays text.
pub fn tool_content_value_owned(text: String) -> Value {
    let t = text.trim_start();
    if (t.starts_with('{') || t.starts_with('['))
        && let Ok(v) = crate::io::parse_value(text.as_bytes())
    {
        return v;
    }
    Value::String(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn success_rule_of_the_reference() {
        use Outcome::*;
        let cases = [
            (
                json!({"output": "x", "exit_code": 1, "error": null}),
                Success,
            ),
            (json!({"error": "boom"}), Failure),
            (json!({"content": {"error": "x"}}), Failure),
            (json!({"content": {"error": null}}), Success),
            (json!({"success": false}), Failure),
            (json!({"success": 0}), Success),
            (json!([1, 2]), Success),
            (json!("42"), Success),
            (json!("{\"error\": 1}"), Failure),
            (json!(""), Failure),
            (json!("  Error: no such file"), Failure),
            (json!("an error: later"), Success),
            (json!(7), Success),
        ];
        for (v, want) in cases {
            assert_eq!(classify_result(&v), want, "{v}");
        }
    }

    #[test]
    fn text_rule_is_the_value_rule() {
        for s in [
            "{\"error\": null, \"output\": 1}",
            "{\"error\": \"x\"}",
            "{\"success\": false}",
            "[1]",
            "  ERROR: nope",
            "",
            "fine",
            "érror: not ascii",
        ] {
            assert_eq!(
                tool_succeeded(s),
                classify_result(&json!(s)) == Outcome::Success,
                "{s:?}"
            );
        }
        assert!(!tool_succeeded("  Error: nope"));
        assert!(tool_succeeded("fine"));
    }

    #[test]
    fn declarations_name_their_tool_one_way() {
        let list = r#"["a", {"name": "b"}, {"type": "function", "function": {"name": "c"}},
            {"name": "outer", "function": {"name": "d"}}, {"description": "nameless"}]"#;
        assert_eq!(tool_names(list).unwrap(), ["a", "b", "c", "d"]);
        let v: Value = serde_json::from_str(list).unwrap();
        let named: Vec<String> = v.as_array().unwrap()[1..4]
            .iter()
            .map(|d| function_part(d, "tool schema").unwrap().name)
            .collect();
        assert_eq!(named, ["b", "c", "d"]);
        assert_eq!(
            tool_list_names(list).unwrap_err().to_string(),
            "tool 5: a tool schema has no \"name\" string"
        );
        assert_eq!(
            tool_list_names("\u{feff}x\n# c\n y \n").unwrap(),
            ["x", "y"]
        );
        assert_eq!(tool_list_names("{\"tools\": [\"z\"]}").unwrap(), ["z"]);
        assert_eq!(tool_list_names("42").unwrap_err(), ToolListError::NoList);
        assert!(matches!(
            tool_list_names("[1,"),
            Err(ToolListError::Json(_))
        ));
        assert!(matches!(tool_names("{}"), Err(ToolListError::NotAList(_))));
    }

    #[test]
    fn call_arguments_are_an_object_or_why_not() {
        let args = |v: Value| call_arguments(Some(&v));
        assert_eq!(call_arguments(None).unwrap(), json!({}));
        for empty in [json!(null), json!(""), json!(" \n")] {
            assert_eq!(args(empty).unwrap(), json!({}));
        }
        assert_eq!(args(json!("{\"a\": 1}")).unwrap(), json!({"a": 1}));
        assert_eq!(args(json!({"b": [2]})).unwrap(), json!({"b": [2]}));
        for not_object in [json!("[1]"), json!("3"), json!([1]), json!(true)] {
            assert!(matches!(args(not_object), Err(ArgsError::NotAnObject)));
        }
        assert!(matches!(args(json!("{\"a\":")), Err(ArgsError::NotJson(_))));
    }

    #[test]
    fn content_value_parses_only_json_looking_text() {
        assert_eq!(tool_content_value(" {\"a\": 1}"), json!({"a": 1}));
        // A key twice: one value would take the other's place, so it stays text.
        let twice = "{\"status\": \"fail\", \"status\": \"ok\"}";
        assert_eq!(tool_content_value(twice), json!(twice));
        assert_eq!(tool_content_value_owned(twice.into()), json!(twice));
        assert_eq!(tool_content_value("[1"), json!("[1"));
        assert_eq!(tool_content_value("42"), json!("42"));
    }
}

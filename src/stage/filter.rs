//! Row predicates for traj-filter: Hermes well-formedness, reasoning, tool validity,
//! completion flags, turn and token counts.
//!
//! A row is read once into a borrowed view ([`RowView`]): turn values stay raw JSON
//! text until a predicate needs them, so a tool turn (most of the bytes of a
//! trajectory) is only unescaped when `--well-formed` looks inside it.
//!
//! Two row shapes are understood:
//! - Hermes ShareGPT rows (`conversations` of `{"from","value"}`): every predicate.
//! - Raw run records (OpenAI `messages` with `tool_calls`, `role: "tool"` results and a
//!   `tools` list of schemas): every predicate too, judged on the OpenAI fields (see
//!   `docs/filter.md` for how each one reads them).
//!
//! Tags are matched literally (`<think>`, `</think>`, `<tool_call>`, `</tool_call>`,
//! `<tool_response>`, `</tool_response>`), as the Hermes chat template and its parsers do.

use std::borrow::Cow;
use std::collections::HashSet;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;

pub use crate::format::jsonscan::decode_str;
pub(crate) use crate::format::jsonscan::object_members;
use crate::format::jsonscan::{object_members_with, scan_json, scan_value, skip_ws};

/// A row as far as the predicates need it (values as raw, validated JSON text).
#[derive(Debug, Default)]
pub struct RowView<'a> {
    pub conversations: Option<Vec<Turn<'a>>>,
    pub messages: Option<Vec<Message<'a>>>,
    pub completed: Option<&'a str>,
    pub partial: Option<&'a str>,
    /// Tool schemas stored on the row (raw records; some datasets store a JSON string).
    pub tools: Option<&'a str>,
}

/// One ShareGPT turn; the value is kept as raw JSON text until it is needed.
#[derive(Debug)]
pub struct Turn<'a> {
    pub from: Cow<'a, str>,
    pub value: &'a str,
}

/// One OpenAI chat message of a raw run record.
#[derive(Debug, Deserialize)]
pub struct Message<'a> {
    #[serde(borrow)]
    pub role: Cow<'a, str>,
    #[serde(borrow, default)]
    pub content: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub reasoning: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub reasoning_content: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub tool_calls: Option<Vec<CallEntry<'a>>>,
    #[serde(borrow, default)]
    pub tool_call_id: Option<Cow<'a, str>>,
}

/// An entry of an OpenAI `tool_calls` list.
#[derive(Debug, Deserialize)]
pub struct CallEntry<'a> {
    #[serde(borrow, default)]
    pub id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub function: Option<FunctionEntry<'a>>,
}

#[derive(Debug, Deserialize)]
pub struct FunctionEntry<'a> {
    #[serde(borrow, default)]
    pub name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub arguments: Option<&'a RawValue>,
}

/// The JSON body of a Hermes `<tool_call>`.
#[derive(Debug, Deserialize)]
struct CallBody<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
}

/// Validate a `<tool_response>` body as JSON and return its `name`, if it is an object
/// with a string `name` (the fast scanner; serde_json only for an error's message).
fn response_name(body: &str) -> Result<Option<Cow<'_, str>>, String> {
    let b = body.as_bytes();
    let mut name = None;
    let end = if b.first() == Some(&b'{') {
        object_members(b, 0, |key, vs, ve| {
            if key == b"name" {
                name = decode_str(&body[vs..ve]);
            }
        })
    } else {
        scan_value(b, 0)
    };
    match end {
        Ok(e) if skip_ws(b, e) == b.len() => Ok(name),
        _ => Err(match serde_json::from_str::<IgnoredAny>(body) {
            Err(e) => e.to_string(),
            Ok(_) => "not valid JSON".into(),
        }),
    }
}

/// One declared tool: Hermes form `{"name", ...}` or OpenAI form `{"function": {"name"}}`.
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

/// The predicates a filter run applies (all ANDed).
#[derive(Debug, Default, Clone)]
pub struct Predicates {
    pub require_reasoning: bool,
    pub valid_tools: bool,
    /// Tools from `--tools FILE`, used instead of each row's own list.
    pub tools: Option<HashSet<String>>,
    pub well_formed: bool,
    pub completed: bool,
    pub no_partial: bool,
    pub has_tool_calls: bool,
    pub min_turns: Option<usize>,
    pub max_turns: Option<usize>,
    pub min_tokens: Option<usize>,
    pub max_tokens: Option<usize>,
}

impl Predicates {
    /// True when no predicate is set (the pass-through path).
    pub fn is_empty(&self) -> bool {
        !(self.require_reasoning
            || self.valid_tools
            || self.well_formed
            || self.completed
            || self.no_partial
            || self.has_tool_calls
            || self.min_turns.is_some()
            || self.max_turns.is_some()
            || self.needs_tokens())
    }

    pub fn needs_tokens(&self) -> bool {
        self.min_tokens.is_some() || self.max_tokens.is_some()
    }
}

/// Reason categories (the text before `: ` in a reject reason, and the keys of `--stats`).
pub mod reason {
    pub const NO_REASONING: &str = "no-reasoning";
    pub const INVALID_TOOLS: &str = "invalid-tools";
    pub const MALFORMED: &str = "malformed";
    pub const NOT_COMPLETED: &str = "not-completed";
    pub const PARTIAL: &str = "partial";
    pub const NO_TOOL_CALLS: &str = "no-tool-calls";
    pub const TOO_FEW_TURNS: &str = "too-few-turns";
    pub const TOO_MANY_TURNS: &str = "too-many-turns";
    pub const TOO_FEW_TOKENS: &str = "too-few-tokens";
    pub const TOO_MANY_TOKENS: &str = "too-many-tokens";
}

/// The category of a reason string (`"malformed: turn 3: ..."` -> `"malformed"`).
pub fn category(reason: &str) -> &str {
    reason.split_once(": ").map_or(reason, |(c, _)| c)
}

/// Why a row cannot be judged at all (bad input, not a drop).
pub type BadRow = String;

/// Check that `line` is one JSON object, without building it (the pass-through path).
pub fn validate_object(line: &[u8]) -> Result<(), BadRow> {
    first_is_brace(line)?;
    utf8(line)?;
    match scan_json(line) {
        Ok(()) => Ok(()),
        // Only the error path pays for serde_json, for its message.
        Err(at) => Err(match serde_json::from_slice::<IgnoredAny>(line) {
            Err(e) => format!("invalid JSON: {e}"),
            Ok(_) => format!("invalid JSON near byte {at}"),
        }),
    }
}

pub(crate) fn first_is_brace(line: &[u8]) -> Result<(), BadRow> {
    match line.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => Ok(()),
        Some(b'[') => Err("expected a JSON object, found an array".into()),
        Some(b'"') => Err("expected a JSON object, found a string".into()),
        Some(b) if b.is_ascii_digit() || *b == b'-' => {
            Err("expected a JSON object, found a number".into())
        }
        Some(b't' | b'f' | b'n') if serde_json::from_slice::<IgnoredAny>(line).is_ok() => {
            Err("expected a JSON object, found a literal".into())
        }
        _ => Err(match serde_json::from_slice::<IgnoredAny>(line) {
            Err(e) => format!("invalid JSON: {e}"),
            Ok(_) => "expected a JSON object".into(),
        }),
    }
}

/// The line as text: UTF-8 checked with SIMD (`simdutf8`; std's check runs at a few
/// hundred MB/s on non-ASCII text), std only for the error's position.
pub(crate) fn utf8(line: &[u8]) -> Result<&str, BadRow> {
    simdutf8::basic::from_utf8(line).map_err(|_| {
        let at = std::str::from_utf8(line)
            .err()
            .map_or(0, |e| e.valid_up_to());
        format!("invalid JSON: invalid UTF-8 at byte {at}")
    })
}

/// Parse a line into a [`RowView`], validating all of it.
///
/// One pass of the fast scanner over the line; only `messages` (raw records) goes
/// through serde_json.
pub fn parse_row(line: &[u8]) -> Result<RowView<'_>, BadRow> {
    first_is_brace(line)?;
    let text = utf8(line)?;
    let json_err = |at: usize| match serde_json::from_slice::<IgnoredAny>(line) {
        Err(e) => format!("invalid JSON: {e}"),
        Ok(_) => format!("invalid JSON near byte {at}"),
    };
    let b = line;
    let mut row = RowView::default();
    let mut shape: Option<String> = None;
    let end = object_members_with(b, 0, |key, vs| {
        if key == b"conversations" {
            // Walked once: the turns are read and validated in the same pass. When
            // they are not a list of objects, the plain scan tells bad JSON (the
            // error) from a bad shape.
            return match conversation_turns(b, text, vs) {
                Ok((t, ve)) => {
                    row.conversations = Some(t);
                    Ok(ve)
                }
                Err(e) => {
                    let ve = scan_value(b, vs)?;
                    shape = Some(e);
                    Ok(ve)
                }
            };
        }
        let ve = scan_value(b, vs)?;
        let raw = &text[vs..ve];
        match key {
            b"messages" => match serde_json::from_str::<Vec<Message>>(raw) {
                Ok(m) => row.messages = Some(m),
                Err(e) => shape = Some(format!("`messages`: {e}")),
            },
            b"completed" => row.completed = Some(raw),
            b"partial" => row.partial = Some(raw),
            b"tools" => row.tools = Some(raw),
            _ => {}
        }
        Ok(ve)
    })
    .map_err(json_err)?;
    if skip_ws(b, end) != b.len() {
        return Err(json_err(end));
    }
    if let Some(e) = shape {
        return Err(format!("unexpected row shape: {e}"));
    }
    if row.conversations.is_none() && row.messages.is_none() {
        return Err("row has neither `conversations` nor `messages`".into());
    }
    Ok(row)
}

/// The turns of the `conversations` value at `b[i..]`, validated as JSON, and the offset
/// after the list. `Err`: not a list of turn objects, or not valid JSON (the caller
/// tells which).
pub(crate) fn conversation_turns<'a>(
    b: &[u8],
    text: &'a str,
    i: usize,
) -> Result<(Vec<Turn<'a>>, usize), String> {
    let mut turns = Vec::new();
    let mut i = skip_ws(b, i);
    if b.get(i) != Some(&b'[') {
        return Err("`conversations` is not a list".into());
    }
    i = skip_ws(b, i + 1);
    if b.get(i) == Some(&b']') {
        return Ok((turns, i + 1));
    }
    loop {
        let n = turns.len() + 1;
        let (mut from, mut value) = (None, None);
        let end = object_members(b, i, |key, vs, ve| match key {
            b"from" => from = Some(&text[vs..ve]),
            b"value" => value = Some(&text[vs..ve]),
            _ => {}
        })
        .map_err(|_| format!("`conversations` entry {n} is not an object"))?;
        let from = from
            .and_then(decode_str)
            .ok_or_else(|| format!("`conversations` entry {n} has no string `from`"))?;
        let value = value.ok_or_else(|| format!("`conversations` entry {n} has no `value`"))?;
        turns.push(Turn { from, value });
        i = skip_ws(b, end);
        match b.get(i) {
            Some(b',') => i = skip_ws(b, i + 1),
            Some(b']') => return Ok((turns, i + 1)),
            _ => return Err("`conversations` is not valid JSON".into()),
        }
    }
}

/// Decode a raw JSON string value (borrowed when it holds no escapes).
fn raw_str(raw: &RawValue) -> Option<Cow<'_, str>> {
    decode_str(raw.get())
}

fn is_true(raw: Option<&str>) -> bool {
    raw == Some("true")
}

/// Evaluate every predicate; returns the reasons the row fails (empty: it passes).
pub fn evaluate(
    row: &RowView<'_>,
    p: &Predicates,
    tokenizer: Option<&dyn crate::format::tokens::Tokenizer>,
) -> Result<Vec<String>, BadRow> {
    let mut reasons = Vec::new();
    if p.completed && !is_true(row.completed) {
        let why = match row.completed {
            None => "no `completed` field",
            Some(_) => "`completed` is not true",
        };
        reasons.push(format!("{}: {why}", reason::NOT_COMPLETED));
    }
    if p.no_partial && is_true(row.partial) {
        reasons.push(format!("{}: `partial` is true", reason::PARTIAL));
    }
    let facts = match (&row.conversations, &row.messages) {
        (Some(turns), _) => hermes_facts(turns, row, p, tokenizer)?,
        (None, Some(msgs)) => raw_facts(msgs, row, p, tokenizer)?,
        (None, None) => return Err("row has neither `conversations` nor `messages`".into()),
    };
    if p.require_reasoning && !facts.reasoning {
        reasons.push(format!(
            "{}: no assistant turn has reasoning",
            reason::NO_REASONING
        ));
    }
    if p.has_tool_calls && facts.calls == 0 {
        reasons.push(format!("{}: no tool call", reason::NO_TOOL_CALLS));
    }
    if let Some(e) = facts.invalid_tool {
        reasons.push(format!("{}: {e}", reason::INVALID_TOOLS));
    }
    if let Some(e) = facts.malformed {
        reasons.push(format!("{}: {e}", reason::MALFORMED));
    }
    if let Some(n) = p.min_turns.filter(|&n| facts.turns < n) {
        reasons.push(format!("{}: {} < {n}", reason::TOO_FEW_TURNS, facts.turns));
    }
    if let Some(n) = p.max_turns.filter(|&n| facts.turns > n) {
        reasons.push(format!("{}: {} > {n}", reason::TOO_MANY_TURNS, facts.turns));
    }
    if let Some(n) = p.min_tokens.filter(|&n| facts.tokens < n) {
        reasons.push(format!(
            "{}: {} < {n}",
            reason::TOO_FEW_TOKENS,
            facts.tokens
        ));
    }
    if let Some(n) = p.max_tokens.filter(|&n| facts.tokens > n) {
        reasons.push(format!(
            "{}: {} > {n}",
            reason::TOO_MANY_TOKENS,
            facts.tokens
        ));
    }
    Ok(reasons)
}

/// What the predicates need to know about one row.
#[derive(Debug, Default)]
struct Facts {
    turns: usize,
    reasoning: bool,
    calls: usize,
    tokens: usize,
    /// First tool-validity problem (only looked for under `--valid-tools`).
    invalid_tool: Option<String>,
    /// First well-formedness problem (only looked for under `--well-formed`).
    malformed: Option<String>,
}

fn set_once(slot: &mut Option<String>, msg: impl FnOnce() -> String) {
    if slot.is_none() {
        *slot = Some(msg());
    }
}

// ---------------------------------------------------------------------------
// Hermes ShareGPT rows
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    ThinkOpen,
    ThinkClose,
    CallOpen,
    CallClose,
    RespOpen,
    RespClose,
}

const TAGS: [(&str, Tag); 6] = [
    ("<think>", Tag::ThinkOpen),
    ("</think>", Tag::ThinkClose),
    ("<tool_call>", Tag::CallOpen),
    ("</tool_call>", Tag::CallClose),
    ("<tool_response>", Tag::RespOpen),
    ("</tool_response>", Tag::RespClose),
];

impl Tag {
    fn text(self) -> &'static str {
        TAGS.iter()
            .find(|(_, t)| *t == self)
            .expect("every tag is listed")
            .0
    }
}

/// The next Hermes tag at or after `from`: its byte offset and kind.
fn next_tag(s: &str, from: usize) -> Option<(usize, Tag)> {
    let b = s.as_bytes();
    let mut i = from;
    while let Some(k) = memchr::memchr(b'<', &b[i..]) {
        let p = i + k;
        let rest = &b[p..];
        if rest.len() > 1 && matches!(rest[1], b't' | b'/') {
            for (text, tag) in TAGS {
                if rest.starts_with(text.as_bytes()) {
                    return Some((p, tag));
                }
            }
        }
        i = p + 1;
    }
    None
}

/// What a gpt turn holds: reasoning, tool-call bodies, and its first structural problem.
#[derive(Debug, Default)]
pub struct GptTurn<'a> {
    /// Some `<think>` block holds more than white space.
    pub reasoning: bool,
    /// The text inside each `<tool_call>` block, trimmed.
    pub calls: Vec<&'a str>,
    /// The first structural problem, if any.
    pub error: Option<String>,
}

/// Scan a gpt turn's value. Lenient: reasoning and calls are found even when the turn
/// is malformed (an unclosed `<think>` still counts as reasoning when it holds text).
pub fn scan_gpt(v: &str) -> GptTurn<'_> {
    let mut t = GptTurn::default();
    let mut pos = 0;
    while let Some((p, tag)) = next_tag(v, pos) {
        match tag {
            Tag::ThinkOpen => {
                if !t.calls.is_empty() {
                    set_once(&mut t.error, || "<think> after a <tool_call>".into());
                }
                let start = p + tag.text().len();
                match next_tag(v, start) {
                    Some((q, Tag::ThinkClose)) => {
                        t.reasoning |= !v[start..q].trim().is_empty();
                        pos = q + Tag::ThinkClose.text().len();
                    }
                    Some((q, other)) => {
                        t.reasoning |= !v[start..q].trim().is_empty();
                        set_once(&mut t.error, || {
                            format!("{} inside an unclosed <think>", other.text())
                        });
                        pos = q;
                    }
                    None => {
                        t.reasoning |= !v[start..].trim().is_empty();
                        set_once(&mut t.error, || "<think> is never closed".into());
                        break;
                    }
                }
            }
            Tag::CallOpen => {
                let start = p + tag.text().len();
                match memchr::memmem::find(&v.as_bytes()[start..], b"</tool_call>") {
                    Some(k) => {
                        t.calls.push(v[start..start + k].trim());
                        pos = start + k + Tag::CallClose.text().len();
                    }
                    None => {
                        t.calls.push(v[start..].trim());
                        set_once(&mut t.error, || "<tool_call> is never closed".into());
                        break;
                    }
                }
            }
            Tag::ThinkClose | Tag::CallClose => {
                set_once(&mut t.error, || {
                    format!("{} without an opening tag", tag.text())
                });
                pos = p + tag.text().len();
            }
            Tag::RespOpen | Tag::RespClose => {
                set_once(&mut t.error, || format!("{} in a gpt turn", tag.text()));
                pos = p + tag.text().len();
            }
        }
    }
    t
}

/// Split a tool turn into its `<tool_response>` bodies; `Err` names the first problem.
pub fn split_tool_turn(v: &str) -> Result<Vec<&str>, String> {
    let b = v.as_bytes();
    let open = memchr::memmem::Finder::new(b"<tool_response>");
    let close = memchr::memmem::Finder::new(b"</tool_response>");
    let mut bodies = Vec::new();
    let mut pos = 0;
    loop {
        let rest = &v[pos..];
        let skip = rest.len() - rest.trim_start().len();
        pos += skip;
        if pos == b.len() {
            break;
        }
        if !b[pos..].starts_with(b"<tool_response>") {
            return Err(match open.find(&b[pos..]) {
                Some(_) => "text outside <tool_response> blocks in a tool turn".into(),
                None if bodies.is_empty() => "tool turn holds no <tool_response> block".into(),
                None => "text after the last </tool_response>".into(),
            });
        }
        let start = pos + "<tool_response>".len();
        let Some(k) = close.find(&b[start..]) else {
            return Err("<tool_response> is never closed".into());
        };
        bodies.push(v[start..start + k].trim());
        pos = start + k + "</tool_response>".len();
    }
    if bodies.is_empty() {
        return Err("tool turn holds no <tool_response> block".into());
    }
    Ok(bodies)
}

/// The names in the `<tools>` block of a system turn: `None` when there is no block.
///
/// The Hermes template also names the tags in its prose (`within <tools> </tools> XML
/// tags`), so the list is the first `<tools>` block whose body is not blank.
fn system_tools(v: &str) -> Option<Result<Vec<String>, String>> {
    let b = v.as_bytes();
    let mut from = 0;
    loop {
        let start = from + memchr::memmem::find(&b[from..], b"<tools>")? + "<tools>".len();
        let Some(k) = memchr::memmem::find(&b[start..], b"</tools>") else {
            return Some(Err("<tools> is never closed in the system turn".into()));
        };
        let body = v[start..start + k].trim();
        if !body.is_empty() {
            return Some(tool_names(body).map_err(|e| format!("system <tools>: {e}")));
        }
        from = start + k;
    }
}

/// Tool names from a JSON list of declarations (Hermes, OpenAI, or plain names).
pub fn tool_names(json: &str) -> Result<Vec<String>, String> {
    let decls: Vec<ToolDecl> =
        serde_json::from_str(json).map_err(|e| format!("not a JSON list of tools: {e}"))?;
    Ok(decls
        .into_iter()
        .filter_map(|d| match d {
            ToolDecl::Name(n) => Some(n.into_owned()),
            ToolDecl::Decl { name, function } => {
                name.or(function.map(|f| f.name)).map(|n| n.into_owned())
            }
        })
        .collect())
}

/// Tool names from a row's own `tools` field: a JSON list, or a string holding one.
fn row_tools(raw: &str) -> Result<Vec<String>, String> {
    let text = raw;
    if text.starts_with('"') {
        let inner = decode_str(raw).ok_or("`tools` is not a valid string")?;
        tool_names(&inner).map_err(|e| format!("`tools`: {e}"))
    } else {
        tool_names(text).map_err(|e| format!("`tools`: {e}"))
    }
}

/// The tools a row may call: `--tools FILE`, else its own list; `Err` when unknown.
enum Offered<'p> {
    Global(&'p HashSet<String>),
    Row(Vec<String>),
    Unknown(String),
}

impl Offered<'_> {
    fn check(&self, name: &str) -> Result<(), String> {
        let known = match self {
            Offered::Global(set) => set.contains(name),
            Offered::Row(list) => list.iter().any(|n| n == name),
            Offered::Unknown(why) => return Err(format!("no tool list to judge {name:?} ({why})")),
        };
        if known {
            Ok(())
        } else {
            Err(format!("unknown tool {name:?}"))
        }
    }
}

fn args_are_object(args: Option<&RawValue>, name: &str) -> Result<(), String> {
    match args {
        Some(a) if a.get().starts_with('{') => Ok(()),
        Some(_) => Err(format!("arguments of {name:?} are not a JSON object")),
        None => Err(format!("call of {name:?} has no arguments")),
    }
}

fn hermes_facts(
    turns: &[Turn<'_>],
    row: &RowView<'_>,
    p: &Predicates,
    tokenizer: Option<&dyn crate::format::tokens::Tokenizer>,
) -> Result<Facts, BadRow> {
    let mut f = Facts {
        turns: turns.len(),
        ..Facts::default()
    };
    if p.well_formed && turns.is_empty() {
        f.malformed = Some("no turns".into());
    }
    let need_tools = p.valid_tools || p.well_formed;
    // Offered tools: --tools FILE, else the system turn's <tools>, else the row's `tools`.
    let mut offered = p.tools.as_ref().map(Offered::Global);
    let mut pending_calls: Vec<Option<String>> = Vec::new();
    let mut pending_turn = 0;
    for (i, turn) in turns.iter().enumerate() {
        let n = i + 1;
        let from: &str = &turn.from;
        let needs_value = from == "gpt"
            || (from == "system" && need_tools)
            || (from == "tool" && p.well_formed)
            || p.needs_tokens();
        let value = if needs_value {
            match decode_str(turn.value) {
                Some(v) => v,
                None => return Err(format!("turn {n}: `value` is not a string")),
            }
        } else {
            Cow::Borrowed("")
        };
        if let Some(tk) = tokenizer {
            f.tokens += tk.count(&value);
        }
        if p.well_formed && from != "tool" && !pending_calls.is_empty() {
            set_once(&mut f.malformed, || {
                format!(
                    "turn {pending_turn}: {} tool call(s) without a tool turn after them",
                    pending_calls.len()
                )
            });
            pending_calls.clear();
        }
        match from {
            "system" => {
                if p.well_formed && i != 0 {
                    set_once(&mut f.malformed, || {
                        format!("turn {n}: system turn not first")
                    });
                }
                if need_tools && offered.is_none() {
                    match system_tools(&value) {
                        Some(Ok(names)) => offered = Some(Offered::Row(names)),
                        Some(Err(e)) => {
                            if p.well_formed {
                                set_once(&mut f.malformed, || format!("turn {n}: {e}"));
                            }
                            offered = Some(Offered::Unknown(e));
                        }
                        None => {}
                    }
                }
            }
            "human" => {}
            "gpt" => {
                let g = scan_gpt(&value);
                f.reasoning |= g.reasoning;
                f.calls += g.calls.len();
                if p.well_formed
                    && let Some(e) = &g.error
                {
                    set_once(&mut f.malformed, || format!("turn {n}: {e}"));
                }
                if need_tools && offered.is_none() && !g.calls.is_empty() {
                    offered = Some(match row.tools {
                        Some(raw) => match row_tools(raw) {
                            Ok(names) => Offered::Row(names),
                            Err(e) => Offered::Unknown(e),
                        },
                        None => Offered::Unknown(
                            "no <tools> in the system turn and no --tools FILE".into(),
                        ),
                    });
                }
                for body in &g.calls {
                    let parsed = serde_json::from_str::<CallBody>(body);
                    match &parsed {
                        Ok(c) => {
                            if p.valid_tools {
                                let o = offered.as_ref().expect("set above");
                                if let Err(e) = o
                                    .check(&c.name)
                                    .and_then(|_| args_are_object(c.arguments, &c.name))
                                {
                                    set_once(&mut f.invalid_tool, || format!("turn {n}: {e}"));
                                }
                            }
                        }
                        Err(e) => {
                            let msg = || format!("turn {n}: <tool_call> body is not JSON: {e}");
                            if p.valid_tools {
                                set_once(&mut f.invalid_tool, msg);
                            }
                            if p.well_formed {
                                set_once(&mut f.malformed, msg);
                            }
                        }
                    }
                    if p.well_formed {
                        pending_calls.push(parsed.ok().map(|c| c.name.into_owned()));
                    }
                }
                pending_turn = n;
            }
            "tool" => {
                if p.well_formed {
                    if pending_calls.is_empty() {
                        set_once(&mut f.malformed, || {
                            format!(
                                "turn {n}: tool turn does not follow a gpt turn with tool calls"
                            )
                        });
                    } else {
                        check_responses(&value, &pending_calls, n, &mut f.malformed);
                    }
                    pending_calls.clear();
                }
            }
            other => {
                if p.well_formed {
                    set_once(&mut f.malformed, || {
                        format!("turn {n}: unknown role {other:?}")
                    });
                }
            }
        }
    }
    if p.well_formed && !pending_calls.is_empty() {
        set_once(&mut f.malformed, || {
            format!(
                "turn {pending_turn}: {} tool call(s) without a tool turn after them",
                pending_calls.len()
            )
        });
    }
    Ok(f)
}

fn check_responses(value: &str, calls: &[Option<String>], n: usize, slot: &mut Option<String>) {
    let bodies = match split_tool_turn(value) {
        Ok(b) => b,
        Err(e) => return set_once(slot, || format!("turn {n}: {e}")),
    };
    for (k, body) in bodies.iter().enumerate() {
        match response_name(body) {
            Ok(name) => {
                if let (Some(name), Some(Some(call))) = (&name, calls.get(k))
                    && name != call
                {
                    return set_once(slot, || {
                        format!(
                            "turn {n}: response {} is named {name:?} but call {} is {call:?}",
                            k + 1,
                            k + 1
                        )
                    });
                }
            }
            Err(e) => {
                return set_once(slot, || {
                    format!("turn {n}: <tool_response> {} body is not JSON: {e}", k + 1)
                });
            }
        }
    }
    if bodies.len() != calls.len() {
        set_once(slot, || {
            format!(
                "turn {n}: {} response(s) for {} call(s)",
                bodies.len(),
                calls.len()
            )
        });
    }
}

// ---------------------------------------------------------------------------
// Raw run records (OpenAI messages)
// ---------------------------------------------------------------------------

/// The text of a message `content`: a string, or the `text` parts of a list.
fn content_text<'a>(raw: Option<&'a RawValue>) -> Cow<'a, str> {
    #[derive(Deserialize)]
    struct Part<'b> {
        #[serde(borrow, default)]
        text: Option<Cow<'b, str>>,
        #[serde(borrow, default)]
        value: Option<&'b RawValue>,
    }
    let Some(raw) = raw else {
        return Cow::Borrowed("");
    };
    match raw.get().as_bytes().first() {
        Some(b'"') => raw_str(raw).unwrap_or(Cow::Borrowed("")),
        Some(b'[') => {
            let parts: Vec<Part> = serde_json::from_str(raw.get()).unwrap_or_default();
            let mut s = String::new();
            for part in parts {
                if let Some(t) = part.text {
                    s.push_str(&t);
                } else if let Some(v) = part.value.and_then(raw_str) {
                    s.push_str(&v);
                }
            }
            Cow::Owned(s)
        }
        _ => Cow::Borrowed(""),
    }
}

fn nonblank_str(raw: Option<&RawValue>) -> bool {
    raw.and_then(raw_str).is_some_and(|s| !s.trim().is_empty())
}

fn raw_facts(
    msgs: &[Message<'_>],
    row: &RowView<'_>,
    p: &Predicates,
    tokenizer: Option<&dyn crate::format::tokens::Tokenizer>,
) -> Result<Facts, BadRow> {
    let mut f = Facts {
        turns: msgs.len(),
        ..Facts::default()
    };
    if p.well_formed && msgs.is_empty() {
        f.malformed = Some("no messages".into());
    }
    let offered = if p.valid_tools {
        Some(match (&p.tools, row.tools) {
            (Some(set), _) => Offered::Global(set),
            (None, Some(raw)) => match row_tools(raw) {
                Ok(names) => Offered::Row(names),
                Err(e) => Offered::Unknown(e),
            },
            (None, None) => Offered::Unknown("no `tools` on the row and no --tools FILE".into()),
        })
    } else {
        None
    };
    // Ids of the calls of the last assistant message still waiting for a tool result.
    let mut open: Vec<String> = Vec::new();
    let mut open_at = 0;
    for (i, m) in msgs.iter().enumerate() {
        let n = i + 1;
        let role: &str = &m.role;
        let text = if role == "assistant" || tokenizer.is_some() {
            content_text(m.content)
        } else {
            Cow::Borrowed("")
        };
        if let Some(tk) = tokenizer {
            f.tokens += tk.count(&text);
            for r in [m.reasoning, m.reasoning_content].into_iter().flatten() {
                f.tokens += raw_str(r).map_or(0, |s| tk.count(&s));
            }
        }
        if p.well_formed && role != "tool" && !open.is_empty() {
            set_once(&mut f.malformed, || {
                format!("message {open_at}: tool call(s) {open:?} have no tool result")
            });
            open.clear();
        }
        match role {
            "assistant" => {
                let g = scan_gpt(&text);
                f.reasoning |= nonblank_str(m.reasoning)
                    || nonblank_str(m.reasoning_content)
                    || g.reasoning
                    || scratchpad_reasoning(&text);
                let calls = m.tool_calls.as_deref().unwrap_or(&[]);
                f.calls += calls.len();
                for (k, c) in calls.iter().enumerate() {
                    let name = c.function.as_ref().and_then(|f| f.name.as_deref());
                    if let Some(o) = &offered {
                        let res = match name {
                            None => Err(format!("call {} has no function name", k + 1)),
                            Some(name) => o.check(name).and_then(|_| {
                                raw_args_are_object(
                                    c.function.as_ref().and_then(|f| f.arguments),
                                    name,
                                )
                            }),
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
                    None => set_once(&mut f.malformed, || {
                        format!("message {n}: tool result {id:?} answers no pending call")
                    }),
                }
            }
            "system" | "user" | "tool" | "developer" => {}
            other => {
                if p.well_formed {
                    set_once(&mut f.malformed, || {
                        format!("message {n}: unknown role {other:?}")
                    });
                }
            }
        }
    }
    if p.well_formed && !open.is_empty() {
        set_once(&mut f.malformed, || {
            format!("message {open_at}: tool call(s) {open:?} have no tool result")
        });
    }
    Ok(f)
}

/// The reference's raw-record rule also counts a `<REASONING_SCRATCHPAD>` in the content.
fn scratchpad_reasoning(text: &str) -> bool {
    let Some(k) = text.find("<REASONING_SCRATCHPAD>") else {
        return false;
    };
    let rest = &text[k + "<REASONING_SCRATCHPAD>".len()..];
    let body = rest
        .find("</REASONING_SCRATCHPAD>")
        .map_or(rest, |e| &rest[..e]);
    !body.trim().is_empty()
}

/// OpenAI arguments are a JSON string holding an object (or, from some servers, the
/// object itself).
fn raw_args_are_object(args: Option<&RawValue>, name: &str) -> Result<(), String> {
    let Some(a) = args else {
        return Err(format!("call of {name:?} has no arguments"));
    };
    let text = a.get();
    if text.starts_with('{') {
        return Ok(());
    }
    let inner = raw_str(a).ok_or_else(|| format!("arguments of {name:?} are not a JSON object"))?;
    match serde_json::from_str::<&RawValue>(&inner) {
        Ok(v) if v.get().starts_with('{') => Ok(()),
        _ => Err(format!("arguments of {name:?} are not a JSON object")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Predicates {
        Predicates {
            require_reasoning: true,
            valid_tools: true,
            well_formed: true,
            ..Predicates::default()
        }
    }

    fn judge(line: &str) -> Vec<String> {
        let row = parse_row(line.as_bytes()).unwrap();
        evaluate(&row, &all(), None).unwrap()
    }

    fn hermes(turns: &[(&str, &str)]) -> String {
        let conv: Vec<_> = turns
            .iter()
            .map(|(f, v)| serde_json::json!({"from": f, "value": v}))
            .collect();
        serde_json::json!({"conversations": conv}).to_string()
    }

    const SYS: &str = "Tools:\n<tools>\n[{\"name\": \"terminal\", \"parameters\": {}}]\n</tools>\nUse <tool_call> </tool_call>.";
    const CALL: &str = "<think>\nlook\n</think>\n<tool_call>\n{\"name\": \"terminal\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>";
    const RESP: &str = "<tool_response>\n{\"tool_call_id\": \"c1\", \"name\": \"terminal\", \"content\": \"a\"}\n</tool_response>";

    #[test]
    fn good_row_passes_everything() {
        let r = judge(&hermes(&[
            ("system", SYS),
            ("human", "hi"),
            ("gpt", CALL),
            ("tool", RESP),
            ("gpt", "<think>\n</think>\ndone"),
        ]));
        assert!(r.is_empty(), "{r:?}");
    }

    #[test]
    fn empty_think_is_not_reasoning() {
        let r = judge(&hermes(&[
            ("system", SYS),
            ("human", "hi"),
            ("gpt", "<think>\n  \n</think>\nanswer"),
        ]));
        assert_eq!(r.len(), 1);
        assert_eq!(category(&r[0]), reason::NO_REASONING);
    }

    #[test]
    fn hallucinated_tool_and_bad_arguments() {
        let bad = CALL.replace("\"terminal\"", "\"shell\"");
        let r = judge(&hermes(&[
            ("system", SYS),
            ("human", "hi"),
            ("gpt", &bad),
            ("tool", &RESP.replace("terminal", "shell")),
        ]));
        assert_eq!(r, ["invalid-tools: turn 3: unknown tool \"shell\""]);
        let bad = CALL.replace("{\"command\": \"ls\"}", "\"ls\"");
        let r = judge(&hermes(&[
            ("system", SYS),
            ("human", "hi"),
            ("gpt", &bad),
            ("tool", RESP),
        ]));
        assert_eq!(
            r,
            ["invalid-tools: turn 3: arguments of \"terminal\" are not a JSON object"]
        );
    }

    #[test]
    fn structure_errors() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (
                &[("system", SYS), ("gpt", "<think>\nx\n<tool_call>")],
                "malformed: turn 2: <tool_call> inside an unclosed <think>",
            ),
            (
                &[("system", SYS), ("gpt", "<think>x</think></think>")],
                "malformed: turn 2: </think> without an opening tag",
            ),
            (
                &[("system", SYS), ("gpt", "<think>x</think>"), ("tool", RESP)],
                "malformed: turn 3: tool turn does not follow a gpt turn with tool calls",
            ),
            (
                &[("system", SYS), ("gpt", CALL), ("gpt", "<think>x</think>")],
                "malformed: turn 2: 1 tool call(s) without a tool turn after them",
            ),
            (
                &[
                    ("system", SYS),
                    ("gpt", CALL),
                    ("tool", &format!("{RESP}\n{RESP}")),
                ],
                "malformed: turn 3: 2 response(s) for 1 call(s)",
            ),
            (
                &[
                    ("system", SYS),
                    ("gpt", CALL),
                    ("tool", "<tool_response>\nnot json\n</tool_response>"),
                ],
                "malformed: turn 3: <tool_response> 1 body is not JSON: expected ident at line 1 column 2",
            ),
            (
                &[
                    ("system", SYS),
                    ("gpt", &format!("{CALL}\n<think>late</think>")),
                    ("tool", RESP),
                ],
                "malformed: turn 2: <think> after a <tool_call>",
            ),
        ];
        for (turns, want) in cases {
            let r = judge(&hermes(turns));
            assert!(r.iter().any(|x| x == want), "want {want:?}, got {r:?}");
        }
    }

    #[test]
    fn raw_records() {
        let row = serde_json::json!({
            "completed": true,
            "tools": [{"type": "function", "function": {"name": "terminal"}}],
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "", "reasoning": "think",
                 "tool_calls": [{"id": "c1", "type": "function",
                   "function": {"name": "terminal", "arguments": "{\"command\":\"ls\"}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "ok"},
                {"role": "assistant", "content": "done"}
            ]
        })
        .to_string();
        assert!(judge(&row).is_empty());
        let bad = row.replace("\"c1\",\"content\"", "\"c9\",\"content\"");
        assert_ne!(bad, row);
        let r = judge(&bad);
        assert_eq!(category(&r[0]), reason::MALFORMED, "{r:?}");
        let r = judge(&row.replace("\"reasoning\":\"think\"", "\"reasoning\":\" \""));
        assert_eq!(r, ["no-reasoning: no assistant turn has reasoning"]);
    }

    #[test]
    fn validate_object_messages() {
        assert!(validate_object(b"{\"a\":1}").is_ok());
        assert_eq!(
            validate_object(b"[1]").unwrap_err(),
            "expected a JSON object, found an array"
        );
        assert!(
            validate_object(b"{\"a\":")
                .unwrap_err()
                .starts_with("invalid JSON")
        );
        assert!(
            validate_object(b"{\"a\":\"\xff\"}")
                .unwrap_err()
                .contains("UTF-8")
        );
    }
}

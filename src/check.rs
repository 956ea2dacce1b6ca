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
    let end = object_members(b, 0, |key, vs, ve| {
        let raw = &text[vs..ve];
        match key {
            b"conversations" => match conversation_turns(b, text, vs) {
                Ok(t) => row.conversations = Some(t),
                Err(e) => shape = Some(e),
            },
            b"messages" => match serde_json::from_str::<Vec<Message>>(raw) {
                Ok(m) => row.messages = Some(m),
                Err(e) => shape = Some(format!("`messages`: {e}")),
            },
            b"completed" => row.completed = Some(raw),
            b"partial" => row.partial = Some(raw),
            b"tools" => row.tools = Some(raw),
            _ => {}
        }
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

/// Walk the members of the object at `b[i..]`, validating every value; `f` gets each
/// key (raw, without quotes) and its value's span. Returns the offset after the object.
pub(crate) fn object_members<'b>(
    b: &'b [u8],
    i: usize,
    mut f: impl FnMut(&'b [u8], usize, usize),
) -> Result<usize, usize> {
    let mut i = skip_ws(b, i);
    if b.get(i) != Some(&b'{') {
        return Err(i);
    }
    i = skip_ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        return Ok(i + 1);
    }
    loop {
        if b.get(i) != Some(&b'"') {
            return Err(i);
        }
        let ks = i + 1;
        i = scan_string(b, ks)?;
        let key = &b[ks..i - 1];
        i = skip_ws(b, i);
        if b.get(i) != Some(&b':') {
            return Err(i);
        }
        let vs = skip_ws(b, i + 1);
        let ve = scan_value(b, vs)?;
        f(key, vs, ve);
        i = skip_ws(b, ve);
        match b.get(i) {
            Some(b',') => i = skip_ws(b, i + 1),
            Some(b'}') => return Ok(i + 1),
            _ => return Err(i),
        }
    }
}

/// The turns of a `conversations` value (already validated as JSON).
pub(crate) fn conversation_turns<'a>(
    b: &[u8],
    text: &'a str,
    i: usize,
) -> Result<Vec<Turn<'a>>, String> {
    let mut turns = Vec::new();
    let mut i = skip_ws(b, i);
    if b.get(i) != Some(&b'[') {
        return Err("`conversations` is not a list".into());
    }
    i = skip_ws(b, i + 1);
    if b.get(i) == Some(&b']') {
        return Ok(turns);
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
            _ => return Ok(turns),
        }
    }
}

/// Decode raw JSON text that is a string (validated), borrowing when it has no escape.
///
/// Copies 8 bytes at a time up to the next backslash: escapes are dense in tool output
/// embedded as JSON, so per-escape calls to memchr/memcpy would dominate.
pub fn decode_str(raw: &str) -> Option<Cow<'_, str>> {
    let inner = raw.strip_prefix('"')?.strip_suffix('"')?;
    let b = inner.as_bytes();
    let Some(first) = memchr::memchr(b'\\', b) else {
        return Some(Cow::Borrowed(inner));
    };
    let mut out: Vec<u8> = Vec::with_capacity(b.len());
    out.extend_from_slice(&b[..first]);
    let mut i = first;
    let n = b.len();
    loop {
        // here b[i] is a backslash, or i == n
        if i >= n {
            break;
        }
        let esc = *b.get(i + 1)?;
        match esc {
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'b' => out.push(8),
            b'f' => out.push(12),
            b'"' | b'\\' | b'/' => out.push(esc),
            b'u' => {
                let hex = |at: usize| -> Option<u32> {
                    u32::from_str_radix(inner.get(at..at + 4)?, 16).ok()
                };
                let mut c = hex(i + 2)?;
                let mut next = i + 6;
                if (0xD800..0xDC00).contains(&c)
                    && b.get(next) == Some(&b'\\')
                    && b.get(next + 1) == Some(&b'u')
                    && let Some(lo) = hex(next + 2).filter(|lo| (0xDC00..0xE000).contains(lo))
                {
                    c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
                    next += 6;
                }
                let ch = char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER);
                let mut tmp = [0u8; 4];
                out.extend_from_slice(ch.encode_utf8(&mut tmp).as_bytes());
                i = next - 2;
            }
            _ => return None,
        }
        i += 2;
        // copy plain bytes up to the next backslash
        loop {
            if i + 8 <= n {
                let w: [u8; 8] = b[i..i + 8].try_into().expect("8 bytes");
                let m = eq_bytes(u64::from_le_bytes(w), b'\\');
                let d = if m == 0 {
                    8
                } else {
                    (m.trailing_zeros() / 8) as usize
                };
                out.extend_from_slice(&w);
                out.truncate(out.len() - 8 + d);
                i += d;
                if d < 8 {
                    break;
                }
            } else {
                while i < n && b[i] != b'\\' {
                    out.push(b[i]);
                    i += 1;
                }
                break;
            }
        }
    }
    String::from_utf8(out).ok().map(Cow::Owned)
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
    tokenizer: Option<&dyn crate::tokens::Tokenizer>,
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
    tokenizer: Option<&dyn crate::tokens::Tokenizer>,
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
    tokenizer: Option<&dyn crate::tokens::Tokenizer>,
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

// ---------------------------------------------------------------------------
// Fast JSON validation (the pass-through path)
// ---------------------------------------------------------------------------

/// Validate one JSON text without building it; `Err(offset)` near the first error.
///
/// String bodies, most of a trajectory's bytes, are skipped 8 bytes at a time (a SWAR
/// test for `"`, `\` and control bytes); UTF-8 is checked once on the whole text with
/// `simdutf8` (outside strings a non-ASCII byte is a syntax error). The error offset
/// is only a hint: callers re-parse a bad line with serde_json for the message.
pub fn json_is_valid(b: &[u8]) -> bool {
    simdutf8::basic::from_utf8(b).is_ok() && scan_json(b).is_ok()
}

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;
const LO7: u64 = 0x7F7F_7F7F_7F7F_7F7F;

/// High bit set in each byte of `v` equal to `c` (exact: no borrow between bytes).
#[inline(always)]
fn eq_bytes(v: u64, c: u8) -> u64 {
    let x = v ^ (LO * c as u64);
    !(((x & LO7) + LO7) | x) & HI
}

/// High bit set in each byte of `v` below 0x20 (exact).
#[inline(always)]
fn ctl_bytes(v: u64) -> u64 {
    !(((v & LO7) + LO * 0x60) | v) & HI
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// The high bit of each byte of `m` (a SWAR mask), packed into 8 bits (bit k = byte k).
#[inline(always)]
fn pack(m: u64) -> u8 {
    ((m >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56) as u8
}

/// `i` is just after the opening quote; returns the offset after the closing one.
///
/// Eight bytes at a time, without a branch per escape (tool output embedded as JSON has
/// an escape every few bytes): masks of quotes and backslashes give the escaped bytes
/// (the simdjson odd-backslash-run method, on 8-bit masks), hence the closing quote.
/// `\u` escapes, invalid escapes and control bytes go to the byte-wise scanner.
/// Callers check UTF-8 on the whole text.
#[inline]
fn scan_string(b: &[u8], mut i: usize) -> Result<usize, usize> {
    const EVEN: u8 = 0x55;
    let mut esc_in = 0u8; // 1: b[i] is escaped by a backslash run ending at i - 1
    while i + 8 <= b.len() {
        let v = u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let bs64 = eq_bytes(v, b'\\');
        let qt64 = eq_bytes(v, b'"');
        let odd64 = ctl_bytes(v); // UTF-8 is checked on the whole line by the callers
        if (bs64 | qt64 | odd64) == 0 && esc_in == 0 {
            i += 8; // plain text: the common case outside tool output
            continue;
        }
        let (bs, qt, odd) = (pack(bs64), pack(qt64), pack(odd64));
        // bytes escaped by an odd run of backslashes
        let starts = bs & !esc_in;
        let follows = (starts << 1) | esc_in;
        let odd_starts = starts & !EVEN & !follows;
        let (even_seq, carry) = odd_starts.overflowing_add(starts);
        let escaped = (EVEN ^ (even_seq << 1)) & follows;
        let quotes = qt & !escaped;
        // bytes up to and including the closing quote, if it is in this word
        let upto = if quotes == 0 {
            0xFF
        } else {
            let e = quotes.trailing_zeros();
            (((1u16 << (e + 1)) - 1) & 0xFF) as u8
        };
        // escaped bytes other than `"` and `\\` must be a valid escape letter
        let mut letters = escaped & !(qt | bs) & upto;
        let mut rare = odd & upto;
        while letters != 0 {
            if ESCAPE_LEN[b[i + letters.trailing_zeros() as usize] as usize] != 2 {
                rare = 1;
            }
            letters &= letters - 1;
        }
        if rare != 0 {
            // Byte by byte past this word, then back to words.
            let from = if esc_in == 1 { i - 1 } else { i };
            match scan_string_bytes(b, from, i + 8)? {
                Step::Closed(end) => return Ok(end),
                Step::At(pos) => {
                    i = pos;
                    esc_in = 0;
                    continue;
                }
            }
        }
        if quotes != 0 {
            return Ok(i + quotes.trailing_zeros() as usize + 1);
        }
        esc_in = carry as u8;
        i += 8;
    }
    match scan_string_bytes(b, if esc_in == 1 { i - 1 } else { i }, usize::MAX)? {
        Step::Closed(end) => Ok(end),
        Step::At(pos) => Err(pos),
    }
}

/// Where the byte-wise scanner stopped.
enum Step {
    /// The string closed; offset after the quote.
    Closed(usize),
    /// Reached `limit` at a boundary between characters (not inside an escape).
    At(usize),
}

/// The byte-wise string scanner (tails, rare escapes, control bytes),
/// up to the closing quote or to the first character boundary at or after `limit`.
fn scan_string_bytes(b: &[u8], mut i: usize, limit: usize) -> Result<Step, usize> {
    while i < b.len() {
        if i >= limit {
            return Ok(Step::At(i));
        }
        match b[i] {
            b'"' => return Ok(Step::Closed(i + 1)),
            b'\\' => i += escape_len(b, i)?,
            0..=0x1f => return Err(i),
            _ => i += 1, // UTF-8 is checked by the callers, on the whole text
        }
    }
    Err(i)
}

/// Length of each escape sequence by the byte after the backslash (0: invalid).
const ESCAPE_LEN: [u8; 256] = {
    let mut t = [0u8; 256];
    let simple = *b"\"\\/bfnrt";
    let mut k = 0;
    while k < simple.len() {
        t[simple[k] as usize] = 2;
        k += 1;
    }
    t[b'u' as usize] = 6;
    t
};

/// Length of the escape sequence at `b[k]` (a backslash), if it is valid.
#[inline(always)]
fn escape_len(b: &[u8], k: usize) -> Result<usize, usize> {
    let Some(&c) = b.get(k + 1) else {
        return Err(k);
    };
    match ESCAPE_LEN[c as usize] {
        2 => Ok(2),
        6 => match b.get(k + 2..k + 6) {
            Some(hex) if hex.iter().all(u8::is_ascii_hexdigit) => Ok(6),
            _ => Err(k),
        },
        _ => Err(k),
    }
}

fn scan_number(b: &[u8], mut i: usize) -> Result<usize, usize> {
    let digits = |b: &[u8], mut i: usize| {
        let s = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        (i, i - s)
    };
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => i = digits(b, i).0,
        _ => return Err(i),
    }
    if b.get(i) == Some(&b'.') {
        let (j, n) = digits(b, i + 1);
        if n == 0 {
            return Err(j);
        }
        i = j;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let (j, n) = digits(b, i);
        if n == 0 {
            return Err(j);
        }
        i = j;
    }
    Ok(i)
}

/// Validate a whole JSON text.
fn scan_json(b: &[u8]) -> Result<(), usize> {
    let end = scan_value(b, 0)?;
    let end = skip_ws(b, end);
    if end == b.len() { Ok(()) } else { Err(end) }
}

/// Validate the JSON value starting at `b[i..]` (after optional white space); returns
/// the offset just after it. Structural validation with an explicit stack.
fn scan_value(b: &[u8], i: usize) -> Result<usize, usize> {
    // stack of open containers: true = object, false = array
    let mut stack: Vec<bool> = Vec::new();
    let mut i = skip_ws(b, i);
    'value: loop {
        // parse one value at i
        i = skip_ws(b, i);
        match b.get(i) {
            Some(b'{') => {
                i = skip_ws(b, i + 1);
                if b.get(i) == Some(&b'}') {
                    i += 1;
                } else {
                    stack.push(true);
                    if b.get(i) != Some(&b'"') {
                        return Err(i);
                    }
                    i = scan_string(b, i + 1)?;
                    i = skip_ws(b, i);
                    if b.get(i) != Some(&b':') {
                        return Err(i);
                    }
                    i += 1;
                    continue 'value;
                }
            }
            Some(b'[') => {
                i = skip_ws(b, i + 1);
                if b.get(i) == Some(&b']') {
                    i += 1;
                } else {
                    stack.push(false);
                    continue 'value;
                }
            }
            Some(b'"') => i = scan_string(b, i + 1)?,
            Some(b't') if b[i..].starts_with(b"true") => i += 4,
            Some(b'f') if b[i..].starts_with(b"false") => i += 5,
            Some(b'n') if b[i..].starts_with(b"null") => i += 4,
            Some(b'-' | b'0'..=b'9') => i = scan_number(b, i)?,
            _ => return Err(i),
        }
        // after a value: close containers or go on with the next element
        loop {
            if stack.is_empty() {
                return Ok(i);
            }
            i = skip_ws(b, i);
            match stack.last() {
                None => return Ok(i),
                Some(&is_obj) => match b.get(i) {
                    Some(b',') => {
                        i = skip_ws(b, i + 1);
                        if is_obj {
                            if b.get(i) != Some(&b'"') {
                                return Err(i);
                            }
                            i = scan_string(b, i + 1)?;
                            i = skip_ws(b, i);
                            if b.get(i) != Some(&b':') {
                                return Err(i);
                            }
                            i += 1;
                        }
                        continue 'value;
                    }
                    Some(b'}') if is_obj => {
                        stack.pop();
                        i += 1;
                    }
                    Some(b']') if !is_obj => {
                        stack.pop();
                        i += 1;
                    }
                    _ => return Err(i),
                },
            }
        }
    }
}

#[cfg(test)]
mod validator_tests {
    use super::*;

    #[test]
    fn random_strings_agree_with_serde_json() {
        let alphabet: [&[u8]; 16] = [
            b"a",
            b"\"",
            b"\\",
            b"n",
            b"u",
            b"0",
            b"\t",
            "é".as_bytes(),
            b"\\\"",
            b"\\n",
            b"\\u00e9",
            b"#",
            "中文".as_bytes(),
            "😀".as_bytes(),
            b"\xe4\xb8", // a truncated sequence: invalid UTF-8
            b"plain words",
        ];
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..50_000 {
            let mut line = b"{\"k\": \"".to_vec();
            for _ in 0..rng.usize(0..120) {
                line.extend_from_slice(alphabet[rng.usize(0..alphabet.len())]);
            }
            line.extend_from_slice(b"\"}");
            let want = serde_json::from_slice::<serde_json::Value>(&line).is_ok();
            assert_eq!(
                json_is_valid(&line),
                want,
                "{}",
                String::from_utf8_lossy(&line)
            );
            if want {
                let v: serde_json::Value = serde_json::from_slice(&line).unwrap();
                let raw = std::str::from_utf8(&line[6..line.len() - 1]).unwrap();
                assert_eq!(decode_str(raw).unwrap(), v["k"].as_str().unwrap());
            }
        }
    }

    #[test]
    fn agrees_with_serde_json() {
        let cases: &[&[u8]] = &[
            b"{}",
            b" { \"a\" : [1, -2.5e+3, true, false, null, {\"b\": []}, \"x\\u00e9\\n\\\"\"] } ",
            b"{\"a\":1,}",
            b"{\"a\" 1}",
            b"[1,]",
            b"{\"a\":01}",
            b"{\"a\":1.}",
            b"{\"a\":-}",
            b"{\"a\":\"\\x\"}",
            b"{\"a\":\"\\u12g4\"}",
            b"{\"a\":\"tab\there\"}",
            b"{\"a\":\"unterminated}",
            b"{\"a\":1}}",
            b"{\"a\":1} x",
            b"{\"a\":tru}",
            b"[[[[[]]]]]",
            b"[[[[[]]]]",
            b"{\"long string with no escapes at all, more than eight bytes\": \"and \\\"quotes\\\" too\"}",
            b"",
            b"   ",
            b"{\"a\":\"\xc3\xa9\"}",
            b"{\"a\":\"\xff\"}",
            b"{\"a\":1e5,\"b\":0.5E-2,\"c\":-0}",
        ];
        for c in cases {
            // serde_json's IgnoredAny skips UTF-8 checks inside strings; Value does not.
            let want = serde_json::from_slice::<serde_json::Value>(c).is_ok();
            assert_eq!(json_is_valid(c), want, "{}", String::from_utf8_lossy(c));
        }
    }
}

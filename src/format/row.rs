//! The borrowed row view: one JSONL line read as far as traj-filter, traj-merge and
//! traj-compress need it, without building a `serde_json::Value`.
//!
//! A row is validated by one pass of the fast scanner ([`crate::format::jsonscan`]) and
//! its turn values stay raw JSON text until a reader needs them, so a tool turn (most of
//! the bytes of a trajectory) is only unescaped when someone looks inside it. Why a
//! line cannot be read as a row at all is a [`BadRow`]; its text is the reason written
//! to rejects files.

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;

pub use crate::format::jsonscan::decode_str;
pub(crate) use crate::format::jsonscan::object_members;
use crate::format::jsonscan::{object_members_with, scan_json, scan_value_at, skip_ws};

/// The reason a tombstone of hermes-agent's batch runner (`{"prompt_index": N,
/// "discarded": "no_reasoning", "prompt": …}`) is dropped with, from the raw JSON text
/// of its `discarded`: `tombstone: discarded "no_reasoning"`.
pub fn tombstone_reason(discarded: &str) -> String {
    format!("tombstone: discarded {discarded}")
}

/// Whether the raw JSON text of a row's `discarded` marks the row a tombstone: a value
/// Python reads as true (the reference writes a reason string). `false`, `0`, `""`,
/// `{}`, `[]` and `null` mark nothing: such a row is a trajectory like any other.
pub fn marks_a_tombstone(discarded: &str) -> bool {
    let t = discarded.trim();
    let inner_blank = |open: char, close: char| {
        t.strip_prefix(open)
            .and_then(|r| r.strip_suffix(close))
            .is_some_and(|r| r.trim().is_empty())
    };
    !(matches!(t, "null" | "false" | "\"\"")
        || t.parse::<f64>().is_ok_and(|x| x == 0.0)
        || inner_blank('{', '}')
        || inner_blank('[', ']'))
}

/// The raw JSON text of `line`'s `discarded` when the line is a tombstone: a JSON
/// object whose `discarded` [marks one](marks_a_tombstone), whatever else it holds. It
/// stands for a prompt the run dropped and is no trajectory: traj-merge, traj-filter and
/// traj-normalize drop it ([`tombstone`]), traj-report and traj-run's resume count it.
/// `None` for any other line (a bad one too).
pub fn tombstone_mark(line: &[u8]) -> Option<&str> {
    // The key is read as JSON reads it: spelled with escapes, it holds a `\u00`.
    memchr::memmem::find(line, b"discarded").or_else(|| memchr::memmem::find(line, b"\\u00"))?;
    let text = std::str::from_utf8(line).ok()?;
    let mut found = None;
    object_members(line, 0, |key, vs, ve| {
        if &*crate::format::jsonscan::key_text(key) == b"discarded" {
            found = Some(&text[vs..ve]);
        }
    })
    .ok()?;
    found.filter(|d| marks_a_tombstone(d))
}

/// [`tombstone_reason`] of `line` when it is a tombstone ([`tombstone_mark`]).
pub fn tombstone(line: &[u8]) -> Option<String> {
    tombstone_mark(line).map(tombstone_reason)
}

/// The reason a row is dropped with when the raw text of its `discarded` (found by
/// whichever walk read the row) [marks it a tombstone](marks_a_tombstone).
fn tombstone_of(discarded: Option<&str>) -> Option<String> {
    discarded
        .filter(|d| marks_a_tombstone(d))
        .map(tombstone_reason)
}

/// [`validate_object`] and [`tombstone`] in one pass over the line's top-level members
/// (a hot path's check: no second scan of every line): `Ok(Some(reason))` for a
/// tombstone, `Ok(None)` for any other object. A line that is not a valid object is a
/// tombstone or not as [`tombstone`] says (that rule reads no further than the object's
/// end), else the error.
pub fn validate_object_or_tombstone(line: &[u8]) -> Result<Option<String>, BadRow> {
    let mut discarded = None;
    let valid = validate_object_members(line, |key, value| {
        if &*crate::format::jsonscan::key_text(key) == b"discarded" {
            discarded = Some(value);
        }
    });
    match valid {
        Ok(()) => Ok(tombstone_of(
            discarded.and_then(|d| std::str::from_utf8(d).ok()),
        )),
        Err(e) => tombstone(line).map(Some).ok_or(e),
    }
}

/// Why a line cannot be read as a row (bad input, not a drop). The `Display` text is
/// the reason written to the rejects file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadRow {
    /// Valid JSON, but not an object (`"an array"`, `"a string"`, ...).
    #[error("expected a JSON object, found {0}")]
    NotAnObject(&'static str),
    /// Not an object, and serde_json accepted it anyway (should not happen).
    #[error("expected a JSON object")]
    NotAnObjectAtAll,
    /// Not JSON: serde_json's message.
    #[error("invalid JSON: {0}")]
    Json(String),
    /// Not JSON where the fast scanner stopped (serde_json accepted it).
    #[error("invalid JSON near byte {0}")]
    JsonNear(usize),
    /// Not UTF-8 from this byte on.
    #[error("invalid JSON: invalid UTF-8 at byte {0}")]
    Utf8(usize),
    /// A field that holds the wrong kind of value.
    #[error("unexpected row shape: {0}")]
    Shape(String),
    #[error("row has neither `conversations` nor `messages`")]
    NoTurns,
    /// The `value` of this turn (1-based) is not a JSON string.
    #[error("turn {0}: `value` is not a string")]
    ValueNotString(usize),
    /// A message from the line engine (`crate::io::parse_object`), kept as it is.
    #[error("{0}")]
    Line(String),
}

/// A row as far as the predicates need it (values as raw, validated JSON text).
#[derive(Debug, Default)]
pub struct RowView<'a> {
    pub conversations: Option<Vec<Turn<'a>>>,
    pub messages: Option<Vec<Message<'a>>>,
    pub completed: Option<&'a str>,
    pub partial: Option<&'a str>,
    /// `stop_reason` of a traj-run record (raw JSON text).
    pub stop_reason: Option<&'a str>,
    /// Tool schemas stored on the row (raw records; some datasets store a JSON string).
    pub tools: Option<&'a str>,
    /// `reward` of a scored rollout (raw JSON text).
    pub reward: Option<&'a str>,
    /// `task_uid` of a traj-run record (raw JSON text): the rollout's task.
    pub task_uid: Option<&'a str>,
    /// `prompt_index` of a traj-run record (raw JSON text).
    pub prompt_index: Option<&'a str>,
    /// `discarded` of the row (raw JSON text): read in the same walk as the members
    /// above, for [`RowView::tombstone`].
    pub discarded: Option<&'a str>,
    /// The run fields above that a `--columns core` row of traj-normalize keeps inside
    /// its `metadata` string, read from there when the row has none of its own; the
    /// accessors ([`RowView::completed`], ...) read either.
    pub meta: Option<Box<MetaFields>>,
}

/// The object a `--columns core` row keeps in its `metadata` string (traj-normalize
/// writes every field beside the core columns there), read by the one JSON rule
/// ([`crate::io::parse_object`]). `None` when `metadata` is no string holding a JSON
/// object, a key written twice included: such a string is the row's own text, passed on
/// as it is, never unpacked with a value lost.
pub fn core_metadata(
    row: &serde_json::Map<String, serde_json::Value>,
) -> Option<serde_json::Map<String, serde_json::Value>> {
    match row.get("metadata") {
        Some(serde_json::Value::String(s)) if s.trim_start().starts_with('{') => {
            crate::io::parse_object(s.as_bytes()).ok()
        }
        _ => None,
    }
}

/// The run members of a `metadata` string, by name (raw JSON text each, owned; a key
/// written twice is refused before, by the scan of the row's own members).
#[derive(Debug, Default)]
pub struct MetaFields(Vec<(&'static str, String)>);

/// The members [`RowView`] reads of a row, and so of its `metadata`.
const RUN_MEMBERS: [&str; 6] = [
    "completed",
    "partial",
    "stop_reason",
    "reward",
    "task_uid",
    "prompt_index",
];

impl MetaFields {
    /// The run members of the JSON object text `meta` (`None` when it holds none, or is
    /// no object).
    fn of(meta: &str) -> Option<Box<MetaFields>> {
        let mut m = MetaFields::default();
        object_members(meta.as_bytes(), 0, |key, vs, ve| {
            let key = crate::format::jsonscan::key_text(key);
            if let Some(name) = RUN_MEMBERS.iter().find(|n| n.as_bytes() == &*key) {
                m.0.push((name, meta[vs..ve].to_string()));
            }
        })
        .ok()?;
        (!m.0.is_empty()).then(|| Box::new(m))
    }

    /// The raw text of the member `name`.
    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

macro_rules! run_field {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        pub fn $name(&self) -> Option<&str> {
            self.$name
                .or_else(|| self.meta.as_ref()?.get(stringify!($name)))
        }
    };
}

impl RowView<'_> {
    /// [`tombstone`] of the line this row was read from, from its own walk
    /// ([`parse_row`] reads `discarded` with the other members): the same verdict, without
    /// a second scan of the line.
    pub fn tombstone(&self) -> Option<String> {
        tombstone_of(self.discarded)
    }

    run_field!(
        /// `completed`, the row's own or its `metadata`'s.
        completed
    );
    run_field!(
        /// `partial`, the row's own or its `metadata`'s.
        partial
    );
    run_field!(
        /// `stop_reason`, the row's own or its `metadata`'s.
        stop_reason
    );
    run_field!(
        /// `reward`, the row's own or its `metadata`'s.
        reward
    );
    run_field!(
        /// `task_uid`, the row's own or its `metadata`'s.
        task_uid
    );
    run_field!(
        /// `prompt_index`, the row's own or its `metadata`'s.
        prompt_index
    );
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
    /// OpenRouter's list of `{type, text|summary, ...}` reasoning entries.
    #[serde(borrow, default)]
    pub reasoning_details: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub tool_calls: Option<Vec<CallEntry<'a>>>,
    #[serde(borrow, default)]
    pub tool_call_id: Option<Cow<'a, str>>,
    /// OpenAI's legacy single call (`{"name", "arguments"}`).
    #[serde(borrow, default)]
    pub function_call: Option<&'a RawValue>,
    /// The sampled tokens and their logprobs (`traj-run --logprobs`).
    #[serde(borrow, default)]
    pub logprobs: Option<&'a RawValue>,
}

/// An entry of an OpenAI `tool_calls` list.
#[derive(Debug, Deserialize)]
pub struct CallEntry<'a> {
    #[serde(borrow, default)]
    pub id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub function: Option<FunctionEntry<'a>>,
}

/// The `function` of an OpenAI tool call.
#[derive(Debug, Deserialize)]
pub struct FunctionEntry<'a> {
    #[serde(borrow, default)]
    pub name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub arguments: Option<&'a RawValue>,
}

/// The message of the one rule every stage reads a row by ([`crate::io::parse_object`])
/// for a line the fast scanner refused at byte `at` (only the error path pays for
/// serde_json), so that a bad line gets the same answer, column included, in every stage.
fn json_error(line: &[u8], at: usize) -> BadRow {
    match crate::io::parse_object(line) {
        Err(e) => BadRow::Line(e),
        // Valid JSON the scanner refused: a scanner bug.
        Ok(_) => BadRow::JsonNear(at),
    }
}

/// Check that `line` is one JSON object, without building it (the pass-through path).
pub fn validate_object(line: &[u8]) -> Result<(), BadRow> {
    first_is_brace(line)?;
    utf8(line)?;
    scan_json(line).map_err(|at| json_error(line, at))
}

/// [`validate_object`] that also shows `f` each top-level member as it goes: its key
/// (raw, as written, without quotes) and its value's text. One pass over the line, for a
/// caller that needs to know which members a row has without parsing it.
pub fn validate_object_members<'l>(
    line: &'l [u8],
    mut f: impl FnMut(&'l [u8], &'l [u8]),
) -> Result<(), BadRow> {
    first_is_brace(line)?;
    utf8(line)?;
    let end = crate::format::jsonscan::object_members(line, 0, |key, vs, ve| f(key, &line[vs..ve]))
        .map_err(|at| json_error(line, at))?;
    let end = crate::format::jsonscan::skip_ws(line, end);
    if end == line.len() {
        Ok(())
    } else {
        Err(json_error(line, end))
    }
}

/// `Ok` when the first non-blank byte opens an object; else what the line holds.
pub fn first_is_brace(line: &[u8]) -> Result<(), BadRow> {
    match line.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => Ok(()),
        Some(b'[') => Err(BadRow::NotAnObject("an array")),
        Some(b'"') => Err(BadRow::NotAnObject("a string")),
        Some(b) if b.is_ascii_digit() || *b == b'-' => Err(BadRow::NotAnObject("a number")),
        Some(b't' | b'f' | b'n') if serde_json::from_slice::<IgnoredAny>(line).is_ok() => {
            Err(BadRow::NotAnObject("a literal"))
        }
        // Text that is not UTF-8 is said first, as every stage says it.
        _ => Err(
            match utf8(line).map(|_| serde_json::from_slice::<IgnoredAny>(line)) {
                Err(e) => e,
                Ok(Err(e)) => BadRow::Json(crate::io::json::json_error_text(line, &e)),
                Ok(Ok(_)) => BadRow::NotAnObjectAtAll,
            },
        ),
    }
}

/// The line as text: UTF-8 checked with SIMD (`simdutf8`; std's check runs at a few
/// hundred MB/s on non-ASCII text), std only for the error's position.
pub fn utf8(line: &[u8]) -> Result<&str, BadRow> {
    simdutf8::basic::from_utf8(line).map_err(|_| {
        let at = std::str::from_utf8(line)
            .err()
            .map_or(0, |e| e.valid_up_to());
        BadRow::Utf8(at)
    })
}

/// Parse a line into a [`RowView`], validating all of it.
///
/// One pass of the fast scanner over the line; only `messages` (raw records) goes
/// through serde_json.
pub fn parse_row(line: &[u8]) -> Result<RowView<'_>, BadRow> {
    first_is_brace(line)?;
    let text = utf8(line)?;
    let b = line;
    let mut row = RowView::default();
    let mut shape: Option<String> = None;
    let mut metadata = None;
    let end = object_members_with(b, 0, |key, vs| {
        let key = &*crate::format::jsonscan::key_text(key);
        // A list member that is `null` is absent: what `datasets` writes for the rows
        // of a mixed-shape dataset that lack it.
        if matches!(key, b"conversations" | b"messages") && b[vs..].starts_with(b"null") {
            return scan_value_at(b, vs, 1);
        }
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
                    let ve = scan_value_at(b, vs, 1)?;
                    shape = Some(e.0);
                    Ok(ve)
                }
            };
        }
        let ve = scan_value_at(b, vs, 1)?;
        let raw = &text[vs..ve];
        match key {
            b"messages" => match serde_json::from_str::<Vec<Message>>(raw) {
                Ok(m) => row.messages = Some(m),
                Err(e) => shape = Some(format!("`messages`: {e}")),
            },
            b"completed" => row.completed = Some(raw),
            b"partial" => row.partial = Some(raw),
            b"stop_reason" => row.stop_reason = Some(raw),
            b"tools" => row.tools = Some(raw),
            b"reward" => row.reward = Some(raw),
            b"task_uid" => row.task_uid = Some(raw),
            b"prompt_index" => row.prompt_index = Some(raw),
            b"discarded" => row.discarded = Some(raw),
            b"metadata" => metadata = Some(raw),
            _ => {}
        }
        Ok(ve)
    })
    .map_err(|at| json_error(line, at))?;
    if let Some(meta) = metadata.and_then(crate::format::jsonscan::decode_str) {
        row.meta = MetaFields::of(&meta);
    }
    if skip_ws(b, end) != b.len() {
        return Err(json_error(line, end));
    }
    if let Some(e) = shape {
        return Err(BadRow::Shape(e));
    }
    if row.conversations.is_none() && row.messages.is_none() {
        return Err(BadRow::NoTurns);
    }
    Ok(row)
}

/// Why a `conversations` value is not a list of turn objects (or not valid JSON).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TurnsError(pub String);

/// The turns of the `conversations` value at `b[i..]`, validated as JSON, and the offset
/// after the list. `Err`: not a list of turn objects, or not valid JSON (the caller
/// tells which).
pub fn conversation_turns<'a>(
    b: &[u8],
    text: &'a str,
    i: usize,
) -> Result<(Vec<Turn<'a>>, usize), TurnsError> {
    let err = |s: String| TurnsError(s);
    let mut turns = Vec::new();
    let mut i = skip_ws(b, i);
    if b.get(i) != Some(&b'[') {
        return Err(err("`conversations` is not a list".into()));
    }
    i = skip_ws(b, i + 1);
    if b.get(i) == Some(&b']') {
        return Ok((turns, i + 1));
    }
    loop {
        let n = turns.len() + 1;
        let (mut from, mut value) = (None, None);
        let end = object_members(
            b,
            i,
            |key, vs, ve| match &*crate::format::jsonscan::key_text(key) {
                b"from" => from = Some(&text[vs..ve]),
                b"value" => value = Some(&text[vs..ve]),
                _ => {}
            },
        )
        .map_err(|_| err(format!("`conversations` entry {n} is not an object")))?;
        let from = from
            .and_then(decode_str)
            .ok_or_else(|| err(format!("`conversations` entry {n} has no string `from`")))?;
        let value =
            value.ok_or_else(|| err(format!("`conversations` entry {n} has no `value`")))?;
        turns.push(Turn { from, value });
        i = skip_ws(b, end);
        match b.get(i) {
            Some(b',') => i = skip_ws(b, i + 1),
            Some(b']') => return Ok((turns, i + 1)),
            _ => return Err(err("`conversations` is not valid JSON".into())),
        }
    }
}

/// Decode a raw JSON string value (borrowed when it holds no escapes).
pub fn raw_str(raw: &RawValue) -> Option<Cow<'_, str>> {
    decode_str(raw.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tombstone_is_marked_by_a_value_python_reads_as_true() {
        for yes in ["\"no_reasoning\"", "true", "1", "{\"why\": 1}", "[0]"] {
            assert!(marks_a_tombstone(yes), "{yes}");
        }
        for no in [
            "null", "false", "0", "0.0", "-0", "\"\"", "{}", "{ }", "[]", "[ ]",
        ] {
            assert!(!marks_a_tombstone(no), "{no}");
        }
        let row = br#"{"prompt_index": 1, "discarded": false, "conversations": []}"#;
        assert_eq!(tombstone(row), None, "a trajectory like any other");
        let tomb = br#"{"prompt_index": 1, "discarded": "no_reasoning", "prompt": "p"}"#;
        assert_eq!(
            tombstone(tomb).as_deref(),
            Some("tombstone: discarded \"no_reasoning\"")
        );
    }

    /// The pair "tombstone": `tombstone` (the rule, its own reading of a line) and the
    /// hot paths' readings folded into a walk they make anyway
    /// (`validate_object_or_tombstone`, `RowView::tombstone` of `parse_row`) give the same
    /// verdict on every line: the fixtures and the spellings a tombstone may take.
    #[test]
    fn the_folded_tombstone_readings_agree_with_the_rule() {
        let mut lines: Vec<Vec<u8>> = crate::fixtures::jsonl_files()
            .iter()
            .flat_map(|f| {
                std::fs::read(f)
                    .unwrap()
                    .split(|&b| b == b'\n')
                    .map(<[u8]>::to_vec)
                    .collect::<Vec<_>>()
            })
            .collect();
        let turns = r#""conversations": [{"from": "human", "value": "discarded?"}]"#;
        for d in [
            "\"no_reasoning\"",
            "true",
            "1",
            "[0]",
            "{\"a\": 1}",
            "false",
            "0",
            "\"\"",
            "{}",
            "null",
        ] {
            for row in [
                format!(r#"{{"prompt_index": 3, "discarded": {d}, "prompt": "p"}}"#),
                format!(r#"{{"discarded": {d}, {turns}}}"#),
                format!(r#"{{{turns}, "discarded": {d}}}"#),
                format!(r#"{{"discar\u0064ed": {d}, {turns}}}"#),
                format!(r#"{{"discarded": {d}, "x": "\u00e9", {turns}}}"#),
                format!(r#"{{"meta": {{"discarded": {d}}}, {turns}}}"#),
                format!(r#"{{"discarded": {d}, {turns}}} trailing"#),
                format!(r#"{{"discarded": {d}, "conversations": 7}}"#),
                format!(r#"{{"discarded": {d}, "discarded": false, {turns}}}"#),
                format!(r#"{{"discarded": {d}, {turns}"#),
                format!("\u{feff}{{\"discarded\": {d}}}"),
            ] {
                lines.push(row.into_bytes());
            }
        }
        let mut tombstones = 0;
        for line in &lines {
            let rule = tombstone(line);
            tombstones += usize::from(rule.is_some());
            let at = String::from_utf8_lossy(line);
            let folded = validate_object_or_tombstone(line);
            match &rule {
                Some(why) => assert_eq!(folded.as_ref().ok(), Some(&Some(why.clone())), "{at}"),
                None => assert_eq!(
                    folded.map_err(|e| e.to_string()),
                    validate_object(line)
                        .map(|()| None)
                        .map_err(|e| e.to_string()),
                    "{at}"
                ),
            }
            if let Ok(row) = parse_row(line) {
                assert_eq!(row.tombstone(), rule, "{at}");
            }
        }
        assert!(tombstones >= 30, "{tombstones} tombstones read");
    }

    #[test]
    fn validate_object_messages() {
        assert!(validate_object(b"{\"a\":1}").is_ok());
        assert_eq!(
            validate_object(b"[1]").unwrap_err().to_string(),
            "expected a JSON object, found an array"
        );
        assert!(
            validate_object(b"{\"a\":")
                .unwrap_err()
                .to_string()
                .starts_with("invalid JSON")
        );
        assert_eq!(
            validate_object(b"{\"a\":\"\xff\"}").unwrap_err(),
            BadRow::Utf8(6)
        );
    }

    /// The member walk accepts and refuses what [`validate_object`] does, in the same
    /// words, and shows each top-level member once.
    #[test]
    fn validate_object_members_agrees_with_validate_object() {
        let mut lines: Vec<Vec<u8>> = [
            &b"{}"[..],
            b" {\"a\": 1} ",
            b"{\"a\": 1}x",
            b"{\"a\": 1, \"a\": 2}",
            b"{\"a\": {\"b\": 1, \"b\": 2}}",
            b"{\"a\": [1, 2,]}",
            b"{\"a\":",
            b"[1]",
            b"\"s\"",
            b"{\"a\":\"\xff\"}",
            b"{\"a\": tru}",
        ]
        .iter()
        .map(|l| l.to_vec())
        .collect();
        lines.push(format!("{{\"a\": {}{}}}", "[".repeat(130), "]".repeat(130)).into_bytes());
        for entry in
            std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures")).unwrap()
        {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "jsonl") {
                lines.extend(
                    std::fs::read(&path)
                        .unwrap()
                        .split(|&b| b == b'\n')
                        .map(<[u8]>::to_vec),
                );
            }
        }
        for line in &lines {
            let mut keys = Vec::new();
            let walked = validate_object_members(line, |k, v| keys.push((k.to_vec(), v.to_vec())));
            let text = String::from_utf8_lossy(line);
            assert_eq!(
                walked.as_ref().map_err(ToString::to_string),
                validate_object(line).as_ref().map_err(ToString::to_string),
                "{text}"
            );
            if walked.is_ok() {
                let obj = crate::io::parse_object(line).unwrap();
                assert_eq!(keys.len(), obj.len(), "{text}");
                for (k, v) in keys {
                    let k = String::from_utf8(k).unwrap();
                    let v: serde_json::Value = serde_json::from_slice(&v).unwrap();
                    assert_eq!(obj.get(&k), Some(&v), "{text}");
                }
            }
        }
    }

    #[test]
    fn row_shapes() {
        assert_eq!(parse_row(b"{\"a\": 1}").unwrap_err(), BadRow::NoTurns);
        assert_eq!(
            parse_row(b"{\"conversations\": 3}")
                .unwrap_err()
                .to_string(),
            "unexpected row shape: `conversations` is not a list"
        );
        let r = parse_row(
            b"{\"conversations\": [{\"from\": \"human\", \"value\": \"q\\n\"}], \"completed\": true}",
        )
        .unwrap();
        let t = &r.conversations.unwrap()[0];
        assert_eq!((&*t.from, t.value), ("human", "\"q\\n\""));
        assert_eq!(r.completed, Some("true"));
        assert!(matches!(
            parse_row(b"{\"messages\": [{\"role\": 1}]}").unwrap_err(),
            BadRow::Shape(_)
        ));
        // `null` is absent (HF `datasets` writes it for a mixed-shape dataset's rows).
        let r = parse_row(b"{\"conversations\": null, \"messages\": []}").unwrap();
        assert!(r.conversations.is_none() && r.messages.is_some());
        let r = parse_row(b"{\"conversations\": [], \"messages\": null}").unwrap();
        assert!(r.conversations.is_some() && r.messages.is_none());
        assert_eq!(
            parse_row(b"{\"conversations\": null, \"messages\": null}").unwrap_err(),
            BadRow::NoTurns
        );
        assert!(parse_row(b"{\"conversations\": nul}").is_err());
    }

    #[test]
    fn turns_of_a_bare_list() {
        let s = "[{\"from\": \"gpt\", \"value\": 1}, {\"value\": 2}]";
        let e = conversation_turns(s.as_bytes(), s, 0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "`conversations` entry 2 has no string `from`"
        );
    }
}

//! The quick path for the commonest row: a Hermes ShareGPT row (`conversations` of
//! `{"from", "value"}` strings) in Python's spelling, converted to Hermes rows.
//!
//! The row is read borrowed and typed, straight from the line: no `serde_json::Value`
//! for the message list, each string scanned once. Texts the writer would write back
//! unchanged are kept as they are spelled ([`super::AsIs`]): a `human` text already in
//! the output's spelling (never decoded), a gpt text that renders back to itself, the
//! parameters of the system prompt's tools ([`hermes::parse_system_quick`]) and the
//! content of tool responses ([`hermes::parse_tool_quick`]; the result's `content` then
//! holds a stand-in judged as the text was, for `tool_stats`). Every other text is read
//! by the same functions as the general path ([`super::read`]), in the same order, so
//! the output, the verdict and its reason, and the repairs counted are the general
//! path's.
//!
//! Anything else ([`quick`] says [`Quick::No`]) takes the general path: another target or
//! column set, `--set`, `--merge-consecutive`, `--messages-field`; a row with a
//! `messages` or `tools` field; a message with another key or a value that is not a
//! string; a role spelled with an escape or in LLaMA-Factory's spelling
//! (`function_call`, `observation`); a field not in Python's spelling; any JSON the quick
//! reader does not know to be valid.

use std::borrow::Cow;
use std::ops::Range;

use serde_json::Value;

use super::error::{BadMessage, BadRow};
use super::keep::{self, Parts, SystemRule, Tally};
use super::pair::{Pending, push_results};
use super::{AsIs, Columns, Members, Options, Target, close_row, write_error_counts, write_stats};
use crate::format::hermes::{self, QuickContent};
use crate::format::jsonscan;
use crate::format::model::{Outcome, ToolResult, Trajectory, Turn, tool_content_value_owned};
use crate::format::pyjson;
use crate::format::repair::{self, Mode, Repairs};
use crate::format::stats::tool_stats;

/// How the quick path reads a row, and what it counts (as [`super::read::ReadCtx`]).
struct Ctx {
    mode: Mode,
    rule: SystemRule,
    run: bool,
    repairs: Repairs,
    parts: Parts,
}

/// One message of the list, borrowed from the line.
struct Message<'a> {
    /// The role (`from`), which holds no escape.
    from: &'a str,
    /// The `value` string as written, quotes included.
    value: &'a str,
    /// `value` is in the spelling the output writes.
    as_is: bool,
}

impl<'a> Message<'a> {
    /// The text of `value`; `None` only if the validated string does not decode.
    fn text(&self) -> Option<Cow<'a, str>> {
        jsonscan::decode_str(self.value)
    }
}

/// A top-level field of the row.
enum Field<'a> {
    /// Written as it is.
    Kept(&'a str),
    /// The message list.
    List,
    /// `tool_stats`, with the tool names it holds (its keys, when it is an object).
    Stats(Vec<String>),
    /// `tool_error_counts`.
    Errors,
}

/// The row: its fields in order (keys as written, without quotes) and its messages.
struct Row<'a> {
    fields: Vec<(&'a str, Field<'a>)>,
    messages: Vec<Message<'a>>,
}

/// What the quick path made of a line.
pub(super) enum Quick {
    /// Not a row for the quick path: nothing was written or counted.
    No,
    /// Converted (the line is appended to `out`), or refused for this reason.
    Done(Result<(), BadRow>),
}

/// Convert `line` by the quick path when it applies (see the module docs), adding the
/// repairs made to `done` when the row is written.
pub(super) fn quick(line: &[u8], opts: &Options, out: &mut Vec<u8>, done: &mut Tally) -> Quick {
    if opts.target != Target::Hermes
        || opts.columns != Columns::All
        || opts.merge_consecutive
        || opts.messages_field.is_some()
        || !opts.set_fields.is_empty()
    {
        return Quick::No;
    }
    let Ok(text) = simdutf8::basic::from_utf8(line) else {
        return Quick::No;
    };
    let Some(row) = read_row(text) else {
        return Quick::No;
    };
    let mode = if opts.no_repair {
        Mode::Refuse
    } else {
        Mode::Repair
    };
    let mut made = Ctx {
        mode,
        rule: opts.system_rule,
        run: keep::is_run_record(row.fields.iter().map(|(k, _)| *k)),
        repairs: Repairs::default(),
        parts: Parts::default(),
    };
    let read = match read_messages(&row.messages, &mut made) {
        Some(Ok(t)) => t,
        Some(Err(e)) => return Quick::Done(Err(e)),
        None => return Quick::No,
    };
    let traj = &read.traj;
    // Bridge calls to resolve: the general path's (one hook, `super::bridged`).
    if opts.bridge == super::Bridge::Resolve && super::bridged::resolvable(traj) {
        return Quick::No;
    }
    let mut known: Vec<&str> = opts.known_tools.iter().map(String::as_str).collect();
    for (_, f) in &row.fields {
        if let Field::Stats(names) = f {
            known.extend(names.iter().map(String::as_str));
        }
    }
    let stats = tool_stats(traj, known);
    let start = out.len();
    out.push(b'{');
    let mut sep = Members::default();
    let (mut stats_done, mut errors_done) = (false, false);
    for (k, f) in &row.fields {
        sep.next(out);
        match f {
            Field::List => {
                out.extend_from_slice(b"\"conversations\": ");
                if let Err(e) = super::hermes_conversations_with(traj, &read.as_is(), true, out) {
                    out.truncate(start);
                    return Quick::Done(Err(e));
                }
            }
            Field::Stats(_) => {
                write_stats(out, &stats);
                stats_done = true;
            }
            Field::Errors => {
                write_error_counts(out, &stats);
                errors_done = true;
            }
            Field::Kept(v) => {
                out.push(b'"');
                out.extend_from_slice(k.as_bytes());
                out.extend_from_slice(b"\": ");
                out.extend_from_slice(v.as_bytes());
            }
        }
    }
    close_row(out, &mut sep, stats_done, errors_done, &stats);
    done.merge(&Tally {
        repairs: made.repairs,
        parts: made.parts,
        groups: (0, 0),
    });
    Quick::Done(Ok(()))
}

/// serde_json's private key for a number kept as text: a row with it as a top-level key,
/// or anywhere in the fields parsed here, is left to the general path.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// Read the row's top level, `{"k": v, ...}` in Python's spelling exactly; `None` when
/// the row is not one for the quick path.
fn read_row(text: &str) -> Option<Row<'_>> {
    let b = text.as_bytes();
    if b.first() != Some(&b'{') {
        return None;
    }
    let mut row = Row {
        fields: Vec::new(),
        messages: Vec::new(),
    };
    let mut list = false;
    let mut i = 1;
    loop {
        let end = pyjson::as_is_string_end(b, i)?;
        let key = &text[i + 1..end - 1];
        if key.contains('\\') || key == NUMBER_TOKEN || row.fields.iter().any(|(k, _)| *k == key) {
            return None;
        }
        i = end;
        if !text[i..].starts_with(": ") {
            return None;
        }
        i += 2;
        let field = match key {
            "conversations" => {
                i = read_list(text, i, &mut row.messages)?;
                list = true;
                Field::List
            }
            // `discarded` too: whether the row is a tombstone is the general path's
            // question (`format::row::tombstone`), asked of every line this leaves.
            "messages"
            | "tools"
            | "discarded"
            | crate::format::bridge::FIELD
            | keep::MESSAGE_KEYS
            | keep::SYSTEM_COLUMN => {
                return None;
            }
            _ => {
                let n = pyjson::as_is_prefix(&text[i..], 126)?;
                let v = &text[i..i + n];
                i += n;
                match key {
                    // A core row's stats (a JSON string) and kept keys (in its metadata)
                    // are read by the general path.
                    "tool_stats" if v.contains(NUMBER_TOKEN) || v.starts_with('"') => {
                        return None;
                    }
                    "metadata" if v.contains(keep::MESSAGE_KEYS) => return None,
                    "tool_stats" => Field::Stats(match serde_json::from_str(v).ok()? {
                        serde_json::Value::Object(m) => m.into_iter().map(|(k, _)| k).collect(),
                        _ => Vec::new(),
                    }),
                    "tool_error_counts" => Field::Errors,
                    _ => Field::Kept(v),
                }
            }
        };
        row.fields.push((key, field));
        match &text[i..] {
            "}" => return list.then_some(row),
            more if more.starts_with(", ") => i += 2,
            _ => return None,
        }
    }
}

/// Read the message list at `text[i..]` (its `[`) into `messages`: a non-empty list of
/// `{"from": S, "value": S}` (either order); returns the offset after the list.
fn read_list<'a>(text: &'a str, mut i: usize, messages: &mut Vec<Message<'a>>) -> Option<usize> {
    let b = text.as_bytes();
    if b.get(i) != Some(&b'[') || b.get(i + 1) != Some(&b'{') {
        return None;
    }
    i += 1;
    loop {
        // one message: `{` then two members
        i += 1;
        let (mut from, mut value) = (None, None);
        for n in 0..2 {
            let key_end = pyjson::as_is_string_end(b, i)?;
            let key = &text[i + 1..key_end - 1];
            i = key_end;
            if !text[i..].starts_with(": ") {
                return None;
            }
            i += 2;
            match key {
                "from" if from.is_none() => {
                    let end = pyjson::as_is_string_end(b, i)?;
                    let role = &text[i + 1..end - 1];
                    if role.contains('\\') || matches!(role, "function_call" | "observation") {
                        return None;
                    }
                    from = Some(role);
                    i = end;
                }
                "value" if value.is_none() => {
                    if b.get(i) != Some(&b'"') {
                        return None;
                    }
                    let (end, as_is) = jsonscan::scan_string_spelling(b, i + 1).ok()?;
                    value = Some((&text[i..end], as_is));
                    i = end;
                }
                _ => return None,
            }
            let next: &[u8] = if n == 0 { b", " } else { b"}" };
            if !b[i..].starts_with(next) {
                return None;
            }
            i += next.len();
        }
        let (from, (value, as_is)) = (from?, value?);
        messages.push(Message { from, value, as_is });
        match b.get(i..i + 3) {
            Some(b", {") => i += 2,
            _ if b.get(i) == Some(&b']') => return Some(i + 1),
            _ => return None,
        }
    }
}

/// A row's messages, read.
struct Read<'a> {
    traj: Trajectory,
    /// For each turn, the text to write for its value as it is, if any.
    kept: Vec<Option<&'a str>>,
    /// The system text the tools were read from by [`hermes::parse_system_quick`], and
    /// where the kept parameters of each tool are in it.
    system: Option<(Cow<'a, str>, Spans)>,
    /// The tool texts read by [`hermes::parse_tool_quick`].
    tool_texts: Vec<Cow<'a, str>>,
    /// For each tool turn, for each result, where its kept content is: which of
    /// `tool_texts`, and where in it.
    contents: Vec<Vec<Option<Kept>>>,
}

/// Where a kept content is: which of the tool texts, and where in it.
type Kept = (usize, Range<usize>);

impl<'a> Read<'a> {
    /// The texts to write as they are.
    fn as_is(&self) -> AsIs<'_> {
        let parameters = match &self.system {
            Some((text, spans)) => spans.iter().map(|s| s.clone().map(|s| &text[s])).collect(),
            None => Vec::new(),
        };
        let contents = self
            .contents
            .iter()
            .map(|rs| {
                rs.iter()
                    .map(|c| c.clone().map(|(t, s)| &self.tool_texts[t][s]))
                    .collect()
            })
            .collect();
        AsIs {
            values: self.kept.clone(),
            parameters,
            contents,
        }
    }
}

/// The content a result kept as text holds in the trajectory: a value
/// [`crate::format::model::classify_result`] judges as the text was judged (only
/// `tool_stats` reads it; the writer writes the text).
fn stand_in(o: Outcome) -> Value {
    match o {
        Outcome::Success => Value::Null,
        Outcome::Failure => Value::String(String::new()),
    }
}

/// Where each tool's kept parameters are in the system text.
type Spans = Vec<Option<Range<usize>>>;

/// The trajectory of `messages`, as [`super::read::read_messages`] reads a ShareGPT list
/// that is not in LLaMA-Factory's spelling, and for each turn the text to write for its
/// value as it is, when that is what the writer would write: a human text in Python's
/// spelling (the turn then holds an empty string), a gpt text that renders back to
/// itself unrepaired. `None` when a text does not
/// decode (the general path then gives the verdict).
fn read_messages<'a>(messages: &[Message<'a>], ctx: &mut Ctx) -> Option<Result<Read<'a>, BadRow>> {
    let mode = ctx.mode;
    let mut own_system: Option<String> = None;
    let mut turns: Vec<Turn> = Vec::with_capacity(messages.len());
    let mut kept: Vec<Option<&'a str>> = Vec::with_capacity(messages.len());
    let mut system_tools = None;
    let mut system = None;
    let mut tool_texts = Vec::new();
    let mut contents: Vec<Vec<Option<Kept>>> = Vec::new();
    let mut pending: Option<Pending> = None;
    for (i, m) in messages.iter().enumerate() {
        let at = |e: BadMessage| BadRow::Message(i + 1, e);
        macro_rules! tri {
            ($e:expr) => {
                match $e {
                    Ok(v) => v,
                    Err(e) => return Some(Err(at(e.into()))),
                }
            };
        }
        match m.from {
            "system" | "developer" => {
                pending = None;
                let text = m.text()?;
                let mut quick = None;
                let lists_tools = if system_tools.is_none() {
                    match hermes::parse_system_quick(&text) {
                        Some(None) => false,
                        Some(Some(tools)) => {
                            quick = Some(tools);
                            true
                        }
                        None => match hermes::parse_system_counted(&text) {
                            Some(t) => {
                                let t = tri!(t);
                                ctx.parts.add_n(keep::Part::ToolSchemaKey, t.dropped_keys);
                                system_tools = Some(t.value);
                                true
                            }
                            None => false,
                        },
                    }
                } else {
                    hermes::parse_system(&text).is_some()
                };
                let (own, run) = match keep::read_system(&text, lists_tools) {
                    keep::SystemText::ToolPrompt { own } => {
                        if own.is_none() && keep::other_tool_prompt(&text) {
                            ctx.parts.add(keep::Part::OtherToolPrompt);
                        }
                        (own, false)
                    }
                    // After the first turn: the general path keeps it whole.
                    keep::SystemText::Own(_) if !turns.is_empty() => return None,
                    keep::SystemText::Own(t) => (Some(Cow::Borrowed(t)), ctx.run),
                };
                if let Some(own) = own.filter(|t| !t.is_empty()) {
                    match ctx.rule.verdict(run) {
                        Some(part) => ctx.parts.add(part),
                        None => keep::add_system(&mut own_system, &own),
                    }
                }
                if let Some(tools) = quick {
                    let dropped = tools.iter().map(|t| t.dropped_keys).sum();
                    ctx.parts.add_n(keep::Part::ToolSchemaKey, dropped);
                    let (specs, spans) = tools.into_iter().map(|t| (t.spec, t.parameters)).unzip();
                    system_tools = Some(specs);
                    system = Some((text, spans));
                }
            }
            "exit" => return None,
            "user" | "human" => {
                pending = None;
                if m.as_is {
                    keep(&mut kept, turns.len(), m);
                    turns.push(Turn::Human(String::new()));
                } else {
                    turns.push(Turn::Human(m.text()?.into_owned()));
                }
            }
            "assistant" | "gpt" => {
                let text = m.text()?;
                // A scratchpad is a `<think>` block, read as one (as the general path).
                let text = hermes::convert_scratchpad(&text);
                let repaired = tri!(repair::repair_gpt(&text, false, mode, &mut ctx.repairs));
                let (g, round_trip) = tri!(hermes::parse_gpt_checked(&repaired));
                ctx.parts.add_n(keep::Part::ToolCallKey, g.dropped_keys);
                let g = g.value;
                // Written back as it is: the writer would render this same text, find
                // its tags sound and escape it as it is spelled.
                if round_trip
                    && m.as_is
                    && matches!(repaired, Cow::Borrowed(_))
                    && hermes::scan_gpt(&repaired).error.is_none()
                {
                    keep(&mut kept, turns.len(), m);
                }
                pending = Pending::new(&g.tool_calls);
                turns.push(Turn::Gpt(g));
            }
            "tool" | "function" | "function_response" | "tool_response" | "ipython" => {
                // No assistant-with-calls right before: the general path keeps it whole.
                let p = pending.as_mut()?;
                let text = m.text()?;
                let mut spans = Vec::new();
                let results = if m.from != "tool" {
                    vec![ToolResult {
                        tool_call_id: String::new(),
                        name: String::new(),
                        content: tool_content_value_owned(text.into_owned()),
                    }]
                } else if let Some(quick) = hermes::parse_tool_quick(&text) {
                    let at = tool_texts.len();
                    let results = quick
                        .into_iter()
                        .map(|r| {
                            ctx.parts.add_n(keep::Part::ToolResultKey, r.dropped_keys);
                            let (content, span) = match r.content {
                                QuickContent::Value(v) => (v, None),
                                QuickContent::Text(s, o) => (stand_in(o), Some((at, s))),
                            };
                            spans.push(span);
                            ToolResult {
                                tool_call_id: r.tool_call_id,
                                name: r.name,
                                content,
                            }
                        })
                        .collect();
                    tool_texts.push(text);
                    results
                } else {
                    let read = tri!(hermes::parse_tool_counted(&text));
                    ctx.parts
                        .add_n(keep::Part::ToolResultKey, read.dropped_keys);
                    read.value
                };
                let n = results.len();
                push_results(&mut turns, results, p, false, &mut ctx.parts);
                // The results went to the end of the last turn's group.
                if let Some(Turn::Tool(group)) = turns.last() {
                    contents.resize(turns.len(), Vec::new());
                    let c = &mut contents[turns.len() - 1];
                    c.resize(group.len() - n, None);
                    c.extend(spans);
                    c.resize(group.len(), None);
                }
            }
            other => {
                return Some(Err(at(BadMessage::UnknownRole(other.to_string()))));
            }
        }
    }
    if turns.is_empty() {
        return Some(Err(BadRow::NoTurns));
    }
    // Results that go in the order of their calls move with their texts: the general
    // path's work ([`super::order`]).
    for w in turns.windows(2) {
        if let [Turn::Gpt(g), Turn::Tool(rs)] = w
            && super::order::call_order(g, rs).is_some()
        {
            return None;
        }
    }
    Some(Ok(Read {
        traj: Trajectory {
            tools: system_tools.unwrap_or_default(),
            system: own_system,
            turns,
            kept: Vec::new(),
        },
        kept,
        system,
        tool_texts,
        contents,
    }))
}

/// Record that turn `n` is written as `m`'s value as it is.
fn keep<'a>(kept: &mut Vec<Option<&'a str>>, n: usize, m: &Message<'a>) {
    kept.resize(n, None);
    kept.push(Some(&m.value[1..m.value.len() - 1]));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The general path: the row read whole.
    fn general(line: &[u8], opts: &Options) -> (Vec<u8>, Result<(), String>, Tally) {
        let mut out = Vec::new();
        let mut made = Tally::default();
        let r = match crate::io::parse_object(line) {
            Ok(row) => super::super::normalize_row_counted(row, opts, &mut out, &mut made)
                .map_err(|e| e.to_string()),
            Err(e) => Err(e),
        };
        (out, r, made)
    }

    /// Every line of the Hermes fixtures and of the real-rows unit, as written and
    /// changed in the ways the quick reader tells apart (roles, key order, spellings of
    /// escapes, extra keys, fields around the list, broken JSON): wherever the quick path
    /// takes a line, its bytes, verdict and repairs are the general path's.
    #[test]
    fn the_quick_path_is_the_general_path() {
        let lines = crate::fixtures::lines(&crate::fixtures::HERMES);
        let edits: &[(&str, &str)] = &[
            ("\"from\": \"human\"", "\"from\": \"user\""),
            ("\"from\": \"human\"", "\"from\": \"ipython\""),
            ("\"from\": \"human\"", "\"from\": \"bogus\""),
            ("\"from\": \"human\"", "\"from\": \"observation\""),
            ("\"from\": \"system\"", "\"from\": \"developer\""),
            ("\"from\": \"gpt\"", "\"from\": \"assistant\""),
            ("\"from\": \"tool\"", "\"from\": \"function\""),
            ("\"from\": \"tool\"", "\"from\": \"human\""),
            ("\"from\": \"gpt\"", "\"from\": \"g\\u0070t\""),
            ("{\"from\": \"human\", \"value\": ", "{\"value\": "),
            (
                "\"from\": \"human\", ",
                "\"from\": \"human\", \"from\": \"human\", ",
            ),
            (
                "\"from\": \"human\", ",
                "\"weight\": 1, \"from\": \"human\", ",
            ),
            ("e", "\\u0065"),
            ("/", "\\/"),
            ("\\n", "\\u000a"),
            ("\\n", "\\u000b"),
            ("\\n", "\n"),
            ("\\n", "\\q"),
            ("a", "\\ud83d\\ude00"),
            ("a", "\\ud83d"),
            ("</think>", ""),
            ("<think>", ""),
            ("<tool_call>\\n{", "<tool_call>\\n{{"),
            // Keys the calls, results and tools do not carry.
            ("{\\\"name\\\": ", "{\\\"id\\\": 1, \\\"name\\\": "),
            (
                "\\\"content\\\": ",
                "\\\"is_error\\\": false, \\\"content\\\": ",
            ),
            ("\\\"required\\\": null", "\\\"strict\\\": true"),
            ("\"}]", "\"}], \"tool_stats\": {\"x\": {\"count\": 1}}"),
            ("\"}]", "\"}], \"tool_error_counts\": {}, \"n\": 1.5e3"),
            ("\"}]", "\"}], \"tools\": []"),
            ("\"}]", "\"}], \"messages\": []"),
            ("\"}]", "\"}], \"conversations\": []"),
            ("\"}]", "\"}, {\"from\": \"human\", \"value\": null}]"),
            (
                "\"}]",
                "\"}, {\"from\": \"human\", \"value\": \"x\\u0001\"}]",
            ),
            (
                "{\"conversations\": [",
                "{\"k\": [1, {\"a\": null}], \"conversations\": [",
            ),
            ("{\"conversations\": [", "{\"conversations\":["),
            ("{\"conversations\": [", "{\"conversations\": []"),
        ];
        let opts = Options::default();
        let sets = [
            opts.clone(),
            Options {
                no_repair: true,
                known_tools: vec!["zz".into()],
                ..opts
            },
        ];
        let (mut tried, mut quick_rows, mut refused, mut counted) = (0, 0, 0, 0);
        for line in &lines {
            let mut variants = crate::fixtures::edited(line, edits);
            variants.insert(1, format!("{line} "));
            for v in &variants {
                for o in &sets {
                    tried += 1;
                    let mut out = b"before".to_vec();
                    let mut made = Tally::default();
                    let Quick::Done(r) = quick(v.as_bytes(), o, &mut out, &mut made) else {
                        assert_eq!(out, b"before");
                        assert_eq!(made.repairs.total(), 0);
                        continue;
                    };
                    quick_rows += 1;
                    let (want_out, want, want_made) = general(v.as_bytes(), o);
                    let r = r.map_err(|e| e.to_string());
                    refused += usize::from(r.is_err());
                    assert_eq!(r, want, "{v}");
                    let mut want_all = b"before".to_vec();
                    want_all.extend_from_slice(&want_out);
                    assert!(out == want_all, "{v}");
                    assert_eq!(made.repairs.total(), want_made.repairs.total(), "{v}");
                    if r.is_ok() {
                        assert_eq!(made.parts, want_made.parts, "{v}");
                        counted += usize::from(made.parts.total(true) > 0);
                    }
                }
            }
        }
        assert!(
            quick_rows > tried / 3 && refused > 20 && counted > 20,
            "{quick_rows} of {tried} by the quick path, {refused} refused, \
             {counted} with parts dropped"
        );
    }
}

//! How a normalized row is written: the message list in each target's shape (Hermes
//! turns, OpenAI messages), the tools, the `tool_stats` and `tool_error_counts` members,
//! the core row of [`Columns::Core`], and the texts a quick reading keeps as they are
//! ([`AsIs`]). The row layout is in the parent module's docs.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{Arguments, BadRow, Columns, Options, Target, ToolsAs, keep, shape};
use crate::format::message::in_openai_spelling;
use crate::format::model::{Trajectory, Turn};
use crate::format::pyjson::{self, Style};
use crate::format::stats::ToolCount;
use crate::format::{hermes, llamafactory};

/// True when the ShareGPT shapes write `loss_weight` on the turns (not under
/// [`Columns::Core`], whose turns are `{"from", "value"}` in every row).
pub(super) fn weights_on_turns(opts: &Options) -> bool {
    opts.columns == Columns::All
}

/// The [`keep::MESSAGE_KEYS`] value of a [`Columns::Core`] row: all that is kept, in
/// every target (core messages and turns carry none of it, so that every row has one
/// schema).
pub(super) fn kept_value(traj: &Trajectory, opts: &Options) -> Option<Value> {
    keep::kept_value(traj, weights_on_turns(opts))
}

/// Append `, "message_keys": ` and what the message list written does not carry
/// (`--to openai` carries all of it), written straight from the trajectory; nothing when
/// there is none.
pub(super) fn write_kept(out: &mut Vec<u8>, traj: &Trajectory, opts: &Options) {
    if opts.target.row_shape() != Target::OpenAi {
        keep::write_kept(out, traj, weights_on_turns(opts));
    }
}

/// Append the message list of `traj` in the shape `opts.target` names.
pub(super) fn write_list(
    traj: &Trajectory,
    opts: &Options,
    out: &mut Vec<u8>,
) -> Result<(), BadRow> {
    let weights = weights_on_turns(opts);
    match opts.target {
        Target::Hermes => hermes_conversations_with(traj, &AsIs::default(), weights, out),
        Target::OpenAi | Target::Groups | Target::Dpo => {
            let core = opts.columns == Columns::Core;
            out.extend_from_slice(&openai_list(traj, opts.arguments, core));
            Ok(())
        }
        t @ (Target::LlamaFactory | Target::LlamaFactoryOpenAi) => {
            llamafactory::write_turns(traj, t == Target::LlamaFactory, weights, out)
                .map_err(|llamafactory::BadTurn(n, e)| BadRow::Envelope(n, e))
        }
    }
}

/// The `tools` value: the OpenAI schemas as a list, or that list as one JSON string.
pub(super) fn write_tools(out: &mut Vec<u8>, traj: &Trajectory, how: ToolsAs) {
    let tools = Value::Array(traj.tools.iter().map(|t| t.to_openai()).collect());
    match how {
        ToolsAs::List => pyjson::write_value(out, &tools, Style::Python),
        ToolsAs::String => pyjson::write_str(
            out,
            &pyjson::to_string(&tools, Style::Python),
            Style::Python,
        ),
    }
}

/// Write the [`Columns::Core`] row: the message list, `tools`, `tool_stats`,
/// `tool_error_counts`, and every other field of `row` (but the consumed message list,
/// `tools`, `tool_stats` and `tool_error_counts`) as one JSON string `metadata`, in
/// the row's key order; a `metadata` string holding a JSON object (a core row's) is
/// unpacked, its fields first. Returns how many of those fields a member of the row of
/// the same name and another value replaced (the row's own member is the later word).
pub(super) fn write_core(
    row: &Map<String, Value>,
    key: &str,
    new_key: &str,
    traj: &Trajectory,
    stats: &BTreeMap<String, ToolCount>,
    opts: &Options,
    out: &mut Vec<u8>,
) -> Result<usize, BadRow> {
    let start = out.len();
    out.push(b'{');
    pyjson::write_str(out, new_key, Style::Python);
    out.extend_from_slice(b": ");
    if let Err(e) = write_list(traj, opts, out) {
        out.truncate(start);
        return Err(e);
    }
    out.extend_from_slice(b", \"tools\": ");
    write_tools(out, traj, opts.tools_as());
    // One Arrow type in any mix of sources: the two maps as JSON strings.
    for (key, write) in [
        (
            "tool_stats",
            write_stats as fn(&mut Vec<u8>, &BTreeMap<String, ToolCount>),
        ),
        ("tool_error_counts", write_error_counts),
    ] {
        let mut member = Vec::new();
        write(&mut member, stats);
        let value = &member[key.len() + 4..];
        out.extend_from_slice(format!(", \"{key}\": ").as_bytes());
        pyjson::write_str(
            out,
            std::str::from_utf8(value).expect("UTF-8"),
            Style::Python,
        );
    }
    // A core row's own `metadata` (a JSON object in a string) is unpacked first, so that
    // normalising a core row again gives the same row.
    let own = crate::format::row::core_metadata(row);
    let unpacked = own.is_some();
    let mut replaced = 0;
    let mut meta: Map<String, Value> = own.unwrap_or_default();
    meta.shift_remove(crate::format::bridge::FIELD); // the row's own (bridged::apply) counts
    for (k, v) in row {
        let consumed = k.as_str() == key
            || k.as_str() == new_key
            || matches!(
                k.as_str(),
                "tools" | "tool_stats" | "tool_error_counts" | keep::MESSAGE_KEYS
            )
            || (unpacked && k.as_str() == "metadata");
        if !consumed && let Some(old) = meta.insert(k.clone(), v.clone()) {
            replaced += usize::from(old != *v);
        }
    }
    meta.shift_remove(keep::MESSAGE_KEYS);
    if let Some(kept) = kept_value(traj, opts) {
        meta.insert(keep::MESSAGE_KEYS.into(), kept);
    }
    out.extend_from_slice(b", \"metadata\": ");
    pyjson::write_str(
        out,
        &pyjson::to_string(&Value::Object(meta), Style::Python),
        Style::Python,
    );
    out.extend_from_slice(b"}\n");
    Ok(replaced)
}

/// `"key": {tool: value(counts), ...}` for each tool of `stats`, in key order.
pub(super) fn write_tool_map(
    out: &mut Vec<u8>,
    key: &str,
    stats: &BTreeMap<String, ToolCount>,
    value: impl Fn(&ToolCount) -> String,
) {
    out.extend_from_slice(format!("\"{key}\": {{").as_bytes());
    for (i, (name, c)) in stats.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(b", ");
        }
        pyjson::write_str(out, name, Style::Python);
        out.extend_from_slice(b": ");
        out.extend_from_slice(value(c).as_bytes());
    }
    out.push(b'}');
}

/// The end of a Hermes row: the `tool_stats` and `tool_error_counts` columns when the
/// row had none to be written in place of (`sep` writes the separator before each), and
/// the closing brace and newline.
pub(super) fn close_row(
    out: &mut Vec<u8>,
    sep: &mut Members,
    stats_done: bool,
    errors_done: bool,
    stats: &BTreeMap<String, ToolCount>,
) {
    if !stats_done {
        sep.next(out);
        write_stats(out, stats);
    }
    if !errors_done {
        sep.next(out);
        write_error_counts(out, stats);
    }
    out.extend_from_slice(b"}\n");
}

/// The separators of a row's members: none before the first, `", "` before each other.
#[derive(Default)]
pub(super) struct Members {
    started: bool,
}

impl Members {
    /// Before the next member.
    pub(super) fn next(&mut self, out: &mut Vec<u8>) {
        if self.started {
            out.extend_from_slice(b", ");
        }
        self.started = true;
    }
}

pub(super) fn write_stats(out: &mut Vec<u8>, stats: &BTreeMap<String, ToolCount>) {
    write_tool_map(out, "tool_stats", stats, |c| {
        format!(
            "{{\"count\": {}, \"success\": {}, \"failure\": {}}}",
            c.count, c.success, c.failure
        )
    });
}

pub(super) fn write_error_counts(out: &mut Vec<u8>, stats: &BTreeMap<String, ToolCount>) {
    write_tool_map(out, "tool_error_counts", stats, |c| c.failure.to_string());
}

pub(super) fn write_turn(out: &mut Vec<u8>, from: &str, value: &str) {
    out.extend_from_slice(b"{\"from\": \"");
    out.extend_from_slice(from.as_bytes());
    out.extend_from_slice(b"\", \"value\": ");
    pyjson::write_str(out, value, Style::Python);
    out.push(b'}');
}

/// Close a turn written up to its value: its `loss_weight` (when `w`) and `}`.
pub(super) fn end_turn(out: &mut Vec<u8>, w: Option<&Value>) {
    if let Some(w) = w {
        out.pop();
        out.extend_from_slice(b", \"loss_weight\": ");
        pyjson::write_value(out, w, Style::Python);
        out.push(b'}');
    }
}

/// Append the `conversations` list of a Hermes row, as JSON, to `out`.
///
/// Tool turns, the bulk of most rows, are written straight into `out`: their JSON
/// bodies are escaped for the outer string in the same pass
/// ([`pyjson::write_value_nested`]), which gives the same bytes as
/// [`hermes::render_tool`] written as a string.
///
/// A row with nothing to do with tools ([`shape::uses_tools`]) gets no tool prompt: a
/// plain chat stays a plain chat, with its own system turn when it had one
/// ([`keep::hermes_system`]). Turns carry their `loss_weight`.
pub fn hermes_conversations(traj: &Trajectory, out: &mut Vec<u8>) -> Result<(), BadRow> {
    hermes_conversations_with(traj, &AsIs::default(), true, out)
}

/// Texts a reading kept to be written as they are (the quick path, [`typed`]), each
/// already what the writer would write for it.
#[derive(Debug, Default)]
pub(super) struct AsIs<'t> {
    /// For each turn, its value as written (escaped as [`pyjson::write_str`] escapes): a
    /// human turn's (the turn itself then holds an empty string), or a gpt turn's that
    /// [`hermes::render_gpt`] renders to that text and [`hermes::scan_gpt`] finds sound.
    pub(super) values: Vec<Option<&'t str>>,
    /// For each tool of the system turn, the JSON text of its parameters
    /// ([`hermes::system_prompt_with`]).
    pub(super) parameters: Vec<Option<&'t str>>,
    /// For each tool turn, for each result, the JSON text of its content (the result's
    /// `content` then only stands in for it, see [`typed`]).
    pub(super) contents: Vec<Vec<Option<&'t str>>>,
}

/// [`hermes_conversations`], writing the texts of `as_is` where it has them, the turns'
/// `loss_weight` when `weights`.
pub(super) fn hermes_conversations_with(
    traj: &Trajectory,
    as_is: &AsIs,
    weights: bool,
    out: &mut Vec<u8>,
) -> Result<(), BadRow> {
    out.push(b'[');
    let prompt = keep::hermes_system(traj, shape::uses_tools(traj), &as_is.parameters);
    let system = prompt.is_some();
    if let Some(prompt) = prompt {
        write_turn(out, "system", &prompt);
    }
    for (i, t) in traj.turns.iter().enumerate() {
        if system || i > 0 {
            out.extend_from_slice(b", ");
        }
        let w = if weights { traj.loss_weight(i) } else { None };
        match t {
            _ if let Some(raw) = as_is.values.get(i).copied().flatten() => {
                let from = if matches!(t, Turn::Gpt(_)) {
                    "gpt"
                } else {
                    "human"
                };
                out.extend_from_slice(b"{\"from\": \"");
                out.extend_from_slice(from.as_bytes());
                out.extend_from_slice(b"\", \"value\": \"");
                out.extend_from_slice(raw.as_bytes());
                out.extend_from_slice(b"\"}");
                end_turn(out, w);
            }
            Turn::Human(s) => {
                write_turn(out, "human", s);
                end_turn(out, w);
            }
            Turn::Gpt(g) => {
                let n = i + 1 + usize::from(system);
                let v = hermes::render_gpt(g).map_err(|e| BadRow::Envelope(n, e))?;
                // The envelope promise, checked on what is written: balanced, nested tags.
                if let Some(e) = hermes::scan_gpt(&v).error {
                    return Err(BadRow::Envelope(n, hermes::EnvelopeError(e.to_string())));
                }
                write_turn(out, "gpt", &v);
                end_turn(out, w);
            }
            Turn::Tool(rs) => {
                write_tool_turn(out, rs, as_is.contents.get(i).map_or(&[], Vec::as_slice));
                end_turn(out, w);
            }
        }
    }
    out.push(b']');
    Ok(())
}

/// A tool turn; `contents[k]`, when `Some`, is the JSON text of result `k`'s content.
pub(super) fn write_tool_turn(
    out: &mut Vec<u8>,
    rs: &[crate::format::model::ToolResult],
    contents: &[Option<&str>],
) {
    out.extend_from_slice(b"{\"from\": \"tool\", \"value\": \"");
    for (i, r) in rs.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(b"\\n");
        }
        out.extend_from_slice(b"<tool_response>\\n{\\\"tool_call_id\\\": ");
        pyjson::write_str_nested(out, &r.tool_call_id, Style::Envelope);
        out.extend_from_slice(b", \\\"name\\\": ");
        pyjson::write_str_nested(out, &r.name, Style::Envelope);
        out.extend_from_slice(b", \\\"content\\\": ");
        match contents.get(i).copied().flatten() {
            Some(text) => pyjson::write_str_body(out, text),
            None => pyjson::write_value_nested(out, &r.content, Style::Envelope),
        }
        out.extend_from_slice(b"}\\n</tool_response>");
    }
    out.extend_from_slice(b"\"}");
}

/// The `messages` list of an OpenAI row, as JSON.
///
/// Calls without an id get the `tool_call_id` of the result that answers them (matched
/// by name, in order), else `call_<turn>_<k>`; a result without an id gets the id of the
/// call it answers (the first call of its name not answered yet, as reading pairs them),
/// other results keep their own; results carry `name`. Reading the messages back gives
/// the same trajectory (an id `call_<turn>_<k>` of a call at that place is read as none).
pub fn openai_messages(traj: &Trajectory) -> Vec<u8> {
    openai_messages_with(traj, Arguments::String)
}

/// [`openai_messages`] with the call arguments spelled as `arguments` says.
pub fn openai_messages_with(traj: &Trajectory, arguments: Arguments) -> Vec<u8> {
    openai_list(traj, arguments, false)
}

/// [`openai_messages_with`]; `core` ([`Columns::Core`]): the messages carry nothing that
/// is kept (no kept key on a message, no message kept whole: they are the row's
/// `metadata.message_keys`) and a tool result's output is a string or `null` (other
/// JSON as its text), so that every row has one schema.
fn openai_list(traj: &Trajectory, arguments: Arguments, core: bool) -> Vec<u8> {
    let mut msgs: Vec<Value> = Vec::with_capacity(traj.turns.len());
    let s = |x: &str| Value::String(x.to_string());
    if let Some(system) = &traj.system {
        let mut m = Map::new();
        m.insert("role".into(), s("system"));
        m.insert("content".into(), s(system));
        msgs.push(Value::Object(m));
    }
    // The kept keys of turn `ti` (result `r`) after the message's own.
    let with_kept = |mut m: Map<String, Value>, ti: usize, r: Option<usize>| {
        if !core && let Some(keys) = traj.keys_of(ti, r) {
            for (k, v) in keys {
                m.entry(k.clone()).or_insert_with(|| v.to_value());
            }
        }
        Value::Object(m)
    };
    for (ti, t) in traj.turns.iter().enumerate() {
        if !core {
            msgs.extend(
                traj.messages_at(ti)
                    .map(|m| in_openai_spelling(m.to_value())),
            );
        }
        match t {
            Turn::Human(text) => {
                let mut m = Map::new();
                m.insert("role".into(), s("user"));
                m.insert("content".into(), s(text));
                msgs.push(with_kept(m, ti, None));
            }
            Turn::Gpt(g) => {
                let mut m = Map::new();
                m.insert("role".into(), s("assistant"));
                let content = if g.content.is_empty() && !g.tool_calls.is_empty() {
                    Value::Null
                } else {
                    s(&g.content)
                };
                m.insert("content".into(), content);
                if let Some(r) = g.reasoning.as_deref()
                    && !hermes::py_strip(r).is_empty()
                {
                    // A `reasoning_content` kept of the source (another text than the one
                    // read from its `reasoning`) is written after: this one is `reasoning`.
                    let kept_rc = !core
                        && traj
                            .keys_of(ti, None)
                            .is_some_and(|k| k.contains_key("reasoning_content"));
                    let key = if kept_rc {
                        "reasoning"
                    } else {
                        "reasoning_content"
                    };
                    m.insert(key.into(), s(r));
                }
                if !g.tool_calls.is_empty() {
                    let ids = call_ids(traj, ti);
                    let calls: Vec<Value> = g
                        .tool_calls
                        .iter()
                        .zip(ids)
                        .map(|(c, id)| {
                            let mut f = Map::new();
                            f.insert("name".into(), s(&c.name));
                            let a = match arguments {
                                Arguments::String => {
                                    Value::String(pyjson::to_string(&c.arguments, Style::Python))
                                }
                                Arguments::Object => c.arguments.clone(),
                            };
                            f.insert("arguments".into(), a);
                            let mut cm = Map::new();
                            cm.insert("id".into(), Value::String(id));
                            cm.insert("type".into(), s("function"));
                            cm.insert("function".into(), Value::Object(f));
                            Value::Object(cm)
                        })
                        .collect();
                    m.insert("tool_calls".into(), Value::Array(calls));
                }
                msgs.push(with_kept(m, ti, None));
            }
            Turn::Tool(rs) => {
                let ids = result_ids(traj, ti);
                for (ri, (r, id)) in rs.iter().zip(ids).enumerate() {
                    let mut m = Map::new();
                    m.insert("role".into(), s("tool"));
                    m.insert("tool_call_id".into(), Value::String(id));
                    m.insert("name".into(), s(&r.name));
                    let content = match &r.content {
                        v @ (Value::Object(_) | Value::Array(_)) => {
                            Value::String(pyjson::to_string(v, Style::Python))
                        }
                        v @ (Value::Number(_) | Value::Bool(_)) if core => {
                            Value::String(pyjson::to_string(v, Style::Python))
                        }
                        v => v.clone(),
                    };
                    m.insert("content".into(), content);
                    msgs.push(with_kept(m, ti, Some(ri)));
                }
            }
        }
    }
    if !core {
        msgs.extend(
            traj.messages_at(traj.turns.len())
                .map(|m| in_openai_spelling(m.to_value())),
        );
    }
    let mut out = Vec::with_capacity(4096);
    pyjson::write_value(&mut out, &Value::Array(msgs), Style::Python);
    out
}

/// Ids for the calls of the gpt turn at `ti`.
pub(super) fn call_ids(traj: &Trajectory, ti: usize) -> Vec<String> {
    let Turn::Gpt(g) = &traj.turns[ti] else {
        return Vec::new();
    };
    let mut ids: Vec<Option<String>> = g.tool_calls.iter().map(|c| c.id.clone()).collect();
    if let Some(Turn::Tool(rs)) = traj.turns.get(ti + 1) {
        let mut taken: Vec<bool> = ids.iter().map(|i| i.is_some()).collect();
        let fresh = |ids: &[Option<String>], id: &str| {
            !id.is_empty() && !ids.iter().any(|i| i.as_deref() == Some(id))
        };
        // A result in its call's place (the order the Hermes text is written in, and read
        // back in) gives that call its id; then the first open call of the result's name.
        // A result named after no call answers none, and holds no call's place.
        let answering = rs
            .iter()
            .filter(|r| g.tool_calls.iter().any(|c| c.name == r.name));
        for (k, r) in answering.enumerate().take(ids.len()) {
            if !taken[k] && g.tool_calls[k].name == r.name && fresh(&ids, &r.tool_call_id) {
                ids[k] = Some(r.tool_call_id.clone());
                taken[k] = true;
            }
        }
        for r in rs {
            if !fresh(&ids, &r.tool_call_id) {
                continue;
            }
            if let Some(k) = (0..ids.len()).find(|&k| !taken[k] && g.tool_calls[k].name == r.name) {
                ids[k] = Some(r.tool_call_id.clone());
                taken[k] = true;
            }
        }
    }
    ids.into_iter()
        .enumerate()
        .map(|(k, id)| id.unwrap_or_else(|| format!("call_{ti}_{k}")))
        .collect()
}

/// The `tool_call_id` of each result of the tool turn at `ti`: its own, or, when it has
/// none, the id ([`call_ids`]) of the call it answers: the first call of the gpt turn
/// before it with the result's name that no result has answered yet (reading pairs a
/// result without an id the same way); `""` when there is none.
fn result_ids(traj: &Trajectory, ti: usize) -> Vec<String> {
    let Some(Turn::Tool(rs)) = traj.turns.get(ti) else {
        return Vec::new();
    };
    let mut ids: Vec<String> = rs.iter().map(|r| r.tool_call_id.clone()).collect();
    let Some(Turn::Gpt(g)) = ti.checked_sub(1).and_then(|p| traj.turns.get(p)) else {
        return ids;
    };
    let calls = call_ids(traj, ti - 1);
    let mut answered: Vec<bool> = calls
        .iter()
        .map(|c| !c.is_empty() && ids.contains(c))
        .collect();
    for (r, id) in rs.iter().zip(&mut ids) {
        if !id.is_empty() {
            continue;
        }
        if let Some(k) = (0..calls.len()).find(|&k| !answered[k] && g.tool_calls[k].name == r.name)
        {
            answered[k] = true;
            id.clone_from(&calls[k]);
        }
    }
    ids
}

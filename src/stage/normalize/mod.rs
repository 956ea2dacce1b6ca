//! Conversions between record shapes and the trajectory model, one row at a time.
//!
//! - [`read`]: any supported row shape → [`Trajectory`] (see its docs for the shapes).
//! - [`normalize_row`]: a row → one output line, in Hermes ShareGPT ([`Target::Hermes`]),
//!   OpenAI messages ([`Target::OpenAi`]) or LLaMA-Factory's own spelling in either
//!   formatting ([`Target::LlamaFactory`], [`Target::LlamaFactoryOpenAi`]).
//! - [`pyjson`]: JSON written exactly as Python's `json.dumps` writes it.
//!
//! Row layout. The message list is replaced, at its place in the row, by
//! `conversations` (Hermes, LLaMA-Factory's ShareGPT) or `messages` (OpenAI, LLaMA-Factory's
//! OpenAI formatting), followed by the `tools` list except for Hermes; the row's own
//! `tools` field is consumed (the tools now live in the system prompt, or in the new
//! `tools` list). `tool_stats` and `tool_error_counts` are (re)computed, in place when
//! present, else appended. Every other field passes through unchanged, in its order.
//! With [`Columns::Core`] the row is exactly the message list, `tools`, `tool_stats`,
//! `tool_error_counts` and `metadata` (see [`shape`]).

mod bridged;
pub mod error;
pub mod groups;
pub mod keep;
pub mod read;
pub mod shape;
pub mod sidecar;
mod typed;

use std::collections::BTreeMap;

use serde_json::{Map, Value};

pub use self::error::{BadLine, BadRow};
pub use self::keep::{Part, Parts, SystemRule, Tally};
use crate::format::model::{ToolCount, Trajectory, Turn, tool_stats};
use crate::format::pyjson::{self, Style};
use crate::format::repair::Mode;
use crate::format::{hermes, llamafactory};
pub use shape::{Arguments, Columns, ToolsAs};

/// The output shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Target {
    /// Hermes ShareGPT: `conversations` of `{"from", "value"}` with Hermes tags.
    #[default]
    Hermes,
    /// OpenAI chat `messages` with `tool_calls`, `tool_call_id`, `reasoning_content`,
    /// plus a `tools` list.
    #[value(name = "openai")]
    OpenAi,
    /// LLaMA-Factory's ShareGPT formatting: `conversations` of `human`, `gpt`,
    /// `function_call` and `observation` turns ([`crate::format::llamafactory`]), plus
    /// `tools` (a JSON string).
    #[value(name = "llamafactory")]
    LlamaFactory,
    /// LLaMA-Factory's OpenAI formatting: `messages` of `user`, `assistant`,
    /// `function_call` and `tool` messages, plus `tools` (a JSON string).
    #[value(name = "llamafactory-openai")]
    LlamaFactoryOpenAi,
    /// One row per task: its rollouts' `messages` (OpenAI) and `scores`, as Atropos'
    /// `ScoredDataGroup`, with each rollout's other fields in `rollouts`
    /// ([`groups::group_row`]).
    Groups,
    /// One TRL conversational preference row per task: `prompt`, `chosen` (the best
    /// reward), `rejected` (the worst) ([`groups::dpo_row`]).
    Dpo,
}

impl Target {
    /// The key of the message list this shape writes.
    pub fn list_key(self) -> &'static str {
        match self {
            Target::Hermes | Target::LlamaFactory => "conversations",
            Target::OpenAi | Target::LlamaFactoryOpenAi | Target::Groups | Target::Dpo => {
                "messages"
            }
        }
    }

    /// The shape of each rollout's row: `--to groups` and `--to dpo` gather rows
    /// converted as `--to openai`.
    pub fn row_shape(self) -> Target {
        match self {
            Target::Groups | Target::Dpo => Target::OpenAi,
            t => t,
        }
    }

    /// True when the output gathers the rollouts of each task into one row.
    pub fn gathers(self) -> bool {
        matches!(self, Target::Groups | Target::Dpo)
    }

    /// True when the row carries a `tools` column (the Hermes rows carry the tools in
    /// their system turn).
    pub fn has_tools_column(self) -> bool {
        self != Target::Hermes
    }
}

/// Settings of one conversion run.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub target: Target,
    /// Where the message list is (`--messages-field`); default `conversations`, then
    /// `messages`.
    pub messages_field: Option<String>,
    /// Tool names every row's `tool_stats` covers (`--tools FILE`).
    pub known_tools: Vec<String>,
    /// Top-level fields set on every row (`--set KEY=VALUE`), replacing any of the
    /// same name; new keys go last.
    pub set_fields: Vec<(String, Value)>,
    /// Which columns a row has (`--columns`).
    pub columns: Columns,
    /// Join consecutive turns of one role (`--merge-consecutive`, [`shape::merge_consecutive`]).
    pub merge_consecutive: bool,
    /// How `--to openai` writes call arguments (`--arguments`).
    pub arguments: Arguments,
    /// How the `tools` column is written (`--tools-as`); `None`: a list, except a string
    /// under [`Columns::Core`].
    pub tools_as: Option<ToolsAs>,
    /// Refuse gpt turns whose tags need a repair instead of repairing them
    /// (`--no-repair`, [`crate::format::repair`]).
    pub no_repair: bool,
    /// What the Hermes text shows of a `tool_call` bridge call (`--bridge`).
    pub bridge: Bridge,
    /// Whose system text is kept (`--keep-run-system-prompt`, `--drop-system-prompt`).
    pub system_rule: SystemRule,
    /// Leave out the messages' `logprobs` (they go to `--token-sidecar`, [`sidecar`]).
    pub strip_logprobs: bool,
}

/// What the Hermes text shows of a `tool_call` bridge call ([`crate::format::bridge`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Bridge {
    /// The call as the model made it: `tool_call` with the real call inside.
    Keep,
    /// The real tool it ran, with its arguments (the original kept in `bridge_calls`).
    #[default]
    Resolve,
}

impl Options {
    fn tools_as(&self) -> ToolsAs {
        self.tools_as.unwrap_or(match (self.columns, self.target) {
            (_, Target::LlamaFactory | Target::LlamaFactoryOpenAi) => ToolsAs::String,
            (Columns::All, _) => ToolsAs::List,
            (Columns::Core, _) => ToolsAs::String,
        })
    }
}

/// Convert one parsed row and append the output line (with its `\n`) to `out`.
/// On error `out` is left as it was.
pub fn normalize_row(
    row: Map<String, Value>,
    opts: &Options,
    out: &mut Vec<u8>,
) -> Result<(), BadRow> {
    normalize_row_counted(row, opts, out, &mut Tally::default())
}

/// [`normalize_row`], adding the envelope repairs made and the parts set aside or
/// dropped to `done` when the row is written (a rejected row counts none).
pub fn normalize_row_counted(
    row: Map<String, Value>,
    opts: &Options,
    out: &mut Vec<u8>,
    done: &mut Tally,
) -> Result<(), BadRow> {
    let mut made = Tally::default();
    if groups::is_group(&row) {
        // A group of rollouts gives one row per rollout, all or none.
        let start = out.len();
        let rollouts = groups::rollouts(row)?;
        made.groups = (1, rollouts.len() as u64);
        for r in rollouts {
            if let Err(e) = normalize_row_with(r, &[], opts, out, &mut made) {
                out.truncate(start);
                return Err(e);
            }
        }
    } else {
        normalize_row_with(row, &[], opts, out, &mut made)?;
    }
    done.merge(&made);
    Ok(())
}

/// Convert one input line and append the output line (with its `\n`) to `out`, adding
/// the envelope repairs made to `done`; on error `out` is left as it was.
///
/// The fields the conversion passes through are copied as they are when their text is
/// already what would be written ([`pyjson::writes_as_is`]: Python's spelling, as in rows
/// traj or `json.dumps` wrote), instead of being parsed and written again; the row is
/// read in part ([`crate::io::parse_object_in_part`]). Wherever that does not apply, the
/// line is read whole ([`crate::io::parse_object`]) and converted from that: the same
/// output, the same verdict. A row read in part and refused is refused for the same
/// reason read whole (the reasons look only at the fields always parsed), except "no
/// message list", whose hint looks at other fields: that one is read again whole.
pub fn normalize_line(
    line: &[u8],
    opts: &Options,
    out: &mut Vec<u8>,
    done: &mut Tally,
) -> Result<(), BadLine> {
    // The logprobs go to the token sidecar, not into the row.
    if opts.strip_logprobs && sidecar::may_hold(line) {
        let mut row = crate::io::parse_object(line).map_err(BadLine::NotARow)?;
        if !sidecar::take(&mut row).is_empty() {
            normalize_row_counted(row, opts, out, done)?;
            return Ok(());
        }
    }
    // A group of rollouts gives one row per rollout.
    if memchr::memmem::find(line, b"\"scores\"").is_some() {
        let row = crate::io::parse_object(line).map_err(BadLine::NotARow)?;
        normalize_row_counted(row, opts, out, done)?;
        return Ok(());
    }
    if let typed::Quick::Done(r) = typed::quick(line, opts, out, done) {
        return Ok(r?);
    }
    if opts.columns == Columns::All {
        let parse = |k: &str| {
            matches!(
                k,
                "conversations"
                    | "messages"
                    | "tools"
                    | "tool_stats"
                    | "tool_error_counts"
                    | keep::MESSAGE_KEYS
                    | keep::SYSTEM_COLUMN
                    | "metadata"
            ) || k == crate::format::bridge::FIELD
                || opts.messages_field.as_deref() == Some(k)
                || opts.set_fields.iter().any(|(s, _)| s == k)
        };
        // The row is level 1: a kept value may hold 126 levels (io::parse_object's limit).
        let verbatim = |text: &str| pyjson::as_is_prefix(text, 126);
        if let Some(row) = crate::io::parse_object_in_part(line, &parse, &verbatim) {
            let mut made = Tally::default();
            match normalize_row_with(row.map, &row.raw, opts, out, &mut made) {
                Ok(()) => {
                    done.merge(&made);
                    return Ok(());
                }
                Err(BadRow::NoMessageList(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    let row = crate::io::parse_object(line).map_err(BadLine::NotARow)?;
    normalize_row_counted(row, opts, out, done)?;
    Ok(())
}

/// Convert `row`; `raw[i]`, where it is `Some`, is the text to write for field `i` (its
/// value in `row` only stands in for it).
fn normalize_row_with(
    mut row: Map<String, Value>,
    raw: &[Option<&str>],
    opts: &Options,
    out: &mut Vec<u8>,
    made: &mut Tally,
) -> Result<(), BadRow> {
    for (k, v) in &opts.set_fields {
        row.insert(k.clone(), v.clone());
    }
    let key = read::find_messages(&row, opts.messages_field.as_deref())?
        .0
        .to_string();
    let key = key.as_str();
    let items = match row.get_mut(key).map(Value::take) {
        Some(Value::Array(items)) => items,
        _ => unreachable!("find_messages checked the list"),
    };
    let tools = read::row_tools(&row)?;
    let mode = if opts.no_repair {
        Mode::Refuse
    } else {
        Mode::Repair
    };
    let mut ctx = read::ReadCtx {
        mode,
        rule: opts.system_rule,
        run: keep::is_run_record(row.keys().map(String::as_str)),
        tally: made,
    };
    let mut traj = read::read_messages(items, tools, &mut ctx)?;
    // LLaMA-Factory's `system` column: the row's system text when its list has none
    // (consumed, as `tools` is; a list's own system text wins and the column passes).
    // (Not removed from `row`: `raw` is by field position.)
    let mut system_column = false;
    if traj.system.is_none()
        && let Some(Value::String(text)) = row.get(keep::SYSTEM_COLUMN)
        && !text.is_empty()
    {
        match opts.system_rule.verdict(ctx.run) {
            Some(part) => ctx.tally.parts.add(part),
            None => traj.system = Some(text.clone()),
        }
        system_column = true;
    }
    // A core row keeps them in its metadata.
    let in_meta = match row.get("metadata") {
        Some(Value::String(m)) if m.contains(keep::MESSAGE_KEYS) => {
            serde_json::from_str::<Map<String, Value>>(m)
                .ok()
                .and_then(|mut m| m.shift_remove(keep::MESSAGE_KEYS))
        }
        _ => None,
    };
    if let Some(v) = row.get(keep::MESSAGE_KEYS).or(in_meta.as_ref()) {
        for k in keep::read_kept(v)? {
            match k {
                crate::format::model::Kept::Keys { turn, result, keys } => {
                    keep::keep_keys(&mut traj.kept, turn, result, keys)
                }
                m => traj.kept.push(m),
            }
        }
    }
    if opts.merge_consecutive {
        shape::merge_consecutive(&mut traj);
    }
    let bridge_calls = bridged::apply(&row, &mut traj, opts)?;
    let new_key = opts.target.list_key();
    if key != new_key && row.contains_key(new_key) {
        return Err(BadRow::BothLists(key.to_string(), new_key));
    }
    let mut known: Vec<&str> = opts.known_tools.iter().map(String::as_str).collect();
    let old_stats = match row.get("tool_stats") {
        // A core row's: the same object, as a JSON string.
        Some(Value::String(s)) => serde_json::from_str(s).ok(),
        _ => None,
    };
    if let Some(Value::Object(old)) = old_stats.as_ref().or(row.get("tool_stats")) {
        known.extend(old.keys().map(String::as_str));
    }
    let stats = tool_stats(&traj, known);
    if opts.columns == Columns::Core {
        if system_column {
            row.shift_remove(keep::SYSTEM_COLUMN); // the core path writes no raw texts
        }
        bridged::set_field(&mut row, bridge_calls);
        return write_core(&row, key, new_key, &traj, &stats, opts, out);
    }
    let mut bridge_calls = bridge_calls;

    let start = out.len();
    out.push(b'{');
    let mut sep = Members::default();
    let mut stats_done = false;
    let mut errors_done = false;
    for (i, (k, v)) in row.iter().enumerate() {
        if k == key {
            sep.next(out);
            pyjson::write_str(out, new_key, Style::Python);
            out.extend_from_slice(b": ");
            if let Err(e) = write_list(&traj, opts, out) {
                out.truncate(start);
                return Err(e);
            }
            if opts.target.has_tools_column() {
                out.extend_from_slice(b", \"tools\": ");
                write_tools(out, &traj, opts.tools_as());
            }
            bridged::write_field(out, bridge_calls.take());
            if let Some(kept) = kept_value(&traj, opts) {
                out.extend_from_slice(b", ");
                pyjson::write_str(out, keep::MESSAGE_KEYS, Style::Python);
                out.extend_from_slice(b": ");
                pyjson::write_value(out, &kept, Style::Python);
            }
        } else if k == "tools"
            || k == crate::format::bridge::FIELD
            || k == keep::MESSAGE_KEYS
            || (system_column && k == keep::SYSTEM_COLUMN)
        {
            continue;
        } else if k == "tool_stats" {
            sep.next(out);
            write_stats(out, &stats);
            stats_done = true;
        } else if k == "tool_error_counts" {
            sep.next(out);
            write_error_counts(out, &stats);
            errors_done = true;
        } else {
            sep.next(out);
            pyjson::write_str(out, k, Style::Python);
            out.extend_from_slice(b": ");
            match raw.get(i).copied().flatten() {
                Some(text) => out.extend_from_slice(text.as_bytes()),
                None => pyjson::write_value(out, v, Style::Python),
            }
        }
    }
    close_row(out, &mut sep, stats_done, errors_done, &stats);
    debug_assert!(out.len() > start);
    Ok(())
}

/// True when the ShareGPT shapes write `loss_weight` on the turns (not under
/// [`Columns::Core`], whose turns are `{"from", "value"}` in every row).
fn weights_on_turns(opts: &Options) -> bool {
    opts.columns == Columns::All
}

/// The [`keep::MESSAGE_KEYS`] value of the row: what the message list written does not
/// carry (`--to openai` carries all of it).
fn kept_value(traj: &Trajectory, opts: &Options) -> Option<Value> {
    if opts.target.row_shape() == Target::OpenAi {
        return None;
    }
    keep::kept_value(traj, weights_on_turns(opts))
}

/// Append the message list of `traj` in the shape `opts.target` names.
fn write_list(traj: &Trajectory, opts: &Options, out: &mut Vec<u8>) -> Result<(), BadRow> {
    let weights = weights_on_turns(opts);
    match opts.target {
        Target::Hermes => hermes_conversations_with(traj, &AsIs::default(), weights, out),
        Target::OpenAi | Target::Groups | Target::Dpo => {
            out.extend_from_slice(&openai_messages_with(traj, opts.arguments));
            Ok(())
        }
        t @ (Target::LlamaFactory | Target::LlamaFactoryOpenAi) => {
            llamafactory::write_turns(traj, t == Target::LlamaFactory, weights, out)
                .map_err(|llamafactory::BadTurn(n, e)| BadRow::Envelope(n, e))
        }
    }
}

/// The `tools` value: the OpenAI schemas as a list, or that list as one JSON string.
fn write_tools(out: &mut Vec<u8>, traj: &Trajectory, how: ToolsAs) {
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
/// unpacked, its fields first.
fn write_core(
    row: &Map<String, Value>,
    key: &str,
    new_key: &str,
    traj: &Trajectory,
    stats: &BTreeMap<String, ToolCount>,
    opts: &Options,
    out: &mut Vec<u8>,
) -> Result<(), BadRow> {
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
    let own = match row.get("metadata") {
        Some(Value::String(s)) => match serde_json::from_str(s) {
            Ok(Value::Object(m)) => Some(m),
            _ => None,
        },
        _ => None,
    };
    let unpacked = own.is_some();
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
        if !consumed {
            meta.insert(k.clone(), v.clone());
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
    Ok(())
}

/// `"key": {tool: value(counts), ...}` for each tool of `stats`, in key order.
fn write_tool_map(
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
fn close_row(
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
struct Members {
    started: bool,
}

impl Members {
    /// Before the next member.
    fn next(&mut self, out: &mut Vec<u8>) {
        if self.started {
            out.extend_from_slice(b", ");
        }
        self.started = true;
    }
}

fn write_stats(out: &mut Vec<u8>, stats: &BTreeMap<String, ToolCount>) {
    write_tool_map(out, "tool_stats", stats, |c| {
        format!(
            "{{\"count\": {}, \"success\": {}, \"failure\": {}}}",
            c.count, c.success, c.failure
        )
    });
}

fn write_error_counts(out: &mut Vec<u8>, stats: &BTreeMap<String, ToolCount>) {
    write_tool_map(out, "tool_error_counts", stats, |c| c.failure.to_string());
}

fn write_turn(out: &mut Vec<u8>, from: &str, value: &str) {
    out.extend_from_slice(b"{\"from\": \"");
    out.extend_from_slice(from.as_bytes());
    out.extend_from_slice(b"\", \"value\": ");
    pyjson::write_str(out, value, Style::Python);
    out.push(b'}');
}

/// Close a turn written up to its value: its `loss_weight` (when `w`) and `}`.
fn end_turn(out: &mut Vec<u8>, w: Option<&Value>) {
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
struct AsIs<'t> {
    /// For each turn, its value as written (escaped as [`pyjson::write_str`] escapes): a
    /// human turn's (the turn itself then holds an empty string), or a gpt turn's that
    /// [`hermes::render_gpt`] renders to that text and [`hermes::scan_gpt`] finds sound.
    values: Vec<Option<&'t str>>,
    /// For each tool of the system turn, the JSON text of its parameters
    /// ([`hermes::system_prompt_with`]).
    parameters: Vec<Option<&'t str>>,
    /// For each tool turn, for each result, the JSON text of its content (the result's
    /// `content` then only stands in for it, see [`typed`]).
    contents: Vec<Vec<Option<&'t str>>>,
}

/// [`hermes_conversations`], writing the texts of `as_is` where it has them, the turns'
/// `loss_weight` when `weights`.
fn hermes_conversations_with(
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
fn write_tool_turn(
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
/// by name, in order), else `call_<turn>_<k>`; results keep their own id (possibly
/// `""`) and carry `name`, so that reading the messages back gives the same trajectory.
pub fn openai_messages(traj: &Trajectory) -> Vec<u8> {
    openai_messages_with(traj, Arguments::String)
}

/// [`openai_messages`] with the call arguments spelled as `arguments` says.
pub fn openai_messages_with(traj: &Trajectory, arguments: Arguments) -> Vec<u8> {
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
        if let Some(keys) = traj.keys_of(ti, r) {
            for (k, v) in keys {
                m.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        Value::Object(m)
    };
    for (ti, t) in traj.turns.iter().enumerate() {
        msgs.extend(traj.messages_at(ti).cloned());
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
                    m.insert("reasoning_content".into(), s(r));
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
                for (ri, r) in rs.iter().enumerate() {
                    let mut m = Map::new();
                    m.insert("role".into(), s("tool"));
                    m.insert("tool_call_id".into(), s(&r.tool_call_id));
                    m.insert("name".into(), s(&r.name));
                    let content = match &r.content {
                        v @ (Value::Object(_) | Value::Array(_)) => {
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
    msgs.extend(traj.messages_at(traj.turns.len()).cloned());
    let mut out = Vec::with_capacity(4096);
    pyjson::write_value(&mut out, &Value::Array(msgs), Style::Python);
    out
}

/// Ids for the calls of the gpt turn at `ti`.
fn call_ids(traj: &Trajectory, ti: usize) -> Vec<String> {
    let Turn::Gpt(g) = &traj.turns[ti] else {
        return Vec::new();
    };
    let mut ids: Vec<Option<String>> = g.tool_calls.iter().map(|c| c.id.clone()).collect();
    if let Some(Turn::Tool(rs)) = traj.turns.get(ti + 1) {
        let mut taken: Vec<bool> = ids.iter().map(|i| i.is_some()).collect();
        for r in rs {
            if r.tool_call_id.is_empty()
                || ids.iter().any(|i| i.as_deref() == Some(&r.tool_call_id))
            {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole-row reading, as before rows were read in part.
    fn whole(line: &[u8], opts: &Options) -> (Vec<u8>, Result<(), BadLine>, Tally) {
        let mut out = Vec::new();
        let mut made = Tally::default();
        let r = crate::io::parse_object(line)
            .map_err(BadLine::NotARow)
            .and_then(|row| Ok(normalize_row_counted(row, opts, &mut out, &mut made)?));
        (out, r, made)
    }

    /// Every line of every fixture, in the fixture's own spelling and re-spelled compactly
    /// and as Python writes it, under several option sets: reading in part gives the
    /// bytes, verdict and repairs of reading the whole row.
    #[test]
    fn reading_in_part_changes_nothing() {
        let sets = [
            Options::default(),
            Options {
                target: Target::OpenAi,
                ..Options::default()
            },
            Options {
                messages_field: Some("history".into()),
                set_fields: vec![("source".into(), Value::String("x".into()))],
                ..Options::default()
            },
            Options {
                columns: Columns::Core,
                ..Options::default()
            },
            Options {
                target: Target::LlamaFactory,
                ..Options::default()
            },
            Options {
                target: Target::LlamaFactoryOpenAi,
                columns: Columns::Core,
                ..Options::default()
            },
        ];
        let files = crate::fixtures::jsonl_files();
        assert!(files.len() >= 5, "fixtures missing: {files:?}");
        let (mut lines, mut in_part) = (0, 0);
        for f in &files {
            for raw in std::fs::read(f).unwrap().split(|&b| b == b'\n') {
                let mut spellings = vec![raw.to_vec()];
                if let Ok(row) = crate::io::parse_object(raw) {
                    let v = Value::Object(row);
                    spellings.push(serde_json::to_vec(&v).unwrap());
                    spellings.push(pyjson::to_string(&v, Style::Python).into_bytes());
                }
                for line in &spellings {
                    lines += 1;
                    let keep = |t: &str| pyjson::as_is_prefix(t, 126);
                    let msgs = |k: &str| k == "conversations" || k == "messages";
                    if crate::io::parse_object_in_part(line, &msgs, &keep).is_some() {
                        in_part += 1;
                    }
                    for opts in &sets {
                        let mut out = Vec::new();
                        let mut made = Tally::default();
                        let r = normalize_line(line, opts, &mut out, &mut made);
                        let (want_out, want, want_made) = whole(line, opts);
                        let at = format!("{}: {}", f.display(), String::from_utf8_lossy(line));
                        assert_eq!(r, want, "{at}");
                        assert!(out == want_out, "{at}");
                        assert_eq!(made.repairs.total(), want_made.repairs.total(), "{at}");
                        assert_eq!(made.parts, want_made.parts, "{at}");
                    }
                }
            }
        }
        assert!(
            lines > 500 && in_part > lines / 4,
            "{lines} lines, {in_part} read in part"
        );
    }
}

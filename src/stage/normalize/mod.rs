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
pub mod members;
mod order;
mod pair;
pub mod read;
pub mod shape;
pub mod sidecar;
mod typed;
mod write;

use serde_json::{Map, Value};

pub use self::error::{BadLine, BadRow};
pub use self::keep::{Part, Parts, SystemRule, Tally};
use crate::format::pyjson::{self, Style};
use crate::format::repair::Mode;
use crate::format::stats::tool_stats;
pub use shape::{Arguments, BadArguments, Columns, ToolsAs};
use write::{
    AsIs, Members, close_row, hermes_conversations_with, write_core, write_error_counts,
    write_kept, write_list, write_stats, write_tools,
};
pub use write::{hermes_conversations, openai_messages, openai_messages_with};

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
    /// `function_call` and `observation` turns (docs/normalize.md), plus
    /// `tools` (a JSON string).
    #[value(name = "llamafactory")]
    LlamaFactory,
    /// LLaMA-Factory's OpenAI formatting: `messages` of `user`, `assistant`,
    /// `function_call` and `tool` messages, plus `tools` (a JSON string).
    #[value(name = "llamafactory-openai")]
    LlamaFactoryOpenAi,
    /// One row per task: its rollouts' `messages` (OpenAI) and `scores`, as Atropos'
    /// `ScoredDataGroup`, with each rollout's other fields in `rollouts`
    /// (docs/rollouts.md).
    Groups,
    /// One TRL conversational preference row per task: `prompt`, `chosen` (the best
    /// reward), `rejected` (the worst) (docs/rollouts.md).
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
    /// An OpenAI call whose `arguments` string is not JSON (`--bad-arguments`).
    pub bad_arguments: BadArguments,
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
            if let Err(e) = normalize_row_with(r, &[], None, opts, out, &mut made) {
                out.truncate(start);
                return Err(e);
            }
        }
    } else {
        normalize_row_with(row, &[], None, opts, out, &mut made)?;
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
/// message list", whose hint looks at other fields: that one is read again whole. A
/// tombstone is [`BadLine::Tombstone`], whatever else it holds.
pub fn normalize_line(
    line: &[u8],
    opts: &Options,
    out: &mut Vec<u8>,
    done: &mut Tally,
) -> Result<(), BadLine> {
    // Lines read whole: logprobs to take out for the token sidecar, a group of rollouts
    // (one row per rollout). Any other goes to the quick reader first.
    let logprobs = opts.strip_logprobs && sidecar::may_hold(line);
    let whole = logprobs || memchr::memmem::find(line, b"\"scores\"").is_some();
    // The quick reader reads no row with a `discarded` member (no tombstone); the
    // tombstone rule reads only the lines it leaves.
    if !whole && let typed::Quick::Done(r) = typed::quick(line, opts, out, done) {
        return Ok(r?);
    }
    // A prompt the run dropped, no trajectory to convert.
    if let Some(why) = crate::format::row::tombstone(line) {
        return Err(BadLine::Tombstone(why));
    }
    if whole {
        let mut row = crate::io::parse_object(line).map_err(BadLine::NotARow)?;
        if logprobs {
            sidecar::take(&mut row);
        }
        normalize_row_counted(row, opts, out, done)?;
        return Ok(());
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
        let verbatim = |text: &str| pyjson::as_is_prefix(text, crate::io::FIELD_DEPTH);
        // The OpenAI list's messages: a key the reader never looks at is only kept, and
        // its value may be kept as the text it was read as (a member of a list's object).
        let field = opts.messages_field.as_deref().unwrap_or("messages");
        let keep = |k: &str| !members::is_read_key(k);
        let member = |text: &str| pyjson::as_is_prefix(text, crate::io::FIELD_DEPTH - 2);
        let rule = crate::io::ListRule {
            field,
            keep: &keep,
            verbatim: &member,
        };
        let rule = (!opts.set_fields.iter().any(|(s, _)| s == field)).then_some(&rule);
        if let Some(row) = crate::io::parse_object_in_part(line, &parse, &verbatim, rule) {
            let mut made = Tally::default();
            match normalize_row_with(row.map, &row.raw, row.list, opts, out, &mut made) {
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

/// Convert one input line (the function [`crate::io::process`] runs on every line),
/// adding the row's envelope repairs, parts and groups to `tally`.
pub fn convert_line(
    line: &[u8],
    opts: &Options,
    out: &mut Vec<u8>,
    tally: &std::sync::Mutex<Tally>,
) -> crate::io::Verdict {
    let mut made = Tally::default();
    match normalize_line(line, opts, out, &mut made) {
        Ok(()) => {
            if made.repairs.total() > 0 || made.parts != Parts::default() || made.groups.0 > 0 {
                tally.lock().expect("tally").merge(&made);
            }
            crate::io::Verdict::Written
        }
        Err(e @ BadLine::Row(_)) => crate::io::Verdict::BadRow(e.to_string()),
        Err(e @ BadLine::NotARow(_)) => crate::io::Verdict::Bad(e.to_string()),
        Err(BadLine::Tombstone(why)) => crate::io::Verdict::Discarded(vec![why]),
    }
}

/// Convert `row`; `raw[i]`, where it is `Some`, is the text to write for field `i` (its
/// value in `row` only stands in for it), and `list`, where it is `Some`, names a list
/// field whose items' members it holds as text ([`crate::io::PartRow::list`]).
fn normalize_row_with(
    mut row: Map<String, Value>,
    raw: &[Option<&str>],
    list: Option<(String, Vec<members::ItemTexts<'_>>)>,
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
    // Texts kept of a list that is not the one read go back into their places.
    let texts = match list {
        Some((field, texts)) if field == key => texts,
        Some((field, texts)) => {
            if let Some(v) = row.get_mut(&field) {
                members::whole_list(v, &texts);
            }
            Vec::new()
        }
        None => Vec::new(),
    };
    let items = match row.get_mut(key).map(Value::take) {
        Some(Value::Array(items)) => items,
        _ => unreachable!("find_messages checked the list"),
    };
    let tools = read::row_tools(&row, &mut made.parts)?;
    let mode = if opts.no_repair {
        Mode::Refuse
    } else {
        Mode::Repair
    };
    let mut ctx = read::ReadCtx {
        mode,
        rule: opts.system_rule,
        run: keep::is_run_record(row.keys().map(String::as_str)),
        bad_arguments: opts.bad_arguments,
        tools_as_text: matches!(row.get("tools"), Some(Value::String(_))),
        tally: made,
    };
    let mut traj = read::read_messages(items, &texts, tools, &mut ctx)?;
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
            crate::format::row::core_metadata(&row)
                .and_then(|mut m| m.shift_remove(keep::MESSAGE_KEYS))
        }
        _ => None,
    };
    // `null` is no field: what `datasets` writes for a row without one beside rows with it.
    let own = row.get(keep::MESSAGE_KEYS).filter(|v| !v.is_null());
    if let Some(v) = own.or(in_meta.as_ref()) {
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
    if key != new_key {
        match row.get(new_key) {
            // A `null` list (a mixed-shape dataset's row) carries nothing to keep.
            Some(Value::Null) => {
                row.shift_remove(new_key);
            }
            Some(_) => return Err(BadRow::BothLists(key.to_string(), new_key)),
            None => {}
        }
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
        let replaced = write_core(&row, key, new_key, &traj, &stats, opts, out)?;
        made.parts.add_n(keep::Part::MetadataKey, replaced);
        return Ok(());
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
            write_kept(out, &traj, opts);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole-row reading, as before rows were read in part.
    fn whole(line: &[u8], opts: &Options) -> (Vec<u8>, Result<(), BadLine>, Tally) {
        let mut out = Vec::new();
        let mut made = Tally::default();
        let r = match crate::format::row::tombstone(line) {
            Some(why) => Err(BadLine::Tombstone(why)),
            None => crate::io::parse_object(line)
                .map_err(BadLine::NotARow)
                .and_then(|row| Ok(normalize_row_counted(row, opts, &mut out, &mut made)?)),
        };
        (out, r, made)
    }

    /// The option sets the in-part readings are checked under.
    fn option_sets() -> Vec<Options> {
        vec![
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
            Options {
                messages_field: Some("messages".into()),
                ..Options::default()
            },
        ]
    }

    /// Every line of every fixture, in the fixture's own spelling and re-spelled compactly
    /// and as Python writes it, under several option sets: reading in part gives the
    /// bytes, verdict and repairs of reading the whole row.
    #[test]
    fn reading_in_part_changes_nothing() {
        let sets = option_sets();
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
                    if crate::io::parse_object_in_part(line, &msgs, &keep, None).is_some() {
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

    /// A random JSON value for a message's key the reader does not read: mostly in
    /// Python's spelling (kept as text), now and then in another (`1e5`, no spaces), with
    /// a key twice, serde_json's private number key, nesting near the depth limit, or a
    /// raw reply holding reasoning where `provider_reasoning` looks.
    fn extra_value(rng: &mut fastrand::Rng, depth: usize) -> String {
        let texts = ["\"x\"", "\"a \\\"q\\\" \\n b\"", "\"é\\u00e9 \\u0007\""];
        match rng.u8(0..24) {
            0..=3 => texts[rng.usize(0..texts.len())].to_string(),
            4 => "1.50".into(),
            5 => "1e5".into(),
            6 => "null".into(),
            7 => "[1,2]".into(),
            8 => "{\"a\": 1, \"a\": 2}".into(),
            9 => "{\"$serde_json::private::Number\": \"1\"}".into(),
            10 => {
                let n = [122, 123, 124, 125][rng.usize(0..4)];
                format!("{}{}", "[".repeat(n), "]".repeat(n))
            }
            11 | 12 => {
                let r = ["\"\"", "\"thought\"", "null"][rng.usize(0..3)];
                let m = format!("{{\"content\": \"\", \"reasoning_content\": {r}}}");
                format!("{{\"response\": {{\"choices\": [{{\"message\": {m}}}]}}}}")
            }
            13 => format!("{{\"reasoning\": {}}}", texts[rng.usize(0..texts.len())]),
            _ if depth == 0 => "3".into(),
            14..=17 => {
                let items: Vec<String> = (0..rng.usize(0..3))
                    .map(|_| extra_value(rng, depth - 1))
                    .collect();
                format!("[{}]", items.join(", "))
            }
            _ => {
                let keys = ["k", "actions", "response", "k"];
                let members: Vec<String> = (0..rng.usize(0..3))
                    .map(|i| format!("\"{}\": {}", keys[i], extra_value(rng, depth - 1)))
                    .collect();
                format!("{{{}}}", members.join(", "))
            }
        }
    }

    /// A random OpenAI row in Python's spelling whose messages carry keys the reader does
    /// not read (`extra`, `provider_specific_fields`, ...) beside the ones it does.
    fn row_with_extras(rng: &mut fastrand::Rng) -> String {
        let mut msgs = Vec::new();
        if rng.bool() {
            msgs.push("{\"role\": \"system\", \"content\": \"be brief\"}".to_string());
        }
        for step in 0..rng.usize(1..5) {
            let mut m = match step % 3 {
                0 => vec![
                    "\"role\": \"user\"".to_string(),
                    "\"content\": \"do it\"".into(),
                ],
                1 => {
                    let mut m = vec![
                        "\"role\": \"assistant\"".to_string(),
                        "\"content\": \"\"".into(),
                    ];
                    if rng.bool() {
                        m.push(format!(
                            "\"tool_calls\": [{{\"id\": \"c{step}\", \"type\": \"function\", \
                             \"function\": {{\"name\": \"bash\", \"arguments\": \"{{}}\"}}}}]"
                        ));
                    }
                    if rng.bool() {
                        m.push(format!(
                            "\"reasoning_content\": {}",
                            ["\"\"", "\"why\""][rng.usize(0..2)]
                        ));
                    }
                    m
                }
                _ => vec![
                    "\"role\": \"tool\"".to_string(),
                    format!("\"tool_call_id\": \"c{}\"", step - 1),
                    "\"content\": \"out\"".into(),
                ],
            };
            for key in [
                "extra",
                "provider_specific_fields",
                "loss_weight",
                "name",
                "extra",
            ] {
                if rng.u8(0..3) == 0 {
                    m.push(format!("\"{key}\": {}", extra_value(rng, 4)));
                }
            }
            if rng.u8(0..8) == 0 {
                m.push("\"role\": \"user\"".into()); // a key twice
            }
            rng.shuffle(&mut m[1..]);
            msgs.push(format!("{{{}}}", m.join(", ")));
        }
        if rng.u8(0..10) == 0 {
            msgs.push("{\"role\": \"exit\", \"content\": \"\", \"extra\": {\"k\": 1}}".into());
        }
        let mut row = vec![format!("\"messages\": [{}]", msgs.join(", "))];
        if rng.u8(0..6) == 0 {
            row.push("\"conversations\": [{\"from\": \"human\", \"value\": \"hi\"}, {\"from\": \"gpt\", \"value\": \"yo\"}]".into());
        }
        if rng.bool() {
            row.insert(0, "\"id\": \"r-1\"".into());
        }
        format!("{{{}}}", row.join(", "))
    }

    /// Reading in part, with the members of the OpenAI list that the reader never looks
    /// at kept as text, gives the bytes, verdict, repairs and parts of reading the whole
    /// row, on random rows; and the texts are kept for most of them.
    #[test]
    fn members_kept_as_text_change_nothing() {
        let sets = option_sets();
        let mut rng = fastrand::Rng::with_seed(46);
        let (mut rows, mut kept) = (0, 0);
        for _ in 0..4_000 {
            let line = row_with_extras(&mut rng);
            let keep = |k: &str| !members::is_read_key(k);
            let member = |t: &str| pyjson::as_is_prefix(t, crate::io::FIELD_DEPTH - 2);
            let rule = crate::io::ListRule {
                field: "messages",
                keep: &keep,
                verbatim: &member,
            };
            let msgs = |k: &str| k == "messages" || k == "conversations";
            let verbatim = |t: &str| pyjson::as_is_prefix(t, crate::io::FIELD_DEPTH);
            let part =
                crate::io::parse_object_in_part(line.as_bytes(), &msgs, &verbatim, Some(&rule));
            rows += 1;
            if part.is_some_and(|p| {
                p.list
                    .is_some_and(|(_, t)| t.iter().any(|m| !m.members.is_empty()))
            }) {
                kept += 1;
            }
            for opts in &sets {
                let mut out = Vec::new();
                let mut made = Tally::default();
                let r = normalize_line(line.as_bytes(), opts, &mut out, &mut made);
                let (want_out, want, want_made) = whole(line.as_bytes(), opts);
                assert_eq!(r, want, "{line}");
                assert!(
                    out == want_out,
                    "{line}\n{}\n{}",
                    String::from_utf8_lossy(&out),
                    String::from_utf8_lossy(&want_out)
                );
                assert_eq!(made.repairs.total(), want_made.repairs.total(), "{line}");
                assert_eq!(made.parts, want_made.parts, "{line}");
            }
        }
        assert!(kept > rows / 5, "{kept} of {rows} rows kept texts");
    }
}

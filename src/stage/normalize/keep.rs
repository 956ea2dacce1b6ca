//! What traj-normalize keeps of a row beyond the trajectory model, and what it counts
//! when it sets a part aside or drops it.
//!
//! - The source's own system text ([`Trajectory::system`]): a plain chat writes it as
//!   its system turn; a row with tools writes it in front of the Hermes tool prompt,
//!   followed by a blank line ([`hermes_system`]), and reading that turn back splits it
//!   off again ([`read_system`]). A system text holding a `<tools>` block that is not of
//!   that form is another writer's tool prompt: its tools are read and the Hermes prompt
//!   takes its place. Whose system text is training text is the [`SystemRule`]: a
//!   traj-run record's (or the reference batch runner's) is the run's prompt, not kept
//!   unless `--keep-run-system-prompt`; `--drop-system-prompt` drops every row's.
//!   LLaMA-Factory's `system` column ([`SYSTEM_COLUMN`]) is read as the system text of a
//!   row whose list has none.
//! - Per-message keys the model has no field for, and messages that are no turn
//!   ([`Kept`]): written back by `--to openai`; in the ShareGPT shapes `loss_weight` is a
//!   key of its turn (without `--columns core`) and the rest is the row's
//!   [`MESSAGE_KEYS`] field (inside `metadata` under `--columns core`).
//! - [`Parts`]: the count of every part set aside (kept in [`MESSAGE_KEYS`], not in the
//!   conversation) or dropped, for the summary line and `--stats`.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::format::hermes;
use crate::format::model::{Kept, KeptKeys, KeptValue, Trajectory, kept_keys};
use crate::format::pyjson::{self, Style};
use crate::format::repair::Repairs;

/// The row field holding the kept per-message keys and messages that are no turn.
pub const MESSAGE_KEYS: &str = "message_keys";

pub use crate::format::model::LOSS_WEIGHT;

/// LLaMA-Factory's `system` column (`dataset_info.json` `columns.system`): the row's
/// system text when its message list has none.
pub const SYSTEM_COLUMN: &str = "system";

/// Whose system text is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SystemRule {
    /// Every row's own system text is kept, but a run record's (the default).
    #[default]
    KeepButRuns,
    /// Every row's, a run record's too (`--keep-run-system-prompt`).
    KeepAll,
    /// No row's (`--drop-system-prompt`).
    DropAll,
}

impl SystemRule {
    /// What becomes of the system text of a row; `run` when the row is a run record.
    pub fn verdict(self, run: bool) -> Option<Part> {
        match self {
            SystemRule::DropAll => Some(Part::SystemPrompt),
            SystemRule::KeepButRuns if run => Some(Part::RunSystemPrompt),
            _ => None,
        }
    }
}

/// True for a row of a traj-run record or of the reference batch runner (both carry
/// `prompt_index` and `api_calls`): its system prompt is the run's, not training text.
pub fn is_run_record<'a>(mut keys: impl Iterator<Item = &'a str>) -> bool {
    let (mut index, mut calls) = (false, false);
    keys.all(|k| {
        index |= k == "prompt_index";
        calls |= k == "api_calls";
        !(index && calls)
    });
    index && calls
}

/// A part of a row that is not in the conversation written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Part {
    /// A tool result with no call right before it: kept in [`MESSAGE_KEYS`].
    ToolResultWithoutCall,
    /// A system message after the first turn: kept in [`MESSAGE_KEYS`].
    LateSystemMessage,
    /// A message of a role that is no turn (mini-swe-agent's `exit`): kept in
    /// [`MESSAGE_KEYS`].
    MessageWithoutTurn,
    /// A run record's system prompt, dropped (the reference's rule).
    RunSystemPrompt,
    /// A system prompt dropped by `--drop-system-prompt`.
    SystemPrompt,
    /// A key of a tool call other than its `id`, `type` and `function` (LiteLLM's
    /// `index`), of its function other than `name` and `arguments`, or of a Hermes
    /// `<tool_call>` body other than `name` and `arguments` (an `id`), dropped.
    ToolCallKey,
    /// A key of a system message other than its role and text, dropped.
    SystemMessageKey,
    /// A key of a text or reasoning content part other than its type and text
    /// (`cache_control`, a thinking block's `signature`), dropped.
    ContentPartKey,
    /// A reasoning content part of a message whose own reasoning field (another text)
    /// is the turn's reasoning, dropped.
    ReasoningPart,
    /// Another writer's tool prompt (a system text with a `<tools>` block that is not
    /// the Hermes prompt traj writes): its tools are read, its text (instructions beside
    /// the block included) is replaced by the Hermes prompt, dropped.
    OtherToolPrompt,
    /// An OpenAI call's `arguments` string that is not JSON, written as `{}`
    /// (`--bad-arguments empty`, the reference's rule), dropped.
    NonJsonArguments,
    /// An image part (`image_url`, `image`, `input_image`): written as the reference's
    /// `[screenshot]` placeholder, its URL or data dropped.
    ImagePart,
    /// A key of a tool schema in the row's `tools` or in a Hermes `<tools>` list other
    /// than `type` and `function`, or of its function other than `name`, `description`
    /// and `parameters` (`strict`, `cache_control`:
    /// [`crate::format::model::ToolSpec::keys_not_carried`]), dropped.
    ToolSchemaKey,
    /// The id of a call no result answers (the last call of a run cut off): the Hermes
    /// text carries a call's id only in its result, dropped.
    UnansweredCallId,
    /// A tool result's own `name` that is not its call's (`browser.search` answering a
    /// call of `search`): the result is written under its call's name, dropped.
    ToolResultName,
    /// A key of a Hermes `<tool_response>` wrapper other than `tool_call_id`, `name` and
    /// `content` (`is_error`, `duration_ms`), dropped.
    ToolResultKey,
    /// A field of a core row's `metadata` that a member of the row of the same name and
    /// another value replaced (`--columns core`: the row's own member is the later
    /// word, a column added after the metadata was written), dropped.
    MetadataKey,
}

impl Part {
    pub const ALL: [Part; 17] = [
        Part::ToolResultWithoutCall,
        Part::LateSystemMessage,
        Part::MessageWithoutTurn,
        Part::RunSystemPrompt,
        Part::SystemPrompt,
        Part::ToolCallKey,
        Part::SystemMessageKey,
        Part::ContentPartKey,
        Part::ReasoningPart,
        Part::OtherToolPrompt,
        Part::NonJsonArguments,
        Part::ImagePart,
        Part::ToolSchemaKey,
        Part::UnansweredCallId,
        Part::ToolResultName,
        Part::ToolResultKey,
        Part::MetadataKey,
    ];

    /// The stable name (stderr, `--stats`).
    pub fn name(self) -> &'static str {
        match self {
            Part::ToolResultWithoutCall => "tool_result_without_call",
            Part::LateSystemMessage => "late_system_message",
            Part::MessageWithoutTurn => "message_without_turn",
            Part::RunSystemPrompt => "run_system_prompt",
            Part::SystemPrompt => "system_prompt",
            Part::ToolCallKey => "tool_call_key",
            Part::SystemMessageKey => "system_message_key",
            Part::ContentPartKey => "content_part_key",
            Part::ReasoningPart => "reasoning_part",
            Part::OtherToolPrompt => "other_tool_prompt",
            Part::NonJsonArguments => "non_json_arguments",
            Part::ImagePart => "image_part",
            Part::ToolSchemaKey => "tool_schema_key",
            Part::UnansweredCallId => "unanswered_call_id",
            Part::ToolResultName => "tool_result_name",
            Part::ToolResultKey => "tool_result_key",
            Part::MetadataKey => "metadata_key",
        }
    }

    /// True when the part is gone from the output; false when it is kept in
    /// [`MESSAGE_KEYS`].
    pub fn dropped(self) -> bool {
        matches!(
            self,
            Part::RunSystemPrompt
                | Part::SystemPrompt
                | Part::ToolCallKey
                | Part::SystemMessageKey
                | Part::ContentPartKey
                | Part::ReasoningPart
                | Part::OtherToolPrompt
                | Part::NonJsonArguments
                | Part::ImagePart
                | Part::ToolSchemaKey
                | Part::UnansweredCallId
                | Part::ToolResultName
                | Part::ToolResultKey
                | Part::MetadataKey
        )
    }
}

/// How many parts of each kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parts(BTreeMap<Part, u64>);

impl Parts {
    pub fn add(&mut self, p: Part) {
        self.add_n(p, 1);
    }

    /// `n` parts of kind `p` (none: the kind is not listed).
    pub fn add_n(&mut self, p: Part, n: usize) {
        if n > 0 {
            *self.0.entry(p).or_default() += n as u64;
        }
    }

    pub fn get(&self, p: Part) -> u64 {
        self.0.get(&p).copied().unwrap_or(0)
    }

    /// The parts set aside (`dropped == false`) or dropped (`true`).
    pub fn total(&self, dropped: bool) -> u64 {
        self.0
            .iter()
            .filter(|(p, _)| p.dropped() == dropped)
            .map(|(_, n)| n)
            .sum()
    }

    pub fn merge(&mut self, other: &Parts) {
        for (p, n) in &other.0 {
            *self.0.entry(*p).or_default() += n;
        }
    }
}

/// What a conversion counts besides its verdict: envelope repairs and parts.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    pub repairs: Repairs,
    pub parts: Parts,
    /// Groups of rollouts read (`--to groups` rows, Atropos dumps), and the rollout rows
    /// they gave.
    pub groups: (u64, u64),
}

impl Tally {
    pub fn merge(&mut self, other: &Tally) {
        self.repairs.merge(&other.repairs);
        self.parts.merge(&other.parts);
        self.groups.0 += other.groups.0;
        self.groups.1 += other.groups.1;
    }
}

/// A system message's text, read.
#[derive(Debug, PartialEq, Eq)]
pub enum SystemText<'a> {
    /// A tool prompt (it holds a `<tools>` block); `own` is the source's text written in
    /// front of the Hermes prompt by [`hermes_system`], if any, and the text after it
    /// (the summary notice traj-compress and the reference's compressor append to the
    /// system turn), joined with a blank line.
    ToolPrompt { own: Option<Cow<'a, str>> },
    /// The source's own text.
    Own(&'a str),
}

/// Read a system text: see [`SystemText`]; `lists_tools` when it holds a `<tools>`
/// block (as [`hermes::parse_system`] finds one).
pub fn read_system(text: &str, lists_tools: bool) -> SystemText<'_> {
    if !lists_tools {
        return SystemText::Own(text);
    }
    // After the Hermes prompt: the end, or a blank line and text.
    let Some((k, end)) = hermes::tool_prompt_span(text) else {
        return SystemText::ToolPrompt { own: None };
    };
    let before = match k {
        0 => Some(None),
        _ => text[..k].strip_suffix("\n\n").map(Some),
    };
    let after = match &text[end..] {
        "" => Some(None),
        rest => rest
            .strip_prefix("\n\n")
            .filter(|r| !r.is_empty())
            .map(Some),
    };
    let own = match (before, after) {
        (Some(b), Some(None)) => b.map(Cow::Borrowed),
        (Some(None), Some(Some(a))) => Some(Cow::Borrowed(a)),
        (Some(Some(b)), Some(Some(a))) => Some(Cow::Owned(format!("{b}\n\n{a}"))),
        _ => None,
    };
    SystemText::ToolPrompt { own }
}

/// True when `text`, read as [`SystemText::ToolPrompt`] without own text, is another
/// writer's tool prompt, whose text the Hermes prompt replaces ([`Part::OtherToolPrompt`]):
/// anything but the Hermes prompt itself, which is written again from its tools.
pub fn other_tool_prompt(text: &str) -> bool {
    !(text.starts_with(hermes::SYSTEM_PREFIX) && text.ends_with(hermes::SYSTEM_SUFFIX))
}

/// The system turn of a Hermes row: `None` for a plain chat without own text; the own
/// text for a plain chat; the Hermes tool prompt (its parameters as `raw`, see
/// [`hermes::system_prompt_with`]) with the own text and a blank line in front when the
/// row has to do with tools (`tools`).
pub fn hermes_system(traj: &Trajectory, tools: bool, raw: &[Option<&str>]) -> Option<String> {
    match (tools, traj.system.as_deref()) {
        (false, own) => own.map(str::to_string),
        (true, None) => Some(hermes::system_prompt_with(&traj.tools, raw)),
        (true, Some(own)) => {
            let prompt = hermes::system_prompt_with(&traj.tools, raw);
            let mut s = String::with_capacity(own.len() + 2 + prompt.len());
            s.push_str(own);
            s.push_str("\n\n");
            s.push_str(&prompt);
            Some(s)
        }
    }
}

/// Join a system text onto the own text read so far (`\n\n` between two).
pub fn add_system(system: &mut Option<String>, text: &str) {
    if text.is_empty() {
        return;
    }
    match system {
        Some(s) => {
            s.push_str("\n\n");
            s.push_str(text);
        }
        None => *system = Some(text.to_string()),
    }
}

/// A [`MESSAGE_KEYS`] field that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{MESSAGE_KEYS}` entry {0}: {1}")]
pub struct BadKept(pub usize, pub &'static str);

/// Read a row's [`MESSAGE_KEYS`] field.
pub fn read_kept(v: &Value) -> Result<Vec<Kept>, BadKept> {
    let Value::Array(list) = v else {
        return Err(BadKept(0, "expected a list"));
    };
    let index =
        |e: &Map<String, Value>, k: &str| e.get(k).and_then(Value::as_u64).map(|n| n as usize);
    list.iter()
        .enumerate()
        .map(|(i, e)| {
            let Value::Object(e) = e else {
                return Err(BadKept(i + 1, "expected an object"));
            };
            match (e.get("keys"), e.get("message")) {
                (Some(Value::Object(keys)), None) => Ok(Kept::Keys {
                    turn: index(e, "turn").ok_or(BadKept(i + 1, "no `turn` number"))?,
                    result: index(e, "result"),
                    keys: kept_keys(keys.clone()),
                }),
                (None, Some(m)) => Ok(Kept::Message {
                    at: index(e, "at").ok_or(BadKept(i + 1, "no `at` number"))?,
                    message: KeptValue::Parsed(m.clone()),
                }),
                _ => Err(BadKept(i + 1, "expected `keys` (an object) or `message`")),
            }
        })
        .collect()
}

/// One entry of the [`MESSAGE_KEYS`] value: the keys of a turn (less those the writer
/// puts on the turn itself), or a message kept whole.
enum Entry<'t> {
    Keys {
        turn: usize,
        result: Option<usize>,
        keys: Vec<(&'t str, &'t KeptValue)>,
    },
    Message {
        at: usize,
        message: &'t KeptValue,
    },
}

/// The entries of the [`MESSAGE_KEYS`] value of what `traj` keeps, less the turn keys
/// the writer puts on the turns themselves (`on_turns`: `loss_weight` of a human or gpt
/// turn, and of a tool turn whose results agree on it): the one rule behind
/// [`kept_value`] and [`write_kept`]. In the order of their places (a message kept whole
/// before the keys of the turn it stands before, a turn's keys before its results'),
/// whatever order they were read in: a row read back from its `message_keys` gets the
/// entries of its turns' `loss_weight` first, and must be written as it was.
fn entries(traj: &Trajectory, on_turns: bool) -> impl Iterator<Item = Entry<'_>> {
    let mut kept: Vec<&Kept> = traj.kept.iter().collect();
    kept.sort_by_key(|k| match k {
        Kept::Message { at, .. } => (*at, 0, 0),
        Kept::Keys { turn, result, .. } => (*turn, 1, result.map_or(0, |r| r + 1)),
    });
    kept.into_iter().filter_map(move |k| match k {
        Kept::Keys { turn, result, keys } => {
            let on_turn = on_turns && traj.loss_weight(*turn).is_some();
            let keys: Vec<_> = keys
                .iter()
                .filter(|(k, _)| !(on_turn && k.as_str() == LOSS_WEIGHT))
                .map(|(k, v)| (k.as_str(), v))
                .collect();
            (!keys.is_empty()).then_some(Entry::Keys {
                turn: *turn,
                result: *result,
                keys,
            })
        }
        Kept::Message { at, message } => Some(Entry::Message { at: *at, message }),
    })
}

/// The [`MESSAGE_KEYS`] value of what `traj` keeps (see `entries`); `None` when
/// nothing is left.
pub fn kept_value(traj: &Trajectory, on_turns: bool) -> Option<Value> {
    let list: Vec<Value> = entries(traj, on_turns)
        .map(|entry| {
            let mut e = Map::new();
            match entry {
                Entry::Keys { turn, result, keys } => {
                    e.insert("turn".into(), Value::from(turn));
                    if let Some(r) = result {
                        e.insert("result".into(), Value::from(r));
                    }
                    let keys = keys.into_iter().map(|(k, v)| (k.to_string(), v.to_value()));
                    e.insert("keys".into(), Value::Object(keys.collect()));
                }
                Entry::Message { at, message } => {
                    e.insert("at".into(), Value::from(at));
                    e.insert("message".into(), message.to_value());
                }
            }
            Value::Object(e)
        })
        .collect();
    (!list.is_empty()).then_some(Value::Array(list))
}

/// Append `, "message_keys": ` and the [`MESSAGE_KEYS`] value of what `traj` keeps,
/// as [`pyjson::write_value`] writes [`kept_value`] in Python's spelling, without
/// copying the values (a text kept is copied as it is); nothing when nothing is left.
pub fn write_kept(out: &mut Vec<u8>, traj: &Trajectory, on_turns: bool) {
    use std::io::Write as _;
    let mut first = true;
    for entry in entries(traj, on_turns) {
        out.extend_from_slice(b", ");
        if first {
            pyjson::write_str(out, MESSAGE_KEYS, Style::Python);
            out.extend_from_slice(b": [");
        }
        out.push(b'{');
        first = false;
        match entry {
            Entry::Keys { turn, result, keys } => {
                write!(out, "\"turn\": {turn}").expect("write to Vec");
                if let Some(r) = result {
                    write!(out, ", \"result\": {r}").expect("write to Vec");
                }
                out.extend_from_slice(b", \"keys\": {");
                for (i, (k, v)) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.extend_from_slice(b", ");
                    }
                    pyjson::write_str(out, k, Style::Python);
                    out.extend_from_slice(b": ");
                    v.write(out);
                }
                out.push(b'}');
            }
            Entry::Message { at, message } => {
                write!(out, "\"at\": {at}, \"message\": ").expect("write to Vec");
                message.write(out);
            }
        }
        out.push(b'}');
    }
    if !first {
        out.push(b']');
    }
}

/// Add `keys` to what is kept for turn `turn` (result `result`), after any kept already.
pub fn keep_keys(traj_kept: &mut Vec<Kept>, turn: usize, result: Option<usize>, keys: KeptKeys) {
    if keys.is_empty() {
        return;
    }
    for k in traj_kept.iter_mut() {
        if let Kept::Keys {
            turn: t,
            result: r,
            keys: have,
        } = k
            && *t == turn
            && *r == result
        {
            for (key, v) in keys {
                have.entry(key).or_insert(v);
            }
            return;
        }
    }
    traj_kept.push(Kept::Keys { turn, result, keys });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::model::{GptTurn, ToolResult, Turn};

    /// `write_kept` writes what `kept_value` is, in Python's spelling: keys parsed and
    /// kept as text, messages kept whole both ways, `loss_weight` on a turn or not.
    #[test]
    fn kept_is_written_as_its_value() {
        let text = |t: &str| KeptValue::Text(t.into());
        let parsed = |t: &str| KeptValue::Parsed(serde_json::from_str(t).unwrap());
        let keys = |list: &[(&str, KeptValue)]| -> KeptKeys {
            list.iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect()
        };
        let result = ToolResult {
            tool_call_id: "c1".into(),
            name: "bash".into(),
            content: Value::String("out".into()),
        };
        let traj = Trajectory {
            turns: vec![
                Turn::Human("hi".into()),
                Turn::Gpt(GptTurn::default()),
                Turn::Tool(vec![result.clone(), result]),
            ],
            kept: vec![
                Kept::Message {
                    at: 0,
                    message: text(r#"{"role": "exit", "extra": {"k": [1.50, "é\n"]}}"#),
                },
                Kept::Keys {
                    turn: 0,
                    result: None,
                    keys: keys(&[
                        (LOSS_WEIGHT, parsed("0.0")),
                        ("extra", text(r#"{"a": null}"#)),
                    ]),
                },
                Kept::Keys {
                    turn: 1,
                    result: None,
                    keys: keys(&[(LOSS_WEIGHT, parsed("1"))]),
                },
                Kept::Keys {
                    turn: 2,
                    result: Some(1),
                    keys: keys(&[("name", parsed(r#""x""#)), ("extra", text("[]"))]),
                },
                Kept::Message {
                    at: 3,
                    message: parsed(r#"{"role": "system", "content": "late"}"#),
                },
            ],
            ..Default::default()
        };
        for on_turns in [false, true] {
            let mut want = b", \"message_keys\": ".to_vec();
            pyjson::write_value(
                &mut want,
                &kept_value(&traj, on_turns).unwrap(),
                Style::Python,
            );
            let mut got = Vec::new();
            write_kept(&mut got, &traj, on_turns);
            assert_eq!(
                String::from_utf8(got),
                String::from_utf8(want),
                "{on_turns}"
            );
        }
        let mut got = Vec::new();
        write_kept(&mut got, &Trajectory::default(), true);
        assert!(got.is_empty() && kept_value(&Trajectory::default(), true).is_none());
    }

    #[test]
    fn own_text_goes_in_front_of_the_tool_prompt_and_comes_back() {
        let traj = Trajectory {
            system: Some("Be brief.".into()),
            ..Default::default()
        };
        let s = hermes_system(&traj, true, &[]).unwrap();
        assert!(s.starts_with("Be brief.\n\nYou are a function calling AI model."));
        let read = |t| read_system(t, hermes::parse_system(t).is_some());
        assert_eq!(
            read(&s),
            SystemText::ToolPrompt {
                own: Some(Cow::Borrowed("Be brief."))
            }
        );
        let bare = hermes::system_prompt(&[]);
        assert_eq!(read(&bare), SystemText::ToolPrompt { own: None });
        // Text after the prompt (traj-compress's summary notice) is own text too.
        let notice = "Some of your previous tool responses may be summarized.";
        let (with_own, with_bare, glued) = (
            format!("{s}\n\n{notice}"),
            format!("{bare}\n\n{notice}"),
            format!("{bare}{notice}"),
        );
        assert_eq!(
            read(&with_own),
            SystemText::ToolPrompt {
                own: Some(Cow::Owned(format!("Be brief.\n\n{notice}")))
            }
        );
        assert_eq!(
            read(&with_bare),
            SystemText::ToolPrompt {
                own: Some(Cow::Borrowed(notice))
            }
        );
        // Not after a blank line: no text of the Hermes prompt's form.
        assert_eq!(read(&glued), SystemText::ToolPrompt { own: None });
        assert_eq!(read("Be brief."), SystemText::Own("Be brief."));
        assert_eq!(
            read("Use <tools> </tools> tags."),
            SystemText::Own("Use <tools> </tools> tags.")
        );
        let other = "Tools:\n<tools>\n[]\n</tools>\nCall them.";
        assert_eq!(read(other), SystemText::ToolPrompt { own: None });
        assert_eq!(
            hermes_system(&traj, false, &[]).as_deref(),
            Some("Be brief.")
        );
    }

    #[test]
    fn run_records_are_told_by_their_keys() {
        assert!(is_run_record(
            ["prompt_index", "messages", "api_calls"].into_iter()
        ));
        assert!(!is_run_record(["prompt_index", "messages"].into_iter()));
    }
}

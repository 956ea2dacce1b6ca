//! Row predicates for traj-filter: Hermes well-formedness, reasoning, tool validity,
//! completion flags, turn and token counts.
//!
//! A row is read once into the borrowed view of [`crate::format::row`]: turn values
//! stay raw JSON text until a predicate needs them, so a tool turn (most of the bytes
//! of a trajectory) is only unescaped when `--well-formed` looks inside it. Tags are
//! read by the one Hermes scanner ([`crate::format::hermes::scan_gpt`],
//! [`crate::format::hermes::response_bodies`]).
//!
//! Two row shapes are understood, one submodule each:
//! - `hermes`: Hermes ShareGPT rows (`conversations` of `{"from","value"}`).
//! - `raw`: raw run records (OpenAI `messages` with `tool_calls`, `role: "tool"`
//!   results and a `tools` list of schemas), judged on the OpenAI fields (see
//!   `docs/filter.md` for how each predicate reads them).

use std::collections::HashSet;

use serde_json::value::RawValue;

use crate::format::model::ToolListError;
pub use crate::format::row::{BadRow, RowView, parse_row, validate_object};
use crate::format::tokens::Tokenizer;

pub use bounds::Bounds;

mod bounds;
mod chat;
pub mod drift;
pub mod groups;
mod hermes;
mod raw;
mod roles;

/// The `from` values of `conversations` turns the predicates read themselves: Hermes
/// ShareGPT and LLaMA-Factory's ShareGPT.
const OWN_FROMS: [&str; 6] = [
    "system",
    "human",
    "gpt",
    "tool",
    "function_call",
    "observation",
];
/// The `role` values of `messages` the predicates read themselves: a run record's.
const OWN_ROLES: [&str; 4] = ["system", "user", "assistant", "tool"];

/// True when the predicates read `row` as it is; false for a row in another shape
/// traj-normalize reads (`user`/`assistant` turns in `conversations`, legacy `function`
/// results, a `developer` message, mini-swe-agent's `exit`), which is judged as the Hermes
/// row traj-normalize makes of it ([`normalized_for_judging`]).
pub fn reads_as_is(row: &RowView<'_>) -> bool {
    match (&row.conversations, &row.messages) {
        (Some(turns), _) => turns
            .iter()
            .all(|t| OWN_FROMS.contains(&&*t.from) && t.value.starts_with('"')),
        (None, Some(msgs)) => msgs.iter().all(|m| OWN_ROLES.contains(&&*m.role)),
        (None, None) => true,
    }
}

/// A row in a shape the predicates do not read themselves, as traj-normalize reads it.
pub enum Normalized {
    /// The Hermes row (one line, with its `\n`) its default conversion makes, and what
    /// the conversion had to mend on the way: under `--well-formed`, a row it repaired
    /// or whose result it set aside is malformed (the reasons), as the same faults are
    /// in a Hermes row.
    Row(Vec<u8>, Vec<String>),
    /// traj-normalize refuses it: a bad line, with its reason.
    Refused(String),
    /// Not one row (a group of rollouts): no verdict of its own.
    NotOne,
}

/// [`Normalized`] of `line`: how a row in a shape the predicates do not read themselves
/// is judged, so that its verdict is that of its normalised row.
pub fn normalized_for_judging(line: &[u8]) -> Normalized {
    use crate::stage::normalize::{Options, Part, Tally, normalize_line};
    let mut out = Vec::with_capacity(line.len() + 256);
    let mut tally = Tally::default();
    if let Err(e) = normalize_line(line, &Options::default(), &mut out, &mut tally) {
        return Normalized::Refused(e.to_string());
    }
    if tally.groups.0 > 0 {
        return Normalized::NotOne;
    }
    let mut mended = Vec::new();
    if tally.repairs.total() > 0 {
        let kinds: Vec<&str> = crate::format::repair::Repair::ALL
            .iter()
            .filter(|r| tally.repairs.get(**r) > 0)
            .map(|r| r.name())
            .collect();
        mended.push(format!(
            "{}: its tags need repairs ({})",
            reason::MALFORMED,
            kinds.join(", ")
        ));
    }
    if tally.parts.get(Part::ToolResultWithoutCall) > 0 {
        mended.push(format!(
            "{}: a tool result answers no call",
            reason::MALFORMED
        ));
    }
    Normalized::Row(out, mended)
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
    /// Drop rows whose `stop_reason` says the provider cut them short.
    pub no_truncated: bool,
    pub has_tool_calls: bool,
    /// `--min-turns` / `--max-turns`.
    pub turns: Bounds<usize>,
    /// `--min-row-tokens` / `--max-row-tokens`.
    pub row_tokens: Bounds<usize>,
    /// Turns must alternate as LLaMA-Factory and axolotl require (`--alternating`).
    pub alternating: bool,
    /// The row's numeric `reward` (`--min-reward` / `--max-reward`).
    pub reward: Bounds<f64>,
}

impl Predicates {
    /// True when no predicate is set (the pass-through path).
    pub fn is_empty(&self) -> bool {
        !(self.require_reasoning
            || self.valid_tools
            || self.well_formed
            || self.completed
            || self.no_partial
            || self.no_truncated
            || self.has_tool_calls
            || self.turns.is_set()
            || self.alternating
            || self.reward.is_set()
            || self.needs_tokens())
    }

    pub fn needs_tokens(&self) -> bool {
        self.row_tokens.is_set()
    }
}

/// Reason categories (the text before `: ` in a reject reason, and the keys of `--stats`).
pub mod reason {
    pub const NO_REASONING: &str = "no-reasoning";
    pub const INVALID_TOOLS: &str = "invalid-tools";
    pub const MALFORMED: &str = "malformed";
    pub const NOT_COMPLETED: &str = "not-completed";
    pub const PARTIAL: &str = "partial";
    pub const TRUNCATED: &str = "truncated";
    pub const NO_TOOL_CALLS: &str = "no-tool-calls";
    pub const TOO_FEW_TURNS: &str = "too-few-turns";
    pub const TOO_MANY_TURNS: &str = "too-many-turns";
    pub const TOO_FEW_TOKENS: &str = "too-few-tokens";
    pub const TOO_MANY_TOKENS: &str = "too-many-tokens";
    pub const NOT_ALTERNATING: &str = "not-alternating";
    pub const NO_REWARD: &str = "no-reward";
    pub const REWARD_TOO_LOW: &str = "reward-too-low";
    pub const REWARD_TOO_HIGH: &str = "reward-too-high";
    pub const NO_TASK: &str = "no-task";
    pub const NOT_BEST: &str = "not-best";
    pub const NO_SIGNAL: &str = "no-signal";
    pub const TOKEN_DRIFT: &str = "token-drift";
}

/// The category of a reason string (`"malformed: turn 3: ..."` -> `"malformed"`).
pub fn category(reason: &str) -> &str {
    reason.split_once(": ").map_or(reason, |(c, _)| c)
}

fn is_true(raw: Option<&str>) -> bool {
    raw == Some("true")
}

/// Evaluate every predicate; returns the reasons the row fails (empty: it passes).
pub fn evaluate(
    row: &RowView<'_>,
    p: &Predicates,
    tokenizer: Option<&dyn Tokenizer>,
) -> Result<Vec<String>, BadRow> {
    let mut reasons = Vec::new();
    if p.completed && !is_true(row.completed()) {
        let why = match row.completed() {
            None => "no `completed` field",
            Some(_) => "`completed` is not true",
        };
        reasons.push(format!("{}: {why}", reason::NOT_COMPLETED));
    }
    if p.no_partial && is_true(row.partial()) {
        reasons.push(format!("{}: `partial` is true", reason::PARTIAL));
    }
    if p.no_truncated
        && let Some(r) = row
            .stop_reason()
            .and_then(crate::format::jsonscan::decode_str)
        && crate::format::outcome::TRUNCATED.contains(&r.as_ref())
    {
        reasons.push(format!("{}: `stop_reason` is {r}", reason::TRUNCATED));
    }
    if p.reward.is_set() {
        match row.reward().and_then(crate::format::groups::reward_of_raw) {
            None => reasons.push(no_reward(row.reward())),
            Some(r) => reasons.extend(p.reward.outside(
                r,
                reason::REWARD_TOO_LOW,
                reason::REWARD_TOO_HIGH,
            )),
        }
    }
    let mut facts = match (&row.conversations, &row.messages) {
        (Some(turns), _) => hermes::facts(turns, row, p, tokenizer)?,
        (None, Some(msgs)) => raw::facts(msgs, row, p, tokenizer)?,
        (None, None) => return Err(BadRow::NoTurns),
    };
    // With a chat template, the row's tokens are those of the rendered row.
    if let Some(tk) = tokenizer.filter(|_| p.needs_tokens())
        && let Some(n) = chat::tokens(row, tk)?
    {
        facts.tokens = n;
    }
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
    if p.alternating
        && let Some(why) = roles::alternation(row)
    {
        reasons.push(format!("{}: {why}", reason::NOT_ALTERNATING));
    }
    reasons.extend(
        p.turns
            .outside(facts.turns, reason::TOO_FEW_TURNS, reason::TOO_MANY_TURNS),
    );
    reasons.extend(p.row_tokens.outside(
        facts.tokens,
        reason::TOO_FEW_TOKENS,
        reason::TOO_MANY_TOKENS,
    ));
    Ok(reasons)
}

/// The reason of a row without a numeric reward (`raw`: its `reward` value, if any).
pub fn no_reward(raw: Option<&str>) -> String {
    match raw {
        None => format!("{}: no `reward` field", reason::NO_REWARD),
        Some(v) => format!("{}: `reward` is not a number ({v})", reason::NO_REWARD),
    }
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

impl Facts {
    /// The facts of a row of `turns` turns so far; `--well-formed` refuses an empty
    /// conversation (`empty` says so).
    fn new(turns: usize, p: &Predicates, empty: &str) -> Facts {
        Facts {
            turns,
            malformed: (p.well_formed && turns == 0).then(|| empty.to_string()),
            ..Facts::default()
        }
    }
}

fn set_once(slot: &mut Option<String>, msg: impl FnOnce() -> String) {
    if slot.is_none() {
        *slot = Some(msg());
    }
}

/// Why a row's tool list is not known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum NoToolList {
    #[error("`tools` is not a valid string")]
    RowToolsNotAString,
    #[error("`tools`: {0}")]
    RowTools(ToolListError),
    #[error("<tools> is never closed in the system turn")]
    SystemUnclosed,
    #[error("system <tools>: {0}")]
    System(crate::format::hermes::ParseError),
    #[error("no <tools> in the system turn and no --tools FILE")]
    NoSystemTools,
    #[error("no `tools` on the row and no --tools FILE")]
    NoRowTools,
}

/// Why one call is not a valid use of a tool (the text after `invalid-tools: ...: `).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum BadCall {
    #[error("no tool list to judge {0:?} ({1})")]
    Unjudged(String, NoToolList),
    #[error("unknown tool {0:?}")]
    UnknownTool(String),
    #[error("arguments of {0:?} are not a JSON object")]
    ArgsNotAnObject(String),
    #[error("call of {0:?} has no arguments")]
    NoArguments(String),
    #[error("call {0} has no function name")]
    NoFunctionName(usize),
    #[error("{0}")]
    Bridge(crate::format::bridge::BridgeError),
    #[error("tool_call runs {0:?}, which was not offered")]
    BridgedUnknown(String),
    #[error("no tool list to judge {0:?}, run through tool_call ({1})")]
    BridgedUnjudged(String, NoToolList),
}

/// Tool names from a row's own `tools` field: a JSON list, or a string holding one.
fn row_tools(raw: &str) -> Result<Vec<String>, NoToolList> {
    let names = if raw.starts_with('"') {
        let inner = crate::format::row::decode_str(raw).ok_or(NoToolList::RowToolsNotAString)?;
        crate::format::model::tool_names(&inner)
    } else {
        crate::format::model::tool_names(raw)
    };
    names.map_err(NoToolList::RowTools)
}

/// The tools a row may call: `--tools FILE`, else its own list; `Unknown` says why
/// there is none.
enum Offered<'p> {
    Global(&'p HashSet<String>),
    Row(Vec<String>),
    Unknown(NoToolList),
}

impl Offered<'_> {
    /// The tools of the row's own `tools` field, or why there are none (`missing`).
    fn of_row(tools: Option<&str>, missing: NoToolList) -> Offered<'static> {
        match tools.map(row_tools) {
            Some(Ok(names)) => Offered::Row(names),
            Some(Err(e)) => Offered::Unknown(e),
            None => Offered::Unknown(missing),
        }
    }

    fn check(&self, name: &str) -> Result<(), BadCall> {
        let known = match self {
            Offered::Global(set) => set.contains(name),
            Offered::Row(list) => list.iter().any(|n| n == name),
            Offered::Unknown(why) => return Err(BadCall::Unjudged(name.into(), why.clone())),
        };
        if known {
            Ok(())
        } else {
            Err(BadCall::UnknownTool(name.into()))
        }
    }

    /// [`Offered::check`], then the arguments: a JSON object (`as_object` reads them);
    /// a `tool_call` bridge call must also name tools that were offered, by the one
    /// bridge rule ([`crate::format::bridge::entries`]).
    fn check_call(
        &self,
        name: &str,
        args: Option<&RawValue>,
        as_object: fn(&RawValue) -> bool,
    ) -> Result<(), BadCall> {
        self.check(name)?;
        let a = match args {
            Some(a) if as_object(a) => a,
            Some(_) => return Err(BadCall::ArgsNotAnObject(name.into())),
            None => return Err(BadCall::NoArguments(name.into())),
        };
        if name != crate::format::bridge::CALL {
            return Ok(());
        }
        let entries = crate::format::bridge::entries(&args_value(a)).map_err(BadCall::Bridge)?;
        for e in entries {
            match self.check(&e.name) {
                Ok(()) => {}
                Err(BadCall::Unjudged(n, why)) => return Err(BadCall::BridgedUnjudged(n, why)),
                Err(_) => return Err(BadCall::BridgedUnknown(e.name)),
            }
        }
        Ok(())
    }
}

/// A call written as JSON (a typed content part's, a LLaMA-Factory `function_call`
/// turn's): its name and arguments, or why it names no tool.
enum JsonCall {
    Named(String, Option<Box<RawValue>>),
    /// Not JSON, or a call that names no tool.
    Bad(String),
}

impl JsonCall {
    /// A call object (`{"name", "arguments"}`, OpenAI's `{"function": {...}}`, or
    /// `{"name", "input"}`), by the one name rule ([`crate::format::model::function_part`]).
    fn of(c: &serde_json::Value) -> JsonCall {
        match crate::format::model::function_part(c, "tool call") {
            Ok(f) => {
                let args = f
                    .function
                    .get("arguments")
                    .or_else(|| f.function.get("input"));
                let raw = args.and_then(|a| RawValue::from_string(a.to_string()).ok());
                JsonCall::Named(f.name, raw)
            }
            Err(e) => JsonCall::Bad(e.to_string()),
        }
    }

    fn check(&self, o: &Offered<'_>) -> Result<(), String> {
        match self {
            JsonCall::Named(name, args) => o
                .check_call(name, args.as_deref(), raw::args_are_object)
                .map_err(|e| e.to_string()),
            JsonCall::Bad(e) => Err(e.clone()),
        }
    }
}

/// The calls of JSON text holding one call or a list of calls.
fn json_calls(text: &str) -> Vec<JsonCall> {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Array(list)) => list.iter().map(JsonCall::of).collect(),
        Ok(one) => vec![JsonCall::of(&one)],
        Err(e) => vec![JsonCall::Bad(format!("calls are not JSON: {e}"))],
    }
}

/// Call arguments as a value: an object, or (OpenAI) a string holding one.
fn args_value(a: &RawValue) -> serde_json::Value {
    let text = match crate::format::row::raw_str(a) {
        Some(inner) => inner.into_owned(),
        None => a.get().to_string(),
    };
    serde_json::from_str(&text).unwrap_or(serde_json::Value::Null)
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

    /// LLaMA-Factory's ShareGPT tool turns: a `function_call` is answered by the
    /// `observation` after it, as a `gpt` call by a `tool` turn.
    #[test]
    fn function_calls_and_observations_pair() {
        let well = Predicates {
            well_formed: true,
            ..Predicates::default()
        };
        let judge = |turns: &[(&str, &str)]| {
            let line = hermes(turns);
            evaluate(&parse_row(line.as_bytes()).unwrap(), &well, None).unwrap()
        };
        let call = r#"{"name": "f", "arguments": {}}"#;
        let two = r#"[{"name": "f", "arguments": {}}, {"name": "g", "arguments": {}}]"#;
        for c in [call, two] {
            let r = judge(&[
                ("human", "q"),
                ("function_call", c),
                ("observation", "{}"),
                ("gpt", "ok"),
            ]);
            assert!(r.is_empty(), "{c}: {r:?}");
        }
        let r = judge(&[("human", "q"), ("function_call", call), ("gpt", "ok")]);
        assert_eq!(
            r,
            ["malformed: turn 2: 1 tool call(s) without a tool turn after them"]
        );
        let r = judge(&[("human", "q"), ("function_call", "not json")]);
        assert_eq!(r.len(), 1);
        assert!(
            r[0].starts_with("malformed: turn 2: calls are not JSON"),
            "{r:?}"
        );
        let r = judge(&[("human", "q"), ("observation", "x"), ("gpt", "y")]);
        assert_eq!(
            r,
            ["malformed: turn 2: observation turn does not follow a function_call turn"]
        );
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
}

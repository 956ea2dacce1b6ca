//! What one input line tells the report: a trajectory row (its lengths, tools, status,
//! compression metrics, run usage, reward; a `--columns core` row's from its
//! `metadata`), a group of scored rollouts (one row per rollout), a reject of an earlier
//! stage, a failure line of traj-run, or a tombstone of the reference's runner. Every rule is the format layer's or the stage's that wrote the row:
//! turns and tool calls are read as traj-normalize reads them
//! ([`crate::stage::normalize::read`]), tokens are counted as traj-compress counts a
//! turn ([`crate::stage::compress::row::for_each_text`], so the budget line compares
//! like with like), tool errors by the reference's success rule
//! ([`crate::format::stats::tool_stats`]).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::format::model::{Trajectory, Turn};
use crate::format::repair::Mode;
use crate::format::stats::tool_stats;
use crate::format::tokens::Tokenizer;
use crate::stage::compress::row::{Row, for_each_text, turn_text};
use crate::stage::compress::summary::PREFIX;
use crate::stage::normalize::Tally;
use crate::stage::normalize::read::{ReadCtx, read_messages, row_tools};

/// What the line is.
pub enum Line {
    Row(Box<RowLine>),
    /// A group of scored rollouts (traj's `--to groups` row, an Atropos
    /// `ScoredDataGroup`): one row per rollout, as traj-normalize reads them
    /// ([`crate::stage::normalize::groups::rollouts`]).
    Group(Vec<RowLine>),
    Reject(RejectLine),
    Failure(FailureLine),
    /// A tombstone of the reference's runner (`{"prompt_index", "discarded":
    /// "no_reasoning", "prompt"}`: a prompt dropped for having no reasoning), with its
    /// reason; traj-merge drops and counts such rows the same way.
    Discarded(String),
}

/// A trajectory row: its facts and the row itself (rendered only if it is embedded).
pub struct RowLine {
    pub facts: Facts,
    pub row: Row,
    /// The turns read as a trajectory, or why they cannot be.
    pub traj: Result<Trajectory, String>,
}

/// A line of a rejects file (`{"stage", "source", "line", "reasons", "raw"...}`).
pub struct RejectLine {
    pub stage: String,
    /// The category of each reason (the text before `: `, as traj-filter's `--stats`).
    pub reasons: Vec<String>,
}

impl Line {
    /// The trajectory rows of the line: one, a group's rollouts, or none.
    pub fn rows(&self) -> &[RowLine] {
        match self {
            Line::Row(r) => std::slice::from_ref(&**r),
            Line::Group(rs) => rs,
            _ => &[],
        }
    }
}

/// A line of traj-run's `failures.jsonl`.
pub struct FailureLine {
    pub class: String,
    pub error: String,
}

/// Compression facts of a row that carries `compression_metrics`.
#[derive(Debug, Clone, Default)]
pub struct Compression {
    pub before: u64,
    pub after: u64,
    pub was_compressed: bool,
    pub still_over: bool,
    pub reason: Option<String>,
    /// `compression_region` (start, end) in the uncompressed turns.
    pub region: Option<(usize, usize)>,
}

/// Run facts of a raw traj-run record.
#[derive(Debug, Clone, Default)]
pub struct Usage {
    pub tokens: Option<u64>,
    pub cost: Option<f64>,
    pub api_calls: Option<u64>,
    pub duration_ms: Option<u64>,
}

/// The facts of one trajectory row.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// Entries of the message list (what traj-filter's --max-turns counts).
    pub turns: u64,
    pub tokens: u64,
    pub calls: u64,
    pub assistant_turns: u64,
    pub reasoning_turns: u64,
    /// Per tool: calls, results that failed, results that succeeded.
    pub tools: BTreeMap<String, (u64, u64, u64)>,
    pub tool_errors: u64,
    pub completed: Option<bool>,
    pub partial: Option<bool>,
    pub stop_reason: Option<String>,
    pub compression: Option<Compression>,
    /// Index in the message list of the `[CONTEXT SUMMARY]:` turn.
    pub summary_at: Option<usize>,
    pub reward: Option<f64>,
    pub rollout_index: Option<i64>,
    /// The task whose rollouts are grouped for pass@k, by the one rule of traj-filter's
    /// `--stats` and `statistics.json` ([`crate::format::groups::task_and_reward_of_line`]).
    pub task: Option<String>,
    pub usage: Option<Usage>,
    /// Why the turns could not be read as a trajectory (counted, shown raw).
    pub unreadable: Option<String>,
}

impl Facts {
    /// `completed`, `partial`, `not completed` or `unknown` (no `completed` field).
    pub fn status(&self) -> &'static str {
        match (self.completed, self.partial) {
            (_, Some(true)) => "partial",
            (Some(true), _) => "completed",
            (Some(false), _) => "not completed",
            (None, _) => "unknown",
        }
    }

    /// Share of assistant turns with reasoning, in percent (`None` without any).
    pub fn reasoning_pct(&self) -> Option<i64> {
        (self.assistant_turns > 0)
            .then(|| (self.reasoning_turns * 100 / self.assistant_turns) as i64)
    }
}

/// Read one line (`obj`, the JSON object of `line`) for the report; `Err` says why it
/// is none of a row, a reject, a failure line or a tombstone.
pub fn read_line(line: &[u8], obj: Map<String, Value>, tk: &dyn Tokenizer) -> Result<Line, String> {
    let is_list = |k: &str| obj.get(k).is_some_and(Value::is_array);
    // The one tombstone rule (`format::row::tombstone_mark`), whatever else it holds.
    if let Some(why) = obj
        .get("discarded")
        .filter(|d| crate::format::row::marks_a_tombstone(&d.to_string()))
    {
        return Ok(Line::Discarded(match why {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }));
    }
    if crate::stage::normalize::groups::is_group(&obj) {
        let rollouts = crate::stage::normalize::groups::rollouts(obj).map_err(|e| e.to_string())?;
        return Ok(Line::Group(
            rollouts
                .into_iter()
                .map(|r| {
                    let line = serde_json::to_vec(&r).expect("a map serialises");
                    read_row(&line, r, tk)
                })
                .collect(),
        ));
    }
    if is_list("conversations") || is_list("messages") {
        return Ok(Line::Row(Box::new(read_row(line, obj, tk))));
    }
    if is_list("reasons") && (obj.contains_key("raw") || obj.contains_key("raw_base64")) {
        let stage = str_field(&obj, "stage").unwrap_or_else(|| "?".into());
        let reasons = obj["reasons"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                let r = r.as_str().unwrap_or("?");
                crate::stage::filter::category(r).to_string()
            })
            .collect();
        return Ok(Line::Reject(RejectLine { stage, reasons }));
    }
    if let Some(class) = str_field(&obj, "class")
        && (obj.contains_key("prompt_hash") || obj.contains_key("error"))
    {
        return Ok(Line::Failure(FailureLine {
            class,
            error: str_field(&obj, "error").unwrap_or_default(),
        }));
    }
    Err(
        match ["history", "trajectory", "chat", "dialog"]
            .into_iter()
            .find(|k| is_list(k))
        {
            Some(k) => format!(
                "row has neither `conversations` nor `messages` (its turns look like `{k}`: run traj-normalize --messages-field {k} first)"
            ),
            None => "not a row (no `conversations` or `messages` list), a reject or a failure line"
                .into(),
        },
    )
}

fn str_field(obj: &Map<String, Value>, k: &str) -> Option<String> {
    obj.get(k).and_then(Value::as_str).map(str::to_string)
}

fn u64_field(obj: &Map<String, Value>, k: &str) -> Option<u64> {
    obj.get(k).and_then(Value::as_u64)
}

fn read_row(line: &[u8], obj: Map<String, Value>, tk: &dyn Tokenizer) -> RowLine {
    // A `--columns core` row keeps its run fields in its `metadata` string: read from
    // there, member by member, when the row has none of its own (as traj-filter reads
    // them).
    let meta = crate::format::row::core_metadata(&obj);
    let get = |k: &str| obj.get(k).or_else(|| meta.as_ref()?.get(k));
    let (task, reward) = crate::format::groups::task_and_reward_of_line(line).unwrap_or_default();
    let mut f = Facts {
        completed: get("completed").and_then(Value::as_bool),
        partial: get("partial").and_then(Value::as_bool),
        stop_reason: get("stop_reason")
            .and_then(Value::as_str)
            .map(str::to_string),
        reward,
        rollout_index: get("rollout_index").and_then(Value::as_i64),
        task,
        compression: get("compression_metrics")
            .and_then(Value::as_object)
            .map(compression),
        usage: usage(&get),
        ..Facts::default()
    };
    let tools = row_tools(&obj, &mut Default::default());
    let row = Row::locate(obj).expect("checked: a message list");
    let shape = row.shape;
    f.turns = row.turns().len() as u64;
    for t in row.turns() {
        for_each_text(t, shape, &mut |s| f.tokens += tk.count(s) as u64);
    }
    f.summary_at = row
        .turns()
        .iter()
        .position(|t| turn_text(t, shape).trim_start().starts_with(PREFIX));
    let traj = match tools {
        Err(e) => Err(format!("`tools`: {e}")),
        Ok(tools) => read_messages(
            row.turns().to_vec(),
            &[],
            tools,
            &mut ReadCtx::new(Mode::Repair, &mut Tally::default()),
        )
        .map_err(|e| e.to_string()),
    };
    match &traj {
        Ok(t) => {
            for turn in &t.turns {
                if let Turn::Gpt(g) = turn {
                    f.assistant_turns += 1;
                    f.calls += g.tool_calls.len() as u64;
                    if g.reasoning.as_deref().is_some_and(|r| !r.trim().is_empty()) {
                        f.reasoning_turns += 1;
                    }
                }
            }
            for (name, c) in tool_stats(t, []) {
                if c.count > 0 || c.failure > 0 || c.success > 0 {
                    f.tool_errors += c.failure;
                    f.tools.insert(name, (c.count, c.failure, c.success));
                }
            }
        }
        Err(e) => f.unreadable = Some(e.clone()),
    }
    RowLine {
        facts: f,
        row,
        traj,
    }
}

fn compression(m: &Map<String, Value>) -> Compression {
    let b = |k: &str| m.get(k).and_then(Value::as_bool).unwrap_or(false);
    let region = m
        .get("compression_region")
        .and_then(Value::as_object)
        .and_then(|r| {
            let s = r.get("start_idx")?.as_i64()?;
            let e = r.get("end_idx")?.as_i64()?;
            (s >= 0 && e >= s).then_some((s as usize, e as usize))
        });
    Compression {
        before: u64_field(m, "original_tokens").unwrap_or(0),
        after: u64_field(m, "compressed_tokens").unwrap_or(0),
        was_compressed: b("was_compressed"),
        still_over: b("still_over_limit"),
        reason: str_field(m, "still_over_limit_reason"),
        region,
    }
}

/// `usage`, `api_calls` and `timings.duration_ms` of a traj-run record (`get`: a member
/// of the row).
fn usage<'v>(get: &impl Fn(&str) -> Option<&'v Value>) -> Option<Usage> {
    let u = get("usage").and_then(Value::as_object);
    let tokens = u.and_then(|u| {
        u64_field(u, "total_tokens").or_else(|| {
            let p = u64_field(u, "prompt_tokens")?;
            Some(p.saturating_add(u64_field(u, "completion_tokens").unwrap_or(0)))
        })
    });
    let usage = Usage {
        tokens,
        cost: u.and_then(|u| u.get("cost")).and_then(Value::as_f64),
        api_calls: get("api_calls").and_then(Value::as_u64),
        duration_ms: get("timings")
            .and_then(|t| t.get("duration_ms"))
            .and_then(Value::as_u64),
    };
    (usage.tokens.is_some() || usage.api_calls.is_some() || usage.duration_ms.is_some())
        .then_some(usage)
}

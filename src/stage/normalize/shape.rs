//! Training shape: the choices that make normalised rows fit a trainer's loader, one
//! row at a time: joining consecutive turns of one role (`--merge-consecutive`), the
//! uniform `--columns core` layout, and how tool-call arguments and the tool list are
//! spelled (`--arguments`, `--tools-as`).
//!
//! Merge rule (`--merge-consecutive`), applied to the trajectory before it is written:
//! - human + human: one human turn, the texts joined with `"\n\n"`;
//! - gpt + gpt, when the earlier turn made no tool call: one gpt turn whose reasoning is
//!   the two reasonings joined with `"\n\n"` (a missing one is left out), whose content
//!   is the two contents joined with `"\n\n"` (an empty one is left out), and whose calls
//!   are the later turn's. A gpt turn that made calls is never merged with the next gpt
//!   turn (its calls would move after the later text); `traj-filter --alternating`
//!   rejects such rows;
//! - tool + tool: one tool turn, the responses concatenated in order.

use clap::ValueEnum;

use crate::format::model::{Kept, Trajectory, Turn};

/// Which columns a row has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum Columns {
    /// The message list at its place, every other field passed through.
    #[default]
    All,
    /// Exactly `conversations` (or `messages`), `tools`, `tool_stats`,
    /// `tool_error_counts` and `metadata` (every other field, as one JSON string).
    Core,
}

/// How `--to openai` writes `tool_calls[].function.arguments`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum Arguments {
    /// A JSON string (the OpenAI API's spelling).
    #[default]
    String,
    /// The JSON object itself (what LLaMA-Factory and Qwen2.5-style templates expect).
    Object,
}

/// What becomes of an OpenAI call whose `arguments` string is not JSON (`--bad-arguments`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum BadArguments {
    /// The row is rejected, its reason naming the message and the call.
    #[default]
    Reject,
    /// The arguments become `{}` (the reference's rule), counted as `non_json_arguments`.
    Empty,
}

/// How the `tools` column is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ToolsAs {
    /// A list of OpenAI tool schemas.
    List,
    /// One JSON string holding that list (one Arrow type whatever the schemas).
    String,
}

/// Join `b` onto `a` with `"\n\n"`, leaving an empty side out.
fn join(a: &mut String, b: &str) {
    if b.is_empty() {
        return;
    }
    if !a.is_empty() {
        a.push_str("\n\n");
    }
    a.push_str(b);
}

/// Join consecutive turns of one role by the rule in the module docs. Turns that carry
/// kept keys are not joined with another human or gpt turn (their keys would mix), a
/// message kept whole between two turns keeps them apart, and what is kept follows its
/// turn to its new place.
pub fn merge_consecutive(traj: &mut Trajectory) {
    let turns = std::mem::take(&mut traj.turns);
    let mut out: Vec<Turn> = Vec::with_capacity(turns.len());
    // Per old turn: its new index, and how many results come before its own there.
    let mut place: Vec<(usize, usize)> = Vec::with_capacity(turns.len());
    let mut last_keyed = false;
    for (i, t) in turns.into_iter().enumerate() {
        let keyed = traj.keys_of(i, None).is_some();
        let apart = traj.messages_at(i).next().is_some();
        let joinable =
            !apart && !(matches!(t, Turn::Human(_) | Turn::Gpt(_)) && (keyed || last_keyed));
        let at = out.len().saturating_sub(1);
        match (out.last_mut(), t) {
            (Some(Turn::Human(a)), Turn::Human(b)) if joinable => {
                join(a, &b);
                place.push((at, 0));
            }
            (Some(Turn::Tool(a)), Turn::Tool(b)) if joinable => {
                place.push((at, a.len()));
                a.extend(b);
            }
            (Some(Turn::Gpt(a)), Turn::Gpt(b)) if joinable && a.tool_calls.is_empty() => {
                a.reasoning = match (a.reasoning.take(), b.reasoning) {
                    (Some(mut x), Some(y)) => {
                        join(&mut x, &y);
                        Some(x)
                    }
                    (x, y) => x.or(y),
                };
                join(&mut a.content, &b.content);
                a.tool_calls = b.tool_calls;
                place.push((at, 0));
            }
            (_, t) => {
                place.push((out.len(), 0));
                out.push(t);
                last_keyed = false;
            }
        }
        last_keyed |= keyed;
    }
    let n = out.len();
    for k in &mut traj.kept {
        match k {
            Kept::Keys { turn, result, .. } => {
                let (to, before) = place[*turn];
                *turn = to;
                *result = result.map(|r| r + before);
            }
            Kept::Message { at, .. } => *at = place.get(*at).map_or(n, |p| p.0),
        }
    }
    traj.turns = out;
}

/// True when the row has anything to do with tools: tools offered, a call made or a
/// result returned. Rows without get no function-calling system prompt.
pub fn uses_tools(traj: &Trajectory) -> bool {
    !traj.tools.is_empty()
        || traj.turns.iter().any(|t| match t {
            Turn::Gpt(g) => !g.tool_calls.is_empty(),
            Turn::Tool(_) => true,
            Turn::Human(_) => false,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::model::{GptTurn, ToolCall, ToolResult};
    use serde_json::json;

    fn gpt(r: Option<&str>, c: &str, calls: usize) -> Turn {
        Turn::Gpt(GptTurn {
            reasoning: r.map(str::to_string),
            content: c.to_string(),
            tool_calls: (0..calls)
                .map(|_| ToolCall {
                    id: None,
                    name: "t".into(),
                    arguments: json!({}),
                })
                .collect(),
        })
    }

    fn res(id: &str) -> ToolResult {
        ToolResult {
            tool_call_id: id.into(),
            name: "t".into(),
            content: json!("ok"),
        }
    }

    #[test]
    fn merges_by_the_documented_rule() {
        let mut t = Trajectory {
            turns: vec![
                Turn::Human("a".into()),
                Turn::Human("b".into()),
                gpt(Some("r1"), "x", 0),
                gpt(None, "", 1),
                Turn::Tool(vec![res("1")]),
                Turn::Tool(vec![res("2")]),
                gpt(None, "y", 1),
                gpt(None, "z", 0),
            ],
            ..Default::default()
        };
        merge_consecutive(&mut t);
        assert_eq!(
            t.turns,
            vec![
                Turn::Human("a\n\nb".into()),
                gpt(Some("r1"), "x", 1),
                Turn::Tool(vec![res("1"), res("2")]),
                gpt(None, "y", 1),
                gpt(None, "z", 0),
            ]
        );
        assert!(uses_tools(&t));
        let plain = Trajectory {
            turns: vec![Turn::Human("a".into()), gpt(None, "b", 0)],
            ..Default::default()
        };
        assert!(!uses_tools(&plain));
    }
}

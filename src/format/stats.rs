//! `tool_stats`: how often each tool of a trajectory was called, and how many of its
//! results were a success or a failure by the one tool-success rule
//! ([`crate::format::model::classify_result`]). A bridge call counts for the real tool it
//! names ([`crate::format::bridge`]), which is why this sits above both.

use std::collections::BTreeMap;

use crate::format::bridge::counted_name;
use crate::format::model::{Outcome, ToolCall, Trajectory, Turn, classify_result};

/// Calls and results of one tool in one trajectory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ToolCount {
    /// Calls made.
    pub count: u64,
    /// Results judged a success by [`classify_result`].
    pub success: u64,
    /// Results judged a failure.
    pub failure: u64,
}

/// Per-tool counts over `traj`, with a key for every tool in `known` and every tool
/// offered to the trajectory (zero when unused) plus any tool that was called without
/// being offered. Keys are sorted, so every row with the same tool set has the same
/// key order.
///
/// A result counts for the first not-yet-answered call of the preceding `Gpt` turn
/// whose name equals the result's name; a result that answers no call (for example
/// `"unknown"`) adds nothing, and a call without a result adds to `count` only. A
/// `tool_call` bridge call that names one real tool counts (with its result) for that
/// tool ([`counted_name`]).
pub fn tool_stats<'a>(
    traj: &Trajectory,
    known: impl IntoIterator<Item = &'a str>,
) -> BTreeMap<String, ToolCount> {
    let mut stats: BTreeMap<String, ToolCount> = BTreeMap::new();
    for name in known {
        stats.entry(name.to_string()).or_default();
    }
    for t in &traj.tools {
        stats.entry(t.name.clone()).or_default();
    }
    let mut prev_calls: &[ToolCall] = &[];
    // The name each call of `prev_calls` counts under (a bridge call: its real tool).
    let mut counted: Vec<String> = Vec::new();
    for turn in &traj.turns {
        match turn {
            Turn::Gpt(g) => {
                counted.clear();
                for c in &g.tool_calls {
                    let name = counted_name(&c.name, &c.arguments);
                    stats.entry(name.to_string()).or_default().count += 1;
                    counted.push(name.into_owned());
                }
                prev_calls = &g.tool_calls;
            }
            Turn::Tool(results) => {
                let mut answered = vec![false; prev_calls.len()];
                for r in results {
                    let slot = prev_calls
                        .iter()
                        .enumerate()
                        .position(|(k, c)| !answered[k] && c.name == r.name);
                    if let Some(k) = slot {
                        answered[k] = true;
                        let e = stats.entry(counted[k].clone()).or_default();
                        match classify_result(&r.content) {
                            Outcome::Success => e.success += 1,
                            Outcome::Failure => e.failure += 1,
                        }
                    }
                }
                prev_calls = &[];
            }
            Turn::Human(_) => prev_calls = &[],
        }
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::model::{GptTurn, ToolResult, ToolSpec};
    use serde_json::{Value, json};

    #[test]
    fn stats_cover_known_offered_and_called_tools() {
        let call = |n: &str| ToolCall {
            id: None,
            name: n.into(),
            arguments: json!({}),
        };
        let res = |n: &str, c: Value| ToolResult {
            tool_call_id: String::new(),
            name: n.into(),
            content: c,
        };
        let traj = Trajectory {
            tools: vec![ToolSpec {
                name: "offered".into(),
                description: String::new(),
                parameters: json!({}),
            }],
            turns: vec![
                Turn::Human("hi".into()),
                Turn::Gpt(GptTurn {
                    tool_calls: vec![call("a"), call("a"), call("b")],
                    ..Default::default()
                }),
                Turn::Tool(vec![
                    res("a", json!({"error": "x"})),
                    res("a", json!("ok")),
                    res("unknown", json!("ok")),
                ]),
            ],
            ..Default::default()
        };
        let s = tool_stats(&traj, ["zeta"]);
        let keys: Vec<&str> = s.keys().map(String::as_str).collect();
        assert_eq!(keys, ["a", "b", "offered", "zeta"]);
        assert_eq!(
            s["a"],
            ToolCount {
                count: 2,
                success: 1,
                failure: 1
            }
        );
        assert_eq!(
            s["b"],
            ToolCount {
                count: 1,
                success: 0,
                failure: 0
            }
        );
    }
}

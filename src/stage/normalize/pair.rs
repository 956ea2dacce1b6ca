//! How the results of a tool turn are paired with the calls right before them: by id,
//! else by the tool's name, else by place ([`Pending`]); which calls' ids the Hermes
//! text cannot carry ([`count_unanswered_ids`]); the ids `--to openai` made up, read as
//! no id ([`drop_made_up_ids`]). The order the paired results are written in is
//! [`super::order`]'s.

use super::keep::{self, Part};
use crate::format::model::{GptTurn, ToolCall, ToolResult, Turn};

/// The name of a result that answers no call of the turn before it, when it has no
/// name of its own.
pub(super) const UNANSWERING: &str = "unknown";

/// The calls of the last assistant turn, for pairing the results that follow.
pub(super) struct Pending {
    calls: Vec<(Option<String>, String)>,
    answered: Vec<bool>,
    has_ids: bool,
    /// The ids `--to openai` made up for these calls ([`drop_made_up_ids`]): a result
    /// with one of them has no id of its own.
    pub(super) made_up: Vec<String>,
}

impl Pending {
    pub(super) fn new(calls: &[ToolCall]) -> Option<Pending> {
        if calls.is_empty() {
            return None;
        }
        Some(Pending {
            calls: calls
                .iter()
                .map(|c| (c.id.clone(), c.name.clone()))
                .collect(),
            answered: vec![false; calls.len()],
            has_ids: calls.iter().any(|c| c.id.is_some()),
            made_up: Vec::new(),
        })
    }

    /// Resolve the name of a result with this id and own name (either may be empty),
    /// and the id of the call it answers.
    fn pair(&mut self, id: &str, own_name: &str) -> (String, Option<String>) {
        let slot = if !id.is_empty() && self.has_ids {
            let by_id = |only_open: bool| {
                (0..self.calls.len()).find(|&k| {
                    self.calls[k].0.as_deref() == Some(id) && (!only_open || !self.answered[k])
                })
            };
            by_id(true).or_else(|| by_id(false))
        } else if !own_name.is_empty() {
            // By its name; a name no open call has (`browser.search` for `search`): by
            // its place, as an unnamed result. But `unknown` is the name a result that
            // answers no call is written with: it stays one, and takes no call's place.
            (0..self.calls.len())
                .find(|&k| !self.answered[k] && self.calls[k].1 == own_name)
                .or_else(|| {
                    (own_name != UNANSWERING)
                        .then(|| (0..self.calls.len()).find(|&k| !self.answered[k]))
                        .flatten()
                })
        } else {
            (0..self.calls.len()).find(|&k| !self.answered[k])
        };
        match slot {
            Some(k) => {
                self.answered[k] = true;
                (self.calls[k].1.clone(), self.calls[k].0.clone())
            }
            None if own_name.is_empty() => (UNANSWERING.to_string(), None),
            None => (own_name.to_string(), None),
        }
    }
}

/// Count the ids of calls that no result of the tool turn after them answers by id: the
/// Hermes text carries a call's id only in its result's `tool_call_id`.
pub(super) fn count_unanswered_ids(turns: &[Turn], parts: &mut keep::Parts) {
    for (i, t) in turns.iter().enumerate() {
        let Turn::Gpt(g) = t else { continue };
        let results: &[ToolResult] = match turns.get(i + 1) {
            Some(Turn::Tool(rs)) => rs,
            _ => &[],
        };
        for c in &g.tool_calls {
            if let Some(id) = &c.id
                && !results.iter().any(|r| &r.tool_call_id == id)
            {
                parts.add(Part::UnansweredCallId);
            }
        }
    }
}

/// The ids `--to openai` makes up for calls without one (`call_<turn>_<k>`, `turn` the
/// gpt turn's place and `k` the call's) are read as no id: each call of `g` with the id of
/// its own place loses it, and the ids are returned (its results' ids are cleared when
/// they are paired), so that Hermes → OpenAI → Hermes gives back results without ids.
pub(super) fn drop_made_up_ids(g: &mut GptTurn, turn: usize) -> Vec<String> {
    let mut made_up = Vec::new();
    for (k, c) in g.tool_calls.iter_mut().enumerate() {
        if c.id.as_deref() == Some(format!("call_{turn}_{k}").as_str()) {
            made_up.extend(c.id.take());
        }
    }
    made_up
}

/// Pair `results` with the calls of `p` (LLaMA-Factory's results, `lf`, take the id of
/// the call they answer) and add them to the tool turn at the end of `turns`, or to a new
/// one.
pub(super) fn push_results(
    turns: &mut Vec<Turn>,
    mut results: Vec<ToolResult>,
    p: &mut Pending,
    lf: bool,
    parts: &mut keep::Parts,
) {
    for r in &mut results {
        if p.made_up.contains(&r.tool_call_id) {
            r.tool_call_id.clear();
        }
        let (name, call_id) = p.pair(&r.tool_call_id, &r.name);
        if !r.name.is_empty() && r.name != name {
            parts.add(Part::ToolResultName);
        }
        r.name = name;
        // LLaMA-Factory's results carry no id: they answer their call's.
        if lf
            && r.tool_call_id.is_empty()
            && let Some(id) = call_id
        {
            r.tool_call_id = id;
        }
    }
    match turns.last_mut() {
        Some(Turn::Tool(group)) => group.extend(results),
        _ => turns.push(Turn::Tool(results)),
    }
}

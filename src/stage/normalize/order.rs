//! The results of one step in the order of the calls they answer.
//!
//! An OpenAI reply's parallel calls carry ids, and its tool messages may come in any
//! order (`c_b`'s result before `c_a`'s); results without ids name their tool instead
//! (`{"role": "tool", "name": "get_time"}`, a Hermes `<tool_response>` of another
//! writer). Hermes text, LLaMA-Factory's turns and every reader of them (the reference,
//! LLaMA-Factory's templates, `traj-filter --well-formed`) pair the k-th result with the
//! k-th call: the calls' ids are not in the text. So a tool turn whose results every
//! answer a distinct call is put in the order of those calls (the keys kept of each
//! result move with it); reading the written row back pairs each result with its own
//! call again, and `--to openai` gives every call its own id. A result answers the call
//! with its id; a result without an id, the first call not yet answered of the name its
//! reading gave it ([`super::pair::Pending`]'s rule: its own name, else its place). A
//! result that answers no call goes after those that do, so that none takes the place
//! of a call when the text is read back.

use crate::format::model::{Kept, Turn};

use crate::format::model::{GptTurn, ToolResult};

/// The order the results `rs` of the calls of `g` are written in, `order[new] = old`;
/// `None` when they already follow their calls. A result that answers no call goes
/// after those that do (their places are the calls'), in its order among such results.
pub(super) fn call_order(g: &GptTurn, rs: &[ToolResult]) -> Option<Vec<usize>> {
    // The call each result answers, by id, else by the name it was paired by.
    let mut taken = vec![false; g.tool_calls.len()];
    let mut slots = Vec::with_capacity(rs.len());
    for r in rs {
        let k = (0..g.tool_calls.len()).find(|&k| {
            !taken[k]
                && if r.tool_call_id.is_empty() {
                    g.tool_calls[k].name == r.name
                } else {
                    g.tool_calls[k].id.as_deref() == Some(&r.tool_call_id)
                }
        });
        if let Some(k) = k {
            taken[k] = true;
        }
        slots.push(k.unwrap_or(usize::MAX));
    }
    if slots.is_sorted() {
        return None;
    }
    let mut order: Vec<usize> = (0..rs.len()).collect();
    order.sort_by_key(|&old| slots[old]);
    Some(order)
}

/// Put the results of every tool turn in the order of the calls they answer, and
/// renumber the kept keys of the results moved.
pub(super) fn results_in_call_order(turns: &mut [Turn], kept: &mut [Kept]) {
    for ti in 1..turns.len() {
        let (before, after) = turns.split_at_mut(ti);
        let (Turn::Gpt(g), Turn::Tool(rs)) = (&before[ti - 1], &mut after[0]) else {
            continue;
        };
        let Some(order) = call_order(g, rs) else {
            continue;
        };
        // `order[new] = old`, and `place[old] = new`.
        let mut place = vec![0; rs.len()];
        for (new, &old) in order.iter().enumerate() {
            place[old] = new;
        }
        let mut old: Vec<Option<_>> = std::mem::take(rs).into_iter().map(Some).collect();
        rs.extend(order.iter().map(|&o| old[o].take().expect("a permutation")));
        for k in kept.iter_mut() {
            if let Kept::Keys {
                turn,
                result: Some(r),
                ..
            } = k
                && *turn == ti
                && *r < place.len()
            {
                *r = place[*r];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::model::{GptTurn, KeptValue, ToolCall, ToolResult};
    use serde_json::json;

    fn call(id: &str, path: &str) -> ToolCall {
        ToolCall {
            id: Some(id.into()),
            name: "read_file".into(),
            arguments: json!({ "path": path }),
        }
    }

    fn result(id: &str, out: &str) -> ToolResult {
        ToolResult {
            tool_call_id: id.into(),
            name: "read_file".into(),
            content: json!(out),
        }
    }

    fn keys(v: i64) -> Kept {
        let mut keys = crate::format::model::KeptKeys::new();
        keys.insert("n".into(), KeptValue::Parsed(json!(v)));
        Kept::Keys {
            turn: 2,
            result: Some(v as usize),
            keys,
        }
    }

    #[test]
    fn results_follow_their_calls_and_keep_their_keys() {
        let gpt = Turn::Gpt(GptTurn {
            tool_calls: vec![call("a", "a.txt"), call("b", "b.txt"), call("c", "c.txt")],
            ..GptTurn::default()
        });
        let mut turns = vec![
            Turn::Human("q".into()),
            gpt.clone(),
            Turn::Tool(vec![result("c", "C"), result("a", "A"), result("b", "B")]),
        ];
        let mut kept = vec![keys(0), keys(1), keys(2)];
        results_in_call_order(&mut turns, &mut kept);
        let Turn::Tool(rs) = &turns[2] else { panic!() };
        let ids: Vec<_> = rs.iter().map(|r| r.tool_call_id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c"]);
        // The keys of the result first read ("c", n 0) are now those of result 2.
        let at: Vec<_> = kept
            .iter()
            .map(|k| match k {
                Kept::Keys { result, keys, .. } => (result.unwrap(), keys["n"].to_value()),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(at, [(2, json!(0)), (0, json!(1)), (1, json!(2))]);

        // A result that answers no call leaves the turn as it was.
        let mut turns = vec![
            Turn::Human("q".into()),
            gpt.clone(),
            Turn::Tool(vec![result("b", "B"), result("z", "Z")]),
        ];
        let before = turns.clone();
        results_in_call_order(&mut turns, &mut []);
        assert_eq!(turns, before);
        // A result without an id answers the first open call of its name.
        let mut turns = vec![
            Turn::Human("q".into()),
            gpt,
            Turn::Tool(vec![result("b", "B"), result("", "A"), result("", "C")]),
        ];
        results_in_call_order(&mut turns, &mut []);
        let Turn::Tool(rs) = &turns[2] else { panic!() };
        let outs: Vec<_> = rs.iter().map(|r| r.content.clone()).collect();
        assert_eq!(outs, [json!("A"), json!("B"), json!("C")]);
    }

    #[test]
    fn results_named_but_without_ids_follow_their_calls() {
        let named = |name: &str| ToolCall {
            id: None,
            name: name.into(),
            arguments: json!({}),
        };
        let answer = |name: &str, out: &str| ToolResult {
            tool_call_id: String::new(),
            name: name.into(),
            content: json!(out),
        };
        let mut turns = vec![
            Turn::Human("q".into()),
            Turn::Gpt(GptTurn {
                tool_calls: vec![named("get_weather"), named("get_time"), named("get_time")],
                ..GptTurn::default()
            }),
            Turn::Tool(vec![
                answer("get_time", "14:05"),
                answer("get_weather", "sunny"),
                answer("get_time", "UTC"),
            ]),
        ];
        results_in_call_order(&mut turns, &mut []);
        let Turn::Tool(rs) = &turns[2] else { panic!() };
        let got: Vec<_> = rs
            .iter()
            .map(|r| (r.name.as_str(), r.content.clone()))
            .collect();
        // Results of one name keep their order among themselves.
        assert_eq!(
            got,
            [
                ("get_weather", json!("sunny")),
                ("get_time", json!("14:05")),
                ("get_time", json!("UTC"))
            ]
        );
    }
}

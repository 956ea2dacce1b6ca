//! The results of one step in the order of the calls they answer.
//!
//! An OpenAI reply's parallel calls carry ids, and its tool messages may come in any
//! order (`c_b`'s result before `c_a`'s). Hermes text, LLaMA-Factory's turns and every
//! reader of them (the reference, LLaMA-Factory's templates, `traj-filter --well-formed`)
//! pair the k-th result with the k-th call: the calls' ids are not in the text. So a tool
//! turn whose results every answer a distinct call by id is put in the order of those
//! calls (the keys kept of each result move with it); reading the written row back pairs
//! each result with its own call again, and `--to openai` gives every call its own id.
//! A turn with a result that answers no call by id is left as it was read.

use crate::format::model::{Kept, Turn};

/// Put the results of every tool turn in the order of the calls they answer by id, and
/// renumber the kept keys of the results moved.
pub(super) fn results_in_call_order(turns: &mut [Turn], kept: &mut [Kept]) {
    for ti in 1..turns.len() {
        let (before, after) = turns.split_at_mut(ti);
        let (Turn::Gpt(g), Turn::Tool(rs)) = (&before[ti - 1], &mut after[0]) else {
            continue;
        };
        // The call each result answers, by id; none when a result answers no call.
        let mut taken = vec![false; g.tool_calls.len()];
        let mut slots = Vec::with_capacity(rs.len());
        for r in rs.iter() {
            let slot = (!r.tool_call_id.is_empty())
                .then(|| {
                    (0..g.tool_calls.len()).find(|&k| {
                        !taken[k] && g.tool_calls[k].id.as_deref() == Some(&r.tool_call_id)
                    })
                })
                .flatten();
            let Some(k) = slot else {
                slots.clear();
                break;
            };
            taken[k] = true;
            slots.push(k);
        }
        if slots.len() != rs.len() || slots.is_sorted() {
            continue;
        }
        // `order[new] = old`, and `place[old] = new`.
        let mut order: Vec<usize> = (0..rs.len()).collect();
        order.sort_by_key(|&old| slots[old]);
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

        // A result that answers no call by id leaves the turn as it was.
        let mut turns = vec![
            Turn::Human("q".into()),
            gpt,
            Turn::Tool(vec![result("b", "B"), result("", "A")]),
        ];
        let before = turns.clone();
        results_in_call_order(&mut turns, &mut []);
        assert_eq!(turns, before);
    }
}

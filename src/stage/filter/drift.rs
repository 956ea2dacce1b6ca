//! `traj-filter --retokenize-check`: the rows whose sampled tokens (the `logprobs` that
//! `traj-run --logprobs` keeps on each assistant message) are not the tokens the model's
//! tokenizer makes of their own text ([`crate::format::tokens::pieces`]).

use crate::format::row::RowView;
use crate::format::tokens::pieces::{Pieces, sampled};

/// What the check found in one row.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Checked {
    /// Assistant turns with sampled tokens.
    pub turns: u64,
    /// Of them, turns whose tokens drift.
    pub drifted: u64,
}

/// Check every assistant message of a raw record that carries logprobs; the first
/// drift (`turn K: ...`, K the assistant message's number, 0-based) and the counts.
pub fn check(row: &RowView<'_>, pieces: &Pieces) -> (Option<String>, Checked) {
    let mut first = None;
    let mut c = Checked::default();
    let Some(msgs) = &row.messages else {
        return (None, c);
    };
    let mut turn = 0;
    for m in msgs {
        if m.role != "assistant" {
            continue;
        }
        if let Some(lp) = m.logprobs
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(lp.get())
        {
            let tokens = sampled(&v);
            if !tokens.is_empty() {
                c.turns += 1;
                if let Some(why) = pieces.drift(&tokens) {
                    c.drifted += 1;
                    first.get_or_insert_with(|| format!("turn {turn}: {why}"));
                }
            }
        }
        turn += 1;
    }
    (first, c)
}

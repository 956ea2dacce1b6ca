//! Making a row fit its budget when the summary is not enough: `--over-budget truncate`
//! shortens the longest tool outputs (protected turns included) to a head and a tail
//! with a marker between; `--over-budget reject` refuses the row (see [`Unfit`]).
//!
//! Order: tool turns first, longest first; only when no tool output can be shortened
//! any more, the other non-system turns, longest first. System turns are never cut.
//! A Hermes tool turn that is one `<tool_response>` block around a JSON object with a
//! string `content` has that string shortened, so the block stays valid JSON; any other
//! text is shortened as it is. After each cut the row is counted again (whole, by the
//! chat template, when the tokenizer has one).

use serde_json::Value;

use super::Compressor;
use super::metrics::TrajectoryMetrics;
use super::plan::Role;
use super::row::{self, Row, Shape};
use crate::format::pyjson;

/// Why a row is sent to --rejects under `--over-budget`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unfit {
    /// `--over-budget reject`: over the budget after compression. The message has no
    /// per-row numbers, so the summary line groups the rejects by cause.
    #[error("over-budget: over {target} tokens after compression ({reason})")]
    Over {
        tokens: usize,
        target: usize,
        reason: String,
    },
    /// `--over-budget truncate`: every turn that may be cut is as short as it may be.
    #[error("over-budget: over {target} tokens with every tool output truncated")]
    CannotFit { tokens: usize, target: usize },
}

impl Unfit {
    /// The rejection of a row left over the budget.
    pub fn from_metrics(m: &TrajectoryMetrics, target: usize) -> Unfit {
        Unfit::Over {
            tokens: m.compressed_tokens,
            target,
            reason: m.reason.clone().unwrap_or_else(|| "unknown".into()),
        }
    }
}

/// Tokens a truncated text keeps at least (head and tail together).
const MIN_KEEP: usize = 64;
/// Rounds of cutting before giving up (each round shortens one turn).
const MAX_ROUNDS: usize = 200;

/// The marker put between the head and the tail of a truncated text.
pub fn marker(cut_chars: usize) -> String {
    format!("\n\n[... {cut_chars} characters truncated by traj-compress ...]\n\n")
}

/// Keep `keep` characters of `s`: the first half and the last half, with a marker.
pub fn head_tail(s: &str, keep: usize) -> Option<String> {
    let n = s.chars().count();
    if keep >= n {
        return None;
    }
    let head = keep / 2;
    let tail = keep - head;
    let head_end = s.char_indices().nth(head).map_or(s.len(), |(i, _)| i);
    let tail_start = s.char_indices().nth(n - tail).map_or(s.len(), |(i, _)| i);
    let mut out = String::with_capacity(keep * 4 + 64);
    out.push_str(&s[..head_end]);
    out.push_str(&marker(n - keep));
    out.push_str(&s[tail_start..]);
    Some(out)
}

/// The shortened text of a turn (its `value` / `content` string), keeping about
/// `keep_ratio` of it; `None` when it has no such string or cannot be shortened.
fn cut_text(turn: &Value, shape: Shape, keep_ratio: f64) -> Option<String> {
    let Some(Value::String(text)) = turn.get(shape.text_key()) else {
        return None;
    };
    // A Hermes tool turn: one <tool_response> block around a JSON object.
    if shape == Shape::ShareGpt
        && let Some(body) = text
            .strip_prefix("<tool_response>\n")
            .and_then(|b| b.strip_suffix("\n</tool_response>"))
        && let Ok(Value::Object(mut obj)) = serde_json::from_str::<Value>(body)
        && let Some(Value::String(content)) = obj.get("content")
    {
        let keep = (content.chars().count() as f64 * keep_ratio) as usize;
        let short = head_tail(content, keep)?;
        obj.insert("content".into(), Value::String(short));
        let body = pyjson::to_string(&Value::Object(obj), pyjson::Style::Envelope);
        return Some(format!("<tool_response>\n{body}\n</tool_response>"));
    }
    let keep = (text.chars().count() as f64 * keep_ratio) as usize;
    head_tail(text, keep)
}

fn turn_tokens(comp: &Compressor, turn: &Value, shape: Shape) -> usize {
    let mut n = 0;
    row::for_each_text(turn, shape, &mut |s| n += comp.tokenizer.count(s));
    n
}

/// Shorten turns of `row` until it fits; updates `m` and says whether the row changed.
pub fn truncate(
    comp: &Compressor,
    row: &mut Row,
    m: &mut TrajectoryMetrics,
) -> Result<bool, Unfit> {
    let target = comp.settings.plan.target_max_tokens;
    let shape = row.shape;
    let roles = row.roles();
    let mut tokens: Vec<usize> = row
        .turns()
        .iter()
        .map(|t| turn_tokens(comp, t, shape))
        .collect();
    let chat = comp.chat_total(row).is_some();
    let mut total = m.compressed_tokens;
    let mut done = vec![false; tokens.len()];
    let mut cut = 0usize;
    for _ in 0..MAX_ROUNDS {
        if total <= target {
            break;
        }
        let pick = |tool: bool| {
            (0..tokens.len())
                .filter(|&i| !done[i] && roles[i] != Role::System)
                .filter(|&i| (roles[i] == Role::Tool) == tool)
                .max_by_key(|&i| tokens[i])
        };
        let Some(i) = pick(true).or_else(|| pick(false)) else {
            break;
        };
        let t = tokens[i];
        let need = total - target;
        // Aim a little under, for the marker and the re-tokenised seams.
        let keep = t.saturating_sub(need + need / 50 + 24).max(MIN_KEEP);
        if keep >= t {
            done[i] = true;
            continue;
        }
        let Some(short) = cut_text(&row.turns()[i], shape, keep as f64 / t as f64) else {
            done[i] = true;
            continue;
        };
        row.turn_mut(i)[shape.text_key()] = Value::String(short);
        let now = turn_tokens(comp, &row.turns()[i], shape);
        if now >= t {
            done[i] = true;
        }
        cut += 1;
        total = if chat {
            comp.chat_total(row).unwrap_or(total + now - t)
        } else {
            total + now - t
        };
        tokens[i] = now;
        if now <= MIN_KEEP + 32 {
            done[i] = true;
        }
    }
    m.compressed_tokens = total;
    m.truncated_turns = cut;
    if total > target {
        return Err(Unfit::CannotFit {
            tokens: total,
            target,
        });
    }
    if cut > 0 {
        m.still_over_limit = false;
        m.reason = None;
    }
    Ok(cut > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_tail_keeps_both_ends_on_char_boundaries() {
        let s: String = "é".repeat(10) + &"x".repeat(10);
        let t = head_tail(&s, 4).unwrap();
        assert!(t.starts_with("éé\n\n[... 16 characters truncated"), "{t}");
        assert!(t.ends_with("xx"));
        assert_eq!(head_tail("abc", 3), None);
    }

    #[test]
    fn hermes_tool_block_stays_json() {
        let content = "line\n".repeat(200);
        let body = pyjson::dumps(&serde_json::json!({"name": "ls", "content": content}));
        let mut turn = serde_json::json!({"from": "tool", "value": format!("<tool_response>\n{body}\n</tool_response>")});
        let short = cut_text(&turn, Shape::ShareGpt, 0.1);
        assert!(short.is_some());
        turn["value"] = Value::String(short.unwrap());
        let v = turn["value"].as_str().unwrap();
        let inner = &v["<tool_response>\n".len()..v.len() - "\n</tool_response>".len()];
        let obj: Value = serde_json::from_str(inner).unwrap();
        assert_eq!(obj["name"], "ls");
        assert!(
            obj["content"]
                .as_str()
                .unwrap()
                .contains("characters truncated by traj-compress")
        );
        assert!(obj["content"].as_str().unwrap().len() < 200);
    }
}

//! Making a row fit its budget when the summary is not enough: `--over-budget truncate`
//! shortens the longest turns to a head and a tail with a marker between;
//! `--over-budget reject` refuses the row (see [`Unfit`]).
//!
//! Which turns: any turn with a text, whatever its role (text-action agents put their
//! long outputs in user turns, not tool turns), in three tiers: first every turn but
//! the system turns and the first human turn, then the first human turn, then the
//! system turns. Within a tier the texts are cut to one common length, the longest
//! first (a water level: a text longer than the level keeps its head and tail up to
//! it, shorter ones are untouched), the level chosen so that the row fits; a tier is
//! cut down to its markers before the next is touched. Each cut starts from the turn's
//! original text (markers never nest), and after each the row is counted again (whole,
//! by the chat template, when the tokenizer has one). A text no longer than a marker is
//! never cut (the marker would make it longer). A row is rejected only when every text
//! is down to its marker and the rest (markers, short texts, tool calls, markup) still
//! exceeds the budget.
//!
//! The texts cut are those of [`super::shorten`]: a turn's prose, the text parts of a
//! typed `content` list, the reasoning, and the strings inside a Hermes
//! `<tool_response>` block's JSON `content` (the block written again, valid JSON);
//! never markup or a tool call. Each text is a unit of the water level, so a turn with
//! several (parts, reasoning, responses) has each cut, each with its marker.

use serde_json::Value;

use super::Compressor;
use super::metrics::TrajectoryMetrics;
use super::plan::Role;
use super::row::{self, Row, Shape};
use super::shorten;

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
    /// `--over-budget truncate`: every text is cut to its marker (but those shorter
    /// than a marker) and the row is still over (the markers, tool calls and markup
    /// alone exceed the budget).
    #[error("over-budget: over {target} tokens with every turn cut to its truncation marker")]
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

/// Rounds of cutting per tier (each round cuts the tier to a lower level, by what the
/// last one missed; the last cuts it to its markers).
const ROUNDS: usize = 12;

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

/// The tokens of each text of `turn` that may be cut ([`shorten::each_text`]).
fn text_tokens(comp: &Compressor, turn: &Value, shape: Shape) -> Vec<usize> {
    let mut out = Vec::new();
    shorten::each_text(&mut turn.clone(), shape, &mut |s| {
        out.push(comp.tokenizer.count(s));
        None
    });
    out
}

/// `turn` with each of its texts of `tokens[k]` tokens cut to about `c` tokens (those a
/// marker shortens); `None` when none is.
fn cut_turn(turn: &Value, shape: Shape, tokens: &[usize], c: usize, mark: usize) -> Option<Value> {
    let mut out = turn.clone();
    let mut k = 0;
    let changed = shorten::each_text(&mut out, shape, &mut |s| {
        let t = tokens.get(k).copied().unwrap_or(0);
        k += 1;
        if !cuts(t, c, mark) {
            return None;
        }
        let keep = (s.chars().count() as f64 * c as f64 / t as f64) as usize;
        head_tail(s, keep)
    });
    changed.then_some(out)
}

fn turn_tokens(comp: &Compressor, turn: &Value, shape: Shape) -> usize {
    let mut n = 0;
    row::for_each_text(turn, shape, &mut |s| n += comp.tokenizer.count(s));
    n
}

/// The tier a turn is cut in: 0 first, the first human turn 1, system turns 2.
fn tier(roles: &[Role], i: usize) -> usize {
    match roles[i] {
        Role::System => 2,
        Role::Human if roles.iter().position(|r| *r == Role::Human) == Some(i) => 1,
        _ => 0,
    }
}

/// True when a text of `t` tokens is cut at level `c`: only when the cut, marker
/// included, is shorter (a text shorter than a marker is never cut).
fn cuts(t: usize, c: usize, mark: usize) -> bool {
    t > c + mark
}

/// The highest level (tokens kept of each text) at which the texts `text` (with
/// `fixed` tokens beside each) take at most `room` tokens, a cut text counting
/// `mark` more for its marker; `None` when even level 0 does not fit.
fn level(text: &[usize], fixed: usize, mark: usize, room: usize) -> Option<usize> {
    let need = |c: usize| -> usize {
        fixed
            + text
                .iter()
                .map(|&t| if cuts(t, c, mark) { c + mark } else { t })
                .sum::<usize>()
    };
    let top = text.iter().copied().max().unwrap_or(0);
    if need(top) <= room {
        return Some(top);
    }
    if need(0) > room {
        return None;
    }
    // need(lo) <= room < need(hi)
    let (mut lo, mut hi) = (0, top);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if need(mid) <= room {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(lo)
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
    let original: Vec<Value> = row.turns().to_vec();
    let n = original.len();
    let mut now: Vec<usize> = original
        .iter()
        .map(|t| turn_tokens(comp, t, shape))
        .collect();
    // The tokens of each text of each turn that may be cut.
    let text: Vec<Vec<usize>> = original
        .iter()
        .map(|t| text_tokens(comp, t, shape))
        .collect();
    let mark = comp.tokenizer.count(&marker(usize::MAX)) + 2;
    let chat = comp.chat_total(row).is_some();
    let mut total = m.compressed_tokens;
    let mut cut = vec![false; n];
    for t in 0..3 {
        let tier: Vec<usize> = (0..n)
            .filter(|&i| tier(&roles, i) == t && text[i].iter().any(|&k| k > 0))
            .collect();
        let mut slack = 0;
        let mut last = usize::MAX;
        for round in 0..ROUNDS {
            if total <= target || tier.is_empty() {
                break;
            }
            let held: usize = tier.iter().map(|&i| now[i]).sum();
            let fixed: usize = tier
                .iter()
                .map(|&i| now[i].saturating_sub(text[i].iter().sum()))
                .sum();
            let others = total - held.min(total);
            let room = target.saturating_sub(others + slack);
            let texts: Vec<usize> = tier.iter().flat_map(|&i| text[i].iter().copied()).collect();
            // The last round cuts the tier to its markers, so that the next tier (or a
            // rejection) comes only when this one has nothing left to give.
            let c = if round + 1 == ROUNDS {
                0
            } else {
                level(&texts, fixed, mark, room).unwrap_or(0).min(last)
            };
            for &i in &tier {
                let Some(short) = cut_turn(&original[i], shape, &text[i], c, mark) else {
                    continue;
                };
                let turn = row.turn_mut(i);
                *turn = short;
                let tokens = turn_tokens(comp, turn, shape);
                total = (total + tokens).saturating_sub(now[i]);
                now[i] = tokens;
                cut[i] = true;
            }
            if chat {
                total = comp.chat_total(row).unwrap_or(total);
            }
            if c == 0 {
                break;
            }
            // Missed by the seams (a cut text re-tokenised, the marker's neighbours):
            // aim lower by as much next round.
            slack += total.saturating_sub(target) + 1;
            last = c.saturating_sub(1);
        }
        if total <= target {
            break;
        }
    }
    let turns_cut = cut.iter().filter(|&&c| c).count();
    m.compressed_tokens = total;
    m.truncated_turns = turns_cut;
    if total > target {
        return Err(Unfit::CannotFit {
            tokens: total,
            target,
        });
    }
    if turns_cut > 0 {
        m.still_over_limit = false;
        m.reason = None;
    }
    Ok(turns_cut > 0)
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
    fn the_level_cuts_only_texts_a_marker_shortens() {
        // 5 + (c + 15) <= 40: the long text keeps 20 tokens, the short one is left.
        assert_eq!(level(&[5, 100], 0, 15, 40), Some(20));
        assert_eq!(level(&[5, 100], 0, 15, 200), Some(100));
        // Texts shorter than a marker: nothing to cut, level 0 does not fit.
        assert_eq!(level(&[5, 5, 5], 0, 15, 10), None);
        assert!(!cuts(15, 0, 15) && cuts(16, 0, 15));
    }
}

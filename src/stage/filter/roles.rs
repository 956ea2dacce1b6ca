//! Role alternation (`--alternating`): whether a row's turns follow one another the way
//! LLaMA-Factory's ShareGPT and OpenAI converters (0.9.x `data/converter.py`) and
//! axolotl's chat templates require, so that no trainer drops the row silently.
//!
//! The rule (LLaMA-Factory's): an optional system turn first; then the turns at odd
//! positions (1st, 3rd, ...) are `human` or `tool` (user or observation), those at even
//! positions (2nd, 4th, ...) are `gpt` (assistant or function call); there is at least
//! one pair and the last turn is `gpt`. In OpenAI `messages` an assistant message is a
//! `gpt` turn and consecutive `tool` messages count as one turn (as LLaMA-Factory's
//! OpenAI converter joins them).

use crate::format::row::RowView;

/// The side of the alternation a role stands on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// human / user / tool / observation: the odd positions.
    Prompt,
    /// gpt / assistant / function_call: the even positions.
    Reply,
    /// system (first only), anything else: never at a counted position.
    Other,
}

fn side(role: &str) -> Side {
    match role {
        "human" | "user" | "tool" | "observation" => Side::Prompt,
        "gpt" | "assistant" | "function_call" => Side::Reply,
        _ => Side::Other,
    }
}

/// The first way `roles` breaks the rule, as a reason; `None` when it alternates.
/// `tool_runs` joins consecutive `tool` roles into one turn (OpenAI messages).
fn check<'a>(roles: impl Iterator<Item = &'a str>, tool_runs: bool) -> Option<String> {
    let mut roles = roles.enumerate().peekable();
    if roles.peek().is_some_and(|(_, r)| *r == "system") {
        roles.next();
    }
    let mut pos = 0usize; // counted turns so far
    let mut prev: Option<&str> = None;
    for (i, role) in roles {
        let n = i + 1;
        if tool_runs && role == "tool" && prev == Some("tool") {
            continue;
        }
        let want = if pos.is_multiple_of(2) {
            Side::Prompt
        } else {
            Side::Reply
        };
        let got = side(role);
        if got != want {
            let after = prev.map_or("the start".to_string(), |p| format!("{p:?}"));
            return Some(match got {
                Side::Other => format!(
                    "turn {n}: role {role:?} where only {} turns may stand",
                    names(want)
                ),
                _ => format!(
                    "turn {n}: {role:?} after {after} (expected {})",
                    names(want)
                ),
            });
        }
        pos += 1;
        prev = Some(role);
    }
    match (pos, prev) {
        (0, _) => Some("no turns besides a system turn".to_string()),
        (_, Some(last)) if pos % 2 == 1 => {
            Some(format!("ends on {last:?} (the last turn must be gpt)"))
        }
        _ => None,
    }
}

fn names(s: Side) -> &'static str {
    match s {
        Side::Prompt => "human or tool",
        Side::Reply => "gpt",
        Side::Other => "system",
    }
}

/// Why the row does not alternate, or `None` when it does.
pub(super) fn alternation(row: &RowView<'_>) -> Option<String> {
    match (&row.conversations, &row.messages) {
        (Some(turns), _) => check(turns.iter().map(|t| t.from.as_ref()), false),
        (None, Some(msgs)) => check(msgs.iter().map(|m| m.role.as_ref()), true),
        (None, None) => Some("no turns".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::check;

    fn c(roles: &[&str], runs: bool) -> Option<String> {
        check(roles.iter().copied(), runs)
    }

    #[test]
    fn follows_llamafactory_rules() {
        assert_eq!(c(&["system", "human", "gpt", "tool", "gpt"], false), None);
        assert_eq!(c(&["human", "gpt"], false), None);
        assert_eq!(
            c(&["system", "gpt", "human"], false).unwrap(),
            "turn 2: \"gpt\" after the start (expected human or tool)"
        );
        assert_eq!(
            c(&["human", "human", "gpt"], false).unwrap(),
            "turn 2: \"human\" after \"human\" (expected gpt)"
        );
        assert_eq!(
            c(&["human", "gpt", "human"], false).unwrap(),
            "ends on \"human\" (the last turn must be gpt)"
        );
        assert!(c(&["human", "gpt", "system", "gpt"], false).is_some());
        assert!(c(&["system"], false).is_some());
        // OpenAI messages: a run of tool messages is one observation turn.
        assert_eq!(
            c(
                &["system", "user", "assistant", "tool", "tool", "assistant"],
                true
            ),
            None
        );
        assert!(c(&["user", "assistant", "tool", "tool", "assistant"], false).is_some());
    }
}

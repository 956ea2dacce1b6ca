//! The rendering of a region's turns as the summarizer reads them (reference §3.3):
//! each turn as `[ROLE]:` and its text, long texts elided in the middle with the
//! number of characters left out.

use serde_json::Value;

use super::super::row::{Shape, role_name, turn_text};

/// Values longer than this many characters are elided in the summarizer's input.
pub const ELIDE_OVER: usize = 3000;
pub(super) const ELIDE_HEAD: usize = 1500;
pub(super) const ELIDE_TAIL: usize = 500;

pub(super) fn thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Keep the first `head` and last `tail` characters of `text`, with a marker saying how
/// many were left out. The marker cannot be mistaken for something an agent wrote.
/// (The reference raises on negative lengths; here the type rules them out.)
pub fn elide_middle(text: &str, head: usize, tail: usize) -> String {
    let total = text.chars().count();
    if head + tail >= total {
        return text.to_string();
    }
    let head_end = text.char_indices().nth(head).map_or(text.len(), |(i, _)| i);
    let tail_start = if tail == 0 {
        text.len()
    } else {
        text.char_indices()
            .nth(total - tail)
            .map_or(text.len(), |(i, _)| i)
    };
    format!(
        "{}⟪TRAJ-CONTEXT-COMPRESSION: {} of {} chars omitted here by the trajectory compressor.⟫{}",
        &text[..head_end],
        thousands(total - head - tail),
        thousands(total),
        &text[tail_start..]
    )
}

/// Render turns `start..until` for the summarizer: `[Turn i - ROLE]:` and the text,
/// blocks separated by a blank line, long values elided in the middle.
pub fn render_region(turns: &[Value], shape: Shape, start: usize, until: usize) -> String {
    let mut blocks = Vec::with_capacity(until.saturating_sub(start));
    for (i, t) in turns.iter().enumerate().take(until).skip(start) {
        let text = turn_text(t, shape);
        let text = if text.chars().count() > ELIDE_OVER {
            std::borrow::Cow::Owned(elide_middle(&text, ELIDE_HEAD, ELIDE_TAIL))
        } else {
            text
        };
        blocks.push(format!("[Turn {i} - {}]:\n{text}", role_name(t, shape)));
    }
    blocks.join("\n\n")
}

//! hermes-agent's `<REASONING_SCRATCHPAD>`: the reference's reasoning rule for raw
//! records, and its conversion into `<think>` tags (inside a `<think>` block the
//! scratchpad tags are text).

use super::Tag;

pub(super) const SCRATCHPAD_OPEN: &str = "<REASONING_SCRATCHPAD>";
pub(super) const SCRATCHPAD_CLOSE: &str = "</REASONING_SCRATCHPAD>";

/// The reference's raw-record reasoning rule: a `<REASONING_SCRATCHPAD>` holding more
/// than white space (up to its closing tag, or the end of the text).
pub fn scratchpad_reasoning(text: &str) -> bool {
    let Some(k) = text.find(SCRATCHPAD_OPEN) else {
        return false;
    };
    let rest = &text[k + SCRATCHPAD_OPEN.len()..];
    let body = rest.find(SCRATCHPAD_CLOSE).map_or(rest, |e| &rest[..e]);
    !body.trim().is_empty()
}

/// The reference's scratchpad conversion: `<REASONING_SCRATCHPAD>` → `<think>` and
/// `</REASONING_SCRATCHPAD>` → `</think>`, nothing else touched; but inside a
/// `<think>` block the scratchpad tags are its text (hermes-agent writes a `reasoning`
/// field that holds a scratchpad as `<think>\n<REASONING_SCRATCHPAD>…`), so that a
/// second reading of what was written is the first.
pub fn convert_scratchpad(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.contains("REASONING_SCRATCHPAD>") {
        return std::borrow::Cow::Borrowed(s);
    }
    let (open, close) = (Tag::ThinkOpen.text(), Tag::ThinkClose.text());
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    let mut in_think = false;
    loop {
        let tags = [open, close, SCRATCHPAD_OPEN, SCRATCHPAD_CLOSE];
        let Some((at, tag)) = tags
            .iter()
            .filter_map(|t| rest.find(t).map(|i| (i, *t)))
            .min_by_key(|&(i, _)| i)
        else {
            out.push_str(rest);
            return std::borrow::Cow::Owned(out);
        };
        out.push_str(&rest[..at]);
        let written = match tag {
            t if t == open => {
                in_think = true;
                t
            }
            t if t == close => {
                in_think = false;
                t
            }
            t if in_think => t,
            t if t == SCRATCHPAD_OPEN => open,
            _ => close,
        };
        out.push_str(written);
        rest = &rest[at + tag.len()..];
    }
}

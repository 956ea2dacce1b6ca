//! Envelope repair: the Hermes tags of a gpt turn made balanced and properly nested
//! where that needs no guess, refused with a reason where it would.
//!
//! Real hermes-agent output carries defects of two sources: the model wrote tags in its
//! reply (a `</think>` the API's reasoning parser missed, a chat template's empty
//! `<think>\n\n</think>`), and the runner added its own empty `<think>\n</think>\n` in
//! front of a reply that held no `<think>`. [`repair_gpt`] reads the turn with the one
//! Hermes tag scanner ([`hermes::next_tag`]) and applies exactly these repairs
//! ([`Repair`]):
//!
//! - [`Repair::ReasoningAfterEmptyThink`]: an empty `<think>` block (the runner's),
//!   then text without tags, then a `</think>` with no opening tag: the model wrote its
//!   reasoning and closed it itself. The empty block's white space and `</think>` are
//!   removed, so the text becomes the block's reasoning and the model's own `</think>`
//!   closes it (`<think>\n</think>\nR\n</think>\n\nX` becomes
//!   `<think>\nR\n</think>\n\nX`); every other byte stays. Only when no `<think>`
//!   came before (after one, the empty block is a duplicate, below).
//! - [`Repair::StrayClose`]: any other `</think>`, `</tool_call>` or `</tool_response>`
//!   with no opening tag is removed, with the white space right before it (so
//!   `<think>\n</think>\n</think>\nX` becomes `<think>\n</think>\nX`); the text around
//!   it stays as it was.
//! - [`Repair::DuplicateEmptyThink`]: a `<think>` block holding only white space, beside
//!   another `<think>` block (before or after it), is removed with the white space
//!   after it; one block is kept.
//!
//! White space around the tags is otherwise the Hermes parser's business, as before:
//! it reads `<tool_call>` bodies whatever white space frames them, and rendering writes
//! the canonical framing (not counted as a repair). The framing of a leading `<think>`
//! block (white space before it and inside its tags) is the parser's business too: the
//! block is the turn's reasoning however it is framed ([`hermes::parse_gpt`]).
//!
//! Everything else that breaks the envelope is refused ([`Broken::Unrepairable`]): an
//! unclosed `<think>` or `<tool_call>` (where it ends would be a guess), a tag inside an
//! open `<think>`, a `<think>` after a `<tool_call>`, a `<tool_response>` in a gpt turn.
//! A `<tool_call>` whose body is not JSON is left for the Hermes parser, which refuses
//! it. With [`Mode::Refuse`] (`--no-repair`) a turn that needs a repair is refused too
//! ([`Broken::NotRepaired`]).
//!
//! Text that needs no repair comes back borrowed, byte for byte. Repairing a repaired
//! text changes nothing (`repair(repair(x)) == repair(x)`), and a repaired text has no
//! [`hermes::scan_gpt`] error.

use std::borrow::Cow;

use crate::format::hermes::{self, Tag, TagError};

/// A kind of repair, counted per run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repair {
    StrayClose,
    DuplicateEmptyThink,
    ReasoningAfterEmptyThink,
}

impl Repair {
    /// Every kind, in the order they are reported.
    pub const ALL: [Repair; 3] = [
        Repair::StrayClose,
        Repair::DuplicateEmptyThink,
        Repair::ReasoningAfterEmptyThink,
    ];

    /// The kind's name on stderr and in `--stats`.
    pub const fn name(self) -> &'static str {
        match self {
            Repair::StrayClose => "stray_closing_tag",
            Repair::DuplicateEmptyThink => "duplicate_empty_think",
            Repair::ReasoningAfterEmptyThink => "reasoning_after_empty_think",
        }
    }

    const fn index(self) -> usize {
        self as usize
    }
}

/// Repairs made, counted by kind.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Repairs([u64; Repair::ALL.len()]);

impl Repairs {
    pub fn add(&mut self, kind: Repair) {
        self.0[kind.index()] += 1;
    }

    pub fn get(&self, kind: Repair) -> u64 {
        self.0[kind.index()]
    }

    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// Add every count of `other`.
    pub fn merge(&mut self, other: &Repairs) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }
}

/// Repair, or refuse what would need a repair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    Repair,
    /// `--no-repair`.
    Refuse,
}

/// Why a gpt turn's envelope is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Broken {
    /// A defect that no repair fixes without a guess.
    #[error("{0} (not repairable without guessing)")]
    Unrepairable(TagError),
    /// A defect a repair would fix, under [`Mode::Refuse`].
    #[error("{0} (repairable; not repaired under --no-repair)")]
    NotRepaired(String),
}

/// The white space [`hermes::scan_gpt`]'s writers use (Python's `str.isspace`).
fn is_ws(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

fn blank(s: &str) -> bool {
    s.chars().all(is_ws)
}

/// The end of the white space starting at `from`.
fn skip_ws(v: &str, from: usize) -> usize {
    from + (v[from..].len() - v[from..].trim_start_matches(is_ws).len())
}

/// The text being rebuilt: `v` up to `copied` is in `out` (once anything changed).
struct Builder<'a> {
    v: &'a str,
    out: Option<String>,
    copied: usize,
}

impl<'a> Builder<'a> {
    /// Drop `v[from..to]`, and with `trim_before` the white space `out` ends with.
    fn cut(&mut self, from: usize, to: usize, trim_before: bool) {
        let out = self
            .out
            .get_or_insert_with(|| String::with_capacity(self.v.len()));
        out.push_str(&self.v[self.copied..from]);
        if trim_before {
            let n = out.trim_end_matches(is_ws).len();
            out.truncate(n);
        }
        self.copied = to;
    }

    fn finish(mut self) -> Cow<'a, str> {
        match self.out.take() {
            None => Cow::Borrowed(self.v),
            Some(mut out) => {
                out.push_str(&self.v[self.copied..]);
                Cow::Owned(out)
            }
        }
    }
}

/// Repair the tags of a gpt turn's text `v` (see the module docs). `after_think`: a
/// `<think>` block comes before this text in the turn (an OpenAI reply's reasoning,
/// written in front of its content), so an empty block here duplicates it. Each repair
/// made is counted in `done` (nothing is counted when the turn is refused).
///
/// One pass can leave work for the next (a stray `</think>` removed between two
/// `<think>` blocks makes them neighbours), so passes repeat until one changes
/// nothing; each changing pass removes at least one tag, so this ends.
pub fn repair_gpt<'a>(
    v: &'a str,
    after_think: bool,
    mode: Mode,
    done: &mut Repairs,
) -> Result<Cow<'a, str>, Broken> {
    let mut made = Repairs::default();
    let mut cur = match repair_once(v, after_think, mode, &mut made)? {
        Cow::Borrowed(_) => return Ok(Cow::Borrowed(v)),
        Cow::Owned(s) => s,
    };
    while let Cow::Owned(s) = repair_once(&cur, after_think, mode, &mut made)? {
        cur = s;
    }
    done.merge(&made);
    Ok(Cow::Owned(cur))
}

fn repair_once<'a>(
    v: &'a str,
    after_think: bool,
    mode: Mode,
    made: &mut Repairs,
) -> Result<Cow<'a, str>, Broken> {
    let mut b = Builder {
        v,
        out: None,
        copied: 0,
    };
    let mut want = |kind: Repair, what: &dyn Fn() -> String| -> Result<(), Broken> {
        match mode {
            Mode::Repair => {
                made.add(kind);
                Ok(())
            }
            Mode::Refuse => Err(Broken::NotRepaired(what())),
        }
    };
    let mut seen_think = after_think;
    let mut seen_call = false;
    let mut pos = 0;
    while let Some((p, tag)) = hermes::next_tag(v, pos) {
        let start = p + tag.text().len();
        match tag {
            Tag::ThinkOpen => {
                if seen_call {
                    return Err(Broken::Unrepairable(TagError::ThinkAfterCall));
                }
                let q = match hermes::next_tag(v, start) {
                    Some((q, Tag::ThinkClose)) => q,
                    Some((_, other)) => {
                        return Err(Broken::Unrepairable(TagError::InsideOpenThink(other)));
                    }
                    None => return Err(Broken::Unrepairable(TagError::ThinkNeverClosed)),
                };
                let end = q + Tag::ThinkClose.text().len();
                let empty = blank(&v[start..q]);
                let next_is_think = matches!(
                    hermes::next_tag(v, end),
                    Some((n, Tag::ThinkOpen)) if !seen_call && blank(&v[end..n])
                );
                // The model's own reasoning after the runner's empty block, closed by
                // the model's `</think>`: that close ends the block instead.
                let own_close = match hermes::next_tag(v, end) {
                    Some((q2, Tag::ThinkClose)) if !blank(&v[end..q2]) => Some(q2),
                    _ => None,
                };
                if let Some(q2) = own_close.filter(|_| empty && !seen_think) {
                    want(Repair::ReasoningAfterEmptyThink, &|| {
                        "reasoning after an empty <think> block, closed by a </think> of its own"
                            .into()
                    })?;
                    b.cut(start, end, false);
                    seen_think = true;
                    pos = q2 + Tag::ThinkClose.text().len();
                } else if empty && (seen_think || next_is_think) {
                    want(Repair::DuplicateEmptyThink, &|| {
                        "an empty <think> block beside another <think> block".into()
                    })?;
                    b.cut(p, skip_ws(v, end), false);
                    pos = skip_ws(v, end);
                } else {
                    seen_think = true;
                    pos = end;
                }
            }
            Tag::CallOpen => {
                let Some(e) = hermes::find_tag(v, Tag::CallClose, start) else {
                    return Err(Broken::Unrepairable(TagError::CallNeverClosed));
                };
                seen_call = true;
                pos = e + Tag::CallClose.text().len();
            }
            Tag::ThinkClose | Tag::CallClose | Tag::RespClose => {
                want(Repair::StrayClose, &|| {
                    format!("{tag} without an opening tag")
                })?;
                b.cut(p, start, true);
                pos = start;
            }
            Tag::RespOpen => return Err(Broken::Unrepairable(TagError::InGptTurn(tag))),
        }
    }
    Ok(b.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fix(v: &str) -> (String, Repairs) {
        let mut r = Repairs::default();
        let out = repair_gpt(v, false, Mode::Repair, &mut r).unwrap();
        (out.into_owned(), r)
    }

    #[test]
    fn well_formed_turns_come_back_borrowed() {
        for v in [
            "",
            "plain answer",
            "<think>\n</think>\nanswer",
            "<think>\nR\n</think>\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>",
            "<think>\nR\n</think>\nsee <think>x</think> here",
            "<tool_call>\n{\"q\": \"</think> <think>\"}\n</tool_call>",
        ] {
            let mut r = Repairs::default();
            let out = repair_gpt(v, false, Mode::Refuse, &mut r).unwrap();
            assert!(matches!(out, Cow::Borrowed(_)), "{v:?}");
            assert_eq!(r.total(), 0);
        }
    }

    #[test]
    fn stray_closing_tags_are_removed_with_the_space_before_them() {
        let (out, r) = fix("<think>\n</think>\n</think>\nThe answer");
        assert_eq!(out, "<think>\n</think>\nThe answer");
        assert_eq!(r.get(Repair::StrayClose), 1);
        let (out, r) = fix("I reason here.\n</think>\n\nThe answer");
        assert_eq!(out, "I reason here.\n\nThe answer");
        assert_eq!(r.get(Repair::StrayClose), 1);
        let (out, r) = fix("a </tool_call> b </tool_response>");
        assert_eq!(out, "a b");
        assert_eq!(r.get(Repair::StrayClose), 2);
    }

    #[test]
    fn reasoning_closed_by_its_own_tag_after_an_empty_think_becomes_the_reasoning() {
        let (out, r) = fix("<think>\n</think>\nI reason here.\n</think>\n\nThe answer");
        assert_eq!(out, "<think>\nI reason here.\n</think>\n\nThe answer");
        assert_eq!(r.get(Repair::ReasoningAfterEmptyThink), 1);
        assert_eq!(r.total(), 1);
        let (out, r) = fix(
            "<think>\n\n</think>\n\nR\n</think>\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>",
        );
        assert_eq!(
            out,
            "<think>\n\nR\n</think>\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>"
        );
        assert_eq!(r.get(Repair::ReasoningAfterEmptyThink), 1);
        // After an OpenAI reply's reasoning the empty block is a duplicate, and the
        // text stays content.
        let mut r = Repairs::default();
        let out = repair_gpt(
            "<think>\n</think>\nR\n</think>\nX",
            true,
            Mode::Repair,
            &mut r,
        );
        assert_eq!(out.unwrap(), "R\nX");
        assert_eq!(r.get(Repair::ReasoningAfterEmptyThink), 0);
        let mut r = Repairs::default();
        let e = repair_gpt(
            "<think>\n</think>\nR\n</think>\nX",
            false,
            Mode::Refuse,
            &mut r,
        );
        assert!(
            e.unwrap_err()
                .to_string()
                .contains("closed by a </think> of its own")
        );
    }

    #[test]
    fn an_empty_think_beside_another_is_dropped() {
        let (out, r) = fix("<think>\nR\n</think>\n<think>\n\n</think>\n\nanswer");
        assert_eq!(out, "<think>\nR\n</think>\nanswer");
        assert_eq!(r.get(Repair::DuplicateEmptyThink), 1);
        let (out, _) = fix("<think>\n</think>\n<think>\nR\n</think>\nanswer");
        assert_eq!(out, "<think>\nR\n</think>\nanswer");
        let (out, r) = fix("<think>\n</think>\n<think>\n</think>\nx");
        assert_eq!((out.as_str(), r.total()), ("<think>\n</think>\nx", 1));
        let mut r = Repairs::default();
        let out = repair_gpt("<think>\n\n</think>\n\nanswer", true, Mode::Repair, &mut r);
        assert_eq!(out.unwrap(), "answer");
        assert_eq!(r.get(Repair::DuplicateEmptyThink), 1);
    }

    #[test]
    fn space_before_a_leading_think_is_kept() {
        let (out, r) = fix("  <think>x</think> lead kept");
        assert_eq!(
            (out.as_str(), r.total()),
            ("  <think>x</think> lead kept", 0)
        );
    }

    #[test]
    fn guesses_are_refused_with_the_scanner_reason() {
        for (v, e) in [
            ("<think>\nhalf a thought", TagError::ThinkNeverClosed),
            ("<tool_call>\n{\"name\": \"a\"", TagError::CallNeverClosed),
            (
                "<think>r<tool_call>x</tool_call></think>",
                TagError::InsideOpenThink(Tag::CallOpen),
            ),
            (
                "<tool_call>\n{}\n</tool_call><think>x</think>",
                TagError::ThinkAfterCall,
            ),
            (
                "<tool_response>x</tool_response>",
                TagError::InGptTurn(Tag::RespOpen),
            ),
        ] {
            let mut r = Repairs::default();
            assert_eq!(
                repair_gpt(v, false, Mode::Repair, &mut r),
                Err(Broken::Unrepairable(e)),
                "{v:?}"
            );
            assert_eq!(r.total(), 0);
        }
    }

    #[test]
    fn no_repair_refuses_what_it_would_repair() {
        let mut r = Repairs::default();
        let e = repair_gpt(
            "<think>\n</think>\n</think>\nx",
            false,
            Mode::Refuse,
            &mut r,
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "</think> without an opening tag (repairable; not repaired under --no-repair)"
        );
        assert_eq!(r.total(), 0);
    }

    #[test]
    fn repairing_twice_changes_nothing_and_leaves_no_scanner_error() {
        for v in [
            "<think>\n</think>\n</think>\nx",
            " <think>\n</think>\n<think>\n</think>\n</tool_call>y",
            "</think></think><think>\n</think>",
            "<think>\nR\n</think>\n</think>\n<tool_call>\n{}\n</tool_call>\n</tool_call>",
            "<think>\n</think>\n</think>\n<think>\nR\n</think>",
            "</think>\n<think>\nR\n</think>",
            "<think>\n</think>\nR\n</think>\n\nx</think>",
            "<think> </think>R</think><think>\n</think>\nS\n</think>",
        ] {
            let (once, _) = fix(v);
            let (twice, r) = fix(&once);
            assert_eq!(once, twice, "{v:?}");
            assert_eq!(r.total(), 0, "{v:?}");
            assert_eq!(hermes::scan_gpt(&once).error, None, "{v:?} -> {once:?}");
        }
    }
}

//! The offline extractive summarizer: no network, deterministic; it quotes from the
//! turns themselves (requests, commands, errors, first result lines, files, replies)
//! within the budget.

use std::borrow::Cow;

use serde_json::Value;

use super::super::row::{Shape, turn_text};
use super::{Outcome, PREFIX, Request, Summarizer};

/// The offline extractive summarizer: deterministic, no network. It keeps, within the
/// summary budget, the user's requests, the commands (tool calls), the errors, the
/// first line of each result, the files and the assistant's prose of the region, each
/// quoted from the turns themselves (so the language of the turns is kept).
pub struct Extractive;

pub(super) const MAX_ITEM_CHARS: usize = 200;
pub(super) const MAX_ITEMS: usize = 200;

/// Drop the tags that frame calls and responses, so that a summary never holds a
/// `<tool_call>` without its response (nor teaches the model to write one).
pub(super) fn untag(s: &str) -> Cow<'_, str> {
    crate::format::hermes::remove_call_tags(s)
}

pub(super) fn clip(s: &str, max: usize) -> String {
    let s = untag(s);
    let s = s.trim();
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// The longest prefix of `s` of at most `n` bytes that ends on a char boundary.
pub(super) fn prefix(s: &str, n: usize) -> &str {
    if s.len() <= n {
        return s;
    }
    let mut i = n;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    &s[..i]
}

/// The shortest suffix of `s` of at least `n` bytes that starts on a char boundary.
pub(super) fn suffix(s: &str, n: usize) -> &str {
    if s.len() <= n {
        return s;
    }
    let mut i = s.len() - n;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    &s[i..]
}

pub(super) const SCAN_HEAD: usize = 2048;
pub(super) const SCAN_TAIL: usize = 1024;

/// What the extractor reads of a long text: its head and its tail (errors and results
/// sit there), so that a 1 MB tool output costs no more than a 6 KB one.
pub(super) fn window(text: &str) -> [&str; 2] {
    if text.len() <= SCAN_HEAD + SCAN_TAIL {
        [text, ""]
    } else {
        [prefix(text, SCAN_HEAD), suffix(text, SCAN_TAIL)]
    }
}

/// The words of the head of `s` (Unicode white space between them), joined by one space.
pub(super) fn one_line(s: &str) -> String {
    let p = prefix(s, MAX_ITEM_CHARS * 8);
    let mut out = String::with_capacity(p.len());
    let mut push = |w: &str| {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    };
    if p.is_ascii() {
        // The white space of `char::is_whitespace` in ASCII: U+0009..U+000D and space.
        let ws = |c: u8| matches!(c, b'\t'..=b'\r' | b' ');
        let b = p.as_bytes();
        let mut i = 0;
        while i < b.len() {
            while i < b.len() && ws(b[i]) {
                i += 1;
            }
            let start = i;
            while i < b.len() && !ws(b[i]) {
                i += 1;
            }
            if start < i {
                push(&p[start..i]);
            }
        }
    } else {
        p.split_whitespace().for_each(push);
    }
    out
}

/// Commands in a gpt turn: OpenAI `tool_calls`, `<tool_call>` blocks, or the last fenced
/// code block of a text action.
pub(super) fn commands_of(turn: &Value, shape: Shape, out: &mut Vec<String>) {
    let mut found = false;
    let render = |name: &str, args: &Value| -> String {
        let args = match args {
            Value::String(s) => {
                serde_json::from_str::<Value>(s).unwrap_or(Value::String(s.clone()))
            }
            v => v.clone(),
        };
        let shown = match &args {
            Value::Object(m) if m.len() == 1 => match m.values().next() {
                Some(Value::String(s)) => s.clone(),
                Some(v) => v.to_string(),
                None => String::new(),
            },
            Value::Object(m) => {
                for k in ["command", "cmd", "code", "query", "path"] {
                    if let Some(Value::String(s)) = m.get(k) {
                        return format!("{name}: {}", clip(&one_line(s), MAX_ITEM_CHARS));
                    }
                }
                args.to_string()
            }
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            v => v.to_string(),
        };
        format!("{name}: {}", clip(&one_line(&shown), MAX_ITEM_CHARS))
    };
    if shape == Shape::OpenAi
        && let Some(calls) = turn.get("tool_calls").and_then(Value::as_array)
    {
        for c in calls {
            let f = c.get("function").unwrap_or(c);
            let name = f.get("name").and_then(Value::as_str).unwrap_or("tool");
            out.push(render(name, f.get("arguments").unwrap_or(&Value::Null)));
            found = true;
        }
    }
    let text = if shape == Shape::OpenAi {
        crate::format::message::content_text(turn.get("content").unwrap_or(&Value::Null))
    } else {
        turn_text(turn, Shape::ShareGpt).into_owned()
    };
    // The `<tool_call>` bodies as the one Hermes scanner reads them.
    for body in crate::format::hermes::scan_gpt(&text).calls {
        match serde_json::from_str::<Value>(body) {
            Ok(v) => {
                let name = v.get("name").and_then(Value::as_str).unwrap_or("tool");
                out.push(render(name, v.get("arguments").unwrap_or(&Value::Null)));
            }
            Err(_) => out.push(clip(&one_line(body), MAX_ITEM_CHARS)),
        }
        found = true;
    }
    if !found && let Some(end) = text.rfind("```") {
        let before = &text[..end];
        if let Some(start) = before.rfind("```") {
            let block = &before[start + 3..];
            let block = block.split_once('\n').map_or(block, |(lang, body)| {
                if lang.trim().chars().all(|c| c.is_ascii_alphanumeric()) {
                    body
                } else {
                    block
                }
            });
            if !block.trim().is_empty() {
                out.push(clip(&one_line(block), MAX_ITEM_CHARS));
            }
        }
    }
}

/// What marks a line of tool output as an error report.
pub(super) const ERROR_NEEDLES: [&str; 10] = [
    "Error",
    "error:",
    "ERROR",
    "Traceback",
    "Exception",
    "FAILED",
    "failed",
    "No such file",
    "command not found",
    "fatal:",
];

pub(super) fn is_error_line(l: &str) -> bool {
    // One pass over the line for all the needles (a search per needle cost more than
    // the rest of the extract on long tool outputs).
    static NEEDLES: std::sync::LazyLock<aho_corasick::AhoCorasick> =
        std::sync::LazyLock::new(|| {
            aho_corasick::AhoCorasick::new(ERROR_NEEDLES).expect("fixed needles")
        });
    NEEDLES.is_match(l)
}

pub(super) fn looks_like_path(w: &str) -> bool {
    const EXT: [&str; 16] = [
        ".py", ".rs", ".js", ".ts", ".go", ".c", ".h", ".cpp", ".java", ".md", ".json", ".yaml",
        ".yml", ".toml", ".txt", ".sh",
    ];
    let has_ext = EXT.iter().any(|e| w.ends_with(e));
    w.len() >= 3
        && w.len() <= 160
        && !w.starts_with("http")
        && w.chars().any(|c| c.is_ascii_alphabetic())
        && !w.contains("//")
        // `/returncode` (of `</returncode>`), `/tmp`: one segment and no extension.
        && !(w.starts_with('/') && w.matches('/').count() == 1 && !has_ext)
        && (has_ext || w.starts_with('/') || w.starts_with("./") || w.matches('/').count() >= 2)
}

/// The file names the agent itself names (its commands, arguments and text).
pub(super) fn files_in(text: &str, out: &mut Vec<String>) {
    for part in window(text) {
        files_in_part(part, out);
    }
}

/// The files a tool output names where it reports a problem (a traceback's
/// `File "x.py", line 3`, `x.py:12: error`): the error lines only, never whole
/// listings (`ls`, `find`, `grep` output name every file they see).
pub(super) fn files_in_errors(lines: &[&str], out: &mut Vec<String>) {
    for l in lines
        .iter()
        .filter(|l| is_error_line(l) || l.trim_start().starts_with("File \""))
    {
        files_in_part(l, out);
    }
}

/// More file names than fit in any summary budget.
pub(super) const MAX_FILES: usize = 64;

/// The words of `text` that look like paths (see [`looks_like_path`]), each once, in
/// order. A word is a run of alphanumeric characters and `/ . _ -`; only a word with a
/// `/` or a `.` can be a path, so the scan jumps from one of those to the next and
/// reads the word around it.
pub(super) fn files_in_part(text: &str, out: &mut Vec<String>) {
    let is_word = |c: char| c.is_alphanumeric() || matches!(c, '/' | '.' | '_' | '-');
    let bytes = text.as_bytes();
    let mut from = 0;
    while out.len() < MAX_FILES {
        let Some(hit) = memchr::memchr2(b'/', b'.', &bytes[from..]) else {
            break;
        };
        let hit = from + hit;
        // The word around the hit: back to its first character, on to its end.
        let start = text[from..hit]
            .char_indices()
            .rev()
            .take_while(|&(_, c)| is_word(c))
            .last()
            .map_or(hit, |(i, _)| from + i);
        let end = text[hit..]
            .char_indices()
            .find(|&(_, c)| !is_word(c))
            .map_or(text.len(), |(i, _)| hit + i);
        from = end;
        // A word right after `<` is a tag (`</returncode>`), not a path.
        if start > 0 && bytes[start - 1] == b'<' {
            continue;
        }
        let w = text[start..end].trim_matches(|c| c == '.' || c == '-');
        if looks_like_path(w) && !out.iter().any(|x| x == w) {
            out.push(w.to_string());
        }
    }
}

/// The prose of an assistant turn: its text without `<think>` blocks (and
/// scratchpads) and without `<tool_call>` blocks (an unclosed one runs to the end).
pub(super) fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    let blocks = [
        ("<think>", "</think>"),
        ("<REASONING_SCRATCHPAD>", "</REASONING_SCRATCHPAD>"),
        ("<tool_call>", "</tool_call>"),
    ];
    while let Some((at, (open, close))) = blocks
        .iter()
        .filter_map(|b| rest.find(b.0).map(|i| (i, *b)))
        .min_by_key(|&(i, _)| i)
    {
        out.push_str(&rest[..at]);
        let after = &rest[at + open.len()..];
        rest = after.find(close).map_or("", |e| &after[e + close.len()..]);
    }
    out.push_str(rest);
    out
}

/// The answer text of an assistant turn: a ShareGPT value, or an OpenAI message's
/// content without its reasoning and tool-call parts (LLaMA-Factory's typed parts).
fn answer_text(turn: &Value, shape: Shape) -> Cow<'_, str> {
    let content = match shape {
        Shape::ShareGpt => return turn_text(turn, shape),
        Shape::OpenAi => turn.get("content").unwrap_or(&Value::Null),
    };
    match content {
        Value::String(s) => Cow::Borrowed(s),
        Value::Array(parts) => Cow::Owned(
            parts
                .iter()
                .filter_map(|p| match crate::format::message::part(p) {
                    crate::format::message::Part::Text(t) => Some(t),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        _ => Cow::Borrowed(""),
    }
}

impl Extractive {
    /// The summary text (deterministic) within `req.budget` tokens, and its tokens by
    /// `req.tokenizer`.
    pub fn summary(req: &Request) -> (String, usize) {
        let (mut commands, mut errors, mut results, mut files) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        // What the user asked and the assistant said in prose: a chat's region may hold
        // no command at all, and its summary would say nothing of it.
        let (mut requests, mut replies) = (Vec::new(), Vec::new());
        // A user turn right after a command is its output (text-action agents such as
        // mini-swe-agent give observations as user turns): no request.
        let gave_command = |t: &Value| {
            let mut c = Vec::new();
            if super::super::row::role_of(t, req.shape) == super::super::plan::Role::Gpt {
                commands_of(t, req.shape, &mut c);
            }
            !c.is_empty()
        };
        let mut after_command = req
            .start
            .checked_sub(1)
            .and_then(|p| req.turns.get(p))
            .is_some_and(gave_command);
        for (i, t) in req.turns.iter().enumerate().take(req.until).skip(req.start) {
            let role = super::super::row::role_of(t, req.shape);
            match role {
                super::super::plan::Role::Gpt => {
                    let mut c = Vec::new();
                    commands_of(t, req.shape, &mut c);
                    after_command = !c.is_empty();
                    if commands.len() < MAX_ITEMS {
                        commands.extend(c.into_iter().map(|c| format!("[{i}] {c}")));
                    }
                    if let Some(calls) = t.get("tool_calls") {
                        // The list as JSON text (serde_json's bytes, written faster).
                        let mut json = Vec::new();
                        crate::format::pyjson::write_compact_value(&mut json, calls);
                        files_in(&String::from_utf8_lossy(&json), &mut files);
                    }
                    let text = turn_text(t, req.shape);
                    files_in(&text, &mut files);
                    let said = one_line(&prose(prefix(&answer_text(t, req.shape), SCAN_HEAD)));
                    if replies.len() < MAX_ITEMS && !said.is_empty() {
                        replies.push(format!("[{i}] {}", clip(&said, MAX_ITEM_CHARS)));
                    }
                }
                super::super::plan::Role::Tool | super::super::plan::Role::Human => {
                    let text = turn_text(t, req.shape);
                    // The first error line of the turn; a bare heading such as
                    // `ERRORS:` takes the line after it along.
                    let [head, tail] = window(&text);
                    let lines: Vec<&str> = head.lines().chain(tail.lines()).collect();
                    if errors.len() < MAX_ITEMS
                        && let Some(k) = lines.iter().position(|l| is_error_line(l))
                    {
                        let mut l = one_line(&untag(lines[k]));
                        if l.len() < 24
                            && let Some(next) =
                                lines[k + 1..].iter().find(|n| !untag(n).trim().is_empty())
                        {
                            l = format!("{l} {}", one_line(&untag(next)));
                        }
                        errors.push(format!("[{i}] {}", clip(&l, MAX_ITEM_CHARS)));
                    }
                    if role == super::super::plan::Role::Human
                        && !after_command
                        && requests.len() < MAX_ITEMS
                    {
                        let asked = one_line(head);
                        if !asked.is_empty() {
                            requests.push(format!("[{i}] {}", clip(&asked, MAX_ITEM_CHARS)));
                        }
                    }
                    if role == super::super::plan::Role::Tool
                        && results.len() < MAX_ITEMS
                        && let Some(first) = lines.iter().find(|l| !untag(l).trim().is_empty())
                    {
                        results.push(format!("[{i}] {}", clip(first, MAX_ITEM_CHARS)));
                    }
                    files_in_errors(&lines, &mut files);
                }
                _ => {}
            }
        }
        let header = format!(
            "{PREFIX} Extract of turns {}-{} ({} turns, {} commands), removed to fit the token budget.",
            req.start,
            req.until.saturating_sub(1),
            req.until - req.start,
            commands.len()
        );
        let tok = req.tokenizer;
        let budget = req.budget;
        let mut used = tok.count(&header) + 1;
        // Priority: what the user asked, commands, errors, files, results, what the
        // assistant said; each section keeps its order.
        let mut picked: [Vec<String>; 6] = Default::default();
        let titles = [
            "Requests:",
            "Commands:",
            "Errors:",
            "Files:",
            "Results:",
            "Replies:",
        ];
        let sections = [requests, commands, errors, files, results, replies];
        for (k, items) in sections.into_iter().enumerate() {
            let title_cost = tok.count(titles[k]) + 1;
            for item in items {
                if budget.saturating_sub(used) < 4 {
                    break;
                }
                let cost = tok.count(&item) + 2 + if picked[k].is_empty() { title_cost } else { 0 };
                if used + cost > budget {
                    // Keep each section's order: no later, smaller item jumps the queue
                    // (and no more counting of items that cannot be used).
                    break;
                }
                used += cost;
                picked[k].push(item);
            }
        }
        let render = |picked: &[Vec<String>; 6]| {
            let mut s = header.clone();
            for (k, items) in picked.iter().enumerate() {
                if items.is_empty() {
                    continue;
                }
                s.push('\n');
                s.push_str(titles[k]);
                for it in items {
                    s.push_str("\n- ");
                    s.push_str(it);
                }
            }
            s
        };
        let mut text = render(&picked);
        let mut tokens = tok.count(&text);
        // The per-item estimate can be off by a token at joins: trim until it fits.
        while tokens > budget {
            match picked.iter_mut().rev().find(|p| !p.is_empty()) {
                Some(p) => {
                    p.pop();
                }
                None => break,
            }
            text = render(&picked);
            tokens = tok.count(&text);
        }
        (text, tokens)
    }
}

impl Summarizer for Extractive {
    fn name(&self) -> String {
        "offline-extractive".to_string()
    }
    fn is_remote(&self) -> bool {
        false
    }
    fn summarize(&self, req: &Request) -> Outcome {
        let (text, tokens) = Extractive::summary(req);
        Outcome {
            text: Ok(text),
            tokens: Some(tokens),
            api_calls: 0,
            errors: 0,
        }
    }
}

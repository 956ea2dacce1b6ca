//! Summaries of a compressed region: the rendering of its turns (reference §3.3), the
//! prompt (§4.3), the post-processing of a reply (§4.4), the LLM summarizer with its
//! retries (§4.5), and the offline extractive summarizer used without an API key.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::row::{Shape, role_name, turn_text};
use crate::format::tokens::Tokenizer;
use crate::llm::{CallOptions, Client, ClientConfig, ErrorClass};

/// The prefix every summary starts with.
pub const PREFIX: &str = "[CONTEXT SUMMARY]:";

/// The reference's fallback text, used with `--on-summary-failure placeholder`.
pub const PLACEHOLDER: &str = "[CONTEXT SUMMARY]: [Summary generation failed - previous turns contained tool calls and responses that have been compressed to save context space.]";

/// Values longer than this many characters are elided in the summarizer's input.
pub const ELIDE_OVER: usize = 3000;
const ELIDE_HEAD: usize = 1500;
const ELIDE_TAIL: usize = 500;

fn thousands(n: usize) -> String {
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

/// The summarization prompt (our own wording of the reference's instructions).
pub fn prompt(content: &str, summary_target_tokens: usize) -> String {
    format!(
        "Summarize the agent conversation turns below. Your summary replaces these turns in \
the conversation history, so the agent must be able to continue its work from it.\n\n\
IMPORTANT: write the summary in the same language as the turns. If they mix languages, \
use the one most of the text is in. Do not translate anything.\n\n\
Write neutrally about what the assistant did and learned:\n\
1. the actions it took (tool calls, searches, file reads and edits, commands);\n\
2. the results that matter;\n\
3. what it decided or found out;\n\
4. concrete details it will need again: file names, paths, values, outputs.\n\n\
Be factual and dense; aim for about {summary_target_tokens} tokens.\n\n\
---\nTURNS TO SUMMARIZE:\n{content}\n---\n\n\
Reply with the summary only, starting with \"{PREFIX}\"."
    )
}

/// Post-process a reply (reference §4.4): `None` is empty; strip; keep an existing
/// prefix; an empty text becomes the bare prefix; otherwise prefix and one space.
pub fn finish_summary(content: Option<&str>) -> String {
    let text = content.unwrap_or("").trim();
    if text.starts_with(PREFIX) {
        text.to_string()
    } else if text.is_empty() {
        PREFIX.to_string()
    } else {
        format!("{PREFIX} {text}")
    }
}

/// Why a summary could not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The per-trajectory time budget ran out.
    Timeout,
    /// Every attempt failed; the last reason (`length`, `empty`, an error class).
    Failed(String),
}

impl Failure {
    pub fn reason(&self) -> String {
        match self {
            Failure::Timeout => "summary_timeout".to_string(),
            Failure::Failed(r) => format!("summary_failed:{r}"),
        }
    }
}

/// What one summary took.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub text: Result<String, Failure>,
    /// The tokens of an `Ok` text, when the summarizer counted them with the run's
    /// tokenizer (the offline one does, to fit its budget); `None`: not counted.
    pub tokens: Option<usize>,
    /// Attempts sent to the API (0 for the offline summarizer).
    pub api_calls: u32,
    /// Failed attempts.
    pub errors: u32,
}

/// The region to summarise and its budget.
pub struct Request<'a> {
    pub turns: &'a [Value],
    pub shape: Shape,
    pub start: usize,
    pub until: usize,
    pub budget: usize,
    pub tokenizer: &'a dyn Tokenizer,
}

/// Makes the summary of a region.
pub trait Summarizer: Send + Sync {
    /// Recorded in the metrics: `offline-extractive` or `llm:<model>`.
    fn name(&self) -> String;
    /// True when `summarize` waits on the network (the pipeline then runs many at once).
    fn is_remote(&self) -> bool;
    fn summarize(&self, req: &Request) -> Outcome;
}

/// Settings of the LLM summarizer.
#[derive(Debug, Clone)]
pub struct LlmConfig {
    pub base_url: String,
    pub api_key: Option<String>,
    pub model: String,
    pub temperature: f64,
    /// Attempts in total (the reference's `max_retries`).
    pub max_attempts: u32,
    /// First backoff delay (the reference's `retry_delay`).
    pub retry_delay: Duration,
    /// Budget for one trajectory's summary, retries and waits included.
    pub timeout: Duration,
}

/// Summaries from an OpenAI-compatible endpoint.
pub struct LlmSummarizer {
    cfg: LlmConfig,
    /// `clients[k]` retries HTTP failures `k` more times, so that the attempts of one
    /// summary never exceed `max_attempts`, whatever failed.
    clients: Vec<Client>,
}

impl LlmSummarizer {
    pub fn new(cfg: LlmConfig) -> LlmSummarizer {
        let clients = (0..cfg.max_attempts.max(1))
            .map(|k| {
                Client::new(ClientConfig {
                    base_url: cfg.base_url.clone(),
                    api_key: cfg.api_key.clone(),
                    timeout: cfg.timeout,
                    max_retries: k,
                    backoff_base: cfg.retry_delay,
                    backoff_max: Duration::from_secs(30),
                })
            })
            .collect();
        LlmSummarizer { cfg, clients }
    }

    /// Models that take no temperature (the reference omits it for Kimi coding models).
    fn omit_temperature(&self) -> bool {
        let m = self.cfg.model.to_ascii_lowercase();
        m.starts_with("kimi-for-coding")
            || (m.starts_with("kimi-k2.5") && self.cfg.base_url.contains("moonshot"))
    }

    /// The request body for a prompt.
    pub fn body(&self, prompt: &str, budget: usize) -> Value {
        let mut body = json!({
            "model": self.cfg.model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": 2 * budget,
        });
        if !self.omit_temperature() {
            body["temperature"] = json!(self.cfg.temperature);
        }
        body
    }
}

impl Summarizer for LlmSummarizer {
    fn name(&self) -> String {
        format!("llm:{}", self.cfg.model)
    }
    fn is_remote(&self) -> bool {
        true
    }

    fn summarize(&self, req: &Request) -> Outcome {
        let content = render_region(req.turns, req.shape, req.start, req.until);
        let body = self.body(&prompt(&content, req.budget), req.budget);
        let deadline = Instant::now() + self.cfg.timeout;
        // The client cuts a request in flight, and skips a retry or a wait, at the
        // deadline: one row's summary never takes much longer than `--timeout`.
        let opts = CallOptions {
            deadline: Some(deadline),
            ..CallOptions::default()
        };
        let max = self.cfg.max_attempts.max(1);
        let (mut calls, mut errors) = (0u32, 0u32);
        let mut last = LastFailure::Reply("no attempt");
        while calls < max {
            if Instant::now() >= deadline {
                return Outcome {
                    text: Err(Failure::Timeout),
                    tokens: None,
                    api_calls: calls,
                    errors,
                };
            }
            if calls > 0 {
                // A reply that was unusable (not an HTTP failure): back off, jittered.
                let wait = self.clients[0].backoff(calls, None);
                let left = deadline.saturating_duration_since(Instant::now());
                std::thread::sleep(wait.min(left));
            }
            let client = &self.clients[(max - calls - 1) as usize];
            match client.chat_opts(&body, &opts) {
                Ok(resp) => {
                    calls += resp.attempts;
                    errors += resp.attempts - 1;
                    if resp.finish_reason.as_deref() == Some("length") {
                        errors += 1;
                        last = LastFailure::Reply("length");
                        continue;
                    }
                    let text = finish_summary(Some(&resp.content));
                    if text == PREFIX {
                        errors += 1;
                        last = LastFailure::Reply("empty");
                        continue;
                    }
                    return Outcome {
                        text: Ok(text),
                        tokens: None,
                        api_calls: calls,
                        errors,
                    };
                }
                Err(e) => {
                    calls += e.attempts;
                    errors += e.attempts;
                    if e.class == ErrorClass::Timeout && Instant::now() >= deadline {
                        return Outcome {
                            text: Err(Failure::Timeout),
                            tokens: None,
                            api_calls: calls,
                            errors,
                        };
                    }
                    last = LastFailure::Error(e.class);
                    if !e.class.retryable() {
                        break;
                    }
                }
            }
        }
        let text = match last {
            LastFailure::Error(ErrorClass::Timeout) => Err(Failure::Timeout),
            LastFailure::Error(class) => Err(Failure::Failed(class.as_str().to_string())),
            LastFailure::Reply(r) => Err(Failure::Failed(r.to_string())),
        };
        Outcome {
            text,
            tokens: None,
            api_calls: calls,
            errors,
        }
    }
}

/// Why the last attempt of an LLM summary failed.
enum LastFailure {
    /// A reply came but could not be used (`length`, `empty`).
    Reply(&'static str),
    /// The request failed.
    Error(ErrorClass),
}

/// The offline extractive summarizer: deterministic, no network. It keeps, within the
/// summary budget, the commands (tool calls), the errors, the first line of each
/// result and the files of the region, each quoted from the turns themselves (so the
/// language of the turns is kept).
pub struct Extractive;

const MAX_ITEM_CHARS: usize = 200;
const MAX_ITEMS: usize = 200;

/// Drop the tags that frame calls and responses, so that a summary never holds a
/// `<tool_call>` without its response (nor teaches the model to write one).
fn untag(s: &str) -> Cow<'_, str> {
    crate::format::hermes::remove_call_tags(s)
}

fn clip(s: &str, max: usize) -> String {
    let s = untag(s);
    let s = s.trim();
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// The longest prefix of `s` of at most `n` bytes that ends on a char boundary.
fn prefix(s: &str, n: usize) -> &str {
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
fn suffix(s: &str, n: usize) -> &str {
    if s.len() <= n {
        return s;
    }
    let mut i = s.len() - n;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    &s[i..]
}

const SCAN_HEAD: usize = 2048;
const SCAN_TAIL: usize = 1024;

/// What the extractor reads of a long text: its head and its tail (errors and results
/// sit there), so that a 1 MB tool output costs no more than a 6 KB one.
fn window(text: &str) -> [&str; 2] {
    if text.len() <= SCAN_HEAD + SCAN_TAIL {
        [text, ""]
    } else {
        [prefix(text, SCAN_HEAD), suffix(text, SCAN_TAIL)]
    }
}

/// The words of the head of `s` (Unicode white space between them), joined by one space.
fn one_line(s: &str) -> String {
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
fn commands_of(turn: &Value, shape: Shape, out: &mut Vec<String>) {
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
const ERROR_NEEDLES: [&str; 10] = [
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

fn is_error_line(l: &str) -> bool {
    // One pass over the line for all the needles (a search per needle cost more than
    // the rest of the extract on long tool outputs).
    static NEEDLES: std::sync::LazyLock<aho_corasick::AhoCorasick> =
        std::sync::LazyLock::new(|| {
            aho_corasick::AhoCorasick::new(ERROR_NEEDLES).expect("fixed needles")
        });
    NEEDLES.is_match(l)
}

fn looks_like_path(w: &str) -> bool {
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
fn files_in(text: &str, out: &mut Vec<String>) {
    for part in window(text) {
        files_in_part(part, out);
    }
}

/// The files a tool output names where it reports a problem (a traceback's
/// `File "x.py", line 3`, `x.py:12: error`): the error lines only, never whole
/// listings (`ls`, `find`, `grep` output name every file they see).
fn files_in_errors(lines: &[&str], out: &mut Vec<String>) {
    for l in lines
        .iter()
        .filter(|l| is_error_line(l) || l.trim_start().starts_with("File \""))
    {
        files_in_part(l, out);
    }
}

/// More file names than fit in any summary budget.
const MAX_FILES: usize = 64;

/// The words of `text` that look like paths (see [`looks_like_path`]), each once, in
/// order. A word is a run of alphanumeric characters and `/ . _ -`; only a word with a
/// `/` or a `.` can be a path, so the scan jumps from one of those to the next and
/// reads the word around it.
fn files_in_part(text: &str, out: &mut Vec<String>) {
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

impl Extractive {
    /// The summary text (deterministic) within `req.budget` tokens, and its tokens by
    /// `req.tokenizer`.
    pub fn summary(req: &Request) -> (String, usize) {
        let (mut commands, mut errors, mut results, mut files) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (i, t) in req.turns.iter().enumerate().take(req.until).skip(req.start) {
            let role = super::row::role_of(t, req.shape);
            match role {
                super::plan::Role::Gpt => {
                    if commands.len() < MAX_ITEMS {
                        let mut c = Vec::new();
                        commands_of(t, req.shape, &mut c);
                        commands.extend(c.into_iter().map(|c| format!("[{i}] {c}")));
                    }
                    if let Some(calls) = t.get("tool_calls") {
                        // The list as JSON text (serde_json's bytes, written faster).
                        let mut json = Vec::new();
                        crate::format::pyjson::write_compact_value(&mut json, calls);
                        files_in(&String::from_utf8_lossy(&json), &mut files);
                    }
                    files_in(&turn_text(t, req.shape), &mut files);
                }
                super::plan::Role::Tool | super::plan::Role::Human => {
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
                    if role == super::plan::Role::Tool
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
        // Priority: commands, errors, files, results; each section keeps its order.
        let mut picked: [Vec<String>; 4] = Default::default();
        let titles = ["Commands:", "Errors:", "Files:", "Results:"];
        let sections = [commands, errors, files, results];
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
        let render = |picked: &[Vec<String>; 4]| {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::tokens::CharsPerToken4;

    fn sg(turns: &[(&str, &str)]) -> Vec<Value> {
        turns
            .iter()
            .map(|(f, v)| json!({"from": f, "value": v}))
            .collect()
    }

    // Reference §9.5: summarizer input extraction.
    #[test]
    fn render_headers_and_range() {
        let t = sg(&[("gpt", "call it"), ("tool", "result"), ("gpt", "later")]);
        let s = render_region(&t, Shape::ShareGpt, 0, 2);
        assert!(s.contains("[Turn 0 - GPT]:\ncall it"));
        assert!(s.contains("[Turn 1 - TOOL]:\nresult"));
        assert!(!s.contains("[Turn 2"));
        assert_eq!(s, "[Turn 0 - GPT]:\ncall it\n\n[Turn 1 - TOOL]:\nresult");
        assert_eq!(render_region(&t, Shape::ShareGpt, 1, 1), "");
    }

    #[test]
    fn render_elides_long_values() {
        let long = "x".repeat(5000);
        let t = sg(&[("tool", &long)]);
        let s = render_region(&t, Shape::ShareGpt, 0, 1);
        assert!(s.contains("chars omitted"));
        assert!(s.chars().count() < 5000);
        assert!(!s.contains("...[truncated]"));
    }

    #[test]
    fn render_marker_layout() {
        let v = format!(
            "{}{}{}",
            "h".repeat(1500),
            "m".repeat(2000),
            "t".repeat(500)
        );
        let t = sg(&[("tool", &v)]);
        let s = render_region(&t, Shape::ShareGpt, 0, 1);
        let expected = format!(
            "[Turn 0 - TOOL]:\n{}{}{}",
            "h".repeat(1500),
            "⟪TRAJ-CONTEXT-COMPRESSION: 2,000 of 4,000 chars omitted here by the trajectory compressor.⟫",
            "t".repeat(500)
        );
        assert_eq!(s, expected);
    }

    #[test]
    fn elide_middle_cases() {
        let s = elide_middle("abcdef", 3, 0);
        assert!(s.starts_with("abc"));
        assert!(s.contains("3 of 6 chars omitted"));
        assert!(!s.contains("def"));
        assert_eq!(elide_middle("abc", 3, 0), "abc");
        assert_eq!(thousands(1234567), "1,234,567");
    }

    // Reference §4.4 / §9.7: post-processing.
    #[test]
    fn finish_summary_cases() {
        assert_eq!(finish_summary(None), "[CONTEXT SUMMARY]:");
        assert_eq!(finish_summary(Some("  ")), "[CONTEXT SUMMARY]:");
        assert_eq!(finish_summary(Some(" did x ")), "[CONTEXT SUMMARY]: did x");
        assert_eq!(
            finish_summary(Some("[CONTEXT SUMMARY]: kept")),
            "[CONTEXT SUMMARY]: kept"
        );
    }

    #[test]
    fn prompt_asks_for_same_language() {
        let p = prompt("[Turn 4 - GPT]:\nx", 750);
        assert!(p.contains("same language"));
        assert!(p.contains("750 tokens"));
        assert!(p.contains("TURNS TO SUMMARIZE:\n[Turn 4 - GPT]:\nx\n---"));
    }

    #[test]
    fn kimi_models_take_no_temperature() {
        let mk = |model: &str, url: &str| {
            LlmSummarizer::new(LlmConfig {
                base_url: url.into(),
                api_key: None,
                model: model.into(),
                temperature: 0.3,
                max_attempts: 3,
                retry_delay: Duration::from_millis(1),
                timeout: Duration::from_secs(1),
            })
        };
        let b = mk("kimi-for-coding", "https://api.kimi.com/coding/v1").body("p", 750);
        assert!(b.get("temperature").is_none());
        let b = mk("kimi-k2.5", "https://api.moonshot.ai/v1").body("p", 750);
        assert!(b.get("temperature").is_none());
        let b = mk(
            "google/gemini-3-flash-preview",
            "https://openrouter.ai/api/v1",
        )
        .body("p", 750);
        assert_eq!(b["temperature"], json!(0.3));
        assert_eq!(b["max_tokens"], json!(1500));
    }

    #[test]
    fn extractive_is_deterministic_and_within_budget() {
        let t = vec![
            json!({"from": "gpt", "value": "Let me look.\n<tool_call>\n{\"name\": \"terminal\", \"arguments\": {\"command\": \"cat src/main.py\"}}\n</tool_call>"}),
            json!({"from": "tool", "value": "<tool_response>\nTraceback (most recent call last):\n  File \"src/main.py\", line 3\nNameError: name 'x' is not defined\n</tool_response>"}),
            json!({"from": "gpt", "value": "<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"src/main.py\", \"content\": \"x = 1\"}}\n</tool_call>"}),
            json!({"from": "tool", "value": "wrote 6 bytes"}),
        ];
        let req = Request {
            turns: &t,
            shape: Shape::ShareGpt,
            start: 0,
            until: 4,
            budget: 200,
            tokenizer: &CharsPerToken4,
        };
        let (a, tokens) = Extractive::summary(&req);
        assert_eq!(a, Extractive::summary(&req).0);
        // The count it hands on is the tokenizer's count of the text.
        assert_eq!(tokens, CharsPerToken4.count(&a));
        assert!(a.starts_with(PREFIX));
        assert!(a.contains("terminal: cat src/main.py"), "{a}");
        assert!(a.contains("write_file: src/main.py"), "{a}");
        assert!(a.contains("Traceback"), "{a}");
        assert!(a.contains("src/main.py"));
        assert!(!a.contains("<tool_"), "{a}");
        assert!(CharsPerToken4.count(&a) <= 200);
        for budget in [30, 50, 80] {
            let (s, tokens) = Extractive::summary(&Request { budget, ..req });
            assert_eq!(tokens, CharsPerToken4.count(&s), "{budget}");
            assert!(
                CharsPerToken4.count(&s)
                    <= budget.max(CharsPerToken4.count(s.lines().next().unwrap())),
                "{budget}: {s}"
            );
        }
    }

    /// `one_line` joins the words of the head as `split_whitespace` splits them: ASCII
    /// white space of every kind, Unicode white space, the cut at the head's end, and
    /// real model turns.
    #[test]
    fn one_line_joins_the_words_as_split_whitespace_does() {
        let want = |s: &str| {
            prefix(s, MAX_ITEM_CHARS * 8)
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        let long = "x ".repeat(MAX_ITEM_CHARS * 8);
        for s in [
            "",
            "  a\tb\n\nc \x0b d\x0ce\r",
            "one",
            "\u{a0}non\u{2003}ascii\u{3000} caf\u{e9}\n",
            "a\u{85}b",
            long.as_str(),
        ] {
            assert_eq!(one_line(s), want(s), "{s:?}");
        }
        for t in crate::fixtures::hermes_turns("gpt").iter().take(200) {
            assert_eq!(one_line(t), want(t));
        }
    }

    /// The words that look like paths, each once and in order, whatever surrounds them
    /// (tags, punctuation, non-ASCII letters, a path at either end of the text).
    #[test]
    fn files_in_part_finds_paths_as_words() {
        let cases: [(&str, &[&str]); 12] = [
            ("", &[]),
            ("no paths here at all", &[]),
            ("src/main.rs", &["src/main.rs"]),
            // Dots and dashes are trimmed off both ends of a word.
            ("edit ./a.py then src/b.rs.", &["/a.py", "src/b.rs"]),
            ("-./-a/b/c-", &["/-a/b/c"]),
            ("x.py<y.py a<b/c/d", &["x.py"]),
            ("日本/語/x.rs", &["日本/語/x.rs"]),
            ("</returncode> <a/b/c> x/y/z", &["x/y/z"]),
            ("File \"/tmp/x/ß.py\", line 3", &["/tmp/x/ß.py"]),
            (
                "naïve/dir/é.txt, --flag=x.md; http://h/x.py a//b.py",
                &["naïve/dir/é.txt", "x.md"],
            ),
            ("/tmp alone, /usr/bin twice /usr/bin", &["/usr/bin"]),
            ("end of a sentence. Then...dots.. and .rs", &[]),
        ];
        for (text, want) in cases {
            let mut out = Vec::new();
            files_in_part(text, &mut out);
            assert_eq!(out, want, "{text:?}");
        }
        // At most MAX_FILES, the first ones.
        let many: String = (0..100).map(|i| format!("d/f{i}.rs ")).collect();
        let mut out = Vec::new();
        files_in_part(&many, &mut out);
        assert_eq!(out.len(), MAX_FILES);
        assert_eq!(out[MAX_FILES - 1], format!("d/f{}.rs", MAX_FILES - 1));
    }

    /// On real SWE-agent trajectories, `Files:` lists what the agent named or what an
    /// error line names: no `</returncode>` tag as `/returncode`, no `ls` listing.
    #[test]
    fn extractive_files_are_not_noise_on_swe_agent_runs() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/swe_agent_demo_trajs.jsonl"
        ))
        .unwrap();
        let mut checked = 0;
        for line in text.lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            let turns: Vec<Value> = v["history"].as_array().unwrap().clone();
            let n = turns.len();
            if n < 12 {
                continue;
            }
            let req = Request {
                turns: &turns,
                shape: Shape::OpenAi,
                start: 2,
                until: n - 4,
                budget: 2000,
                tokenizer: &CharsPerToken4,
            };
            let s = Extractive::summary(&req).0;
            let Some((_, files)) = s.split_once("\nFiles:") else {
                continue;
            };
            let files: Vec<&str> = files.lines().map_while(|l| l.strip_prefix("- ")).collect();
            let agent: String = turns[2..n - 4]
                .iter()
                .filter(|t| t["role"] == "assistant")
                .map(|t| turn_text(t, Shape::OpenAi).into_owned())
                .collect();
            for f in &files {
                assert!(!f.contains("returncode"), "{f} in\n{s}");
                assert!(
                    agent.contains(f) || s.contains("Errors:"),
                    "{f} is neither named by the agent nor on an error line\n{s}"
                );
            }
            assert!(files.len() <= 24, "{} files: a listing?\n{s}", files.len());
            checked += 1;
        }
        assert!(checked >= 2, "{checked}");
    }
}

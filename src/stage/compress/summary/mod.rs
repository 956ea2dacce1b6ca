//! Summaries of a compressed region. One concept per part: [`render`] (the turns as
//! text, reference §3.3), [`prompt`] (what the model is asked and what its reply
//! becomes, §4.3-§4.4), [`llm`] (the LLM summarizer and its retries, §4.5) and
//! [`extractive`] (the offline summarizer used without an API key); this module holds
//! what they share: the [`Summarizer`] trait, its [`Request`] and [`Outcome`].

mod extractive;
mod llm;
mod prompt;
mod render;

pub use extractive::Extractive;
pub use llm::{LlmConfig, LlmSummarizer};
pub use prompt::{finish_summary, prompt};
pub use render::{ELIDE_OVER, elide_middle, render_region};

use serde_json::Value;

use super::row::Shape;
use crate::format::tokens::Tokenizer;

/// The prefix every summary starts with.
pub const PREFIX: &str = "[CONTEXT SUMMARY]:";

/// The reference's fallback text, used with `--on-summary-failure placeholder`.
pub const PLACEHOLDER: &str = "[CONTEXT SUMMARY]: [Summary generation failed - previous turns contained tool calls and responses that have been compressed to save context space.]";

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

#[cfg(test)]
mod tests {
    use super::super::row::turn_text;
    use super::extractive::*;
    use super::llm::*;
    use super::render::*;
    use super::*;
    use crate::format::tokens::CharsPerToken4;
    use serde_json::json;
    use std::time::Duration;

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

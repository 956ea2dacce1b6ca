//! traj-compress's engine: fit each trajectory into a token budget by replacing a
//! middle region of turns with one summary (the reference's algorithm, its bugs fixed).
//!
//! - [`plan`]: protected turns, boundary snapping, the region, the net-savings guard.
//! - [`row`]: the ShareGPT and OpenAI row shapes, each compressed in its own shape.
//! - [`summary`]: rendering, prompt, the LLM summarizer, the offline extractive one.
//! - [`metrics`]: per-trajectory and aggregate metrics.
//! - [`config`]: the reference's YAML config and the settings it resolves to.
//! - [`jobs`]: the output naming (inputs to jobs, the metrics path).
//! - [`select`]: `--sample-percent`'s seeded choice of rows.
//! - [`run`]: a whole run over its jobs (pipeline, progress, metrics file, count-only).
//! - [`flow`]: the LLM path: rows through a bounded reorder window, each waiting only
//!   for its own summary.
//! - [`splice`]: writing a changed row as its input line with only what changed
//!   written anew.
//! - [`fit`]: `--over-budget truncate`: shortening the longest turns, in tiers, until a row fits.
//! - [`shorten`]: the texts of a turn truncation may cut, its markup and tool calls kept.
//!
//! With a chat-template tokenizer (an HF tokenizer directory), a row's total is the
//! tokens of the row rendered with the template, tools included; the difference from
//! the sum of the turns' texts (the template's markup) is taken off the budget the
//! region is planned against, and the compressed row is counted again whole.
//!
//! One line in, one line out, always: rows under the budget, rows that cannot be
//! compressed and rows whose summary failed are written unchanged (never dropped).
//! Unchanged rows are written as their original bytes; a changed row keeps the bytes
//! of all it did not change ([`splice`]).
//!
//! Cost per row: a row is parsed and tokenized once; after compression only the summary
//! and the system turns that got the notice are counted again (the other turns' counts
//! are reused). A row whose byte length proves it under the budget (see
//! [`crate::format::tokens::Tokenizer::at_most_one_token_per_byte`]) is not even parsed into a
//! tree, only validated.

pub mod config;
pub mod fit;
pub mod flow;
pub mod jobs;
pub mod metrics;
pub mod plan;
pub mod row;
pub mod run;
pub mod select;
pub mod shorten;
pub mod splice;
pub mod summary;

use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};

use crate::format::pyjson::{self, Style};
use crate::format::tokens::Tokenizer;
use crate::io::Verdict;
use metrics::{Aggregate, TrajectoryMetrics};
use plan::{Plan, PlanConfig, Role};
use row::Row;
use summary::{Outcome, Request, Summarizer};

/// What to do with a row whose summary failed or timed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OnSummaryFailure {
    /// Write the row unchanged and count it (the default).
    #[default]
    Keep,
    /// Replace the region with the reference's placeholder text.
    Placeholder,
}

/// What to do with a row still over the budget after compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OverBudget {
    /// Write it as it is, flagged in the metrics (the default).
    #[default]
    Keep,
    /// Shorten the longest turns, of any role (head and tail kept, a marker between;
    /// the task and the system turns last) until it fits; a row that still cannot fit
    /// goes to --rejects.
    Truncate,
    /// Send it to --rejects with the reason.
    Reject,
}

/// Settings of a compression run.
#[derive(Debug, Clone)]
pub struct Settings {
    pub plan: PlanConfig,
    pub add_summary_notice: bool,
    pub summary_notice_text: String,
    pub on_summary_failure: OnSummaryFailure,
    pub per_trajectory_metrics: bool,
    /// Tokenize every row, even those proven under the budget by their size (exact
    /// token totals in the metrics, at the cost of speed).
    pub count_all: bool,
    pub over_budget: OverBudget,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            plan: PlanConfig::default(),
            add_summary_notice: true,
            summary_notice_text:
                "\n\nSome of your previous tool responses may be summarized to preserve context."
                    .to_string(),
            on_summary_failure: OnSummaryFailure::Keep,
            per_trajectory_metrics: false,
            count_all: false,
            over_budget: OverBudget::Keep,
        }
    }
}

/// A located row's plan: the region to summarise and what finishing it needs.
pub struct Planned {
    m: TrajectoryMetrics,
    tokens: Vec<usize>,
    roles: Vec<Role>,
    chat: Option<usize>,
    overhead: usize,
    total: usize,
    /// The plan's settings (the budget less the chat template's markup).
    cfg: PlanConfig,
    start: usize,
    until: usize,
}

/// A row waiting for the summary of its region.
pub struct Waiting {
    row: Row,
    plan: Planned,
}

impl Waiting {
    /// The tokens of the region to summarise (what the summary request carries).
    pub fn region_tokens(&self) -> usize {
        self.plan.tokens[self.plan.start..self.plan.until]
            .iter()
            .sum()
    }
}

/// What [`Compressor::begin`] made of a line.
pub enum Begun {
    /// Finished: the verdict (its output line, if any, is in the buffer).
    Done(Verdict),
    /// Waiting for a summary.
    Wait(Box<Waiting>),
}

/// What [`Compressor::plan_row`] made of a located row.
enum Step {
    Done(TrajectoryMetrics),
    Summarize(Planned),
}

/// Compresses rows; shared by all worker threads.
pub struct Compressor {
    pub settings: Settings,
    pub tokenizer: Arc<dyn Tokenizer>,
    pub summarizer: Arc<dyn Summarizer>,
    agg: Mutex<Aggregate>,
}

/// The member a row's own metrics are written to (`--per-trajectory-metrics`).
const METRICS_KEY: &str = "compression_metrics";

/// The member a `--columns core` row keeps its other fields in (a JSON string).
const METADATA_KEY: &str = "metadata";

/// The object in a `--columns core` row's `metadata` when it holds metrics
/// ([`crate::format::row::core_metadata`]; written again as traj-normalize writes it).
fn metadata_with_metrics(obj: &Map<String, Value>) -> Option<Map<String, Value>> {
    match obj.get(METADATA_KEY) {
        // (A key written with an escape is read by its text.)
        Some(Value::String(s)) if s.contains(METRICS_KEY) || s.contains("\\u") => {
            crate::format::row::core_metadata(obj).filter(|m| m.contains_key(METRICS_KEY))
        }
        _ => None,
    }
}

fn push_line(out: &mut Vec<u8>, line: &[u8]) {
    out.extend_from_slice(line);
    out.push(b'\n');
}

impl Compressor {
    pub fn new(
        settings: Settings,
        tokenizer: Arc<dyn Tokenizer>,
        summarizer: Arc<dyn Summarizer>,
    ) -> Compressor {
        Compressor {
            settings,
            tokenizer,
            summarizer,
            agg: Mutex::new(Aggregate::default()),
        }
    }

    /// The totals so far.
    pub fn aggregate(&self) -> Aggregate {
        self.agg.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn record(&self, f: impl FnOnce(&mut Aggregate)) {
        f(&mut self.agg.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// Compress one JSONL line, appending exactly one output line to `out`: [`begin`],
    /// the summary when the row needs one, [`complete`].
    ///
    /// [`begin`]: Compressor::begin
    /// [`complete`]: Compressor::complete
    pub fn line(&self, line: &[u8], out: &mut Vec<u8>) -> Verdict {
        match self.begin(line, out) {
            Begun::Done(v) => v,
            Begun::Wait(w) => {
                let outcome = self.summarize(&w);
                self.complete(*w, outcome, line, out)
            }
        }
    }

    /// The first half of [`Compressor::line`], everything up to the summary: a row
    /// that needs none is finished (its line appended to `out`), one that needs one
    /// comes back as [`Waiting`], to be given to [`Compressor::summarize`] and then to
    /// [`Compressor::complete`] with the same `line`.
    pub fn begin(&self, line: &[u8], out: &mut Vec<u8>) -> Begun {
        let target = self.settings.plan.target_max_tokens;
        let bytes_bound = self.tokenizer.at_most_one_token_per_byte() && !self.settings.count_all;
        // A JSON line is at least as long as the UTF-8 text of its strings (escaping
        // only lengthens), so with at most one token per byte it counts <= its length.
        if bytes_bound && line.len() <= target {
            // Passed on unparsed, so checked by the rules every stage applies to a row
            // (UTF-8, an object, nesting, keys once): the scanner, worded as
            // `io::parse_object` words it.
            // A row without a turn list is passed through, whatever its size; a key
            // written with an escape is left to the parsed row to say.
            let (mut list, mut escaped) = (false, false);
            let checked = crate::format::row::validate_object_members(line, |key, value| {
                escaped |= key.contains(&b'\\');
                list |=
                    matches!(key, b"conversations" | b"messages") && value.first() == Some(&b'[');
            });
            if let Err(e) = checked {
                return Begun::Done(Verdict::Bad(e.to_string()));
            }
            if !escaped {
                if !list {
                    return Begun::Done(self.pass_through(line, out));
                }
                self.record(|a| {
                    a.total += 1;
                    a.skipped_under_target += 1;
                    a.skipped_by_size += 1;
                });
                push_line(out, line);
                return Begun::Done(Verdict::Written);
            }
        }
        let obj = match crate::io::parse_object(line) {
            Ok(m) => m,
            Err(e) => return Begun::Done(Verdict::Bad(e)),
        };
        let Some(row) = Row::locate(obj) else {
            return Begun::Done(self.pass_through(line, out));
        };
        match self.plan_row(&row) {
            Step::Done(m) => Begun::Done(self.emit(row, m, false, line, out)),
            Step::Summarize(plan) => Begun::Wait(Box::new(Waiting { row, plan })),
        }
    }

    /// A row without a turn list: written as it came, counted passed through.
    fn pass_through(&self, line: &[u8], out: &mut Vec<u8>) -> Verdict {
        self.record(|a| {
            a.total += 1;
            a.passed_through += 1;
        });
        push_line(out, line);
        Verdict::Written
    }

    /// The summary a waiting row needs (blocks on the summarizer).
    pub fn summarize(&self, w: &Waiting) -> Outcome {
        self.summarizer.summarize(&Request {
            turns: w.row.turns(),
            shape: w.row.shape,
            start: w.plan.start,
            until: w.plan.until,
            budget: w.plan.cfg.summary_target_tokens,
            tokenizer: &*self.tokenizer,
        })
    }

    /// The second half of [`Compressor::line`]: put the summary in, append the row's
    /// one output line to `out`.
    pub fn complete(
        &self,
        w: Waiting,
        outcome: Outcome,
        line: &[u8],
        out: &mut Vec<u8>,
    ) -> Verdict {
        let Waiting { mut row, plan } = w;
        let (m, rewritten) = self.finish_row(&mut row, plan, outcome);
        self.emit(row, m, rewritten, line, out)
    }

    /// Apply `--over-budget`, record the metrics, append the row (its original bytes
    /// when unchanged, else its line with what changed spliced in).
    fn emit(
        &self,
        mut row: Row,
        mut m: TrajectoryMetrics,
        mut rewritten: bool,
        line: &[u8],
        out: &mut Vec<u8>,
    ) -> Verdict {
        let target = self.settings.plan.target_max_tokens;
        if m.still_over_limit && self.settings.over_budget != OverBudget::Keep {
            let fitted = match self.settings.over_budget {
                OverBudget::Truncate => fit::truncate(self, &mut row, &mut m),
                _ => Err(fit::Unfit::from_metrics(&m, target)),
            };
            match fitted {
                Ok(changed) => rewritten |= changed,
                Err(why) => {
                    self.record(|a| {
                        a.total += 1;
                        a.rejected_over_budget += 1;
                    });
                    return Verdict::Dropped(vec![why.to_string()]);
                }
            }
        }
        self.record(|a| a.add(&m));
        // A rewritten row that carries metrics of an earlier compression gets this one's:
        // left as they were, they would describe a row that is no longer there. They go
        // where the row keeps them: its own member and (a `--columns core` row) inside
        // its `metadata`, or else a new member.
        let in_meta = (rewritten || self.settings.per_trajectory_metrics)
            .then(|| metadata_with_metrics(&row.obj))
            .flatten();
        let own = row.obj.contains_key(METRICS_KEY);
        let carries = own || in_meta.is_some();
        let with_metrics = (self.settings.per_trajectory_metrics || (rewritten && carries))
            && !m.skipped_under_target;
        if rewritten || with_metrics {
            let mut changed = Vec::new();
            if with_metrics {
                if let Some(mut meta) = in_meta {
                    meta.insert(METRICS_KEY.into(), m.to_json());
                    let text = pyjson::to_string(&Value::Object(meta), Style::Python);
                    row.obj.insert(METADATA_KEY.into(), Value::String(text));
                    changed.push(METADATA_KEY);
                }
                if own || changed.is_empty() {
                    row.obj.insert(METRICS_KEY.into(), m.to_json());
                    changed.push(METRICS_KEY);
                }
            }
            splice::write_row(line, &row, &changed, out);
        } else {
            push_line(out, line);
        }
        Verdict::Written
    }

    /// Per-turn token counts; `None` when the row is proven under the target by the
    /// byte length of its text.
    fn count_turns(&self, row: &Row) -> Option<Vec<usize>> {
        let tok = &*self.tokenizer;
        if tok.at_most_one_token_per_byte() && !self.settings.count_all {
            let mut bytes = 0;
            for t in row.turns() {
                row::for_each_text(t, row.shape, &mut |s| bytes += s.len());
            }
            if bytes <= self.settings.plan.target_max_tokens {
                return None;
            }
        }
        Some(
            row.turns()
                .iter()
                .map(|t| {
                    let mut n = 0;
                    row::for_each_text(t, row.shape, &mut |s| n += tok.count(s));
                    n
                })
                .collect(),
        )
    }

    /// The tokens of the whole row by the chat template, when the tokenizer has one
    /// (`None` otherwise, or when the template fails on this row: the texts' sum is
    /// used then).
    pub fn chat_total(&self, row: &Row) -> Option<usize> {
        let tools = crate::format::chat_template::row_tools(&row.obj);
        self.tokenizer.count_chat(row.turns(), tools.as_ref())?.ok()
    }

    /// Count a located row and plan its region: finished (under the budget, or kept
    /// as it is) or waiting for the summary of the region.
    fn plan_row(&self, row: &Row) -> Step {
        let n = row.turns().len();
        let mut m = TrajectoryMetrics {
            original_turns: n,
            compressed_turns: n,
            ..Default::default()
        };
        let Some(tokens) = self.count_turns(row) else {
            m.skipped_under_target = true;
            return Step::Done(m);
        };
        let texts: usize = tokens.iter().sum();
        let chat = self.chat_total(row);
        // The template's markup around the texts, taken off the budget of the plan.
        let overhead = chat.map_or(0, |c| c.saturating_sub(texts));
        let total = texts + overhead;
        m.original_tokens = total;
        m.compressed_tokens = total;
        let roles = row.roles();
        let full = &self.settings.plan;
        let cfg = if overhead > 0 {
            PlanConfig {
                target_max_tokens: full.target_max_tokens.saturating_sub(overhead),
                ..full.clone()
            }
        } else {
            full.clone()
        };
        let (start, until) = match plan::plan(&roles, &tokens, &cfg) {
            Plan::UnderTarget => {
                m.skipped_under_target = true;
                return Step::Done(m);
            }
            Plan::Keep(k) => {
                m.still_over_limit = true;
                m.reason = Some(k.as_str().to_string());
                return Step::Done(m);
            }
            Plan::Compress { start, until } => (start, until),
        };
        m.still_over_limit = true;
        m.start_idx = start as i64;
        m.end_idx = until as i64;
        Step::Summarize(Planned {
            m,
            tokens,
            roles,
            chat,
            overhead,
            total,
            cfg,
            start,
            until,
        })
    }

    /// Put the summary of a planned region into the row; its metrics and whether it
    /// changed.
    fn finish_row(
        &self,
        row: &mut Row,
        plan: Planned,
        outcome: Outcome,
    ) -> (TrajectoryMetrics, bool) {
        let mut m = plan.m;
        let (start, until, total) = (plan.start, plan.until, plan.total);
        let (tokens, roles, chat, overhead) = (plan.tokens, plan.roles, plan.chat, plan.overhead);
        let cfg = &plan.cfg;
        let n = tokens.len();
        let full = &self.settings.plan;
        let region_tokens: usize = tokens[start..until].iter().sum();
        m.api_calls = outcome.api_calls;
        m.errors = outcome.errors;
        let (text, counted, summarizer) = match outcome.text {
            Ok(t) => (t, outcome.tokens, self.summarizer.name()),
            Err(f) => {
                m.summary_failed = true;
                match self.settings.on_summary_failure {
                    OnSummaryFailure::Keep => {
                        m.reason = Some(f.reason());
                        m.start_idx = -1;
                        m.end_idx = -1;
                        return (m, false);
                    }
                    OnSummaryFailure::Placeholder => {
                        m.reason = Some(f.reason());
                        let text = summary::PLACEHOLDER.to_string();
                        (text, None, "placeholder".to_string())
                    }
                }
            }
        };
        let summary_tokens = counted.unwrap_or_else(|| self.tokenizer.count(&text));
        let shape = row.shape;
        let content = row::Content::of(row.turns(), shape);
        // The head's system turns with the notice, and their tokens: the row is kept
        // unchanged when the summary and the notice together save nothing (the
        // reference's guard looks at the summary alone, and a row could grow).
        let mut noticed: Vec<(usize, Value, usize)> = Vec::new();
        if self.settings.add_summary_notice {
            for i in (0..start).filter(|&i| roles[i] == Role::System) {
                let mut t = row.turns()[i].clone();
                if row::append_notice(&mut t, shape, &self.settings.summary_notice_text, content) {
                    let mut c = 0;
                    row::for_each_text(&t, shape, &mut |s| c += self.tokenizer.count(s));
                    noticed.push((i, t, c));
                }
            }
        }
        let notice_tokens: usize = noticed
            .iter()
            .map(|(i, _, c)| c.saturating_sub(tokens[*i]))
            .sum();
        if !m.summary_failed && summary_tokens + notice_tokens >= region_tokens {
            // The summary would not save anything: keep the turns.
            m.reason = Some(plan::Keep::NoNetSavings.as_str().to_string());
            m.start_idx = -1;
            m.end_idx = -1;
            return (m, false);
        }
        // Assemble: head (notice on its system turns), summary, the rest.
        let human = row::human_role(row.turns(), shape);
        let (turns, was) = row.take_turns();
        let mut new_total = total - region_tokens + summary_tokens;
        let mut out = Vec::with_capacity(n - (until - start) + 1);
        let mut origin = Vec::with_capacity(out.capacity());
        for (i, (mut t, mut from)) in turns.into_iter().zip(was).enumerate() {
            if i == start {
                out.push(row::summary_turn(&text, shape, &human, content));
                origin.push(None);
            }
            if i >= start && i < until {
                continue;
            }
            if let Some(k) = noticed.iter().position(|(j, _, _)| *j == i) {
                let (_, with_notice, c) = noticed.swap_remove(k);
                t = with_notice;
                from = None;
                new_total = new_total + c - tokens[i];
            }
            out.push(t);
            origin.push(from);
        }
        m.compressed_turns = out.len();
        row.put_turns(out, origin);
        if chat.is_some() {
            new_total = self.chat_total(row).unwrap_or(new_total + overhead);
        }
        m.compressed_tokens = new_total;
        m.was_compressed = true;
        m.summarizer = Some(summarizer);
        m.still_over_limit = new_total > full.target_max_tokens;
        if m.still_over_limit {
            m.reason = Some(if m.summary_failed {
                "summary_failed_placeholder".into()
            } else if summary_tokens > cfg.summary_target_tokens {
                "summary_over_budget".into()
            } else if new_total - summary_tokens.min(new_total) > full.target_max_tokens {
                // The turns kept, without the summary, are over the budget.
                "region_too_small".into()
            } else {
                // They fit, but not with a summary of up to --summary-target-tokens.
                "summary_exceeds_room".into()
            });
        } else {
            m.reason = None;
        }
        (m, true)
    }
}

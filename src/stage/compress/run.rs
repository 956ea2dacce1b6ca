//! One traj-compress run over its jobs: each job's lines through the ordered pipeline
//! and the [`Compressor`], the progress it reports to its caller ([`Progress`]; the
//! caller draws it), the aggregate metrics file; and the count-only baseline (the same
//! parsing and tokenizer, no compression).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime};

use anyhow::{Context, Result};
use serde_json::json;

use super::Compressor;
use super::config::Resolved;
use super::flow::{Bound, FlowConfig, Window};
use super::jobs::Job;
use super::metrics::Aggregate;
use super::row::{Row, for_each_text};
use super::summary::Summarizer;
use crate::format::tokens::Tokenizer;
use crate::io::{Output, PipeConfig, Rejects, Source, Summary, Verdict};

/// The stage name in rejects files.
const STAGE: &str = "compress";

/// How a run reads, reports and writes beside its outputs.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The line pipeline of the flags (error policy, `-j`, `--shard`); a job's sample
    /// replaces the shard.
    pub pipe: PipeConfig,
    /// `--rejects FILE`.
    pub rejects: Option<PathBuf>,
    /// Summary requests in flight at once when the summarizer waits on the network.
    pub max_concurrent_requests: usize,
    /// Where the aggregate metrics go, if anywhere.
    pub metrics: Option<PathBuf>,
}

/// What a run did: the line counts of all jobs, and the compression totals.
pub struct Report {
    pub total: Summary,
    pub aggregate: Aggregate,
}

impl Report {
    /// The compression half of the summary line on stderr.
    pub fn describe(&self, comp: &Compressor) -> String {
        let a = &self.aggregate;
        format!(
            "{} compressed, {} under budget, {} still over, {} summary failures{}; tokens {} -> {} ({}, {})",
            a.compressed,
            a.skipped_under_target,
            a.still_over,
            a.failed,
            if a.truncated + a.rejected_over_budget > 0 {
                format!(
                    ", {} truncated, {} rejected over budget",
                    a.truncated, a.rejected_over_budget
                )
            } else {
                String::new()
            },
            a.tokens_before,
            a.tokens_after,
            comp.tokenizer.name(),
            comp.summarizer.name(),
        )
    }
}

/// `--dry-run`: what would be processed and where it would go, one line each, and the
/// settings that matter.
pub fn dry_run(
    jobs: &[Job],
    r: &Resolved,
    summarizer: &dyn Summarizer,
    metrics: Option<&Path>,
) -> Vec<String> {
    let mut lines: Vec<String> = jobs
        .iter()
        .map(|j| format!("would compress {}", j.describe()))
        .collect();
    let plan = &r.settings.plan;
    lines.push(format!(
        "budget {} tokens ({}), summary {} tokens by {}, metrics {}",
        plan.target_max_tokens,
        r.tokenizer,
        plan.summary_target_tokens,
        summarizer.name(),
        metrics.map_or("none".to_string(), |p| p.display().to_string())
    ));
    lines
}

/// Add the counts of one input's pipeline to the run's totals.
pub fn add_summary(total: &mut Summary, s: Summary) {
    total.read += s.read;
    total.written += s.written;
    for (reason, n) in s.dropped {
        *total.dropped.entry(reason).or_default() += n;
    }
    total.dropped_lines += s.dropped_lines;
    total.bad += s.bad;
    total.lost += s.lost;
    if total.first_bad.is_none() {
        total.first_bad = s.first_bad;
    }
}

/// What a run reports while it goes, for its caller to show (traj-compress draws a
/// progress bar on a terminal); the library itself never writes to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// The run begins: the bytes of its inputs (a sample's own bytes when sampled; 0
    /// when unknown, as for stdin).
    Start { total_bytes: u64 },
    /// This many more input bytes are done.
    Advance(u64),
    /// Every output is committed.
    Done,
}

/// The bytes of the jobs' inputs (a sample's own bytes when sampled).
fn input_bytes(jobs: &[Job]) -> u64 {
    let file_bytes = |s: &Source| match s {
        Source::File(p) | Source::Spooled { path: p, .. } => {
            std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
        }
        Source::Stdin => 0,
    };
    jobs.iter()
        .map(|j| match &j.sample {
            Some((_, bytes)) => *bytes,
            None => j.sources.iter().map(file_bytes).sum(),
        })
        .sum()
}

/// Compress every job to its output, then write the metrics file; `progress` hears
/// how far the run is (pass `None` when nobody listens: nothing is then counted).
pub fn compress(
    comp: &Compressor,
    jobs: Vec<Job>,
    cfg: &RunConfig,
    progress: Option<&(dyn Fn(Progress) + Sync)>,
) -> Result<Report> {
    if let Some(p) = progress {
        p(Progress::Start {
            total_bytes: input_bytes(&jobs),
        });
    }
    let start_wall = SystemTime::now();
    let started = Instant::now();
    let mut rejects = Rejects::open(STAGE, cfg.rejects.as_deref())?;
    let mut total = Summary::default();
    // Every output and the rejects file are put in place together, at the end.
    let mut commit = crate::io::Commit::default();
    for job in jobs {
        if let Some(p) = &job.output
            && let Some(dir) = p.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let onto_input = job
            .output
            .as_deref()
            .filter(|p| crate::io::is_input(p, &job.sources))
            .map(std::path::Path::to_path_buf);
        let mut out = Output::create(job.output.as_deref())?;
        let s = if comp.summarizer.is_remote() {
            // Summaries wait on the network: each row waits only for its own, up to
            // `--max-concurrent-requests` of them at once.
            let pipe = job.pipe(&cfg.pipe);
            let flow = FlowConfig {
                on_error: pipe.on_error,
                drops_are_loss: pipe.drops_are_loss,
                select: pipe.select.clone(),
                workers: pipe.workers(),
                concurrent: cfg.max_concurrent_requests.max(1),
            };
            let window = Window::new(Bound::for_requests(cfg.max_concurrent_requests));
            let tick = |n: u64| {
                if let Some(p) = progress {
                    p(Progress::Advance(n));
                }
            };
            super::flow::process(
                comp,
                &flow,
                &window,
                job.sources,
                &mut out,
                &mut rejects,
                &tick,
            )?
        } else {
            let f = |line: &[u8], buf: &mut Vec<u8>| {
                let v = comp.line(line, buf);
                if let Some(p) = progress {
                    p(Progress::Advance(line.len() as u64 + 1));
                }
                v
            };
            crate::io::process(&job.pipe(&cfg.pipe), job.sources, &mut out, &mut rejects, f)?
        };
        // `-o` onto its own input: never with lines lost on the way.
        if let Some(p) = onto_input
            && s.lost > 0
        {
            return Err(crate::io::onto_input_with_loss(&p, s.lost));
        }
        commit = commit.output(out)?;
        add_summary(&mut total, s);
    }
    let aggregate = comp.aggregate();
    // The metrics file is put in place with the outputs and the rejects, or none is.
    if let Some(path) = &cfg.metrics {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let w = Output::create(Some(path))?;
        let elapsed = started.elapsed().as_secs_f64();
        let processing = json!({
            "start_time": crate::format::time::utc_iso(start_wall),
            "end_time": crate::format::time::utc_iso(SystemTime::now()),
            "duration_seconds": (elapsed * 100.0).round() / 100.0,
        });
        let doc = aggregate.to_json(&comp.tokenizer.name(), &comp.summarizer.name(), processing);
        let mut w = w;
        serde_json::to_writer_pretty(&mut w, &doc)?;
        w.write_all(b"\n")?;
        commit = commit.output(w)?;
    }
    commit.rejects(rejects)?.done()?;
    if let Some(p) = progress {
        p(Progress::Done);
    }
    Ok(Report { total, aggregate })
}

/// `--count-only`: the tokens of every row, written as one JSON line to `output`.
pub fn count_only(
    jobs: Vec<Job>,
    tok: Arc<dyn Tokenizer>,
    cfg: &RunConfig,
    output: Option<&Path>,
) -> Result<Summary> {
    let rows = AtomicU64::new(0);
    let tokens = AtomicU64::new(0);
    let text_bytes = AtomicU64::new(0);
    let input_bytes = AtomicU64::new(0);
    let started = Instant::now();
    let mut rejects = Rejects::open(STAGE, cfg.rejects.as_deref())?;
    let mut total = Summary::default();
    let mut sink = std::io::sink();
    for job in jobs {
        let pipe = job.pipe(&cfg.pipe);
        let s = crate::io::process(&pipe, job.sources, &mut sink, &mut rejects, |line, _| {
            let obj = match crate::io::parse_object(line) {
                Ok(o) => o,
                Err(e) => return Verdict::Bad(e),
            };
            input_bytes.fetch_add(line.len() as u64 + 1, Ordering::Relaxed);
            rows.fetch_add(1, Ordering::Relaxed);
            if let Some(row) = Row::locate(obj) {
                let (mut n, mut b) = (0u64, 0u64);
                for t in row.turns() {
                    for_each_text(t, row.shape, &mut |s| {
                        n += tok.count(s) as u64;
                        b += s.len() as u64;
                    });
                }
                // With a chat template, the row as the trainer sees it.
                let tools = crate::format::chat_template::row_tools(&row.obj);
                if let Some(Ok(c)) = tok.count_chat(row.turns(), tools.as_ref()) {
                    n = c as u64;
                }
                tokens.fetch_add(n, Ordering::Relaxed);
                text_bytes.fetch_add(b, Ordering::Relaxed);
            }
            Verdict::Written
        })?;
        add_summary(&mut total, s);
    }
    let secs = started.elapsed().as_secs_f64();
    let doc = json!({
        "rows": rows.load(Ordering::Relaxed),
        "tokens": tokens.load(Ordering::Relaxed),
        "text_bytes": text_bytes.load(Ordering::Relaxed),
        "input_bytes": input_bytes.load(Ordering::Relaxed),
        "seconds": (secs * 1000.0).round() / 1000.0,
        "tokenizer": tok.name(),
    });
    let mut out = Output::create(output)?;
    serde_json::to_writer(&mut out, &doc)?;
    out.write_all(b"\n")?;
    crate::io::commit(out, rejects)?;
    Ok(total)
}

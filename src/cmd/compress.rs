//! traj-compress: fit long trajectories into a token budget, fast, without losing a row.
//!
//! Flags follow the reference's names and defaults; `--config FILE` reads its YAML
//! layout (flags given on the command line win over the file, the file over the
//! defaults). See `traj::stage::compress` for the engine.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;

use crate::cli::{StageArgs, Status};
use crate::error::classify;
use crate::format::tokens::Tokenizer;
use crate::stage::compress::config::{FileConfig, Resolved};
use crate::stage::compress::jobs::{Layout, plan_jobs};
use crate::stage::compress::run::{Progress, RunConfig, compress, count_only, dry_run};
use crate::stage::compress::select::{Sampling, sample_jobs};
use crate::stage::compress::{Compressor, OnSummaryFailure, OverBudget};
use crate::usage_bail;

const NAME: &str = "traj-compress";

const ABOUT: &str =
    "Fit long agent trajectories into a token budget by summarising their middle turns";

const EXAMPLES: &str = "Examples:
  # Compress to the reference's default budget (15250 o200k tokens), offline summarizer
  traj-compress data.jsonl -o data.small.jsonl

  # The reference's naming: writes run_compressed.jsonl and run_compressed_metrics.json
  traj-compress --input run.jsonl --target-max-tokens 4000

  # A directory of .jsonl/.jsonl.gz files into runs_compressed/, LLM summaries
  OPENROUTER_API_KEY=... traj-compress --input runs/ --model google/gemini-3-flash-preview

  # The reference's YAML, the model's own tokenizer and chat template, rows that fit
  traj-compress --config trajectory_compression.yaml --tokenizer ./Qwen2.5-7B-Instruct/ \\
      --over-budget truncate --per-trajectory-metrics data.jsonl -o out.jsonl

  # What would happen, without tokenizing
  traj-compress --input runs/ --dry-run";

/// Flags of traj-compress.
#[derive(Debug, clap::Parser)]
#[command(name = NAME, version, about = ABOUT, after_long_help = EXAMPLES)]
pub struct Args {
    #[command(flatten)]
    pub stage: StageArgs,

    /// Input file or directory, with the reference's output naming
    /// (`<stem>_compressed.jsonl`, `<dir>_compressed/`) when `-o` is not given.
    #[arg(long, value_name = "PATH")]
    pub input: Option<PathBuf>,

    /// Read the reference's YAML config (sections tokenizer, compression,
    /// protected_turns, summarization, output, processing, metrics).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Token budget per trajectory [default: 15250].
    #[arg(long, value_name = "N")]
    pub target_max_tokens: Option<usize>,

    /// Size a summary should have, in tokens [default: 750].
    #[arg(long, value_name = "N")]
    pub summary_target_tokens: Option<usize>,

    /// Protect the last N turns [default: 4].
    #[arg(long, value_name = "N")]
    pub protect_last_n: Option<usize>,

    /// Tokenizer: o200k_base, cl100k_base, tiktoken-rs:o200k_base, a .tiktoken file, a
    /// tokenizer.json, an HF tokenizer DIR (chat template), or chars4 [default: o200k_base].
    #[arg(long, value_name = "SPEC")]
    pub tokenizer: Option<String>,

    /// Reproduce the reference's midpoint head/tail split (for comparison).
    #[arg(long)]
    pub compat_midpoint: bool,

    /// What to do when a summary fails or times out.
    #[arg(long, value_enum, default_value_t = OnSummaryFailure::Keep, value_name = "WHAT")]
    pub on_summary_failure: OnSummaryFailure,

    /// Compress a sample of P percent of each input (0 < P <= 100), chosen with --seed;
    /// the sampled rows keep their input order.
    #[arg(long, value_name = "P")]
    pub sample_percent: Option<f64>,

    /// Seed of --sample-percent.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,

    /// Show what would be processed and where it would go, then stop.
    #[arg(long)]
    pub dry_run: bool,

    /// OpenAI-compatible endpoint for summaries [default: https://openrouter.ai/api/v1].
    #[allow(rustdoc::bare_urls)] // the text is `--help` text, where a bare URL reads best
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,

    /// Summarization model [default: google/gemini-3-flash-preview].
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,

    /// Environment variable holding the API key [default: OPENROUTER_API_KEY]. Without
    /// a key, the offline extractive summarizer runs.
    #[arg(long, value_name = "VAR")]
    pub api_key_env: Option<String>,

    /// Use the offline extractive summarizer even when a key is set.
    #[arg(long)]
    pub offline: bool,

    /// Summaries in flight at once [default: 50].
    #[arg(long, value_name = "N")]
    pub max_concurrent_requests: Option<usize>,

    /// Retries of a summary after its first attempt [default: 2, i.e. 3 attempts].
    /// (The YAML config's `max_retries` counts attempts, as the reference does.)
    #[arg(long, value_name = "N")]
    pub max_retries: Option<u32>,

    /// First retry delay in seconds, doubled per attempt, jittered [default: 2].
    #[arg(long, value_name = "SECS")]
    pub retry_delay: Option<f64>,

    /// Time budget of one trajectory's whole summary, retries and waits included, in
    /// seconds [default: 300].
    #[arg(long, alias = "timeout", value_name = "SECS")]
    pub summary_timeout: Option<f64>,

    /// Sampling temperature of summaries [default: 0.3].
    #[arg(long, value_name = "T")]
    pub temperature: Option<f64>,

    /// Add `compression_metrics` to every row that was over the budget.
    #[arg(long)]
    pub per_trajectory_metrics: bool,

    /// Where to write the aggregate metrics (default: beside the output file as
    /// `<stem>_metrics.json`, or `compression_metrics.json` in an output directory;
    /// none when writing to stdout).
    #[arg(long, visible_alias = "metrics", value_name = "FILE")]
    pub stats: Option<PathBuf>,

    /// Write no metrics file.
    #[arg(long)]
    pub no_metrics: bool,

    /// Do not append the summary notice to the system turn.
    #[arg(long)]
    pub no_summary_notice: bool,

    /// Tokenize every row, also those whose byte length proves them under the budget
    /// (exact token totals in the metrics; slower).
    #[arg(long)]
    pub count_all: bool,
    /// A row still over the budget after compression: keep, truncate its longest turns, reject.
    #[arg(long, value_enum, default_value_t = OverBudget::Keep)]
    pub over_budget: OverBudget,

    /// Only count tokens of every row (the same parsing and tokenizer) and write one
    /// JSON summary line: a baseline for benchmarks and a tokenizer check.
    #[arg(long)]
    pub count_only: bool,
}

/// The settings, and the tokenizer when checking the config file's one loaded it (so
/// that it is loaded once).
fn resolve(args: &Args) -> Result<(Resolved, Option<Arc<dyn Tokenizer>>)> {
    let file = match &args.config {
        Some(p) => FileConfig::read(p).map_err(classify)?,
        None => FileConfig::default(),
    };
    let mut r = file.resolve();
    let mut tokenizer = None;
    if args.tokenizer.is_none() && file.tokenizer.name.is_some() {
        match r.load_file_tokenizer().map_err(classify)? {
            Ok(t) => tokenizer = Some(t),
            Err(e) if !args.stage.io.quiet => crate::cli::note(NAME, &e.to_string()),
            Err(_) => {}
        }
    }
    let s = &mut r.settings;
    if let Some(n) = args.target_max_tokens {
        if n == 0 {
            usage_bail!("--target-max-tokens must be at least 1");
        }
        s.plan.target_max_tokens = n;
    }
    let plan = &mut s.plan;
    plan.summary_target_tokens = (args.summary_target_tokens).unwrap_or(plan.summary_target_tokens);
    plan.protect_last_n = args.protect_last_n.unwrap_or(plan.protect_last_n);
    s.plan.compat_midpoint = args.compat_midpoint;
    s.on_summary_failure = args.on_summary_failure;
    s.per_trajectory_metrics |= args.per_trajectory_metrics;
    s.count_all = args.count_all;
    s.over_budget = args.over_budget;
    s.add_summary_notice &= !args.no_summary_notice;
    for (slot, v) in [
        (&mut r.tokenizer, &args.tokenizer),
        (&mut r.base_url, &args.base_url),
        (&mut r.model, &args.model),
        (&mut r.api_key_env, &args.api_key_env),
    ] {
        if let Some(v) = v {
            slot.clone_from(v);
        }
    }
    r.temperature = args.temperature.unwrap_or(r.temperature);
    r.max_retries = args.max_retries.unwrap_or(r.max_retries);
    r.retry_delay = args.retry_delay.unwrap_or(r.retry_delay);
    r.summary_timeout = args.summary_timeout.unwrap_or(r.summary_timeout);
    if let Some(v) = args.max_concurrent_requests {
        r.max_concurrent_requests = v.max(1);
    }
    r.metrics_enabled &= !args.no_metrics;
    r.check().map_err(classify)?;
    Ok((r, tokenizer))
}

/// Run traj-compress.
pub fn run_cli(args: Args) -> Result<Status> {
    let io = &args.stage.io;
    let (r, tokenizer) = resolve(&args)?;
    let sampling = (args.sample_percent)
        .map(|p| Sampling::new(p, args.seed, args.stage.shard.shard))
        .transpose()
        .map_err(crate::error::usage)?;
    let layout = Layout {
        input: args.input.as_deref(),
        // With a directory --input, --glob picks its files (no positional inputs to expand).
        inputs: &if args.input.is_some() && io.inputs.is_empty() {
            Vec::new()
        } else {
            io.expanded_inputs()?
        },
        output: io.output.as_deref(),
        stats: args.stats.as_deref(),
        output_suffix: &r.output_suffix,
        metrics_file: &r.metrics_file,
        glob: args.input.as_ref().and(io.glob.as_ref()),
    };
    let (mut jobs, metrics_path, skipped) = plan_jobs(&layout).map_err(classify)?;
    if !io.quiet {
        crate::cli::note_passed_over(NAME, &skipped, "give --glob to read it");
    }
    let metrics_path = metrics_path.filter(|_| r.metrics_enabled && !args.count_only);
    let metrics_flag = match args.stats {
        Some(_) => "--stats",
        None => "the metrics file",
    };
    let written = [
        ("--rejects", io.rejects.as_deref()),
        (metrics_flag, metrics_path.as_deref()),
    ];
    let inputs: Vec<_> = jobs.iter().flat_map(|j| j.sources.clone()).collect();
    for job in &jobs {
        let output = job.output.as_deref().unwrap_or(std::path::Path::new("-"));
        crate::io::check_targets(Some(output), &written, &inputs).map_err(classify)?;
    }
    let api_key = std::env::var(&r.api_key_env)
        .ok()
        .filter(|k| !k.trim().is_empty());
    let summarizer = r.summarizer(api_key.as_deref().filter(|_| !args.offline));
    if args.dry_run {
        for line in dry_run(&jobs, &r, &*summarizer, metrics_path.as_deref()) {
            crate::cli::note(NAME, &line);
        }
        return Ok(Status::Ok);
    }
    let load = || crate::format::tokens::load(&r.tokenizer).map_err(classify);
    let tokenizer = tokenizer.map_or_else(load, Ok)?;
    let _spool = sampling.map(|s| sample_jobs(&mut jobs, s)).transpose()?; // stdin's spool
    let cfg = RunConfig {
        pipe: args.stage.pipe(NAME),
        rejects: io.rejects.clone(),
        max_concurrent_requests: r.max_concurrent_requests,
        metrics: metrics_path,
    };
    if args.count_only {
        let total = count_only(jobs, tokenizer, &cfg, io.output.as_deref())?;
        return Ok(Status::from_summary(&total));
    }
    if api_key.is_none() && !args.offline && !io.quiet {
        let var = &r.api_key_env;
        let msg = format!("${var} is not set: using the offline extractive summarizer");
        crate::cli::note(NAME, &msg);
    }
    let comp = Compressor::new(r.settings.clone(), tokenizer.clone(), summarizer.clone());
    let bar = (!io.quiet && crate::cli::stderr_is_tty()).then(ProgressBar::default);
    let draw = bar.as_ref().map(|b| move |p: Progress| b.show(p));
    let draw = draw.as_ref().map(|d| d as &(dyn Fn(Progress) + Sync));
    let report = compress(&comp, jobs, &cfg, draw)?;
    Ok(crate::cli::done(NAME, io, &report.total, || {
        let total = crate::cli::summary_line(&report.total);
        format!("{total}; {}", report.describe(&comp))
    }))
}

/// The byte progress bar traj-compress draws on a terminal from the run's
/// [`Progress`] events.
#[derive(Default)]
struct ProgressBar(std::sync::OnceLock<indicatif::ProgressBar>);

impl ProgressBar {
    fn show(&self, p: Progress) {
        match p {
            Progress::Start { total_bytes } => {
                let pb = indicatif::ProgressBar::with_draw_target(
                    Some(total_bytes).filter(|&t| t > 0),
                    indicatif::ProgressDrawTarget::stderr(),
                );
                pb.set_style(
                    indicatif::ProgressStyle::with_template(
                        "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} {binary_bytes_per_sec} {msg}",
                    )
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                );
                let _ = self.0.set(pb);
            }
            Progress::Advance(n) => {
                if let Some(pb) = self.0.get() {
                    pb.inc(n);
                }
            }
            Progress::Done => {
                if let Some(pb) = self.0.get() {
                    pb.finish_and_clear();
                }
            }
        }
    }
}

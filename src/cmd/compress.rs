//! traj-compress: fit long trajectories into a token budget, fast, without losing a row.
//!
//! Flags follow the reference's names and defaults; `--config FILE` reads its YAML
//! layout (flags given on the command line win over the file, the file over the
//! defaults). See `traj::stage::compress` for the engine.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use serde::Deserialize;
use serde_json::json;

use crate::cli::{IoArgs, Status};
use crate::format::tokens::Tokenizer;
use crate::io::{Output, PipeConfig, Rejects, Select, Source, Verdict};
use crate::stage::compress::summary::{Extractive, LlmConfig, LlmSummarizer, Summarizer};
use crate::stage::compress::{Compressor, OnSummaryFailure, Settings};
use crate::usage_bail;

const NAME: &str = "traj-compress";

/// Flags of traj-compress.
#[derive(Debug, clap::Parser)]
#[command(
    name = "traj-compress",
    version,
    about = "Fit long agent trajectories into a token budget by summarising their middle turns",
    after_long_help = "Examples:
  # Compress to the reference's default budget (15250 o200k tokens), offline summarizer
  traj-compress data.jsonl -o data.small.jsonl

  # The reference's naming: writes run_compressed.jsonl and run_compressed_metrics.json
  traj-compress --input run.jsonl --target-max-tokens 4000

  # A directory of .jsonl/.jsonl.gz files into runs_compressed/, LLM summaries
  OPENROUTER_API_KEY=... traj-compress --input runs/ --model google/gemini-3-flash-preview

  # The reference's YAML, a HuggingFace tokenizer, per-row metrics
  traj-compress --config trajectory_compression.yaml --tokenizer tokenizer.json \\
      --per-trajectory-metrics data.jsonl -o out.jsonl

  # What would happen, without tokenizing
  traj-compress --input runs/ --dry-run"
)]
pub struct Args {
    #[command(flatten)]
    pub io: IoArgs,
    #[command(flatten)]
    pub jobs: crate::cli::JobsArgs,
    #[command(flatten)]
    pub shard: crate::cli::ShardArgs,

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

    /// Tokenizer: o200k_base, cl100k_base, tiktoken-rs:o200k_base, a .tiktoken file,
    /// a tokenizer.json, or chars4 [default: o200k_base].
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

    /// Attempts per summary [default: 3].
    #[arg(long, value_name = "N")]
    pub max_retries: Option<u32>,

    /// First retry delay in seconds, doubled per attempt, jittered [default: 2].
    #[arg(long, value_name = "SECS")]
    pub retry_delay: Option<f64>,

    /// Time budget of one trajectory's summary, retries included, in seconds
    /// [default: 300].
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<f64>,

    /// Sampling temperature of summaries [default: 0.3].
    #[arg(long, value_name = "T")]
    pub temperature: Option<f64>,

    /// Add `compression_metrics` to every row that was over the budget.
    #[arg(long)]
    pub per_trajectory_metrics: bool,

    /// Where to write the aggregate metrics (default: beside the output file as
    /// `<stem>_metrics.json`, or `compression_metrics.json` in an output directory;
    /// none when writing to stdout).
    #[arg(long, value_name = "FILE")]
    pub metrics: Option<PathBuf>,

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

    /// Only count tokens of every row (the same parsing and tokenizer) and write one
    /// JSON summary line: a baseline for benchmarks and a tokenizer check.
    #[arg(long)]
    pub count_only: bool,
}

/// The reference's YAML layout; every key optional.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct FileConfig {
    pub tokenizer: TokenizerSection,
    pub compression: CompressionSection,
    pub protected_turns: ProtectedSection,
    pub summarization: SummarizationSection,
    pub output: OutputSection,
    pub processing: ProcessingSection,
    pub metrics: MetricsSection,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct TokenizerSection {
    pub name: Option<String>,
    pub trust_remote_code: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct CompressionSection {
    pub target_max_tokens: Option<usize>,
    pub summary_target_tokens: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ProtectedSection {
    pub first_system: Option<bool>,
    pub first_human: Option<bool>,
    pub first_gpt: Option<bool>,
    pub first_tool: Option<bool>,
    pub last_n_turns: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct SummarizationSection {
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub api_key_env: Option<String>,
    pub temperature: Option<f64>,
    pub max_retries: Option<u32>,
    pub retry_delay: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct OutputSection {
    pub add_summary_notice: Option<bool>,
    pub summary_notice_text: Option<String>,
    pub output_suffix: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ProcessingSection {
    pub num_workers: Option<usize>,
    pub max_concurrent_requests: Option<usize>,
    pub skip_under_target: Option<bool>,
    pub save_over_limit: Option<bool>,
    pub per_trajectory_timeout: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct MetricsSection {
    pub enabled: Option<bool>,
    pub per_trajectory: Option<bool>,
    pub output_file: Option<String>,
}

/// Every setting resolved: defaults, then the YAML file, then flags.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub tokenizer: String,
    pub settings: Settings,
    pub model: String,
    pub base_url: String,
    pub api_key_env: String,
    pub temperature: f64,
    pub max_retries: u32,
    pub retry_delay: f64,
    pub timeout: f64,
    pub max_concurrent_requests: usize,
    pub output_suffix: String,
    pub metrics_enabled: bool,
    pub metrics_file: String,
}

impl FileConfig {
    /// Parse the YAML text; an empty file means all defaults.
    pub fn from_yaml(text: &str) -> Result<FileConfig> {
        if text.trim().is_empty() {
            return Ok(FileConfig::default());
        }
        Ok(serde_norway::from_str(text)?)
    }

    /// Apply the file over the defaults.
    pub fn resolve(&self) -> Resolved {
        let mut s = Settings::default();
        let c = &self.compression;
        let p = &self.protected_turns;
        let plan = &mut s.plan;
        plan.target_max_tokens = c.target_max_tokens.unwrap_or(plan.target_max_tokens);
        plan.summary_target_tokens = c
            .summary_target_tokens
            .unwrap_or(plan.summary_target_tokens);
        plan.protect_first_system = p.first_system.unwrap_or(true);
        plan.protect_first_human = p.first_human.unwrap_or(true);
        plan.protect_first_gpt = p.first_gpt.unwrap_or(true);
        plan.protect_first_tool = p.first_tool.unwrap_or(true);
        plan.protect_last_n = p.last_n_turns.unwrap_or(plan.protect_last_n);
        let o = &self.output;
        s.add_summary_notice = o.add_summary_notice.unwrap_or(true);
        if let Some(t) = &o.summary_notice_text {
            s.summary_notice_text = t.clone();
        }
        s.per_trajectory_metrics = self.metrics.per_trajectory.unwrap_or(false);
        let m = &self.summarization;
        Resolved {
            tokenizer: self
                .tokenizer
                .name
                .clone()
                .unwrap_or_else(|| "o200k_base".into()),
            settings: s,
            model: m
                .model
                .clone()
                .unwrap_or_else(|| "google/gemini-3-flash-preview".into()),
            base_url: m
                .base_url
                .clone()
                .unwrap_or_else(|| "https://openrouter.ai/api/v1".into()),
            api_key_env: m
                .api_key_env
                .clone()
                .unwrap_or_else(|| "OPENROUTER_API_KEY".into()),
            temperature: m.temperature.unwrap_or(0.3),
            max_retries: m.max_retries.unwrap_or(3),
            retry_delay: m.retry_delay.unwrap_or(2.0),
            timeout: self.processing.per_trajectory_timeout.unwrap_or(300.0),
            max_concurrent_requests: self.processing.max_concurrent_requests.unwrap_or(50),
            output_suffix: o
                .output_suffix
                .clone()
                .unwrap_or_else(|| "_compressed".into()),
            metrics_enabled: self.metrics.enabled.unwrap_or(true),
            metrics_file: self
                .metrics
                .output_file
                .clone()
                .unwrap_or_else(|| "compression_metrics.json".into()),
        }
    }
}

/// The settings, and the tokenizer when checking the config file's one loaded it (so
/// that it is loaded once).
fn resolve(args: &Args) -> Result<(Resolved, Option<Arc<dyn Tokenizer>>)> {
    let file = match &args.config {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("cannot read config {}", p.display()))?;
            match FileConfig::from_yaml(&text) {
                Ok(f) => f,
                Err(e) => usage_bail!("{}: {e}", p.display()),
            }
        }
        None => FileConfig::default(),
    };
    let mut r = file.resolve();
    // A tokenizer named in the YAML that traj cannot load (a hub name such as the
    // reference's Kimi default) gives way to the default, with a note.
    let mut tokenizer = None;
    if args.tokenizer.is_none() && file.tokenizer.name.is_some() {
        match crate::format::tokens::load(&r.tokenizer) {
            Ok(t) => tokenizer = Some(t),
            Err(_) => {
                if !args.io.quiet {
                    crate::cli::note(
                        NAME,
                        &format!(
                            "config tokenizer {:?} is not loadable here; using o200k_base",
                            r.tokenizer
                        ),
                    );
                }
                r.tokenizer = "o200k_base".into();
            }
        }
    }
    let s = &mut r.settings;
    if let Some(t) = &args.tokenizer {
        r.tokenizer = t.clone();
    }
    if let Some(n) = args.target_max_tokens {
        if n == 0 {
            usage_bail!("--target-max-tokens must be at least 1");
        }
        s.plan.target_max_tokens = n;
    }
    if let Some(n) = args.summary_target_tokens {
        s.plan.summary_target_tokens = n;
    }
    if let Some(n) = args.protect_last_n {
        s.plan.protect_last_n = n;
    }
    s.plan.compat_midpoint = args.compat_midpoint;
    s.on_summary_failure = args.on_summary_failure;
    s.per_trajectory_metrics |= args.per_trajectory_metrics;
    s.count_all = args.count_all;
    if args.no_summary_notice {
        s.add_summary_notice = false;
    }
    if let Some(v) = &args.base_url {
        r.base_url = v.clone();
    }
    if let Some(v) = &args.model {
        r.model = v.clone();
    }
    if let Some(v) = &args.api_key_env {
        r.api_key_env = v.clone();
    }
    if let Some(v) = args.temperature {
        r.temperature = v;
    }
    if let Some(v) = args.max_retries {
        r.max_retries = v.max(1);
    }
    if let Some(v) = args.retry_delay {
        r.retry_delay = v;
    }
    if let Some(v) = args.timeout {
        r.timeout = v;
    }
    if let Some(v) = args.max_concurrent_requests {
        r.max_concurrent_requests = v.max(1);
    }
    if args.no_metrics {
        r.metrics_enabled = false;
    }
    for (name, v) in [("--retry-delay", r.retry_delay), ("--timeout", r.timeout)] {
        if !(v.is_finite() && v >= 0.0) {
            usage_bail!("{name} must be a number of seconds >= 0");
        }
    }
    if let Some(p) = args.sample_percent
        && !(p > 0.0 && p <= 100.0)
    {
        usage_bail!("--sample-percent must satisfy 0 < P <= 100, got {p}");
    }
    Ok((r, tokenizer))
}

/// One unit of work: sources and where their output goes.
struct Job {
    sources: Vec<Source>,
    output: Option<PathBuf>,
    /// `--sample-percent`: the lines chosen, and their bytes (for the progress bar).
    sample: Option<(Select, u64)>,
}

/// Strip `.jsonl.gz` / `.jsonl` / `.gz` / one extension from a file name.
fn stem_of(p: &Path) -> String {
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    for ext in [".jsonl.gz", ".jsonl", ".json.gz", ".gz"] {
        if let Some(s) = name.strip_suffix(ext) {
            return s.to_string();
        }
    }
    match name.rfind('.') {
        Some(i) if i > 0 => name[..i].to_string(),
        _ => name,
    }
}

/// The jobs and the metrics path of a run.
fn plan_jobs(args: &Args, r: &Resolved) -> Result<(Vec<Job>, Option<PathBuf>)> {
    let metrics_beside =
        |out: &Path| -> PathBuf { out.with_file_name(format!("{}_metrics.json", stem_of(out))) };
    if let Some(input) = &args.input {
        if !args.io.inputs.is_empty() {
            usage_bail!("give inputs either as arguments or with --input, not both");
        }
        if !input.exists() {
            usage_bail!("--input {}: no such file or directory", input.display());
        }
        let parent = input.parent().unwrap_or(Path::new(""));
        if input.is_dir() {
            let out_dir = match &args.io.output {
                Some(o) => o.clone(),
                None => {
                    let name = input
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_else(|| "input".into());
                    parent.join(format!("{name}{}", r.output_suffix))
                }
            };
            let files = crate::io::jsonl_files_in(input)?;
            if files.is_empty() {
                usage_bail!(
                    "{}: directory holds no .jsonl or .jsonl.gz files",
                    input.display()
                );
            }
            let jobs = files
                .into_iter()
                .map(|f| {
                    let name = format!("{}.jsonl", stem_of(&f));
                    Job {
                        output: Some(out_dir.join(name)),
                        sources: vec![Source::File(f)],
                        sample: None,
                    }
                })
                .collect();
            let metrics = args
                .metrics
                .clone()
                .unwrap_or_else(|| out_dir.join(&r.metrics_file));
            return Ok((jobs, Some(metrics)));
        }
        let out =
            args.io.output.clone().unwrap_or_else(|| {
                parent.join(format!("{}{}.jsonl", stem_of(input), r.output_suffix))
            });
        let metrics = args.metrics.clone().unwrap_or_else(|| metrics_beside(&out));
        return Ok((
            vec![Job {
                sources: vec![Source::File(input.clone())],
                output: Some(out),
                sample: None,
            }],
            Some(metrics),
        ));
    }
    let sources = crate::io::sources_from_args(&args.io.inputs)?;
    let out = args.io.output.clone();
    let metrics = args
        .metrics
        .clone()
        .or_else(|| out.as_deref().map(metrics_beside));
    Ok((
        vec![Job {
            sources,
            output: out,
            sample: None,
        }],
        metrics,
    ))
}

/// Choose `max(1, floor(N * p / 100))` of the N non-blank lines of each source (none of
/// an empty one), with one RNG seeded once; `--shard` then applies to the chosen lines.
/// The sources are read where they are (stdin is spooled to `dir` first, being readable
/// once), so errors and rejects name the input's own file and line. Returns the sources,
/// the selection of lines (numbered across all sources) and its bytes.
fn sample_sources(
    sources: Vec<Source>,
    (p, seed, shard): (f64, u64, Option<crate::io::Shard>),
    dir: &Path,
) -> Result<(Vec<Source>, Select, u64)> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut kept = Vec::new();
    let mut chosen: Vec<(u64, u64)> = Vec::new(); // (line across all sources, bytes)
    let mut offset = 0u64;
    for src in sources {
        let src = match src {
            Source::Stdin => {
                let p = dir.join("stdin.jsonl");
                let mut f = std::fs::File::create(&p)?;
                std::io::copy(&mut crate::io::open_source(&Source::Stdin)?, &mut f)?;
                Source::File(p)
            }
            file => file,
        };
        // The length of each non-blank line, for the progress bar.
        let mut lens = Vec::new();
        let mut r = crate::io::LineReader::new(vec![src.clone()]);
        let mut buf = Vec::new();
        while r.read_into(&mut buf)?.is_some() {
            if !crate::io::is_blank(&buf) {
                lens.push(buf.len() as u64 + 1);
            }
        }
        let count = lens.len();
        let want = if count == 0 {
            0
        } else {
            (((count as f64) * p / 100.0).floor() as usize).clamp(1, count)
        };
        // Floyd's algorithm: `want` distinct indices, then in input order.
        let mut picked = std::collections::BTreeSet::new();
        for j in count - want..count {
            let t = rng.usize(0..=j);
            if !picked.insert(t) {
                picked.insert(j);
            }
        }
        chosen.extend(picked.into_iter().map(|i| (offset + i as u64, lens[i])));
        offset += count as u64;
        kept.push(src);
    }
    if let Some(sh) = shard {
        let mut rank = 0;
        chosen.retain(|_| {
            rank += 1;
            sh.holds(rank - 1)
        });
    }
    let bytes = chosen.iter().map(|&(_, b)| b).sum();
    let lines: std::collections::HashSet<u64> = chosen.into_iter().map(|(k, _)| k).collect();
    Ok((kept, Select::new(move |k| lines.contains(&k)), bytes))
}

/// The line pipeline of one job: a `--sample-percent` selection (which already holds
/// `--shard`) replaces the plain shard.
fn job_pipe(args: &Args, job: &Job) -> PipeConfig {
    let base = args.io.pipe(NAME, &args.jobs, &args.shard);
    match &job.sample {
        Some((select, _)) => PipeConfig {
            select: Some(select.clone()),
            ..base
        },
        None => base,
    }
}

fn progress_bar(args: &Args, jobs: &[Job]) -> Option<indicatif::ProgressBar> {
    if args.io.quiet || !crate::cli::stderr_is_tty() {
        return None;
    }
    let file_bytes = |s: &Source| match s {
        Source::File(p) => std::fs::metadata(p).map(|m| m.len()).unwrap_or(0),
        Source::Stdin => 0,
    };
    let total: u64 = jobs
        .iter()
        .map(|j| match &j.sample {
            Some((_, bytes)) => *bytes,
            None => j.sources.iter().map(file_bytes).sum(),
        })
        .sum();
    let pb = indicatif::ProgressBar::with_draw_target(
        Some(total).filter(|&t| t > 0),
        indicatif::ProgressDrawTarget::stderr(),
    );
    pb.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} {binary_bytes_per_sec} {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    Some(pb)
}

/// Run traj-compress.
pub fn run_cli(args: Args) -> Result<Status> {
    let (r, tokenizer) = resolve(&args)?;
    let (mut jobs, metrics_path) = plan_jobs(&args, &r)?;
    let metrics_path = if r.metrics_enabled && !args.count_only {
        metrics_path
    } else {
        None
    };
    let api_key = std::env::var(&r.api_key_env)
        .ok()
        .filter(|k| !k.trim().is_empty());
    // Built before --dry-run, which reports its name; building it touches no network.
    let summarizer: Arc<dyn Summarizer> = match (&api_key, args.offline) {
        (Some(key), false) => Arc::new(LlmSummarizer::new(LlmConfig {
            base_url: r.base_url.clone(),
            api_key: Some(key.clone()),
            model: r.model.clone(),
            temperature: r.temperature,
            max_attempts: r.max_retries,
            retry_delay: Duration::from_secs_f64(r.retry_delay),
            timeout: Duration::from_secs_f64(r.timeout),
        })),
        _ => Arc::new(Extractive),
    };
    if args.dry_run {
        for j in &jobs {
            let srcs: Vec<String> = j.sources.iter().map(Source::name).collect();
            let out = j
                .output
                .as_ref()
                .map_or("<stdout>".to_string(), |p| p.display().to_string());
            crate::cli::note(
                NAME,
                &format!("would compress {} -> {out}", srcs.join(", ")),
            );
        }
        crate::cli::note(
            NAME,
            &format!(
                "budget {} tokens ({}), summary {} tokens by {}, metrics {}",
                r.settings.plan.target_max_tokens,
                r.tokenizer,
                r.settings.plan.summary_target_tokens,
                summarizer.name(),
                metrics_path
                    .as_ref()
                    .map_or("none".to_string(), |p| p.display().to_string())
            ),
        );
        return Ok(Status::Ok);
    }
    let tokenizer = match tokenizer {
        Some(t) => t,
        None => crate::format::tokens::load(&r.tokenizer)?,
    };
    let _stdin_spool;
    if let Some(p) = args.sample_percent {
        let dir = tempfile::tempdir()?;
        for j in &mut jobs {
            let sampling = (p, args.seed, args.shard.shard);
            let (sources, select, bytes) =
                sample_sources(std::mem::take(&mut j.sources), sampling, dir.path())?;
            j.sources = sources;
            j.sample = Some((select, bytes));
        }
        _stdin_spool = dir;
    }
    if args.count_only {
        return count_only(&args, jobs, tokenizer);
    }
    if api_key.is_none() && !args.offline && !args.io.quiet {
        crate::cli::note(
            NAME,
            &format!(
                "${} is not set: using the offline extractive summarizer",
                r.api_key_env
            ),
        );
    }
    let comp = Compressor::new(r.settings.clone(), tokenizer.clone(), summarizer.clone());
    let pb = progress_bar(&args, &jobs);
    let start_wall = SystemTime::now();
    let started = Instant::now();
    let mut rejects = Rejects::open("compress", args.io.rejects.as_deref())?;
    let mut total = crate::io::Summary::default();
    for job in jobs {
        if let Some(p) = &job.output
            && let Some(dir) = p.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let mut out = Output::create(job.output.as_deref())?;
        let f = |line: &[u8], buf: &mut Vec<u8>| {
            let v = comp.line(line, buf);
            if let Some(pb) = &pb {
                pb.inc(line.len() as u64 + 1);
            }
            v
        };
        let cfg = if summarizer.is_remote() {
            // Summaries wait on the network: one row per job, as many rows at once
            // as requests may be in flight.
            PipeConfig {
                jobs: r.max_concurrent_requests.max(1),
                batch_lines: 1,
                ..job_pipe(&args, &job)
            }
        } else {
            job_pipe(&args, &job)
        };
        let s = crate::io::process(&cfg, job.sources, &mut out, &mut rejects, f)?;
        out.commit()?;
        add_summary(&mut total, s);
    }
    rejects.finish()?;
    if let Some(pb) = &pb {
        pb.finish_and_clear();
    }
    let agg = comp.aggregate();
    let elapsed = started.elapsed().as_secs_f64();
    if let Some(path) = &metrics_path {
        let processing = json!({
            "start_time": crate::format::time::utc_iso(start_wall),
            "end_time": crate::format::time::utc_iso(SystemTime::now()),
            "duration_seconds": (elapsed * 100.0).round() / 100.0,
        });
        let doc = agg.to_json(&tokenizer.name(), &summarizer.name(), processing);
        let mut w = Output::create(Some(path))?;
        serde_json::to_writer_pretty(&mut w, &doc)?;
        w.write_all(b"\n")?;
        w.commit()?;
    }
    if !args.io.quiet {
        let mut msg = crate::cli::summary_line(&total);
        msg.push_str(&format!(
            "; {} compressed, {} under budget, {} still over, {} summary failures; tokens {} -> {} ({}, {})",
            agg.compressed,
            agg.skipped_under_target,
            agg.still_over,
            agg.failed,
            agg.tokens_before,
            agg.tokens_after,
            tokenizer.name(),
            summarizer.name(),
        ));
        crate::cli::note(NAME, &msg);
    }
    Ok(Status::from_summary(&total))
}

/// Add the counts of one input's pipeline to the run's totals.
fn add_summary(total: &mut crate::io::Summary, s: crate::io::Summary) {
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

/// `--count-only`: tokens of every row, one JSON line at the end.
fn count_only(args: &Args, jobs: Vec<Job>, tok: Arc<dyn Tokenizer>) -> Result<Status> {
    let rows = AtomicU64::new(0);
    let tokens = AtomicU64::new(0);
    let text_bytes = AtomicU64::new(0);
    let input_bytes = AtomicU64::new(0);
    let started = Instant::now();
    let mut rejects = Rejects::open("compress", args.io.rejects.as_deref())?;
    let mut total = crate::io::Summary::default();
    let mut sink = std::io::sink();
    for job in jobs {
        let cfg = job_pipe(args, &job);
        let s = crate::io::process(&cfg, job.sources, &mut sink, &mut rejects, |line, _| {
            let obj = match crate::io::parse_object(line) {
                Ok(o) => o,
                Err(e) => return Verdict::Bad(e),
            };
            input_bytes.fetch_add(line.len() as u64 + 1, Ordering::Relaxed);
            rows.fetch_add(1, Ordering::Relaxed);
            if let Some(row) = crate::stage::compress::row::Row::locate(obj) {
                let (mut n, mut b) = (0u64, 0u64);
                for t in row.turns() {
                    crate::stage::compress::row::for_each_text(t, row.shape, &mut |s| {
                        n += tok.count(s) as u64;
                        b += s.len() as u64;
                    });
                }
                tokens.fetch_add(n, Ordering::Relaxed);
                text_bytes.fetch_add(b, Ordering::Relaxed);
            }
            Verdict::Written
        })?;
        add_summary(&mut total, s);
    }
    rejects.finish()?;
    let secs = started.elapsed().as_secs_f64();
    let doc = json!({
        "rows": rows.load(Ordering::Relaxed),
        "tokens": tokens.load(Ordering::Relaxed),
        "text_bytes": text_bytes.load(Ordering::Relaxed),
        "input_bytes": input_bytes.load(Ordering::Relaxed),
        "seconds": (secs * 1000.0).round() / 1000.0,
        "tokenizer": tok.name(),
    });
    let mut out = Output::create(args.io.output.as_deref())?;
    serde_json::to_writer(&mut out, &doc)?;
    out.write_all(b"\n")?;
    out.commit()?;
    Ok(Status::from_summary(&total))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Reference §9.1: config.
    #[test]
    fn defaults() {
        let r = FileConfig::default().resolve();
        assert_eq!(r.settings.plan.target_max_tokens, 15250);
        assert_eq!(r.settings.plan.summary_target_tokens, 750);
        assert_eq!(r.settings.plan.protect_last_n, 4);
        assert_eq!(r.max_retries, 3);
        assert_eq!(r.max_concurrent_requests, 50);
        assert_eq!(r.output_suffix, "_compressed");
        assert_eq!(r.metrics_file, "compression_metrics.json");
    }

    #[test]
    fn full_yaml() {
        let y = r#"
tokenizer:
  name: "my/tokenizer"
  trust_remote_code: false
compression:
  target_max_tokens: 10000
  summary_target_tokens: 500
protected_turns:
  first_system: true
  first_human: false
  first_gpt: true
  first_tool: true
  last_n_turns: 6
summarization:
  model: "gpt-4"
  base_url: "https://example.invalid/v1"
  api_key_env: "MY_KEY"
  temperature: 0.5
  max_retries: 5
  retry_delay: 1
output:
  add_summary_notice: false
  summary_notice_text: "x"
  output_suffix: "_short"
processing:
  num_workers: 8
  max_concurrent_requests: 100
  skip_under_target: false
  save_over_limit: false
metrics:
  enabled: false
  per_trajectory: false
  output_file: "my_metrics.json"
"#;
        let f = FileConfig::from_yaml(y).unwrap();
        let r = f.resolve();
        assert_eq!(r.tokenizer, "my/tokenizer");
        assert_eq!(f.tokenizer.trust_remote_code, Some(false));
        assert_eq!(r.settings.plan.target_max_tokens, 10000);
        assert_eq!(r.settings.plan.summary_target_tokens, 500);
        assert!(!r.settings.plan.protect_first_human);
        assert_eq!(r.settings.plan.protect_last_n, 6);
        assert_eq!(r.model, "gpt-4");
        assert_eq!(r.temperature, 0.5);
        assert_eq!(r.max_retries, 5);
        assert!(!r.settings.add_summary_notice);
        assert_eq!(r.output_suffix, "_short");
        assert_eq!(f.processing.num_workers, Some(8));
        assert_eq!(r.max_concurrent_requests, 100);
        assert_eq!(f.processing.skip_under_target, Some(false));
        assert!(!r.metrics_enabled);
        assert!(!r.settings.per_trajectory_metrics);
        assert_eq!(r.metrics_file, "my_metrics.json");
    }

    #[test]
    fn partial_and_empty_yaml() {
        let r = FileConfig::from_yaml("compression:\n  target_max_tokens: 8000\n")
            .unwrap()
            .resolve();
        assert_eq!(r.settings.plan.target_max_tokens, 8000);
        assert_eq!(r.settings.plan.protect_last_n, 4);
        for y in ["{}", "", "\n"] {
            let r = FileConfig::from_yaml(y).unwrap().resolve();
            assert_eq!(r.settings.plan.target_max_tokens, 15250);
        }
        let r = FileConfig::from_yaml("summarization:\n  base_url: null\n")
            .unwrap()
            .resolve();
        assert_eq!(r.base_url, "https://openrouter.ai/api/v1");
    }

    #[test]
    fn naming() {
        assert_eq!(stem_of(Path::new("a/x.jsonl.gz")), "x");
        assert_eq!(stem_of(Path::new("foo.jsonl")), "foo");
        assert_eq!(stem_of(Path::new("run")), "run");
        assert!(
            crate::format::time::utc_iso(SystemTime::UNIX_EPOCH).starts_with("1970-01-01T00:00:00")
        );
    }
}

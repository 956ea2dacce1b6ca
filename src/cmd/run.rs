//! traj-run: one agent per task row, many at once, against any OpenAI-compatible
//! endpoint; crash-safe and resumable.
//!
//! Threads: `--num-workers` agents (each blocks on HTTP or a tool), one writer (the
//! calling thread: appends + fsyncs records and failures, streams records to stdout,
//! keeps the checkpoint), one progress printer. Workers take prompts in input order from
//! a shared counter; records come out in completion order. The task rows are held in
//! memory as their raw lines (a prompt row is small); records are not.
//!
//! See `docs/run.md` for the run directory, the record and resume.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value, json};

use crate::cli::{IoArgs, Status, note};
use crate::io::{LineReader, OnError, Output, Rejects};
use crate::llm::cache::Cache;
use crate::llm::{Client, ClientConfig, RateLimiter};
use crate::run::agent::{self, AgentConfig, Chat, Llm, Outcome};
use crate::run::rundir::{self, Appender, Checkpoint, Key, Scan, Stats};
use crate::toolbox::{
    self as toolbox, Distribution, Registry, SandboxConfig, TaskSpec, ToolArgs, ToolConfig,
    ToolHost, distributions,
};
use crate::usage_bail;

const NAME: &str = "traj-run";

/// How long a stopping run waits for agents to leave their prompts.
const STOP_GRACE: Duration = Duration::from_secs(2);

const EXAMPLES: &str = "Examples:
  # 200 prompts, 64 agents, OpenRouter (key in OPENROUTER_API_KEY)
  traj-sample-tools --distribution terminal_tasks prompts.jsonl > tasks.jsonl
  traj-run --model anthropic/claude-sonnet-4.6 --run-dir data/run1 --num-workers 64 tasks.jsonl > raw.jsonl

  # any OpenAI-compatible server, reasoning on, a spend cap, a response cache
  traj-run --base-url http://localhost:8000/v1 --model qwen3 --reasoning-effort high \\
      --max-cost 5 --cache .cache/llm --run-dir data/run2 tasks.jsonl

  # after a crash, Ctrl-C or a spend cap: run what is left (never re-runs a finished prompt)
  traj-run --resume --model anthropic/claude-sonnet-4.6 --run-dir data/run1 tasks.jsonl";

/// Flags of traj-run.
#[derive(Debug, clap::Parser)]
#[command(name = "traj-run", version, after_help = EXAMPLES, args_override_self = true,
          about = "Run one tool-using agent per task row against an OpenAI-compatible endpoint")]
pub struct Args {
    #[command(flatten)]
    pub io: IoArgs,
    #[command(flatten)]
    pub shard: crate::cli::ShardArgs,

    /// Run directory: batch_N.jsonl, failures.jsonl, checkpoint.json, statistics.json.
    #[arg(long, value_name = "DIR")]
    pub run_dir: PathBuf,
    /// Continue the run in --run-dir: skip prompts that have a record, retry failed ones
    /// (up to --max-attempts), write new batch files after the existing ones.
    #[arg(long)]
    pub resume: bool,

    /// Model name sent to the endpoint.
    #[arg(long)]
    pub model: String,
    /// Endpoint base URL (up to `/v1`).
    #[arg(
        long,
        default_value = "https://openrouter.ai/api/v1",
        value_name = "URL"
    )]
    pub base_url: String,
    /// Environment variable holding the API key (OPENAI_API_KEY is tried too).
    #[arg(long, default_value = "OPENROUTER_API_KEY", value_name = "NAME")]
    pub api_key_env: String,
    /// `max_tokens` of each request.
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u64>,
    /// Reasoning effort (sent as `reasoning: {enabled: true, effort}`).
    #[arg(long, value_name = "LEVEL",
          value_parser = ["none", "minimal", "low", "medium", "high", "xhigh", "max", "ultra"])]
    pub reasoning_effort: Option<String>,
    /// Ask for no reasoning (`reasoning: {effort: "none"}`); wins over --reasoning-effort.
    #[arg(long)]
    pub reasoning_disabled: bool,
    /// OpenRouter: only these providers (comma list).
    #[arg(long, value_name = "LIST")]
    pub providers_allowed: Option<String>,
    /// OpenRouter: never these providers (comma list).
    #[arg(long, value_name = "LIST")]
    pub providers_ignored: Option<String>,
    /// OpenRouter: try providers in this order (comma list).
    #[arg(long, value_name = "LIST")]
    pub providers_order: Option<String>,
    /// OpenRouter: sort providers by price, throughput or latency.
    #[arg(long, value_name = "KEY", value_parser = ["price", "throughput", "latency"])]
    pub provider_sort: Option<String>,
    /// System prompt sent with every request and never stored in records.
    #[arg(long, value_name = "TEXT")]
    pub ephemeral_system_prompt: Option<String>,
    /// Send the reasoning fields of earlier assistant messages back to the model:
    /// `auto` = only to OpenRouter (others may reject unknown fields). Records always
    /// keep them.
    #[arg(long, value_enum, default_value_t = SendReasoning::Auto, value_name = "WHEN")]
    pub send_reasoning: SendReasoning,
    /// JSON file with an array of `{role, content}` messages sent before each prompt
    /// (never stored).
    #[arg(long, value_name = "FILE")]
    pub prefill_messages: Option<PathBuf>,

    /// Model calls with tools per prompt; then one more call asks for a final answer.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub max_turns: u32,
    /// Wall-clock limit per prompt, in seconds (a `prompt_timeout` failure).
    #[arg(long, value_name = "SECS")]
    pub prompt_timeout: Option<f64>,
    /// Limit of one HTTP request, in seconds.
    #[arg(long, default_value_t = 600.0, value_name = "SECS")]
    pub request_timeout: f64,
    /// Retries of a request after 429, 5xx, timeouts and transport errors.
    #[arg(long, default_value_t = 6, value_name = "N")]
    pub max_retries: u32,
    /// First retry wait in milliseconds (doubles per retry, jittered; Retry-After wins).
    #[arg(long, default_value_t = 2000, value_name = "MS")]
    pub retry_base_ms: u64,
    /// Longest retry wait (and longest Retry-After honoured), in milliseconds.
    #[arg(long, default_value_t = 60_000, value_name = "MS")]
    pub retry_max_ms: u64,
    /// Requests per second at most, over all workers.
    #[arg(long, value_name = "RPS")]
    pub max_rps: Option<f64>,
    /// Stop the run cleanly once the provider-reported cost reaches this many dollars.
    #[arg(long, value_name = "DOLLARS")]
    pub max_cost: Option<f64>,
    /// Answer identical requests from DIR and store new answers there.
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,

    /// Agents running at once (threads waiting on HTTP: hundreds are fine).
    #[arg(
        short = 'j',
        long,
        visible_alias = "jobs",
        default_value_t = 8,
        value_name = "N"
    )]
    pub num_workers: usize,
    /// Prompts per batch file.
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub batch_size: usize,
    /// Use only the first N task rows.
    #[arg(long, value_name = "N")]
    pub max_samples: Option<usize>,
    /// Failed runs of a prompt allowed over all resumes (non-retryable failures: one).
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub max_attempts: u32,

    /// Toolsets for rows without a `toolsets` field (comma list).
    #[arg(long, value_name = "LIST")]
    pub toolsets: Option<String>,
    /// Sample toolsets for rows without a `toolsets` field from this distribution.
    #[arg(long, value_name = "NAME")]
    pub distribution: Option<String>,
    /// Seed of the toolset sampling (as traj-sample-tools: per seed and prompt_index).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Seconds between progress lines on stderr (default: 2 on a terminal, else 10).
    #[arg(long, value_name = "SECS")]
    pub progress_secs: Option<f64>,

    #[command(flatten)]
    pub tools: ToolArgs,
}

/// When reasoning fields go back to the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SendReasoning {
    Auto,
    Yes,
    No,
}

/// One prompt to run.
struct Task {
    index: u64,
    hash: String,
    /// The task row, as read.
    line: Box<str>,
    batch: u64,
    /// This prompt's run number (1 + earlier failed runs).
    attempt: u32,
}

/// What a worker hands the writer.
enum Done {
    /// A record line, and its contribution to the statistics (computed by the worker
    /// so that the single writer only appends).
    Record {
        task: usize,
        line: Vec<u8>,
        stats: Box<Stats>,
    },
    Failure {
        task: usize,
        line: Vec<u8>,
        stats: Box<Stats>,
    },
    Abandoned,
}

struct Shared {
    cfg: AgentConfig,
    llm: Llm,
    tasks: Vec<Task>,
    next: AtomicUsize,
    in_flight: AtomicU64,
    hosts: Box<HostFactory>,
    toolsets_default: Option<Vec<String>>,
    distribution: Option<(Distribution, BTreeSet<String>)>,
    seed: u64,
}

/// Makes the tools of one task from its row and toolsets.
pub type HostFactory =
    dyn Fn(&Map<String, Value>, &[String]) -> Result<Box<dyn ToolHost>, HostError> + Sync + Send;

fn split_list(s: &Option<String>) -> Option<Vec<String>> {
    s.as_ref().map(|s| {
        s.split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect()
    })
}

fn is_local(url: &str) -> bool {
    let rest = url.split("://").nth(1).unwrap_or(url);
    rest.starts_with("127.") || rest.starts_with("localhost") || rest.starts_with("[::1]")
}

/// Validated settings, from flags and files, before any work starts.
fn agent_config(args: &Args) -> Result<AgentConfig> {
    if args.max_turns == 0 {
        usage_bail!("--max-turns must be at least 1");
    }
    let reasoning = if args.reasoning_disabled {
        Some(json!({"effort": "none"}))
    } else {
        args.reasoning_effort
            .as_ref()
            .map(|e| json!({"enabled": true, "effort": e}))
    };
    let mut provider = Map::new();
    for (key, list) in [
        ("only", &args.providers_allowed),
        ("ignore", &args.providers_ignored),
        ("order", &args.providers_order),
    ] {
        if let Some(l) = split_list(list) {
            provider.insert(key.into(), json!(l));
        }
    }
    if let Some(s) = &args.provider_sort {
        provider.insert("sort".into(), json!(s));
    }
    let prefill = match &args.prefill_messages {
        None => Vec::new(),
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("--prefill-messages: cannot read {}", p.display()))?;
            let v: Value = match serde_json::from_str(&text) {
                Ok(v) => v,
                Err(e) => usage_bail!("{}: invalid JSON: {e}", p.display()),
            };
            let Some(list) = v.as_array() else {
                usage_bail!(
                    "{}: expected a JSON array of {{role, content}} messages",
                    p.display()
                );
            };
            for (i, m) in list.iter().enumerate() {
                if m.get("role").and_then(Value::as_str).is_none() || m.get("content").is_none() {
                    usage_bail!(
                        "{}: message {i}: expected {{\"role\", \"content\"}}",
                        p.display()
                    );
                }
            }
            list.clone()
        }
    };
    let prompt_timeout = match args.prompt_timeout {
        Some(t) if !(t > 0.0 && t.is_finite()) => usage_bail!("--prompt-timeout must be > 0"),
        t => t.map(Duration::from_secs_f64),
    };
    Ok(AgentConfig {
        model: args.model.clone(),
        max_turns: args.max_turns,
        max_tokens: args.max_tokens,
        reasoning,
        provider: (!provider.is_empty()).then_some(Value::Object(provider)),
        ephemeral_system_prompt: args.ephemeral_system_prompt.clone(),
        prefill,
        prompt_timeout,
        // OpenRouter reports the cost of a call only when asked to.
        extra_body: if args.base_url.contains("openrouter") {
            let mut m = Map::new();
            m.insert("usage".into(), json!({"include": true}));
            m
        } else {
            Map::new()
        },
        send_reasoning: match args.send_reasoning {
            SendReasoning::Auto => args.base_url.contains("openrouter"),
            SendReasoning::Yes => true,
            SendReasoning::No => false,
        },
    })
}

fn api_key(args: &Args) -> Result<Option<String>> {
    for name in [args.api_key_env.as_str(), "OPENAI_API_KEY"] {
        if let Ok(v) = std::env::var(name)
            && !v.trim().is_empty()
        {
            return Ok(Some(v.trim().to_string()));
        }
    }
    if is_local(&args.base_url) {
        return Ok(None);
    }
    usage_bail!(
        "no API key: set {} (or OPENAI_API_KEY), or name another variable with --api-key-env",
        args.api_key_env
    )
}

/// Read and check the task rows (strict unless --on-error skip).
/// A valid task row: its prompt_index, prompt hash and raw line.
type Row = (u64, String, Box<str>);

fn read_tasks(args: &Args) -> Result<(Vec<Row>, u64)> {
    let sources = crate::io::sources_from_args(&args.io.inputs)?;
    let mut rejects = Rejects::open(NAME, args.io.rejects.as_deref())?;
    let mut reader = LineReader::new(sources);
    let mut buf = Vec::new();
    let mut rows = Vec::new();
    let mut bad = 0u64;
    // Valid rows seen (the default prompt_index) and non-blank lines seen (what
    // --shard counts), both over the whole input, so shards keep global indices.
    let mut valid = 0u64;
    let mut nonblank = 0u64;
    while let Some((source, lineno)) = reader.read_into(&mut buf)? {
        if crate::io::is_blank(&buf) {
            continue;
        }
        nonblank += 1;
        if args.max_samples.is_some_and(|m| valid >= m as u64) {
            break;
        }
        let in_shard = args.shard.shard.is_none_or(|sh| sh.holds(nonblank - 1));
        let problem = match crate::io::parse_object(&buf) {
            Err(e) => Some(e),
            Ok(row) => match row.get("prompt") {
                Some(Value::String(p)) if !p.trim().is_empty() => {
                    let index = match row.get("prompt_index") {
                        None => Ok(valid),
                        Some(v) => v.as_u64().ok_or_else(|| {
                            "prompt_index is not a non-negative integer".to_string()
                        }),
                    };
                    match index {
                        Ok(i) => {
                            valid += 1;
                            if in_shard {
                                let text = String::from_utf8_lossy(&buf).into_owned();
                                rows.push((i, rundir::prompt_hash(p), text.into_boxed_str()));
                            }
                            None
                        }
                        Err(e) => Some(e),
                    }
                }
                Some(Value::String(_)) => Some("empty prompt".into()),
                Some(other) => Some(format!(
                    "prompt is {}, expected a string",
                    crate::io::json_kind(other)
                )),
                None => Some("no prompt field".into()),
            },
        };
        if let Some(reason) = problem.filter(|_| in_shard) {
            if args.io.on_error == OnError::Fail {
                bail!("{source}:{lineno}: {reason}");
            }
            bad += 1;
            rejects.write(&source, lineno, &[reason], &buf)?;
        }
    }
    let lost = if rejects.is_kept() { 0 } else { bad };
    rejects.finish()?;
    if bad > 0 {
        note(NAME, &format!("{bad} bad task rows skipped"));
    }
    Ok((rows, lost))
}

/// Run traj-run.
pub fn run_cli(args: Args) -> Result<Status> {
    // The key is in this process's environment (and memory), and local-backend tool
    // commands run as the same user: a non-dumpable process keeps its /proc/PID/environ,
    // mem and the like (and ptrace) to root. First thing, before any tool runs.
    #[cfg(target_os = "linux")]
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .context("cannot make traj-run non-dumpable (it hides the API key from tools)")?;
    let cfg = agent_config(&args)?;
    if args.num_workers == 0 || args.batch_size == 0 || args.max_attempts == 0 {
        usage_bail!("--num-workers, --batch-size and --max-attempts must be at least 1");
    }
    let positive = |x: f64| x > 0.0 && x.is_finite();
    if args.max_rps.is_some_and(|r| !positive(r)) || args.max_cost.is_some_and(|c| !positive(c)) {
        usage_bail!("--max-rps and --max-cost must be > 0");
    }
    let api_key = api_key(&args)?;
    let toolsets_default = split_list(&args.toolsets);
    let client_cfg = ClientConfig {
        base_url: args.base_url.clone(),
        api_key,
        timeout: Duration::from_secs_f64(args.request_timeout.max(0.001)),
        max_retries: args.max_retries,
        backoff_base: Duration::from_millis(args.retry_base_ms),
        backoff_max: Duration::from_millis(args.retry_max_ms),
    };
    let tool_config = args
        .tools
        .tool_config(&client_cfg)
        .map_err(|e| crate::cli::UsageError(e.to_string()))?;
    let hosts = host_factory(&args, &tool_config)?;
    let started_wall = SystemTime::now();
    let started = Instant::now();

    let dir = args.run_dir.clone();
    let run_name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "run".into());
    let existing = rundir::scan(&dir, args.resume)?;
    if !args.resume && (!existing.batches.is_empty() || !existing.failed.is_empty()) {
        usage_bail!(
            "{} already holds a run ({} records); use --resume to continue it, or another --run-dir",
            dir.display(),
            existing.stats.records
        );
    }
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create run directory {}", dir.display()))?;
    // Temp files of a summary write cut short by a kill.
    if let Ok(rd) = std::fs::read_dir(&dir) {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with(".tmp-") {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    for (path, bytes) in &existing.repaired {
        note(
            NAME,
            &format!(
                "{}: cut a torn last line ({bytes} bytes); its prompt runs again",
                path.display()
            ),
        );
    }

    let (rows, lost_rows) = read_tasks(&args)?;
    let total_prompts = rows.len();
    let plan = plan(&args, rows, &existing);
    if args.resume && !args.io.quiet {
        note(
            NAME,
            &format!(
                "resume: {} prompts, {} already done, {} given up, {} to run (batch files from {})",
                total_prompts,
                plan.already_done,
                plan.given_up,
                plan.tasks.len(),
                existing.next_batch()
            ),
        );
    }

    let stop = Arc::new(AtomicBool::new(false));
    let client = Client::new(client_cfg.clone());
    let client = match args.max_rps {
        Some(r) => client.with_rate_limit(Arc::new(RateLimiter::new(r))),
        None => client,
    };
    let cache = args.cache.as_deref().map(Cache::open).transpose()?;
    let llm = Llm::new(client, cache, args.max_cost, stop.clone());

    let shared = Arc::new(Shared {
        cfg,
        llm,
        tasks: plan.tasks,
        next: AtomicUsize::new(0),
        in_flight: AtomicU64::new(0),
        hosts,
        toolsets_default,
        distribution: distribution(&args, &tool_config)?,
        seed: args.seed,
    });
    {
        let s = shared.clone();
        // A second Ctrl-C while stopping is ignored: files are being closed.
        let _ = ctrlc::set_handler(move || s.llm.request_stop("interrupted"));
    }

    let num_workers = args.num_workers;
    let (tx, rx) = crossbeam_channel::bounded::<Done>(num_workers.max(16) * 2);
    let n_tasks = shared.tasks.len();
    let workers = num_workers.min(n_tasks.max(1));
    for w in 0..workers {
        let s = shared.clone();
        let tx = tx.clone();
        std::thread::Builder::new()
            .name(format!("agent-{w}"))
            .stack_size(1 << 20)
            .spawn(move || worker(&s, &tx))
            .context("cannot start a worker thread")?;
    }
    drop(tx);

    let mut checkpoint = Checkpoint::load(&dir.join("checkpoint.json"), &run_name);
    if let Some(w) = checkpoint.1.take() {
        note(NAME, &w);
    }
    let mut checkpoint = checkpoint.0;
    let mut writer = Writer {
        dir: dir.clone(),
        appender: Appender::new(&dir),
        out: Output::create(args.io.output.as_deref())?,
        stats: existing.stats.clone(),
        checkpoint: &mut checkpoint,
        last_save: Instant::now(),
        batch_left: HashMap::new(),
        records: 0,
        failures: 0,
        stdout_closed: false,
    };
    writer.checkpoint_from_scan(&existing, &shared.tasks);
    let every = args
        .progress_secs
        .map(|s| Duration::from_secs_f64(s.max(0.05)));
    let progress = Progress::start(shared.clone(), args.io.quiet, n_tasks, every);
    let result = writer.drain(&shared, rx, &progress);
    progress.finish();
    writer.appender.sync()?;
    writer.checkpoint.save(&dir.join("checkpoint.json"))?;
    let records = writer.records;
    let failures = writer.failures;
    let stdout_closed = writer.stdout_closed;
    let stats = writer.stats.clone();
    let out = writer.out;
    result?;
    if !stdout_closed {
        match out.commit() {
            Err(e) if crate::cli::is_broken_pipe(&e) => {}
            r => r?,
        }
    }
    let batches = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(rundir::batch_number)
                        .is_some()
                })
                .count()
        })
        .unwrap_or(0);
    let statistics = statistics(
        &args,
        &run_name,
        total_prompts,
        batches,
        &stats,
        &checkpoint,
        started.elapsed(),
        started_wall,
        &shared,
        records,
        failures,
    );
    rundir::write_json_atomic(&dir.join("statistics.json"), &statistics)?;

    let left = n_tasks as u64 - records - failures;
    let stop_reason = shared.llm.stop_reason();
    if !args.io.quiet {
        let mut msg = format!(
            "{records} records, {failures} failures, {left} not run; {} in {:.1}s; {} tokens, ${:.4}",
            dir.display(),
            started.elapsed().as_secs_f64(),
            stats.total_tokens,
            shared.llm.spent()
        );
        if let Some(r) = &stop_reason {
            msg.push_str(&format!("; stopped: {r}"));
        }
        note(NAME, &msg);
    }
    if args.max_cost.is_some() && records + failures > 0 && shared.llm.spent() == 0.0 {
        note(
            NAME,
            "warning: the endpoint reported no cost, so --max-cost could not limit this run",
        );
    }
    if stdout_closed {
        return Ok(Status::Ok);
    }
    if let Some(r) = stop_reason {
        note(
            NAME,
            &format!("stopped ({r}): --resume runs the {left} prompts left"),
        );
        return Ok(Status::Failed);
    }
    if failures > 0 || lost_rows > 0 {
        return Ok(Status::Failed);
    }
    Ok(Status::Ok)
}

struct Plan {
    tasks: Vec<Task>,
    already_done: usize,
    given_up: usize,
}

/// Which rows run now: a row whose (index, hash) still has a record left in the multiset
/// is done; a failed one runs again unless its class is never retried or its attempts
/// are used up.
fn plan(args: &Args, rows: Vec<Row>, scan: &Scan) -> Plan {
    let mut done = scan.done.clone();
    let mut tasks = Vec::new();
    let mut already_done = 0;
    let mut given_up = 0;
    let first = scan.next_batch();
    for (index, hash, line) in rows {
        let key: Key = (index, hash);
        if let Some(n) = done.get_mut(&key).filter(|n| **n > 0) {
            *n -= 1;
            already_done += 1;
            continue;
        }
        let attempt = match scan.failed.get(&key) {
            Some(f) if !f.retryable || f.attempts >= args.max_attempts => {
                given_up += 1;
                continue;
            }
            Some(f) => f.attempts + 1,
            None => 1,
        };
        let batch = first + (tasks.len() / args.batch_size) as u64;
        tasks.push(Task {
            index: key.0,
            hash: key.1,
            line,
            batch,
            attempt,
        });
    }
    Plan {
        tasks,
        already_done,
        given_up,
    }
}

fn worker(s: &Shared, tx: &crossbeam_channel::Sender<Done>) {
    loop {
        if s.llm.stopping() {
            return;
        }
        let i = s.next.fetch_add(1, Ordering::Relaxed);
        if i >= s.tasks.len() {
            return;
        }
        s.in_flight.fetch_add(1, Ordering::Relaxed);
        let done = run_task(s, i);
        s.in_flight.fetch_sub(1, Ordering::Relaxed);
        if tx.send(done).is_err() {
            return;
        }
    }
}

fn toolsets_of(s: &Shared, row: &Map<String, Value>, index: u64) -> Result<Vec<String>, String> {
    if let Some(v) = row.get("toolsets") {
        let Some(list) = v.as_array() else {
            return Err("toolsets is not a list".into());
        };
        return list
            .iter()
            .map(|t| {
                t.as_str()
                    .map(str::to_string)
                    .ok_or("toolsets holds a non-string".to_string())
            })
            .collect();
    }
    if let Some(t) = &s.toolsets_default {
        return Ok(t.clone());
    }
    if let Some((d, available)) = &s.distribution {
        return Ok(distributions::sample(d, s.seed, index, available));
    }
    Ok(Vec::new())
}

fn run_task(s: &Shared, i: usize) -> Done {
    let task = &s.tasks[i];
    let row = match crate::io::parse_object(task.line.as_bytes()) {
        Ok(r) => r,
        Err(e) => return failure(s, task, i, "bad_task", false, &e),
    };
    let prompt = row.get("prompt").and_then(Value::as_str).unwrap_or("");
    let toolsets = match toolsets_of(s, &row, task.index) {
        Ok(t) => t,
        Err(e) => return failure(s, task, i, "bad_task", false, &e),
    };
    let mut host = match (s.hosts)(&row, &toolsets) {
        Ok(h) => h,
        Err(e) => return failure(s, task, i, e.class, e.retryable, &e.message),
    };
    let tools = host.schemas();
    let started_wall = SystemTime::now();
    let t0 = Instant::now();
    let outcome = agent::run_prompt(&s.cfg, &s.llm, host.as_mut(), prompt);
    let duration = t0.elapsed();
    drop(host);
    match outcome {
        Outcome::Abandoned => Done::Abandoned,
        Outcome::Failed(f) => {
            let mut v = failure_json(
                s,
                task,
                &f.class,
                f.retryable,
                &f.message,
                f.status,
                f.http_attempts,
                f.api_calls,
            );
            // The usage spent before the failure.
            v["usage"] = agent::usage_json(&f.usage);
            failure_done(i, v)
        }
        Outcome::Done(t) => {
            let mut rec = Map::new();
            rec.insert("prompt_index".into(), json!(task.index));
            rec.insert("prompt_hash".into(), json!(task.hash));
            rec.insert("prompt".into(), json!(prompt));
            rec.insert("messages".into(), Value::Array(t.messages));
            rec.insert("tools".into(), Value::Array(tools));
            rec.insert("toolsets".into(), json!(toolsets));
            rec.insert("model".into(), json!(s.cfg.model));
            rec.insert("completed".into(), json!(t.completed));
            rec.insert("partial".into(), json!(t.partial));
            rec.insert("api_calls".into(), json!(t.api_calls));
            rec.insert("stop_reason".into(), json!(t.stop_reason.as_str()));
            rec.insert("usage".into(), agent::usage_json(&t.usage));
            rec.insert(
                "calls".into(),
                Value::Array(t.calls.iter().map(|c| c.to_json()).collect()),
            );
            rec.insert(
                "timings".into(),
                json!({
                    "started_at": crate::format::time::utc_iso(started_wall),
                    "finished_at": crate::format::time::utc_now(),
                    "duration_ms": duration.as_millis() as u64,
                    "llm_ms": t.llm_time.as_millis() as u64,
                    "tool_ms": t.tool_time.as_millis() as u64,
                }),
            );
            rec.insert(
                "metadata".into(),
                json!({"batch_num": task.batch, "timestamp": crate::format::time::utc_now(), "model": s.cfg.model}),
            );
            rec.insert("attempt".into(), json!(task.attempt));
            for (k, v) in row {
                if !rec.contains_key(&k) {
                    rec.insert(k, v);
                }
            }
            let rec = Value::Object(rec);
            let mut stats = Stats::default();
            stats.add_record(&rec);
            let mut line = serde_json::to_vec(&rec).unwrap_or_default();
            line.push(b'\n');
            Done::Record {
                task: i,
                line,
                stats: Box::new(stats),
            }
        }
    }
}

fn failure(s: &Shared, task: &Task, i: usize, class: &str, retryable: bool, message: &str) -> Done {
    failure_done(
        i,
        failure_json(s, task, class, retryable, message, None, 0, 0),
    )
}

#[allow(clippy::too_many_arguments)]
fn failure_json(
    s: &Shared,
    task: &Task,
    class: &str,
    retryable: bool,
    message: &str,
    status: Option<u16>,
    http_attempts: u32,
    api_calls: u32,
) -> Value {
    json!({
        "prompt_index": task.index,
        "prompt_hash": task.hash,
        "class": class,
        "retryable": retryable,
        "attempts": task.attempt,
        "status": status,
        "error": message,
        "http_attempts": http_attempts,
        "api_calls": api_calls,
        "batch_num": task.batch,
        "model": s.cfg.model,
        "at": crate::format::time::utc_now(),
    })
}

fn failure_done(i: usize, v: Value) -> Done {
    let mut stats = Stats::default();
    stats.add_failure(&v);
    let mut line = serde_json::to_vec(&v).unwrap_or_default();
    line.push(b'\n');
    Done::Failure {
        task: i,
        line,
        stats: Box::new(stats),
    }
}

struct Writer<'a> {
    dir: PathBuf,
    appender: Appender,
    out: Output,
    stats: Stats,
    checkpoint: &'a mut Checkpoint,
    last_save: Instant,
    /// Prompts of each batch not finished yet.
    batch_left: HashMap<u64, usize>,
    records: u64,
    failures: u64,
    stdout_closed: bool,
}

impl Writer<'_> {
    fn checkpoint_from_scan(&mut self, scan: &Scan, tasks: &[Task]) {
        self.checkpoint.completed_prompts = scan.done.keys().map(|k| k.0).collect();
        let done: HashSet<u64> = self.checkpoint.completed_prompts.iter().copied().collect();
        self.checkpoint.failed_prompts = scan
            .failed
            .keys()
            .map(|k| k.0)
            .filter(|i| !done.contains(i))
            .collect();
        for t in tasks {
            *self.batch_left.entry(t.batch).or_default() += 1;
            self.checkpoint.batch_stats.entry(t.batch).or_default();
        }
    }

    /// Take results until every task is accounted for or the run stops.
    fn drain(
        &mut self,
        shared: &Shared,
        rx: crossbeam_channel::Receiver<Done>,
        progress: &Progress,
    ) -> Result<()> {
        let mut group: Vec<Done> = Vec::with_capacity(256);
        let mut open = true;
        while open {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(d) => group.push(d),
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => open = false,
            }
            while group.len() < 256 {
                match rx.try_recv() {
                    Ok(d) => group.push(d),
                    Err(_) => break,
                }
            }
            self.write_group(shared, &mut group, progress)?;
            if shared.llm.stopping() {
                // Agents notice the stop between steps and abandon their prompts (they
                // run again on resume), dropping their sandboxes. Give them a moment,
                // keeping what finishes meanwhile; agents still waiting on HTTP after
                // that are left behind.
                let grace = Instant::now();
                while grace.elapsed() < STOP_GRACE
                    && (shared.in_flight.load(Ordering::Relaxed) > 0 || !rx.is_empty())
                {
                    if let Ok(d) = rx.recv_timeout(Duration::from_millis(20)) {
                        group.push(d);
                    }
                    while let Ok(d) = rx.try_recv() {
                        group.push(d);
                    }
                    self.write_group(shared, &mut group, progress)?;
                }
                break;
            }
            if self.last_save.elapsed() >= Duration::from_secs(1) {
                self.checkpoint.save(&self.dir.join("checkpoint.json"))?;
                self.last_save = Instant::now();
            }
        }
        Ok(())
    }

    fn write_group(
        &mut self,
        shared: &Shared,
        group: &mut Vec<Done>,
        progress: &Progress,
    ) -> Result<()> {
        if group.is_empty() {
            return Ok(());
        }
        let mut to_stdout: Vec<&[u8]> = Vec::new();
        let mut finished_batches = Vec::new();
        for d in group.iter() {
            let (task, line, is_record, stats) = match d {
                Done::Record { task, line, stats } => (*task, line, true, stats),
                Done::Failure { task, line, stats } => (*task, line, false, stats),
                Done::Abandoned => continue,
            };
            let t = &shared.tasks[task];
            self.stats.merge(stats);
            let tokens = stats.total_tokens;
            let bs = self.checkpoint.batch_stats.entry(t.batch).or_default();
            if is_record {
                self.appender.record(t.batch, line)?;
                self.checkpoint.completed_prompts.insert(t.index);
                self.checkpoint.failed_prompts.remove(&t.index);
                bs.processed += 1;
                self.records += 1;
                progress.records.fetch_add(1, Ordering::Relaxed);
                to_stdout.push(line);
            } else {
                self.appender.failure(line)?;
                if !self.checkpoint.completed_prompts.contains(&t.index) {
                    self.checkpoint.failed_prompts.insert(t.index);
                }
                bs.failed += 1;
                self.failures += 1;
                progress.failures.fetch_add(1, Ordering::Relaxed);
            }
            progress.tokens.fetch_add(tokens, Ordering::Relaxed);
            if let Some(left) = self.batch_left.get_mut(&t.batch) {
                *left -= 1;
                if *left == 0 {
                    finished_batches.push(t.batch);
                }
            }
        }
        // Durable first, then visible.
        self.appender.sync()?;
        for b in finished_batches {
            self.appender.close(b)?;
        }
        if !self.stdout_closed {
            let mut res = Ok(());
            for line in &to_stdout {
                res = self.out.write_all(line);
                if res.is_err() {
                    break;
                }
            }
            if res.is_ok() {
                res = self.out.flush();
            }
            if let Err(e) = res {
                if e.kind() == std::io::ErrorKind::BrokenPipe {
                    self.stdout_closed = true;
                    shared.llm.request_stop("stdout closed");
                } else {
                    return Err(e).context("cannot write records to the output");
                }
            }
        }
        group.clear();
        Ok(())
    }
}

#[allow(clippy::too_many_arguments)]
fn statistics(
    args: &Args,
    run_name: &str,
    total_prompts: usize,
    total_batches: usize,
    stats: &Stats,
    checkpoint: &Checkpoint,
    elapsed: Duration,
    started_wall: SystemTime,
    shared: &Shared,
    records: u64,
    failures: u64,
) -> Value {
    let round2 = |x: f64| (x * 100.0).round() / 100.0;
    json!({
        "run_name": run_name,
        "distribution": args.distribution.clone().unwrap_or_else(|| "task rows".into()),
        "total_prompts": total_prompts,
        "total_batches": total_batches,
        "batch_size": args.batch_size,
        "model": args.model,
        "completed_at": crate::format::time::utc_now(),
        "duration_seconds": round2(elapsed.as_secs_f64()),
        "tool_statistics": stats.tool_statistics(),
        "reasoning_statistics": {
            "total_assistant_turns": stats.assistant_turns,
            "turns_with_reasoning": stats.turns_with_reasoning,
            "turns_without_reasoning": stats.assistant_turns - stats.turns_with_reasoning,
        },
        "discarded_no_reasoning": 0,
        "records": stats.records,
        "completed": stats.completed,
        "partial": stats.partial,
        "prompts_done": checkpoint.completed_prompts.len(),
        "prompts_failed": checkpoint.failed_prompts.len(),
        "failures": stats.failure_lines,
        "failure_classes": stats.failure_classes,
        "api_calls": stats.api_calls,
        "usage": {
            "prompt_tokens": stats.prompt_tokens,
            "completion_tokens": stats.completion_tokens,
            "total_tokens": stats.total_tokens,
            "cost": stats.cost,
        },
        "this_run": {
            "started_at": crate::format::time::utc_iso(started_wall),
            "prompts_scheduled": shared.tasks.len(),
            "records": records,
            "failures": failures,
            "retries": shared.llm.retries(),
            "spent": shared.llm.spent(),
            "stopped": shared.llm.stop_reason(),
        },
    })
}

/// The progress line on stderr: every 2 s on a terminal (rewritten in place), every
/// 10 s otherwise.
struct Progress {
    records: Arc<AtomicU64>,
    failures: Arc<AtomicU64>,
    tokens: Arc<AtomicU64>,
    done: Arc<AtomicBool>,
    handle: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Progress {
    fn start(shared: Arc<Shared>, quiet: bool, total: usize, every: Option<Duration>) -> Progress {
        let records = Arc::new(AtomicU64::new(0));
        let failures = Arc::new(AtomicU64::new(0));
        let tokens = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let handle = (!quiet).then(|| {
            let (r, f, t, d) = (records.clone(), failures.clone(), tokens.clone(), done.clone());
            std::thread::spawn(move || {
                let tty = crate::cli::stderr_is_tty();
                let every = every.unwrap_or(if tty {
                    Duration::from_secs(2)
                } else {
                    Duration::from_secs(10)
                });
                let start = Instant::now();
                let mut last = Instant::now();
                while !d.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(25));
                    if last.elapsed() < every {
                        continue;
                    }
                    last = Instant::now();
                    let (rn, fl) = (r.load(Ordering::Relaxed), f.load(Ordering::Relaxed));
                    let secs = start.elapsed().as_secs_f64().max(1e-3);
                    let rate = (rn + fl) as f64 / secs;
                    let left = total as u64 - (rn + fl).min(total as u64);
                    let eta = if rate > 0.0 {
                        format_secs(left as f64 / rate)
                    } else {
                        "?".into()
                    };
                    let line = format!(
                        "{rn}/{total} done, {fl} failed, {} in flight, {rate:.1} prompts/s, {} tokens, ${:.4}, ETA {eta}",
                        shared.in_flight.load(Ordering::Relaxed),
                        t.load(Ordering::Relaxed),
                        shared.llm.spent()
                    );
                    let mut err = std::io::stderr().lock();
                    let _ = if tty {
                        write!(err, "\r{NAME}: {line}\x1b[K")
                    } else {
                        writeln!(err, "{NAME}: {line}")
                    };
                }
                if tty {
                    let _ = writeln!(std::io::stderr().lock());
                }
            })
        });
        Progress {
            records,
            failures,
            tokens,
            done,
            handle: Mutex::new(handle),
        }
    }

    fn finish(&self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = h.join();
        }
    }
}

fn format_secs(s: f64) -> String {
    let s = s.round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

// ---- tools ---------------------------------------------------------------------------

/// The host of a task offered no tools.
struct NoTools;

impl ToolHost for NoTools {
    fn schemas(&self) -> Vec<Value> {
        Vec::new()
    }
    fn call(&mut self, name: &str, _: &Value) -> crate::toolbox::ToolResult {
        crate::toolbox::ToolResult::error(format!("no tool named {name:?}: this task has no tools"))
    }
}

/// Why the tools of a task could not be made.
#[derive(Debug, Clone)]
pub struct HostError {
    pub class: &'static str,
    pub retryable: bool,
    pub message: String,
}

fn host_factory(args: &Args, tool_config: &ToolConfig) -> Result<Box<HostFactory>> {
    let registry = Registry::builtin(tool_config);
    let sandbox: SandboxConfig = args
        .tools
        .sandbox_config()
        .map_err(|e| crate::cli::UsageError(e.to_string()))?;
    if let Some(warning) = &sandbox.auto_fallback {
        note("traj-run", warning);
    }
    if let Some(t) = split_list(&args.toolsets)
        && let Err(e) = registry.resolve_all(&t)
    {
        usage_bail!("--toolsets: {e:#}");
    }
    Ok(Box::new(move |row, toolsets| {
        match registry.resolve(toolsets) {
            Err(e) => {
                return Err(HostError {
                    class: "bad_task",
                    retryable: false,
                    message: format!("{e:#}"),
                });
            }
            // No tool to offer: no sandbox to make (or to clean up).
            Ok(tools) if tools.is_empty() => return Ok(Box::new(NoTools) as Box<dyn ToolHost>),
            Ok(_) => {}
        }
        match toolbox::Task::new(&registry, toolsets, &sandbox, &TaskSpec::from_row(row)) {
            Ok(t) => Ok(Box::new(t) as Box<dyn ToolHost>),
            Err(e) => Err(HostError {
                class: "tool_host",
                retryable: true,
                message: format!("{e:#}"),
            }),
        }
    }))
}

/// The distribution named by --distribution, checked before the run starts.
fn distribution(
    args: &Args,
    tool_config: &ToolConfig,
) -> Result<Option<(Distribution, BTreeSet<String>)>> {
    let Some(name) = &args.distribution else {
        return Ok(None);
    };
    let Some(d) = distributions::builtin()
        .into_iter()
        .find(|d| &d.name == name)
    else {
        let names: Vec<String> = distributions::builtin()
            .into_iter()
            .map(|d| d.name)
            .collect();
        usage_bail!(
            "unknown distribution {name:?} (known: {})",
            names.join(", ")
        );
    };
    let available = Registry::builtin(tool_config).available_toolsets();
    if d.fallback(&available).is_none() {
        usage_bail!("distribution {name:?} has no toolset available here");
    }
    Ok(Some((d, available)))
}

//! traj-run's command line: the flags, their mapping to a [`RunConfig`], and the exit
//! status of a run. The engine is [`crate::run`]; see `docs/run.md` for the run
//! directory, the record and resume.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::cli::{IoArgs, Status};
use crate::llm::ClientConfig;
use crate::run::config::{self, ConfigError, RunConfig, SendReasoning, split_list};
use crate::run::events::{Events, Snapshot};
use crate::run::record::{SandboxUsed, SystemPromptUsed};
use crate::run::rollout::{RolloutConfig, SeedParam};
use crate::run::verify::Verifier;
use crate::run::{engine, hosts, prompt::SystemPrompt, request::AgentConfig, tasks::TaskSource};
use crate::toolbox::ToolArgs;

const EXAMPLES: &str = "Examples:
  # 200 prompts, 64 agents, OpenRouter (key in OPENROUTER_API_KEY)
  traj-sample-tools --distribution terminal_tasks prompts.jsonl > tasks.jsonl
  traj-run --model anthropic/claude-sonnet-4.6 --run-dir data/run1 --num-workers 64 \\
      tasks.jsonl > raw.jsonl

  # any OpenAI-compatible server, reasoning on, a spend cap, a response cache
  traj-run --base-url http://localhost:8000/v1 --model qwen3 --reasoning-effort high \\
      --max-cost 5 --cache .cache/llm --run-dir data/run2 tasks.jsonl

  # after a crash, Ctrl-C or a spend cap: run what is left (never re-runs a finished prompt)
  traj-run --resume --model anthropic/claude-sonnet-4.6 --run-dir data/run1 tasks.jsonl

  # RL data: 8 rollouts per task, each scored by the tests it left in its sandbox
  traj-run --model qwen3 --base-url http://localhost:8000/v1 --rollouts 8 --temperature 1 \\
      --verifier 'python3 -m pytest -q tests && echo 1 || echo 0' --logprobs \\
      --run-dir data/rl tasks.jsonl

  # math rows with an `answer` field: reward 1 when the last number of the answer equals it
  traj-run --model qwen3 --rollouts 4 --verifier number:answer --run-dir data/math math.jsonl";

const NAME: &str = "traj-run";

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
    /// Continue the run in --run-dir: skip tasks that have a record (matched by content),
    /// retry failed ones (up to --max-attempts), write new batch files after the existing
    /// ones. The run directory, not stdout, is the complete record after a crash.
    #[arg(long)]
    pub resume: bool,
    /// Wait for another traj-run holding --run-dir to end, instead of exiting 1.
    #[arg(long)]
    pub wait: bool,

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
    /// The agent's system prompt: TEXT, or @FILE to read it from a file (default: traj's
    /// own agent prompt naming the model and date). Recorded in statistics.json.
    #[arg(long, value_name = "TEXT|@FILE")]
    pub system_prompt: Option<String>,
    /// Send no agent system prompt.
    #[arg(long, conflicts_with = "system_prompt")]
    pub no_system_prompt: bool,
    /// Sent after the system prompt with every request and never stored in records.
    #[arg(long, value_name = "TEXT")]
    pub ephemeral_system_prompt: Option<String>,
    /// Send `provider` and `reasoning` to an endpoint that is not OpenRouter (by default
    /// only OpenRouter gets them: strict servers reject unknown fields).
    #[arg(long)]
    pub send_provider_fields: bool,
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
    /// Retries of a request after the first attempt (429, 5xx, timeouts, transport errors).
    #[arg(long, default_value_t = 6, value_name = "N")]
    pub max_retries: u32,
    /// First retry wait in seconds (doubles per retry, jittered; Retry-After wins).
    #[arg(long, default_value_t = 2.0, value_name = "SECS")]
    pub retry_delay: f64,
    /// Longest retry wait (and longest Retry-After honoured), in seconds.
    #[arg(long, default_value_t = 60.0, value_name = "SECS")]
    pub retry_max_delay: f64,
    /// Deprecated: --retry-delay in milliseconds (wins when given).
    #[arg(long, hide = true, value_name = "MS")]
    pub retry_base_ms: Option<u64>,
    /// Deprecated: --retry-max-delay in milliseconds (wins when given).
    #[arg(long, hide = true, value_name = "MS")]
    pub retry_max_ms: Option<u64>,
    /// Requests per second at most, over all workers.
    #[arg(long, value_name = "RPS")]
    pub max_rps: Option<f64>,
    /// Stop the run cleanly once the provider-reported cost reaches this many dollars.
    #[arg(long, value_name = "DOLLARS")]
    pub max_cost: Option<f64>,
    /// Largest reply read, in MiB: a larger one fails its prompt as `response_too_large`
    /// (not retried; refused unread when its Content-Length says so).
    #[arg(long, default_value_t = 16.0, value_name = "MB")]
    pub max_response_mb: f64,
    /// Out of credits (HTTP 402, or a body saying so): `stop` ends the run as
    /// --max-cost does (nothing marked failed; --resume after a top-up continues);
    /// `wait` pauses every worker and probes with one request at the Retry-After pace
    /// (at most --retry-max-delay) until the provider answers again.
    #[arg(long, value_enum, default_value_t = OnPaymentArg::Stop, value_name = "WHAT")]
    pub on_payment: OnPaymentArg,
    /// Answer identical requests from DIR and store new answers there.
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,

    /// Agents running at once (threads waiting on HTTP: hundreds are fine).
    #[arg(
        short = 'j',
        long,
        alias = "jobs",
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
    /// Sample toolsets for rows without a `toolsets` field from this distribution
    /// (default: `default`, unless --toolsets is given).
    #[arg(long, value_name = "NAME")]
    pub distribution: Option<String>,
    /// Seed of the toolset sampling (as traj-sample-tools: per seed and prompt_index).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Independent rollouts of every task (the unit of work, checkpoint and resume is
    /// the task's rollout; records carry `rollout_index` and `sampling`).
    #[arg(long, default_value_t = 1, value_name = "K")]
    pub rollouts: u32,
    /// `temperature` of every request (not sent by default).
    #[arg(long, value_name = "T")]
    pub temperature: Option<f64>,
    /// `top_p` of every request (not sent by default).
    #[arg(long, value_name = "P")]
    pub top_p: Option<f64>,
    /// Send a per-rollout `seed` (docs/rollouts.md): `auto` = when --rollouts > 1,
    /// `off` for endpoints that reject the field.
    #[arg(long, value_enum, default_value_t = SeedParam::Auto, value_name = "WHEN")]
    pub seed_param: SeedParam,
    /// Ask for the sampled tokens' logprobs; each assistant message keeps the reply's
    /// `choices[0].logprobs` as its `logprobs` member.
    #[arg(long)]
    pub logprobs: bool,
    /// With --logprobs: `top_logprobs` alternatives per token.
    #[arg(long, value_name = "N", requires = "logprobs")]
    pub top_logprobs: Option<u32>,
    /// With --logprobs, against vLLM: ask for the sampled token ids
    /// (`return_tokens_as_token_ids`; each token is spelled `token_id:N`), which
    /// `traj-filter --retokenize-check` compares by id. Endpoints without the extension
    /// may refuse the field: leave it off for them.
    #[arg(long, requires = "logprobs")]
    pub token_ids: bool,
    /// Score each rollout: a shell command run in its sandbox after the agent is done
    /// (reward on its last stdout line: a number or {"reward": ..}), or a built-in
    /// check of the final answer against a task field: match:FIELD, regex:FIELD,
    /// number:FIELD. See docs/rollouts.md.
    #[arg(long, value_name = "CMD")]
    pub verifier: Option<String>,
    /// Time limit of one verifier run, in seconds.
    #[arg(long, default_value_t = 300.0, value_name = "SECS")]
    pub verifier_timeout: f64,
    /// Seconds between progress lines on stderr (default: 2 on a terminal, else 10).
    #[arg(long, value_name = "SECS")]
    pub progress_secs: Option<f64>,

    #[command(flatten)]
    pub tools: ToolArgs,
}

/// `--on-payment`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnPaymentArg {
    Stop,
    Wait,
}

/// Validated agent settings, from flags and files.
fn agent_config(args: &Args) -> Result<(AgentConfig, SystemPromptUsed), ConfigError> {
    if args.max_turns == 0 {
        return Err(ConfigError::Invalid(
            "--max-turns must be at least 1".into(),
        ));
    }
    let prefill = match &args.prefill_messages {
        None => Vec::new(),
        Some(p) => config::load_prefill(p)?,
    };
    let prompt_timeout = config::positive_secs(args.prompt_timeout, "--prompt-timeout")?;
    let system = SystemPrompt::from_flags(args.system_prompt.as_deref(), args.no_system_prompt)
        .resolve_today(&args.model)?;
    let fields = config::EndpointFields::new(
        &args.base_url,
        args.send_provider_fields,
        config::reasoning_field(args.reasoning_effort.as_deref(), args.reasoning_disabled),
        config::provider_field(
            args.providers_allowed.as_deref(),
            args.providers_ignored.as_deref(),
            args.providers_order.as_deref(),
            args.provider_sort.as_deref(),
        ),
    );
    if let Some(why) = &fields.unsent {
        crate::cli::note(NAME, why);
    }
    let agent = AgentConfig {
        model: args.model.clone(),
        max_turns: args.max_turns,
        max_tokens: args.max_tokens,
        reasoning: fields.reasoning,
        provider: fields.provider,
        system_prompt: system.text.clone(),
        ephemeral_system_prompt: args.ephemeral_system_prompt.clone(),
        prefill,
        prompt_timeout,
        extra_body: fields.extra_body,
        cache_tag: None,
        send_reasoning: args.send_reasoning == SendReasoning::Yes
            || (args.send_reasoning == SendReasoning::Auto && fields.openrouter),
    };
    Ok((agent, system))
}

/// A configuration error as the exit status sees it (usage: 2), its context and chain
/// kept.
fn usage(e: anyhow::Error) -> anyhow::Error {
    use crate::error::Classify;
    let users = e
        .downcast_ref::<ConfigError>()
        .is_some_and(Classify::is_usage)
        || e.is::<crate::toolbox::cli::ToolArgsError>();
    if users { crate::error::usage(e) } else { e }
}

fn config(args: &Args) -> Result<RunConfig, ConfigError> {
    let (agent, system_prompt) = agent_config(args)?;
    let client = ClientConfig {
        base_url: args.base_url.clone(),
        api_key: config::api_key(&args.api_key_env, &args.base_url)?,
        timeout: config::positive_secs(Some(args.request_timeout), "--request-timeout")?
            .unwrap_or_default(),
        max_retries: args.max_retries,
        backoff_base: config::delay(args.retry_delay, args.retry_base_ms, "--retry-delay")?,
        backoff_max: config::delay(args.retry_max_delay, args.retry_max_ms, "--retry-max-delay")?,
    };
    RunConfig {
        agent,
        client,
        run_dir: args.run_dir.clone(),
        resume: args.resume,
        wait: args.wait,
        tasks: TaskSource {
            inputs: args.io.expanded_inputs().map_err(ConfigError::inputs)?,
            rejects: args.io.rejects.clone(),
            on_error: args.io.on_error,
            shard: args.shard.shard,
            max_samples: args.max_samples,
            rollouts: args.rollouts,
        },
        output: args.io.output.clone(),
        quiet: args.io.quiet,
        num_workers: args.num_workers,
        batch_size: args.batch_size,
        max_attempts: args.max_attempts,
        max_rps: args.max_rps,
        max_cost: args.max_cost,
        max_response: config::megabytes(args.max_response_mb, "--max-response-mb")?,
        on_payment: match args.on_payment {
            OnPaymentArg::Stop => crate::llm::OnPayment::Stop,
            OnPaymentArg::Wait => crate::llm::OnPayment::Wait,
        },
        cache: args.cache.clone(),
        toolsets: split_list(args.toolsets.as_deref()),
        distribution: args.distribution.clone(),
        seed: args.seed,
        progress_every: Some(match args.progress_secs {
            None => Duration::from_secs(if crate::cli::stderr_is_tty() { 2 } else { 10 }),
            Some(s) => config::delay(s, None, "--progress-secs")?.max(Duration::from_millis(50)),
        }),
        system_prompt,
        sandbox: Default::default(),
        rollout: RolloutConfig {
            rollouts: args.rollouts,
            temperature: args.temperature,
            top_p: args.top_p,
            seed_param: args.seed_param,
            logprobs: args.logprobs,
            top_logprobs: args.top_logprobs,
            token_ids: args.token_ids,
            verifier: args
                .verifier
                .as_deref()
                .map(Verifier::parse)
                .transpose()
                .map_err(ConfigError::Invalid)?,
            verifier_timeout: config::positive_secs(
                Some(args.verifier_timeout),
                "--verifier-timeout",
            )?
            .unwrap_or_default(),
        },
    }
    .validated()
}

/// A flag SIGINT, SIGTERM and SIGHUP set: the engine then stops cleanly (prompts in
/// flight run again on resume). A second signal while stopping is ignored: files are
/// being closed.
fn stop_on_signals() -> Result<std::sync::Arc<std::sync::atomic::AtomicBool>> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        signal_hook::flag::register(sig, flag.clone())
            .context("cannot install the signal handler")?;
    }
    Ok(flag)
}

/// The run's events on stderr: notes as `traj-run: ...` lines, progress rewritten in place
/// on a terminal and one line a snapshot otherwise.
struct Stderr {
    tty: bool,
}

impl Events for Stderr {
    fn note(&self, msg: &str) {
        crate::cli::note(NAME, msg);
    }

    fn progress(&self, now: &Snapshot) {
        let eta = now.eta_secs().map_or_else(|| "?".into(), format_secs);
        let line = format!(
            "{}/{} done, {} failed, {} in flight, {:.1} prompts/s, {} tokens, ${:.4}, ETA {eta}",
            now.records,
            now.total,
            now.failures,
            now.in_flight,
            now.rate(),
            now.tokens,
            now.spent
        );
        let mut err = std::io::stderr().lock();
        let _ = if self.tty {
            write!(err, "\r{NAME}: {line}\x1b[K")
        } else {
            writeln!(err, "{NAME}: {line}")
        };
    }

    fn progress_done(&self) {
        if self.tty {
            let _ = writeln!(std::io::stderr().lock());
        }
    }
}

/// `5s`, `1m01s`, `1h02m`.
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

/// Run traj-run.
pub fn run_cli(args: Args) -> Result<Status> {
    // Non-dumpable: /proc/PID/environ (the API key) is root's only. Before any tool runs.
    #[cfg(target_os = "linux")]
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .context("cannot make traj-run non-dumpable (it hides the API key from tools)")?;
    let mut cfg = config(&args).map_err(|e| usage(e.into()))?;
    let tool_config = args
        .tools
        .tool_config(&cfg.client)
        .map_err(|e| usage(e.into()))?;
    let sandbox = args.tools.sandbox_config().map_err(|e| usage(e.into()))?;
    if let Some(warning) = &sandbox.auto_fallback {
        crate::cli::note(NAME, warning);
    }
    cfg.sandbox = SandboxUsed::of(&sandbox);
    let hosts = hosts::host_factory(&tool_config, sandbox, cfg.toolsets.as_deref())
        .map_err(|e| usage(e.into()))?;
    let events = std::sync::Arc::new(Stderr {
        tty: crate::cli::stderr_is_tty(),
    });
    let ending =
        engine::run(&cfg, hosts, &tool_config, stop_on_signals()?, events).map_err(usage)?;
    Ok(if ending.ok() {
        Status::Ok
    } else {
        Status::Failed
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn eta_format() {
        assert_eq!(super::format_secs(5.4), "5s");
        assert_eq!(super::format_secs(61.0), "1m01s");
        assert_eq!(super::format_secs(3725.0), "1h02m");
    }
}

//! traj-normalize: any trajectory shape in, Hermes ShareGPT rows (or OpenAI messages, or
//! LLaMA-Factory's own turns) out.
//!
//! Stateless per line: rows are converted in parallel by [`crate::io::process`] and
//! written in input order; memory is a few 1 MiB batches per worker, whatever the input
//! size.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Result;
use serde_json::Value;

use crate::cli::{StageArgs, Status};
use crate::format::repair::{Repair, Repairs};
use crate::stage::normalize::groups::{self, Gathered, Gathering};
use crate::stage::normalize::{
    self, Arguments, BadArguments, Bridge, Columns, Options, Part, Parts, SystemRule, Tally,
    Target, ToolsAs,
};

const NAME: &str = "traj-normalize";

const EXAMPLES: &str = "\
Examples:
  traj-normalize data/run/batch_*.jsonl -o trajectories.jsonl
  traj-normalize glaive.jsonl --tools all_tools.json -o hermes.jsonl
  traj-normalize swe_trajs.jsonl --messages-field history --on-error skip --rejects bad.jsonl
  traj-normalize --to openai hermes.jsonl > openai.jsonl
  traj-normalize big.jsonl.gz | head -1
  # one schema for any mix of sources, turns that alternate, for datasets and trainers
  traj-normalize --columns core --merge-consecutive --tools all_tools.json a.jsonl b.jsonl
  # LLaMA-Factory's openai formatting / Qwen2.5-style templates
  traj-normalize --to openai --arguments object --tools-as string hermes.jsonl
  # LLaMA-Factory's own turns (sharegpt or openai formatting), any mix of sources
  traj-normalize --to llamafactory --columns core hermes.jsonl -o trajectories_lf.jsonl
  # hermes-agent 0.21+ rows: bridge calls as the model made them (default: the real tool)
  traj-normalize --bridge keep batch_0.jsonl -o hermes.jsonl
  # scored rollouts (traj-run --rollouts K --verifier ...): GRPO groups, DPO pairs
  traj-normalize --to groups data/rl/batch_*.jsonl -o groups.jsonl
  traj-normalize --to dpo --min-margin 0.5 data/rl/batch_*.jsonl -o dpo.jsonl \\
      --rejects no-pair.jsonl
  # an Atropos `process` dump (groups with messages and scores): one row per rollout
  traj-normalize atropos_groups.jsonl -o rollouts.jsonl
  # keep rows whose calls have non-JSON arguments, written as {} (counted; default: rejected)
  traj-normalize --bad-arguments empty --on-error skip --rejects bad.jsonl runs.jsonl

Input shapes (detected per row): traj-run raw records and OpenAI `messages` datasets
(tool_calls, function_call, role tool/function, typed content parts, reasoning fields);
ShareGPT `conversations` (from/value, LLaMA-Factory function_call/observation, or
role/content); rows already in Hermes ShareGPT or in `--to llamafactory[-openai]`
(normalising again changes nothing); groups of scored rollouts (`--to groups` rows,
Atropos `ScoredDataGroup` dumps with messages), read as one row per rollout.

Exit status: 0 ok, 1 bad input or lost lines, 2 usage error.";

const ABOUT: &str = "Convert trajectories of any common shape into Hermes ShareGPT rows (or into OpenAI messages or LLaMA-Factory's own turns)";

/// Flags of traj-normalize.
#[derive(Debug, clap::Parser)]
#[command(name = NAME, version, about = ABOUT, after_help = EXAMPLES)]
pub struct Args {
    #[command(flatten)]
    pub stage: StageArgs,

    /// Output shape: `hermes` (ShareGPT with Hermes tags), `openai` (messages with
    /// tool_calls, tool_call_id, reasoning_content, plus a `tools` list), or
    /// LLaMA-Factory's own: `llamafactory` (ShareGPT `human`/`gpt`/`function_call`/
    /// `observation` turns, calls as a JSON string with object arguments, raw tool
    /// output) and `llamafactory-openai` (the same values as `user`/`assistant`/
    /// `function_call`/`tool` messages), each with `tools` as a JSON string. For scored
    /// rollouts (rows with `reward` and `task_uid`): `groups` (one row per task:
    /// `task`, `messages` and `scores` per rollout as Atropos' ScoredDataGroup, each
    /// rollout's other fields in `rollouts`) and `dpo` (one TRL conversational
    /// preference row per task: `prompt`, `chosen` = the best reward, `rejected` = the
    /// worst, `tools` as a JSON string); see docs/rollouts.md.
    #[arg(long, value_enum, default_value_t = Target::Hermes, value_name = "SHAPE")]
    pub to: Target,

    /// With --to dpo: a pair only when the best and the worst reward differ by at least
    /// X (and at all); the other tasks are counted, and go to --rejects as their groups
    /// row.
    #[arg(long, value_name = "X", default_value_t = 0.0, value_parser = margin)]
    pub min_margin: f64,

    /// The field holding the message list (default: `conversations`, then `messages`),
    /// e.g. `history` for SWE-agent trajectories.
    #[arg(long, value_name = "FIELD")]
    pub messages_field: Option<String>,

    /// Tools every row's tool_stats / tool_error_counts covers, besides the tools offered
    /// to it: a JSON list of names or tool schemas, or one name per line. Give the full
    /// tool set to get the same keys in every row (one Arrow schema for the whole file).
    #[arg(long, value_name = "FILE")]
    pub tools: Option<PathBuf>,

    /// Set a top-level field on every row (repeatable), e.g. `--set
    /// _source_dataset=glaive`. VALUE is read as JSON when it parses (`--set n=3`,
    /// `--set tags='["a"]'`), else as a string.
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_set)]
    pub set: Vec<(String, Value)>,

    /// `core`: every row holds exactly `conversations` (or `messages`), `tools` (one
    /// JSON string unless --tools-as list), `tool_stats`, `tool_error_counts` and
    /// `metadata` (every other field as one JSON string, key order kept), so any mix of
    /// sources loads as one table (`--to openai` messages differ in keys: a file over
    /// 10 MiB loads with the `features=` of docs/training.md). `all` (default): other
    /// fields pass through.
    #[arg(long, value_enum, default_value_t = Columns::All, value_name = "SET")]
    pub columns: Columns,

    /// Join consecutive turns of one role: human texts with a blank line ("\n\n"),
    /// gpt turns (when the earlier made no call) likewise, tool responses in order.
    #[arg(long)]
    pub merge_consecutive: bool,

    /// With --to openai or groups: call arguments as a JSON `string` (default, the
    /// OpenAI API's spelling) or the JSON `object` itself (LLaMA-Factory, Qwen2.5-style
    /// templates, and the default of --to dpo, as chat templates read them).
    #[arg(long, value_enum, value_name = "HOW")]
    pub arguments: Option<Arguments>,

    /// The `tools` column as a `list` of schemas or one JSON `string` (loads in
    /// `datasets` 4.x whatever the schemas hold). Default: list, string under
    /// --columns core.
    #[arg(long, value_enum, value_name = "HOW")]
    pub tools_as: Option<ToolsAs>,

    /// Reject a row whose gpt turn needs an envelope repair (a stray closing tag, an
    /// empty <think> block beside another) instead of repairing it. Rows whose tags
    /// cannot be repaired without a guess are rejected either way.
    #[arg(long)]
    pub no_repair: bool,

    /// An OpenAI call whose `arguments` string is not JSON: `reject` the row (default;
    /// the reason names the message and the call) or write its arguments as `{}`
    /// (`empty`, the reference's rule; counted as `non_json_arguments`).
    #[arg(long, value_enum, default_value_t = BadArguments::Reject, value_name = "HOW")]
    pub bad_arguments: BadArguments,

    /// What the Hermes text shows of a hermes-agent `tool_call` bridge call (0.21+):
    /// `resolve` (default) writes the real tool it ran, with its arguments, and its
    /// result under that name, keeping each original call in the row's `bridge_calls`
    /// (so `--to openai` and a second normalize give it back); `keep` writes the bridge
    /// call as the model made it. tool_stats count the real tools either way.
    #[arg(long, value_enum, default_value_t = Bridge::Resolve, value_name = "HOW")]
    pub bridge: Bridge,

    /// Keep the system prompt of traj-run records (and of the reference batch runner's
    /// rows) too. By default their system prompt is the run's, not training text, and is
    /// dropped (counted as `run_system_prompt`); every other row keeps its own.
    #[arg(long, conflicts_with = "drop_system_prompt")]
    pub keep_run_system_prompt: bool,

    /// Drop every row's own system prompt (counted as `system_prompt`). By default a
    /// plain chat keeps its system turn and a row with tools keeps the text in front of
    /// the Hermes tool prompt.
    #[arg(long)]
    pub drop_system_prompt: bool,

    /// Move the sampled tokens and logprobs of `traj-run --logprobs` records (each
    /// assistant message's `logprobs`) out of the rows into FILE: one row per token,
    /// keyed by `row_id` (the row's `task_uid`), `turn` (the assistant message's number,
    /// the row's gpt turn), `position`; Parquet when FILE ends in `.parquet`, else JSONL
    /// (docs/rollouts.md). Reads the input twice: give files, not stdin.
    #[arg(long, value_name = "FILE")]
    pub token_sidecar: Option<PathBuf>,

    /// Write counts (read, written, bad, envelope repairs per kind, parts set aside and
    /// dropped per kind) as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub stats: Option<PathBuf>,
}

/// A `--set` argument that is not `KEY=VALUE`.
#[derive(Debug, thiserror::Error)]
enum SetError {
    #[error("{0:?}: expected KEY=VALUE")]
    NoEquals(String),
    #[error("{0:?}: the key is empty")]
    EmptyKey(String),
}

/// A finite number >= 0 (`--min-margin`).
fn margin(s: &str) -> Result<f64, String> {
    match crate::cli::finite(s)? {
        x if x >= 0.0 => Ok(x),
        _ => Err(format!("{s:?} is not a number >= 0")),
    }
}

fn parse_set(s: &str) -> Result<(String, Value), SetError> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| SetError::NoEquals(s.to_string()))?;
    if k.is_empty() {
        return Err(SetError::EmptyKey(s.to_string()));
    }
    let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_string()));
    Ok((k.to_string(), value))
}

/// The repairs and the parts kept and dropped, every kind with its count (zeros
/// included), as `--stats` writes them whatever the target.
fn add_counts(stats: &mut Value, repairs: &Repairs, parts: &Parts) {
    let per: serde_json::Map<String, Value> = Repair::ALL
        .iter()
        .map(|k| (k.name().to_string(), Value::from(repairs.get(*k))))
        .collect();
    let of = |dropped: bool| -> serde_json::Map<String, Value> {
        Part::ALL
            .iter()
            .filter(|k| k.dropped() == dropped)
            .map(|k| (k.name().to_string(), Value::from(parts.get(*k))))
            .collect()
    };
    stats["repaired"] = per.into();
    stats["kept_outside_conversation"] = of(false).into();
    stats["dropped_parts"] = of(true).into();
}

/// `N read, N rollouts of N tasks -> N groups` (or `N pairs, N tasks without a pair
/// (reason: n, ...)`), then the drops, bad and lost lines.
fn gathered_text(g: &Gathered, how: Gathering, io: &crate::cli::IoArgs) -> String {
    let s = &g.lines;
    let mut msg = format!(
        "{} read, {} rollouts of {} tasks",
        s.read, g.rollouts, g.tasks
    );
    match how {
        Gathering::Groups => msg.push_str(&format!(" -> {} groups", g.rows)),
        Gathering::Dpo { .. } => {
            msg.push_str(&format!(" -> {} pairs", g.rows));
            let none: u64 = g.no_pair.values().sum();
            if none > 0 {
                let per: Vec<String> = g.no_pair.iter().map(|(k, v)| format!("{k}: {v}")).collect();
                msg.push_str(&format!(
                    ", {none} tasks without a pair ({})",
                    per.join(", ")
                ));
                msg.push_str(&crate::cli::rejects_text(io));
            }
        }
    }
    let mut per: BTreeMap<String, u64> = BTreeMap::new();
    for (reason, n) in &s.dropped {
        let kind = reason.split_once(": ").map_or(reason.as_str(), |(k, _)| k);
        *per.entry(kind.to_string()).or_default() += n;
    }
    msg.push_str(&crate::cli::dropped_text(s.dropped_lines, &per));
    if s.dropped_lines > 0 {
        msg.push_str(&crate::cli::rejects_text(io));
    }
    msg.push_str(&crate::cli::bad_lines_text(s));
    msg.push_str(&crate::cli::lost_text(s));
    msg
}

/// Move the token sidecar into place (after the output); the tokens it holds.
fn commit_sidecar(sidecar: Option<(crate::io::Output, u64)>) -> Result<u64> {
    match sidecar {
        None => Ok(0),
        Some((out, tokens)) => {
            out.commit()?;
            Ok(tokens)
        }
    }
}

/// `, N tokens -> FILE`, with --token-sidecar.
fn sidecar_text(tokens: u64, path: Option<&Path>) -> String {
    path.map_or(String::new(), |p| {
        format!(", {tokens} tokens -> {}", p.display())
    })
}

/// `, N envelope repairs (kind: n, ...)`, or nothing when none was made.
fn repairs_text(r: &Repairs) -> String {
    if r.total() == 0 {
        return String::new();
    }
    let per: Vec<String> = Repair::ALL
        .iter()
        .filter(|k| r.get(**k) > 0)
        .map(|k| format!("{}: {}", k.name(), r.get(*k)))
        .collect();
    format!(", {} envelope repairs ({})", r.total(), per.join(", "))
}

/// `, N parts kept outside the conversation (kind: n, ...), N parts dropped (...)`,
/// each only when there are some.
fn parts_text(p: &Parts) -> String {
    let mut s = String::new();
    for (dropped, what) in [(false, "kept outside the conversation"), (true, "dropped")] {
        if p.total(dropped) == 0 {
            continue;
        }
        let per: Vec<String> = Part::ALL
            .iter()
            .filter(|k| k.dropped() == dropped && p.get(**k) > 0)
            .map(|k| format!("{}: {}", k.name(), p.get(*k)))
            .collect();
        s.push_str(&format!(
            ", {} parts {what} ({})",
            p.total(dropped),
            per.join(", ")
        ));
    }
    s
}

/// Run traj-normalize.
pub fn run_cli(args: Args) -> Result<Status> {
    let known_tools = match &args.tools {
        Some(p) => crate::format::model::read_tool_names(p)
            .map_err(|e| crate::error::usage(e).context("--tools"))?,
        None => Vec::new(),
    };
    let arguments = args.arguments.unwrap_or(if args.to == Target::Dpo {
        Arguments::Object
    } else {
        Arguments::String
    });
    let opts = Options {
        target: args.to.row_shape(),
        messages_field: args.messages_field.clone(),
        known_tools,
        set_fields: args.set.clone(),
        columns: args.columns,
        merge_consecutive: args.merge_consecutive,
        arguments,
        tools_as: args.tools_as,
        no_repair: args.no_repair,
        bridge: args.bridge,
        system_rule: if args.drop_system_prompt {
            SystemRule::DropAll
        } else if args.keep_run_system_prompt {
            SystemRule::KeepAll
        } else {
            SystemRule::KeepButRuns
        },
        strip_logprobs: args.token_sidecar.is_some(),
        bad_arguments: args.bad_arguments,
    };
    if arguments == Arguments::Object && args.to.row_shape() != Target::OpenAi {
        crate::usage_bail!(
            "--arguments object is for --to openai, groups or dpo (Hermes text and LLaMA-Factory's calls always have objects)"
        );
    }
    if args.min_margin != 0.0 && args.to != Target::Dpo {
        crate::usage_bail!("--min-margin is for --to dpo");
    }
    if args.to.gathers() && args.columns == Columns::Core {
        crate::usage_bail!("--columns core is for one row per rollout, not --to groups or dpo");
    }
    if args.tools_as.is_some() && !args.to.has_tools_column() && args.columns != Columns::Core {
        crate::usage_bail!(
            "--tools-as is for --to openai or --columns core (Hermes rows carry the tools in the system prompt)"
        );
    }
    let sources = args.stage.io.sources(NAME)?;
    let cfg = args.stage.pipe(NAME);
    // The sidecar is written first and committed after the output.
    let sidecar = match &args.token_sidecar {
        None => None,
        Some(_) if sources.contains(&crate::io::Source::Stdin) => {
            crate::usage_bail!("--token-sidecar reads the input twice: give files, not stdin")
        }
        Some(path) => {
            let mut out = crate::io::Output::create(Some(path))?;
            let tokens = normalize::sidecar::write(sources.clone(), cfg.select.clone(), &mut out)?;
            Some((out, tokens))
        }
    };
    let tally = std::sync::Mutex::new(Tally::default());
    let stats_out = crate::cli::open_stats(args.stats.as_deref())?;
    if args.to.gathers() {
        let how = match args.to {
            Target::Dpo => Gathering::Dpo {
                margin: args.min_margin,
            },
            _ => Gathering::Groups,
        };
        let convert =
            |line: &[u8], buf: &mut Vec<u8>| normalize::convert_line(line, &opts, buf, &tally);
        let g = crate::cli::run_stage(
            &args.stage.io,
            NAME,
            &[("--stats", args.stats.as_deref())],
            sources,
            |src, out, rejects| groups::gather(&cfg, src, (out, rejects), &convert, how),
        )?;
        let tokens = commit_sidecar(sidecar)?;
        let Tally { repairs, parts, .. } = std::mem::take(&mut *tally.lock().expect("tally"));
        if let Some(stats_out) = stats_out {
            let mut stats = serde_json::json!({
                "read": g.lines.read,
                "bad": g.lines.bad,
                "dropped": g.lines.dropped_lines,
                "rollouts": g.rollouts,
                "tasks": g.tasks,
                "written": g.rows,
                "tasks_without_pair": g.no_pair,
            });
            add_counts(&mut stats, &repairs, &parts);
            crate::cli::write_stats(stats_out, &stats)?;
        }
        return Ok(crate::cli::done(NAME, &args.stage.io, &g.lines, || {
            gathered_text(&g, how, &args.stage.io)
                + &repairs_text(&repairs)
                + &parts_text(&parts)
                + &sidecar_text(tokens, args.token_sidecar.as_deref())
        }));
    }
    let summary = crate::cli::run_stage(
        &args.stage.io,
        NAME,
        &[("--stats", args.stats.as_deref())],
        sources,
        |src, out, rejects| {
            crate::io::process(&cfg, src, out, rejects, |line, buf| {
                normalize::convert_line(line, &opts, buf, &tally)
            })
        },
    )?;
    let tokens = commit_sidecar(sidecar)?;
    let Tally {
        repairs,
        parts,
        groups: (groups_read, rollouts_read),
    } = std::mem::take(&mut *tally.lock().expect("tally"));
    if let Some(stats_out) = stats_out {
        let mut stats = serde_json::json!({
            "read": summary.read,
            "written": summary.written,
            "bad": summary.bad,
        });
        add_counts(&mut stats, &repairs, &parts);
        if groups_read > 0 {
            stats["groups_read"] = groups_read.into();
            stats["rollouts_from_groups"] = rollouts_read.into();
        }
        crate::cli::write_stats(stats_out, &stats)?;
    }
    Ok(crate::cli::done(NAME, &args.stage.io, &summary, || {
        let line = crate::cli::summary_line(&summary);
        let groups = if groups_read > 0 {
            format!(" ({groups_read} groups of rollouts read as {rollouts_read} rows)")
        } else {
            String::new()
        };
        format!(
            "{line}{groups}{}{}{}",
            repairs_text(&repairs),
            parts_text(&parts),
            sidecar_text(tokens, args.token_sidecar.as_deref())
        )
    }))
}

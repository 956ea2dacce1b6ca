//! traj-normalize: any trajectory shape in, Hermes ShareGPT rows (or OpenAI messages) out.
//!
//! Stateless per line: rows are converted in parallel by [`crate::io::process`] and
//! written in input order; memory is a few 1 MiB batches per worker, whatever the input
//! size.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::Value;

use crate::cli::{IoArgs, Status};
use crate::io::{Rejects, Verdict};
use crate::stage::normalize::{self, Arguments, Columns, Options, Target, ToolsAs};

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

Input shapes (detected per row): traj-run raw records and OpenAI `messages` datasets
(tool_calls, function_call, role tool/function, typed content parts, reasoning fields);
ShareGPT `conversations` (from/value, LLaMA-Factory function_call/observation, or
role/content); rows already in Hermes ShareGPT (normalising again changes nothing).

Exit status: 0 ok, 1 bad input or lost lines, 2 usage error.";

/// Flags of traj-normalize.
#[derive(Debug, clap::Parser)]
#[command(
    name = "traj-normalize",
    version,
    about = "Convert trajectories of any common shape into Hermes ShareGPT rows (or back into OpenAI messages)",
    after_help = EXAMPLES
)]
pub struct Args {
    #[command(flatten)]
    pub io: IoArgs,
    #[command(flatten)]
    pub jobs: crate::cli::JobsArgs,
    #[command(flatten)]
    pub shard: crate::cli::ShardArgs,

    /// Output shape: `hermes` (ShareGPT with Hermes tags) or `openai` (messages with
    /// tool_calls, tool_call_id, reasoning_content, plus a `tools` list).
    #[arg(long, value_enum, default_value_t = Target::Hermes, value_name = "SHAPE")]
    pub to: Target,

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
    /// sources loads as one table. `all` (default): other fields pass through.
    #[arg(long, value_enum, default_value_t = Columns::All, value_name = "SET")]
    pub columns: Columns,

    /// Join consecutive turns of one role: human texts with a blank line ("\n\n"),
    /// gpt turns (when the earlier made no call) likewise, tool responses in order.
    #[arg(long)]
    pub merge_consecutive: bool,

    /// With --to openai: call arguments as a JSON `string` (default, the OpenAI API's
    /// spelling) or the JSON `object` itself (LLaMA-Factory, Qwen2.5-style templates).
    #[arg(long, value_enum, default_value_t = Arguments::String, value_name = "HOW")]
    pub arguments: Arguments,

    /// The `tools` column as a `list` of schemas or one JSON `string` (loads in
    /// `datasets` 4.x whatever the schemas hold). Default: list, string under
    /// --columns core.
    #[arg(long, value_enum, value_name = "HOW")]
    pub tools_as: Option<ToolsAs>,
}

/// A `--set` argument that is not `KEY=VALUE`.
#[derive(Debug, thiserror::Error)]
enum SetError {
    #[error("{0:?}: expected KEY=VALUE")]
    NoEquals(String),
    #[error("{0:?}: the key is empty")]
    EmptyKey(String),
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

/// Read `--tools FILE` (traj-filter's too): the names of
/// [`crate::format::model::tool_list_names`] (a JSON list of names or schemas, an object
/// with such a list under `tools`, or one name per line).
pub fn load_tool_names(path: &Path) -> Result<Vec<String>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    crate::format::model::tool_list_names(&text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// Convert one input line (the function [`crate::io::process`] runs on every line).
pub fn convert_line(line: &[u8], opts: &Options, out: &mut Vec<u8>) -> Verdict {
    let row = match crate::io::parse_object(line) {
        Ok(r) => r,
        Err(e) => return Verdict::Bad(e),
    };
    match normalize::normalize_row(row, opts, out) {
        Ok(()) => Verdict::Written,
        Err(e) => Verdict::Bad(e.to_string()),
    }
}

/// Run traj-normalize.
pub fn run_cli(args: Args) -> Result<Status> {
    let known_tools = match &args.tools {
        Some(p) => load_tool_names(p)
            .map_err(|e| anyhow::Error::new(crate::cli::UsageError(format!("--tools: {e:#}"))))?,
        None => Vec::new(),
    };
    let opts = Options {
        target: args.to,
        messages_field: args.messages_field.clone(),
        known_tools,
        set_fields: args.set.clone(),
        columns: args.columns,
        merge_consecutive: args.merge_consecutive,
        arguments: args.arguments,
        tools_as: args.tools_as,
    };
    if args.arguments == Arguments::Object && args.to != Target::OpenAi {
        crate::usage_bail!(
            "--arguments object is for --to openai (Hermes text always has objects)"
        );
    }
    if args.tools_as.is_some() && args.to != Target::OpenAi && args.columns != Columns::Core {
        crate::usage_bail!(
            "--tools-as is for --to openai or --columns core (Hermes rows carry the tools in the system prompt)"
        );
    }
    let sources = args.io.sources()?;
    let mut out = crate::io::Output::create(args.io.output.as_deref())?;
    let mut rejects = Rejects::open(NAME, args.io.rejects.as_deref())?;
    let cfg = args.io.pipe(NAME, &args.jobs, &args.shard);
    let summary = crate::io::process(&cfg, sources, &mut out, &mut rejects, |line, buf| {
        convert_line(line, &opts, buf)
    })?;
    out.commit()?;
    rejects.finish()?;
    if !args.io.quiet {
        crate::cli::note(NAME, &crate::cli::summary_line(&summary));
    }
    Ok(Status::from_summary(&summary))
}

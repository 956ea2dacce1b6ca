//! traj-filter: keep the rows that pass every predicate, drop the others with reasons.
//!
//! Streaming and order-preserving ([`crate::io::passthru`], a zero-copy variant of
//! `crate::io::process` with the same semantics): memory is a few 4 MiB chunks per worker.
//! Kept rows are written as their original bytes, never re-serialised. With no
//! predicate every valid row passes through unchanged; invalid lines are bad input
//! (`--on-error`). Predicates are in [`crate::stage::filter`].

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;

use crate::cli::{StageArgs, Status};
use crate::format::outcome::{self, Outcomes};
use crate::format::tokens::Tokenizer;
use crate::format::tokens::pieces::Pieces;
use crate::io::passthru;
use crate::io::{PipeConfig, Summary, Verdict};
use crate::stage::filter::groups::{self, GroupRules, Rewards};
use crate::stage::filter::{self, Bounds, Predicates};

const NAME: &str = "traj-filter";

const EXAMPLES: &str = "\
Examples:
  # keep rows with reasoning, valid tool calls and well-formed Hermes tags
  traj-filter --require-reasoning --valid-tools --well-formed data/run/trajectories.jsonl \\
      -o kept.jsonl --rejects rejects.jsonl --stats filter-stats.json

  # completed, non-partial runs with at least one tool call and at most 40 turns
  traj-filter --completed --no-partial --has-tool-calls --max-turns 40 < in.jsonl > out.jsonl

  # what --well-formed would drop (the complement), reasons in the rejects file
  traj-filter --well-formed --invert in.jsonl > malformed.jsonl

  # rows between 1k and 32k tokens
  traj-filter --min-row-tokens 1000 --max-row-tokens 32000 --tokenizer o200k_base in.jsonl

  # rejection-sampling SFT data: the best well-formed rollout of each task, reward >= 1
  traj-filter --well-formed --min-reward 1 --best-of rollouts.jsonl -o best.jsonl
  # GRPO groups: drop the tasks whose rollouts all have one reward; pass@k in the stats
  traj-filter --group-has-signal rollouts.jsonl -o grpo.jsonl --stats -

Rows dropped by a predicate exit 0: dropping is the filter's job. Without --rejects they
are counted on stderr but not kept anywhere. Bad lines follow --on-error.";

const ABOUT: &str =
    "Keep trajectories that pass every predicate (flags are ANDed); drop the rest with reasons.";

/// Flags of traj-filter.
#[derive(Debug, clap::Parser)]
#[command(name = NAME, version, about = ABOUT, after_help = EXAMPLES)]
pub struct Args {
    #[command(flatten)]
    pub stage: StageArgs,

    /// Drop rows where no assistant turn has reasoning (a non-empty `<think>` block;
    /// raw records: a non-blank `reasoning`/`reasoning_content` field).
    #[arg(long, help_heading = "Predicates")]
    pub require_reasoning: bool,

    /// Drop rows calling a tool not offered to that row (its system `<tools>` list, its
    /// `tools` field, or --tools FILE), or whose arguments are not a JSON object.
    #[arg(long, help_heading = "Predicates")]
    pub valid_tools: bool,

    /// Judge --valid-tools against the run's tool declarations instead of each row's
    /// own: a JSON list of names or tool schemas (or an object with one under `tools`),
    /// or one name per line; the same file as traj-normalize's --tools.
    #[arg(long, value_name = "FILE", help_heading = "Predicates")]
    pub tools: Option<PathBuf>,

    /// Drop rows whose Hermes tags are unbalanced or out of order, whose <tool_call> or
    /// <tool_response> bodies are not JSON, or whose calls and responses do not pair up.
    #[arg(long, help_heading = "Predicates")]
    pub well_formed: bool,

    /// Drop rows whose `completed` is not true.
    #[arg(long, help_heading = "Predicates")]
    pub completed: bool,

    /// Drop rows whose `partial` is true.
    #[arg(long, help_heading = "Predicates")]
    pub no_partial: bool,

    /// Drop rows the provider cut short: `stop_reason` `length` (token limit),
    /// `content_filter` or `malformed_call` (raw records, and normalized rows, which keep
    /// the field; under `traj-normalize --columns core` it is inside `metadata`).
    #[arg(long, help_heading = "Predicates")]
    pub no_truncated: bool,

    /// Drop rows with no tool call.
    #[arg(long, help_heading = "Predicates")]
    pub has_tool_calls: bool,

    /// Drop rows whose turns do not alternate as LLaMA-Factory and axolotl require:
    /// an optional system turn, then human/tool and gpt in turn, ending on gpt (run
    /// `traj-normalize --merge-consecutive` first to repair what can be).
    #[arg(long, help_heading = "Predicates")]
    pub alternating: bool,

    /// Drop rows with fewer turns (every entry of `conversations`/`messages`).
    #[arg(long, value_name = "N", help_heading = "Predicates")]
    pub min_turns: Option<usize>,

    /// Drop rows with more turns.
    #[arg(long, value_name = "N", help_heading = "Predicates")]
    pub max_turns: Option<usize>,

    /// Drop rows with fewer tokens (sum over turn values with --tokenizer; with an HF
    /// tokenizer directory, the row rendered with its chat template, tools included).
    #[arg(long, value_name = "N", help_heading = "Predicates")]
    pub min_row_tokens: Option<usize>,

    /// Drop rows with more tokens.
    #[arg(long, value_name = "N", help_heading = "Predicates")]
    pub max_row_tokens: Option<usize>,

    /// Drop rows whose numeric `reward` is below X (rows without one: `no-reward`).
    #[arg(long, value_name = "X", value_parser = crate::cli::finite, allow_negative_numbers = true, help_heading = "Rewards")]
    pub min_reward: Option<f64>,

    /// Drop rows whose numeric `reward` is above X (rows without one: `no-reward`).
    #[arg(long, value_name = "X", value_parser = crate::cli::finite, allow_negative_numbers = true, help_heading = "Rewards")]
    pub max_reward: Option<f64>,

    /// Keep only the highest-reward rollout of each task (`task_uid` without its
    /// rollout part, else `prompt_index`), among the rows passing the other predicates;
    /// ties keep the first. Reads the input twice (stdin is spooled to a temp folder).
    #[arg(long, help_heading = "Rewards")]
    pub best_of: bool,

    /// Drop every rollout of a task whose rewards (of the rows passing the other
    /// predicates) are all equal: no gradient for GRPO. Reads the input twice.
    #[arg(long, help_heading = "Rewards")]
    pub group_has_signal: bool,

    /// A rollout passes at a reward of at least X, for the pass@k of --stats.
    #[arg(long, value_name = "X", default_value_t = crate::format::groups::PASS_THRESHOLD, value_parser = crate::cli::finite, allow_negative_numbers = true, help_heading = "Rewards")]
    pub pass_threshold: f64,

    /// Re-tokenize the text of every assistant turn's sampled tokens (the `logprobs`
    /// of `traj-run --logprobs` records) with the model's tokenizer (--tokenizer DIR or
    /// tokenizer.json) and count the turns whose tokens differ from those sampled: the
    /// drift that breaks on-policy RL. Reported in the summary and --stats; rows are
    /// kept unless --drop-drift.
    #[arg(long, help_heading = "Tokens")]
    pub retokenize_check: bool,

    /// With --retokenize-check: drop the rows with drift (reason `token-drift`).
    #[arg(long, requires = "retokenize_check", help_heading = "Tokens")]
    pub drop_drift: bool,

    /// Tokenizer for --min-row-tokens/--max-row-tokens: o200k_base, cl100k_base, a
    /// .tiktoken file, a tokenizer.json, an HF tokenizer directory (chat template).
    #[arg(long, value_name = "SPEC", default_value = "o200k_base")]
    pub tokenizer: String,

    /// Keep the rows that fail at least one predicate; drop those passing all.
    #[arg(long)]
    pub invert: bool,

    /// Write counts (read, kept, dropped per reason, bad, the rows read per
    /// `stop_reason` and per failure `class`, and, when rows have a `reward`, the reward
    /// figures per task and over the input: mean, variance, pass@k, groups with signal,
    /// of the rows read and of the rows kept) as JSON to FILE (`-`: stdout). The
    /// overview of a run directory:
    /// `traj-filter data/run1/*.jsonl -o /dev/null --stats -`.
    #[arg(long, value_name = "FILE")]
    pub stats: Option<PathBuf>,
}

/// Run traj-filter.
pub fn run_cli(args: Args) -> Result<Status> {
    let usage = crate::error::usage;
    let reward = Bounds::new("reward", args.min_reward, args.max_reward).map_err(usage)?;
    let turns = Bounds::new("turns", args.min_turns, args.max_turns).map_err(usage)?;
    let row_tokens =
        Bounds::new("row-tokens", args.min_row_tokens, args.max_row_tokens).map_err(usage)?;
    if args.tools.is_some() && !args.valid_tools {
        crate::usage_bail!("--tools FILE is only used with --valid-tools");
    }
    let preds = Predicates {
        require_reasoning: args.require_reasoning,
        valid_tools: args.valid_tools,
        tools: match &args.tools {
            Some(p) => Some(
                crate::format::model::read_tool_names(p)
                    .map_err(|e| crate::error::usage(e).context("--tools"))?
                    .into_iter()
                    .collect(),
            ),
            None => None,
        },
        well_formed: args.well_formed,
        completed: args.completed,
        no_partial: args.no_partial,
        no_truncated: args.no_truncated,
        has_tool_calls: args.has_tool_calls,
        turns,
        row_tokens,
        alternating: args.alternating,
        reward,
    };
    let rules = GroupRules {
        best_of: args.best_of,
        has_signal: args.group_has_signal,
    };
    if rules.any() && args.stage.shard.shard.is_some() {
        // A shard holds every N-th line, so a task's rollouts fall in different shards.
        crate::usage_bail!(
            "--best-of and --group-has-signal judge a task's whole group of rollouts, which \
             --shard splits: filter the whole file (or traj-merge the shards first)"
        );
    }
    if args.invert && preds.is_empty() && !rules.any() && !args.drop_drift {
        crate::usage_bail!("--invert needs at least one predicate");
    }
    let pieces = if args.retokenize_check {
        Some(Pieces::load(&args.tokenizer).map_err(crate::error::usage)?)
    } else {
        None
    };
    // Rows checked, rows with drift, turns checked, turns with drift.
    let drift_counts = std::sync::Mutex::new([0u64; 4]);
    // The token drift of a row (--retokenize-check): counted, a reason with --drop-drift.
    let check_drift = |row: &filter::RowView<'_>, reasons: &mut Vec<String>| {
        let Some(p) = &pieces else { return };
        let (why, c) = filter::drift::check(row, p);
        if c.turns > 0 {
            let mut n = drift_counts.lock().unwrap_or_else(|e| e.into_inner());
            n[0] += 1;
            n[1] += u64::from(c.drifted > 0);
            n[2] += c.turns;
            n[3] += c.drifted;
        }
        if args.drop_drift
            && let Some(why) = why
        {
            reasons.push(format!("{}: {why}", filter::reason::TOKEN_DRIFT));
        }
    };
    let tokenizer: Option<Arc<dyn Tokenizer>> = if preds.needs_tokens() {
        Some(crate::format::tokens::load(&args.tokenizer).map_err(crate::error::classify)?)
    } else {
        None
    };

    let sources = args.stage.io.sources(NAME)?;
    let cfg = PipeConfig {
        // Dropping is what a filter is for: drops without --rejects are counted and
        // reported, not an error (bad lines still are).
        drops_are_loss: false,
        ..args.stage.pipe("filter")
    };
    let invert = args.invert;
    let tk = tokenizer.as_deref();
    // Stop reasons and failure classes of the rows read (only for --stats).
    let outcomes = std::sync::Mutex::new(Outcomes::default());
    let rewards = std::sync::Mutex::new(Rewards::default());
    let count = |line: &[u8]| {
        if args.stats.is_some()
            && let Some(o) = outcome::of_line(line)
        {
            outcomes.lock().unwrap_or_else(|e| e.into_inner()).add(&o);
        }
    };
    // The task and reward of a row read, for --stats.
    let add_reward = |(task, reward): (Option<String>, Option<f64>), kept: bool| {
        if args.stats.is_some() {
            rewards
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .add(task, reward, kept);
        }
    };
    // ... of a line not read as a row (no predicate): one scan of its top-level members.
    let add_reward_of_line = |line: &[u8], kept: bool| {
        if args.stats.is_some()
            && let Some(tr) = crate::format::groups::task_and_reward_of_line(line)
        {
            add_reward(tr, kept);
        }
    };
    let judge = |line: &[u8]| {
        // A prompt the run dropped (a tombstone), no trajectory: never kept, also under
        // --invert. Told by the same walk that validates or reads the line.
        if preds.is_empty() && pieces.is_none() {
            return match crate::format::row::validate_object_or_tombstone(line) {
                Ok(None) => {
                    count(line);
                    add_reward_of_line(line, true);
                    Verdict::Written
                }
                Ok(Some(why)) => Verdict::Discarded(vec![why]),
                Err(e) => Verdict::Bad(e.to_string()),
            };
        }
        let (reasons, task_reward) = match judge_line(line, &preds, tk, &check_drift) {
            Ok(Judgement::Row(reasons, task_reward)) => (reasons, task_reward),
            Ok(Judgement::Tombstone(why)) => return Verdict::Discarded(vec![why]),
            Err(e) => {
                count(line);
                return Verdict::Bad(e);
            }
        };
        count(line);
        let verdict = match (reasons.is_empty(), invert) {
            (true, false) | (false, true) => Verdict::Written,
            (true, true) => Verdict::Dropped(vec!["inverted: passes every predicate".into()]),
            (false, false) => Verdict::Dropped(reasons),
        };
        add_reward(task_reward, matches!(verdict, Verdict::Written));
        verdict
    };
    // The first read of the group predicates: the row predicates, the task, the reward.
    let judge_row = |line: &[u8]| match judge_line(line, &preds, tk, &check_drift) {
        Ok(Judgement::Row(reasons, (task, reward))) => Ok((reasons, task, reward)),
        // Not reached: the group reader sets tombstones aside before it judges a line.
        Ok(Judgement::Tombstone(why)) => Err(why),
        // With no row predicate any JSON object passes them; its task and reward are
        // read from its members all the same (a row without a message list has them too).
        Err(_) if preds.is_empty() && pieces.is_none() && filter::validate_object(line).is_ok() => {
            let (task, reward) =
                crate::format::groups::task_and_reward_of_line(line).unwrap_or_default();
            Ok((Vec::new(), task, reward))
        }
        Err(e) => Err(e),
    };
    let seen = |line: &[u8], kept: bool| {
        count(line);
        add_reward_of_line(line, kept);
    };
    let stats_out = crate::cli::open_stats(args.stats.as_deref())?;
    let summary = crate::cli::run_stage(
        &args.stage.io,
        "filter",
        &[("--stats", args.stats.as_deref())],
        sources,
        |src, out, rejects| {
            if rules.any() {
                groups::run(&cfg, src, out, rejects, (&judge_row, rules, invert), &seen)
            } else {
                passthru::run(&cfg, src, out, rejects, judge)
            }
        },
    )?;

    let per_reason = by_category(&summary);
    let outcomes = outcomes.into_inner().unwrap_or_else(|e| e.into_inner());
    if let Some(stats_out) = stats_out {
        let rewards = rewards.into_inner().unwrap_or_else(|e| e.into_inner());
        let (read, kept) = rewards.figures(args.pass_threshold);
        let mut stats = serde_json::json!({
            "read": summary.read,
            "kept": summary.written,
            "dropped": summary.dropped_lines,
            "dropped_by_reason": per_reason,
            "bad": summary.bad,
            "inverted": invert,
            "stop_reasons": outcomes.stop_reasons,
            "failure_classes": outcomes.failure_classes,
        });
        if pieces.is_some() {
            let n = *drift_counts.lock().unwrap_or_else(|e| e.into_inner());
            stats["token_drift"] = serde_json::json!({
                "rows_checked": n[0],
                "rows_with_drift": n[1],
                "turns_checked": n[2],
                "turns_with_drift": n[3],
                "dropped": args.drop_drift,
            });
        }
        if let Some(read) = read {
            stats["rewards"] = serde_json::to_value(read)?;
            stats["rewards_kept"] = serde_json::to_value(kept)?;
        }
        crate::cli::write_stats(stats_out, &stats)?;
    }
    let drift = drift_counts.into_inner().unwrap_or_else(|e| e.into_inner());
    let text = || {
        let mut t = summary_text(&summary, &per_reason, &args);
        if pieces.is_some() {
            t.push_str(&format!(
                ", token drift in {} of {} turns checked ({} of {} rows)",
                drift[3], drift[2], drift[1], drift[0]
            ));
        }
        t
    };
    Ok(crate::cli::done(NAME, &args.stage.io, &summary, text))
}

/// A line read for judging: as it is, or, in a shape the predicates do not read
/// themselves, as the Hermes row traj-normalize makes of it, with what it had to mend.
enum Judged<'a> {
    AsIs(filter::RowView<'a>),
    Normalized(Vec<u8>, Vec<String>),
    /// A tombstone ([`crate::format::row::tombstone`]), with its reason.
    Tombstone(String),
}

/// What [`judge_line`] makes of a line that is no bad line.
enum Judgement {
    /// A row: the reasons it fails (none: it passes), its task and reward.
    Row(Vec<String>, TaskReward),
    /// A tombstone, with its reason: dropped, never judged.
    Tombstone(String),
}

/// [`Judged`] of `line` ([`filter::reads_as_is`], [`filter::normalized_for_judging`]);
/// `Err`: a bad line (the reason of traj-normalize for a foreign row it refuses, the
/// predicates' own for a line neither reads).
fn judged_row(line: &[u8]) -> Result<Judged<'_>, String> {
    use filter::Normalized;
    let own = filter::parse_row(line);
    // A tombstone by the walk that read the row (or, for a line that is no row, by the
    // rule's own reading of it).
    let tombstone = match &own {
        Ok(r) => r.tombstone(),
        Err(_) => crate::format::row::tombstone(line),
    };
    if let Some(why) = tombstone {
        return Ok(Judged::Tombstone(why));
    }
    if let Ok(r) = &own
        && filter::reads_as_is(r)
    {
        return own.map(Judged::AsIs).map_err(|e| e.to_string());
    }
    match (filter::normalized_for_judging(line), own) {
        (Normalized::Row(n, mended), _) => Ok(Judged::Normalized(n, mended)),
        (Normalized::Refused(e), Ok(_)) => Err(e),
        (Normalized::NotOne, Ok(r)) => Ok(Judged::AsIs(r)),
        (_, Err(e)) => Err(e.to_string()),
    }
}

/// A row's task and reward ([`groups::task_and_reward`]).
type TaskReward = (Option<String>, Option<f64>);

/// The reasons `line` fails the row predicates and the token-drift check, and its task
/// and reward, read as [`judged_row`] reads it (what traj-normalize mended in a foreign
/// row is malformed under `--well-formed`), or that it is a tombstone; `Err`: a bad line.
fn judge_line(
    line: &[u8],
    preds: &Predicates,
    tk: Option<&dyn Tokenizer>,
    check_drift: &dyn Fn(&filter::RowView<'_>, &mut Vec<String>),
) -> Result<Judgement, String> {
    let (normalized, mended);
    let row = match judged_row(line)? {
        Judged::AsIs(r) => {
            mended = Vec::new();
            r
        }
        Judged::Normalized(n, m) => {
            (normalized, mended) = (n, m);
            filter::parse_row(&normalized).map_err(|e| e.to_string())?
        }
        Judged::Tombstone(why) => return Ok(Judgement::Tombstone(why)),
    };
    let mut reasons = row_reasons(&row, preds, tk, check_drift)?;
    if preds.well_formed {
        reasons.extend(mended);
    }
    Ok(Judgement::Row(reasons, groups::task_and_reward(&row)))
}

/// The reasons a row fails the row predicates and the token-drift check (empty: it
/// passes); `Err`: the row cannot be judged (bad input).
fn row_reasons(
    row: &filter::RowView<'_>,
    preds: &Predicates,
    tk: Option<&dyn Tokenizer>,
    check_drift: &dyn Fn(&filter::RowView<'_>, &mut Vec<String>),
) -> Result<Vec<String>, String> {
    let mut reasons = if preds.is_empty() {
        Vec::new()
    } else {
        filter::evaluate(row, preds, tk).map_err(|e| e.to_string())?
    };
    check_drift(row, &mut reasons);
    Ok(reasons)
}

/// Drop counts per reason category (a row failing two predicates counts in both).
fn by_category(s: &Summary) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for (reason, n) in &s.dropped {
        *m.entry(filter::category(reason).to_string()).or_default() += n;
    }
    m
}

fn summary_text(s: &Summary, per: &BTreeMap<String, u64>, args: &Args) -> String {
    let mut msg = format!("{} read, {} kept", s.read, s.written);
    msg.push_str(&crate::cli::dropped_text(s.dropped_lines, per));
    if s.dropped_lines > 0 {
        msg.push_str(&crate::cli::rejects_text(&args.stage.io));
    }
    msg.push_str(&crate::cli::bad_lines_text(s));
    msg.push_str(&crate::cli::lost_text(s));
    // Bad lines alone went to the rejects file: it is named all the same.
    if s.dropped_lines == 0
        && s.bad > 0
        && let Some(p) = &args.stage.io.rejects
    {
        msg.push_str(&format!(" -> {}", p.display()));
    }
    msg
}

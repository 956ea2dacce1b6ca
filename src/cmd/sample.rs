//! traj-sample-tools: give each prompt row the toolsets its agent will get.
//!
//! Reads prompt rows (JSONL objects with a string `prompt`) and writes them back with
//! `toolsets` (drawn from a distribution), `distribution`, `seed` and `prompt_index`
//! (the row's index among the non-blank input lines, 0-based, unless the row has
//! one). Other fields pass through unchanged, in their order. `--shard I/N` keeps the
//! rows at non-blank positions k with k % N == I, with the toolsets of an unsharded
//! run. The flags become a [`Plan`]; the engine is [`crate::stage::sample`].
//!
//! The draw is the catalog's alone, the same on every machine: a toolset this machine
//! could not run (the browser without Chromium) is drawn all the same, and a note on
//! stderr names it once (in a build with the agent runtime, which can check);
//! `--only-available` leaves such toolsets out of the draw instead.

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::catalog::distributions;
use crate::cli::{IoArgs, Status, UsageError, note, summary_line};
use crate::error::classify;
use crate::io::Output;
use crate::stage::sample::{
    Available, Machine, Plan, check_toolsets, list_distributions, list_toolsets, sample_rows,
};

const NAME: &str = "traj-sample-tools";

const EXAMPLES: &str = "\
Examples:
  traj-sample-tools prompts.jsonl -o tasks.jsonl
  traj-sample-tools -d development --seed 7 prompts.jsonl > tasks.jsonl
  traj-sample-tools --distributions mine.json -d heavy_terminal prompts.jsonl
  traj-sample-tools --shard 0/4 prompts.jsonl > tasks.0.jsonl
  traj-sample-tools --available web,terminal,file prompts.jsonl
  traj-sample-tools --only-available prompts.jsonl   # only what this machine can run
  traj-sample-tools --list-distributions
  traj-sample-tools --list-toolsets --json | jq .";

const ABOUT: &str = "Add sampled toolsets to prompt rows (prompt rows -> task rows)";

/// Flags of traj-sample-tools.
#[derive(Debug, clap::Parser)]
#[command(name = NAME, version, about = ABOUT, after_help = EXAMPLES)]
pub struct Args {
    #[command(flatten)]
    pub io: IoArgs,
    #[command(flatten)]
    pub shard: crate::cli::ShardArgs,

    /// Distribution to draw from (a row's own string `distribution` field wins).
    #[arg(short = 'd', long, default_value = "default", value_name = "NAME")]
    pub distribution: String,

    /// JSON file of extra distributions; a built-in one of the same name is replaced.
    /// Shape: {"name": {"description": "...", "toolsets": {"web": 50, "file": 80}}},
    /// or {"name": {"web": 50}}; numbers are percentages.
    #[arg(long, value_name = "FILE")]
    pub distributions: Option<PathBuf>,

    /// Run seed: with the row's prompt_index, it decides the row's toolsets.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub seed: u64,

    /// Toolsets that may be drawn, comma-separated, or `all` for every toolset a
    /// distribution names (for another runner). Default: every toolset traj
    /// implements a tool of, the same on every machine (see --list-toolsets).
    #[arg(long, value_name = "LIST")]
    pub available: Option<String>,

    /// Leave out of the draw the toolsets this machine could not run (the browser
    /// without Chromium): draws then depend on the machine. Needs a build with the
    /// agent runtime (the default features).
    #[arg(long)]
    pub only_available: bool,

    /// Print the distributions and exit.
    #[arg(long, group = "list")]
    pub list_distributions: bool,

    /// Print the toolsets, their tools and what is available, and exit.
    #[arg(long, group = "list")]
    pub list_toolsets: bool,

    /// With --list-*: JSON instead of a table.
    #[arg(long, requires = "list")]
    pub json: bool,
}

/// Read a distributions file by the one JSON rule every input is read by (a key written
/// twice is refused: keeping one would drop the other without a word).
fn load_distributions(path: &std::path::Path) -> Result<Vec<distributions::Distribution>> {
    let text = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let v =
        crate::io::parse_value(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    distributions::from_value(v, &path.display().to_string())
}

/// Run traj-sample-tools.
pub fn run_cli(args: Args) -> Result<Status> {
    let machine = machine();
    let mut dists = distributions::builtin();
    if let Some(path) = &args.distributions {
        let extra = load_distributions(path).map_err(crate::error::usage)?;
        dists = distributions::merge(dists, extra);
    }
    let mut available = Available::parse(args.available.as_deref()).map_err(classify)?;
    if args.only_available {
        if !cfg!(feature = "agent") {
            return Err(UsageError(
                "--only-available: this build has no agent runtime (cargo feature `agent`) to check the machine with".to_string(),
            )
            .into());
        }
        if available.all {
            return Err(UsageError("--only-available with --available all".to_string()).into());
        }
        available.set.retain(|t| machine.why_not_here(t).is_none());
    }
    if args.list_distributions || args.list_toolsets {
        if !args.io.inputs.is_empty() {
            return Err(UsageError(
                "--list-distributions and --list-toolsets read no INPUT: give one or the other"
                    .to_string(),
            )
            .into());
        }
        // A name a run would refuse is refused here too.
        if !available.all {
            check_toolsets(&dists).map_err(classify)?;
        }
        let mut out = Output::create(args.io.output.as_deref())?;
        if args.list_distributions {
            list_distributions(&mut out, &dists, &available, args.json)?;
        } else {
            list_toolsets(&mut out, machine.as_ref(), &available, args.json)?;
        }
        out.commit()?;
        return Ok(Status::Ok);
    }
    let plan = Plan::new(dists, &args.distribution, available, args.seed).map_err(classify)?;
    let sources = args.io.sources(NAME)?;
    let (shard, on_error) = (args.shard.shard, args.io.on_error);
    let summary = crate::cli::run_stage(&args.io, NAME, &[], sources, |src, out, rejects| {
        sample_rows(&plan, src, shard, on_error, out, rejects)
    })?;
    let not_here: Vec<String> = plan
        .drawn()
        .iter()
        .filter_map(|t| machine.why_not_here(t).map(|why| format!("{t} ({why})")))
        .collect();
    if !not_here.is_empty() {
        note(
            NAME,
            &format!(
                "warning: drawn toolsets this machine could not run: {}; traj-run here fails the tasks none of whose drawn tools can run (tool_host); --only-available draws only what runs here",
                not_here.join(", ")
            ),
        );
    }
    Ok(crate::cli::done(NAME, &args.io, &summary, || {
        summary_line(&summary)
    }))
}

/// What this machine can run, asked of the toolbox's availability rules under
/// traj-run's default configuration (the rules alone: no tool is linked).
#[cfg(feature = "agent")]
fn machine() -> Box<dyn Machine> {
    use crate::toolbox::{Availability, ToolConfig, availability};
    struct Here(ToolConfig);
    impl Machine for Here {
        fn tool_status(&self, tool: &str) -> (&'static str, String) {
            if crate::catalog::toolsets::tool(tool).is_none() {
                return ("*", "unknown tool".to_string());
            }
            let a = availability::of(tool, &self.0);
            let mark = match a {
                Availability::Available => "",
                Availability::NotConfigured(_) => "?",
                _ => "*",
            };
            (mark, a.describe())
        }
        fn why_not_here(&self, toolset: &str) -> Option<String> {
            availability::why_not_here(toolset, &self.0)
        }
    }
    Box::new(Here(ToolConfig::default()))
}

/// Without the agent runtime nothing of the machine is checked.
#[cfg(not(feature = "agent"))]
fn machine() -> Box<dyn Machine> {
    Box::new(crate::stage::sample::CatalogOnly)
}

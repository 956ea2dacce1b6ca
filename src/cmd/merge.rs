//! traj-merge: merge batch files, shards and directories into one ordered,
//! deduplicated stream. The work is in [`crate::stage::merge`].

use std::path::PathBuf;

use anyhow::Result;

use crate::cli::{IoArgs, Status};
use crate::stage::merge::{Keep, KeySpec, MergeConfig, MergeSummary};

const NAME: &str = "traj-merge";

const EXAMPLES: &str = "\
Examples:
  # a run directory: its batch_*.jsonl in numeric order, into trajectories.jsonl
  traj-merge data/run1 -o data/run1/trajectories.jsonl --rejects data/run1/merge-rejects.jsonl

  # shards from several machines; the first row of a task wins
  traj-merge shard-a.jsonl shard-b.jsonl.gz --keep first -o merged.jsonl

  # a task is its task_uid (traj-run's records), else its prompt_index; rows with
  # neither are never de-duplicated unless --key asks: on the first human turn, or
  # only byte-identical lines
  cat a.jsonl b.jsonl | traj-merge --key prompt - > merged.jsonl
  traj-merge part-*.jsonl --key line -o merged.jsonl

  # inputs much larger than memory: spill sorted runs of 256 MiB to a big disk
  traj-merge data/run1 --buffer-size 256M --tmp-dir /scratch -o out.jsonl

Output is sorted by prompt_index (rows without one last, in input order). Duplicates and
discarded rows (tombstones: `discarded` set, as the newest reference writes for a prompt
dropped for having no reasoning) never reach the output: they are counted on stderr and
go to --rejects with the reason. Memory: --buffer-size plus about 64 bytes per distinct key.";

const ABOUT: &str =
    "Merge batch files, shards and run directories into one sorted, deduplicated JSONL stream.";

/// What traj-merge reads of a directory: a run directory's batch files, not every data
/// file as the other stages do.
const INPUTS_HELP: &str = "Input files (JSONL, JSON arrays or Parquet; plain, `.gz` or \
    `.zst`) or run directories (their `batch_*` files, in numeric order: `batch_2` before \
    `batch_10`; other files there are not read); `-` or none reads stdin";
const GLOB_HELP: &str = "In a directory input, read the files PATTERN matches instead of \
    its `batch_*` files: `*`, `?`, `[a-z]`, `**` for any folders; matched against the path \
    below the directory, or the file name alone when PATTERN has no `/` \
    (`--glob 'shard-*.jsonl'`)";

/// Flags of traj-merge.
#[derive(Debug, clap::Parser)]
#[command(name = NAME, version, about = ABOUT, after_help = EXAMPLES)]
#[command(mut_arg("inputs", |a| a.help(INPUTS_HELP)))]
#[command(mut_arg("glob", |a| a.help(GLOB_HELP)))]
pub struct Args {
    #[command(flatten)]
    pub io: IoArgs,

    /// What identifies a row: `task` (its `task_uid`, else its `prompt_index`; rows
    /// with neither are never de-duplicated), a top-level field (rows without it are
    /// never de-duplicated), `prompt` for the text of the first human turn, or `line`
    /// for the row's exact bytes (only identical lines are duplicates).
    #[arg(long, value_name = "FIELD", default_value = "task")]
    pub key: String,

    /// Which row of a duplicated key is kept, in input order.
    #[arg(long, value_enum, default_value_t = Keep::Last)]
    pub keep: Keep,

    /// Rows held in memory before a sorted run is spilled to disk (e.g. 512K, 64M, 1G):
    /// a row of a plain file costs about 100 bytes (it is read again when written), any
    /// other row its length.
    #[arg(long, alias = "mem-limit", value_name = "SIZE", default_value = "64M",
          value_parser = crate::stage::merge::parse_size)]
    pub buffer_size: usize,

    /// Directory for spill files (default: $TMPDIR or /tmp).
    #[arg(long, value_name = "DIR")]
    pub tmp_dir: Option<PathBuf>,

    /// Keep a uniform random sample of N rows (after de-duplication): the N rows with
    /// the smallest seeded hash of their key, so the sample depends only on the rows
    /// and --seed, not on their order. Rows left out are counted, not written anywhere.
    #[arg(long, value_name = "N")]
    pub sample: Option<usize>,

    /// Seed of --sample.
    #[arg(long, default_value_t = 42, value_name = "S", requires = "sample")]
    pub seed: u64,
}

/// Run traj-merge.
pub fn run_cli(args: Args) -> Result<Status> {
    let key = match args.key.as_str() {
        "" => crate::usage_bail!("--key needs a field name, `task`, `prompt` or `line`"),
        "task" => KeySpec::Task,
        "prompt" => KeySpec::Prompt,
        "line" => KeySpec::Line,
        f => KeySpec::Field(f.to_string()),
    };
    let cfg = MergeConfig {
        key,
        keep: args.keep,
        buffer_bytes: args.buffer_size,
        tmp_dir: args.tmp_dir.clone(),
        on_error: args.io.on_error,
        sample: args
            .sample
            .map(|n| crate::stage::merge::Sample { n, seed: args.seed }),
    };
    let sources = crate::io::sources_matching(&args.io.inputs, "batch_", args.io.glob.as_ref())?;
    let s = crate::cli::run_stage(&args.io, "merge", &[], sources, |src, out, rejects| {
        crate::stage::merge::merge(&cfg, src, out, rejects)
    })?;
    Ok(crate::cli::done(NAME, &args.io, &s.lines, || {
        summary_text(&s, &args)
    }))
}

fn summary_text(s: &MergeSummary, args: &Args) -> String {
    let lines = &s.lines;
    let mut msg = format!(
        "{} files, {} rows read, {} written",
        s.files, lines.read, lines.written
    );
    let keep = match args.keep {
        Keep::First => "first",
        Keep::Last => "last",
    };
    let (each, without) = match args.key.as_str() {
        "task" => (
            "task (task_uid, else prompt_index and rollout_index)",
            "task_uid or prompt_index",
        ),
        k => (k, k),
    };
    msg.push_str(&format!(
        ", {} duplicates dropped (kept the {keep} of each {each})",
        s.duplicates
    ));
    if s.unkeyed > 0 {
        msg.push_str(&format!(
            ", {} rows without a {without} key written as they are (never de-duplicated)",
            s.unkeyed
        ));
    }
    if s.tombstones > 0 {
        msg.push_str(&format!(
            ", {} discarded rows dropped (tombstones)",
            s.tombstones
        ));
    }
    msg.push_str(&crate::cli::bad_lines_text(lines));
    if s.duplicates + s.tombstones + lines.bad > 0 {
        msg.push_str(&crate::cli::rejects_text(&args.io));
    }
    msg.push_str(&crate::cli::lost_text(lines));
    if let Some(n) = args.sample {
        msg.push_str(&format!(
            ", sample of {n} (seed {}): {} rows left out",
            args.seed, s.not_sampled
        ));
    }
    if s.runs > 0 {
        msg.push_str(&format!(", sorted via {} spill runs", s.runs));
    }
    msg
}

//! traj-report: one self-contained HTML page per dataset or run (overview, plots, a
//! trajectory viewer), `--compare` for two side by side, `--summary` for a text table.
//! The engine is [`crate::stage::report`]; this module turns flags into its config.

use std::io::Write;

use anyhow::Result;
use serde_json::json;

use crate::cli::{IoArgs, Status, note};
use crate::io::{Output, Rejects, sources_matching};
use crate::stage::report::{self, Config, Dataset, figures, inputs};

const NAME: &str = "traj-report";

const EXAMPLES: &str = "\
Examples:
  # a run directory (raw records, failures, statistics.json) as one page
  traj-report data/run -o run-report.html

  # compressed rows, with the rejects of every stage, showing what each summary replaced
  traj-report data/run/trajectories_compressed.jsonl data/run/*rejects.jsonl \\
      --before data/run/trajectories.jsonl --budget 4000 -o report.html

  # two datasets or runs side by side, each figure with the difference B - A
  traj-report --compare old/trajectories.jsonl new/trajectories.jsonl -o compare.html

  # the overview as a text table on the terminal (no page)
  traj-report --summary data/train-*.parquet

Open the page from disk in any browser (file://): it loads nothing from the network.
Every row is counted in the overview; the viewer embeds --max-rows of them (the extremes
and a reproducible sample, docs/report.md). Bad lines follow --on-error.";

const ABOUT: &str =
    "One self-contained HTML page (overview, plots, trajectory viewer) per dataset or run.";

/// Flags of traj-report.
#[derive(Debug, clap::Parser)]
#[command(name = NAME, version, about = ABOUT, after_help = EXAMPLES)]
pub struct Args {
    #[command(flatten)]
    pub io: IoArgs,

    #[command(flatten)]
    pub jobs: crate::cli::JobsArgs,

    /// Two datasets or runs (files or directories) side by side, each figure with the
    /// difference B - A.
    #[arg(long, num_args = 2, value_names = ["A", "B"])]
    pub compare: Vec<String>,

    /// The uncompressed rows of a compressed input: each embedded summary shows the
    /// turns it replaced (rows paired by `id`, `prompt_index`, `prompt_hash` or
    /// `task_key`, else by their number).
    #[arg(long, value_name = "FILE")]
    pub before: Vec<String>,

    /// Rows embedded in the page (per dataset); the others are counted, not embedded.
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub max_rows: usize,

    /// Seed of the sample of embedded rows (the same seed, the same rows).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub seed: u64,

    /// Tokenizer of the tokens per row (counted as traj-compress counts them):
    /// o200k_base, cl100k_base, a .tiktoken file, a tokenizer.json, an HF directory,
    /// chars4.
    #[arg(long, value_name = "SPEC", default_value = "o200k_base")]
    pub tokenizer: String,

    /// Token budget drawn on the tokens plot, with the rows over it counted.
    #[arg(long, value_name = "N")]
    pub budget: Option<u64>,

    /// Print the overview as a plain text table on stdout (and write the page only
    /// with -o).
    #[arg(long)]
    pub summary: bool,

    /// The page's title (default: the inputs).
    #[arg(long, value_name = "TEXT")]
    pub title: Option<String>,
}

/// Run traj-report.
pub fn run_cli(args: Args) -> Result<Status> {
    if !args.compare.is_empty() && !args.io.inputs.is_empty() {
        crate::usage_bail!("--compare A B takes its two inputs itself: give no other INPUT");
    }
    if !args.compare.is_empty() && !args.before.is_empty() {
        crate::usage_bail!("--before is for one dataset, not with --compare");
    }
    if args.max_rows == 0 {
        crate::usage_bail!("--max-rows must be at least 1");
    }
    let tokenizer = crate::format::tokens::load(&args.tokenizer).map_err(crate::error::classify)?;
    let cfg = Config {
        tokenizer,
        budget: args.budget,
        max_rows: args.max_rows,
        seed: args.seed,
        on_error: args.io.on_error,
        jobs: args.jobs.jobs,
    };
    let glob = args.io.glob.as_ref();
    let sets: Vec<(String, inputs::Inputs)> = if args.compare.is_empty() {
        let i = inputs::resolve(&args.io.inputs, glob)?;
        vec![(i.names.join(" "), i)]
    } else {
        args.compare
            .iter()
            .map(|a| Ok((a.clone(), inputs::resolve(std::slice::from_ref(a), glob)?)))
            .collect::<Result<_>>()?
    };
    if !args.io.quiet {
        for (_, i) in &sets {
            crate::cli::note_passed_over(
                NAME,
                &i.skipped,
                "name the file, or give --glob, to read it",
            );
            crate::cli::note_beside_run(NAME, &i.beside_run);
        }
    }
    let before = if args.before.is_empty() {
        None
    } else {
        Some(sources_matching(&args.before, "", glob)?)
    };
    // The page is not rows: unlike a stage's output, -o may not replace an input either.
    let read: Vec<_> = (sets.iter().flat_map(|(_, i)| i.sources.iter().cloned()))
        .chain(before.iter().flatten().cloned())
        .collect();
    // stdin can be read once: a second `-` would read nothing (an empty dataset, an
    // empty --before) and say nothing.
    if read
        .iter()
        .filter(|s| matches!(s, crate::io::Source::Stdin))
        .count()
        > 1
    {
        crate::usage_bail!(
            "stdin (-) is named twice among the inputs and --before: it can be read once"
        );
    }
    // What goes to stdout: the page without -o (unless --summary), --summary's table.
    let stdout = std::path::Path::new("-");
    let page = match args.io.output.as_deref() {
        None if !args.summary => Some(stdout),
        o => o,
    };
    let written = [
        (
            if args.io.output.is_some() {
                "-o"
            } else {
                "the page (no -o)"
            },
            page,
        ),
        ("--summary", args.summary.then_some(stdout)),
        ("--rejects", args.io.rejects.as_deref()),
    ];
    crate::io::check_targets(None, &written, &read).map_err(crate::error::classify)?;
    let mut rejects = Rejects::open("report", args.io.rejects.as_deref())?;
    let mut datasets: Vec<Dataset> = Vec::new();
    let mut before = before;
    for (name, i) in sets {
        datasets.push(report::read_dataset(
            &name,
            i,
            before.take(),
            &cfg,
            &mut rejects,
        )?);
    }
    rejects.finish()?;
    let overviews: Vec<&serde_json::Value> = datasets.iter().map(|d| &d.overview).collect();
    let figs = figures::list(&overviews);
    let names: Vec<String> = datasets.iter().map(|d| d.name.clone()).collect();
    let title = args
        .title
        .clone()
        .unwrap_or_else(|| match names.as_slice() {
            [a, b] => format!("traj-report: {a} vs {b}"),
            _ => format!("traj-report: {}", names.join(" ")),
        });
    if args.summary {
        let mut o = std::io::stdout().lock();
        o.write_all(figures::table(&names, &figs).as_bytes())?;
        o.flush()?;
    }
    if !args.summary || args.io.output.is_some() {
        let meta = json!({
            "title": title,
            "tokenizer": cfg.tokenizer.name(),
            "budget": cfg.budget,
            "seed": cfg.seed,
            "max_rows": cfg.max_rows,
            "embed_bytes": report::view::EMBED_BYTES,
        });
        let mut out = Output::create(args.io.output.as_deref())?;
        report::page::write(&mut out, &meta, &datasets, &figs)?;
        out.commit()?;
    }
    let mut failed = false;
    for d in &datasets {
        failed |= d.summary.lost_data();
        if !args.io.quiet {
            let mut msg = format!(
                "{}: {} lines read, {} rows, {} embedded",
                d.name,
                d.summary.read,
                d.overview["rows"],
                d.rows.len()
            );
            msg.push_str(&crate::cli::bad_lines_text(&d.summary));
            msg.push_str(&crate::cli::lost_text(&d.summary));
            note(NAME, &msg);
            for n in &d.notes {
                note(NAME, &format!("{}: {n}", d.name));
            }
        }
    }
    if !args.io.quiet
        && let Some(p) = &args.io.output
    {
        let size = std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        note(
            NAME,
            &format!(
                "wrote {} ({:.1} MB): open it in a browser (file://{})",
                p.display(),
                size as f64 / 1e6,
                std::fs::canonicalize(p)
                    .unwrap_or_else(|_| p.clone())
                    .display()
            ),
        );
    }
    Ok(if failed { Status::Failed } else { Status::Ok })
}

//! What every binary shares: the common I/O flags, the mapping of a run's result to an
//! exit code (the codes: [`crate::error`]; clap's own errors exit 2 as well), and the
//! only place that prints diagnostics on stderr.

use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::io::{OnError, Select, Summary};

pub use crate::error::{EXIT_DATA, EXIT_OK, EXIT_USAGE, UsageError};

/// Input, output and error-policy flags shared by the line-oriented stages.
#[derive(Debug, Clone, clap::Args)]
pub struct IoArgs {
    /// Input files (JSONL, JSON arrays or Parquet; plain, `.gz` or `.zst`) or
    /// directories (searched recursively); `-` or none reads stdin.
    #[arg(value_name = "INPUT")]
    pub inputs: Vec<String>,

    /// In a directory input, read the files PATTERN matches instead of the `*.jsonl`,
    /// `*.json` and `*.parquet` files: `*`, `?`, `[a-z]`, `**` for any folders; matched
    /// against the path below the directory, or the file name alone when PATTERN has
    /// no `/` (`--glob 'data/train-*.parquet'`).
    #[arg(long, value_name = "PATTERN")]
    pub glob: Option<crate::io::Glob>,

    /// Write output to FILE (via a temp file renamed on success) instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// What to do with a bad input line: `fail` stops at the first one (exit 1);
    /// `skip` goes on, counts and reports (exit 1 unless every bad line went to --rejects).
    #[arg(long, value_enum, default_value_t = OnError::Fail, value_name = "POLICY")]
    pub on_error: OnError,

    /// Write every input line that was not passed on to FILE, with the reason.
    #[arg(long, value_name = "FILE")]
    pub rejects: Option<PathBuf>,

    /// No summary line on stderr.
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

/// `-j`: worker threads of the stages that parallelise over lines.
#[derive(Debug, Clone, clap::Args)]
pub struct JobsArgs {
    /// Worker threads (0 = one per core).
    #[arg(short = 'j', long, default_value_t = 0, value_name = "N")]
    pub jobs: usize,
}

/// `--shard I/N`: the stages that can split their input between processes.
#[derive(Debug, Clone, clap::Args)]
pub struct ShardArgs {
    /// Process only shard I of N (0-based): the k-th non-blank input line belongs to
    /// shard k % N. Run N processes with 0/N .. (N-1)/N and `traj-merge` their outputs
    /// (rows in `prompt_index` order; rows without one shard after shard, not in the
    /// input's order: see docs/pipeline.md).
    #[arg(long, value_name = "I/N")]
    pub shard: Option<crate::io::Shard>,
}

/// The flags of a stage that streams lines on worker threads and can be sharded
/// (traj-filter, traj-normalize, traj-compress): the I/O flags, `-j`, `--shard`.
#[derive(Debug, Clone, clap::Args)]
pub struct StageArgs {
    #[command(flatten)]
    pub io: IoArgs,
    #[command(flatten)]
    pub jobs: JobsArgs,
    #[command(flatten)]
    pub shard: ShardArgs,
}

impl StageArgs {
    /// The line pipeline these flags ask for: lines dropped without `--rejects` count
    /// as lost, CPU-sized batches (change either with struct update syntax).
    pub fn pipe(&self, stage: &'static str) -> crate::io::PipeConfig {
        crate::io::PipeConfig {
            stage,
            on_error: self.io.on_error,
            jobs: self.jobs.jobs,
            select: self.shard.shard.map(Select::from),
            drops_are_loss: true,
            batch_lines: 0,
        }
    }
}

impl IoArgs {
    /// The sources the inputs name ([`crate::io::row_sources`], `--glob` applied); the
    /// stage documents a directory holds beside its rows (a run directory's
    /// `checkpoint.json`) are passed over and named on stderr as `name`'s.
    pub fn sources(&self, name: &str) -> anyhow::Result<Vec<crate::io::Source>> {
        let (sources, passed) = crate::io::row_sources(&self.inputs, self.glob.as_ref())?;
        if !self.quiet {
            note_passed_over(
                name,
                &passed.documents,
                "name the file, or give --glob, to read it",
            );
            note_beside_run(name, &passed.beside_run);
        }
        Ok(sources)
    }

    /// The inputs with each directory replaced by the files `--glob` chooses in it (the
    /// inputs as given without `--glob`), for the stages that take input paths.
    pub fn expanded_inputs(&self) -> anyhow::Result<Vec<String>> {
        if self.glob.is_none() {
            return Ok(self.inputs.clone());
        }
        crate::io::sources_matching(&self.inputs, "", self.glob.as_ref())?
            .into_iter()
            .map(|s| match s {
                crate::io::Source::Stdin | crate::io::Source::Spooled { .. } => Ok("-".to_owned()),
                crate::io::Source::File(p) => p.into_os_string().into_string().map_err(|p| {
                    anyhow::Error::new(UsageError(format!(
                        "{}: --glob needs UTF-8 file names",
                        p.to_string_lossy()
                    )))
                }),
            })
            .collect()
    }
}

/// The result of one run of a binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Everything went to the output or to a rejects file.
    Ok,
    /// Some input was lost (skipped lines without a rejects file) or the run failed
    /// part-way: exit 1.
    Failed,
}

impl Status {
    pub fn from_summary(s: &Summary) -> Status {
        if s.lost_data() {
            Status::Failed
        } else {
            Status::Ok
        }
    }
}

/// True when `e` or anything in its chain is a broken pipe.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    crate::error::Error::of(e) == crate::error::Error::BrokenPipe
}

/// Run a data stage's `run_cli` and map its result to an exit code ([`finish`]).
///
/// SIGINT, SIGTERM and SIGHUP remove the temp files of outputs not yet committed, then
/// end the process as the signal would have (its default action): an interrupted run
/// leaves neither a half-written output nor a hidden temp file behind.
pub fn main(name: &str, run: impl FnOnce() -> anyhow::Result<Status>) -> ExitCode {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    if let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) {
        std::thread::spawn(move || {
            if let Some(sig) = signals.forever().next() {
                crate::io::output::remove_live_temps();
                let _ = signal_hook::low_level::emulate_default_handler(sig);
            }
        });
    }
    finish(name, run())
}

/// Map a run's result to an exit code (see [`crate::error`]), printing the error chain
/// as `name: outer: inner` on stderr.
pub fn finish(name: &str, result: anyhow::Result<Status>) -> ExitCode {
    match result {
        Ok(Status::Ok) => ExitCode::from(EXIT_OK),
        Ok(Status::Failed) => ExitCode::from(EXIT_DATA),
        Err(e) => {
            let class = crate::error::Error::of(&e);
            if class != crate::error::Error::BrokenPipe {
                let _ = writeln!(io::stderr().lock(), "{name}: {e:#}");
            }
            ExitCode::from(class.code())
        }
    }
}

/// Print a line on stderr (diagnostics never go to stdout). Errors are ignored: a
/// closed stderr must not turn a good run into a failure.
pub fn note(name: &str, msg: &str) {
    let _ = writeln!(io::stderr().lock(), "{name}: {msg}");
}

/// Name each file of a directory input passed over as a stage's JSON document
/// ([`crate::io::is_stage_document`]), with how to read it anyway (`hint`).
pub fn note_passed_over(name: &str, files: &[std::path::PathBuf], hint: &str) {
    note_not_read(
        name,
        files,
        &format!("a JSON document of a stage or of `datasets`, by its name; {hint}"),
    );
}

/// Name each data file of a traj-run directory input that is not one of its rows.
pub fn note_beside_run(name: &str, files: &[std::path::PathBuf]) {
    note_not_read(
        name,
        files,
        "beside the rows of a traj-run directory; name the file to read it",
    );
}

/// Name each file of a directory input not read, and why (`why`).
pub fn note_not_read(name: &str, files: &[std::path::PathBuf], why: &str) {
    for f in files {
        note(name, &format!("{}: not read ({why})", f.display()));
    }
}

/// The one-line summary every line stage prints on stderr at the end.
/// `, N bad lines skipped (first: FILE:LINE: reason)`, or nothing when none was.
pub fn bad_lines_text(s: &Summary) -> String {
    match (s.bad, &s.first_bad) {
        (0, _) => String::new(),
        (n, Some(first)) => format!(", {n} bad lines skipped (first: {first})"),
        (n, None) => format!(", {n} bad lines skipped"),
    }
}

/// `, N lines lost (no --rejects file)`, or nothing when none was: the one wording of
/// lost lines in every binary's summary.
pub fn lost_text(s: &Summary) -> String {
    if s.lost > 0 {
        format!(", {} lines lost (no --rejects file)", s.lost)
    } else {
        String::new()
    }
}

/// `, N dropped (reason: n, ...)`, or nothing when none was.
pub fn dropped_text<'a>(n: u64, per: impl IntoIterator<Item = (&'a String, &'a u64)>) -> String {
    if n == 0 {
        return String::new();
    }
    let per: Vec<String> = per.into_iter().map(|(k, v)| format!("{k}: {v}")).collect();
    format!(", {n} dropped ({})", per.join(", "))
}

/// Where the lines not passed on went: ` -> FILE`, or a hint to keep them.
pub fn rejects_text(io: &IoArgs) -> String {
    match &io.rejects {
        Some(p) => format!(" -> {}", p.display()),
        None => " (not kept: use --rejects FILE to keep them)".to_string(),
    }
}

/// The one summary line of a line stage: `N read, N written`, the drops, the bad lines,
/// the lost lines.
pub fn summary_line(s: &Summary) -> String {
    let mut msg = format!("{} read, {} written", s.read, s.written);
    msg.push_str(&dropped_text(s.dropped_lines, &s.dropped));
    msg.push_str(&bad_lines_text(s));
    msg.push_str(&lost_text(s));
    msg
}

/// The skeleton of a data command: check that the files it writes (`-o`, `--rejects`
/// and `more`, such as `--stats`) meet neither each other nor an input
/// ([`crate::io::check_targets`]), open the output (`-o`, else stdout) and the rejects
/// file for `stage`, run `engine` on the sources, then commit the output and the rejects
/// together. Nothing is left behind when the engine fails.
pub fn run_stage<T>(
    io: &IoArgs,
    stage: &'static str,
    more: &[(&'static str, Option<&std::path::Path>)],
    sources: Vec<crate::io::Source>,
    engine: impl FnOnce(
        Vec<crate::io::Source>,
        &mut crate::io::Output,
        &mut crate::io::Rejects,
    ) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let mut written = vec![("--rejects", io.rejects.as_deref())];
    written.extend_from_slice(more);
    let output = io.output.as_deref().unwrap_or(std::path::Path::new("-"));
    crate::io::check_targets(Some(output), &written, &sources).map_err(crate::error::classify)?;
    let onto_input = crate::io::is_input(output, &sources);
    let mut out = crate::io::Output::create(io.output.as_deref())?;
    let mut rejects = crate::io::Rejects::open(stage, io.rejects.as_deref())?;
    let result = engine(sources, &mut out, &mut rejects)?;
    // `-o` onto an input replaces it: never with lines lost on the way (they would be
    // in no file at all). The input stays as it was.
    if onto_input && rejects.lost() > 0 {
        return Err(crate::io::onto_input_with_loss(output, rejects.lost()));
    }
    crate::io::commit(out, rejects)?;
    Ok(result)
}

/// The end of a data command: the summary line on stderr (unless `-q`; `text` is only
/// built then) and the status its line counts give.
pub fn done(name: &str, io: &IoArgs, lines: &Summary, text: impl FnOnce() -> String) -> Status {
    if !io.quiet {
        note(name, &text());
    }
    Status::from_summary(lines)
}

/// A finite number (`--min-reward`, `--min-margin` and the like): clap's value parser.
pub fn finite(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        _ => Err(format!("{s:?} is not a finite number")),
    }
}

/// Open the `--stats` file (`-`: stdout) before the run, so that a place it cannot be
/// written stops the run before its outputs are put in place.
pub fn open_stats(path: Option<&std::path::Path>) -> anyhow::Result<Option<crate::io::Output>> {
    path.map(|p| crate::io::Output::create(Some(p))).transpose()
}

/// The one `--stats` writer: `doc` as pretty JSON and a newline to the file
/// [`open_stats`] opened, through its temp file renamed into place.
pub fn write_stats(mut o: crate::io::Output, doc: &serde_json::Value) -> anyhow::Result<()> {
    serde_json::to_writer_pretty(&mut o, doc)?;
    o.write_all(b"\n")?;
    o.commit()
}

/// True when stderr is a terminal (progress bars only then).
pub fn stderr_is_tty() -> bool {
    io::stderr().is_terminal()
}

//! What a report reads from its arguments: files as every stage reads them, directories
//! of data files, and traj-run directories.
//!
//! A directory holding `statistics.json` or `checkpoint.json` is a traj-run directory:
//! its rows are the raw records (`batch_N.jsonl`, in natural order) and `failures.jsonl`;
//! `statistics.json` is read as JSON for the run's totals; the stage outputs a pipeline
//! may have left beside them are not read (each is listed, [`Inputs::beside_run`]; name
//! them as files to include them). In any
//! other directory the data files are read ([`crate::io::data_files_in`], `--glob`),
//! except the JSON documents of the stages (`statistics.json`, `checkpoint.json`,
//! `*metrics.json`, `*stats.json`), which are not rows: each file passed over so is
//! listed ([`Inputs::skipped`]), for the command to name.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::io::{Glob, Source, data_files_in, is_run_dir, row_sources};

/// The sources of one dataset.
#[derive(Debug, Default)]
pub struct Inputs {
    pub sources: Vec<Source>,
    /// `statistics.json` of each traj-run directory.
    pub statistics: Vec<PathBuf>,
    /// The arguments as given (the page names the dataset by them).
    pub names: Vec<String>,
    /// Files of a data directory not read, taken by their names for the JSON documents
    /// of the stages.
    pub skipped: Vec<PathBuf>,
    /// Data files of a traj-run directory that are not its rows (what a pipeline left
    /// beside them: `trajectories.jsonl`, a compressed copy).
    pub beside_run: Vec<PathBuf>,
}

/// A traj-run directory's rows (its `batch_N` files as every stage reads them, in
/// natural order, then `failures.jsonl`) and its other data files (beside them, not
/// its documents), from one listing.
fn run_dir_files(d: &Path) -> Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let failures = d.join("failures.jsonl");
    let (mut rows, beside): (Vec<PathBuf>, Vec<PathBuf>) = data_files_in(d, None)?
        .into_iter()
        .filter(|f| *f != failures && !crate::io::is_stage_document(f))
        .partition(|f| crate::io::is_batch_file(d, f));
    if failures.is_file() {
        rows.push(failures);
    }
    Ok((rows, beside))
}

/// The inputs `args` name; none means stdin.
pub fn resolve(args: &[String], glob: Option<&Glob>) -> Result<Inputs> {
    let mut out = Inputs {
        names: args.to_vec(),
        ..Inputs::default()
    };
    if args.is_empty() {
        out.sources.push(Source::Stdin);
        out.names.push("<stdin>".into());
        return Ok(out);
    }
    for a in args {
        let p = Path::new(a);
        if a != "-" && p.is_dir() && is_run_dir(p) && glob.is_none() {
            let (rows, beside) = run_dir_files(p)?;
            out.beside_run.extend(beside);
            out.sources.extend(rows.into_iter().map(Source::File));
            let s = p.join("statistics.json");
            if s.is_file() {
                out.statistics.push(s);
            }
        } else {
            // A file, stdin, or a directory of data files (its stage documents passed
            // over): as every stage reads them.
            let (sources, passed) = row_sources(std::slice::from_ref(a), glob)?;
            out.sources.extend(sources);
            out.skipped.extend(passed.documents);
        }
    }
    Ok(out)
}

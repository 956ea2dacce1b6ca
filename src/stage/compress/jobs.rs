//! Where traj-compress's output goes: the reference's output naming turned into a list
//! of jobs (sources and their output file) and the path of the metrics file.
//!
//! - `--input FILE`: `<stem><suffix>.jsonl` beside it, metrics `<stem><suffix>_metrics.json`.
//! - `--input DIR`: `<dir><suffix>/`, one `<stem>.jsonl` per data file below it, in the
//!   same subfolder as its input (`DIR/a/x.jsonl.gz` -> `DIR<suffix>/a/x.jsonl`), metrics
//!   `compression_metrics.json` (the config's `output_file`) there. Two inputs that
//!   would share an output (`x.jsonl` beside `x.jsonl.gz`) are refused, never merged.
//! - Plain arguments (or stdin): one job to `-o` or stdout; metrics beside `-o` only.
//!
//! `--stats FILE` names the metrics file in every case.

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::io::{PipeConfig, Select, Source};

/// One unit of work: sources and where their output goes.
pub struct Job {
    pub sources: Vec<Source>,
    /// `None`: stdout.
    pub output: Option<PathBuf>,
    /// `--sample-percent`: the lines chosen, and their bytes (for the progress bar).
    pub sample: Option<(Select, u64)>,
}

impl Job {
    /// `<sources> -> <output>` for `--dry-run`.
    pub fn describe(&self) -> String {
        let srcs: Vec<String> = self.sources.iter().map(Source::name).collect();
        let out = self
            .output
            .as_ref()
            .map_or("<stdout>".to_string(), |p| p.display().to_string());
        format!("{} -> {out}", srcs.join(", "))
    }

    /// The line pipeline of this job: a `--sample-percent` selection (which already
    /// holds `--shard`) replaces the plain shard of `base`.
    pub fn pipe(&self, base: &PipeConfig) -> PipeConfig {
        match &self.sample {
            Some((select, _)) => PipeConfig {
                select: Some(select.clone()),
                ..base.clone()
            },
            None => base.clone(),
        }
    }
}

/// What the naming depends on: the command line's inputs and outputs, the config's
/// suffix and metrics file name.
#[derive(Debug, Clone, Copy)]
pub struct Layout<'a> {
    /// `--input PATH`.
    pub input: Option<&'a Path>,
    /// Positional inputs.
    pub inputs: &'a [String],
    /// `-o`.
    pub output: Option<&'a Path>,
    /// `--stats FILE`.
    pub stats: Option<&'a Path>,
    /// `_compressed` unless the config says otherwise.
    pub output_suffix: &'a str,
    /// The metrics file's name in an output directory.
    pub metrics_file: &'a str,
    /// `--glob`: with a directory `--input`, the files it reads.
    pub glob: Option<&'a crate::io::Glob>,
}

/// Why the jobs of a run cannot be planned.
#[derive(Debug, thiserror::Error)]
pub enum JobsError {
    #[error("give inputs either as arguments or with --input, not both")]
    BothInputs,
    #[error("--input {}: no such file or directory", .0.display())]
    NoSuchInput(PathBuf),
    #[error(
        "--input {}: give -o, there is no folder to write `<dir>_compressed` beside",
        .0.display()
    )]
    NoName(PathBuf),
    #[error("--glob picks files of a directory: --input {} is a file", .0.display())]
    GlobOnFile(PathBuf),
    /// Two inputs of a directory, or an input and the metrics file, that would be
    /// written to one path.
    #[error(
        "{} and {} would both be written to {}: rename one, or compress them separately",
        .0.display(), .1.display(), .2.display()
    )]
    SameOutput(PathBuf, PathBuf, PathBuf),
    /// Listing a directory or reading the arguments failed.
    #[error(transparent)]
    Io(#[from] anyhow::Error),
}

impl crate::error::Classify for JobsError {
    /// True for the errors of the command line (exit 2), false for I/O. Reading the
    /// arguments can fail with a usage or input error of its own (a directory with no
    /// data file, an unreadable one): `Io` keeps that error's class, since a
    /// transparent `anyhow::Error` shows only what lies below its outermost error.
    fn is_usage(&self) -> bool {
        match self {
            JobsError::Io(e) => crate::error::Error::of(e) == crate::error::Error::Usage,
            _ => true,
        }
    }
}

/// Strip `.jsonl.gz` / `.jsonl.zst` / `.jsonl` / `.json.gz` / `.json.zst` / `.gz` /
/// `.zst` / one extension from a file name.
pub fn stem_of(p: &Path) -> String {
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    for ext in [
        ".jsonl.gz",
        ".jsonl.zst",
        ".jsonl",
        ".json.gz",
        ".json.zst",
        ".gz",
        ".zst",
    ] {
        if let Some(s) = name.strip_suffix(ext) {
            return s.to_string();
        }
    }
    match name.rfind('.') {
        Some(i) if i > 0 => name[..i].to_string(),
        _ => name,
    }
}

/// Whether `out` is a file that metrics can be written beside: not `-` (stdout), a
/// device or a FIFO.
fn is_a_file(out: &Path) -> bool {
    out != Path::new("-") && !crate::io::output::is_special_file(out)
}

/// `<stem>_metrics.json` beside an output file.
fn metrics_beside(out: &Path) -> PathBuf {
    out.with_file_name(format!("{}_metrics.json", stem_of(out)))
}

/// The jobs of a run, its metrics path, and the files of a directory `--input` passed
/// over as the stages' JSON documents ([`crate::io::is_stage_document`]; for the
/// command to name).
pub type Planned = (Vec<Job>, Option<PathBuf>, Vec<PathBuf>);

/// The run's [`Planned`] jobs.
pub fn plan_jobs(l: &Layout) -> Result<Planned, JobsError> {
    let stats = l.stats.map(Path::to_path_buf);
    let Some(input) = l.input else {
        let sources = crate::io::sources_from_args(l.inputs)?;
        let out = l.output.map(Path::to_path_buf);
        // Nothing is beside stdout, a device or a FIFO (`-o -`, `-o /dev/null`): metrics
        // only by --stats.
        let regular = out.as_deref().filter(|o| is_a_file(o));
        let metrics = stats.or_else(|| regular.map(metrics_beside));
        let job = Job {
            sources,
            output: out,
            sample: None,
        };
        return Ok((vec![job], metrics, Vec::new()));
    };
    if !l.inputs.is_empty() {
        return Err(JobsError::BothInputs);
    }
    if !input.exists() {
        return Err(JobsError::NoSuchInput(input.to_path_buf()));
    }
    let parent = input.parent().unwrap_or(Path::new(""));
    if !input.is_dir() && l.glob.is_some() {
        return Err(JobsError::GlobOnFile(input.to_path_buf()));
    }
    if !input.is_dir() {
        let out = l
            .output
            .map(Path::to_path_buf)
            .unwrap_or_else(|| parent.join(format!("{}{}.jsonl", stem_of(input), l.output_suffix)));
        let beside = is_a_file(&out).then(|| metrics_beside(&out));
        let metrics = stats.or(beside);
        let job = Job {
            sources: vec![Source::File(input.to_path_buf())],
            output: Some(out),
            sample: None,
        };
        return Ok((vec![job], metrics, Vec::new()));
    }
    let out_dir = match l.output {
        Some(o) => o.to_path_buf(),
        None => {
            // `.`, `..` or `/` names no folder to put the output beside: the real one.
            let real;
            let (parent, name) = match input.file_name() {
                Some(n) => (parent, n),
                None => {
                    real = std::fs::canonicalize(input)
                        .with_context(|| format!("--input {}", input.display()))?;
                    match (real.parent(), real.file_name()) {
                        (Some(p), Some(n)) => (p, n),
                        _ => return Err(JobsError::NoName(input.to_path_buf())),
                    }
                }
            };
            parent.join(format!("{}{}", name.to_string_lossy(), l.output_suffix))
        }
    };
    // The stages' JSON documents (an earlier run's `compression_metrics.json`) are no
    // rows: passed over (the command names them), unless a --glob picks them.
    let (skipped, files): (Vec<PathBuf>, Vec<PathBuf>) = crate::io::data_files_in(input, l.glob)?
        .into_iter()
        .partition(|f| l.glob.is_none() && crate::io::is_stage_document(f));
    if files.is_empty() {
        return Err(JobsError::Io(
            crate::io::no_data_files(input, "", l.glob).into(),
        ));
    }
    let metrics = stats.unwrap_or_else(|| out_dir.join(l.metrics_file));
    // Each output path has one writer: an input's subfolder is kept, and a second input
    // that would land on a taken path is refused (one would replace the other's rows).
    let mut taken = std::collections::HashMap::from([(metrics.clone(), metrics.clone())]);
    let mut jobs = Vec::with_capacity(files.len());
    for f in files {
        let sub = f
            .strip_prefix(input)
            .ok()
            .and_then(Path::parent)
            .unwrap_or(Path::new(""));
        let out = out_dir.join(sub).join(format!("{}.jsonl", stem_of(&f)));
        if let Some(first) = taken.insert(out.clone(), f.clone()) {
            return Err(JobsError::SameOutput(first, f, out));
        }
        jobs.push(Job {
            output: Some(out),
            sources: vec![Source::File(f)],
            sample: None,
        });
    }
    Ok((jobs, Some(metrics), skipped))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Classify;

    fn layout<'a>(input: Option<&'a Path>, output: Option<&'a Path>) -> Layout<'a> {
        Layout {
            input,
            inputs: &[],
            output,
            stats: None,
            output_suffix: "_compressed",
            metrics_file: "compression_metrics.json",
            glob: None,
        }
    }

    fn outputs(jobs: &[Job]) -> Vec<PathBuf> {
        jobs.iter().filter_map(|j| j.output.clone()).collect()
    }

    #[test]
    fn stems() {
        assert_eq!(stem_of(Path::new("a/x.jsonl.gz")), "x");
        assert_eq!(stem_of(Path::new("foo.jsonl")), "foo");
        assert_eq!(stem_of(Path::new("foo.json.gz")), "foo");
        assert_eq!(stem_of(Path::new("foo.txt")), "foo");
        assert_eq!(stem_of(Path::new(".hidden")), ".hidden");
        assert_eq!(stem_of(Path::new("run")), "run");
    }

    #[test]
    fn input_file_naming() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("run.jsonl");
        std::fs::write(&input, "{}\n").unwrap();
        let (jobs, m, _) = plan_jobs(&layout(Some(&input), None)).unwrap();
        assert_eq!(outputs(&jobs), [dir.path().join("run_compressed.jsonl")]);
        assert_eq!(m, Some(dir.path().join("run_compressed_metrics.json")));
        // -o wins, the metrics follow it; --stats wins over both.
        let o = dir.path().join("x/out.jsonl");
        let (jobs, m, _) = plan_jobs(&layout(Some(&input), Some(&o))).unwrap();
        assert_eq!(outputs(&jobs), std::slice::from_ref(&o));
        assert_eq!(m, Some(dir.path().join("x/out_metrics.json")));
        let s = dir.path().join("s.json");
        let l = Layout {
            stats: Some(&s),
            output_suffix: "_short",
            ..layout(Some(&input), None)
        };
        let (jobs, m, _) = plan_jobs(&l).unwrap();
        assert_eq!(outputs(&jobs), [dir.path().join("run_short.jsonl")]);
        assert_eq!(m, Some(s));
    }

    #[test]
    fn a_dot_input_is_named_after_its_folder_and_globs_pick_files() {
        let dir = tempfile::tempdir().unwrap();
        let runs = dir.path().join("runs");
        std::fs::create_dir_all(runs.join("sub")).unwrap();
        std::fs::write(runs.join("a.jsonl"), "").unwrap();
        std::fs::write(runs.join("b.jsonl.zst"), "").unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        // `runs/sub/..` is `runs`: its output goes beside it, not inside it.
        let up = runs.join("sub/..");
        let (jobs, m, _) = plan_jobs(&layout(Some(&up), None)).unwrap();
        let out = real.join("runs_compressed");
        assert_eq!(outputs(&jobs), [out.join("a.jsonl"), out.join("b.jsonl")]);
        assert_eq!(m, Some(out.join("compression_metrics.json")));
        let glob: crate::io::Glob = "a*".parse().unwrap();
        let l = Layout {
            glob: Some(&glob),
            ..layout(Some(&runs), None)
        };
        let (jobs, _, _) = plan_jobs(&l).unwrap();
        assert_eq!(outputs(&jobs), [dir.path().join("runs_compressed/a.jsonl")]);
        let file = runs.join("a.jsonl");
        let l = Layout {
            glob: Some(&glob),
            ..layout(Some(&file), None)
        };
        assert!(matches!(plan_jobs(&l), Err(JobsError::GlobOnFile(_))));
        // A .zst output's metrics are named as a .gz one's.
        let o = dir.path().join("n.jsonl.zst");
        let (_, m, _) = plan_jobs(&layout(Some(&file), Some(&o))).unwrap();
        assert_eq!(m, Some(dir.path().join("n_metrics.json")));
    }

    #[test]
    fn input_dir_naming() {
        let dir = tempfile::tempdir().unwrap();
        let runs = dir.path().join("runs");
        std::fs::create_dir(&runs).unwrap();
        let e = plan_jobs(&layout(Some(&runs), None)).err().unwrap();
        assert!(e.is_usage(), "{e}");
        assert!(e.to_string().contains("directory holds no"), "{e}");
        std::fs::write(runs.join("b.jsonl.gz"), "").unwrap();
        std::fs::write(runs.join("a.jsonl"), "").unwrap();
        std::fs::write(runs.join("notes.txt"), "").unwrap();
        let (jobs, m, _) = plan_jobs(&layout(Some(&runs), None)).unwrap();
        let out = dir.path().join("runs_compressed");
        assert_eq!(outputs(&jobs), [out.join("a.jsonl"), out.join("b.jsonl")]);
        assert_eq!(m, Some(out.join("compression_metrics.json")));
        // A subfolder's file keeps its subfolder: it never meets a top-level namesake.
        std::fs::create_dir(runs.join("sub")).unwrap();
        std::fs::write(runs.join("sub/a.jsonl"), "").unwrap();
        let (jobs, _, _) = plan_jobs(&layout(Some(&runs), None)).unwrap();
        assert_eq!(
            outputs(&jobs),
            [
                out.join("a.jsonl"),
                out.join("b.jsonl"),
                out.join("sub/a.jsonl")
            ]
        );
    }

    #[test]
    fn inputs_that_would_share_an_output_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let runs = dir.path().join("runs");
        std::fs::create_dir(&runs).unwrap();
        std::fs::write(runs.join("x.jsonl"), "").unwrap();
        std::fs::write(runs.join("x.jsonl.gz"), "").unwrap();
        let e = plan_jobs(&layout(Some(&runs), None)).err().unwrap();
        assert!(e.is_usage(), "{e}");
        let out = dir.path().join("runs_compressed/x.jsonl");
        assert_eq!(
            e.to_string(),
            format!(
                "{} and {} would both be written to {}: rename one, or compress them \
                 separately",
                runs.join("x.jsonl").display(),
                runs.join("x.jsonl.gz").display(),
                out.display()
            )
        );
        // Nor may an output be the metrics file (the config's `output_file`).
        std::fs::remove_file(runs.join("x.jsonl.gz")).unwrap();
        let l = Layout {
            metrics_file: "x.jsonl",
            ..layout(Some(&runs), None)
        };
        let e = plan_jobs(&l).err().unwrap();
        assert!(matches!(e, JobsError::SameOutput(..)), "{e}");
    }

    #[test]
    fn arguments_and_errors() {
        let (jobs, m, _) = plan_jobs(&layout(None, None)).unwrap();
        assert_eq!(jobs.len(), 1);
        assert!(jobs[0].output.is_none());
        assert_eq!(m, None, "no metrics for stdout unless asked");
        let o = Path::new("d/o.jsonl");
        let (_, m, _) = plan_jobs(&layout(None, Some(o))).unwrap();
        assert_eq!(m, Some(PathBuf::from("d/o_metrics.json")));
        let (_, m, _) = plan_jobs(&layout(None, Some(Path::new("/dev/null")))).unwrap();
        assert_eq!(m, None, "nothing beside a device");
        // `-o -` is stdout: a file named `-_metrics.json` was left in the folder.
        let (_, m, _) = plan_jobs(&layout(None, Some(Path::new("-")))).unwrap();
        assert_eq!(m, None, "nothing beside stdout");
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("f.jsonl");
        std::fs::write(&f, "{}\n").unwrap();
        let (_, m, _) = plan_jobs(&layout(Some(&f), Some(Path::new("-")))).unwrap();
        assert_eq!(m, None, "nothing beside stdout");
        let missing = Path::new("/nonexistent/in.jsonl");
        let e = plan_jobs(&layout(Some(missing), None)).err().unwrap();
        assert!(e.is_usage() && matches!(e, JobsError::NoSuchInput(_)));
        let inputs = ["x.jsonl".to_string()];
        let l = Layout {
            inputs: &inputs,
            ..layout(Some(missing), None)
        };
        assert!(matches!(plan_jobs(&l), Err(JobsError::BothInputs)));
    }

    #[test]
    fn a_positional_directory_without_data_is_a_usage_error() {
        let d = tempfile::tempdir().unwrap();
        let inputs = [d.path().display().to_string()];
        let l = Layout {
            inputs: &inputs,
            ..layout(None, None)
        };
        let e = plan_jobs(&l).err().unwrap();
        assert!(matches!(e, JobsError::Io(_)), "{e}");
        assert!(e.is_usage(), "{e}: exit 2, as every other stage");
        let e = crate::error::classify(e);
        assert_eq!(crate::error::Error::of(&e), crate::error::Error::Usage);
    }
}

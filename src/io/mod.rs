//! JSONL input and output shared by every stage.
//!
//! - [`open_source`]: a file (plain or gzip, detected by magic bytes), or stdin for `-`.
//! - [`LineReader`]: yields lines with their source name and 1-based line number; strips
//!   a UTF-8 BOM on the first line, CR before LF, and tolerates a missing final newline.
//! - [`OnError`] and [`Rejects`]: the strict default, `--on-error skip`, and the rejects
//!   file that receives every line not turned into output, with its reason.
//! - [`Output`]: stdout, or a file written to a temp file and renamed on success.
//! - [`process`]: the ordered parallel pipeline (one reader, N workers, one writer).

pub mod passthru;

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// Size of read and write buffers.
pub const BUF_SIZE: usize = 256 * 1024;

/// Where lines come from: a file path or standard input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Stdin,
    File(PathBuf),
}

impl Source {
    /// `-` means stdin, anything else a path.
    pub fn parse(arg: &str) -> Source {
        if arg == "-" {
            Source::Stdin
        } else {
            Source::File(PathBuf::from(arg))
        }
    }

    /// The name used in messages: `<stdin>` or the path as given.
    pub fn name(&self) -> String {
        match self {
            Source::Stdin => "<stdin>".to_string(),
            Source::File(p) => p.display().to_string(),
        }
    }
}

/// Turn command-line input arguments into sources; none means stdin.
///
/// A directory expands to its `*.jsonl` and `*.jsonl.gz` files in natural order
/// (`batch_2` before `batch_10`).
pub fn sources_from_args(args: &[String]) -> Result<Vec<Source>> {
    sources_with_prefix(args, "")
}

/// [`sources_from_args`], where a directory gives only its files whose names start with
/// `prefix` (`batch_` for the batch files of a run directory).
pub fn sources_with_prefix(args: &[String], prefix: &str) -> Result<Vec<Source>> {
    if args.is_empty() {
        return Ok(vec![Source::Stdin]);
    }
    let mut out = Vec::new();
    for a in args {
        let src = Source::parse(a);
        match &src {
            Source::File(p) if p.is_dir() => {
                let before = out.len();
                out.extend(
                    jsonl_files_in(p)?
                        .into_iter()
                        .filter(|f| {
                            f.file_name()
                                .and_then(|n| n.to_str())
                                .is_some_and(|n| n.starts_with(prefix))
                        })
                        .map(Source::File),
                );
                if out.len() == before {
                    bail!(
                        "{}: directory holds no {prefix}*.jsonl or {prefix}*.jsonl.gz files",
                        p.display()
                    );
                }
            }
            _ => out.push(src),
        }
    }
    Ok(out)
}

/// The `*.jsonl` and `*.jsonl.gz` files directly inside `dir`, in natural order.
pub fn jsonl_files_in(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("{}", dir.display()))? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_file() && (name.ends_with(".jsonl") || name.ends_with(".jsonl.gz")) {
            files.push(path);
        }
    }
    files.sort_by(|a, b| natural_cmp(&a.to_string_lossy(), &b.to_string_lossy()));
    Ok(files)
}

/// Compare strings so that runs of digits compare by value: `batch_2 < batch_10`.
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i].is_ascii_digit() && b[j].is_ascii_digit() {
            let si = i;
            while i < a.len() && a[i].is_ascii_digit() {
                i += 1;
            }
            let sj = j;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            let na = trim_zeros(&a[si..i]);
            let nb = trim_zeros(&b[sj..j]);
            let ord = na.len().cmp(&nb.len()).then_with(|| na.cmp(nb));
            if ord != Ordering::Equal {
                return ord;
            }
        } else {
            if a[i] != b[j] {
                return a[i].cmp(&b[j]);
            }
            i += 1;
            j += 1;
        }
    }
    (a.len() - i).cmp(&(b.len() - j))
}

fn trim_zeros(d: &[u8]) -> &[u8] {
    let k = d.iter().position(|&c| c != b'0').unwrap_or(d.len());
    &d[k..]
}

/// Open a source for reading; gzip is detected by its magic bytes, whatever the name.
pub fn open_source(src: &Source) -> Result<Box<dyn BufRead + Send>> {
    let raw: Box<dyn Read + Send> = match src {
        Source::Stdin => Box::new(io::stdin()),
        Source::File(p) => {
            Box::new(File::open(p).with_context(|| format!("cannot open {}", p.display()))?)
        }
    };
    let mut buf = BufReader::with_capacity(BUF_SIZE, raw);
    let head = buf
        .fill_buf()
        .with_context(|| format!("cannot read {}", src.name()))?;
    if head.len() >= 2 && head[0] == 0x1f && head[1] == 0x8b {
        let gz = flate2::bufread::MultiGzDecoder::new(buf);
        Ok(Box::new(BufReader::with_capacity(BUF_SIZE, gz)))
    } else {
        Ok(Box::new(buf))
    }
}

/// Reads lines from a sequence of sources, keeping the name and line number of each.
pub struct LineReader {
    sources: Vec<Source>,
    next: usize,
    cur: Option<(Arc<str>, Box<dyn BufRead + Send>)>,
    lineno: u64,
}

/// One line as read: its source, its 1-based number, and its bytes without the line
/// ending (no LF, no CR before it, no BOM on line 1).
#[derive(Debug, Clone)]
pub struct Line {
    pub source: Arc<str>,
    pub lineno: u64,
    pub bytes: Vec<u8>,
}

impl LineReader {
    pub fn new(sources: Vec<Source>) -> LineReader {
        LineReader {
            sources,
            next: 0,
            cur: None,
            lineno: 0,
        }
    }

    /// Index (in the list given to [`LineReader::new`]) of the source of the last line
    /// read.
    pub fn source_index(&self) -> usize {
        self.next.saturating_sub(1)
    }

    /// Read the next line into `buf` (cleared first). Returns the source name and line
    /// number, or `None` at the end of the last source.
    pub fn read_into(&mut self, buf: &mut Vec<u8>) -> Result<Option<(Arc<str>, u64)>> {
        loop {
            if self.cur.is_none() {
                if self.next >= self.sources.len() {
                    return Ok(None);
                }
                let src = &self.sources[self.next];
                self.next += 1;
                let r = open_source(src)?;
                self.cur = Some((Arc::from(src.name()), r));
                self.lineno = 0;
            }
            let (name, r) = self.cur.as_mut().expect("a source is open");
            buf.clear();
            let n = r
                .read_until(b'\n', buf)
                .with_context(|| format!("{name}: read error"))?;
            if n == 0 {
                self.cur = None;
                continue;
            }
            self.lineno += 1;
            if buf.last() == Some(&b'\n') {
                buf.pop();
            }
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            if self.lineno == 1 && buf.starts_with(b"\xEF\xBB\xBF") {
                buf.drain(..3);
            }
            return Ok(Some((name.clone(), self.lineno)));
        }
    }
}

impl Iterator for LineReader {
    type Item = Result<Line>;
    fn next(&mut self) -> Option<Result<Line>> {
        let mut bytes = Vec::new();
        match self.read_into(&mut bytes) {
            Ok(Some((source, lineno))) => Some(Ok(Line {
                source,
                lineno,
                bytes,
            })),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

/// True when a line holds only white space: such lines are skipped by every stage.
pub fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|b| b.is_ascii_whitespace())
}

/// What to do with a line that cannot be turned into output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OnError {
    /// Stop at the first bad line with exit status 1.
    #[default]
    Fail,
    /// Go on, count, and report a summary; exit 1 unless every bad line went to --rejects.
    Skip,
}

/// A problem with one input line, with its location.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{source_name}:{lineno}: {reason}")]
pub struct LineError {
    pub source_name: Arc<str>,
    pub lineno: u64,
    pub reason: String,
}

/// Parse a line as a JSON object, with the error kinds named as users read them.
///
/// One UTF-8 check of the whole line (SIMD), then serde_json's `StrRead`, which does not
/// re-validate each string; a line that is not UTF-8 goes through `from_slice` for the
/// position in its message.
pub fn parse_object(bytes: &[u8]) -> std::result::Result<serde_json::Map<String, Value>, String> {
    let parsed = match simdutf8::basic::from_utf8(bytes) {
        Ok(text) => serde_json::from_str::<Value>(text),
        Err(_) => serde_json::from_slice::<Value>(bytes),
    };
    match parsed {
        Ok(Value::Object(m)) => Ok(m),
        Ok(other) => Err(format!(
            "expected a JSON object, found {}",
            json_kind(&other)
        )),
        Err(e) => Err(format!("invalid JSON: {e}")),
    }
}

/// `an array`, `a string`, ... for messages.
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The rejects file: one JSON object per line that was not passed on.
///
/// Each reject is `{"stage", "source", "line", "reasons": [...], "record": <the input
/// row>}`; a line that is not JSON is kept as text under `"raw"` instead of `"record"`.
/// `jq -c .record rejects.jsonl` gives back the rejected rows unchanged.
pub struct Rejects {
    stage: &'static str,
    out: Option<Output>,
}

impl Rejects {
    pub fn open(stage: &'static str, path: Option<&Path>) -> Result<Rejects> {
        let out = match path {
            Some(p) => Some(Output::create(Some(p))?),
            None => None,
        };
        Ok(Rejects { stage, out })
    }

    /// True when rejected lines are kept somewhere.
    pub fn is_kept(&self) -> bool {
        self.out.is_some()
    }

    /// Write one reject; `line` is the raw input line.
    pub fn write(
        &mut self,
        source: &str,
        lineno: u64,
        reasons: &[String],
        line: &[u8],
    ) -> Result<()> {
        let Some(out) = self.out.as_mut() else {
            return Ok(());
        };
        out.write_all(&reject_line(self.stage, source, lineno, reasons, line))?;
        Ok(())
    }

    /// Flush and move the rejects file into place.
    pub fn finish(self) -> Result<()> {
        if let Some(out) = self.out {
            out.commit()?;
        }
        Ok(())
    }
}

/// Build one reject line (with its trailing newline).
pub fn reject_line(
    stage: &str,
    source: &str,
    lineno: u64,
    reasons: &[String],
    line: &[u8],
) -> Vec<u8> {
    let mut v = Vec::with_capacity(line.len() + 128);
    v.extend_from_slice(b"{\"stage\":");
    serde_json::to_writer(&mut v, stage).expect("write to Vec");
    v.extend_from_slice(b",\"source\":");
    serde_json::to_writer(&mut v, source).expect("write to Vec");
    v.extend_from_slice(format!(",\"line\":{lineno},\"reasons\":").as_bytes());
    serde_json::to_writer(&mut v, reasons).expect("write to Vec");
    // Kept as JSON only when it is valid UTF-8 JSON: serde skips strings it ignores
    // without checking their UTF-8, and a rejects file must stay valid UTF-8.
    let is_json = !line.is_empty()
        && std::str::from_utf8(line).is_ok()
        && serde_json::from_slice::<serde::de::IgnoredAny>(line).is_ok();
    if is_json {
        v.extend_from_slice(b",\"record\":");
        v.extend_from_slice(line);
    } else {
        v.extend_from_slice(b",\"raw\":");
        serde_json::to_writer(&mut v, &String::from_utf8_lossy(line)).expect("write to Vec");
    }
    v.extend_from_slice(b"}\n");
    v
}

/// True for an existing path that is not a regular file (a device, FIFO or socket), which
/// cannot be replaced by a rename.
fn is_special_file(p: &Path) -> bool {
    std::fs::metadata(p)
        .map(|m| !m.is_file() && !m.is_dir())
        .unwrap_or(false)
}

/// Where output goes: stdout, or a file that appears only when the run succeeds.
pub struct Output {
    inner: OutputKind,
}

enum OutputKind {
    Stdout(BufWriter<io::Stdout>),
    Special(BufWriter<File>),
    File {
        w: BufWriter<tempfile::NamedTempFile>,
        path: PathBuf,
    },
}

impl Output {
    /// `None` or `-` is stdout; a path is written through a temp file beside it.
    pub fn create(path: Option<&Path>) -> Result<Output> {
        match path {
            None => Ok(Output::stdout()),
            Some(p) if p.as_os_str() == "-" => Ok(Output::stdout()),
            Some(p) if is_special_file(p) => {
                // /dev/stderr, a FIFO, a terminal: write straight to it.
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(p)
                    .with_context(|| format!("cannot open {}", p.display()))?;
                Ok(Output {
                    inner: OutputKind::Special(BufWriter::with_capacity(BUF_SIZE, f)),
                })
            }
            Some(p) => {
                let dir = match p.parent() {
                    Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                    _ => PathBuf::from("."),
                };
                let tmp = tempfile::Builder::new()
                    .prefix(".traj-")
                    .suffix(".tmp")
                    .tempfile_in(&dir)
                    .with_context(|| format!("cannot create a temp file in {}", dir.display()))?;
                Ok(Output {
                    inner: OutputKind::File {
                        w: BufWriter::with_capacity(BUF_SIZE, tmp),
                        path: p.to_path_buf(),
                    },
                })
            }
        }
    }

    pub fn stdout() -> Output {
        Output {
            inner: OutputKind::Stdout(BufWriter::with_capacity(BUF_SIZE, io::stdout())),
        }
    }

    /// Flush everything; for a file, fsync and rename it into place.
    pub fn commit(self) -> Result<()> {
        match self.inner {
            OutputKind::Stdout(mut w) => {
                w.flush()?;
                Ok(())
            }
            OutputKind::Special(mut w) => {
                w.flush()?;
                Ok(())
            }
            OutputKind::File { w, path } => {
                let tmp = w.into_inner().map_err(|e| e.into_error())?;
                tmp.as_file().sync_all()?;
                tmp.persist(&path)
                    .map_err(|e| e.error)
                    .with_context(|| format!("cannot rename output into {}", path.display()))?;
                Ok(())
            }
        }
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.inner {
            OutputKind::Stdout(w) => w.write(buf),
            OutputKind::Special(w) => w.write(buf),
            OutputKind::File { w, .. } => w.write(buf),
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match &mut self.inner {
            OutputKind::Stdout(w) => w.write_all(buf),
            OutputKind::Special(w) => w.write_all(buf),
            OutputKind::File { w, .. } => w.write_all(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match &mut self.inner {
            OutputKind::Stdout(w) => w.flush(),
            OutputKind::Special(w) => w.flush(),
            OutputKind::File { w, .. } => w.flush(),
        }
    }
}

/// What a stage made of one input line.
#[derive(Debug)]
pub enum Verdict {
    /// The bytes were appended to the output buffer (zero or more lines).
    Written,
    /// The line is not passed on, for these reasons, on purpose (a filter's drop, a
    /// merge's duplicate): goes to the rejects file, never counts as an error.
    Dropped(Vec<String>),
    /// The line is bad input: handled by the `--on-error` policy.
    Bad(String),
}

/// Counts of one run of [`process`].
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Non-blank lines read.
    pub read: u64,
    /// Lines that produced output.
    pub written: u64,
    /// Lines dropped on purpose, per reason (a line with two reasons counts in both).
    pub dropped: std::collections::BTreeMap<String, u64>,
    /// Lines dropped on purpose, once each.
    pub dropped_lines: u64,
    /// Bad lines skipped under `--on-error skip`.
    pub bad: u64,
    /// Bad or dropped lines that went to no rejects file.
    pub lost: u64,
    /// The first bad line, for the summary message.
    pub first_bad: Option<String>,
}

impl Summary {
    /// True when some line went neither to the output nor to a rejects file.
    pub fn lost_data(&self) -> bool {
        self.lost > 0
    }

    /// Account for a line that was not written: a drop is counted and goes to the
    /// rejects file (without one, it counts as lost when `drops_are_loss`); so does a
    /// bad line under `--on-error skip`. A bad line under `--on-error fail` is returned
    /// instead, for the caller to stop with once it has written every line before it.
    pub(crate) fn not_written(
        &mut self,
        (on_error, drops_are_loss): (OnError, bool),
        rejects: &mut Rejects,
        (source, lineno, line): (&Arc<str>, u64, &[u8]),
        verdict: &Verdict,
    ) -> Result<Option<LineError>> {
        match verdict {
            Verdict::Written => {}
            Verdict::Dropped(reasons) => {
                self.dropped_lines += 1;
                for r in reasons {
                    *self.dropped.entry(r.clone()).or_default() += 1;
                }
                if rejects.is_kept() {
                    rejects.write(source, lineno, reasons, line)?;
                } else if drops_are_loss {
                    self.lost += 1;
                }
            }
            Verdict::Bad(reason) => {
                let err = LineError {
                    source_name: source.clone(),
                    lineno,
                    reason: reason.clone(),
                };
                if on_error == OnError::Fail {
                    return Ok(Some(err));
                }
                self.bad += 1;
                if self.first_bad.is_none() {
                    self.first_bad = Some(err.to_string());
                }
                if rejects.is_kept() {
                    rejects.write(source, lineno, std::slice::from_ref(reason), line)?;
                } else {
                    self.lost += 1;
                }
            }
        }
        Ok(None)
    }
}

/// Settings of the ordered parallel pipeline.
#[derive(Debug, Clone)]
pub struct PipeConfig {
    pub stage: &'static str,
    pub on_error: OnError,
    /// Worker threads; 0 = all cores.
    pub jobs: usize,
    /// Lines dropped on purpose count as lost when there is no rejects file
    /// (a filter keeps its drops; a normalizer has none).
    pub drops_are_loss: bool,
    /// Process only these non-blank input lines (`--shard`, a sample).
    pub select: Option<Select>,
    /// Lines per batch handed to a worker; 0: up to 4096 lines or 1 MiB (CPU work).
    /// 1 for work that waits (LLM summaries): each row is its own job, so `jobs` rows
    /// wait at once.
    pub batch_lines: usize,
}

impl PipeConfig {
    /// What happens to lines not written: the `--on-error` policy, and whether a drop
    /// without a rejects file is lost (see `Summary::not_written`).
    pub fn policy(&self) -> (OnError, bool) {
        (self.on_error, self.drops_are_loss)
    }

    /// Worker threads: `jobs`, or one per core when it is 0.
    pub fn workers(&self) -> usize {
        match self.jobs {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
    }
}

/// Which non-blank input lines a run processes: line k (0-based, counted across all
/// inputs) is processed when `holds(k)`. The others are skipped as if absent; the lines
/// processed keep their own file and line number in messages and rejects.
#[derive(Clone)]
pub struct Select(Arc<dyn Fn(u64) -> bool + Send + Sync>);

impl Select {
    pub fn new(f: impl Fn(u64) -> bool + Send + Sync + 'static) -> Select {
        Select(Arc::new(f))
    }

    /// Whether the k-th non-blank line (0-based) is processed.
    pub fn holds(&self, k: u64) -> bool {
        (self.0)(k)
    }
}

impl From<Shard> for Select {
    fn from(sh: Shard) -> Select {
        Select::new(move |k| sh.holds(k))
    }
}

impl std::fmt::Debug for Select {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Select(..)")
    }
}

/// `--shard I/N`: line k (0-based, counting non-blank lines across all inputs) belongs
/// to shard `k % N`; shards are numbered from 0, so `0/4` .. `3/4` cover everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

impl Shard {
    /// True when the k-th non-blank line (0-based) is in this shard.
    pub fn holds(&self, k: u64) -> bool {
        k % self.count == self.index
    }
}

impl std::str::FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Shard, String> {
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?}: expected I/N, e.g. 0/4"))?;
        let index: u64 = i
            .trim()
            .parse()
            .map_err(|_| format!("{s:?}: I is not a number"))?;
        let count: u64 = n
            .trim()
            .parse()
            .map_err(|_| format!("{s:?}: N is not a number"))?;
        if count == 0 || index >= count {
            return Err(format!(
                "{s:?}: need 0 <= I < N (shards are numbered from 0)"
            ));
        }
        Ok(Shard { index, count })
    }
}

const BATCH_BYTES: usize = 1 << 20;
const BATCH_LINES: usize = 4096;

struct Batch {
    seq: u64,
    source: Arc<str>,
    first_lineno: Vec<u64>,
    data: Vec<u8>,
    /// end offset of each line in `data`.
    ends: Vec<usize>,
}

struct Done {
    out: Vec<u8>,
    /// per line: index, verdict (only non-`Written` verdicts are kept).
    verdicts: Vec<(usize, Verdict)>,
    /// end offset in `out` of each line's output.
    out_ends: Vec<usize>,
    written: u64,
    batch: Batch,
}

/// Run `f` over every non-blank line of `sources`, in parallel, writing the output in
/// input order to `out`, and dropped or bad lines to `rejects`.
///
/// `f` appends its output (whole lines, each ending in `\n`) to the buffer it is given.
/// Memory stays bounded: the reader stops `4 x jobs + 4` batches ahead of the writer,
/// however long one batch takes (a few 1 MiB batches per worker).
pub fn process<F>(
    cfg: &PipeConfig,
    sources: Vec<Source>,
    out: &mut dyn Write,
    rejects: &mut Rejects,
    f: F,
) -> Result<Summary>
where
    F: Fn(&[u8], &mut Vec<u8>) -> Verdict + Sync,
{
    let jobs = cfg.workers();
    let (work_tx, work_rx) = crossbeam_channel::bounded::<Batch>(jobs * 2);
    let (done_tx, done_rx) = crossbeam_channel::bounded::<std::thread::Result<Done>>(jobs * 2);
    let (recycle_tx, recycle_rx) = crossbeam_channel::bounded::<Vec<u8>>(jobs * 4 + 4);
    // One slot per batch between reader and writer: the reader fills it, the writer
    // empties it once the batch is written.
    let (slot_tx, slot_rx) = crossbeam_channel::bounded::<()>(jobs * 4 + 4);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut summary = Summary::default();
    let mut panicked = None;
    let reading = Reading {
        select: cfg.select.clone(),
        batch_lines: if cfg.batch_lines == 0 {
            BATCH_LINES
        } else {
            cfg.batch_lines
        },
        work_tx,
        slot_tx,
        recycle_rx,
    };

    std::thread::scope(|s| -> Result<()> {
        let stop_ref = &stop;
        let reader = s.spawn(move || read_batches(sources, reading, stop_ref));
        for _ in 0..jobs {
            let work_rx = work_rx.clone();
            let done_tx = done_tx.clone();
            let f = &f;
            s.spawn(move || {
                for batch in work_rx.iter() {
                    if stop_ref.load(std::sync::atomic::Ordering::Relaxed) {
                        continue; // the writer has failed: drain without working
                    }
                    // A panic in `f` (a bug) goes to the writer, which stops the
                    // pipeline; the panic is raised again once every thread is done.
                    let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        work_batch(batch, f)
                    }));
                    if done_tx.send(done).is_err() {
                        return;
                    }
                }
            });
        }
        drop(work_rx);
        drop(done_tx);

        let writing = Writing {
            done_rx: &done_rx,
            slot_rx: &slot_rx,
            recycle_tx: &recycle_tx,
            panicked: &mut panicked,
        };
        let result = write_in_order(cfg, writing, out, rejects, &mut summary);
        if result.is_err() {
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        drop(slot_rx);
        drop(done_rx);
        let read_result = reader.join().expect("reader thread panicked");
        if let Some(payload) = panicked.take() {
            std::panic::resume_unwind(payload);
        }
        result?;
        read_result
    })?;
    Ok(summary)
}

/// Run `f` over the lines of a batch.
fn work_batch<F>(batch: Batch, f: &F) -> Done
where
    F: Fn(&[u8], &mut Vec<u8>) -> Verdict,
{
    let mut out = Vec::with_capacity(batch.data.len() + batch.data.len() / 4);
    let mut verdicts = Vec::new();
    let mut written = 0;
    let mut out_ends = Vec::with_capacity(batch.ends.len());
    let mut start = 0;
    for (i, &end) in batch.ends.iter().enumerate() {
        let line = &batch.data[start..end];
        start = end;
        match f(line, &mut out) {
            Verdict::Written => written += 1,
            v => verdicts.push((i, v)),
        }
        out_ends.push(out.len());
    }
    Done {
        out,
        verdicts,
        out_ends,
        written,
        batch,
    }
}

/// The reader thread's ends of the pipeline.
struct Reading {
    select: Option<Select>,
    batch_lines: usize,
    work_tx: crossbeam_channel::Sender<Batch>,
    slot_tx: crossbeam_channel::Sender<()>,
    recycle_rx: crossbeam_channel::Receiver<Vec<u8>>,
}

fn read_batches(
    sources: Vec<Source>,
    rd: Reading,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<()> {
    let Reading {
        select,
        batch_lines,
        work_tx,
        slot_tx,
        recycle_rx,
    } = rd;
    let mut seq = 0;
    let mut nonblank = 0u64;
    for src in sources {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(());
        }
        let name: Arc<str> = Arc::from(src.name());
        let mut r = open_source(&src)?;
        let mut lineno = 0u64;
        let mut line = Vec::new();
        loop {
            let mut data = recycle_rx.try_recv().unwrap_or_default();
            data.clear();
            let mut ends = Vec::new();
            let mut first_lineno = Vec::new();
            let mut eof = false;
            while data.len() < BATCH_BYTES && ends.len() < batch_lines {
                line.clear();
                let n = r
                    .read_until(b'\n', &mut line)
                    .with_context(|| format!("{name}: read error after line {lineno}"))?;
                if n == 0 {
                    eof = true;
                    break;
                }
                lineno += 1;
                let mut l: &[u8] = &line;
                if l.last() == Some(&b'\n') {
                    l = &l[..l.len() - 1];
                }
                if l.last() == Some(&b'\r') {
                    l = &l[..l.len() - 1];
                }
                if lineno == 1 && l.starts_with(b"\xEF\xBB\xBF") {
                    l = &l[3..];
                }
                if is_blank(l) {
                    continue;
                }
                nonblank += 1;
                if select.as_ref().is_some_and(|s| !s.holds(nonblank - 1)) {
                    continue;
                }
                data.extend_from_slice(l);
                ends.push(data.len());
                first_lineno.push(lineno);
            }
            if !ends.is_empty() {
                let b = Batch {
                    seq,
                    source: name.clone(),
                    first_lineno,
                    data,
                    ends,
                };
                seq += 1;
                if stop.load(std::sync::atomic::Ordering::Relaxed)
                    || slot_tx.send(()).is_err()
                    || work_tx.send(b).is_err()
                {
                    return Ok(());
                }
            }
            if eof {
                break;
            }
        }
    }
    Ok(())
}

/// A worker's panic, kept to be raised again once the pipeline has stopped.
pub(crate) type Panic = Box<dyn std::any::Any + Send>;

/// Receive the workers' results and hand them to `f` in sequence order (`seq` numbers
/// them from 0). A worker's panic stops it: kept in `panicked`, returned as an error.
pub(crate) fn in_order<T>(
    rx: &crossbeam_channel::Receiver<std::thread::Result<T>>,
    seq: impl Fn(&T) -> u64,
    panicked: &mut Option<Panic>,
    mut f: impl FnMut(T) -> Result<()>,
) -> Result<()> {
    let mut pending = std::collections::BTreeMap::new();
    let mut next = 0u64;
    for done in rx.iter() {
        let done = match done {
            Ok(d) => d,
            Err(payload) => {
                *panicked = Some(payload);
                anyhow::bail!("a worker thread panicked");
            }
        };
        pending.insert(seq(&done), done);
        while let Some(d) = pending.remove(&next) {
            next += 1;
            f(d)?;
        }
    }
    Ok(())
}

/// The writer's ends of the pipeline.
struct Writing<'a> {
    done_rx: &'a crossbeam_channel::Receiver<std::thread::Result<Done>>,
    slot_rx: &'a crossbeam_channel::Receiver<()>,
    recycle_tx: &'a crossbeam_channel::Sender<Vec<u8>>,
    /// A worker's panic, raised again once the pipeline has stopped.
    panicked: &'a mut Option<Panic>,
}

fn write_in_order(
    cfg: &PipeConfig,
    w: Writing<'_>,
    out: &mut dyn Write,
    rejects: &mut Rejects,
    summary: &mut Summary,
) -> Result<()> {
    in_order(
        w.done_rx,
        |d: &Done| d.batch.seq,
        w.panicked,
        |d| {
            let Done {
                out: bytes,
                verdicts,
                out_ends,
                written,
                batch,
            } = d;
            summary.read += batch.ends.len() as u64;
            for (i, v) in verdicts {
                let start = if i == 0 { 0 } else { batch.ends[i - 1] };
                let line = &batch.data[start..batch.ends[i]];
                let at = (&batch.source, batch.first_lineno[i], line);
                if let Some(err) = summary.not_written(cfg.policy(), rejects, at, &v)? {
                    // Everything before the bad line is written; nothing after.
                    let before = if i == 0 { 0 } else { out_ends[i - 1] };
                    out.write_all(&bytes[..before])?;
                    return Err(err.into());
                }
            }
            summary.written += written;
            out.write_all(&bytes)?;
            let _ = w.slot_rx.try_recv();
            let _ = w.recycle_tx.try_send(batch.data);
            Ok(())
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_tmp(dir: &Path, name: &str, data: &[u8]) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, data).unwrap();
        p
    }

    #[test]
    fn natural_order() {
        let mut v = vec![
            "batch_10.jsonl",
            "batch_2.jsonl",
            "batch_1.jsonl",
            "batch_02b",
        ];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            v,
            [
                "batch_1.jsonl",
                "batch_2.jsonl",
                "batch_02b",
                "batch_10.jsonl"
            ]
        );
    }

    #[test]
    fn line_reader_handles_bom_crlf_and_missing_newline() {
        let d = tempfile::tempdir().unwrap();
        let p = write_tmp(d.path(), "a.jsonl", b"\xEF\xBB\xBF{\"a\":1}\r\n\n{\"b\":2}");
        let lines: Vec<Line> = LineReader::new(vec![Source::File(p)])
            .map(Result::unwrap)
            .collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0].bytes, b"{\"a\":1}");
        assert_eq!(lines[1].bytes, b"");
        assert_eq!(
            (lines[2].lineno, lines[2].bytes.as_slice()),
            (3, &b"{\"b\":2}"[..])
        );
    }

    #[test]
    fn gzip_is_read_transparently() {
        let d = tempfile::tempdir().unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(b"{\"a\":1}\n{\"a\":2}\n").unwrap();
        let p = write_tmp(d.path(), "a.jsonl.gz", &gz.finish().unwrap());
        let n = LineReader::new(vec![Source::File(p)]).count();
        assert_eq!(n, 2);
    }

    fn cfg(on_error: OnError) -> PipeConfig {
        PipeConfig {
            stage: "test",
            on_error,
            jobs: 3,
            drops_are_loss: true,
            select: None,
            batch_lines: 0,
        }
    }

    /// Each row its own batch, `jobs` workers, `fail` on bad lines.
    fn one_line_batches(jobs: usize) -> PipeConfig {
        PipeConfig {
            jobs,
            batch_lines: 1,
            ..cfg(OnError::Fail)
        }
    }

    /// Run `process` over one file without a rejects file; its output and summary.
    fn run_file<F>(c: &PipeConfig, p: &Path, f: F) -> Result<(Vec<u8>, Summary)>
    where
        F: Fn(&[u8], &mut Vec<u8>) -> Verdict + Sync,
    {
        let mut out = Vec::new();
        let mut rej = Rejects::open("test", None)?;
        let s = process(
            c,
            vec![Source::File(p.to_path_buf())],
            &mut out,
            &mut rej,
            f,
        )?;
        Ok((out, s))
    }

    fn echo_or_bad(line: &[u8], out: &mut Vec<u8>) -> Verdict {
        match parse_object(line) {
            Ok(_) => {
                out.extend_from_slice(line);
                out.push(b'\n');
                Verdict::Written
            }
            Err(e) => Verdict::Bad(e),
        }
    }

    #[test]
    fn process_keeps_order_across_batches() {
        let d = tempfile::tempdir().unwrap();
        let mut data = Vec::new();
        for i in 0..20_000 {
            writeln!(data, "{{\"i\":{i},\"pad\":\"{}\"}}", "x".repeat(i % 200)).unwrap();
        }
        let p = write_tmp(d.path(), "big.jsonl", &data);
        let mut out = Vec::new();
        let mut rej = Rejects::open("test", None).unwrap();
        let s = process(
            &cfg(OnError::Fail),
            vec![Source::File(p)],
            &mut out,
            &mut rej,
            echo_or_bad,
        )
        .unwrap();
        assert_eq!(out, data);
        assert_eq!((s.read, s.written, s.lost), (20_000, 20_000, 0));
    }

    /// One-line batches run `jobs` rows at once (LLM summaries wait in parallel), and a
    /// row that never finishes holds the reader at most `4 x jobs + 4` batches ahead.
    #[test]
    fn one_line_batches_run_together_and_the_window_holds() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::time::{Duration, Instant};
        let d = tempfile::tempdir().unwrap();
        let data: String = (0..200).map(|i| format!("{{\"i\":{i}}}\n")).collect();
        let p = write_tmp(d.path(), "rows.jsonl", data.as_bytes());
        let wait_for = |counter: &AtomicUsize, n: usize| {
            let t = Instant::now();
            while counter.load(Ordering::SeqCst) < n && t.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(1));
            }
            counter.load(Ordering::SeqCst)
        };

        // 4 workers: the first 4 rows are in `f` together.
        let inside = AtomicUsize::new(0);
        let (out, _) = run_file(&one_line_batches(4), &p, |line, buf| {
            if inside.fetch_add(1, Ordering::SeqCst) < 4 {
                assert!(wait_for(&inside, 4) >= 4, "rows did not run together");
            }
            echo_or_bad(line, buf)
        })
        .unwrap();
        assert_eq!(out, data.as_bytes());

        // 2 workers: while row 0 waits, only the 11 rows behind it in the window run.
        let others = AtomicUsize::new(0);
        let seen = AtomicUsize::new(0);
        let (out, _) = run_file(&one_line_batches(2), &p, |line, buf| {
            if line == b"{\"i\":0}" {
                wait_for(&others, 11);
                std::thread::sleep(Duration::from_millis(100));
                seen.store(others.load(Ordering::SeqCst), Ordering::SeqCst);
            } else {
                others.fetch_add(1, Ordering::SeqCst);
            }
            echo_or_bad(line, buf)
        })
        .unwrap();
        assert_eq!(seen.load(Ordering::SeqCst), 11);
        assert_eq!(out, data.as_bytes());
    }

    /// A panic in the stage's function (a bug) stops the pipeline and is raised again;
    /// it never hangs on a full window.
    #[test]
    fn a_panicking_worker_stops_the_pipeline() {
        let d = tempfile::tempdir().unwrap();
        let data: String = (0..500).map(|i| format!("{{\"i\":{i}}}\n")).collect();
        let p = write_tmp(d.path(), "rows.jsonl", data.as_bytes());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let c = one_line_batches(2);
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut rej = Rejects::open("test", None).unwrap();
                process(
                    &c,
                    vec![Source::File(p)],
                    &mut Vec::new(),
                    &mut rej,
                    |line, buf| {
                        assert_ne!(line, b"{\"i\":3}", "boom");
                        echo_or_bad(line, buf)
                    },
                )
            }));
            tx.send(r.is_err()).unwrap();
        });
        let panicked = rx.recv_timeout(std::time::Duration::from_secs(60));
        assert_eq!(
            panicked,
            Ok(true),
            "the pipeline hung or swallowed the panic"
        );
    }

    #[test]
    fn shards_partition_the_input() {
        let d = tempfile::tempdir().unwrap();
        let p = write_tmp(
            d.path(),
            "x.jsonl",
            b"{\"a\":0}\n\n{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n{\"a\":4}\n",
        );
        let mut all = Vec::new();
        for i in 0..2 {
            let mut c = cfg(OnError::Fail);
            c.select = Some(format!("{i}/2").parse::<Shard>().unwrap().into());
            let (out, _) = run_file(&c, &p, echo_or_bad).unwrap();
            all.push(String::from_utf8(out).unwrap());
        }
        assert_eq!(all[0], "{\"a\":0}\n{\"a\":2}\n{\"a\":4}\n");
        assert_eq!(all[1], "{\"a\":1}\n{\"a\":3}\n");
        assert!("2/2".parse::<Shard>().is_err());
        assert!("1-2".parse::<Shard>().is_err());
    }

    #[test]
    fn strict_stops_at_first_bad_line_with_location() {
        let d = tempfile::tempdir().unwrap();
        let p = write_tmp(d.path(), "x.jsonl", b"{\"a\":1}\n\n[1]\n{\"a\":2}\n");
        let mut out = Vec::new();
        let mut rej = Rejects::open("test", None).unwrap();
        let e = process(
            &cfg(OnError::Fail),
            vec![Source::File(p.clone())],
            &mut out,
            &mut rej,
            echo_or_bad,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{}:3: expected a JSON object, found an array", p.display())
        );
        assert_eq!(out, b"{\"a\":1}\n");
    }

    #[test]
    fn skip_counts_and_rejects_keep_lines() {
        let d = tempfile::tempdir().unwrap();
        let p = write_tmp(d.path(), "x.jsonl", b"{\"a\":1}\nnot json\n42\n{\"a\":2}\n");
        let rp = d.path().join("rejects.jsonl");
        let mut out = Vec::new();
        let mut rej = Rejects::open("test", Some(&rp)).unwrap();
        let s = process(
            &cfg(OnError::Skip),
            vec![Source::File(p)],
            &mut out,
            &mut rej,
            echo_or_bad,
        )
        .unwrap();
        rej.finish().unwrap();
        assert_eq!(out, b"{\"a\":1}\n{\"a\":2}\n");
        assert_eq!((s.bad, s.lost), (2, 0));
        let rejects = std::fs::read_to_string(rp).unwrap();
        let rows: Vec<Value> = rejects
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(rows[0]["raw"], "not json");
        assert_eq!(rows[0]["line"], 2);
        assert_eq!(rows[1]["record"], 42);
    }

    #[test]
    fn reject_of_invalid_utf8_stays_utf8() {
        let line = b"{\"a\":\"\xff\"}";
        let r = reject_line("test", "x", 1, &["bad".to_string()], line);
        let v: Value = serde_json::from_slice(&r).expect("valid UTF-8 JSON");
        assert_eq!(v["raw"], "{\"a\":\"\u{fffd}\"}");
    }

    #[test]
    fn skip_without_rejects_is_loss() {
        let d = tempfile::tempdir().unwrap();
        let p = write_tmp(d.path(), "x.jsonl", b"{\"a\":1}\nnope\n");
        let mut out = Vec::new();
        let mut rej = Rejects::open("test", None).unwrap();
        let s = process(
            &cfg(OnError::Skip),
            vec![Source::File(p)],
            &mut out,
            &mut rej,
            echo_or_bad,
        )
        .unwrap();
        assert!(s.lost_data());
    }

    #[test]
    fn output_file_appears_only_on_commit() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.jsonl");
        let mut o = Output::create(Some(&p)).unwrap();
        o.write_all(b"x\n").unwrap();
        assert!(!p.exists());
        o.commit().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"x\n");
        let mut o = Output::create(Some(&p)).unwrap();
        o.write_all(b"y\n").unwrap();
        drop(o);
        assert_eq!(std::fs::read(&p).unwrap(), b"x\n");
        assert_eq!(
            std::fs::read_dir(d.path()).unwrap().count(),
            1,
            "no temp file left"
        );
    }
}

//! Where lines come from: files (plain, gzip or zstd, detected by magic bytes), standard
//! input, and directories expanded, recursively, to their data files (or the files a
//! `--glob` pattern names) in natural order.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use std::sync::Arc;

use anyhow::{Context, Result};

use crate::error::{FileError, UsageError};

/// Size of read and write buffers.
pub const BUF_SIZE: usize = 256 * 1024;

/// Where lines come from: a file path or standard input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Stdin,
    File(PathBuf),
    /// A source that can be read only once (stdin, a FIFO) copied to `path` to be read
    /// more than once ([`spool_stdin`]); named in messages and rejects by `name`, as
    /// the source was (`<stdin>`, `/dev/fd/63`).
    Spooled {
        path: PathBuf,
        name: String,
    },
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
            Source::Spooled { name, .. } => name.clone(),
            Source::File(p) => p.display().to_string(),
        }
    }
}

/// `src` as a source that can be read more than once: stdin, or a path that is not a
/// regular file (a FIFO such as `<(cmd)`, `/dev/stdin`), is copied to a file in `dir`
/// (read once, to its end) and named as it was ([`Source::Spooled`]); a regular file
/// stays as it is.
pub fn spool_stdin(src: Source, dir: &Path) -> Result<Source> {
    let once = match &src {
        Source::Stdin => true,
        Source::File(p) => std::fs::metadata(p).is_ok_and(|m| !m.is_file()),
        Source::Spooled { .. } => false,
    };
    if !once {
        return Ok(src);
    }
    let (mut f, p) = tempfile::Builder::new()
        .prefix("spool-")
        .tempfile_in(dir)
        .and_then(|t| t.keep().map_err(|e| e.error))
        .with_context(|| format!("cannot create a spool file in {}", dir.display()))?;
    let name = src.name();
    io::copy(&mut open_source(&src)?, &mut f).with_context(|| format!("{name}: read error"))?;
    Ok(Source::Spooled { path: p, name })
}

/// Turn command-line input arguments into sources; none means stdin.
///
/// A directory expands to its data files ([`data_files_in`]) in natural order
/// (`batch_2` before `batch_10`).
pub fn sources_from_args(args: &[String]) -> Result<Vec<Source>> {
    sources_matching(args, "", None)
}

/// [`sources_from_args`], where a directory gives only its files whose names start with
/// `prefix` (`batch_` for the batch files of a run directory).
pub fn sources_with_prefix(args: &[String], prefix: &str) -> Result<Vec<Source>> {
    sources_matching(args, prefix, None)
}

/// [`sources_with_prefix`], where a directory gives the files `glob` matches (`--glob`)
/// instead of the files with a data ending and the prefix. A file named on the command line is read
/// whatever its name.
pub fn sources_matching(args: &[String], prefix: &str, glob: Option<&Glob>) -> Result<Vec<Source>> {
    collect_sources(args, prefix, glob, None)
}

/// The files of directory inputs that [`row_sources`] passed over, for the caller to name.
#[derive(Debug, Default)]
pub struct PassedOver {
    /// The JSON documents of the stages and of `datasets` ([`is_stage_document`]).
    pub documents: Vec<PathBuf>,
    /// Data files of a traj-run directory that are not its rows (`failures.jsonl`, what
    /// a pipeline left beside them: `trajectories.jsonl`, a compressed copy).
    pub beside_run: Vec<PathBuf>,
}

/// Whether `d` is a traj-run directory (or the reference's): it holds `statistics.json`
/// or `checkpoint.json`.
pub fn is_run_dir(d: &Path) -> bool {
    d.join("statistics.json").is_file() || d.join("checkpoint.json").is_file()
}

/// Whether data file `f` ([`data_files_in`]) is one of the row files of run directory
/// `d`: a `batch_N` file in it, plain, compressed or Parquet, as traj-merge reads them.
pub fn is_batch_file(d: &Path, f: &Path) -> bool {
    f.parent() == Some(d)
        && f.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("batch_"))
}

/// [`sources_matching`] with no prefix, for the stages that read rows. Without `--glob`,
/// a directory's [stage documents](is_stage_document) are no rows and are passed over,
/// and a [traj-run directory](is_run_dir) gives its rows, `batch_N.jsonl` in natural
/// order, as traj-merge reads it: its other files are passed over too. A file named on
/// the command line is read whatever its name.
pub fn row_sources(args: &[String], glob: Option<&Glob>) -> Result<(Vec<Source>, PassedOver)> {
    let mut passed = PassedOver::default();
    let sources = collect_sources(args, "", glob, Some(&mut passed))?;
    Ok((sources, passed))
}

/// [`sources_matching`]; with `passed`, as [`row_sources`] (only without `glob`: a
/// pattern chooses the files itself).
fn collect_sources(
    args: &[String],
    prefix: &str,
    glob: Option<&Glob>,
    mut passed: Option<&mut PassedOver>,
) -> Result<Vec<Source>> {
    if args.is_empty() {
        return Ok(vec![Source::Stdin]);
    }
    // stdin can be read once: a second `-` would read nothing and say nothing.
    if args
        .iter()
        .filter(|a| matches!(Source::parse(a), Source::Stdin))
        .count()
        > 1
    {
        return Err(UsageError(
            "stdin (-) is named twice among the inputs: it can be read once".into(),
        )
        .into());
    }
    let mut out = Vec::new();
    for a in args {
        let src = Source::parse(a);
        match &src {
            Source::File(p) if p.is_dir() => {
                let before = out.len();
                let run = glob.is_none() && passed.is_some() && is_run_dir(p);
                for f in data_files_in(p, glob)? {
                    let named = glob.is_some() // the pattern replaces the prefix too
                        || f.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with(prefix));
                    if !named {
                        continue;
                    }
                    match passed.as_deref_mut() {
                        // A run directory's own documents (its checkpoint) go unsaid.
                        Some(passed) if run && !is_batch_file(p, &f) => {
                            if !is_stage_document(&f) {
                                passed.beside_run.push(f);
                            }
                        }
                        Some(passed) if glob.is_none() && is_stage_document(&f) => {
                            passed.documents.push(f)
                        }
                        _ => out.push(Source::File(f)),
                    }
                }
                if out.len() == before {
                    let prefix = if run { "batch_" } else { prefix };
                    return Err(no_data_files(p, prefix, glob).into());
                }
            }
            _ => out.push(src),
        }
    }
    Ok(out)
}

/// True for the JSON documents the stages write beside their rows (`statistics.json`,
/// `checkpoint.json`, `*metrics.json`, `*stats.json`) and those of HF `datasets` beside
/// a dataset's files (`dataset_info.json`, `dataset_infos.json` of a Hub snapshot,
/// `dataset_dict.json` and `state.json` of `save_to_disk`), taken by their names: no
/// rows. A directory's readers that pass over them name each (traj-report,
/// traj-compress `--input DIR`).
pub fn is_stage_document(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    matches!(
        name,
        "statistics.json"
            | "checkpoint.json"
            | "dataset_info.json"
            | "dataset_infos.json"
            | "dataset_dict.json"
            | "state.json"
    ) || name.ends_with("metrics.json")
        || name.ends_with("stats.json")
}

/// What every reader says of a directory input that holds nothing to read (a usage
/// error: exit 2, as for a file that cannot be opened).
pub fn no_data_files(dir: &Path, prefix: &str, glob: Option<&Glob>) -> UsageError {
    let what = match glob {
        Some(g) => format!("files matching --glob '{g}'"),
        None => format!(
            "{prefix}*.jsonl or {prefix}*.json files (plain, .gz or .zst) \
             or {prefix}*.parquet files"
        ),
    };
    UsageError(format!(
        "{}: directory holds no {what}, searched recursively",
        dir.display()
    ))
}

/// A `--glob` pattern: which files of a directory input are read.
///
/// Matched against a file's path relative to the directory given (`/` between the
/// parts), or, for a pattern without `/`, against its file name alone. `*` matches any
/// run of characters but `/`, `**` any run including `/` (`**/` also none), `?` one
/// character but `/`, `[abc]`, `[a-z]` and `[!abc]` one character of (or not of) a set;
/// `\` makes the next character literal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob(String);

impl std::str::FromStr for Glob {
    type Err = crate::error::UsageError;
    fn from_str(s: &str) -> std::result::Result<Glob, Self::Err> {
        let bad = crate::error::UsageError;
        if s.is_empty() {
            return Err(bad("an empty pattern matches nothing".into()));
        }
        // Unclosed sets are the one malformed pattern: refuse them rather than guess.
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'\\' => i += 2,
                b'[' => match set_end(b, i) {
                    Some(e) => i = e,
                    None => return Err(bad(format!("unclosed `[` at byte {i}"))),
                },
                _ => i += 1,
            }
        }
        Ok(Glob(s.to_owned()))
    }
}

impl std::fmt::Display for Glob {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Glob {
    /// Whether the file at `rel` (relative to the directory input, `/`-separated)
    /// is chosen.
    pub fn matches(&self, rel: &str) -> bool {
        let p = self.0.as_bytes();
        if p.contains(&b'/') {
            glob_match(p, rel.as_bytes())
        } else {
            glob_match(p, rel.rsplit('/').next().unwrap_or(rel).as_bytes())
        }
    }
}

/// The offset just after the `]` closing the set that opens at `p[i]`.
fn set_end(p: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    if p.get(j) == Some(&b'!') {
        j += 1;
    }
    if p.get(j) == Some(&b']') {
        j += 1; // `[]]`: a literal `]` first
    }
    while j < p.len() {
        if p[j] == b']' {
            return Some(j + 1);
        }
        j += 1;
    }
    None
}

/// Whether byte `c` is in the set `p` (from its `[` to its `]`).
fn set_holds(p: &[u8], c: u8) -> bool {
    let (neg, body) = match p[1..p.len() - 1].split_first() {
        Some((b'!', rest)) => (true, rest),
        _ => (false, &p[1..p.len() - 1]),
    };
    let mut k = 0;
    let mut hit = false;
    while k < body.len() {
        if k + 2 < body.len() && body[k + 1] == b'-' {
            hit |= body[k] <= c && c <= body[k + 2];
            k += 3;
        } else {
            hit |= body[k] == c;
            k += 1;
        }
    }
    hit != neg && c != b'/'
}

/// Glob matching by backtracking over the last `*` and the last `**` seen (linear for
/// the patterns people write).
fn glob_match(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    // where to resume after a `*` (cannot cross `/`) and after a `**` (can)
    let mut star: Option<(usize, usize)> = None;
    let mut deep: Option<(usize, usize)> = None;
    loop {
        if pi < p.len() {
            match p[pi] {
                b'*' if p.get(pi + 1) == Some(&b'*') => {
                    let mut next = pi + 2;
                    // `**/` may match no directory at all
                    if p.get(next) == Some(&b'/') {
                        next += 1;
                    }
                    deep = Some((next, si));
                    star = None;
                    pi = next;
                    continue;
                }
                b'*' => {
                    star = Some((pi + 1, si));
                    pi += 1;
                    continue;
                }
                b'?' if si < s.len() && s[si] != b'/' => {
                    pi += 1;
                    si += 1;
                    continue;
                }
                b'[' if si < s.len() => {
                    let e = set_end(p, pi).unwrap_or(p.len());
                    if set_holds(&p[pi..e], s[si]) {
                        pi = e;
                        si += 1;
                        continue;
                    }
                }
                b'\\' if pi + 1 < p.len() && si < s.len() && p[pi + 1] == s[si] => {
                    pi += 2;
                    si += 1;
                    continue;
                }
                c if c != b'\\' && c != b'?' && c != b'[' && si < s.len() && c == s[si] => {
                    pi += 1;
                    si += 1;
                    continue;
                }
                _ => {}
            }
        } else if si == s.len() {
            return true;
        }
        // mismatch: let the last `*` take one more character (not a `/`), else the last `**`
        if let Some((sp, ss)) = star
            && ss < s.len()
            && s[ss] != b'/'
        {
            star = Some((sp, ss + 1));
            pi = sp;
            si = ss + 1;
            continue;
        }
        if let Some((dp, ds)) = deep
            && ds < s.len()
        {
            deep = Some((dp, ds + 1));
            star = None;
            pi = dp;
            si = ds + 1;
            continue;
        }
        return false;
    }
}

/// The endings of the files a directory gives: Parquet, JSONL and JSON-array files,
/// plain or compressed.
pub const DATA_ENDINGS: [&str; 7] = [
    ".parquet",
    ".jsonl",
    ".jsonl.gz",
    ".jsonl.zst",
    ".json",
    ".json.gz",
    ".json.zst",
];

/// The data files below `dir` ([`DATA_ENDINGS`]), searched recursively and following
/// symbolic links (a HuggingFace cache snapshot links its files to `blobs/`), hidden
/// files and folders left out, in natural order of their paths.
pub fn jsonl_files_in(dir: &Path) -> Result<Vec<PathBuf>> {
    data_files_in(dir, None)
}

/// [`jsonl_files_in`], or with a pattern the files below `dir` that it matches
/// ([`Glob::matches`], whatever their ending).
pub fn data_files_in(dir: &Path, glob: Option<&Glob>) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        // A link back up the tree is walked once.
        if let Ok(real) = std::fs::canonicalize(&d)
            && !seen.insert(real)
        {
            continue;
        }
        for entry in std::fs::read_dir(&d).with_context(|| format!("{}", d.display()))? {
            let path = entry?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.starts_with('.') {
                continue;
            }
            if path.is_dir() {
                todo.push(path);
            } else if path.is_file() {
                let chosen = match glob {
                    None => DATA_ENDINGS.iter().any(|e| name.ends_with(e)),
                    Some(g) => path.strip_prefix(dir).is_ok_and(|rel| {
                        let rel: Vec<_> = rel.iter().map(|c| c.to_string_lossy()).collect();
                        g.matches(&rel.join("/"))
                    }),
                };
                if chosen {
                    files.push(path);
                }
            }
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

/// True for a `.json` file (plain, `.gz` or `.zst`): a JSON array of rows, or JSONL.
fn is_json_array_name(src: &Source) -> bool {
    match src {
        Source::Stdin | Source::Spooled { .. } => false,
        Source::File(p) => {
            let n = p.to_string_lossy();
            [".json", ".json.gz", ".json.zst"]
                .iter()
                .any(|e| n.ends_with(e))
        }
    }
}

/// The file behind `src` when its bytes are the lines themselves (not gzip, zstd or
/// Parquet by their magic bytes, not a `.json` file that may hold an array), opened
/// again: a pipeline that has validated some of its bytes can splice them from this
/// handle straight into a pipe ([`super::passthru`]). `None` for stdin and any other file.
pub fn raw_file(src: &Source) -> Option<File> {
    let Source::File(p) = src else { return None };
    if is_json_array_name(src) {
        return None;
    }
    let f = File::open(p).ok()?;
    if !f.metadata().ok()?.is_file() {
        return None; // a FIFO or a device: its bytes can be read once only
    }
    let mut head = [0u8; 4];
    let n = std::os::unix::fs::FileExt::read_at(&f, &mut head, 0).ok()?;
    (!is_encoded(&head[..n])).then_some(f)
}

/// Whether a file that starts with `head` is gzip, zstd or Parquet (what
/// [`open_source`] decodes).
fn is_encoded(head: &[u8]) -> bool {
    super::parquet::is_parquet(head)
        || head.starts_with(&[0x1f, 0x8b])
        || head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd])
}

/// The file of `src` opened (`None` for stdin); one that cannot be opened is a
/// [`FileError`] naming it as given (exit 2).
pub fn open_file(src: &Source) -> Result<Option<File>, FileError> {
    match src {
        Source::Stdin => Ok(None),
        Source::File(p) | Source::Spooled { path: p, .. } => {
            File::open(p).map(Some).map_err(|e| FileError {
                what: "cannot open",
                path: Arc::from(src.name()),
                source: e,
            })
        }
    }
}

/// Open a source for reading; gzip and zstd are detected by their magic bytes, whatever
/// the name. A `.json` file that holds a JSON array reads as one line per element; a
/// Parquet file (by its magic bytes) as one line per row.
pub fn open_source(src: &Source) -> Result<Box<dyn BufRead + Send>> {
    let raw: Box<dyn Read + Send> = match open_file(src)? {
        None => Box::new(io::stdin()),
        Some(f) => Box::new(f),
    };
    let mut buf = BufReader::with_capacity(BUF_SIZE, raw);
    let head = buf.fill_buf().map_err(|e| FileError {
        what: "cannot read",
        path: Arc::from(src.name()),
        source: e,
    })?;
    if super::parquet::is_parquet(head) {
        let f = match open_file(src)? {
            Some(f) => f,
            None => super::parquet::spool(buf, &src.name())?,
        };
        return super::parquet::lines_of_parquet(f, src.name());
    }
    let mut decoded: Box<dyn BufRead + Send> = if head.starts_with(&[0x1f, 0x8b]) {
        let gz = flate2::bufread::MultiGzDecoder::new(buf);
        Box::new(BufReader::with_capacity(BUF_SIZE, gz))
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        let zst = zstd::stream::read::Decoder::with_buffer(buf)
            .with_context(|| format!("{}: cannot start the zstd decoder", src.name()))?;
        Box::new(BufReader::with_capacity(BUF_SIZE, zst))
    } else {
        return if is_json_array_name(src) {
            super::jsonarray::lines_of_array(Box::new(buf), src.name())
        } else {
            Ok(Box::new(buf))
        };
    };
    // A compressed Parquet file (`x.parquet.gz`): decompressed to a temp file, which
    // Parquet's reader needs to seek in.
    let inner = decoded
        .fill_buf()
        .with_context(|| format!("{}: read error", src.name()))?;
    if super::parquet::is_parquet(inner) {
        let f = super::parquet::spool(decoded, &src.name())?;
        return super::parquet::lines_of_parquet(f, src.name());
    }
    if is_json_array_name(src) {
        return super::jsonarray::lines_of_array(decoded, src.name());
    }
    Ok(decoded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{LineReader, write_tmp};
    use std::io::Write;
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
    fn gzip_is_read_transparently() {
        let d = tempfile::tempdir().unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(b"{\"a\":1}\n{\"a\":2}\n").unwrap();
        let p = write_tmp(d.path(), "a.jsonl.gz", &gz.finish().unwrap());
        let n = LineReader::new(vec![Source::File(p)]).count();
        assert_eq!(n, 2);
    }

    #[test]
    fn glob_patterns() {
        let g = |p: &str| p.parse::<Glob>().unwrap();
        assert!(g("*.parquet").matches("data/train-00000-of-00002.parquet"));
        assert!(!g("*.parquet").matches("data/train.jsonl"));
        assert!(g("data/train-*").matches("data/train-00001-of-00002.parquet"));
        assert!(!g("data/train-*").matches("data/test-00000-of-00001.parquet"));
        assert!(
            !g("*/train-*").matches("a/b/train-0.parquet"),
            "* stops at /"
        );
        assert!(g("**/train-*").matches("a/b/train-0.parquet"));
        assert!(
            g("**/train-*").matches("train-0.parquet"),
            "**/ matches no folder"
        );
        assert!(g("a/**/x.json").matches("a/x.json"));
        assert!(g("a/**/x.json").matches("a/b/c/x.json"));
        assert!(g("shard_?.jsonl").matches("shard_3.jsonl"));
        assert!(!g("shard_?.jsonl").matches("shard_10.jsonl"));
        assert!(g("shard_[0-4].jsonl").matches("shard_4.jsonl"));
        assert!(!g("shard_[0-4].jsonl").matches("shard_5.jsonl"));
        assert!(g("shard_[!0-4].jsonl").matches("shard_5.jsonl"));
        assert!(g("a\\*b").matches("a*b") && !g("a\\*b").matches("axb"));
        assert!(g("*a*a*a*b").matches("aaaaaaaaaaaaaaaaaaaab"));
        assert!(!g("*a*a*a*b").matches("aaaaaaaaaaaaaaaaaaaaa"));
        assert!("x[ab".parse::<Glob>().is_err());
        assert!("".parse::<Glob>().is_err());
    }
}

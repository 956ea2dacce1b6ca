//! Where lines come from: files (plain or gzip, detected by magic bytes), standard
//! input, and directories expanded to their JSONL files in natural order.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use std::sync::Arc;

use anyhow::{Context, Result};

use crate::error::{InputError, UsageError};

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
                    return Err(UsageError(format!(
                        "{}: directory holds no {prefix}*.jsonl or {prefix}*.json files \
                         (plain, .gz or .zst), searched recursively",
                        p.display()
                    ))
                    .into());
                }
            }
            _ => out.push(src),
        }
    }
    Ok(out)
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
            } else if path.is_file() && DATA_ENDINGS.iter().any(|e| name.ends_with(e)) {
                files.push(path);
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
        Source::Stdin => false,
        Source::File(p) => {
            let n = p.to_string_lossy();
            [".json", ".json.gz", ".json.zst"]
                .iter()
                .any(|e| n.ends_with(e))
        }
    }
}

/// Open a source for reading; gzip and zstd are detected by their magic bytes, whatever
/// the name. A `.json` file that holds a JSON array reads as one line per element; a
/// Parquet file (by its magic bytes) as one line per row.
pub fn open_source(src: &Source) -> Result<Box<dyn BufRead + Send>> {
    let raw: Box<dyn Read + Send> = match src {
        Source::Stdin => Box::new(io::stdin()),
        Source::File(p) => Box::new(File::open(p).map_err(|e| InputError {
            what: "cannot open",
            path: Arc::from(p.display().to_string()),
            source: e,
        })?),
    };
    let mut buf = BufReader::with_capacity(BUF_SIZE, raw);
    let head = buf.fill_buf().map_err(|e| InputError {
        what: "cannot read",
        path: Arc::from(src.name()),
        source: e,
    })?;
    if super::parquet::is_parquet(head) {
        let f = match src {
            Source::File(p) => File::open(p).map_err(|e| InputError {
                what: "cannot open",
                path: Arc::from(p.display().to_string()),
                source: e,
            })?,
            Source::Stdin => super::parquet::spool(buf, &src.name())?,
        };
        return super::parquet::lines_of_parquet(f, src.name());
    }
    let decoded: Box<dyn BufRead + Send> = if head.starts_with(&[0x1f, 0x8b]) {
        let gz = flate2::bufread::MultiGzDecoder::new(buf);
        Box::new(BufReader::with_capacity(BUF_SIZE, gz))
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        let zst = zstd::stream::read::Decoder::with_buffer(buf)
            .with_context(|| format!("{}: cannot start the zstd decoder", src.name()))?;
        Box::new(BufReader::with_capacity(BUF_SIZE, zst))
    } else {
        Box::new(buf)
    };
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
}

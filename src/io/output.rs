//! Where output goes: stdout, a special file, or a regular file written through a temp
//! file beside it and renamed into place only when the run succeeds.
//!
//! The file is created with the mode the umask gives (`0666 & !umask`, as `>` does),
//! and every temp file still open is listed, so that a signal handler can remove them
//! ([`remove_live_temps`]): an interrupted run leaves nothing behind.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::source::BUF_SIZE;

/// True for an existing path that is not a regular file (a device, FIFO or socket), which
/// cannot be replaced by a rename.
fn is_special_file(p: &Path) -> bool {
    std::fs::metadata(p)
        .map(|m| !m.is_file() && !m.is_dir())
        .unwrap_or(false)
}

/// The temp files of the outputs not yet committed or dropped.
static LIVE_TEMPS: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Remove every temp file of an output that is not committed yet (from a signal
/// handler, just before the process dies).
pub fn remove_live_temps() {
    let temps = LIVE_TEMPS.lock().unwrap_or_else(|e| e.into_inner());
    for p in temps.iter() {
        let _ = std::fs::remove_file(p);
    }
}

/// Lists a temp file in [`LIVE_TEMPS`] while it lives.
struct Listed(PathBuf);

impl Listed {
    fn new(p: &Path) -> Listed {
        let mut temps = LIVE_TEMPS.lock().unwrap_or_else(|e| e.into_inner());
        temps.push(p.to_path_buf());
        Listed(p.to_path_buf())
    }
}

impl Drop for Listed {
    fn drop(&mut self) {
        let mut temps = LIVE_TEMPS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = temps.iter().position(|p| *p == self.0) {
            temps.swap_remove(i);
        }
    }
}

/// Where output goes: stdout, or a file that appears only when the run succeeds.
pub struct Output {
    inner: OutputKind,
}

enum OutputKind {
    Stdout(BufWriter<io::Stdout>),
    Special(BufWriter<File>),
    File {
        w: Encoded,
        path: PathBuf,
        listed: Listed,
    },
}

/// The encoding of an output file, chosen by its name: `.gz` gzip, `.zst` zstd,
/// `.parquet` Parquet ([`super::parquet`]), anything else plain JSONL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
    Parquet,
}

impl Compression {
    pub fn for_path(p: &Path) -> Compression {
        match p.extension().and_then(|e| e.to_str()) {
            Some("gz") => Compression::Gzip,
            Some("zst") => Compression::Zstd,
            Some("parquet") => Compression::Parquet,
            _ => Compression::None,
        }
    }
}

/// A temp file behind its encoder.
enum Encoded {
    Plain(BufWriter<tempfile::NamedTempFile>),
    Gzip(flate2::write::GzEncoder<BufWriter<tempfile::NamedTempFile>>),
    Zstd(zstd::stream::write::Encoder<'static, BufWriter<tempfile::NamedTempFile>>),
    Parquet(Box<super::parquet::ParquetSink<BufWriter<tempfile::NamedTempFile>>>),
}

impl Encoded {
    fn new(tmp: tempfile::NamedTempFile, c: Compression) -> io::Result<Encoded> {
        let w = BufWriter::with_capacity(BUF_SIZE, tmp);
        Ok(match c {
            Compression::None => Encoded::Plain(w),
            Compression::Gzip => Encoded::Gzip(flate2::write::GzEncoder::new(
                w,
                flate2::Compression::default(),
            )),
            Compression::Zstd => Encoded::Zstd(zstd::stream::write::Encoder::new(w, 3)?),
            Compression::Parquet => {
                Encoded::Parquet(Box::new(super::parquet::ParquetSink::new(w)?))
            }
        })
    }

    fn writer(&mut self) -> &mut dyn Write {
        match self {
            Encoded::Plain(w) => w,
            Encoded::Gzip(w) => w,
            Encoded::Zstd(w) => w,
            Encoded::Parquet(w) => w.as_mut(),
        }
    }

    /// End the stream and hand back the temp file, everything written to it.
    fn finish(self) -> io::Result<tempfile::NamedTempFile> {
        let w = match self {
            Encoded::Plain(w) => w,
            Encoded::Gzip(w) => w.finish()?,
            Encoded::Zstd(w) => w.finish()?,
            Encoded::Parquet(w) => w.finish()?,
        };
        w.into_inner().map_err(|e| e.into_error())
    }
}

impl Output {
    /// `None` or `-` is stdout; a path is written through a temp file beside it,
    /// compressed as its name says ([`Compression::for_path`]).
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
                // The mode open(2) is given is masked by the umask, as for `>`.
                let tmp = tempfile::Builder::new()
                    .prefix(".traj-")
                    .suffix(".tmp")
                    .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666))
                    .tempfile_in(&dir)
                    .with_context(|| format!("cannot create a temp file in {}", dir.display()))?;
                let listed = Listed::new(tmp.path());
                Ok(Output {
                    inner: OutputKind::File {
                        w: Encoded::new(tmp, Compression::for_path(p))?,
                        path: p.to_path_buf(),
                        listed,
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
            OutputKind::File { w, path, listed } => {
                let tmp = w.finish()?;
                tmp.as_file().sync_all()?;
                tmp.persist(&path)
                    .map_err(|e| e.error)
                    .with_context(|| format!("cannot rename output into {}", path.display()))?;
                drop(listed);
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
            OutputKind::File { w, .. } => w.writer().write(buf),
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match &mut self.inner {
            OutputKind::Stdout(w) => w.write_all(buf),
            OutputKind::Special(w) => w.write_all(buf),
            OutputKind::File { w, .. } => w.writer().write_all(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match &mut self.inner {
            OutputKind::Stdout(w) => w.flush(),
            OutputKind::Special(w) => w.flush(),
            OutputKind::File { w, .. } => w.writer().flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

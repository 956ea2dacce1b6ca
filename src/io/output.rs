//! Where output goes: stdout, a special file, or a regular file written through a temp
//! file beside it and renamed into place only when the run succeeds.
//!
//! As with `>`, a new file gets the mode the umask gives (`0666 & !umask`), an existing
//! one keeps its mode, a symbolic link is written through (the file it names is
//! replaced, the link stays), and `/dev/stdout` or a FIFO is written straight to; every
//! temp file still open is listed, so that a signal handler can remove them
//! ([`remove_live_temps`]): an interrupted run leaves nothing behind; one killed
//! outright leaves a temp file named after its process, which the next run writing
//! beside it removes ([`super::temp`]). A run's outputs are put in place together or
//! not at all ([`Commit`]); an error writing any of them names it.
//!
//! Durability costs what the disk needs, not a second pass: a file output is written
//! behind ([`WriteBehind`]): every [`SYNC_EVERY`] bytes a background thread flushes what
//! has been written so far to the disk (`fdatasync`) while the stage goes on writing,
//! so the disk works while the stage computes, and the `fsync` before the rename waits
//! only for the last few MB, not for the whole file (docs/pipeline.md, "Durable
//! output", has the figures).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;

use anyhow::{Context, Result};

use super::source::BUF_SIZE;

/// True for a path written straight to, not replaced by a rename: an existing path that
/// is not a regular file (a device, FIFO or socket), and anything under `/dev` or `/proc`
/// (`/dev/stdout` is a link to the caller's stdout, whatever that is: writing to it is
/// what `>` does, and a rename would replace the link).
pub fn is_special_file(p: &Path) -> bool {
    p.starts_with("/dev")
        || p.starts_with("/proc")
        || std::fs::metadata(p)
            .map(|m| !m.is_file() && !m.is_dir())
            .unwrap_or(false)
}

/// The file a path names once its symbolic links are followed (the path itself when it is
/// not a link): `-o` through a link writes the file the link points to, as `>` does,
/// and leaves the link in place. A link to a file not made yet names that file.
fn link_target(p: &Path) -> Result<PathBuf> {
    let mut cur = p.to_path_buf();
    for _ in 0..40 {
        match std::fs::read_link(&cur) {
            Ok(t) => {
                let dir = cur.parent().unwrap_or(Path::new(""));
                cur = dir.join(t);
            }
            Err(_) => return Ok(cur),
        }
    }
    anyhow::bail!("{}: too many levels of symbolic links", p.display())
}

use super::temp::Listed;
pub use super::temp::remove_live_temps;

/// The name of an output in messages: its path as given, or `stdout`.
fn output_name(path: Option<&Path>) -> std::sync::Arc<str> {
    match path {
        Some(p) if p.as_os_str() != "-" => p.display().to_string().into(),
        _ => "stdout".into(),
    }
}

/// An error of writing to an output, which names it (`out.jsonl: write error: No space
/// left on device`); the kind of the error is kept (a broken pipe is still one).
fn named(name: &str, e: io::Error) -> io::Error {
    #[derive(Debug)]
    struct Named(String);
    impl std::fmt::Display for Named {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.0)
        }
    }
    impl std::error::Error for Named {}
    if e.get_ref().is_some_and(|inner| inner.is::<Named>()) {
        return e;
    }
    io::Error::new(e.kind(), Named(format!("{name}: write error: {e}")))
}

/// Where a pipeline writes: any [`Write`], and, when it is a pipe, the pipe itself, so
/// that bytes already in a file can be spliced into it without a copy through memory
/// ([`super::passthru`]).
pub trait Sink: Write {
    /// The pipe to splice into, everything written so far flushed first; `None` when
    /// the sink is not a pipe (bytes must then be written).
    fn splice_target(&mut self) -> io::Result<Option<BorrowedFd<'_>>> {
        Ok(None)
    }
}

impl Sink for Vec<u8> {}

/// Pipe capacity asked for on a pipe traj writes to: fewer, longer writes and wake-ups
/// of the reader on the other end than with the default 64 KiB (1 MiB is the most an
/// unprivileged process may ask for by default).
const PIPE_SIZE: usize = 1 << 20;

/// Whether `fd` is a pipe (or FIFO); if so, its capacity is raised to [`PIPE_SIZE`]
/// (best effort: a refusal only leaves the default).
pub fn prepare_pipe(fd: BorrowedFd<'_>) -> bool {
    let is_pipe = rustix::fs::fstat(fd).is_ok_and(|st| {
        rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Fifo
    });
    if is_pipe && rustix::pipe::fcntl_getpipe_size(fd).is_ok_and(|n| n < PIPE_SIZE) {
        let _ = rustix::pipe::fcntl_setpipe_size(fd, PIPE_SIZE);
    }
    is_pipe
}

/// Where output goes: stdout, or a file that appears only when the run succeeds.
pub struct Output {
    inner: OutputKind,
    /// Stdout or the special file is a pipe ([`Sink::splice_target`]).
    pipe: bool,
    /// The path as given, or `stdout`, for messages.
    name: std::sync::Arc<str>,
}

enum OutputKind {
    Stdout(BufWriter<io::Stdout>),
    Special(BufWriter<File>),
    File {
        w: Box<Encoded>,
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

/// Bytes written between two background flushes of a file output to the disk: large
/// enough that a flush is one long sequential write, small enough that the final
/// `fsync` has little left to do.
pub const SYNC_EVERY: u64 = 16 << 20;

/// A temp file that is flushed to the disk in the background while it is written: each
/// [`SYNC_EVERY`] bytes, a flusher thread is asked (without waiting) to `fdatasync` what
/// has been written so far; a request made while it is still flushing is folded into the
/// next one. [`WriteBehind::finish`] stops the thread and reports its first error; when
/// it is dropped unfinished (a failed run), the thread ends after its current flush.
struct WriteBehind {
    tmp: tempfile::NamedTempFile,
    since_kick: u64,
    kick: Option<SyncSender<()>>,
    flusher: Option<JoinHandle<io::Result<()>>>,
}

impl WriteBehind {
    fn new(tmp: tempfile::NamedTempFile) -> io::Result<WriteBehind> {
        let file = tmp.as_file().try_clone()?;
        let (kick, rx): (SyncSender<()>, Receiver<()>) = sync_channel(1);
        let flusher = std::thread::Builder::new()
            .name("traj-flush".into())
            .spawn(move || -> io::Result<()> {
                for () in rx {
                    file.sync_data()?;
                }
                Ok(())
            })?;
        Ok(WriteBehind {
            tmp,
            since_kick: 0,
            kick: Some(kick),
            flusher: Some(flusher),
        })
    }

    /// Stop the flusher (its first error, if any, is this call's) and hand back the
    /// file; what the last flush did not cover is left to the caller's `fsync`.
    fn finish(mut self) -> io::Result<tempfile::NamedTempFile> {
        self.stop()?;
        Ok(self.tmp)
    }

    fn stop(&mut self) -> io::Result<()> {
        drop(self.kick.take());
        match self.flusher.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(io::Error::other("the output flusher thread panicked")),
            None => Ok(()),
        }
    }
}

impl Write for WriteBehind {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.tmp.write(buf)?;
        self.since_kick += n as u64;
        if self.since_kick >= SYNC_EVERY {
            self.since_kick = 0;
            if let Some(k) = &self.kick {
                match k.try_send(()) {
                    // Full: a flush is already asked for and will cover these bytes.
                    Ok(()) | Err(TrySendError::Full(())) => {}
                    Err(TrySendError::Disconnected(())) => {
                        // The flusher stopped on an error: report it now.
                        self.kick = None;
                        self.stop()?;
                    }
                }
            }
        }
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.tmp.flush()
    }
}

/// A temp file behind its encoder.
enum Encoded {
    Plain(BufWriter<WriteBehind>),
    Gzip(flate2::write::GzEncoder<BufWriter<WriteBehind>>),
    Zstd(zstd::stream::write::Encoder<'static, BufWriter<WriteBehind>>),
    Parquet(Box<super::parquet::ParquetSink<BufWriter<WriteBehind>>>),
}

impl Encoded {
    fn new(tmp: tempfile::NamedTempFile, c: Compression) -> io::Result<Encoded> {
        let w = BufWriter::with_capacity(BUF_SIZE, WriteBehind::new(tmp)?);
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
        w.into_inner().map_err(|e| e.into_error())?.finish()
    }
}

/// An output that cannot be made ([`crate::error::FileError`], exit 2), named as given.
fn cannot_create(p: &Path, e: std::io::Error) -> crate::error::FileError {
    crate::error::FileError {
        what: "cannot create",
        path: p.display().to_string().into(),
        source: e,
    }
}

impl Output {
    /// `None` or `-` is stdout; a path is written through a temp file beside it,
    /// compressed as its name says ([`Compression::for_path`]).
    pub fn create(path: Option<&Path>) -> Result<Output> {
        match path {
            None => Ok(Output::stdout()),
            Some(p) if p.as_os_str() == "-" => Ok(Output::stdout()),
            Some(p) if is_special_file(p) || is_special_file(&link_target(p)?) => {
                // /dev/stderr, a FIFO, a terminal: write straight to it.
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(p)
                    .map_err(|e| cannot_create(p, e))?;
                let pipe = prepare_pipe(f.as_fd());
                Ok(Output {
                    inner: OutputKind::Special(BufWriter::with_capacity(BUF_SIZE, f)),
                    pipe,
                    name: output_name(Some(p)),
                })
            }
            Some(given) => {
                let p = &link_target(given)?;
                let dir = match p.parent() {
                    Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                    _ => PathBuf::from("."),
                };
                // Temp files of runs that died (`kill -9`) beside it go first.
                super::temp::remove_stale(&dir, TEMP_PREFIX, TEMP_SUFFIX);
                // As for `>`: an existing file keeps its mode; a new one gets the mode
                // open(2) is given, masked by the umask.
                let prefix = super::temp::name_prefix(TEMP_PREFIX);
                let tmp = super::temp::file_with_mode_of(
                    tempfile::Builder::new().prefix(&prefix).suffix(TEMP_SUFFIX),
                    &dir,
                    p,
                )
                // A missing folder in the OS's own words, without the temp file's name.
                .map_err(|e| cannot_create(given, std::fs::metadata(&dir).err().unwrap_or(e)))?;
                let listed = Listed::new(tmp.path());
                Ok(Output {
                    inner: OutputKind::File {
                        w: Box::new(Encoded::new(tmp, Compression::for_path(given))?),
                        path: p.to_path_buf(),
                        listed,
                    },
                    pipe: false,
                    name: output_name(Some(given)),
                })
            }
        }
    }

    pub fn stdout() -> Output {
        let out = io::stdout();
        let pipe = prepare_pipe(out.as_fd());
        Output {
            inner: OutputKind::Stdout(BufWriter::with_capacity(BUF_SIZE, out)),
            pipe,
            name: output_name(None),
        }
    }

    /// The output's name in messages: its path as given, or `stdout`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Flush everything; for a file, fsync it (most of it is on the disk already:
    /// [`WriteBehind`]), rename it into place and fsync its folder, so that the new name
    /// survives a crash too. A stage with a rejects file commits both with [`commit`].
    pub fn commit(self) -> Result<()> {
        Commit::default().output(self)?.done()
    }

    /// Write out everything (a file: to its temp file, on the disk): what a [`Commit`]
    /// does before it renames anything.
    fn finish(self) -> Result<Option<Ready>> {
        let name = self.name;
        let wrote = |e: io::Error| anyhow::Error::new(named(&name, e));
        match self.inner {
            OutputKind::Stdout(mut w) => w.flush().map(|()| None).map_err(wrote),
            OutputKind::Special(mut w) => w.flush().map(|()| None).map_err(wrote),
            OutputKind::File { w, path, listed } => {
                let tmp = w.finish().map_err(wrote)?;
                tmp.as_file().sync_all().map_err(wrote)?;
                Ok(Some(Ready {
                    tmp: tmp.into_temp_path(),
                    path,
                    _listed: listed,
                }))
            }
        }
    }
}

/// The prefix and suffix of the temp file of an output (with the process in between:
/// [`super::temp`]).
const TEMP_PREFIX: &str = ".traj-";
const TEMP_SUFFIX: &str = ".tmp";

/// An output file written in full and on the disk, under its temp name.
struct Ready {
    tmp: tempfile::TempPath,
    path: PathBuf,
    _listed: Listed,
}

/// The outputs of one run, put in place together or not at all: each is written out
/// first (an error there, a full disk for one of them, leaves every file as it was
/// and removes the temp files), then all are renamed into place, the rejects file
/// first, so that an output never stands without the rejects of the same run.
#[derive(Default)]
pub struct Commit {
    /// Renamed in this order.
    ready: Vec<Ready>,
}

impl Commit {
    /// Write out `out` (stdout and special files: flushed; they cannot wait).
    pub fn output(mut self, out: Output) -> Result<Commit> {
        if let Some(r) = out.finish()? {
            self.ready.push(r);
        }
        Ok(self)
    }

    /// Write out the rejects file, to be renamed before the outputs.
    pub fn rejects(mut self, rejects: super::Rejects) -> Result<Commit> {
        if let Some(out) = rejects.into_output()
            && let Some(r) = out.finish()?
        {
            self.ready.insert(0, r);
        }
        Ok(self)
    }

    /// Rename every file into place and fsync its folder.
    pub fn done(self) -> Result<()> {
        for Ready { tmp, path, _listed } in self.ready {
            tmp.persist(&path)
                .map_err(|e| e.error)
                .with_context(|| format!("cannot rename output into {}", path.display()))?;
            drop(_listed);
            let dir = match path.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            // Some file systems cannot sync a folder: the file itself is safe.
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    }
}

/// Commit a stage's output and its rejects file together ([`Commit`]).
pub fn commit(out: Output, rejects: super::Rejects) -> Result<()> {
    Commit::default().output(out)?.rejects(rejects)?.done()
}

impl Sink for Output {
    fn splice_target(&mut self) -> io::Result<Option<BorrowedFd<'_>>> {
        if !self.pipe {
            return Ok(None);
        }
        match &mut self.inner {
            OutputKind::Stdout(w) => {
                w.flush()?;
                Ok(Some(w.get_ref().as_fd()))
            }
            OutputKind::Special(w) => {
                w.flush()?;
                Ok(Some(w.get_ref().as_fd()))
            }
            OutputKind::File { .. } => Ok(None),
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
        .map_err(|e| named(&self.name, e))
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match &mut self.inner {
            OutputKind::Stdout(w) => w.write_all(buf),
            OutputKind::Special(w) => w.write_all(buf),
            OutputKind::File { w, .. } => w.writer().write_all(buf),
        }
        .map_err(|e| named(&self.name, e))
    }
    fn flush(&mut self) -> io::Result<()> {
        match &mut self.inner {
            OutputKind::Stdout(w) => w.flush(),
            OutputKind::Special(w) => w.flush(),
            OutputKind::File { w, .. } => w.writer().flush(),
        }
        .map_err(|e| named(&self.name, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Many flushes in the background while writing: the bytes are all there, in order,
    /// and the flusher thread is gone after the commit.
    #[test]
    fn written_behind_output_is_complete() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("big.jsonl");
        let mut o = Output::create(Some(&p)).unwrap();
        let mut want = Vec::new();
        for i in 0..(3 * SYNC_EVERY / 1000) {
            let line = format!("{{\"i\":{i},\"pad\":\"{}\"}}\n", "x".repeat(980));
            o.write_all(line.as_bytes()).unwrap();
            want.extend_from_slice(line.as_bytes());
        }
        o.commit().unwrap();
        assert!(std::fs::read(&p).unwrap() == want);
        // Compressed outputs go through the same file.
        let z = d.path().join("big.jsonl.zst");
        let mut o = Output::create(Some(&z)).unwrap();
        o.write_all(&want).unwrap();
        o.commit().unwrap();
        assert!(zstd::decode_all(File::open(&z).unwrap()).unwrap() == want);
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

    /// `-o` as `>` writes: through a symbolic link (the link stays, even one to a file
    /// not made yet), and an existing file keeps its mode.
    #[test]
    fn output_is_written_through_links_and_keeps_the_mode() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("v2.jsonl");
        std::fs::write(&real, "old\n").unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = d.path().join("current.jsonl");
        std::os::unix::fs::symlink("v2.jsonl", &link).unwrap();
        let mut o = Output::create(Some(&link)).unwrap();
        assert_eq!(o.name(), link.display().to_string());
        o.write_all(b"new\n").unwrap();
        o.commit().unwrap();
        assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read(&real).unwrap(), b"new\n");
        let mode = std::fs::metadata(&real).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{mode:o}");
        // A dangling link names the file to make.
        let dangling = d.path().join("next.jsonl");
        std::os::unix::fs::symlink("sub/v3.jsonl", &dangling).unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        let mut o = Output::create(Some(&dangling)).unwrap();
        o.write_all(b"x\n").unwrap();
        o.commit().unwrap();
        assert!(
            dangling
                .symlink_metadata()
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(
            std::fs::read(d.path().join("sub/v3.jsonl")).unwrap(),
            b"x\n"
        );
        // A loop of links is an error, not a hang.
        let a = d.path().join("a");
        std::os::unix::fs::symlink("b", &a).unwrap();
        std::os::unix::fs::symlink("a", d.path().join("b")).unwrap();
        let e = Output::create(Some(&a)).err().unwrap();
        assert!(e.to_string().contains("too many levels"), "{e}");
    }

    #[test]
    fn an_output_that_cannot_be_made_is_the_callers_to_fix() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("no/such/dir/out.jsonl");
        let e = Output::create(Some(&p)).err().unwrap();
        assert_eq!(crate::error::Error::of(&e), crate::error::Error::Usage);
        assert_eq!(
            format!("{e:#}"),
            format!(
                "cannot create {}: No such file or directory (os error 2)",
                p.display()
            )
        );
    }
}

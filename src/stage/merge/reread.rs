//! Rows kept by their place in a plain input file instead of by their bytes: the
//! reader that gives each line of such a file with its offset ([`FileLines`], the same
//! lines, numbers and blank-line rule as [`crate::io::Records`]), and the reader that
//! reads the rows again, in output order, when they are written ([`Rereader`]).
//!
//! A merge then holds about 100 bytes per row however long the rows are, writes no row
//! to a spill file, and copies a row's bytes once more only: from the page cache to the
//! output (rows that follow each other in the file and in the output in one write). A
//! file that changed between the two reads (its length or modification time) stops
//! the merge with an error instead of writing other bytes than those judged.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use anyhow::{Context, Result};

use super::runs::{Body, Rec};
use crate::io::Raw;

/// First read size of [`FileLines`] (it grows for longer lines).
const CHUNK: usize = 4 << 20;
/// Files [`Rereader`] keeps open at once (a run directory may hold thousands); the
/// others are opened again by path when their rows come, and checked to be the same.
const MAX_OPEN: usize = 64;
/// Smallest and largest read of [`Rereader`] when rows come in file order.
const WINDOW_MIN: usize = 64 << 10;
const WINDOW_MAX: usize = 1 << 20;

/// An input file that changed while traj-merge read it.
#[derive(Debug, thiserror::Error)]
#[error(
    "{path}: the file changed while traj-merge read it ({what}); the merge stopped (an -o file is not written): run it again"
)]
pub struct Changed {
    pub path: Arc<str>,
    pub what: &'static str,
}

/// One line of a plain file: number, offset and bytes (without its line ending).
pub(super) struct Located<'a> {
    pub lineno: u64,
    pub offset: u64,
    pub bytes: &'a [u8],
    /// The line ends with a lone `\n` right after `bytes` ([`crate::io::Cut::lf`]).
    pub lf: bool,
    /// A CR was cut after `bytes` ([`crate::io::Cut::cr`]).
    pub cr: bool,
}

/// Reads the lines of a plain file in large chunks, in place.
pub(super) struct FileLines {
    file: File,
    name: Arc<str>,
    buf: Vec<u8>,
    /// Unread part of `buf`: `pos..filled`; `base`: the file offset of `buf[0]`.
    pos: usize,
    filled: usize,
    base: u64,
    eof: bool,
    lineno: u64,
}

impl FileLines {
    pub fn new(file: File, name: Arc<str>) -> FileLines {
        FileLines {
            file,
            name,
            buf: Vec::new(),
            pos: 0,
            filled: 0,
            base: 0,
            eof: false,
            lineno: 0,
        }
    }

    /// The next line (blank lines included), or `None` at the end of the file.
    pub fn next_line(&mut self) -> Result<Option<Located<'_>>> {
        let raw_end = loop {
            if let Some(i) = memchr::memchr(b'\n', &self.buf[self.pos..self.filled]) {
                break self.pos + i + 1;
            }
            if self.eof {
                if self.pos == self.filled {
                    return Ok(None);
                }
                break self.filled;
            }
            self.fill()?;
        };
        let raw = &self.buf[self.pos..raw_end];
        self.lineno += 1;
        let cut = crate::io::cut_line(raw, self.lineno == 1);
        let (start, end) = (self.pos + cut.line.start, self.pos + cut.line.end);
        self.pos = raw_end;
        Ok(Some(Located {
            lineno: self.lineno,
            offset: self.base + start as u64,
            bytes: &self.buf[start..end],
            lf: cut.lf,
            cr: cut.cr,
        }))
    }

    /// Read more: move the unread bytes to the front, grow when they fill the buffer.
    fn fill(&mut self) -> Result<()> {
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.filled, 0);
            self.base += self.pos as u64;
            self.filled -= self.pos;
            self.pos = 0;
        }
        if self.filled == self.buf.len() {
            let size = (self.buf.len() * 2).max(CHUNK);
            self.buf.resize(size, 0);
        }
        let n = std::io::Read::read(&mut self.file, &mut self.buf[self.filled..])
            .with_context(|| format!("{}: read error", self.name))?;
        self.filled += n;
        self.eof = n == 0;
        Ok(())
    }

    /// The file (at `path`), and what it was when every byte had been read.
    pub fn finish(self, path: PathBuf) -> Result<Reopened> {
        let stamp = Stamp::of(&self.file.metadata(), &self.name)?;
        if stamp.len != self.base + self.filled as u64 {
            return Err(Changed {
                path: self.name,
                what: "its length is not what was read",
            }
            .into());
        }
        Ok(Reopened {
            file: Some(self.file),
            path,
            name: self.name,
            stamp,
            win: Vec::new(),
            start: 0,
            filled: 0,
            next: 0,
            size: WINDOW_MIN,
        })
    }
}

/// Which file, its length and its modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    modified: Option<SystemTime>,
}

impl Stamp {
    fn of(m: &std::io::Result<std::fs::Metadata>, name: &str) -> Result<Stamp> {
        let m = m
            .as_ref()
            .map_err(|e| anyhow::anyhow!("{name}: cannot read its metadata: {e}"))?;
        Ok(Stamp {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            modified: m.modified().ok(),
        })
    }
}

/// A file read once, to be read again (kept open, or opened again by path).
pub(super) struct Reopened {
    file: Option<File>,
    path: PathBuf,
    name: Arc<str>,
    stamp: Stamp,
    /// `win[..filled]` holds the file's bytes from `start`.
    win: Vec<u8>,
    start: u64,
    filled: usize,
    /// Where the last row asked for ended, and the next read size when rows follow on.
    next: u64,
    size: usize,
}

impl Reopened {
    /// Make `offset..offset + n` readable in the window; its start in `win`.
    fn load(&mut self, offset: u64, n: usize) -> Result<usize> {
        let end = offset + n as u64;
        if offset >= self.start && end <= self.start + self.filled as u64 {
            self.next = end;
            return Ok((offset - self.start) as usize);
        }
        // Rows in file order (gaps of blank lines or CRs at most) read ahead, and more
        // the longer they do; a row elsewhere is read alone.
        let ahead = offset >= self.next && offset - self.next < WINDOW_MIN as u64;
        self.size = if ahead {
            (self.size * 2).min(WINDOW_MAX)
        } else {
            WINDOW_MIN
        };
        let room = self.stamp.len.saturating_sub(offset) as usize;
        let want = if ahead { n.max(self.size).min(room) } else { n };
        let want = want.max(n);
        if self.win.len() < want {
            self.win.resize(want, 0);
        }
        let mut got = 0;
        while got < want {
            let file = self.file.as_ref().expect("opened before a read");
            let k = file
                .read_at(&mut self.win[got..want], offset + got as u64)
                .with_context(|| format!("{}: read error", self.name))?;
            if k == 0 {
                break;
            }
            got += k;
        }
        if got < n {
            return Err(Changed {
                path: self.name.clone(),
                what: "it is shorter than when it was read",
            }
            .into());
        }
        (self.start, self.filled, self.next) = (offset, got, end);
        Ok(0)
    }
}

/// Reads rows again from their files, in output order, and writes them.
pub(super) struct Rereader {
    files: Vec<Option<Reopened>>,
    /// Rows of one file read but not yet written: `win[range]` of `files[src]`.
    pending: Option<(usize, std::ops::Range<usize>)>,
    /// The files open, oldest first.
    open: VecDeque<usize>,
}

impl Rereader {
    pub fn new(sources: usize) -> Rereader {
        Rereader {
            files: (0..sources).map(|_| None).collect(),
            pending: None,
            open: VecDeque::new(),
        }
    }

    pub fn add(&mut self, src: usize, f: Reopened) {
        self.files[src] = Some(f);
        self.opened(src);
    }

    /// Count `src` as open; close the oldest beyond [`MAX_OPEN`].
    fn opened(&mut self, src: usize) {
        self.open.push_back(src);
        while self.open.len() > MAX_OPEN {
            let old = self.open.pop_front().expect("more than MAX_OPEN");
            if let Some(f) = &mut self.files[old] {
                // Nothing of it is pending: a row is written before the next is read.
                (f.file, f.win, f.filled) = (None, Vec::new(), 0);
            }
        }
    }

    /// The file of `src`, open (opened again when it was closed: the same file, unchanged).
    fn file(&mut self, src: u32) -> Result<&mut Reopened> {
        let src = src as usize;
        let f = self.files[src]
            .as_mut()
            .expect("a located row's file was read");
        if f.file.is_none() {
            let file =
                File::open(&f.path).with_context(|| format!("cannot open {} again", f.name))?;
            if Stamp::of(&file.metadata(), &f.name)? != f.stamp {
                return Err(Changed {
                    path: f.name.clone(),
                    what: "it is not the same file, or its length or modification time is not what it was",
                }
                .into());
            }
            f.file = Some(file);
            self.opened(src);
        }
        Ok(self.files[src].as_mut().expect("just checked"))
    }

    /// Write the row and its `\n` to `out`.
    pub fn write(&mut self, r: &Rec, out: &mut dyn Write) -> Result<()> {
        let (offset, len, lf) = match &r.body {
            Body::Bytes(raw) => {
                self.flush(out)?;
                out.write_all(crate::io::trim_line(raw, false))?;
                return Ok(out.write_all(b"\n")?);
            }
            Body::At { offset, len, lf } => (*offset, *len as usize, *lf),
        };
        let n = len + lf as usize;
        // Only a row whose bytes and LF are the file's joins the pending run of bytes;
        // any other is written with the LF it lacks.
        if lf
            && let Some((src, range)) = &mut self.pending
            && *src == r.src as usize
        {
            let f = self.files[*src].as_mut().expect("pending file is open");
            if f.start + range.end as u64 == offset && range.end + n <= f.filled {
                range.end += n;
                f.next = offset + n as u64;
                return Ok(());
            }
        }
        self.flush(out)?;
        let f = self.file(r.src)?;
        let at = f.load(offset, n)?;
        if lf {
            self.pending = Some((r.src as usize, at..at + n));
        } else {
            out.write_all(&f.win[at..at + len])?;
            out.write_all(b"\n")?;
        }
        Ok(())
    }

    /// The row as the input had it, for a rejects file.
    pub fn line<'a>(&'a mut self, r: &'a Rec, out: &mut dyn Write) -> Result<Raw<'a>> {
        match &r.body {
            Body::Bytes(raw) => Ok(Raw {
                bytes: crate::io::trim_line(raw, false),
                cr: raw.last() == Some(&b'\r'),
            }),
            Body::At { offset, len, lf } => {
                self.flush(out)?;
                let f = self.file(r.src)?;
                let len = *len as usize;
                // Without its own LF, the line was cut before a CR or at the end.
                let cr_at = offset + len as u64;
                let more = (!lf && cr_at < f.stamp.len) as usize;
                let at = f.load(*offset, len + more)?;
                Ok(Raw {
                    bytes: &f.win[at..at + len],
                    cr: more == 1 && f.win[at + len] == b'\r',
                })
            }
        }
    }

    fn flush(&mut self, out: &mut dyn Write) -> Result<()> {
        if let Some((src, range)) = self.pending.take() {
            let f = self.files[src].as_ref().expect("pending file is open");
            out.write_all(&f.win[range])?;
        }
        Ok(())
    }

    /// Write what is pending and check that no file changed since it was read.
    pub fn finish(&mut self, out: &mut dyn Write) -> Result<()> {
        self.flush(out)?;
        for f in self.files.iter().flatten() {
            let now = match &f.file {
                Some(file) => file.metadata(),
                None => std::fs::metadata(&f.path),
            };
            if Stamp::of(&now, &f.name)? != f.stamp {
                return Err(Changed {
                    path: f.name.clone(),
                    what: "its length or modification time is not what it was",
                }
                .into());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{Records, Source, write_tmp};

    #[test]
    fn lines_and_offsets_match_the_serial_reader() {
        let d = tempfile::tempdir().unwrap();
        let data: &[u8] = b"\xEF\xBB\xBF{\"a\":1}\r\n\n  \n{\"b\":2}\n{\"c\":3}\r\n{\"d\":4}";
        let p = write_tmp(d.path(), "a.jsonl", data);
        let mut want = Vec::new();
        let mut r = Records::new(vec![Source::File(p.clone())], None);
        while let Some(rec) = r.next_record().unwrap() {
            want.push((rec.lineno, rec.bytes.to_vec()));
        }
        let mut lines = FileLines::new(File::open(&p).unwrap(), Arc::from("a.jsonl"));
        let mut got = Vec::new();
        let mut lfs = Vec::new();
        while let Some(l) = lines.next_line().unwrap() {
            if crate::io::is_blank(l.bytes) {
                continue;
            }
            let off = l.offset as usize;
            assert_eq!(&data[off..off + l.bytes.len()], l.bytes);
            got.push((l.lineno, l.bytes.to_vec()));
            lfs.push(l.lf);
        }
        assert_eq!(got, want);
        assert_eq!(lfs, [false, true, false, false]);
        let crs: Vec<bool> = {
            let mut lines = FileLines::new(File::open(&p).unwrap(), Arc::from("a.jsonl"));
            let mut v = Vec::new();
            while let Some(l) = lines.next_line().unwrap() {
                v.push(l.cr);
            }
            v
        };
        assert_eq!(crs, [true, false, false, false, true, false]);
        lines.finish(p).unwrap();
    }

    #[test]
    fn a_line_longer_than_a_chunk() {
        let d = tempfile::tempdir().unwrap();
        let long = vec![b'x'; CHUNK * 2 + 5];
        let mut data = b"{}\n".to_vec();
        data.extend_from_slice(&long);
        data.extend_from_slice(b"\n{}\n");
        let p = write_tmp(d.path(), "a.jsonl", &data);
        let mut lines = FileLines::new(File::open(&p).unwrap(), Arc::from("a"));
        let mut got = Vec::new();
        while let Some(l) = lines.next_line().unwrap() {
            got.push((l.offset, l.bytes.len(), l.lf));
        }
        assert_eq!(
            got,
            [
                (0, 2, true),
                (3, long.len(), true),
                (3 + long.len() as u64 + 1, 2, true)
            ]
        );
    }

    #[test]
    fn a_file_changed_before_it_is_read_again() {
        let d = tempfile::tempdir().unwrap();
        let p = write_tmp(d.path(), "a.jsonl", b"{\"a\":1}\n{\"a\":2}\n");
        let mut lines = FileLines::new(File::open(&p).unwrap(), Arc::from("a.jsonl"));
        while lines.next_line().unwrap().is_some() {}
        let mut rr = Rereader::new(1);
        rr.add(0, lines.finish(p.clone()).unwrap());
        std::fs::write(&p, b"{\"a\":1}\n").unwrap();
        let rec = Rec {
            index: None,
            seq: 0,
            src: 0,
            lineno: 2,
            key: None,
            draw: 0,
            label: String::new(),
            body: Body::At {
                offset: 8,
                len: 7,
                lf: true,
            },
        };
        let mut out = Vec::new();
        let err = rr.write(&rec, &mut out).unwrap_err();
        assert!(err.to_string().contains("the file changed"), "{err}");
    }
}

//! The task spool: where traj-run keeps the rows it will run, so that memory does not
//! grow with their text. The task reader appends each valid row's line to an unnamed
//! file in the run directory ([`SpoolWriter`]) and a task holds only where its line
//! lies ([`Spooled`]: two numbers); a worker reads the line back when the task starts
//! ([`Spool::read`], one positioned read). The file has no name (`O_TMPFILE` where the
//! file system has it, else created and unlinked at once), so it is gone when the
//! process ends, however it ends, and a resumed run writes its own.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Where one line lies in the spool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Spooled {
    pub offset: u64,
    pub len: u64,
}

/// The spool while the task rows are read.
pub struct SpoolWriter {
    out: BufWriter<File>,
    end: u64,
}

impl SpoolWriter {
    /// An empty spool in `dir` (the run directory: it is the caller's, and on disk).
    pub fn new(dir: &Path) -> io::Result<SpoolWriter> {
        let file = tempfile::tempfile_in(dir)?;
        Ok(SpoolWriter {
            out: BufWriter::with_capacity(1 << 16, file),
            end: 0,
        })
    }

    /// Append `line`; where it lies.
    pub fn push(&mut self, line: &[u8]) -> io::Result<Spooled> {
        self.out.write_all(line)?;
        let at = Spooled {
            offset: self.end,
            len: line.len() as u64,
        };
        self.end += at.len;
        Ok(at)
    }

    /// Done writing: the spool to read from.
    pub fn finish(self) -> io::Result<Spool> {
        let file = self.out.into_inner().map_err(|e| e.into_error())?;
        Ok(Spool { file })
    }
}

/// The spool, read by the workers (positioned reads: no shared cursor, no lock).
#[derive(Debug)]
pub struct Spool {
    file: File,
}

impl Spool {
    /// The line at `at`, as it was read.
    pub fn read(&self, at: Spooled) -> io::Result<Vec<u8>> {
        let len = usize::try_from(at.len).map_err(io::Error::other)?;
        let mut buf = vec![0; len];
        self.file.read_exact_at(&mut buf, at.offset)?;
        Ok(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines come back byte for byte, in any order, empty ones too, and the spool
    /// leaves no name in its folder.
    #[test]
    fn lines_come_back_as_written_and_leave_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = SpoolWriter::new(dir.path()).unwrap();
        let lines: [&[u8]; 4] = [
            b"{\"prompt\": \"a\"}",
            b"",
            "{\"p\": \"\u{e9}\"}".as_bytes(),
            &[b'x'; 100_000],
        ];
        let at: Vec<Spooled> = lines.iter().map(|l| w.push(l).unwrap()).collect();
        let spool = w.finish().unwrap();
        for i in [3, 0, 2, 1] {
            assert_eq!(spool.read(at[i]).unwrap(), lines[i]);
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let past = Spooled {
            offset: at[3].offset + 1,
            len: at[3].len,
        };
        assert!(spool.read(past).is_err(), "a read past the end fails");
    }
}

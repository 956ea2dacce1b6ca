//! The serial line reader of the stages that take their input one line at a time
//! (traj-sample-tools, traj-run's task reader, traj-compress's sampling, traj-merge):
//! the same lines as the parallel pipelines (blank lines skipped, `--shard` and other
//! selections counted over the non-blank lines of all inputs), and one place that
//! applies the bad-line policy to what a stage made of a line ([`Tally`]).

use std::sync::Arc;

use anyhow::Result;

use super::lines::{LineReader, Raw, is_blank};
use super::policy::{OnError, Select, Summary, Verdict};
use super::rejects::Rejects;
use super::source::Source;

/// One non-blank, selected input line.
#[derive(Debug)]
pub struct Record<'a> {
    /// The name of its source (`<stdin>` or the path as given).
    pub source: &'a Arc<str>,
    /// Index of its source in the list given to [`Records::new`].
    pub source_index: usize,
    /// 1-based line number in its source.
    pub lineno: u64,
    /// 0-based number among the non-blank lines of all inputs (what `--shard` counts).
    pub index: u64,
    /// The line without its line ending.
    pub bytes: &'a [u8],
    /// A CR was cut before its LF ([`crate::io::Cut::cr`]): a reject gives it back.
    pub cr: bool,
}

impl Record<'_> {
    /// The line as a rejects file keeps it.
    pub fn raw(&self) -> Raw<'_> {
        Raw {
            bytes: self.bytes,
            cr: self.cr,
        }
    }
}

/// Reads the non-blank lines of `sources` in order, skipping those `select` leaves out.
pub struct Records {
    reader: LineReader,
    select: Option<Select>,
    buf: Vec<u8>,
    source: Arc<str>,
    lineno: u64,
    nonblank: u64,
}

impl Records {
    pub fn new(sources: Vec<Source>, select: Option<Select>) -> Records {
        Records {
            reader: LineReader::new(sources),
            select,
            buf: Vec::new(),
            source: Arc::from(""),
            lineno: 0,
            nonblank: 0,
        }
    }

    /// The next line, or `None` after the last one.
    pub fn next_record(&mut self) -> Result<Option<Record<'_>>> {
        loop {
            let Some((source, lineno)) = self.reader.read_into(&mut self.buf)? else {
                return Ok(None);
            };
            if is_blank(&self.buf) {
                continue;
            }
            let index = self.nonblank;
            self.nonblank += 1;
            if self.select.as_ref().is_some_and(|s| !s.holds(index)) {
                continue;
            }
            self.source = source;
            self.lineno = lineno;
            return Ok(Some(Record {
                source: &self.source,
                source_index: self.reader.source_index(),
                lineno,
                index,
                bytes: &self.buf,
                cr: self.reader.cut_cr(),
            }));
        }
    }

    /// Index (in the list given to [`Records::new`]) of the source of the last line.
    pub fn source_index(&self) -> usize {
        self.reader.source_index()
    }

    /// The bytes of the last line returned, taken (the next read refills a new buffer):
    /// for a stage that keeps the line, instead of copying it.
    pub fn take_line(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }

    /// Non-blank lines seen so far, selected or not.
    pub fn nonblank(&self) -> u64 {
        self.nonblank
    }
}

/// The counts, the rejects file and the `--on-error` policy of a serial stage.
pub struct Tally<'r> {
    pub summary: Summary,
    pub rejects: &'r mut Rejects,
    on_error: OnError,
    drops_are_loss: bool,
}

impl<'r> Tally<'r> {
    /// `drops_are_loss`: a line dropped on purpose without a rejects file counts as lost.
    pub fn new(on_error: OnError, drops_are_loss: bool, rejects: &'r mut Rejects) -> Tally<'r> {
        Tally {
            summary: Summary::default(),
            rejects,
            on_error,
            drops_are_loss,
        }
    }

    /// Account for what the stage made of `rec` (counted as read). A bad line under
    /// `--on-error fail` is the error returned; anything else not written goes to the
    /// rejects file or counts as lost.
    pub fn account(&mut self, rec: &Record<'_>, verdict: Verdict) -> Result<()> {
        self.summary.read += 1;
        if let Verdict::Written = verdict {
            self.summary.written += 1;
            return Ok(());
        }
        let at = (rec.source, rec.lineno, rec.raw());
        match self.summary.not_written(
            (self.on_error, self.drops_are_loss),
            self.rejects,
            at,
            &verdict,
        )? {
            Some(err) => Err(err.into()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{Shard, write_tmp};

    #[test]
    fn blank_lines_and_selection_count_like_the_pipelines() {
        let d = tempfile::tempdir().unwrap();
        let a = write_tmp(d.path(), "a.jsonl", b"{\"a\":0}\n\n{\"a\":1}\r\n");
        let b = write_tmp(d.path(), "b.jsonl", b"  \n{\"a\":2}\n{\"a\":3}");
        let shard: Shard = "1/2".parse().unwrap();
        let mut r = Records::new(
            vec![Source::File(a), Source::File(b)],
            Some(Select::from(shard)),
        );
        let mut got = Vec::new();
        while let Some(rec) = r.next_record().unwrap() {
            let name = rec.source.rsplit('/').next().unwrap().to_string();
            got.push((name, rec.lineno, rec.index, rec.bytes.to_vec()));
        }
        assert_eq!(
            got,
            vec![
                ("a.jsonl".to_string(), 3, 1, b"{\"a\":1}".to_vec()),
                ("b.jsonl".to_string(), 3, 3, b"{\"a\":3}".to_vec()),
            ]
        );
        assert_eq!(r.nonblank(), 4);
    }

    #[test]
    fn tally_applies_the_policy() {
        let d = tempfile::tempdir().unwrap();
        let a = write_tmp(d.path(), "a.jsonl", b"ok\nbad\nok\n");
        let run = |on_error| -> (Result<()>, Summary) {
            let mut rejects = Rejects::open("test", None).unwrap();
            let mut t = Tally::new(on_error, true, &mut rejects);
            let mut r = Records::new(vec![Source::File(a.clone())], None);
            let res = (|| {
                while let Some(rec) = r.next_record()? {
                    let v = if rec.bytes == b"ok" {
                        Verdict::Written
                    } else {
                        Verdict::Bad("not ok".into())
                    };
                    t.account(&rec, v)?;
                }
                Ok(())
            })();
            (res, t.summary)
        };
        let (res, s) = run(OnError::Fail);
        assert!(res.unwrap_err().to_string().ends_with("a.jsonl:2: not ok"));
        assert_eq!((s.read, s.written), (2, 1));
        let (res, s) = run(OnError::Skip);
        res.unwrap();
        assert_eq!((s.read, s.written, s.bad, s.lost), (3, 2, 1, 1));
    }
}

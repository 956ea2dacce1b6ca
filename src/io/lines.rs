//! The one line splitter: how every stage turns bytes into lines (LF, CR before LF
//! and a UTF-8 BOM on line 1 removed; a missing final newline tolerated; blank lines
//! skipped), how a line was ended ([`Cut`]: whether its bytes and one LF are the input's
//! bytes, whether a CR was cut, which a reject gives back), and the serial
//! [`LineReader`] that keeps each line's source and number.

use std::io::BufRead;
use std::sync::Arc;

use anyhow::{Context, Result};

use super::source::{Source, open_source};

/// How one raw line (as `read_until(b'\n')` or a split after a newline gives it) is
/// cut: the one rule every reader of lines applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// The line as every stage judges it: without the LF, one CR before it (or at the
    /// end of an unterminated last line), and on the first line of a source a UTF-8 BOM.
    pub line: std::ops::Range<usize>,
    /// A CR was cut after `line` (the input line is `line` and `\r`).
    pub cr: bool,
    /// `line`'s bytes and one LF are the rest of the raw line exactly (no CR was cut and
    /// the LF is there): such a line may be copied from the input as it is.
    pub lf: bool,
}

/// Cut a raw line ([`Cut`]).
pub fn cut_line(raw: &[u8], first_line: bool) -> Cut {
    let mut end = raw.len();
    let has_lf = end > 0 && raw[end - 1] == b'\n';
    if has_lf {
        end -= 1;
    }
    let cr = end > 0 && raw[end - 1] == b'\r';
    if cr {
        end -= 1;
    }
    let start = if first_line && raw[..end].starts_with(b"\xEF\xBB\xBF") {
        3
    } else {
        0
    };
    Cut {
        line: start..end,
        cr,
        lf: has_lf && !cr,
    }
}

/// The part of a raw line that is the line ([`Cut::line`]).
pub fn line_range(raw: &[u8], first_line: bool) -> std::ops::Range<usize> {
    cut_line(raw, first_line).line
}

/// An input line as a rejects file keeps it: its bytes as the stage judged them and
/// whether a CR was cut before its LF, so that the reject gives back the exact bytes
/// that stood before the LF (a BOM on line 1 is the file's, not the line's).
#[derive(Debug, Clone, Copy)]
pub struct Raw<'a> {
    pub bytes: &'a [u8],
    pub cr: bool,
}

impl<'a> Raw<'a> {
    /// A line that had no CR.
    pub fn plain(bytes: &'a [u8]) -> Raw<'a> {
        Raw { bytes, cr: false }
    }
}

/// [`line_range`] as a slice.
pub fn trim_line(raw: &[u8], first_line: bool) -> &[u8] {
    &raw[line_range(raw, first_line)]
}

/// Reads lines from a sequence of sources, keeping the name and line number of each.
pub struct LineReader {
    sources: Vec<Source>,
    next: usize,
    cur: Option<(Arc<str>, Box<dyn BufRead + Send>)>,
    lineno: u64,
    /// The last line read had a CR cut before its LF.
    cr: bool,
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
            cr: false,
        }
    }

    /// Whether a CR was cut before the LF of the last line read ([`Cut::cr`]).
    pub fn cut_cr(&self) -> bool {
        self.cr
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
            let keep = cut_line(buf, self.lineno == 1);
            self.cr = keep.cr;
            buf.truncate(keep.line.end);
            buf.drain(..keep.line.start);
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

/// True when a line holds only JSON white space (space, tab, CR): such lines are
/// skipped by every stage. Any other byte (a form feed, a vertical tab) makes the line
/// a line to judge, which every stage refuses as not JSON.
pub fn is_blank(line: &[u8]) -> bool {
    line.iter()
        .all(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::write_tmp;
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
    fn cuts_say_how_a_line_ended() {
        fn cut(raw: &[u8], first: bool) -> (&[u8], bool, bool) {
            let c = cut_line(raw, first);
            (&raw[c.line.clone()], c.cr, c.lf)
        }
        assert_eq!(cut(b"ab\n", false), (&b"ab"[..], false, true));
        assert_eq!(cut(b"ab\r\n", false), (&b"ab"[..], true, false));
        assert_eq!(cut(b"ab", false), (&b"ab"[..], false, false));
        assert_eq!(cut(b"ab\r", false), (&b"ab"[..], true, false));
        assert_eq!(cut(b"ab\r\r\n", false), (&b"ab\r"[..], true, false));
        assert_eq!(cut(b"\xEF\xBB\xBFab\n", true), (&b"ab"[..], false, true));
        assert_eq!(cut(b"\xEF\xBB\xBFab\n", false).0, b"\xEF\xBB\xBFab");
        assert!(is_blank(b" \t\r") && !is_blank(b"\x0c") && !is_blank(b"\x0b"));
    }
}

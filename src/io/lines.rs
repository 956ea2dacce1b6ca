//! The one line splitter: how every stage turns bytes into lines (LF, CR before LF
//! and a UTF-8 BOM on line 1 removed; a missing final newline tolerated; blank lines
//! skipped), and the serial [`LineReader`] that keeps each line's source and number.

use std::io::BufRead;
use std::sync::Arc;

use anyhow::{Context, Result};

use super::source::{Source, open_source};

/// The part of a raw line (as `read_until(b'\n')` or a split at a newline gives it)
/// that is the line: without the LF, a CR before it, and on the first line of a source
/// a UTF-8 BOM.
pub fn line_range(raw: &[u8], first_line: bool) -> std::ops::Range<usize> {
    let mut end = raw.len();
    if end > 0 && raw[end - 1] == b'\n' {
        end -= 1;
    }
    if end > 0 && raw[end - 1] == b'\r' {
        end -= 1;
    }
    let start = if first_line && raw[..end].starts_with(b"\xEF\xBB\xBF") {
        3
    } else {
        0
    };
    start..end
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
            let keep = line_range(buf, self.lineno == 1);
            buf.truncate(keep.end);
            buf.drain(..keep.start);
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
}

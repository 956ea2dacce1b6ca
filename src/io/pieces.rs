//! A reader over a source that makes its bytes a piece at a time (the elements of a
//! JSON array, the rows of a Parquet batch): the one `Read` + `BufRead` both use.

use std::io::{self, BufRead, Read};

/// A source of output pieces.
pub(crate) trait Pieces {
    /// Append the next piece to `out` (given empty); `false` when there is no more.
    fn next_piece(&mut self, out: &mut Vec<u8>) -> io::Result<bool>;
}

/// The pieces of `P` as a buffered reader.
pub(crate) struct PieceReader<P> {
    inner: P,
    out: Vec<u8>,
    pos: usize,
}

impl<P: Pieces> PieceReader<P> {
    pub(crate) fn new(inner: P) -> PieceReader<P> {
        PieceReader {
            inner,
            out: Vec::new(),
            pos: 0,
        }
    }
}

impl<P: Pieces> Read for PieceReader<P> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let avail = self.fill_buf()?;
        let n = avail.len().min(buf.len());
        buf[..n].copy_from_slice(&avail[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<P: Pieces> BufRead for PieceReader<P> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        while self.pos >= self.out.len() {
            self.out.clear();
            self.pos = 0;
            if !self.inner.next_piece(&mut self.out)? {
                return Ok(&[]);
            }
        }
        Ok(&self.out[self.pos..])
    }

    fn consume(&mut self, n: usize) {
        self.pos += n;
    }
}

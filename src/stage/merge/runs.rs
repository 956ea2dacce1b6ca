//! A row on its way through traj-merge's sort ([`Rec`]: its sort key, dedup key, where
//! it was read, and its bytes or where to read them again), the sorted runs spilled to
//! disk, and their k-way merge.

use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The bytes of a row, or where they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Body {
    /// The line itself: a source that can be read once only (stdin, gzip, zstd,
    /// Parquet, a JSON array).
    Bytes(Vec<u8>),
    /// The line's place in its source, a plain file that is read again when the row
    /// is written ([`super::reread`]): `len` bytes from `offset`; `lf`: the very next
    /// byte is the `\n` that ends it (no CR, not the last line without a newline).
    At { offset: u64, len: u64, lf: bool },
}

/// One row on its way through the sort.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Rec {
    /// `prompt_index` when it is an integer.
    pub index: Option<i128>,
    /// Position in the input (all sources in order).
    pub seq: u64,
    pub src: u32,
    pub lineno: u64,
    /// Dedup key; `None`: the row has no key and is never a duplicate.
    pub key: Option<u128>,
    /// The row's `--sample` hash (0 without `--sample`).
    pub draw: u64,
    /// How the key reads in messages (`prompt_index 5`).
    pub label: String,
    pub body: Body,
}

impl Rec {
    pub fn order(&self) -> (bool, i128, u64) {
        (self.index.is_none(), self.index.unwrap_or(0), self.seq)
    }

    /// What the row costs the buffer.
    pub fn cost(&self) -> usize {
        let bytes = match &self.body {
            Body::Bytes(b) => b.len(),
            Body::At { .. } => 24,
        };
        bytes + self.label.len() + 72
    }

    fn write_to(&self, w: &mut impl Write) -> std::io::Result<()> {
        let (has, idx) = (self.index.is_some() as u8, self.index.unwrap_or(0));
        w.write_all(&[has])?;
        w.write_all(&idx.to_le_bytes())?;
        w.write_all(&self.seq.to_le_bytes())?;
        w.write_all(&self.src.to_le_bytes())?;
        w.write_all(&self.lineno.to_le_bytes())?;
        w.write_all(&[self.key.is_some() as u8])?;
        w.write_all(&self.key.unwrap_or(0).to_le_bytes())?;
        w.write_all(&self.draw.to_le_bytes())?;
        w.write_all(&(self.label.len() as u32).to_le_bytes())?;
        w.write_all(self.label.as_bytes())?;
        match &self.body {
            Body::Bytes(line) => {
                w.write_all(&[0])?;
                w.write_all(&(line.len() as u64).to_le_bytes())?;
                w.write_all(line)
            }
            Body::At { offset, len, lf } => {
                w.write_all(&[1 + *lf as u8])?;
                w.write_all(&offset.to_le_bytes())?;
                w.write_all(&len.to_le_bytes())
            }
        }
    }

    /// Read one record; `None` at the end of the run.
    fn read_from(r: &mut impl Read) -> Result<Option<Rec>> {
        let mut has = [0u8; 1];
        match r.read_exact(&mut has) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        let mut b1 = [0u8; 1];
        let mut b4 = [0u8; 4];
        let mut b16 = [0u8; 16];
        let u64_of = |r: &mut dyn Read| -> std::io::Result<u64> {
            let mut b8 = [0u8; 8];
            r.read_exact(&mut b8)?;
            Ok(u64::from_le_bytes(b8))
        };
        r.read_exact(&mut b16)?;
        let idx = i128::from_le_bytes(b16);
        let seq = u64_of(r)?;
        r.read_exact(&mut b4)?;
        let src = u32::from_le_bytes(b4);
        let lineno = u64_of(r)?;
        r.read_exact(&mut b1)?;
        r.read_exact(&mut b16)?;
        let key = (b1[0] == 1).then(|| u128::from_le_bytes(b16));
        let draw = u64_of(r)?;
        r.read_exact(&mut b4)?;
        let mut label = vec![0u8; u32::from_le_bytes(b4) as usize];
        r.read_exact(&mut label)?;
        r.read_exact(&mut b1)?;
        let body = match b1[0] {
            0 => {
                let mut line = vec![0u8; u64_of(r)? as usize];
                r.read_exact(&mut line)?;
                Body::Bytes(line)
            }
            t @ (1 | 2) => Body::At {
                offset: u64_of(r)?,
                len: u64_of(r)?,
                lf: t == 2,
            },
            t => anyhow::bail!("corrupt spill file (body tag {t})"),
        };
        Ok(Some(Rec {
            index: (has[0] == 1).then_some(idx),
            seq,
            src,
            lineno,
            key,
            draw,
            label: String::from_utf8(label).context("corrupt spill file")?,
            body,
        }))
    }
}

/// Sort the buffer and write it as one run; returns its path.
pub(super) fn spill(buf: &mut Vec<Rec>, dir: &Path, id: usize) -> Result<PathBuf> {
    buf.sort_by_key(Rec::order);
    let path = dir.join(format!("run-{id}"));
    let mut w = BufWriter::with_capacity(
        crate::io::BUF_SIZE,
        File::create(&path).with_context(|| format!("cannot create {}", path.display()))?,
    );
    for r in buf.drain(..) {
        r.write_to(&mut w)?;
    }
    w.flush()
        .with_context(|| format!("cannot write spill file {}", path.display()))?;
    Ok(path)
}

/// Merge runs `FAN_IN` at a time into new runs until at most `fan_in` are left.
pub(super) fn reduce(runs: &mut Vec<PathBuf>, dir: &Path, fan_in: usize) -> Result<()> {
    let mut next_id = runs.len();
    while runs.len() > fan_in {
        let group: Vec<PathBuf> = runs.drain(..fan_in).collect();
        let path = dir.join(format!("run-{next_id}"));
        next_id += 1;
        let mut w = BufWriter::new(File::create(&path)?);
        merge_runs(&group, &mut |r| Ok(r.write_to(&mut w)?))?;
        w.flush()?;
        for g in group {
            std::fs::remove_file(g)?;
        }
        runs.push(path);
    }
    Ok(())
}

/// K-way merge of sorted runs, in order, into `sink`.
pub(super) fn merge_runs(runs: &[PathBuf], sink: &mut dyn FnMut(Rec) -> Result<()>) -> Result<()> {
    struct Head {
        rec: Rec,
        run: usize,
    }
    impl PartialEq for Head {
        fn eq(&self, o: &Self) -> bool {
            self.rec.order() == o.rec.order()
        }
    }
    impl Eq for Head {}
    impl PartialOrd for Head {
        fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
            Some(self.cmp(o))
        }
    }
    impl Ord for Head {
        // Reversed: BinaryHeap is a max-heap.
        fn cmp(&self, o: &Self) -> std::cmp::Ordering {
            o.rec.order().cmp(&self.rec.order())
        }
    }
    let mut readers = Vec::with_capacity(runs.len());
    let mut heap = BinaryHeap::with_capacity(runs.len());
    for (i, p) in runs.iter().enumerate() {
        let mut r = BufReader::with_capacity(
            64 * 1024,
            File::open(p).with_context(|| format!("cannot open {}", p.display()))?,
        );
        if let Some(rec) = Rec::read_from(&mut r)? {
            heap.push(Head { rec, run: i });
        }
        readers.push(r);
    }
    while let Some(Head { rec, run }) = heap.pop() {
        if let Some(next) = Rec::read_from(&mut readers[run])? {
            heap.push(Head { rec: next, run });
        }
        sink(rec)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_a_run() {
        let d = tempfile::tempdir().unwrap();
        let rec = |seq: u64, body: Body| Rec {
            index: (seq != 2).then_some(7 - seq as i128),
            seq,
            src: 1,
            lineno: seq + 1,
            key: (seq != 0).then_some(u128::MAX - seq as u128),
            draw: seq * 11,
            label: format!("prompt_index {seq}"),
            body,
        };
        let mut buf = vec![
            rec(0, Body::Bytes(b"{\"a\":1}".to_vec())),
            rec(
                1,
                Body::At {
                    offset: 1 << 40,
                    len: 5,
                    lf: true,
                },
            ),
            rec(
                2,
                Body::At {
                    offset: 3,
                    len: 0,
                    lf: false,
                },
            ),
        ];
        let want = {
            let mut w = buf.clone();
            w.sort_by_key(Rec::order);
            w
        };
        let path = spill(&mut buf, d.path(), 0).unwrap();
        let mut got = Vec::new();
        merge_runs(&[path], &mut |r| {
            got.push(r);
            Ok(())
        })
        .unwrap();
        assert_eq!(got, want);
    }
}

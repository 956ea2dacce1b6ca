//! The ordered parallel reading of a dataset's lines: one reader takes the lines in
//! order ([`crate::io::Records`], so every source the other stages read: gzip, zstd,
//! Parquet, JSON arrays, stdin), cuts them into batches, `jobs` workers parse each line
//! and read its facts ([`facts::read_line`], where the tokens are counted with the one
//! shared tokenizer), and the calling thread gets the lines back in input order, one at a
//! time, to fold into the overview and the sample.
//!
//! Memory is bounded as in [`crate::io::process`]: the reader stops `2 x jobs + 2`
//! batches (each at most [`BATCH_LINES`] lines or [`BATCH_BYTES`] of input) ahead of
//! the caller, however long one batch takes. A line's bytes are kept only when it is
//! bad (for the rejects file, exactly as read). The caller's fold sees the same lines
//! in the same order whatever `jobs` is, so the page is byte-identical.
//!
//! A worker's panic (a bug) stops the scan and is raised again once every thread is
//! done; an error of the caller's fold (a bad line under `--on-error fail`) stops the
//! reader and the workers, which are then waited for.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Result;

use super::facts::{self, Line};
use crate::format::tokens::Tokenizer;
use crate::io::{Panic, Record, Records, Source, in_order, parse_object};

/// Lines per batch handed to a worker (a row's tokens cost far more than the hand-off).
pub const BATCH_LINES: usize = 256;
/// Input bytes per batch (a batch holds at least one line, however long).
pub const BATCH_BYTES: usize = 256 << 10;

/// One input line and what it tells.
pub struct Scanned {
    pub source: Arc<str>,
    pub source_index: usize,
    pub lineno: u64,
    pub index: u64,
    pub cr: bool,
    /// The line's bytes when it is bad (`line` is `Err`), else empty.
    pub bytes: Vec<u8>,
    pub line: Result<Line, String>,
}

impl Scanned {
    /// The line as [`crate::io::Tally::account`] takes it (its bytes only if it is bad).
    pub fn record(&self) -> Record<'_> {
        Record {
            source: &self.source,
            source_index: self.source_index,
            lineno: self.lineno,
            index: self.index,
            bytes: &self.bytes,
            cr: self.cr,
        }
    }
}

struct Batch {
    seq: u64,
    lines: Vec<Scanned>,
}

/// Worker threads: `jobs`, or one per core when it is 0.
pub fn workers(jobs: usize) -> usize {
    match jobs {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
}

/// Read every line of `sources` with `jobs` workers (0: one per core) and hand each to
/// `fold` in input order. Stops at the first error of `fold` or of the reading.
pub fn scan(
    sources: Vec<Source>,
    tk: &dyn Tokenizer,
    jobs: usize,
    mut fold: impl FnMut(Scanned) -> Result<()>,
) -> Result<()> {
    let jobs = workers(jobs);
    let window = jobs * 2 + 2;
    let (work_tx, work_rx) = crossbeam_channel::bounded::<Batch>(window);
    let (done_tx, done_rx) = crossbeam_channel::bounded::<std::thread::Result<Batch>>(window);
    // One slot per batch between reader and caller: the reader fills it, the caller
    // empties it once the batch is folded.
    let (slot_tx, slot_rx) = crossbeam_channel::bounded::<()>(window);
    let stop = AtomicBool::new(false);
    let mut panicked: Option<Panic> = None;
    std::thread::scope(|s| -> Result<()> {
        let stop = &stop;
        let reader = s.spawn(move || -> Result<()> {
            let mut records = Records::new(sources, None);
            let mut seq = 0u64;
            let mut lines = Vec::new();
            let mut bytes = 0usize;
            let send = |lines: Vec<Scanned>, seq: &mut u64| -> bool {
                let b = Batch { seq: *seq, lines };
                *seq += 1;
                !stop.load(Ordering::Relaxed) && slot_tx.send(()).is_ok() && work_tx.send(b).is_ok()
            };
            while let Some(rec) = records.next_record()? {
                bytes += rec.bytes.len();
                lines.push(Scanned {
                    source: rec.source.clone(),
                    source_index: rec.source_index,
                    lineno: rec.lineno,
                    index: rec.index,
                    cr: rec.cr,
                    bytes: rec.bytes.to_vec(),
                    line: Err(String::new()),
                });
                if lines.len() >= BATCH_LINES || bytes >= BATCH_BYTES {
                    bytes = 0;
                    if !send(std::mem::take(&mut lines), &mut seq) {
                        return Ok(());
                    }
                }
            }
            if !lines.is_empty() {
                send(lines, &mut seq);
            }
            Ok(())
        });
        for _ in 0..jobs {
            let (work_rx, done_tx) = (work_rx.clone(), done_tx.clone());
            s.spawn(move || {
                for mut batch in work_rx.iter() {
                    if stop.load(Ordering::Relaxed) {
                        continue; // the caller has stopped: drain without working
                    }
                    let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        for l in &mut batch.lines {
                            l.line = parse_object(&l.bytes)
                                .and_then(|o| facts::read_line(&l.bytes, o, tk));
                            if l.line.is_ok() {
                                l.bytes = Vec::new();
                            }
                        }
                        batch
                    }));
                    if done_tx.send(done).is_err() {
                        return;
                    }
                }
            });
        }
        drop((work_rx, done_tx));
        let result = in_order(
            &done_rx,
            |b: &Batch| b.seq,
            &mut panicked,
            |b| {
                for l in b.lines {
                    fold(l)?;
                }
                let _ = slot_rx.try_recv();
                Ok(())
            },
        );
        // Stop everything still running (an error or a panic), then wait for it.
        stop.store(true, Ordering::Relaxed);
        drop((slot_rx, done_rx));
        let read_result = match reader.join() {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        };
        if let Some(p) = panicked.take() {
            std::panic::resume_unwind(p);
        }
        result?;
        read_result
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::write_tmp;

    /// Every line once, in input order, whatever the number of workers; bad lines keep
    /// their bytes, good ones do not.
    #[test]
    fn lines_come_back_in_order_with_any_workers() {
        let d = tempfile::tempdir().unwrap();
        let mut data = String::new();
        for i in 0..2000 {
            if i % 97 == 5 {
                data.push_str(&format!("not json {i}\n"));
            } else {
                let pad = "x".repeat(i % 300);
                data.push_str(&format!(
                    "{{\"id\":{i},\"messages\":[{{\"role\":\"user\",\"content\":\"{pad}\"}}]}}\n"
                ));
            }
            if i % 50 == 0 {
                data.push('\n'); // blank lines are skipped, as everywhere
            }
        }
        let p = write_tmp(d.path(), "rows.jsonl", data.as_bytes());
        let tk = crate::format::tokens::load("chars4").unwrap();
        let run = |jobs| {
            let mut got = Vec::new();
            scan(vec![Source::File(p.clone())], tk.as_ref(), jobs, |l| {
                let what = match &l.line {
                    Ok(Line::Row(r)) => format!("row {}", r.facts.tokens),
                    Ok(_) => "other".to_string(),
                    Err(e) => format!("bad {e} {}", String::from_utf8_lossy(&l.bytes)),
                };
                got.push((l.lineno, l.index, what));
                Ok(())
            })
            .unwrap();
            got
        };
        let one = run(1);
        assert_eq!(one.len(), 2000);
        assert!(one.windows(2).all(|w| w[0].1 + 1 == w[1].1));
        assert!(one[5].2.starts_with("bad ") && one[5].2.ends_with("not json 5"));
        assert_eq!(one[6].2, "row 2"); // 6 x's, one token per 4 characters
        assert_eq!(one, run(3));
    }

    /// An error of the fold stops the scan (it returns, no thread is left waiting).
    #[test]
    fn an_error_of_the_fold_stops_the_scan() {
        let d = tempfile::tempdir().unwrap();
        let data: String = (0..5000).map(|i| format!("{{\"i\":{i}}}\n")).collect();
        let p = write_tmp(d.path(), "rows.jsonl", data.as_bytes());
        let tk = crate::format::tokens::load("chars4").unwrap();
        let mut n = 0;
        let e = scan(vec![Source::File(p)], tk.as_ref(), 2, |_| {
            n += 1;
            if n == 300 {
                anyhow::bail!("stop here");
            }
            Ok(())
        })
        .unwrap_err();
        assert_eq!(e.to_string(), "stop here");
        assert_eq!(n, 300);
    }
}

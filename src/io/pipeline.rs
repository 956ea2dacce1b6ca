//! The ordered parallel pipeline of the stages that rewrite lines: one reader cuts the
//! input into batches, N workers turn each line into output, one writer puts the
//! batches back in input order and accounts for every line not written.
//!
//! Buffers go round: the writer hands each batch's input and output buffers back (the
//! [`Recycle`] channels), so after the first few batches no batch allocates, grows or
//! faults in fresh pages, however long its rows.

use std::io::{BufRead, Write};
use std::sync::Arc;

use anyhow::{Context, Result};

use super::lines::{Raw, cut_line, is_blank};
use super::policy::{OnError, Select, Summary, Verdict};
use super::rejects::Rejects;
use super::source::{Source, open_source};

/// Settings of the ordered parallel pipeline.
#[derive(Debug, Clone)]
pub struct PipeConfig {
    pub stage: &'static str,
    pub on_error: OnError,
    /// Worker threads; 0 = all cores.
    pub jobs: usize,
    /// Lines dropped on purpose count as lost when there is no rejects file
    /// (a filter keeps its drops; a normalizer has none).
    pub drops_are_loss: bool,
    /// Process only these non-blank input lines (`--shard`, a sample).
    pub select: Option<Select>,
    /// Lines per batch handed to a worker; 0: up to 4096 lines or 1 MiB (CPU work).
    /// 1 for work that waits (LLM summaries): each row is its own job, so `jobs` rows
    /// wait at once.
    pub batch_lines: usize,
}

impl PipeConfig {
    /// What happens to lines not written: the `--on-error` policy, and whether a drop
    /// without a rejects file is lost (see `Summary::not_written`).
    pub fn policy(&self) -> (OnError, bool) {
        (self.on_error, self.drops_are_loss)
    }

    /// Worker threads: `jobs`, or one per core when it is 0.
    pub fn workers(&self) -> usize {
        match self.jobs {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
    }
}

const BATCH_BYTES: usize = 1 << 20;
const BATCH_LINES: usize = 4096;

struct Batch {
    seq: u64,
    source: Arc<str>,
    first_lineno: Vec<u64>,
    data: Vec<u8>,
    /// end offset of each line in `data`.
    ends: Vec<usize>,
    /// Whether a CR was cut before each line's LF (a reject gives it back).
    crs: Vec<bool>,
}

struct Done {
    out: Vec<u8>,
    /// per line: index, verdict (only non-`Written` verdicts are kept).
    verdicts: Vec<(usize, Verdict)>,
    /// end offset in `out` of each line's output.
    out_ends: Vec<usize>,
    written: u64,
    batch: Batch,
}

/// Run `f` over every non-blank line of `sources`, in parallel, writing the output in
/// input order to `out`, and dropped or bad lines to `rejects`.
///
/// `f` appends its output (whole lines, each ending in `\n`) to the buffer it is given.
/// Memory stays bounded: the reader stops `4 x jobs + 4` batches ahead of the writer,
/// however long one batch takes (a few 1 MiB batches per worker).
pub fn process<F>(
    cfg: &PipeConfig,
    sources: Vec<Source>,
    out: &mut dyn Write,
    rejects: &mut Rejects,
    f: F,
) -> Result<Summary>
where
    F: Fn(&[u8], &mut Vec<u8>) -> Verdict + Sync,
{
    let jobs = cfg.workers();
    let (work_tx, work_rx) = crossbeam_channel::bounded::<Batch>(jobs * 2);
    let (done_tx, done_rx) = crossbeam_channel::bounded::<std::thread::Result<Done>>(jobs * 2);
    let (recycle_tx, recycle_rx) = crossbeam_channel::bounded::<Vec<u8>>(jobs * 4 + 4);
    let (out_tx, out_rx) = crossbeam_channel::bounded::<Vec<u8>>(jobs * 4 + 4);
    // One slot per batch between reader and writer: the reader fills it, the writer
    // empties it once the batch is written.
    let (slot_tx, slot_rx) = crossbeam_channel::bounded::<()>(jobs * 4 + 4);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut summary = Summary::default();
    let mut panicked = None;
    let reading = Reading {
        select: cfg.select.clone(),
        batch_lines: if cfg.batch_lines == 0 {
            BATCH_LINES
        } else {
            cfg.batch_lines
        },
        work_tx,
        slot_tx,
        recycle_rx,
    };

    std::thread::scope(|s| -> Result<()> {
        let stop_ref = &stop;
        let reader = s.spawn(move || read_batches(sources, reading, stop_ref));
        for _ in 0..jobs {
            let work_rx = work_rx.clone();
            let done_tx = done_tx.clone();
            let out_rx = out_rx.clone();
            let f = &f;
            s.spawn(move || {
                for batch in work_rx.iter() {
                    if stop_ref.load(std::sync::atomic::Ordering::Relaxed) {
                        continue; // the writer has failed: drain without working
                    }
                    // A panic in `f` (a bug) goes to the writer, which stops the
                    // pipeline; the panic is raised again once every thread is done.
                    let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        work_batch(batch, out_rx.try_recv().unwrap_or_default(), f)
                    }));
                    if done_tx.send(done).is_err() {
                        return;
                    }
                }
            });
        }
        drop(work_rx);
        drop(done_tx);
        drop(out_rx);

        let writing = Writing {
            done_rx: &done_rx,
            slot_rx: &slot_rx,
            recycle: Recycle {
                data: &recycle_tx,
                out: &out_tx,
            },
            panicked: &mut panicked,
        };
        let result = write_in_order(cfg, writing, out, rejects, &mut summary);
        if result.is_err() {
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        drop(slot_rx);
        drop(done_rx);
        join_reader(result, reader, &mut panicked)
    })?;
    Ok(summary)
}

/// The end of an ordered pipeline, once the writer is done and the channels the reader
/// waits on are dropped: wait for the reader, re-raise a worker's panic, then the
/// writer's error before the reader's.
pub(crate) fn join_reader(
    written: Result<()>,
    reader: std::thread::ScopedJoinHandle<'_, Result<()>>,
    panicked: &mut Option<Panic>,
) -> Result<()> {
    let read = reader.join().expect("reader thread panicked");
    if let Some(payload) = panicked.take() {
        std::panic::resume_unwind(payload);
    }
    written?;
    read
}

/// Run `f` over the lines of a batch, writing into `out` (a recycled buffer, or a new
/// one), sized once from the batch: rewritten rows are about as long as the input.
fn work_batch<F>(batch: Batch, mut out: Vec<u8>, f: &F) -> Done
where
    F: Fn(&[u8], &mut Vec<u8>) -> Verdict,
{
    out.clear();
    out.reserve(batch.data.len() + batch.data.len() / 4);
    let mut verdicts = Vec::new();
    let mut written = 0;
    let mut out_ends = Vec::with_capacity(batch.ends.len());
    let mut start = 0;
    for (i, &end) in batch.ends.iter().enumerate() {
        let line = &batch.data[start..end];
        start = end;
        match f(line, &mut out) {
            Verdict::Written => written += 1,
            v => verdicts.push((i, v)),
        }
        out_ends.push(out.len());
    }
    Done {
        out,
        verdicts,
        out_ends,
        written,
        batch,
    }
}

/// The reader thread's ends of the pipeline.
struct Reading {
    select: Option<Select>,
    batch_lines: usize,
    work_tx: crossbeam_channel::Sender<Batch>,
    slot_tx: crossbeam_channel::Sender<()>,
    recycle_rx: crossbeam_channel::Receiver<Vec<u8>>,
}

fn read_batches(
    sources: Vec<Source>,
    rd: Reading,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<()> {
    let Reading {
        select,
        batch_lines,
        work_tx,
        slot_tx,
        recycle_rx,
    } = rd;
    let mut seq = 0;
    let mut nonblank = 0u64;
    for src in sources {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(());
        }
        let name: Arc<str> = Arc::from(src.name());
        let mut r = open_source(&src)?;
        let mut lineno = 0u64;
        loop {
            let mut data = recycle_rx.try_recv().unwrap_or_default();
            data.clear();
            // One batch and a typical long row: a buffer is sized once, not grown.
            data.reserve(BATCH_BYTES + BATCH_BYTES / 2);
            let mut ends = Vec::new();
            let mut first_lineno = Vec::new();
            let mut crs = Vec::new();
            let mut eof = false;
            while data.len() < BATCH_BYTES && ends.len() < batch_lines {
                // Each line is read straight into the batch, then cut to the line.
                let at = data.len();
                let n = r
                    .read_until(b'\n', &mut data)
                    .with_context(|| format!("{name}: read error after line {lineno}"))?;
                if n == 0 {
                    eof = true;
                    break;
                }
                lineno += 1;
                let cut = cut_line(&data[at..], lineno == 1);
                let (start, end) = (at + cut.line.start, at + cut.line.end);
                if is_blank(&data[start..end]) {
                    data.truncate(at);
                    continue;
                }
                nonblank += 1;
                if select.as_ref().is_some_and(|s| !s.holds(nonblank - 1)) {
                    data.truncate(at);
                    continue;
                }
                if start > at {
                    data.copy_within(start..end, at); // a BOM before line 1
                }
                data.truncate(at + (end - start));
                ends.push(data.len());
                first_lineno.push(lineno);
                crs.push(cut.cr);
            }
            if !ends.is_empty() {
                let b = Batch {
                    seq,
                    source: name.clone(),
                    first_lineno,
                    data,
                    ends,
                    crs,
                };
                seq += 1;
                if stop.load(std::sync::atomic::Ordering::Relaxed)
                    || slot_tx.send(()).is_err()
                    || work_tx.send(b).is_err()
                {
                    return Ok(());
                }
            }
            if eof {
                break;
            }
        }
    }
    Ok(())
}

/// A worker's panic, kept to be raised again once the pipeline has stopped.
pub(crate) type Panic = Box<dyn std::any::Any + Send>;

/// Receive the workers' results and hand them to `f` in sequence order (`seq` numbers
/// them from 0). A worker's panic stops it: kept in `panicked`, returned as an error.
pub(crate) fn in_order<T>(
    rx: &crossbeam_channel::Receiver<std::thread::Result<T>>,
    seq: impl Fn(&T) -> u64,
    panicked: &mut Option<Panic>,
    mut f: impl FnMut(T) -> Result<()>,
) -> Result<()> {
    let mut pending = std::collections::BTreeMap::new();
    let mut next = 0u64;
    for done in rx.iter() {
        let done = match done {
            Ok(d) => d,
            Err(payload) => {
                *panicked = Some(payload);
                anyhow::bail!("a worker thread panicked");
            }
        };
        pending.insert(seq(&done), done);
        while let Some(d) = pending.remove(&next) {
            next += 1;
            f(d)?;
        }
    }
    Ok(())
}

/// Where the writer gives back a written batch's buffers: its input to the reader, its
/// output to the workers.
struct Recycle<'a> {
    data: &'a crossbeam_channel::Sender<Vec<u8>>,
    out: &'a crossbeam_channel::Sender<Vec<u8>>,
}

/// The writer's ends of the pipeline.
struct Writing<'a> {
    done_rx: &'a crossbeam_channel::Receiver<std::thread::Result<Done>>,
    slot_rx: &'a crossbeam_channel::Receiver<()>,
    recycle: Recycle<'a>,
    /// A worker's panic, raised again once the pipeline has stopped.
    panicked: &'a mut Option<Panic>,
}

fn write_in_order(
    cfg: &PipeConfig,
    w: Writing<'_>,
    out: &mut dyn Write,
    rejects: &mut Rejects,
    summary: &mut Summary,
) -> Result<()> {
    in_order(
        w.done_rx,
        |d: &Done| d.batch.seq,
        w.panicked,
        |d| {
            let Done {
                out: bytes,
                verdicts,
                out_ends,
                written,
                batch,
            } = d;
            summary.read += batch.ends.len() as u64;
            for (i, v) in verdicts {
                let start = if i == 0 { 0 } else { batch.ends[i - 1] };
                let line = Raw {
                    bytes: &batch.data[start..batch.ends[i]],
                    cr: batch.crs[i],
                };
                let at = (&batch.source, batch.first_lineno[i], line);
                if let Some(err) = summary.not_written(cfg.policy(), rejects, at, &v)? {
                    // Everything before the bad line is written; nothing after.
                    let before = if i == 0 { 0 } else { out_ends[i - 1] };
                    out.write_all(&bytes[..before])?;
                    return Err(err.into());
                }
            }
            summary.written += written;
            out.write_all(&bytes)?;
            let _ = w.slot_rx.try_recv();
            let _ = w.recycle.data.try_send(batch.data);
            let _ = w.recycle.out.try_send(bytes);
            Ok(())
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{Shard, parse_object, write_tmp};
    use serde_json::Value;
    use std::path::Path;
    fn cfg(on_error: OnError) -> PipeConfig {
        crate::io::test_pipe(on_error, 3, true)
    }

    /// Each row its own batch, `jobs` workers, `fail` on bad lines.
    fn one_line_batches(jobs: usize) -> PipeConfig {
        PipeConfig {
            jobs,
            batch_lines: 1,
            ..cfg(OnError::Fail)
        }
    }

    /// Run `process` over one file without a rejects file; its output and summary.
    fn run_file<F>(c: &PipeConfig, p: &Path, f: F) -> Result<(Vec<u8>, Summary)>
    where
        F: Fn(&[u8], &mut Vec<u8>) -> Verdict + Sync,
    {
        run_file_to(c, p, None, f)
    }

    /// [`run_file`] with its rejects written to `rejects` (finished) when given.
    fn run_file_to<F>(
        c: &PipeConfig,
        p: &Path,
        rejects: Option<&Path>,
        f: F,
    ) -> Result<(Vec<u8>, Summary)>
    where
        F: Fn(&[u8], &mut Vec<u8>) -> Verdict + Sync,
    {
        let mut out = Vec::new();
        let mut rej = Rejects::open("test", rejects)?;
        let s = process(
            c,
            vec![Source::File(p.to_path_buf())],
            &mut out,
            &mut rej,
            f,
        )?;
        rej.finish()?;
        Ok((out, s))
    }

    fn echo_or_bad(line: &[u8], out: &mut Vec<u8>) -> Verdict {
        match parse_object(line) {
            Ok(_) => {
                out.extend_from_slice(line);
                out.push(b'\n');
                Verdict::Written
            }
            Err(e) => Verdict::Bad(e),
        }
    }

    #[test]
    fn process_keeps_order_across_batches() {
        let d = tempfile::tempdir().unwrap();
        let mut data = Vec::new();
        for i in 0..20_000 {
            writeln!(data, "{{\"i\":{i},\"pad\":\"{}\"}}", "x".repeat(i % 200)).unwrap();
        }
        let p = write_tmp(d.path(), "big.jsonl", &data);
        let mut out = Vec::new();
        let mut rej = Rejects::open("test", None).unwrap();
        let s = process(
            &cfg(OnError::Fail),
            vec![Source::File(p)],
            &mut out,
            &mut rej,
            echo_or_bad,
        )
        .unwrap();
        assert_eq!(out, data);
        assert_eq!((s.read, s.written, s.lost), (20_000, 20_000, 0));
    }

    /// One-line batches run `jobs` rows at once (LLM summaries wait in parallel), and a
    /// row that never finishes holds the reader at most `4 x jobs + 4` batches ahead.
    #[test]
    fn one_line_batches_run_together_and_the_window_holds() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::time::{Duration, Instant};
        let d = tempfile::tempdir().unwrap();
        let data: String = (0..200).map(|i| format!("{{\"i\":{i}}}\n")).collect();
        let p = write_tmp(d.path(), "rows.jsonl", data.as_bytes());
        let wait_for = |counter: &AtomicUsize, n: usize| {
            let t = Instant::now();
            while counter.load(Ordering::SeqCst) < n && t.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(1));
            }
            counter.load(Ordering::SeqCst)
        };

        // 4 workers: the first 4 rows are in `f` together.
        let inside = AtomicUsize::new(0);
        let (out, _) = run_file(&one_line_batches(4), &p, |line, buf| {
            if inside.fetch_add(1, Ordering::SeqCst) < 4 {
                assert!(wait_for(&inside, 4) >= 4, "rows did not run together");
            }
            echo_or_bad(line, buf)
        })
        .unwrap();
        assert_eq!(out, data.as_bytes());

        // 2 workers: while row 0 waits, only the 11 rows behind it in the window run.
        let others = AtomicUsize::new(0);
        let seen = AtomicUsize::new(0);
        let (out, _) = run_file(&one_line_batches(2), &p, |line, buf| {
            if line == b"{\"i\":0}" {
                wait_for(&others, 11);
                std::thread::sleep(Duration::from_millis(100));
                seen.store(others.load(Ordering::SeqCst), Ordering::SeqCst);
            } else {
                others.fetch_add(1, Ordering::SeqCst);
            }
            echo_or_bad(line, buf)
        })
        .unwrap();
        assert_eq!(seen.load(Ordering::SeqCst), 11);
        assert_eq!(out, data.as_bytes());
    }

    /// A panic in the stage's function (a bug) stops the pipeline and is raised again;
    /// it never hangs on a full window.
    #[test]
    fn a_panicking_worker_stops_the_pipeline() {
        let d = tempfile::tempdir().unwrap();
        let data: String = (0..500).map(|i| format!("{{\"i\":{i}}}\n")).collect();
        let p = write_tmp(d.path(), "rows.jsonl", data.as_bytes());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let c = one_line_batches(2);
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut rej = Rejects::open("test", None).unwrap();
                process(
                    &c,
                    vec![Source::File(p)],
                    &mut Vec::new(),
                    &mut rej,
                    |line, buf| {
                        assert_ne!(line, b"{\"i\":3}", "boom");
                        echo_or_bad(line, buf)
                    },
                )
            }));
            tx.send(r.is_err()).unwrap();
        });
        let panicked = rx.recv_timeout(std::time::Duration::from_secs(60));
        assert_eq!(
            panicked,
            Ok(true),
            "the pipeline hung or swallowed the panic"
        );
    }

    #[test]
    fn shards_partition_the_input() {
        let d = tempfile::tempdir().unwrap();
        let p = write_tmp(
            d.path(),
            "x.jsonl",
            b"{\"a\":0}\n\n{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n{\"a\":4}\n",
        );
        let mut all = Vec::new();
        for i in 0..2 {
            let mut c = cfg(OnError::Fail);
            c.select = Some(format!("{i}/2").parse::<Shard>().unwrap().into());
            let (out, _) = run_file(&c, &p, echo_or_bad).unwrap();
            all.push(String::from_utf8(out).unwrap());
        }
        assert_eq!(all[0], "{\"a\":0}\n{\"a\":2}\n{\"a\":4}\n");
        assert_eq!(all[1], "{\"a\":1}\n{\"a\":3}\n");
        assert!("2/2".parse::<Shard>().is_err());
        assert!("1-2".parse::<Shard>().is_err());
    }

    #[test]
    fn strict_stops_at_first_bad_line_with_location() {
        let d = tempfile::tempdir().unwrap();
        let p = write_tmp(d.path(), "x.jsonl", b"{\"a\":1}\n\n[1]\n{\"a\":2}\n");
        let mut out = Vec::new();
        let mut rej = Rejects::open("test", None).unwrap();
        let e = process(
            &cfg(OnError::Fail),
            vec![Source::File(p.clone())],
            &mut out,
            &mut rej,
            echo_or_bad,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{}:3: expected a JSON object, found an array", p.display())
        );
        assert_eq!(out, b"{\"a\":1}\n");
    }

    #[test]
    fn skip_counts_and_rejects_keep_lines() {
        let d = tempfile::tempdir().unwrap();
        let p = write_tmp(d.path(), "x.jsonl", b"{\"a\":1}\nnot json\n42\n{\"a\":2}\n");
        let rp = d.path().join("rejects.jsonl");
        let (out, s) = run_file_to(&cfg(OnError::Skip), &p, Some(&rp), echo_or_bad).unwrap();
        assert_eq!(out, b"{\"a\":1}\n{\"a\":2}\n");
        assert_eq!((s.bad, s.lost), (2, 0));
        let rejects = std::fs::read_to_string(rp).unwrap();
        let rows: Vec<Value> = rejects
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(rows[0]["raw"], "not json");
        assert_eq!(rows[0]["line"], 2);
        assert_eq!(rows[1]["record"], 42);
    }

    /// A row the stage read and then refused ([`Verdict::BadRow`]) is bad input like any
    /// other, and its reject is byte for byte the one [`Verdict::Bad`] gives (which
    /// looks at the line again to decide on `record`).
    #[test]
    fn a_refused_row_rejects_as_a_bad_line_does() {
        let d = tempfile::tempdir().unwrap();
        let p = write_tmp(
            d.path(),
            "x.jsonl",
            b"{\"a\":1}\n{\"b\": \"\\u00e9\\n\"}\r\n",
        );
        let rejects_of = |row: bool| {
            let rp = d.path().join(format!("rejects-{row}.jsonl"));
            let only_a = |line: &[u8], out: &mut Vec<u8>| match parse_object(line) {
                Ok(m) if m.contains_key("a") => {
                    out.extend_from_slice(line);
                    out.push(b'\n');
                    Verdict::Written
                }
                Ok(_) if row => Verdict::BadRow("no a".into()),
                _ => Verdict::Bad("no a".into()),
            };
            let (out, s) = run_file_to(&cfg(OnError::Skip), &p, Some(&rp), only_a).unwrap();
            assert_eq!(out, b"{\"a\":1}\n");
            assert_eq!((s.bad, s.lost), (1, 0));
            std::fs::read(rp).unwrap()
        };
        let refused = rejects_of(true);
        assert_eq!(refused, rejects_of(false));
        let v: Value = serde_json::from_slice(&refused).unwrap();
        assert_eq!(v["record"]["b"], "é\n");
        assert_eq!(v["raw"], "{\"b\": \"\\u00e9\\n\"}\r");
    }

    #[test]
    fn skip_without_rejects_is_loss() {
        let d = tempfile::tempdir().unwrap();
        let p = write_tmp(d.path(), "x.jsonl", b"{\"a\":1}\nnope\n");
        let mut out = Vec::new();
        let mut rej = Rejects::open("test", None).unwrap();
        let s = process(
            &cfg(OnError::Skip),
            vec![Source::File(p)],
            &mut out,
            &mut rej,
            echo_or_bad,
        )
        .unwrap();
        assert!(s.lost_data());
    }
}

//! The LLM path of traj-compress: each row waits only for its own summary.
//!
//! One reader takes the job's lines in order ([`crate::io::Records`]) and admits each
//! into a bounded reorder [`Window`]; CPU workers parse, count and plan a row
//! ([`Compressor::begin`]); a row that needs a summary goes to the summary workers (up
//! to `--max-concurrent-requests` requests in flight across the whole input), which
//! only wait on the network, retries and `Retry-After` included, and hand the summary
//! back to the CPU workers, which finish the row ([`Compressor::complete`]) with their
//! warm tokenizers; rows that need no summary never wait for one. The CPU workers plan
//! new rows before they finish summarised ones (a row's summary is asked for as soon as
//! it is planned, and the retries of the last ones asked are what a run waits for at
//! its end), until a quarter of the window waits to be finished. The writer puts the
//! rows back in input order and applies the bad-line policy ([`crate::io::Tally`]). A
//! row sleeping on `Retry-After` holds back only the output behind it, and only once
//! the window is full: the rows in the window, and their bytes, are bounded
//! ([`Window::admit`]), so memory is too. The output is the one [`Compressor::line`]
//! makes, row for row.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use anyhow::Result;

use super::summary::Outcome;
use super::{Begun, Compressor, Waiting};
use crate::io::{OnError, Record, Records, Rejects, Select, Source, Summary, Tally, Verdict};

/// How many rows, and how many input bytes, may be between the reader and the writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    pub rows: usize,
    pub bytes: usize,
}

impl Bound {
    /// The window of a run with `concurrent` summaries in flight: room for 32 rows per
    /// request in flight (at least 4,096 rows, so that one second of `Retry-After` on
    /// the oldest row does not stop the CPU workers), and at most 256 MiB of input.
    pub fn for_requests(concurrent: usize) -> Bound {
        Bound {
            rows: (32 * concurrent.max(1)).max(4096),
            bytes: 256 << 20,
        }
    }
}

#[derive(Debug, Default)]
struct Held {
    /// Rows admitted and not yet released.
    rows: usize,
    bytes: usize,
    /// The most rows and bytes ever held at once.
    peak_rows: usize,
    peak_bytes: usize,
    closed: bool,
}

/// The reorder window: rows admitted by the reader, released by the writer once
/// written. A row is admitted only while the window holds fewer than `bound.rows`
/// rows and its bytes fit in `bound.bytes` (a row larger than the whole byte bound is
/// admitted alone, into an empty window).
pub struct Window {
    bound: Bound,
    held: Mutex<Held>,
    changed: Condvar,
}

impl Window {
    pub fn new(bound: Bound) -> Window {
        Window {
            bound: Bound {
                rows: bound.rows.max(1),
                bytes: bound.bytes.max(1),
            },
            held: Mutex::new(Held::default()),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wait for room for a row of `bytes`, then hold it; false once the window is
    /// closed (the run stops).
    pub fn admit(&self, bytes: usize) -> bool {
        let mut h = self.lock();
        loop {
            if h.closed {
                return false;
            }
            let fits =
                h.rows == 0 || (h.rows < self.bound.rows && h.bytes + bytes <= self.bound.bytes);
            if fits {
                h.rows += 1;
                h.bytes += bytes;
                h.peak_rows = h.peak_rows.max(h.rows);
                h.peak_bytes = h.peak_bytes.max(h.bytes);
                return true;
            }
            h = self.changed.wait(h).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// A row of `bytes` was written.
    pub fn release(&self, bytes: usize) {
        let mut h = self.lock();
        h.rows -= 1;
        h.bytes -= bytes;
        self.changed.notify_all();
    }

    /// Stop: every `admit` returns false from now on.
    pub fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_all();
    }

    /// The most rows and bytes held at once so far.
    pub fn peak(&self) -> (usize, usize) {
        let h = self.lock();
        (h.peak_rows, h.peak_bytes)
    }

    pub fn bound(&self) -> Bound {
        self.bound
    }
}

/// One input line on its way through.
struct Item {
    seq: u64,
    source: Arc<str>,
    source_index: usize,
    lineno: u64,
    index: u64,
    /// The line; emptied once the row is written (its output holds what is kept), so
    /// that only the lines of rows that may go to the rejects stay in the window.
    line: Vec<u8>,
    /// The line's length.
    len: usize,
    /// A CR was cut before its LF (a reject gives it back).
    cr: bool,
}

/// What a CPU worker does next: begin a new row, or finish one whose summary came.
enum Work {
    Begin(Item),
    Finish(Box<Finished>),
}

/// A row back from the summary workers: its summary, for a CPU worker to put in.
type Finished = (Item, Waiting, Outcome);

/// Where one CPU worker takes its work from, and sends the rows it planned to be
/// summarised.
struct Queues<'a> {
    rows: crossbeam_channel::Receiver<Item>,
    finished: crossbeam_channel::Receiver<Box<Finished>>,
    /// `None` once no row is left to begin, so none to summarise from here: the summary
    /// workers end once every CPU worker has let go of their queue.
    summarise: Option<crossbeam_channel::Sender<(Item, Waiting)>>,
    /// Input bytes of the rows summarised and not yet finished.
    finishing: &'a AtomicUsize,
    /// From how many waiting rows, or their bytes, finishing comes first.
    backlog: Bound,
}

impl Queues<'_> {
    /// The next work: a new row first (the sooner a row is planned, the sooner its
    /// summary is asked for, and a summary's retries are what the run waits for at its
    /// end), a summarised row when no new row is there, or first once the backlog is
    /// reached (those rows hold the output behind them, and more memory than their
    /// line). `None`: nothing is left, or the run is stopping.
    fn next(&mut self) -> Option<Work> {
        loop {
            let backlog = self.finished.len() >= self.backlog.rows
                || self.finishing.load(Ordering::Relaxed) >= self.backlog.bytes;
            if backlog && let Ok(f) = self.finished.try_recv() {
                return Some(self.finish(f));
            }
            if self.summarise.is_some() {
                match self.rows.try_recv() {
                    Ok(item) => return Some(Work::Begin(item)),
                    Err(crossbeam_channel::TryRecvError::Disconnected) => self.summarise = None,
                    Err(crossbeam_channel::TryRecvError::Empty) => {}
                }
            }
            if let Ok(f) = self.finished.try_recv() {
                return Some(self.finish(f));
            }
            if self.summarise.is_none() {
                return self.finished.recv().ok().map(|f| self.finish(f));
            }
            // Wait for either; a closed `finished` means no summary worker is left: the
            // run is stopping.
            let no_rows = crossbeam_channel::select! {
                recv(self.finished) -> f => return f.ok().map(|f| self.finish(f)),
                recv(self.rows) -> item => match item {
                    Ok(item) => return Some(Work::Begin(item)),
                    Err(_) => true,
                },
            };
            if no_rows {
                self.summarise = None;
            }
        }
    }

    fn finish(&self, f: Box<Finished>) -> Work {
        self.finishing.fetch_sub(f.0.len, Ordering::Relaxed);
        Work::Finish(f)
    }
}

/// A row finished: its output and verdict, or a worker's panic.
enum Msg {
    Done(Item, Vec<u8>, Verdict),
    Panic(Box<dyn std::any::Any + Send>),
}

/// Settings of one job's run through the window.
pub struct FlowConfig {
    pub on_error: OnError,
    pub drops_are_loss: bool,
    pub select: Option<Select>,
    /// CPU workers (parse, count, plan).
    pub workers: usize,
    /// Summary requests in flight at once.
    pub concurrent: usize,
}

/// Run `comp` over the lines of `sources` through `window` (its bound; its peak is
/// readable afterwards), writing one output line per row to `out` in input order and
/// what is not written to `rejects`. `progress` is called with each row's bytes once
/// written.
pub fn process(
    comp: &Compressor,
    cfg: &FlowConfig,
    window: &Window,
    sources: Vec<Source>,
    out: &mut dyn Write,
    rejects: &mut Rejects,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Summary> {
    let stop = AtomicBool::new(false);
    // Input bytes of the rows summarised and not yet finished.
    let finishing = AtomicUsize::new(0);
    let (cpu_tx, cpu_rx) = crossbeam_channel::unbounded::<Item>();
    let (wait_tx, wait_rx) = crossbeam_channel::unbounded::<(Item, Waiting)>();
    let (fin_tx, fin_rx) = crossbeam_channel::unbounded::<Box<Finished>>();
    let (done_tx, done_rx) = crossbeam_channel::unbounded::<Msg>();
    let mut tally = Tally::new(cfg.on_error, cfg.drops_are_loss, rejects);
    let mut panicked = None;
    let mut read_result: Result<()> = Ok(());
    let write_result = std::thread::scope(|s| {
        let (stop, window, finishing) = (&stop, window, &finishing);
        let select = cfg.select.clone();
        let reader = s.spawn(move || -> Result<()> {
            let mut records = Records::new(sources, select);
            let mut seq = 0u64;
            while let Some(rec) = records.next_record()? {
                if stop.load(Ordering::Relaxed) || !window.admit(rec.bytes.len()) {
                    break;
                }
                let item = Item {
                    seq,
                    source: rec.source.clone(),
                    source_index: rec.source_index,
                    lineno: rec.lineno,
                    index: rec.index,
                    line: rec.bytes.to_vec(),
                    len: rec.bytes.len(),
                    cr: rec.cr,
                };
                seq += 1;
                if cpu_tx.send(item).is_err() {
                    break;
                }
            }
            Ok(())
        });
        let bound = window.bound();
        for _ in 0..cfg.workers.max(1) {
            let mut queues = Queues {
                rows: cpu_rx.clone(),
                finished: fin_rx.clone(),
                summarise: Some(wait_tx.clone()),
                finishing,
                backlog: Bound {
                    rows: bound.rows / 4,
                    bytes: bound.bytes / 4,
                },
            };
            let done_tx = done_tx.clone();
            s.spawn(move || {
                while let Some(work) = queues.next() {
                    let mut buf = Vec::new();
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match work {
                        Work::Begin(item) => match comp.begin(&item.line, &mut buf) {
                            Begun::Done(v) => Some((item, v)),
                            Begun::Wait(w) => {
                                let queue = queues.summarise.as_ref().expect("rows still come");
                                // A closed queue means the run is stopping.
                                let _ = queue.send((item, *w));
                                None
                            }
                        },
                        Work::Finish(f) => {
                            let (item, w, outcome) = *f;
                            let v = comp.complete(w, outcome, &item.line, &mut buf);
                            Some((item, v))
                        }
                    }));
                    let sent = match r {
                        Ok(Some((mut item, v))) => {
                            if matches!(v, Verdict::Written) {
                                item.line = Vec::new();
                            }
                            done_tx.send(Msg::Done(item, buf, v)).is_ok()
                        }
                        Ok(None) => true,
                        Err(p) => {
                            let _ = done_tx.send(Msg::Panic(p));
                            false
                        }
                    };
                    if !sent {
                        break;
                    }
                }
            });
        }
        drop((cpu_rx, fin_rx, wait_tx));
        for _ in 0..cfg.concurrent.max(1) {
            let (wait_rx, fin_tx, done_tx) = (wait_rx.clone(), fin_tx.clone(), done_tx.clone());
            s.spawn(move || {
                for (item, w) in wait_rx.iter() {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    // Only the network wait here: the row is finished (counted and
                    // written) by a CPU worker, whose tokenizer is warm.
                    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        comp.summarize(&w)
                    })) {
                        Ok(outcome) => {
                            finishing.fetch_add(item.len, Ordering::Relaxed);
                            if fin_tx.send(Box::new((item, w, outcome))).is_err() {
                                break;
                            }
                        }
                        Err(p) => {
                            let _ = done_tx.send(Msg::Panic(p));
                            break;
                        }
                    }
                }
            });
        }
        drop((wait_rx, fin_tx, done_tx));
        // The writer: rows back in input order.
        let result = (|| -> Result<()> {
            let mut ahead: BTreeMap<u64, (Item, Vec<u8>, Verdict)> = BTreeMap::new();
            let mut next = 0u64;
            for msg in done_rx.iter() {
                let (item, buf, v) = match msg {
                    Msg::Done(item, buf, v) => (item, buf, v),
                    Msg::Panic(p) => {
                        panicked = Some(p);
                        return Ok(());
                    }
                };
                ahead.insert(item.seq, (item, buf, v));
                while let Some((item, buf, v)) = ahead.remove(&next) {
                    let rec = Record {
                        source: &item.source,
                        source_index: item.source_index,
                        lineno: item.lineno,
                        index: item.index,
                        bytes: &item.line,
                        cr: item.cr,
                    };
                    let written = matches!(v, Verdict::Written);
                    tally.account(&rec, v)?;
                    if written {
                        out.write_all(&buf)?;
                    }
                    progress(item.len as u64 + 1);
                    window.release(item.len);
                    next += 1;
                }
            }
            Ok(())
        })();
        // Stop everything still running (an error or a panic), then wait for it.
        stop.store(true, Ordering::Relaxed);
        window.close();
        drop(done_rx);
        read_result = match reader.join() {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        };
        result
    });
    if let Some(p) = panicked {
        std::panic::resume_unwind(p);
    }
    write_result?;
    read_result?;
    Ok(tally.summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::tokens::Tokenizer;
    use crate::stage::compress::Settings;
    use crate::stage::compress::summary::{Outcome, Request, Summarizer};
    use std::time::Duration;

    /// One token per byte: a row of N text bytes counts N.
    struct Bytes;
    impl Tokenizer for Bytes {
        fn name(&self) -> String {
            "bytes".into()
        }
        fn count(&self, s: &str) -> usize {
            s.len()
        }
    }

    /// A slow summarizer whose every 3rd summary sleeps longer (a `Retry-After`).
    struct Slow {
        calls: std::sync::atomic::AtomicU64,
        in_flight: std::sync::atomic::AtomicU64,
        peak: std::sync::atomic::AtomicU64,
    }
    impl Summarizer for Slow {
        fn name(&self) -> String {
            "slow".into()
        }
        fn is_remote(&self) -> bool {
            true
        }
        fn summarize(&self, req: &Request) -> Outcome {
            let k = self.calls.fetch_add(1, Ordering::SeqCst);
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.peak.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(if k.is_multiple_of(3) {
                40
            } else {
                2
            }));
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            let first = req.turns[req.start]["value"].as_str().unwrap_or("");
            Outcome {
                text: Ok(format!("[CONTEXT SUMMARY]: {}", &first[..4])),
                tokens: None,
                api_calls: 1,
                errors: 0,
            }
        }
    }

    const ROLES: [&str; 16] = [
        "system", "human", "gpt", "tool", "gpt", "tool", "gpt", "tool", "gpt", "tool", "gpt",
        "tool", "gpt", "tool", "human", "gpt",
    ];

    fn rows(n: usize) -> String {
        let mut s = String::new();
        for i in 0..n {
            let long = i % 2 == 0;
            let body = if long {
                "x".repeat(400)
            } else {
                "y".to_string()
            };
            let turns: Vec<serde_json::Value> = ROLES
                .iter()
                .enumerate()
                .map(|(k, r)| serde_json::json!({"from": r, "value": format!("{i:04}{k} {body}")}))
                .collect();
            s.push_str(&serde_json::json!({"id": i, "conversations": turns}).to_string());
            s.push('\n');
        }
        s
    }

    fn compressor() -> (Compressor, Arc<Slow>) {
        let mut settings = Settings::default();
        settings.plan.target_max_tokens = 1500;
        settings.plan.summary_target_tokens = 50;
        let slow = Arc::new(Slow {
            calls: Default::default(),
            in_flight: Default::default(),
            peak: Default::default(),
        });
        let comp = Compressor::new(settings, Arc::new(Bytes), slow.clone());
        (comp, slow)
    }

    fn config() -> FlowConfig {
        FlowConfig {
            on_error: OnError::Fail,
            drops_are_loss: true,
            select: None,
            workers: 2,
            concurrent: 8,
        }
    }

    #[test]
    fn same_rows_as_one_at_a_time_and_the_window_holds() {
        let dir = tempfile::tempdir().unwrap();
        let text = rows(120);
        let p = crate::io::write_tmp(dir.path(), "in.jsonl", text.as_bytes());
        // One row at a time, in order: what the output must be.
        let (comp, _) = compressor();
        let mut expect = Vec::new();
        for line in text.lines() {
            assert!(matches!(
                comp.line(line.as_bytes(), &mut expect),
                Verdict::Written
            ));
        }
        assert_ne!(expect, text.as_bytes(), "some rows are compressed");
        for bound in [
            Bound {
                rows: 5,
                bytes: 1 << 20,
            },
            Bound {
                rows: 1000,
                bytes: 30_000,
            },
            Bound { rows: 1, bytes: 1 },
        ] {
            let (comp, slow) = compressor();
            let window = Window::new(bound);
            let mut rejects = Rejects::open("compress", None).unwrap();
            let mut out = Vec::new();
            let s = process(
                &comp,
                &config(),
                &window,
                vec![Source::File(p.clone())],
                &mut out,
                &mut rejects,
                &|_| {},
            )
            .unwrap();
            assert_eq!((s.read, s.written), (120, 120));
            assert_eq!(
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(&expect)
            );
            let (rows, bytes) = window.peak();
            assert!(rows <= bound.rows, "{rows} rows held, bound {bound:?}");
            // A row larger than the byte bound is admitted alone.
            assert!(
                bytes <= bound.bytes || rows == 1,
                "{bytes} bytes held, bound {bound:?}"
            );
            if bound.rows >= 5 {
                assert!(slow.peak.load(Ordering::SeqCst) > 1, "summaries overlap");
            }
        }
    }

    #[test]
    fn admit_waits_for_room_and_close_releases_it() {
        let w = Arc::new(Window::new(Bound { rows: 2, bytes: 10 }));
        assert!(w.admit(4) && w.admit(4));
        let w2 = w.clone();
        let t = std::thread::spawn(move || w2.admit(1));
        std::thread::sleep(Duration::from_millis(30));
        assert!(!t.is_finished(), "a third row waits");
        w.release(4);
        assert!(t.join().unwrap());
        // Bytes: 4 + 1 held, 6 more do not fit.
        let w2 = w.clone();
        let t = std::thread::spawn(move || w2.admit(6));
        std::thread::sleep(Duration::from_millis(30));
        assert!(!t.is_finished());
        w.close();
        assert!(!t.join().unwrap());
        assert_eq!(w.peak(), (2, 8));
    }

    #[test]
    fn a_bad_line_stops_the_run_at_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let mut text = rows(30);
        text.push_str("{not json\n");
        text.push_str(&rows(30));
        let p = crate::io::write_tmp(dir.path(), "in.jsonl", text.as_bytes());
        let (comp, _) = compressor();
        let mut rejects = Rejects::open("compress", None).unwrap();
        let mut out = Vec::new();
        let bound = Bound {
            rows: 8,
            bytes: 1 << 20,
        };
        let e = process(
            &comp,
            &config(),
            &Window::new(bound),
            vec![Source::File(p)],
            &mut out,
            &mut rejects,
            &|_| {},
        )
        .unwrap_err();
        assert!(e.to_string().contains("in.jsonl:31"), "{e}");
        assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 30);
    }
}

//! The ordered pipeline for summaries that wait on a network.
//!
//! [`crate::jsonl::process`] hands each worker a batch of up to 4096 lines, which suits
//! CPU work; a batch of rows that each wait seconds for an LLM would run its summaries
//! one after another. Here each row is its own job: a reader thread, `workers` threads
//! (the number of summaries in flight), and the calling thread writing in input order.
//! Memory stays bounded: the reader stops `window` rows ahead of the writer.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Result;

use crate::jsonl::{LineError, LineReader, OnError, Rejects, Source, Summary, Verdict, is_blank};

struct Job {
    seq: u64,
    source: Arc<str>,
    lineno: u64,
    line: Vec<u8>,
}

struct Done {
    job: Job,
    out: Vec<u8>,
    verdict: Verdict,
}

/// Run `f` over every non-blank line, `workers` at a time, writing in input order.
pub fn process_windowed<F>(
    sources: Vec<Source>,
    workers: usize,
    window: usize,
    (on_error, shard): (OnError, Option<crate::jsonl::Shard>),
    out: &mut dyn Write,
    rejects: &mut Rejects,
    f: F,
) -> Result<Summary>
where
    F: Fn(&[u8], &mut Vec<u8>) -> Verdict + Sync,
{
    let workers = workers.max(1);
    let window = window.max(workers);
    let (work_tx, work_rx) = crossbeam_channel::bounded::<Job>(workers);
    let (done_tx, done_rx) = crossbeam_channel::unbounded::<Done>();
    // One slot per row in flight: the reader fills it, the writer empties it.
    let (slot_tx, slot_rx) = crossbeam_channel::bounded::<()>(window);
    let stop = AtomicBool::new(false);
    let mut summary = Summary::default();
    std::thread::scope(|s| -> Result<()> {
        let stop = &stop;
        let reader = s.spawn(move || -> Result<()> {
            let mut r = LineReader::new(sources);
            let mut seq = 0;
            let mut nonblank = 0u64;
            loop {
                let mut line = Vec::new();
                let Some((source, lineno)) = r.read_into(&mut line)? else {
                    return Ok(());
                };
                if is_blank(&line) {
                    continue;
                }
                nonblank += 1;
                if shard.is_some_and(|sh| !sh.holds(nonblank - 1)) {
                    continue;
                }
                if stop.load(Ordering::Relaxed) || slot_tx.send(()).is_err() {
                    return Ok(());
                }
                let job = Job {
                    seq,
                    source,
                    lineno,
                    line,
                };
                seq += 1;
                if work_tx.send(job).is_err() {
                    return Ok(());
                }
            }
        });
        for _ in 0..workers {
            let work_rx = work_rx.clone();
            let done_tx = done_tx.clone();
            let f = &f;
            s.spawn(move || {
                for job in work_rx.iter() {
                    if stop.load(Ordering::Relaxed) {
                        continue;
                    }
                    let mut out = Vec::new();
                    let verdict = f(&job.line, &mut out);
                    if done_tx.send(Done { job, out, verdict }).is_err() {
                        return;
                    }
                }
            });
        }
        drop(work_rx);
        drop(done_tx);
        let result = write_ordered(&done_rx, &slot_rx, on_error, out, rejects, &mut summary);
        if result.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        drop(slot_rx);
        drop(done_rx);
        let read = reader.join().expect("reader thread panicked");
        result?;
        read
    })?;
    Ok(summary)
}

fn write_ordered(
    done_rx: &crossbeam_channel::Receiver<Done>,
    slot_rx: &crossbeam_channel::Receiver<()>,
    on_error: OnError,
    out: &mut dyn Write,
    rejects: &mut Rejects,
    summary: &mut Summary,
) -> Result<()> {
    let mut pending = BTreeMap::new();
    let mut next = 0u64;
    for d in done_rx.iter() {
        pending.insert(d.job.seq, d);
        while let Some(d) = pending.remove(&next) {
            next += 1;
            let _ = slot_rx.try_recv();
            summary.read += 1;
            match d.verdict {
                Verdict::Written => {
                    summary.written += 1;
                    out.write_all(&d.out)?;
                }
                Verdict::Dropped(reasons) => {
                    // traj-compress never drops on purpose; kept for completeness.
                    summary.dropped_lines += 1;
                    for r in &reasons {
                        *summary.dropped.entry(r.clone()).or_default() += 1;
                    }
                    if rejects.is_kept() {
                        rejects.write(&d.job.source, d.job.lineno, &reasons, &d.job.line)?;
                    } else {
                        summary.lost += 1;
                    }
                }
                Verdict::Bad(reason) => {
                    let err = LineError {
                        source_name: d.job.source.clone(),
                        lineno: d.job.lineno,
                        reason: reason.clone(),
                    };
                    if on_error == OnError::Fail {
                        return Err(err.into());
                    }
                    summary.bad += 1;
                    if summary.first_bad.is_none() {
                        summary.first_bad = Some(err.to_string());
                    }
                    if rejects.is_kept() {
                        rejects.write(&d.job.source, d.job.lineno, &[reason], &d.job.line)?;
                    } else {
                        summary.lost += 1;
                    }
                }
            }
        }
    }
    Ok(())
}

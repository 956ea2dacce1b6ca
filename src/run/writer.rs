//! The durable writer: the one thread that appends records and failures to the run
//! directory, fsyncs them, and only then streams records to the output and updates the
//! checkpoint (so nothing is ever visible that a crash could lose).

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::agent::Chat;
use super::plan::Task;
use super::progress::Progress;
use super::rundir::{Appender, Checkpoint, Scan, Stats};
use super::scheduler::{Done, Shared};
use crate::io::Output;

/// How long a stopping run waits for agents to leave their prompts.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// The writer's state over one process's run.
pub struct Writer<'a> {
    pub dir: PathBuf,
    pub appender: Appender,
    pub out: Output,
    pub stats: Stats,
    pub checkpoint: &'a mut Checkpoint,
    pub last_save: Instant,
    /// Prompts of each batch not finished yet.
    pub batch_left: HashMap<u64, usize>,
    pub records: u64,
    pub failures: u64,
    pub stdout_closed: bool,
}

impl Writer<'_> {
    /// Start the checkpoint from what the run directory holds (every count is the
    /// files' count) and count the prompts of each batch still to come.
    pub fn checkpoint_from_scan(&mut self, scan: &Scan, tasks: &[Task]) {
        self.checkpoint.completed_prompts = scan.done_indices.clone();
        self.checkpoint.failed_prompts = scan
            .failed_indices
            .difference(&scan.done_indices)
            .copied()
            .collect();
        self.checkpoint.batch_stats = scan.batch_stats.clone();
        for t in tasks {
            *self.batch_left.entry(t.batch).or_default() += 1;
            self.checkpoint.batch_stats.entry(t.batch).or_default();
        }
    }

    /// Take results until every task is accounted for or the run stops.
    pub fn drain(
        &mut self,
        shared: &Shared,
        rx: crossbeam_channel::Receiver<Done>,
        progress: &Progress,
    ) -> Result<()> {
        let mut group: Vec<Done> = Vec::with_capacity(256);
        let mut open = true;
        while open {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(d) => group.push(d),
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => open = false,
            }
            while group.len() < 256 {
                match rx.try_recv() {
                    Ok(d) => group.push(d),
                    Err(_) => break,
                }
            }
            self.write_group(shared, &mut group, progress)?;
            if shared.llm.stopping() {
                // Tools in flight die now (their agents then abandon their prompts).
                super::scheduler::kill_tool_processes();
                // Agents notice the stop between steps and abandon their prompts (they
                // run again on resume), dropping their sandboxes. Give them a moment,
                // keeping what finishes meanwhile; agents still waiting on HTTP after
                // that are left behind.
                let grace = Instant::now();
                while grace.elapsed() < STOP_GRACE
                    && (shared.in_flight.load(Ordering::Relaxed) > 0 || !rx.is_empty())
                {
                    if let Ok(d) = rx.recv_timeout(Duration::from_millis(20)) {
                        group.push(d);
                    }
                    while let Ok(d) = rx.try_recv() {
                        group.push(d);
                    }
                    self.write_group(shared, &mut group, progress)?;
                }
                break;
            }
            if self.last_save.elapsed() >= Duration::from_secs(1) {
                self.checkpoint.save(&self.dir.join("checkpoint.json"))?;
                self.last_save = Instant::now();
            }
        }
        Ok(())
    }

    fn write_group(
        &mut self,
        shared: &Shared,
        group: &mut Vec<Done>,
        progress: &Progress,
    ) -> Result<()> {
        if group.is_empty() {
            return Ok(());
        }
        let mut to_stdout: Vec<&[u8]> = Vec::new();
        let mut finished_batches = Vec::new();
        for d in group.iter() {
            let (task, line, is_record, stats) = match d {
                Done::Record { task, line, stats } => (*task, line, true, stats),
                Done::Failure { task, line, stats } => (*task, line, false, stats),
                Done::Abandoned => continue,
            };
            let t = &shared.tasks[task];
            self.stats.merge(stats);
            let tokens = stats.total_tokens;
            let bs = self.checkpoint.batch_stats.entry(t.batch).or_default();
            if is_record {
                self.appender.record(t.batch, line)?;
                self.checkpoint.completed_prompts.insert(t.index);
                self.checkpoint.failed_prompts.remove(&t.index);
                bs.processed += 1;
                self.records += 1;
                progress.records.fetch_add(1, Ordering::Relaxed);
                to_stdout.push(line);
            } else {
                self.appender.failure(line)?;
                if !self.checkpoint.completed_prompts.contains(&t.index) {
                    self.checkpoint.failed_prompts.insert(t.index);
                }
                bs.failed += 1;
                self.failures += 1;
                progress.failures.fetch_add(1, Ordering::Relaxed);
            }
            progress.tokens.fetch_add(tokens, Ordering::Relaxed);
            if let Some(left) = self.batch_left.get_mut(&t.batch) {
                *left -= 1;
                if *left == 0 {
                    finished_batches.push(t.batch);
                }
            }
        }
        // Durable first, then visible.
        self.appender.sync()?;
        for b in finished_batches {
            self.appender.close(b)?;
        }
        if !self.stdout_closed {
            let mut res = Ok(());
            for line in &to_stdout {
                res = self.out.write_all(line);
                if res.is_err() {
                    break;
                }
            }
            if res.is_ok() {
                res = self.out.flush();
            }
            if let Err(e) = res {
                if e.kind() == std::io::ErrorKind::BrokenPipe {
                    self.stdout_closed = true;
                    shared.llm.request_stop("stdout closed");
                } else {
                    return Err(e).context("cannot write records to the output");
                }
            }
        }
        group.clear();
        Ok(())
    }
}

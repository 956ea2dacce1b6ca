//! One traj-run process from start to end: scan and repair the run directory, read the
//! task rows, plan what runs, start the workers, write what they hand back, then the
//! checkpoint and `statistics.json`.
//!
//! Threads: `num_workers` agents (each blocks on HTTP or a tool), one writer (the
//! calling thread: appends + fsyncs records and failures, streams records to stdout,
//! keeps the checkpoint), one progress printer. Workers take prompts in input order from
//! a shared counter; records come out in completion order. The task rows wait in the
//! run's [`spool`](super::spool) until their task starts; records are not held.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};

use super::chat::Llm;
use super::config::{ConfigError, RunConfig};
use super::events::Events;
use super::hosts::{self, HostFactory, ToolsetChoice};
use super::lock;
use super::plan::plan;
use super::progress::Progress;
use super::record::{ReasoningStatistics, RewardStatistics, Statistics, ThisRun, UsageTotals};
use super::rundir::{self, Checkpoint, Stats};
use super::scheduler::{self, Done, Shared};
use super::tasks::read_tasks;
use super::writer::Writer;
use crate::format::outcome::{self, Outcomes};
use crate::format::time::{utc_iso, utc_now};
use crate::io::Output;
use crate::llm::cache::Cache;
use crate::llm::{Client, RateLimiter};
use crate::toolbox::ToolConfig;

/// How a run ended, for the exit status.
#[derive(Debug, Clone, PartialEq)]
pub struct Ending {
    pub records: u64,
    pub failures: u64,
    /// Scheduled prompts neither recorded nor failed (stopped early).
    pub left: u64,
    pub stop_reason: Option<String>,
    /// The reader of the output went away (a clean stop).
    pub stdout_closed: bool,
    /// Bad task rows skipped without `--rejects`.
    pub lost_rows: u64,
    /// Prompts whose run panicked (a bug in traj-run); they run again on resume.
    pub panicked: u64,
}

impl Ending {
    /// True when the run did all it was asked and lost nothing.
    pub fn ok(&self) -> bool {
        self.stdout_closed
            || (self.stop_reason.is_none()
                && self.failures == 0
                && self.lost_rows == 0
                && self.panicked == 0
                && self.left == 0)
    }
}

/// Run `cfg` with the task hosts of `hosts`. Setting `stop` (the binary's signal
/// handler does, on SIGINT, SIGTERM or SIGHUP) ends the run as an interruption: agents
/// abandon their prompts, which run again on resume. The engine sets it too, with its
/// reason (spend cap, out of credits, stdout closed). What the user should know while it
/// runs goes to `events`.
pub fn run(
    cfg: &RunConfig,
    hosts: Box<HostFactory>,
    tool_config: &ToolConfig,
    stop: Arc<AtomicBool>,
    events: Arc<dyn Events>,
) -> Result<Ending> {
    let note = |msg: &str| events.note(msg);
    // Records and rejects never replace the task rows they come from, nor each other.
    let task_files = crate::io::sources_from_args(&cfg.tasks.inputs)?;
    let written = [
        ("-o", cfg.output.as_deref()),
        ("--rejects", cfg.tasks.rejects.as_deref()),
    ];
    crate::io::check_targets(None, &written, &task_files).map_err(crate::error::classify)?;
    // A task file that cannot be opened is the command line's to fix (exit 2) before
    // anything is made: no run directory, no lock file.
    // (Opened only: nothing is read, so a pipe loses no byte.)
    for s in &task_files {
        crate::io::source::open_file(s)?;
    }
    let started_wall = SystemTime::now();
    let started = Instant::now();
    let dir = cfg.run_dir.clone();
    let run_name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "run".into());
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create run directory {}", dir.display()))?;
    // Held until this function returns (or the process dies): nothing below, the resume
    // scan's repairs included, ever runs beside another traj-run on this directory.
    let locked = lock::lock(&dir, cfg.wait, &stop, |pid| {
        note(&format!(
            "waiting for traj-run pid {pid} to release {}",
            dir.display()
        ))
    });
    let _lock = match locked {
        Err(e @ lock::LockError::Interrupted { .. }) => {
            // Nothing was read or written: the run is as the holder leaves it.
            note(&format!("{e}; nothing ran"));
            return Ok(Ending {
                records: 0,
                failures: 0,
                left: 0,
                stop_reason: Some("interrupted".into()),
                stdout_closed: false,
                lost_rows: 0,
                panicked: 0,
            });
        }
        locked => locked?,
    };
    let existing = rundir::scan(&dir, cfg.resume)?;
    if !cfg.resume && (!existing.batches.is_empty() || !existing.failed.is_empty()) {
        return Err(ConfigError::RunExists {
            dir: dir.clone(),
            records: existing.stats.records,
        }
        .into());
    }
    remove_temp_files(&dir);
    for repair in &existing.repaired {
        note(&repair.to_string());
    }

    let tasks = read_tasks(&cfg.tasks, &dir, &existing)?;
    if tasks.skipped > 0 {
        note(&format!("{} bad task rows skipped", tasks.skipped));
    }
    let existing = if cfg.resume {
        let (scan, said) = keep_reference_discards(&dir, existing, &tasks)?;
        if let Some(said) = said {
            note(&said);
        }
        scan
    } else {
        existing
    };
    let (lost_rows, total_prompts) = (tasks.lost, tasks.rows.len());
    let plan = plan(tasks, &existing, cfg.max_attempts, cfg.batch_size)?;
    if plan.renumbered > 0 {
        note(&format!(
            "{} rows got a new prompt_index (their position is another task's)",
            plan.renumbered
        ));
    }
    if cfg.resume && !cfg.quiet {
        // With --rollouts, every count below is of runs (a task's rollout each).
        let rollouts = cfg.rollout.rollouts.max(1) as usize;
        let what = if rollouts > 1 {
            format!(
                "{total_prompts} runs ({} tasks x {rollouts} rollouts)",
                total_prompts / rollouts
            )
        } else {
            format!("{total_prompts} prompts")
        };
        note(&format!(
            "resume: {what}, {} already done, {} given up, {} to run (batch files from {})",
            plan.already_done,
            plan.given_up,
            plan.tasks.len(),
            existing.next_batch()
        ));
    }

    let client = Client::new(cfg.client.clone())
        .with_max_response(cfg.max_response)
        .with_on_payment(cfg.on_payment);
    let client = match cfg.max_rps {
        Some(r) => client.with_rate_limit(Arc::new(RateLimiter::new(r))),
        None => client,
    };
    // The agent and its model-backed tools share one meter: one rate limit, one cap.
    let client = client.with_meter(tool_config.meter.clone());
    let cache = cfg.cache.as_deref().map(Cache::open).transpose()?;
    let llm = Llm::new(client, cache, cfg.max_cost, stop.clone());
    let shared = Arc::new(Shared {
        cfg: cfg.agent.clone(),
        llm,
        tasks: plan.tasks,
        spool: plan.spool,
        next: AtomicUsize::new(0),
        in_flight: AtomicU64::new(0),
        hosts,
        toolsets: ToolsetChoice {
            default: cfg.toolsets.clone(),
            distribution: hosts::distribution(cfg.distribution.as_deref(), tool_config)?,
            seed: cfg.seed,
        },
        live: Mutex::new(HashMap::new()),
        rollout: cfg.rollout.clone(),
        panicked: AtomicU64::new(0),
        sources: Mutex::new(Default::default()),
    });
    let weak = Arc::downgrade(&shared);
    let on_cap = move |why: &str| {
        if let Some(s) = weak.upgrade() {
            s.llm.request_stop(why);
        }
    };
    let rate = shared.llm.client.rate_limiter();
    tool_config
        .meter
        .attach(rate, cfg.max_cost, Box::new(on_cap));

    let (tx, rx) = crossbeam_channel::bounded::<Done>(cfg.num_workers.max(16) * 2);
    let n_tasks = shared.tasks.len();
    scheduler::spawn(&shared, cfg.num_workers, tx)?;

    let mut checkpoint = Checkpoint {
        run_name: run_name.clone(),
        ..Checkpoint::default()
    };
    let mut writer = Writer {
        dir: dir.clone(),
        appender: rundir::Appender::new(&dir),
        out: Output::create(cfg.output.as_deref())?,
        stats: existing.stats.clone(),
        checkpoint: &mut checkpoint,
        last_save: Instant::now(),
        batch_left: HashMap::new(),
        records: 0,
        failures: 0,
        stdout_closed: false,
    };
    writer.checkpoint_from_scan(&existing, &shared.tasks);
    let every = cfg.progress_every.filter(|_| !cfg.quiet);
    let progress = Progress::start(shared.clone(), events.clone(), n_tasks, every);
    let result = writer.drain(&shared, rx, &progress);
    progress.finish();
    shared.remove_live_workspaces();
    writer.appender.sync()?;
    writer.checkpoint.save(&dir.join("checkpoint.json"))?;
    let records = writer.records;
    let failures = writer.failures;
    let stdout_closed = writer.stdout_closed;
    let stats = writer.stats.clone();
    let out = writer.out;
    result?;
    if !stdout_closed {
        match out.commit() {
            Err(e) if is_broken_pipe(&e) => {}
            r => r?,
        }
    }
    let totals = Totals {
        run_name: &run_name,
        total_batches: count_batches(&dir),
        stats: &stats,
        checkpoint: &checkpoint,
        elapsed: started.elapsed(),
        started_wall,
        records,
        failures,
        discarded: existing.discarded,
    };
    let statistics = statistics(cfg, &totals, &shared);
    rundir::write_json_atomic(&dir.join("statistics.json"), &statistics)?;

    let left = n_tasks as u64 - records - failures;
    let stop_reason = shared.llm.stop_reason();
    if !cfg.quiet {
        // Every figure of this run; the directory's totals are in statistics.json.
        let tokens = stats
            .total_tokens
            .saturating_sub(existing.stats.total_tokens);
        let mut msg = format!(
            "{records} records, {failures} failures, {left} not run; {} in {:.1}s; {tokens} tokens, ${:.4}",
            dir.display(),
            started.elapsed().as_secs_f64(),
            shared.llm.spent()
        );
        if let Some(r) = &stop_reason {
            msg.push_str(&format!("; stopped: {r}"));
        }
        note(&msg);
    }
    if cfg.max_cost.is_some() && records + failures > 0 && shared.llm.spent() == 0.0 {
        note("warning: the endpoint reported no cost, so --max-cost could not limit this run");
    }
    if !stdout_closed && let Some(r) = &stop_reason {
        // With --rollouts, the units left are runs (a task's rollout each).
        let unit = if cfg.rollout.rollouts > 1 {
            "runs"
        } else {
            "prompts"
        };
        note(&format!(
            "stopped ({r}): --resume runs the {left} {unit} left"
        ));
    }
    let panicked = shared.panicked.load(std::sync::atomic::Ordering::Relaxed);
    if panicked > 0 {
        note(&format!(
            "error: {panicked} prompts ended in an internal error (a panic, a bug in traj-run: \
             see above); --resume runs them again"
        ));
    }
    Ok(Ending {
        records,
        failures,
        left,
        stop_reason,
        stdout_closed,
        lost_rows,
        panicked,
    })
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Temp files of a summary write cut short by a kill.
fn remove_temp_files(dir: &Path) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with(".tmp-") {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

/// The batch files of `dir` (`batch_N.jsonl`), in no particular order.
fn batch_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .and_then(rundir::batch_number)
                .is_some()
        })
        .map(|e| e.path())
        .collect()
}

fn count_batches(dir: &Path) -> usize {
    batch_files(dir).len()
}

/// Call `f` with every non-blank line of the batch files of `dir` (without its newline),
/// streamed; a file that cannot be read is passed over.
fn for_each_batch_line(dir: &Path, mut f: impl FnMut(&[u8])) {
    use std::io::BufRead;
    let mut line = Vec::new();
    for path in batch_files(dir) {
        let Ok(file) = std::fs::File::open(path) else {
            continue;
        };
        let mut r = std::io::BufReader::with_capacity(1 << 20, file);
        loop {
            line.clear();
            match r.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let text = line.strip_suffix(b"\n").unwrap_or(&line);
            if !text.iter().all(u8::is_ascii_whitespace) {
                f(text);
            }
        }
    }
}

/// One read of every batch file of `dir`: the records per stop reason (a line that
/// cannot be read counts as `unreadable`) and the reward figures of the records that
/// have a reward, grouped by task (`None` when none has). Both come from one scan of
/// each line's top-level members ([`outcome::of_line`],
/// [`groups::task_and_reward_of_line`]).
fn scan_batches(
    dir: &Path,
) -> (
    std::collections::BTreeMap<String, u64>,
    Option<RewardStatistics>,
) {
    use crate::format::groups;
    let mut all = Outcomes::default();
    let mut by_task: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    for_each_batch_line(dir, |line| {
        match outcome::of_line(line) {
            Some(o) => all.add(&o),
            None => *all.stop_reasons.entry("unreadable".into()).or_default() += 1,
        }
        if let Some((Some(task), Some(r))) = groups::task_and_reward_of_line(line) {
            by_task.entry(task).or_default().push(r);
        }
    });
    let rewards = RewardStatistics::of(&mut by_task, groups::PASS_THRESHOLD);
    (all.stop_reasons, rewards)
}

/// What `statistics.json` is made of.
pub struct Totals<'a> {
    pub run_name: &'a str,
    pub total_batches: usize,
    pub stats: &'a Stats,
    pub checkpoint: &'a Checkpoint,
    pub elapsed: Duration,
    pub started_wall: SystemTime,
    /// Records and failures of this process.
    pub records: u64,
    pub failures: u64,
    /// Discard rows in the directory.
    pub discarded: u64,
}

/// The prompts hermes-agent 0.19.0 discarded, known only to its checkpoint
/// ([`rundir::reference_discards`]), written into the files as the newest reference's
/// tombstones (for the task rows of this input at those indices), and the directory
/// read again: they are done, and counted as discarded, as the reference's resume has
/// them (without this they ran again, and the rebuilt checkpoint lost their count);
/// with what to tell the user.
fn keep_reference_discards(
    dir: &std::path::Path,
    existing: rundir::Scan,
    tasks: &super::tasks::Tasks,
) -> Result<(rundir::Scan, Option<String>)> {
    let discards = rundir::reference_discards(dir, &existing);
    if discards.is_empty() {
        return Ok((existing, None));
    }
    let mut rows = Vec::new();
    for t in &tasks.rows {
        if discards.contains(&t.index) && t.ids.copy == 0 && t.ids.rollout == 0 {
            let line = tasks.spool.read(t.line)?;
            let v: serde_json::Value = serde_json::from_slice(&line)?;
            if let Some(p) = rundir::prompt_text_of(&v) {
                rows.push((t.index, p.to_string()));
            }
        }
    }
    if rows.is_empty() {
        return Ok((existing, None));
    }
    let path = rundir::write_tombstones(dir, existing.next_batch(), &rows)?;
    let said = format!(
        "{}: {} prompts that the reference's checkpoint.json lists as done left no row \
         (hermes-agent 0.19.0 discards a prompt without reasoning so): kept done, as \
         tombstones",
        path.display(),
        rows.len()
    );
    Ok((rundir::scan(dir, true)?, Some(said)))
}

fn statistics(cfg: &RunConfig, t: &Totals, shared: &Shared) -> Statistics {
    let round2 = |x: f64| (x * 100.0).round() / 100.0;
    let stats = t.stats;
    // Tasks (a prompt_index: every rollout of a task shares it), as the checkpoint
    // counts them, over the whole directory: those with a record, those failed without
    // one, and those of this run's input not run yet. So prompts_done + prompts_failed
    // <= total_prompts, whatever input a resume is given.
    let cp = t.checkpoint;
    let mut known: std::collections::BTreeSet<u64> = shared.tasks.iter().map(|t| t.index).collect();
    known.extend(&cp.completed_prompts);
    known.extend(&cp.failed_prompts);
    let (stop_reasons, rewards) = scan_batches(&cfg.run_dir);
    Statistics {
        run_name: t.run_name.to_string(),
        // Where this run's tasks took their toolsets from (a run of task rows sampled
        // by traj-sample-tools names their distribution), else the flags'.
        distribution: {
            let sources = shared.sources.lock().unwrap_or_else(|e| e.into_inner());
            if sources.is_empty() {
                cfg.distribution
                    .clone()
                    .unwrap_or_else(|| "task rows".into())
            } else {
                sources.iter().cloned().collect::<Vec<_>>().join(", ")
            }
        },
        total_prompts: known.len(),
        total_batches: t.total_batches,
        batch_size: cfg.batch_size,
        model: cfg.agent.model.clone(),
        completed_at: utc_now(),
        duration_seconds: round2(t.elapsed.as_secs_f64()),
        tool_statistics: stats.tool_statistics(),
        reasoning_statistics: ReasoningStatistics {
            total_assistant_turns: stats.assistant_turns,
            turns_with_reasoning: stats.turns_with_reasoning,
            turns_without_reasoning: stats.assistant_turns - stats.turns_with_reasoning,
        },
        discarded_no_reasoning: t.discarded,
        records: stats.records,
        completed: stats.completed,
        partial: stats.partial,
        stop_reasons,
        prompts_done: t.checkpoint.completed_prompts.len(),
        prompts_failed: t.checkpoint.failed_prompts.len(),
        failures: stats.failure_lines,
        failure_classes: stats.failure_classes.clone(),
        api_calls: stats.api_calls,
        usage: UsageTotals {
            prompt_tokens: stats.prompt_tokens,
            completion_tokens: stats.completion_tokens,
            total_tokens: stats.total_tokens,
            cost: stats.cost,
        },
        this_run: ThisRun {
            started_at: utc_iso(t.started_wall),
            prompts_scheduled: shared.tasks.len(),
            records: t.records,
            failures: t.failures,
            retries: shared.llm.retries(),
            spent: shared.llm.spent(),
            stopped: shared.llm.stop_reason(),
            cpu_seconds: {
                let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
                t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
            },
        },
        system_prompt: cfg.system_prompt.clone(),
        sandbox: cfg.sandbox.clone(),
        rollouts: cfg.rollout.rollouts,
        rewards,
    }
}

#[cfg(test)]
mod tests {
    use super::Ending;

    /// A prompt left with neither a record nor a failure line (a worker's panic) is
    /// never a success, even with no stop reason (it once exited 0).
    #[test]
    fn a_prompt_left_behind_or_a_panic_fails_the_run() {
        let done = Ending {
            records: 3,
            failures: 0,
            left: 0,
            stop_reason: None,
            stdout_closed: false,
            lost_rows: 0,
            panicked: 0,
        };
        let with = |f: fn(&mut Ending)| {
            let mut e = done.clone();
            f(&mut e);
            e.ok()
        };
        assert!(done.ok());
        assert!(!with(|e| e.left = 1));
        assert!(!with(|e| e.panicked = 1));
        assert!(with(|e| (e.left, e.stdout_closed) = (1, true)));
    }
}

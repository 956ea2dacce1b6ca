//! The worker pool: `--num-workers` agent threads take prompts in input order from a
//! shared counter, run each one to a record or a failure line, and hand the bytes (and
//! their share of the statistics) to the single writer.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use anyhow::{Context, Result};
use serde_json::Value;

use super::agent::{self, Chat, Outcome};
use super::chat::Llm;
use super::hosts::{HostFactory, ToolsetChoice};
use super::plan::Task;
use super::record::{self, FailureClass, Metadata, Record, Timings};
use super::request::AgentConfig;
use super::rollout::RolloutConfig;
use super::spool::Spool;
use super::verify::{self, Verifier};

use super::rundir::Stats;
use crate::format::time::{utc_iso, utc_now};

/// What a worker hands the writer.
pub enum Done {
    /// A record line, and its contribution to the statistics (computed by the worker
    /// so that the single writer only appends).
    Record {
        task: usize,
        line: Vec<u8>,
        stats: Box<Stats>,
    },
    Failure {
        task: usize,
        line: Vec<u8>,
        stats: Box<Stats>,
    },
    /// The run is stopping; the prompt runs again on resume.
    Abandoned,
}

/// What every worker shares.
pub struct Shared {
    pub cfg: AgentConfig,
    pub llm: Llm,
    pub tasks: Vec<Task>,
    /// The task rows' lines.
    pub spool: Spool,
    pub next: AtomicUsize,
    pub in_flight: AtomicU64,
    pub hosts: Box<HostFactory>,
    pub toolsets: ToolsetChoice,
    /// Workspaces of the tasks in flight, by task.
    pub live: Mutex<HashMap<usize, PathBuf>>,
    /// Sampling and verifier settings of the rollouts.
    pub rollout: RolloutConfig,
    /// Prompts whose run panicked (a bug): abandoned, so they run again on resume,
    /// and the run cannot exit 0.
    pub panicked: AtomicU64,
    /// Where this run's tasks took their toolsets from ([`ToolsetChoice::source`]).
    pub sources: Mutex<std::collections::BTreeSet<String>>,
}

impl Shared {
    /// Remove the workspaces of tasks still in flight (a stopping run leaves agents
    /// blocked on HTTP behind; their hosts are never dropped).
    pub fn remove_live_workspaces(&self) {
        let live = std::mem::take(&mut *self.live.lock().unwrap_or_else(|e| e.into_inner()));
        for (_, ws) in live {
            let _ = std::fs::remove_dir_all(ws);
        }
    }
}

/// Kill the process groups of this process's children: the tool commands in flight
/// and the kept sandboxes (each runs in its own group). Their agents see the tool fail,
/// notice the stop and drop their sandboxes. Returns once what was killed has ended (at
/// most [`GONE_PATIENCE`]): a sandbox's first process ends only after every process of
/// its PID namespace, which is after bwrap itself.
pub fn kill_tool_processes() {
    use crate::toolbox::{exec, reaper};
    let me = std::process::id();
    let mut below = Vec::new();
    for pid in reaper::all_pids() {
        // With the group leader's children: a bwrap sandbox's own (see `kill_tree`).
        if let Some((ppid, pgrp, _)) = reaper::stat_of(pid)
            && ppid == me
            && pgrp == pid
        {
            below.extend(exec::kill_tree(pid));
        }
    }
    let until = Instant::now() + GONE_PATIENCE;
    for fd in below {
        let _ = exec::wait_readable(&fd, until.saturating_duration_since(Instant::now()));
    }
}

/// How long a stop waits for the killed tools to end.
const GONE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

/// Start `n` worker threads (at most one per task) sending to `tx`.
pub fn spawn(shared: &Arc<Shared>, n: usize, tx: crossbeam_channel::Sender<Done>) -> Result<()> {
    for w in 0..n.min(shared.tasks.len().max(1)) {
        let s = shared.clone();
        let tx = tx.clone();
        std::thread::Builder::new()
            .name(format!("agent-{w}"))
            .stack_size(1 << 20)
            .spawn(move || worker(&s, &tx))
            .context("cannot start a worker thread")?;
    }
    Ok(())
}

fn worker(s: &Shared, tx: &crossbeam_channel::Sender<Done>) {
    loop {
        if s.llm.stopping() {
            return;
        }
        let i = s.next.fetch_add(1, Ordering::Relaxed);
        if i >= s.tasks.len() {
            return;
        }
        s.in_flight.fetch_add(1, Ordering::Relaxed);
        // A panic is a bug, not the prompt's fault: the prompt is abandoned (it runs
        // again on resume), the worker goes on, and the run's exit status says so. The
        // panic's message is already on stderr (the default hook).
        let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_task(s, i)))
            .unwrap_or_else(|_| {
                s.panicked.fetch_add(1, Ordering::Relaxed);
                let ws = s.live.lock().unwrap_or_else(|e| e.into_inner()).remove(&i);
                if let Some(ws) = ws {
                    let _ = std::fs::remove_dir_all(ws);
                }
                Done::Abandoned
            });
        s.in_flight.fetch_sub(1, Ordering::Relaxed);
        if tx.send(done).is_err() {
            return;
        }
    }
}

/// The failure line of `task` (no model call made, zero usage, unless set after).
pub fn failure(
    cfg: &AgentConfig,
    task: &Task,
    class: FailureClass,
    retryable: bool,
) -> record::Failure {
    record::Failure {
        prompt_index: task.index,
        task_uid: task.ids.uid(),
        prompt_hash: task.ids.hash.to_string(),
        task_key: task.ids.key.to_string(),
        class,
        retryable,
        attempts: task.attempt,
        status: None,
        error: String::new(),
        http_attempts: 0,
        api_calls: 0,
        batch_num: task.batch,
        model: cfg.model.clone(),
        at: utc_now(),
        usage: agent::usage_json(&Default::default()),
    }
}

fn failure_done(i: usize, f: &record::Failure) -> Done {
    let (line, stats) = finished(f, Stats::add_failure);
    Done::Failure {
        task: i,
        line,
        stats,
    }
}

/// A finished task's line and its share of the statistics (`add` counts it).
fn finished(what: &impl serde::Serialize, add: fn(&mut Stats, &Value)) -> (Vec<u8>, Box<Stats>) {
    let v = serde_json::to_value(what).unwrap_or_default();
    let mut stats = Stats::default();
    add(&mut stats, &v);
    (record::to_line(&v), Box::new(stats))
}

fn early_failure(
    s: &Shared,
    i: usize,
    class: FailureClass,
    retryable: bool,
    message: String,
) -> Done {
    let mut f = failure(&s.cfg, &s.tasks[i], class, retryable);
    f.error = message;
    failure_done(i, &f)
}

fn run_task(s: &Shared, i: usize) -> Done {
    let task = &s.tasks[i];
    let line = match s.spool.read(task.line) {
        Ok(l) => l,
        Err(e) => {
            let why = format!("cannot read the task row back from the run's spool: {e}");
            return early_failure(s, i, FailureClass::ToolHost, true, why);
        }
    };
    let row = match crate::io::parse_object(&line) {
        Ok(r) => r,
        Err(e) => return early_failure(s, i, FailureClass::BadTask, false, e),
    };
    let prompt = row
        .get("prompt")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let toolsets = match s.toolsets.of(&row, task.index) {
        Ok(t) => t,
        Err(e) => return early_failure(s, i, FailureClass::BadTask, false, e.to_string()),
    };
    s.sources
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(s.toolsets.source(&row));
    // A built-in verifier that can score no answer of this row: before any model call.
    if let Some(why) = s
        .rollout
        .verifier
        .as_ref()
        .and_then(|v| verify::row_defect(v, &row))
    {
        return early_failure(s, i, FailureClass::BadTask, false, why);
    }
    if toolsets.is_empty() && matches!(s.rollout.verifier, Some(Verifier::Command(_))) {
        // No tools, no sandbox for the command: fail before any model call is paid for
        // (and never again: a resume would only pay for it once more).
        let why = "this task has no tools (toolsets: []), so no sandbox to run the \
                   --verifier command in; use a built-in verifier (match:, regex:, number:)";
        return early_failure(s, i, FailureClass::BadTask, false, why.into());
    }
    let mut host = match (s.hosts)(&row, &toolsets) {
        Ok((h, ws)) => {
            if let Some(ws) = ws {
                s.live
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(i, ws);
            }
            h
        }
        Err(e) => return early_failure(s, i, e.class, e.retryable, e.message),
    };
    let tools = host.schemas();
    let sampling = s.rollout.sampling(&row, &task.ids.uid(), task.ids.rollout);
    let fields = s.rollout.body_fields(&sampling);
    // A second copy or rollout is a sample of its own, never the first one's cached answer.
    let (copy, rollout) = (task.ids.copy, task.ids.rollout);
    let cache_tag = (copy > 0 || rollout > 0).then(|| format!("{copy}:{rollout}"));
    let mut own_cfg;
    let cfg = if fields.is_empty() && cache_tag.is_none() {
        &s.cfg
    } else {
        own_cfg = s.cfg.clone();
        for (k, v) in fields {
            own_cfg.extra_body.insert(k, v);
        }
        own_cfg.cache_tag = cache_tag;
        &own_cfg
    };
    let started_wall = SystemTime::now();
    let t0 = Instant::now();
    let outcome = agent::run_prompt(cfg, &s.llm, host.as_mut(), &prompt);
    let duration = t0.elapsed();
    // The verifier runs in the rollout's sandbox, before it is torn down.
    let verdict = match (&outcome, &s.rollout.verifier) {
        (Outcome::Done(t), Some(v)) if !s.llm.stopping() => {
            Some(verify_rollout(s, v, host.as_mut(), &row, task, t))
        }
        _ => None,
    };
    drop(host);
    s.live.lock().unwrap_or_else(|e| e.into_inner()).remove(&i);
    match outcome {
        Outcome::Abandoned => Done::Abandoned,
        Outcome::Failed(f) => {
            let mut line = failure(&s.cfg, task, f.class, f.retryable);
            line.error = f.message;
            line.status = f.status;
            line.http_attempts = f.http_attempts;
            line.api_calls = f.api_calls;
            // The usage spent before the failure.
            line.usage = agent::usage_json(&f.usage);
            failure_done(i, &line)
        }
        Outcome::Done(_) if verdict.is_none() && s.rollout.verifier.is_some() => Done::Abandoned,
        Outcome::Done(t) => {
            let (reward, verification) = match verdict {
                None => (None, None),
                Some(Ok((r, v))) => (Some(r), Some(v)),
                Some(Err(e)) => {
                    // Never a reward of 0: a failure line, retried on resume.
                    let mut line = failure(&s.cfg, task, FailureClass::VerifierError, true);
                    line.error = e;
                    line.api_calls = t.api_calls;
                    line.usage = agent::usage_json(&t.usage);
                    return failure_done(i, &line);
                }
            };
            let extra = Record::extra_from_row(row);
            let rec = Record {
                prompt_index: task.index,
                task_uid: task.ids.uid(),
                prompt_hash: task.ids.hash.to_string(),
                task_key: task.ids.key.to_string(),
                prompt,
                messages: t.messages,
                tools,
                toolsets,
                model: s.cfg.model.clone(),
                completed: t.completed,
                partial: t.partial,
                api_calls: t.api_calls,
                stop_reason: t.stop_reason.as_str(),
                usage: agent::usage_json(&t.usage),
                calls: t.calls.iter().map(|c| c.to_json()).collect(),
                timings: Timings {
                    started_at: utc_iso(started_wall),
                    finished_at: utc_now(),
                    duration_ms: duration.as_millis() as u64,
                    llm_ms: t.llm_time.as_millis() as u64,
                    tool_ms: t.tool_time.as_millis() as u64,
                },
                metadata: Metadata {
                    batch_num: task.batch,
                    timestamp: utc_now(),
                    model: s.cfg.model.clone(),
                },
                attempt: task.attempt,
                rollout_index: task.ids.rollout,
                sampling,
                reward,
                verification,
                extra,
            };
            let (line, stats) = finished(&rec, Stats::add_record);
            Done::Record {
                task: i,
                line,
                stats,
            }
        }
    }
}

/// The final answer of a trajectory: the text of its last assistant message; none (the
/// empty text) when it is `partial`, cut short before an answer (by length, by tool calls
/// that stayed invalid, ...): the text that came with an earlier tool call is no answer.
fn final_answer(t: &agent::Trajectory) -> String {
    if t.partial {
        return String::new();
    }
    t.messages
        .iter()
        .rev()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
        .map(|m| crate::format::message::content_text(m.get("content").unwrap_or(&Value::Null)))
        .unwrap_or_default()
}

/// Score a finished rollout: a built-in check, or the command in its sandbox, run a
/// second time when the first run is a `verifier_error`.
fn verify_rollout(
    s: &Shared,
    v: &Verifier,
    host: &mut dyn crate::toolbox::ToolHost,
    row: &serde_json::Map<String, Value>,
    task: &Task,
    t: &agent::Trajectory,
) -> verify::Verdict {
    let answer = final_answer(t);
    if let Some(verdict) = verify::builtin(v, row, &answer) {
        return verdict;
    }
    let Verifier::Command(script) = v else {
        unreachable!("built-in verifiers answered above");
    };
    let uid = task.ids.uid();
    let r = verify::Rollout {
        row,
        answer: &answer,
        rollout_index: task.ids.rollout,
        task_uid: &uid,
    };
    let timeout = s.rollout.verifier_timeout;
    match verify::run_command(host, script, &r, timeout) {
        Ok(v) => Ok(v),
        Err(first) => verify::run_command(host, script, &r, timeout)
            .map_err(|second| format!("verifier_error twice: {first}; then: {second}")),
    }
}

//! Background processes of one task: `terminal(background=true)` starts a command
//! that outlives the call, and the `process` tool lists, polls, reads, waits for,
//! kills and writes to it by session id.
//!
//! A background command runs in the task's sandbox like any other (same backend,
//! environment and resource limits) in a process group of its own, registered with
//! the [`reaper`](super::reaper) as a call in progress so that the orphan sweep of
//! later calls leaves it alone. Its stdout and stderr go to one log (the last
//! [`LOG_CAP`] bytes are kept). Background processes belong to their task: at most
//! [`MAX_RUNNING`] run at once, and dropping [`Processes`] (the task ending) kills
//! every group that is still alive, and waits until the processes its sandbox ran in a
//! session of their own have ended too, before the sandbox sweeps its workspace.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::reaper;

/// Bytes of output kept per background process (the oldest are dropped first).
pub const LOG_CAP: usize = 1 << 20;
/// Background processes one task may have running at once.
pub const MAX_RUNNING: usize = 8;
/// Lines `log` returns when the model gives no limit.
const DEFAULT_LOG_LINES: usize = 200;

/// Why a process action failed (the message is what the model reads).
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error(
        "no background process with session_id {0:?}; `process` with action \"list\" shows them"
    )]
    NotFound(String),
    #[error("session_id is required for action {0:?}")]
    NoSession(String),
    #[error(
        "unknown action {0:?}; the actions are list, poll, log, wait, kill, write, submit, close"
    )]
    UnknownAction(String),
    #[error("{MAX_RUNNING} background processes are already running in this task; kill one first")]
    TooMany,
    #[error("cannot start the background command: {0}")]
    Spawn(std::io::Error),
    #[error("the process's stdin is closed")]
    StdinClosed,
    #[error("cannot write to the process's stdin: {0}")]
    Write(std::io::Error),
}

/// What a background process has printed so far.
#[derive(Default)]
struct Log {
    /// The kept bytes (at most [`LOG_CAP`]).
    bytes: Vec<u8>,
    /// Bytes dropped from the front.
    dropped: u64,
    /// Total bytes read.
    total: u64,
    /// The reader has seen end of file.
    closed: bool,
}

impl Log {
    fn push(&mut self, data: &[u8]) {
        self.total += data.len() as u64;
        self.bytes.extend_from_slice(data);
        if self.bytes.len() > LOG_CAP {
            let cut = self.bytes.len() - LOG_CAP;
            self.bytes.drain(..cut);
            self.dropped += cut as u64;
        }
    }

    /// The text from absolute byte position `from` on (what is still kept of it).
    fn since(&self, from: u64) -> String {
        let start = from.saturating_sub(self.dropped) as usize;
        String::from_utf8_lossy(&self.bytes[start.min(self.bytes.len())..]).into_owned()
    }
}

/// One background command.
struct Bg {
    command: String,
    child: Child,
    pgid: u32,
    stdin: Option<ChildStdin>,
    log: Arc<Mutex<Log>>,
    started: Instant,
    /// Absolute log position up to which `poll` has shown output.
    polled: u64,
    exit_code: Option<i32>,
    killed: bool,
}

impl Bg {
    /// Reap the child if it has exited; true while it runs.
    fn running(&mut self) -> bool {
        if self.exit_code.is_some() {
            return false;
        }
        match self.child.try_wait() {
            Ok(Some(st)) => {
                self.finish(st);
                false
            }
            Ok(None) => true,
            Err(_) => {
                self.exit_code = Some(-1);
                false
            }
        }
    }

    fn finish(&mut self, st: std::process::ExitStatus) {
        self.exit_code = Some(st.code().unwrap_or(128 + st.signal().unwrap_or(0)));
        reaper::finished(self.pgid);
        // What the command left behind in its group goes with it.
        super::exec::kill_group(self.pgid);
    }

    fn kill(&mut self) {
        if self.running() {
            // A sandbox's processes are not all in the group: bwrap runs the command in
            // a session of its own (`--new-session`), under a first process whose end
            // takes its PID namespace with it. That happens after bwrap is reaped, so
            // the kill waits for bwrap's children to end too.
            let below = super::exec::kill_tree(self.pgid);
            self.killed = true;
            if let Ok(st) = self.child.wait() {
                self.finish(st);
            }
            for child in below {
                // Readable once the process has ended: for a PID namespace's first
                // process, once every process of the namespace has.
                let _ = super::exec::wait_readable(&child, GONE_PATIENCE);
            }
        }
        self.stdin = None;
    }

    fn status(&mut self) -> &'static str {
        match (self.running(), self.killed) {
            (true, _) => "running",
            (false, true) => "killed",
            (false, false) => "exited",
        }
    }

    fn summary(&mut self, id: &str) -> Value {
        let status = self.status();
        let log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        json!({
            "session_id": id,
            "command": self.command,
            "pid": self.pgid,
            "status": status,
            "exit_code": self.exit_code,
            "uptime_seconds": self.started.elapsed().as_secs(),
            "output_bytes": log.total,
        })
    }
}

/// How long a kill waits for a sandbox's processes to end after their sandbox's.
const GONE_PATIENCE: Duration = Duration::from_secs(5);

/// The background processes of one task, by session id.
#[derive(Default)]
pub struct Processes {
    procs: BTreeMap<String, Bg>,
    next: u32,
    /// Bytes one `poll`/`wait` returns at most (the sandbox's output cap).
    pub output_cap: usize,
}

impl Processes {
    /// An empty set whose poll and wait results hold at most `output_cap` bytes.
    pub fn new(output_cap: usize) -> Processes {
        Processes {
            procs: BTreeMap::new(),
            next: 0,
            output_cap,
        }
    }

    /// Start `cmd` (already built by the sandbox: `sh -c` with stderr merged) in the
    /// background; returns what the model is told.
    pub fn start(&mut self, mut cmd: Command, command: &str) -> Result<Value, ProcessError> {
        let running = self
            .procs
            .values_mut()
            .map(|p| p.running())
            .filter(|&r| r)
            .count();
        if running >= MAX_RUNNING {
            return Err(ProcessError::TooMany);
        }
        cmd.process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = reaper::spawn(&mut cmd).map_err(ProcessError::Spawn)?;
        let pgid = child.id();
        let log = Arc::new(Mutex::new(Log::default()));
        for r in [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let log = log.clone();
            std::thread::spawn(move || pump(r, &log));
        }
        self.next += 1;
        // Numbered in start order: the same script gives the same ids (reproducible
        // trajectories, scriptable tests).
        let id = format!("proc_{}", self.next);
        let stdin = child.stdin.take();
        self.procs.insert(
            id.clone(),
            Bg {
                command: command.to_string(),
                child,
                pgid,
                stdin,
                log,
                started: Instant::now(),
                polled: 0,
                exit_code: None,
                killed: false,
            },
        );
        Ok(json!({
            "output": "started in the background; use the process tool with this session_id to follow it",
            "session_id": id,
            "pid": pgid,
            "exit_code": Value::Null,
            "error": Value::Null,
        }))
    }

    /// One `process` call.
    pub fn call(&mut self, args: &Value, wait_cap: Duration) -> Result<Value, ProcessError> {
        let action = args.get("action").and_then(Value::as_str).unwrap_or("");
        if action == "list" {
            let list: Vec<Value> = self.procs.iter_mut().map(|(id, p)| p.summary(id)).collect();
            return Ok(json!({"processes": list}));
        }
        if !matches!(
            action,
            "poll" | "log" | "wait" | "kill" | "write" | "submit" | "close"
        ) {
            return Err(ProcessError::UnknownAction(action.to_string()));
        }
        let id = match args.get("session_id") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => return Err(ProcessError::NoSession(action.to_string())),
        };
        let cap = self.output_cap;
        let p = self
            .procs
            .get_mut(&id)
            .ok_or_else(|| ProcessError::NotFound(id.clone()))?;
        match action {
            "poll" => Ok(poll(p, &id, cap)),
            "log" => Ok(read_log(p, &id, args)),
            "wait" => {
                let want = args
                    .get("timeout")
                    .and_then(Value::as_u64)
                    .map_or(wait_cap, Duration::from_secs)
                    .min(wait_cap);
                let until = Instant::now() + want;
                while p.running() && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(20));
                }
                let timed_out = p.running();
                // Let the readers drain what an exited process wrote.
                drain(p);
                let mut v = poll(p, &id, cap);
                v["timed_out"] = json!(timed_out);
                Ok(v)
            }
            "kill" => {
                let was = p.running();
                p.kill();
                drain(p);
                let mut v = p.summary(&id);
                v["killed"] = json!(was);
                Ok(v)
            }
            "write" | "submit" => {
                let mut data = args
                    .get("data")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                if action == "submit" {
                    data.push('\n');
                }
                let w = p.stdin.as_mut().ok_or(ProcessError::StdinClosed)?;
                w.write_all(data.as_bytes())
                    .and_then(|_| w.flush())
                    .map_err(ProcessError::Write)?;
                Ok(json!({"session_id": id, "bytes_written": data.len(), "status": p.status()}))
            }
            _ => {
                p.stdin = None;
                Ok(json!({"session_id": id, "stdin": "closed", "status": p.status()}))
            }
        }
    }

    /// Session ids of processes still running.
    pub fn running(&mut self) -> Vec<String> {
        self.procs
            .iter_mut()
            .filter_map(|(id, p)| p.running().then(|| id.clone()))
            .collect()
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        for p in self.procs.values_mut() {
            p.kill();
        }
    }
}

fn pump(mut r: Box<dyn Read + Send>, log: &Mutex<Log>) {
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        match r.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => log
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(&chunk[..n]),
        }
    }
    log.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
}

/// After an exit, give the readers a moment to take the last bytes from the pipes.
fn drain(p: &mut Bg) {
    if p.running() {
        return;
    }
    let until = Instant::now() + Duration::from_millis(500);
    while Instant::now() < until && !p.log.lock().unwrap_or_else(|e| e.into_inner()).closed {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// New output since the last poll (its last `cap` bytes), and the status.
fn poll(p: &mut Bg, id: &str, cap: usize) -> Value {
    let status = p.status();
    let (mut text, total) = {
        let log = p.log.lock().unwrap_or_else(|e| e.into_inner());
        (log.since(p.polled), log.total)
    };
    p.polled = total;
    if text.len() > cap {
        let mut cut = text.len() - cap;
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        text = format!(
            "[... {} earlier bytes not shown; `log` pages through them ...]\n{}",
            cut,
            &text[cut..]
        );
    }
    json!({
        "session_id": id,
        "status": status,
        "exit_code": p.exit_code,
        "output": text,
    })
}

/// Lines `offset..offset+limit` of the log (default: the last 200 lines).
fn read_log(p: &mut Bg, id: &str, args: &Value) -> Value {
    let status = p.status();
    let text = p.log.lock().unwrap_or_else(|e| e.into_inner()).since(0);
    let lines: Vec<&str> = text.lines().collect();
    let limit = args
        .get("limit")
        .and_then(Value::as_u64)
        .map_or(DEFAULT_LOG_LINES, |l| l.max(1) as usize)
        .min(2000);
    let offset = match args.get("offset").and_then(Value::as_u64) {
        Some(o) if o > 0 => o as usize,
        _ => lines.len().saturating_sub(limit),
    }
    .min(lines.len());
    let end = (offset + limit).min(lines.len());
    json!({
        "session_id": id,
        "status": status,
        "exit_code": p.exit_code,
        "total_lines": lines.len(),
        "offset": offset,
        "output": lines[offset..end].join("\n"),
    })
}

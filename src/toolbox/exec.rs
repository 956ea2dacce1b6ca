//! Running one command to its end: in a process group of its own, its output capped
//! (head and tail kept), killed with its whole group past its timeout, and whatever it
//! left running in the group killed when it ends. [`super::sandbox`] runs every
//! foreground call through [`execute`]; so does a pod's supervisor inside its sandbox
//! ([`super::pod`]).

use std::collections::VecDeque;
use std::io::Write;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::reaper;

/// What one command did.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RunOutput {
    /// stdout and stderr as one text (the middle cut when over the cap, with a note).
    pub output: String,
    /// The exit code; 128+N when killed by signal N; 124 on timeout.
    pub exit_code: i32,
    pub timed_out: bool,
    /// True when the output was cut.
    pub truncated: bool,
    /// Processes still running when the command ended were killed.
    pub killed_leftovers: bool,
    /// The process group the command ran in (its leader's pid on the host; in a pod
    /// ([`super::pod`]), as the pod's PID namespace numbers it).
    pub pgid: u32,
    /// The resource limit the command hit, as the model is told (see [`Limits::hit`]).
    pub limit: Option<String>,
}

/// Whether process group `pgid` has any process, zombies included (`kill(-pgid, 0)`).
fn group_exists(pgid: u32) -> bool {
    i32::try_from(pgid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .is_none_or(|p| rustix::process::test_kill_process_group(p) != Err(rustix::io::Errno::SRCH))
}

/// Live (not zombie) processes of process group `pgid`, from /proc.
pub fn group_members(pgid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Some((_, pgrp, state)) = reaper::stat_of(pid)
            && pgrp == pgid
            && !matches!(state, 'Z' | 'X')
        {
            out.push(pid);
        }
    }
    out
}

/// Whether `fd` has something to read, or its end, within `patience` (a pidfd: whether
/// its process has ended).
pub(crate) fn wait_readable(
    fd: impl rustix::fd::AsFd,
    patience: Duration,
) -> rustix::io::Result<bool> {
    use rustix::event::{PollFd, PollFlags, poll};
    let until = Instant::now() + patience;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        let mut fds = [PollFd::new(&fd, PollFlags::IN)];
        match poll(&mut fds, Some(&timespec(left))) {
            Ok(0) if left.is_zero() => return Ok(false),
            Ok(0) | Err(rustix::io::Errno::INTR) => {}
            Ok(_) => return Ok(true),
            Err(e) => return Err(e),
        }
    }
}

/// `d` as the timeout of `poll`.
pub(crate) fn timespec(d: Duration) -> rustix::event::Timespec {
    rustix::event::Timespec {
        tv_sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(d.subsec_nanos()),
    }
}

/// Output kept from one stream: the first and last `cap / 2` bytes, and a count.
struct Capped {
    cap: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
}

impl Capped {
    fn new(cap: usize) -> Capped {
        Capped {
            cap,
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
        }
    }

    fn push(&mut self, mut data: &[u8]) {
        self.total += data.len() as u64;
        let head_cap = self.cap / 2;
        if self.head.len() < head_cap {
            let n = (head_cap - self.head.len()).min(data.len());
            self.head.extend_from_slice(&data[..n]);
            data = &data[n..];
        }
        let tail_cap = self.cap - head_cap;
        if data.len() >= tail_cap {
            self.tail.clear();
            self.tail.extend(&data[data.len() - tail_cap..]);
        } else {
            let excess = (self.tail.len() + data.len()).saturating_sub(tail_cap);
            self.tail.drain(..excess);
            self.tail.extend(data);
        }
    }

    /// The text, with a note in the middle when bytes were dropped.
    fn text(&self) -> (String, bool) {
        let kept = self.head.len() + self.tail.len();
        let mut s = String::from_utf8_lossy(&self.head).into_owned();
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        if (kept as u64) < self.total {
            s.push_str(&format!(
                "\n\n[... output truncated: {} bytes in total; the middle {} bytes are not shown ...]\n\n",
                self.total,
                self.total - kept as u64
            ));
            s.push_str(&String::from_utf8_lossy(&tail));
            (s, true)
        } else {
            s.push_str(&String::from_utf8_lossy(&tail));
            (s, false)
        }
    }
}

/// The command's two output pipes, read as they fill (stdout, then stderr), in this
/// thread: no reader thread per call.
struct Pipes {
    open: [Option<std::os::fd::OwnedFd>; 2],
    chunk: Vec<u8>,
}

impl Pipes {
    fn done(&self) -> bool {
        self.open.iter().all(Option::is_none)
    }

    /// Wait up to `wait` for output, a pipe's end, or (`pidfd`) the child's end, and
    /// read what came into `bufs`.
    fn pump(
        &mut self,
        bufs: &mut [Capped; 2],
        pidfd: Option<&std::os::fd::OwnedFd>,
        wait: Duration,
    ) {
        use rustix::event::{PollFd, PollFlags, poll};
        let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(3);
        let mut which = [usize::MAX; 2];
        for (i, fd) in self.open.iter().enumerate() {
            if let Some(fd) = fd {
                which[fds.len()] = i;
                fds.push(PollFd::new(fd, PollFlags::IN));
            }
        }
        let pipes = fds.len();
        if let Some(p) = pidfd {
            fds.push(PollFd::new(p, PollFlags::IN));
        }
        if !matches!(poll(&mut fds, Some(&timespec(wait))), Ok(n) if n > 0) {
            return;
        }
        let ready: Vec<usize> = fds[..pipes]
            .iter()
            .enumerate()
            .filter(|(_, f)| !f.revents().is_empty())
            .map(|(k, _)| which[k])
            .collect();
        drop(fds);
        for i in ready {
            let Some(fd) = &self.open[i] else { continue };
            match rustix::io::read(fd, &mut self.chunk) {
                Ok(0) => self.open[i] = None,
                Ok(n) => bufs[i].push(&self.chunk[..n]),
                Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => {}
                Err(_) => self.open[i] = None,
            }
        }
    }
}

/// Send SIGKILL to every process of process group `pgid`.
pub(crate) fn kill_group(pgid: u32) {
    signal_group(pgid, rustix::process::Signal::KILL);
}

fn signal_group(pgid: u32, sig: rustix::process::Signal) {
    if let Some(p) = pid(pgid) {
        let _ = rustix::process::kill_process_group(p, sig);
    }
}

/// `id` as a pid (`None` for 0 and ids past `i32`).
fn pid(id: u32) -> Option<rustix::process::Pid> {
    i32::try_from(id)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
}

/// Kill process group `pgid`, whose leader is a child of this process, and the
/// leader's own children, also those in a session of their own. Returns a pidfd of
/// each of those children: readable once it has ended, which for a PID namespace's
/// first process means once the whole namespace has.
///
/// The leader is stopped first, so that it cannot start a child between the look at
/// its children and the kill. bwrap needs that: its first process in the sandbox asks
/// to die with bwrap only some time after bwrap has started it, and bwrap killed in
/// between leaves that process, and the command, running for good (about 1 in 40 of
/// the bwrap sandboxes killed within 4 ms of their start, measured).
pub(crate) fn kill_tree(pgid: u32) -> Vec<rustix::fd::OwnedFd> {
    use rustix::process::{Pid, Signal, WaitId, WaitIdOptions, pidfd_open, waitid};
    let Some(leader) = pid(pgid) else {
        return Vec::new();
    };
    signal_group(pgid, Signal::STOP);
    // Until it has stopped or ended; the status stays to be taken by its `Child`.
    let stopped = WaitIdOptions::STOPPED | WaitIdOptions::EXITED | WaitIdOptions::NOWAIT;
    while matches!(
        waitid(WaitId::Pid(leader), stopped),
        Err(rustix::io::Errno::INTR)
    ) {}
    let list =
        std::fs::read_to_string(format!("/proc/{pgid}/task/{pgid}/children")).unwrap_or_default();
    let below: Vec<_> = list
        .split_whitespace()
        .filter_map(|p| Pid::from_raw(p.parse().ok()?))
        .filter_map(|p| pidfd_open(p, rustix::process::PidfdFlags::empty()).ok())
        .collect();
    kill_group(pgid);
    for child in &below {
        let _ = rustix::process::pidfd_send_signal(child, Signal::KILL);
    }
    below
}

/// Spawn `cmd` in a new process group and wait for it (see [`Sandbox::run_shell`]).
/// With `reap_home`, orphans of the task whose `HOME` it is are killed too when the
/// command ends ([`reaper::reap_orphans`]).
pub fn execute(
    mut cmd: Command,
    stdin: Option<&[u8]>,
    timeout: Duration,
    cap: usize,
    reap_home: Option<&str>,
) -> Result<RunOutput> {
    cmd.process_group(0)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = reaper::spawn(&mut cmd).context("cannot start the command")?;
    let pgid = child.id();
    let mut bufs = [Capped::new(cap), Capped::new(cap.min(8192))];
    let mut pipes = Pipes {
        open: [
            child.stdout.take().map(std::os::fd::OwnedFd::from),
            child.stderr.take().map(std::os::fd::OwnedFd::from),
        ],
        chunk: vec![0u8; 64 * 1024],
    };
    if let (Some(data), Some(mut w)) = (stdin, child.stdin.take()) {
        let data = data.to_vec();
        std::thread::spawn(move || {
            let _ = w.write_all(&data);
        });
    }
    // Readable when the child ends (Linux 5.3+); without it, the wait below wakes up
    // every 20 ms to ask.
    let pidfd = rustix::process::pidfd_open(
        rustix::process::Pid::from_child(&child),
        rustix::process::PidfdFlags::empty(),
    )
    .ok();
    let start = Instant::now();
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Ok(st),
            Ok(None) => {}
            Err(e) => break Err(e),
        }
        let left = timeout.saturating_sub(start.elapsed());
        if left.is_zero() {
            timed_out = true;
            kill_tree(pgid);
            break child.wait();
        }
        let wait = if pidfd.is_some() {
            left
        } else {
            left.min(Duration::from_millis(20))
        };
        if pipes.done() && pidfd.is_none() {
            std::thread::sleep(wait);
        } else {
            pipes.pump(&mut bufs, pidfd.as_ref(), wait);
        }
    };
    reaper::finished(pgid);
    let status = status?;
    // Whatever the command left running in its group goes too. `kill(-pgid, 0)` says
    // in one call whether the group has any process left; only then is /proc read
    // (zombies do not count as leftovers).
    let mut killed_leftovers = !timed_out && group_exists(pgid) && !group_members(pgid).is_empty();
    kill_group(pgid);
    // Orphans (processes that left the group and whose parent died) are re-parented
    // to traj, a subreaper: kill those of this task before waiting for the pipes.
    if let Some(home) = reap_home {
        // First let the killed group die: a member's children are re-parented only
        // when it has exited (bounded: SIGKILL cannot be ignored).
        let until = Instant::now() + Duration::from_secs(2);
        while group_exists(pgid) && !group_members(pgid).is_empty() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        killed_leftovers |= reaper::reap_orphans(home, reaper::Scan::Children) > 0 && !timed_out;
    }
    // The pipes end when every writer is gone; a process that escaped the group could
    // hold one open, so do not wait for it forever.
    let until = Instant::now() + Duration::from_secs(2);
    while !pipes.done() {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        pipes.pump(&mut bufs, None, left);
    }
    let [out_buf, err_buf] = bufs;
    let (mut output, truncated) = out_buf.text();
    let (err, _) = err_buf.text();
    if !err.trim().is_empty() {
        if !output.is_empty() && !output.ends_with('\n') {
            output.push('\n');
        }
        output.push_str(&err);
    }
    let exit_code = if timed_out {
        124
    } else if let Some(c) = status.code() {
        c
    } else {
        128 + status.signal().unwrap_or(0)
    };
    Ok(RunOutput {
        output,
        exit_code,
        timed_out,
        truncated,
        killed_leftovers,
        pgid,
        limit: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bwrap sandbox killed while it starts leaves nothing running: killed at random
    /// moments of its first few milliseconds, some of them between bwrap starting the
    /// sandbox's first process and that process asking to die with bwrap.
    #[test]
    fn a_bwrap_sandbox_killed_as_it_starts_leaves_nothing() {
        if let Err(why) = super::super::sandbox::bwrap_works() {
            panic!("this test needs bubblewrap: {why}");
        }
        let ws = tempfile::tempdir().unwrap();
        let marker = format!("4{}", fastrand::u32(100_000..999_999));
        let mut left = Vec::new();
        for _ in 0..300 {
            let mut cmd = Command::new(super::super::bwrap::program());
            cmd.args(super::super::bwrap::bwrap_mounts(false, ws.path()))
                .args(["/bin/sh", "-c", &format!("sleep {marker}")])
                .process_group(0)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let mut child = cmd.spawn().unwrap();
            std::thread::sleep(Duration::from_micros(fastrand::u64(0..6000)));
            let below = kill_tree(child.id());
            child.wait().unwrap();
            for fd in below {
                assert!(wait_readable(&fd, Duration::from_secs(5)).unwrap());
            }
            left.extend(processes_running(&marker));
        }
        for pid in &left {
            let _ = rustix::process::kill_process(
                rustix::process::Pid::from_raw(*pid).unwrap(),
                rustix::process::Signal::KILL,
            );
        }
        assert_eq!(left, Vec::<i32>::new());
    }

    /// Pids of the processes whose command line ends with `sleep {marker}`.
    fn processes_running(marker: &str) -> Vec<i32> {
        let want = format!("sleep\0{marker}\0");
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c.ends_with(want.as_bytes()))
            })
            .collect()
    }
}

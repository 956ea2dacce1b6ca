//! No survivors in local mode: every process a tool call starts dies when the call
//! ends, also one that left the call's process group (`setsid`), changed directory
//! or double-forked into a daemon.
//!
//! traj makes itself a child subreaper (`PR_SET_CHILD_SUBREAPER`) when the first
//! local sandbox is made, so a process whose parent dies is re-parented to traj
//! rather than to init: such orphans can always be found (their parent is traj) and
//! killed. When a call ends, [`reap_orphans`] kills and reaps every orphan of that
//! task, round after round until none is left (killing one hands its own children to
//! traj); it looks at traj's own children (`/proc/self/task/*/children`, cheap), and
//! when the task ends at every process. An orphan belongs to a task by its `HOME`,
//! which is the task's own workspace in local mode; an orphan whose environment says
//! nothing (unreadable, no `HOME`) is killed by whichever task's call ends first,
//! never left running.
//!
//! traj's own children are never taken for orphans: commands of calls in progress are
//! registered while they run ([`spawn`], [`finished`]), and any other child traj
//! starts stays in traj's process group (tool calls run in a group of their own).
//! A tool process could join traj's process group on purpose (`setpgid` to traj's
//! group, in the same session) to be skipped here; the task-end sweep by working
//! directory still applies to it, and the bwrap backend (a PID namespace) has no
//! such gap.

use std::collections::BTreeSet;
use std::process::{Child, Command};
use std::sync::{Mutex, OnceLock};

use rustix::process::{Pid, Signal, WaitOptions};

/// Pids of call commands in progress (traj's direct children).
static LEADERS: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());
/// Whether traj is a child subreaper.
static SUBREAPER: OnceLock<bool> = OnceLock::new();

/// Make this process a child subreaper (once); false when the kernel refused.
pub fn become_subreaper() -> bool {
    *SUBREAPER.get_or_init(|| {
        rustix::process::set_child_subreaper(Some(rustix::process::getpid())).is_ok()
    })
}

/// True once [`become_subreaper`] has succeeded.
pub fn is_subreaper() -> bool {
    SUBREAPER.get().copied().unwrap_or(false)
}

fn leaders() -> std::sync::MutexGuard<'static, BTreeSet<u32>> {
    LEADERS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Spawn a call's command and register it as in progress (under the same lock a
/// sweep holds, so a sweep never sees it unregistered).
pub fn spawn(cmd: &mut Command) -> std::io::Result<Child> {
    let mut live = leaders();
    let child = cmd.spawn()?;
    live.insert(child.id());
    Ok(child)
}

/// The command `pid` has been waited for.
pub fn finished(pid: u32) {
    leaders().remove(&pid);
}

/// Where [`reap_orphans`] looks for orphans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scan {
    /// This process's children, from `/proc/self/task/*/children` (cheap: what a call's
    /// end uses; the kernel may miss a child that appears while the list is read, which
    /// the next sweep catches), or every process where that file does not exist.
    Children,
    /// Every process in `/proc` (what a task's end uses).
    All,
}

/// This process's children, from every thread's `children` file; `None` where the
/// kernel lacks it (`CONFIG_PROC_CHILDREN`).
fn children() -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for t in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        match std::fs::read_to_string(t.path().join("children")) {
            Ok(list) => out.extend(
                list.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && out.is_empty() => return None,
            Err(_) => {} // a thread that ended meanwhile
        }
    }
    Some(out)
}

/// Every pid in `/proc` (of the caller's pid namespace).
pub(crate) fn all_pids() -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
        .collect()
}

/// `(ppid, pgrp, state)` of a process, from `/proc/PID/stat`.
pub(crate) fn stat_of(pid: u32) -> Option<(u32, u32, char)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut f = rest.split(' ');
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    let pgrp = f.next()?.parse().ok()?;
    Some((ppid, pgrp, state))
}

/// The `HOME` of a process's environment (as it was at its `execve`).
fn home_of(pid: u32) -> Option<Vec<u8>> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    env.split(|&b| b == 0)
        .find_map(|kv| kv.strip_prefix(b"HOME=").map(<[u8]>::to_vec))
}

/// Orphans re-parented to this process that belong to the task whose `HOME` is
/// `home` or to no task: (pid, is a zombie).
fn orphans(home: &[u8], live: &BTreeSet<u32>, scan: Scan) -> Vec<(u32, bool)> {
    let me = std::process::id();
    let my_group = rustix::process::getpgrp().as_raw_nonzero().get() as u32;
    let candidates = match scan {
        Scan::Children => children().unwrap_or_else(all_pids),
        Scan::All => all_pids(),
    };
    let mut out = Vec::new();
    for pid in candidates {
        let Some((ppid, pgrp, state)) = stat_of(pid) else {
            continue;
        };
        if ppid != me || pgrp == my_group || live.contains(&pid) {
            continue;
        }
        let zombie = state == 'Z' || state == 'X';
        if !zombie && home_of(pid).is_some_and(|h| h != home) {
            continue; // another task's, still running its call
        }
        out.push((pid, zombie));
    }
    out
}

/// Kill and reap every orphan of the task whose `HOME` is `home` (see the module
/// documentation). Returns how many were still running. Does nothing unless this
/// process is a subreaper.
pub fn reap_orphans(home: &str, scan: Scan) -> usize {
    if !is_subreaper() {
        return 0;
    }
    let mut killed = 0;
    for _ in 0..64 {
        let found = {
            let live = leaders();
            let found = orphans(home.as_bytes(), &live, scan);
            for &(pid, zombie) in &found {
                if let Some(p) = Pid::from_raw(pid as i32)
                    && !zombie
                {
                    let _ = rustix::process::kill_process(p, Signal::KILL);
                }
            }
            found
        };
        if found.is_empty() {
            break;
        }
        for &(pid, zombie) in &found {
            killed += usize::from(!zombie);
            if let Some(p) = Pid::from_raw(pid as i32) {
                // Reaped here, so its children are re-parented before the next round.
                let _ = rustix::process::waitpid(Some(p), WaitOptions::empty());
            }
        }
    }
    killed
}
/// SIGKILL every process but this one for which `doomed` holds, given its pid and
/// its `/proc/PID` directory (best effort: reads /proc once).
pub(crate) fn kill_processes_where(doomed: impl Fn(&std::path::Path) -> bool) {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    let me = std::process::id();
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid as u32 != me
            && doomed(&e.path())
            && let Some(p) = rustix::process::Pid::from_raw(pid)
        {
            let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
        }
    }
}

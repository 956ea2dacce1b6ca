//! Temp files and folders of a run: named after the process that made them, listed
//! while they live so that a signal handler removes them ([`remove_live_temps`]), and,
//! when a process died without cleaning up (`kill -9`, a power cut), removed by the
//! next run of any stage that writes in the same folder ([`remove_stale`]).
//!
//! A name is `<prefix><host>-<pid>-<random><suffix>`: `host` tells this machine and
//! PID namespace apart from others that may share the folder (a network file system,
//! a container), `pid` is the process. A stale entry is one whose `host` is this one's
//! and whose process no longer exists (`kill(pid, 0)` answers "no such process"); an
//! entry of a live process, of another host, or of an older traj (no pid in the name)
//! is never touched.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// The temp files and folders of this process not yet committed or dropped.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Folders already cleared of stale entries by this process (each once).
static SWEPT: Mutex<Option<HashSet<(PathBuf, &'static str)>>> = Mutex::new(None);

/// A temp file in `dir`, made by `builder`, with the mode a file written at `target`
/// should have once the temp file is renamed onto it, as `>` gives it: `target`'s own
/// mode when it exists (set after creation, as the umask narrows the mode `open(2)` is
/// given), else the mode of a new file, `0666` narrowed by the umask. Not the temp
/// file's private `0600`, which would leave a shared output unreadable to the others.
pub fn file_with_mode_of(
    builder: &mut tempfile::Builder<'_, '_>,
    dir: &Path,
    target: &Path,
) -> std::io::Result<tempfile::NamedTempFile> {
    use std::os::unix::fs::PermissionsExt;
    let kept = std::fs::metadata(target)
        .ok()
        .map(|m| m.permissions().mode() & 0o7777);
    let tmp = builder
        .permissions(std::fs::Permissions::from_mode(kept.unwrap_or(0o666)))
        .tempfile_in(dir)?;
    if let Some(mode) = kept {
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(mode))?;
    }
    Ok(tmp)
}

/// Remove every temp file and folder this process still lists (from a signal handler,
/// just before the process dies).
pub fn remove_live_temps() {
    let live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    for p in live.iter() {
        if p.is_dir() {
            // A file may appear while the folder is removed: try again.
            for _ in 0..3 {
                if std::fs::remove_dir_all(p).is_ok() || !p.exists() {
                    break;
                }
            }
        } else {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Lists a temp file or folder in [`LIVE`] while it lives.
#[derive(Debug)]
pub(crate) struct Listed(PathBuf);

impl Listed {
    pub(crate) fn new(p: &Path) -> Listed {
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        live.push(p.to_path_buf());
        Listed(p.to_path_buf())
    }
}

impl Drop for Listed {
    fn drop(&mut self) {
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = live.iter().position(|p| *p == self.0) {
            live.swap_remove(i);
        }
    }
}

/// This machine and PID namespace, as 8 hex digits: the boot id and the PID namespace
/// of this process (Linux); `0` where neither can be read.
fn host() -> &'static str {
    static HOST: OnceLock<String> = OnceLock::new();
    HOST.get_or_init(|| {
        use sha2::Digest as _;
        let boot = std::fs::read("/proc/sys/kernel/random/boot_id").unwrap_or_default();
        let ns = std::fs::read_link("/proc/self/ns/pid").unwrap_or_default();
        if boot.is_empty() && ns.as_os_str().is_empty() {
            return "0".to_string();
        }
        let mut h = sha2::Sha256::new();
        h.update(&boot);
        h.update(ns.as_os_str().as_encoded_bytes());
        h.finalize()[..4]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    })
}

/// The start of the names of this process's temp entries: `<prefix><host>-<pid>-`.
pub(crate) fn name_prefix(prefix: &str) -> String {
    format!("{prefix}{}-{}-", host(), std::process::id())
}

/// The process that made the entry `name` (`<prefix><host>-<pid>-...<suffix>`), when
/// it was made on this host.
fn owner(name: &str, prefix: &str, suffix: &str) -> Option<i32> {
    let rest = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
    let (h, rest) = rest.split_once('-')?;
    let (pid, _) = rest.split_once('-')?;
    if h != host() || pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// True when no process `pid` exists (a process of another user exists: `EPERM`).
fn is_dead(pid: i32) -> bool {
    match rustix::process::Pid::from_raw(pid) {
        Some(p) => rustix::process::test_kill_process(p) == Err(rustix::io::Errno::SRCH),
        None => false,
    }
}

/// Remove the temp entries of dead processes of this host in `dir` (files and folders
/// named `<prefix><host>-<pid>-...<suffix>`), once per folder and prefix per process.
/// Returns how many were removed; a folder that cannot be read removes nothing.
pub(crate) fn remove_stale(dir: &Path, prefix: &'static str, suffix: &str) -> usize {
    {
        let mut swept = SWEPT.lock().unwrap_or_else(|e| e.into_inner());
        let key = (
            dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf()),
            prefix,
        );
        if !swept.get_or_insert_with(HashSet::new).insert(key) {
            return 0;
        }
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let me = std::process::id() as i32;
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|n| owner(n, prefix, suffix)) else {
            continue;
        };
        if pid == me || !is_dead(pid) {
            continue;
        }
        let p = e.path();
        let gone = match e.file_type() {
            Ok(t) if t.is_dir() => std::fs::remove_dir_all(&p),
            _ => std::fs::remove_file(&p),
        };
        removed += gone.is_ok() as usize;
    }
    removed
}

/// A private temp folder (removed when dropped and on signals), named after this
/// process, in `dir` or the system temp folder; stale ones of dead processes there are
/// removed first.
pub fn temp_dir(dir: Option<&Path>, prefix: &'static str) -> std::io::Result<TempDir> {
    let parent = dir.map_or_else(std::env::temp_dir, Path::to_path_buf);
    remove_stale(&parent, prefix, "");
    let dir = tempfile::Builder::new()
        .prefix(&name_prefix(prefix))
        .tempdir_in(&parent)?;
    let listed = Listed::new(dir.path());
    Ok(TempDir {
        dir,
        _listed: listed,
    })
}

/// A folder made by [`temp_dir`].
#[derive(Debug)]
pub struct TempDir {
    dir: tempfile::TempDir,
    _listed: Listed,
}

impl TempDir {
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_entries_of_dead_processes_only() {
        let d = tempfile::tempdir().unwrap();
        // A process that has ended: its pid is free (until reused, when it is kept).
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let h = host();
        let me = std::process::id();
        let names = [
            format!(".traj-{h}-{dead}-abc.tmp"),
            format!(".traj-{h}-{me}-abc.tmp"),
            format!(".traj-{h}-1-abc.tmp"),
            format!(".traj-ffffffff-{dead}-abc.tmp"),
            ".traj-abc123.tmp".to_string(),
            format!(".traj-{h}-{dead}-abc.jsonl"),
        ];
        for n in &names {
            std::fs::write(d.path().join(n), b"x").unwrap();
        }
        assert_eq!(remove_stale(d.path(), ".traj-", ".tmp"), 1);
        let mut left: Vec<String> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        let mut want: Vec<String> = names[1..].to_vec();
        want.sort();
        assert_eq!(left, want);
        // Once per folder and prefix.
        std::fs::write(d.path().join(&names[0]), b"x").unwrap();
        assert_eq!(remove_stale(d.path(), ".traj-", ".tmp"), 0);
    }
}

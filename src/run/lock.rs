//! The exclusive lock on a run directory: `RUN_DIR/.lock`, `flock`ed for the life of
//! the process (the kernel releases it on any death, `kill -9` included) and holding the
//! holder's pid, so that two traj-run processes never append to one run.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rustix::fs::{FlockOperation, flock};

/// The name of the lock file in the run directory.
pub const LOCK_FILE: &str = ".lock";

/// Why the run directory could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "{} is in use by another traj-run (pid {pid}); wait for it to end, or pass --wait",
        dir.display()
    )]
    Busy { dir: PathBuf, pid: String },
    /// The stop flag was set (a signal) while waiting for the holder to end.
    #[error("interrupted while waiting for {} (held by pid {pid})", dir.display())]
    Interrupted { dir: PathBuf, pid: String },
    #[error("cannot lock {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A held lock; dropping it (or dying) releases it.
#[derive(Debug)]
pub struct RunLock {
    _file: File,
}

fn holder(file: &mut File) -> String {
    let mut s = String::new();
    let _ = file.seek(SeekFrom::Start(0));
    let _ = file.read_to_string(&mut s);
    let pid = s.trim();
    if pid.is_empty() {
        "unknown".into()
    } else {
        pid.to_string()
    }
}

/// How often a waiting process tries the lock again (and looks at its stop flag).
const WAIT_STEP: Duration = Duration::from_millis(100);

/// Lock `dir` (which must exist). Busy: an error naming the holder's pid, or, with
/// `wait`, wait until it is released (`on_wait` hears the holder's pid first), trying
/// again every [`WAIT_STEP`] and giving up as [`LockError::Interrupted`] once `stop` is
/// set (a blocking `flock` would not return for a signal whose handler restarts it).
pub fn lock(
    dir: &Path,
    wait: bool,
    stop: &AtomicBool,
    on_wait: impl FnOnce(&str),
) -> Result<RunLock, LockError> {
    let path = dir.join(LOCK_FILE);
    let io = |source| LockError::Io {
        path: path.clone(),
        source,
    };
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io)?;
    match flock(&file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {}
        Err(rustix::io::Errno::WOULDBLOCK) => {
            let pid = holder(&mut file);
            if !wait {
                return Err(LockError::Busy {
                    dir: dir.to_path_buf(),
                    pid,
                });
            }
            on_wait(&pid);
            loop {
                if stop.load(Ordering::Relaxed) {
                    return Err(LockError::Interrupted {
                        dir: dir.to_path_buf(),
                        pid,
                    });
                }
                std::thread::sleep(WAIT_STEP);
                match flock(&file, FlockOperation::NonBlockingLockExclusive) {
                    Ok(()) => break,
                    Err(rustix::io::Errno::WOULDBLOCK | rustix::io::Errno::INTR) => {}
                    Err(e) => return Err(io(e.into())),
                }
            }
        }
        Err(e) => return Err(io(e.into())),
    }
    file.set_len(0).map_err(io)?;
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    writeln!(file, "{}", std::process::id()).map_err(io)?;
    file.sync_data().map_err(io)?;
    Ok(RunLock { _file: file })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_with_the_holders_pid_and_freed_on_drop() {
        let d = tempfile::tempdir().unwrap();
        let go = AtomicBool::new(false);
        let held = lock(d.path(), false, &go, |_| {}).unwrap();
        let me = std::process::id().to_string();
        match lock(d.path(), false, &go, |_| {}) {
            Err(LockError::Busy { pid, .. }) => assert_eq!(pid, me),
            other => panic!("{other:?}"),
        }
        // Waiting, then stopped: it gives up instead of waiting on.
        let stop = AtomicBool::new(true);
        match lock(d.path(), true, &stop, |_| {}) {
            Err(LockError::Interrupted { pid, .. }) => assert_eq!(pid, me),
            other => panic!("{other:?}"),
        }
        drop(held);
        let again = lock(d.path(), false, &go, |_| {}).unwrap();
        drop(again);
        assert_eq!(
            std::fs::read_to_string(d.path().join(LOCK_FILE))
                .unwrap()
                .trim(),
            me
        );
    }
}

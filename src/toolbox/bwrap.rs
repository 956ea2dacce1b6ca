//! bubblewrap's command line for traj's sandboxes: the namespaces, the read-only
//! system directories, a private `/proc`, `/dev` and `/tmp`, and the workspace, the
//! one writable host directory. A sandbox per command ([`super::sandbox`]) and a kept
//! one ([`super::pod`]) start bwrap with the same options.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::config::{SANDBOX_PATH, find_on_path};

/// bubblewrap's executable, found once on the sandbox `PATH` (`bwrap` when it is not
/// there: starting it then fails with a clear error). A full path lets `Command` start
/// it with posix_spawn: given a bare name and an environment of its own, std forks,
/// and forking traj-run (hundreds of threads, tens of MB) copies its page tables and
/// makes every page copy-on-write for the rest of the run.
pub fn program() -> &'static Path {
    static BWRAP: OnceLock<PathBuf> = OnceLock::new();
    BWRAP.get_or_init(|| find_on_path("bwrap", SANDBOX_PATH).unwrap_or_else(|| "bwrap".into()))
}

/// Where the workspace appears inside bwrap and docker sandboxes.
pub const WORKSPACE_MOUNT: &str = "/workspace";

/// bubblewrap's options for a sandbox whose workspace is `workspace` on the host: its
/// namespaces, the read-only system directories, `/proc`, `/dev`, a private `/tmp`
/// and the workspace at [`WORKSPACE_MOUNT`].
pub fn bwrap_mounts(network: bool, workspace: &Path) -> Vec<String> {
    let mut a: Vec<String> = [
        "--die-with-parent",
        "--new-session",
        // No capability, also when traj runs as root: bwrap then keeps them by
        // default, and with CAP_SYS_ADMIN in the sandbox's user namespace a command
        // could remount a read-only host directory writable (tests/cli/sandbox.rs).
        "--cap-drop",
        "ALL",
        "--unshare-all",
        "--hostname",
        "sandbox",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if network {
        a.push("--share-net".into());
    }
    for dir in [
        "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
    ] {
        a.extend(["--ro-bind-try".into(), dir.into(), dir.into()]);
    }
    a.extend(
        [
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    a.push(workspace.display().to_string());
    a.push(WORKSPACE_MOUNT.into());
    a
}

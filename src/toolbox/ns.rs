//! Local mode's process view: where the kernel lets this user create namespaces, every
//! local tool command runs under util-linux `unshare` in a new user, PID and mount
//! namespace with a fresh `/proc`, so it sees only its own processes (never traj-run,
//! its parent, or any other process of the machine and their environments), and every
//! process it starts dies with it (when the namespace's first process ends, the kernel
//! kills the rest: a `setsid` daemon cannot outlive the call).
//!
//! Inside, the command runs as a user without capabilities: the caller's own uid, or
//! `nobody` when traj-run runs as root (mapped to root's host uid, so it still owns
//! root's files but has no capability, in the namespace or outside). Without
//! capabilities it cannot unmount the fresh `/proc` to uncover the host's; a nested
//! user namespace cannot either (the mounts it inherits are locked).
//!
//! Whether this works is probed once per process ([`view`]); where it does not (no
//! `unshare`, user namespaces disabled), local commands run as plain children and see
//! what docs/tools.md describes.

use std::process::{Command, Stdio};
use std::sync::OnceLock;

use super::config::{SANDBOX_PATH, on_path};

/// The uid a command is given inside its namespace when traj-run runs as root.
const NOBODY: u32 = 65534;

/// How local commands see the machine's processes (probed once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum View {
    /// Own user + PID + mount namespace: the command and its children only.
    Own(Vec<String>),
    /// Every process of the machine (and why the namespace could not be made).
    Host(String),
}

static VIEW: OnceLock<View> = OnceLock::new();

/// The argv prefix that puts a local command in its own namespaces, or why not.
pub fn view() -> &'static View {
    VIEW.get_or_init(probe)
}

/// The `unshare` command line that makes the next program the first process of new
/// user, PID and mount namespaces (a pod's supervisor: [`super::pod`]), where [`view`]
/// found they can be made.
pub fn init_prefix() -> Option<Vec<String>> {
    match view() {
        View::Own(prefix) => {
            let end = prefix.iter().position(|a| a == "--")?;
            Some(prefix[..=end].to_vec())
        }
        View::Host(_) => None,
    }
}

/// The `unshare` command line (program first; the command's argv follows) for this user.
fn prefix(unshare: &str) -> Vec<String> {
    let root = rustix::process::geteuid().is_root();
    let (uid, gid) = if root {
        (NOBODY, NOBODY)
    } else {
        (
            rustix::process::geteuid().as_raw(),
            rustix::process::getegid().as_raw(),
        )
    };
    vec![
        unshare.to_string(),
        "--user".into(),
        format!("--map-user={uid}"),
        format!("--map-group={gid}"),
        "--pid".into(),
        "--kill-child".into(),
        "--mount-proc".into(),
        "--".into(),
        // Process 1 of a PID namespace ignores signals it has no handler for, so the
        // command must not be it: a shell waits for it and exits with its status (128+N
        // when signal N killed it: SIGXCPU and SIGXFSZ then say which limit hit).
        "/bin/sh".into(),
        "-c".into(),
        "\"$@\"; exit $?".into(),
        "traj-init".into(),
    ]
}

fn probe() -> View {
    let Some(unshare) = ["/usr/bin/unshare", "/bin/unshare"]
        .into_iter()
        .find(|p| std::path::Path::new(p).is_file())
        .map(str::to_string)
        .or_else(|| on_path("unshare", SANDBOX_PATH).then(|| "unshare".to_string()))
    else {
        return View::Host("util-linux `unshare` is not installed".into());
    };
    let argv = prefix(&unshare);
    // The probe's parent must be the namespace's process 1, in a fresh /proc.
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .args(["/bin/sh", "-c", "echo $PPID; ls /proc | grep -c '^[0-9]'"])
        .env_clear()
        .env("PATH", SANDBOX_PATH)
        .stdin(Stdio::null())
        .output();
    match out {
        Ok(o) if o.status.success() && String::from_utf8_lossy(&o.stdout).starts_with("1\n") => {
            View::Own(argv)
        }
        Ok(o) => View::Host(format!(
            "unshare cannot create user and PID namespaces here: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => View::Host(format!("cannot run {unshare}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefix_maps_root_to_nobody_and_others_to_themselves() {
        let p = prefix("/usr/bin/unshare");
        assert_eq!(p[0], "/usr/bin/unshare");
        assert_eq!(p.last().map(String::as_str), Some("traj-init"));
        let uid = rustix::process::geteuid();
        let want = if uid.is_root() { NOBODY } else { uid.as_raw() };
        assert!(p.contains(&format!("--map-user={want}")), "{p:?}");
        assert!(p.iter().any(|a| a == "--mount-proc"));
    }
}

//! The sandbox under attack, in both backends (local and bwrap) and as two users
//! (the test's own and, when the test runs as root, `nobody` through setpriv): the
//! tool calls of a scripted endpoint are the attacks. Every test asserts 0 escapes,
//! 0 leaked secrets, 0 survivors, and each resource limit holding as a tool error the
//! model sees while the run goes on.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::standin::Standin;
use crate::util::*;

const SETPRIV: &str = "/usr/bin/setpriv";
const KEY: &str = "sk-sandbox-SECRET-90210";

/// Who runs traj-run.
#[derive(Debug, Clone, Copy, PartialEq)]
enum User {
    /// The test's own user.
    Me,
    /// `nobody`, switched to with setpriv (only when the test runs as root).
    Nobody,
}

/// The users a test can run as here: itself, and `nobody` when it is root (setpriv
/// must then exist: `scripts/setup.sh` installs util-linux; never skipped).
fn users() -> Vec<User> {
    if rustix::process::geteuid().is_root() {
        assert!(
            Path::new(SETPRIV).exists(),
            "{SETPRIV} is missing (util-linux): run scripts/setup.sh"
        );
        vec![User::Me, User::Nobody]
    } else {
        vec![User::Me]
    }
}

/// bubblewrap must work here (scripts/setup.sh installs it); never skipped.
fn backends() -> [&'static str; 2] {
    let ok = Command::new("bwrap")
        .args(["--unshare-all", "--ro-bind", "/", "/", "/bin/true"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "bwrap does not work here: run scripts/setup.sh");
    ["local", "bwrap"]
}

/// A directory everyone may write (the run dir and workspaces of `nobody`).
fn open_dir() -> tempfile::TempDir {
    let d = tmpdir();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    d
}

/// Run one task through traj-run as `user` in `backend`, with the API key in its
/// environment; returns the tool messages of its record and its stderr.
fn attack(
    d: &Path,
    user: User,
    backend: &str,
    turns: Value,
    extra: &[&str],
) -> (Vec<String>, String) {
    let s = Standin::json(json!({"rules": [{"match": "", "turns": turns}]}));
    let row = json!({"prompt": "attack", "toolsets": ["terminal", "file"]});
    std::fs::write(d.join("tasks.jsonl"), format!("{row}\n")).unwrap();
    // traj-run's parent is a shell holding the key too (as the issue found it): the
    // key must not be found in any process a tool can see, that one included.
    let parent = ["/bin/sh", "-c", "\"$@\"; exit $?", "parent"];
    let mut c = match user {
        User::Me => {
            let mut c = Command::new(parent[0]);
            c.args(&parent[1..]).arg(bin("traj-run"));
            c
        }
        User::Nobody => {
            // A copy `nobody` can run wherever the checkout is.
            let exe = d.join("traj-run");
            if !exe.exists() {
                std::fs::copy(bin("traj-run"), &exe).unwrap();
                std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
            let mut c = Command::new(SETPRIV);
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
                .args(parent)
                .arg(&exe);
            c
        }
    };
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", d)
        .env("TMPDIR", d)
        .env("OPENROUTER_API_KEY", KEY)
        .current_dir(d)
        .args(["--model", "standin", "--base-url", &s.url(), "-q"])
        .args(["--api-key-env", "OPENROUTER_API_KEY", "--run-dir", "data/r"])
        .args(["--sandbox", backend, "tasks.jsonl"])
        .args(extra);
    let o = run(c);
    assert_code(&o, 0);
    let recs = parse_jsonl(&stdout(&o));
    assert_eq!(recs.len(), 1, "{}", stderr(&o));
    let text = stdout(&o) + &stderr(&o);
    assert!(
        !text.contains(KEY),
        "{user:?} {backend}: the key leaked: {text}"
    );
    for e in std::fs::read_dir(d.join("data/r")).unwrap() {
        let p = e.unwrap().path();
        let t = String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned();
        assert!(!t.contains(KEY), "{}", p.display());
    }
    assert!(s.requests().iter().all(|r| !r.to_string().contains(KEY)));
    (tool_outputs(&recs[0]), stderr(&o))
}

/// Live processes whose command line contains `marker`, anywhere on the machine.
fn processes_with(marker: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let zombie = stat
                .rfind(')')
                .is_some_and(|i| stat[i + 2..].starts_with('Z'));
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            (!zombie && cmd.contains(marker)).then_some(cmd)
        })
        .collect()
}

fn output_of(tool: &str) -> String {
    let v: Value = serde_json::from_str(tool).unwrap_or_else(|_| json!({"output": tool}));
    format!(
        "{}{}",
        v["output"].as_str().unwrap_or(""),
        v["error"].as_str().unwrap_or("")
    )
}

#[test]
fn no_process_a_tool_can_see_holds_the_key_and_the_host_is_hidden() {
    for user in users() {
        for backend in backends() {
            let d = open_dir();
            let turns = json!([
                {"tool_calls": [{"name": "terminal", "arguments": {"command":
                    "echo n=$(ls /proc | grep -c '^[0-9]'); \
                     echo hits=$(grep -l -a SECRET /proc/*/environ 2>/dev/null | wc -l); \
                     cat /proc/$PPID/environ 2>&1 | tr '\\0' '\\n' | grep -c SECRET; \
                     umount /proc 2>&1; echo after=$(ls /proc | grep -c '^[0-9]'); \
                     env | grep -c SECRET"}}]},
                {"content": "Final: done"}
            ]);
            let (tools, _) = attack(d.path(), user, backend, turns, &[]);
            let out = output_of(&tools[0]);
            let ctx = format!("{user:?} {backend}: {out}");
            assert!(out.contains("hits=0\n"), "{ctx}");
            assert!(!out.contains(KEY), "{ctx}");
            // The command's own processes only: not traj-run, its parent or the host's.
            let n = |k: &str| -> u32 {
                let line = out.lines().find(|l| l.starts_with(k)).expect(k);
                line[k.len()..].trim().parse().unwrap()
            };
            assert!(n("n=") < 10, "{ctx}");
            // /proc cannot be unmounted to uncover the host's.
            assert!(n("after=") < 10, "{ctx}");
        }
    }
}

#[test]
fn hard_links_to_outside_files_are_refused_by_every_file_tool() {
    for user in users() {
        for backend in backends() {
            let d = open_dir();
            let secret = d.path().join("secret.txt");
            std::fs::write(&secret, "SECRET-4711\n").unwrap();
            std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o666)).unwrap();
            let turns = json!([
                {"tool_calls": [{"name": "terminal", "arguments": {"command": format!(
                    "ln {} hardl 2>&1; ln -s {} soft; echo planted", secret.display(), secret.display())}}]},
                {"tool_calls": [{"name": "read_file", "arguments": {"path": "hardl"}}]},
                {"tool_calls": [{"name": "patch", "arguments":
                    {"path": "hardl", "old_string": "SECRET", "new_string": "PWNED"}}]},
                {"tool_calls": [{"name": "write_file", "arguments": {"path": "hardl", "content": "PWNED"}}]},
                {"tool_calls": [{"name": "read_file", "arguments": {"path": "soft"}}]},
                {"tool_calls": [{"name": "write_file", "arguments": {"path": "soft", "content": "PWNED"}}]},
                {"tool_calls": [{"name": "read_file", "arguments": {"path": secret.display().to_string()}}]},
                {"content": "Final: done"}
            ]);
            let (tools, _) = attack(d.path(), user, backend, turns, &[]);
            assert_eq!(tools.len(), 7, "{tools:?}");
            assert!(tools[0].contains("planted"), "{}", tools[0]);
            for t in &tools[1..] {
                assert!(
                    !t.contains("SECRET-4711"),
                    "{user:?} {backend}: read outside: {t}"
                );
            }
            assert_eq!(
                std::fs::read_to_string(&secret).unwrap(),
                "SECRET-4711\n",
                "{user:?} {backend}: written outside: {tools:?}"
            );
        }
    }
}

#[test]
fn a_symlink_swapped_under_the_file_tools_never_lets_them_out() {
    for user in users() {
        for backend in backends() {
            let d = open_dir();
            let outside = d.path().join("outside");
            std::fs::create_dir(&outside).unwrap();
            std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o777)).unwrap();
            std::fs::write(outside.join("f.txt"), "OUTSIDE-31337\n").unwrap();
            std::fs::set_permissions(
                outside.join("f.txt"),
                std::fs::Permissions::from_mode(0o666),
            )
            .unwrap();
            // A background process swaps `d` between a directory and a link to outside.
            let mut turns = vec![json!({"tool_calls": [{"name": "terminal", "arguments": {
                "background": true, "command": format!(
                "mkdir -p real && echo INSIDE > real/f.txt; \
                 while :; do ln -sfn real d; ln -sfn {o} d; rm -f d; ln -sfn {o} d; done",
                o = outside.display())}}]})];
            for i in 0..30 {
                turns.push(json!({"tool_calls": [{"name": "write_file", "arguments":
                    {"path": format!("d/w{i}.txt"), "content": "PWNED"}}]}));
                turns.push(json!({"tool_calls": [{"name": "read_file", "arguments": {"path": "d/f.txt"}}]}));
            }
            turns.push(json!({"content": "Final: done"}));
            let (tools, _) = attack(
                d.path(),
                user,
                backend,
                json!(turns),
                &["--max-turns", "100"],
            );
            assert_eq!(tools.len(), 61, "{tools:?}");
            for t in &tools[1..] {
                assert!(
                    !t.contains("OUTSIDE-31337"),
                    "{user:?} {backend}: read outside: {t}"
                );
            }
            let names: Vec<String> = std::fs::read_dir(&outside)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            assert_eq!(names, ["f.txt"], "{user:?} {backend}: written outside");
            assert_eq!(
                std::fs::read_to_string(outside.join("f.txt")).unwrap(),
                "OUTSIDE-31337\n"
            );
        }
    }
}

#[test]
fn setsid_and_double_fork_daemons_die_with_the_call_and_the_task() {
    // Every backend with its kept sandbox, and bwrap with a new one per command (whose
    // task end looks only at traj-run's own children: a background command's bwrap).
    let variants = backends()
        .into_iter()
        .map(|b| (b, &[][..]))
        .chain([("bwrap", &["--no-sandbox-reuse"][..])]);
    for user in users() {
        for (backend, extra) in variants.clone() {
            let d = open_dir();
            let marker = format!("3{}", fastrand::u32(10_000..99_999));
            let turns = json!([
                {"tool_calls": [{"name": "terminal", "arguments": {"command": format!(
                    "(cd / && setsid sh -c 'exec sleep {marker}1 &'); \
                     sh -c 'cd / && sh -c \"setsid sleep {marker}2 </dev/null >/dev/null 2>&1 &\" &'; \
                     nohup sleep {marker}3 >/dev/null 2>&1 & echo planted")}}]},
                // Marks the time between the calls; its own check of the daemons.
                {"tool_calls": [{"name": "terminal", "arguments": {"command": format!(
                    "ps -eo args | grep -c '^sleep {marker}' || true")}}]},
                // A background command still running when the task ends.
                {"tool_calls": [{"name": "terminal", "arguments": {
                    "command": format!("sleep {marker}4"), "background": true}}]},
                {"content": "Final: done"}
            ]);
            let (tools, _) = attack(d.path(), user, backend, turns, extra);
            let ctx = format!("{user:?} {backend} {extra:?}: {tools:?}");
            assert!(tools[0].contains("planted"), "{ctx}");
            assert_eq!(output_of(&tools[1]).trim(), "0", "{ctx}");
            assert_eq!(
                processes_with(&format!("sleep {marker}")),
                Vec::<String>::new(),
                "{ctx}"
            );
        }
    }
}

#[test]
fn every_limit_holds_as_a_tool_error_and_the_run_goes_on() {
    for user in users() {
        for backend in backends() {
            let d = open_dir();
            let turns = json!([
                {"tool_calls": [{"name": "terminal", "arguments": {"command":
                    "head -c 3000000 /dev/zero > big; ls -l big"}}]},
                {"tool_calls": [{"name": "terminal", "arguments": {"command":
                    "python3 -c 'x = bytearray(512 * 1024 * 1024); print(len(x))'"}}]},
                {"tool_calls": [{"name": "terminal", "arguments": {"command":
                    "for i in $(seq 60); do sleep 3 & done; wait"}}]},
                {"tool_calls": [{"name": "terminal", "arguments": {"command": "while :; do :; done"}}]},
                {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo still-here"}}]},
                {"content": "Final: done"}
            ]);
            let (tools, _) = attack(
                d.path(),
                user,
                backend,
                turns,
                &[
                    "--tool-file-size-mb",
                    "1",
                    "--tool-memory-mb",
                    "256",
                    "--tool-processes",
                    "20",
                    "--tool-cpu-secs",
                    "1",
                ],
            );
            let ctx = format!("{user:?} {backend}: {tools:?}");
            assert_eq!(tools.len(), 5, "{ctx}");
            let err = |i: usize| -> String {
                let v: Value = serde_json::from_str(&tools[i]).unwrap();
                v["error"].as_str().unwrap_or("").to_string()
            };
            assert!(err(0).contains("file size limit (1 MiB"), "{ctx}");
            assert!(err(1).contains("memory limit (256 MiB"), "{ctx}");
            // The kernel never applies RLIMIT_NPROC to uid 0 (docs/tools.md).
            let uid0 = user == User::Me && rustix::process::geteuid().is_root();
            if !uid0 {
                assert!(err(2).contains("process limit (20)"), "{ctx}");
            }
            assert!(err(3).contains("CPU time limit (1 s"), "{ctx}");
            assert!(tools[4].contains("still-here"), "{ctx}");
        }
    }
}

#[test]
fn no_capability_is_left_to_make_the_host_writable() {
    // As root, bwrap kept its capabilities for the command by default: with
    // CAP_SYS_ADMIN in the sandbox's user namespace, `mount -o remount,rw` made the
    // read-only /usr writable, and the command wrote the host's /usr. In a kept
    // sandbox (the default) and in one per command alike, none is left.
    for user in users() {
        for extra in [&[][..], &["--no-sandbox-reuse"][..]] {
            let d = open_dir();
            let probe = format!("/usr/.traj-escape-{}", std::process::id());
            let turns = json!([
                {"tool_calls": [{"name": "terminal", "arguments": {"command": format!(
                    "grep -E '^Cap(Eff|Bnd)' /proc/self/status; mount -o remount,rw,bind /usr 2>&1; \
                     touch {probe} 2>&1 && echo WROTE; mount -t tmpfs none /etc 2>&1 && echo MOUNTED; \
                     echo done")}}]},
                {"content": "Final: done"}
            ]);
            let (tools, _) = attack(d.path(), user, "bwrap", turns, extra);
            let escaped = Path::new(&probe).exists();
            let _ = std::fs::remove_file(&probe);
            let out = output_of(&tools[0]);
            let ctx = format!("{user:?} {extra:?}: {out}");
            assert!(!escaped && !out.contains("WROTE"), "{ctx}");
            assert!(!out.contains("MOUNTED") && out.contains("done"), "{ctx}");
            assert!(out.contains("CapEff:\t0000000000000000"), "{ctx}");
            assert!(out.contains("CapBnd:\t0000000000000000"), "{ctx}");
        }
    }
}

//! Kept sandboxes (pods, `traj::toolbox::pod`): traj-run keeps one sandbox per worker
//! between tasks. With one worker, consecutive tasks run in the same pod; each must
//! start as clean as in a new sandbox, a pod that cannot be made clean is replaced,
//! and the pod's supervisor is out of reach of the commands it runs.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::standin::Standin;
use crate::util::*;

/// Run one task per entry of `tasks` (terminal commands, in order) through traj-run
/// with one worker; returns each task's tool outputs (the `output` and `error` text).
fn tasks(d: &Path, backend: &str, tasks: &[&[&str]], extra: &[&str]) -> Vec<Vec<String>> {
    let rules: Vec<Value> = tasks
        .iter()
        .enumerate()
        .map(|(i, cmds)| {
            let mut turns: Vec<Value> = cmds
                .iter()
                .map(|c| json!({"tool_calls": [{"name": "terminal", "arguments": {"command": c}}]}))
                .collect();
            turns.push(json!({"content": "Final: done"}));
            json!({"match": format!("pod task {i};"), "turns": turns})
        })
        .collect();
    let s = Standin::json(json!({ "rules": rules }));
    let rows: String = (0..tasks.len())
        .map(|i| {
            format!(
                "{}\n",
                json!({"prompt": format!("pod task {i};"), "toolsets": ["terminal"]})
            )
        })
        .collect();
    std::fs::write(d.join("tasks.jsonl"), rows).unwrap();
    let mut c = Command::new(bin("traj-run"));
    c.current_dir(d)
        .env("TMPDIR", d)
        .args(["--model", "standin", "--base-url", &s.url(), "-q"])
        .args(["--run-dir", "r", "--num-workers", "1", "--sandbox", backend])
        .arg("tasks.jsonl")
        .args(extra);
    let o = run(c);
    assert_code(&o, 0);
    let recs = parse_jsonl(&stdout(&o));
    assert_eq!(recs.len(), tasks.len(), "{}", stderr(&o));
    recs.iter()
        .map(|r| {
            tool_outputs(r)
                .iter()
                .map(|t| {
                    let v: Value = serde_json::from_str(t).unwrap_or_else(|_| json!({"output": t}));
                    format!(
                        "{}{}",
                        v["output"].as_str().unwrap_or(""),
                        v["error"].as_str().unwrap_or("")
                    )
                })
                .collect()
        })
        .collect()
}

/// The value after `key=` on its own line of `out`.
fn field<'a>(out: &'a str, key: &str) -> &'a str {
    let pre = format!("{key}=");
    out.lines()
        .find_map(|l| l.strip_prefix(pre.as_str()))
        .unwrap_or_else(|| panic!("no {key}= in {out}"))
}

/// The pod's identity: its first process's start time (field 22 of /proc/1/stat).
const WHO: &str = "echo pod=$(cut -d' ' -f22 /proc/1/stat)";

#[test]
fn the_next_task_in_a_kept_sandbox_finds_nothing_of_the_last() {
    for backend in ["local", "bwrap"] {
        let d = tmpdir();
        let bwrap = backend == "bwrap";
        // Task 0 leaves files (one in a directory it made unreadable, and a tree deeper
        // than PATH_MAX), a daemon, and
        // in bwrap files in /tmp, /dev/shm, / and /dev, and a new mode on /tmp.
        let mut leave = String::from(
            "mkdir -p sub/deep && echo x > sub/deep/f && chmod 000 sub/deep sub; \
             echo y > top; (setsid sleep 1000 &); echo ws=$PWD; echo root=$(ls -A / | tr '\\n' ,); \
             python3 -c \"import os; [(os.mkdir('n'), os.chdir('n')) for _ in range(3000)]\"",
        );
        if bwrap {
            leave.push_str(
                "; echo t > /tmp/t; echo s > /dev/shm/s; mkdir /newdir; echo r > /newfile; \
                 echo v > /dev/newdev; chmod 700 /tmp; echo planted",
            );
        }
        let look = "echo ws=$PWD; echo files=$(ls -A | wc -l); \
             echo sleeps=$(cat /proc/[0-9]*/comm | grep -c '^sleep$'); \
             echo procs=$(ls /proc | grep -c '^[0-9]'); echo root=$(ls -A / | tr '\\n' ,); \
             echo tmp=$(ls -A /tmp | wc -l) shm=$(ls -A /dev/shm | wc -l) dev=$(ls -A /dev | tr '\\n' ,); \
             stat -c tmpmode=%a /tmp";
        let out = tasks(
            d.path(),
            backend,
            &[
                &[WHO, "ls -A /dev | tr '\\n' ,", &leave],
                &[WHO, look],
                &[WHO, look],
            ],
            &[],
        );
        let ctx = format!("{backend}: {out:?}");
        // The same pod served all three tasks, in the same workspace.
        assert_eq!(field(&out[0][0], "pod"), field(&out[1][0], "pod"), "{ctx}");
        assert_eq!(field(&out[1][0], "pod"), field(&out[2][0], "pod"), "{ctx}");
        assert_eq!(field(&out[0][2], "ws"), field(&out[1][1], "ws"), "{ctx}");
        for task in &out[1..] {
            let o = &task[1];
            assert_eq!(field(o, "files"), "0", "{ctx}");
            assert_eq!(field(o, "sleeps"), "0", "{ctx}");
            // The pod's supervisor, this shell and its pipeline: no process of before.
            let procs: u32 = field(o, "procs").parse().unwrap();
            assert!(procs <= 6, "{ctx}");
            if bwrap {
                assert_eq!(field(o, "root"), field(&out[0][2], "root"), "{ctx}");
                assert!(o.contains("tmp=0 shm=0 dev="), "{ctx}");
                assert_eq!(
                    o.split("dev=").nth(1).unwrap().lines().next().unwrap(),
                    out[0][1].trim(),
                    "{ctx}"
                );
                assert_eq!(field(o, "tmpmode"), "755", "{ctx}");
            }
        }
    }
}

#[test]
fn a_kept_sandbox_that_cannot_be_made_clean_is_replaced() {
    let d = tmpdir();
    let mq = "python3 -c \"import ctypes, os; rt = ctypes.CDLL('librt.so.1', use_errno=True); \
              q = rt.mq_open(b'/traj-q', os.O_CREAT | os.O_RDWR, 0o600, None); \
              print('mq', q, os.strerror(ctypes.get_errno()) if q < 0 else 'made')\"";
    let out = tasks(
        d.path(),
        "bwrap",
        &[
            // SysV IPC objects cannot be listed away cleanly: the pod is retired.
            &[WHO, "ipcmk -M 4096 >/dev/null && echo shm-made"],
            // A changed entry of /dev (not new, so not removable): retired too.
            &[
                WHO,
                "ipcs -m | grep -c '^0x'; rm -f /dev/fd && ln -s /etc /dev/fd && echo swapped",
            ],
            // POSIX message queues are never possible (a reset could not list them).
            &[WHO, "readlink /dev/fd", mq],
        ],
        &[],
    );
    let ctx = format!("{out:?}");
    assert!(out[0][1].contains("shm-made"), "{ctx}");
    assert_ne!(field(&out[0][0], "pod"), field(&out[1][0], "pod"), "{ctx}");
    assert!(
        out[1][1].starts_with("0\n") && out[1][1].contains("swapped"),
        "{ctx}"
    );
    assert_ne!(field(&out[1][0], "pod"), field(&out[2][0], "pod"), "{ctx}");
    assert_eq!(out[2][1].trim(), "/proc/self/fd", "{ctx}");
    assert!(out[2][2].starts_with("mq -1 "), "{ctx}");
}

#[test]
fn the_supervisor_is_out_of_reach_of_its_commands() {
    for backend in ["local", "bwrap"] {
        let d = tmpdir();
        let attack = "kill -9 1; kill -STOP 1; kill -9 -1; echo sent; \
             cat /proc/1/environ >/dev/null 2>&1 && echo environ-read; \
             readlink /proc/1/fd/0 >/dev/null 2>&1 && echo fd-followed; \
             (echo junk > /proc/1/fd/0) 2>/dev/null && echo fd-written; \
             head -c 1 /proc/1/mem >/dev/null 2>&1 && echo mem-read; \
             echo state=$(cut -d' ' -f3 /proc/1/stat)";
        let out = tasks(d.path(), backend, &[&[WHO, attack, WHO], &[WHO]], &[]);
        let ctx = format!("{backend}: {out:?}");
        let o = &out[0][1];
        assert!(o.contains("sent"), "{ctx}");
        for got in ["environ-read", "fd-followed", "fd-written", "mem-read"] {
            assert!(!o.contains(got), "{ctx}");
        }
        // Not stopped (T) by the SIGSTOP, not killed: running or waiting.
        assert!(matches!(field(o, "state"), "S" | "R"), "{ctx}");
        // The pod answered the next call and served the next task.
        assert_eq!(field(&out[0][0], "pod"), field(&out[0][2], "pod"), "{ctx}");
        assert_eq!(field(&out[0][0], "pod"), field(&out[1][0], "pod"), "{ctx}");
    }
}

#[test]
fn limits_the_supervisor_sets_on_itself_hold_for_its_commands() {
    // 2 GiB and 120 s are above the floors: the supervisor sets them on itself and
    // every command inherits them (no prlimit per call).
    let d = tmpdir();
    let out = tasks(
        d.path(),
        "bwrap",
        &[&[
            "python3 -c 'x = bytearray(3 * 1024 * 1024 * 1024); print(len(x))'",
            "cat /proc/self/limits | grep -E 'address space|cpu time|msgqueue' | tr -s ' '",
        ]],
        &["--tool-memory-mb", "2048", "--tool-cpu-secs", "120"],
    );
    let ctx = format!("{out:?}");
    assert!(out[0][0].contains("memory limit (2048 MiB"), "{ctx}");
    assert!(out[0][1].contains("Max cpu time 120 121 seconds"), "{ctx}");
    assert!(
        out[0][1].contains("Max address space 2147483648 2147483648 bytes"),
        "{ctx}"
    );
    assert!(out[0][1].contains("Max msgqueue size 0 0 bytes"), "{ctx}");
}

#[test]
fn without_reuse_every_task_gets_a_new_sandbox() {
    let d = tmpdir();
    let out = tasks(
        d.path(),
        "local",
        &[&["echo ws=$PWD"], &["echo ws=$PWD"]],
        &["--no-sandbox-reuse"],
    );
    assert_ne!(field(&out[0][0], "ws"), field(&out[1][0], "ws"), "{out:?}");
}

#[test]
fn the_supervisor_refuses_to_serve_outside_a_pid_namespace() {
    // Its sweeps kill every other process it can see: only as PID 1 of its own
    // namespace. Started on the host it answers with the reason and exits 1.
    let plan = r#"{"wipe":[],"watch":[],"limits":{"memory_mb":0,"processes":0,"file_size_mb":0,"cpu_secs":0}}"#;
    let o = Command::new(bin("traj-run"))
        .args(["--traj-pod-supervisor", plan])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("first process of its own PID namespace"),
        "{text}"
    );
}

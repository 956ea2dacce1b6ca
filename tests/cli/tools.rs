//! traj-run's tools under attack, scripted through the stand-in endpoint: a hard link
//! to an outside file, daemons that try to outlive the task, and `--sandbox auto`.

use std::process::Command;

use serde_json::{Value, json};

use crate::standin::Standin;
use crate::util::*;

/// Live processes whose command line contains `marker`.
fn processes_with(marker: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            let zombie = stat
                .rfind(')')
                .is_some_and(|i| stat[i + 2..].starts_with('Z'));
            !zombie
                && String::from_utf8_lossy(&cmd)
                    .replace('\0', " ")
                    .contains(marker)
        })
        .count()
}

/// One task through traj-run with `turns` scripted; the tool messages of its record.
fn run_task(d: &std::path::Path, turns: Value, extra: &[&str]) -> (Vec<String>, String) {
    let s = Standin::json(json!({"rules": [{"match": "", "turns": turns}]}));
    let row = json!({"prompt": "attack", "toolsets": ["terminal", "file"]});
    std::fs::write(d.join("tasks.jsonl"), format!("{row}\n")).unwrap();
    let mut c = Command::new(bin("traj-run"));
    c.current_dir(d)
        .env("TMPDIR", d)
        .env("OPENAI_API_KEY", "sk-test")
        .args(["--model", "standin", "--base-url", &s.url(), "-q"])
        .args(["--run-dir", "data/r", "tasks.jsonl"])
        .args(extra);
    let o = run(c);
    assert_code(&o, 0);
    let recs = parse_jsonl(&stdout(&o));
    assert_eq!(recs.len(), 1, "{}", stderr(&o));
    let tools = recs[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect();
    (tools, stderr(&o))
}

#[test]
fn local_mode_hard_links_and_daemons_do_not_escape() {
    let d = tmpdir();
    let outside = tmpdir();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "SECRET-4711\n").unwrap();
    let turns = json!([
        {"tool_calls": [{"name": "terminal", "arguments": {"command": format!(
            "ln {} hardl && (cd / && setsid sh -c 'exec sleep 31041 &') && \
             sh -c 'cd / && sh -c \"setsid sleep 31042 </dev/null >/dev/null 2>&1 &\" &'; echo planted",
            secret.display())}}]},
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "hardl"}}]},
        {"tool_calls": [{"name": "patch", "arguments":
            {"path": "hardl", "old_string": "SECRET", "new_string": "PWNED"}}]},
        {"tool_calls": [{"name": "terminal", "arguments": {"command": "pgrep -c -f 'sleep 3104[12]' || true"}}]},
        {"content": "Final: done"}
    ]);
    let (tools, _) = run_task(d.path(), turns, &["--sandbox", "local"]);
    assert_eq!(tools.len(), 4, "{tools:?}");
    assert!(tools[0].contains("planted"), "{}", tools[0]);
    assert!(
        tools[1].contains("hard links; refused") && !tools[1].contains("SECRET-4711"),
        "{}",
        tools[1]
    );
    assert!(tools[2].contains("hard links; refused"), "{}", tools[2]);
    // The daemons died with the first call, before the next one ran.
    let v: Value = serde_json::from_str(&tools[3]).unwrap();
    assert_eq!(v["output"], "0\n", "{v}");
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "SECRET-4711\n");
    assert_eq!(
        processes_with("sleep 3104"),
        0,
        "a daemon outlived traj-run"
    );
}

#[test]
fn auto_sandbox_is_the_default_and_uses_bwrap_here() {
    let d = tmpdir();
    let turns = json!([
        {"tool_calls": [{"name": "terminal", "arguments": {"command": "pwd; ls /proc | grep -c '^[0-9]'"}}]},
        {"content": "Final: done"}
    ]);
    let (tools, err) = run_task(d.path(), turns, &[]);
    let v: Value = serde_json::from_str(&tools[0]).unwrap();
    let out = v["output"].as_str().unwrap();
    assert!(out.starts_with("/workspace\n"), "not bwrap: {out}");
    // Its own PID namespace: a handful of processes, not the host's.
    let n: u32 = out.lines().nth(1).unwrap().trim().parse().unwrap();
    assert!(n < 10, "{n} processes visible");
    assert!(!err.contains("WARNING"), "{err}");
}

#[test]
fn limits_are_tool_errors_and_the_run_goes_on() {
    let d = tmpdir();
    let turns = json!([
        {"tool_calls": [{"name": "terminal", "arguments": {"command": "head -c 3000000 /dev/zero > big"}}]},
        {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo still here"}}]},
        {"content": "Final: done"}
    ]);
    let (tools, _) = run_task(
        d.path(),
        turns,
        &["--sandbox", "local", "--tool-file-size-mb", "1"],
    );
    let v: Value = serde_json::from_str(&tools[0]).unwrap();
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("file size limit (1 MiB"),
        "{v}"
    );
    assert!(tools[1].contains("still here"), "{}", tools[1]);
}

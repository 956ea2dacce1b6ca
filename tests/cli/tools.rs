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

/// traj-run on `row` alone (written to tasks.jsonl) against `s`, into data/r; add flags.
fn one_task(d: &std::path::Path, row: &Value, s: &Standin) -> Command {
    std::fs::write(d.join("tasks.jsonl"), format!("{row}\n")).unwrap();
    let mut c = Command::new(bin("traj-run"));
    c.current_dir(d)
        .env("TMPDIR", d)
        .env("OPENAI_API_KEY", "sk-test")
        .args(["--model", "standin", "--base-url", &s.url(), "-q"])
        .args(["--run-dir", "data/r", "tasks.jsonl"]);
    c
}

/// One task (`row`) through traj-run with `turns` scripted: its record, traj-run's
/// stderr and the stand-in (for its requests).
fn run_one(
    d: &std::path::Path,
    row: Value,
    turns: Value,
    extra: &[&str],
) -> (Value, String, Standin) {
    let s = Standin::json(json!({"rules": [{"match": "", "turns": turns}]}));
    let mut c = one_task(d, &row, &s);
    c.args(extra);
    let o = run(c);
    assert_code(&o, 0);
    let mut recs = parse_jsonl(&stdout(&o));
    assert_eq!(recs.len(), 1, "{}", stderr(&o));
    (recs.remove(0), stderr(&o), s)
}

/// One task through traj-run with `turns` scripted; the tool messages of its record.
fn run_task(d: &std::path::Path, turns: Value, extra: &[&str]) -> (Vec<String>, String) {
    let row = json!({"prompt": "attack", "toolsets": ["terminal", "file"]});
    let (rec, err, _) = run_one(d, row, turns, extra);
    (tool_outputs(&rec), err)
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

#[test]
fn background_processes_are_polled_logged_killed_and_die_with_the_task() {
    let d = tmpdir();
    let turns = json!([
        {"tool_calls": [{"name": "terminal", "arguments": {"background": true, "command":
            "echo bg-start; read line; echo got:$line; exec sleep 31061"}}]},
        {"tool_calls": [{"name": "terminal", "arguments": {"background": true, "command": "exec sleep 31062"}}]},
        {"tool_calls": [{"name": "process", "arguments": {"action": "submit", "session_id": "proc_1", "data": "hello"}}]},
        {"tool_calls": [{"name": "process", "arguments": {"action": "wait", "session_id": "proc_1", "timeout": 1}}]},
        {"tool_calls": [{"name": "process", "arguments": {"action": "log", "session_id": "proc_1"}}]},
        {"tool_calls": [{"name": "process", "arguments": {"action": "list"}}]},
        {"tool_calls": [{"name": "process", "arguments": {"action": "kill", "session_id": "proc_1"}}]},
        {"tool_calls": [{"name": "process", "arguments": {"action": "poll", "session_id": "proc_1"}}]},
        {"tool_calls": [{"name": "process", "arguments": {"action": "poll", "session_id": "proc_9"}}]},
        {"content": "Final: done"}
    ]);
    let (tools, err) = run_task(d.path(), turns, &["--sandbox", "local"]);
    assert_eq!(tools.len(), 9, "{tools:?} {err}");
    let v: Vec<Value> = tools
        .iter()
        .map(|t| serde_json::from_str(t).unwrap())
        .collect();
    assert_eq!(v[0]["session_id"], "proc_1", "{}", tools[0]);
    assert_eq!(v[1]["session_id"], "proc_2", "{}", tools[1]);
    assert_eq!(v[2]["bytes_written"], 6, "{}", tools[2]);
    // Still running after the wait: it sleeps.
    assert_eq!(v[3]["timed_out"], true, "{}", tools[3]);
    assert_eq!(v[3]["status"], "running", "{}", tools[3]);
    assert!(
        v[3]["output"].as_str().unwrap().contains("got:hello"),
        "{}",
        tools[3]
    );
    assert_eq!(v[4]["output"], "bg-start\ngot:hello", "{}", tools[4]);
    let list = v[5]["processes"].as_array().unwrap();
    assert_eq!(list.len(), 2, "{}", tools[5]);
    assert!(
        list.iter().all(|p| p["status"] == "running"),
        "{}",
        tools[5]
    );
    assert_eq!(v[6]["status"], "killed", "{}", tools[6]);
    assert_eq!(v[6]["killed"], true, "{}", tools[6]);
    assert_eq!(v[7]["status"], "killed", "{}", tools[7]);
    assert_eq!(v[7]["output"], "", "{}", tools[7]);
    assert!(
        v[8]["error"].as_str().unwrap().contains("proc_9"),
        "{}",
        tools[8]
    );
    // proc_2 was never killed: it died with the task.
    assert_eq!(
        processes_with("sleep 3106"),
        0,
        "a background process outlived traj-run"
    );
}

/// A one-thread HTTP server for the pages of tests/fixtures/web on 127.0.0.1; its
/// base URL.
fn serve_web_fixtures() -> String {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let root = fixture("web");
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let root = root.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                let _ = r.read_line(&mut line);
                let mut h = String::new();
                while r.read_line(&mut h).is_ok_and(|n| n > 2) {
                    h.clear();
                }
                let path = line
                    .split(' ')
                    .nth(1)
                    .unwrap_or("/")
                    .trim_start_matches('/');
                let path = if path.is_empty() { "index.html" } else { path };
                let (status, body, kind) = match std::fs::read(root.join(path)) {
                    Ok(b) if !path.contains("..") => (
                        "200 OK",
                        b,
                        if path.ends_with(".html") {
                            "text/html; charset=utf-8"
                        } else {
                            "application/octet-stream"
                        },
                    ),
                    _ => ("404 Not Found", b"not found".to_vec(), "text/plain"),
                };
                let mut c = conn;
                let _ = write!(
                    c,
                    "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = c.write_all(&body);
            });
        }
    });
    format!("http://127.0.0.1:{port}")
}

/// One task offering `toolsets` through traj-run with `turns` scripted; the parsed
/// tool messages and stderr.
fn run_tools(
    d: &std::path::Path,
    toolsets: &[&str],
    turns: Value,
    extra: &[&str],
) -> (Vec<Value>, String, Standin) {
    let row = json!({"prompt": "use the tools", "toolsets": toolsets});
    let (rec, err, s) = run_one(d, row, turns, extra);
    let tools = tool_outputs(&rec)
        .iter()
        .map(|t| serde_json::from_str(t).unwrap_or_else(|_| json!({"raw": t})))
        .collect();
    (tools, err, s)
}

#[test]
fn a_real_browser_runs_scripts_clicks_refs_and_fills_forms() {
    assert!(
        std::path::Path::new("/usr/bin/chromium").exists(),
        "chromium is not installed: run `make setup` (scripts/setup.sh installs Debian's chromium)"
    );
    let d = tmpdir();
    let base = serve_web_fixtures();
    let turns = json!([
        {"tool_calls": [{"name": "browser_navigate", "arguments": {"url": format!("{base}/index.html")}}]},
        {"tool_calls": [{"name": "browser_snapshot", "arguments": {}}]},
        {"tool_calls": [{"name": "browser_click", "arguments": {"ref": "@e1"}}]},
        {"tool_calls": [{"name": "browser_snapshot", "arguments": {}}]},
        {"tool_calls": [{"name": "browser_type", "arguments": {"ref": "e1", "text": "Ada"}}]},
        {"tool_calls": [{"name": "browser_click", "arguments": {"ref": "e2"}}]},
        {"tool_calls": [{"name": "browser_snapshot", "arguments": {}}]},
        {"tool_calls": [{"name": "browser_back", "arguments": {}}]},
        {"tool_calls": [{"name": "browser_console", "arguments": {"expression": "document.title"}}]},
        {"tool_calls": [{"name": "browser_get_images", "arguments": {}}]},
        {"tool_calls": [{"name": "browser_navigate", "arguments": {"url": "file:///etc/passwd"}}]},
        {"content": "Final: done"}
    ]);
    let (t, err, _) = run_tools(
        d.path(),
        &["browser"],
        turns,
        &[
            "--sandbox",
            "local",
            "--allow-private-addresses",
            "--max-turns",
            "20",
        ],
    );
    assert_eq!(t.len(), 11, "{t:?} {err}");
    assert_eq!(t[0]["title"], "Traj test home", "{}", t[0]);
    let snap = t[1]["snapshot"].as_str().unwrap();
    // Only a browser that runs the page's script sees this text.
    assert!(snap.contains("Rendered by script 7731"), "{snap}");
    assert!(!snap.contains("replaced by a script"), "{snap}");
    assert!(snap.contains("link \"Go to the form\" [ref=e1]"), "{snap}");
    assert_eq!(t[2]["title"], "Traj test form", "{}", t[2]);
    let snap = t[3]["snapshot"].as_str().unwrap();
    assert!(snap.contains("textbox \"Your name\" [ref=e1]"), "{snap}");
    assert!(snap.contains("button \"Greet me\" [ref=e2]"), "{snap}");
    assert_eq!(t[4]["typed"], "Ada", "{}", t[4]);
    let snap = t[6]["snapshot"].as_str().unwrap();
    assert!(snap.contains("Hello, Ada!"), "{snap}");
    assert_eq!(t[7]["title"], "Traj test home", "{}", t[7]);
    assert_eq!(t[8]["result"], "Traj test home", "{}", t[8]);
    assert!(
        t[8]["messages"].to_string().contains("home page ready"),
        "{}",
        t[8]
    );
    assert!(
        t[9]["images"][0]["src"]
            .as_str()
            .unwrap()
            .ends_with("/pixel.png"),
        "{}",
        t[9]
    );
    assert!(
        t[10]["error"].as_str().unwrap().contains("refused"),
        "{}",
        t[10]
    );
    // The profile is made under TMPDIR, the test's own directory.
    assert_eq!(
        processes_with(&d.path().to_string_lossy()),
        0,
        "a chromium process outlived traj-run"
    );
}

#[test]
fn browser_pages_cannot_reach_private_addresses_by_default() {
    let d = tmpdir();
    let base = serve_web_fixtures();
    let turns = json!([
        {"tool_calls": [{"name": "browser_navigate", "arguments": {"url": format!("{base}/index.html")}}]},
        {"content": "Final: done"}
    ]);
    let (t, err, _) = run_tools(d.path(), &["browser"], turns, &["--sandbox", "local"]);
    assert_eq!(t.len(), 1, "{t:?} {err}");
    assert!(
        t[0]["error"].as_str().unwrap().contains("refused"),
        "{}",
        t[0]
    );
    assert_eq!(processes_with(&d.path().to_string_lossy()), 0);
}

#[test]
fn image_generate_returns_urls_and_saves_inline_images() {
    let d = tmpdir();
    let turns = json!([
        {"tool_calls": [{"name": "image_generate", "arguments": {"prompt": "a red fox in snow", "aspect_ratio": "square"}}]},
        {"tool_calls": [{"name": "image_generate", "arguments": {"prompt": "inline: a blue bird"}}]},
        {"tool_calls": [{"name": "terminal", "arguments": {"command": "od -An -c -N4 images/image_1.png"}}]},
        {"tool_calls": [{"name": "image_generate", "arguments": {"prompt": "x", "aspect_ratio": "round"}}]},
        {"content": "Final: done"}
    ]);
    let (t, err, s) = run_tools(
        d.path(),
        &["image_gen", "terminal"],
        turns,
        &["--sandbox", "local", "--image-model", "standin-image"],
    );
    assert_eq!(t.len(), 4, "{t:?} {err}");
    assert_eq!(
        t[0]["image"], "https://images.standin.invalid/1.png",
        "{}",
        t[0]
    );
    assert_eq!(t[1]["image"], "images/image_1.png", "{}", t[1]);
    assert_eq!(t[1]["bytes"], 69, "{}", t[1]);
    assert!(
        t[2]["output"].as_str().unwrap().contains("P   N   G"),
        "{}",
        t[2]
    );
    assert!(
        t[3]["error"].as_str().unwrap().contains("round"),
        "{}",
        t[3]
    );
    let reqs = s.image_requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0]["model"], "standin-image");
    assert_eq!(reqs[0]["size"], "1024x1024");
    assert_eq!(reqs[1]["size"], "1792x1024");
}

const PIXEL: &str = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

/// traj-run on one task whose every turn calls `vision_analyze`; the stand-in's vision
/// replies cost $0.40 each. The run's output, and the stand-in.
fn vision_loop(d: &std::path::Path, extra: &[&str]) -> (std::process::Output, Standin) {
    let vision_call = json!({"tool_calls": [{"name": "vision_analyze",
        "arguments": {"image_url": PIXEL, "question": "Describe the pixel"}}]});
    let s = Standin::json(json!({"rules": [
        {"match": "Describe the pixel", "last": {"content": "a red dot", "cost": 0.4}},
        {"match": "", "turns": [vision_call]}
    ]}));
    let row = json!({"prompt": "look at images", "toolsets": ["vision"]});
    let mut c = one_task(d, &row, &s);
    c.args(["--vision-model", "standin-vision", "--sandbox", "local"])
        .args(extra);
    (run(c), s)
}

fn vision_requests(s: &Standin) -> usize {
    s.requests()
        .iter()
        .filter(|r| r["model"] == "standin-vision")
        .count()
}

/// The spend of the vision tool counts in `--max-cost`: three $0.40 vision calls reach
/// the $1 cap and the run stops there (before, tool calls bypassed the cap and all ten
/// turns ran).
#[test]
fn vision_calls_count_in_the_runs_spend_cap() {
    let d = tmpdir();
    let (o, s) = vision_loop(d.path(), &["--max-cost", "1", "--max-turns", "10"]);
    assert_eq!(vision_requests(&s), 3, "{}", stderr(&o));
    let stats: Value = serde_json::from_str(
        &std::fs::read_to_string(d.path().join("data/r/statistics.json")).unwrap(),
    )
    .unwrap();
    assert!(
        stats.to_string().contains("spend cap $1 reached"),
        "{stats}\n{}",
        stderr(&o)
    );
    // Without a cap, every turn's vision call goes out.
    let d = tmpdir();
    let (o, s) = vision_loop(d.path(), &["--max-turns", "6"]);
    assert_code(&o, 0);
    assert!(vision_requests(&s) >= 5, "{}", stderr(&o));
}

/// Tool calls wait for `--max-rps` like the agent's own: at 8 requests a second, N
/// requests (agent and vision together) take at least (N - 1) / 8 seconds.
#[test]
fn vision_calls_wait_for_the_runs_rate_limit() {
    let d = tmpdir();
    let start = std::time::Instant::now();
    let (o, s) = vision_loop(d.path(), &["--max-rps", "8", "--max-turns", "5"]);
    let took = start.elapsed().as_secs_f64();
    assert_code(&o, 0);
    let n = s.count() as f64;
    assert!(vision_requests(&s) >= 4, "{}", stderr(&o));
    assert!(
        took >= (n - 1.0) / 8.0 - 0.05,
        "{n} requests in {took:.2}s: faster than 8 a second"
    );
}

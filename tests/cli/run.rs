//! traj-run against the stand-in endpoint (`tests/standin`).

use serde_json::{Value, json};

use crate::standin::Standin;

/// The keys of the reference's `statistics.json` (golden output).
const STATISTICS_KEYS: [&str; 10] = [
    "run_name",
    "distribution",
    "total_prompts",
    "total_batches",
    "batch_size",
    "model",
    "completed_at",
    "duration_seconds",
    "tool_statistics",
    "reasoning_statistics",
];

fn post(url: &str, body: &Value) -> Result<Value, (u16, Option<String>, String)> {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent();
    let mut r = agent
        .post(&format!("{url}/chat/completions"))
        .header("Content-Type", "application/json")
        .send(body.to_string())
        .unwrap_or_else(|e| panic!("transport: {e}"));
    let code = r.status().as_u16();
    let ra = r
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    let text = r.body_mut().read_to_string().unwrap_or_default();
    if code == 200 {
        Ok(serde_json::from_str(&text).unwrap())
    } else {
        Err((code, ra, text))
    }
}

#[test]
fn standin_serves_scripted_turns_errors_and_records_requests() {
    let s = Standin::json(json!({
        "queue": [{"status": 429, "retry_after": "0", "error": "slow down"}],
        "rules": [{
            "match": "weather",
            "turns": [
                {"reasoning": "need a tool", "reasoning_field": "reasoning_content",
                 "tool_calls": [{"name": "terminal", "arguments": {"command": "echo {turn}"}}]},
                {"content": "It said {tool_output}", "reasoning": "done", "reasoning_field": "reasoning_details"}
            ],
            "last": {"content": "final without tools"}
        }]
    }));
    let url = s.url();
    let tools = json!([{"type": "function", "function": {"name": "terminal", "parameters": {}}}]);
    let first = json!({"model": "m", "messages": [{"role": "user", "content": "weather?"}], "tools": tools});
    let e = post(&url, &first).unwrap_err();
    assert_eq!(e.0, 429);
    assert_eq!(e.1.as_deref(), Some("0"));
    let r = post(&url, &first).unwrap();
    let m = &r["choices"][0]["message"];
    assert_eq!(m["reasoning_content"], "need a tool");
    assert_eq!(m["tool_calls"][0]["function"]["name"], "terminal");
    assert_eq!(
        m["tool_calls"][0]["function"]["arguments"],
        r#"{"command":"echo 0"}"#
    );
    assert_eq!(r["choices"][0]["finish_reason"], "tool_calls");
    let second = json!({"model": "m", "tools": tools, "messages": [
        {"role": "user", "content": "weather?"}, m.clone(),
        {"role": "tool", "tool_call_id": "x", "content": "sunny"}]});
    let r = post(&url, &second).unwrap();
    assert_eq!(r["choices"][0]["message"]["content"], "It said sunny");
    assert_eq!(
        r["choices"][0]["message"]["reasoning_details"][0]["text"],
        "done"
    );
    let mut no_tools = second.clone();
    no_tools.as_object_mut().unwrap().remove("tools");
    let r = post(&url, &no_tools).unwrap();
    assert_eq!(r["choices"][0]["message"]["content"], "final without tools");
    // Unmatched prompts get the default echo.
    let r = post(
        &url,
        &json!({"messages": [{"role": "user", "content": "hi"}]}),
    )
    .unwrap();
    assert_eq!(r["choices"][0]["message"]["content"], "Answer to: hi");
    assert!(r["usage"]["total_tokens"].as_u64().unwrap() > 0);
    assert_eq!(s.count(), 5);
    assert_eq!(s.requests().len(), 5);
    assert_eq!(s.requests()[0]["messages"][0]["content"], "weather?");
}

// ---- traj-run end to end ------------------------------------------------------------

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::*;

/// traj-run against `s`, run dir `data/r`, fast retries.
fn traj_run(dir: &Path, s: &Standin) -> Command {
    let mut c = standin_run(dir, &s.url(), "data/r");
    c.arg("-q");
    c
}

/// Complete lines in the batch files so far (while a run is going).
fn records_so_far(run: &Path) -> usize {
    let Ok(rd) = std::fs::read_dir(run) else {
        return 0;
    };
    rd.filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("batch_"))
        .map(|e| {
            std::fs::read(e.path())
                .unwrap_or_default()
                .iter()
                .filter(|b| **b == b'\n')
                .count()
        })
        .sum()
}

#[test]
fn plain_prompts_make_records_checkpoint_and_statistics() {
    let d = tmpdir();
    let s = Standin::json(
        json!({"default": {"content": "Answer to: {prompt}", "reasoning": "thinking", "cost": 0.001}}),
    );
    let input = write_prompts(d.path(), &["a", "b", "c"]);
    let mut c = traj_run(d.path(), &s);
    c.args([
        &input,
        "--batch-size",
        "2",
        "--ephemeral-system-prompt",
        "SECRET-SYS",
    ]);
    c.args([
        "--reasoning-effort",
        "high",
        "--providers-allowed",
        "x, y",
        "--provider-sort",
        "price",
        "--max-tokens",
        "77",
        "--send-provider-fields",
    ]);
    let o = run(c);
    assert_code(&o, 0);
    let out = parse_jsonl(&stdout(&o));
    assert_eq!(out.len(), 3);
    let run_dir = d.path().join("data/r");
    let recs = records(&run_dir);
    assert_eq!(recs.len(), 3);
    let mut idx: Vec<u64> = recs
        .iter()
        .map(|r| r["prompt_index"].as_u64().unwrap())
        .collect();
    idx.sort();
    assert_eq!(idx, [0, 1, 2]);
    assert!(run_dir.join("batch_0.jsonl").exists() && run_dir.join("batch_1.jsonl").exists());
    let r = &recs[0];
    assert_eq!(r["completed"], true);
    assert_eq!(r["messages"][1]["reasoning"], "thinking");
    assert_eq!(r["usage"]["cost"], 0.001);
    assert!(
        !r.to_string().contains("SECRET-SYS"),
        "ephemeral prompt stored: {r}"
    );
    let req = &s.requests()[0];
    // The agent's system prompt, then the ephemeral one, in one system message.
    let sys = req["messages"][0]["content"].as_str().unwrap();
    assert!(
        sys.starts_with("You are") && sys.ends_with("\n\nSECRET-SYS"),
        "{sys}"
    );
    assert_eq!(req["reasoning"], json!({"enabled": true, "effort": "high"}));
    assert_eq!(
        req["provider"],
        json!({"only": ["x", "y"], "sort": "price"})
    );
    assert_eq!(req["max_tokens"], 77);
    let cp = read_json(&run_dir.join("checkpoint.json"));
    assert_eq!(cp["run_name"], "r");
    assert_eq!(cp["completed_prompts"], json!([0, 1, 2]));
    assert_eq!(cp["batch_stats"]["1"]["processed"], 1);
    let st = read_json(&run_dir.join("statistics.json"));
    for k in STATISTICS_KEYS {
        assert!(st.get(k).is_some(), "statistics.json lacks {k}");
    }
    assert_eq!(st["total_prompts"], 3);
    assert_eq!(st["total_batches"], 2);
    assert_eq!(st["reasoning_statistics"]["turns_with_reasoning"], 3);
    assert!((st["usage"]["cost"].as_f64().unwrap() - 0.003).abs() < 1e-9);
    // traj-run's own CPU time: more than nothing, and no more than its wall time on every
    // core (its tools' processes are not counted in it).
    let cpu = st["this_run"]["cpu_seconds"].as_f64().unwrap();
    let wall = st["duration_seconds"].as_f64().unwrap();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    assert!(
        cpu > 0.0 && cpu <= wall * cores + 0.1,
        "cpu {cpu} s, wall {wall} s"
    );
}

#[test]
fn each_error_class_is_classified_and_only_retryable_ones_retried() {
    let d = tmpdir();
    let cases = [
        (
            "p400",
            json!({"status": 400, "error": "bad field"}),
            "bad_request",
            false,
        ),
        // A 401 or a 402 stops the whole run instead (tests/cli/run_faults.rs).
        ("p403", json!({"status": 403}), "forbidden", false),
        (
            "p404",
            json!({"status": 404, "error": "no such model"}),
            "not_found",
            false,
        ),
        (
            "pctx",
            json!({"status": 400, "error": "maximum context length is 8192 tokens"}),
            "context_length",
            false,
        ),
        (
            "p429",
            json!({"status": 429, "retry_after": "0"}),
            "rate_limited",
            true,
        ),
        ("p503", json!({"status": 503}), "server_error", true),
        (
            "pjunk",
            json!({"body": "<html>not json"}),
            "invalid_response",
            true,
        ),
        (
            "p200err",
            json!({"error": "upstream failed"}),
            "server_error",
            true,
        ),
    ];
    let rules: Vec<Value> = cases
        .iter()
        .map(|(m, r, _, _)| json!({"match": m, "turns": [r]}))
        .collect();
    let s = Standin::json(json!({"rules": rules}));
    let prompts: Vec<&str> = cases.iter().map(|c| c.0).collect();
    let input = write_prompts(d.path(), &prompts);
    let mut c = traj_run(d.path(), &s);
    c.args([&input, "--max-retries", "2"]);
    let o = run(c);
    assert_code(&o, 1);
    let fails = failures(&d.path().join("data/r"));
    assert_eq!(fails.len(), cases.len());
    for (i, (m, _, class, retryable)) in cases.iter().enumerate() {
        let f = fails
            .iter()
            .find(|f| f["prompt_index"] == i as u64)
            .unwrap_or_else(|| panic!("{m}"));
        assert_eq!(f["class"], *class, "{m}: {f}");
        assert_eq!(f["retryable"], *retryable, "{m}");
        assert_eq!(
            f["http_attempts"],
            if *retryable { 3 } else { 1 },
            "{m}: {f}"
        );
        assert_eq!(f["attempts"], 1);
    }
    let st = read_json(&d.path().join("data/r/statistics.json"));
    assert_eq!(st["failure_classes"]["forbidden"], 1);
    // Resume: the non-retryable ones are never sent again; retryable ones are (and fail).
    let before = s.count();
    let mut c = traj_run(d.path(), &s);
    c.args([&input, "--max-retries", "0", "--resume"]);
    let o = run(c);
    assert_code(&o, 1);
    assert_eq!(s.count() - before, 4);
    let fails = failures(&d.path().join("data/r"));
    assert_eq!(fails.len(), cases.len() + 4);
    assert!(
        fails[cases.len()..]
            .iter()
            .all(|f| f["attempts"] == 2 && f["retryable"] == true)
    );
}

#[test]
fn retries_honour_retry_after_and_max_attempts_caps_resumes() {
    let d = tmpdir();
    let s = Standin::json(json!({"rules": [
        {"match": "flaky", "before": [{"status": 429, "retry_after": "0.6"}, {"status": 502}], "turns": [{"content": "ok"}]},
        {"match": "down", "turns": [{"status": 503}]}
    ]}));
    let input = write_prompts(d.path(), &["flaky", "down"]);
    let t = Instant::now();
    let mut c = traj_run(d.path(), &s);
    c.args([
        &input,
        "--max-retries",
        "3",
        "--retry-max-ms",
        "5000",
        "--max-attempts",
        "2",
    ]);
    let o = run(c);
    assert_code(&o, 1);
    assert!(
        t.elapsed() >= Duration::from_millis(600),
        "Retry-After not honoured: {:?}",
        t.elapsed()
    );
    let recs = records(&d.path().join("data/r"));
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["calls"][0]["http_attempts"], 3);
    let fails = failures(&d.path().join("data/r"));
    assert_eq!(fails.len(), 1);
    assert_eq!(fails[0]["http_attempts"], 4);
    // Attempt 2 of "down" on resume, then it is given up.
    for expected_calls in [4, 0] {
        let before = s.count();
        let mut c = traj_run(d.path(), &s);
        c.args([
            &input,
            "--max-retries",
            "3",
            "--max-attempts",
            "2",
            "--resume",
        ]);
        let o = run(c);
        assert_eq!(s.count() - before, expected_calls);
        if expected_calls == 0 {
            assert_code(&o, 0);
        }
    }
    assert_eq!(failures(&d.path().join("data/r")).len(), 2);
    assert_eq!(records(&d.path().join("data/r")).len(), 1);
}

#[test]
fn cache_replays_identical_requests_without_calling() {
    let d = tmpdir();
    let s = Standin::json(json!({"default": {"content": "cached {prompt}", "cost": 0.5}}));
    let input = write_prompts(d.path(), &["x", "y"]);
    let mut c = traj_run(d.path(), &s);
    c.args([&input, "--cache", "cache"]);
    assert_code(&run(c), 0);
    assert_eq!(s.count(), 2);
    let mut c = traj_run(d.path(), &s);
    c.args([
        &input,
        "--cache",
        "cache",
        "--run-dir",
        "data/r2",
        "--max-cost",
        "0.1",
    ]);
    let o = run(c);
    assert_code(&o, 0);
    assert_eq!(s.count(), 2, "cache missed");
    let a = records(&d.path().join("data/r"));
    let b = records(&d.path().join("data/r2"));
    assert_eq!(b.len(), 2);
    let by_idx = |v: &[Value], i: u64| v.iter().find(|r| r["prompt_index"] == i).unwrap().clone();
    for i in 0..2 {
        assert_eq!(by_idx(&a, i)["messages"], by_idx(&b, i)["messages"]);
        assert_eq!(by_idx(&b, i)["calls"][0]["cached"], true);
        assert!(
            by_idx(&b, i)["usage"].get("cost").is_none(),
            "a cache hit costs nothing"
        );
    }
}

#[test]
fn prompt_timeout_ends_a_stuck_prompt_as_a_failure() {
    let d = tmpdir();
    let s = Standin::json(json!({"rules": [{"match": "stuck", "turns": [{"hang": true}]}]}));
    let input = write_prompts(d.path(), &["stuck", "fine"]);
    let t = Instant::now();
    let mut c = traj_run(d.path(), &s);
    c.args([&input, "--prompt-timeout", "0.5"]);
    let o = run(c);
    assert_code(&o, 1);
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let fails = failures(&d.path().join("data/r"));
    assert_eq!(fails.len(), 1);
    assert_eq!(fails[0]["class"], "prompt_timeout");
    assert_eq!(fails[0]["retryable"], true);
    assert_eq!(records(&d.path().join("data/r")).len(), 1);
}

#[test]
fn spend_cap_stops_cleanly_and_resume_finishes() {
    let d = tmpdir();
    let s = Standin::json(json!({"latency_ms": 5, "default": {"content": "ok", "cost": 0.01}}));
    let prompts: Vec<String> = (0..40).map(|i| format!("p{i}")).collect();
    let refs: Vec<&str> = prompts.iter().map(String::as_str).collect();
    let input = write_prompts(d.path(), &refs);
    let mut c = traj_run(d.path(), &s);
    c.args([&input, "--max-cost", "0.05", "--num-workers", "2"]);
    let o = run(c);
    assert_code(&o, 1);
    assert!(stderr(&o).contains("spend cap"), "{}", stderr(&o));
    let n = records(&d.path().join("data/r")).len();
    assert!(
        (5..=8).contains(&n),
        "{n} records after a $0.05 cap at $0.01 each"
    );
    let mut c = traj_run(d.path(), &s);
    c.args([&input, "--resume", "--num-workers", "4"]);
    assert_code(&run(c), 0);
    assert_eq!(records(&d.path().join("data/r")).len(), 40);
}

#[test]
fn rate_cap_spaces_requests() {
    let d = tmpdir();
    let s = Standin::json(json!({}));
    let prompts: Vec<String> = (0..11).map(|i| format!("p{i}")).collect();
    let refs: Vec<&str> = prompts.iter().map(String::as_str).collect();
    let input = write_prompts(d.path(), &refs);
    let t = Instant::now();
    let mut c = traj_run(d.path(), &s);
    c.args([&input, "--max-rps", "20", "--num-workers", "8"]);
    assert_code(&run(c), 0);
    assert!(
        t.elapsed() >= Duration::from_millis(480),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn existing_run_needs_resume_and_bad_rows_are_located() {
    let d = tmpdir();
    let s = Standin::json(json!({}));
    let input = write_prompts(d.path(), &["a"]);
    let mut c = traj_run(d.path(), &s);
    c.arg(&input);
    assert_code(&run(c), 0);
    let mut c = traj_run(d.path(), &s);
    c.arg(&input);
    let o = run(c);
    assert_code(&o, 2);
    assert!(stderr(&o).contains("--resume"), "{}", stderr(&o));
    std::fs::write(
        d.path().join("bad.jsonl"),
        "{\"prompt\": \"ok\"}\n{\"prompt\": 5}\n",
    )
    .unwrap();
    let mut c = traj_run(d.path(), &s);
    c.args(["bad.jsonl", "--run-dir", "data/bad"]);
    let o = run(c);
    assert_code(&o, 1);
    assert!(
        stderr(&o).contains("bad.jsonl:2: prompt is a number"),
        "{}",
        stderr(&o)
    );
    // A remote endpoint needs a key.
    let mut c = cmd("traj-run", d.path());
    c.args([
        "--model",
        "m",
        "--base-url",
        "https://example.invalid/v1",
        "--run-dir",
        "data/k",
        &input,
    ]);
    let o = run(c);
    assert_code(&o, 2);
    assert!(stderr(&o).contains("OPENROUTER_API_KEY"), "{}", stderr(&o));
    std::fs::write(d.path().join("prefill.json"), "{\"role\": \"user\"}").unwrap();
    let mut c = traj_run(d.path(), &s);
    c.args([
        &input,
        "--run-dir",
        "data/p",
        "--prefill-messages",
        "prefill.json",
    ]);
    assert_code(&run(c), 2);
}

#[test]
fn duplicate_prompts_each_get_a_record_and_resume_keeps_them() {
    let d = tmpdir();
    let s = Standin::json(json!({}));
    let input = write_prompts(d.path(), &["same", "same", "other", "same"]);
    let mut c = traj_run(d.path(), &s);
    c.arg(&input);
    assert_code(&run(c), 0);
    let recs = records(&d.path().join("data/r"));
    assert_eq!(recs.len(), 4);
    assert_eq!(recs.iter().filter(|r| r["prompt"] == "same").count(), 3);
    let before = s.count();
    let mut c = traj_run(d.path(), &s);
    c.args([&input, "--resume"]);
    assert_code(&run(c), 0);
    assert_eq!(s.count(), before, "resume re-ran finished prompts");
    // Task rows with more fields, twice the very same row (a concatenated dataset):
    // two tasks, copies 0 and 1 of one row, each run once, also across a resume.
    let rows = "{\"prompt\": \"dup\", \"id\": \"x\"}\n{\"prompt\": \"dup\", \"id\": \"x\"}\n";
    std::fs::write(d.path().join("tasks.jsonl"), rows).unwrap();
    let mut c = traj_run(d.path(), &s);
    c.args(["tasks.jsonl", "--run-dir", "data/t"]);
    assert_code(&run(c), 0);
    let recs = records(&d.path().join("data/t"));
    assert_eq!(recs.len(), 2);
    let mut uids: Vec<&str> = recs
        .iter()
        .map(|r| r["task_uid"].as_str().unwrap())
        .collect();
    uids.sort();
    assert!(
        uids[0][..16] == uids[1][..16] && uids[0].ends_with(":0:0") && uids[1].ends_with(":1:0"),
        "{uids:?}"
    );
    assert!(recs.iter().all(|r| r["id"] == "x"));
    let before = s.count();
    let mut c = traj_run(d.path(), &s);
    c.args(["tasks.jsonl", "--run-dir", "data/t", "--resume"]);
    assert_code(&run(c), 0);
    assert_eq!(s.count(), before, "resume re-ran a copy");
    assert_eq!(records(&d.path().join("data/t")).len(), 2);
}

#[test]
fn two_rows_with_one_explicit_prompt_index_are_an_error_naming_both_lines() {
    let d = tmpdir();
    let s = Standin::json(json!({}));
    let rows = "{\"prompt\": \"a\", \"prompt_index\": 7}\n\n{\"prompt\": \"b\", \"prompt_index\": 3}\n{\"prompt\": \"c\", \"prompt_index\": 7}\n";
    std::fs::write(d.path().join("tasks.jsonl"), rows).unwrap();
    let mut c = traj_run(d.path(), &s);
    c.args(["tasks.jsonl", "--run-dir", "data/t"]);
    let o = run(c);
    assert_code(&o, 1);
    assert!(
        stderr(&o)
            .contains("tasks.jsonl:4: prompt_index 7 is also the prompt_index of tasks.jsonl:1"),
        "{}",
        stderr(&o)
    );
    assert_eq!(s.count(), 0, "nothing ran");
    assert!(records(&d.path().join("data/t")).is_empty());
    // Skipped with --rejects: the second row is rejected with the reason, the first runs.
    let mut c = traj_run(d.path(), &s);
    c.args(["tasks.jsonl", "--run-dir", "data/t2", "--on-error", "skip"])
        .args(["--rejects", "rej.jsonl"]);
    assert_code(&run(c), 0);
    let mut got: Vec<(u64, String)> = records(&d.path().join("data/t2"))
        .iter()
        .map(|r| {
            (
                r["prompt_index"].as_u64().unwrap(),
                r["prompt"].as_str().unwrap().into(),
            )
        })
        .collect();
    got.sort();
    assert_eq!(got, [(3, "b".to_string()), (7, "a".to_string())]);
    let rej = read_jsonl(&d.path().join("rej.jsonl"));
    assert_eq!(rej.len(), 1);
    assert_eq!(rej[0]["line"], 4);
    assert_eq!(rej[0]["record"]["prompt"], "c");
}

/// Every prompt of `n` has exactly one record (by index; hashes checked too).
/// Every task of `task {i % 17}` for i < n has exactly one record: the records, as a
/// multiset of prompts, are the input's (resume matches tasks by content, so a record
/// may carry the index of another copy of its prompt).
fn assert_exactly_once(run_dir: &Path, n: u64) {
    let recs = records(run_dir);
    let mut seen: HashMap<String, u64> = HashMap::new();
    for r in &recs {
        *seen
            .entry(r["prompt"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    for k in 0..17u64 {
        let want = (0..n).filter(|i| i % 17 == k).count() as u64;
        let p = format!("task {k}");
        assert_eq!(seen.get(&p).copied().unwrap_or(0), want, "{p}");
    }
    assert_eq!(recs.len() as u64, n);
}

#[test]
fn kill_9_at_random_points_then_resume_gives_every_prompt_exactly_once() {
    let d = tmpdir();
    let s = Standin::json(json!({"latency_ms": 15, "record": false,
        "default": {"content": "done {prompt}", "reasoning": "r"}}));
    // 240 prompts with duplicates (17 distinct texts).
    let prompts: Vec<String> = (0..240).map(|i| format!("task {}", i % 17)).collect();
    let refs: Vec<&str> = prompts.iter().map(String::as_str).collect();
    let input = write_prompts(d.path(), &refs);
    let run_dir = d.path().join("data/r");
    let mut kills = 0;
    for round in 0..6 {
        let mut c = traj_run(d.path(), &s);
        c.args([&input, "--num-workers", "6", "--batch-size", "7"]);
        if round > 0 {
            c.arg("--resume");
        }
        // Old batch files are never appended to: a resume may only cut a torn tail, or
        // end a complete last record with the newline a kill kept from it.
        let old: HashMap<String, Vec<u8>> = std::fs::read_dir(&run_dir)
            .map(|rd| {
                rd.filter_map(|e| {
                    let p = e.ok()?.path();
                    let n = p.file_name()?.to_str()?.to_string();
                    n.starts_with("batch_")
                        .then(|| (n, std::fs::read(&p).unwrap()))
                })
                .collect()
            })
            .unwrap_or_default();
        c.stdout(Stdio::null())
            .stderr(Stdio::null())
            .stdin(Stdio::null());
        let mut child = c.spawn().unwrap();
        let wait = fastrand::u64(10..250);
        std::thread::sleep(Duration::from_millis(wait));
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap(); // SIGKILL
            kills += 1;
        }
        child.wait().unwrap();
        for (name, bytes) in old {
            let now = std::fs::read(run_dir.join(&name)).unwrap_or_default();
            let newline_added =
                now.len() == bytes.len() + 1 && now.starts_with(&bytes) && now.ends_with(b"}\n");
            assert!(
                bytes.starts_with(&now) || newline_added,
                "{name} was appended to by a resumed run"
            );
        }
    }
    assert!(kills > 0, "the run was never killed; make it slower");
    // A summary write cut short leaves a temp file; resume removes it.
    std::fs::write(run_dir.join(".tmp-checkpoint"), "{").unwrap();
    // Tear the last line of one batch file by hand, as a kill during a write would.
    let last = std::fs::read_dir(&run_dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("batch_")
                && std::fs::metadata(p).unwrap().len() > 0
        })
        .max()
        .unwrap();
    let text = std::fs::read(&last).unwrap();
    std::fs::write(&last, &text[..text.len() - 10]).unwrap();
    let mut c = traj_run(d.path(), &s);
    c.args([
        &input,
        "--num-workers",
        "6",
        "--batch-size",
        "7",
        "--resume",
    ]);
    let o = run(c);
    assert_code(&o, 0);
    assert_exactly_once(&run_dir, 240);
    assert!(!run_dir.join(".tmp-checkpoint").exists());
    assert_checkpoint_matches_files(&run_dir);
    let st = read_json(&run_dir.join("statistics.json"));
    assert_eq!(st["records"], 240);
    assert_eq!(st["reasoning_statistics"]["turns_with_reasoning"], 240);
}

#[test]
fn closed_stdout_stops_cleanly() {
    let d = tmpdir();
    let s = Standin::json(json!({"latency_ms": 20, "record": false}));
    let prompts: Vec<String> = (0..300).map(|i| format!("p{i}")).collect();
    let refs: Vec<&str> = prompts.iter().map(String::as_str).collect();
    let input = write_prompts(d.path(), &refs);
    let mut c = traj_run(d.path(), &s);
    c.args([&input, "--num-workers", "4"]);
    c.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(Stdio::null());
    let mut child = c.spawn().unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert!(line.contains("prompt_index"));
    drop(out);
    let t = Instant::now();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(t.elapsed() < Duration::from_secs(5));
    let n = records(&d.path().join("data/r")).len();
    assert!(n < 300, "did not stop: {n}");
    // The files are consistent: resume completes the run.
    let mut c = traj_run(d.path(), &s);
    c.args([&input, "--num-workers", "16", "--resume"]);
    assert_code(&run(c), 0);
    let recs = records(&d.path().join("data/r"));
    assert_eq!(recs.len(), 300);
}

/// An agent script: terminal, write_file, read_file, then an answer quoting the file.
fn agent_script() -> Value {
    json!({"rules": [{"match": "", "turns": [
        {"reasoning": "Look around first.", "reasoning_field": "reasoning_content",
         "tool_calls": [{"name": "terminal", "arguments": {"command": "echo marker-$((6*7)); printenv | grep -c KEY || true"}}]},
        {"reasoning": "Write the notes.", "reasoning_field": "reasoning_details",
         "tool_calls": [{"name": "write_file", "arguments": {"path": "notes/out.txt", "content": "notes for {prompt}"}}]},
        {"reasoning": "Check them.",
         "tool_calls": [{"name": "read_file", "arguments": {"path": "notes/out.txt"}}]},
        {"reasoning": "Done.", "content": "Final: {tool_output}"}
    ]}]})
}

#[test]
fn multi_turn_tool_run_end_to_end() {
    let d = tmpdir();
    let s = Standin::json(agent_script());
    let rows = [
        json!({"prompt": "task A", "toolsets": ["terminal", "file"], "prompt_index": 0, "distribution": "terminal_only", "seed": 9}),
        json!({"prompt": "task B", "toolsets": ["terminal", "file"], "prompt_index": 1, "id": "b"}),
    ];
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(d.path().join("tasks.jsonl"), text).unwrap();
    let mut c = traj_run(d.path(), &s);
    c.env("OPENROUTER_API_KEY", "sk-secret-KEY");
    c.args(["tasks.jsonl", "--api-key-env", "OPENROUTER_API_KEY"]);
    let o = run(c);
    assert_code(&o, 0);
    let recs = parse_jsonl(&stdout(&o));
    assert_eq!(recs.len(), 2);
    let a = recs.iter().find(|r| r["prompt_index"] == 0).unwrap();
    assert_eq!(a["completed"], true);
    assert_eq!(a["partial"], false);
    assert_eq!(a["api_calls"], 4);
    assert_eq!(a["toolsets"], json!(["terminal", "file"]));
    assert_eq!(a["distribution"], "terminal_only");
    assert_eq!(a["seed"], 9);
    let names: Vec<&str> = a["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"terminal") && names.contains(&"write_file"),
        "{names:?}"
    );
    let m = a["messages"].as_array().unwrap();
    // user, (assistant, tool) x 3, assistant
    assert_eq!(m.len(), 8);
    assert_eq!(m[1]["reasoning_content"], "Look around first.");
    assert_eq!(m[3]["reasoning_details"][0]["text"], "Write the notes.");
    let term = m[2]["content"].as_str().unwrap();
    assert!(term.contains("marker-42"), "terminal ran for real: {term}");
    // Tool processes never see the API key.
    assert!(!term.contains("sk-secret"), "{term}");
    assert_eq!(m[2]["tool_call_id"], m[1]["tool_calls"][0]["id"]);
    let answer = m[7]["content"].as_str().unwrap();
    assert!(answer.contains("notes for task A"), "{answer}");
    let b = recs.iter().find(|r| r["prompt_index"] == 1).unwrap();
    assert_eq!(b["id"], "b");
    let st = read_json(&d.path().join("data/r/statistics.json"));
    assert_eq!(st["tool_statistics"]["terminal"]["count"], 2);
    assert_eq!(st["tool_statistics"]["write_file"]["success"], 2);
    assert_eq!(st["tool_statistics"]["read_file"]["success_rate"], 100.0);
    assert_eq!(st["reasoning_statistics"]["total_assistant_turns"], 8);
    assert_eq!(st["reasoning_statistics"]["turns_with_reasoning"], 8);
    // The key went to the endpoint as a bearer token only.
    assert!(
        s.requests()
            .iter()
            .all(|r| !r.to_string().contains("sk-secret"))
    );
}

/// A tool command cannot read the key from traj-run's own environment
/// (`/proc/$PPID/environ`): traj-run makes itself non-dumpable, so the kernel
/// denies a same-user process its `/proc` files. Root bypasses that check, so
/// under root traj-run runs as `nobody` through `setpriv`.
#[test]
fn tool_commands_cannot_read_the_key_from_the_parents_proc_environ() {
    use std::os::unix::fs::PermissionsExt;

    const SETPRIV: &str = "/usr/bin/setpriv";
    let root = rustix::process::geteuid().is_root();
    if root && !Path::new(SETPRIV).exists() {
        eprintln!(
            "skipped: running as root (which reads any /proc/PID/environ) and {SETPRIV} is missing"
        );
        return;
    }
    let d = tmpdir();
    // `nobody` writes the run directory and the task workspaces here.
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let s = Standin::json(json!({"rules": [{"match": "", "turns": [
        {"tool_calls": [{"name": "terminal", "arguments": {"command":
            "echo ran-$((6*7)); cat /proc/$PPID/environ | tr '\\0' '\\n'; echo parent=$(cat /proc/$PPID/comm); \
             echo seen=$(cat /proc/[0-9]*/comm 2>/dev/null | grep -c '^traj-run')"}}]},
        {"content": "Final: {tool_output}"}
    ]}]}));
    let row = json!({"prompt": "read the parent's environment", "toolsets": ["terminal"]});
    std::fs::write(d.path().join("tasks.jsonl"), format!("{row}\n")).unwrap();
    let mut c = if root {
        // A copy `nobody` can run wherever the checkout is (its parents may be closed).
        let exe = d.path().join("traj-run");
        std::fs::copy(bin("traj-run"), &exe).unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut c = Command::new(SETPRIV);
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(&exe);
        c
    } else {
        Command::new(bin("traj-run"))
    };
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", d.path())
        .env("TMPDIR", d.path())
        .env("OPENROUTER_API_KEY", "sk-proc-SECRET-4711")
        .current_dir(d.path())
        .args([
            "--model",
            "standin",
            "--base-url",
            &s.url(),
            "--run-dir",
            "data/r",
            "-q",
        ])
        .args(["tasks.jsonl", "--api-key-env", "OPENROUTER_API_KEY"])
        .args(["--sandbox", "local"]); // the backend with the host's files in view
    let o = run(c);
    assert_code(&o, 0);
    let recs = parse_jsonl(&stdout(&o));
    assert_eq!(recs.len(), 1);
    let m = recs[0]["messages"].as_array().unwrap();
    let term = m[2]["content"].as_str().unwrap();
    assert!(term.contains("ran-42"), "{term}");
    // Its parent is its PID namespace's first process: the supervisor of the sandbox
    // the worker keeps (toolbox::pod), with a scrubbed environment and non-dumpable, or
    // with --no-sandbox-reuse a shell with the scrubbed environment. traj-run is not
    // even visible.
    assert!(term.contains("parent=traj-pod"), "{term}");
    assert!(
        term.contains("/proc/1/environ: Permission denied"),
        "{term}"
    );
    assert!(term.contains("seen=0"), "{term}");
    let secret = "sk-proc-SECRET";
    assert!(!stdout(&o).contains(secret), "the key leaked: {term}");
    assert!(!stderr(&o).contains(secret));
    for e in std::fs::read_dir(d.path().join("data/r")).unwrap() {
        let p = e.unwrap().path();
        let text = String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned();
        assert!(!text.contains(secret), "{}", p.display());
    }
    assert!(s.requests().iter().all(|r| !r.to_string().contains(secret)));
}

#[test]
fn turn_cap_asks_for_a_final_answer_and_the_last_allowed_answer_is_completed() {
    let d = tmpdir();
    let s = Standin::json(agent_script());
    let input = write_prompts(d.path(), &["capped"]);
    // 4 turns allowed: the answer comes on call 4 => completed (no off-by-one).
    let mut c = traj_run(d.path(), &s);
    c.args([&input, "--toolsets", "terminal,file", "--max-turns", "4"]);
    let o = run(c);
    assert_code(&o, 0);
    let r = &parse_jsonl(&stdout(&o))[0];
    assert_eq!(r["completed"], true);
    assert_eq!(r["api_calls"], 4);
    // 2 turns: the cap is hit, one more call without tools asks for the answer.
    let mut c = traj_run(d.path(), &s);
    c.args([
        &input,
        "--toolsets",
        "terminal,file",
        "--max-turns",
        "2",
        "--run-dir",
        "data/cap",
    ]);
    let o = run(c);
    assert_code(&o, 0);
    let r = &parse_jsonl(&stdout(&o))[0];
    assert_eq!(r["completed"], false);
    assert_eq!(r["partial"], false);
    assert_eq!(r["stop_reason"], "turn_cap");
    assert_eq!(r["api_calls"], 3);
    let m = r["messages"].as_array().unwrap();
    assert_eq!(m[m.len() - 2]["role"], "user");
    let reqs = s.requests();
    let last = reqs.last().unwrap();
    assert!(
        last.get("tools").is_none(),
        "final-answer request offers no tools"
    );
}

#[test]
fn invalid_tool_calls_get_one_correction() {
    let d = tmpdir();
    let s = Standin::json(json!({"rules": [
        {"match": "typo", "turns": [
            {"tool_calls": [{"name": "terminall", "arguments": {"command": "ls"}}]},
            {"content": "recovered"}]},
        {"match": "stubborn", "turns": [
            {"tool_calls": [{"name": "terminal", "arguments": "{\"command\": "}]},
            {"tool_calls": [{"name": "nope", "arguments": {}}]}]}
    ]}));
    let input = write_prompts(d.path(), &["typo", "stubborn"]);
    let mut c = traj_run(d.path(), &s);
    c.args([&input, "--toolsets", "terminal"]);
    let o = run(c);
    assert_code(&o, 0);
    let recs = parse_jsonl(&stdout(&o));
    let typo = recs.iter().find(|r| r["prompt"] == "typo").unwrap();
    assert_eq!(typo["completed"], true);
    assert_eq!(typo["api_calls"], 2);
    assert!(
        typo["messages"][2]["content"]
            .as_str()
            .unwrap()
            .contains("Unknown tool")
    );
    let stubborn = recs.iter().find(|r| r["prompt"] == "stubborn").unwrap();
    assert_eq!(stubborn["partial"], true);
    assert_eq!(stubborn["completed"], false);
    assert_eq!(stubborn["stop_reason"], "invalid_tool_calls");
    assert!(
        stubborn["messages"][2]["content"]
            .as_str()
            .unwrap()
            .contains("not valid JSON")
    );
}

#[test]
fn distribution_samples_toolsets_for_plain_prompts() {
    let d = tmpdir();
    let s = Standin::json(json!({}));
    let input = write_prompts(d.path(), &["a", "b", "c"]);
    let mut c = traj_run(d.path(), &s);
    c.args([&input, "--distribution", "terminal_only", "--seed", "3"]);
    let o = run(c);
    assert_code(&o, 0);
    for r in parse_jsonl(&stdout(&o)) {
        assert_eq!(r["toolsets"], json!(["terminal", "file"]), "{r}");
    }
    let mut c = traj_run(d.path(), &s);
    c.args([&input, "--distribution", "nope", "--run-dir", "data/x"]);
    assert_code(&run(c), 2);
}

#[test]
fn ctrl_c_stops_cleanly_and_resume_finishes() {
    let d = tmpdir();
    let s = Standin::json(
        json!({"latency_ms": 20, "record": false, "rules": [{"match": "", "turns": [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "x.txt", "content": "{prompt}"}}]},
        {"content": "done"}]}]}),
    );
    let prompts: Vec<String> = (0..200).map(|i| format!("p{i}")).collect();
    let refs: Vec<&str> = prompts.iter().map(String::as_str).collect();
    let input = write_prompts(d.path(), &refs);
    let mut c = traj_run(d.path(), &s);
    c.args([
        &input,
        "--num-workers",
        "8",
        "--toolsets",
        "file",
        "--workspace-root",
        "ws",
    ]);
    std::fs::create_dir(d.path().join("ws")).unwrap();
    c.stdout(Stdio::null())
        .stderr(Stdio::piped())
        .stdin(Stdio::null());
    let child = c.spawn().unwrap();
    let run_dir = d.path().join("data/r");
    let t = Instant::now();
    while records_so_far(&run_dir) == 0 && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let k = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(k.success());
    let o = child.wait_with_output().unwrap();
    assert_code(&o, 1);
    assert!(stderr(&o).contains("interrupted"), "{}", stderr(&o));
    let n = records(&run_dir).len();
    assert!(n > 0 && n < 200, "{n}");
    let cp = read_json(&run_dir.join("checkpoint.json"));
    assert_eq!(cp["completed_prompts"].as_array().unwrap().len(), n);
    // Abandoned agents removed their workspaces.
    assert_eq!(std::fs::read_dir(d.path().join("ws")).unwrap().count(), 0);
    let mut c = traj_run(d.path(), &s);
    c.args([
        &input,
        "--num-workers",
        "32",
        "--toolsets",
        "file",
        "--resume",
    ]);
    assert_code(&run(c), 0);
    let recs = records(&run_dir);
    assert_eq!(recs.len(), 200);
    let idx: std::collections::HashSet<u64> = recs
        .iter()
        .map(|r| r["prompt_index"].as_u64().unwrap())
        .collect();
    assert_eq!(idx.len(), 200);
}

#[test]
fn demo_agent_script_runs_and_caps_cleanly() {
    let d = tmpdir();
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/standin/scripts/agent.json"),
    )
    .unwrap();
    let s = Standin::json(serde_json::from_str(&text).unwrap());
    let input = write_prompts(
        d.path(),
        &["Summarise the workspace", "Write a haiku about logs"],
    );
    let mut c = traj_run(d.path(), &s);
    c.args([&input, "--toolsets", "terminal,file"]);
    let o = run(c);
    assert_code(&o, 0);
    let recs = parse_jsonl(&stdout(&o));
    assert_eq!(recs.len(), 2);
    for r in &recs {
        assert_eq!(r["completed"], true, "{r}");
        assert_eq!(r["api_calls"], 4);
        let answer = r["messages"][7]["content"].as_str().unwrap();
        assert!(answer.contains(r["prompt"].as_str().unwrap()), "{answer}");
        assert!((r["usage"]["cost"].as_f64().unwrap() - 0.002).abs() < 1e-9);
    }
}

/// The reference's golden run (`/work/shared/reference/golden`): 20 prompts, batch size 5,
/// terminal_only, a terminal call then an answer, both with reasoning. Our
/// checkpoint.json and statistics.json carry the same fields and values.
#[test]
fn golden_shaped_run_matches_the_reference_files() {
    let d = tmpdir();
    let s = Standin::json(json!({"rules": [{"match": "", "turns": [
        {"reasoning": "Check the environment.", "reasoning_field": "reasoning_content",
         "tool_calls": [{"name": "terminal", "arguments": {"command": "printenv; echo marker-$((6*7))"}}]},
        {"reasoning": "Report it.", "reasoning_field": "reasoning_content", "content": "The environment is reported."}
    ]}]}));
    let prompts: Vec<String> = (0..20)
        .map(|i| format!("Report the environment, task {i}"))
        .collect();
    let refs: Vec<&str> = prompts.iter().map(String::as_str).collect();
    let input = write_prompts(d.path(), &refs);
    let mut c = traj_run(d.path(), &s);
    c.env("OPENROUTER_API_KEY", "sk-or-SECRET");
    c.args([
        &input,
        "--distribution",
        "terminal_only",
        "--batch-size",
        "5",
        "--max-turns",
        "5",
        "--num-workers",
        "2",
    ]);
    c.args(["--run-dir", "data/golden"]);
    let o = run(c);
    assert_code(&o, 0);
    let run_dir = d.path().join("data/golden");
    let st = read_json(&run_dir.join("statistics.json"));
    for k in STATISTICS_KEYS {
        assert!(st.get(k).is_some(), "{k}");
    }
    assert_eq!(st["run_name"], "golden");
    assert_eq!(st["distribution"], "terminal_only");
    assert_eq!(st["total_prompts"], 20);
    assert_eq!(st["total_batches"], 4);
    assert_eq!(st["batch_size"], 5);
    assert_eq!(
        st["tool_statistics"],
        json!({"terminal": {"count": 20, "success": 20, "failure": 0,
        "success_rate": 100.0, "failure_rate": 0.0}})
    );
    assert_eq!(
        st["reasoning_statistics"],
        json!({"total_assistant_turns": 40,
        "turns_with_reasoning": 40, "turns_without_reasoning": 0})
    );
    let cp = read_json(&run_dir.join("checkpoint.json"));
    assert_eq!(cp["run_name"], "golden");
    assert_eq!(
        cp["completed_prompts"],
        json!((0..20).collect::<Vec<u64>>())
    );
    for b in 0..4 {
        let bs = &cp["batch_stats"][b.to_string()];
        assert_eq!(
            (
                bs["processed"].as_u64(),
                bs["skipped"].as_u64(),
                bs["discarded_no_reasoning"].as_u64()
            ),
            (Some(5), Some(0), Some(0)),
            "{cp}"
        );
    }
    assert!(cp["last_updated"].as_str().unwrap().ends_with('Z'));
    for r in records(&run_dir) {
        let out = r["messages"][2]["content"].as_str().unwrap();
        assert!(out.contains("marker-42"), "{out}");
        assert!(!out.contains("SECRET"), "the API key reached a tool: {out}");
        assert_eq!(
            r["metadata"]["batch_num"],
            r["prompt_index"].as_u64().unwrap() / 5
        );
    }
}

#[test]
fn progress_lines_on_stderr() {
    let d = tmpdir();
    let s = Standin::json(
        json!({"latency_ms": 30, "record": false, "default": {"content": "ok", "cost": 0.25}}),
    );
    let prompts: Vec<String> = (0..40).map(|i| format!("p{i}")).collect();
    let refs: Vec<&str> = prompts.iter().map(String::as_str).collect();
    let input = write_prompts(d.path(), &refs);
    let mut c = cmd("traj-run", d.path());
    c.args([
        "--model",
        "m",
        "--base-url",
        &s.url(),
        "--run-dir",
        "data/r",
        &input,
    ]);
    c.args(["--num-workers", "4", "--progress-secs", "0.1"]);
    let o = run(c);
    assert_code(&o, 0);
    let err = stderr(&o);
    let line = err
        .lines()
        .find(|l| l.contains("in flight"))
        .unwrap_or_else(|| panic!("{err}"));
    for part in ["/40 done", "failed", "prompts/s", "tokens", "$", "ETA"] {
        assert!(line.contains(part), "{part}: {line}");
    }
    assert!(err.contains("40 records, 0 failures"), "{err}");
    assert!(err.contains("$10.0000"), "{err}");
}

#[test]
fn truncated_replies_are_partial_or_failures() {
    let d = tmpdir();
    let s = Standin::json(json!({"rules": [
        {"match": "later", "turns": [
            {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo hi"}}]},
            {"content": "cut in the midd", "finish_reason": "length"}]},
        {"match": "first", "turns": [{"content": "cut", "finish_reason": "length"}]},
        {"match": "empty", "turns": [{"content": ""}]}
    ]}));
    let input = write_prompts(d.path(), &["later", "first", "empty"]);
    let mut c = traj_run(d.path(), &s);
    c.args([&input, "--toolsets", "terminal"]);
    let o = run(c);
    assert_code(&o, 1);
    let recs = parse_jsonl(&stdout(&o));
    let later = recs.iter().find(|r| r["prompt"] == "later").unwrap();
    assert_eq!(
        (later["completed"].as_bool(), later["partial"].as_bool()),
        (Some(false), Some(true))
    );
    assert_eq!(later["stop_reason"], "length");
    assert_eq!(later["api_calls"], 2);
    assert_eq!(
        later["messages"].as_array().unwrap().len(),
        3,
        "the cut reply is left out"
    );
    let empty = recs.iter().find(|r| r["prompt"] == "empty").unwrap();
    assert_eq!(empty["stop_reason"], "empty_answer");
    assert_eq!(empty["partial"], true);
    let fails = failures(&d.path().join("data/r"));
    assert_eq!(fails.len(), 1);
    assert_eq!(fails[0]["class"], "length");
    assert_eq!(fails[0]["retryable"], false);
}

#[test]
fn shards_run_each_prompt_once_with_global_indices() {
    let d = tmpdir();
    let s = Standin::json(json!({"default": {"reasoning": "r", "content": "ok"}}));
    let prompts = ["a", "b", "c", "d", "e"];
    let file = write_prompts(d.path(), &prompts);
    let mut seen = Vec::new();
    for i in 0..2 {
        let mut c = traj_run(d.path(), &s);
        let shard = format!("{i}/2");
        let dir = format!("data/s{i}");
        c.args(["--shard", &shard, "--run-dir", &dir, &file]);
        let o = run(c);
        assert_code(&o, 0);
        for r in records(&d.path().join(&dir)) {
            let idx = r["prompt_index"].as_u64().unwrap() as usize;
            assert_eq!(r["prompt"], prompts[idx], "global index kept in a shard");
            assert_eq!(idx % 2, i, "row {idx} in shard {i}");
            seen.push(idx);
        }
    }
    seen.sort();
    assert_eq!(seen, vec![0, 1, 2, 3, 4]);
}

// ---- issue 13: exactly once under concurrency and signals ---------------------------

#[test]
fn a_second_process_on_a_run_dir_in_use_exits_naming_the_holder_or_waits() {
    let d = tmpdir();
    let s = Standin::json(json!({"latency_ms": 40, "record": false}));
    let prompts: Vec<String> = (0..30).map(|i| format!("p{i}")).collect();
    let refs: Vec<&str> = prompts.iter().map(String::as_str).collect();
    let input = write_prompts(d.path(), &refs);
    let run_dir = d.path().join("data/r");
    let mut c = traj_run(d.path(), &s);
    c.args([&input, "-j", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut first = c.spawn().unwrap();
    wait_for("the first record", 20, || records_so_far(&run_dir) > 0);
    // Refused at once, naming the holder.
    let mut c = traj_run(d.path(), &s);
    c.args([&input, "--resume"]);
    let t = Instant::now();
    let o = run(c);
    assert_code(&o, 1);
    assert!(t.elapsed() < Duration::from_secs(5));
    let e = stderr(&o);
    assert!(e.contains(&format!("pid {}", first.id())), "{e}");
    assert!(e.contains("in use"), "{e}");
    // --wait blocks until the first one ends, then finds nothing left to run.
    let mut c = traj_run(d.path(), &s);
    c.args([&input, "--resume", "--wait", "-j", "4"]);
    let o = run(c);
    assert_code(&o, 0);
    assert!(
        first.try_wait().unwrap().is_some(),
        "--wait ran beside the holder"
    );
    assert!(first.wait().unwrap().success());
    let recs = records(&run_dir);
    assert_eq!(recs.len(), 30);
    let idx: std::collections::HashSet<u64> = recs
        .iter()
        .map(|r| r["prompt_index"].as_u64().unwrap())
        .collect();
    assert_eq!(idx.len(), 30);
}

#[test]
fn sigterm_sighup_and_sigint_stop_cleanly_killing_tools_and_removing_workspaces() {
    for (k, sig) in ["TERM", "HUP", "INT"].iter().enumerate() {
        let d = tmpdir();
        let secs = format!("{}", 4240 + k);
        let s = Standin::json(json!({"record": false, "rules": [{"match": "", "turns": [
            {"tool_calls": [{"name": "terminal", "arguments": {"command": format!("sleep {secs}")}}]},
            {"content": "done"}]}]}));
        let input = write_prompts(d.path(), &["a", "b", "c"]);
        std::fs::create_dir(d.path().join("ws")).unwrap();
        let mut c = traj_run(d.path(), &s);
        c.args([
            &input,
            "-j",
            "2",
            "--toolsets",
            "terminal",
            "--workspace-root",
            "ws",
        ])
        .args(["--tool-timeout", "600"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
        let child = c.spawn().unwrap();
        let argv = ["sleep", secs.as_str()];
        wait_for("two sleeping tools", 20, || {
            processes_running(&argv).len() == 2
        });
        let t = Instant::now();
        send_signal(sig, child.id());
        let o = child.wait_with_output().unwrap();
        assert!(t.elapsed() < Duration::from_secs(10), "SIG{sig}: slow stop");
        assert_code(&o, 1);
        assert!(
            stderr(&o).contains("interrupted"),
            "SIG{sig}: {}",
            stderr(&o)
        );
        assert!(
            processes_running(&argv).is_empty(),
            "SIG{sig}: a tool outlived traj-run"
        );
        assert_eq!(std::fs::read_dir(d.path().join("ws")).unwrap().count(), 0);
        let run_dir = d.path().join("data/r");
        let st = read_json(&run_dir.join("statistics.json"));
        assert_eq!(st["this_run"]["stopped"], "interrupted", "SIG{sig}");
        assert_eq!(st["this_run"]["records"], 0);
        let cp = read_json(&run_dir.join("checkpoint.json"));
        assert_eq!(cp["completed_prompts"], json!([]));
    }
}

/// Every checkpoint count equals the files: records per batch file, failures per batch,
/// the indices of records and of failures without a record.
fn assert_checkpoint_matches_files(run_dir: &Path) {
    let cp = read_json(&run_dir.join("checkpoint.json"));
    let mut done = std::collections::BTreeSet::new();
    for (b, bs) in cp["batch_stats"].as_object().unwrap() {
        let p = run_dir.join(format!("batch_{b}.jsonl"));
        let n = if p.exists() { read_jsonl(&p).len() } else { 0 };
        assert_eq!(bs["processed"].as_u64().unwrap() as usize, n, "batch {b}");
    }
    for r in records(run_dir) {
        done.insert(r["prompt_index"].as_u64().unwrap());
    }
    let cp_done: std::collections::BTreeSet<u64> = cp["completed_prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(cp_done, done);
    let batches = std::fs::read_dir(run_dir)
        .unwrap()
        .filter(|e| {
            let n = e.as_ref().unwrap().file_name();
            n.to_string_lossy().starts_with("batch_")
        })
        .count();
    assert_eq!(cp["batch_stats"].as_object().unwrap().len(), batches);
    let st = read_json(&run_dir.join("statistics.json"));
    assert_eq!(
        st["records"].as_u64().unwrap() as usize,
        records(run_dir).len()
    );
}

#[test]
fn resume_matches_finished_tasks_by_content_whatever_their_order() {
    let d = tmpdir();
    let s = Standin::json(json!({"latency_ms": 15, "record": false,
        "default": {"content": "done {prompt}"}}));
    // 20 texts, each three times; the third copy of some is another task (other
    // toolsets), so it must run although its prompt is done.
    let mut rows: Vec<Value> = Vec::new();
    for i in 0..60 {
        let mut r = json!({"prompt": format!("task {}", i % 20)});
        if i >= 40 && i % 2 == 0 {
            r["toolsets"] = json!(["file"]);
        }
        rows.push(r);
    }
    let write = |rows: &[Value]| {
        let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
        std::fs::write(d.path().join("tasks.jsonl"), text).unwrap();
    };
    write(&rows);
    let run_dir = d.path().join("data/r");
    let mut c = traj_run(d.path(), &s);
    c.args(["tasks.jsonl", "-j", "3", "--batch-size", "7"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    wait_for("some records", 30, || records_so_far(&run_dir) >= 12);
    child.kill().unwrap();
    child.wait().unwrap();
    let before = records(&run_dir).len();
    assert!(before < 60, "{before}");
    // Shuffled: reversed, then rotated; prompt_index (the row number) changes too.
    rows.reverse();
    rows.rotate_left(17);
    write(&rows);
    let mut c = traj_run(d.path(), &s);
    c.args(["tasks.jsonl", "-j", "4", "--batch-size", "7", "--resume"]);
    c.args(["--toolsets", "terminal"]);
    let o = run(c);
    assert_code(&o, 0);
    let recs = records(&run_dir);
    assert_eq!(recs.len(), 60, "every task exactly once, none run twice");
    let mut seen: HashMap<(String, Value), usize> = HashMap::new();
    for r in &recs {
        let own = if r["toolsets"] == json!(["file"]) {
            json!(["file"])
        } else {
            Value::Null
        };
        *seen
            .entry((r["prompt"].as_str().unwrap().to_string(), own))
            .or_default() += 1;
    }
    for i in 0..20 {
        let p = format!("task {i}");
        let other = usize::from(i % 2 == 0);
        assert_eq!(
            seen.get(&(p.clone(), Value::Null)).copied().unwrap_or(0),
            3 - other,
            "{p}"
        );
        assert_eq!(seen.get(&(p, json!(["file"]))).copied().unwrap_or(0), other);
    }
    assert_checkpoint_matches_files(&run_dir);
    // A second resume finds everything done.
    let mut c = traj_run(d.path(), &s);
    c.args(["tasks.jsonl", "--resume", "--toolsets", "terminal"]);
    assert_code(&run(c), 0);
    assert_eq!(records(&run_dir).len(), 60);
    assert_checkpoint_matches_files(&run_dir);
}

#[test]
fn a_reply_still_arriving_when_a_timeout_fires_is_a_timeout() {
    let d = tmpdir();
    let body = json!({"choices": [{"message": {"role": "assistant", "content": "x".repeat(200)},
        "finish_reason": "stop"}]})
    .to_string();
    let s = Standin::json(json!({"rules": [
        {"match": "slow", "turns": [{"body": body, "stall_body": true}]}]}));
    let input = write_prompts(d.path(), &["slow", "fine"]);
    // --request-timeout: class timeout (retried, then the failure line).
    let mut c = traj_run(d.path(), &s);
    c.args([&input, "--request-timeout", "0.3", "--max-retries", "1"]);
    let o = run(c);
    assert_code(&o, 1);
    let fails = failures(&d.path().join("data/r"));
    assert_eq!(fails.len(), 1, "{fails:?}");
    assert_eq!(fails[0]["class"], "timeout", "{}", fails[0]);
    assert_eq!(fails[0]["http_attempts"], 2);
    // --prompt-timeout cutting the same request: a prompt timeout.
    let d = tmpdir();
    let input = write_prompts(d.path(), &["slow"]);
    let mut c = traj_run(d.path(), &s);
    c.args([&input, "--prompt-timeout", "0.4"]);
    let t = Instant::now();
    let o = run(c);
    assert_code(&o, 1);
    assert!(t.elapsed() < Duration::from_secs(5));
    let fails = failures(&d.path().join("data/r"));
    assert_eq!(fails[0]["class"], "prompt_timeout", "{}", fails[0]);
}

// ---- issue 13: the same agent as the reference, unless asked otherwise --------------

#[test]
fn request_bodies_carry_the_system_prompt_default_tools_and_no_provider_fields() {
    let d = tmpdir();
    let s = Standin::json(json!({}));
    let input = write_prompts(d.path(), &["hello"]);
    let run_dir = d.path().join("data/r");
    let mut c = traj_run(d.path(), &s);
    c.args([
        &input,
        "--reasoning-effort",
        "high",
        "--providers-allowed",
        "x",
    ]);
    c.args(["-j", "1"]);
    let o = run(c);
    assert_code(&o, 0);
    assert!(stderr(&o).contains("not sent to"), "{}", stderr(&o));
    let req = &s.requests()[0];
    // A plain endpoint gets no OpenRouter fields.
    assert!(
        req.get("reasoning").is_none() && req.get("provider").is_none(),
        "{req}"
    );
    assert!(req.get("usage").is_none());
    // The default agent system prompt, naming the model and today's date.
    let sys = &req["messages"][0];
    assert_eq!(sys["role"], "system");
    let text = sys["content"].as_str().unwrap();
    let today = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d"])
        .output()
        .unwrap();
    let today = String::from_utf8(today.stdout).unwrap();
    assert!(
        text.contains("standin") && text.contains(today.trim()),
        "{text}"
    );
    assert_eq!(req["messages"][1]["content"], "hello");
    // Tools of the `default` distribution, offered without --toolsets/--distribution.
    let tools = req["tools"].as_array().expect("tools offered by default");
    assert!(!tools.is_empty());
    let rec = &records(&run_dir)[0];
    assert!(!rec["toolsets"].as_array().unwrap().is_empty());
    assert_eq!(
        rec["messages"][0]["role"], "user",
        "the system prompt is not stored"
    );
    let st = read_json(&run_dir.join("statistics.json"));
    assert_eq!(st["distribution"], "default");
    assert_eq!(st["system_prompt"]["source"], "default");
    assert_eq!(st["system_prompt"]["text"], text);

    // --system-prompt @FILE, TEXT, and --no-system-prompt.
    std::fs::write(d.path().join("sys.txt"), "FILE PROMPT").unwrap();
    for (i, (flags, want, source)) in [
        (
            vec!["--system-prompt", "@sys.txt"],
            Some("FILE PROMPT"),
            "file",
        ),
        (
            vec!["--system-prompt", "TEXT PROMPT"],
            Some("TEXT PROMPT"),
            "text",
        ),
        (vec!["--no-system-prompt"], None, "none"),
    ]
    .into_iter()
    .enumerate()
    {
        let dir = format!("data/s{i}");
        let s = Standin::json(json!({}));
        let mut c = cmd("traj-run", d.path());
        c.args([
            "--model",
            "standin",
            "--base-url",
            &s.url(),
            "--run-dir",
            &dir,
            "-q",
        ])
        .args([
            &input,
            "--send-provider-fields",
            "--reasoning-effort",
            "low",
        ])
        .args(&flags);
        assert_code(&run(c), 0);
        let req = &s.requests()[0];
        assert_eq!(req["reasoning"], json!({"enabled": true, "effort": "low"}));
        match want {
            Some(w) => assert_eq!(req["messages"][0], json!({"role": "system", "content": w})),
            None => assert_eq!(req["messages"][0]["role"], "user"),
        }
        let st = read_json(&d.path().join(&dir).join("statistics.json"));
        assert_eq!(st["system_prompt"]["source"], source);
    }
    // A system prompt file that cannot be read: exit 1 naming it, before any request.
    let s = Standin::json(json!({}));
    let mut c = traj_run(d.path(), &s);
    c.args([&input, "--system-prompt", "@nope.txt"]);
    let o = run(c);
    assert_code(&o, 1);
    assert!(stderr(&o).contains("nope.txt"), "{}", stderr(&o));
    assert_eq!(s.count(), 0);
}

#[test]
fn a_task_never_gets_an_empty_tool_list() {
    let d = tmpdir();
    let s = Standin::json(json!({}));
    // A row asking only for a toolset whose tools cannot run here (moa needs models).
    std::fs::write(
        d.path().join("t.jsonl"),
        "{\"prompt\": \"x\", \"toolsets\": [\"moa\"]}\n{\"prompt\": \"none\", \"toolsets\": []}\n",
    )
    .unwrap();
    let mut c = traj_run(d.path(), &s);
    c.arg("t.jsonl");
    let o = run(c);
    assert_code(&o, 1);
    let fails = failures(&d.path().join("data/r"));
    assert_eq!(fails.len(), 1);
    assert_eq!(fails[0]["class"], "tool_host");
    assert_eq!(fails[0]["retryable"], true);
    // `toolsets: []` asks for no tools, and gets none.
    let recs = records(&d.path().join("data/r"));
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["prompt"], "none");
    assert_eq!(s.count(), 1);
    // --toolsets naming only such toolsets is refused at once.
    let mut c = cmd("traj-run", d.path());
    c.args([
        "--model",
        "m",
        "--base-url",
        &s.url(),
        "--run-dir",
        "data/q",
    ])
    .args(["--toolsets", "moa", "t.jsonl"]);
    let o = run(c);
    assert_code(&o, 2);
    assert!(
        stderr(&o).contains("no tool of moa is available"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn sample_tools_then_run_on_every_distribution_never_offers_an_empty_tool_list() {
    let d = tmpdir();
    let s = Standin::json(json!({"record": false}));
    let prompts: Vec<String> = (0..12).map(|i| format!("q{i}")).collect();
    let refs: Vec<&str> = prompts.iter().map(String::as_str).collect();
    let input = write_prompts(d.path(), &refs);
    for (k, dist) in [
        "default",
        "image_gen",
        "research",
        "science",
        "development",
        "safe",
        "balanced",
        "terminal_only",
        "terminal_web",
        "creative",
        "reasoning",
        "browser_use",
        "browser_tasks",
        "terminal_tasks",
        "mixed_tasks",
    ]
    .iter()
    .enumerate()
    {
        let mut c = cmd("traj-sample-tools", d.path());
        c.args(["--distribution", dist, &input, "-o", "tasks.jsonl"]);
        assert_code(&run(c), 0);
        let mut c = cmd("traj-run", d.path());
        let dir = format!("data/d{k}");
        c.args([
            "--model",
            "m",
            "--base-url",
            &s.url(),
            "--run-dir",
            &dir,
            "-q",
        ])
        .args(["tasks.jsonl", "-j", "4"]);
        let _ = run(c);
        let run_dir = d.path().join(&dir);
        for r in records(&run_dir) {
            assert!(
                !r["tools"].as_array().unwrap().is_empty(),
                "{dist}: a record offered no tools: {}",
                r["toolsets"]
            );
        }
        for f in failures(&run_dir) {
            assert_eq!(f["class"], "tool_host", "{dist}: {f}");
        }
        assert_eq!(
            records(&run_dir).len() + failures(&run_dir).len(),
            12,
            "{dist}"
        );
        // The toolsets came from the task rows' distribution, not from a default.
        let st = read_json(&run_dir.join("statistics.json"));
        assert_eq!(st["distribution"], *dist, "{dist}");
    }
}

// ---- issue 13: images -----------------------------------------------------------------

/// A fake docker CLI (no engine runs here): images listed in `images` are present,
/// `pull` of one listed in `registry` adds it to `images`, `run` of the image `badrun`
/// fails, `exec` runs the command locally; every call is logged to `log`.
fn fake_docker(dir: &Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    let cli = dir.join("fake-docker");
    std::fs::write(
        &cli,
        format!(
            r#"#!/bin/sh
d={d}
printf '%s\n' "$*" >> "$d/log"
case "$1" in
  image) grep -qx "$4" "$d/images" ;;
  pull) if grep -qx "$3" "$d/registry"; then echo "$3" >> "$d/images"; else echo "pull access denied for $3" >&2; exit 1; fi ;;
  run) case "$*" in *" badrun sleep infinity") echo "cannot start container: no init" >&2; exit 125 ;; esac; echo 0123abcd ;;
  exec) shift; while [ "${{1#-}}" != "$1" ]; do case "$1" in -w|-e) shift 2 ;; *) shift ;; esac; done; shift; exec "$@" ;;
  rm) ;;
esac
"#,
            d = dir.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&cli, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(dir.join("images"), "present\nbadrun\n").unwrap();
    std::fs::write(dir.join("registry"), "pullable\n").unwrap();
    cli.display().to_string()
}

#[test]
fn task_images_are_checked_before_the_first_model_call_and_missing_ones_fail_as_tool_host() {
    let d = tmpdir();
    let s = Standin::json(json!({"rules": [{"match": "", "turns": [
        {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo in-container"}}]},
        {"content": "Final: {tool_output}"}
    ]}]}));
    let docker = fake_docker(d.path());
    let rows = [
        // `image` wins over `docker_image`.
        json!({"prompt": "p-present", "image": "present", "docker_image": "missing", "toolsets": ["terminal"]}),
        // The reference's field, pulled when missing.
        json!({"prompt": "p-pulled", "docker_image": "pullable", "toolsets": ["terminal"]}),
        json!({"prompt": "p-missing", "image": "missing", "toolsets": ["terminal"]}),
        // Present, but its container does not start.
        json!({"prompt": "p-badrun", "image": "badrun", "toolsets": ["terminal"]}),
    ];
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(d.path().join("tasks.jsonl"), text).unwrap();
    let go = |resume: bool| {
        let mut c = traj_run(d.path(), &s);
        c.args([
            "tasks.jsonl",
            "--docker-cli",
            &docker,
            "--max-attempts",
            "2",
        ]);
        if resume {
            c.arg("--resume");
        }
        run(c)
    };
    let o = go(false);
    assert_code(&o, 1);
    let run_dir = d.path().join("data/r");
    let recs = records(&run_dir);
    let mut done: Vec<&str> = recs.iter().map(|r| r["prompt"].as_str().unwrap()).collect();
    done.sort();
    assert_eq!(done, ["p-present", "p-pulled"]);
    for r in &recs {
        assert_eq!(r["completed"], true);
        assert!(
            r["messages"][2]["content"]
                .as_str()
                .unwrap()
                .contains("in-container"),
            "{r}"
        );
        assert!(!r.to_string().contains("run failed"), "{r}");
    }
    let fails = failures(&run_dir);
    assert_eq!(fails.len(), 2);
    for f in &fails {
        assert_eq!(f["class"], "tool_host", "{f}");
        assert_eq!(f["retryable"], true, "{f}");
        assert_eq!(f["api_calls"], 0, "{f}");
    }
    let missing = fails.iter().find(|f| f["prompt_index"] == 2).unwrap();
    let msg = missing["error"].as_str().unwrap();
    assert!(
        msg.contains("Docker image not available: missing")
            && msg.contains("pull access denied for missing"),
        "{msg}"
    );
    let badrun = fails.iter().find(|f| f["prompt_index"] == 3).unwrap();
    assert!(
        badrun["error"]
            .as_str()
            .unwrap()
            .contains("cannot start container"),
        "{badrun}"
    );
    // No model call was made for a task whose image could not be had.
    let asked: Vec<String> = s
        .requests()
        .iter()
        .map(|r| {
            r["messages"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["role"] == "user")
                .unwrap()["content"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert!(
        asked.iter().all(|p| p == "p-present" || p == "p-pulled"),
        "{asked:?}"
    );
    // Inspected once per image, pulled only when missing.
    let log = std::fs::read_to_string(d.path().join("log")).unwrap();
    let mut calls: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("image ") || l.starts_with("pull "))
        .collect();
    calls.sort();
    assert_eq!(
        calls,
        [
            "image inspect -- badrun",
            "image inspect -- missing",
            "image inspect -- present",
            "image inspect -- pullable",
            "pull -- missing",
            "pull -- pullable",
        ]
    );
    assert!(
        !log.contains("missing sleep infinity"),
        "a missing image was run: {log}"
    );

    // The image appears in the registry: resume runs that task (attempt 2); the other
    // still fails, and is then given up at the attempt cap.
    std::fs::write(d.path().join("registry"), "pullable\nmissing\n").unwrap();
    let o = go(true);
    assert_code(&o, 1);
    let recs = records(&run_dir);
    assert_eq!(recs.len(), 3);
    let pulled = recs.iter().find(|r| r["prompt"] == "p-missing").unwrap();
    assert_eq!(pulled["attempt"], 2);
    let fails = failures(&run_dir);
    assert_eq!(fails.len(), 3);
    assert_eq!(fails.last().unwrap()["prompt_index"], 3);
    assert_eq!(fails.last().unwrap()["attempts"], 2);
    let o = go(true);
    assert!(
        stderr(&o).is_empty() || !stderr(&o).contains("panick"),
        "{}",
        stderr(&o)
    );
    assert_eq!(failures(&run_dir).len(), 3, "given up at the attempt cap");
    assert_eq!(records(&run_dir).len(), 3);
}

// ---- issue 17: traj-run across machines -----------------------------------------------

/// `--shard I/N` into N run dirs (one killed with SIGKILL and resumed), then traj-merge
/// of the run dirs: every task row exactly once, as a multiset, duplicates included.
#[test]
fn shards_in_separate_run_dirs_merge_to_every_task_exactly_once() {
    let d = tmpdir();
    let s = Standin::json(json!({"latency_ms": 10, "record": false,
        "default": {"content": "done {prompt}", "reasoning": "r"}}));
    // 90 rows: 30 texts, each three times: twice identical, once with another field.
    let rows: Vec<Value> = (0..90)
        .map(|i| match i % 3 {
            2 => json!({"prompt": format!("t{}", i / 3), "cwd": "sub", "toolsets": []}),
            _ => json!({"prompt": format!("t{}", i / 3), "toolsets": []}),
        })
        .collect();
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(d.path().join("tasks.jsonl"), text).unwrap();
    let shard = |i: usize, resume: bool| {
        let mut c = traj_run(d.path(), &s);
        let sh = format!("{i}/3");
        let dir = format!("data/shard{i}");
        c.args(["tasks.jsonl", "--shard", &sh, "--run-dir", &dir])
            .args(["--batch-size", "4", "--num-workers", "2"]);
        if resume {
            c.arg("--resume");
        }
        c
    };
    // Shard 1 is killed part way, then resumed.
    let mut c = shard(1, false);
    c.stdout(Stdio::null()).stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    wait_for("shard 1 to write records", 30, || {
        records_so_far(&d.path().join("data/shard1")) >= 3
    });
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        records_so_far(&d.path().join("data/shard1")) < 30,
        "killed too late"
    );
    for (i, resume) in [(0, false), (1, true), (2, false)] {
        let o = run(shard(i, resume));
        assert_code(&o, 0);
    }
    let mut c = cmd("traj-merge", d.path());
    c.args(["data/shard0", "data/shard1", "data/shard2"]);
    let o = run(c);
    assert_code(&o, 0);
    let merged = parse_jsonl(&stdout(&o));
    let key = |r: &Value| {
        format!(
            "{}|{}",
            r["prompt"].as_str().unwrap(),
            r.get("cwd").and_then(Value::as_str).unwrap_or("")
        )
    };
    let mut got: Vec<String> = merged.iter().map(key).collect();
    let mut want: Vec<String> = rows.iter().map(key).collect();
    got.sort();
    want.sort();
    assert_eq!(got, want, "every task row exactly once");
    let mut idx: Vec<u64> = merged
        .iter()
        .map(|r| r["prompt_index"].as_u64().unwrap())
        .collect();
    idx.dedup();
    assert_eq!(idx, (0..90).collect::<Vec<u64>>(), "sorted by global index");
}

/// The stand-in fills `{prompt}` inside object arguments before it serialises them: a
/// prompt with a quote and a line break still gives JSON arguments, which the record
/// keeps and traj-normalize reads (before, such calls were not JSON and the rows were
/// rejected).
#[test]
fn standin_object_arguments_with_a_quoted_prompt_stay_json() {
    let d = tmpdir();
    let prompt = "Define \"photoshop\".\nThen stop.";
    std::fs::write(
        d.path().join("tasks.jsonl"),
        format!("{}\n", json!({"prompt": prompt, "toolsets": ["file"]})),
    )
    .unwrap();
    let s = Standin::json(json!({"rules": [{"match": "", "turns": [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "n.txt", "content": "{prompt}"}}]},
        {"content": "ok"}
    ]}]}));
    let mut c = standin_run(d.path(), &s.url(), "r");
    c.args(["--sandbox", "local", "-q", "tasks.jsonl"]);
    let o = run(c);
    assert_code(&o, 0);
    let rec = &parse_jsonl(&stdout(&o))[0];
    let args = rec["messages"][1]["tool_calls"][0]["function"]["arguments"]
        .as_str()
        .unwrap();
    let args: Value = serde_json::from_str(args).expect("JSON arguments");
    assert_eq!(args["content"], prompt);
    let mut c = cmd("traj-normalize", d.path());
    c.arg("-q");
    assert_code(&run_with_stdin(c, stdout(&o).as_bytes()), 0);
}

/// The summary line of a resumed run counts this run's tokens, like its records and its
/// cost (the directory's totals are in statistics.json).
#[test]
fn the_summary_of_a_resumed_run_is_of_that_run() {
    let d = tmpdir();
    let s = Standin::json(json!({"default": {"content": "ok", "cost": 0.25}}));
    let prompts: Vec<String> = (0..10).map(|i| format!("p{i}")).collect();
    let refs: Vec<&str> = prompts.iter().map(String::as_str).collect();
    let input = write_prompts(d.path(), &refs);
    let go = |more: &[&str]| {
        let mut c = standin_run(d.path(), &s.url(), "data/r");
        c.arg("--resume").args(more).arg(&input);
        let o = run(c);
        assert_code(&o, 0);
        o
    };
    go(&["--max-samples", "4"]);
    let o = go(&[]);
    let recs = parse_jsonl(&stdout(&o));
    assert_eq!(recs.len(), 6);
    let tokens: u64 = recs
        .iter()
        .map(|r| r["usage"]["total_tokens"].as_u64().unwrap())
        .sum();
    assert!(tokens > 0);
    let err = stderr(&o);
    assert!(err.contains("6 records, 0 failures"), "{err}");
    assert!(
        err.contains(&format!("; {tokens} tokens, $1.5000")),
        "{err}"
    );
}

/// `--rollouts K` with `--cache` and no seed sent: the rollouts' requests are the same
/// bytes, yet each rollout is a sample of its own and gets its own answer (the cache key
/// holds the copy and rollout past the first); a second run replays all of them.
#[test]
fn cache_keeps_the_rollouts_of_one_request_apart() {
    let d = tmpdir();
    let s = Standin::json(
        json!({"queue": [{"content": "A1"}, {"content": "A2"}, {"content": "A3"}],
        "default": {"content": "D"}}),
    );
    let input = write_prompts(d.path(), &["x"]);
    let args = [
        &input[..],
        "--cache",
        "cache",
        "--rollouts",
        "3",
        "--seed-param",
        "off",
        "-j",
        "1",
    ];
    let mut c = traj_run(d.path(), &s);
    c.args(args);
    assert_code(&run(c), 0);
    assert_eq!(s.count(), 3);
    let answers = |run: &str| {
        let mut a: Vec<(u64, String)> = records(&d.path().join(run))
            .iter()
            .map(|r| {
                let last = r["messages"].as_array().unwrap().last().unwrap();
                (
                    r["rollout_index"].as_u64().unwrap(),
                    last["content"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        a.sort();
        a
    };
    let first = answers("data/r");
    let texts: std::collections::BTreeSet<&str> = first.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(texts.len(), 3, "{first:?}");
    let mut c = traj_run(d.path(), &s);
    c.args(args).args(["--run-dir", "data/r2"]);
    assert_code(&run(c), 0);
    assert_eq!(s.count(), 3, "cache missed");
    assert_eq!(answers("data/r2"), first);
}

/// The workspaces a run killed with `kill -9` left (nothing of it ran to remove them)
/// are removed by the next run that makes workspaces in the same place.
#[test]
fn workspaces_left_by_a_killed_run_are_removed_by_the_next() {
    let d = tmpdir();
    let s = Standin::json(json!({"latency_ms": 20000, "default": {"content": "ok"}}));
    let input = write_prompts(d.path(), &["x"]);
    let ws = d.path().join("ws");
    let workspaces = || -> Vec<String> {
        std::fs::read_dir(&ws)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().into_string().unwrap())
                    .filter(|n| n.starts_with("traj-"))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut c = standin_run(d.path(), &s.url(), "data/r");
    c.args([
        &input[..],
        "-q",
        "--toolsets",
        "file",
        "--workspace-root",
        "ws",
    ]);
    c.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = c.spawn().unwrap();
    let t = Instant::now();
    while workspaces().is_empty() && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left = workspaces();
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(!left.is_empty(), "the run made no workspace");
    assert!(
        left.iter().all(|n| ws.join(n).exists()),
        "kill -9 removed {left:?}"
    );
    let s2 = Standin::json(json!({"default": {"content": "ok"}}));
    let mut c = standin_run(d.path(), &s2.url(), "data/r2");
    c.args([
        &input[..],
        "-q",
        "--toolsets",
        "file",
        "--workspace-root",
        "ws",
    ]);
    assert_code(&run(c), 0);
    let now = workspaces();
    assert!(
        left.iter().all(|n| !now.contains(n)),
        "still there: {now:?}"
    );
}

/// A task file that cannot be opened is the command line's to fix: exit 2 before
/// anything is made (no run directory, no lock file left behind).
#[test]
fn a_missing_task_file_exits_2_and_makes_no_run_directory() {
    let d = tmpdir();
    let s = Standin::json(json!({"default": {"content": "ok"}}));
    let mut c = traj_run(d.path(), &s);
    c.arg("nosuch.jsonl");
    let o = run(c);
    assert_code(&o, 2);
    assert_stderr_has(&o, "cannot open nosuch.jsonl: No such file or directory");
    assert!(!d.path().join("data/r").exists());
    assert_eq!(s.count(), 0);
}

//! traj-run against a provider that misbehaves (`tests/standin` faults): credits running
//! out mid-run, rate-limit waves across all workers, replies the provider cut short or
//! filtered, huge replies. Each time: no prompt lost, none counted twice, and `--resume`
//! after the fault runs exactly what is left.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::standin::Standin;
use crate::util::*;

/// traj-run against `s` in `data/r`, fast retries, quiet.
fn traj_run(dir: &Path, s: &Standin) -> Command {
    let mut c = traj_run_loud(dir, s);
    c.arg("-q");
    c
}

/// [`traj_run`] with its summary on stderr.
fn traj_run_loud(dir: &Path, s: &Standin) -> Command {
    let mut c = standin_run(dir, &s.url(), "data/r");
    c.args(["--toolsets", "file"]);
    c
}

/// `n` prompts `p0`, `p1`, ... in `prompts.jsonl`.
fn prompts(dir: &Path, n: usize) -> String {
    let text: String = (0..n)
        .map(|i| format!("{}\n", json!({"prompt": format!("p{i}")})))
        .collect();
    std::fs::write(dir.join("prompts.jsonl"), text).unwrap();
    "prompts.jsonl".into()
}

/// Records per prompt index: every index of `0..n` exactly once.
fn assert_each_once(run: &Path, n: usize) {
    let mut seen: BTreeMap<u64, usize> = BTreeMap::new();
    for r in records(run) {
        *seen.entry(r["prompt_index"].as_u64().unwrap()).or_default() += 1;
    }
    let want: BTreeMap<u64, usize> = (0..n as u64).map(|i| (i, 1)).collect();
    assert_eq!(seen, want, "every prompt exactly once");
}

/// A 402 wave after `after` answers: the run stops (nothing marked failed, exit 1, the
/// summary and statistics.json say why), without waiting for the Retry-After; a resume
/// after the top-up runs exactly the prompts left.
fn credits_run_out(retry_after: Option<&str>) {
    let mut refusal = json!({"status": 402, "error": "Insufficient credits. Add more using https://openrouter.ai/credits"});
    if let Some(ra) = retry_after {
        refusal["retry_after"] = json!(ra);
    }
    account_refusal_stops_the_run(
        refusal,
        "stopped: out of credits (payment_required, HTTP 402): Insufficient credits",
    );
}

/// A wave of `refusal` (about the account, not the prompt) after 4 answers: the run
/// stops, its summary saying `says`, nothing marked failed; the resume once the account
/// is fixed runs exactly the prompts left.
fn account_refusal_stops_the_run(refusal: Value, says: &str) {
    let d = tmpdir();
    let status = refusal["status"].as_u64().unwrap() as u16;
    let s = Standin::json(json!({"wave": {"after": 4, "reply": refusal}, "latency_ms": 20}));
    let input = prompts(d.path(), 20);
    let mut c = traj_run_loud(d.path(), &s);
    c.args([
        &input,
        "-j",
        "4",
        "--batch-size",
        "5",
        "--progress-secs",
        "100",
    ]);
    let t0 = Instant::now();
    let o = run_cmd(c);
    let took = t0.elapsed();
    assert_code(&o, 1);
    let err = stderr(&o);
    assert!(err.contains(says), "{err}");
    assert!(err.contains("--resume runs the"), "{err}");
    assert!(
        took < Duration::from_secs(10),
        "waited for the Retry-After: {took:?}"
    );
    let run = d.path().join("data/r");
    assert!(
        failures(&run).is_empty(),
        "nothing is failed for a {status}: {:?}",
        failures(&run)
    );
    let done = records(&run).len();
    assert_eq!(done, 4, "the four answered prompts are kept");
    // The refusals: the ones in flight when the account was refused, and no retry of any.
    let refused = s.count_status(status);
    assert!(
        (1..=4).contains(&refused),
        "{refused} {status}s for 4 workers"
    );
    let st = read_json(&run.join("statistics.json"));
    // `statistics.json` says why as the summary does: "out of credits (...): ...".
    let why = says.strip_prefix("stopped: ").unwrap();
    let why = &why[..why.find("): ").unwrap() + 3];
    assert!(
        st["this_run"]["stopped"].as_str().unwrap().starts_with(why),
        "{st}"
    );
    assert_eq!(st["this_run"]["failures"], 0);
    let cp = read_json(&run.join("checkpoint.json"));
    assert_eq!(cp["failed_prompts"], json!([]));

    // Topped up: the resume runs exactly the 16 prompts left.
    let topped = Standin::json(json!({}));
    let mut c = traj_run(d.path(), &topped);
    c.args([&input, "-j", "4", "--batch-size", "5", "--resume"]);
    let o = run_cmd(c);
    assert_code(&o, 0);
    assert_eq!(topped.count(), 16, "only what was left");
    assert_each_once(&run, 20);
    assert!(failures(&run).is_empty());
}

fn run_cmd(c: Command) -> std::process::Output {
    run(c)
}

#[test]
fn a_402_wave_with_retry_after_stops_the_run_and_resume_continues() {
    credits_run_out(Some("30"));
}

#[test]
fn a_402_wave_without_retry_after_stops_the_run_and_resume_continues() {
    credits_run_out(None);
}

/// A key refused mid-run (expired, revoked): once, every prompt failed for good as
/// `auth`, and the resume with a good key ran none of them.
#[test]
fn a_401_wave_stops_the_run_and_resume_with_a_good_key_continues() {
    account_refusal_stops_the_run(
        json!({"status": 401, "error": "Invalid API key"}),
        "stopped: the API key was refused (auth, HTTP 401): Invalid API key",
    );
}

#[test]
fn an_openrouter_insufficient_credits_body_stops_the_run_whatever_its_status() {
    // Some providers say it with another status (OpenAI: 429 insufficient_quota).
    let d = tmpdir();
    let s = Standin::json(json!({"wave": {"after": 0, "reply":
        {"status": 429, "error": "You exceeded your current quota (insufficient_quota)"}}}));
    let input = prompts(d.path(), 3);
    let mut c = traj_run(d.path(), &s);
    c.args([&input, "-j", "1"]);
    let o = run_cmd(c);
    assert_code(&o, 1);
    assert_eq!(s.count(), 1, "not retried as a rate limit");
    let run = d.path().join("data/r");
    assert!(failures(&run).is_empty());
    let st = read_json(&run.join("statistics.json"));
    assert!(
        st["this_run"]["stopped"]
            .as_str()
            .unwrap()
            .contains("HTTP 429"),
        "{st}"
    );
}

#[test]
fn on_payment_wait_pauses_every_worker_probes_and_resumes_by_itself() {
    let d = tmpdir();
    // Out of credits for 1.5 s after the first 2 answers; Retry-After 0.25 s.
    let s = Standin::json(
        json!({"latency_ms": 10, "wave": {"after": 2, "for_ms": 1500,
        "reply": {"status": 402, "error": "Insufficient credits", "retry_after": "0.25"}}}),
    );
    let input = prompts(d.path(), 12);
    let mut c = traj_run(d.path(), &s);
    c.args([
        &input,
        "-j",
        "4",
        "--on-payment",
        "wait",
        "--max-retries",
        "1",
    ]);
    let t0 = Instant::now();
    let o = run_cmd(c);
    assert_code(&o, 0);
    assert!(t0.elapsed() >= Duration::from_millis(1500));
    let run = d.path().join("data/r");
    assert_each_once(&run, 12);
    assert!(failures(&run).is_empty());
    // The 402s: at most the 4 in flight, then one probe per Retry-After (1.5 s / 0.25 s),
    // and a few for timing; four workers probing on their own would send 4 per 0.25 s.
    let refused = s.count_status(402);
    assert!(refused <= 4 + 6 + 3, "{refused} 402s");
    assert_eq!(s.count_status(200), 12);
}

#[test]
fn a_429_wave_slows_the_whole_run_down_once() {
    let d = tmpdir();
    // Every request in the first 1.5 s is refused, without Retry-After.
    let s = Standin::json(json!({"latency_ms": 5, "wave": {"for_ms": 1500,
        "reply": {"status": 429, "error": "rate limited"}}}));
    let input = prompts(d.path(), 16);
    let mut c = traj_run(d.path(), &s);
    // Back-off 0.1 s doubling to 0.4 s. Eight workers backing off alone would send about
    // 8 x 6 = 48 requests into the wave; the shared back-off sends the 8 in flight, then
    // one probe per wait (about 6 in the wave); the bound leaves room for a loaded machine
    // that starts some workers late (fewer than 8 in flight when the wave is first seen),
    // and stays far below the unshared 48.
    c.args([&input, "-j", "8", "--max-retries", "30"]);
    c.args(["--retry-base-ms", "100", "--retry-max-ms", "400"]);
    let o = run_cmd(c);
    assert_code(&o, 0);
    let run = d.path().join("data/r");
    assert_each_once(&run, 16);
    assert!(failures(&run).is_empty());
    let refused = s.count_status(429);
    assert!(
        (1..=24).contains(&refused),
        "{refused} requests refused: the back-off is not shared"
    );
    let st = read_json(&run.join("statistics.json"));
    assert_eq!(st["this_run"]["retries"], refused, "{st}");
}

#[test]
fn a_huge_reply_fails_once_as_response_too_large_and_a_larger_limit_reads_it() {
    let d = tmpdir();
    let huge = 20_000_000;
    let s = Standin::json(json!({"rules": [
        {"match": "huge-cl", "turns": [{"content": "", "content_bytes": huge}]},
        {"match": "huge-chunked", "turns": [{"content": "", "content_bytes": huge, "chunked": true}]}
    ]}));
    let input = write_prompts(d.path(), &["small", "huge-cl", "huge-chunked"]);
    let mut c = traj_run(d.path(), &s);
    c.args([&input, "-j", "1"]);
    let o = run_cmd(c);
    assert_code(&o, 1);
    let run = d.path().join("data/r");
    let fails = failures(&run);
    assert_eq!(fails.len(), 2, "{fails:?}");
    for f in &fails {
        assert_eq!(f["class"], "response_too_large", "{f}");
        assert_eq!(f["retryable"], false);
        assert_eq!(f["http_attempts"], 1, "downloaded once at most: {f}");
        let e = f["error"].as_str().unwrap();
        assert!(
            e.contains("over the limit of 16 MiB (--max-response-mb)"),
            "{e}"
        );
    }
    assert_eq!(s.count(), 3, "nothing sent twice");
    assert_eq!(records(&run).len(), 1);
    // Not retried on resume either (given up: nothing is scheduled).
    let mut c = traj_run(d.path(), &s);
    c.args([&input, "--resume"]);
    let o = run_cmd(c);
    assert_code(&o, 0);
    assert_eq!(s.count(), 3);

    // With room for it, the reply is read whole (Content-Length or chunked).
    let d = tmpdir();
    let input = write_prompts(d.path(), &["huge-cl", "huge-chunked"]);
    let mut c = traj_run(d.path(), &s);
    c.args([&input, "-j", "1", "--max-response-mb", "32"]);
    let o = run_cmd(c);
    assert_code(&o, 0);
    let recs = records(&d.path().join("data/r"));
    assert_eq!(recs.len(), 2);
    for r in recs {
        let last = r["messages"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(last["content"].as_str().unwrap().len(), huge);
    }
}

#[test]
fn filtered_cut_and_malformed_replies_are_flagged_kept_and_filterable() {
    let d = tmpdir();
    let malformed = json!({"content": "", "finish_reason": "stop",
        "native_finish_reason": "MALFORMED_FUNCTION_CALL"});
    let s = Standin::json(json!({"rules": [
        {"match": "filtered", "turns": [{"content": "Here is how to", "finish_reason": "content_filter"}]},
        {"match": "cut-later", "turns": [
            {"tool_calls": [{"name": "no_such_tool", "arguments": {}}]},
            {"content": "cut in the midd", "finish_reason": "length"}]},
        {"match": "cut-first", "turns": [{"content": "cut", "finish_reason": "length"}]},
        {"match": "gemini-once", "before": [malformed.clone()], "turns": [{"content": "fine"}]},
        {"match": "gemini-always", "turns": [malformed]},
        {"match": "ok", "turns": [{"content": "an answer"}]}
    ]}));
    let input = write_prompts(
        d.path(),
        &[
            "filtered",
            "cut-later",
            "cut-first",
            "gemini-once",
            "gemini-always",
            "ok",
        ],
    );
    let mut c = traj_run(d.path(), &s);
    c.args([&input, "-j", "2"]);
    let o = run_cmd(c);
    assert_code(&o, 1); // the first-call truncation is a failure
    let run = d.path().join("data/r");
    let by_prompt: BTreeMap<String, Value> = records(&run)
        .into_iter()
        .map(|r| (r["prompt"].as_str().unwrap().to_string(), r))
        .collect();
    let expect = [
        ("filtered", "content_filter", true),
        ("cut-later", "length", true),
        ("gemini-once", "answer", false),
        ("gemini-always", "malformed_call", true),
        ("ok", "answer", false),
    ];
    for (p, stop, partial) in expect {
        let r = &by_prompt[p];
        assert_eq!(r["stop_reason"], stop, "{p}");
        assert_eq!(r["partial"], partial, "{p}");
        assert_eq!(r["completed"], !partial, "{p}");
    }
    // Every call's finish reasons are kept; the filtered text too.
    let f = &by_prompt["filtered"];
    assert_eq!(f["calls"][0]["finish_reason"], "content_filter");
    assert_eq!(
        f["messages"].as_array().unwrap().last().unwrap()["content"],
        "Here is how to"
    );
    let g = &by_prompt["gemini-once"];
    assert_eq!(g["api_calls"], 2, "the malformed call was asked again");
    assert_eq!(
        g["calls"][0]["native_finish_reason"],
        "MALFORMED_FUNCTION_CALL"
    );
    assert!(g["calls"][1].get("native_finish_reason").is_none());
    assert_eq!(by_prompt["gemini-always"]["api_calls"], 3);
    let fails = failures(&run);
    assert_eq!(fails.len(), 1);
    assert_eq!(fails[0]["class"], "length");

    // statistics.json: per stop reason and per failure class.
    let st = read_json(&run.join("statistics.json"));
    assert_eq!(
        st["stop_reasons"],
        json!({"answer": 2, "content_filter": 1, "length": 1, "malformed_call": 1})
    );
    assert_eq!(st["failure_classes"], json!({"length": 1}));

    // traj-filter --stats over the run directory says the same.
    let mut c = cmd("traj-filter", d.path());
    c.args(["-o", "/dev/null", "--stats", "-", "-q"]);
    for e in std::fs::read_dir(&run).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "jsonl") {
            c.arg(p);
        }
    }
    let o = run_cmd(c);
    assert_code(&o, 0);
    let stats: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(stats["stop_reasons"], st["stop_reasons"]);
    assert_eq!(stats["failure_classes"], st["failure_classes"]);
    assert_eq!(stats["read"], 6);

    // --no-truncated drops them, on raw records and on normalized rows alike.
    let batches: Vec<String> = std::fs::read_dir(&run)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("batch_")
        })
        .map(|p| p.to_str().unwrap().to_string())
        .collect();
    let mut c = cmd("traj-filter", d.path());
    c.args(["--no-truncated", "-q", "--rejects", "rej.jsonl"])
        .args(&batches);
    let o = run_cmd(c);
    assert_code(&o, 0);
    let mut kept: Vec<String> = parse_jsonl(&stdout(&o))
        .iter()
        .map(|r| r["prompt"].as_str().unwrap().to_string())
        .collect();
    kept.sort();
    assert_eq!(kept, ["gemini-once", "ok"]);
    let rej = std::fs::read_to_string(d.path().join("rej.jsonl")).unwrap();
    assert!(
        rej.contains("truncated: `stop_reason` is content_filter"),
        "{rej}"
    );

    let mut c = cmd("traj-normalize", d.path());
    c.args(["-q", "-o", "norm.jsonl"]).args(&batches);
    assert_code(&run_cmd(c), 0);
    let mut c = cmd("traj-filter", d.path());
    c.args(["--no-truncated", "-q", "norm.jsonl"]);
    let o = run_cmd(c);
    assert_code(&o, 0);
    assert_eq!(
        parse_jsonl(&stdout(&o)).len(),
        2,
        "stop_reason survives traj-normalize"
    );
}

#[test]
fn a_huge_retry_after_is_capped_at_the_largest_backoff() {
    // Once a panic in the worker (a Retry-After too large for a Duration), and the run
    // still exited 0 with the prompt "not run".
    let d = tmpdir();
    let s = Standin::json(json!({"rules": [{"match": "", "before": [
        {"status": 429, "error": "slow down", "retry_after": "999999999999999999999"}]}]}));
    let input = prompts(d.path(), 3);
    let mut c = traj_run_loud(d.path(), &s);
    c.args([&input, "-j", "2"]);
    let t0 = Instant::now();
    let o = run_cmd(c);
    let err = stderr(&o);
    assert!(!err.contains("panicked"), "{err}");
    assert_code(&o, 0);
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    assert_each_once(&d.path().join("data/r"), 3);
    assert_eq!(
        s.count_status(429),
        3,
        "each prompt refused once, then answered"
    );
}

/// Run `c`, killing it when it takes longer than `secs` (a hang fails the test).
fn run_within(mut c: Command, secs: u64) -> std::process::Output {
    use std::process::Stdio;
    let mut child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > until {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!("still running after {secs} s: {}", stderr(&o));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn time_and_rate_flags_out_of_range_are_usage_errors() {
    // Each was once a panic (exit 101) turning seconds into a Duration, or a run that
    // never ended (--max-rps 1e-30).
    let d = tmpdir();
    let s = Standin::json(json!({}));
    let input = prompts(d.path(), 2);
    for (flag, value, says) in [
        ("--retry-delay", "1e30", "at most"),
        ("--retry-max-delay", "1e30", "at most"),
        ("--request-timeout", "1e30", "at most"),
        ("--prompt-timeout", "1e30", "at most"),
        ("--verifier-timeout", "1e30", "at most"),
        ("--progress-secs", "1e30", "at most"),
        ("--request-timeout", "0", "must be > 0"),
        ("--request-timeout", "NaN", "must be > 0"),
        ("--retry-delay", "inf", "at most"),
        ("--retry-delay", "-1", "must be >= 0"),
        ("--max-rps", "1e-30", "at least 0.001"),
        ("--max-rps", "inf", "at least 0.001"),
        ("--tool-timeout", "99999999999", "at most"),
        ("--tool-timeout", "0", "at least 1 second"),
    ] {
        let mut c = traj_run_loud(d.path(), &s);
        c.args([input.clone(), format!("{flag}={value}")]);
        let o = run_within(c, 30);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{flag} {value}: {err}");
        assert!(!err.contains("panicked"), "{flag} {value}: {err}");
        assert!(
            err.contains(flag) && err.contains(says),
            "{flag} {value}: {err}"
        );
    }
    assert_eq!(s.count(), 0, "nothing ran");
    // At the bounds: a slow rate and long limits are taken.
    let mut c = traj_run(d.path(), &s);
    c.args([&input, "--max-rps", "1000", "--prompt-timeout", "2592000"]);
    c.args(["--request-timeout", "2592000", "--progress-secs", "0"]);
    assert_code(&run_within(c, 60), 0);
}

#[test]
fn openais_out_of_quota_429_stops_the_run_as_out_of_credits() {
    // The words are in the error's `code` and `type`, not its message: once read as a
    // rate limit, retried, failed, and given up for good after --max-attempts.
    let d = tmpdir();
    let body = json!({"error": {
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "type": "insufficient_quota", "param": null, "code": "insufficient_quota"}});
    let s = Standin::json(json!({"wave": {"after": 0, "reply":
        {"status": 429, "body": body.to_string()}}}));
    let input = prompts(d.path(), 3);
    let mut c = traj_run_loud(d.path(), &s);
    c.args([&input, "-j", "1"]);
    let o = run_cmd(c);
    assert_code(&o, 1);
    let err = stderr(&o);
    assert!(
        err.contains("stopped: out of credits (payment_required, HTTP 429): You exceeded"),
        "{err}"
    );
    assert_eq!(s.count(), 1, "not retried as a rate limit");
    let run = d.path().join("data/r");
    assert!(failures(&run).is_empty(), "{:?}", failures(&run));
    // An error object in a 200 reply says it the same way.
    let d = tmpdir();
    let s = Standin::json(json!({"wave": {"after": 0, "reply": {"body": body.to_string()}}}));
    let input = prompts(d.path(), 2);
    let mut c = traj_run_loud(d.path(), &s);
    c.args([&input, "-j", "1"]);
    let o = run_cmd(c);
    assert_code(&o, 1);
    // It was reported as an HTTP 500 that never came: the reply was a 200, and its
    // error's code is a word, no status.
    let err = stderr(&o);
    assert!(
        err.contains(
            "out of credits (payment_required): an error object in an HTTP 200 reply: You exceeded"
        ),
        "{err}"
    );
    assert!(!err.contains("HTTP 500"), "{err}");
    assert!(failures(&d.path().join("data/r")).is_empty());
}

#[test]
fn a_failure_without_a_model_call_has_zero_usage() {
    // docs/run.md lists `usage` in every failure line; it was left out when no call
    // was made (bad_task, tool_host).
    let d = tmpdir();
    let row = json!({"prompt": "p", "toolsets": ["no_such_toolset"]});
    std::fs::write(d.path().join("tasks.jsonl"), format!("{row}\n")).unwrap();
    let s = Standin::json(json!({}));
    let mut c = standin_run(d.path(), &s.url(), "data/r");
    c.args(["-q", "tasks.jsonl"]);
    let o = run_cmd(c);
    assert_code(&o, 1);
    let f = failures(&d.path().join("data/r"));
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0]["class"], "bad_task", "{f:?}");
    assert_eq!(
        f[0]["usage"],
        json!({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}),
        "{f:?}"
    );
    assert_eq!(s.count(), 0);
}

/// A model-backed tool (here `mixture_of_agents`) told the account is out of credits
/// stops the run as the agent's own 402 does. It once came back to the agent as a tool
/// error, and every prompt of the run was recorded as done with it, never run again.
#[test]
fn a_tools_model_call_out_of_credits_stops_the_run_and_resume_runs_it_again() {
    let d = tmpdir();
    let agent = json!({"match": "p", "turns": [
        {"tool_calls": [{"name": "mixture_of_agents", "arguments": {"user_prompt": "what is 2+2"}}]},
        {"content": "Merged: {tool_output}"}]});
    let s = Standin::json(json!({"rules": [
        {"match": "what is 2+2", "turns": [{"status": 402,
            "error": "This request requires more credits, or fewer max_tokens"}]},
        agent.clone()]}));
    let input = prompts(d.path(), 3);
    let moa = [
        "--toolsets",
        "moa",
        "--moa-models",
        "ref-a,ref-b",
        "--moa-aggregator",
        "agg",
    ];
    let mut c = standin_run(d.path(), &s.url(), "data/r");
    c.args(moa).args([&input, "-j", "1"]);
    let o = run_cmd(c);
    assert_code(&o, 1);
    let run = d.path().join("data/r");
    assert!(records(&run).is_empty(), "{:?}", records(&run));
    assert!(failures(&run).is_empty());
    let st = read_json(&run.join("statistics.json"));
    let stopped = st["this_run"]["stopped"].as_str().unwrap();
    assert!(
        stopped.starts_with("out of credits (payment_required, HTTP 402)"),
        "{st}"
    );

    // Topped up: the resume runs the three prompts, each once.
    let topped = Standin::json(json!({"rules": [agent]}));
    let mut c = standin_run(d.path(), &topped.url(), "data/r");
    c.args(moa).args([&input, "-j", "1", "-q", "--resume"]);
    assert_code(&run_cmd(c), 0);
    assert_each_once(&run, 3);
    assert!(
        records(&run)
            .iter()
            .all(|r| !r.to_string().contains("payment_required"))
    );
}

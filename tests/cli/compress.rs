//! traj-compress, driven as a binary: the reference's pinned cases with the 4-chars
//! tokenizer, the LLM paths against the stand-in server, real SWE-agent trajectories at
//! a 4000-token budget, naming, sampling and the bad-line policy.

use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};

use crate::util::{
    assert_code, cmd, fixture, parse_jsonl, raw_fields, read_jsonl, rejected_token_counts, run,
    run_with_stdin, stderr, stdout, tmpdir, transformers_python,
};

use crate::standin;

const BIN: &str = "traj-compress";

fn pad(prefix: &str, chars: usize) -> String {
    assert!(prefix.len() <= chars);
    format!("{prefix}{}", "x".repeat(chars - prefix.len()))
}

fn sg(from: &str, value: String) -> Value {
    json!({"from": from, "value": value})
}

/// The reference's tool-pair scenario (§3.5): turn tokens 18, 20, 12, 12, 400, 12, 12,
/// 12, 6, 1 under the 4-chars tokenizer, with `marker` in the big turn.
fn tool_pair_row(marker: &str) -> Value {
    let call = |n: usize| pad("<tool_call>{\"name\": \"terminal\"}</tool_call>", n);
    let resp = |n: usize| pad("<tool_response>ok</tool_response>", n);
    json!({"id": marker, "conversations": [
        sg("system", pad("You are an agent.", 72)),
        sg("human", pad("Fix the bug.", 80)),
        sg("gpt", call(48)),
        sg("tool", resp(48)),
        sg("gpt", pad(&format!("{marker} <tool_call>{{\"name\": \"terminal\", \"arguments\": {{\"command\": \"make test\"}}}}</tool_call>"), 1600)),
        sg("tool", resp(48)),
        sg("gpt", call(48)),
        sg("tool", resp(48)),
        sg("gpt", pad("done", 24)),
        sg("human", pad("ok", 4)),
    ]})
}

fn jsonl(rows: &[Value]) -> String {
    rows.iter().map(|r| format!("{r}\n")).collect()
}

fn roles(row: &Value) -> Vec<String> {
    row["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["from"].as_str().unwrap().to_string())
        .collect()
}

fn count_in(row: &Value, needle: &str) -> usize {
    row["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["value"].as_str().unwrap_or("").matches(needle).count())
        .sum()
}

#[test]
fn tool_pair_scenario_keeps_pairs() {
    let dir = tmpdir();
    let row = tool_pair_row("ROW");
    // total 505 tokens; need = 400 means target = 505 - 400 + 4.
    let mut c = cmd(BIN, dir.path());
    c.args([
        "--tokenizer",
        "chars4",
        "--target-max-tokens",
        "109",
        "--summary-target-tokens",
        "4",
        "--protect-last-n",
        "2",
        "--per-trajectory-metrics",
    ]);
    let o = run_with_stdin(c, jsonl(&[row]).as_bytes());
    assert_code(&o, 0);
    let out = parse_jsonl(&stdout(&o));
    assert_eq!(out.len(), 1);
    let r = &out[0];
    assert_eq!(
        roles(r),
        [
            "system", "human", "gpt", "tool", "human", "gpt", "tool", "gpt", "human"
        ]
    );
    let summary = r["conversations"][4]["value"].as_str().unwrap();
    assert!(summary.starts_with("[CONTEXT SUMMARY]:"), "{summary}");
    assert_eq!(
        r["conversations"][4].as_object().unwrap().len(),
        2,
        "summary turn has only from and value"
    );
    assert_eq!(count_in(r, "<tool_call>"), count_in(r, "<tool_response>"));
    let rs = roles(r);
    for (i, role) in rs.iter().enumerate() {
        if role == "tool" {
            assert_eq!(rs[i - 1], "gpt", "tool turn {i} follows its call");
        }
    }
    let m = &r["compression_metrics"];
    assert_eq!(m["was_compressed"], json!(true));
    assert_eq!(
        m["compression_region"],
        json!({"start_idx": 4, "end_idx": 6, "turns_count": 2})
    );
    assert_eq!(m["original_tokens"], json!(505));
    assert_eq!(m["summarizer"], json!("offline-extractive"));
    assert!(
        r["conversations"][0]["value"]
            .as_str()
            .unwrap()
            .ends_with("may be summarized to preserve context.")
    );
    // The midpoint split picks the same region here.
    let mut c = cmd(BIN, dir.path());
    c.args(["--tokenizer", "chars4", "--target-max-tokens", "109"]);
    c.args(["--summary-target-tokens", "4", "--protect-last-n", "2"]);
    c.arg("--compat-midpoint");
    let o2 = run_with_stdin(c, jsonl(&[tool_pair_row("ROW")]).as_bytes());
    assert_code(&o2, 0);
    let r2 = &parse_jsonl(&stdout(&o2))[0];
    assert_eq!(roles(r2), roles(r));
}

fn net_savings_row() -> Value {
    let mut turns = vec![sg("system", "s".repeat(800)), sg("human", "h".repeat(800))];
    for i in 0..6 {
        let role = if i % 2 == 0 { "gpt" } else { "tool" };
        turns.push(sg(role, "abcd".into()));
    }
    json!({"conversations": turns})
}

#[test]
fn net_savings_guard_calls_no_summarizer() {
    let server = standin::Standin::json(json!({"default": {"content": "[CONTEXT SUMMARY]: x"}}));
    let dir = tmpdir();
    let input = jsonl(&[net_savings_row()]);
    let mut c = cmd(BIN, dir.path());
    c.env("STANDIN_KEY", "k");
    c.args(["--api-key-env", "STANDIN_KEY", "--base-url", &server.url()]);
    c.args(["--tokenizer", "chars4", "--target-max-tokens", "100"]);
    c.args(["--summary-target-tokens", "20", "--protect-last-n", "2"]);
    c.args(["-o", "out.jsonl"]);
    let o = run_with_stdin(c, input.as_bytes());
    assert_code(&o, 0);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap(),
        input
    );
    assert_eq!(server.count(), 0, "no summary request");
    let m: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out_metrics.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(m["summary"]["trajectories_compressed"], json!(0));
    assert_eq!(m["summary"]["trajectories_still_over_limit"], json!(1));
    assert_eq!(
        m["summary"]["still_over_limit_reasons"],
        json!({"no_net_savings": 1})
    );
    assert_eq!(m["tokens"]["total_before"], json!(406));
    assert_eq!(m["tokens"]["total_after"], json!(406));
    assert_eq!(m["summarizer"], json!("llm:google/gemini-3-flash-preview"));
    assert_eq!(m["tokenizer"], json!("chars4"));
}

/// A summary one token smaller than its region, and the notice it brings: the row came
/// out larger than it went in (`tokens_saved: -1`), the reference's bug #70243 that the
/// guard is there to prevent. The guard counts the notice too now, and keeps the row.
#[test]
fn a_summary_and_notice_that_save_nothing_leave_the_row_as_it_was() {
    let mut turns = vec![sg("system", "s".repeat(80)), sg("human", "h".repeat(80))];
    for _ in 0..4 {
        turns.push(sg("gpt", "a".repeat(200)));
        turns.push(sg("tool", "b".repeat(200)));
    }
    turns.push(sg("gpt", "end".into()));
    let input = jsonl(&[json!({"conversations": turns})]);
    let dir = tmpdir();
    // Compressed tokens with a summary of `content`, with or without the notice.
    let tokens_with = |content: &str, notice: bool| {
        let server = standin::Standin::json(json!({"default": {"content": content}}));
        let mut c = cmd(BIN, dir.path());
        c.env("STANDIN_KEY", "k");
        c.args(["--api-key-env", "STANDIN_KEY", "--base-url", &server.url()]);
        c.args(["--tokenizer", "chars4", "--target-max-tokens", "200"]);
        c.args(["--summary-target-tokens", "50", "--protect-last-n", "2"]);
        c.args(["--per-trajectory-metrics", "-o", "out.jsonl", "-q"]);
        if !notice {
            c.arg("--no-summary-notice");
        }
        let o = run_with_stdin(c, input.as_bytes());
        assert_code(&o, 0);
        let out = std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap();
        let m = parse_jsonl(&out)[0]["compression_metrics"].clone();
        (m, out)
    };
    let (m, _) = tokens_with("z", false);
    let original = m["original_tokens"].as_u64().unwrap();
    // "[CONTEXT SUMMARY]: z" is 20 characters, 5 tokens.
    let region = original + 5 - m["compressed_tokens"].as_u64().unwrap();
    let (m2, _) = tokens_with("z", true);
    let notice =
        m2["compressed_tokens"].as_u64().unwrap() - m["compressed_tokens"].as_u64().unwrap();
    assert!(
        notice > 0 && region > 20,
        "region {region}, notice {notice}"
    );
    // A summary of region - 1 tokens: 4 (region - 1) characters with its prefix.
    let content = "y".repeat((4 * (region - 1) - 19) as usize);
    let (m3, out) = tokens_with(&content, true);
    assert_eq!(m3["was_compressed"], json!(false), "{m3}");
    assert_eq!(
        m3["still_over_limit_reason"],
        json!("no_net_savings"),
        "{m3}"
    );
    assert_eq!(m3["compressed_tokens"], json!(original), "{m3}");
    let mut row: Value = parse_jsonl(&out)[0].clone();
    row.as_object_mut().unwrap().remove("compression_metrics");
    assert_eq!(row, parse_jsonl(&input)[0], "the turns as they were");
    // Without the notice the same summary saves a token, and is used.
    let (m4, _) = tokens_with(&content, false);
    assert_eq!(m4["was_compressed"], json!(true), "{m4}");
    assert_eq!(m4["compressed_tokens"], json!(original - 1), "{m4}");
}

/// A chat's region holds no command: the offline summary said "(2 turns, 0 commands)"
/// and nothing else, and the user's follow-up question was gone. It quotes what the
/// user asked first now, then what the assistant said.
#[test]
fn the_offline_summary_quotes_the_users_requests_and_the_replies() {
    let dir = tmpdir();
    let text = std::fs::read_to_string(fixture("llamafactory_reason_tool_use_50.jsonl")).unwrap();
    let row = text.lines().nth(1).unwrap();
    let summary_of = |budget: &str| {
        let mut c = cmd(BIN, dir.path());
        c.args(["--target-max-tokens", "650", "--protect-last-n", "3", "-q"]);
        c.args(["--summary-target-tokens", budget]);
        let o = run_with_stdin(c, format!("{row}\n").as_bytes());
        assert_code(&o, 0);
        let v: Value = serde_json::from_str(stdout(&o).trim_end()).unwrap();
        v["messages"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .filter_map(|p| p["value"].as_str().map(String::from))
            .find(|t| t.starts_with("[CONTEXT SUMMARY]"))
            .unwrap()
    };
    let small = summary_of("100");
    assert!(
        small.contains("Requests:\n- [5] What about \"The Dark Knight\"?"),
        "{small}"
    );
    // mini-swe-agent gives each command's output as a user turn: no request.
    let mut c = cmd(BIN, dir.path());
    c.args([
        "--offline",
        "--tokenizer",
        "chars4",
        "--target-max-tokens",
        "500",
    ]);
    c.args(["--summary-target-tokens", "100", "-q", "--no-metrics"]);
    c.arg(fixture("mini_swe_agent_trajs.jsonl"));
    let o = run(c);
    assert_code(&o, 0);
    let out = stdout(&o);
    assert!(out.contains("Commands:"), "{out}");
    assert!(
        !out.contains("Requests:\n- [3] <returncode>"),
        "output is no request: {out}"
    );
    let large = summary_of("160");
    assert!(
        large.contains("Replies:\n- [4] Here are the key details about the movie \"Inception\""),
        "{large}"
    );
    assert!(
        !large.contains("Okay, the user"),
        "reasoning is no reply: {large}"
    );
}

fn metrics_of(rows: &[Value], id: &str) -> Value {
    rows.iter()
        .find(|r| r["id"] == json!(id))
        .unwrap_or_else(|| panic!("row {id}"))["compression_metrics"]
        .clone()
}

/// Summaries that wait on the network run `--max-concurrent-requests` at a time (one row
/// per job), never more, and the rows still come out in input order.
#[test]
fn llm_summaries_run_concurrently_up_to_the_limit() {
    let server = standin::Standin::json(json!({
        "latency_ms": 300,
        "default": {"content": "summary"},
    }));
    let dir = tmpdir();
    let ids: Vec<String> = (0..12).map(|i| format!("ROW-{i}")).collect();
    let rows: Vec<Value> = ids.iter().map(|id| tool_pair_row(id)).collect();
    let input = jsonl(&rows);
    let mut c = cmd(BIN, dir.path());
    c.env("STANDIN_KEY", "secret");
    c.args(["--api-key-env", "STANDIN_KEY", "--base-url", &server.url()]);
    c.args(["--model", "stand-in", "--tokenizer", "chars4"]);
    c.args(["--target-max-tokens", "109", "--summary-target-tokens", "4"]);
    c.args(["--protect-last-n", "2", "--max-concurrent-requests", "4"]);
    let o = run_with_stdin(c, input.as_bytes());
    assert_code(&o, 0);
    assert_eq!(server.count(), 12, "one summary per row");
    assert_eq!(
        server.peak_in_flight(),
        4,
        "4 summaries at once, never more"
    );
    let out = parse_jsonl(&stdout(&o));
    let got: Vec<&str> = out.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(got, ids, "input order kept");
    assert!(
        out.iter()
            .all(|r| r["conversations"][4]["value"] == json!("[CONTEXT SUMMARY]: summary"))
    );
}

#[test]
fn llm_summaries_against_standin() {
    let script = json!({"rules": [
        {"match": "ROW-OK", "last": {"content": "The agent ran make test and it passed."}},
        {"match": "ROW-429", "before": [{"status": 429, "retry_after": "1"}],
         "last": {"content": "[CONTEXT SUMMARY]: rate limited once, then fine"}},
        {"match": "ROW-500", "before": [{"status": 500}], "last": {"content": "after a 500"}},
        {"match": "ROW-LAST", "before": [{"status": 503}, {"status": 502}],
         "last": {"content": "third time lucky"}},
        {"match": "ROW-LEN", "last": {"content": "cut off mid", "finish_reason": "length"}},
        {"match": "ROW-EMPTY", "last": {"content": ""}},
    ]});
    let server = standin::Standin::json(script);
    let dir = tmpdir();
    let ids = [
        "ROW-OK",
        "ROW-429",
        "ROW-500",
        "ROW-LAST",
        "ROW-LEN",
        "ROW-EMPTY",
    ];
    let input = jsonl(&ids.map(tool_pair_row));
    let base = |extra: &[&str]| {
        let mut c = cmd(BIN, dir.path());
        c.env("STANDIN_KEY", "secret");
        c.args(["--api-key-env", "STANDIN_KEY", "--base-url", &server.url()]);
        c.args(["--model", "stand-in", "--retry-delay", "0.01"]);
        c.args(["--tokenizer", "chars4", "--target-max-tokens", "109"]);
        c.args(["--summary-target-tokens", "4", "--protect-last-n", "2"]);
        c.args(["--per-trajectory-metrics", "--max-concurrent-requests", "3"]);
        c.args(extra);
        c
    };
    let t0 = Instant::now();
    let o = run_with_stdin(base(&[]), input.as_bytes());
    assert_code(&o, 0);
    assert!(
        t0.elapsed().as_secs_f64() >= 0.9,
        "Retry-After: 1 was honoured"
    );
    let out = parse_jsonl(&stdout(&o));
    assert_eq!(out.len(), ids.len(), "row count in == out");
    let got: Vec<&str> = out.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(got, ids, "input order kept");

    let ok = &out[0];
    assert_eq!(
        ok["conversations"][4]["value"],
        json!("[CONTEXT SUMMARY]: The agent ran make test and it passed.")
    );
    let m = metrics_of(&out, "ROW-OK");
    assert_eq!(m["was_compressed"], json!(true));
    assert_eq!(m["summarizer"], json!("llm:stand-in"));
    assert_eq!(m["summarization_api_calls"], json!(1));

    for (id, calls) in [("ROW-429", 2), ("ROW-500", 2), ("ROW-LAST", 3)] {
        let m = metrics_of(&out, id);
        assert_eq!(m["was_compressed"], json!(true), "{id}");
        assert_eq!(m["summarization_api_calls"], json!(calls), "{id}");
        assert_eq!(m["summarization_errors"], json!(calls - 1), "{id}");
    }
    let last = out.iter().find(|r| r["id"] == json!("ROW-LAST")).unwrap();
    assert_eq!(
        last["conversations"][4]["value"],
        json!("[CONTEXT SUMMARY]: third time lucky"),
        "success on the last attempt keeps the real text"
    );
    let r429 = out.iter().find(|r| r["id"] == json!("ROW-429")).unwrap();
    assert_eq!(
        r429["conversations"][4]["value"],
        json!("[CONTEXT SUMMARY]: rate limited once, then fine")
    );

    // Truncated and empty summaries fail after 3 attempts: rows kept unchanged.
    let originals = parse_jsonl(&input);
    for (id, reason) in [
        ("ROW-LEN", "summary_failed:length"),
        ("ROW-EMPTY", "summary_failed:empty"),
    ] {
        let r = out.iter().find(|r| r["id"] == json!(id)).unwrap();
        let orig = originals.iter().find(|r| r["id"] == json!(id)).unwrap();
        assert_eq!(r["conversations"], orig["conversations"], "{id} unchanged");
        let m = &r["compression_metrics"];
        assert_eq!(m["was_compressed"], json!(false), "{id}");
        assert_eq!(m["still_over_limit"], json!(true), "{id}");
        assert_eq!(m["still_over_limit_reason"], json!(reason), "{id}");
        assert_eq!(m["summarization_api_calls"], json!(3), "{id}");
        assert_eq!(m["summarization_errors"], json!(3), "{id}");
    }
    // The prompt carries the region, asks for the same language, and the key is sent.
    let reqs = server.requests();
    let first = reqs
        .iter()
        .find(|r| {
            r["messages"][0]["content"]
                .as_str()
                .unwrap()
                .contains("ROW-OK")
        })
        .unwrap();
    let prompt = first["messages"][0]["content"].as_str().unwrap();
    assert!(prompt.contains("[Turn 4 - GPT]:"));
    assert!(prompt.contains("same language"));
    assert!(!prompt.contains("[Turn 3 -"));
    assert_eq!(first["max_tokens"], json!(8));
    assert_eq!(first["model"], json!("stand-in"));

    // With --on-summary-failure placeholder the reference's fallback replaces the region.
    let o = run_with_stdin(
        base(&["--on-summary-failure", "placeholder"]),
        jsonl(&[tool_pair_row("ROW-LEN")]).as_bytes(),
    );
    assert_code(&o, 0);
    let r = &parse_jsonl(&stdout(&o))[0];
    assert!(
        r["conversations"][4]["value"]
            .as_str()
            .unwrap()
            .contains("Summary generation failed")
    );
    assert_eq!(r["compression_metrics"]["was_compressed"], json!(true));
    assert_eq!(r["compression_metrics"]["summarizer"], json!("placeholder"));
}

#[test]
fn summary_timeout_keeps_the_row() {
    let server = standin::Standin::json(json!({"default": {"hang": true}}));
    let dir = tmpdir();
    let input = jsonl(&[tool_pair_row("ROW-HANG")]);
    let mut c = cmd(BIN, dir.path());
    c.env("STANDIN_KEY", "secret");
    c.args(["--api-key-env", "STANDIN_KEY", "--base-url", &server.url()]);
    // `--timeout` is the hidden alias of `--summary-timeout`.
    c.args([
        "--timeout",
        "1",
        "--max-retries",
        "1",
        "--retry-delay",
        "0.01",
    ]);
    c.args(["--tokenizer", "chars4", "--target-max-tokens", "109"]);
    c.args(["--summary-target-tokens", "4", "--protect-last-n", "2"]);
    c.args(["--per-trajectory-metrics", "-o", "out.jsonl"]);
    let t0 = Instant::now();
    let o = run_with_stdin(c, input.as_bytes());
    assert_code(&o, 0);
    assert!(t0.elapsed().as_secs() < 20);
    let out = read_jsonl(&dir.path().join("out.jsonl"));
    assert_eq!(out.len(), 1, "a timed-out row is never dropped");
    assert_eq!(
        out[0]["conversations"],
        parse_jsonl(&input)[0]["conversations"]
    );
    let m = &out[0]["compression_metrics"];
    assert_eq!(m["still_over_limit_reason"], json!("summary_timeout"));
    let agg: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out_metrics.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(agg["summary"]["trajectories_failed"], json!(1));
    assert_eq!(agg["summary"]["total_trajectories"], json!(1));
}

/// `--summary-timeout` bounds a row's whole summary: a request that hangs is cut at the
/// deadline and not retried, so the row is released after about the timeout, not the
/// timeout times the attempts; it comes out unchanged and counted as timed out.
#[test]
fn summary_timeout_bounds_all_attempts() {
    let server = standin::Standin::json(json!({"default": {"hang": true}}));
    let dir = tmpdir();
    let input = jsonl(&[tool_pair_row("ROW-HANG")]);
    let mut c = cmd(BIN, dir.path());
    c.env("STANDIN_KEY", "secret");
    c.args(["--api-key-env", "STANDIN_KEY", "--base-url", &server.url()]);
    c.args([
        "--summary-timeout",
        "1.5",
        "--max-retries",
        "3",
        "--retry-delay",
        "0.01",
    ]);
    c.args(["--tokenizer", "chars4", "--target-max-tokens", "109"]);
    c.args(["--summary-target-tokens", "4", "--protect-last-n", "2"]);
    c.args(["--per-trajectory-metrics", "-o", "out.jsonl"]);
    let t0 = Instant::now();
    let o = run_with_stdin(c, input.as_bytes());
    let secs = t0.elapsed().as_secs_f64();
    assert_code(&o, 0);
    // 4 attempts (3 retries) of 1.5 s each would take 6 s or more.
    assert!(
        (1.4..4.0).contains(&secs),
        "released after {secs:.2} s, not about --timeout"
    );
    let out = read_jsonl(&dir.path().join("out.jsonl"));
    assert_eq!(out.len(), 1, "a timed-out row is never dropped");
    assert_eq!(
        out[0]["conversations"],
        parse_jsonl(&input)[0]["conversations"]
    );
    let m = &out[0]["compression_metrics"];
    assert_eq!(m["still_over_limit_reason"], json!("summary_timeout"));
    assert_eq!(m["was_compressed"], json!(false));
    let agg: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out_metrics.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(agg["summary"]["trajectories_failed"], json!(1));
    assert_eq!(
        agg["summary"]["still_over_limit_reasons"],
        json!({"summary_timeout": 1})
    );
}

/// The SWE-agent demo records as OpenAI `messages` rows (their `history`).
fn swe_messages_rows() -> Vec<Value> {
    let text = std::fs::read_to_string(fixture("swe_agent_demo_trajs.jsonl")).unwrap();
    parse_jsonl(&text)
        .into_iter()
        .enumerate()
        .map(|(i, r)| json!({"id": i, "messages": r["history"]}))
        .collect()
}

/// The same records in Hermes ShareGPT form (tool calls as `<tool_call>` text).
fn swe_sharegpt_rows() -> Vec<Value> {
    swe_messages_rows()
        .into_iter()
        .map(|r| {
            let turns: Vec<Value> = r["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| {
                    let content = match &m["content"] {
                        Value::String(s) => s.clone(),
                        Value::Array(parts) => parts
                            .iter()
                            .filter_map(|p| p["text"].as_str())
                            .collect::<Vec<_>>()
                            .join(""),
                        _ => String::new(),
                    };
                    match m["role"].as_str().unwrap() {
                        "assistant" => {
                            let mut v = content;
                            for c in m["tool_calls"].as_array().into_iter().flatten() {
                                v.push_str(&format!(
                                    "\n<tool_call>\n{}\n</tool_call>",
                                    json!({"name": c["function"]["name"], "arguments": c["function"]["arguments"]})
                                ));
                            }
                            sg("gpt", v)
                        }
                        "tool" => sg("tool", format!("<tool_response>\n{content}\n</tool_response>")),
                        "user" => sg("human", content),
                        other => sg(other, content),
                    }
                })
                .collect();
            json!({"id": r["id"], "conversations": turns})
        })
        .collect()
}

fn row_tokens(row: &Value) -> usize {
    let tok = traj::format::tokens::load("o200k_base").unwrap();
    let obj = row.as_object().unwrap().clone();
    let r = traj::stage::compress::row::Row::locate(obj).unwrap();
    let mut n = 0;
    for t in r.turns() {
        traj::stage::compress::row::for_each_text(t, r.shape, &mut |s| n += tok.count(s));
    }
    n
}

fn check_real_run(dir: &Path, input_rows: &[Value], out_name: &str) {
    let out = read_jsonl(&dir.join(out_name));
    assert_eq!(out.len(), input_rows.len(), "row count in == out");
    let mut over = 0;
    let mut compressed = 0;
    for (i, (o, r)) in out.iter().zip(input_rows).enumerate() {
        assert_eq!(o["id"], r["id"], "order kept");
        let before = row_tokens(r);
        let after = row_tokens(o);
        if before <= 4000 {
            assert!(o.get("compression_metrics").is_none());
            assert_eq!(o, r, "row {i} under budget is unchanged");
            continue;
        }
        over += 1;
        let m = &o["compression_metrics"];
        assert_eq!(m["original_tokens"], json!(before), "row {i}");
        assert_eq!(
            m["compressed_tokens"],
            json!(after),
            "row {i}: counts reused exactly"
        );
        if after > 4000 {
            assert_eq!(m["still_over_limit"], json!(true), "row {i}");
            assert!(m["still_over_limit_reason"].is_string(), "row {i}: {m}");
        } else {
            assert_eq!(m["still_over_limit"], json!(false), "row {i}");
        }
        if m["was_compressed"] == json!(true) {
            compressed += 1;
            assert!(after < before, "row {i} saved tokens");
        }
    }
    assert!(over >= 5, "the fixture has long rows: {over}");
    assert!(compressed >= 5, "{compressed} of {over} compressed");
}

#[test]
fn real_trajectories_openai_shape() {
    let dir = tmpdir();
    let rows = swe_messages_rows();
    std::fs::write(dir.path().join("swe.jsonl"), jsonl(&rows)).unwrap();
    let args = [
        "--input",
        "swe.jsonl",
        "--target-max-tokens",
        "4000",
        "--per-trajectory-metrics",
    ];
    let o = run({
        let mut c = cmd(BIN, dir.path());
        c.args(args);
        c
    });
    assert_code(&o, 0);
    assert!(stderr(&o).contains("offline extractive"), "{}", stderr(&o));
    check_real_run(dir.path(), &rows, "swe_compressed.jsonl");
    // Every tool call keeps its response, right after its assistant turn.
    for row in read_jsonl(&dir.path().join("swe_compressed.jsonl")) {
        let msgs = row["messages"].as_array().unwrap();
        for (i, m) in msgs.iter().enumerate() {
            if let Some(calls) = m["tool_calls"].as_array() {
                for (j, c) in (i + 1..).zip(calls) {
                    assert_eq!(msgs[j]["role"], json!("tool"), "call {} answered", c["id"]);
                    let id = if msgs[j]["tool_call_id"].is_string() {
                        &msgs[j]["tool_call_id"]
                    } else {
                        &msgs[j]["tool_call_ids"][0]
                    };
                    assert_eq!(id, &c["id"]);
                }
            }
            if m["role"] == json!("tool") {
                let prev = &msgs[i - 1];
                assert!(prev["role"] == json!("tool") || prev["tool_calls"].is_array());
            }
        }
    }
    let metrics: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("swe_compressed_metrics.json")).unwrap(),
    )
    .unwrap();
    for g in [
        "summary",
        "tokens",
        "turns",
        "averages",
        "summarization",
        "processing",
    ] {
        assert!(metrics[g].is_object(), "{g}");
    }
    assert_eq!(metrics["tokenizer"], json!("o200k_base"));
    assert_eq!(metrics["summarizer"], json!("offline-extractive"));
    assert_eq!(metrics["summary"]["total_trajectories"], json!(rows.len()));
    // Two runs give identical output.
    let first = std::fs::read(dir.path().join("swe_compressed.jsonl")).unwrap();
    let o = run({
        let mut c = cmd(BIN, dir.path());
        c.args(args);
        c.args(["-j", "1"]);
        c
    });
    assert_code(&o, 0);
    assert_eq!(
        std::fs::read(dir.path().join("swe_compressed.jsonl")).unwrap(),
        first
    );
}

#[test]
fn real_trajectories_sharegpt_shape() {
    let dir = tmpdir();
    let rows = swe_sharegpt_rows();
    std::fs::write(dir.path().join("swe.jsonl"), jsonl(&rows)).unwrap();
    let mut c = cmd(BIN, dir.path());
    c.args([
        "swe.jsonl",
        "-o",
        "out.jsonl",
        "--target-max-tokens",
        "4000",
    ]);
    c.arg("--per-trajectory-metrics");
    let o = run(c);
    assert_code(&o, 0);
    check_real_run(dir.path(), &rows, "out.jsonl");
    let mut paired = 0;
    for (row, orig) in read_jsonl(&dir.path().join("out.jsonl")).iter().zip(&rows) {
        // Rows with native calls pair every call with a response; text-action rows
        // have responses without a <tool_call>.
        if count_in(orig, "<tool_call>") == count_in(orig, "<tool_response>") {
            paired += 1;
            assert_eq!(
                count_in(row, "<tool_call>"),
                count_in(row, "<tool_response>")
            );
        }
        let rs = roles(row);
        for (i, r) in rs.iter().enumerate() {
            if r == "tool" {
                assert_eq!(rs[i - 1], "gpt", "tool turn {i} follows its call");
            }
        }
    }
    assert!(paired >= 4, "{paired}");
}

#[test]
fn directory_input_naming_and_gz() {
    let dir = tmpdir();
    let run_dir = dir.path().join("run");
    std::fs::create_dir(&run_dir).unwrap();
    let rows = swe_messages_rows();
    std::fs::write(run_dir.join("batch_2.jsonl"), jsonl(&rows[..5])).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, jsonl(&rows[5..]).as_bytes()).unwrap();
    std::fs::write(run_dir.join("batch_10.jsonl.gz"), gz.finish().unwrap()).unwrap();
    let mut c = cmd(BIN, dir.path());
    c.args(["--input", "run", "--target-max-tokens", "4000", "-q"]);
    let o = run(c);
    assert_code(&o, 0);
    assert_eq!(stderr(&o), "");
    let out_dir = dir.path().join("run_compressed");
    assert_eq!(read_jsonl(&out_dir.join("batch_2.jsonl")).len(), 5);
    assert_eq!(
        read_jsonl(&out_dir.join("batch_10.jsonl")).len(),
        rows.len() - 5
    );
    let m: Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir.join("compression_metrics.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(m["summary"]["total_trajectories"], json!(rows.len()));

    // A subfolder's namesake keeps its subfolder: no output is written twice.
    std::fs::create_dir(run_dir.join("more")).unwrap();
    std::fs::write(run_dir.join("more/batch_2.jsonl"), jsonl(&rows[..3])).unwrap();
    std::fs::remove_dir_all(&out_dir).unwrap();
    let mut c = cmd(BIN, dir.path());
    c.args(["--input", "run", "--target-max-tokens", "4000", "-q"]);
    assert_code(&run(c), 0);
    assert_eq!(read_jsonl(&out_dir.join("batch_2.jsonl")).len(), 5);
    assert_eq!(read_jsonl(&out_dir.join("more/batch_2.jsonl")).len(), 3);

    // Two inputs that would share an output are refused before anything is written.
    std::fs::write(run_dir.join("batch_10.jsonl"), jsonl(&rows[..2])).unwrap();
    std::fs::remove_dir_all(&out_dir).unwrap();
    let mut c = cmd(BIN, dir.path());
    c.args(["--input", "run", "--target-max-tokens", "4000", "-q"]);
    let o = run(c);
    assert_code(&o, 2);
    assert!(
        stderr(&o).contains(
            "run/batch_10.jsonl and run/batch_10.jsonl.gz would both be written to \
             run_compressed/batch_10.jsonl"
        ),
        "{}",
        stderr(&o)
    );
    assert!(!out_dir.exists());
    std::fs::remove_file(run_dir.join("batch_10.jsonl")).unwrap();

    // --dry-run writes nothing.
    let mut c = cmd(BIN, dir.path());
    c.args(["--input", "run", "-o", "elsewhere", "--dry-run"]);
    let o = run(c);
    assert_code(&o, 0);
    assert!(stderr(&o).contains("would compress"));
    assert!(!dir.path().join("elsewhere").exists());
}

#[test]
fn bad_lines_follow_the_policy() {
    let dir = tmpdir();
    let good = tool_pair_row("A").to_string();
    let input = format!("{good}\n{{not json\n\n[1,2]\n{good}\n");
    std::fs::write(dir.path().join("in.jsonl"), &input).unwrap();
    let o = run({
        let mut c = cmd(BIN, dir.path());
        c.args(["in.jsonl", "--tokenizer", "chars4", "-o", "out.jsonl"]);
        c
    });
    assert_code(&o, 1);
    assert!(
        stderr(&o).contains("in.jsonl:2: invalid JSON"),
        "{}",
        stderr(&o)
    );
    assert!(
        !dir.path().join("out.jsonl").exists(),
        "no partial output file"
    );

    let o = run({
        let mut c = cmd(BIN, dir.path());
        c.args([
            "in.jsonl",
            "--tokenizer",
            "chars4",
            "--target-max-tokens",
            "109",
        ]);
        c.args(["--on-error", "skip", "--rejects", "rej.jsonl"]);
        c
    });
    assert_code(&o, 0);
    let out = parse_jsonl(&stdout(&o));
    // A row that is not an object is a bad line in every stage (README).
    assert_eq!(out.len(), 2, "the good rows pass");
    let rej = read_jsonl(&dir.path().join("rej.jsonl"));
    assert_eq!(rej.len(), 2);
    assert_eq!(rej[0]["line"], json!(2));
    assert_eq!(rej[1]["line"], json!(4));
    assert!(
        rej[1]["reasons"][0]
            .as_str()
            .unwrap()
            .contains("expected a JSON object")
    );
}

#[test]
fn sampling_is_seeded_and_ordered() {
    let dir = tmpdir();
    let rows: Vec<Value> = (0..50).map(|i| json!({"id": i, "messages": []})).collect();
    std::fs::write(dir.path().join("in.jsonl"), jsonl(&rows)).unwrap();
    let sample = |seed: &str| {
        let mut c = cmd(BIN, dir.path());
        c.args(["in.jsonl", "--sample-percent", "10", "--seed", seed, "-q"]);
        let o = run(c);
        assert_code(&o, 0);
        parse_jsonl(&stdout(&o))
            .iter()
            .map(|r| r["id"].as_u64().unwrap())
            .collect::<Vec<_>>()
    };
    let a = sample("42");
    assert_eq!(a.len(), 5);
    assert!(a.windows(2).all(|w| w[0] < w[1]), "input order: {a:?}");
    assert_eq!(a, sample("42"));
    assert_ne!(a, sample("7"));
    // An empty input samples to nothing, without a crash (reference #93737).
    std::fs::write(dir.path().join("empty.jsonl"), "").unwrap();
    let mut c = cmd(BIN, dir.path());
    c.args(["empty.jsonl", "--sample-percent", "50", "-q"]);
    let o = run(c);
    assert_code(&o, 0);
    assert_eq!(stdout(&o), "");
    let mut c = cmd(BIN, dir.path());
    c.args(["in.jsonl", "--sample-percent", "0"]);
    assert_code(&run(c), 2);
}

#[test]
fn config_file_and_count_only() {
    let dir = tmpdir();
    std::fs::write(
        dir.path().join("c.yaml"),
        "tokenizer:\n  name: moonshotai/Kimi-K2-Thinking\ncompression:\n  target_max_tokens: 109\n  summary_target_tokens: 4\nprotected_turns:\n  last_n_turns: 2\nmetrics:\n  per_trajectory: true\n",
    )
    .unwrap();
    let input = jsonl(&[tool_pair_row("C")]);
    let mut c = cmd(BIN, dir.path());
    c.args(["--config", "c.yaml", "--tokenizer", "chars4"]);
    let o = run_with_stdin(c, input.as_bytes());
    assert_code(&o, 0);
    let r = &parse_jsonl(&stdout(&o))[0];
    assert_eq!(
        r["compression_metrics"]["compression_region"]["start_idx"],
        json!(4)
    );
    // An unloadable tokenizer name in the YAML falls back to the default, with a note.
    let mut c = cmd(BIN, dir.path());
    c.args(["--config", "c.yaml", "--count-only"]);
    let o = run_with_stdin(c, input.as_bytes());
    assert_code(&o, 0);
    assert!(stderr(&o).contains("not loadable"));
    let v = &parse_jsonl(&stdout(&o))[0];
    assert_eq!(v["rows"], json!(1));
    assert_eq!(v["tokenizer"], json!("o200k_base"));
    assert!(v["tokens"].as_u64().unwrap() > 10);
    // A broken YAML is a usage error.
    std::fs::write(dir.path().join("bad.yaml"), "compression: [1, 2\n").unwrap();
    let mut c = cmd(BIN, dir.path());
    c.args(["--config", "bad.yaml"]);
    assert_code(&run_with_stdin(c, b""), 2);
    let mut c = cmd(BIN, dir.path());
    c.args(["--tokenizer", "no-such-tokenizer"]);
    assert_code(&run_with_stdin(c, b""), 2);
}

/// Sampled rows are read where they are: a bad one is named by its own file and line
/// (not a temp copy's), blank lines counted.
#[test]
fn sampled_bad_rows_name_their_own_file_and_line() {
    let dir = tmpdir();
    let rows: Vec<Value> = (0..6).map(|i| json!({"id": i, "messages": []})).collect();
    std::fs::write(dir.path().join("a.jsonl"), jsonl(&rows)).unwrap();
    let mut b = String::from("\n");
    b.push_str(&jsonl(&rows[..2]));
    b.push_str("{not json\n");
    std::fs::write(dir.path().join("b.jsonl"), b).unwrap();
    let mut c = cmd(BIN, dir.path());
    c.args(["a.jsonl", "b.jsonl", "--sample-percent", "100", "-q"]);
    let o = run(c);
    assert_code(&o, 1);
    assert!(
        stderr(&o).contains("b.jsonl:4: invalid JSON"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        parse_jsonl(&stdout(&o)).len(),
        8,
        "rows before it are written"
    );

    let mut c = cmd(BIN, dir.path());
    c.args(["a.jsonl", "b.jsonl", "--sample-percent", "100", "-q"]);
    c.args(["--on-error", "skip", "--rejects", "rej.jsonl"]);
    assert_code(&run(c), 0);
    let rej = read_jsonl(&dir.path().join("rej.jsonl"));
    assert_eq!((rej.len(), &rej[0]["line"]), (1, &json!(4)));
    assert!(
        rej[0]["source"].as_str().unwrap().ends_with("b.jsonl"),
        "{}",
        rej[0]
    );
}

/// `--max-retries N` is N retries after the first attempt (N + 1 requests when every
/// attempt fails with a retryable error); the YAML's `max_retries` counts attempts.
#[test]
fn max_retries_counts_retries_and_the_yaml_attempts() {
    let server = standin::Standin::json(json!({"default": {"status": 503}}));
    let dir = tmpdir();
    let input = jsonl(&[tool_pair_row("ROW-503")]);
    std::fs::write(
        dir.path().join("c.yaml"),
        "summarization:\n  max_retries: 2\n",
    )
    .unwrap();
    for (extra, calls) in [
        (&["--max-retries", "0"][..], 1),
        (&["--max-retries", "2"][..], 3),
        (&[][..], 3),
        (&["--config", "c.yaml"][..], 2),
    ] {
        let mut c = cmd(BIN, dir.path());
        c.env("STANDIN_KEY", "secret");
        c.args(["--api-key-env", "STANDIN_KEY", "--base-url", &server.url()]);
        c.args(["--retry-delay", "0.01"]);
        c.args(extra);
        c.args(["--tokenizer", "chars4", "--target-max-tokens", "109"]);
        c.args(["--summary-target-tokens", "4", "--protect-last-n", "2"]);
        c.args(["--per-trajectory-metrics", "-q", "--no-metrics"]);
        let o = run_with_stdin(c, input.as_bytes());
        assert_code(&o, 0);
        let m = &parse_jsonl(&stdout(&o))[0]["compression_metrics"];
        assert_eq!(m["summarization_api_calls"], json!(calls), "{extra:?}: {m}");
    }
}

/// `--stats FILE` names the metrics file; `--metrics` is its alias (the reference's word).
#[test]
fn stats_file_and_its_metrics_alias() {
    let dir = tmpdir();
    let input = jsonl(&[tool_pair_row("S")]);
    for flag in ["--stats", "--metrics"] {
        let name = format!("{}.json", &flag[2..]);
        let mut c = cmd(BIN, dir.path());
        c.args([
            "--tokenizer",
            "chars4",
            "-q",
            "-o",
            "out.jsonl",
            flag,
            &name,
        ]);
        assert_code(&run_with_stdin(c, input.as_bytes()), 0);
        let m: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join(&name)).unwrap())
                .unwrap();
        assert_eq!(m["summary"]["total_trajectories"], json!(1), "{flag}");
    }
    assert!(!dir.path().join("out_metrics.json").exists());
}

/// An OpenAI row counts what the model reads of it, the format layer's rule: the
/// content parts (LLaMA-Factory's `value` too), the reasoning, the tool calls. Before,
/// traj-compress did not count the reasoning.
#[test]
fn openai_rows_count_reasoning_and_tool_calls() {
    let dir = tmpdir();
    let row = json!({"messages": [
        {"role": "user", "content": [{"type": "text", "value": "12345678"}]},
        {"role": "assistant", "content": "1234", "reasoning_content": "12345678",
         "tool_calls": [{"id": "a", "type": "function",
                         "function": {"name": "f234", "arguments": "{\"a\": 1}"}}]}
    ]});
    let mut c = cmd(BIN, dir.path());
    c.args(["--tokenizer", "chars4", "--count-only"]);
    let o = run_with_stdin(c, jsonl(&[row]).as_bytes());
    assert_code(&o, 0);
    let v = &parse_jsonl(&stdout(&o))[0];
    // 2 + 1 + 2 + 1 + 2 tokens of 4 characters: value, content, reasoning, name, arguments.
    assert_eq!(v["tokens"], json!(8), "{v}");
    assert_eq!(v["text_bytes"], json!(8 + 4 + 8 + 4 + 8));
}

/// transformers' `apply_chat_template(..., tokenize=True)` length of each row of `rows`.
fn transformers_counts(template: &Path, rows: &Path) -> Vec<usize> {
    let o = std::process::Command::new(transformers_python())
        .arg(fixture("templates/count.py"))
        .arg(template)
        .arg(rows)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect()
}

const TEMPLATES: [&str; 2] = ["templates/qwen2.5-style", "templates/hermes-style"];
const CHAT_ROWS: [&str; 3] = [
    "hermes_reason_tool_use_50.jsonl",
    "llamafactory_glaive_toolcall_en.jsonl",
    "traj_run_records.jsonl",
];

/// With an HF tokenizer directory, traj-filter's --max-row-tokens and traj-compress's
/// --count-only count each row as transformers' apply_chat_template does (tools
/// included): within 0.5% per row (they are equal on these templates).
#[test]
fn chat_template_counts_match_transformers() {
    let dir = tmpdir();
    for t in TEMPLATES {
        let tdir = fixture(t);
        for f in CHAT_ROWS {
            let want = transformers_counts(&tdir, &fixture(f));
            let rej = dir.path().join("rej.jsonl");
            let mut c = cmd("traj-filter", dir.path());
            c.arg("--max-row-tokens")
                .arg("1")
                .arg("--tokenizer")
                .arg(&tdir);
            c.arg(fixture(f))
                .args(["-o", "kept.jsonl", "--rejects", "rej.jsonl"]);
            assert_code(&run(c), 0);
            let got = rejected_token_counts(&rej);
            assert_eq!(got.len(), want.len(), "{t} {f}");
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let off = (*g as f64 - *w as f64).abs() / *w as f64;
                assert!(off <= 0.005, "{t} {f} row {i}: traj {g}, transformers {w}");
            }
            let mut c = cmd(BIN, dir.path());
            c.arg("--count-only")
                .arg("--tokenizer")
                .arg(&tdir)
                .arg(fixture(f));
            let o = run(c);
            assert_code(&o, 0);
            let doc: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
            let total: usize = want.iter().sum();
            assert_eq!(doc["tokens"], json!(total), "{t} {f}");
        }
    }
    // A directory without tokenizer.json is a usage error.
    let mut c = cmd(BIN, dir.path());
    c.args(["--count-only", "--tokenizer"])
        .arg(dir.path())
        .arg(fixture(CHAT_ROWS[0]));
    assert_code(&run(c), 2);
}

/// `--over-budget truncate`: every written row is within the budget by transformers'
/// own count; a row that cannot fit (its system turn alone is too long) goes to
/// --rejects with the reason. `reject` writes only rows within the budget and rejects
/// the rest; `keep` (the default) leaves rows over it.
#[test]
fn over_budget_truncate_and_reject_fit_the_chat_template_budget() {
    let dir = tmpdir();
    let tdir = fixture(TEMPLATES[0]);
    let inputs = [fixture(CHAT_ROWS[0]), fixture(CHAT_ROWS[1])];
    let budget = 1200;
    let mut over = std::collections::HashMap::new();
    for mode in ["keep", "truncate", "reject"] {
        let mut c = cmd(BIN, dir.path());
        c.args(["--offline", "--no-metrics", "--target-max-tokens", "1200"]);
        c.args(["--summary-target-tokens", "200", "--over-budget", mode]);
        c.arg("--tokenizer").arg(&tdir).args(&inputs);
        let out = format!("{mode}.jsonl");
        let rej = format!("{mode}-rej.jsonl");
        c.args(["-o", &out, "--rejects", &rej]);
        let o = run(c);
        assert_code(&o, 0);
        let counts = transformers_counts(&tdir, &dir.path().join(&out));
        let rejected = read_jsonl(&dir.path().join(&rej));
        assert_eq!(counts.len() + rejected.len(), 350, "{mode}");
        let n_over = counts.iter().filter(|&&n| n > budget).count();
        over.insert(mode, (n_over, rejected.len()));
        for r in &rejected {
            assert!(
                r["reasons"][0]
                    .as_str()
                    .unwrap()
                    .starts_with("over-budget: over 1200 tokens"),
                "{r}"
            );
        }
        if mode == "truncate" {
            let rows = read_jsonl(&dir.path().join(&out));
            let text = serde_json::to_string(&rows).unwrap();
            assert!(text.contains("characters truncated by traj-compress"));
            assert!(stderr(&o).contains("truncated"), "{}", stderr(&o));
        }
    }
    let (keep_over, keep_rej) = over["keep"];
    assert!(keep_over > 20 && keep_rej == 0, "{over:?}");
    assert_eq!(over["truncate"].0, 0, "{over:?}");
    assert!(over["truncate"].1 < keep_over / 4, "{over:?}");
    assert_eq!(over["reject"], (0, keep_over), "{over:?}");
}

/// The member names of a row, in order.
fn keys(line: &str) -> Vec<String> {
    let m: serde_json::Map<String, Value> = serde_json::from_str(line).unwrap();
    m.keys().cloned().collect()
}

/// The turns of a row as written.
fn raw_turns(line: &str) -> Vec<String> {
    let list = &raw_fields(line)["conversations"];
    let turns: Vec<&serde_json::value::RawValue> = serde_json::from_str(list).unwrap();
    turns.iter().map(|r| r.get().to_string()).collect()
}

/// A compressed row is its input line with only the region, the notice and its metrics
/// written anew: on the SWE-agent runs written as Python writes them (`", "`, `\"`
/// inside values, an `\u00e9` escape and a `1.50`), every kept turn, every other member
/// and the separators between kept turns keep their bytes.
#[test]
fn compressed_rows_keep_the_bytes_of_what_they_keep() {
    let dir = tmpdir();
    let input: String = swe_sharegpt_rows()
        .iter()
        .map(|r| {
            let line = traj::format::pyjson::dumps(r);
            format!("{{\"note\": \"caf\\u00e9\", \"w\": 1.50, {}\n", &line[1..])
        })
        .collect();
    std::fs::write(dir.path().join("in.jsonl"), &input).unwrap();
    let mut c = cmd(BIN, dir.path());
    c.args(["in.jsonl", "-o", "out.jsonl", "--target-max-tokens", "4000"]);
    c.arg("--per-trajectory-metrics");
    let o = run(c);
    assert_code(&o, 0);
    let output = std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap();
    let mut compressed = 0;
    for (k, (inl, outl)) in input.lines().zip(output.lines()).enumerate() {
        let m = &serde_json::from_str::<Value>(outl).unwrap()["compression_metrics"];
        if m["was_compressed"] != true {
            continue;
        }
        compressed += 1;
        let (start, until) = (
            m["compression_region"]["start_idx"].as_u64().unwrap() as usize,
            m["compression_region"]["end_idx"].as_u64().unwrap() as usize,
        );
        let (tin, tout) = (raw_turns(inl), raw_turns(outl));
        assert_eq!(tout.len(), tin.len() - (until - start) + 1, "row {k}");
        // The head (the system turn got the notice), then the tail, byte for byte.
        for i in 0..start {
            let (a, b): (Value, Value) = (
                serde_json::from_str(&tin[i]).unwrap(),
                serde_json::from_str(&tout[i]).unwrap(),
            );
            if a["from"] == "system" {
                let (a, b) = (a["value"].as_str().unwrap(), b["value"].as_str().unwrap());
                assert!(b.starts_with(a) && b.len() > a.len(), "row {k}: the notice");
            } else {
                assert_eq!(tout[i], tin[i], "row {k} turn {i}");
            }
        }
        assert_eq!(tout[start + 1..], tin[until..], "row {k}");
        let tail = tin[until..].join(", ");
        assert!(
            outl.contains(&tail),
            "row {k}: the tail with its separators"
        );
        // Every member but the turns and the new metrics, as written, in its place;
        // the metrics last.
        let (mut min, mut mout) = (raw_fields(inl), raw_fields(outl));
        for m in [&mut min, &mut mout] {
            m.remove("conversations");
            m.remove("compression_metrics");
        }
        assert_eq!(mout, min, "row {k}");
        let mut order = keys(inl);
        order.push("compression_metrics".into());
        assert_eq!(keys(outl), order, "row {k}");
        assert!(inl.contains("\\\"") && outl.starts_with(&inl[..inl.find('[').unwrap()]));
        assert!(outl.starts_with("{\"note\": \"caf\\u00e9\", \"w\": 1.50, \"id\": "));
    }
    assert!(compressed >= 4, "{compressed} rows compressed");
}

/// A time flag past 30 days is a usage error, never a panic turning it into a Duration
/// (`--summary-timeout 1e30` with an API key once exited 101).
#[test]
fn time_flags_out_of_range_are_usage_errors() {
    let dir = tmpdir();
    std::fs::write(
        dir.path().join("in.jsonl"),
        format!("{}\n", tool_pair_row("A")),
    )
    .unwrap();
    for (flag, value) in [
        ("--summary-timeout", "1e30"),
        ("--retry-delay", "1e30"),
        ("--retry-delay", "-1"),
    ] {
        let mut c = cmd(BIN, dir.path());
        c.env("OPENROUTER_API_KEY", "k")
            .arg("in.jsonl")
            .arg(format!("{flag}={value}"));
        let o = run(c);
        assert_code(&o, 2);
        assert!(
            stderr(&o).contains(&format!(
                "{flag} must be a number of seconds >= 0 and at most"
            )),
            "{flag} {value}: {}",
            stderr(&o)
        );
    }
}

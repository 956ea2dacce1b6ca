//! `traj-compress --over-budget truncate` fits every row it can: the longest turns are
//! cut whatever their role (SWE-agent rows keep their long outputs in user turns), the
//! system turn and the first human turn last, and a row is rejected only when its
//! markers alone exceed the budget. "Fits" is checked by traj's own count
//! (`traj-filter --max-row-tokens`, the same tokenizer).

use std::path::Path;

use serde_json::{Value, json};

use crate::util::*;

const BIN: &str = "traj-compress";

/// Compress `input` to `budget` tokens with `--over-budget truncate`; the output rows
/// and the rejects.
fn truncate(dir: &Path, input: &Path, budget: usize, extra: &[&str]) -> (Vec<Value>, Vec<Value>) {
    let mut c = cmd(BIN, dir);
    c.args(extra);
    c.args(["--offline", "--no-metrics", "--over-budget", "truncate"]);
    c.args(["--target-max-tokens", &budget.to_string()]);
    c.args(["--summary-target-tokens", &(budget / 4).max(20).to_string()]);
    c.arg(input)
        .args(["-o", "fit.jsonl", "--rejects", "fit-rej.jsonl"]);
    let o = run(c);
    assert_code(&o, 0);
    (
        read_jsonl(&dir.join("fit.jsonl")),
        read_jsonl(&dir.join("fit-rej.jsonl")),
    )
}

/// The rows of `file` over `budget` tokens by traj-filter's count.
fn over_budget(dir: &Path, file: &str, budget: usize) -> Vec<Value> {
    let mut c = cmd("traj-filter", dir);
    c.args([
        "--max-row-tokens",
        &budget.to_string(),
        "--tokenizer",
        "o200k_base",
    ]);
    c.args([file, "-o", "kept.jsonl", "--rejects", "over.jsonl"]);
    assert_code(&run(c), 0);
    read_jsonl(&dir.join("over.jsonl"))
}

/// The SWE-agent demo trajectories, normalised as a user would: every row fits at
/// budgets from 2,000 to 8,000 tokens, none is rejected, and the long user turns (the
/// observations) are what got cut.
#[test]
fn swe_agent_rows_all_fit() {
    let d = tmpdir();
    let mut c = cmd("traj-normalize", d.path());
    c.args(["--messages-field", "history", "-o", "norm.jsonl"])
        .arg(fixture("swe_agent_demo_trajs.jsonl"));
    assert_code(&run(c), 0);
    let input = read_jsonl(&d.path().join("norm.jsonl"));
    for budget in [2000, 4000, 8000] {
        let (rows, rejected) = truncate(d.path(), &d.path().join("norm.jsonl"), budget, &[]);
        assert!(rejected.is_empty(), "{budget}: {rejected:?}");
        assert_eq!(rows.len(), input.len(), "{budget}");
        let over = over_budget(d.path(), "fit.jsonl", budget);
        assert!(over.is_empty(), "{budget}: {} rows over", over.len());
        let text = serde_json::to_string(&rows).unwrap();
        assert!(
            text.contains("characters truncated by traj-compress"),
            "{budget}"
        );
        // What was cut is the observations: in every truncated row, human turns after
        // the first (a text-action SWE-agent run's `user` turns) or tool turns (a
        // function-calling run's).
        let cut_rows: Vec<(&Value, &Value)> = rows
            .iter()
            .zip(&input)
            .filter(|(r, _)| serde_json::to_string(r).unwrap().contains(MARK))
            .collect();
        assert!(!cut_rows.is_empty(), "{budget}");
        for (r, i) in cut_rows {
            let conv = r["conversations"].as_array().unwrap();
            let first = conv.iter().position(|t| t["from"] == "human");
            assert!(
                conv.iter().enumerate().any(|(k, t)| {
                    let observation =
                        (t["from"] == "human" && Some(k) != first) || t["from"] == "tool";
                    observation && marked(t)
                }),
                "{budget}: no observation cut in {r}"
            );
            tiers_in_order(r, i, budget);
        }
    }
}

const MARK: &str = "characters truncated by traj-compress";

fn marked(t: &Value) -> bool {
    t["value"].as_str().is_some_and(|v| v.contains(MARK))
}

/// A text cut to its markers alone: what is left of each text with the markers taken out
/// (the prose between Hermes tags, each string of a `<tool_response>` block's JSON
/// `content`) is no longer than a marker's few tokens.
fn at_marker(t: &Value) -> bool {
    let v = t["value"].as_str().unwrap_or("");
    let mut left = String::new();
    let mut rest = v;
    while let Some(start) = rest.find("[... ") {
        let Some(end) = rest[start..].find(" ...]") else {
            return false;
        };
        left.push_str(&rest[..start]);
        rest = &rest[start + end + " ...]".len()..];
    }
    left.push_str(rest);
    let mut texts = Vec::new();
    for seg in left.split(['<', '>']) {
        match serde_json::from_str::<Value>(seg.trim()) {
            Ok(o) => texts.extend(strings(o.get("content").unwrap_or(&o))),
            Err(_) => texts.push(seg.to_string()),
        }
    }
    texts.iter().all(|s| s.trim().len() <= 120)
}

/// The strings inside a JSON value.
fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a.iter().flat_map(strings).collect(),
        Value::Object(o) => o.values().flat_map(strings).collect(),
        _ => vec![],
    }
}

/// The tiers of `--over-budget truncate` in the output row `r` of input row `i`: a system
/// turn or the first human turn (the task) is cut only when every other turn is down to
/// its marker. (The system turn may gain the compressor's note at its end.)
fn tiers_in_order(r: &Value, i: &Value, budget: usize) {
    let conv = r["conversations"].as_array().unwrap();
    let first = conv.iter().position(|t| t["from"] == "human");
    let late = |k: usize| conv[k]["from"] == "system" || Some(k) == first;
    let task_or_system_cut = (0..conv.len()).any(|k| late(k) && marked(&conv[k]));
    if task_or_system_cut {
        for (k, t) in conv.iter().enumerate() {
            // (A text shorter than a marker is never cut.)
            let short = !marked(t) && t["value"].as_str().is_none_or(|v| v.len() <= 200);
            assert!(
                late(k) || at_marker(t) || short,
                "{budget}: turn {k} not at its marker: {t}"
            );
        }
    }
    // A system turn not cut keeps its text (perhaps with the compressor's note after it).
    let (t, s) = (&conv[0], &i["conversations"][0]);
    if s["from"] == "system" && !marked(t) {
        let (t, s) = (t["value"].as_str().unwrap(), s["value"].as_str().unwrap());
        assert!(t.starts_with(s), "{budget}: {t}");
    }
}

fn turn(from: &str, value: String) -> Value {
    json!({"from": from, "value": value})
}

/// Words, one token each (o200k): `n` of them.
fn words(tag: &str, n: usize) -> String {
    (0..n).map(|k| format!(" {tag}{}", k % 10)).collect()
}

/// Rows made at small budgets, with every turn protected (no summary: truncation
/// alone must make them fit): long user turns (text-action observations), long gpt
/// turns, a long first human turn and a long system turn. Every row fits, cutting the
/// system turn and the first human turn only when the rest is down to its markers; a
/// row whose markers alone exceed the budget is the only one rejected, with the reason.
#[test]
fn rows_fit_at_small_budgets_unless_the_markers_alone_exceed() {
    let d = tmpdir();
    let mut rows = Vec::new();
    for obs in [4, 12, 30] {
        let mut conv = vec![
            turn("system", words("sys", 300)),
            turn("human", words("task", 300)),
        ];
        for k in 0..obs {
            conv.push(turn("gpt", words(&format!("think{k}_"), 80)));
            conv.push(turn("human", words(&format!("obs{k}_"), 600)));
        }
        rows.push(json!({"id": obs, "conversations": conv}));
    }
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(d.path().join("in.jsonl"), &text).unwrap();
    for budget in [3000, 1500, 700] {
        let (out, rejected) = truncate(
            d.path(),
            &d.path().join("in.jsonl"),
            budget,
            &["--protect-last-n", "1000"],
        );
        // A marker is about 15 tokens: 62 turns of markers (the 30-turn row) exceed
        // 700 tokens; every other row fits.
        let want_rejected = if budget == 700 { 1 } else { 0 };
        assert_eq!(rejected.len(), want_rejected, "{budget}: {rejected:?}");
        assert_eq!(out.len() + rejected.len(), 3, "{budget}");
        for r in &rejected {
            assert_eq!(
                r["reasons"][0],
                "over-budget: over 700 tokens with every turn cut to its truncation marker",
                "{r}"
            );
            assert_eq!(r["line"], 3, "{r}");
            let raw: Value = serde_json::from_str(r["raw"].as_str().unwrap()).unwrap();
            assert_eq!(raw, rows[2], "the exact original row");
        }
        assert!(
            over_budget(d.path(), "fit.jsonl", budget).is_empty(),
            "{budget}"
        );
        for r in &out {
            let conv = r["conversations"].as_array().unwrap();
            let src = rows.iter().find(|x| x["id"] == r["id"]).unwrap();
            tiers_in_order(r, src, budget);
            // Cut turns keep their head and tail around the marker.
            for (t, s) in conv.iter().zip(src["conversations"].as_array().unwrap()) {
                let (t, s) = (t["value"].as_str().unwrap(), s["value"].as_str().unwrap());
                if t != s {
                    assert!(t.contains("characters truncated by traj-compress"), "{t}");
                    let head: String = s.chars().take(3).collect();
                    assert!(t.starts_with(&head) || t.starts_with("\n\n[..."), "{t}");
                }
            }
        }
        if budget == 3000 {
            // Cutting the observations and the gpt turns is enough: the system turn
            // and the first human turn are kept whole.
            for r in &out {
                let src = rows.iter().find(|x| x["id"] == r["id"]).unwrap();
                assert_eq!(r["conversations"][0], src["conversations"][0]);
                assert_eq!(r["conversations"][1], src["conversations"][1]);
            }
        }
    }
}

/// The JSON bodies of a Hermes tool turn's `<tool_response>` blocks, each parsed.
fn response_bodies(v: &str) -> Vec<Result<Value, String>> {
    v.split("<tool_response>")
        .skip(1)
        .map(|b| {
            let body = b.split("</tool_response>").next().unwrap_or("");
            serde_json::from_str(body).map_err(|e| format!("{e}: {body}"))
        })
        .collect()
}

/// A Hermes tool turn whose `content` is an object or a list (hermes-agent's shape) is
/// cut inside the strings of that content, so each `<tool_response>` block stays valid
/// JSON; before, the block was cut as plain text and the marker spliced into its JSON.
#[test]
fn hermes_tool_response_json_content_stays_json() {
    let d = tmpdir();
    let call = "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"cmd\": \"ls\"}}\n</tool_call>";
    let body = json!({"name": "bash", "content": {"stdout": "x".repeat(8000), "rc": 0}});
    let row = json!({"id": 1, "conversations": [
        turn("system", "sys".into()),
        turn("human", "hi".into()),
        turn("gpt", call.into()),
        turn("tool", format!("<tool_response>\n{body}\n</tool_response>")),
        turn("gpt", "done".into()),
    ]});
    std::fs::write(d.path().join("in.jsonl"), format!("{row}\n")).unwrap();
    let (out, rejected) = truncate(
        d.path(),
        &d.path().join("in.jsonl"),
        300,
        &["--tokenizer", "chars4"],
    );
    assert!(rejected.is_empty(), "{rejected:?}");
    let conv = out[0]["conversations"].as_array().unwrap();
    assert_eq!(conv[2]["value"], call, "the call is kept");
    let v = conv[3]["value"].as_str().unwrap();
    let bodies = response_bodies(v);
    let obj = bodies[0].as_ref().unwrap();
    assert_eq!(obj["content"]["rc"], 0);
    let stdout = obj["content"]["stdout"].as_str().unwrap();
    assert!(
        stdout.contains(MARK) && stdout.starts_with("xx") && stdout.ends_with("xx"),
        "{stdout}"
    );

    // The fixture of hermes-agent rows (list contents, two and three blocks in a turn):
    // every block that was JSON still is.
    let input = read_jsonl(&fixture("hermes_reason_tool_use_50.jsonl"));
    for budget in [600, 1500] {
        let (out, rejected) = truncate(
            d.path(),
            &fixture("hermes_reason_tool_use_50.jsonl"),
            budget,
            &["--tokenizer", "chars4", "--protect-last-n", "1000"],
        );
        // Every turn protected: no summary, each output row is its input row cut.
        let gone: Vec<u64> = rejected.iter().filter_map(|r| r["line"].as_u64()).collect();
        let kept = (1..).zip(&input).filter(|(n, _)| !gone.contains(n));
        assert_eq!(kept.clone().count(), out.len());
        let mut cut = 0;
        for (r, (_, src)) in out.iter().zip(kept) {
            let conv = r["conversations"].as_array().unwrap();
            for (k, t) in conv.iter().enumerate() {
                if t["from"] != "tool" {
                    continue;
                }
                let was = response_bodies(src["conversations"][k]["value"].as_str().unwrap());
                let now = response_bodies(t["value"].as_str().unwrap());
                assert_eq!(was.len(), now.len(), "{budget}: {t}");
                for (w, n) in was.iter().zip(&now) {
                    if w.is_ok() {
                        let n = n.as_ref().unwrap_or_else(|e| panic!("{budget}: {e}"));
                        cut += usize::from(n.to_string().contains(MARK));
                    }
                }
            }
        }
        assert!(cut > 0, "{budget}: no block was cut");
    }
}

/// An OpenAI tool message whose `content` is a list of typed parts, and an assistant
/// message with a long `reasoning_content`, are cut (docs/compress.md counts both as
/// the turn's text); before, neither was, and the rows went to the rejects as if every
/// turn were down to its marker.
#[test]
fn typed_parts_and_reasoning_are_cut() {
    let d = tmpdir();
    let head = [
        json!({"role": "system", "content": "sys"}),
        json!({"role": "user", "content": "task"}),
    ];
    let call =
        json!({"id": "c1", "type": "function", "function": {"name": "cat", "arguments": "{}"}});
    let rows = [
        json!({"id": "parts", "messages": [head[0], head[1],
            {"role": "assistant", "content": "ok", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "out ".repeat(2000)}]},
            {"role": "assistant", "content": "done"}]}),
        json!({"id": "values", "messages": [head[0], head[1],
            {"role": "assistant", "content": [{"type": "text", "value": "say ".repeat(2000)}]},
            {"role": "assistant", "content": "done"}]}),
        json!({"id": "reasoning", "messages": [head[0], head[1],
            {"role": "assistant", "content": "ok", "reasoning_content": "think ".repeat(2000)},
            {"role": "assistant", "content": "done"}]}),
    ];
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(d.path().join("in.jsonl"), text).unwrap();
    let (out, rejected) = truncate(
        d.path(),
        &d.path().join("in.jsonl"),
        500,
        &["--tokenizer", "chars4"],
    );
    assert!(rejected.is_empty(), "{rejected:?}");
    assert_eq!(out.len(), 3);
    let mut c = cmd("traj-filter", d.path());
    c.args([
        "--max-row-tokens",
        "500",
        "--tokenizer",
        "chars4",
        "fit.jsonl",
        "-o",
        "kept.jsonl",
    ]);
    assert_code(&run(c), 0);
    assert_eq!(
        read_jsonl(&d.path().join("kept.jsonl")).len(),
        3,
        "every row fits"
    );
    let cut = |v: &Value| {
        v.as_str()
            .is_some_and(|s| s.contains(MARK) && s.len() < 2400)
    };
    assert!(
        cut(&out[0]["messages"][3]["content"][0]["text"]),
        "{}",
        out[0]
    );
    assert!(
        cut(&out[1]["messages"][2]["content"][0]["value"]),
        "{}",
        out[1]
    );
    assert!(
        cut(&out[2]["messages"][2]["reasoning_content"]),
        "{}",
        out[2]
    );
    // The rest of each message is as it was.
    assert_eq!(out[0]["messages"][3]["content"][0]["type"], "text");
    assert_eq!(out[0]["messages"][2], rows[0]["messages"][2]);
    assert_eq!(out[2]["messages"][2]["content"], "ok");
}

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

/// A text cut to its marker alone (a Hermes `<tool_response>` block: its `content`).
fn at_marker(t: &Value) -> bool {
    let v = t["value"].as_str().unwrap_or("");
    let Some(start) = v.find("\n\n[... ") else {
        return v.is_empty();
    };
    let end = v[start..]
        .find(" ...]\n\n")
        .map(|k| start + k + " ...]\n\n".len());
    let Some(end) = end else { return false };
    let rest = format!("{}{}", &v[..start], &v[end..]);
    rest.is_empty()
        || rest
            .strip_prefix("<tool_response>\n")
            .and_then(|b| b.strip_suffix("\n</tool_response>"))
            .and_then(|b| serde_json::from_str::<Value>(b).ok())
            .is_some_and(|o| o["content"] == "")
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

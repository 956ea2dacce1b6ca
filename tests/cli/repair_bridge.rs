//! Issues 26 and 27 (parts): the model's own reasoning after the runner's empty
//! `<think>` block stays reasoning; traj-filter's predicates read typed content parts
//! by the one message rule, so a raw row and its normalised row get the same verdict;
//! hermes-agent 0.21's bridge calls (`tool_call`) resolve to the real tool they ran
//! (and come back), count for it, and pass `--valid-tools` when the bridge and the real
//! tool were offered; MCP tool names are ordinary names.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use crate::util::*;

fn ok(mut c: std::process::Command, args: &[&str]) -> std::process::Output {
    c.args(args);
    let o = run(c);
    assert_code(&o, 0);
    o
}

fn normalize(dir: &Path, args: &[&str]) -> std::process::Output {
    ok(cmd("traj-normalize", dir), args)
}

fn filter(dir: &Path, args: &[&str]) -> std::process::Output {
    ok(cmd("traj-filter", dir), args)
}

fn lines(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn gpt_values(row: &Value) -> Vec<(usize, String)> {
    row["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .filter(|(_, t)| t["from"] == "gpt")
        .map(|(i, t)| (i, t["value"].as_str().unwrap().to_string()))
        .collect()
}

/// `<think>` + blank + `</think>` + R (no tag, not blank) + `</think>` + rest: the
/// runner's empty block before the model's own reasoning. Returns R.
fn own_reasoning(v: &str) -> Option<&str> {
    let rest = v.strip_prefix("<think>")?;
    let (inner, rest) = rest.split_once("</think>")?;
    if !inner.trim().is_empty() {
        return None;
    }
    let (r, _) = rest.split_once("</think>")?;
    (!r.trim().is_empty() && !r.contains('<')).then_some(r)
}

#[test]
fn reasoning_after_the_runners_empty_think_stays_reasoning() {
    let d = tmpdir();
    let input = fixture("hermes_agent_repairs.jsonl");
    let o = normalize(
        d.path(),
        &[
            input.to_str().unwrap(),
            "-o",
            "out.jsonl",
            "--on-error",
            "skip",
            "--rejects",
            "rej.jsonl",
            "--stats",
            "stats.json",
        ],
    );
    let out: Vec<Value> = read_jsonl(&d.path().join("out.jsonl"));
    let by_index: std::collections::BTreeMap<i64, &Value> = out
        .iter()
        .map(|r| (r["prompt_index"].as_i64().unwrap(), r))
        .collect();
    let mut seen = 0;
    for line in lines(&input) {
        let row: Value = serde_json::from_str(&line).unwrap();
        let Some(done) = by_index.get(&row["prompt_index"].as_i64().unwrap()) else {
            continue;
        };
        let after = gpt_values(done);
        for (i, v) in gpt_values(&row) {
            let Some(r) = own_reasoning(&v) else { continue };
            seen += 1;
            let k = gpt_values(&row).iter().position(|(x, _)| *x == i).unwrap();
            let (j, w) = &after[k];
            // The reasoning is the think block's, byte for byte; the answer after it stays.
            let want = format!("<think>{r}</think>");
            assert!(
                w.starts_with(&want),
                "turn {j}: {w:?} should start {want:?}"
            );
            // The answer after it stays, the white space between the two in Hermes's
            // framing (`</think>\n`: docs/normalize.md).
            let tail = &v[v.find(r).unwrap() + r.len() + "</think>".len()..];
            assert!(w.ends_with(tail.trim()), "turn {j}: {w:?}");
        }
    }
    assert!(seen >= 10, "the fixture shows the defect ({seen} turns)");
    let stats: Value =
        serde_json::from_str(&std::fs::read_to_string(d.path().join("stats.json")).unwrap())
            .unwrap();
    assert_eq!(
        stats["repaired"]["reasoning_after_empty_think"].as_u64(),
        Some(seen),
        "{stats}"
    );
    assert!(
        stderr(&o).contains(&format!("reasoning_after_empty_think: {seen}")),
        "{}",
        stderr(&o)
    );
    // Normalising the output again changes nothing and repairs nothing.
    let o = normalize(d.path(), &["out.jsonl", "-o", "again.jsonl"]);
    assert!(!stderr(&o).contains("envelope repairs"), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(d.path().join("out.jsonl")).unwrap(),
        std::fs::read(d.path().join("again.jsonl")).unwrap()
    );
}

/// The line numbers (1-based) `traj-filter PRED` keeps of `file`.
fn kept(dir: &Path, file: &str, pred: &[&str]) -> BTreeSet<usize> {
    let rej = format!("{file}.rej.jsonl");
    let mut args = pred.to_vec();
    args.extend([file, "-o", "/dev/null", "--rejects", &rej, "-q"]);
    filter(dir, &args);
    let dropped: BTreeSet<usize> = read_jsonl(&dir.join(&rej))
        .iter()
        .map(|r| r["line"].as_u64().unwrap() as usize)
        .collect();
    let n = lines(&dir.join(file)).len();
    (1..=n).filter(|k| !dropped.contains(k)).collect()
}

#[test]
fn each_predicate_judges_a_raw_row_as_its_normalised_row() {
    let d = tmpdir();
    let mut checked = 0;
    for source in [
        "llamafactory_reason_tool_use_50.jsonl",
        "llamafactory_glaive_toolcall_en.jsonl",
        "hermes_reason_tool_use_50.jsonl",
        "hermes_agent_repairs.jsonl",
        "openai_legacy_shapes.jsonl",
        "traj_run_records.jsonl",
        "hermes_bridge_calls.jsonl",
    ] {
        // The rows traj-normalize writes, and the same rows as they came.
        let raw_all = lines(&fixture(source));
        let nrej = format!("{source}.nrej.jsonl");
        let norm = format!("{source}.norm.jsonl");
        normalize(
            d.path(),
            &[
                fixture(source).to_str().unwrap(),
                "-o",
                &norm,
                "--on-error",
                "skip",
                "--rejects",
                &nrej,
            ],
        );
        let refused: BTreeSet<usize> = read_jsonl(&d.path().join(&nrej))
            .iter()
            .map(|r| r["line"].as_u64().unwrap() as usize)
            .collect();
        let raw: Vec<&String> = (1..=raw_all.len())
            .filter(|k| !refused.contains(k))
            .map(|k| &raw_all[k - 1])
            .collect();
        let raw_file = format!("{source}.raw.jsonl");
        std::fs::write(
            d.path().join(&raw_file),
            raw.iter().map(|l| format!("{l}\n")).collect::<String>(),
        )
        .unwrap();
        assert_eq!(raw.len(), lines(&d.path().join(&norm)).len(), "{source}");
        for pred in [
            &["--require-reasoning"][..],
            &["--has-tool-calls"][..],
            &["--valid-tools"][..],
        ] {
            let a = kept(d.path(), &raw_file, pred);
            let b = kept(d.path(), &norm, pred);
            assert_eq!(
                a,
                b,
                "{source} {pred:?}: rows kept raw vs normalised ({} of {})",
                a.len(),
                raw.len()
            );
            checked += 1;
        }
        if source == "llamafactory_reason_tool_use_50.jsonl" {
            // Every row carries reasoning parts, 31 of them tool-call parts too.
            let n = |pred| kept(d.path(), &raw_file, &[pred]).len();
            assert_eq!(n("--require-reasoning"), 50);
            assert_eq!(n("--has-tool-calls"), 31);
        }
    }
    assert_eq!(checked, 21);
}

fn turns(row: &Value) -> Vec<(String, String)> {
    row["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["from"].as_str().unwrap().to_string(),
                t["value"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The JSON body of the first `<open>` block of `v`.
fn body(v: &str, open: &str) -> Value {
    let close = open.replace('<', "</");
    let s = v.split_once(&format!("{open}\n")).unwrap().1;
    serde_json::from_str(s.split_once(&format!("\n{close}")).unwrap().0).unwrap()
}

#[test]
fn bridge_calls_resolve_to_the_real_tool_and_come_back() {
    let d = tmpdir();
    let input = fixture("hermes_bridge_calls.jsonl");
    normalize(d.path(), &[input.to_str().unwrap(), "-o", "out.jsonl"]);
    let out = read_jsonl(&d.path().join("out.jsonl"));
    assert_eq!(out.len(), 6);

    // Row 0: the todo_list call the model made through tool_call is written as a
    // todo_list call, its response named todo_list; the original is kept.
    let t = turns(&out[0]);
    let call = body(&t[4].1, "<tool_call>");
    assert_eq!(call["name"], "todo_list", "{}", t[4].1);
    assert_eq!(call["arguments"]["todos"][1]["content"], "write the notes");
    assert_eq!(body(&t[5].1, "<tool_response>")["name"], "todo_list");
    // tool_describe ran no other tool: it stays.
    assert_eq!(body(&t[2].1, "<tool_call>")["name"], "tool_describe");
    let kept = &out[0]["bridge_calls"];
    assert_eq!(kept[0]["call"], 1);
    assert_eq!(kept[0]["name"], "tool_call");
    assert_eq!(kept[0]["resolved"], "todo_list");
    let stats = &out[0]["tool_stats"];
    assert_eq!(stats["todo_list"]["count"], 1, "{stats}");
    assert_eq!(stats["todo_list"]["success"], 1, "{stats}");
    assert_eq!(stats["tool_call"]["count"], 0, "{stats}");
    assert_eq!(stats["tool_describe"]["count"], 1, "{stats}");

    // Row 1: an MCP tool through the bridge; row 2: an MCP tool called directly.
    assert_eq!(
        body(&turns(&out[1])[4].1, "<tool_call>")["name"],
        "mcp__github__create_issue"
    );
    assert_eq!(
        out[1]["tool_stats"]["mcp__github__create_issue"]["success"],
        1
    );
    assert_eq!(
        out[2]["tool_stats"]["mcp__filesystem__read_text_file"]["count"],
        1
    );
    assert!(out[2].get("bridge_calls").is_none());
    // Row 3: the legacy single shape, string arguments parsed.
    let c = body(&turns(&out[3])[2].1, "<tool_call>");
    assert_eq!(
        (c["name"].as_str(), &c["arguments"]),
        (
            Some("process_manage"),
            &serde_json::json!({"action": "list"})
        )
    );
    // Row 4: the batch the agent refused stays a bridge call; the retry resolves.
    let t = turns(&out[4]);
    assert_eq!(body(&t[2].1, "<tool_call>")["name"], "tool_call");
    assert_eq!(body(&t[3].1, "<tool_response>")["name"], "tool_call");
    assert_eq!(body(&t[4].1, "<tool_call>")["name"], "cronjob_manage");
    assert_eq!(out[4]["tool_stats"]["tool_call"]["failure"], 1);
    assert_eq!(out[4]["tool_stats"]["cronjob_manage"]["success"], 1);
    // Row 5: a batch of connector calls names no single tool: kept as it is.
    assert!(out[5].get("bridge_calls").is_none());
    assert_eq!(
        body(&turns(&out[5])[2].1, "<tool_call>")["name"],
        "tool_call"
    );

    // A second normalize gives the same bytes.
    normalize(d.path(), &["out.jsonl", "-o", "again.jsonl"]);
    assert_eq!(
        std::fs::read(d.path().join("out.jsonl")).unwrap(),
        std::fs::read(d.path().join("again.jsonl")).unwrap()
    );
    // --to openai gives the calls as the model made them, from the input or from the
    // resolved rows alike.
    let a = stdout(&normalize(
        d.path(),
        &["--to", "openai", input.to_str().unwrap()],
    ));
    let b = stdout(&normalize(d.path(), &["--to", "openai", "out.jsonl"]));
    assert_eq!(a, b);
    let openai = parse_jsonl(&b);
    assert!(openai[0].get("bridge_calls").is_none());
    let msgs = openai[0]["messages"].as_array().unwrap();
    let f = &msgs
        .iter()
        .filter(|m| m["role"] == "assistant")
        .nth(1)
        .unwrap()["tool_calls"][0]["function"];
    assert_eq!(f["name"], "tool_call");
    let args: Value = serde_json::from_str(f["arguments"].as_str().unwrap()).unwrap();
    let orig = body(&turns(&read_jsonl(&input)[0])[4].1, "<tool_call>");
    assert_eq!(args, orig["arguments"]);

    // --bridge keep: the Hermes text shows the bridge call; the counts are the same.
    normalize(
        d.path(),
        &[
            "--bridge",
            "keep",
            input.to_str().unwrap(),
            "-o",
            "keep.jsonl",
        ],
    );
    let keep = read_jsonl(&d.path().join("keep.jsonl"));
    assert_eq!(body(&turns(&keep[0])[4].1, "<tool_call>"), orig);
    assert!(keep[0].get("bridge_calls").is_none());
    for (k, r) in keep.iter().zip(&out) {
        assert_eq!(k["tool_stats"], r["tool_stats"]);
    }
    // ... and resolving the kept rows gives the resolved rows.
    normalize(d.path(), &["keep.jsonl", "-o", "resolved.jsonl"]);
    assert_eq!(
        std::fs::read(d.path().join("out.jsonl")).unwrap(),
        std::fs::read(d.path().join("resolved.jsonl")).unwrap()
    );
}

#[test]
fn bridged_calls_are_valid_when_the_bridge_and_the_real_tool_were_offered() {
    let d = tmpdir();
    let input = fixture("hermes_bridge_calls.jsonl");
    let every = [
        "terminal",
        "read_file",
        "tool_search",
        "tool_describe",
        "tool_call",
        "todo_list",
        "process_manage",
        "cronjob_manage",
        "mcp__github__create_issue",
        "mcp__filesystem__read_text_file",
        "connectors__gmail__SEND_EMAIL",
        "connectors__linear__CREATE_ISSUE",
    ];
    std::fs::write(d.path().join("all.txt"), every.join("\n")).unwrap();
    let reasons = |file: &str, extra: &[&str]| -> Vec<(u64, String)> {
        let mut args = vec![
            "--valid-tools",
            file,
            "-o",
            "/dev/null",
            "--rejects",
            "r.jsonl",
        ];
        args.extend(extra);
        filter(d.path(), &args);
        read_jsonl(&d.path().join("r.jsonl"))
            .iter()
            .map(|r| {
                (
                    r["line"].as_u64().unwrap(),
                    r["reasons"][0].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let f = input.to_str().unwrap();
    // Every tool offered: only the batch the agent itself refused is invalid.
    assert_eq!(
        reasons(f, &["--tools", "all.txt"]),
        [(
            5,
            "invalid-tools: turn 3: tool_call batches 2 calls, one of them a local tool (only connectors__ tools share a call)".to_string()
        )]
    );
    // A real tool not offered is named as such.
    let without: Vec<&str> = every
        .iter()
        .copied()
        .filter(|t| *t != "todo_list")
        .collect();
    std::fs::write(d.path().join("some.txt"), without.join("\n")).unwrap();
    let r = reasons(f, &["--tools", "some.txt"]);
    assert_eq!(
        r[0],
        (
            1,
            "invalid-tools: turn 5: tool_call runs \"todo_list\", which was not offered"
                .to_string()
        )
    );
    // The rows' own system prompts list only the visible tools (the agent's): the
    // MCP tool offered directly passes, the deferred ones need --tools.
    let own: BTreeSet<u64> = reasons(f, &[]).iter().map(|(l, _)| *l).collect();
    assert_eq!(own, BTreeSet::from([1, 2, 4, 5, 6]));
    // The resolved rows get the same verdicts.
    normalize(d.path(), &[f, "-o", "out.jsonl"]);
    assert_eq!(
        reasons("out.jsonl", &["--tools", "all.txt"]).len(),
        1,
        "the refused batch"
    );
    let own_out: BTreeSet<u64> = reasons("out.jsonl", &[]).iter().map(|(l, _)| *l).collect();
    assert_eq!(own_out, own);
}

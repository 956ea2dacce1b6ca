//! traj-compress on the edges: the reason a row is still over the budget, the name of
//! stdin when sampling, a zero budget in the config file, and how rows without a
//! message list are counted.

use std::path::Path;

use serde_json::{Value, json};

use crate::util::*;

const BIN: &str = "traj-compress";

/// A row of `pairs` assistant/tool pairs of about 100 tokens each (chars4).
fn long_row(pairs: usize) -> Value {
    let mut m = vec![
        json!({"role": "system", "content": "You are an agent."}),
        json!({"role": "user", "content": "Fix the bug."}),
    ];
    for i in 0..pairs {
        let call = json!({"id": format!("c{i}"), "type": "function",
            "function": {"name": "bash", "arguments": format!("{{\"cmd\": \"cat f{i}.py\"}}")}});
        m.push(
            json!({"role": "assistant", "content": "thinking ".repeat(40), "tool_calls": [call]}),
        );
        m.push(json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": format!("line {i} of output\n").repeat(40)}));
    }
    m.push(json!({"role": "assistant", "content": "Done."}));
    json!({"id": "r", "messages": m})
}

fn compress(dir: &Path, args: &[&str]) -> std::process::Output {
    let mut c = cmd(BIN, dir);
    c.args(["--offline", "--tokenizer", "chars4"]).args(args);
    run(c)
}

/// The turns kept fit the budget, the summary (within its target) does not fit beside
/// them: `summary_exceeds_room`, not `region_too_small` (which says the turns kept are
/// over the budget by themselves).
#[test]
fn a_summary_too_large_for_the_room_left_is_named_so() {
    let d = tmpdir();
    std::fs::write(d.path().join("in.jsonl"), format!("{}\n", long_row(20))).unwrap();
    // The row's per-row metrics after a run with budget 500 and `extra`.
    let metrics = |extra: &[&str]| -> Value {
        let base = ["in.jsonl", "--target-max-tokens", "500"];
        let per_row = [
            "--per-trajectory-metrics",
            "--no-metrics",
            "-o",
            "out.jsonl",
        ];
        let o = compress(d.path(), &[&base[..], extra, &per_row].concat());
        assert_code(&o, 0);
        read_jsonl(&d.path().join("out.jsonl"))[0]["compression_metrics"].clone()
    };
    let m = metrics(&["--protect-last-n", "0"]);
    assert_eq!(m["still_over_limit"], true, "{m}");
    assert_eq!(m["still_over_limit_reason"], "summary_exceeds_room", "{m}");
    // With a smaller summary target the same row fits.
    let m = metrics(&["--protect-last-n", "0", "--summary-target-tokens", "100"]);
    assert_eq!(m["still_over_limit"], false, "{m}");
    // Turns kept over the budget by themselves: region_too_small.
    let m = metrics(&["--protect-last-n", "30"]);
    assert_eq!(m["still_over_limit_reason"], "region_too_small", "{m}");
}

/// A bad line read from stdin is `<stdin>:N` with `--sample-percent` as without it, in
/// the message and in the reject's `source`; before, sampling named the temp file stdin
/// was copied to (`<temp dir>/stdin:8`).
#[test]
fn stdin_keeps_its_name_when_sampled() {
    let d = tmpdir();
    let mut text = String::new();
    for i in 0..10 {
        if i == 7 {
            text.push_str("{bad\n");
        } else {
            text.push_str(&format!(
                "{}\n",
                json!({"id": i, "conversations": [{"from": "human", "value": "hi"}]})
            ));
        }
    }
    for sample in [&[][..], &["--sample-percent", "100"][..]] {
        let mut c = cmd(BIN, d.path());
        c.args([
            "--offline",
            "--tokenizer",
            "chars4",
            "--no-metrics",
            "-o",
            "out.jsonl",
        ]);
        c.args(["--on-error", "skip", "--rejects", "rej.jsonl"])
            .args(sample);
        let o = run_with_stdin(c, text.as_bytes());
        assert_code(&o, 0);
        assert!(
            stderr(&o).contains("(first: <stdin>:8: invalid JSON"),
            "{sample:?}: {}",
            stderr(&o)
        );
        let rej = read_jsonl(&d.path().join("rej.jsonl"));
        assert_eq!(rej[0]["source"], "<stdin>", "{sample:?}");
        assert_eq!(rej[0]["line"], 8, "{sample:?}");
        let mut c = cmd(BIN, d.path());
        c.args([
            "--offline",
            "--tokenizer",
            "chars4",
            "--no-metrics",
            "-o",
            "out.jsonl",
        ])
        .args(sample);
        let o = run_with_stdin(c, text.as_bytes());
        assert_code(&o, 1);
        assert!(
            stderr(&o).contains("traj-compress: <stdin>:8: invalid JSON"),
            "{sample:?}: {}",
            stderr(&o)
        );
    }
    // A FIFO (`<(cmd)`) spooled for sampling keeps its name too.
    std::fs::write(d.path().join("in.txt"), &text).unwrap();
    let mut c = std::process::Command::new("bash");
    c.current_dir(d.path()).arg("-c").arg(format!(
        "{} --offline --no-metrics -q --sample-percent 100 --on-error skip \
         --rejects rej.jsonl -o out.jsonl <(cat in.txt)",
        bin(BIN).display()
    ));
    assert_code(&run(c), 0);
    let rej = read_jsonl(&d.path().join("rej.jsonl"));
    assert!(
        rej[0]["source"].as_str().unwrap().starts_with("/dev/fd/"),
        "{rej:?}"
    );
    assert_eq!(rej[0]["line"], 8);
}

/// `compression: {target_max_tokens: 0}` in `--config` is refused as `--target-max-tokens
/// 0` is, a usage error (exit 2) naming the file; before, it was taken, and every row
/// was over the budget.
#[test]
fn a_zero_budget_in_the_config_file_is_refused() {
    let d = tmpdir();
    std::fs::write(d.path().join("in.jsonl"), format!("{}\n", long_row(2))).unwrap();
    std::fs::write(
        d.path().join("c.yaml"),
        "compression:\n  target_max_tokens: 0\n",
    )
    .unwrap();
    let o = compress(
        d.path(),
        &["in.jsonl", "--config", "c.yaml", "-o", "out.jsonl"],
    );
    assert_code(&o, 2);
    assert!(
        stderr(&o).contains("c.yaml: compression.target_max_tokens must be at least 1"),
        "{}",
        stderr(&o)
    );
    assert!(!d.path().join("out.jsonl").exists());
    let o = compress(
        d.path(),
        &["in.jsonl", "--target-max-tokens", "0", "-o", "out.jsonl"],
    );
    assert_code(&o, 2);
}

/// Rows without a message list are counted passed through whatever their size; before,
/// a small one was counted skipped under the target (and by size), a large one passed
/// through. Every row is counted once: total = compressed + skipped + passed through
/// (nothing here is still over or failed).
#[test]
fn rows_without_turns_are_passed_through_whatever_their_size() {
    let d = tmpdir();
    let rows = [
        json!({"id": "small", "text": "x"}),
        json!({"id": "large", "text": "y".repeat(5000)}),
        json!({"id": "list-elsewhere", "meta": {"messages": []}}),
        json!({"id": "not-a-list", "messages": "none"}),
        json!({"id": "small-row", "messages": [{"role": "user", "content": "hi"}]}),
        long_row(20),
    ];
    let mut text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    // A key written with an escape: the parsed row says it is `messages`.
    text.push_str("{\"messag\\u0065s\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n");
    std::fs::write(d.path().join("in.jsonl"), &text).unwrap();
    let o = compress(
        d.path(),
        &["in.jsonl", "--target-max-tokens", "1000", "-o", "out.jsonl"],
    );
    assert_code(&o, 0);
    let out = std::fs::read_to_string(d.path().join("out.jsonl")).unwrap();
    let (ins, outs): (Vec<&str>, Vec<&str>) = (text.lines().collect(), out.lines().collect());
    assert_eq!(outs.len(), 7);
    // Every row but the long one (index 5) is written as it came.
    for i in [0, 1, 2, 3, 4, 6] {
        assert_eq!(outs[i], ins[i], "row {i}");
    }
    let m: Value =
        serde_json::from_str(&std::fs::read_to_string(d.path().join("out_metrics.json")).unwrap())
            .unwrap();
    let s = &m["summary"];
    assert_eq!(s["total_trajectories"], 7, "{s}");
    assert_eq!(s["trajectories_passed_through"], 4, "{s}");
    assert_eq!(s["trajectories_skipped_under_target"], 2, "{s}");
    assert_eq!(s["trajectories_skipped_by_size"], 1, "{s}");
    assert_eq!(s["trajectories_compressed"], 1, "{s}");
    let n = |k: &str| s[k].as_u64().unwrap();
    assert_eq!(
        n("total_trajectories"),
        n("trajectories_compressed")
            + n("trajectories_skipped_under_target")
            + n("trajectories_passed_through")
    );
}

/// A row compressed again under a smaller budget keeps one summary notice on its system
/// turn; each run once appended it again.
#[test]
fn a_row_compressed_twice_keeps_one_notice() {
    let d = tmpdir();
    std::fs::write(d.path().join("in.jsonl"), format!("{}\n", long_row(40))).unwrap();
    let notice = "Some of your previous tool responses may be summarized";
    let mut last = "in.jsonl".to_string();
    for (i, budget) in ["6000", "3000"].iter().enumerate() {
        let out = format!("out{i}.jsonl");
        let o = compress(
            d.path(),
            &[&last, "--target-max-tokens", budget, "-o", &out],
        );
        assert_code(&o, 0);
        let m: Value = serde_json::from_str(
            &std::fs::read_to_string(d.path().join(format!("out{i}_metrics.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(m["summary"]["trajectories_compressed"], 1, "run {i}: {m}");
        let row: Value =
            serde_json::from_str(&std::fs::read_to_string(d.path().join(&out)).unwrap()).unwrap();
        let system = row["messages"][0]["content"].as_str().unwrap();
        assert_eq!(system.matches(notice).count(), 1, "run {i}: {system}");
        last = out;
    }
}

/// compress, traj-normalize, compress again: one notice still (normalize puts the system
/// text and its notice in front of the Hermes tool prompt); and the second compression's
/// `compression_metrics` replace the first's, flag or not.
#[test]
fn a_row_compressed_normalised_and_compressed_again_keeps_one_notice_and_true_metrics() {
    let d = tmpdir();
    std::fs::write(d.path().join("in.jsonl"), format!("{}\n", long_row(40))).unwrap();
    let notice = "Some of your previous tool responses may be summarized";
    let o = compress(
        d.path(),
        &[
            "in.jsonl",
            "--target-max-tokens",
            "6000",
            "--per-trajectory-metrics",
            "--no-metrics",
            "-o",
            "c1.jsonl",
        ],
    );
    assert_code(&o, 0);
    let mut c = cmd("traj-normalize", d.path());
    c.args(["-q", "c1.jsonl", "-o", "h.jsonl"]);
    assert_code(&run(c), 0);
    let second = |flag: bool, out: &str| {
        let mut args = vec!["h.jsonl", "--target-max-tokens", "3000", "--no-metrics"];
        if flag {
            args.push("--per-trajectory-metrics");
        }
        args.extend(["-o", out]);
        assert_code(&compress(d.path(), &args), 0);
        let row: Value =
            serde_json::from_str(&std::fs::read_to_string(d.path().join(out)).unwrap()).unwrap();
        row
    };
    let (with, without) = (second(true, "c2a.jsonl"), second(false, "c2b.jsonl"));
    let system = without["conversations"][0]["value"].as_str().unwrap();
    assert_eq!(system.matches(notice).count(), 1, "{system}");
    assert_eq!(with, without);
    let before: Value = serde_json::from_str(
        std::fs::read_to_string(d.path().join("h.jsonl"))
            .unwrap()
            .trim(),
    )
    .unwrap();
    assert_ne!(
        without["compression_metrics"], before["compression_metrics"],
        "the first compression's metrics were left on a row compressed again"
    );
    // A `--columns core` row keeps them inside its `metadata` string: updated there, no
    // second member added.
    let mut c = cmd("traj-normalize", d.path());
    c.args(["-q", "--columns", "core", "c1.jsonl", "-o", "h.jsonl"]);
    assert_code(&run(c), 0);
    for (flag, out) in [(true, "k2a.jsonl"), (false, "k2b.jsonl")] {
        let core = second(flag, out);
        assert!(core.get("compression_metrics").is_none(), "{core}");
        let meta: Value = serde_json::from_str(core["metadata"].as_str().unwrap()).unwrap();
        assert_eq!(
            meta["compression_metrics"], without["compression_metrics"],
            "flag {flag}: {meta}"
        );
    }
}

/// Rows of other writers: a `developer` system message gets the notice, the summary turn
/// speaks the row's own word for the human side, and a top-level key written with an
/// escape keeps the row's bytes (its members and the turns kept as written).
#[test]
fn other_writers_rows_keep_their_spelling() {
    let d = tmpdir();
    let mut dev = long_row(20);
    dev["messages"][0]["role"] = json!("developer");
    // ShareGPT keys, OpenAI role words.
    let msgs = long_row(20)["messages"].as_array().unwrap().clone();
    let sharegpt: Vec<Value> = msgs
        .iter()
        .map(|m| {
            let text = m["content"].as_str().unwrap_or("").to_string();
            json!({"from": m["role"], "value": text})
        })
        .collect();
    let words = json!({"conversations": sharegpt});
    let escaped = serde_json::to_string(&long_row(20)).unwrap().replacen(
        "{\"id\":\"r\"",
        "{\"\\u0069d\": 2e0, \"n\": 1E5",
        1,
    );
    let text = format!("{dev}\n{words}\n{escaped}\n");
    std::fs::write(d.path().join("in.jsonl"), &text).unwrap();
    let o = compress(
        d.path(),
        &[
            "in.jsonl",
            "--target-max-tokens",
            "800",
            "--no-metrics",
            "-o",
            "out.jsonl",
        ],
    );
    assert_code(&o, 0);
    let out = std::fs::read_to_string(d.path().join("out.jsonl")).unwrap();
    let rows: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let notice = "Some of your previous tool responses may be summarized";
    assert!(
        rows[0]["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains(notice),
        "{}",
        rows[0]["messages"][0]
    );
    let summary = rows[1]["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| {
            t["value"]
                .as_str()
                .unwrap()
                .starts_with("[CONTEXT SUMMARY]")
        })
        .expect("a summary turn");
    assert_eq!(summary["from"], "user", "{summary}");
    let third = out.lines().nth(2).unwrap();
    assert!(
        third.starts_with("{\"\\u0069d\": 2e0, \"n\": 1E5,\"messages\":[{\"role\":\"system\""),
        "{}",
        &third[..120]
    );
    assert_ne!(rows[2]["messages"], long_row(20)["messages"], "compressed");
}

/// `--input DIR --glob PAT` reads the files the pattern picks; `--input .` writes
/// `<dir>_compressed` beside the folder, not inside it; a config or tokenizer that
/// cannot be used is exit 2.
#[test]
fn input_directories_globs_and_configuration_errors() {
    let d = tmpdir();
    let dir = d.path().join("runs");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("a.jsonl"), format!("{}\n", long_row(2))).unwrap();
    std::fs::write(dir.join("b.jsonl"), format!("{}\n", long_row(2))).unwrap();
    let o = compress(d.path(), &["--input", "runs", "--glob", "a*"]);
    assert_code(&o, 0);
    assert!(d.path().join("runs_compressed/a.jsonl").is_file());
    assert!(!d.path().join("runs_compressed/b.jsonl").exists());
    let o = compress(&dir, &["--input", ".", "--no-metrics"]);
    assert_code(&o, 0);
    assert!(!dir.join("input_compressed").exists() && !dir.join("runs_compressed").exists());
    assert!(d.path().join("runs_compressed/b.jsonl").is_file());
    // An earlier run's output as input: its metrics document is no rows, named.
    assert!(
        d.path()
            .join("runs_compressed/compression_metrics.json")
            .is_file()
    );
    let o = compress(d.path(), &["--input", "runs_compressed", "--dry-run"]);
    assert_code(&o, 0);
    let err = stderr(&o);
    assert!(err.contains("compression_metrics.json: not read"), "{err}");
    assert!(!err.contains("compression_metrics.jsonl"), "{err}");
    std::fs::write(d.path().join("tok.json"), "{}").unwrap();
    // A hub name gives way to o200k_base (the reference's default names one); a file
    // here that is no tokenizer is the user's to fix.
    std::fs::write(d.path().join("tk.yaml"), "tokenizer:\n  name: tok.json\n").unwrap();
    for args in [
        &["--config", "missing.yaml", "runs/a.jsonl"][..],
        &["--config", "tk.yaml", "runs/a.jsonl"],
        &["--tokenizer", "tok.json", "runs/a.jsonl"],
        &["--input", "runs/a.jsonl", "--glob", "a*"],
    ] {
        let mut c = cmd(BIN, d.path());
        c.arg("--offline").args(args);
        let o = run(c);
        assert_code(&o, 2);
    }
}

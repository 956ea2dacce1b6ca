//! What traj-report's viewer embeds, read from the page's data block (no browser): the
//! turns a summary replaced come from the row's own uncompressed row (`--before`), every
//! turn of a row is shown, and `--max-rows N` embeds at most N rows.

use std::path::Path;

use serde_json::{Value, json};

use crate::util::*;

/// traj-report in `dir` with `args`, writing `page.html`; the page's data block.
fn page(dir: &Path, args: &[&str]) -> Value {
    let mut c = cmd("traj-report", dir);
    c.args(args)
        .args(["--tokenizer", "chars4", "-o", "page.html"]);
    assert_code(&run(c), 0);
    data_block(&std::fs::read_to_string(dir.join("page.html")).unwrap())
}

/// The embedded rows of the page (of every dataset).
fn embedded(data: &Value) -> Vec<Value> {
    data["rows"].as_array().expect("rows").clone()
}

/// Rollouts share their `prompt_index`: each summary shows the turns of its own row,
/// the k-th compressed row of a key paired with the k-th uncompressed one. Before, one
/// row per key was kept (the last), so every summary showed that row's turns.
#[test]
fn before_pairs_rows_that_share_a_key_by_their_order() {
    let d = tmpdir();
    let mut text = String::new();
    for r in 0..40 {
        let mut conv = vec![
            json!({"from": "system", "value": "sys"}),
            json!({"from": "human", "value": "task"}),
        ];
        for k in 0..12 {
            conv.push(json!({"from": "gpt", "value": format!("rollout{r}x step{k} ").repeat(30)}));
            conv.push(json!({"from": "human", "value": format!("rollout{r}x obs{k} ").repeat(30)}));
        }
        text.push_str(&format!(
            "{}\n",
            json!({"prompt_index": 0, "conversations": conv})
        ));
    }
    std::fs::write(d.path().join("in.jsonl"), text).unwrap();
    let mut c = cmd("traj-compress", d.path());
    c.args([
        "in.jsonl",
        "-o",
        "out.jsonl",
        "--offline",
        "--no-metrics",
        "--tokenizer",
        "chars4",
    ]);
    c.args(["--target-max-tokens", "2000"]);
    assert_code(&run(c), 0);
    let data = page(
        d.path(),
        &["out.jsonl", "--before", "in.jsonl", "--max-rows", "9"],
    );
    let mut shown = 0;
    for row in embedded(&data) {
        let at = row["at"].as_str().unwrap().to_string();
        let line: usize = at.rsplit(':').next().unwrap().parse().unwrap();
        let own = format!("rollout{}x", line - 1);
        let Some(rep) = row["t"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|t| t.get("rep"))
        else {
            continue;
        };
        let turns = rep["turns"].as_array().unwrap();
        assert!(!turns.is_empty(), "{at}: {rep}");
        for t in turns {
            let x = t["x"].as_str().unwrap();
            assert!(
                x.contains(&own),
                "{at}: a replaced turn of another row: {x:.80}"
            );
        }
        shown += 1;
    }
    assert!(shown >= 3, "{shown} summaries with their turns");

    // A row dropped on one side: the key repeats 39 times there and 40 here, so no row
    // of it can be paired; no summary shows another row's turns.
    let lines: Vec<&str> = std::fs::read_to_string(d.path().join("out.jsonl"))
        .unwrap()
        .leak()
        .lines()
        .collect();
    std::fs::write(d.path().join("out39.jsonl"), lines[1..].join("\n") + "\n").unwrap();
    let data = page(
        d.path(),
        &["out39.jsonl", "--before", "in.jsonl", "--max-rows", "9"],
    );
    for row in embedded(&data) {
        assert!(!row.to_string().contains("\"rep\""), "{}", row["at"]);
    }
}

/// A message that is no turn of the trajectory (a tool result after a gpt turn with no
/// call, a system message after the first turn) is shown at its place, as the row
/// spells it. Before, the viewer showed the trajectory's turns only, and such a
/// message was on the page nowhere.
#[test]
fn every_turn_is_shown() {
    let d = tmpdir();
    let rows = [
        json!({"id": 0, "conversations": [
            {"from": "system", "value": "s"}, {"from": "human", "value": "hi"},
            {"from": "gpt", "value": "calling"}, {"from": "tool", "value": "PLAIN TOOL OUTPUT"},
            {"from": "gpt", "value": "x"}]}),
        json!({"id": 1, "messages": [
            {"role": "user", "content": "hi"}, {"role": "assistant", "content": "a"},
            {"role": "system", "content": "LATE SYSTEM"}, {"role": "tool", "content": "ORPHAN RESULT"}]}),
    ];
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(d.path().join("pt.jsonl"), text).unwrap();
    let data = page(d.path(), &["pt.jsonl"]);
    let shown = embedded(&data);
    assert_eq!(shown.len(), 2);
    for (row, want) in shown.iter().zip([
        ("tool", "PLAIN TOOL OUTPUT", 2),
        ("tool", "ORPHAN RESULT", 3),
    ]) {
        let t = row["t"].as_array().unwrap();
        let sys = usize::from(row["sys"].is_string());
        assert_eq!(
            sys + t.len(),
            row["turns"].as_u64().unwrap() as usize,
            "{row}"
        );
        assert_eq!(t[want.2]["role"], want.0, "{row}");
        assert_eq!(t[want.2]["x"], want.1, "{row}");
    }
    assert_eq!(shown[1]["t"][2]["x"], "LATE SYSTEM");
    // The system prompt is the system messages before the first turn, shown once.
    assert_eq!(shown[0]["sys"], "s");
    assert!(shown[1]["sys"].is_null(), "{}", shown[1]);
}

/// `--max-rows N` embeds at most N rows of each dataset, as docs/report.md and --help
/// say; before, the extremes came on top of N (`--max-rows 1` embedded 4 rows of the
/// fixture).
#[test]
fn max_rows_is_at_most_n_per_dataset() {
    let d = tmpdir();
    let f = fixture("hermes_reason_tool_use_50.jsonl");
    let f = f.to_str().unwrap();
    for n in [1usize, 3, 9, 60] {
        let data = page(d.path(), &[f, "--max-rows", &n.to_string()]);
        assert_eq!(embedded(&data).len(), n.min(50), "--max-rows {n}");
        let data = page(d.path(), &["--compare", f, f, "--max-rows", &n.to_string()]);
        assert_eq!(
            embedded(&data).len(),
            2 * n.min(50),
            "--compare --max-rows {n}"
        );
    }
    // One place: the first extreme, the row with the fewest tokens.
    let data = page(d.path(), &[f, "--max-rows", "1"]);
    let pick = embedded(&data)[0]["pick"].to_string();
    assert!(pick.contains("fewest tokens"), "{pick}");
}

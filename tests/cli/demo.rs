//! `scripts/demo.sh` (what `make demo` runs) against the stand-in endpoint with the demo's
//! script: the table it prints adds up stage by stage and matches the files each stage
//! left, the long tasks are really compressed (tokens before and after as in
//! compression_metrics.json), and the tools ran under bubblewrap, which the output says.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::standin::Standin;
use crate::util::*;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn lines(p: &Path) -> usize {
    if !p.exists() {
        return 0;
    }
    read_jsonl(p).len()
}

fn json_file(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

/// One row of the stage table: rows in, rows out, rejected, notes.
struct Stage {
    rows_in: usize,
    rows_out: usize,
    rejected: usize,
    notes: String,
}

/// The stage table of the demo's output, by stage name.
fn stage_table(out: &str) -> BTreeMap<String, Stage> {
    let mut t = BTreeMap::new();
    for l in out.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.len() >= 4
            && w[0].starts_with("traj-")
            && let (Ok(a), Ok(b), Ok(c)) = (w[1].parse(), w[2].parse(), w[3].parse())
        {
            let notes = w[4..].join(" ");
            let s = Stage {
                rows_in: a,
                rows_out: b,
                rejected: c,
                notes,
            };
            t.insert(w[0].to_string(), s);
        }
    }
    t
}

/// The number just before `word` in `text` (`"12 compressed"` → 12).
fn number_before(text: &str, word: &str) -> u64 {
    let w: Vec<&str> = text.split_whitespace().collect();
    let i = w
        .iter()
        .position(|x| x.trim_end_matches([',', ';', ':']) == word)
        .unwrap_or_else(|| panic!("no {word:?} in {text:?}"));
    w[i - 1]
        .parse()
        .unwrap_or_else(|_| panic!("{word:?} in {text:?}"))
}

#[test]
fn demo_script_reports_every_stage_compresses_and_runs_under_bwrap() {
    let probe = Command::new("bwrap")
        .args([
            "--ro-bind",
            "/",
            "/",
            "--unshare-pid",
            "--die-with-parent",
            "true",
        ])
        .status();
    assert!(
        probe.is_ok_and(|s| s.success()),
        "bubblewrap must work here for the demo's sandbox: run scripts/setup.sh"
    );
    let script: Value = serde_json::from_slice(
        &std::fs::read(repo().join("examples/standin-script.json")).unwrap(),
    )
    .unwrap();
    let server = Standin::json(script);
    let data = tmpdir();
    let bin_dir = bin("traj-run").parent().unwrap().to_path_buf();
    let o = Command::new("bash")
        .current_dir(repo())
        .arg("scripts/demo.sh")
        .args(["--fresh", "--run", "t", "--model", "standin", "--base-url"])
        .arg(server.url())
        .env("BIN", &bin_dir)
        .env("DATA", data.path())
        .env_remove("OPENROUTER_API_KEY")
        .env_remove("MAKEFLAGS")
        .env_remove("MFLAGS")
        .output()
        .expect("bash");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "demo.sh failed:\n{out}\n{err}");
    let dir = data.path().join("t");
    let t = stage_table(&out);
    let order = [
        "traj-sample-tools",
        "traj-run",
        "traj-merge",
        "traj-normalize",
        "traj-filter",
        "traj-compress",
    ];
    for s in order {
        assert!(t.contains_key(s), "no {s} row in:\n{out}");
    }

    // Rows chain from stage to stage and add up in each (merge also drops duplicates).
    for w in order.windows(2) {
        assert_eq!(t[w[0]].rows_out, t[w[1]].rows_in, "{} -> {}", w[0], w[1]);
    }
    for s in order {
        let st = &t[s];
        let dup = if s == "traj-merge" {
            number_before(&st.notes, "duplicates")
        } else {
            0
        } as usize;
        assert_eq!(st.rows_in, st.rows_out + st.rejected + dup, "{s}: {out}");
    }

    // Each figure is what the files say.
    let prompts = lines(&repo().join("examples/prompts.jsonl"));
    assert_eq!(t["traj-sample-tools"].rows_in, prompts);
    assert_eq!(
        t["traj-sample-tools"].rows_out,
        lines(&dir.join("tasks.jsonl"))
    );
    let mut records = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let n = p.file_name().unwrap().to_string_lossy().into_owned();
        if n.starts_with("batch_") && n.ends_with(".jsonl") {
            records.extend(read_jsonl(&p));
        }
    }
    assert_eq!(t["traj-run"].rows_out, records.len());
    assert_eq!(t["traj-run"].rejected, lines(&dir.join("failures.jsonl")));
    assert_eq!(
        t["traj-normalize"].rejected,
        lines(&dir.join("normalize_rejects.jsonl"))
    );
    let kept = lines(&dir.join("trajectories.jsonl"));
    assert_eq!(t["traj-filter"].rows_out, kept);
    assert_eq!(t["traj-filter"].rejected, lines(&dir.join("rejects.jsonl")));
    assert!(kept >= prompts - 2, "{kept} of {prompts} kept:\n{out}");
    let compressed_rows = read_jsonl(&dir.join("trajectories_compressed.jsonl"));
    assert_eq!(t["traj-compress"].rows_out, compressed_rows.len());
    assert_eq!(compressed_rows.len(), kept);

    // Compression did work: tokens before and after as the metrics say, fewer after,
    // the two long tasks (access log, pydoc pages) among the compressed rows.
    let m = json_file(&dir.join("compression_metrics.json"));
    let (before, after) = (
        m["tokens"]["total_before"].as_u64().unwrap(),
        m["tokens"]["total_after"].as_u64().unwrap(),
    );
    let notes = &t["traj-compress"].notes;
    assert!(
        notes.contains(&format!("tokens {before} -> {after}")),
        "{notes} vs {m}"
    );
    assert!(after * 10 < before * 8, "{before} -> {after}");
    let n_compressed = number_before(notes, "compressed");
    assert_eq!(
        n_compressed,
        m["summary"]["trajectories_compressed"].as_u64().unwrap()
    );
    assert!(n_compressed >= 2, "{notes}");
    assert_eq!(number_before(notes, "still"), 0, "{notes}");
    assert!(
        t["traj-filter"]
            .notes
            .starts_with(&format!("{before} tokens")),
        "{}",
        t["traj-filter"].notes
    );
    for needle in ["access.log", "cheatsheet.md"] {
        let row = compressed_rows
            .iter()
            .find(|r| {
                r["conversations"][1]["value"]
                    .as_str()
                    .unwrap()
                    .contains(needle)
            })
            .unwrap_or_else(|| panic!("no {needle} row"));
        let text = row["conversations"].to_string();
        assert!(
            text.contains("[CONTEXT SUMMARY]"),
            "{needle} not compressed"
        );
    }
    // The long output came from real commands: the generated log's counts.
    let log = records
        .iter()
        .find(|r| r["prompt"].as_str().unwrap().contains("access.log"))
        .unwrap();
    let tool_text: String = tool_outputs(log).concat();
    assert!(tool_text.contains("46 /checkout"), "{tool_text}");
    assert!(tool_text.len() > 20_000, "{}", tool_text.len());

    // The sandbox: bwrap ran the tools, statistics.json and the output say so.
    let stats = json_file(&dir.join("statistics.json"));
    assert_eq!(stats["sandbox"]["backend"], "bwrap", "{}", stats["sandbox"]);
    assert_eq!(stats["sandbox"]["reused"], true, "{}", stats["sandbox"]);
    assert!(stats["sandbox"].get("warning").is_none());
    assert!(out.contains("\nSandbox: bwrap"), "{out}");
    assert!(t["traj-run"].notes.contains("sandbox: bwrap"), "{out}");

    // The page of the demo's data: named in the output, every compressed row counted,
    // the compressed rows' summaries shown beside the turns they replaced (--before).
    let page = dir.join("report.html");
    assert!(
        out.contains(&format!("Report: {}", page.display())),
        "{out}"
    );
    let html = std::fs::read_to_string(&page).unwrap();
    let open = r#"<script type="application/json" id="data">"#;
    let start = html.find(open).expect("the page's data block") + open.len();
    let end = start + html[start..].find("</script>").unwrap();
    let data: Value = serde_json::from_str(&html[start..end]).unwrap();
    let ov = &data["datasets"][0]["overview"];
    assert_eq!(ov["rows"], compressed_rows.len(), "{ov}");
    let replaced = data["rows"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["t"].as_array().into_iter().flatten())
        .filter(|t| t["r"] == "summary" && t["rep"]["turns"].is_array())
        .count();
    assert_eq!(
        replaced as u64, n_compressed,
        "summaries with their replaced turns"
    );
}

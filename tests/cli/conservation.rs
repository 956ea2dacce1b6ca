//! Conservation across the whole data pipeline: every fixture source of other people's data
//! goes through traj-normalize, traj-filter, traj-merge and traj-compress (at three budgets),
//! and nothing is lost or altered that a stage did not mean to change. Lines in equal lines
//! out plus rejects at every stage, each reject restores its line byte for byte, members a
//! stage does not rewrite keep their exact bytes, and the source's system prompt, reasoning
//! and per-message keys are in the output or counted as dropped with a reason.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::util::*;

/// Every fixture that holds trajectories (not prompts, not fixture generators).
fn sources() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixture(""))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        // Prompts are no trajectories; a group of rollouts (Atropos dumps) is one line in
        // and one row per rollout out by design (tests/cli/rl_data.rs conserves those).
        .filter(|n| {
            n.ends_with(".jsonl") && !n.starts_with("prompts_") && !n.starts_with("atropos_")
        })
        .collect();
    names.sort();
    assert!(names.len() >= 10, "fixture sources: {names:?}");
    names
}

/// What traj-normalize needs to find a source's messages.
fn normalize_args(name: &str) -> &'static [&'static str] {
    match name {
        "swe_agent_demo_trajs.jsonl" => &["--messages-field", "history"],
        _ => &[],
    }
}

/// The non-blank lines of a file, each with its bytes (line ending cut).
fn lines(p: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(p).unwrap_or_default();
    text.split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l).to_string())
        .filter(|l| !l.trim().is_empty())
        .collect()
}

/// The `raw` of every reject, in order.
fn reject_raws(p: &Path) -> Vec<String> {
    if !p.exists() {
        return Vec::new();
    }
    read_jsonl(p)
        .iter()
        .map(|r| {
            let raw = r["raw"]
                .as_str()
                .unwrap_or_else(|| panic!("reject without raw: {r}"));
            raw.strip_suffix('\r').unwrap_or(raw).to_string()
        })
        .collect()
}

/// Runs `bin` in `dir` with `args`, expecting exit 0; returns stderr.
fn stage(dir: &Path, bin: &str, args: &[&str]) -> String {
    let mut c = cmd(bin, dir);
    c.args(args);
    let o = run(c);
    assert_code(&o, 0);
    stderr(&o)
}

/// Checks that `input` = `kept` + `rejected` as multisets of lines, with kept lines either
/// byte-equal to an input line (`same_bytes`) or at least as many as the input minus rejects.
fn check_split(what: &str, input: &[String], out: &[String], rejects: &[String], same: bool) {
    assert_eq!(
        input.len(),
        out.len() + rejects.len(),
        "{what}: {} in, {} out, {} rejected",
        input.len(),
        out.len(),
        rejects.len()
    );
    let mut pool: BTreeMap<&str, usize> = BTreeMap::new();
    for l in input {
        *pool.entry(l.as_str()).or_default() += 1;
    }
    for r in rejects {
        let n = pool.get_mut(r.as_str());
        assert!(
            n.as_ref().is_some_and(|n| **n > 0),
            "{what}: a reject's raw is no input line: {}",
            &r[..r.len().min(200)]
        );
        *n.unwrap() -= 1;
    }
    if same {
        for l in out {
            let n = pool.get_mut(l.as_str());
            assert!(
                n.as_ref().is_some_and(|n| **n > 0),
                "{what}: an output line is no input line: {}",
                &l[..l.len().min(200)]
            );
            *n.unwrap() -= 1;
        }
    }
}

/// Text of a JSON value for "is it in the output" checks: strings as themselves.
fn texts(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) if s.trim().len() >= 8 => out.push(s.trim().to_string()),
        Value::Array(a) => a.iter().for_each(|x| texts(x, out)),
        Value::Object(o) => o.values().for_each(|x| texts(x, out)),
        _ => {}
    }
}

/// The message list of a source row.
fn messages(row: &Value) -> &[Value] {
    for f in ["conversations", "messages", "history"] {
        if let Some(a) = row[f].as_array() {
            return a;
        }
    }
    &[]
}

fn role(m: &Value) -> &str {
    m["role"].as_str().or(m["from"].as_str()).unwrap_or("")
}

/// The source's system text: a system turn, or a top-level `system` column.
fn system_text(row: &Value) -> Option<String> {
    if let Some(s) = row["system"].as_str().filter(|s| !s.trim().is_empty()) {
        return Some(s.trim().to_string());
    }
    messages(row)
        .iter()
        .find(|m| role(m) == "system")
        .and_then(|m| m["content"].as_str().or(m["value"].as_str()))
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().to_string())
}

/// The own text of a system text: a tool prompt (a `<tools>` block) is regenerated from
/// the tools it lists (the first line of it, which `holds` compares, is the same); a tool
/// prompt that lists no tool is the reference's boilerplate of a plain chat, which gets no
/// tool prompt, and holds no text of the source's own.
fn own_text(sys: &str) -> Option<String> {
    let Some(at) = sys.find("<tools>") else {
        return Some(sys.to_string());
    };
    let listed = sys[at + 7..].split("</tools>").next().unwrap_or("").trim();
    if listed.is_empty() || listed == "[]" {
        // The reference's tool prompt of a row without tools: nothing of the source's own.
        return None;
    }
    Some(sys.to_string())
}

/// The reasoning texts a source row carries outside its visible text.
fn reasoning_texts(row: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for m in messages(row) {
        for k in ["reasoning_content", "reasoning", "thinking"] {
            if let Some(s) = m[k].as_str().filter(|s| s.trim().len() >= 8) {
                out.push(s.trim().to_string());
            }
        }
        if let Some(details) = m["reasoning_details"].as_array() {
            for d in details {
                texts(&d["text"], &mut out);
            }
        }
        if let Some(parts) = m["content"].as_array() {
            for p in parts {
                if p["type"] == "reasoning" || p["type"] == "thinking" {
                    texts(&p["text"], &mut out);
                    texts(&p["thinking"], &mut out);
                    texts(&p["reasoning"], &mut out);
                }
            }
        }
    }
    out
}

/// Message keys every shape has a place for; any other per-message key must be kept.
const SHAPE_KEYS: &[&str] = &[
    "role",
    "from",
    "content",
    "value",
    "tool_calls",
    "tool_call_id",
    "tool_call_ids",
    "function_call",
    "name",
    "reasoning_content",
    "reasoning",
    "reasoning_details",
    "thinking",
    "type",
];

/// Does `haystack` (the output row as text, JSON-unescaped values) hold `needle`?
fn holds(out_texts: &[String], needle: &str) -> bool {
    // Compare on the first line of substance: normalization may re-wrap a text, never drop it.
    let probe: String = needle
        .lines()
        .find(|l| l.trim().len() >= 8)
        .unwrap_or(needle)
        .trim()
        .to_string();
    out_texts.iter().any(|t| t.contains(&probe))
}

#[test]
fn every_fixture_source_is_conserved_through_the_pipeline() {
    let dir = tmpdir();
    let d = dir.path();
    let mut report = Vec::new();
    for name in sources() {
        let src = fixture(&name);
        let src_s = src.to_str().unwrap();
        let input = lines(&src);

        // normalize: every line out or rejected; kept rows keep their other members.
        let err = stage(
            d,
            "traj-normalize",
            &[
                &[src_s][..],
                normalize_args(&name),
                &[
                    "-o",
                    "n.jsonl",
                    "--on-error",
                    "skip",
                    "--rejects",
                    "nr.jsonl",
                ],
            ]
            .concat(),
        );
        assert!(
            !lines(&d.join("n.jsonl")).is_empty(),
            "{name}: normalize kept no row: {err}"
        );
        let n_out = lines(&d.join("n.jsonl"));
        let n_rej = reject_raws(&d.join("nr.jsonl"));
        check_split(&format!("{name}: normalize"), &input, &n_out, &n_rej, false);
        // Match each output row to its input row: rejects are taken out in order.
        let mut rejected: BTreeMap<&str, usize> = BTreeMap::new();
        for r in &n_rej {
            *rejected.entry(r.as_str()).or_default() += 1;
        }
        let kept_in: Vec<&String> = input
            .iter()
            .filter(|l| match rejected.get_mut(l.as_str()) {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    false
                }
                _ => true,
            })
            .collect();
        assert_eq!(kept_in.len(), n_out.len(), "{name}");
        for (i, (src_line, out_line)) in kept_in.iter().zip(&n_out).enumerate() {
            let src_row: Value = serde_json::from_str(src_line).unwrap();
            let out_row: Value = serde_json::from_str(out_line).unwrap();
            let src_f = raw_fields(src_line);
            let out_f = raw_fields(out_line);
            for (k, v) in &src_f {
                if [
                    "conversations",
                    "messages",
                    "system",
                    "tools",
                    // Recomputed from the turns, as docs/normalize.md says.
                    "tool_stats",
                    "tool_error_counts",
                ]
                .contains(&k.as_str())
                    || normalize_args(&name).contains(&k.as_str())
                {
                    continue;
                }
                let same = out_f.get(k) == Some(v)
                    || out_f
                        .get(k)
                        .and_then(|o| serde_json::from_str::<Value>(o).ok())
                        == serde_json::from_str::<Value>(v).ok();
                assert!(
                    same,
                    "{name} row {}: member {k} changed or lost by normalize",
                    i + 1
                );
            }
            let mut out_texts = Vec::new();
            texts(&out_row, &mut out_texts);
            if let Some(sys) = system_text(&src_row).and_then(|s| own_text(&s)) {
                assert!(
                    holds(&out_texts, &sys) || err.contains("system_prompt"),
                    "{name} row {}: the system prompt is neither kept nor counted: {}",
                    i + 1,
                    &sys[..sys.len().min(120)]
                );
            }
            for r in reasoning_texts(&src_row) {
                assert!(
                    holds(&out_texts, &r),
                    "{name} row {}: reasoning lost: {}",
                    i + 1,
                    &r[..r.len().min(120)]
                );
            }
            for m in messages(&src_row) {
                for (k, _) in m.as_object().into_iter().flatten() {
                    if SHAPE_KEYS.contains(&k.as_str()) {
                        continue;
                    }
                    assert!(
                        out_line.contains(&format!("\"{k}\"")) || err.contains(k.as_str()),
                        "{name} row {}: per-message key {k} neither kept nor counted",
                        i + 1
                    );
                }
            }
        }

        // filter (default checks): kept lines are input lines, byte for byte.
        stage(
            d,
            "traj-filter",
            &["n.jsonl", "-o", "f.jsonl", "--rejects", "fr.jsonl"],
        );
        let f_out = lines(&d.join("f.jsonl"));
        let f_rej = reject_raws(&d.join("fr.jsonl"));
        check_split(&format!("{name}: filter"), &n_out, &f_out, &f_rej, true);

        // merge: one ordered file, every row once, bytes unchanged.
        stage(d, "traj-merge", &["f.jsonl", "-o", "m.jsonl"]);
        let m_out = lines(&d.join("m.jsonl"));
        assert_eq!(m_out, f_out, "{name}: merge changed or dropped rows");

        // compress at three budgets: rows in = out + rejects; unchanged rows keep their
        // bytes; compressed rows keep every member but the message list and the metrics.
        for budget in ["600", "3000", "15250"] {
            let mut c = cmd("traj-compress", d);
            c.args(["m.jsonl", "-o", "c.jsonl", "--rejects", "cr.jsonl"]);
            c.args(["--target-max-tokens", budget, "--over-budget", "truncate"]);
            let o = run(c);
            assert_code(&o, 0);
            let c_out = lines(&d.join("c.jsonl"));
            let c_rej = reject_raws(&d.join("cr.jsonl"));
            check_split(
                &format!("{name}: compress {budget}"),
                &m_out,
                &c_out,
                &c_rej,
                false,
            );
            let mut unchanged = 0;
            let mut pool: Vec<&String> = m_out.iter().collect();
            for out_line in &c_out {
                if let Some(p) = pool.iter().position(|l| *l == out_line) {
                    pool.remove(p);
                    unchanged += 1;
                    continue;
                }
                let out_f = raw_fields(out_line);
                // Its source: the first remaining input row whose other members all match.
                let found = pool.iter().position(|l| {
                    raw_fields(l).iter().all(|(k, v)| {
                        ["conversations", "messages", "compression_metrics"].contains(&k.as_str())
                            || out_f.get(k) == Some(v)
                    })
                });
                assert!(
                    found.is_some(),
                    "{name}: compress {budget} changed a member it does not own: {}",
                    &out_line[..out_line.len().min(200)]
                );
                let src_row: Value = serde_json::from_str(pool[found.unwrap()]).unwrap();
                let out_row: Value = serde_json::from_str(out_line).unwrap();
                // The head is protected: the system turn is still first, its text kept
                // (or, cut by --over-budget truncate as a last resort, its head kept).
                let first = |r: &Value| r["conversations"][0].clone();
                if first(&src_row)["from"] == "system" {
                    let was = first(&src_row)["value"].as_str().unwrap().to_string();
                    let now = first(&out_row)["value"].as_str().unwrap_or("").to_string();
                    let head: String = match now.find("\n\n[... ") {
                        Some(k) if now.contains("characters truncated by traj-compress") => {
                            now[..k].to_string()
                        }
                        _ => was.chars().take(100).collect(),
                    };
                    assert!(
                        first(&out_row)["from"] == "system"
                            && now.starts_with(&head)
                            && was.starts_with(&head),
                        "{name}: compress {budget} lost the system turn's text"
                    );
                }
                pool.remove(found.unwrap());
            }
            report.push(format!(
                "{name} @{budget}: {} in, {} out ({unchanged} unchanged), {} rejected",
                m_out.len(),
                c_out.len(),
                c_rej.len()
            ));
            for f in ["c.jsonl", "cr.jsonl"] {
                let _ = std::fs::remove_file(d.join(f));
            }
        }
        for f in ["n.jsonl", "nr.jsonl", "f.jsonl", "fr.jsonl", "m.jsonl"] {
            let _ = std::fs::remove_file(d.join(f));
        }
    }
    eprintln!("{}", report.join("\n"));
}

//! No broken envelope leaves traj-normalize (issue 12): on rows written by hermes-agent
//! 0.19.0's own trajectory conversion (`tests/fixtures/hermes_agent_repairs.jsonl`), the
//! repairable tag defects are repaired and counted, the rest is rejected with a reason
//! and the exact line, `--no-repair` rejects instead of repairing, and normalising
//! twice changes nothing. A property test drives random gpt turns (think blocks, empty
//! or not, stray closing tags, white space, unclosed tags) through the same path.

use std::collections::BTreeMap;
use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError};
use serde_json::Value;

use crate::util::*;

const FIXTURE: &str = "hermes_agent_repairs.jsonl";

/// The reasons of a rejects file, and the `raw` line of each, by line number.
fn rejects(p: &Path) -> BTreeMap<u64, (Vec<String>, String)> {
    read_jsonl(p)
        .into_iter()
        .map(|r| {
            let reasons = r["reasons"]
                .as_array()
                .expect("reasons")
                .iter()
                .map(|s| s.as_str().unwrap().to_string())
                .collect();
            let raw = r["raw"].as_str().expect("raw").to_string();
            (r["line"].as_u64().expect("line"), (reasons, raw))
        })
        .collect()
}

/// A reason that is about the tags of a turn (the envelope), not the pairing of calls
/// with responses.
fn is_tag_reason(r: &str) -> bool {
    [
        "without an opening tag",
        "is never closed",
        "inside an unclosed",
        "after a <tool_call>",
        "in a gpt turn",
    ]
    .iter()
    .any(|k| r.contains(k))
}

/// `traj-filter --well-formed IN --rejects R`: the reasons of the rows it drops.
fn well_formed_rejects(dir: &Path, input: &str) -> BTreeMap<u64, (Vec<String>, String)> {
    let r = format!("{input}.wf-rejects.jsonl");
    let mut c = cmd("traj-filter", dir);
    c.args(["--well-formed", input, "--rejects", &r, "-q"]);
    let o = run(c);
    assert!(o.status.success(), "{}", stderr(&o));
    rejects(&dir.join(r))
}

fn normalize(dir: &Path, args: &[&str]) -> std::process::Output {
    let mut c = cmd("traj-normalize", dir);
    c.args(args);
    run(c)
}

#[test]
fn real_hermes_agent_rows_leave_normalize_with_balanced_tags() {
    let d = tmpdir();
    let input = fixture(FIXTURE);
    std::fs::copy(&input, d.path().join("in.jsonl")).unwrap();
    let lines: Vec<String> = std::fs::read_to_string(&input)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();

    let before = well_formed_rejects(d.path(), "in.jsonl");
    let tag_before = before
        .values()
        .filter(|(r, _)| r.iter().any(|x| is_tag_reason(x)))
        .count();
    assert!(
        tag_before * 2 > lines.len(),
        "the fixture should show the defects: {tag_before} of {} rows",
        lines.len()
    );

    let o = normalize(
        d.path(),
        &[
            "in.jsonl",
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
    assert_code(&o, 0);
    let err = stderr(&o);
    assert!(err.contains("envelope repairs ("), "{err}");
    let stats: Value =
        serde_json::from_str(&std::fs::read_to_string(d.path().join("stats.json")).unwrap())
            .unwrap();
    for kind in ["stray_closing_tag", "duplicate_empty_think"] {
        assert!(stats["repaired"][kind].as_u64().unwrap() > 0, "{stats}");
    }

    // Rejected rows: a reason each, and the exact original line.
    let rej = rejects(&d.path().join("rej.jsonl"));
    assert!(
        !rej.is_empty(),
        "unclosed tags and non-JSON calls are rejected"
    );
    for (line, (reasons, raw)) in &rej {
        assert_eq!(
            raw,
            &lines[*line as usize - 1],
            "line {line} restored exactly"
        );
        assert!(
            reasons.iter().all(|r| r.contains("not repairable without guessing")
                || r.contains("is not JSON")),
            "line {line}: {reasons:?}"
        );
    }
    let out = read_jsonl(&d.path().join("out.jsonl"));
    assert_eq!(
        out.len() + rej.len(),
        lines.len(),
        "every row written or rejected"
    );
    assert_eq!(stats["written"].as_u64(), Some(out.len() as u64));

    // After traj-normalize, --well-formed keeps every row.
    let after = well_formed_rejects(d.path(), "out.jsonl");
    assert!(after.is_empty(), "{after:?}");
    eprintln!(
        "--well-formed drops {} of {} rows before traj-normalize ({tag_before} for their tags), \
         {} of {} after ({} rejected by traj-normalize)",
        before.len(),
        lines.len(),
        after.len(),
        out.len(),
        rej.len()
    );
}

#[test]
fn no_repair_rejects_what_would_be_repaired_with_a_reason() {
    let d = tmpdir();
    std::fs::copy(fixture(FIXTURE), d.path().join("in.jsonl")).unwrap();
    let args = ["in.jsonl", "--on-error", "skip", "--rejects"];
    let o = normalize(
        d.path(),
        &[&args[..], &["rej.jsonl", "-o", "fixed.jsonl"]].concat(),
    );
    assert_code(&o, 0);
    let o = normalize(
        d.path(),
        &[
            &args[..],
            &["strict-rej.jsonl", "-o", "strict.jsonl", "--no-repair"],
        ]
        .concat(),
    );
    assert_code(&o, 0);
    assert!(!stderr(&o).contains("envelope repairs"), "{}", stderr(&o));
    let fixed = rejects(&d.path().join("rej.jsonl"));
    let strict = rejects(&d.path().join("strict-rej.jsonl"));
    let refused: Vec<_> = strict
        .iter()
        .filter(|(_, (r, _))| {
            r.iter()
                .any(|x| x.contains("not repaired under --no-repair"))
        })
        .collect();
    // Some of them are written by default (repaired); the others hold a defect that
    // no repair fixes as well.
    assert!(refused.iter().any(|(line, _)| !fixed.contains_key(line)));
    // Every row rejected by default is rejected under --no-repair too, and the rows
    // written under --no-repair are written the same way by default.
    assert!(fixed.keys().all(|k| strict.contains_key(k)));
    let by_index = |p: &str| -> BTreeMap<i64, Value> {
        read_jsonl(&d.path().join(p))
            .into_iter()
            .map(|r| (r["prompt_index"].as_i64().unwrap(), r))
            .collect()
    };
    let (all, kept) = (by_index("fixed.jsonl"), by_index("strict.jsonl"));
    assert!(!kept.is_empty());
    for (k, row) in &kept {
        assert_eq!(Some(row), all.get(k), "prompt_index {k}");
    }
}

#[test]
fn normalising_repaired_rows_again_changes_nothing() {
    let d = tmpdir();
    std::fs::copy(fixture(FIXTURE), d.path().join("in.jsonl")).unwrap();
    let o = normalize(
        d.path(),
        &[
            "in.jsonl",
            "-o",
            "once.jsonl",
            "--on-error",
            "skip",
            "--rejects",
            "r.jsonl",
        ],
    );
    assert_code(&o, 0);
    let o = normalize(
        d.path(),
        &[
            "once.jsonl",
            "-o",
            "twice.jsonl",
            "--stats",
            "s.json",
            "--no-repair",
        ],
    );
    assert_code(&o, 0);
    let once = std::fs::read(d.path().join("once.jsonl")).unwrap();
    assert!(!once.is_empty());
    assert_eq!(once, std::fs::read(d.path().join("twice.jsonl")).unwrap());
    let s: Value =
        serde_json::from_str(&std::fs::read_to_string(d.path().join("s.json")).unwrap()).unwrap();
    assert_eq!(s["bad"], 0);
}

/// A piece of a gpt turn's text.
fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z .,]{1,12}",
        2 => Just("<think>\n</think>\n".to_string()),
        2 => "[a-z ]{1,10}".prop_map(|r| format!("<think>\n{r}\n</think>\n")),
        1 => Just("<think>\n\n</think>\n\n".to_string()),
        2 => Just("</think>".to_string()),
        1 => Just("\n</think>\n\n".to_string()),
        1 => Just("</tool_call>".to_string()),
        1 => Just("</tool_response>".to_string()),
        1 => Just("<think>".to_string()),
        1 => Just("<tool_call>".to_string()),
        1 => "[ \n]{1,3}",
    ]
}

fn gpt_text() -> impl Strategy<Value = String> {
    prop::collection::vec(piece(), 1..7).prop_map(|ps| ps.concat())
}

fn case_config() -> Config {
    Config {
        cases: 24,
        max_shrink_iters: 64,
        failure_persistence: None,
        ..Config::default()
    }
}

fn random_rows(texts: &[String]) -> String {
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let row = serde_json::json!({
                "conversations": [
                    {"from": "human", "value": format!("question {i}")},
                    {"from": "gpt", "value": t},
                ],
                "prompt_index": i,
            });
            format!("{row}\n")
        })
        .collect()
}

fn random_envelopes(texts: &[String]) -> Result<(), TestCaseError> {
    let d = tmpdir();
    let input = random_rows(texts);
    std::fs::write(d.path().join("in.jsonl"), &input).unwrap();
    let lines: Vec<&str> = input.lines().collect();
    let mut c = cmd("traj-normalize", d.path());
    c.args([
        "in.jsonl",
        "-o",
        "once.jsonl",
        "--on-error",
        "skip",
        "--rejects",
        "r.jsonl",
        "-q",
    ]);
    let o = run(c);
    prop_assert!(o.status.success(), "{}", stderr(&o));
    let rej = rejects(&d.path().join("r.jsonl"));
    for (line, (_, raw)) in &rej {
        prop_assert_eq!(raw.as_str(), lines[*line as usize - 1]);
    }
    let out = read_jsonl(&d.path().join("once.jsonl"));
    prop_assert_eq!(out.len() + rej.len(), lines.len());
    let wf = well_formed_rejects(d.path(), "once.jsonl");
    prop_assert!(wf.is_empty(), "--well-formed after normalize: {:?}", wf);
    let mut c = cmd("traj-normalize", d.path());
    c.args(["once.jsonl", "-o", "twice.jsonl", "--no-repair", "-q"]);
    let o = run(c);
    prop_assert!(o.status.success(), "{}", stderr(&o));
    prop_assert_eq!(
        std::fs::read(d.path().join("once.jsonl")).unwrap(),
        std::fs::read(d.path().join("twice.jsonl")).unwrap(),
        "normalize(normalize(x)) == normalize(x)"
    );
    Ok(())
}

proptest! {
    #![proptest_config(case_config())]

    /// Random gpt turns are repaired into balanced tags or rejected with the exact line;
    /// the repaired rows pass --well-formed and are a fixed point of traj-normalize.
    #[test]
    fn random_envelopes_are_repaired_or_rejected(texts in prop::collection::vec(gpt_text(), 1..10)) {
        random_envelopes(&texts)?;
    }
}

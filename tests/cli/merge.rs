//! traj-merge: shard split and merged back, run directories, duplicates, tombstones,
//! bad lines, spilling to disk.

use std::path::Path;

use serde_json::{Value, json};

use crate::util::*;

const HERMES: &str = "hermes_reason_tool_use_50.jsonl";

fn merge(dir: &Path, args: &[&str]) -> std::process::Output {
    let mut c = cmd("traj-merge", dir);
    c.args(args);
    run(c)
}

fn write(dir: &Path, name: &str, lines: &[String]) {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.join(name), text).unwrap();
}

fn rowj(idx: Option<u64>, prompt: &str, tag: &str) -> String {
    let mut v = json!({"conversations": [
        {"from": "system", "value": "s"},
        {"from": "human", "value": prompt},
        {"from": "gpt", "value": format!("<think>\n{tag}\n</think>\nok")}]});
    if let Some(i) = idx {
        v = json!({"prompt_index": i, "conversations": v["conversations"], "tag": tag});
    } else {
        v["tag"] = json!(tag);
    }
    v.to_string()
}

#[test]
fn shard_split_in_two_and_merged_back_is_the_original() {
    let d = tmpdir();
    let original = std::fs::read_to_string(fixture(HERMES)).unwrap();
    let lines: Vec<String> = original.lines().map(String::from).collect();
    // two shards, interleaved and each in reverse order
    let a: Vec<String> = lines.iter().step_by(2).rev().cloned().collect();
    let b: Vec<String> = lines.iter().skip(1).step_by(2).rev().cloned().collect();
    write(d.path(), "a.jsonl", &a);
    write(d.path(), "b.jsonl", &b);
    for extra in [
        &[][..],
        &["--buffer-size", "1"][..],
        &["--buffer-size", "2K"][..], // rows of plain files cost ~100 bytes each
    ] {
        let mut args = vec!["b.jsonl", "a.jsonl", "-o", "merged.jsonl"];
        args.extend_from_slice(extra);
        let o = merge(d.path(), &args);
        assert_code(&o, 0);
        let merged = std::fs::read_to_string(d.path().join("merged.jsonl")).unwrap();
        assert!(merged == original, "merge of the split differs ({extra:?})");
        assert!(
            stderr(&o).contains("2 files, 50 rows read, 50 written, 0 duplicates"),
            "{}",
            stderr(&o)
        );
        if !extra.is_empty() {
            assert!(stderr(&o).contains("spill runs"), "{}", stderr(&o));
        }
    }
    // merging the original with one shard again: each row once
    let o = merge(
        d.path(),
        &[
            &fixture(HERMES).display().to_string(),
            "a.jsonl",
            "--keep",
            "first",
        ],
    );
    assert_code(&o, 0);
    assert!(stdout(&o) == original);
    assert!(stderr(&o).contains(
        "25 duplicates dropped (kept the first of each task (task_uid, else prompt_index and rollout_index))"
    ));
}

#[test]
fn run_directory_reads_batches_in_numeric_order_and_keeps_last() {
    let d = tmpdir();
    let run_dir = d.path().join("run");
    std::fs::create_dir(&run_dir).unwrap();
    write(
        &run_dir,
        "batch_2.jsonl",
        &[rowj(Some(3), "p3", "old"), rowj(Some(1), "p1", "b2")],
    );
    write(
        &run_dir,
        "batch_10.jsonl",
        &[rowj(Some(3), "p3", "new"), rowj(Some(0), "p0", "b10")],
    );
    write(&run_dir, "batch_1.jsonl", &[rowj(Some(2), "p2", "b1")]);
    // not a batch file: ignored
    write(
        &run_dir,
        "trajectories.jsonl",
        &[rowj(Some(3), "p3", "stale")],
    );
    let o = merge(
        d.path(),
        &[
            "run",
            "-o",
            "run/trajectories.jsonl",
            "--rejects",
            "rej.jsonl",
        ],
    );
    assert_code(&o, 0);
    let out = read_jsonl(&run_dir.join("trajectories.jsonl"));
    let tags: Vec<&str> = out.iter().map(|r| r["tag"].as_str().unwrap()).collect();
    // batch_10 comes after batch_2, so its row for index 3 is the last one
    assert_eq!(tags, ["b10", "b2", "b1", "new"]);
    let idx: Vec<u64> = out
        .iter()
        .map(|r| r["prompt_index"].as_u64().unwrap())
        .collect();
    assert_eq!(idx, [0, 1, 2, 3]);
    let rej = read_jsonl(&d.path().join("rej.jsonl"));
    assert_eq!(rej.len(), 1);
    assert_eq!(rej[0]["record"]["tag"], "old");
    let reason = rej[0]["reasons"][0].as_str().unwrap();
    assert!(
        reason.starts_with("duplicate: prompt_index 3 (kept ")
            && reason.ends_with("batch_10.jsonl:1)"),
        "{reason}"
    );
}

#[test]
fn same_prompt_under_two_indices_keeps_both_and_tombstones_never_pass() {
    let d = tmpdir();
    let tomb =
        json!({"prompt_index": 7, "discarded": "no_reasoning", "prompt": "same"}).to_string();
    write(
        d.path(),
        "in.jsonl",
        &[
            rowj(Some(5), "same", "a"),
            tomb.clone(),
            rowj(Some(4), "same", "b"),
        ],
    );
    let o = merge(d.path(), &["in.jsonl", "--rejects", "rej.jsonl"]);
    assert_code(&o, 0);
    let out = parse_jsonl(&stdout(&o));
    let tags: Vec<&str> = out.iter().map(|r| r["tag"].as_str().unwrap()).collect();
    assert_eq!(tags, ["b", "a"]);
    assert!(out.iter().all(|r| r.get("discarded").is_none()));
    let rej = read_jsonl(&d.path().join("rej.jsonl"));
    assert_eq!(rej.len(), 1);
    assert_eq!(
        rej[0]["reasons"],
        json!(["tombstone: discarded \"no_reasoning\""])
    );
    assert_eq!(rej[0]["line"], 2);
    assert!(stderr(&o).contains("1 discarded rows dropped (tombstones)"));
    // keyed on the prompt text instead, the two become duplicates
    let o = merge(d.path(), &["in.jsonl", "--key", "prompt"]);
    assert_code(&o, 0);
    let out = parse_jsonl(&stdout(&o));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0]["tag"], "b");
}

#[test]
fn rows_without_index_are_never_deduplicated_unless_key_asks() {
    let d = tmpdir();
    write(
        d.path(),
        "in.jsonl",
        &[
            rowj(None, "zeta", "z1"),
            rowj(None, "alpha", "a1"),
            rowj(Some(1), "one", "i1"),
            rowj(None, "  zeta ", "z2"),
            rowj(None, "mid", "m"),
            rowj(None, "mid", "m"),
        ],
    );
    let tags = |o: &std::process::Output| -> Vec<String> {
        parse_jsonl(&stdout(o))
            .iter()
            .map(|r| r["tag"].as_str().unwrap().to_owned())
            .collect()
    };
    for buf in ["64M", "1"] {
        // default key prompt_index: rows without it are all kept, in input order,
        // even the byte-identical pair
        let o = merge(d.path(), &["in.jsonl", "--buffer-size", buf]);
        assert_code(&o, 0);
        assert_eq!(tags(&o), ["i1", "z1", "a1", "z2", "m", "m"]);
        let err = stderr(&o);
        assert!(err.contains("0 duplicates dropped"), "{err}");
        assert!(
            err.contains("5 rows without a task_uid or prompt_index key"),
            "{err}"
        );

        // --key prompt: the first human turn (trimmed) identifies a row; the winner
        // of "zeta" is its last row, placed where that row was read
        let o = merge(
            d.path(),
            &[
                "in.jsonl",
                "--buffer-size",
                buf,
                "--key",
                "prompt",
                "--rejects",
                "rej.jsonl",
            ],
        );
        assert_code(&o, 0);
        assert_eq!(tags(&o), ["i1", "a1", "z2", "m"]);
        assert!(
            stderr(&o).contains("2 duplicates dropped"),
            "{}",
            stderr(&o)
        );
        let rej = read_jsonl(&d.path().join("rej.jsonl"));
        assert_eq!(rej.len(), 2);
        assert!(
            rej[0]["reasons"][0]
                .as_str()
                .unwrap()
                .starts_with("duplicate: prompt "),
            "{rej:?}"
        );
        assert!(
            rej[0]["reasons"][0]
                .as_str()
                .unwrap()
                .ends_with("in.jsonl:4)")
        );

        // --key line: only the byte-identical pair
        let o = merge(
            d.path(),
            &["in.jsonl", "--buffer-size", buf, "--key", "line"],
        );
        assert_code(&o, 0);
        assert_eq!(tags(&o), ["i1", "z1", "a1", "z2", "m"]);
        let err = stderr(&o);
        assert!(err.contains("1 duplicates dropped"), "{err}");
        assert!(err.contains("(not kept: use --rejects FILE"), "{err}");
    }
}

#[test]
fn bad_lines_fail_strict_and_leave_no_output_file() {
    let d = tmpdir();
    write(
        d.path(),
        "in.jsonl",
        &[
            rowj(Some(1), "p", "a"),
            "{\"prompt_index\": 2, ".into(),
            "[3]".into(),
        ],
    );
    let o = merge(d.path(), &["in.jsonl", "-o", "out.jsonl"]);
    assert_code(&o, 1);
    assert!(
        stderr(&o).contains("in.jsonl:2: invalid JSON"),
        "{}",
        stderr(&o)
    );
    assert!(
        !d.path().join("out.jsonl").exists(),
        "no half-written output"
    );
    let names: Vec<_> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "no temp file left: {names:?}");

    let o = merge(
        d.path(),
        &[
            "in.jsonl",
            "-o",
            "out.jsonl",
            "--on-error",
            "skip",
            "--rejects",
            "rej.jsonl",
        ],
    );
    assert_code(&o, 0);
    assert_eq!(read_jsonl(&d.path().join("out.jsonl")).len(), 1);
    let rej = read_jsonl(&d.path().join("rej.jsonl"));
    assert_eq!(rej.len(), 2);
    assert_eq!(
        rej[1]["reasons"][0],
        "expected a JSON object, found an array"
    );
    // skipping without a rejects file loses data: exit 1
    let o = merge(d.path(), &["in.jsonl", "--on-error", "skip"]);
    assert_code(&o, 1);
}

#[test]
fn real_glaive_rows_without_index_merge_by_prompt_only_when_asked() {
    let d = tmpdir();
    let src = fixture("llamafactory_glaive_toolcall_en.jsonl");
    let text = std::fs::read_to_string(&src).unwrap();
    let rows: Vec<Value> = parse_jsonl(&text);
    // the first human turn identifies a row; count distinct ones independently
    let mut seen = std::collections::HashSet::new();
    for r in &rows {
        let first = r["conversations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["from"] == "human")
            .unwrap();
        seen.insert(first["value"].as_str().unwrap().trim().to_owned());
    }
    assert!(seen.len() < rows.len(), "the fixture repeats prompts");
    let p = src.display().to_string();
    // default: every row of both copies kept, byte for byte, in input order
    let o = merge(d.path(), &[&p, &p]);
    assert_code(&o, 0);
    let doubled: String = format!("{text}{text}");
    let want: Vec<&str> = doubled.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(stdout(&o).lines().collect::<Vec<_>>(), want);
    // --key line: one copy of each distinct line (the file repeats some), where it
    // first came
    let o = merge(d.path(), &[&p, &p, "--key", "line", "--keep", "first"]);
    assert_code(&o, 0);
    let mut lines_seen = std::collections::HashSet::new();
    let once: Vec<&str> = want
        .iter()
        .copied()
        .filter(|l| lines_seen.insert(*l))
        .collect();
    assert!(once.len() < rows.len(), "the fixture repeats lines");
    assert_eq!(stdout(&o).lines().collect::<Vec<_>>(), once);
    assert!(
        stderr(&o).contains(&format!("{} duplicates dropped", want.len() - once.len())),
        "{}",
        stderr(&o)
    );
    // --key prompt: one row per distinct first human turn
    let o = merge(d.path(), &[&p, &p, "--key", "prompt"]);
    assert_code(&o, 0);
    let out = parse_jsonl(&stdout(&o));
    assert_eq!(out.len(), seen.len());
}

#[test]
fn sample_is_a_seeded_subset_independent_of_input_order() {
    let d = tmpdir();
    let rows: Vec<String> = (0..60)
        .map(|i| rowj(Some(i), &format!("p{i}"), "t"))
        .collect();
    let mut reversed = rows.clone();
    reversed.reverse();
    write(d.path(), "a.jsonl", &rows);
    write(d.path(), "b.jsonl", &reversed);
    let pick = |file: &str, seed: &str| -> Vec<u64> {
        let o = merge(d.path(), &["--sample", "10", "--seed", seed, file]);
        assert_code(&o, 0);
        assert!(stderr(&o).contains("50 rows left out"), "{}", stderr(&o));
        parse_jsonl(&stdout(&o))
            .iter()
            .map(|r| r["prompt_index"].as_u64().unwrap())
            .collect()
    };
    let a = pick("a.jsonl", "7");
    assert_eq!(a.len(), 10);
    assert!(
        a.windows(2).all(|w| w[0] < w[1]),
        "sorted by prompt_index: {a:?}"
    );
    assert_eq!(
        pick("b.jsonl", "7"),
        a,
        "the same sample whatever the input order"
    );
    assert_ne!(pick("a.jsonl", "8"), a, "another seed, another sample");
    let o = merge(d.path(), &["--sample", "100", "a.jsonl"]);
    assert_eq!(
        parse_jsonl(&stdout(&o)).len(),
        60,
        "a sample larger than the input keeps all"
    );
}

/// `--sample N` writes exactly N rows when N are there, even when keyless rows repeat
/// (identical rows share a hash, and each is a row of the sample), and duplicates of a
/// key take one place.
#[test]
fn sample_counts_identical_keyless_rows_one_by_one() {
    let d = tmpdir();
    let mut rows: Vec<String> = Vec::new();
    for i in 0..40 {
        rows.push(json!({"x": i % 4}).to_string()); // 4 distinct lines, 10 times each
        rows.push(rowj(Some(i), &format!("p{i}"), "t"));
        rows.push(rowj(Some(i), &format!("p{i}"), "t")); // a duplicate of the key
    }
    write(d.path(), "a.jsonl", &rows);
    for (n, seed) in [
        (1, "1"),
        (1, "2"),
        (7, "3"),
        (55, "4"),
        (79, "5"),
        (80, "6"),
    ] {
        let o = merge(
            d.path(),
            &["--sample", &n.to_string(), "--seed", seed, "a.jsonl"],
        );
        assert_code(&o, 0);
        assert_eq!(
            parse_jsonl(&stdout(&o)).len(),
            n,
            "--sample {n} --seed {seed}"
        );
    }
    let o = merge(d.path(), &["--sample", "81", "a.jsonl"]);
    assert_eq!(parse_jsonl(&stdout(&o)).len(), 80, "40 keyless + 40 keys");
}

/// Keys are values: `prompt_index` 2 and 2.0 (pandas writes an integer column that holds
/// a NaN as floats) are one task, and sort as one; an empty or blank prompt identifies
/// nothing, so `--key prompt` never joins such rows.
#[test]
fn keys_are_values_and_blank_prompts_are_no_key() {
    let d = tmpdir();
    write(
        d.path(),
        "s1.jsonl",
        &[
            r#"{"prompt_index":2,"v":"orig"}"#.to_string(),
            r#"{"prompt_index":1,"v":"x"}"#.to_string(),
        ],
    );
    write(
        d.path(),
        "s2.jsonl",
        &[r#"{"prompt_index":2.0,"v":"pandas"}"#.to_string()],
    );
    let o = merge(d.path(), &["s1.jsonl", "s2.jsonl"]);
    assert_code(&o, 0);
    let v: Vec<Value> = parse_jsonl(&stdout(&o))
        .iter()
        .map(|r| r["v"].clone())
        .collect();
    assert_eq!(
        v,
        [json!("x"), json!("pandas")],
        "2.0 is the same task as 2 (the last wins)"
    );
    assert_stderr_has(&o, "1 duplicates");
    let rows = [
        r#"{"id":1,"messages":[{"role":"system","content":"A"},{"role":"user","content":""},{"role":"assistant","content":"a"}]}"#,
        r#"{"id":2,"messages":[{"role":"system","content":"B"},{"role":"user","content":""},{"role":"assistant","content":"b"}]}"#,
        r#"{"id":3,"conversations":[{"from":"human","value":"   "},{"from":"gpt","value":"g"}]}"#,
        r#"{"id":4,"prompt":"same"}"#,
        r#"{"id":5,"prompt":" same "}"#,
    ];
    write(d.path(), "kp.jsonl", &rows.map(String::from));
    let o = merge(d.path(), &["--key", "prompt", "kp.jsonl"]);
    assert_code(&o, 0);
    let ids: Vec<Value> = parse_jsonl(&stdout(&o))
        .iter()
        .map(|r| r["id"].clone())
        .collect();
    assert_eq!(ids, [json!(1), json!(2), json!(3), json!(5)]);
}

/// Whole numbers past i64 (u64 ids, 26-digit ids) were put after every other row, in
/// input order; they sort by value now, in memory and through spill runs alike.
#[test]
fn indices_past_i64_sort_by_value() {
    let d = tmpdir();
    let idx = [
        "1e19",
        "5",
        "18446744073709551615",
        "10000000000000000000000000",
        "-3",
        "9223372036854775807",
        "-9223372036854775809",
    ];
    let rows: Vec<String> = idx
        .iter()
        .map(|i| format!(r#"{{"prompt_index":{i},"pad":"{}"}}"#, "x".repeat(64)))
        .collect();
    write(d.path(), "big.jsonl", &rows);
    let want = [
        "-9223372036854775809",
        "-3",
        "5",
        "9223372036854775807",
        "1e19",
        "18446744073709551615",
        "10000000000000000000000000",
    ];
    for buffer in ["64M", "1"] {
        let o = merge(d.path(), &["--buffer-size", buffer, "big.jsonl"]);
        assert_code(&o, 0);
        let got: Vec<String> = stdout(&o)
            .lines()
            .map(|l| {
                let start = l.find(':').unwrap() + 1;
                l[start..l.find(",\"pad\"").unwrap()].to_string()
            })
            .collect();
        assert_eq!(got, want, "--buffer-size {buffer}");
    }
}

#[test]
fn shard_flag_is_refused() {
    let d = tmpdir();
    write(d.path(), "a.jsonl", &[rowj(Some(0), "p", "t")]);
    assert_code(&merge(d.path(), &["--shard", "0/2", "a.jsonl"]), 2);
}

#[test]
fn default_key_is_the_task_uid_else_the_prompt_index() {
    let d = tmpdir();
    let with_uid = |uid: &str, idx: u64, tag: &str| {
        json!({"prompt_index": idx, "task_uid": uid, "prompt": "p", "tag": tag}).to_string()
    };
    // Two run directories of two datasets: both have a task at index 0 and 1, other
    // tasks; run b holds a re-run of its task u3 (the last row wins).
    let a = d.path().join("a");
    let b = d.path().join("b");
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    write(
        &a,
        "batch_0.jsonl",
        &[with_uid("u1:0:0", 0, "a0"), with_uid("u2:0:0", 1, "a1")],
    );
    write(
        &b,
        "batch_0.jsonl",
        &[with_uid("u3:0:0", 0, "b0-old"), with_uid("u4:0:0", 1, "b1")],
    );
    let discard = json!({"prompt_index": 2, "discarded": "no_reasoning", "prompt": "q"});
    write(
        &b,
        "batch_1.jsonl",
        &[with_uid("u3:0:0", 0, "b0"), discard.to_string()],
    );
    // Rows of an older traj-run (no task_uid): keyed by prompt_index, never by a uid.
    write(
        d.path(),
        "old.jsonl",
        &[rowj(Some(0), "x", "old0"), rowj(Some(0), "x", "old0-rerun")],
    );
    let o = merge(d.path(), &["a", "b", "old.jsonl", "--rejects", "rej.jsonl"]);
    assert_code(&o, 0);
    let tags: Vec<String> = parse_jsonl(&stdout(&o))
        .iter()
        .map(|r| r["tag"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(tags, ["a0", "b0", "old0-rerun", "a1", "b1"]);
    let err = stderr(&o);
    assert!(
        err.contains(
            "2 duplicates dropped (kept the last of each task (task_uid, else prompt_index and rollout_index))"
        ) && err.contains("1 discarded rows dropped (tombstones)"),
        "{err}"
    );
    let rej = read_jsonl(&d.path().join("rej.jsonl"));
    let reasons: Vec<&str> = rej
        .iter()
        .map(|r| r["reasons"][0].as_str().unwrap())
        .collect();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert_eq!(reasons[0], "tombstone: discarded \"no_reasoning\"");
    assert!(
        reasons[1].starts_with("duplicate: task_uid \"u3:0:0\" (kept ")
            && reasons[1].ends_with("batch_1.jsonl:1)"),
        "{reasons:?}"
    );
    assert!(
        reasons[2].starts_with("duplicate: prompt_index 0 (kept "),
        "{reasons:?}"
    );
    // The discarded row is in the rejects file as it was, never in the output.
    assert_eq!(rej[0]["record"], discard);
    // Keyed on prompt_index alone, the tasks of the two runs would clobber each other.
    let o = merge(d.path(), &["a", "b", "--key", "prompt_index"]);
    assert_code(&o, 0);
    assert_eq!(parse_jsonl(&stdout(&o)).len(), 2);
    assert!(stderr(&o).contains("3 duplicates dropped (kept the last of each prompt_index)"));
}

/// Without a `task_uid`, a row's task is its `prompt_index` and its rollout its
/// `rollout_index`: rollouts of one prompt are rows of their own (a filter run in shards
/// and merged back keeps them all). A `--columns core` row's run members are read from
/// its `metadata` string; an empty `task_uid` names no task.
#[test]
fn rollouts_core_rows_and_empty_uids_are_keyed_as_filter_groups_them() {
    let d = tmpdir();
    let mut rows = Vec::new();
    for p in [1, 0] {
        for r in 0..2 {
            rows.push(
                json!({"prompt_index": p, "rollout_index": r, "tag": format!("p{p}r{r}")})
                    .to_string(),
            );
        }
    }
    rows.push(json!({"prompt_index": 1, "rollout_index": 1.0, "tag": "p1r1-rerun"}).to_string());
    let meta = json!({"prompt_index": 0, "rollout_index": 3}).to_string();
    rows.push(json!({"metadata": meta, "tag": "core-p0r3"}).to_string());
    rows.push(json!({"task_uid": "", "tag": "blank-a"}).to_string());
    rows.push(json!({"task_uid": "", "tag": "blank-b"}).to_string());
    write(d.path(), "in.jsonl", &rows);
    let o = merge(d.path(), &["in.jsonl", "--rejects", "rej.jsonl"]);
    assert_code(&o, 0);
    let tags: Vec<String> = parse_jsonl(&stdout(&o))
        .iter()
        .map(|r| r["tag"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        tags,
        [
            "p0r0",
            "p0r1",
            "core-p0r3",
            "p1r0",
            "p1r1-rerun",
            "blank-a",
            "blank-b"
        ]
    );
    let rej = read_jsonl(&d.path().join("rej.jsonl"));
    assert_eq!(rej.len(), 1);
    assert!(
        rej[0]["reasons"][0]
            .as_str()
            .unwrap()
            .starts_with("duplicate: prompt_index 1 rollout_index 1 (kept "),
        "{}",
        rej[0]["reasons"]
    );
    // Sharded filter, merged back: every rollout is there once.
    let mut parts = Vec::new();
    for i in 0..2 {
        let name = format!("part-{i}.jsonl");
        let s = format!("{i}/2");
        let o = run_in(
            "traj-filter",
            d.path(),
            &["in.jsonl", "--shard", &s, "-o", &name],
        );
        assert_code(&o, 0);
        parts.push(name);
    }
    let mut args: Vec<&str> = parts.iter().map(String::as_str).collect();
    args.extend(["-q"]);
    let o = merge(d.path(), &args);
    assert_code(&o, 0);
    assert_eq!(parse_jsonl(&stdout(&o)).len(), 7);
}

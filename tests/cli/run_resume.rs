//! traj-run `--resume` and what identifies a task: a run killed with SIGKILL and resumed
//! with its dataset reversed and grown by duplicates, a `prompt_index` claimed twice,
//! and run directories written by hermes-agent's batch runner (0.19.0, and the newest
//! 0.21.x shape with discarded rows), each resumed to run only what is missing and
//! merged by `traj-merge` without losing a task.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::standin::Standin;
use crate::util::*;

/// traj-run against `s` in `run_dir`, fast retries, quiet.
fn traj_run(dir: &Path, s: &Standin, run_dir: &str) -> Command {
    let mut c = standin_run(dir, &s.url(), run_dir);
    c.args(["--toolsets", "file", "-q"]);
    c
}

fn write_rows(path: &Path, rows: &[Value]) {
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(path, text).unwrap();
}

/// The batch files of `run`, by number.
fn batch_files(run: &Path) -> BTreeMap<u64, Vec<u8>> {
    let mut out = BTreeMap::new();
    let Ok(rd) = std::fs::read_dir(run) else {
        return out;
    };
    for e in rd {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        if let Some(n) = name
            .strip_prefix("batch_")
            .and_then(|r| r.strip_suffix(".jsonl"))
            .and_then(|n| n.parse().ok())
        {
            out.insert(n, std::fs::read(&p).unwrap());
        }
    }
    out
}

/// The user message of a chat request the stand-in got: the prompt it ran.
fn user_prompt(request: &Value) -> String {
    let m = request["messages"].as_array().unwrap();
    let user = m.iter().find(|m| m["role"] == "user").unwrap();
    user["content"].as_str().unwrap().to_string()
}

/// Every line of every batch file, in batch order.
fn rows(run: &Path) -> Vec<Value> {
    batch_files(run)
        .values()
        .flat_map(|b| parse_jsonl(std::str::from_utf8(b).unwrap()))
        .collect()
}

/// Complete lines in the batch files so far.
fn lines_so_far(run: &Path) -> usize {
    batch_files(run)
        .values()
        .map(|b| b.iter().filter(|c| **c == b'\n').count())
        .sum()
}

/// The checkpoint and statistics count what the files hold: lines per batch file, one
/// entry per batch file, the indices of the rows (discard rows included, as the
/// reference marks them completed), the records and the discard rows.
fn assert_counts_match_files(run: &Path) {
    let cp = read_json(&run.join("checkpoint.json"));
    let files = batch_files(run);
    let stats = cp["batch_stats"].as_object().unwrap();
    assert_eq!(stats.len(), files.len(), "one entry per batch file");
    let mut discarded = 0;
    for (n, bytes) in &files {
        let lines = parse_jsonl(std::str::from_utf8(bytes).unwrap());
        let bs = &stats[&n.to_string()];
        assert_eq!(bs["processed"], lines.len(), "batch {n}");
        let d = lines
            .iter()
            .filter(|r| r.get("discarded").is_some())
            .count();
        assert_eq!(bs["discarded_no_reasoning"], d, "batch {n}");
        discarded += d;
    }
    let all = rows(run);
    let want: BTreeSet<u64> = all
        .iter()
        .map(|r| r["prompt_index"].as_u64().unwrap())
        .collect();
    let got: BTreeSet<u64> = cp["completed_prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(got, want);
    let st = read_json(&run.join("statistics.json"));
    assert_eq!(st["records"], all.len() - discarded);
    assert_eq!(st["discarded_no_reasoning"], discarded);
    assert_eq!(st["total_batches"], files.len());
}

#[test]
fn kill_9_then_resume_reversed_with_duplicates_gives_every_task_one_record() {
    let d = tmpdir();
    let s = Standin::json(json!({"latency_ms": 120, "record": false,
        "default": {"content": "done {prompt}", "reasoning": "r"}}));
    let tasks = d.path().join("tasks.jsonl");
    let mut prompts: Vec<Value> = (0..20)
        .map(|i| json!({"prompt": format!("task {i}")}))
        .collect();
    write_rows(&tasks, &prompts);
    let run_dir = d.path().join("data/r");
    let mut c = traj_run(d.path(), &s, "data/r");
    c.args(["tasks.jsonl", "-j", "2", "--batch-size", "5"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    wait_for("4 records", 60, || lines_so_far(&run_dir) >= 4);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(100)); // requests sent before the kill counted
    let first = rows(&run_dir);
    assert!((4..20).contains(&first.len()), "{} records", first.len());
    let done: BTreeSet<String> = first
        .iter()
        .map(|r| r["prompt"].as_str().unwrap().to_string())
        .collect();
    assert!(
        done.contains("task 0") && !done.contains("task 19"),
        "{done:?}"
    );
    let old_files = batch_files(&run_dir);

    // Reversed (every row's position, its default prompt_index, changes), plus a
    // second copy of a finished task and of one never run.
    prompts.reverse();
    prompts.push(json!({"prompt": "task 0"}));
    prompts.push(json!({"prompt": "task 19"}));
    write_rows(&tasks, &prompts);
    let calls = s.count();
    let mut c = traj_run(d.path(), &s, "data/r");
    c.args(["tasks.jsonl", "-j", "3", "--batch-size", "5", "--resume"]);
    let o = run(c);
    assert_code(&o, 0);
    assert_eq!(
        s.count() - calls,
        22 - first.len() as u64,
        "resume ran exactly the tasks without a record"
    );
    for (n, bytes) in &old_files {
        let now = &batch_files(&run_dir)[n];
        assert!(bytes.starts_with(now), "batch_{n} grew on resume");
    }

    let recs = rows(&run_dir);
    assert_eq!(recs.len(), 22);
    let mut per_prompt: HashMap<&str, usize> = HashMap::new();
    for r in &recs {
        *per_prompt.entry(r["prompt"].as_str().unwrap()).or_default() += 1;
    }
    for i in 0..20 {
        let want = if i == 0 || i == 19 { 2 } else { 1 };
        assert_eq!(per_prompt[format!("task {i}").as_str()], want, "task {i}");
    }
    let uids: BTreeSet<&str> = recs
        .iter()
        .map(|r| r["task_uid"].as_str().unwrap())
        .collect();
    assert_eq!(uids.len(), 22, "one task_uid per task");
    let indices: BTreeSet<u64> = recs
        .iter()
        .map(|r| r["prompt_index"].as_u64().unwrap())
        .collect();
    assert_eq!(indices.len(), 22, "one prompt_index per task");
    assert_counts_match_files(&run_dir);

    // traj-merge of the run directory keeps every finished task.
    let mut c = cmd("traj-merge", d.path());
    c.args([
        "data/r",
        "-o",
        "merged.jsonl",
        "--rejects",
        "merge-rej.jsonl",
    ]);
    let o = run(c);
    assert_code(&o, 0);
    let merged = read_jsonl(&d.path().join("merged.jsonl"));
    assert_eq!(merged.len(), 22, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("22 rows read, 22 written, 0 duplicates dropped"),
        "{}",
        stderr(&o)
    );
    assert!(
        !d.path().join("merge-rej.jsonl").exists()
            || read_jsonl(&d.path().join("merge-rej.jsonl")).is_empty()
    );
    // Keyed on the prompt text (the reference's resume), the second copies are lost.
    let mut c = cmd("traj-merge", d.path());
    c.args(["data/r", "--key", "prompt"]);
    let o = run(c);
    assert_eq!(parse_jsonl(&stdout(&o)).len(), 20);

    // Resumed again: nothing left to run.
    let calls = s.count();
    let mut c = traj_run(d.path(), &s, "data/r");
    c.args(["tasks.jsonl", "--resume"]);
    assert_code(&run(c), 0);
    assert_eq!(s.count(), calls);
    assert_eq!(rows(&run_dir).len(), 22);
}

#[test]
fn a_prompt_index_claimed_twice_is_an_error_naming_both_rows() {
    let d = tmpdir();
    let s = Standin::json(json!({}));
    let tasks = d.path().join("tasks.jsonl");
    // An explicit prompt_index equal to an earlier row's position.
    write_rows(
        &tasks,
        &[
            json!({"prompt": "a"}),
            json!({"prompt": "b"}),
            json!({"prompt": "c", "prompt_index": 1}),
        ],
    );
    let mut c = traj_run(d.path(), &s, "data/a");
    c.arg("tasks.jsonl");
    let o = run(c);
    assert_code(&o, 1);
    assert!(
        stderr(&o).contains(
            "tasks.jsonl:3: prompt_index 1 is also the position of tasks.jsonl:2 \
             (a row without prompt_index)"
        ),
        "{}",
        stderr(&o)
    );
    // The other way round: a row's position equal to an earlier row's own index.
    write_rows(
        &tasks,
        &[
            json!({"prompt": "c", "prompt_index": 1}),
            json!({"prompt": "a"}),
        ],
    );
    let mut c = traj_run(d.path(), &s, "data/b");
    c.arg("tasks.jsonl");
    let o = run(c);
    assert_code(&o, 1);
    assert!(
        stderr(&o).contains(
            "tasks.jsonl:2: this row's position (prompt_index 1 of a row without one) \
             is the prompt_index of tasks.jsonl:1"
        ),
        "{}",
        stderr(&o)
    );
    assert_eq!(s.count(), 0, "nothing ran");
    // On resume: a row's own index held by another task's record in the run directory.
    write_rows(&tasks, &[json!({"prompt": "a"})]);
    let mut c = traj_run(d.path(), &s, "data/c");
    c.arg("tasks.jsonl");
    assert_code(&run(c), 0);
    // The dataset edited: "a" gone, a new row given index 0 by hand.
    write_rows(&tasks, &[json!({"prompt": "z", "prompt_index": 0})]);
    let mut c = traj_run(d.path(), &s, "data/c");
    c.args(["tasks.jsonl", "--resume"]);
    let o = run(c);
    assert_code(&o, 1);
    assert!(
        stderr(&o).contains(
            "tasks.jsonl:1: prompt_index 0 already belongs to another task in the run \
             directory (data/c/batch_0.jsonl:1)"
        ),
        "{}",
        stderr(&o)
    );
    assert_eq!(s.count(), 1, "only the first run's task ran");
    // Under --on-error skip that row is a bad row like any other: kept in --rejects
    // with its reason, and the rest of the input runs (it stopped the run before).
    write_rows(
        &tasks,
        &[
            json!({"prompt": "z", "prompt_index": 0}),
            json!({"prompt": "other new"}),
        ],
    );
    let mut c = traj_run(d.path(), &s, "data/c");
    c.args(["tasks.jsonl", "--resume", "--on-error", "skip"])
        .args(["--rejects", "rej.jsonl"]);
    let o = run(c);
    assert_code(&o, 0);
    let rej = read_jsonl(&d.path().join("rej.jsonl"));
    assert_eq!(rej.len(), 1, "{rej:?}");
    assert_eq!(rej[0]["line"], 1);
    assert_eq!(rej[0]["record"]["prompt"], "z");
    assert!(
        rej[0]["reasons"][0]
            .as_str()
            .unwrap()
            .starts_with("prompt_index 0 already belongs to another task"),
        "{rej:?}"
    );
    assert_eq!(s.count(), 2, "the other row ran, the refused one did not");
}

/// Copy the fixture run directory `name` to `dir/data/NAME` (its dataset beside it).
fn copy_rundir(dir: &Path, name: &str) -> std::path::PathBuf {
    let src = fixture(&format!("rundirs/{name}"));
    let dst = dir.join("data").join(name);
    std::fs::create_dir_all(&dst).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        let f = p.file_name().unwrap();
        if f == "dataset.jsonl" {
            std::fs::copy(&p, dir.join(format!("{name}.jsonl"))).unwrap();
        } else {
            std::fs::copy(&p, dst.join(f)).unwrap();
        }
    }
    dst
}

/// Resume the reference run directory `name`: exactly the prompts of `missing` run
/// (by position), under their positions, into a new batch file; old files untouched;
/// counts agree with the files; a second resume runs nothing.
fn resume_reference(name: &str, missing: &[u64]) -> (tempfile::TempDir, Standin) {
    let d = tmpdir();
    let s = Standin::json(json!({"default": {"content": "done {prompt}", "reasoning": "r"}}));
    let run_dir = copy_rundir(d.path(), name);
    let old = batch_files(&run_dir);
    let dataset =
        parse_jsonl(&std::fs::read_to_string(d.path().join(format!("{name}.jsonl"))).unwrap());
    let mut c = traj_run(d.path(), &s, &format!("data/{name}"));
    c.args([&format!("{name}.jsonl"), "--resume"]);
    let o = run(c);
    assert_code(&o, 0);
    let asked: Vec<String> = s.requests().iter().map(user_prompt).collect();
    let mut want: Vec<String> = missing
        .iter()
        .map(|i| dataset[*i as usize]["prompt"].as_str().unwrap().to_string())
        .collect();
    let mut got = asked.clone();
    got.sort();
    want.sort();
    assert_eq!(got, want, "resume runs only what is missing");
    let now = batch_files(&run_dir);
    for (n, bytes) in &old {
        assert_eq!(&now[n], bytes, "{name}/batch_{n} changed");
    }
    let next = old.keys().max().unwrap() + 1;
    let new_rows = parse_jsonl(std::str::from_utf8(&now[&next]).unwrap());
    let mut idx: Vec<u64> = new_rows
        .iter()
        .map(|r| r["prompt_index"].as_u64().unwrap())
        .collect();
    idx.sort();
    assert_eq!(idx, missing, "new records keep their positions");
    assert!(new_rows.iter().all(|r| r["task_uid"].is_string()));
    assert_counts_match_files(&run_dir);
    let mut c = traj_run(d.path(), &s, &format!("data/{name}"));
    c.args([&format!("{name}.jsonl"), "--resume"]);
    assert_code(&run(c), 0);
    assert_eq!(
        s.requests().len(),
        asked.len(),
        "a second resume runs nothing"
    );
    (d, s)
}

#[test]
fn resume_of_a_hermes_0_19_0_run_directory_runs_only_what_is_missing() {
    // Prompts 0-4 and 6 are done; 9 repeats 2's text (an intentional duplicate).
    let (d, _s) = resume_reference("hermes-0.19.0", &[5, 7, 8, 9]);
    // The reference's rows count in the statistics as traj's own: their gpt turns and
    // reasoning, their tools from `tool_stats` (they were left out, while the same
    // rows counted as records).
    let st = read_json(&d.path().join("data/hermes-0.19.0/statistics.json"));
    assert_eq!(st["records"], 10);
    assert_eq!(st["tool_statistics"]["terminal"]["count"], 6, "{st}");
    let turns = &st["reasoning_statistics"]["total_assistant_turns"];
    assert!(
        turns.as_u64().unwrap() >= 12,
        "6 rows of 2 gpt turns, and the new ones: {st}"
    );
    let cp = read_json(&d.path().join("data/hermes-0.19.0/checkpoint.json"));
    assert_eq!(
        cp["completed_prompts"],
        json!([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    );
    let mut c = cmd("traj-merge", d.path());
    c.args(["data/hermes-0.19.0"]);
    let o = run(c);
    assert_code(&o, 0);
    let merged = parse_jsonl(&stdout(&o));
    let idx: Vec<u64> = merged
        .iter()
        .map(|r| r["prompt_index"].as_u64().unwrap())
        .collect();
    assert_eq!(idx, (0..10).collect::<Vec<_>>(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("0 duplicates dropped"),
        "{}",
        stderr(&o)
    );
}

/// A crash tore a row of the reference's batch file, and its resume appended the next
/// row to the same file: the torn text and a complete row share a line. That whole line
/// was cut, the complete row with it (lost on disk, and paid for again); the row is
/// kept now, in place, and only the torn text goes.
#[test]
fn resume_keeps_a_record_that_a_torn_line_ran_into() {
    let d = tmpdir();
    let s = Standin::json(json!({"default": {"content": "done {prompt}", "reasoning": "r"}}));
    let run_dir = copy_rundir(d.path(), "hermes-0.19.0");
    let b0 = std::fs::read_to_string(run_dir.join("batch_0.jsonl")).unwrap();
    let b2 = std::fs::read_to_string(run_dir.join("batch_2.jsonl")).unwrap();
    let lines: Vec<&str> = b0.lines().collect();
    let torn = &lines[2][..300];
    let joined = format!("{}\n{}\n{torn}{b2}", lines[0], lines[1]);
    std::fs::write(run_dir.join("batch_0.jsonl"), &joined).unwrap();
    std::fs::remove_file(run_dir.join("batch_2.jsonl")).unwrap();
    let moved: Value = serde_json::from_str(b2.trim_end()).unwrap();
    let lost: Value = serde_json::from_str(lines[2]).unwrap();

    // Without --resume the file is not touched: an error naming the line.
    let mut c = traj_run(d.path(), &s, "data/hermes-0.19.0");
    c.args(["hermes-0.19.0.jsonl"]);
    let o = run(c);
    assert_ne!(o.status.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(run_dir.join("batch_0.jsonl")).unwrap(),
        joined
    );

    let mut c = traj_run(d.path(), &s, "data/hermes-0.19.0");
    c.args(["hermes-0.19.0.jsonl", "--resume"]);
    c.arg("--progress-secs").arg("0");
    let o = run(c);
    assert_code(&o, 0);
    let err = stderr(&o);
    assert!(
        err.contains("batch_0.jsonl: cut 300 bytes of torn text (what it held runs again); kept 1 complete record that a torn line ran into"),
        "{err}"
    );
    let asked: BTreeSet<String> = s.requests().iter().map(user_prompt).collect();
    let prompt_of = |v: &Value| {
        v["conversations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["from"] == "human")
            .unwrap()["value"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(
        !asked.contains(&prompt_of(&moved)),
        "the kept record's prompt ran again"
    );
    assert!(
        asked.contains(&prompt_of(&lost)),
        "the torn record's prompt runs again"
    );
    let b0_now = std::fs::read_to_string(run_dir.join("batch_0.jsonl")).unwrap();
    assert_eq!(b0_now, format!("{}\n{}\n{b2}", lines[0], lines[1]));
    assert_counts_match_files(&run_dir);
}

/// hermes-agent 0.19.0 writes no row for a prompt it discards (no reasoning): only
/// its checkpoint lists it as done. The resume ran it again, paid, and the rebuilt
/// checkpoint lost the count; it is written down as a tombstone now, and stays done.
#[test]
fn resume_keeps_what_a_0_19_0_checkpoint_alone_says_was_discarded() {
    let d = tmpdir();
    let s = Standin::json(json!({"default": {"content": "done {prompt}", "reasoning": "r"}}));
    let run_dir = copy_rundir(d.path(), "hermes-0.19.0");
    // Prompt 1 was discarded: its row is not in batch_0, the checkpoint lists it.
    let b0 = std::fs::read_to_string(run_dir.join("batch_0.jsonl")).unwrap();
    let kept: Vec<&str> = b0
        .lines()
        .filter(|l| serde_json::from_str::<Value>(l).unwrap()["prompt_index"] != json!(1))
        .collect();
    assert_eq!(kept.len(), 2);
    std::fs::write(run_dir.join("batch_0.jsonl"), kept.join("\n") + "\n").unwrap();
    let cp = read_json(&run_dir.join("checkpoint.json"));
    assert!(
        cp["completed_prompts"]
            .as_array()
            .unwrap()
            .contains(&json!(1))
    );
    let dataset =
        parse_jsonl(&std::fs::read_to_string(d.path().join("hermes-0.19.0.jsonl")).unwrap());
    let discarded = dataset[1]["prompt"].as_str().unwrap().to_string();

    let mut c = standin_run(d.path(), &s.url(), "data/hermes-0.19.0");
    c.args(["--toolsets", "file", "hermes-0.19.0.jsonl", "--resume"]);
    let o = run(c);
    assert_code(&o, 0);
    assert!(
        stderr(&o)
            .contains("1 prompts that the reference's checkpoint.json lists as done left no row"),
        "{}",
        stderr(&o)
    );
    let asked: Vec<String> = s.requests().iter().map(user_prompt).collect();
    assert!(
        !asked.contains(&discarded),
        "the discarded prompt ran again: {asked:?}"
    );
    let tombs: Vec<Value> = rows(&run_dir)
        .into_iter()
        .filter(|r| r.get("discarded").is_some())
        .collect();
    assert_eq!(
        tombs,
        [json!({"prompt_index": 1, "discarded": "no_reasoning", "prompt": discarded})]
    );
    let st = read_json(&run_dir.join("statistics.json"));
    assert_eq!(st["discarded_no_reasoning"], 1);
    assert_counts_match_files(&run_dir);
    // traj's own checkpoint now: a second resume writes no second tombstone.
    let mut c = standin_run(d.path(), &s.url(), "data/hermes-0.19.0");
    c.args(["--toolsets", "file", "hermes-0.19.0.jsonl", "--resume"]);
    assert_code(&run(c), 0);
    assert_eq!(
        s.requests().len(),
        asked.len(),
        "a second resume runs nothing"
    );
    assert_eq!(
        rows(&run_dir)
            .iter()
            .filter(|r| r.get("discarded").is_some())
            .count(),
        1
    );
}

/// A reference row is matched by its prompt text, and the reference's `prompt_index` is
/// the dataset line: the row for `alpha` at 2 was taken by the dataset's first `alpha`
/// (0), the second then ran under a new index 3 (the dataset has three rows), and a
/// row for `  beta  ` (5) was taken by `beta` (1). Each is now first the record of the
/// row at its own index.
#[test]
fn resume_credits_a_reference_row_to_the_task_at_its_own_index() {
    let d = tmpdir();
    let s = Standin::json(json!({"default": {"content": "done {prompt}", "reasoning": "r"}}));
    let hermes = |i: u64, prompt: &str| {
        json!({"prompt_index": i, "conversations": [{"from": "system", "value": "s"},
            {"from": "human", "value": prompt}, {"from": "gpt", "value": "<think>\nr\n</think>\nok"}],
            "metadata": {"batch_num": i}, "completed": true})
    };
    for (name, dataset, written, want_run) in [
        (
            "dups",
            vec!["alpha task", "beta task", "alpha task"],
            vec![hermes(1, "beta task"), hermes(2, "alpha task")],
            vec![(0u64, "alpha task")],
        ),
        (
            "spaces",
            vec!["alpha task", "beta task", "gamma task", "  beta task  "],
            vec![
                hermes(0, "alpha task"),
                hermes(2, "gamma task"),
                hermes(3, "  beta task  "),
            ],
            vec![(1, "beta task")],
        ),
    ] {
        let run_dir = d.path().join("data").join(name);
        std::fs::create_dir_all(&run_dir).unwrap();
        for (k, r) in written.iter().enumerate() {
            write_rows(
                &run_dir.join(format!("batch_{}.jsonl", k + 1)),
                std::slice::from_ref(r),
            );
        }
        let ds: Vec<Value> = dataset.iter().map(|p| json!({"prompt": p})).collect();
        write_rows(&d.path().join(format!("{name}.jsonl")), &ds);
        let before = s.requests().len();
        let mut c = traj_run(d.path(), &s, &format!("data/{name}"));
        c.args([&format!("{name}.jsonl"), "--resume", "--batch-size", "1"]);
        let o = run(c);
        assert_code(&o, 0);
        assert!(
            !stderr(&o).contains("new prompt_index"),
            "{name}: {}",
            stderr(&o)
        );
        let asked: Vec<String> = s.requests()[before..].iter().map(user_prompt).collect();
        let want: Vec<String> = want_run.iter().map(|(_, p)| p.to_string()).collect();
        assert_eq!(asked, want, "{name}");
        let new: Vec<(u64, String)> = rows(&run_dir)
            .iter()
            .filter(|r| r.get("task_uid").is_some())
            .map(|r| {
                (
                    r["prompt_index"].as_u64().unwrap(),
                    r["prompt"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let want: Vec<(u64, String)> = want_run.iter().map(|(i, p)| (*i, p.to_string())).collect();
        assert_eq!(new, want, "{name}: the record keeps its row's own index");
        let cp = read_json(&run_dir.join("checkpoint.json"));
        assert_eq!(
            cp["completed_prompts"],
            json!((0..dataset.len() as u64).collect::<Vec<_>>()),
            "{name}"
        );
    }
}

#[test]
fn resume_of_a_newest_reference_run_directory_counts_discarded_rows_as_done() {
    // Done: 0, 2 (chat-shaped conversations), 3 (messages), 4, 6, 8; discarded: 1, 5.
    let (d, _s) = resume_reference("hermes-0.21", &[7, 9, 10, 11]);
    let run_dir = d.path().join("data/hermes-0.21");
    let st = read_json(&run_dir.join("statistics.json"));
    assert_eq!(st["discarded_no_reasoning"], 2);
    assert_eq!(st["records"], 10);
    let cp = read_json(&run_dir.join("checkpoint.json"));
    assert_eq!(cp["batch_stats"]["0"]["discarded_no_reasoning"], 1);
    assert_eq!(cp["batch_stats"]["1"]["discarded_no_reasoning"], 1);
    assert_eq!(
        cp["completed_prompts"],
        json!((0..12).collect::<Vec<u64>>())
    );

    let mut c = cmd("traj-merge", d.path());
    c.args(["data/hermes-0.21", "--rejects", "rej.jsonl"]);
    let o = run(c);
    assert_code(&o, 0);
    let merged = parse_jsonl(&stdout(&o));
    assert!(merged.iter().all(|r| r.get("discarded").is_none()));
    let idx: Vec<u64> = merged
        .iter()
        .map(|r| r["prompt_index"].as_u64().unwrap())
        .collect();
    assert_eq!(idx, [0, 2, 3, 4, 6, 7, 8, 9, 10, 11]);
    let err = stderr(&o);
    assert!(
        err.contains("12 rows read, 10 written, 0 duplicates dropped")
            && err.contains("2 discarded rows dropped (tombstones) -> rej.jsonl"),
        "{err}"
    );
    let rej = read_jsonl(&d.path().join("rej.jsonl"));
    let original: Vec<Value> = rows(&run_dir)
        .into_iter()
        .filter(|r| r.get("discarded").is_some())
        .collect();
    assert_eq!(rej.len(), 2);
    for (r, o) in rej.iter().zip(&original) {
        assert_eq!(
            r["reasons"],
            json!(["tombstone: discarded \"no_reasoning\""])
        );
        assert_eq!(&r["record"], o, "the exact discarded row");
    }
    // Without --rejects they are still counted, and said not kept.
    let mut c = cmd("traj-merge", d.path());
    c.args(["data/hermes-0.21", "-o", "out.jsonl"]);
    let o = run(c);
    assert_code(&o, 0);
    assert!(
        stderr(&o).contains("2 discarded rows dropped (tombstones) (not kept"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn statistics_count_tasks_over_the_directory_whatever_the_input_of_a_resume() {
    // Once: a resume given 5 of 20 rows said total_prompts 5 beside prompts_done 20,
    // and 4 tasks of 3 rollouts said total_prompts 12 beside prompts_done 4.
    let d = tmpdir();
    let s = Standin::json(json!({}));
    let all: Vec<Value> = (0..20)
        .map(|i| json!({"prompt": format!("p{i}")}))
        .collect();
    write_rows(&d.path().join("all.jsonl"), &all);
    write_rows(&d.path().join("some.jsonl"), &all[..5]);
    let mut c = traj_run(d.path(), &s, "r");
    c.arg("all.jsonl");
    assert_code(&run(c), 0);
    let mut c = traj_run(d.path(), &s, "r");
    c.args(["some.jsonl", "--resume"]);
    assert_code(&run(c), 0);
    let st = read_json(&d.path().join("r/statistics.json"));
    assert_eq!(
        (&st["total_prompts"], &st["prompts_done"], &st["records"]),
        (&json!(20), &json!(20), &json!(20)),
        "{st}"
    );
    assert_eq!(st["this_run"]["prompts_scheduled"], 0);

    let mut c = traj_run(d.path(), &s, "r3");
    c.args(["some.jsonl", "--rollouts", "3"]);
    assert_code(&run(c), 0);
    let st = read_json(&d.path().join("r3/statistics.json"));
    assert_eq!(
        (&st["total_prompts"], &st["prompts_done"], &st["records"]),
        (&json!(5), &json!(5), &json!(15)),
        "{st}"
    );
    assert_eq!(st["this_run"]["prompts_scheduled"], 15);
}

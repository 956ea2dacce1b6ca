//! Other people's data, kept whole (issue 26): line endings through every path of
//! traj-merge, one answer per odd line in every line-reading stage, the commit rule
//! (output and rejects together or not at all), errors that name the output, temp
//! files and spill folders that never outlive their process, rejects that restore.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError};
use serde_json::Value;

use crate::util::{assert_code, cmd, run, run_with_stdin, stderr, tmpdir};

/// The five stages that read lines, each with the arguments that make it pass a valid
/// row on as it is (or rewritten), without a network.
const STAGES: [(&str, &[&str]); 5] = [
    ("traj-filter", &[]),
    ("traj-normalize", &[]),
    ("traj-compress", &["--offline"]),
    ("traj-merge", &[]),
    ("traj-sample-tools", &[]),
];

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(data).unwrap();
    gz.finish().unwrap()
}

/// A file of rows with any mix of LF and CRLF, blank lines (empty, spaces, tabs, a
/// lone CR) and maybe no final newline; and the rows as traj-merge must write them.
fn mixed_file(rows: &[(u8, u8)], final_newline: bool) -> (Vec<u8>, Vec<u8>) {
    let (mut data, mut want) = (Vec::new(), Vec::new());
    for (i, &(end, blank)) in rows.iter().enumerate() {
        let row = format!("{{\"r\": {i}, \"s\": \"x{}\"}}", "y".repeat(i % 5));
        data.extend_from_slice(row.as_bytes());
        want.extend_from_slice(row.as_bytes());
        want.push(b'\n');
        let last = i + 1 == rows.len();
        if !last || final_newline {
            data.extend_from_slice(if end % 2 == 0 { b"\n" } else { b"\r\n" });
        }
        if !last {
            data.extend_from_slice(match blank % 5 {
                0 | 1 => b"",
                2 => b"\n",
                3 => b"  \t\n",
                _ => b"\r\n",
            });
        }
    }
    (data, want)
}

/// traj-merge over `data` by every path a line can take: a plain file (rows kept by
/// offset and read again: in memory, and spilled), stdin, gzip, a directory of batches.
fn merge_every_path(data: &[u8], want: &[u8]) -> Result<(), TestCaseError> {
    let d = tmpdir();
    std::fs::write(d.path().join("m.jsonl"), data).unwrap();
    std::fs::write(d.path().join("m.jsonl.gz"), gzip(data)).unwrap();
    std::fs::create_dir(d.path().join("dir")).unwrap();
    std::fs::write(d.path().join("dir/batch_0.jsonl"), data).unwrap();
    let runs: [(&str, &[&str]); 5] = [
        ("plain file", &["m.jsonl"]),
        ("plain file, spilled", &["--buffer-size", "64", "m.jsonl"]),
        ("gzip", &["m.jsonl.gz"]),
        ("directory", &["dir"]),
        ("stdin", &["-"]),
    ];
    for (what, args) in runs {
        let mut c = cmd("traj-merge", d.path());
        c.args(args).arg("-q");
        let o = run_with_stdin(c, data);
        prop_assert_eq!(o.status.code(), Some(0), "{}: {}", what, stderr(&o));
        prop_assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(want),
            "{}: {:?}",
            what,
            String::from_utf8_lossy(data)
        );
    }
    Ok(())
}

#[test]
fn merge_keeps_lf_and_crlf_rows_apart() {
    // The reported case: a lone LF, then CRLF rows.
    let data = b"{\"a\":1}\n{\"b\":2}\r\n{\"c\":3}\r\n";
    merge_every_path(data, b"{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n").unwrap();
}

proptest! {
    #![proptest_config(Config {
        cases: 16,
        max_shrink_iters: 32,
        failure_persistence: None,
        ..Config::default()
    })]

    /// Any mix of line endings and blank lines gives back the same rows by every path.
    #[test]
    fn merge_gives_back_the_rows_whatever_the_line_endings(
        rows in prop::collection::vec((0u8..2, 0u8..5), 1..12),
        final_newline in any::<bool>(),
    ) {
        let (data, want) = mixed_file(&rows, final_newline);
        merge_every_path(&data, &want)?;
    }
}

/// A valid row of every stage (a conversation and a prompt).
const ROW: &str = r#"{"conversations": [{"from": "human", "value": "hi"}], "prompt": "hi"}"#;

/// Odd lines, each with whether a stage must refuse it.
fn odd_lines() -> Vec<(Vec<u8>, bool)> {
    let with = |before: &[u8], after: &[u8]| [before, ROW.as_bytes(), after].concat();
    let deep = format!(
        r#"{{"conversations": [{{"from": "human", "value": "hi"}}], "prompt": "hi", "d": {}{}}}"#,
        "[".repeat(127),
        "]".repeat(127)
    );
    vec![
        (ROW.as_bytes().to_vec(), false),
        (with(b"", b"\x0c"), true),
        (with(b"\x0c", b""), true),
        (with(b"", b"\x0b"), true),
        (with(b"", b" \t"), false),
        (with(b"", b"\r"), false),
        (with(b"\xEF\xBB\xBF", b""), true),
        (with(b"", b"\x00"), true),
        (b"\x0c".to_vec(), true),
        (b"\x0b \x0c".to_vec(), true),
        (
            br#"{"conversations": [{"from": "human", "value": "\ud800"}], "prompt": "hi"}"#
                .to_vec(),
            true,
        ),
        (
            br#"{"conversations": [{"from": "human", "value": "hi"}], "prompt": "hi", "prompt": "x"}"#
                .to_vec(),
            true,
        ),
        (deep.into_bytes(), true),
        (
            "{\"conversations\": [{\"from\": \"human\", \"value\": \"h\u{2028}i\"}], \"prompt\": \"hi\", \"n\": 1e400}"
                .as_bytes()
                .to_vec(),
            false,
        ),
        (
            b"{\"conversations\": [{\"from\": \"human\", \"value\": \"\xC0\xAF\"}], \"prompt\": \"hi\"}"
                .to_vec(),
            true,
        ),
        (with(b"", b","), true),
    ]
}

/// The line numbers a stage refused (its rejects), and the rows it wrote.
fn refused(stage: &str, extra: &[&str], dir: &Path) -> (Vec<u64>, usize) {
    let mut c = cmd(stage, dir);
    c.args(extra)
        .args(["odd.jsonl", "--on-error", "skip", "--rejects", "rej.jsonl"])
        .args(["-o", "out.jsonl", "-q"]);
    let o = run(c);
    assert_code(&o, 0);
    let rej = std::fs::read_to_string(dir.join("rej.jsonl")).unwrap();
    let mut lines: Vec<u64> = rej
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["line"].as_u64().unwrap()
        })
        .collect();
    lines.sort();
    let out = std::fs::read_to_string(dir.join("out.jsonl")).unwrap();
    (lines, out.lines().count())
}

/// One answer per odd line: each of the five stages refuses the same lines (and says
/// so in its rejects), and writes the others.
#[test]
fn every_stage_refuses_the_same_odd_lines() {
    let d = tmpdir();
    let lines = odd_lines();
    let mut data = Vec::new();
    let mut want = Vec::new();
    for (i, (l, bad)) in lines.iter().enumerate() {
        data.extend_from_slice(l);
        data.push(b'\n');
        if *bad {
            want.push(i as u64 + 1);
        }
    }
    std::fs::write(d.path().join("odd.jsonl"), &data).unwrap();
    for (stage, extra) in STAGES {
        let (got, written) = refused(stage, extra, d.path());
        assert_eq!(got, want, "{stage} refused other lines");
        assert_eq!(written, lines.len() - want.len(), "{stage}");
    }
}

/// A stage's run over rows with bad lines, `--rejects` on a full device, over an
/// existing `-o` file.
fn rejects_to_full_device(stage: &str, extra: &[&str]) {
    let d = tmpdir();
    let old = b"the old output\n";
    std::fs::write(d.path().join("out.jsonl"), old).unwrap();
    let data = format!("{ROW}\nnot json\n{ROW}\n");
    std::fs::write(d.path().join("in.jsonl"), data).unwrap();
    let mut c = cmd(stage, d.path());
    c.args(extra)
        .args(["in.jsonl", "--on-error", "skip", "--rejects", "/dev/full"])
        .args(["-o", "out.jsonl"]);
    let o = run(c);
    assert_code(&o, 1);
    let err = stderr(&o);
    assert!(
        err.contains("/dev/full: write error: No space left on device"),
        "{stage}: {err}"
    );
    assert_eq!(
        std::fs::read(d.path().join("out.jsonl")).unwrap(),
        old,
        "{stage}: the old output was replaced"
    );
    let left: Vec<String> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "{stage}: {left:?}");
}

#[test]
fn a_rejects_file_that_cannot_be_written_keeps_the_old_output() {
    for (stage, extra) in STAGES {
        rejects_to_full_device(stage, extra);
    }
}

/// `-o` on a full device, and stdout on one: the error names the output.
#[test]
fn errors_on_output_name_the_output() {
    let d = tmpdir();
    std::fs::write(d.path().join("in.jsonl"), format!("{ROW}\n")).unwrap();
    for (stage, extra) in STAGES {
        let mut c = cmd(stage, d.path());
        c.args(extra).args(["in.jsonl", "-o", "/dev/full"]);
        let o = run(c);
        assert_code(&o, 1);
        let err = stderr(&o);
        assert!(
            err.contains("/dev/full: write error: No space left on device"),
            "{stage} -o: {err}"
        );
        let mut c = cmd(stage, d.path());
        c.args(extra).arg("in.jsonl");
        c.stdout(std::fs::File::create("/dev/full").unwrap());
        c.stderr(Stdio::piped()).stdin(Stdio::null());
        let o = c.output().unwrap();
        assert_code(&o, 1);
        let err = stderr(&o);
        assert!(
            err.contains("stdout: write error: No space left on device"),
            "{stage} stdout: {err}"
        );
    }
}

/// Entries of `dir` whose name starts with `prefix`.
fn entries(dir: &Path, prefix: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect();
    v.sort();
    v
}

/// Wait (up to 10 s) until `f` holds.
fn wait_for(mut f: impl FnMut() -> bool) -> bool {
    (0..1000).any(|_| {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
        false
    })
}

/// A stage writing `-o out.jsonl` from stdin, kept running (stdin open), its temp file
/// there.
fn running(
    stage: &str,
    extra: &[&str],
    dir: &Path,
) -> (std::process::Child, std::process::ChildStdin) {
    let mut c = cmd(stage, dir);
    c.args(extra)
        .args(["-o", "out.jsonl"])
        .stdin(Stdio::piped());
    c.stdout(Stdio::null()).stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(format!("{ROW}\n").as_bytes()).unwrap();
    (child, stdin)
}

/// `kill -9` leaves a temp file; the next run of any stage beside it removes it, and
/// never the temp file of a process still running.
#[test]
fn temp_files_of_killed_runs_are_removed_by_the_next_run() {
    let d = tmpdir();
    std::fs::write(d.path().join("in.jsonl"), format!("{ROW}\n")).unwrap();
    for (i, (stage, extra)) in STAGES.iter().enumerate() {
        // A run still going, started first so that it has no stale file to sweep.
        let (mut live, stdin) = running(stage, extra, d.path());
        assert!(
            wait_for(|| entries(d.path(), ".traj-").len() == 1),
            "{stage}"
        );
        let live_temp = entries(d.path(), ".traj-");
        // The killed run.
        let (mut dead, dead_stdin) = running(stage, extra, d.path());
        assert!(
            wait_for(|| entries(d.path(), ".traj-").len() == 2),
            "{stage}"
        );
        dead.kill().unwrap();
        dead.wait().unwrap();
        drop(dead_stdin);
        assert_eq!(
            entries(d.path(), ".traj-").len(),
            2,
            "{stage}: kill -9 left its temp file"
        );
        // The next run of another stage, beside them.
        let (next, next_extra) = STAGES[(i + 1) % STAGES.len()];
        let mut c = cmd(next, d.path());
        c.args(next_extra)
            .args(["in.jsonl", "-o", "other.jsonl", "-q"]);
        assert_code(&run(c), 0);
        assert_eq!(
            entries(d.path(), ".traj-"),
            live_temp,
            "{next} after {stage}: the stale temp file is removed, the live one kept"
        );
        drop(stdin);
        let st = live.wait().unwrap();
        assert!(st.success(), "{stage}");
        assert!(entries(d.path(), ".traj-").is_empty());
    }
}

/// traj-merge's spill folder: removed on SIGINT, SIGTERM and SIGHUP; after `kill -9`,
/// by the next merge that spills in the same place.
#[test]
fn merge_spill_folder_never_outlives_the_merge() {
    let d = tmpdir();
    let spill = d.path().join("spill");
    std::fs::create_dir(&spill).unwrap();
    let rows: String = (0..200)
        .map(|i| {
            format!(
                "{{\"prompt_index\": {i}, \"pad\": \"{}\"}}\n",
                "x".repeat(100)
            )
        })
        .collect();
    for sig in ["INT", "TERM", "HUP", "KILL"] {
        let mut c = cmd("traj-merge", d.path());
        c.args([
            "--buffer-size",
            "1K",
            "--tmp-dir",
            "spill",
            "-o",
            "out.jsonl",
        ]);
        c.stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = c.spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(rows.as_bytes()).unwrap();
        // A spill run written: the folder holds a file.
        let spilled = wait_for(|| {
            entries(&spill, "traj-merge-")
                .iter()
                .any(|s| std::fs::read_dir(spill.join(s)).unwrap().next().is_some())
        });
        assert!(spilled, "SIG{sig}: no spill run");
        let st = Command::new("kill")
            .args([&format!("-{sig}"), &child.id().to_string()])
            .status()
            .unwrap();
        assert!(st.success());
        assert!(!child.wait().unwrap().success());
        drop(stdin);
        let left = entries(&spill, "traj-merge-");
        if sig == "KILL" {
            assert_eq!(left.len(), 1, "kill -9 leaves its folder");
            let mut c = cmd("traj-merge", d.path());
            c.args([
                "--buffer-size",
                "1K",
                "--tmp-dir",
                "spill",
                "-q",
                "-o",
                "out.jsonl",
                "-",
            ]);
            let o = run_with_stdin(c, rows.as_bytes());
            assert_code(&o, 0);
            assert!(
                entries(&spill, "traj-merge-").is_empty(),
                "stale folder kept"
            );
        } else {
            assert!(left.is_empty(), "SIG{sig} left {left:?}");
        }
        assert!(
            entries(d.path(), ".traj-").is_empty(),
            "SIG{sig}: temp file"
        );
    }
}

/// The README's restore command gives back every rejected line byte for byte (CRLF
/// lines with their CR), from every stage; and every reject is JSON that jq reads, a
/// `record` only where the line is JSON by the row rules.
#[test]
fn rejects_restore_the_exact_lines() {
    let d = tmpdir();
    let lines = odd_lines();
    let mut data = Vec::new();
    let mut bad = Vec::new();
    for (i, (l, is_bad)) in lines.iter().enumerate() {
        let ending: &[u8] = if i % 2 == 0 { b"\r\n" } else { b"\n" };
        data.extend_from_slice(l);
        data.extend_from_slice(ending);
        // The BOM of line 1 is the file's, and a line not UTF-8 is in raw_base64.
        if *is_bad && std::str::from_utf8(l).is_ok() {
            bad.extend_from_slice(l);
            if ending == b"\r\n" {
                bad.push(b'\r');
            }
            bad.push(b'\n');
        }
    }
    std::fs::write(d.path().join("odd.jsonl"), &data).unwrap();
    for (stage, extra) in STAGES {
        refused(stage, extra, d.path());
        let o = Command::new("jq")
            .args(["-r", ".raw // empty", "rej.jsonl"])
            .current_dir(d.path())
            .output()
            .expect("jq is needed (apt-get install jq)");
        assert_code(&o, 0);
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&bad),
            "{stage}"
        );
        let o = Command::new("jq")
            .args(["-c", "select(.record) | .line", "rej.jsonl"])
            .current_dir(d.path())
            .output()
            .unwrap();
        assert_code(&o, 0);
    }
}

/// A reader of stdout that went away before the first byte (`| head -0`, a closed
/// pager) ends every binary that writes to stdout quietly with status 0, as the README
/// says; traj-report's page too, whose rows are written by serde_json.
#[test]
fn a_closed_stdout_ends_every_writer_quietly_with_status_zero() {
    let d = tmpdir();
    let rows = crate::util::fixture("hermes_reason_tool_use_50.jsonl");
    let prompts = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/prompts.jsonl");
    let mut all: Vec<(&str, &[&str])> = STAGES.to_vec();
    all.push(("traj-report", &[]));
    for (stage, extra) in all {
        let mut c = cmd(stage, d.path());
        let input = if stage == "traj-sample-tools" {
            &prompts
        } else {
            &rows
        };
        c.args(extra).arg("-q").arg(input).stdin(Stdio::null());
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        drop(child.stdout.take()); // the read end, closed before anything is written
        let o = child.wait_with_output().unwrap();
        assert_eq!(
            (o.status.code(), String::from_utf8_lossy(&o.stderr).as_ref()),
            (Some(0), ""),
            "{stage}"
        );
    }
}

/// A traj-run directory given to a stage that reads rows gives its rows, the
/// `batch_N.jsonl` files in natural order, as traj-merge reads it: not its checkpoint
/// (once "invalid JSON" at its first line), not `failures.jsonl`, not a copy a pipeline
/// left beside them (which would give every row twice); each data file passed over is
/// named. A plain directory's stage documents are named as passed over too.
#[test]
fn a_run_directory_input_gives_its_batch_rows_once() {
    let d = tmpdir();
    let run_dir = d.path().join("run");
    std::fs::create_dir(&run_dir).unwrap();
    let row = |i: usize| {
        format!(
            r#"{{"prompt_index": {i}, "conversations": [{{"from": "human", "value": "q{i}"}}, {{"from": "gpt", "value": "a{i}"}}]}}"#
        )
    };
    for (name, rows) in [
        ("batch_0.jsonl", vec![0, 1]),
        ("batch_2.jsonl", vec![2]),
        ("batch_10.jsonl", vec![3]),
    ] {
        let text: String = rows.into_iter().map(|i| row(i) + "\n").collect();
        std::fs::write(run_dir.join(name), text).unwrap();
    }
    std::fs::write(
        run_dir.join("checkpoint.json"),
        "{\n  \"completed_prompts\": [0, 1, 2, 3]\n}\n",
    )
    .unwrap();
    std::fs::write(run_dir.join("statistics.json"), "{\n  \"records\": 4\n}\n").unwrap();
    std::fs::write(
        run_dir.join("failures.jsonl"),
        "{\"prompt_index\": 9, \"error\": \"x\"}\n",
    )
    .unwrap();
    // A compressed batch file is a batch file too, as traj-merge reads it.
    std::fs::write(
        run_dir.join("batch_11.jsonl.gz"),
        gzip((row(4) + "\n").as_bytes()),
    )
    .unwrap();
    let copy: String = (0..5).map(|i| row(i) + "\n").collect();
    std::fs::write(run_dir.join("trajectories.jsonl"), &copy).unwrap();
    let mut merged = cmd("traj-merge", d.path());
    merged.arg(&run_dir);
    let merged = run(merged);
    assert_code(&merged, 0);
    assert_eq!(String::from_utf8_lossy(&merged.stdout), copy);
    for stage in ["traj-filter", "traj-normalize"] {
        let mut c = cmd(stage, d.path());
        c.arg(&run_dir);
        let o = run(c);
        assert_code(&o, 0);
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        let ids: Vec<i64> = out
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["prompt_index"]
                    .as_i64()
                    .unwrap()
            })
            .collect();
        assert_eq!(ids, [0, 1, 2, 3, 4], "{stage}: {out}");
        let err = stderr(&o);
        for beside in ["trajectories.jsonl", "failures.jsonl"] {
            assert!(
                err.contains(&format!(
                    "{beside}: not read (beside the rows of a traj-run directory"
                )),
                "{stage}: {err}"
            );
        }
        assert!(!err.contains("checkpoint.json"), "{stage}: {err}");
    }
    // A plain directory: its data files, and the stage documents named as not read.
    let plain = d.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    std::fs::write(plain.join("rows.jsonl"), row(0) + "\n").unwrap();
    std::fs::write(plain.join("filter_stats.json"), "{\n  \"kept\": 1\n}\n").unwrap();
    let mut c = cmd("traj-filter", d.path());
    c.arg(&plain);
    let o = run(c);
    assert_code(&o, 0);
    assert_eq!(String::from_utf8_lossy(&o.stdout), row(0) + "\n");
    assert!(
        stderr(&o).contains("filter_stats.json: not read (a JSON document"),
        "{}",
        stderr(&o)
    );
}

/// stdin named twice among a stage's inputs is refused (exit 2): the second `-` would
/// read nothing and say nothing (an input silently empty).
#[test]
fn every_stage_refuses_stdin_named_twice() {
    let d = tmpdir();
    for (stage, args) in STAGES {
        let mut c = cmd(stage, d.path());
        c.args(args).args(["-", "-"]);
        let o = run_with_stdin(c, format!("{ROW}\n").as_bytes());
        assert_code(&o, 2);
        assert!(
            stderr(&o).contains("stdin (-) is named twice"),
            "{stage}: {}",
            stderr(&o)
        );
        assert!(o.stdout.is_empty(), "{stage}");
    }
}

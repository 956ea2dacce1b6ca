//! scripts/spark_pipeline.py and scripts/ray_pipeline.py on PySpark and Ray in local
//! mode: the same rows as the binaries run directly (as a multiset), every reject kept,
//! and a failing stage fails the job. PySpark, a JRE and Ray come with `make setup`.

use std::path::Path;
use std::process::Command;

use crate::util::*;

const STAGES: [&str; 2] = ["traj-normalize", "traj-filter --well-formed --min-turns 3"];

/// The rows and rejects of the stages run directly, one after the other.
fn direct(d: &Path, input: &Path) -> (Vec<String>, usize) {
    let mut c = cmd("traj-normalize", d);
    c.arg(input);
    let o = run(c);
    assert_code(&o, 0);
    let mut c = cmd("traj-filter", d);
    c.args([
        "--well-formed",
        "--min-turns",
        "3",
        "--rejects",
        "direct-rejects.jsonl",
    ]);
    let o = run_with_stdin(c, &o.stdout);
    assert_code(&o, 0);
    let mut rows: Vec<String> = stdout(&o).lines().map(str::to_string).collect();
    rows.sort();
    let rejects = std::fs::read_to_string(d.join("direct-rejects.jsonl"))
        .unwrap()
        .lines()
        .count();
    (rows, rejects)
}

fn script(d: &Path, name: &str, args: &[&str]) -> std::process::Output {
    let bin_dir = bin("traj-filter").parent().unwrap().to_path_buf();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let o = Command::new(data_python())
        .arg(root.join("scripts").join(name))
        .arg("--bin-dir")
        .arg(&bin_dir)
        .args(args)
        .current_dir(d)
        .output()
        .expect("python3");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !err.contains("No module named"),
        "{name} needs its framework (`make setup` installs pyspark and ray): {err}"
    );
    o
}

/// Lines of every file under `dir` whose name starts with `prefix`.
fn lines_under(dir: &Path, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.file_name().unwrap().to_string_lossy().starts_with(prefix) {
            out.extend(
                std::fs::read_to_string(&p)
                    .unwrap()
                    .lines()
                    .map(str::to_string),
            );
        }
    }
    out
}

/// 50 real rows, one more whose human turn holds a raw U+2028, U+2029 and U+0085 (JSON
/// strings may, and every stage keeps them: a line is cut at "\n" only), and three rows
/// too short for `--min-turns 3`, as a file.
fn input(d: &Path) -> std::path::PathBuf {
    let rows = std::fs::read_to_string(fixture("hermes_reason_tool_use_50.jsonl")).unwrap();
    let mut text = rows.clone();
    let human = "\"from\": \"human\", \"value\": \"";
    let first = rows.lines().next().unwrap();
    assert!(first.contains(human));
    text.push_str(&first.replacen(human, &format!("{human}a\u{2028}b\u{2029}c\u{85}d "), 1));
    text.push('\n');
    for k in 0..3 {
        text.push_str(&format!(
            "{{\"conversations\":[{{\"from\":\"human\",\"value\":\"short {k}\"}}]}}\n"
        ));
    }
    let p = d.join("in.jsonl");
    std::fs::write(&p, text).unwrap();
    p
}

/// Good rows, then one line that is not JSON: a strict stage stops there (exit 1).
fn bad_input(d: &Path) {
    let rows = std::fs::read_to_string(fixture("hermes_reason_tool_use_50.jsonl")).unwrap();
    let first = rows.lines().next().unwrap();
    std::fs::write(d.join("bad.jsonl"), format!("{first}\nnot json\n")).unwrap();
}

#[test]
fn spark_gives_the_rows_of_the_binaries_and_fails_with_a_stage() {
    let d = tmpdir();
    let inp = input(d.path());
    let (want, want_rejects) = direct(d.path(), &inp);
    assert!(want.iter().any(|r| r.contains('\u{2028}')));
    let mut args = vec!["--partitions", "3", "in.jsonl", "out"];
    args.extend(STAGES);
    let o = script(d.path(), "spark_pipeline.py", &args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut got = lines_under(&d.path().join("out/data"), "part-");
    got.sort();
    assert_eq!(got, want);
    assert!(want_rejects >= 3);
    assert_eq!(
        lines_under(&d.path().join("out/rejects"), "traj-filter-1-").len(),
        want_rejects
    );
    // Parquet as the Hub writes it (pyarrow, the rows' own columns): the same rows as the
    // binaries reading that Parquet file themselves.
    let pq = d.path().join("in.parquet");
    let w = Command::new(data_python())
        .args([
            "-c",
            "import sys, pyarrow.json as pj, pyarrow.parquet as pq; \
             pq.write_table(pj.read_json(sys.argv[1]), sys.argv[2])",
        ])
        .arg(fixture("hermes_reason_tool_use_50.jsonl"))
        .arg(&pq)
        .output()
        .expect("python3");
    assert!(w.status.success(), "{}", String::from_utf8_lossy(&w.stderr));
    let (want_pq, _) = direct(d.path(), &pq);
    let mut args = vec!["in.parquet", "out-pq"];
    args.extend(STAGES);
    let o = script(d.path(), "spark_pipeline.py", &args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut got = lines_under(&d.path().join("out-pq/data"), "part-");
    got.sort();
    assert_eq!(got.len(), want_pq.len());
    assert_eq!(got, want_pq);
    // A bad line under the strict default fails the job, not just the partition.
    bad_input(d.path());
    let o = script(
        d.path(),
        "spark_pipeline.py",
        &["bad.jsonl", "out2", "traj-normalize"],
    );
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("invalid JSON"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn ray_gives_the_rows_of_the_binaries_and_fails_with_a_stage() {
    let d = tmpdir();
    let inp = input(d.path());
    let (want, want_rejects) = direct(d.path(), &inp);
    assert!(want.iter().any(|r| r.contains('\u{2028}')));
    let mut args = vec!["--num-cpus", "2", "--batch-size", "16", "in.jsonl", "out"];
    args.extend(STAGES);
    let o = script(d.path(), "ray_pipeline.py", &args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut got: Vec<String> = std::fs::read_to_string(d.path().join("out/data.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    got.sort();
    assert_eq!(got, want);
    assert_eq!(
        lines_under(&d.path().join("out/rejects"), "traj-filter-1-").len(),
        want_rejects
    );
    bad_input(d.path());
    let o = script(
        d.path(),
        "ray_pipeline.py",
        &["--num-cpus", "2", "bad.jsonl", "out2", "traj-normalize"],
    );
    assert!(!o.status.success());
    assert!(!d.path().join("out2/data.jsonl").exists());
}

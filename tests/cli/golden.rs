//! Golden files: every binary's outputs on the fixtures, byte for byte.
//!
//! Each case runs one binary in a fresh directory holding copies of the fixtures it reads
//! (so no absolute path reaches an output) and compares what it made with
//! `tests/expected/<case>/`: `stdout`, `stderr`, `status` (the exit code) and every file
//! the run wrote (output, rejects, stats). A change of output is then a reviewed diff.
//! `TRAJ_BLESS=1 cargo test --test cli -- golden::` rewrites the expected files from the
//! binaries as they are now; review `git diff tests/expected/` before committing.
//! `TRAJ_GOLDEN_BINS=DIR` runs the binaries in DIR instead of this build's.
//!
//! Only values that change from run to run are masked: the wall-clock fields of
//! traj-compress's metrics, and the sample-tools note naming toolsets this machine could
//! not run (it depends on the machine, not on the input).

use std::path::{Path, PathBuf};

use crate::util::{cmd, fixture, run, tmpdir};

/// The fixtures every normalize, filter and compress case reads: every trajectory shape
/// the tests know, one of them with bad lines.
const ROWS: &[&str] = &[
    "hermes_reason_tool_use_50.jsonl",
    "hermes_agent_repairs.jsonl",
    "hermes_bridge_calls.jsonl",
    "fastchat_sharegpt_dummy.jsonl",
    "llamafactory_reason_tool_use_50.jsonl",
    "llamafactory_dpo_en_system.jsonl",
    "llamafactory_v1_sft_loss_weight.jsonl",
    "mini_swe_agent_trajs.jsonl",
    "openai_legacy_shapes.jsonl",
    "toolbench_answers.jsonl",
    "traj_run_records.jsonl",
];

/// One case: a binary, its arguments (fixture names are copied into the run's
/// directory first), and the fixtures to copy.
struct Case {
    name: &'static str,
    bin: &'static str,
    fixtures: &'static [&'static str],
    args: &'static [&'static str],
}

/// The binary `name` of this build, or of the directory `TRAJ_GOLDEN_BINS` names (to
/// bless from, or compare with, another build: `TRAJ_GOLDEN_BINS=../main/target/release`).
fn golden_cmd(name: &str, dir: &Path) -> std::process::Command {
    let mut c = cmd(name, dir);
    if let Some(d) = std::env::var_os("TRAJ_GOLDEN_BINS") {
        let mut o = std::process::Command::new(Path::new(&d).join(name));
        o.env_clear();
        for (k, v) in c.get_envs() {
            if let Some(v) = v {
                o.env(k, v);
            }
        }
        o.current_dir(dir);
        c = o;
    }
    c
}

fn expected_dir(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/expected")
        .join(case)
}

/// Copy `name` (a file or a directory) from the fixtures into `dir`.
fn copy_fixture(name: &str, dir: &Path) {
    copy_tree(&fixture(name), &dir.join(name));
}

fn copy_tree(from: &Path, to: &Path) {
    if from.is_dir() {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            copy_tree(&e.path(), &to.join(e.file_name()));
        }
    } else {
        std::fs::copy(from, to).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
    }
}

/// The files under `dir` that a run made (not the fixtures), relative, sorted.
fn made_files(dir: &Path, fixtures: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            if fixtures.iter().any(|f| rel == *f) {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(rel);
            }
        }
    }
    out.sort();
    out
}

/// The masks: wall-clock fields and the machine-dependent note.
fn mask(name: &str, bytes: Vec<u8>) -> Vec<u8> {
    let Ok(text) = String::from_utf8(bytes.clone()) else {
        return bytes;
    };
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let t = line.trim_start();
        let key = ["\"start_time\":", "\"end_time\":", "\"duration_seconds\":"]
            .into_iter()
            .find(|k| t.starts_with(k));
        if let Some(k) = key {
            let indent = &line[..line.len() - t.len()];
            let comma = if t.trim_end().ends_with(',') { "," } else { "" };
            out.push_str(&format!("{indent}{k} \"(masked)\"{comma}\n"));
        } else if name == "stderr" && line.contains("drawn toolsets this machine could not run") {
            continue;
        } else {
            out.push_str(line);
        }
    }
    out.into_bytes()
}

fn check(case: &Case) {
    let dir = tmpdir();
    for f in case.fixtures {
        copy_fixture(f, dir.path());
    }
    let mut c = golden_cmd(case.bin, dir.path());
    c.args(case.args);
    let o = run(c);
    let mut got: Vec<(String, Vec<u8>)> = vec![
        (
            "status".into(),
            format!("{:?}\n", o.status.code()).into_bytes(),
        ),
        ("stdout".into(), o.stdout.clone()),
        ("stderr".into(), o.stderr.clone()),
    ];
    for f in made_files(dir.path(), case.fixtures) {
        let bytes = std::fs::read(dir.path().join(&f)).unwrap();
        got.push((format!("files/{f}"), bytes));
    }
    let got: Vec<(String, Vec<u8>)> = got
        .into_iter()
        .map(|(n, b)| (n.clone(), mask(&n, b)))
        .collect();
    let exp = expected_dir(case.name);
    if std::env::var_os("TRAJ_BLESS").is_some_and(|v| v == "1") {
        let _ = std::fs::remove_dir_all(&exp);
        for (n, b) in &got {
            let p = exp.join(n);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, b).unwrap();
        }
        return;
    }
    let mut want_names = made_files(&exp, &[]);
    want_names.sort();
    let mut got_names: Vec<String> = got.iter().map(|(n, _)| n.clone()).collect();
    got_names.sort();
    assert_eq!(
        got_names, want_names,
        "{}: the run made other files than tests/expected/{} holds (TRAJ_BLESS=1 rewrites them)",
        case.name, case.name
    );
    for (n, b) in &got {
        let want = std::fs::read(exp.join(n)).unwrap();
        if *b != want {
            panic!(
                "{}: {n} differs from tests/expected/{}/{n} (TRAJ_BLESS=1 rewrites it); got:\n{}",
                case.name,
                case.name,
                String::from_utf8_lossy(&b[..b.len().min(4000)])
            );
        }
    }
}

/// `args` as a `&'static` slice: the row fixtures after the flags.
macro_rules! with_rows {
    ($($flag:expr),* $(,)?) => {
        &[$($flag,)*
          "hermes_reason_tool_use_50.jsonl",
          "hermes_agent_repairs.jsonl",
          "hermes_bridge_calls.jsonl",
          "fastchat_sharegpt_dummy.jsonl",
          "llamafactory_reason_tool_use_50.jsonl",
          "llamafactory_dpo_en_system.jsonl",
          "llamafactory_v1_sft_loss_weight.jsonl",
          "mini_swe_agent_trajs.jsonl",
          "openai_legacy_shapes.jsonl",
          "toolbench_answers.jsonl",
          "traj_run_records.jsonl"]
    };
}

#[test]
fn normalize_hermes() {
    check(&Case {
        name: "normalize_hermes",
        bin: "traj-normalize",
        fixtures: ROWS,
        args: with_rows!(
            "--on-error",
            "skip",
            "--rejects",
            "rejects.jsonl",
            "--stats",
            "stats.json",
            "-o",
            "out.jsonl"
        ),
    });
}

#[test]
fn normalize_hermes_strict() {
    // The default policy: the first bad line stops the run (exit 1), nothing written.
    check(&Case {
        name: "normalize_hermes_strict",
        bin: "traj-normalize",
        fixtures: ROWS,
        args: with_rows!("-o", "out.jsonl"),
    });
}

#[test]
fn normalize_hermes_lost() {
    // Bad lines skipped without a rejects file: counted as lost, exit 1.
    check(&Case {
        name: "normalize_hermes_lost",
        bin: "traj-normalize",
        fixtures: ROWS,
        args: with_rows!("--on-error", "skip"),
    });
}

#[test]
fn normalize_openai() {
    check(&Case {
        name: "normalize_openai",
        bin: "traj-normalize",
        fixtures: ROWS,
        args: with_rows!(
            "--on-error",
            "skip",
            "--rejects",
            "rejects.jsonl",
            "--to",
            "openai",
            "-j",
            "2"
        ),
    });
}

#[test]
fn normalize_openai_objects() {
    check(&Case {
        name: "normalize_openai_objects",
        bin: "traj-normalize",
        fixtures: ROWS,
        args: with_rows!(
            "--on-error",
            "skip",
            "--rejects",
            "rejects.jsonl",
            "--to",
            "openai",
            "--arguments",
            "object",
            "--tools-as",
            "string"
        ),
    });
}

#[test]
fn normalize_llamafactory() {
    check(&Case {
        name: "normalize_llamafactory",
        bin: "traj-normalize",
        fixtures: ROWS,
        args: with_rows!(
            "--on-error",
            "skip",
            "--rejects",
            "rejects.jsonl",
            "--to",
            "llamafactory",
            "--columns",
            "core"
        ),
    });
}

#[test]
fn normalize_llamafactory_openai() {
    check(&Case {
        name: "normalize_llamafactory_openai",
        bin: "traj-normalize",
        fixtures: ROWS,
        args: with_rows!(
            "--on-error",
            "skip",
            "--rejects",
            "rejects.jsonl",
            "--to",
            "llamafactory-openai"
        ),
    });
}

#[test]
fn normalize_core_merged() {
    check(&Case {
        name: "normalize_core_merged",
        bin: "traj-normalize",
        fixtures: ROWS,
        args: with_rows!(
            "--on-error",
            "skip",
            "--rejects",
            "rejects.jsonl",
            "--columns",
            "core",
            "--merge-consecutive",
            "--bridge",
            "keep",
            "--drop-system-prompt",
            "--set",
            "_source=golden",
            "--no-repair"
        ),
    });
}

#[test]
fn filter_predicates() {
    check(&Case {
        name: "filter_predicates",
        bin: "traj-filter",
        fixtures: ROWS,
        args: with_rows!(
            "--on-error",
            "skip",
            "--rejects",
            "rejects.jsonl",
            "--well-formed",
            "--valid-tools",
            "--has-tool-calls",
            "--min-turns",
            "3",
            "--max-row-tokens",
            "6000",
            "--stats",
            "stats.json",
            "-o",
            "kept.jsonl"
        ),
    });
}

#[test]
fn filter_invert() {
    check(&Case {
        name: "filter_invert",
        bin: "traj-filter",
        fixtures: ROWS,
        args: with_rows!(
            "--on-error",
            "skip",
            "--require-reasoning",
            "--alternating",
            "--invert"
        ),
    });
}

#[test]
fn filter_passthru() {
    check(&Case {
        name: "filter_passthru",
        bin: "traj-filter",
        fixtures: ROWS,
        args: with_rows!(
            "--on-error",
            "skip",
            "-o",
            "kept.jsonl",
            "--rejects",
            "rejects.jsonl",
            "--stats",
            "-"
        ),
    });
}

#[test]
fn merge_rundirs() {
    check(&Case {
        name: "merge_rundirs",
        bin: "traj-merge",
        fixtures: &["rundirs"],
        args: &[
            "rundirs",
            "--rejects",
            "rejects.jsonl",
            "-o",
            "merged.jsonl",
        ],
    });
}

#[test]
fn merge_rows() {
    check(&Case {
        name: "merge_rows",
        bin: "traj-merge",
        fixtures: ROWS,
        args: with_rows!("--on-error", "skip", "--key", "prompt", "--keep", "first"),
    });
}

#[test]
fn merge_sample() {
    check(&Case {
        name: "merge_sample",
        bin: "traj-merge",
        fixtures: ROWS,
        args: with_rows!(
            "--on-error",
            "skip",
            "--rejects",
            "rejects.jsonl",
            "--key",
            "line",
            "--sample",
            "40",
            "--seed",
            "3"
        ),
    });
}

#[test]
fn compress_offline() {
    check(&Case {
        name: "compress_offline",
        bin: "traj-compress",
        fixtures: ROWS,
        args: with_rows!(
            "--on-error",
            "skip",
            "--rejects",
            "rejects.jsonl",
            "--offline",
            "--target-max-tokens",
            "1500",
            "--summary-target-tokens",
            "200",
            "--per-trajectory-metrics",
            "--stats",
            "metrics.json",
            "-o",
            "small.jsonl"
        ),
    });
}

#[test]
fn compress_truncate() {
    check(&Case {
        name: "compress_truncate",
        bin: "traj-compress",
        fixtures: ROWS,
        args: with_rows!(
            "--on-error",
            "skip",
            "--rejects",
            "rejects.jsonl",
            "--offline",
            "--target-max-tokens",
            "600",
            "--over-budget",
            "truncate",
            "--compat-midpoint",
            "-j",
            "2"
        ),
    });
}

#[test]
fn compress_reject_over() {
    check(&Case {
        name: "compress_reject_over",
        bin: "traj-compress",
        fixtures: ROWS,
        args: with_rows!(
            "--on-error",
            "skip",
            "--rejects",
            "rejects.jsonl",
            "--offline",
            "--target-max-tokens",
            "400",
            "--over-budget",
            "reject",
            "--no-summary-notice",
            "--tokenizer",
            "cl100k_base",
            "--no-metrics"
        ),
    });
}

#[test]
fn compress_count_only() {
    // The `seconds` field varies; it is written on one line, so the file is masked whole
    // but for the counts.
    let dir = tmpdir();
    for f in ROWS {
        copy_fixture(f, dir.path());
    }
    let mut c = golden_cmd("traj-compress", dir.path());
    c.args(with_rows!(
        "--on-error",
        "skip",
        "--rejects",
        "r.jsonl",
        "--count-only"
    ));
    let o = run(c);
    let mut v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["seconds"] = serde_json::Value::from(0);
    let exp = expected_dir("compress_count_only").join("stdout.json");
    let got = format!("{v}\n");
    if std::env::var_os("TRAJ_BLESS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(exp.parent().unwrap()).unwrap();
        std::fs::write(&exp, &got).unwrap();
        return;
    }
    assert_eq!(got, std::fs::read_to_string(&exp).unwrap());
}

#[test]
fn sample_tools() {
    check(&Case {
        name: "sample_tools",
        bin: "traj-sample-tools",
        fixtures: &["prompts_glaive.jsonl"],
        args: &[
            "prompts_glaive.jsonl",
            "-d",
            "development",
            "--seed",
            "7",
            "-o",
            "tasks.jsonl",
        ],
    });
}

#[test]
fn sample_tools_shard() {
    check(&Case {
        name: "sample_tools_shard",
        bin: "traj-sample-tools",
        fixtures: &["prompts_glaive.jsonl"],
        args: &[
            "prompts_glaive.jsonl",
            "--shard",
            "1/3",
            "--available",
            "all",
        ],
    });
}

#[test]
fn sample_tools_distributions() {
    check(&Case {
        name: "sample_tools_distributions",
        bin: "traj-sample-tools",
        fixtures: &[],
        args: &["--list-distributions"],
    });
}

#[test]
fn sample_tools_distributions_json() {
    check(&Case {
        name: "sample_tools_distributions_json",
        bin: "traj-sample-tools",
        fixtures: &[],
        args: &["--list-distributions", "--json"],
    });
}

#[test]
fn report_summary() {
    check(&Case {
        name: "report_summary",
        bin: "traj-report",
        fixtures: ROWS,
        args: with_rows!(
            "--on-error",
            "skip",
            "--rejects",
            "rejects.jsonl",
            "--summary",
            "--budget",
            "4000"
        ),
    });
}

#[test]
fn report_compare_summary() {
    check(&Case {
        name: "report_compare_summary",
        bin: "traj-report",
        fixtures: &["rundirs"],
        args: &[
            "--compare",
            "rundirs/hermes-0.19.0",
            "rundirs/hermes-0.21",
            "--summary",
        ],
    });
}

const ATROPOS: &[&str] = &["atropos_scored_groups.jsonl"];

#[test]
fn normalize_atropos_rollouts() {
    check(&Case {
        name: "normalize_atropos_rollouts",
        bin: "traj-normalize",
        fixtures: ATROPOS,
        args: &[
            "atropos_scored_groups.jsonl",
            "--stats",
            "stats.json",
            "-o",
            "rows.jsonl",
        ],
    });
}

#[test]
fn normalize_groups() {
    check(&Case {
        name: "normalize_groups",
        bin: "traj-normalize",
        fixtures: ATROPOS,
        args: &[
            "--to",
            "groups",
            "atropos_scored_groups.jsonl",
            "-o",
            "groups.jsonl",
        ],
    });
}

#[test]
fn normalize_dpo() {
    check(&Case {
        name: "normalize_dpo",
        bin: "traj-normalize",
        fixtures: ATROPOS,
        args: &[
            "--to",
            "dpo",
            "atropos_scored_groups.jsonl",
            "--rejects",
            "rejects.jsonl",
            "--stats",
            "stats.json",
            "-o",
            "dpo.jsonl",
        ],
    });
}

//! Behaviour every binary shares: help, version, usage errors.

use crate::util::*;

const ALL: [&str; 6] = [
    "traj-normalize",
    "traj-filter",
    "traj-merge",
    "traj-compress",
    "traj-sample-tools",
    "traj-run",
];

#[test]
fn every_binary_has_help_and_version() {
    let d = tmpdir();
    for b in ALL {
        let mut c = cmd(b, d.path());
        c.arg("--help");
        let o = run(c);
        assert_code(&o, 0);
        assert!(stdout(&o).contains("Usage:"), "{b} --help: {}", stdout(&o));
        let mut c = cmd(b, d.path());
        c.arg("--version");
        let o = run(c);
        assert_code(&o, 0);
        assert!(stdout(&o).starts_with(b), "{b} --version: {}", stdout(&o));
    }
}

#[test]
fn unknown_flag_is_a_usage_error() {
    let d = tmpdir();
    for b in ALL {
        let mut c = cmd(b, d.path());
        c.arg("--no-such-flag");
        let o = run(c);
        assert_code(&o, 2);
    }
}

#[test]
fn a_missing_input_is_exit_2_naming_the_file() {
    let d = tmpdir();
    for b in ALL {
        let mut c = cmd(b, d.path());
        c.arg("no-such-input.jsonl");
        if b == "traj-run" {
            c.args([
                "--model",
                "m",
                "--run-dir",
                "rd",
                "--base-url",
                "http://127.0.0.1:9/v1",
            ]);
        }
        let o = run(c);
        assert_code(&o, 2);
        assert!(
            stderr(&o).contains("cannot open no-such-input.jsonl"),
            "{b}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn traj_merge_refuses_shard_and_jobs_and_sample_tools_refuses_jobs() {
    let d = tmpdir();
    for (b, flag) in [
        ("traj-merge", ["--shard", "0/2"]),
        ("traj-merge", ["-j", "2"]),
        ("traj-sample-tools", ["-j", "2"]),
    ] {
        let mut c = cmd(b, d.path());
        c.args(flag);
        let o = run(c);
        assert_code(&o, 2);
    }
}

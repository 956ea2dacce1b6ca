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

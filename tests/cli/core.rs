//! Behaviour every binary shares: help, version, usage errors.

use crate::util::*;

const ALL: &[&str] = &[
    "traj-normalize",
    "traj-filter",
    "traj-merge",
    "traj-compress",
    "traj-sample-tools",
    "traj-report",
    #[cfg(feature = "agent")]
    "traj-run",
];

/// The examples of --help paste as they are: no command is cut in two by the help's
/// wrapping (a long line continues with `\` on an indented line of its own), so every
/// line at the examples' indentation is a comment or starts a command.
#[test]
fn help_examples_are_whole_commands() {
    let d = tmpdir();
    for &b in ALL {
        let mut c = cmd(b, d.path());
        c.arg("--help");
        let help = stdout(&run(c));
        let mut in_examples = false;
        for line in help.lines() {
            if line.starts_with("Examples:") {
                in_examples = true;
                continue;
            }
            if !line.starts_with(' ') && !line.is_empty() {
                in_examples = false;
            }
            let Some(first) = line.strip_prefix("  ").filter(|l| !l.starts_with(' ')) else {
                continue;
            };
            if in_examples {
                let word = first.split_whitespace().next().unwrap_or("");
                assert!(
                    word == "#"
                        || word.starts_with("traj-")
                        || word == "cat"
                        || (word.contains('=') && !word.starts_with('-')), // VAR=... cmd
                    "{b} --help: an example cut in two at {line:?}"
                );
            }
        }
    }
}

#[test]
fn every_binary_has_help_and_version() {
    let d = tmpdir();
    for &b in ALL {
        let mut c = cmd(b, d.path());
        c.arg("--help");
        let o = run(c);
        assert_code(&o, 0);
        assert!(stdout(&o).contains("Usage:"), "{b} --help: {}", stdout(&o));
        // Doc comments become the help text: a rustdoc link (`[`x`]`) means nothing there.
        assert!(!stdout(&o).contains("[`"), "{b} --help: {}", stdout(&o));
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
    for &b in ALL {
        let mut c = cmd(b, d.path());
        c.arg("--no-such-flag");
        let o = run(c);
        assert_code(&o, 2);
    }
}

#[test]
fn a_missing_input_is_exit_2_naming_the_file() {
    let d = tmpdir();
    for &b in ALL {
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

/// A stage writing `-o` from a stdin that stays open, stopped by a signal, leaves no
/// temp file; `-o` files get the umask's mode.
#[test]
fn a_signal_leaves_no_temp_file_and_outputs_honour_the_umask() {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    use std::process::Stdio;
    let d = tmpdir();
    for (b, sig) in [
        ("traj-filter", "TERM"),
        ("traj-normalize", "INT"),
        ("traj-merge", "HUP"),
        ("traj-compress", "TERM"),
        ("traj-sample-tools", "INT"),
    ] {
        let mut c = cmd(b, d.path());
        c.args(["-o", "out.jsonl"]).stdin(Stdio::piped());
        if b == "traj-compress" {
            c.arg("--offline");
        }
        let mut child = c.spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(
                b"{\"conversations\":[{\"from\":\"human\",\"value\":\"hi\"}],\"prompt\":\"hi\"}\n",
            )
            .unwrap();
        let temp_seen = (0..200).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            std::fs::read_dir(d.path()).unwrap().any(|e| {
                e.unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with(".traj-")
            })
        });
        assert!(temp_seen, "{b}: no temp file while running");
        let st = std::process::Command::new("kill")
            .args([&format!("-{sig}"), &child.id().to_string()])
            .status()
            .unwrap();
        assert!(st.success());
        let status = child.wait().unwrap();
        assert!(!status.success(), "{b}");
        let left: Vec<String> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(left.is_empty(), "{b} after SIG{sig}: {left:?}");
        drop(stdin);
    }
    // The umask decides the mode of an output file, as for `>`.
    let sh = format!(
        "umask 022 && printf '{{\"a\":1}}\\n' | {} -o o.jsonl",
        bin("traj-filter").display()
    );
    let st = std::process::Command::new("sh")
        .args(["-c", &sh])
        .current_dir(d.path())
        .status()
        .unwrap();
    assert!(st.success());
    let mode = std::fs::metadata(d.path().join("o.jsonl"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o644);
}

/// `make install`'s man pages and completions come from the clap definitions.
#[test]
fn man_pages_and_completions_are_generated_for_every_binary() {
    let d = tmpdir();
    let st = std::process::Command::new(env!("CARGO"))
        .args(["run", "--quiet", "--example", "gen-docs", "--"])
        .arg(d.path())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .unwrap();
    assert!(st.success());
    for &b in ALL {
        let man = std::fs::read_to_string(d.path().join(format!("man/man1/{b}.1"))).unwrap();
        assert!(man.contains(".TH") && man.contains(b), "{b}.1");
        let bash = std::fs::read_to_string(d.path().join(format!("completions/bash/{b}"))).unwrap();
        assert!(bash.contains("--output"), "{b} bash completion");
        assert!(d.path().join(format!("completions/zsh/_{b}")).exists());
        assert!(d.path().join(format!("completions/fish/{b}.fish")).exists());
    }
    // The examples, line for line in no-fill mode, with ASCII minus signs: filled and
    // justified text would cut commands in the middle and join others.
    let man = std::fs::read_to_string(d.path().join("man/man1/traj-filter.1")).unwrap();
    let examples = man
        .split(".SH EXAMPLES\n.nf\n")
        .nth(1)
        .expect(".SH EXAMPLES");
    assert!(
        examples.contains(
            "\n  traj\\-filter \\-\\-well\\-formed \\-\\-invert in.jsonl > malformed.jsonl\n"
        ),
        "{examples}"
    );
    assert!(!man.contains(".SH EXTRA"), "{man}");
}

/// One rule per bad line, the same answer in every stage (README, formats): not UTF-8,
/// not an object, nested 128 levels deep, a key twice are refused with the same words;
/// `1e400` is a number like any other.
#[test]
fn every_stage_answers_a_bad_line_the_same_way() {
    let d = tmpdir();
    let row = r#"{"conversations":[{"from":"human","value":"x"},{"from":"gpt","value":"y"}],"prompt":"p""#;
    let nest = |n: usize| format!("{row},\"d\":{}{}}}", "[".repeat(n - 1), "]".repeat(n - 1));
    let cases: Vec<(&str, Vec<u8>, Option<&str>)> = vec![
        (
            "scalar",
            b"42".to_vec(),
            Some("expected a JSON object, found a number"),
        ),
        (
            "array",
            b"[1]".to_vec(),
            Some("expected a JSON object, found an array"),
        ),
        (
            "utf8",
            [row.as_bytes(), b",\"s\":\"\xff\"}"].concat(),
            Some("invalid UTF-8 at byte"),
        ),
        // Not UTF-8 from its first byte (a UTF-16 byte order mark): the same words.
        (
            "utf8-first",
            b"\xff\xfe{}".to_vec(),
            Some("invalid UTF-8 at byte 0"),
        ),
        (
            "dup",
            format!("{row},\"prompt\":\"q\"}}").into_bytes(),
            Some("duplicate key \"prompt\""),
        ),
        (
            "dup-escaped",
            format!("{row},\"\\u0070rompt\":\"q\"}}").into_bytes(),
            Some("duplicate key \"prompt\""),
        ),
        (
            "dup-nested",
            format!("{row},\"x\":{{\"a\":1,\"a\":2}}}}").into_bytes(),
            Some("duplicate key \"a\""),
        ),
        (
            "deep",
            nest(128).into_bytes(),
            Some("recursion limit exceeded"),
        ),
        ("deep-ok", nest(127).into_bytes(), None),
        ("big", format!("{row},\"n\":1e400}}").into_bytes(), None),
    ];
    let stages: [(&str, &[&str]); 7] = [
        ("traj-filter", &[]),
        ("traj-filter", &["--well-formed"]),
        ("traj-normalize", &[]),
        ("traj-merge", &[]),
        ("traj-compress", &["--offline", "--no-metrics", "-o", "-"]),
        (
            "traj-compress",
            &[
                "--offline",
                "--no-metrics",
                "-o",
                "-",
                "--target-max-tokens",
                "1",
            ],
        ),
        ("traj-sample-tools", &[]),
    ];
    for (name, line, refused) in &cases {
        let file = format!("{name}.jsonl");
        std::fs::write(d.path().join(&file), [line.as_slice(), b"\n"].concat()).unwrap();
        for (b, args) in stages {
            let mut c = cmd(b, d.path());
            c.args(args).arg(&file);
            let o = run(c);
            match refused {
                Some(words) => {
                    assert_code(&o, 1);
                    let want = format!("{file}:1: ");
                    assert!(
                        stderr(&o).contains(&want) && stderr(&o).contains(words),
                        "{b} {args:?} on {name}: {}",
                        stderr(&o)
                    );
                }
                None => assert_code(&o, 0),
            }
        }
    }
}

/// traj-filter's pass-through gives the same bytes whichever way they travel: a plain
/// file into a pipe (kept ranges spliced from the file), a gzip file and stdin into a
/// pipe (written from memory), a plain file into a regular file (`>`) and through `-o`
/// (written behind and synced): many chunks, lines longer than a chunk, CR LF lines, a
/// BOM, bad lines skipped to the rejects file and a missing final newline.
#[test]
fn pass_through_is_the_same_on_every_path() {
    let d = tmpdir();
    let real = std::fs::read(fixture("hermes_reason_tool_use_50.jsonl")).unwrap();
    let rows: Vec<&[u8]> = real
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    let mut input = b"\xEF\xBB\xBF".to_vec();
    let mut want = Vec::new();
    for i in 0..2600 {
        let row = rows[i % rows.len()];
        match i % 97 {
            5 => input.extend_from_slice(b"{\"truncated\": \n"), // bad: skipped
            11 => {
                input.extend_from_slice(row);
                input.extend_from_slice(b"\r\n"); // CR removed
                want.extend_from_slice(row);
                want.push(b'\n');
            }
            13 => input.extend_from_slice(b"   \n"), // blank: skipped
            _ => {
                input.extend_from_slice(row);
                input.push(b'\n');
                want.extend_from_slice(row);
                want.push(b'\n');
            }
        }
        if i == 1300 {
            // one line longer than a 4 MiB chunk
            let long = format!("{{\"pad\": \"{}\"}}", "y".repeat(9 << 20));
            input.extend_from_slice(long.as_bytes());
            input.push(b'\n');
            want.extend_from_slice(long.as_bytes());
            want.push(b'\n');
        }
    }
    let last = br#"{"last": "no newline"}"#;
    input.extend_from_slice(last);
    want.extend_from_slice(last);
    want.push(b'\n');
    let p = d.path().join("in.jsonl");
    std::fs::write(&p, &input).unwrap();
    let gz = d.path().join("in.jsonl.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut enc, &input).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();
    let flags = ["-q", "--on-error", "skip", "--rejects", "rej.jsonl"];
    let bad = 2600 / 97 + 1;
    let check_rejects = |how: &str| {
        let r = read_jsonl(&d.path().join("rej.jsonl"));
        assert_eq!(r.len(), bad, "{how}: rejects");
    };
    // file -> pipe (spliced), gzip file -> pipe, stdin -> pipe
    for src in [&p, &gz] {
        let mut c = cmd("traj-filter", d.path());
        c.arg(src).args(flags);
        let o = run(c);
        assert_code(&o, 0);
        assert!(o.stdout == want, "{}: output differs", src.display());
        check_rejects("file");
    }
    let mut c = cmd("traj-filter", d.path());
    c.args(flags);
    let o = run_with_stdin(c, &input);
    assert_code(&o, 0);
    assert!(o.stdout == want, "stdin: output differs");
    check_rejects("stdin");
    // file -> regular file, by the shell and by -o
    let out = std::fs::File::create(d.path().join("shell.jsonl")).unwrap();
    let mut c = cmd("traj-filter", d.path());
    c.arg(&p).args(flags).stdout(out);
    assert!(c.status().unwrap().success());
    assert!(
        std::fs::read(d.path().join("shell.jsonl")).unwrap() == want,
        "> file"
    );
    let mut c = cmd("traj-filter", d.path());
    c.arg(&p).args(flags).args(["-o", "o.jsonl"]);
    assert_code(&run(c), 0);
    assert!(
        std::fs::read(d.path().join("o.jsonl")).unwrap() == want,
        "-o file"
    );
    // Strict: stops at the first bad line (line 6), everything
    // before it written, nothing after, spliced or not.
    let upto: usize = want
        .split_inclusive(|&b| b == b'\n')
        .take(5)
        .map(<[u8]>::len)
        .sum();
    for stdin in [false, true] {
        let mut c = cmd("traj-filter", d.path());
        c.arg("-q");
        let o = if stdin {
            run_with_stdin(c, &input)
        } else {
            c.arg(&p);
            run(c)
        };
        assert_code(&o, 1);
        assert!(stderr(&o).contains(":6:"), "{}", stderr(&o));
        assert!(o.stdout == want[..upto], "strict prefix (stdin: {stdin})");
    }
}

/// A file a run writes must meet neither another written file nor an input: `--rejects`
/// on `-o` would leave one of them, `--rejects` or `--stats` on an input would replace
/// the rows read from it. Each is refused (exit 2) before anything is written, and the
/// input keeps its bytes.
#[test]
fn written_files_meet_neither_each_other_nor_an_input() {
    let d = tmpdir();
    let row = r#"{"conversations":[{"from":"human","value":"q"},{"from":"gpt","value":"a"}]}"#;
    let input = format!("{row}\n{{bad\n");
    std::fs::write(d.path().join("in.jsonl"), &input).unwrap();
    let refused = |b: &str, args: &[&str], says: &str| {
        let mut c = cmd(b, d.path());
        c.args(args).env("TRAJ_TEST_KEY", "k");
        let o = run(c);
        assert_code(&o, 2);
        assert_stderr_has(&o, says);
        assert_eq!(
            std::fs::read_to_string(d.path().join("in.jsonl")).unwrap(),
            input,
            "{b} {args:?} changed its input"
        );
        assert!(!d.path().join("x.jsonl").exists(), "{b} {args:?} wrote");
    };
    let twice = "-o and --rejects both name x.jsonl: give each its own file";
    let rej_is_input = "--rejects in.jsonl is an input of this run";
    let skip = ["--on-error", "skip"];
    for b in [
        "traj-normalize",
        "traj-filter",
        "traj-merge",
        "traj-compress",
    ] {
        let mut args = vec!["in.jsonl", "-o", "x.jsonl", "--rejects", "./x.jsonl"];
        args.extend(skip);
        refused(b, &args, &twice.replace("x.jsonl: give", "./x.jsonl: give"));
        let mut args = vec!["in.jsonl", "--rejects", "in.jsonl"];
        args.extend(skip);
        refused(b, &args, rej_is_input);
    }
    for b in ["traj-normalize", "traj-filter"] {
        refused(
            b,
            &["in.jsonl", "--stats", "in.jsonl"],
            "--stats in.jsonl is an input of this run",
        );
        refused(
            b,
            &["in.jsonl", "-o", "x.jsonl", "--stats", "x.jsonl"],
            "-o and --stats both name x.jsonl",
        );
    }
    refused(
        "traj-compress",
        &["in.jsonl", "-o", "x.jsonl", "--stats", "in.jsonl"],
        "--stats in.jsonl is an input of this run",
    );
    // A report page is not rows: it may not replace an input either.
    refused(
        "traj-report",
        &["in.jsonl", "-o", "in.jsonl"],
        "-o in.jsonl is an input of this run",
    );
    #[cfg(feature = "agent")]
    refused(
        "traj-run",
        &[
            "in.jsonl",
            "--run-dir",
            "r",
            "--model",
            "m",
            "--api-key-env",
            "TRAJ_TEST_KEY",
            "--rejects",
            "in.jsonl",
        ],
        rej_is_input,
    );
    // -o onto the input stays allowed for a stage: the rows replace themselves, but
    // never with a line lost on the way (it would be in no file at all).
    for b in [
        "traj-filter",
        "traj-normalize",
        "traj-merge",
        "traj-compress",
    ] {
        let o = run_in(
            b,
            d.path(),
            &["in.jsonl", "-o", "in.jsonl", "--on-error", "skip", "-q"],
        );
        assert_code(&o, 1);
        assert_stderr_has(
            &o,
            "-o in.jsonl: not written: it is an input of this run, and 1 lines would be lost",
        );
        assert_eq!(
            std::fs::read_to_string(d.path().join("in.jsonl")).unwrap(),
            input,
            "{b}"
        );
    }
    // The input read through stdin (`- < in.jsonl`) is the input too.
    let mut c = cmd("traj-filter", d.path());
    c.args(["-", "-o", "in.jsonl", "--on-error", "skip", "-q"]);
    c.stdin(std::fs::File::open(d.path().join("in.jsonl")).unwrap());
    let o = c.output().unwrap();
    assert_code(&o, 1);
    assert_stderr_has(&o, "not written: it is an input of this run");
    assert_eq!(
        std::fs::read_to_string(d.path().join("in.jsonl")).unwrap(),
        input
    );
    let o = run_in(
        "traj-filter",
        d.path(),
        &[
            "in.jsonl",
            "-o",
            "in.jsonl",
            "--on-error",
            "skip",
            "--rejects",
            "r.jsonl",
            "-q",
        ],
    );
    assert_code(&o, 0);
    assert_eq!(
        std::fs::read_to_string(d.path().join("in.jsonl")).unwrap(),
        format!("{row}\n")
    );
    assert!(
        std::fs::read_to_string(d.path().join("r.jsonl"))
            .unwrap()
            .contains("{bad")
    );
}

/// `--rejects LINK` writes through the link as `>` does: a link to the process's stdout
/// (`/proc/self/fd/1`, what `/dev/stdout` is) sends the rejects to wherever stdout goes,
/// and the link stays a link; the same holds for `-o`.
#[test]
fn outputs_are_written_through_links() {
    let d = tmpdir();
    let good = r#"{"conversations":[{"from":"human","value":"q"},{"from":"gpt","value":"a"}]}"#;
    let bad = r#"{"conversations":[]}"#;
    std::fs::write(d.path().join("in.jsonl"), format!("{good}\n{bad}\n")).unwrap();
    let so = d.path().join("so");
    std::os::unix::fs::symlink("/proc/self/fd/1", &so).unwrap();
    let captured = d.path().join("captured.txt");
    let mut c = cmd("traj-filter", d.path());
    c.args([
        "in.jsonl",
        "--min-turns",
        "1",
        "-o",
        "kept.jsonl",
        "--rejects",
        "so",
        "-q",
    ]);
    c.stdout(std::fs::File::create(&captured).unwrap());
    let o = run(c);
    assert_code(&o, 0);
    assert!(so.symlink_metadata().unwrap().file_type().is_symlink());
    let rejects = std::fs::read_to_string(&captured).unwrap();
    assert_eq!(rejects.lines().count(), 1, "{rejects}");
    assert!(rejects.contains(r#"{\"conversations\":[]}"#), "{rejects}");
    // -o through a link to a file: the file gets the rows, the link stays.
    std::fs::create_dir(d.path().join("v1")).unwrap();
    std::os::unix::fs::symlink("v1/data.jsonl", d.path().join("current.jsonl")).unwrap();
    let o = run_in(
        "traj-filter",
        d.path(),
        &["in.jsonl", "-o", "current.jsonl", "-q"],
    );
    assert_code(&o, 0);
    let link = d.path().join("current.jsonl");
    assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
    assert_eq!(
        std::fs::read_to_string(d.path().join("v1/data.jsonl")).unwrap(),
        format!("{good}\n{bad}\n")
    );
}

/// Stdout takes one stream of rows, whatever it is called: `/dev/stdout`, a link to
/// fd 1, or the very file the shell sent stdout to. Naming it for two outputs is refused
/// (exit 2) before anything is written; naming it once writes there.
#[test]
fn stdout_by_any_name_takes_one_stream() {
    let d = tmpdir();
    let good = r#"{"conversations":[{"from":"human","value":"q"},{"from":"gpt","value":"a"}]}"#;
    let bad = r#"{"conversations":[]}"#;
    std::fs::write(d.path().join("in.jsonl"), format!("{good}\n{bad}\n")).unwrap();
    let to_file = |b: &str, args: &[&str], file: &str| {
        let mut c = cmd(b, d.path());
        c.args(args);
        c.stdout(std::fs::File::create(d.path().join(file)).unwrap());
        run(c)
    };
    for b in ["traj-filter", "traj-normalize", "traj-merge"] {
        for args in [
            &["in.jsonl", "-o", "/dev/stdout", "--rejects", "-"][..],
            &["in.jsonl", "-o", "/proc/self/fd/1", "--rejects", "-"],
            &["in.jsonl", "-o", "out.jsonl", "--rejects", "-"],
        ] {
            let mut a = args.to_vec();
            a.extend(["--on-error", "skip"]);
            let o = to_file(b, &a, "out.jsonl");
            assert_code(&o, 2);
            assert_stderr_has(&o, "both name stdout");
            assert_eq!(
                std::fs::read_to_string(d.path().join("out.jsonl")).unwrap(),
                "",
                "{b} {args:?}"
            );
        }
    }
    // Through a pipe, too.
    let mut c = cmd("traj-filter", d.path());
    c.args(["in.jsonl", "-o", "/dev/stdout", "--rejects", "-"]);
    let o = run(c);
    assert_code(&o, 2);
    assert_stderr_has(&o, "-o and --rejects both name stdout");
    // Once is fine: the rows go where stdout goes.
    let o = to_file(
        "traj-filter",
        &[
            "in.jsonl",
            "--min-turns",
            "1",
            "-o",
            "/dev/stdout",
            "--rejects",
            "rej.jsonl",
        ],
        "got.jsonl",
    );
    assert_code(&o, 0);
    assert_eq!(
        std::fs::read_to_string(d.path().join("got.jsonl")).unwrap(),
        format!("{good}\n")
    );
    // stdout appending to an input (`f >> f`, `- < f >> f`) would read its own rows
    // back without end: refused, the input as it was.
    for args in [&["in.jsonl"][..], &["-"]] {
        let mut c = cmd("traj-filter", d.path());
        c.args(args);
        let f = d.path().join("in.jsonl");
        c.stdout(std::fs::OpenOptions::new().append(true).open(&f).unwrap());
        c.stdin(match args {
            ["-"] => std::process::Stdio::from(std::fs::File::open(&f).unwrap()),
            _ => std::process::Stdio::null(),
        });
        let o = c.output().unwrap();
        assert_code(&o, 2);
        assert_stderr_has(
            &o,
            "an input of this run: what is written would be read back",
        );
        assert_eq!(
            std::fs::read_to_string(&f).unwrap(),
            format!("{good}\n{bad}\n"),
            "{args:?}"
        );
    }
    // stdout on /dev/null takes any number of streams.
    let mut c = cmd("traj-filter", d.path());
    c.args([
        "in.jsonl",
        "-o",
        "/dev/stdout",
        "--rejects",
        "-",
        "--min-turns",
        "1",
    ]);
    c.stdout(std::process::Stdio::null());
    assert_code(&run(c), 0);
}

/// An output that cannot be made (its folder is missing) is the command line's to fix:
/// exit 2, the path as given, before any row is read; traj-compress makes the folders.
#[test]
fn an_output_that_cannot_be_created_exits_2() {
    let d = tmpdir();
    std::fs::write(
        d.path().join("in.jsonl"),
        "{\"conversations\":[{\"from\":\"human\",\"value\":\"q\"}]}\n",
    )
    .unwrap();
    for b in ["traj-filter", "traj-normalize", "traj-merge"] {
        for flag in ["-o", "--rejects"] {
            let o = run_in(b, d.path(), &["in.jsonl", flag, "no/such/x.jsonl"]);
            assert_code(&o, 2);
            assert_stderr_has(
                &o,
                "cannot create no/such/x.jsonl: No such file or directory",
            );
        }
    }
}

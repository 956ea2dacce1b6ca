//! traj-sample-tools on real prompts: fields added and passed through, determinism,
//! sharding, distributions files, listings, bad rows, toolset frequencies, and draws
//! that do not depend on the machine.

use std::collections::HashMap;
use std::process::Output;

use serde_json::Value;

use crate::util::*;

const BIN: &str = "traj-sample-tools";

fn sample(dir: &std::path::Path, args: &[&str], stdin: &[u8]) -> std::process::Output {
    let mut c = cmd(BIN, dir);
    c.args(args);
    run_with_stdin(c, stdin)
}

fn prompts() -> String {
    fixture("prompts_glaive.jsonl").display().to_string()
}

#[test]
fn adds_toolsets_and_passes_fields_through() {
    let d = tmpdir();
    let o = sample(d.path(), &["-d", "development", &prompts()], b"");
    assert_code(&o, 0);
    let input = read_jsonl(&fixture("prompts_glaive.jsonl"));
    let rows = parse_jsonl(&stdout(&o));
    assert_eq!(rows.len(), 300);
    assert!(
        stderr(&o).contains("300 read, 300 written"),
        "{}",
        stderr(&o)
    );
    let allowed = ["terminal", "file", "moa", "web", "vision"];
    for (i, (row, orig)) in rows.iter().zip(&input).enumerate() {
        let keys: Vec<&str> = row
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "prompt",
                "source",
                "row",
                "toolsets",
                "distribution",
                "seed",
                "prompt_index"
            ]
        );
        assert_eq!(row["prompt"], orig["prompt"]);
        assert_eq!(row["row"], orig["row"]);
        assert_eq!(row["distribution"], "development");
        assert_eq!(row["seed"], 0);
        assert_eq!(row["prompt_index"], i);
        let sets = row["toolsets"].as_array().unwrap();
        assert!(!sets.is_empty());
        for s in sets {
            assert!(allowed.contains(&s.as_str().unwrap()), "{s}");
        }
    }
}

#[test]
fn draws_depend_only_on_seed_and_row() {
    let d = tmpdir();
    let data = std::fs::read(fixture("prompts_glaive.jsonl")).unwrap();
    let a = sample(
        d.path(),
        &["-d", "balanced", "--seed", "9", &prompts()],
        b"",
    );
    let b = sample(d.path(), &["-d", "balanced", "--seed", "9"], &data);
    let c = sample(
        d.path(),
        &["-d", "balanced", "--seed", "10", &prompts()],
        b"",
    );
    assert_code(&a, 0);
    assert_eq!(stdout(&a), stdout(&b), "file and stdin agree");
    assert_ne!(stdout(&a), stdout(&c), "another seed, other draws");
    // Shards hold the same rows with the same toolsets.
    let mut parts = Vec::new();
    for i in 0..3 {
        let o = sample(
            d.path(),
            &[
                "-d",
                "balanced",
                "--seed",
                "9",
                "--shard",
                &format!("{i}/3"),
                &prompts(),
            ],
            b"",
        );
        assert_code(&o, 0);
        parts.extend(parse_jsonl(&stdout(&o)));
    }
    parts.sort_by_key(|r| r["prompt_index"].as_u64().unwrap());
    assert_eq!(parts, parse_jsonl(&stdout(&a)));
    // A row that carries its prompt_index keeps it (and its draw) wherever it is.
    let all = parse_jsonl(&stdout(&a));
    let moved = "{\"prompt\":\"x\",\"prompt_index\":123}\n{\"prompt\":\"y\",\"prompt_index\":45}\n";
    let o = sample(
        d.path(),
        &["-d", "balanced", "--seed", "9"],
        moved.as_bytes(),
    );
    let rows = parse_jsonl(&stdout(&o));
    assert_eq!(rows[0]["toolsets"], all[123]["toolsets"]);
    assert_eq!(rows[1]["toolsets"], all[45]["toolsets"]);
    assert_eq!(rows[0]["prompt_index"], 123);
}

#[test]
fn distributions_file_adds_and_overrides() {
    let d = tmpdir();
    std::fs::write(
        d.path().join("mine.json"),
        r#"{"minimal": {"description": "terminal instead", "toolsets": {"terminal": 100}},
            "coder": {"file": 100, "code_execution": 50}}"#,
    )
    .unwrap();
    let input = b"{\"prompt\":\"a\"}\n{\"prompt\":\"b\",\"distribution\":\"coder\"}\n{\"prompt\":\"c\",\"distribution\":\"terminal_web\"}\n";
    let o = sample(
        d.path(),
        &["--distributions", "mine.json", "-d", "minimal"],
        input,
    );
    assert_code(&o, 0);
    let rows = parse_jsonl(&stdout(&o));
    assert_eq!(rows[0]["toolsets"], serde_json::json!(["terminal"]));
    assert_eq!(rows[1]["distribution"], "coder");
    assert_eq!(rows[1]["toolsets"][0], "file");
    assert_eq!(
        rows[2]["toolsets"],
        serde_json::json!(["terminal", "file", "web"])
    );
    let o = sample(
        d.path(),
        &["--distributions", "mine.json", "--list-distributions"],
        b"",
    );
    let table = stdout(&o);
    assert!(
        table.contains("coder") && table.contains("terminal instead"),
        "{table}"
    );

    std::fs::write(d.path().join("bad.json"), r#"{"x": {"web": 120}}"#).unwrap();
    let o = sample(d.path(), &["--distributions", "bad.json"], input);
    assert_code(&o, 2);
    assert!(
        stderr(&o).contains("bad.json: distribution \"x\": toolset \"web\""),
        "{}",
        stderr(&o)
    );
    std::fs::write(d.path().join("typo.json"), r#"{"x": {"wbe": 50}}"#).unwrap();
    let o = sample(
        d.path(),
        &["--distributions", "typo.json", "-d", "x"],
        input,
    );
    assert_code(&o, 2);
    assert!(
        stderr(&o).contains("unknown toolset \"wbe\""),
        "{}",
        stderr(&o)
    );
    let o = sample(d.path(), &["-d", "nope"], input);
    assert_code(&o, 2);
    assert!(
        stderr(&o).contains("unknown distribution \"nope\""),
        "{}",
        stderr(&o)
    );
    // With only web declared available, browser_only has nothing to draw, unless every
    // toolset is declared available.
    let o = sample(
        d.path(),
        &["-d", "browser_only", "--available", "web"],
        input,
    );
    assert_code(&o, 2);
    assert!(
        stderr(&o).contains("distribution \"browser_only\" has no available toolset"),
        "{}",
        stderr(&o)
    );
    let o = sample(
        d.path(),
        &["-d", "browser_only", "--available", "all"],
        b"{\"prompt\":\"a\"}\n",
    );
    assert_code(&o, 0);
    assert_eq!(
        parse_jsonl(&stdout(&o))[0]["toolsets"],
        serde_json::json!(["browser"])
    );
}

#[test]
fn bad_rows_are_located_and_follow_the_policy() {
    let d = tmpdir();
    let input = "{\"prompt\":\"ok\"}\n\n{\"text\":\"no prompt\"}\n{\"prompt\":42}\nnot json\n[1]\n{\"prompt\":\"p\",\"prompt_index\":\"7\"}\n{\"prompt\":\"last\"}\n";
    std::fs::write(d.path().join("in.jsonl"), input).unwrap();
    let o = sample(d.path(), &["in.jsonl"], b"");
    assert_code(&o, 1);
    assert!(
        stderr(&o).contains("in.jsonl:3: missing \"prompt\""),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        parse_jsonl(&stdout(&o)).len(),
        1,
        "rows before the bad one are written"
    );

    let o = sample(
        d.path(),
        &["in.jsonl", "--on-error", "skip", "--rejects", "rej.jsonl"],
        b"",
    );
    assert_code(&o, 0);
    let rows = parse_jsonl(&stdout(&o));
    assert_eq!(rows.len(), 2);
    assert_eq!(
        rows[1]["prompt_index"], 6,
        "bad rows keep their place in the index"
    );
    let rej = read_jsonl(&d.path().join("rej.jsonl"));
    let got: Vec<(u64, String)> = rej
        .iter()
        .map(|r| {
            (
                r["line"].as_u64().unwrap(),
                r["reasons"][0].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(got[0], (3, "missing \"prompt\"".to_string()));
    assert_eq!(
        got[1],
        (4, "\"prompt\" must be a string, found a number".to_string())
    );
    assert!(got[2].1.starts_with("invalid JSON"), "{:?}", got[2]);
    assert_eq!(got[3].1, "expected a JSON object, found an array");
    assert!(got[4].1.contains("prompt_index"), "{:?}", got[4]);
    assert_eq!(rej[0]["record"]["text"], "no prompt");

    let o = sample(d.path(), &["in.jsonl", "--on-error", "skip"], b"");
    assert_code(&o, 1);
    assert!(stderr(&o).contains("5 bad lines skipped"), "{}", stderr(&o));
}

#[test]
fn listings_as_tables_and_json() {
    let d = tmpdir();
    let o = sample(d.path(), &["--list-distributions"], b"");
    assert_code(&o, 0);
    let table = stdout(&o);
    for name in [
        "default",
        "image_gen",
        "research",
        "science",
        "development",
        "safe",
        "balanced",
        "minimal",
        "terminal_only",
        "terminal_web",
        "creative",
        "reasoning",
        "browser_use",
        "browser_only",
        "browser_tasks",
        "terminal_tasks",
        "mixed_tasks",
    ] {
        assert!(
            table.lines().any(|l| l.starts_with(&format!("{name} "))),
            "{name}: {table}"
        );
    }
    let o = sample(d.path(), &["--list-distributions", "--json"], b"");
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 17);
    assert_eq!(v[4]["name"], "development");
    assert_eq!(v[4]["toolsets"]["terminal"], 80.0);
    assert_eq!(v[4]["fallback"], "terminal");
    // With a Chromium (TRAJ_CHROMIUM names one) the browser tools are there; the
    // toolsets traj implements nothing of say why they are never drawn.
    let mut c = cmd(BIN, d.path());
    c.env("TRAJ_CHROMIUM", "/bin/sh").arg("--list-toolsets");
    let table = stdout(&run(c));
    let browser = table.lines().find(|l| l.starts_with("browser ")).unwrap();
    assert!(browser.contains(" yes "), "{browser}");
    assert!(browser.contains("browser_navigate,"), "{browser}");
    assert!(browser.contains("browser_cdp*"), "{browser}");
    assert!(!browser.contains("cannot run here"), "{browser}");
    let skills = table.lines().find(|l| l.starts_with("skills ")).unwrap();
    assert!(
        skills.contains("[never drawn: traj implements none of its tools]"),
        "{skills}"
    );
    let o = sample(d.path(), &["--list-toolsets", "--json"], b"");
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let file = v
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "file")
        .unwrap();
    assert_eq!(file["sampled"], true);
    assert_eq!(file["tools"][0]["name"], "read_file");
    let status = if cfg!(feature = "agent") {
        "available"
    } else {
        "implemented (not checked here: built without the agent runtime)"
    };
    assert_eq!(file["tools"][0]["status"], status);
    let o = sample(d.path(), &["--help"], b"");
    assert!(stdout(&o).contains("Examples:"));
}

/// 20,000 rows through the binary: each toolset's frequency is within one point of
/// the exact expectation the binary itself publishes (fallback included), for every
/// distribution, with traj's availability and with every toolset available.
#[test]
fn frequencies_over_20000_rows() {
    let d = tmpdir();
    let input: String = (0..20_000)
        .map(|i| format!("{{\"prompt\":\"p{i}\"}}\n"))
        .collect();
    for available in [None, Some("all")] {
        let mut extra: Vec<&str> = Vec::new();
        if let Some(a) = available {
            extra.extend(["--available", a]);
        }
        let mut args = vec!["--list-distributions", "--json"];
        args.extend(&extra);
        let listing: Value = serde_json::from_str(&stdout(&sample(d.path(), &args, b""))).unwrap();
        for dist in listing.as_array().unwrap() {
            let name = dist["name"].as_str().unwrap();
            if dist["fallback"].is_null() {
                continue; // nothing available (browser_only): refused, tested elsewhere
            }
            let mut args = vec!["-d", name, "--seed", "2026"];
            args.extend(&extra);
            let o = sample(d.path(), &args, input.as_bytes());
            assert_code(&o, 0);
            let mut counts: HashMap<String, u64> = HashMap::new();
            for row in parse_jsonl(&stdout(&o)) {
                for t in row["toolsets"].as_array().unwrap() {
                    *counts.entry(t.as_str().unwrap().to_string()).or_default() += 1;
                }
            }
            for (t, p) in dist["toolsets"].as_object().unwrap() {
                let want = dist["expected_frequency"][t].as_f64().unwrap();
                let got = *counts.get(t).unwrap_or(&0) as f64 / 20_000.0;
                assert!(
                    (got - want).abs() < 0.01,
                    "{name} {available:?}: {t}: {got} vs {want} (p {p})"
                );
                if available == Some("all") && dist["fallback"] != t.as_str() {
                    assert!((want - p.as_f64().unwrap() / 100.0).abs() < 1e-12);
                }
            }
        }
    }
}

/// A bad UTF-8 byte in a field the sampler does not read is still bad input: the row
/// is refused (as Python's `json` would), never copied to the output.
#[test]
fn invalid_utf8_in_any_field_is_refused() {
    let d = tmpdir();
    let mut input = b"{\"prompt\":\"ok\"}\n{\"prompt\":\"p\",\"note\":\"\xff\"}\n".to_vec();
    input.extend_from_slice(b"{\"prompt\":\"last\"}\n");
    std::fs::write(d.path().join("in.jsonl"), &input).unwrap();
    let o = sample(
        d.path(),
        &["in.jsonl", "--on-error", "skip", "--rejects", "rej.jsonl"],
        b"",
    );
    assert_code(&o, 0);
    assert!(std::str::from_utf8(&o.stdout).is_ok(), "output is UTF-8");
    let rows = parse_jsonl(&stdout(&o));
    assert_eq!(rows.len(), 2);
    let rej = read_jsonl(&d.path().join("rej.jsonl"));
    assert_eq!(rej.len(), 1);
    assert_eq!(rej[0]["line"], 2);
    assert!(
        rej[0]["reasons"][0]
            .as_str()
            .unwrap()
            .starts_with("invalid JSON"),
        "{}",
        rej[0]
    );
}

/// On any machine, `--list-distributions` marks no toolset of any built-in
/// distribution as unavailable, and 4000 rows of each distribution through the binary
/// draw every toolset it lists, and never an empty list.
#[test]
fn every_listed_toolset_is_drawn_in_4000_rows() {
    let d = tmpdir();
    let table = stdout(&sample(d.path(), &["--list-distributions"], b""));
    assert!(
        !table.lines().skip(1).any(|l| l.contains("* ")),
        "a toolset is marked not available:\n{table}"
    );
    let listing: Value = serde_json::from_str(&stdout(&sample(
        d.path(),
        &["--list-distributions", "--json"],
        b"",
    )))
    .unwrap();
    let input: String = (0..4000)
        .map(|i| format!("{{\"prompt\":\"p{i}\"}}\n"))
        .collect();
    for dist in listing.as_array().unwrap() {
        let name = dist["name"].as_str().unwrap();
        let o = sample(d.path(), &["-d", name, "--seed", "11"], input.as_bytes());
        assert_code(&o, 0);
        let rows = parse_jsonl(&stdout(&o));
        assert_eq!(rows.len(), 4000);
        let mut seen = std::collections::BTreeSet::new();
        for row in &rows {
            let t = row["toolsets"].as_array().unwrap();
            assert!(!t.is_empty(), "{name}: empty draw {row}");
            seen.extend(t.iter().map(|v| v.as_str().unwrap().to_string()));
        }
        for (t, p) in dist["toolsets"].as_object().unwrap() {
            assert!(
                dist["expected_frequency"][t].as_f64().unwrap() > 0.0,
                "{name}: {t}"
            );
            if p.as_f64().unwrap() > 0.0 {
                assert!(seen.contains(t), "{name}: {t} never drawn in 4000 rows");
            }
        }
    }
}

/// traj-sample-tools then traj-run, on every built-in distribution, against the stand-in
/// with every toolset configured: no request offers an empty `tools` list, every record
/// has the toolsets traj-sample-tools drew, and traj-run's own draw from the same
/// distribution and seed gives each prompt those same toolsets (one sampler, one
/// availability rule).
#[test]
#[cfg(feature = "agent")]
fn sample_then_run_never_offers_no_tools_and_draws_alike() {
    use crate::standin::Standin;
    let d = tmpdir();
    let s = Standin::json(serde_json::json!({"default": {"content": "Final: {prompt}"}}));
    let prompts: String = (0..12)
        .map(|i| format!("{{\"prompt\":\"question {i}\"}}\n"))
        .collect();
    std::fs::write(d.path().join("prompts.jsonl"), &prompts).unwrap();
    let listing: Value = serde_json::from_str(&stdout(&sample(
        d.path(),
        &["--list-distributions", "--json"],
        b"",
    )))
    .unwrap();
    let run_with = |run_dir: &str, input: &str, extra: &[&str]| {
        let mut c = cmd("traj-run", d.path());
        c.env("TMPDIR", d.path())
            .env("OPENAI_API_KEY", "sk-test")
            .args(["--model", "standin", "--base-url", &s.url(), "-q"])
            .args(["--sandbox", "local", "--vision-model", "standin-vision"])
            .args(["--image-model", "standin-image", "--search", "searxng"])
            .args(["--search-url", "http://127.0.0.1:9", "--run-dir", run_dir])
            .arg(input)
            .args(extra);
        let o = run(c);
        assert_code(&o, 0);
        let mut by_index: Vec<(u64, Value)> = parse_jsonl(&stdout(&o))
            .into_iter()
            .map(|r| (r["prompt_index"].as_u64().unwrap(), r["toolsets"].clone()))
            .collect();
        by_index.sort_by_key(|(i, _)| *i);
        by_index
    };
    // traj-sample-tools -d NAME --seed 5 into tasks.jsonl: (prompt_index, toolsets) per row.
    let draw = |name: &str| -> Vec<(u64, Value)> {
        let args = [
            "-d",
            name,
            "--seed",
            "5",
            "prompts.jsonl",
            "-o",
            "tasks.jsonl",
        ];
        let o = sample(d.path(), &args, b"");
        assert_code(&o, 0);
        read_jsonl(&d.path().join("tasks.jsonl"))
            .into_iter()
            .map(|r| (r["prompt_index"].as_u64().unwrap(), r["toolsets"].clone()))
            .collect()
    };
    for (k, dist) in listing.as_array().unwrap().iter().enumerate() {
        let name = dist["name"].as_str().unwrap();
        let drawn: Vec<(u64, Value)> = draw(name);
        let before = s.count() as usize;
        let ran = run_with(&format!("data/a{k}"), "tasks.jsonl", &[]);
        assert_eq!(ran, drawn, "{name}: records differ from the sampled rows");
        for req in &s.requests()[before..] {
            let tools = req["tools"].as_array();
            assert!(
                tools.is_some_and(|t| !t.is_empty()),
                "{name}: a request offered no tools: {}",
                req["tools"]
            );
        }
        let own = run_with(
            &format!("data/b{k}"),
            "prompts.jsonl",
            &["--distribution", name, "--seed", "5"],
        );
        assert_eq!(own, drawn, "{name}: traj-run's own draw differs");
    }
    // A bad row skipped keeps its place in both: the rows after it get the same
    // prompt_index, so the same toolsets (traj-run once counted only the valid rows).
    let with_bad: String = (0..8)
        .map(|i| match i {
            2 => "{\"prompt\":\"\"}\n".to_string(),
            _ => format!("{{\"prompt\":\"question {i}\"}}\n"),
        })
        .collect();
    std::fs::write(d.path().join("bad.jsonl"), with_bad).unwrap();
    let args = [
        "-d",
        "development",
        "--seed",
        "3",
        "--on-error",
        "skip",
        "--rejects",
        "sample_rejects.jsonl",
        "bad.jsonl",
        "-o",
        "bad_tasks.jsonl",
    ];
    assert_code(&sample(d.path(), &args, b""), 0);
    let drawn: Vec<(u64, Value)> = read_jsonl(&d.path().join("bad_tasks.jsonl"))
        .into_iter()
        .map(|r| (r["prompt_index"].as_u64().unwrap(), r["toolsets"].clone()))
        .collect();
    assert_eq!(
        drawn.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        [0, 1, 3, 4, 5, 6, 7]
    );
    let own = run_with(
        "data/bad",
        "bad.jsonl",
        &[
            "--distribution",
            "development",
            "--seed",
            "3",
            "--on-error",
            "skip",
            "--rejects",
            "run_rejects.jsonl",
        ],
    );
    assert_eq!(
        own, drawn,
        "traj-run gave the rows after a skipped one other indices"
    );
    // Configuration is not part of the rule: without --image-model, traj-run still
    // draws what traj-sample-tools draws; a task whose drawn tools are all unconfigured
    // is a failure naming them, never a request without tools.
    let drawn: HashMap<u64, Value> = draw("image_gen").into_iter().collect();
    let before = s.count() as usize;
    let mut c = cmd("traj-run", d.path());
    c.env("TMPDIR", d.path())
        .env("OPENAI_API_KEY", "sk-test")
        .args(["--model", "standin", "--base-url", &s.url(), "-q"])
        .args(["--sandbox", "local", "--vision-model", "standin-vision"])
        .args([
            "--run-dir",
            "data/c",
            "--distribution",
            "image_gen",
            "--seed",
            "5",
        ])
        .arg("prompts.jsonl");
    let o = run(c);
    let records = parse_jsonl(&stdout(&o));
    for r in &records {
        let i = r["prompt_index"].as_u64().unwrap();
        assert_eq!(r["toolsets"], drawn[&i], "prompt {i}");
    }
    let failures =
        std::fs::read_to_string(d.path().join("data/c/failures.jsonl")).unwrap_or_default();
    let failures: Vec<Value> = parse_jsonl(&failures);
    assert_eq!(records.len() + failures.len(), 12, "{}", stderr(&o));
    for f in &failures {
        let i = f["prompt_index"].as_u64().unwrap();
        assert_eq!(drawn[&i], serde_json::json!(["image_gen"]), "{f}");
        assert!(
            f.to_string().contains("image_generate: not configured"),
            "{f}"
        );
    }
    assert!(
        drawn
            .values()
            .any(|t| t.as_array().unwrap().iter().any(|x| x == "image_gen")),
        "image_gen never drawn: the check above saw nothing"
    );
    for req in &s.requests()[before..] {
        assert!(
            req["tools"].as_array().is_some_and(|t| !t.is_empty()),
            "{}",
            req["tools"]
        );
    }
}

/// `prompts` rows of `-d balanced --seed 3` with TRAJ_CHROMIUM set to `chromium` (a
/// file: a Chromium is there; a missing path: none is), and `extra` flags.
fn balanced_with_chromium(d: &std::path::Path, chromium: &str, extra: &[&str]) -> Output {
    let input: String = (0..400)
        .map(|i| format!("{{\"prompt\":\"p{i}\"}}\n"))
        .collect();
    let mut c = cmd(BIN, d);
    c.env("TRAJ_CHROMIUM", chromium)
        .args(["-d", "balanced", "--seed", "3"])
        .args(extra);
    run_with_stdin(c, input.as_bytes())
}

/// The draw is the table's alone (issue 26): the same seed gives every row the same
/// toolsets with or without a Chromium, the browser included; without one, a build
/// that can check says so on stderr, once, naming the toolset and why.
#[test]
fn draws_are_the_same_on_every_machine() {
    let d = tmpdir();
    let with = balanced_with_chromium(d.path(), "/bin/sh", &[]);
    let without = balanced_with_chromium(d.path(), "/no/such/chromium", &[]);
    assert_code(&with, 0);
    assert_code(&without, 0);
    assert!(
        with.stdout == without.stdout,
        "draws differ with the machine"
    );
    let rows = parse_jsonl(&stdout(&without));
    assert_eq!(rows.len(), 400);
    let browser = rows
        .iter()
        .filter(|r| {
            r["toolsets"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t == "browser")
        })
        .count();
    assert!(
        (150..250).contains(&browser),
        "browser in {browser} of 400 rows"
    );
    assert!(!stderr(&with).contains("warning"), "{}", stderr(&with));
    let err = stderr(&without);
    if cfg!(feature = "agent") {
        assert_eq!(err.matches("warning").count(), 1, "{err}");
        assert!(
            err.contains("drawn toolsets this machine could not run: browser (no chromium"),
            "{err}"
        );
        assert!(err.contains("--only-available"), "{err}");
    } else {
        assert!(!err.contains("warning"), "{err}");
    }
    // A distribution that never draws the browser warns of nothing.
    let mut c = cmd(BIN, d.path());
    c.env("TRAJ_CHROMIUM", "/no/such/chromium")
        .args(["-d", "development"]);
    let o = run_with_stdin(c, b"{\"prompt\":\"x\"}\n");
    assert_code(&o, 0);
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
}

/// `--only-available` opts into draws that depend on the machine: without a Chromium
/// the browser is never drawn (and no warning is needed); with one, the draws are the
/// default ones. A build without the agent runtime refuses it (exit 2): it cannot check.
#[test]
fn only_available_leaves_out_what_this_machine_cannot_run() {
    let d = tmpdir();
    let default = balanced_with_chromium(d.path(), "/no/such/chromium", &[]);
    let here = balanced_with_chromium(d.path(), "/no/such/chromium", &["--only-available"]);
    if !cfg!(feature = "agent") {
        assert_code(&here, 2);
        assert!(
            stderr(&here).contains("--only-available"),
            "{}",
            stderr(&here)
        );
        return;
    }
    assert_code(&here, 0);
    assert!(!stderr(&here).contains("warning"), "{}", stderr(&here));
    let rows = parse_jsonl(&stdout(&here));
    assert_eq!(rows.len(), 400);
    for r in &rows {
        let t = r["toolsets"].as_array().unwrap();
        assert!(!t.is_empty() && !t.iter().any(|t| t == "browser"), "{r}");
    }
    assert!(here.stdout != default.stdout);
    let with = balanced_with_chromium(d.path(), "/bin/sh", &["--only-available"]);
    assert_code(&with, 0);
    assert!(
        with.stdout == default.stdout,
        "with a Chromium, nothing is left out"
    );
    // The listing says where a toolset cannot run.
    let mut c = cmd(BIN, d.path());
    c.env("TRAJ_CHROMIUM", "/no/such/chromium")
        .args(["--list-toolsets"]);
    let table = stdout(&run(c));
    let browser = table.lines().find(|l| l.starts_with("browser ")).unwrap();
    assert!(browser.contains(" yes "), "{browser}");
    assert!(
        browser.contains("[cannot run here: no chromium"),
        "{browser}"
    );
}

#[test]
fn rows_traj_run_would_refuse_are_bad_lines_and_null_fields_are_replaced() {
    // Once: a null prompt_index or distribution got a second key beside the null one,
    // a row's own prompt_index could repeat another row's position, and empty prompts
    // passed; traj-run then refused the whole file.
    let d = tmpdir();
    let input = [
        r#"{"prompt":"a"}"#,
        r#"{"prompt":"b","prompt_index":0}"#,
        r#"{"prompt":"c","prompt_index":null,"distribution":null}"#,
        r#"{"prompt":" \n "}"#,
        r#"{"prompt":"e","prompt_index":9}"#,
        r#"{"prompt":"f","prompt_index":9}"#,
        r#"{"prompt":"g","seed":null,"toolsets":null}"#,
    ]
    .join("\n");
    std::fs::write(d.path().join("in.jsonl"), input + "\n").unwrap();
    let o = sample(d.path(), &["in.jsonl"], b"");
    assert_code(&o, 1);
    assert!(
        stderr(&o).contains(
            "in.jsonl:2: prompt_index 0 is also the prompt_index of an earlier row without one"
        ),
        "{}",
        stderr(&o)
    );
    let o = sample(
        d.path(),
        &[
            "in.jsonl",
            "-d",
            "terminal_only",
            "--on-error",
            "skip",
            "--rejects",
            "rej.jsonl",
        ],
        b"",
    );
    assert_code(&o, 0);
    let out = stdout(&o);
    for line in out.lines() {
        let keys = raw_fields(line);
        let n = line.matches("\"prompt_index\"").count();
        assert_eq!(n, 1, "one prompt_index: {line}");
        assert_eq!(line.matches("\"distribution\"").count(), 1, "{line}");
        assert!(keys.contains_key("toolsets"), "{line}");
    }
    let rows = parse_jsonl(&out);
    let got: Vec<(&str, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["prompt"].as_str().unwrap(),
                r["prompt_index"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, [("a", 0), ("c", 2), ("e", 9), ("g", 6)]);
    assert!(rows[1]["distribution"].is_string() && rows[3]["seed"] == 0);
    let rej: Vec<(u64, String)> = read_jsonl(&d.path().join("rej.jsonl"))
        .iter()
        .map(|r| {
            (
                r["line"].as_u64().unwrap(),
                r["reasons"][0].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(rej.len(), 3, "{rej:?}");
    assert_eq!(rej[0].0, 2);
    assert_eq!(rej[1], (4, "empty prompt".into()));
    assert_eq!(
        rej[2],
        (
            6,
            "prompt_index 9 is also the prompt_index of in.jsonl:5".into()
        )
    );
    // What it wrote, traj-run takes whole.
    #[cfg(feature = "agent")]
    {
        std::fs::write(d.path().join("tasks.jsonl"), &out).unwrap();
        let s = crate::standin::Standin::json(serde_json::json!({}));
        let mut c = standin_run(d.path(), &s.url(), "r");
        c.args(["-q", "tasks.jsonl"]);
        let o = run(c);
        assert_code(&o, 0);
        assert_eq!(records(&d.path().join("r")).len(), 4);
    }
}

#[test]
fn a_distributions_file_with_a_key_twice_is_refused() {
    // Keeping one of the two would drop the other without a word.
    let d = tmpdir();
    for text in [
        r#"{"x": {"web": 10}, "x": {"file": 90}}"#,
        r#"{"x": {"web": 10, "web": 90}}"#,
        r#"{"x": {"toolsets": {"web": 50}, "extra": 1}}"#,
    ] {
        std::fs::write(d.path().join("d.json"), text).unwrap();
        let o = sample(
            d.path(),
            &["--distributions", "d.json", "--list-distributions"],
            b"",
        );
        assert_code(&o, 2);
        assert!(stderr(&o).contains("d.json: "), "{text}: {}", stderr(&o));
    }
}

#[test]
fn listing_flags_are_refused_where_they_would_be_ignored() {
    let d = tmpdir();
    for args in [
        &["--json"][..],
        &["--list-distributions", "--list-toolsets"],
        &["--list-distributions", "prompts.jsonl"],
    ] {
        let o = sample(d.path(), args, b"");
        assert_code(&o, 2);
    }
    let o = sample(d.path(), &["--list-toolsets", "--json"], b"");
    assert_code(&o, 0);
    // A toolset a run would refuse is refused by the listing too (not with `all`).
    std::fs::write(d.path().join("d.json"), r#"{"x": {"nosuch": 50}}"#).unwrap();
    let list = ["--distributions", "d.json", "--list-distributions"];
    let o = sample(d.path(), &list, b"");
    assert_code(&o, 2);
    assert!(
        stderr(&o).contains("unknown toolset \"nosuch\""),
        "{}",
        stderr(&o)
    );
    let o = sample(
        d.path(),
        &[&list[..], &["--available", "all"]].concat(),
        b"",
    );
    assert_code(&o, 0);
}

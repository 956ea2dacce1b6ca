//! traj-filter on real data (LLaMA-Factory datasets, one converted to Hermes rows) and
//! on crafted edge cases.

use std::path::Path;

use serde_json::{Value, json};

use crate::util::*;

const HERMES: &str = "hermes_reason_tool_use_50.jsonl";

fn filter(dir: &Path, args: &[&str]) -> std::process::Output {
    run_in("traj-filter", dir, args)
}

fn fx(name: &str) -> String {
    fixture(name).display().to_string()
}

/// A small Hermes row: system with one tool, human, gpt call, tool response, answer.
fn row(gpt_call: &str, tool: &str, answer: &str) -> Value {
    json!({"prompt_index": 0, "completed": true, "partial": false, "conversations": [
        {"from": "system", "value": "Call tools in <tool_call> </tool_call>.\n<tools>\n[{\"name\": \"terminal\", \"description\": \"\", \"parameters\": {}, \"required\": null}]\n</tools>"},
        {"from": "human", "value": "list files"},
        {"from": "gpt", "value": gpt_call},
        {"from": "tool", "value": tool},
        {"from": "gpt", "value": answer},
    ]})
}

const CALL: &str = "<think>\nI will list.\n</think>\n<tool_call>\n{\"name\": \"terminal\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>";
const RESP: &str = "<tool_response>\n{\"tool_call_id\": \"call_1\", \"name\": \"terminal\", \"content\": {\"output\": \"a b\"}}\n</tool_response>";

fn good() -> Value {
    row(CALL, RESP, "<think>\n</think>\nTwo files.")
}

fn jsonl(rows: &[Value]) -> String {
    rows.iter().map(|r| format!("{r}\n")).collect()
}

#[test]
fn no_predicate_passes_real_data_through_byte_for_byte() {
    let d = tmpdir();
    for name in [
        "llamafactory_glaive_toolcall_en.jsonl",
        "llamafactory_reason_tool_use_50.jsonl",
        HERMES,
    ] {
        let want = std::fs::read(fixture(name)).unwrap();
        let o = filter(d.path(), &[&fx(name)]);
        assert_code(&o, 0);
        assert!(o.stdout == want, "{name}: output differs from input");
        let lines = want.iter().filter(|&&b| b == b'\n').count();
        assert!(stderr(&o).contains(&format!("{lines} read, {lines} kept")));
        // and from stdin, with -o
        let mut c = cmd("traj-filter", d.path());
        c.args(["-o", "out.jsonl"]);
        let o = run_with_stdin(c, &want);
        assert_code(&o, 0);
        assert_eq!(std::fs::read(d.path().join("out.jsonl")).unwrap(), want);
    }
}

#[test]
fn invalid_lines_are_bad_input_even_without_predicates() {
    let d = tmpdir();
    let g = good().to_string();
    std::fs::write(
        d.path().join("in.jsonl"),
        format!("{g}\n{{\"a\": \n[1]\n{g}\n"),
    )
    .unwrap();
    let o = filter(d.path(), &["in.jsonl"]);
    assert_code(&o, 1);
    assert!(
        stderr(&o).contains("in.jsonl:2: invalid JSON"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        stdout(&o),
        format!("{g}\n"),
        "rows before the bad line are written"
    );

    let o = filter(
        d.path(),
        &["in.jsonl", "--on-error", "skip", "--rejects", "rej.jsonl"],
    );
    assert_code(&o, 0);
    assert_eq!(stdout(&o), format!("{g}\n{g}\n"));
    let rej = read_jsonl(&d.path().join("rej.jsonl"));
    assert_eq!(rej.len(), 2);
    assert_eq!(
        rej[1]["reasons"][0],
        "expected a JSON object, found an array"
    );
    assert_eq!(rej[1]["line"], 3);

    let o = filter(
        d.path(),
        &["in.jsonl", "--on-error", "skip", "--well-formed"],
    );
    assert_code(&o, 1); // skipped bad lines with no rejects file are lost data
    assert!(stderr(&o).contains("2 bad lines"), "{}", stderr(&o));
}

#[test]
fn three_predicates_on_real_hermes_rows() {
    let d = tmpdir();
    let o = filter(
        d.path(),
        &[
            &fx(HERMES),
            "--require-reasoning",
            "--valid-tools",
            "--well-formed",
            "--rejects",
            "rej.jsonl",
            "--stats",
            "stats.json",
        ],
    );
    assert_code(&o, 0);
    let input: Vec<String> = std::fs::read_to_string(fixture(HERMES))
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    let out = stdout(&o);
    let kept: Vec<&str> = out.lines().collect();
    let rej = read_jsonl(&d.path().join("rej.jsonl"));
    assert_eq!(
        kept.len() + rej.len(),
        input.len(),
        "each row kept or rejected"
    );
    // kept rows are input lines, unchanged and in order
    let mut it = input.iter();
    for k in &kept {
        assert!(it.any(|l| l == k), "kept row is not an input line in order");
    }
    // rejected rows come back unchanged, with reasons
    for r in &rej {
        let line = &input[r["line"].as_u64().unwrap() as usize - 1];
        assert_eq!(&r["record"], &serde_json::from_str::<Value>(line).unwrap());
        assert!(!r["reasons"].as_array().unwrap().is_empty());
    }
    // real defects of this dataset: calls left without a result, a stray </think>
    let reasons: Vec<String> = rej
        .iter()
        .flat_map(|r| r["reasons"].as_array().unwrap().clone())
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("without a tool turn after them"))
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("</think> without an opening tag"))
    );
    let stats: Value =
        serde_json::from_slice(&std::fs::read(d.path().join("stats.json")).unwrap()).unwrap();
    assert_eq!(stats["read"], 50);
    assert_eq!(stats["kept"], kept.len());
    assert_eq!(stats["dropped"], rej.len());
    let by = stats["dropped_by_reason"].as_object().unwrap();
    assert_eq!(
        by["malformed"].as_u64().unwrap() as usize,
        rej.len(),
        "every drop here is structural"
    );
    assert!(stderr(&o).contains(&format!(
        "50 read, {} kept, {} dropped",
        kept.len(),
        rej.len()
    )));
}

#[test]
fn hallucinated_tool_name_is_dropped_and_tools_file_overrides() {
    let d = tmpdir();
    let bad = row(
        &CALL.replace("\"terminal\"", "\"shell\""),
        &RESP.replace("terminal", "shell"),
        "<think>\nok\n</think>\ndone",
    );
    let args_not_object = row(
        &CALL.replace("{\"command\": \"ls\"}", "\"ls\""),
        RESP,
        "<think>\nok\n</think>\ndone",
    );
    std::fs::write(
        d.path().join("in.jsonl"),
        jsonl(&[good(), bad.clone(), args_not_object]),
    )
    .unwrap();
    let o = filter(
        d.path(),
        &["in.jsonl", "--valid-tools", "--rejects", "rej.jsonl"],
    );
    assert_code(&o, 0);
    assert_eq!(parse_jsonl(&stdout(&o)), vec![good()]);
    let rej = read_jsonl(&d.path().join("rej.jsonl"));
    assert_eq!(
        rej[0]["reasons"],
        json!(["invalid-tools: turn 3: unknown tool \"shell\""])
    );
    assert_eq!(rej[0]["record"], bad);
    assert_eq!(
        rej[1]["reasons"],
        json!(["invalid-tools: turn 3: arguments of \"terminal\" are not a JSON object"])
    );

    // --tools FILE: judged against that list instead of each row's own
    std::fs::write(
        d.path().join("tools.json"),
        r#"[{"type":"function","function":{"name":"shell"}}]"#,
    )
    .unwrap();
    let o = filter(
        d.path(),
        &["in.jsonl", "--valid-tools", "--tools", "tools.json"],
    );
    assert_code(&o, 0);
    assert_eq!(parse_jsonl(&stdout(&o)), vec![bad.clone()]);

    // the same file formats as traj-normalize's --tools: one name per line too
    std::fs::write(d.path().join("tools.txt"), "# the run's tools\nshell\n").unwrap();
    let o = filter(
        d.path(),
        &["in.jsonl", "--valid-tools", "--tools", "tools.txt"],
    );
    assert_code(&o, 0);
    assert_eq!(parse_jsonl(&stdout(&o)), vec![bad]);
    // a missing or broken tools file is a usage error, as in traj-normalize
    for (file, want) in [
        ("missing.json", "cannot read"),
        ("broken.json", "invalid JSON"),
    ] {
        std::fs::write(d.path().join("broken.json"), "[{\"name\": ").unwrap();
        let o = filter(d.path(), &["in.jsonl", "--valid-tools", "--tools", file]);
        assert_code(&o, 2);
        assert!(stderr(&o).contains(want), "{file}: {}", stderr(&o));
    }
}

#[test]
fn unbalanced_and_unpaired_tags_are_malformed() {
    let d = tmpdir();
    let cases = [
        (
            row(
                "<think>\nno end\n<tool_call>\n{\"name\": \"terminal\", \"arguments\": {}}\n</tool_call>",
                RESP,
                "x",
            ),
            "<tool_call> inside an unclosed <think>",
        ),
        (
            row(&CALL.replace("</tool_call>", ""), RESP, "x"),
            "<tool_call> is never closed",
        ),
        (
            row(CALL, &RESP.replace("</tool_response>", ""), "x"),
            "<tool_response> is never closed",
        ),
        (
            row(CALL, &format!("{RESP}\n{RESP}"), "x"),
            "2 response(s) for 1 call(s)",
        ),
        (
            row(
                CALL,
                &RESP.replace("\"name\": \"terminal\"", "\"name\": \"other\""),
                "x",
            ),
            "response 1 is named \"other\" but call 1 is \"terminal\"",
        ),
        (
            row(&CALL.replace("{\"name\"", "{name"), RESP, "x"),
            "<tool_call> body is not JSON",
        ),
        (
            row("<think>\nx\n</think>\nno call", RESP, "x"),
            "tool turn does not follow a gpt turn with tool calls",
        ),
        (
            row(CALL, RESP, "<think>x</think> </think>"),
            "</think> without an opening tag",
        ),
    ];
    let rows: Vec<Value> = cases.iter().map(|(r, _)| r.clone()).collect();
    std::fs::write(d.path().join("in.jsonl"), jsonl(&rows)).unwrap();
    let o = filter(
        d.path(),
        &["in.jsonl", "--well-formed", "--rejects", "rej.jsonl"],
    );
    assert_code(&o, 0);
    assert_eq!(stdout(&o), "");
    let rej = read_jsonl(&d.path().join("rej.jsonl"));
    assert_eq!(rej.len(), cases.len());
    for (r, (_, want)) in rej.iter().zip(&cases) {
        let got = r["reasons"][0].as_str().unwrap();
        assert!(
            got.starts_with("malformed: ") && got.contains(want),
            "want {want:?}, got {got:?}"
        );
    }
    // the good row passes, and --invert gives exactly the complement
    let mut all = rows.clone();
    all.insert(3, good());
    std::fs::write(d.path().join("all.jsonl"), jsonl(&all)).unwrap();
    let kept = parse_jsonl(&stdout(&filter(d.path(), &["all.jsonl", "--well-formed"])));
    let inv = parse_jsonl(&stdout(&filter(
        d.path(),
        &["all.jsonl", "--well-formed", "--invert"],
    )));
    assert_eq!(kept, vec![good()]);
    assert_eq!(inv, rows);
}

#[test]
fn empty_think_is_not_reasoning() {
    let d = tmpdir();
    let empty = row(
        &CALL.replace("I will list.", "  "),
        RESP,
        "<think>\n</think>\nTwo files.",
    );
    let some = row(
        &CALL.replace("I will list.", "  "),
        RESP,
        "<think>\nchecked\n</think>\nTwo files.",
    );
    std::fs::write(d.path().join("in.jsonl"), jsonl(&[empty, some.clone()])).unwrap();
    let o = filter(d.path(), &["in.jsonl", "--require-reasoning"]);
    assert_code(&o, 0);
    assert_eq!(parse_jsonl(&stdout(&o)), vec![some]);
    assert!(
        stderr(&o).contains("1 dropped (no-reasoning: 1) (not kept: use --rejects"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn flags_turns_and_tokens_on_hermes_and_raw_records() {
    let d = tmpdir();
    let mut partial = good();
    partial["partial"] = json!(true);
    let mut unfinished = good();
    unfinished["completed"] = json!(false);
    let mut no_calls = good();
    no_calls["conversations"] = json!([{"from": "human", "value": "hi"}, {"from": "gpt", "value": "<think>\nhm\n</think>\nhello"}]);
    let raw = json!({"prompt_index": 9, "completed": true, "partial": false,
        "tools": [{"type": "function", "function": {"name": "terminal", "parameters": {}}}],
        "messages": [
            {"role": "user", "content": "list"},
            {"role": "assistant", "content": null, "reasoning": "look first",
             "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": "{\"command\":\"ls\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "a b"},
            {"role": "assistant", "content": "two files"}]});
    let rows = [
        good(),
        partial.clone(),
        unfinished.clone(),
        no_calls.clone(),
        raw.clone(),
    ];
    std::fs::write(d.path().join("in.jsonl"), jsonl(&rows)).unwrap();
    let keep = |args: &[&str]| -> Vec<Value> {
        let mut a = vec!["in.jsonl"];
        a.extend_from_slice(args);
        let o = filter(d.path(), &a);
        assert_code(&o, 0);
        parse_jsonl(&stdout(&o))
    };
    assert_eq!(
        keep(&["--completed"]),
        vec![good(), partial.clone(), no_calls.clone(), raw.clone()]
    );
    assert_eq!(
        keep(&["--no-partial"]),
        vec![good(), unfinished.clone(), no_calls.clone(), raw.clone()]
    );
    assert_eq!(
        keep(&["--has-tool-calls"]),
        vec![good(), partial.clone(), unfinished.clone(), raw.clone()]
    );
    assert_eq!(
        keep(&["--completed", "--no-partial", "--has-tool-calls"]),
        vec![good(), raw.clone()]
    );
    assert_eq!(
        keep(&["--min-turns", "3", "--max-turns", "4"]),
        vec![raw.clone()]
    );
    assert_eq!(keep(&["--max-turns", "2"]), vec![no_calls.clone()]);
    assert_eq!(
        keep(&["--require-reasoning", "--valid-tools", "--well-formed"]).len(),
        5
    );
    // chars4: one token per 4 characters of the turn texts; a raw record's calls count
    // too (name and arguments, as traj-compress counts them): 8 tokens of text and
    // reasoning, 6 of its call
    assert_eq!(
        keep(&["--max-row-tokens", "10", "--tokenizer", "chars4"]),
        vec![no_calls.clone()]
    );
    assert_eq!(
        keep(&["--max-row-tokens", "14", "--tokenizer", "chars4"]),
        vec![no_calls.clone(), raw.clone()]
    );
    assert_eq!(
        keep(&["--min-row-tokens", "11", "--tokenizer", "chars4"]).len(),
        4 // the raw record's 14 among them
    );
    // a usage error that names both flags, and an unknown tokenizer
    let crossed = filter(
        d.path(),
        &["in.jsonl", "--min-turns", "5", "--max-turns", "2"],
    );
    assert_code(&crossed, 2);
    assert_stderr_has(&crossed, "--min-turns 5 is above --max-turns 2");
    assert_code(
        &filter(
            d.path(),
            &["in.jsonl", "--min-row-tokens", "5", "--tokenizer", "nope"],
        ),
        2,
    );
    // the row-length flags are --min/--max-row-tokens (--max-tokens is traj-run's
    // request field): the old spellings are refused
    for old in ["--min-tokens", "--max-tokens"] {
        assert_code(&filter(d.path(), &["in.jsonl", old, "5"]), 2);
    }
    assert_code(
        &filter(
            d.path(),
            &["in.jsonl", "--min-row-tokens", "9", "--max-row-tokens", "2"],
        ),
        2,
    );
}

#[test]
fn rows_without_conversations_or_messages_are_bad_under_a_predicate() {
    let d = tmpdir();
    std::fs::write(d.path().join("in.jsonl"), "{\"prompt\": \"x\"}\n").unwrap();
    let o = filter(d.path(), &["in.jsonl", "--completed"]);
    assert_code(&o, 1);
    assert!(stderr(&o).contains("in.jsonl:1: row has neither `conversations` nor `messages`"));
    let o = filter(d.path(), &["in.jsonl"]);
    assert_code(&o, 0);
}

#[test]
fn shards_split_the_input_exactly_once() {
    let d = tmpdir();
    let input = fx(HERMES);
    let whole = filter(d.path(), &["--well-formed", &input]);
    let mut parts = Vec::new();
    for i in 0..3 {
        let shard = format!("{i}/3");
        let o = filter(d.path(), &["--well-formed", "--shard", &shard, &input]);
        assert_code(&o, 0);
        parts.extend(parse_jsonl(&stdout(&o)));
    }
    let mut whole = parse_jsonl(&stdout(&whole));
    let key = |v: &Value| v["prompt_index"].as_u64().unwrap();
    whole.sort_by_key(key);
    parts.sort_by_key(key);
    assert!(!whole.is_empty());
    assert_eq!(parts, whole);
}

/// A `--stats` file that cannot be written stops the run before `-o` is put in place:
/// the outputs are committed together or not at all.
#[test]
fn unwritable_stats_leave_the_output_untouched() {
    let d = tmpdir();
    let row = r#"{"conversations":[{"from":"human","value":"q"},{"from":"gpt","value":"a"}]}"#;
    std::fs::write(d.path().join("in.jsonl"), format!("{row}\n")).unwrap();
    std::fs::write(d.path().join("ok.jsonl"), "old\n").unwrap();
    for b in ["traj-filter", "traj-normalize"] {
        let o = run_in(
            b,
            d.path(),
            &["in.jsonl", "-o", "ok.jsonl", "--stats", "nodir/s.json"],
        );
        assert_ne!(o.status.code(), Some(0), "{b}");
        assert_stderr_has(&o, "nodir");
        assert_eq!(
            std::fs::read_to_string(d.path().join("ok.jsonl")).unwrap(),
            "old\n",
            "{b}"
        );
    }
}

/// HF `datasets` writes `null` for the list a row of a mixed-shape dataset lacks
/// (`to_json` of ShareGPT and OpenAI rows together): every stage reads `null` as absent.
#[test]
fn null_lists_of_mixed_shape_rows_are_absent() {
    let d = tmpdir();
    let rows = concat!(
        r#"{"id":1,"conversations":[{"from":"human","value":"q"},{"from":"gpt","value":"a"}],"messages":null}"#,
        "\n",
        r#"{"id":2,"conversations":null,"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a"}]}"#,
        "\n"
    );
    std::fs::write(d.path().join("in.jsonl"), rows).unwrap();
    for (b, args) in [
        (
            "traj-filter",
            &["--min-turns", "2", "--alternating", "--well-formed"][..],
        ),
        ("traj-normalize", &[][..]),
        ("traj-normalize", &["--to", "openai"][..]),
        ("traj-compress", &["--tokenizer", "chars4", "--offline"][..]),
    ] {
        let mut c = cmd(b, d.path());
        c.arg("in.jsonl").args(args).arg("-q");
        let o = run(c);
        assert_code(&o, 0);
        let out = parse_jsonl(&stdout(&o));
        assert_eq!(out.len(), 2, "{b} {args:?}: {}", stdout(&o));
        if b == "traj-normalize" {
            let list = if args.is_empty() {
                "conversations"
            } else {
                "messages"
            };
            for r in &out {
                assert_eq!(
                    r[list].as_array().map(Vec::len),
                    Some(2),
                    "{b} {args:?}: {r}"
                );
            }
        }
    }
}

/// Raw rows whose calls are typed `tool_call` parts (LLaMA-Factory's OpenAI spelling):
/// each call needs one result, as traj-normalize pairs them; a call without its result,
/// or a result more than there were calls, is malformed before normalising as after.
#[test]
fn typed_tool_call_parts_need_one_result_each() {
    let d = tmpdir();
    let part = r#"{"type": "tool_call", "value": "{\"name\": \"calc\", \"arguments\": {}}"}"#;
    let row = |results: usize| {
        let mut m = vec![
            r#"{"role": "user", "content": "q"}"#.to_string(),
            format!(r#"{{"role": "assistant", "content": [{part}]}}"#),
        ];
        m.extend((0..results).map(|i| format!(r#"{{"role": "tool", "content": "r{i}"}}"#)));
        m.push(r#"{"role": "assistant", "content": "done"}"#.into());
        format!(
            r#"{{"messages": [{}], "tools": [{{"name": "calc"}}]}}"#,
            m.join(", ")
        )
    };
    let lines = [row(0), row(1), row(2)];
    std::fs::write(d.path().join("in.jsonl"), lines.join("\n") + "\n").unwrap();
    let o = filter(
        d.path(),
        &["--well-formed", "in.jsonl", "--rejects", "rej.jsonl"],
    );
    assert_code(&o, 0);
    assert_eq!(stdout(&o), format!("{}\n", lines[1]));
    let rej = read_jsonl(&d.path().join("rej.jsonl"));
    let reasons: Vec<_> = rej.iter().map(|r| r["reasons"][0].clone()).collect();
    assert_eq!(
        reasons,
        [
            json!(
                "malformed: message 2: 1 tool call(s) of its tool-call parts have no tool result"
            ),
            json!("malformed: message 4: tool result \"\" answers no pending call"),
        ]
    );
    // traj-normalize agrees: the one row it writes passes, the others do not.
    let mut c = cmd("traj-normalize", d.path());
    c.args(["-q", "--on-error", "skip", "in.jsonl"]);
    let o = run(c);
    let normalized = stdout(&o);
    std::fs::write(d.path().join("n.jsonl"), &normalized).unwrap();
    let o = filter(d.path(), &["--well-formed", "-q", "n.jsonl"]);
    assert_eq!(parse_jsonl(&stdout(&o)).len(), 1);
}

/// A `--columns core` row keeps the run fields inside its `metadata` string: the row
/// predicates read them there, as on the row before traj-normalize.
#[test]
fn core_rows_are_judged_by_the_run_fields_in_their_metadata() {
    let d = tmpdir();
    let row = |stop: &str, completed: bool, reward: f64| {
        json!({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
            "prompt_index": 1, "stop_reason": stop, "completed": completed, "partial": false,
            "reward": reward})
        .to_string()
    };
    let raw = [
        row("length", true, 1.0),
        row("answer", false, 0.5),
        row("answer", true, 0.0),
    ];
    std::fs::write(d.path().join("raw.jsonl"), raw.join("\n") + "\n").unwrap();
    let mut c = cmd("traj-normalize", d.path());
    c.args(["-q", "--columns", "core", "raw.jsonl", "-o", "core.jsonl"]);
    assert_code(&run(c), 0);
    for args in [
        &["--no-truncated"][..],
        &["--completed"],
        &["--min-reward", "0.5"],
        &["--best-of"],
    ] {
        let kept = |file: &str| {
            let o = filter(d.path(), &[&[file, "-q"][..], args].concat());
            assert_code(&o, 0);
            stdout(&o).lines().count()
        };
        assert_eq!(kept("core.jsonl"), kept("raw.jsonl"), "{args:?}");
        assert!(kept("core.jsonl") < 3, "{args:?}");
    }
}

/// Rows in shapes the predicates do not read themselves (`role`/`content` turns in
/// `conversations`, `from`/`value` in `messages`, `user`/`assistant` ShareGPT, a `null`
/// value, legacy `function` results, `developer`, mini-swe-agent's `exit`, a typed
/// `tool_call` part answered by its id) get the verdict of the row traj-normalize makes
/// of them, under every message predicate (they used to be bad lines, or dropped as
/// "unknown role" and "no reasoning").
#[test]
fn foreign_shapes_get_the_verdict_of_their_normalised_row() {
    let d = tmpdir();
    let mut rows: Vec<String> = [
        json!({"conversations": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "<think>p</think>x"}]}),
        json!({"messages": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "<think>p</think>x"}]}),
        json!({"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": null}]}),
        json!({"conversations": [{"from": "user", "value": "hi"}, {"from": "assistant", "value": "<think>plan</think>hello"}]}),
        json!({"messages": [{"role": "developer", "content": "be nice"}, {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}),
    ]
    .iter()
    .map(Value::to_string)
    .collect();
    for f in ["openai_legacy_shapes.jsonl", "mini_swe_agent_trajs.jsonl"] {
        let text = std::fs::read_to_string(fx(f)).unwrap();
        rows.extend(text.lines().map(str::to_string));
    }
    std::fs::write(d.path().join("raw.jsonl"), rows.join("\n") + "\n").unwrap();
    let o = run_in(
        "traj-normalize",
        d.path(),
        &["raw.jsonl", "-o", "norm.jsonl", "-q"],
    );
    assert_code(&o, 0);
    for pred in [
        "--require-reasoning",
        "--has-tool-calls",
        "--well-formed",
        "--alternating",
        "--valid-tools",
    ] {
        let verdicts = |file: &str| {
            let o = filter(
                d.path(),
                &[file, pred, "--rejects", "r.jsonl", "-o", "k.jsonl", "-q"],
            );
            assert_eq!(o.status.code(), Some(0), "{pred} {file}: {}", stderr(&o));
            let kept = std::fs::read_to_string(d.path().join("k.jsonl"))
                .unwrap()
                .lines()
                .count();
            let dropped: Vec<u64> = read_jsonl(&d.path().join("r.jsonl"))
                .iter()
                .map(|r| r["line"].as_u64().unwrap())
                .collect();
            (kept, dropped)
        };
        assert_eq!(verdicts("raw.jsonl"), verdicts("norm.jsonl"), "{pred}");
    }
}

/// The summary names the rejects file when only bad lines went there.
#[test]
fn summary_names_the_rejects_file_of_bad_lines() {
    let d = tmpdir();
    std::fs::write(d.path().join("in.jsonl"), format!("{}\n{{bad\n", good())).unwrap();
    let o = filter(
        d.path(),
        &[
            "in.jsonl",
            "--min-turns",
            "1",
            "--on-error",
            "skip",
            "--rejects",
            "r.jsonl",
        ],
    );
    assert_code(&o, 0);
    assert!(stderr(&o).contains("1 bad lines skipped"), "{}", stderr(&o));
    assert!(
        stderr(&o).trim_end().ends_with("-> r.jsonl"),
        "{}",
        stderr(&o)
    );
}

/// A foreign row is judged as traj-normalize reads it, and what it had to mend is no
/// free pass: under `--well-formed`, tags it repaired and a result it set aside are
/// malformed, as they are in a Hermes row; a foreign row it refuses is a bad line with
/// its reason (the predicates' own reading would not see its turns).
#[test]
fn foreign_rows_traj_normalize_mends_or_refuses_are_not_passed() {
    let d = tmpdir();
    let rows = [
        json!({"conversations": [{"from": "user", "value": "hi"},
            {"from": "assistant", "value": "<think>\nhm\n</think>\n</think>\nhello"}]}),
        json!({"messages": [{"role": "developer", "content": "s"}, {"role": "user", "content": "hi"},
            {"role": "tool", "tool_call_id": "zz", "content": "r"}, {"role": "assistant", "content": "done"}]}),
        json!({"conversations": [{"from": "user", "value": "hi"},
            {"from": "assistant", "value": "<tool_call>\n{1}\n</tool_call>"}]}),
    ];
    std::fs::write(d.path().join("in.jsonl"), jsonl(&rows)).unwrap();
    let o = filter(
        d.path(),
        &[
            "in.jsonl",
            "--well-formed",
            "--on-error",
            "skip",
            "--rejects",
            "r.jsonl",
            "-q",
        ],
    );
    assert_code(&o, 0);
    assert_eq!(stdout(&o), "");
    let rej = read_jsonl(&d.path().join("r.jsonl"));
    let reasons: Vec<String> = rej
        .iter()
        .map(|r| r["reasons"][0].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        reasons[0],
        "malformed: its tags need repairs (stray_closing_tag)"
    );
    assert_eq!(reasons[1], "malformed: a tool result answers no call");
    assert!(
        reasons[2].starts_with("message 2: <tool_call> 1 is not JSON"),
        "{}",
        reasons[2]
    );
    // The refused row is a bad line under every predicate.
    let o = filter(d.path(), &["in.jsonl", "--valid-tools"]);
    assert_code(&o, 1);
    assert_stderr_has(&o, "in.jsonl:3: message 2: <tool_call> 1 is not JSON");
}

/// `--valid-tools` reads a row's tools and arguments as traj-normalize does: a `<tools>`
/// block of one JSON object a line (Qwen's and Hermes-2-Pro's templates) is a tool list,
/// a blank `arguments` string is `{}`, and an `arguments` string with a key twice is no
/// object (traj-normalize refuses it).
#[test]
fn valid_tools_reads_tools_and_arguments_as_normalize_does() {
    let d = tmpdir();
    let call = "<tool_call>\n{\"name\": \"ls\", \"arguments\": {}}\n</tool_call>";
    let hermes = json!({"conversations": [
        {"from": "system", "value": "You have <tools>\n{\"name\": \"ls\", \"parameters\": {}}\n{\"name\": \"cat\", \"parameters\": {}}\n</tools>"},
        {"from": "human", "value": "q"},
        {"from": "gpt", "value": call},
        {"from": "tool", "value": "<tool_response>\n{\"name\": \"ls\", \"content\": \"x\"}\n</tool_response>"},
        {"from": "gpt", "value": "done"}]});
    let openai = |args: &str| {
        json!({"messages": [{"role": "user", "content": "q"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "a", "type": "function",
                "function": {"name": "ls", "arguments": args}}]},
            {"role": "tool", "tool_call_id": "a", "content": "x"},
            {"role": "assistant", "content": "ok"}],
            "tools": [{"type": "function", "function": {"name": "ls", "parameters": {}}}]})
    };
    let rows = [hermes, openai(""), openai("{\"x\": 1, \"x\": 2}")];
    std::fs::write(d.path().join("in.jsonl"), jsonl(&rows)).unwrap();
    let o = filter(
        d.path(),
        &["in.jsonl", "--valid-tools", "--rejects", "r.jsonl", "-q"],
    );
    assert_code(&o, 0);
    assert_eq!(parse_jsonl(&stdout(&o)).len(), 2);
    let rej = read_jsonl(&d.path().join("r.jsonl"));
    assert_eq!(rej.len(), 1);
    assert_eq!(rej[0]["line"], 3);
}

/// A tombstone of the newest hermes-agent (`{"prompt_index", "discarded", "prompt"}`) is
/// no trajectory. traj-filter stopped at it as a bad line under any predicate ("row has
/// neither conversations nor messages") and kept it without one; traj-normalize
/// refused it ("no message list"), so its first documented example failed on such a
/// run. Both now drop it as traj-merge does, with its reason, never as lost data.
#[test]
fn tombstones_are_dropped_with_their_reason_by_filter_and_normalize() {
    let d = tmpdir();
    let batches: Vec<String> = (0..3)
        .map(|n| fx(&format!("rundirs/hermes-0.21/batch_{n}.jsonl")))
        .collect();
    let lines: Vec<String> = batches
        .iter()
        .flat_map(|b| {
            std::fs::read_to_string(b)
                .unwrap()
                .lines()
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .collect();
    let tombs: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("\"discarded\""))
        .collect();
    assert_eq!(tombs.len(), 2, "the fixture has two tombstones");
    let cases: [(&str, &[&str]); 6] = [
        ("traj-filter", &[]),
        ("traj-filter", &["--valid-tools"]),
        ("traj-filter", &["--invert", "--well-formed"]),
        ("traj-filter", &["--best-of"]),
        ("traj-normalize", &[]),
        ("traj-normalize", &["--to", "openai"]),
    ];
    for (bin, args) in cases {
        let mut all: Vec<&str> = batches.iter().map(String::as_str).collect();
        all.extend(args);
        // Without --rejects: dropped, said so, exit 0 (no data lost).
        let o = run_in(bin, d.path(), &all);
        assert_code(&o, 0);
        let err = stderr(&o);
        assert!(err.contains("tombstone"), "{bin} {args:?}: {err}");
        assert!(!stdout(&o).contains("\"discarded\""), "{bin} {args:?}");
        all.extend(["--rejects", "r.jsonl", "-o", "out.jsonl"]);
        let o = run_in(bin, d.path(), &all);
        assert_code(&o, 0);
        let rej = read_jsonl(&d.path().join("r.jsonl"));
        let dropped: Vec<&Value> = rej
            .iter()
            .filter(|r| r["reasons"] == json!(["tombstone: discarded \"no_reasoning\""]))
            .collect();
        assert_eq!(dropped.len(), 2, "{bin} {args:?}: {rej:?}");
        for (r, line) in dropped.iter().zip(&tombs) {
            let original: Value = serde_json::from_str(line).unwrap();
            assert_eq!(r["record"], original, "{bin} {args:?}: the exact row");
        }
        let out = std::fs::read_to_string(d.path().join("out.jsonl")).unwrap();
        assert!(!out.contains("\"discarded\""), "{bin} {args:?}");
    }
}

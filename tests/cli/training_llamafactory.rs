//! traj-normalize `--to llamafactory` and `--to llamafactory-openai` (LLaMA-Factory's own
//! turns in its sharegpt and openai formatting): every fixture source, mixed in one file,
//! loads in HF `datasets` 4.0.0 and 5.x, renders through transformers'
//! `apply_chat_template` with the Qwen2.5-style fixture template as LLaMA-Factory renders
//! it (arguments objects, each response wrapped once), reads back into the same
//! trajectories, and has the exact shape of the golden rows below. LLaMA-Factory itself
//! is `make check-consumers` (scripts/check-consumers.sh).

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::training::{all_tools, load_in_datasets, mixed};
use crate::util::*;

const NORM: &str = "traj-normalize";
const TARGETS: [(&str, &str); 2] = [
    ("llamafactory", "conversations"),
    ("llamafactory-openai", "messages"),
];

/// LLaMA-Factory's reading of a function_call value (data/formatter.py,
/// FunctionFormatter with the default thought and tool-call words), turned into the
/// messages transformers' templates take. Shared by the scripts below.
pub(crate) const LF_READ: &str = r#"
import json, re
TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
THOUGHT = re.compile(r"<think>\n(.*?)\n</think>\n\n", re.DOTALL)
SEP = "\n</tool_response>\n<tool_response>\n"

def function_call(content):
    m = TOOL_CALL.search(content)
    if m:
        text, body = content.replace(m.group(0), ""), m.group(1)
    else:
        t = THOUGHT.search(content)
        text = t.group(0) if t else ""
        body = content.replace(t.group(0), "") if t else content
    calls = json.loads(body)
    return text, calls if isinstance(calls, list) else [calls]

def hf_messages(row):
    key = "conversations" if "conversations" in row else "messages"
    out = []
    for m in row[key]:
        role = m.get("from", m.get("role"))
        content = m.get("value", m.get("content"))
        if role == "system":
            out.append({"role": "system", "content": content})
        elif role in ("human", "user"):
            out.append({"role": "user", "content": content})
        elif role in ("gpt", "assistant"):
            out.append({"role": "assistant", "content": content})
        elif role == "function_call":
            text, calls = function_call(content)
            out.append({"role": "assistant", "content": text, "tool_calls": [
                {"type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in calls]})
        elif role == "observation":
            out.extend({"role": "tool", "content": part} for part in content.split(SEP))
        elif role == "tool":
            out.append({"role": "tool", "content": content})
        else:
            raise ValueError(f"role {role}")
    return out
"#;

/// Load with `datasets` (argv: file, cache dir, rows, list key): every row, the core
/// columns, only strings in the message list, every function_call value read with
/// object arguments.
const LOAD: &str = r#"
import sys, datasets
datasets.disable_progress_bars()
ds = datasets.load_dataset("json", data_files=sys.argv[1], split="train", cache_dir=sys.argv[2])
assert len(ds) == int(sys.argv[3]), (len(ds), sys.argv[3])
key = sys.argv[4]
assert ds.column_names == [key, "tools", "tool_stats", "tool_error_counts", "metadata"], ds.column_names
assert ds.features["tools"].dtype == "string"
for row in ds:
    for m in row[key]:
        assert all(v is None or isinstance(v, str) for v in m.values()), m
calls = 0
for row in ds:
    for m in hf_messages(row):
        for c in m.get("tool_calls", []):
            assert isinstance(c["function"]["arguments"], dict), c
            calls += 1
    json.loads(row["tools"])
print("calls", calls)
print("version", datasets.__version__)
print("ok")
"#;

#[test]
fn llamafactory_shapes_of_every_source_load_in_datasets_4_and_5() {
    let d = tmpdir();
    let tools = all_tools(d.path());
    for (to, key) in TARGETS {
        let args = ["--to", to, "--columns", "core"];
        let (file, rows) = mixed(d.path(), &format!("{to}.jsonl"), &args, Some(&tools));
        assert!(rows.len() > 700, "{}", rows.len());
        let n = rows.len().to_string();
        load_in_datasets(d.path(), &format!("{LF_READ}{LOAD}"), &file, &[&n, key]);
    }
}

/// Render every row (argv: template dir, file) as LLaMA-Factory would hand it to a
/// Qwen2.5-style template; print rows, calls, calls whose arguments are not objects,
/// responses wrapped twice, observations that carry a wrapper of their own.
const RENDER: &str = r#"
import sys
from transformers import AutoTokenizer
tok = AutoTokenizer.from_pretrained(sys.argv[1])
call = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.DOTALL)
rows = calls = not_object = twice = wrapped = 0
for line in open(sys.argv[2], encoding="utf-8"):
    row = json.loads(line)
    msgs = hf_messages(row)
    wrapped += sum(m["role"] == "tool" and m["content"].lstrip().startswith("<tool_response>") for m in msgs)
    text = tok.apply_chat_template(msgs, tools=json.loads(row["tools"]) or None, tokenize=False)
    rows += 1
    twice += text.count("<tool_response>\n<tool_response>")
    for body in call.findall(text):
        calls += 1
        not_object += not isinstance(json.loads(body)["arguments"], dict)
print(json.dumps({"rows": rows, "calls": calls, "not_object": not_object, "twice": twice, "wrapped": wrapped}))
"#;

#[test]
fn llamafactory_shapes_render_once_with_the_qwen_fixture_template() {
    let d = tmpdir();
    let tools = all_tools(d.path());
    let (_, hermes) = mixed(
        d.path(),
        "hermes.jsonl",
        &["--columns", "core"],
        Some(&tools),
    );
    let want_calls: usize = hermes
        .iter()
        .flat_map(|r| r["conversations"].as_array().unwrap())
        .filter(|t| t["from"] == "gpt")
        .map(|t| {
            t["value"]
                .as_str()
                .unwrap()
                .matches("<tool_call>\n")
                .count()
        })
        .sum();
    assert!(want_calls > 300, "{want_calls}");
    for (to, _) in TARGETS {
        let args = ["--to", to, "--columns", "core"];
        let (file, rows) = mixed(d.path(), &format!("{to}.jsonl"), &args, Some(&tools));
        let o = Command::new(transformers_python())
            .arg("-c")
            .arg(format!("{LF_READ}{RENDER}"))
            .arg(fixture("templates/qwen2.5-style"))
            .arg(&file)
            .output()
            .expect("python");
        assert!(
            o.status.success(),
            "{to}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let r: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(
            r,
            json!({"rows": rows.len(), "calls": want_calls, "not_object": 0, "twice": 0, "wrapped": 0}),
            "{to}"
        );
    }
}

/// A row's calls made (function_call turns or messages) and whether it has reasoning.
fn plain_with_reasoning(row: &Value) -> bool {
    let list = row["conversations"].as_array().unwrap();
    row["tools"] == "[]"
        && list
            .iter()
            .all(|t| t["from"] == "human" || t["from"] == "gpt" || t["from"] == "system")
        && list.iter().any(|t| {
            t["from"] == "gpt"
                && t["value"].as_str().is_some_and(|v| {
                    v.starts_with("<think>\n") && !v.starts_with("<think>\n</think>")
                })
        })
}

/// Hermes → LLaMA-Factory → Hermes gives the same rows, and normalising a
/// LLaMA-Factory file to the same shape changes nothing, for every row that offers or
/// uses tools (the shape's purpose). A plain chat (no tools) with reasoning reads back as
/// Hermes (its blank line after `</think>` is LLaMA-Factory's thought spelling, which a
/// Hermes text with content starting on a new line spells alike): those rows only.
#[test]
fn llamafactory_shapes_read_back_into_the_same_rows() {
    let d = tmpdir();
    let tools = all_tools(d.path());
    let (hfile, hermes) = mixed(
        d.path(),
        "hermes.jsonl",
        &["--columns", "core"],
        Some(&tools),
    );
    let norm = |args: &[&str], input: &Path, out: &str| {
        let mut c = cmd(NORM, d.path());
        c.arg("-q")
            .args(args)
            .args(["--columns", "core"])
            .arg(input);
        c.arg("-o").arg(d.path().join(out));
        assert_code(&run(c), 0);
        read_jsonl(&d.path().join(out))
    };
    for (to, _) in TARGETS {
        let lf = norm(&["--to", to], &hfile, &format!("{to}.jsonl"));
        let back = norm(
            &[],
            &d.path().join(format!("{to}.jsonl")),
            &format!("{to}.back.jsonl"),
        );
        let again = norm(
            &["--to", to],
            &d.path().join(format!("{to}.jsonl")),
            &format!("{to}.again.jsonl"),
        );
        assert_eq!(back.len(), hermes.len());
        let mut differ = 0;
        for (i, (h, b)) in hermes.iter().zip(&back).enumerate() {
            if h != b || lf[i] != again[i] {
                assert!(plain_with_reasoning(h), "{to} row {i}:\n{h}\n{b}");
                differ += 1;
            }
        }
        // The plain chats with reasoning among the mixed sources (reason_tool_use twice).
        assert!(differ <= 6, "{to}: {differ} rows do not read back");
    }
}

/// The exact rows, on a small fixture and on a step with two results.
#[test]
fn llamafactory_shapes_are_exactly_this() {
    let d = tmpdir();
    let two = r#"{"conversations": [{"from": "human", "value": "both"}, {"from": "gpt", "value": "<think>\n</think>\nOn it.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {\"when\": \"2024-01-02\"}}\n</tool_call>"}, {"from": "tool", "value": "<tool_response>\n{\"tool_call_id\": \"c1\", \"name\": \"a\", \"content\": \"one\"}\n</tool_response>\n<tool_response>\n{\"tool_call_id\": \"c2\", \"name\": \"b\", \"content\": {\"n\": 2}}\n</tool_response>"}, {"from": "gpt", "value": "<think>\n</think>\nDone."}], "id": 7}"#;
    let out = |to: &str, input: &[u8]| {
        let mut c = cmd(NORM, d.path());
        c.args(["-q", "--to", to]);
        if input.is_empty() {
            c.arg(fixture("openai_legacy_shapes.jsonl"));
        }
        stdout(&run_with_stdin(c, input))
    };
    assert_eq!(
        out("llamafactory", two.as_bytes()),
        concat!(
            r#"{"conversations": [{"from": "human", "value": "both"}, "#,
            r#"{"from": "function_call", "value": "On it.\n<tool_call>[{\"name\": \"a\", \"arguments\": {\"x\": 1}, \"id\": \"c1\"}, {\"name\": \"b\", \"arguments\": {\"when\": \"2024-01-02\"}, \"id\": \"c2\"}]</tool_call>"}, "#,
            r#"{"from": "observation", "value": "one\n</tool_response>\n<tool_response>\n{\"n\": 2}"}, "#,
            r#"{"from": "gpt", "value": "Done."}], "tools": "[]", "id": 7, "#,
            r#""tool_stats": {"a": {"count": 1, "success": 1, "failure": 0}, "b": {"count": 1, "success": 1, "failure": 0}}, "#,
            r#""tool_error_counts": {"a": 0, "b": 0}}"#,
            "\n"
        )
    );
    assert_eq!(
        out("llamafactory-openai", two.as_bytes()),
        concat!(
            r#"{"messages": [{"role": "user", "content": "both"}, "#,
            r#"{"role": "function_call", "content": "On it.\n<tool_call>[{\"name\": \"a\", \"arguments\": {\"x\": 1}, \"id\": \"c1\"}, {\"name\": \"b\", \"arguments\": {\"when\": \"2024-01-02\"}, \"id\": \"c2\"}]</tool_call>"}, "#,
            r#"{"role": "tool", "content": "one"}, "#,
            r#"{"role": "tool", "content": "{\"n\": 2}"}, "#,
            r#"{"role": "assistant", "content": "Done."}], "tools": "[]", "id": 7, "#,
            r#""tool_stats": {"a": {"count": 1, "success": 1, "failure": 0}, "b": {"count": 1, "success": 1, "failure": 0}}, "#,
            r#""tool_error_counts": {"a": 0, "b": 0}}"#,
            "\n"
        )
    );
    // Read back: the Hermes row again, ids included.
    for to in ["llamafactory", "llamafactory-openai"] {
        let lf = out(to, two.as_bytes());
        let mut c = cmd(NORM, d.path());
        c.arg("-q");
        let back = parse_jsonl(&stdout(&run_with_stdin(c, lf.as_bytes())));
        let mut c = cmd(NORM, d.path());
        c.arg("-q");
        let want = parse_jsonl(&stdout(&run_with_stdin(c, two.as_bytes())));
        assert_eq!(back, want, "{to}");
    }
    let legacy = out("llamafactory", b"");
    assert_eq!(
        parse_jsonl(&legacy)[1],
        json!({
            "conversations": [
                {"from": "human", "value": "Add 2 and 3."},
                {"from": "function_call", "value": "<think>\nUse the calculator.\n</think>\n\n<tool_call>[{\"name\": \"add\", \"arguments\": {\"a\": 2, \"b\": 3}, \"id\": \"t1\"}]</tool_call>"},
                {"from": "observation", "value": "5"},
                {"from": "gpt", "value": "<think>\nThe tool said 5.\n</think>\n\n2 + 3 = 5"}
            ],
            "tools": "[]",
            "id": "parts-1",
            "tool_stats": {"add": {"count": 1, "success": 1, "failure": 0}},
            "tool_error_counts": {"add": 0}
        })
    );
}

/// What LLaMA-Factory could not tell apart is refused with a reason, not written.
#[test]
fn llamafactory_refuses_what_it_would_misread() {
    let d = tmpdir();
    let sep = r#"{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c", "content": "a\n</tool_response>\n<tool_response>\nb"}, {"role": "assistant", "content": "ok"}]}"#;
    let mut c = cmd(NORM, d.path());
    c.args([
        "-q",
        "--to",
        "llamafactory",
        "--on-error",
        "skip",
        "--rejects",
    ])
    .arg(d.path().join("rej.jsonl"));
    let o = run_with_stdin(c, sep.as_bytes());
    assert_code(&o, 0);
    assert_eq!(stdout(&o), "");
    let rej = read_jsonl(&d.path().join("rej.jsonl"));
    assert_eq!(rej.len(), 1);
    assert!(
        rej[0].to_string().contains("separator of results"),
        "{}",
        rej[0]
    );
    // The openai formatting keeps one message per result: nothing to tell apart.
    let mut c = cmd(NORM, d.path());
    c.args(["-q", "--to", "llamafactory-openai"]);
    let o = run_with_stdin(c, sep.as_bytes());
    assert_code(&o, 0);
    assert_eq!(parse_jsonl(&stdout(&o)).len(), 1);
}

/// `--arguments` is for `--to openai`: LLaMA-Factory's calls always hold objects.
#[test]
fn llamafactory_takes_no_arguments_flag() {
    let d = tmpdir();
    for to in ["llamafactory", "llamafactory-openai"] {
        let mut c = cmd(NORM, d.path());
        c.args(["-q", "--to", to, "--arguments", "object"])
            .arg(fixture("openai_legacy_shapes.jsonl"));
        let o = run(c);
        assert_code(&o, 2);
        assert!(
            stderr(&o).contains("--arguments object is for --to openai"),
            "{}",
            stderr(&o)
        );
    }
}

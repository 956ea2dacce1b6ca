//! Files larger than one read of `datasets`' JSON builder (10 MiB, `chunksize`): it types
//! the first chunk and casts every later one to that type, so a message key that only
//! tool rows have, when the first chunk holds none, stops the load. Each file here starts
//! with more than one chunk of plain chats and ends with tool-using sources, and loads
//! in HF `datasets` 4.0.0 and 5.x: `--to llamafactory-openai` as it is (every message
//! `{"role", "content"}`), `--to openai --columns core` with the `features=` and
//! `chunksize=` of docs/training.md.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::training::{all_tools, load_in_datasets};
use crate::util::*;

const NORM: &str = "traj-normalize";

/// Plain chats first (about 12 MB), then the tool-using `sources`: one input file.
fn plain_first(d: &Path, name: &str, sources: &[&str]) -> PathBuf {
    let pad = "x".repeat(2000);
    let mut text = String::with_capacity(13 << 20);
    for i in 0..6000 {
        writeln!(
            text,
            r#"{{"conversations": [{{"from": "human", "value": "question {i} {pad}"}}, {{"from": "gpt", "value": "answer {i}"}}]}}"#
        )
        .unwrap();
    }
    for s in sources {
        text.push_str(&std::fs::read_to_string(fixture(s)).unwrap());
    }
    let p = d.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Normalise `input` with `args` into `name`; the rows written and their tool messages.
fn normalize(d: &Path, input: &Path, name: &str, args: &[&str]) -> (PathBuf, usize, usize) {
    let out = d.join(name);
    let mut c = cmd(NORM, d);
    c.arg("-q").args(args).arg(input).arg("-o").arg(&out);
    assert_code(&run(c), 0);
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.len() > 11 << 20, "{}", text.len());
    let first_tool = text.find("\"tool\"").expect("a tool message");
    assert!(first_tool > 10 << 20, "{first_tool}");
    let tools = text.matches(r#"{"role": "tool", "#).count();
    assert!(tools > 40, "{tools}");
    (out, text.lines().count(), tools)
}

/// Load plainly (argv: file, cache dir, rows, list key, tool messages): every row, every
/// message of exactly `role` and `content`, every tool message.
const PLAIN: &str = r#"
import sys, datasets
datasets.disable_progress_bars()
ds = datasets.load_dataset("json", data_files=sys.argv[1], split="train", cache_dir=sys.argv[2])
assert len(ds) == int(sys.argv[3]), (len(ds), sys.argv[3])
msg = ds.features[sys.argv[4]]
msg = getattr(msg, "feature", msg[0] if isinstance(msg, list) else msg)
assert sorted(msg) == ["content", "role"], msg
tools = sum(m["role"] == "tool" for row in ds for m in row[sys.argv[4]])
assert tools == int(sys.argv[5]), (tools, sys.argv[5])
print("version", datasets.__version__)
print("ok")
"#;

/// `--to openai --columns core` with string arguments, loaded with the `features=` of
/// docs/training.md (argv: file, cache dir, rows): the calls and results all there.
const FEATURES: &str = r#"
import sys, datasets
datasets.disable_progress_bars()
from datasets import Features, List, Value

features = Features({
    "messages": List({
        "role": Value("string"),
        "content": Value("string"),
        "reasoning_content": Value("string"),
        "tool_calls": List({
            "id": Value("string"),
            "type": Value("string"),
            "function": {"name": Value("string"), "arguments": Value("string")},
        }),
        "tool_call_id": Value("string"),
        "name": Value("string"),
    }),
    "tools": Value("string"),
    "tool_stats": Value("string"),
    "tool_error_counts": Value("string"),
    "metadata": Value("string"),
})
ds = datasets.load_dataset("json", data_files=sys.argv[1], split="train",
                           features=features, cache_dir=sys.argv[2])
assert len(ds) == int(sys.argv[3]), (len(ds), sys.argv[3])
import json
want = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
for got, row in zip(ds, want):
    for g, m in zip(got["messages"], row["messages"]):
        assert {k: v for k, v in g.items() if v is not None} == {k: v for k, v in m.items() if v is not None}, (g, m)
print("version", datasets.__version__)
print("ok")
"#;

/// `--to openai --arguments object` (argv: file, cache dir, rows), read as one chunk
/// (`chunksize=` of docs/training.md): every row, the arguments objects.
const ONE_CHUNK: &str = r#"
import os, sys, datasets
datasets.disable_progress_bars()
ds = datasets.load_dataset("json", data_files=sys.argv[1], split="train",
                           chunksize=os.path.getsize(sys.argv[1]) + 1, cache_dir=sys.argv[2])
assert len(ds) == int(sys.argv[3]), (len(ds), sys.argv[3])
calls = [c for row in ds for m in row["messages"] for c in (m.get("tool_calls") or [])]
assert len(calls) > 50 and all(isinstance(c["function"]["arguments"], dict) for c in calls), len(calls)
print("version", datasets.__version__)
print("ok")
"#;

#[test]
fn files_larger_than_a_datasets_chunk_load_with_tool_rows_last() {
    let d = tmpdir();
    let input = plain_first(
        d.path(),
        "in.jsonl",
        &[
            "llamafactory_glaive_toolcall_en.jsonl",
            "hermes_reason_tool_use_50.jsonl",
            "traj_run_records.jsonl",
        ],
    );
    let core = ["--to", "llamafactory-openai", "--columns", "core"];
    let (file, n, t) = normalize(d.path(), &input, "lfo_core.jsonl", &core);
    load_in_datasets(
        d.path(),
        PLAIN,
        &file,
        &[&n.to_string(), "messages", &t.to_string()],
    );
    // Without --columns core: sources with the same top-level fields, and the same
    // tool_stats keys (--tools), as docs/normalize.md says.
    let tools = all_tools(d.path());
    let glaive = plain_first(
        d.path(),
        "in_glaive.jsonl",
        &["llamafactory_glaive_toolcall_en.jsonl"],
    );
    let mut args = vec!["--to", "llamafactory-openai", "--tools"];
    args.push(tools.to_str().unwrap());
    let (file, n, t) = normalize(d.path(), &glaive, "lfo.jsonl", &args);
    load_in_datasets(
        d.path(),
        PLAIN,
        &file,
        &[&n.to_string(), "messages", &t.to_string()],
    );
    let (file, n, _) = normalize(
        d.path(),
        &input,
        "openai_core.jsonl",
        &["--to", "openai", "--columns", "core"],
    );
    load_in_datasets(d.path(), FEATURES, &file, &[&n.to_string()]);
    // Object arguments of one source whose argument types agree (glaive's do not).
    let input = plain_first(d.path(), "in2.jsonl", &["hermes_reason_tool_use_50.jsonl"]);
    let args = [
        "--to",
        "openai",
        "--columns",
        "core",
        "--arguments",
        "object",
        "--tools-as",
        "string",
    ];
    let (file, n, _) = normalize(d.path(), &input, "openai_object.jsonl", &args);
    load_in_datasets(d.path(), ONE_CHUNK, &file, &[&n.to_string()]);
}

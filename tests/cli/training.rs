//! Training-ready output: `--columns core` and `--to openai --arguments object
//! --tools-as string` of mixed real sources load in HF `datasets` 4.0.0 and 5.x (two
//! venvs, made on first use under `target/venvs` or `$TRAJ_VENVS`), plain chats get no
//! tool prompt, and `--merge-consecutive` + `traj-filter --alternating` give rows whose
//! roles fit the `examples/training/` LLaMA-Factory and axolotl entries.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use serde_json::{Value, json};

use crate::util::*;

const NORM: &str = "traj-normalize";

/// The mixed sources: every fixture shape, and the public datasets twice.
pub(crate) fn sources() -> Vec<(PathBuf, Vec<&'static str>)> {
    // The three public datasets a second time, as a second source would bring them (the
    // copies in tests/fixtures are byte-identical to the originals; CI has only those).
    let shared = fixture("");
    let mut v: Vec<(PathBuf, Vec<&str>)> = [
        "llamafactory_glaive_toolcall_en.jsonl",
        "llamafactory_reason_tool_use_50.jsonl",
        "hermes_reason_tool_use_50.jsonl",
        "openai_legacy_shapes.jsonl",
        "traj_run_records.jsonl",
    ]
    .iter()
    .map(|n| (fixture(n), vec![]))
    .collect();
    v.push((
        fixture("swe_agent_demo_trajs.jsonl"),
        vec!["--messages-field", "history"],
    ));
    v.push((shared.join("llamafactory_glaive_toolcall_en.jsonl"), vec![]));
    v.push((shared.join("llamafactory_reason_tool_use_50.jsonl"), vec![]));
    v.push((
        shared.join("swe_agent_demo_trajs.jsonl"),
        vec!["--messages-field", "history"],
    ));
    v
}

/// Normalise every source with `args` (and `--tools all` once known) into one file;
/// returns its path and the rows.
pub(crate) fn mixed(
    d: &Path,
    name: &str,
    args: &[&str],
    tools: Option<&Path>,
) -> (PathBuf, Vec<Value>) {
    let out = d.join(name);
    let mut text = String::new();
    for (src, extra) in sources() {
        let mut c = cmd(NORM, d);
        c.arg("-q").args(args).args(&extra);
        if let Some(t) = tools {
            c.arg("--tools").arg(t);
        }
        c.arg(&src);
        let o = run(c);
        assert_code(&o, 0);
        text.push_str(&stdout(&o));
    }
    std::fs::write(&out, &text).unwrap();
    let rows = parse_jsonl(&text);
    (out, rows)
}

/// A core row's `tool_stats`: one JSON string (one Arrow type in any mix), read.
pub(crate) fn stats_of(r: &Value) -> Value {
    serde_json::from_str(
        r["tool_stats"]
            .as_str()
            .expect("core tool_stats: a JSON string"),
    )
    .unwrap()
}

/// The run's full tool list: every tool_stats key of a first pass.
pub(crate) fn all_tools(d: &Path) -> PathBuf {
    let (_, rows) = mixed(d, "first_pass.jsonl", &["--columns", "core"], None);
    let mut names = std::collections::BTreeSet::new();
    for r in &rows {
        names.extend(stats_of(r).as_object().unwrap().keys().cloned());
    }
    let p = d.join("all_tools.json");
    std::fs::write(&p, serde_json::to_string(&names).unwrap()).unwrap();
    p
}

static VENV_LOCK: Mutex<()> = Mutex::new(());

/// The python of a venv named `name` holding `spec`, made (and pip-installed) if it is
/// not there yet. Fails loudly when it cannot be made.
fn venv_python(name: &str, spec: &str) -> PathBuf {
    let _g = VENV_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let root = std::env::var_os("TRAJ_VENVS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/venvs"));
    let dir = root.join(name);
    let py = dir.join("bin/python");
    let ok = |py: &Path| {
        Command::new(py)
            .args(["-c", "import datasets, pyarrow"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !ok(&py) {
        std::fs::create_dir_all(&root).unwrap();
        let st = Command::new("python3")
            .arg("-m")
            .arg("venv")
            .arg(&dir)
            .status()
            .expect("python3 must be installed (scripts/setup.sh)");
        assert!(st.success(), "python3 -m venv {} failed", dir.display());
        let st = Command::new(&py)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                spec,
            ])
            .status()
            .expect("pip");
        assert!(
            st.success(),
            "pip install {spec} into {} failed",
            dir.display()
        );
        assert!(ok(&py), "{spec} installed but `import datasets` fails");
    }
    py
}

/// The two `datasets` versions the output must load in.
fn datasets_pythons() -> Vec<(&'static str, PathBuf)> {
    vec![
        ("4.0.0", venv_python("datasets-4.0.0", "datasets==4.0.0")),
        ("5.x", venv_python("datasets-5", "datasets>=5,<6")),
    ]
}

/// Run `script` (argv: file, cache dir, extra...) with each `datasets`; it must print ok.
pub(crate) fn load_in_datasets(d: &Path, script: &str, file: &Path, extra: &[&str]) {
    for (ver, py) in datasets_pythons() {
        let cache = d.join(format!("hf-cache-{ver}"));
        let load = || {
            Command::new(&py)
                .arg("-c")
                .arg(script)
                .arg(file)
                .arg(&cache)
                .args(extra)
                .env("HF_DATASETS_OFFLINE", "1")
                .env("HF_HOME", d.join("hf-home"))
                .env("HF_DATASETS_CACHE", &cache)
                .output()
                .expect("venv python")
        };
        // pyarrow under datasets 4.0.0 now and then dies of SIGSEGV on the same files
        // it loads the next time (seen on rows traj has written identically for rounds):
        // a crash of the loader is tried again, twice at most, and said on stderr; a
        // refusal or a difference never is.
        let mut o = load();
        for _ in 0..2 {
            if std::os::unix::process::ExitStatusExt::signal(&o.status) != Some(11) {
                break;
            }
            eprintln!(
                "datasets {ver}: the loader crashed (SIGSEGV) on {}; again",
                file.display()
            );
            o = load();
        }
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success() && out.contains("ok"),
            "datasets {ver} could not load {} ({}):\n{out}\n{}",
            file.display(),
            o.status,
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(out.contains(&format!("version {}", &ver[..1])), "{out}");
    }
}

const CORE_KEYS: [&str; 5] = [
    "conversations",
    "tools",
    "tool_stats",
    "tool_error_counts",
    "metadata",
];

#[test]
fn core_columns_of_mixed_sources_load_in_datasets_4_and_5() {
    let d = tmpdir();
    let tools = all_tools(d.path());
    let (file, rows) = mixed(d.path(), "core.jsonl", &["--columns", "core"], Some(&tools));
    assert!(rows.len() > 400, "{}", rows.len());
    let stat_keys: Vec<String> = stats_of(&rows[0])
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert!(stat_keys.len() > 10, "{stat_keys:?}");
    for r in &rows {
        let keys: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, CORE_KEYS);
        let s = stats_of(r);
        let k: Vec<&String> = s.as_object().unwrap().keys().collect();
        assert_eq!(k, stat_keys.iter().collect::<Vec<_>>());
        let meta: Value = serde_json::from_str(r["metadata"].as_str().unwrap()).unwrap();
        assert!(meta.is_object());
        let tl: Value = serde_json::from_str(r["tools"].as_str().unwrap()).unwrap();
        assert!(tl.is_array());
    }
    // The metadata keeps the other fields, in order: a SWE-agent row's own keys.
    let swe = std::fs::read_to_string(fixture("swe_agent_demo_trajs.jsonl")).unwrap();
    let first: serde_json::Map<String, Value> =
        serde_json::from_str(swe.lines().next().unwrap()).unwrap();
    let want: Vec<&String> = first
        .keys()
        .filter(|k| *k != "history" && *k != "tools")
        .collect();
    let swe_row = rows
        .iter()
        .find(|r| {
            let m: serde_json::Map<String, Value> =
                serde_json::from_str(r["metadata"].as_str().unwrap()).unwrap();
            m.keys()
                .filter(|k| *k != "message_keys")
                .collect::<Vec<_>>()
                == want
        })
        .expect("a row whose metadata holds the SWE-agent fields in order");
    assert!(swe_row["conversations"].as_array().unwrap().len() > 2);
    // A core row normalised again (core) is the same row.
    let mut c = cmd(NORM, d.path());
    c.args(["-q", "--columns", "core", "--tools"])
        .arg(&tools)
        .arg(&file);
    let again = run(c);
    assert_code(&again, 0);
    assert!(
        again.stdout == std::fs::read(&file).unwrap(),
        "core is not a fixed point"
    );
    let script = r#"
import sys, json, datasets
datasets.disable_progress_bars()
ds = datasets.load_dataset("json", data_files=sys.argv[1], split="train", cache_dir=sys.argv[2])
assert len(ds) == int(sys.argv[3]), len(ds)
assert ds.column_names == ["conversations", "tools", "tool_stats", "tool_error_counts", "metadata"], ds.column_names
keys = set(json.loads(ds[0]["tool_stats"]))
for r in ds:
    assert set(json.loads(r["tool_stats"])) == keys
    assert all(v is not None for v in json.loads(r["tool_stats"]).values())
    json.loads(r["metadata"]); json.loads(r["tools"])
print("version", datasets.__version__)
print("ok")
"#;
    let n = rows.len().to_string();
    load_in_datasets(d.path(), script, &file, &[&n]);
}

#[test]
fn openai_object_arguments_and_string_tools_load_in_datasets_4_and_5() {
    let d = tmpdir();
    let tools = all_tools(d.path());
    let args = [
        "--to",
        "openai",
        "--arguments",
        "object",
        "--tools-as",
        "string",
    ];
    let mut core_args = args.to_vec();
    core_args.extend(["--columns", "core"]);
    let (_, rows) = mixed(d.path(), "openai_core.jsonl", &core_args, Some(&tools));
    let mut calls = 0;
    for r in &rows {
        assert!(r["tools"].is_string());
        for m in r["messages"].as_array().unwrap() {
            for c in m["tool_calls"].as_array().into_iter().flatten() {
                assert!(c["function"]["arguments"].is_object(), "{c}");
                calls += 1;
            }
        }
    }
    assert!(calls > 300, "{calls}");
    // Object arguments cannot be one Arrow column across these sources (glaive's
    // `movie_id` is a string in one row and a number in another): `datasets` loads the
    // string spelling of the same rows, and the object file one source at a time.
    let mut string_args = core_args.clone();
    string_args[3] = "string";
    let (file, _) = mixed(
        d.path(),
        "openai_core_str.jsonl",
        &string_args,
        Some(&tools),
    );
    let script = r#"
import sys, json, datasets
datasets.disable_progress_bars()
ds = datasets.load_dataset("json", data_files=sys.argv[1], split="train", cache_dir=sys.argv[2])
assert len(ds) == int(sys.argv[3]), len(ds)
calls = 0
for r in ds:
    assert isinstance(json.loads(r["tools"]), list)
    for m in r["messages"]:
        for c in m.get("tool_calls") or []:
            assert isinstance(json.loads(c["function"]["arguments"]), dict), c
            calls += 1
assert calls == int(sys.argv[4]), calls
print("version", datasets.__version__)
print("ok")
"#;
    let (n, c) = (rows.len().to_string(), calls.to_string());
    load_in_datasets(d.path(), script, &file, &[&n, &c]);
    // Without --columns core a source whose argument types agree loads on its own.
    for (src, extra) in sources().into_iter().skip(1).take(2) {
        let out = d.path().join("one.jsonl");
        let mut c = cmd(NORM, d.path());
        c.arg("-q")
            .args(args)
            .args(&extra)
            .arg(&src)
            .arg("-o")
            .arg(&out);
        assert_code(&run(c), 0);
        let n = read_jsonl(&out).len().to_string();
        let script = r#"
import sys, json, datasets
datasets.disable_progress_bars()
ds = datasets.load_dataset("json", data_files=sys.argv[1], split="train", cache_dir=sys.argv[2])
assert len(ds) == int(sys.argv[3]), len(ds)
for r in ds:
    json.loads(r["tools"])
print("version", datasets.__version__)
print("ok")
"#;
        load_in_datasets(d.path(), script, &out, &[&n]);
    }
}

#[test]
fn plain_chats_get_no_tool_prompt() {
    let d = tmpdir();
    let input = json!({"id": 1, "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"}]});
    let mut c = cmd(NORM, d.path());
    c.arg("-q");
    let o = run_with_stdin(c, format!("{input}\n").as_bytes());
    assert_code(&o, 0);
    let rows = parse_jsonl(&stdout(&o));
    let conv = rows[0]["conversations"].as_array().unwrap();
    let froms: Vec<&str> = conv.iter().map(|t| t["from"].as_str().unwrap()).collect();
    // Its own system turn kept as is, and no tool prompt.
    assert_eq!(froms, ["system", "human", "gpt"]);
    assert_eq!(conv[0]["value"], "Be brief.");
    // A fixed point: normalising again changes nothing.
    let again = run_with_stdin(cmd(NORM, d.path()), &o.stdout);
    assert_code(&again, 0);
    assert_eq!(again.stdout, o.stdout);
    // A row that calls a tool keeps its prompt, even with no tool offered.
    let tooly = json!({"messages": [
        {"role": "user", "content": "ls"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "terminal", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "assistant", "content": "done"}]});
    let o = run_with_stdin(cmd(NORM, d.path()), format!("{tooly}\n").as_bytes());
    assert_code(&o, 0);
    let rows = parse_jsonl(&stdout(&o));
    assert_eq!(rows[0]["conversations"][0]["from"], "system");
}

/// LLaMA-Factory's rule, written out independently: optional system, then
/// human|tool / gpt in turn, even count, at least one pair.
fn alternates(froms: &[&str]) -> bool {
    let rest = match froms.first() {
        Some(&"system") => &froms[1..],
        _ => froms,
    };
    !rest.is_empty()
        && rest.len() % 2 == 0
        && rest.iter().enumerate().all(|(i, f)| {
            if i % 2 == 0 {
                matches!(*f, "human" | "tool")
            } else {
                *f == "gpt"
            }
        })
}

#[test]
fn merge_consecutive_and_alternating_fit_the_training_examples() {
    let d = tmpdir();
    let info: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/training/dataset_info.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let tags = &info["traj_hermes"]["tags"];
    for t in [
        "role_tag",
        "content_tag",
        "user_tag",
        "assistant_tag",
        "observation_tag",
        "function_tag",
        "system_tag",
    ] {
        assert!(
            tags[t].is_string(),
            "a partial tags dict fails in LLaMA-Factory: {t}"
        );
    }
    assert_eq!(info["traj_hermes"]["formatting"], "sharegpt");
    assert_eq!(info["traj_llamafactory"]["formatting"], "sharegpt");
    assert_eq!(info["traj_llamafactory_openai"]["formatting"], "openai");
    let role_values: Vec<&str> = ["user_tag", "assistant_tag", "observation_tag", "system_tag"]
        .iter()
        .map(|t| tags[*t].as_str().unwrap())
        .collect();
    let ax: Value = serde_norway::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/training/axolotl.yaml"),
        )
        .unwrap(),
    )
    .unwrap();
    let ds = &ax["datasets"][0];
    assert_eq!(ds["type"], "chat_template");
    assert_eq!(ds["field_messages"], "conversations");
    assert_eq!(
        ds["message_property_mappings"],
        json!({"role": "from", "content": "value"})
    );
    let mut ax_roles: Vec<String> = Vec::new();
    for v in ds["roles"].as_object().unwrap().values() {
        ax_roles.extend(
            v.as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap().to_string()),
        );
    }

    // Every source, merged, then filtered.
    let (merged, rows) = mixed(d.path(), "merged.jsonl", &["--merge-consecutive"], None);
    let kept = d.path().join("kept.jsonl");
    let rej = d.path().join("rej.jsonl");
    let mut c = cmd("traj-filter", d.path());
    c.arg("-q")
        .arg("--alternating")
        .arg(&merged)
        .arg("-o")
        .arg(&kept)
        .arg("--rejects")
        .arg(&rej);
    assert_code(&run(c), 0);
    let kept_rows = read_jsonl(&kept);
    let rejected = read_jsonl(&rej);
    assert_eq!(kept_rows.len() + rejected.len(), rows.len());
    assert!(
        kept_rows.len() * 10 > rows.len() * 9,
        "{} of {}",
        kept_rows.len(),
        rows.len()
    );
    for r in &kept_rows {
        let froms: Vec<&str> = r["conversations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["from"].as_str().unwrap())
            .collect();
        assert!(alternates(&froms), "{froms:?}");
        for f in &froms {
            assert!(role_values.contains(f), "{f} has no LLaMA-Factory tag");
            assert!(ax_roles.iter().any(|r| r == f), "{f} has no axolotl role");
        }
    }
    for r in &rejected {
        let why = r.to_string();
        assert!(why.contains("not-alternating: "), "{why}");
    }
    // Without the merge, repeated roles are rejected; with it, they are joined.
    let row = json!({"conversations": [
        {"from": "human", "value": "a"}, {"from": "human", "value": "b"},
        {"from": "gpt", "value": "c"}]});
    let line = format!("{row}\n");
    let plain = run_with_stdin(cmd(NORM, d.path()), line.as_bytes());
    let mut f = cmd("traj-filter", d.path());
    f.args(["-q", "--alternating", "--rejects", "r.jsonl"]);
    let o = run_with_stdin(f, &plain.stdout);
    assert_code(&o, 0);
    assert!(o.stdout.is_empty());
    let r = std::fs::read_to_string(d.path().join("r.jsonl")).unwrap();
    assert!(
        r.contains("not-alternating: turn 2: \\\"human\\\" after \\\"human\\\""),
        "{r}"
    );
    let mut c = cmd(NORM, d.path());
    c.arg("--merge-consecutive");
    let m = run_with_stdin(c, line.as_bytes());
    let mut f = cmd("traj-filter", d.path());
    f.args(["-q", "--alternating"]);
    let o = run_with_stdin(f, &m.stdout);
    let out = parse_jsonl(&stdout(&o));
    assert_eq!(out[0]["conversations"][0]["value"], "a\n\nb");
}

/// Renders every row of a `--to openai` file with transformers' `apply_chat_template`
/// and prints one JSON line of figures: rows, calls rendered, calls whose rendered
/// arguments are not an object, tool responses wrapped twice.
const RENDER: &str = r#"
import json, re, sys
from transformers import AutoTokenizer
tok = AutoTokenizer.from_pretrained(sys.argv[1])
call = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.DOTALL)
rows = calls = not_object = twice = 0
for line in open(sys.argv[2], encoding="utf-8"):
    row = json.loads(line)
    tools = json.loads(row["tools"]) or None
    text = tok.apply_chat_template(row["messages"], tools=tools, tokenize=False)
    rows += 1
    twice += text.count("<tool_response>\n<tool_response>")
    for body in call.findall(text):
        calls += 1
        not_object += not isinstance(json.loads(body)["arguments"], dict)
print(json.dumps({"rows": rows, "calls": calls, "not_object": not_object, "twice": twice}))
"#;

fn render(template: &Path, file: &Path) -> Value {
    let o = Command::new(transformers_python())
        .arg("-c")
        .arg(RENDER)
        .arg(template)
        .arg(file)
        .output()
        .expect("python");
    assert!(
        o.status.success(),
        "apply_chat_template on {}: {}",
        file.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// `--to openai --arguments object --tools-as string` of every source, rendered by
/// transformers' `apply_chat_template` with the Qwen2.5- and Hermes-style fixture
/// templates: every call's arguments come out as an object, no tool response is
/// wrapped twice, and traj's chat-template token count of the same rows is within 0.5%
/// of transformers'. With `--arguments string` the Hermes-style template (which `tojson`s
/// the arguments) double-encodes them: the check can fail.
#[test]
fn openai_object_arguments_render_once_in_both_fixture_templates() {
    let d = tmpdir();
    let tools = all_tools(d.path());
    let object = [
        "--to",
        "openai",
        "--arguments",
        "object",
        "--tools-as",
        "string",
        "--columns",
        "core",
    ];
    let (file, rows) = mixed(d.path(), "openai_object.jsonl", &object, Some(&tools));
    let calls: usize = rows
        .iter()
        .flat_map(|r| r["messages"].as_array().unwrap())
        .map(|m| m["tool_calls"].as_array().map_or(0, Vec::len))
        .sum();
    assert!(calls > 300, "{calls}");
    let mut string_args = object;
    string_args[3] = "string";
    let (file_str, _) = mixed(d.path(), "openai_string.jsonl", &string_args, Some(&tools));
    for t in ["templates/qwen2.5-style", "templates/hermes-style"] {
        let tdir = fixture(t);
        let r = render(&tdir, &file);
        assert_eq!(r["rows"], json!(rows.len()), "{t}: {r}");
        assert_eq!(r["calls"], json!(calls), "{t}: {r}");
        assert_eq!(r["not_object"], json!(0), "{t}: {r}");
        assert_eq!(r["twice"], json!(0), "{t}: {r}");
        if t.contains("hermes") {
            let s = render(&tdir, &file_str);
            assert_eq!(
                s["not_object"],
                json!(calls),
                "{t} with string arguments: {s}"
            );
        }
        // traj's count of these rows (traj-filter --tokenizer DIR) against transformers'.
        let want: Vec<f64> = {
            let o = Command::new(transformers_python())
                .arg(fixture("templates/count.py"))
                .arg(&tdir)
                .arg(&file)
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            String::from_utf8(o.stdout)
                .unwrap()
                .lines()
                .map(|l| l.trim().parse().unwrap())
                .collect()
        };
        let rej = d.path().join("too_many.jsonl");
        let mut c = cmd("traj-filter", d.path());
        c.args(["-q", "--max-row-tokens", "1", "--tokenizer"])
            .arg(&tdir)
            .arg(&file)
            .args(["-o", "kept.jsonl", "--rejects"])
            .arg(&rej);
        assert_code(&run(c), 0);
        let got: Vec<f64> = rejected_token_counts(&rej)
            .into_iter()
            .map(|n| n as f64)
            .collect();
        assert_eq!(got.len(), want.len(), "{t}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= w * 0.005,
                "{t} row {i}: traj {g}, transformers {w}"
            );
        }
    }
}

/// `examples/training/make-training-files.sh` (the three steps docs/training.md shows)
/// writes the two files dataset_info.json names, and no row is lost on the way: every
/// input row is in trajectories.jsonl or in not_alternating.jsonl with its reason.
#[test]
fn make_training_files_writes_what_dataset_info_names() {
    let d = tmpdir();
    let tools = all_tools(d.path());
    let out = d.path().join("out");
    let bin_dir = bin(NORM).parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let input = fixture("traj_run_records.jsonl");
    let swe = d.path().join("swe.jsonl");
    let mut c = cmd(NORM, d.path());
    c.args(["-q", "--messages-field", "history"])
        .arg(fixture("swe_agent_demo_trajs.jsonl"))
        .arg("-o")
        .arg(&swe);
    assert_code(&run(c), 0);
    let (mut n_in, mut n_rejected) = (0, 0);
    for (i, src) in [input, swe].iter().enumerate() {
        let o_dir = out.join(i.to_string());
        let o = Command::new("bash")
            .arg(
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("examples/training/make-training-files.sh"),
            )
            .arg(src)
            .arg(&tools)
            .arg(&o_dir)
            .env("PATH", &path)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let rows = read_jsonl(src).len();
        n_in += rows;
        let kept = read_jsonl(&o_dir.join("trajectories.jsonl"));
        let rej_path = o_dir.join("not_alternating.jsonl");
        let rejected = if rej_path.exists() {
            read_jsonl(&rej_path)
        } else {
            vec![]
        };
        assert_eq!(kept.len() + rejected.len(), rows, "{}", src.display());
        for r in &rejected {
            assert!(r.to_string().contains("not-alternating: "), "{r}");
        }
        n_rejected += rejected.len();
        let openai = read_jsonl(&o_dir.join("trajectories_openai.jsonl"));
        assert_eq!(openai.len(), kept.len());
        for r in &kept {
            let keys: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
            assert_eq!(keys, CORE_KEYS);
        }
        let info: Value = serde_json::from_str(
            &std::fs::read_to_string(
                Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/training/dataset_info.json"),
            )
            .unwrap(),
        )
        .unwrap();
        for entry in info.as_object().unwrap().values() {
            let f = entry["file_name"].as_str().unwrap();
            assert!(o_dir.join(f).is_file(), "{f} is not written");
        }
    }
    // Some SWE-agent rows cannot be made to alternate (a gpt turn with calls but no
    // result, then another gpt turn): they are in the rejects, not lost.
    assert!(
        n_in > 20 && n_rejected > 0,
        "{n_in} in, {n_rejected} rejected"
    );
}

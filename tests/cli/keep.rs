//! What traj-normalize keeps of a row (issue #26): the source's system text (a plain
//! chat's system turn, the text in front of the Hermes tool prompt of a row with tools,
//! given back by `--to openai`; a run record's prompt only with
//! `--keep-run-system-prompt`; none with `--drop-system-prompt`), per-message keys
//! (`loss_weight` on the turns, the rest in `message_keys`, all given back by `--to
//! openai`), messages that are no turn (kept whole, counted), and `--columns core` of
//! every fixture source in one file loading in `datasets` 4.0.0 and 5.x and through
//! LLaMA-Factory's reading of its turns.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::training::load_in_datasets;
use crate::training_llamafactory::LF_READ;
use crate::util::*;

const NORM: &str = "traj-normalize";

/// The first words of the Hermes tool prompt.
const HERMES: &str = "You are a function calling AI model.";

/// traj-normalize `args` on `input` (stdin); exit 0; (rows, stderr).
fn norm(d: &Path, input: &[u8], args: &[&str]) -> (Vec<Value>, String) {
    let mut c = cmd(NORM, d);
    c.args(args);
    let o = run_with_stdin(c, input);
    assert_code(&o, 0);
    (parse_jsonl(&stdout(&o)), stderr(&o))
}

/// traj-normalize `args` on `input` with `--stats`; (output text, stats, stderr).
fn norm_stats(d: &Path, input: &[u8], args: &[&str]) -> (String, Value, String) {
    let stats = d.join("stats.json");
    let mut c = cmd(NORM, d);
    c.args(args).arg("--stats").arg(&stats);
    let o = run_with_stdin(c, input);
    assert_code(&o, 0);
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    (stdout(&o), s, stderr(&o))
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).unwrap()
}

fn rows_of(name: &str) -> Vec<Value> {
    read_jsonl(&fixture(name))
}

/// The message list of an output row (`conversations` or `messages`).
fn list(r: &Value) -> &Vec<Value> {
    r.get("conversations")
        .or(r.get("messages"))
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("no list: {r}"))
}

#[test]
fn a_plain_chat_keeps_its_system_turn_and_openai_gives_it_back() {
    let d = tmpdir();
    let src = rows_of("llamafactory_dpo_en_system.jsonl");
    let input = read("llamafactory_dpo_en_system.jsonl");
    let (out, _) = norm(d.path(), &input, &["-q"]);
    assert_eq!(out.len(), src.len());
    let text = out.iter().map(|r| format!("{r}\n")).collect::<String>();
    let (openai, _) = norm(d.path(), text.as_bytes(), &["-q", "--to", "openai"]);
    let (lf, _) = norm(d.path(), &input, &["-q", "--to", "llamafactory"]);
    for (i, s) in src.iter().enumerate() {
        let system = &s["conversations"][0]["value"];
        assert_eq!(s["conversations"][0]["from"], "system");
        // Kept as is, in its place; the DPO columns pass through.
        assert_eq!(list(&out[i])[0], json!({"from": "system", "value": system}));
        assert_eq!(
            list(&out[i])[1..],
            s["conversations"].as_array().unwrap()[1..]
        );
        assert_eq!(out[i]["chosen"], s["chosen"]);
        assert_eq!(
            list(&openai[i])[0],
            json!({"role": "system", "content": system})
        );
        // LLaMA-Factory reads a first `system` turn as the system prompt.
        assert_eq!(list(&lf[i])[0], json!({"from": "system", "value": system}));
    }
    // A fixed point.
    let (again, _) = norm(d.path(), text.as_bytes(), &["-q"]);
    assert_eq!(again, out);
}

/// A message a ShareGPT row keeps whole (a system turn after the first turn, a tool
/// result after a reply with no call, as ToolACE writes) comes back from `--to openai`
/// as an OpenAI message (`role`, `content`, its other keys), never as a `from`/`value`
/// object that a chat template or trainer reads as a message without a role.
#[test]
fn a_sharegpt_message_kept_whole_comes_back_as_an_openai_message() {
    let d = tmpdir();
    let rows = concat!(
        r#"{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}, "#,
        r#"{"from": "system", "value": "Now answer in French.", "weight": 0}, "#,
        r#"{"from": "human", "value": "bye"}, {"from": "gpt", "value": "au revoir"}]}"#,
        "\n",
        r#"{"conversations": [{"from": "human", "value": "trends?"}, "#,
        r#"{"from": "gpt", "value": "[Market Trends API(trend_type=\"MOST_ACTIVE\")]"}, "#,
        r#"{"from": "tool", "value": "[{\"name\": \"AAPL\"}]"}, "#,
        r#"{"from": "gpt", "value": "AAPL."}]}"#,
        "\n"
    );
    let (hermes, _) = norm(d.path(), rows.as_bytes(), &[]);
    let text: String = hermes.iter().map(|r| format!("{r}\n")).collect();
    let (back, _) = norm(d.path(), text.as_bytes(), &["--to", "openai"]);
    assert_eq!(back.len(), 2);
    for (row, at, want) in [
        (
            &back[0],
            2,
            json!({"role": "system", "content": "Now answer in French.", "weight": 0}),
        ),
        (
            &back[1],
            2,
            json!({"role": "tool", "content": "[{\"name\": \"AAPL\"}]"}),
        ),
    ] {
        let m = list(row);
        assert_eq!(m[at], want, "{row}");
        for msg in m {
            assert!(msg["role"].is_string(), "a message without a role: {msg}");
        }
    }
}

#[test]
fn a_row_with_tools_keeps_its_system_text_in_front_of_the_hermes_prompt() {
    let d = tmpdir();
    let src = rows_of("toolbench_answers.jsonl");
    let (text, stats, err) = norm_stats(d.path(), &read("toolbench_answers.jsonl"), &[]);
    let out = parse_jsonl(&text);
    assert_eq!(out.len(), src.len(), "{err}");
    assert!(err.contains(&format!("{} written", src.len())), "{err}");
    let (openai, _) = norm(d.path(), text.as_bytes(), &["-q", "--to", "openai"]);
    for (i, s) in src.iter().enumerate() {
        let own = s["messages"][0]["content"].as_str().unwrap();
        let sys = list(&out[i])[0]["value"].as_str().unwrap();
        assert_eq!(list(&out[i])[0]["from"], "system");
        // Exactly: the source's text, a blank line, the Hermes prompt with the tools.
        assert!(sys.starts_with(&format!("{own}\n\n{HERMES}")), "{sys}");
        assert!(sys.contains("<tools>\n[{\"name\": "), "{sys}");
        // --to openai gives the source's text back, alone.
        assert_eq!(list(&openai[i])[0]["content"], own);
        // ToolBench's per-message `valid` comes back on every message.
        let back = list(&openai[i]);
        let src_msgs = s["messages"].as_array().unwrap();
        assert_eq!(back.len(), src_msgs.len());
        for (b, m) in back.iter().zip(src_msgs) {
            assert_eq!(
                b["role"].as_str().map(|r| r == "tool"),
                Some(m["role"] == "function"),
                "{b} {m}"
            );
            assert_eq!(b["valid"], m["valid"], "{b} {m}");
        }
    }
    // Nothing of it counted as dropped.
    for (_, n) in stats["dropped_parts"].as_object().unwrap() {
        assert_eq!(n, 0, "{stats}");
    }
    // Hermes → openai → Hermes: the same rows.
    let back: String = openai.iter().map(|r| format!("{r}\n")).collect();
    let (again, _) = norm(d.path(), back.as_bytes(), &["-q"]);
    assert_eq!(again, out);
}

#[test]
fn a_run_records_prompt_is_dropped_unless_asked_and_every_drop_is_counted() {
    let d = tmpdir();
    let input = read("traj_run_records.jsonl");
    let run_sys = "You are an agent. Today is Sunday.";
    // Default: the run's prompt is not training text (the reference's rule), counted.
    let (text, stats, err) = norm_stats(d.path(), &input, &[]);
    assert!(!text.contains("Today is Sunday"));
    let with_sys = rows_of("traj_run_records.jsonl")
        .iter()
        .filter(|r| r["messages"][0]["role"] == "system")
        .count() as u64;
    assert!(with_sys > 0);
    assert_eq!(
        stats["dropped_parts"]["run_system_prompt"], with_sys,
        "{stats}"
    );
    assert!(
        err.contains(&format!("run_system_prompt: {with_sys}")),
        "{err}"
    );
    // --keep-run-system-prompt: in front of the Hermes prompt.
    let (out, _) = norm(d.path(), &input, &["-q", "--keep-run-system-prompt"]);
    assert!(
        list(&out[0])[0]["value"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{run_sys}\n\n{HERMES}")),
        "{}",
        out[0]
    );
    // --drop-system-prompt: every row's own text goes, counted as such.
    let dpo = read("llamafactory_dpo_en_system.jsonl");
    let (text, stats, err) = norm_stats(d.path(), &dpo, &["--drop-system-prompt"]);
    for r in parse_jsonl(&text) {
        assert_eq!(list(&r)[0]["from"], "human");
    }
    assert_eq!(stats["dropped_parts"]["system_prompt"], 10, "{stats}");
    assert!(err.contains("system_prompt: 10"), "{err}");
    // The two flags contradict each other.
    let mut c = cmd(NORM, d.path());
    c.args(["--drop-system-prompt", "--keep-run-system-prompt"]);
    let o = run_with_stdin(c, &dpo);
    assert_code(&o, 2);
}

#[test]
fn mini_swe_agent_rows_are_read_whole_and_given_back() {
    let d = tmpdir();
    let src = rows_of("mini_swe_agent_trajs.jsonl");
    let (text, stats, err) = norm_stats(d.path(), &read("mini_swe_agent_trajs.jsonl"), &[]);
    let out = parse_jsonl(&text);
    assert_eq!(out.len(), 4, "{err}");
    let exits = src
        .iter()
        .flat_map(|r| r["messages"].as_array().unwrap())
        .filter(|m| m["role"] == "exit")
        .count() as u64;
    assert_eq!(exits, 2);
    assert_eq!(
        stats["kept_outside_conversation"]["message_without_turn"], exits,
        "{stats}"
    );
    assert!(
        err.contains(&format!("message_without_turn: {exits}")),
        "{err}"
    );
    let (openai, _) = norm(d.path(), text.as_bytes(), &["-q", "--to", "openai"]);
    for (i, s) in src.iter().enumerate() {
        let msgs = s["messages"].as_array().unwrap();
        let own = msgs[0]["content"].as_str().unwrap();
        let sys = list(&out[i])[0]["value"].as_str().unwrap();
        if msgs
            .iter()
            .any(|m| m.get("tool_calls").is_some_and(|c| c.is_array()))
        {
            assert!(sys.starts_with(&format!("{own}\n\n{HERMES}")), "{sys}");
        } else {
            assert_eq!(sys, own);
        }
        // Reasoning in <think>.
        for m in msgs.iter().filter(|m| m["role"] == "assistant") {
            if let Some(r) = m["reasoning_content"].as_str() {
                let t = format!("<think>\n{r}\n</think>");
                assert!(
                    list(&out[i])
                        .iter()
                        .any(|x| x["value"].as_str().unwrap().starts_with(&t)),
                    "reasoning not in <think>"
                );
            }
        }
        // --to openai: every message back, with its `extra` and the `exit` message whole.
        let back = list(&openai[i]);
        assert_eq!(back.len(), msgs.len(), "row {i}");
        assert_eq!(back[0]["content"], own);
        for (b, m) in back.iter().zip(msgs) {
            assert_eq!(b["extra"], m["extra"], "row {i}");
            if m["role"] == "exit" {
                assert_eq!(b, m);
            }
        }
    }
}

#[test]
fn loss_weight_rides_on_the_turns_as_llamafactory_reads_it() {
    let d = tmpdir();
    let src = rows_of("llamafactory_v1_sft_loss_weight.jsonl");
    let input = read("llamafactory_v1_sft_loss_weight.jsonl");
    let (out, _) = norm(d.path(), &input, &["-q"]);
    let (lf, _) = norm(d.path(), &input, &["-q", "--to", "llamafactory"]);
    let (core, _) = norm(d.path(), &input, &["-q", "--columns", "core"]);
    let text: String = out.iter().map(|r| format!("{r}\n")).collect();
    let (openai, _) = norm(d.path(), text.as_bytes(), &["-q", "--to", "openai"]);
    for (i, s) in src.iter().enumerate() {
        let msgs = s["messages"].as_array().unwrap();
        for (k, m) in msgs.iter().enumerate() {
            let w = &m["loss_weight"];
            assert!(w.is_number());
            assert_eq!(&list(&out[i])[k]["loss_weight"], w, "{}", out[i]);
            assert_eq!(&list(&lf[i])[k]["loss_weight"], w, "{}", lf[i]);
            assert_eq!(&list(&openai[i])[k]["loss_weight"], w, "{}", openai[i]);
        }
        assert!(out[i].get("message_keys").is_none(), "{}", out[i]);
        // Under --columns core the turns stay {from, value}; the weights are in metadata.
        for t in list(&core[i]) {
            assert_eq!(t.as_object().unwrap().len(), 2, "{t}");
        }
        let meta: Value = serde_json::from_str(core[i]["metadata"].as_str().unwrap()).unwrap();
        assert_eq!(
            meta["message_keys"][0]["keys"]["loss_weight"],
            msgs[0]["loss_weight"]
        );
    }
    // A core row normalised again gives the weights back on the turns.
    let text: String = core.iter().map(|r| format!("{r}\n")).collect();
    let (again, _) = norm(d.path(), text.as_bytes(), &["-q"]);
    assert_eq!(
        list(&again[0])[1]["loss_weight"],
        src[0]["messages"][1]["loss_weight"]
    );
}

#[test]
fn keys_without_a_field_are_kept_and_what_cannot_be_is_counted() {
    let d = tmpdir();
    let row = json!({"id": 7, "messages": [
        {"role": "user", "content": "hi", "name": "alice"},
        {"role": "tool", "tool_call_id": "x", "content": "stray"},
        {"role": "assistant", "content": null, "weight": 0, "tool_calls": [
            {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "f", "content": "ok", "valid": true},
        {"role": "assistant", "content": "done"}]});
    let input = format!("{row}\n");
    let (text, stats, err) = norm_stats(d.path(), input.as_bytes(), &[]);
    let out = parse_jsonl(&text);
    assert_eq!(out.len(), 1);
    // The stray result is no turn: kept whole, counted, never "1 read, 1 written" silently.
    assert_eq!(list(&out[0]).len(), 5, "{}", out[0]); // system, human, gpt, tool, gpt
    assert_eq!(
        stats["kept_outside_conversation"]["tool_result_without_call"], 1,
        "{stats}"
    );
    assert_eq!(stats["dropped_parts"]["tool_call_key"], 1, "{stats}");
    assert!(
        err.contains("1 parts kept outside the conversation (tool_result_without_call: 1)"),
        "{err}"
    );
    assert!(err.contains("1 parts dropped (tool_call_key: 1)"), "{err}");
    let kept = out[0]["message_keys"].as_array().unwrap();
    assert!(
        kept.iter().any(|k| k["keys"]["name"] == "alice"),
        "{kept:?}"
    );
    // --to openai: every message back at its place, with its keys (the call's `index`
    // is the one part gone).
    let (openai, _) = norm(d.path(), text.as_bytes(), &["-q", "--to", "openai"]);
    let back = list(&openai[0]);
    let msgs = row["messages"].as_array().unwrap();
    assert_eq!(back.len(), msgs.len());
    assert_eq!(back[0]["name"], "alice");
    assert_eq!(back[1], msgs[1]);
    assert_eq!(back[2]["weight"], 0);
    assert_eq!(back[3]["valid"], true);
    // The Hermes output is a fixed point, its message_keys read back.
    let (again, _) = norm(d.path(), text.as_bytes(), &["-q"]);
    assert_eq!(again, out);
}

/// Every fixture source: (file, extra flags).
fn every_source() -> Vec<(PathBuf, Vec<&'static str>)> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(fixture("")).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        if !name.ends_with(".jsonl") || name.starts_with("prompts_") {
            continue; // prompts_*: prompts for traj-run, not trajectories
        }
        let extra = if name.starts_with("swe_agent") {
            vec!["--messages-field", "history"]
        } else {
            vec![]
        };
        v.push((p, extra));
    }
    v.sort();
    assert!(v.len() >= 13, "{v:?}");
    v
}

/// The mix of every source under `args` (no `--tools`: the type must hold without one).
/// Only hermes-agent's unrepairable replies (a Python-dict call, tests/cli/repair.rs) are
/// rejected; every other row of every source is written.
fn mix(d: &Path, name: &str, args: &[&str]) -> (PathBuf, Vec<Value>) {
    let mut text = String::new();
    let rejects = d.join("mix_rejects.jsonl");
    for (src, extra) in every_source() {
        let mut c = cmd(NORM, d);
        c.arg("-q").args(args).args(&extra).arg(&src);
        c.args(["--on-error", "skip", "--rejects"]).arg(&rejects);
        let o = run(c);
        assert_code(&o, 0);
        assert!(!o.stdout.is_empty(), "{}", src.display());
        let rejected = std::fs::read_to_string(&rejects).unwrap_or_default();
        let name = src.file_name().unwrap().to_str().unwrap();
        if name != "hermes_agent_repairs.jsonl" {
            assert_eq!(rejected, "", "{name}");
        }
        text.push_str(&stdout(&o));
    }
    let p = d.join(name);
    std::fs::write(&p, &text).unwrap();
    (p, parse_jsonl(&text))
}

#[test]
fn core_columns_of_every_fixture_source_load_in_datasets_and_llamafactorys_reading() {
    let d = tmpdir();
    let (file, rows) = mix(d.path(), "core.jsonl", &["--columns", "core"]);
    for r in &rows {
        for k in ["tool_stats", "tool_error_counts"] {
            let s = r[k]
                .as_str()
                .unwrap_or_else(|| panic!("{k} not a string: {r}"));
            assert!(serde_json::from_str::<Value>(s).unwrap().is_object());
        }
    }
    let script = r#"
import sys, json, datasets
datasets.disable_progress_bars()
ds = datasets.load_dataset("json", data_files=sys.argv[1], split="train", cache_dir=sys.argv[2])
assert len(ds) == int(sys.argv[3]), len(ds)
assert ds.column_names == ["conversations", "tools", "tool_stats", "tool_error_counts", "metadata"]
for k in ("tool_stats", "tool_error_counts", "tools", "metadata"):
    assert ds.features[k].dtype == "string", ds.features
for r in ds:
    assert isinstance(json.loads(r["tool_stats"]), dict)
    json.loads(r["metadata"])
print("version", datasets.__version__)
print("ok")
"#;
    let n = rows.len().to_string();
    load_in_datasets(d.path(), script, &file, &[&n]);
    // A file of rows with no tool at all (every map empty) has the same types.
    let plain = d.path().join("plain.jsonl");
    let mut c = cmd(NORM, d.path());
    c.args(["-q", "--columns", "core", "-o"])
        .arg(&plain)
        .arg(fixture("fastchat_sharegpt_dummy.jsonl"));
    assert_code(&run(c), 0);
    let n = read_jsonl(&plain).len().to_string();
    load_in_datasets(d.path(), script, &plain, &[&n]);
    // LLaMA-Factory's turns of the same mix, read as LLaMA-Factory reads them.
    let lf_load = r#"
import sys, datasets
datasets.disable_progress_bars()
ds = datasets.load_dataset("json", data_files=sys.argv[1], split="train", cache_dir=sys.argv[2])
assert len(ds) == int(sys.argv[3]), len(ds)
systems = 0
for row in ds:
    msgs = hf_messages(row)
    systems += msgs[0]["role"] == "system"
    assert all(m["role"] != "system" for m in msgs[1:]), msgs
    assert isinstance(json.loads(row["tool_stats"]), dict)
assert systems > 0
print("version", datasets.__version__)
print("ok")
"#;
    let (file, rows) = mix(
        d.path(),
        "lf.jsonl",
        &["--to", "llamafactory", "--columns", "core"],
    );
    let n = rows.len().to_string();
    load_in_datasets(d.path(), &format!("{LF_READ}{lf_load}"), &file, &[&n]);
}

#[test]
fn llamafactorys_system_column_is_the_system_text_of_a_row_without_one() {
    let d = tmpdir();
    let row = json!({"conversations": [
        {"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}],
        "system": "Be kind.", "id": 3});
    let (out, _) = norm(d.path(), format!("{row}\n").as_bytes(), &["-q"]);
    assert_eq!(
        list(&out[0])[0],
        json!({"from": "system", "value": "Be kind."})
    );
    assert!(out[0].get("system").is_none(), "{}", out[0]);
    assert_eq!(out[0]["id"], 3);
    let (openai, _) = norm(
        d.path(),
        format!("{row}\n").as_bytes(),
        &["-q", "--to", "openai"],
    );
    assert_eq!(
        list(&openai[0])[0],
        json!({"role": "system", "content": "Be kind."})
    );
    // A list's own system turn wins; the column then passes through as it is.
    let both = json!({"conversations": [
        {"from": "system", "value": "Own."}, {"from": "human", "value": "hi"}],
        "system": "Column."});
    let (out, _) = norm(d.path(), format!("{both}\n").as_bytes(), &["-q"]);
    assert_eq!(list(&out[0])[0]["value"], "Own.");
    assert_eq!(out[0]["system"], "Column.");
}

#[test]
fn a_metadata_string_with_a_key_twice_is_kept_as_its_text() {
    // Unpacked, one of the two values would be lost: such a string is the row's own
    // text, kept whole inside the core row's metadata (the same row when read again).
    let d = tmpdir();
    let meta = r#"{"a": 1, "a": 2}"#;
    let row = json!({"conversations": [{"from": "human", "value": "hi"},
        {"from": "gpt", "value": "yo"}], "metadata": meta});
    let (core, _) = norm(
        d.path(),
        format!("{row}\n").as_bytes(),
        &["--columns", "core"],
    );
    let inner: Value = serde_json::from_str(core[0]["metadata"].as_str().unwrap()).unwrap();
    assert_eq!(inner, json!({"metadata": meta}), "{}", core[0]);
    let (again, _) = norm(
        d.path(),
        format!("{}\n", core[0]).as_bytes(),
        &["--columns", "core"],
    );
    assert_eq!(again, core);
    // A field of the metadata that a column of the same name replaces is counted.
    let both = json!({"conversations": [{"from": "human", "value": "hi"}],
        "metadata": r#"{"id": 1, "k": 3}"#, "id": 2, "k": 3});
    let (_, s, err) = norm_stats(
        d.path(),
        format!("{both}\n").as_bytes(),
        &["--columns", "core"],
    );
    assert_eq!(s["dropped_parts"]["metadata_key"], 1, "{s}");
    assert!(err.contains("metadata_key: 1"), "{err}");
    // An object spelled once is unpacked, as before.
    let once = json!({"conversations": [{"from": "human", "value": "hi"}],
        "metadata": r#"{"a": 1}"#});
    let (core, _) = norm(
        d.path(),
        format!("{once}\n").as_bytes(),
        &["--columns", "core"],
    );
    assert_eq!(core[0]["metadata"], json!(r#"{"a": 1}"#), "{}", core[0]);
}

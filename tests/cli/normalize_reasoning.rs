//! traj-normalize: reasoning is never answer text and nothing of a message is lost
//! unsaid. A leading `<think>` block is the turn's reasoning however it is framed (and
//! the documented round trips stay byte for byte); competing reasoning fields are kept
//! in `message_keys` or counted; `--columns core --to openai` rows have one schema;
//! results without ids answer their calls' ids; `message_keys` keep their order when
//! read again; another writer's tool prompt is counted when it is replaced.

use std::path::Path;

use serde_json::{Value, json};

use crate::training::load_in_datasets;
use crate::util::*;

const NORM: &str = "traj-normalize";

/// traj-normalize `args` on `input` (stdin); exit 0; stdout.
fn norm(d: &Path, input: &[u8], args: &[&str]) -> String {
    let mut c = cmd(NORM, d);
    c.arg("-q").args(args);
    let o = run_with_stdin(c, input);
    assert_code(&o, 0);
    stdout(&o)
}

/// traj-normalize `args` on `input` with `--stats`: the stats' `dropped_parts`.
fn dropped(d: &Path, input: &[u8], args: &[&str]) -> Value {
    let stats = d.join("stats.json");
    let mut c = cmd(NORM, d);
    c.arg("-q").args(args).arg("--stats").arg(&stats);
    assert_code(&run_with_stdin(c, input), 0);
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    s["dropped_parts"].clone()
}

/// The messages of the one row of `text`.
fn messages(text: &str) -> Vec<Value> {
    parse_jsonl(text)[0]["messages"].as_array().unwrap().clone()
}

const FRAMED: &str = r#"{"conversations": [{"from": "human", "value": "x"}, {"from": "gpt", "value": "<think>\nR\n</think>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"}, {"from": "tool", "value": "<tool_response>\n{\"name\": \"f\", \"content\": \"ok\"}\n</tool_response>"}, {"from": "gpt", "value": "<think>R2</think>done"}]}
{"conversations": [{"from": "human", "value": "x"}, {"from": "gpt", "value": "<think>\n</think>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"}, {"from": "tool", "value": "<tool_response>\n{\"name\": \"f\", \"content\": \"ok\"}\n</tool_response>"}, {"from": "gpt", "value": "done"}]}
"#;

#[test]
fn a_leading_think_block_is_reasoning_however_it_is_framed() {
    let d = tmpdir();
    let out = norm(d.path(), FRAMED.as_bytes(), &["--to", "openai"]);
    let rows = parse_jsonl(&out);
    let m = rows[0]["messages"].as_array().unwrap();
    assert_eq!(m[1]["reasoning_content"], "R", "{}", m[1]);
    assert_eq!(m[1]["content"], Value::Null);
    assert_eq!(m[3]["reasoning_content"], "R2", "{}", m[3]);
    assert_eq!(m[3]["content"], "done");
    let m = rows[1]["messages"].as_array().unwrap();
    assert_eq!(m[1]["content"], Value::Null, "{}", m[1]);
    assert!(m[1].get("reasoning_content").is_none());
    // The Hermes rows written frame the blocks canonically.
    let hermes = norm(d.path(), FRAMED.as_bytes(), &[]);
    let h = parse_jsonl(&hermes);
    assert_eq!(
        h[0]["conversations"][4]["value"],
        "<think>\nR2\n</think>\ndone"
    );
    assert!(
        h[0]["conversations"][2]["value"]
            .as_str()
            .unwrap()
            .starts_with("<think>\nR\n</think>\n<tool_call>")
    );
}

/// On hermes-agent's own rows: no reasoning in any `--to openai` content, and the
/// documented round trips (normalising again, through OpenAI, through both LLaMA-Factory
/// shapes) give the same bytes.
#[test]
fn hermes_agent_rows_keep_reasoning_apart_and_round_trip() {
    let d = tmpdir();
    let hermes = d.path().join("h.jsonl");
    let mut c = cmd(NORM, d.path());
    c.args(["-q", "--on-error", "skip", "--rejects"])
        .arg(d.path().join("rejects.jsonl"))
        .arg(fixture("hermes_agent_repairs.jsonl"))
        .arg("-o")
        .arg(&hermes);
    assert_code(&run(c), 0);
    let text = std::fs::read(&hermes).unwrap();
    let openai = norm(d.path(), &text, &["--to", "openai"]);
    let mut assistants = 0;
    for r in parse_jsonl(&openai) {
        for m in r["messages"].as_array().unwrap() {
            if m["role"] == "assistant" {
                assistants += 1;
                let c = m["content"].as_str().unwrap_or("");
                assert!(!c.contains("<think>"), "{m}");
            }
        }
    }
    assert!(assistants > 50, "{assistants}");
    assert_eq!(norm(d.path(), &text, &[]).as_bytes(), text, "idempotence");
    assert_eq!(
        norm(d.path(), openai.as_bytes(), &[]).as_bytes(),
        text,
        "hermes -> openai -> hermes"
    );
    // Every row that offers or uses tools (a plain chat with reasoning reads back as
    // Hermes text, as documented).
    let rows = parse_jsonl(std::str::from_utf8(&text).unwrap());
    let tooly = |r: &Value| {
        r["conversations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["from"] == "system" || t["from"] == "tool")
    };
    let with_tools = rows.iter().filter(|r| tooly(r)).count();
    assert!(with_tools >= 15, "{with_tools}");
    for to in ["llamafactory", "llamafactory-openai"] {
        let lf = norm(d.path(), &text, &["--to", to]);
        let back = parse_jsonl(&norm(d.path(), lf.as_bytes(), &[]));
        for (h, b) in rows.iter().zip(&back) {
            assert!(!tooly(h) || h == b, "hermes -> {to} -> hermes:\n{h}\n{b}");
        }
    }
}

#[test]
fn competing_reasoning_is_kept_or_counted() {
    let d = tmpdir();
    let both = r#"{"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "ans", "reasoning_content": "FIRST", "reasoning": "SECOND"}]}
"#;
    let hermes = norm(d.path(), both.as_bytes(), &[]);
    let h = &parse_jsonl(&hermes)[0];
    assert_eq!(
        h["conversations"][1]["value"],
        "<think>\nSECOND\n</think>\nans"
    );
    assert_eq!(
        h["message_keys"],
        json!([{"turn": 1, "keys": {"reasoning_content": "FIRST"}}])
    );
    // Both given back by --to openai, from the source and from the Hermes row.
    for input in [both, hermes.as_str()] {
        let m = &messages(&norm(d.path(), input.as_bytes(), &["--to", "openai"]))[1];
        assert_eq!(m["reasoning"], "SECOND", "{m}");
        assert_eq!(m["reasoning_content"], "FIRST", "{m}");
    }
    assert_eq!(norm(d.path(), hermes.as_bytes(), &[]), hermes);
    // A signature of reasoning_details is kept with them.
    let signed = r#"{"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "ans", "reasoning_details": [{"type": "reasoning.text", "text": "R", "signature": "sig"}]}]}
"#;
    let m = &messages(&norm(d.path(), signed.as_bytes(), &["--to", "openai"]))[1];
    assert_eq!(m["reasoning_content"], "R");
    assert_eq!(m["reasoning_details"][0]["signature"], "sig", "{m}");
    // A thinking part beside the message's own reasoning, a part's cache_control: counted.
    let parts = r#"{"messages": [{"role": "user", "content": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}]}, {"role": "assistant", "content": [{"type": "thinking", "thinking": "T1"}, {"type": "text", "text": "ans"}], "reasoning_content": "RC"}]}
"#;
    let p = dropped(d.path(), parts.as_bytes(), &[]);
    assert_eq!(p["reasoning_part"], 1, "{p}");
    assert_eq!(p["content_part_key"], 1, "{p}");
    let p = dropped(d.path(), signed.as_bytes(), &[]);
    assert_eq!(
        (p["reasoning_part"].clone(), p["content_part_key"].clone()),
        (json!(0), json!(0))
    );
}

#[test]
fn core_openai_rows_have_one_schema() {
    let d = tmpdir();
    let input = r#"{"messages": [{"role": "user", "content": "x", "extra": {"a": 1}}, {"role": "assistant", "content": "y", "loss_weight": 1.0}]}
{"messages": [{"role": "user", "content": "x", "extra": 5}, {"role": "assistant", "content": "y"}, {"role": "exit", "content": "", "extra": "done"}]}
{"conversations": [{"from": "human", "value": "x"}, {"from": "gpt", "value": "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"}, {"from": "tool", "value": "<tool_response>\n{\"name\": \"f\", \"content\": 5}\n</tool_response>"}, {"from": "gpt", "value": "done"}]}
"#;
    let out = norm(
        d.path(),
        input.as_bytes(),
        &["--to", "openai", "--columns", "core"],
    );
    let rows = parse_jsonl(&out);
    for r in &rows {
        for m in r["messages"].as_array().unwrap() {
            for k in m.as_object().unwrap().keys() {
                assert!(
                    ["role", "content", "tool_calls", "tool_call_id", "name"].contains(&k.as_str()),
                    "{m}"
                );
            }
            assert!(m["content"].is_string() || m["content"].is_null(), "{m}");
        }
    }
    let meta: Value = serde_json::from_str(rows[1]["metadata"].as_str().unwrap()).unwrap();
    assert_eq!(
        meta["message_keys"],
        json!([{"turn": 0, "keys": {"extra": 5}}, {"at": 2, "message": {"role": "exit", "content": "", "extra": "done"}}])
    );
    let file = d.path().join("core.jsonl");
    std::fs::write(&file, &out).unwrap();
    let script = r#"
import sys, json, datasets
datasets.disable_progress_bars()
ds = datasets.load_dataset("json", data_files=sys.argv[1], split="train", cache_dir=sys.argv[2])
assert len(ds) == 3, len(ds)
for r in ds:
    for m in r["messages"]:
        assert m["content"] is None or isinstance(m["content"], str), m
print("version", datasets.__version__)
print("ok")
"#;
    load_in_datasets(d.path(), script, &file, &[]);
    // Read back: every key and message where it was.
    let back = norm(d.path(), out.as_bytes(), &["--to", "openai"]);
    let direct = norm(d.path(), input.as_bytes(), &["--to", "openai"]);
    let msgs = |t: &str| -> Vec<Value> {
        parse_jsonl(t)
            .iter()
            .map(|r| r["messages"].clone())
            .collect()
    };
    // (A result's number output is its text in a core row: it comes back a string.)
    assert_eq!(msgs(&back)[..2], msgs(&direct)[..2]);
    assert_eq!(msgs(&back)[2][2]["content"], "5");
}

#[test]
fn results_without_ids_answer_with_their_calls_ids() {
    let d = tmpdir();
    let input = r#"{"conversations": [{"from": "human", "value": "x"}, {"from": "gpt", "value": "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"n\": 2}}\n</tool_call>"}, {"from": "tool", "value": "<tool_response>\n{\"name\": \"f\", \"content\": \"r1\"}\n</tool_response>\n<tool_response>\n{\"name\": \"g\", \"content\": \"rg\"}\n</tool_response>\n<tool_response>\n{\"name\": \"f\", \"content\": \"r2\"}\n</tool_response>"}, {"from": "gpt", "value": "done"}]}
"#;
    let hermes = norm(d.path(), input.as_bytes(), &[]);
    let openai = norm(d.path(), hermes.as_bytes(), &["--to", "openai"]);
    let m = messages(&openai);
    let calls: Vec<&Value> = m[1]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["id"])
        .collect();
    assert_eq!(
        calls,
        [&json!("call_1_0"), &json!("call_1_1"), &json!("call_1_2")]
    );
    for (k, r) in m[2..5].iter().enumerate() {
        assert_eq!(r["tool_call_id"], *calls[k], "{r}");
    }
    // Back: the results have no id again (the ids were made up), the same bytes.
    assert_eq!(norm(d.path(), openai.as_bytes(), &[]), hermes);
}

#[test]
fn message_keys_keep_their_order_when_read_again() {
    let d = tmpdir();
    let input = br#"{"messages": [{"role": "user", "content": "x", "name": "alice"}, {"role": "assistant", "content": "y", "loss_weight": 0.5, "weight": 1}]}
"#;
    for args in [&[][..], &["--to", "llamafactory"]] {
        let once = norm(d.path(), input, args);
        assert_eq!(norm(d.path(), once.as_bytes(), args), once, "{args:?}");
    }
}

#[test]
fn another_writers_tool_prompt_is_counted() {
    let d = tmpdir();
    let input = br#"{"messages": [{"role": "system", "content": "Always answer in French.\n<tools>\n[{\"name\": \"f\", \"description\": \"d\", \"parameters\": {}}]\n</tools>"}, {"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]}
"#;
    assert_eq!(dropped(d.path(), input, &[])["other_tool_prompt"], 1);
    // The Hermes prompt traj writes is not another writer's.
    let hermes = norm(d.path(), input, &[]);
    assert_eq!(
        dropped(d.path(), hermes.as_bytes(), &[])["other_tool_prompt"],
        0
    );
}

//! traj-normalize: the §8 conversion rules (one golden case per rule), every input shape,
//! the fixture files, the fixed point, the OpenAI round trip, the bad-line policy, and
//! loading the output with Python `datasets`.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Stdio;

use serde_json::{Value, json};

use crate::util::*;

const BIN: &str = "traj-normalize";

/// Run traj-normalize on `input` (stdin) with `args`; assert exit 0; return the rows.
fn norm(input: &str, args: &[&str]) -> Vec<Value> {
    let d = tmpdir();
    let mut c = cmd(BIN, d.path());
    c.arg("-q").args(args);
    let o = run_with_stdin(c, input.as_bytes());
    assert_code(&o, 0);
    parse_jsonl(&stdout(&o))
}

/// Normalise one row given as JSON and return its `conversations` values (from, value).
fn turns(row: Value) -> Vec<(String, String)> {
    turns_with(&[], row)
}

/// [`turns`] with `args`.
fn turns_with(args: &[&str], row: Value) -> Vec<(String, String)> {
    let out = norm(&format!("{row}\n"), args);
    assert_eq!(out.len(), 1);
    out[0]["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["from"].as_str().unwrap().to_string(),
                t["value"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn msgs(m: Value) -> Value {
    json!({ "messages": m })
}

/// Run on a file; returns (exit code, stdout, stderr).
fn run_file(path: &Path, args: &[&str]) -> (i32, String, String) {
    let d = tmpdir();
    let mut c = cmd(BIN, d.path());
    c.args(args).arg(path);
    let o = run(c);
    (o.status.code().unwrap_or(-1), stdout(&o), stderr(&o))
}

// ---------------------------------------------------------------------------------------
// §8 rules, one golden case each.

const TEMPLATE_EMPTY: &str = "You are a function calling AI model. You are provided with function signatures within <tools> </tools> XML tags. You may call one or more functions to assist with the user query. If available tools are not relevant in assisting with user query, just respond in natural conversational language. Don't make assumptions about what values to plug into functions. After calling & executing the functions, you will be provided with function results within <tool_response> </tool_response> XML tags. Here are the available tools:\n<tools>\n[]\n</tools>\nFor each function call return a JSON object, with the following pydantic model json schema for each:\n{'title': 'FunctionCall', 'type': 'object', 'properties': {'name': {'title': 'Name', 'type': 'string'}, 'arguments': {'title': 'Arguments', 'type': 'object'}}, 'required': ['name', 'arguments']}\nEach function call should be enclosed within <tool_call> </tool_call> XML tags.\nExample:\n<tool_call>\n{'name': <function-name>,'arguments': <args-dict>}\n</tool_call>";

#[test]
fn rule_exact_system_template_with_no_tools() {
    // A row that calls a tool it was not offered gets the exact template around `[]`.
    let t = turns(msgs(json!([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "r"}
    ])));
    assert_eq!(t[0], ("system".into(), TEMPLATE_EMPTY.into()));
    assert_eq!(t[1], ("human".into(), "hi".into()));
    // A plain chat (no tool offered, called or answered) gets no system turn at all.
    let t = turns(msgs(json!([{"role": "user", "content": "hi"}])));
    assert_eq!(t, [("human".to_string(), "hi".to_string())]);
}

#[test]
fn rule_system_template_lists_tools_with_required_null() {
    let row = json!({"messages": [{"role": "user", "content": "x"}],
        "tools": [{"type": "function", "function": {"name": "f", "description": "Does f.",
                   "parameters": {"type": "object", "required": ["a"]}}},
                  {"type": "function", "function": {"name": "g"}}]});
    let t = turns(row);
    let want = "<tools>\n[{\"name\": \"f\", \"description\": \"Does f.\", \"parameters\": {\"type\": \"object\", \"required\": [\"a\"]}, \"required\": null}, {\"name\": \"g\", \"description\": \"\", \"parameters\": {}, \"required\": null}]\n</tools>\n";
    assert!(t[0].1.contains(want), "{}", t[0].1);
}

#[test]
fn rule_reasoning_content_two_calls_two_results() {
    let t = turns(msgs(json!([
        {"role": "user", "content": "Q"},
        {"role": "assistant", "content": "Let me look.", "reasoning": "Need two lookups.",
         "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "a", "arguments": "{\"x\": 1}"}},
            {"id": "c2", "type": "function", "function": {"name": "b", "arguments": "{\"y\": \"é\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "{\"ok\": true}"},
        {"role": "tool", "tool_call_id": "c2", "content": "done"},
        {"role": "assistant", "content": "Answer."}
    ])));
    assert_eq!(t.len(), 5);
    assert_eq!(
        t[2].1,
        "<think>\nNeed two lookups.\n</think>\nLet me look.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {\"y\": \"é\"}}\n</tool_call>"
    );
    assert_eq!(t[3].0, "tool");
    assert_eq!(
        t[3].1,
        "<tool_response>\n{\"tool_call_id\": \"c1\", \"name\": \"a\", \"content\": {\"ok\": true}}\n</tool_response>\n<tool_response>\n{\"tool_call_id\": \"c2\", \"name\": \"b\", \"content\": \"done\"}\n</tool_response>"
    );
    assert_eq!(t[4], ("gpt".into(), "<think>\n</think>\nAnswer.".into()));
}

#[test]
fn rule_empty_think_inserted_in_both_branches() {
    let t = turns(msgs(json!([
        {"role": "user", "content": "Q"},
        {"role": "assistant", "content": null,
         "tool_calls": [{"id": "c1", "function": {"name": "a", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
        {"role": "assistant", "content": "final"},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "inline"},
        {"role": "assistant", "content": "<think>mine</think> kept"}
    ])));
    assert_eq!(
        t[2].1,
        "<think>\n</think>\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>"
    );
    assert_eq!(t[4].1, "<think>\n</think>\nfinal");
    assert_eq!(t[6].1, "<think>\n</think>", "an empty answer");
    // A leading think block is the turn's reasoning however it is framed (traj's rule;
    // the reference keeps it in the content as written).
    assert_eq!(t[8].1, "<think>\nmine\n</think>\n kept");
}

#[test]
fn rule_scratchpad_becomes_think() {
    let t = turns(msgs(json!([
        {"role": "user", "content": "Q"},
        {"role": "assistant",
         "content": "<REASONING_SCRATCHPAD>plan</REASONING_SCRATCHPAD> done"}
    ])));
    assert_eq!(t.len(), 2, "a plain chat: no system turn");
    // A leading scratchpad is the turn's reasoning, framed as a `<think>` block's is, so
    // that a second pass (and the way through `--to openai`) changes nothing.
    assert_eq!(t[1].1, "<think>\nplan\n</think>\n done");
    for row in [
        msgs(json!([{"role": "user", "content": "Q"},
            {"role": "assistant", "content": "<REASONING_SCRATCHPAD>plan</REASONING_SCRATCHPAD> done"}])),
        json!({"conversations": [{"from": "human", "value": "Q"},
            {"from": "gpt", "value": "<REASONING_SCRATCHPAD>plan</REASONING_SCRATCHPAD>done"}]}),
        // A row that offers tools takes the quick path.
        json!({"conversations": [
            {"from": "system", "value": "<tools>\n[{\"name\": \"f\", \"parameters\": {}}]\n</tools>"},
            {"from": "human", "value": "Q"},
            {"from": "gpt", "value": "<REASONING_SCRATCHPAD>plan</REASONING_SCRATCHPAD>done"}]}),
    ] {
        let once = norm(&format!("{row}\n"), &[]);
        assert_eq!(norm(&parse_and_join(&once), &[]), once, "{row}");
        let openai = norm(&parse_and_join(&once), &["--to", "openai"]);
        assert_eq!(
            openai[0]["messages"][1]["reasoning_content"], "plan",
            "{row}"
        );
        assert_eq!(norm(&parse_and_join(&openai), &[]), once, "{row}");
    }
}

/// A result that answers no call (`tool_call_id: "zzz"`) beside one that answers the
/// first call: read back from Hermes text, the orphan took the first call's place, and
/// each result paired with the wrong call. It answers none now, and the way through
/// `--to openai` gives the first call its own result.
#[test]
fn a_result_that_answers_no_call_keeps_out_of_the_calls_places() {
    let row = msgs(json!([
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "t", "arguments": "{\"x\":1}"}},
            {"id": "b", "type": "function", "function": {"name": "t", "arguments": "{\"x\":2}"}}]},
        {"role": "tool", "tool_call_id": "zzz", "content": "X"},
        {"role": "tool", "tool_call_id": "a", "content": "Y"},
        {"role": "assistant", "content": "done"}
    ]));
    let once = norm(&format!("{row}\n"), &[]);
    assert_eq!(norm(&parse_and_join(&once), &[]), once);
    let openai = norm(&parse_and_join(&once), &["--to", "openai"]);
    let m = openai[0]["messages"].as_array().unwrap();
    let calls = m[1]["tool_calls"].as_array().unwrap();
    assert_eq!(calls[0]["id"], "a", "{m:?}");
    assert_eq!(calls[0]["function"]["arguments"], "{\"x\": 1}");
    let answer_of = |id: &Value| {
        m.iter()
            .find(|x| x["role"] == "tool" && &x["tool_call_id"] == id)
            .map(|x| x["content"].clone())
    };
    assert_eq!(answer_of(&calls[0]["id"]), Some(json!("Y")), "{m:?}");
    assert_eq!(answer_of(&calls[1]["id"]), None, "{m:?}");
    assert_eq!(
        answer_of(&json!("zzz")),
        Some(json!("X")),
        "the orphan is kept"
    );
    assert_eq!(norm(&parse_and_join(&openai), &[]), once);
    // With the orphan first and the other results out of call order (c2's before
    // c1's), each result still answers its own call after the round trip.
    let row = msgs(json!([
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "A", "arguments": "{\"x\":1}"}},
            {"id": "c2", "type": "function", "function": {"name": "A", "arguments": "{\"x\":2}"}}]},
        {"role": "tool", "tool_call_id": "zz", "content": "stray"},
        {"role": "tool", "tool_call_id": "c2", "content": "r2"},
        {"role": "tool", "tool_call_id": "c1", "content": "r1"},
        {"role": "assistant", "content": "done"}
    ]));
    let once = norm(&format!("{row}\n"), &[]);
    let openai = norm(&parse_and_join(&once), &["--to", "openai"]);
    let m = openai[0]["messages"].as_array().unwrap();
    let calls = m[1]["tool_calls"].as_array().unwrap();
    for (call, want) in calls.iter().zip(["r1", "r2"]) {
        let answer = m
            .iter()
            .find(|x| x["role"] == "tool" && x["tool_call_id"] == call["id"])
            .map(|x| x["content"].clone());
        assert_eq!(answer, Some(json!(want)), "{m:?}");
    }
}

/// hermes-agent writes a `reasoning` field that holds a scratchpad as
/// `<think>\n<REASONING_SCRATCHPAD>x</REASONING_SCRATCHPAD>\n</think>`, and so did
/// traj-normalize; a second pass read the inner tags as a second `<think>` and refused
/// the row ("<think> inside an unclosed <think>").
#[test]
fn a_scratchpad_inside_reasoning_is_its_text() {
    let row = json!({"prompt_index": 0, "messages": [{"role": "user", "content": "q0"},
        {"role": "assistant", "content": "ans",
         "reasoning": "<REASONING_SCRATCHPAD>x</REASONING_SCRATCHPAD>"}]});
    let once = norm(&format!("{row}\n"), &[]);
    let value = once[0]["conversations"][1]["value"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        value,
        "<think>\n<REASONING_SCRATCHPAD>x</REASONING_SCRATCHPAD>\n</think>\nans"
    );
    assert_eq!(norm(&parse_and_join(&once), &[]), once);
    let openai = norm(&parse_and_join(&once), &["--to", "openai"]);
    assert_eq!(
        openai[0]["messages"][1]["reasoning_content"],
        "<REASONING_SCRATCHPAD>x</REASONING_SCRATCHPAD>"
    );
    assert_eq!(norm(&parse_and_join(&openai), &[]), once);
}

#[test]
fn rule_json_and_non_json_tool_content() {
    let t = turns_with(
        &["--bad-arguments", "empty"],
        msgs(json!([
            {"role": "user", "content": "Q"},
            {"role": "assistant", "tool_calls": [
                {"id": "1", "function": {"name": "t", "arguments": "{}"}},
                {"id": "2", "function": {"name": "t", "arguments": "{}"}},
                {"id": "3", "function": {"name": "t", "arguments": "{}"}},
                {"id": "4", "function": {"name": "t", "arguments": "{}"}},
                {"id": "5", "function": {"name": "t", "arguments": "not json"}}]},
            {"role": "tool", "tool_call_id": "1", "content": "  [1, 2.50, {\"k\": null}]"},
            {"role": "tool", "tool_call_id": "2", "content": "{broken"},
            {"role": "tool", "tool_call_id": "3", "content": "42"},
            {"role": "tool", "tool_call_id": "4", "content": {"already": "an object"}},
            {"role": "tool", "tool_call_id": "5", "content": ""}
        ])),
    );
    let blocks: Vec<&str> = t[3].1.split('\n').filter(|l| l.starts_with('{')).collect();
    assert_eq!(
        blocks,
        [
            "{\"tool_call_id\": \"1\", \"name\": \"t\", \"content\": [1, 2.50, {\"k\": null}]}",
            "{\"tool_call_id\": \"2\", \"name\": \"t\", \"content\": \"{broken\"}",
            "{\"tool_call_id\": \"3\", \"name\": \"t\", \"content\": \"42\"}",
            "{\"tool_call_id\": \"4\", \"name\": \"t\", \"content\": {\"already\": \"an object\"}}",
            "{\"tool_call_id\": \"5\", \"name\": \"t\", \"content\": \"\"}",
        ]
    );
    assert!(
        t[2].1
            .contains("{\"name\": \"t\", \"arguments\": {}}\n</tool_call>"),
        "invalid JSON arguments become {{}} under --bad-arguments empty"
    );
}

#[test]
fn rule_names_by_id_then_position_then_unknown() {
    let row = msgs(json!([
        {"role": "user", "content": "Q"},
        {"role": "assistant", "tool_calls": [
            {"id": "ia", "function": {"name": "alpha", "arguments": "{}"}},
            {"id": "ib", "function": {"name": "beta", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "ib", "content": "for beta"},
        {"role": "tool", "tool_call_id": "ia", "content": "for alpha"},
        {"role": "tool", "tool_call_id": "zz", "content": "for nobody"},
        {"role": "assistant", "content": "next", "tool_calls": [
            {"function": {"name": "gamma", "arguments": "{}"}},
            {"function": {"name": "delta", "arguments": "{}"}}]},
        {"role": "tool", "content": "first"},
        {"role": "tool", "content": "second"},
        {"role": "tool", "content": "third"}
    ]));
    let out = norm(&format!("{row}\n"), &[]);
    let conv = out[0]["conversations"].as_array().unwrap();
    let names = |v: &Value| -> Vec<String> {
        v["value"]
            .as_str()
            .unwrap()
            .lines()
            .filter(|l| l.starts_with('{'))
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["name"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    };
    // By id (unlike the reference, which pairs by position), written in the order of
    // their calls so that the text read back pairs each with its own; the result that
    // answers none goes after them (it was left as read, and took a call's place).
    assert_eq!(names(&conv[3]), ["alpha", "beta", "unknown"]);
    // No ids: by position; more results than calls: "unknown".
    assert_eq!(names(&conv[5]), ["gamma", "delta", "unknown"]);
    let stats = &out[0]["tool_stats"];
    assert_eq!(
        stats["alpha"],
        json!({"count": 1, "success": 1, "failure": 0})
    );
    assert!(stats.get("unknown").is_none());
}

#[test]
fn rule_rstrip_with_calls_strip_without() {
    // The leading think blocks are the turns' reasoning (white space before them is
    // framing), written in the canonical framing; the text after them is the content.
    let t = turns(msgs(json!([
        {"role": "user", "content": "Q"},
        {"role": "assistant", "content": "  <think>x</think> lead kept  \n",
         "tool_calls": [{"id": "1", "function": {"name": "a", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "1", "content": "r"},
        {"role": "assistant", "content": "  <think>y</think> lead dropped  \n\n"}
    ])));
    assert_eq!(
        t[2].1,
        "<think>\nx\n</think>\n lead kept  \n\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>"
    );
    assert_eq!(t[4].1, "<think>\ny\n</think>\n lead dropped");
}

#[test]
fn rule_roles_user_verbatim_other_roles_and_orphan_tools_dropped() {
    let t = turns(msgs(json!([
        {"role": "system", "content": "You are a bot."},
        {"role": "user", "content": "  spaced prompt \n"},
        {"role": "tool", "tool_call_id": "x", "content": "orphan"},
        {"role": "assistant", "content": "ok"},
        {"role": "system", "content": "injected"},
        {"role": "user", "content": "[System error during processing: x]"}
    ])));
    // No tool is offered and the only tool result is an orphan (kept aside in
    // `message_keys`, tests/cli/keep.rs): a plain chat, so the row's own first system
    // entry is its system turn and no Hermes prompt replaces it; the later one is no turn.
    let froms: Vec<&str> = t.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(froms, ["system", "human", "gpt", "human"]);
    assert_eq!(t[0].1, "You are a bot.");
    assert_eq!(t[1].1, "  spaced prompt \n");
    assert_eq!(t[2].1, "<think>\n</think>\nok");
    assert_eq!(t[3].1, "[System error during processing: x]");
    assert!(
        t.iter()
            .all(|(_, v)| !v.contains("injected") && !v.contains("orphan"))
    );
}

// ---------------------------------------------------------------------------------------
// The closing-tag policy: JSON bodies repaired losslessly, raw reasoning refused.

#[test]
fn closing_tags_in_json_bodies_are_escaped_losslessly() {
    let row = msgs(json!([
        {"role": "user", "content": "Q"},
        {"role": "assistant", "tool_calls": [
            {"id": "1", "function": {"name": "a", "arguments": "{\"q\": \"</tool_call></think>\"}"}}]},
        {"role": "tool", "tool_call_id": "1", "content": "out </tool_response> <b></b>"}
    ]));
    let t = turns(row.clone());
    assert!(!t[2].1.contains("</tool_call></think>"));
    assert!(
        t[2].1.contains(r#"{"q": "<\/tool_call><\/think>"}"#),
        "{}",
        t[2].1
    );
    assert_eq!(t[2].1.matches("</tool_call>").count(), 1);
    assert_eq!(t[3].1.matches("</tool_response>").count(), 1);
    assert!(
        t[3].1.contains(r#""out <\/tool_response> <b></b>""#),
        "{}",
        t[3].1
    );
    // Back to OpenAI: the strings are intact.
    let hermes = norm(&format!("{row}\n"), &[]);
    let back = norm(&format!("{}\n", hermes[0]), &["--to", "openai"]);
    let m = back[0]["messages"].as_array().unwrap();
    assert_eq!(
        m[1]["tool_calls"][0]["function"]["arguments"],
        r#"{"q": "</tool_call></think>"}"#
    );
    assert_eq!(m[2]["content"], "out </tool_response> <b></b>");
}

#[test]
fn openai_arguments_that_are_not_json_are_rejected_unless_asked_to_empty_them() {
    // A model's broken call arguments are never turned into `{}` without a word.
    let call = |args: &str| json!({"id": "c1", "type": "function", "function": {"name": "f", "arguments": args}});
    let bad = msgs(json!([
        {"role": "user", "content": "Q"},
        {"role": "assistant", "content": "", "tool_calls": [call("{\"a\": 1}"), call("{a: 1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "r1"},
        {"role": "tool", "tool_call_id": "c1", "content": "r2"}
    ]));
    let good = msgs(json!([{"role": "user", "content": "fine"}]));
    let input = format!("{good}\n{bad}\n");
    let d = tmpdir();
    let mut c = cmd(BIN, d.path());
    c.arg("-q");
    let o = run_with_stdin(c, input.as_bytes());
    assert_code(&o, 1);
    let err = stderr(&o);
    assert!(
        err.contains("<stdin>:2: message 2: tool_calls[1]: the \"arguments\" string is not JSON"),
        "{err}"
    );
    let rej = d.path().join("rejects.jsonl");
    let mut c = cmd(BIN, d.path());
    c.args(["-q", "--on-error", "skip", "--rejects"]).arg(&rej);
    let o = run_with_stdin(c, input.as_bytes());
    assert_code(&o, 0);
    assert_eq!(parse_jsonl(&stdout(&o)).len(), 1);
    let r = read_jsonl(&rej);
    assert_eq!((r.len(), &r[0]["record"]), (1, &bad));
    // The reference's rule on request: `{}`, counted.
    let stats = d.path().join("stats.json");
    let mut c = cmd(BIN, d.path());
    c.args(["--bad-arguments", "empty", "--stats"]).arg(&stats);
    let o = run_with_stdin(c, input.as_bytes());
    assert_code(&o, 0);
    assert!(
        stderr(&o).contains("non_json_arguments: 1"),
        "{}",
        stderr(&o)
    );
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert_eq!(s["dropped_parts"]["non_json_arguments"], 1, "{s}");
    let rows = parse_jsonl(&stdout(&o));
    let gpt = rows[1]["conversations"][2]["value"].as_str().unwrap();
    assert!(gpt.contains("\"arguments\": {\"a\": 1}"), "{gpt}");
    assert!(gpt.contains("\"arguments\": {}"), "{gpt}");
    // Blank arguments are `{}`, as traj-run ran the call; a key twice is no JSON object.
    for (args, ok) in [("", true), ("  ", true), ("{\"a\": 1, \"a\": 2}", false)] {
        let row = msgs(json!([
            {"role": "user", "content": "Q"},
            {"role": "assistant", "content": "", "tool_calls": [call(args)]},
            {"role": "tool", "tool_call_id": "c1", "content": "r"}
        ]));
        let mut c = cmd(BIN, d.path());
        c.arg("-q");
        let o = run_with_stdin(c, format!("{row}\n").as_bytes());
        assert_code(&o, if ok { 0 } else { 1 });
        if ok {
            assert!(
                stdout(&o).contains("\\\"arguments\\\": {}"),
                "{}",
                stdout(&o)
            );
        } else {
            assert!(stderr(&o).contains("duplicate key \"a\""), "{}", stderr(&o));
        }
    }
}

#[test]
fn a_result_named_after_no_call_answers_the_call_at_its_place() {
    let row = msgs(json!([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"type": "function", "function": {"name": "search", "arguments": "{}"}}]},
        {"role": "tool", "name": "browser.search", "content": "results"},
        {"role": "assistant", "content": "done"}
    ]));
    let d = tmpdir();
    let mut c = cmd(BIN, d.path());
    c.arg("-q");
    let o = run_with_stdin(c, format!("{row}\n").as_bytes());
    assert_code(&o, 0);
    let out = parse_jsonl(&stdout(&o));
    let tool = out[0]["conversations"][3]["value"].as_str().unwrap();
    assert!(tool.contains("\"name\": \"search\""), "{tool}");
    assert_eq!(out[0]["tool_stats"]["search"]["count"], 1, "{}", out[0]);
    let mut c = cmd("traj-filter", d.path());
    c.args(["--well-formed", "-q"]);
    let o = run_with_stdin(c, stdout(&o).as_bytes());
    assert_eq!(parse_jsonl(&stdout(&o)).len(), 1);
}

#[test]
fn what_a_hermes_row_cannot_carry_is_counted_by_name() {
    // An image's URL, a schema's `strict` and `cache_control`, a call's `strict`, the id
    // of a call no result answers, a result's own name that is not its call's.
    let row = json!({"messages": [
        {"role": "user", "content": [{"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "search", "arguments": "{}", "strict": true}}]},
        {"role": "tool", "tool_call_id": "a", "name": "browser.search", "content": "r"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "toolu_02", "type": "function", "function": {"name": "search", "arguments": "{}"}}]}
    ], "tools": [{"type": "function", "cache_control": {"type": "ephemeral"},
        "function": {"name": "search", "description": "d", "strict": true, "parameters": {}}}]});
    let d = tmpdir();
    let stats = d.path().join("stats.json");
    let mut c = cmd(BIN, d.path());
    c.arg("--stats").arg(&stats);
    let o = run_with_stdin(c, format!("{row}\n").as_bytes());
    assert_code(&o, 0);
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let dropped = &s["dropped_parts"];
    for (kind, n) in [
        ("image_part", 1),
        ("tool_schema_key", 2),
        ("tool_call_key", 1),
        ("unanswered_call_id", 1),
        ("tool_result_name", 1),
    ] {
        assert_eq!(dropped[kind], n, "{kind}: {s}");
    }
    assert!(
        stderr(&o).contains("image_part: 1") && stderr(&o).contains("unanswered_call_id: 1"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn keys_a_hermes_row_carries_beyond_the_format_are_counted() {
    // A `<tools>` entry's `strict`, a `<tool_call>` body's `id`, a `<tool_response>`
    // wrapper's `is_error` and `duration_ms`: as json.dumps writes them (read by the quick
    // path) and compact (the general path), counted the same.
    let tools = format!(
        "{}\n<tools>\n[{{\"name\": \"f\", \"description\": \"d\", \"parameters\": {{}}, \"strict\": true}}]\n</tools>",
        "You may call these:"
    );
    let row = json!({"conversations": [
        {"from": "system", "value": tools},
        {"from": "human", "value": "hi"},
        {"from": "gpt", "value": "<tool_call>\n{\"name\": \"f\", \"arguments\": {}, \"id\": \"c1\"}\n</tool_call>"},
        {"from": "tool", "value": "<tool_response>\n{\"name\": \"f\", \"content\": \"ok\", \"is_error\": false, \"duration_ms\": 3}\n</tool_response>"},
        {"from": "gpt", "value": "done"}
    ]});
    let python = traj::format::pyjson::dumps(&row);
    let compact = row.to_string();
    let d = tmpdir();
    let mut outputs = Vec::new();
    for (i, line) in [python, compact].iter().enumerate() {
        let stats = d.path().join(format!("stats{i}.json"));
        let mut c = cmd(BIN, d.path());
        c.arg("--stats").arg(&stats);
        let o = run_with_stdin(c, format!("{line}\n").as_bytes());
        assert_code(&o, 0);
        let s: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
        for (kind, n) in [
            ("tool_schema_key", 1),
            ("tool_call_key", 1),
            ("tool_result_key", 2),
        ] {
            assert_eq!(s["dropped_parts"][kind], n, "{kind} of line {i}: {s}");
        }
        assert!(stderr(&o).contains("tool_result_key: 2"), "{}", stderr(&o));
        outputs.push(stdout(&o));
    }
    assert_eq!(outputs[0], outputs[1]);
    assert!(!outputs[0].contains("is_error"), "{}", outputs[0]);
}

#[test]
fn a_tool_call_body_with_a_key_twice_is_refused() {
    // Read, the second `name` would call another tool: the row goes to the rejects,
    // as a row with a key twice does.
    let row = json!({"conversations": [{"from": "human", "value": "hi"},
        {"from": "gpt", "value": "<tool_call>\n{\"name\": \"f\", \"arguments\": {}, \"n\\u0061me\": \"g\"}\n</tool_call>"}]});
    let d = tmpdir();
    let o = run_with_stdin(cmd(BIN, d.path()), format!("{row}\n").as_bytes());
    assert_code(&o, 1);
    assert!(
        stderr(&o).contains("<tool_call> 1 is not JSON: duplicate key \"name\""),
        "{}",
        stderr(&o)
    );
}

#[test]
fn reasoning_with_a_closing_think_tag_is_rejected_with_a_reason() {
    let bad = msgs(json!([
        {"role": "user", "content": "Q"},
        {"role": "assistant", "content": "A", "reasoning": "step </think> leak"}
    ]));
    let good = msgs(json!([{"role": "user", "content": "fine"}]));
    let d = tmpdir();
    let rej = d.path().join("rejects.jsonl");
    let mut c = cmd(BIN, d.path());
    c.args(["--on-error", "skip", "--rejects"]).arg(&rej);
    let o = run_with_stdin(c, format!("{good}\n{bad}\n").as_bytes());
    assert_code(&o, 0);
    assert_eq!(parse_jsonl(&stdout(&o)).len(), 1);
    let r = read_jsonl(&rej);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0]["line"], 2);
    let reason = r[0]["reasons"][0].as_str().unwrap();
    assert!(reason.contains("reasoning contains </think>"), "{reason}");
    assert_eq!(r[0]["record"], bad);
    // Strict by default: exit 1 naming the line.
    let mut c = cmd(BIN, d.path());
    c.arg("-q");
    let o = run_with_stdin(c, format!("{good}\n{bad}\n").as_bytes());
    assert_code(&o, 1);
    // The turn is counted in the output conversations: no system turn on this plain chat.
    assert!(
        stderr(&o).contains("<stdin>:2: turn 2: reasoning contains </think>"),
        "{}",
        stderr(&o)
    );
    // With a tool offered the Hermes system turn comes first, so the gpt turn is turn 3.
    let mut tooly = bad.clone();
    tooly["tools"] = json!([{"type": "function", "function": {"name": "f"}}]);
    let mut c = cmd(BIN, d.path());
    c.arg("-q");
    let o = run_with_stdin(c, format!("{tooly}\n").as_bytes());
    assert_code(&o, 1);
    assert!(
        stderr(&o).contains("<stdin>:1: turn 3: reasoning contains </think>"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn content_with_a_tool_call_tag_is_rejected() {
    let bad = msgs(json!([
        {"role": "user", "content": "Q"},
        {"role": "assistant", "content": "I would write <tool_call> here"}
    ]));
    let d = tmpdir();
    let o = run_with_stdin(cmd(BIN, d.path()), format!("{bad}\n").as_bytes());
    assert_code(&o, 1);
    assert!(
        stderr(&o).contains("<tool_call> is never closed (not repairable without guessing)"),
        "{}",
        stderr(&o)
    );
}

// ---------------------------------------------------------------------------------------
// Input shapes.

#[test]
fn traj_run_records_keep_fields_in_place_and_consume_messages_and_tools() {
    let (code, out, err) = run_file(&fixture("traj_run_records.jsonl"), &[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("3 read, 3 written"), "{err}");
    let rows = parse_jsonl(&out);
    let keys: Vec<&str> = rows[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "prompt_index",
            "prompt",
            "conversations",
            "toolsets",
            "model",
            "usage",
            "completed",
            "partial",
            "api_calls",
            "tool_stats",
            "tool_error_counts"
        ]
    );
    // The reference's golden scenario, turn for turn (traj's own tool descriptions).
    let conv = rows[0]["conversations"].as_array().unwrap();
    assert_eq!(
        conv[2]["value"],
        "<think>\nTo answer 'Report the environment, task 5' I will look at the environment first.\n</think>\n<tool_call>\n{\"name\": \"terminal\", \"arguments\": {\"command\": \"printenv; echo marker-$((6*7))\"}}\n</tool_call>"
    );
    assert_eq!(
        conv[3]["value"],
        "<tool_response>\n{\"tool_call_id\": \"call_1\", \"name\": \"terminal\", \"content\": {\"output\": \"TERMINAL_ENV=local\\nmarker-42\", \"exit_code\": 0, \"error\": null}}\n</tool_response>"
    );
    assert_eq!(
        conv[4]["value"],
        "<think>\nThe tool output answers the task.\n</think>\nDone with: Report the environment, task 5"
    );
    assert_eq!(
        rows[0]["usage"],
        json!({"prompt_tokens": 120, "completion_tokens": 40})
    );
    // Stats: offered tools with zeros, sorted; error rule of the reference.
    assert_eq!(
        rows[1]["tool_stats"],
        json!({"read_file": {"count": 2, "success": 1, "failure": 1},
               "terminal": {"count": 0, "success": 0, "failure": 0}})
    );
    assert_eq!(rows[2]["tool_error_counts"], json!({"terminal": 1}));
    // Byte format: Python json.dumps separators at every level.
    let first = out.lines().next().unwrap();
    assert!(first.starts_with("{\"prompt_index\": 5, \"prompt\": \"Report the environment, task 5\", \"conversations\": [{\"from\": \"system\", \"value\": "));
    assert!(out.contains("hello ünïcödé"), "non-ASCII written as is");
}

#[test]
fn openai_legacy_function_call_typed_parts_and_reasoning_fields() {
    let (code, out, err) = run_file(&fixture("openai_legacy_shapes.jsonl"), &["-q"]);
    assert_eq!(code, 0, "{err}");
    let rows = parse_jsonl(&out);
    let v = |r: usize, t: usize| {
        rows[r]["conversations"][t]["value"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(v(0, 1), "What is the weather in Paris?\n[screenshot]");
    assert!(v(0, 2).contains("{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"));
    assert!(v(0, 3).contains(
        "\"name\": \"get_weather\", \"content\": {\"temp_c\": 18.5, \"sky\": \"cloudy\"}"
    ));
    assert!(
        v(0, 0).contains(
            "{\"name\": \"get_weather\", \"description\": \"Current weather for a city.\""
        )
    );
    assert!(v(1, 2).starts_with("<think>\nUse the calculator.\n</think>\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 2, \"b\": 3}}"));
    assert_eq!(
        v(1, 3),
        "<tool_response>\n{\"tool_call_id\": \"t1\", \"name\": \"add\", \"content\": \"5\"}\n</tool_response>"
    );
    assert_eq!(v(1, 4), "<think>\nThe tool said 5.\n</think>\n2 + 3 = 5");
    // reasoning_content and reasoning_details (the traj-run fixture's second row).
    let (_, out2, _) = run_file(&fixture("traj_run_records.jsonl"), &["-q"]);
    let r2 = parse_jsonl(&out2);
    assert!(
        r2[1]["conversations"][4]["value"]
            .as_str()
            .unwrap()
            .starts_with("<think>\nOne failed.\n</think>\n")
    );
}

#[test]
fn sharegpt_llamafactory_function_call_observation_and_tools_string() {
    let row = json!({"conversations": [
        {"from": "human", "value": "Convert 10 USD"},
        {"from": "function_call", "value": "{\"name\": \"convert\", \"arguments\": {\"amount\": 10}}"},
        {"from": "observation", "value": "{\"eur\": 9.2}"},
        {"from": "gpt", "value": "10 USD is 9.2 EUR."}],
        "tools": "[{\"name\": \"convert\", \"description\": \"Convert money.\", \"parameters\": {\"type\": \"object\"}}]",
        "source": "glaive"});
    let out = norm(&format!("{row}\n"), &[]);
    let r = &out[0];
    assert_eq!(
        r.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["conversations", "source", "tool_stats", "tool_error_counts"]
    );
    let c = r["conversations"].as_array().unwrap();
    assert!(
        c[0]["value"]
            .as_str()
            .unwrap()
            .contains("[{\"name\": \"convert\", \"description\": \"Convert money.\"")
    );
    assert_eq!(
        c[2]["value"],
        "<think>\n</think>\n<tool_call>\n{\"name\": \"convert\", \"arguments\": {\"amount\": 10}}\n</tool_call>"
    );
    assert_eq!(
        c[3]["value"],
        "<tool_response>\n{\"tool_call_id\": \"\", \"name\": \"convert\", \"content\": {\"eur\": 9.2}}\n</tool_response>"
    );
    assert_eq!(c[4]["value"], "<think>\n</think>\n10 USD is 9.2 EUR.");
    assert_eq!(
        r["tool_stats"]["convert"],
        json!({"count": 1, "success": 1, "failure": 0})
    );
}

#[test]
fn role_content_turns_inside_conversations() {
    let row = json!({"conversations": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello", "reasoning_content": "greet back"}]});
    let t = turns(row);
    assert_eq!(t.len(), 2, "a plain chat: no system turn");
    assert_eq!(t[0], ("human".into(), "hi".into()));
    assert_eq!(
        t[1],
        ("gpt".into(), "<think>\ngreet back\n</think>\nhello".into())
    );
}

#[test]
fn messages_field_reads_swe_agent_history() {
    let (code, _, err) = run_file(&fixture("swe_agent_demo_trajs.jsonl"), &[]);
    assert_eq!(code, 1);
    assert!(
        err.contains(":1: no message list") && err.contains("--messages-field history"),
        "{err}"
    );
    let (code, out, err) = run_file(
        &fixture("swe_agent_demo_trajs.jsonl"),
        &["--messages-field", "history"],
    );
    assert_eq!(code, 0, "{err}");
    let rows = parse_jsonl(&out);
    assert_eq!(rows.len(), 22);
    let keys: Vec<&str> = rows[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "environment",
            "trajectory",
            "conversations",
            "message_keys",
            "info",
            "replay_config",
            "tool_stats",
            "tool_error_counts"
        ]
    );
    // Native tool calls (line 1) pair by SWE-agent's `tool_call_ids`.
    let tool = rows[0]["conversations"][3]["value"].as_str().unwrap();
    assert!(tool.starts_with("<tool_response>\n{\"tool_call_id\": \"call_fJuazlMUN5fQDQ73G6XSpYpx\", \"name\": \"find_file\""), "{tool}");
    assert_eq!(
        rows[0]["tool_stats"]["find_file"],
        json!({"count": 1, "success": 1, "failure": 0})
    );
}

// ---------------------------------------------------------------------------------------
// Every fixture line converts, is a fixed point, and round-trips through OpenAI.

const FIXTURES: [(&str, &[&str]); 5] = [
    ("llamafactory_glaive_toolcall_en.jsonl", &[]),
    ("llamafactory_reason_tool_use_50.jsonl", &[]),
    (
        "swe_agent_demo_trajs.jsonl",
        &["--messages-field", "history"],
    ),
    ("traj_run_records.jsonl", &[]),
    ("openai_legacy_shapes.jsonl", &[]),
];

fn line_count(p: &Path) -> usize {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count()
}

#[test]
fn every_fixture_line_converts_and_is_a_fixed_point() {
    for (name, args) in FIXTURES {
        let d = tmpdir();
        let once = d.path().join("once.jsonl");
        let twice = d.path().join("twice.jsonl");
        let mut c = cmd(BIN, d.path());
        c.args(args).arg(fixture(name)).arg("-o").arg(&once);
        let o = run(c);
        assert_code(&o, 0);
        assert_eq!(line_count(&once), line_count(&fixture(name)), "{name}");
        let mut c = cmd(BIN, d.path());
        c.arg(&once).arg("-o").arg(&twice);
        assert_code(&run(c), 0);
        assert_eq!(
            std::fs::read(&once).unwrap(),
            std::fs::read(&twice).unwrap(),
            "{name}: normalize(normalize(x)) != normalize(x)"
        );
        // Every row: a system turn first exactly when the row has anything to do with
        // tools (a `<tools>` list, a call or a result), string values, stats keys sorted.
        for r in read_jsonl(&once) {
            let c = r["conversations"].as_array().unwrap();
            let tooly = c.iter().any(|t| {
                t["from"] == "tool" || t["value"].as_str().unwrap().contains("<tool_call>")
            });
            if c[0]["from"] == "system" {
                // The Hermes prompt (after the row's own text, if any) exactly when the
                // row has to do with tools; a plain chat's own system text otherwise.
                let v = c[0]["value"].as_str().unwrap();
                assert!(
                    !tooly || v.contains("You are a function calling AI model."),
                    "{v}"
                );
                assert!(tooly || !v.contains("<tools>\n[]\n</tools>"), "{name}: {v}");
            } else {
                assert!(!tooly, "{name}: a row with tool turns has no system turn");
            }
            assert!(c.iter().skip(1).all(|t| t["from"] != "system"));
            assert!(c.iter().all(|t| t["value"].is_string()));
            let keys: Vec<&String> = r["tool_stats"].as_object().unwrap().keys().collect();
            let mut sorted = keys.clone();
            sorted.sort();
            assert_eq!(keys, sorted);
        }
    }
}

#[test]
fn openai_round_trip_is_lossless_on_every_fixture() {
    for (name, args) in FIXTURES {
        let d = tmpdir();
        let hermes = d.path().join("h.jsonl");
        let openai = d.path().join("o.jsonl");
        let back = d.path().join("b.jsonl");
        let mut c = cmd(BIN, d.path());
        c.args(args).arg(fixture(name)).arg("-o").arg(&hermes);
        assert_code(&run(c), 0);
        let mut c = cmd(BIN, d.path());
        c.args(["--to", "openai"])
            .arg(&hermes)
            .arg("-o")
            .arg(&openai);
        assert_code(&run(c), 0);
        for r in read_jsonl(&openai) {
            assert!(r.get("conversations").is_none());
            assert!(r["tools"].is_array());
            for m in r["messages"].as_array().unwrap() {
                if m["role"] == "tool" {
                    assert!(m["tool_call_id"].is_string());
                }
            }
        }
        let mut c = cmd(BIN, d.path());
        c.arg(&openai).arg("-o").arg(&back);
        assert_code(&run(c), 0);
        assert_eq!(
            std::fs::read(&hermes).unwrap(),
            std::fs::read(&back).unwrap(),
            "{name}: hermes -> openai -> hermes changed the rows"
        );
    }
}

#[test]
fn to_openai_writes_tool_calls_ids_and_reasoning_content() {
    let (_, out, _) = run_file(&fixture("traj_run_records.jsonl"), &["-q"]);
    let first = out.lines().next().unwrap();
    let o = norm(&format!("{first}\n"), &["--to", "openai"]);
    let m = o[0]["messages"].as_array().unwrap();
    assert_eq!(
        m[0],
        json!({"role": "user", "content": "Report the environment, task 5"})
    );
    assert_eq!(m[1]["content"], Value::Null);
    assert_eq!(
        m[1]["reasoning_content"],
        "To answer 'Report the environment, task 5' I will look at the environment first."
    );
    assert_eq!(m[1]["tool_calls"][0]["id"], "call_1");
    assert_eq!(
        m[1]["tool_calls"][0]["function"]["arguments"],
        "{\"command\": \"printenv; echo marker-$((6*7))\"}"
    );
    assert_eq!(m[2]["role"], "tool");
    assert_eq!(m[2]["tool_call_id"], "call_1");
    assert_eq!(o[0]["tools"][0]["function"]["name"], "terminal");
}

// ---------------------------------------------------------------------------------------
// tool_stats keys and HuggingFace datasets.

#[test]
fn tools_file_gives_every_row_the_same_stat_keys() {
    let d = tmpdir();
    let tools = d.path().join("tools.json");
    std::fs::write(
        &tools,
        r#"["zeta", {"type": "function", "function": {"name": "alpha"}}, "read_file"]"#,
    )
    .unwrap();
    let mut c = cmd(BIN, d.path());
    c.arg("-q")
        .arg("--tools")
        .arg(&tools)
        .arg(fixture("traj_run_records.jsonl"));
    let o = run(c);
    assert_code(&o, 0);
    for r in parse_jsonl(&stdout(&o)) {
        let keys: Vec<&String> = r["tool_stats"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["alpha", "read_file", "terminal", "zeta"]);
        assert_eq!(
            r["tool_stats"]["zeta"],
            json!({"count": 0, "success": 0, "failure": 0})
        );
        assert_eq!(r["tool_error_counts"].as_object().unwrap().len(), 4);
    }
    let names = d.path().join("names.txt");
    std::fs::write(&names, "# one per line\nterminal\nread_file\nalpha\nzeta\n").unwrap();
    let mut c = cmd(BIN, d.path());
    c.arg("-q")
        .arg("--tools")
        .arg(&names)
        .arg(fixture("traj_run_records.jsonl"));
    let o2 = run(c);
    assert_code(&o2, 0);
    assert_eq!(o.stdout, o2.stdout);
    let mut c = cmd(BIN, d.path());
    c.arg("--tools").arg(d.path().join("missing.json"));
    assert_code(&run_with_stdin(c, b""), 2);
}

/// Loads normalised fixtures with `datasets.load_dataset("json")`. Fails (does not skip)
/// when python3 or `datasets` is missing: `scripts/setup.sh` installs it.
#[test]
fn normalised_output_loads_with_huggingface_datasets() {
    let d = tmpdir();
    let all = d.path().join("all_tools.json");
    // The global tool set: every name offered or called in these fixtures.
    let mut names = std::collections::BTreeSet::new();
    let mut outputs = Vec::new();
    for (name, args) in FIXTURES.iter().take(3) {
        let out = d.path().join(format!("pre_{name}"));
        let mut c = cmd(BIN, d.path());
        c.arg("-q")
            .args(*args)
            .arg(fixture(name))
            .arg("-o")
            .arg(&out);
        assert_code(&run(c), 0);
        for r in read_jsonl(&out) {
            names.extend(r["tool_stats"].as_object().unwrap().keys().cloned());
        }
        outputs.push((name, args));
    }
    std::fs::write(&all, serde_json::to_string(&names).unwrap()).unwrap();
    // One file holding glaive + reason_tool_use rows (different shapes, same schema).
    let merged = d.path().join("merged.jsonl");
    let mut text = String::new();
    for (name, args) in outputs.iter().take(2) {
        let mut c = cmd(BIN, d.path());
        c.arg("-q")
            .args(**args)
            .arg("--tools")
            .arg(&all)
            .arg(fixture(name));
        let o = run(c);
        assert_code(&o, 0);
        text.push_str(&stdout(&o));
    }
    std::fs::write(&merged, &text).unwrap();
    let swe = d.path().join("swe.jsonl");
    let mut c = cmd(BIN, d.path());
    c.args(["-q", "--messages-field", "history", "--tools"])
        .arg(&all);
    c.arg(fixture("swe_agent_demo_trajs.jsonl"))
        .arg("-o")
        .arg(&swe);
    assert_code(&run(c), 0);
    let script = r#"
import sys, datasets
datasets.disable_progress_bars()
for path, n in ((sys.argv[1], 350), (sys.argv[2], 22)):
    ds = datasets.load_dataset("json", data_files=path, split="train", cache_dir=sys.argv[3])
    assert len(ds) == n, (path, len(ds))
    row = ds[0]
    assert row["conversations"][0]["from"] == "system"
    assert set(row["tool_stats"]) == set(ds[n - 1]["tool_stats"])
    assert all(v is not None for v in row["tool_stats"].values())
print("ok")
"#;
    let cache = d.path().join("hf-cache");
    let o = std::process::Command::new(data_python())
        .arg("-c")
        .arg(script)
        .arg(&merged)
        .arg(&swe)
        .arg(&cache)
        .env("HF_DATASETS_OFFLINE", "1")
        .env("HF_HOME", d.path().join("hf-home"))
        .env("HF_DATASETS_CACHE", &cache)
        .output()
        .expect("python3 must be installed for this test (scripts/setup.sh)");
    assert!(
        o.status.success() && String::from_utf8_lossy(&o.stdout).contains("ok"),
        "datasets could not load the output (scripts/setup.sh makes the venv):\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

// ---------------------------------------------------------------------------------------
// Bad lines, odd bytes, and a closed stdout.

#[test]
fn blank_lines_crlf_bom_and_no_final_newline_are_fine() {
    let row = r#"{"messages": [{"role": "user", "content": "hi"}]}"#;
    let input = format!("\u{feff}{row}\r\n\r\n   \n{row}");
    let out = norm(&input, &[]);
    assert_eq!(out.len(), 2);
    assert_eq!(out[0], out[1]);
}

#[test]
fn scalar_array_and_invalid_lines_follow_the_error_policy() {
    let good = r#"{"messages": [{"role": "user", "content": "hi"}]}"#;
    let input =
        format!("{good}\n42\n[1, 2]\nnot json\n{{\"messages\": 3}}\n{{\"other\": 1}}\n{good}\n");
    let d = tmpdir();
    let mut c = cmd(BIN, d.path());
    c.arg("-q");
    let o = run_with_stdin(c, input.as_bytes());
    assert_code(&o, 1);
    assert!(
        stderr(&o).contains("<stdin>:2: expected a JSON object, found a number"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        parse_jsonl(&stdout(&o)).len(),
        1,
        "lines before the bad one are written"
    );

    let rej = d.path().join("rej.jsonl");
    let mut c = cmd(BIN, d.path());
    c.args(["--on-error", "skip", "--rejects"]).arg(&rej);
    let o = run_with_stdin(c, input.as_bytes());
    assert_code(&o, 0);
    assert_eq!(parse_jsonl(&stdout(&o)).len(), 2);
    assert!(
        stderr(&o).contains("7 read, 2 written, 5 bad lines skipped"),
        "{}",
        stderr(&o)
    );
    let r = read_jsonl(&rej);
    let reasons: Vec<&str> = r
        .iter()
        .map(|x| x["reasons"][0].as_str().unwrap())
        .collect();
    assert_eq!(reasons[0], "expected a JSON object, found a number");
    assert_eq!(reasons[1], "expected a JSON object, found an array");
    assert!(reasons[2].starts_with("invalid JSON"));
    assert_eq!(
        reasons[3],
        "`messages` must be a list of messages, found a number"
    );
    assert!(reasons[4].starts_with("no message list"));

    // Skipped without a rejects file: data lost, exit 1.
    let mut c = cmd(BIN, d.path());
    c.args(["--on-error", "skip"]);
    assert_code(&run_with_stdin(c, input.as_bytes()), 1);
}

#[test]
fn unknown_roles_and_bad_turns_are_rejected_with_their_position() {
    let cases = [
        (
            json!({"messages": [{"role": "user", "content": "q"}, {"role": "wizard", "content": "x"}]}),
            "message 2: unknown role \"wizard\"",
        ),
        (
            json!({"messages": [{"content": "x"}]}),
            "message 1: no `role` or `from` string",
        ),
        (
            json!({"messages": []}),
            "the conversation has no user, assistant or tool turns",
        ),
        (
            json!({"conversations": [{"from": "gpt", "value": "<tool_call>\n{oops}\n</tool_call>"}]}),
            "message 1: <tool_call> 1 is not JSON",
        ),
        (
            json!({"messages": [{"role": "user", "content": "q"}], "tools": "not json"}),
            "`tools` is a string but not JSON",
        ),
    ];
    for (row, want) in cases {
        let d = tmpdir();
        let o = run_with_stdin(cmd(BIN, d.path()), format!("{row}\n").as_bytes());
        assert_code(&o, 1);
        assert!(
            stderr(&o).contains(&format!("<stdin>:1: {want}")),
            "want {want}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn closed_stdout_ends_quietly_with_status_zero() {
    let row = std::fs::read_to_string(fixture("traj_run_records.jsonl")).unwrap();
    let d = tmpdir();
    let big = d.path().join("big.jsonl");
    let mut f = std::fs::File::create(&big).unwrap();
    for _ in 0..4000 {
        f.write_all(row.as_bytes()).unwrap();
    }
    drop(f);
    let mut c = cmd(BIN, d.path());
    c.arg(&big).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("{\"prompt_index\": 5"));
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&o.stderr), "");
}

#[test]
fn output_file_is_written_atomically_and_gzip_input_works() {
    let d = tmpdir();
    let gz = d.path().join("in.jsonl.gz");
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(&std::fs::read(fixture("traj_run_records.jsonl")).unwrap())
        .unwrap();
    std::fs::write(&gz, e.finish().unwrap()).unwrap();
    let out = d.path().join("out.jsonl");
    let mut c = cmd(BIN, d.path());
    c.arg("-q").arg(&gz).arg("-o").arg(&out);
    assert_code(&run(c), 0);
    assert_eq!(read_jsonl(&out).len(), 3);
    // A failed run leaves no output file behind.
    let out2 = d.path().join("out2.jsonl");
    let mut c = cmd(BIN, d.path());
    c.arg("-q").arg("-o").arg(&out2);
    assert_code(
        &run_with_stdin(
            c,
            b"{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}]}\nnope\n",
        ),
        1,
    );
    assert!(!out2.exists());
}

#[test]
fn invalid_utf8_is_a_bad_line_with_a_reason() {
    let d = tmpdir();
    let rej = d.path().join("rej.jsonl");
    let mut c = cmd(BIN, d.path());
    c.args(["-q", "--on-error", "skip", "--rejects"]).arg(&rej);
    let mut input = b"{\"messages\": [{\"role\": \"user\", \"content\": \"".to_vec();
    input.extend_from_slice(b"\xff\xfe\"}]}\n");
    let o = run_with_stdin(c, &input);
    assert_code(&o, 0);
    // Read lossily: the foundation's rejects writer keeps such a line's bytes as they are
    // (under "record"), so the rejects file itself is not valid UTF-8 (reported upstream).
    let text = String::from_utf8_lossy(&std::fs::read(&rej).unwrap()).into_owned();
    let r = parse_jsonl(&text);
    assert_eq!(r.len(), 1);
    assert!(
        r[0]["reasons"][0]
            .as_str()
            .unwrap()
            .starts_with("invalid JSON"),
        "{r:?}"
    );
}

#[test]
fn set_adds_fields_to_every_row() {
    let input = format!(
        "{}\n{}\n",
        msgs(json!([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])),
        json!({"messages": [{"role": "user", "content": "a"}], "n": 1})
    );
    let rows = norm(
        &input,
        &[
            "--set",
            "_source_dataset=glaive",
            "--set",
            "n=3",
            "--set",
            "tags=[\"x\"]",
        ],
    );
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert_eq!(r["_source_dataset"], "glaive");
        assert_eq!(r["n"], 3);
        assert_eq!(r["tags"], json!(["x"]));
    }
    let d = tmpdir();
    let mut c = cmd(BIN, d.path());
    c.args(["--set", "novalue"]);
    assert_code(&run_with_stdin(c, b""), 2);
}

/// `datasets` writes `null` for a field a row lacks beside rows that have it: traj's own
/// `message_keys` and `bridge_calls` fields, `null`, are no fields (such rows were
/// rejected: "`message_keys` entry 0: expected a list").
#[test]
fn null_fields_traj_writes_read_as_absent() {
    let rows = [
        msgs(
            json!([{"role": "user", "content": "hi", "name": "alice"}, {"role": "assistant", "content": "yo"}]),
        ),
        msgs(json!([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])),
    ];
    let input: String = rows.iter().map(|r| format!("{r}\n")).collect();
    let hermes = norm(&input, &[]);
    assert!(hermes[0].get("message_keys").is_some() && hermes[1].get("message_keys").is_none());
    // As `datasets` saves them: every column on every row.
    let saved: String = hermes
        .iter()
        .map(|r| {
            let mut r = r.clone();
            for f in ["message_keys", "bridge_calls"] {
                r.as_object_mut().unwrap().entry(f).or_insert(Value::Null);
            }
            format!("{r}\n")
        })
        .collect();
    let again = norm(&saved, &[]);
    assert_eq!(again, norm(&parse_and_join(&hermes), &[]));
    for target in ["openai", "llamafactory"] {
        assert_eq!(
            norm(&saved, &["--to", target]),
            norm(&parse_and_join(&hermes), &["--to", target]),
            "{target}"
        );
    }
}

fn parse_and_join(rows: &[Value]) -> String {
    rows.iter().map(|r| format!("{r}\n")).collect()
}

/// Hermes → OpenAI pairs each result with the call it answers, as OpenAI → OpenAI does:
/// the Hermes text writes a turn's results in their calls' places, and a result with an
/// id in its call's place gives that call its id (it used to give it to the first call
/// of the name, so the two calls of `f` swapped results).
#[test]
fn hermes_to_openai_pairs_results_as_the_direct_path_does() {
    let call = |id: Option<&str>, n: u32| {
        let mut c = json!({"type": "function", "function": {"name": "f", "arguments": format!("{{\"n\":{n}}}")}});
        if let Some(id) = id {
            c["id"] = json!(id);
        }
        c
    };
    let rows = [
        msgs(json!([{"role": "user", "content": "q"},
            {"role": "assistant", "content": null, "tool_calls": [call(Some("a"), 1), call(Some("b"), 2)]},
            {"role": "tool", "tool_call_id": "b", "content": "two"},
            {"role": "tool", "content": "one"},
            {"role": "assistant", "content": "x"}])),
        msgs(json!([{"role": "user", "content": "q"},
            {"role": "assistant", "content": null, "tool_calls": [call(None, 1), call(Some("b"), 2)]},
            {"role": "tool", "tool_call_id": "b", "content": "two"},
            {"role": "tool", "content": "one"},
            {"role": "assistant", "content": "x"}])),
    ];
    // (arguments, result) of every call.
    let pairs = |row: &Value| {
        let m = row["messages"].as_array().unwrap();
        let mut out = Vec::new();
        for c in m[1]["tool_calls"].as_array().unwrap() {
            let r = m
                .iter()
                .find(|r| r["role"] == "tool" && r["tool_call_id"] == c["id"])
                .unwrap();
            out.push((
                c["function"]["arguments"]
                    .as_str()
                    .unwrap()
                    .replace(' ', ""),
                r["content"].as_str().unwrap().to_owned(),
            ));
        }
        out
    };
    for row in rows {
        let input = format!("{row}\n");
        let direct = norm(&input, &["--to", "openai"]);
        let hermes = norm(&input, &[]);
        let via = norm(&parse_and_join(&hermes), &["--to", "openai"]);
        let want = [
            ("{\"n\":1}".to_owned(), "one".to_owned()),
            ("{\"n\":2}".to_owned(), "two".to_owned()),
        ];
        assert_eq!(pairs(&direct[0]), want, "{row}");
        assert_eq!(pairs(&via[0]), want, "{row}");
        // And back: the same Hermes row.
        assert_eq!(norm(&parse_and_join(&via), &[]), hermes, "{row}");
    }
}

/// `--to llamafactory` of its own output changes nothing for a plain chat too: its
/// `"tools": "[]"` says the row is LLaMA-Factory's, whose reasoning block ends with a
/// blank line (each pass used to add a `\n` to the answer).
#[test]
fn llamafactory_plain_chat_is_a_fixed_point() {
    let row = msgs(json!([{"role": "user", "content": "hi"},
        {"role": "assistant", "content": "<think>hmm</think>Hello!"}]));
    let once = norm(&format!("{row}\n"), &["--to", "llamafactory"]);
    assert_eq!(
        once[0]["conversations"][1]["value"],
        "<think>\nhmm\n</think>\n\nHello!"
    );
    let twice = norm(&parse_and_join(&once), &["--to", "llamafactory"]);
    assert_eq!(twice, once);
    let openai = norm(&parse_and_join(&once), &["--to", "openai"]);
    assert_eq!(openai[0]["messages"][1]["content"], "Hello!");
    assert_eq!(openai[0]["messages"][1]["reasoning_content"], "hmm");
}

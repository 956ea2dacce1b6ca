//! Round trips of other people's rows through the stages: what a row says (which result
//! answers which call, ...) is the same after each conversion and after converting back.

use serde_json::Value;

use crate::util::*;

/// For each OpenAI row, `(call arguments, the output of its result)` for every call.
fn answers(row: &Value) -> Vec<(String, String)> {
    let msgs = row["messages"].as_array().expect("messages");
    let mut out = Vec::new();
    for m in msgs {
        for c in m["tool_calls"].as_array().into_iter().flatten() {
            let id = c["id"].as_str().expect("call id");
            let args = match &c["function"]["arguments"] {
                Value::String(s) => serde_json::from_str::<Value>(s).unwrap().to_string(),
                v => v.to_string(),
            };
            let result = msgs
                .iter()
                .find(|r| r["role"] == "tool" && r["tool_call_id"] == id)
                .unwrap_or_else(|| panic!("no result for call {id}: {row}"));
            out.push((args, result["content"].as_str().unwrap().to_string()));
        }
    }
    out
}

/// Parallel calls of one tool whose results came in another order than the calls: each
/// result still answers its own call after Hermes (read by position), after `--to openai`
/// of the Hermes row, after `--to llamafactory` and back, and `--well-formed` keeps the
/// Hermes row (before, the call for a.txt got the id of b.txt's error).
#[test]
fn results_out_of_call_order_keep_answering_their_own_calls() {
    let d = tmpdir();
    let input = concat!(
        r#"{"id": 1, "messages": [{"role": "user", "content": "Compare a.txt and b.txt"}, "#,
        r#"{"role": "assistant", "content": null, "tool_calls": ["#,
        r#"{"id": "c_a", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"a.txt\"}"}}, "#,
        r#"{"id": "c_b", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"b.txt\"}"}}]}, "#,
        r#"{"role": "tool", "tool_call_id": "c_b", "content": "Error: b.txt: no such file", "ms": 3}, "#,
        r#"{"role": "tool", "tool_call_id": "c_a", "content": "hello", "ms": 5}, "#,
        r#"{"role": "assistant", "content": "a.txt says hello."}]}"#,
        "\n",
        r#"{"id": 2, "messages": [{"role": "user", "content": "go"}, "#,
        r#"{"role": "assistant", "content": null, "tool_calls": ["#,
        r#"{"id": "x", "type": "function", "function": {"name": "f", "arguments": "{}"}}, "#,
        r#"{"id": "y", "type": "function", "function": {"name": "g", "arguments": "{}"}}]}, "#,
        r#"{"role": "tool", "tool_call_id": "y", "content": "from g"}, "#,
        r#"{"role": "tool", "tool_call_id": "x", "content": "from f"}, "#,
        r#"{"role": "assistant", "content": "done"}]}"#,
        "\n",
    );
    std::fs::write(d.path().join("in.jsonl"), input).unwrap();
    let want: Vec<Vec<(String, String)>> = parse_jsonl(input).iter().map(answers).collect();

    let o = run_in("traj-normalize", d.path(), &["in.jsonl", "-o", "h.jsonl"]);
    assert_code(&o, 0);
    // Hermes text pairs by position: the k-th response answers the k-th call.
    for row in read_jsonl(&d.path().join("h.jsonl")) {
        let conv = row["conversations"].as_array().unwrap();
        let tool = conv.iter().find(|t| t["from"] == "tool").unwrap();
        let v = tool["value"].as_str().unwrap();
        let a = v.find("\"c_a\"").or(v.find("\"x\"")).unwrap();
        let b = v.find("\"c_b\"").or(v.find("\"y\"")).unwrap();
        assert!(a < b, "results not in the order of their calls: {v}");
    }
    let o = run_in("traj-filter", d.path(), &["--well-formed", "h.jsonl"]);
    assert_code(&o, 0);
    assert_eq!(parse_jsonl(&stdout(&o)).len(), 2, "{}", stderr(&o));

    let o = run_in("traj-normalize", d.path(), &["--to", "openai", "h.jsonl"]);
    assert_code(&o, 0);
    let back = parse_jsonl(&stdout(&o));
    let got: Vec<_> = back.iter().map(answers).collect();
    assert_eq!(got, want);
    // The per-message keys stay with their result.
    let ms = back[0]["messages"].as_array().unwrap();
    let b = ms.iter().find(|m| m["tool_call_id"] == "c_b").unwrap();
    assert_eq!(b["ms"], 3);

    let o = run_in("traj-normalize", d.path(), &["--to", "openai", "in.jsonl"]);
    assert_code(&o, 0);
    let direct: Vec<_> = parse_jsonl(&stdout(&o)).iter().map(answers).collect();
    assert_eq!(direct, want);

    let o = run_in(
        "traj-normalize",
        d.path(),
        &["--to", "llamafactory", "h.jsonl", "-o", "lf.jsonl"],
    );
    assert_code(&o, 0);
    let o = run_in("traj-normalize", d.path(), &["lf.jsonl"]);
    assert_code(&o, 0);
    assert_eq!(
        stdout(&o),
        std::fs::read_to_string(d.path().join("h.jsonl")).unwrap()
    );
}

/// A long OpenAI row with its own system prompt and a tool, for compression.
fn long_row_with_system() -> String {
    let words: Vec<String> = (0..200).map(|i| format!("word{i}")).collect();
    let out = words.join(" ");
    let mut msgs = vec![
        serde_json::json!({"role": "system", "content": "You are ACME bot. Answer in French."}),
        serde_json::json!({"role": "user", "content": "task"}),
    ];
    for k in 0..8 {
        msgs.push(
            serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("c{k}"), "type": "function",
             "function": {"name": "t", "arguments": format!("{{\"k\": {k}}}")}}]}),
        );
        msgs.push(
            serde_json::json!({"role": "tool", "tool_call_id": format!("c{k}"), "content": out}),
        );
    }
    msgs.push(serde_json::json!({"role": "assistant", "content": "final"}));
    let row = serde_json::json!({"id": 1, "messages": msgs, "tools": [{"type": "function",
        "function": {"name": "t", "description": "d", "parameters": {"type": "object"}}}]});
    format!("{row}\n")
}

/// normalize → compress → normalize: the source's system prompt and the summary notice
/// traj-compress appended after the Hermes tool prompt stay in the system turn (before,
/// both were dropped as another writer's tool prompt), and a further normalize changes
/// nothing.
#[test]
fn compressed_hermes_rows_keep_their_system_text_when_normalized_again() {
    let d = tmpdir();
    std::fs::write(d.path().join("in.jsonl"), long_row_with_system()).unwrap();
    assert_code(
        &run_in("traj-normalize", d.path(), &["in.jsonl", "-o", "h.jsonl"]),
        0,
    );
    let o = run_in(
        "traj-compress",
        d.path(),
        &[
            "--offline",
            "--target-max-tokens",
            "1200",
            "--summary-target-tokens",
            "200",
            "h.jsonl",
            "-o",
            "c.jsonl",
        ],
    );
    assert_code(&o, 0);
    let c = read_jsonl(&d.path().join("c.jsonl"));
    let sys = c[0]["conversations"][0]["value"]
        .as_str()
        .unwrap()
        .to_string();
    let notice = sys.rsplit("\n\n").next().unwrap().to_string();
    assert!(notice.contains("summarized"), "no notice at the end: {sys}");

    let o = run_in(
        "traj-normalize",
        d.path(),
        &["c.jsonl", "-o", "n.jsonl", "--stats", "st.json"],
    );
    assert_code(&o, 0);
    let st = read_json(&d.path().join("st.json"));
    assert_eq!(st["dropped_parts"]["other_tool_prompt"], 0, "{st}");
    let n = std::fs::read_to_string(d.path().join("n.jsonl")).unwrap();
    let row = &parse_jsonl(&n)[0];
    let sys = row["conversations"][0]["value"].as_str().unwrap();
    assert!(
        sys.starts_with(&format!(
            "You are ACME bot. Answer in French.\n\n{notice}\n\nYou are a function calling AI model."
        )),
        "{sys}"
    );
    let o = run_in("traj-normalize", d.path(), &["n.jsonl"]);
    assert_code(&o, 0);
    assert_eq!(stdout(&o), n);
    let o = run_in("traj-normalize", d.path(), &["--to", "openai", "n.jsonl"]);
    assert_code(&o, 0);
    let back = &parse_jsonl(&stdout(&o))[0];
    assert_eq!(
        back["messages"][0]["content"],
        format!("You are ACME bot. Answer in French.\n\n{notice}")
    );
}

/// A call whose arguments are a JSON string (double-encoded, as some OpenAI writers send
/// them) keeps them a string through `--to llamafactory` and `--to llamafactory-openai`
/// and back (before, reading LLaMA-Factory's `function_call` parsed the string, so the
/// row came back with an object: not the row it was).
#[test]
fn string_arguments_survive_the_llamafactory_round_trip() {
    let d = tmpdir();
    let row = concat!(
        r#"{"id": 5, "messages": [{"role": "user", "content": "q"}, "#,
        r#"{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "#,
        r#""function": {"name": "f", "arguments": "\"{\\\"a\\\":1}\""}}]}, "#,
        r#"{"role": "tool", "tool_call_id": "c1", "content": "r"}, "#,
        r#"{"role": "assistant", "content": "ok"}]}"#,
        "\n"
    );
    std::fs::write(d.path().join("in.jsonl"), row).unwrap();
    let o = run_in("traj-normalize", d.path(), &["in.jsonl", "-o", "h.jsonl"]);
    assert_code(&o, 0);
    let h = std::fs::read_to_string(d.path().join("h.jsonl")).unwrap();
    assert!(h.contains(r#"\"arguments\": \"{\\\"a\\\":1}\"}"#), "{h}");
    for to in ["llamafactory", "llamafactory-openai"] {
        let lf = format!("{to}.jsonl");
        let o = run_in(
            "traj-normalize",
            d.path(),
            &["--to", to, "h.jsonl", "-o", &lf],
        );
        assert_code(&o, 0);
        let o = run_in("traj-normalize", d.path(), &[&lf]);
        assert_code(&o, 0);
        assert_eq!(stdout(&o), h, "--to {to}");
    }
}

/// traj-filter reads a raw row's reasoning and counts its tokens as traj-normalize and
/// traj-compress do: `reasoning_details` is reasoning (`--require-reasoning`), and
/// `--max-row-tokens` counts the first reasoning field that holds text once, and the
/// calls' names and arguments (before, `reasoning` and `reasoning_content` were both
/// counted, `reasoning_details` and the calls not at all).
#[test]
fn raw_rows_have_the_reasoning_and_token_count_of_the_other_stages() {
    let d = tmpdir();
    let t: Vec<String> = (0..100).map(|i| format!("w{i}")).collect();
    let t = t.join(" ");
    let rows = [
        serde_json::json!({"id": 1, "messages": [{"role": "user", "content": "q"},
            {"role": "assistant", "content": "a", "reasoning": t, "reasoning_content": t}]}),
        serde_json::json!({"id": 2, "messages": [{"role": "user", "content": "q"},
            {"role": "assistant", "content": "a",
             "reasoning_details": [{"type": "reasoning.text", "text": t, "signature": "s"}]}]}),
        serde_json::json!({"id": 3, "messages": [{"role": "user", "content": "q"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function",
             "function": {"name": "write", "arguments": serde_json::json!({"text": t}).to_string()}}]},
            {"role": "tool", "tool_call_id": "c", "content": "ok"},
            {"role": "assistant", "content": "done"}]}),
    ];
    for (k, row) in rows.iter().enumerate() {
        let f = format!("r{k}.jsonl");
        std::fs::write(d.path().join(&f), format!("{row}\n")).unwrap();
        let o = run_in(
            "traj-compress",
            d.path(),
            &["--count-only", "--tokenizer", "chars4", &f],
        );
        assert_code(&o, 0);
        let n = serde_json::from_str::<serde_json::Value>(&stdout(&o)).unwrap()["tokens"]
            .as_u64()
            .unwrap();
        assert!(n > 50, "row {k}: {n}");
        for (max, kept) in [(n, 1), (n - 1, 0)] {
            let o = run_in(
                "traj-filter",
                d.path(),
                &[
                    "--tokenizer",
                    "chars4",
                    "--max-row-tokens",
                    &max.to_string(),
                    &f,
                ],
            );
            assert_code(&o, 0);
            assert_eq!(
                parse_jsonl(&stdout(&o)).len(),
                kept,
                "row {k}, --max-row-tokens {max}: {}",
                stderr(&o)
            );
        }
    }
    // The reasoning traj-normalize reads is reasoning to traj-filter too.
    let o = run_in(
        "traj-filter",
        d.path(),
        &["--require-reasoning", "r1.jsonl"],
    );
    assert_code(&o, 0);
    assert_eq!(parse_jsonl(&stdout(&o)).len(), 1, "{}", stderr(&o));
    let o = run_in("traj-normalize", d.path(), &["r1.jsonl", "-o", "n1.jsonl"]);
    assert_code(&o, 0);
    let o = run_in(
        "traj-filter",
        d.path(),
        &["--require-reasoning", "n1.jsonl"],
    );
    assert_eq!(parse_jsonl(&stdout(&o)).len(), 1, "{}", stderr(&o));
}

/// `--key prompt` finds one prompt in every spelling traj-normalize reads: ShareGPT
/// turns, OpenAI messages, `role`/`content` turns in `conversations` (axolotl), a content
/// list of text parts (before, the last two had no key or another one, and were kept as
/// different prompts); a prompt with an image stays its own.
#[test]
fn merge_key_prompt_reads_every_spelling_of_a_prompt() {
    let d = tmpdir();
    let rows = concat!(
        r#"{"id": "a", "conversations": [{"from": "system", "value": "S"}, {"from": "human", "value": "Hello world"}, {"from": "gpt", "value": "x"}]}"#,
        "\n",
        r#"{"id": "b", "messages": [{"role": "user", "content": [{"type": "text", "text": "Hello world"}]}, {"role": "assistant", "content": "z"}]}"#,
        "\n",
        r#"{"id": "c", "conversations": [{"role": "user", "content": " Hello world\n"}, {"role": "assistant", "content": "v"}]}"#,
        "\n",
        r#"{"id": "d", "messages": [{"role": "user", "content": [{"type": "text", "text": "Hello world"}, {"type": "image_url", "image_url": {"url": "http://x/1.png"}}]}, {"role": "assistant", "content": "i"}]}"#,
        "\n",
    );
    std::fs::write(d.path().join("in.jsonl"), rows).unwrap();
    let o = run_in(
        "traj-merge",
        d.path(),
        &[
            "--key",
            "prompt",
            "--keep",
            "first",
            "in.jsonl",
            "--rejects",
            "rej.jsonl",
        ],
    );
    assert_code(&o, 0);
    let ids: Vec<_> = parse_jsonl(&stdout(&o))
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, ["a", "d"], "{}", stderr(&o));
    let rej: Vec<_> = read_jsonl(&d.path().join("rej.jsonl"))
        .iter()
        .map(|r| r["record"]["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(rej, ["b", "c"]);
}

/// The rollouts traj-normalize reads from an Atropos dump (one `task_uid` per group, no
/// `prompt_index`) are grouped by task in traj-report's overview as in traj-filter's
/// `--stats`: 3 prompts and the same pass@2 (before, all 12 rollouts were one prompt).
#[test]
fn report_groups_rollouts_by_task_as_filter_stats_does() {
    let d = tmpdir();
    let src = fixture("atropos_scored_groups.jsonl");
    let o = run_in(
        "traj-normalize",
        d.path(),
        &[src.to_str().unwrap(), "-o", "r.jsonl"],
    );
    assert_code(&o, 0);
    let o = run_in(
        "traj-filter",
        d.path(),
        &["r.jsonl", "-o", "/dev/null", "--stats", "st.json"],
    );
    assert_code(&o, 0);
    let run = read_json(&d.path().join("st.json"))["rewards"]["run"].clone();
    assert_eq!(run["groups"], 3, "{run}");
    let pass2 = run["pass_at_k"][1].as_f64().unwrap();

    let o = run_in(
        "traj-report",
        d.path(),
        &["--summary", "--tokenizer", "chars4", "r.jsonl"],
    );
    assert_code(&o, 0);
    let out = stdout(&o);
    let field = |name: &str| -> String {
        out.lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no {name:?} in:\n{out}"))
            .split_whitespace()
            .last()
            .unwrap()
            .to_string()
    };
    assert_eq!(field("prompts "), "3", "{out}");
    assert_eq!(field("pass@2 "), format!("{:.1}%", pass2 * 100.0), "{out}");
    // Every pass@k the page shows is statistics.json's.
    for (i, p) in run["pass_at_k"].as_array().unwrap().iter().enumerate() {
        let k = i + 1;
        if let Some(line) = out
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("pass@{k} ")))
        {
            let shown = line.split_whitespace().last().unwrap();
            assert_eq!(
                shown,
                format!("{:.1}%", p.as_f64().unwrap() * 100.0),
                "{out}"
            );
        }
    }
}

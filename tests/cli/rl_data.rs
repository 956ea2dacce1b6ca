//! Scored rollouts as data: traj-normalize reads Atropos `ScoredDataGroup` dumps
//! (tests/fixtures/atropos_scored_groups.jsonl) and its own `--to groups` rows as one
//! row per rollout, writes `--to groups` and `--to dpo`; traj-filter's reward
//! predicates, `--best-of`, `--group-has-signal` and the reward figures of `--stats`.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};
use traj::format::groups::{PASS_THRESHOLD, RewardStatistics, task_of_uid};

use crate::util::*;

/// The Atropos fixture as one row per rollout (default Hermes rows), in `dir/rows.jsonl`.
fn rollout_rows(dir: &Path) -> Vec<Value> {
    let o = run({
        let mut c = cmd("traj-normalize", dir);
        c.arg(fixture("atropos_scored_groups.jsonl"))
            .args(["-o", "rows.jsonl"]);
        c
    });
    assert_code(&o, 0);
    assert_stderr_has(&o, "(3 groups of rollouts read as 12 rows)");
    read_jsonl(&dir.join("rows.jsonl"))
}

fn normalize(dir: &Path, args: &[&str]) -> std::process::Output {
    run_in("traj-normalize", dir, args)
}

fn filter(dir: &Path, args: &[&str]) -> std::process::Output {
    run_in("traj-filter", dir, args)
}

#[test]
fn atropos_groups_read_into_one_row_per_rollout_with_its_score() {
    let d = tmpdir();
    let rows = rollout_rows(d.path());
    let groups = read_jsonl(&fixture("atropos_scored_groups.jsonl"));
    assert_eq!(rows.len(), 12);
    for (g, group) in groups.iter().enumerate() {
        let of_group = &rows[g * 4..g * 4 + 4];
        let task = task_of_uid(of_group[0]["task_uid"].as_str().unwrap()).to_string();
        for (i, r) in of_group.iter().enumerate() {
            assert_eq!(task_of_uid(r["task_uid"].as_str().unwrap()), task);
            assert_eq!(r["rollout_index"], i);
            assert_eq!(r["reward"], group["scores"][i]);
            // Every per-rollout list of the group is the rollout's own field.
            for key in ["tokens", "masks", "inference_logprobs", "overrides"] {
                assert_eq!(r[key], group[key][i], "{key}");
            }
            assert_eq!(r["generation_params"], group["generation_params"]);
            // The conversation is the rollout's messages, with the reasoning kept.
            let conv = r["conversations"].as_array().unwrap();
            let msgs = group["messages"][i].as_array().unwrap();
            assert_eq!(conv.len(), msgs.len());
            assert_eq!(conv[1]["value"], msgs[1]["content"]);
            assert!(conv[2]["value"].as_str().unwrap().starts_with("<think>\n"));
        }
    }
    // Three groups, three tasks.
    let tasks: std::collections::BTreeSet<&str> = rows
        .iter()
        .map(|r| task_of_uid(r["task_uid"].as_str().unwrap()))
        .collect();
    assert_eq!(tasks.len(), 3);
    // A group without messages (token ids only) is bad input, named by line.
    std::fs::write(
        d.path().join("tokens_only.jsonl"),
        "{\"tokens\": [[1, 2]], \"masks\": [[-100, 2]], \"scores\": [1.0]}\n",
    )
    .unwrap();
    let o = normalize(d.path(), &["tokens_only.jsonl"]);
    assert_code(&o, 1);
    assert_stderr_has(
        &o,
        "tokens_only.jsonl:1: group of rollouts: a group without `messages`",
    );
}

#[test]
fn groups_rows_round_trip_through_normalize() {
    let d = tmpdir();
    rollout_rows(d.path());
    assert_code(
        &normalize(
            d.path(),
            &["--to", "groups", "rows.jsonl", "-o", "g1.jsonl"],
        ),
        0,
    );
    let g1 = std::fs::read(d.path().join("g1.jsonl")).unwrap();
    let groups = read_jsonl(&d.path().join("g1.jsonl"));
    assert_eq!(groups.len(), 3);
    for g in &groups {
        assert_eq!(g["messages"].as_array().unwrap().len(), 4);
        assert_eq!(g["rollouts"].as_array().unwrap().len(), 4);
        let scores = g["scores"].as_array().unwrap();
        for (s, r) in scores.iter().zip(g["rollouts"].as_array().unwrap()) {
            assert!(s.is_f64(), "scores are floats, as in a ScoredDataGroup");
            assert_eq!(s.as_f64(), r["reward"].as_f64());
            assert!(r.get("messages").is_none());
        }
        assert_eq!(g["messages"][0][0]["role"], "system");
    }
    // groups -> one row per rollout (OpenAI) -> groups: the same bytes.
    assert_code(
        &normalize(d.path(), &["--to", "openai", "g1.jsonl", "-o", "r.jsonl"]),
        0,
    );
    assert_eq!(read_jsonl(&d.path().join("r.jsonl")).len(), 12);
    assert_code(
        &normalize(d.path(), &["--to", "groups", "r.jsonl", "-o", "g2.jsonl"]),
        0,
    );
    assert_eq!(std::fs::read(d.path().join("g2.jsonl")).unwrap(), g1);
    // From stdin too, and the Hermes rows of a group row are those of its rollouts.
    let o = run_with_stdin(cmd("traj-normalize", d.path()), &g1);
    assert_code(&o, 0);
    let from_groups = parse_jsonl(&stdout(&o));
    let o = normalize(d.path(), &["r.jsonl"]);
    assert_eq!(from_groups, parse_jsonl(&stdout(&o)));
}

#[test]
fn dpo_pairs_the_best_with_the_worst_and_counts_the_tasks_without_a_pair() {
    let d = tmpdir();
    rollout_rows(d.path());
    let o = normalize(
        d.path(),
        &[
            "--to",
            "dpo",
            "rows.jsonl",
            "-o",
            "dpo.jsonl",
            "--rejects",
            "rej.jsonl",
        ],
    );
    assert_code(&o, 0);
    assert_stderr_has(
        &o,
        "12 read, 12 rollouts of 3 tasks -> 2 pairs, 1 tasks without a pair (margin: 1) -> rej.jsonl",
    );
    let pairs = read_jsonl(&d.path().join("dpo.jsonl"));
    let groups = read_jsonl(&fixture("atropos_scored_groups.jsonl"));
    for (p, g) in pairs.iter().zip(&groups) {
        let scores: Vec<f64> = g["scores"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_f64().unwrap())
            .collect();
        let best = (0..4).fold(0, |b, i| if scores[i] > scores[b] { i } else { b });
        let worst = (0..4).fold(0, |b, i| if scores[i] < scores[b] { i } else { b });
        assert_eq!(p["chosen_reward"].as_f64().unwrap(), scores[best]);
        assert_eq!(p["rejected_reward"].as_f64().unwrap(), scores[worst]);
        // prompt: the system and user messages; chosen/rejected: the assistant reply.
        let prompt = p["prompt"].as_array().unwrap();
        assert_eq!(prompt.len(), 2);
        assert_eq!(prompt[1]["content"], g["messages"][best][1]["content"]);
        assert_eq!(p["chosen"][0]["role"], "assistant");
        // The reply's <think> block is the message's reasoning, its answer the content.
        for (side, i) in [("chosen", best), ("rejected", worst)] {
            let m = &p[side][0];
            let text = g["messages"][i][2]["content"].as_str().unwrap();
            let reasoning = m["reasoning_content"].as_str().unwrap();
            let answer = m["content"].as_str().unwrap();
            assert_eq!(
                text,
                format!("<think>\n{reasoning}\n</think>\n{answer}"),
                "{side}"
            );
        }
        assert!(p["tools"].is_string());
    }
    // The task whose rollouts all scored 1 is in the rejects file as its groups row.
    let rej = read_jsonl(&d.path().join("rej.jsonl"));
    assert_eq!(rej.len(), 1);
    assert_eq!(rej[0]["source"], "<tasks>");
    assert_eq!(rej[0]["line"], 3);
    assert!(
        rej[0]["reasons"][0]
            .as_str()
            .unwrap()
            .starts_with("no-pair: ")
    );
    assert_eq!(rej[0]["record"]["scores"], json!([1.0, 1.0, 1.0, 1.0]));
    // --min-margin above every difference: no pair, each task counted.
    let o = normalize(
        d.path(),
        &["--to", "dpo", "--min-margin", "3", "rows.jsonl"],
    );
    assert_code(&o, 0);
    assert_eq!(stdout(&o), "");
    assert_stderr_has(&o, "-> 0 pairs, 3 tasks without a pair (margin: 3)");
    // A row without a reward is no rollout of a scored task: its exact line goes to the
    // rejects file; without one it is lost (exit 1).
    let mut text = std::fs::read_to_string(d.path().join("rows.jsonl")).unwrap();
    let plain =
        "{\"task_uid\": \"zz:0:0\", \"messages\": [{\"role\": \"user\", \"content\": \"q\"}]}\r\n";
    text.push_str(plain);
    std::fs::write(d.path().join("more.jsonl"), &text).unwrap();
    let o = normalize(
        d.path(),
        &[
            "--to",
            "dpo",
            "more.jsonl",
            "--rejects",
            "r2.jsonl",
            "-o",
            "x.jsonl",
        ],
    );
    assert_code(&o, 0);
    let rej = std::fs::read_to_string(d.path().join("r2.jsonl")).unwrap();
    let first: Value = serde_json::from_str(rej.lines().next().unwrap()).unwrap();
    assert_eq!(first["raw"], plain.trim_end_matches('\n'));
    assert_eq!(first["line"], 13);
    assert!(
        first["reasons"][0]
            .as_str()
            .unwrap()
            .starts_with("no-reward: ")
    );
    let o = normalize(d.path(), &["--to", "dpo", "more.jsonl", "-o", "x.jsonl"]);
    assert_code(&o, 1);
    // Usage: --min-margin is for --to dpo.
    assert_code(
        &normalize(d.path(), &["--min-margin", "1", "rows.jsonl"]),
        2,
    );
}

#[test]
fn best_of_and_group_has_signal_judge_each_task_by_its_rewards() {
    let d = tmpdir();
    let rows = rollout_rows(d.path());
    let reward = |r: &Value| r["reward"].as_f64().unwrap();
    // --best-of: one row per task, the first with the highest reward.
    let o = filter(
        d.path(),
        &["--best-of", "rows.jsonl", "--rejects", "rej.jsonl"],
    );
    assert_code(&o, 0);
    let kept = parse_jsonl(&stdout(&o));
    assert_eq!(kept.len(), 3);
    let mut want = Vec::new();
    for g in rows.chunks(4) {
        let best = (0..4).fold(0, |b, i| if reward(&g[i]) > reward(&g[b]) { i } else { b });
        want.push(g[best].clone());
    }
    assert_eq!(kept, want);
    assert_stderr_has(&o, "12 read, 3 kept, 9 dropped (not-best: 9)");
    // The rejects hold every other line, byte for byte.
    let lines: Vec<String> = std::fs::read_to_string(d.path().join("rows.jsonl"))
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    let rej = read_jsonl(&d.path().join("rej.jsonl"));
    assert_eq!(rej.len(), 9);
    for r in &rej {
        let n = r["line"].as_u64().unwrap() as usize;
        assert_eq!(r["raw"], lines[n - 1]);
    }
    // --group-has-signal: the task whose four rollouts all scored 1 goes, whole.
    let o = filter(d.path(), &["--group-has-signal", "rows.jsonl"]);
    assert_code(&o, 0);
    let kept = parse_jsonl(&stdout(&o));
    assert_eq!(kept, rows[..8].to_vec());
    // From stdin (read twice through a spool), the rejects name <stdin>.
    let text = std::fs::read(d.path().join("rows.jsonl")).unwrap();
    let mut c = cmd("traj-filter", d.path());
    c.args(["--group-has-signal", "--rejects", "rej2.jsonl"]);
    let o = run_with_stdin(c, &text);
    assert_code(&o, 0);
    assert_eq!(parse_jsonl(&stdout(&o)), rows[..8].to_vec());
    let rej = read_jsonl(&d.path().join("rej2.jsonl"));
    assert_eq!(rej.len(), 4);
    assert!(rej.iter().all(|r| r["source"] == "<stdin>"));
    assert!(
        rej[0]["reasons"][0]
            .as_str()
            .unwrap()
            .starts_with("no-signal: the 4 rollout(s) of task ")
    );
    // From a FIFO (`<(cmd)`), spooled as stdin is.
    let mut c = std::process::Command::new("bash");
    c.current_dir(d.path()).arg("-c").arg(format!(
        "{} --group-has-signal <(cat rows.jsonl)",
        bin("traj-filter").display()
    ));
    let o = run(c);
    assert_code(&o, 0);
    assert_eq!(parse_jsonl(&stdout(&o)), rows[..8].to_vec());
    // Rows without a message list (scores alone) have their task and reward too.
    std::fs::write(
        d.path().join("scores.jsonl"),
        "{\"prompt_index\": 1, \"reward\": 1}\n{\"prompt_index\": 1, \"reward\": 0}\n",
    )
    .unwrap();
    let o = filter(
        d.path(),
        &["--best-of", "scores.jsonl", "--rejects", "rej3.jsonl"],
    );
    assert_code(&o, 0);
    assert_eq!(stdout(&o), "{\"prompt_index\": 1, \"reward\": 1}\n");
    let rej = read_jsonl(&d.path().join("rej3.jsonl"));
    assert_eq!(rej.len(), 1);
    assert!(
        rej[0]["reasons"][0]
            .as_str()
            .unwrap()
            .starts_with("not-best: "),
        "{rej:?}"
    );
    // `2` and `2.0` are one task, as traj-merge keys them.
    std::fs::write(
        d.path().join("twice.jsonl"),
        "{\"prompt_index\": 2, \"reward\": 1}\n{\"prompt_index\": 2.0, \"reward\": 0}\n",
    )
    .unwrap();
    let o = filter(d.path(), &["--best-of", "-q", "twice.jsonl"]);
    assert_eq!(stdout(&o), "{\"prompt_index\": 2, \"reward\": 1}\n");
    // A shard holds every N-th line, not whole tasks: refused.
    let o = filter(d.path(), &["--best-of", "--shard", "0/2", "rows.jsonl"]);
    assert_code(&o, 2);
    assert_stderr_has(&o, "--shard splits");
    // A negative threshold reads as a number, not as a flag.
    let o = filter(d.path(), &["--min-reward", "-0.5", "rows.jsonl"]);
    assert_code(&o, 0);
    assert_eq!(
        parse_jsonl(&stdout(&o)).len(),
        rows.iter().filter(|r| reward(r) >= -0.5).count()
    );
    // With a row predicate: the best of the rollouts with reward >= 0 (all rollouts of
    // the first task whose reward is -1 are dropped first).
    let o = filter(d.path(), &["--min-reward", "0", "--best-of", "rows.jsonl"]);
    assert_code(&o, 0);
    assert_eq!(parse_jsonl(&stdout(&o)).len(), 3);
    let o = filter(d.path(), &["--min-reward", "0.5", "rows.jsonl"]);
    let kept = parse_jsonl(&stdout(&o));
    assert!(kept.iter().all(|r| reward(r) >= 0.5));
    assert_eq!(kept.len(), rows.iter().filter(|r| reward(r) >= 0.5).count());
    let o = filter(d.path(), &["--max-reward", "0", "rows.jsonl"]);
    assert_eq!(
        parse_jsonl(&stdout(&o)).len(),
        rows.iter().filter(|r| reward(r) <= 0.0).count()
    );
    // Usage errors.
    assert_code(
        &filter(
            d.path(),
            &["--min-reward", "2", "--max-reward", "1", "rows.jsonl"],
        ),
        2,
    );
    assert_code(&filter(d.path(), &["--min-reward", "nan", "rows.jsonl"]), 2);
}

#[test]
fn stats_give_the_reward_figures_of_the_rows_read_and_kept() {
    let d = tmpdir();
    let rows = rollout_rows(d.path());
    let o = filter(
        d.path(),
        &[
            "--group-has-signal",
            "rows.jsonl",
            "-o",
            "k.jsonl",
            "--stats",
            "st.json",
        ],
    );
    assert_code(&o, 0);
    let st = read_json(&d.path().join("st.json"));
    let by_task = |rows: &[Value]| {
        let mut m: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for r in rows {
            m.entry(task_of_uid(r["task_uid"].as_str().unwrap()).to_string())
                .or_default()
                .push(r["reward"].as_f64().unwrap());
        }
        m
    };
    let want = RewardStatistics::of(&mut by_task(&rows), PASS_THRESHOLD).unwrap();
    assert_eq!(st["rewards"], serde_json::to_value(&want).unwrap());
    let want = RewardStatistics::of(&mut by_task(&rows[..8]), PASS_THRESHOLD).unwrap();
    assert_eq!(st["rewards_kept"], serde_json::to_value(&want).unwrap());
    // The figures themselves: three groups of four, two with a signal.
    assert_eq!(st["rewards"]["run"]["groups"], 3);
    assert_eq!(st["rewards"]["run"]["groups_with_signal"], 2);
    assert_eq!(
        st["rewards"]["run"]["pass_at_k"].as_array().unwrap().len(),
        4
    );
    // pass@1 of the first task: 3 of 4 pass.
    let first = task_of_uid(rows[0]["task_uid"].as_str().unwrap());
    assert_eq!(st["rewards"]["per_task"][first]["pass_at_k"][0], 0.75);
    // --pass-threshold moves what passes; no predicate at all still counts.
    let o = filter(
        d.path(),
        &[
            "--pass-threshold",
            "2",
            "rows.jsonl",
            "-o",
            "/dev/null",
            "--stats",
            "-",
        ],
    );
    assert_code(&o, 0);
    let st: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(st["rewards"]["pass_threshold"], 2.0);
    assert_eq!(st["rewards"]["run"]["pass_at_k"][3], 0.0);
    // Rows without rewards: no `rewards` key.
    let o = filter(
        d.path(),
        &[
            fixture("hermes_reason_tool_use_50.jsonl").to_str().unwrap(),
            "-o",
            "/dev/null",
            "--stats",
            "-",
        ],
    );
    let st: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(st.get("rewards").is_none());
}

/// `--retokenize-check`: rows whose sampled tokens are the ones the model's tokenizer
/// makes of their text pass; a word sampled in two pieces, or vLLM token ids that are
/// not the tokenizer's own, is drift. The true tokens come from the `tokenizers` Python
/// package (another implementation than traj's), on the fixture tokenizer.
#[test]
fn retokenize_check_finds_the_turns_whose_sampled_tokens_drift() {
    let d = tmpdir();
    let tok = fixture("templates/qwen2.5-style/tokenizer.json");
    let texts = [
        "The answer is 391.",
        "Canberra is the capital of Australia.",
    ];
    let script = r#"
import json, sys
from tokenizers import Tokenizer
t = Tokenizer.from_file(sys.argv[1])
out = []
for text in json.loads(sys.argv[2]):
    e = t.encode(text, add_special_tokens=False)
    out.append([[i, text[a:b]] for i, (a, b) in zip(e.ids, e.offsets)])
print(json.dumps(out))
"#;
    let o = std::process::Command::new(transformers_python())
        .args(["-c", script])
        .arg(&tok)
        .arg(serde_json::to_string(&texts).unwrap())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let true_tokens: Vec<Vec<(u32, String)>> = serde_json::from_slice(&o.stdout).unwrap();
    assert!(true_tokens[0].len() > 2);
    let entry =
        |t: &str| json!({"token": t, "logprob": -0.25, "bytes": t.as_bytes(), "top_logprobs": []});
    let record = |uid: &str, text: &str, content: Vec<Value>| {
        json!({"task_uid": uid, "reward": 1, "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": text, "logprobs": {"content": content}}]})
    };
    let canonical =
        |k: usize| -> Vec<Value> { true_tokens[k].iter().map(|(_, t)| entry(t)).collect() };
    // The first token of text 1 split in two: the same text, other tokens.
    let mut split = canonical(1);
    let first = true_tokens[1][0].1.clone();
    assert!(first.len() >= 2, "{first}");
    split.splice(0..1, [entry(&first[..1]), entry(&first[1..])]);
    let ids = |k: usize| -> Vec<Value> {
        true_tokens[k]
            .iter()
            .map(|(i, _)| json!({"token": format!("token_id:{i}"), "logprob": -0.1}))
            .collect()
    };
    let rows = [
        record("a:0:0", texts[0], canonical(0)),
        record("a:0:1", texts[1], canonical(1)),
        record("b:0:0", texts[1], split),
        record("c:0:0", texts[0], ids(0)),
        // vLLM ids in reverse order: a sequence the tokenizer would never make.
        record("c:0:1", texts[0], ids(0).into_iter().rev().collect()),
        json!({"task_uid": "d:0:0", "messages": [{"role": "user", "content": "no logprobs"},
            {"role": "assistant", "content": "x"}]}),
    ];
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(d.path().join("lp.jsonl"), text).unwrap();
    let dir = fixture("templates/qwen2.5-style");
    let dir = dir.to_str().unwrap();
    let o = filter(
        d.path(),
        &[
            "--retokenize-check",
            "--tokenizer",
            dir,
            "lp.jsonl",
            "--stats",
            "st.json",
        ],
    );
    assert_code(&o, 0);
    assert_eq!(
        parse_jsonl(&stdout(&o)).len(),
        6,
        "kept without --drop-drift"
    );
    assert_stderr_has(&o, "token drift in 2 of 5 turns checked (2 of 5 rows)");
    let st = read_json(&d.path().join("st.json"));
    assert_eq!(st["token_drift"]["rows_with_drift"], 2);
    let o = filter(
        d.path(),
        &[
            "--retokenize-check",
            "--drop-drift",
            "--tokenizer",
            dir,
            "lp.jsonl",
            "--rejects",
            "rej.jsonl",
        ],
    );
    assert_code(&o, 0);
    let kept: Vec<String> = parse_jsonl(&stdout(&o))
        .iter()
        .map(|r| r["task_uid"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kept, ["a:0:0", "a:0:1", "c:0:0", "d:0:0"]);
    let rej = read_jsonl(&d.path().join("rej.jsonl"));
    let why = rej[0]["reasons"][0].as_str().unwrap();
    assert!(
        why.starts_with("token-drift: turn 0: ") && why.contains("first difference at token 0"),
        "{why}"
    );
    // The check needs the model's tokenizer, not a built-in encoding.
    assert_code(&filter(d.path(), &["--retokenize-check", "lp.jsonl"]), 2);
    assert_code(&filter(d.path(), &["--drop-drift", "lp.jsonl"]), 2);
}

/// A foreign `task_uid` is a task of its own: only traj-run's `ROW:COPY:ROLLOUT` form
/// loses its rollout part, so three problems `math:train:17..19` are three tasks, and
/// the rollouts `ab12:0:0`, `ab12:0:1` are one.
#[test]
fn best_of_keeps_foreign_task_uids_whole() {
    let d = tmpdir();
    let row = |uid: &str, reward: f64| {
        json!({"task_uid": uid, "reward": reward, "conversations": [
            {"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]})
        .to_string()
    };
    let rows = [
        row("math:train:17", 1.0),
        row("math:train:18", 0.5),
        row("math:train:19", 0.0),
        row("ab12:0:0", 0.0),
        row("ab12:0:1", 1.0),
    ];
    std::fs::write(d.path().join("in.jsonl"), rows.join("\n") + "\n").unwrap();
    let o = filter(
        d.path(),
        &["in.jsonl", "--best-of", "--rejects", "rej.jsonl", "-q"],
    );
    assert_code(&o, 0);
    let kept: Vec<String> = parse_jsonl(&stdout(&o))
        .iter()
        .map(|r| r["task_uid"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        kept,
        [
            "math:train:17",
            "math:train:18",
            "math:train:19",
            "ab12:0:1"
        ]
    );
}

//! traj-run `--rollouts K` with verifiers: a scripted endpoint whose answer depends on
//! the request's `seed` writes a file in each rollout's workspace; a verifier command
//! run in that sandbox scores it. Rewards, pass@k in statistics.json (against
//! `traj::format::groups` over the records), kill -9 and `--resume` (every (task,
//! rollout) once), crashing verifiers (`verifier_error`, never a reward), the built-in
//! checks, and logprobs kept byte for byte.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use traj::format::groups::{
    GroupStats, PASS_THRESHOLD, RewardStatistics, RunGroupStats, task_of_uid,
};

use crate::standin::Standin;
use crate::util::*;

/// Each rollout writes `answer.txt` holding its seed mod 2, then answers with it.
fn seeded_script(latency_ms: u64) -> Value {
    json!({"latency_ms": latency_ms, "rules": [{"match": "", "turns": [
        {"tool_calls": [{"name": "write_file",
            "arguments": {"path": "answer.txt", "content": "{seed%2}"}}]},
        {"content": "The answer is {seed%2}."}
    ]}]})
}

/// Reward 1 when the agent's answer.txt holds 1, else 0 (a file in the workspace).
const VERIFIER: &str = "if [ \"$(cat answer.txt)\" = 1 ]; then echo 1; else echo 0; fi";

fn tasks(dir: &Path, n: usize) {
    let text: String = (0..n)
        .map(|i| {
            format!(
                "{}\n",
                json!({"prompt": format!("task {i}"), "expected": "1"})
            )
        })
        .collect();
    std::fs::write(dir.join("tasks.jsonl"), text).unwrap();
}

fn traj_run(dir: &Path, s: &Standin, run_dir: &str) -> Command {
    let mut c = standin_run(dir, &s.url(), run_dir);
    c.args(["--toolsets", "file", "-q", "tasks.jsonl"]);
    c
}

/// The batch files of the run directory `dir/run`, as paths relative to `dir`.
fn batch_files(dir: &Path, run: &str) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir.join(run))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("batch_"))
        .map(|n| format!("{run}/{n}"))
        .collect();
    out.sort();
    out
}

/// Records of `run` by (task, rollout), asserting each appears once.
fn by_rollout(run: &Path) -> BTreeMap<(String, u64), Value> {
    let mut out = BTreeMap::new();
    for r in records(run) {
        let uid = r["task_uid"].as_str().unwrap();
        let key = (
            task_of_uid(uid).to_string(),
            r["rollout_index"].as_u64().unwrap(),
        );
        assert!(uid.ends_with(&format!(":{}", key.1)), "{uid}");
        assert!(out.insert(key.clone(), r).is_none(), "{key:?} twice");
    }
    out
}

#[test]
fn four_rollouts_scored_in_their_sandbox_with_pass_at_k_and_logprobs() {
    let d = tmpdir();
    tasks(d.path(), 3);
    let s = Standin::json(seeded_script(0));
    let mut c = traj_run(d.path(), &s, "run");
    c.args([
        "--rollouts",
        "4",
        "--temperature",
        "0.7",
        "--verifier",
        VERIFIER,
    ]);
    c.args(["--logprobs", "--top-logprobs", "2"]);
    let o = run(c);
    assert_code(&o, 0);
    let run_dir = d.path().join("run");
    let recs = by_rollout(&run_dir);
    assert_eq!(recs.len(), 12);
    let mut rewards = BTreeSet::new();
    for ((_, k), r) in &recs {
        let seed = r["sampling"]["seed"].as_u64().unwrap();
        assert_eq!(r["sampling"]["temperature"], json!(0.7));
        assert_eq!(r["sampling"]["top_p"], Value::Null);
        // The verifier's reward, from the file this rollout's agent wrote.
        assert_eq!(r["reward"], json!(seed % 2), "rollout {k}");
        assert_eq!(r["verification"]["exit_code"], 0);
        assert_eq!(r["verification"]["truncated"], false);
        assert_eq!(r["verification"]["output"], format!("{}\n", seed % 2));
        rewards.insert(seed % 2);
    }
    assert_eq!(rewards.len(), 2, "some rollouts pass, some fail");
    // Every request of a rollout carried its seed, its temperature and logprobs.
    for b in s.requests() {
        assert!(b["seed"].is_u64() && b["temperature"] == json!(0.7), "{b}");
        assert_eq!(
            (b["logprobs"].clone(), b["top_logprobs"].clone()),
            (json!(true), json!(2))
        );
    }
    // The logprobs of each assistant message are the stand-in's, byte for byte.
    let sent: BTreeSet<String> = s
        .responses()
        .iter()
        .map(|t| {
            let v: Value = serde_json::from_str(t).unwrap();
            v["choices"][0]["logprobs"].to_string()
        })
        .collect();
    let lines = std::fs::read_to_string(run_dir.join("batch_0.jsonl")).unwrap();
    let mut kept = 0;
    for r in recs.values() {
        for m in r["messages"].as_array().unwrap() {
            if m["role"] == "assistant" {
                let lp = m["logprobs"].to_string();
                assert!(sent.contains(&lp), "{lp}");
                assert!(lines.contains(&lp), "raw bytes of the batch file");
                kept += 1;
            }
        }
    }
    assert_eq!(kept, 24);
    // pass@k as traj::format::groups computes it from the records.
    let mut groups: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for ((task, _), r) in &recs {
        groups
            .entry(task.clone())
            .or_default()
            .push(r["reward"].as_f64().unwrap());
    }
    let mut sorted = groups.clone();
    let want = RewardStatistics::of(&mut sorted, PASS_THRESHOLD).unwrap();
    let st = read_json(&run_dir.join("statistics.json"));
    assert_eq!(st["rollouts"], 4);
    assert_eq!(st["rewards"], serde_json::to_value(&want).unwrap());
    // The same figures by the definitions, rollout by rollout.
    let by_def = RunGroupStats::of(groups.values().map(Vec::as_slice), PASS_THRESHOLD);
    assert_eq!(
        st["rewards"]["run"]["pass_at_k"],
        serde_json::to_value(&by_def.pass_at_k).unwrap()
    );
    for (task, r) in &groups {
        let g = GroupStats::of(r, PASS_THRESHOLD).unwrap();
        assert_eq!(
            st["rewards"]["per_task"][task]["pass_at_k"],
            serde_json::to_value(&g.pass_at_k).unwrap()
        );
    }
    assert_eq!(
        st["rewards"]["run"]["pass_at_k"].as_array().unwrap().len(),
        4
    );
}

#[test]
fn kill_9_at_random_then_resume_runs_every_rollout_once() {
    let d = tmpdir();
    tasks(d.path(), 12);
    let s = Standin::json(json!({"latency_ms": 80, "record": false,
        "rules": seeded_script(0)["rules"]}));
    let run_dir = d.path().join("run");
    let args = [
        "--rollouts",
        "4",
        "--verifier",
        VERIFIER,
        "-j",
        "3",
        "--batch-size",
        "5",
    ];
    let mut seed = 0x9e37_79b9_u64;
    let mut kills = 0;
    for kill in 0..20 {
        let mut c = traj_run(d.path(), &s, "run");
        c.args(args).stdout(Stdio::null()).stderr(Stdio::null());
        if kill > 0 {
            c.arg("--resume");
        }
        let mut child = c.spawn().unwrap();
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        std::thread::sleep(Duration::from_millis(40 + (seed >> 33) % 150));
        if child.try_wait().unwrap().is_some() {
            break;
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        kills += 1;
    }
    assert_eq!(kills, 20, "the run finished before 20 kills");
    // Not quiet: the resume line is read below.
    let mut c = standin_run(d.path(), &s.url(), "run");
    c.args(["--toolsets", "file", "tasks.jsonl"])
        .args(args)
        .arg("--resume")
        .stdout(Stdio::null());
    let o = run(c);
    assert_code(&o, 0);
    // The resume line counts runs, and says so.
    let err = stderr(&o);
    assert!(
        err.contains("resume: 48 runs (12 tasks x 4 rollouts), "),
        "{err}"
    );
    let recs = by_rollout(&run_dir);
    assert_eq!(recs.len(), 48, "every (task, rollout) exactly once");
    for r in recs.values() {
        assert_eq!(
            r["reward"],
            json!(r["sampling"]["seed"].as_u64().unwrap() % 2)
        );
    }
    // The four rollouts of a task share its prompt_index.
    let mut idx: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
    for ((task, _), r) in &recs {
        idx.entry(task.clone())
            .or_default()
            .insert(r["prompt_index"].as_u64().unwrap());
    }
    assert!(idx.values().all(|s| s.len() == 1), "{idx:?}");
    assert_eq!(failures(&run_dir).len(), 0);
}

#[test]
fn a_crashing_verifier_is_a_verifier_error_never_a_reward() {
    let d = tmpdir();
    tasks(d.path(), 2);
    let s = Standin::json(seeded_script(0));
    for (n, verifier) in ["echo oops >&2; exit 3", "echo not-a-number", "sleep 5"]
        .iter()
        .enumerate()
    {
        let dir = format!("run{n}");
        let mut c = traj_run(d.path(), &s, &dir);
        c.args([
            "--rollouts",
            "2",
            "--verifier",
            verifier,
            "--verifier-timeout",
            "0.5",
        ]);
        assert_code(&run(c), 1);
        let run_dir = d.path().join(&dir);
        assert!(records(&run_dir).is_empty(), "{verifier}");
        let f = failures(&run_dir);
        assert_eq!(f.len(), 4, "{verifier}");
        assert!(f.iter().all(|f| f["class"] == "verifier_error"), "{f:?}");
        assert!(f.iter().all(|f| f["retryable"] == true));
        let st = read_json(&run_dir.join("statistics.json"));
        assert_eq!(st["failure_classes"]["verifier_error"], 4);
        assert!(st.get("rewards").is_none());
    }
}

#[test]
fn a_verifier_command_on_a_task_without_tools_fails_before_any_model_call() {
    let d = tmpdir();
    tasks(d.path(), 2);
    let s = Standin::json(seeded_script(0));
    for resume in [false, true] {
        let mut c = standin_run(d.path(), &s.url(), "run");
        c.args([
            "--toolsets",
            "",
            "-q",
            "tasks.jsonl",
            "--verifier",
            "echo 1",
        ]);
        if resume {
            c.arg("--resume");
        }
        // The resume has nothing to run: both tasks are given up.
        assert_code(&run(c), if resume { 0 } else { 1 });
    }
    // No model call paid for a rollout that could never be scored, nor on resume.
    assert_eq!(s.count(), 0);
    let run_dir = d.path().join("run");
    assert!(records(&run_dir).is_empty());
    let f = failures(&run_dir);
    assert_eq!(f.len(), 2, "{f:?}");
    assert!(
        f.iter()
            .all(|f| f["class"] == "bad_task" && f["retryable"] == false)
    );
    assert!(
        f[0]["error"]
            .as_str()
            .unwrap()
            .contains("built-in verifier")
    );
}

#[test]
fn a_verifiers_members_named_as_trajs_own_are_kept_aside() {
    let d = tmpdir();
    tasks(d.path(), 1);
    let s = Standin::json(seeded_script(0));
    let mut c = traj_run(d.path(), &s, "run");
    c.args([
        "--verifier",
        r#"echo '{"reward": 1, "output": "3 passed", "seconds": 9, "tests": 3}'"#,
    ]);
    assert_code(&run(c), 0);
    let recs = records(&d.path().join("run"));
    let v = &recs[0]["verification"];
    assert_eq!(v["verifier"], "command");
    assert_eq!(v["tests"], 3);
    assert!(v["output"].as_str().unwrap().contains("\"reward\""), "{v}");
    assert_eq!(
        v["verifier_fields"],
        json!({"output": "3 passed", "seconds": 9})
    );
}

#[test]
fn a_verifier_printing_a_long_log_before_its_reward_is_scored() {
    // Over 16 MiB of stdout was once read as nothing at all: "printed nothing on stdout".
    let d = tmpdir();
    tasks(d.path(), 1);
    let s = Standin::json(seeded_script(0));
    let mut c = traj_run(d.path(), &s, "run");
    c.args([
        "--verifier",
        "head -c 20000000 /dev/zero | tr '\\0' x; echo; echo 0.5",
    ]);
    assert_code(&run(c), 0);
    let recs = records(&d.path().join("run"));
    assert_eq!(recs[0]["reward"], json!(0.5));
    assert_eq!(recs[0]["verification"]["truncated"], true);
    assert!(
        recs[0]["verification"]["output"]
            .as_str()
            .unwrap()
            .ends_with("x\n0.5\n")
    );
}

#[test]
fn a_verifier_finds_its_files_from_a_rows_cwd() {
    // The paths were relative to the workspace root, where a `cwd` row's verifier is not.
    let d = tmpdir();
    let row = json!({"prompt": "task 0", "cwd": "sub/dir"});
    std::fs::write(d.path().join("tasks.jsonl"), format!("{row}\n")).unwrap();
    let s = Standin::json(seeded_script(0));
    let mut c = traj_run(d.path(), &s, "run");
    c.args([
        "--verifier",
        "pwd >&2; grep -q '\"sub/dir\"' \"$TRAJ_TASK_FILE\" && grep -q answer \"$TRAJ_FINAL_ANSWER_FILE\" && echo 1",
    ]);
    assert_code(&run(c), 0);
    let recs = records(&d.path().join("run"));
    assert_eq!(recs[0]["reward"], json!(1), "{}", recs[0]["verification"]);
    assert!(
        recs[0]["verification"]["stderr"]
            .as_str()
            .unwrap()
            .contains("sub/dir")
    );
}

#[test]
fn builtin_verifiers_match_regex_and_number() {
    let d = tmpdir();
    let rows = [
        json!({"prompt": "a", "want": "the answer is  1", "re": "^The answer is [01]\\.$", "n": "1.0000001"}),
        json!({"prompt": "b", "want": "something else", "re": "^no$", "n": "2"}),
    ];
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(d.path().join("tasks.jsonl"), text).unwrap();
    let s = Standin::json(json!({"default": {"content": "The answer is 1."}}));
    for (v, want) in [
        ("match:want", [1, 0]),
        ("regex:re", [1, 0]),
        ("number:n", [1, 0]),
    ] {
        let dir = v.replace(':', "_");
        let mut c = traj_run(d.path(), &s, &dir);
        c.args(["--verifier", v, "--toolsets", ""]);
        assert_code(&run(c), 0);
        let recs = records(&d.path().join(&dir));
        let mut got: Vec<(String, Value)> = recs
            .iter()
            .map(|r| {
                (
                    r["prompt"].as_str().unwrap().to_string(),
                    r["reward"].clone(),
                )
            })
            .collect();
        got.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            got,
            [("a".into(), json!(want[0])), ("b".into(), json!(want[1]))],
            "{v}"
        );
        assert!(recs.iter().all(|r| r["verification"]["verifier"] == v));
        // One rollout: no seed sent, byte-compatible requests.
        assert!(recs.iter().all(|r| r["sampling"]["seed"].is_null()));
    }
    assert!(s.requests().iter().all(|b| b.get("seed").is_none()));
}

/// TRL's own preference-data code reads `traj-normalize --to dpo` of scored rollouts:
/// `datasets` loads the file, `trl.data_utils.is_conversational` says each row is a
/// conversational preference row, and `maybe_apply_chat_template` renders it with a
/// tool-calling chat template (tests/fixtures/templates/qwen2.5-style) and its tools.
#[test]
fn trl_loads_the_dpo_pairs_of_scored_rollouts_and_applies_a_chat_template() {
    let py = trl_python();
    let d = tmpdir();
    tasks(d.path(), 6);
    let s = Standin::json(seeded_script(0));
    let mut c = traj_run(d.path(), &s, "run");
    c.args(["--rollouts", "4", "--verifier", VERIFIER]);
    assert_code(&run(c), 0);
    let recs = by_rollout(&d.path().join("run"));
    let mut with_signal = BTreeSet::new();
    let mut rewards: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
    for ((task, _), r) in &recs {
        rewards
            .entry(task.clone())
            .or_default()
            .insert(r["reward"].as_u64().unwrap());
    }
    for (task, r) in &rewards {
        if r.len() == 2 {
            with_signal.insert(task.clone());
        }
    }
    assert!(
        !with_signal.is_empty(),
        "some task has rollouts that pass and fail"
    );
    let mut c = cmd("traj-normalize", d.path());
    c.args(["--to", "dpo", "-o", "dpo.jsonl"]);
    c.args(batch_files(d.path(), "run"));
    let o = run(c);
    assert_code(&o, 0);
    let pairs = read_jsonl(&d.path().join("dpo.jsonl"));
    assert_eq!(pairs.len(), with_signal.len(), "{}", stderr(&o));
    let script = r#"
import json, sys
from datasets import load_dataset
from transformers import AutoTokenizer
from trl.data_utils import is_conversational, maybe_apply_chat_template
ds = load_dataset("json", data_files=sys.argv[1], split="train")
tok = AutoTokenizer.from_pretrained(sys.argv[2])
out = []
for ex in ds:
    assert is_conversational(ex), ex
    r = maybe_apply_chat_template(ex, tok, tools=json.loads(ex["tools"]))
    out.append({k: r[k] for k in ("prompt", "chosen", "rejected")})
print(json.dumps(out))
"#;
    let o = Command::new(&py)
        .args(["-c", script])
        .arg(d.path().join("dpo.jsonl"))
        .arg(fixture("templates/qwen2.5-style"))
        .env("HF_DATASETS_CACHE", d.path().join("hf-cache"))
        .env("HF_HUB_OFFLINE", "1")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rendered: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rendered.len(), pairs.len());
    for (r, p) in rendered.iter().zip(&pairs) {
        assert!(with_signal.contains(p["task"].as_str().unwrap()));
        assert_eq!(
            (p["chosen_reward"].as_f64(), p["rejected_reward"].as_f64()),
            (Some(1.0), Some(0.0))
        );
        let (prompt, chosen, rejected) = (
            r["prompt"].as_str().unwrap(),
            r["chosen"].as_str().unwrap(),
            r["rejected"].as_str().unwrap(),
        );
        // The prompt is the task's, with the tools the template lists; the two replies
        // are the rollouts' own: the file written, then the answer the verifier scored.
        let task = p["prompt"].as_array().unwrap().last().unwrap()["content"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(prompt.contains(&task), "{prompt}");
        assert!(
            prompt.contains("write_file") && prompt.contains("<tools>"),
            "{prompt}"
        );
        assert!(
            chosen.contains("<tool_call>") && chosen.contains("answer.txt"),
            "{chosen}"
        );
        assert!(chosen.contains("The answer is 1."), "{chosen}");
        assert!(rejected.contains("The answer is 0."), "{rejected}");
        assert!(!prompt.contains("The answer is"), "{prompt}");
    }
}

/// `traj-normalize --token-sidecar FILE.parquet` moves the logprobs of `--logprobs`
/// records out of the rows into one Parquet row per token, keyed by the row's
/// `task_uid`, the assistant turn and the position: every token as the server sent it.
#[test]
fn logprobs_move_to_a_parquet_token_sidecar_keyed_by_row_turn_and_position() {
    let d = tmpdir();
    tasks(d.path(), 2);
    let s = Standin::json(seeded_script(0));
    let mut c = traj_run(d.path(), &s, "run");
    c.args(["--rollouts", "2", "--logprobs", "--top-logprobs", "2"]);
    assert_code(&run(c), 0);
    let recs = records(&d.path().join("run"));
    assert_eq!(recs.len(), 4);
    let mut c = cmd("traj-normalize", d.path());
    c.args(["--token-sidecar", "tokens.parquet", "-o", "rows.jsonl"]);
    c.args(batch_files(d.path(), "run"));
    let o = run(c);
    assert_code(&o, 0);
    let rows = std::fs::read_to_string(d.path().join("rows.jsonl")).unwrap();
    assert!(!rows.contains("logprob"), "the rows keep no logprobs");
    assert_eq!(rows.lines().count(), 4);
    // Read the sidecar back (any stage reads Parquet): the tokens of every assistant
    // message of every record, in order.
    let mut c = cmd("traj-filter", d.path());
    c.arg("tokens.parquet");
    let o = run(c);
    assert_code(&o, 0);
    let side = parse_jsonl(&stdout(&o));
    let mut want = Vec::new();
    for r in &recs {
        let uid = r["task_uid"].as_str().unwrap();
        let mut turn = 0;
        for m in r["messages"].as_array().unwrap() {
            if m["role"] != "assistant" {
                continue;
            }
            for (p, e) in m["logprobs"]["content"]
                .as_array()
                .unwrap()
                .iter()
                .enumerate()
            {
                want.push(json!({"row_id": uid, "turn": turn, "position": p,
                    "token": e["token"], "logprob": e["logprob"].as_f64(),
                    "top": e["top_logprobs"].as_array().map(Vec::len)}));
            }
            turn += 1;
        }
    }
    let got: Vec<Value> = side
        .iter()
        .map(|t| {
            assert_eq!(t["kind"], "content");
            json!({"row_id": t["row_id"], "turn": t["turn"], "position": t["position"],
                "token": t["token"], "logprob": t["logprob"].as_f64(),
                "top": t["top_logprobs"].as_array().map(Vec::len)})
        })
        .collect();
    let key = |v: &Value| {
        (
            v["row_id"].to_string(),
            v["turn"].as_u64(),
            v["position"].as_u64(),
        )
    };
    let (mut got, mut want) = (got, want);
    got.sort_by_key(key);
    want.sort_by_key(key);
    assert!(!want.is_empty());
    assert_eq!(got, want);
    // --token-ids asks vLLM for the ids of the sampled tokens.
    let mut c = traj_run(d.path(), &s, "run-ids");
    c.args(["--logprobs", "--token-ids"]);
    assert_code(&run(c), 0);
    let last = s.requests().pop().unwrap();
    assert_eq!(last["return_tokens_as_token_ids"], json!(true), "{last}");
    assert!(
        s.requests()[..2]
            .iter()
            .all(|b| b.get("return_tokens_as_token_ids").is_none())
    );
    // stdin cannot be read twice.
    let mut c = cmd("traj-normalize", d.path());
    c.args(["--token-sidecar", "t.jsonl"]);
    assert_code(&run_with_stdin(c, b""), 2);
}

/// The verifier's output is what the verifier printed, never a file the agent left:
/// a read-only `.traj/verify.stdout` holding `1` used to stand for the reward of a
/// verifier that printed `0` (its redirect failed, and the file was read as it was),
/// and a FIFO there stalled the verifier into a `verifier_error`.
#[test]
fn an_agent_cannot_plant_the_verifiers_output() {
    let d = tmpdir();
    let plant = |cmd: &str| {
        json!([{"tool_calls": [{"name": "terminal", "arguments": {"command": cmd}}]},
               {"content": "wrong answer"}])
    };
    let s = Standin::json(json!({"rules": [
        {"match": "readonly", "turns": plant(
            "mkdir -p .traj && echo 1 > .traj/verify.stdout && chmod 444 .traj/verify.stdout")},
        {"match": "fifo", "turns": plant("mkdir -p .traj && mkfifo .traj/verify.stdout")},
    ]}));
    std::fs::write(
        d.path().join("tasks.jsonl"),
        "{\"prompt\": \"readonly\"}\n{\"prompt\": \"fifo\"}\n",
    )
    .unwrap();
    let mut c = standin_run(d.path(), &s.url(), "run");
    c.args([
        "--toolsets",
        "terminal",
        "-q",
        "--verifier",
        "echo 0",
        "--verifier-timeout",
        "20",
        "tasks.jsonl",
    ]);
    let o = run(c);
    let recs = records(&d.path().join("run"));
    let failures = std::fs::read_to_string(d.path().join("run/failures.jsonl")).unwrap_or_default();
    assert_code(&o, 0);
    assert_eq!(recs.len(), 2, "{failures}");
    for r in &recs {
        assert_eq!(r["reward"], json!(0), "{}", r["verification"]);
        assert_eq!(
            r["verification"]["exit_code"],
            json!(0),
            "{}",
            r["verification"]
        );
    }
}

/// A rollout cut short before it answered (`partial`: the reply cut by length, tool
/// calls that stayed invalid) has no final answer: the text that came with an earlier
/// tool call is not scored as one, so a built-in verifier gives it 0.
#[test]
fn a_partial_rollout_has_no_final_answer() {
    let d = tmpdir();
    let s = Standin::json(json!({"rules": [
        {"match": "lencut", "turns": [
            {"content": "The answer is 1", "tool_calls": [{"name": "terminal", "arguments": {"command": "echo"}}]},
            {"content": "The answer is 2 and more", "finish_reason": "length"}]},
        {"match": "badcalls", "turns": [
            {"content": "The answer is 1", "tool_calls": [{"name": "terminal", "arguments": "{bad"}]},
            {"content": "The answer is 1", "tool_calls": [{"name": "terminal", "arguments": "{bad"}]}]},
        {"match": "fine", "turns": [{"content": "The answer is 1"}]},
    ]}));
    let rows: String = ["lencut", "badcalls", "fine"]
        .iter()
        .map(|p| format!("{}\n", json!({"prompt": p, "answer": "the answer is 1"})))
        .collect();
    std::fs::write(d.path().join("tasks.jsonl"), rows).unwrap();
    let mut c = standin_run(d.path(), &s.url(), "run");
    c.args([
        "--toolsets",
        "terminal",
        "-q",
        "--verifier",
        "match:answer",
        "tasks.jsonl",
    ]);
    assert_code(&run(c), 0);
    let mut got: Vec<(String, bool, Value)> = records(&d.path().join("run"))
        .iter()
        .map(|r| {
            (
                r["prompt"].as_str().unwrap().to_owned(),
                r["partial"].as_bool().unwrap(),
                r["reward"].clone(),
            )
        })
        .collect();
    got.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        got,
        [
            ("badcalls".into(), true, json!(0)),
            ("fine".into(), false, json!(1)),
            ("lencut".into(), true, json!(0)),
        ]
    );
}

/// A row a built-in verifier can never score (no FIELD, a FIELD with no number) and a
/// row whose `cwd` no sandbox takes are the row's fault: `bad_task`, not retried, before
/// any model call is paid for (they used to run the agent, then fail as retryable).
#[test]
fn row_defects_are_bad_tasks_before_any_model_call() {
    let d = tmpdir();
    let s = Standin::json(json!({"default": {"content": "The answer is 4."}}));
    let rows = [
        json!({"prompt": "no field"}),
        json!({"prompt": "no number", "answer": "none"}),
        json!({"prompt": "fine", "answer": "4"}),
    ];
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(d.path().join("tasks.jsonl"), text).unwrap();
    let mut c = standin_run(d.path(), &s.url(), "run");
    c.args([
        "--toolsets",
        "",
        "-q",
        "--verifier",
        "number:answer",
        "tasks.jsonl",
    ]);
    let o = run(c);
    assert_code(&o, 1);
    assert_eq!(
        s.count(),
        1,
        "one model call, for the row that can be scored"
    );
    let f = read_jsonl(&d.path().join("run/failures.jsonl"));
    assert_eq!(f.len(), 2);
    assert!(
        f.iter()
            .all(|f| f["class"] == "bad_task" && f["retryable"] == false),
        "{f:?}"
    );
    // A `cwd` outside the workspace, or through `..`.
    let rows = [
        json!({"prompt": "c1", "cwd": "../up"}),
        json!({"prompt": "c2", "cwd": "/etc"}),
    ];
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(d.path().join("cwd.jsonl"), text).unwrap();
    let mut c = standin_run(d.path(), &s.url(), "run2");
    c.args(["--toolsets", "file", "-q", "cwd.jsonl"]);
    let o = run(c);
    assert_code(&o, 1);
    let f = read_jsonl(&d.path().join("run2/failures.jsonl"));
    assert_eq!(f.len(), 2, "{f:?}");
    assert!(
        f.iter()
            .all(|f| f["class"] == "bad_task" && f["retryable"] == false),
        "{f:?}"
    );
}

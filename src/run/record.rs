//! The schemas of what traj-run writes: a record (`batch_N.jsonl`), a failure
//! (`failures.jsonl`), the checkpoint and the statistics, as serde structs whose field
//! order is the byte order of the files (the reference's keys first), and the one
//! [`FailureClass`] a failure is filed under.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::llm::ErrorClass;

/// Why a prompt has a failure line instead of a record: the endpoint's answer (one
/// [`ErrorClass`], after the client's retries) or a reason of the run's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FailureClass {
    /// The model request failed; the class is the client's.
    Request(ErrorClass),
    /// The prompt ran past `--prompt-timeout`.
    PromptTimeout,
    /// The first reply was cut by the token limit.
    Length,
    /// The tools of the task could not be made (sandbox, image).
    ToolHost,
    /// The task row cannot run (bad `toolsets`, unknown toolset).
    BadTask,
    /// The rollout's verifier crashed, timed out or printed no reward (run twice).
    VerifierError,
}

impl FailureClass {
    /// The stable name used in files.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::Request(c) => c.as_str(),
            FailureClass::PromptTimeout => "prompt_timeout",
            FailureClass::Length => "length",
            FailureClass::ToolHost => "tool_host",
            FailureClass::BadTask => "bad_task",
            FailureClass::VerifierError => "verifier_error",
        }
    }
}

impl From<ErrorClass> for FailureClass {
    fn from(c: ErrorClass) -> FailureClass {
        FailureClass::Request(c)
    }
}

impl Serialize for FailureClass {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl std::fmt::Display for FailureClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What `statistics.json` says about the system prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SystemPromptUsed {
    /// `default`, `text`, `file` or `none`.
    pub source: &'static str,
    /// The file, for `file`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The text sent (the ephemeral system prompt is never included).
    pub text: Option<String>,
}

/// The sandbox of a run: the backend that runs tool commands, and the warning when
/// `--sandbox auto` had to fall back to an unisolated one.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SandboxUsed {
    pub backend: String,
    /// Each worker kept its sandbox between tasks (`--no-sandbox-reuse` not given;
    /// docs/tools.md). Docker tasks always get a container of their own.
    pub reused: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

impl SandboxUsed {
    pub fn of(s: &crate::toolbox::SandboxConfig) -> SandboxUsed {
        SandboxUsed {
            backend: format!("{:?}", s.backend).to_lowercase(),
            reused: s.pod_exe.is_some(),
            warning: s.auto_fallback.clone(),
        }
    }
}

/// Wall-clock facts of one prompt's run.
#[derive(Debug, Clone, Serialize)]
pub struct Timings {
    pub started_at: String,
    pub finished_at: String,
    pub duration_ms: u64,
    pub llm_ms: u64,
    pub tool_ms: u64,
}

/// The reference's `metadata` object.
#[derive(Debug, Clone, Serialize)]
pub struct Metadata {
    pub batch_num: u64,
    pub timestamp: String,
    pub model: String,
}

/// The record member that keeps the task row's fields named as the record's own.
pub const TASK_FIELDS: &str = "task_fields";

/// One line of `batch_N.jsonl`: a prompt run to an end.
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    pub prompt_index: u64,
    /// The unit of work: `ROW:COPY:ROLLOUT` ([`crate::run::rundir::task_uid`]).
    pub task_uid: String,
    pub prompt_hash: String,
    /// The task's content key: what `--resume` matches on.
    pub task_key: String,
    pub prompt: String,
    pub messages: Vec<Value>,
    pub tools: Vec<Value>,
    pub toolsets: Vec<String>,
    pub model: String,
    pub completed: bool,
    pub partial: bool,
    pub api_calls: u32,
    pub stop_reason: &'static str,
    pub usage: Value,
    pub calls: Vec<Value>,
    pub timings: Timings,
    pub metadata: Metadata,
    pub attempt: u32,
    /// Which of the task's `--rollouts` this is (0-based: the last part of `task_uid`).
    pub rollout_index: u32,
    /// The sampling parameters sent with every request (`null`: not sent).
    pub sampling: Sampling,
    /// The verifier's reward (only with `--verifier`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reward: Option<Value>,
    /// How the verifier ran (only with `--verifier`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verification: Option<Value>,
    /// The task row's other fields, in row order (see [`Record::extra_from_row`]).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Record {
    /// The fields of the record's own schema.
    pub const FIELDS: [&'static str; 20] = [
        "prompt_index",
        "task_uid",
        "prompt_hash",
        "task_key",
        "prompt",
        "messages",
        "tools",
        "toolsets",
        "model",
        "completed",
        "partial",
        "api_calls",
        "stop_reason",
        "usage",
        "calls",
        "timings",
        "metadata",
        "attempt",
        "rollout_index",
        "sampling",
    ];

    /// The task row's fields the run reads as its input: the record's own fields of the
    /// same name hold them.
    const READ: [&'static str; 3] = ["prompt", "prompt_index", "toolsets"];

    /// The row's fields carried over, in row order: those the record does not set
    /// itself as they are, and (under [`TASK_FIELDS`]) those it does set, which it
    /// would otherwise replace: a row's own `model`, `usage`, `reward` (a record's
    /// `reward` is only ever its verifier's, never a score it did not give) and the
    /// like. The fields the run reads ([`Record::READ`]) are the record's.
    pub fn extra_from_row(row: Map<String, Value>) -> Map<String, Value> {
        let mut extra = Map::new();
        let mut clashing = Map::new();
        for (k, v) in row {
            let own = Self::FIELDS.contains(&k.as_str())
                || matches!(k.as_str(), "reward" | "verification" | TASK_FIELDS);
            if !own {
                extra.insert(k, v);
            } else if !Self::READ.contains(&k.as_str()) {
                clashing.insert(k, v);
            }
        }
        if !clashing.is_empty() {
            extra.insert(TASK_FIELDS.to_string(), Value::Object(clashing));
        }
        extra
    }
}

/// The `sampling` object of a record: what each request carried.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Sampling {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub seed: Option<u64>,
}

/// One line of `failures.jsonl`.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    pub prompt_index: u64,
    pub task_uid: String,
    pub prompt_hash: String,
    pub task_key: String,
    pub class: FailureClass,
    pub retryable: bool,
    /// This prompt's run number.
    pub attempts: u32,
    pub status: Option<u16>,
    pub error: String,
    pub http_attempts: u32,
    pub api_calls: u32,
    pub batch_num: u64,
    pub model: String,
    pub at: String,
    /// What was spent before the failure (zero when no model call was made).
    pub usage: Value,
}

/// Counts of one batch in `checkpoint.json`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct BatchStat {
    pub processed: u64,
    pub skipped: u64,
    /// Discard rows in the batch file (the newest reference's no-reasoning drops;
    /// traj itself keeps every record).
    pub discarded_no_reasoning: u64,
    pub failed: u64,
}

/// `checkpoint.json`: the reference's fields, plus `failed_prompts`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Checkpoint {
    pub run_name: String,
    pub completed_prompts: BTreeSet<u64>,
    pub failed_prompts: BTreeSet<u64>,
    pub batch_stats: BTreeMap<u64, BatchStat>,
    /// Set when written.
    pub last_updated: String,
}

/// `reasoning_statistics` of `statistics.json`.
#[derive(Debug, Clone, Serialize)]
pub struct ReasoningStatistics {
    pub total_assistant_turns: u64,
    pub turns_with_reasoning: u64,
    pub turns_without_reasoning: u64,
}

/// `usage` of `statistics.json`.
#[derive(Debug, Clone, Serialize)]
pub struct UsageTotals {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    pub cost: f64,
}

/// `this_run` of `statistics.json`: what the last process did.
#[derive(Debug, Clone, Serialize)]
pub struct ThisRun {
    pub started_at: String,
    pub prompts_scheduled: usize,
    pub records: u64,
    pub failures: u64,
    pub retries: u64,
    pub spent: f64,
    pub stopped: Option<String>,
    /// CPU seconds (user + system, every thread) of this traj-run process itself, its
    /// tools' processes not counted.
    pub cpu_seconds: f64,
}

/// `statistics.json`: the reference's keys first, then traj's totals over the whole run
/// directory and the last process's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Statistics {
    pub run_name: String,
    pub distribution: String,
    /// Tasks (distinct `prompt_index`) of the directory and of this run's input.
    pub total_prompts: usize,
    pub total_batches: usize,
    pub batch_size: usize,
    pub model: String,
    pub completed_at: String,
    pub duration_seconds: f64,
    pub tool_statistics: Value,
    pub reasoning_statistics: ReasoningStatistics,
    pub discarded_no_reasoning: u64,
    pub records: u64,
    pub completed: u64,
    pub partial: u64,
    /// Records per `stop_reason`, over every batch file of the run directory.
    pub stop_reasons: BTreeMap<String, u64>,
    /// Tasks with a record (or a discard row), and tasks failed without one: the
    /// checkpoint's `completed_prompts` and `failed_prompts`.
    pub prompts_done: usize,
    pub prompts_failed: usize,
    pub failures: u64,
    pub failure_classes: BTreeMap<String, u64>,
    pub api_calls: u64,
    pub usage: UsageTotals,
    pub this_run: ThisRun,
    /// Which system prompt the last process sent.
    pub system_prompt: SystemPromptUsed,
    /// Where its tools ran (and the warning of an unisolated fallback).
    pub sandbox: SandboxUsed,
    /// `--rollouts` of the last process.
    pub rollouts: u32,
    /// The reward figures of the records that have a reward (absent when none has):
    /// over the run and per task (see [`crate::format::groups`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rewards: Option<RewardStatistics>,
}

pub use crate::format::groups::RewardStatistics;

/// `value` as one JSONL line.
pub fn to_line<T: Serialize>(value: &T) -> Vec<u8> {
    let mut line = serde_json::to_vec(value).unwrap_or_default();
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn failure_class_names_match_serde_and_the_client() {
        for c in ErrorClass::ALL {
            let f = FailureClass::from(c);
            assert_eq!(f.as_str(), c.as_str());
            assert_eq!(serde_json::to_value(f).unwrap(), json!(c.as_str()));
        }
        for f in [
            FailureClass::PromptTimeout,
            FailureClass::Length,
            FailureClass::ToolHost,
            FailureClass::BadTask,
            FailureClass::VerifierError,
        ] {
            assert_eq!(serde_json::to_value(f).unwrap(), json!(f.as_str()));
        }
    }

    #[test]
    fn failure_bytes_are_the_old_json_map() {
        let mut f = Failure {
            prompt_index: 3,
            task_uid: "u:0:0".into(),
            prompt_hash: "abc".into(),
            task_key: "k".into(),
            class: FailureClass::ToolHost,
            retryable: true,
            attempts: 2,
            status: None,
            error: "no".into(),
            http_attempts: 0,
            api_calls: 0,
            batch_num: 1,
            model: "m".into(),
            at: "T".into(),
            usage: json!({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}),
        };
        let old = json!({"prompt_index": 3, "task_uid": "u:0:0", "prompt_hash": "abc", "task_key": "k", "class": "tool_host",
            "retryable": true, "attempts": 2, "status": null, "error": "no",
            "http_attempts": 0, "api_calls": 0, "batch_num": 1, "model": "m", "at": "T",
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}});
        assert_eq!(
            to_line(&f),
            [serde_json::to_vec(&old).unwrap(), b"\n".to_vec()].concat()
        );
        f.usage = json!({"total_tokens": 1});
        let mut old = old;
        old["usage"] = json!({"total_tokens": 1});
        assert_eq!(
            serde_json::to_vec(&f).unwrap(),
            serde_json::to_vec(&old).unwrap()
        );
    }

    #[test]
    fn record_keeps_row_fields_after_its_own_and_never_overrides_them() {
        let row = json!({"prompt": "p", "id": 7, "toolsets": ["x"], "zeta": true, "attempt": 9,
                         "reward": 3, "model": "orig"});
        let Value::Object(row) = row else { panic!() };
        let r = Record {
            prompt_index: 0,
            task_uid: "u:0:0".into(),
            prompt_hash: "h".into(),
            task_key: "k".into(),
            prompt: "p".into(),
            messages: vec![],
            tools: vec![],
            toolsets: vec!["web".into()],
            model: "m".into(),
            completed: true,
            partial: false,
            api_calls: 1,
            stop_reason: "answer",
            usage: json!({}),
            calls: vec![],
            timings: Timings {
                started_at: "a".into(),
                finished_at: "b".into(),
                duration_ms: 1,
                llm_ms: 1,
                tool_ms: 0,
            },
            metadata: Metadata {
                batch_num: 0,
                timestamp: "b".into(),
                model: "m".into(),
            },
            attempt: 1,
            rollout_index: 0,
            sampling: Sampling::default(),
            reward: None,
            verification: None,
            extra: Record::extra_from_row(row),
        };
        let v = serde_json::to_value(&r).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        let mut want: Vec<&str> = Record::FIELDS.to_vec();
        want.extend(["id", "zeta", "task_fields"]);
        assert_eq!(keys, want);
        assert_eq!(v["toolsets"], json!(["web"]));
        assert_eq!(v["attempt"], 1);
        // The row's fields named as the record's own are kept, not replaced; its
        // `reward` is no score of this run's.
        assert_eq!(
            v["task_fields"],
            json!({"attempt": 9, "reward": 3, "model": "orig"})
        );
        assert!(v.get("reward").is_none());
    }

    #[test]
    fn checkpoint_and_statistics_key_order() {
        let mut c = Checkpoint {
            run_name: "r".into(),
            ..Checkpoint::default()
        };
        c.batch_stats.insert(
            2,
            BatchStat {
                processed: 1,
                ..BatchStat::default()
            },
        );
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            r#"{"run_name":"r","completed_prompts":[],"failed_prompts":[],"batch_stats":{"2":{"processed":1,"skipped":0,"discarded_no_reasoning":0,"failed":0}},"last_updated":""}"#
        );
    }
}

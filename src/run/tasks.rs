//! The task reader of traj-run: the input lines that become prompts to run, checked
//! (a non-empty `prompt` string, an optional non-negative `prompt_index`), with the
//! error policy, `--rejects`, `--max-samples` and `--shard` applied.

use std::path::PathBuf;

use anyhow::Result;
use serde_json::Value;

use super::rundir;
use crate::io::{OnError, Records, Rejects, Shard, Tally, Verdict};

const NAME: &str = "traj-run"; // the stage named in rejects

/// Where the task rows come from and what to do with bad ones.
#[derive(Debug, Clone, Default)]
pub struct TaskSource {
    /// Files or directories; empty or `-` reads stdin.
    pub inputs: Vec<String>,
    pub rejects: Option<PathBuf>,
    pub on_error: OnError,
    pub shard: Option<Shard>,
    /// Use only the first N valid rows.
    pub max_samples: Option<usize>,
}

/// A valid task row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// `prompt_index`, or the row's number among the valid rows.
    pub index: u64,
    /// [`rundir::prompt_hash`] of the prompt.
    pub hash: String,
    /// [`rundir::task_key`] of the row.
    pub key: String,
    /// The task row, as read.
    pub line: Box<str>,
}

/// Why a line is not a task row.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadTask {
    #[error("{0}")]
    Json(String),
    #[error("prompt_index is not a non-negative integer")]
    Index,
    #[error("empty prompt")]
    EmptyPrompt,
    #[error("prompt is {0}, expected a string")]
    PromptType(&'static str),
    #[error("no prompt field")]
    NoPrompt,
}

/// Read and check the task rows (strict unless `on_error` is skip). Returns the rows
/// and the number of bad rows lost (skipped without `--rejects`).
pub fn read_tasks(src: &TaskSource) -> Result<(Vec<Row>, u64)> {
    let sources = crate::io::sources_from_args(&src.inputs)?;
    let mut rejects = Rejects::open(NAME, src.rejects.as_deref())?;
    // No selection in the reader: valid rows outside this shard still count for the
    // default prompt_index, so shards keep global indices.
    let mut records = Records::new(sources, None);
    let mut rows = Vec::new();
    let mut valid = 0u64;
    let summary = {
        let mut tally = Tally::new(src.on_error, false, &mut rejects);
        while let Some(rec) = records.next_record()? {
            if src.max_samples.is_some_and(|m| valid >= m as u64) {
                break;
            }
            let in_shard = src.shard.is_none_or(|sh| sh.holds(rec.index));
            let verdict = match check(rec.bytes, valid) {
                Ok((index, hash, key)) => {
                    valid += 1;
                    if in_shard {
                        rows.push(Row {
                            index,
                            hash,
                            key,
                            line: String::from_utf8_lossy(rec.bytes).into(),
                        });
                    }
                    Verdict::Written
                }
                Err(reason) => Verdict::Bad(reason.to_string()),
            };
            if in_shard {
                tally.account(&rec, verdict)?;
            }
        }
        tally.summary
    };
    rejects.finish()?;
    if summary.bad > 0 {
        super::note(&format!("{} bad task rows skipped", summary.bad));
    }
    Ok((rows, summary.lost))
}

/// The `prompt_index` (`valid` when absent), prompt hash and task key of a task row,
/// or why the line is not one.
fn check(line: &[u8], valid: u64) -> Result<(u64, String, String), BadTask> {
    let row = crate::io::parse_object(line).map_err(BadTask::Json)?;
    let prompt = match row.get("prompt") {
        Some(Value::String(p)) if !p.trim().is_empty() => p,
        Some(Value::String(_)) => return Err(BadTask::EmptyPrompt),
        Some(other) => return Err(BadTask::PromptType(crate::io::json_kind(other))),
        None => return Err(BadTask::NoPrompt),
    };
    let index = match row.get("prompt_index") {
        None => valid,
        Some(v) => v.as_u64().ok_or(BadTask::Index)?,
    };
    Ok((index, rundir::prompt_hash(prompt), rundir::task_key(&row)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str, src: TaskSource) -> Result<(Vec<Row>, u64)> {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.jsonl");
        std::fs::write(&p, text).unwrap();
        read_tasks(&TaskSource {
            inputs: vec![p.to_string_lossy().into_owned()],
            ..src
        })
    }

    #[test]
    fn indices_shards_and_bad_rows() {
        let text = "{\"prompt\": \"a\"}\n\n{\"prompt\": \"b\", \"prompt_index\": 9}\n{\"prompt\": 3}\n{\"prompt\": \"c\"}\n";
        let e = read(text, TaskSource::default()).unwrap_err().to_string();
        assert!(
            e.ends_with(":4: prompt is a number, expected a string"),
            "{e}"
        );
        let skip = TaskSource {
            on_error: OnError::Skip,
            ..TaskSource::default()
        };
        let (rows, lost) = read(text, skip.clone()).unwrap();
        assert_eq!(lost, 1);
        let idx: Vec<u64> = rows.iter().map(|r| r.index).collect();
        assert_eq!(idx, [0, 9, 2]);
        assert_eq!(rows[0].hash, rundir::prompt_hash("a"));
        let (rows, _) = read(
            text,
            TaskSource {
                shard: Some(Shard { index: 1, count: 2 }),
                ..skip.clone()
            },
        )
        .unwrap();
        // Non-blank lines 1 and 3 (0-based), with global indices.
        let idx: Vec<u64> = rows.iter().map(|r| r.index).collect();
        assert_eq!(idx, [9, 2]);
        let (rows, _) = read(
            text,
            TaskSource {
                max_samples: Some(2),
                ..skip
            },
        )
        .unwrap();
        assert_eq!(rows.len(), 2);
    }
}

//! The task reader of traj-run: the input lines that become prompts to run, checked
//! (a non-empty `prompt` string, an optional non-negative `prompt_index`), with the
//! error policy, `--rejects`, `--max-samples` and `--shard` applied.

use std::path::PathBuf;

use anyhow::{Result, bail};
use serde_json::Value;

use super::rundir;
use crate::io::{LineReader, OnError, Rejects, Shard};

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
    let mut reader = LineReader::new(sources);
    let mut buf = Vec::new();
    let mut rows = Vec::new();
    let mut bad = 0u64;
    // Valid rows seen (the default prompt_index) and non-blank lines seen (what
    // --shard counts), both over the whole input, so shards keep global indices.
    let mut valid = 0u64;
    let mut nonblank = 0u64;
    while let Some((source, lineno)) = reader.read_into(&mut buf)? {
        if crate::io::is_blank(&buf) {
            continue;
        }
        nonblank += 1;
        if src.max_samples.is_some_and(|m| valid >= m as u64) {
            break;
        }
        let in_shard = src.shard.is_none_or(|sh| sh.holds(nonblank - 1));
        let problem = match crate::io::parse_object(&buf) {
            Err(e) => Some(BadTask::Json(e)),
            Ok(row) => match row.get("prompt") {
                Some(Value::String(p)) if !p.trim().is_empty() => {
                    let index = match row.get("prompt_index") {
                        None => Ok(valid),
                        Some(v) => v.as_u64().ok_or(BadTask::Index),
                    };
                    match index {
                        Ok(index) => {
                            valid += 1;
                            if in_shard {
                                let text = String::from_utf8_lossy(&buf).into_owned();
                                rows.push(Row {
                                    index,
                                    hash: rundir::prompt_hash(p),
                                    key: rundir::task_key(&row),
                                    line: text.into_boxed_str(),
                                });
                            }
                            None
                        }
                        Err(e) => Some(e),
                    }
                }
                Some(Value::String(_)) => Some(BadTask::EmptyPrompt),
                Some(other) => Some(BadTask::PromptType(crate::io::json_kind(other))),
                None => Some(BadTask::NoPrompt),
            },
        };
        if let Some(reason) = problem.filter(|_| in_shard) {
            if src.on_error == OnError::Fail {
                bail!("{source}:{lineno}: {reason}");
            }
            bad += 1;
            rejects.write(&source, lineno, &[reason.to_string()], &buf)?;
        }
    }
    let lost = if rejects.is_kept() { 0 } else { bad };
    rejects.finish()?;
    if bad > 0 {
        super::note(&format!("{bad} bad task rows skipped"));
    }
    Ok((rows, lost))
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

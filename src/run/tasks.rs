//! The task reader of traj-run: the input lines that become prompts to run, checked
//! (a non-empty `prompt` string, an optional non-negative `prompt_index` used by no
//! other row), with the error policy, `--rejects`, `--max-samples` and `--shard`
//! applied, and each row's identity: its content keys and its copy number among the
//! rows of identical content (see [`rundir::task_uid`]). A row's line goes to the
//! run's [`spool`](super::spool) and the row keeps where it lies.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use serde_json::Value;

use super::rundir::{self, Hex16};
use super::spool::{Spool, SpoolWriter, Spooled};
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
    /// Rollouts of every row (`--rollouts`; 0 is taken as 1).
    pub rollouts: u32,
}

/// A valid task row. Its identity is held as numbers, its place as a shared name and a
/// line number, and its line in the spool, so a row costs about a hundred bytes of
/// memory, whatever its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The row's own `prompt_index`, else its number among the non-blank input lines (the plan
    /// may give it another one: see [`super::plan`]).
    pub index: u64,
    /// `index` is the row's own `prompt_index`.
    pub explicit: bool,
    pub ids: Ids,
    /// Where the row was read.
    pub place: Place,
    /// The task row, as read: where it lies in [`Tasks::spool`] (every rollout of a
    /// row shares it).
    pub line: Spooled,
}

/// What identifies a task row and its rollout (see [`rundir`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ids {
    /// [`rundir::prompt_hash`] of the prompt.
    pub hash: Hex16,
    /// [`rundir::task_key`] of the row.
    pub key: Hex16,
    /// [`rundir::row_key`] of the row: its whole content.
    pub content: Hex16,
    /// [`rundir::prompt_hash`] of the prompt, white space trimmed: what
    /// [`rundir::foreign_key`] makes of it.
    pub text: Hex16,
    /// The row's copy number among the rows of identical content.
    pub copy: u32,
    /// The rollout (`0..--rollouts`): each row is read as one `Row` per rollout.
    pub rollout: u32,
}

impl Ids {
    /// [`rundir::task_uid`] of the row: its whole content, its copy number and the
    /// rollout.
    pub fn uid(&self) -> String {
        rundir::task_uid(self.content, self.copy, self.rollout)
    }

    /// The task that the row's rollouts share: `ROW:COPY`, what
    /// [`crate::format::groups::task_of_uid`] makes of [`Ids::uid`].
    pub fn task(&self) -> String {
        format!("{}:{}", self.content, self.copy)
    }
}

impl Row {
    /// The keys the row may find its record under, best first: its `task_uid`, its
    /// `task_key`, `index:hash`, and the reference's key, its prompt text.
    pub fn keys(&self) -> [rundir::Key; 4] {
        [
            self.ids.uid(),
            self.ids.key.to_string(),
            rundir::legacy_key(self.index, &self.ids.hash.to_string()),
            rundir::text_key(self.ids.text),
        ]
    }
}

/// Why a row's own `prompt_index` cannot be kept: a record of another task at `held`.
pub fn in_use_reason(index: u64, held: &str) -> String {
    format!(
        "prompt_index {index} already belongs to another task in the run directory \
         ({held}); give the row another prompt_index, or remove it to keep that record"
    )
}

/// The record of another task in the run directory that holds row `r`'s own
/// `prompt_index` (`None` when it is free, or the record is the row's own): the row is
/// refused, as it is read ([`read_tasks`]: a bad row under the `--on-error` policy)
/// and by the plan.
pub fn index_held<'s>(r: &Row, scan: &'s rundir::Scan) -> Option<&'s rundir::Claim> {
    scan.claims.get(&r.index).filter(|c| {
        r.explicit
            && c.record
            && !r.keys().contains(&c.key)
            && crate::format::groups::task_of_uid(&c.key) != r.ids.task()
    })
}

/// `file:line`, where a row was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub source: Arc<str>,
    pub line: u64,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.source, self.line)
    }
}

/// The valid rows of this shard, and what the rows of every shard claim.
#[derive(Debug)]
pub struct Tasks {
    pub rows: Vec<Row>,
    /// The lines of `rows`.
    pub spool: Spool,
    /// The explicit `prompt_index` of every valid row (all shards).
    pub explicit: std::collections::BTreeSet<u64>,
    /// Non-blank lines read (all shards): positions `0..positions` are the default
    /// indices.
    pub positions: u64,
    /// Bad rows skipped without `--rejects`.
    pub lost: u64,
    /// Bad rows skipped (`--on-error skip`), kept in the rejects file or not.
    pub skipped: u64,
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
    /// Two rows claim one `prompt_index` (a row's own, or the position of a row
    /// without one): the message names the first.
    #[error("{0}")]
    IndexTaken(String),
}

/// Read and check the task rows (strict unless `on_error` is skip): the rows of this
/// shard, the indices every row claims, and the bad rows lost (skipped without
/// `--rejects`). Two rows with the same `prompt_index` (a row's own, or the position
/// of a row without one) are an error at the second, naming the first; so is a row's
/// own `prompt_index` that a record of another task in the run directory holds
/// ([`index_held`], `scan`). The rows' lines are spooled in `spool_dir`.
pub fn read_tasks(src: &TaskSource, spool_dir: &Path, scan: &rundir::Scan) -> Result<Tasks> {
    let sources = crate::io::sources_from_args(&src.inputs)?;
    let mut rejects = Rejects::open(NAME, src.rejects.as_deref())?;
    // No selection in the reader: valid rows outside this shard still count for the
    // default prompt_index, so shards keep global indices.
    let mut records = Records::new(sources, None);
    let spool_failed = || format!("cannot write the task spool in {}", spool_dir.display());
    let mut spool = SpoolWriter::new(spool_dir).with_context(spool_failed)?;
    let mut rows = Vec::new();
    let mut explicit = std::collections::BTreeSet::new();
    let mut valid = 0u64;
    let mut positions = 0u64;
    // Where each explicit prompt_index was seen, where each row without one stood (its
    // position is its default index); copies of each row content.
    let mut first_at: HashMap<u64, Place> = HashMap::new();
    let mut position_at: HashMap<u64, Place> = HashMap::new();
    let mut copies: HashMap<Hex16, u32> = HashMap::new();
    let summary = {
        let mut tally = Tally::new(src.on_error, false, &mut rejects);
        while let Some(rec) = records.next_record()? {
            if src.max_samples.is_some_and(|m| valid >= m as u64) {
                break;
            }
            let in_shard = src.shard.is_none_or(|sh| sh.holds(rec.index));
            positions = rec.index + 1;
            let place = Place {
                source: rec.source.clone(),
                line: rec.lineno,
            };
            let checked = check(rec.bytes).and_then(|c| {
                // The index this row claims: its own, else its position among the
                // non-blank lines (a bad line skipped keeps its place, as in
                // traj-sample-tools: the same rows get the same indices and toolsets).
                let i = c.index.unwrap_or(rec.index);
                let taken = match c.index {
                    Some(_) => first_at
                        .get(&i)
                        .map(|at| format!("prompt_index {i} is also the prompt_index of {at}"))
                        .or_else(|| {
                            position_at.get(&i).map(|at| {
                                format!(
                                    "prompt_index {i} is also the position of {at} \
                                     (a row without prompt_index)"
                                )
                            })
                        }),
                    None => first_at.get(&i).map(|at| {
                        format!(
                            "this row's position (prompt_index {i} of a row without one) \
                             is the prompt_index of {at}"
                        )
                    }),
                };
                if let Some(why) = taken {
                    return Err(BadTask::IndexTaken(why));
                }
                match c.index {
                    Some(_) => first_at.insert(i, place.clone()),
                    None => position_at.insert(i, place.clone()),
                };
                Ok(c)
            });
            // The row as it would run (its first rollout), copies numbered as they
            // would be if it is taken.
            let checked = checked.and_then(|c| {
                let row = Row {
                    index: c.index.unwrap_or(rec.index),
                    explicit: c.index.is_some(),
                    ids: Ids {
                        hash: c.hash,
                        key: c.key,
                        content: c.content,
                        text: c.text,
                        copy: copies.get(&c.content).copied().unwrap_or(0),
                        rollout: 0,
                    },
                    place: place.clone(),
                    line: Spooled::default(),
                };
                match index_held(&row, scan) {
                    Some(c) if in_shard => {
                        Err(BadTask::IndexTaken(in_use_reason(row.index, &c.place)))
                    }
                    _ => Ok((c, row)),
                }
            });
            let verdict = match checked {
                Ok((c, row)) => {
                    *copies.entry(c.content).or_default() += 1;
                    if let Some(i) = c.index {
                        explicit.insert(i);
                    }
                    if in_shard {
                        let line = spool.push(rec.bytes).with_context(spool_failed)?;
                        for rollout in 0..src.rollouts.max(1) {
                            let mut r = row.clone();
                            r.ids.rollout = rollout;
                            r.line = line;
                            rows.push(r);
                        }
                    }
                    valid += 1;
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
    Ok(Tasks {
        rows,
        spool: spool.finish().with_context(spool_failed)?,
        explicit,
        positions,
        lost: summary.lost,
        skipped: summary.bad,
    })
}

/// What [`check`] reads of a task row.
struct Checked {
    /// Its own `prompt_index`.
    index: Option<u64>,
    hash: Hex16,
    key: Hex16,
    /// [`rundir::row_key`]: the whole row's content.
    content: Hex16,
    /// The prompt's hash, white space trimmed.
    text: Hex16,
}

/// The `prompt_index`, prompt hash and keys of a task row, or why the line is not one.
fn check(line: &[u8]) -> Result<Checked, BadTask> {
    let row = crate::io::parse_object(line).map_err(BadTask::Json)?;
    let prompt = match row.get("prompt") {
        Some(Value::String(p)) if !p.trim().is_empty() => p,
        Some(Value::String(_)) => return Err(BadTask::EmptyPrompt),
        Some(other) => return Err(BadTask::PromptType(crate::io::json_kind(other))),
        None => return Err(BadTask::NoPrompt),
    };
    let index = match row.get("prompt_index") {
        None => None,
        Some(v) => Some(v.as_u64().ok_or(BadTask::Index)?),
    };
    Ok(Checked {
        index,
        hash: rundir::prompt_hash(prompt),
        text: rundir::prompt_hash(prompt.trim()),
        key: rundir::task_key(&row),
        content: rundir::row_key(&row),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::groups::task_of_uid;

    fn read(text: &str, src: TaskSource) -> Result<Tasks> {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.jsonl");
        std::fs::write(&p, text).unwrap();
        read_tasks(
            &TaskSource {
                inputs: vec![p.to_string_lossy().into_owned()],
                ..src
            },
            d.path(),
            &rundir::Scan::default(),
        )
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
        let t = read(text, skip.clone()).unwrap();
        assert_eq!((t.lost, t.positions), (1, 4));
        assert_eq!(t.explicit.iter().copied().collect::<Vec<_>>(), [9]);
        let idx: Vec<(u64, bool)> = t.rows.iter().map(|r| (r.index, r.explicit)).collect();
        // `c` keeps its place after the bad line, as traj-sample-tools gives it.
        assert_eq!(idx, [(0, false), (9, true), (3, false)]);
        assert_eq!(t.rows[0].ids.hash, rundir::prompt_hash("a"));
        assert_eq!(t.rows[0].ids.text, rundir::prompt_hash("a"));
        let place = t.rows[1].place.to_string();
        assert!(place.ends_with("t.jsonl:3"), "{place}");
        // Each row's line comes back from the spool as it was read.
        let line = t.spool.read(t.rows[1].line).unwrap();
        assert_eq!(line, b"{\"prompt\": \"b\", \"prompt_index\": 9}");
        // Rollouts of a row share its spooled line.
        let t = read(
            text,
            TaskSource {
                rollouts: 3,
                ..skip.clone()
            },
        )
        .unwrap();
        assert_eq!(t.rows.len(), 9);
        assert!(t.rows[3..6].iter().all(|r| r.line == t.rows[3].line));
        assert_eq!(
            t.spool.read(t.rows[8].line).unwrap(),
            b"{\"prompt\": \"c\"}"
        );
        let t = read(
            text,
            TaskSource {
                shard: Some(Shard { index: 1, count: 2 }),
                ..skip.clone()
            },
        )
        .unwrap();
        // Non-blank lines 1 and 3 (0-based), with global indices.
        let idx: Vec<u64> = t.rows.iter().map(|r| r.index).collect();
        assert_eq!(idx, [9, 3]);
        assert_eq!(t.positions, 4);
        let t = read(
            text,
            TaskSource {
                max_samples: Some(2),
                ..skip
            },
        )
        .unwrap();
        assert_eq!(t.rows.len(), 2);
    }

    #[test]
    fn identical_rows_are_copies_and_claimed_indices_collide() {
        let t = read(
            "{\"prompt\": \"a\"}\n{\"prompt\": \"b\"}\n{\"prompt\": \"a\"}\n",
            TaskSource::default(),
        )
        .unwrap();
        let uids: Vec<String> = t.rows.iter().map(|r| r.ids.uid()).collect();
        assert!(
            uids[0].ends_with(":0:0") && uids[2].ends_with(":1:0"),
            "{uids:?}"
        );
        assert_eq!(uids[0][..16], uids[2][..16]);
        assert_ne!(uids[0][..16], uids[1][..16]);
        // The same task key (the prompt), another row key: the row's own fields count.
        assert_eq!(t.rows[0].ids.key, t.rows[2].ids.key);
        assert_eq!(t.rows[2].ids.task(), task_of_uid(&uids[2]));
        // Two rows with one explicit index: an error at the second naming the first.
        let e = read(
            "{\"prompt\": \"a\", \"prompt_index\": 7}\n{\"prompt\": \"b\", \"prompt_index\": 7}\n",
            TaskSource::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("t.jsonl:2: prompt_index 7 is also the prompt_index of ")
                && e.ends_with("t.jsonl:1"),
            "{e}"
        );
        // An explicit index that is a row's position, in either order.
        let e = read(
            "{\"prompt\": \"a\"}\n{\"prompt\": \"b\", \"prompt_index\": 0}\n",
            TaskSource::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("t.jsonl:2: prompt_index 0 is also the position of ")
                && e.contains("t.jsonl:1 (a row without prompt_index)"),
            "{e}"
        );
        let e = read(
            "{\"prompt\": \"a\", \"prompt_index\": 1}\n{\"prompt\": \"b\"}\n",
            TaskSource::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("t.jsonl:2: this row's position (prompt_index 1 of a row without one)")
                && e.ends_with("t.jsonl:1"),
            "{e}"
        );
        // A row's own index equal to its own position is no collision.
        let t = read(
            "{\"prompt\": \"a\"}\n{\"prompt\": \"b\", \"prompt_index\": 1}\n",
            TaskSource::default(),
        )
        .unwrap();
        assert_eq!(t.rows.len(), 2);
    }
}

//! The resume plan: which task rows run now, under which `prompt_index`, batch number
//! and attempt, given what the run directory already holds.
//!
//! A row is done when the run directory holds a record of its `task_uid` (or, for
//! lines written before there was one, of its `task_key`, its `index:hash` or, for the
//! reference's rows, its prompt text: each record counted once). Its `prompt_index` is
//! its own when the row has one, which no record of another task may hold; else the
//! index its earlier failures had; else its position among the non-blank input lines when no row,
//! record or failure holds that; else the next index past every index in use. So a
//! `prompt_index` names one task in a run directory, however the dataset was reordered
//! or edited between resumes.

use std::collections::{HashMap, HashSet};

use crate::format::groups::task_of_uid;

use thiserror::Error;

use super::rundir::{Scan, text_key};
use super::spool::{Spool, Spooled};
use super::tasks::{Ids, Tasks, index_held};

/// One prompt to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    pub index: u64,
    /// Its prompt hash, content key and unit of work ([`Ids::uid`]).
    pub ids: Ids,
    /// The task row, as read: where it lies in [`Plan::spool`].
    pub line: Spooled,
    pub batch: u64,
    /// This prompt's run number (1 + earlier failed runs).
    pub attempt: u32,
}

/// What runs now, and what was left out.
#[derive(Debug)]
pub struct Plan {
    pub tasks: Vec<Task>,
    /// The lines of the task rows.
    pub spool: Spool,
    /// Rows that already have a record.
    pub already_done: usize,
    /// Rows whose failures are final (never retried, or out of attempts).
    pub given_up: usize,
    /// Rows given an index other than their position (it was in use).
    pub renumbered: usize,
}

/// A row whose own `prompt_index` is held by a record of another task.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{place}: {}", super::tasks::in_use_reason(*index, held))]
pub struct IndexInUse {
    pub place: String,
    pub index: u64,
    pub held: String,
}

/// Which rows run now (see the module's text). New tasks fill batch files after the
/// existing ones, `batch_size` each.
pub fn plan(
    tasks: Tasks,
    scan: &Scan,
    max_attempts: u32,
    batch_size: usize,
) -> Result<Plan, IndexInUse> {
    let mut done = scan.done.clone();
    let mut p = Plan {
        tasks: Vec::with_capacity(tasks.rows.len()),
        spool: tasks.spool,
        already_done: 0,
        given_up: 0,
        renumbered: 0,
    };
    let first = scan.next_batch();
    let mut used: HashSet<u64> = tasks.explicit.iter().copied().collect();
    used.extend(scan.claims.keys().copied());
    let mut fresh = used
        .iter()
        .copied()
        .chain(tasks.positions.checked_sub(1))
        .max()
        .map_or(0, |m| m + 1);
    // The rollouts of one task share its prompt_index: the index a record or failure
    // of any of its rollouts holds, else the one given to its first rollout here.
    let mut task_index: HashMap<String, u64> = HashMap::new();
    let mut claims: Vec<(&u64, &super::rundir::Claim)> = scan.claims.iter().collect();
    claims.sort_by_key(|(i, c)| (!c.record, **i));
    for (i, c) in claims {
        task_index
            .entry(task_of_uid(&c.key).to_string())
            .or_insert(*i);
    }
    // A reference row's record goes first to the task row at its own index with its
    // text (its prompt_index is the dataset line): a duplicate prompt earlier in the
    // dataset, or one that differs only in white space, does not take it.
    let mut done_at = scan.done_at.clone();
    let at_own_index: HashSet<usize> = tasks
        .rows
        .iter()
        .enumerate()
        .filter(|(_, r)| {
            let k = (text_key(r.ids.text), r.index);
            match done_at.get_mut(&k) {
                Some(n) if *n > 0 && done.get(&k.0).is_some_and(|d| *d > 0) => {
                    *n -= 1;
                    *done.get_mut(&k.0).expect("checked") -= 1;
                    true
                }
                _ => false,
            }
        })
        .map(|(i, _)| i)
        .collect();
    for (n, row) in tasks.rows.into_iter().enumerate() {
        if at_own_index.contains(&n) {
            p.already_done += 1;
            continue;
        }
        let keys = row.keys();
        if let Some(k) = keys.iter().find(|k| done.get(*k).is_some_and(|n| *n > 0)) {
            *done.get_mut(k).expect("found above") -= 1;
            p.already_done += 1;
            continue;
        }
        let failed = keys[..3]
            .iter()
            .find_map(|k| scan.failed.get(k).map(|f| (k, f)));
        let attempt = match failed {
            Some((_, f)) if !f.retryable || f.attempts >= max_attempts => {
                p.given_up += 1;
                continue;
            }
            Some((_, f)) => f.attempts + 1,
            None => 1,
        };
        let before = failed.and_then(|(k, _)| scan.failed_index.get(k).copied());
        let index = if row.explicit {
            if let Some(c) = index_held(&row, scan) {
                return Err(IndexInUse {
                    place: row.place.to_string(),
                    index: row.index,
                    held: c.place.clone(),
                });
            }
            row.index
        } else if let Some(i) = before {
            i
        } else if let Some(i) = task_index.get(&row.ids.task()) {
            *i
        } else if used.insert(row.index) {
            row.index
        } else {
            while used.contains(&fresh) {
                fresh += 1;
            }
            used.insert(fresh);
            p.renumbered += 1;
            fresh
        };
        task_index.entry(row.ids.task()).or_insert(index);
        let batch = first + (p.tasks.len() / batch_size) as u64;
        p.tasks.push(Task {
            index,
            ids: row.ids,
            line: row.line,
            batch,
            attempt,
        });
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::rundir::{Claim, FailState, Hex16, foreign_key, legacy_key, prompt_hash};
    use crate::run::spool::SpoolWriter;
    use crate::run::tasks::{Place, Row};

    /// The prompt hash of `text`.
    fn id(text: &str) -> Hex16 {
        prompt_hash(text)
    }

    /// The content key of the row of `text`.
    fn key(text: &str) -> String {
        id(&format!("k{text}")).to_string()
    }

    /// A row of prompt `text` at `index` (its position, and its copy number, so that
    /// rows of one text are different tasks).
    fn row(index: u64, text: &str) -> Row {
        Row {
            index,
            explicit: false,
            ids: Ids {
                hash: id(text),
                key: id(&format!("k{text}")),
                content: id(&format!("c{text}")),
                text: id(text.trim()),
                copy: index as u32,
                rollout: 0,
            },
            place: Place {
                source: "t.jsonl".into(),
                line: index + 1,
            },
            line: Spooled::default(),
        }
    }

    fn tasks(rows: Vec<Row>) -> Tasks {
        Tasks {
            explicit: rows
                .iter()
                .filter(|r| r.explicit)
                .map(|r| r.index)
                .collect(),
            positions: rows.len() as u64,
            rows,
            // The plan never reads a line.
            spool: SpoolWriter::new(&std::env::temp_dir())
                .and_then(SpoolWriter::finish)
                .unwrap(),
            lost: 0,
            skipped: 0,
        }
    }

    fn fail(attempts: u32, retryable: bool) -> FailState {
        FailState {
            attempts,
            retryable,
        }
    }

    #[test]
    fn done_rows_are_a_multiset_by_content_and_failures_count_attempts() {
        let mut scan = Scan::default();
        scan.batches.insert(4);
        scan.done.insert(key("a"), 1);
        scan.failed.insert(key("b"), fail(1, true));
        scan.failed.insert(key("c"), fail(1, false));
        scan.failed.insert(key("d"), fail(3, true));
        // "a" is done whatever its index now; its second copy runs.
        let rows = vec![
            row(7, "a"),
            row(0, "a"),
            row(1, "b"),
            row(2, "c"),
            row(3, "d"),
            row(5, "e"),
        ];
        let p = plan(tasks(rows), &scan, 3, 2).unwrap();
        assert_eq!(p.already_done, 1);
        assert_eq!(p.given_up, 2);
        let got: Vec<(u64, u64, u32)> = p
            .tasks
            .iter()
            .map(|t| (t.index, t.batch, t.attempt))
            .collect();
        // "b" runs a second time; batches from 5, two each.
        assert_eq!(got, [(0, 5, 1), (1, 5, 2), (5, 6, 1)]);
    }

    #[test]
    fn lines_without_a_task_key_match_by_index_and_hash() {
        let mut scan = Scan::default();
        scan.done.insert(legacy_key(3, &id("x").to_string()), 1);
        scan.failed
            .insert(legacy_key(4, &id("y").to_string()), fail(1, false));
        let rows = vec![row(3, "x"), row(4, "y"), row(5, "x")];
        let p = plan(tasks(rows), &scan, 3, 10).unwrap();
        assert_eq!((p.already_done, p.given_up), (1, 1));
        assert_eq!(p.tasks.len(), 1);
        assert_eq!(p.tasks[0].index, 5);
    }

    #[test]
    fn uids_and_prompt_texts_match_and_indices_in_use_move_or_fail() {
        let claim = |key: &str, record: bool| Claim {
            key: key.into(),
            place: "run/batch_0.jsonl:1".into(),
            record,
        };
        let mut scan = Scan::default();
        // Reordered: "a" and "ref" are done; "n" stands where "a"'s record is.
        let rows = vec![
            row(2, "a"),
            row(0, "n"),
            row(3, "ref"),
            row(4, "m"),
            row(1, "f"),
        ];
        let (a, f) = (rows[0].ids.uid(), rows[4].ids.uid());
        // A record by uid at index 0, a reference row (prompt text) at index 1, a
        // retryable failure of "f" at index 9.
        scan.done.insert(a.clone(), 1);
        scan.claims.insert(0, claim(&a, true));
        scan.done.insert(foreign_key(" ref "), 1);
        scan.claims.insert(1, claim(&foreign_key("ref"), true));
        scan.failed.insert(f.clone(), fail(1, true));
        scan.failed_index.insert(f.clone(), 9);
        scan.claims.insert(9, claim(&f, false));
        let p = plan(tasks(rows), &scan, 3, 10).unwrap();
        assert_eq!(p.already_done, 2);
        let got: Vec<(Hex16, u64, u32)> = p
            .tasks
            .iter()
            .map(|t| (t.ids.hash, t.index, t.attempt))
            .collect();
        // "n": its position 0 is held, so the next free index past all in use (10);
        // "m" keeps its position; "f" retries under its old index.
        assert_eq!(got, [(id("n"), 10, 1), (id("m"), 4, 1), (id("f"), 9, 2)]);
        assert_eq!(p.renumbered, 1);
        // A row's own index held by another task's record is an error naming both.
        let mut own = row(0, "x");
        own.explicit = true;
        let e = plan(tasks(vec![own]), &scan, 3, 10).unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.jsonl:1: prompt_index 0 already belongs to another task in the run directory \
             (run/batch_0.jsonl:1); give the row another prompt_index, or remove it to keep \
             that record"
        );
    }
}

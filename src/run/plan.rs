//! The resume plan: which task rows run now, under which batch number and attempt,
//! given what the run directory already holds.

use super::rundir::{Scan, legacy_key};
use super::tasks::Row;

/// One prompt to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    pub index: u64,
    pub hash: String,
    /// The content key ([`crate::run::rundir::task_key`]).
    pub key: String,
    /// The task row, as read.
    pub line: Box<str>,
    pub batch: u64,
    /// This prompt's run number (1 + earlier failed runs).
    pub attempt: u32,
}

/// What runs now, and what was left out.
#[derive(Debug, Default)]
pub struct Plan {
    pub tasks: Vec<Task>,
    /// Rows that already have a record.
    pub already_done: usize,
    /// Rows whose failures are final (never retried, or out of attempts).
    pub given_up: usize,
}

/// Which rows run now: a row whose content key still has a record left in the multiset
/// is done (lines from before content keys match by index and prompt hash); a failed one
/// runs again unless its class is never retried or its attempts are used up. New tasks
/// fill batch files after the existing ones, `batch_size` each.
pub fn plan(rows: Vec<Row>, scan: &Scan, max_attempts: u32, batch_size: usize) -> Plan {
    let mut done = scan.done.clone();
    let mut p = Plan::default();
    let first = scan.next_batch();
    for Row {
        index,
        hash,
        key,
        line,
    } in rows
    {
        let legacy = legacy_key(index, &hash);
        let found = [&key, &legacy]
            .into_iter()
            .find(|k| done.get(*k).is_some_and(|n| *n > 0))
            .cloned();
        if let Some(k) = found {
            *done.get_mut(&k).expect("found above") -= 1;
            p.already_done += 1;
            continue;
        }
        let failed = scan.failed.get(&key).or_else(|| scan.failed.get(&legacy));
        let attempt = match failed {
            Some(f) if !f.retryable || f.attempts >= max_attempts => {
                p.given_up += 1;
                continue;
            }
            Some(f) => f.attempts + 1,
            None => 1,
        };
        let batch = first + (p.tasks.len() / batch_size) as u64;
        p.tasks.push(Task {
            index,
            hash,
            key,
            line,
            batch,
            attempt,
        });
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::rundir::FailState;

    /// A row whose content key is `k<text>`.
    fn row(index: u64, text: &str) -> Row {
        Row {
            index,
            hash: text.into(),
            key: format!("k{text}"),
            line: format!("{{\"prompt\": \"{text}\"}}").into(),
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
        scan.done.insert("ka".into(), 1);
        scan.failed.insert("kb".into(), fail(1, true));
        scan.failed.insert("kc".into(), fail(1, false));
        scan.failed.insert("kd".into(), fail(3, true));
        // "a" is done whatever its index now; its second copy runs.
        let rows = vec![
            row(7, "a"),
            row(0, "a"),
            row(1, "b"),
            row(2, "c"),
            row(3, "d"),
            row(5, "e"),
        ];
        let p = plan(rows, &scan, 3, 2);
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
        scan.done.insert(legacy_key(3, "x"), 1);
        scan.failed.insert(legacy_key(4, "y"), fail(1, false));
        let p = plan(vec![row(3, "x"), row(4, "y"), row(5, "x")], &scan, 3, 10);
        assert_eq!((p.already_done, p.given_up), (1, 1));
        assert_eq!(p.tasks.len(), 1);
        assert_eq!(p.tasks[0].index, 5);
    }
}

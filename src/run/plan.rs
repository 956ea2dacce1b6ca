//! The resume plan: which task rows run now, under which batch number and attempt,
//! given what the run directory already holds.

use super::rundir::{Key, Scan};
use super::tasks::Row;

/// One prompt to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    pub index: u64,
    pub hash: String,
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

/// Which rows run now: a row whose (index, hash) still has a record left in the multiset
/// is done; a failed one runs again unless its class is never retried or its attempts
/// are used up. New tasks fill batch files after the existing ones, `batch_size` each.
pub fn plan(rows: Vec<Row>, scan: &Scan, max_attempts: u32, batch_size: usize) -> Plan {
    let mut done = scan.done.clone();
    let mut p = Plan::default();
    let first = scan.next_batch();
    for Row { index, hash, line } in rows {
        let key: Key = (index, hash);
        if let Some(n) = done.get_mut(&key).filter(|n| **n > 0) {
            *n -= 1;
            p.already_done += 1;
            continue;
        }
        let attempt = match scan.failed.get(&key) {
            Some(f) if !f.retryable || f.attempts >= max_attempts => {
                p.given_up += 1;
                continue;
            }
            Some(f) => f.attempts + 1,
            None => 1,
        };
        let batch = first + (p.tasks.len() / batch_size) as u64;
        p.tasks.push(Task {
            index: key.0,
            hash: key.1,
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

    fn row(index: u64, hash: &str) -> Row {
        Row {
            index,
            hash: hash.into(),
            line: format!("{{\"prompt\": \"{hash}\"}}").into(),
        }
    }

    #[test]
    fn done_rows_are_a_multiset_and_failures_count_attempts() {
        let mut scan = Scan::default();
        scan.batches.insert(4);
        scan.done.insert((0, "a".into()), 1);
        scan.failed.insert(
            (1, "b".into()),
            FailState {
                attempts: 1,
                retryable: true,
            },
        );
        scan.failed.insert(
            (2, "c".into()),
            FailState {
                attempts: 1,
                retryable: false,
            },
        );
        scan.failed.insert(
            (3, "d".into()),
            FailState {
                attempts: 3,
                retryable: true,
            },
        );
        let rows = vec![
            row(0, "a"),
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
        // The second copy of "a" runs; "b" runs a second time; batches from 5, two each.
        assert_eq!(got, [(0, 5, 1), (1, 5, 2), (5, 6, 1)]);
    }
}

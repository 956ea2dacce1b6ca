//! The bad-line policy: what a stage made of a line ([`Verdict`]), the strict default
//! and `--on-error skip` ([`OnError`]), the counts every stage reports ([`Summary`]),
//! and which lines a run processes ([`Select`], [`Shard`]).

use std::sync::Arc;

use anyhow::Result;

use super::lines::Raw;
use super::rejects::Rejects;

/// What to do with a line that cannot be turned into output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OnError {
    /// Stop at the first bad line with exit status 1.
    #[default]
    Fail,
    /// Go on, count, and report a summary; exit 1 unless every bad line went to --rejects.
    Skip,
}

/// A problem with one input line, with its location.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{source_name}:{lineno}: {reason}")]
pub struct LineError {
    pub source_name: Arc<str>,
    pub lineno: u64,
    pub reason: String,
}

/// What a stage made of one input line.
#[derive(Debug)]
pub enum Verdict {
    /// The bytes were appended to the output buffer (zero or more lines).
    Written,
    /// The line is not passed on, for these reasons, on purpose (a filter's drop, a
    /// merge's duplicate): goes to the rejects file, never counts as an error.
    Dropped(Vec<String>),
    /// The line holds no row to pass on, only the mark of one its run discarded
    /// (hermes-agent's tombstone, [`crate::format::row::tombstone`]): dropped as
    /// [`Verdict::Dropped`] is, but never data lost when there is no rejects file.
    Discarded(Vec<String>),
    /// The line is bad input: handled by the `--on-error` policy.
    Bad(String),
    /// As [`Verdict::Bad`], for a line the stage read as a row (JSON by the row rule,
    /// [`super::json::parse_object`]) and then refused: its reject embeds the line as
    /// `record` without parsing it a second time.
    BadRow(String),
}

/// Counts of one run of [`process`].
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Non-blank lines read.
    pub read: u64,
    /// Lines that produced output.
    pub written: u64,
    /// Lines dropped on purpose, per reason (a line with two reasons counts in both).
    pub dropped: std::collections::BTreeMap<String, u64>,
    /// Lines dropped on purpose, once each.
    pub dropped_lines: u64,
    /// Bad lines skipped under `--on-error skip`.
    pub bad: u64,
    /// Bad or dropped lines that went to no rejects file.
    pub lost: u64,
    /// The first bad line, for the summary message.
    pub first_bad: Option<String>,
}

impl Summary {
    /// True when some line went neither to the output nor to a rejects file.
    pub fn lost_data(&self) -> bool {
        self.lost > 0
    }

    /// Account for a line that was not written: a drop is counted and goes to the
    /// rejects file (without one, it counts as lost when `drops_are_loss`); so does a
    /// bad line under `--on-error skip`. A bad line under `--on-error fail` is returned
    /// instead, for the caller to stop with once it has written every line before it.
    pub(crate) fn not_written(
        &mut self,
        (on_error, drops_are_loss): (OnError, bool),
        rejects: &mut Rejects,
        (source, lineno, line): (&Arc<str>, u64, Raw<'_>),
        verdict: &Verdict,
    ) -> Result<Option<LineError>> {
        match verdict {
            Verdict::Written => {}
            Verdict::Dropped(reasons) | Verdict::Discarded(reasons) => {
                self.dropped_lines += 1;
                for r in reasons {
                    *self.dropped.entry(r.clone()).or_default() += 1;
                }
                if rejects.is_kept() {
                    // A drop is a judgement of a row: the line was read as one.
                    rejects.write(source, lineno, reasons, line, true)?;
                } else if drops_are_loss && matches!(verdict, Verdict::Dropped(_)) {
                    self.lost += 1;
                    rejects.lose();
                }
            }
            Verdict::Bad(reason) | Verdict::BadRow(reason) => {
                let err = LineError {
                    source_name: source.clone(),
                    lineno,
                    reason: reason.clone(),
                };
                if on_error == OnError::Fail {
                    return Ok(Some(err));
                }
                self.bad += 1;
                if self.first_bad.is_none() {
                    self.first_bad = Some(err.to_string());
                }
                if rejects.is_kept() {
                    let is_row = matches!(verdict, Verdict::BadRow(_));
                    rejects.write(source, lineno, std::slice::from_ref(reason), line, is_row)?;
                } else {
                    self.lost += 1;
                    rejects.lose();
                }
            }
        }
        Ok(None)
    }
}

/// Which non-blank input lines a run processes: line k (0-based, counted across all
/// inputs) is processed when `holds(k)`. The others are skipped as if absent; the lines
/// processed keep their own file and line number in messages and rejects.
#[derive(Clone)]
pub struct Select(Arc<dyn Fn(u64) -> bool + Send + Sync>);

impl Select {
    pub fn new(f: impl Fn(u64) -> bool + Send + Sync + 'static) -> Select {
        Select(Arc::new(f))
    }

    /// Whether the k-th non-blank line (0-based) is processed.
    pub fn holds(&self, k: u64) -> bool {
        (self.0)(k)
    }
}

impl From<Shard> for Select {
    fn from(sh: Shard) -> Select {
        Select::new(move |k| sh.holds(k))
    }
}

impl std::fmt::Debug for Select {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Select(..)")
    }
}

/// `--shard I/N`: line k (0-based, counting non-blank lines across all inputs) belongs
/// to shard `k % N`; shards are numbered from 0, so `0/4` .. `3/4` cover everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

impl Shard {
    /// True when the k-th non-blank line (0-based) is in this shard.
    pub fn holds(&self, k: u64) -> bool {
        k % self.count == self.index
    }
}

impl std::str::FromStr for Shard {
    type Err = crate::error::UsageError;
    fn from_str(s: &str) -> std::result::Result<Shard, Self::Err> {
        let bad = |why: String| crate::error::UsageError(why);
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| bad(format!("{s:?}: expected I/N, e.g. 0/4")))?;
        let index: u64 = i
            .trim()
            .parse()
            .map_err(|_| bad(format!("{s:?}: I is not a number")))?;
        let count: u64 = n
            .trim()
            .parse()
            .map_err(|_| bad(format!("{s:?}: N is not a number")))?;
        if count == 0 || index >= count {
            return Err(bad(format!(
                "{s:?}: need 0 <= I < N (shards are numbered from 0)"
            )));
        }
        Ok(Shard { index, count })
    }
}

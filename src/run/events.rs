//! What the engine tells its caller while it runs: lines for the user ([`Events::note`])
//! and progress snapshots ([`Events::progress`]). The library never writes to stderr;
//! the binary (`cmd/run.rs`) decides where these go, a test may collect them.

use std::time::Duration;

/// Where a run stands, as the progress ticker saw it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Snapshot {
    /// Records written.
    pub records: u64,
    /// Failures written.
    pub failures: u64,
    /// Prompts scheduled in this process.
    pub total: u64,
    /// Prompts an agent is working on.
    pub in_flight: u64,
    /// Tokens of the records and failures written.
    pub tokens: u64,
    /// Dollars the endpoint reported.
    pub spent: f64,
    /// Since the workers started.
    pub elapsed: Duration,
}

impl Snapshot {
    /// Prompts finished (recorded or failed) per second.
    pub fn rate(&self) -> f64 {
        (self.records + self.failures) as f64 / self.elapsed.as_secs_f64().max(1e-3)
    }

    /// Seconds left at the current rate; `None` before the first prompt ends.
    pub fn eta_secs(&self) -> Option<f64> {
        let left = self.total - (self.records + self.failures).min(self.total);
        let rate = self.rate();
        (rate > 0.0).then(|| left as f64 / rate)
    }
}

/// The receiver of a run's events. Called from the engine's threads.
pub trait Events: Send + Sync {
    /// A diagnostic line for the user (no prefix, no newline).
    fn note(&self, msg: &str);

    /// A progress snapshot, every `RunConfig::progress_every` (never with `quiet`).
    fn progress(&self, _now: &Snapshot) {}

    /// The last progress snapshot has been sent.
    fn progress_done(&self) {}
}

/// Events nobody reads (library callers and tests that do not look).
pub struct Silent;

impl Events for Silent {
    fn note(&self, _msg: &str) {}
}

#[cfg(test)]
mod tests {
    use super::Snapshot;
    use std::time::Duration;

    #[test]
    fn rate_and_eta_count_records_and_failures() {
        let mut s = Snapshot {
            records: 3,
            failures: 1,
            total: 12,
            in_flight: 2,
            tokens: 0,
            spent: 0.0,
            elapsed: Duration::from_secs(2),
        };
        assert_eq!(s.rate(), 2.0);
        assert_eq!(s.eta_secs(), Some(4.0));
        (s.records, s.failures) = (0, 0);
        assert_eq!(s.eta_secs(), None);
        (s.records, s.failures) = (14, 0);
        assert_eq!(s.eta_secs(), Some(0.0));
    }
}

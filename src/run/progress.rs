//! The progress ticker of a run: counters the writer bumps, and a thread that sends a
//! [`Snapshot`] of them to the run's [`Events`] every `every`. It prints nothing.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::events::{Events, Snapshot};
use super::scheduler::Shared;

/// The counters of the writer and the ticker thread that reports them.
pub struct Progress {
    pub records: Arc<AtomicU64>,
    pub failures: Arc<AtomicU64>,
    pub tokens: Arc<AtomicU64>,
    done: Arc<AtomicBool>,
    handle: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Progress {
    /// Start the ticker (none when `every` is `None`).
    pub fn start(
        shared: Arc<Shared>,
        events: Arc<dyn Events>,
        total: usize,
        every: Option<Duration>,
    ) -> Progress {
        let records = Arc::new(AtomicU64::new(0));
        let failures = Arc::new(AtomicU64::new(0));
        let tokens = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let handle = every.map(|every| {
            let (r, f, t, d) = (
                records.clone(),
                failures.clone(),
                tokens.clone(),
                done.clone(),
            );
            std::thread::spawn(move || {
                let start = Instant::now();
                let mut last = Instant::now();
                while !d.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(25));
                    if last.elapsed() < every {
                        continue;
                    }
                    last = Instant::now();
                    events.progress(&Snapshot {
                        records: r.load(Ordering::Relaxed),
                        failures: f.load(Ordering::Relaxed),
                        total: total as u64,
                        in_flight: shared.in_flight.load(Ordering::Relaxed),
                        tokens: t.load(Ordering::Relaxed),
                        spent: shared.llm.spent(),
                        elapsed: start.elapsed(),
                    });
                }
                events.progress_done();
            })
        });
        Progress {
            records,
            failures,
            tokens,
            done,
            handle: Mutex::new(handle),
        }
    }

    /// Stop the ticker and wait for it.
    pub fn finish(&self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = h.join();
        }
    }
}

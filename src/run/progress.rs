//! The progress line of traj-run on stderr: records, failures, prompts in flight, rate,
//! tokens, spend and ETA, rewritten in place on a terminal.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::scheduler::Shared;

const NAME: &str = "traj-run";

/// The progress line on stderr: every 2 s on a terminal (rewritten in place), every
/// 10 s otherwise.
pub struct Progress {
    pub records: Arc<AtomicU64>,
    pub failures: Arc<AtomicU64>,
    pub tokens: Arc<AtomicU64>,
    done: Arc<AtomicBool>,
    handle: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Progress {
    /// Start the printer thread (none when `quiet`).
    pub fn start(
        shared: Arc<Shared>,
        quiet: bool,
        total: usize,
        every: Option<Duration>,
    ) -> Progress {
        let records = Arc::new(AtomicU64::new(0));
        let failures = Arc::new(AtomicU64::new(0));
        let tokens = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let handle = (!quiet).then(|| {
            let (r, f, t, d) = (records.clone(), failures.clone(), tokens.clone(), done.clone());
            std::thread::spawn(move || {
                let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
                let every = every.unwrap_or(if tty {
                    Duration::from_secs(2)
                } else {
                    Duration::from_secs(10)
                });
                let start = Instant::now();
                let mut last = Instant::now();
                while !d.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(25));
                    if last.elapsed() < every {
                        continue;
                    }
                    last = Instant::now();
                    let (rn, fl) = (r.load(Ordering::Relaxed), f.load(Ordering::Relaxed));
                    let secs = start.elapsed().as_secs_f64().max(1e-3);
                    let rate = (rn + fl) as f64 / secs;
                    let left = total as u64 - (rn + fl).min(total as u64);
                    let eta = if rate > 0.0 {
                        format_secs(left as f64 / rate)
                    } else {
                        "?".into()
                    };
                    let line = format!(
                        "{rn}/{total} done, {fl} failed, {} in flight, {rate:.1} prompts/s, {} tokens, ${:.4}, ETA {eta}",
                        shared.in_flight.load(Ordering::Relaxed),
                        t.load(Ordering::Relaxed),
                        shared.llm.spent()
                    );
                    let mut err = std::io::stderr().lock();
                    let _ = if tty {
                        write!(err, "\r{NAME}: {line}\x1b[K")
                    } else {
                        writeln!(err, "{NAME}: {line}")
                    };
                }
                if tty {
                    let _ = writeln!(std::io::stderr().lock());
                }
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

    /// Stop the printer thread and wait for it.
    pub fn finish(&self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = h.join();
        }
    }
}

fn format_secs(s: f64) -> String {
    let s = s.round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn eta_format() {
        assert_eq!(super::format_secs(5.4), "5s");
        assert_eq!(super::format_secs(61.0), "1m01s");
        assert_eq!(super::format_secs(3725.0), "1h02m");
    }
}

//! The meter of a run: one request-rate limit and one spend cap for every model call
//! it makes, the agent's and its tools' alike (`vision_analyze`, `mixture_of_agents`,
//! `browser_vision`, `image_generate`).
//!
//! A [`Meter`] is made with the tool configuration, before the run exists, and shared
//! (an `Arc`) by every client made from it; traj-run then [`Meter::attach`]es its rate
//! limiter, its spend cap and how to stop. Clients carrying the meter wait for the
//! limiter's slot before each attempt and add the provider-reported cost of each reply;
//! tools ask [`Meter::check`] before a call and refuse it once the cap is reached.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use super::rate::RateLimiter;

/// Called with the reason to stop: once when the spend reaches the cap, and when a
/// tool's model call finds the account out of credits.
pub type OnCap = Box<dyn Fn(&str) + Send + Sync>;

/// What the run attached: the limiter, the cap and the stop hook.
struct Attached {
    rate: Option<Arc<RateLimiter>>,
    cap: Option<f64>,
    on_cap: OnCap,
}

/// Requests and spend of every client sharing it (see the module).
#[derive(Default)]
pub struct Meter {
    attached: OnceLock<Attached>,
    spent_micro: AtomicU64,
    requests: AtomicU64,
    capped: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Meter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Meter")
            .field("spent", &self.spent())
            .field("requests", &self.requests())
            .finish()
    }
}

impl Meter {
    /// Give the meter the run's limiter, spend cap (dollars) and stop hook. Only the
    /// first call counts (one run per process).
    pub fn attach(&self, rate: Option<Arc<RateLimiter>>, cap: Option<f64>, on_cap: OnCap) {
        let _ = self.attached.set(Attached { rate, cap, on_cap });
    }

    /// Stop the run for `why` (a tool's model call found the account out of credits):
    /// the attached stop hook, as at the spend cap.
    pub fn stop_run(&self, why: &str) {
        if let Some(a) = self.attached.get() {
            (a.on_cap)(why);
        }
    }

    /// The run's rate limiter, once attached.
    pub fn rate(&self) -> Option<&Arc<RateLimiter>> {
        self.attached.get().and_then(|a| a.rate.as_ref())
    }

    /// `Err` once the spend has reached the cap.
    pub fn check(&self) -> Result<(), CapReached> {
        match self.attached.get().and_then(|a| a.cap) {
            Some(cap) if self.spent() >= cap => Err(CapReached(cap)),
            _ => Ok(()),
        }
    }

    /// Count one request (an attempt that went out).
    pub fn count_request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// Add the cost of a reply; at the cap, the run is told to stop (once).
    pub fn record(&self, cost: Option<f64>) {
        let Some(cost) = cost.filter(|c| *c > 0.0) else {
            return;
        };
        let micro = (cost * 1e6).round() as u64;
        let total = self.spent_micro.fetch_add(micro, Ordering::Relaxed) + micro;
        if let Some(a) = self.attached.get()
            && let Some(cap) = a.cap
            && total as f64 / 1e6 >= cap
            && !self.capped.swap(true, Ordering::SeqCst)
        {
            (a.on_cap)(&format!("spend cap ${cap} reached"));
        }
    }

    /// Dollars spent by every client of the meter.
    pub fn spent(&self) -> f64 {
        self.spent_micro.load(Ordering::Relaxed) as f64 / 1e6
    }

    /// Requests sent by every client of the meter.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
}

/// The run's spend cap (in dollars) is reached: no more model calls.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("the run's spend cap (${0}) is reached: no more model calls")]
pub struct CapReached(pub f64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_is_checked_and_stops_once() {
        let m = Meter::default();
        m.record(Some(5.0));
        assert!(m.check().is_ok(), "no cap before attach");
        let stops = Arc::new(AtomicU64::new(0));
        let s = stops.clone();
        m.attach(
            None,
            Some(6.0),
            Box::new(move |why| {
                assert!(why.contains("$6"));
                s.fetch_add(1, Ordering::Relaxed);
            }),
        );
        m.record(Some(0.5));
        assert!(m.check().is_ok());
        m.record(Some(0.5));
        m.record(Some(0.5));
        assert_eq!(stops.load(Ordering::Relaxed), 1);
        assert!(m.check().unwrap_err().to_string().contains("spend cap"));
        assert!((m.spent() - 6.5).abs() < 1e-9);
    }
}

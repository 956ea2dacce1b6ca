//! The run's request-rate cap ([`RateLimiter`]), shared by the agent's client and by
//! every model-backed tool through the [`Meter`](super::Meter).

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A global request-rate cap shared by every thread of a run: requests are spaced
/// `1 / rps` apart (no bursts), each thread sleeping until its slot.
#[derive(Debug)]
pub struct RateLimiter {
    interval: Duration,
    next: Mutex<Instant>,
}

impl RateLimiter {
    /// `rps` requests per second at most (must be > 0).
    pub fn new(rps: f64) -> RateLimiter {
        RateLimiter {
            interval: Duration::from_secs_f64(1.0 / rps.max(1e-6)),
            next: Mutex::new(Instant::now()),
        }
    }

    /// Reserve the next slot and return when it starts.
    pub fn reserve(&self) -> Instant {
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let slot = (*next).max(now);
        *next = slot + self.interval;
        slot
    }
}

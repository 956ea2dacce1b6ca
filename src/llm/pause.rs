//! The shared back-off of a client and its clones ([`Pause`]): when the provider says
//! "not now" (a 429, or a 402 under `--on-payment wait`), every thread holds before its
//! next attempt until the wait is over, then one request goes alone as a probe; only
//! when it is answered do the others go again. A wave of refusals so slows the whole
//! run down once, instead of each worker backing off (and hammering) on its own.
//!
//! Threads waiting here make no request and use none of their retries; the probe's
//! attempts count as any attempt does.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Where a thread stands after [`Pause::wait`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// No pause: send.
    Go,
    /// The pause is over and this thread probes: send, then [`Pause::answered`] or
    /// [`Pause::refused`].
    Probe,
}

#[derive(Debug, Default)]
struct State {
    /// No attempt starts before this instant.
    until: Option<Instant>,
    /// A probe is in flight.
    probing: bool,
    /// Pauses so far.
    pauses: u64,
    /// Probes refused since the last answer: the back-off grows with them, whichever
    /// thread probes.
    strikes: u32,
}

/// The shared back-off (see the module).
#[derive(Debug, Default)]
pub struct Pause {
    state: Mutex<State>,
}

impl Pause {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hold until this thread may send. `keep_waiting` is asked between short sleeps
    /// (false: give up, returns `None`; the stop flag or a deadline).
    pub fn wait(&self, keep_waiting: &dyn Fn(Instant) -> bool) -> Option<Turn> {
        loop {
            let nap = {
                let mut s = self.lock();
                let now = Instant::now();
                match s.until {
                    None => return Some(Turn::Go),
                    Some(u) if now < u => (u - now).min(Duration::from_millis(50)),
                    Some(_) if !s.probing => {
                        s.probing = true;
                        return Some(Turn::Probe);
                    }
                    // The probe is out: wait for its answer.
                    Some(_) => Duration::from_millis(20),
                }
            };
            if !keep_waiting(Instant::now() + nap) {
                return None;
            }
            std::thread::sleep(nap);
        }
    }

    /// The provider answered (anything but a refusal). A probe's answer ends the
    /// pause; an answer to a request sent before the pause began changes nothing.
    pub fn answered(&self, turn: Turn) {
        if turn == Turn::Probe {
            let mut s = self.lock();
            s.until = None;
            s.probing = false;
            s.strikes = 0;
        }
    }

    /// The provider refused: nobody sends again for `wait` (the longer wait wins when
    /// refusals overlap); a refused probe hands the probe to the next thread.
    pub fn refused(&self, turn: Turn, wait: Duration) {
        let mut s = self.lock();
        let until = Instant::now() + wait;
        if s.until.is_none() {
            s.pauses += 1;
        }
        s.until = Some(s.until.map_or(until, |u| u.max(until)));
        if turn == Turn::Probe {
            s.probing = false;
            s.strikes += 1;
        }
    }

    /// Probes refused since the provider last answered one.
    pub fn strikes(&self) -> u32 {
        self.lock().strikes
    }

    /// A probe ended without an answer either way (stopped, deadline, transport
    /// error): let another thread probe.
    pub fn abandoned(&self, turn: Turn) {
        if turn == Turn::Probe {
            self.lock().probing = false;
        }
    }

    /// Pauses so far.
    pub fn pauses(&self) -> u64 {
        self.lock().pauses
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn one_probe_goes_while_the_others_hold() {
        let p = Arc::new(Pause::default());
        assert_eq!(p.wait(&|_| true), Some(Turn::Go));
        p.refused(Turn::Go, Duration::from_millis(60));
        p.refused(Turn::Go, Duration::from_millis(10));
        let t0 = Instant::now();
        let probes = Arc::new(AtomicU64::new(0));
        let goes = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (p, probes, goes) = (p.clone(), probes.clone(), goes.clone());
                std::thread::spawn(move || match p.wait(&|_| true) {
                    Some(Turn::Probe) => {
                        probes.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(40));
                        // Nobody went while the probe was out.
                        assert_eq!(goes.load(Ordering::SeqCst), 0);
                        p.answered(Turn::Probe);
                    }
                    Some(Turn::Go) => {
                        goes.fetch_add(1, Ordering::SeqCst);
                    }
                    None => panic!("gave up"),
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(
            t0.elapsed() >= Duration::from_millis(60),
            "the longer wait wins"
        );
        assert_eq!(probes.load(Ordering::SeqCst), 1);
        assert_eq!(goes.load(Ordering::SeqCst), 7);
        assert_eq!(p.pauses(), 1);
        // Stopping gives up.
        p.refused(Turn::Go, Duration::from_secs(60));
        assert_eq!(p.wait(&|_| false), None);
    }
}

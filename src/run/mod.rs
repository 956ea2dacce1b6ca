//! traj-run's engine: the agent loop ([`agent`]), the run directory ([`rundir`]) and
//! the pieces between them: task reader, resume plan, worker pool, durable writer,
//! progress line, and the serde schemas of what is written ([`record`]).

pub mod agent;
pub mod chat;
pub mod config;
pub mod engine;
pub mod hosts;
pub mod image;
pub mod lock;
pub mod plan;
pub mod progress;
pub mod prompt;
pub mod record;
pub mod rundir;
pub mod scheduler;
pub mod tasks;
pub mod writer;

/// A diagnostic line on stderr, `traj-run: msg` (errors ignored: a closed stderr must
/// not fail a run).
pub(crate) fn note(msg: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "traj-run: {msg}");
}

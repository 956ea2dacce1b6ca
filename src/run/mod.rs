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
pub mod rollout;
pub mod rundir;
pub mod scheduler;
pub mod tasks;
pub mod verify;
pub mod writer;

/// Where the engine's diagnostic lines go. The library never prints: the binary
/// (`cmd/run.rs`) installs a sink that writes them to stderr; unset, they are dropped.
static NOTES: std::sync::OnceLock<Box<NoteSink>> = std::sync::OnceLock::new();

/// What receives the engine's notes.
pub type NoteSink = dyn Fn(&str) + Send + Sync;

/// Send the engine's diagnostic lines (`msg` without a prefix) to `sink`; the first
/// sink installed in a process stays.
pub fn set_notes(sink: impl Fn(&str) + Send + Sync + 'static) {
    let _ = NOTES.set(Box::new(sink));
}

/// A diagnostic line for the user, through the sink of [`set_notes`].
pub(crate) fn note(msg: &str) {
    if let Some(sink) = NOTES.get() {
        sink(msg);
    }
}

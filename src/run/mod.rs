//! traj-run's engine: the agent loop ([`agent`]) and what it sends ([`request`]), the run
//! directory ([`rundir`]) and the pieces between them: task reader and spool, resume plan,
//! worker pool, durable writer, progress ticker, the events sent to the caller
//! ([`events`]: the library prints nothing) and the serde schemas of what is written
//! ([`record`]).

pub mod agent;
pub mod aggregate;
pub mod chat;
pub mod config;
pub mod engine;
pub mod events;
pub mod hosts;
pub mod image;
pub mod lock;
pub mod plan;
pub mod progress;
pub mod prompt;
pub mod record;
pub mod request;
pub mod rollout;
pub mod rundir;
pub mod scheduler;
pub mod spool;
pub mod tasks;
pub mod verify;
pub mod writer;

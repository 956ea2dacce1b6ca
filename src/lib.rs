//! traj: turn prompts into training data for tool-using LLM agents, and reshape it.
//!
//! The library does all the work; each binary in `bin/` parses its flags and calls
//! one `cmd::<tool>::run_cli`. Library code neither prints to stdout nor exits.
//!
//! Layers, from the bottom up (a module imports only from layers below it; see
//! `docs/architecture.md`):
//! - [`error`]: the typed errors and their exit codes.
//! - [`catalog`]: what traj knows by name: toolsets, their tools, the distributions and
//!   the per-row draw (data, the same on every machine and in every build).
//! - [`io`]: sources (files, gzip, stdin, directories), the one line splitter, the
//!   bad-line policy, rejects, atomic output, and the ordered parallel pipelines.
//! - [`format`]: the trajectory model, the Hermes envelope (render and parse), OpenAI
//!   message rules, Python-compatible JSON, the JSON scanner, token counting.
//! - [`llm`]: the OpenAI-compatible chat client (retries, `Retry-After`, rate limit) and
//!   its response cache.
//! - [`toolbox`]: the agent's tools, declared once each, and their sandboxes (feature
//!   `agent`).
//! - [`run`]: traj-run's engine: the agent loop, the scheduler, the run directory
//!   (feature `agent`).
//! - [`stage`]: the engines of the data stages: filter, normalize, merge, sample, compress.
//! - [`cli`] and [`cmd`]: flags, one module per binary, and the mapping of results to
//!   exit codes.
//!
//! Two wings, one crate: the data stages (normalize, filter, merge, compress,
//! sample-tools) build with `--no-default-features`; the default feature `agent` adds
//! the agent runtime (`toolbox`, `run`, `cmd::run`, the browser and the sandboxes) and
//! traj-run.

// Only `cli` reports to the user and only the binaries exit.
#![deny(clippy::print_stderr, clippy::print_stdout, clippy::exit)]

pub mod catalog;
pub mod cli;
pub mod cmd;
pub mod error;
#[cfg(test)]
mod fixtures;
pub mod format;
pub mod io;
pub mod llm;
#[cfg(feature = "agent")]
pub mod run;
pub mod stage;
#[cfg(feature = "agent")]
pub mod toolbox;

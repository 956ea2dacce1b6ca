//! traj: turn prompts into training data for tool-using LLM agents, and reshape it.
//!
//! The library does all the work; each binary in `bin/` parses its flags and calls
//! one `cmd::<tool>::run_cli`. Library code neither prints to stdout nor exits.
//!
//! Layers, from the bottom up (a module imports only from layers below it; see
//! `docs/architecture.md`):
//! - [`error`]: the typed errors and their exit codes.
//! - [`io`]: sources (files, gzip, stdin, directories), the one line splitter, the
//!   bad-line policy, rejects, atomic output, and the ordered parallel pipelines.
//! - [`format`]: the trajectory model, the Hermes envelope (render and parse), OpenAI
//!   message rules, Python-compatible JSON, the JSON scanner, token counting.
//! - [`llm`]: the OpenAI-compatible chat client (retries, `Retry-After`, rate limit) and
//!   its response cache.
//! - [`toolbox`]: the agent's tools, declared once each, and their sandboxes.
//! - [`run`]: traj-run's engine: the agent loop, the scheduler, the run directory.
//! - [`stage`]: the engines of the data stages: filter, normalize, merge, sample, compress.
//! - [`cli`] and [`cmd`]: flags, one module per binary, and the mapping of results to
//!   exit codes.

// Only `cli` reports to the user and only the binaries exit.
#![deny(clippy::print_stderr, clippy::print_stdout, clippy::exit)]

pub mod cli;
pub mod cmd;
pub mod error;
#[cfg(test)]
mod fixtures;
pub mod format;
pub mod io;
pub mod llm;
pub mod run;
pub mod stage;
pub mod toolbox;

//! traj: turn prompts into training data for tool-using LLM agents, and reshape it.
//!
//! The library does all the work; each binary in `bin/` parses its flags and calls
//! one `cmd::<tool>::run_cli`. Library code neither prints to stdout nor exits.
//!
//! Layout:
//! - [`jsonl`]: reading JSONL (files, `.gz`, stdin), the bad-line policy, rejects,
//!   atomic output, and the ordered parallel line pipeline every stage uses
//!   ([`passthru`]: its zero-copy sibling for stages that only keep or drop lines).
//! - [`jsonscan`]: JSON validation and string decoding without building values
//!   (64-byte blocks of SIMD masks); [`check`]: traj-filter's predicates on top of it.
//! - [`cli`]: the flags every binary shares and the mapping of results to exit codes.
//! - [`llm`]: the OpenAI-compatible chat client (retries, `Retry-After`, classes).
//! - [`cmd`]: one module per binary.

pub mod agent;
pub mod cache;
pub mod check;
pub mod cli;
pub mod cmd;
pub mod compress;
pub mod convert;
pub mod hermes;
pub mod jsonl;
pub mod jsonscan;
pub mod llm;
pub mod merge;
pub mod model;
pub mod passthru;
pub mod rundir;
pub mod tokens;
pub mod toolbox;

//! One module per binary: its clap `Args`, a validated config and `run_cli`.
pub mod compress;
pub mod filter;
pub mod merge;
pub mod normalize;
pub mod report;
#[cfg(feature = "agent")]
pub mod run;
pub mod sample;

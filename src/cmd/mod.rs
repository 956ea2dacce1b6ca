//! One module per binary: its clap `Args`, a validated config and `run_cli`.
pub mod compress;
pub mod filter;
pub mod merge;
pub mod normalize;
<<<<<<< ours
pub mod report;
=======
#[cfg(feature = "agent")]
>>>>>>> theirs
pub mod run;
pub mod sample;

//! Integration tests: every test drives a real binary.
//!
//! One test crate (one link on a 2-core machine); one module per binary. The modules
//! that drive traj-run need the `agent` feature; the rest are the data core's tests
//! (`cargo test --no-default-features`).

mod util;

#[path = "../standin/mod.rs"]
mod standin;

mod compress;
mod compress_edges;
mod compress_fit;
mod compress_shape;
mod conservation;
mod core;
#[cfg(feature = "agent")]
mod demo;
mod filter;
mod formats;
mod golden;
#[cfg(feature = "agent")]
mod install;
mod integrity;
mod keep;
mod lossless;
mod merge;
mod normalize;
mod normalize_reasoning;
mod numbers;
mod parquet_typed;
#[cfg(feature = "agent")]
mod pipeline;
#[cfg(feature = "agent")]
mod pod;
mod repair;
mod repair_bridge;
mod rl_data;
mod roundtrip;
// Its browser tests drive Chromium through headless_chrome, which the agent feature brings.
#[cfg(feature = "agent")]
mod report;
mod report_view;
#[cfg(feature = "agent")]
mod run;
#[cfg(feature = "agent")]
mod run_docker;
#[cfg(feature = "agent")]
mod run_faults;
#[cfg(feature = "agent")]
mod run_resume;
#[cfg(feature = "agent")]
mod run_rollouts;
#[cfg(feature = "agent")]
mod run_stop;
mod sample;
#[cfg(feature = "agent")]
mod sandbox;
mod scale;
#[cfg(feature = "agent")]
mod tools;
mod training;
mod training_chunks;
mod training_llamafactory;

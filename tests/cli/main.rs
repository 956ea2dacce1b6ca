//! Integration tests: every test drives a real binary.
//!
//! One test crate (one link on a 2-core machine); one module per binary.

mod util;

#[path = "../standin/mod.rs"]
mod standin;

mod compress;
mod compress_fit;
mod conservation;
mod core;
mod demo;
mod filter;
mod formats;
mod integrity;
mod keep;
mod lossless;
mod merge;
mod normalize;
mod numbers;
mod parquet_typed;
mod pipeline;
mod pod;
mod repair;
mod repair_bridge;
mod report;
mod run;
mod run_faults;
mod run_resume;
mod sample;
mod sandbox;
mod scale;
mod tools;
mod training;
mod training_llamafactory;

//! Integration tests: every test drives a real binary.
//!
//! One test crate (one link on a 2-core machine); one module per binary.

mod util;

mod core;
mod normalize;

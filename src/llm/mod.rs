//! The OpenAI-compatible chat client ([`client`]), its on-disk response cache
//! ([`cache`]) and the run's meter of requests and spend ([`meter`]).

pub mod cache;
pub mod client;
pub mod meter;

pub use client::*;
pub use meter::{CapReached, Meter};

//! The OpenAI-compatible chat client ([`client`]), why a request failed ([`error`]), its on-disk response cache
//! ([`cache`]), the run's meter of requests and spend ([`meter`]), its rate cap
//! ([`rate`]) and the back-off its clones share ([`pause`]).

pub mod cache;
pub mod client;
pub mod error;
pub mod meter;
pub mod pause;
pub mod rate;

pub use client::*;
pub use error::{ErrorClass, LlmError, stops_the_run};
pub use meter::{CapReached, Meter};
pub use rate::RateLimiter;

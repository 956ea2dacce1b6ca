//! The OpenAI-compatible chat client ([`client`]) and its on-disk response cache
//! ([`cache`]).

pub mod cache;
pub mod client;

pub use client::*;

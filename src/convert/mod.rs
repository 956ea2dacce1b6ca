//! Conversions between record shapes and the trajectory model.
pub mod pyjson;

//! The engines of the data stages, one module each: [`filter`], [`normalize`],
//! [`merge`], [`compress`].

pub mod compress;
pub mod filter;
pub mod merge;
pub mod normalize;
pub mod report;
pub mod sample;

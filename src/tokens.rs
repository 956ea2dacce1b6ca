//! Token counting: the tokenizers traj-compress and traj-filter share.
//!
//! A tokenizer is built once (see [`load`]) and shared by all threads.

use std::sync::Arc;

use anyhow::Result;

/// Counts tokens of text. Implementations are built once and shared by all threads.
pub trait Tokenizer: Send + Sync {
    /// Number of tokens in `text`.
    fn count(&self, text: &str) -> usize;
    /// The name recorded in metrics (`o200k_base`, a file path, `chars4`...).
    fn name(&self) -> String;
}

/// The test tokenizer: one token per 4 characters, rounded up (the reference's tests use it).
#[derive(Debug, Clone, Copy, Default)]
pub struct CharsPerToken4;

impl Tokenizer for CharsPerToken4 {
    fn count(&self, text: &str) -> usize {
        text.chars().count().div_ceil(4)
    }
    fn name(&self) -> String {
        "chars4".to_string()
    }
}

/// Build a tokenizer from its `--tokenizer` spec.
///
/// Known now: `chars4`. (`cl100k_base`, `o200k_base`, `.tiktoken` files and HuggingFace
/// `tokenizer.json` come with traj-compress.)
pub fn load(spec: &str) -> Result<Arc<dyn Tokenizer>> {
    match spec {
        "chars4" => Ok(Arc::new(CharsPerToken4)),
        other => crate::usage_bail!("unknown tokenizer {other:?}"),
    }
}

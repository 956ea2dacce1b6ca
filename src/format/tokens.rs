//! Token counting: the tokenizers traj-compress and traj-filter share.
//!
//! [`load`] is the single entry point: it turns a `--tokenizer` spec into a tokenizer that
//! is built once and shared by all threads (`Arc<dyn Tokenizer>`).
//!
//! | spec | what counts |
//! |---|---|
//! | `o200k_base` (default), `cl100k_base` | OpenAI's encodings, counted with GitHub's `bpe-openai` (exact, and the fastest measured here) |
//! | `tiktoken-rs:o200k_base`, `tiktoken-rs:cl100k_base` | the same encodings counted with `tiktoken-rs` (for comparison; same counts); only in a build with the cargo feature `tiktoken-compare`, since each embeds a second copy of its table |
//! | `PATH.tiktoken`, `cl100k:PATH`, `o200k:PATH` | a tiktoken BPE file (base64 token, rank per line); the pre-tokenizer pattern is o200k's unless `cl100k:` is given |
//! | `PATH.json` (`tokenizer.json`) | a HuggingFace tokenizer, special tokens added as `encode` does by default |
//! | `DIR` (an HF tokenizer directory: `tokenizer.json` + `tokenizer_config.json`) | whole rows rendered with the model's own `chat_template` ([`crate::format::chat_template`]) and counted as transformers' `apply_chat_template(..., tokenize=True)` counts them (special tokens in the rendered text are tokens, none added); texts alone are counted without added special tokens |
//! | `chars4` | the test tokenizer: one token per 4 characters, rounded up |
//!
//! Text is counted as *ordinary* text: a literal `<|endoftext|>` inside a tool output is
//! tokenized like any other text, never as a special token (tiktoken's `encode_ordinary`).
//! Both BPE back-ends agree exactly on that (a test checks it on real trajectories).
//!
//! Threads: the BPE tables are shared; what holds per-search caches (the pre-tokenizer
//! regex) is built once per thread, because one shared regex serialises the threads on
//! its cache pool (see `performance-notes.md`, "Share tokenizers across threads"). Each
//! thread also remembers the counts of the short pieces it split last (`PieceMemo`):
//! text repeats its words, and a look-up costs a fraction of the BPE.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crate::format::chat_template::{ChatTemplate, ChatTemplateError};

mod fast_hf;
pub mod pieces;
mod tables;
pub use fast_hf::FastHf;

/// Why a `--tokenizer` spec gives no tokenizer.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    /// The spec names a tokenizer file that is not there (a usage error).
    #[error("tokenizer file {0:?} does not exist")]
    NoSuchFile(String),
    /// A comparison encoding this build leaves out (a usage error).
    #[error(
        "tokenizer {0:?} is not in this build (it is for comparisons: build with the cargo feature `tiktoken-compare`)"
    )]
    NotBuilt(String),
    /// The spec is none of the known forms (a usage error).
    #[error(
        "unknown tokenizer {0:?} (use o200k_base, cl100k_base, chars4, a .tiktoken file, a tokenizer.json or an HF tokenizer directory)"
    )]
    Unknown(String),
    #[error("cannot read {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}")]
    Tiktoken {
        path: String,
        #[source]
        source: TiktokenError,
    },
    #[error("{path}: not a usable tokenizer.json: {detail}")]
    HfJson { path: String, detail: String },
    /// The tokenizer directory's `chat_template` does not load.
    #[error("{path}")]
    Template {
        path: String,
        #[source]
        source: ChatTemplateError,
    },
    /// The BPE could not be built from its ranks and pattern.
    #[error("{name}: {detail}")]
    Build { name: String, detail: String },
}

impl TokenizerError {
    /// Always true: a tokenizer is named by the command line or a config, so a spec
    /// that is wrong (no such file, unknown name) and a tokenizer file that cannot be
    /// used are both the user's to fix: exit 2, as for any configuration error.
    pub fn is_usage(&self) -> bool {
        true
    }
}

/// A line of a `.tiktoken` file that is not `<base64> <rank>`.
#[derive(Debug, thiserror::Error)]
pub enum TiktokenError {
    #[error("line {0}: expected `<base64> <rank>`")]
    NoRank(usize),
    #[error("line {0}: bad base64: {1}")]
    Base64(usize, base64::DecodeError),
    #[error("line {0}: bad rank: {1}")]
    Rank(usize, std::num::ParseIntError),
    #[error("no tokens")]
    Empty,
}

/// Counts tokens of text. Implementations are built once and shared by all threads.
pub trait Tokenizer: Send + Sync {
    /// Number of tokens in `text`.
    fn count(&self, text: &str) -> usize;

    /// The name recorded in metrics (`o200k_base`, a file path, `chars4`...).
    fn name(&self) -> String;

    /// `Some(n)` with `n <= limit` when `text` has `n` tokens; `None` when it has more
    /// than `limit`. Tokenizers that can stop early override it.
    fn count_till_limit(&self, text: &str, limit: usize) -> Option<usize> {
        let n = self.count(text);
        (n <= limit).then_some(n)
    }

    /// True when any text of `b` bytes is guaranteed to count at most `b` tokens, and a
    /// sum of texts at most the sum of their bytes. Byte-level BPE has this property
    /// (every token covers at least one byte, and no tokens are added); so has `chars4`.
    /// A HuggingFace tokenizer may not (normalizers can lengthen text, special tokens
    /// are added per call), so it says `false`, and every row is counted.
    fn at_most_one_token_per_byte(&self) -> bool {
        false
    }

    /// The tokens of a whole row as the trainer sees it: its turns (ShareGPT or OpenAI)
    /// and `tools` rendered with the model's chat template. `None` when this tokenizer
    /// has no chat template (rows are then counted as the sum of their texts).
    fn count_chat(
        &self,
        _turns: &[serde_json::Value],
        _tools: Option<&serde_json::Value>,
    ) -> Option<Result<usize, ChatTemplateError>> {
        None
    }
}

/// The test tokenizer: one token per 4 characters, rounded up.
#[derive(Debug, Clone, Copy, Default)]
pub struct CharsPerToken4;

impl Tokenizer for CharsPerToken4 {
    fn count(&self, text: &str) -> usize {
        text.chars().count().div_ceil(4)
    }
    fn name(&self) -> String {
        "chars4".to_string()
    }
    fn at_most_one_token_per_byte(&self) -> bool {
        true
    }
}

/// The OpenAI encodings built into `bpe-openai`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Cl100k,
    O200k,
}

impl Encoding {
    fn name(self) -> &'static str {
        match self {
            Encoding::Cl100k => "cl100k_base",
            Encoding::O200k => "o200k_base",
        }
    }
}

// The pre-tokenizer patterns of bpe-openai 0.3 (its regex-automata form of tiktoken's
// look-ahead patterns: the second pattern's last character is a look-ahead).
const CL100K_PAT1: &str = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+$";
const O200K_PAT1: &str = concat!(
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    "|\\p{N}{1,3}",
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*",
    "|\\s*[\\r\\n]+",
    "|\\s+$"
);

/// The per-thread half of a bpe-openai tokenizer: its pre-tokenizer (a regex with a
/// cache). Built on a tiny byte alphabet because the crate only builds pre-tokenizers
/// together with an encoding; only `.pre` is used.
fn build_pretokenizer(enc: Encoding) -> bpe_openai::Tokenizer {
    let alphabet = bpe_openai::byte_pair_encoding::BytePairEncoding::from_dictionary(
        (0u8..=255).map(|b| vec![b]),
        None,
    );
    let pat1 = match enc {
        Encoding::Cl100k => CL100K_PAT1,
        Encoding::O200k => O200K_PAT1,
    };
    bpe_openai::Tokenizer::new_lookahead(
        alphabet,
        &[(pat1, false), ("\\s+\\s", true), ("\\s+", false)],
        false,
    )
    .expect("valid pre-tokenizer pattern")
}

thread_local! {
    static PRE_CL100K: bpe_openai::Tokenizer = build_pretokenizer(Encoding::Cl100k);
    static PRE_O200K: bpe_openai::Tokenizer = build_pretokenizer(Encoding::O200k);
}

/// `cl100k_base` / `o200k_base` counted with `bpe-openai` (shared tables, per-thread
/// pre-tokenizer).
///
/// The tables (about 0.2 s to deserialize for o200k) are loaded at the first count, so a
/// run whose rows are all proven under budget by their size never pays for them.
pub struct BpeOpenai {
    enc: Encoding,
}

impl BpeOpenai {
    pub fn new(enc: Encoding) -> BpeOpenai {
        BpeOpenai { enc }
    }

    fn bpe(&self) -> &'static bpe_openai::byte_pair_encoding::BytePairEncoding {
        match self.enc {
            Encoding::Cl100k => tables::cl100k(),
            Encoding::O200k => tables::o200k(),
        }
    }

    fn with_pre<R>(&self, f: impl FnOnce(&bpe_openai::Pretokenizer) -> R) -> R {
        let key = match self.enc {
            Encoding::Cl100k => &PRE_CL100K,
            Encoding::O200k => &PRE_O200K,
        };
        key.with(|t| f(t.pre.as_ref().expect("pre-tokenizer")))
    }

    /// `f` with this thread's pre-tokenizer and piece memo.
    fn with_split<R>(&self, f: impl FnOnce(&bpe_openai::Pretokenizer, &mut PieceMemo) -> R) -> R {
        let memo = match self.enc {
            Encoding::Cl100k => &MEMO_CL100K,
            Encoding::O200k => &MEMO_O200K,
        };
        self.with_pre(|pre| memo.with_borrow_mut(|m| f(pre, m)))
    }
}

/// The token counts of the short pieces a thread counted last: a direct-mapped table
/// (one slot per hash, the newest piece wins it). Text repeats its words, and the BPE
/// of a piece (two allocations and an automaton search) costs several times a look-up
/// here; a piece's count never changes, so the memo is exact.
struct PieceMemo {
    slots: Box<[MemoSlot]>,
}

/// One remembered piece: its bytes, their length, its tokens.
#[derive(Clone, Copy)]
struct MemoSlot {
    len: u8,
    tokens: u8,
    bytes: [u8; MEMO_PIECE],
}

/// The longest piece remembered (a slot is 32 bytes); longer pieces are rare and are
/// counted each time.
const MEMO_PIECE: usize = 30;
/// Slots per thread (128 KiB): a power of two.
const MEMO_SLOTS: usize = 4096;

impl PieceMemo {
    fn new() -> PieceMemo {
        let empty = MemoSlot {
            len: u8::MAX, // no piece has this length: the slot is free
            tokens: 0,
            bytes: [0; MEMO_PIECE],
        };
        PieceMemo {
            slots: vec![empty; MEMO_SLOTS].into_boxed_slice(),
        }
    }

    /// The tokens of `piece`, from the memo or from `bpe` (then remembered).
    fn count(
        &mut self,
        bpe: &bpe_openai::byte_pair_encoding::BytePairEncoding,
        piece: &[u8],
    ) -> usize {
        if piece.len() > MEMO_PIECE {
            return bpe.count(piece);
        }
        let slot = &mut self.slots[memo_index(piece)];
        if usize::from(slot.len) == piece.len() && &slot.bytes[..piece.len()] == piece {
            return usize::from(slot.tokens);
        }
        let n = bpe.count(piece);
        // A piece of at most 30 bytes has at most 30 tokens (each covers a byte).
        slot.len = piece.len() as u8;
        slot.tokens = n as u8;
        slot.bytes[..piece.len()].copy_from_slice(piece);
        n
    }
}

/// The slot of a piece of at most [`MEMO_PIECE`] bytes: its 8-byte words mixed with a
/// multiply-rotate hash, the top bits taken.
fn memo_index(piece: &[u8]) -> usize {
    let mut h = piece.len() as u64;
    for chunk in piece.chunks(8) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        h = (h.rotate_left(23) ^ u64::from_le_bytes(w)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    (h >> (64 - MEMO_SLOTS.trailing_zeros())) as usize
}

thread_local! {
    static MEMO_CL100K: RefCell<PieceMemo> = RefCell::new(PieceMemo::new());
    static MEMO_O200K: RefCell<PieceMemo> = RefCell::new(PieceMemo::new());
}

impl Tokenizer for BpeOpenai {
    fn count(&self, text: &str) -> usize {
        let bpe = self.bpe();
        self.with_split(|pre, memo| pre.split(text).map(|p| memo.count(bpe, p.as_bytes())).sum())
    }
    fn count_till_limit(&self, text: &str, limit: usize) -> Option<usize> {
        let bpe = self.bpe();
        self.with_split(|pre, memo| {
            pre.split(text).try_fold(0usize, |used, p| {
                let left = limit - used;
                if p.len() > MEMO_PIECE {
                    bpe.count_till_limit(p.as_bytes(), left).map(|n| used + n)
                } else {
                    let n = memo.count(bpe, p.as_bytes());
                    (n <= left).then_some(used + n)
                }
            })
        })
    }
    fn name(&self) -> String {
        self.enc.name().to_string()
    }
    fn at_most_one_token_per_byte(&self) -> bool {
        true
    }
}

static NEXT_ID: AtomicUsize = AtomicUsize::new(0);

type Ranks = rustc_hash::FxHashMap<Vec<u8>, u32>;
type Builder = dyn Fn() -> anyhow::Result<tiktoken_rs::CoreBPE> + Send + Sync;

thread_local! {
    static TIKTOKEN_TLS: RefCell<HashMap<usize, Arc<tiktoken_rs::CoreBPE>>> =
        RefCell::new(HashMap::new());
}

/// A tiktoken-rs `CoreBPE`, one instance per thread (built lazily by `build`).
pub struct Tiktoken {
    id: usize,
    name: String,
    build: Arc<Builder>,
}

impl Tiktoken {
    fn new(name: String, build: Arc<Builder>) -> Result<Tiktoken, TokenizerError> {
        // Build one now so a bad pattern or file fails at load time, not in a worker.
        let first = Arc::new(build().map_err(|e| TokenizerError::Build {
            name: name.clone(),
            detail: e.to_string(),
        })?);
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        TIKTOKEN_TLS.with(|m| m.borrow_mut().insert(id, first));
        Ok(Tiktoken { id, name, build })
    }

    fn core(&self) -> Arc<tiktoken_rs::CoreBPE> {
        TIKTOKEN_TLS.with(|m| {
            m.borrow_mut()
                .entry(self.id)
                .or_insert_with(|| Arc::new((self.build)().expect("checked at load")))
                .clone()
        })
    }
}

impl Tokenizer for Tiktoken {
    fn count(&self, text: &str) -> usize {
        self.core().encode_ordinary(text).len()
    }
    fn name(&self) -> String {
        self.name.clone()
    }
    fn at_most_one_token_per_byte(&self) -> bool {
        true
    }
}

const CL100K_TIKTOKEN_PAT: &str = "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|\\p{N}{1,3}+| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+|\\s++$|\\s*[\\r\\n]|\\s+(?!\\S)|\\s";

/// Parse a `.tiktoken` file: one `base64(token) rank` pair per line.
pub fn parse_tiktoken(text: &str) -> Result<Ranks, TiktokenError> {
    use base64::Engine as _;
    let mut ranks = Ranks::default();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let n = i + 1;
        let (tok, rank) = line.split_once(' ').ok_or(TiktokenError::NoRank(n))?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(tok)
            .map_err(|e| TiktokenError::Base64(n, e))?;
        let rank: u32 = rank.trim().parse().map_err(|e| TiktokenError::Rank(n, e))?;
        ranks.insert(bytes, rank);
    }
    if ranks.is_empty() {
        return Err(TiktokenError::Empty);
    }
    Ok(ranks)
}

/// How a HuggingFace `tokenizer.json` is encoded: by the `tokenizers` crate, or, when
/// the file is byte-level BPE over exactly o200k's vocabulary, merges and pre-tokenizer
/// (as `transformers`' tiktoken converter writes it), by the built-in o200k BPE with the
/// file's added tokens split out first ([`FastHf`]): the same counts, about 8x faster,
/// and without the `tokenizers` crate's ~500 MB of tables in memory.
enum HfEncoder {
    Hf(Box<tokenizers::Tokenizer>),
    Fast(FastHf),
}

impl HfEncoder {
    fn encode_len(&self, text: &str, add_special: bool) -> usize {
        if text.is_empty() {
            return 0;
        }
        match self {
            HfEncoder::Fast(f) => f.count(text, add_special),
            HfEncoder::Hf(t) => match t.encode_fast(text, add_special) {
                Ok(enc) => enc.len(),
                // The reference falls back to len // 4 when its tokenizer throws.
                Err(_) => text.chars().count() / 4,
            },
        }
    }
}

/// A HuggingFace `tokenizer.json`.
pub struct HfTokenizer {
    name: String,
    inner: HfEncoder,
}

impl Tokenizer for HfTokenizer {
    fn count(&self, text: &str) -> usize {
        self.inner.encode_len(text, true)
    }
    fn name(&self) -> String {
        self.name.clone()
    }
}

/// An HF tokenizer directory with a chat template: rows are rendered, then encoded as
/// transformers encodes a rendered chat (no special tokens added).
pub struct HfChat {
    name: String,
    inner: HfEncoder,
    template: ChatTemplate,
}

impl HfChat {
    fn encode_len(&self, text: &str) -> usize {
        self.inner.encode_len(text, false)
    }
}

impl Tokenizer for HfChat {
    fn count(&self, text: &str) -> usize {
        self.encode_len(text)
    }
    fn name(&self) -> String {
        self.name.clone()
    }
    fn count_chat(
        &self,
        turns: &[serde_json::Value],
        tools: Option<&serde_json::Value>,
    ) -> Option<Result<usize, ChatTemplateError>> {
        let msgs = crate::format::chat_template::messages(turns);
        Some(
            self.template
                .render(&msgs, tools)
                .map(|text| self.encode_len(&text)),
        )
    }
}

fn read_hf(path: &std::path::Path, name: &str) -> Result<HfEncoder, TokenizerError> {
    let text = std::fs::read(path).map_err(|source| TokenizerError::Read {
        path: name.to_string(),
        source,
    })?;
    if let Some(fast) = FastHf::recognise(&text) {
        return Ok(HfEncoder::Fast(fast));
    }
    tokenizers::Tokenizer::from_bytes(&text)
        .map(|t| HfEncoder::Hf(Box::new(t)))
        .map_err(|e| TokenizerError::HfJson {
            path: name.to_string(),
            detail: e.to_string(),
        })
}

/// An HF tokenizer directory: `tokenizer.json`, and `tokenizer_config.json` with its
/// `chat_template` when there is one.
fn load_dir(dir: &std::path::Path, spec: &str) -> Result<Arc<dyn Tokenizer>, TokenizerError> {
    let json = dir.join("tokenizer.json");
    if !json.is_file() {
        return Err(TokenizerError::NoSuchFile(json.display().to_string()));
    }
    let inner = read_hf(&json, &json.display().to_string())?;
    let cfg = dir.join("tokenizer_config.json");
    let template = if cfg.is_file() {
        ChatTemplate::from_config_file(&cfg).map_err(|source| TokenizerError::Template {
            path: cfg.display().to_string(),
            source,
        })?
    } else {
        None
    };
    Ok(match template {
        Some(template) => Arc::new(HfChat {
            name: spec.to_string(),
            inner,
            template,
        }),
        None => Arc::new(HfTokenizer {
            name: spec.to_string(),
            inner,
        }),
    })
}

fn builtin(spec: &str) -> Option<Arc<dyn Tokenizer>> {
    static CACHE: OnceLock<std::sync::Mutex<HashMap<String, Arc<dyn Tokenizer>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(t) = cache.get(spec) {
        return Some(t.clone());
    }
    let t: Arc<dyn Tokenizer> = match spec {
        "chars4" => Arc::new(CharsPerToken4),
        "o200k_base" | "o200k" => Arc::new(BpeOpenai::new(Encoding::O200k)),
        "cl100k_base" | "cl100k" => Arc::new(BpeOpenai::new(Encoding::Cl100k)),
        #[cfg(feature = "tiktoken-compare")]
        "tiktoken-rs:o200k_base" => {
            Arc::new(Tiktoken::new(spec.to_string(), Arc::new(tiktoken_rs::o200k_base)).ok()?)
        }
        #[cfg(feature = "tiktoken-compare")]
        "tiktoken-rs:cl100k_base" => {
            Arc::new(Tiktoken::new(spec.to_string(), Arc::new(tiktoken_rs::cl100k_base)).ok()?)
        }
        _ => return None,
    };
    cache.insert(spec.to_string(), t.clone());
    Some(t)
}

/// Build a tokenizer from its `--tokenizer` spec (see the module docs for the forms).
///
/// Built-in encodings are built once per process; asking again returns the same one.
pub fn load(spec: &str) -> Result<Arc<dyn Tokenizer>, TokenizerError> {
    if let Some(t) = builtin(spec) {
        return Ok(t);
    }
    if matches!(spec, "tiktoken-rs:o200k_base" | "tiktoken-rs:cl100k_base") {
        return Err(TokenizerError::NotBuilt(spec.to_string()));
    }
    let (pattern, path) = match spec.split_once(':') {
        Some(("cl100k", p)) => (Some(CL100K_TIKTOKEN_PAT), p),
        Some(("o200k", p)) => (Some(tiktoken_rs::O200K_BASE_PAT_STR), p),
        _ => (None, spec),
    };
    let p = std::path::Path::new(path);
    if pattern.is_none() && p.is_dir() {
        return load_dir(p, spec);
    }
    if pattern.is_some() || path.ends_with(".tiktoken") {
        if !p.is_file() {
            return Err(TokenizerError::NoSuchFile(path.to_string()));
        }
        let text = std::fs::read_to_string(p).map_err(|source| TokenizerError::Read {
            path: path.to_string(),
            source,
        })?;
        let ranks = parse_tiktoken(&text).map_err(|source| TokenizerError::Tiktoken {
            path: path.to_string(),
            source,
        })?;
        let pattern = pattern.unwrap_or(tiktoken_rs::O200K_BASE_PAT_STR);
        let ranks = Arc::new(ranks);
        let build =
            move || tiktoken_rs::CoreBPE::new((*ranks).clone(), Default::default(), pattern);
        return Ok(Arc::new(Tiktoken::new(spec.to_string(), Arc::new(build))?));
    }
    if path.ends_with(".json") {
        if !p.is_file() {
            return Err(TokenizerError::NoSuchFile(path.to_string()));
        }
        let inner = read_hf(p, path)?;
        return Ok(Arc::new(HfTokenizer {
            name: path.to_string(),
            inner,
        }));
    }
    Err(TokenizerError::Unknown(spec.to_string()))
}

#[cfg(test)]
mod tests;

//! A HuggingFace `tokenizer.json` that is o200k's byte-level BPE under another name,
//! recognised by its vocabulary, merges, pre-tokenizer and normalizer, and counted with
//! the built-in o200k BPE (equal counts, a fraction of the `tokenizers` crate's time and
//! memory). Any other file is left to `tokenizers`.

use super::*;

/// A byte-level BPE `tokenizer.json` whose vocabulary, merges, pre-tokenizer and
/// normalizer are o200k's, counted with the built-in o200k BPE. Its added tokens
/// (`<|im_start|>`...) are matched first, leftmost-longest as `tokenizers` matches
/// them, and count one each; the text between is ordinary text.
pub struct FastHf {
    bpe: BpeOpenai,
    /// The added tokens' contents, and their matcher (`None`: there are none).
    added: Option<aho_corasick::AhoCorasick>,
    /// Tokens the post-processor adds to a single sequence (`add_special_tokens`).
    post_added: usize,
}

/// GPT-2's byte-level alphabet: the character standing for each byte.
pub(super) fn byte_level_chars() -> [char; 256] {
    let mut out = ['\0'; 256];
    let mut n = 0u32;
    for b in 0..=255u8 {
        let printable = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        out[b as usize] = if printable {
            char::from(b)
        } else {
            n += 1;
            char::from_u32(255 + n).expect("a valid char")
        };
    }
    out
}

#[derive(serde::Deserialize)]
struct HfFile {
    #[serde(default)]
    added_tokens: Vec<HfAdded>,
    normalizer: Option<serde_json::Value>,
    pre_tokenizer: Option<serde_json::Value>,
    post_processor: Option<serde_json::Value>,
    model: HfModel,
}

#[derive(serde::Deserialize)]
struct HfAdded {
    content: String,
    #[serde(default)]
    single_word: bool,
    #[serde(default)]
    lstrip: bool,
    #[serde(default)]
    rstrip: bool,
}

#[derive(serde::Deserialize)]
struct HfModel {
    #[serde(rename = "type")]
    kind: Option<String>,
    dropout: Option<f64>,
    #[serde(default)]
    byte_fallback: bool,
    vocab: HashMap<String, u32>,
    merges: Vec<HfMerge>,
}

/// A merge: `"a b"` (older files) or `["a", "b"]`.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum HfMerge {
    Joined(String),
    Pair(String, String),
}

impl FastHf {
    /// The fast counter for `json` when it is o200k's byte-level BPE; `None` for any
    /// other tokenizer (which `tokenizers` then encodes).
    pub fn recognise(json: &[u8]) -> Option<FastHf> {
        let f: HfFile = serde_json::from_slice(json).ok()?;
        if f.model.kind.as_deref().is_some_and(|k| k != "BPE")
            || f.model.dropout.is_some()
            || f.model.byte_fallback
            || f.normalizer.as_ref().is_some_and(|n| !n.is_null())
        {
            return None;
        }
        // The pre-tokenizer: o200k's regex (isolated), then byte-level without its own
        // regex and without a prefix space.
        let pre = f.pre_tokenizer.as_ref()?;
        let steps = pre.get("pretokenizers")?.as_array()?;
        let [split, byte_level] = steps.as_slice() else {
            return None;
        };
        let ok_split = split.get("type")?.as_str()? == "Split"
            && split.pointer("/pattern/Regex")?.as_str()? == tiktoken_rs::O200K_BASE_PAT_STR
            && split.get("behavior")?.as_str()? == "Isolated"
            && !split.get("invert")?.as_bool()?;
        let ok_bytes = byte_level.get("type")?.as_str()? == "ByteLevel"
            && !byte_level.get("add_prefix_space")?.as_bool()?
            && !byte_level.get("use_regex")?.as_bool()?;
        if pre.get("type")?.as_str()? != "Sequence" || !ok_split || !ok_bytes {
            return None;
        }
        let post_added = match &f.post_processor {
            None | Some(serde_json::Value::Null) => 0,
            Some(p) => match p.get("type")?.as_str()? {
                "ByteLevel" => 0,
                "TemplateProcessing" => p
                    .get("single")?
                    .as_array()?
                    .iter()
                    .filter(|piece| piece.get("SpecialToken").is_some())
                    .count(),
                _ => return None,
            },
        };
        if f.added_tokens
            .iter()
            .any(|a| a.single_word || a.lstrip || a.rstrip)
        {
            return None;
        }
        // The vocabulary: every o200k token, at its rank, and nothing else but the
        // added tokens.
        let bpe = BpeOpenai::new(Encoding::O200k);
        let table = bpe.bpe();
        let chars = byte_level_chars();
        let mut reverse: HashMap<char, u8> = HashMap::with_capacity(256);
        for (b, c) in chars.iter().enumerate() {
            reverse.insert(*c, b as u8);
        }
        let decode =
            |s: &str| -> Option<Vec<u8>> { s.chars().map(|c| reverse.get(&c).copied()).collect() };
        let added: std::collections::HashSet<&str> =
            f.added_tokens.iter().map(|a| a.content.as_str()).collect();
        let n = table.num_tokens();
        let mut seen = vec![false; n];
        for (tok, &id) in &f.model.vocab {
            if added.contains(tok.as_str()) {
                continue;
            }
            let bytes = decode(tok)?;
            let i = id as usize;
            if i >= n || seen[i] || table.token_bytes(id) != bytes.as_slice() {
                return None;
            }
            seen[i] = true;
        }
        if seen.iter().any(|s| !s) {
            return None;
        }
        // The merges: each makes a token of the vocabulary, in the order of the ranks of
        // what they make (tiktoken's rule: the lowest-ranked pair merges first), and every
        // token longer than a byte is made by one.
        let mut made = vec![false; n];
        let mut last = 0u32;
        for m in &f.model.merges {
            let (a, b) = match m {
                HfMerge::Joined(s) => s.split_once(' ')?,
                HfMerge::Pair(a, b) => (a.as_str(), b.as_str()),
            };
            let id = *f.model.vocab.get(&format!("{a}{b}"))?;
            if id < last || (id as usize) >= n {
                return None;
            }
            last = id;
            made[id as usize] = true;
        }
        if (0..n).any(|i| !made[i] && table.token_len(i as u32) > 1) {
            return None;
        }
        let added = if f.added_tokens.is_empty() {
            None
        } else {
            let pats: Vec<&str> = f.added_tokens.iter().map(|a| a.content.as_str()).collect();
            Some(
                aho_corasick::AhoCorasick::builder()
                    .match_kind(aho_corasick::MatchKind::LeftmostLongest)
                    .build(pats)
                    .ok()?,
            )
        };
        Some(FastHf {
            bpe,
            added,
            post_added,
        })
    }

    pub(super) fn count(&self, text: &str, add_special: bool) -> usize {
        let extra = if add_special { self.post_added } else { 0 };
        let Some(ac) = &self.added else {
            return self.bpe.count(text) + extra;
        };
        let (mut n, mut at) = (extra, 0);
        for m in ac.find_iter(text) {
            n += self.bpe.count(&text[at..m.start()]) + 1;
            at = m.end();
        }
        n + self.bpe.count(&text[at..])
    }
}

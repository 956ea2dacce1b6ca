//! The tokens a model's tokenizer makes of a text, as ids and bytes, and the drift
//! between the tokens an endpoint sampled and those: `traj-filter --retokenize-check`.
//!
//! On-policy RL trains on the tokens that were sampled. A trainer that re-tokenizes the
//! text instead gets other tokens wherever the sampled sequence is not the one the
//! tokenizer would make of its own text (a word sampled as two pieces, bytes split
//! differently): the log-probabilities no longer belong to the tokens trained on.
//! [`drift`] re-tokenizes the text of a turn's sampled tokens (their bytes joined) with the
//! model's tokenizer (an HF `tokenizer.json`, read by the `tokenizers` crate, no special
//! tokens added) and names the first position where the two sequences differ.
//!
//! A sampled token is an entry of the OpenAI `logprobs.content` list: its `bytes` when the
//! server sent them, else its `token` text; vLLM's `token_id:N` spelling
//! (`return_tokens_as_token_ids`) is compared by id. A token's bytes are read from the
//! tokenizer's vocabulary through the byte-level alphabet (GPT-2's `bytes_to_unicode`)
//! when the token is spelled in it, else by decoding the token alone.

use std::collections::HashMap;

use super::TokenizerError;

/// A model's tokenizer, for the pieces of a text.
pub struct Pieces {
    inner: tokenizers::Tokenizer,
    /// The byte of each char of the byte-level alphabet.
    byte_of: HashMap<char, u8>,
}

impl std::fmt::Debug for Pieces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pieces").finish_non_exhaustive()
    }
}

/// One sampled token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sampled {
    Bytes(Vec<u8>),
    /// vLLM's `token_id:N`.
    Id(u32),
}

impl Pieces {
    /// The tokenizer of an HF tokenizer directory or `tokenizer.json`.
    pub fn load(spec: &str) -> Result<Pieces, TokenizerError> {
        let p = std::path::Path::new(spec);
        let file = if p.is_dir() {
            p.join("tokenizer.json")
        } else {
            p.to_path_buf()
        };
        if !file.is_file() || !file.to_string_lossy().ends_with(".json") {
            return Err(TokenizerError::Unknown(format!(
                "{spec} (--retokenize-check needs the model's tokenizer: an HF tokenizer directory or tokenizer.json)"
            )));
        }
        let inner =
            tokenizers::Tokenizer::from_file(&file).map_err(|e| TokenizerError::HfJson {
                path: file.display().to_string(),
                detail: e.to_string(),
            })?;
        Ok(Pieces {
            inner,
            byte_of: byte_level_alphabet(),
        })
    }

    /// The ids and bytes of the tokens of `text` (no special tokens added).
    pub fn encode(&self, text: &str) -> Result<Vec<(u32, Vec<u8>)>, String> {
        let enc = self
            .inner
            .encode(text, false)
            .map_err(|e| format!("the tokenizer refused the text: {e}"))?;
        Ok(enc
            .get_ids()
            .iter()
            .map(|&id| (id, self.bytes_of(id)))
            .collect())
    }

    /// The bytes of token `id`.
    fn bytes_of(&self, id: u32) -> Vec<u8> {
        if let Some(tok) = self.inner.id_to_token(id)
            && let Some(b) = tok
                .chars()
                .map(|c| self.byte_of.get(&c).copied())
                .collect::<Option<Vec<u8>>>()
        {
            return b;
        }
        self.inner
            .decode(&[id], false)
            .map(String::into_bytes)
            .unwrap_or_default()
    }

    /// The text of sampled ids.
    fn decode(&self, ids: &[u32]) -> Result<String, String> {
        self.inner
            .decode(ids, false)
            .map_err(|e| format!("the sampled ids do not decode: {e}"))
    }

    /// Where the sampled tokens differ from the tokens of their own text: `None` when
    /// they are the same sequence.
    pub fn drift(&self, sampled: &[Sampled]) -> Option<String> {
        let ids: Option<Vec<u32>> = sampled
            .iter()
            .map(|s| match s {
                Sampled::Id(i) => Some(*i),
                Sampled::Bytes(_) => None,
            })
            .collect();
        let (text, want): (String, Vec<Vec<u8>>) = match &ids {
            Some(ids) => match self.decode(ids) {
                Ok(t) => (t, ids.iter().map(|&i| self.bytes_of(i)).collect()),
                Err(e) => return Some(e),
            },
            None => {
                let mut joined = Vec::new();
                let mut want = Vec::with_capacity(sampled.len());
                for s in sampled {
                    let b = match s {
                        Sampled::Bytes(b) => b.clone(),
                        Sampled::Id(i) => self.bytes_of(*i),
                    };
                    joined.extend_from_slice(&b);
                    want.push(b);
                }
                match String::from_utf8(joined) {
                    Ok(t) => (t, want),
                    Err(_) => return Some("the sampled bytes are not UTF-8".into()),
                }
            }
        };
        let got = match self.encode(&text) {
            Ok(g) => g,
            Err(e) => return Some(e),
        };
        let same = match &ids {
            Some(ids) => got.iter().map(|(i, _)| *i).eq(ids.iter().copied()),
            None => got.iter().map(|(_, b)| b).eq(want.iter()),
        };
        if same {
            return None;
        }
        let at = got
            .iter()
            .zip(&want)
            .position(|((_, g), w)| g != w)
            .unwrap_or(got.len().min(want.len()));
        let show = |b: Option<&Vec<u8>>| {
            b.map_or("(end)".to_string(), |b| {
                format!("{:?}", String::from_utf8_lossy(b))
            })
        };
        Some(format!(
            "{} sampled tokens, {} re-tokenized; first difference at token {at}: sampled {}, re-tokenized {}",
            want.len(),
            got.len(),
            show(want.get(at)),
            show(got.get(at).map(|(_, b)| b))
        ))
    }
}

/// The sampled tokens of an OpenAI `logprobs` object (`content` entries).
pub fn sampled(logprobs: &serde_json::Value) -> Vec<Sampled> {
    let Some(entries) = logprobs
        .get("content")
        .and_then(serde_json::Value::as_array)
    else {
        return Vec::new();
    };
    entries
        .iter()
        .map(|e| {
            let token = e.get("token").and_then(serde_json::Value::as_str);
            if let Some(id) = token
                .and_then(|t| t.strip_prefix("token_id:"))
                .and_then(|n| n.parse().ok())
            {
                return Sampled::Id(id);
            }
            match e.get("bytes").and_then(serde_json::Value::as_array) {
                Some(b) => Sampled::Bytes(
                    b.iter()
                        .filter_map(|x| x.as_u64().and_then(|x| u8::try_from(x).ok()))
                        .collect(),
                ),
                None => Sampled::Bytes(token.unwrap_or("").as_bytes().to_vec()),
            }
        })
        .collect()
}

/// GPT-2's `bytes_to_unicode`, inverted: the byte each char of the byte-level alphabet
/// stands for.
fn byte_level_alphabet() -> HashMap<char, u8> {
    let mut m = HashMap::with_capacity(256);
    let printable =
        |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    let mut extra = 0;
    for b in 0u32..256 {
        let c = if printable(b) {
            b
        } else {
            extra += 1;
            255 + extra
        };
        m.insert(char::from_u32(c).expect("a valid char"), b as u8);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_alphabet_is_gpt2_s() {
        let m = byte_level_alphabet();
        assert_eq!(m.len(), 256);
        assert_eq!(m[&'Ġ'], b' ');
        assert_eq!(m[&'Ċ'], b'\n');
        assert_eq!(m[&'a'], b'a');
    }
}

//! A HuggingFace `tokenizer.json` that is o200k's byte-level BPE under another name,
//! recognised by its vocabulary, merges, pre-tokenizer and normalizer, and counted with
//! the built-in o200k BPE (equal counts, a fraction of the `tokenizers` crate's time and
//! memory). Any other file is left to `tokenizers`.

use std::borrow::Cow;

use rustc_hash::FxHashSet;
use serde_json::value::RawValue;

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

// The file is read once, borrowing its strings (no map of the vocabulary, no tree of
// values): only the fields that decide how text is split and counted are read, the
// others (the decoder, `version`) are skipped.
#[derive(serde::Deserialize)]
struct HfFile<'a> {
    #[serde(default, borrow)]
    truncation: Option<&'a RawValue>,
    #[serde(default, borrow)]
    padding: Option<&'a RawValue>,
    #[serde(default, borrow)]
    added_tokens: Vec<HfAdded<'a>>,
    #[serde(default, borrow)]
    normalizer: Option<&'a RawValue>,
    pre_tokenizer: Option<serde_json::Value>,
    post_processor: Option<serde_json::Value>,
    #[serde(borrow)]
    model: HfModel<'a>,
}

#[derive(serde::Deserialize)]
struct HfAdded<'a> {
    #[serde(borrow)]
    content: Cow<'a, str>,
    #[serde(default)]
    single_word: bool,
    #[serde(default)]
    lstrip: bool,
    #[serde(default)]
    rstrip: bool,
}

#[derive(serde::Deserialize)]
struct HfModel<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    dropout: Option<f64>,
    #[serde(default)]
    byte_fallback: bool,
    #[serde(default)]
    ignore_merges: bool,
    #[serde(default, borrow)]
    continuing_subword_prefix: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    end_of_word_suffix: Option<Cow<'a, str>>,
    #[serde(borrow)]
    vocab: Vocab<'a>,
    #[serde(borrow)]
    merges: Vec<HfMerge<'a>>,
}

/// A JSON string, borrowed from the file unless it has escapes.
#[derive(serde::Deserialize)]
#[serde(transparent)]
struct Str<'a>(#[serde(borrow)] Cow<'a, str>);

/// The vocabulary as written: (token, id) in file order.
struct Vocab<'a>(Vec<(Cow<'a, str>, u32)>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for Vocab<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = Vocab<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of tokens to ids")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<Vocab<'a>, A::Error> {
                let mut out = Vec::with_capacity(m.size_hint().unwrap_or(1 << 18));
                while let Some((Str(k), id)) = m.next_entry::<Str<'a>, u32>()? {
                    out.push((k, id));
                }
                Ok(Vocab(out))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// A merge: `"a b"` (older files) or `["a", "b"]`.
struct HfMerge<'a>(Cow<'a, str>, Cow<'a, str>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for HfMerge<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        fn joined<'a, E: Error>(s: Cow<'a, str>) -> Result<HfMerge<'a>, E> {
            let i = s
                .find(' ')
                .ok_or_else(|| E::custom("a merge without a space"))?;
            Ok(match s {
                Cow::Borrowed(s) => HfMerge(Cow::Borrowed(&s[..i]), Cow::Borrowed(&s[i + 1..])),
                Cow::Owned(s) => HfMerge(Cow::Owned(s[..i].into()), Cow::Owned(s[i + 1..].into())),
            })
        }
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = HfMerge<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a merge: \"a b\" or [\"a\", \"b\"]")
            }
            fn visit_borrowed_str<E: Error>(self, v: &'de str) -> Result<HfMerge<'a>, E> {
                joined(Cow::Borrowed(v))
            }
            fn visit_str<E: Error>(self, v: &str) -> Result<HfMerge<'a>, E> {
                joined(Cow::Owned(v.to_string()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> Result<HfMerge<'a>, A::Error> {
                let Str(a) = s
                    .next_element()?
                    .ok_or_else(|| A::Error::invalid_length(0, &self))?;
                let Str(b) = s
                    .next_element()?
                    .ok_or_else(|| A::Error::invalid_length(1, &self))?;
                if s.next_element::<serde::de::IgnoredAny>()?.is_some() {
                    return Err(A::Error::invalid_length(3, &self));
                }
                Ok(HfMerge(a, b))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

impl FastHf {
    /// The fast counter for `json` when it is o200k's byte-level BPE; `None` for any
    /// other tokenizer (which `tokenizers` then encodes).
    pub fn recognise(json: &[u8]) -> Option<FastHf> {
        // One UTF-8 check of the whole file, not one per string.
        let text = simdutf8::basic::from_utf8(json).ok()?;
        let f: HfFile = serde_json::from_str(text).ok()?;
        let m = &f.model;
        // Nothing that changes how many tokens `encode` gives: no truncation, padding or
        // normalizer, plain byte-level BPE that takes a word in the vocabulary as one
        // token (tiktoken's rule: `ignore_merges`).
        if f.truncation.is_some()
            || f.padding.is_some()
            || f.normalizer.is_some()
            || m.kind.as_deref().is_some_and(|k| k != "BPE")
            || m.dropout.is_some()
            || m.byte_fallback
            || !m.ignore_merges
            || m.continuing_subword_prefix
                .as_deref()
                .is_some_and(|p| !p.is_empty())
            || m.end_of_word_suffix
                .as_deref()
                .is_some_and(|p| !p.is_empty())
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
        // The file's vocabulary indexed, the two cores share the rest: one loads the
        // built-in tables, compares the vocabulary with them and finds the splits of the
        // later half of the tokens, the other those of the first half; then the merges
        // are compared with the splits.
        let bpe = BpeOpenai::new(Encoding::O200k);
        let ids = file_ids(&f)?;
        let half = ids.token.len() / 2;
        let (first, (later, same_vocab)) = std::thread::scope(|s| {
            let other = s.spawn(|| {
                let same = same_vocabulary(&ids, bpe.bpe());
                (splits(&ids, half..ids.token.len()), same)
            });
            let first = splits(&ids, 0..half);
            Some((first, other.join().ok()?))
        })?;
        if !same_vocab {
            return None;
        }
        same_merges(&f.model.merges, &ids, [first, later])?;
        let added = if f.added_tokens.is_empty() {
            None
        } else {
            let pats: Vec<&str> = f.added_tokens.iter().map(|a| a.content.as_ref()).collect();
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

/// The file's tokens by id (the added tokens left out), and a hash of each: whether a
/// string is one of them. (A string taken for a token by a collision of 64-bit hashes
/// can only make a file look less like o200k, never more: see [`same_merges`].)
struct Ids<'f> {
    token: Vec<&'f str>,
    known: FxHashSet<u64>,
}

fn hash(s: &str) -> u64 {
    std::hash::BuildHasher::hash_one(&rustc_hash::FxBuildHasher, s)
}

/// Index the file's vocabulary: each id once, from 0 with no gap, the added tokens left
/// out.
fn file_ids<'f>(f: &'f HfFile<'_>) -> Option<Ids<'f>> {
    let added: Vec<&str> = f.added_tokens.iter().map(|a| a.content.as_ref()).collect();
    let vocab = &f.model.vocab.0;
    let mut token: Vec<Option<&str>> = vec![None; vocab.len()];
    let mut known = FxHashSet::with_capacity_and_hasher(vocab.len(), Default::default());
    let mut n = 0;
    for (tok, i) in vocab {
        let tok = tok.as_ref();
        if added.contains(&tok) {
            continue;
        }
        let slot = token.get_mut(*i as usize)?;
        if slot.replace(tok).is_some() {
            return None;
        }
        known.insert(hash(tok));
        n = n.max(*i as usize + 1);
    }
    let token = token[..n].iter().copied().collect::<Option<Vec<&str>>>()?;
    Some(Ids { token, known })
}

/// The vocabulary: every o200k token at its rank, in GPT-2's byte-level characters, and
/// nothing else but the added tokens.
fn same_vocabulary(
    ids: &Ids<'_>,
    table: &bpe_openai::byte_pair_encoding::BytePairEncoding,
) -> bool {
    // The byte each byte-level character stands for (they are all below U+0144).
    let mut byte_of = [u16::MAX; 0x144];
    for (b, c) in byte_level_chars().iter().enumerate() {
        byte_of[*c as usize] = b as u16;
    }
    ids.token.len() == table.num_tokens()
        && ids.token.iter().enumerate().all(|(i, tok)| {
            let want = table.token_bytes(i as u32);
            tok.len() >= want.len()
                && tok.chars().count() == want.len()
                && tok
                    .chars()
                    .zip(want)
                    .all(|(c, &w)| byte_of.get(c as usize) == Some(&(w as u16)))
        })
}

/// Where each token of a range splits into two tokens of the vocabulary (byte offsets,
/// in order), token after token.
struct Splits {
    tokens: std::ops::Range<usize>,
    /// Per token: how many splits; then all the splits.
    count: Vec<u16>,
    at: Vec<u16>,
    /// A token longer than a byte has no split (no merge could make it), or is too long
    /// for these offsets: not o200k.
    unfit: bool,
}

fn splits(ids: &Ids<'_>, tokens: std::ops::Range<usize>) -> Splits {
    let mut out = Splits {
        tokens: tokens.clone(),
        count: Vec::with_capacity(tokens.len()),
        at: Vec::with_capacity(tokens.len() * 3),
        unfit: false,
    };
    for t in &ids.token[tokens] {
        let before = out.at.len();
        for (i, _) in t.char_indices().skip(1) {
            if ids.known.contains(&hash(&t[..i])) && ids.known.contains(&hash(&t[i..])) {
                out.at.push(i as u16);
            }
        }
        let n = out.at.len() - before;
        out.unfit |= (n == 0 && t.chars().nth(1).is_some()) || t.len() > u16::MAX as usize;
        out.count.push(n as u16);
    }
    out
}

/// The merges: exactly those transformers' tiktoken converter writes. Token by token in
/// rank order, every split of the token into two tokens of the vocabulary ([`splits`];
/// in any order within the token); every token longer than a byte is made by at least
/// one. HF's BPE with these merges (lowest rank first) and `ignore_merges` splits a word
/// as tiktoken's ranks do. (A split the hashes took for one, with a half that is no
/// token, is one the file must then have too; HF's BPE never applies such a merge.)
fn same_merges(merges: &[HfMerge<'_>], ids: &Ids<'_>, parts: [Splits; 2]) -> Option<()> {
    let mut at = 0;
    let mut got = Vec::new();
    for part in &parts {
        if part.unfit {
            return None;
        }
        let mut want = part.at.as_slice();
        for (t, &n) in ids.token[part.tokens.clone()].iter().zip(&part.count) {
            let n = n as usize;
            got.clear();
            for HfMerge(a, b) in merges.get(at..at + n)? {
                let (a, b) = (a.as_ref(), b.as_ref());
                if a.is_empty()
                    || a.len() + b.len() != t.len()
                    || !t.starts_with(a)
                    || !t.ends_with(b)
                {
                    return None;
                }
                got.push(a.len() as u16);
            }
            got.sort_unstable();
            let (mine, rest) = want.split_at(n);
            if got != mine {
                return None;
            }
            want = rest;
            at += n;
        }
    }
    (at == merges.len()).then_some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_borrow_from_the_file_unless_escaped() {
        let Str(plain) = serde_json::from_str(r#""ab c""#).unwrap();
        assert!(matches!(plain, Cow::Borrowed("ab c")));
        let Str(escaped) = serde_json::from_str(r#""a\nb""#).unwrap();
        assert!(matches!(escaped, Cow::Owned(ref s) if s == "a\nb"));
        let Vocab(v) = serde_json::from_str(r#"{"a": 0, "b\u0120": 1}"#).unwrap();
        assert!(matches!(v[0], (Cow::Borrowed("a"), 0)));
        assert!(matches!(v[1], (Cow::Owned(ref s), 1) if s == "b\u{120}"));
        for m in [r#""x y""#, r#"["x", "y"]"#] {
            let HfMerge(a, b) = serde_json::from_str(m).unwrap();
            assert!(
                matches!((a, b), (Cow::Borrowed("x"), Cow::Borrowed("y"))),
                "{m}"
            );
        }
    }
}

//! The tests of token counting: every tokenizer kind against its reference counts.

use super::*;

#[test]
fn chars4_counts_chars_not_bytes() {
    let t = load("chars4").unwrap();
    assert_eq!(t.count(""), 0);
    assert_eq!(t.count("12345678"), 2);
    assert_eq!(t.count("ééé"), 1);
    assert_eq!(t.name(), "chars4");
}

/// The piece memo gives what the BPE gives: over the real fixture rows (far more
/// distinct pieces than slots, so slots are taken over again and again), twice in a
/// row (the second time mostly from the memo), and for the early stop of
/// `count_till_limit`.
#[test]
fn the_piece_memo_counts_as_the_bpe() {
    let mut samples = crate::fixtures::lines(&["swe_agent_demo_trajs.jsonl"]);
    // Distinct pieces by the thousand: words, numbers, punctuation runs.
    let word = |mut i: usize| {
        let mut w = String::from(" ");
        while i > 0 {
            w.push(char::from(b'a' + (i % 26) as u8));
            i /= 26;
        }
        w
    };
    samples.push(
        (1..30_000)
            .map(|i| format!("{} {i}.{}", word(i), "!".repeat(i % 7)))
            .collect(),
    );
    samples.push(
        " the quick brown fox, Jumped over 12345 lazy dogs\r\n\t 日本語 🦀🦀🦀 \
                  supercalifragilisticexpialidocious ::<>?! ';DROP TABLE"
            .into(),
    );
    for enc in [Encoding::O200k, Encoding::Cl100k] {
        let b = BpeOpenai::new(enc);
        let bpe = b.bpe();
        let mut pieces = std::collections::HashSet::new();
        for round in 0..2 {
            for s in &samples {
                let plain: usize = b.with_pre(|pre| {
                    pre.split(s)
                        .map(|p| {
                            pieces.insert(p.to_string());
                            bpe.count(p.as_bytes())
                        })
                        .sum()
                });
                assert_eq!(b.count(s), plain, "{enc:?} round {round}");
            }
        }
        assert!(pieces.len() > 4 * MEMO_SLOTS, "{} pieces", pieces.len());
        let s = samples.last().unwrap();
        let n = b.count(s);
        for limit in 0..=n + 1 {
            let expect = (n <= limit).then_some(n);
            assert_eq!(
                b.count_till_limit(s, limit),
                expect,
                "{enc:?} limit {limit}"
            );
        }
    }
}

#[test]
fn bpe_back_ends_agree_exactly() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/swe_agent_demo_trajs.jsonl"
    ))
    .unwrap();
    let mut samples: Vec<String> = Vec::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        for m in v["history"].as_array().unwrap() {
            samples.push(crate::format::message::content_text(&m["content"]));
        }
    }
    samples.push("<|endoftext|> literal, 日本語のテキスト, emoji 🦀🦀, \r\n\t  x".into());
    // tiktoken-rs's own tables, whether or not this build offers them as specs.
    let o200k: Arc<Builder> = Arc::new(tiktoken_rs::o200k_base);
    let cl100k: Arc<Builder> = Arc::new(tiktoken_rs::cl100k_base);
    for (fast, slow, tables) in [
        ("o200k_base", "tiktoken-rs:o200k_base", o200k),
        ("cl100k_base", "tiktoken-rs:cl100k_base", cl100k),
    ] {
        let a = load(fast).unwrap();
        let b = Tiktoken::new(slow.to_string(), tables).unwrap();
        assert_eq!(
            load(slow).is_ok(),
            cfg!(feature = "tiktoken-compare"),
            "{slow} is a spec exactly when the feature is on"
        );
        let mut total = 0;
        for s in &samples {
            let n = a.count(s);
            assert_eq!(n, b.count(s), "{fast} vs {slow} on {s:?}");
            assert!(n <= s.len());
            assert_eq!(a.count_till_limit(s, n), Some(n));
            if n > 0 {
                assert_eq!(a.count_till_limit(s, n - 1), None);
            }
            total += n;
        }
        assert!(total > 10_000, "{total}");
    }
}

/// o200k as a `tokenizer.json`, written as transformers' tiktoken converter writes
/// it: byte-level vocabulary at the ranks, every split of a token into two tokens as
/// a merge (ordered by the rank of what it makes), o200k's regex, `<|endoftext|>`
/// and `<|im_start|>` as added tokens.
fn o200k_tokenizer_json() -> Vec<u8> {
    let table = tables::o200k();
    let chars = fast_hf::byte_level_chars();
    let enc = |b: &[u8]| -> String { b.iter().map(|&x| chars[x as usize]).collect() };
    let n = table.num_tokens() as u32;
    let mut vocab = serde_json::Map::new();
    let mut ids: HashMap<Vec<u8>, u32> = HashMap::new();
    for id in 0..n {
        let b = table.token_bytes(id).to_vec();
        vocab.insert(enc(&b), id.into());
        ids.insert(b, id);
    }
    let mut merges = Vec::new();
    for id in 0..n {
        let b = table.token_bytes(id);
        let mut local: Vec<(u32, u32, usize)> = (1..b.len())
            .filter_map(|i| Some((*ids.get(&b[..i])?, *ids.get(&b[i..])?, i)))
            .collect();
        local.sort();
        for (_, _, i) in local {
            merges.push(serde_json::json!([enc(&b[..i]), enc(&b[i..])]));
        }
    }
    let added: Vec<serde_json::Value> = [("<|endoftext|>", n), ("<|im_start|>", n + 1)]
        .iter()
        .map(|(c, id)| {
            serde_json::json!({"id": id, "content": c, "single_word": false, "lstrip": false,
                "rstrip": false, "normalized": false, "special": true})
        })
        .collect();
    for (c, id) in [("<|endoftext|>", n), ("<|im_start|>", n + 1)] {
        vocab.insert(c.into(), id.into());
    }
    serde_json::to_vec(&serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": tiktoken_rs::O200K_BASE_PAT_STR},
             "behavior": "Isolated", "invert": false},
            {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
             "use_regex": false}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": true,
                           "trim_offsets": false, "use_regex": true},
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true,
                    "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null,
                  "continuing_subword_prefix": null, "end_of_word_suffix": null,
                  "fuse_unk": false, "byte_fallback": false, "ignore_merges": true,
                  "vocab": vocab, "merges": merges}
    }))
    .unwrap()
}

/// An o200k `tokenizer.json` is counted by the built-in BPE, with exactly the counts
/// of the `tokenizers` crate on real text (added tokens in it included); a file that
/// differs in one merge is not recognised.
#[test]
fn o200k_tokenizer_json_counts_like_tokenizers() {
    let json = o200k_tokenizer_json();
    let fast = FastHf::recognise(&json).expect("recognised as o200k");
    let hf = tokenizers::Tokenizer::from_bytes(&json).unwrap();
    let mut samples: Vec<String> = Vec::new();
    for name in [
        "swe_agent_demo_trajs.jsonl",
        "llamafactory_glaive_toolcall_en.jsonl",
    ] {
        let text = std::fs::read_to_string(format!(
            "{}/tests/fixtures/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        for line in text.lines().take(120) {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let turns = v.get("history").or(v.get("conversations")).unwrap();
            for m in turns.as_array().unwrap() {
                let t = m.get("content").or(m.get("value")).unwrap();
                samples.push(crate::format::message::content_text(t));
            }
        }
    }
    samples.push(
        "<|im_start|>user\n日本語のテキスト<|endoftext|>, 🦀🦀, \r\n\t  x<|im_start|>".into(),
    );
    samples.push("<|endoftext|><|endoftext|>".into());
    let mut total = 0;
    for s in &samples {
        for add in [false, true] {
            let want = hf.encode_fast(s.as_str(), add).unwrap().len();
            assert_eq!(fast.count(s, add), want, "add_special {add} on {s:?}");
        }
        total += fast.count(s, false);
    }
    assert!(total > 50_000, "{total}");
    // One merge out of order: not o200k any more.
    let mut v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    v["model"]["merges"]
        .as_array_mut()
        .unwrap()
        .swap(10, 100_000);
    assert!(FastHf::recognise(&serde_json::to_vec(&v).unwrap()).is_none());
    // Through `load`: the file's path gives the fast counter.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("tokenizer.json");
    std::fs::write(&p, &json).unwrap();
    let t = load(p.to_str().unwrap()).unwrap();
    assert_eq!(
        t.count("hello <|endoftext|> world"),
        hf.encode_fast("hello <|endoftext|> world", true)
            .unwrap()
            .len()
    );
}

/// A file that differs from o200k anywhere that changes a count is left to the
/// `tokenizers` crate: one token's bytes, a token's id, a missing or extra merge, a
/// merge of another token's group, the pattern, and the model and file settings that
/// change what `encode` returns. Merges written as `"a b"` and in another order
/// within one token's group are still o200k.
#[test]
fn o200k_tokenizer_json_that_differs_is_not_recognised() {
    let base: serde_json::Value = serde_json::from_slice(&o200k_tokenizer_json()).unwrap();
    let recognised =
        |v: &serde_json::Value| FastHf::recognise(&serde_json::to_vec(v).unwrap()).is_some();
    assert!(recognised(&base));
    let edit = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut v = base.clone();
        f(&mut v);
        recognised(&v)
    };
    let merges = |v: &mut serde_json::Value| -> Vec<serde_json::Value> {
        v["model"]["merges"].as_array().unwrap().clone()
    };
    // within one token's group the order does not matter; "a b" reads as ["a", "b"]
    let group = merges(&mut base.clone())
        .windows(2)
        .position(|w| {
            let cat = |m: &serde_json::Value| {
                format!("{}{}", m[0].as_str().unwrap(), m[1].as_str().unwrap())
            };
            cat(&w[0]) == cat(&w[1])
        })
        .expect("a token made by two merges");
    assert!(edit(&|v| v["model"]["merges"]
        .as_array_mut()
        .unwrap()
        .swap(group, group + 1)));
    assert!(edit(&|v| {
        for m in v["model"]["merges"].as_array_mut().unwrap() {
            *m = format!("{} {}", m[0].as_str().unwrap(), m[1].as_str().unwrap()).into();
        }
    }));
    type Edit<'a> = Box<dyn Fn(&mut serde_json::Value) + 'a>;
    let cases: Vec<(&str, Edit)> = vec![
        (
            "a token's bytes",
            Box::new(|v| {
                let vocab = v["model"]["vocab"].as_object_mut().unwrap();
                let id = vocab.remove("hello").unwrap();
                vocab.insert("hellp".into(), id);
            }),
        ),
        (
            "two tokens' ids swapped",
            Box::new(|v| {
                let vocab = v["model"]["vocab"].as_object_mut().unwrap();
                let (a, b) = (vocab["hello"].clone(), vocab["world"].clone());
                vocab["hello"] = b;
                vocab["world"] = a;
            }),
        ),
        (
            "a token missing",
            Box::new(|v| {
                v["model"]["vocab"].as_object_mut().unwrap().remove("hello");
            }),
        ),
        (
            "an extra token",
            Box::new(|v| {
                v["model"]["vocab"]
                    .as_object_mut()
                    .unwrap()
                    .insert("zzzzzzzzzzq".into(), 300_000.into());
            }),
        ),
        (
            "a merge missing",
            Box::new(|v| {
                v["model"]["merges"].as_array_mut().unwrap().remove(group);
            }),
        ),
        (
            "a merge doubled",
            Box::new(|v| {
                let m = v["model"]["merges"][group].clone();
                v["model"]["merges"]
                    .as_array_mut()
                    .unwrap()
                    .insert(group, m);
            }),
        ),
        (
            "an extra merge at the end",
            Box::new(|v| {
                v["model"]["merges"]
                    .as_array_mut()
                    .unwrap()
                    .push(serde_json::json!(["a", "b"]));
            }),
        ),
        (
            "merges out of rank order",
            Box::new(|v| {
                v["model"]["merges"]
                    .as_array_mut()
                    .unwrap()
                    .swap(10, 100_000);
            }),
        ),
        (
            "another pattern",
            Box::new(|v| {
                v["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\s+|\\S+".into();
            }),
        ),
        (
            "ignore_merges off",
            Box::new(|v| v["model"]["ignore_merges"] = false.into()),
        ),
        (
            "a subword prefix",
            Box::new(|v| v["model"]["continuing_subword_prefix"] = "##".into()),
        ),
        ("dropout", Box::new(|v| v["model"]["dropout"] = 0.1.into())),
        (
            "truncation",
            Box::new(|v| {
                v["truncation"] = serde_json::json!({"direction": "Right", "max_length": 8,
                "strategy": "LongestFirst", "stride": 0});
            }),
        ),
        (
            "a normalizer",
            Box::new(|v| v["normalizer"] = serde_json::json!({"type": "NFC"})),
        ),
        (
            "an added token that strips",
            Box::new(|v| v["added_tokens"][0]["lstrip"] = true.into()),
        ),
    ];
    for (what, f) in &cases {
        assert!(!edit(f.as_ref()), "recognised as o200k with {what}");
    }
}

#[test]
fn huggingface_tokenizer_json() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokenizer.json");
    let json = serde_json::json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": [],
        "normalizer": null,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": null,
        "decoder": null,
        "model": {
            "type": "WordLevel",
            "vocab": {"hello": 0, "world": 1, "[UNK]": 2},
            "unk_token": "[UNK]"
        }
    });
    std::fs::write(&path, json.to_string()).unwrap();
    let t = load(path.to_str().unwrap()).unwrap();
    assert_eq!(t.count("hello world"), 2);
    assert_eq!(t.count("hello there, world"), 4);
    assert_eq!(t.count(""), 0);
    assert!(!t.at_most_one_token_per_byte());
    std::fs::write(&path, "{not a tokenizer").unwrap();
    assert!(load(path.to_str().unwrap()).is_err());
}

#[test]
fn tiktoken_file_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.tiktoken");
    use base64::Engine as _;
    let mut text = String::new();
    for b in 0u8..=255 {
        let tok = base64::engine::general_purpose::STANDARD.encode([b]);
        text.push_str(&format!("{tok} {b}\n"));
    }
    text.push_str(&format!(
        "{} 256\n",
        base64::engine::general_purpose::STANDARD.encode(b"ab")
    ));
    std::fs::write(&path, text).unwrap();
    let t = load(path.to_str().unwrap()).unwrap();
    assert_eq!(t.count("ab"), 1);
    assert_eq!(t.count("abc"), 2);
    let e = load("/nonexistent/x.tiktoken").err().unwrap();
    assert!(e.is_usage() && matches!(e, TokenizerError::NoSuchFile(_)));
    let e = load("nonsense").err().unwrap();
    assert!(e.is_usage() && matches!(e, TokenizerError::Unknown(_)));
    std::fs::write(&path, "QQ== 1\nnot-a-pair\n").unwrap();
    let e = load(path.to_str().unwrap()).err().unwrap();
    assert!(
        e.is_usage(),
        "a bad tokenizer file is a configuration error: exit 2"
    );
    assert!(matches!(
        e,
        TokenizerError::Tiktoken {
            source: TiktokenError::NoRank(2),
            ..
        }
    ));
    assert!(matches!(parse_tiktoken("\n"), Err(TiktokenError::Empty)));
}

//! The BPE tables of the built-in encodings (`o200k_base`, `cl100k_base`), embedded once
//! and compressed.
//!
//! bpe-openai embeds its tables serialized but uncompressed (32 MB for o200k, 15 MB for
//! cl100k), which made every binary that counts tokens 48 MB larger. traj embeds the same
//! serialized tables compressed with zstd (13 MB and 6 MB, in `tables/`) and reads them
//! at the first count: about 40 ms of decompression beside the deserialization
//! bpe-openai does anyway. bpe-openai's own `o200k_base()` / `cl100k_base()` are never
//! called outside tests, so the linker leaves its copies out.
//!
//! The files are bpe-openai's tables: a test checks that every token and the encoding
//! of the fixtures' text are the same as with bpe-openai's own; `TRAJ_BLESS=1 cargo test --lib format::tokens::tables` writes them again
//! (after a bpe or bpe-openai upgrade changes the tables or their serialization).

use std::sync::LazyLock;

use bpe_openai::byte_pair_encoding::BytePairEncoding;

static O200K: LazyLock<BytePairEncoding> =
    LazyLock::new(|| load(include_bytes!("tables/o200k_base.bpe.zst")));
static CL100K: LazyLock<BytePairEncoding> =
    LazyLock::new(|| load(include_bytes!("tables/cl100k_base.bpe.zst")));

/// o200k_base's table (loaded at the first call).
pub fn o200k() -> &'static BytePairEncoding {
    &O200K
}

/// cl100k_base's table (loaded at the first call).
pub fn cl100k() -> &'static BytePairEncoding {
    &CL100K
}

fn load(compressed: &[u8]) -> BytePairEncoding {
    let raw = zstd::decode_all(compressed).expect("the embedded table decompresses");
    rmp_serde::from_slice(&raw).expect("the embedded table is a BytePairEncoding")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// bpe-openai's table, serialized as the embedded files hold it.
    fn serialized(table: &BytePairEncoding) -> Vec<u8> {
        rmp_serde::to_vec(table).expect("serializes")
    }

    use super::*;

    /// Real text in many scripts: the fixtures' rows.
    fn sample_text() -> Vec<u8> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let mut text = Vec::new();
        for entry in std::fs::read_dir(dir).expect("tests/fixtures") {
            let p = entry.unwrap().path();
            if p.extension().is_some_and(|e| e == "jsonl") {
                text.extend(std::fs::read(&p).unwrap().into_iter().take(200_000));
            }
        }
        assert!(text.len() > 100_000, "too little sample text");
        text
    }

    #[test]
    fn the_embedded_tables_are_bpe_openai_s() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/format/tokens/tables");
        let tables = [
            ("o200k_base", &bpe_openai::o200k_base().bpe, o200k()),
            ("cl100k_base", &bpe_openai::cl100k_base().bpe, cl100k()),
        ];
        for (name, theirs, ours) in tables {
            let want = serialized(theirs);
            let file = dir.join(format!("{name}.bpe.zst"));
            if std::env::var_os("TRAJ_BLESS").is_some() {
                let z = zstd::encode_all(&want[..], 19).expect("compresses");
                std::fs::write(&file, z).expect("writes the table");
                continue;
            }
            // The serialized maps' order is not stable across a round trip, so the
            // tables are compared by what they hold and what they do.
            assert!(
                file.is_file(),
                "{}: missing; TRAJ_BLESS=1 writes it",
                file.display()
            );
            assert_eq!(
                ours.num_tokens(),
                theirs.num_tokens(),
                "{name}: token count"
            );
            for id in 0..theirs.num_tokens() as u32 {
                assert!(
                    ours.token_bytes(id) == theirs.token_bytes(id),
                    "{name}: token {id} differs; TRAJ_BLESS=1 writes the table again"
                );
            }
            let text = sample_text();
            assert_eq!(
                ours.encode_via_backtracking(&text),
                theirs.encode_via_backtracking(&text),
                "{name}: encodings differ"
            );
            assert_eq!(ours.count(&text), theirs.count(&text));
        }
    }
}

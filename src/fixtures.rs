//! The repository's test fixtures (`tests/fixtures/`), read the one way the unit tests
//! of every module read them.

use serde_json::Value;

/// The Hermes ShareGPT fixtures: the reasoning tool-use rows and the repair cases.
pub const HERMES: [&str; 2] = [
    "hermes_reason_tool_use_50.jsonl",
    "hermes_agent_repairs.jsonl",
];

/// The `.jsonl` files of `tests/fixtures/`, sorted.
pub fn jsonl_files() -> Vec<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    files
}

/// The text of `tests/fixtures/NAME`.
pub fn text(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The non-empty lines of the fixtures `names`, in order.
pub fn lines(names: &[&str]) -> Vec<String> {
    names
        .iter()
        .flat_map(|n| {
            text(n)
                .lines()
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The `value` of every `conversations` turn `from` the given role in the Hermes
/// fixtures (rows that are not JSON objects are skipped: the repair cases hold some).
pub fn hermes_turns(from: &str) -> Vec<String> {
    let mut texts = Vec::new();
    for line in lines(&HERMES) {
        let Ok(Value::Object(row)) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        for m in row["conversations"].as_array().into_iter().flatten() {
            if m["from"] == from {
                texts.push(m["value"].as_str().unwrap().to_string());
            }
        }
    }
    texts
}

/// `text` as it is, then with each edit `(from, to)` made once and made everywhere.
pub fn edited(text: &str, edits: &[(&str, &str)]) -> Vec<String> {
    let mut variants = vec![text.to_string()];
    for (from, to) in edits {
        variants.push(text.replacen(from, to, 1));
        variants.push(text.replace(from, to));
    }
    variants
}

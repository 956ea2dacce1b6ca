//! A row traj-compress changes keeps the shape of its messages: where the other messages
//! write their `content` as typed parts, the summary and the notice are typed parts
//! too, under the same key, so that HF `datasets` loads the output (one type per
//! column) as it loads the input.

use serde_json::{Value, json};

use crate::training::load_in_datasets;
use crate::util::*;

/// Compress `input` offline (chars4) into `out.jsonl`; the rows written.
fn compress(d: &std::path::Path, input: &std::path::Path, budget: &str) -> Vec<Value> {
    let mut c = cmd("traj-compress", d);
    c.args(["--offline", "--no-metrics", "--tokenizer", "chars4"]);
    c.args([
        "--target-max-tokens",
        budget,
        "--summary-target-tokens",
        "50",
    ]);
    c.arg(input).args(["-o", "out.jsonl"]);
    assert_code(&run(c), 0);
    read_jsonl(&d.join("out.jsonl"))
}

const LOAD: &str = r#"
import sys, datasets
datasets.disable_progress_bars()
ds = datasets.load_dataset("json", data_files=sys.argv[1], split="train", cache_dir=sys.argv[2])
assert len(ds) == int(sys.argv[3]), len(ds)
print("version", datasets.__version__)
print("ok")
"#;

/// LLaMA-Factory's typed parts (`{"type": "text", "value": ...}`): the summary is a
/// one-part list and the notice one more part, both with `value`. Before, the summary's
/// content was a string (`ArrowInvalid: ... changed from array to string` in datasets
/// 4.0) and the notice a `{"type": "text", "text": ...}` part.
#[test]
fn summary_and_notice_of_typed_parts_load_in_datasets() {
    let d = tmpdir();
    let part = |s: String| json!([{"type": "text", "value": s}]);
    let mut msgs = vec![
        json!({"role": "system", "content": part("sys".into())}),
        json!({"role": "user", "content": part("task".into())}),
    ];
    for k in 0..10 {
        msgs.push(json!({"role": "assistant", "content": part(format!("step{k} ").repeat(100))}));
        msgs.push(json!({"role": "user", "content": part(format!("more{k} ").repeat(100))}));
    }
    let short = json!({"messages": msgs[..3]});
    let text = format!("{}\n{short}\n", json!({"messages": msgs}));
    std::fs::write(d.path().join("in.jsonl"), text).unwrap();
    let out = compress(d.path(), &d.path().join("in.jsonl"), "500");
    let m = out[0]["messages"].as_array().unwrap();
    let summary = m
        .iter()
        .find(|t| {
            t["content"][0]["value"]
                .as_str()
                .is_some_and(|s| s.contains("[CONTEXT SUMMARY]"))
        })
        .unwrap_or_else(|| panic!("no summary part in {}", out[0]));
    assert_eq!(summary["content"].as_array().unwrap().len(), 1, "{summary}");
    assert_eq!(summary["content"][0]["type"], "text");
    let sys = m[0]["content"].as_array().unwrap();
    assert_eq!(sys.len(), 2, "the notice is one more part: {sys:?}");
    assert_eq!(
        sys[1].as_object().unwrap().keys().collect::<Vec<_>>(),
        ["type", "value"]
    );
    for t in m {
        assert!(t["content"].is_array(), "{t}");
    }
    load_in_datasets(d.path(), LOAD, &d.path().join("out.jsonl"), &["2"]);

    // The fixture at 1,500 tokens (some rows compressed, some not) loads as well.
    let fixture = fixture("llamafactory_reason_tool_use_50.jsonl");
    let out = compress(d.path(), &fixture, "1500");
    let summaries = out
        .iter()
        .filter(|r| {
            serde_json::to_string(r)
                .unwrap()
                .contains("[CONTEXT SUMMARY]")
        })
        .count();
    assert!(summaries > 0, "nothing was compressed");
    load_in_datasets(
        d.path(),
        LOAD,
        &d.path().join("out.jsonl"),
        &[&out.len().to_string()],
    );
}

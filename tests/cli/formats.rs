//! File formats every stage reads and writes: gzip and zstd by content on input and by
//! name on output, JSON-array files, and directories laid out like a HuggingFace cache
//! snapshot (searched recursively, symbolic links followed).

use std::path::Path;
use std::process::Command;

use crate::util::*;

fn sh(dir: &Path, script: &str) {
    let st = Command::new("sh")
        .args(["-c", script])
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(st.success(), "{script}");
}

#[test]
fn compressed_outputs_by_name_and_inputs_by_content() {
    let d = tmpdir();
    let src = fixture("hermes_reason_tool_use_50.jsonl");
    let plain = std::fs::read(&src).unwrap();
    for (out, unpack) in [("o.jsonl.gz", "gzip -dc"), ("o.jsonl.zst", "zstd -dcq")] {
        for b in ["traj-filter", "traj-merge"] {
            let mut c = cmd(b, d.path());
            c.arg(&src).args(["-o", out]);
            assert_code(&run(c), 0);
            let o = Command::new("sh")
                .args(["-c", &format!("{unpack} {out}")])
                .current_dir(d.path())
                .output()
                .unwrap();
            assert!(o.status.success());
            assert_eq!(o.stdout, plain, "{b} -o {out}");
            // ... and the compressed file reads back, whatever its name.
            std::fs::rename(d.path().join(out), d.path().join("renamed.jsonl")).unwrap();
            let mut c = cmd("traj-filter", d.path());
            c.arg("renamed.jsonl");
            let o = run(c);
            assert_code(&o, 0);
            assert_eq!(o.stdout, plain);
        }
    }
}

#[test]
fn json_array_files_read_as_rows() {
    let d = tmpdir();
    let src = fixture("hermes_reason_tool_use_50.jsonl");
    let rows = read_jsonl(&src);
    let pretty = serde_json::to_string_pretty(&rows).unwrap();
    std::fs::write(d.path().join("rows.json"), pretty).unwrap();
    let mut c = cmd("traj-normalize", d.path());
    c.arg(&src);
    let want = run(c);
    assert_code(&want, 0);
    let mut c = cmd("traj-normalize", d.path());
    c.arg("rows.json");
    let got = run(c);
    assert_code(&got, 0);
    assert_eq!(parse_jsonl(&stdout(&got)), parse_jsonl(&stdout(&want)));
    // A broken array names the file.
    std::fs::write(d.path().join("bad.json"), "[{\"a\":1}] trailing").unwrap();
    let mut c = cmd("traj-filter", d.path());
    c.arg("bad.json");
    let o = run(c);
    assert_code(&o, 1);
    assert!(stderr(&o).contains("bad.json"), "{}", stderr(&o));
}

#[test]
fn a_hub_cache_snapshot_directory_is_searched_recursively() {
    let d = tmpdir();
    let src = fixture("hermes_reason_tool_use_50.jsonl");
    // datasets--org--name/{blobs/HASH, snapshots/REV/data/train-0000{0,1}.jsonl -> blobs}
    sh(
        d.path(),
        &format!(
            "set -e; r=hub/datasets--org--name; mkdir -p $r/blobs $r/snapshots/abc123/data; \
             head -n 20 {s} > $r/blobs/b1; tail -n +21 {s} | zstd -q > $r/blobs/b2; \
             ln -s ../../../blobs/b1 $r/snapshots/abc123/data/train-00000.jsonl; \
             ln -s ../../../blobs/b2 $r/snapshots/abc123/data/train-00001.jsonl.zst; \
             echo 'not data' > $r/snapshots/abc123/README.md",
            s = src.display()
        ),
    );
    let mut c = cmd("traj-filter", d.path());
    c.arg("hub/datasets--org--name/snapshots");
    let o = run(c);
    assert_code(&o, 0);
    assert_eq!(o.stdout, std::fs::read(&src).unwrap());
}

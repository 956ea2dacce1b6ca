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

fn python(dir: &Path, code: &str) -> String {
    let o = Command::new(data_python())
        .args(["-c", code])
        .current_dir(dir)
        .output()
        .expect("python3 must be installed for this test (scripts/setup.sh)");
    assert!(
        o.status.success(),
        "python failed (pyarrow and datasets come with `make setup`):\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// What traj writes as Parquet (schema 2: one typed column per member), pyarrow and
/// `datasets` read as typed columns, every row with every value; traj reads it back.
/// (tests/cli/parquet_typed.rs covers every fixture source and both `datasets`.)
#[test]
fn parquet_written_by_traj_reads_in_pyarrow_datasets_and_traj() {
    let d = tmpdir();
    let src = fixture("hermes_reason_tool_use_50.jsonl");
    for b in ["traj-filter", "traj-normalize", "traj-merge"] {
        let mut c = cmd(b, d.path());
        c.arg(&src).args(["-o", "out.parquet"]);
        assert_code(&run(c), 0);
        let mut c = cmd(b, d.path());
        c.arg(&src);
        let want = parse_jsonl(&stdout(&run(c)));
        let got = python(
            d.path(),
            "import pyarrow.parquet as pq, json, datasets\n\
             t = pq.read_table('out.parquet')\n\
             assert t.schema.metadata[b'traj.schema'] == b'2', t.schema.metadata\n\
             assert 'row' not in t.schema.names, t.schema\n\
             assert str(t.schema.field('conversations').type) == \
             'list<item: struct<from: string, value: string>>', t.schema\n\
             ds = datasets.load_dataset('parquet', data_files='out.parquet', split='train')\n\
             assert ds.num_rows == t.num_rows\n\
             assert ds.column_names == t.schema.names, (ds.column_names, t.schema.names)\n\
             assert ds.to_list() == t.to_pylist()\n\
             json_fields = json.loads(t.schema.metadata[b'traj.json_fields'])\n\
             for r in t.to_pylist():\n\
             \x20   for k in json_fields:\n\
             \x20       if r.get(k) is not None: r[k] = json.loads(r[k])\n\
             \x20   print(json.dumps({k: v for k, v in r.items() if v is not None}))\n",
        );
        assert_eq!(parse_jsonl(&got), want, "{b}");
        // traj reads its own file back, every value intact.
        let mut c = cmd("traj-filter", d.path());
        c.arg("out.parquet");
        let o = run(c);
        assert_code(&o, 0);
        assert_eq!(parse_jsonl(&stdout(&o)), want, "{b}");
    }
}

/// Parquet that pyarrow writes, laid out as the Hub lays out a sharded dataset, reads
/// in traj as the same rows.
#[test]
fn parquet_from_pyarrow_in_a_hub_layout_reads_in_traj() {
    let d = tmpdir();
    let src = fixture("hermes_reason_tool_use_50.jsonl");
    python(
        d.path(),
        &format!(
            "import pyarrow as pa, pyarrow.parquet as pq, json, os\n\
             rows = [json.loads(l) for l in open('{}')]\n\
             os.makedirs('ds/data', exist_ok=True)\n\
             for k, part in enumerate([rows[:30], rows[30:]]):\n\
             \x20   pq.write_table(pa.Table.from_pylist(part), \
             f'ds/data/train-{{k:05d}}-of-00002.parquet', compression='snappy', row_group_size=7)\n\
             with open('want.jsonl', 'w') as f:\n\
             \x20   for r in rows: f.write(json.dumps(r) + '\\n')\n",
            src.display()
        ),
    );
    let mut c = cmd("traj-filter", d.path());
    c.arg("ds");
    let o = run(c);
    assert_code(&o, 0);
    assert_eq!(
        parse_jsonl(&stdout(&o)),
        read_jsonl(&d.path().join("want.jsonl"))
    );
    // From stdin too, whatever the name.
    let c = cmd("traj-normalize", d.path());
    let bytes = std::fs::read(d.path().join("ds/data/train-00000-of-00002.parquet")).unwrap();
    let o = run_with_stdin(c, &bytes);
    assert_code(&o, 0);
    assert_eq!(parse_jsonl(&stdout(&o)).len(), 30);
}

/// `--glob` chooses the files of a Hub cache snapshot (symbolic links into `blobs/`),
/// matched against the path below the directory given, in every stage that takes
/// directories; without `--glob` every split is read; a pattern that matches nothing
/// is a usage error naming it.
#[test]
fn glob_chooses_the_files_of_a_hub_snapshot() {
    let d = tmpdir();
    let src = fixture("hermes_reason_tool_use_50.jsonl");
    // datasets--org--name/snapshots/REV/{data/train-0000{0,1}-of-00002.jsonl,
    // data/test-00000-of-00001.jsonl.gz, extra/notes.txt} -> blobs/
    sh(
        d.path(),
        &format!(
            "set -e; r=hub/datasets--org--name; s=$r/snapshots/abc123; \
             mkdir -p $r/blobs $s/data $s/extra; \
             head -n 20 {f} > $r/blobs/b1; sed -n 21,35p {f} > $r/blobs/b2; \
             tail -n +36 {f} | gzip -c > $r/blobs/b3; echo 'not data' > $r/blobs/b4; \
             ln -s ../../../blobs/b1 $s/data/train-00000-of-00002.jsonl; \
             ln -s ../../../blobs/b2 $s/data/train-00001-of-00002.jsonl; \
             ln -s ../../../blobs/b3 $s/data/test-00000-of-00001.jsonl.gz; \
             ln -s ../../../blobs/b4 $s/extra/notes.txt",
            f = src.display()
        ),
    );
    let lines: Vec<String> = std::fs::read_to_string(&src)
        .unwrap()
        .lines()
        .map(|l| format!("{l}\n"))
        .collect();
    let train = lines[..35].concat();
    let snap = "hub/datasets--org--name/snapshots";
    for pattern in [
        "abc123/data/train-*",
        "train-*",
        "**/train-*-of-00002.jsonl",
    ] {
        let mut c = cmd("traj-filter", d.path());
        c.args([snap, "--glob", pattern]);
        let o = run(c);
        assert_code(&o, 0);
        assert_eq!(stdout(&o), train, "--glob {pattern}");
    }
    // `*` does not cross a folder: `data/train-*` names nothing below `snapshots/`.
    let mut c = cmd("traj-filter", d.path());
    c.args([snap, "--glob", "data/train-*"]);
    let o = run(c);
    assert_code(&o, 2);
    assert!(
        stderr(&o).contains("--glob 'data/train-*'"),
        "{}",
        stderr(&o)
    );
    // A test split, compressed, chosen by name; the other stages take --glob too.
    for b in ["traj-normalize", "traj-merge", "traj-filter"] {
        let mut c = cmd(b, d.path());
        c.args([snap, "--glob", "test-*.jsonl.gz"]);
        let o = run(c);
        assert_code(&o, 0);
        assert_eq!(parse_jsonl(&stdout(&o)).len(), 15, "{b}");
    }
    // Without --glob: every data file (train and test), not notes.txt.
    let mut c = cmd("traj-filter", d.path());
    c.arg(snap);
    let o = run(c);
    assert_code(&o, 0);
    assert_eq!(stdout(&o).lines().count(), 50);
    // A glob that picks a file that is not data: refused with file:line.
    let mut c = cmd("traj-filter", d.path());
    c.args([snap, "--glob", "abc123/extra/*"]);
    let o = run(c);
    assert_code(&o, 1);
    assert!(stderr(&o).contains("notes.txt:1"), "{}", stderr(&o));
}

/// A Parquet file of `datasets` 5's `Json()` columns (Parquet's `JSON` logical type,
/// Arrow's `arrow.json` extension; `messages: List(Json())`, `extra: Json()`), made here
/// with the parquet crate as `Dataset.to_parquet` makes it: a stage's Parquet output
/// keeps those columns of that type, so that `datasets` 5 loads the messages as dicts
/// again, not as strings; every value reads back as it was.
#[test]
fn json_columns_of_a_parquet_input_stay_json_in_the_output() {
    use std::sync::Arc;

    use arrow_array::builder::{ListBuilder, StringBuilder};
    use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
    use arrow_schema::extension::Json;
    use arrow_schema::{DataType, Field, Schema};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::basic::LogicalType;

    let d = tmpdir();
    let json =
        |name: &str| Field::new(name, DataType::Utf8, true).with_extension_type(Json::default());
    let rows = [
        (
            1,
            [
                r#"{"role":"user","content":"q"}"#,
                r#"{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":{"movie_id":"tt01"}}}]}"#,
                r#"{"role":"tool","tool_call_id":"c1","content":"ok"}"#,
                r#"{"role":"assistant","content":"done"}"#,
            ],
            r#"{"a":1}"#,
        ),
        (
            2,
            [
                r#"{"role":"user","content":"q"}"#,
                r#"{"role":"assistant","content":null,"tool_calls":[{"id":"c2","type":"function","function":{"name":"f","arguments":{"movie_id":42}}}]}"#,
                r#"{"role":"tool","tool_call_id":"c2","content":"ok"}"#,
                r#"{"role":"assistant","content":"done"}"#,
            ],
            r#"{"b":"x"}"#,
        ),
    ];
    let mut messages = ListBuilder::new(StringBuilder::new()).with_field(Arc::new(json("element")));
    for (_, m, _) in &rows {
        messages.append_value(m.iter().map(Some));
    }
    let messages = messages.finish();
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("messages", messages.data_type().clone(), true),
        json("extra"),
    ]));
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
        Arc::new(messages),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.2))),
    ];
    let batch = RecordBatch::try_new(schema.clone(), cols).unwrap();
    let f = std::fs::File::create(d.path().join("in.parquet")).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(f, schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let want: Vec<serde_json::Value> = rows
        .iter()
        .map(|(id, m, e)| {
            let m: Vec<serde_json::Value> =
                m.iter().map(|x| serde_json::from_str(x).unwrap()).collect();
            let e: serde_json::Value = serde_json::from_str(e).unwrap();
            serde_json::json!({"id": id, "messages": m, "extra": e})
        })
        .collect();

    for (b, args) in [
        ("traj-filter", &[][..]),
        ("traj-normalize", &["--to", "openai"][..]),
    ] {
        let mut c = cmd(b, d.path());
        c.arg("in.parquet").args(args).args(["-o", "out.parquet"]);
        assert_code(&run(c), 0);
        let r = ParquetRecordBatchReaderBuilder::try_new(
            std::fs::File::open(d.path().join("out.parquet")).unwrap(),
        )
        .unwrap();
        let logical: Vec<(String, Option<LogicalType>)> = r
            .parquet_schema()
            .columns()
            .iter()
            .map(|c| (c.path().string(), c.logical_type_ref().cloned()))
            .filter(|(p, _)| p.starts_with("messages.") || p == "extra")
            .collect();
        assert_eq!(
            logical,
            [
                ("messages.list.element".to_string(), Some(LogicalType::Json)),
                ("extra".to_string(), Some(LogicalType::Json)),
            ],
            "{b}"
        );
        let out = r.schema();
        assert_eq!(
            out.field_with_name("extra").unwrap().extension_type_name(),
            Some("arrow.json"),
            "{b}"
        );
        if b == "traj-filter" {
            let mut c = cmd("traj-filter", d.path());
            c.arg("out.parquet");
            let o = run(c);
            assert_code(&o, 0);
            assert_eq!(parse_jsonl(&stdout(&o)), want);
        }
    }
}

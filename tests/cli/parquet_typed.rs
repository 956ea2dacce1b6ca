//! Parquet of typed columns (`traj.schema = 2`): every fixture source, written by traj
//! as `out.parquet` and as `out.jsonl`, loads in HF `datasets` 4.0.0 and 5.x with the
//! same columns and values by `load_dataset("parquet")` as by `load_dataset("json")`
//! (JSON-text columns, named in the field metadata, decoded); a Hub-style Parquet input
//! keeps its own column types; and traj reads its own Parquet back as the JSONL's values.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::training::{load_in_datasets, sources};
use crate::util::*;

/// Fixtures that are not trajectory rows (`traj-run` prompts), so not a source here.
const NOT_SOURCES: [&str; 1] = ["prompts_glaive.jsonl"];

/// Every `tests/fixtures/*.jsonl` that traj reads as trajectories, once each, with the
/// arguments traj-normalize needs for it: the list of `training::sources`, and every other
/// fixture with none. A fixture in neither list fails the test (no source is left out
/// silently).
fn fixture_sources() -> Vec<(PathBuf, Vec<&'static str>)> {
    let mut v: Vec<(PathBuf, Vec<&str>)> = Vec::new();
    for (p, args) in sources() {
        if !v.iter().any(|(q, _)| q == &p) {
            v.push((p, args));
        }
    }
    let mut names: Vec<String> = std::fs::read_dir(fixture(""))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".jsonl"))
        .collect();
    names.sort();
    for n in names {
        let p = fixture(&n);
        if NOT_SOURCES.contains(&n.as_str()) || v.iter().any(|(q, _)| q == &p) {
            continue;
        }
        v.push((p, vec![]));
    }
    assert!(v.len() >= 10, "{v:?}");
    v
}

/// Loads every (`parquet`, `jsonl`) pair of the manifest (argv 1, a JSON list) with
/// `load_dataset("parquet")` and `load_dataset("json")`. Values must agree: the Parquet
/// side with its JSON-text fields (field metadata `traj.json`) decoded, both sides with
/// null members dropped (the JSON loader fills a struct's missing keys with None), and
/// both equal to the JSONL's rows as `json.loads` reads them (the Parquet side exactly;
/// the JSON loader's doubles to 9 decimals, see `close`). Columns must agree by
/// name and order; in `datasets` 5 also by type (integers by kind: an input's `int32`
/// is kept where the JSON loader says `int64`), a JSON-text field of the Parquet file
/// where the JSON loader has `Json()`. `datasets` 4.0.0's JSON loader stops on a field
/// whose type varies (it has no `Json()`): that is reported, and allowed only for a file
/// that has JSON-text fields.
const COMPARE: &str = r#"
import sys, json, datasets, pyarrow as pa, pyarrow.parquet as pq
manifest, cache = sys.argv[1], sys.argv[2]
major = int(datasets.__version__.split(".")[0])
print("version", datasets.__version__)

def drop_none(v):
    if isinstance(v, dict):
        return {k: drop_none(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [drop_none(x) for x in v]
    return v

def close(a, b):
    """Equal, doubles to 9 decimals: datasets 5 re-encodes its Json() fields with ujson,
    which keeps 9 decimals of a double (0.29675291599960474 -> 0.29675291600000003)."""
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) \
            and abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    return a == b

def decode(v, field):
    if v is None:
        return None
    if field.metadata and field.metadata.get(b"traj.json") == b"1":
        assert isinstance(v, str), (field, v)
        return json.loads(v)
    t = field.type
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [decode(x, t.value_field) for x in v]
    if pa.types.is_struct(t):
        return {t.field(i).name: decode(v.get(t.field(i).name), t.field(i)) for i in range(t.num_fields)}
    return v

def json_paths(field, path, out):
    if field.metadata and field.metadata.get(b"traj.json") == b"1":
        out.append(path)
        return
    t = field.type
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        json_paths(t.value_field, path + "[]", out)
    elif pa.types.is_struct(t):
        for i in range(t.num_fields):
            json_paths(t.field(i), path + "." + t.field(i).name, out)

def canon(f):
    """A feature as plain data: Json() as "json"."""
    name = type(f).__name__
    if name == "Json":
        return "json"
    if isinstance(f, dict):
        return {k: canon(x) for k, x in f.items()}
    if name in ("List", "LargeList", "Sequence"):
        return [canon(f.feature)]
    if name == "Value":
        # By kind: a column kept in its input's width (int32) is the JSON loader's int64.
        return {"int8": "int", "int16": "int", "int32": "int", "int64": "int", "uint8": "int",
                "uint16": "int", "uint32": "int", "uint64": "int", "float": "float",
                "float32": "float", "double": "float", "float64": "float",
                "large_string": "string"}.get(f.dtype, f.dtype)
    return repr(f)

def canon_pq(f, field):
    if field.metadata and field.metadata.get(b"traj.json") == b"1":
        assert canon(f) == "string", (field, f)
        return "json"
    t = field.type
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [canon_pq(f.feature, t.value_field)]
    if pa.types.is_struct(t):
        return {t.field(i).name: canon_pq(f[t.field(i).name], t.field(i)) for i in range(t.num_fields)}
    return canon(f)

for pair in json.load(open(manifest)):
    pqf, jsf = pair["parquet"], pair["jsonl"]
    schema = pq.read_schema(pqf)
    meta = schema.metadata or {}
    assert meta.get(b"traj.schema") == b"2", (pqf, meta)
    assert "row" not in schema.names, (pqf, schema)
    paths = []
    for f in schema:
        json_paths(f, f.name, paths)
    assert json.loads(meta[b"traj.json_fields"]) == paths, (pqf, meta, paths)
    want = [drop_none(json.loads(l)) for l in open(jsf, encoding="utf-8") if l.strip()]
    dp = datasets.load_dataset("parquet", data_files=pqf, split="train", cache_dir=cache)
    got = [drop_none({f.name: decode(r[f.name], f) for f in schema}) for r in dp]
    assert len(got) == len(want), (pqf, len(got), len(want))
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, (pqf, "row", i + 1, json.dumps(g)[:3000], json.dumps(w)[:3000])
    try:
        dj = datasets.load_dataset("json", data_files=jsf, split="train", cache_dir=cache)
    except Exception as e:
        cause = repr(e.__cause__ or e)
        assert major < 5 and paths and "changed from" in cause, (jsf, cause)
        print("json loader refused", jsf, "json fields", paths, cause[:200])
        continue
    # Rows that order their members differently (a member only some rows have) have no one
    # column order: the JSON loader takes pyarrow's merge, traj the first appearance. The
    # same columns, each with the same type and values, whatever their order.
    assert sorted(dj.column_names) == sorted(dp.column_names), (jsf, dj.column_names, dp.column_names)
    if major >= 5:
        cj = canon(dj.features)
        cp = {f.name: canon_pq(dp.features[f.name], f) for f in schema}
        assert cj == cp, (jsf, json.dumps(cj)[:3000], json.dumps(cp)[:3000])
    for i, r in enumerate(dj):
        assert close(drop_none(r), want[i]), (jsf, "row", i + 1)
    print("same", pqf, len(want), "rows,", len(dp.column_names), "columns, json fields", paths)
print("ok")
"#;

/// Load every pair of `pairs` in both `datasets` versions (the [`COMPARE`] script).
fn compare_in_datasets(d: &Path, pairs: &[(PathBuf, PathBuf)]) {
    let manifest: Vec<Value> = pairs
        .iter()
        .map(|(p, j)| serde_json::json!({"parquet": p, "jsonl": j}))
        .collect();
    let m = d.join("pairs.json");
    std::fs::write(&m, serde_json::to_string(&manifest).unwrap()).unwrap();
    load_in_datasets(d, COMPARE, &m, &[]);
}

/// Two JSON values equal, numbers by value (`2` and `2.0`, `1.10` and `1.1`; numbers
/// keep their text here: serde_json's arbitrary_precision).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            x.to_string() == y.to_string()
                || matches!(
                    (x.to_string().parse::<f64>(), y.to_string().parse::<f64>()),
                    (Ok(p), Ok(q)) if p == q
                )
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, p)| y.get(k).is_some_and(|q| same(p, q)))
        }
        _ => a == b,
    }
}

/// traj reading `parquet` gives the rows of `jsonl`, value by value.
fn reads_back(d: &Path, parquet: &Path, jsonl: &Path) {
    let mut c = cmd("traj-filter", d);
    c.arg(parquet);
    let o = run(c);
    assert_code(&o, 0);
    let got = parse_jsonl(&stdout(&o));
    let want = read_jsonl(jsonl);
    assert_eq!(got.len(), want.len(), "{}", parquet.display());
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(same(g, w), "{} row {}:\n{g}\n{w}", parquet.display(), k + 1);
    }
}

/// Run `bin` with `args` on `input` twice, `-o NAME.parquet` and `-o NAME.jsonl`.
fn both(d: &Path, bin: &str, args: &[&str], input: &Path, name: &str) -> (PathBuf, PathBuf) {
    let (p, j) = (
        d.join(format!("{name}.parquet")),
        d.join(format!("{name}.jsonl")),
    );
    for out in [&p, &j] {
        let mut c = cmd(bin, d);
        c.arg("-q").args(args).arg(input).arg("-o").arg(out);
        assert_code(&run(c), 0);
    }
    (p, j)
}

/// Every fixture source, as it is (traj-filter) and normalised (traj-normalize): the
/// Parquet and the JSONL load in `datasets` 4.0.0 and 5.x as the same columns and
/// values, and traj reads the Parquet back as the JSONL's values.
#[test]
fn every_fixture_source_loads_alike_from_parquet_and_jsonl() {
    let d = tmpdir();
    let mut pairs = Vec::new();
    for (k, (src, args)) in fixture_sources().iter().enumerate() {
        pairs.push(both(d.path(), "traj-filter", &[], src, &format!("raw{k}")));
        // Rows traj-normalize refuses (hermes_agent_repairs.jsonl has some) go to the
        // rejects, the same in both runs.
        let rej = format!("norm{k}-rejects.jsonl");
        let mut args = args.clone();
        args.extend(["--on-error", "skip", "--rejects", &rej]);
        let (p, j) = both(d.path(), "traj-normalize", &args, src, &format!("norm{k}"));
        assert!(!read_jsonl(&j).is_empty(), "{}", src.display());
        pairs.push((p, j));
    }
    for (p, j) in &pairs {
        reads_back(d.path(), p, j);
    }
    compare_in_datasets(d.path(), &pairs);
}

/// A Hub-style Parquet file (`id`, `messages`, `source`, written by `datasets` itself,
/// each version in turn, `id` an int32 where traj alone would choose int64) keeps its
/// column types through traj-compress (rows truncated) and traj-filter: typed columns of
/// the input's own types, no `row` blob, no JSON text; the outputs load alike from
/// Parquet and JSONL, and read back in traj.
#[test]
fn a_hub_style_parquet_input_keeps_its_own_column_types() {
    let d = tmpdir();
    let py = r#"
import sys, json, datasets
rows = []
for k, l in enumerate(open(sys.argv[3], encoding="utf-8")):
    r = json.loads(l)
    role = {"human": "user", "gpt": "assistant", "system": "system"}
    msgs = [{"role": role[t["from"]], "content": t["value"]} for t in r["conversations"]]
    rows.append({"id": k, "messages": msgs, "source": "fastchat/" + r["id"]})
feats = datasets.Features({
    "id": datasets.Value("int32"),
    "messages": datasets.List({"role": datasets.Value("string"), "content": datasets.Value("string")}),
    "source": datasets.Value("string"),
})
datasets.Dataset.from_list(rows, features=feats).to_parquet(sys.argv[4])
print("version", datasets.__version__, "ok")
"#;
    let hub = d.path().join("hub.parquet");
    let src = fixture("fastchat_sharegpt_dummy.jsonl");
    load_in_datasets(
        d.path(),
        py,
        &d.path().join("unused"),
        &[src.to_str().unwrap(), hub.to_str().unwrap()],
    );
    let compress = [
        "--offline",
        "--no-metrics",
        "--over-budget",
        "truncate",
        "--target-max-tokens",
        "60",
        "--summary-target-tokens",
        "20",
        "--rejects",
        "compress-rejects.jsonl",
    ];
    let pairs = vec![
        both(d.path(), "traj-compress", &compress, &hub, "compressed"),
        both(d.path(), "traj-filter", &[], &hub, "filtered"),
    ];
    // Types as pyarrow reads them: the input's, whatever traj would choose alone.
    let check = r#"
import sys, pyarrow.parquet as pq, datasets
want = pq.read_schema(sys.argv[3])
for f in sys.argv[4:]:
    s = pq.read_schema(f)
    assert s.metadata[b"traj.schema"] == b"2", s.metadata
    assert s.metadata[b"traj.json_fields"] == b"[]", s.metadata
    assert s.names[:3] == ["id", "messages", "source"], s
    for n in ["id", "messages", "source"]:
        assert s.field(n).type == want.field(n).type, (f, n, s.field(n).type, want.field(n).type)
    assert str(s.field("id").type) == "int32", s
    assert str(s.field("messages").type) == "list<element: struct<role: string, content: string>>" \
        or str(s.field("messages").type) == "list<item: struct<role: string, content: string>>", s
    assert not any(f.metadata for f in s), s
print("version", datasets.__version__, "ok")
"#;
    let files: Vec<&str> = pairs.iter().map(|(p, _)| p.to_str().unwrap()).collect();
    let mut extra = vec![hub.to_str().unwrap()];
    extra.extend(files);
    load_in_datasets(d.path(), check, &d.path().join("unused"), &extra);
    // traj-compress cut rows (the budget is small), yet the columns stay.
    let rows = read_jsonl(&pairs[0].1);
    let cut = rows
        .iter()
        .filter(|r| {
            r.to_string()
                .contains("characters truncated by traj-compress")
        })
        .count();
    assert!(cut >= 5, "{cut} of {} rows cut", rows.len());
    for (p, j) in &pairs {
        reads_back(d.path(), p, j);
    }
    compare_in_datasets(d.path(), &pairs);
}

/// A Parquet file `datasets` 5 wrote (`Dataset.to_parquet`) of rows whose members it
/// types as `Json()` (`messages` whose tool calls differ, `tools`' `parameters`,
/// `tool_stats`): Parquet's `JSON` columns, with pyarrow's schema and without
/// (`store_schema=False`, as other writers do). traj reads each value as the JSON it
/// holds, so the rows come back as the JSONL they were loaded from, and traj-normalize
/// takes them as OpenAI rows (a message read as a string stopped it: "expected an
/// object, found a string").
#[test]
fn a_datasets_5_parquet_of_json_features_reads_back_as_its_values() {
    let d = tmpdir();
    let jsonl = d.path().join("openai.jsonl");
    let mut c = cmd("traj-normalize", d.path());
    c.args(["-q", "--to", "openai"])
        .arg(fixture("hermes_reason_tool_use_50.jsonl"))
        .arg("-o")
        .arg(&jsonl);
    assert_code(&run(c), 0);
    let py = r#"
import sys, datasets, pyarrow.parquet as pq
if int(datasets.__version__.split(".")[0]) >= 5:
    ds = datasets.load_dataset("json", data_files=sys.argv[1], split="train", cache_dir=sys.argv[2])
    assert "Json(" in str(ds.features), ds.features
    ds.to_parquet(sys.argv[3])
    assert "extension<arrow.json>" in str(pq.read_schema(sys.argv[3])), pq.read_schema(sys.argv[3])
    pq.write_table(pq.read_table(sys.argv[3]), sys.argv[4], store_schema=False)
print("version", datasets.__version__, "ok")
"#;
    let (with, without) = (d.path().join("ds5.parquet"), d.path().join("bare.parquet"));
    load_in_datasets(
        d.path(),
        py,
        &jsonl,
        &[with.to_str().unwrap(), without.to_str().unwrap()],
    );
    for p in [&with, &without] {
        reads_back(d.path(), p, &jsonl);
        let mut c = cmd("traj-normalize", d.path());
        c.args(["-q", "--to", "openai"]).arg(p);
        let o = run(c);
        assert_code(&o, 0);
        let got = parse_jsonl(&stdout(&o));
        let want = read_jsonl(&jsonl);
        assert_eq!(got.len(), want.len(), "{}", p.display());
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(same(g, w), "{} row {}:\n{g}\n{w}", p.display(), k + 1);
        }
    }
}

//! End to end: the Makefile's batch-then-compress pipeline over the demo prompts, against
//! the stand-in endpoint with the demo's script, with the tools running for real.
//!
//! Checks every file the pipeline makes: row counts that add up across stages, the
//! checkpoint and statistics against the batch files, loading with Python `datasets`,
//! and that a second run changes nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::standin::Standin;
use crate::util::*;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn bin_dir() -> PathBuf {
    bin("traj-run").parent().unwrap().to_path_buf()
}

fn make_pipeline(data: &Path, url: &str) -> std::process::Output {
    let mut c = Command::new("make");
    c.current_dir(repo())
        .env_remove("OPENROUTER_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("MAKEFLAGS")
        .env_remove("MFLAGS")
        .args(["--no-print-directory", "pipeline"])
        .arg(format!("BIN={}", bin_dir().display()))
        .arg(format!("DATA={}", data.display()))
        .args(["RUN=e2e", "DATASET=examples/prompts.jsonl", "MODEL=standin"])
        .arg(format!("BASE_URL={url}"))
        .args([
            "WORKERS=4",
            "BATCH_SIZE=5",
            "MAX_TURNS=6",
            "TARGET_TOKENS=1500",
        ])
        .args(["TOKENIZER=o200k_base", "DISTRIBUTION=terminal_only"]);
    c.output().expect("run make")
}

fn lines(p: &Path) -> usize {
    if !p.exists() {
        return 0;
    }
    read_jsonl(p).len()
}

fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut m = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            m.insert(
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            );
        }
    }
    m
}

#[test]
fn demo_pipeline_end_to_end() {
    let script: Value = serde_json::from_slice(
        &std::fs::read(repo().join("examples/standin-script.json")).unwrap(),
    )
    .unwrap();
    let server = Standin::json(script);
    let data = tmpdir();
    let out = make_pipeline(data.path(), &server.url());
    assert!(
        out.status.success(),
        "make pipeline failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = data.path().join("e2e");

    // traj-sample-tools: every prompt gets a non-empty toolset.
    let tasks = read_jsonl(&dir.join("tasks.jsonl"));
    assert_eq!(tasks.len(), 12);
    assert!(
        tasks
            .iter()
            .all(|t| t["toolsets"].as_array().is_some_and(|a| !a.is_empty()))
    );

    // traj-run: one record per prompt, each exactly once, no failure.
    let mut records = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("batch_") && name.ends_with(".jsonl") {
            records.extend(read_jsonl(&p));
        }
    }
    let mut indices: Vec<u64> = records
        .iter()
        .map(|r| r["prompt_index"].as_u64().unwrap())
        .collect();
    indices.sort();
    assert_eq!(
        indices,
        (0..12).collect::<Vec<u64>>(),
        "each prompt exactly once"
    );
    assert_eq!(lines(&dir.join("failures.jsonl")), 0);

    // The tools ran for real: the FizzBuzz script printed its output.
    let fizz = records
        .iter()
        .find(|r| r["prompt"].as_str().unwrap().contains("FizzBuzz"))
        .unwrap();
    let tool_text: String = tool_outputs(fizz).concat();
    assert!(
        tool_text.contains("FizzBuzz") && tool_text.contains("14"),
        "{tool_text}"
    );

    // checkpoint.json and statistics.json agree with the batch files.
    let checkpoint: Value =
        serde_json::from_slice(&std::fs::read(dir.join("checkpoint.json")).unwrap()).unwrap();
    let done: Vec<u64> = checkpoint["completed_prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(done, indices);
    let stats: Value =
        serde_json::from_slice(&std::fs::read(dir.join("statistics.json")).unwrap()).unwrap();
    assert_eq!(stats["total_prompts"], 12);
    let calls_in_records: u64 = records
        .iter()
        .flat_map(|r| r["messages"].as_array().unwrap().iter())
        .filter_map(|m| m["tool_calls"].as_array())
        .map(|c| c.len() as u64)
        .sum();
    let calls_in_stats: u64 = stats["tool_statistics"]
        .as_object()
        .unwrap()
        .values()
        .map(|t| t["count"].as_u64().unwrap())
        .sum();
    assert_eq!(calls_in_stats, calls_in_records);

    // in = kept + rejected at every stage after the run.
    let kept = lines(&dir.join("trajectories.jsonl"));
    let rejected = lines(&dir.join("merge_rejects.jsonl"))
        + lines(&dir.join("normalize_rejects.jsonl"))
        + lines(&dir.join("rejects.jsonl"));
    assert_eq!(kept + rejected, 12, "kept {kept} + rejected {rejected}");
    assert!(
        kept >= 10,
        "the demo's trajectories are well formed ({kept} kept)"
    );
    let compressed = read_jsonl(&dir.join("trajectories_compressed.jsonl"));
    assert_eq!(compressed.len(), kept, "compression keeps every row");
    assert!(dir.join("compression_metrics.json").exists());

    // The final files load with HuggingFace datasets.
    for f in ["trajectories.jsonl", "trajectories_compressed.jsonl"] {
        let p = dir.join(f);
        let cache = tmpdir();
        let o = Command::new(data_python())
            .env("HF_DATASETS_OFFLINE", "1")
            .env("HF_HOME", cache.path())
            .arg("-c")
            .arg(
                "import sys, datasets\n\
                 ds = datasets.load_dataset('json', data_files=sys.argv[1], split='train', cache_dir=sys.argv[2])\n\
                 print(len(ds))",
            )
            .arg(&p)
            .arg(cache.path())
            .output()
            .expect("python3");
        assert!(
            o.status.success(),
            "datasets could not load {f}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), kept.to_string());
    }

    // A second run changes nothing: make finds everything up to date.
    let before = snapshot(&dir);
    let again = make_pipeline(data.path(), &server.url());
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let log = String::from_utf8_lossy(&again.stdout);
    assert!(
        !log.contains("traj-run"),
        "second run re-ran traj-run:\n{log}"
    );
    assert_eq!(snapshot(&dir), before, "second run changed files");
}

/// `scripts/sample-and-compress.sh` over two real datasets: every sampled row is long
/// enough, tagged with its source, within budget (or flagged), and the sample is
/// reproducible.
#[test]
fn sample_and_compress_script_is_reproducible() {
    let d = tmpdir();
    let go = |out: &str| {
        let o = Command::new("bash")
            .current_dir(d.path())
            .arg(repo().join("scripts/sample-and-compress.sh"))
            .arg("--bin")
            .arg(bin_dir())
            .args([
                "--total-samples",
                "12",
                "--min-tokens",
                "400",
                "--seed",
                "5",
            ])
            .args(["--target-tokens", "600", "--output", out])
            .arg(fixture("llamafactory_glaive_toolcall_en.jsonl"))
            .arg(fixture("hermes_reason_tool_use_50.jsonl"))
            .env_remove("OPENROUTER_API_KEY")
            .output()
            .expect("bash");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::read(d.path().join(out)).unwrap()
    };
    let first = go("a.jsonl");
    assert_eq!(go("b.jsonl"), first, "same inputs and seed, same output");
    let rows = parse_jsonl(std::str::from_utf8(&first).unwrap());
    assert_eq!(rows.len(), 12);
    let sources: std::collections::BTreeSet<&str> = rows
        .iter()
        .map(|r| r["_source_dataset"].as_str().unwrap())
        .collect();
    assert!(
        sources
            .iter()
            .all(|s| s.starts_with("llamafactory_glaive") || s.starts_with("hermes_reason"))
    );
    let metrics: Value = serde_json::from_slice(
        &std::fs::read(d.path().join("a_work/compression_metrics.json")).unwrap(),
    )
    .unwrap();
    assert!(metrics.is_object());
}

/// The script samples from the whole qualifying pool: asked for more rows than there
/// are, it keeps every long row but exact duplicates (counted, in sample_rejects.jsonl),
/// and --base-url / --model / --config reach traj-compress.
#[test]
fn sample_and_compress_script_samples_the_whole_pool() {
    let d = tmpdir();
    let server = Standin::json(serde_json::json!({"default": {"content": "[CONTEXT SUMMARY]: s"}}));
    std::fs::write(
        d.path().join("c.yaml"),
        "compression:\n  target_max_tokens: 600\n",
    )
    .unwrap();
    let glaive = fixture("llamafactory_glaive_toolcall_en.jsonl");
    let o = Command::new("bash")
        .current_dir(d.path())
        .arg(repo().join("scripts/sample-and-compress.sh"))
        .arg("--bin")
        .arg(bin_dir())
        .args(["--total-samples", "100000", "--min-tokens", "200"])
        .args(["--target-tokens", "600", "--output", "out.jsonl"])
        .args([
            "--config",
            "c.yaml",
            "--base-url",
            &server.url(),
            "--model",
            "stand-in",
        ])
        .args(["--api-key-env", "STANDIN_KEY"])
        .env("STANDIN_KEY", "k")
        .arg(&glaive)
        .arg(&glaive) // the same file twice: every row has an exact duplicate
        .output()
        .expect("bash");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let work = d.path().join("out_work");
    // the same name twice: two numbered .long files, neither overwriting the other
    let mut pool = BTreeMap::new();
    for part in ["001", "002"] {
        let p = work.join(format!("{part}.llamafactory_glaive_toolcall_en.long.jsonl"));
        for (k, n) in multiset(&p) {
            *pool.entry(k).or_insert(0) += n;
        }
    }
    let pool_rows: usize = pool.values().sum();
    assert!(pool_rows > 50, "{err}");
    assert!(pool.values().all(|n| n % 2 == 0), "each file's rows twice");
    let sample = multiset(&work.join("sample.jsonl"));
    let distinct: BTreeMap<Vec<u8>, usize> = pool.keys().map(|k| (k.clone(), 1)).collect();
    assert_eq!(sample, distinct, "the whole pool, exact duplicates once");
    let dups = read_jsonl(&work.join("sample_rejects.jsonl")).len();
    assert_eq!(dups, pool_rows - distinct.len());
    assert!(
        err.contains(&format!(
            "pool of {pool_rows} rows, {dups} exact duplicates dropped"
        )),
        "{err}"
    );
    assert_eq!(lines(&d.path().join("out.jsonl")), distinct.len());
    // --base-url, --model and --config reached traj-compress (a bad one fails the
    // run): its summary names the summariser
    assert!(err.contains("(o200k_base, llm:stand-in)"), "{err}");
    drop(server);
}

/// The `sh` blocks of docs/pipeline.md, in order.
fn recipes() -> Vec<String> {
    let doc = std::fs::read_to_string(repo().join("docs/pipeline.md")).unwrap();
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    for line in doc.lines() {
        match (&mut cur, line.trim_start()) {
            (None, "```sh") => cur = Some(String::new()),
            (Some(_), "```") => out.push(cur.take().unwrap()),
            (Some(b), _) => {
                b.push_str(line);
                b.push('\n');
            }
            _ => {}
        }
    }
    out
}

/// The recipe of docs/pipeline.md that contains `needle`, run as written by bash in
/// `dir` with the built binaries first on PATH.
fn run_recipe(dir: &Path, needle: &str, edit: &dyn Fn(String) -> String) {
    let block = recipes()
        .into_iter()
        .find(|b| b.contains(needle))
        .unwrap_or_else(|| panic!("no recipe with {needle:?} in docs/pipeline.md"));
    let script = format!("set -euo pipefail\n{}", edit(block));
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = Command::new("bash")
        .current_dir(dir)
        .env("PATH", path)
        .args(["-c", &script])
        .output()
        .expect("bash");
    assert!(
        o.status.success(),
        "recipe failed:\n{script}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Lines of a file as a multiset.
fn multiset(p: &Path) -> BTreeMap<Vec<u8>, usize> {
    let mut m = BTreeMap::new();
    for l in std::fs::read(p).unwrap().split(|b| *b == b'\n') {
        if !l.is_empty() {
            *m.entry(l.to_vec()).or_insert(0) += 1;
        }
    }
    m
}

/// A stage run directly on `input` (the reference the recipes must equal).
fn direct(dir: &Path, stage: &str, args: &[&str], out: &str) {
    let mut c = cmd(stage, dir);
    c.args(args).args(["-q", "-o", out]);
    let o = run(c);
    assert_code(&o, 0);
}

/// Foreign data (no `prompt_index`, prompts repeated across rows): three real datasets.
fn foreign_corpus(dir: &Path, name: &str) {
    let mut text = Vec::new();
    for f in [
        "llamafactory_glaive_toolcall_en.jsonl",
        "llamafactory_reason_tool_use_50.jsonl",
        HERMES_FIXTURE,
    ] {
        text.extend(std::fs::read(fixture(f)).unwrap());
    }
    std::fs::write(dir.join(name), text).unwrap();
}

const HERMES_FIXTURE: &str = "hermes_reason_tool_use_50.jsonl";

fn need_parallel() {
    let ok = Command::new("parallel")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(ok, "GNU parallel is needed (scripts/setup.sh installs it)");
}

/// docs/pipeline.md, "Shards": `--shard i/4` then `traj-merge part-*.jsonl` gives the
/// rows of one unsharded run, every one of them (foreign rows have no `prompt_index`
/// and are never de-duplicated).
#[test]
fn recipe_shards_then_merge_keeps_every_row() {
    let d = tmpdir();
    foreign_corpus(d.path(), "big.jsonl");
    direct(d.path(), "traj-normalize", &["big.jsonl"], "want.jsonl");
    run_recipe(d.path(), "--shard $i/4", &|b| b);
    let want = multiset(&d.path().join("want.jsonl"));
    assert_eq!(want.values().sum::<usize>(), 400);
    assert_eq!(multiset(&d.path().join("normalized.jsonl")), want);
}

/// docs/pipeline.md, "GNU parallel" with `--pipe`: the same rows as one traj-filter,
/// in the same order (as written, and with blocks small enough to make many jobs).
#[test]
fn recipe_parallel_pipe_equals_one_filter() {
    need_parallel();
    let d = tmpdir();
    foreign_corpus(d.path(), "raw.jsonl");
    direct(
        d.path(),
        "traj-normalize",
        &["raw.jsonl"],
        "trajectories.jsonl",
    );
    direct(
        d.path(),
        "traj-filter",
        &["--require-reasoning", "--well-formed", "trajectories.jsonl"],
        "want.jsonl",
    );
    let want = std::fs::read(d.path().join("want.jsonl")).unwrap();
    assert!(!want.is_empty());
    for block in ["64M", "20k"] {
        run_recipe(d.path(), "parallel --pipe", &|b| {
            b.replace("--block 64M", &format!("--block {block}"))
        });
        assert_eq!(
            std::fs::read(d.path().join("kept.jsonl")).unwrap(),
            want,
            "--block {block}"
        );
    }
}

/// docs/pipeline.md, "GNU parallel", one compress job per file then traj-merge: the
/// rows of traj-compress run on each file, every one of them.
#[test]
fn recipe_parallel_compress_per_file_then_merge_keeps_every_row() {
    need_parallel();
    let d = tmpdir();
    foreign_corpus(d.path(), "raw.jsonl");
    direct(d.path(), "traj-normalize", &["raw.jsonl"], "all.jsonl");
    let all = std::fs::read_to_string(d.path().join("all.jsonl")).unwrap();
    let rows: Vec<&str> = all.lines().collect();
    std::fs::create_dir(d.path().join("shards")).unwrap();
    std::fs::create_dir(d.path().join("want")).unwrap();
    for (i, chunk) in rows.chunks(150).enumerate() {
        let name = format!("shards/s{i}.jsonl");
        std::fs::write(d.path().join(&name), format!("{}\n", chunk.join("\n"))).unwrap();
        let mut c = cmd("traj-compress", d.path());
        c.args(["--target-max-tokens", "8000", "--no-metrics", "-q", &name]);
        c.args(["-o", &format!("want/s{i}.jsonl")]);
        assert_code(&run(c), 0);
    }
    run_recipe(d.path(), "parallel traj-compress", &|b| b);
    let mut want = BTreeMap::new();
    for e in std::fs::read_dir(d.path().join("want")).unwrap() {
        for (k, n) in multiset(&e.unwrap().path()) {
            *want.entry(k).or_insert(0) += n;
        }
    }
    assert_eq!(want.values().sum::<usize>(), rows.len());
    assert_eq!(multiset(&d.path().join("compressed.jsonl")), want);
}

/// Rows of every `part-*` file under `dir` (Spark's output), as a multiset.
fn parts_multiset(dir: &Path) -> BTreeMap<Vec<u8>, usize> {
    let mut m = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("part-")
        {
            for (k, n) in multiset(&p) {
                *m.entry(k).or_insert(0) += n;
            }
        }
    }
    m
}

/// A recipe's `scripts/SCRIPT` run from this repository with the binaries this test
/// built.
fn with_bins(script: &'static str) -> impl Fn(String) -> String {
    move |b: String| {
        b.replace(
            &format!("scripts/{script}"),
            &format!(
                "{} {} --bin-dir {}",
                data_python().display(),
                repo().join("scripts").join(script).display(),
                bin_dir().display()
            ),
        )
    }
}

/// docs/pipeline.md, "Spark" and "Ray", run as written on a directory of real files
/// (the binaries this test built, by `--bin-dir`): the rows of the same stages run
/// directly on the same files, as a multiset.
#[test]
fn recipes_spark_and_ray_give_the_rows_of_the_stages_run_directly() {
    let d = tmpdir();
    std::fs::create_dir(d.path().join("raw")).unwrap();
    for (name, f) in [
        ("a.jsonl", HERMES_FIXTURE),
        ("b.jsonl", "llamafactory_glaive_toolcall_en.jsonl"),
    ] {
        std::fs::copy(fixture(f), d.path().join("raw").join(name)).unwrap();
    }
    // The stages directly: both files normalised, then each recipe's filter.
    let mut all = Vec::new();
    for name in ["a.jsonl", "b.jsonl"] {
        let out = format!("n-{name}");
        direct(d.path(), "traj-normalize", &[&format!("raw/{name}")], &out);
        all.extend(std::fs::read(d.path().join(out)).unwrap());
    }
    std::fs::write(d.path().join("normalized.jsonl"), all).unwrap();
    let filtered = |args: &[&str], out: &str| {
        let mut a = args.to_vec();
        a.push("normalized.jsonl");
        direct(d.path(), "traj-filter", &a, out);
        multiset(&d.path().join(out))
    };
    let want_spark = filtered(
        &["--require-reasoning", "--valid-tools", "--well-formed"],
        "want-spark.jsonl",
    );
    let want_ray = filtered(&["--well-formed"], "want-ray.jsonl");
    assert!(want_spark.values().sum::<usize>() >= 20);
    assert!(want_ray.values().sum::<usize>() > want_spark.values().sum::<usize>());
    run_recipe(
        d.path(),
        "spark_pipeline.py --master",
        &with_bins("spark_pipeline.py"),
    );
    assert_eq!(parts_multiset(&d.path().join("out/data")), want_spark);
    std::fs::remove_dir_all(d.path().join("out")).unwrap();
    run_recipe(
        d.path(),
        "ray_pipeline.py --num-cpus",
        &with_bins("ray_pipeline.py"),
    );
    assert_eq!(multiset(&d.path().join("out/data.jsonl")), want_ray);
}

/// docs/pipeline.md, "traj-run across machines": the Slurm array job (each array task
/// run as Slurm would, with its SLURM_ARRAY_* variables) then `traj-merge runs/shard*`,
/// and the loop without Slurm: every task exactly once.
#[test]
fn recipes_traj_run_shards_slurm_and_loop_give_every_task_once() {
    let server = Standin::json(serde_json::json!({"default": {"content": "done"}}));
    let tasks: String = (0..40)
        .map(|i| {
            format!(
                "{}\n",
                serde_json::json!({"prompt": format!("task {i}"), "toolsets": []})
            )
        })
        .collect();
    let want: BTreeMap<String, usize> = (0..40).map(|i| (format!("task {i}"), 1)).collect();
    let prompts = |p: &Path| {
        let mut m = BTreeMap::new();
        for r in read_jsonl(p) {
            *m.entry(r["prompt"].as_str().unwrap().to_string())
                .or_insert(0) += 1;
        }
        m
    };
    let url = server.url();
    let fill = |b: String| b.replace("MODEL", "standin").replace("URL", &url);
    // Slurm: 8 array tasks, then the merge recipe.
    let d = tmpdir();
    std::fs::write(d.path().join("tasks.jsonl"), &tasks).unwrap();
    for i in 0..8 {
        run_recipe(d.path(), "SLURM_ARRAY_TASK_ID", &|b| {
            format!(
                "export SLURM_ARRAY_TASK_ID={i} SLURM_ARRAY_TASK_COUNT=8\n{}",
                fill(b)
            )
        });
    }
    run_recipe(d.path(), "traj-merge runs/shard* -o", &|b| b);
    assert_eq!(prompts(&d.path().join("trajectories.jsonl")), want);
    // Without Slurm: three processes at once, then their merge.
    let d = tmpdir();
    std::fs::write(d.path().join("tasks.jsonl"), &tasks).unwrap();
    run_recipe(d.path(), "--shard $i/3 --run-dir", &fill);
    assert_eq!(prompts(&d.path().join("trajectories.jsonl")), want);
    drop(server);
}

/// A prompt that fails (a 400, never run again) does not stop `make batch`: the others
/// go through merge, normalize and filter, the failure stays in failures.jsonl, and the
/// run is not marked complete. The same run through scripts/batch-then-compress.sh.
#[test]
fn a_failed_prompt_does_not_stop_the_batch() {
    let d = tmpdir();
    let dataset = d.path().join("prompts.jsonl");
    std::fs::write(
        &dataset,
        "{\"prompt\": \"fine one\"}\n{\"prompt\": \"refused one\"}\n{\"prompt\": \"fine two\"}\n",
    )
    .unwrap();
    let server = Standin::json(serde_json::json!({
        "rules": [{"match": "refused", "turns": [{"status": 400, "error": "bad request"}]}],
        "default": {"content": "done"}
    }));
    let data = d.path().join("data");
    let o = Command::new("make")
        .current_dir(repo())
        .env_remove("MAKEFLAGS")
        .env_remove("MFLAGS")
        .args(["--no-print-directory", "batch"])
        .arg(format!("BIN={}", bin_dir().display()))
        .arg(format!("DATA={}", data.display()))
        .arg(format!("DATASET={}", dataset.display()))
        .args(["RUN=f", "MODEL=standin", "SANDBOX=local"])
        .arg(format!("BASE_URL={}", server.url()))
        .output()
        .expect("run make");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("some prompts failed"), "{err}");
    let run = data.join("f");
    assert_eq!(lines(&run.join("trajectories.jsonl")), 2, "{err}");
    assert_eq!(lines(&run.join("failures.jsonl")), 1, "{err}");
    assert!(!run.join(".run-complete").exists());

    // The script: the same three prompts, the same outcome.
    let work = d.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let o = Command::new("bash")
        .current_dir(&work)
        .env_remove("OPENROUTER_API_KEY")
        .arg(repo().join("scripts/batch-then-compress.sh"))
        .arg("--dataset")
        .arg(&dataset)
        .args([
            "--run",
            "s",
            "--model",
            "standin",
            "--base-url",
            &server.url(),
        ])
        .arg("--bin")
        .arg(bin_dir())
        .output()
        .expect("run the script");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("some prompts failed"), "{err}");
    assert_eq!(
        lines(&work.join("data/s/trajectories_compressed.jsonl")),
        2,
        "{err}"
    );
}

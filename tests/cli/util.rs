//! Helpers shared by the integration tests: run a binary with a clean environment in
//! a per-test directory, feed stdin from a thread, and read JSONL back.

#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// Path of a built binary of this package.
pub fn bin(name: &str) -> PathBuf {
    let p = match name {
        "traj-normalize" => env!("CARGO_BIN_EXE_traj-normalize"),
        "traj-filter" => env!("CARGO_BIN_EXE_traj-filter"),
        "traj-merge" => env!("CARGO_BIN_EXE_traj-merge"),
        "traj-compress" => env!("CARGO_BIN_EXE_traj-compress"),
        "traj-sample-tools" => env!("CARGO_BIN_EXE_traj-sample-tools"),
        #[cfg(feature = "agent")]
        "traj-run" => env!("CARGO_BIN_EXE_traj-run"),
        "traj-report" => env!("CARGO_BIN_EXE_traj-report"),
        other => panic!("unknown binary {other}"),
    };
    PathBuf::from(p)
}

/// The fixtures directory (`tests/fixtures`).
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// A command for `name` with an empty environment (but PATH and HOME), run in `dir`.
pub fn cmd(name: &str, dir: &Path) -> Command {
    let mut c = Command::new(bin(name));
    c.env_clear();
    for keep in ["PATH", "HOME", "TMPDIR", "LANG"] {
        if let Ok(v) = std::env::var(keep) {
            c.env(keep, v);
        }
    }
    c.current_dir(dir);
    c
}

/// Run `c` with `stdin` written from a thread; returns the output.
pub fn run_with_stdin(mut c: Command, stdin: &[u8]) -> Output {
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("spawn");
    let mut input = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().expect("wait");
    writer.join().unwrap();
    out
}

/// Run `c` with no stdin.
pub fn run(mut c: Command) -> Output {
    c.stdin(Stdio::null());
    c.output().expect("spawn")
}

/// stdout as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("utf-8 stdout")
}

/// stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Parse JSONL text into values (panics on a bad line, naming it).
pub fn parse_jsonl(text: &str) -> Vec<Value> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("line {}: {e}: {l}", i + 1))
        })
        .collect()
}

/// Read a JSONL file into values.
pub fn read_jsonl(p: &Path) -> Vec<Value> {
    parse_jsonl(&std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
}

/// Assert the exit code, showing stderr when it differs.
#[track_caller]
/// Run binary `bin` in `dir` with `args`.
pub fn run_in(bin: &str, dir: &Path, args: &[&str]) -> Output {
    let mut c = cmd(bin, dir);
    c.args(args);
    run(c)
}

/// Assert that `o`'s stderr holds `text` (the stderr is the message otherwise).
#[track_caller]
pub fn assert_stderr_has(o: &Output, text: &str) {
    let e = stderr(o);
    assert!(e.contains(text), "stderr lacks {text:?}:\n{e}");
}

pub fn assert_code(o: &Output, code: i32) {
    assert_eq!(o.status.code(), Some(code), "stderr:\n{}", stderr(o));
}

/// A fresh temp directory for one test.
pub fn tmpdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// The text of every `tool` message of a traj-run record, in order.
pub fn tool_outputs(record: &Value) -> Vec<String> {
    record["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect()
}

/// The token counts `traj-filter --max-row-tokens 1` gives in its rejects
/// (`too-many-tokens: N > 1`), one per rejected row, in order.
pub fn rejected_token_counts(rejects: &Path) -> Vec<u64> {
    read_jsonl(rejects)
        .iter()
        .map(|r| {
            let why = r["reasons"][0].as_str().unwrap();
            let n = why.strip_prefix("too-many-tokens: ").unwrap();
            n.strip_suffix(" > 1").unwrap().parse().unwrap()
        })
        .collect()
}

/// Where the tests' Python venvs are: `$TRAJ_VENVS`, else `target/venvs` (what
/// `scripts/setup.sh` makes; nothing is installed into the system Python).
pub fn venvs_dir() -> PathBuf {
    std::env::var_os("TRAJ_VENVS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/venvs"))
}

/// A Python with HF `datasets`, pyarrow, PySpark and Ray Data: the `data` venv
/// `scripts/setup.sh` makes (`target/venvs/data`, or under `$TRAJ_VENVS`), else a
/// `python3` that already has them. Fails loudly when neither has them (checked once
/// per run).
pub fn data_python() -> PathBuf {
    static FOUND: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    let venv = venvs_dir().join("data/bin/python");
    let found = FOUND.get_or_init(|| {
        [venv.clone(), PathBuf::from("python3")]
            .into_iter()
            .find(|py| {
                Command::new(py)
                    .args(["-c", "import datasets, pyarrow, pyspark, ray.data"])
                    .output()
                    .is_ok_and(|o| o.status.success())
            })
    });
    found.clone().unwrap_or_else(|| {
        panic!(
            "neither {} nor python3 has datasets, pyarrow, pyspark and ray[data]: run scripts/setup.sh",
            venv.display()
        )
    })
}

/// A Python with transformers (CPU only; `apply_chat_template` needs no torch):
/// `$TRAJ_TRANSFORMERS_PYTHON`, the venv `scripts/setup.sh` makes
/// (`target/venvs/tok`, or under `$TRAJ_VENVS`), or `python3`. Fails loudly when
/// none has it.
pub fn transformers_python() -> String {
    let mut candidates: Vec<String> = std::env::var("TRAJ_TRANSFORMERS_PYTHON")
        .into_iter()
        .collect();
    candidates.push(venvs_dir().join("tok/bin/python").display().to_string());
    candidates.push("python3".into());
    for py in &candidates {
        let ok = Command::new(py)
            .args(["-c", "import transformers"])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return py.clone();
        }
    }
    panic!("no Python with transformers among {candidates:?}: run scripts/setup.sh");
}

/// A Python with TRL's preference-data code (`trl.data_utils`, CPU, no torch): the
/// `trl` venv `scripts/setup.sh` makes. Fails loudly when it is missing.
pub fn trl_python() -> PathBuf {
    let py = venvs_dir().join("trl/bin/python");
    let ok = Command::new(&py)
        .args(["-c", "import trl.data_utils, datasets"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(ok, "{} has no trl: run scripts/setup.sh", py.display());
    py
}

/// The top-level fields of a row, each as its raw text.
pub fn raw_fields(line: &str) -> std::collections::BTreeMap<String, String> {
    let m: std::collections::BTreeMap<String, &serde_json::value::RawValue> =
        serde_json::from_str(line).expect("a JSON object");
    m.into_iter()
        .map(|(k, v)| (k, v.get().to_string()))
        .collect()
}

/// Write `prompts` as `{"prompt": ...}` rows to `prompts.jsonl` in `dir`; returns its name.
pub fn write_prompts(dir: &Path, prompts: &[&str]) -> String {
    let text: String = prompts
        .iter()
        .map(|p| format!("{}\n", serde_json::json!({"prompt": p})))
        .collect();
    std::fs::write(dir.join("prompts.jsonl"), text).unwrap();
    "prompts.jsonl".into()
}

/// Every record of a run directory, from all its batch files.
pub fn records(run: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(run).unwrap() {
        let p = e.unwrap().path();
        if p.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("batch_")
        {
            out.extend(read_jsonl(&p));
        }
    }
    out
}

/// The failures of a run directory (none when it has no `failures.jsonl`).
pub fn failures(run: &Path) -> Vec<Value> {
    let p = run.join("failures.jsonl");
    if p.exists() {
        read_jsonl(&p)
    } else {
        Vec::new()
    }
}

/// A JSON file.
pub fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Wait until `f` holds, polling; fails naming `what` after `secs` seconds.
pub fn wait_for(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let t = std::time::Instant::now();
    while !f() {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(secs),
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// traj-run against the stand-in at `url`, run directory `run_dir`, fast retries (1 ms
/// doubling to 20 ms): what every traj-run test starts from.
pub fn standin_run(dir: &Path, url: &str, run_dir: &str) -> Command {
    let mut c = cmd("traj-run", dir);
    c.args([
        "--model",
        "standin",
        "--base-url",
        url,
        "--run-dir",
        run_dir,
    ])
    .args(["--retry-base-ms", "1", "--retry-max-ms", "20"]);
    c
}

/// Pids of the processes whose command line is exactly `argv`.
pub fn processes_running(argv: &[&str]) -> Vec<u32> {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            (cmdline == want).then_some(pid)
        })
        .collect()
}

/// Send signal `sig` (`TERM`, `INT`, `9`, ...) to process `pid` with kill(1).
pub fn send_signal(sig: &str, pid: u32) {
    let st = std::process::Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success(), "kill -{sig} {pid}");
}

/// The page's data block (`<script type="application/json" id="data">`).
pub fn data_block(html: &str) -> Value {
    let open = r#"<script type="application/json" id="data">"#;
    let start = html.find(open).expect("the page has its data block") + open.len();
    let len = html[start..]
        .find("</script>")
        .expect("the data block ends");
    serde_json::from_str(&html[start..start + len]).expect("the data block is JSON")
}

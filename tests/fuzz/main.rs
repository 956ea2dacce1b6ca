//! Fuzz targets, one per parser, on a stable toolchain: the line splitter and the one
//! rule for a line as a JSON object (`lines`), the JSON scanner (`jsonscan`), the Hermes
//! envelope parsers (`hermes`), the JSON-array reader (`jsonarray`), traj-normalize's
//! row reader (`normalize`), and the envelope repair of gpt turns (`repair`). Results:
//! docs/fuzz.md.
//!
//! Each target runs its seed corpus (lines of the real fixtures and hand-written edge
//! cases), then, for `FUZZ_SECS` seconds (default 0: the corpus only, so a plain
//! `cargo test` stays fast), inputs made by mutating seeds (bit flips, cuts, splices,
//! inserted JSON and Hermes tokens) and by a structured JSON generator driven by
//! `arbitrary`. A target fails on a panic or on a broken invariant (see [`targets`]);
//! the input is written to `target/fuzz-failures/` and the run exits 1.
//!
//! `make fuzz` (FUZZ_SECS=600 each) or `cargo test --test fuzz -- TARGET` (the test
//! profile is optimised);
//! `FUZZ_SEED` replays a run.

mod inputs;
mod targets;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A broken invariant, described.
#[derive(Debug)]
pub struct Finding(pub String);

/// What a target checks: `Err` is a broken invariant.
pub type Check = fn(&[u8]) -> Result<(), Finding>;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let secs: u64 = std::env::var("FUZZ_SECS")
        .ok()
        .map(|s| s.parse().expect("FUZZ_SECS: whole seconds"))
        .unwrap_or(0);
    let seed: u64 = std::env::var("FUZZ_SEED")
        .ok()
        .map(|s| s.parse().expect("FUZZ_SEED: an integer"))
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    let corpus = inputs::corpus();
    let mut failed = 0;
    for (name, check) in targets::ALL {
        if !args.is_empty() && !args.iter().any(|a| name.contains(a.as_str())) {
            continue;
        }
        failed += run_target(name, *check, &corpus, Duration::from_secs(secs), seed);
    }
    if failed > 0 {
        eprintln!("fuzz: {failed} failing inputs (in target/fuzz-failures/)");
        std::process::exit(1);
    }
}

/// Run one target; returns the number of failing inputs found.
fn run_target(name: &str, check: Check, corpus: &[Vec<u8>], time: Duration, seed: u64) -> usize {
    // Panics are findings: keep the default hook quiet, report them ourselves.
    std::panic::set_hook(Box::new(|_| {}));
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut failures = 0usize;
    let mut execs = 0u64;
    let mut try_one = |input: &[u8], failures: &mut usize| {
        execs += 1;
        let verdict = match catch_unwind(AssertUnwindSafe(|| check(input))) {
            Ok(Ok(())) => return,
            Ok(Err(Finding(e))) => format!("invariant: {e}"),
            Err(p) => format!(
                "panic: {}",
                p.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default()
            ),
        };
        *failures += 1;
        if *failures <= 20 {
            let path = save(name, *failures, input);
            let verdict: String = verdict.chars().take(400).collect();
            eprintln!(
                "fuzz {name}: {verdict}\n  input ({} bytes): {}",
                input.len(),
                path.display()
            );
        }
    };
    for c in corpus {
        try_one(c, &mut failures);
    }
    let start = Instant::now();
    while start.elapsed() < time {
        for _ in 0..256 {
            let input = inputs::input(&mut rng, corpus);
            try_one(&input, &mut failures);
        }
    }
    let _ = std::panic::take_hook();
    eprintln!(
        "fuzz {name}: {execs} inputs in {:.0?} (seed {seed}), {failures} failing",
        start.elapsed()
    );
    failures
}

fn save(name: &str, n: usize, input: &[u8]) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/fuzz-failures");
    let _ = std::fs::create_dir_all(&dir);
    let p = dir.join(format!("{name}-{n}.bin"));
    let _ = std::fs::write(&p, input);
    p
}

//! The floor of a stage that rewrites rows: every line of a JSONL file parsed into a
//! `serde_json::Value` and written back compact, by THREADS worker threads, the output in
//! input order on stdout. It runs on traj-normalize's own ordered pipeline
//! ([`traj::io::process`]: the same reader, batches, workers and writer) and allocator,
//! with serde_json as traj builds it (`arbitrary_precision`, `preserve_order`); only the
//! work per row differs: no check, no conversion, nothing refused. The least any stage
//! pays that reads each row as JSON and writes it again. `scripts/bench-scale.sh` prints
//! it beside traj-normalize and `jq -c .`.
//!
//! ```sh
//! cargo run --release --example json-floor -- THREADS FILE > /dev/null
//! ```

// A measuring tool: its usage line goes to stderr.
#![allow(clippy::print_stderr)]

use std::path::PathBuf;

use traj::io::{OnError, Output, PipeConfig, Rejects, Source, Verdict};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, threads, path] = &args[..] else {
        eprintln!("usage: json-floor THREADS FILE");
        std::process::exit(2);
    };
    let cfg = PipeConfig {
        stage: "json-floor",
        on_error: OnError::Fail,
        jobs: threads.parse::<usize>()?.max(1),
        drops_are_loss: false,
        select: None,
        batch_lines: 0,
    };
    let mut out = Output::create(None)?;
    let mut rejects = Rejects::open("json-floor", None)?;
    let source = vec![Source::File(PathBuf::from(path))];
    traj::io::process(
        &cfg,
        source,
        &mut out,
        &mut rejects,
        |line, buf| match serde_json::from_slice::<serde_json::Value>(line) {
            Ok(v) => {
                serde_json::to_writer(&mut *buf, &v).expect("write to Vec");
                buf.push(b'\n');
                Verdict::Written
            }
            Err(e) => Verdict::Bad(e.to_string()),
        },
    )?;
    out.commit()
}

//! The stand-in endpoint as a process, for the offline demo and the benchmarks.
//!
//! `cargo run --example standin -- --port 0 --latency-ms 200 --script script.json`
//! prints its base URL (`http://127.0.0.1:PORT/v1`) on stdout, then serves until killed.
//! Test-only: never part of the product binaries.

#![allow(clippy::print_stdout)]

#[path = "mod.rs"]
mod standin;

use std::io::Write;

use clap::Parser;

/// Serve scripted OpenAI-compatible chat completions on 127.0.0.1.
#[derive(Parser)]
#[command(name = "standin")]
struct Args {
    /// Port to bind (0 = a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Delay before every reply, in milliseconds (added to the script's `latency_ms`).
    #[arg(long, default_value_t = 0)]
    latency_ms: u64,
    /// Answer every Nth chat request with 429 and `Retry-After` (0 = never).
    #[arg(long, default_value_t = 0)]
    rate_limit_every: u64,
    /// The `Retry-After` of those 429s, in seconds.
    #[arg(long, default_value = "1")]
    retry_after: String,
    /// Script file (JSON, see tests/standin/README.md). Default: answer every prompt.
    #[arg(long)]
    script: Option<std::path::PathBuf>,
    /// Append one line per chat request to FILE: milliseconds since the start, the
    /// request's number, its status, a hash of its messages (shared by its retries).
    #[arg(long, value_name = "FILE")]
    trace: Option<std::path::PathBuf>,
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let mut script = match &args.script {
        Some(p) => {
            let text = match std::fs::read_to_string(p) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("standin: {}: {e}", p.display());
                    return std::process::ExitCode::from(2);
                }
            };
            match serde_json::from_str::<standin::Script>(&text) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("standin: {}: {e}", p.display());
                    return std::process::ExitCode::from(2);
                }
            }
        }
        None => standin::Script::default(),
    };
    script.latency_ms += args.latency_ms;
    script.trace = args.trace.clone();
    if args.rate_limit_every > 0 {
        script.every = Some(standin::Every {
            n: args.rate_limit_every,
            reply: standin::Reply {
                status: Some(429),
                error: Some("rate limited".into()),
                retry_after: Some(args.retry_after.clone()),
                ..standin::Reply::default()
            },
        });
    }
    // Nobody can read the recorded requests of a process: keep none.
    script.record = Some(false);
    let server = match standin::Standin::start_on(&format!("127.0.0.1:{}", args.port), script) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("standin: bind: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{}", server.url());
    let _ = out.flush();
    server.wait();
    std::process::ExitCode::SUCCESS
}

//! The floor of a stage that rewrites rows: every line of a JSONL file parsed into a
//! `serde_json::Value` and written back compact, by THREADS threads, the output in input
//! order on stdout. No check, no conversion, no rejects: the least any stage pays that
//! reads each row as JSON and writes it again, with serde_json as traj builds it
//! (`arbitrary_precision`, `preserve_order`) and traj-normalize's allocator. Streams:
//! 4 MiB chunks cut at a newline, two per thread in flight. `scripts/bench-scale.sh`
//! prints it beside traj-normalize and `jq -c .`.
//!
//! ```sh
//! cargo run --release --example json-floor -- THREADS FILE > /dev/null
//! ```

// A measuring tool: its usage line goes to stderr.
#![allow(clippy::print_stderr)]

use std::io::{Read, Write};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Lines are handed out in chunks of about this many bytes, cut at a newline.
const CHUNK: usize = 4 << 20;

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, threads, path] = &args[..] else {
        eprintln!("usage: json-floor THREADS FILE");
        std::process::exit(2);
    };
    let threads: usize = threads.parse::<usize>().expect("THREADS: a number").max(1);
    let mut file = std::fs::File::open(path)?;
    let mut stdout = std::io::stdout().lock();
    let mut carry = Vec::new();
    loop {
        let chunks = read_chunks(&mut file, &mut carry, 2 * threads)?;
        if chunks.is_empty() {
            break;
        }
        for out in rewrite_all(&chunks, threads) {
            stdout.write_all(&out)?;
        }
    }
    stdout.flush()
}

/// Up to `n` chunks of whole lines; `carry` holds the start of a line cut by a read.
fn read_chunks(
    file: &mut std::fs::File,
    carry: &mut Vec<u8>,
    n: usize,
) -> std::io::Result<Vec<Vec<u8>>> {
    let mut chunks = Vec::with_capacity(n);
    while chunks.len() < n {
        let mut buf = std::mem::take(carry);
        let have = buf.len();
        buf.resize(have + CHUNK, 0);
        let got = file.read(&mut buf[have..])?;
        buf.truncate(have + got);
        if got == 0 {
            if !buf.is_empty() {
                chunks.push(buf);
            }
            break;
        }
        match memchr::memrchr(b'\n', &buf) {
            Some(k) => {
                *carry = buf.split_off(k + 1);
                chunks.push(buf);
            }
            None => *carry = buf,
        }
    }
    Ok(chunks)
}

/// Each chunk rewritten, by `threads` threads, in the chunks' order.
fn rewrite_all(chunks: &[Vec<u8>], threads: usize) -> Vec<Vec<u8>> {
    let next = AtomicUsize::new(0);
    let outs = Mutex::new(vec![Vec::new(); chunks.len()]);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(chunk) = chunks.get(i) else { break };
                    let out = rewrite(chunk);
                    outs.lock().expect("outputs")[i] = out;
                }
            });
        }
    });
    outs.into_inner().expect("outputs")
}

/// Every line of `chunk` parsed and written back compact.
fn rewrite(chunk: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(chunk.len());
    for line in chunk.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let v: serde_json::Value = serde_json::from_slice(line).expect("a JSON line");
        serde_json::to_writer(&mut out, &v).expect("write to Vec");
        out.push(b'\n');
    }
    out
}

//! A zero-copy, order-preserving line pipeline for stages that keep or drop whole lines
//! (traj-filter): kept lines are written straight from the read buffer.
//!
//! Why not [`crate::io::process`]: that pipeline copies every line twice (into a
//! batch, then into an output buffer) and allocates an output buffer per batch, which
//! caps a pass-through at about a third of `cat | cat` here. A filter never changes a
//! line, so it needs neither copy:
//! - one reader thread reads large chunks (4 MiB, grown for longer lines) with plain
//!   `read` calls and cuts them after the last newline; buffers are recycled;
//! - `jobs` workers judge every line of a chunk and describe the output as ranges of the
//!   chunk (adjacent kept lines form one range);
//! - the calling thread writes the ranges in input order, and drops and bad lines to the
//!   rejects file, with the same semantics as `jsonl::process` (blank lines skipped, CR
//!   before LF and a BOM on line 1 removed, a missing final newline added, `--on-error`,
//!   [`Summary`] counts).
//!
//! Memory: a fixed pool of (2 x jobs + 4) chunk buffers, recycled (never more, none
//! allocated or zeroed again after the first round), ~32 MB with 2 workers.
//!
//! Zero-copy output: when the output is a pipe ([`Sink::splice_target`]) and a source is
//! a plain file ([`raw_file`]), the kept ranges of a chunk are moved from the file's page
//! cache into the pipe with `splice(2)` instead of being written from the chunk: the
//! bytes were read once, to be validated, and are not copied a second time. Lines whose
//! bytes change (CR, missing newline) are still written. The output is the same either
//! way; the input file must not change while it is read (as for any reader).
//!
//! A selection (`--shard I/N`): the reader counts each chunk's non-blank lines (one
//! `memchr` pass), so a worker knows the global number of each line and skips the lines
//! not selected.

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};
use crossbeam_channel::{Receiver, Sender, bounded};

use crate::io::{
    Cut, PipeConfig, Rejects, Select, Sink, Source, Summary, Verdict, cut_line, is_blank,
    open_source, raw_file,
};

/// Bytes read per chunk (a chunk grows to hold a longer line).
const CHUNK: usize = 4 << 20;

struct Chunk {
    seq: u64,
    source: Arc<str>,
    /// Index of the source, to restart line numbers.
    source_idx: usize,
    /// The first chunk of its source (where a BOM may start line 1).
    first: bool,
    /// Non-blank lines before this chunk, all sources counted (with a selection only).
    nonblank_before: u64,
    /// Holds whole lines; the last may lack its newline only at the end of a source.
    data: Vec<u8>,
    /// The plain file the bytes came from and the offset of `data[0]` in it, when the
    /// output can be spliced from it.
    file: Option<(Arc<std::fs::File>, u64)>,
}

/// A piece of output: a range of the chunk, or of the worker's side buffer (lines whose
/// bytes had to change: CR removed, newline added).
#[derive(Debug, Clone, Copy)]
enum Piece {
    Chunk(usize, usize),
    Extra(usize, usize),
}

struct Event {
    /// 1-based line number within the chunk.
    rel_line: u64,
    start: usize,
    end: usize,
    /// A CR was cut after `end` (a reject gives it back).
    cr: bool,
    /// Output pieces that come before this line.
    pieces_before: usize,
    verdict: Verdict,
}

struct Done {
    chunk: Chunk,
    pieces: Vec<Piece>,
    extra: Vec<u8>,
    events: Vec<Event>,
    /// Physical lines in the chunk (blank ones included).
    lines: u64,
    read: u64,
    kept: u64,
}

/// Run `judge` over every non-blank line of `sources` and write the kept lines
/// ([`Verdict::Written`]: the line itself, unchanged), in input order, to `out`; see
/// the module documentation.
pub fn run<F, W>(
    cfg: &PipeConfig,
    sources: Vec<Source>,
    out: &mut W,
    rejects: &mut Rejects,
    judge: F,
) -> Result<Summary>
where
    F: Fn(&[u8]) -> Verdict + Sync,
    W: Sink,
{
    let jobs = cfg.workers();
    let pool = jobs * 2 + 4;
    let (work_tx, work_rx) = bounded::<Chunk>(jobs * 2);
    let (done_tx, done_rx) = bounded::<Judged>(jobs * 2);
    let (recycle_tx, recycle_rx) = bounded::<Vec<u8>>(pool);
    let stop = AtomicBool::new(false);
    let mut summary = Summary::default();
    let mut panicked = None;
    let splice = out.splice_target()?.is_some();

    std::thread::scope(|s| -> Result<()> {
        let stop = &stop;
        let select = cfg.select.as_ref();
        let counting = select.is_some();
        let reading = Reading {
            counting,
            splice,
            pool,
        };
        let reader = s.spawn(move || read_chunks(sources, reading, (work_tx, recycle_rx), stop));
        for _ in 0..jobs {
            let work_rx = work_rx.clone();
            let done_tx = done_tx.clone();
            let judge = &judge;
            s.spawn(move || {
                for chunk in work_rx.iter() {
                    // A panic in `judge` (a bug) goes to the writer, which stops; it is
                    // raised again once every thread is done.
                    let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        judge_chunk(chunk, select, judge)
                    }));
                    if done_tx.send(done).is_err() {
                        return;
                    }
                }
            });
        }
        drop(work_rx);
        drop(done_tx);
        let result = write_in_order(
            cfg,
            (&done_rx, &mut panicked),
            &recycle_tx,
            out,
            rejects,
            &mut summary,
        );
        if result.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        // The reader may wait for a free buffer: no more will come.
        drop(recycle_tx);
        drop(done_rx);
        crate::io::pipeline::join_reader(result, reader, &mut panicked)
    })?;
    Ok(summary)
}

/// What the reader needs to know.
#[derive(Clone, Copy)]
struct Reading {
    /// Count each chunk's non-blank lines (a selection).
    counting: bool,
    /// The output is a pipe: give chunks of plain files their file ([`Chunk::file`]).
    splice: bool,
    /// Chunk buffers in all.
    pool: usize,
}

fn read_chunks(
    sources: Vec<Source>,
    how: Reading,
    (work_tx, recycle_rx): (Sender<Chunk>, Receiver<Vec<u8>>),
    stop: &AtomicBool,
) -> Result<()> {
    let mut seq = 0;
    let mut nonblank = 0u64;
    let mut carry: Vec<u8> = Vec::new();
    let mut allocated = 0;
    for (source_idx, src) in sources.into_iter().enumerate() {
        let name: Arc<str> = Arc::from(src.name());
        let mut r = open_source(&src)?;
        if src == Source::Stdin {
            crate::io::output::prepare_pipe(std::os::fd::AsFd::as_fd(&std::io::stdin()));
        }
        let raw = if how.splice {
            raw_file(&src).map(Arc::new)
        } else {
            None
        };
        // bytes of the source read so far: the offset of the next byte read
        let mut offset = 0u64;
        let mut eof = false;
        let mut first = true;
        while !eof {
            if stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            // A buffer from the pool: a free one, a new one while the pool is not
            // full, else the next one the writer gives back.
            let mut data = match recycle_rx.try_recv() {
                Ok(d) => d,
                Err(_) if allocated < how.pool => {
                    allocated += 1;
                    Vec::new()
                }
                Err(_) => match recycle_rx.recv() {
                    Ok(d) => d,
                    Err(_) => return Ok(()), // the writer stopped
                },
            };
            let target = CHUNK.max(carry.len() * 2);
            if data.len() < target {
                data.resize(target, 0); // a recycled buffer was cut after its last line: only that tail is zeroed
            }
            data[..carry.len()].copy_from_slice(&carry);
            let mut filled = carry.len();
            carry.clear();
            // Fill the buffer, then cut after the last newline.
            loop {
                if filled == data.len() {
                    if memchr::memchr(b'\n', &data[..filled]).is_some() {
                        break;
                    }
                    let l = data.len();
                    data.resize(l * 2, 0); // one line longer than the chunk: grow
                }
                let n = loop {
                    match r.read(&mut data[filled..]) {
                        Ok(n) => break n,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            return Err(anyhow::Error::new(e))
                                .with_context(|| format!("{name}: read error"));
                        }
                    }
                };
                if n == 0 {
                    eof = true;
                    break;
                }
                filled += n;
                offset += n as u64;
            }
            data.truncate(filled);
            if !eof {
                let k = memchr::memrchr(b'\n', &data).expect("the fill loop stops at a newline");
                carry.extend_from_slice(&data[k + 1..]);
                data.truncate(k + 1);
            }
            if data.is_empty() {
                allocated -= 1; // the buffer is dropped: the pool may make another
                continue;
            }
            let first = std::mem::replace(&mut first, false);
            let nonblank_before = nonblank;
            let file = raw.as_ref().map(|f| (f.clone(), offset - filled as u64));
            if how.counting {
                // A selection names non-blank lines by their number across all inputs:
                // the workers need each chunk's starting count.
                nonblank += lines(&data, first)
                    .filter(|(c, _)| !is_blank(&data[c.line.clone()]))
                    .count() as u64;
            }
            let chunk = Chunk {
                seq,
                source: name.clone(),
                source_idx,
                first,
                nonblank_before,
                data,
                file,
            };
            seq += 1;
            if work_tx.send(chunk).is_err() {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// The lines of a chunk: for each, how it is cut ([`cut_line`], its range in `data`)
/// and the offset of the next line.
fn lines(data: &[u8], first: bool) -> impl Iterator<Item = (Cut, usize)> + '_ {
    let mut pos = 0;
    std::iter::from_fn(move || {
        if pos >= data.len() {
            return None;
        }
        let line_start = pos;
        let nl = memchr::memchr(b'\n', &data[pos..]).map(|k| pos + k);
        pos = nl.map_or(data.len(), |k| k + 1);
        let mut cut = cut_line(&data[line_start..pos], first && line_start == 0);
        cut.line = line_start + cut.line.start..line_start + cut.line.end;
        Some((cut, pos))
    })
}

fn judge_chunk<F>(chunk: Chunk, select: Option<&Select>, judge: &F) -> Done
where
    F: Fn(&[u8]) -> Verdict,
{
    let data = &chunk.data;
    let mut pieces: Vec<Piece> = Vec::new();
    let mut extra = Vec::new();
    let mut events = Vec::new();
    let (mut lines, mut read, mut kept) = (0u64, 0u64, 0u64);
    let mut nonblank = chunk.nonblank_before;
    // `open`: the chunk range being extended by adjacent kept lines.
    let mut open: Option<(usize, usize)> = None;
    for (cut, next) in self::lines(data, chunk.first) {
        let (start, end) = (cut.line.start, cut.line.end);
        // whether the line's own LF directly follows its bytes (no CR was cut)
        let own_lf = cut.lf;
        lines += 1;
        let line = &data[start..end];
        if is_blank(line) {
            continue;
        }
        nonblank += 1;
        if select.is_some_and(|s| !s.holds(nonblank - 1)) {
            continue; // a line not selected: as if it were not there
        }
        read += 1;
        match judge(line) {
            Verdict::Written => {
                kept += 1;
                // Unchanged bytes plus their own LF: a range of the chunk.
                if own_lf {
                    match &mut open {
                        Some((_, e)) if *e == start => *e = next,
                        _ => {
                            if let Some((a, b)) = open.take() {
                                pieces.push(Piece::Chunk(a, b));
                            }
                            open = Some((start, next));
                        }
                    }
                } else {
                    if let Some((a, b)) = open.take() {
                        pieces.push(Piece::Chunk(a, b));
                    }
                    let a = extra.len();
                    extra.extend_from_slice(line);
                    extra.push(b'\n');
                    pieces.push(Piece::Extra(a, extra.len()));
                }
            }
            v => {
                if let Some((a, b)) = open.take() {
                    pieces.push(Piece::Chunk(a, b));
                }
                events.push(Event {
                    rel_line: lines,
                    start,
                    end,
                    cr: cut.cr,
                    pieces_before: pieces.len(),
                    verdict: v,
                });
            }
        }
    }
    if let Some((a, b)) = open {
        pieces.push(Piece::Chunk(a, b));
    }
    Done {
        chunk,
        pieces,
        extra,
        events,
        lines,
        read,
        kept,
    }
}

/// Write the pieces of a chunk in order: the chunk's ranges spliced from its file when
/// it has one and `splicing` still holds, else written from the chunk.
fn write_pieces(
    out: &mut dyn Sink,
    splicing: &mut bool,
    d: &Done,
    pieces: &[Piece],
) -> std::io::Result<()> {
    for p in pieces {
        match *p {
            Piece::Chunk(a, b) => match &d.chunk.file {
                Some((f, off)) if *splicing => {
                    let done = splice_range(out, f, off + a as u64, b - a)?;
                    if done < b - a {
                        *splicing = false; // splice refused: write from now on
                        out.write_all(&d.chunk.data[a + done..b])?;
                    }
                }
                _ => out.write_all(&d.chunk.data[a..b])?,
            },
            Piece::Extra(a, b) => out.write_all(&d.extra[a..b])?,
        }
    }
    Ok(())
}

/// Splice `len` bytes of `file` from `off` into the output's pipe; returns how many were
/// spliced: less than `len` when the kernel refuses splicing from this file (the caller
/// writes the rest).
fn splice_range(
    out: &mut dyn Sink,
    file: &std::fs::File,
    mut off: u64,
    len: usize,
) -> std::io::Result<usize> {
    let Some(pipe) = out.splice_target()? else {
        return Ok(0);
    };
    let mut done = 0;
    while done < len {
        match rustix::pipe::splice(
            file,
            Some(&mut off),
            pipe,
            None,
            len - done,
            rustix::pipe::SpliceFlags::MOVE,
        ) {
            Ok(0) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the input file shrank while it was read",
                ));
            }
            Ok(n) => done += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => return Ok(done),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(done)
}

/// A worker's result, or its panic.
type Judged = std::thread::Result<Done>;

fn write_in_order(
    cfg: &PipeConfig,
    (done_rx, panicked): (&Receiver<Judged>, &mut Option<crate::io::Panic>),
    recycle_tx: &Sender<Vec<u8>>,
    out: &mut dyn Sink,
    rejects: &mut Rejects,
    summary: &mut Summary,
) -> Result<()> {
    let mut source_idx = usize::MAX;
    let mut base = 0u64;
    let mut splicing = true;
    crate::io::in_order(
        done_rx,
        |d: &Done| d.chunk.seq,
        panicked,
        |d| {
            if d.chunk.source_idx != source_idx {
                source_idx = d.chunk.source_idx;
                base = 0;
            }
            summary.read += d.read;
            for ev in &d.events {
                let line = crate::io::Raw {
                    bytes: &d.chunk.data[ev.start..ev.end],
                    cr: ev.cr,
                };
                let at = (&d.chunk.source, base + ev.rel_line, line);
                if let Some(err) = summary.not_written(cfg.policy(), rejects, at, &ev.verdict)? {
                    // Everything before the bad line is written; nothing after.
                    write_pieces(out, &mut splicing, &d, &d.pieces[..ev.pieces_before])?;
                    return Err(err.into());
                }
            }
            write_pieces(out, &mut splicing, &d, &d.pieces)?;
            summary.written += d.kept;
            base += d.lines;
            let _ = recycle_tx.try_send(d.chunk.data);
            Ok(())
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{OnError, Shard};
    use std::io::Write;

    fn cfg(on_error: OnError) -> PipeConfig {
        crate::io::test_pipe(on_error, 2, false)
    }

    fn judge(line: &[u8]) -> Verdict {
        match line {
            b"bad" => Verdict::Bad("bad line".into()),
            l if l.starts_with(b"drop") => Verdict::Dropped(vec!["dropped".into()]),
            _ => Verdict::Written,
        }
    }

    fn go(data: &[u8], on_error: OnError) -> (Result<Summary>, Vec<u8>) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("in.jsonl");
        std::fs::write(&p, data).unwrap();
        let mut out = Vec::new();
        let mut rej = Rejects::open("test", None).unwrap();
        let r = run(
            &cfg(on_error),
            vec![Source::File(p)],
            &mut out,
            &mut rej,
            judge,
        );
        (r, out)
    }

    #[test]
    fn line_endings_bom_blank_lines_and_order() {
        let (s, out) = go(b"\xEF\xBB\xBFa\r\n\n  \ndrop 1\nb\nc", OnError::Fail);
        let s = s.unwrap();
        assert_eq!(out, b"a\nb\nc\n");
        assert_eq!((s.read, s.written, s.dropped_lines), (4, 3, 1));
    }

    #[test]
    fn many_chunks_and_long_lines_keep_order_and_line_numbers() {
        let mut data = Vec::new();
        for i in 0..3000 {
            let pad = if i % 500 == 7 { 5 << 20 } else { i * 97 % 5000 };
            writeln!(data, "{i} {}", "x".repeat(pad)).unwrap();
            if i == 2500 {
                data.extend_from_slice(b"bad\n");
            }
        }
        let (s, out) = go(&data, OnError::Skip);
        let s = s.unwrap();
        let want: Vec<u8> = data
            .split_inclusive(|&b| b == b'\n')
            .filter(|l| *l != b"bad\n")
            .flatten()
            .copied()
            .collect();
        assert!(out == want);
        assert_eq!((s.read, s.written, s.bad), (3001, 3000, 1));
        let (e, out) = go(&data, OnError::Fail);
        assert_eq!(
            e.unwrap_err()
                .to_string()
                .rsplit_once(": ")
                .unwrap()
                .0
                .rsplit(':')
                .next(),
            Some("2502")
        );
        assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 2501);
    }

    /// `--shard I/N` gives each shard the lines `jsonl::process` gives it (non-blank
    /// lines counted across sources and chunks), with the same counts.
    #[test]
    fn shards_match_the_line_pipeline() {
        let d = tempfile::tempdir().unwrap();
        let mut paths = Vec::new();
        for f in 0..2 {
            let mut data = b"\xEF\xBB\xBF".to_vec();
            for i in 0..2500 {
                let pad = "x".repeat(i * 131 % 6000);
                match i % 7 {
                    0 => data.extend_from_slice(b"  \n"),
                    1 => writeln!(data, "{f} {i} {pad}\r").unwrap(),
                    2 if i % 3 == 0 => data.extend_from_slice(b"drop\n"),
                    _ => writeln!(data, "{f} {i} {pad}").unwrap(),
                }
            }
            data.extend_from_slice(b"no final newline");
            let p = d.path().join(format!("in{f}.jsonl"));
            std::fs::write(&p, data).unwrap();
            paths.push(p);
        }
        let sources = || paths.iter().cloned().map(Source::File).collect::<Vec<_>>();
        let mut union = 0;
        for i in 0..3 {
            let c = PipeConfig {
                select: Some(format!("{i}/3").parse::<Shard>().unwrap().into()),
                ..cfg(OnError::Skip)
            };
            let (mut fast, mut lines) = (Vec::new(), Vec::new());
            let mut rej = Rejects::open("test", None).unwrap();
            let a = run(&c, sources(), &mut fast, &mut rej, judge).unwrap();
            let b = crate::io::process(&c, sources(), &mut lines, &mut rej, |l, out| {
                let v = judge(l);
                if let Verdict::Written = v {
                    out.extend_from_slice(l);
                    out.push(b'\n');
                }
                v
            })
            .unwrap();
            assert!(fast == lines, "shard {i}/3 differs");
            assert_eq!(
                (a.read, a.written, a.dropped_lines),
                (b.read, b.written, b.dropped_lines)
            );
            union += a.read;
        }
        let mut rej = Rejects::open("test", None).unwrap();
        let all = run(
            &cfg(OnError::Skip),
            sources(),
            &mut Vec::new(),
            &mut rej,
            judge,
        );
        assert_eq!(
            union,
            all.unwrap().read,
            "every non-blank line in one shard"
        );
    }

    /// A panic in the judge (a bug) is raised again, and what was written is a prefix
    /// of the input: no chunk after the one that panicked, no gap.
    #[test]
    fn a_panicking_judge_leaves_a_prefix() {
        let mut data = Vec::new();
        for i in 0..3000 {
            writeln!(data, "{i} {}", "x".repeat(5000)).unwrap();
        }
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("in.jsonl");
        std::fs::write(&p, &data).unwrap();
        let mut out = Vec::new();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut rej = Rejects::open("test", None).unwrap();
            run(
                &cfg(OnError::Fail),
                vec![Source::File(p)],
                &mut out,
                &mut rej,
                |line| {
                    assert!(!line.starts_with(b"1500 "), "boom");
                    Verdict::Written
                },
            )
        }));
        assert!(r.is_err(), "the panic is raised again");
        assert!(out.len() < data.len() && data.starts_with(&out));
    }
}

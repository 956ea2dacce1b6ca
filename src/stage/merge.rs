//! Merging shards: deduplicate by key, drop tombstones, sort by `prompt_index`, in
//! bounded memory.
//!
//! How it works (an external merge sort):
//! 1. Every input line is parsed once (top-level keys only). Tombstones (`discarded`)
//!    and bad lines go to the rejects file at once, in input order.
//! 2. Each kept row is appended, with its sort key (`prompt_index`, then input order),
//!    its dedup key and its location, to an in-memory buffer. When the buffer holds more
//!    than `buffer_bytes`, it is sorted and written to a spill file (a "run") in a
//!    private temp directory, removed at the end.
//! 3. The runs are merged k ways (at most [`FAN_IN`] files open at once; more runs are
//!    first merged in passes). Rows come out sorted by `prompt_index`; rows without one
//!    follow, in input order.
//! 4. Duplicates: an index maps each dedup key (a 128-bit hash) to the row that wins
//!    (`--keep first|last`); a row is written only if it is the winner of its key, else
//!    it goes to the rejects file as a duplicate. A row has a key only when the
//!    [`KeySpec`] gives it one: under the default (`prompt_index`) a row without that
//!    field is never a duplicate, so merging shards of foreign data drops nothing.
//!
//! Memory: the buffer (`--buffer-size`, default 64 MiB), plus the dedup index, about
//! 64 bytes per distinct key (1 million rows: ~64 MB), plus 64 KiB per run being merged.
//! Disk: one copy of the kept rows in the temp directory while merging.

use std::borrow::Cow;
use std::collections::{BinaryHeap, HashMap};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Deserialize;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use crate::format::row::{self, BadRow};
use crate::io::{OnError, Rejects, Source, Verdict};

/// Most spill files merged at once.
pub const FAN_IN: usize = 64;

/// Which duplicate survives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Keep {
    /// The first row of a key in input order.
    First,
    /// The last row of a key in input order (a re-run supersedes an earlier one).
    Last,
}

/// How rows are identified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySpec {
    /// A top-level field (default `prompt_index`, traj-run's key); rows without it (or
    /// with `null`) have no key and are never de-duplicated.
    Field(String),
    /// The text of the first human/user turn (or `prompt`), whitespace-trimmed; rows
    /// with no such text have no key.
    Prompt,
    /// The row's exact bytes: only byte-identical lines are duplicates.
    Line,
}

/// Settings of one merge.
#[derive(Debug, Clone)]
pub struct MergeConfig {
    pub key: KeySpec,
    pub keep: Keep,
    /// Bytes of rows buffered before a spill.
    pub buffer_bytes: usize,
    /// Where spill files go (default: the system temp directory).
    pub tmp_dir: Option<PathBuf>,
    pub on_error: OnError,
    /// Keep a uniform sample of this many rows (after de-duplication).
    pub sample: Option<Sample>,
}

/// `--sample N --seed S`: a bottom-k sample. Each row gets a seeded hash of its key (of
/// its bytes when it has none) and the N rows with the smallest hashes are kept. The
/// choice depends only on the rows and the seed, never on their order or on threads;
/// memory is 8 bytes per sampled row.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub n: usize,
    pub seed: u64,
}

impl Sample {
    fn hash(&self, key: Option<u128>, line: &[u8]) -> u64 {
        let mut h = Sha256::new();
        h.update(self.seed.to_le_bytes());
        match key {
            Some(k) => h.update(k.to_le_bytes()),
            None => h.update(line),
        }
        u64::from_le_bytes(h.finalize()[..8].try_into().expect("32-byte digest"))
    }
}

/// Counts of one merge.
#[derive(Debug, Default, Clone)]
pub struct MergeSummary {
    pub files: usize,
    /// Lines read, rows written, bad lines (`lost`: bad lines that went to no rejects
    /// file; duplicates and tombstones are counted below, never lost).
    pub lines: crate::io::Summary,
    pub duplicates: u64,
    /// Rows written that had no key under the [`KeySpec`] (never de-duplicated).
    pub unkeyed: u64,
    pub tombstones: u64,
    /// Spill files written (0: everything fit in the buffer).
    pub runs: usize,
    /// Rows left out by `--sample`.
    pub not_sampled: u64,
}

/// The inputs of a merge: files, `-`, and directories (their `batch_*.jsonl` and
/// `batch_*.jsonl.gz` files in natural order: `batch_2` before `batch_10`).
pub fn merge_sources(args: &[String]) -> Result<Vec<Source>> {
    crate::io::sources_with_prefix(args, "batch_")
}

/// One row on its way through the sort.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rec {
    /// `prompt_index` when it is an integer.
    index: Option<i64>,
    /// Position in the input (all sources in order).
    seq: u64,
    src: u32,
    lineno: u64,
    /// Dedup key; `None`: the row has no key and is never a duplicate.
    key: Option<u128>,
    /// How the key reads in messages (`prompt_index 5`).
    label: String,
    line: Vec<u8>,
}

impl Rec {
    fn order(&self) -> (bool, i64, u64) {
        (self.index.is_none(), self.index.unwrap_or(0), self.seq)
    }

    fn write_to(&self, w: &mut impl Write) -> std::io::Result<()> {
        let (has, idx) = (self.index.is_some() as u8, self.index.unwrap_or(0));
        w.write_all(&[has])?;
        w.write_all(&idx.to_le_bytes())?;
        w.write_all(&self.seq.to_le_bytes())?;
        w.write_all(&self.src.to_le_bytes())?;
        w.write_all(&self.lineno.to_le_bytes())?;
        w.write_all(&[self.key.is_some() as u8])?;
        w.write_all(&self.key.unwrap_or(0).to_le_bytes())?;
        w.write_all(&(self.label.len() as u32).to_le_bytes())?;
        w.write_all(self.label.as_bytes())?;
        w.write_all(&(self.line.len() as u64).to_le_bytes())?;
        w.write_all(&self.line)
    }

    /// Read one record; `None` at the end of the run.
    fn read_from(r: &mut impl Read) -> Result<Option<Rec>> {
        let mut has = [0u8; 1];
        match r.read_exact(&mut has) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        let mut b8 = [0u8; 8];
        let mut b4 = [0u8; 4];
        let mut b16 = [0u8; 16];
        r.read_exact(&mut b8)?;
        let idx = i64::from_le_bytes(b8);
        r.read_exact(&mut b8)?;
        let seq = u64::from_le_bytes(b8);
        r.read_exact(&mut b4)?;
        let src = u32::from_le_bytes(b4);
        r.read_exact(&mut b8)?;
        let lineno = u64::from_le_bytes(b8);
        let mut has_key = [0u8; 1];
        r.read_exact(&mut has_key)?;
        r.read_exact(&mut b16)?;
        let key = (has_key[0] == 1).then(|| u128::from_le_bytes(b16));
        r.read_exact(&mut b4)?;
        let mut label = vec![0u8; u32::from_le_bytes(b4) as usize];
        r.read_exact(&mut label)?;
        r.read_exact(&mut b8)?;
        let mut line = vec![0u8; u64::from_le_bytes(b8) as usize];
        r.read_exact(&mut line)?;
        Ok(Some(Rec {
            index: (has[0] == 1).then_some(idx),
            seq,
            src,
            lineno,
            key,
            label: String::from_utf8(label).context("corrupt spill file")?,
            line,
        }))
    }
}

/// Where the winner of a key was read.
#[derive(Debug, Clone, Copy)]
struct Winner {
    seq: u64,
    src: u32,
    lineno: u64,
}

/// The top-level fields of a row, values as raw (validated) JSON text.
type Fields<'a> = HashMap<Cow<'a, str>, &'a str>;

/// Validate a line with the fast scanner and collect its top-level fields.
fn fields_of(line: &[u8]) -> Result<Fields<'_>, BadRow> {
    row::first_is_brace(line)?;
    // The line engine's message, as traj-merge always wrote it.
    let bad = |_at: usize| match crate::io::parse_object(line) {
        Err(msg) => BadRow::Line(msg),
        Ok(_) => BadRow::Line("invalid JSON".to_string()),
    };
    let text = row::utf8(line)?;
    let mut fields = Fields::new();
    let end = row::object_members(line, 0, |key, vs, ve| {
        let key = std::str::from_utf8(key).unwrap_or_default();
        let key = if key.contains('\\') {
            row::decode_str(&format!("\"{key}\""))
                .map_or(Cow::Borrowed(key), |k| Cow::Owned(k.into_owned()))
        } else {
            Cow::Borrowed(key)
        };
        fields.insert(key, &text[vs..ve]);
    })
    .map_err(bad)?;
    if !line[end..].iter().all(|b| b.is_ascii_whitespace()) {
        return Err(bad(end));
    }
    Ok(fields)
}

#[derive(Deserialize)]
struct TurnLite<'a> {
    #[serde(borrow, default)]
    from: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    role: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    value: Option<&'a RawValue>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
}

/// The first human/user turn of `conversations` or `messages`, else `prompt`.
fn prompt_text(fields: &Fields<'_>) -> Option<String> {
    let text_of = |raw: &str| match row::decode_str(raw) {
        Some(s) => s.trim().to_string(),
        None => raw.to_string(), // not a string: its JSON text identifies it
    };
    if let Some(raw) = fields.get("conversations")
        && let Ok((turns, _)) = row::conversation_turns(raw.as_bytes(), raw, 0)
        && let Some(t) = turns.iter().find(|t| t.from == "human" || t.from == "user")
    {
        return Some(text_of(t.value));
    }
    if let Some(raw) = fields.get("messages")
        && let Ok(turns) = serde_json::from_str::<Vec<TurnLite>>(raw)
    {
        for t in turns {
            let who = t.from.as_deref().or(t.role.as_deref());
            if matches!(who, Some("human" | "user")) {
                let v = t.value.or(t.content)?;
                return Some(text_of(v.get()));
            }
        }
    }
    fields.get("prompt").map(|p| text_of(p))
}

fn hash128(kind: &str, text: &[u8]) -> u128 {
    let mut h = Sha256::new();
    h.update(kind.as_bytes());
    h.update([0]);
    h.update(text);
    let d = h.finalize();
    u128::from_le_bytes(d[..16].try_into().expect("32-byte digest"))
}

enum Parsed {
    Row {
        index: Option<i64>,
        key: Option<u128>,
        label: String,
    },
    Tombstone(String),
}

fn parse_line(line: &[u8], spec: &KeySpec) -> Result<Parsed, BadRow> {
    let fields = fields_of(line)?;
    if let Some(d) = fields.get("discarded")
        && *d != "null"
    {
        return Ok(Parsed::Tombstone(format!("tombstone: discarded {d}")));
    }
    let index = fields
        .get("prompt_index")
        .and_then(|v| v.parse::<i64>().ok());
    let (key, label) = match spec {
        KeySpec::Field(name) => match fields.get(name.as_str()).filter(|v| **v != "null") {
            Some(v) => (Some(hash128(name, v.as_bytes())), format!("{name} {v}")),
            None => (None, String::new()),
        },
        KeySpec::Prompt => match prompt_text(&fields) {
            Some(text) => {
                let h = hash128("\0prompt", text.as_bytes());
                (Some(h), format!("prompt {:08x}", (h >> 96) as u32))
            }
            None => (None, String::new()),
        },
        KeySpec::Line => {
            let h = hash128("\0line", line);
            (Some(h), format!("identical line {:08x}", (h >> 96) as u32))
        }
    };
    Ok(Parsed::Row { index, key, label })
}

/// Merge `sources` into `out`: see the module documentation.
pub fn merge(
    cfg: &MergeConfig,
    sources: Vec<Source>,
    out: &mut dyn Write,
    rejects: &mut Rejects,
) -> Result<MergeSummary> {
    let mut s = MergeSummary {
        files: sources.len(),
        ..MergeSummary::default()
    };
    let names: Vec<String> = sources.iter().map(Source::name).collect();
    let tmp = match &cfg.tmp_dir {
        Some(d) => tempfile::Builder::new().prefix("traj-merge-").tempdir_in(d),
        None => tempfile::Builder::new().prefix("traj-merge-").tempdir(),
    }
    .context("cannot create a temp directory for spill files")?;
    let mut winners: HashMap<u128, Winner> = HashMap::new();
    // The `n` smallest sample hashes seen (duplicates of a key share one hash).
    let mut smallest: std::collections::BTreeSet<u64> = std::collections::BTreeSet::new();
    let mut buf: Vec<Rec> = Vec::new();
    let mut buf_bytes = 0usize;
    let mut runs: Vec<PathBuf> = Vec::new();
    let mut seq = 0u64;

    let mut reader = crate::io::Records::new(sources, None);
    while let Some(rec) = reader.next_record()? {
        let (src_name, lineno, src) = (rec.source.clone(), rec.lineno, rec.source_index as u32);
        let mut owned = reader.take_line();
        let (src_name, line) = (&src_name, owned.as_slice());
        s.lines.read += 1;
        match parse_line(line, &cfg.key) {
            Err(reason) => {
                let at = (src_name, lineno, line);
                let bad = Verdict::Bad(reason.to_string());
                if let Some(err) = s
                    .lines
                    .not_written((cfg.on_error, false), rejects, at, &bad)?
                {
                    return Err(err.into());
                }
            }
            Ok(Parsed::Tombstone(reason)) => {
                s.tombstones += 1;
                rejects.write(src_name, lineno, &[reason], line)?;
            }
            Ok(Parsed::Row { index, key, label }) => {
                if let Some(sample) = &cfg.sample {
                    smallest.insert(sample.hash(key, line));
                    if smallest.len() > sample.n {
                        smallest.pop_last();
                    }
                }
                if let Some(k) = key {
                    let w = Winner { seq, src, lineno };
                    match cfg.keep {
                        Keep::First => {
                            winners.entry(k).or_insert(w);
                        }
                        Keep::Last => {
                            winners.insert(k, w);
                        }
                    }
                }
                buf_bytes += line.len() + label.len() + 64;
                buf.push(Rec {
                    index,
                    seq,
                    src,
                    lineno,
                    key,
                    label,
                    line: std::mem::take(&mut owned),
                });
                seq += 1;
                if buf_bytes > cfg.buffer_bytes {
                    runs.push(spill(&mut buf, tmp.path(), runs.len())?);
                    buf_bytes = 0;
                }
            }
        }
    }

    let mut emit = |r: Rec| -> Result<()> {
        let keep = match r.key {
            None => true,
            Some(k) => winners.get(&k).is_some_and(|w| w.seq == r.seq),
        };
        let sampled = match &cfg.sample {
            None => true,
            Some(sample) => smallest.contains(&sample.hash(r.key, &r.line)),
        };
        if keep && !sampled {
            s.not_sampled += 1;
        } else if keep {
            s.unkeyed += r.key.is_none() as u64;
            out.write_all(&r.line)?;
            out.write_all(b"\n")?;
            s.lines.written += 1;
        } else {
            let w = winners[&r.key.expect("a duplicate has a key")];
            let reason = format!(
                "duplicate: {} (kept {}:{})",
                r.label, names[w.src as usize], w.lineno
            );
            s.duplicates += 1;
            rejects.write(&names[r.src as usize], r.lineno, &[reason], &r.line)?;
        }
        Ok(())
    };
    if runs.is_empty() {
        buf.sort_by_key(Rec::order);
        for r in buf.drain(..) {
            emit(r)?;
        }
    } else {
        if !buf.is_empty() {
            runs.push(spill(&mut buf, tmp.path(), runs.len())?);
        }
        s.runs = runs.len();
        let mut next_id = runs.len();
        while runs.len() > FAN_IN {
            let group: Vec<PathBuf> = runs.drain(..FAN_IN).collect();
            let path = tmp.path().join(format!("run-{next_id}"));
            next_id += 1;
            let mut w = BufWriter::new(File::create(&path)?);
            merge_runs(&group, &mut |r| Ok(r.write_to(&mut w)?))?;
            w.flush()?;
            for g in group {
                std::fs::remove_file(g)?;
            }
            runs.push(path);
        }
        merge_runs(&runs, &mut emit)?;
    }
    drop(tmp);
    Ok(s)
}

/// Sort the buffer and write it as one run; returns its path.
fn spill(buf: &mut Vec<Rec>, dir: &Path, id: usize) -> Result<PathBuf> {
    buf.sort_by_key(Rec::order);
    let path = dir.join(format!("run-{id}"));
    let mut w = BufWriter::with_capacity(
        crate::io::BUF_SIZE,
        File::create(&path).with_context(|| format!("cannot create {}", path.display()))?,
    );
    for r in buf.drain(..) {
        r.write_to(&mut w)?;
    }
    w.flush()
        .with_context(|| format!("cannot write spill file {}", path.display()))?;
    Ok(path)
}

/// K-way merge of sorted runs, in order, into `sink`.
fn merge_runs(runs: &[PathBuf], sink: &mut dyn FnMut(Rec) -> Result<()>) -> Result<()> {
    struct Head {
        rec: Rec,
        run: usize,
    }
    impl PartialEq for Head {
        fn eq(&self, o: &Self) -> bool {
            self.rec.order() == o.rec.order()
        }
    }
    impl Eq for Head {}
    impl PartialOrd for Head {
        fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
            Some(self.cmp(o))
        }
    }
    impl Ord for Head {
        // Reversed: BinaryHeap is a max-heap.
        fn cmp(&self, o: &Self) -> std::cmp::Ordering {
            o.rec.order().cmp(&self.rec.order())
        }
    }
    let mut readers = Vec::with_capacity(runs.len());
    let mut heap = BinaryHeap::with_capacity(runs.len());
    for (i, p) in runs.iter().enumerate() {
        let mut r = BufReader::with_capacity(
            64 * 1024,
            File::open(p).with_context(|| format!("cannot open {}", p.display()))?,
        );
        if let Some(rec) = Rec::read_from(&mut r)? {
            heap.push(Head { rec, run: i });
        }
        readers.push(r);
    }
    while let Some(Head { rec, run }) = heap.pop() {
        if let Some(next) = Rec::read_from(&mut readers[run])? {
            heap.push(Head { rec: next, run });
        }
        sink(rec)?;
    }
    Ok(())
}

/// A `--buffer-size` that is not a size.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("unknown unit in {0:?} (use K, M or G)")]
    UnknownUnit(String),
    #[error("not a size: {0:?} (examples: 4096, 512K, 64M, 1G)")]
    NotASize(String),
}

/// Parse a size such as `4096`, `512K`, `64M`, `2G` (binary units).
pub fn parse_size(s: &str) -> Result<usize, SizeError> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m = match c.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'B' => 1,
                _ => return Err(SizeError::UnknownUnit(s.to_string())),
            };
            (&t[..i], m)
        }
        _ => (t, 1),
    };
    let n: usize = num
        .trim()
        .parse()
        .map_err(|_| SizeError::NotASize(s.to_string()))?;
    Ok(n.saturating_mul(mult))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(buffer_bytes: usize, keep: Keep) -> MergeConfig {
        MergeConfig {
            key: KeySpec::Field("prompt_index".into()),
            keep,
            buffer_bytes,
            tmp_dir: None,
            sample: None,
            on_error: OnError::Fail,
        }
    }

    fn run(data: &str, c: &MergeConfig) -> (String, MergeSummary) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("in.jsonl");
        std::fs::write(&p, data).unwrap();
        let mut out = Vec::new();
        let mut rej = Rejects::open("merge", None).unwrap();
        let s = merge(c, vec![Source::File(p)], &mut out, &mut rej).unwrap();
        (String::from_utf8(out).unwrap(), s)
    }

    #[test]
    fn sorts_dedups_and_spills_alike() {
        let mut data = String::new();
        for i in 0..500 {
            let idx = (i * 37) % 200; // every index 2 or 3 times
            data.push_str(&format!("{{\"prompt_index\": {idx}, \"v\": {i}}}\n"));
        }
        data.push_str("{\"conversations\": [{\"from\": \"human\", \"value\": \"q\"}], \"v\": 1}\n");
        data.push_str(
            "{\"conversations\": [{\"from\": \"human\", \"value\": \" q \"}], \"v\": 2}\n",
        );
        let (mem, s1) = run(&data, &cfg(1 << 20, Keep::Last));
        let (disk, s2) = run(&data, &cfg(100, Keep::Last));
        assert_eq!(mem, disk);
        assert_eq!(s1.runs, 0);
        assert!(s2.runs > FAN_IN, "forces merge passes: {}", s2.runs);
        let lines: Vec<&str> = mem.lines().collect();
        // the two rows without prompt_index have no key: both kept
        assert_eq!(lines.len(), 202);
        assert_eq!(s1.duplicates, 300);
        assert_eq!(s1.unkeyed, 2);
        assert!(lines[0].starts_with("{\"prompt_index\": 0, \"v\": 400}"));
        assert!(lines[200].ends_with("\"v\": 1}"));
        assert!(lines[201].ends_with("\"v\": 2}"));
        let (first, _) = run(&data, &cfg(100, Keep::First));
        assert!(first.starts_with("{\"prompt_index\": 0, \"v\": 0}"));
    }

    #[test]
    fn bad_lines_and_tombstones_read_as_before() {
        let spec = KeySpec::Field("prompt_index".into());
        let bad = |l: &str| parse_line(l.as_bytes(), &spec).err().map(|e| e.to_string());
        assert_eq!(
            bad("[1]").as_deref(),
            Some("expected a JSON object, found an array")
        );
        assert!(bad("{\"a\": ").unwrap().starts_with("invalid JSON: EOF"));
        assert_eq!(
            bad("{\"a\": 1} x").as_deref(),
            Some("invalid JSON: trailing characters at line 1 column 10")
        );
        match parse_line(b"{\"discarded\": \"dup\"}", &spec) {
            Ok(Parsed::Tombstone(r)) => assert_eq!(r, "tombstone: discarded \"dup\""),
            _ => panic!("not a tombstone"),
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64M").unwrap(), 64 << 20);
        assert_eq!(parse_size("10").unwrap(), 10);
        assert_eq!(parse_size("3X"), Err(SizeError::UnknownUnit("3X".into())));
        assert_eq!(
            parse_size("1.5M").unwrap_err().to_string(),
            "not a size: \"1.5M\" (examples: 4096, 512K, 64M, 1G)"
        );
    }
}

//! Merging shards: deduplicate by key, drop tombstones, sort by `prompt_index`, in
//! bounded memory.
//!
//! How it works (an external merge sort):
//! 1. Every input line is validated once (the strict whole-row scan) and its top-level
//!    keys read. Tombstones (`discarded`) and bad lines go to the rejects file at once,
//!    in input order.
//! 2. Each kept row is appended, with its sort key (`prompt_index`, then input order),
//!    its dedup key and its location, to an in-memory buffer: a row of a plain file by
//!    its offset only ([`reread`]: it is read again when written), a row of any other
//!    source (stdin, gzip, zstd, Parquet) with its bytes. When the buffer holds more
//!    than `buffer_bytes`, it is sorted and written to a spill file (a "run") in a
//!    private temp directory, removed at the end.
//! 3. The runs are merged k ways (at most [`FAN_IN`] files open at once; more runs are
//!    first merged in passes). Rows come out sorted by `prompt_index`; rows without one
//!    follow, in input order.
//! 4. Duplicates: an index maps each dedup key (a 128-bit hash) to the row that wins
//!    (`--keep first|last`); a row is written only if it is the winner of its key, else
//!    it goes to the rejects file as a duplicate. A row has a key only when the
//!    [`KeySpec`] gives it one: under the default ([`KeySpec::Task`]: `task_uid`, else
//!    `prompt_index`) a row with neither is never a duplicate, so merging shards of
//!    foreign data drops nothing.
//!
//! Memory: the buffer (`--buffer-size`, default 64 MiB: about 100 bytes per row of a
//! plain file, the row's bytes for other sources), plus the dedup index, about 64 bytes
//! per distinct key (1 million rows: ~64 MB), plus 64 KiB per run being merged and a
//! read window of up to 1 MiB per open plain file (at most 64 open). Disk: the spilled
//! runs in the temp directory while merging (rows of plain files: their offsets only),
//! removed at the end and on SIGINT, SIGTERM and SIGHUP ([`crate::io::temp`]).
//! A plain file that changes during the merge stops it with [`Changed`].

mod reread;
mod runs;

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use serde::Deserialize;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use crate::format::row::{self, BadRow};
use crate::io::{OnError, Raw, Rejects, Source, Verdict, is_blank};
pub use reread::Changed;
use reread::{FileLines, Rereader};
use runs::{Body, Rec};

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
    /// The task (the default): a row's `task_uid` (traj-run's unit of work) when it has
    /// one, else its `prompt_index` (rows of older traj-run versions and of the
    /// reference); rows with neither have no key and are never de-duplicated. The two
    /// are different keys: a row with a `task_uid` is never a duplicate of one without.
    Task,
    /// A top-level field; rows without it (or with `null`) have no key and are never
    /// de-duplicated.
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
        let key = match crate::format::jsonscan::key_text(key) {
            Cow::Borrowed(k) => Cow::Borrowed(std::str::from_utf8(k).unwrap_or_default()),
            Cow::Owned(k) => Cow::Owned(String::from_utf8(k).unwrap_or_default()),
        };
        fields.insert(key, &text[vs..ve]);
    })
    .map_err(bad)?;
    // JSON's white space only, as every stage reads a row (a form feed is not).
    if crate::format::jsonscan::skip_ws(line, end) != line.len() {
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

/// The first human/user turn of `conversations` or `messages` (ShareGPT `from`/`value`
/// turns or `role`/`content` messages in either list, as traj-normalize reads them), else
/// `prompt`.
fn prompt_text(fields: &Fields<'_>) -> Option<String> {
    if let Some(raw) = fields.get("conversations") {
        match row::conversation_turns(raw.as_bytes(), raw, 0) {
            Ok((turns, _)) => {
                if let Some(t) = turns.iter().find(|t| t.from == "human" || t.from == "user") {
                    return prompt_key_text(t.value);
                }
            }
            // `role`/`content` turns (axolotl) in `conversations`.
            Err(_) => {
                if let Some(found) = first_user_text(raw) {
                    return found;
                }
            }
        }
    }
    if let Some(raw) = fields.get("messages")
        && let Some(found) = first_user_text(raw)
    {
        return found;
    }
    fields.get("prompt").and_then(|p| prompt_key_text(p))
}

/// The key text of the first human/user entry of a list of turns or messages: `None`
/// when it has none; `Some(None)` when that entry has no text that identifies it.
fn first_user_text(raw: &str) -> Option<Option<String>> {
    let turns = serde_json::from_str::<Vec<TurnLite>>(raw).ok()?;
    let t = turns.into_iter().find(|t| {
        let who = t.from.as_deref().or(t.role.as_deref());
        matches!(who, Some("human" | "user"))
    })?;
    Some(t.value.or(t.content).and_then(|v| prompt_key_text(v.get())))
}

/// The text a prompt is identified by: a string, white space trimmed (an empty or blank
/// one identifies nothing); a `content` list of text parts only (`{"type": "text",
/// "text"}`, LLaMA-Factory's `{"type": "text", "value"}`, bare strings: the part rule
/// of [`crate::format::message::part`]), their texts joined with `\n` as traj-normalize joins them,
/// so that one prompt is one key in either spelling; any other JSON (images among the
/// parts) by its JSON text.
fn prompt_key_text(raw: &str) -> Option<String> {
    let trimmed = |s: &str| Some(s.trim().to_string()).filter(|t| !t.is_empty());
    if let Some(s) = row::decode_str(raw) {
        return trimmed(&s);
    }
    if raw.starts_with('[')
        && let Ok(parts) = serde_json::from_str::<Vec<serde_json::Value>>(raw)
        && !parts.is_empty()
    {
        // A text part by the one part rule traj-normalize reads (`text`, else `value`:
        // LLaMA-Factory's spelling; other keys of the part are no text).
        let texts: Option<Vec<&str>> = parts
            .iter()
            .map(|p| match crate::format::message::part(p) {
                crate::format::message::Part::Text(t) => Some(t),
                _ => None,
            })
            .collect();
        if let Some(texts) = texts {
            return trimmed(&texts.join("\n"));
        }
    }
    Some(raw.to_string()) // not text: its JSON text identifies it
}

/// A JSON number that is a whole number, as an integer: `2`, `2.0`, `2e0` and `-0` are
/// one value, as Python and pandas read them (pandas writes an integer column that
/// holds a NaN as `2.0`). `None` for anything else, and for whole numbers past `i128`
/// (39 digits).
fn whole_number(raw: &str) -> Option<i128> {
    raw.parse().ok().or_else(|| whole_text(raw)?.parse().ok())
}

use crate::format::groups::whole_text;

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
        index: Option<i128>,
        key: Option<u128>,
        label: String,
    },
    Tombstone(String),
}

fn parse_line(line: &[u8], spec: &KeySpec) -> Result<Parsed, BadRow> {
    let fields = fields_of(line)?;
    if let Some(d) = fields.get("discarded")
        && row::marks_a_tombstone(d)
    {
        return Ok(Parsed::Tombstone(row::tombstone_reason(d)));
    }
    // A `--columns core` row keeps its run members in its `metadata` string.
    let meta_text = (spec == &KeySpec::Task
        && !fields.contains_key("task_uid")
        && !fields.contains_key("prompt_index"))
    .then(|| fields.get("metadata").and_then(|m| row::decode_str(m)))
    .flatten();
    let meta = meta_text
        .as_deref()
        .and_then(|m| fields_of(m.as_bytes()).ok());
    let run_member = |name: &str| {
        fields
            .get(name)
            .or_else(|| meta.as_ref()?.get(name))
            .copied()
    };
    let index = run_member("prompt_index").and_then(whole_number);
    // A whole number is keyed by its value, whatever its spelling; an empty `task_uid`
    // names no task.
    let field = |name: &str, v: Option<&str>| match v.filter(|v| *v != "null" && *v != "\"\"") {
        Some(v) => {
            let text = whole_text(v).unwrap_or_else(|| v.to_string());
            (Some(hash128(name, text.as_bytes())), format!("{name} {v}"))
        }
        None => (None, String::new()),
    };
    let (key, label) = match spec {
        KeySpec::Task => match field("task_uid", run_member("task_uid")) {
            (None, _) => match (
                field("prompt_index", run_member("prompt_index")),
                run_member("rollout_index").filter(|r| *r != "null"),
            ) {
                // Rollouts of one prompt are rows of their own.
                ((Some(k), label), Some(r)) => {
                    let r = whole_text(r).unwrap_or_else(|| r.to_string());
                    let h = hash128(&format!("{k:x}\0rollout_index"), r.as_bytes());
                    (Some(h), format!("{label} rollout_index {r}"))
                }
                (index, _) => index,
            },
            uid => uid,
        },
        KeySpec::Field(name) => field(name, fields.get(name.as_str()).copied()),
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

/// What phase 1 keeps of every row: the counts, the dedup index, the sample, the
/// buffer and the runs spilled so far.
struct Sorter<'c> {
    cfg: &'c MergeConfig,
    s: MergeSummary,
    winners: HashMap<u128, Winner>,
    /// The `n` smallest sample hashes seen, with the number of rows drawn at each: a
    /// key is drawn once (its duplicates share its hash and are not rows of the
    /// sample), a keyless row each time it appears (identical keyless rows share a
    /// hash, and each one is a row).
    smallest: std::collections::BTreeMap<u64, usize>,
    /// The sum of the counts in `smallest` (at most `n`).
    drawn: usize,
    buf: Vec<Rec>,
    buf_bytes: usize,
    runs: Vec<PathBuf>,
    tmp: crate::io::temp::TempDir,
    seq: u64,
}

/// What [`Sorter::judge`] keeps of a row, for [`Sorter::push`] with its body.
struct Kept {
    index: Option<i128>,
    key: Option<u128>,
    draw: u64,
    label: String,
}

impl Sorter<'_> {
    /// Judge one line: a bad line or a tombstone goes to the rejects file (or stops the
    /// merge under `--on-error fail`), a row is entered in the dedup index and sample.
    fn judge(
        &mut self,
        rejects: &mut Rejects,
        (name, src, lineno): (&Arc<str>, u32, u64),
        raw: Raw<'_>,
    ) -> Result<Option<Kept>> {
        self.s.lines.read += 1;
        let line = raw.bytes;
        match parse_line(line, &self.cfg.key) {
            Err(reason) => {
                let bad = Verdict::Bad(reason.to_string());
                let at = (name, lineno, raw);
                match self
                    .s
                    .lines
                    .not_written((self.cfg.on_error, false), rejects, at, &bad)?
                {
                    Some(err) => Err(err.into()),
                    None => Ok(None),
                }
            }
            Ok(Parsed::Tombstone(reason)) => {
                self.s.tombstones += 1;
                rejects.write(name, lineno, &[reason], raw, true)?;
                Ok(None)
            }
            Ok(Parsed::Row { index, key, label }) => {
                let mut draw = 0;
                if let Some(sample) = &self.cfg.sample {
                    draw = sample.hash(key, line);
                    if key.is_none_or(|k| !self.winners.contains_key(&k)) {
                        *self.smallest.entry(draw).or_default() += 1;
                        self.drawn += 1;
                        if self.drawn > sample.n {
                            let mut last = self.smallest.last_entry().expect("drawn > 0");
                            *last.get_mut() -= 1;
                            if *last.get() == 0 {
                                last.remove();
                            }
                            self.drawn -= 1;
                        }
                    }
                }
                if let Some(k) = key {
                    let w = Winner {
                        seq: self.seq,
                        src,
                        lineno,
                    };
                    match self.cfg.keep {
                        Keep::First => {
                            self.winners.entry(k).or_insert(w);
                        }
                        Keep::Last => {
                            self.winners.insert(k, w);
                        }
                    }
                }
                Ok(Some(Kept {
                    index,
                    key,
                    draw,
                    label,
                }))
            }
        }
    }

    /// Buffer a kept row; spill the buffer when it is full.
    fn push(&mut self, k: Kept, (src, lineno): (u32, u64), body: Body) -> Result<()> {
        let rec = Rec {
            index: k.index,
            seq: self.seq,
            src,
            lineno,
            key: k.key,
            draw: k.draw,
            label: k.label,
            body,
        };
        self.seq += 1;
        self.buf_bytes += rec.cost();
        self.buf.push(rec);
        if self.buf_bytes > self.cfg.buffer_bytes {
            let run = runs::spill(&mut self.buf, self.tmp.path(), self.runs.len())?;
            self.runs.push(run);
            self.buf_bytes = 0;
        }
        Ok(())
    }
}

/// Merge `sources` into `out`: see the module documentation.
pub fn merge(
    cfg: &MergeConfig,
    sources: Vec<Source>,
    out: &mut dyn Write,
    rejects: &mut Rejects,
) -> Result<MergeSummary> {
    let names: Vec<Arc<str>> = sources.iter().map(|s| Arc::from(s.name())).collect();
    // Removed when the merge ends, on SIGINT, SIGTERM and SIGHUP, and (stale, left by
    // a merge killed outright) by the next merge using the same folder.
    let tmp = crate::io::temp::temp_dir(cfg.tmp_dir.as_deref(), "traj-merge-")
        .context("cannot create a temp directory for spill files")?;
    let mut st = Sorter {
        cfg,
        s: MergeSummary {
            files: sources.len(),
            ..MergeSummary::default()
        },
        winners: HashMap::new(),
        smallest: Default::default(),
        drawn: 0,
        buf: Vec::new(),
        buf_bytes: 0,
        runs: Vec::new(),
        tmp,
        seq: 0,
    };
    let mut reread = Rereader::new(sources.len());

    // Phase 1: judge every line. A plain file is read in place and its rows kept by
    // their offsets; any other source (stdin, compressed, Parquet) by their bytes.
    for (i, source) in sources.into_iter().enumerate() {
        let (name, src) = (&names[i], i as u32);
        if let (Some(f), Source::File(path)) = (crate::io::raw_file(&source), &source) {
            let mut lines = FileLines::new(f, name.clone());
            while let Some(l) = lines.next_line()? {
                if is_blank(l.bytes) {
                    continue;
                }
                let raw = Raw {
                    bytes: l.bytes,
                    cr: l.cr,
                };
                if let Some(k) = st.judge(rejects, (name, src, l.lineno), raw)? {
                    let body = Body::At {
                        offset: l.offset,
                        len: l.bytes.len() as u64,
                        lf: l.lf,
                    };
                    st.push(k, (src, l.lineno), body)?;
                }
            }
            reread.add(i, lines.finish(path.clone())?);
        } else {
            let mut reader = crate::io::Records::new(vec![source], None);
            while let Some(rec) = reader.next_record()? {
                let (lineno, cr) = (rec.lineno, rec.cr);
                let mut line = reader.take_line();
                let raw = Raw { bytes: &line, cr };
                if let Some(k) = st.judge(rejects, (name, src, lineno), raw)? {
                    // The line as it was (its CR kept for a rejects file; the writer
                    // cuts it by the line rule).
                    if cr {
                        line.push(b'\r');
                    }
                    st.push(k, (src, lineno), Body::Bytes(line))?;
                }
            }
        }
    }

    // Phase 2: the rows in order; each key's winner written, the others rejected.
    let Sorter {
        mut s,
        winners,
        mut smallest,
        mut buf,
        mut runs,
        tmp,
        ..
    } = st;
    let mut emit = |r: Rec| -> Result<()> {
        let keep = match r.key {
            None => true,
            Some(k) => winners.get(&k).is_some_and(|w| w.seq == r.seq),
        };
        // Each row of the sample takes one of its hash's places.
        let sampled = cfg.sample.is_none()
            || (keep
                && smallest
                    .get_mut(&r.draw)
                    .is_some_and(|n| n.checked_sub(1).map(|m| *n = m).is_some()));
        if keep && !sampled {
            s.not_sampled += 1;
        } else if keep {
            s.unkeyed += r.key.is_none() as u64;
            reread.write(&r, out)?;
            s.lines.written += 1;
        } else {
            let w = winners[&r.key.expect("a duplicate has a key")];
            let reason = format!(
                "duplicate: {} (kept {}:{})",
                r.label, names[w.src as usize], w.lineno
            );
            s.duplicates += 1;
            let line = reread.line(&r, out)?;
            rejects.write(&names[r.src as usize], r.lineno, &[reason], line, true)?;
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
            runs.push(runs::spill(&mut buf, tmp.path(), runs.len())?);
        }
        let spilled = runs.len();
        runs::reduce(&mut runs, tmp.path(), FAN_IN)?;
        runs::merge_runs(&runs, &mut emit)?;
        s.runs = spilled;
    }
    reread.finish(out)?;
    drop(tmp);
    Ok(s)
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

    #[test]
    fn a_prompt_is_one_key_in_every_spelling_of_its_text_parts() {
        let plain = prompt_key_text("\"hello\"");
        for parts in [
            r#"[{"type": "text", "text": "hello"}]"#,
            r#"[{"type": "text", "value": "hello"}]"#,
            r#"[{"type": "text", "text": "hello", "cache_control": {"type": "ephemeral"}}]"#,
            r#"["hello"]"#,
        ] {
            assert_eq!(prompt_key_text(parts), plain, "{parts}");
        }
        // An image among the parts: the JSON text, so two images are two prompts.
        let img = r#"[{"type": "text", "text": "hello"}, {"type": "image_url", "image_url": {"url": "u"}}]"#;
        assert_eq!(prompt_key_text(img).as_deref(), Some(img));
    }

    #[test]
    fn whole_numbers_are_one_key_only_when_they_are_one_value() {
        for (a, b) in [
            ("2", "2.0"),
            ("2", "2e0"),
            ("200", "2E2"),
            ("0", "-0.0"),
            ("-15", "-1.5e1"),
            (
                "123456789012345678901234567890",
                "1.23456789012345678901234567890e29",
            ),
            ("1e400", "10E399"),
        ] {
            assert_eq!(whole_text(a), whole_text(b), "{a} {b}");
            assert!(whole_text(a).is_some(), "{a}");
        }
        for (a, b) in [
            ("9007199254740993.0", "9007199254740992"),
            ("9007199254740993", "9007199254740992"),
        ] {
            assert_ne!(whole_text(a), whole_text(b), "{a} {b}");
        }
        for not_whole in [
            "3.0000000000000001",
            "2.00000000000000000001",
            "1e-1",
            "\"2\"",
            "true",
        ] {
            assert_eq!(whole_text(not_whole), None, "{not_whole}");
        }
        assert_eq!(
            whole_number("9007199254740993.0"),
            Some(9_007_199_254_740_993)
        );
        assert_eq!(whole_number("1e400"), None);
        // Past i64, still sorted by value (u64 ids, 26-digit ids).
        assert_eq!(whole_number("1e19"), Some(10_000_000_000_000_000_000));
        assert_eq!(
            whole_number("-12345678901234567890123456"),
            Some(-12_345_678_901_234_567_890_123_456)
        );
    }

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

    /// The same rows as a plain file (kept by offset, read again) and gzipped (kept by
    /// their bytes), in memory and spilled: the same output and the same rejects.
    #[test]
    fn plain_and_compressed_files_merge_alike() {
        use std::io::Write as _;
        let mut data = b"\xEF\xBB\xBF{\"prompt_index\": 3, \"v\": \"bom\"}\r\n\n".to_vec();
        for i in 0..300 {
            let idx = (i * 7) % 120;
            let end: &[u8] = if i % 5 == 0 { b"\r\n" } else { b"\n" };
            data.extend_from_slice(format!("{{\"prompt_index\": {idx}, \"v\": {i}}}").as_bytes());
            data.extend_from_slice(end);
            if i % 50 == 0 {
                data.extend_from_slice(b"{\"a\": 1, \"a\": 2}\n  \n{\"discarded\": true}\n");
            }
        }
        data.extend_from_slice(b"{\"v\": \"no newline\"}");
        let d = tempfile::tempdir().unwrap();
        let plain = crate::io::write_tmp(d.path(), "a.jsonl", &data);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&data).unwrap();
        let packed = crate::io::write_tmp(d.path(), "b.jsonl", &gz.finish().unwrap());
        let mut results = Vec::new();
        for (path, buffer) in [
            (&plain, 1 << 20),
            (&packed, 1 << 20),
            (&plain, 200),
            (&packed, 200),
        ] {
            let mut c = cfg(buffer, Keep::First);
            c.on_error = OnError::Skip;
            let rej_path = d.path().join("rej.jsonl");
            let mut rej = Rejects::open("merge", Some(&rej_path)).unwrap();
            let mut out = Vec::new();
            let s = merge(&c, vec![Source::File(path.clone())], &mut out, &mut rej).unwrap();
            rej.finish().unwrap();
            let rejected = std::fs::read_to_string(&rej_path).unwrap();
            let name = path.display().to_string();
            let rejected = rejected.replace(&name, "IN");
            assert_eq!((s.lines.bad, s.tombstones, s.duplicates), (6, 6, 181));
            assert_eq!(s.runs > 0, buffer == 200);
            results.push((String::from_utf8(out).unwrap(), rejected));
        }
        assert!(
            results[0]
                .0
                .starts_with("{\"prompt_index\": 0, \"v\": 0}\n")
        );
        assert!(results[0].0.ends_with("{\"v\": \"no newline\"}\n"));
        assert!(results[0].1.contains("duplicate key"), "{}", results[0].1);
        for r in &results[1..] {
            assert_eq!(r, &results[0]);
        }
    }

    /// More files than are kept open at once, their rows interleaved in the output.
    #[test]
    fn many_files_read_again_in_turn() {
        let d = tempfile::tempdir().unwrap();
        let files = 150;
        let mut sources = Vec::new();
        for j in 0..files {
            let rows: String = (0..3)
                .map(|k| format!("{{\"prompt_index\": {}, \"f\": {j}}}\n", j + k * files))
                .collect();
            sources.push(Source::File(crate::io::write_tmp(
                d.path(),
                &format!("batch_{j}.jsonl"),
                rows.as_bytes(),
            )));
        }
        let mut out = Vec::new();
        let mut rej = Rejects::open("merge", None).unwrap();
        let s = merge(&cfg(1 << 20, Keep::Last), sources, &mut out, &mut rej).unwrap();
        let want: String = (0..3 * files)
            .map(|i| format!("{{\"prompt_index\": {i}, \"f\": {}}}\n", i % files))
            .collect();
        assert_eq!(String::from_utf8(out).unwrap(), want);
        assert_eq!((s.lines.written, s.runs), (3 * files as u64, 0));
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

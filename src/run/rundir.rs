//! The run directory of traj-run: `batch_N.jsonl` (records), `failures.jsonl`,
//! `checkpoint.json` and `statistics.json`, and the scan that `--resume` starts from.
//!
//! The batch files and `failures.jsonl` are the truth: lines are appended whole and
//! fsynced before anything else hears of them, so after a `kill -9` at most the last line
//! of a file is torn. The resume scan cuts such a tail off (the prompt then runs again).
//! `checkpoint.json` and `statistics.json` are summaries, rewritten atomically (temp file,
//! fsync, rename) and rebuilt from the files on every resume (every count in them is
//! the files' count).
//!
//! A unit of work is identified by its [`task_uid`]: the content of its whole task row,
//! the row's copy number among the rows of identical content, and its rollout. A
//! dataset holding the same row twice runs it twice, and a reordered or edited dataset
//! finds its finished tasks wherever they are. Lines written before records carried a
//! `task_uid` match by [`task_key`] (the prompt and the fields that change its run) as a
//! multiset; rows written by hermes-agent's batch runner match by their prompt's text
//! (see [`foreign_key`]).

pub use super::aggregate::Stats;
use crate::format::time::utc_now;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Serialize;
use serde_json::{Map, Value, json};

pub use super::record::{BatchStat, Checkpoint};

use sha2::{Digest, Sha256};

/// The identity of one task in a run: its `task_key` (see [`task_key`]), or for lines
/// written before there was one, `index:hash`.
pub type Key = String;

/// The fields of a task row that change its run; with the prompt they are its content.
pub const RUN_FIELDS: [&str; 7] = [
    "prompt",
    "toolsets",
    "distribution",
    "image",
    "docker_image",
    "cwd",
    "system_prompt",
];

/// The content key of a task row: 16 hex digits of SHA-256 over the canonical JSON
/// (sorted keys, no spaces) of its [`RUN_FIELDS`]. Rows with equal keys are the same
/// task, whatever their place or `prompt_index`.
pub fn task_key(row: &Map<String, Value>) -> Hex16 {
    let fields: BTreeMap<&str, Value> = RUN_FIELDS
        .iter()
        .filter_map(|k| row.get(*k).map(|v| (*k, canonical(v))))
        .collect();
    hex16(&serde_json::to_string(&fields).unwrap_or_default())
}

/// The content of a whole task row: 16 hex digits of SHA-256 over its canonical JSON
/// (every field, keys sorted, no spaces). Rows that differ in any field (an `id`, a
/// `prompt_index` of their own) differ here.
pub fn row_key(row: &Map<String, Value>) -> Hex16 {
    hex16(&serde_json::to_string(&canonical(&Value::Object(row.clone()))).unwrap_or_default())
}

/// The identity of one unit of work, unique in a run directory and across resumes:
/// `ROW:COPY:ROLLOUT`, the [`row_key`] of its task row, the row's copy number (0 for
/// the first row of that content in the dataset, 1 for the second, ...) and the
/// rollout (0: one rollout per task).
pub fn task_uid(row_key: Hex16, copy: u32, rollout: u32) -> String {
    format!("{row_key}:{copy}:{rollout}")
}

/// The key of a row written by hermes-agent's batch runner (no `task_key`, no
/// `prompt_hash`): the text of its prompt (`prompt`, the first human turn of
/// `conversations` or the first user message of `messages`), white space trimmed, as
/// the reference's resume reads it.
pub fn foreign_key(text: &str) -> Key {
    text_key(prompt_hash(text.trim()))
}

/// [`foreign_key`] of a prompt whose trimmed text has [`prompt_hash`] `hash`.
pub fn text_key(hash: Hex16) -> Key {
    format!("text:{hash}")
}

/// The prompt text of a row the way the newest reference finds it on resume: `prompt`,
/// else the first human turn of `conversations` (ShareGPT `from`/`value`, or chat
/// `role`/`content`), else the first user message of `messages`.
pub fn prompt_text_of(v: &Value) -> Option<&str> {
    if let Some(p) = v.get("prompt").and_then(Value::as_str) {
        return Some(p);
    }
    let first = |list: &str| {
        v.get(list)?.as_array()?.iter().find_map(|m| {
            let human =
                |who: &str| matches!(m.get(who).and_then(Value::as_str), Some("human" | "user"));
            if human("from") {
                m.get("value")?.as_str()
            } else if human("role") {
                m.get("content")?.as_str()
            } else {
                None
            }
        })
    };
    first("conversations").or_else(|| first("messages"))
}

fn hex16(text: &str) -> Hex16 {
    let d = Sha256::digest(text.as_bytes());
    Hex16(u64::from_be_bytes(
        d[..8].try_into().expect("a SHA-256 has 32 bytes"),
    ))
}

/// 16 hex digits of a SHA-256 (its first 8 bytes), kept as the number they spell and
/// written out only when shown: a run holds three of them for every task it plans, so
/// they cost no allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Hex16(pub u64);

impl std::fmt::Display for Hex16 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// `v` with every object's keys sorted (serde_json keeps insertion order here).
fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let sorted: BTreeMap<&String, Value> =
                m.iter().map(|(k, v)| (k, canonical(v))).collect();
            Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
        v => v.clone(),
    }
}

/// The key of a line written before records carried a `task_key`.
pub fn legacy_key(index: u64, hash: &str) -> Key {
    format!("{index}:{hash}")
}

/// A short, stable hash of a prompt's text (16 hex digits of SHA-256).
pub fn prompt_hash(prompt: &str) -> Hex16 {
    hex16(prompt)
}

/// A temp file beside `path`, named as the run directory's temp files are (`.tmp-…`:
/// one a crash leaves is removed by the next run), with the mode `path` should have
/// ([`crate::io::temp::file_with_mode_of`]: a batch file mended in place keeps its own,
/// a new checkpoint gets the batch files' `0666 & !umask`).
fn temp_beside(path: &Path) -> Result<tempfile::NamedTempFile> {
    let dir = path.parent().unwrap_or(Path::new("."));
    crate::io::temp::file_with_mode_of(tempfile::Builder::new().prefix(".tmp-"), dir, path)
        .with_context(|| format!("cannot write in {}", dir.display()))
}

/// Write `bytes` to `path` atomically (temp file, fsync, rename): over what is there
/// when `replace`, else only where nothing is.
fn write_atomic(path: &Path, bytes: &[u8], replace: bool) -> Result<()> {
    let mut tmp = temp_beside(path)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    let persisted = if replace {
        tmp.persist(path)
    } else {
        tmp.persist_noclobber(path)
    };
    persisted.with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// Write `value` as pretty JSON to `path` atomically (temp file, fsync, rename).
pub fn write_json_atomic<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<()> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    write_atomic(path, text.as_bytes(), true)
}

/// What a failure line says about a prompt.
#[derive(Debug, Clone, Default)]
pub struct FailState {
    /// Failed runs of the prompt so far.
    pub attempts: u32,
    /// False once any failure was of a class that is never retried.
    pub retryable: bool,
}

/// What holds a `prompt_index` in the run directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The holder's key ([`record_key`]).
    pub key: Key,
    /// Where (`DIR/batch_N.jsonl:LINE`).
    pub place: String,
    /// A record (or discard row), not only failure lines.
    pub record: bool,
}

/// What the run directory already holds.
#[derive(Debug, Default)]
pub struct Scan {
    /// Records (and discard rows) per task: one per `task_uid`, else a multiset by
    /// `task_key`, `index:hash` or prompt text (see [`record_key`]).
    pub done: HashMap<Key, u32>,
    /// The records of [`Scan::done`] that have a `prompt_index`, by key and index: a
    /// reference row (keyed by its prompt text) is first the record of the task row
    /// at its own index (the reference's `prompt_index` is the dataset line).
    pub done_at: HashMap<(Key, u64), u32>,
    /// Failures per task.
    pub failed: HashMap<Key, FailState>,
    /// The `prompt_index` of each failed task (a retry keeps it).
    pub failed_index: HashMap<Key, u64>,
    /// Who holds each `prompt_index`: a record first, else a failure.
    pub claims: HashMap<u64, Claim>,
    /// Discard rows (`discarded` set, as the newest reference writes for a prompt
    /// dropped for having no reasoning): done, never data.
    pub discarded: u64,
    /// `prompt_index` of every record, and of every failure.
    pub done_indices: BTreeSet<u64>,
    pub failed_indices: BTreeSet<u64>,
    /// Records per batch file and failures per `batch_num`: the checkpoint's counts.
    pub batch_stats: BTreeMap<u64, BatchStat>,
    /// Numbers of the existing batch files.
    pub batches: BTreeSet<u64>,
    pub stats: Stats,
    /// What was mended in the files (torn text cut, records kept).
    pub repaired: Vec<Repair>,
}

impl Scan {
    /// Note that the line at `place` holds `index`; a record's claim beats a failure's.
    fn claim(&mut self, index: u64, key: &Key, place: String, record: bool) {
        let c = Claim {
            key: key.clone(),
            place,
            record,
        };
        match self.claims.get(&index) {
            Some(old) if old.record || !record => {}
            _ => {
                self.claims.insert(index, c);
            }
        }
    }

    /// The first batch number free for this run.
    pub fn next_batch(&self) -> u64 {
        self.batches.last().map_or(0, |n| n + 1)
    }
}

/// The prompts hermes-agent 0.19.0 discarded (no reasoning) in `dir`: it writes no row
/// for such a prompt and lists it only in its `checkpoint.json`'s `completed_prompts`.
/// So the indices there with neither a record nor a failure in the files, when the
/// checkpoint is the reference's (traj's own has `failed_prompts` and is rebuilt from
/// the files on every start). A checkpoint that cannot be read as JSON (the reference
/// writes it in place: a crash can tear it) is a summary like any other: it names none.
pub fn reference_discards(dir: &Path, scan: &Scan) -> BTreeSet<u64> {
    let text = std::fs::read_to_string(dir.join("checkpoint.json")).unwrap_or_default();
    let Ok(cp) = serde_json::from_str::<Value>(&text) else {
        return BTreeSet::new();
    };
    if cp.get("failed_prompts").is_some() {
        return BTreeSet::new();
    }
    let listed = cp.get("completed_prompts").and_then(Value::as_array);
    listed
        .into_iter()
        .flatten()
        .filter_map(Value::as_u64)
        .filter(|i| !scan.done_indices.contains(i) && !scan.failed_indices.contains(i))
        .collect()
}

/// Write the tombstones of `discards` (`prompt_index`, prompt text) as the newest
/// reference writes them, into the new `batch_{n}.jsonl` (made, written and synced
/// whole, or not at all): what only an old checkpoint knew is then in the files, which
/// every count and every resume reads.
pub fn write_tombstones(dir: &Path, n: u64, discards: &[(u64, String)]) -> Result<PathBuf> {
    let path = dir.join(format!("batch_{n}.jsonl"));
    let mut text = String::new();
    for (i, prompt) in discards {
        let row = json!({"prompt_index": i, "discarded": "no_reasoning", "prompt": prompt});
        text.push_str(&row.to_string());
        text.push('\n');
    }
    write_atomic(&path, text.as_bytes(), false)?;
    File::open(dir)?.sync_all()?;
    Ok(path)
}

/// The batch number of `batch_N.jsonl`.
pub fn batch_number(name: &str) -> Option<u64> {
    name.strip_prefix("batch_")?
        .strip_suffix(".jsonl")?
        .parse()
        .ok()
}

/// What `--resume` mended in one file of the run directory ([`read_own_jsonl`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair {
    pub path: PathBuf,
    /// Bytes of torn lines cut off (their prompts run again).
    pub cut: u64,
    /// Complete records kept that a torn line had run into (a torn write, then a row
    /// appended to the same file: the reference's resume does that).
    pub kept: u64,
    /// The last record lacked its newline, which was added.
    pub newline: bool,
}

impl std::fmt::Display for Repair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut what = Vec::new();
        if self.cut > 0 {
            what.push(format!(
                "cut {} bytes of torn text (what it held runs again)",
                self.cut
            ));
        }
        if self.kept > 0 {
            what.push(format!(
                "kept {} complete record{} that a torn line ran into",
                self.kept,
                if self.kept == 1 { "" } else { "s" }
            ));
        }
        if self.newline {
            what.push("added the newline its last record lacked".into());
        }
        write!(f, "{}: {}", self.path.display(), what.join("; "))
    }
}

/// The record that ends `line` after a torn prefix (`torn{"prompt_index": 4, …}`), as
/// the offset where it starts: a JSON object from one of the places where a record
/// begins (every line traj-run and the reference write starts with `{"prompt_index"`)
/// to the end, that is a record ([`record_key`]). An inner object that closes at the
/// end of a torn line (its `usage`) is no record. `None` when there is none.
fn record_after_torn_text(line: &[u8]) -> Option<(usize, Value)> {
    memchr::memmem::find_iter(line, b"{\"prompt_index\"")
        .filter(|&p| p > 0)
        .find_map(|p| match serde_json::from_slice::<Value>(&line[p..]) {
            Ok(v) if v.is_object() && record_key(&v).is_some() => Some((p, v)),
            _ => None,
        })
}

/// The torn text before a record ([`record_after_torn_text`]) when it is itself a whole
/// record that lost its newline (`{…}{"prompt_index": …}`): kept too.
fn record_before(text: &[u8]) -> Option<Value> {
    serde_json::from_slice::<Value>(text)
        .ok()
        .filter(|v| v.is_object() && record_key(v).is_some())
}

/// Read a JSONL file we wrote, calling `f` on each object with its line number. With
/// `repair`, what a crash can leave is mended, and nothing complete is lost: a torn
/// last line is cut; a record that a torn line ran into (`torn{"prompt_index": 4, …}`)
/// is kept and the torn text before it cut; a last record without its newline gets
/// one. Without `repair` any of these is an error naming `file:line`, as is a bad line
/// that is none of them.
fn read_own_jsonl(
    path: &Path,
    repair: bool,
    mut f: impl FnMut(Value, u64),
) -> Result<Option<Repair>> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut r = BufReader::new(file);
    let mut buf = Vec::new();
    let mut good_end = 0u64;
    let mut lineno = 0u64;
    let mut fix = Repair {
        path: path.to_path_buf(),
        cut: 0,
        kept: 0,
        newline: false,
    };
    // The mended file, from the first mend on (the bytes before it copied once).
    let mut out: Option<tempfile::NamedTempFile> = None;
    loop {
        buf.clear();
        let n = r.read_until(b'\n', &mut buf)?;
        if n == 0 {
            break;
        }
        lineno += 1;
        let complete = buf.ends_with(b"\n");
        if buf.iter().all(u8::is_ascii_whitespace) && complete {
            good_end += n as u64;
            if let Some(o) = out.as_mut() {
                o.write_all(&buf)?;
            }
            continue;
        }
        let (start, value) = match serde_json::from_slice::<Value>(&buf) {
            Ok(v) => (0, Some(v)),
            Err(_) => match record_after_torn_text(&buf) {
                Some((p, v)) => (p, Some(v)),
                None => (buf.len(), None),
            },
        };
        // A crash leaves a line without its newline: a bad line that has one (the last
        // line too) is no torn write, and not ours to cut.
        if value.is_none() && complete {
            let e = serde_json::from_slice::<Value>(&buf).expect_err("did not parse");
            bail!("{}:{lineno}: invalid JSON: {e}", path.display());
        }
        if start == 0 && complete {
            good_end += n as u64;
            if let Some(o) = out.as_mut() {
                o.write_all(&buf)?;
            }
        } else {
            if !repair {
                bail!(
                    "{}:{lineno}: {} (use --resume to repair)",
                    path.display(),
                    if value.is_some() && start == 0 {
                        "the last record has no newline"
                    } else {
                        "torn line"
                    }
                );
            }
            if out.is_none() {
                let mut tmp = temp_beside(path)?;
                let mut head = File::open(path)?;
                std::io::copy(&mut (&mut head).take(good_end), &mut tmp)?;
                out = Some(tmp);
            }
            let o = out.as_mut().expect("made above");
            match (start > 0 && value.is_some())
                .then(|| record_before(&buf[..start]))
                .flatten()
            {
                Some(first) => {
                    o.write_all(&buf[..start])?;
                    o.write_all(b"\n")?;
                    fix.kept += 1;
                    f(first, lineno);
                }
                None => fix.cut += start as u64,
            }
            if value.is_some() {
                o.write_all(&buf[start..])?;
                if complete {
                    fix.kept += u64::from(start > 0);
                } else {
                    o.write_all(b"\n")?;
                    fix.newline |= start == 0;
                    fix.kept += u64::from(start > 0);
                }
            }
        }
        if let Some(v) = value.filter(Value::is_object) {
            f(v, lineno);
        }
    }
    let Some(tmp) = out else {
        return Ok(None);
    };
    tmp.as_file().sync_all()?;
    tmp.persist(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    if let Ok(d) = File::open(path.parent().unwrap_or(Path::new("."))) {
        let _ = d.sync_all();
    }
    Ok(Some(fix))
}

/// Read what `dir` holds (records, failures), repairing torn tails when `repair`.
pub fn scan(dir: &Path, repair: bool) -> Result<Scan> {
    let mut s = Scan::default();
    if !dir.exists() {
        return Ok(s);
    }
    let mut files = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let e = e?;
        if let Some(n) = e.file_name().to_str().and_then(batch_number) {
            files.push((n, e.path()));
        }
    }
    files.sort();
    for (n, path) in files {
        s.batches.insert(n);
        // Every batch file has its entry, also one left empty (created just before a
        // kill, or whose only line was torn and cut off): the checkpoint lists the files.
        s.batch_stats.entry(n).or_default();
        // The first line that is JSON but no record of a run (nothing names its task).
        let mut stray: Option<u64> = None;
        let torn = read_own_jsonl(&path, repair, |v, lineno| {
            if record_key(&v).is_none() {
                stray.get_or_insert(lineno);
                return;
            }
            let discard = v
                .get("discarded")
                .is_some_and(|d| crate::format::row::marks_a_tombstone(&d.to_string()));
            // The reference's older runners wrote failed prompts as rows: not done.
            let failed = v.get("failed") == Some(&Value::Bool(true));
            if let Some((key, index)) = record_key(&v).filter(|_| !failed) {
                *s.done.entry(key.clone()).or_default() += 1;
                if let Some(i) = index {
                    s.done_indices.insert(i);
                    s.claim(i, &key, format!("{}:{lineno}", path.display()), true);
                    *s.done_at.entry((key.clone(), i)).or_default() += 1;
                }
            }
            let bs = s.batch_stats.entry(n).or_default();
            bs.processed += 1;
            if discard {
                bs.discarded_no_reasoning += 1;
                s.discarded += 1;
            } else {
                s.stats.add_record(&v);
            }
        })?;
        if let Some(lineno) = stray {
            anyhow::bail!(
                "{}:{lineno}: not a record of a run (no task_uid, task_key, prompt_hash or \
                 prompt): counted as done it would stand for no task; remove the line, or \
                 move a file that is no batch file out of the run directory",
                path.display()
            );
        }
        s.repaired.extend(torn);
    }
    let fpath = dir.join("failures.jsonl");
    if fpath.exists() {
        let torn = read_own_jsonl(&fpath, repair, |v, lineno| {
            if let Some(b) = v.get("batch_num").and_then(Value::as_u64) {
                s.batch_stats.entry(b).or_default().failed += 1;
            }
            if let Some((key, index)) = record_key(&v) {
                if let Some(i) = index {
                    s.failed_indices.insert(i);
                    s.failed_index.insert(key.clone(), i);
                    s.claim(i, &key, format!("{}:{lineno}", fpath.display()), false);
                }
                let st = s.failed.entry(key).or_insert(FailState {
                    retryable: true,
                    ..FailState::default()
                });
                st.attempts += 1;
                st.retryable &= v.get("retryable") != Some(&Value::Bool(false));
            }
            s.stats.add_failure(&v);
        })?;
        s.repaired.extend(torn);
    }
    Ok(s)
}

/// The key a line of the run directory is matched by, and its `prompt_index`: its
/// `task_uid`; else (written before there was one) its `task_key`; else its
/// `index:hash`; else (a row of hermes-agent's batch runner) its [`foreign_key`].
pub fn record_key(v: &Value) -> Option<(Key, Option<u64>)> {
    let idx = v.get("prompt_index").and_then(Value::as_u64);
    let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    if let Some(k) = text("task_uid").or_else(|| text("task_key")) {
        return Some((k, idx));
    }
    if let (Some(i), Some(hash)) = (idx, v.get("prompt_hash").and_then(Value::as_str)) {
        return Some((legacy_key(i, hash), idx));
    }
    prompt_text_of(v).map(|t| (foreign_key(t), idx))
}

/// Appends lines to the batch files and `failures.jsonl`; [`Appender::sync`] fsyncs what
/// was written since the last sync (one fsync per file per group of lines).
pub struct Appender {
    dir: PathBuf,
    files: HashMap<u64, (File, bool)>,
    failures: Option<(File, bool)>,
}

impl Appender {
    pub fn new(dir: &Path) -> Appender {
        Appender {
            dir: dir.to_path_buf(),
            files: HashMap::new(),
            failures: None,
        }
    }

    fn open(path: &Path) -> Result<File> {
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        f.seek(SeekFrom::End(0))?;
        Ok(f)
    }

    /// Append one record line (ending in `\n`) to `batch_<n>.jsonl`.
    pub fn record(&mut self, batch: u64, line: &[u8]) -> Result<()> {
        if !self.files.contains_key(&batch) {
            let f = Self::open(&self.dir.join(format!("batch_{batch}.jsonl")))?;
            self.files.insert(batch, (f, false));
        }
        let (f, dirty) = self.files.get_mut(&batch).expect("opened above");
        f.write_all(line)
            .with_context(|| format!("cannot write batch_{batch}.jsonl"))?;
        *dirty = true;
        Ok(())
    }

    /// Append one failure line (ending in `\n`).
    pub fn failure(&mut self, line: &[u8]) -> Result<()> {
        if self.failures.is_none() {
            self.failures = Some((Self::open(&self.dir.join("failures.jsonl"))?, false));
        }
        let (f, dirty) = self.failures.as_mut().expect("opened above");
        f.write_all(line).context("cannot write failures.jsonl")?;
        *dirty = true;
        Ok(())
    }

    /// fsync every file written since the last sync.
    pub fn sync(&mut self) -> Result<()> {
        for (f, dirty) in self.files.values_mut().chain(self.failures.as_mut()) {
            if *dirty {
                f.sync_data()?;
                *dirty = false;
            }
        }
        Ok(())
    }

    /// Close the file of a finished batch.
    pub fn close(&mut self, batch: u64) -> Result<()> {
        if let Some((f, dirty)) = self.files.remove(&batch)
            && dirty
        {
            f.sync_data()?;
        }
        Ok(())
    }
}

impl Checkpoint {
    /// Write the checkpoint atomically, stamped with the time.
    pub fn save(&mut self, path: &Path) -> Result<()> {
        self.last_updated = utc_now();
        write_json_atomic(path, self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A batch line that is JSON but names no task is no record: the resume stops at
    /// it with `file:line` (it was counted as a record done, and written on by merge).
    #[test]
    fn a_batch_line_that_is_no_record_is_named() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("batch_0.jsonl");
        std::fs::write(
            &p,
            "{\"prompt_index\":1,\"prompt_hash\":\"h\"}\n{\"garbage\": 1}\n{\"prompt_index\":2,\"prompt_hash\":\"i\"}\n",
        )
        .unwrap();
        let e = scan(d.path(), true).unwrap_err().to_string();
        assert!(e.contains("batch_0.jsonl:2: not a record of a run"), "{e}");
        // The reference's rows name their task by their prompt.
        std::fs::write(
            &p,
            "{\"prompt_index\":0,\"conversations\":[{\"from\":\"human\",\"value\":\"q\"}]}\n",
        )
        .unwrap();
        assert_eq!(scan(d.path(), true).unwrap().done.len(), 1);
    }

    /// The checkpoint and statistics get the mode the batch files get (the umask's),
    /// not the temp file's `0600`; a batch file mended in place keeps its own mode.
    #[test]
    fn rewritten_files_get_the_mode_of_the_run_directorys_files() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        // What the batch files (opened for append) get under this umask.
        let plain = d.path().join("plain");
        std::fs::File::create(&plain).unwrap();
        let checkpoint = d.path().join("checkpoint.json");
        write_json_atomic(&checkpoint, &json!({"a": 1})).unwrap();
        assert_eq!(mode(&checkpoint), mode(&plain));
        assert_ne!(
            mode(&checkpoint),
            0o600,
            "the umask here gives 0600: no test"
        );
        let p = d.path().join("batch_0.jsonl");
        std::fs::write(
            &p,
            "{\"prompt_index\":1,\"prompt_hash\":\"h\"}\n{\"prompt_ind",
        )
        .unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        let s = scan(d.path(), true).unwrap();
        assert_eq!(s.repaired.len(), 1);
        assert_eq!(mode(&p), 0o640);
    }

    #[test]
    fn torn_tail_is_cut_and_counted() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("batch_3.jsonl");
        std::fs::write(
            &p,
            "{\"prompt_index\":1,\"prompt_hash\":\"h\"}\n{\"prompt_index\":2,\"prompt_ha",
        )
        .unwrap();
        assert!(scan(d.path(), false).is_err());
        let s = scan(d.path(), true).unwrap();
        assert_eq!(s.done.len(), 1);
        assert_eq!(s.next_batch(), 4);
        assert_eq!(s.repaired.len(), 1);
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "{\"prompt_index\":1,\"prompt_hash\":\"h\"}\n"
        );
        // A torn line alone is cut; the file, now empty, still has its (zero) entry:
        // the checkpoint lists it.
        std::fs::write(&p, "{\"prompt_index\":1,\"prompt_ha").unwrap();
        let s = scan(d.path(), true).unwrap();
        assert!(s.done.is_empty());
        assert_eq!(s.batch_stats[&3].processed, 0);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 0);
        // A complete record without its newline is a record: it gets its newline (it
        // was cut once, and its paid-for trajectory lost).
        std::fs::write(&p, "{\"prompt_index\":1,\"prompt_hash\":\"h\"}").unwrap();
        let e = scan(d.path(), false).unwrap_err().to_string();
        assert!(
            e.contains("batch_3.jsonl:1: the last record has no newline"),
            "{e}"
        );
        let s = scan(d.path(), true).unwrap();
        assert_eq!(s.done.len(), 1);
        assert_eq!(
            s.repaired[0].to_string().split(": ").nth(1),
            Some("added the newline its last record lacked")
        );
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "{\"prompt_index\":1,\"prompt_hash\":\"h\"}\n"
        );
        // A torn line that a record was appended to (the reference's resume appends to
        // old batch files): the record is kept, in place, and the torn text cut. The
        // whole line was cut once, the record with it.
        let rows = "{\"prompt_index\":1,\"prompt_hash\":\"h\"}\n{\"prompt_index\":2,\"prompt_ha\
                    {\"prompt_index\":3,\"prompt_hash\":\"k\",\"x\":{\"y\":[1]}}\n{\"prompt_index\":4,\"prompt_hash\":\"m\"}\n\
                    {\"prompt_index\":5,\"p";
        std::fs::write(&p, rows).unwrap();
        let e = scan(d.path(), false).unwrap_err().to_string();
        assert!(
            e.contains("batch_3.jsonl:2: torn line (use --resume to repair)"),
            "{e}"
        );
        let s = scan(d.path(), true).unwrap();
        assert_eq!(s.done.len(), 3, "{:?}", s.done);
        let fix = &s.repaired[0];
        assert_eq!((fix.kept, fix.cut, fix.newline), (1, 48, false), "{fix}");
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "{\"prompt_index\":1,\"prompt_hash\":\"h\"}\n\
             {\"prompt_index\":3,\"prompt_hash\":\"k\",\"x\":{\"y\":[1]}}\n{\"prompt_index\":4,\"prompt_hash\":\"m\"}\n"
        );
        // A torn record cut right after an inner object closed (its `usage`): that
        // object is no record, and was kept as one; the whole torn line goes.
        let torn_inner = "{\"prompt_index\":7,\"prompt_hash\":\"q\",\"usage\":{\"total_tokens\":5}";
        std::fs::write(
            &p,
            format!("{{\"prompt_index\":1,\"prompt_hash\":\"h\"}}\n{torn_inner}"),
        )
        .unwrap();
        let s = scan(d.path(), true).unwrap();
        assert_eq!(s.done.len(), 1, "{:?}", s.done);
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "{\"prompt_index\":1,\"prompt_hash\":\"h\"}\n"
        );
        // Two whole records on one line (the first lost its newline): both kept.
        std::fs::write(
            &p,
            "{\"prompt_index\":1,\"prompt_hash\":\"h\"}{\"prompt_index\":2,\"prompt_hash\":\"k\"}\n",
        )
        .unwrap();
        let s = scan(d.path(), true).unwrap();
        assert_eq!(s.done.len(), 2, "{:?}", s.done);
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "{\"prompt_index\":1,\"prompt_hash\":\"h\"}\n{\"prompt_index\":2,\"prompt_hash\":\"k\"}\n"
        );
        // A bad line with its newline is no torn write, in the middle or at the end: an
        // error with its place, and the file untouched.
        for bad in ["{}\nnot json\n{}\n", "{}\n{}\nnot json\n"] {
            std::fs::write(&p, bad).unwrap();
            let e = scan(d.path(), true).unwrap_err().to_string();
            let at = if bad.ends_with("{}\n") { 2 } else { 3 };
            assert!(
                e.contains(&format!("batch_3.jsonl:{at}: invalid JSON")),
                "{e}"
            );
            assert_eq!(std::fs::read_to_string(&p).unwrap(), bad);
        }
    }

    /// A torn reference checkpoint stops no resume: it names no discard (it stopped it
    /// with "not JSON" once, where the rebuilt checkpoint had never read it).
    #[test]
    fn a_torn_checkpoint_names_no_discard() {
        let d = tempfile::tempdir().unwrap();
        let s = scan(d.path(), true).unwrap();
        std::fs::write(
            d.path().join("checkpoint.json"),
            "{\"completed_prompts\": [0, 1",
        )
        .unwrap();
        assert!(reference_discards(d.path(), &s).is_empty());
        std::fs::write(
            d.path().join("checkpoint.json"),
            "{\"completed_prompts\": [0, 1]}",
        )
        .unwrap();
        assert_eq!(reference_discards(d.path(), &s), BTreeSet::from([0, 1]));
    }

    /// The newest reference's `_entry_prompt_text` cases, and what a scan makes of its
    /// rows: tombstones are done and counted, `failed` rows are not done.
    #[test]
    fn reference_rows_are_found_by_prompt_text() {
        let text = |v: Value| prompt_text_of(&v).map(str::to_string);
        assert_eq!(text(json!({"prompt": "flat"})).as_deref(), Some("flat"));
        let sharegpt = json!({"conversations": [{"from": "system", "value": "s"},
            {"from": "human", "value": "sg"}]});
        assert_eq!(text(sharegpt).as_deref(), Some("sg"));
        let chat = json!({"conversations": [{"role": "user", "content": "chat"}]});
        assert_eq!(text(chat).as_deref(), Some("chat"));
        let msgs = json!({"messages": [{"role": "system", "content": "s"}, 7,
            {"role": "user", "content": "m"}]});
        assert_eq!(text(msgs).as_deref(), Some("m"));
        assert_eq!(text(json!({})), None);
        assert_eq!(foreign_key("  padded  "), foreign_key("padded"));

        let d = tempfile::tempdir().unwrap();
        let rows = [
            json!({"prompt_index": 0, "discarded": "no_reasoning", "prompt": "tombstoned q"}),
            json!({"prompt_index": 1, "conversations": [{"from": "human", "value": "normal q"}]}),
            json!({"prompt_index": 2, "failed": true, "prompt": "failed q"}),
        ];
        let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
        std::fs::write(d.path().join("batch_0.jsonl"), text + "42\n").unwrap();
        let s = scan(d.path(), false).unwrap();
        let mut done: Vec<&Key> = s.done.keys().collect();
        done.sort();
        let mut want = [foreign_key("tombstoned q"), foreign_key("normal q")];
        want.sort();
        assert_eq!(done, want.iter().collect::<Vec<_>>());
        assert_eq!(s.discarded, 1);
        assert_eq!(s.batch_stats[&0].discarded_no_reasoning, 1);
        assert_eq!(
            s.stats.records, 2,
            "the tombstone is no record (the failed row is one)"
        );
        assert_eq!(s.done_indices.iter().copied().collect::<Vec<_>>(), [0, 1]);
        assert!(s.claims[&1].place.ends_with("batch_0.jsonl:2"));
    }
}

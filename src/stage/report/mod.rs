//! traj-report's engine: one self-contained HTML page (or a text table) that shows a
//! dataset or a run before anyone trains on it.
//!
//! - [`inputs`]: files, data directories and traj-run directories as sources.
//! - [`facts`]: what one line tells (a row, a reject, a failure), by the rules of the
//!   stages that wrote it.
//! - [`dist`]: exact distributions with memory bounded by distinct values.
//! - [`overview`]: every row counted, as the page's figures.
//! - [`sample`]: the reproducible sample of rows the page embeds, extremes included.
//! - [`scan`]: the lines read, parsed and counted by `-j` workers, back in input order.
//! - [`view`]: one row as the viewer shows it.
//! - [`page`]: the HTML page (its script and styles inline, from files beside this one).
//! - [`figures`]: the overview as a list of named figures, one value per dataset, and
//!   as the plain text table of `--summary` (the page shows the same list).
//!
//! Rows are parsed and their tokens counted in parallel ([`scan`]), then folded one at a
//! time in input order (the bad-line policy of every stage through
//! [`crate::io::Tally`]), so the page does not depend on `-j`; only the sampled rows'
//! views are kept.

pub mod dist;
pub mod facts;
pub mod figures;
pub mod inputs;
pub mod overview;
pub mod page;
pub mod sample;
pub mod scan;
pub mod view;

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::Result;
use serde_json::{Map, Value, json};

use crate::format::tokens::Tokenizer;
use crate::io::{OnError, Records, Rejects, Source, Summary, Tally, Verdict, parse_object};
use crate::stage::compress::row::Row;
use facts::Line;
use inputs::Inputs;
use overview::Overview;
use sample::{Measures, Sample};

/// Settings of one report.
pub struct Config {
    pub tokenizer: Arc<dyn Tokenizer>,
    /// The token budget drawn on the tokens plot (`--budget`).
    pub budget: Option<u64>,
    /// Rows embedded per dataset (`--max-rows`).
    pub max_rows: usize,
    pub seed: u64,
    pub on_error: OnError,
    /// Worker threads reading the rows (`-j`; 0: one per core).
    pub jobs: usize,
}

/// One dataset read: its overview, its embedded rows, the line counts.
pub struct Dataset {
    pub name: String,
    pub inputs: Vec<String>,
    pub overview: Value,
    pub rows: Vec<Value>,
    pub summary: Summary,
    /// Rows (trajectories and failure lines) seen, embedded or not.
    pub viewable: u64,
    /// What the command should say about this dataset (a `--before` that could not be
    /// paired).
    pub notes: Vec<String>,
}

/// The key that pairs a compressed row with its uncompressed one (`--before`): its
/// `id`, `prompt_index`, `prompt_hash` or `task_key`, else its number among the rows
/// (with the number of rows of the same key before it: see [`attach_replaced`]).
fn pair_key(obj: &Map<String, Value>, n: u64) -> String {
    ["id", "prompt_index", "prompt_hash", "task_key"]
        .iter()
        .find_map(|k| obj.get(*k).filter(|v| !v.is_null()))
        .map_or_else(|| format!("#{n}"), |v| format!("{v}"))
}

fn measures(f: &facts::Facts) -> Measures {
    let r = f
        .reward
        .map(|r| (r * overview::REWARD_SCALE as f64).round() as i64);
    [
        Some(dist::int(f.tokens)),
        Some(dist::int(f.tokens)),
        Some(dist::int(f.turns)),
        Some(dist::int(f.calls)),
        Some(dist::int(f.tool_errors)),
        r,
        r,
    ]
}

/// Read one dataset. `before`: the uncompressed rows of a compressed dataset, read in a
/// second pass for the embedded rows that hold a summary. Bad lines follow
/// `cfg.on_error`, kept in `rejects`.
pub fn read_dataset(
    name: &str,
    inputs: Inputs,
    before: Option<Vec<Source>>,
    cfg: &Config,
    rejects: &mut Rejects,
) -> Result<Dataset> {
    let tk = cfg.tokenizer.as_ref();
    let mut ov = Overview::new(cfg.budget);
    let mut sample = Sample::new(cfg.max_rows, cfg.seed);
    let mut tally = Tally::new(cfg.on_error, true, rejects);
    let (mut viewable, mut rows) = (0u64, 0u64);
    // With --before: how often each pairing key came so far (see `attach_replaced`).
    let mut seen: Option<HashMap<String, u64>> = before.as_ref().map(|_| HashMap::new());
    scan::scan(inputs.sources, tk, cfg.jobs, |l| {
        let at = format!("{}:{}", l.source, l.lineno);
        let verdict = match &l.line {
            Err(e) => {
                ov.add_bad(&at, e);
                Verdict::Bad(e.clone())
            }
            Ok(line @ (Line::Row(_) | Line::Group(_))) => {
                let group = matches!(line, Line::Group(_));
                for (k, rl) in line.rows().iter().enumerate() {
                    let at = if group {
                        format!("{at} rollout {k}")
                    } else {
                        at.clone()
                    };
                    ov.add_row(&at, &rl.facts);
                    let key = pair_key(&rl.row.obj, rows);
                    rows += 1;
                    let occ = seen.as_mut().map(|m| {
                        let c = m.entry(key.clone()).or_insert(0);
                        *c += 1;
                        *c - 1
                    });
                    sample.offer(viewable, &measures(&rl.facts), || {
                        let mut v = view::row(viewable, &at, rl);
                        v["key"] = key.into();
                        if let Some(k) = occ {
                            v["occ"] = k.into();
                        }
                        v["sum_at"] = json!(rl.facts.summary_at);
                        v["region"] = json!(rl.facts.compression.as_ref().and_then(|c| c.region));
                        v
                    });
                    viewable += 1;
                }
                Verdict::Written
            }
            Ok(Line::Reject(r)) => {
                ov.add_reject(r);
                Verdict::Written
            }
            Ok(Line::Discarded(why)) => {
                ov.add_discarded(why);
                Verdict::Written
            }
            Ok(Line::Failure(f)) => {
                ov.add_failure(f);
                let none: Measures = [None; sample::EXTREMES.len()];
                sample.offer(viewable, &none, || view::failure(viewable, &at, f));
                viewable += 1;
                Verdict::Written
            }
        };
        tally.account(&l.record(), verdict)
    })?;
    let mut embedded = sample.finish();
    // The dataset's own bad lines (a bad line of --before is counted, not shown as one).
    let bad = tally.summary.bad;
    let mut notes = Vec::new();
    if let (Some(b), Some(seen)) = (before, seen) {
        notes.extend(attach_replaced(&mut embedded, b, &seen, &mut tally)?);
    }
    let stats = inputs
        .statistics
        .iter()
        .map(|p| run_statistics(p))
        .collect::<Result<Vec<_>>>()?;
    let summary = tally.summary;
    Ok(Dataset {
        name: name.to_string(),
        inputs: inputs.names,
        overview: ov.to_json(bad, &stats),
        rows: embedded,
        summary,
        viewable,
        notes,
    })
}

/// Read `--before` and give each embedded summary turn the turns it replaced: the
/// `compression_region` of the row's metrics when it has one, else the turns between
/// the kept head (the turns before the summary) and the kept tail (those after it).
///
/// A row is paired by its key ([`pair_key`]) and the number of rows before it with the
/// same key: the k-th compressed row of a key with the k-th uncompressed one (traj-compress
/// writes its rows in input order), and only when both sides have the key as many times
/// (`seen`: the compressed side's counts). A key that repeats a different number of
/// times (a row dropped on one side) cannot say which row is which: its summaries show
/// no replaced turns rather than another row's. Rows without a key are paired by their
/// number only when both sides hold as many of them (a sample, a shard or a filter in
/// between shifts the numbers): else none is, and the note returned says so.
fn attach_replaced(
    embedded: &mut [Value],
    before: Vec<Source>,
    seen: &HashMap<String, u64>,
    tally: &mut Tally,
) -> Result<Option<String>> {
    let mut want: HashMap<(String, u64), usize> = HashMap::new();
    for (i, v) in embedded.iter().enumerate() {
        if v["sum_at"].is_u64()
            && let Some(k) = v["key"].as_str()
            && let Some(occ) = v["occ"].as_u64()
        {
            want.insert((k.to_string(), occ), i);
        }
    }
    // The keys of the uncompressed rows, counted, and the turns each wanted one replaced.
    let mut counts: HashMap<String, u64> = HashMap::new();
    let mut found: Vec<(usize, String, Value)> = Vec::new();
    let mut records = Records::new(before, None);
    let mut n = 0u64;
    while let Some(rec) = records.next_record()? {
        let obj = match parse_object(rec.bytes) {
            Ok(o) => o,
            Err(e) => {
                tally.account(&rec, Verdict::Bad(format!("--before: {e}")))?;
                continue;
            }
        };
        let key = pair_key(&obj, n);
        n += 1;
        let c = counts.entry(key.clone()).or_insert(0);
        let occ = *c;
        *c += 1;
        let Some(&i) = want.get(&(key.clone(), occ)) else {
            continue;
        };
        let Some(row) = Row::locate(obj) else {
            continue;
        };
        let v = &embedded[i];
        let s = v["sum_at"].as_u64().unwrap_or(0) as usize;
        let kept_tail = (v["turns"].as_u64().unwrap_or(0) as usize).saturating_sub(s + 1);
        let (start, end) = match v["region"].as_array() {
            Some(r) => (
                r[0].as_u64().unwrap_or(0) as usize,
                r[1].as_u64().unwrap_or(0) as usize,
            ),
            None => (s, row.turns().len().saturating_sub(kept_tail)),
        };
        let all = view::raw_turns(&row);
        let replaced: Vec<Value> = all
            .get(start.min(all.len())..end.min(all.len()))
            .unwrap_or(&[])
            .to_vec();
        found.push((i, key, json!({"from": start, "to": end, "turns": replaced})));
    }
    let keyless = |m: &HashMap<String, u64>| m.keys().filter(|k| k.starts_with('#')).count();
    let (after_n, before_n) = (keyless(seen), keyless(&counts));
    let by_number = after_n == before_n;
    for (i, key, rep) in found {
        if counts.get(&key) != seen.get(&key) || (key.starts_with('#') && !by_number) {
            continue;
        }
        if let Some(t) = embedded[i]["t"]
            .as_array_mut()
            .and_then(|t| t.iter_mut().find(|t| t["r"] == "summary"))
        {
            t["rep"] = rep;
        }
    }
    Ok((!by_number).then(|| {
        format!(
            "--before: {after_n} rows without an id, prompt_index, prompt_hash or task_key \
             against {before_n} in --before, so their numbers cannot pair them: their \
             summaries show no replaced turns"
        )
    }))
}

/// The totals of a traj-run directory's `statistics.json` the page shows.
fn run_statistics(p: &std::path::Path) -> Result<Value> {
    let text = std::fs::read_to_string(p).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{}: not JSON: {e}", p.display()))?;
    let mut m = Map::new();
    m.insert("file".into(), p.display().to_string().into());
    for k in [
        "run_name",
        "model",
        "total_prompts",
        "prompts_done",
        "prompts_failed",
        "records",
        "api_calls",
        "duration_seconds",
        "usage",
        "failure_classes",
    ] {
        if let Some(x) = v.get(k) {
            m.insert(k.into(), x.clone());
        }
    }
    Ok(Value::Object(m))
}

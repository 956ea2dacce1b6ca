//! traj-sample-tools: give each prompt row the toolsets its agent will get.
//!
//! Reads prompt rows (JSONL objects with a string `prompt`) and writes them back with
//! `toolsets` (drawn from a distribution), `distribution`, `seed` and `prompt_index`
//! (the row's index among the non-blank input lines, 0-based, unless the row has
//! one). Other fields pass through unchanged, in their order.
//!
//! The draw for a row depends only on `--seed`, the row's `prompt_index` and the
//! distribution (see [`crate::toolbox::distributions`]), so re-running, sharding or
//! reordering the input gives each row the same toolsets.
//!
//! `--shard I/N` keeps the rows at non-blank positions k with k % N == I, like every
//! line stage; their toolsets are the same as in an unsharded run, since the
//! `prompt_index` of a row without one is its position in the whole input.
//!
//! Rows are handled one at a time in input order (drawing is far cheaper than parsing
//! the JSON, and the running line index needs a single reader, which
//! [`crate::io::process`] does not expose); memory is one line. The `--on-error`,
//! `--rejects` and summary behaviour is the common one.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use serde_json::{Map, Value, json};

use crate::cli::{IoArgs, Status, note, summary_line};
use crate::io::{LineReader, Output, Rejects, Summary, Verdict, is_blank};
use crate::toolbox::{Distribution, Registry, ToolConfig, distributions};

const NAME: &str = "traj-sample-tools";

const EXAMPLES: &str = "\
Examples:
  traj-sample-tools prompts.jsonl -o tasks.jsonl
  traj-sample-tools -d development --seed 7 prompts.jsonl > tasks.jsonl
  traj-sample-tools --distributions mine.json -d heavy_terminal prompts.jsonl
  traj-sample-tools --shard 0/4 prompts.jsonl > tasks.0.jsonl
  traj-sample-tools --available web,terminal,file prompts.jsonl
  traj-sample-tools --list-distributions
  traj-sample-tools --list-toolsets --json | jq .";

/// Flags of traj-sample-tools.
#[derive(Debug, clap::Parser)]
#[command(
    name = "traj-sample-tools",
    version,
    about = "Add sampled toolsets to prompt rows (prompt rows -> task rows)",
    after_help = EXAMPLES
)]
pub struct Args {
    #[command(flatten)]
    pub io: IoArgs,
    #[command(flatten)]
    pub shard: crate::cli::ShardArgs,

    /// Distribution to draw from (a row's own string `distribution` field wins).
    #[arg(short = 'd', long, default_value = "default", value_name = "NAME")]
    pub distribution: String,

    /// JSON file of extra distributions; a built-in one of the same name is replaced.
    /// Shape: {"name": {"description": "...", "toolsets": {"web": 50, "file": 80}}},
    /// or {"name": {"web": 50}}; numbers are percentages.
    #[arg(long, value_name = "FILE")]
    pub distributions: Option<PathBuf>,

    /// Run seed: with the row's prompt_index, it decides the row's toolsets.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub seed: u64,

    /// Toolsets that may be drawn, comma-separated, or `all` for every toolset a
    /// distribution names (for another runner). Default: the toolsets traj can
    /// offer (see --list-toolsets).
    #[arg(long, value_name = "LIST")]
    pub available: Option<String>,

    /// Print the distributions and exit.
    #[arg(long)]
    pub list_distributions: bool,

    /// Print the toolsets, their tools and what is available, and exit.
    #[arg(long)]
    pub list_toolsets: bool,

    /// With --list-*: JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// What a run draws from.
struct Plan {
    dists: Vec<Distribution>,
    default: usize,
    available: BTreeSet<String>,
    all: bool,
    seed: u64,
}

impl Plan {
    fn available_for(&self, d: &Distribution) -> std::borrow::Cow<'_, BTreeSet<String>> {
        if self.all {
            std::borrow::Cow::Owned(d.toolsets.iter().map(|(t, _)| t.clone()).collect())
        } else {
            std::borrow::Cow::Borrowed(&self.available)
        }
    }

    /// The distribution a row names (or the default), or why the name is bad.
    fn dist_for(&self, field: Option<&Value>) -> Result<&Distribution, String> {
        match field {
            None | Some(Value::Null) => Ok(&self.dists[self.default]),
            Some(Value::String(name)) => self
                .dists
                .iter()
                .find(|d| &d.name == name)
                .ok_or_else(|| format!("unknown distribution {name:?} in the row")),
            Some(other) => Err(format!(
                "\"distribution\" must be a string, found {}",
                crate::io::json_kind(other)
            )),
        }
    }

    fn draw(&self, dist: &Distribution, key: u64) -> Result<Vec<String>, String> {
        let available = self.available_for(dist);
        let toolsets = distributions::sample(dist, self.seed, key, &available);
        if toolsets.is_empty() {
            return Err(format!(
                "distribution {:?} has no available toolset",
                dist.name
            ));
        }
        Ok(toolsets)
    }

    /// The output line for one row, or why the row is bad.
    fn row(&self, line: &[u8], index: u64) -> Result<Vec<u8>, String> {
        if let Some(out) = self.row_fast(line, index)? {
            return Ok(out);
        }
        self.row_slow(line, index)
    }

    /// The common case without re-serialising the row: a valid object with a string
    /// `prompt` and none of `toolsets`, `distribution`, `seed`; the new fields are
    /// appended to the line as it is. `None`: anything else, left to [`Plan::row_slow`]
    /// (which also words the errors).
    fn row_fast(&self, line: &[u8], index: u64) -> Result<Option<Vec<u8>>, String> {
        #[derive(serde::Deserialize)]
        struct Probe<'a> {
            #[serde(borrow)]
            prompt: Option<&'a serde_json::value::RawValue>,
            prompt_index: Option<Value>,
            distribution: Option<serde::de::IgnoredAny>,
            toolsets: Option<serde::de::IgnoredAny>,
            seed: Option<serde::de::IgnoredAny>,
        }
        // serde skips the strings of ignored fields without checking their UTF-8: check
        // the whole line first, or a bad byte there would be copied to the output.
        let Ok(text) = simdutf8::basic::from_utf8(line) else {
            return Ok(None);
        };
        let Ok(p) = serde_json::from_str::<Probe>(text) else {
            return Ok(None);
        };
        let prompt_is_string = p.prompt.is_some_and(|r| r.get().starts_with('"'));
        if !prompt_is_string || p.distribution.is_some() || p.toolsets.is_some() || p.seed.is_some()
        {
            return Ok(None);
        }
        let (key, add_index) = match &p.prompt_index {
            None | Some(Value::Null) => (index, true),
            Some(v) => match v.as_u64() {
                Some(k) => (k, false),
                None => return Ok(None),
            },
        };
        let dist = &self.dists[self.default];
        let toolsets = self.draw(dist, key)?;
        let end = line
            .iter()
            .rposition(|&b| b == b'}')
            .expect("a JSON object ends with }");
        let mut out = Vec::with_capacity(line.len() + 128);
        out.extend_from_slice(&line[..end]);
        out.extend_from_slice(b",\"toolsets\":");
        serde_json::to_writer(&mut out, &toolsets).map_err(|e| e.to_string())?;
        out.extend_from_slice(b",\"distribution\":");
        serde_json::to_writer(&mut out, &dist.name).map_err(|e| e.to_string())?;
        out.extend_from_slice(format!(",\"seed\":{}", self.seed).as_bytes());
        if add_index {
            out.extend_from_slice(format!(",\"prompt_index\":{key}").as_bytes());
        }
        out.extend_from_slice(b"}\n");
        Ok(Some(out))
    }

    /// Any row: parsed, fields set in place (existing keys keep their position).
    fn row_slow(&self, line: &[u8], index: u64) -> Result<Vec<u8>, String> {
        let mut row: Map<String, Value> = crate::io::parse_object(line)?;
        match row.get("prompt") {
            Some(Value::String(_)) => {}
            None => return Err("missing \"prompt\"".to_string()),
            Some(other) => {
                return Err(format!(
                    "\"prompt\" must be a string, found {}",
                    crate::io::json_kind(other)
                ));
            }
        }
        let key = match row.get("prompt_index") {
            None | Some(Value::Null) => index,
            Some(v) => v.as_u64().ok_or_else(|| {
                format!("\"prompt_index\" must be a non-negative integer, found {v}")
            })?,
        };
        let dist = self.dist_for(row.get("distribution"))?;
        let toolsets = self.draw(dist, key)?;
        row.insert("toolsets".into(), json!(toolsets));
        row.insert("distribution".into(), json!(dist.name));
        row.insert("seed".into(), json!(self.seed));
        row.insert("prompt_index".into(), json!(key));
        let mut out = serde_json::to_vec(&row).map_err(|e| e.to_string())?;
        out.push(b'\n');
        Ok(out)
    }
}

/// Run traj-sample-tools.
pub fn run_cli(args: Args) -> Result<Status> {
    let registry = Registry::builtin(&ToolConfig::default());
    let mut dists = distributions::builtin();
    if let Some(path) = &args.distributions {
        let extra =
            distributions::load(path).map_err(|e| crate::cli::UsageError(format!("{e:#}")))?;
        dists = distributions::merge(dists, extra);
    }
    let (available, all) = match args.available.as_deref() {
        None => (registry.implemented_toolsets(), false),
        Some("all") => (BTreeSet::new(), true),
        Some(list) => {
            let set: BTreeSet<String> = list
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect();
            for t in &set {
                if registry.toolset(t).is_none() {
                    crate::usage_bail!("--available: unknown toolset {t:?} (see --list-toolsets)");
                }
            }
            (set, false)
        }
    };
    if args.list_distributions || args.list_toolsets {
        let mut out = Output::create(args.io.output.as_deref())?;
        if args.list_distributions {
            list_distributions(&mut out, &dists, &available, all, args.json)?;
        } else {
            list_toolsets(&mut out, &registry, &available, all, args.json)?;
        }
        out.commit()?;
        return Ok(Status::Ok);
    }
    let Some(default) = dists.iter().position(|d| d.name == args.distribution) else {
        let names: Vec<&str> = dists.iter().map(|d| d.name.as_str()).collect();
        crate::usage_bail!(
            "unknown distribution {:?} (known: {})",
            args.distribution,
            names.join(", ")
        );
    };
    if !all {
        // Toolsets the registry does not know can never be offered: a typo, most likely.
        for d in &dists {
            for (t, _) in &d.toolsets {
                if registry.toolset(t).is_none() {
                    crate::usage_bail!(
                        "distribution {:?} names unknown toolset {t:?} (see --list-toolsets, or use --available all)",
                        d.name
                    );
                }
            }
        }
        let d = &dists[default];
        if d.fallback(&available).is_none() {
            crate::usage_bail!(
                "distribution {:?} has no available toolset (its toolsets: {}; available: {})",
                d.name,
                d.toolsets
                    .iter()
                    .map(|(t, _)| t.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                available.iter().cloned().collect::<Vec<_>>().join(", ")
            );
        }
    }
    let plan = Plan {
        dists,
        default,
        available,
        all,
        seed: args.seed,
    };

    let sources = crate::io::sources_from_args(&args.io.inputs)?;
    let mut out = Output::create(args.io.output.as_deref())?;
    let mut rejects = Rejects::open(NAME, args.io.rejects.as_deref())?;
    let mut summary = Summary::default();
    let policy = (args.io.on_error, true);
    let mut reader = LineReader::new(sources);
    let mut line = Vec::new();
    let mut index = 0u64;
    while let Some((source, lineno)) = reader.read_into(&mut line)? {
        if is_blank(&line) {
            continue;
        }
        let this = index;
        index += 1;
        if args.shard.shard.is_some_and(|sh| !sh.holds(this)) {
            continue;
        }
        summary.read += 1;
        match plan.row(&line, this) {
            Ok(bytes) => {
                out.write_all(&bytes)?;
                summary.written += 1;
            }
            Err(reason) => {
                let at = (&source, lineno, line.as_slice());
                if let Some(err) =
                    summary.not_written(policy, &mut rejects, at, &Verdict::Bad(reason))?
                {
                    out.flush()?;
                    return Err(err.into());
                }
            }
        }
    }
    out.commit().context("writing the output")?;
    rejects.finish()?;
    if !args.io.quiet {
        note(NAME, &summary_line(&summary));
    }
    Ok(Status::from_summary(&summary))
}

fn pct(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("{p:.0}")
    } else {
        format!("{p}")
    }
}

fn list_distributions(
    out: &mut dyn Write,
    dists: &[Distribution],
    available: &BTreeSet<String>,
    all: bool,
    as_json: bool,
) -> Result<()> {
    let avail = |d: &Distribution| -> BTreeSet<String> {
        if all {
            d.toolsets.iter().map(|(t, _)| t.clone()).collect()
        } else {
            available.clone()
        }
    };
    if as_json {
        let v: Vec<Value> = dists
            .iter()
            .map(|d| {
                let a = avail(d);
                let sets: Map<String, Value> = d
                    .toolsets
                    .iter()
                    .map(|(t, p)| (t.clone(), json!(p)))
                    .collect();
                let expected: Map<String, Value> = d
                    .toolsets
                    .iter()
                    .map(|(t, _)| (t.clone(), json!(d.expected_frequency(t, &a))))
                    .collect();
                json!({
                    "name": d.name,
                    "description": d.description,
                    "toolsets": sets,
                    "fallback": d.fallback(&a),
                    "expected_frequency": expected,
                })
            })
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(());
    }
    let width = dists
        .iter()
        .map(|d| d.name.len())
        .max()
        .unwrap_or(4)
        .max(12);
    writeln!(
        out,
        "{:width$}  TOOLSETS (% chance each; * = not available, never drawn)",
        "DISTRIBUTION"
    )?;
    for d in dists {
        let a = avail(d);
        let sets: Vec<String> = d
            .toolsets
            .iter()
            .map(|(t, p)| {
                let mark = if a.contains(t) { "" } else { "*" };
                format!("{t}{mark} {}", pct(*p))
            })
            .collect();
        writeln!(out, "{:width$}  {}", d.name, sets.join(", "))?;
        let fallback = d.fallback(&a).unwrap_or("(none: nothing available)");
        writeln!(
            out,
            "{:width$}    {}; if nothing is drawn: {fallback}",
            "", d.description
        )?;
    }
    Ok(())
}

fn list_toolsets(
    out: &mut dyn Write,
    registry: &Registry,
    available: &BTreeSet<String>,
    all: bool,
    as_json: bool,
) -> Result<()> {
    if as_json {
        let v: Vec<Value> = registry
            .toolsets()
            .iter()
            .map(|t| {
                let tools: Vec<Value> = t
                    .tools
                    .iter()
                    .map(|n| {
                        let a = &registry
                            .tool(n)
                            .expect("toolset tools are registered")
                            .availability;
                        json!({"name": n, "status": a.describe()})
                    })
                    .collect();
                json!({
                    "name": t.name,
                    "description": t.description,
                    "sampled": all || available.contains(t.name),
                    "tools": tools,
                    "includes": t.includes,
                })
            })
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(());
    }
    writeln!(
        out,
        "{:15} {:8} TOOLS (* = not implemented by traj, ? = needs configuration in traj-run)",
        "TOOLSET", "SAMPLED"
    )?;
    for t in registry.toolsets() {
        let tools: Vec<String> = t
            .tools
            .iter()
            .map(|n| {
                let mark = match registry.tool(n).map(|i| &i.availability) {
                    Some(crate::toolbox::Availability::Available) => "",
                    Some(crate::toolbox::Availability::NotConfigured(_)) => "?",
                    _ => "*",
                };
                format!("{n}{mark}")
            })
            .collect();
        let mut line = tools.join(", ");
        if !t.includes.is_empty() {
            line.push_str(&format!(" + includes {}", t.includes.join(", ")));
        }
        let sampled = if all || available.contains(t.name) {
            "yes"
        } else {
            "no"
        };
        writeln!(out, "{:15} {:8} {line}", t.name, sampled)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        let dists = distributions::builtin();
        let default = dists.iter().position(|d| d.name == "balanced").unwrap();
        Plan {
            dists,
            default,
            available: Registry::builtin(&ToolConfig::default()).implemented_toolsets(),
            all: false,
            seed: 5,
        }
    }

    /// The fast path and the full parse give the same rows (up to white space).
    #[test]
    fn fast_and_slow_paths_agree() {
        let p = plan();
        let rows: &[&[u8]] = &[
            br#"{"prompt":"a"}"#,
            br#"{ "prompt" : "b\"q" , "x" : [1, {"y": null}] }  "#,
            br#"{"id":3,"prompt":"c","prompt_index":77}"#,
            br#"{"prompt":"d","prompt_index":null}"#,
        ];
        for (i, row) in rows.iter().enumerate() {
            let fast = p.row_fast(row, i as u64).unwrap().expect("fast path taken");
            let slow = p.row_slow(row, i as u64).unwrap();
            let f: Value = serde_json::from_slice(&fast).unwrap();
            let s: Value = serde_json::from_slice(&slow).unwrap();
            assert_eq!(f, s, "{}", String::from_utf8_lossy(row));
            let fk: Vec<&String> = f.as_object().unwrap().keys().collect();
            let sk: Vec<&String> = s.as_object().unwrap().keys().collect();
            assert_eq!(fk, sk);
        }
        for row in [
            &br#"{"prompt":1}"#[..],
            br#"{"prompt":"a","distribution":"minimal"}"#,
            br#"{"prompt":"a","toolsets":["x"]}"#,
            br#"{"prompt":"a","prompt":"b"}"#,
            br#"{"prompt":"a","prompt_index":-1}"#,
            br#"[1]"#,
            br#"{"prompt":"a""#,
        ] {
            assert!(
                p.row_fast(row, 0).unwrap().is_none(),
                "{}",
                String::from_utf8_lossy(row)
            );
        }
    }
}

//! traj-sample-tools' engine: give each prompt row the toolsets its agent will get.
//!
//! A [`Plan`] (the distributions, the default one, the toolsets that may be drawn, the
//! seed) turns a prompt row into a task row: `toolsets`, `distribution`, `seed` and
//! `prompt_index` are added, other fields pass through in their order. The draw for a
//! row depends only on the seed, the row's `prompt_index` and the distribution (see
//! [`crate::catalog::distributions`]), so re-running, sharding or reordering the input
//! gives each row the same toolsets, and so does another machine: the toolsets that may
//! be drawn are the catalog's ([`crate::catalog::toolsets`]), not what is installed
//! here. [`sample_rows`] runs a plan over the input lines; [`list_distributions`] and
//! [`list_toolsets`] print what a plan can draw, the latter with what a [`Machine`]
//! says of each tool.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::io::Write;

use anyhow::Result;
use serde_json::{Map, Value, json};

use crate::catalog::toolsets;
use crate::catalog::{Distribution, distributions};
use crate::io::{
    OnError, Output, Records, Rejects, Select, Shard, Source, Summary, Tally, Verdict,
};

/// Why a plan cannot be made from the flags and distributions (a usage error).
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("--available: unknown toolset {0:?} (see --list-toolsets)")]
    UnknownAvailable(String),
    #[error("unknown distribution {name:?} (known: {known})")]
    UnknownDistribution { name: String, known: String },
    #[error(
        "distribution {dist:?} names unknown toolset {toolset:?} (see --list-toolsets, or use --available all)"
    )]
    UnknownToolset { dist: String, toolset: String },
    #[error(
        "distribution {dist:?} has no available toolset (its toolsets: {toolsets}; available: {available})"
    )]
    NothingAvailable {
        dist: String,
        toolsets: String,
        available: String,
    },
}

/// Every plan error is a flag or a distributions file to fix.
impl crate::error::Classify for PlanError {
    fn is_usage(&self) -> bool {
        true
    }
}

/// Why a row gets no toolsets (a bad input line).
#[derive(Debug, thiserror::Error)]
pub enum RowError {
    /// Not a JSON object (the line engine's words).
    #[error("{0}")]
    NotObject(String),
    #[error("missing \"prompt\"")]
    NoPrompt,
    #[error("\"prompt\" must be a string, found {0}")]
    PromptNotString(&'static str),
    /// traj-run runs no empty prompt (white space only is empty).
    #[error("empty prompt")]
    EmptyPrompt,
    /// Two rows claim one `prompt_index`, which traj-run refuses (see [`Claims`]).
    #[error("{0}")]
    IndexTaken(String),
    #[error("\"prompt_index\" must be a non-negative integer, found {0}")]
    BadPromptIndex(Value),
    #[error("unknown distribution {0:?} in the row")]
    UnknownDistribution(String),
    #[error("\"distribution\" must be a string, found {0}")]
    DistributionNotString(&'static str),
    #[error("distribution {0:?} has no available toolset")]
    NothingDrawn(String),
    #[error("{0}")]
    Json(#[from] serde_json::Error),
}

/// The toolsets that may be drawn: a set, or (`--available all`) every toolset the
/// distribution names.
#[derive(Debug, Clone)]
pub struct Available {
    pub set: BTreeSet<String>,
    pub all: bool,
}

impl Available {
    /// `--available LIST`: `None` for the catalog's drawable toolsets, `all`, or a
    /// list of known toolsets, comma-separated.
    pub fn parse(spec: Option<&str>) -> Result<Available, PlanError> {
        let (set, all) = match spec {
            None => (toolsets::drawable_toolsets(), false),
            Some("all") => (BTreeSet::new(), true),
            Some(list) => {
                let set: BTreeSet<String> = list
                    .split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect();
                if let Some(t) = set.iter().find(|t| toolsets::toolset(t).is_none()) {
                    return Err(PlanError::UnknownAvailable(t.clone()));
                }
                (set, false)
            }
        };
        Ok(Available { set, all })
    }

    /// The toolsets of `d` that may be drawn.
    pub fn for_dist(&self, d: &Distribution) -> Cow<'_, BTreeSet<String>> {
        if self.all {
            Cow::Owned(d.toolsets.iter().map(|(t, _)| t.clone()).collect())
        } else {
            Cow::Borrowed(&self.set)
        }
    }
}

/// What a run draws from.
pub struct Plan {
    dists: Vec<Distribution>,
    default: usize,
    available: Available,
    seed: u64,
    /// Every toolset drawn so far (for the caller's note on what cannot run here).
    drawn: RefCell<BTreeSet<String>>,
}

/// Every toolset the distributions name is one traj knows (with `--available all` the
/// names are another runner's, and not checked): what a run and a listing both check.
pub fn check_toolsets(dists: &[Distribution]) -> Result<(), PlanError> {
    for d in dists {
        if let Some((t, _)) = d
            .toolsets
            .iter()
            .find(|(t, _)| toolsets::toolset(t).is_none())
        {
            return Err(PlanError::UnknownToolset {
                dist: d.name.clone(),
                toolset: t.clone(),
            });
        }
    }
    Ok(())
}

impl Plan {
    /// A plan drawing from `dists` (`default` for rows that name none). Unless every
    /// toolset is available, each distribution must name only toolsets the catalog
    /// knows (a typo, most likely), and the default one must have one available.
    pub fn new(
        dists: Vec<Distribution>,
        default: &str,
        available: Available,
        seed: u64,
    ) -> Result<Plan, PlanError> {
        let Some(index) = dists.iter().position(|d| d.name == default) else {
            let names: Vec<&str> = dists.iter().map(|d| d.name.as_str()).collect();
            return Err(PlanError::UnknownDistribution {
                name: default.to_string(),
                known: names.join(", "),
            });
        };
        if !available.all {
            check_toolsets(&dists)?;
            let d = &dists[index];
            if d.fallback(&available.set).is_none() {
                let toolsets: Vec<&str> = d.toolsets.iter().map(|(t, _)| t.as_str()).collect();
                let set: Vec<&str> = available.set.iter().map(String::as_str).collect();
                return Err(PlanError::NothingAvailable {
                    dist: d.name.clone(),
                    toolsets: toolsets.join(", "),
                    available: set.join(", "),
                });
            }
        }
        Ok(Plan {
            dists,
            default: index,
            available,
            seed,
            drawn: RefCell::default(),
        })
    }

    /// Every toolset drawn so far, over all rows.
    pub fn drawn(&self) -> BTreeSet<String> {
        self.drawn.borrow().clone()
    }

    /// The distribution a row names (or the default), or why the name is bad.
    fn dist_for(&self, field: Option<&Value>) -> Result<&Distribution, RowError> {
        match field {
            None | Some(Value::Null) => Ok(&self.dists[self.default]),
            Some(Value::String(name)) => self
                .dists
                .iter()
                .find(|d| &d.name == name)
                .ok_or_else(|| RowError::UnknownDistribution(name.clone())),
            Some(other) => Err(RowError::DistributionNotString(crate::io::json_kind(other))),
        }
    }

    fn draw(&self, dist: &Distribution, key: u64) -> Result<Vec<String>, RowError> {
        let available = self.available.for_dist(dist);
        let toolsets = distributions::sample(dist, self.seed, key, &available);
        if toolsets.is_empty() {
            return Err(RowError::NothingDrawn(dist.name.clone()));
        }
        let mut drawn = self.drawn.borrow_mut();
        for t in &toolsets {
            if !drawn.contains(t) {
                drawn.insert(t.clone());
            }
        }
        Ok(toolsets)
    }

    /// The output line for one row (`index`: its position among the non-blank input
    /// lines), or why the row is bad.
    pub fn row(&self, line: &[u8], index: u64) -> Result<Vec<u8>, RowError> {
        self.row_claiming(line, index).map(|(out, _)| out)
    }

    /// [`Plan::row`], and the `prompt_index` the row claims.
    fn row_claiming(&self, line: &[u8], index: u64) -> Result<(Vec<u8>, Claim), RowError> {
        if let Some(out) = self.row_fast(line, index)? {
            return Ok(out);
        }
        self.row_slow(line, index)
    }

    /// The common case without re-serialising the row: a valid object with a
    /// non-empty string `prompt`, no `prompt_index` or a non-negative integer one, and
    /// none of `toolsets`, `distribution`, `seed` (not even `null`: the slow path
    /// replaces such a value in place, where appending would write the key twice); the
    /// new fields are appended to the line as it is. `None`: anything else, left to
    /// [`Plan::row_slow`] (which also words the errors).
    fn row_fast(&self, line: &[u8], index: u64) -> Result<Option<(Vec<u8>, Claim)>, RowError> {
        /// A member that is there, whatever its value (`null` included).
        fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
            serde::Deserialize::deserialize(d).map(|serde::de::IgnoredAny| true)
        }
        /// A member's value, `null` included (`Option<Value>` reads `null` as absent).
        fn member<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
            serde::Deserialize::deserialize(d).map(Some)
        }
        #[derive(serde::Deserialize)]
        struct Probe<'a> {
            #[serde(borrow)]
            prompt: Option<&'a serde_json::value::RawValue>,
            #[serde(default, deserialize_with = "member")]
            prompt_index: Option<Value>,
            #[serde(default, deserialize_with = "present")]
            distribution: bool,
            #[serde(default, deserialize_with = "present")]
            toolsets: bool,
            #[serde(default, deserialize_with = "present")]
            seed: bool,
        }
        // serde skips the strings of ignored fields without checking their UTF-8: check
        // the whole line first, or a bad byte there would be copied to the output.
        let Ok(text) = simdutf8::basic::from_utf8(line) else {
            return Ok(None);
        };
        // Nor does it see nesting or a key twice in them: the scanner's row rules, or
        // the slow path words the error.
        if crate::format::row::validate_object(line).is_err() {
            return Ok(None);
        }
        let Ok(p) = serde_json::from_str::<Probe>(text) else {
            return Ok(None);
        };
        let prompt_is_text = p.prompt.is_some_and(|r| has_text(r.get()));
        if !prompt_is_text || p.distribution || p.toolsets || p.seed {
            return Ok(None);
        }
        let (key, add_index) = match &p.prompt_index {
            None => (index, true),
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
        serde_json::to_writer(&mut out, &toolsets)?;
        out.extend_from_slice(b",\"distribution\":");
        serde_json::to_writer(&mut out, &dist.name)?;
        out.extend_from_slice(format!(",\"seed\":{}", self.seed).as_bytes());
        if add_index {
            out.extend_from_slice(format!(",\"prompt_index\":{key}").as_bytes());
        }
        out.extend_from_slice(b"}\n");
        let claim = Claim {
            index: key,
            own: !add_index,
        };
        Ok(Some((out, claim)))
    }

    /// Any row: parsed, fields set in place (existing keys keep their position; a
    /// `null` `prompt_index` is taken for none and replaced by the row's position).
    /// Only the four values are written: every other member, and the keys of the four,
    /// keep their bytes; a field the row lacks is appended, as the quick path does.
    fn row_slow(&self, line: &[u8], index: u64) -> Result<(Vec<u8>, Claim), RowError> {
        let row: Map<String, Value> = crate::io::parse_object(line).map_err(RowError::NotObject)?;
        match row.get("prompt") {
            Some(Value::String(p)) if p.trim().is_empty() => return Err(RowError::EmptyPrompt),
            Some(Value::String(_)) => {}
            None => return Err(RowError::NoPrompt),
            Some(other) => return Err(RowError::PromptNotString(crate::io::json_kind(other))),
        }
        let (key, own) = match row.get("prompt_index") {
            None | Some(Value::Null) => (index, false),
            Some(v) => (
                v.as_u64()
                    .ok_or_else(|| RowError::BadPromptIndex(v.clone()))?,
                true,
            ),
        };
        let dist = self.dist_for(row.get("distribution"))?;
        let toolsets = self.draw(dist, key)?;
        let fields = [
            ("toolsets", serde_json::to_vec(&toolsets)?),
            ("distribution", serde_json::to_vec(&dist.name)?),
            ("seed", self.seed.to_string().into_bytes()),
            ("prompt_index", key.to_string().into_bytes()),
        ];
        // Where each of the four stands in the line (keys matched by their text).
        let mut at: Vec<(usize, usize, usize)> = Vec::new();
        crate::format::row::object_members(line, 0, |k, vs, ve| {
            let k = crate::format::jsonscan::key_text(k);
            if let Some(i) = fields.iter().position(|(name, _)| name.as_bytes() == &*k) {
                at.push((vs, ve, i));
            }
        })
        .map_err(|_| RowError::NotObject("invalid JSON".into()))?;
        let end = line
            .iter()
            .rposition(|&b| b == b'}')
            .expect("a JSON object ends with }");
        let mut out = Vec::with_capacity(line.len() + 128);
        let mut from = 0;
        for &(vs, ve, i) in &at {
            out.extend_from_slice(&line[from..vs]);
            out.extend_from_slice(&fields[i].1);
            from = ve;
        }
        out.extend_from_slice(&line[from..end]);
        for (i, (name, value)) in fields.iter().enumerate() {
            if !at.iter().any(|&(_, _, j)| j == i) {
                out.extend_from_slice(format!(",\"{name}\":").as_bytes());
                out.extend_from_slice(value);
            }
        }
        out.extend_from_slice(b"}\n");
        Ok((out, Claim { index: key, own }))
    }
}

/// Whether `raw` is a JSON string holding more than white space; decoded only when its
/// first character past the white space is an escape.
fn has_text(raw: &str) -> bool {
    let Some(inner) = raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')) else {
        return false;
    };
    match inner.chars().find(|c| !c.is_whitespace()) {
        None => false,
        Some('\\') => serde_json::from_str::<String>(raw).is_ok_and(|s| !s.trim().is_empty()),
        Some(_) => true,
    }
}

/// The `prompt_index` a row gets: its own (`own`), or its position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Claim {
    index: u64,
    own: bool,
}

/// The `prompt_index` of every row written, so that a second row claiming one is bad
/// input here rather than at traj-run (which refuses it). A row without its own index
/// claims its position, and positions only grow: they are kept as ranges (an input
/// without `prompt_index` is one range, whatever its size); rows with their own index
/// are kept with their `file:line`, to name in the error.
#[derive(Debug, Default)]
struct Claims {
    /// Positions claimed, sorted and disjoint.
    positions: Vec<std::ops::Range<u64>>,
    own: std::collections::HashMap<u64, String>,
}

impl Claims {
    fn position_taken(&self, i: u64) -> bool {
        let after = self.positions.partition_point(|r| r.end <= i);
        self.positions.get(after).is_some_and(|r| r.contains(&i))
    }

    /// Why `claim` cannot be had, or `None`.
    fn taken(&self, claim: Claim) -> Option<String> {
        let i = claim.index;
        let first = self.own.get(&i);
        match (claim.own, first) {
            (true, Some(at)) => Some(format!("prompt_index {i} is also the prompt_index of {at}")),
            (true, None) => self.position_taken(i).then(|| {
                format!(
                    "prompt_index {i} is also the prompt_index of an earlier row without one \
                     (its position among the non-blank input lines)"
                )
            }),
            (false, Some(at)) => Some(format!(
                "this row's position (prompt_index {i} of a row without one) is the \
                 prompt_index of {at}"
            )),
            (false, None) => None,
        }
    }

    fn claim(&mut self, claim: Claim, at: impl FnOnce() -> String) {
        let i = claim.index;
        if claim.own {
            self.own.insert(i, at());
        } else {
            match self.positions.last_mut() {
                Some(r) if r.end == i => r.end = i + 1,
                _ => self.positions.push(i..i + 1),
            }
        }
    }
}

/// Run `plan` over the non-blank lines of `sources`, in input order, one line at a
/// time through the shared serial reader ([`Records`], [`Tally`]): drawing is far
/// cheaper than parsing the JSON, and the running line index needs a single reader;
/// memory is one line. `--shard` keeps the rows at non-blank positions it holds, whose
/// `prompt_index` (when they have none) is still their position in the whole input.
/// Bad rows follow `on_error` (the common policy); with `fail`, the output written so
/// far is flushed and the bad line is the error.
pub fn sample_rows(
    plan: &Plan,
    sources: Vec<Source>,
    shard: Option<Shard>,
    on_error: OnError,
    out: &mut Output,
    rejects: &mut Rejects,
) -> Result<Summary> {
    let mut records = Records::new(sources, shard.map(Select::from));
    let mut tally = Tally::new(on_error, true, rejects);
    let mut claims = Claims::default();
    while let Some(rec) = records.next_record()? {
        let row = plan
            .row_claiming(rec.bytes, rec.index)
            .and_then(|(bytes, claim)| match claims.taken(claim) {
                Some(why) => Err(RowError::IndexTaken(why)),
                None => Ok((bytes, claim)),
            });
        let verdict = match row {
            Ok((bytes, claim)) => {
                claims.claim(claim, || format!("{}:{}", rec.source, rec.lineno));
                out.write_all(&bytes)?;
                Verdict::Written
            }
            Err(reason) => Verdict::Bad(reason.to_string()),
        };
        if let Err(err) = tally.account(&rec, verdict) {
            out.flush()?;
            return Err(err);
        }
    }
    Ok(tally.summary)
}

fn pct(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("{p:.0}")
    } else {
        format!("{p}")
    }
}

/// A listing as indented JSON, one document.
fn write_pretty(out: &mut dyn Write, v: &[Value]) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(v).expect("JSON values serialise");
    writeln!(out, "{text}")
}

/// `--list-distributions`: each distribution's toolsets and chances, what is not
/// available, the fallback; a table, or JSON with the expected frequencies.
pub fn list_distributions(
    out: &mut dyn Write,
    dists: &[Distribution],
    available: &Available,
    as_json: bool,
) -> std::io::Result<()> {
    let avail = |d: &Distribution| available.for_dist(d).into_owned();
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
        return write_pretty(out, &v);
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

/// What this machine (and traj-run's default configuration) says of the tools, for
/// [`list_toolsets`] and for the note on drawn toolsets that cannot run here. With the
/// agent runtime the caller asks the toolbox's registry; without it, [`CatalogOnly`]
/// knows only what traj implements.
pub trait Machine {
    /// The tool's mark in the table (`""` usable, `"?"` needs configuration in
    /// traj-run, `"*"` not implemented by traj or missing on this machine) and its
    /// status in words.
    fn tool_status(&self, tool: &str) -> (&'static str, String);
    /// Why a task given `toolset` could not use it on this machine (`None`: it can,
    /// or this build cannot tell).
    fn why_not_here(&self, toolset: &str) -> Option<String>;
}

/// A [`Machine`] that checks nothing: a build without the agent runtime knows which
/// tools traj implements, not whether this machine could run them.
pub struct CatalogOnly;

impl Machine for CatalogOnly {
    fn tool_status(&self, tool: &str) -> (&'static str, String) {
        match toolsets::tool(tool) {
            Some(t) if t.implemented => (
                "",
                "implemented (not checked here: built without the agent runtime)".to_string(),
            ),
            _ => (
                "*",
                "not implemented: traj has no implementation".to_string(),
            ),
        }
    }
    fn why_not_here(&self, _: &str) -> Option<String> {
        None
    }
}

/// `--list-toolsets`: each toolset's tools (marked when traj lacks them, they are
/// missing here or they need configuration), whether it is sampled, and why it is
/// never drawn or cannot run here; a table, or JSON.
pub fn list_toolsets(
    out: &mut dyn Write,
    machine: &dyn Machine,
    available: &Available,
    as_json: bool,
) -> std::io::Result<()> {
    let (all, available) = (available.all, &available.set);
    if as_json {
        let v: Vec<Value> = toolsets::toolsets()
            .iter()
            .map(|t| {
                let tools: Vec<Value> = t
                    .tools
                    .iter()
                    .map(|n| json!({"name": n, "status": machine.tool_status(n).1}))
                    .collect();
                json!({
                    "name": t.name,
                    "description": t.description,
                    "sampled": all || available.contains(t.name),
                    "not_drawable": toolsets::why_not_drawable(t.name),
                    "not_here": machine.why_not_here(t.name),
                    "tools": tools,
                    "includes": t.includes,
                })
            })
            .collect();
        return write_pretty(out, &v);
    }
    writeln!(
        out,
        "{:15} {:8} TOOLS (* = not implemented by traj or missing on this machine, ? = needs configuration in traj-run)",
        "TOOLSET", "SAMPLED"
    )?;
    for t in toolsets::toolsets() {
        let tools: Vec<String> = t
            .tools
            .iter()
            .map(|n| format!("{n}{}", machine.tool_status(n).0))
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
        if let Some(why) = toolsets::why_not_drawable(t.name) {
            line.push_str(&format!("  [never drawn: {why}]"));
        } else if let Some(why) = machine.why_not_here(t.name) {
            line.push_str(&format!("  [cannot run here: {why}]"));
        }
        writeln!(out, "{:15} {:8} {line}", t.name, sampled)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        let available = Available::parse(None).unwrap();
        Plan::new(distributions::builtin(), "balanced", available, 5).unwrap()
    }

    /// The fast path and the full parse give the same rows, byte for byte.
    #[test]
    fn fast_and_slow_paths_agree() {
        let p = plan();
        let rows: &[&[u8]] = &[
            br#"{"prompt":"a"}"#,
            br#"{ "prompt" : "b\"q" , "x" : [1, {"y": null}] }  "#,
            br#"{"id":3,"prompt":"c","prompt_index":77}"#,
            br#"{"prompt":"d\u0041"}"#,
            br#"{"prompt":" \n\u0041"}"#,
            "{\"prompt\":\"\u{3000}\u{4e2d}\"}".as_bytes(),
        ];
        for (i, row) in rows.iter().enumerate() {
            let fast = p.row_fast(row, i as u64).unwrap().expect("fast path taken");
            let slow = p.row_slow(row, i as u64).unwrap();
            assert_eq!(fast.1, slow.1, "{}", String::from_utf8_lossy(row));
            let (fast, slow) = (fast.0, slow.0);
            assert_eq!(
                String::from_utf8_lossy(&fast),
                String::from_utf8_lossy(&slow)
            );
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
            // Present, though null: the slow path replaces the value in place.
            br#"{"prompt":"d","prompt_index":null}"#,
            br#"{"prompt":"a","distribution":null}"#,
            br#"{"prompt":"a","toolsets":null}"#,
            br#"{"prompt":"a","seed":null}"#,
            br#"{"prompt":" \n\t"}"#,
            br#"{"prompt":" \u3000"}"#,
            br#"{"prompt":""}"#,
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

    /// A row's toolsets depend on the seed, its prompt_index and the distribution only.
    #[test]
    fn draws_are_deterministic() {
        let p = plan();
        let a = p.row(br#"{"prompt":"x"}"#, 17).unwrap();
        let b = p.row(br#"{"prompt":"y","prompt_index":17}"#, 3).unwrap();
        let (a, b): (Value, Value) = (
            serde_json::from_slice(&a).unwrap(),
            serde_json::from_slice(&b).unwrap(),
        );
        assert_eq!(a["toolsets"], b["toolsets"]);
        assert_eq!(a["prompt_index"], json!(17));
        assert_eq!(a["seed"], json!(5));
        assert_eq!(a["distribution"], json!("balanced"));
        assert_eq!(
            p.row(br#"{"prompt":"x"}"#, 17).unwrap(),
            p.row(br#"{"prompt":"x"}"#, 17).unwrap()
        );
    }

    #[test]
    fn bad_rows_say_why() {
        let p = plan();
        for (row, why) in [
            (&br#"{"id":1}"#[..], "missing \"prompt\""),
            (
                br#"{"prompt":3}"#,
                "\"prompt\" must be a string, found a number",
            ),
            (
                br#"{"prompt":"a","prompt_index":-1}"#,
                "\"prompt_index\" must be a non-negative integer, found -1",
            ),
            (
                br#"{"prompt":"a","distribution":"nope"}"#,
                "unknown distribution \"nope\" in the row",
            ),
            (
                br#"{"prompt":"a","distribution":[1]}"#,
                "\"distribution\" must be a string, found an array",
            ),
            (br#"{"prompt":" \n"}"#, "empty prompt"),
            (br#"{"prompt":""}"#, "empty prompt"),
        ] {
            let e = p.row(row, 0).unwrap_err();
            assert_eq!(e.to_string(), why, "{}", String::from_utf8_lossy(row));
        }
        assert!(matches!(p.row(b"[1]", 0), Err(RowError::NotObject(_))));
    }

    /// A null field is replaced where it stands, never written twice.
    #[test]
    fn null_fields_are_replaced_in_place() {
        let p = plan();
        let out = p
            .row(
                br#"{"prompt_index":null,"prompt":"a","distribution":null,"seed":null}"#,
                4,
            )
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with(
                r#"{"prompt_index":4,"prompt":"a","distribution":"balanced","seed":5,"toolsets":"#
            ),
            "{text}"
        );
        assert!(
            crate::format::row::validate_object(text.trim_end().as_bytes()).is_ok(),
            "{text}"
        );
    }

    /// A row the quick path leaves (a field to replace) keeps the bytes of every other
    /// member: numbers, escapes and spacing as written, keys written with escapes too.
    #[test]
    fn the_slow_path_writes_only_the_four_fields() {
        let p = plan();
        let row = br#"{"prompt":"a","y":1e5,"s":"\u00e9\/","w" : [1, 2 ,3],"s\u0065ed":5}"#;
        let out = String::from_utf8(p.row(row, 2).unwrap()).unwrap();
        assert!(
            out.starts_with(
                r#"{"prompt":"a","y":1e5,"s":"\u00e9\/","w" : [1, 2 ,3],"s\u0065ed":5,"toolsets":"#
            ),
            "{out}"
        );
        assert!(
            out.ends_with(",\"distribution\":\"balanced\",\"prompt_index\":2}\n"),
            "{out}"
        );
    }

    #[test]
    fn a_prompt_index_is_claimed_once() {
        let mut c = Claims::default();
        let at = |i: u32| move || format!("t.jsonl:{i}");
        let pos = |index| Claim { index, own: false };
        let own = |index| Claim { index, own: true };
        for i in 0..3 {
            assert_eq!(c.taken(pos(i)), None);
            c.claim(pos(i), at(1));
        }
        assert!(c.taken(own(1)).unwrap().contains("earlier row without one"));
        assert_eq!(c.taken(own(7)), None);
        c.claim(own(7), at(4));
        assert_eq!(
            c.taken(own(7)).unwrap(),
            "prompt_index 7 is also the prompt_index of t.jsonl:4"
        );
        assert!(
            c.taken(pos(7))
                .unwrap()
                .ends_with("is the prompt_index of t.jsonl:4")
        );
        c.claim(pos(9), at(5));
        assert_eq!(c.positions, vec![0..3, 9..10]);
        assert!(c.taken(own(9)).is_some() && c.taken(own(8)).is_none());
    }

    #[test]
    fn plans_check_names() {
        assert!(matches!(
            Available::parse(Some("web,nonsense")),
            Err(PlanError::UnknownAvailable(t)) if t == "nonsense"
        ));
        let all = Available::parse(Some("all")).unwrap();
        assert!(all.all);
        let e = Plan::new(distributions::builtin(), "nope", all.clone(), 0)
            .err()
            .unwrap();
        assert!(matches!(e, PlanError::UnknownDistribution { .. }));
        assert!(
            e.to_string()
                .starts_with("unknown distribution \"nope\" (known: ")
        );
        let only = Available::parse(Some("web")).unwrap();
        let dists = distributions::builtin();
        let no_web = dists
            .iter()
            .find(|d| d.toolsets.iter().all(|(t, _)| t != "web"))
            .map(|d| d.name.clone());
        if let Some(name) = no_web {
            let e = Plan::new(dists, &name, only, 0).err().unwrap();
            assert!(matches!(e, PlanError::NothingAvailable { .. }), "{e}");
        }
    }
}

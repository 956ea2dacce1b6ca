//! Groups of scored rollouts, read and written: the rows of `--to groups` (traj's own,
//! in the shape of Atropos' `ScoredDataGroup`) and Atropos `process` dumps are read as
//! one row per rollout ([`rollouts`]); `--to groups` and `--to dpo` gather the rollouts
//! of each task into one row ([`Gather`], [`group_row`], [`dpo_row`]).
//!
//! A group row holds, per rollout `i`, `messages[i]` (OpenAI messages) and `scores[i]`
//! (its reward, a float), as a `ScoredDataGroup` does; traj's own rows add `task` and
//! `rollouts[i]` (every other field of the rollout's row, `reward` and `task_uid`
//! included), so that reading a group row gives back the rows it was made of. An Atropos
//! dump has no `rollouts`: its per-rollout lists (`tokens`, `masks`, `advantages`,
//! `ref_logprobs`, `inference_logprobs`, `overrides`, `distill_token_ids`,
//! `distill_logprobs`) become fields of each rollout's
//! row, its other fields (`generation_params`, `group_overrides`, ...) are copied to
//! every row, and each row gets the `task_uid` `G:0:i`, `G` the hash of the group's messages
//! (the rollouts of a dump group stay one task).

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::os::unix::fs::FileExt;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::BadRow;
use crate::format::groups::task_and_reward_of_line;
use crate::format::pyjson::{self, Style};
use crate::io::{PipeConfig, Raw, Rejects, Source, Summary, Verdict};

/// The per-rollout lists of an Atropos `ScoredDataGroup`, besides `messages` and `scores`.
const PER_ROLLOUT: [&str; 8] = [
    "tokens",
    "masks",
    "advantages",
    "ref_logprobs",
    "inference_logprobs",
    "overrides",
    "distill_token_ids",
    "distill_logprobs",
];

/// True when `row` is a group of rollouts: a `scores` list beside a `messages` list of
/// lists, or (Atropos without messages) `tokens`.
pub fn is_group(row: &Map<String, Value>) -> bool {
    let Some(Value::Array(_)) = row.get("scores") else {
        return false;
    };
    match row.get("messages") {
        Some(Value::Array(m)) => m.first().is_none_or(Value::is_array),
        None => row.contains_key("tokens"),
        _ => false,
    }
}

/// The rows of the rollouts of a group row (see the module documentation); `line` is
/// a hash of the group's messages names an Atropos group's task.
pub fn rollouts(mut row: Map<String, Value>) -> Result<Vec<Map<String, Value>>, BadRow> {
    let bad = |s: String| BadRow::Group(s);
    let Some(Value::Array(scores)) = row.shift_remove("scores") else {
        return Err(bad("no `scores` list".into()));
    };
    let messages = match row.shift_remove("messages") {
        Some(Value::Array(m)) => m,
        _ => {
            return Err(bad(
                "a group without `messages` (token ids only): traj reads the messages; \
                 write them in the dump (Atropos: include_messages)"
                    .into(),
            ));
        }
    };
    if messages.len() != scores.len() {
        return Err(bad(format!(
            "{} message lists for {} scores",
            messages.len(),
            scores.len()
        )));
    }
    let own = match row.shift_remove("rollouts") {
        Some(Value::Array(r)) if r.len() == scores.len() => Some(r),
        Some(Value::Array(r)) => {
            return Err(bad(format!(
                "{} rollouts for {} scores",
                r.len(),
                scores.len()
            )));
        }
        Some(_) => return Err(bad("`rollouts` is not a list".into())),
        None => None,
    };
    row.shift_remove("task");
    // Atropos' per-rollout lists, taken out of the group's fields.
    let mut lists: Vec<(&str, Vec<Value>)> = Vec::new();
    for key in PER_ROLLOUT {
        match row.shift_remove(key) {
            Some(Value::Array(v)) if v.len() == scores.len() => lists.push((key, v)),
            // A null list is null for every rollout.
            Some(Value::Null) => lists.push((key, vec![Value::Null; scores.len()])),
            None => {}
            Some(v) => {
                return Err(bad(format!(
                    "`{key}` must be a list of {} (one per score), found {}",
                    scores.len(),
                    kind(&v)
                )));
            }
        }
    }
    let group_hash = format!(
        "{:016x}",
        crate::catalog::distributions::fnv1a(&serde_json::to_string(&messages).unwrap_or_default())
    );
    let mut out = Vec::with_capacity(scores.len());
    for (i, (msgs, score)) in messages.into_iter().zip(scores).enumerate() {
        if !msgs.is_array() {
            return Err(bad(format!(
                "messages[{i}] is not a list of messages, found {}",
                kind(&msgs)
            )));
        }
        let Some(reward) = score.as_f64().filter(|r| r.is_finite()) else {
            return Err(bad(format!("scores[{i}] is not a number")));
        };
        let r = match &own {
            Some(own) => match &own[i] {
                Value::Object(o) => with_messages(o, msgs),
                v => {
                    return Err(bad(format!(
                        "rollouts[{i}] is not an object, found {}",
                        kind(v)
                    )));
                }
            },
            None => {
                let mut r = Map::new();
                r.insert(
                    "task_uid".into(),
                    Value::from(format!("{group_hash}:0:{i}")),
                );
                r.insert("rollout_index".into(), Value::from(i));
                r.insert("reward".into(), Value::from(reward));
                r.insert("messages".into(), msgs);
                for (key, list) in &mut lists {
                    r.insert((*key).into(), std::mem::take(&mut list[i]));
                }
                for (k, v) in &row {
                    r.insert(k.clone(), v.clone());
                }
                r
            }
        };
        out.push(r);
    }
    Ok(out)
}

/// A rollout of traj's own group row: its fields with `messages` put back where the
/// writer took it from (just before `tools`, which `--to openai` writes after it; else
/// first).
fn with_messages(fields: &Map<String, Value>, messages: Value) -> Map<String, Value> {
    let mut r = Map::new();
    let mut placed = false;
    for (k, v) in fields {
        if k == "tools" && !placed {
            r.insert("messages".into(), messages.clone());
            placed = true;
        }
        r.insert(k.clone(), v.clone());
    }
    if !placed {
        let mut first = Map::new();
        first.insert("messages".into(), messages);
        first.extend(r);
        return first;
    }
    r
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The rollouts of every task, in the order each task first appears; each rollout is
/// one converted row (an OpenAI-messages row) and its reward.
#[derive(Debug, Default)]
pub struct Gather<T> {
    ids: HashMap<String, usize>,
    pub tasks: Vec<(String, Vec<(T, f64)>)>,
}

impl<T> Gather<T> {
    pub fn add(&mut self, task: String, rollout: T, reward: f64) {
        let id = *self.ids.entry(task.clone()).or_insert_with(|| {
            self.tasks.push((task, Vec::new()));
            self.tasks.len() - 1
        });
        self.tasks[id].1.push((rollout, reward));
    }
}

/// A converted rollout row, read only as far as gathering needs: its members, each as
/// its JSON text. The values are never parsed (a rollout's token lists are most of its
/// bytes) and are written back as they are: the spool rows are traj-normalize's own
/// output, already in the spelling the gathered rows are written in.
pub struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'a> Members<'a> {
    /// The members of one row of the spool.
    pub fn of(row: &'a [u8]) -> Result<Members<'a>, serde_json::Error> {
        let m: indexmap::IndexMap<String, &'a RawValue> = serde_json::from_slice(row)?;
        Ok(Members(m.into_iter().collect()))
    }

    fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }
}

/// Append `"key": ` to `out`.
fn write_key(out: &mut Vec<u8>, key: &str) {
    pyjson::write_str(out, key, Style::Python);
    out.extend_from_slice(b": ");
}

/// Append `items` between `open` and `close`, `, ` between them, each written by `each`.
fn write_seq<T>(
    out: &mut Vec<u8>,
    (open, close): (u8, u8),
    items: impl IntoIterator<Item = T>,
    mut each: impl FnMut(&mut Vec<u8>, T),
) {
    out.push(open);
    for (i, x) in items.into_iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(b", ");
        }
        each(out, x);
    }
    out.push(close);
}

/// Append `[a, b, ...]` of JSON texts to `out`.
fn write_list<'v>(out: &mut Vec<u8>, items: impl IntoIterator<Item = &'v RawValue>) {
    write_seq(out, (b'[', b']'), items, |o, v| {
        o.extend_from_slice(v.get().as_bytes())
    });
}

/// Append a number as a float (`1.0`), as Atropos' scores are.
fn write_float(out: &mut Vec<u8>, x: f64) {
    pyjson::write_value(out, &Value::from(x), Style::Python);
}

/// Append the group row of one task's rollouts (without a newline): `task`, `messages`
/// (each rollout's list; `[]` for a row without one), `scores`, `rollouts` (each row's
/// other members, in order).
pub fn write_group_row(out: &mut Vec<u8>, task: &str, rollouts: &[(Members<'_>, f64)]) {
    out.push(b'{');
    write_key(out, "task");
    pyjson::write_str(out, task, Style::Python);
    out.extend_from_slice(b", ");
    write_key(out, "messages");
    write_seq(out, (b'[', b']'), rollouts, |o, (m, _)| {
        match m.get("messages") {
            Some(v) => o.extend_from_slice(v.get().as_bytes()),
            None => o.extend_from_slice(b"[]"),
        }
    });
    out.extend_from_slice(b", ");
    write_key(out, "scores");
    write_seq(out, (b'[', b']'), rollouts, |o, (_, r)| write_float(o, *r));
    out.extend_from_slice(b", ");
    write_key(out, "rollouts");
    write_seq(out, (b'[', b']'), rollouts, |o, (m, _)| {
        let rest = m.0.iter().filter(|(k, _)| k != "messages");
        write_seq(o, (b'{', b'}'), rest, |o, (k, v)| {
            write_key(o, k);
            o.extend_from_slice(v.get().as_bytes());
        });
    });
    out.push(b'}');
}

/// Why a task gives no preference pair.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NoPair {
    #[error("no-pair: one rollout (reward {0})")]
    One(f64),
    #[error(
        "no-pair: the best reward {best} and the worst {worst} differ by less than --min-margin {margin}"
    )]
    Margin { best: f64, worst: f64, margin: f64 },
    #[error(
        "no-pair: the best and the worst rollouts have different prompts (messages before the first assistant message)"
    )]
    Prompts,
}

impl NoPair {
    /// The key of this reason in the counts.
    pub fn kind(&self) -> &'static str {
        match self {
            NoPair::One(_) => "one",
            NoPair::Margin { .. } => "margin",
            NoPair::Prompts => "prompts",
        }
    }
}

/// A rollout's messages, cut before its first assistant message: the prompt and the
/// rest.
fn split_prompt<'a>(m: &Members<'a>) -> (Vec<&'a RawValue>, Vec<&'a RawValue>) {
    #[derive(serde::Deserialize)]
    struct Role<'r> {
        #[serde(borrow, default)]
        role: Option<std::borrow::Cow<'r, str>>,
    }
    let mut msgs: Vec<&'a RawValue> = m
        .get("messages")
        .and_then(|v| serde_json::from_str(v.get()).ok())
        .unwrap_or_default();
    let at = msgs
        .iter()
        .position(|v| {
            serde_json::from_str::<Role<'_>>(v.get())
                .is_ok_and(|r| r.role.as_deref() == Some("assistant"))
        })
        .unwrap_or(msgs.len());
    let rest = msgs.split_off(at);
    (msgs, rest)
}

/// Append the TRL conversational preference row of one task (without a newline):
/// `prompt` (the messages before the first assistant message), `chosen` (the rest of the
/// first rollout with the highest reward), `rejected` (the rest of the first with the
/// lowest), when their rewards differ by at least `margin` (and at all); then `tools`
/// (a JSON string, as TRL's DPO trainer reads it), `task`, the two rewards and the two
/// `task_uid`s. On `Err` nothing is written.
pub fn write_dpo_row(
    out: &mut Vec<u8>,
    task: &str,
    rollouts: &[(Members<'_>, f64)],
    margin: f64,
) -> Result<(), NoPair> {
    let first = |better: fn(f64, f64) -> bool| {
        rollouts.iter().enumerate().fold(
            0,
            |b, (i, r)| if better(r.1, rollouts[b].1) { i } else { b },
        )
    };
    let (best, worst) = (first(|a, b| a > b), first(|a, b| a < b));
    let (cr, rr) = (rollouts[best].1, rollouts[worst].1);
    if rollouts.len() == 1 {
        return Err(NoPair::One(cr));
    }
    if cr <= rr || cr - rr < margin {
        return Err(NoPair::Margin {
            best: cr,
            worst: rr,
            margin,
        });
    }
    let (prompt, chosen) = split_prompt(&rollouts[best].0);
    let (prompt_r, rejected) = split_prompt(&rollouts[worst].0);
    if !prompt
        .iter()
        .map(|v| v.get())
        .eq(prompt_r.iter().map(|v| v.get()))
    {
        return Err(NoPair::Prompts);
    }
    out.push(b'{');
    for (key, list) in [
        ("prompt", prompt),
        ("chosen", chosen),
        ("rejected", rejected),
    ] {
        if key != "prompt" {
            out.extend_from_slice(b", ");
        }
        write_key(out, key);
        write_list(out, list);
    }
    if let Some(tools) = rollouts[best].0.get("tools") {
        out.extend_from_slice(b", ");
        write_key(out, "tools");
        if tools.get().starts_with('"') {
            out.extend_from_slice(tools.get().as_bytes());
        } else {
            // A list: its compact JSON text, as one string.
            let v: Value = serde_json::from_str(tools.get()).unwrap_or(Value::Null);
            pyjson::write_str(out, &v.to_string(), Style::Python);
        }
    }
    out.extend_from_slice(b", ");
    write_key(out, "task");
    pyjson::write_str(out, task, Style::Python);
    for (key, r) in [("chosen_reward", cr), ("rejected_reward", rr)] {
        out.extend_from_slice(b", ");
        write_key(out, key);
        write_float(out, r);
    }
    for (key, i) in [("chosen_task_uid", best), ("rejected_task_uid", worst)] {
        if let Some(uid) = rollouts[i].0.get("task_uid") {
            out.extend_from_slice(b", ");
            write_key(out, key);
            out.extend_from_slice(uid.get().as_bytes());
        }
    }
    out.push(b'}');
    Ok(())
}

/// What `--to groups` and `--to dpo` write per task.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Gathering {
    Groups,
    /// Pairs whose rewards differ by at least `margin` (and at all).
    Dpo {
        margin: f64,
    },
}

/// The counts of a gathering run.
#[derive(Debug, Default)]
pub struct Gathered {
    /// The input lines (converted, dropped, bad), as any line stage counts them.
    pub lines: Summary,
    pub rollouts: u64,
    pub tasks: u64,
    /// Rows written: one per task (`groups`), one per pair (`dpo`).
    pub rows: u64,
    /// Tasks without a preference pair, per reason (`one`, `margin`, `prompts`).
    pub no_pair: BTreeMap<&'static str, u64>,
}

/// Gather the rollouts of every task into one row each (see the module documentation).
///
/// Every input line is converted by `convert` (to OpenAI-messages rows; a group row
/// gives one row per rollout) in parallel, into a spool file in a private temp folder; a
/// line whose rows have no task ([`task_and_reward_of_line`]) or no numeric reward is dropped
/// with that reason (its original line goes to the rejects file). The spool is then read
/// once to index the rows by task (a task, a reward and two offsets per row in memory),
/// and each task's rows are read back (`pread`) to write its row, in the order the tasks
/// first appear. A task without a preference pair goes to the rejects file as the
/// `groups` row of its rollouts, with source `<tasks>` and its number in that order.
pub fn gather(
    cfg: &PipeConfig,
    sources: Vec<Source>,
    (out, rejects): (&mut dyn Write, &mut Rejects),
    convert: &(dyn Fn(&[u8], &mut Vec<u8>) -> Verdict + Sync),
    how: Gathering,
) -> anyhow::Result<Gathered> {
    let tmp = crate::io::temp::temp_dir(None, "traj-normalize-")?;
    let spool_path = tmp.path().join("rollouts.jsonl");
    let checked = |line: &[u8], buf: &mut Vec<u8>| {
        let start = buf.len();
        let v = convert(line, buf);
        if !matches!(v, Verdict::Written) {
            return v;
        }
        for row in buf[start..]
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
        {
            let why = match task_and_reward_of_line(row) {
                Some((None, _)) => Some(crate::format::groups::NO_TASK.to_string()),
                Some((_, None)) => Some("no-reward: no numeric `reward`".to_string()),
                Some(_) => None,
                None => Some("the converted row is no JSON object".to_string()),
            };
            if let Some(why) = why {
                buf.truncate(start);
                return Verdict::Dropped(vec![why]);
            }
        }
        Verdict::Written
    };
    let mut spool = std::io::BufWriter::new(std::fs::File::create(&spool_path)?);
    let lines = crate::io::process(cfg, sources, &mut spool, rejects, checked)?;
    spool
        .into_inner()
        .map_err(|e| e.into_error())?
        .sync_data()?;

    // Index the spool: each row's task, reward and place.
    let file = std::fs::File::open(&spool_path)?;
    let mut index: Gather<(u64, usize)> = Gather::default();
    let mut rollouts = 0;
    {
        let mut r = std::io::BufReader::with_capacity(crate::io::BUF_SIZE, &file);
        let mut line = Vec::new();
        let mut at = 0u64;
        loop {
            line.clear();
            let n = std::io::BufRead::read_until(&mut r, b'\n', &mut line)?;
            if n == 0 {
                break;
            }
            let tr = task_and_reward_of_line(&line[..n - 1]).ok_or_else(|| {
                anyhow::anyhow!("the spool of converted rows: a row is no JSON object")
            })?;
            if let (Some(task), Some(reward)) = tr {
                index.add(task, (at, n - 1), reward);
                rollouts += 1;
            }
            at += n as u64;
        }
    }
    let mut done = Gathered {
        lines,
        rollouts,
        tasks: index.tasks.len() as u64,
        ..Gathered::default()
    };
    let mut text = Vec::new();
    for (k, (task, places)) in index.tasks.into_iter().enumerate() {
        let mut bufs = Vec::with_capacity(places.len());
        for ((at, len), reward) in places {
            let mut buf = vec![0; len];
            file.read_exact_at(&mut buf, at)?;
            bufs.push((buf, reward));
        }
        let rows = bufs
            .iter()
            .map(|(b, r)| Ok((Members::of(b)?, *r)))
            .collect::<Result<Vec<_>, serde_json::Error>>()?;
        text.clear();
        let made = match how {
            Gathering::Groups => {
                write_group_row(&mut text, &task, &rows);
                Ok(())
            }
            Gathering::Dpo { margin } => write_dpo_row(&mut text, &task, &rows, margin),
        };
        if let Err(e) = made {
            *done.no_pair.entry(e.kind()).or_default() += 1;
            if rejects.is_kept() {
                write_group_row(&mut text, &task, &rows);
                let raw = Raw {
                    bytes: &text,
                    cr: false,
                };
                rejects.write("<tasks>", k as u64 + 1, &[e.to_string()], raw, true)?;
            }
            continue;
        }
        text.push(b'\n');
        out.write_all(&text)?;
        done.rows += 1;
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    /// A row as traj-normalize writes it to the spool.
    fn text(v: &Map<String, Value>) -> Vec<u8> {
        let mut out = Vec::new();
        pyjson::write_value(&mut out, &Value::Object(v.clone()), Style::Python);
        out
    }

    fn group_row(task: &str, rows: &[(Vec<u8>, f64)]) -> Map<String, Value> {
        let members: Vec<_> = rows
            .iter()
            .map(|(t, r)| (Members::of(t).unwrap(), *r))
            .collect();
        let mut out = Vec::new();
        write_group_row(&mut out, task, &members);
        serde_json::from_slice(&out).unwrap()
    }

    fn dpo_row(
        task: &str,
        rows: &[(Vec<u8>, f64)],
        margin: f64,
    ) -> Result<Map<String, Value>, NoPair> {
        let members: Vec<_> = rows
            .iter()
            .map(|(t, r)| (Members::of(t).unwrap(), *r))
            .collect();
        let mut out = Vec::new();
        write_dpo_row(&mut out, task, &members, margin)?;
        Ok(serde_json::from_slice(&out).unwrap())
    }

    #[test]
    fn a_group_row_reads_back_into_its_rollouts() {
        let a = obj(
            json!({"task_uid": "t:0:0", "messages": [{"role": "user", "content": "q"}],
                           "tools": [], "reward": 1}),
        );
        let b = obj(
            json!({"task_uid": "t:0:1", "messages": [{"role": "user", "content": "q"}],
                           "tools": [], "reward": 0}),
        );
        let g = group_row("t:0", &[(text(&a), 1.0), (text(&b), 0.0)]);
        assert_eq!(g["scores"], json!([1.0, 0.0]));
        assert!(is_group(&g));
        let back = rollouts(g).unwrap();
        assert_eq!(back, vec![a, b]);
        let keys: Vec<&String> = back[0].keys().collect();
        assert_eq!(keys, ["task_uid", "messages", "tools", "reward"]);
    }

    #[test]
    fn an_atropos_group_gives_one_row_per_rollout() {
        let g = obj(json!({
            "tokens": [[1, 2], [1, 3]], "masks": [[-100, 2], [-100, 3]],
            "scores": [1.0, -1.0], "advantages": null, "group_overrides": {},
            "messages": [[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
                         [{"role": "user", "content": "q"}, {"role": "assistant", "content": "b"}]]
        }));
        assert!(is_group(&g));
        let rows = rollouts(g).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1]["reward"], json!(-1.0));
        assert_eq!(rows[1]["tokens"], json!([1, 3]));
        assert_eq!(rows[1]["group_overrides"], json!({}));
        assert_eq!(rows[1]["advantages"], Value::Null);
        let uid = rows[0]["task_uid"].as_str().unwrap();
        assert!(uid.ends_with(":0:0"), "{uid}");
        assert!(!is_group(&obj(
            json!({"messages": [{"role": "user"}], "scores": [1]})
        )));
        let e = rollouts(obj(json!({"tokens": [[1]], "scores": [1.0]}))).unwrap_err();
        assert!(e.to_string().contains("without `messages`"), "{e}");
    }

    #[test]
    fn dpo_pairs_the_first_best_with_the_first_worst() {
        let row = |a: &str| {
            text(&obj(
                json!({"task_uid": a, "tools": [{"type": "function"}], "messages": [
                {"role": "system", "content": "s"}, {"role": "user", "content": "q"},
                {"role": "assistant", "content": a}]}),
            ))
        };
        let rs = vec![
            (row("t:0:0"), 0.0),
            (row("t:0:1"), 1.0),
            (row("t:0:2"), 1.0),
            (row("t:0:3"), 0.0),
        ];
        let d = dpo_row("t:0", &rs, 0.0).unwrap();
        assert_eq!(d["prompt"].as_array().unwrap().len(), 2);
        assert_eq!(
            d["chosen"],
            json!([{"role": "assistant", "content": "t:0:1"}])
        );
        assert_eq!(
            d["rejected"],
            json!([{"role": "assistant", "content": "t:0:0"}])
        );
        assert_eq!(d["tools"], json!("[{\"type\":\"function\"}]"));
        assert_eq!(
            dpo_row("t:0", &rs, 1.5).unwrap_err(),
            NoPair::Margin {
                best: 1.0,
                worst: 0.0,
                margin: 1.5
            }
        );
        let same = vec![(row("a"), 1.0), (row("b"), 1.0)];
        assert!(matches!(
            dpo_row("t", &same, 0.0),
            Err(NoPair::Margin { .. })
        ));
        assert_eq!(dpo_row("t", &same[..1], 0.0).unwrap_err(), NoPair::One(1.0));
    }
}

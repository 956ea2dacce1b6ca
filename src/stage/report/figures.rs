//! The overview as a list of figures: an id, a group, a label, a format and one value
//! per dataset. The page's tables and `--summary`'s text table show this one list, so a
//! figure reads the same in both; with two datasets (`--compare`) each row also has the
//! difference (B - A; percentage points for shares).

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::Value;

/// How a figure's value is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Fmt {
    /// A count.
    Int,
    /// A mean or other real number (one decimal).
    Num,
    /// A reward (three decimals: rewards of 0..1 differ in the second).
    Score,
    /// A share (0..1) written as a percentage.
    Pct,
    /// Dollars.
    Usd,
    /// Seconds.
    Secs,
}

/// One figure of the overview.
#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    /// Stable id (the page's `data-fig` attribute): `rows`, `tool.terminal.calls`, ...
    pub id: String,
    pub group: &'static str,
    pub label: String,
    pub fmt: Fmt,
    /// One value per dataset; `None` where the dataset has no such figure.
    pub v: Vec<Option<f64>>,
}

/// A summary object's `stat` (`sum`, `mean`) divided by its `scale` (1 when it has none).
fn scaled(d: &Value, stat: &str) -> Option<f64> {
    d[stat]
        .as_f64()
        .map(|x| x / d["scale"].as_f64().unwrap_or(1.0))
}

/// How a figure's value is read from one overview.
type Get<'a> = &'a dyn Fn(&Value) -> Option<f64>;

fn num(v: &Value) -> Option<f64> {
    v.as_f64()
}

/// The figures of `overviews` (one per dataset), groups without any value left out.
pub fn list(overviews: &[&Value]) -> Vec<Figure> {
    let mut out = Vec::new();
    let mut add = |id: &str, group, label: &str, fmt, get: Get<'_>| {
        let v: Vec<Option<f64>> = overviews.iter().map(|o| get(o)).collect();
        let (id, label) = (id.to_string(), label.to_string());
        out.push(Figure {
            id,
            group,
            label,
            fmt,
            v,
        });
    };
    let keys = |path: &[&str]| -> BTreeSet<String> {
        overviews
            .iter()
            .filter_map(|o| path.iter().try_fold(*o, |v, k| v.get(k)))
            .filter_map(Value::as_object)
            .flat_map(|m| m.keys().cloned())
            .collect()
    };
    use Fmt::*;
    let rows = "Rows";
    add("rows", rows, "rows", Int, &|o| num(&o["rows"]));
    for s in ["completed", "partial", "not completed", "unknown"] {
        add(
            &format!("status.{s}"),
            rows,
            &format!("status: {s}"),
            Int,
            &|o| Some(o["status"].get(s).and_then(Value::as_f64).unwrap_or(0.0)),
        );
    }
    add(
        "unreadable",
        rows,
        "turns not readable as a trajectory",
        Int,
        &|o| num(&o["unreadable"]),
    );
    add("bad_lines", rows, "bad lines skipped", Int, &|o| {
        num(&o["bad_lines"])
    });
    add("failures", rows, "failure lines (traj-run)", Int, &|o| {
        num(&o["failures"])
    });
    add("reject_lines", rows, "reject lines", Int, &|o| {
        num(&o["reject_lines"])
    });
    // One figure per stop reason, failure class and tombstone reason seen in any dataset
    // (0 elsewhere).
    for (map, group, prefix) in [
        ("stop_reasons", "Stop reasons", "stop"),
        ("failure_classes", "Failure classes", "class"),
        ("discarded", "Discarded prompts (tombstones)", "discarded"),
    ] {
        for s in keys(&[map]) {
            add(&format!("{prefix}.{s}"), group, &s, Int, &|o| {
                Some(o[map].get(&s).and_then(Value::as_f64).unwrap_or(0.0))
            });
        }
    }
    let rejects: BTreeSet<(String, String)> = overviews
        .iter()
        .flat_map(|o| o["rejects"].as_array().cloned().unwrap_or_default())
        .map(|r| {
            (
                r["stage"].as_str().unwrap_or("?").to_string(),
                r["reason"].as_str().unwrap_or("?").to_string(),
            )
        })
        .collect();
    for (stage, reason) in rejects {
        add(
            &format!("reject.{stage}.{reason}"),
            "Rejects",
            &format!("{stage}: {reason}"),
            Int,
            &|o| {
                Some(
                    o["rejects"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .find(|r| r["stage"] == stage.as_str() && r["reason"] == reason.as_str())
                        .and_then(|r| r["count"].as_f64())
                        .unwrap_or(0.0),
                )
            },
        );
    }
    let dist = |add: &mut dyn FnMut(&str, &'static str, &str, Fmt, Get<'_>),
                group: &'static str,
                key: &'static [&'static str],
                stats: &[&'static str],
                fmt: Fmt| {
        for s in stats {
            let get = |o: &Value| scaled(key.iter().fold(o, |v, k| &v[*k]), s);
            // Counts and quantiles of whole numbers are whole; a mean is not.
            let fmt = if fmt == Fmt::Num && *s != "mean" {
                Fmt::Int
            } else {
                fmt
            };
            add(&format!("{}.{s}", key.join(".")), group, s, fmt, &get);
        }
    };
    dist(
        &mut add,
        "Tokens per row",
        &["tokens"],
        &["mean", "p50", "p90", "p99", "max"],
        Num,
    );
    add(
        "over_budget",
        "Tokens per row",
        "over the budget",
        Int,
        &|o| num(&o["over_budget"]),
    );
    dist(
        &mut add,
        "Turns per row",
        &["turns"],
        &["mean", "p50", "max"],
        Num,
    );
    dist(
        &mut add,
        "Tool calls per row",
        &["tool_calls"],
        &["sum", "mean", "max"],
        Num,
    );
    let r = "Reasoning";
    add(
        "reasoning.assistant_turns",
        r,
        "assistant turns",
        Int,
        &|o| num(&o["reasoning"]["assistant_turns"]),
    );
    add(
        "reasoning.share",
        r,
        "assistant turns with reasoning",
        Pct,
        &|o| {
            let a = o["reasoning"]["assistant_turns"].as_f64()?;
            (a > 0.0).then(|| o["reasoning"]["with_reasoning"].as_f64().unwrap_or(0.0) / a)
        },
    );
    add("reasoning.rows", r, "rows with reasoning", Int, &|o| {
        num(&o["reasoning"]["rows_with_reasoning"])
    });
    let tools: BTreeSet<String> = overviews
        .iter()
        .flat_map(|o| o["tools"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect();
    for t in tools {
        let of = |o: &Value, k: &str| {
            o["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|x| x["name"] == t.as_str())
                .and_then(|x| x[k].as_f64())
        };
        add(
            &format!("tool.{t}.calls"),
            "Tools",
            &format!("{t}: calls"),
            Int,
            // A tool a dataset never called: 0 calls, as the stop reasons count 0.
            &|o| Some(of(o, "calls").unwrap_or(0.0)),
        );
        add(
            &format!("tool.{t}.failed"),
            "Tools",
            &format!("{t}: failed results"),
            Int,
            &|o| Some(of(o, "failed").unwrap_or(0.0)),
        );
        add(
            &format!("tool.{t}.error_rate"),
            "Tools",
            &format!("{t}: error rate"),
            Pct,
            &|o| of(o, "error_rate"),
        );
    }
    let c = "Compression";
    let comp_rows = |o: &Value| o["compression"]["rows"].as_f64().filter(|n| *n > 0.0);
    add(
        "compression.rows",
        c,
        "rows with compression metrics",
        Int,
        &|o| comp_rows(o),
    );
    add("compression.before", c, "tokens before", Int, &|o| {
        comp_rows(o).and(o["compression"]["before"]["sum"].as_f64())
    });
    add("compression.after", c, "tokens after", Int, &|o| {
        comp_rows(o).and(o["compression"]["after"]["sum"].as_f64())
    });
    add("compression.saved", c, "tokens saved", Pct, &|o| {
        let b = o["compression"]["before"]["sum"]
            .as_f64()
            .filter(|b| *b > 0.0)?;
        let a = o["compression"]["after"]["sum"].as_f64()?;
        Some((b - a) / b)
    });
    add("compression.compressed", c, "compressed", Int, &|o| {
        comp_rows(o).and(o["compression"]["compressed"].as_f64())
    });
    add(
        "compression.with_summary",
        c,
        "rows with a summary turn",
        Int,
        &|o| num(&o["compression"]["with_summary"]),
    );
    add(
        "compression.still_over",
        c,
        "still over the budget",
        Int,
        &|o| comp_rows(o).and(o["compression"]["still_over"].as_f64()),
    );
    for s in keys(&["compression", "still_over_reasons"]) {
        add(
            &format!("compression.reason.{s}"),
            c,
            &format!("still over: {s}"),
            Int,
            &|o| {
                Some(
                    o["compression"]["still_over_reasons"]
                        .get(&s)
                        .and_then(Value::as_f64)
                        .unwrap_or(0.0),
                )
            },
        );
    }
    let run = "Run";
    let run_rows = |o: &Value| o["run"]["rows"].as_f64().filter(|n| *n > 0.0);
    // Rows with any run figure (usage, API calls, time); each figure below has its own
    // rows.
    add("run.rows", run, "records with run figures", Int, &|o| {
        run_rows(o)
    });
    add("run.tokens", run, "API tokens", Int, &|o| {
        run_rows(o).and(o["run"]["tokens"]["sum"].as_f64())
    });
    add("run.cost", run, "cost", Usd, &|o| {
        scaled(&o["run"]["cost"], "sum")
    });
    add("run.cost_mean", run, "cost per prompt", Usd, &|o| {
        scaled(&o["run"]["cost"], "mean")
    });
    add("run.api_calls", run, "API calls", Int, &|o| {
        run_rows(o).and(o["run"]["api_calls"]["sum"].as_f64())
    });
    add("run.secs_mean", run, "time per prompt (mean)", Secs, &|o| {
        o["run"]["duration_ms"]["mean"].as_f64().map(|x| x / 1000.0)
    });
    add("run.secs_p90", run, "time per prompt (p90)", Secs, &|o| {
        o["run"]["duration_ms"]["p90"].as_f64().map(|x| x / 1000.0)
    });
    // The totals of each traj-run directory's own statistics.json, summed over the
    // directories of a dataset.
    let sj = "Run directory (statistics.json)";
    for (id, label, fmt, path) in [
        ("total_prompts", "prompts", Int, &["total_prompts"][..]),
        ("prompts_done", "prompts done", Int, &["prompts_done"][..]),
        (
            "prompts_failed",
            "prompts failed",
            Int,
            &["prompts_failed"][..],
        ),
        ("duration", "run time", Secs, &["duration_seconds"][..]),
        ("cost", "cost", Usd, &["usage", "cost"][..]),
    ] {
        add(&format!("statistics.{id}"), sj, label, fmt, &|o| {
            let found: Vec<f64> = o["run"]["statistics"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|st| path.iter().try_fold(st, |v, k| v.get(k))?.as_f64())
                .collect();
            (!found.is_empty()).then(|| found.iter().sum())
        });
    }
    let ro = "Rollouts";
    add("rollouts.rows", ro, "rows with a reward", Int, &|o| {
        num(&o["rollouts"]["rows"]).filter(|n| *n > 0.0)
    });
    add("rollouts.mean", ro, "mean reward", Score, &|o| {
        scaled(&o["rollouts"]["reward"], "mean")
    });
    add("rollouts.prompts", ro, "prompts", Int, &|o| {
        num(&o["rollouts"]["prompts"]).filter(|n| *n > 0.0)
    });
    for k in keys(&["rollouts", "pass_at_k"]) {
        add(
            &format!("rollouts.pass@{k}"),
            ro,
            &format!("pass@{k}"),
            Pct,
            &|o| num(&o["rollouts"]["pass_at_k"][&k]),
        );
    }
    // A group whose figures are all absent or zero says nothing; the Rows group stays.
    let shown: BTreeSet<&'static str> = out
        .iter()
        .filter(|f| f.group == rows || f.v.iter().any(|v| v.is_some_and(|x| x != 0.0)))
        .map(|f| f.group)
        .collect();
    out.retain(|f| shown.contains(f.group));
    out
}

/// `v` written as its format writes it (`-` when absent).
pub fn show(v: Option<f64>, fmt: Fmt) -> String {
    let Some(x) = v else { return "-".into() };
    match fmt {
        Fmt::Int => format!("{}", x.round() as i64),
        Fmt::Num => format!("{x:.1}"),
        Fmt::Score => format!("{x:.3}"),
        Fmt::Pct => format!("{:.1}%", x * 100.0),
        Fmt::Usd => format!("${x:.4}"),
        Fmt::Secs => format!("{x:.1}s"),
    }
}

/// B - A, written as the figure's format (percentage points for shares).
pub fn diff(v: &[Option<f64>], fmt: Fmt) -> String {
    match (v.first().copied().flatten(), v.get(1).copied().flatten()) {
        (Some(a), Some(b)) => {
            let d = b - a;
            let sign = if d > 0.0 { "+" } else { "" };
            match fmt {
                Fmt::Pct => format!("{sign}{:.1} pp", d * 100.0),
                _ => format!("{sign}{}", show(Some(d), fmt)),
            }
        }
        _ => "-".into(),
    }
}

/// `s` with its control characters escaped (`\u{1b}`, `\n`): tool names, stop reasons
/// and file names come from the data, and a terminal obeys an escape sequence.
fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return s.into();
    }
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect::<String>()
        .into()
}

/// The figures as a text table: a header of dataset names, one line per figure under
/// its group, and a difference column with two datasets (every text from the data
/// with its control characters escaped).
pub fn table(names: &[String], figs: &[Figure]) -> String {
    let names: Vec<String> = names.iter().map(|n| printable(n).into_owned()).collect();
    let labels: Vec<String> = figs
        .iter()
        .map(|f| printable(&f.label).into_owned())
        .collect();
    let label_w = labels
        .iter()
        .map(|l| l.chars().count() + 2)
        .max()
        .unwrap_or(10)
        .max(10);
    let col_w = names
        .iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(8)
        .clamp(12, 40);
    let mut s = String::new();
    let mut line = format!("{:label_w$}", "");
    for n in &names {
        line.push_str(&format!("  {n:>col_w$}"));
    }
    if names.len() == 2 {
        line.push_str(&format!("  {:>12}", "B - A"));
    }
    s.push_str(line.trim_end());
    s.push('\n');
    let mut group = "";
    for (f, label) in figs.iter().zip(&labels) {
        if f.group != group {
            group = f.group;
            s.push_str(group);
            s.push('\n');
        }
        let mut line = format!("  {label:w$}", w = label_w - 2);
        for v in &f.v {
            line.push_str(&format!("  {:>col_w$}", show(*v, f.fmt)));
        }
        if names.len() == 2 {
            line.push_str(&format!("  {:>12}", diff(&f.v, f.fmt)));
        }
        s.push_str(line.trim_end());
        s.push('\n');
    }
    s
}

//! One row as the page's viewer shows it: the system prompt apart, each turn with its
//! role, `<think>` reasoning apart from the text, tool calls as name and arguments, tool
//! results with their name, size and the success rule's verdict, and the context
//! summary marked; a message that is no turn (a tool result answering no call, a late
//! system message) as the row spells it, at its place. Texts longer than
//! [`EMBED_BYTES`] are cut in the page (the full size is shown; the data file is never
//! changed).

use serde_json::{Map, Value, json};

use super::facts::{FailureLine, RowLine};
use crate::format::model::{Outcome, Turn, classify_result};
use crate::stage::compress::row::{Row, turn_text};
use crate::stage::compress::summary::PREFIX;

/// Bytes of one text kept in the page; the rest is replaced by a note of its size.
pub const EMBED_BYTES: usize = 6000;

/// `s` cut to [`EMBED_BYTES`] (at a character boundary) with a note of what was left out.
pub fn cap(s: &str) -> String {
    if s.len() <= EMBED_BYTES {
        return s.to_string();
    }
    let mut end = EMBED_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[... {} more bytes not embedded in this page]",
        &s[..end],
        s.len() - end
    )
}

/// The facts the viewer's list and filters use.
fn header(n: u64, at: &str, rl: &RowLine) -> Map<String, Value> {
    let f = &rl.facts;
    let mut m = Map::new();
    m.insert("n".into(), n.into());
    m.insert("at".into(), at.into());
    m.insert("tokens".into(), f.tokens.into());
    m.insert("turns".into(), f.turns.into());
    m.insert("calls".into(), f.calls.into());
    m.insert("errors".into(), f.tool_errors.into());
    m.insert("status".into(), f.status().into());
    m.insert("class".into(), json!(f.stop_reason));
    m.insert("reward".into(), json!(f.reward));
    m.insert(
        "tools".into(),
        f.tools.keys().cloned().collect::<Vec<_>>().into(),
    );
    if let Some(c) = &f.compression {
        m.insert(
            "comp".into(),
            json!({"before": c.before, "after": c.after, "still_over": c.still_over,
                   "reason": c.reason}),
        );
    }
    if let Some(e) = &f.unreadable {
        m.insert("unreadable".into(), e.as_str().into());
    }
    m
}

/// A row's entry in the page.
pub fn row(n: u64, at: &str, rl: &RowLine) -> Value {
    let mut m = header(n, at, rl);
    let shape = rl.row.shape;
    let role = |t: &Value| {
        t.get(shape.role_key())
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string()
    };
    // The system messages before the first turn (a later one is shown at its place).
    let system: Vec<String> = rl
        .row
        .turns()
        .iter()
        .take_while(|t| matches!(role(t).as_str(), "system" | "developer"))
        .map(|t| turn_text(t, shape).into_owned())
        .collect();
    let system = (!system.is_empty()).then(|| system.join("\n\n"));
    // Its length as the page labels it (the embedded text may be cut).
    m.insert(
        "sysn".into(),
        json!(system.as_ref().map(|s| s.chars().count())),
    );
    m.insert("sys".into(), json!(system.as_deref().map(cap)));
    let turns: Vec<Value> = match &rl.traj {
        Ok(t) => {
            // The messages that are no turn (a tool result answering no call, a late
            // system message) at their place, as the row spells them.
            let kept = |at: usize| {
                t.messages_at(at).map(|m| {
                    let m = m.to_value();
                    json!({"r": "raw", "role": role(&m), "x": cap(&turn_text(&m, shape))})
                })
            };
            let mut out: Vec<Value> = Vec::with_capacity(t.turns.len());
            for (i, x) in t.turns.iter().enumerate() {
                out.extend(kept(i));
                out.push(turn(x));
            }
            out.extend(kept(t.turns.len()));
            out
        }
        Err(_) => raw_turns(&rl.row),
    };
    m.insert("t".into(), turns.into());
    Value::Object(m)
}

/// Turns as the row spells them (role and text), for rows whose turns are not a
/// trajectory, and for the turns a summary replaced (`--before`).
pub fn raw_turns(row: &Row) -> Vec<Value> {
    let shape = row.shape;
    row.turns()
        .iter()
        .map(|t| {
            let r = t
                .get(shape.role_key())
                .and_then(Value::as_str)
                .unwrap_or("?");
            // An entry that is no message object is shown as it is written.
            let x = match t {
                Value::Object(_) => turn_text(t, shape).into_owned(),
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            json!({"r": "raw", "role": r, "x": cap(&x)})
        })
        .collect()
}

fn turn(t: &Turn) -> Value {
    match t {
        Turn::Human(s) if s.trim_start().starts_with(PREFIX) => {
            json!({"r": "summary", "x": cap(s)})
        }
        Turn::Human(s) => json!({"r": "human", "x": cap(s)}),
        Turn::Gpt(g) => {
            let calls: Vec<Value> = g
                .tool_calls
                .iter()
                .map(|c| {
                    let args = serde_json::to_string_pretty(&c.arguments)
                        .unwrap_or_else(|_| c.arguments.to_string());
                    json!({"n": c.name, "a": cap(&args)})
                })
                .collect();
            json!({"r": "gpt", "x": cap(&g.content), "k": g.reasoning.as_deref().map(cap),
                   "kn": g.reasoning.as_ref().map(|k| k.chars().count()), "c": calls})
        }
        Turn::Tool(results) => {
            let res: Vec<Value> = results
                .iter()
                .map(|r| {
                    let text = match &r.content {
                        Value::String(s) => s.clone(),
                        v => v.to_string(),
                    };
                    json!({"n": r.name, "b": text.len(), "x": cap(&text),
                           "ok": classify_result(&r.content) == Outcome::Success})
                })
                .collect();
            json!({"r": "tool", "res": res})
        }
    }
}

/// A failure line's entry: no turns, its class and error.
pub fn failure(n: u64, at: &str, f: &FailureLine) -> Value {
    json!({
        "n": n, "at": at, "tokens": 0, "turns": 0, "calls": 0, "errors": 0,
        "status": "failed", "class": f.class, "reward": null, "tools": [],
        "sys": null, "t": [{"r": "error", "x": cap(&f.error)}],
    })
}

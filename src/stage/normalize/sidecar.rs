//! The token sidecar of `traj-normalize --token-sidecar FILE`: the sampled tokens and
//! their logprobs that `traj-run --logprobs` keeps on each assistant message
//! (`messages[i].logprobs`, the server's `choices[0].logprobs`), moved out of the rows
//! into a file of one row per token, so that the ShareGPT rows stay small.
//!
//! A sidecar row is `{"row_id", "turn", "message", "kind", "position", "token",
//! "logprob", "bytes", "top_logprobs"}`: `row_id` is the row's `task_uid` (kept on the
//! normalized row: the join key), else `SOURCE:LINE`; `turn` is the assistant message's
//! number among the row's assistant messages (0-based; the `turn`-th `gpt` turn of the
//! Hermes row), `message` its index in `messages`; `kind` the list of the logprobs
//! object it comes from (`content`, or `refusal`); `position` the token's index in that
//! list; the rest is the server's entry as it sent it (`bytes` and `top_logprobs` null
//! when it sent none), and any other member of the entry is kept in `extra` (JSON text).
//! Written as Parquet when FILE ends in `.parquet` (else JSONL), in input order.

use std::io::Write;

use serde_json::{Map, Value};

use crate::io::{Records, Select, Source};

/// The member of a message that holds its logprobs.
pub const FIELD: &str = "logprobs";

/// True when a line may hold logprobs (its text names the member): the others are not
/// parsed for them.
pub fn may_hold(line: &[u8]) -> bool {
    memchr::memmem::find(line, b"\"logprobs\"").is_some()
}

/// The logprobs taken out of one message: its index in `messages`, its number among the
/// assistant messages, and the value.
#[derive(Debug, Clone, PartialEq)]
pub struct Taken {
    pub message: usize,
    pub turn: usize,
    pub logprobs: Value,
}

/// Take the `logprobs` member out of every message of the row's `messages`, where it is
/// the OpenAI shape the sidecar holds whole: an object whose members are token lists (or
/// null). Any other value stays on its message (and in the row).
pub fn take(row: &mut Map<String, Value>) -> Vec<Taken> {
    let Some(Value::Array(msgs)) = row.get_mut("messages") else {
        return Vec::new();
    };
    let mut taken = Vec::new();
    let mut turn = 0;
    for (i, m) in msgs.iter_mut().enumerate() {
        let Value::Object(m) = m else { continue };
        let assistant = m.get("role").and_then(Value::as_str) == Some("assistant");
        let sidecar_shape = matches!(m.get(FIELD), Some(Value::Object(lp))
            if lp.values().all(|v| v.is_array() || v.is_null()));
        if sidecar_shape && let Some(lp) = m.shift_remove(FIELD) {
            taken.push(Taken {
                message: i,
                turn,
                logprobs: lp,
            });
        }
        turn += usize::from(assistant);
    }
    taken
}

/// Append the sidecar rows (JSONL) of one row's taken logprobs to `out`.
pub fn write_rows(row_id: &str, taken: &[Taken], out: &mut Vec<u8>) -> u64 {
    let mut n = 0;
    for t in taken {
        let Value::Object(lp) = &t.logprobs else {
            continue;
        };
        for (kind, list) in lp {
            let Value::Array(entries) = list else {
                continue;
            };
            for (position, e) in entries.iter().enumerate() {
                // An entry that is no object is kept whole in `extra`.
                let (mut e, other) = match e {
                    Value::Object(e) => (e.clone(), None),
                    v => (Map::new(), Some(v.to_string())),
                };
                let mut r = Map::new();
                r.insert("row_id".into(), Value::from(row_id));
                r.insert("turn".into(), Value::from(t.turn));
                r.insert("message".into(), Value::from(t.message));
                r.insert("kind".into(), Value::from(kind.as_str()));
                r.insert("position".into(), Value::from(position));
                for key in ["token", "logprob", "bytes", "top_logprobs"] {
                    r.insert(key.into(), e.shift_remove(key).unwrap_or(Value::Null));
                }
                let extra = match other {
                    Some(text) => Value::from(text),
                    None if e.is_empty() => Value::Null,
                    None => Value::from(Value::Object(e).to_string()),
                };
                r.insert("extra".into(), extra);
                serde_json::to_writer(&mut *out, &Value::Object(r)).expect("a Vec takes any write");
                out.push(b'\n');
                n += 1;
            }
        }
    }
    n
}

/// Write the sidecar rows of every row of `sources` (in input order, the lines `select`
/// keeps) to `out`; returns the tokens written. Lines that are no JSON object are left
/// to the conversion, which reports them.
pub fn write(
    sources: Vec<Source>,
    select: Option<Select>,
    out: &mut dyn Write,
) -> anyhow::Result<u64> {
    let mut r = Records::new(sources, select);
    let mut buf = Vec::new();
    let mut tokens = 0;
    while let Some(rec) = r.next_record()? {
        if !may_hold(rec.bytes) {
            continue;
        }
        let Ok(mut row) = crate::io::parse_object(rec.bytes) else {
            continue;
        };
        let taken = take(&mut row);
        if taken.is_empty() {
            continue;
        }
        let id = match row.get("task_uid").and_then(Value::as_str) {
            Some(uid) => uid.to_string(),
            None => format!("{}:{}", rec.source, rec.lineno),
        };
        buf.clear();
        tokens += write_rows(&id, &taken, &mut buf);
        out.write_all(&buf)?;
    }
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_token_of_every_assistant_message_is_a_row() {
        let mut row = json!({"task_uid": "t:0:1", "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "a", "logprobs": {"content": [
                {"token": "a", "logprob": -0.5, "bytes": [97], "top_logprobs": []}]}},
            {"role": "tool", "content": "x"},
            {"role": "assistant", "content": "bc", "logprobs": {"content": [
                {"token": "b", "logprob": -1, "bytes": [98], "top_logprobs": [], "id": 7},
                {"token": "c", "logprob": 0, "bytes": null}], "refusal": null}}
        ]})
        .as_object()
        .unwrap()
        .clone();
        let taken = take(&mut row);
        assert_eq!(taken.len(), 2);
        assert!(row["messages"][1].get("logprobs").is_none());
        assert_eq!((taken[1].message, taken[1].turn), (3, 1));
        let mut out = Vec::new();
        assert_eq!(write_rows("t:0:1", &taken, &mut out), 3);
        let rows: Vec<Value> = out
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect();
        assert_eq!(rows[1]["turn"], 1);
        assert_eq!(rows[1]["position"], 0);
        assert_eq!(rows[1]["extra"], "{\"id\":7}");
        assert_eq!(rows[2]["token"], "c");
        assert_eq!(rows[2]["top_logprobs"], Value::Null);
        // A value of another shape stays on its message: nothing is lost.
        let mut row = json!({"messages": [{"role": "assistant", "content": "a",
            "logprobs": {"content": "not a list"}}, {"role": "assistant", "logprobs": 3}]})
        .as_object()
        .unwrap()
        .clone();
        let before = row.clone();
        assert!(take(&mut row).is_empty());
        assert_eq!(row, before);
    }
}

//! Writing a row traj-compress changed: its input line, with only what changed
//! written anew.
//!
//! A compressed row keeps most of its bytes: the turns before and after the summarised
//! region, and every member but the turn list. Those are copied from the input line as
//! they came (their escapes, spacing and numbers as written); only the summary turn,
//! the turns that were changed (a system turn that got the notice, a tool output cut by
//! `--over-budget truncate`) and the members named as changed (the row's own
//! `compression_metrics`) are written, compact as serde_json writes them. A changed
//! member the line did not have is added after its last member.
//!
//! The line, which parsed, is walked once without checking it again
//! ([`crate::format::jsonscan::skip_value`]: strings 64 bytes at a time) to find the
//! spans; copying them costs far less than escaping the row's strings again.

use serde_json::Value;

use super::row::Row;
use crate::format::jsonscan::{array_items, key_text, object_members_with, skip_value};
use crate::format::pyjson::{Style, write_compact, write_compact_value, write_str};

/// Append `row`, then a newline, to `out`: `line` (the row as it came, which parsed as
/// JSON) with the turns [`Row::origin`] marks changed and the members named in
/// `changed` written from the row (members matched by their keys' text, so a key
/// written with an escape is kept as written). A line the scanner cannot walk so is
/// written whole from the row instead: the same JSON, in serde_json's spelling.
pub fn write_row(line: &[u8], row: &Row, changed: &[&str], out: &mut Vec<u8>) {
    let start = out.len();
    // A row rewritten is seldom longer than it came: room for that, at once.
    out.reserve(line.len() + 1);
    if !splice(line, row, changed, out) {
        out.truncate(start);
        write_compact(out, &row.obj);
    }
    out.push(b'\n');
}

/// One member of the line as written: its key's text (escapes decoded:
/// [`key_text`]) and its value's span.
struct Member<'b> {
    key: std::borrow::Cow<'b, [u8]>,
    value: (usize, usize),
}

fn splice(line: &[u8], row: &Row, changed: &[&str], out: &mut Vec<u8>) -> bool {
    let mut members = Vec::new();
    // The spans of the input turns, found in the same one walk of the line.
    let mut items = Vec::new();
    let walked = object_members_with(line, 0, |key, vs| {
        let key = key_text(key);
        let ve = if *key == *row.key.as_bytes() && row.origin().is_some() {
            let (spans, ve) = array_items(line, vs, |b, i| Ok(skip_value(b, i)))?;
            items = spans;
            ve
        } else {
            skip_value(line, vs)
        };
        members.push(Member {
            key,
            value: (vs, ve),
        });
        Ok(ve)
    });
    let Ok(end) = walked else {
        return false;
    };
    // Keys are matched by their text (the line parsed, so no two members share one),
    // the member written as it came, its key's escapes too.
    // Each member of the row is one of the line, but for the changed ones it adds.
    let find = |k: &str| members.iter().find(|m| *m.key == *k.as_bytes());
    let mut found = 0;
    for k in row.obj.keys() {
        if find(k).is_some() {
            found += 1;
        } else if !changed.contains(&k.as_str()) {
            return false;
        }
    }
    if found != members.len() {
        return false;
    }
    let Some(turns) = find(row.key) else {
        return false;
    };
    // The edits, in the order of the line: (span replaced, what replaces it).
    let mut edits: Vec<((usize, usize), Edit)> = Vec::new();
    if let Some(origin) = row.origin() {
        edits.push((turns.value, Edit::Turns(origin)));
    }
    for k in changed {
        if let Some(m) = find(k) {
            edits.push((m.value, Edit::Value(&row.obj[*k])));
        }
    }
    edits.sort_by_key(|(span, _)| span.0);
    // New members go after the last member, before the white space and the `}`.
    let close = members.last().map_or(end - 1, |m| m.value.1);
    let mut at = 0;
    for ((from, to), edit) in edits {
        out.extend_from_slice(&line[at..from]);
        match edit {
            Edit::Value(v) => write_compact_value(out, v),
            Edit::Turns(origin) => {
                if !write_turns(line, (from, to), &items, origin, row.turns(), out) {
                    return false;
                }
            }
        }
        at = to;
    }
    out.extend_from_slice(&line[at..close]);
    for (k, v) in &row.obj {
        if changed.contains(&k.as_str()) && find(k).is_none() {
            out.push(b',');
            write_str(out, k, Style::Python);
            out.push(b':');
            write_compact_value(out, v);
        }
    }
    out.extend_from_slice(&line[close..]);
    true
}

/// What replaces a span of the line.
enum Edit<'a> {
    /// The turn list, by the origin of each turn.
    Turns(&'a [Option<usize>]),
    /// A member's value, written whole.
    Value(&'a Value),
}

/// Write the turn list `turns` in place of the list as written (`line[list.0..list.1]`,
/// its turns at `items`): a turn that is an input turn unchanged is copied, with the
/// bytes between it and the next input turn when that one follows it; the others are
/// written.
fn write_turns(
    line: &[u8],
    list: (usize, usize),
    items: &[(usize, usize)],
    origin: &[Option<usize>],
    turns: &[Value],
    out: &mut Vec<u8>,
) -> bool {
    if origin.iter().flatten().any(|&i| i >= items.len()) {
        return false;
    }
    let n = items.len();
    // `[` and the white space before the first turn, when it is the first input turn.
    match (origin.first(), items.first()) {
        (Some(Some(0)), Some(&(s, _))) => out.extend_from_slice(&line[list.0..s]),
        _ => out.push(b'['),
    }
    for (j, turn) in turns.iter().enumerate() {
        if j > 0 {
            match (origin[j - 1], origin[j]) {
                (Some(a), Some(b)) if b == a + 1 => {
                    out.extend_from_slice(&line[items[a].1..items[b].0]);
                }
                _ => out.push(b','),
            }
        }
        match origin[j] {
            Some(i) => out.extend_from_slice(&line[items[i].0..items[i].1]),
            None => write_compact_value(out, turn),
        }
    }
    match (origin.last(), items.last()) {
        (Some(&Some(i)), Some(&(_, e))) if i == n - 1 => out.extend_from_slice(&line[e..list.1]),
        _ => out.push(b']'),
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(line: &str) -> Row {
        let obj = crate::io::parse_object(line.as_bytes()).expect("row");
        Row::locate(obj).expect("turns")
    }

    fn written(line: &str, row: &Row, changed: &[&str]) -> String {
        let mut out = Vec::new();
        write_row(line.as_bytes(), row, changed, &mut out);
        String::from_utf8(out).expect("utf-8")
    }

    /// The old writer: the whole row from its tree.
    fn whole(row: &Row) -> String {
        let mut out = Vec::new();
        write_compact(&mut out, &row.obj);
        out.push(b'\n');
        String::from_utf8(out).expect("utf-8")
    }

    fn same_json(a: &str, b: &str) {
        let a: Value = serde_json::from_str(a).expect("json");
        let b: Value = serde_json::from_str(b).expect("json");
        assert_eq!(a, b);
    }

    /// Python's spelling (`", "`, `\u00e9`, `1.50`): what is not changed keeps it.
    const LINE: &str = r#"{"id": "r\u00e9", "conversations": [ {"from": "system", "value": "s"}, {"from": "human", "value": "caf\u00e9"}, {"from": "gpt", "value": "a"}, {"from": "tool", "value": "b"}, {"from": "gpt", "value": "z", "w": 1.50} ], "n": 1e2 }"#;

    #[test]
    fn unchanged_turns_and_members_keep_their_bytes() {
        let mut r = row(LINE);
        let (turns, origin) = r.take_turns();
        let summary = json!({"from": "human", "value": "sum\u{e9}"});
        let mut t: Vec<Value> = turns.into_iter().collect();
        t.splice(1..4, [summary]);
        let o = vec![origin[0], None, origin[4]];
        r.put_turns(t, o);
        let got = written(LINE, &r, &[]);
        assert_eq!(
            got,
            "{\"id\": \"r\\u00e9\", \"conversations\": [ {\"from\": \"system\", \"value\": \"s\"},{\"from\":\"human\",\"value\":\"sumé\"},{\"from\": \"gpt\", \"value\": \"z\", \"w\": 1.50} ], \"n\": 1e2 }\n"
        );
        same_json(&got, &whole(&r));
    }

    #[test]
    fn changed_first_and_last_turns_and_new_and_old_members() {
        for (changed, with_old) in [(true, false), (true, true), (false, false)] {
            let line = if with_old {
                LINE.replace(
                    "\"n\": 1e2",
                    "\"compression_metrics\": {\"old\": 1}, \"n\": 1e2",
                )
            } else {
                LINE.to_string()
            };
            let mut r = row(&line);
            if changed {
                r.turn_mut(0)["value"] = json!("s2");
                r.turn_mut(4)["value"] = json!("z2");
            }
            r.obj.insert(
                "compression_metrics".into(),
                json!({"was_compressed": true}),
            );
            let got = written(&line, &r, &["compression_metrics"]);
            same_json(&got, &whole(&r));
            assert!(got.contains("\"id\": \"r\\u00e9\""), "{got}");
            assert!(
                got.contains("{\"from\": \"human\", \"value\": \"caf\\u00e9\"}, "),
                "{got}"
            );
            assert!(got.contains("\"n\": 1e2"), "{got}");
            if with_old {
                assert!(
                    got.contains("\"compression_metrics\": {\"was_compressed\":true}, \"n\""),
                    "{got}"
                );
            } else {
                assert!(
                    got.ends_with(",\"compression_metrics\":{\"was_compressed\":true} }\n"),
                    "{got}"
                );
            }
            if changed {
                assert!(
                    got.contains("[{\"from\":\"system\",\"value\":\"s2\"},"),
                    "{got}"
                );
                assert!(
                    got.contains(",{\"from\":\"gpt\",\"value\":\"z2\",\"w\":1.50}]"),
                    "{got}"
                );
            } else {
                assert!(got.contains("\"conversations\": [ {\"from\""), "{got}");
            }
        }
    }

    #[test]
    fn keys_written_with_escapes_are_matched_by_their_text_and_kept_as_written() {
        // serde_json reads `conversations`, `id` and `compression_metrics`.
        let line = LINE
            .replace("\"conversations\"", "\"conversation\\u0073\"")
            .replace("\"id\"", "\"\\u0069d\"")
            .replace(
                "\"n\": 1e2",
                "\"compression_\\u006detrics\": {\"old\": 1}, \"n\": 1e2",
            );
        let mut r = row(&line);
        r.turn_mut(1)["value"] = json!("x");
        r.obj
            .insert("compression_metrics".into(), json!({"new": 2}));
        let got = written(&line, &r, &["compression_metrics"]);
        same_json(&got, &whole(&r));
        for kept in [
            "{\"\\u0069d\": \"r\\u00e9\", \"conversation\\u0073\": [",
            "\"compression_\\u006detrics\": {\"new\":2}, \"n\": 1e2 }",
        ] {
            assert!(got.contains(kept), "{kept} not in {got}");
        }
    }

    #[test]
    fn every_fixture_row_spliced_reads_as_the_whole_row() {
        let mut rows = 0;
        for path in crate::fixtures::jsonl_files() {
            let text = std::fs::read_to_string(&path).expect("fixture");
            let name = path.display();
            for (k, line) in text.lines().enumerate() {
                let Ok(obj) = crate::io::parse_object(line.as_bytes()) else {
                    continue;
                };
                let Some(mut r) = Row::locate(obj) else {
                    continue;
                };
                let n = r.turns().len();
                if n < 3 {
                    continue;
                }
                let (mut turns, origin) = r.take_turns();
                turns.drain(1..n - 1);
                turns.insert(1, json!({"from": "human", "value": format!("s{k}")}));
                r.put_turns(turns, vec![origin[0], None, origin[n - 1]]);
                r.obj.insert("compression_metrics".into(), json!({"k": k}));
                let got = written(line, &r, &["compression_metrics"]);
                let want = whole(&r);
                let a: Value =
                    serde_json::from_str(&got).unwrap_or_else(|e| panic!("{name}:{}: {e}", k + 1));
                let b: Value = serde_json::from_str(&want).expect("json");
                assert_eq!(a, b, "{name}:{}", k + 1);
                rows += 1;
            }
        }
        assert!(rows > 100, "{rows} rows");
    }
}

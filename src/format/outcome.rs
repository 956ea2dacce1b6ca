//! How a row says its run ended: the `stop_reason` of a traj-run record (kept by
//! traj-normalize, which carries a row's other fields over), or the `class` of a
//! `failures.jsonl` line. Read by one pass of the fast scanner over the top-level
//! members, without building the row: `statistics.json` and `traj-filter --stats` count
//! run directories of any size with it.

use std::collections::BTreeMap;

use crate::format::jsonscan::{decode_str, object_members};

/// The stop reasons of a trajectory cut short by the provider: by the token limit, by
/// its content filter, or on a tool call it could not parse (`traj-filter
/// --no-truncated` drops them).
pub const TRUNCATED: [&str; 3] = ["length", "content_filter", "malformed_call"];

/// What one row says about its end.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// `stop_reason`, when it is a string.
    pub stop_reason: Option<String>,
    /// `class` of a failure line (a row with `class` and `prompt_hash` but no
    /// `messages`).
    pub failure_class: Option<String>,
}

/// The outcome of the JSON object `line`; `None` when it is not a valid object.
pub fn of_line(line: &[u8]) -> Option<Outcome> {
    let text = std::str::from_utf8(line).ok()?;
    let mut stop = None;
    let mut class = None;
    let (mut hash, mut turns) = (false, false);
    object_members(
        line,
        0,
        |key, vs, ve| match &*crate::format::jsonscan::key_text(key) {
            b"stop_reason" => stop = Some(&text[vs..ve]),
            b"class" => class = Some(&text[vs..ve]),
            b"prompt_hash" => hash = true,
            b"messages" | b"conversations" => turns = true,
            _ => {}
        },
    )
    .ok()?;
    let string = |raw: &str| decode_str(raw).map(|s| s.into_owned());
    Some(Outcome {
        stop_reason: stop.and_then(string),
        failure_class: class.filter(|_| hash && !turns).and_then(string),
    })
}

/// Counts of stop reasons and failure classes.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Outcomes {
    pub stop_reasons: BTreeMap<String, u64>,
    pub failure_classes: BTreeMap<String, u64>,
}

impl Outcomes {
    /// Count one row's outcome.
    pub fn add(&mut self, o: &Outcome) {
        if let Some(r) = &o.stop_reason {
            *self.stop_reasons.entry(r.clone()).or_default() += 1;
        }
        if let Some(c) = &o.failure_class {
            *self.failure_classes.entry(c.clone()).or_default() += 1;
        }
    }

    /// Add every count of `other`.
    pub fn merge(&mut self, other: Outcomes) {
        for (k, v) in other.stop_reasons {
            *self.stop_reasons.entry(k).or_default() += v;
        }
        for (k, v) in other.failure_classes {
            *self.failure_classes.entry(k).or_default() += v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_failure_lines() {
        let rec =
            br#"{"prompt_hash":"h","messages":[],"stop_reason":"content_filter","class":"x"}"#;
        let o = of_line(rec).unwrap();
        assert_eq!(o.stop_reason.as_deref(), Some("content_filter"));
        assert_eq!(
            o.failure_class, None,
            "a record's own `class` field is no failure"
        );
        let fail = br#"{"prompt_index":1,"prompt_hash":"h","class":"payment_required"}"#;
        let o = of_line(fail).unwrap();
        assert_eq!(o.failure_class.as_deref(), Some("payment_required"));
        assert_eq!(o.stop_reason, None);
        assert_eq!(
            of_line(br#"{"stop_reason": 3}"#).unwrap(),
            Outcome::default()
        );
        assert_eq!(of_line(b"{\"a\":"), None);
        let mut all = Outcomes::default();
        all.add(&of_line(rec).unwrap());
        all.add(&of_line(fail).unwrap());
        all.add(&of_line(rec).unwrap());
        assert_eq!(all.stop_reasons["content_filter"], 2);
        assert_eq!(all.failure_classes["payment_required"], 1);
    }
}

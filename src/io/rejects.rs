//! The rejects file: every line a stage did not pass on, with its location and reasons.

use std::io::Write;
use std::path::Path;

use anyhow::Result;

use super::lines::Raw;
use super::output::Output;

/// The rejects file: one JSON object per line that was not passed on.
///
/// Each reject is `{"stage", "source", "line", "reasons": [...], "raw": "<the line>",
/// "record": <the line as JSON>}`: `raw` is the exact input line (every byte before its
/// LF, a CR included) as a JSON string (`jq -r .raw` restores the lines byte for byte),
/// or `raw_base64` instead where the line is not valid UTF-8; `record` is there too
/// when the line is valid JSON by the rule every stage reads rows with
/// ([`super::json::is_json`]: no key twice, no lone surrogate, less than 128 levels),
/// so that any JSON reader reads every reject (`jq -c .record` gives back the rows,
/// `jq .record.id` reads a field).
pub struct Rejects {
    stage: &'static str,
    out: Option<Output>,
    /// Lines that went to no file ([`Rejects::lose`]).
    lost: u64,
    /// The reject being built, kept between rejects (long rows would otherwise grow a
    /// fresh buffer each time).
    buf: Vec<u8>,
}

impl Rejects {
    /// The rejects of `stage` (a binary's name or the stage's own: the `stage` field holds
    /// it without `traj-`, one spelling whichever binary wrote the file: `normalize`,
    /// `filter`, `merge`, `compress`, `sample-tools`, `run`, `report`), written to `path`
    /// (counted only when `None`).
    pub fn open(stage: &'static str, path: Option<&Path>) -> Result<Rejects> {
        let stage = stage.strip_prefix("traj-").unwrap_or(stage);
        let out = match path {
            Some(p) => Some(Output::create(Some(p))?),
            None => None,
        };
        Ok(Rejects {
            stage,
            out,
            lost: 0,
            buf: Vec::new(),
        })
    }

    /// A line not written that has no rejects file to go to: lost.
    pub fn lose(&mut self) {
        self.lost += 1;
    }

    /// The lines [`Rejects::lose`] counted.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// True when rejected lines are kept somewhere.
    pub fn is_kept(&self) -> bool {
        self.out.is_some()
    }

    /// Write one reject; `line` is the input line. `is_row`: the stage read the line as
    /// a row (a drop, a duplicate), so it is embedded as `record` without a second look.
    pub fn write(
        &mut self,
        source: &str,
        lineno: u64,
        reasons: &[String],
        line: Raw<'_>,
        is_row: bool,
    ) -> Result<()> {
        let Some(out) = self.out.as_mut() else {
            return Ok(());
        };
        self.buf.clear();
        // A row's reject embeds it as `record` unchecked: a stage that says it read the
        // line as a row must have read it by the row rule.
        debug_assert!(
            !is_row || super::json::is_json(line.bytes),
            "{source}:{lineno}: passed as a row, but not JSON by the row rule"
        );
        let record = is_row || super::json::is_json(line.bytes);
        reject_into(
            &mut self.buf,
            (self.stage, source, lineno),
            reasons,
            line,
            record,
        );
        out.write_all(&self.buf)?;
        Ok(())
    }

    /// The rejects file's output, to be committed with the stage's output
    /// ([`super::output::commit`]).
    pub(crate) fn into_output(self) -> Option<Output> {
        self.out
    }

    /// Flush and move the rejects file into place (a stage that has no other output;
    /// one that has commits both with [`super::output::commit`]).
    pub fn finish(self) -> Result<()> {
        super::output::Commit::default().rejects(self)?.done()
    }
}

/// Build one reject line (with its trailing newline), `record` as [`Rejects::write`]
/// decides it for a line not read as a row.
pub fn reject_line(
    stage: &str,
    source: &str,
    lineno: u64,
    reasons: &[String],
    line: Raw<'_>,
) -> Vec<u8> {
    let mut v = Vec::new();
    let record = super::json::is_json(line.bytes);
    reject_into(&mut v, (stage, source, lineno), reasons, line, record);
    v
}

/// Append one reject line to `v`: reserved once for the line twice over (as `raw`, a
/// little longer for its escapes, and as `record`, when `record`).
fn reject_into(
    v: &mut Vec<u8>,
    (stage, source, lineno): (&str, &str, u64),
    reasons: &[String],
    raw: Raw<'_>,
    record: bool,
) {
    let line = raw.bytes;
    v.reserve(2 * line.len() + line.len() / 8 + 256);
    v.extend_from_slice(b"{\"stage\":");
    serde_json::to_writer(&mut *v, stage).expect("write to Vec");
    v.extend_from_slice(b",\"source\":");
    serde_json::to_writer(&mut *v, source).expect("write to Vec");
    v.extend_from_slice(format!(",\"line\":{lineno},\"reasons\":").as_bytes());
    serde_json::to_writer(&mut *v, reasons).expect("write to Vec");
    match std::str::from_utf8(line) {
        Ok(text) => {
            v.extend_from_slice(b",\"raw\":");
            serde_json::to_writer(&mut *v, text).expect("write to Vec");
            if raw.cr {
                v.pop(); // the closing quote
                v.extend_from_slice(b"\\r\"");
            }
            // Only a line that is all valid JSON is embedded as such.
            if record {
                v.extend_from_slice(b",\"record\":");
                v.extend_from_slice(line);
            }
        }
        Err(_) => {
            use base64::Engine as _;
            let mut bytes = std::borrow::Cow::Borrowed(line);
            if raw.cr {
                bytes.to_mut().push(b'\r');
            }
            v.extend_from_slice(b",\"raw_base64\":\"");
            v.extend_from_slice(
                base64::engine::general_purpose::STANDARD
                    .encode(&bytes)
                    .as_bytes(),
            );
            v.push(b'"');
        }
    }
    v.extend_from_slice(b"}\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    #[test]
    fn reject_of_invalid_utf8_stays_utf8_and_keeps_the_bytes() {
        use base64::Engine as _;
        let line = b"{\"a\":\"\xff\"}";
        let r = reject_line("test", "x", 1, &["bad".to_string()], Raw::plain(line));
        let v: Value = serde_json::from_slice(&r).expect("valid UTF-8 JSON");
        assert!(v.get("raw").is_none() && v.get("record").is_none());
        let b = v["raw_base64"].as_str().unwrap();
        let back = base64::engine::general_purpose::STANDARD.decode(b).unwrap();
        assert_eq!(back, line);
        let crlf = Raw {
            bytes: line,
            cr: true,
        };
        let r = reject_line("test", "x", 1, &["bad".to_string()], crlf);
        let v: Value = serde_json::from_slice(&r).unwrap();
        let b = v["raw_base64"].as_str().unwrap();
        let back = base64::engine::general_purpose::STANDARD.decode(b).unwrap();
        assert_eq!(back, b"{\"a\":\"\xff\"}\r");
    }

    #[test]
    fn raw_restores_the_exact_line() {
        for line in [
            &b"{\"x\": 1.000, \"n\":123456789012345678901234567890}"[..],
            b"not json",
            b"[1,2",
            b"{\"a\":\"\\u00e9\"}",
        ] {
            for cr in [false, true] {
                let raw = Raw { bytes: line, cr };
                let r = reject_line("test", "x", 1, &["bad".to_string()], raw);
                let v: Value = serde_json::from_slice(&r).unwrap();
                let mut want = line.to_vec();
                want.extend(cr.then_some(b'\r'));
                assert_eq!(v["raw"].as_str().unwrap().as_bytes(), want);
                let is_json = serde_json::from_slice::<Value>(line).is_ok();
                assert_eq!(v.get("record").is_some(), is_json, "{v}");
            }
        }
    }

    /// JSON that the row rule refuses is not embedded: every reject stays readable.
    #[test]
    fn record_only_for_json_by_the_row_rule() {
        let deep = format!("{{\"d\":{}{}}}", "[".repeat(200), "]".repeat(200));
        for line in [
            &br#"{"a":"\ud800"}"#[..],
            br#"{"a":1,"a":2}"#,
            deep.as_bytes(),
        ] {
            let r = reject_line("test", "x", 1, &["bad".to_string()], Raw::plain(line));
            let v: Value = serde_json::from_slice(&r).unwrap();
            assert!(v.get("record").is_none(), "{v}");
            assert_eq!(v["raw"].as_str().unwrap().as_bytes(), line);
        }
    }
}

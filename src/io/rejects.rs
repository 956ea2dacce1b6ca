//! The rejects file: every line a stage did not pass on, with its location and reasons.

use std::io::Write;
use std::path::Path;

use anyhow::Result;

use super::output::Output;

/// The rejects file: one JSON object per line that was not passed on.
///
/// Each reject is `{"stage", "source", "line", "reasons": [...], "record": <the input
/// row>}`; a line that is not JSON is kept as text under `"raw"` instead of `"record"`.
/// `jq -c .record rejects.jsonl` gives back the rejected rows unchanged.
pub struct Rejects {
    stage: &'static str,
    out: Option<Output>,
}

impl Rejects {
    pub fn open(stage: &'static str, path: Option<&Path>) -> Result<Rejects> {
        let out = match path {
            Some(p) => Some(Output::create(Some(p))?),
            None => None,
        };
        Ok(Rejects { stage, out })
    }

    /// True when rejected lines are kept somewhere.
    pub fn is_kept(&self) -> bool {
        self.out.is_some()
    }

    /// Write one reject; `line` is the raw input line.
    pub fn write(
        &mut self,
        source: &str,
        lineno: u64,
        reasons: &[String],
        line: &[u8],
    ) -> Result<()> {
        let Some(out) = self.out.as_mut() else {
            return Ok(());
        };
        out.write_all(&reject_line(self.stage, source, lineno, reasons, line))?;
        Ok(())
    }

    /// Flush and move the rejects file into place.
    pub fn finish(self) -> Result<()> {
        if let Some(out) = self.out {
            out.commit()?;
        }
        Ok(())
    }
}

/// Build one reject line (with its trailing newline).
pub fn reject_line(
    stage: &str,
    source: &str,
    lineno: u64,
    reasons: &[String],
    line: &[u8],
) -> Vec<u8> {
    let mut v = Vec::with_capacity(line.len() + 128);
    v.extend_from_slice(b"{\"stage\":");
    serde_json::to_writer(&mut v, stage).expect("write to Vec");
    v.extend_from_slice(b",\"source\":");
    serde_json::to_writer(&mut v, source).expect("write to Vec");
    v.extend_from_slice(format!(",\"line\":{lineno},\"reasons\":").as_bytes());
    serde_json::to_writer(&mut v, reasons).expect("write to Vec");
    // Kept as JSON only when it is valid UTF-8 JSON: serde skips strings it ignores
    // without checking their UTF-8, and a rejects file must stay valid UTF-8.
    let is_json = !line.is_empty()
        && std::str::from_utf8(line).is_ok()
        && serde_json::from_slice::<serde::de::IgnoredAny>(line).is_ok();
    if is_json {
        v.extend_from_slice(b",\"record\":");
        v.extend_from_slice(line);
    } else {
        v.extend_from_slice(b",\"raw\":");
        serde_json::to_writer(&mut v, &String::from_utf8_lossy(line)).expect("write to Vec");
    }
    v.extend_from_slice(b"}\n");
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    #[test]
    fn reject_of_invalid_utf8_stays_utf8() {
        let line = b"{\"a\":\"\xff\"}";
        let r = reject_line("test", "x", 1, &["bad".to_string()], line);
        let v: Value = serde_json::from_slice(&r).expect("valid UTF-8 JSON");
        assert_eq!(v["raw"], "{\"a\":\"\u{fffd}\"}");
    }
}

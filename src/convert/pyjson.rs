//! JSON written the way Python's `json.dumps(v, ensure_ascii=False)` writes it, so that
//! traj's rows are byte-identical to the reference's: `", "` between items, `": "` after
//! keys, non-ASCII as is, and floats as Python's `repr` (`1e-05`, `1e+16`, `100.0`).
//!
//! [`Style::Envelope`] additionally writes the closing tags of the Hermes envelope that
//! occur inside JSON strings (`</think>`, `</tool_call>`, `</tool_response>`,
//! `</tools>`) as `<\/...`: the same string to any JSON parser, but no longer a tag to a
//! text scanner. Used for the JSON bodies inside tags, never for whole rows.

use std::io::{self, Write};

use serde::Serialize;
use serde_json::Value;

/// How strings are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Exactly `json.dumps(v, ensure_ascii=False)`.
    Python,
    /// As `Python`, with envelope closing tags inside strings escaped as `<\/`.
    Envelope,
}

/// The closing tags that must not appear literally inside a JSON body of the envelope.
pub const CLOSING_TAGS: [&str; 4] = ["</think>", "</tool_call>", "</tool_response>", "</tools>"];

struct PyFormatter {
    style: Style,
}

impl serde_json::ser::Formatter for PyFormatter {
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }

    fn write_f64<W: ?Sized + Write>(&mut self, w: &mut W, value: f64) -> io::Result<()> {
        w.write_all(py_float(value).as_bytes())
    }

    fn write_f32<W: ?Sized + Write>(&mut self, w: &mut W, value: f32) -> io::Result<()> {
        w.write_all(py_float(value as f64).as_bytes())
    }

    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        if self.style == Style::Python || !fragment.contains("</") {
            return w.write_all(fragment.as_bytes());
        }
        // A tag never spans two fragments: fragments are split only at escaped
        // characters, and tags hold none.
        let b = fragment.as_bytes();
        let mut start = 0;
        let mut i = 0;
        while let Some(off) = memchr::memmem::find(&b[i..], b"</") {
            let at = i + off;
            let rest = &fragment[at..];
            if CLOSING_TAGS.iter().any(|t| rest.starts_with(t)) {
                w.write_all(&b[start..at + 1])?;
                w.write_all(b"\\")?;
                start = at + 1;
            }
            i = at + 2;
        }
        w.write_all(&b[start..])
    }
}

/// Python's `repr(float)`: the shortest digits that round-trip, in fixed notation for
/// exponents -4..16 (with `.0` when integral) and `1.5e-05` / `1e+16` otherwise.
pub fn py_float(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let sci = format!("{x:e}"); // shortest round-trip digits, e.g. "-1.25e-7"
    let (mant, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("integer exponent");
    let (neg, mant) = match mant.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mant),
    };
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    let mut out = String::with_capacity(digits.len() + 8);
    if neg {
        out.push('-');
    }
    if (-4..16).contains(&exp) {
        if exp < 0 {
            out.push_str("0.");
            for _ in 0..(-exp - 1) {
                out.push('0');
            }
            out.push_str(&digits);
        } else {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                out.push_str(&digits);
                for _ in digits.len()..int_len {
                    out.push('0');
                }
                out.push_str(".0");
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", exp.abs()));
    }
    out
}

/// Append `v` to `out` in the given style.
pub fn write_value(out: &mut Vec<u8>, v: &impl Serialize, style: Style) {
    let mut ser = serde_json::Serializer::with_formatter(out, PyFormatter { style });
    v.serialize(&mut ser)
        .expect("serialising a JSON value into memory cannot fail");
}

/// `v` as a string in the given style.
pub fn to_string(v: &impl Serialize, style: Style) -> String {
    let mut out = Vec::with_capacity(128);
    write_value(&mut out, v, style);
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// Append `s` as a JSON string (Python style) to `out`.
pub fn write_str(out: &mut Vec<u8>, s: &str, style: Style) {
    write_value(out, &s, style);
}

/// Convenience: a [`Value`] in Python style.
pub fn dumps(v: &Value) -> String {
    to_string(v, Style::Python)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn separators_and_unicode_match_python() {
        let v = json!({"a": [1, 2, {"b": null}], "é": "ü\n\t\"\\\u{1f}", "e": {}, "l": []});
        assert_eq!(
            dumps(&v),
            r#"{"a": [1, 2, {"b": null}], "é": "ü\n\t\"\\\u001f", "e": {}, "l": []}"#
        );
    }

    #[test]
    fn floats_match_python_repr() {
        let cases = [
            (1.0, "1.0"),
            (100.0, "100.0"),
            (0.1, "0.1"),
            (1e-5, "1e-05"),
            (1.5e-5, "1.5e-05"),
            (0.0001, "0.0001"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (-0.0, "-0.0"),
            (-2.5, "-2.5"),
            (8.8, "8.8"),
            (1e300, "1e+300"),
            (5e-324, "5e-324"),
        ];
        for (x, want) in cases {
            assert_eq!(py_float(x), want, "{x:e}");
        }
    }

    #[test]
    fn envelope_style_escapes_only_closing_tags() {
        let v = json!("a</tool_response>b</div></think></tools></tool_call>");
        assert_eq!(
            to_string(&v, Style::Envelope),
            r#""a<\/tool_response>b</div><\/think><\/tools><\/tool_call>""#
        );
        let back: Value = serde_json::from_str(&to_string(&v, Style::Envelope)).unwrap();
        assert_eq!(back, v);
        assert_eq!(
            to_string(&v, Style::Python),
            r#""a</tool_response>b</div></think></tools></tool_call>""#
        );
    }
}

//! JSON written the way Python's `json.dumps(v, ensure_ascii=False)` writes it, so that
//! traj's rows are byte-identical to the reference's: `", "` between items, `": "` after
//! keys, non-ASCII as is, and floats as Python's `repr` (`1e-05`, `1e+16`, `100.0`).
//!
//! [`Style::Envelope`] additionally writes the closing tags of the Hermes envelope that
//! occur inside JSON strings (`</think>`, `</tool_call>`, `</tool_response>`,
//! `</tools>`) as `<\/...`: the same string to any JSON parser, but no longer a tag to a
//! text scanner. Used for the JSON bodies inside tags, never for whole rows.

use std::io::Write;

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

/// Append `s` as a JSON string literal. Plain bytes are skipped 16 at a time; the
/// first byte needing attention in a word is found with `trailing_zeros`.
pub fn write_str(out: &mut Vec<u8>, s: &str, style: Style) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    escape_into(out, s.as_bytes(), style == Style::Envelope, false);
    out.push(b'"');
}

/// Append `s` escaped for the inside of a JSON string literal (no quotes).
pub fn write_str_body(out: &mut Vec<u8>, s: &str) {
    escape_into(out, s.as_bytes(), false, false);
}

/// Append the JSON string literal of `s`, escaped once more for the inside of an outer
/// JSON string: what `write_str_body(json(s))` gives, in one pass.
pub fn write_str_nested(out: &mut Vec<u8>, s: &str, style: Style) {
    out.reserve(s.len() + 4);
    out.extend_from_slice(b"\\\"");
    escape_into(out, s.as_bytes(), style == Style::Envelope, true);
    out.extend_from_slice(b"\\\"");
}

/// Append the JSON text of `v`, escaped for the inside of an outer JSON string, in one
/// pass (no intermediate string).
pub fn write_value_nested(out: &mut Vec<u8>, v: &Value, style: Style) {
    write_any::<true>(out, v, style);
}

/// The escaping loop. `lt`: escape closing tags as `<\/`; `nested`: escape the escapes
/// once more (for JSON text inside a JSON string).
fn escape_into(out: &mut Vec<u8>, b: &[u8], lt: bool, nested: bool) {
    let mut start = 0;
    let mut i = 0;
    loop {
        // Find the next byte needing attention, from i, 16 bytes at a time.
        let also = lt.then_some(b'<');
        while i + 16 <= b.len() {
            let chunk: &[u8; 16] = b[i..i + 16].try_into().expect("16 bytes");
            let m = crate::format::jsonscan::needs_escape16(chunk, also);
            if m == 0 {
                i += 16;
            } else {
                i += m.trailing_zeros() as usize;
                break;
            }
        }
        if i + 16 > b.len() {
            while i < b.len() && !needs_attention(b[i], lt) {
                i += 1;
            }
        }
        if i >= b.len() {
            break;
        }
        let c = b[i];
        let buf: [u8; 6];
        let esc: &[u8] = match c {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0..=0x1f => {
                let hex = b"0123456789abcdef";
                buf = [
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    hex[(c >> 4) as usize],
                    hex[(c & 15) as usize],
                ];
                &buf
            }
            _ => {
                // '<' in envelope style: escape the slash of a closing tag.
                if b[i + 1..].starts_with(b"/")
                    && CLOSING_TAGS
                        .iter()
                        .any(|t| b[i..].starts_with(t.as_bytes()))
                {
                    out.extend_from_slice(&b[start..=i]);
                    out.extend_from_slice(if nested { b"\\\\" } else { b"\\" });
                    start = i + 1;
                }
                i += 1;
                continue;
            }
        };
        out.extend_from_slice(&b[start..i]);
        if nested {
            for &x in esc {
                if x == b'\\' || x == b'"' {
                    out.push(b'\\');
                }
                out.push(x);
            }
        } else {
            out.extend_from_slice(esc);
        }
        i += 1;
        start = i;
    }
    out.extend_from_slice(&b[start..]);
}

#[inline(always)]
fn needs_attention(c: u8, lt: bool) -> bool {
    c < 0x20 || c == b'"' || c == b'\\' || (lt && c == b'<')
}

/// Append `v` to `out` in the given style.
pub fn write_value(out: &mut Vec<u8>, v: &Value, style: Style) {
    write_any::<false>(out, v, style);
}

/// The one value writer behind [`write_value`] and [`write_value_nested`]: `NESTED`
/// only changes how strings (and keys) are written, since null, booleans and numbers
/// hold nothing to escape. A const parameter, so each form compiles to its own loop.
fn write_any<const NESTED: bool>(out: &mut Vec<u8>, v: &Value, style: Style) {
    let string = |out: &mut Vec<u8>, s: &str| {
        if NESTED {
            write_str_nested(out, s, style);
        } else {
            write_str(out, s, style);
        }
    };
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        // Every number as it was written (serde_json's `arbitrary_precision`): never
        // through f64, which would change long decimals and large integers.
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Value::String(s) => string(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, it) in items.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(b", ");
                }
                write_any::<NESTED>(out, it, style);
            }
            out.push(b']');
        }
        Value::Object(m) => {
            out.push(b'{');
            for (i, (k, it)) in m.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(b", ");
                }
                string(out, k);
                out.extend_from_slice(b": ");
                write_any::<NESTED>(out, it, style);
            }
            out.push(b'}');
        }
    }
}

/// `v` as a string in the given style.
pub fn to_string(v: &Value, style: Style) -> String {
    let mut out = Vec::with_capacity(128);
    write_value(&mut out, v, style);
    String::from_utf8(out).expect("valid UTF-8 in, valid UTF-8 out")
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
    fn escaping_matches_serde_on_every_byte_class() {
        let mut s = String::new();
        for c in (0u32..0x80).chain([0xe9, 0x2028, 0x1f600]) {
            s.push(char::from_u32(c).unwrap());
            s.push_str("abcdefgh");
        }
        let ours = to_string(&Value::String(s.clone()), Style::Python);
        assert_eq!(ours, serde_json::to_string(&s).unwrap());
    }

    #[test]
    fn nested_writing_equals_escaping_twice() {
        let v =
            json!({"a\"": ["x\n\\y", 1.5, null, "</tool_response> \u{1} é"], "b": {"c": r"<\/"}});
        for style in [Style::Python, Style::Envelope] {
            let inner = to_string(&v, style);
            let mut twice = Vec::new();
            write_str_body(&mut twice, &inner);
            let mut once = Vec::new();
            write_value_nested(&mut once, &v, style);
            assert_eq!(
                String::from_utf8(once).unwrap(),
                String::from_utf8(twice).unwrap()
            );
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

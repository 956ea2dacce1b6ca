//! JSON written the way Python's `json.dumps(v, ensure_ascii=False)` writes it, so that
//! traj's rows are byte-identical to the reference's: `", "` between items, `": "` after
//! keys, non-ASCII as is, and floats as Python's `repr` (`1e-05`, `1e+16`, `100.0`).
//!
//! [`write_compact`] writes serde_json's own compact form (`serde_json::to_writer`,
//! byte for byte) with the same escaping loop, for whole rows.
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
    write_any::<true, false>(out, v, style);
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
    write_any::<false, false>(out, v, style);
}

/// Append the object `m` as `serde_json::to_writer` writes it: no white space,
/// serde_json's escapes. The escaping loop skips plain bytes 16 at a time, where
/// serde_json looks at each byte.
pub fn write_compact(out: &mut Vec<u8>, m: &serde_json::Map<String, Value>) {
    write_object::<false, true>(out, m, Style::Python);
}

/// Append the value `v` as [`write_compact`] writes the values of an object.
pub fn write_compact_value(out: &mut Vec<u8>, v: &Value) {
    write_any::<false, true>(out, v, Style::Python);
}

/// The one value writer behind [`write_value`], [`write_value_nested`] and
/// [`write_compact`]: `NESTED` only changes how strings (and keys) are written, since
/// null, booleans and numbers hold nothing to escape; `COMPACT` drops the space after
/// `,` and `:`. Const parameters, so each form compiles to its own loop.
fn write_any<const NESTED: bool, const COMPACT: bool>(out: &mut Vec<u8>, v: &Value, style: Style) {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        // Every number as it was written (serde_json's `arbitrary_precision`): never
        // through f64, which would change long decimals and large integers.
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Value::String(s) => write_string::<NESTED>(out, s, style),
        Value::Array(items) => {
            out.push(b'[');
            for (i, it) in items.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(if COMPACT { b"," } else { b", " });
                }
                write_any::<NESTED, COMPACT>(out, it, style);
            }
            out.push(b']');
        }
        Value::Object(m) => write_object::<NESTED, COMPACT>(out, m, style),
    }
}

fn write_object<const NESTED: bool, const COMPACT: bool>(
    out: &mut Vec<u8>,
    m: &serde_json::Map<String, Value>,
    style: Style,
) {
    out.push(b'{');
    for (i, (k, it)) in m.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(if COMPACT { b"," } else { b", " });
        }
        write_string::<NESTED>(out, k, style);
        out.extend_from_slice(if COMPACT { b":" } else { b": " });
        write_any::<NESTED, COMPACT>(out, it, style);
    }
    out.push(b'}');
}

fn write_string<const NESTED: bool>(out: &mut Vec<u8>, s: &str, style: Style) {
    if NESTED {
        write_str_nested(out, s, style);
    } else {
        write_str(out, s, style);
    }
}

/// True when `text` is one JSON value written exactly as [`write_value`] in
/// [`Style::Python`] writes the value it parses to: then `text` itself is the output, and
/// parsing it only to write it again can be skipped.
///
/// Checks the whole grammar (so nothing else need have validated `text`): `", "` and
/// `": "` as the only separators and no other white space; strings with only the escapes
/// [`escape_into`] makes (`\"`, `\\`, `\n`, `\r`, `\t`, `\b`, `\f`, `\u00xx` for
/// the other control bytes, lowercase) and every control byte escaped; numbers without an
/// exponent (an exponent is rewritten by the parser: `1e5` reads back as `1e+5`); no
/// object with a key twice (keys in this one spelling are equal only when their bytes
/// are) nor with 256 keys or more; at most `max_depth` arrays and objects inside one another. False on anything
/// else, which then takes the parse-and-write path.
pub fn writes_as_is(text: &str, max_depth: usize) -> bool {
    as_is_prefix(text, max_depth) == Some(text.len())
}

/// The length of the value at the start of `text` when [`writes_as_is`] holds for it
/// (whatever follows it).
pub fn as_is_prefix(text: &str, max_depth: usize) -> Option<usize> {
    let mut c = Canon {
        b: text.as_bytes(),
        i: 0,
        keys: Vec::new(),
    };
    c.value(max_depth).then_some(c.i)
}

/// The offset just after the string whose opening quote is `b[i]`, when that string is
/// written exactly as [`write_str`] in [`Style::Python`] writes what it decodes to (so
/// its text between the quotes can be copied to the output as it is); `None` otherwise
/// (another spelling, or not a valid string).
pub fn as_is_string_end(b: &[u8], i: usize) -> Option<usize> {
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let mut c = Canon {
        b,
        i,
        keys: Vec::new(),
    };
    c.string().then_some(c.i)
}

/// serde_json's private key for a number kept as text, as a JSON string.
const NUMBER_KEY: &[u8] = b"\"$serde_json::private::Number\"";

/// The scanner behind [`writes_as_is`]: `i` is the next byte; `keys` holds the keys of
/// the objects being read, innermost last.
struct Canon<'a> {
    b: &'a [u8],
    i: usize,
    keys: Vec<&'a [u8]>,
}

impl<'a> Canon<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    /// Step over `lit` when it is next.
    fn eat(&mut self, lit: &[u8]) -> bool {
        let ok = self.b[self.i..].starts_with(lit);
        if ok {
            self.i += lit.len();
        }
        ok
    }

    fn value(&mut self, depth: usize) -> bool {
        match self.peek() {
            Some(b'"') => self.string(),
            Some(b'[') if depth > 0 => {
                self.i += 1;
                if self.eat(b"]") {
                    return true;
                }
                loop {
                    if !self.value(depth - 1) {
                        return false;
                    }
                    if self.eat(b"]") {
                        return true;
                    }
                    if !self.eat(b", ") {
                        return false;
                    }
                }
            }
            Some(b'{') if depth > 0 => {
                self.i += 1;
                if self.eat(b"}") {
                    return true;
                }
                let mark = self.keys.len();
                loop {
                    let start = self.i;
                    if self.peek() != Some(b'"') || !self.string() {
                        return false;
                    }
                    let key = &self.b[start..self.i];
                    // (A very wide object is left to the parser's duplicate check.)
                    if self.keys.len() - mark >= 256 || self.keys[mark..].contains(&key) {
                        return false;
                    }
                    // An object whose first key is serde_json's private number key
                    // parses to a number (`arbitrary_precision`): not written as it is.
                    if self.keys.len() == mark && key == NUMBER_KEY {
                        return false;
                    }
                    self.keys.push(key);
                    if !self.eat(b": ") || !self.value(depth - 1) {
                        return false;
                    }
                    if self.eat(b"}") {
                        self.keys.truncate(mark);
                        return true;
                    }
                    if !self.eat(b", ") {
                        return false;
                    }
                }
            }
            Some(b'n') => self.eat(b"null"),
            Some(b't') => self.eat(b"true"),
            Some(b'f') => self.eat(b"false"),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => false,
        }
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?`, not followed by an exponent.
    fn number(&mut self) -> bool {
        let digits = |c: &mut Canon| {
            let s = c.i;
            while c.peek().is_some_and(|d| d.is_ascii_digit()) {
                c.i += 1;
            }
            c.i - s
        };
        self.eat(b"-");
        match self.peek() {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => {
                digits(self);
            }
            _ => return false,
        }
        if self.eat(b".") && digits(self) == 0 {
            return false;
        }
        !matches!(self.peek(), Some(b'e' | b'E' | b'0'..=b'9'))
    }

    /// A string at `i` (its opening quote), in the one spelling [`escape_into`] writes
    /// ([`crate::format::jsonscan::scan_string_spelling`]).
    fn string(&mut self) -> bool {
        match crate::format::jsonscan::scan_string_spelling(self.b, self.i + 1) {
            Ok((end, true)) => {
                self.i = end;
                true
            }
            _ => false,
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

    /// Every ASCII byte and a few longer characters, each followed by `filler`.
    fn every_byte_class(filler: &str) -> String {
        let mut s = String::new();
        for c in (0u32..0x80).chain([0xe9, 0x2028, 0x1f600]) {
            s.push(char::from_u32(c).unwrap());
            s.push_str(filler);
        }
        s
    }

    #[test]
    fn escaping_matches_serde_on_every_byte_class() {
        let s = every_byte_class("abcdefgh");
        let ours = to_string(&Value::String(s.clone()), Style::Python);
        assert_eq!(ours, serde_json::to_string(&s).unwrap());
    }

    /// `write_compact` is `serde_json::to_writer`, byte for byte: every byte class in
    /// keys and values, numbers as written, nesting, and every row of the fixtures.
    #[test]
    fn compact_writing_equals_serde_json() {
        let s = every_byte_class("abcdefghijklmnopq");
        let numbers: Value = serde_json::from_str(
            r#"[0, -1, 1.50, 1e400, 12345678901234567890123456789, -0.0, 2E-7]"#,
        )
        .unwrap();
        let v = json!({s.clone(): [s, numbers, {}, [], null, true, false, {"a": {"b": [1]}}]});
        let mut rows = vec![v.as_object().unwrap().clone()];
        for p in crate::fixtures::jsonl_files() {
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            rows.extend(text.lines().filter_map(|l| serde_json::from_str(l).ok()));
        }
        assert!(rows.len() > 100, "{} rows", rows.len());
        for m in &rows {
            let mut ours = Vec::new();
            write_compact(&mut ours, m);
            assert_eq!(ours, serde_json::to_vec(m).unwrap());
        }
        // A value on its own, as serde_json writes it.
        for v in [&v, &numbers, &json!([{"k": "v\n"}, "s", 1])] {
            let mut ours = Vec::new();
            write_compact_value(&mut ours, v);
            assert_eq!(ours, serde_json::to_vec(v).unwrap());
        }
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

    /// `writes_as_is` says yes exactly when parsing and writing gives the same text.
    #[test]
    fn writes_as_is_agrees_with_parse_and_write() {
        let cases = [
            r#"{"a": [1, 2, {"b": null}], "é": "ü\n\t\"\\\u001f", "e": {}, "l": []}"#,
            r#"{"a":1}"#,
            r#"{"a": 1,"b": 2}"#,
            r#"[1, 2 ]"#,
            r#" 1"#,
            r#"{"a": 1, "a": 2}"#,
            r#"{"a": {"k": 1}, "b": {"k": 2}}"#,
            r#""x\/y""#,
            r#""\u00e9""#,
            r#""\u000a""#,
            r#""\u001F""#,
            r#""\u001f\u0000\u0008""#,
            r#""\b\f\r""#,
            "\"tab\there\"",
            r#"[-0, 0.0, 1.50, -12.000, 123456789012345678901234567890, 7]"#,
            r#"[1e5, 1E5, 1.5e-3]"#,
            r#"[01]"#,
            r#"[1.]"#,
            r#"[-]"#,
            r#"[true, false, null]"#,
            r#"[tru]"#,
            r#""unterminated"#,
            r#""a" "b""#,
            "[[[[1]]]]",
            // serde_json's private number key: a number when it comes first.
            r#"{"$serde_json::private::Number": "1"}"#,
            r#"{"b": 1, "$serde_json::private::Number": "1"}"#,
        ];
        for text in cases {
            let parsed: Option<Value> = serde_json::from_str(text).ok();
            let round = parsed.as_ref().map(|v| to_string(v, Style::Python));
            let same = round.as_deref() == Some(text);
            let dup = text.contains(r#""a": 1, "a": 2"#);
            if dup {
                assert!(!writes_as_is(text, 100), "{text}");
                continue;
            }
            // An exponent is refused even where it would round-trip.
            if same || !text.contains(['e', 'E']) || text.starts_with('"') {
                assert_eq!(writes_as_is(text, 100), same, "{text}");
            } else {
                assert!(!writes_as_is(text, 100), "{text}");
            }
        }
        assert!(writes_as_is("[[[[1]]]]", 4));
        assert!(!writes_as_is("[[[[1]]]]", 3));
        let long = format!("\"{}\\n{}\"", "x".repeat(100), "é".repeat(40));
        assert!(writes_as_is(&long, 1));
        assert!(!writes_as_is(&long[..long.len() - 1], 1));
    }

    /// `as_is_string_end` (the 64-byte scanner's spelling check) says yes exactly when
    /// decoding the string and writing it again gives the same text, on strings of
    /// every escape, placed across the scanner's block boundaries.
    #[test]
    fn as_is_string_agrees_with_decode_and_write() {
        let pieces = [
            "a",
            "bcdefgh",
            "é",
            "\u{2028}",
            "\u{7f}",
            r"\n",
            r"\r",
            r"\t",
            r"\b",
            r"\f",
            r#"\""#,
            r"\\",
            r"\/",
            r"\u0001",
            r"\u001f",
            r"\u001F",
            r"\u000a",
            r"\u0008",
            r"\u00e9",
            r"\u0041",
            r"\ud83d\ude00",
            r"\\n",
            r"\\\n",
            r"\u0000",
            "<",
        ];
        let mut rng = fastrand::Rng::with_seed(18);
        let mut as_is = 0;
        for _ in 0..20_000 {
            let mut body = String::new();
            let n = rng.usize(0..24);
            for _ in 0..n {
                if rng.u8(..) < 40 {
                    body.push_str(&"x".repeat(rng.usize(0..70)));
                }
                body.push_str(pieces[rng.usize(..pieces.len())]);
            }
            let text = format!("\"{body}\"");
            let decoded: String = serde_json::from_str(&text).expect("valid by construction");
            let same = to_string(&Value::String(decoded), Style::Python) == text;
            as_is += usize::from(same);
            assert_eq!(
                as_is_string_end(text.as_bytes(), 0),
                same.then_some(text.len()),
                "{text}"
            );
            // Followed by more text: the same answer, the same end.
            let more = format!("{text}, \"z\"");
            assert_eq!(
                as_is_string_end(more.as_bytes(), 0),
                same.then_some(text.len()),
                "{more}"
            );
        }
        assert!((2_000..18_000).contains(&as_is), "{as_is} of 20000 as is");
        for bad in ["\"a\u{1}b\"", r#""\x""#, r#""\ud800""#, r#""abc"#, "x"] {
            assert_eq!(as_is_string_end(bad.as_bytes(), 0), None, "{bad}");
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

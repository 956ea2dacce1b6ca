//! Fast JSON validation and string decoding without building values.
//!
//! traj-filter's pass-through path validates every row it keeps, and its predicates walk
//! rows as raw JSON text; both spend most of their time inside JSON strings (tool output
//! embedded as JSON: a backslash every few bytes). So strings are scanned 64 bytes at a
//! time from bit masks of quotes, backslashes and control bytes (SSE2 through
//! `safe_arch` on x86-64, SWAR elsewhere), the simdjson way; the structure outside
//! strings, a small part of the bytes, is walked with an explicit stack.
//!
//! This module walks the structure (objects, arrays, numbers, keys, the skipper of
//! valid text); [`string`] owns what a JSON string is, [`simd`] the bit masks its
//! scanner reads.

mod simd;
mod string;

pub(crate) use simd::needs_escape16;
pub(crate) use string::scan_string;
use string::skip_string;
pub use string::{decode_str, scan_string_spelling};

/// A raw key (validated, without quotes) as its text: decoded when it is written with an
/// escape (`"\u0063onversations"` is `conversations` to every JSON reader), borrowed
/// as it is otherwise. Every stage that looks keys up by name reads them through this.
#[inline]
pub fn key_text(raw: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if !has_escape(raw) {
        return std::borrow::Cow::Borrowed(raw);
    }
    let quoted = [&b"\""[..], raw, b"\""].concat();
    match std::str::from_utf8(&quoted).ok().and_then(decode_str) {
        Some(k) => std::borrow::Cow::Owned(k.into_owned().into_bytes()),
        None => std::borrow::Cow::Borrowed(raw),
    }
}

/// Walk the members of the object at `b[i..]`, validating every value; `f` gets each
/// key (raw, without quotes) and its value's span. Returns the offset after the object.
pub(crate) fn object_members<'b>(
    b: &'b [u8],
    i: usize,
    mut f: impl FnMut(&'b [u8], usize, usize),
) -> Result<usize, usize> {
    object_members_with(b, i, |key, vs| {
        let ve = scan_value_at(b, vs, 1)?;
        f(key, vs, ve);
        Ok(ve)
    })
}

/// [`object_members`] where `f` walks each value itself: it gets the key and the
/// value's start, and returns the offset after the value, which it has validated.
pub(crate) fn object_members_with<'b>(
    b: &'b [u8],
    i: usize,
    mut f: impl FnMut(&'b [u8], usize) -> Result<usize, usize>,
) -> Result<usize, usize> {
    let mut i = skip_ws(b, i);
    if b.get(i) != Some(&b'{') {
        return Err(i);
    }
    i = skip_ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        return Ok(i + 1);
    }
    // Each key, and whether it is written with an escape.
    let mut keys: Vec<(&[u8], bool)> = Vec::new();
    loop {
        if b.get(i) != Some(&b'"') {
            return Err(i);
        }
        let ks = i + 1;
        i = scan_string(b, ks)?;
        let key = &b[ks..i - 1];
        // The same key twice: refused, as every stage refuses it.
        let escaped = has_escape(key);
        if keys.iter().any(|&(k, e)| same_key((k, e), (key, escaped))) {
            return Err(ks - 1);
        }
        keys.push((key, escaped));
        i = skip_ws(b, i);
        if b.get(i) != Some(&b':') {
            return Err(i);
        }
        let vs = skip_ws(b, i + 1);
        let ve = f(key, vs)?;
        i = skip_ws(b, ve);
        match b.get(i) {
            Some(b',') => i = skip_ws(b, i + 1),
            Some(b'}') => return Ok(i + 1),
            _ => return Err(i),
        }
    }
}

/// The spans of the elements of the array at `b[i..]` (each walked by `value`, which
/// returns the offset after the element or where it is wrong), and the offset after the
/// array.
pub(crate) fn array_items(
    b: &[u8],
    i: usize,
    value: impl Fn(&[u8], usize) -> Result<usize, usize>,
) -> Result<(Vec<(usize, usize)>, usize), usize> {
    let mut i = skip_ws(b, i);
    if b.get(i) != Some(&b'[') {
        return Err(i);
    }
    let mut items = Vec::new();
    i = skip_ws(b, i + 1);
    if b.get(i) == Some(&b']') {
        return Ok((items, i + 1));
    }
    loop {
        let end = value(b, i)?;
        items.push((i, end));
        i = skip_ws(b, end);
        match b.get(i) {
            Some(b',') => i = skip_ws(b, i + 1),
            Some(b']') => return Ok((items, i + 1)),
            _ => return Err(i),
        }
    }
}

// ---------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------

/// Validate one JSON text without building it.
///
/// UTF-8 is checked once on the whole text with `simdutf8` (outside strings a
/// non-ASCII byte is a syntax error, so the scanners only look at ASCII).
pub fn json_is_valid(b: &[u8]) -> bool {
    simdutf8::basic::from_utf8(b).is_ok() && scan_json(b).is_ok()
}

pub(crate) fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// The offset after the JSON value at `b[i..]` (after optional white space), in text
/// already known to be valid JSON (a line serde_json parsed): strings are skipped 64
/// bytes at a time, nothing is checked. Never past `b.len()`.
pub(crate) fn skip_value(b: &[u8], i: usize) -> usize {
    let mut i = skip_ws(b, i);
    match b.get(i) {
        Some(b'"') => return skip_string(b, i + 1),
        Some(b'{' | b'[') => {}
        // A number or a literal: up to what ends it.
        Some(_) => {
            return b[i..]
                .iter()
                .position(|c| matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .map_or(b.len(), |k| i + k);
        }
        None => return i,
    }
    let mut depth = 0usize;
    while let Some(&c) = b.get(i) {
        match c {
            b'"' => {
                i = skip_string(b, i + 1);
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    b.len()
}

fn scan_number(b: &[u8], mut i: usize) -> Result<usize, usize> {
    let digits = |b: &[u8], mut i: usize| {
        let s = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        (i, i - s)
    };
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => i = digits(b, i).0,
        _ => return Err(i),
    }
    if b.get(i) == Some(&b'.') {
        let (j, n) = digits(b, i + 1);
        if n == 0 {
            return Err(j);
        }
        i = j;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let (j, n) = digits(b, i);
        if n == 0 {
            return Err(j);
        }
        i = j;
    }
    Ok(i)
}

/// Validate an object key and its colon at `b[i..]` (a quote expected at `i`); returns
/// the offset after the colon.
#[inline]
fn scan_key(b: &[u8], i: usize) -> Result<usize, usize> {
    if b.get(i) != Some(&b'"') {
        return Err(i);
    }
    let i = skip_ws(b, scan_string(b, i + 1)?);
    if b.get(i) == Some(&b':') {
        Ok(i + 1)
    } else {
        Err(i)
    }
}

/// Validate a whole JSON text.
pub(crate) fn scan_json(b: &[u8]) -> Result<(), usize> {
    let end = scan_value(b, 0)?;
    let end = skip_ws(b, end);
    if end == b.len() { Ok(()) } else { Err(end) }
}

/// Nesting every stage refuses (serde_json's limit): a container this many levels deep,
/// the row itself being level 1.
pub(crate) const MAX_DEPTH: usize = 128;

/// Validate the JSON value starting at `b[i..]` (after optional white space); returns
/// the offset just after it. Structural validation with an explicit stack; a value that
/// nests [`MAX_DEPTH`] levels, or an object with a key twice, is invalid too.
pub(crate) fn scan_value(b: &[u8], i: usize) -> Result<usize, usize> {
    scan_value_at(b, i, 0)
}

/// [`scan_value`] for a value inside `depth` containers (1: a member of the row).
pub(crate) fn scan_value_at(b: &[u8], i: usize, depth: usize) -> Result<usize, usize> {
    // stack of open containers: true = object, false = array
    let mut stack: Vec<bool> = Vec::new();
    // the keys of the open objects (raw, as written; whether written with an escape)
    // and where each object's begin
    let mut keys: Vec<(usize, usize, bool)> = Vec::new();
    let mut frames: Vec<usize> = Vec::new();
    let mut i = skip_ws(b, i);
    'value: loop {
        // parse one value at i
        i = skip_ws(b, i);
        match b.get(i) {
            Some(&open @ (b'{' | b'[')) => {
                if depth + stack.len() + 1 >= MAX_DEPTH {
                    return Err(i);
                }
                let object = open == b'{';
                i = skip_ws(b, i + 1);
                if b.get(i) == Some(if object { &b'}' } else { &b']' }) {
                    i += 1;
                } else {
                    stack.push(object);
                    if object {
                        frames.push(keys.len());
                        i = scan_new_key(b, i, &mut keys, &frames)?;
                    }
                    continue 'value;
                }
            }
            Some(b'"') => i = scan_string(b, i + 1)?,
            Some(b't') if b[i..].starts_with(b"true") => i += 4,
            Some(b'f') if b[i..].starts_with(b"false") => i += 5,
            Some(b'n') if b[i..].starts_with(b"null") => i += 4,
            Some(b'-' | b'0'..=b'9') => i = scan_number(b, i)?,
            _ => return Err(i),
        }
        // after a value: close containers or go on with the next element
        loop {
            if stack.is_empty() {
                return Ok(i);
            }
            i = skip_ws(b, i);
            match stack.last() {
                None => return Ok(i),
                Some(&is_obj) => match b.get(i) {
                    Some(b',') => {
                        i = skip_ws(b, i + 1);
                        if is_obj {
                            i = scan_new_key(b, i, &mut keys, &frames)?;
                        }
                        continue 'value;
                    }
                    Some(b'}') if is_obj => {
                        stack.pop();
                        keys.truncate(frames.pop().unwrap_or(0));
                        i += 1;
                    }
                    Some(b']') if !is_obj => {
                        stack.pop();
                        i += 1;
                    }
                    _ => return Err(i),
                },
            }
        }
    }
}

/// [`scan_key`], refusing a key the innermost open object already has.
#[inline]
fn scan_new_key(
    b: &[u8],
    i: usize,
    keys: &mut Vec<(usize, usize, bool)>,
    frames: &[usize],
) -> Result<usize, usize> {
    let next = scan_key(b, i)?;
    // The key is b[i + 1 .. end of its string); scan_key has checked it.
    let end = scan_string(b, i + 1)? - 1;
    let key = &b[i + 1..end];
    let first = frames.last().copied().unwrap_or(0);
    let escaped = has_escape(key);
    if keys[first..]
        .iter()
        .any(|&(s, e, esc)| same_key((&b[s..e], esc), (key, escaped)))
    {
        return Err(i);
    }
    keys.push((i + 1, end, escaped));
    Ok(next)
}

/// Whether a raw key holds an escape. Keys are a few bytes: a plain loop the compiler
/// inlines measured 2% less CPU on `traj-filter --well-formed` than `contains` (a call
/// into core's memchr per key).
#[inline]
#[allow(clippy::manual_contains)]
fn has_escape(key: &[u8]) -> bool {
    key.iter().any(|&b| b == b'\\')
}

/// Whether two raw keys (validated strings, without quotes) are one key: the same bytes,
/// or, where one is written with an escape, the same text (`"a"` and `"\u0061"`, as
/// serde_json and every other reader decode them).
/// Each key comes with whether it holds an escape.
#[inline]
fn same_key((a, a_esc): (&[u8], bool), (b, b_esc): (&[u8], bool)) -> bool {
    if a == b {
        return true;
    }
    (a_esc || b_esc) && key_text(a) == key_text(b)
}

#[cfg(test)]
mod validator_tests {
    use super::simd::*;
    use super::string::*;
    use super::*;

    /// On valid JSON, skipping a value ends where validating it ends: every member of
    /// every fixture row, and values of each kind at the top.
    #[test]
    fn skip_value_ends_where_scan_value_ends() {
        let mut n = 0;
        for p in crate::fixtures::jsonl_files() {
            let text = std::fs::read_to_string(&p).expect("fixture");
            for line in text.lines().filter(|l| json_is_valid(l.as_bytes())) {
                let b = line.as_bytes();
                let _ = object_members(b, 0, |_, vs, ve| {
                    assert_eq!(skip_value(b, vs), ve, "{}", &line[vs..]);
                    if b[vs] == b'[' {
                        let (items, end) =
                            array_items(b, vs, |b, i| scan_value_at(b, i, 2)).expect("valid");
                        let skipped = array_items(b, vs, |b, i| Ok(skip_value(b, i)));
                        assert_eq!(skipped, Ok((items, end)));
                    }
                    n += 1;
                });
            }
        }
        assert!(n > 1000, "{n} members");
        let quote_run = format!("\"{}\\\\\"", "x".repeat(62));
        for v in [
            "1",
            "-2.5e3 ",
            "true,",
            "null]",
            "\"a\\\"b\"x",
            "[]",
            "{}",
            " [1, {\"a\": [\"]\"]}] ,",
            quote_run.as_str(),
        ] {
            let b = v.as_bytes();
            assert_eq!(skip_value(b, 0), scan_value(b, 0).expect(v), "{v}");
        }
    }

    /// Assert that `line` is valid exactly when serde_json parses it, and that the
    /// string at `value` (the raw value of `key`) decodes as serde_json decodes it.
    /// Returns whether the line is valid.
    fn agrees_with_serde(line: &[u8], value: std::ops::Range<usize>, key: &str) -> bool {
        let parsed = serde_json::from_slice::<serde_json::Value>(line);
        let shown = String::from_utf8_lossy(line);
        assert_eq!(json_is_valid(line), parsed.is_ok(), "{shown}");
        if let Ok(v) = &parsed {
            let raw = std::str::from_utf8(&line[value]).unwrap();
            assert_eq!(
                decode_str(raw).unwrap(),
                v[key].as_str().unwrap(),
                "{shown}"
            );
        }
        parsed.is_ok()
    }

    #[test]
    fn a_key_written_twice_is_one_key_however_it_is_spelled() {
        for twice in [
            r#"{"a":1,"\u0061":2}"#,
            r#"{"\u0061":1,"a":2}"#,
            r#"{"x":{"b\/c":1,"b/c":2}}"#,
            r#"{"x":[{"\u00e9":1,"é":2}]}"#,
        ] {
            assert!(scan_json(twice.as_bytes()).is_err(), "{twice}");
            assert!(
                object_members(twice.as_bytes(), 0, |_, _, _| {}).is_err(),
                "{twice}"
            );
        }
        for once in [r#"{"a":1,"\u0062":2}"#, r#"{"x":{"a":1},"\u0061":{"a":2}}"#] {
            assert!(scan_json(once.as_bytes()).is_ok(), "{once}");
            assert!(
                object_members(once.as_bytes(), 0, |_, _, _| {}).is_ok(),
                "{once}"
            );
        }
    }

    #[test]
    fn decodes_surrogates_and_refuses_bad_escapes() {
        let d = |raw: &str| decode_str(raw).map(|c| c.into_owned());
        assert_eq!(d(r#""a\ud83d\ude00b""#).as_deref(), Some("a\u{1F600}b"));
        // a lone surrogate has no char: U+FFFD, as Python's `errors="replace"` would
        assert_eq!(d(r#""\ude00x""#).as_deref(), Some("\u{FFFD}x"));
        assert_eq!(
            d(r#""0123456789abcdef\\\"\/\b\f\n\r\t""#).as_deref(),
            Some("0123456789abcdef\\\"/\u{8}\u{c}\n\r\t")
        );
        assert_eq!(d(r#""\x""#), None);
        assert_eq!(d(r#""\u12""#), None);
        assert_eq!(d("no quotes"), None);
    }

    #[test]
    fn escape_masks_are_exact() {
        let mut rng = fastrand::Rng::with_seed(5);
        for _ in 0..20_000 {
            let mut chunk = [0u8; 16];
            for b in &mut chunk {
                *b = *rng.choice(b"\"\\<\x00\x1f\x20a\x7f\x80\xff").unwrap();
            }
            for also in [None, Some(b'<')] {
                let want = chunk.iter().enumerate().fold(0u32, |m, (k, &b)| {
                    let hit = b == b'"' || b == b'\\' || b < 0x20 || Some(b) == also;
                    m | (u32::from(hit) << k)
                });
                assert_eq!(needs_escape16(&chunk, also), want, "{chunk:?} {also:?}");
            }
        }
    }

    #[test]
    fn block_masks_are_exact() {
        let mut rng = fastrand::Rng::with_seed(3);
        for round in 0..20_000 {
            let mut block = [0u8; 64];
            for b in &mut block {
                // half the rounds from the bytes that matter, half from all bytes
                *b = if round % 2 == 0 {
                    *rng.choice(b"\"\\\x00\x1f\x20a\x7f\x80\xff").unwrap()
                } else {
                    rng.u8(..)
                };
            }
            let mut want = Masks {
                quote: 0,
                backslash: 0,
                control: 0,
            };
            for (k, &b) in block.iter().enumerate() {
                want.quote |= u64::from(b == b'"') << k;
                want.backslash |= u64::from(b == b'\\') << k;
                want.control |= u64::from(b < 0x20) << k;
            }
            assert_eq!(masks(&block), want, "{block:?}");
            assert_eq!(masks_swar(&block), want, "{block:?}");
        }
    }

    /// Long, mostly valid strings at every alignment: escapes and backslash runs across
    /// the 64-byte blocks, `\u` escapes cut by a block end, the last bytes of a line.
    /// (No surrogate pairs: an escaped backslash before one leaves a lone surrogate,
    /// which the JSON grammar allows, and so do we and Python, but serde_json refuses.)
    #[test]
    fn long_strings_across_blocks_agree_with_serde_json() {
        let common: [&[u8]; 9] = [
            b"abcdefghij",
            b"\\\"",
            b"\\n",
            b"\\\\",
            b"\\\\\\\"",
            b"\\u00e9",
            "é中".as_bytes(),
            b" ",
            b"\\/",
        ];
        let rare: [&[u8]; 7] = [b"\"", b"\\", b"\\x", b"\\u12g4", b"\t", b"\x01", b"\\u00"];
        let mut rng = fastrand::Rng::with_seed(11);
        let (mut valid, mut invalid) = (0, 0);
        for _ in 0..20_000 {
            let mut line = b"{\"".to_vec();
            line.extend(std::iter::repeat_n(b'k', rng.usize(1..70)));
            line.extend_from_slice(b"\": ");
            let value_start = line.len();
            line.push(b'"');
            for _ in 0..rng.usize(0..80) {
                let part = if rng.usize(0..300) == 0 {
                    rare[rng.usize(0..rare.len())]
                } else {
                    common[rng.usize(0..common.len())]
                };
                line.extend_from_slice(part);
            }
            line.push(b'"');
            let value_end = line.len();
            if rng.bool() {
                line.extend_from_slice(b", \"n\":\t[1, \"x\"]");
            }
            line.push(b'}');
            let key = "k".repeat(value_start - 5);
            if agrees_with_serde(&line, value_start..value_end, &key) {
                valid += 1
            } else {
                invalid += 1
            }
            // a truncated line is never valid
            let cut = rng.usize(1..line.len());
            assert!(
                !json_is_valid(&line[..cut])
                    || serde_json::from_slice::<serde_json::Value>(&line[..cut]).is_ok()
            );
        }
        assert!(
            valid > 5_000 && invalid > 1_000,
            "{valid} valid, {invalid} invalid"
        );
    }

    #[test]
    fn random_strings_agree_with_serde_json() {
        let alphabet: [&[u8]; 16] = [
            b"a",
            b"\"",
            b"\\",
            b"n",
            b"u",
            b"0",
            b"\t",
            "é".as_bytes(),
            b"\\\"",
            b"\\n",
            b"\\u00e9",
            b"#",
            "中文".as_bytes(),
            "😀".as_bytes(),
            b"\xe4\xb8", // a truncated sequence: invalid UTF-8
            b"plain words",
        ];
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..50_000 {
            let mut line = b"{\"k\": \"".to_vec();
            for _ in 0..rng.usize(0..120) {
                line.extend_from_slice(alphabet[rng.usize(0..alphabet.len())]);
            }
            line.extend_from_slice(b"\"}");
            agrees_with_serde(&line, 6..line.len() - 1, "k");
        }
    }

    #[test]
    fn agrees_with_serde_json() {
        let cases: &[&[u8]] = &[
            b"{}",
            b" { \"a\" : [1, -2.5e+3, true, false, null, {\"b\": []}, \"x\\u00e9\\n\\\"\"] } ",
            b"{\"a\":1,}",
            b"{\"a\" 1}",
            b"[1,]",
            b"{\"a\":01}",
            b"{\"a\":1.}",
            b"{\"a\":-}",
            b"{\"a\":\"\\x\"}",
            b"{\"a\":\"\\u12g4\"}",
            b"{\"a\":\"tab\there\"}",
            b"{\"a\":\"unterminated}",
            b"{\"a\":1}}",
            b"{\"a\":1} x",
            b"{\"a\":tru}",
            b"[[[[[]]]]]",
            b"[[[[[]]]]",
            b"{\"long string with no escapes at all, more than eight bytes\": \"and \\\"quotes\\\" too\"}",
            b"",
            b"   ",
            b"{\"a\":\"\xc3\xa9\"}",
            b"{\"a\":\"\xff\"}",
            b"{\"a\":1e5,\"b\":0.5E-2,\"c\":-0}",
        ];
        for c in cases {
            // serde_json's IgnoredAny skips UTF-8 checks inside strings; Value does not.
            let want = serde_json::from_slice::<serde_json::Value>(c).is_ok();
            assert_eq!(json_is_valid(c), want, "{}", String::from_utf8_lossy(c));
        }
    }
}

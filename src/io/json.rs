//! The one rule for reading a line as a JSON object, shared by every stage that parses
//! rows.

use serde_json::Value;

/// Parse a line as a JSON object, by the rules every stage applies to a row:
///
/// - not valid UTF-8: refused (`invalid UTF-8 at byte N`);
/// - not JSON, or nested 128 levels deep or more (the row is level 1): refused;
/// - valid JSON but not an object (`42`, `[...]`, `"s"`, `null`): refused;
/// - an object with the same key twice at any level: refused (keeping one of them
///   would silently drop the other);
/// - any number, `1e400` and 30-digit integers included: kept as written.
///
/// One UTF-8 check of the whole line (SIMD), then serde_json's `StrRead`, which does not
/// re-validate each string, into a value built by [`Strict`] (which sees duplicates).
pub fn parse_object(bytes: &[u8]) -> std::result::Result<serde_json::Map<String, Value>, String> {
    match parse_value(bytes)? {
        Value::Object(m) => Ok(m),
        other => Err(format!(
            "expected a JSON object, found {}",
            json_kind(&other)
        )),
    }
}

/// True when `bytes` are one JSON value by the rules of [`parse_object`] (any value,
/// not only an object): what a rejects file may embed as JSON, so that every reader of
/// the rejects (jq, Python) reads each of them.
pub fn is_json(bytes: &[u8]) -> bool {
    parse_value(bytes).is_ok()
}

/// serde_json's message for `e`, read in `text`, with one case said plainly: a `\uD800`
/// .. `\uDFFF` escape that is not half of a surrogate pair (Python's `json.dumps` writes
/// one for a lone surrogate; it is no Unicode text, so no UTF-8 file or Arrow string
/// column can hold it), which serde_json words as a hex escape that ends early.
pub fn json_error_text(text: &[u8], e: &serde_json::Error) -> String {
    let msg = e.to_string();
    let surrogate = msg.starts_with("unexpected end of hex escape")
        || msg.starts_with("lone leading surrogate in hex escape");
    let line = text.split(|&b| b == b'\n').nth(e.line().saturating_sub(1));
    let escape = line.and_then(|l| {
        let end = e.column().min(l.len());
        // The last `\uDxxx` escape up to the error's column.
        (0..end).rev().find_map(|i| {
            let esc = l.get(i..i + 6)?;
            let lone = esc.starts_with(b"\\u")
                && matches!(esc[2], b'd' | b'D')
                && matches!(esc[3], b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F')
                && esc[4..].iter().all(u8::is_ascii_hexdigit);
            lone.then(|| String::from_utf8_lossy(esc).into_owned())
        })
    });
    match escape {
        Some(esc) if surrogate => format!(
            "a lone surrogate {esc} (half of a UTF-16 pair: Python writes it, but it is \
             not Unicode text) at line {} column {}",
            e.line(),
            e.column()
        ),
        _ => msg,
    }
}

/// One JSON value by the row rules (UTF-8, no key twice, the depth limit).
/// One JSON value by the rules of [`parse_object`] (no key twice, no lone surrogate,
/// less than 128 levels), or why not.
pub fn parse_value(bytes: &[u8]) -> std::result::Result<Value, String> {
    let text = match simdutf8::basic::from_utf8(bytes) {
        Ok(text) => text,
        Err(_) => {
            let at = std::str::from_utf8(bytes)
                .err()
                .map_or(0, |e| e.valid_up_to());
            return Err(format!("invalid JSON: invalid UTF-8 at byte {at}"));
        }
    };
    let mut de = serde_json::Deserializer::from_str(text);
    serde::de::DeserializeSeed::deserialize(Strict, &mut de)
        .and_then(|v| {
            de.end()?;
            Ok(v)
        })
        .map_err(|e| format!("invalid JSON: {}", json_error_text(bytes, &e)))
}

/// The levels of arrays and objects a row's field may hold: a row nested 128 levels deep
/// or more is refused ([`parse_object`]), and the row is level 1. A list field's objects
/// may hold one level less, their members two.
pub const FIELD_DEPTH: usize = 126;

/// A row read in part by [`parse_object_in_part`]: `map` has every top-level field in
/// order, and `raw[i]`, where it is `Some`, is the JSON text of field `i`, whose value in
/// `map` is only a `null` standing in for it.
#[derive(Debug)]
pub struct PartRow<'a> {
    pub map: serde_json::Map<String, Value>,
    pub raw: Vec<Option<&'a str>>,
    /// The field read by a [`ListRule`], when it was: its name, and the texts of its
    /// items.
    pub list: Option<(String, Vec<ItemTexts<'a>>)>,
}

/// One object of a list read by a [`ListRule`]: its text, and its members kept as their
/// JSON text, `(key, text)` in the object's key order (the object's value for each such
/// key is a `null` standing in).
#[derive(Debug, Clone, PartialEq)]
pub struct ItemTexts<'a> {
    pub text: &'a str,
    pub members: Vec<(String, &'a str)>,
}

/// A parsed top-level field that is a list of objects whose members `keep` names are
/// kept as their text where `verbatim` reads them ([`parse_object_in_part`]).
pub struct ListRule<'f> {
    /// The field.
    pub field: &'f str,
    /// Members that may be kept as text.
    pub keep: &'f dyn Fn(&str) -> bool,
    /// As `verbatim` of [`parse_object_in_part`], for a member's value (level 4 of the
    /// row: it may hold [`FIELD_DEPTH`]` - 2` levels).
    pub verbatim: &'f dyn Fn(&str) -> Option<usize>,
}

/// Read a line as [`parse_object`] does, parsing only the top-level fields `parse` names;
/// every other field is kept as its text, which must satisfy `verbatim` (for example
/// "the output would write this text as it is").
///
/// `None` whenever the line is not such a row: not a valid object by the row rules, or a
/// field that is neither parsed nor `verbatim`. The caller then reads the line with
/// [`parse_object`], which gives the verdict and its message, so this is only ever a
/// quicker way to the same row. `verbatim` must check duplicate keys and depth itself
/// inside the text it is given (the parser does not look inside kept text); the row is
/// level 1, so a kept value may hold at most [`FIELD_DEPTH`] levels.
///
/// `verbatim(t)` is the length of the kept value at the start of `t` (`None`: not kept).
/// A row written in that same spelling at the top level too (`{"k": v, "k2": v2}`) is
/// walked here directly, each kept value read once; any other is read by serde_json.
///
/// `list`: in a row walked directly, the field it names, when it is a list of objects
/// in that spelling too (`[{"k": v, ...}, ...]`), is read with the members it keeps as
/// text ([`PartRow::list`]); otherwise it is parsed as any other.
pub fn parse_object_in_part<'a>(
    bytes: &'a [u8],
    parse: &dyn Fn(&str) -> bool,
    verbatim: &dyn Fn(&str) -> Option<usize>,
    list: Option<&ListRule>,
) -> Option<PartRow<'a>> {
    let text = simdutf8::basic::from_utf8(bytes).ok()?;
    if let Some(row) = walk_in_part(text, parse, verbatim, list) {
        return Some(row);
    }
    let verbatim = |t: &str| verbatim(t) == Some(t.len());
    let verbatim = &verbatim;
    let mut de = serde_json::Deserializer::from_str(text);
    let row = serde::Deserializer::deserialize_map(&mut de, InPart { parse, verbatim }).ok()?;
    de.end().ok()?;
    Some(row)
}

/// [`parse_object_in_part`] on a row whose top level is `{"k": v, ...}` exactly: keys
/// and kept values as `verbatim` reads them, parsed values by [`Strict`] from where
/// they start. `None` on anything else (the caller then lets serde_json read the row).
fn walk_in_part<'a>(
    text: &'a str,
    parse: &dyn Fn(&str) -> bool,
    verbatim: &dyn Fn(&str) -> Option<usize>,
    list: Option<&ListRule>,
) -> Option<PartRow<'a>> {
    if text.get(1..) == Some("}") {
        return None;
    }
    let (mut raw, mut listed, mut at) = (Vec::new(), None, 0);
    let (map, n) = walk_object(text, verbatim, |key, rest| {
        at += 1;
        if let Some(l) = list.filter(|l| l.field == key)
            && let Some((items, texts, n)) = walk_list(rest, l)
        {
            listed = Some((key.to_string(), texts));
            return Some((Value::Array(items), n));
        }
        if parse(key) {
            return strict_prefix(rest, FIELD_DEPTH);
        }
        let n = verbatim(rest)?;
        raw.resize(at - 1, None);
        raw.push(Some(&rest[..n]));
        Some((Value::Null, n))
    })?;
    (n == text.len()).then_some(PartRow {
        map,
        raw,
        list: listed,
    })
}

/// The object at the start of `text`, spelled `{"k": v, ...}` exactly, and its length:
/// each key as `verbatim` reads it (never twice, serde_json's number key never first),
/// each value as `member(key, text from the value on)` reads it (the value and its
/// length). `None` on any other spelling, or where `member` says `None`.
#[inline(always)]
fn walk_object<'a>(
    text: &'a str,
    verbatim: &dyn Fn(&str) -> Option<usize>,
    mut member: impl FnMut(&str, &'a str) -> Option<(Value, usize)>,
) -> Option<(serde_json::Map<String, Value>, usize)> {
    let mut m = serde_json::Map::new();
    let mut i = text.starts_with('{').then_some(1)?;
    if text[i..].starts_with('}') {
        return Some((m, 2));
    }
    loop {
        let (key, n) = walk_key(&text[i..], verbatim)?;
        if m.contains_key(&key) || (m.is_empty() && key == NUMBER_TOKEN) {
            return None;
        }
        i += n;
        i += text[i..].starts_with(": ").then_some(2)?;
        let (v, n) = member(&key, &text[i..])?;
        m.insert(key, v);
        i += n;
        match text.as_bytes().get(i)? {
            b'}' => return Some((m, i + 1)),
            b',' => i += text[i..].starts_with(", ").then_some(2)?,
            _ => return None,
        }
    }
}

/// The key at the start of `text` (`"k"`, spelled as `verbatim` reads it) and its length.
fn walk_key(text: &str, verbatim: &dyn Fn(&str) -> Option<usize>) -> Option<(String, usize)> {
    let n = verbatim(text).filter(|_| text.starts_with('"'))?;
    let key = match &text[1..n - 1] {
        k if !k.contains('\\') => k.to_string(),
        _ => serde_json::from_str(&text[..n]).ok()?,
    };
    Some((key, n))
}

/// The one JSON value at the start of `text` (after white space) by the rules of
/// [`parse_value`] (no key twice, no lone surrogate, less than 128 levels), and the
/// bytes it used; or why not. For readers of JSON inside text: a Hermes `<tool_call>`
/// body, say.
pub fn parse_value_prefix(text: &str) -> std::result::Result<(Value, usize), String> {
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<StrictValue>();
    match values.next() {
        Some(Ok(StrictValue(v))) => Ok((v, values.byte_offset())),
        Some(Err(e)) => Err(e.to_string()),
        None => Err("nothing".into()),
    }
}

/// The value at the start of `text` as [`Strict`] reads it, and its length; `None` when
/// there is none or it holds more than `max_depth` levels.
#[inline]
fn strict_prefix(text: &str, max_depth: usize) -> Option<(Value, usize)> {
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<StrictValue>();
    let StrictValue(v) = values.next()?.ok()?;
    (depth(&v) <= max_depth).then(|| (v, values.byte_offset()))
}

/// The list of objects at the start of `text`, spelled `[{"k": v, ...}, ...]`, as
/// [`Strict`] reads it, but for the members `rule` keeps as text: their text, and a
/// `null` in their place. Also the list's length. `None` on any other spelling, a key
/// twice, or a value nested deeper than a row read whole allows (the list is level 2:
/// a member's value may hold `FIELD_DEPTH - 2` levels).
fn walk_list<'a>(
    text: &'a str,
    rule: &ListRule,
) -> Option<(Vec<Value>, Vec<ItemTexts<'a>>, usize)> {
    let (mut items, mut texts) = (Vec::new(), Vec::new());
    let mut i = text.starts_with('[').then_some(1)?;
    if text[i..].starts_with(']') {
        return Some((items, texts, 2));
    }
    loop {
        let mut kept = Vec::new();
        let (m, n) = walk_object(&text[i..], rule.verbatim, |key, rest| {
            if (rule.keep)(key)
                && let Some(n) = (rule.verbatim)(rest)
            {
                kept.push((key.to_string(), &rest[..n]));
                return Some((Value::Null, n));
            }
            strict_prefix(rest, FIELD_DEPTH - 2)
        })?;
        items.push(Value::Object(m));
        texts.push(ItemTexts {
            text: &text[i..i + n],
            members: kept,
        });
        i += n;
        match text.as_bytes().get(i)? {
            b']' => return Some((items, texts, i + 1)),
            b',' => i += text[i..].starts_with(", ").then_some(2)?,
            _ => return None,
        }
    }
}

/// Arrays and objects inside one another in `v` (a scalar: 0).
fn depth(v: &Value) -> usize {
    match v {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(m) => 1 + m.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// A value read by [`Strict`], for serde_json's stream reader.
struct StrictValue(Value);

impl<'de> serde::Deserialize<'de> for StrictValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<StrictValue, D::Error> {
        serde::de::DeserializeSeed::deserialize(Strict, d).map(StrictValue)
    }
}

/// The top-level visitor of [`parse_object_in_part`].
struct InPart<'f> {
    parse: &'f dyn Fn(&str) -> bool,
    verbatim: &'f dyn Fn(&str) -> bool,
}

impl<'de> serde::de::Visitor<'de> for InPart<'_> {
    type Value = PartRow<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<PartRow<'de>, A::Error> {
        use serde::de::Error as _;
        let mut row = PartRow {
            map: serde_json::Map::new(),
            raw: Vec::new(),
            list: None,
        };
        while let Some(k) = map.next_key::<String>()? {
            if row.map.contains_key(&k) || (row.map.is_empty() && k == NUMBER_TOKEN) {
                return Err(A::Error::custom("not read in part"));
            }
            if (self.parse)(&k) {
                let v = map.next_value_seed(Strict)?;
                row.map.insert(k, v);
                continue;
            }
            let text: &'de serde_json::value::RawValue = map.next_value()?;
            if !(self.verbatim)(text.get()) {
                return Err(A::Error::custom("not read in part"));
            }
            row.raw.resize(row.map.len(), None);
            row.raw.push(Some(text.get()));
            row.map.insert(k, Value::Null);
        }
        Ok(row)
    }
}

/// Builds a `Value` as serde_json's own `Deserialize` does, but refuses an object that
/// has a key twice.
#[derive(Clone, Copy)]
struct Strict;

impl<'de> serde::de::DeserializeSeed<'de> for Strict {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Strict {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(x) = seq.next_element_seed(Strict)? {
            v.push(x);
        }
        Ok(Value::Array(v))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        use serde::de::Error as _;
        let mut m = serde_json::Map::new();
        while let Some(k) = map.next_key::<String>()? {
            // A number, with `arbitrary_precision`: serde_json hands it over as a map of
            // one private key whose value is the number's text.
            if m.is_empty() && k == NUMBER_TOKEN {
                let text: String = map.next_value()?;
                let n: serde_json::Number = text.parse().map_err(A::Error::custom)?;
                return Ok(Value::Number(n));
            }
            let v = map.next_value_seed(Strict)?;
            if m.contains_key(&k) {
                return Err(A::Error::custom(format_args!("duplicate key {k:?}")));
            }
            m.insert(k, v);
        }
        Ok(Value::Object(m))
    }
}

/// serde_json's private key for a number kept as text (`arbitrary_precision`).
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// `an array`, `a string`, ... for messages.
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_surrogate_is_named() {
        let why = |line: &str| parse_object(line.as_bytes()).unwrap_err();
        for (line, esc) in [
            (r#"{"a": "x\ud800 b"}"#, r"\ud800"),
            (r#"{"a": "\uDC00"}"#, r"\uDC00"),
            (r#"{"a": "\ud800\u0041"}"#, r"\ud800"),
        ] {
            let e = why(line);
            assert!(
                e.starts_with(&format!("invalid JSON: a lone surrogate {esc} (")),
                "{e}"
            );
        }
        // A pair is text; other bad escapes keep serde_json's words.
        assert!(parse_object(br#"{"a": "\ud83d\ude00"}"#).is_ok());
        assert!(why(r#"{"a": "\u12"}"#).starts_with("invalid JSON: invalid escape"));
    }

    #[test]
    fn the_row_rules() {
        let ok = parse_object(
            br#"{"a": [1e400, 123456789012345678901234567890, -0.0], "b": {"c": 1.50}}"#,
        )
        .unwrap();
        assert_eq!(
            serde_json::to_string(&Value::Object(ok)).unwrap(),
            r#"{"a":[1e+400,123456789012345678901234567890,-0.0],"b":{"c":1.50}}"#
        );
        let err = |l: &[u8]| parse_object(l).unwrap_err();
        assert_eq!(err(b"42"), "expected a JSON object, found a number");
        assert_eq!(err(b"[1]"), "expected a JSON object, found an array");
        assert!(err(br#"{"a":1,"a":2}"#).contains("duplicate key \"a\""));
        assert!(err(br#"{"x":{"a":1,"b":{"a":2},"a":3}}"#).contains("duplicate key \"a\""));
        assert!(parse_object(br#"{"x":{"a":1},"y":{"a":1}}"#).is_ok());
        assert_eq!(
            err(b"{\"s\":\"\xff\"}"),
            "invalid JSON: invalid UTF-8 at byte 6"
        );
        let deep = |n: usize| format!("{{\"d\":{}{}}}", "[".repeat(n - 1), "]".repeat(n - 1));
        assert!(parse_object(deep(127).as_bytes()).is_ok());
        assert!(err(deep(128).as_bytes()).contains("recursion limit exceeded"));
        assert!(err(br#"{"a":1} x"#).starts_with("invalid JSON: trailing characters"));
        // A key that looks like serde_json's private number key is a key.
        assert!(parse_object(br#"{"b":1,"$serde_json::private::Number":"x"}"#).is_ok());
    }

    /// Read in part: the same row where it applies, `None` (the full reading decides)
    /// wherever the full reading refuses the line or a kept field is not `verbatim`.
    #[test]
    fn in_part_is_the_same_row_or_none() {
        let parse = |k: &str| k == "m";
        // Kept: a value without spaces.
        let verbatim = |t: &str| {
            let mut it = serde_json::Deserializer::from_str(t).into_iter::<serde::de::IgnoredAny>();
            it.next()?.ok()?;
            let n = it.byte_offset();
            (!t[..n].contains(' ')).then_some(n)
        };
        let line = br#"{"a": {"x":[1,2]}, "m": [{"k": 1}], "b": "s", "c": 3}"#;
        let row = parse_object_in_part(line, &parse, &verbatim, None).unwrap();
        let full = parse_object(line).unwrap();
        assert_eq!(
            row.map.keys().collect::<Vec<_>>(),
            full.keys().collect::<Vec<_>>()
        );
        assert_eq!(row.map["m"], full["m"]);
        let kept = [Some(r#"{"x":[1,2]}"#), None, Some(r#""s""#), Some("3")];
        assert_eq!(row.raw, kept);
        // Not in Python's spelling at the top level: read by serde_json, the same row.
        let compact = br#"{"a":{"x":[1,2]},"m":[{"k": 1}],"b":"s","c":3}"#;
        let row = parse_object_in_part(compact, &parse, &verbatim, None).unwrap();
        assert_eq!(row.map["m"], full["m"]);
        assert_eq!(row.raw, kept);
        // The depth limit of a row read whole holds for a parsed field.
        for k in [126, 127] {
            let deep = format!("{{\"m\": {}{}}}", "[".repeat(k), "]".repeat(k));
            let whole = parse_object(deep.as_bytes()).is_ok();
            assert_eq!(whole, k == 126);
            let part = parse_object_in_part(deep.as_bytes(), &parse, &verbatim, None).is_some();
            assert_eq!(part, whole, "{k}");
        }
        for bad in [
            &br#"{"a": "no space", "m": []}"#[..],
            br#"{"m": [], "m": []}"#,
            br#"{"m": [{"k": 1, "k": 2}]}"#,
            br#"{"m": []} x"#,
            br#"{"m": [], "a": 1,}"#,
            br#"[1]"#,
            b"{\"m\": \"\xff\"}",
            br#"{"$serde_json::private::Number": "1"}"#,
        ] {
            assert!(parse_object_in_part(bad, &parse, &verbatim, None).is_none());
        }
    }

    /// A list read by a [`ListRule`]: the members it keeps are their text and a `null`
    /// in the list; anything the walk does not read gives the list parsed whole (or the
    /// row refused where the whole reading refuses it).
    #[test]
    fn a_list_keeps_members_as_text() {
        fn verbatim(t: &str) -> Option<usize> {
            let mut it = serde_json::Deserializer::from_str(t).into_iter::<serde::de::IgnoredAny>();
            it.next()?.ok()?;
            let n = it.byte_offset();
            (!t[..n].contains("  ")).then_some(n)
        }
        fn read(line: &str) -> Option<PartRow<'_>> {
            let rule = ListRule {
                field: "m",
                keep: &|k| k == "x",
                verbatim: &verbatim,
            };
            parse_object_in_part(line.as_bytes(), &|k| k == "m", &verbatim, Some(&rule))
        }
        let line = r#"{"m": [{"r": 1, "x": {"a": [2]}}, {}, {"x": "s"}], "b": 3}"#;
        let row = read(line).unwrap();
        let (field, texts) = row.list.as_ref().unwrap();
        assert_eq!(field, "m");
        let item = |text, members: &[(&str, &'static str)]| ItemTexts {
            text,
            members: members.iter().map(|(k, t)| (k.to_string(), *t)).collect(),
        };
        assert_eq!(
            texts,
            &vec![
                item(r#"{"r": 1, "x": {"a": [2]}}"#, &[("x", r#"{"a": [2]}"#)]),
                item("{}", &[]),
                item(r#"{"x": "s"}"#, &[("x", r#""s""#)]),
            ]
        );
        let items = row.map["m"].as_array().unwrap();
        assert_eq!(items[0]["r"], 1);
        assert!(items[0]["x"].is_null() && items[2]["x"].is_null());
        // Not walked: the list parsed whole, no texts.
        for whole in [
            r#"{"m": [{"x": 1},{"x": 2}]}"#,
            r#"{"m": [1, {"x": 2}]}"#,
            r#"{"m": {"x": 1}}"#,
            r#"{"m": [{"x":1}]}"#,
        ] {
            let row = read(whole).unwrap();
            assert!(row.list.is_none(), "{whole}");
            assert_eq!(
                row.map["m"],
                parse_object(whole.as_bytes()).unwrap()["m"],
                "{whole}"
            );
        }
        // A key twice in an item, or a value too deep: refused as read whole.
        for bad in [
            r#"{"m": [{"r": 1, "r": 2}]}"#,
            r#"{"m": [{"x": 1, "x": 2}]}"#,
        ] {
            assert!(
                read(bad).is_none() && parse_object(bad.as_bytes()).is_err(),
                "{bad}"
            );
        }
        for k in [124, 125] {
            let deep = format!("{{\"m\": [{{\"r\": {}{}}}]}}", "[".repeat(k), "]".repeat(k));
            assert_eq!(
                read(&deep).is_some(),
                parse_object(deep.as_bytes()).is_ok(),
                "{k}"
            );
            assert_eq!(read(&deep).is_some(), k == 124, "{k}");
        }
    }
}

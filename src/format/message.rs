//! The rules for OpenAI-style chat messages that every stage shares: the text of a
//! `content` field and where a message keeps its reasoning.
//!
//! Two readings of a `content` list exist today and are kept apart on purpose until they
//! are unified (it changes outputs): [`content_text`] (a part's `text`, or a bare string
//! part: traj-compress, traj-run) and [`content_text_raw`] (a part's `text`, or its
//! string `value`; a list with a bare string part reads as empty: traj-filter).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// Text of a `content` field: a string, or the text parts of a list of typed parts.
pub fn content_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => {
            let mut out = String::new();
            for p in parts {
                if let Some(t) = p.get("text").and_then(Value::as_str) {
                    out.push_str(t);
                } else if let Some(s) = p.as_str() {
                    out.push_str(s);
                }
            }
            out
        }
        _ => String::new(),
    }
}

/// Reasoning from `reasoning`, `reasoning_content` or `reasoning_details` (OpenRouter's
/// list of `{type, text|summary}`), the first one that holds text.
pub fn reasoning_text(message: &Value) -> Option<String> {
    for key in ["reasoning", "reasoning_content"] {
        if let Some(s) = message.get(key).and_then(Value::as_str)
            && !s.trim().is_empty()
        {
            return Some(s.to_string());
        }
    }
    if let Some(details) = message.get("reasoning_details").and_then(Value::as_array) {
        let mut out = String::new();
        for d in details {
            for key in ["text", "summary"] {
                if let Some(s) = d.get(key).and_then(Value::as_str) {
                    out.push_str(s);
                }
            }
        }
        if !out.trim().is_empty() {
            return Some(out);
        }
    }
    None
}

/// The text of a raw `content` value, borrowed when it is a string without escapes
/// (traj-filter's hot path): a string, or the `text` (else string `value`) of each part
/// of a list of part objects; anything else is empty.
pub fn content_text_raw(raw: Option<&RawValue>) -> Cow<'_, str> {
    #[derive(Deserialize)]
    struct Part<'b> {
        #[serde(borrow, default)]
        text: Option<Cow<'b, str>>,
        #[serde(borrow, default)]
        value: Option<&'b RawValue>,
    }
    let raw_str = |r: &RawValue| crate::format::jsonscan::decode_str(r.get()).map(Cow::into_owned);
    let Some(raw) = raw else {
        return Cow::Borrowed("");
    };
    match raw.get().as_bytes().first() {
        Some(b'"') => crate::format::jsonscan::decode_str(raw.get()).unwrap_or(Cow::Borrowed("")),
        Some(b'[') => {
            let parts: Vec<Part> = serde_json::from_str(raw.get()).unwrap_or_default();
            let mut s = String::new();
            for part in parts {
                if let Some(t) = part.text {
                    s.push_str(&t);
                } else if let Some(v) = part.value.and_then(raw_str) {
                    s.push_str(&v);
                }
            }
            Cow::Owned(s)
        }
        _ => Cow::Borrowed(""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_string()).unwrap()
    }

    #[test]
    fn the_two_content_readings() {
        let parts = r#"[{"type": "text", "text": "a"}, {"type": "x", "value": "b"}]"#;
        assert_eq!(content_text_raw(Some(&raw(parts))), "ab");
        assert_eq!(content_text(&serde_json::from_str(parts).unwrap()), "a");
        assert_eq!(content_text_raw(Some(&raw(r#""q\n""#))), "q\n");
        assert!(matches!(
            content_text_raw(Some(&raw(r#""plain""#))),
            Cow::Borrowed("plain")
        ));
        assert_eq!(content_text_raw(Some(&raw(r#"["s", {"text": "t"}]"#))), "");
        assert_eq!(content_text(&serde_json::json!(["s", {"text": "t"}])), "st");
        assert_eq!(content_text_raw(Some(&raw("5"))), "");
        assert_eq!(content_text_raw(None), "");
    }
}

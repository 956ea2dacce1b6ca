//! The one rule for reading a line as a JSON object, shared by every stage that parses
//! rows.

use serde_json::Value;

/// Parse a line as a JSON object, with the error kinds named as users read them.
///
/// One UTF-8 check of the whole line (SIMD), then serde_json's `StrRead`, which does not
/// re-validate each string; a line that is not UTF-8 goes through `from_slice` for the
/// position in its message.
pub fn parse_object(bytes: &[u8]) -> std::result::Result<serde_json::Map<String, Value>, String> {
    let parsed = match simdutf8::basic::from_utf8(bytes) {
        Ok(text) => serde_json::from_str::<Value>(text),
        Err(_) => serde_json::from_slice::<Value>(bytes),
    };
    match parsed {
        Ok(Value::Object(m)) => Ok(m),
        Ok(other) => Err(format!(
            "expected a JSON object, found {}",
            json_kind(&other)
        )),
        Err(e) => Err(format!("invalid JSON: {e}")),
    }
}

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

//! A row's tokens by the model's chat template, for `--min-row-tokens` and
//! `--max-row-tokens` with an HF tokenizer directory: the row view rebuilt as the turns
//! and `tools` the template reads, rendered and counted whole.

use serde_json::{Map, Value};

use crate::format::row::{BadRow, RowView, decode_str};
use crate::format::tokens::Tokenizer;

fn raw(v: Option<&serde_json::value::RawValue>) -> Value {
    v.and_then(|r| serde_json::from_str(r.get()).ok())
        .unwrap_or(Value::Null)
}

/// The turns of the row as JSON values (ShareGPT `from`/`value`, or OpenAI messages).
fn turns(row: &RowView<'_>) -> Result<Vec<Value>, BadRow> {
    if let Some(turns) = &row.conversations {
        return turns
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let value = decode_str(t.value).ok_or(BadRow::ValueNotString(i + 1))?;
                let mut m = Map::new();
                m.insert("from".into(), Value::from(t.from.as_ref()));
                m.insert("value".into(), Value::from(value.as_ref()));
                Ok(Value::Object(m))
            })
            .collect();
    }
    let msgs = row.messages.as_deref().unwrap_or_default();
    Ok(msgs
        .iter()
        .map(|msg| {
            let mut m = Map::new();
            m.insert("role".into(), Value::from(msg.role.as_ref()));
            m.insert("content".into(), raw(msg.content));
            if let Some(r) = msg.reasoning_content.or(msg.reasoning) {
                m.insert("reasoning_content".into(), raw(Some(r)));
            }
            if let Some(calls) = &msg.tool_calls {
                let calls = calls.iter().map(|c| {
                    let f = c.function.as_ref();
                    let mut func = Map::new();
                    func.insert(
                        "name".into(),
                        Value::from(f.and_then(|f| f.name.as_deref())),
                    );
                    func.insert("arguments".into(), raw(f.and_then(|f| f.arguments)));
                    serde_json::json!({"id": c.id.as_deref(), "type": "function", "function": func})
                });
                m.insert("tool_calls".into(), Value::Array(calls.collect()));
            }
            if let Some(id) = &msg.tool_call_id {
                m.insert("tool_call_id".into(), Value::from(id.as_ref()));
            }
            Value::Object(m)
        })
        .collect())
}

/// `Some(tokens)` of the rendered row when `tk` has a chat template; `None` otherwise.
pub(super) fn tokens(row: &RowView<'_>, tk: &dyn Tokenizer) -> Result<Option<usize>, BadRow> {
    // Cheap probe: a tokenizer without a template says so on an empty row.
    if tk.count_chat(&[], None).is_none() {
        return Ok(None);
    }
    let turns = turns(row)?;
    let mut obj = Map::new();
    if let Some(t) = row
        .tools
        .and_then(|t| serde_json::from_str::<Value>(t).ok())
    {
        obj.insert("tools".into(), t);
    }
    let tools = crate::format::chat_template::row_tools(&obj);
    match tk.count_chat(&turns, tools.as_ref()) {
        Some(Ok(n)) => Ok(Some(n)),
        Some(Err(e)) => Err(BadRow::Shape(e.to_string())),
        None => Ok(None),
    }
}

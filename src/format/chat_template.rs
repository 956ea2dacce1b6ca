//! Chat templates: a model's own `chat_template` (from an HF `tokenizer_config.json`)
//! rendered the way transformers' `apply_chat_template` renders it, so that token budgets
//! count what the trainer will see, tools included.
//!
//! The engine is `minijinja` set up like transformers' sandboxed Jinja environment:
//! `trim_blocks` and `lstrip_blocks`, loop controls, Python string methods
//! (`minijinja-contrib`'s pycompat: `.strip()`, `.startswith()`, `.split()`...), and the
//! globals and filters transformers adds: `raise_exception`, `strftime_now` and a
//! `tojson` that writes `json.dumps(x, ensure_ascii=False)` (`", "` and `": "`,
//! `indent=` as Python indents).
//!
//! A row's turns become the messages a template reads ([`messages`]): ShareGPT
//! `from`/`value` turns map to `role`/`content` (`human` → `user`, `gpt` → `assistant`,
//! `tool`/`observation` → `tool`), OpenAI messages are passed as they are. The row's
//! `tools` (a list, or a JSON string of one) are passed as `tools`.

use std::path::Path;

use minijinja::value::Kwargs;
use minijinja::{Environment, Error as JinjaError, ErrorKind, Value as JValue};
use serde_json::{Map, Value};

/// Why a tokenizer directory's chat template cannot be used or rendered.
#[derive(Debug, thiserror::Error)]
pub enum ChatTemplateError {
    #[error("cannot read {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not JSON: {source}")]
    Json {
        path: String,
        #[source]
        source: serde_json::Error,
    },
    /// The template does not compile.
    #[error("chat_template: {0}")]
    Compile(String),
    /// The template failed on a row (`raise_exception`, an undefined method...).
    #[error("chat_template: {0}")]
    Render(String),
}

/// One compiled chat template with the special tokens it refers to.
pub struct ChatTemplate {
    env: Environment<'static>,
    bos_token: String,
    eos_token: String,
}

const NAME: &str = "chat_template";

/// A special-token entry of `tokenizer_config.json`: a string or `{"content": ...}`.
fn token_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Object(o)) => o
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        _ => String::new(),
    }
}

impl ChatTemplate {
    /// Read `tokenizer_config.json`; `Ok(None)` when it has no `chat_template` (or
    /// none named `default`).
    pub fn from_config_file(path: &Path) -> Result<Option<ChatTemplate>, ChatTemplateError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ChatTemplateError::Read {
            path: p.clone(),
            source,
        })?;
        let cfg: Value = serde_json::from_str(&text)
            .map_err(|source| ChatTemplateError::Json { path: p, source })?;
        ChatTemplate::from_config(&cfg)
    }

    /// Build from a parsed `tokenizer_config.json`.
    pub fn from_config(cfg: &Value) -> Result<Option<ChatTemplate>, ChatTemplateError> {
        let source = match cfg.get("chat_template") {
            Some(Value::String(s)) => s.clone(),
            // A list of named templates: transformers uses `default` unless told.
            Some(Value::Array(list)) => match list.iter().find(|t| t["name"] == "default") {
                Some(t) => t["template"].as_str().unwrap_or_default().to_string(),
                None => return Ok(None),
            },
            _ => return Ok(None),
        };
        ChatTemplate::new(
            source,
            token_text(cfg.get("bos_token")),
            token_text(cfg.get("eos_token")),
        )
        .map(Some)
    }

    /// Compile `source` with the special tokens the template may print.
    pub fn new(
        source: String,
        bos_token: String,
        eos_token: String,
    ) -> Result<ChatTemplate, ChatTemplateError> {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_filter("tojson", tojson);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        env.add_template_owned(NAME, source)
            .map_err(|e| ChatTemplateError::Compile(e.to_string()))?;
        Ok(ChatTemplate {
            env,
            bos_token,
            eos_token,
        })
    }

    /// Render `messages` (OpenAI-shaped) with `tools`, as
    /// `apply_chat_template(messages, tools=tools, tokenize=False)` does.
    pub fn render(
        &self,
        messages: &[Value],
        tools: Option<&Value>,
    ) -> Result<String, ChatTemplateError> {
        let tmpl = self
            .env
            .get_template(NAME)
            .map_err(|e| ChatTemplateError::Compile(e.to_string()))?;
        let ctx = minijinja::context! {
            messages => JValue::from_iter(messages.iter().map(to_jinja)),
            tools => tools.map(to_jinja),
            add_generation_prompt => false,
            bos_token => &self.bos_token,
            eos_token => &self.eos_token,
        };
        tmpl.render(ctx)
            .map_err(|e| ChatTemplateError::Render(e.to_string()))
    }
}

/// The messages a template reads, from a row's turns (ShareGPT or OpenAI).
pub fn messages(turns: &[Value]) -> Vec<Value> {
    turns
        .iter()
        .map(|t| {
            let Some(o) = t.as_object() else {
                return t.clone();
            };
            if o.contains_key("role") || !o.contains_key("from") {
                return t.clone();
            }
            let from = o.get("from").and_then(Value::as_str).unwrap_or_default();
            let role = crate::format::message::openai_role(from);
            let mut m = Map::new();
            m.insert("role".into(), Value::String(role.to_string()));
            m.insert(
                "content".into(),
                o.get("value").cloned().unwrap_or(Value::Null),
            );
            Value::Object(m)
        })
        .collect()
}

/// A row's `tools`: a list, or a JSON string holding one; `None` when absent or empty.
pub fn row_tools(row: &Map<String, Value>) -> Option<Value> {
    let v = match row.get("tools")? {
        Value::String(s) => serde_json::from_str::<Value>(s).ok()?,
        v => v.clone(),
    };
    match &v {
        Value::Array(a) if !a.is_empty() => Some(v),
        _ => None,
    }
}

fn raise_exception(msg: String) -> Result<JValue, JinjaError> {
    Err(JinjaError::new(ErrorKind::InvalidOperation, msg))
}

/// transformers' `strftime_now(format)`: the current UTC time in a strftime format
/// (the common directives; others are kept as written).
fn strftime_now(format: String) -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = crate::format::time::civil_date(days);
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    const DAYS: [&str; 7] = [
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "Monday",
        "Tuesday",
        "Wednesday",
    ];
    let month = MONTHS[(m - 1) as usize];
    let weekday = DAYS[days.rem_euclid(7) as usize];
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('Y') => out.push_str(&y.to_string()),
            Some('m') => out.push_str(&format!("{m:02}")),
            Some('d') => out.push_str(&format!("{d:02}")),
            Some('H') => out.push_str(&format!("{:02}", rem / 3600)),
            Some('M') => out.push_str(&format!("{:02}", rem / 60 % 60)),
            Some('S') => out.push_str(&format!("{:02}", rem % 60)),
            Some('B') => out.push_str(month),
            Some('b') => out.push_str(&month[..3]),
            Some('A') => out.push_str(weekday),
            Some('a') => out.push_str(&weekday[..3]),
            Some('%') => out.push('%'),
            Some(o) => {
                out.push('%');
                out.push(o);
            }
            None => out.push('%'),
        }
    }
    out
}

/// A JSON value as a template value. Not through serde: with `arbitrary_precision` a
/// number serialises as a private map, which a template would see as an object.
fn to_jinja(v: &Value) -> JValue {
    match v {
        Value::Null => JValue::from(()),
        Value::Bool(b) => JValue::from(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                JValue::from(i)
            } else if let Some(u) = n.as_u64() {
                JValue::from(u)
            } else {
                JValue::from(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => JValue::from(s.as_str()),
        Value::Array(a) => JValue::from_iter(a.iter().map(to_jinja)),
        Value::Object(m) => JValue::from_iter(m.iter().map(|(k, v)| (k.as_str(), to_jinja(v)))),
    }
}

/// transformers' `tojson`: `json.dumps(x, ensure_ascii=False, indent=indent)`.
fn tojson(v: JValue, kwargs: Kwargs) -> Result<JValue, JinjaError> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let _: Option<bool> = kwargs.get("ensure_ascii")?;
    let _: Option<bool> = kwargs.get("sort_keys")?;
    kwargs.assert_all_used()?;
    let json = serde_json::to_value(&v)
        .map_err(|e| JinjaError::new(ErrorKind::InvalidOperation, e.to_string()))?;
    let text = match indent {
        None => crate::format::pyjson::dumps(&json),
        Some(n) => {
            let mut out = String::new();
            write_indented(&mut out, &json, n, 0);
            out
        }
    };
    Ok(JValue::from_safe_string(text))
}

/// `json.dumps(v, ensure_ascii=False, indent=n)`: items on their own lines, `","` at
/// line ends, `": "` after keys, `[]` and `{}` for empty containers.
fn write_indented(out: &mut String, v: &Value, n: usize, depth: usize) {
    let pad = |out: &mut String, d: usize| {
        out.push('\n');
        out.push_str(&" ".repeat(n * d));
    };
    match v {
        Value::Array(a) if !a.is_empty() => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                pad(out, depth + 1);
                write_indented(out, x, n, depth + 1);
            }
            pad(out, depth);
            out.push(']');
        }
        Value::Object(o) if !o.is_empty() => {
            out.push('{');
            for (i, (k, x)) in o.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                pad(out, depth + 1);
                out.push_str(&crate::format::pyjson::dumps(&Value::String(k.clone())));
                out.push_str(": ");
                write_indented(out, x, n, depth + 1);
            }
            pad(out, depth);
            out.push('}');
        }
        other => out.push_str(&crate::format::pyjson::dumps(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tmpl(src: &str) -> ChatTemplate {
        ChatTemplate::new(src.into(), "<s>".into(), "</s>".into()).unwrap()
    }

    #[test]
    fn renders_roles_tools_and_python_methods() {
        let t = tmpl(
            "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content.strip() }}\n{% endfor %}\
             {% if tools %}{% for t in tools %}{{ t | tojson }}{% endfor %}{% endif %}",
        );
        let turns = vec![
            json!({"from": "human", "value": "  hi  "}),
            json!({"from": "gpt", "value": "yo"}),
        ];
        let tools = json!([{"name": "ls", "parameters": {"a": [1, "é"]}}]);
        let s = t.render(&messages(&turns), Some(&tools)).unwrap();
        assert_eq!(
            s,
            "<s><user>hi\n<assistant>yo\n{\"name\": \"ls\", \"parameters\": {\"a\": [1, \"é\"]}}"
        );
    }

    #[test]
    fn tojson_indent_and_raise_exception() {
        let t = tmpl("{{ x | tojson(indent=2) }}");
        let env_ctx = t.env.get_template(NAME).unwrap();
        let s = env_ctx
            .render(minijinja::context! { x => to_jinja(&json!({"a": [1], "b": {}})) })
            .unwrap();
        assert_eq!(s, "{\n  \"a\": [\n    1\n  ],\n  \"b\": {}\n}");
        let t = tmpl("{{ raise_exception('no system') }}");
        let e = t.render(&[], None).err().unwrap();
        assert!(e.to_string().contains("no system"), "{e}");
        assert!(ChatTemplate::new("{% if %}".into(), String::new(), String::new()).is_err());
    }

    #[test]
    fn config_forms_and_row_tools() {
        let cfg = json!({"chat_template": [{"name": "tool_use", "template": "x"},
                                           {"name": "default", "template": "{{ eos_token }}"}],
                         "eos_token": {"content": "<|end|>"}});
        let t = ChatTemplate::from_config(&cfg).unwrap().unwrap();
        assert_eq!(t.render(&[], None).unwrap(), "<|end|>");
        assert!(ChatTemplate::from_config(&json!({})).unwrap().is_none());
        let row = json!({"tools": "[{\"name\": \"f\"}]"});
        assert_eq!(
            row_tools(row.as_object().unwrap()),
            Some(json!([{"name": "f"}]))
        );
        let row = json!({"tools": []});
        assert_eq!(row_tools(row.as_object().unwrap()), None);
        assert_eq!(crate::format::time::civil_date(0), (1970, 1, 1));
        assert_eq!(crate::format::time::civil_date(19_723), (2024, 1, 1));
        assert!(strftime_now("%d %B %Y".into()).len() >= 10);
    }
}

//! The two row shapes traj-compress reads, compressed in their own shape.
//!
//! - ShareGPT (Hermes): `{"conversations": [{"from", "value"}, ...]}`; tool calls live in
//!   the gpt `value` as `<tool_call>` text, results in `tool` turns.
//! - OpenAI: `{"messages": [{"role", "content", "tool_calls"?}, ...]}`.
//!
//! A turn's counted text is what the model reads: `value` (ShareGPT), or for OpenAI the
//! format layer's rule for a message ([`crate::format::message::for_each_text`]: the
//! content's text, the reasoning, each tool call's name and arguments), the same text
//! every stage counts. The reference counts `value` only, so OpenAI rows counted 0
//! there (its §7).

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::plan::Role;

/// Which key and turn layout a row uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// `from` / `value` turns.
    ShareGpt,
    /// `role` / `content` turns.
    OpenAi,
}

impl Shape {
    /// The key of a turn's role (`from` / `role`).
    pub fn role_key(self) -> &'static str {
        match self {
            Shape::ShareGpt => "from",
            Shape::OpenAi => "role",
        }
    }

    /// The key of a turn's text (`value` / `content`).
    pub fn text_key(self) -> &'static str {
        match self {
            Shape::ShareGpt => "value",
            Shape::OpenAi => "content",
        }
    }
}

/// A parsed row with its turn list located.
pub struct Row {
    pub obj: Map<String, Value>,
    /// `conversations` or `messages`.
    pub key: &'static str,
    pub shape: Shape,
    /// For each turn now in the list, the input turn it still is unchanged (`None`:
    /// new or changed); `None` while the list is as it came. The writer copies the
    /// input bytes of every unchanged turn ([`super::splice`]), so the turns are changed
    /// only through [`Row::turn_mut`] or [`Row::take_turns`] and [`Row::put_turns`],
    /// which keep it.
    origin: Option<Vec<Option<usize>>>,
}

impl Row {
    /// Find the turn list of a row; `None` for rows traj-compress passes through
    /// unchanged (no `conversations` / `messages` list).
    pub fn locate(obj: Map<String, Value>) -> Option<Row> {
        let key = if obj.get("conversations").is_some_and(Value::is_array) {
            "conversations"
        } else if obj.get("messages").is_some_and(Value::is_array) {
            "messages"
        } else {
            return None;
        };
        let turns = obj[key].as_array().expect("checked");
        let shape = match turns.iter().find_map(Value::as_object) {
            Some(t) if t.contains_key("from") || t.contains_key("value") => Shape::ShareGpt,
            Some(t) if t.contains_key("role") || t.contains_key("content") => Shape::OpenAi,
            _ if key == "messages" => Shape::OpenAi,
            _ => Shape::ShareGpt,
        };
        Some(Row {
            obj,
            key,
            shape,
            origin: None,
        })
    }

    pub fn turns(&self) -> &[Value] {
        self.obj[self.key].as_array().expect("checked")
    }

    /// Turn `i`, to change in place: it is marked changed (the writer writes it from
    /// the row, no longer copies its input bytes).
    pub fn turn_mut(&mut self, i: usize) -> &mut Value {
        let n = self.turns().len();
        self.origin
            .get_or_insert_with(|| (0..n).map(Some).collect())[i] = None;
        &mut self.list_mut()[i]
    }

    fn list_mut(&mut self) -> &mut Vec<Value> {
        self.obj
            .get_mut(self.key)
            .and_then(Value::as_array_mut)
            .expect("checked")
    }

    /// Take the turn list out with, for each turn, the input turn it is (see
    /// [`Row::origin`]); give it back with [`Row::put_turns`].
    pub fn take_turns(&mut self) -> (Vec<Value>, Vec<Option<usize>>) {
        let turns = std::mem::take(self.list_mut());
        let origin = self
            .origin
            .take()
            .unwrap_or_else(|| (0..turns.len()).map(Some).collect());
        (turns, origin)
    }

    /// Put a turn list in, `origin[j]` the input turn that turn `j` is unchanged.
    pub fn put_turns(&mut self, turns: Vec<Value>, origin: Vec<Option<usize>>) {
        debug_assert_eq!(turns.len(), origin.len());
        *self.list_mut() = turns;
        self.origin = Some(origin);
    }

    /// For each turn, the input turn it still is unchanged; `None` while the list is as
    /// it came.
    pub fn origin(&self) -> Option<&[Option<usize>]> {
        self.origin.as_deref()
    }

    pub fn roles(&self) -> Vec<Role> {
        self.turns()
            .iter()
            .map(|t| role_of(t, self.shape))
            .collect()
    }
}

/// The role of a turn.
pub fn role_of(turn: &Value, shape: Shape) -> Role {
    turn.get(shape.role_key())
        .and_then(Value::as_str)
        .map_or(Role::Other, Role::parse)
}

/// The role name as the turn spells it (`UNKNOWN` when missing), for summary headers.
pub fn role_name(turn: &Value, shape: Shape) -> String {
    turn.get(shape.role_key())
        .and_then(Value::as_str)
        .map_or_else(|| "UNKNOWN".to_string(), str::to_ascii_uppercase)
}

/// Call `f` on each piece of text a turn holds (its counted text).
pub fn for_each_text(turn: &Value, shape: Shape, f: &mut dyn FnMut(&str)) {
    match shape {
        Shape::ShareGpt => match turn.get("value") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => f(s),
            Some(other) => f(&other.to_string()),
        },
        Shape::OpenAi => crate::format::message::for_each_text(turn, f),
    }
}

/// The turn's text joined (tool calls as `name(arguments)` lines), for summaries.
pub fn turn_text(turn: &Value, shape: Shape) -> Cow<'_, str> {
    match shape {
        Shape::ShareGpt => {
            if let Some(Value::String(s)) = turn.get("value") {
                return Cow::Borrowed(s);
            }
            let mut s = String::new();
            for_each_text(turn, shape, &mut |t| s.push_str(t));
            Cow::Owned(s)
        }
        Shape::OpenAi => {
            let mut s =
                crate::format::message::content_text(turn.get("content").unwrap_or(&Value::Null));
            if let Some(calls) = turn.get("tool_calls").and_then(Value::as_array) {
                for c in calls {
                    let func = c.get("function").unwrap_or(c);
                    let name = func.get("name").and_then(Value::as_str).unwrap_or("tool");
                    let args = match func.get("arguments") {
                        Some(Value::String(a)) => a.clone(),
                        Some(Value::Null) | None => String::new(),
                        Some(v) => v.to_string(),
                    };
                    if !s.is_empty() {
                        s.push('\n');
                    }
                    s.push_str(&format!(
                        "<tool_call>{{\"name\": \"{name}\", \"arguments\": {args}}}</tool_call>"
                    ));
                }
            }
            Cow::Owned(s)
        }
    }
}

/// How a row's messages write their `content`, which the summary turn and the notice
/// follow (a column of one type, as HF `datasets` needs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Content {
    /// Strings (every ShareGPT row; an OpenAI row with any string content).
    Text,
    /// Lists of typed parts (no message's content a string), their text under this key:
    /// `text`, or `value` as LLaMA-Factory writes it.
    Parts(&'static str),
}

impl Content {
    /// The way `turns` write their content: [`Content::Parts`] when none is a string
    /// and some is a list, its key that of the first text part that has one (`text`
    /// when none does).
    pub fn of(turns: &[Value], shape: Shape) -> Content {
        if shape == Shape::ShareGpt {
            return Content::Text;
        }
        let contents = || turns.iter().filter_map(|t| t.get("content"));
        if contents().any(Value::is_string) {
            return Content::Text;
        }
        let mut lists = contents().filter_map(Value::as_array).peekable();
        if lists.peek().is_none() {
            return Content::Text;
        }
        let key = lists
            .flatten()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .find_map(|p| {
                if p.get("text").is_some_and(Value::is_string) {
                    Some("text")
                } else {
                    p.get("value")
                        .is_some_and(Value::is_string)
                        .then_some("value")
                }
            });
        Content::Parts(key.unwrap_or("text"))
    }

    /// `text` as a content value of this kind.
    fn value(self, text: &str) -> Value {
        match self {
            Content::Text => Value::from(text),
            Content::Parts(key) => Value::Array(vec![Self::part(key, text)]),
        }
    }

    fn part(key: &str, text: &str) -> Value {
        let mut m = Map::new();
        m.insert("type".into(), Value::from("text"));
        m.insert(key.into(), Value::from(text));
        Value::Object(m)
    }
}

/// The word the row's own turns use for the human side (`human` or `user`, whichever
/// its first such turn says), else the shape's (`human` in ShareGPT, `user` in OpenAI).
pub fn human_role(turns: &[Value], shape: Shape) -> String {
    turns
        .iter()
        .filter_map(|t| t.get(shape.role_key())?.as_str())
        .find(|r| super::plan::Role::parse(r) == super::plan::Role::Human)
        .unwrap_or(match shape {
            Shape::ShareGpt => "human",
            Shape::OpenAi => "user",
        })
        .to_string()
}

/// The summary turn in the row's shape: a turn of `role` (the row's word for the human
/// side: [`human_role`]) with only two keys, its content written as the row's messages
/// write theirs.
pub fn summary_turn(text: &str, shape: Shape, role: &str, content: Content) -> Value {
    let mut m = Map::new();
    m.insert(shape.role_key().into(), Value::from(role));
    m.insert(shape.text_key().into(), content.value(text));
    Value::Object(m)
}

/// Append the summary notice to a system turn: to its string, or as one more text part
/// of its list (the part's text under the row's key). A turn that already holds the
/// notice (a row compressed before, compressed again under a smaller budget; or that row
/// normalised in between, which puts the system text and its notice in front of the
/// Hermes tool prompt) is left as it is. Returns whether the turn changed.
pub fn append_notice(turn: &mut Value, shape: Shape, notice: &str, content: Content) -> bool {
    let key = shape.text_key();
    let Some(obj) = turn.as_object_mut() else {
        return false;
    };
    // The notice's own words (normalize may put them first, without the blank line).
    let words = notice.trim_start();
    match obj.get_mut(key) {
        Some(Value::String(s)) => {
            if s.contains(words) {
                return false;
            }
            s.push_str(notice);
        }
        Some(Value::Array(parts)) if shape == Shape::OpenAi => {
            let k = match content {
                Content::Parts(k) => k,
                Content::Text => "text",
            };
            if parts.iter().any(|p| {
                p.get(k)
                    .and_then(Value::as_str)
                    .is_some_and(|t| t.contains(words))
            }) {
                return false;
            }
            parts.push(Content::part(k, notice));
        }
        None | Some(Value::Null) => {
            obj.insert(key.to_string(), content.value(notice));
        }
        Some(_) => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The notice goes on once: a turn that already holds it (a string, or a text part)
    /// is left as it is.
    #[test]
    fn the_notice_is_appended_once() {
        let n = "\n\nnotice";
        let mut t = json!({"role": "system", "content": "sys"});
        assert!(append_notice(&mut t, Shape::OpenAi, n, Content::Text));
        assert!(!append_notice(&mut t, Shape::OpenAi, n, Content::Text));
        assert_eq!(t["content"], "sys\n\nnotice");
        let mut t = json!({"role": "system", "content": [{"type": "text", "text": "sys"}]});
        let parts = Content::Parts("text");
        assert!(append_notice(&mut t, Shape::OpenAi, n, parts));
        assert!(!append_notice(&mut t, Shape::OpenAi, n, parts));
        assert_eq!(t["content"].as_array().unwrap().len(), 2);
        let mut t = json!({"from": "system", "value": "sys"});
        assert!(append_notice(&mut t, Shape::ShareGpt, n, Content::Text));
        assert!(!append_notice(&mut t, Shape::ShareGpt, n, Content::Text));
        assert_eq!(t["value"], "sys\n\nnotice");
        // Normalised in between, with no own system text: the notice's words come first.
        let mut t =
            json!({"from": "system", "value": "notice\n\nYou are a function calling AI model."});
        assert!(!append_notice(&mut t, Shape::ShareGpt, n, Content::Text));
        // Normalised in between: the notice is in front of the Hermes tool prompt.
        let mut t = json!({"from": "system", "value": "sys\n\nnotice\n\nYou are a function calling AI model. <tools>\n[]\n</tools>"});
        let before = t.clone();
        assert!(!append_notice(&mut t, Shape::ShareGpt, n, Content::Text));
        assert_eq!(t, before);
    }

    fn counted(turn: &Value, shape: Shape) -> Vec<String> {
        let mut out = Vec::new();
        for_each_text(turn, shape, &mut |s| out.push(s.to_string()));
        out
    }

    /// An OpenAI turn counts what traj-filter counts of it: content parts (`text`, else
    /// `value`), the reasoning, the tool calls. Before the format layer's rule, the
    /// reasoning was not counted, a part's `text` and `value` both were, and a
    /// non-string content counted as its JSON.
    #[test]
    fn openai_turns_count_the_format_rule() {
        let t = json!({
            "role": "assistant",
            "content": [{"type": "text", "text": "a", "value": "b"}, {"type": "reasoning", "value": "c"}],
            "reasoning": "r",
            "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]
        });
        assert_eq!(counted(&t, Shape::OpenAi), ["a", "c", "r", "f", "{}"]);
        assert!(counted(&json!({"role": "user", "content": 5}), Shape::OpenAi).is_empty());
        let t = json!({"role": "assistant", "content": "x", "tool_calls": [{"function": {"name": "f", "arguments": {"k": 1}}}]});
        assert_eq!(
            turn_text(&t, Shape::OpenAi),
            "x\n<tool_call>{\"name\": \"f\", \"arguments\": {\"k\":1}}</tool_call>"
        );
    }

    #[test]
    fn sharegpt_turns_count_value() {
        assert_eq!(
            counted(&json!({"from": "gpt", "value": "v"}), Shape::ShareGpt),
            ["v"]
        );
        assert_eq!(
            counted(&json!({"from": "gpt", "value": [1]}), Shape::ShareGpt),
            ["[1]"]
        );
        assert!(counted(&json!({"from": "gpt"}), Shape::ShareGpt).is_empty());
    }

    /// A row of typed parts gets its summary and notice as parts, under the key its
    /// parts use; a row with any string content gets strings.
    #[test]
    fn summary_and_notice_follow_the_rows_content() {
        let lf = [
            json!({"role": "system", "content": [{"type": "text", "value": "s"}]}),
            json!({"role": "user", "content": [{"type": "image"}, {"type": "text", "value": "u"}]}),
        ];
        let c = Content::of(&lf, Shape::OpenAi);
        assert_eq!(c, Content::Parts("value"));
        assert_eq!(
            summary_turn("sum", Shape::OpenAi, "user", c),
            json!({"role": "user", "content": [{"type": "text", "value": "sum"}]})
        );
        let mut sys = lf[0].clone();
        append_notice(&mut sys, Shape::OpenAi, " n", c);
        assert_eq!(sys["content"][1], json!({"type": "text", "value": " n"}));
        let oai = [json!({"role": "user", "content": [{"type": "text", "text": "u"}]})];
        assert_eq!(Content::of(&oai, Shape::OpenAi), Content::Parts("text"));
        let mixed = [oai[0].clone(), json!({"role": "assistant", "content": "a"})];
        assert_eq!(Content::of(&mixed, Shape::OpenAi), Content::Text);
        assert_eq!(Content::of(&lf, Shape::ShareGpt), Content::Text);
        assert_eq!(
            summary_turn("sum", Shape::ShareGpt, "human", Content::Text),
            json!({"from": "human", "value": "sum"})
        );
    }
}

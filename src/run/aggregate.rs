//! The aggregates of a run directory (`statistics.json`): records, turns, reasoning,
//! tools, usage and failure classes, over every record and failure line, traj's own
//! (OpenAI `messages`) and the reference's (ShareGPT `conversations` with `tool_stats`).

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value, json};

use crate::format::stats::ToolCount;

/// Aggregates over every record and failure in the run directory.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub records: u64,
    pub completed: u64,
    pub partial: u64,
    pub api_calls: u64,
    pub tools: BTreeMap<String, ToolCount>,
    pub assistant_turns: u64,
    pub turns_with_reasoning: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    pub cost: f64,
    pub failure_lines: u64,
    pub failure_classes: BTreeMap<String, u64>,
}

impl Stats {
    /// Count one raw record.
    pub fn add_record(&mut self, r: &Value) {
        self.records += 1;
        self.completed += u64::from(r.get("completed") == Some(&Value::Bool(true)));
        self.partial += u64::from(r.get("partial") == Some(&Value::Bool(true)));
        self.api_calls += r.get("api_calls").and_then(Value::as_u64).unwrap_or(0);
        if let Some(u) = r.get("usage") {
            self.add_usage(u);
        }
        let Some(messages) = r.get("messages").and_then(Value::as_array) else {
            self.add_sharegpt(r);
            return;
        };
        let mut names: HashMap<&str, &str> = HashMap::new();
        for m in messages {
            match m.get("role").and_then(Value::as_str) {
                Some("assistant") => {
                    self.assistant_turns += 1;
                    let scratch = m
                        .get("content")
                        .and_then(Value::as_str)
                        .is_some_and(|c| c.contains("<REASONING_SCRATCHPAD>"));
                    if scratch || crate::format::message::reasoning_text(m).is_some() {
                        self.turns_with_reasoning += 1;
                    }
                    for c in m
                        .get("tool_calls")
                        .and_then(Value::as_array)
                        .map(Vec::as_slice)
                        .unwrap_or(&[])
                    {
                        let name = c
                            .pointer("/function/name")
                            .and_then(Value::as_str)
                            .unwrap_or("unknown");
                        if let Some(id) = c.get("id").and_then(Value::as_str) {
                            names.insert(id, name);
                        }
                        self.tools.entry(name.to_string()).or_default().count += 1;
                    }
                }
                Some("tool") => {
                    let Some(name) = m
                        .get("tool_call_id")
                        .and_then(Value::as_str)
                        .and_then(|id| names.get(id))
                    else {
                        continue;
                    };
                    let content = crate::format::message::content_text(
                        m.get("content").unwrap_or(&Value::Null),
                    );
                    let t = self.tools.entry(name.to_string()).or_default();
                    if crate::format::model::tool_succeeded(&content) {
                        t.success += 1;
                    } else {
                        t.failure += 1;
                    }
                }
                _ => {}
            }
        }
    }

    /// Add another aggregate into this one.
    pub fn merge(&mut self, o: &Stats) {
        self.records += o.records;
        self.completed += o.completed;
        self.partial += o.partial;
        self.api_calls += o.api_calls;
        for (name, t) in &o.tools {
            let e = self.tools.entry(name.clone()).or_default();
            e.count += t.count;
            e.success += t.success;
            e.failure += t.failure;
        }
        self.assistant_turns += o.assistant_turns;
        self.turns_with_reasoning += o.turns_with_reasoning;
        self.prompt_tokens += o.prompt_tokens;
        self.completion_tokens += o.completion_tokens;
        self.total_tokens += o.total_tokens;
        self.cost += o.cost;
        self.failure_lines += o.failure_lines;
        for (c, n) in &o.failure_classes {
            *self.failure_classes.entry(c.clone()).or_default() += n;
        }
    }

    fn add_usage(&mut self, u: &Value) {
        let u = crate::llm::Usage::from_json(u);
        self.prompt_tokens += u.prompt_tokens;
        self.completion_tokens += u.completion_tokens;
        self.total_tokens += u.total_tokens;
        self.cost += u.cost.unwrap_or(0.0);
    }

    /// Count one failure line.
    pub fn add_failure(&mut self, f: &Value) {
        self.failure_lines += 1;
        let class = f.get("class").and_then(Value::as_str).unwrap_or("unknown");
        *self.failure_classes.entry(class.to_string()).or_default() += 1;
        if let Some(u) = f.get("usage") {
            self.add_usage(u);
        }
    }

    /// The turns and tools of a ShareGPT row (the reference's batch runner writes its
    /// records so): its gpt turns, with reasoning when a `<think>` block or a
    /// scratchpad holds more than white space, and its tools from its `tool_stats`,
    /// as the reference counts them.
    fn add_sharegpt(&mut self, r: &Value) {
        let Some(turns) = r.get("conversations").and_then(Value::as_array) else {
            return;
        };
        for t in turns {
            if t.get("from").and_then(Value::as_str) != Some("gpt") {
                continue;
            }
            self.assistant_turns += 1;
            let text = t.get("value").and_then(Value::as_str).unwrap_or("");
            let think = text
                .split_once("<think>")
                .map(|(_, rest)| rest.split_once("</think>").map_or(rest, |(r, _)| r))
                .is_some_and(|r| !r.trim().is_empty());
            if think || crate::format::hermes::scratchpad_reasoning(text) {
                self.turns_with_reasoning += 1;
            }
        }
        let stats = r.get("tool_stats").and_then(Value::as_object);
        for (name, s) in stats.into_iter().flatten() {
            let n = |k: &str| s.get(k).and_then(Value::as_u64).unwrap_or(0);
            if n("count") == 0 {
                continue;
            }
            let t = self.tools.entry(name.clone()).or_default();
            t.count += n("count");
            t.success += n("success");
            t.failure += n("failure");
        }
    }

    /// `tool_statistics` as the reference writes it (rates in percent, 2 decimals).
    pub fn tool_statistics(&self) -> Value {
        let round2 = |x: f64| (x * 100.0).round() / 100.0;
        let mut out = Map::new();
        for (name, t) in &self.tools {
            let answered = t.success + t.failure;
            let rate = |x: u64| {
                if answered == 0 {
                    0.0
                } else {
                    round2(x as f64 / answered as f64 * 100.0)
                }
            };
            out.insert(
                name.clone(),
                json!({"count": t.count, "success": t.success, "failure": t.failure,
                       "success_rate": rate(t.success), "failure_rate": rate(t.failure)}),
            );
        }
        Value::Object(out)
    }
}

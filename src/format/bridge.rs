//! hermes-agent's bridge tools and MCP tool names: what a bridge call is, which real
//! tool it ran with which arguments, and how a resolved trajectory keeps the original.
//!
//! Since 0.21 hermes-agent defers the tools a session rarely needs (its curated list:
//! `todo_list`, `process_manage`, `cronjob_manage`, `image_generate`, `computer_use`,
//! `session_search`, desktop GUI helpers; every MCP and non-core plugin tool) behind
//! three bridge tools ([`SEARCH`], [`DESCRIBE`], [`CALL`]). The model then calls
//! `tool_call` with `{"calls": [{"name": REAL, "arguments": {...}}]}`, and the agent runs
//! the real tool; the trajectory shows the bridge call. The reading here is the agent's
//! own (`tools/tool_search_validation.py`, `normalize_tool_call_entries`): `calls` a
//! list of `{name, arguments}` (or one such object, or that JSON in a string), else the
//! legacy single shape `{"name", "arguments"}`; a missing, `null` or blank `arguments`
//! is `{}`, a string is parsed as JSON and must hold an object; a name is stripped and
//! must not be a bridge tool. Only `connectors__` names may share one call (the agent
//! refuses a batch that names a local tool), so a call resolves to ONE real tool when it
//! has one entry ([`resolve`]); [`entries`] gives every entry (for `--valid-tools`).
//! `tool_search` and `tool_describe` run no other tool: they are real calls of their
//! own.
//!
//! MCP tools are named `mcp__<server>__<tool>` ([`is_mcp_name`]), remote connector
//! tools `connectors__<connector>__<tool>`; both are ordinary tool names everywhere.
//!
//! [`resolve_turns`] rewrites a trajectory's bridge calls as the real calls (and names
//! the results that answer them after the real tool), returning each original so the
//! row can keep it ([`originals_value`], the `bridge_calls` field); [`restore_turns`]
//! puts the originals back, so a resolved row normalised again gives the same row and
//! `--to openai` gives the calls as the model made them.

use serde_json::{Map, Value};

use crate::format::model::{Trajectory, Turn, call_arguments};

/// The bridge tool that searches the deferred tools: `{"queries": [...], "limit"?}`.
pub const SEARCH: &str = "tool_search";
/// The bridge tool that loads deferred tools' schemas: `{"names": [...]}`.
pub const DESCRIBE: &str = "tool_describe";
/// The bridge tool that runs deferred tools: `{"calls": [{"name", "arguments"}]}`.
pub const CALL: &str = "tool_call";
/// The three bridge tools.
pub const NAMES: [&str; 3] = [SEARCH, DESCRIBE, CALL];
/// The row field that keeps the original bridge calls of a resolved row.
pub const FIELD: &str = "bridge_calls";

/// True for a bridge tool's name.
pub fn is_bridge(name: &str) -> bool {
    NAMES.contains(&name)
}

/// `<prefix><a>__<b>` with `a` and `b` not empty.
fn two_part(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix)
        .and_then(|rest| rest.split_once("__"))
        .is_some_and(|(a, b)| !a.is_empty() && !b.is_empty())
}

/// True for an MCP tool's name, `mcp__<server>__<tool>`.
pub fn is_mcp_name(name: &str) -> bool {
    two_part(name, "mcp__")
}

/// True for a remote connector tool's name, `connectors__<connector>__<tool>`.
pub fn is_connector_name(name: &str) -> bool {
    two_part(name, "connectors__")
}

/// One real call inside a `tool_call` bridge call.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub name: String,
    /// Always an object.
    pub arguments: Value,
}

/// Why a `tool_call` bridge call names no tool the agent would run (its own refusals).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BridgeError {
    #[error("tool_call arguments are not a JSON object")]
    NotAnObject,
    #[error("tool_call has neither `calls` nor a `name`")]
    NoCalls,
    #[error("tool_call `calls` is not valid JSON")]
    CallsNotJson,
    #[error("tool_call `calls` is not a non-empty list")]
    CallsNotAList,
    #[error("tool_call calls[{0}] is not an object")]
    EntryNotAnObject(usize),
    #[error("tool_call calls[{0}] has no name")]
    EntryNoName(usize),
    #[error("tool_call calls[{0}] names the bridge tool {1:?}")]
    EntryIsBridge(usize, String),
    #[error("tool_call calls[{0}].arguments is not a JSON object")]
    EntryArgsNotAnObject(usize),
    #[error(
        "tool_call batches {0} calls, one of them a local tool (only connectors__ tools share a call)"
    )]
    LocalBatch(usize),
}

/// The entries of a `tool_call` bridge call's arguments (see the module docs).
pub fn entries(arguments: &Value) -> Result<Vec<Entry>, BridgeError> {
    let Value::Object(args) = arguments else {
        return Err(BridgeError::NotAnObject);
    };
    let parsed;
    let raw: &Value = match args.get("calls") {
        None | Some(Value::Null) => {
            if args
                .get("name")
                .and_then(Value::as_str)
                .is_none_or(|s| s.trim().is_empty())
            {
                return Err(BridgeError::NoCalls);
            }
            return entry(0, arguments).map(|e| vec![e]);
        }
        Some(Value::String(s)) => {
            parsed = serde_json::from_str::<Value>(s).map_err(|_| BridgeError::CallsNotJson)?;
            &parsed
        }
        Some(v) => v,
    };
    let list = match raw {
        Value::Object(_) => std::slice::from_ref(raw),
        Value::Array(l) if !l.is_empty() => l.as_slice(),
        _ => return Err(BridgeError::CallsNotAList),
    };
    let out = list
        .iter()
        .enumerate()
        .map(|(k, e)| entry(k, e))
        .collect::<Result<Vec<_>, _>>()?;
    if out.len() > 1 && out.iter().any(|e| !is_connector_name(&e.name)) {
        return Err(BridgeError::LocalBatch(out.len()));
    }
    Ok(out)
}

fn entry(k: usize, raw: &Value) -> Result<Entry, BridgeError> {
    let Value::Object(m) = raw else {
        return Err(BridgeError::EntryNotAnObject(k));
    };
    let name = m
        .get("name")
        .and_then(Value::as_str)
        .map(str::trim)
        .unwrap_or("");
    if name.is_empty() {
        return Err(BridgeError::EntryNoName(k));
    }
    if is_bridge(name) {
        return Err(BridgeError::EntryIsBridge(k, name.to_string()));
    }
    let arguments =
        call_arguments(m.get("arguments")).map_err(|_| BridgeError::EntryArgsNotAnObject(k))?;
    Ok(Entry {
        name: name.to_string(),
        arguments,
    })
}

/// The one real tool a call ran: `Some` for a `tool_call` bridge call with exactly one
/// entry, `None` for every other call (a tool of its own, a connector batch, or a
/// bridge call the agent refused).
pub fn resolve(name: &str, arguments: &Value) -> Option<Entry> {
    if name != CALL {
        return None;
    }
    match entries(arguments) {
        Ok(mut e) if e.len() == 1 => e.pop(),
        _ => None,
    }
}

/// The name a call counts under in `tool_stats`: the real tool of a bridge call that
/// resolves, else its own.
pub fn counted_name<'a>(name: &'a str, arguments: &Value) -> std::borrow::Cow<'a, str> {
    match resolve(name, arguments) {
        Some(e) => std::borrow::Cow::Owned(e.name),
        None => std::borrow::Cow::Borrowed(name),
    }
}

/// One resolved bridge call: the call's place among all calls of the trajectory (from
/// 0), the real tool it now names, and the original call.
#[derive(Debug, Clone, PartialEq)]
pub struct Original {
    pub call: usize,
    pub resolved: String,
    pub name: String,
    pub arguments: Value,
}

/// Rewrite every bridge call of `traj` that [`resolve`]s as the real call, and name
/// the result that answers it (the first result of the next tool turn named as the
/// bridge call, not yet taken) after the real tool. Returns the originals, in order.
pub fn resolve_turns(traj: &mut Trajectory) -> Vec<Original> {
    let mut out = Vec::new();
    let walked: Result<(), std::convert::Infallible> = rename_calls(traj, |ordinal, c| {
        let Some(e) = resolve(&c.name, &c.arguments) else {
            return Ok(None);
        };
        let name = std::mem::replace(&mut c.name, e.name.clone());
        let arguments = std::mem::replace(&mut c.arguments, e.arguments);
        let pair = (name.clone(), e.name.clone());
        out.push(Original {
            call: ordinal,
            resolved: e.name,
            name,
            arguments,
        });
        Ok(Some(pair))
    });
    let Ok(()) = walked;
    out
}

/// Call `f` with every tool call of `traj` and its ordinal (over the row); where `f`
/// renames the call (`Some((old, new))`), the result that answers it (the first result
/// named `old`, not yet taken, of the next tool turn) is named `new`.
fn rename_calls<E>(
    traj: &mut Trajectory,
    mut f: impl FnMut(usize, &mut crate::format::model::ToolCall) -> Result<Option<(String, String)>, E>,
) -> Result<(), E> {
    let mut ordinal = 0;
    let mut renamed: Vec<(String, String)> = Vec::new();
    for turn in &mut traj.turns {
        match turn {
            Turn::Gpt(g) => {
                renamed.clear();
                for c in &mut g.tool_calls {
                    renamed.extend(f(ordinal, c)?);
                    ordinal += 1;
                }
            }
            Turn::Tool(results) => {
                rename_results(results, &renamed);
                renamed.clear();
            }
            Turn::Human(_) => renamed.clear(),
        }
    }
    Ok(())
}

/// Name after `to` the first result named `from` not yet taken, for each `(from, to)`.
fn rename_results(results: &mut [crate::format::model::ToolResult], pairs: &[(String, String)]) {
    let mut taken = vec![false; results.len()];
    for (from, to) in pairs {
        if let Some(k) = (0..results.len()).find(|&k| !taken[k] && results[k].name == *from) {
            taken[k] = true;
            results[k].name = to.clone();
        }
    }
}

/// Why a row's `bridge_calls` field does not fit its calls.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestoreError {
    #[error(
        "`bridge_calls` is not a list of {{\"call\", \"resolved\", \"name\", \"arguments\"}} objects"
    )]
    Shape,
    #[error("`bridge_calls` names call {0}, which the row does not have")]
    NoSuchCall(usize),
    #[error("`bridge_calls` says call {0} is {1:?}, the row has {2:?}")]
    Mismatch(usize, String, String),
}

/// The `bridge_calls` value of `originals`.
pub fn originals_value(originals: &[Original]) -> Value {
    Value::Array(
        originals
            .iter()
            .map(|o| {
                let mut m = Map::new();
                m.insert("call".into(), Value::from(o.call));
                m.insert("resolved".into(), Value::String(o.resolved.clone()));
                m.insert("name".into(), Value::String(o.name.clone()));
                m.insert("arguments".into(), o.arguments.clone());
                Value::Object(m)
            })
            .collect(),
    )
}

fn read_originals(v: &Value) -> Result<Vec<Original>, RestoreError> {
    let Value::Array(list) = v else {
        return Err(RestoreError::Shape);
    };
    list.iter()
        .map(|o| {
            let call = o.get("call").and_then(Value::as_u64);
            let resolved = o.get("resolved").and_then(Value::as_str);
            let name = o.get("name").and_then(Value::as_str);
            match (call, resolved, name, o.get("arguments")) {
                (Some(c), Some(r), Some(n), Some(a)) => Ok(Original {
                    call: c as usize,
                    resolved: r.to_string(),
                    name: n.to_string(),
                    arguments: a.clone(),
                }),
                _ => Err(RestoreError::Shape),
            }
        })
        .collect()
}

/// Put back the original calls a `bridge_calls` value `v` keeps (see
/// [`resolve_turns`]): each named call must be the real tool it resolved to.
pub fn restore_turns(traj: &mut Trajectory, v: &Value) -> Result<(), RestoreError> {
    let originals = read_originals(v)?;
    let mut next = originals.iter().peekable();
    rename_calls(traj, |ordinal, c| {
        let Some(o) = next.next_if(|o| o.call == ordinal) else {
            return Ok(None);
        };
        if c.name != o.resolved {
            return Err(RestoreError::Mismatch(
                o.call,
                o.resolved.clone(),
                c.name.clone(),
            ));
        }
        c.name = o.name.clone();
        c.arguments = o.arguments.clone();
        Ok(Some((o.resolved.clone(), o.name.clone())))
    })?;
    match next.next() {
        Some(o) => Err(RestoreError::NoSuchCall(o.call)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_agents_shapes_resolve_to_one_tool() {
        let one = |v: Value| resolve(CALL, &v).map(|e| (e.name, e.arguments));
        let want = Some(("todo_list".to_string(), json!({"todos": []})));
        assert_eq!(
            one(json!({"calls": [{"name": "todo_list", "arguments": {"todos": []}}]})),
            want
        );
        assert_eq!(
            one(
                json!({"calls": "[{\"name\": \"todo_list\", \"arguments\": \"{\\\"todos\\\": []}\"}]"})
            ),
            want
        );
        assert_eq!(
            one(json!({"calls": {"name": " todo_list ", "arguments": {"todos": []}}})),
            want
        );
        assert_eq!(
            one(json!({"name": "todo_list", "arguments": {"todos": []}})),
            want
        );
        assert_eq!(
            one(json!({"calls": [{"name": "session_search", "arguments": ""}]})),
            Some(("session_search".to_string(), json!({})))
        );
        assert_eq!(resolve("todo_list", &json!({"calls": []})), None);
        assert_eq!(resolve(SEARCH, &json!({"queries": ["x"]})), None);
    }

    #[test]
    fn the_agents_refusals_resolve_to_nothing() {
        for (v, e) in [
            (json!({}), BridgeError::NoCalls),
            (json!({"calls": []}), BridgeError::CallsNotAList),
            (json!({"calls": "[{"}), BridgeError::CallsNotJson),
            (json!({"calls": [1]}), BridgeError::EntryNotAnObject(0)),
            (
                json!({"calls": [{"arguments": {}}]}),
                BridgeError::EntryNoName(0),
            ),
            (
                json!({"calls": [{"name": "tool_call", "arguments": {}}]}),
                BridgeError::EntryIsBridge(0, "tool_call".into()),
            ),
            (
                json!({"calls": [{"name": "a", "arguments": [1]}]}),
                BridgeError::EntryArgsNotAnObject(0),
            ),
            (
                json!({"calls": [{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]}),
                BridgeError::LocalBatch(2),
            ),
        ] {
            assert_eq!(entries(&v), Err(e), "{v}");
            assert_eq!(resolve(CALL, &v), None);
        }
        let batch = json!({"calls": [
            {"name": "connectors__gmail__SEND_EMAIL", "arguments": {}},
            {"name": "connectors__linear__CREATE_ISSUE", "arguments": {}}
        ]});
        assert_eq!(entries(&batch).unwrap().len(), 2);
        assert_eq!(resolve(CALL, &batch), None, "a batch names no single tool");
    }

    #[test]
    fn mcp_and_connector_names() {
        assert!(is_mcp_name("mcp__github__create_issue"));
        assert!(is_mcp_name("mcp__a__b__c"));
        for n in [
            "mcp__github",
            "mcp____x",
            "mcp__x__",
            "mcp_github_create",
            "github",
        ] {
            assert!(!is_mcp_name(n), "{n}");
        }
        assert!(is_connector_name("connectors__gmail__SEND_EMAIL"));
        assert!(!is_connector_name("mcp__gmail__send"));
    }
}

//! The page as the model reads it: Chromium's accessibility tree
//! (`Accessibility.getFullAXTree`) as indented text, one node a line
//! (`- button "Submit" [ref=e3]`), where every element one can act on carries a ref
//! that `browser_click` and `browser_type` take.

use std::collections::HashMap;

use serde_json::Value;

/// `Accessibility.getFullAXTree`, its answer read as plain JSON: the crate's typed
/// structs reject property names newer Chromium versions send.
#[derive(Debug, serde::Serialize)]
pub struct FullAxTree {}

impl headless_chrome::protocol::cdp::types::Method for FullAxTree {
    const NAME: &'static str = "Accessibility.getFullAXTree";
    type ReturnObject = Value;
}

/// Roles that get a ref: what a user clicks, types into or picks.
const ACTIONABLE: &[&str] = &[
    "button",
    "link",
    "textbox",
    "searchbox",
    "checkbox",
    "radio",
    "combobox",
    "listbox",
    "option",
    "menuitem",
    "menuitemcheckbox",
    "menuitemradio",
    "tab",
    "switch",
    "slider",
    "spinbutton",
    "treeitem",
];

/// Roles that only hold other nodes: not printed, their children are.
const TRANSPARENT: &[&str] = &[
    "generic",
    "none",
    "presentation",
    "InlineTextBox",
    "LineBreak",
    "LabelText",
    "WebArea",
    "paragraph",
    "div",
    "section",
];

/// The text of an AX value field (`role`, `name`, `value`) of `node`.
fn text(node: &Value, field: &str) -> String {
    match node.get(field).and_then(|v| v.get("value")) {
        Some(Value::String(s)) => s.split_whitespace().collect::<Vec<_>>().join(" "),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// The snapshot text (at most `max_chars`, cut with a note) and the refs it names
/// (`e1`, `e2`, ... to DOM backend node ids).
pub fn render(nodes: &[Value], max_chars: usize) -> (String, HashMap<String, u32>) {
    let by_id: HashMap<&str, &Value> = nodes
        .iter()
        .filter_map(|n| n.get("nodeId").and_then(Value::as_str).map(|id| (id, n)))
        .collect();
    let mut out = String::new();
    let mut refs = HashMap::new();
    if let Some(root) = nodes.first() {
        walk(root, &by_id, 0, "", &mut out, &mut refs);
    }
    if out.chars().count() > max_chars {
        let end = out
            .char_indices()
            .nth(max_chars)
            .map_or(out.len(), |(i, _)| i);
        out.truncate(end);
        out.push_str(
            "\n[... snapshot truncated; scroll or use browser_snapshot with full=false ...]\n",
        );
    }
    (out, refs)
}

fn walk(
    node: &Value,
    by_id: &HashMap<&str, &Value>,
    depth: usize,
    parent_name: &str,
    out: &mut String,
    refs: &mut HashMap<String, u32>,
) {
    let role = text(node, "role");
    let name = text(node, "name");
    let ignored = node
        .get("ignored")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut printed = false;
    let mut child_depth = depth;
    let is_text = role == "StaticText";
    let transparent = TRANSPARENT.contains(&role.as_str()) && name.is_empty();
    // A text node that repeats its parent's name (a button's label) says nothing new.
    let skip = ignored
        || role == "InlineTextBox"
        || transparent
        || (is_text && (name.is_empty() || name == parent_name));
    {
        if !skip {
            let mut line = format!("{}- ", "  ".repeat(depth));
            if is_text {
                line.push_str(&format!("text {name:?}"));
            } else {
                line.push_str(&role);
                if !name.is_empty() {
                    line.push_str(&format!(" {name:?}"));
                }
                let value = text(node, "value");
                if !value.is_empty() && value != name {
                    line.push_str(&format!(" value={value:?}"));
                }
                if let (true, Some(id)) = (
                    ACTIONABLE.contains(&role.as_str()),
                    node.get("backendDOMNodeId")
                        .and_then(Value::as_u64)
                        .and_then(|i| u32::try_from(i).ok()),
                ) {
                    let r = format!("e{}", refs.len() + 1);
                    line.push_str(&format!(" [ref={r}]"));
                    refs.insert(r, id);
                }
            }
            out.push_str(&line);
            out.push('\n');
            printed = true;
            child_depth = depth + 1;
        }
    }
    let pname = if printed { name.as_str() } else { parent_name };
    let children = node.get("childIds").and_then(Value::as_array);
    for c in children.into_iter().flatten().filter_map(Value::as_str) {
        if let Some(child) = by_id.get(c) {
            walk(child, by_id, child_depth, pname, out, refs);
        }
    }
}

//! The browser tools: each takes the task's [`Session`] (started on first use) and
//! the call's arguments, and returns what the model reads.

use std::time::{Duration, Instant};

use headless_chrome::protocol::cdp::DOM::ResolveNode;
use headless_chrome::protocol::cdp::Input::InsertText;
use headless_chrome::protocol::cdp::Page::CaptureScreenshotFormatOption;
use headless_chrome::protocol::cdp::Runtime::CallFunctionOn;
use serde_json::{Value, json};

use super::{ACTION_TIMEOUT, BrowserError, PAGE_BUDGET, Session, allowed, snapshot};

/// Characters of one snapshot (`full`: the whole page).
const SNAPSHOT_CHARS: usize = 12_000;
const SNAPSHOT_FULL_CHARS: usize = 60_000;
/// Images `browser_get_images` lists.
const MAX_IMAGES: usize = 50;

type R = Result<Value, BrowserError>;

fn string_arg<'a>(args: &'a Value, key: &str) -> Result<&'a str, BrowserError> {
    match args.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.as_str()),
        _ => Err(BrowserError::Args(format!(
            "missing required argument \"{key}\" (a non-empty string)"
        ))),
    }
}

fn page_info(s: &Session) -> Value {
    let tab = s.tab();
    json!({"url": tab.get_url(), "title": tab.get_title().unwrap_or_default()})
}

fn has_page(s: &Session) -> Result<(), BrowserError> {
    let url = s.tab().get_url();
    if url.is_empty() || url == "about:blank" {
        return Err(BrowserError::NoPage);
    }
    Ok(())
}

/// How long an action that may navigate (a click, a key) waits for the page to load.
const SETTLE: Duration = Duration::from_secs(15);
/// How long such an action waits for a navigation to begin before taking the page as
/// it is.
const GRACE: Duration = Duration::from_millis(500);

/// What an action is expected to set off.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// A new document (`browser_navigate`, `browser_back`).
    Navigation,
    /// Maybe a new document, maybe script work only.
    Maybe,
}

fn dialog_open(s: &Session) -> bool {
    s.events
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .dialog
        .is_some()
}

/// Mark the current document, so that [`settle`] can tell a new one from it.
fn mark(s: &Session) {
    if !dialog_open(s) {
        let _ = s.tab().evaluate("window.__trajOld = true", false);
    }
}

/// Wait for what an action set off: until a new document (one without the mark) has
/// loaded (`readyState` complete), a dialog opens, or, when a navigation is only
/// possible, the page is loaded and none began within [`GRACE`]. Polls the page itself
/// rather than waiting for one lifecycle event, which a loaded machine can let slip
/// by. `false`: `limit` ran out.
fn settle(s: &Session, expect: Expect, limit: Duration) -> bool {
    let start = Instant::now();
    loop {
        if dialog_open(s) {
            return true;
        }
        // A string, not an array: only primitives come back by value.
        let state = s
            .tab()
            .evaluate(
                "(window.__trajOld ? 'old ' : 'new ') + document.readyState",
                false,
            )
            .ok()
            .and_then(|r| r.value);
        if let Some(Value::String(v)) = state {
            let fresh = v.starts_with("new ");
            let complete = v.ends_with(" complete");
            if complete && (fresh || (expect == Expect::Maybe && start.elapsed() >= GRACE)) {
                return true;
            }
        }
        if start.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn navigate(s: &mut Session, args: &Value) -> R {
    let url = string_arg(args, "url")?.trim().to_string();
    let url = if url.contains("://") || url.starts_with("about:") || url.starts_with("data:") {
        url
    } else {
        format!("https://{url}")
    };
    if !allowed(&url, s.allow_private) || url.starts_with("data:") {
        return Err(BrowserError::Refused(url));
    }
    if s.pages >= PAGE_BUDGET {
        return Err(BrowserError::Budget);
    }
    s.pages += 1;
    s.refs.clear();
    mark(s);
    s.tab().navigate_to(&url)?;
    if !settle(s, Expect::Navigation, ACTION_TIMEOUT) {
        return Err(BrowserError::Cdp(format!(
            "{url} did not finish loading within {} s",
            ACTION_TIMEOUT.as_secs()
        )));
    }
    let mut v = page_info(s);
    v["pages_left"] = json!(PAGE_BUDGET - s.pages);
    Ok(v)
}

pub fn snapshot(s: &mut Session, args: &Value) -> R {
    has_page(s)?;
    let full = args.get("full").and_then(Value::as_bool).unwrap_or(false);
    let tree = s.tab().call_method(snapshot::FullAxTree {})?;
    let nodes = tree
        .get("nodes")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let (text, refs) = snapshot::render(
        &nodes,
        if full {
            SNAPSHOT_FULL_CHARS
        } else {
            SNAPSHOT_CHARS
        },
    );
    s.refs = refs;
    let mut v = page_info(s);
    v["snapshot"] = json!(text);
    v["element_count"] = json!(s.refs.len());
    if let Some((kind, message)) = &s.events.lock().unwrap_or_else(|e| e.into_inner()).dialog {
        v["pending_dialog"] = json!({"type": kind, "message": message});
    }
    Ok(v)
}

/// The JavaScript object of a snapshot ref.
fn object_of(s: &Session, args: &Value) -> Result<String, BrowserError> {
    let r = string_arg(args, "ref")?;
    let key = r.trim().trim_start_matches('@').trim_start_matches("ref=");
    let id = *s
        .refs
        .get(key)
        .ok_or_else(|| BrowserError::UnknownRef(r.to_string()))?;
    let node = s.tab().call_method(ResolveNode {
        node_id: None,
        backend_node_id: Some(id),
        object_group: Some("traj".to_string()),
        execution_context_id: None,
    })?;
    node.object
        .object_id
        .ok_or_else(|| BrowserError::Cdp(format!("element {r} is gone; take a new snapshot")))
}

fn call_on(s: &Session, object: String, function: &str, args: Vec<Value>) -> R {
    let r = s.tab().call_method(CallFunctionOn {
        function_declaration: function.to_string(),
        object_id: Some(object),
        arguments: Some(
            args.into_iter()
                .map(|a| headless_chrome::protocol::cdp::Runtime::CallArgument {
                    value: Some(a),
                    unserializable_value: None,
                    object_id: None,
                })
                .collect(),
        ),
        silent: Some(true),
        return_by_value: Some(true),
        generate_preview: None,
        user_gesture: Some(true),
        await_promise: None,
        execution_context_id: None,
        object_group: None,
        throw_on_side_effect: None,
        unique_context_id: None,
        serialization_options: None,
    })?;
    if let Some(e) = r.exception_details {
        return Err(BrowserError::Cdp(format!("the page threw: {}", e.text)));
    }
    Ok(r.result.value.unwrap_or(Value::Null))
}

pub fn click(s: &mut Session, args: &Value) -> R {
    let obj = object_of(s, args)?;
    mark(s);
    call_on(
        s,
        obj,
        "function() { this.scrollIntoView({block: 'center'}); this.click(); }",
        vec![],
    )?;
    settle(s, Expect::Maybe, SETTLE);
    let mut v = page_info(s);
    v["clicked"] = json!(string_arg(args, "ref")?);
    Ok(v)
}

pub fn type_text(s: &mut Session, args: &Value) -> R {
    let text = match args.get("text") {
        Some(Value::String(t)) => t.clone(),
        _ => {
            return Err(BrowserError::Args(
                "missing required argument \"text\" (a string)".into(),
            ));
        }
    };
    let obj = object_of(s, args)?;
    // Focus the field and clear it, then type as a user would (input events fire).
    call_on(
        s,
        obj,
        "function() { this.scrollIntoView({block: 'center'}); this.focus(); \
         if ('value' in this) { this.value = ''; } \
         else if (this.isContentEditable) { this.textContent = ''; } }",
        vec![],
    )?;
    mark(s);
    s.tab().call_method(InsertText { text: text.clone() })?;
    Ok(settled_after_input(s, "typed", &text))
}

pub fn scroll(s: &mut Session, args: &Value) -> R {
    has_page(s)?;
    let dir = string_arg(args, "direction")?;
    let dy = match dir {
        "down" => "window.innerHeight * 0.8",
        "up" => "-window.innerHeight * 0.8",
        _ => {
            return Err(BrowserError::Args(format!(
                "direction {dir:?}: use \"up\" or \"down\""
            )));
        }
    };
    let r = s.tab().evaluate(
        &format!("window.scrollBy(0, {dy}); [Math.round(window.scrollY), document.documentElement.scrollHeight]"),
        false,
    )?;
    let mut v = page_info(s);
    v["scroll"] = r.value.unwrap_or(Value::Null);
    Ok(v)
}

pub fn back(s: &mut Session, _args: &Value) -> R {
    has_page(s)?;
    s.refs.clear();
    mark(s);
    s.tab().evaluate("history.back()", false)?;
    // With no page to go back to, the wait runs out and the page is as it was.
    settle(s, Expect::Navigation, SETTLE);
    Ok(page_info(s))
}

pub fn press(s: &mut Session, args: &Value) -> R {
    has_page(s)?;
    let key = string_arg(args, "key")?;
    mark(s);
    s.tab().press_key(key)?;
    Ok(settled_after_input(s, "pressed", key))
}

/// The page once an input action (typing, a key) has settled, with what was sent
/// under `field`.
fn settled_after_input(s: &Session, field: &str, sent: &str) -> Value {
    settle(s, Expect::Maybe, SETTLE);
    let mut v = page_info(s);
    v[field] = json!(sent);
    v
}

pub fn get_images(s: &mut Session, _args: &Value) -> R {
    has_page(s)?;
    let js = format!(
        "JSON.stringify(Array.from(document.images).slice(0, {MAX_IMAGES}).map(i => \
         ({{src: i.currentSrc || i.src, alt: i.alt || '', width: i.naturalWidth, height: i.naturalHeight}})))"
    );
    let r = s.tab().evaluate(&js, false)?;
    let list: Value = r
        .value
        .as_ref()
        .and_then(Value::as_str)
        .and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or(json!([]));
    let mut v = page_info(s);
    v["images"] = list;
    Ok(v)
}

pub fn console(s: &mut Session, args: &Value) -> R {
    has_page(s)?;
    let mut v = page_info(s);
    if let Some(expr) = args.get("expression").and_then(Value::as_str) {
        let r = s.tab().evaluate(expr, true)?;
        v["result"] = r
            .value
            .unwrap_or_else(|| json!(r.description.unwrap_or_default()));
    }
    let clear = args.get("clear").and_then(Value::as_bool) == Some(true);
    // The page's own log (see `CONSOLE_HOOK`), a JSON string: only primitives come
    // back by value.
    let page: Vec<Value> = s
        .tab()
        .evaluate(
            "JSON.stringify(Array.from(window.__trajConsole || []))",
            false,
        )
        .ok()
        .and_then(|r| r.value)
        .and_then(|v| v.as_str().and_then(|t| serde_json::from_str(t).ok()))
        .unwrap_or_default();
    if clear {
        let _ = s.tab().evaluate(
            "window.__trajConsole && (window.__trajConsole.length = 0)",
            false,
        );
    }
    let mut ev = s.events.lock().unwrap_or_else(|e| e.into_inner());
    let mut messages: Vec<Value> = ev.console.iter().map(|m| json!(m)).collect();
    messages.extend(page);
    v["messages"] = json!(messages);
    if clear {
        ev.console.clear();
    }
    Ok(v)
}

pub fn dialog(s: &mut Session, args: &Value) -> R {
    let action = string_arg(args, "action")?;
    let pending = s
        .events
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .dialog
        .clone();
    let Some((kind, message)) = pending else {
        return Err(BrowserError::Args("no dialog is open".into()));
    };
    let d = s.tab().get_dialog();
    match action {
        "accept" => {
            let text = args
                .get("prompt_text")
                .and_then(Value::as_str)
                .map(str::to_string);
            d.accept(text)?
        }
        "dismiss" => d.dismiss()?,
        _ => {
            return Err(BrowserError::Args(format!(
                "action {action:?}: use \"accept\" or \"dismiss\""
            )));
        }
    }
    s.events.lock().unwrap_or_else(|e| e.into_inner()).dialog = None;
    settle(s, Expect::Maybe, SETTLE);
    let mut v = page_info(s);
    v["dialog"] = json!({"type": kind, "message": message, "action": action});
    Ok(v)
}

/// A PNG screenshot of the viewport, as a `data:` URL (for `browser_vision`).
pub fn screenshot_data_url(s: &mut Session) -> Result<String, BrowserError> {
    has_page(s)?;
    let png = s
        .tab()
        .capture_screenshot(CaptureScreenshotFormatOption::Png, None, None, true)?;
    Ok(format!(
        "data:image/png;base64,{}",
        crate::toolbox::llm_tools::base64(&png)
    ))
}

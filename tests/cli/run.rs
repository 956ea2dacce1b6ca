//! traj-run against the stand-in endpoint (`tests/standin`).

use serde_json::{Value, json};

use crate::standin::Standin;

fn post(url: &str, body: &Value) -> Result<Value, (u16, Option<String>, String)> {
    match ureq::post(&format!("{url}/chat/completions")).send_json(body) {
        Ok(r) => Ok(r.into_json().unwrap()),
        Err(ureq::Error::Status(code, r)) => {
            let ra = r.header("retry-after").map(str::to_string);
            Err((code, ra, r.into_string().unwrap_or_default()))
        }
        Err(e) => panic!("transport: {e}"),
    }
}

#[test]
fn standin_serves_scripted_turns_errors_and_records_requests() {
    let s = Standin::json(json!({
        "queue": [{"status": 429, "retry_after": "0", "error": "slow down"}],
        "rules": [{
            "match": "weather",
            "turns": [
                {"reasoning": "need a tool", "reasoning_field": "reasoning_content",
                 "tool_calls": [{"name": "terminal", "arguments": {"command": "echo {turn}"}}]},
                {"content": "It said {tool_output}", "reasoning": "done", "reasoning_field": "reasoning_details"}
            ],
            "last": {"content": "final without tools"}
        }]
    }));
    let url = s.url();
    let tools = json!([{"type": "function", "function": {"name": "terminal", "parameters": {}}}]);
    let first = json!({"model": "m", "messages": [{"role": "user", "content": "weather?"}], "tools": tools});
    let e = post(&url, &first).unwrap_err();
    assert_eq!(e.0, 429);
    assert_eq!(e.1.as_deref(), Some("0"));
    let r = post(&url, &first).unwrap();
    let m = &r["choices"][0]["message"];
    assert_eq!(m["reasoning_content"], "need a tool");
    assert_eq!(m["tool_calls"][0]["function"]["name"], "terminal");
    assert_eq!(
        m["tool_calls"][0]["function"]["arguments"],
        r#"{"command":"echo 0"}"#
    );
    assert_eq!(r["choices"][0]["finish_reason"], "tool_calls");
    let second = json!({"model": "m", "tools": tools, "messages": [
        {"role": "user", "content": "weather?"}, m.clone(),
        {"role": "tool", "tool_call_id": "x", "content": "sunny"}]});
    let r = post(&url, &second).unwrap();
    assert_eq!(r["choices"][0]["message"]["content"], "It said sunny");
    assert_eq!(
        r["choices"][0]["message"]["reasoning_details"][0]["text"],
        "done"
    );
    let mut no_tools = second.clone();
    no_tools.as_object_mut().unwrap().remove("tools");
    let r = post(&url, &no_tools).unwrap();
    assert_eq!(r["choices"][0]["message"]["content"], "final without tools");
    // Unmatched prompts get the default echo.
    let r = post(
        &url,
        &json!({"messages": [{"role": "user", "content": "hi"}]}),
    )
    .unwrap();
    assert_eq!(r["choices"][0]["message"]["content"], "Answer to: hi");
    assert!(r["usage"]["total_tokens"].as_u64().unwrap() > 0);
    assert_eq!(s.count(), 5);
    assert_eq!(s.requests().len(), 5);
    assert_eq!(s.requests()[0]["messages"][0]["content"], "weather?");
}

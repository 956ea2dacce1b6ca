//! Tests of the Hermes envelope: rendering, parsing and their round trips.

use super::*;
use serde_json::json;

fn call(name: &str, args: Value) -> ToolCall {
    ToolCall {
        id: None,
        name: name.into(),
        arguments: args,
    }
}

fn gpt(r: Option<&str>, c: &str, calls: Vec<ToolCall>) -> GptTurn {
    GptTurn {
        reasoning: r.map(str::to_string),
        content: c.into(),
        tool_calls: calls,
    }
}

#[test]
fn gpt_turns_round_trip_through_the_text() {
    let cases = vec![
        gpt(
            Some("R"),
            "C",
            vec![call("a", json!({"x": 1})), call("b", json!({}))],
        ),
        gpt(None, "", vec![call("a", json!({"x": "</tool_call>"}))]),
        gpt(None, "just text", vec![]),
        gpt(None, "", vec![]),
        gpt(Some("R  \n"), "", vec![]),
        gpt(None, "<think>x</think> answer", vec![]),
        gpt(None, "<think>\n  \n</think>\nfoo", vec![]),
        gpt(None, "<think>\n</think>\n<think>x</think>y", vec![]),
        gpt(Some("R"), "<think>\nX\n</think>\nY", vec![]),
        gpt(None, "  lead", vec![call("a", json!({"q": "<think>"}))]),
        gpt(Some("r"), "trail\n\n", vec![call("a", json!(null))]),
        gpt(None, "stray </think> in text", vec![]),
        gpt(
            Some("<REASONING_SCRATCHPAD>"),
            "<REASONING_SCRATCHPAD>s</REASONING_SCRATCHPAD>",
            vec![],
        ),
    ];
    for g in cases {
        let t = render_gpt(&g).unwrap();
        let back = parse_gpt(&t).unwrap();
        assert_eq!(render_gpt(&back).unwrap(), t, "{g:?}");
    }
}

#[test]
fn the_scanner_reads_tags_leniently_and_names_the_first_problem() {
    let g = scan_gpt("<think>\nR\n</think>\n<tool_call>\n{\"a\": 1}\n</tool_call> <tool_call>x");
    assert!(g.reasoning);
    assert_eq!(g.calls, ["{\"a\": 1}", "x"]);
    assert_eq!(g.error, Some(TagError::CallNeverClosed));
    let g = scan_gpt("<think> </think></think><tool_response>");
    assert!(!g.reasoning);
    assert_eq!(g.error, Some(TagError::NoOpening(Tag::ThinkClose)));
    assert_eq!(
        scan_gpt("<think>r<tool_call>c</tool_call>")
            .error
            .map(|e| e.to_string()),
        Some("<tool_call> inside an unclosed <think>".into())
    );
    assert_eq!(
        response_bodies(" <tool_response> a </tool_response>\n<tool_response>b</tool_response>"),
        Ok(vec!["a", "b"])
    );
    for (v, e) in [
        ("", ToolTurnError::NoBlock),
        (
            "x <tool_response>a</tool_response>",
            ToolTurnError::TextOutside,
        ),
        (
            "<tool_response>a</tool_response> x",
            ToolTurnError::TextAfter,
        ),
        ("<tool_response>a", ToolTurnError::NeverClosed),
    ] {
        assert_eq!(response_bodies(v), Err(e), "{v:?}");
    }
    let sys = "within <tools> </tools> tags\n<tools>\n[]\n</tools>";
    let opens: Vec<usize> = tools_openings(sys).collect();
    assert_eq!(opens.len(), 2);
    assert_eq!(
        tools_closing(sys, opens[1]).map(|e| sys[opens[1]..e].trim()),
        Some("[]")
    );
    assert_eq!(
        remove_call_tags("<tool_call>a</tool_call><think>"),
        "a<think>"
    );
    assert!(scratchpad_reasoning("x<REASONING_SCRATCHPAD> y"));
    assert!(!scratchpad_reasoning(
        "<REASONING_SCRATCHPAD> </REASONING_SCRATCHPAD>y"
    ));
}

#[test]
fn parse_errors_read_as_before() {
    assert_eq!(
        parse_gpt("<tool_call>\n{\"a\": 1}\n</tool_call>")
            .unwrap_err()
            .to_string(),
        "<tool_call> 1: no \"name\" string"
    );
    assert_eq!(
        parse_tool("<tool_response>x").unwrap_err().to_string(),
        "<tool_response> 1 has no closing </tool_response>"
    );
    assert_eq!(
        parse_system("<tools>[1]</tools>")
            .unwrap()
            .unwrap_err()
            .to_string(),
        "<tools>: a tool schema must be an object, found a number"
    );
}

#[test]
fn envelope_breakers_are_refused() {
    assert!(render_gpt(&gpt(Some("a</think>b"), "", vec![])).is_err());
    assert!(render_gpt(&gpt(None, "see <tool_call>", vec![])).is_err());
    assert!(render_gpt(&gpt(Some("R"), "ok </think>", vec![])).is_ok());
}

#[test]
fn tool_turns_round_trip_and_tolerate_other_writers() {
    let rs = vec![
        ToolResult {
            tool_call_id: "c1".into(),
            name: "a".into(),
            content: json!({"out": "x</tool_response>y"}),
        },
        ToolResult {
            tool_call_id: String::new(),
            name: "b".into(),
            content: json!("plain"),
        },
    ];
    let t = render_tool(&rs);
    assert_eq!(parse_tool(&t).unwrap(), rs);
    let other = "<tool_response>{\"name\": \"a\", \"content\": 1}</tool_response>\n";
    let p = parse_tool(other).unwrap();
    assert_eq!((p[0].name.as_str(), &p[0].content), ("a", &json!(1)));
    let raw = parse_tool("{\"temp\": 20}").unwrap();
    assert_eq!(raw[0].content, json!({"temp": 20}));
}

#[test]
fn system_prompt_round_trips_tools() {
    let tools = vec![ToolSpec {
        name: "t".into(),
        description: "d </tools>".into(),
        parameters: json!({"type": "object"}),
    }];
    let s = system_prompt(&tools);
    assert_eq!(parse_system(&s).unwrap().unwrap(), tools);
    assert_eq!(parse_system(&system_prompt(&[])).unwrap().unwrap(), vec![]);
    assert!(parse_system("You are helpful. Use <tools> </tools> tags.").is_none());
    let hfc = "Here are the tools: <tools> {\"type\": \"function\", \"function\": {\"name\": \"x\"}} {\"name\": \"y\"} </tools> go";
    let got = parse_system(hfc).unwrap().unwrap();
    assert_eq!(
        got.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        ["x", "y"]
    );
}

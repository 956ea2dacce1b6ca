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
    for mut g in cases {
        // As every reader gives a turn: a leading think block is its reasoning.
        take_leading_think(&mut g);
        let t = render_gpt(&g).unwrap();
        let back = parse_gpt(&t).unwrap();
        assert_eq!(render_gpt(&back).unwrap(), t, "{g:?}");
        assert_eq!(parse_gpt(&t).unwrap(), back, "{t:?}");
    }
}

/// A leading think block is reasoning however it is framed, never answer text; the
/// text written for the turn is the canonical framing, which reads back the same.
#[test]
fn a_leading_think_block_is_reasoning_in_any_framing() {
    let c = |name: &str| call(name, json!({}));
    let cases = [
        ("<think>R2</think>done", gpt(Some("R2"), "done", vec![])),
        (
            "<think>\nR\n</think>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
            gpt(Some("R"), "", vec![c("f")]),
        ),
        (
            "<think>\n</think>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
            gpt(None, "", vec![c("f")]),
        ),
        (
            "\n<think> R </think>\n\nHi",
            gpt(Some(" R "), "\nHi", vec![]),
        ),
        (
            "<think></think><think>x</think>y",
            gpt(Some("x"), "y", vec![]),
        ),
        ("<think>\n  \n</think>\nfoo", gpt(None, "foo", vec![])),
        // Not leading: answer text.
        (
            "Hi <think>x</think>",
            gpt(None, "Hi <think>x</think>", vec![]),
        ),
    ];
    for (text, want) in cases {
        let (got, checked) = parse_gpt_checked(text).unwrap();
        assert_eq!(got.dropped_keys, 0, "{text:?}");
        let got = got.value;
        assert_eq!(got, want, "{text:?}");
        let canonical = render_gpt(&got).unwrap();
        let framed = text.trim_start().starts_with("<think>");
        assert_eq!(checked, framed && canonical == text, "{text:?}");
        assert_eq!(parse_gpt(&canonical).unwrap(), got, "{canonical:?}");
        // The same text as an OpenAI reply's content reads as the same turn.
        let mut g = gpt(None, text, vec![]);
        take_leading_think(&mut g);
        assert_eq!(g.reasoning, want.reasoning, "{text:?}");
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
    assert_eq!(
        convert_scratchpad("<REASONING_SCRATCHPAD>a</REASONING_SCRATCHPAD>b"),
        "<think>a</think>b"
    );
    // Inside a <think> block the scratchpad tags are text (hermes-agent's own spelling
    // of a `reasoning` field that holds one); after it they are tags again.
    let nested = "<think>\n<REASONING_SCRATCHPAD>x</REASONING_SCRATCHPAD>\n</think>\nans";
    assert_eq!(convert_scratchpad(nested), nested);
    assert_eq!(
        convert_scratchpad("<think>a</think><REASONING_SCRATCHPAD>b"),
        "<think>a</think><think>b"
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
    // A key twice: no JSON body (one value would take the other's place), its text.
    let body = "{\"name\": \"f\", \"content\": {\"status\": \"fail\", \"status\": \"ok\"}}";
    let twice = format!("<tool_response>\n{body}\n</tool_response>");
    assert_eq!(parse_tool(&twice).unwrap()[0].content, json!(body));
    assert!(super::quick::parse_tool_quick(&twice).is_none());
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

/// The system texts of the Hermes fixtures, as written and edited in the ways the quick
/// reader tells apart: wherever `parse_system_quick` reads the tools, they are
/// `parse_system`'s, and the prompt written from them is the same bytes.
#[test]
fn quick_tool_list_is_the_general_one() {
    let mut texts = crate::fixtures::hermes_turns("system");
    let tools = vec![ToolSpec {
        name: "t</tool_call>".into(),
        description: "d\n\"x\"".into(),
        parameters: json!({"type": "object", "properties": {"a": {"enum": ["</think>", 1.50, -0]}}}),
    }];
    texts.push(system_prompt(&tools));
    texts.push(system_prompt(&[]));
    let edits: &[(&str, &str)] = &[
        ("\"name\": ", "\"function\": {}, \"name\": "),
        ("\"name\": ", "\"name\": 1, \"x\": "),
        ("\"description\": ", "\"description\": 7, \"d\": "),
        ("\"description\": ", "\"name\": \"again\", \"d\": "),
        ("\"parameters\": {", "\"parameters\": null, \"p\": {"),
        ("\"parameters\": {", "\"p\": {"),
        (
            "\"parameters\": {",
            "\"parameters\": {\"a\": \"</think>\", ",
        ),
        ("\"parameters\": {", "\"parameters\": {\"a\": 1e5, "),
        ("\"parameters\": {", "\"parameters\": {\"a\":1, "),
        ("\"type\": ", "\"type\": 1, \"type\": "),
        ("\"}", "\\u00e9\"}"),
        ("\"}", "\\/\"}"),
        ("[{", "[ {"),
        ("[{", "[{\"name\": \"x\"}, {"),
        ("[{", "[]\n</tools>[{"),
        ("[{", "[1, {"),
        ("[{", "{"),
        ("}]", "}, ]"),
        ("}]", "}]]"),
        ("}]", "}],"),
        ("}]", "}] {\"name\": \"more\"}"),
        ("\n</tools>", "</tools>"),
        ("\n</tools>", "\n"),
        ("<tools>\n[", "<tools>\n  ["),
        ("<tools>", "<tools> x"),
    ];
    let (mut read, mut tried, mut counted) = (0, 0, 0);
    for text in &texts {
        for v in &crate::fixtures::edited(text, edits) {
            tried += 1;
            let Some(quick) = parse_system_quick(v) else {
                continue;
            };
            read += 1;
            let general = parse_system(v);
            let Some(quick) = quick else {
                assert!(general.is_none(), "{v}");
                continue;
            };
            let general = parse_system_counted(v).expect("a block").expect("read");
            let dropped: usize = quick.iter().map(|t| t.dropped_keys).sum();
            assert_eq!(dropped, general.dropped_keys, "{v}");
            counted += usize::from(dropped > 0);
            let general = general.value;
            let raw: Vec<Option<&str>> = quick
                .iter()
                .map(|t| t.parameters.clone().map(|p| &v[p]))
                .collect();
            let specs: Vec<ToolSpec> = quick.iter().map(|t| t.spec.clone()).collect();
            assert_eq!(
                system_prompt_with(&specs, &raw),
                system_prompt(&general),
                "{v}"
            );
            for (q, g) in specs.iter().zip(&general) {
                assert_eq!((&q.name, &q.description), (&g.name, &g.description), "{v}");
            }
            assert_eq!(specs.len(), general.len());
        }
    }
    assert!(read > tried / 3, "{read} of {tried} read quickly");
    assert!(counted > 10, "{counted} lists with keys not carried");
}

/// `find_tag`'s searchers are indexed by the tag's discriminant: `TAGS` is in that order.
#[test]
fn tags_are_listed_in_discriminant_order() {
    for (i, t) in TAGS.iter().enumerate() {
        assert_eq!(*t as usize, i);
        let text = format!("ab{}{}", t.text(), t.text());
        assert_eq!(find_tag(&text, *t, 0), Some(2));
        assert_eq!(find_tag(&text, *t, 3), Some(2 + t.text().len()));
    }
}

/// The tool texts of the Hermes fixtures, as written and edited in the ways the quick
/// reader tells apart: wherever `parse_tool_quick` reads a turn, its results are
/// `parse_tool`'s, a content kept as text is what `response_json` writes for the parsed
/// content and its outcome is `classify_result`'s.
#[test]
fn quick_tool_results_are_the_general_ones() {
    let mut texts = crate::fixtures::hermes_turns("tool");
    let contents = [
        json!({"error": null, "output": "ok"}),
        json!({"error": "boom"}),
        json!({"success": false}),
        json!({"success": true, "content": {"error": 1}}),
        json!({"content": {"error": null}, "x": [1, 2.50]}),
        json!({"content": "error: no"}),
        json!("error: failed"),
        json!(""),
        json!("{\"error\": 1}"),
        json!("[1]"),
        json!([1, {"a": "</think>"}]),
        json!(null),
        json!(3),
        json!({}),
    ];
    for c in &contents {
        let r = ToolResult {
            tool_call_id: "call_1".into(),
            name: "t".into(),
            content: c.clone(),
        };
        texts.push(render_tool(&[r.clone(), r]));
    }
    let edits: &[(&str, &str)] = &[
        ("\"name\": ", "\"x\": 1, \"name\": "),
        ("\"name\": ", "\"nam\": "),
        ("\"content\": ", "\"cont\": "),
        ("\"tool_call_id\": ", "\"tool_call_id\": 5, \"t\": "),
        ("\"name\": \"", "\"name\": 7, \"n\": \""),
        ("{\"tool_call_id\"", "{\"name\": \"a\", \"tool_call_id\""),
        ("\"content\": ", "\"content\": {\"error\": 1}, \"c\": "),
        ("\"}", "\\u00e9\"}"),
        ("<tool_response>\n{", "<tool_response> \n {"),
        ("<tool_response>\n{", "<tool_response>\n["),
        ("<tool_response>\n{", "<tool_response>\nx{"),
        ("}\n</tool_response>", "} x\n</tool_response>"),
        ("}\n</tool_response>", "}"),
        ("</tool_response>", "</tool_response>\n\n"),
        ("<tool_response>", "x<tool_response>"),
        ("\"error\": null", "\"error\": 0"),
        ("\"success\": true", "\"success\": false"),
        (": ", ":"),
    ];
    let (mut read, mut tried, mut texts_kept, mut failed, mut counted) = (0, 0, 0, 0, 0);
    for text in &texts {
        for v in &crate::fixtures::edited(text, edits) {
            tried += 1;
            let Some(quick) = parse_tool_quick(v) else {
                continue;
            };
            read += 1;
            let general = parse_tool_counted(v).expect("read quickly, read generally");
            let dropped: usize = quick.iter().map(|r| r.dropped_keys).sum();
            assert_eq!(dropped, general.dropped_keys, "{v}");
            counted += usize::from(dropped > 0);
            let general = general.value;
            assert_eq!(quick.len(), general.len(), "{v}");
            for (q, g) in quick.iter().zip(&general) {
                assert_eq!(
                    (&q.tool_call_id, &q.name),
                    (&g.tool_call_id, &g.name),
                    "{v}"
                );
                match &q.content {
                    QuickContent::Value(c) => assert_eq!(c, &g.content, "{v}"),
                    QuickContent::Text(span, outcome) => {
                        texts_kept += 1;
                        failed += usize::from(*outcome == crate::format::model::Outcome::Failure);
                        assert_eq!(
                            &v[span.clone()],
                            pyjson::to_string(&g.content, Style::Envelope),
                            "{v}"
                        );
                        assert_eq!(
                            *outcome,
                            crate::format::model::classify_result(&g.content),
                            "{v}"
                        );
                    }
                }
            }
        }
    }
    assert!(read > tried / 4, "{read} of {tried} read quickly");
    assert!(counted > 10, "{counted} turns with keys not carried");
    assert!(
        texts_kept > 500 && failed > 50,
        "{texts_kept} kept as text, {failed} failures"
    );
}

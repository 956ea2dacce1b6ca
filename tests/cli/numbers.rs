//! Numbers are data: every stage keeps every number exactly as written, in pass-through
//! fields and inside tool-call arguments (issue: `0.011549999937415123` became
//! `0.011549999937415125`, a 30-digit integer became `1.2345678901234568e+29`).

use crate::util::*;

/// Numbers that f64 parsing or printing changes, as they appear in real data.
const NUMBERS: [&str; 7] = [
    "0.011549999937415123",
    "-0.21119999885559082",
    "123456789012345678901234567890",
    "-0.0",
    "1.50E+3",
    "1e400",
    "100000000000000000000000000000000000000000000.5",
];

/// An OpenAI-shape row with the numbers in a pass-through field and in a tool call's
/// arguments and result.
fn openai_row() -> String {
    let nums = NUMBERS.join(",");
    let args = format!("{{\\\"xs\\\": [{nums}], \\\"n\\\": {}}}", NUMBERS[2]);
    format!(
        "{{\"id\":\"n1\",\"score\":{},\"stats\":{{\"xs\":[{nums}]}},\"messages\":[\
         {{\"role\":\"user\",\"content\":\"sum them\"}},\
         {{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{{\"id\":\"c1\",\"type\":\"function\",\
         \"function\":{{\"name\":\"add\",\"arguments\":\"{args}\"}}}}]}},\
         {{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"{{\\\"sum\\\": {}}}\"}},\
         {{\"role\":\"assistant\",\"content\":\"done\"}}],\
         \"tools\":[{{\"type\":\"function\",\"function\":{{\"name\":\"add\",\"description\":\"Add.\",\
         \"parameters\":{{\"type\":\"object\",\"properties\":{{\"xs\":{{\"type\":\"array\"}}}}}}}}}}]}}\n",
        NUMBERS[0], NUMBERS[1]
    )
}

/// Every number with every digit. Stages that rewrite a row write an exponent as
/// `e` with its sign (`1.50E+3` as `1.50e+3`, `1e400` as `1e+400`: the same digits);
/// stages that pass rows through keep their bytes.
fn assert_all_numbers_in(text: &str, what: &str) {
    for n in NUMBERS {
        let canonical = match n {
            "1.50E+3" => "1.50e+3",
            "1e400" => "1e+400",
            n => n,
        };
        assert!(
            text.contains(n) || text.contains(canonical),
            "{what}: {n} was altered:\n{text}"
        );
    }
}

#[test]
fn normalize_keeps_numbers_both_ways() {
    let d = tmpdir();
    std::fs::write(d.path().join("in.jsonl"), openai_row()).unwrap();
    let mut c = cmd("traj-normalize", d.path());
    c.args(["in.jsonl", "-o", "hermes.jsonl"]);
    assert_code(&run(c), 0);
    let hermes = std::fs::read_to_string(d.path().join("hermes.jsonl")).unwrap();
    assert_all_numbers_in(&hermes, "traj-normalize");
    let mut c = cmd("traj-normalize", d.path());
    c.args(["--to", "openai", "hermes.jsonl"]);
    let o = run(c);
    assert_code(&o, 0);
    assert_all_numbers_in(&stdout(&o), "traj-normalize --to openai");
    // A fixed point: normalising again changes nothing.
    let mut c = cmd("traj-normalize", d.path());
    c.arg("hermes.jsonl");
    let o = run(c);
    assert_code(&o, 0);
    assert_eq!(stdout(&o), hermes);
}

#[test]
fn the_line_stages_keep_numbers() {
    let d = tmpdir();
    std::fs::write(d.path().join("in.jsonl"), openai_row()).unwrap();
    let mut c = cmd("traj-normalize", d.path());
    c.args(["in.jsonl", "-o", "hermes.jsonl"]);
    assert_code(&run(c), 0);
    for (b, args) in [
        ("traj-filter", vec!["hermes.jsonl"]),
        ("traj-merge", vec!["hermes.jsonl"]),
        (
            "traj-compress",
            vec!["--offline", "hermes.jsonl", "-o", "-", "--no-metrics"],
        ),
        ("traj-sample-tools", vec!["-d", "default", "prompts.jsonl"]),
    ] {
        if b == "traj-sample-tools" {
            let row = format!(
                "{{\"prompt\":\"p\",\"budget\":{},\"xs\":[{}]}}\n",
                NUMBERS[0],
                NUMBERS.join(",")
            );
            std::fs::write(d.path().join("prompts.jsonl"), row).unwrap();
        }
        let mut c = cmd(b, d.path());
        c.args(&args);
        let o = run(c);
        assert_code(&o, 0);
        assert_all_numbers_in(&stdout(&o), b);
    }
}

//! Inputs for the fuzz targets: the seed corpus and the two ways of making new inputs
//! (mutated seeds, and JSON built by a grammar from `arbitrary` bytes).

use arbitrary::{Result, Unstructured};

/// Tokens worth inserting: JSON structure, escapes, numbers at the edges, Hermes tags.
const DICT: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "\\",
    "\\u",
    "\\ud83d",
    "\\ude00",
    "\\ud800",
    "\\u0000",
    "\\n",
    "\\\"",
    "1e400",
    "-0",
    "-0.0",
    "123456789012345678901234567890",
    "0.011549999937415123",
    "1E-7",
    "true",
    "null",
    "\u{feff}",
    "\r\n",
    "\n",
    "\r",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<tools>",
    "</tools>",
    "\"from\"",
    "\"value\"",
    "\"role\"",
    "\"content\"",
    "\"conversations\"",
    "\"messages\"",
    "\"tool_calls\"",
    "\"arguments\"",
    "\"name\"",
    "\"human\"",
    "\"gpt\"",
    "\"tool\"",
    "\"system\"",
    "\u{e9}",
    "\u{1F600}",
    "\u{0}",
    "\u{2028}",
];

/// The seed corpus: every line of the real fixtures, every Hermes turn in them, and
/// hand-written edge cases.
pub fn corpus() -> Vec<Vec<u8>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out: Vec<Vec<u8>> = Vec::new();
    for dir in [root.join("tests/fixtures"), root.join("../shared/data")] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut files: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        files.sort();
        for f in files {
            if f.extension().is_none_or(|e| e != "jsonl") {
                continue;
            }
            let text = std::fs::read(&f).expect("fixture");
            out.push(text.iter().take(200_000).copied().collect()); // whole (head of) file
            for line in text
                .split(|b| *b == b'\n')
                .filter(|l| !l.is_empty())
                .take(60)
            {
                out.push(line.to_vec());
                // the turns' values, for the Hermes parsers
                if let Ok(v) = serde_json::from_slice::<serde_json::Value>(line) {
                    for t in v["conversations"].as_array().into_iter().flatten() {
                        if let Some(s) = t["value"].as_str() {
                            out.push(s.as_bytes().to_vec());
                        }
                    }
                }
            }
        }
    }
    for s in [
        "",
        "{}",
        "[]",
        "[{}]",
        "[{\"a\":1},{\"b\":[2,3]}]",
        " \t[ {\"a\" : \"]\"} , {} ] ",
        "\u{feff}{\"a\":1}\r\n",
        "{\"a\":1e400}",
        "{\"a\":-0}",
        "{\"a\":1,\"a\":2}",
        "1",
        "\"x\"",
        "{\"a\":\"\\ud800\"}",
        "{\"a\":\"\\ud83d\\ude00\"}",
        "{\"a\":\"\u{0}\"}",
        "<think>\n</think>\n</think>",
        "<tool_call>\nnot json\n</tool_call>",
        "<think>\nx\n</think>\n<tool_call>\n{\"name\": \"t\", \"arguments\": {}}\n</tool_call>",
        "<tool_response>\n{\"name\": \"t\", \"content\": 1}\n</tool_response>",
        "You are a function calling AI model. <tools>\n[]\n</tools>",
        "<tools>[{\"type\": \"function\", \"function\": {\"name\": \"x\"}}]</tools>",
    ] {
        out.push(s.as_bytes().to_vec());
    }
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    out.push(deep.into_bytes());
    out.push(format!("{{\"a\":{}1{}}}", "[".repeat(5000), "]".repeat(5000)).into_bytes());
    out.push(b"{\"a\":\"\xff\xfe\"}".to_vec());
    out
}

/// One new input.
pub fn input(rng: &mut fastrand::Rng, corpus: &[Vec<u8>]) -> Vec<u8> {
    match rng.u8(0..10) {
        0..=3 => {
            let mut raw = vec![0u8; rng.usize(16..2048)];
            rng.fill(&mut raw);
            let mut u = Unstructured::new(&raw);
            let mut s = String::new();
            let _ = json_value(&mut u, &mut s, 0);
            let mut b = s.into_bytes();
            if rng.u8(0..4) == 0 {
                mutate(rng, &mut b, corpus);
            }
            b
        }
        _ => {
            let mut b = small_seed(rng, corpus).to_vec();
            for _ in 0..rng.usize(1..6) {
                mutate(rng, &mut b, corpus);
            }
            b
        }
    }
}

/// A seed, preferring the small ones (a mutated 200 KB file is slow to check).
fn small_seed<'a>(rng: &mut fastrand::Rng, corpus: &'a [Vec<u8>]) -> &'a [u8] {
    let a = &corpus[rng.usize(..corpus.len())];
    let b = &corpus[rng.usize(..corpus.len())];
    if a.len() <= b.len() { a } else { b }
}

fn mutate(rng: &mut fastrand::Rng, b: &mut Vec<u8>, corpus: &[Vec<u8>]) {
    let at = |rng: &mut fastrand::Rng, b: &Vec<u8>| rng.usize(..=b.len());
    match rng.u8(0..7) {
        0 if !b.is_empty() => {
            let i = rng.usize(..b.len());
            b[i] ^= 1 << rng.u8(0..8);
        }
        1 if !b.is_empty() => {
            let i = rng.usize(..b.len());
            let n = rng.usize(1..=16.min(b.len() - i));
            b.drain(i..i + n);
        }
        2 => {
            let i = at(rng, b);
            let t = DICT[rng.usize(..DICT.len())].as_bytes();
            b.splice(i..i, t.iter().copied());
        }
        3 => {
            let i = at(rng, b);
            b.truncate(i);
        }
        4 => {
            let other = small_seed(rng, corpus);
            let i = at(rng, b);
            let j = rng.usize(..=other.len());
            b.truncate(i);
            b.extend_from_slice(&other[j..]);
        }
        5 if !b.is_empty() => {
            let i = rng.usize(..b.len());
            b[i] = rng.u8(..);
        }
        _ => {
            // duplicate a span (nesting, repeated keys)
            if b.len() > 1 {
                let i = rng.usize(..b.len() - 1);
                let j = rng.usize(i + 1..=b.len().min(i + 64));
                let span: Vec<u8> = b[i..j].to_vec();
                b.splice(j..j, span);
            }
        }
    }
}

/// A JSON value built from `u`: objects, arrays, strings with escapes and non-ASCII,
/// numbers at the edges of what f64 and u64 hold.
fn json_value(u: &mut Unstructured<'_>, s: &mut String, depth: u32) -> Result<()> {
    let kind = if depth > 6 {
        u.int_in_range(2..=5)?
    } else {
        u.int_in_range(0..=5)?
    };
    match kind {
        0 => {
            s.push('{');
            for i in 0..u.int_in_range(0..=4)? {
                if i > 0 {
                    s.push(',');
                }
                json_string(u, s)?;
                s.push(':');
                json_value(u, s, depth + 1)?;
            }
            s.push('}');
        }
        1 => {
            s.push('[');
            for i in 0..u.int_in_range(0..=4)? {
                if i > 0 {
                    s.push_str(if u.arbitrary()? { ", " } else { "," });
                }
                json_value(u, s, depth + 1)?;
            }
            s.push(']');
        }
        2 | 3 => json_string(u, s)?,
        4 => json_number(u, s)?,
        _ => s.push_str(*u.choose(&["true", "false", "null"])?),
    }
    Ok(())
}

fn json_string(u: &mut Unstructured<'_>, s: &mut String) -> Result<()> {
    s.push('"');
    for _ in 0..u.int_in_range(0..=12)? {
        match u.int_in_range(0..=9)? {
            0 => s.push_str(u.choose(&["\\n", "\\t", "\\\"", "\\\\", "\\/", "\\b", "\\f", "\\r"])?),
            1 => s.push_str(&format!("\\u{:04x}", u.arbitrary::<u16>()?)),
            2 => {
                s.push_str(u.choose(&["\\ud83d\\ude00", "\\uD834\\uDD1E", "\\ud800", "\\udfff"])?)
            }
            3 => {
                let c: char = u.arbitrary()?;
                if c != '"' && c != '\\' && c >= ' ' {
                    s.push(c);
                }
            }
            4 => s.push_str(u.choose(&["<think>", "</think>", "<tool_call>", "</tool_call>"])?),
            _ => s.push(
                char::from(u.int_in_range(b' '..=b'~')?)
                    .to_ascii_lowercase()
                    .max('#'),
            ),
        }
    }
    s.push('"');
    Ok(())
}

fn json_number(u: &mut Unstructured<'_>, s: &mut String) -> Result<()> {
    match u.int_in_range(0..=6)? {
        0 => s.push_str(&u.arbitrary::<i64>()?.to_string()),
        1 => s.push_str(&u.arbitrary::<u64>()?.to_string()),
        2 => s.push_str(
            &format!("{:?}", f64::from_bits(u.arbitrary()?))
                .replace("inf", "1e400")
                .replace("NaN", "0"),
        ),
        3 => s.push_str(u.choose(&[
            "-0",
            "-0.0",
            "0e0",
            "1E+2",
            "1e-7",
            "1e400",
            "-1e-400",
            "123456789012345678901234567890",
        ])?),
        4 => {
            let digits: u8 = u.int_in_range(1..=40)?;
            if u.arbitrary()? {
                s.push('-');
            }
            s.push('1');
            for _ in 0..digits {
                s.push(char::from(b'0' + u.int_in_range(0..=9)?));
            }
        }
        5 => s.push_str(&format!(
            "{}.{}e{}",
            u.int_in_range(0..=9)?,
            u.arbitrary::<u32>()?,
            u.int_in_range(-400..=400)?
        )),
        _ => s.push_str(
            &format!("{}", u.arbitrary::<f32>()? as f64)
                .replace("inf", "1")
                .replace("NaN", "2"),
        ),
    }
    Ok(())
}

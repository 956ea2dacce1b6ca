//! Verifiers (`--verifier`): what scores a rollout once its agent is done. A command
//! runs in the rollout's own sandbox before it is torn down and prints its reward on
//! its last stdout line; the built-in checks (`match:`, `regex:`, `number:`) compare
//! the final answer with a field of the task row and need no sandbox. The contract is
//! in docs/rollouts.md.

use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use crate::toolbox::ToolHost;
use crate::toolbox::task::Check;

/// The directory, relative to the workspace root, of the verifier's files.
pub const DIR: &str = ".traj";
/// The JSON file a verifier command reads: `{"task", "final_answer", "rollout_index",
/// "task_uid"}`.
pub const TASK_FILE: &str = ".traj/verify.json";
/// The final answer alone, as text.
pub const ANSWER_FILE: &str = ".traj/final_answer.txt";
/// Where the verifier's stdout is kept.
pub const STDOUT_FILE: &str = ".traj/verify.stdout";
/// The most of a verifier's output kept in the record (bytes, from the end).
pub const OUTPUT_CAP: usize = 4096;

/// A `--verifier`.
#[derive(Debug, Clone, PartialEq)]
pub enum Verifier {
    /// A shell command run in the rollout's sandbox.
    Command(String),
    /// `match:FIELD`: the answer equals the field after [`normalise`].
    Match(String),
    /// `regex:FIELD`: the field is a regex the answer matches.
    Regex(String),
    /// `number:FIELD`: the answer's last number equals the field's within 1e-6
    /// relative.
    Number(String),
}

impl Verifier {
    /// Parse `--verifier`: `match:F`, `regex:F`, `number:F`, else a command.
    pub fn parse(s: &str) -> Result<Verifier, String> {
        for (prefix, make) in [
            ("match:", Verifier::Match as fn(String) -> Verifier),
            ("regex:", Verifier::Regex),
            ("number:", Verifier::Number),
        ] {
            if let Some(f) = s.strip_prefix(prefix) {
                if f.is_empty() {
                    return Err(format!("--verifier {prefix}FIELD needs a field name"));
                }
                return Ok(make(f.to_string()));
            }
        }
        if s.trim().is_empty() {
            return Err("--verifier needs a command".into());
        }
        // `numbers:answer`, `exact:answer`: a built-in misspelt, which as a command would
        // fail every rollout after its agent ran (a command has a space or no such word).
        if let Some((word, field)) = s.split_once(':')
            && !word.is_empty()
            && word.bytes().all(|b| b.is_ascii_alphabetic() || b == b'_')
            && !field.is_empty()
            && !s.contains(char::is_whitespace)
            && !crate::toolbox::config::on_path(word, crate::toolbox::config::SANDBOX_PATH)
        {
            return Err(format!(
                "--verifier {s:?}: no built-in verifier {word:?} (match:FIELD, regex:FIELD, \
                 number:FIELD), and no command {word:?} on PATH"
            ));
        }
        Ok(Verifier::Command(s.to_string()))
    }
}

/// What a rollout's verification gave: a reward and the `verification` object, or why
/// there is none (a `verifier_error`).
pub type Verdict = Result<(Value, Value), String>;

/// The answer compared by `match:`: trimmed, white space runs as one space, case
/// folded, one trailing period dropped.
pub fn normalise(s: &str) -> String {
    let t = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let t = t.to_lowercase();
    t.strip_suffix('.').unwrap_or(&t).trim_end().to_string()
}

/// The last number in `s`: integers, decimals, exponents, a sign, `,` thousands
/// separators (`1,234,567`). A `-` or `+` is a sign only where no letter, digit or `.`
/// stands before it (`2024-12-07` is three numbers, not `-12`); a comma is a separator
/// only before a group of three digits (`1,2,3` is three numbers); a dotted run such as
/// `1.2.3` (a version, an address) is no number.
pub fn last_number(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let digit = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    let digits_from = |mut i: usize| {
        while digit(i) {
            i += 1;
        }
        i
    };
    let mut best = None;
    let mut i = 0;
    while i < b.len() {
        let starts_number = digit(i) || (b[i] == b'.' && digit(i + 1));
        let signed = matches!(b[i], b'-' | b'+')
            && (digit(i + 1) || (b.get(i + 1) == Some(&b'.') && digit(i + 2)));
        let glued = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'.');
        if !(starts_number || signed) || (signed && glued) {
            i += 1;
            continue;
        }
        let mut text = String::new();
        if signed {
            text.push(b[i] as char);
            i += 1;
        }
        let int_start = i;
        i = digits_from(i);
        text.push_str(&s[int_start..i]);
        // Thousands groups: a comma and exactly three digits, after one to three digits.
        if (1..=3).contains(&(i - int_start)) {
            while b.get(i) == Some(&b',') && digits_from(i + 1) == i + 4 {
                text.push_str(&s[i + 1..i + 4]);
                i += 4;
            }
        }
        if b.get(i) == Some(&b'.') && digit(i + 1) {
            let frac = i;
            i = digits_from(i + 1);
            text.push_str(&s[frac..i]);
            if b.get(i) == Some(&b'.') && digit(i + 1) {
                // 1.2.3: skip the whole dotted run.
                while digit(i) || (b.get(i) == Some(&b'.') && digit(i + 1)) {
                    i += 1;
                }
                continue;
            }
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            let sign = usize::from(matches!(b.get(i + 1), Some(b'-' | b'+')));
            if digit(i + 1 + sign) {
                let end = digits_from(i + 1 + sign);
                text.push_str(&s[i..end]);
                i = end;
            }
        }
        if let Ok(x) = text.parse::<f64>() {
            best = Some(x);
        }
    }
    best
}

fn field_text(row: &Map<String, Value>, field: &str) -> Result<String, String> {
    match row.get(field) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Number(n)) => Ok(n.to_string()),
        Some(Value::Bool(b)) => Ok(b.to_string()),
        Some(other) => Err(format!(
            "the task row's {field:?} is {}, expected a string or number",
            crate::io::json_kind(other)
        )),
        None => Err(format!("the task row has no {field:?} field")),
    }
}

/// What a built-in verifier compares an answer with, read from the task row's FIELD:
/// the one reading behind [`row_defect`] (before the run) and [`builtin`] (the score).
enum Want {
    Text(String),
    Regex(regex::Regex),
    Number(f64),
}

/// [`Want`] of `row` for the built-in `v` (`None` for a command verifier); `Err`: why no
/// answer of this row can be scored (its FIELD missing or not text, no regex, no number).
fn want(v: &Verifier, row: &Map<String, Value>) -> Option<Result<Want, String>> {
    let field = match v {
        Verifier::Command(_) => return None,
        Verifier::Match(f) | Verifier::Regex(f) | Verifier::Number(f) => f,
    };
    Some(field_text(row, field).and_then(|text| {
        match v {
            Verifier::Regex(_) => regex::Regex::new(&text)
                .map(Want::Regex)
                .map_err(|e| format!("the task row's {field:?} is no regex: {e}")),
            Verifier::Number(_) => last_number(&text)
                .map(Want::Number)
                .ok_or_else(|| format!("the task row's {field:?} holds no number")),
            _ => Ok(Want::Text(text)),
        }
    }))
}

/// Why a built-in verifier can score no answer of `row`: known before the rollout runs,
/// the same on every attempt. `None` for a command verifier and for a row it can score.
pub fn row_defect(v: &Verifier, row: &Map<String, Value>) -> Option<String> {
    want(v, row)?.err()
}

/// Score `answer` by a built-in check (`None` for a command verifier).
pub fn builtin(v: &Verifier, row: &Map<String, Value>, answer: &str) -> Option<Verdict> {
    let t = Instant::now();
    let (kind, field) = match v {
        Verifier::Command(_) => return None,
        Verifier::Match(f) => ("match", f),
        Verifier::Regex(f) => ("regex", f),
        Verifier::Number(f) => ("number", f),
    };
    let verdict = want(v, row)?.map(|want| match want {
        Want::Text(w) => normalise(answer) == normalise(&w),
        Want::Regex(re) => re.is_match(answer),
        Want::Number(w) => {
            last_number(answer).is_some_and(|got| (got - w).abs() <= 1e-6 * w.abs().max(got.abs()))
        }
    });
    Some(verdict.map(|ok| {
        let reward = if ok { 1 } else { 0 };
        (
            json!(reward),
            json!({"verifier": format!("{kind}:{field}"), "exit_code": null,
                   "output": "", "truncated": false,
                   "seconds": round3(t.elapsed().as_secs_f64())}),
        )
    }))
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The last `OUTPUT_CAP` bytes of `s` (on a character boundary), and whether it was cut.
fn cap(s: &str) -> (String, bool) {
    if s.len() <= OUTPUT_CAP {
        return (s.to_string(), false);
    }
    let mut start = s.len() - OUTPUT_CAP;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    (s[start..].to_string(), true)
}

/// The reward of a verifier's stdout: its last non-blank line, a number or a JSON
/// object with a numeric `reward` (its other members are returned too).
pub fn parse_reward(stdout: &str) -> Result<(Value, Map<String, Value>), String> {
    let Some(line) = stdout.lines().rev().map(str::trim).find(|l| !l.is_empty()) else {
        return Err("the verifier printed nothing on stdout".into());
    };
    match serde_json::from_str::<Value>(line) {
        Ok(Value::Number(n)) if n.as_f64().is_some_and(f64::is_finite) => {
            Ok((Value::Number(n), Map::new()))
        }
        Ok(Value::Object(mut o)) => match o.remove("reward") {
            Some(Value::Number(n)) if n.as_f64().is_some_and(f64::is_finite) => {
                Ok((Value::Number(n), o))
            }
            _ => Err(format!(
                "the verifier's last line has no numeric \"reward\": {}",
                cap(line).0
            )),
        },
        _ => Err(format!(
            "the verifier's last line is no reward (a number or a JSON object with \
             \"reward\"): {}",
            cap(line).0
        )),
    }
}

/// What a verifier command is told about its rollout.
pub struct Rollout<'a> {
    pub row: &'a Map<String, Value>,
    pub answer: &'a str,
    pub rollout_index: u32,
    pub task_uid: &'a str,
}

/// Run the command `script` once in `host`'s sandbox.
pub fn run_command(
    host: &mut dyn ToolHost,
    script: &str,
    r: &Rollout,
    timeout: Duration,
) -> Verdict {
    let task = json!({"task": r.row, "final_answer": r.answer,
        "rollout_index": r.rollout_index, "task_uid": r.task_uid});
    let check = Check {
        script: script.to_string(),
        files: vec![
            (
                TASK_FILE.into(),
                serde_json::to_vec(&task).unwrap_or_default(),
            ),
            (ANSWER_FILE.into(), r.answer.as_bytes().to_vec()),
        ],
        env: vec![
            ("TRAJ_ROLLOUT_INDEX".into(), r.rollout_index.to_string()),
            ("TRAJ_TASK_UID".into(), r.task_uid.into()),
        ],
        // Absolute: a task's `cwd` starts the verifier below the workspace root.
        path_env: vec![
            ("TRAJ_TASK_FILE".into(), TASK_FILE.into()),
            ("TRAJ_FINAL_ANSWER_FILE".into(), ANSWER_FILE.into()),
        ],
        timeout,
        stdout_file: STDOUT_FILE.into(),
    };
    let t = Instant::now();
    let out = host.verify(&check)?;
    let seconds = round3(t.elapsed().as_secs_f64());
    if out.timed_out {
        return Err(format!(
            "the verifier timed out after {}s (--verifier-timeout)",
            timeout.as_secs_f64()
        ));
    }
    let parsed = parse_reward(&out.stdout);
    let (reward, extra) = match parsed {
        Ok(p) => p,
        Err(e) if out.exit_code != 0 => {
            return Err(format!(
                "the verifier exited with {} and printed no reward ({e}); output: {}",
                out.exit_code,
                cap(&format!("{}{}", out.stderr, out.stdout)).0
            ));
        }
        Err(e) => return Err(e),
    };
    let (output, truncated) = cap(&out.stdout);
    let (stderr, stderr_truncated) = cap(&out.stderr);
    let v = json!({"verifier": "command", "exit_code": out.exit_code, "output": output,
        "truncated": truncated, "stderr": stderr, "stderr_truncated": stderr_truncated,
        "seconds": seconds});
    Ok((reward, with_members(v, extra)))
}

/// The member under which `verification` keeps the verifier's own members that share a
/// name with one of traj's (`output`, `seconds`, ...): never dropped, never overwriting.
pub const VERIFIER_FIELDS: &str = "verifier_fields";

/// `verification` (traj's members) with every other member of the verifier's object:
/// those named as one of traj's, or `verifier_fields`, go into `verifier_fields`.
fn with_members(mut v: Value, extra: Map<String, Value>) -> Value {
    let o = v.as_object_mut().expect("an object");
    let mut clashing = Map::new();
    for (k, x) in extra {
        if o.contains_key(&k) || k == VERIFIER_FIELDS {
            clashing.insert(k, x);
        } else {
            o.insert(k, x);
        }
    }
    if !clashing.is_empty() {
        o.insert(VERIFIER_FIELDS.into(), Value::Object(clashing));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelt_builtin_is_refused_and_a_rows_defect_known_before_the_run() {
        for typo in [
            "numbers:answer",
            "exact:answer",
            "regexp:re",
            "Number:answer",
        ] {
            let e = Verifier::parse(typo).unwrap_err();
            assert!(e.contains("no built-in verifier"), "{e}");
        }
        for cmd in ["pytest -q", "true:x", "sh -c 'exit 0'", "./check.sh"] {
            assert!(
                matches!(Verifier::parse(cmd), Ok(Verifier::Command(_))),
                "{cmd}"
            );
        }
        let row = |v: Value| v.as_object().unwrap().clone();
        let number = Verifier::Number("answer".into());
        assert_eq!(
            row_defect(&number, &row(json!({"prompt": "p"}))).unwrap(),
            "the task row has no \"answer\" field"
        );
        assert!(row_defect(&number, &row(json!({"answer": "none"}))).is_some());
        assert!(row_defect(&number, &row(json!({"answer": "x = 4"}))).is_none());
        let re = Verifier::Regex("re".into());
        assert!(row_defect(&re, &row(json!({"re": "("}))).is_some());
        assert!(row_defect(&re, &row(json!({"re": "^a$"}))).is_none());
        assert!(row_defect(&Verifier::Command("x".into()), &row(json!({}))).is_none());
    }

    #[test]
    fn normalisation_numbers_and_reward_lines() {
        assert_eq!(normalise("  The  Answer\tIS 42. "), "the answer is 42");
        assert_eq!(last_number("about 1,234.5 or -2e3."), Some(-2000.0));
        assert_eq!(last_number("x = 7."), Some(7.0));
        assert_eq!(last_number("none"), None);
        assert_eq!(last_number("on 2024-12-07"), Some(7.0));
        assert_eq!(last_number("the answer is 3-4"), Some(4.0));
        assert_eq!(last_number("x-5 then -5"), Some(-5.0));
        assert_eq!(last_number("1,2,3"), Some(3.0));
        assert_eq!(last_number("#### 1,234,567"), Some(1_234_567.0));
        assert_eq!(last_number("1,23"), Some(23.0));
        assert_eq!(last_number("4 and version 1.2.3"), Some(4.0));
        assert_eq!(last_number("-.5"), Some(-0.5));
        assert_eq!(last_number("3 eggs, 1e-3"), Some(0.001));
        assert_eq!(last_number("\u{2212}7 or 12e"), Some(12.0));
        assert_eq!(parse_reward("log\n0.5\n\n").unwrap().0, json!(0.5));
        let (r, extra) = parse_reward(r#"{"reward": 1, "tests": 3}"#).unwrap();
        assert_eq!((r, extra["tests"].clone()), (json!(1), json!(3)));
        // The verifier's members named as traj's are kept aside, never dropped.
        let (_, extra) = parse_reward(
            r#"{"reward": 1, "output": "3 passed", "seconds": 9, "verifier_fields": 1, "n": 2}"#,
        )
        .unwrap();
        let v = with_members(
            json!({"verifier": "command", "output": "", "seconds": 0.1}),
            extra,
        );
        assert_eq!(
            v,
            json!({"verifier": "command", "output": "", "seconds": 0.1, "n": 2,
                "verifier_fields": {"output": "3 passed", "seconds": 9, "verifier_fields": 1}})
        );
        assert!(parse_reward("ok").is_err());
        assert!(parse_reward(r#"{"score": 1}"#).is_err());
        assert!(parse_reward("").is_err());
        let row = json!({"a": "Paris", "n": "3.0", "re": "^fo+$"});
        let row = row.as_object().unwrap();
        let score = |v: &str, ans: &str| {
            builtin(&Verifier::parse(v).unwrap(), row, ans)
                .unwrap()
                .map(|(r, _)| r)
        };
        assert_eq!(score("match:a", " paris. ").unwrap(), json!(1));
        assert_eq!(score("match:a", "Lyon").unwrap(), json!(0));
        assert_eq!(score("number:n", "it is 3").unwrap(), json!(1));
        assert_eq!(score("regex:re", "foo").unwrap(), json!(1));
        assert!(score("match:zz", "x").is_err());
        assert_eq!(
            Verifier::parse("pytest -q").unwrap(),
            Verifier::Command("pytest -q".into())
        );
    }
}

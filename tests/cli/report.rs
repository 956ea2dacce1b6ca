//! traj-report: the page of a dataset, of a traj-run directory and of two compared,
//! checked against figures this module computes from the same rows by its own rules
//! (lines, turns, `<tool_call>` blocks, `tool_calls` lists, characters per token), and
//! opened in real headless Chromium: a screenshot, no console error, no request beyond
//! the page's own file, search and a filter used by typing and keys, and the load time
//! of a page of many rows.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use headless_chrome::browser::tab::RequestPausedDecision;
use headless_chrome::protocol::cdp::Fetch::{FailRequest, RequestPattern, RequestStage};
use headless_chrome::protocol::cdp::Network::ErrorReason;
use headless_chrome::protocol::cdp::Page::{
    AddScriptToEvaluateOnNewDocument, CaptureScreenshotFormatOption,
};
use headless_chrome::{Browser, LaunchOptions, Tab};
use serde_json::{Value, json};

use crate::standin::Standin;
use crate::util::*;

/// traj-report in `dir` with `args`.
fn traj_report(dir: &Path, args: &[&str]) -> Output {
    let mut c = cmd("traj-report", dir);
    c.args(args);
    run(c)
}

/// The page without its data block (the rows' own text may name any URL).
fn markup(html: &str) -> String {
    let open = r#"<script type="application/json" id="data">"#;
    let start = html.find(open).unwrap() + open.len();
    let len = html[start..].find("</script>").unwrap();
    format!("{}{}", &html[..start], &html[start + len..])
}

/// No `src`, no `href` but in-page anchors, no CSS `url(`/`@import`, and the CSP that
/// forbids loading anything.
#[track_caller]
fn assert_self_contained(html: &str) {
    let m = markup(html);
    let attr =
        regex::Regex::new(r#"(?i)\b(src|href|action|srcset)\s*=\s*["']?([^"'\s>]*)"#).unwrap();
    for c in attr.captures_iter(&m) {
        let (name, value) = (&c[1], &c[2]);
        assert!(
            name.eq_ignore_ascii_case("href") && value.starts_with('#'),
            "the page loads or links {name}={value:?}"
        );
    }
    for bad in [
        "url(",
        "@import",
        "<link",
        "<iframe",
        "<img",
        "fetch(",
        "XMLHttpRequest",
    ] {
        assert!(!m.contains(bad), "the page holds {bad:?}");
    }
    assert!(
        m.contains(r#"content="default-src 'none'; script-src 'unsafe-inline'"#),
        "the page has no CSP that forbids loading"
    );
}

/// The page's figures by id: one value per dataset.
fn figures(data: &Value) -> BTreeMap<String, Vec<Value>> {
    data["figures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["id"].as_str().unwrap().to_string(),
                f["v"].as_array().unwrap().clone(),
            )
        })
        .collect()
}

/// What this module counts in a file of rows, by its own rules.
#[derive(Debug, Default)]
struct Counted {
    rows: u64,
    turns: Vec<u64>,
    /// Tokens per row by `chars4` (ceil(chars / 4) of each turn's text), ShareGPT only.
    tokens: Vec<u64>,
    calls: u64,
    tools: BTreeMap<String, u64>,
    completed: u64,
    rows_with_reasoning: u64,
}

/// Tool calls of one ShareGPT `gpt` turn: the name of each `<tool_call>` block.
fn sharegpt_calls(value: &str) -> Vec<String> {
    let re = regex::Regex::new(r"(?s)<tool_call>(.*?)</tool_call>").unwrap();
    re.captures_iter(value)
        .map(|c| {
            let v: Value = serde_json::from_str(c[1].trim()).expect("a JSON tool call");
            v["name"].as_str().unwrap().to_string()
        })
        .collect()
}

fn count(path: &Path) -> Counted {
    let mut c = Counted::default();
    let think = regex::Regex::new(r"(?s)<think>(.*?)</think>").unwrap();
    for row in read_jsonl(path) {
        c.rows += 1;
        c.completed += u64::from(row["completed"] == true);
        let mut reasoning = false;
        if let Some(conv) = row["conversations"].as_array() {
            c.turns.push(conv.len() as u64);
            let mut tokens = 0;
            for t in conv {
                let v = t["value"].as_str().unwrap();
                tokens += v.chars().count().div_ceil(4) as u64;
                if t["from"] == "gpt" {
                    for name in sharegpt_calls(v) {
                        c.calls += 1;
                        *c.tools.entry(name).or_default() += 1;
                    }
                    reasoning |= think.captures_iter(v).any(|m| !m[1].trim().is_empty());
                }
            }
            c.tokens.push(tokens);
        } else {
            let msgs = row["messages"].as_array().expect("a message list");
            c.turns.push(msgs.len() as u64);
            for m in msgs.iter().filter(|m| m["role"] == "assistant") {
                for call in m["tool_calls"].as_array().into_iter().flatten() {
                    c.calls += 1;
                    let name = call["function"]["name"].as_str().unwrap().to_string();
                    *c.tools.entry(name).or_default() += 1;
                }
                let r = ["reasoning_content", "reasoning"]
                    .iter()
                    .any(|k| m[*k].as_str().is_some_and(|s| !s.trim().is_empty()));
                reasoning |= r;
            }
        }
        c.rows_with_reasoning += u64::from(reasoning);
    }
    c
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[track_caller]
fn assert_fig(figs: &BTreeMap<String, Vec<Value>>, id: &str, want: f64) {
    let got = figs
        .get(id)
        .unwrap_or_else(|| panic!("no figure {id}; figures: {:?}", figs.keys()));
    assert!(
        (num(&got[0]) - want).abs() < 1e-9,
        "figure {id}: page {} != counted {want}",
        got[0]
    );
}

fn mean(v: &[u64]) -> f64 {
    v.iter().sum::<u64>() as f64 / v.len() as f64
}

#[test]
fn a_dataset_page_is_self_contained_and_its_figures_are_the_datas() {
    let d = tmpdir();
    let input = fixture("hermes_reason_tool_use_50.jsonl");
    let o = traj_report(
        d.path(),
        &[
            input.to_str().unwrap(),
            "--tokenizer",
            "chars4",
            "--budget",
            "1000",
            "-o",
            "r.html",
        ],
    );
    assert_code(&o, 0);
    assert!(
        stderr(&o).contains("50 rows, 50 embedded"),
        "{}",
        stderr(&o)
    );
    let html = std::fs::read_to_string(d.path().join("r.html")).unwrap();
    assert_self_contained(&html);
    let data = data_block(&html);
    let figs = figures(&data);
    let c = count(&input);
    assert_eq!(c.rows, 50);
    assert_fig(&figs, "rows", c.rows as f64);
    assert_fig(&figs, "status.completed", c.completed as f64);
    assert_fig(&figs, "turns.mean", mean(&c.turns));
    assert_fig(&figs, "turns.max", *c.turns.iter().max().unwrap() as f64);
    assert_fig(&figs, "tool_calls.sum", c.calls as f64);
    assert_fig(&figs, "tokens.mean", mean(&c.tokens));
    assert_fig(&figs, "tokens.max", *c.tokens.iter().max().unwrap() as f64);
    let over = c.tokens.iter().filter(|t| **t > 1000).count();
    assert!(over > 0 && over < 50, "the budget splits the rows: {over}");
    assert_fig(&figs, "over_budget", over as f64);
    assert_fig(&figs, "reasoning.rows", c.rows_with_reasoning as f64);
    for (tool, n) in &c.tools {
        assert_fig(&figs, &format!("tool.{tool}.calls"), *n as f64);
    }
    let page_tools = figs.keys().filter(|k| k.ends_with(".calls")).count();
    assert_eq!(page_tools, c.tools.len(), "tools on the page");
    // Every row embedded once, in input order, each with its own turns.
    let rows = data["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 50);
    let turns: Vec<u64> = rows.iter().map(|r| r["turns"].as_u64().unwrap()).collect();
    assert_eq!(turns, c.turns);
    // The histogram counts every row once.
    let hist = &data["datasets"][0]["overview"]["turns"];
    let binned: u64 = hist["bins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_u64().unwrap())
        .sum();
    assert_eq!(binned + hist["over"].as_u64().unwrap(), 50);

    // --summary shows the same figures as text, and writes no page without -o.
    let o = traj_report(
        d.path(),
        &[
            input.to_str().unwrap(),
            "--tokenizer",
            "chars4",
            "--summary",
        ],
    );
    assert_code(&o, 0);
    let text = stdout(&o);
    let line = |label: &str| -> String {
        text.lines()
            .find(|l| l.trim_start().starts_with(label))
            .unwrap_or_else(|| panic!("no {label:?} line in:\n{text}"))
            .split_whitespace()
            .last()
            .unwrap()
            .to_string()
    };
    assert_eq!(line("rows"), c.rows.to_string());
    assert_eq!(line("sum"), c.calls.to_string());
    assert!(!d.path().join("report.html").exists());

    // The same inputs give the same page, byte for byte.
    let o = traj_report(
        d.path(),
        &[
            input.to_str().unwrap(),
            "--tokenizer",
            "chars4",
            "--budget",
            "1000",
            "-o",
            "again.html",
        ],
    );
    assert_code(&o, 0);
    assert_eq!(
        std::fs::read(d.path().join("again.html")).unwrap(),
        html.as_bytes()
    );
}

/// A stand-in run of three prompts: the page of its directory has the run's totals.
#[test]
fn a_run_directory_page_has_the_runs_cost_calls_and_records() {
    let d = tmpdir();
    let s = Standin::json(
        json!({"default": {"content": "Answer to: {prompt}", "reasoning": "thinking", "cost": 0.001}}),
    );
    let prompts = write_prompts(d.path(), &["a", "b", "c"]);
    let mut c = standin_run(d.path(), &s.url(), "data/r");
    c.args(["-q", &prompts, "--batch-size", "2"]);
    assert_code(&run(c), 0);
    let run_dir = d.path().join("data/r");
    let mut recs = Vec::new();
    for e in std::fs::read_dir(&run_dir).unwrap() {
        let p = e.unwrap().path();
        if p.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("batch_")
        {
            recs.extend(read_jsonl(&p));
        }
    }
    assert_eq!(recs.len(), 3);
    let o = traj_report(d.path(), &["data/r", "-o", "run.html"]);
    assert_code(&o, 0);
    let html = std::fs::read_to_string(d.path().join("run.html")).unwrap();
    assert_self_contained(&html);
    let data = data_block(&html);
    let figs = figures(&data);
    let cost: f64 = recs.iter().map(|r| num(&r["usage"]["cost"])).sum();
    let calls: f64 = recs.iter().map(|r| num(&r["api_calls"])).sum();
    let turns: Vec<u64> = recs
        .iter()
        .map(|r| r["messages"].as_array().unwrap().len() as u64)
        .collect();
    assert_fig(&figs, "rows", 3.0);
    assert_fig(
        &figs,
        "status.completed",
        recs.iter().filter(|r| r["completed"] == true).count() as f64,
    );
    assert_fig(&figs, "run.rows", 3.0);
    assert_fig(&figs, "run.cost", cost);
    assert_fig(&figs, "run.api_calls", calls);
    assert_fig(&figs, "turns.mean", mean(&turns));
    assert_fig(&figs, "reasoning.rows", 3.0);
    let stats = &data["datasets"][0]["overview"]["run"]["statistics"][0];
    assert_eq!(stats["total_prompts"], 3, "{stats}");
    // The page and --summary show the run's own statistics.json (it was embedded and
    // never shown).
    let st = read_json(&run_dir.join("statistics.json"));
    assert_fig(&figs, "statistics.total_prompts", 3.0);
    assert_fig(&figs, "statistics.prompts_done", num(&st["prompts_done"]));
    assert_fig(&figs, "statistics.prompts_failed", 0.0);
    assert_fig(&figs, "statistics.cost", num(&st["usage"]["cost"]));
    let o = traj_report(d.path(), &["data/r", "--summary"]);
    assert!(
        stdout(&o).contains("Run directory (statistics.json)"),
        "{}",
        stdout(&o)
    );
    assert!(stdout(&o).contains("prompts failed"), "{}", stdout(&o));
}

/// A long system prompt or reasoning is cut in the page: its label said the length of
/// the cut text (6048 chars for any long one); it says the text's own now.
#[test]
fn long_texts_are_labelled_with_their_own_length() {
    let d = tmpdir();
    let row = json!({"messages": [
        {"role": "system", "content": "s".repeat(9000)},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "reasoning_content": "\u{601d}".repeat(3000)}]});
    std::fs::write(d.path().join("long.jsonl"), format!("{row}\n")).unwrap();
    let o = traj_report(d.path(), &["long.jsonl", "-o", "long.html"]);
    assert_code(&o, 0);
    let html = std::fs::read_to_string(d.path().join("long.html")).unwrap();
    let data = data_block(&html);
    let r = &data["rows"][0];
    assert_eq!(r["sysn"], 9000, "{}", r["sysn"]);
    let gpt = r["t"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["r"] == "gpt")
        .unwrap();
    assert_eq!(gpt["kn"], 3000);
    assert!(
        gpt["k"]
            .as_str()
            .unwrap()
            .contains("more bytes not embedded")
    );
}

#[test]
fn compare_puts_two_datasets_side_by_side_with_the_difference() {
    let d = tmpdir();
    let a = fixture("hermes_reason_tool_use_50.jsonl");
    let b = fixture("traj_run_records.jsonl");
    let (ca, cb) = (count(&a), count(&b));
    let o = traj_report(
        d.path(),
        &[
            "--compare",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "-o",
            "cmp.html",
            "--summary",
        ],
    );
    assert_code(&o, 0);
    let html = std::fs::read_to_string(d.path().join("cmp.html")).unwrap();
    assert_self_contained(&html);
    let data = data_block(&html);
    let figs = figures(&data);
    assert_eq!(
        (num(&figs["rows"][0]), num(&figs["rows"][1])),
        (ca.rows as f64, cb.rows as f64)
    );
    assert_eq!(
        (
            num(&figs["tool_calls.sum"][0]),
            num(&figs["tool_calls.sum"][1])
        ),
        (ca.calls as f64, cb.calls as f64)
    );
    let text = stdout(&o);
    assert!(text.lines().next().unwrap().ends_with("B - A"), "{text}");
    let rows = text
        .lines()
        .find(|l| l.trim_start().starts_with("rows"))
        .unwrap();
    let diff = cb.rows as i64 - ca.rows as i64;
    assert!(rows.trim_end().ends_with(&format!(" {diff}")), "{rows}");
    // Both datasets' rows are embedded, each marked with its dataset.
    let by_d = |i: u64| {
        data["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["d"] == i)
            .count() as u64
    };
    assert_eq!((by_d(0), by_d(1)), (ca.rows, cb.rows));
}

#[test]
fn rejects_of_an_earlier_stage_are_counted_by_stage_and_reason() {
    let d = tmpdir();
    let input = fixture("hermes_reason_tool_use_50.jsonl");
    let mut c = cmd("traj-filter", d.path());
    c.args([
        input.to_str().unwrap(),
        "--max-turns",
        "5",
        "--rejects",
        "rej.jsonl",
        "-o",
        "kept.jsonl",
        "-q",
    ]);
    assert_code(&run(c), 0);
    let rejects = read_jsonl(&d.path().join("rej.jsonl"));
    let kept = read_jsonl(&d.path().join("kept.jsonl"));
    let too_long = count(&input).turns.iter().filter(|t| **t > 5).count();
    assert_eq!(rejects.len(), too_long);
    assert_eq!(kept.len() + rejects.len(), 50);
    let o = traj_report(d.path(), &["kept.jsonl", "rej.jsonl", "-o", "r.html"]);
    assert_code(&o, 0);
    let figs = figures(&data_block(
        &std::fs::read_to_string(d.path().join("r.html")).unwrap(),
    ));
    assert_fig(&figs, "rows", kept.len() as f64);
    assert_fig(&figs, "reject_lines", rejects.len() as f64);
    let reason = figs
        .iter()
        .find(|(k, _)| k.starts_with("reject.filter."))
        .unwrap_or_else(|| panic!("no reject figure: {:?}", figs.keys()));
    assert!(reason.0.contains("turns"), "{}", reason.0);
    assert_eq!(num(&reason.1[0]), rejects.len() as f64);
}

#[test]
fn a_directory_with_nothing_to_read_is_a_usage_error_as_in_every_stage() {
    // An empty page for a mistyped directory would read as "no data": exit 2 instead.
    let d = tmpdir();
    let empty = d.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    std::fs::write(empty.join("notes.txt"), "not rows\n").unwrap();
    let o = traj_report(d.path(), &["empty", "-o", "page.html"]);
    assert_code(&o, 2);
    let err = stderr(&o);
    assert!(
        err.contains("empty: directory holds no *.jsonl or *.json files"),
        "{err}"
    );
    assert!(!d.path().join("page.html").exists());
    // The stages say the same of it.
    let mut c = cmd("traj-filter", d.path());
    c.arg("empty");
    assert_code(&run(c), 2);
}

/// Real-shaped rows: the fixtures' rows in turn, each with its own `id`.
fn generate(path: &Path, n: usize) {
    let mut lines = Vec::new();
    for f in [
        "hermes_reason_tool_use_50.jsonl",
        "hermes_agent_repairs.jsonl",
        "llamafactory_reason_tool_use_50.jsonl",
        "toolbench_answers.jsonl",
        "traj_run_records.jsonl",
    ] {
        lines.extend(read_jsonl(&fixture(f)));
    }
    let mut out = String::new();
    for i in 0..n {
        let mut row = lines[i % lines.len()].clone();
        row["id"] = format!("gen-{i}").into();
        out.push_str(&row.to_string());
        out.push('\n');
    }
    std::fs::write(path, out).unwrap();
}

#[test]
fn the_embedded_sample_is_bounded_reproducible_and_holds_the_extremes() {
    let d = tmpdir();
    let input = d.path().join("rows.jsonl");
    generate(&input, 3000);
    let page = |seed: &str, out: &str| -> Value {
        let o = traj_report(
            d.path(),
            &[
                "rows.jsonl",
                "--tokenizer",
                "chars4",
                "--max-rows",
                "40",
                "--seed",
                seed,
                "-o",
                out,
            ],
        );
        assert_code(&o, 0);
        data_block(&std::fs::read_to_string(d.path().join(out)).unwrap())
    };
    let a = page("1", "a.html");
    let rows = a["rows"].as_array().unwrap();
    assert!(rows.len() <= 40, "{} rows embedded", rows.len());
    assert_fig(&figures(&a), "rows", 3000.0);
    // The row with the most turns (the first of them) is embedded, and says why.
    let all = read_jsonl(&input);
    let turns = |r: &Value| {
        r["conversations"]
            .as_array()
            .or(r["messages"].as_array())
            .unwrap()
            .len()
    };
    let most = all.iter().map(turns).max().unwrap();
    let first = all.iter().position(|r| turns(r) == most).unwrap();
    let e = rows
        .iter()
        .find(|r| r["n"] == first as u64)
        .expect("the row with the most turns");
    assert!(
        e["pick"].as_array().unwrap().contains(&json!("most turns")),
        "{}",
        e["pick"]
    );
    let ns = |v: &Value| -> Vec<u64> {
        v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["n"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(ns(&a), ns(&page("1", "b.html")));
    assert_ne!(ns(&a), ns(&page("2", "c.html")));
}

// ---------------------------------------------------------------------------------
// In the browser.

/// Run before the page's scripts: keeps console errors, uncaught errors, refused
/// loads (CSP) in `window.__errs`, and the time of the first frame after the document
/// is ready in `window.__paintedAt` (ms since navigation start).
const HOOK: &str = "(() => { const errs = []; Object.defineProperty(window, '__errs', {value: errs}); \
  for (const k of ['error', 'warn']) { const f = console[k]; console[k] = function (...a) { errs.push('console.' + k + ': ' + a.map(String).join(' ')); return f.apply(this, a); }; } \
  window.addEventListener('error', (e) => errs.push('uncaught: ' + e.message + ' at ' + e.filename + ':' + e.lineno)); \
  window.addEventListener('unhandledrejection', (e) => errs.push('unhandled rejection: ' + e.reason)); \
  document.addEventListener('securitypolicyviolation', (e) => errs.push('refused by the CSP: ' + e.violatedDirective + ' ' + e.blockedURI)); \
  document.addEventListener('DOMContentLoaded', () => requestAnimationFrame(() => setTimeout(() => { window.__paintedAt = performance.now(); }, 0))); })();";

/// Chromium with a fresh profile and one tab: every request the tab makes is recorded,
/// and any but the page's own file is failed.
struct Chromium {
    tab: Arc<Tab>,
    _browser: Browser,
    _profile: tempfile::TempDir,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Chromium {
    fn start(page: &Path) -> Chromium {
        let path = traj::toolbox::browser::chromium_path().unwrap_or_else(|| {
            panic!("no chromium on this machine: run scripts/setup.sh (apt-get install chromium), or set TRAJ_CHROMIUM")
        });
        let profile = tempfile::Builder::new()
            .prefix("traj-report-chromium-")
            .tempdir()
            .unwrap();
        let args: Vec<&std::ffi::OsStr> = [
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
        ]
        .iter()
        .map(std::ffi::OsStr::new)
        .collect();
        let opts = LaunchOptions::default_builder()
            .path(Some(path))
            .headless(true)
            .sandbox(false)
            .window_size(Some((1280, 900)))
            .user_data_dir(Some(profile.path().to_path_buf()))
            .args(args)
            .idle_browser_timeout(Duration::from_secs(300))
            .build()
            .unwrap();
        let browser = Browser::new(opts).expect("chromium starts");
        let tab = browser.new_tab().expect("a tab");
        tab.set_default_timeout(Duration::from_secs(60));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let own = format!("file://{}", page.display());
        let seen = requests.clone();
        let pattern = RequestPattern {
            url_pattern: Some("*".to_string()),
            resource_Type: None,
            request_stage: Some(RequestStage::Request),
        };
        tab.enable_fetch(Some(&[pattern]), None).unwrap();
        tab.enable_request_interception(Arc::new(
            move |_t, _s, e: headless_chrome::protocol::cdp::Fetch::events::RequestPausedEvent| {
                let url = e.params.request.url.clone();
                seen.lock().unwrap().push(url.clone());
                if url == own {
                    RequestPausedDecision::Continue(None)
                } else {
                    RequestPausedDecision::Fail(FailRequest {
                        request_id: e.params.request_id,
                        error_reason: ErrorReason::BlockedByClient,
                    })
                }
            },
        ))
        .unwrap();
        tab.call_method(AddScriptToEvaluateOnNewDocument {
            source: HOOK.to_string(),
            world_name: None,
            include_command_line_api: None,
            run_immediately: None,
        })
        .unwrap();
        Chromium {
            tab,
            _browser: browser,
            _profile: profile,
            requests,
        }
    }

    /// Open `page` and wait for its script to have run and a frame to be drawn; returns
    /// that time (ms since navigation start).
    fn open(&self, page: &Path) -> f64 {
        // The last page's time is not this one's (Page.navigate returns once the new
        // document is committed, so the polls below read the new one).
        self.eval("delete window.__paintedAt");
        self.tab
            .navigate_to(&format!("file://{}", page.display()))
            .unwrap();
        let t0 = Instant::now();
        loop {
            let v = self.eval("window.__paintedAt === undefined ? null : window.__paintedAt");
            if let Some(ms) = v.as_f64() {
                return ms;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "the page never drew a frame"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The value of a JavaScript expression (a JSON string is parsed back).
    fn eval(&self, js: &str) -> Value {
        let r = self
            .tab
            .evaluate(&format!("JSON.stringify({js})"), false)
            .unwrap_or_else(|e| panic!("{js}: {e:#}"));
        let text = r
            .value
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or("null".into());
        serde_json::from_str(&text).unwrap()
    }

    fn errors(&self) -> Vec<String> {
        serde_json::from_value(self.eval("window.__errs")).unwrap()
    }

    /// Nothing loaded but the page: neither a request the tab made nor a resource the
    /// page's performance timeline holds.
    #[track_caller]
    fn assert_no_network(&self, page: &Path) {
        let own = format!("file://{}", page.display());
        let reqs = self.requests.lock().unwrap().clone();
        assert!(
            reqs.iter().all(|u| *u == own),
            "requests beyond the page: {reqs:?}"
        );
        let res = self.eval("performance.getEntriesByType('resource').map((e) => e.name)");
        assert_eq!(res, json!([]), "resources loaded");
    }

    /// `#shown`: "N of M embedded shown" as (N, M), and the list's items.
    fn shown(&self) -> (u64, u64, u64) {
        let t = self.eval("document.getElementById('shown').textContent");
        let t = t.as_str().unwrap();
        let w: Vec<&str> = t.split_whitespace().collect();
        let items = self.eval("document.querySelectorAll('#list li').length");
        (
            w[0].parse().unwrap(),
            w[2].parse().unwrap(),
            items.as_u64().unwrap(),
        )
    }
}

/// The figures the page shows: `data-fig` -> the text of each value cell.
const DOM_FIGURES: &str = "Object.fromEntries([...document.querySelectorAll('tr[data-fig]')].map((tr) => [tr.dataset.fig, [...tr.querySelectorAll('td.v')].map((td) => td.textContent)]))";

/// Where screenshots go (docs/report.png is the first, copied by hand).
fn shot_dir() -> PathBuf {
    let p = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report");
    std::fs::create_dir_all(&p).unwrap();
    p
}

#[test]
fn in_chromium_the_page_shows_the_figures_and_search_and_filters_work() {
    let d = tmpdir();
    // Named as a person would name it (the page's title is the inputs).
    let input = d.path().join("hermes_reason_tool_use_50.jsonl");
    std::fs::copy(fixture("hermes_reason_tool_use_50.jsonl"), &input).unwrap();
    let page = d.path().join("r.html");
    let o = traj_report(
        d.path(),
        &[
            "hermes_reason_tool_use_50.jsonl",
            "--tokenizer",
            "chars4",
            "--budget",
            "1000",
            "-o",
            "r.html",
        ],
    );
    assert_code(&o, 0);
    let c = count(&input);
    let rows = read_jsonl(&input);
    let b = Chromium::start(&page);
    let ms = b.open(&page);
    assert_eq!(b.eval("document.body.dataset.ready"), "1");
    let png = b
        .tab
        .capture_screenshot(CaptureScreenshotFormatOption::Png, None, None, true)
        .unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "a blank screenshot? {} bytes",
        png.len()
    );
    std::fs::write(shot_dir().join("report.png"), &png).unwrap();
    eprintln!("report page of 50 rows drawn in {ms:.0} ms");

    // The figures the page shows are the data's.
    let dom: BTreeMap<String, Vec<String>> = serde_json::from_value(b.eval(DOM_FIGURES)).unwrap();
    let cell = |id: &str| {
        dom.get(id)
            .unwrap_or_else(|| panic!("no figure {id} on the page"))[0]
            .clone()
    };
    assert_eq!(cell("rows"), c.rows.to_string());
    assert_eq!(cell("tool_calls.sum"), c.calls.to_string());
    assert_eq!(cell("turns.max"), c.turns.iter().max().unwrap().to_string());
    assert_eq!(cell("turns.mean"), format!("{:.1}", mean(&c.turns)));
    assert_eq!(
        cell("over_budget"),
        c.tokens.iter().filter(|t| **t > 1000).count().to_string()
    );
    for (tool, n) in &c.tools {
        assert_eq!(cell(&format!("tool.{tool}.calls")), n.to_string(), "{tool}");
    }
    // The turns histogram's bars hold every row.
    let bars = b.eval("[...document.querySelectorAll('[data-plot=turns] rect')].reduce((s, r) => s + +r.dataset.count, 0)");
    assert_eq!(bars, json!(c.rows));
    // Nothing rendered loads or links out.
    let links = b.eval("[...document.querySelectorAll('[src], [href]')].map((e) => e.getAttribute('src') || e.getAttribute('href')).filter((u) => !u.startsWith('#'))");
    assert_eq!(links, json!([]));
    assert_eq!(b.shown(), (50, 50, 50));

    // Search by typing: the rows whose text holds the word.
    let word = "latitude";
    let want = rows
        .iter()
        .filter(|r| {
            r["conversations"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["value"].as_str().unwrap().to_lowercase().contains(word))
        })
        .count() as u64;
    assert!(want > 0 && want < 50, "{want} rows hold {word:?}");
    b.tab.find_element("#q").unwrap().click().unwrap();
    b.tab.type_str(word).unwrap();
    assert_eq!(b.shown(), (want, 50, want), "search {word:?}");
    // Cleared by keys, all rows are back.
    for _ in 0..word.len() {
        b.tab.press_key("Backspace").unwrap();
    }
    assert_eq!(b.shown(), (50, 50, 50));

    // The tool filter, by keys on the focused list: its first tool (sorted).
    let first_tool = c.tools.keys().next().unwrap().clone();
    let with_tool = rows
        .iter()
        .filter(|r| {
            r["conversations"].as_array().unwrap().iter().any(|t| {
                t["from"] == "gpt"
                    && sharegpt_calls(t["value"].as_str().unwrap()).contains(&first_tool)
            })
        })
        .count() as u64;
    b.tab.find_element("#f-tool").unwrap().focus().unwrap();
    b.tab.press_key("ArrowDown").unwrap();
    assert_eq!(
        b.eval("document.getElementById('f-tool').value"),
        json!(first_tool)
    );
    assert_eq!(
        b.shown(),
        (with_tool, 50, with_tool),
        "tool filter {first_tool}"
    );

    // Click a row: its conversation, turn by turn, the system prompt folded.
    b.tab.find_element("#list li").unwrap().click().unwrap();
    let n = b
        .eval("+document.querySelector('#list li.sel').dataset.n")
        .as_u64()
        .unwrap() as usize;
    let conv = rows[n]["conversations"].as_array().unwrap();
    let non_system = conv.iter().filter(|t| t["from"] != "system").count();
    assert_eq!(
        b.eval("document.querySelectorAll('#conv .turn').length"),
        json!(non_system)
    );
    assert_eq!(
        b.eval("document.querySelectorAll('#conv details.sys:not([open])').length"),
        json!(1)
    );
    let calls = conv
        .iter()
        .filter(|t| t["from"] == "gpt")
        .map(|t| sharegpt_calls(t["value"].as_str().unwrap()).len())
        .sum::<usize>();
    assert_eq!(
        b.eval("document.querySelectorAll('#conv .call').length"),
        json!(calls)
    );
    std::fs::write(
        shot_dir().join("report-viewer.png"),
        b.tab
            .capture_screenshot(CaptureScreenshotFormatOption::Png, None, None, true)
            .unwrap(),
    )
    .unwrap();

    assert_eq!(b.errors(), Vec::<String>::new(), "the page logged errors");
    b.assert_no_network(&page);
}

/// Rows of the page-load test: `TRAJ_REPORT_ROWS` (scripts/bench-report.sh measures
/// 100,000 once), else 10,000 (a page of as many embedded rows as 100,000 give).
fn load_rows() -> usize {
    std::env::var("TRAJ_REPORT_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

/// The page of many rows opens in Chromium with every embedded row drawn and no error.
/// How long it takes is a benchmark's figure (scripts/bench-report.sh sets
/// `TRAJ_REPORT_MAX_MS=2000`, the bound traj-report promises); a test run on a shared
/// machine only prints it.
#[test]
fn a_page_of_many_rows_loads_in_chromium_with_every_row_drawn() {
    let d = tmpdir();
    let n = load_rows();
    generate(&d.path().join("rows.jsonl"), n);
    let o = traj_report(d.path(), &["rows.jsonl", "-o", "big.html"]);
    assert_code(&o, 0);
    let page = d.path().join("big.html");
    let size = std::fs::metadata(&page).unwrap().len();
    let data = data_block(&std::fs::read_to_string(&page).unwrap());
    assert_fig(&figures(&data), "rows", n as f64);
    let embedded = data["rows"].as_array().unwrap().len();
    let b = Chromium::start(&page);
    // The first opening is the one that counts (a fresh browser); the second is shown
    // beside it.
    let ms = b.open(&page);
    let again = b.open(&page);
    eprintln!(
        "report page of {n} rows ({:.1} MB, {embedded} embedded) drawn in {ms:.0} ms (opened again: {again:.0} ms)",
        size as f64 / 1e6
    );
    assert_eq!(b.shown().2, embedded as u64);
    assert_eq!(b.errors(), Vec::<String>::new(), "the page logged errors");
    b.assert_no_network(&page);
    if let Some(max) = std::env::var("TRAJ_REPORT_MAX_MS")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
    {
        assert!(
            ms < max,
            "the page of {n} rows took {ms:.0} ms to draw (bound {max} ms)"
        );
    }
}

/// Rows nobody here wrote, read as the stages read them: a `--columns core` row's run
/// fields inside its `metadata` (status, reward and pass@k as traj-filter's `--stats`
/// gives them), the reference's tombstones (counted, no bad line), an Atropos group
/// (one row per rollout, as traj-normalize reads it), a message list holding a string
/// and a number (shown as written), and a bad line (named on the page).
#[test]
fn foreign_shapes_are_read_as_the_stages_read_them() {
    let d = tmpdir();
    let core = |uid: &str, reward: f64| {
        json!({"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}],
               "tools": "[]", "tool_stats": "{}", "tool_error_counts": "{}",
               "metadata": json!({"task_uid": uid, "reward": reward, "completed": true}).to_string()})
    };
    let rows = [
        core("t:0:0", 1.0),
        core("t:0:1", 0.0),
        core("u:0:0", 0.25),
        json!({"prompt_index": 9, "discarded": "no_reasoning", "prompt": "p"}),
        json!({"messages": [{"role": "user", "content": "q"}, "stray SECRET string", 42,
               {"role": "assistant", "content": "a"}]}),
    ];
    let mut text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    text.push_str("not json\n");
    text.push_str(&std::fs::read_to_string(fixture("atropos_scored_groups.jsonl")).unwrap());
    std::fs::write(d.path().join("in.jsonl"), &text).unwrap();
    let skip = ["in.jsonl", "--on-error", "skip", "--rejects", "rej.jsonl"];
    let page_args = ["--tokenizer", "chars4", "-o", "r.html"];
    let o = traj_report(d.path(), &[&skip[..], &page_args].concat());
    assert_code(&o, 0);
    let page = std::fs::read_to_string(d.path().join("r.html")).unwrap();
    let data = data_block(&page);
    let ov = &data["datasets"][0]["overview"];
    // 3 core rows, the list with strays, 12 rollouts of 3 Atropos groups.
    assert_eq!(ov["rows"], 16, "{ov}");
    assert_eq!(ov["bad_lines"], 1, "{ov}");
    assert_eq!(ov["discarded"], json!({"no_reasoning": 1}), "{ov}");
    assert_eq!(
        ov["first_bad"],
        json!("in.jsonl:6: invalid JSON: expected ident at line 1 column 2")
    );
    assert_eq!(ov["status"]["completed"], 3, "{ov}");
    // The groups' figures are traj-filter's on the same rows (the core rows and the
    // Atropos rollouts as traj-normalize writes them).
    let mut c = cmd("traj-normalize", d.path());
    c.args([
        "-q",
        "--on-error",
        "skip",
        "--rejects",
        "nrej.jsonl",
        "--to",
        "openai",
    ]);
    c.args(["in.jsonl", "-o", "n.jsonl"]);
    assert_code(&run(c), 0);
    let mut c = cmd("traj-filter", d.path());
    c.args(["-q", "--stats", "s.json", "n.jsonl", "-o", "/dev/null"]);
    assert_code(&run(c), 0);
    let s: Value =
        serde_json::from_str(&std::fs::read_to_string(d.path().join("s.json")).unwrap()).unwrap();
    let figs = figures(&data);
    let r = &s["rewards"]["run"];
    assert_eq!(num(&figs["rollouts.prompts"][0]), num(&r["groups"]), "{s}");
    let mut shown = 0;
    for (i, p) in r["pass_at_k"].as_array().unwrap().iter().enumerate() {
        if let Some(v) = figs.get(&format!("rollouts.pass@{}", i + 1)) {
            shown += 1;
            let got = num(&v[0]);
            assert!((got - num(p)).abs() < 1e-9, "pass@{}: {got} vs {p}", i + 1);
        }
    }
    assert_eq!(shown, 3, "pass@1, @2, @4: {figs:?}");
    // The stray entries are on the page as written; the mean reward has three decimals.
    assert!(
        page.contains("stray SECRET string"),
        "the string entry is not shown"
    );
    let o = traj_report(d.path(), &[&skip[..], &["--summary", "-q"]].concat());
    assert_code(&o, 0);
    let mean = stdout(&o)
        .lines()
        .find(|l| l.trim_start().starts_with("mean reward"))
        .map(|l| l.split_whitespace().last().unwrap().to_string())
        .unwrap();
    assert_eq!(mean.split('.').nth(1).map(str::len), Some(3), "{mean}");
    // No row is "the most tool errors" of rows without any.
    for r in data["rows"].as_array().unwrap() {
        assert!(
            !r["pick"]
                .as_array()
                .unwrap()
                .contains(&json!("most tool errors")),
            "{}",
            r["pick"]
        );
    }
}

#[test]
fn the_page_and_other_outputs_never_share_stdout() {
    let d = tmpdir();
    std::fs::write(d.path().join("in.jsonl"), "{\"messages\": []}\n").unwrap();
    for args in [
        &["--rejects", "-"][..],
        &["--summary", "-o", "-"],
        &["--summary", "--rejects", "-"],
    ] {
        let mut a = vec!["in.jsonl"];
        a.extend_from_slice(args);
        let o = traj_report(d.path(), &a);
        assert_code(&o, 2);
        assert!(
            stderr(&o).contains("both name stdout"),
            "{args:?}: {}",
            stderr(&o)
        );
        assert!(stdout(&o).is_empty(), "{args:?}");
    }
    // A stage's JSON document in a data directory is named when passed over.
    std::fs::create_dir(d.path().join("dir")).unwrap();
    std::fs::write(d.path().join("dir/a.jsonl"), "{\"messages\": []}\n").unwrap();
    std::fs::write(d.path().join("dir/filter-stats.json"), "{\"read\": 1}\n").unwrap();
    let o = traj_report(d.path(), &["dir", "--summary"]);
    assert_code(&o, 0);
    assert!(
        stderr(&o).contains("filter-stats.json: not read"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn compare_counts_a_tool_one_dataset_never_called_as_zero() {
    let d = tmpdir();
    let plain = json!({"messages": [{"role": "user", "content": "q"},
        {"role": "assistant", "content": "a"}]});
    let call = json!({"messages": [{"role": "user", "content": "q"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function",
            "function": {"name": "terminal", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "ok"},
        {"role": "assistant", "content": "a"}]});
    std::fs::write(d.path().join("a.jsonl"), format!("{plain}\n")).unwrap();
    std::fs::write(d.path().join("b.jsonl"), format!("{call}\n")).unwrap();
    let o = traj_report(
        d.path(),
        &["--compare", "a.jsonl", "b.jsonl", "-o", "c.html"],
    );
    assert_code(&o, 0);
    let data = data_block(&std::fs::read_to_string(d.path().join("c.html")).unwrap());
    let figs = figures(&data);
    assert_eq!(figs["tool.terminal.calls"], [json!(0.0), json!(1.0)]);
}

/// Other people's odd inputs, each of which once broke the report or misled its reader.
#[test]
fn odd_inputs_of_other_peoples_data_are_read_or_refused_plainly() {
    let d = tmpdir();
    let chat = |extra: &str| {
        format!(
            r#"{{{extra}"messages":[{{"role":"user","content":"q"}},{{"role":"assistant","content":"a"}}]}}"#
        )
    };
    // Numbers at the ends of i64 (a "worst reward" sentinel, usage past i64): the
    // histograms' arithmetic overflowed and the report panicked (exit 101).
    let rows = [
        chat(r#""reward":0,"#),
        chat(r#""reward":1e16,"#),
        chat(r#""reward":-1.7976931348623157e308,"#),
        chat(r#""usage":{"total_tokens":9223372036854775807},"#),
        chat(r#""usage":{"prompt_tokens":18446744073709551615,"completion_tokens":5},"#),
    ];
    std::fs::write(d.path().join("ext.jsonl"), rows.join("\n") + "\n").unwrap();
    let o = traj_report(d.path(), &["ext.jsonl", "--summary"]);
    assert_code(&o, 0);
    // u64::MAX was cast to -1: 5 API tokens more than nothing read 4.
    assert!(!stdout(&o).contains("API tokens                                           4"));
    assert_code(&traj_report(d.path(), &["ext.jsonl", "-o", "ext.html"]), 0);

    // stdin named twice: the second read nothing, and the page said B had 0 rows.
    let mut c = cmd("traj-report", d.path());
    c.args(["--compare", "-", "-", "--summary"]);
    c.stdin(std::fs::File::open(d.path().join("ext.jsonl")).unwrap());
    let o = c.output().unwrap();
    assert_code(&o, 2);
    assert!(
        stderr(&o).contains("stdin (-) is named twice"),
        "{}",
        stderr(&o)
    );

    // A tool name with terminal escapes: --summary printed them raw (a cleared screen,
    // a forged table line).
    let evil = json!({"messages": [{"role": "user", "content": "q"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function",
            "function": {"name": "x\u{1b}[2J\u{7}\nrows 999", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "1", "content": "ok"},
        {"role": "assistant", "content": "done"}]});
    std::fs::write(d.path().join("evil.jsonl"), format!("{evil}\n")).unwrap();
    let o = traj_report(d.path(), &["evil.jsonl", "--summary"]);
    assert_code(&o, 0);
    let table = stdout(&o);
    assert!(
        !table.contains('\u{1b}') && !table.contains('\u{7}'),
        "{table:?}"
    );
    assert!(table.contains(r"x\u{1b}[2J\u{7}\nrows 999"), "{table}");

    // A traj-run directory with a pipeline's files beside its rows: they were passed
    // over without a word.
    let rundir = d.path().join("run");
    std::fs::create_dir_all(rundir.join("more")).unwrap();
    std::fs::write(
        rundir.join("batch_0.jsonl"),
        chat(r#""prompt_index":0,"#) + "\n",
    )
    .unwrap();
    std::fs::write(rundir.join("checkpoint.json"), "{}\n").unwrap();
    std::fs::write(
        rundir.join("trajectories_compressed.jsonl"),
        chat("") + "\n",
    )
    .unwrap();
    std::fs::write(rundir.join("more/extra.jsonl"), chat("") + "\n").unwrap();
    let o = traj_report(d.path(), &["run", "--summary"]);
    assert_code(&o, 0);
    for f in ["trajectories_compressed.jsonl", "more/extra.jsonl"] {
        assert!(
            stderr(&o).contains(&format!(
                "{f}: not read (beside the rows of a traj-run directory"
            )),
            "{f}: {}",
            stderr(&o)
        );
    }

    // A Hub snapshot: its `dataset_infos.json` was read as rows and failed the report;
    // its Parquet, gzipped, was "invalid JSON".
    let hub = d.path().join("hub/data");
    std::fs::create_dir_all(&hub).unwrap();
    std::fs::write(
        d.path().join("hub/dataset_infos.json"),
        "{\n  \"default\": {}\n}\n",
    )
    .unwrap();
    let mut c = cmd("traj-normalize", d.path());
    c.args(["ext.jsonl", "-o", "hub/data/train-00000-of-00001.parquet"]);
    assert_code(&run(c), 0);
    let o = traj_report(d.path(), &["hub", "--summary"]);
    assert_code(&o, 0);
    assert!(
        stderr(&o).contains("dataset_infos.json: not read"),
        "{}",
        stderr(&o)
    );
    let parquet = std::fs::read(hub.join("train-00000-of-00001.parquet")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, &parquet).unwrap();
    std::fs::write(d.path().join("p.parquet.gz"), gz.finish().unwrap()).unwrap();
    for bin in ["traj-report", "traj-normalize"] {
        let mut c = cmd(bin, d.path());
        c.arg("p.parquet.gz");
        c.arg(if bin == "traj-report" {
            "--summary"
        } else {
            "-q"
        });
        let o = run(c);
        assert_code(&o, 0);
        if bin == "traj-normalize" {
            assert_eq!(stdout(&o).lines().count(), 5, "{bin}");
        } else {
            assert!(
                stderr(&o).contains("5 lines read, 5 rows"),
                "{}",
                stderr(&o)
            );
        }
    }

    // --before with rows paired by their number, after a sample: the numbers no longer
    // name the same rows, and each summary showed another row's turns as replaced.
    let long: Vec<String> = (0..6)
        .map(|i| {
            let mut turns = vec![json!({"from": "system", "value": "s"}),
                json!({"from": "human", "value": format!("question {i}")})];
            for k in 0..6 {
                turns.push(json!({"from": "gpt", "value": format!("<think>\n</think>\nanswer {i}.{k} {}", "w ".repeat(200))}));
                turns.push(json!({"from": "human", "value": format!("more {i}.{k}")}));
            }
            turns.push(json!({"from": "gpt", "value": "<think>\n</think>\nend"}));
            json!({"conversations": turns}).to_string()
        })
        .collect();
    std::fs::write(d.path().join("long.jsonl"), long.join("\n") + "\n").unwrap();
    let mut c = cmd("traj-compress", d.path());
    c.args([
        "long.jsonl",
        "--offline",
        "--tokenizer",
        "chars4",
        "--target-max-tokens",
        "600",
    ]);
    c.args(["--sample-percent", "50", "-o", "comp.jsonl", "-q"]);
    assert_code(&run(c), 0);
    let o = traj_report(
        d.path(),
        &["comp.jsonl", "--before", "long.jsonl", "-o", "c.html"],
    );
    assert_code(&o, 0);
    assert!(
        stderr(&o).contains("--before: 3 rows without an id, prompt_index, prompt_hash or task_key against 6 in --before"),
        "{}",
        stderr(&o)
    );
    let html = std::fs::read_to_string(d.path().join("c.html")).unwrap();
    let data = data_block(&html).to_string();
    assert!(data.contains("\"sum_at\":"), "the summaries are embedded");
    assert!(!data.contains("\"rep\":"), "no replaced turns shown");
}

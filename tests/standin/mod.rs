//! A stand-in OpenAI-compatible endpoint for tests, the offline demo and benchmarks.
//!
//! It is NOT a model and never part of the product binaries: it serves scripted replies
//! (`POST /v1/chat/completions`, `GET /v1/models`) on `127.0.0.1:<free port>`, one thread
//! per connection, HTTP/1.1 keep-alive, and records every request it got so tests can
//! assert on what the client sent. The script format is described in `README.md` beside
//! this file.

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

/// One scripted reply.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reply {
    /// Assistant text. `{prompt}`, `{turn}` and `{tool_output}` (the last tool message)
    /// are replaced.
    pub content: Option<String>,
    /// Reasoning text, sent in `reasoning_field`.
    pub reasoning: Option<String>,
    /// `reasoning` (default), `reasoning_content` or `reasoning_details`.
    pub reasoning_field: Option<String>,
    /// Tool calls to make.
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    /// Default: `tool_calls` when there are tool calls, else `stop`.
    pub finish_reason: Option<String>,
    /// `native_finish_reason` of the choice (OpenRouter passes the upstream
    /// provider's own reason on, e.g. Gemini's `MALFORMED_FUNCTION_CALL`).
    pub native_finish_reason: Option<String>,
    /// Pad the content with this many `x` bytes (a huge reply).
    pub content_bytes: Option<usize>,
    /// Send the reply without `Content-Length` (chunked transfer encoding).
    #[serde(default)]
    pub chunked: bool,
    /// Replaces the computed usage (chars / 4).
    pub usage: Option<Value>,
    /// Added to usage as `cost`.
    pub cost: Option<f64>,
    /// Answer with this HTTP status and an error object carrying `error`.
    pub status: Option<u16>,
    /// Error message (with `status`, or alone: an error object in a 200 reply).
    pub error: Option<String>,
    /// `Retry-After` header value (with `status`).
    pub retry_after: Option<String>,
    /// Wait before answering (added to the global latency).
    pub delay_ms: Option<u64>,
    /// Never answer (the connection stays open until the server stops).
    #[serde(default)]
    pub hang: bool,
    /// With `body`: send the headers and the first half of the body, then nothing more
    /// (a reply still arriving when the client's timeout fires).
    #[serde(default)]
    pub stall_body: bool,
    /// Send this text as the whole body (status 200 unless `status`), e.g. invalid JSON.
    pub body: Option<String>,
}

/// A tool call in a [`Reply`].
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    pub name: String,
    /// An object (serialised for the wire) or a raw string sent as is.
    #[serde(default)]
    pub arguments: Value,
    pub id: Option<String>,
}

/// Replies for the prompts whose first user message contains `match`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Substring of the first user message (absent or empty: every prompt).
    #[serde(default, rename = "match")]
    pub pattern: String,
    /// Served once each, in order, to the first requests of each distinct prompt.
    #[serde(default)]
    pub before: Vec<Reply>,
    /// Reply number k answers a request holding k assistant messages (the last one
    /// repeats).
    #[serde(default)]
    pub turns: Vec<Reply>,
    /// The reply to a request without `tools` (the final-answer request).
    pub last: Option<Reply>,
}

/// A whole script.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// Delay before every reply.
    #[serde(default)]
    pub latency_ms: u64,
    /// Served in order to any request before the rules apply.
    #[serde(default)]
    pub queue: Vec<Reply>,
    /// The first rule whose pattern matches answers.
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// The reply when no rule matches (default: a short answer echoing the prompt).
    pub default: Option<Reply>,
    /// Keep the bodies of the requests (default true).
    pub record: Option<bool>,
    /// Every `n`th chat request (counted over all requests, retries included) gets
    /// `reply` instead, e.g. a 429 with `Retry-After`.
    pub every: Option<Every>,
    /// A wave of refusals across all clients (429s, 402s): once `after` chat requests
    /// were answered, every request gets `wave.reply` for `for_ms` (forever without).
    pub wave: Option<Wave>,
    /// Append one line per chat request to this file: milliseconds since the start,
    /// the request's number, its status and a hash of its messages (a retry has the
    /// hash of the request it repeats).
    #[serde(skip)]
    pub trace: Option<std::path::PathBuf>,
}

/// The reply every `n`th request gets (see [`Script::every`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Every {
    pub n: u64,
    pub reply: Reply,
}

/// The reply of every request of the wave (see [`Script::wave`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Wave {
    /// Requests answered normally before the wave starts.
    #[serde(default)]
    pub after: u64,
    /// How long the wave lasts from its first request (absent: to the end).
    pub for_ms: Option<u64>,
    pub reply: Reply,
}

impl Script {
    pub fn from_json(v: Value) -> Script {
        serde_json::from_value(v).expect("valid stand-in script")
    }
}

struct State {
    script: Script,
    queue: Mutex<std::collections::VecDeque<Reply>>,
    before_used: Mutex<HashMap<(usize, String), usize>>,
    requests: Mutex<Vec<Value>>,
    /// The chat completion bodies sent (not streamed), as sent.
    responses: Mutex<Vec<String>>,
    /// Bodies of `POST /images/generations` requests.
    image_requests: Mutex<Vec<Value>>,
    count: AtomicU64,
    /// Chat requests being answered now, and the most there ever were at once.
    in_flight: AtomicU64,
    peak: AtomicU64,
    stop: AtomicBool,
    next_id: AtomicU64,
    /// Chat requests counted for [`Script::every`].
    nth: AtomicU64,
    /// When the wave's first request came (for [`Script::wave`]).
    first: Mutex<Option<std::time::Instant>>,
    /// Chat requests answered, by status.
    statuses: Mutex<std::collections::BTreeMap<u16, u64>>,
    /// [`Script::trace`], open, and the time it counts from.
    trace: Option<Mutex<std::fs::File>>,
    started: std::time::Instant,
}

/// A running stand-in; stops (best effort) when dropped.
pub struct Standin {
    addr: SocketAddr,
    state: Arc<State>,
}

impl Standin {
    /// Start serving `script` on 127.0.0.1 at a free port.
    pub fn start(script: Script) -> Standin {
        Standin::start_on("127.0.0.1:0", script).expect("bind stand-in")
    }

    /// Start from a JSON script value.
    pub fn json(script: Value) -> Standin {
        Standin::start(Script::from_json(script))
    }

    /// Start serving `script` on `addr`.
    pub fn start_on(addr: &str, script: Script) -> std::io::Result<Standin> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            queue: Mutex::new(script.queue.clone().into()),
            before_used: Mutex::new(HashMap::new()),
            requests: Mutex::new(Vec::new()),
            responses: Mutex::new(Vec::new()),
            image_requests: Mutex::new(Vec::new()),
            count: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            peak: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            next_id: AtomicU64::new(1),
            nth: AtomicU64::new(0),
            first: Mutex::new(None),
            statuses: Mutex::new(std::collections::BTreeMap::new()),
            trace: match &script.trace {
                Some(p) => Some(Mutex::new(std::fs::File::create(p)?)),
                None => None,
            },
            started: std::time::Instant::now(),
            script,
        });
        let st = state.clone();
        std::thread::Builder::new()
            .name("standin-accept".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if st.stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let st = st.clone();
                    let _ = std::thread::Builder::new()
                        .stack_size(256 * 1024)
                        .spawn(move || serve(conn, &st));
                }
            })?;
        Ok(Standin { addr, state })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL to give a client (`http://127.0.0.1:PORT/v1`).
    pub fn url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The chat request bodies received so far, in arrival order.
    pub fn requests(&self) -> Vec<Value> {
        self.state.requests.lock().unwrap().clone()
    }

    /// The chat completion bodies sent (200, not streamed), byte for byte.
    pub fn responses(&self) -> Vec<String> {
        self.state.responses.lock().unwrap().clone()
    }

    /// Every images request body received.
    #[allow(dead_code)]
    pub fn image_requests(&self) -> Vec<Value> {
        self.state.image_requests.lock().unwrap().clone()
    }

    /// How many chat requests arrived.
    pub fn count(&self) -> u64 {
        self.state.count.load(Ordering::Relaxed)
    }

    /// How many chat requests were answered with `status`.
    pub fn count_status(&self, status: u16) -> u64 {
        self.state
            .statuses
            .lock()
            .unwrap()
            .get(&status)
            .copied()
            .unwrap_or(0)
    }

    /// The most chat requests that were being answered at the same time.
    pub fn peak_in_flight(&self) -> u64 {
        self.state.peak.load(Ordering::SeqCst)
    }

    /// Block forever (for the runnable wrapper).
    pub fn wait(&self) {
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
}

impl Drop for Standin {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::Relaxed);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(100));
    }
}

struct Request {
    method: String,
    path: String,
    body: Vec<u8>,
    close: bool,
}

fn read_request(r: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let http10 = parts.next().is_some_and(|v| v == "HTTP/1.0");
    let mut len = 0usize;
    let mut close = http10;
    loop {
        line.clear();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            let k = k.trim().to_ascii_lowercase();
            let v = v.trim();
            if k == "content-length" {
                len = v.parse().ok()?;
            } else if k == "connection" {
                close = v.eq_ignore_ascii_case("close");
            }
        }
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).ok()?;
    Some(Request {
        method,
        path,
        body,
        close,
    })
}

fn serve(conn: TcpStream, st: &State) {
    let _ = conn.set_nodelay(true);
    let Ok(write_half) = conn.try_clone() else {
        return;
    };
    let mut w = write_half;
    let mut r = BufReader::new(conn);
    while let Some(req) = read_request(&mut r) {
        if st.stop.load(Ordering::Relaxed) {
            return;
        }
        let keep = match (req.method.as_str(), req.path.trim_end_matches('/')) {
            ("GET", p) if p.ends_with("/models") => {
                let body = json!({"object": "list", "data": [{"id": "standin", "object": "model", "owned_by": "traj-tests"}]});
                respond(&mut w, 200, &[], &body.to_string(), req.close)
            }
            ("POST", p) if p.ends_with("/chat/completions") => chat(&mut w, st, &req),
            ("POST", p) if p.ends_with("/images/generations") => images(&mut w, st, &req),
            _ => respond(
                &mut w,
                404,
                &[],
                &json!({"error": {"message": format!("no route {} {}", req.method, req.path), "code": 404}}).to_string(),
                req.close,
            ),
        };
        if !keep {
            return;
        }
    }
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// Write a response; returns whether the connection stays open.
fn respond(
    w: &mut TcpStream,
    status: u16,
    headers: &[(&str, String)],
    body: &str,
    close: bool,
) -> bool {
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        reason_phrase(status),
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if close {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    let mut buf = head.into_bytes();
    buf.extend_from_slice(body.as_bytes());
    w.write_all(&buf).is_ok() && w.flush().is_ok() && !close
}

/// A 200 reply in 64 KiB chunks, without `Content-Length`; the connection closes.
fn respond_chunked(w: &mut TcpStream, body: &str) -> bool {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    if w.write_all(head.as_bytes()).is_err() {
        return false;
    }
    for part in body.as_bytes().chunks(64 << 10) {
        let size = format!("{:x}\r\n", part.len());
        if w.write_all(size.as_bytes()).is_err()
            || w.write_all(part).is_err()
            || w.write_all(b"\r\n").is_err()
        {
            // The client stopped reading (a size limit): fine.
            return false;
        }
    }
    let _ = w.write_all(b"0\r\n\r\n");
    let _ = w.flush();
    false
}

fn first_user(messages: &[Value]) -> String {
    messages
        .iter()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .map(|m| text_of(m.get("content")))
        .unwrap_or_default()
}

fn text_of(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

fn pick(st: &State, req: &Value) -> Reply {
    let nth = st.nth.fetch_add(1, Ordering::SeqCst) + 1;
    let every = st
        .script
        .every
        .as_ref()
        .filter(|e| nth.is_multiple_of(e.n.max(1)));
    if let Some(trace) = &st.trace {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        req.get("messages").map(Value::to_string).hash(&mut h);
        let status = every.map_or(200, |e| e.reply.status.unwrap_or(200));
        let line = format!(
            "{:.1} {nth} {status} {:016x}\n",
            st.started.elapsed().as_secs_f64() * 1000.0,
            h.finish()
        );
        let _ = trace.lock().unwrap().write_all(line.as_bytes());
    }
    if let Some(e) = every {
        return e.reply.clone();
    }
    if let Some(w) = st.script.wave.as_ref().filter(|w| nth > w.after) {
        let first = *st
            .first
            .lock()
            .unwrap()
            .get_or_insert_with(std::time::Instant::now);
        if w.for_ms
            .is_none_or(|ms| first.elapsed() < Duration::from_millis(ms))
        {
            return w.reply.clone();
        }
    }
    if let Some(r) = st.queue.lock().unwrap().pop_front() {
        return r;
    }
    let empty = Vec::new();
    let messages = req
        .get("messages")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let prompt = first_user(messages);
    let turn = messages
        .iter()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
        .count();
    let has_tools = req
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    for (i, rule) in st.script.rules.iter().enumerate() {
        if !rule.pattern.is_empty() && !prompt.contains(&rule.pattern) {
            continue;
        }
        if !rule.before.is_empty() {
            let mut used = st.before_used.lock().unwrap();
            let n = used.entry((i, prompt.clone())).or_insert(0);
            if *n < rule.before.len() {
                *n += 1;
                return rule.before[*n - 1].clone();
            }
        }
        if !has_tools && let Some(last) = &rule.last {
            return last.clone();
        }
        if let Some(r) = rule.turns.get(turn).or(rule.turns.last()) {
            return r.clone();
        }
        if let Some(last) = &rule.last {
            return last.clone();
        }
    }
    st.script.default.clone().unwrap_or_else(|| Reply {
        content: Some("Answer to: {prompt}".into()),
        ..Reply::default()
    })
}

fn fill(template: &str, prompt: &str, turn: usize, tool_output: &str) -> String {
    template
        .replace("{prompt}", prompt)
        .replace("{turn}", &turn.to_string())
        .replace("{tool_output}", tool_output)
}

/// `fill` (the placeholders of a reply) in every string of a JSON value (keys kept as
/// they are).
fn fill_strings(v: &Value, fill: &dyn Fn(&str) -> String) -> Value {
    match v {
        Value::String(s) => Value::String(fill(s)),
        Value::Array(a) => Value::Array(a.iter().map(|x| fill_strings(x, fill)).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (k.clone(), fill_strings(x, fill)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Answer one chat request; returns whether the connection stays open.
fn chat(w: &mut TcpStream, st: &State, req: &Request) -> bool {
    st.count.fetch_add(1, Ordering::Relaxed);
    let now = st.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    st.peak.fetch_max(now, Ordering::SeqCst);
    let open = answer(w, st, req);
    st.in_flight.fetch_sub(1, Ordering::SeqCst);
    open
}

/// A 1x1 PNG, base64: the image of `b64_json` answers.
const PIXEL_PNG_B64: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";

/// `POST /images/generations` (kept in [`Standin::image_requests`]): a prompt that
/// contains `inline` gets `b64_json` (a 1x1 PNG), any other a made-up URL.
fn images(w: &mut TcpStream, st: &State, req: &Request) -> bool {
    let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
    let prompt = body["prompt"].as_str().unwrap_or("").to_string();
    let n = {
        let mut reqs = st.image_requests.lock().unwrap();
        reqs.push(body);
        reqs.len()
    };
    let data = if prompt.contains("inline") {
        json!({"b64_json": PIXEL_PNG_B64, "revised_prompt": prompt})
    } else {
        json!({"url": format!("https://images.standin.invalid/{n}.png"), "revised_prompt": prompt})
    };
    let out = json!({"created": 0, "data": [data]});
    respond(w, 200, &[], &out.to_string(), req.close)
}

/// [`chat`] without the bookkeeping.
fn answer(w: &mut TcpStream, st: &State, req: &Request) -> bool {
    let body: Value = match serde_json::from_slice(&req.body) {
        Ok(v) => v,
        Err(e) => {
            let msg =
                json!({"error": {"message": format!("request is not JSON: {e}"), "code": 400}});
            return respond(w, 400, &[], &msg.to_string(), req.close);
        }
    };
    if st.script.record.unwrap_or(true) {
        st.requests.lock().unwrap().push(body.clone());
    }
    let reply = pick(st, &body);
    *st.statuses
        .lock()
        .unwrap()
        .entry(reply.status.unwrap_or(200))
        .or_insert(0) += 1;
    let delay = st.script.latency_ms + reply.delay_ms.unwrap_or(0);
    if delay > 0 {
        std::thread::sleep(Duration::from_millis(delay));
    }
    if reply.hang {
        while !st.stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
        }
        return false;
    }
    if let Some(status) = reply.status.filter(|s| *s != 200) {
        let mut headers = Vec::new();
        if let Some(ra) = &reply.retry_after {
            headers.push(("Retry-After", ra.clone()));
        }
        let text = match &reply.body {
            Some(b) => b.clone(),
            None => json!({"error": {"message": reply.error.clone().unwrap_or_else(|| reason_phrase(status).to_string()), "code": status}}).to_string(),
        };
        return respond(w, status, &headers, &text, req.close);
    }
    if let Some(b) = &reply.body {
        if reply.stall_body {
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                b.len()
            );
            let _ = w.write_all(head.as_bytes());
            let _ = w.write_all(&b.as_bytes()[..b.len() / 2]);
            let _ = w.flush();
            while !st.stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
            }
            return false;
        }
        return respond(w, 200, &[], b, req.close);
    }
    if let Some(e) = &reply.error {
        let text = json!({"error": {"message": e, "code": 500}}).to_string();
        return respond(w, 200, &[], &text, req.close);
    }
    let empty = Vec::new();
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let prompt = first_user(messages);
    let turn = messages
        .iter()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
        .count();
    let tool_output = messages
        .iter()
        .rev()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
        .map(|m| text_of(m.get("content")))
        .unwrap_or_default();
    // `{seed}` and `{seed%N}` (N in 2..=9) are the request's seed (`none` without one).
    let seed = body.get("seed").and_then(Value::as_u64);
    let fill = |t: &str, p: &str, turn: usize, o: &str| fill(&seed_fill(t, seed), p, turn, o);
    let mut message = json!({"role": "assistant"});
    let mut content = reply
        .content
        .as_deref()
        .map(|c| fill(c, &prompt, turn, &tool_output));
    if let Some(n) = reply.content_bytes {
        content
            .get_or_insert_with(String::new)
            .push_str(&"x".repeat(n));
    }
    message["content"] = content.clone().map(Value::String).unwrap_or(Value::Null);
    if let Some(r) = &reply.reasoning {
        let r = fill(r, &prompt, turn, &tool_output);
        match reply.reasoning_field.as_deref().unwrap_or("reasoning") {
            "reasoning_details" => {
                message["reasoning_details"] =
                    json!([{"type": "reasoning.text", "text": r, "format": "unknown", "index": 0}])
            }
            field => message[field] = Value::String(r),
        }
    }
    if !reply.tool_calls.is_empty() {
        let calls: Vec<Value> = reply
            .tool_calls
            .iter()
            .map(|c| {
                let id = c.id.clone().unwrap_or_else(|| {
                    format!("call_{}", st.next_id.fetch_add(1, Ordering::Relaxed))
                });
                let args = match &c.arguments {
                    Value::String(s) => fill(s, &prompt, turn, &tool_output),
                    Value::Null => "{}".to_string(),
                    // Placeholders filled inside the strings of object arguments, then
                    // serialised: a prompt with a quote or a line break stays JSON.
                    other => fill_strings(other, &|t| fill(t, &prompt, turn, &tool_output))
                        .to_string(),
                };
                json!({"id": id, "type": "function", "function": {"name": c.name, "arguments": args}})
            })
            .collect();
        message["tool_calls"] = Value::Array(calls);
    }
    let finish = reply.finish_reason.clone().unwrap_or_else(|| {
        if reply.tool_calls.is_empty() {
            "stop".into()
        } else {
            "tool_calls".into()
        }
    });
    let mut usage = reply.usage.clone().unwrap_or_else(|| {
        let p = (req.body.len() / 4) as u64;
        let c = (message.to_string().len() / 4) as u64;
        json!({"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c})
    });
    if let Some(cost) = reply.cost {
        usage["cost"] = json!(cost);
    }
    let id = st.next_id.fetch_add(1, Ordering::Relaxed);
    let model = body.get("model").cloned().unwrap_or(json!("standin"));
    if body.get("stream").and_then(Value::as_bool) == Some(true) {
        return stream(w, id, &model, &message, &finish, &usage);
    }
    let resp = json!({
        "id": format!("chatcmpl-{id}"),
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    });
    let mut resp = resp;
    if let Some(n) = &reply.native_finish_reason {
        resp["choices"][0]["native_finish_reason"] = json!(n);
    }
    if body.get("logprobs").and_then(Value::as_bool) == Some(true) {
        let top = body
            .get("top_logprobs")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        resp["choices"][0]["logprobs"] = logprobs(content.as_deref().unwrap_or(""), top);
    }
    let text = resp.to_string();
    if st.script.record.unwrap_or(true) {
        st.responses.lock().unwrap().push(text.clone());
    }
    if reply.chunked {
        return respond_chunked(w, &text);
    }
    respond(w, 200, &[], &text, req.close)
}

/// An SSE reply: one delta chunk with the whole message, one with the finish reason.
fn stream(
    w: &mut TcpStream,
    id: u64,
    model: &Value,
    message: &Value,
    finish: &str,
    usage: &Value,
) -> bool {
    let mut delta = message.clone();
    if let Some(calls) = delta.get_mut("tool_calls").and_then(Value::as_array_mut) {
        for (i, c) in calls.iter_mut().enumerate() {
            c["index"] = json!(i);
        }
    }
    let chunk = |choice: Value, usage: Option<&Value>| {
        let mut v = json!({"id": format!("chatcmpl-{id}"), "object": "chat.completion.chunk", "created": 0, "model": model, "choices": [choice]});
        if let Some(u) = usage {
            v["usage"] = u.clone();
        }
        format!("data: {v}\n\n")
    };
    let mut out = String::from(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n",
    );
    out.push_str(&chunk(
        json!({"index": 0, "delta": delta, "finish_reason": null}),
        None,
    ));
    out.push_str(&chunk(
        json!({"index": 0, "delta": {}, "finish_reason": finish}),
        Some(usage),
    ));
    out.push_str("data: [DONE]\n\n");
    let _ = w.write_all(out.as_bytes());
    let _ = w.flush();
    false
}

/// `template` with `{seed}` and `{seed%N}` filled in from the request's seed.
fn seed_fill(template: &str, seed: Option<u64>) -> String {
    let mut t = template.replace(
        "{seed}",
        &seed.map_or("none".to_string(), |s| s.to_string()),
    );
    for n in 2..=9u64 {
        let pat = format!("{{seed%{n}}}");
        if t.contains(&pat) {
            t = t.replace(
                &pat,
                &seed.map_or("none".to_string(), |s| (s % n).to_string()),
            );
        }
    }
    t
}

/// OpenAI-shaped `logprobs` of `content`: tokens of up to 3 characters, each with a
/// made-up but deterministic logprob (from the token and its place), a token id, its
/// bytes and `top` alternatives.
fn logprobs(content: &str, top: u64) -> Value {
    let chars: Vec<char> = content.chars().collect();
    let tokens: Vec<Value> = chars
        .chunks(3)
        .enumerate()
        .map(|(i, c)| {
            let tok: String = c.iter().collect();
            let h = tok
                .bytes()
                .fold(i as u64 * 7919 + 17, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
            let lp = -((h % 40000) as f64) / 10000.0 - 0.0001;
            let alts: Vec<Value> = (0..top)
                .map(|k| json!({"token": format!("{tok}~{k}"), "logprob": lp - 1.0 - k as f64, "bytes": format!("{tok}~{k}").into_bytes()}))
                .collect();
            json!({"token": tok, "logprob": lp, "bytes": tok.clone().into_bytes(),
                   "token_id": h % 50000, "top_logprobs": alts})
        })
        .collect();
    json!({"content": tokens, "refusal": null})
}

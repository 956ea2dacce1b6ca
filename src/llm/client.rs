//! The OpenAI-compatible chat client shared by traj-run and traj-compress.
//!
//! One retry layer: 429, 5xx, timeouts and transport errors are retried with jittered
//! exponential backoff that honours `Retry-After`; 400/401/402/403/404, context-length
//! errors and replies over the size limit are classified and returned at once. A 429
//! (and a 402 under [`OnPayment::Wait`]) pauses every clone of the client together
//! ([`super::pause`]). Reasoning is read from `reasoning`, `reasoning_content` or
//! `reasoning_details`, whichever the provider sends.

use super::error::{class_text, transport_class};
use super::pause::Pause;
use super::rate::RateLimiter;
use super::{ErrorClass, LlmError, stops_the_run};
use crate::format::message::{content_text, reasoning_text};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Settings of a [`Client`].
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Base URL up to and including `/v1` (the client appends `/chat/completions`).
    pub base_url: String,
    /// Bearer token; `None` sends no `Authorization` header (local servers).
    pub api_key: Option<String>,
    /// Whole-request timeout.
    pub timeout: Duration,
    /// Retries after the first attempt for retryable failures.
    pub max_retries: u32,
    /// First backoff delay; doubles per retry.
    pub backoff_base: Duration,
    /// Largest backoff delay (and largest `Retry-After` honoured).
    pub backoff_max: Duration,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            base_url: "https://openrouter.ai/api/v1".to_string(),
            api_key: None,
            timeout: Duration::from_secs(600),
            max_retries: 6,
            backoff_base: Duration::from_secs(2),
            backoff_max: Duration::from_secs(60),
        }
    }
}

/// Token usage of one call, and its cost where the provider reports one.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    pub cost: Option<f64>,
}

impl Usage {
    pub fn from_json(v: &Value) -> Usage {
        let n = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
        let prompt = n("prompt_tokens");
        let completion = n("completion_tokens");
        let total = v
            .get("total_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(prompt + completion);
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: total,
            cost: v.get("cost").and_then(Value::as_f64),
        }
    }
}

/// One chat completion: the assistant message as returned, plus what was read from it.
#[derive(Debug, Clone)]
pub struct ChatResponse {
    /// The whole response body.
    pub raw: Value,
    /// `choices[0].message`, unchanged.
    pub message: Value,
    /// Text content (empty when absent).
    pub content: String,
    /// Reasoning text from whichever field the provider used.
    pub reasoning: Option<String>,
    /// `choices[0].finish_reason`.
    pub finish_reason: Option<String>,
    /// `choices[0].native_finish_reason`: the upstream provider's own reason, which
    /// OpenRouter passes on (e.g. Gemini's `MALFORMED_FUNCTION_CALL`).
    pub native_finish_reason: Option<String>,
    /// `usage`, zero when absent.
    pub usage: Usage,
    /// Attempts it took (1 = first try).
    pub attempts: u32,
}

impl ChatResponse {
    /// The tool calls of the message (empty when none).
    pub fn tool_calls(&self) -> &[Value] {
        self.message
            .get("tool_calls")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// Read a response body; `None` when it has no usable `choices[0].message`.
    pub fn from_body(raw: Value, attempts: u32) -> Option<ChatResponse> {
        let choice = raw.get("choices")?.as_array()?.first()?.clone();
        let message = choice.get("message")?.clone();
        // A message whose content is not text, parts or null, or whose tool calls are not
        // a list, is no message this client can read (an `invalid_response`, asked
        // again), never an empty answer.
        let readable = |k: &str, v: Option<&Value>| match v {
            None | Some(Value::Null | Value::Array(_)) => true,
            Some(Value::String(_)) => k == "content",
            Some(_) => false,
        };
        if !message.is_object()
            || !["content", "tool_calls"]
                .iter()
                .all(|k| readable(k, message.get(*k)))
        {
            return None;
        }
        let content = content_text(message.get("content").unwrap_or(&Value::Null));
        let reasoning = reasoning_text(&message);
        let reason = |k: &str| choice.get(k).and_then(Value::as_str).map(str::to_string);
        let finish_reason = reason("finish_reason");
        let native_finish_reason = reason("native_finish_reason");
        let usage = raw.get("usage").map(Usage::from_json).unwrap_or_default();
        Some(ChatResponse {
            raw,
            message,
            content,
            reasoning,
            finish_reason,
            native_finish_reason,
            usage,
            attempts,
        })
    }

    /// How the reply ended, read from both finish reasons (see [`ReplyEnd`]).
    pub fn end(&self) -> ReplyEnd {
        let reasons = [&self.finish_reason, &self.native_finish_reason];
        let mut end = ReplyEnd::Normal;
        for r in reasons.into_iter().flatten() {
            end = end.max(ReplyEnd::of(r));
        }
        end
    }
}

/// How a reply ended, as far as keeping it is concerned. Ordered: when the two finish
/// reasons disagree, the later variant wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ReplyEnd {
    /// `stop`, `tool_calls`, or a reason not listed below.
    Normal,
    /// Cut by the token limit: `length`, `max_tokens`, `MAX_TOKENS`.
    Length,
    /// Withheld or cut by the provider's filter: `content_filter`, `refusal`, and
    /// Gemini's `SAFETY`, `RECITATION`, `PROHIBITED_CONTENT`, `BLOCKLIST`, `SPII`,
    /// `IMAGE_SAFETY`.
    ContentFilter,
    /// The model produced a tool call the provider could not parse: Gemini's
    /// `MALFORMED_FUNCTION_CALL` and `UNEXPECTED_TOOL_CALL`. Worth asking again.
    MalformedCall,
}

impl ReplyEnd {
    /// The end one finish-reason string means (case-insensitive).
    pub fn of(reason: &str) -> ReplyEnd {
        match reason.to_ascii_lowercase().as_str() {
            "length" | "max_tokens" | "max_output_tokens" => ReplyEnd::Length,
            "content_filter" | "refusal" | "safety" | "recitation" | "prohibited_content"
            | "blocklist" | "spii" | "image_safety" => ReplyEnd::ContentFilter,
            "malformed_function_call" | "unexpected_tool_call" => ReplyEnd::MalformedCall,
            _ => ReplyEnd::Normal,
        }
    }
}

/// Per-call controls for [`Client::chat_opts`].
#[derive(Default)]
pub struct CallOptions<'a> {
    /// Hears about each failed attempt before its wait.
    pub on_retry: Option<&'a dyn Fn(&LlmError)>,
    /// No attempt starts, and no wait lasts, past this instant; requests in flight are
    /// cut at it (the error has `deadline` set, and usually class `timeout`).
    pub deadline: Option<Instant>,
    /// Set by someone else to abandon the call between attempts (class `transport`,
    /// message "stopped").
    pub stop: Option<&'a AtomicBool>,
}

/// What a client does when the provider says the account is out of credits (402).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnPayment {
    /// Return the error at once (`payment_required`, not retried); traj-run then
    /// stops the whole run.
    #[default]
    Stop,
    /// Pause every clone of the client and probe with one request at the
    /// `Retry-After` pace (at most the largest backoff) until the provider answers.
    /// The waits use none of the request's retries.
    Wait,
}

/// The default reply size limit (`--max-response-mb`): 16 MiB, some hundred times the
/// largest real completion.
pub const DEFAULT_MAX_RESPONSE: u64 = 16 << 20;

/// Bytes of a connection's input buffer: the largest reply header ureq accepts.
const INPUT_BUFFER: usize = 64 << 10;
/// Bytes of a connection's output buffer (a request streams through it).
const OUTPUT_BUFFER: usize = 16 << 10;

/// A blocking OpenAI-compatible client; cheap to share between threads. Clones share
/// the connection pool and the back-off ([`Pause`]).
#[derive(Clone)]
pub struct Client {
    agent: ureq::Agent,
    cfg: ClientConfig,
    rate: Option<Arc<RateLimiter>>,
    meter: Option<Arc<super::Meter>>,
    pause: Arc<Pause>,
    max_response: u64,
    on_payment: OnPayment,
}

impl Client {
    pub fn new(cfg: ClientConfig) -> Client {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(cfg.timeout))
            .timeout_connect(Some(Duration::from_secs(30).min(cfg.timeout)))
            .max_idle_connections(4096)
            .max_idle_connections_per_host(4096)
            // Per connection, and a run keeps one per worker: ureq's defaults (128 KiB
            // each way, zero-filled when the connection opens) took 64 MB at 256
            // workers (docs/bench-run.md). The input buffer must hold a reply's whole
            // header, which ureq allows up to 64 KiB by default, and streams the body;
            // the output buffer streams the request.
            .input_buffer_size(INPUT_BUFFER)
            .output_buffer_size(OUTPUT_BUFFER)
            .build()
            .new_agent();
        Client {
            agent,
            cfg,
            rate: None,
            meter: None,
            pause: Arc::new(Pause::default()),
            max_response: DEFAULT_MAX_RESPONSE,
            on_payment: OnPayment::Stop,
        }
    }

    /// Refuse replies larger than `bytes` (class `response_too_large`, not retried),
    /// read no further than that, and refuse at once a reply whose `Content-Length`
    /// says it is larger.
    pub fn with_max_response(mut self, bytes: u64) -> Client {
        self.max_response = bytes.max(1);
        self
    }

    /// What a 402 does (see [`OnPayment`]).
    pub fn with_on_payment(mut self, on_payment: OnPayment) -> Client {
        self.on_payment = on_payment;
        self
    }

    /// The shared back-off of this client and its clones.
    pub fn pause(&self) -> &Pause {
        &self.pause
    }

    /// Count this client's requests and spend in `meter`, and wait for the meter's rate
    /// limiter (once the run attached one) when the client has none of its own.
    pub fn with_meter(mut self, meter: Arc<super::Meter>) -> Client {
        self.meter = Some(meter);
        self
    }

    /// The meter this client counts in, if any.
    pub fn meter(&self) -> Option<&Arc<super::Meter>> {
        self.meter.as_ref()
    }

    /// `Err` (what a tool returns) when this client's meter says the spend cap is
    /// reached.
    pub fn check_cap(&self) -> Result<(), super::meter::CapReached> {
        self.meter.as_ref().map_or(Ok(()), |m| m.check())
    }

    /// The rate limiter this client waits for, its own or its meter's.
    pub fn rate_limiter(&self) -> Option<Arc<RateLimiter>> {
        self.rate
            .clone()
            .or_else(|| self.meter.as_ref().and_then(|m| m.rate().cloned()))
    }

    /// Share `limiter` between this client and its clones: every attempt waits its slot.
    pub fn with_rate_limit(mut self, limiter: Arc<RateLimiter>) -> Client {
        self.rate = Some(limiter);
        self
    }

    pub fn config(&self) -> &ClientConfig {
        &self.cfg
    }

    /// POST `body` to `{base_url}/chat/completions`, retrying what may succeed later.
    pub fn chat(&self, body: &Value) -> Result<ChatResponse, LlmError> {
        self.chat_with(body, &|_| {})
    }

    /// Like [`Client::chat`]; `on_retry` hears about each failed attempt before its wait
    /// (for progress and logs).
    pub fn chat_with(
        &self,
        body: &Value,
        on_retry: &dyn Fn(&LlmError),
    ) -> Result<ChatResponse, LlmError> {
        self.chat_opts(
            body,
            &CallOptions {
                on_retry: Some(on_retry),
                ..CallOptions::default()
            },
        )
    }

    /// Like [`Client::chat`], with a deadline, a stop flag and a retry hook.
    pub fn chat_opts(&self, body: &Value, opts: &CallOptions) -> Result<ChatResponse, LlmError> {
        let url = format!(
            "{}/chat/completions",
            self.cfg.base_url.trim_end_matches('/')
        );
        let payload = serde_json::to_vec(body).unwrap_or_default();
        let stopped = |attempts| LlmError {
            class: ErrorClass::Transport,
            status: None,
            message: "stopped".into(),
            attempts,
            deadline: false,
        };
        let past_deadline = |attempts| LlmError {
            class: ErrorClass::Timeout,
            status: None,
            message: "deadline reached".into(),
            attempts,
            deadline: true,
        };
        let gave_up = |attempts| {
            if is_set(opts.stop) {
                stopped(attempts)
            } else {
                past_deadline(attempts)
            }
        };
        let keep_waiting =
            |next: Instant| !is_set(opts.stop) && opts.deadline.is_none_or(|d| next < d);
        let mut attempt = 0u32;
        // 402s waited out under `OnPayment::Wait` (they use no retries).
        let mut payment_waits = 0u32;
        loop {
            attempt += 1;
            let Some(turn) = self.pause.wait(&keep_waiting) else {
                return Err(gave_up(attempt - 1));
            };
            if let Some(rate) = self.rate_limiter() {
                let slot = rate.reserve();
                if !sleep_until(slot, opts) {
                    self.pause.abandoned(turn);
                    return Err(gave_up(attempt - 1));
                }
            }
            let timeout = match opts.deadline {
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        self.pause.abandoned(turn);
                        return Err(past_deadline(attempt - 1));
                    }
                    left.min(self.cfg.timeout)
                }
                None => self.cfg.timeout,
            };
            if let Some(m) = &self.meter {
                m.count_request();
            }
            let (mut err, retry_after) = match self.once(&url, &payload, attempt, timeout) {
                Ok(resp) => {
                    self.pause.answered(turn);
                    if let Some(m) = &self.meter {
                        m.record(resp.usage.cost);
                    }
                    return Ok(resp);
                }
                Err(e) => e,
            };
            let waiting_payment =
                err.class == ErrorClass::PaymentRequired && self.on_payment == OnPayment::Wait;
            if !waiting_payment && let Some(why) = stops_the_run(&err) {
                // Out of credits or a refused key, a tool's call as the agent's: stop the
                // run, never a tool error in a prompt then recorded as done.
                if let Some(m) = &self.meter {
                    m.stop_run(&why);
                }
            }
            let shared = err.class == ErrorClass::RateLimited || waiting_payment;
            if shared {
                // The back-off grows with this request's refusals and with the
                // pause's, whichever is further along.
                let n = if waiting_payment {
                    payment_waits += 1;
                    payment_waits
                } else {
                    attempt
                };
                let n = n.max(self.pause.strikes() + 1);
                self.pause.refused(turn, self.backoff(n, retry_after));
            } else if err.status.is_some() {
                self.pause.answered(turn);
            } else {
                self.pause.abandoned(turn);
            }
            if err.class == ErrorClass::Timeout
                && opts.deadline.is_some_and(|d| Instant::now() >= d)
            {
                err.message = format!("deadline reached: {}", err.message);
                err.deadline = true;
                return Err(err);
            }
            if waiting_payment {
                // Not an attempt of this request: the account is empty, not the
                // request wrong. The wait is the pause's, at the top of the loop.
                attempt -= 1;
                if let Some(f) = opts.on_retry {
                    f(&err);
                }
                continue;
            }
            if !err.class.retryable() || attempt > self.cfg.max_retries {
                return Err(err);
            }
            if let Some(f) = opts.on_retry {
                f(&err);
            }
            if shared {
                // The wait is the shared pause's, at the top of the loop.
                continue;
            }
            let wait = self.backoff(attempt, retry_after);
            if !sleep_until(Instant::now() + wait, opts) {
                if is_set(opts.stop) {
                    return Err(stopped(attempt));
                }
                err.message = format!("deadline reached: {}", err.message);
                err.deadline = true;
                return Err(err);
            }
        }
    }

    /// The wait before retry number `attempt` (1-based): jittered exponential backoff,
    /// or the server's `Retry-After` when it sent one. A `Retry-After` of 0, or a date
    /// already past (a server whose clock is behind), counts as none: it would send
    /// every retry of a 429 storm within milliseconds.
    pub fn backoff(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let exp = self
            .cfg
            .backoff_base
            .saturating_mul(1u32 << (attempt.max(1) - 1).min(16));
        let capped = exp.min(self.cfg.backoff_max);
        let jittered = capped.mul_f64(0.5 + fastrand::f64() * 0.5);
        match retry_after {
            // The server knows best, within reason: never longer than the largest backoff.
            Some(ra) if !ra.is_zero() => ra.min(self.cfg.backoff_max.max(Duration::from_secs(1))),
            _ => jittered,
        }
    }

    fn once(
        &self,
        url: &str,
        payload: &[u8],
        attempt: u32,
        timeout: Duration,
    ) -> Result<ChatResponse, (LlmError, Option<Duration>)> {
        let mut req = self
            .agent
            .post(url)
            .header("Content-Type", "application/json");
        if let Some(key) = &self.cfg.api_key {
            req = req.header("Authorization", format!("Bearer {key}"));
        }
        let fail = |class, status, message: String| LlmError {
            class,
            status,
            message,
            attempts: attempt,
            deadline: false,
        };
        let mut resp = req
            .config()
            .timeout_global(Some(timeout))
            .build()
            .send(payload)
            .map_err(|e| (fail(transport_class(&e), None, e.to_string()), None))?;
        let code = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        let limit = self.max_response;
        let too_large = |len: String| {
            fail(
                ErrorClass::ResponseTooLarge,
                Some(code),
                format!(
                    "the reply is {len} bytes, over the limit of {} MiB (--max-response-mb)",
                    limit as f64 / (1u64 << 20) as f64
                ),
            )
        };
        if let Some(len) = resp.body().content_length().filter(|&n| n > limit) {
            return Err((too_large(len.to_string()), None));
        }
        // A body still arriving when the timeout fires is a timeout, not transport.
        let bytes = resp
            .body_mut()
            .with_config()
            .limit(limit)
            .read_to_vec()
            .map_err(|e| match e {
                ureq::Error::BodyExceedsLimit(_) => (too_large(format!("more than {limit}")), None),
                e => (fail(transport_class(&e), Some(code), e.to_string()), None),
            })?;
        if !(200..300).contains(&code) {
            let body = serde_json::from_slice::<Value>(&bytes).ok();
            let error = body.as_ref().and_then(|v| v.get("error"));
            let msg = error
                .and_then(|e| e.get("message"))
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| String::from_utf8_lossy(&bytes).chars().take(500).collect());
            let class = ErrorClass::from_status(code, &class_text(&msg, error));
            return Err((fail(class, Some(code), msg), retry_after));
        }
        let raw: Value = serde_json::from_slice(&bytes).map_err(|e| {
            (
                fail(
                    ErrorClass::InvalidResponse,
                    Some(code),
                    format!("body is not JSON: {e}"),
                ),
                None,
            )
        })?;
        if let Some(err) = raw.get("error").filter(|e| !e.is_null()) {
            // Some providers answer 200 with an error object (OpenRouter, when the
            // upstream provider failed): its numeric `code` is that provider's status;
            // without one it is classed as a server error, and no status is claimed.
            let status = err.get("code").and_then(|c| match c {
                Value::Number(n) => n.as_u64(),
                Value::String(s) => s.trim().parse().ok(),
                _ => None,
            });
            let status = status.filter(|s| (100..=599).contains(s)).map(|s| s as u16);
            let msg = err
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("error")
                .to_string();
            let msg = format!("an error object in an HTTP {code} reply: {msg}");
            let class =
                ErrorClass::from_status(status.unwrap_or(500), &class_text(&msg, Some(err)));
            return Err((fail(class, status, msg), retry_after));
        }
        ChatResponse::from_body(raw, attempt).ok_or_else(|| {
            (
                fail(
                    ErrorClass::InvalidResponse,
                    Some(code),
                    "no choices[0].message, or one whose content is not text, parts or null or whose tool_calls is not a list".into(),
                ),
                None,
            )
        })
    }
}

fn is_set(flag: Option<&AtomicBool>) -> bool {
    flag.is_some_and(|f| f.load(Ordering::Relaxed))
}

/// Sleep until `when`, in short slices; false when the stop flag was set or the deadline
/// comes first.
fn sleep_until(when: Instant, opts: &CallOptions) -> bool {
    loop {
        if is_set(opts.stop) {
            return false;
        }
        let now = Instant::now();
        if opts.deadline.is_some_and(|d| now >= d || when > d) {
            // Waiting would overrun the deadline: give up now.
            if let Some(d) = opts.deadline {
                let until = d.min(when);
                if until > now {
                    std::thread::sleep((until - now).min(Duration::from_millis(50)));
                    continue;
                }
            }
            return false;
        }
        if now >= when {
            return true;
        }
        std::thread::sleep((when - now).min(Duration::from_millis(50)));
    }
}

/// `Retry-After` as seconds or as an HTTP date. A number of seconds too large for a
/// `Duration` is `Duration::MAX` ([`Client::backoff`] caps it at `--retry-max-delay`).
pub fn parse_retry_after(v: &str) -> Option<Duration> {
    let v = v.trim();
    if let Ok(secs) = v.parse::<f64>() {
        return (secs >= 0.0 && !secs.is_nan())
            .then(|| Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX));
    }
    let when = httpdate::parse_http_date(v).ok()?;
    Some(
        when.duration_since(std::time::SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn classes() {
        assert_eq!(ErrorClass::from_status(429, ""), ErrorClass::RateLimited);
        assert_eq!(ErrorClass::from_status(503, ""), ErrorClass::Server);
        assert_eq!(
            ErrorClass::from_status(400, "This model's maximum context length is 8192"),
            ErrorClass::ContextLength
        );
        assert_eq!(ErrorClass::from_status(400, "bad"), ErrorClass::BadRequest);
        // OpenAI's real out-of-quota reply: the words are in `code` and `type` only.
        let quota = json!({"message": "You exceeded your current quota, please check your plan and billing details.",
            "type": "insufficient_quota", "code": "insufficient_quota"});
        let text = class_text(quota["message"].as_str().unwrap(), Some(&quota));
        assert_eq!(
            ErrorClass::from_status(429, &text),
            ErrorClass::PaymentRequired
        );
        assert_eq!(
            ErrorClass::from_status(500, &text),
            ErrorClass::PaymentRequired
        );
        let limited = json!({"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"});
        let text = class_text("Rate limit reached", Some(&limited));
        assert_eq!(ErrorClass::from_status(429, &text), ErrorClass::RateLimited);
        assert!(!ErrorClass::Auth.retryable());
        assert!(ErrorClass::Timeout.retryable());
    }

    #[test]
    fn retry_after_forms() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after("0.5"), Some(Duration::from_millis(500)));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon"), None);
        assert_eq!(parse_retry_after("-1"), None);
        // Too large for a Duration: the longest one, which the backoff caps.
        assert_eq!(
            parse_retry_after("999999999999999999999"),
            Some(Duration::MAX)
        );
        assert_eq!(parse_retry_after("inf"), Some(Duration::MAX));
    }

    #[test]
    fn a_message_of_another_shape_is_no_response() {
        let body = |m: Value| json!({"choices": [{"message": m, "finish_reason": "stop"}]});
        for ok in [
            json!({"content": "hi"}),
            json!({"content": null, "tool_calls": []}),
            json!({"content": [{"type": "text", "text": "hi"}]}),
            json!({"role": "assistant"}),
        ] {
            assert!(
                ChatResponse::from_body(body(ok.clone()), 1).is_some(),
                "{ok}"
            );
        }
        for bad in [
            json!({"content": 42}),
            json!({"content": {"text": "hi"}}),
            json!({"content": "", "tool_calls": "[{}]"}),
            json!({"content": true}),
            json!("hi"),
        ] {
            assert!(
                ChatResponse::from_body(body(bad.clone()), 1).is_none(),
                "{bad}"
            );
        }
    }

    #[test]
    fn reasoning_fields() {
        let m = json!({"reasoning_content": "because"});
        assert_eq!(reasoning_text(&m).as_deref(), Some("because"));
        let m = json!({"reasoning": " ", "reasoning_details": [{"type": "reasoning.text", "text": "a"}, {"summary": "b"}]});
        assert_eq!(reasoning_text(&m).as_deref(), Some("ab"));
        assert_eq!(reasoning_text(&json!({"content": "x"})), None);
    }

    #[test]
    fn a_past_deadline_is_marked() {
        // Nothing listens there: the call must end before any request.
        let c = Client::new(ClientConfig {
            base_url: "http://127.0.0.1:9/v1".into(),
            ..ClientConfig::default()
        });
        let opts = CallOptions {
            deadline: Some(Instant::now()),
            ..CallOptions::default()
        };
        let e = c.chat_opts(&json!({}), &opts).unwrap_err();
        assert!(e.deadline, "{e}");
        assert_eq!(e.class, ErrorClass::Timeout);
        assert_eq!(e.attempts, 0);
    }

    #[test]
    fn backoff_honours_retry_after() {
        let c = Client::new(ClientConfig {
            backoff_base: Duration::from_millis(100),
            backoff_max: Duration::from_secs(10),
            ..ClientConfig::default()
        });
        let d = c.backoff(1, Some(Duration::from_secs(3)));
        assert_eq!(d, Duration::from_secs(3));
        let d = c.backoff(1, Some(Duration::MAX));
        assert_eq!(d, Duration::from_secs(10), "capped at the largest backoff");
        // A Retry-After of 0 (or a date already past) is no reason to hammer.
        for _ in 0..20 {
            let d = c.backoff(3, Some(Duration::ZERO));
            assert!(d >= Duration::from_millis(200), "{d:?}");
            let past = parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT");
            assert!(c.backoff(3, past) >= Duration::from_millis(200));
        }
        let d = c.backoff(3, None);
        assert!(
            d >= Duration::from_millis(200) && d <= Duration::from_millis(400),
            "{d:?}"
        );
    }
}

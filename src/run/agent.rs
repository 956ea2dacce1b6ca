//! The agent loop: one prompt, a model behind an OpenAI-compatible endpoint, the tools of
//! one task, until the model answers without tools or the turn cap is hit.
//!
//! Rules (hermes-agent's loop, without its off-by-one; see `docs/run.md`):
//! - `max_turns` caps the model calls that may use tools. An answer (no tool calls) on any
//!   of them, the last included, is `completed`.
//! - Hitting the cap appends one user message asking for a final answer and makes one more
//!   call without tools; the prompt is then `completed: false`.
//! - An unknown tool name or arguments that are not a JSON object get one corrective tool
//!   result (an error the model can read); the call counts against the cap. A second
//!   invalid turn ends the prompt as `partial`.
//! - A reply cut by the token limit (`finish_reason: length`) ends the prompt as
//!   `partial`, stop reason `length` (the truncated message is left out); on the very
//!   first call it is a failure (`length`). A reply the provider's filter withheld or
//!   cut (`content_filter`) ends it as `partial`, stop reason `content_filter` (its text,
//!   if any, is kept). A tool call the provider could not parse (Gemini's
//!   `MALFORMED_FUNCTION_CALL`) is asked again up to [`MALFORMED_RETRIES`] times, then
//!   ends the prompt as `partial`, stop reason `malformed_call`. Each call's finish
//!   reasons (and the provider's `native_finish_reason`) are kept in `calls`.
//! - The ephemeral system prompt and the prefill messages are sent, never stored.
//! - A wall-clock deadline per prompt ends it as a `prompt_timeout` failure (the host
//!   gets it too, so a command runs at most until then); the stop flag (Ctrl-C, spend
//!   cap, closed stdout) abandons it.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::record::FailureClass;
use super::request::{
    AgentConfig, check_call, ensure_call_ids, request_body, tool_message, tool_names,
};
use crate::llm::{ChatResponse, LlmError, ReplyEnd, Usage};
use crate::toolbox::ToolHost;

/// The user message sent when the turn cap is reached.
pub const FINAL_REQUEST: &str = "You have used all the tool-calling turns available for \
this task. Do not call any more tools: give your final answer now, based on what you \
have found so far.";

/// Times a reply with a malformed tool call is asked again (the same request).
pub const MALFORMED_RETRIES: usize = 2;

/// One model call as the loop saw it.
#[derive(Debug, Clone)]
pub struct Call {
    pub response: ChatResponse,
    /// Answered from the cache (nothing spent).
    pub cached: bool,
    pub latency: Duration,
}

/// What the loop needs from a model: one chat call with a deadline.
pub trait Chat: Sync {
    /// One call; `cache_tag` ([`super::request::AgentConfig::cache_tag`]) goes into the
    /// `--cache` key beside the request.
    fn chat(
        &self,
        body: &Value,
        deadline: Option<Instant>,
        cache_tag: Option<&str>,
    ) -> Result<Call, LlmError>;
    /// Set when the run is stopping: the loop abandons its prompt.
    fn stopping(&self) -> bool;
}

/// Why a finished prompt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The model answered without tools within the cap.
    Answer,
    /// The model answered, but with no text.
    EmptyAnswer,
    /// The cap was hit; the final-answer request was made.
    TurnCap,
    /// A reply was cut by the token limit.
    Length,
    /// A second turn of invalid tool calls.
    InvalidToolCalls,
    /// A reply was withheld or cut by the provider's content filter.
    ContentFilter,
    /// The provider could not parse the model's tool call, again after the retries.
    MalformedCall,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Answer => "answer",
            StopReason::EmptyAnswer => "empty_answer",
            StopReason::TurnCap => "turn_cap",
            StopReason::Length => "length",
            StopReason::InvalidToolCalls => "invalid_tool_calls",
            StopReason::ContentFilter => "content_filter",
            StopReason::MalformedCall => "malformed_call",
        }
    }

    /// The trajectory is `partial`: it ended on something other than an answer or the
    /// turn cap.
    pub fn partial(self) -> bool {
        !matches!(self, StopReason::Answer | StopReason::TurnCap)
    }
}

/// Per-call facts kept in the record.
#[derive(Debug, Clone)]
pub struct CallInfo {
    pub usage: Usage,
    pub latency_ms: u64,
    pub http_attempts: u32,
    pub finish_reason: Option<String>,
    /// The upstream provider's own reason, when the endpoint passed one on.
    pub native_finish_reason: Option<String>,
    pub cached: bool,
}

impl CallInfo {
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "usage": usage_json(&self.usage),
            "latency_ms": self.latency_ms,
            "http_attempts": self.http_attempts,
            "finish_reason": self.finish_reason,
            "cached": self.cached,
        });
        if let Some(n) = &self.native_finish_reason {
            v["native_finish_reason"] = json!(n);
        }
        v
    }
}

/// `usage` as stored in records.
pub fn usage_json(u: &Usage) -> Value {
    let mut v = json!({
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.total_tokens,
    });
    if let Some(c) = u.cost {
        v["cost"] = json!(c);
    }
    v
}

/// Add `b` into `a` (costs add when either has one).
pub fn add_usage(a: &mut Usage, b: &Usage) {
    a.prompt_tokens += b.prompt_tokens;
    a.completion_tokens += b.completion_tokens;
    a.total_tokens += b.total_tokens;
    if let Some(c) = b.cost {
        a.cost = Some(a.cost.unwrap_or(0.0) + c);
    }
}

/// A prompt that ran to an end (answer, cap, truncation, ...).
#[derive(Debug, Clone)]
pub struct Trajectory {
    /// The user prompt, then every assistant and tool message as exchanged (and the
    /// corrective or final-answer requests, which are part of the exchange).
    pub messages: Vec<Value>,
    pub completed: bool,
    pub partial: bool,
    /// Model calls made (the final-answer request included).
    pub api_calls: u32,
    pub stop_reason: StopReason,
    pub calls: Vec<CallInfo>,
    pub usage: Usage,
    /// Time spent waiting for the model and running tools.
    pub llm_time: Duration,
    pub tool_time: Duration,
}

/// A prompt that could not run to an end.
#[derive(Debug, Clone)]
pub struct Failure {
    pub class: FailureClass,
    pub retryable: bool,
    pub message: String,
    pub status: Option<u16>,
    /// HTTP attempts of the failing call.
    pub http_attempts: u32,
    pub api_calls: u32,
    pub usage: Usage,
}

/// The end of one prompt.
#[derive(Debug, Clone)]
pub enum Outcome {
    Done(Box<Trajectory>),
    Failed(Failure),
    /// The run is stopping; the prompt is left for a resume.
    Abandoned,
}

/// Run one prompt to its end.
pub fn run_prompt(
    cfg: &AgentConfig,
    chat: &dyn Chat,
    host: &mut dyn ToolHost,
    prompt: &str,
) -> Outcome {
    let started = Instant::now();
    let deadline = cfg.prompt_timeout.map(|t| started + t);
    // A tool call gets at most the prompt's time left.
    host.set_deadline(deadline);
    let schemas = host.schemas();
    let names = tool_names(&schemas);
    let mut messages = vec![json!({"role": "user", "content": prompt})];
    let mut calls: Vec<CallInfo> = Vec::new();
    let mut usage = Usage::default();
    let mut llm_time = Duration::ZERO;
    let mut tool_time = Duration::ZERO;
    let mut corrected = false;
    let timeout_failure = |api_calls: u32, usage: Usage, http_attempts: u32, msg: String| {
        Outcome::Failed(Failure {
            class: FailureClass::PromptTimeout,
            retryable: true,
            message: msg,
            status: None,
            http_attempts,
            api_calls,
            usage,
        })
    };

    let call_model = |messages: &[Value],
                      tools: Option<&[Value]>,
                      calls: &mut Vec<CallInfo>,
                      usage: &mut Usage,
                      llm_time: &mut Duration|
     -> Result<ChatResponse, Outcome> {
        if chat.stopping() {
            return Err(Outcome::Abandoned);
        }
        let api_calls = calls.len() as u32;
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(timeout_failure(
                api_calls,
                *usage,
                0,
                format!("prompt ran past --prompt-timeout after {api_calls} calls"),
            ));
        }
        let body = request_body(cfg, messages, tools);
        let t = Instant::now();
        let result = chat.chat(&body, deadline, cfg.cache_tag.as_deref());
        *llm_time += t.elapsed();
        match result {
            Ok(call) => {
                let r = call.response;
                let mut u = r.usage;
                if call.cached {
                    u.cost = None;
                }
                add_usage(usage, &u);
                calls.push(CallInfo {
                    usage: r.usage,
                    latency_ms: call.latency.as_millis() as u64,
                    http_attempts: r.attempts,
                    finish_reason: r.finish_reason.clone(),
                    native_finish_reason: r.native_finish_reason.clone(),
                    cached: call.cached,
                });
                Ok(r)
            }
            Err(_) if chat.stopping() => Err(Outcome::Abandoned),
            Err(e) if e.deadline => Err(timeout_failure(
                api_calls + 1,
                *usage,
                e.attempts,
                format!("prompt ran past --prompt-timeout: {}", e.message),
            )),
            Err(e) => Err(Outcome::Failed(Failure {
                class: e.class.into(),
                retryable: e.class.retryable(),
                message: e.message,
                status: e.status,
                http_attempts: e.attempts,
                api_calls: api_calls + 1,
                usage: *usage,
            })),
        }
    };

    let mut stop = None;
    // Calls asked again for a malformed tool call: they use no turn.
    let mut retried = 0;
    while ((calls.len() - retried) as u32) < cfg.max_turns {
        let r = match call_model(
            &messages,
            Some(&schemas),
            &mut calls,
            &mut usage,
            &mut llm_time,
        ) {
            Ok(r) => r,
            Err(o) => return o,
        };
        match r.end() {
            ReplyEnd::Normal => {}
            ReplyEnd::Length if calls.len() - retried == 1 => {
                return Outcome::Failed(Failure {
                    class: FailureClass::Length,
                    retryable: false,
                    message: "the first reply was cut by the token limit (finish_reason: length)"
                        .into(),
                    status: None,
                    http_attempts: r.attempts,
                    api_calls: calls.len() as u32,
                    usage,
                });
            }
            ReplyEnd::Length => {
                stop = Some(StopReason::Length);
                break;
            }
            ReplyEnd::ContentFilter => {
                messages.push(r.message);
                stop = Some(StopReason::ContentFilter);
                break;
            }
            ReplyEnd::MalformedCall if retried < MALFORMED_RETRIES => {
                retried += 1;
                continue;
            }
            ReplyEnd::MalformedCall => {
                stop = Some(StopReason::MalformedCall);
                break;
            }
        }
        let mut r = r;
        ensure_call_ids(&mut r.message, calls.len());
        let tool_calls = r.tool_calls().to_vec();
        if tool_calls.is_empty() {
            let empty = r.content.trim().is_empty();
            messages.push(r.message);
            stop = Some(if empty {
                StopReason::EmptyAnswer
            } else {
                StopReason::Answer
            });
            break;
        }
        let checked: Vec<_> = tool_calls.iter().map(|c| check_call(c, &names)).collect();
        let invalid = checked.iter().any(Result::is_err);
        if invalid && corrected {
            // The bad call is left out, as the reference does.
            stop = Some(StopReason::InvalidToolCalls);
            break;
        }
        corrected |= invalid;
        messages.push(r.message);
        for (call, checked) in tool_calls.iter().zip(checked) {
            let id = call.get("id").and_then(Value::as_str).unwrap_or("");
            match checked {
                Ok((id, name, args)) => {
                    if chat.stopping() {
                        return Outcome::Abandoned;
                    }
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return timeout_failure(
                            calls.len() as u32,
                            usage,
                            0,
                            "prompt ran past --prompt-timeout while running tools".into(),
                        );
                    }
                    let t = Instant::now();
                    // The sandbox started while the first request was in flight; one
                    // that could not start is the task's failure, not a tool error.
                    if let Err(message) = host.ready() {
                        return Outcome::Failed(Failure {
                            class: FailureClass::ToolHost,
                            retryable: true,
                            message,
                            status: None,
                            http_attempts: 0,
                            api_calls: calls.len() as u32,
                            usage,
                        });
                    }
                    let result = host.call(&name, &args);
                    tool_time += t.elapsed();
                    messages.push(tool_message(&id, result.content));
                }
                Err(correction) => {
                    let text = correction.to_string();
                    messages.push(tool_message(id, json!({"error": text}).to_string()));
                }
            }
        }
    }
    let stop = match stop {
        Some(s) => s,
        None => {
            // The cap was hit with tool calls still coming: ask once for an answer.
            messages.push(json!({"role": "user", "content": FINAL_REQUEST}));
            let r = match call_model(&messages, None, &mut calls, &mut usage, &mut llm_time) {
                Ok(r) => r,
                Err(o) => return o,
            };
            match r.end() {
                ReplyEnd::Normal => {
                    messages.push(r.message);
                    StopReason::TurnCap
                }
                ReplyEnd::ContentFilter => {
                    messages.push(r.message);
                    StopReason::ContentFilter
                }
                ReplyEnd::Length => StopReason::Length,
                ReplyEnd::MalformedCall => StopReason::MalformedCall,
            }
        }
    };
    Outcome::Done(Box::new(Trajectory {
        messages,
        completed: stop == StopReason::Answer,
        partial: stop.partial(),
        api_calls: calls.len() as u32,
        stop_reason: stop,
        calls,
        usage,
        llm_time,
        tool_time,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ErrorClass;
    use crate::toolbox::ToolResult;
    use std::sync::Mutex;

    /// Replies from a list, one per call; records the bodies.
    struct Scripted {
        replies: Mutex<Vec<Result<Value, LlmError>>>,
        bodies: Mutex<Vec<Value>>,
    }

    impl Scripted {
        fn new(replies: Vec<Result<Value, LlmError>>) -> Scripted {
            Scripted {
                replies: Mutex::new(replies.into_iter().rev().collect()),
                bodies: Mutex::new(Vec::new()),
            }
        }
    }

    impl Chat for Scripted {
        fn chat(
            &self,
            body: &Value,
            _: Option<Instant>,
            _: Option<&str>,
        ) -> Result<Call, LlmError> {
            self.bodies.lock().unwrap().push(body.clone());
            let raw = self
                .replies
                .lock()
                .unwrap()
                .pop()
                .expect("a scripted reply")?;
            Ok(Call {
                response: ChatResponse::from_body(raw, 1).unwrap(),
                cached: false,
                latency: Duration::ZERO,
            })
        }
        fn stopping(&self) -> bool {
            false
        }
    }

    struct Echo(Vec<(String, Value)>);

    impl ToolHost for Echo {
        fn schemas(&self) -> Vec<Value> {
            vec![
                json!({"type": "function", "function": {"name": "echo", "parameters": {"type": "object"}}}),
            ]
        }
        fn call(&mut self, name: &str, args: &Value) -> ToolResult {
            self.0.push((name.to_string(), args.clone()));
            ToolResult {
                content: json!({"output": args["text"]}).to_string(),
                is_error: false,
            }
        }
    }

    fn answer(text: &str) -> Result<Value, LlmError> {
        Ok(
            json!({"choices": [{"message": {"role": "assistant", "content": text, "reasoning": "r"}, "finish_reason": "stop"}],
                  "usage": {"prompt_tokens": 10, "completion_tokens": 2, "cost": 0.5}}),
        )
    }

    fn tool(name: &str, args: &str) -> Result<Value, LlmError> {
        Ok(
            json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": name, "arguments": args}}]},
            "finish_reason": "tool_calls"}]}),
        )
    }

    fn cfg(turns: u32) -> AgentConfig {
        AgentConfig {
            model: "m".into(),
            max_turns: turns,
            ephemeral_system_prompt: Some("be brief".into()),
            prefill: vec![
                json!({"role": "user", "content": "pre"}),
                json!({"role": "assistant", "content": "fill"}),
            ],
            ..AgentConfig::default()
        }
    }

    fn done(o: Outcome) -> Trajectory {
        match o {
            Outcome::Done(t) => *t,
            other => panic!("not done: {other:?}"),
        }
    }

    /// A host whose sandbox never started.
    struct Unstarted;

    impl ToolHost for Unstarted {
        fn schemas(&self) -> Vec<Value> {
            Echo(Vec::new()).schemas()
        }
        fn ready(&mut self) -> Result<(), String> {
            Err("the sandbox's supervisor did not start: no".into())
        }
        fn call(&mut self, _: &str, _: &Value) -> ToolResult {
            panic!("a call on a host that is not ready")
        }
    }

    #[test]
    fn a_sandbox_that_never_started_fails_the_task_retryably() {
        let chat = Scripted::new(vec![tool("echo", r#"{"text":"a"}"#), answer("done")]);
        match run_prompt(&cfg(4), &chat, &mut Unstarted, "q") {
            Outcome::Failed(f) => {
                assert_eq!(f.class.as_str(), "tool_host");
                assert!(f.retryable && f.message.contains("did not start"), "{f:?}");
                assert_eq!(f.api_calls, 1);
            }
            other => panic!("not a failure: {other:?}"),
        }
    }

    #[test]
    fn answer_on_the_last_allowed_call_is_completed() {
        let chat = Scripted::new(vec![tool("echo", r#"{"text":"a"}"#), answer("done")]);
        let mut host = Echo(Vec::new());
        let t = done(run_prompt(&cfg(2), &chat, &mut host, "q"));
        assert!(t.completed && !t.partial);
        assert_eq!(t.api_calls, 2);
        assert_eq!(t.stop_reason, StopReason::Answer);
        assert_eq!(host.0, vec![("echo".to_string(), json!({"text": "a"}))]);
        // user, assistant(tool call), tool, assistant(answer); no system/prefill stored.
        assert_eq!(t.messages.len(), 4);
        assert_eq!(t.messages[2]["tool_call_id"], "c1");
        assert_eq!(t.messages[3]["reasoning"], "r");
        assert_eq!(t.usage.cost, Some(0.5));
        let bodies = chat.bodies.lock().unwrap();
        assert_eq!(bodies[0]["messages"][0]["content"], "be brief");
        assert_eq!(bodies[0]["messages"][1]["content"], "pre");
        assert_eq!(bodies[0]["messages"][3]["content"], "q");
        assert!(bodies[0]["tools"].is_array());
    }

    #[test]
    fn reasoning_goes_back_only_when_asked_and_missing_ids_are_filled() {
        let no_id = Ok(
            json!({"choices": [{"message": {"role": "assistant", "content": null,
            "reasoning_content": "why", "reasoning": "why", "refusal": null,
            "tool_calls": [{"type": "function", "function": {"name": "echo", "arguments": "{}"}}]},
            "finish_reason": "tool_calls"}]}),
        );
        for send in [false, true] {
            let chat = Scripted::new(vec![no_id.clone(), answer("ok")]);
            let c = AgentConfig {
                send_reasoning: send,
                ..cfg(3)
            };
            let t = done(run_prompt(&c, &chat, &mut Echo(Vec::new()), "q"));
            // Stored as returned (plus the filled-in id).
            assert_eq!(t.messages[1]["reasoning_content"], "why");
            assert_eq!(t.messages[1]["tool_calls"][0]["id"], "call_1_0");
            assert_eq!(t.messages[2]["tool_call_id"], "call_1_0");
            let bodies = chat.bodies.lock().unwrap();
            let sent = &bodies[1]["messages"][4];
            assert_eq!(sent["role"], "assistant");
            assert!(sent.get("reasoning_content").is_none() && sent.get("refusal").is_none());
            assert_eq!(sent.get("reasoning").is_some(), send, "{sent}");
        }
    }

    #[test]
    fn cap_asks_once_for_a_final_answer_without_tools() {
        let chat = Scripted::new(vec![
            tool("echo", "{}"),
            tool("echo", "{}"),
            answer("summary"),
        ]);
        let t = done(run_prompt(&cfg(2), &chat, &mut Echo(Vec::new()), "q"));
        assert!(!t.completed && !t.partial);
        assert_eq!(t.stop_reason, StopReason::TurnCap);
        assert_eq!(t.api_calls, 3);
        let bodies = chat.bodies.lock().unwrap();
        assert!(bodies[2].get("tools").is_none());
        let last_user = &t.messages[t.messages.len() - 2];
        assert_eq!(last_user["content"], FINAL_REQUEST);
    }

    #[test]
    fn invalid_calls_get_one_correction_then_partial() {
        let chat = Scripted::new(vec![
            tool("nope", "{}"),
            tool("echo", "{not json"),
            answer("x"),
        ]);
        let t = done(run_prompt(&cfg(5), &chat, &mut Echo(Vec::new()), "q"));
        assert!(t.partial && !t.completed);
        assert_eq!(t.stop_reason, StopReason::InvalidToolCalls);
        assert_eq!(t.api_calls, 2);
        let correction = t.messages[2]["content"].as_str().unwrap();
        assert!(correction.contains("Unknown tool 'nope'"), "{correction}");
        assert_eq!(t.messages.len(), 3);

        let chat = Scripted::new(vec![tool("echo", "[1]"), answer("ok")]);
        let t = done(run_prompt(&cfg(5), &chat, &mut Echo(Vec::new()), "q"));
        assert!(t.completed);
        assert!(
            t.messages[2]["content"]
                .as_str()
                .unwrap()
                .contains("must be a JSON object")
        );
    }

    #[test]
    fn errors_are_classified_failures() {
        let err = LlmError {
            class: ErrorClass::Auth,
            status: Some(401),
            message: "bad key".into(),
            attempts: 1,
            deadline: false,
        };
        let chat = Scripted::new(vec![Err(err)]);
        match run_prompt(&cfg(3), &chat, &mut Echo(Vec::new()), "q") {
            Outcome::Failed(f) => {
                assert_eq!(f.class.as_str(), "auth");
                assert!(!f.retryable);
                assert_eq!(f.status, Some(401));
            }
            o => panic!("{o:?}"),
        }
        // The client's deadline marker, whatever the class, makes a prompt timeout;
        // the same words from a server do not.
        let past = LlmError {
            class: ErrorClass::Server,
            status: Some(503),
            message: "deadline reached: busy".into(),
            attempts: 2,
            deadline: true,
        };
        let chat = Scripted::new(vec![Err(past.clone())]);
        match run_prompt(&cfg(3), &chat, &mut Echo(Vec::new()), "q") {
            Outcome::Failed(f) => assert_eq!(f.class.as_str(), "prompt_timeout"),
            o => panic!("{o:?}"),
        }
        let chat = Scripted::new(vec![Err(LlmError {
            deadline: false,
            ..past
        })]);
        match run_prompt(&cfg(3), &chat, &mut Echo(Vec::new()), "q") {
            Outcome::Failed(f) => assert_eq!(f.class.as_str(), "server_error"),
            o => panic!("{o:?}"),
        }
        let cut = Ok(
            json!({"choices": [{"message": {"role": "assistant", "content": "abc"}, "finish_reason": "length"}]}),
        );
        let chat = Scripted::new(vec![cut]);
        match run_prompt(&cfg(3), &chat, &mut Echo(Vec::new()), "q") {
            Outcome::Failed(f) => assert_eq!(f.class.as_str(), "length"),
            o => panic!("{o:?}"),
        }
    }

    fn ended(text: &str, finish: &str, native: Option<&str>) -> Result<Value, LlmError> {
        let mut choice =
            json!({"message": {"role": "assistant", "content": text}, "finish_reason": finish});
        if let Some(n) = native {
            choice["native_finish_reason"] = json!(n);
        }
        Ok(json!({"choices": [choice]}))
    }

    #[test]
    fn filtered_and_malformed_replies_are_partial_with_their_own_reason() {
        // A filtered answer keeps its text but is no success.
        let chat = Scripted::new(vec![
            tool("echo", "{}"),
            ended("I can't", "content_filter", None),
        ]);
        let t = done(run_prompt(&cfg(5), &chat, &mut Echo(Vec::new()), "q"));
        assert!(t.partial && !t.completed);
        assert_eq!(t.stop_reason, StopReason::ContentFilter);
        assert_eq!(t.messages.last().unwrap()["content"], "I can't");
        assert_eq!(
            t.calls.last().unwrap().to_json()["finish_reason"],
            "content_filter"
        );
        // Gemini's reason, passed on as native_finish_reason: asked again, then it works.
        let malformed = ended("", "stop", Some("MALFORMED_FUNCTION_CALL"));
        let chat = Scripted::new(vec![malformed.clone(), answer("fine")]);
        let t = done(run_prompt(&cfg(1), &chat, &mut Echo(Vec::new()), "q"));
        assert!(t.completed, "the retry uses no turn: {:?}", t.stop_reason);
        assert_eq!(t.api_calls, 2);
        assert_eq!(
            t.calls[0].to_json()["native_finish_reason"],
            "MALFORMED_FUNCTION_CALL"
        );
        assert_eq!(t.messages.len(), 2, "the malformed reply is not a turn");
        // Malformed every time: partial after the retries.
        let chat = Scripted::new(vec![malformed; MALFORMED_RETRIES + 1]);
        let t = done(run_prompt(&cfg(3), &chat, &mut Echo(Vec::new()), "q"));
        assert_eq!(t.stop_reason, StopReason::MalformedCall);
        assert!(t.partial && !t.completed);
        assert_eq!(t.api_calls as usize, MALFORMED_RETRIES + 1);
        // The final-answer request cut by the token limit is no turn-cap success.
        let chat = Scripted::new(vec![tool("echo", "{}"), ended("half", "length", None)]);
        let t = done(run_prompt(&cfg(1), &chat, &mut Echo(Vec::new()), "q"));
        assert_eq!(t.stop_reason, StopReason::Length);
        assert!(t.partial);
    }
}

//! Why a chat request failed, as the retry layer, failure records and the run see it:
//! [`ErrorClass`] (read from an HTTP status and its error text, or from a transport
//! error), [`LlmError`], and [`stops_the_run`], the one rule for errors about the
//! account (out of credits, a refused key) that stop a whole run instead of failing a
//! prompt.

use serde_json::Value;

/// Why a request failed, as the retry layer and failure records see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorClass {
    RateLimited,
    Server,
    Transport,
    Timeout,
    BadRequest,
    Auth,
    PaymentRequired,
    Forbidden,
    NotFound,
    ContextLength,
    InvalidResponse,
    /// The reply was larger than the client's limit (`--max-response-mb`).
    ResponseTooLarge,
}

impl ErrorClass {
    /// Every class, in order (for tables and tests).
    pub const ALL: [ErrorClass; 12] = [
        ErrorClass::RateLimited,
        ErrorClass::Server,
        ErrorClass::Transport,
        ErrorClass::Timeout,
        ErrorClass::BadRequest,
        ErrorClass::Auth,
        ErrorClass::PaymentRequired,
        ErrorClass::Forbidden,
        ErrorClass::NotFound,
        ErrorClass::ContextLength,
        ErrorClass::InvalidResponse,
        ErrorClass::ResponseTooLarge,
    ];

    /// Retried by the client (and on resume).
    pub fn retryable(self) -> bool {
        matches!(
            self,
            ErrorClass::RateLimited
                | ErrorClass::Server
                | ErrorClass::Transport
                | ErrorClass::Timeout
                | ErrorClass::InvalidResponse
        )
    }

    /// The stable name used in files and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::RateLimited => "rate_limited",
            ErrorClass::Server => "server_error",
            ErrorClass::Transport => "transport",
            ErrorClass::Timeout => "timeout",
            ErrorClass::BadRequest => "bad_request",
            ErrorClass::Auth => "auth",
            ErrorClass::PaymentRequired => "payment_required",
            ErrorClass::Forbidden => "forbidden",
            ErrorClass::NotFound => "not_found",
            ErrorClass::ContextLength => "context_length",
            ErrorClass::InvalidResponse => "invalid_response",
            ErrorClass::ResponseTooLarge => "response_too_large",
        }
    }

    /// Classify an HTTP status and the body text that came with it.
    pub fn from_status(status: u16, body: &str) -> ErrorClass {
        let lower = body.to_ascii_lowercase();
        let context = lower.contains("context length")
            || lower.contains("context_length")
            || lower.contains("maximum context")
            || lower.contains("too many tokens");
        // Out of credits, whatever the status says (OpenAI sends it as a 429,
        // Anthropic as a 400, OpenRouter and DeepSeek as a 402).
        let payment = [
            "insufficient credits",
            "insufficient_quota",
            "insufficient balance",
            "credit balance is too low",
            "requires more credits",
        ]
        .iter()
        .any(|p| lower.contains(p));
        match status {
            // Also an error object in a 200 reply (classed as a 500 unless its code is
            // a status).
            400..=599 if payment => ErrorClass::PaymentRequired,
            429 => ErrorClass::RateLimited,
            400 | 413 if context => ErrorClass::ContextLength,
            400 | 413 | 422 => ErrorClass::BadRequest,
            401 => ErrorClass::Auth,
            402 => ErrorClass::PaymentRequired,
            403 => ErrorClass::Forbidden,
            404 => ErrorClass::NotFound,
            408 => ErrorClass::Timeout,
            500..=599 => ErrorClass::Server,
            _ => ErrorClass::BadRequest,
        }
    }
}

impl std::fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed chat request, after the retries it was allowed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{class}{}: {message} (after {attempts} attempt{})",
        status.map(|s| format!(" (HTTP {s})")).unwrap_or_default(),
        if *attempts == 1 { "" } else { "s" })]
pub struct LlmError {
    pub class: ErrorClass,
    pub status: Option<u16>,
    pub message: String,
    pub attempts: u32,
    /// The call gave up because [`super::CallOptions::deadline`] came (the message then
    /// starts with "deadline reached").
    pub deadline: bool,
}

/// Why a run stops for `e`, when `e` says something about the account that every
/// prompt would meet the same way (`None` for any other error): out of credits
/// (`out of credits (payment_required, HTTP 402): MESSAGE`), or the API key refused
/// (`the API key was refused (auth, HTTP 401): MESSAGE`). Such an error is never a
/// prompt's failure: the prompts in flight are abandoned and run again on resume.
pub fn stops_the_run(e: &LlmError) -> Option<String> {
    let status = e.status.map(|s| format!(", HTTP {s}")).unwrap_or_default();
    let what = match e.class {
        ErrorClass::PaymentRequired => "out of credits",
        ErrorClass::Auth => "the API key was refused",
        _ => return None,
    };
    Some(format!("{what} ({}{status}): {}", e.class, e.message))
}

/// The text an error's class is read from: its message, then the `type` and `code` of
/// its error object (OpenAI's out-of-quota 429 says `insufficient_quota` only there).
pub(super) fn class_text(message: &str, error: Option<&Value>) -> String {
    let mut text = message.to_string();
    for key in ["type", "code"] {
        match error.and_then(|e| e.get(key)) {
            Some(Value::String(s)) => text.extend([" ", s]),
            Some(n @ Value::Number(_)) => text.extend([" ".to_string(), n.to_string()]),
            _ => {}
        }
    }
    text
}

/// The class of a request that got no complete reply: a timeout, or transport.
pub(super) fn transport_class(e: &ureq::Error) -> ErrorClass {
    use std::error::Error;
    if matches!(e, ureq::Error::Timeout(_)) {
        return ErrorClass::Timeout;
    }
    if matches!(e, ureq::Error::BodyExceedsLimit(_)) {
        return ErrorClass::ResponseTooLarge;
    }
    let timed_out = |io: &std::io::Error| {
        matches!(
            io.kind(),
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
        )
    };
    if let ureq::Error::Io(io) = e
        && timed_out(io)
    {
        return ErrorClass::Timeout;
    }
    // An I/O timeout further down the chain of causes.
    let mut src = e.source();
    while let Some(err) = src {
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && timed_out(io)
        {
            return ErrorClass::Timeout;
        }
        src = err.source();
    }
    ErrorClass::Transport
}

//! The LLM summarizer: one OpenAI-compatible request per region, with its retries,
//! jittered back-off and the per-trajectory time budget (reference §4.5); a reply cut
//! short or empty counts as a failed attempt.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Failure, Outcome, PREFIX, Request, Summarizer, finish_summary, prompt, render_region};
use crate::llm::{CallOptions, Client, ClientConfig, ErrorClass};

/// Settings of the LLM summarizer.
#[derive(Debug, Clone)]
pub struct LlmConfig {
    pub base_url: String,
    pub api_key: Option<String>,
    pub model: String,
    pub temperature: f64,
    /// Attempts in total (the reference's `max_retries`).
    pub max_attempts: u32,
    /// First backoff delay (the reference's `retry_delay`).
    pub retry_delay: Duration,
    /// Budget for one trajectory's summary, retries and waits included.
    pub timeout: Duration,
}

/// Summaries from an OpenAI-compatible endpoint.
pub struct LlmSummarizer {
    cfg: LlmConfig,
    /// `clients[k]` retries HTTP failures `k` more times, so that the attempts of one
    /// summary never exceed `max_attempts`, whatever failed.
    clients: Vec<Client>,
}

impl LlmSummarizer {
    pub fn new(cfg: LlmConfig) -> LlmSummarizer {
        let clients = (0..cfg.max_attempts.max(1))
            .map(|k| {
                Client::new(ClientConfig {
                    base_url: cfg.base_url.clone(),
                    api_key: cfg.api_key.clone(),
                    timeout: cfg.timeout,
                    max_retries: k,
                    backoff_base: cfg.retry_delay,
                    backoff_max: Duration::from_secs(30),
                })
            })
            .collect();
        LlmSummarizer { cfg, clients }
    }

    /// Models that take no temperature (the reference omits it for Kimi coding models).
    fn omit_temperature(&self) -> bool {
        let m = self.cfg.model.to_ascii_lowercase();
        m.starts_with("kimi-for-coding")
            || (m.starts_with("kimi-k2.5") && self.cfg.base_url.contains("moonshot"))
    }

    /// The request body for a prompt.
    pub fn body(&self, prompt: &str, budget: usize) -> Value {
        let mut body = json!({
            "model": self.cfg.model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": 2 * budget,
        });
        if !self.omit_temperature() {
            body["temperature"] = json!(self.cfg.temperature);
        }
        body
    }
}

impl Summarizer for LlmSummarizer {
    fn name(&self) -> String {
        format!("llm:{}", self.cfg.model)
    }
    fn is_remote(&self) -> bool {
        true
    }

    fn summarize(&self, req: &Request) -> Outcome {
        let content = render_region(req.turns, req.shape, req.start, req.until);
        let body = self.body(&prompt(&content, req.budget), req.budget);
        let deadline = Instant::now() + self.cfg.timeout;
        // The client cuts a request in flight, and skips a retry or a wait, at the
        // deadline: one row's summary never takes much longer than `--timeout`.
        let opts = CallOptions {
            deadline: Some(deadline),
            ..CallOptions::default()
        };
        let max = self.cfg.max_attempts.max(1);
        let (mut calls, mut errors) = (0u32, 0u32);
        let mut last = LastFailure::Reply("no attempt");
        while calls < max {
            if Instant::now() >= deadline {
                return Outcome {
                    text: Err(Failure::Timeout),
                    tokens: None,
                    api_calls: calls,
                    errors,
                };
            }
            if calls > 0 {
                // A reply that was unusable (not an HTTP failure): back off, jittered.
                let wait = self.clients[0].backoff(calls, None);
                let left = deadline.saturating_duration_since(Instant::now());
                std::thread::sleep(wait.min(left));
            }
            let client = &self.clients[(max - calls - 1) as usize];
            match client.chat_opts(&body, &opts) {
                Ok(resp) => {
                    calls += resp.attempts;
                    errors += resp.attempts - 1;
                    if resp.finish_reason.as_deref() == Some("length") {
                        errors += 1;
                        last = LastFailure::Reply("length");
                        continue;
                    }
                    let text = finish_summary(Some(&resp.content));
                    if text == PREFIX {
                        errors += 1;
                        last = LastFailure::Reply("empty");
                        continue;
                    }
                    return Outcome {
                        text: Ok(text),
                        tokens: None,
                        api_calls: calls,
                        errors,
                    };
                }
                Err(e) => {
                    calls += e.attempts;
                    errors += e.attempts;
                    if e.class == ErrorClass::Timeout && Instant::now() >= deadline {
                        return Outcome {
                            text: Err(Failure::Timeout),
                            tokens: None,
                            api_calls: calls,
                            errors,
                        };
                    }
                    last = LastFailure::Error(e.class);
                    if !e.class.retryable() {
                        break;
                    }
                }
            }
        }
        let text = match last {
            LastFailure::Error(ErrorClass::Timeout) => Err(Failure::Timeout),
            LastFailure::Error(class) => Err(Failure::Failed(class.as_str().to_string())),
            LastFailure::Reply(r) => Err(Failure::Failed(r.to_string())),
        };
        Outcome {
            text,
            tokens: None,
            api_calls: calls,
            errors,
        }
    }
}

/// Why the last attempt of an LLM summary failed.
pub(super) enum LastFailure {
    /// A reply came but could not be used (`length`, `empty`).
    Reply(&'static str),
    /// The request failed.
    Error(ErrorClass),
}

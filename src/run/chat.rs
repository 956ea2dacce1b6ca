//! The real [`Chat`] of a run: the HTTP client, the optional response cache, the spend
//! cap and the stop flag, shared by every worker. Running out of credits (a
//! `payment_required` answer, which the client returns only under
//! `--on-payment stop`) stops the run like the spend cap.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use serde_json::Value;

use super::agent::{Call, Chat};
use crate::llm::cache::Cache;
use crate::llm::{CallOptions, ChatResponse, Client, LlmError};

/// The real [`Chat`]: the HTTP client, the optional cache, the spend cap and the stop
/// flag, shared by every worker of a run.
pub struct Llm {
    pub client: Client,
    pub cache: Option<Cache>,
    /// Spend cap in dollars (provider-reported cost).
    pub max_cost: Option<f64>,
    /// Set to stop the run; checked between calls and during retry waits.
    pub stop: std::sync::Arc<AtomicBool>,
    /// Why the run stopped (first reason wins).
    pub stop_reason: Mutex<Option<String>>,
    spent_micro: AtomicU64,
    retries: AtomicU64,
}

impl Llm {
    pub fn new(
        client: Client,
        cache: Option<Cache>,
        max_cost: Option<f64>,
        stop: std::sync::Arc<AtomicBool>,
    ) -> Llm {
        Llm {
            client,
            cache,
            max_cost,
            stop,
            stop_reason: Mutex::new(None),
            spent_micro: AtomicU64::new(0),
            retries: AtomicU64::new(0),
        }
    }

    /// Dollars spent so far (cache hits cost nothing).
    pub fn spent(&self) -> f64 {
        self.spent_micro.load(Ordering::Relaxed) as f64 / 1e6
    }

    /// Failed attempts that were retried so far.
    pub fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }

    /// Stop the run for `reason` (the first reason is kept).
    pub fn request_stop(&self, reason: &str) {
        let mut r = self.stop_reason.lock().unwrap_or_else(|e| e.into_inner());
        if r.is_none() {
            *r = Some(reason.to_string());
        }
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Why the run stopped: the reason given to [`Llm::request_stop`], or
    /// `interrupted` when the stop flag was set from outside (a signal).
    pub fn stop_reason(&self) -> Option<String> {
        self.stop_reason
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .or_else(|| self.stopping().then(|| "interrupted".to_string()))
    }
}

impl Chat for Llm {
    fn chat(
        &self,
        body: &Value,
        deadline: Option<Instant>,
        cache_tag: Option<&str>,
    ) -> Result<Call, LlmError> {
        let started = Instant::now();
        let key = self
            .cache
            .as_ref()
            .map(|_| Cache::key(&self.client.config().base_url, body, cache_tag));
        if let (Some(cache), Some(key)) = (&self.cache, &key)
            && let Some(raw) = cache.get(key)
            && let Some(mut response) = ChatResponse::from_body(raw, 1)
        {
            keep_logprobs(body, &mut response);
            return Ok(Call {
                response,
                cached: true,
                latency: started.elapsed(),
            });
        }
        let on_retry = |_: &LlmError| {
            self.retries.fetch_add(1, Ordering::Relaxed);
        };
        let opts = CallOptions {
            on_retry: Some(&on_retry),
            deadline,
            stop: Some(&self.stop),
        };
        let mut response = match self.client.chat_opts(body, &opts) {
            Ok(r) => r,
            Err(e) => {
                if let Some(why) = crate::llm::stops_the_run(&e) {
                    // Out of credits, or the key refused: every prompt would fail the same
                    // way. Stop the run as the spend cap does; the prompts in flight run
                    // again on resume.
                    self.request_stop(&why);
                }
                return Err(e);
            }
        };
        if let Some(cost) = response.usage.cost.filter(|c| *c > 0.0) {
            let micro = (cost * 1e6).round() as u64;
            let total = self.spent_micro.fetch_add(micro, Ordering::Relaxed) + micro;
            if let Some(cap) = self.max_cost
                && total as f64 / 1e6 >= cap
            {
                self.request_stop(&format!("spend cap ${cap} reached"));
            }
        }
        if let (Some(cache), Some(key)) = (&self.cache, &key) {
            // A cache that cannot be written is not worth failing the prompt for.
            let _ = cache.put(key, &response.raw);
        }
        keep_logprobs(body, &mut response);
        Ok(Call {
            response,
            cached: false,
            latency: started.elapsed(),
        })
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// With `logprobs: true` in the request (`--logprobs`), the reply's
/// `choices[0].logprobs`, exactly as the server sent it, becomes the assistant
/// message's `logprobs` member (never sent back: see `request::outgoing`).
fn keep_logprobs(body: &Value, response: &mut ChatResponse) {
    if body.get("logprobs") != Some(&Value::Bool(true)) {
        return;
    }
    let lp = response
        .raw
        .pointer("/choices/0/logprobs")
        .filter(|v| !v.is_null())
        .cloned();
    if let (Some(lp), Some(m)) = (lp, response.message.as_object_mut()) {
        m.insert("logprobs".into(), lp);
    }
}

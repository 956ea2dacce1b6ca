//! `image_generate`: a picture from a text prompt, made by an OpenAI-compatible
//! images endpoint (`POST {base}/images/generations`). The model is told the image's
//! URL when the endpoint returns one; an image returned inline (`b64_json`) is saved
//! in the task's workspace (`images/image_N.png`) and the model is told that path.
//! Every request goes through the run's [`Meter`]: it waits for the run's rate limit,
//! and none is sent once the spend cap is reached.

use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use super::fs::Confined;
use crate::llm::Meter;

/// Largest image response read.
const MAX_RESPONSE: u64 = 64 << 20;

/// Settings of `image_generate`.
#[derive(Clone, Debug)]
pub struct ImageConfig {
    /// The API root (`https://api.openai.com/v1`); `/images/generations` is appended.
    pub base_url: String,
    /// Bearer key (the same one traj-run's model calls use).
    pub api_key: Option<String>,
    /// The image model.
    pub model: String,
    /// Longest wait for one image.
    pub timeout: Duration,
}

/// Why an image was not made (the message is what the model reads).
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("missing required argument \"prompt\" (a non-empty string)")]
    NoPrompt,
    #[error("aspect_ratio {0:?}: use landscape, square or portrait")]
    Aspect(String),
    #[error("the images endpoint failed: {0}")]
    Http(String),
    #[error("the images endpoint returned no image: {0}")]
    Empty(String),
    #[error("cannot save the image: {0}")]
    Save(String),
    #[error("{0}")]
    Capped(String),
}

/// The OpenAI `size` of an aspect ratio of the reference's schema.
fn size(aspect: &str) -> Result<&'static str, ImageError> {
    match aspect {
        "landscape" => Ok("1792x1024"),
        "square" => Ok("1024x1024"),
        "portrait" => Ok("1024x1792"),
        other => Err(ImageError::Aspect(other.to_string())),
    }
}

/// One `image_generate` call; `n` numbers the files this task saved before.
pub fn generate(
    cfg: &ImageConfig,
    meter: &Meter,
    files: &Confined,
    args: &Value,
    n: &mut u32,
) -> Result<Value, ImageError> {
    let prompt = match args.get("prompt") {
        Some(Value::String(p)) if !p.trim().is_empty() => p.as_str(),
        _ => return Err(ImageError::NoPrompt),
    };
    let aspect = args
        .get("aspect_ratio")
        .and_then(Value::as_str)
        .unwrap_or("landscape");
    let size = size(aspect)?;
    meter
        .check()
        .map_err(|e| ImageError::Capped(e.to_string()))?;
    if let Some(rate) = meter.rate() {
        let slot = rate.reserve();
        std::thread::sleep(slot.saturating_duration_since(std::time::Instant::now()));
    }
    meter.count_request();
    let url = format!("{}/images/generations", cfg.base_url.trim_end_matches('/'));
    let agent = ureq::Agent::config_builder()
        .timeout_global(Some(cfg.timeout))
        .http_status_as_error(false)
        .build()
        .new_agent();
    let mut req = agent.post(&url).header("Content-Type", "application/json");
    if let Some(k) = &cfg.api_key {
        req = req.header("Authorization", format!("Bearer {k}"));
    }
    let body = json!({"model": cfg.model, "prompt": prompt, "n": 1, "size": size});
    let mut resp = req
        .send(body.to_string())
        .map_err(|e| ImageError::Http(e.to_string()))?;
    let mut raw = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(resp.body_mut().as_reader(), MAX_RESPONSE),
        &mut raw,
    )
    .map_err(|e| ImageError::Http(e.to_string()))?;
    let code = resp.status().as_u16();
    if !(200..300).contains(&code) {
        let text = String::from_utf8_lossy(&raw);
        return Err(ImageError::Http(format!(
            "HTTP {code}: {}",
            text.chars().take(300).collect::<String>()
        )));
    }
    let v: Value =
        serde_json::from_slice(&raw).map_err(|e| ImageError::Http(format!("not JSON: {e}")))?;
    meter.record(
        v.get("usage")
            .and_then(|u| u.get("cost"))
            .and_then(Value::as_f64),
    );
    let first = v
        .get("data")
        .and_then(Value::as_array)
        .and_then(|d| d.first())
        .ok_or_else(|| ImageError::Empty(v.to_string().chars().take(300).collect()))?;
    let revised = first.get("revised_prompt").cloned().unwrap_or(Value::Null);
    if let Some(u) = first.get("url").and_then(Value::as_str) {
        return Ok(
            json!({"image": u, "model": cfg.model, "aspect_ratio": aspect, "revised_prompt": revised}),
        );
    }
    let b64 = first
        .get("b64_json")
        .and_then(Value::as_str)
        .ok_or_else(|| ImageError::Empty("neither url nor b64_json".into()))?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .map_err(|e| ImageError::Save(format!("bad base64: {e}")))?;
    *n += 1;
    let ext = if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
        "jpg"
    } else if bytes.len() > 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        "webp"
    } else {
        "png"
    };
    let path = format!("images/image_{n}.{ext}");
    let saved = files
        .write_bytes(&path, &bytes)
        .map_err(|e| ImageError::Save(e.0))?;
    Ok(json!({
        "image": saved["path"],
        "bytes": bytes.len(),
        "model": cfg.model,
        "aspect_ratio": aspect,
        "revised_prompt": revised,
    }))
}

//! `vision_analyze` and `mixture_of_agents`: tools that call a model through the same
//! OpenAI-compatible [`Client`] traj-run uses, counted in the run's meter (its rate
//! limit and spend cap: a call once the cap is reached is refused as a tool error).

use crate::toolbox::ToolError;
use serde_json::{Value, json};

use super::config::LlmToolsConfig;
use super::fs::Confined;
use crate::llm::Client;

/// Largest local image sent to a vision model.
const MAX_IMAGE_BYTES: u64 = 20 << 20;

fn body(cfg: &LlmToolsConfig, model: &str, messages: Value) -> Value {
    let mut b = json!({"model": model, "messages": messages});
    if let Some(m) = cfg.max_tokens {
        b["max_tokens"] = json!(m);
    }
    b
}

/// Standard base64 (with padding).
pub fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The image's media type from its first bytes.
fn sniff_image(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() > 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// The model a tool is configured with, or the error that says it has none.
fn configured<'a>(model: &'a Option<String>, what: &str) -> Result<&'a str, ToolError> {
    model
        .as_deref()
        .ok_or_else(|| ToolError(format!("no {what} configured")))
}

/// `vision_analyze`: `{"analysis", "model"}`.
pub fn vision_analyze(
    client: &Client,
    cfg: &LlmToolsConfig,
    files: &Confined,
    args: &Value,
) -> Result<Value, ToolError> {
    let model = configured(&cfg.vision_model, "vision model")?;
    let image = super::text_arg(args, "image_url")?;
    let question = match args.get("question") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.as_str(),
        _ => "Describe this image in detail.",
    };
    let lower = image.to_ascii_lowercase();
    let url = if lower.starts_with("http://")
        || lower.starts_with("https://")
        || lower.starts_with("data:image/")
    {
        image.to_string()
    } else {
        let (file, len, _) = files.open_file(image, u64::MAX, false)?;
        if len > MAX_IMAGE_BYTES {
            return Err(ToolError::from(format!(
                "{image}: image too large ({len} bytes)"
            )));
        }
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(file, MAX_IMAGE_BYTES), &mut bytes)
            .map_err(|e| ToolError::from(format!("{image}: {e}")))?;
        let mime = sniff_image(&bytes)
            .ok_or_else(|| format!("{image}: not a PNG, JPEG, GIF or WebP image"))?;
        format!("data:{mime};base64,{}", base64(&bytes))
    };
    let messages = json!([{
        "role": "user",
        "content": [
            {"type": "text", "text": question},
            {"type": "image_url", "image_url": {"url": url}}
        ]
    }]);
    client.check_cap()?;
    let resp = client.chat(&body(cfg, model, messages)).map_err(|e| {
        format!(
            "vision model {model} failed: {} ({})",
            e.message,
            e.class.as_str()
        )
    })?;
    if resp.content.trim().is_empty() {
        return Err(ToolError::from(format!(
            "vision model {model} returned an empty answer"
        )));
    }
    Ok(json!({"analysis": resp.content, "model": model}))
}

const AGGREGATOR_PROMPT: &str = "Several assistants answered the user's question below. \
Their answers follow, numbered. Judge them critically: some may be wrong, incomplete or \
biased. Write a single answer to the question that keeps what is right in them, fixes \
what is wrong, and is complete, accurate and well organised. Answer the question \
directly; do not describe or compare the assistants' answers.";

/// `mixture_of_agents`: ask every reference model in parallel, then have the
/// aggregator combine the answers: `{"response", "models_used", "failed"}`.
pub fn mixture_of_agents(
    client: &Client,
    cfg: &LlmToolsConfig,
    args: &Value,
) -> Result<Value, ToolError> {
    let aggregator = configured(&cfg.moa_aggregator, "aggregator model")?;
    let prompt = super::text_arg(args, "user_prompt")?;
    let answers: Vec<(String, Result<String, ToolError>)> = std::thread::scope(|s| {
        let handles: Vec<_> = cfg
            .moa_models
            .iter()
            .map(|m| {
                let b = body(cfg, m, json!([{"role": "user", "content": prompt}]));
                s.spawn(move || {
                    let r = client
                        .chat(&b)
                        .map_err(|e| {
                            ToolError::from(format!("{}: {}", e.class.as_str(), e.message))
                        })
                        .and_then(|r| {
                            if r.content.trim().is_empty() {
                                Err(ToolError::from("empty answer".to_string()))
                            } else {
                                Ok(r.content)
                            }
                        });
                    (m.clone(), r)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| (String::new(), Err("panicked".into())))
            })
            .collect()
    });
    let mut used = Vec::new();
    let mut failed = Vec::new();
    let mut numbered = String::new();
    for (model, r) in answers {
        match r {
            Ok(text) => {
                used.push(model);
                numbered.push_str(&format!("\n\n{}. {}", used.len(), text.trim()));
            }
            Err(e) => failed.push(json!({"model": model, "error": e})),
        }
    }
    if used.is_empty() {
        return Err(ToolError::from(format!(
            "every reference model failed: {}",
            Value::Array(failed)
        )));
    }
    let messages = json!([
        {"role": "system", "content": format!("{AGGREGATOR_PROMPT}\n\nAnswers:{numbered}")},
        {"role": "user", "content": prompt}
    ]);
    client.check_cap()?;
    let resp = client.chat(&body(cfg, aggregator, messages)).map_err(|e| {
        format!(
            "aggregator {aggregator} failed: {} ({})",
            e.message,
            e.class.as_str()
        )
    })?;
    Ok(json!({
        "response": resp.content,
        "models_used": used,
        "aggregator": aggregator,
        "failed": failed,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648() {
        for (i, o) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(i.as_bytes()), o);
        }
    }
}

//! `web_extract` (fetch a page, return its readable text) and `web_search` (SearXNG,
//! Brave or Tavily). Both run in the traj process with their own HTTP agent; tool
//! processes in the sandbox never see the search API key.
//!
//! Unless [`ToolConfig::allow_private_addresses`] is set, host names that resolve to
//! loopback, private, link-local (cloud metadata) or other non-public addresses are
//! refused, also after redirects: the model cannot reach the machine's own services.

use crate::toolbox::ToolError;
use std::io::Read;
use std::net::IpAddr;

use ureq::ResponseExt;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};

use serde_json::{Value, json};

use super::config::{SearchConfig, SearchProvider, ToolConfig};

/// Largest response body read.
const MAX_BODY: u64 = 5 << 20;
/// Most characters of text returned per page.
const MAX_PAGE_CHARS: usize = 40_000;

/// True for addresses a model must not reach by default.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || o[0] == 0
                || (o[0] == 100 && (64..128).contains(&o[1])) // shared address space
                || (o[0] == 198 && (o[1] & 0xfe) == 18) // benchmarking
                || o[0] >= 240
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_private(IpAddr::V4(v4));
            }
            let s = v6.segments();
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00 // unique local
                || (s[0] & 0xffc0) == 0xfe80 // link local
        }
    }
}

/// The default resolver, keeping only public addresses.
struct PublicOnly;

impl std::fmt::Debug for PublicOnly {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PublicOnly")
    }
}

impl Resolver for PublicOnly {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let addrs = DefaultResolver::default().resolve(uri, config, timeout)?;
        let mut public = self.empty();
        for a in addrs.iter().filter(|a| !is_private(a.ip())) {
            public.push(*a);
        }
        if public.is_empty() {
            let host = uri.host().unwrap_or("");
            return Err(ureq::Error::Io(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!("{host} is a local or private address; refused"),
            )));
        }
        Ok(public)
    }
}

/// The HTTP agent of the web tools.
pub fn agent(cfg: &ToolConfig) -> ureq::Agent {
    let config = ureq::Agent::config_builder()
        .timeout_global(Some(cfg.web_timeout))
        .max_redirects(5)
        .user_agent(concat!(
            "traj/",
            env!("CARGO_PKG_VERSION"),
            " (+web_extract)"
        ))
        .build();
    if cfg.allow_private_addresses {
        ureq::Agent::new_with_config(config)
    } else {
        ureq::Agent::with_parts(config, DefaultConnector::default(), PublicOnly)
    }
}

fn http_error(url: &str, e: ureq::Error) -> String {
    match e {
        ureq::Error::StatusCode(code) => {
            let text = ureq::http::StatusCode::from_u16(code)
                .ok()
                .and_then(|c| c.canonical_reason())
                .unwrap_or("");
            format!("{url}: HTTP {code} {text}")
        }
        e => format!("{url}: {e}"),
    }
}

fn read_body(mut resp: ureq::http::Response<ureq::Body>) -> Result<String, ToolError> {
    let mut bytes = Vec::new();
    resp.body_mut()
        .as_reader()
        .take(MAX_BODY)
        .read_to_end(&mut bytes)
        .map_err(|e| ToolError::from(format!("reading the response: {e}")))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn cut(mut s: String, max: usize) -> String {
    if s.chars().count() > max {
        let total = s.chars().count();
        let end = s.char_indices().nth(max).map_or(s.len(), |(i, _)| i);
        s.truncate(end);
        s.push_str(&format!(
            "\n\n[... page truncated: showing {max} of {total} characters ...]"
        ));
    }
    s
}

/// Fetch one URL and make it readable text: `{url, title, content}`.
pub fn extract_one(agent: &ureq::Agent, url: &str) -> Result<Value, ToolError> {
    let lower = url.to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return Err(ToolError::from(format!(
            "{url}: only http and https URLs can be fetched"
        )));
    }
    let resp = agent
        .get(url)
        .header(
            "Accept",
            "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5",
        )
        .call()
        .map_err(|e| http_error(url, e))?;
    let final_url = resp.get_uri().to_string();
    let ctype = resp.body().mime_type().unwrap_or("").to_ascii_lowercase();
    let body = read_body(resp)?;
    let (title, content) =
        if ctype.contains("html") || (ctype.is_empty() && body.trim_start().starts_with('<')) {
            html_to_text(&body)
        } else if ctype.starts_with("text/") || ctype.contains("json") || ctype.contains("xml") {
            (String::new(), body)
        } else {
            return Err(ToolError::from(format!(
                "{url}: content type {ctype} is not text; web_extract reads HTML and text pages"
            )));
        };
    Ok(json!({
        "url": final_url,
        "title": title,
        "content": cut(content, MAX_PAGE_CHARS),
    }))
}

/// `web_extract`: `{"results": [...]}`, one entry per URL (`error` for a failed one).
/// Fails as a whole only when every URL failed.
pub fn web_extract(agent: &ureq::Agent, args: &Value) -> Result<Value, ToolError> {
    let urls: Vec<String> = match (args.get("urls"), args.get("url")) {
        (Some(Value::Array(a)), _) => a
            .iter()
            .map(|u| u.as_str().map(str::to_string).ok_or("urls must be strings"))
            .collect::<Result<_, _>>()?,
        (Some(Value::String(s)), _) | (None, Some(Value::String(s))) => vec![s.clone()],
        _ => {
            return Err(ToolError::from(
                "missing required argument \"urls\" (a list of URLs)".to_string(),
            ));
        }
    };
    if urls.is_empty() {
        return Err(ToolError::from("\"urls\" is empty".to_string()));
    }
    if urls.len() > 5 {
        return Err(ToolError::from(format!(
            "{} URLs given; at most 5 per call",
            urls.len()
        )));
    }
    let mut results = Vec::new();
    let mut errors = Vec::new();
    for u in &urls {
        match extract_one(agent, u) {
            Ok(v) => results.push(v),
            Err(e) => {
                errors.push(e.0.clone());
                results.push(json!({"url": u, "error": e}));
            }
        }
    }
    if errors.len() == urls.len() {
        return Err(ToolError::from(errors.join("; ")));
    }
    Ok(json!({ "results": results }))
}

/// `web_search`: `{"query", "results": [{title, url, snippet}]}`.
pub fn web_search(
    agent: &ureq::Agent,
    cfg: &SearchConfig,
    args: &Value,
) -> Result<Value, ToolError> {
    let query = super::text_arg(args, "query")?.trim();
    let limit = args
        .get("limit")
        .and_then(Value::as_u64)
        .map_or(cfg.max_results, |l| l as usize)
        .clamp(1, 20)
        .min(cfg.max_results.max(1));
    let base = cfg.base_url.trim_end_matches('/');
    let key = cfg.api_key.as_deref().unwrap_or("");
    let (url, resp) = match cfg.provider {
        SearchProvider::Searxng => {
            let url = format!("{base}/search");
            let r = agent
                .get(&url)
                .query("q", query)
                .query("format", "json")
                .header("Accept", "application/json")
                .call();
            (url, r)
        }
        SearchProvider::Brave => {
            let url = format!("{base}/res/v1/web/search");
            let r = agent
                .get(&url)
                .query("q", query)
                .query("count", limit.to_string())
                .header("Accept", "application/json")
                .header("X-Subscription-Token", key)
                .call();
            (url, r)
        }
        SearchProvider::Tavily => {
            let url = format!("{base}/search");
            let r = agent
                .post(&url)
                .header("Authorization", format!("Bearer {key}"))
                .header("Content-Type", "application/json")
                .send(json!({"query": query, "max_results": limit}).to_string());
            (url, r)
        }
    };
    let provider = cfg.provider.as_str();
    let resp = resp.map_err(|e| {
        ToolError::from(format!("{provider} search failed: {}", http_error(&url, e)))
    })?;
    let body = read_body(resp)?;
    let v: Value = serde_json::from_str(&body)
        .map_err(|e| ToolError::from(format!("{provider} search: the reply is not JSON ({e})")))?;
    let (list, snippet_key) = match cfg.provider {
        SearchProvider::Searxng => (v.get("results"), "content"),
        SearchProvider::Brave => (v.pointer("/web/results"), "description"),
        SearchProvider::Tavily => (v.get("results"), "content"),
    };
    let Some(Value::Array(list)) = list else {
        return Err(ToolError::from(format!(
            "{provider} search: the reply has no result list"
        )));
    };
    let results: Vec<Value> = list
        .iter()
        .filter_map(|r| {
            let url = r.get("url")?.as_str()?;
            let text = |k: &str| {
                let raw = r.get(k).and_then(Value::as_str).unwrap_or("");
                html_to_text(raw).1
            };
            Some(json!({"title": text("title"), "url": url, "snippet": text(snippet_key)}))
        })
        .take(limit)
        .collect();
    Ok(json!({"query": query, "results": results}))
}

/// Elements whose content is never readable text.
const SKIP: &[&str] = &[
    "script", "style", "noscript", "template", "svg", "head", "nav", "aside", "footer", "form",
    "iframe", "button", "select",
];
/// Elements that break lines.
const BLOCK: &[&str] = &[
    "p",
    "div",
    "br",
    "li",
    "ul",
    "ol",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "tr",
    "table",
    "section",
    "article",
    "main",
    "header",
    "pre",
    "blockquote",
    "hr",
    "dt",
    "dd",
    "figure",
    "figcaption",
    "title",
    "body",
];

/// Turn HTML into `(title, readable text)`: markup, scripts, styles and navigation
/// removed, entities decoded, blocks on their own lines, white space collapsed. When
/// the page has a `<main>` or `<article>`, only that part is kept.
pub fn html_to_text(html: &str) -> (String, String) {
    let lower = html.to_ascii_lowercase();
    let title = lower
        .find("<title")
        .and_then(|s| lower[s..].find('>').map(|e| s + e + 1))
        .and_then(|s| lower[s..].find("</title").map(|e| (s, s + e)))
        .map(|(s, e)| collapse(&decode_entities(&html[s..e])))
        .unwrap_or_default();
    let mut region = html;
    for tag in ["<main", "<article"] {
        if let (Some(s), Some(e)) = (lower.find(tag), lower.rfind(&format!("</{}", &tag[1..])))
            && s < e
        {
            region = &html[s..e];
            break;
        }
    }
    let mut out = String::with_capacity(region.len() / 2);
    let mut skip_depth: Vec<String> = Vec::new();
    let mut rest = region;
    while !rest.is_empty() {
        let Some(lt) = rest.find('<') else {
            if skip_depth.is_empty() {
                push_text(&mut out, rest);
            }
            break;
        };
        if skip_depth.is_empty() {
            push_text(&mut out, &rest[..lt]);
        }
        rest = &rest[lt..];
        if rest.starts_with("<!--") {
            rest = rest.find("-->").map_or("", |e| &rest[e + 3..]);
            continue;
        }
        let Some(gt) = rest.find('>') else { break };
        let tag = &rest[1..gt];
        rest = &rest[gt + 1..];
        let closing = tag.starts_with('/');
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        if name.is_empty() {
            continue;
        }
        if SKIP.contains(&name.as_str()) && !tag.ends_with('/') {
            if closing {
                if let Some(pos) = skip_depth.iter().rposition(|n| *n == name) {
                    skip_depth.truncate(pos);
                }
            } else {
                skip_depth.push(name.clone());
            }
            continue;
        }
        if skip_depth.is_empty() && BLOCK.contains(&name.as_str()) {
            out.push('\n');
            if name == "li" && !closing {
                out.push_str("- ");
            }
        } else if skip_depth.is_empty() && (name == "td" || name == "th") && closing {
            out.push(' ');
        }
    }
    (title, collapse(&out))
}

/// Text between tags: entities decoded, source line breaks as spaces (only block
/// elements break lines).
fn push_text(out: &mut String, text: &str) {
    let decoded = decode_entities(text);
    out.extend(
        decoded
            .chars()
            .map(|c| if c.is_whitespace() { ' ' } else { c }),
    );
}

/// Collapse runs of blanks, trim lines, drop empty lines.
fn collapse(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for line in s.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&words.join(" "));
    }
    out
}

/// Decode the HTML entities pages commonly use.
pub fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let end = rest[1..]
            .find(|c: char| !c.is_ascii_alphanumeric() && c != '#')
            .map(|i| i + 1);
        let decoded = end.filter(|&e| rest[e..].starts_with(';')).and_then(|e| {
            let ent = &rest[1..e];
            let ch = if let Some(num) = ent.strip_prefix("#x").or_else(|| ent.strip_prefix("#X")) {
                u32::from_str_radix(num, 16).ok().and_then(char::from_u32)
            } else if let Some(num) = ent.strip_prefix('#') {
                num.parse().ok().and_then(char::from_u32)
            } else {
                Some(match ent {
                    "amp" => '&',
                    "lt" => '<',
                    "gt" => '>',
                    "quot" => '"',
                    "apos" => '\'',
                    "nbsp" => ' ',
                    "mdash" => '\u{2014}',
                    "ndash" => '\u{2013}',
                    "hellip" => '\u{2026}',
                    "copy" => '\u{a9}',
                    "reg" => '\u{ae}',
                    "rsquo" => '\u{2019}',
                    "lsquo" => '\u{2018}',
                    "rdquo" => '\u{201d}',
                    "ldquo" => '\u{201c}',
                    "middot" => '\u{b7}',
                    "times" => '\u{d7}',
                    _ => return None,
                })
            };
            ch.map(|c| (c, e + 1))
        });
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_becomes_readable_text() {
        let html = r#"<!DOCTYPE html><html><head><title>Rust &amp; You</title>
            <style>body{color:red}</style><script>var x = "<p>no</p>";</script></head>
            <body><nav><a href="/">Home</a> | <a href="/docs">Docs</a></nav>
            <main><h1>Ownership&nbsp;rules</h1><!-- hidden -->
            <p>Each value has <b>one</b> owner &mdash; always.</p>
            <ul><li>Move</li><li>Borrow &lt;&amp;T&gt;</li></ul>
            <table><tr><td>a</td><td>b</td></tr></table></main>
            <footer>&copy; 2026</footer></body></html>"#;
        let (title, text) = html_to_text(html);
        assert_eq!(title, "Rust & You");
        assert_eq!(
            text,
            "Ownership rules\nEach value has one owner \u{2014} always.\n- Move\n- Borrow <&T>\na b"
        );
    }

    #[test]
    fn entities() {
        assert_eq!(
            decode_entities("a &#65;&#x42; &bogus; & b"),
            "a AB &bogus; & b"
        );
    }

    #[test]
    fn private_addresses() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "169.254.169.254",
            "192.168.0.1",
            "::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "100.64.0.1",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["1.1.1.1", "93.184.216.34", "2606:4700::1111"] {
            assert!(!is_private(ip.parse().unwrap()), "{ip}");
        }
    }
}

//! The browser of one task: a headless Chromium, started on first use and killed
//! with the task, driven over the DevTools protocol (`headless_chrome`, the
//! synchronous client: one agent is one thread, so no async runtime is needed).
//!
//! Sandboxing: every request the page makes (documents, frames, scripts, images,
//! XHR) passes the [`allowed`] rule before it leaves the browser: only `http`,
//! `https`, `data` and `blob` URLs, and (unless the run allows private addresses)
//! only hosts that resolve to public addresses, the rule `web_extract` follows; a
//! refused request fails as blocked by the client. `file://` is never reachable, so
//! pages never see the host's files. The profile is a fresh directory, removed with
//! the task. A task may load at most [`PAGE_BUDGET`] pages, and every DevTools call
//! waits at most [`ACTION_TIMEOUT`].
//!
//! The tools themselves (`browser_navigate`, `browser_snapshot`, ...) are in
//! [`actions`]; the accessibility-tree text with element refs is [`snapshot`].

use std::collections::HashMap;
use std::ffi::OsStr;
use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use headless_chrome::browser::tab::RequestPausedDecision;
use headless_chrome::protocol::cdp::Fetch::{FailRequest, RequestPattern, RequestStage};
use headless_chrome::protocol::cdp::Network::ErrorReason;
use headless_chrome::protocol::cdp::Page::AddScriptToEvaluateOnNewDocument;
use headless_chrome::protocol::cdp::types::Event;
use headless_chrome::{Browser, LaunchOptions, Tab};

use super::config::{SANDBOX_PATH, on_path};
use super::web::is_private;

pub mod actions;
pub mod snapshot;

/// Pages (navigations by `browser_navigate`) one task may load.
pub const PAGE_BUDGET: usize = 50;
/// Longest wait of one DevTools call (navigation, element lookup, screenshot, the
/// new tab at start-up): generous, since a loaded 2-core machine can take seconds.
pub const ACTION_TIMEOUT: Duration = Duration::from_secs(60);
/// Start-up attempts: a Chromium that did not come up (its DevTools URL or first tab
/// never arrived, as happens under heavy load) is killed and started once more.
const LAUNCH_ATTEMPTS: u32 = 2;
/// Console messages kept per task (the oldest go first).
const CONSOLE_CAP: usize = 200;

/// Run in every document before its own scripts: keeps the page's console messages in
/// `window.__trajConsole` (the last 200), where `browser_console` reads them. The
/// DevTools console event is not relied on: with Debian's Chromium it never reaches
/// the tab's listener (most likely a protocol shape the client cannot parse).
pub(crate) const CONSOLE_HOOK: &str = "(() => { if (window.__trajConsole) return; const log = []; Object.defineProperty(window, '__trajConsole', {value: log}); const show = (x) => { if (typeof x === 'string') return x; try { return JSON.stringify(x); } catch (e) { return String(x); } }; for (const k of ['log', 'info', 'warn', 'error', 'debug']) { const f = console[k]; console[k] = function (...a) { try { log.push('[' + k + '] ' + a.map(show).join(' ')); if (log.length > 200) log.shift(); } catch (e) {} return f.apply(this, a); }; } })();";

/// Why the browser could not do what a tool asked (the message is what the model
/// reads).
#[derive(Debug, thiserror::Error)]
pub enum BrowserError {
    #[error("no chromium on this machine (install Debian's `chromium`, or set TRAJ_CHROMIUM)")]
    NoChromium,
    #[error("cannot start chromium: {0}")]
    Launch(String),
    #[error("{0}")]
    Cdp(String),
    #[error("{0}: refused (only http and https pages on public addresses can be opened)")]
    Refused(String),
    #[error("the page budget of this task ({PAGE_BUDGET} pages) is spent")]
    Budget,
    #[error("no page is open; call browser_navigate first")]
    NoPage,
    #[error("unknown ref {0:?}; take a browser_snapshot and use one of its [ref=eN]")]
    UnknownRef(String),
    #[error("{0}")]
    Args(String),
}

impl From<anyhow::Error> for BrowserError {
    fn from(e: anyhow::Error) -> Self {
        BrowserError::Cdp(format!("{e:#}"))
    }
}

/// The Chromium this machine has: `TRAJ_CHROMIUM`, else `chromium`,
/// `chromium-browser` or `google-chrome` on the `PATH` (looked up once).
pub fn chromium_path() -> Option<PathBuf> {
    static PATH: OnceLock<Option<PathBuf>> = OnceLock::new();
    PATH.get_or_init(|| {
        if let Some(p) = std::env::var_os("TRAJ_CHROMIUM") {
            let p = PathBuf::from(p);
            return p.is_file().then_some(p);
        }
        let path = std::env::var("PATH").unwrap_or_default();
        let path = format!("{path}:{SANDBOX_PATH}");
        ["chromium", "chromium-browser", "google-chrome"]
            .iter()
            .find(|p| on_path(p, &path))
            .and_then(|p| {
                path.split(':')
                    .map(|d| PathBuf::from(d).join(p))
                    .find(|f| f.is_file())
            })
    })
    .clone()
}

/// Whether the page may load `url` (see the module's sandboxing rule).
pub fn allowed(url: &str, allow_private: bool) -> bool {
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("data:") || lower.starts_with("blob:") || lower == "about:blank" {
        return true;
    }
    let Some(rest) = lower
        .strip_prefix("http://")
        .or_else(|| lower.strip_prefix("https://"))
    else {
        return false;
    };
    if allow_private {
        return true;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let hostport = authority.rsplit('@').next().unwrap_or("");
    let port = if lower.starts_with("https") { 443 } else { 80 };
    let (host, port) = match hostport.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((h, p)) => (
                h.to_string(),
                p.trim_start_matches(':').parse().unwrap_or(port),
            ),
            None => return false,
        },
        None => match hostport.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), p.parse().unwrap_or(port)),
            None => (hostport.to_string(), port),
        },
    };
    match (host.as_str(), port).to_socket_addrs() {
        Ok(addrs) => {
            let addrs: Vec<_> = addrs.collect();
            !addrs.is_empty() && addrs.iter().all(|a| !is_private(a.ip()))
        }
        Err(_) => false,
    }
}

/// What the page reported through events: console lines and an open dialog.
#[derive(Default)]
pub(crate) struct Events {
    pub console: Vec<String>,
    /// `(type, message)` of a JavaScript dialog waiting for an answer.
    pub dialog: Option<(String, String)>,
}

/// One task's browser: the Chromium process, its one tab, and the refs of the last
/// snapshot.
pub struct Session {
    // Field order is drop order: the tab, then the browser (which kills Chromium),
    // then the profile directory.
    tab: Arc<Tab>,
    browser: Browser,
    profile: tempfile::TempDir,
    /// Ref (`e12`) to the DOM backend node id of the last snapshot.
    pub(crate) refs: HashMap<String, u32>,
    pub(crate) events: Arc<Mutex<Events>>,
    pub(crate) pages: usize,
    pub(crate) allow_private: bool,
    /// How long start-up took (for the figures in docs/tools.md).
    pub started_in: Duration,
}

impl Session {
    /// Start Chromium with a fresh profile and open one tab whose requests pass
    /// [`allowed`]; a start-up that fails is retried once with a new profile.
    pub fn start(allow_private: bool) -> Result<Session, BrowserError> {
        let t0 = Instant::now();
        let path = chromium_path().ok_or(BrowserError::NoChromium)?;
        let mut last = None;
        for _ in 0..LAUNCH_ATTEMPTS {
            let profile = tempfile::Builder::new()
                .prefix("traj-browser-")
                .tempdir()
                .map_err(|e| BrowserError::Launch(e.to_string()))?;
            match launch(&path, &profile) {
                Ok((browser, tab)) => {
                    let marker = profile.path().to_string_lossy().into_owned();
                    let session = Session::wire(browser, tab, profile, allow_private, t0);
                    if session.is_err() {
                        kill_by_cmdline(&marker);
                    }
                    return session;
                }
                Err(e) => {
                    // Whatever of this attempt runs (a half-started Chromium) dies
                    // before the next one.
                    kill_by_cmdline(&profile.path().to_string_lossy());
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| BrowserError::Launch("no attempt made".into())))
    }

    /// The interception rule and event listeners on a started browser's tab.
    fn wire(
        browser: Browser,
        tab: Arc<Tab>,
        profile: tempfile::TempDir,
        allow_private: bool,
        t0: Instant,
    ) -> Result<Session, BrowserError> {
        tab.set_default_timeout(ACTION_TIMEOUT);
        let pattern = RequestPattern {
            url_pattern: Some("*".to_string()),
            resource_Type: None,
            request_stage: Some(RequestStage::Request),
        };
        tab.enable_fetch(Some(&[pattern]), None)?;
        tab.enable_request_interception(Arc::new(
            move |_transport, _session, event: headless_chrome::protocol::cdp::Fetch::events::RequestPausedEvent| {
                if allowed(&event.params.request.url, allow_private) {
                    RequestPausedDecision::Continue(None)
                } else {
                    RequestPausedDecision::Fail(FailRequest {
                        request_id: event.params.request_id,
                        error_reason: ErrorReason::BlockedByClient,
                    })
                }
            },
        ))?;
        let events = Arc::new(Mutex::new(Events::default()));
        let ev = events.clone();
        tab.enable_runtime()?;
        tab.call_method(AddScriptToEvaluateOnNewDocument {
            source: CONSOLE_HOOK.to_string(),
            world_name: None,
            include_command_line_api: None,
            run_immediately: None,
        })?;
        tab.add_event_listener(Arc::new(move |e: &Event| {
            let mut ev = ev.lock().unwrap_or_else(|p| p.into_inner());
            match e {
                Event::RuntimeConsoleAPICalled(c) => {
                    let text: Vec<String> = c
                        .params
                        .args
                        .iter()
                        .map(|a| match &a.value {
                            Some(serde_json::Value::String(s)) => s.clone(),
                            Some(v) => v.to_string(),
                            None => a.description.clone().unwrap_or_default(),
                        })
                        .collect();
                    let kind = format!("{:?}", c.params.Type).to_lowercase();
                    ev.console.push(format!("[{kind}] {}", text.join(" ")));
                    if ev.console.len() > CONSOLE_CAP {
                        ev.console.remove(0);
                    }
                }
                Event::PageJavascriptDialogOpening(d) => {
                    ev.dialog = Some((
                        format!("{:?}", d.params.Type).to_lowercase(),
                        d.params.message.clone(),
                    ));
                }
                Event::PageJavascriptDialogClosed(_) => ev.dialog = None,
                _ => {}
            }
        }))?;
        Ok(Session {
            tab,
            browser,
            profile,
            refs: HashMap::new(),
            events,
            pages: 0,
            allow_private,
            started_in: t0.elapsed(),
        })
    }

    pub(crate) fn tab(&self) -> &Tab {
        &self.tab
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // The Browser's own drop kills the main process; its helpers (zygote,
        // renderers, GPU and network services) are found by the profile path in their
        // command line and killed too, so none outlives the task.
        let pid = self.browser.get_process_id();
        if let Some(p) = pid
            .and_then(|p| i32::try_from(p).ok())
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
        }
        kill_by_cmdline(&self.profile.path().to_string_lossy());
    }
}

/// One start of Chromium on `profile`: the browser and its first tab, every wait
/// bounded by [`ACTION_TIMEOUT`].
fn launch(
    path: &std::path::Path,
    profile: &tempfile::TempDir,
) -> Result<(Browser, Arc<Tab>), BrowserError> {
    let args: Vec<&OsStr> = [
        "--disable-gpu",
        "--disable-quic",
        "--disable-component-update",
        "--disable-background-networking",
        "--disable-sync",
        "--no-first-run",
        "--no-default-browser-check",
        "--mute-audio",
        "--disable-dev-shm-usage",
    ]
    .iter()
    .map(OsStr::new)
    .collect();
    let opts = LaunchOptions::default_builder()
        .path(Some(path.to_path_buf()))
        .headless(true)
        .sandbox(false)
        .window_size(Some((1280, 900)))
        .user_data_dir(Some(profile.path().to_path_buf()))
        .args(args)
        // Agents think between actions for minutes: do not drop an idle browser.
        .idle_browser_timeout(Duration::from_secs(3600))
        .build()
        .map_err(|e| BrowserError::Launch(e.to_string()))?;
    let browser = Browser::new(opts).map_err(|e| BrowserError::Launch(format!("{e:#}")))?;
    browser.set_default_timeout(ACTION_TIMEOUT);
    let tab = browser
        .new_tab()
        .map_err(|e| BrowserError::Launch(format!("no first tab: {e:#}")))?;
    Ok((browser, tab))
}

/// SIGKILL every process whose command line mentions `marker`.
fn kill_by_cmdline(marker: &str) {
    super::reaper::kill_processes_where(|proc| {
        let cmd = std::fs::read(proc.join("cmdline")).unwrap_or_default();
        String::from_utf8_lossy(&cmd).contains(marker)
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_web_pages_are_allowed() {
        assert!(!allowed("file:///etc/passwd", true));
        assert!(!allowed("FILE:///etc/passwd", false));
        assert!(!allowed("chrome://settings", true));
        assert!(!allowed("http://127.0.0.1:8080/", false));
        assert!(!allowed("http://[::1]/", false));
        assert!(!allowed("http://169.254.169.254/latest/meta-data", false));
        assert!(!allowed("http://10.0.0.1/", false));
        assert!(allowed("http://127.0.0.1:8080/", true));
        assert!(allowed("http://93.184.215.14/x", false));
        assert!(allowed("data:text/html,hi", false));
        assert!(allowed("about:blank", false));
    }
}

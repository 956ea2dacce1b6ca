//! One task's tools: the offered schemas and a sandbox to run calls in.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::{Value, json};

use super::beneath::Resolver;
use super::browser::{BrowserError, Session};
use super::config::ToolConfig;
use super::fs::Confined;
use super::process::Processes;
use super::sandbox::{RunOutput, Sandbox, SandboxConfig};
use super::{ToolHost, ToolResult, web};
use crate::llm::Client;

/// What a prompt row says about its environment.
#[derive(Debug, Clone, Default)]
pub struct TaskSpec {
    /// Container image: the task runs in docker.
    pub image: Option<String>,
    /// Working directory of commands (see [`Sandbox::new`]).
    pub cwd: Option<String>,
}

impl TaskSpec {
    /// Read `image` and `cwd` from a prompt/task row (non-string values are ignored).
    pub fn from_row(row: &serde_json::Map<String, Value>) -> TaskSpec {
        let s = |k: &str| row.get(k).and_then(Value::as_str).map(str::to_string);
        TaskSpec {
            image: s("image").filter(|i| !i.is_empty()),
            cwd: s("cwd").filter(|c| !c.is_empty()),
        }
    }
}

/// The tools of one task over a fresh workspace. Dropping it kills whatever the task
/// left running, removes its container (docker) and deletes the workspace.
pub struct Task {
    offered: Vec<&'static str>,
    /// The call of each offered tool, in the order of `offered`.
    calls: Vec<CallFn>,
    schemas: Vec<Value>,
    pub(super) config: Arc<ToolConfig>,
    /// Background processes; declared before the sandbox so that they are killed
    /// before it sweeps and removes the workspace.
    pub(super) processes: Processes,
    /// The task's browser, started by its first browser call.
    pub(super) browser: Option<Session>,
    /// Images `image_generate` saved in the workspace so far.
    pub(super) images_saved: u32,
    sandbox: Sandbox,
    pub(super) files: Confined,
    pub(super) agent: ureq::Agent,
    pub(super) llm: Option<Client>,
    /// The prompt's deadline: commands and waits end by then.
    deadline: Option<Instant>,
}

pub(super) type CallFn = fn(&mut Task, &Value) -> ToolResult;

impl Task {
    /// A task offering `offered` (their calls and schemas in the same order), in a new
    /// sandbox: what [`Registry::task`](super::Registry::task) builds.
    pub(super) fn with_tools(
        offered: Vec<&'static str>,
        calls: Vec<CallFn>,
        schemas: Vec<Value>,
        config: Arc<ToolConfig>,
        sandbox: &SandboxConfig,
        spec: &TaskSpec,
    ) -> Result<Task> {
        let sandbox = Sandbox::new(sandbox, spec.image.as_deref(), spec.cwd.as_deref())?;
        let files = Confined {
            root: sandbox.workspace().to_path_buf(),
            base: sandbox.host_cwd().to_path_buf(),
            view_root: sandbox.view_root().to_string(),
            resolver: Resolver::Auto,
        };
        let agent = web::agent(&config);
        let llm = config
            .llm
            .as_ref()
            .map(|l| Client::new(l.client.clone()).with_meter(config.meter.clone()));
        let processes = Processes::new(sandbox.config().output_cap);
        Ok(Task {
            offered,
            calls,
            schemas,
            config,
            processes,
            browser: None,
            images_saved: 0,
            sandbox,
            files,
            agent,
            llm,
            deadline: None,
        })
    }

    /// Names of the tools offered, in schema order.
    pub fn offered(&self) -> &[&'static str] {
        &self.offered
    }

    /// The task's workspace on the host.
    pub fn workspace(&self) -> &std::path::Path {
        self.sandbox.workspace()
    }

    /// The sandbox (backend, environment, command construction).
    pub fn sandbox(&mut self) -> &mut Sandbox {
        &mut self.sandbox
    }

    fn timeout_arg(args: &Value) -> Option<Duration> {
        args.get("timeout")
            .and_then(|t| t.as_u64().or_else(|| t.as_f64().map(|f| f.ceil() as u64)))
            .filter(|&t| t > 0)
            .map(Duration::from_secs)
    }

    /// The required non-empty string argument `key` of a command tool, and the
    /// command's timeout: the model's `timeout`, capped by the sandbox's.
    fn command_args(&self, args: &Value, key: &str) -> Result<(String, Duration), ToolResult> {
        let text = match args.get(key) {
            Some(Value::String(c)) if !c.trim().is_empty() => c.clone(),
            _ => {
                return Err(ToolResult::error(format!(
                    "missing required argument \"{key}\" (a non-empty string)"
                )));
            }
        };
        let cap = self.time_cap();
        Ok((text, Self::timeout_arg(args).map_or(cap, |t| t.min(cap))))
    }

    /// The longest a command or a wait may take now: the tool timeout, or the time left
    /// until the prompt's deadline when that is shorter.
    fn time_cap(&self) -> Duration {
        let cap = self.sandbox.config().timeout;
        match self.deadline {
            Some(d) => cap
                .min(d.saturating_duration_since(Instant::now()))
                .max(Duration::from_millis(1)),
            None => cap,
        }
    }

    fn run_result(out: Result<RunOutput>, timeout: Duration) -> ToolResult {
        let out = match out {
            Ok(out) => out,
            Err(e) => return ToolResult::error(format!("{e:#}")),
        };
        let mut error = Value::Null;
        if let Some(limit) = &out.limit {
            error = json!(limit);
        }
        if out.timed_out {
            error = json!(format!(
                "timed out after {}s; the command and every process it started were killed",
                timeout.as_secs()
            ));
        }
        let mut output = out.output;
        if out.killed_leftovers {
            if !output.is_empty() && !output.ends_with('\n') {
                output.push('\n');
            }
            output.push_str(
                "[traj: processes left running in the background were stopped when the command ended]",
            );
        }
        ToolResult {
            content: json!({"output": output, "exit_code": out.exit_code, "error": error})
                .to_string(),
            is_error: out.timed_out || out.limit.is_some(),
        }
    }

    pub(super) fn terminal(&mut self, args: &Value) -> ToolResult {
        let (command, timeout) = match self.command_args(args, "command") {
            Ok(a) => a,
            Err(e) => return e,
        };
        if args.get("background").and_then(Value::as_bool) == Some(true) {
            let cmd = match self.sandbox.background_shell(&command) {
                Ok(c) => c,
                Err(e) => return ToolResult::error(format!("{e:#}")),
            };
            return match self.processes.start(cmd, &command) {
                Ok(v) => ToolResult::ok(v),
                Err(e) => ToolResult::error(e.to_string()),
            };
        }
        let out = self.sandbox.run_shell(&command, None, Some(timeout));
        Self::run_result(out, timeout)
    }

    /// Run one browser action on the task's browser, starting it on first use.
    pub(super) fn browse(
        &mut self,
        args: &Value,
        action: fn(&mut Session, &Value) -> Result<Value, BrowserError>,
    ) -> ToolResult {
        if self.browser.is_none() {
            match Session::start(self.config.allow_private_addresses) {
                Ok(s) => self.browser = Some(s),
                Err(e) => return ToolResult::error(e.to_string()),
            }
        }
        let Some(session) = self.browser.as_mut() else {
            return ToolResult::error(BrowserError::NoPage.to_string());
        };
        match action(session, args) {
            Ok(v) => ToolResult::ok(v),
            Err(e) => ToolResult::error(e.to_string()),
        }
    }

    /// `browser_vision`: a screenshot of the page, put to the vision model.
    pub(super) fn browser_vision(&mut self, args: &Value) -> ToolResult {
        let url = match self.browser.as_mut() {
            None => return ToolResult::error(BrowserError::NoPage.to_string()),
            Some(s) => match super::browser::actions::screenshot_data_url(s) {
                Ok(u) => u,
                Err(e) => return ToolResult::error(e.to_string()),
            },
        };
        let question = args
            .get("question")
            .and_then(Value::as_str)
            .unwrap_or("Describe this web page.");
        let (Some(client), Some(cfg)) = (&self.llm, &self.config.llm) else {
            return ToolResult::error("browser_vision is not configured (no vision model)");
        };
        let a = json!({"image_url": url, "question": question});
        match super::llm_tools::vision_analyze(client, cfg, &self.files, &a) {
            Ok(v) => ToolResult::ok(v),
            Err(e) => ToolResult::error(e),
        }
    }

    pub(super) fn image_generate(&mut self, args: &Value) -> ToolResult {
        let Some(cfg) = self.config.image.clone() else {
            return ToolResult::error("image_generate is not configured (no --image-model)");
        };
        let meter = &self.config.meter;
        match super::image::generate(&cfg, meter, &self.files, args, &mut self.images_saved) {
            Ok(v) => ToolResult::ok(v),
            Err(e) => ToolResult::error(e.to_string()),
        }
    }

    pub(super) fn process(&mut self, args: &Value) -> ToolResult {
        let cap = self.time_cap();
        match self.processes.call(args, cap) {
            Ok(v) => ToolResult::ok(v),
            Err(e) => ToolResult::error(e.to_string()),
        }
    }

    pub(super) fn execute_code(&mut self, args: &Value) -> ToolResult {
        let (code, timeout) = match self.command_args(args, "code") {
            Ok(a) => a,
            Err(e) => return e,
        };
        let out = self.sandbox.run(&["python3", "-c", "import sys\nsys.stderr = sys.stdout\nexec(compile(sys.stdin.read(), '<code>', 'exec'), {'__name__': '__main__'})"], Some(code.as_bytes()), Some(timeout));
        Self::run_result(out, timeout)
    }
}

/// A verifier to run in a task's sandbox: its shell script, files to put in the
/// workspace first, environment variables, and its time limit.
#[derive(Debug, Clone)]
pub struct Check {
    pub script: String,
    /// Paths relative to the workspace root, and their content.
    pub files: Vec<(String, Vec<u8>)>,
    /// Set for the script (names and values are the caller's, never secrets).
    pub env: Vec<(String, String)>,
    /// Set for the script to these paths, given relative to the workspace root, made
    /// absolute as the sandbox sees them (so they hold wherever the script starts).
    pub path_env: Vec<(String, String)>,
    pub timeout: Duration,
    /// Where the script's stdout is kept (relative to the workspace root).
    pub stdout_file: String,
}

/// The bytes of a [`Check`]'s stdout read back: its last 16 MiB.
const STDOUT_TAIL: u64 = 16 << 20;

/// How a [`Check`] ran.
#[derive(Debug, Clone)]
pub struct Checked {
    /// Its stdout (its last 16 MiB).
    pub stdout: String,
    /// Its stderr (capped as tool output is).
    pub stderr: String,
    pub exit_code: i32,
    pub timed_out: bool,
}

impl Task {
    /// Run `check` in this task's sandbox (same workspace, same image), as the terminal
    /// tool runs a command, but with its own time limit. The files are written through
    /// the workspace's descriptor, never following a link the agent left.
    pub fn verify(&mut self, check: &Check) -> Result<Checked, String> {
        let view = self.sandbox.view_root().to_string();
        // Every file the check reads back is made here, the stdout file empty: one the
        // model left (read-only, a FIFO) can neither stand in for the verifier's output
        // nor stall it.
        let empty = (check.stdout_file.as_str(), &[][..]);
        for (path, bytes) in check
            .files
            .iter()
            .map(|(p, b)| (p.as_str(), &b[..]))
            .chain([empty])
        {
            self.files
                .write_new(&format!("{view}/{path}"), bytes)
                .map_err(|e| format!("cannot write {path}: {e}"))?;
        }
        let quote = |v: &str| format!("'{}'", v.replace('\'', "'\\''"));
        let mut script = String::new();
        for (k, v) in &check.env {
            script.push_str(&format!("export {k}={}\n", quote(v)));
        }
        for (k, v) in &check.path_env {
            script.push_str(&format!("export {k}={}\n", quote(&format!("{view}/{v}"))));
        }
        let out = quote(&format!("{view}/{}", check.stdout_file));
        script.push_str(&format!("( {}\n) >{out}\n", check.script));
        let full = format!("exec 2>&1\n{script}");
        let run = self
            .sandbox
            .run_for(&["/bin/sh", "-c", &full], None, check.timeout)
            .map_err(|e| format!("{e:#}"))?;
        // The reward is on the last line: read the end of a long output (a verbose test
        // run), never the first bytes only, nor nothing at all.
        let stdout =
            match self
                .files
                .open_file(&format!("{view}/{}", check.stdout_file), u64::MAX, false)
            {
                Ok((mut f, len, _)) => {
                    use std::io::{Read, Seek, SeekFrom};
                    let mut b = Vec::new();
                    let from = len.saturating_sub(STDOUT_TAIL);
                    if f.seek(SeekFrom::Start(from)).is_ok() {
                        let _ = f.take(STDOUT_TAIL).read_to_end(&mut b);
                    }
                    String::from_utf8_lossy(&b).into_owned()
                }
                Err(_) => String::new(),
            };
        Ok(Checked {
            stdout,
            stderr: run.output,
            exit_code: run.exit_code,
            timed_out: run.timed_out,
        })
    }
}

impl ToolHost for Task {
    fn verify(&mut self, check: &Check) -> Result<Checked, String> {
        Task::verify(self, check)
    }

    fn schemas(&self) -> Vec<Value> {
        self.schemas.clone()
    }

    fn ready(&mut self) -> Result<(), String> {
        self.sandbox().ready().map_err(|e| format!("{e:#}"))
    }

    fn call(&mut self, name: &str, args: &Value) -> ToolResult {
        let Some(i) = self.offered.iter().position(|&t| t == name) else {
            return ToolResult::error(format!(
                "no tool named {name:?} in this task; the tools are: {}",
                self.offered.join(", ")
            ));
        };
        if !args.is_object() {
            return ToolResult::error("the arguments must be a JSON object");
        }
        (self.calls[i])(self, args)
    }

    fn set_deadline(&mut self, deadline: Option<Instant>) {
        self.deadline = deadline;
    }
}

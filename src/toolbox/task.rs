//! One task's tools: the offered schemas and a sandbox to run calls in.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use serde_json::{Value, json};

use super::fs::Confined;
use super::registry::{Registry, ToolConfig};
use super::sandbox::{RunOutput, Sandbox, SandboxConfig};
use super::{ToolHost, ToolResult, llm_tools, web};
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
    schemas: Vec<Value>,
    config: Arc<ToolConfig>,
    sandbox: Sandbox,
    files: Confined,
    agent: ureq::Agent,
    llm: Option<Client>,
}

impl Task {
    /// A task offering the available tools of `toolsets`, in a new sandbox.
    pub fn new(
        registry: &Registry,
        toolsets: &[String],
        sandbox: &SandboxConfig,
        spec: &TaskSpec,
    ) -> Result<Task> {
        let offered = registry.resolve(toolsets)?;
        let schemas = registry.schemas(&offered);
        let sandbox = Sandbox::new(sandbox, spec.image.as_deref(), spec.cwd.as_deref())?;
        let files = Confined {
            root: sandbox.workspace().to_path_buf(),
            base: sandbox.host_cwd().to_path_buf(),
            view_root: sandbox.view_root().to_string(),
        };
        let config = registry.config_arc();
        let agent = web::agent(&config);
        let llm = config.llm.as_ref().map(|l| Client::new(l.client.clone()));
        Ok(Task {
            offered,
            schemas,
            config,
            sandbox,
            files,
            agent,
            llm,
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
        let cap = self.sandbox.config().timeout;
        Ok((text, Self::timeout_arg(args).map_or(cap, |t| t.min(cap))))
    }

    fn run_result(out: Result<RunOutput>, timeout: Duration) -> ToolResult {
        let out = match out {
            Ok(out) => out,
            Err(e) => return ToolResult::error(format!("{e:#}")),
        };
        let mut error = Value::Null;
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
            is_error: out.timed_out,
        }
    }

    fn terminal(&mut self, args: &Value) -> ToolResult {
        let (command, timeout) = match self.command_args(args, "command") {
            Ok(a) => a,
            Err(e) => return e,
        };
        let out = self.sandbox.run_shell(&command, None, Some(timeout));
        Self::run_result(out, timeout)
    }

    fn execute_code(&mut self, args: &Value) -> ToolResult {
        let (code, timeout) = match self.command_args(args, "code") {
            Ok(a) => a,
            Err(e) => return e,
        };
        let out = self.sandbox.run(&["python3", "-c", "import sys\nsys.stderr = sys.stdout\nexec(compile(sys.stdin.read(), '<code>', 'exec'), {'__name__': '__main__'})"], Some(code.as_bytes()), Some(timeout));
        Self::run_result(out, timeout)
    }

    fn outcome(r: Result<Value, String>) -> ToolResult {
        match r {
            Ok(v) => ToolResult::ok(v),
            Err(e) => ToolResult::error(e),
        }
    }
}

impl ToolHost for Task {
    fn schemas(&self) -> Vec<Value> {
        self.schemas.clone()
    }

    fn call(&mut self, name: &str, args: &Value) -> ToolResult {
        if !self.offered.contains(&name) {
            return ToolResult::error(format!(
                "no tool named {name:?} in this task; the tools are: {}",
                self.offered.join(", ")
            ));
        }
        if !args.is_object() {
            return ToolResult::error("the arguments must be a JSON object");
        }
        match name {
            "terminal" => self.terminal(args),
            "execute_code" => self.execute_code(args),
            "read_file" => Self::outcome(self.files.read_file(args)),
            "write_file" => Self::outcome(self.files.write_file(args)),
            "patch" => Self::outcome(self.files.patch(args)),
            "search_files" => Self::outcome(self.files.search_files(args)),
            "web_extract" => Self::outcome(web::web_extract(&self.agent, args)),
            "web_search" => match &self.config.search {
                Some(s) => Self::outcome(web::web_search(&self.agent, s, args)),
                None => ToolResult::error("web_search is not configured"),
            },
            "vision_analyze" | "mixture_of_agents" => {
                let (Some(client), Some(cfg)) = (&self.llm, &self.config.llm) else {
                    return ToolResult::error(format!("{name} is not configured"));
                };
                Self::outcome(if name == "vision_analyze" {
                    llm_tools::vision_analyze(client, cfg, &self.files, args)
                } else {
                    llm_tools::mixture_of_agents(client, cfg, args)
                })
            }
            other => ToolResult::error(format!("{other} is not implemented by traj")),
        }
    }
}

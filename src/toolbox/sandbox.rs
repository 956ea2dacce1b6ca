//! Where tool processes run: a fresh workspace per task and one of three backends.
//!
//! - `local`: `sh -c` in a fresh directory, with a scrubbed environment, in its own
//!   user + PID namespace with a fresh `/proc` where the kernel allows it ([`super::ns`]:
//!   it sees no other process of the machine). The host's files stay readable and
//!   writable as this user, and the network is open: use it for trusted prompts or
//!   inside a disposable machine.
//! - `bwrap`: bubblewrap. New user, PID, network, IPC, UTS and mount namespaces; no
//!   network unless [`SandboxConfig::network`]; only system directories (`/usr`, `/bin`,
//!   `/lib*`, `/etc`, ...) are visible, read-only; `/tmp` is a private tmpfs; the
//!   workspace, mounted at `/workspace`, is the only writable host directory.
//! - `docker` (or any CLI with docker's `run`/`exec`/`rm`, e.g. podman): used for a task
//!   whose prompt names an `image`. One container per task (`sleep infinity` under
//!   `--init`), the workspace mounted at `/workspace`, no network unless asked; each
//!   command is a `docker exec`; the container is removed when the task ends.
//!
//! In every backend a command gets only an explicit environment: a fixed `PATH`,
//! `HOME` (the workspace), `LANG`, `TERM`, plus the variables named in
//! [`SandboxConfig::env_allow`] and set in [`SandboxConfig::env_set`]. Nothing else of
//! the caller's environment (API keys, tokens) reaches a tool process.
//!
//! Each command runs in its own process group. When it exceeds its timeout the whole
//! group is killed (SIGKILL); when it ends, whatever it left running in the background
//! is killed too, so nothing outlives the call.

use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::{Context, Result, bail};

pub use super::bwrap::WORKSPACE_MOUNT;
use super::bwrap::bwrap_mounts;
use super::config::{SANDBOX_PATH, on_path};
pub use super::exec::RunOutput;
use super::exec::execute;
use super::limits::Limits;
use super::pod::{self, Pod, PodKey, PodKind};
use super::reaper;

/// The isolation backend of tasks that do not name an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Backend {
    /// bwrap when it works on this machine (probed once), else local with a warning.
    Auto,
    /// A fresh directory and a scrubbed environment; no namespaces.
    #[default]
    Local,
    /// bubblewrap namespaces: no network, host read-only, workspace writable.
    Bwrap,
    /// A container of the task's image (tasks naming an `image` always use it).
    Docker,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::Local => "local",
            Backend::Bwrap => "bwrap",
            Backend::Docker => "docker",
        }
    }
}

/// How tasks' sandboxes are made (one configuration per run).
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// Backend for tasks without an `image`.
    pub backend: Backend,
    /// Directory under which workspaces are created (default: the system temp dir).
    pub root: Option<PathBuf>,
    /// Give bwrap and docker sandboxes network access (default: none).
    pub network: bool,
    /// Names of caller environment variables passed to tool processes (when set).
    pub env_allow: Vec<String>,
    /// Variables set for tool processes.
    pub env_set: Vec<(String, String)>,
    /// Default and largest per-command timeout.
    pub timeout: Duration,
    /// Most bytes of a command's output returned (the middle is cut beyond this).
    pub output_cap: usize,
    /// The docker-compatible CLI (`docker`, `podman`, a path).
    pub docker_cli: String,
    /// Extra `docker run` arguments (`--memory 2g`, `--cpus 1`, ...).
    pub docker_args: Vec<String>,
    /// Image used when the backend is `docker` and the task names none.
    pub docker_image: Option<String>,
    /// Resource limits of tool processes (local and bwrap).
    pub limits: Limits,
    /// Set by [`SandboxConfig::resolve_auto`] when `auto` fell back to local: the
    /// warning to show on stderr and to record with the run.
    pub auto_fallback: Option<String>,
    /// The executable that serves as a pod's supervisor (traj-run itself, whose `main`
    /// calls [`super::pod::serve_if_supervisor`] first). When set, bwrap sandboxes, and
    /// local ones where [`super::ns`] makes a namespace, are kept for the worker
    /// thread's next task ([`super::pod`]); `None`: a new sandbox for every command.
    pub pod_exe: Option<PathBuf>,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            backend: Backend::Local,
            root: None,
            network: false,
            env_allow: Vec::new(),
            env_set: Vec::new(),
            timeout: Duration::from_secs(180),
            output_cap: 50_000,
            docker_cli: "docker".to_string(),
            docker_args: Vec::new(),
            docker_image: None,
            limits: Limits::default(),
            auto_fallback: None,
            pod_exe: None,
        }
    }
}

/// A task row's `cwd` that no sandbox can take (outside the workspace, `..` in it): the
/// row's fault, the same on every attempt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadCwd(pub String);

/// Bubblewrap cannot isolate commands on this machine, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BwrapUnavailable(pub String);

/// The result of [`Sandbox::probe_bwrap`], probed once per process.
static BWRAP_PROBE: OnceLock<Result<(), BwrapUnavailable>> = OnceLock::new();

/// Whether bubblewrap works here (probed on the first call only); why not.
pub fn bwrap_works() -> Result<(), BwrapUnavailable> {
    BWRAP_PROBE
        .get_or_init(|| Sandbox::probe_bwrap().map_err(|e| BwrapUnavailable(format!("{e:#}"))))
        .clone()
}

impl SandboxConfig {
    /// Settle `--sandbox auto`: bwrap when [`bwrap_works`], else local. Returns the
    /// warning to show when auto had to fall back to local (no isolation).
    pub fn resolve_auto(&mut self) -> Option<String> {
        if self.backend != Backend::Auto {
            return None;
        }
        match bwrap_works() {
            Ok(()) => {
                self.backend = Backend::Bwrap;
                None
            }
            Err(why) => {
                self.backend = Backend::Local;
                let processes = match super::ns::view() {
                    super::ns::View::Own(_) => {
                        "other processes are hidden (own PID namespace)".to_string()
                    }
                    super::ns::View::Host(why) => {
                        format!("they see every process of this machine: {why}")
                    }
                };
                self.auto_fallback = Some(format!(
                    "WARNING: --sandbox auto: bubblewrap does not work here ({why}); tool commands run \
                     with --sandbox local, NOT ISOLATED from this machine (they can read and write \
                     what this user can and reach the network; {processes}). Install bubblewrap \
                     and allow user namespaces, or run in a disposable machine."
                ));
                self.auto_fallback.clone()
            }
        }
    }
}

/// One task's sandbox: its workspace and how commands run in it.
pub struct Sandbox {
    cfg: SandboxConfig,
    backend: Backend,
    /// The workspace, when this sandbox made its own (no pod).
    dir: Option<tempfile::TempDir>,
    /// The pod this task runs its commands in (see [`super::pod`]).
    pod: Option<Pod>,
    /// A background command ran: it had a sandbox of its own over the workspace, so
    /// the pod is not reused.
    background: bool,
    /// Canonical host path of the workspace.
    host_root: PathBuf,
    /// How the workspace root looks to commands (`/workspace` or the host path).
    view_root: String,
    /// Working directory of commands, as the command sees it.
    inner_cwd: String,
    /// Working directory on the host, when it is inside the workspace.
    host_cwd: Option<PathBuf>,
    image: Option<String>,
    container: Option<String>,
    env: Vec<(String, String)>,
    /// A command has run here (so a process may have outlived it in the workspace).
    ran: bool,
}

impl Sandbox {
    /// Make a fresh workspace. A task naming an `image` uses docker; `cwd` is the
    /// commands' working directory: relative to the workspace (created), or for docker
    /// an absolute path in the container. Local and bwrap refuse absolute paths
    /// outside the workspace.
    pub fn new(cfg: &SandboxConfig, image: Option<&str>, cwd: Option<&str>) -> Result<Sandbox> {
        let mut cfg = cfg.clone();
        cfg.resolve_auto();
        let cfg = &cfg;
        let image = image
            .map(str::to_string)
            .or_else(|| (cfg.backend == Backend::Docker).then(|| cfg.docker_image.clone())?);
        let backend = if image.is_some() {
            Backend::Docker
        } else {
            cfg.backend
        };
        if backend == Backend::Docker && image.is_none() {
            bail!(
                "the docker backend needs an image: name one in the prompt row or in the configuration"
            );
        }
        if let Some(why) = image.as_deref().and_then(image_refused) {
            bail!(why);
        }
        if backend == Backend::Docker && !cli_exists(&cfg.docker_cli) {
            bail!(
                "the task needs a container (image {}), but the container CLI {:?} is not installed",
                image.as_deref().unwrap_or(""),
                cfg.docker_cli
            );
        }
        if backend == Backend::Bwrap && !on_path("bwrap", SANDBOX_PATH) {
            bail!(
                "the bwrap backend needs bubblewrap: `bwrap` is not installed (apt-get install bubblewrap)"
            );
        }
        let (dir, pod, host_root) = match pod_key(cfg, backend) {
            Some(key) => {
                let pod = pod::lease(&key)?;
                let root = pod.workspace().to_path_buf();
                (None, Some(pod), root)
            }
            None => {
                let dir = super::config::new_workspace(cfg.root.as_deref(), "traj-task-")?;
                let root = dir.path().canonicalize()?;
                (Some(dir), None, root)
            }
        };
        let view_root = match backend {
            Backend::Local | Backend::Auto => host_root.display().to_string(),
            Backend::Bwrap | Backend::Docker => WORKSPACE_MOUNT.to_string(),
        };
        let (inner_cwd, host_cwd) = match cwd {
            None | Some("") => (view_root.clone(), Some(host_root.clone())),
            Some(c) => {
                let rel = if Path::new(c).is_absolute() {
                    match Path::new(c).strip_prefix(&view_root) {
                        Ok(rel) => Some(rel.to_path_buf()),
                        Err(_) if backend == Backend::Docker => None,
                        Err(_) => {
                            return Err(BadCwd(format!(
                                "cwd {c:?} is outside the task's workspace; with the {} backend, cwd must be a path inside it",
                                backend.as_str()
                            ))
                            .into());
                        }
                    }
                } else {
                    Some(PathBuf::from(c))
                };
                match rel {
                    Some(rel) => {
                        if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
                            return Err(
                                BadCwd(format!("cwd {c:?} must not contain `..` or `.`")).into()
                            );
                        }
                        let host = host_root.join(&rel);
                        std::fs::create_dir_all(&host)?;
                        let inner = Path::new(&view_root).join(&rel).display().to_string();
                        (inner, Some(host))
                    }
                    None => (c.to_string(), None),
                }
            }
        };
        if backend == Backend::Local {
            reaper::become_subreaper();
        }
        if backend != Backend::Docker
            && cfg.limits != Limits::NONE
            && !on_path("prlimit", SANDBOX_PATH)
        {
            bail!("per-call resource limits need prlimit (util-linux), which is not installed");
        }
        let home = view_root.clone();
        let mut env: Vec<(String, String)> = vec![
            ("PATH".into(), SANDBOX_PATH.into()),
            ("HOME".into(), home),
            ("LANG".into(), "C.UTF-8".into()),
            ("TERM".into(), "dumb".into()),
            ("PYTHONUNBUFFERED".into(), "1".into()),
        ];
        for name in &cfg.env_allow {
            if let Ok(v) = std::env::var(name) {
                env.retain(|(k, _)| k != name);
                env.push((name.clone(), v));
            }
        }
        for (k, v) in &cfg.env_set {
            env.retain(|(e, _)| e != k);
            env.push((k.clone(), v.clone()));
        }
        Ok(Sandbox {
            cfg: cfg.clone(),
            backend,
            dir,
            pod,
            background: false,
            host_root,
            view_root,
            inner_cwd,
            host_cwd,
            image,
            container: None,
            env,
            ran: false,
        })
    }

    /// Wait until the pod this sandbox runs in has started (at once without a pod, or
    /// for a pod kept from an earlier task).
    pub fn ready(&mut self) -> Result<()> {
        self.pod.as_mut().map_or(Ok(()), Pod::ready)
    }

    /// The backend in use.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The workspace on the host (canonical path).
    pub fn workspace(&self) -> &Path {
        &self.host_root
    }

    /// The commands' working directory on the host, when it is inside the workspace
    /// (file tools resolve relative paths from here).
    pub fn host_cwd(&self) -> &Path {
        self.host_cwd.as_deref().unwrap_or(&self.host_root)
    }

    /// How the workspace root looks to commands (`/workspace` or the host path).
    pub fn view_root(&self) -> &str {
        &self.view_root
    }

    /// The configuration this sandbox was made with.
    pub fn config(&self) -> &SandboxConfig {
        &self.cfg
    }

    /// The bubblewrap command line (without the program) that runs `argv`.
    pub fn bwrap_args(&self, argv: &[&str]) -> Vec<String> {
        let mut a = bwrap_mounts(self.cfg.network, &self.host_root);
        a.extend(["--chdir".into(), self.inner_cwd.clone(), "--".into()]);
        a.extend(argv.iter().map(|s| s.to_string()));
        a
    }

    /// The container name of this task (docker backend).
    fn container_name(&mut self) -> String {
        self.container
            .get_or_insert_with(|| format!("traj-{:016x}", fastrand::u64(..)))
            .clone()
    }

    /// The `docker run` arguments (without the CLI) that start this task's container.
    pub fn docker_run_args(&mut self) -> Vec<String> {
        let name = self.container_name();
        let mut a: Vec<String> = vec![
            "run".into(),
            "-d".into(),
            "--init".into(),
            "--name".into(),
            name,
        ];
        if !self.cfg.network {
            a.extend(["--network".into(), "none".into()]);
        }
        a.extend([
            "-v".into(),
            format!("{}:{WORKSPACE_MOUNT}", self.host_root.display()),
            "-w".into(),
            self.inner_cwd.clone(),
        ]);
        a.extend(self.cfg.docker_args.iter().cloned());
        // The image is never an option, whatever it says (it is checked too).
        a.push("--".into());
        a.push(self.image.clone().unwrap_or_default());
        a.extend(["sleep".into(), "infinity".into()]);
        a
    }

    /// The `docker exec` arguments (without the CLI) that run `argv` in the container.
    pub fn docker_exec_args(&mut self, argv: &[&str]) -> Vec<String> {
        let name = self.container_name();
        let mut a: Vec<String> = vec![
            "exec".into(),
            "-i".into(),
            "-w".into(),
            self.inner_cwd.clone(),
        ];
        for (k, v) in &self.env {
            a.extend(["-e".into(), format!("{k}={v}")]);
        }
        a.push(name);
        a.extend(argv.iter().map(|s| s.to_string()));
        a
    }

    /// A command for the docker CLI itself: it keeps only what the CLI needs to find
    /// its engine, never the caller's whole environment.
    fn docker_cli(&self) -> Command {
        docker_command(&self.cfg.docker_cli)
    }

    fn ensure_container(&mut self) -> Result<()> {
        if self.container.is_some() {
            return Ok(());
        }
        let args = self.docker_run_args();
        let out = self
            .docker_cli()
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("cannot run {}", self.cfg.docker_cli))?;
        if !out.status.success() {
            self.container = None;
            bail!(
                "{} run failed: {}",
                self.cfg.docker_cli,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }

    /// The command that runs `argv` in this sandbox (process group and pipes not yet
    /// set).
    pub fn command(&mut self, argv: &[&str]) -> Result<Command> {
        let mut limited = self.cfg.limits.prefix();
        let argv: Vec<&str> = if self.backend == Backend::Docker || limited.is_empty() {
            argv.to_vec()
        } else {
            limited.extend(argv.iter().map(|s| s.to_string()));
            limited.iter().map(String::as_str).collect()
        };
        let argv = &argv[..];
        Ok(match self.backend {
            Backend::Local | Backend::Auto => {
                // Its own PID namespace where the kernel allows it (see `ns`).
                let mut c = match super::ns::view() {
                    super::ns::View::Own(prefix) => {
                        let mut c = Command::new(&prefix[0]);
                        c.args(&prefix[1..]).args(argv);
                        c
                    }
                    super::ns::View::Host(_) => {
                        let mut c = Command::new(argv[0]);
                        c.args(&argv[1..]);
                        c
                    }
                };
                c.env_clear().envs(self.env.iter().map(|(k, v)| (k, v)));
                c.current_dir(self.host_cwd());
                c
            }
            Backend::Bwrap => {
                let mut c = Command::new(super::bwrap::program());
                c.args(self.bwrap_args(argv));
                c.env_clear().envs(self.env.iter().map(|(k, v)| (k, v)));
                c.current_dir(&self.host_root);
                c
            }
            Backend::Docker => {
                self.ensure_container()?;
                let args = self.docker_exec_args(argv);
                let mut c = self.docker_cli();
                c.args(args);
                c
            }
        })
    }

    /// Run a shell script (`sh -c`), its stderr merged into stdout, with `stdin` fed
    /// to it, killing its process group after `timeout` (capped by the configured
    /// one) and whatever it leaves running when it ends.
    pub fn run_shell(
        &mut self,
        script: &str,
        stdin: Option<&[u8]>,
        timeout: Option<Duration>,
    ) -> Result<RunOutput> {
        let full = format!("exec 2>&1\n{script}");
        self.run(&["/bin/sh", "-c", &full], stdin, timeout)
    }

    /// The command of a background shell script (`sh -c`, stderr merged into stdout),
    /// for [`super::process::Processes::start`]; the task-end sweep covers it.
    pub fn background_shell(&mut self, script: &str) -> Result<Command> {
        let full = format!("exec 2>&1\n{script}");
        self.ran = true;
        self.background = self.pod.is_some();
        self.command(&["/bin/sh", "-c", &full])
    }

    /// Run `argv` in the sandbox (see [`Sandbox::run_shell`]).
    pub fn run(
        &mut self,
        argv: &[&str],
        stdin: Option<&[u8]>,
        timeout: Option<Duration>,
    ) -> Result<RunOutput> {
        let timeout = timeout.map_or(self.cfg.timeout, |t| t.min(self.cfg.timeout));
        self.run_for(argv, stdin, timeout)
    }

    /// [`Sandbox::run`] with a time limit of the caller's, not capped by the
    /// configured one (a verifier's `--verifier-timeout`).
    pub fn run_for(
        &mut self,
        argv: &[&str],
        stdin: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<RunOutput> {
        if let Some(pod) = self.pod.as_mut() {
            self.ran = true;
            let (_, mut full) = self.cfg.limits.pod_split();
            full.extend(argv.iter().map(|s| s.to_string()));
            let full: Vec<&str> = full.iter().map(String::as_str).collect();
            let cap = self.cfg.output_cap;
            let mut out = pod.run(&full, &self.inner_cwd, &self.env, stdin, timeout, cap)?;
            if !out.timed_out {
                out.limit = self.cfg.limits.hit(out.exit_code, &out.output);
            }
            return Ok(out);
        }
        let cmd = self.command(argv)?;
        self.ran = true;
        let home = self.reaps_orphans().then(|| self.home());
        let mut out = execute(cmd, stdin, timeout, self.cfg.output_cap, home.as_deref())?;
        if self.backend != Backend::Docker && !out.timed_out {
            out.limit = self.cfg.limits.hit(out.exit_code, &out.output);
        }
        if out.timed_out && self.backend == Backend::Docker {
            // The exec client is gone, but what it started runs on in the container:
            // restarting it stops every process (the workspace is kept).
            if let Some(name) = self.container.clone() {
                let _ = self
                    .docker_cli()
                    .args(["restart", "-t", "0", &name])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
        }
        Ok(out)
    }

    /// Whether orphans of this sandbox's commands can be re-parented to traj and must be
    /// looked for in /proc ([`super::reaper`]): in local mode without a PID namespace of
    /// its own. In its own namespace (see [`super::ns`]) a command's processes are
    /// re-parented to the namespace's first process, never to traj, and die with it
    /// when the call ends, so reading /proc after every call (hundreds of files with
    /// many workers) would find nothing.
    fn reaps_orphans(&self) -> bool {
        self.backend == Backend::Local && matches!(super::ns::view(), super::ns::View::Host(_))
    }

    /// The `HOME` tool processes get: in local mode, the task's own workspace, which
    /// is how an orphan is known to be this task's (see [`super::reaper`]).
    fn home(&self) -> String {
        self.env
            .iter()
            .find(|(k, _)| k == "HOME")
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    }

    /// Check that bubblewrap can create its namespaces here; the error says why not.
    pub fn probe_bwrap() -> Result<()> {
        if !on_path("bwrap", SANDBOX_PATH) {
            bail!("bwrap is not installed");
        }
        let out = Command::new("bwrap")
            .args([
                "--unshare-all",
                "--die-with-parent",
                "--ro-bind",
                "/",
                "/",
                "--",
                "/bin/true",
            ])
            .stdin(Stdio::null())
            .output()?;
        if !out.status.success() {
            bail!(
                "bwrap cannot create namespaces here: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if self.backend == Backend::Docker
            && let Some(name) = self.container.take()
        {
            let _ = self
                .docker_cli()
                .args(["rm", "-f", &name])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        if let Some(pod) = self.pod.take() {
            if self.background {
                kill_processes_in(&[pod.workspace()]);
            } else {
                pod::give_back(pod);
            }
            return;
        }
        // A process that left its group (setsid) may still run in the workspace; no
        // process can if no command ever ran (file tools only): then /proc is not read.
        if self.ran {
            if self.reaps_orphans() {
                reaper::reap_orphans(&self.home(), reaper::Scan::All);
            }
            // Nothing inside a bwrap sandbox outlives its call: each call has its own PID
            // namespace, which the kernel empties when the call's first process ends, and
            // a background command's bwrap is ended, and its namespace waited for, by its
            // `Processes` at the task's end (tests/cli/sandbox.rs `setsid_and_double_fork_daemons_die_with_the_call_and_the_task`
            // passes without this sweep). So only the other backends read /proc here:
            // with 256 workers and --no-sandbox-reuse, that read was most of traj-run's
            // own CPU.
            if self.backend != Backend::Bwrap {
                let made = self.dir.as_ref().map(|d| d.path().to_path_buf());
                kill_processes_in(&[made.as_deref().unwrap_or(&self.host_root), &self.host_root]);
            }
        }
    }
}

/// How this configuration's tasks of `backend` share a pod, when they do.
fn pod_key(cfg: &SandboxConfig, backend: Backend) -> Option<PodKey> {
    let kind = match backend {
        Backend::Bwrap => PodKind::Bwrap {
            network: cfg.network,
        },
        Backend::Local => PodKind::Unshare(super::ns::init_prefix()?),
        Backend::Auto | Backend::Docker => return None,
    };
    Some(PodKey {
        kind,
        root: cfg.root.clone(),
        exe: cfg.pod_exe.clone()?,
        limits: cfg.limits.pod_split().0,
    })
}

/// Why `image` cannot be given to the container CLI: one starting with `-` would be read
/// as an option (`--privileged`).
pub fn image_refused(image: &str) -> Option<String> {
    image.starts_with('-').then(|| {
        format!("image {image:?} starts with '-': the container CLI would take it for an option")
    })
}

/// True when `cli` is a path to a file, or a program on the caller's `PATH`.
fn cli_exists(cli: &str) -> bool {
    if cli.contains('/') {
        return Path::new(cli).is_file();
    }
    on_path(
        cli,
        &std::env::var("PATH").unwrap_or_else(|_| SANDBOX_PATH.into()),
    )
}

/// Kill every process whose working directory is inside one of `dirs`.
fn kill_processes_in(dirs: &[&Path]) {
    super::reaper::kill_processes_where(|proc| {
        std::fs::read_link(proc.join("cwd"))
            .is_ok_and(|cwd| dirs.iter().any(|d| cwd.starts_with(d)))
    });
}

/// A command of the docker CLI `cli` with only what the CLI needs to find its engine
/// (PATH, HOME, the DOCKER_* and XDG_RUNTIME_DIR variables): never the caller's keys.
pub fn docker_command(cli: &str) -> Command {
    let path = std::env::var("PATH").unwrap_or_else(|_| SANDBOX_PATH.into());
    // A full path, so that std starts it with posix_spawn, not a fork of traj-run
    // (see `bwrap::program`).
    let program = (!cli.contains('/'))
        .then(|| super::config::find_on_path(cli, &path))
        .flatten();
    let mut c = Command::new(program.as_deref().unwrap_or(Path::new(cli)));
    c.env_clear();
    c.env("PATH", path);
    for k in [
        "HOME",
        "DOCKER_HOST",
        "DOCKER_CONFIG",
        "DOCKER_CONTEXT",
        "XDG_RUNTIME_DIR",
        "CONTAINER_HOST",
    ] {
        if let Ok(v) = std::env::var(k) {
            c.env(k, v);
        }
    }
    c
}

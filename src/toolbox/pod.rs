//! A pod: one bwrap or local-namespace sandbox kept for a worker thread's next task,
//! so that its namespaces and mounts are made once per worker rather than once per
//! command (making them is most of a short call's cost: BENCHMARKS.md, bench:run).
//!
//! Inside the sandbox the first process (PID 1 of its PID namespace) is a supervisor:
//! traj-run itself, started with [`SUPERVISOR_ARG`] (its `main` calls
//! [`serve_if_supervisor`] before anything else). It reads requests from its stdin and
//! answers on its stdout, one length-prefixed JSON frame each:
//! - run a command: [`super::exec::execute`] runs it as a one-off sandbox would (own
//!   process group, output cap, timeout); then every other process of the namespace is
//!   killed, so nothing a call starts outlives it, as with a sandbox per command;
//! - reset, when a task ends: kill every other process, empty the workspace (and in
//!   bwrap `/tmp` and `/dev/shm`), remove whatever was added to bwrap's `/` and `/dev`.
//!   A pod whose reset finds anything it cannot undo (an entry of `/` or `/dev` changed
//!   or removed, SysV IPC objects, a process that will not die) is retired: the next
//!   task gets a new one.
//!
//! The supervisor is non-dumpable (a tool process of the same user cannot ptrace it or
//! open its `/proc/1/fd`), shares no descriptor with tool processes, and as PID 1 of
//! its namespace ignores every signal sent from inside. When its stdin closes (traj-run
//! exits, even killed by SIGKILL, or drops the pod) it exits at once, also in the middle
//! of a command (a thread watches for the hangup), and the kernel kills what is left in
//! the namespace. Tool processes get no POSIX message queues (`RLIMIT_MSGQUEUE` 0), the
//! one kind of namespace state a reset could not list.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use rustix::process::{Pid, Signal, WaitOptions};
use serde::{Deserialize, Serialize};

use super::bwrap::{WORKSPACE_MOUNT, bwrap_mounts};
use super::config::SANDBOX_PATH;
use super::exec::RunOutput;
use super::exec::execute;
use super::limits::Limits;

/// The first argument that makes traj-run serve as a pod's supervisor.
pub const SUPERVISOR_ARG: &str = "--traj-pod-supervisor";

/// Where the supervisor's executable is mounted inside a bwrap pod.
const EXE_MOUNT: &str = "/.traj-pod";

/// How long a supervisor may take to start, answer a reset, or answer beyond a
/// command's own timeout (it kills the command at the timeout itself).
const PATIENCE: Duration = Duration::from_secs(20);

/// What the supervisor keeps, given as its second argument.
#[derive(Debug, Serialize, Deserialize)]
struct Plan {
    /// Directories emptied between tasks (their own mode is restored too).
    wipe: Vec<PathBuf>,
    /// Directories whose entries must stay as they were at the start: a new entry is
    /// removed, a changed or missing one retires the pod.
    watch: Vec<PathBuf>,
    /// Limits the supervisor sets on itself, inherited by every command.
    limits: Limits,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Request {
    /// Run `argv`; with `stdin`, a frame of that many bytes follows and is its input.
    Run {
        argv: Vec<String>,
        cwd: String,
        env: Vec<(String, String)>,
        timeout_ms: u64,
        cap: usize,
        stdin: bool,
    },
    Reset,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
enum Reply {
    Ready,
    Ran { out: RunOutput },
    Failed { why: String },
    Clean,
    Retire { why: String },
}

fn write_frame(w: &mut impl Write, bytes: &[u8]) -> std::io::Result<()> {
    let len =
        u32::try_from(bytes.len()).map_err(|_| std::io::Error::other("a pod frame over 4 GiB"))?;
    w.write_all(&len.to_le_bytes())?;
    w.write_all(bytes)?;
    w.flush()
}

/// The largest reply traj-run reads from a supervisor: a command's output is capped
/// far below it (a supervisor that says more is broken).
const MAX_REPLY: usize = 64 << 20;

/// The next frame (at most `max` bytes); `None` at a clean end of stream.
fn read_frame(r: &mut impl Read, max: usize) -> std::io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > max {
        return Err(std::io::Error::other(format!("a pod frame of {len} bytes")));
    }
    let mut buf = vec![0u8; len];
    r.read_exact(&mut buf)?;
    Ok(Some(buf))
}

fn send<T: Serialize>(w: &mut impl Write, msg: &T) -> std::io::Result<()> {
    write_frame(w, &serde_json::to_vec(msg).map_err(std::io::Error::other)?)
}

// ---------------------------------------------------------------------------------
// The supervisor, inside the sandbox.

/// When this process was started as a pod's supervisor, serve until its stdin closes
/// and give the exit code; otherwise `None` (the binary goes on as itself).
pub fn serve_if_supervisor() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(OsStr::new(SUPERVISOR_ARG)) {
        return None;
    }
    let plan = args
        .next()
        .and_then(|p| serde_json::from_str::<Plan>(p.to_str()?).ok());
    let mut out = std::io::stdout().lock();
    let Some(plan) = plan else {
        let why = "the pod supervisor's plan is missing or unreadable".to_string();
        let _ = send(&mut out, &Reply::Failed { why });
        return Some(ExitCode::from(2));
    };
    match serve(&plan, &mut std::io::stdin().lock(), &mut out) {
        Ok(()) => Some(ExitCode::SUCCESS),
        Err(why) => {
            let _ = send(
                &mut out,
                &Reply::Failed {
                    why: format!("{why:#}"),
                },
            );
            Some(ExitCode::FAILURE)
        }
    }
}

fn serve(plan: &Plan, input: &mut impl Read, out: &mut impl Write) -> Result<()> {
    // kill(-1) and the kill-everything-else sweeps are only safe as a namespace's init.
    if rustix::process::getpid() != Pid::INIT {
        bail!("the pod supervisor must be the first process of its own PID namespace");
    }
    // What `ps` and /proc/1/comm show inside: not traj-run, which it is not (named
    // first: a non-dumpable process's /proc files belong to root).
    let _ = std::fs::write("/proc/self/comm", "traj-pod");
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .context("cannot make the pod supervisor non-dumpable")?;
    // Before the limits: a thread counts against them.
    watch_for_hangup().context("cannot watch the pod supervisor's input")?;
    plan.limits
        .apply_to_self()
        .context("cannot set the commands' resource limits")?;
    let modes: Vec<(PathBuf, u32)> = plan
        .wipe
        .iter()
        .map(|d| Ok((d.clone(), std::fs::symlink_metadata(d)?.mode())))
        .collect::<std::io::Result<_>>()
        .context("cannot read the directories to keep empty")?;
    let watched: Vec<(PathBuf, Listing)> = plan
        .watch
        .iter()
        .map(|d| Ok((d.clone(), listing(d)?)))
        .collect::<std::io::Result<_>>()
        .context("cannot list the directories to watch")?;
    send(out, &Reply::Ready)?;
    let mut retire: Option<String> = None;
    while let Some(frame) = read_frame(input, usize::MAX)? {
        let req: Request = serde_json::from_slice(&frame).context("an unreadable pod request")?;
        let reply = match req {
            Request::Run {
                argv,
                cwd,
                env,
                timeout_ms,
                cap,
                stdin,
            } => {
                let data = if stdin {
                    Some(read_frame(input, usize::MAX)?.context("the command's input is missing")?)
                } else {
                    None
                };
                run(
                    &argv,
                    &cwd,
                    &env,
                    timeout_ms,
                    cap,
                    data.as_deref(),
                    &mut retire,
                )
            }
            Request::Reset => match retire
                .take()
                .or_else(|| tired(&plan.limits))
                .map_or_else(|| reset(&modes, &watched), Err)
            {
                Ok(()) => Reply::Clean,
                Err(why) => Reply::Retire { why },
            },
        };
        send(out, &reply)?;
    }
    Ok(())
}

/// End the supervisor, and with it every process of its namespace, as soon as its stdin
/// has no writer left (traj-run ended, even by `kill -9`, or dropped the pod), also while
/// a command runs: the loop of [`serve`] only reads its stdin between commands, and a
/// `sleep 1000` would otherwise run on to its timeout, re-parented to init.
fn watch_for_hangup() -> std::io::Result<()> {
    use rustix::event::{PollFd, PollFlags, poll};
    std::thread::Builder::new()
        .name("hangup".into())
        .stack_size(64 << 10)
        .spawn(|| {
            let stdin = std::io::stdin();
            loop {
                // No events asked for: only the hangup (or an error) wakes it, never a
                // request waiting to be read.
                let mut fds = [PollFd::new(&stdin, PollFlags::empty())];
                match poll(&mut fds, None) {
                    Ok(_) if !fds[0].revents().is_empty() => break,
                    Ok(_) | Err(rustix::io::Errno::INTR) => {}
                    Err(_) => break,
                }
            }
            // PID 1 of the namespace ends: the kernel kills every other process in it.
            #[allow(
                clippy::exit,
                reason = "the supervisor is its own process, and ending it at once is the point"
            )]
            std::process::exit(1)
        })
        .map(drop)
}

fn run(
    argv: &[String],
    cwd: &str,
    env: &[(String, String)],
    timeout_ms: u64,
    cap: usize,
    stdin: Option<&[u8]>,
    retire: &mut Option<String>,
) -> Reply {
    let Some((prog, args)) = argv.split_first() else {
        return Reply::Failed {
            why: "an empty command".into(),
        };
    };
    // The supervisor moves to the command's directory itself: a `Command` without one
    // is started with posix_spawn (vfork-like), not fork.
    if let Err(e) = std::env::set_current_dir(cwd) {
        return Reply::Failed {
            why: format!("cannot start the command: {cwd}: {e}"),
        };
    }
    let mut cmd = Command::new(prog);
    cmd.args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)));
    let out = execute(cmd, stdin, Duration::from_millis(timeout_ms), cap, None);
    // Nothing the call started outlives it: every other process of the namespace goes.
    let swept = kill_others(Duration::from_secs(2));
    match out {
        Ok(mut out) => {
            match swept {
                Ok(n) => out.killed_leftovers |= n > 0 && !out.timed_out,
                Err(why) => *retire = Some(why),
            }
            Reply::Ran { out }
        }
        Err(e) => Reply::Failed {
            why: format!("{e:#}"),
        },
    }
}

/// Why the supervisor should not serve another task: its own CPU time, which counts
/// against the CPU limit it set on itself, is past half of it.
fn tired(limits: &Limits) -> Option<String> {
    let used = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    let used = u64::try_from(used.tv_sec).unwrap_or(0);
    (limits.cpu_secs > 0 && used * 2 > limits.cpu_secs)
        .then(|| format!("the supervisor has used {used} s of CPU time"))
}

/// Wait for every child that has ended (orphans are re-parented to PID 1).
fn reap() {
    while let Ok(Some(_)) = rustix::process::wait(WaitOptions::NOHANG) {}
}

/// The supervisor's next reply on `from`, waiting at most `patience`.
fn read_reply(from: &mut ChildStdout, patience: Duration) -> Result<Reply> {
    if !super::exec::wait_readable(&*from, patience)? {
        bail!(
            "the sandbox's supervisor did not answer within {} s",
            patience.as_secs()
        );
    }
    let frame =
        read_frame(from, MAX_REPLY)?.ok_or_else(|| anyhow!("the sandbox's supervisor ended"))?;
    Ok(serde_json::from_slice(&frame)?)
}

/// Pids of the namespace's other processes and whether each is a zombie.
fn others() -> Vec<(Pid, bool)> {
    super::reaper::all_pids()
        .into_iter()
        .filter(|&p| p != 1)
        .filter_map(|p| {
            let (_, _, state) = super::reaper::stat_of(p)?;
            Some((
                Pid::from_raw(i32::try_from(p).ok()?)?,
                matches!(state, 'Z' | 'X'),
            ))
        })
        .collect()
}

/// SIGKILL every other process of the namespace, round after round, and reap them;
/// how many were running, or why some would not go.
fn kill_others(patience: Duration) -> Result<usize, String> {
    let until = Instant::now() + patience;
    let mut killed = std::collections::BTreeSet::new();
    loop {
        reap();
        let left = others();
        if left.is_empty() {
            return Ok(killed.len());
        }
        for &(pid, zombie) in &left {
            if !zombie {
                let _ = rustix::process::kill_process(pid, Signal::KILL);
                killed.insert(pid.as_raw_nonzero());
            }
        }
        if Instant::now() > until {
            return Err(format!("{} processes did not end when killed", left.len()));
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// A directory's entries: name, and (mode, owner, device, link target).
type Listing = BTreeMap<std::ffi::OsString, (u32, u32, u64, Option<PathBuf>)>;

fn listing(dir: &Path) -> std::io::Result<Listing> {
    let mut out = Listing::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let md = e.path().symlink_metadata()?;
        let target = md
            .file_type()
            .is_symlink()
            .then(|| std::fs::read_link(e.path()))
            .transpose()?;
        out.insert(e.file_name(), (md.mode(), md.uid(), md.dev(), target));
    }
    Ok(out)
}

/// Between tasks: no process but this one, the wiped directories empty (with their
/// mode as at the start), the watched ones as at the start, no SysV IPC object.
fn reset(modes: &[(PathBuf, u32)], watched: &[(PathBuf, Listing)]) -> Result<(), String> {
    kill_others(Duration::from_secs(5))?;
    for (dir, mode) in modes {
        let now = std::fs::symlink_metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        if !now.is_dir() {
            return Err(format!("{} is no longer a directory", dir.display()));
        }
        if now.mode() != *mode {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(*mode & 0o7777))
                .map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        empty_dir(dir).map_err(|e| format!("cannot empty {}: {e}", dir.display()))?;
    }
    for (dir, was) in watched {
        let now = listing(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for (name, meta) in &now {
            match was.get(name) {
                Some(old) if old == meta => {}
                Some(_) => return Err(format!("{} was changed", dir.join(name).display())),
                None => remove_tree(&dir.join(name))
                    .map_err(|e| format!("cannot remove {}: {e}", dir.join(name).display()))?,
            }
        }
        if let Some(name) = was.keys().find(|n| !now.contains_key(*n)) {
            return Err(format!("{} was removed", dir.join(name).display()));
        }
    }
    for kind in ["shm", "sem", "msg"] {
        let objects = std::fs::read_to_string(format!("/proc/sysvipc/{kind}"))
            .map_or(0, |t| t.lines().count().saturating_sub(1));
        if objects > 0 {
            return Err(format!("{objects} SysV IPC {kind} objects were left"));
        }
    }
    Ok(())
}

/// Remove every entry of `dir`, whatever its modes (`dir` itself stays).
pub(crate) fn empty_dir(dir: &Path) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        remove_tree(&e?.path())?;
    }
    Ok(())
}

/// Remove `path` and all below it without following a link (std's `remove_dir_all`:
/// descriptor-relative, so however deep the tree); when a command made directories
/// unreadable (`chmod 0`), they are opened up and the removal tried again.
pub(crate) fn remove_tree(path: &Path) -> std::io::Result<()> {
    let md = path.symlink_metadata()?;
    if !md.is_dir() {
        return std::fs::remove_file(path);
    }
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            open_up(path)?;
            std::fs::remove_dir_all(path)
        }
        r => r,
    }
}

/// Give the owner full access to every directory under `path` (links not followed).
fn open_up(path: &Path) -> std::io::Result<()> {
    let md = path.symlink_metadata()?;
    if !md.is_dir() {
        return Ok(());
    }
    if md.mode() & 0o700 != 0o700 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))?;
    }
    for e in std::fs::read_dir(path)? {
        open_up(&e?.path())?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------
// The client, in traj-run.

/// How a pod's sandbox is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodKind {
    /// bubblewrap, as [`bwrap_mounts`] sets it up (network: `--share-net`).
    Bwrap { network: bool },
    /// Local mode: this `unshare` command line (its argv up to `--`: [`super::ns`]).
    Unshare(Vec<String>),
}

/// What makes two pods interchangeable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodKey {
    pub kind: PodKind,
    /// Where workspaces are made (None: the temp dir).
    pub root: Option<PathBuf>,
    /// The supervisor's executable.
    pub exe: PathBuf,
    /// The limits the supervisor sets on itself ([`Limits::pod_split`]).
    pub limits: Limits,
}

/// A running pod, owned by one task at a time.
pub struct Pod {
    key: PodKey,
    /// Its supervisor's process.
    link: Link,
    /// The workspace on the host (canonical).
    dir: PathBuf,
    /// The pod must not serve another task (an answer was lost, a reset failed).
    broken: bool,
    /// Its supervisor has not yet said it is ready: the pod starts while its task's
    /// first request is in flight, and [`Pod::ready`] waits for the rest.
    starting: bool,
}

/// A supervisor's process and its pipes.
struct Conn {
    child: Child,
    /// Its requests (closed when the pod is dropped).
    to: Option<ChildStdin>,
    from: ChildStdout,
}

/// Where a pod's supervisor process is.
enum Link {
    /// Being started by a spawner thread ([`spawner`]): a worker that leases a new pod
    /// sends its task's first request at once instead of waiting for bwrap's start,
    /// which with hundreds of pods starting together on a few cores is what kept the
    /// last of them from starting (BENCHMARKS.md, bench:run-scale).
    Spawning(crossbeam_channel::Receiver<Result<Conn>>),
    Up(Conn),
    /// It could not be started.
    Down,
}

/// A new pod's supervisor, its workspace `dir` made: what a spawner thread sends back.
type SpawnJob = (PodKey, PathBuf, crossbeam_channel::Sender<Result<Conn>>);

/// The queue of the spawner threads, one per core, started at the first pod and kept
/// for the life of the process: the thread that starts a bwrap pod is its parent for
/// `--die-with-parent`, so it must outlive the pod (a worker thread does, a thread
/// per spawn would not). `None` when no thread could be started.
fn spawner() -> Option<&'static crossbeam_channel::Sender<SpawnJob>> {
    static QUEUE: std::sync::OnceLock<Option<crossbeam_channel::Sender<SpawnJob>>> =
        std::sync::OnceLock::new();
    QUEUE
        .get_or_init(|| {
            let (tx, rx) = crossbeam_channel::unbounded::<SpawnJob>();
            let n = std::thread::available_parallelism().map_or(1, |n| n.get());
            let started = (0..n)
                .map(|i| {
                    let rx = rx.clone();
                    std::thread::Builder::new()
                        .name(format!("pod-spawn-{i}"))
                        .stack_size(256 << 10)
                        .spawn(move || {
                            for (key, dir, back) in rx {
                                let _ = back.send(Pod::spawn(&key, &dir));
                            }
                        })
                })
                .filter(Result::is_ok)
                .count();
            (started > 0).then_some(tx)
        })
        .as_ref()
}

thread_local! {
    /// The pod this worker thread keeps between its tasks.
    static KEPT: RefCell<Option<Pod>> = const { RefCell::new(None) };
}

/// A pod for a new task: the one this thread kept, when it was made the same way, or
/// a new one, still starting ([`Pod::ready`] waits for it; every request does).
pub fn lease(key: &PodKey) -> Result<Pod> {
    let kept = KEPT.try_with(|k| k.borrow_mut().take()).ok().flatten();
    match kept {
        Some(pod) if pod.key == *key => Ok(pod),
        _ => Pod::start(key),
    }
}

/// A task is done with `pod`: reset, it is kept for this thread's next task; a pod
/// that cannot be reset is stopped and its workspace removed.
pub fn give_back(mut pod: Pod) {
    if pod.reset().is_ok() {
        let _ = KEPT.try_with(|k| *k.borrow_mut() = Some(pod));
    }
}

impl Pod {
    fn start(key: &PodKey) -> Result<Pod> {
        let dir = super::config::new_workspace(key.root.as_deref(), "traj-pod-")?.keep();
        let dir = dir.canonicalize()?;
        let (back, answer) = crossbeam_channel::bounded(1);
        let queued = spawner().is_some_and(|q| q.send((key.clone(), dir.clone(), back)).is_ok());
        let link = if queued {
            Link::Spawning(answer)
        } else {
            match Self::spawn(key, &dir) {
                Ok(conn) => Link::Up(conn),
                Err(e) => {
                    let _ = remove_tree(&dir);
                    return Err(e);
                }
            }
        };
        Ok(Pod {
            key: key.clone(),
            link,
            dir,
            broken: false,
            starting: true,
        })
    }

    /// Wait until the supervisor has started (at once for a pod that served a task
    /// before); one that could not start is broken.
    pub fn ready(&mut self) -> Result<()> {
        if !self.starting {
            return Ok(());
        }
        self.starting = false;
        let why = match self.answer(PATIENCE)? {
            Reply::Ready => return Ok(()),
            Reply::Failed { why } => format!("the sandbox's supervisor did not start: {why}"),
            other => format!("the sandbox's supervisor said {other:?} at start"),
        };
        self.broken = true;
        bail!(why)
    }

    fn spawn(key: &PodKey, dir: &Path) -> Result<Conn> {
        let exe = key.exe.display().to_string();
        let (mut cmd, plan) = match &key.kind {
            PodKind::Bwrap { network } => {
                let mut c = Command::new(super::bwrap::program());
                c.args(["--as-pid-1"])
                    .args(bwrap_mounts(*network, dir))
                    .args(["--ro-bind", &exe, EXE_MOUNT])
                    .args(["--chdir", WORKSPACE_MOUNT, "--", EXE_MOUNT]);
                let plan = Plan {
                    wipe: [WORKSPACE_MOUNT, "/tmp", "/dev/shm"]
                        .map(PathBuf::from)
                        .into(),
                    watch: ["/", "/dev"].map(PathBuf::from).into(),
                    limits: key.limits,
                };
                (c, plan)
            }
            PodKind::Unshare(unshare) => {
                let Some((prog, args)) = unshare.split_first() else {
                    bail!("a local pod needs unshare");
                };
                let mut c = Command::new(prog);
                // No current_dir: the supervisor moves to each command's own directory,
                // and a Command without one is started with posix_spawn (no fork of
                // traj-run).
                c.args(args).arg(&exe);
                let plan = Plan {
                    wipe: vec![dir.to_path_buf()],
                    watch: Vec::new(),
                    limits: key.limits,
                };
                (c, plan)
            }
        };
        cmd.arg(SUPERVISOR_ARG)
            .arg(serde_json::to_string(&plan)?)
            .env_clear()
            .env("PATH", SANDBOX_PATH)
            // One malloc arena: the supervisor's address space stays small under the
            // limit it sets on itself.
            .env("MALLOC_ARENA_MAX", "1")
            // A group of its own, as a command's: when the run stops, traj-run kills
            // its children's groups, and the namespace dies with this process.
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = cmd
            .spawn()
            .with_context(|| format!("cannot start a sandbox ({:?})", key.kind))?;
        let to = child.stdin.take().expect("piped");
        let from = child.stdout.take().expect("piped");
        Ok(Conn {
            child,
            to: Some(to),
            from,
        })
    }

    /// The supervisor's process, once started (waiting for its spawner); an error,
    /// and the pod broken, when it could not be.
    fn conn(&mut self) -> Result<&mut Conn> {
        if let Link::Spawning(answer) = &self.link {
            // A spawner that is gone leaves the pod down (stopped, below).
            match answer.recv() {
                Ok(Ok(conn)) => self.link = Link::Up(conn),
                Ok(Err(e)) => {
                    self.link = Link::Down;
                    self.broken = true;
                    return Err(e);
                }
                Err(_) => self.link = Link::Down,
            }
        }
        match &mut self.link {
            Link::Up(conn) => Ok(conn),
            _ => {
                self.broken = true;
                bail!("the task's sandbox has stopped")
            }
        }
    }

    /// The workspace on the host.
    pub fn workspace(&self) -> &Path {
        &self.dir
    }

    /// The next reply, waiting at most `patience`; the pod is broken when none comes.
    fn answer(&mut self, patience: Duration) -> Result<Reply> {
        let got = self
            .conn()
            .and_then(|conn| read_reply(&mut conn.from, patience));
        if got.is_err() {
            self.broken = true;
        }
        got
    }

    /// Run `argv` in the pod (see [`super::exec::execute`]).
    pub fn run(
        &mut self,
        argv: &[&str],
        cwd: &str,
        env: &[(String, String)],
        stdin: Option<&[u8]>,
        timeout: Duration,
        cap: usize,
    ) -> Result<RunOutput> {
        self.ready()?;
        if self.broken {
            bail!("the task's sandbox has stopped");
        }
        let req = Request::Run {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            cwd: cwd.to_string(),
            env: env.to_vec(),
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            cap,
            stdin: stdin.is_some(),
        };
        let to = self.conn()?.to.as_mut().expect("open until dropped");
        let sent = send(to, &req).and_then(|()| stdin.map_or(Ok(()), |d| write_frame(to, d)));
        if let Err(e) = sent {
            self.broken = true;
            return Err(e).context("the task's sandbox has stopped");
        }
        match self.answer(timeout + PATIENCE)? {
            Reply::Ran { out } => Ok(out),
            Reply::Failed { why } => Err(anyhow!(why)),
            other => {
                self.broken = true;
                bail!("the sandbox's supervisor said {other:?}")
            }
        }
    }

    /// Ready the pod for another task (see the module documentation).
    fn reset(&mut self) -> Result<()> {
        self.ready()?;
        if self.broken {
            bail!("broken");
        }
        send(
            self.conn()?.to.as_mut().expect("open until dropped"),
            &Request::Reset,
        )?;
        match self.answer(PATIENCE)? {
            Reply::Clean => Ok(()),
            Reply::Retire { why } => {
                self.broken = true;
                bail!(why)
            }
            other => {
                self.broken = true;
                bail!("the sandbox's supervisor said {other:?}")
            }
        }
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        // Closing its stdin ends the supervisor, and with it the namespace (the
        // kernel kills what is left and waits for it before the sandbox's process
        // ends); a supervisor that does not go is killed.
        let conn = match std::mem::replace(&mut self.link, Link::Down) {
            Link::Spawning(answer) => answer.recv().ok().and_then(Result::ok),
            Link::Up(conn) => Some(conn),
            Link::Down => None,
        };
        if let Some(mut conn) = conn {
            drop(conn.to.take());
            let until = Instant::now() + Duration::from_secs(2);
            loop {
                match conn.child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() >= until => {
                        let _ = conn.child.kill();
                        let _ = conn.child.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
        }
        let _ = remove_tree(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pod whose supervisor ends before it is ready: it is leased at once (it starts
    /// in the background), and then `ready` and every request say it did not start, and
    /// it is not kept.
    #[test]
    fn a_pod_that_cannot_start_fails_when_first_used() {
        let key = local_key(&["/bin/sh", "-c", "exit 3"], None);
        let mut pod = lease(&key).expect("the spawn itself succeeds");
        fails_when_used(&mut pod, "supervisor ended");
        assert!(pod.reset().is_err(), "a broken pod is not kept");
    }

    /// A local pod's key whose `unshare` command line is `argv`.
    fn local_key(argv: &[&str], root: Option<PathBuf>) -> PodKey {
        PodKey {
            kind: PodKind::Unshare(argv.iter().map(|a| a.to_string()).collect()),
            root,
            exe: PathBuf::from("/bin/true"),
            limits: Limits::NONE,
        }
    }

    /// `ready` says `why`, and a command then finds the pod stopped.
    fn fails_when_used(pod: &mut Pod, why: &str) {
        let e = pod.ready().unwrap_err();
        assert!(format!("{e:#}").contains(why), "{e:#}");
        let e = pod
            .run(&["true"], "/", &[], None, PATIENCE, 100)
            .unwrap_err();
        assert!(format!("{e:#}").contains("stopped"), "{e:#}");
    }

    /// A pod whose sandbox cannot even be spawned (its program is missing): the lease
    /// still returns at once, the spawner's error comes with the first use, and the
    /// workspace made for it goes when it is dropped, as it does when one is dropped
    /// before it was ever used.
    #[test]
    fn a_pod_that_cannot_be_spawned_fails_when_first_used_and_leaves_nothing() {
        let root = tempfile::tempdir().unwrap();
        let key = local_key(
            &["/nonexistent/traj-test-unshare"],
            Some(root.path().to_path_buf()),
        );
        let left = || std::fs::read_dir(root.path()).unwrap().count();
        let mut pod = lease(&key).expect("the lease does not wait for the spawn");
        assert_eq!(left(), 1, "its workspace is made at once");
        fails_when_used(&mut pod, "cannot start a sandbox");
        drop(pod);
        assert_eq!(left(), 0);
        drop(lease(&key).unwrap());
        assert_eq!(
            left(),
            0,
            "a pod dropped while it is spawned leaves nothing"
        );
    }
}

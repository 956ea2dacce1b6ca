//! How many one-command tool calls per second this machine can run, without traj-run's
//! agents or any model: the ceiling of traj-run's scenario with one terminal call per
//! prompt (`scripts/bench-run.sh` prints it beside traj-run's figure).
//!
//! ```sh
//! cargo run --release --example sandbox-ceiling -- MODE CALLS THREADS [WAIT_MS]
//! # MODE: none (no call: the waits alone), bare (the command as a plain child:
//! # fork/exec alone), local, bwrap (traj's sandbox made for the task: a new
//! # workspace, the call, the task-end clean-up), local-pod, bwrap-pod (the sandbox
//! # each worker keeps between its tasks, as traj-run does by default: the call, then
//! # the task-end reset), loop-bwrap (the floor: the exact command line traj's bwrap
//! # sandbox spawns for the call, program, arguments, environment and folder, built
//! # once and then spawned CALLS times by a bare loop, none of traj's code between).
//! # Prints calls per second on stdout (with WAIT_MS, also the seconds taken, on stderr).
//! # WAIT_MS: a model's pace: each call has a wait before and after it, as a prompt
//! # has its two replies (the sandbox is made, and a pod leased, before the first
//! # wait, as traj-run does at a task's start); the figure is then prompts per second.
//! ```

// A measuring tool: its one figure goes to stdout.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use traj::toolbox::sandbox::Sandbox;
use traj::toolbox::{Backend, SandboxConfig};

const SCRIPT: &str = "echo Terminal task 1 | wc -c";

/// `call` between two waits of `wait`: a prompt's two replies around its tool call.
fn paced(wait: Duration, call: impl FnOnce()) {
    std::thread::sleep(wait);
    call();
    std::thread::sleep(wait);
}

fn one_call(mode: &str, cfg: &SandboxConfig, wait: Duration) {
    match mode {
        "none" => paced(wait, || {}),
        "bare" => paced(wait, || {
            let out = Command::new("/bin/sh")
                .args(["-c", SCRIPT])
                .stdin(Stdio::null())
                .output()
                .expect("sh runs");
            assert!(out.status.success());
        }),
        _ => {
            // Made (a pod leased) before the first wait, as traj-run does at a task's start.
            let mut s = Sandbox::new(cfg, None, None).expect("sandbox");
            paced(wait, || {
                let out = s.run_shell(SCRIPT, None, None).expect("call");
                assert_eq!(out.exit_code, 0, "{}", out.output);
            });
        }
    }
}

fn main() {
    // The supervisor of the kept sandboxes is this program (see toolbox::pod).
    if let Some(code) = traj::toolbox::pod::serve_if_supervisor() {
        std::process::exit(if code == std::process::ExitCode::SUCCESS {
            0
        } else {
            1
        });
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mode, calls, threads, wait) = match &args[..] {
        [m, c, t] => (m, c, t, None),
        [m, c, t, w] => (m, c, t, Some(w)),
        _ => {
            eprintln!(
                "usage: sandbox-ceiling none|bare|local|bwrap|local-pod|bwrap-pod|loop-bwrap CALLS THREADS [WAIT_MS]"
            );
            std::process::exit(2);
        }
    };
    let print_secs = wait.is_some();
    let wait = Duration::from_millis(wait.map_or(0, |w| w.parse().expect("WAIT_MS is a number")));
    let calls: usize = calls.parse().expect("CALLS is a number");
    let threads: usize = threads.parse().expect("THREADS is a number");
    let cfg = SandboxConfig {
        backend: match mode.as_str() {
            "bwrap" | "bwrap-pod" | "loop-bwrap" => Backend::Bwrap,
            _ => Backend::Local,
        },
        pod_exe: mode
            .ends_with("-pod")
            .then(|| std::env::current_exe().expect("its own path")),
        ..SandboxConfig::default()
    };
    // The floor: one sandbox's command line for the call, spawned again and again.
    let exact = (mode == "loop-bwrap").then(|| {
        let mut sandbox = Sandbox::new(&cfg, None, None).expect("sandbox");
        let c = sandbox
            .command(&["/bin/sh", "-c", &format!("exec 2>&1\n{SCRIPT}")])
            .expect("its command");
        let argv: Vec<_> = c.get_args().map(|a| a.to_owned()).collect();
        let env: Vec<_> = c
            .get_envs()
            .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
            .collect();
        let cwd = c.get_current_dir().expect("a folder").to_owned();
        (sandbox, c.get_program().to_owned(), argv, env, cwd)
    });
    let one = |mode: &str| match &exact {
        Some((_, program, argv, env, cwd)) => paced(wait, || {
            let out = Command::new(program)
                .args(argv)
                .env_clear()
                .envs(env.iter().map(|(k, v)| (k, v)))
                .current_dir(cwd)
                .stdin(Stdio::null())
                .output()
                .expect("bwrap runs");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }),
        None => one_call(mode, &cfg, wait),
    };
    let left = AtomicUsize::new(calls);
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                while left
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                    .is_ok()
                {
                    one(mode);
                }
            });
        }
    });
    let secs = start.elapsed().as_secs_f64();
    println!("{:.0}", calls as f64 / secs);
    if print_secs {
        eprintln!("{secs:.3} s");
    }
}
